#!/usr/bin/env python3
"""The agent loop ward is built for: a model writes code, ward runs it in a
sandbox, and the error — its name, message, traceback and ward's hint — goes
back to the model, which writes a corrected version. Repeat until it works
or the attempts run out.

The "model" here is a stub that returns scripted corrections, so the
example runs without an LLM; replace `model()` with a call to yours.

    WARD_URL=unix:///run/ward/ward.sock WARD_API_KEY=wk_... python3 examples/agent_reflection.py

Needs the SDK (`pip install ./clients/python`) and a key with the
sessions and files scopes.
"""
import sys

import ward

TASK = "Print the mean of the 'price' column of data.csv, rounded to 2 places."
DATA = "item,price\napple,1.20\npear,0.80\nfig,2.50\n"

# What a model might write, attempt after attempt: each fixes the error the
# previous one got (the hints say how).
_ATTEMPTS = [
    # 1: IPython is not in the sandbox; ward's hint says display() is a builtin
    "from IPython.display import display\n"
    "import csv\n"
    "rows = list(csv.DictReader(open('data.csv')))\n"
    "display(rows)\n",
    # 2: a wrong column name (KeyError)
    "import csv\n"
    "rows = list(csv.DictReader(open('data.csv')))\n"
    "print(round(sum(float(r['Price']) for r in rows) / len(rows), 2))\n",
    # 3: builds a 400 MB string: over the memory limit, a limit rather than a bug
    "data = open('data.csv').read() * 12_000_000\n",
    # 4: right
    "import csv\n"
    "rows = list(csv.DictReader(open('data.csv')))\n"
    "print(round(sum(float(r['price']) for r in rows) / len(rows), 2))\n",
]


def model(task, feedback, attempt):
    """Stands in for an LLM: gets the task and what went wrong last time,
    returns code. A real one would put `feedback` in its prompt."""
    if feedback:
        print("  model is told: " + feedback.replace("\n", "\n    "))
    return _ATTEMPTS[min(attempt, len(_ATTEMPTS) - 1)]


def feedback_of(error):
    """What the model needs to fix its code: the error, the last lines of
    its traceback, and ward's hint when there is one."""
    text = f"{error.name}: {error.value}"
    if error.traceback_lines:
        text += "\n" + "\n".join(error.traceback_lines[-3:])
    if error.hint:
        text += f"\nhint: {error.hint}"
    return text


def solve(task, max_attempts=6):
    # a session: the data file stays between attempts; ended on exit
    with ward.Sandbox(policy={"limits": {"memory": "256M"}}, ttl=300) as sbx:
        sbx.files.write("data.csv", DATA)
        feedback = None
        for attempt in range(max_attempts):
            code = model(task, feedback, attempt)
            print(f"attempt {attempt + 1}:")
            try:
                ex = sbx.run_code(code, timeout=10)
            except ward.LimitError as e:
                # a limit ended it (memory, time, output...): the hint says what
                feedback = feedback_of(e.execution.error) if e.execution and e.execution.error \
                    else str(e)
                print(f"  {type(e).__name__}: limit {e.limit}")
                continue
            if ex.error is None:
                answer = ex.stdout.strip()
                print(f"  ok: {answer}")
                return answer
            print(f"  {ex.error.name}: {ex.error.value}")
            feedback = feedback_of(ex.error)
    return None


if __name__ == "__main__":
    answer = solve(TASK)
    if answer is None:
        print("no working code within the attempts")
        sys.exit(1)
    print(f"answer: {answer}")
