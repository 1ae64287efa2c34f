"""Drives `ward serve` over its unix socket with concurrent clients.

    api-load.py SOCKET KEY N CLIENTS HOSTILE_PERCENT [--lang python|command]

Sends N one-shot executions from CLIENTS threads; every HOSTILE_PERCENT-th
in a hundred is hostile (fork bomb, memory bomb, output flood, endless loop,
in turn). Prints one JSON object: counts by status, benign failures (with
their verdicts), p50/p99 latency of the benign ones in ms, and executions per
second. Standard library only.
"""
import http.client
import json
import socket
import sys
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


HOSTILE = [
    {"language": "python", "code": "import os\nwhile True: os.fork()",
     "policy": {"limits": {"pids": 16}}, "timeout": 5},
    {"language": "python", "code": "b = []\nwhile True: b.append(bytearray(8 << 20))",
     "policy": {"limits": {"memory": "64M"}}, "timeout": 5},
    {"language": "python", "code": "while True: print('x' * 65536)",
     "policy": {"limits": {"output": "64K"}}, "timeout": 2},
    {"language": "python", "code": "while True: pass", "timeout": 1},
]


def main():
    sock, key, n, clients, pct = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    jobs = list(range(n))
    lock = threading.Lock()
    statuses, benign_fail, lat = {}, [], []

    def body(i):
        if pct and i % 100 < pct:
            return HOSTILE[i % len(HOSTILE)], False
        return {"language": "python", "code": "print(%d * 2)" % i}, True

    def worker():
        conn = None
        while True:
            with lock:
                if not jobs:
                    break
                i = jobs.pop()
            req, benign = body(i)
            t0 = time.monotonic()
            try:
                conn = conn or UnixHTTP(sock)
                conn.request("POST", "/v1/executions", body=json.dumps(req),
                             headers={"Authorization": "Bearer " + key,
                                      "Content-Type": "application/json"})
                resp = conn.getresponse()
                v = json.loads(resp.read())
            except Exception as e:  # a broken connection is a failure too
                conn = None
                v = {"status": "client_error", "error": str(e)}
            dt = (time.monotonic() - t0) * 1000
            if not isinstance(v, dict):
                v = {"status": "client_error", "error": "not a JSON object"}
            st = v.get("status") or "http_%s" % ((v.get("error") or {}).get("code"))
            with lock:
                statuses[st] = statuses.get(st, 0) + 1
                if benign:
                    lat.append(dt)
                    if st != "ok" or v.get("stdout") != "%d\n" % (i * 2):
                        benign_fail.append({"i": i, "verdict": v})

    start = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - start
    lat.sort()
    pick = lambda q: round(lat[min(len(lat) - 1, int(q * len(lat)))], 1) if lat else None
    print(json.dumps({"answered": sum(statuses.values()), "statuses": statuses,
                      "benign_failures": benign_fail[:5],
                      "benign_failed": len(benign_fail), "p50_ms": pick(0.5), "p99_ms": pick(0.99),
                      "per_second": round(n / wall, 1), "wall_s": round(wall, 1)}))


main()
