"""What the sync and async clients share, and no I/O: where the daemon is,
the bodies of requests, and the turning of an NDJSON event stream into an
Execution (or a CommandResult). A rule exists here once; _http.py and
_aio_http.py only move bytes."""
import base64
import os
import re
import urllib.parse

from . import errors
from .models import Artifact, CommandResult, Execution, ExecutionError, Logs, Result, Verdict

DEFAULT_URL = "unix:///run/ward/ward.sock"
NDJSON = "application/x-ndjson"
# How long past an execution's own timeout the client waits before it gives
# up and cancels (the daemon's backstop kills a call 5 s past its timeout).
DEADLINE_MARGIN = 10.0
# Without a timeout, the longest the client waits for an execution.
DEFAULT_REQUEST_TIMEOUT = 300.0
# An idle keep-alive connection older than this is not reused (the daemon
# closes idle connections after --idle-timeout, 60 s by default).
POOL_IDLE = 30.0
POOL_MAX = 8


class Endpoint:
    """Where the daemon listens: `unix:///path`, `http://host:port` or
    `https://host:port` (a bare absolute path counts as a unix socket)."""

    def __init__(self, url=None, api_key=None):
        url = url or os.environ.get("WARD_URL") or DEFAULT_URL
        self.api_key = api_key if api_key is not None else os.environ.get("WARD_API_KEY")
        if url.startswith("/"):
            url = "unix://" + url
        u = urllib.parse.urlsplit(url)
        self.url = url
        if u.scheme == "unix":
            path = urllib.parse.unquote(u.netloc + u.path)
            if not path:
                raise errors.WardError(f"WARD_URL: a unix URL needs a socket path, got {url!r}",
                                       "url")
            self.scheme, self.path, self.host, self.port = "unix", path, "localhost", None
            self.prefix = ""
        elif u.scheme in ("http", "https"):
            if not u.hostname:
                raise errors.WardError(f"WARD_URL: no host in {url!r}", "url")
            self.scheme, self.path, self.host = u.scheme, None, u.hostname
            self.port = u.port or (443 if u.scheme == "https" else 80)
            self.prefix = u.path.rstrip("/")
        else:
            raise errors.WardError(
                f"WARD_URL: expected unix:///path or http://host:port, got {url!r}", "url")
        if self.api_key is not None and not _KEY.fullmatch(self.api_key):
            # it goes into a header line: nothing that could end or split it
            raise errors.WardError("api_key: expected printable ASCII without spaces "
                                   "(wk_<id>_<secret>)", "api_key")
        if self.scheme == "http" and self.api_key and not _loopback(self.host):
            import warnings
            warnings.warn(f"{url}: the API key goes in clear over plain HTTP to a host that is "
                          "not loopback (the daemon's API has no TLS); prefer the unix socket "
                          "or a TLS proxy", stacklevel=3)

    def refusal(self, status, body):
        """The APIError for an error answer; a 401 without a key says so."""
        e = errors.api_error(status, body)
        if status == 401 and not self.api_key:
            e.message += " (no API key was sent: set WARD_API_KEY or pass api_key=)"
        return e

    def headers(self, extra=None):
        h = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        if extra:
            h.update(extra)
        return h


_KEY = re.compile(r"[\x21-\x7e]*")
_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


def check_id(value, field):
    """A session or command id as it goes into a URL path: the daemon's own
    form ([A-Za-z0-9._-], at most 64), never a path or a header injection."""
    if not isinstance(value, str) or not _ID.fullmatch(value) or value in (".", ".."):
        raise errors.WardError(f"{field}: expected an id like 'se_0123456789abcdef', "
                               f"got {value!r}", field)
    return value


def _loopback(host):
    import ipaddress
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def qpath(path):
    """A workspace path as a query value: str, or bytes for a name that is
    not UTF-8 (sent percent-encoded as the daemon expects)."""
    return urllib.parse.quote(path, safe="/")


def workspace_rel(path):
    """The daemon's relative form of a workspace path."""
    if path == "/workspace":
        return ""
    if path.startswith("/workspace/"):
        path = path[len("/workspace/"):]
    return path.strip("/")


def deadline_for(timeout, request_timeout, default=None):
    """The client's own deadline for a call: its request_timeout, else the
    call's timeout plus a margin, else the client's default."""
    if request_timeout is not None:
        return float(request_timeout)
    if timeout is not None:
        return float(timeout) + DEADLINE_MARGIN
    return float(default) if default is not None else DEFAULT_REQUEST_TIMEOUT


def context_name(context):
    if context is None:
        return None
    return getattr(context, "name", context)


def execute_body(code, language="python", context=None, timeout=None, globals=None,
                 function=None, args=None):
    """The body of POST /v1/sessions/{id}/execute. A Context object brings
    its own language."""
    if context is not None and not isinstance(context, str):
        language = getattr(context, "language", None) or language
    body = {"code": code, "language": language or "python"}
    if context is not None:
        body["context"] = context_name(context)
    if timeout is not None:
        body["timeout"] = timeout
    if globals is not None:
        body["globals"] = globals
    if function is not None:
        body["function"] = function
        body["args"] = {} if args is None else args
    return body


def file_entries(files):
    """One-shot `files`: {path: str | bytes} or a list of (path, content)."""
    if files is None:
        return None
    items = files.items() if isinstance(files, dict) else files
    out = []
    for path, content in items:
        if isinstance(content, str):
            out.append({"path": path, "content": content, "encoding": "utf-8"})
        else:
            out.append({"path": path, "content": base64.b64encode(bytes(content)).decode(),
                        "encoding": "base64"})
    return out


def oneshot_body(code, language, files=None, policy=None, timeout=None, globals=None,
                 function=None, args=None, command=None, artifacts=None):
    body = {"command": command} if command is not None else {"language": language, "code": code}
    if artifacts:
        # True: inline within the operator's cap; a number: at most that many bytes
        body["artifacts"] = {"inline": True} if artifacts is True else \
            {"inline": True, "max_bytes": int(artifacts)}
    for k, v in (("files", file_entries(files)), ("policy", policy), ("timeout", timeout),
                 ("globals", globals)):
        if v is not None:
            body[k] = v
    if function is not None:
        body["function"] = function
        body["args"] = {} if args is None else args
    return body


class StreamState:
    """Turns the daemon's NDJSON events into an Execution, calling the
    user's callbacks as events arrive. The verdict line is authoritative:
    results, error and (when events were dropped) the logs come from it."""

    def __init__(self, on_stdout=None, on_stderr=None, on_result=None, on_error=None):
        self.on_stdout, self.on_stderr = on_stdout, on_stderr
        self.on_result, self.on_error = on_result, on_error
        self.execution_id = None
        self.logs = Logs()
        self.stream_results = []
        self.dropped = False
        self.verdict = None
        # set when the client cancelled: "timeout" (its deadline) or "cancel"
        self.cancelled = None

    def feed(self, ev):
        kind = ev.get("event")
        if kind == "start":
            self.execution_id = ev.get("id") or self.execution_id
        elif kind == "stream":
            name, text = ev.get("name"), ev.get("text", "")
            if name == "stderr":
                self.logs.stderr.append(text)
                if self.on_stderr:
                    self.on_stderr(text)
            else:
                self.logs.stdout.append(text)
                if self.on_stdout:
                    self.on_stdout(text)
        elif kind == "result":
            r = Result(ev.get("data") or {}, ev.get("type") == "execute_result")
            self.stream_results.append(r)
            if self.on_result:
                self.on_result(r)
        elif kind == "error":
            if self.on_error:
                self.on_error(ExecutionError.from_json(ev.get("content") or {}))
        elif kind == "dropped":
            self.dropped = True
        elif kind == "verdict":
            ev = dict(ev)
            ev.pop("event", None)
            self.verdict = ev
        # "policy_violation" and unknown events: the verdict carries them

    def execution(self):
        v = self.verdict
        if v is None:
            raise errors.WardConnectionError("the stream ended before its verdict")
        ex = Execution(verdict=Verdict.from_json(v))
        ex.execution_id = v.get("execution_id") or self.execution_id
        ex.error = ExecutionError.from_json(v.get("error"))
        main = set()
        counts = []
        for cell in v.get("cells") or []:
            counts.append(cell.get("execution_count"))
            for o in cell.get("outputs") or []:
                if o.get("type") == "execute_result" and isinstance(o.get("result"), int):
                    main.add(o["result"])
        ex.execution_count = counts[-1] if counts else None
        ex.results = [Result(b, i in main) for i, b in enumerate(v.get("results") or [])]
        if self.dropped or ("stdout" in v and "".join(self.logs.stdout) != v.get("stdout")):
            ex.logs = Logs([v["stdout"]] if v.get("stdout") else [],
                           [v["stderr"]] if v.get("stderr") else [])
        else:
            ex.logs = self.logs
        ex.value = v.get("value")
        ex.artifacts = [Artifact.from_json(a) for a in v.get("artifacts") or []
                        if isinstance(a, dict)]
        ex.context_new = bool(v.get("context_new"))
        ex.context_lost = bool(v.get("context_lost"))
        return ex


def finish_execution(state, raise_on_verdict=True):
    """The Execution, or the exception its verdict (or a client cancel)
    calls for."""
    ex = state.execution()
    if state.cancelled == "timeout" and ex.verdict.status in ("killed", "timeout"):
        raise errors.TimeoutError(
            "the client's deadline passed; the execution was cancelled on the server"
            + (f" ({ex.execution_id})" if ex.execution_id else ""), ex)
    if raise_on_verdict:
        err = errors.verdict_error(ex)
        if err is not None:
            raise err
    return ex


def broken_stream(state, url, e):
    """The exception for a stream that ended without its verdict: a
    TimeoutError when the client's deadline had closed it, else a
    WardConnectionError."""
    if state.cancelled == "timeout":
        return errors.TimeoutError(
            "the client's deadline passed; the execution was cancelled on the server "
            "(its connection closed)")
    return errors.WardConnectionError(f"{url}: the stream broke: {e}")


def finish_call(state):
    ex = finish_execution(state)
    if ex.verdict.status != "ok":
        raise errors.CallError(ex)
    return ex.value


def command_result(v):
    return CommandResult(stdout=v.get("stdout", ""), stderr=v.get("stderr", ""),
                         exit_code=v.get("exit_code"), status=v.get("status"),
                         error=(v.get("error") or {}).get("message")
                         if isinstance(v.get("error"), dict) else None,
                         verdict=Verdict.from_json(v))


def finish_command(state):
    """A foreground command's CommandResult; non-zero exit raises
    CommandExitError, a limit or cancel the verdict's exception."""
    finish_execution(state)
    res = command_result(state.verdict)
    if res.status == "error":
        raise errors.CommandExitError(res)
    return res


def command_body(cmd, envs=None, cwd=None, timeout=None, background=False):
    body = {"cmd": cmd}
    if envs:
        body["env"] = dict(envs)
    if cwd is not None:
        body["cwd"] = cwd
    if timeout is not None:
        body["timeout"] = timeout
    if background:
        body["background"] = True
    return body


def background_result(st):
    """A background command's status object as a CommandResult, once exited."""
    return CommandResult(stdout=st.get("stdout", ""), stderr=st.get("stderr", ""),
                         exit_code=st.get("exit_code"), status=st.get("status"),
                         verdict=Verdict.from_json(st))


def check_background(res):
    if res.status in ("ok",):
        return res
    if res.status == "error":
        raise errors.CommandExitError(res)
    cls = errors.VERDICT_ERRORS.get(res.status, errors.VerdictError)
    ex = Execution(logs=Logs([res.stdout], [res.stderr]), verdict=res.verdict)
    raise cls(f"the background command ended with status {res.status}", ex)


def entries(listing, base, depth):
    """The files API's recursive listing as EntryInfo, cut to `depth` levels
    below `base` (None: all)."""
    from .models import EntryInfo
    base = listing.get("path") or ""
    out = []
    for e in listing.get("entries") or []:
        p = e.get("path", "")
        rel = p[len(base):].lstrip("/") if base and p.startswith(base) else p
        if depth is not None and rel.count("/") >= depth:
            continue
        out.append(EntryInfo(name=p.rsplit("/", 1)[-1], path=p, type=e.get("type"),
                             size=e.get("size", 0), mode=e.get("mode"), mtime=e.get("mtime"),
                             path_escaped=bool(e.get("path_escaped"))))
    return out


def upload_bytes(data):
    """str → UTF-8 bytes; bytes-like → bytes; a file object is streamed."""
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    return None


def file_size(f):
    try:
        return os.fstat(f.fileno()).st_size - f.tell()
    except (AttributeError, OSError, ValueError):
        pass
    try:
        pos = f.tell()
        end = f.seek(0, 2)
        f.seek(pos)
        return end - pos
    except (AttributeError, OSError, ValueError):
        return None


class instance_or_class:
    """A method that works on an instance and on the class, as E2B's
    kill(): `sbx.kill()` and `Sandbox.kill(sandbox_id)`."""

    def __init__(self, on_instance):
        self.on_instance = on_instance
        self.on_class = None

    def classmethod(self, f):
        self.on_class = f
        return self

    def __get__(self, obj, cls):
        import functools
        if obj is None:
            return functools.partial(self.on_class, cls)
        return functools.partial(self.on_instance, obj)
