"""ward.Sandbox, ward.run and ward.call against a real daemon."""
import io
import os
import re
import signal
import threading
import time
import unittest

import ward
from support import (KEY_NOFILES, KEY_SMALL, NEEDS_DAEMON, NEEDS_KEYS, cgroup_missing, killed_count, raw,
                     running_oneshots, session_status, wait_for)


def function_mode_missing():
    """The reason to skip when this daemon has no function-call mode over
    HTTP (the request's `function` field is unknown to it), else None."""
    try:
        ward.call("def f():\n    return 1\n", "f")
    except ward.InvalidRequestError as e:
        if e.field in ("function", "args") or "function" in e.message:
            return f"this daemon has no function-call mode over HTTP: {e.message}"
        raise
    return None


@NEEDS_DAEMON
class TestOneShot(unittest.TestCase):
    def test_run(self):
        """ward.run: stdout, the last value, rich results"""
        ex = ward.run("print('hi')\ndisplay({'a': 1})\n6 * 7")
        self.assertEqual(ex.verdict.status, "ok")
        self.assertEqual(ex.logs.stdout, ["hi\n"])
        self.assertEqual(ex.text, "42")
        self.assertTrue(ex.execution_id.startswith("ex_"))
        self.assertEqual([r.is_main_result for r in ex.results], [False, True])

    def test_error_is_data(self):
        """an exception in the code is Execution.error, with traceback and hint"""
        ex = ward.run("import IPython")
        self.assertEqual(ex.verdict.status, "error")
        self.assertEqual(ex.error.name, "ModuleNotFoundError")
        self.assertIn("IPython", ex.error.value)
        self.assertIn("Traceback", ex.error.traceback)
        self.assertIn("display()", ex.error.hint)

    def test_languages_and_files(self):
        """bash and node one-shots; files go into /workspace first"""
        ex = ward.run("cat in.txt; wc -c < bin", language="bash",
                      files={"in.txt": "text\n", "bin": b"\x00\x01\x02"})
        self.assertEqual(ex.stdout, "text\n3\n")
        if os.path.exists("/usr/bin/node"):
            self.assertEqual(ward.run("console.log(2 + 3)", language="node").stdout, "5\n")

    def test_streaming_callbacks(self):
        """on_stdout/on_stderr/on_result see the events as they come"""
        out, err, res = [], [], []
        ward.run("import sys\nprint('o')\nprint('e', file=sys.stderr)\n1 + 1",
                 on_stdout=out.append, on_stderr=err.append, on_result=lambda r: res.append(r.text))
        self.assertEqual((out, err, res), (["o\n"], ["e\n"], ["2"]))

    def test_png(self):
        """a matplotlib chart comes back as a PNG result"""
        ex = ward.run("import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
                      "plt.plot([1, 2, 3])\nplt.show()")
        if ex.error is not None and ex.error.name == "ModuleNotFoundError":
            self.skipTest("matplotlib is not installed on this host")
        pngs = [r for r in ex.results if r.png]
        self.assertEqual(len(pngs), 1)
        self.assertTrue(pngs[0].png_bytes().startswith(b"\x89PNG"))

    def test_run_command(self):
        """ward.run_command: a one-shot argv; non-zero exit raises CommandExitError"""
        self.assertEqual(ward.run_command(["echo", "a b"]).stdout, "a b\n")
        with self.assertRaises(ward.CommandExitError) as cm:
            ward.run_command("echo bad >&2; exit 4")
        self.assertEqual((cm.exception.exit_code, cm.exception.stderr), (4, "bad\n"))

    def test_call(self):
        """ward.call: a function's JSON value; its errors are CallError"""
        reason = function_mode_missing()
        if reason:
            self.skipTest(reason)
        tool = "class MyTool:\n    def run(self, a, b=2):\n        return {'sum': a + b}\n"
        self.assertEqual(ward.call(tool, "MyTool.run", {"a": 40}), {"sum": 42})
        self.assertEqual(ward.call(tool, "MyTool.run", [1, 1]), {"sum": 2})
        with self.assertRaises(ward.CallError) as cm:
            ward.call(tool, "MyTool.runn", {})
        self.assertEqual(cm.exception.name, "FunctionNotFound")
        with self.assertRaises(ward.CallError) as cm:
            ward.call(tool, "MyTool.run", {"zz": 1})
        self.assertEqual(cm.exception.name, "ArgumentError")
        with self.assertRaises(ward.CallError) as cm:
            ward.call("def f():\n    return {1, 2}\n", "f")
        self.assertEqual(cm.exception.name, "SerializationError")
        self.assertEqual(ward.call("def f():\n    return K * 2\n", "f", globals={"K": 21}), 42)

    def test_inline_artifacts(self):
        """artifacts=True: the files the code wrote come back with their bytes"""
        ex = ward.run("open('out.bin', 'wb').write(bytes(range(5)))\nopen('t.txt', 'w').write('x' * 10)",
                      artifacts=True)
        got = {a.path: a.content for a in ex.artifacts}
        self.assertEqual(got, {"out.bin": bytes(range(5)), "t.txt": b"x" * 10})
        ex = ward.run("open('big', 'w').write('y' * 100)", artifacts=10)
        self.assertEqual([(a.path, a.size, a.content) for a in ex.artifacts], [("big", 100, None)])

    def test_globals(self):
        """globals= sets names in the program's namespace before it runs"""
        try:
            ex = ward.run("print(x + 1, name)", globals={"x": 41, "name": "w"})
        except ward.InvalidRequestError as e:
            self.skipTest(f"this daemon has no `globals`: {e.message}")
        self.assertEqual(ex.stdout, "42 w\n")


@NEEDS_DAEMON
class TestVerdictErrors(unittest.TestCase):
    """Every verdict status but ok/error raises its class, from a real run."""

    def check(self, cls, status, fn):
        with self.assertRaises(cls) as cm:
            fn()
        e = cm.exception
        self.assertIsInstance(e, ward.VerdictError)
        self.assertEqual(e.execution.verdict.status, status)
        return e

    def test_timeout(self):
        e = self.check(ward.TimeoutError, "timeout", lambda: ward.run("while True: pass", timeout=0.5))
        self.assertEqual(e.limit, {"name": "timeout", "value": 500})
        self.assertIn("timeout", e.hint)

    def test_memory(self):
        if cgroup_missing():
            self.skipTest(cgroup_missing())
        e = self.check(ward.MemoryLimitError, "memory_limit",
                       lambda: ward.run("b = bytearray(400 << 20)", policy={"limits": {"memory": "64M"}}))
        self.assertEqual(e.limit["name"], "memory")
        self.assertIn("memory", e.hint)

    def test_pids(self):
        if cgroup_missing():
            self.skipTest(cgroup_missing())
        self.check(ward.PidsLimitError, "pids_limit",
                   lambda: ward.run("import os\nwhile True: os.fork()", policy={"limits": {"pids": 16}}))

    def test_output(self):
        e = self.check(ward.OutputLimitError, "output_limit",
                       lambda: ward.run("print('x' * 100000)", policy={"limits": {"output": "1K"}}))
        self.assertEqual(e.execution.error.name, "OutputLimitError")

    def test_cpu(self):
        self.check(ward.CpuTimeoutError, "cpu_timeout",
                   lambda: ward.run("while True: pass", policy={"limits": {"cpu_time": "1s"}}))

    def test_disk(self):
        self.check(ward.DiskLimitError, "disk_limit",
                   lambda: ward.run_command("cat /dev/zero > /workspace/f",
                                            policy={"limits": {"workspace_size": "1M"}}))

    def test_signaled(self):
        self.check(ward.SignaledError, "signaled", lambda: ward.run("import os\nos.kill(os.getpid(), 11)"))

    def test_policy_violation(self):
        self.check(ward.PolicyViolationError, "policy_violation",
                   lambda: ward.run("import socket", policy={"lint": {"deny_imports": ["socket"]}}))

    def test_setup_failed(self):
        """a sandbox that cannot be built (its workdir does not exist)"""
        e = self.check(ward.SetupFailedError, "setup_failed",
                       lambda: ward.run("1", policy={"workdir": "/workspace/no/such"}))
        self.assertIsNone(e.execution.verdict.exit_code)

    def test_returned_when_asked(self):
        """raise_on_limit=False returns the Execution with .error set"""
        ex = ward.run("while True: pass", timeout=0.5, raise_on_limit=False)
        self.assertEqual((ex.verdict.status, ex.error.name), ("timeout", "TimeoutError"))


@NEEDS_DAEMON
class TestAPIErrors(unittest.TestCase):
    def test_authentication(self):
        with self.assertRaises(ward.AuthenticationError) as cm:
            ward.run("1", api_key="wk_nope_nope")
        self.assertEqual((cm.exception.status, cm.exception.code), (401, "unauthorized"))

    def test_invalid_request_names_field(self):
        with self.assertRaises(ward.InvalidRequestError) as cm:
            ward.Sandbox(policy={"limits": {"memory": "lots"}})
        self.assertEqual(cm.exception.field, "policy.limits.memory")
        with self.assertRaises(ward.InvalidRequestError) as cm:
            ward.run("1", language="cobol")
        self.assertEqual(cm.exception.field, "language")

    def test_not_found(self):
        with self.assertRaises(ward.NotFoundError):
            ward.Sandbox.connect("se_0000000000000000")

    @NEEDS_KEYS
    def test_permission_denied(self):
        """a key without the files scope: 403 naming the scope"""
        with ward.Sandbox(api_key=KEY_NOFILES) as sbx:
            with self.assertRaises(ward.PermissionDeniedError) as cm:
                sbx.files.read("x")
            self.assertEqual(cm.exception.field, "scope")

    @NEEDS_KEYS
    def test_quota(self):
        """tenant "small" may have one session: the second names the quota"""
        with ward.Sandbox(api_key=KEY_SMALL):
            with self.assertRaises(ward.QuotaExceededError) as cm:
                ward.Sandbox(api_key=KEY_SMALL)
            self.assertEqual(cm.exception.quota, "max_sessions_per_tenant")
            self.assertEqual(cm.exception.status, 429)

    def test_session_busy_and_ended(self):
        with ward.Sandbox(ttl=60) as sbx:
            started = threading.Event()
            t = threading.Thread(target=lambda: sbx.run_code(
                "print('go', flush=True)\nimport time\ntime.sleep(1)",
                on_stdout=lambda s: started.set()))
            t.start()
            self.assertTrue(started.wait(20))
            with self.assertRaises(ward.SessionBusyError) as cm:
                sbx.run_code("1")
            self.assertEqual(cm.exception.status, 409)
            t.join()
            other = ward.Sandbox.connect(sbx.sandbox_id)
            sbx.kill()
            with self.assertRaises(ward.NotFoundError):
                other.run_code("1")
        with ward.Sandbox(ttl=1) as sbx:
            wait_for("the session to expire", lambda: session_status(sbx.sandbox_id) == "expired")
            with self.assertRaises(ward.SessionEndedError) as cm:
                sbx.run_code("1")
            self.assertEqual(cm.exception.status, 410)

    def test_files_errors(self):
        """413 over --max-file, 409 onto a directory, 507 workspace full"""
        with ward.Sandbox(policy={"limits": {"workspace_size": "1M"}}) as sbx:
            with self.assertRaises(ward.PayloadTooLargeError):
                sbx.files.write("big", b"\0" * (2 << 20))
            sbx.files.write("d/f", "x")
            with self.assertRaises(ward.ConflictError) as cm:
                sbx.files.write("d", "x")
            self.assertEqual(cm.exception.code, "is_a_directory")
            with self.assertRaises(ward.WorkspaceFullError):
                for i in range(4):
                    sbx.files.write(f"f{i}", b"\0" * (900 << 10))
            with self.assertRaises(ward.NotFoundError):
                sbx.files.read("nope")
            with self.assertRaises(ward.InvalidRequestError) as cm:
                sbx.files.read("../etc/passwd")
            self.assertEqual(cm.exception.field, "path")


@NEEDS_DAEMON
class TestSandbox(unittest.TestCase):
    def test_state_contexts_list_connect(self):
        """variables persist; contexts are separate; list() and connect() see it"""
        with ward.Sandbox(ttl=120) as sbx:
            sbx.run_code("x = 41")
            self.assertEqual(sbx.run_code("x + 1").text, "42")
            ctx = sbx.create_code_context()
            self.assertEqual(sbx.run_code("print(x)", context=ctx).error.name, "NameError")
            self.assertEqual(sbx.run_code("echo $((6*7))", language="bash").stdout, "42\n")
            self.assertIn(sbx.sandbox_id, [s.sandbox_id for s in ward.Sandbox.list()])
            again = ward.Sandbox.connect(sbx.sandbox_id)
            self.assertEqual(again.run_code("x").text, "41")
            self.assertTrue(sbx.is_running())
        self.assertEqual(raw("GET", f"/v1/sessions/{sbx.sandbox_id}")[0], 404)
        self.assertFalse(sbx.kill())
        other = ward.Sandbox()
        self.assertTrue(ward.Sandbox.kill(other.sandbox_id))      # E2B's class form
        self.assertEqual(raw("GET", f"/v1/sessions/{other.sandbox_id}")[0], 404)

    def test_commands(self):
        with ward.Sandbox() as sbx:
            r = sbx.commands.run("echo $G; pwd", envs={"G": "hi"}, cwd="/tmp")
            self.assertEqual((r.stdout, r.exit_code), ("hi\n/tmp\n", 0))
            self.assertEqual(sbx.commands.run(["printf", "%s", "a b"]).stdout, "a b")
            with self.assertRaises(ward.CommandExitError) as cm:
                sbx.commands.run("echo out; exit 3")
            self.assertEqual((cm.exception.exit_code, cm.exception.stdout), (3, "out\n"))
            with self.assertRaises(ward.TimeoutError):
                sbx.commands.run("sleep 5", timeout=0.3)

    def test_background(self):
        """background commands: wait() for the result, kill() ends one"""
        with ward.Sandbox() as sbx:
            seen = []
            h = sbx.commands.run("echo one; sleep 0.2; echo two", background=True, on_stdout=seen.append)
            self.assertIsInstance(h.pid, int)
            self.assertEqual(h.wait().stdout, "one\ntwo\n")
            self.assertEqual("".join(seen), "one\ntwo\n")
            with self.assertRaises(ward.CommandExitError):
                sbx.commands.run("exit 5", background=True).wait()
            h = sbx.commands.run("sleep 30", background=True)
            self.assertTrue(h.kill())
            with self.assertRaises(ward.KilledError):
                h.wait(timeout=10)
            self.assertEqual(sbx.commands.run("pgrep -x sleep || echo none").stdout, "none\n")

    def test_files(self):
        """write/read/list/remove, str and bytes, and a streamed large file"""
        with ward.Sandbox() as sbx:
            info = sbx.files.write("dir/a.txt", "héllo")
            self.assertEqual((info.path, info.size), ("dir/a.txt", 6))
            sbx.files.write("/workspace/b.bin", b"\x00\xff")
            self.assertEqual(sbx.files.read("dir/a.txt"), "héllo")
            self.assertEqual(sbx.files.read("b.bin", format="bytes"), b"\x00\xff")
            self.assertEqual(sorted(e.name for e in sbx.files.list()), ["b.bin", "dir"])
            self.assertEqual([e.path for e in sbx.files.list("dir")], ["dir/a.txt"])
            self.assertIn("dir/a.txt", [e.path for e in sbx.files.list(depth=None)])
            self.assertTrue(sbx.files.exists("dir/a.txt"))
            big = os.urandom(700 << 10)
            sbx.files.write("big", io.BytesIO(big))        # a file object: streamed
            got = b"".join(sbx.files.read("big", format="stream"))
            self.assertEqual(got, big)
            self.assertEqual(sbx.run_code("len(open('big', 'rb').read())").text, str(len(big)))
            sbx.files.remove("dir")
            self.assertFalse(sbx.files.exists("dir/a.txt"))

    def test_session_call(self):
        """Sandbox.call: function-call mode in a session"""
        reason = function_mode_missing()
        if reason:
            self.skipTest(reason)
        with ward.Sandbox() as sbx:
            self.assertEqual(sbx.call("def add(a, b):\n    return a + b\n", "add", {"a": 1, "b": 2}), 3)


@NEEDS_DAEMON
class TestCancel(unittest.TestCase):
    """Cancellation reaches the server: its killed count rises and the
    session is free at once, long before the code would have ended."""

    SLOW = "print('started', flush=True)\nimport time\ntime.sleep(60)"

    def test_keyboard_interrupt_in_callback(self):
        before = killed_count()
        with ward.Sandbox() as sbx:
            def stop(_):
                raise KeyboardInterrupt
            t0 = time.monotonic()
            with self.assertRaises(KeyboardInterrupt):
                sbx.run_code(self.SLOW, on_stdout=stop)
            wait_for("the daemon to count the killed call", lambda: killed_count() > before)
            self.assertEqual(sbx.run_code("1 + 1").text, "2")
            self.assertLess(time.monotonic() - t0, 20)

    def test_command_interrupt(self):
        """a foreground command's KeyboardInterrupt kills it on the server"""
        before = killed_count()
        with ward.Sandbox() as sbx:
            def stop(_):
                raise KeyboardInterrupt
            with self.assertRaises(KeyboardInterrupt):
                sbx.commands.run("echo go; sleep 60", on_stdout=stop)
            wait_for("the daemon to count the killed command", lambda: killed_count() > before)
            self.assertEqual(sbx.commands.run("pgrep -x sleep || echo none").stdout, "none\n")

    def test_sigint(self):
        """a real SIGINT while the client waits in recv()"""
        before = killed_count()
        main = threading.main_thread().ident
        with ward.Sandbox() as sbx:
            def later(_):
                threading.Timer(0.2, signal.pthread_kill, (main, signal.SIGINT)).start()
            with self.assertRaises(KeyboardInterrupt):
                sbx.run_code(self.SLOW, on_stdout=later)
            wait_for("the daemon to count the killed call", lambda: killed_count() > before)
            wait_for("the session to be free", lambda: session_status(sbx.sandbox_id) == "ready")

    def test_client_deadline(self):
        """request_timeout passes: the SDK cancels the call, raises TimeoutError"""
        before = killed_count()
        with ward.Sandbox() as sbx:
            t0 = time.monotonic()
            with self.assertRaises(ward.TimeoutError) as cm:
                sbx.run_code(self.SLOW, request_timeout=1)
            self.assertLess(time.monotonic() - t0, 10)
            self.assertEqual(cm.exception.execution.verdict.status, "killed")
            self.assertEqual(cm.exception.execution.logs.stdout, ["started\n"])
            self.assertGreater(killed_count(), before)
            self.assertEqual(session_status(sbx.sandbox_id), "ready")

    def test_oneshot_interrupt(self):
        """a one-shot's KeyboardInterrupt ends its sandbox on the server"""
        before = killed_count()

        def stop(_):
            raise KeyboardInterrupt
        with self.assertRaises(KeyboardInterrupt):
            ward.run(self.SLOW, on_stdout=stop)
        wait_for("the daemon to count the killed one-shot", lambda: killed_count() > before)
        wait_for("no one-shot running", lambda: running_oneshots() == 0)

    def test_killed_by_another_client(self):
        """a DELETE from another client: the call raises KilledError"""
        with ward.Sandbox() as sbx:
            def kill_it():
                # the 409 session_busy message names the running call
                status, busy = raw("POST", f"/v1/sessions/{sbx.sandbox_id}/execute", {"code": "1"})
                eid = re.search(r"ex_[0-9a-f]+", busy["error"]["message"]).group(0)
                raw("DELETE", f"/v1/executions/{eid}")
            with self.assertRaises(ward.KilledError) as cm:
                sbx.run_code(self.SLOW, on_stdout=lambda _: threading.Thread(target=kill_it).start())
            self.assertEqual(cm.exception.execution.verdict.status, "killed")
            self.assertEqual(sbx.run_code("2").text, "2")


TCP_URL = os.environ.get("WARD_TEST_TCP_URL")


@NEEDS_DAEMON
@unittest.skipUnless(TCP_URL, "WARD_TEST_TCP_URL (the daemon's --listen address) is not set")
class TestTCP(unittest.TestCase):
    """The same client over http://host:port."""

    def test_oneshot_session_files(self):
        self.assertEqual(ward.run("6 * 7", url=TCP_URL).text, "42")
        with ward.Sandbox(url=TCP_URL) as sbx:
            sbx.run_code("y = 2")
            self.assertEqual(sbx.run_code("y * 3").text, "6")
            sbx.files.write("t.txt", b"tcp")
            self.assertEqual(sbx.files.read("t.txt"), "tcp")
            self.assertEqual(sbx.commands.run("cat t.txt").stdout, "tcp")
            with self.assertRaises(ward.PayloadTooLargeError):
                sbx.files.write("big", b"\0" * (2 << 20))
            self.assertEqual(sbx.run_code("1").text, "1")

    def test_cancel(self):
        before = killed_count()

        def stop(_):
            raise KeyboardInterrupt
        with ward.Sandbox(url=TCP_URL) as sbx:
            with self.assertRaises(KeyboardInterrupt):
                sbx.run_code("print('go', flush=True)\nimport time\ntime.sleep(60)", on_stdout=stop)
            wait_for("the daemon to count the killed call", lambda: killed_count() > before)

    def test_async(self):
        import asyncio

        async def go():
            async with ward.AsyncSandbox(url=TCP_URL) as sbx:
                ex = await sbx.run_code("print('a')")
                with self.assertRaises(ward.PayloadTooLargeError):
                    await sbx.files.write("big", b"\0" * (2 << 20))
                return ex.stdout, (await ward.run_async("1 + 1", url=TCP_URL)).text
        self.assertEqual(asyncio.run(go()), ("a\n", "2"))


@NEEDS_DAEMON
class TestReadme(unittest.TestCase):
    def test_examples_run(self):
        """the README's python examples run as written"""
        src = os.environ.get("WARD_SDK_SRC")
        if not src:
            self.skipTest("WARD_SDK_SRC (the SDK's source directory) is not set")
        import contextlib
        import tempfile
        with open(os.path.join(src, "README.md"), encoding="utf-8") as f:
            blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
        self.assertGreaterEqual(len(blocks), 2)
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "local.bin"), "wb") as f:
                f.write(os.urandom(100_000))
            cwd = os.getcwd()
            os.chdir(d)
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    for code in blocks:
                        exec(compile(code, "README.md", "exec"), {})
                with open("chart.png", "rb") as f:
                    self.assertTrue(f.read(8).startswith(b"\x89PNG"))
            finally:
                os.chdir(cwd)
