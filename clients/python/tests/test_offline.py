"""Tests that need no daemon: configuration, the mapping of every API error
and every verdict status to its exception, result accessors, the wheel."""
import base64
import hashlib
import json
import os
import sys
import tempfile
import unittest
import zipfile

import ward
from ward import _core, errors


class TestConfig(unittest.TestCase):
    def test_urls(self):
        """WARD_URL: unix:// and http:// forms, a bare path, bad schemes"""
        e = _core.Endpoint("unix:///run/ward/ward.sock", "k")
        self.assertEqual((e.scheme, e.path), ("unix", "/run/ward/ward.sock"))
        e = _core.Endpoint("http://127.0.0.1:8080", "k")
        self.assertEqual((e.scheme, e.host, e.port), ("http", "127.0.0.1", 8080))
        self.assertEqual(_core.Endpoint("/tmp/w.sock", "k").path, "/tmp/w.sock")
        with self.assertRaises(ward.WardError) as cm:
            _core.Endpoint("ftp://x", "k")
        self.assertEqual(cm.exception.field, "url")

    def test_environment(self):
        """WARD_URL and WARD_API_KEY come from the environment unless given"""
        old = {k: os.environ.get(k) for k in ("WARD_URL", "WARD_API_KEY")}
        try:
            os.environ["WARD_URL"] = "unix:///x/y.sock"
            os.environ["WARD_API_KEY"] = "wk_a_b"
            e = _core.Endpoint()
            self.assertEqual((e.path, e.api_key), ("/x/y.sock", "wk_a_b"))
            self.assertEqual(e.headers()["Authorization"], "Bearer wk_a_b")
            e = _core.Endpoint("http://localhost:1", "other")
            self.assertEqual((e.host, e.api_key), ("localhost", "other"))
            del os.environ["WARD_URL"]
            self.assertEqual(_core.Endpoint().path, "/run/ward/ward.sock")
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def test_plain_http_warns(self):
        """a key sent over plain HTTP to a host that is not loopback warns"""
        import warnings
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            _core.Endpoint("http://127.0.0.1:8080", "k")
            _core.Endpoint("http://localhost:8080", "k")
            self.assertEqual(w, [])
            _core.Endpoint("http://192.0.2.1:8080", "k")
            self.assertEqual(len(w), 1)
            self.assertIn("in clear", str(w[0].message))

    def test_no_key_said(self):
        """a 401 when no key was set says how to set one"""
        body = b'{"error":{"code":"unauthorized","message":"a valid API key is required","field":null}}'
        old = os.environ.pop("WARD_API_KEY", None)
        try:
            e = _core.Endpoint("unix:///x").refusal(401, body)
        finally:
            if old is not None:
                os.environ["WARD_API_KEY"] = old
        self.assertIsInstance(e, ward.AuthenticationError)
        self.assertIn("WARD_API_KEY", e.message)
        self.assertNotIn("WARD_API_KEY", _core.Endpoint("unix:///x", "k").refusal(401, body).message)

    def test_no_injection(self):
        """ids and keys that would break the request line or a header are refused"""
        for bad in ("../v1/sessions", "se_1 HTTP/1.1", "se_1\r\nX: y", "", "..", "a" * 65):
            with self.assertRaises(ward.WardError) as cm:
                ward.Sandbox.connect(bad, url="unix:///nonexistent", api_key="k")
            self.assertEqual(cm.exception.field, "sandbox_id")
        with self.assertRaises(ward.WardError) as cm:
            _core.Endpoint("unix:///x", "wk_a_b\r\nX-Evil: 1")
        self.assertEqual(cm.exception.field, "api_key")

    def test_deadlines(self):
        """the client's deadline: request_timeout, else timeout + 10 s, else the default"""
        self.assertEqual(_core.deadline_for(None, 1, 60), 1.0)
        self.assertEqual(_core.deadline_for(5, None, 60), 15.0)
        self.assertEqual(_core.deadline_for(None, None, 60), 60.0)
        self.assertEqual(_core.deadline_for(None, None, None), 300.0)

    def test_unreachable(self):
        """a socket nobody listens on is WardConnectionError (a ConnectionError)"""
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(ward.WardConnectionError) as cm:
                ward.run("1", url=f"unix://{d}/none.sock", api_key="x")
            self.assertIsInstance(cm.exception, ConnectionError)


class TestErrorMapping(unittest.TestCase):
    # every error code of docs/api.md and its class
    CASES = [
        (400, "invalid_json", ward.InvalidRequestError), (400, "too_deep", ward.InvalidRequestError),
        (400, "invalid_request", ward.InvalidRequestError),
        (400, "command_failed", ward.InvalidRequestError),
        (400, "path_not_allowed", ward.InvalidRequestError), (400, "not_a_file", ward.InvalidRequestError),
        (401, "unauthorized", ward.AuthenticationError), (403, "forbidden", ward.PermissionDeniedError),
        (403, "permission_denied", ward.PermissionDeniedError), (404, "not_found", ward.NotFoundError),
        (405, "method_not_allowed", ward.InvalidRequestError), (409, "session_busy", ward.SessionBusyError),
        (409, "is_a_directory", ward.ConflictError), (409, "file_busy", ward.ConflictError),
        (409, "changed", ward.ConflictError), (410, "session_ended", ward.SessionEndedError),
        (413, "body_too_large", ward.PayloadTooLargeError),
        (413, "file_too_large", ward.PayloadTooLargeError),
        (429, "quota_exceeded", ward.QuotaExceededError), (500, "setup_failed", ward.ServerError),
        (500, "internal", ward.ServerError), (503, "shutting_down", ward.ServiceUnavailableError),
        (503, "files_busy", ward.ServiceUnavailableError), (503, "uploads_busy", ward.ServiceUnavailableError),
        (503, "agent_busy", ward.ServiceUnavailableError), (504, "agent_timeout", ward.AgentTimeoutError),
        (507, "workspace_full", ward.WorkspaceFullError),
    ]

    def test_every_code(self):
        """each API error code maps to its class, with the message and field"""
        for status, code, cls in self.CASES:
            body = json.dumps({"error": {"code": code, "message": f"m {code}", "field": "f.x"}}).encode()
            e = errors.api_error(status, body)
            self.assertIs(type(e), cls, code)
            self.assertIsInstance(e, ward.APIError)
            self.assertEqual((e.status, e.code, e.message, e.field), (status, code, f"m {code}", "f.x"))

    def test_quota_names_it(self):
        body = b'{"error":{"code":"quota_exceeded","message":"no","field":"tenant_memory"}}'
        self.assertEqual(errors.api_error(429, body).quota, "tenant_memory")

    def test_not_json(self):
        """an answer without a JSON body (libmicrohttpd's 431) still maps"""
        e = errors.api_error(431, b"<html>too large</html>")
        self.assertIsInstance(e, ward.APIError)
        self.assertIn("too large", e.message)

    def test_every_verdict_status(self):
        """every status of docs/verdict.md but ok/error raises its class"""
        expect = {"timeout": ward.TimeoutError, "cpu_timeout": ward.CpuTimeoutError,
                  "memory_limit": ward.MemoryLimitError, "pids_limit": ward.PidsLimitError,
                  "output_limit": ward.OutputLimitError, "disk_limit": ward.DiskLimitError,
                  "signaled": ward.SignaledError, "killed": ward.KilledError,
                  "policy_violation": ward.PolicyViolationError,
                  "setup_failed": ward.SetupFailedError}
        for status in ("ok", "error"):
            st = _core.StreamState()
            st.feed({"event": "verdict", "status": status})
            self.assertEqual(_core.finish_execution(st).verdict.status, status)
        for status, cls in expect.items():
            st = _core.StreamState()
            st.feed({"event": "verdict", "status": status, "limit": {"name": "n", "value": 1},
                     "error": {"name": "E", "value": "v", "traceback": [], "hint": "do less"}})
            with self.assertRaises(cls) as cm:
                _core.finish_execution(st)
            e = cm.exception
            self.assertIsInstance(e, ward.VerdictError)
            self.assertEqual(e.execution.verdict.status, status)
            self.assertEqual(e.hint, "do less")
            self.assertEqual(e.limit, {"name": "n", "value": 1})
            # and returned, with .error set, when asked
            self.assertEqual(_core.finish_execution(st, False).error.hint, "do less")
        self.assertTrue(issubclass(ward.TimeoutError, TimeoutError))


class TestResults(unittest.TestCase):
    def test_accessors(self):
        png = base64.b64encode(b"\x89PNG fake").decode()
        r = ward.Result({"text/plain": "1", "image/png": png, "application/json": {"a": 1},
                         "text/html": "<b>1</b>"}, True)
        self.assertEqual((r.text, r.png, r.json, r.html, r.svg), ("1", png, {"a": 1}, "<b>1</b>", None))
        self.assertEqual(r.png_bytes(), b"\x89PNG fake")
        self.assertEqual(sorted(r.formats()), ["html", "json", "png", "text"])

    def test_stream_state(self):
        """events become logs, results and callbacks; the verdict wins"""
        seen = []
        st = _core.StreamState(on_stdout=seen.append, on_result=lambda r: seen.append(r.text))
        for ev in ({"event": "start", "id": "ex_1"}, {"event": "stream", "name": "stdout", "text": "a"},
                   {"event": "result", "type": "execute_result", "data": {"text/plain": "2"}},
                   {"event": "verdict", "status": "ok", "stdout": "a", "results": [{"text/plain": "2"}],
                    "cells": [{"execution_count": 3, "outputs": [{"type": "execute_result", "result": 0}]}]}):
            st.feed(ev)
        ex = _core.finish_execution(st)
        self.assertEqual(seen, ["a", "2"])
        self.assertEqual((ex.execution_id, ex.text, ex.execution_count, ex.logs.stdout),
                         ("ex_1", "2", 3, ["a"]))


class TestWheel(unittest.TestCase):
    def test_wheel_record(self):
        """the in-tree backend's wheel has a RECORD that matches its files"""
        src = os.environ.get("WARD_SDK_SRC")
        if not src:
            self.skipTest("WARD_SDK_SRC (the SDK's source directory) is not set")
        sys.path.insert(0, src)
        try:
            import ward_build
        finally:
            sys.path.remove(src)
        with tempfile.TemporaryDirectory() as d:
            name = ward_build.build_wheel(d)
            with zipfile.ZipFile(os.path.join(d, name)) as z:
                names = set(z.namelist())
                record = z.read(next(n for n in names if n.endswith("/RECORD"))).decode()
                listed = set()
                for line in record.splitlines():
                    path, digest, size = line.rsplit(",", 2)
                    listed.add(path)
                    if path.endswith("/RECORD"):
                        continue
                    data = z.read(path)
                    want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                    self.assertEqual((digest, int(size)), (f"sha256={want}", len(data)), path)
                self.assertEqual(listed, names)
                self.assertIn("ward/__init__.py", names)
