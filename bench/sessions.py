"""Session figures for `ward serve`: warm execute latency, cancel latency,
and memory per idle session. A benchmark, not a test.

    bench/sessions.py SOCKET KEY [--calls N] [--idle N] [--pid DAEMON_PID]

- warm execute: one session, its python context started, then N calls of
  `print(1)` one after the other; p50/p99 in ms, measured by this client
  around each HTTP request (unix socket, keep-alive).
- cancel: a `while True: pass` call is cancelled with DELETE
  /v1/executions/ID; the time from the DELETE until the streamed verdict.
- idle memory: N sessions, each with a python context started by one call,
  then left idle; the memory they cost is the proportional set size (PSS)
  of every process under the daemon, divided by N, and the growth of the
  daemon's own RSS. Their creation gives the session create p50/p99.
- crowd (--oneshots M): a one-shot command `true` (POST /v1/executions), M
  times with no session live, then with the N idle sessions live, then
  after they ended; and a warm `print(1)` call round-robin over the N
  sessions while they are all live.
Standard library only.
"""
import argparse
import http.client
import json
import os
import socket
import statistics
import time


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path, timeout=60):
        super().__init__("ward", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def call(conn, key, method, path, body=None, headers=None):
    h = {"Authorization": "Bearer " + key}
    h.update(headers or {})
    data = json.dumps(body).encode() if body is not None else None
    if data is not None:
        h["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=h)
    r = conn.getresponse()
    raw = r.read()
    return r.status, json.loads(raw) if raw else None


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def descendants(pid):
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for k in kids.get(p, []):
            out.append(k)
            todo.append(k)
    return out


def pss_kb(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("socket")
    ap.add_argument("key")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--idle", type=int, default=10)
    ap.add_argument("--pid", type=int, default=0)
    ap.add_argument("--oneshots", type=int, default=0)
    a = ap.parse_args()
    conn = UnixHTTP(a.socket)
    out = {}

    st, s = call(conn, a.key, "POST", "/v1/sessions", {})
    assert st == 201, (st, s)
    sid = s["id"]
    st, r = call(conn, a.key, "POST", f"/v1/sessions/{sid}/execute", {"code": "x = 1"})
    assert r["status"] == "ok", r
    lat = []
    for _ in range(a.calls):
        t0 = time.perf_counter()
        st, r = call(conn, a.key, "POST", f"/v1/sessions/{sid}/execute", {"code": "print(1)"})
        lat.append((time.perf_counter() - t0) * 1000)
        assert st == 200 and r["stdout"] == "1\n", r
    out["warm_execute_ms"] = {"calls": a.calls, "p50": round(statistics.median(lat), 2),
                              "p99": round(pct(lat, 99), 2), "min": round(min(lat), 2)}
    lat = []
    for _ in range(a.calls):
        t0 = time.perf_counter()
        st, r = call(conn, a.key, "POST", f"/v1/sessions/{sid}/commands", {"cmd": ["true"]})
        lat.append((time.perf_counter() - t0) * 1000)
        assert st == 200 and r["status"] == "ok", r
    out["warm_command_ms"] = {"calls": a.calls, "p50": round(statistics.median(lat), 2),
                              "p99": round(pct(lat, 99), 2)}

    # cancel latency: DELETE until the verdict arrives on the stream. Both
    # kernels take the SIGINT and keep their state; one that does not answer
    # within the agent's 50 ms grace is killed.
    loops = {"python": "while True: pass", "node": "while (true) {}"}
    for lang, code in loops.items():
        if lang == "node" and not os.path.exists("/usr/bin/node"):
            continue
        cancels = []
        for _ in range(5):
            sconn = UnixHTTP(a.socket)
            sconn.request("POST", f"/v1/sessions/{sid}/execute",
                          body=json.dumps({"code": code, "language": lang}).encode(),
                          headers={"Authorization": "Bearer " + a.key,
                                   "Accept": "application/x-ndjson"})
            resp = sconn.getresponse()
            first = json.loads(resp.readline())
            time.sleep(0.3)
            t0 = time.perf_counter()
            st, _ = call(conn, a.key, "DELETE", f"/v1/executions/{first['id']}")
            last = None
            for line in resp:
                last = json.loads(line)
            cancels.append((time.perf_counter() - t0) * 1000)
            assert last and last["status"] == "killed", last
            sconn.close()
        out[f"cancel_{lang}_ms"] = {"runs": len(cancels), "p50": round(statistics.median(cancels), 2),
                                    "max": round(max(cancels), 2)}
    call(conn, a.key, "DELETE", f"/v1/sessions/{sid}")

    def oneshots(label):
        if not a.oneshots:
            return
        lat = []
        for _ in range(a.oneshots):
            t0 = time.perf_counter()
            st, r = call(conn, a.key, "POST", "/v1/executions", {"command": ["true"]})
            lat.append((time.perf_counter() - t0) * 1000)
            assert st == 200 and r["status"] == "ok", (st, r)
        out.setdefault("oneshot_true_ms", {})[label] = {
            "runs": a.oneshots, "p50": round(statistics.median(lat), 2),
            "p99": round(pct(lat, 99), 2)}

    if a.pid:
        time.sleep(0.5)
        oneshots("no_sessions")
        before = sum(pss_kb(p) for p in descendants(a.pid))
        rss0 = rss_kb(a.pid)
        ids, create = [], []
        for _ in range(a.idle):
            t0 = time.perf_counter()
            st, s = call(conn, a.key, "POST", "/v1/sessions", {})
            create.append((time.perf_counter() - t0) * 1000)
            assert st == 201, (st, s)
            ids.append(s["id"])
        out["session_create_ms"] = {"sessions": a.idle, "p50": round(statistics.median(create), 2),
                                    "p99": round(pct(create, 99), 2)}
        time.sleep(1.0)
        bare = sum(pss_kb(p) for p in descendants(a.pid))
        for i in ids:
            st, r = call(conn, a.key, "POST", f"/v1/sessions/{i}/execute", {"code": "x = 1"})
            assert r["status"] == "ok", r
        time.sleep(1.0)
        after = sum(pss_kb(p) for p in descendants(a.pid))
        out["idle_session_memory"] = {
            "sessions": a.idle,
            "pss_per_session_no_context_mib": round((bare - before) / a.idle / 1024, 1),
            "pss_per_session_python_context_mib": round((after - before) / a.idle / 1024, 1),
            "daemon_rss_growth_per_session_kib": round((rss_kb(a.pid) - rss0) / a.idle, 1),
            "note": "PSS of every process under the daemon: the sandbox's init, the agent, "
                    "and (after one call) a python kernel",
        }
        if a.oneshots:
            oneshots(f"{a.idle}_sessions_live")
            lat = []
            for n in range(max(a.calls, a.idle)):
                i = ids[n % len(ids)]
                t0 = time.perf_counter()
                st, r = call(conn, a.key, "POST", f"/v1/sessions/{i}/execute", {"code": "print(1)"})
                lat.append((time.perf_counter() - t0) * 1000)
                assert st == 200 and r["stdout"] == "1\n", r
            out["warm_execute_crowd_ms"] = {"sessions": a.idle, "calls": len(lat),
                                            "p50": round(statistics.median(lat), 2),
                                            "p99": round(pct(lat, 99), 2)}
        for i in ids:
            call(conn, a.key, "DELETE", f"/v1/sessions/{i}")
        if a.oneshots:
            time.sleep(1.0)
            oneshots("after_sessions_ended")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
