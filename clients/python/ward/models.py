"""The objects the SDK returns: Execution (with Logs, Result, ExecutionError
and Verdict), CommandResult, and the files' and sessions' entries. Plain
data built from the daemon's JSON; `raw` keeps the JSON itself."""
import base64
import json
from dataclasses import dataclass, field as dc_field
from typing import Any, Optional

__all__ = ["Artifact", "Logs", "Result", "ExecutionError", "Verdict", "Execution",
           "CommandResult", "EntryInfo", "WriteInfo", "SandboxInfo", "Context"]


@dataclass
class Logs:
    """What the code printed, as the chunks it arrived in (E2B's shape)."""
    stdout: list = dc_field(default_factory=list)
    stderr: list = dc_field(default_factory=list)


_MIME = {
    "text": "text/plain", "html": "text/html", "markdown": "text/markdown",
    "svg": "image/svg+xml", "png": "image/png", "jpeg": "image/jpeg",
    "pdf": "application/pdf", "latex": "text/latex", "json": "application/json",
    "javascript": "application/javascript",
}


class Result:
    """One rich result: the MIME bundle of an execute_result (the last
    expression's value) or a display_data (display(), plt.show()).

    Accessors return None when the bundle lacks the type: `text`, `html`,
    `markdown`, `svg`, `latex`, `javascript` (str), `png`, `jpeg`, `pdf`
    (base64 str, as E2B), `json` (the decoded JSON value). `png_bytes()`
    decodes the PNG. `raw` is the bundle; `formats()` lists its types."""

    def __init__(self, bundle, is_main_result=False):
        self.raw = dict(bundle)
        self.is_main_result = is_main_result

    def __getattr__(self, name):
        mime = _MIME.get(name)
        if mime is None:
            raise AttributeError(name)
        v = self.raw.get(mime)
        if name == "json" and isinstance(v, str):
            try:
                return json.loads(v)
            except ValueError:
                return v
        return v

    def png_bytes(self):
        return base64.b64decode(self.raw["image/png"]) if "image/png" in self.raw else None

    def formats(self):
        return [k for k, m in _MIME.items() if m in self.raw]

    def __getitem__(self, mime):
        return self.raw[mime]

    def __repr__(self):
        return f"Result(formats={self.formats()}, text={self.text!r})"

    # so that a notebook shows a ward result the way the sandbox made it
    def _repr_html_(self): return self.html
    def _repr_png_(self): return self.png
    def _repr_svg_(self): return self.svg
    def _repr_markdown_(self): return self.markdown
    def _repr_latex_(self): return self.latex
    def _repr_json_(self): return self.json


@dataclass
class ExecutionError:
    """An error raised by the sandboxed code (E2B's ExecutionError), or the
    limit that ended it: `name` ("ZeroDivisionError", "TimeoutError", ...),
    `value` (its message), `traceback` (one string), `hint` (ward's advice
    for a model, or None); `traceback_lines` the lines the daemon sent."""
    name: str
    value: str
    traceback: str = ""
    hint: Optional[str] = None
    traceback_lines: list = dc_field(default_factory=list)

    @classmethod
    def from_json(cls, e):
        if not isinstance(e, dict):
            return None
        tb = e.get("traceback") or []
        if isinstance(tb, str):
            tb = tb.splitlines()
        return cls(name=e.get("name") or e.get("ename") or "Error",
                   value=e.get("value") if "value" in e else e.get("evalue", ""),
                   traceback="\n".join(tb), hint=e.get("hint"), traceback_lines=list(tb))

    def __str__(self):
        return f"{self.name}: {self.value}" + (f" (hint: {self.hint})" if self.hint else "")


@dataclass
class Verdict:
    """How the run ended: `status` (ok, error, timeout, cpu_timeout,
    memory_limit, pids_limit, output_limit, disk_limit, signaled, killed,
    policy_violation, setup_failed), `exit_code`, `signal`, `limit`
    ({"name", "value"} or None), `usage` (wall_ms, cpu_user_ms, cpu_sys_ms,
    peak_memory_bytes, ...); `raw` is the whole verdict JSON."""
    status: str
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    limit: Optional[dict] = None
    usage: dict = dc_field(default_factory=dict)
    raw: dict = dc_field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, v):
        return cls(status=v.get("status", "error"), exit_code=v.get("exit_code"),
                   signal=v.get("signal"), limit=v.get("limit"),
                   usage=v.get("usage") or {}, raw=v)


@dataclass
class Artifact:
    """A file the code created or changed under /workspace: `path`,
    `size`, `sha256`, `mime_type`, and `content` (bytes) when a one-shot
    asked for its files inline and this one fit the cap (else None)."""
    path: str
    size: Optional[int] = None
    sha256: Optional[str] = None
    mime_type: Optional[str] = None
    content: Optional[bytes] = None
    raw: dict = dc_field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, a):
        c = a.get("content")
        return cls(path=a.get("path"), size=a.get("size"), sha256=a.get("sha256"),
                   mime_type=a.get("mime_type"),
                   content=base64.b64decode(c) if isinstance(c, str) else None, raw=a)


@dataclass
class Execution:
    """The result of run_code / ward.run (E2B's Execution, plus ward's
    verdict): `logs`, `results`, `error` (None unless the code raised or a
    limit ended it), `verdict`, `execution_id`, `execution_count`, `value`
    (function-call mode), `artifacts`, `context_new`, `context_lost`."""
    logs: Logs = dc_field(default_factory=Logs)
    results: list = dc_field(default_factory=list)
    error: Optional[ExecutionError] = None
    verdict: Optional[Verdict] = None
    execution_id: Optional[str] = None
    execution_count: Optional[int] = None
    value: Any = None
    artifacts: list = dc_field(default_factory=list)
    context_new: bool = False
    context_lost: bool = False

    @property
    def text(self):
        """The main result's text/plain (the last expression's value), if any."""
        for r in self.results:
            if r.is_main_result:
                return r.text
        return None

    @property
    def stdout(self):
        return self.verdict.raw.get("stdout", "") if self.verdict else "".join(self.logs.stdout)

    @property
    def stderr(self):
        return self.verdict.raw.get("stderr", "") if self.verdict else "".join(self.logs.stderr)

    @property
    def status(self):
        return self.verdict.status if self.verdict else None


@dataclass
class CommandResult:
    """A finished command (E2B's CommandResult, plus the verdict)."""
    stdout: str
    stderr: str
    exit_code: Optional[int]
    status: str
    error: Optional[str] = None
    verdict: Optional[Verdict] = None


@dataclass
class EntryInfo:
    """A file listing's entry: `name` (the last component), `path` (relative
    to /workspace), `type` (file, directory, symlink, other), `size`,
    `mode` ("0644"), `mtime` (seconds since the epoch)."""
    name: str
    path: str
    type: str
    size: int = 0
    mode: Optional[str] = None
    mtime: Optional[float] = None
    path_escaped: bool = False


@dataclass
class WriteInfo:
    """An upload's answer: `path`, `size`, `sha256`, `mode`."""
    path: str
    size: int
    sha256: str
    mode: str

    @property
    def name(self):
        return self.path.rsplit("/", 1)[-1]


@dataclass
class SandboxInfo:
    """A session as the daemon lists it: `sandbox_id` (the session's id,
    "se_..."), `status`, `created_at`, `expires_at`, `ttl`, `contexts`;
    `raw` is the whole object."""
    sandbox_id: str
    status: str
    created_at: Optional[float] = None
    expires_at: Optional[float] = None
    ttl: Optional[float] = None
    contexts: list = dc_field(default_factory=list)
    raw: dict = dc_field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, s):
        return cls(sandbox_id=s["id"], status=s.get("status"), created_at=s.get("created_at"),
                   expires_at=s.get("expires_at"), ttl=s.get("ttl"),
                   contexts=s.get("contexts") or [], raw=s)


@dataclass
class Context:
    """A named code context of a session (one kernel per language and
    name; its variables persist). Created by its first call."""
    name: str
    language: str = "python"

    @property
    def id(self):
        return self.name
