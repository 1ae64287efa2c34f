"""The Python SDK's overhead per run_code over a warm session, against raw
HTTP on the same daemon and the same session. A benchmark, not a test.

    bench/sdk.py SOCKET KEY [--runs N] [--code CODE]

One session, its python context started, then N rounds; each round makes
one call of each kind in a random order (interleaved, so the machine's
drift hits them alike), timed by this client around the call:

- raw: http.client, one keep-alive connection, POST .../execute, the plain
  JSON answer read and parsed (what curl-like clients do);
- raw-ndjson: the same with Accept: application/x-ndjson, every line parsed
  (the SDK's wire format);
- sdk: ward.Sandbox.run_code (NDJSON, an Execution built, callbacks none);
- sdk-async: ward.AsyncSandbox.run_code on one event loop.

Prints p50/p99 per kind, and the SDK's p50 over raw's and over raw
NDJSON's, the same wire (ratio, and added milliseconds). Standard library only (the SDK from clients/python).
"""
import argparse
import asyncio
import http.client
import json
import os
import random
import socket
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
import ward  # noqa: E402


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=60)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("socket")
    ap.add_argument("key")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--code", default="print(1)")
    a = ap.parse_args()
    url = f"unix://{a.socket}"
    sbx = ward.Sandbox(url=url, api_key=a.key, ttl=600)
    loop = asyncio.new_event_loop()
    asbx = loop.run_until_complete(ward.AsyncSandbox.connect(sbx.sandbox_id, url=url, api_key=a.key))
    conn = UnixHTTP(a.socket)
    path = f"/v1/sessions/{sbx.sandbox_id}/execute"
    body = json.dumps({"code": a.code}).encode()
    hdr = {"Authorization": f"Bearer {a.key}", "Content-Type": "application/json"}

    def raw():
        conn.request("POST", path, body=body, headers=hdr)
        r = conn.getresponse()
        v = json.loads(r.read())
        assert r.status == 200 and v["status"] == "ok", v

    def raw_ndjson():
        conn.request("POST", path, body=body, headers=dict(hdr, Accept="application/x-ndjson"))
        r = conn.getresponse()
        last = None
        for line in r.read().splitlines():
            last = json.loads(line)
        assert r.status == 200 and last["event"] == "verdict" and last["status"] == "ok", last

    def sdk():
        assert sbx.run_code(a.code).verdict.status == "ok"

    def sdk_async():
        assert loop.run_until_complete(asbx.run_code(a.code)).verdict.status == "ok"

    kinds = {"raw": raw, "raw-ndjson": raw_ndjson, "sdk": sdk, "sdk-async": sdk_async}
    times = {k: [] for k in kinds}
    try:
        for f in kinds.values():          # warm-up: the context, the connections
            for _ in range(5):
                f()
        for _ in range(a.runs):
            order = list(kinds)
            random.shuffle(order)
            for k in order:
                t0 = time.perf_counter()
                kinds[k]()
                times[k].append((time.perf_counter() - t0) * 1000)
    finally:
        loop.run_until_complete(asbx.close())
        loop.close()
        conn.close()
        sbx.kill()
    print(f"# ward SDK {ward.__version__}, python {sys.version.split()[0]}, {a.runs} rounds of "
          f"{a.code!r}, one warm session, interleaved; ms")
    print(f"{'kind':12} {'p50':>8} {'p99':>8} {'mean':>8}")
    for k, xs in times.items():
        print(f"{k:12} {pct(xs, 50):8.3f} {pct(xs, 99):8.3f} {statistics.mean(xs):8.3f}")
    for ref, ks in (("raw", ("raw-ndjson", "sdk", "sdk-async")), ("raw-ndjson", ("sdk", "sdk-async"))):
        base = pct(times[ref], 50)
        for k in ks:
            p = pct(times[k], 50)
            print(f"# {k} / {ref} p50: {p / base:.2f} ({p - base:+.3f} ms)")


if __name__ == "__main__":
    main()
