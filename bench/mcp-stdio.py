"""MCP over stdio: latency of `run_python_code` through `ward mcp`. A
benchmark, not a test.

    bench/mcp-stdio.py [--runs N] [--code CODE] [--session]

Starts `ward mcp` (WARD, default build/src/ward), initializes, then sends N
tools/call run_python_code requests one after the other (default `1 + 1`),
each a fresh one-shot sandbox (with --session: calls in one session), and
prints p50/p99 in ms as this client measures them around each request and
its response line. Every answer must have isError false (else it stops
with the answer). Standard library only.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--code", default="1 + 1")
    ap.add_argument("--session", action="store_true")
    a = ap.parse_args()
    ward = os.environ.get("WARD", os.path.join(SRC, "build", "src", "ward"))
    p = subprocess.Popen([ward, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    n = [0]

    def rpc(method, params):
        n[0] += 1
        p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": n[0], "method": method,
                                   "params": params}) + "\n").encode())
        p.stdin.flush()
        return json.loads(p.stdout.readline())

    rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "bench", "version": "1"}})
    args = {"python_code": a.code}
    if a.session:
        r = rpc("tools/call", {"name": "create_session", "arguments": {}})
        args["session_id"] = json.loads(r["result"]["content"][0]["text"])["session_id"]
    times = []
    for _ in range(a.runs + 3):
        t0 = time.perf_counter()
        r = rpc("tools/call", {"name": "run_python_code", "arguments": args})
        times.append((time.perf_counter() - t0) * 1000)
        if r.get("result", {}).get("isError") is not False:
            sys.exit("bench: an answer with an error: %r" % r)
    times = sorted(times[3:])  # the first calls start the warm pool
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    print("run_python_code %r%s, %d runs: p50 %.2f ms, p99 %.2f ms" % (
        a.code, " in a session" if a.session else " one-shot", len(times),
        statistics.median(times), p99))
    p.stdin.close()
    p.wait()


main()
