"""ward.Sandbox — a ward session with E2B's shape — and the one-shot
functions ward.run and ward.call. Synchronous; ward.aio is the asyncio twin."""
import secrets
import time

from . import _core, errors
from ._core import Endpoint
from ._http import Transport
from .models import Context, SandboxInfo, WriteInfo

__all__ = ["Sandbox", "run", "call", "run_command"]


class Sandbox:
    """A session: one sandbox that lives between calls, with its files,
    variables (per context) and background commands.

        with Sandbox(policy={"limits": {"memory": "256M"}}, ttl=600) as sbx:
            ex = sbx.run_code("x = 41\\nx + 1")
            print(ex.text)                       # 42

    Creating it creates the session; leaving the `with` block (or kill())
    ends it. `url` and `api_key` default to WARD_URL and WARD_API_KEY."""

    def __init__(self, policy=None, ttl=None, image=None, url=None, api_key=None,
                 request_timeout=None, _session=None):
        self._ep = Endpoint(url, api_key)
        self._t = Transport(self._ep)
        self.request_timeout = request_timeout
        if _session is None:
            body = {}
            for k, v in (("policy", policy), ("ttl", ttl), ("image", image)):
                if v is not None:
                    body[k] = v
            _session = self._t.request("POST", "/v1/sessions", body)
        self._info = _session
        self.sandbox_id = _session["id"]
        self.commands = Commands(self)
        self.files = Files(self)

    # -- lifecycle -------------------------------------------------------------
    @classmethod
    def create(cls, policy=None, ttl=None, image=None, url=None, api_key=None, **kw):
        return cls(policy=policy, ttl=ttl, image=image, url=url, api_key=api_key, **kw)

    @classmethod
    def connect(cls, sandbox_id, url=None, api_key=None, **kw):
        """Attaches to a live session by id (NotFoundError if there is none,
        SessionEndedError if it has ended)."""
        t = Transport(Endpoint(url, api_key))
        try:
            info = t.request("GET", f"/v1/sessions/{_core.check_id(sandbox_id, 'sandbox_id')}")
        finally:
            t.close()
        if info.get("status") in ("expired", "dead", "lost", "stalled"):
            raise errors.SessionEndedError(
                f"session {sandbox_id} has ended ({info['status']}): {info.get('reason')}",
                "id", "session_ended", 410)
        return cls(url=url, api_key=api_key, _session=info, **kw)

    @classmethod
    def list(cls, url=None, api_key=None):
        """The tenant's sessions (live ones and tombstones) as SandboxInfo."""
        t = Transport(Endpoint(url, api_key))
        try:
            return [SandboxInfo.from_json(s) for s in t.request("GET", "/v1/sessions")["sessions"]]
        finally:
            t.close()

    @property
    def id(self):
        return self.sandbox_id

    def get_info(self):
        return SandboxInfo.from_json(self._t.request("GET", f"/v1/sessions/{self.sandbox_id}"))

    def is_running(self):
        try:
            return self.get_info().status in ("starting", "ready", "busy")
        except errors.NotFoundError:
            return False

    @_core.instance_or_class
    def kill(self):
        """Ends the session (its sandbox and everything in it). True when it
        was live; False when it was already gone. Also
        `Sandbox.kill(sandbox_id, url=, api_key=)`, as E2B."""
        try:
            self._t.request("DELETE", f"/v1/sessions/{self.sandbox_id}")
            return True
        except errors.NotFoundError:
            return False
        finally:
            self._t.close()

    @kill.classmethod
    def kill(cls, sandbox_id, url=None, api_key=None):
        t = Transport(Endpoint(url, api_key))
        try:
            t.request("DELETE", f"/v1/sessions/{_core.check_id(sandbox_id, 'sandbox_id')}")
            return True
        except errors.NotFoundError:
            return False
        finally:
            t.close()

    def close(self):
        """Closes the client's connections; the session stays."""
        self._t.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()

    # -- code ------------------------------------------------------------------
    def create_code_context(self, language="python", name=None):
        """A new named context (the kernel starts on its first call)."""
        return Context(name or f"ctx-{secrets.token_hex(6)}", language)

    def run_code(self, code, language="python", context=None, on_stdout=None, on_stderr=None,
                 on_result=None, on_error=None, timeout=None, globals=None,
                 request_timeout=None, raise_on_limit=True):
        """Runs `code` in a context of the session and returns an Execution.

        An exception the code raises is Execution.error (status "error"). A
        verdict that is neither ok nor error raises its VerdictError
        (TimeoutError, MemoryLimitError, ...; the Execution is attached),
        unless raise_on_limit is false. `timeout` (seconds) is the call's
        limit, enforced by the daemon; the client cancels the call itself
        when no verdict came `timeout` + 10 s later (or after
        request_timeout). KeyboardInterrupt cancels it on the server."""
        body = _core.execute_body(code, language, context, timeout, globals)
        st = self._stream(f"/v1/sessions/{self.sandbox_id}/execute", body, timeout,
                          request_timeout, on_stdout, on_stderr, on_result, on_error)
        return _core.finish_execution(st, raise_on_limit)

    def call(self, code, function, args=None, language="python", context=None, timeout=None,
             globals=None):
        """Function-call mode in the session: defines `code` and calls
        `function` ("name" or "Class.method") with `args` (a dict or list);
        returns its JSON value, raises CallError when it raised."""
        body = _core.execute_body(code, language, context, timeout, globals, function=function,
                                  args=args)
        st = self._stream(f"/v1/sessions/{self.sandbox_id}/execute", body, timeout, None)
        return _core.finish_call(st)

    def _stream(self, path, body, timeout, request_timeout, on_stdout=None, on_stderr=None,
                on_result=None, on_error=None):
        st = _core.StreamState(on_stdout, on_stderr, on_result, on_error)
        deadline = _core.deadline_for(timeout, request_timeout, self.request_timeout)
        return self._t.stream("POST", path, body, st, deadline)


class CommandHandle:
    """A background command: `pid`, `command_id`; wait(), kill(), status()."""

    def __init__(self, sbx, answer, on_stdout=None, on_stderr=None):
        self._sbx = sbx
        self.command_id = _core.check_id(answer["command_id"], "command_id")
        self.pid = answer.get("pid")
        self._on = (on_stdout, on_stderr)
        self._seen = [0, 0]

    def _path(self):
        return f"/v1/sessions/{self._sbx.sandbox_id}/commands/{self.command_id}"

    def status(self):
        """The daemon's status object (state, status, exit_code, stdout, ...)."""
        st = self._sbx._t.request("GET", self._path())
        for i, name in enumerate(("stdout", "stderr")):
            text = st.get(name) or ""
            if self._on[i] and len(text) > self._seen[i]:
                self._on[i](text[self._seen[i]:])
            self._seen[i] = max(self._seen[i], len(text))
        return st

    def wait(self, timeout=None):
        """Polls until the command exited; its CommandResult, or
        CommandExitError on a non-zero exit (TimeoutError and the like for a
        limit, KilledError after kill()). `timeout`: how long to wait here."""
        end = None if timeout is None else time.monotonic() + timeout
        pause = 0.01
        while True:
            st = self.status()
            if st.get("state") != "running":
                return _core.check_background(_core.background_result(st))
            if end is not None and time.monotonic() >= end:
                raise errors.TimeoutError(f"command {self.command_id} still runs after {timeout} s")
            time.sleep(pause)
            pause = min(pause * 2, 0.25)

    def kill(self):
        """Kills its process group; true when it was running."""
        r = self._sbx._t.request("DELETE", self._path())
        return r.get("state") == "killed"


class Commands:
    """sbx.commands: shell commands in the session's sandbox."""

    def __init__(self, sbx):
        self._sbx = sbx

    def run(self, cmd, background=False, envs=None, cwd=None, timeout=None, on_stdout=None,
            on_stderr=None, request_timeout=None):
        """`cmd`: a string (run by /bin/sh -c) or an argv list. Foreground:
        a CommandResult; a non-zero exit raises CommandExitError (E2B's
        rule), a limit its VerdictError. background=True: a CommandHandle at
        once."""
        body = _core.command_body(cmd, envs, cwd, timeout, background)
        path = f"/v1/sessions/{self._sbx.sandbox_id}/commands"
        if background:
            return CommandHandle(self._sbx, self._sbx._t.request("POST", path, body),
                                 on_stdout, on_stderr)
        st = self._sbx._stream(path, body, timeout, request_timeout, on_stdout, on_stderr)
        return _core.finish_command(st)

    def connect(self, command_id):
        """A handle on a background command started earlier."""
        return CommandHandle(self._sbx, {"command_id": command_id})


class Files:
    """sbx.files: the session's /workspace (paths relative to it, or
    absolute under it)."""

    def __init__(self, sbx):
        self._sbx = sbx

    def _path(self, path, mode=None):
        q = f"/v1/sessions/{self._sbx.sandbox_id}/files?path={_core.qpath(path)}"
        return q + (f"&mode={mode:04o}" if isinstance(mode, int) else f"&mode={mode}" if mode else "")

    def write(self, path, data, mode=None, timeout=300.0):
        """Creates or replaces a file: `data` is str (UTF-8), bytes, or a
        binary file object (streamed, never held whole). Parent directories
        are created. Returns a WriteInfo (path, size, sha256, mode)."""
        body = _core.upload_bytes(data)
        headers = {"Content-Type": "application/octet-stream"}
        if body is None:
            size = _core.file_size(data)
            if size is not None:
                headers["Content-Length"] = str(size)
            body = data
        r = self._sbx._t.request("PUT", self._path(path, mode), body, headers, timeout=timeout)
        return WriteInfo(r["path"], r["size"], r["sha256"], r.get("mode"))

    def read(self, path, format="text", timeout=300.0):
        """A file's content: format "text" (str, UTF-8), "bytes", or
        "stream" (an iterator of bytes chunks, for large files)."""
        chunks = self._sbx._t.download(self._path(path), timeout=timeout)
        if format == "stream":
            return chunks
        data = b"".join(chunks)
        return data if format == "bytes" else data.decode("utf-8")

    def list(self, path="", depth=1):
        """Entries under `path` (EntryInfo): depth 1 (the default, E2B's)
        lists its children, None everything below (the daemon's recursive
        listing, 10,000 entries at most)."""
        r = self._sbx._t.request("GET", f"/v1/sessions/{self._sbx.sandbox_id}/files"
                                 + (f"?path={_core.qpath(path)}" if path else ""))
        return _core.entries(r, path, depth)

    def exists(self, path):
        """Whether `path` names anything in /workspace (found by listing its
        directory: a GET of the path itself would download a file)."""
        rel = _core.workspace_rel(path)
        parent = rel.rsplit("/", 1)[0] if "/" in rel else ""
        try:
            return any(e.path == rel for e in self.list(parent, depth=1))
        except (errors.NotFoundError, errors.InvalidRequestError):
            return False

    def remove(self, path):
        """Deletes a file, or a directory with everything in it."""
        self._sbx._t.request("DELETE", self._path(path))


def _oneshot(body, timeout, request_timeout, url, api_key, callbacks=(None,) * 4):
    t = Transport(Endpoint(url, api_key))
    try:
        st = _core.StreamState(*callbacks)
        return t.stream("POST", "/v1/executions", body, st,
                        _core.deadline_for(timeout, request_timeout))
    finally:
        t.close()


def run(code, language="python", files=None, policy=None, timeout=None, globals=None,
        on_stdout=None, on_stderr=None, on_result=None, on_error=None, url=None, api_key=None,
        request_timeout=None, raise_on_limit=True, artifacts=None):
    """A one-shot: `code` runs in a fresh sandbox that is destroyed after;
    an Execution, as Sandbox.run_code. `files` ({path: str | bytes}) are
    written into /workspace first; `policy` may only tighten the daemon's.
    artifacts=True (or a byte cap) brings the files the code created or
    changed back inline: Execution.artifacts[i].content."""
    body = _core.oneshot_body(code, language, files, policy, timeout, globals,
                              artifacts=artifacts)
    st = _oneshot(body, timeout, request_timeout, url, api_key,
                  (on_stdout, on_stderr, on_result, on_error))
    return _core.finish_execution(st, raise_on_limit)


def call(code, function, args=None, language="python", files=None, policy=None, timeout=None,
         globals=None, url=None, api_key=None):
    """A one-shot function call (`ward call`): defines `code`, calls
    `function` ("name" or "Class.method") with `args` (a dict of keyword
    arguments or a list), returns its JSON value. CallError when the
    function raised or could not be called (FunctionNotFound,
    ArgumentError, SerializationError, PolicyViolation)."""
    body = _core.oneshot_body(code, language, files, policy, timeout, globals, function=function,
                              args=args)
    return _core.finish_call(_oneshot(body, timeout, None, url, api_key))


def run_command(cmd, files=None, policy=None, timeout=None, on_stdout=None, on_stderr=None,
                url=None, api_key=None, request_timeout=None):
    """A one-shot command (`ward run`): `cmd` is an argv list (a string runs
    under /bin/sh -c) in a fresh sandbox; a CommandResult, with
    CommandExitError on a non-zero exit and a VerdictError on a limit."""
    argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
    body = _core.oneshot_body(None, None, files, policy, timeout, command=argv)
    return _core.finish_command(_oneshot(body, timeout, request_timeout, url, api_key,
                                         (on_stdout, on_stderr, None, None)))
