"""The asyncio transport: a small HTTP/1.1 client on asyncio streams (the
standard library has none), over a unix socket or TCP, with keep-alive
connections, chunked bodies, NDJSON streams and cancellation. Knows nothing
of sandboxes."""
import asyncio
import json
import ssl
import time

from . import errors
from ._core import NDJSON, POOL_IDLE, POOL_MAX, broken_stream

_BLOCK = 1 << 16
_MAX_HEADER_LINE = 1 << 16
_MAX_HEADERS = 100


class _Conn:
    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer
        self.since = time.monotonic()

    def close(self):
        self.writer.close()


class Response:
    """Status, headers, and the body read as it comes (Content-Length,
    chunked, or up to the end of the connection)."""

    def __init__(self, conn, status, headers):
        self.conn, self.status, self.headers = conn, status, headers
        te = headers.get("transfer-encoding", "").lower()
        self.chunked = "chunked" in te
        cl = headers.get("content-length")
        self.left = int(cl) if cl is not None and not self.chunked else None
        self.will_close = headers.get("connection", "").lower() == "close" or \
            (not self.chunked and self.left is None)
        self.done = self.left == 0
        self._chunk_left = 0
        self._buf = b""

    def getheader(self, name):
        return self.headers.get(name.lower())

    async def _raw(self, n):
        b = await self.conn.reader.read(n)
        if not b:
            raise errors.WardConnectionError("the daemon closed the connection mid-answer")
        return b

    async def read1(self):
        """The next piece of the body; b"" at its end."""
        if self._buf:
            b, self._buf = self._buf, b""
            return b
        if self.done:
            return b""
        r = self.conn.reader
        if self.chunked:
            if self._chunk_left == 0:
                line = await r.readline()
                if not line.endswith(b"\n"):
                    raise errors.WardConnectionError("the daemon closed the connection mid-answer")
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while (await r.readline()).strip():      # trailers
                        pass
                    self.done = True
                    return b""
                self._chunk_left = size
            b = await self._raw(min(self._chunk_left, _BLOCK))
            self._chunk_left -= len(b)
            if self._chunk_left == 0:
                await r.readexactly(2)
            return b
        if self.left is not None:
            b = await self._raw(min(self.left, _BLOCK))
            self.left -= len(b)
            self.done = self.left == 0
            return b
        b = await r.read(_BLOCK)
        if not b:
            self.done = True
        return b

    async def read(self):
        parts = []
        while True:
            b = await self.read1()
            if not b:
                return b"".join(parts)
            parts.append(b)

    async def readline(self):
        parts = []
        while True:
            b = await self.read1()
            if not b:
                return b"".join(parts)
            i = b.find(b"\n")
            if i >= 0:
                parts.append(b[:i + 1])
                self._buf = b[i + 1:]
                return b"".join(parts)
            parts.append(b)


class AsyncTransport:
    """One endpoint's connections for asyncio; a request takes an idle
    keep-alive connection or opens one."""

    def __init__(self, endpoint, connect_timeout=10.0):
        self.ep = endpoint
        self.connect_timeout = connect_timeout
        self._idle = []

    async def _open(self):
        ep = self.ep
        try:
            if ep.scheme == "unix":
                coro = asyncio.open_unix_connection(ep.path)
            else:
                coro = asyncio.open_connection(
                    ep.host, ep.port, ssl=ssl.create_default_context() if ep.scheme == "https" else None)
            r, w = await asyncio.wait_for(coro, self.connect_timeout)
        except (FileNotFoundError, ConnectionRefusedError, asyncio.TimeoutError) as e:
            raise errors.WardConnectionError(
                f"cannot reach the ward daemon at {ep.url}: {getattr(e, 'strerror', None) or e!r}") from None
        return _Conn(r, w)

    def _take(self):
        now = time.monotonic()
        while self._idle:
            c = self._idle.pop()
            if now - c.since < POOL_IDLE and not c.reader.at_eof():
                return c
            c.close()
        return None

    def _give(self, conn):
        if len(self._idle) < POOL_MAX and not conn.reader.at_eof():
            conn.since = time.monotonic()
            self._idle.append(conn)
        else:
            conn.close()

    async def close(self):
        idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    async def _send(self, method, path, body, headers):
        hdrs = self.ep.headers(headers)
        hdrs.setdefault("Host", "localhost" if self.ep.scheme == "unix" else self.ep.host)
        stream = body is not None and not isinstance(body, (bytes, bytearray))
        if stream:
            hdrs.setdefault("Transfer-Encoding", "chunked") if "Content-Length" not in hdrs else None
        elif body is not None:
            hdrs["Content-Length"] = str(len(body))
        elif method in ("POST", "PUT"):
            hdrs["Content-Length"] = "0"
        # a large body waits for the daemon's "100 Continue": a refusal
        # from the headers alone (413 from Content-Length, 401, 429) comes
        # back instead, and the body is never sent
        expect = stream or (body is not None and len(body) > _BLOCK)
        if expect:
            hdrs["Expect"] = "100-continue"
        head = f"{method} {self.ep.prefix + path} HTTP/1.1\r\n" + \
            "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n"
        for attempt in (0, 1):
            conn = self._take()
            reused = conn is not None
            if conn is None:
                conn = await self._open()
            try:
                if body is not None and not expect:
                    conn.writer.write(head.encode("latin-1") + body)
                else:
                    conn.writer.write(head.encode("latin-1"))
                await conn.writer.drain()
                if expect:
                    status_line = await conn.reader.readline()
                    if not status_line:
                        raise ConnectionResetError("closed before the status line")
                    if status_line.split(None, 2)[1:2] != [b"100"]:
                        resp = await self._head(conn, status_line)
                        resp.will_close = True      # the body was never sent
                        return conn, resp
                    while (await conn.reader.readline()).strip():
                        pass
                    await self._send_body(conn, body, hdrs)
                status_line = await conn.reader.readline()
                if not status_line:
                    raise ConnectionResetError("closed before the status line")
                return conn, await self._head(conn, status_line)
            except (ConnectionResetError, BrokenPipeError, asyncio.IncompleteReadError) as e:
                # a refusal sent before the body was all read (413) is
                # still there to read
                try:
                    status_line = await conn.reader.readline()
                    if status_line:
                        return conn, await self._head(conn, status_line)
                except (OSError, errors.WardError, ValueError):
                    pass
                conn.close()
                if reused and attempt == 0 and not stream:
                    continue
                raise errors.WardConnectionError(f"{self.ep.url}: {e}") from None
            except BaseException:
                conn.close()
                raise
        raise AssertionError("unreachable")

    async def _send_body(self, conn, body, hdrs):
        if isinstance(body, (bytes, bytearray)):
            conn.writer.write(body)
        else:
            chunked = "Transfer-Encoding" in hdrs
            while True:
                block = body.read(_BLOCK)
                if not block:
                    break
                conn.writer.write(b"%x\r\n%s\r\n" % (len(block), block) if chunked else block)
                await conn.writer.drain()
            if chunked:
                conn.writer.write(b"0\r\n\r\n")
        await conn.writer.drain()

    async def _head(self, conn, status_line):
        parts = status_line.decode("latin-1").split(None, 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise errors.WardConnectionError(f"{self.ep.url}: not an HTTP answer: {status_line[:80]!r}")
        headers = {}
        for _ in range(_MAX_HEADERS):
            line = await conn.reader.readline()
            if len(line) > _MAX_HEADER_LINE:
                raise errors.WardConnectionError(f"{self.ep.url}: header line too long")
            if line in (b"\r\n", b"\n", b""):
                break
            k, _, v = line.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        return Response(conn, int(parts[1]), headers)

    def _release(self, conn, resp):
        if resp.done and not resp.will_close:
            self._give(conn)
        else:
            conn.close()

    async def request(self, method, path, body=None, headers=None, raw=False):
        hdrs = dict(headers or {})
        if body is not None and not isinstance(body, (bytes, bytearray)) and not hasattr(body, "read"):
            body = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        conn, resp = await self._send(method, path, body, hdrs)
        try:
            data = await resp.read()
        except BaseException:
            conn.close()
            raise
        self._release(conn, resp)
        if resp.status >= 400:
            raise self.ep.refusal(resp.status, data)
        if raw:
            return data, resp
        return json.loads(data) if data else None

    async def download(self, path):
        """A file's bytes as an async iterator of chunks."""
        conn, resp = await self._send("GET", path, None, {})
        if resp.status >= 400:
            data = await resp.read()
            self._release(conn, resp)
            raise self.ep.refusal(resp.status, data)

        async def chunks():
            try:
                while True:
                    b = await resp.read1()
                    if not b:
                        return
                    yield b
            finally:
                self._release(conn, resp)
        return chunks()

    async def stream(self, method, path, body, state, deadline):
        """As _http.Transport.stream: events fed to `state` until the
        verdict; the deadline cancels on the server; a task cancel
        (CancelledError) or any exception cancels on the server too."""
        data = json.dumps(body).encode()
        conn, resp = await self._send(method, path, data,
                                      {"Content-Type": "application/json", "Accept": NDJSON})
        if resp.status >= 400:
            err = await resp.read()
            self._release(conn, resp)
            raise self.ep.refusal(resp.status, err)
        state.execution_id = resp.getheader("Ward-Execution-Id")
        dog = asyncio.ensure_future(self._watchdog(state, conn, deadline))
        ok = broken = False
        try:
            while state.verdict is None:
                try:
                    line = await resp.readline()
                except (OSError, asyncio.IncompleteReadError, errors.WardConnectionError) as e:
                    broken = e
                    break
                if not line:
                    broken = "no verdict"
                    break
                if line.strip():
                    state.feed(json.loads(line))
            if not broken:
                try:
                    await resp.read()
                    ok = True
                except (OSError, asyncio.IncompleteReadError, errors.WardConnectionError):
                    pass
        except BaseException:
            # a cancelled task, a callback's exception: end it on the server
            if state.cancelled is None:
                state.cancelled = "cancel"
                try:
                    await asyncio.wait_for(self.cancel(state), 5.0)
                except BaseException:
                    pass
            raise
        finally:
            dog.cancel()
            if ok:
                self._release(conn, resp)
            else:
                conn.close()
        if broken:
            if state.cancelled is None:
                await self.cancel(state)
            raise broken_stream(state, self.ep.url, broken)
        return state

    async def _watchdog(self, state, conn, deadline):
        await asyncio.sleep(deadline)
        if state.verdict is None and state.cancelled is None:
            state.cancelled = "timeout"
            if await self.cancel(state):
                # the verdict (killed) should follow at once; if it never
                # comes, the connection is closed below
                await asyncio.sleep(30.0)
        if state.verdict is None:
            conn.close()

    async def cancel(self, state):
        if not state.execution_id:
            return False
        try:
            await self.request("DELETE", f"/v1/executions/{state.execution_id}")
        except errors.NotFoundError:
            pass
        except errors.WardError:
            return False
        return True
