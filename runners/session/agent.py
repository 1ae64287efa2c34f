#!/usr/bin/python3
"""ward's session agent: the one program of a long-lived sandbox (a "session").

Started by the supervisor as `/usr/bin/python3 -I -u /opt/ward/runners/session/agent.py`
with cwd and HOME /workspace and WARD_KERNEL_CONFIG in the environment. It
speaks the kernels' transport (runners/PROTOCOL.md, "Sessions: the agent"):
JSON requests on stdin, JSON messages on a private copy of the original
stdout. Python 3.11 standard library only.

Design:

- One thread, one selectors loop; every child is read through non-blocking
  pipes with os.read, so no child can stall the agent. Deadlines (a kernel's
  start, timeouts, the interrupt grace, the drain after a command exits) are
  Timers run by the loop. SIGCHLD wakes the loop (signal.set_wakeup_fd) and
  the children that exited are reaped then: no zombies, and every pipe to a
  dead child is closed.
- A Context is one language kernel (runners/<language>/kernel.*), keyed by
  (language, context name), in its own session and process group. The agent
  forwards an execute_request to it and relays its stdout lines unchanged,
  except its execute_reply, which gains language, context, context_new and
  context_lost. Its stderr becomes `stream` messages.
- A Command is a process run for a command_request: in the foreground its
  output is streamed; in the background it is kept in memory (capped at
  output_limit) for command_status_request.
- One foreground request at a time (an Exec or a foreground Command).
  Interrupting an Exec sends SIGINT to the kernel and kills its group if no
  reply came within 50 ms; a Command's group is killed at once.
- fd 0 and fd 1 are kept as private close-on-exec duplicates for the
  protocol; fd 0 then reads /dev/null and fd 1 goes to fd 2, so a stray print
  cannot corrupt the protocol.
- An agent forked by the python zygote (runners/python/zygote.py, which
  sets __ward_zygote__) forks its python contexts instead of exec'ing
  python3: they share the zygote's preloaded modules. The zygote turns the
  child into what an exec'd kernel would be (become_kernel) and drops the
  agent's objects and fds. Node and bash contexts, and commands, are exec'd.
"""

import codecs
import json
import os
import select
import selectors
import signal
import subprocess
import time
import traceback

PYTHON = "/usr/bin/python3"
AGENT_VERSION = "1"
LINE_CAP = 64 << 20                  # bytes of one line from a kernel (or of one request)
REPLY_CAP = LINE_CAP - (64 << 10)    # bytes of one status reply: the daemon reads lines of LINE_CAP
READ_SIZE = 1 << 16
START_TIMEOUT = 60.0                 # seconds a kernel has to say `status`
INTERRUPT_GRACE = 0.05               # seconds a kernel has to reply after SIGINT
EXIT_DRAIN = 0.2                     # seconds a command's pipes may stay open after it exited
MAX_COMMANDS = 64                    # background commands' records kept
DEFAULT_OUTPUT_LIMIT = 1 << 20
RUNNERS = os.environ.get("WARD_RUNNERS_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_languages(runners):
    """The one language registry, runners/languages.json (the C side reads it at build
    time): {name: kernel argv} and {alias: name}. "{runners}" is where the runners are."""
    with open(os.path.join(runners, "languages.json"), encoding="utf-8") as f:
        langs = json.load(f)["languages"]
    kernels = {l["name"]: [runners + a[len("{runners}"):] if a.startswith("{runners}/") else a
                           for a in l["argv"]] for l in langs}
    return kernels, {a: l["name"] for l in langs for a in l["aliases"]}


KERNELS, ALIASES = load_languages(RUNNERS)
ZYGOTE = globals().get("__ward_zygote__")   # set by the zygote that forked this agent
INTERRUPT_STATUS = {"cancel": "killed", "timeout": "timeout"}


class BadRequest(Exception):
    """A request of the wrong shape: a ProtocolError, then its reply with status error."""


def kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def read_fd(fd):
    """One read: bytes, b"" at EOF, None when nothing is there yet."""
    try:
        return os.read(fd, READ_SIZE)
    except BlockingIOError:
        return None
    except OSError:
        return b""


def spawn(argv, env, cwd, with_stdin):
    """argv in a session of its own; returns (Popen, stdin, stdout, stderr): our pipe ends."""
    ours, theirs = [], []
    try:
        stdin = subprocess.DEVNULL
        if with_stdin:
            stdin, w = os.pipe()
            theirs.append(stdin)
            ours.append(w)
        for _ in range(2):
            r, w = os.pipe()
            ours.append(r)
            theirs.append(w)
        proc = subprocess.Popen(argv, stdin=stdin, stdout=theirs[-2], stderr=theirs[-1], cwd=cwd,
                                env=env, close_fds=True, start_new_session=True)
    except BaseException:
        for fd in ours:
            os.close(fd)
        raise
    finally:
        for fd in theirs:
            os.close(fd)
    for fd in ours:
        os.set_blocking(fd, False)
    return (proc, *([] if with_stdin else [None]), *ours)


class Forked:
    """A context forked from the agent: the part of Popen's interface the agent uses."""

    def __init__(self, pid):
        self.pid, self.returncode = pid, None

    def poll(self):
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                pid, status = self.pid, 0
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout):
        end = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() >= end:
                raise subprocess.TimeoutExpired(["python"], timeout)
            time.sleep(0.005)
        return self.returncode


def fork_kernel(cwd, agent):
    """A python kernel forked from this agent (itself forked by the zygote); as spawn
    returns. The child never returns here: ZYGOTE.become_kernel unwinds to the zygote."""
    pipes = [os.pipe() for _ in range(4)]   # stdin, stdout, stderr, "in its own session"
    try:
        pid = os.fork()
    except BaseException:
        for fd in sum(pipes, ()):
            os.close(fd)
        raise
    if pid == 0:
        ZYGOTE.become_kernel(pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][1], cwd, agent)
        os._exit(127)
    ours = [pipes[0][1], pipes[1][0], pipes[2][0]]
    for fd in (pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][1]):
        os.close(fd)
    os.read(pipes[3][0], 1)                 # it did setsid (or died): killpg reaches it
    os.close(pipes[3][0])
    for fd in ours:
        os.set_blocking(fd, False)
    return (Forked(pid), *ours)


def json_line(obj):
    # a lone surrogate (from a kernel's JSON) becomes its \\uXXXX escape: still JSON
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "backslashreplace") + b"\n"


def escaped_size(text):
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "backslashreplace")) - 2


def clip_escaped(text, budget):
    """text cut so that its JSON escape takes at most budget bytes (a control
    character escapes to six), and whether it was cut."""
    size = escaped_size(text)
    if size <= budget:
        return text, False
    while size > budget:
        text = text[:max(len(text) * budget // size - 1, 0)]
        size = escaped_size(text)
    return text, True


def exit_fields(rc):
    return {"exit_code": rc if rc is not None and rc >= 0 else None,
            "signal": -rc if rc is not None and rc < 0 else None}


class Lines:
    """Splits a byte stream into lines; a line longer than LINE_CAP is cut there
    (the rest of it is dropped) and counted in `overflows`."""

    def __init__(self):
        self.buf, self.dropping, self.overflows = bytearray(), False, 0

    def feed(self, data):
        out, parts = [], data.split(b"\n")
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if not self.dropping:
                self.buf += part
                if len(self.buf) > LINE_CAP:
                    out.append(bytes(self.buf[:LINE_CAP]))
                    self.buf.clear()
                    self.dropping = True
                    self.overflows += 1
                elif not last:
                    out.append(bytes(self.buf))
                    self.buf.clear()
            if not last:
                self.dropping = False
        return out

    def rest(self):
        """At EOF: the last line if it had no newline."""
        rest, self.buf = bytes(self.buf), bytearray()
        return [rest] if rest and not self.dropping else []


class Timer:
    def __init__(self, delay, fn):
        self.when, self.fn, self.live = time.monotonic() + delay, fn, True

    def cancel(self):
        self.live = False


class Context:
    """One language kernel: its process, the agent's ends of its pipes, the request it runs."""

    def __init__(self, language, name, proc, stdin, stdout, stderr):
        self.language, self.name, self.proc, self.pid = language, name, proc, proc.pid
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.pending = bytearray()       # request bytes not yet written to the kernel
        self.lines = Lines()
        self.errdec = codecs.getincrementaldecoder("utf-8")("replace")
        self.ready = self.closed = False
        self.exec = None                 # the Exec it runs, or will run once ready
        self.last_id = None
        self.start_timer = None


class Exec:
    """An execute_request or a call_request in the foreground: content is what
    the kernel is sent, reply the msg_type that answers it."""

    def __init__(self, rid, ctx, content, reply, new):
        self.id, self.ctx, self.content, self.reply, self.new = rid, ctx, content, reply, new
        self.sent = False
        self.status = None               # "timeout" or "killed" once interrupted
        self.timers = []


class Command:
    """A process run for a command_request, in the foreground or the background."""

    def __init__(self, rid, cid, proc, out, err, background, limit):
        self.id, self.cid, self.proc, self.pid = rid, cid, proc, proc.pid
        self.background, self.limit = background, limit
        self.pipes = {out: "stdout", err: "stderr"}
        self.data = {"stdout": bytearray(), "stderr": bytearray()}
        self.truncated = {"stdout": False, "stderr": False}
        self.decoders = {n: codecs.getincrementaldecoder("utf-8")("replace") for n in self.data}
        self.started, self.ended = time.monotonic(), None
        self.returncode = self.reason = None   # reason: "timeout" or "killed" when the agent killed it
        self.finished = False            # exited, and its pipes are closed
        self.timers = []

    def status(self):
        if not self.finished:
            return "running"
        if self.reason:
            return self.reason
        return "ok" if self.returncode == 0 else "error" if self.returncode > 0 else "signaled"

    def result(self):
        end = self.ended if self.ended is not None else time.monotonic()
        return {"status": self.status(), **exit_fields(self.returncode),
                "wall_ms": int((end - self.started) * 1000)}


class Agent:
    def __init__(self):
        try:
            config = json.loads(os.environ.get("WARD_KERNEL_CONFIG") or "{}")
        except ValueError:
            config = {}
        limit = config.get("output_limit") if isinstance(config, dict) else None
        self.output_limit = limit if type(limit) is int and limit > 0 else DEFAULT_OUTPUT_LIMIT
        self.cwd = os.getcwd()
        self.proto_in, self.proto_out = os.dup(0), os.dup(1)     # close-on-exec
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        try:
            os.dup2(2, 1)
        except OSError:                  # no fd 2: stray prints go nowhere
            os.dup2(0, 1)
        self.sel = selectors.DefaultSelector()
        self.requests = Lines()
        self.contexts = {}               # (language, name) -> Context
        self.commands = {}               # command_id -> background Command, oldest first
        self.fg = None                   # the foreground Exec or Command
        self.reaping = []                # [(Popen, callback or None)]: killed, not yet reaped
        self.timers = []
        self.serial = 0
        self.child_exited = self.stopping = self.out_broken = False

    # -- the protocol
    def send(self, msg_type, content, parent_id=None):
        msg = {"msg_type": msg_type}
        if parent_id is not None:
            msg["parent_id"] = parent_id
        msg["time"], msg["content"] = time.time(), content
        self.write(json_line(msg))

    def write(self, data):
        view = memoryview(data)
        while view and not self.out_broken:
            try:
                view = view[os.write(self.proto_out, view):]
            except BlockingIOError:
                select.select([], [self.proto_out], [])
            except OSError:              # the supervisor is gone
                self.out_broken = True
                self.shutdown(None, reply=False)

    def error(self, ename, evalue, parent_id=None):
        self.send("error", {"ename": ename, "evalue": evalue, "traceback": []}, parent_id)

    def dispatch(self, raw):
        if not raw.strip():
            return
        try:
            msg = json.loads(raw.decode("utf-8"))
        except ValueError as e:
            return self.error("ProtocolError", "the request is not JSON: %s" % e)
        if not isinstance(msg, dict):
            return self.error("ProtocolError", "the request is not a JSON object")
        rid = msg.get("id")
        rid = rid if isinstance(rid, (str, int)) and not isinstance(rid, bool) else None
        mt, content = msg.get("msg_type"), msg.get("content")
        content = {} if content is None else content
        handler = {"execute_request": self.on_execute, "call_request": self.on_call,
                   "interrupt_request": self.on_interrupt,
                   "command_request": self.on_command, "command_status_request": self.on_command_status,
                   "command_kill_request": self.on_command_kill,
                   "shutdown_request": lambda rid, _: self.shutdown(rid, reply=True)}.get(mt)
        try:
            if handler is None:
                self.error("ProtocolError", "unknown msg_type %r" % (mt,), rid)
            elif not isinstance(content, dict):
                raise BadRequest("%s: content must be a JSON object" % mt)
            else:
                handler(rid, content)
        except BadRequest as e:
            self.error("ProtocolError", str(e), rid)
            self.error_reply(mt, rid, content)

    def error_reply(self, mt, rid, content):
        """The reply with status error that a request of msg_type mt expects, if any."""
        c = content if isinstance(content, dict) else {}
        if mt in ("execute_request", "call_request"):
            self.send(mt.replace("request", "reply"), {"status": "error", "execution_count": None,
                                        "language": c.get("language"), "context": c.get("context", "default"),
                                        "context_new": False, "context_lost": False,
                                        "stdout_truncated": False, "stderr_truncated": False}, rid)
        elif mt == "command_request":
            self.send("command_reply", {"status": "error", "exit_code": None, "signal": None, "wall_ms": 0}, rid)
        elif mt in ("command_status_request", "command_kill_request"):
            self.send(mt.replace("request", "reply"), {"command_id": c.get("command_id"), "state": "unknown",
                                                       "status": "error"}, rid)

    def busy(self, mt, rid, content):
        self.error("Busy", "request %r is running; the session runs one foreground request at a time"
                   % (self.fg.id,), rid)
        self.error_reply(mt, rid, content)

    # -- executes
    def on_execute(self, rid, c):
        stop = c.get("stop_on_error", True)
        if not isinstance(stop, bool):
            raise BadRequest("execute_request: stop_on_error must be a boolean")
        self.start_exec(rid, c, "execute_request", {"code": c.get("code"), "stop_on_error": stop})

    def on_call(self, rid, c):
        """Function mode in a context: the kernel loads the tool's source as a
        module of its own and calls the function (runners/PROTOCOL.md)."""
        function, filename, args = c.get("function"), c.get("filename", "tool.py"), c.get("args")
        if not isinstance(function, str) or not isinstance(filename, str) \
                or not (args is None or isinstance(args, (dict, list))):
            raise BadRequest("call_request needs function (a string), filename (a string, optional) "
                             "and args (an object or an array, optional)")
        self.start_exec(rid, c, "call_request", {"code": c.get("code"), "filename": filename,
                                                 "function": function, "args": args})

    def start_exec(self, rid, c, mt, content):
        code, language, name = c.get("code"), c.get("language"), c.get("context", "default")
        language = ALIASES.get(language, language) if isinstance(language, str) else language
        timeout_ms, names = c.get("timeout_ms") or 0, c.get("globals")
        if not isinstance(code, str) or not isinstance(language, str) or language not in KERNELS \
                or not isinstance(name, str):
            names = list(KERNELS)
            raise BadRequest("%s needs code (a string), language (%s) and context (a string, "
                             "optional)" % (mt, " or ".join(filter(None, [", ".join(names[:-1]), names[-1]]))))
        if type(timeout_ms) is not int or timeout_ms < 0 or not (names is None or isinstance(names, dict)):
            raise BadRequest("%s: timeout_ms must be an integer >= 0, globals an object" % mt)
        if names is not None:
            content["globals"] = names
        if self.fg is not None:
            return self.busy(mt, rid, c)
        ctx = self.contexts.get((language, name))
        new = ctx is None
        if new:
            try:
                ctx = self.start_context(language, name)
            except (OSError, ValueError) as e:
                self.error(type(e).__name__, "cannot start the %s kernel: %s" % (language, e), rid)
                return self.error_reply(mt, rid, c)
            self.send("context", {"language": language, "context": name, "state": "started", "pid": ctx.pid}, rid)
        ex = self.fg = ctx.exec = Exec(rid, ctx, content, mt.replace("request", "reply"), new)
        ctx.last_id = rid
        if timeout_ms:
            ex.timers.append(self.later(timeout_ms / 1000, lambda: self.interrupt(ex, "timeout")))
            ex.deadline = (time.monotonic() + timeout_ms / 1000, timeout_ms)  # told to the kernel
        if ctx.ready:
            self.forward(ex)

    def start_context(self, language, name):
        if language == "python" and ZYGOTE is not None:
            proc, stdin, stdout, stderr = fork_kernel(self.cwd, self)
        else:
            proc, stdin, stdout, stderr = spawn(KERNELS[language], None, self.cwd, with_stdin=True)
        ctx = self.contexts[(language, name)] = Context(language, name, proc, stdin, stdout, stderr)
        self.sel.register(stdout, selectors.EVENT_READ, lambda: self.on_kernel_stdout(ctx))
        self.sel.register(stderr, selectors.EVENT_READ, lambda: self.on_kernel_stderr(ctx))
        ctx.start_timer = self.later(START_TIMEOUT, lambda: self.start_failed(ctx))
        return ctx

    def start_failed(self, ctx):
        if ctx.closed or ctx.ready:
            return
        parent = ctx.exec.id if ctx.exec else None
        self.error("KernelError", "the %s kernel did not start within %g s" % (ctx.language, START_TIMEOUT), parent)
        self.kernel_died(ctx)

    def forward(self, ex):
        ex.sent = True
        req = {"msg_type": ex.reply.replace("reply", "request"), "id": ex.id, "content": dict(ex.content)}
        if getattr(ex, "deadline", None):
            req["content"].update(deadline=ex.deadline[0], timeout_ms=ex.deadline[1])
        ex.ctx.pending += json_line(req)
        self.flush_requests(ex.ctx)

    def flush_requests(self, ctx):
        while ctx.pending and not ctx.closed:
            try:
                n = os.write(ctx.stdin, ctx.pending)
            except BlockingIOError:      # the kernel reads slowly: write the rest when it can
                if ctx.stdin not in self.sel.get_map():
                    self.sel.register(ctx.stdin, selectors.EVENT_WRITE, lambda: self.flush_requests(ctx))
                return
            except OSError:              # it died: its stdout's EOF says so
                ctx.pending.clear()
            else:
                del ctx.pending[:n]
        if not ctx.closed and ctx.stdin in self.sel.get_map():
            self.sel.unregister(ctx.stdin)

    def on_kernel_stdout(self, ctx):
        if not ctx.closed and self.pump_stdout(ctx) == "eof":
            self.kernel_died(ctx)

    def pump_stdout(self, ctx):
        data = read_fd(ctx.stdout)
        if data is None:
            return "empty"
        overflows = ctx.lines.overflows
        for line in (ctx.lines.feed(data) if data else ctx.lines.rest()):
            self.kernel_line(ctx, line)
        if ctx.lines.overflows != overflows:
            self.send("stream", {"name": "stderr", "text": "ward: a line of the %s kernel's output was longer "
                                 "than %d MiB; the rest of it was dropped\n" % (ctx.language, LINE_CAP >> 20)},
                      self.parent(ctx))
        return "data" if data else "eof"

    def on_kernel_stderr(self, ctx):
        if ctx.closed or ctx.stderr is None:
            return
        data = read_fd(ctx.stderr)
        if data == b"":                  # the Python kernel redirects its fd 2 at once
            self.close_fd(ctx.stderr)
            ctx.stderr = None
        text = ctx.errdec.decode(data or b"", final=data == b"")
        if text:
            self.send("stream", {"name": "stderr", "text": text}, self.parent(ctx))
        return data

    def parent(self, ctx):
        return ctx.exec.id if ctx.exec else ctx.last_id

    def kernel_line(self, ctx, raw):
        try:
            msg = json.loads(raw.decode("utf-8"))
        except ValueError:
            msg = None
        if not isinstance(msg, dict):
            if raw:                      # the kernel broke the protocol: never the program's output
                self.send("protocol_error", {
                    "ename": "KernelProtocolError", "traceback": [],
                    "evalue": "the %s kernel sent a line that is not a protocol message (%d bytes); "
                              "it was dropped" % (ctx.language, len(raw)),
                    "hint": "the kernel's protocol channel carries only JSON messages; do not write "
                            "to the kernel's private descriptors"}, self.parent(ctx))
            return
        ex = ctx.exec
        if not ctx.ready and msg.get("msg_type") == "status":
            ctx.ready = True
            ctx.start_timer.cancel()
            if ex is not None and not ex.sent:
                self.forward(ex)
        elif ex is not None and ex.sent and msg.get("msg_type") == ex.reply and msg.get("parent_id") == ex.id:
            content = msg.get("content")
            self.drain_stderr(ctx)       # what it wrote there before replying comes first
            self.finish_exec(ex, dict(content) if isinstance(content, dict) else {}, lost=False)
        else:
            self.write(raw + b"\n")

    def drain(self, ctx):
        """Read what the kernel left in its pipes (bounded: a writer cannot hold the agent)."""
        for _ in range(256):
            if self.pump_stdout(ctx) != "data":
                break
        self.drain_stderr(ctx)

    def drain_stderr(self, ctx):
        for _ in range(256):
            if ctx.stderr is None or not self.on_kernel_stderr(ctx):
                break

    def finish_exec(self, ex, content, lost):
        content.update(language=ex.ctx.language, context=ex.ctx.name, context_new=ex.new, context_lost=lost)
        if ex.status:
            content["status"] = ex.status
        for t in ex.timers:
            t.cancel()
        if ex.ctx.exec is ex:
            ex.ctx.exec = None
        if self.fg is ex:
            self.fg = None
        self.send(ex.reply, content, ex.id)

    def lost_reply(self, status, rc=None, died=False):
        content = {"status": status, "execution_count": None}
        if died:
            content.update(exit_fields(rc))
        content.update(stdout_truncated=False, stderr_truncated=False)
        return content

    def kernel_died(self, ctx):
        """Its stdout reached EOF, or it exited, or it never started: the context is lost."""
        if ctx.closed:
            return
        self.drain(ctx)
        ex = ctx.exec
        self.drop_context(ctx)
        if ex is None:
            return
        if ex.status:                    # being interrupted: that is the answer
            return self.finish_exec(ex, self.lost_reply(ex.status), lost=True)
        self.when_reaped(ctx.proc, lambda rc: self.finish_exec(ex, self.lost_reply("died", rc, True), lost=True))

    def drop_context(self, ctx):
        ctx.closed = True
        kill_group(ctx.pid)
        for fd in (ctx.stdin, ctx.stdout, ctx.stderr):
            if fd is not None:
                self.close_fd(fd)
        ctx.start_timer.cancel()
        if self.contexts.get((ctx.language, ctx.name)) is ctx:
            del self.contexts[(ctx.language, ctx.name)]
        self.when_reaped(ctx.proc, None)

    def interrupt(self, fg, status):
        """Interrupt the foreground request fg (if it still is) with the reply status given."""
        if fg is None or fg is not self.fg:
            return
        if isinstance(fg, Command):
            return self.kill_command(fg, status)
        if fg.status or fg.ctx.closed:
            return
        fg.status = status
        if not fg.sent:                  # still starting: nothing to interrupt
            return self.kill_exec(fg)
        try:
            os.kill(fg.ctx.pid, signal.SIGINT)
        except OSError:
            pass
        fg.timers.append(self.later(INTERRUPT_GRACE, lambda: self.kill_exec(fg)))

    def kill_exec(self, ex):
        if self.fg is not ex or ex.ctx.closed:
            return
        self.drain(ex.ctx)               # its reply may be waiting in the pipe
        if self.fg is ex and not ex.ctx.closed:
            self.drop_context(ex.ctx)
            self.finish_exec(ex, self.lost_reply(ex.status), lost=True)

    def on_interrupt(self, rid, c):
        reason = c.get("reason", "cancel")
        if not isinstance(reason, str) or reason not in INTERRUPT_STATUS:
            raise BadRequest("interrupt_request: reason must be cancel or timeout")
        self.interrupt(self.fg, INTERRUPT_STATUS[reason])

    # -- commands
    def on_command(self, rid, c):
        cmd, env, cwd = c.get("cmd"), c.get("env") or {}, c.get("cwd")
        timeout_ms, background = c.get("timeout_ms") or 0, c.get("background", False)
        if not (isinstance(cmd, str) or isinstance(cmd, list) and cmd and all(isinstance(a, str) for a in cmd)):
            raise BadRequest("command_request: cmd must be a string or a non-empty array of strings")
        if not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
            raise BadRequest("command_request: env must be an object of strings")
        if not (cwd is None or isinstance(cwd, str)) or type(timeout_ms) is not int or timeout_ms < 0 \
                or not isinstance(background, bool):
            raise BadRequest("command_request: cwd must be a string, timeout_ms an integer >= 0, "
                             "background a boolean")
        if not background and self.fg is not None:
            return self.busy("command_request", rid, c)
        if background and len(self.commands) >= MAX_COMMANDS:
            done = [k for k, v in self.commands.items() if v.finished]
            if not done:
                self.error("TooManyCommands", "%d background commands are running; kill or wait for one"
                           % MAX_COMMANDS, rid)
                return self.error_reply("command_request", rid, c)
            del self.commands[done[0]]
        argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else cmd
        full_env = {k: v for k, v in os.environ.items() if k != "WARD_KERNEL_CONFIG"}
        full_env.update(env)
        started = time.monotonic()
        try:
            proc, _, out, err = spawn(argv, full_env, os.path.join(self.cwd, cwd or ""), with_stdin=False)
        except (OSError, ValueError) as e:
            self.error(type(e).__name__, str(e), rid)
            return self.send("command_reply", {"status": "error", "signal": None,
                                               "exit_code": 127 if isinstance(e, FileNotFoundError) else 126,
                                               "wall_ms": int((time.monotonic() - started) * 1000)}, rid)
        cid = None
        if background:
            self.serial += 1
            cid = "c%d" % self.serial
        command = Command(rid, cid, proc, out, err, background, self.output_limit)
        for fd in (out, err):
            self.sel.register(fd, selectors.EVENT_READ, lambda fd=fd: self.on_command_output(command, fd))
        if timeout_ms:
            command.timers.append(self.later(timeout_ms / 1000, lambda: self.kill_command(command, "timeout")))
        if background:
            self.commands[cid] = command
            self.send("command_reply", {"status": "running", "command_id": cid, "pid": proc.pid}, rid)
        else:
            self.fg = command

    def on_command_output(self, command, fd):
        name = command.pipes.get(fd)
        data = read_fd(fd) if name else None
        if data is None:
            return None
        if not data:
            self.close_fd(fd)
            del command.pipes[fd]
            self.command_text(command, name, b"", final=True)
            if command.returncode is not None and not command.pipes:
                self.finish_command(command)
        else:
            self.command_text(command, name, data)
        return data

    def command_text(self, command, name, data, final=False):
        if command.background:
            buf = command.data[name]
            room = command.limit - len(buf)
            if len(data) > room:
                command.truncated[name] = True
            buf += data[:max(room, 0)]
        else:
            text = command.decoders[name].decode(data, final)
            if text:
                self.send("stream", {"name": name, "text": text}, command.id)

    def command_exited(self, command):
        command.returncode, command.ended = command.proc.returncode, time.monotonic()
        if not command.pipes:
            self.finish_command(command)
        else:                            # a grandchild may hold the pipes: not for long
            command.timers.append(self.later(EXIT_DRAIN, lambda: self.close_command(command)))

    def close_command(self, command):
        if command.finished:
            return
        kill_group(command.pid)
        for fd in list(command.pipes):
            for _ in range(16):
                if not self.on_command_output(command, fd):
                    break
        for fd, name in list(command.pipes.items()):
            self.close_fd(fd)
            self.command_text(command, name, b"", final=True)
        command.pipes.clear()
        self.finish_command(command)

    def finish_command(self, command):
        if command.finished:
            return
        command.finished = True
        for t in command.timers:
            t.cancel()
        if self.fg is command:
            self.fg = None
            self.send("command_reply", command.result(), command.id)

    def kill_command(self, command, reason):
        if command.returncode is None:
            command.reason = reason
            kill_group(command.pid)

    def on_command_status(self, rid, c):
        cid = c.get("command_id")
        if not isinstance(cid, str):
            raise BadRequest("command_status_request needs command_id (a string)")
        command = self.commands.get(cid)
        if command is None:
            return self.send("command_status_reply", {"command_id": cid, "state": "unknown"}, rid)
        content = {"command_id": cid, "state": "exited" if command.finished else "running", **command.result()}
        clipped = False
        for name in ("stdout", "stderr"):
            text, cut = clip_escaped(command.data[name].decode("utf-8", "replace"), REPLY_CAP // 2)
            content[name] = text
            content[name + "_truncated"] = command.truncated[name] or cut
            clipped = clipped or cut
        if clipped:                      # the output is kept whole: a later status may not fit either
            content["reply_truncated"] = True
        self.send("command_status_reply", content, rid)

    def on_command_kill(self, rid, c):
        cid = c.get("command_id")
        if not isinstance(cid, str):
            raise BadRequest("command_kill_request needs command_id (a string)")
        command = self.commands.get(cid)
        state = "unknown" if command is None else "exited" if command.returncode is not None else "killed"
        if state == "killed":
            self.kill_command(command, "killed")
        self.send("command_kill_reply", {"command_id": cid, "state": state}, rid)

    # -- children, timers, the loop
    def when_reaped(self, proc, callback):
        if proc.poll() is not None:
            if callback:
                callback(proc.returncode)
        else:
            self.reaping.append((proc, callback))

    def check_children(self):
        """After SIGCHLD: reap whatever exited."""
        for item in list(self.reaping):
            if item[0].poll() is not None:
                self.reaping.remove(item)
                if item[1]:
                    item[1](item[0].returncode)
        for ctx in list(self.contexts.values()):
            if ctx.proc.poll() is not None:
                self.kernel_died(ctx)
        fg = [self.fg] if isinstance(self.fg, Command) else []
        for command in fg + list(self.commands.values()):
            if command.returncode is None and command.proc.poll() is not None:
                self.command_exited(command)

    def later(self, delay, fn):
        timer = Timer(delay, fn)
        self.timers.append(timer)
        return timer

    def run_timers(self):
        """Run the timers that are due; the seconds until the next one (None: none)."""
        now = time.monotonic()
        due = [t for t in self.timers if t.live and t.when <= now]
        self.timers = [t for t in self.timers if t.live and t.when > now]
        for t in due:
            if t.live:
                t.live = False
                self.guard(t.fn)
        return max(0.0, min(t.when for t in self.timers) - time.monotonic()) if self.timers else None

    def guard(self, fn):
        """Run fn; a fault of the agent itself is reported, never fatal."""
        try:
            fn()
        except Exception as e:
            self.send("error", {"ename": "AgentError", "evalue": "%s: %s" % (type(e).__name__, e),
                                "traceback": traceback.format_exc().splitlines()})

    def close_fd(self, fd):
        try:
            self.sel.unregister(fd)
        except (KeyError, ValueError):
            pass
        try:
            os.close(fd)
        except OSError:
            pass

    def on_requests(self):
        data = read_fd(self.proto_in)
        if data is None:
            return
        for line in (self.requests.feed(data) if data else self.requests.rest()):
            self.guard(lambda: self.dispatch(line))
        if not data:
            self.shutdown(None, reply=False)

    def on_signal(self, signum, _frame):
        if signum == signal.SIGCHLD:
            self.child_exited = True
        elif signum == signal.SIGTERM:
            self.stopping = True

    def shutdown(self, rid, reply):
        """Kill every kernel's and command's process group, reap them, exit 0."""
        procs = [p for p, _ in self.reaping]
        for ctx in list(self.contexts.values()):
            procs.append(ctx.proc)
            self.drop_context(ctx)
        commands = ([self.fg] if isinstance(self.fg, Command) else []) + list(self.commands.values())
        for command in commands:
            if not command.finished:
                kill_group(command.pid)
                procs.append(command.proc)
                for fd in command.pipes:
                    self.close_fd(fd)
        for proc in procs:
            kill_group(proc.pid)
            try:
                proc.wait(2)
            except subprocess.TimeoutExpired:
                pass
        if reply:
            self.send("shutdown_reply", {}, rid)
        os._exit(0)

    def run(self):
        wake_r, wake_w = os.pipe()
        for fd in (wake_r, wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):   # SIGINT: ignored
            signal.signal(signum, self.on_signal)
        self.sel.register(wake_r, selectors.EVENT_READ, lambda: read_fd(wake_r))
        self.sel.register(self.proto_in, selectors.EVENT_READ, self.on_requests)
        self.send("status", {"execution_state": "idle", "language": "session", "agent_version": AGENT_VERSION})
        timeout = None
        while True:
            for key, _ in self.sel.select(timeout):
                self.guard(key.data)
            if self.child_exited:
                self.child_exited = False
                self.guard(self.check_children)
            if self.stopping:
                self.shutdown(None, reply=False)
            timeout = self.run_timers()


if __name__ == "__main__":
    Agent().run()
