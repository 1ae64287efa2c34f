#!/usr/bin/python3
"""tests/egress/servers.py DIR [--name NAME=IP ...] [--rebind NAME] [--npm-host HOST]

The real servers the egress tests talk to, on loopback only, with ports
the kernel picks (several test runs on one machine never collide):

  http    127.0.0.1:P   a static tree (a PEP 503 index, an npm registry, a
                        git repository over "dumb" HTTP) plus /echo and any
                        path ending in /echo (the request's headers as JSON),
                        /redirect?to=URL (302) and /big?bytes=N (N bytes,
                        streamed)
  https   127.0.0.1:Q   the same, over TLS with a certificate for the test
                        names, signed by a test CA made here (DIR/tls/ca.pem)
  leak    127.0.0.2:P and 127.0.0.2:Q   any connection is a leak: logged to
                        DIR/leaks.log
  dns     UDP 127.0.0.1:R   A records from the name map; the rebind name
                        answers 127.0.0.1 and 127.0.0.2 in turn; every query
                        logged to DIR/dns.log ("NAME TYPE" a line)

Every request's method, path and headers, and every TLS handshake's server
name, go to DIR/requests.log (one JSON object a line). When everything listens, DIR/servers.json appears (written
whole, by rename): the ports and the paths. DIR/pid holds the pid. The
process exits on SIGTERM or when its parent dies. Python standard library
and the openssl, npm and git programs only; nothing here touches a network
other than loopback or asks any DNS.
"""
import base64
import ctypes
import hashlib
import http.server
import io
import json
import os
import shutil
import signal
import socket
import socketserver
import ssl
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
import zipfile

DEFAULT_NAMES = ["allowed.test", "other.test", "pypi.test", "npm.test", "git.test",
                 "api.test", "plain.test", "rebind.test", "leak.test", "denied.test"]
LOG_LOCK = threading.Lock()


def log_line(path, text):
    with LOG_LOCK:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text + "\n")


def run(cmd, cwd=None, env=None):
    r = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        sys.exit("servers.py: %s failed:\n%s" % (" ".join(cmd), r.stdout.decode(errors="replace")))
    return r.stdout.decode()


# --- the test CA and the server's certificate (openssl CLI) ---------------

def make_tls(d, names):
    os.makedirs(d, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run(["openssl", "req", "-x509", *ec, "-keyout", d + "/ca.key", "-out", d + "/ca.pem",
         "-days", "2", "-subj", "/CN=ward egress test CA",
         "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
    run(["openssl", "req", "-new", *ec, "-keyout", d + "/server.key", "-out", d + "/server.csr",
         "-subj", "/CN=" + names[0]])
    san = ",".join(["DNS:" + n for n in names] + ["IP:127.0.0.1"])
    with open(d + "/ext.cnf", "w") as f:
        f.write("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                "extendedKeyUsage=serverAuth\nsubjectAltName=" + san + "\n")
    run(["openssl", "x509", "-req", "-in", d + "/server.csr", "-CA", d + "/ca.pem",
         "-CAkey", d + "/ca.key", "-CAcreateserial", "-out", d + "/server.pem", "-days", "2",
         "-extfile", d + "/ext.cnf"])
    os.chmod(d + "/ca.pem", 0o644)


# --- a PEP 503 index with one hand-made wheel -----------------------------

def b64_digest(data):
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(www):
    files = {
        "wardpkg/__init__.py": b"VALUE = 42\n",
        "wardpkg-1.0.dist-info/METADATA":
            b"Metadata-Version: 2.1\nName: wardpkg\nVersion: 1.0\nSummary: ward egress test package\n",
        "wardpkg-1.0.dist-info/WHEEL":
            b"Wheel-Version: 1.0\nGenerator: ward-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join("%s,sha256=%s,%d\n" % (n, b64_digest(c), len(c)) for n, c in files.items())
    record += "wardpkg-1.0.dist-info/RECORD,,\n"
    files["wardpkg-1.0.dist-info/RECORD"] = record.encode()
    name = "wardpkg-1.0-py3-none-any.whl"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for n, c in files.items():
            z.writestr(zipfile.ZipInfo(n, (2020, 1, 1, 0, 0, 0)), c)
    data = buf.getvalue()
    os.makedirs(www + "/packages", exist_ok=True)
    os.makedirs(www + "/simple/wardpkg", exist_ok=True)
    with open(www + "/packages/" + name, "wb") as f:
        f.write(data)
    with open(www + "/simple/index.html", "w") as f:
        f.write('<!DOCTYPE html>\n<html><body>\n<a href="wardpkg/">wardpkg</a>\n</body></html>\n')
    with open(www + "/simple/wardpkg/index.html", "w") as f:
        f.write('<!DOCTYPE html>\n<html><body>\n<a href="../../packages/%s#sha256=%s">%s</a>\n'
                '</body></html>\n' % (name, hashlib.sha256(data).hexdigest(), name))


# --- a static npm registry with one packed package ------------------------

def make_npm(www, tmp, base):
    src = tmp + "/npm-src"
    os.makedirs(src, exist_ok=True)
    pkg = {"name": "ward-npm-test", "version": "1.0.0", "description": "ward egress test package",
           "main": "index.js", "license": "MIT"}
    with open(src + "/package.json", "w") as f:
        json.dump(pkg, f)
    with open(src + "/index.js", "w") as f:
        f.write("module.exports = { value: 42 };\n")
    env = dict(os.environ, npm_config_cache=tmp + "/npm-cache", npm_config_update_notifier="false",
               npm_config_audit="false", npm_config_fund="false", HOME=tmp)
    out = run(["npm", "pack", "--silent", "--pack-destination", tmp], cwd=src, env=env)
    tgz_name = out.strip().splitlines()[-1]
    with open(tmp + "/" + tgz_name, "rb") as f:
        tgz = f.read()
    os.makedirs(www + "/ward-npm-test/-", exist_ok=True)
    with open(www + "/ward-npm-test/-/" + tgz_name, "wb") as f:
        f.write(tgz)
    version = dict(pkg, dist={
        "tarball": "%s/ward-npm-test/-/%s" % (base, tgz_name),
        "shasum": hashlib.sha1(tgz).hexdigest(),
        "integrity": "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()})
    doc = {"name": "ward-npm-test", "dist-tags": {"latest": "1.0.0"},
           "versions": {"1.0.0": version}}
    # served at /ward-npm-test (a directory holds the tarballs: index.json)
    with open(www + "/ward-npm-test/index.json", "w") as f:
        json.dump(doc, f)


# --- a git repository over dumb HTTP --------------------------------------

def make_git(www, tmp):
    src = tmp + "/git-src"
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", HOME=tmp, GIT_AUTHOR_NAME="ward",
               GIT_AUTHOR_EMAIL="ward@example.test", GIT_COMMITTER_NAME="ward",
               GIT_COMMITTER_EMAIL="ward@example.test")
    run(["git", "init", "-q", "-b", "main", src], env=env)
    with open(src + "/README", "w") as f:
        f.write("ward egress test repository\n")
    run(["git", "add", "README"], cwd=src, env=env)
    run(["git", "commit", "-q", "-m", "first"], cwd=src, env=env)
    run(["git", "clone", "-q", "--bare", src, www + "/repo.git"], env=env)
    run(["git", "update-server-info"], cwd=www + "/repo.git", env=env)


# --- HTTP and HTTPS -------------------------------------------------------

class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ward-fixture/1"
    log_path = None
    kind = "http"
    big = b"x" * 65536

    def log_message(self, fmt, *args):
        pass

    def record(self):
        log_line(self.log_path, json.dumps({
            "server": self.kind, "method": self.command, "path": self.path,
            "headers": [[k, v] for k, v in self.headers.items()]}))

    def send_body(self, code, body, ctype, extra=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        self.record()
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query)
        if u.path == "/echo" or u.path.endswith("/echo"):
            body = json.dumps({"server": self.kind, "method": self.command, "path": self.path,
                               "headers": {k: v for k, v in self.headers.items()}}).encode()
            return self.send_body(200, body, "application/json")
        if u.path == "/redirect":
            to = q.get("to", ["/"])[0]
            return self.send_body(302, b"", "text/plain", [("Location", to)])
        if u.path == "/big":
            n = int(q.get("bytes", ["0"])[0])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            while n > 0:
                chunk = self.big if n >= len(self.big) else self.big[:n]
                self.wfile.write(chunk)
                n -= len(chunk)
            return None
        if u.path == "/ward-npm-test":
            with open(self.directory + "/ward-npm-test/index.json", "rb") as f:
                return self.send_body(200, f.read(), "application/json")
        return super().do_GET()

    def do_HEAD(self):
        self.do_GET()

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0") or 0)
        data = self.rfile.read(n) if n > 0 else b""
        self.record()
        body = json.dumps({"server": self.kind, "method": "POST", "path": self.path,
                           "headers": {k: v for k, v in self.headers.items()},
                           "body_bytes": len(data)}).encode()
        self.send_body(200, body, "application/json")


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = False
    request_queue_size = 128
    tls = None

    def __init__(self, addr, handler):
        super().__init__(addr, handler, bind_and_activate=False)
        self.server_bind()
        self.server_activate()

    def finish_request(self, request, client_address):
        # the TLS handshake runs on the connection's own thread, bounded
        if self.tls is not None:
            request.settimeout(10)
            try:
                request = self.tls.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                return
            request.settimeout(None)
        super().finish_request(request, client_address)


def leak_server(addr, log):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(addr)
    s.listen(64)

    def one(c, peer):
        c.settimeout(2)
        try:
            data = c.recv(4096)
        except OSError:
            data = b""
        log_line(log, json.dumps({"port": addr[1], "peer": peer[0],
                                  "first": data[:200].decode("latin-1")}))
        try:
            c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nleak\n")
        except OSError:
            pass
        c.close()

    def loop():
        while True:
            c, peer = s.accept()
            threading.Thread(target=one, args=(c, peer), daemon=True).start()
    return s, loop


# --- DNS ------------------------------------------------------------------

def parse_qname(pkt, off):
    labels = []
    while True:
        n = pkt[off]
        off += 1
        if n == 0:
            return ".".join(labels), off
        if n >= 64 or off + n > len(pkt):
            raise ValueError("bad name")
        labels.append(pkt[off:off + n].decode("ascii", "replace"))
        off += n


def dns_server(names, rebind, log):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    turn = [0]

    def answer(pkt):
        tid, flags, qd = struct.unpack(">HHH", pkt[:6])
        name, off = parse_qname(pkt, 12)
        qtype, qclass = struct.unpack(">HH", pkt[off:off + 4])
        question = pkt[12:off + 4]
        lname = name.lower()
        log_line(log, "%s %d" % (lname, qtype))
        rd = flags & 0x0100
        addrs, rcode = [], 0
        if lname == rebind:
            if qtype == 1:
                addrs = ["127.0.0.1" if turn[0] % 2 == 0 else "127.0.0.2"]
                turn[0] += 1
        elif lname in names:
            if qtype == 1:
                addrs = [names[lname]]
        else:
            rcode = 3
        head = struct.pack(">HHHHHH", tid, 0x8400 | rd | 0x0080 | rcode, 1, len(addrs), 0, 0)
        ans = b"".join(b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 0, 4) + socket.inet_aton(a)
                       for a in addrs)
        return head + question + ans

    def loop():
        while True:
            pkt, peer = s.recvfrom(2048)
            try:
                s.sendto(answer(pkt), peer)
            except (ValueError, struct.error, IndexError):
                pass
    return s, loop


# --- the process ----------------------------------------------------------

def die_with_parent():
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except OSError:
        pass
    if os.getppid() != parent:
        os._exit(0)

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)
    threading.Thread(target=watch, daemon=True).start()


def bind_pair():
    """An HTTP server on 127.0.0.1:P and a leak listener on 127.0.0.2:P."""
    for _ in range(50):
        srv = Server(("127.0.0.1", 0), Handler)
        port = srv.server_address[1]
        try:
            leak = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            leak.bind(("127.0.0.2", port))
            leak.close()
            return srv, port
        except OSError:
            srv.server_close()
    sys.exit("servers.py: no port free on both 127.0.0.1 and 127.0.0.2")


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__.splitlines()[0])
    d = os.path.abspath(args.pop(0))
    names = {n: "127.0.0.1" for n in DEFAULT_NAMES}
    names["leak.test"] = "127.0.0.2"
    rebind, npm_host = "rebind.test", "npm.test"
    while args:
        opt = args.pop(0)
        val = args.pop(0) if args else sys.exit("servers.py: %s needs a value" % opt)
        if opt == "--name":
            k, _, v = val.partition("=")
            names[k.lower()] = v
        elif opt == "--rebind":
            rebind = val.lower()
        elif opt == "--npm-host":
            npm_host = val
        else:
            sys.exit("servers.py: unknown option " + opt)
    die_with_parent()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    os.makedirs(d, exist_ok=True)
    www, tmp = d + "/www", d + "/build"
    os.makedirs(www, exist_ok=True)
    os.makedirs(tmp, exist_ok=True)
    with open(d + "/pid", "w") as f:
        f.write("%d\n" % os.getpid())
    for log in ("requests.log", "leaks.log", "dns.log"):
        open(d + "/" + log, "w").close()

    make_tls(d + "/tls", sorted(names) + [rebind])
    http_srv, http_port = bind_pair()
    https_srv, https_port = bind_pair()
    make_wheel(www)
    make_npm(www, tmp, "http://%s:%d" % (npm_host, http_port))
    make_git(www, tmp)

    for srv, kind in ((http_srv, "http"), (https_srv, "https")):
        srv.RequestHandlerClass = type("H_" + kind, (Handler,), {
            "kind": kind, "log_path": d + "/requests.log",
            "__init__": lambda self, *a, **k: Handler.__init__(self, *a, directory=www, **k)})
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(d + "/tls/server.pem", d + "/tls/server.key")
    # every handshake's server name, so a test can tell what reached it
    ctx.sni_callback = lambda sock, name, _ctx: log_line(
        d + "/requests.log", json.dumps({"server": "https", "sni": name}))
    https_srv.tls = ctx

    loops = [http_srv.serve_forever, https_srv.serve_forever]
    for port in (http_port, https_port):
        loops.append(leak_server(("127.0.0.2", port), d + "/leaks.log")[1])
    dns_sock, dns_loop = dns_server(names, rebind, d + "/dns.log")
    loops.append(dns_loop)
    for fn in loops:
        threading.Thread(target=fn, daemon=True).start()

    info = {"http": http_port, "https": https_port, "dns": dns_sock.getsockname()[1],
            "leak_addr": "127.0.0.2", "ca": d + "/tls/ca.pem", "dir": d,
            "requests_log": d + "/requests.log", "leaks_log": d + "/leaks.log",
            "dns_log": d + "/dns.log", "pid": os.getpid(), "names": names, "rebind": rebind}
    # the build directory goes before servers.json appears: nothing moves
    # under the test once it starts
    shutil.rmtree(tmp, ignore_errors=True)
    with open(d + "/servers.json.tmp", "w") as f:
        json.dump(info, f, indent=1)
    os.rename(d + "/servers.json.tmp", d + "/servers.json")
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
