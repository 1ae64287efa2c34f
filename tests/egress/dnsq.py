#!/usr/bin/python3
"""tests/egress/dnsq.py ADDR PORT NAME [A|AAAA] — one DNS query over UDP.

Prints "rcode=N answers=ADDR,ADDR" (the A or AAAA records of the answer),
or "no answer: REASON" when none came within two seconds. Standard library
only: it runs inside sandboxes, where nothing else may be installed.
"""
import os
import socket
import struct
import sys


def query(name, qtype):
    tid = int.from_bytes(os.urandom(2), "big")
    q = struct.pack(">HHHHHH", tid, 0x0100, 1, 0, 0, 0)
    for label in name.rstrip(".").split("."):
        q += bytes([len(label)]) + label.encode("ascii")
    return tid, q + b"\x00" + struct.pack(">HH", qtype, 1)


def skip_name(pkt, off):
    while True:
        n = pkt[off]
        if n & 0xC0 == 0xC0:
            return off + 2
        off += 1
        if n == 0:
            return off
        off += n


def main():
    addr, port, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    qtype = {"A": 1, "AAAA": 28}[sys.argv[4] if len(sys.argv) > 4 else "A"]
    tid, pkt = query(name, qtype)
    s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    try:
        s.sendto(pkt, (addr, port))
        resp = s.recv(4096)
    except OSError as e:
        print("no answer: %s" % (e.strerror or type(e).__name__))
        return
    rid, flags, qd, an = struct.unpack(">HHHH", resp[:8])
    if rid != tid:
        print("no answer: wrong id")
        return
    off = 12
    for _ in range(qd):
        off = skip_name(resp, off) + 4
    answers = []
    for _ in range(an):
        off = skip_name(resp, off)
        rtype, _cls, _ttl, rdlen = struct.unpack(">HHIH", resp[off:off + 10])
        off += 10
        rdata = resp[off:off + rdlen]
        off += rdlen
        if rtype == 1:
            answers.append(socket.inet_ntop(socket.AF_INET, rdata))
        elif rtype == 28:
            answers.append(socket.inet_ntop(socket.AF_INET6, rdata))
    print("rcode=%d answers=%s" % (flags & 0xF, ",".join(answers)))


if __name__ == "__main__":
    main()
