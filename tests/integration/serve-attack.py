#!/usr/bin/python3
"""Attacks on `ward serve` for t0740-serve-bounds.sh, each measured.

    serve-attack.py SOCK PID ATTACK [ARGS...]

While an attack runs, the daemon's VmRSS (/proc/PID/status) is sampled and
GET /healthz is timed on a fresh connection; one JSON object goes to
stdout: {"rss_before", "rss_peak" (KiB), "healthz_max_ms", "healthz_failed",
...what the attack reports}. Loopback and the test's own socket only; every
loop is bounded.
"""

import json
import os
import resource
import socket
import sys
import threading
import time


def rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def connect(sock_path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(sock_path)
    return s


def request(sock_path, method, path, body=None, headers=(), read=True):
    """One request on its own connection: (status, body bytes), or the socket
    when read is False (the answer left unread)."""
    s = connect(sock_path)
    data = body.encode() if isinstance(body, str) else body or b""
    head = "%s %s HTTP/1.1\r\nHost: w\r\nConnection: close\r\nContent-Length: %d\r\n" % (method, path, len(data))
    head += "".join("%s: %s\r\n" % h for h in headers) + "\r\n"
    s.sendall(head.encode() + data)
    if not read:
        return s
    out = bytearray()
    while True:
        chunk = s.recv(1 << 16)
        if not chunk:
            break
        out += chunk
    s.close()
    head, _, rest = bytes(out).partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else 0
    return status, rest


class Probe(threading.Thread):
    """Samples the daemon's memory and /healthz until stopped."""

    def __init__(self, sock_path, pid):
        super().__init__(daemon=True)
        self.sock, self.pid = sock_path, pid
        self.rss_before = self.rss_peak = rss(pid)
        self.healthz_max_ms, self.healthz_failed, self.samples = 0.0, 0, 0
        self.healthz_evicted = 0
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            self.rss_peak = max(self.rss_peak, rss(self.pid))
            t = time.monotonic()
            # A connection closed before its answer was evicted as the oldest
            # unauthenticated one by a flood of new ones (a prompt refusal,
            # not a stall): counted, and asked again at once, as a client
            # would; the time includes the second try.
            ok = False
            for attempt in range(2):
                try:
                    status, _ = request(self.sock, "GET", "/healthz")
                except OSError:
                    status = 0
                ok = status == 200
                if status:
                    break
                self.healthz_evicted += attempt == 0
            self.healthz_max_ms = max(self.healthz_max_ms, (time.monotonic() - t) * 1000)
            self.healthz_failed += 0 if ok else 1
            self.samples += 1
            self.done.wait(0.1)

    def report(self, **kw):
        self.done.set()
        self.join(20)
        return dict(rss_before=self.rss_before, rss_peak=self.rss_peak,
                    healthz_max_ms=round(self.healthz_max_ms), healthz_failed=self.healthz_failed,
                    healthz_evicted=self.healthz_evicted, samples=self.samples, **kw)


def attack_stream(sock, key, mib):
    """A streaming one-shot writes MiB of control characters; its client never reads."""
    body = json.dumps({"command": ["sh", "-c", "head -c %dM /dev/zero | tr '\\0' '\\1'" % mib],
                       "policy": {"limits": {"output": "%dM" % mib}}})
    s = request(sock, "POST", "/v1/executions", body,
                [("Authorization", "Bearer " + key), ("Accept", "application/x-ndjson")], read=False)
    time.sleep(6)                        # the program is done well before: the daemon holds it all
    s.close()
    return {}


def attack_connections(sock, n, hold):
    """n connections that never finish their request's headers, held hold seconds."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, n + 64)), hard))
    conns, refused = [], 0
    for _ in range(n):
        for _ in range(50):              # a full backlog (EAGAIN) is retried, not counted
            try:
                s = connect(sock)
                s.sendall(b"POST /v1/executions HTTP/1.1\r\nHost: w\r\nX-Slow: ")
                conns.append(s)
                break
            except BlockingIOError:
                time.sleep(0.01)
            except OSError:
                refused += 1
                break
    time.sleep(hold)
    alive = 0
    for s in conns:
        s.setblocking(False)
        try:
            s.recv(1)                    # b"" (EOF) or an answer: the daemon let it go
        except BlockingIOError:
            alive += 1                   # still open: nothing to read, no EOF
        except OSError:
            pass
        s.close()
    return {"opened": len(conns), "refused": refused, "still_open": alive}


def attack_denied(sock, n, url_len):
    """n requests with no key and a long URL."""
    path = "/v1/executions/" + "a" * url_len
    codes = {}
    for _ in range(n):
        status, _ = request(sock, "GET", path)
        codes[status] = codes.get(status, 0) + 1
    return {"codes": codes}


def attack_stopped_agent(sock, key, n):
    """Session code stops the agent (pid 2); n requests of ~8 MiB follow."""
    auth = [("Authorization", "Bearer " + key)]
    status, out = request(sock, "POST", "/v1/sessions", "{}", auth)
    sid = json.loads(out)["id"]
    request(sock, "POST", "/v1/sessions/%s/commands" % sid,
            json.dumps({"cmd": "kill -STOP 2", "background": True}), auth)
    big = json.dumps({"cmd": "true " + "x" * ((8 << 20) - 4096), "background": True})
    codes = {}

    def one():
        try:
            st, _ = request(sock, "POST", "/v1/sessions/%s/commands" % sid, big, auth)
        except OSError:
            st = 0
        codes[st] = codes.get(st, 0) + 1

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join(60)
    state = {}
    for _ in range(300):                 # at most 30 s for the session to be ended
        st, out = request(sock, "GET", "/v1/sessions/" + sid, None, auth)
        state = json.loads(out)
        if state.get("status") not in ("ready", "busy", "starting"):
            break
        time.sleep(0.1)
    try:
        st, out = request(sock, "POST", "/v1/sessions/%s/execute" % sid, '{"code": "1"}', auth)
    except OSError:                      # still waiting on the stopped agent
        st, out = 0, b""
    return {"codes": codes, "session_status": state.get("status"), "reason": state.get("reason"),
            "after_code": st, "after": json.loads(out or b"{}").get("error", {}).get("message")}


def main():
    sock, pid, what = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    args = sys.argv[4:]
    probe = Probe(sock, pid)
    probe.start()
    if what == "stream":
        extra = attack_stream(sock, args[0], int(args[1]))
    elif what == "stopped-agent":
        extra = attack_stopped_agent(sock, args[0], int(args[1]))
    elif what == "connections":
        extra = attack_connections(sock, int(args[0]), float(args[1]))
    elif what == "denied":
        extra = attack_denied(sock, int(args[0]), int(args[1]))
    elif what == "watch":                # only measure, for args[0] seconds
        time.sleep(float(args[0]))
        extra = {}
    else:
        raise SystemExit("unknown attack " + what)
    print(json.dumps(probe.report(**extra)))


if __name__ == "__main__":
    main()
