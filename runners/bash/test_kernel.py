"""Tests of the bash kernel, driven over its JSON-lines protocol (runners/PROTOCOL.md).

Run: /usr/bin/python3 -m unittest discover -s runners/bash -p 'test_*.py'
"""

import json
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

KERNEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernel.py")
TERMINAL = {"execute_reply", "call_reply", "shutdown_reply"}


class Kernel:
    def __init__(self, config=None):
        self.cwd = tempfile.mkdtemp(prefix="ward-bash-test-")
        env = dict(os.environ, WARD_KERNEL_CONFIG=json.dumps(config or {}))
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", "-I", "-u", KERNEL],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=self.cwd,
            env=env,
        )
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)
        self.buf = b""
        self.pending = []
        self.raw = []
        self.n = 0

    def _read_messages(self, timeout):
        for _ in self.sel.select(timeout):
            data = os.read(self.proc.stdout.fileno(), 65536)
            if not data:
                raise EOFError("kernel closed its stdout")
            self.buf += data
            *lines, self.buf = self.buf.split(b"\n")
            for line in lines:
                try:
                    self.pending.append(json.loads(line))
                except ValueError:
                    self.raw.append(line)

    def wait_for(self, pred, timeout=10):
        deadline = time.time() + timeout
        while True:
            for i, m in enumerate(self.pending):
                if pred(m):
                    return self.pending.pop(i)
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError(f"no matching message; have {self.pending}")
            self._read_messages(left)

    def send_line(self, line):
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, msg_type, content, timeout=10):
        self.n += 1
        rid = f"r{self.n}"
        self.send_line(json.dumps({"msg_type": msg_type, "id": rid, "content": content}))
        out = []
        while True:
            m = self.wait_for(lambda x: x.get("parent_id") == rid, timeout)
            out.append(m)
            if m["msg_type"] in TERMINAL:
                return out

    def execute(self, code, stop_on_error=False, timeout=10):
        return self.request("execute_request", {"code": code, "stop_on_error": stop_on_error}, timeout)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            f.close()
        self.sel.close()
        shutil.rmtree(self.cwd, ignore_errors=True)


def of(msgs, kind):
    return [m for m in msgs if m["msg_type"] == kind]


def text(msgs, name="stdout"):
    return "".join(m["content"]["text"] for m in of(msgs, "stream") if m["content"]["name"] == name)


class BashKernelTest(unittest.TestCase):
    config = None

    def setUp(self):
        self.k = Kernel(self.config)
        self.addCleanup(self.k.close)
        st = self.k.wait_for(lambda m: m["msg_type"] == "status")
        self.assertEqual(st["content"]["execution_state"], "idle")
        self.assertEqual(st["content"]["language"], "bash")
        self.assertTrue(st["content"]["language_version"].startswith(("4", "5")))

    def test_cwd_variables_functions_persist(self):
        r = self.k.execute('mkdir -p sub && cd sub\nX="a b"\ngreet() { echo "hello $1"; }\nalias hi="echo hi-alias"')
        self.assertEqual(r[-1]["content"]["status"], "ok")
        r = self.k.execute('basename "$PWD"; echo "$X"; greet you; hi')
        self.assertEqual(text(r), "sub\na b\nhello you\nhi-alias\n")
        self.assertEqual(r[-1]["content"]["execution_count"], 2)
        self.assertEqual(r[-1]["msg_type"], "execute_reply")

    def test_streams_and_status(self):
        r = self.k.execute("echo out; echo err >&2; printf 'no newline'")
        self.assertEqual(text(r), "out\nno newline")
        self.assertEqual(text(r, "stderr"), "err\n")
        self.assertEqual(r[-1]["content"]["status"], "ok")
        r = self.k.execute("echo before; (exit 3)")
        err = of(r, "error")[0]["content"]
        self.assertEqual(err, {"ename": "ExitStatus", "evalue": "exit status 3", "traceback": []})
        self.assertEqual(r[-1]["content"]["status"], "error")
        self.assertEqual(text(r), "before\n")
        # the status is the last command's, as in a script
        r = self.k.execute("false; true")
        self.assertEqual(r[-1]["content"]["status"], "ok")
        r = self.k.execute("return 5")
        self.assertEqual(of(r, "error")[0]["content"]["evalue"], "exit status 5")

    def test_command_not_found_hint(self):
        r = self.k.execute("nosuchcommand-xyz --flag")
        err = of(r, "error")[0]["content"]
        self.assertEqual(err["evalue"], "exit status 127")
        self.assertTrue(err["hint"].startswith("command 'nosuchcommand-xyz' is not installed in this sandbox's image"), err)
        self.assertIn("<cell 1>: line 1: nosuchcommand-xyz: command not found", text(r, "stderr"))
        r = self.k.execute("bsah -c true")
        self.assertIn("close names: bash", of(r, "error")[0]["content"]["hint"])

    def test_stdin_reading_cell_does_not_hang(self):
        r = self.k.execute("cat; read -r line; echo \"read: $?\"; head -c 10", timeout=5)
        self.assertEqual(text(r), "read: 1\n")
        r = self.k.execute("echo still-here")
        self.assertEqual(text(r), "still-here\n")

    def test_cell_cannot_break_the_sentinel(self):
        r = self.k.execute("printf() { echo fake; }; exec 62>/dev/null; echo ok")
        self.assertEqual(r[-1]["content"]["status"], "ok")
        r = self.k.execute("echo next")
        self.assertEqual(text(r), "next\n")

    def test_exit_restarts_the_shell(self):
        self.k.execute("Y=1; cd /")
        r = self.k.execute("echo bye; exit 4")
        self.assertEqual(text(r), "bye\n")
        err = of(r, "error")[0]["content"]
        self.assertEqual(err["ename"], "ShellExited")
        self.assertIn("exited with status 4", err["evalue"])
        self.assertIn("reset", err["evalue"])
        self.assertIn("return", err["hint"])
        r = self.k.execute('echo "Y=${Y:-unset}"; pwd')
        self.assertEqual(text(r), f"Y=unset\n{os.path.realpath(self.k.cwd)}\n")
        r = self.k.execute("set -e; false; echo unreachable")
        err = of(r, "error")[0]["content"]
        self.assertEqual(err["ename"], "ShellExited")
        self.assertIn("set -e", err["hint"])
        self.assertEqual(text(self.k.execute("echo fine")), "fine\n")

    def test_background_output_and_wait(self):
        r = self.k.execute("(sleep 0.1; echo late) & wait; echo done")
        self.assertEqual(text(r), "late\ndone\n")

    def test_call_unsupported_and_protocol_errors(self):
        r = self.k.request("call_request", {"code": "", "function": "f", "args": {}})
        self.assertEqual(r[-1]["content"]["status"], "error")
        self.assertEqual(r[-1]["content"]["error"]["ename"], "Unsupported")
        self.k.send_line("not json at all")
        m = self.k.wait_for(lambda x: x["msg_type"] == "error")
        self.assertEqual(m["content"]["ename"], "ProtocolError")
        self.k.send_line('{"msg_type": "what_request", "id": "w1", "content": {}}')
        m = self.k.wait_for(lambda x: x["msg_type"] == "error")
        self.assertEqual(m.get("parent_id"), "w1")
        self.assertEqual(text(self.k.execute("echo ok")), "ok\n")

    def test_stop_on_error(self):
        r = self.k.execute("false", stop_on_error=True)
        self.assertEqual(r[-1]["content"]["status"], "error")
        r = self.k.execute("echo skipped", stop_on_error=True)
        self.assertEqual([m["msg_type"] for m in r], ["execute_reply"])
        self.assertEqual(r[-1]["content"]["status"], "aborted")
        r = self.k.execute("echo runs", stop_on_error=False)
        self.assertEqual(text(r), "runs\n")
        r = self.k.execute("echo again", stop_on_error=True)
        self.assertEqual(text(r), "again\n")

    def test_sigint_interrupts_the_cell(self):
        self.k.execute("Z=kept")
        for code in ("sleep 10; echo not-reached", "while :; do :; done"):
            self.k.n += 1
            rid = f"r{self.k.n}"
            self.k.send_line(json.dumps({"msg_type": "execute_request", "id": rid, "content": {"code": code, "stop_on_error": False}}))
            time.sleep(0.3)
            self.k.proc.send_signal(signal.SIGINT)
            reply = self.k.wait_for(lambda m: m.get("parent_id") == rid and m["msg_type"] == "execute_reply", 10)
            err = self.k.wait_for(lambda m: m.get("parent_id") == rid and m["msg_type"] == "error")
            self.assertEqual(reply["content"]["status"], "error")
            self.assertEqual(err["content"]["ename"], "Interrupted")
        # bash 5.2 leaves a builtin loop after an interrupted command running: the kernel
        # then kills the shell after its grace period (and says that state was reset)
        self.k.proc.send_signal(signal.SIGINT)  # between cells: ignored
        r = self.k.execute("sleep 0.2 & wait; echo ok")
        self.assertEqual(text(r), "ok\n")

    def test_sigint_keeps_state(self):
        self.k.execute("Z=kept")
        self.k.send_line(json.dumps({"msg_type": "execute_request", "id": "s1", "content": {"code": "sleep 10", "stop_on_error": False}}))
        time.sleep(0.3)
        self.k.proc.send_signal(signal.SIGINT)
        err = self.k.wait_for(lambda m: m.get("parent_id") == "s1" and m["msg_type"] == "error")
        self.assertEqual(err["content"], {"ename": "Interrupted", "evalue": "the cell was interrupted (SIGINT); exit status 130", "traceback": []})
        self.assertEqual(text(self.k.execute('echo "$Z"')), "kept\n")

    def test_sigint_past_the_deadline_is_a_timeout(self):
        msg = ("the sandbox's wall-time limit of 250 ms was reached; "
               "make the code faster or ask for a longer timeout")
        for deadline, ename in ((time.monotonic() + 60, "Interrupted"), (time.monotonic(), "TimeoutError")):
            self.k.n += 1
            rid = f"r{self.k.n}"
            self.k.send_line(json.dumps({"msg_type": "execute_request", "id": rid, "content": {
                "code": "sleep 10", "stop_on_error": False, "deadline": deadline, "timeout_ms": 250}}))
            time.sleep(0.3)
            self.k.proc.send_signal(signal.SIGINT)
            self.k.wait_for(lambda m: m.get("parent_id") == rid and m["msg_type"] == "execute_reply", 10)
            err = self.k.wait_for(lambda m: m.get("parent_id") == rid and m["msg_type"] == "error")["content"]
            self.assertEqual(err["ename"], ename)
        self.assertEqual(err, {"ename": "TimeoutError", "evalue": msg, "hint": msg, "traceback": ["TimeoutError: " + msg]})

    def test_shutdown(self):
        r = self.k.request("shutdown_request", {})
        self.assertEqual(r[-1]["msg_type"], "shutdown_reply")
        self.assertEqual(self.k.proc.wait(5), 0)

    def test_eof_exits_zero(self):
        self.k.proc.stdin.close()
        self.assertEqual(self.k.proc.wait(5), 0)
        self.assertEqual(self.k.raw, [])


class OutputCapTest(unittest.TestCase):
    def test_output_cap(self):
        k = Kernel({"output_limit": 100})
        self.addCleanup(k.close)
        k.wait_for(lambda m: m["msg_type"] == "status")
        r = k.execute("seq 1 10000; echo tail >&2")
        out = text(r) + text(r, "stderr")
        self.assertEqual(len(out.encode()), 100)
        self.assertTrue(r[-1]["content"]["stdout_truncated"])
        self.assertTrue(r[-1]["content"]["stderr_truncated"])
        # the budget is the kernel's whole life
        r = k.execute("echo more")
        self.assertEqual(text(r), "")
        self.assertTrue(r[-1]["content"]["stdout_truncated"])
        r = k.execute("true")
        self.assertFalse(r[-1]["content"]["stdout_truncated"])


class HintTest(unittest.TestCase):
    def test_network_and_readonly_hints(self):
        k = Kernel({"network": "none", "writable": ["/workspace", "/tmp"]})
        self.addCleanup(k.close)
        k.wait_for(lambda m: m["msg_type"] == "status")
        r = k.execute("echo 'curl: (6) Could not resolve host: example.com' >&2; exit_status() { return 6; }; exit_status")
        self.assertIn("network is disabled", of(r, "error")[0]["content"]["hint"])
        r = k.execute("echo \"touch: cannot touch '/usr/x': Read-only file system\" >&2; false")
        self.assertEqual(of(r, "error")[0]["content"]["hint"], "'/usr/x' is read-only in this sandbox; write under /workspace or /tmp")
        r = k.execute("echo \"touch: cannot touch '/tmp/x': Permission denied\" >&2; false")
        self.assertNotIn("hint", of(r, "error")[0]["content"])


if __name__ == "__main__":
    unittest.main()
