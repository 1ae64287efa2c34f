"""The exceptions of the ward SDK.

Three families, all under WardError:

- APIError: the daemon refused a request ({"error": {"code", "message",
  "field"}} with an HTTP status); one class per kind of refusal.
- VerdictError: the code ran (or was meant to) and its verdict's status is
  neither "ok" nor "error": a limit, a signal, a cancel, the lint, a sandbox
  that could not be built. The Execution is attached.
- CommandExitError and CallError: a command exited non-zero, a function call
  raised; E2B raises for the first, ward.call for the second.

An exception raised by the sandboxed code itself (status "error") is not a
Python exception here: it is Execution.error, as in E2B.
"""
import builtins

__all__ = [
    "WardError", "WardConnectionError", "APIError", "InvalidRequestError",
    "AuthenticationError", "PermissionDeniedError", "NotFoundError",
    "ConflictError", "SessionBusyError", "SessionEndedError",
    "PayloadTooLargeError", "QuotaExceededError", "ServerError",
    "ServiceUnavailableError", "AgentTimeoutError", "WorkspaceFullError",
    "VerdictError", "LimitError", "TimeoutError", "CpuTimeoutError",
    "MemoryLimitError", "PidsLimitError", "OutputLimitError", "DiskLimitError",
    "SignaledError", "KilledError", "PolicyViolationError", "SetupFailedError",
    "CommandExitError", "CallError",
]


class WardError(Exception):
    """Every error the SDK raises. `message` is the server's (or the SDK's)
    text, `field` the request field at fault (dotted) or None."""

    def __init__(self, message, field=None):
        super().__init__(message)
        self.message = message
        self.field = field

    def __str__(self):
        if self.field:
            return f"{self.message} (field: {self.field})"
        return self.message


class WardConnectionError(WardError, builtins.ConnectionError):
    """The daemon could not be reached, or the connection broke mid-answer."""


# --- API errors -------------------------------------------------------------

class APIError(WardError):
    """The daemon answered with an error: `status` (HTTP), `code` (the
    error's code, e.g. "quota_exceeded"), `message`, `field`."""

    def __init__(self, message, field=None, code=None, status=None):
        super().__init__(message, field)
        self.code = code
        self.status = status

    def __str__(self):
        s = f"{self.status} {self.code}: {self.message}"
        return s + (f" (field: {self.field})" if self.field else "")


class InvalidRequestError(APIError):
    """400: a field missing, unknown or wrong (`field` names it); also the
    files API's path_not_allowed and not_a_file, command_failed."""


class AuthenticationError(APIError):
    """401: no API key, or a wrong, unknown or revoked one."""


class PermissionDeniedError(APIError):
    """403: the key lacks the scope (`field` "scope"), or the sandbox user
    may not access a file."""


class NotFoundError(APIError):
    """404: no such session, execution, command or file (or another
    tenant's)."""


class ConflictError(APIError):
    """409: is_a_directory, file_busy, changed, ..."""


class SessionBusyError(ConflictError):
    """409 session_busy: a call is already running in the session."""


class SessionEndedError(APIError):
    """410: the session has ended (expired, dead, stalled or lost)."""


class PayloadTooLargeError(APIError):
    """413: a body over --max-body / --max-file, a download over --max-file."""


class QuotaExceededError(APIError):
    """429: a quota was reached. `quota` names it (max_executions,
    max_per_tenant, max_sessions, max_sessions_per_tenant, tenant_memory,
    tenants, uploads, files)."""

    @property
    def quota(self):
        return self.field


class ServerError(APIError):
    """500: setup_failed (a session's sandbox could not be built) or internal."""


class ServiceUnavailableError(APIError):
    """503: shutting_down, files_busy, uploads_busy, agent_busy."""


class AgentTimeoutError(APIError):
    """504: a session's agent did not answer within 5 s."""


class WorkspaceFullError(APIError):
    """507: the session's /workspace is full."""


_BY_CODE = {
    "session_busy": SessionBusyError,
    "session_ended": SessionEndedError,
    "quota_exceeded": QuotaExceededError,
    "unauthorized": AuthenticationError,
    "forbidden": PermissionDeniedError,
    "permission_denied": PermissionDeniedError,
    "not_found": NotFoundError,
    "agent_timeout": AgentTimeoutError,
    "workspace_full": WorkspaceFullError,
}
_BY_STATUS = {
    400: InvalidRequestError, 401: AuthenticationError, 403: PermissionDeniedError,
    404: NotFoundError, 405: InvalidRequestError, 409: ConflictError,
    410: SessionEndedError, 413: PayloadTooLargeError, 429: QuotaExceededError,
    500: ServerError, 503: ServiceUnavailableError, 504: AgentTimeoutError,
    507: WorkspaceFullError,
}


def api_error(status, body):
    """The APIError for an HTTP error answer (`body`: the raw bytes)."""
    import json
    code, message, field = None, None, None
    try:
        err = json.loads(body)["error"]
        code, message, field = err.get("code"), err.get("message"), err.get("field")
    except (ValueError, KeyError, TypeError, AttributeError):
        message = body.decode("utf-8", "replace").strip()[:500] or f"HTTP {status}"
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else APIError
    return cls(message or f"HTTP {status}", field, code, status)


# --- verdicts -----------------------------------------------------------------

class VerdictError(WardError):
    """The verdict's status is neither "ok" nor "error". `status` is the
    verdict's status, `limit` its limit object ({"name", "value"}) or None,
    `hint` the server's advice for the model (or None), and `execution` the
    whole Execution (logs, results, error, verdict) as far as it got."""

    status = None

    def __init__(self, message, execution=None, field=None):
        super().__init__(message, field)
        self.execution = execution

    @property
    def verdict(self):
        return self.execution.verdict if self.execution is not None else None

    @property
    def limit(self):
        return self.verdict.limit if self.verdict is not None else None

    @property
    def hint(self):
        e = self.execution.error if self.execution is not None else None
        return e.hint if e is not None else None


class LimitError(VerdictError):
    """A resource limit of the policy ended the run."""


class TimeoutError(LimitError, builtins.TimeoutError):
    """status "timeout": the wall-time limit was reached (the daemon's, or the
    client's own deadline, after which the SDK cancels the execution)."""
    status = "timeout"


class CpuTimeoutError(LimitError):
    """status "cpu_timeout": the CPU-time limit was reached."""
    status = "cpu_timeout"


class MemoryLimitError(LimitError):
    """status "memory_limit": the cgroup's OOM killer ended a process."""
    status = "memory_limit"


class PidsLimitError(LimitError):
    """status "pids_limit": process creation was refused by the pids limit."""
    status = "pids_limit"


class OutputLimitError(LimitError):
    """status "output_limit": stdout+stderr exceeded the output cap."""
    status = "output_limit"


class DiskLimitError(LimitError):
    """status "disk_limit": /workspace or /tmp was full."""
    status = "disk_limit"


class SignaledError(VerdictError):
    """status "signaled": the program was killed by a signal of its own making
    (or the kernel died)."""
    status = "signaled"


class KilledError(VerdictError):
    """status "killed": the execution was cancelled (DELETE, a closed
    connection, the session deleted, the daemon shutting down)."""
    status = "killed"


class PolicyViolationError(VerdictError):
    """status "policy_violation": the policy's lint refused the code."""
    status = "policy_violation"


class SetupFailedError(VerdictError):
    """status "setup_failed": the sandbox could not be built."""
    status = "setup_failed"


VERDICT_ERRORS = {c.status: c for c in (
    TimeoutError, CpuTimeoutError, MemoryLimitError, PidsLimitError,
    OutputLimitError, DiskLimitError, SignaledError, KilledError,
    PolicyViolationError, SetupFailedError)}


def verdict_error(execution):
    """The VerdictError for an Execution whose status is not ok/error, or
    None. Unknown future statuses raise the base VerdictError."""
    status = execution.verdict.status
    if status in ("ok", "error"):
        return None
    cls = VERDICT_ERRORS.get(status, VerdictError)
    parts = [f"the execution ended with status {status}"]
    lim = execution.verdict.limit
    if lim:
        parts.append(f"limit {lim.get('name')} = {lim.get('value')}")
    err = execution.error
    if err is not None and (err.hint or err.value):
        parts.append(err.hint or err.value)
    werr = execution.verdict.raw.get("error") if execution.verdict.raw else None
    if status == "setup_failed" and isinstance(werr, dict) and werr.get("layer"):
        parts.append(f"{werr['layer']}: {werr.get('message')} ({werr.get('reason')})")
    return cls("; ".join(parts), execution)


# --- commands and calls --------------------------------------------------------

class CommandExitError(WardError):
    """A foreground command (or a background one's wait()) exited non-zero;
    like E2B's CommandExitException. `result` is the CommandResult;
    `exit_code`, `stdout`, `stderr` are its fields."""

    def __init__(self, result):
        super().__init__(f"the command exited with status {result.exit_code}"
                         + (f": {result.stderr.strip()[-400:]}" if result.stderr.strip() else ""))
        self.result = result

    exit_code = property(lambda self: self.result.exit_code)
    stdout = property(lambda self: self.result.stdout)
    stderr = property(lambda self: self.result.stderr)
    verdict = property(lambda self: self.result.verdict)


class CallError(WardError):
    """ward.call / Sandbox.call: the function raised, or the call was refused
    (FunctionNotFound, ArgumentError, SerializationError, PolicyViolation).
    `name`, `value`, `traceback`, `hint` are the error's; `execution` the
    whole Execution."""

    def __init__(self, execution):
        e = execution.error
        name = e.name if e else "Error"
        value = e.value if e else "the call failed"
        super().__init__(f"{name}: {value}" + (f" (hint: {e.hint})" if e and e.hint else ""))
        self.execution = execution
        self.name, self.value = name, value
        self.traceback = e.traceback if e else ""
        self.hint = e.hint if e else None
