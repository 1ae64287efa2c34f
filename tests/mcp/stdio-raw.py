#!/usr/bin/env python3
# tests/mcp/stdio-raw.py — `ward mcp` spoken to as raw lines, for what an SDK
# client never sends: bad JSON, invalid requests, unknown methods, bad params,
# versions, bounds. Also keeps every byte ward writes on stdout, to check that
# nothing but JSON-RPC ever arrives there.
#   stdio-raw.py CASE   (WARD in the environment); exits 0 when the case holds.
import json
import os
import select
import subprocess
import sys
import time


class Server:
    def __init__(self, *args):
        self.p = subprocess.Popen([os.environ["WARD"], "mcp", *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE)
        self.buf = b""
        self.raw = b""  # everything read from stdout

    def send(self, line):
        if isinstance(line, (dict, list)):
            line = json.dumps(line)
        if isinstance(line, str):
            line = line.encode()
        self.p.stdin.write(line + b"\n")
        self.p.stdin.flush()

    def recv(self, timeout=30):
        end = time.time() + timeout
        while b"\n" not in self.buf:
            left = end - time.time()
            if left <= 0 or not select.select([self.p.stdout], [], [], left)[0]:
                raise SystemExit("FAIL: no answer within %ss" % timeout)
            chunk = os.read(self.p.stdout.fileno(), 65536)
            if not chunk:
                raise SystemExit("FAIL: stdout closed")
            self.buf += chunk
            self.raw += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def rpc(self, id, method, params=None):
        m = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            m["params"] = params
        self.send(m)
        return self.recv()

    def init(self, version="2025-11-25"):
        r = self.rpc(0, "initialize", {"protocolVersion": version, "capabilities": {},
                                       "clientInfo": {"name": "raw", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return r

    def close(self):
        self.p.stdin.close()
        rest = self.p.stdout.read()
        self.raw += rest
        return self.p.wait(timeout=30)


def expect(cond, what, got=None):
    if not cond:
        raise SystemExit("FAIL: %s%s" % (what, "" if got is None else ": %r" % (got,)))


def error_of(r, code, id=None, field=None):
    e = r.get("error") or {}
    expect(r.get("jsonrpc") == "2.0" and "result" not in r, "an error response", r)
    expect(e.get("code") == code, "code %d" % code, r)
    expect(r.get("id") == id, "id %r" % (id,), r)
    expect(isinstance(e.get("message"), str) and e["message"], "a message", r)
    if field is not None:
        expect((e.get("data") or {}).get("field") == field, "data.field %r" % field, r)


def case_errors():
    s = Server()
    error_of(s.rpc(1, "tools/list"), -32600, 1)                     # before initialize
    expect(s.rpc(2, "ping") == {"jsonrpc": "2.0", "id": 2, "result": {}}, "ping before initialize")
    s.init()
    s.send("{not json")
    error_of(s.recv(), -32700)
    s.send('{"jsonrpc": "2.0", "id": 3, "method": "ping", "id": 4}')  # duplicate key
    error_of(s.recv(), -32700)
    s.send("[]")
    error_of(s.recv(), -32600)
    s.send([{"jsonrpc": "2.0", "id": 5, "method": "ping"}])          # batches are gone
    error_of(s.recv(), -32600)
    s.send('"a string"')
    error_of(s.recv(), -32600)
    s.send({"jsonrpc": "1.0", "id": 6, "method": "ping"})
    error_of(s.recv(), -32600, 6, "jsonrpc")
    s.send({"jsonrpc": "2.0", "id": 7})
    error_of(s.recv(), -32600, 7, "method")
    s.send({"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"})
    error_of(s.recv(), -32600, None, "id")
    s.send({"jsonrpc": "2.0", "id": "x" * 300, "method": "ping"})
    error_of(s.recv(), -32600, None, "id")
    s.send({"jsonrpc": "2.0", "id": 8, "method": "ping", "params": [1]})
    error_of(s.recv(), -32602, 8, "params")
    error_of(s.rpc(9, "resources/list"), -32601, 9, "method")
    error_of(s.rpc(10, "initialize", {"protocolVersion": "2025-06-18"}), -32600, 10)
    call = lambda id, name, args: s.rpc(id, "tools/call", {"name": name, "arguments": args})
    error_of(call(11, "no_such_tool", {}), -32602, 11, "name")
    error_of(s.rpc(12, "tools/call", {"arguments": {}}), -32602, 12, "name")
    error_of(call(13, "run_python_code", {}), -32602, 13, "python_code")
    error_of(call(14, "run_python_code", {"python_code": 1}), -32602, 14, "python_code")
    error_of(call(15, "run_python_code", {"python_code": "1", "extra": 1}), -32602, 15, "extra")
    error_of(call(16, "run_code", {"code": "1", "language": "cobol"}), -32602, 16, "language")
    error_of(call(17, "run_code", {"code": "1"}), -32602, 17, "language")
    error_of(call(18, "run_python_code", {"python_code": "1", "timeout": "5"}), -32602, 18, "timeout")
    error_of(call(19, "run_python_code", {"python_code": "1", "timeout": 0}), -32602, 19, "timeout")
    error_of(call(20, "write_file", {"session_id": "se_0", "path": "a", "content": "x", "mode": "999"}),
             -32602, 20, "mode")
    error_of(s.rpc(21, "tools/call", {"name": "run_code", "arguments": [1]}), -32602, 21, "arguments")
    # notifications and responses are never answered: the next line is the ping's
    s.send({"jsonrpc": "2.0", "method": "notifications/whatever", "params": {}})
    s.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}})
    s.send({"jsonrpc": "2.0", "id": 55, "result": {}})
    expect(s.rpc(22, "ping").get("id") == 22, "no answer to notifications or responses")
    # a string id is echoed as sent
    expect(s.rpc("abc", "ping").get("id") == "abc", "a string id")
    expect(s.close() == 0, "exit status 0")


def case_versions():
    for asked, want in (("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"),
                        ("2024-11-05", "2025-11-25"), ("1999-01-01", "2025-11-25")):
        s = Server()
        r = s.init(asked)
        expect(r["result"]["protocolVersion"] == want, "%s -> %s" % (asked, want), r)
        expect(r["result"]["capabilities"].get("tools") is not None, "tools capability", r)
        s.close()
    s = Server()
    error_of(s.rpc(1, "initialize", {"capabilities": {}}), -32602, 1, "protocolVersion")
    s.close()


def case_bounds():
    s = Server()
    s.init()
    # a message over 16 MiB is refused once, the stream goes on
    s.send(b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "' + b"a" * (17 << 20) + b'"}}')
    error_of(s.recv(), -32600)
    expect(s.rpc(2, "ping").get("id") == 2, "the next message is served")
    # nesting beyond the bound is refused before it is parsed
    s.send("[" * 100000 + "]" * 100000)
    error_of(s.recv(), -32700)
    # a duplicate id in flight
    s.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "run_code", "arguments": {"code": "sleep 2", "language": "bash"}}})
    s.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "run_code", "arguments": {"code": "true", "language": "bash"}}})
    error_of(s.recv(), -32600, 3, "id")
    r = s.recv()
    expect(r.get("id") == 3 and r["result"]["isError"] is False, "the first call's answer", r)
    expect(s.close() == 0, "exit status 0")


def case_leak():
    s = Server()
    s.init()
    code = ("echo one; echo two > /dev/stdout; echo three > /proc/self/fd/1; "
            "for f in /proc/[0-9]*/fd/*; do echo LEAK-$f > $f; done 2>/dev/null; "
            "exec 1>&2; echo four; true")
    r = s.rpc(1, "tools/call", {"name": "run_code", "arguments": {"code": code, "language": "bash"}})
    t = r["result"]["content"][0]["text"]
    expect(all(w in t for w in ("one", "two", "three", "four")), "the output", t)
    r = s.rpc(2, "tools/call", {"name": "run_python_code", "arguments": {"python_code":
        'import os\nos.write(1, b"py-one\\n")\nprint("py-two", file=open("/dev/stdout", "w"))\n'
        'open("/proc/self/fd/1", "w").write("py-three\\n")\n'
        'for p in ("/proc/1/fd/1", "/proc/2/fd/1", "/proc/1/fd/2"):\n'
        '    try: open(p, "w").write("LEAK\\n")\n    except OSError: pass\n'}})
    t = r["result"]["content"][0]["text"]
    expect(all(w in t for w in ("py-one", "py-two", "py-three")), "python's output", t)
    s.close()
    for line in s.raw.split(b"\n"):
        if line:
            m = json.loads(line)
            expect(m.get("jsonrpc") == "2.0" and ("result" in m or "error" in m), "JSON-RPC only", line)


def case_policy():
    # --policy is the default policy: its limits hold, a request may only
    # tighten them, and a bad file stops ward mcp naming the field
    tmp = os.environ["WARD_MCP_TMP"]
    pol = os.path.join(tmp, "..", "policy.json")
    with open(pol, "w") as f:
        f.write('{"limits": {"memory": "64M", "timeout": "3s"}}')
    s = Server("--policy", pol)
    s.init()
    call = lambda id, args: s.rpc(id, "tools/call", {"name": "run_python_code", "arguments": args})
    r = call(1, {"python_code": "b = bytearray(300 << 20)"})["result"]
    t = r["content"][0]["text"]
    # with a cgroup the kernel is killed (memory_limit); without one
    # (rootless, no delegation) an rlimit makes the allocation fail
    expect(r["isError"] and (("<status>memory_limit</status>" in t and "<limit>memory: 67108864</limit>" in t)
                             or ("MemoryError" in t and "memory limit is 64 MiB" in t)),
           "the policy's memory limit", t)
    r = call(2, {"python_code": "1", "timeout": 10})["result"]
    t = r["content"][0]["text"]
    expect(r["isError"] and t.startswith("error: invalid_request:") and "(parameter: timeout)" in t,
           "a timeout above the policy's is refused naming timeout", t)
    expect(s.close() == 0, "exit status 0")
    with open(pol, "w") as f:
        f.write('{"limits": {"memory": "lots"}}')
    p = subprocess.run([os.environ["WARD"], "mcp", "--policy", pol], input=b"", capture_output=True)
    expect(p.returncode == 1 and b"limits.memory" in p.stderr and p.stdout == b"",
           "a bad policy: exit 1 naming the field, nothing on stdout", p)
    expect(os.listdir(tmp) == [], "no state directory left", os.listdir(tmp))


def case_signals():
    # the sandboxes start with no signal blocked (a session's kernel is
    # interrupted with SIGINT), and SIGTERM ends ward mcp as stdin's end does
    import signal
    tmp = os.environ["WARD_MCP_TMP"]
    s = Server()
    s.init()
    r = s.rpc(1, "tools/call", {"name": "run_code", "arguments": {
        "code": "grep -E '^Sig(Blk|Ign)' /proc/self/status", "language": "bash"}})
    t = r["result"]["content"][0]["text"]
    expect("SigBlk:\t0000000000000000" in t, "no signal blocked in the sandbox", t)
    s.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "run_code", "arguments": {"code": "sleep 600", "language": "bash"}}})
    expect(len(os.listdir(tmp)) == 1, "a state directory", os.listdir(tmp))
    s.p.send_signal(signal.SIGTERM)
    expect(s.p.wait(timeout=10) == 0, "exit status 0 after SIGTERM")
    expect(os.listdir(tmp) == [], "no state directory left", os.listdir(tmp))


def running(marker):
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and marker in open("/proc/%s/cmdline" % pid, "rb").read():
                return True
        except OSError:
            pass
    return False


def wait_for(what, cond, limit=10):
    end = time.time() + limit
    while not cond():
        expect(time.time() < end, "timed out waiting for " + what)
        time.sleep(0.05)


def case_eof():
    # stdin's end while a one-shot and a session call run: both are killed,
    # ward exits promptly, and its state directory and cgroups are gone
    tmp = os.environ["WARD_MCP_TMP"]
    marker = str(5000000 + os.getpid() % 100000)
    s = Server()
    s.init()
    s.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "run_code", "arguments": {"code": "sleep %s" % marker, "language": "bash"}}})
    sid = json.loads(s.rpc(2, "tools/call", {"name": "create_session", "arguments": {}})
                     ["result"]["content"][0]["text"])["session_id"]
    s.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "run_code", "arguments": {"code": "sleep %s1" % marker, "language": "bash",
                                          "session_id": sid}}})
    wait_for("the programs to run", lambda: running(b"sleep\0" + marker.encode()) and
             running(b"sleep\0" + marker.encode() + b"1"))
    expect(len(os.listdir(tmp)) == 1, "one state directory", os.listdir(tmp))
    pid = s.p.pid
    import glob
    cgroups = lambda: (glob.glob("/sys/fs/cgroup/*/ward/ward-%d-*" % pid) +
                       glob.glob("/sys/fs/cgroup/ward/ward-%d-*" % pid))
    had = cgroups()
    t0 = time.time()
    s.p.stdin.close()
    rc = s.p.wait(timeout=10)
    took = time.time() - t0
    expect(rc == 0, "exit status 0", rc)
    expect(took < 5, "a prompt exit", took)
    expect(not running(b"sleep\0" + marker.encode()), "no program left")
    expect(os.listdir(tmp) == [], "no state directory left", os.listdir(tmp))
    expect(cgroups() == [], "no cgroup left", cgroups())
    rest = s.p.stdout.read()
    for line in rest.split(b"\n"):
        expect(not line or json.loads(line).get("jsonrpc") == "2.0", "JSON-RPC only", line)
    print("exit took %.2fs; %d cgroups removed" % (took, len(had)))


case = globals().get("case_" + sys.argv[1])
if not case:
    raise SystemExit("FAIL: no case %s" % sys.argv[1])
case()
print("ok")
