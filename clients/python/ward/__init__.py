"""ward — the Python SDK of the ward sandbox daemon (`ward serve`).

Standard library only. Talks HTTP/JSON and NDJSON to the daemon over its
unix socket or TCP: WARD_URL (unix:///run/ward/ward.sock, the default, or
http://host:port) and WARD_API_KEY, or the url= and api_key= arguments.

    import ward
    with ward.Sandbox() as sbx:
        ex = sbx.run_code("print(6 * 7)")
        print(ex.logs.stdout)             # ['42\\n']

    ward.run("1/0").error                 # ExecutionError(name='ZeroDivisionError', ...)
    ward.call("def add(a, b): return a + b", "add", {"a": 1, "b": 2})   # 3

ward.aio has the asyncio twins (AsyncSandbox, run, call), also exported
here as AsyncSandbox, run_async and call_async.
"""
from .errors import *  # noqa: F401,F403
from .errors import __all__ as _errors_all
from .models import (Artifact, CommandResult, Context, EntryInfo, Execution, ExecutionError, Logs,
                     Result, SandboxInfo, Verdict, WriteInfo)
from .sandbox import CommandHandle, Sandbox, call, run, run_command
from .aio import AsyncCommandHandle, AsyncSandbox
from .aio import call as call_async
from .aio import run as run_async
from .aio import run_command as run_command_async

__version__ = "0.1.0"

__all__ = ["Sandbox", "AsyncSandbox", "run", "call", "run_command", "run_async", "call_async", "run_command_async",
           "CommandHandle", "AsyncCommandHandle", "Artifact", "Execution", "ExecutionError", "Logs",
           "Result", "Verdict", "CommandResult", "EntryInfo", "WriteInfo", "SandboxInfo",
           "Context", "__version__"] + list(_errors_all)
