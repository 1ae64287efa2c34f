"""ward.aio — the asyncio twin of ward.sandbox: AsyncSandbox, run, call.
The same requests, the same results and exceptions (both come from
_core); a cancelled task cancels its execution on the server."""
import asyncio
import secrets
import time

from . import _core, errors
from ._aio_http import AsyncTransport
from ._core import Endpoint
from .models import Context, SandboxInfo, WriteInfo

__all__ = ["AsyncSandbox", "AsyncCommandHandle", "run", "call", "run_command"]


class AsyncSandbox:
    """A session, for asyncio:

        async with AsyncSandbox(ttl=600) as sbx:
            ex = await sbx.run_code("6 * 7")

    or `sbx = await AsyncSandbox.create(...)` ... `await sbx.kill()`.
    The methods are those of ward.Sandbox, as coroutines."""

    def __init__(self, policy=None, ttl=None, image=None, url=None, api_key=None,
                 request_timeout=None):
        self._ep = Endpoint(url, api_key)
        self._t = AsyncTransport(self._ep)
        self.request_timeout = request_timeout
        self._body = {k: v for k, v in (("policy", policy), ("ttl", ttl), ("image", image))
                      if v is not None}
        self._info = None
        self.sandbox_id = None
        self.commands = AsyncCommands(self)
        self.files = AsyncFiles(self)

    async def _create(self):
        self._info = await self._t.request("POST", "/v1/sessions", self._body)
        self.sandbox_id = self._info["id"]
        return self

    @classmethod
    async def create(cls, policy=None, ttl=None, image=None, url=None, api_key=None, **kw):
        return await cls(policy, ttl, image, url, api_key, **kw)._create()

    @classmethod
    async def connect(cls, sandbox_id, url=None, api_key=None, **kw):
        sbx = cls(url=url, api_key=api_key, **kw)
        sid = _core.check_id(sandbox_id, "sandbox_id")
        info = await sbx._t.request("GET", f"/v1/sessions/{sid}")
        if info.get("status") in ("expired", "dead", "lost", "stalled"):
            await sbx._t.close()
            raise errors.SessionEndedError(
                f"session {sandbox_id} has ended ({info['status']}): {info.get('reason')}",
                "id", "session_ended", 410)
        sbx._info, sbx.sandbox_id = info, info["id"]
        return sbx

    @classmethod
    async def list(cls, url=None, api_key=None):
        t = AsyncTransport(Endpoint(url, api_key))
        try:
            r = await t.request("GET", "/v1/sessions")
            return [SandboxInfo.from_json(s) for s in r["sessions"]]
        finally:
            await t.close()

    @property
    def id(self):
        return self.sandbox_id

    async def get_info(self):
        return SandboxInfo.from_json(await self._t.request("GET", f"/v1/sessions/{self.sandbox_id}"))

    async def is_running(self):
        try:
            return (await self.get_info()).status in ("starting", "ready", "busy")
        except errors.NotFoundError:
            return False

    @_core.instance_or_class
    async def kill(self):
        """As Sandbox.kill; also `await AsyncSandbox.kill(sandbox_id)`."""
        try:
            await self._t.request("DELETE", f"/v1/sessions/{self.sandbox_id}")
            return True
        except errors.NotFoundError:
            return False
        finally:
            await self._t.close()

    @kill.classmethod
    async def kill(cls, sandbox_id, url=None, api_key=None):
        t = AsyncTransport(Endpoint(url, api_key))
        try:
            await t.request("DELETE", f"/v1/sessions/{_core.check_id(sandbox_id, 'sandbox_id')}")
            return True
        except errors.NotFoundError:
            return False
        finally:
            await t.close()

    async def close(self):
        await self._t.close()

    async def __aenter__(self):
        if self.sandbox_id is None:
            await self._create()
        return self

    async def __aexit__(self, *exc):
        # the session ends even when the block was cancelled
        await asyncio.shield(self.kill())

    def create_code_context(self, language="python", name=None):
        return Context(name or f"ctx-{secrets.token_hex(6)}", language)

    async def run_code(self, code, language="python", context=None, on_stdout=None,
                       on_stderr=None, on_result=None, on_error=None, timeout=None, globals=None,
                       request_timeout=None, raise_on_limit=True):
        """As Sandbox.run_code. Cancelling the task cancels the call on the
        server (DELETE /v1/executions/{id}) before CancelledError goes on."""
        body = _core.execute_body(code, language, context, timeout, globals)
        st = await self._stream(f"/v1/sessions/{self.sandbox_id}/execute", body, timeout,
                                request_timeout, on_stdout, on_stderr, on_result, on_error)
        return _core.finish_execution(st, raise_on_limit)

    async def call(self, code, function, args=None, language="python", context=None, timeout=None,
                   globals=None):
        body = _core.execute_body(code, language, context, timeout, globals, function=function,
                                  args=args)
        st = await self._stream(f"/v1/sessions/{self.sandbox_id}/execute", body, timeout, None)
        return _core.finish_call(st)

    async def _stream(self, path, body, timeout, request_timeout, on_stdout=None, on_stderr=None,
                      on_result=None, on_error=None):
        st = _core.StreamState(on_stdout, on_stderr, on_result, on_error)
        deadline = _core.deadline_for(timeout, request_timeout, self.request_timeout)
        return await self._t.stream("POST", path, body, st, deadline)


class AsyncCommandHandle:
    """A background command, for asyncio: `await h.wait()`, `await h.kill()`."""

    def __init__(self, sbx, answer, on_stdout=None, on_stderr=None):
        self._sbx = sbx
        self.command_id = _core.check_id(answer["command_id"], "command_id")
        self.pid = answer.get("pid")
        self._on = (on_stdout, on_stderr)
        self._seen = [0, 0]

    def _path(self):
        return f"/v1/sessions/{self._sbx.sandbox_id}/commands/{self.command_id}"

    async def status(self):
        st = await self._sbx._t.request("GET", self._path())
        for i, name in enumerate(("stdout", "stderr")):
            text = st.get(name) or ""
            if self._on[i] and len(text) > self._seen[i]:
                self._on[i](text[self._seen[i]:])
            self._seen[i] = max(self._seen[i], len(text))
        return st

    async def wait(self, timeout=None):
        end = None if timeout is None else time.monotonic() + timeout
        pause = 0.01
        while True:
            st = await self.status()
            if st.get("state") != "running":
                return _core.check_background(_core.background_result(st))
            if end is not None and time.monotonic() >= end:
                raise errors.TimeoutError(f"command {self.command_id} still runs after {timeout} s")
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.25)

    async def kill(self):
        r = await self._sbx._t.request("DELETE", self._path())
        return r.get("state") == "killed"


class AsyncCommands:
    def __init__(self, sbx):
        self._sbx = sbx

    async def run(self, cmd, background=False, envs=None, cwd=None, timeout=None, on_stdout=None,
                  on_stderr=None, request_timeout=None):
        body = _core.command_body(cmd, envs, cwd, timeout, background)
        path = f"/v1/sessions/{self._sbx.sandbox_id}/commands"
        if background:
            return AsyncCommandHandle(self._sbx, await self._sbx._t.request("POST", path, body),
                                      on_stdout, on_stderr)
        st = await self._sbx._stream(path, body, timeout, request_timeout, on_stdout, on_stderr)
        return _core.finish_command(st)

    def connect(self, command_id):
        return AsyncCommandHandle(self._sbx, {"command_id": command_id})


class AsyncFiles:
    def __init__(self, sbx):
        self._sbx = sbx

    def _path(self, path, mode=None):
        q = f"/v1/sessions/{self._sbx.sandbox_id}/files?path={_core.qpath(path)}"
        return q + (f"&mode={mode:04o}" if isinstance(mode, int) else f"&mode={mode}" if mode else "")

    async def write(self, path, data, mode=None):
        body = _core.upload_bytes(data)
        headers = {"Content-Type": "application/octet-stream"}
        if body is None:
            size = _core.file_size(data)
            if size is not None:
                headers["Content-Length"] = str(size)
            body = data
        r = await self._sbx._t.request("PUT", self._path(path, mode), body, headers)
        return WriteInfo(r["path"], r["size"], r["sha256"], r.get("mode"))

    async def read(self, path, format="text"):
        chunks = await self._sbx._t.download(self._path(path))
        if format == "stream":
            return chunks
        data = b"".join([b async for b in chunks])
        return data if format == "bytes" else data.decode("utf-8")

    async def list(self, path="", depth=1):
        r = await self._sbx._t.request("GET", f"/v1/sessions/{self._sbx.sandbox_id}/files"
                                       + (f"?path={_core.qpath(path)}" if path else ""))
        return _core.entries(r, path, depth)

    async def exists(self, path):
        rel = _core.workspace_rel(path)
        parent = rel.rsplit("/", 1)[0] if "/" in rel else ""
        try:
            return any(e.path == rel for e in await self.list(parent, depth=1))
        except (errors.NotFoundError, errors.InvalidRequestError):
            return False

    async def remove(self, path):
        await self._sbx._t.request("DELETE", self._path(path))


async def _oneshot(body, timeout, request_timeout, url, api_key, callbacks=(None,) * 4):
    t = AsyncTransport(Endpoint(url, api_key))
    try:
        st = _core.StreamState(*callbacks)
        return await t.stream("POST", "/v1/executions", body, st,
                              _core.deadline_for(timeout, request_timeout))
    finally:
        await t.close()


async def run(code, language="python", files=None, policy=None, timeout=None, globals=None,
              on_stdout=None, on_stderr=None, on_result=None, on_error=None, url=None,
              api_key=None, request_timeout=None, raise_on_limit=True, artifacts=None):
    """As ward.run, for asyncio."""
    body = _core.oneshot_body(code, language, files, policy, timeout, globals,
                              artifacts=artifacts)
    st = await _oneshot(body, timeout, request_timeout, url, api_key,
                        (on_stdout, on_stderr, on_result, on_error))
    return _core.finish_execution(st, raise_on_limit)


async def call(code, function, args=None, language="python", files=None, policy=None,
               timeout=None, globals=None, url=None, api_key=None):
    """As ward.call, for asyncio."""
    body = _core.oneshot_body(code, language, files, policy, timeout, globals, function=function,
                              args=args)
    return _core.finish_call(await _oneshot(body, timeout, None, url, api_key))


async def run_command(cmd, files=None, policy=None, timeout=None, on_stdout=None, on_stderr=None,
                      url=None, api_key=None, request_timeout=None):
    """As ward.run_command, for asyncio."""
    argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
    body = _core.oneshot_body(None, None, files, policy, timeout, command=argv)
    return _core.finish_command(await _oneshot(body, timeout, request_timeout, url, api_key,
                                               (on_stdout, on_stderr, None, None)))
