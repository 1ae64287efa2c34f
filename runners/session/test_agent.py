"""Tests for ward's session agent (runners/session/agent.py), run on the host.

Each test starts the agent as the supervisor does -- /usr/bin/python3 -I -u
agent.py, a fresh cwd that is also HOME, WARD_KERNEL_CONFIG in the
environment -- with WARD_RUNNERS_DIR pointing at this checkout's runners,
writes JSON requests to its stdin and checks the messages on its stdout.

    /usr/bin/python3 -m unittest discover -v -s runners/session -p 'test_*.py'
"""

import json
import os
import select
import shutil
import subprocess
import tempfile
import time
import unittest

PYTHON = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
AGENT = os.path.join(HERE, "agent.py")
RUNNERS = os.path.dirname(HERE)
HAS_NODE = os.access("/usr/bin/node", os.X_OK) or shutil.which("node") is not None

FAKE_KERNEL = r'''
import json, os, sys
def send(mt, content, parent=None):
    print(json.dumps({"msg_type": mt, "parent_id": parent, "time": 0.0, "content": content}), flush=True)
send("status", {"execution_state": "idle"})
for line in sys.stdin:
    req = json.loads(line)
    print("not json", flush=True)
    os.write(2, "oops \u00e9\n".encode()[:6]); os.write(2, "oops \u00e9\n".encode()[6:])
    send("stream", {"name": "stdout", "text": req["content"]["code"] + "\0"}, req["id"])
    send("execute_reply", {"status": "ok", "execution_count": 9}, "not-" + req["id"])
    send("execute_reply", {"status": "ok", "execution_count": 1, "language": "forged"}, req["id"])
'''


class AgentProcess:
    def __init__(self, config=None, runners=RUNNERS, timeout=20):
        self.dir = tempfile.mkdtemp(prefix="ward-agent-test-")
        self.timeout = timeout
        env = {"PATH": "/usr/bin:/bin", "HOME": self.dir, "LANG": "C.UTF-8", "WARD_RUNNERS_DIR": runners,
               "WARD_KERNEL_CONFIG": json.dumps(config or {"output_limit": 1 << 20})}
        self.stderr = open(os.path.join(self.dir, ".agent-stderr"), "w+b")
        self.proc = subprocess.Popen([PYTHON, "-I", "-u", AGENT], cwd=self.dir, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr)
        self.buf = bytearray()
        self.ids = 0
        self.status = self.read()

    def read(self, timeout=None):
        deadline = time.monotonic() + (timeout or self.timeout)
        scanned = 0                      # a line of many MiB is searched once, not once per read
        while (nl := self.buf.find(b"\n", scanned)) < 0:
            scanned = len(self.buf)
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                raise AssertionError("no message from the agent in time")
            data = os.read(self.proc.stdout.fileno(), 1 << 20)
            if not data:
                return None
            self.buf += data
        line = bytes(self.buf[:nl])
        del self.buf[:nl + 1]
        self.last_size = nl
        return json.loads(line)

    def send_raw(self, line):
        self.proc.stdin.write(line.encode())
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
                raise AssertionError("the agent exited; got %r" % out)
            out.append(msg)
            if msg["msg_type"] == reply_type and msg.get("parent_id") == rid:
                return out

    def request(self, msg_type, content, reply_type):
        return self.until(reply_type, self.send(msg_type, content))

    def execute(self, code, language="python", context="default", **kw):
        return self.request("execute_request", dict(code=code, language=language, context=context, **kw),
                            "execute_reply")

    def command(self, cmd, **kw):
        return self.request("command_request", dict(cmd=cmd, **kw), "command_reply")

    def children(self):
        with open("/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)) as f:
            return [int(p) for p in f.read().split()]

    def fds(self):
        return sorted(os.listdir("/proc/%d/fd" % self.proc.pid))

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


def text(msgs, name="stdout"):
    return "".join(m["content"]["text"] for m in msgs if m["msg_type"] == "stream" and m["content"]["name"] == name)


def result(msgs):
    found = of(msgs, "execute_result")
    return found[0]["data"]["text/plain"] if found else None


def reply(msgs):
    assert msgs[-1]["msg_type"] in ("execute_reply", "command_reply"), msgs
    return msgs[-1]["content"]


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class AgentTest(unittest.TestCase):
    config = None

    def setUp(self):
        self.a = AgentProcess(self.config)

    def tearDown(self):
        self.assertEqual(self.a.close(), b"", "the agent wrote to its own stderr")


class TestExecute(AgentTest):
    def test_status_first(self):
        st = self.a.status
        self.assertEqual((st["msg_type"], st["content"]), ("status", {
            "execution_state": "idle", "language": "session", "agent_version": "1"}))
        self.assertNotIn("parent_id", st)
        self.assertIsInstance(st["time"], float)

    def test_python_state_persists(self):
        msgs = self.a.execute("x = 41")
        self.assertEqual(msgs[0]["msg_type"], "context")
        ctx = msgs[0]["content"]
        self.assertEqual((ctx["language"], ctx["context"], ctx["state"]), ("python", "default", "started"))
        self.assertTrue(alive(ctx["pid"]))
        self.assertEqual(reply(msgs), {"status": "ok", "execution_count": 1, "stdout_truncated": False,
                                       "stderr_truncated": False, "language": "python", "context": "default",
                                       "context_new": True, "context_lost": False})
        self.assertTrue(all(m.get("parent_id") == msgs[-1]["parent_id"] for m in msgs))
        msgs = self.a.execute("print('p')\nx + 1")
        self.assertEqual((text(msgs), result(msgs)), ("p\n", "42"))
        self.assertEqual(of(msgs, "context"), [])
        self.assertEqual((reply(msgs)["execution_count"], reply(msgs)["context_new"]), (2, False))

    def test_named_contexts_are_independent(self):
        pids = [of(self.a.execute("x = %d" % n, context=name), "context")[0]["pid"]
                for n, name in ((1, "a"), (2, "b"))]
        self.assertNotEqual(pids[0], pids[1])
        self.assertEqual(result(self.a.execute("x", context="a")), "1")
        self.assertEqual(result(self.a.execute("x", context="b")), "2")
        self.assertEqual(reply(self.a.execute("x", context="c"))["status"], "error")   # NameError there

    def test_bash_and_python_in_one_agent(self):
        self.assertEqual(reply(self.a.execute("v=hello; cd /", language="bash"))["status"], "ok")
        self.a.execute("v = 'py'")
        msgs = self.a.execute("echo $v $PWD", language="bash")
        self.assertEqual((text(msgs), reply(msgs)["language"]), ("hello /\n", "bash"))
        self.assertEqual(result(self.a.execute("v")), "'py'")

    @unittest.skipUnless(HAS_NODE, "node is not installed")
    def test_node(self):
        self.a.execute("globalThis.n = 20", language="node")
        msgs = self.a.execute("n + 22", language="node")
        self.assertEqual((result(msgs), reply(msgs)["status"], reply(msgs)["language"]), ("42", "ok", "node"))

    def test_timeout_interrupts_and_keeps_state(self):
        self.a.execute("x = 7")
        t0 = time.monotonic()
        msgs = self.a.execute("while True: pass", timeout_ms=300)
        self.assertLess(time.monotonic() - t0, 1.0)
        self.assertEqual(reply(msgs)["status"], "timeout")
        self.assertFalse(reply(msgs)["context_lost"])
        errors = of(msgs, "error")        # in a one-shot's words, without the kernel's frames
        self.assertEqual([e["ename"] for e in errors], ["TimeoutError"])
        self.assertIn("wall-time limit of 300 ms", errors[0]["hint"])
        self.assertNotIn("_ward_kernel", "\n".join(errors[0]["traceback"]))
        msgs = self.a.execute("x", stop_on_error=False)   # the kernel aborts stop_on_error cells after an error
        self.assertEqual((result(msgs), reply(msgs)["context_new"]), ("7", False))

    def test_timeout_kills_a_kernel_that_ignores_sigint(self):
        pid = of(self.a.execute("x = 1"), "context")[0]["pid"]
        t0 = time.monotonic()
        msgs = self.a.execute("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass",
                              timeout_ms=200)
        self.assertLess(time.monotonic() - t0, 1.0)
        self.assertEqual(reply(msgs), {"status": "timeout", "execution_count": None, "stdout_truncated": False,
                                       "stderr_truncated": False, "language": "python", "context": "default",
                                       "context_new": False, "context_lost": True})
        msgs = self.a.execute("1 + 1")
        self.assertEqual((result(msgs), reply(msgs)["context_new"]), ("2", True))
        self.assertNotEqual(of(msgs, "context")[0]["pid"], pid)
        self.assertFalse(alive(pid))

    def test_interrupt_cancel(self):
        rid = self.a.send("execute_request", {"code": "import time\nprint('go', flush=True)\ntime.sleep(30)",
                                              "language": "python"})
        msgs = []
        while "go" not in text(msgs):
            msgs.append(self.a.read())
        t0 = time.monotonic()
        self.a.send("interrupt_request", {"reason": "cancel"})
        msgs = self.a.until("execute_reply", rid)
        self.assertLess(time.monotonic() - t0, 0.5)
        self.assertEqual(reply(msgs)["status"], "killed")
        self.a.send("interrupt_request", {"reason": "cancel"})     # nothing running: nothing happens
        self.assertEqual(result(self.a.execute("'alive'", stop_on_error=False)), "'alive'")

    def test_kernel_death(self):
        self.a.execute("x = 1")
        msgs = self.a.execute("import os; os._exit(3)")
        self.assertEqual(reply(msgs), {"status": "died", "execution_count": None, "exit_code": 3, "signal": None,
                                       "stdout_truncated": False, "stderr_truncated": False,
                                       "language": "python", "context": "default", "context_new": False,
                                       "context_lost": True})
        msgs = self.a.execute("'x' in globals()")
        self.assertEqual((result(msgs), reply(msgs)["context_new"]), ("False", True))
        self.assertEqual(len(of(msgs, "context")), 1)

    def test_large_cell(self):
        """More than a pipe holds: the agent writes the rest as the kernel reads it."""
        msgs = self.a.execute("s = '" + "a" * 3000000 + "'\nlen(s)")
        self.assertEqual(result(msgs), "3000000")

    def test_busy(self):
        rid = self.a.send("execute_request", {"code": "import time\ntime.sleep(30)", "language": "python"})
        msgs = self.a.command("echo no")
        self.assertEqual([e["ename"] for e in of(msgs, "error")], ["Busy"])
        self.assertEqual(reply(msgs)["status"], "error")
        self.assertEqual(reply(self.a.command("true", background=True))["status"], "running")
        self.a.send("interrupt_request", {"reason": "timeout"})
        self.assertEqual(reply(self.a.until("execute_reply", rid))["status"], "timeout")

    def test_bad_requests(self):
        self.a.send_raw("not json\n[1, 2]\n")
        self.assertEqual([self.a.read()["content"]["ename"] for _ in range(2)], ["ProtocolError"] * 2)
        self.a.send_raw('{"id": "x1", "msg_type": "nope"}\n')
        msg = self.a.read()
        self.assertEqual((msg["parent_id"], msg["content"]["ename"]), ("x1", "ProtocolError"))
        for content in ([], {"code": 1, "language": "python"}, {"code": "1", "language": "cobol"}):
            msgs = self.a.request("execute_request", content, "execute_reply")
            self.assertEqual([e["ename"] for e in of(msgs, "error")], ["ProtocolError"])
            self.assertEqual(reply(msgs)["status"], "error")
        msgs = self.a.command({"not": "a command"})
        self.assertEqual((of(msgs, "error")[0]["ename"], reply(msgs)["status"]), ("ProtocolError", "error"))
        self.assertEqual(result(self.a.execute("6 * 7")), "42")


TOOL = """
import __main__
class MyTool:
    def run(self, numbers, scale=1):
        return {"sum": sum(numbers) * scale, "seen": getattr(__main__, "x", None)}
def slow():
    while True:
        pass
def greet():
    return GREETING
"""


class TestCall(AgentTest):
    def call(self, function, args=None, **kw):
        return self.a.request("call_request", dict(code=TOOL, language="python", context="default",
                                                   function=function, args=args, **kw), "call_reply")

    def test_call_in_the_sessions_context(self):
        self.a.execute("x = 41")
        msgs = self.call("MyTool.run", {"numbers": [1, 2], "scale": 2})
        self.assertEqual(msgs[-1]["msg_type"], "call_reply")
        self.assertEqual(msgs[-1]["content"], {"status": "ok", "value": {"sum": 6, "seen": 41},
                                               "language": "python", "context": "default",
                                               "context_new": False, "context_lost": False})
        self.assertEqual(result(self.a.execute("x + 1")), "42")   # the context goes on

    def test_typed_errors_and_globals(self):
        err = self.call("nope")[-1]["content"]
        self.assertEqual((err["status"], err["error"]["ename"], err["context_new"]),
                         ("error", "FunctionNotFound", True))
        err = self.call("MyTool.run", {"wrong": 1})[-1]["content"]
        self.assertEqual(err["error"]["ename"], "ArgumentError")
        ok = self.call("greet", [], globals={"GREETING": "hi"})[-1]["content"]
        self.assertEqual((ok["status"], ok["value"]), ("ok", "hi"))

    def test_call_timeout_is_a_timeout(self):
        msgs = self.call("slow", timeout_ms=300)
        self.assertEqual(msgs[-1]["content"]["status"], "timeout")
        self.assertEqual(msgs[-1]["content"]["error"]["ename"], "TimeoutError")
        self.assertEqual(msgs[-1]["content"]["context_lost"], False)

    def test_bad_call_request(self):
        msgs = self.a.request("call_request", {"code": TOOL, "language": "python", "function": 3}, "call_reply")
        self.assertEqual(of(msgs, "error")[0]["ename"], "ProtocolError")
        self.assertEqual(msgs[-1]["content"]["status"], "error")


class TestGlobals(AgentTest):
    def test_globals_before_the_cell(self):
        msgs = self.a.execute("print(a + b)\na * b", globals={"a": 6, "b": 7})
        self.assertEqual((text(msgs), result(msgs), reply(msgs)["status"]), ("13\n", "42", "ok"))
        msgs = self.a.execute("1\n1/0", globals={"a": 1})
        tb = of(msgs, "error")[0]["traceback"]
        self.assertTrue(any("line 2" in line for line in tb), tb)   # no line moved

    def test_bad_globals_refused(self):
        msgs = self.a.execute("1", globals=[1])
        self.assertEqual(of(msgs, "error")[0]["ename"], "ProtocolError")
        self.assertEqual(reply(msgs)["status"], "error")


class TestFakeKernel(unittest.TestCase):
    def test_relay(self):
        runners = tempfile.mkdtemp(prefix="ward-runners-")
        os.mkdir(os.path.join(runners, "python"))
        with open(os.path.join(runners, "python", "kernel.py"), "w") as f:
            f.write(FAKE_KERNEL)
        shutil.copy(os.path.join(RUNNERS, "languages.json"), runners)
        a = AgentProcess(runners=runners)
        try:
            msgs = a.execute("code!")
            self.assertEqual(text(msgs), "code!\0")    # U+0000 relayed as text
            bad = of(msgs, "protocol_error")            # a line that is not a message is never stdout
            self.assertEqual([(e["ename"], e["evalue"]) for e in bad], [(
                "KernelProtocolError", "the python kernel sent a line that is not a protocol message "
                "(8 bytes); it was dropped")])
            types = [m["msg_type"] for m in msgs]
            self.assertLess(types.index("protocol_error"), types.index("stream"))  # in order, for this request
            self.assertEqual(msgs[types.index("protocol_error")]["parent_id"], msgs[-1]["parent_id"])
            self.assertEqual(text(msgs, "stderr"), "oops \u00e9\n")
            stale = [m for m in msgs if m["msg_type"] == "execute_reply" and m["parent_id"] != msgs[-1]["parent_id"]]
            self.assertEqual(len(stale), 1)              # relayed unchanged: not this request's reply
            self.assertEqual(reply(msgs)["language"], "python")
        finally:
            self.assertEqual(a.close(), b"")
            shutil.rmtree(runners)


class TestRegistry(unittest.TestCase):
    """The agent's languages are runners/languages.json's, as the C side's are
    (tests/unit/t-languages.c checks that side against the same file)."""

    def test_agent_reads_the_registry(self):
        import importlib.util
        spec = importlib.util.spec_from_file_location("ward_agent", AGENT)
        agent = importlib.util.module_from_spec(spec)
        old = os.environ.get("WARD_RUNNERS_DIR")
        os.environ["WARD_RUNNERS_DIR"] = RUNNERS
        try:
            spec.loader.exec_module(agent)
        finally:
            if old is None:
                del os.environ["WARD_RUNNERS_DIR"]
            else:
                os.environ["WARD_RUNNERS_DIR"] = old
        with open(os.path.join(RUNNERS, "languages.json")) as f:
            langs = json.load(f)["languages"]
        self.assertEqual(list(agent.KERNELS), [l["name"] for l in langs])
        for l in langs:
            want = [a.replace("{runners}", RUNNERS, 1) for a in l["argv"]]
            self.assertEqual(agent.KERNELS[l["name"]], want)
            for a in l["aliases"]:
                self.assertEqual(agent.ALIASES[a], l["name"])

    def test_a_language_is_a_registry_row(self):
        runners = tempfile.mkdtemp(prefix="ward-runners-")
        os.mkdir(os.path.join(runners, "fake"))
        with open(os.path.join(runners, "fake", "kernel.py"), "w") as f:
            f.write(FAKE_KERNEL)
        with open(os.path.join(runners, "languages.json"), "w") as f:
            json.dump({"languages": [{"name": "fake", "aliases": ["fk"], "extension": ".fk",
                                      "argv": [PYTHON, "-I", "-u", "{runners}/fake/kernel.py"]}]}, f)
        a = AgentProcess(runners=runners)
        try:
            self.assertEqual(text(a.execute("code!", language="fk")), "code!\0")
            bad = of(a.execute("1", language="python"), "error")
            self.assertEqual([e["ename"] for e in bad], ["ProtocolError"])
            self.assertIn("language (fake)", bad[0]["evalue"])
        finally:
            a.close()
            shutil.rmtree(runners)


class TestCommands(AgentTest):
    config = {"output_limit": 1000}

    def test_foreground(self):
        msgs = self.a.command("echo out; echo err >&2; exit 4")
        self.assertEqual((text(msgs), text(msgs, "stderr")), ("out\n", "err\n"))
        r = reply(msgs)
        self.assertEqual((r["status"], r["exit_code"], r["signal"]), ("error", 4, None))
        self.assertIsInstance(r["wall_ms"], int)
        os.mkdir(os.path.join(self.a.dir, "sub"))
        msgs = self.a.command(["sh", "-c", "pwd; echo $FOO ${WARD_KERNEL_CONFIG-unset}"], cwd="sub",
                              env={"FOO": "bar"})
        self.assertEqual((text(msgs), reply(msgs)["status"]),
                         (os.path.join(self.a.dir, "sub") + "\nbar unset\n", "ok"))
        r = reply(self.a.command("kill -9 $$"))
        self.assertEqual((r["status"], r["exit_code"], r["signal"]), ("signaled", None, 9))

    def test_cannot_start(self):
        msgs = self.a.command("true", cwd="missing")
        self.assertEqual(of(msgs, "error")[0]["ename"], "FileNotFoundError")
        self.assertEqual((reply(msgs)["status"], reply(msgs)["exit_code"]), ("error", 127))
        msgs = self.a.command(["no-such-program-ward"])
        self.assertEqual((reply(msgs)["status"], reply(msgs)["exit_code"]), ("error", 127))

    def test_timeout(self):
        t0 = time.monotonic()
        r = reply(self.a.command("sleep 30", timeout_ms=200))
        self.assertLess(time.monotonic() - t0, 1.0)
        self.assertEqual((r["status"], r["signal"]), ("timeout", 9))

    def test_grandchild_does_not_hold_the_reply(self):
        t0 = time.monotonic()
        msgs = self.a.command("sleep 30 & echo started")
        self.assertLess(time.monotonic() - t0, 1.0)
        self.assertEqual((text(msgs), reply(msgs)["status"]), ("started\n", "ok"))

    def test_background(self):
        r = reply(self.a.command("echo one; echo two >&2; sleep 30", background=True))
        self.assertEqual((r["status"], r["command_id"]), ("running", "c1"))
        for _ in range(100):
            st = self.a.request("command_status_request", {"command_id": "c1"}, "command_status_reply")[-1]["content"]
            if st["stderr"]:
                break
            time.sleep(0.02)
        self.assertEqual((st["state"], st["status"], st["stdout"], st["stderr"]),
                         ("running", "running", "one\n", "two\n"))
        kill = self.a.request("command_kill_request", {"command_id": "c1"}, "command_kill_reply")[-1]["content"]
        self.assertEqual(kill, {"command_id": "c1", "state": "killed"})
        for _ in range(100):
            st = self.a.request("command_status_request", {"command_id": "c1"}, "command_status_reply")[-1]["content"]
            if st["state"] == "exited":
                break
            time.sleep(0.02)
        self.assertEqual((st["status"], st["exit_code"], st["signal"]), ("killed", None, 9))
        self.assertFalse(alive(r["pid"]))
        kill = self.a.request("command_kill_request", {"command_id": "c1"}, "command_kill_reply")[-1]["content"]
        self.assertEqual(kill["state"], "exited")
        st = self.a.request("command_status_request", {"command_id": "c9"}, "command_status_reply")[-1]["content"]
        self.assertEqual(st, {"command_id": "c9", "state": "unknown"})

    def test_background_output_is_capped(self):
        self.a.command("head -c 5000 /dev/zero | tr '\\0' a; echo done >&2", background=True)
        for _ in range(100):
            st = self.a.request("command_status_request", {"command_id": "c1"}, "command_status_reply")[-1]["content"]
            if st["state"] == "exited":
                break
            time.sleep(0.02)
        self.assertEqual((st["status"], st["stdout"], st["stdout_truncated"], st["stderr"], st["stderr_truncated"]),
                         ("ok", "a" * 1000, True, "done\n", False))

    def test_background_status_always_fits_a_line(self):
        # 12 MiB of NULs escape to 72 MiB of JSON: over the daemon's 64 MiB line cap
        self.a.close()
        self.a = AgentProcess({"output_limit": 16 << 20}, timeout=60)
        self.a.command("head -c 12582912 /dev/zero", background=True)
        for _ in range(200):
            st = self.a.request("command_status_request", {"command_id": "c1"}, "command_status_reply")[-1]["content"]
            if st["state"] == "exited":
                break
            time.sleep(0.05)
        self.assertEqual((st["state"], st["status"], st["stdout_truncated"], st.get("reply_truncated")),
                         ("exited", "ok", True, True))
        self.assertLessEqual(self.a.last_size, (64 << 20) - (64 << 10))
        self.assertGreater(len(st["stdout"]), 5 << 20)
        self.assertEqual(set(st["stdout"]), {"\0"})

    def test_too_many_background_commands(self):
        for i in range(64):
            self.assertEqual(reply(self.a.command("sleep 30", background=True))["command_id"], "c%d" % (i + 1))
        msgs = self.a.command("true", background=True)
        self.assertEqual((of(msgs, "error")[0]["ename"], reply(msgs)["status"]), ("TooManyCommands", "error"))
        self.a.request("command_kill_request", {"command_id": "c5"}, "command_kill_reply")
        for _ in range(100):
            st = self.a.request("command_status_request", {"command_id": "c5"}, "command_status_reply")
            if st[-1]["content"]["state"] == "exited":
                break
            time.sleep(0.02)
        self.assertEqual(reply(self.a.command("true", background=True))["command_id"], "c65")
        st = self.a.request("command_status_request", {"command_id": "c5"}, "command_status_reply")[-1]["content"]
        self.assertEqual(st["state"], "unknown")           # the oldest finished record made room


class TestLifecycle(AgentTest):
    def test_no_zombies_or_leaked_fds(self):
        fds = self.a.fds()
        self.a.command("echo hi")
        self.a.execute("import os; os._exit(0)")
        self.a.command("true", background=True)
        self.a.command("sleep 0.05")
        deadline = time.monotonic() + 2
        while (self.a.children() or self.a.fds() != fds) and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertEqual((self.a.children(), self.a.fds()), ([], fds))

    def test_shutdown(self):
        pid = of(self.a.execute("1"), "context")[0]["pid"]
        bg = reply(self.a.command("sleep 30", background=True))["pid"]
        rid = self.a.send("shutdown_request", {})
        self.assertEqual([m["content"] for m in self.a.until("shutdown_reply", rid)], [{}])
        self.assertEqual(self.a.proc.wait(5), 0)
        self.assertFalse(alive(pid) or alive(bg))

    def test_eof_shuts_down(self):
        pid = of(self.a.execute("1", language="bash"), "context")[0]["pid"]
        self.a.proc.stdin.close()
        self.assertIsNone(self.a.read())
        self.assertEqual(self.a.proc.wait(5), 0)
        self.assertFalse(alive(pid))


if __name__ == "__main__":
    unittest.main()
