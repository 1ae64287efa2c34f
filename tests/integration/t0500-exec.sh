#!/bin/bash
# ward exec / ward call: language kernels end to end, in real sandboxes.
. "$(dirname "$0")/../lib.sh"

ex() { "$WARD" exec --json "$@" > v.json; }
field() { ward_json "$1" < v.json; }
pyfield() { python3 -c "import json,sys; v=json.load(open('v.json')); print($1)"; }

# --- python ---
test_expect_success 'python: variables persist across cells; last expression is the result' '
	ex --lang python -c "x = 40" -c "y = x + 2" -c "y" &&
	expect_eq "$(field status)" ok && expect_eq "$(pyfield "v[\"results\"][0][\"text/plain\"]")" 42 &&
	expect_eq "$(pyfield "len(v[\"cells\"])")" 3
'
test_expect_success 'python: stdout and stderr keep their order, subprocess output included' '
	ex --lang python -c "import sys, os
print(\"a\"); print(\"b\", file=sys.stderr); sys.stdout.flush(); os.system(\"echo c\")" &&
	expect_eq "$(pyfield "[(o[\"name\"], o[\"text\"].strip()) for o in v[\"cells\"][0][\"outputs\"] if o[\"type\"] == \"stream\"]")" \
		"[('"'"'stdout'"'"', '"'"'a'"'"'), ('"'"'stderr'"'"', '"'"'b'"'"'), ('"'"'stdout'"'"', '"'"'c'"'"')]"
'
test_expect_success 'python: an exception is an error object with the cell frame and no kernel frames' '
	ex --lang python -c "def f():
    return 1 / 0
f()"; rc=$?
	expect_eq $rc 1 && expect_eq "$(field status)" error && expect_eq "$(field error.name)" ZeroDivisionError &&
	tb=$(field error.traceback) && expect_contains "$tb" "cell" && ! expect_contains "$tb" "kernel.py" >/dev/null
'
test_expect_success 'python: later cells are not run after an error (stop on error)' '
	ex --lang python -c "raise ValueError(1)" -c "print(\"ran\")"
	expect_eq "$(pyfield "v[\"cells\"][1][\"status\"]")" aborted && expect_eq "$(field stdout)" ""
'
test_expect_success 'python: a missing module gets a hint with close names' '
	ex --lang python -c "import nump"
	expect_eq "$(field error.name)" ModuleNotFoundError && expect_contains "$(field error.hint)" numpy
'
test_expect_success 'python: a network failure gets the network-disabled hint' '
	ex --lang python -c "import socket; socket.create_connection((\"1.1.1.1\", 80), timeout=2)"
	expect_contains "$(field error.hint)" "network"
'
test_expect_success 'python: a write to a read-only place says where writing is allowed' '
	ex --lang python -c "open(\"/usr/x\", \"w\")"
	h=$(field error.hint) && expect_contains "$h" "/workspace" && expect_contains "$h" read-only
'
test_expect_success 'python: the memory limit is named with its value' '
	ex --lang python --memory 64M -c "x = bytearray(512 << 20)"
	s=$(field status) && h=$(field error.hint) &&
	{ [ "$s" = memory_limit ] || [ "$s" = error ]; } && expect_contains "$h" "64"
'
test_expect_success 'python: the wall-time limit is reported with its value' '
	ex --lang python --timeout 2 -c "import time; time.sleep(30)"
	expect_eq "$(field status)" timeout && expect_eq "$(field error.name)" TimeoutError &&
	expect_contains "$(field error.hint)" 2000
'
test_expect_success 'python: output past the cap is truncated and said so' '
	ex --lang python --output-limit 4K -c "print(\"x\" * 100000)"
	expect_eq "$(field status)" output_limit && expect_eq "$(field stdout_truncated)" true &&
	expect_contains "$(field error.hint)" "truncated at 4096 bytes"
'
test_expect_success PYTHON 'python: a matplotlib figure comes back as a PNG that decodes' '
	ex --lang python -c "import matplotlib.pyplot as plt; plt.plot([1, 3, 2])" &&
	pyfield "__import__(\"base64\").b64decode([r for r in v[\"results\"] if \"image/png\" in r][0][\"image/png\"])[:8] == b\"\\x89PNG\\r\\n\\x1a\\n\"" > ok.txt &&
	expect_eq "$(cat ok.txt)" True
'
test_expect_success PYTHON 'python: a DataFrame gives text/html' '
	ex --lang python -c "import pandas as pd; pd.DataFrame({\"a\": [1, 2]})" &&
	expect_contains "$(pyfield "v[\"results\"][0][\"text/html\"]")" "<table"
'
test_expect_success 'python: top-level await works' '
	ex --lang python -c "import asyncio
await asyncio.sleep(0.01)
21 * 2" && expect_eq "$(pyfield "v[\"results\"][0][\"text/plain\"]")" 42
'
test_expect_success 'python: cells from a file and from stdin' '
	echo "a = 5" > c1.py && echo "a * 3" | "$WARD" exec --json --lang python -f c1.py - > v.json &&
	expect_eq "$(pyfield "v[\"results\"][0][\"text/plain\"]")" 15
'
test_expect_success 'python: terminal output for a person' '
	out=$("$WARD" exec --lang python -c "print(\"hi\")" -c "6 * 7" 2>&1) &&
	expect_eq "$out" "hi
42"
'
# --- files and artifacts ---
test_expect_success 'artifacts: new files are listed with size, sha256 and MIME type, and copied out' '
	echo "1,2" > in.csv &&
	ex --lang python --file "$PWD/in.csv:data/in.csv" --artifacts "$PWD/out" -c "
import shutil
shutil.copy(\"data/in.csv\", \"copy.csv\")
open(\"report.txt\", \"w\").write(\"done\")" &&
	expect_eq "$(pyfield "sorted(a[\"path\"] for a in v[\"artifacts\"])")" "['"'"'copy.csv'"'"', '"'"'report.txt'"'"']" &&
	expect_eq "$(cat out/report.txt)" done &&
	expect_eq "$(pyfield "[a[\"sha256\"] for a in v[\"artifacts\"] if a[\"path\"] == \"report.txt\"][0]")" \
		"$(printf done | sha256sum | cut -d" " -f1)" &&
	expect_eq "$(pyfield "[a[\"mime_type\"] for a in v[\"artifacts\"] if a[\"path\"] == \"copy.csv\"][0]")" text/csv
'
test_expect_success 'artifacts: a symlink to /etc/passwd is never copied as its target' '
	ex --lang python --artifacts "$PWD/out2" -c "import os; os.symlink(\"/etc/passwd\", \"pw\"); os.symlink(\"/etc/shadow\", \"sh\")" &&
	test ! -e out2/pw && test ! -e out2/sh &&
	expect_contains "$(field artifacts_skipped)" "symbolic link"
'
test_expect_success 'artifacts: an oversized file is listed, not copied, and reported' '
	ex --lang python --artifacts "$PWD/out3" -c "open(\"big.bin\", \"wb\").write(b\"\\0\" * (20 << 20))" &&
	expect_eq "$(pyfield "v[\"artifacts\"][0][\"copied\"]")" False && test ! -e out3/big.bin &&
	expect_contains "$(field artifacts_skipped)" "per-file cap"
'
test_expect_success 'artifacts: a name that is not UTF-8 is listed escaped and copied under its own bytes' '
	ex --lang python --artifacts "$PWD/out4" -c "import os
open(b\"caf\\xe9.txt\", \"w\").write(\"x\")
os.symlink(\"/etc/passwd\", b\"l\\xff\")" &&
	expect_eq "$(pyfield "[(a[\"path\"], a.get(\"path_escaped\"), a[\"copied\"]) for a in v[\"artifacts\"]] == [(\"caf\\\\xe9.txt\", True, True)]")" True &&
	expect_eq "$(pyfield "[(a[\"path\"], a.get(\"path_escaped\")) for a in v[\"artifacts_skipped\"]] == [(\"l\\\\xff\", True)]")" True &&
	expect_eq "$(cat "out4/$(printf "caf\\351.txt")")" x && test ! -e "out4/$(printf "l\\377")"
'
# --- call mode ---
cat > "$TEST_TMP/tool.py" <<'PY'
class MyTool:
    def run(self, numbers):
        return {"sum": sum(numbers), "mean": sum(numbers) / len(numbers)}

async def later(x, y=1):
    return [x, y]

def bad():
    return object()
PY
test_expect_success 'call: Class.method with JSON arguments returns JSON' '
	"$WARD" call --json --lang python -f tool.py --function MyTool.run --args "{\"numbers\":[10,20,30]}" > v.json &&
	expect_eq "$(field value)" "{\"sum\": 60, \"mean\": 20.0}"
'
test_expect_success 'call: an async function is awaited; positional arguments work' '
	"$WARD" call --json --lang python -f tool.py --function later --args "[7]" > v.json &&
	expect_eq "$(field value)" "[7, 1]"
'
test_expect_success 'call: a missing target, bad arguments and an unserialisable value are typed errors' '
	"$WARD" call --json --lang python -f tool.py --function nope > v.json; a=$(field error.name)
	"$WARD" call --json --lang python -f tool.py --function MyTool.run --args "{\"wrong\": 1}" > v.json; b=$(field error.name)
	"$WARD" call --json --lang python -f tool.py --function bad > v.json; c=$(field error.name)
	expect_eq "$a $b $c" "FunctionNotFound ArgumentError SerializationError"
'
# --- a NUL byte is output like any other: text holding U+0000 ---
# (the kernel's protocol line must never come back as the program's stdout)
nul_ok() {
	expect_eq "$(field status)" ok &&
	expect_eq "$(pyfield "v[\"stdout\"] == \"a\\x00b\\n\" and [o[\"text\"] for o in v[\"cells\"][0][\"outputs\"]] == [v[\"stdout\"]]")" True &&
	grep -qF "\"stdout\":\"a\\u0000b\\n\"" v.json
}
test_expect_success 'python: a NUL byte in the output comes back as U+0000' '
	ex --lang python -c "print(\"a\\0b\")" && nul_ok
'
test_expect_success NODE 'node: a NUL byte in the output comes back as U+0000' '
	ex --lang node -c "console.log(\"a\\0b\")" && nul_ok
'
test_expect_success 'bash: a NUL byte in the output comes back as U+0000' '
	ex --lang bash -c "printf \"a\\0b\\n\"" && nul_ok
'
test_expect_success 'call: a returned string and printed text with a NUL byte come back whole' '
	printf "def f():\n    print(\"x\\\\0y\")\n    return \"a\\\\0b\"\n" > nul.py &&
	"$WARD" call --json --lang python -f nul.py --function f > v.json &&
	expect_eq "$(field status)" ok &&
	expect_eq "$(pyfield "v[\"value\"] == \"a\\x00b\" and v[\"stdout\"] == \"x\\x00y\\n\"")" True
'
test_expect_success 'a line on the protocol channel that is not a message is a KernelProtocolError, not stdout' '
	ex --lang python -c "import gc, os
from _ward_kernel.streams import Channel
os.write([o for o in gc.get_objects() if isinstance(o, Channel)][0].proto, b\"garbage\\n\")
print(\"after\")"; rc=$?
	expect_eq $rc 1 && expect_eq "$(field status)" error &&
	expect_eq "$(field error.name)" KernelProtocolError &&
	expect_contains "$(field error.value)" "python kernel sent a line that is not a protocol message" &&
	expect_eq "$(field stdout)" after && ! grep -q garbage v.json
'
# --- lint (advisory) ---
cat > "$TEST_TMP/lint.json" <<'JS'
{"lint": {"deny_imports": ["subprocess"], "deny_calls": ["os.system", "eval"]}}
JS
test_expect_success 'lint: a denied import is policy_violation with line and column' '
	ex --lang python --policy lint.json -c "x = 1
import subprocess"; rc=$?
	expect_eq $rc 3 && expect_eq "$(field status)" policy_violation &&
	expect_eq "$(field policy_violation.line)" 2
'
test_expect_success 'lint: a bypass is not caught, and is still contained by the kernel layers' '
	ex --lang python --policy lint.json -c "getattr(__import__(\"o\" + \"s\"), \"sys\" + \"tem\")(\"cat /etc/shadow; touch /usr/pwned\")" &&
	expect_eq "$(field status)" ok && expect_contains "$(field stderr)" "No such file" &&
	test ! -e /usr/pwned
'
# --- node ---
test_expect_success NODE 'node: variables persist; last expression value; console streams' '
	ex --lang node -c "var a = 20; const b = 1; console.log(\"hi\")" -c "a * 2 + b" &&
	expect_eq "$(pyfield "v[\"results\"][0][\"text/plain\"]")" 41 && expect_eq "$(field stdout)" "hi"
'
test_expect_success NODE 'node: an exception is an error object with its stack' '
	ex --lang node -c "function f() { throw new TypeError(\"boom\") }
f()"
	expect_eq "$(field error.name)" TypeError && expect_eq "$(field error.value)" boom
'
test_expect_success NODE 'node: top-level await' '
	ex --lang node -c "await new Promise(r => setTimeout(r, 10)); 6 * 7" &&
	expect_eq "$(pyfield "v[\"results\"][0][\"text/plain\"]")" 42
'
# --- bash ---
test_expect_success 'bash: cwd and variables persist across cells' '
	ex --lang bash -c "mkdir -p d && cd d && X=5" -c "pwd; echo \$X" &&
	expect_eq "$(field stdout)" "/workspace/d
5"
'
test_expect_success 'bash: a non-zero status is an error' '
	ex --lang bash -c "false"; rc=$?
	expect_eq $rc 1 && expect_eq "$(field error.name)" ExitStatus
'
test_expect_success 'bash: command not found gets a hint' '
	ex --lang bash -c "nosuchcommand-ward"
	expect_contains "$(field error.hint)" nosuchcommand-ward
'
test_expect_success 'exec: bad input gets clear errors' '
	out=$("$WARD" exec --lang cobol -c 1 2>&1); rc=$?
	expect_eq $rc 2 && expect_contains "$out" "--lang: expected python, node or bash" &&
	out=$("$WARD" exec --lang python 2>&1); expect_contains "$out" "no code given" &&
	out=$("$WARD" call --lang python -f tool.py --function x --args "{bad" 2>&1); expect_contains "$out" "--args"
'
test_expect_success 'a kernel whose sandbox could not be set up says why in the error (SetupError, the layer and its message)' '
	out=$("$WARD" exec --lang python --json --workdir /workspace/no/such -c 1) ; rc=$?
	test $rc -ne 0 &&
	expect_contains "$out" "\"status\":\"setup_failed\"" &&
	expect_contains "$out" "\"name\":\"SetupError\"" &&
	expect_contains "$out" "unable to enter the working directory"
'
test_done
