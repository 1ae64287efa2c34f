"""Tests for ward's Python kernel (runners/python/kernel.py), run on the host.

Each test starts the kernel as the supervisor does -- /usr/bin/python3 -I -u
kernel.py, a fresh cwd, WARD_KERNEL_CONFIG in the environment -- writes JSON
requests to its stdin and checks the exact messages on its stdout.

    /usr/bin/python3 -m unittest discover -s runners/python -p 'test_*.py'
"""

import base64
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

PYTHON = "/usr/bin/python3"          # Debian's, as in the sandbox (not a pyenv shim)
KERNEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernel.py")
WRITABLE = ["/workspace", "/tmp"]


def has_module(name):
    return subprocess.run([PYTHON, "-I", "-c", "import " + name],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


HAS_MPL, HAS_PANDAS, HAS_NUMPY = has_module("matplotlib"), has_module("pandas"), has_module("numpy")


class KernelProcess:
    def __init__(self, config=None, timeout=30):
        self.dir = tempfile.mkdtemp(prefix="ward-kernel-test-")
        self.timeout = timeout
        env = {"PATH": "/usr/bin:/bin", "HOME": self.dir, "LANG": "C.UTF-8",
               "MPLCONFIGDIR": os.path.join(self.dir, ".mpl")}
        if config is not None:
            env["WARD_KERNEL_CONFIG"] = json.dumps(config)
        self.stderr = open(os.path.join(self.dir, ".kernel-stderr"), "w+b")
        self.proc = subprocess.Popen([PYTHON, "-I", "-u", KERNEL], cwd=self.dir, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr)
        self.buf = b""
        self.ids = 0
        self.status = self.read()

    def read(self):
        """The next message (a dict), or None at EOF."""
        deadline = time.monotonic() + self.timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                raise AssertionError("no message from the kernel within %ss" % self.timeout)
            data = os.read(self.proc.stdout.fileno(), 65536)
            if not data:
                return None
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def send_raw(self, line):
        self.proc.stdin.write(line if isinstance(line, bytes) else line.encode())
        self.proc.stdin.flush()

    def send(self, msg_type, content):
        self.ids += 1
        rid = "r%d" % self.ids
        self.send_raw(json.dumps({"id": rid, "msg_type": msg_type, "content": content}) + "\n")
        return rid

    def until(self, reply_type, rid):
        out = []
        while True:
            msg = self.read()
            if msg is None:
                raise AssertionError("the kernel exited; got %r" % out)
            out.append(msg)
            if msg["msg_type"] == reply_type and msg.get("parent_id") == rid:
                return out

    def execute(self, code, stop_on_error=False):
        rid = self.send("execute_request", {"code": code, "stop_on_error": stop_on_error})
        return self.until("execute_reply", rid)

    def call(self, code, function, args=None, filename="tool.py"):
        content = {"code": code, "filename": filename, "function": function}
        if args is not None:
            content["args"] = args
        return self.until("call_reply", self.send("call_request", content))[-1]["content"]

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.stderr.seek(0)
        leaked = self.stderr.read()
        self.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return leaked


def of(msgs, msg_type):
    return [m["content"] for m in msgs if m["msg_type"] == msg_type]


def streams(msgs):
    return [(m["content"]["name"], m["content"]["text"]) for m in msgs if m["msg_type"] == "stream"]


def merged(msgs):
    """Stream text with adjacent pieces of one stream joined: where a partial
    line is split depends on timing, the order does not."""
    out = []
    for name, text in streams(msgs):
        if out and out[-1][0] == name:
            out[-1] = (name, out[-1][1] + text)
        else:
            out.append((name, text))
    return out


def result(msgs):
    found = of(msgs, "execute_result")
    return found[0]["data"]["text/plain"] if found else None


def reply(msgs):
    assert msgs[-1]["msg_type"] == "execute_reply"
    return msgs[-1]["content"]


class KernelTest(unittest.TestCase):
    config = {"writable": WRITABLE}

    def setUp(self):
        self.k = KernelProcess(self.config)

    def tearDown(self):
        leaked = self.k.close()
        self.assertEqual(leaked, b"", "the kernel wrote to its own stderr")

    def error(self, code, **kw):
        msgs = self.k.execute(code, **kw)
        self.assertEqual(reply(msgs)["status"], "error")
        errors = of(msgs, "error")
        self.assertEqual(len(errors), 1, msgs)
        return errors[0]


class TestCells(KernelTest):
    def test_status_first(self):
        version = subprocess.run([PYTHON, "-I", "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                                 capture_output=True, text=True).stdout.strip()
        st = self.k.status
        self.assertEqual((st["msg_type"], st["content"]), ("status", {
            "execution_state": "idle", "language": "python", "language_version": version}))
        self.assertNotIn("parent_id", st)
        self.assertIsInstance(st["time"], float)

    def test_persistence_and_last_expression(self):
        msgs = self.k.execute("x = 41\ndef inc(v):\n    return v + 1")
        self.assertEqual(reply(msgs), {"status": "ok", "execution_count": 1,
                                       "stdout_truncated": False, "stderr_truncated": False})
        self.assertIsNone(result(msgs))
        msgs = self.k.execute("inc(x)")
        self.assertEqual(of(msgs, "execute_result"),
                         [{"execution_count": 2, "data": {"text/plain": "42"}, "metadata": {}}])
        self.assertEqual(result(self.k.execute("_ * 2")), "84")   # IPython's _
        self.assertEqual(result(self.k.execute("__name__")), "'__main__'")

    def test_no_result_for_none_statement_or_semicolon(self):
        for code in ("None", "y = 5", "print('p')", "5;", "5 ; # quiet", "for i in range(2):\n    i"):
            with self.subTest(code=code):
                msgs = self.k.execute(code)
                self.assertEqual(reply(msgs)["status"], "ok")
                self.assertIsNone(result(msgs))
        self.assertEqual(result(self.k.execute("'a;b'")), "'a;b'")

    def test_stream_order(self):
        msgs = self.k.execute("import sys\nprint('a')\nprint('b', file=sys.stderr)\nprint('c')")
        self.assertEqual(streams(msgs), [("stdout", "a\n"), ("stderr", "b\n"), ("stdout", "c\n")])
        self.assertEqual(msgs[-1]["msg_type"], "execute_reply")
        self.assertTrue(all(m.get("parent_id") == msgs[-1]["parent_id"] for m in msgs))

    def test_print_pieces_make_one_message(self):
        self.assertEqual(streams(self.k.execute("print('x', 'y', 3)")), [("stdout", "x y 3\n")])

    def test_fast_lines_are_batched(self):
        msgs = self.k.execute("for i in range(2000):\n    print(i)")
        self.assertEqual(merged(msgs), [("stdout", "".join("%d\n" % i for i in range(2000)))])
        self.assertLess(len(streams(msgs)), 100)

    def test_subprocess_output_in_order_before_reply(self):
        msgs = self.k.execute("import os, subprocess\nprint('a', end='')\nos.system('echo b')\n"
                              "print('c')\nsubprocess.run(['sh', '-c', 'echo d >&2'])\nprint('e')")
        self.assertEqual(merged(msgs), [("stdout", "ab\nc\n"), ("stderr", "d\n"), ("stdout", "e\n")])
        self.assertEqual(msgs[-1]["msg_type"], "execute_reply")

    def test_fd_level_writes_and_binary_buffer(self):
        msgs = self.k.execute("import os, sys\nos.write(1, b'raw\\n')\n"
                              "sys.stdout.buffer.write(b'\\xc3\\xa9\\xff\\n')\nsys.stdout.flush()")
        self.assertEqual(streams(msgs), [("stdout", "raw\n"), ("stdout", "\u00e9\ufffd\n")])

    def test_protocol_fds_not_inherited(self):
        msgs = self.k.execute("import subprocess\nsubprocess.run(['/bin/ls', '/proc/self/fd'])")
        self.assertEqual(streams(msgs), [("stdout", "0\n1\n2\n3\n")])   # 3: ls's own directory

    def test_stdin_is_empty_with_hint(self):
        err = self.error("input('name? ')")
        self.assertEqual((err["ename"], err["evalue"]), ("EOFError", "EOF when reading a line"))
        self.assertEqual(err["hint"], "standard input is empty in this kernel (it reads /dev/null), "
                         "so input() gets nothing; put the values in the code or in a file")

    def test_forked_child_output(self):
        msgs = self.k.execute("import os\npid = os.fork()\nif pid == 0:\n    print('child')\n"
                              "    os._exit(0)\nos.waitpid(pid, 0)\nprint('parent')")
        self.assertEqual(merged(msgs), [("stdout", "child\nparent\n")])
        self.assertEqual(reply(msgs)["status"], "ok")

    def test_exception_traceback_starts_at_cell(self):
        self.k.execute("def f():\n    return 1 / 0")
        err = self.error("x = 1\nf()")
        self.assertEqual((err["ename"], err["evalue"]), ("ZeroDivisionError", "division by zero"))
        self.assertNotIn("hint", err)
        tb = err["traceback"]
        self.assertEqual(tb[0], "Traceback (most recent call last):")
        self.assertEqual(tb[1:3], ['  File "<cell 2>", line 2, in <module>', "    f()"])
        self.assertEqual(tb[3:5], ['  File "<cell 1>", line 2, in f', "    return 1 / 0"])
        self.assertEqual(tb[-1], "ZeroDivisionError: division by zero")
        self.assertFalse([line for line in tb if "kernel" in line], tb)

    def test_syntax_error(self):
        err = self.error("y = 1\nx = (")
        self.assertEqual(err["ename"], "SyntaxError")
        self.assertEqual(err["evalue"], "'(' was never closed (<cell 1>, line 2)")
        self.assertEqual(err["traceback"][:2], ['  File "<cell 1>", line 2', "    x = ("])
        self.assertEqual(err["traceback"][-1], "SyntaxError: '(' was never closed")
        self.assertEqual(self.error("y")["ename"], "NameError")   # the cell did not run

    def test_system_exit_does_not_end_kernel(self):
        err = self.error("import sys\nsys.exit(3)")
        self.assertEqual((err["ename"], err["evalue"]), ("SystemExit", "3"))
        self.assertEqual(result(self.k.execute("'alive'")), "'alive'")

    def test_sigint_interrupts_cell_not_kernel(self):
        rid = self.k.send("execute_request", {"code": "import time\nprint('sleeping', flush=True)\n"
                                                      "time.sleep(30)", "stop_on_error": False})
        self.assertEqual(self.k.read()["content"]["text"], "sleeping\n")
        self.k.proc.send_signal(signal.SIGINT)
        msgs = self.k.until("execute_reply", rid)
        self.assertEqual([e["ename"] for e in of(msgs, "error")], ["KeyboardInterrupt"])
        self.assertTrue(of(msgs, "error")[0]["traceback"][1].startswith('  File "<cell 1>", line '))
        self.k.proc.send_signal(signal.SIGINT)           # while idle: ignored
        self.assertEqual(result(self.k.execute("'alive'")), "'alive'")

    def test_sigint_past_the_deadline_is_a_timeout(self):
        code = "import time\nprint('sleeping', flush=True)\ntime.sleep(30)"
        for deadline, ename in ((time.monotonic() + 60, "KeyboardInterrupt"), (time.monotonic(), "TimeoutError")):
            rid = self.k.send("execute_request", {"code": code, "stop_on_error": False,
                                                  "deadline": deadline, "timeout_ms": 250})
            self.assertEqual(self.k.read()["content"]["text"], "sleeping\n")
            self.k.proc.send_signal(signal.SIGINT)
            err = of(self.k.until("execute_reply", rid), "error")[0]
            self.assertEqual(err["ename"], ename)
            self.assertTrue(err["traceback"][1].startswith('  File "<cell'), err["traceback"])
            self.assertNotIn("_ward_kernel", "\n".join(err["traceback"]))
        self.assertEqual(err["evalue"], err["hint"])
        self.assertEqual(err["hint"], "the sandbox's wall-time limit of 250 ms was reached; "
                                      "make the code faster or ask for a longer timeout")

    def test_stop_on_error(self):
        run = self.k.execute
        self.assertEqual(reply(run("a = 1", stop_on_error=True))["status"], "ok")
        self.error("raise ValueError('bad')", stop_on_error=True)
        msgs = run("a = 2", stop_on_error=True)
        self.assertEqual(msgs, [msgs[-1]])                # nothing but the reply
        self.assertEqual(reply(msgs), {"status": "aborted", "execution_count": 2,
                                       "stdout_truncated": False, "stderr_truncated": False})
        self.assertEqual(reply(run("a = 3", stop_on_error=True))["status"], "aborted")
        msgs = run("a", stop_on_error=False)              # runs, and ends the abort
        self.assertEqual((reply(msgs)["execution_count"], result(msgs)), (3, "1"))
        self.assertEqual(result(run("a + 1", stop_on_error=True)), "2")
        self.error("raise ValueError('not fatal')", stop_on_error=False)
        self.assertEqual(result(run("a + 2", stop_on_error=True)), "3")   # no abort after that
        self.error("x = (", stop_on_error=True)          # a syntax error aborts too
        self.assertEqual(reply(run("a", stop_on_error=True))["status"], "aborted")

    def test_top_level_await(self):
        msgs = self.k.execute("import asyncio\nasync def twice(n):\n    await asyncio.sleep(0)\n"
                              "    return 2 * n\nawait twice(21)")
        self.assertEqual(result(msgs), "42")
        self.k.execute("loop1 = asyncio.get_running_loop()\nawait asyncio.sleep(0)")
        self.assertEqual(result(self.k.execute("await asyncio.sleep(0)\nasyncio.get_running_loop() is loop1")),
                         "True")                          # one loop for the kernel's life
        err = self.error("async def bad():\n    raise KeyError('k')\nawait bad()")
        self.assertEqual(err["traceback"][1:3], ['  File "<cell 4>", line 3, in <module>', "    await bad()"])
        self.assertFalse([line for line in err["traceback"] if "asyncio" in line or "kernel" in line])

    def test_display(self):
        code = ("class Rich:\n"
                "    def __repr__(self): return 'Rich()'\n"
                "    def _repr_html_(self): return '<b>rich</b>'\n"
                "    def _repr_png_(self): return b'\\x89PNG'\n"
                "    def _repr_json_(self): return {'k': [1, 2]}\n"
                "    def _repr_markdown_(self): raise RuntimeError('no markdown')\n"
                "r = display(Rich(), 7)\n"
                "display({'text/html': '<i>raw</i>', 'text/plain': 'raw'}, raw=True)\n"
                "r is None")
        msgs = self.k.execute(code)
        self.assertEqual(of(msgs, "display_data"), [
            {"data": {"text/plain": "Rich()", "text/html": "<b>rich</b>", "image/png":
                      base64.b64encode(b"\x89PNG").decode(), "application/json": {"k": [1, 2]}},
             "metadata": {}},
            {"data": {"text/plain": "7"}, "metadata": {}},
            {"data": {"text/html": "<i>raw</i>", "text/plain": "raw"}, "metadata": {}}])
        self.assertEqual(streams(msgs), [("stderr", "ward: Rich._repr_markdown_() raised "
                                                    "RuntimeError: no markdown\n")])
        self.assertEqual(result(msgs), "True")

    def test_result_mime_bundle(self):
        msgs = self.k.execute("class S:\n    def _repr_svg_(self): return '<svg/>'\n"
                              "    def _repr_latex_(self): return None\nS()")
        data = of(msgs, "execute_result")[0]["data"]
        self.assertEqual(data["image/svg+xml"], "<svg/>")
        self.assertTrue(data["text/plain"].startswith("<__main__.S object at 0x"))
        self.assertEqual(sorted(data), ["image/svg+xml", "text/plain"])

    def test_bad_repr_does_not_kill_cell(self):
        msgs = self.k.execute("class B:\n    def __repr__(self): raise ValueError('x')\nB()")
        self.assertEqual(reply(msgs)["status"], "ok")
        self.assertEqual(result(msgs), "<B object (repr() raised ValueError)>")

    @unittest.skipUnless(HAS_MPL, "matplotlib is not installed for /usr/bin/python3")
    def test_matplotlib_png(self):
        msgs = self.k.execute("import matplotlib.pyplot as plt\nimport matplotlib\n"
                              "plt.plot([1, 3, 2])\nplt.title('t')\nmatplotlib.get_backend()")
        self.assertEqual(result(msgs), "'agg'")
        shown = of(msgs, "display_data")
        self.assertEqual(len(shown), 1)
        self.assertEqual(shown[0]["data"]["text/plain"], "<Figure size 640x480 with 1 Axes>")
        png = base64.b64decode(shown[0]["data"]["image/png"], validate=True)
        self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
        self.assertEqual(png[12:16], b"IHDR")
        self.assertEqual(of(self.k.execute("plt.get_fignums()"), "execute_result")[0]["data"],
                         {"text/plain": "[]"})                 # closed after the cell
        msgs = self.k.execute("plt.plot([1])\nplt.show()\nprint('after')")
        self.assertEqual([m["msg_type"] for m in msgs], ["display_data", "stream", "execute_reply"])
        self.assertEqual(streams(msgs), [("stdout", "after\n")])  # and no Agg warning
        msgs = self.k.execute("fig = plt.figure()\nfig.add_subplot()\nfig")
        self.assertEqual(of(msgs, "execute_result")[0]["data"],
                         {"text/plain": "<Figure size 640x480 with 1 Axes>"})   # the PNG follows
        self.assertEqual(len(of(msgs, "display_data")), 1)
        msgs = self.k.execute("fig = plt.figure()\ndisplay(fig)\nprint('shown')")
        self.assertEqual([m["msg_type"] for m in msgs], ["display_data", "stream", "execute_reply"])
        msgs = self.k.execute("from matplotlib.figure import Figure\nf = Figure()\nf.add_subplot().plot([1])\nf")
        self.assertEqual(base64.b64decode(of(msgs, "execute_result")[0]["data"]["image/png"])[:4],
                         b"\x89PNG")                   # not pyplot's: rendered in the result
        self.assertEqual(of(msgs, "display_data"), [])

    @unittest.skipUnless(HAS_PANDAS, "pandas is not installed for /usr/bin/python3")
    def test_dataframe_html(self):
        msgs = self.k.execute("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})")
        data = of(msgs, "execute_result")[0]["data"]
        self.assertEqual(data["text/plain"], "   a  b\n0  1  x\n1  2  y")
        self.assertIn("<table", data["text/html"])
        self.assertIn("<th>b</th>", data["text/html"])

    def test_workspace_modules_importable(self):
        msgs = self.k.execute("open('helper.py', 'w').write('VALUE = 5\\n')\nimport helper\nhelper.VALUE")
        self.assertEqual(result(msgs), "5")

    def test_user_site_added_after_start(self):
        """`pip install --user` in a session lands in ~/.local after the kernel
        started (and -I leaves the user site off sys.path): the next cell sees it."""
        self.assertEqual(reply(self.k.execute("import sys\nx = 1"))["status"], "ok")
        version = subprocess.run([PYTHON, "-I", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                 capture_output=True, text=True).stdout.strip()
        pkg = os.path.join(self.k.dir, ".local", "lib", "python" + version, "site-packages", "wardtestpkg")
        os.makedirs(pkg)
        with open(os.path.join(pkg, "__init__.py"), "w") as f:
            f.write("VALUE = 42\n")
        msgs = self.k.execute("import wardtestpkg; print(wardtestpkg.VALUE)")
        self.assertEqual(streams(msgs), [("stdout", "42\n")])
        self.assertEqual(result(self.k.execute("sys.path.count(%r)" % os.path.dirname(pkg))), "1")

    def test_files_flushed_at_shutdown(self):
        self.k.execute("import threading, time\nf = open('out.txt', 'w')\nf.write('data')\n"
                       "threading.Thread(target=time.sleep, args=(60,)).start()")
        rid = self.k.send("shutdown_request", {})
        self.assertEqual(self.k.until("shutdown_reply", rid)[-1]["content"], {})
        self.assertIsNone(self.k.read())
        self.assertEqual(self.k.proc.wait(10), 0)            # the user's thread did not hold it
        with open(os.path.join(self.k.dir, "out.txt")) as f:
            self.assertEqual(f.read(), "data")


class TestProtocol(KernelTest):
    def test_malformed_requests(self):
        def next_error():
            msg = self.k.read()
            self.assertEqual(msg["msg_type"], "error")
            return msg
        self.k.send_raw("not json\n")
        msg = next_error()
        self.assertNotIn("parent_id", msg)
        self.assertEqual(msg["content"]["ename"], "ProtocolError")
        self.assertTrue(msg["content"]["evalue"].startswith("the request is not JSON: "))
        self.k.send_raw("[1, 2]\n\n")
        self.assertEqual(next_error()["content"]["evalue"], "the request is not a JSON object")
        self.k.send_raw(b'{"id": "u", "msg_type": "\xff"}\n')
        self.assertEqual(next_error()["content"]["ename"], "ProtocolError")
        rid = self.k.send("kernel_info_request", {})
        msg = next_error()
        self.assertEqual((msg["parent_id"], msg["content"]["evalue"]),
                         (rid, "unknown msg_type 'kernel_info_request': expected execute_request, "
                               "call_request or shutdown_request"))
        self.k.send_raw('{"id": "c", "msg_type": "execute_request", "content": [1]}\n')
        self.assertEqual(next_error()["content"]["evalue"],
                         "execute_request: content must be a JSON object")
        msgs = self.k.execute(None)
        self.assertEqual(of(msgs, "error")[0]["evalue"], "execute_request: content.code must be a string")
        self.assertEqual(reply(msgs)["status"], "error")
        msgs = self.k.execute("1 + 1", stop_on_error=False)
        self.assertEqual((result(msgs), reply(msgs)["execution_count"]), ("2", 1))

    def test_eof_exits_zero(self):
        self.k.proc.stdin.close()
        self.assertIsNone(self.k.read())
        self.assertEqual(self.k.proc.wait(10), 0)

    def test_bad_config_reported_then_runs(self):
        env_config = "{oops"
        dirname = tempfile.mkdtemp(prefix="ward-kernel-test-")
        proc = subprocess.Popen([PYTHON, "-I", "-u", KERNEL], cwd=dirname,
                                env={"PATH": "/usr/bin:/bin", "WARD_KERNEL_CONFIG": env_config},
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = proc.communicate(b'{"id":"1","msg_type":"execute_request","content":{"code":"3"}}\n', 30)
        shutil.rmtree(dirname, ignore_errors=True)
        msgs = [json.loads(line) for line in out.splitlines()]
        self.assertEqual([m["msg_type"] for m in msgs],
                         ["error", "status", "execute_result", "execute_reply"])
        self.assertTrue(msgs[0]["content"]["evalue"].startswith("WARD_KERNEL_CONFIG is not JSON"))
        self.assertEqual((proc.returncode, err), (0, b""))


class TestOutputCap(KernelTest):
    config = {"output_limit": 10}

    def test_cap_across_cells_and_fds(self):
        msgs = self.k.execute("print('0123456')")
        self.assertEqual(streams(msgs), [("stdout", "0123456\n")])
        self.assertFalse(reply(msgs)["stdout_truncated"])
        msgs = self.k.execute("import os\nos.system('echo abcdef')\nprint('more')")
        self.assertEqual(streams(msgs), [("stdout", "ab")])
        self.assertEqual((reply(msgs)["stdout_truncated"], reply(msgs)["stderr_truncated"]), (True, False))
        msgs = self.k.execute("import sys\nfor i in range(100000):\n    print(i, file=sys.stderr)\n'done'")
        self.assertEqual((streams(msgs), result(msgs)), ([], "'done'"))
        self.assertEqual((reply(msgs)["stdout_truncated"], reply(msgs)["stderr_truncated"]), (False, True))
        msgs = self.k.execute("x = 1")
        self.assertEqual((reply(msgs)["stdout_truncated"], reply(msgs)["stderr_truncated"]), (False, False))


class TestHints(KernelTest):
    config = {"network": "none", "memory_limit": 512 << 20, "writable": WRITABLE}

    def test_module_not_found(self):
        err = self.error("import nump")
        self.assertEqual((err["ename"], err["evalue"]), ("ModuleNotFoundError", "No module named 'nump'"))
        if HAS_NUMPY:                                     # the best match comes first
            self.assertTrue(err["hint"].startswith("module 'nump' is not installed in this "
                                                   "sandbox's image; close names: numpy"), err["hint"])
        err = self.error("import zzqqxxjj.sub")
        self.assertEqual(err["hint"], "module 'zzqqxxjj' is not installed in this sandbox's image")
        err = self.error("import json.nosuchmodule")
        self.assertNotIn("hint", err)                     # json is installed: no claim
        err = self.error("from IPython.display import display")
        self.assertEqual(err["hint"], "IPython is not installed in this sandbox's image; this kernel "
                                      "has display() as a builtin, so drop the import")

    def test_network(self):
        hint = "the network is disabled by this sandbox's policy (network: none); only loopback works"
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()                                         # nothing listens there now
        for code, ename in [
                ("import socket\nsocket.create_connection(('127.0.0.1', %d))" % port,
                 "ConnectionRefusedError"),
                ("import urllib.request\nurllib.request.urlopen('http://127.0.0.1:%d/')" % port,
                 "URLError"),
                ("import socket\nraise socket.gaierror(-2, 'Name or service not known')", "gaierror"),
                ("import errno\nraise OSError(errno.ENETUNREACH, 'Network is unreachable')", "OSError")]:
            with self.subTest(ename=ename):
                err = self.error(code)
                self.assertEqual((err["ename"], err["hint"]), (ename, hint))

    def test_memory(self):
        err = self.error("bytearray(1 << 60)")
        self.assertEqual((err["ename"], err["hint"]), ("MemoryError", "the sandbox's memory limit is 512 MiB"))

    def test_read_only(self):
        err = self.error("import errno\nraise OSError(errno.EROFS, 'Read-only file system', '/usr/x')")
        self.assertEqual(err["hint"], "'/usr/x' is read-only in this sandbox; write under /workspace or /tmp")
        err = self.error("raise PermissionError(13, 'Permission denied', '/usr/lib/../bin/x')")
        self.assertEqual(err["hint"], "'/usr/bin/x' is read-only in this sandbox; write under /workspace or /tmp")
        err = self.error("raise PermissionError(13, 'Permission denied', 'data.txt')")   # cwd is under /tmp
        self.assertNotIn("hint", err)
        err = self.error("open('/nonexistent-dir/f', 'w')")               # ENOENT: no claim
        self.assertNotIn("hint", err)


class TestNoNetworkConfig(KernelTest):
    config = {}

    def test_no_hints_without_config(self):
        for code in ("import errno\nraise OSError(errno.ENETUNREACH, 'Network is unreachable')",
                     "raise MemoryError()",
                     "import errno\nraise OSError(errno.EROFS, 'Read-only file system', '/usr/x')"):
            with self.subTest(code=code):
                self.assertNotIn("hint", self.error(code))


class TestLint(KernelTest):
    config = {"lint": {"deny_imports": ["subprocess", "ctypes"], "deny_calls": ["eval", "os.system"]}}

    def violations(self, code):
        msgs = self.k.execute(code)
        self.assertEqual(reply(msgs)["status"], "policy_violation")
        self.assertEqual(streams(msgs), [])               # the cell did not run
        return of(msgs, "policy_violation")

    def test_import_hit(self):
        self.assertEqual(self.violations("x = 1\nimport os, subprocess"), [
            {"rule": "deny_imports", "name": "subprocess", "line": 2, "col": 12,
             "message": "import of 'subprocess' is denied by this sandbox's policy "
                        "(lint.deny_imports: subprocess)"}])
        self.assertEqual(self.error("x", stop_on_error=False)["ename"], "NameError")  # nothing ran

    def test_import_forms(self):
        cases = [("from ctypes.util import find_library", "ctypes.util", 1, 1),
                 ("import importlib\nimportlib.import_module('subprocess')", "subprocess", 2, 1),
                 ("m = __import__('ctypes')", "ctypes", 1, 5),
                 ("from importlib import import_module as im\nim('subprocess.x')", "subprocess.x", 2, 1)]
        for code, name, line, col in cases:
            with self.subTest(code=code):
                v = self.violations(code)
                self.assertEqual([(x["rule"], x["name"], x["line"], x["col"]) for x in v],
                                 [("deny_imports", name, line, col)])
                self.k.execute("pass", stop_on_error=False)

    def test_call_hit(self):
        v = self.violations("import os\nprint('no')\nos.system('echo hi')")
        self.assertEqual(v, [{"rule": "deny_calls", "name": "os.system", "line": 3, "col": 1,
                              "message": "call to 'os.system' is denied by this sandbox's policy "
                                         "(lint.deny_calls: os.system)"}])
        self.k.execute("pass", stop_on_error=False)
        v = self.violations("y = [eval('1'), 2]")
        self.assertEqual([(x["name"], x["col"]) for x in v], [("eval", 6)])
        self.k.execute("pass", stop_on_error=False)
        self.assertEqual(reply(self.k.execute("from os import system as run_it\nimport os as o",
                                              stop_on_error=False))["status"], "ok")
        v = self.violations("run_it('true')\no.system('true')\n\u00e9 = 1; eval('2')")
        self.assertEqual([(x["name"], x["line"], x["col"]) for x in v],
                         [("os.system", 1, 1), ("os.system", 2, 1), ("eval", 3, 8)])

    def test_lint_bypass_is_not_caught(self):
        """The lint is advisory: computed names get past it. What contains the
        code is the sandbox's kernel layers, not this check."""
        msgs = self.k.execute("getattr(__import__('o' + 's'), 'sys' + 'tem')('echo bypassed')")
        self.assertEqual(of(msgs, "policy_violation"), [])
        self.assertEqual(streams(msgs), [("stdout", "bypassed\n")])
        self.assertEqual(reply(msgs)["status"], "ok")

    def test_denied_parent_denies_submodule(self):
        self.k.close()
        self.k = KernelProcess({"lint": {"deny_imports": ["os"]}})
        v = self.violations("import os.path")
        self.assertEqual([(x["name"], x["message"]) for x in v], [
            ("os.path", "import of 'os.path' is denied by this sandbox's policy (lint.deny_imports: os)")])
        self.assertEqual(reply(self.k.execute("import posixpath", stop_on_error=False))["status"], "ok")


class TestWire(unittest.TestCase):
    """The kernel's JSON (straight from _json, to start faster) against the json module."""

    def test_same_as_json_module(self):
        sys.path.insert(0, os.path.dirname(KERNEL))
        try:
            from _ward_kernel import wire
        finally:
            sys.path.remove(os.path.dirname(KERNEL))
        values = [None, True, 0, -7, 2 ** 70, 1.5, 1e300, "", "a\"b\\\n\u00e9\U0001F600\x00",
                  [], {}, [1, [2, {"k": (3, 4)}]], {"z": 1, "a": {"n": None}, 5: "int key"}]
        for v in values:
            text = json.dumps(v, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
            self.assertEqual(wire.dumps(v), text)
            self.assertEqual(wire.loads(text), json.loads(text))
            self.assertEqual(wire.loads(" \n%s\r\n" % text), json.loads(text))
        for bad in (float("nan"), float("inf"), {1, 2}, object(), {(1, 2): 3}):
            self.assertRaises((TypeError, ValueError), wire.dumps, bad)
        circular = []
        circular.append(circular)
        self.assertRaises(ValueError, wire.dumps, circular)
        self.assertEqual(wire.dumps([1]), "[1]")            # not poisoned by the error
        for bad in ("", "  ", "[1", "[1] x", "NaN", "{'a': 1}", b"\xff", "[1,]", '"\x01"'):
            self.assertRaises(ValueError, wire.loads, bad)
        self.assertEqual(wire.loads(b'{"a": "\xc3\xa9"}'), {"a": "\u00e9"})


TOOL = '''\
import asyncio

def add(a, b=2):
    return a + b

class MyTool:
    def __init__(self):
        self.base = 100

    def run(self, numbers):
        print("running")
        return {"sum": sum(numbers) + self.base, "pair": (1, 2)}

    async def arun(self, n):
        await asyncio.sleep(0)
        return n * 2

    @staticmethod
    def static(x):
        return [x]

    def bad(self):
        return {"items": [1, {2, 3}]}

    def nan(self):
        return {"x": float("nan")}

    def boom(self):
        raise ValueError("no " + "way")

class NeedsArg:
    def __init__(self, x):
        self.x = x

    def run(self):
        return self.x

if __name__ == "__main__":
    print("main ran")
'''


class TestCallMode(KernelTest):
    def test_function_and_methods(self):
        self.assertEqual(self.k.call(TOOL, "add", {"a": 1}), {"status": "ok", "value": 3})
        self.assertEqual(self.k.call(TOOL, "add", [1, 5]), {"status": "ok", "value": 6})
        rid = self.k.send("call_request", {"code": TOOL, "filename": "tool.py", "function": "MyTool.run",
                                           "args": {"numbers": [10, 20, 30]}})
        msgs = self.k.until("call_reply", rid)
        self.assertEqual(streams(msgs), [("stdout", "running\n")])   # and no "main ran"
        self.assertEqual(msgs[-1]["content"], {"status": "ok", "value": {"sum": 160, "pair": [1, 2]}})
        self.assertEqual(self.k.call(TOOL, "MyTool.arun", {"n": 21}), {"status": "ok", "value": 42})
        self.assertEqual(self.k.call(TOOL, "MyTool.static", ["s"]), {"status": "ok", "value": ["s"]})

    def test_argument_errors(self):
        self.assertEqual(self.k.call(TOOL, "MyTool.run", {}), {"status": "error", "error": {
            "ename": "ArgumentError", "traceback": [],
            "evalue": "missing a required argument: 'numbers' (the signature is MyTool.run(numbers))"}})
        self.assertEqual(self.k.call(TOOL, "add", {"a": 1, "c": 3})["error"]["evalue"],
                         "got an unexpected keyword argument 'c' (the signature is add(a, b=2))")
        self.assertEqual(self.k.call(TOOL, "add", "1")["error"]["evalue"],
                         "args must be a JSON object (keyword arguments) or an array "
                         "(positional arguments), not str")
        self.assertEqual(self.k.call(TOOL, "NeedsArg.run")["error"], {
            "ename": "ArgumentError", "traceback": [],
            "evalue": "NeedsArg cannot be created without arguments (missing a required argument: "
                      "'x'); the call mode creates the instance with NeedsArg()"})

    def test_function_not_found(self):
        err = self.k.call(TOOL, "MyTool.runn")["error"]
        self.assertEqual((err["ename"], err["evalue"]), (
            "FunctionNotFound", "'MyTool.runn' was not found in tool.py (did you mean 'MyTool.run'?); "
            "callables defined there: add, MyTool, MyTool.run, MyTool.arun, MyTool.static, "
            "MyTool.bad, MyTool.nan, MyTool.boom, NeedsArg, NeedsArg.run"))
        self.assertEqual(self.k.call(TOOL, "asyncio")["error"]["ename"], "FunctionNotFound")

    def test_serialization_errors(self):
        self.assertEqual(self.k.call(TOOL, "MyTool.bad")["error"], {
            "ename": "SerializationError", "traceback": [],
            "evalue": "the return value is not JSON-serialisable: a value of type 'set' at $.items[1]"})
        self.assertEqual(self.k.call(TOOL, "MyTool.nan")["error"]["evalue"],
                         "the return value is not JSON-serialisable: float nan at $.x")

    def test_exception_in_tool(self):
        err = self.k.call(TOOL, "MyTool.boom")["error"]
        self.assertEqual((err["ename"], err["evalue"]), ("ValueError", "no way"))
        self.assertEqual(err["traceback"][1:3], ['  File "tool.py", line 29, in boom',
                                                 '    raise ValueError("no " + "way")'])
        err = self.k.call("import nump\n", "f")["error"]
        self.assertEqual((err["ename"], err["traceback"][1]),
                         ("ModuleNotFoundError", '  File "tool.py", line 1, in <module>'))
        err = self.k.call("def f(:\n", "f")["error"]
        self.assertEqual(err["ename"], "SyntaxError")

    def test_bad_call_request(self):
        reply_ = self.k.call(None, "f")
        self.assertEqual(reply_["error"]["ename"], "ProtocolError")
        self.assertEqual(self.k.call(TOOL, "add", [2]), {"status": "ok", "value": 4})


class TestGlobals(KernelTest):
    def run_with(self, code, names):
        rid = self.k.send("execute_request", {"code": code, "stop_on_error": False, "globals": names})
        return self.k.until("execute_reply", rid)

    def test_set_before_the_cell(self):
        msgs = self.run_with("print(a + b)\nsorted(d)", {"a": 1, "b": 2, "d": {"y": None, "x": [1.5]}})
        self.assertEqual((merged(msgs), result(msgs), reply(msgs)["status"]),
                         ([("stdout", "3\n")], "['x', 'y']", "ok"))
        self.assertEqual(result(self.k.execute("a")), "1")          # they stay, as a cell's names do

    def test_no_line_moves(self):
        msgs = self.run_with("x = 1\n\nraise ValueError(v)", {"v": "w"})
        err = of(msgs, "error")[0]
        self.assertEqual((err["ename"], err["evalue"]), ("ValueError", "w"))
        self.assertEqual(err["traceback"][1], '  File "<cell 1>", line 3, in <module>')

    def test_bad_globals_are_a_protocol_error(self):
        for names in ([1], {"1x": 1}, {"__builtins__": {}}, "x"):
            msgs = self.run_with("1", names)
            self.assertEqual((of(msgs, "error")[0]["ename"], reply(msgs)["status"]),
                             ("ProtocolError", "error"), names)
        self.assertEqual(result(self.k.execute("len([1])")), "1")   # builtins intact

    def test_call_sees_globals_in_its_module(self):
        rid = self.k.send("call_request", {"code": "def f():\n    return G * 2\n", "filename": "tool.py",
                                           "function": "f", "globals": {"G": 21}})
        self.assertEqual(self.k.until("call_reply", rid)[-1]["content"], {"status": "ok", "value": 42})
        rid = self.k.send("call_request", {"code": "def f():\n    return 1\n", "filename": "tool.py",
                                           "function": "f", "globals": {"a b": 1}})
        self.assertEqual(self.k.until("call_reply", rid)[-1]["content"]["error"]["ename"], "ProtocolError")


class TestCallLint(KernelTest):
    config = {"lint": {"deny_calls": ["os.system"]}}

    def test_call_mode_is_linted(self):
        rid = self.k.send("call_request", {"code": "import os\ndef f():\n    os.system('x')\n",
                                           "filename": "t.py", "function": "f"})
        msgs = self.k.until("call_reply", rid)
        self.assertEqual([(v["name"], v["line"]) for v in of(msgs, "policy_violation")], [("os.system", 3)])
        self.assertEqual(msgs[-1]["content"]["error"]["ename"], "PolicyViolation")


if __name__ == "__main__":
    unittest.main()
