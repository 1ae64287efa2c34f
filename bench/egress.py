#!/usr/bin/python3
"""bench/egress.py — the egress proxy's figures, measured from one side of
it (bench/egress.sh runs it on the host and inside a sandbox).

  egress.py download MODE HOST PORT BYTES RUNS   one JSON line: MB/s (median, best)
  egress.py latency MODE HOST PORT N             one JSON line: p50, p90 (ms)
  egress.py suite HOST PORT BYTES RUNS N         both, for forward, connect and
                                                 transparent, in one process

MODE: direct (connect to HOST:PORT), forward (plain HTTP through the proxy
at 127.0.0.1:3128), connect (an HTTP CONNECT tunnel through it),
transparent (connect to HOST:PORT from a sandbox: the connection is
captured). A download fetches /big?bytes=BYTES on a fresh connection; a
latency sample is one fresh connection up to the first byte of the answer
to GET /echo. The same code runs on both sides, so the difference is the
proxy. Standard library only.
"""
import json
import socket
import statistics
import sys
import time

PROXY = ("127.0.0.1", 3128)


def open_conn(mode, host, port, addr):
    """A connection on which a plain GET for `path` may be written; and the
    request-target to use."""
    if mode in ("forward", "connect"):
        s = socket.create_connection(PROXY, timeout=30)
    else:
        s = socket.create_connection((addr, port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if mode == "connect":
        s.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host.encode(), port, host.encode(), port))
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                raise OSError("the proxy closed the tunnel")
            head += chunk
        if b" 200" not in head.split(b"\r\n", 1)[0]:
            raise OSError("CONNECT refused: %r" % head.split(b"\r\n", 1)[0])
    prefix = b"http://%s:%d" % (host.encode(), port) if mode == "forward" else b""
    return s, prefix


def request(s, prefix, host, port, path):
    s.sendall(b"GET %s%s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n"
              % (prefix, path.encode(), host.encode(), port))


def download(mode, host, port, nbytes, addr):
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    t0 = time.perf_counter()
    s, prefix = open_conn(mode, host, port, addr)
    request(s, prefix, host, port, "/big?bytes=%d" % nbytes)
    got = 0
    while True:
        n = s.recv_into(view)
        if n == 0:
            break
        got += n
    dt = time.perf_counter() - t0
    s.close()
    if got < nbytes:
        raise OSError("short download: %d of %d bytes" % (got, nbytes))
    return nbytes / dt / 1e6


def latency_one(mode, host, port, addr):
    t0 = time.perf_counter()
    s, prefix = open_conn(mode, host, port, addr)
    request(s, prefix, host, port, "/echo")
    if not s.recv(1):
        raise OSError("no answer")
    dt = time.perf_counter() - t0
    s.close()
    return dt * 1000


def figures(what, mode, host, port, args, addr):
    out = {"what": what, "mode": mode}
    if what == "download":
        nbytes, runs = int(args[0]), int(args[1])
        rates = [download(mode, host, port, nbytes, addr) for _ in range(runs)]
        out.update(bytes=nbytes, runs=runs, mb_s_median=round(statistics.median(rates), 1),
                   mb_s_best=round(max(rates), 1))
    else:
        n = int(args[0])
        for _ in range(min(20, n)):
            latency_one(mode, host, port, addr)  # warm-up: caches, the proxy's threads
        ms = sorted(latency_one(mode, host, port, addr) for _ in range(n))
        out.update(n=n, p50_ms=round(ms[n // 2], 3), p90_ms=round(ms[min(n - 1, n * 9 // 10)], 3))
    print(json.dumps(out), flush=True)


def main():
    if sys.argv[1] == "suite":
        # one process, one lookup: every figure of the sandbox side
        host, port, nbytes, runs, n = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
        addr = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
        for what, args in (("download", [nbytes, runs]), ("latency", [n])):
            for mode in ("forward", "connect", "transparent"):
                figures(what, mode, host, port, args, addr)
        return
    what, mode, host, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    # resolved once, outside the timings (in a sandbox: by the DNS stub)
    addr = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)[0][4][0] \
        if mode in ("direct", "transparent") else None
    if what not in ("download", "latency"):
        sys.exit(__doc__)
    figures(what, mode, host, port, sys.argv[5:], addr)


if __name__ == "__main__":
    main()
