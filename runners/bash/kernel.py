"""ward's bash kernel: one persistent bash behind the JSON-lines protocol of
runners/PROTOCOL.md. Python 3.11 standard library only; started as
`/usr/bin/python3 -I -u /opt/ward/runners/bash/kernel.py`.

How a cell runs (docs/kernels.md, "bash"):

- bash (`bash --norc --noprofile`, its own session) reads commands from a
  pipe. Its stdout and stderr are two more pipes, and fd 62 a fourth on which
  it reports the end of each cell.
- The kernel writes the cell to a private file under /tmp and sends bash one
  line:  builtin source FILE </dev/null 62>&-; builtin printf '%s %d %s\\n' TOKEN "$?" "$-" >&62
  so the cell runs in the shell itself (cwd, variables, functions persist),
  reads /dev/null (a `cat` or `read` in a cell cannot eat the kernel's next
  line) and cannot see fd 62; TOKEN is random per cell.
- One thread: a selector over the requests, bash's stdout, stderr and fd 62.
  When the status line arrives, everything the cell wrote is already in the
  pipes: the kernel reads them dry before it replies, so a cell's output
  always comes before its reply. Between stdout and stderr the order is the
  order in which the kernel read them (best effort: two pipes).
"""

import codecs
import json
import os
import re
import selectors
import signal
import sys
import time

STATUS_FD = 62
HINT_TAIL = 65536  # bytes of a cell's stderr kept for hints
INTERRUPT_GRACE = 2.0  # seconds a cell has to end after SIGINT before its shell is killed

NETWORK_PATTERNS = re.compile(
    r"Could not resolve host|Temporary failure in name resolution|Name or service not known"
    r"|No address associated with hostname|Network is unreachable|unable to resolve host"
    r"|getaddrinfo|Failed to establish a new connection|No route to host|nodename nor servname",
    re.I,
)
READONLY_RE = re.compile(r"""['‘"]?(/[^'’":\n]*)['’"]?: (Read-only file system|Permission denied)""")
WRITE_VERBS = re.compile(r"cannot (create|touch|remove|make|move|copy|overwrite|open .* for writing)|: line \d+: /|^bash: /|^/")
NOT_FOUND_RE = re.compile(r"(?:^|: )([^\s:]+): command not found$", re.M)
SIGNALS = {n: s.name for s in signal.Signals for n in [s.value]}


def now():
    return time.time()


def fmt_size(n):
    for unit, v in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= v and n % v == 0:
            return f"{n // v} {unit}"
    for unit, v in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= v:
            return f"{n / v:.1f} {unit}"
    return f"{n} bytes"


def shell_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def cut_utf8(text, max_bytes):
    b = text.encode("utf-8", "surrogatepass")
    if len(b) <= max_bytes:
        return text
    return b[:max_bytes].decode("utf-8", "ignore")


class Request:
    def __init__(self, rid):
        self.id = rid
        self.truncated = {"stdout": False, "stderr": False}


class Cell:
    def __init__(self, req, token, path, code, count, stop_on_error):
        self.req = req
        self.token = token
        self.path = path
        self.code = code
        self.count = count
        self.stop_on_error = stop_on_error
        self.stderr_tail = ""
        self.deadline = None  # (CLOCK_MONOTONIC seconds, timeout_ms) of a session call


def interrupt_error(cell, evalue, note=None):
    """The error of an interrupted cell. A session call's agent interrupts it at its
    deadline: then it is the timeout, in a one-shot's words (lib/kernel-errors.c)."""
    if cell is None or cell.deadline is None or time.monotonic() < cell.deadline[0] - 0.005:
        return {"ename": "Interrupted", "evalue": evalue + ((" " + note) if note else ""), "traceback": []}
    msg = ("the sandbox's wall-time limit of %d ms was reached; "
           "make the code faster or ask for a longer timeout" % cell.deadline[1])
    return {"ename": "TimeoutError", "evalue": msg, "hint": msg,
            "traceback": ([note] if note else []) + ["TimeoutError: " + msg]}


class Shell:
    """A bash process and the kernel's ends of its four pipes."""

    def __init__(self, bash, env, cwd):
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        st_r, st_w = os.pipe()
        actions = [
            (os.POSIX_SPAWN_DUP2, in_r, 0),
            (os.POSIX_SPAWN_DUP2, out_w, 1),
            (os.POSIX_SPAWN_DUP2, err_w, 2),
            (os.POSIX_SPAWN_DUP2, st_w, STATUS_FD),
        ]
        try:
            self.pid = os.posix_spawn(bash, [bash, "--norc", "--noprofile"], env, file_actions=actions, setsid=True)
        finally:
            for fd in (in_r, out_w, err_w, st_w):
                os.close(fd)
        self.stdin = in_w
        self.out = out_r
        self.err = err_r
        self.status = st_r
        for fd in (out_r, err_r, st_r):
            os.set_blocking(fd, False)
        self.statbuf = b""
        self.exit_code = None

    def write(self, text):
        data = text.encode("utf-8", "surrogateescape")
        while data:
            n = os.write(self.stdin, data)
            data = data[n:]

    def reap(self, wait=1.0):
        """The exit status (negative: killed by that signal); kills the session if bash lingers."""
        if self.exit_code is not None:
            return self.exit_code
        deadline = now() + wait
        while True:
            try:
                pid, st = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.exit_code = 0
                return 0
            if pid:
                self.exit_code = os.waitstatus_to_exitcode(st)
                return self.exit_code
            if now() >= deadline:
                self.kill()
                deadline = now() + 5
            time.sleep(0.002)

    def kill(self):
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def close(self):
        for fd in (self.stdin, self.out, self.err, self.status):
            try:
                os.close(fd)
            except OSError:
                pass


class Kernel:
    def __init__(self):
        try:
            cfg = json.loads(os.environ.get("WARD_KERNEL_CONFIG") or "{}")
        except ValueError:
            cfg = {}
        if not isinstance(cfg, dict):
            cfg = {}
        limit = cfg.get("output_limit")
        self.used = 0
        self.per_request = cfg.get("output_per_request") is True  # a session's kernel
        self.limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0 else None
        writable = cfg.get("writable")
        self.writable = [w for w in writable if isinstance(w, str)] if isinstance(writable, list) else ["/workspace", "/tmp"]
        self.network = cfg.get("network") if isinstance(cfg.get("network"), str) else None
        mem = cfg.get("memory_limit")
        self.memory_limit = mem if isinstance(mem, int) and mem > 0 else None
        # The policy lint reads Python source only: refused on every cell, never ignored.
        lint = cfg.get("lint") if isinstance(cfg.get("lint"), dict) else {}
        fields = ["lint." + k for k in ("deny_imports", "deny_calls") if isinstance(lint.get(k), list) and lint.get(k)]
        self.lint_refused = ("%s: the bash kernel cannot apply lint (it reads Python source only); remove lint "
                             "from the policy or run Python" % ", ".join(fields)) if fields else None

        self.env = {k: v for k, v in os.environ.items() if k != "WARD_KERNEL_CONFIG"}
        self.cwd = os.getcwd()
        self.bash = self.find_bash()

        # The protocol goes to a private duplicate of fd 1; fd 1 itself is pointed at
        # /dev/null so that nothing else can ever write into the protocol.
        self.proto = os.dup(1)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)

        self.sel = selectors.DefaultSelector()
        self.queue = []
        self.inbuf = b""
        self.eof = False
        self.line_no = 0
        self.shell = None
        self.cell = None
        self.req = None  # the latest request: output is counted and attributed to it
        self.count = 0
        self.failed = False
        self.flags = ""  # bash's $- after the last cell
        self.decoders = {}
        self.cell_dir = None
        self.version = ""
        self.interrupted = False
        self.interrupt_deadline = None

    # -- protocol ---------------------------------------------------------

    def send(self, msg_type, content, parent_id=None):
        msg = {"msg_type": msg_type}
        if parent_id is not None:
            msg["parent_id"] = parent_id
        msg["time"] = now()
        msg["content"] = content
        data = (json.dumps(msg, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass")
        try:
            while data:
                n = os.write(self.proto, data)
                data = data[n:]
        except BrokenPipeError:
            self.quit(0)  # the supervisor is gone

    def stream(self, name, text):
        if not text:
            return
        if name == "stderr" and self.cell_dir:
            # bash names the sourced file in its messages: say <cell 3>, not /tmp/.ward-bash-1a2b3c4d/<cell 3>
            text = text.replace(self.cell_dir + "/", "")
        if self.cell is not None and name == "stderr":
            self.cell.stderr_tail = (self.cell.stderr_tail + text)[-HINT_TAIL:]
        req = self.req
        if self.limit is not None:
            # output_limit counts stream text over the kernel's whole life, stdout and stderr together
            n = len(text.encode("utf-8", "surrogatepass"))
            if self.used + n > self.limit:
                room = self.limit - self.used
                if req is not None:
                    req.truncated[name] = True
                if room <= 0:
                    return
                text = cut_utf8(text, room)
                n = len(text.encode("utf-8", "surrogatepass"))
                if not text:
                    return
            self.used += n
        self.send("stream", {"name": name, "text": text}, req.id if req else None)

    # -- the shell --------------------------------------------------------

    def find_bash(self):
        for d in (self.env.get("PATH") or "/usr/bin:/bin").split(":") + ["/usr/bin", "/bin"]:
            p = os.path.join(d or ".", "bash")
            if os.access(p, os.X_OK):
                return p
        return "/bin/bash"

    def start_shell(self):
        sh = Shell(self.bash, self.env, self.cwd)
        self.shell = sh
        self.decoders = {n: codecs.getincrementaldecoder("utf-8")("replace") for n in ("stdout", "stderr")}
        self.sel.register(sh.out, selectors.EVENT_READ, lambda: self.on_output(sh, "stdout"))
        self.sel.register(sh.err, selectors.EVENT_READ, lambda: self.on_output(sh, "stderr"))
        self.sel.register(sh.status, selectors.EVENT_READ, lambda: self.on_status(sh))
        # Probe: the shell answers on fd 62 with its version once it is up.
        token = os.urandom(8).hex()
        try:
            # A SIGINT (sent to the whole session by the kernel) ends the sourced cell, not bash.
            sh.write("trap 'builtin return 130 2>/dev/null' INT; "
                     f"shopt -s expand_aliases 2>/dev/null; builtin printf '%s %s\\n' {token} \"$BASH_VERSION\" >&{STATUS_FD}\n")
        except OSError:
            pass
        deadline = now() + 10
        buf = b""
        while now() < deadline:
            for key, _ in self.sel.select(timeout=max(0.0, deadline - now())):
                if key.fd != sh.status:
                    key.data()
                    continue
                try:
                    data = os.read(sh.status, 4096)
                except BlockingIOError:
                    continue
                if not data:
                    raise RuntimeError(f"bash ({self.bash}) exited at startup with status {sh.reap()}")
                buf += data
                for line in buf.split(b"\n")[:-1]:
                    parts = line.decode("utf-8", "replace").split(" ", 1)
                    if parts[0] == token:
                        self.version = parts[1] if len(parts) > 1 else ""
                        return
        raise RuntimeError(f"bash ({self.bash}) did not start within 10 s")

    def stop_shell(self):
        sh = self.shell
        if sh is None:
            return
        for fd in (sh.out, sh.err, sh.status):
            try:
                self.sel.unregister(fd)
            except (KeyError, ValueError):
                pass
        sh.kill()
        sh.reap(0.5)
        sh.close()
        self.shell = None

    def on_output(self, sh, name):
        fd = sh.out if name == "stdout" else sh.err
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.sel.unregister(fd)  # bash and everything it started closed it
            return
        if sh is self.shell:
            self.stream(name, self.decoders[name].decode(data))

    def drain(self, sh):
        """Read bash's stdout and stderr dry (they are non-blocking)."""
        for name, fd in (("stdout", sh.out), ("stderr", sh.err)):
            while True:
                try:
                    self.sel.get_key(fd)
                except (KeyError, ValueError):
                    break
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    break
                except OSError:
                    data = b""
                if not data:
                    self.sel.unregister(fd)
                    break
                self.stream(name, self.decoders[name].decode(data))

    def on_status(self, sh):
        try:
            data = os.read(sh.status, 4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.shell_died(sh)
            return
        sh.statbuf += data
        *lines, sh.statbuf = sh.statbuf.split(b"\n")
        for line in lines:
            parts = line.decode("utf-8", "replace").split(" ")
            if self.cell is not None and len(parts) >= 2 and parts[0] == self.cell.token:
                self.flags = parts[2] if len(parts) > 2 else ""
                try:
                    status = int(parts[1])
                except ValueError:
                    status = 1
                self.finish_cell(status)

    # -- SIGINT -----------------------------------------------------------

    def on_sigint(self, signum, frame):
        # The running cell only: bash's trap makes the cell return 130; if it does not end
        # within INTERRUPT_GRACE seconds (a builtin loop may not), the shell is killed.
        if self.cell is None or self.shell is None or self.interrupted:
            return
        self.interrupted = True
        self.interrupt_deadline = now() + INTERRUPT_GRACE
        try:
            os.killpg(self.shell.pid, signal.SIGINT)
        except OSError:
            pass

    def on_wakeup(self):
        try:
            while os.read(self.wakeup, 512):
                pass
        except OSError:
            pass

    def shell_died(self, sh):
        # fd 62 reached EOF: bash exited, or exec'd another program (which closed 62).
        self.drain(sh)
        code = sh.reap(0.2)
        self.stop_shell()
        if code < 0:
            how = f"was killed by {SIGNALS.get(-code, 'signal %d' % -code)}"
        else:
            how = f"exited with status {code}"
        evalue = f"bash {how}; a new bash was started for the next cell: variables, functions, aliases and the working directory were reset"
        if self.cell is not None and self.interrupted:
            self.finish_cell(None, interrupt_error(
                self.cell, f"the cell was interrupted (SIGINT) and did not stop within {INTERRUPT_GRACE:g} s, so its bash was killed;",
                "a new bash was started for the next cell: variables, functions, aliases and the working directory were reset"))
        elif self.cell is not None:
            hint = None
            code_text = self.cell.code
            if "e" in self.flags or re.search(r"\bset\s+-[a-zA-Z]*e|\berrexit\b", code_text):
                hint = "errexit (`set -e`) was on: a failing command ends the shell itself; turn it off with `set +e`, or run the commands in a subshell: ( set -e; ... )"
            elif re.search(r"(^|[;&|({\s])(exit|exec|logout)\b", code_text):
                hint = "`exit` ends the kernel's shell; use `return N` to leave a cell early (a cell is sourced)"
            elif code < 0 and -code == signal.SIGKILL and self.memory_limit:
                hint = f"SIGKILL is what the sandbox's memory limit ({fmt_size(self.memory_limit)}) does to a process that exceeds it"
            content = {"ename": "ShellExited", "evalue": evalue, "traceback": []}
            if hint:
                content["hint"] = hint
            self.flags = ""
            self.finish_cell(None, content)
        else:
            self.stream("stderr", f"ward: {evalue}\n")
        self.start_shell()

    # -- cells ------------------------------------------------------------

    def write_cell(self, n, code):
        for attempt in range(2):
            if self.cell_dir is None or attempt:
                self.cell_dir = self.make_dir()
            path = os.path.join(self.cell_dir, f"<cell {n}>")
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            except FileNotFoundError:
                continue  # the cell removed our directory
            with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write(code if code.endswith("\n") else code + "\n")
            return path
        raise OSError("cannot write the cell to a file")

    def make_dir(self):
        for base in ["/tmp"] + self.writable + [self.cwd]:
            d = os.path.join(base, ".ward-bash-" + os.urandom(4).hex())
            try:
                os.mkdir(d, 0o700)
                return d
            except OSError:
                continue
        raise OSError("no writable directory for the cell files")

    def execute(self, rid, content):
        stop = content.get("stop_on_error", True) is not False
        code = content.get("code")
        if self.failed and stop:
            self.send("execute_reply", {"status": "aborted", "execution_count": self.count, "stdout_truncated": False, "stderr_truncated": False}, rid)
            return
        if not stop:
            self.failed = False  # a cell sent with stop_on_error false ends the aborting
        if not isinstance(code, str):
            self.send("error", {"ename": "ProtocolError", "evalue": "execute_request needs content.code (a string)", "traceback": []}, rid)
            self.send("execute_reply", {"status": "error", "execution_count": self.count, "stdout_truncated": False, "stderr_truncated": False}, rid)
            return
        if self.lint_refused:
            self.failed = True
            self.send("error", {"ename": "PolicyError", "evalue": self.lint_refused, "hint": self.lint_refused, "traceback": []}, rid)
            self.send("execute_reply", {"status": "error", "execution_count": self.count, "stdout_truncated": False, "stderr_truncated": False}, rid)
            return
        self.count += 1
        req = Request(rid)
        self.req = req
        if self.per_request:
            self.used = 0
        try:
            path = self.write_cell(self.count, code)
        except OSError as e:
            self.send("error", {"ename": "KernelError", "evalue": str(e), "traceback": []}, rid)
            self.send("execute_reply", {"status": "error", "execution_count": self.count, "stdout_truncated": False, "stderr_truncated": False}, rid)
            return
        token = os.urandom(8).hex()
        self.cell = Cell(req, token, path, code, self.count, stop)
        deadline, ms = content.get("deadline"), content.get("timeout_ms")
        if type(deadline) in (int, float) and type(ms) is int:
            self.cell.deadline = (deadline, ms)
        line = f"builtin source {shell_quote(path)} </dev/null {STATUS_FD}>&-; builtin printf '%s %d %s\\n' {token} \"$?\" \"$-\" >&{STATUS_FD}\n"
        try:
            self.shell.write(line)
        except OSError:
            self.shell_died(self.shell)

    def finish_cell(self, status, error=None):
        cell = self.cell
        if self.shell is not None:
            self.drain(self.shell)
        if error is None and status and self.interrupted:
            error = interrupt_error(cell, f"the cell was interrupted (SIGINT); exit status {status}")
        if error is None and status:
            error = self.status_error(status, cell)
        self.interrupted = False
        self.interrupt_deadline = None
        if error is not None:
            self.send("error", error, cell.req.id)
        self.cell = None
        try:
            os.unlink(cell.path)
        except OSError:
            pass
        if error is not None and cell.stop_on_error:
            self.failed = True
        self.send(
            "execute_reply",
            {
                "status": "error" if error is not None else "ok",
                "execution_count": cell.count,
                "stdout_truncated": cell.req.truncated["stdout"],
                "stderr_truncated": cell.req.truncated["stderr"],
            },
            cell.req.id,
        )

    def status_error(self, status, cell):
        evalue = f"exit status {status}"
        if status > 128 and status - 128 in SIGNALS:
            evalue += f" (128 + {status - 128}: killed by {SIGNALS[status - 128]})"
        content = {"ename": "ExitStatus", "evalue": evalue, "traceback": []}
        hint = self.hint(status, cell.stderr_tail)
        if hint:
            content["hint"] = hint
        return content

    def hint(self, status, err):
        missing = NOT_FOUND_RE.findall(err)
        if missing:
            cmd = missing[-1]
            hint = f"command '{cmd}' is not installed in this sandbox's image"
            close = self.close_commands(cmd)
            if close:
                hint += "; close names: " + ", ".join(close)
            return hint
        if self.network == "none" and NETWORK_PATTERNS.search(err):
            return "the network is disabled by this sandbox's policy (network: none); only loopback works"
        for line in err.splitlines():
            m = READONLY_RE.search(line)
            if not m:
                continue
            p = m.group(1)
            if m.group(2) == "Permission denied" and not WRITE_VERBS.search(line):
                continue
            if self.outside_writable(p):
                return f"'{p}' is read-only in this sandbox; write under {' or '.join(self.writable)}"
        if status == 128 + signal.SIGKILL and self.memory_limit:
            return f"SIGKILL is what the sandbox's memory limit ({fmt_size(self.memory_limit)}) does to a process that exceeds it"
        return None

    def outside_writable(self, p):
        p = os.path.normpath(p)
        return not any(p == w.rstrip("/") or p.startswith(w.rstrip("/") + "/") for w in self.writable)

    def close_commands(self, cmd):
        import difflib

        names = set()
        for d in (self.env.get("PATH") or "/usr/bin:/bin").split(":"):
            try:
                names.update(e for e in os.listdir(d or "."))
            except OSError:
                continue
        return difflib.get_close_matches(cmd, sorted(names), n=3, cutoff=0.75)

    # -- requests ---------------------------------------------------------

    def on_stdin(self):
        try:
            data = os.read(0, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.eof = True
            self.sel.unregister(0)
            if self.inbuf.strip():
                self.queue.append(self.inbuf)
            self.inbuf = b""
            return
        self.inbuf += data
        *lines, self.inbuf = self.inbuf.split(b"\n")
        for line in lines:
            self.queue.append(line)

    def dispatch(self, raw):
        self.line_no += 1
        if not raw.strip():
            return
        try:
            msg = json.loads(raw.decode("utf-8", "surrogateescape"))
        except ValueError as e:
            self.send("error", {"ename": "ProtocolError", "evalue": f"request line {self.line_no} is not JSON: {e}", "traceback": []})
            return
        if not isinstance(msg, dict) or not isinstance(msg.get("msg_type"), str):
            rid = msg.get("id") if isinstance(msg, dict) else None
            self.send("error", {"ename": "ProtocolError", "evalue": f"request line {self.line_no} is not a JSON object with a msg_type", "traceback": []}, rid)
            return
        rid = msg.get("id")
        content = msg.get("content") if isinstance(msg.get("content"), dict) else {}
        kind = msg["msg_type"]
        if kind == "execute_request":
            self.execute(rid, content)
        elif kind == "call_request":
            self.req = Request(rid)
            self.send("call_reply", {"status": "error", "error": {"ename": "Unsupported", "evalue": "function-call mode is not available for bash", "traceback": []}}, rid)
        elif kind == "shutdown_request":
            self.send("shutdown_reply", {}, rid)
            self.quit(0)
        else:
            self.send("error", {"ename": "ProtocolError", "evalue": f"unknown msg_type {kind[:100]!r}", "traceback": []}, rid)

    def quit(self, code):
        try:
            self.stop_shell()
        finally:
            if self.cell_dir:
                try:
                    for e in os.listdir(self.cell_dir):
                        os.unlink(os.path.join(self.cell_dir, e))
                    os.rmdir(self.cell_dir)
                except OSError:
                    pass
            os._exit(code)

    def run(self):
        self.wakeup, wakeup_w = os.pipe()
        os.set_blocking(self.wakeup, False)
        os.set_blocking(wakeup_w, False)
        signal.set_wakeup_fd(wakeup_w, warn_on_full_buffer=False)
        self.sel.register(self.wakeup, selectors.EVENT_READ, self.on_wakeup)
        signal.signal(signal.SIGINT, self.on_sigint)
        try:
            self.sel.register(0, selectors.EVENT_READ, self.on_stdin)
        except (PermissionError, ValueError, OSError):
            # a regular file (epoll refuses those): read it all now
            data = b""
            while True:
                chunk = os.read(0, 1 << 20)
                if not chunk:
                    break
                data += chunk
            self.queue.extend(data.split(b"\n"))
            self.eof = True
        try:
            self.start_shell()
        except (OSError, RuntimeError) as e:
            self.send("error", {"ename": "KernelError", "evalue": f"cannot start bash: {e}", "traceback": []})
            self.quit(1)
        self.send("status", {"execution_state": "idle", "language": "bash", "language_version": self.version})
        while True:
            while self.cell is None and self.queue:
                self.dispatch(self.queue.pop(0))
            if self.cell is None and self.eof:
                self.quit(0)
            timeout = None
            if self.interrupt_deadline is not None:
                timeout = self.interrupt_deadline - now()
                if timeout <= 0:
                    self.interrupt_deadline = None
                    self.shell.kill()  # fd 62 reaches EOF: shell_died() reports it
                    timeout = None
            for key, _ in self.sel.select(timeout):
                key.data()


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    Kernel().run()
