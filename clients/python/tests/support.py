"""What the SDK's tests share: the daemon they run against (WARD_URL,
WARD_API_KEY and the WARD_TEST_* keys that t0890-python-sdk.sh makes) and a
raw HTTP client, independent of the SDK, to look at the daemon's side."""
import http.client
import json
import os
import re
import socket
import time
import unittest
import urllib.parse

URL = os.environ.get("WARD_URL")
KEY = os.environ.get("WARD_API_KEY")
# keys of the same daemon: tenant acme without the files scope; tenant
# "small", allowed one session
KEY_NOFILES = os.environ.get("WARD_TEST_KEY_NOFILES")
KEY_SMALL = os.environ.get("WARD_TEST_KEY_SMALL")
NEEDS_KEYS = unittest.skipUnless(KEY_NOFILES and KEY_SMALL,
                                 "WARD_TEST_KEY_NOFILES and WARD_TEST_KEY_SMALL are not set")
NEEDS_DAEMON = unittest.skipUnless(URL and KEY, "no daemon: WARD_URL and WARD_API_KEY are not set")


class Raw(http.client.HTTPConnection):
    def __init__(self):
        u = urllib.parse.urlsplit(URL)
        if u.scheme == "unix":
            super().__init__("localhost", timeout=30)
            self._unix = u.netloc + u.path
        else:
            super().__init__(u.hostname, u.port, timeout=30)
            self._unix = None

    def connect(self):
        if self._unix is None:
            return super().connect()
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._unix)


def raw(method, path, body=None, key=None):
    """(status, decoded JSON or text) of one request, made without the SDK."""
    c = Raw()
    try:
        h = {"Authorization": f"Bearer {key or KEY}"}
        data = json.dumps(body).encode() if body is not None else None
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        out = r.read()
        try:
            return r.status, json.loads(out)
        except ValueError:
            return r.status, out.decode("utf-8", "replace")
    finally:
        c.close()


def killed_count():
    """ward_executions_total{status="killed"} from /metrics: the daemon's
    own count of cancelled executions."""
    status, text = raw("GET", "/metrics")
    assert status == 200, (status, text)
    m = re.search(r'^ward_executions_total\{status="killed"\} (\d+)', text, re.M)
    return int(m.group(1)) if m else 0


def running_oneshots():
    status, h = raw("GET", "/healthz")
    return h["running"]


def wait_for(what, pred, limit=10.0):
    """Polls pred every 20 ms until it is true; fails after `limit` s."""
    end = time.monotonic() + limit
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= end:
            raise AssertionError(f"timed out after {limit}s waiting for {what}")
        time.sleep(0.02)


def session_status(sid):
    return raw("GET", f"/v1/sessions/{sid}")[1].get("status")


_cgroup = []


def cgroup_missing():
    """The skip reason when the daemon's sandboxes have no cgroup (rootless
    without delegation): OOM kills and refused forks are then not counted
    for the sandbox, and memory_limit / pids_limit never come. Else None."""
    if not _cgroup:
        import ward
        degraded = ward.run("1").verdict.raw.get("degraded") or []
        _cgroup.append("no usable cgroup for this user (rootless without delegation): "
                       "memory_limit and pids_limit need one" if "cgroup" in degraded else None)
    return _cgroup[0]
