"""The synchronous transport: http.client over a unix socket or TCP, a
small pool of keep-alive connections, JSON requests, NDJSON streams with
cancellation. Knows nothing of sandboxes."""
import http.client
import json
import socket
import ssl
import threading
import time

from . import errors
from ._core import NDJSON, POOL_IDLE, POOL_MAX, broken_stream


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self._path)
        except BaseException:
            s.close()
            raise
        self.sock = s


class _Watchdog:
    """One thread for every stream's deadline (a threading.Timer per call
    would start a thread per call): a heap of (when, seq, callback)."""

    def __init__(self):
        self._heap = []
        self._seq = 0
        self._cv = threading.Condition()
        self._thread = None

    def add(self, delay, fn):
        import heapq
        entry = [time.monotonic() + delay, 0, fn]
        with self._cv:
            self._seq += 1
            entry[1] = self._seq
            heapq.heappush(self._heap, entry)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ward-deadlines",
                                                daemon=True)
                self._thread.start()
            self._cv.notify()
        return entry

    @staticmethod
    def cancel(entry):
        entry[2] = None

    def _run(self):
        import heapq
        while True:
            with self._cv:
                while self._heap and self._heap[0][2] is None:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cv.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._cv.wait(wait)
                    continue
                fn = heapq.heappop(self._heap)[2]
            if fn is not None:
                try:
                    fn()
                except Exception:
                    pass


_WATCHDOG = _Watchdog()


class Transport:
    """One endpoint's connections. Thread-safe: a request takes a pooled
    connection (or makes one) and gives it back when its answer was read
    whole."""

    def __init__(self, endpoint, connect_timeout=10.0):
        self.ep = endpoint
        self.connect_timeout = connect_timeout
        self._idle = []          # (connection, time it went idle)
        self._lock = threading.Lock()

    # -- connections ---------------------------------------------------------
    def _new(self):
        ep = self.ep
        if ep.scheme == "unix":
            return _UnixConnection(ep.path, self.connect_timeout)
        if ep.scheme == "https":
            return http.client.HTTPSConnection(ep.host, ep.port, timeout=self.connect_timeout,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(ep.host, ep.port, timeout=self.connect_timeout)

    def _take(self):
        now = time.monotonic()
        with self._lock:
            while self._idle:
                conn, since = self._idle.pop()
                if now - since < POOL_IDLE:
                    return conn, True
                conn.close()
        return self._new(), False

    def _give(self, conn):
        with self._lock:
            if len(self._idle) < POOL_MAX:
                self._idle.append((conn, time.monotonic()))
                return
        conn.close()

    def close(self):
        with self._lock:
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()

    # -- requests --------------------------------------------------------------
    def _send(self, method, path, body, headers, timeout):
        """Sends a request and returns (connection, response) once the
        status line and headers are in. A reused connection the daemon had
        closed meanwhile is retried once on a fresh one (nothing was run:
        the daemon never read the request)."""
        path = self.ep.prefix + path
        hdrs = self.ep.headers(headers)
        for attempt in (0, 1):
            conn, reused = self._take()
            try:
                conn.timeout = timeout
                if conn.sock is not None:
                    conn.sock.settimeout(timeout)
                conn.request(method, path, body=body, headers=hdrs)
                return conn, conn.getresponse()
            except (BrokenPipeError, ConnectionResetError) as e:
                # the daemon may have refused the request before its body was
                # all sent (413 from Content-Length) and closed: its answer
                # is still there to read
                try:
                    resp = conn.getresponse()
                    return conn, resp
                except (http.client.HTTPException, OSError):
                    pass
                conn.close()
                if reused and attempt == 0 and not hasattr(body, "read"):
                    continue
                raise errors.WardConnectionError(f"{self.ep.url}: {e}") from None
            except http.client.RemoteDisconnected as e:
                conn.close()
                if reused and attempt == 0 and not hasattr(body, "read"):
                    continue
                raise errors.WardConnectionError(f"{self.ep.url}: {e}") from None
            except (FileNotFoundError, ConnectionRefusedError) as e:
                conn.close()
                raise errors.WardConnectionError(
                    f"cannot reach the ward daemon at {self.ep.url}: {e.strerror or e}") from None
            except socket.timeout:
                conn.close()
                raise errors.WardConnectionError(f"{self.ep.url}: no answer within {timeout} s") \
                    from None
            except BaseException:
                conn.close()
                raise
        raise AssertionError("unreachable")

    def request(self, method, path, body=None, headers=None, timeout=60.0, raw=False):
        """A whole answer: the decoded JSON (or bytes with raw=True), and the
        headers when raw. HTTP errors raise their APIError."""
        hdrs = dict(headers or {})
        if body is not None and not isinstance(body, (bytes, bytearray)) and not hasattr(body, "read"):
            body = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        conn, resp = self._send(method, path, body, hdrs, timeout)
        try:
            data = resp.read()
        except BaseException:
            conn.close()
            raise
        if resp.will_close:
            conn.close()
        else:
            self._give(conn)
        if resp.status >= 400:
            raise self.ep.refusal(resp.status, data)
        if raw:
            return data, resp
        return json.loads(data) if data else None

    def download(self, path, timeout=60.0, chunk=1 << 16):
        """A file's bytes as an iterator of chunks (the connection is closed
        if the iterator is dropped early)."""
        conn, resp = self._send("GET", path, None, {}, timeout)
        if resp.status >= 400:
            data = resp.read()
            conn.close()
            raise self.ep.refusal(resp.status, data)

        def chunks():
            done = False
            try:
                while True:
                    b = resp.read(chunk)
                    if not b:
                        done = True
                        return
                    yield b
            finally:
                if done and not resp.will_close:
                    self._give(conn)
                else:
                    conn.close()
        return chunks()

    def stream(self, method, path, body, state, deadline):
        """Runs an NDJSON call: feeds each event to `state` (a StreamState)
        until the verdict. After `deadline` seconds the execution is
        cancelled on the server (state.cancelled = "timeout") and its
        verdict, `killed`, still read. A KeyboardInterrupt (or any exception,
        a callback's included) cancels it too, then propagates."""
        data = json.dumps(body).encode()
        hdrs = {"Content-Type": "application/json", "Accept": NDJSON}
        # the socket waits longer than the deadline: the cancel ends the stream
        conn, resp = self._send(method, path, data, hdrs, deadline + 30.0)
        if resp.status >= 400:
            err = resp.read()
            conn.close() if resp.will_close else self._give(conn)
            raise self.ep.refusal(resp.status, err)
        state.execution_id = resp.getheader("Ward-Execution-Id")
        timer = _WATCHDOG.add(deadline, lambda: self._on_deadline(state, conn))
        ok = broken = False
        try:
            while state.verdict is None:
                try:
                    line = resp.readline()
                except (socket.timeout, http.client.HTTPException, OSError) as e:
                    broken = e
                    break
                if not line:
                    broken = "no verdict"
                    break
                if line.strip():
                    state.feed(json.loads(line))
            if not broken:
                try:
                    resp.read()     # the chunked body's end
                    ok = True
                except (socket.timeout, http.client.HTTPException, OSError):
                    pass
        except BaseException:
            # KeyboardInterrupt, a callback's exception: end it on the server
            if state.cancelled is None:
                state.cancelled = "cancel"
                self.cancel(state)
            raise
        finally:
            _WATCHDOG.cancel(timer)
            if ok and not resp.will_close and resp.isclosed():
                self._give(conn)
            else:
                conn.close()
        if broken:
            if state.cancelled is None:
                self.cancel(state)
            raise broken_stream(state, self.ep.url, broken)
        return state

    def _on_deadline(self, state, conn):
        if state.verdict is not None or state.cancelled is not None:
            return
        state.cancelled = "timeout"
        if not self.cancel(state):
            # no id to cancel by: closing the connection cancels it too
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except (AttributeError, OSError):
                pass

    def cancel(self, state):
        """DELETE /v1/executions/{id}, on a connection of its own; true when
        the daemon took it (or it had already finished)."""
        if not state.execution_id:
            return False
        try:
            self.request("DELETE", f"/v1/executions/{state.execution_id}", timeout=5.0)
        except errors.NotFoundError:
            pass
        except errors.WardError:
            return False
        return True
