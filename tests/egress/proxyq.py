#!/usr/bin/python3
"""tests/egress/proxyq.py MODE ARGS — what a program inside a sandbox sees
from the egress proxy, byte for byte (curl would normalise the requests).

  get URL              GET URL through the HTTP proxy at 127.0.0.1:3128
  connect HOST:PORT    CONNECT HOST:PORT through it (an empty tunnel)
  socks HOST PORT      a SOCKS5 CONNECT to HOST (a name) through it
  tcp HOST PORT        a plain connection to HOST:PORT (captured), one GET

get and connect print "STATUS X-WARD-EGRESS" and then the body; socks
prints "socks reply N"; tcp prints the status line it got, or the exception
the connection ended with. Standard library only (runs in sandboxes).
"""
import socket
import sys

PROXY = ("127.0.0.1", 3128)


def read_all(s):
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    return data


def show(resp):
    head, _, body = resp.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(" ")[1] if " " in lines[0] else lines[0]
    mark = ""
    for line in lines[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == "x-ward-egress":
            mark = v.strip()
    sys.stdout.write("%s %s\n%s" % (status, mark, body.decode("latin-1")))


def head_and_body(s):
    """A CONNECT answer: the head, then Content-Length bytes of body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    n = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v.strip())
    while len(body) < n:
        chunk = s.recv(4096)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "get":
        url = args[0]
        hostport = url.split("://", 1)[1].split("/", 1)[0]
        s = socket.create_connection(PROXY, timeout=20)
        s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (url, hostport)).encode())
        show(read_all(s))
    elif mode == "connect":
        s = socket.create_connection(PROXY, timeout=20)
        s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (args[0], args[0])).encode())
        show(head_and_body(s))
    elif mode == "socks":
        host, port = args[0].encode(), int(args[1])
        s = socket.create_connection(PROXY, timeout=20)
        s.sendall(b"\x05\x01\x00")
        if s.recv(2) != b"\x05\x00":
            print("socks: no method accepted")
            return
        s.sendall(b"\x05\x01\x00\x03" + bytes([len(host)]) + host + port.to_bytes(2, "big"))
        r = s.recv(4)
        print("socks reply %d" % r[1] if len(r) >= 2 else "socks: closed")
    elif mode == "tcp":
        host, port = args[0], int(args[1])
        try:
            s = socket.create_connection((host, port), timeout=20)
            s.sendall(("GET / HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n" % (host, port)).encode())
            data = s.recv(4096)
            print(data.split(b"\r\n", 1)[0].decode("latin-1") if data else "closed")
        except OSError as e:
            print(type(e).__name__)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
