"""One-shot figures for `ward serve`: latency of a one-shot execution, one
client, and throughput with several clients. A benchmark, not a test.

    bench/oneshot.py SOCKET KEY [--runs N] [--gap MS] [--clients N] [--seconds S]

- print(1): N one-shot POST /v1/executions of python `print(1)`, one after
  the other on one keep-alive connection; p50/p99 in ms, measured by this
  client around each HTTP request (unix socket); with --gap, the client
  waits that long between requests (a client that thinks: the pool refills
  meanwhile), else they go back to back.
- numpy: the same with `import numpy; numpy.arange(10).sum()` (skipped
  when numpy is not importable on this host).
- throughput: --clients threads, each with its own connection, send
  print(1) one-shots for --seconds; completed ones per second.
Every answer must be status "ok" (else it stops with the answer).
Standard library only.
"""
import argparse
import http.client
import json
import socket
import subprocess
import threading
import time


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path, timeout=60):
        super().__init__("ward", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def oneshot(conn, key, code):
    body = json.dumps({"language": "python", "code": code}).encode()
    conn.request("POST", "/v1/executions", body=body,
                 headers={"Authorization": "Bearer " + key,
                          "Content-Type": "application/json"})
    r = conn.getresponse()
    d = json.loads(r.read())
    if r.status != 200 or d.get("status") != "ok":
        raise SystemExit(f"unexpected answer {r.status}: {json.dumps(d)[:400]}")
    return d


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def latency(sock, key, code, runs, gap_ms=0):
    conn = UnixHTTP(sock)
    for _ in range(3):  # warm the connection and the pool's first refills
        oneshot(conn, key, code)
    lat = []
    for _ in range(runs):
        t = time.perf_counter()
        oneshot(conn, key, code)
        lat.append((time.perf_counter() - t) * 1000)
        if gap_ms:
            time.sleep(gap_ms / 1000)
    conn.close()
    return {"p50_ms": round(pct(lat, 50), 2), "p99_ms": round(pct(lat, 99), 2), "runs": runs}


def throughput(sock, key, clients, seconds):
    done = [0] * clients
    stop = time.monotonic() + seconds
    errors = []

    def client(i):
        conn = UnixHTTP(sock)
        try:
            while time.monotonic() < stop:
                oneshot(conn, key, "print(1)")
                done[i] += 1
        except BaseException as e:  # noqa: B902 - reported below
            errors.append(repr(e))

    th = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    t = time.monotonic()
    for x in th:
        x.start()
    for x in th:
        x.join()
    el = time.monotonic() - t
    if errors:
        raise SystemExit("throughput: " + errors[0])
    return {"clients": clients, "per_second": round(sum(done) / el, 1), "total": sum(done)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("socket")
    ap.add_argument("key")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--gap", type=float, default=0)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=10)
    a = ap.parse_args()
    out = {"print": latency(a.socket, a.key, "print(1)", a.runs, a.gap)}
    if subprocess.run(["/usr/bin/python3", "-c", "import numpy"], capture_output=True).returncode == 0:
        out["numpy"] = latency(a.socket, a.key, "import numpy; numpy.arange(10).sum()",
                               a.runs, a.gap)
    if a.clients:
        out["throughput"] = throughput(a.socket, a.key, a.clients, a.seconds)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
