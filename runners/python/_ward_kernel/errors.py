"""Exceptions as `error` contents a model can act on: the kernel's frames
removed, and a hint when the sandbox knows more than the exception says.

Loaded on the first error. A hint is a claim about the sandbox's policy
(taken from the kernel's configuration), never a guess about the code; when
in doubt there is no hint.
"""

import errno
import linecache
import os
import sys
import traceback

NET_ERRNOS = {errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ECONNREFUSED, errno.ENETDOWN}
FS_ERRNOS = {errno.EROFS, errno.EACCES, errno.EPERM}
NET_HINT = "the network is disabled by this sandbox's policy (network: none); only loopback works"
STDIN_HINT = ("standard input is empty in this kernel (it reads /dev/null), so input() gets "
              "nothing; put the values in the code or in a file")
IPYTHON_HINT = ("IPython is not installed in this sandbox's image; this kernel has display() "
                "as a builtin, so drop the import")


def human_size(n):
    units, i = ("bytes", "KiB", "MiB", "GiB", "TiB"), 0
    while n >= 1024 and i < len(units) - 1:
        n, i = n / 1024, i + 1
    return ("%d %s" if n == int(n) else "%.1f %s") % (n, units[i])


def join_or(items):
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


class Errors:
    def __init__(self, config, cwd, sources):
        self.config = config
        self.cwd = cwd
        self.sources = sources       # filename -> linecache entry, for cells and tools
        self.modules = None

    def content(self, e, filename, ename=None):
        """The `error` content for e. The traceback starts at the first frame
        of `filename` (the cell or the tool file): the kernel's frames, and
        asyncio's for awaited code, come before it. With `ename` (a fault of
        the kernel itself) every frame is kept."""
        linecache.cache.update(self.sources)   # in case the user's code cleared it
        tb = e.__traceback__
        if not ename:
            while tb is not None and tb.tb_frame.f_code.co_filename != filename:
                tb = tb.tb_next
        try:
            if not ename and isinstance(e, KeyboardInterrupt):
                lines = self.user_frames(tb) + ["KeyboardInterrupt"]
            else:
                lines = "".join(traceback.format_exception(type(e), e, tb)).splitlines()
            evalue = str(e)
        except Exception as fault:
            lines, evalue = [], "(str() raised %s)" % type(fault).__name__
        content = {"ename": ename or type(e).__name__, "evalue": evalue, "traceback": lines}
        try:
            hint = None if ename else self.hint(e)
        except Exception:
            hint = None
        if hint:
            content["hint"] = hint
        return content

    @staticmethod
    def user_frames(tb):
        """Traceback lines of the user's frames only: an interrupt arrives
        through the kernel's signal handler, whose frames end the chain."""
        frames = traceback.extract_tb(tb)
        here = os.path.dirname(os.path.abspath(__file__)) + os.sep
        while frames and os.path.abspath(frames[-1].filename).startswith(here):
            frames.pop()
        if not frames:
            return []
        return ["Traceback (most recent call last):"] + "".join(traceback.format_list(frames)).splitlines()

    def timeout(self, e, filename, timeout_ms):
        """A call interrupted by its timeout, in the one-shot's words
        (lib/kernel-errors.c): TimeoutError, the limit as value and hint."""
        content = self.content(e, filename)
        msg = ("the sandbox's wall-time limit of %d ms was reached; "
               "make the code faster or ask for a longer timeout" % timeout_ms)
        lines = content["traceback"][:-1] if content["traceback"] else []
        content.update(ename="TimeoutError", evalue=msg, hint=msg,
                       traceback=lines + ["TimeoutError: " + msg])
        return content

    def hint(self, e):
        cfg = self.config
        if isinstance(e, ModuleNotFoundError) and isinstance(e.name, str) and e.name:
            return self.module_hint(e.name)
        if isinstance(e, MemoryError):
            limit = cfg.get("memory_limit")
            if type(limit) is int and limit > 0:
                return "the sandbox's memory limit is %s" % human_size(limit)
            return None
        if cfg.get("network") == "none" and network_failure(e):
            return NET_HINT
        if isinstance(e, OSError) and e.errno in FS_ERRNOS:
            return self.fs_hint(e)
        if isinstance(e, EOFError) and str(e) == "EOF when reading a line":
            return STDIN_HINT
        return None

    def module_hint(self, name):
        top = name.partition(".")[0]
        if top == "IPython":
            return IPYTHON_HINT
        names = self.module_names()
        if top in names or top in sys.modules:
            return None              # installed: a submodule is missing, or it is broken
        import difflib
        lower = {n.lower(): n for n in sorted(names)}
        close = [lower[n] for n in difflib.get_close_matches(top.lower(), lower, 3, 0.6)]
        hint = "module '%s' is not installed in this sandbox's image" % top
        return hint + ("; close names: " + ", ".join(close) if close else "")

    def module_names(self):
        import pkgutil
        if self.modules is None:     # the image's modules do not change: scan them once
            names = set(sys.builtin_module_names)
            names.update(m.name for m in pkgutil.iter_modules([p for p in sys.path if p != self.cwd]))
            self.modules = names
        workspace = {m.name for m in pkgutil.iter_modules([self.cwd])} if self.cwd else set()
        return {n for n in self.modules | workspace if not n.startswith("_")}

    def fs_hint(self, e):
        writable = [w.rstrip("/") or "/" for w in self.config.get("writable") or ()
                    if isinstance(w, str) and w.startswith("/")]
        if not writable:
            return None
        for name in (e.filename, e.filename2):
            if isinstance(name, bytes):
                name = os.fsdecode(name)
            if not isinstance(name, str) or not name:
                continue
            try:
                path = os.path.abspath(name)
            except OSError:
                continue
            if any(path == w or path.startswith(w if w == "/" else w + "/") for w in writable):
                continue
            where = join_or(writable)
            if e.errno == errno.EROFS or not os.path.lexists(path) or os.access(path, os.R_OK):
                return "'%s' is read-only in this sandbox; write under %s" % (path, where)
            return "'%s' is not accessible in this sandbox; write under %s" % (path, where)
        return None


def network_failure(e):
    """Whether a connect or name-resolution failure is anywhere in e's chain
    (urllib and requests wrap the OSError a few levels deep)."""
    seen, todo = set(), [e]
    while todo and len(seen) < 32:
        x = todo.pop(0)
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, ConnectionRefusedError) or (isinstance(x, OSError) and x.errno in NET_ERRNOS):
            return True
        sock = sys.modules.get("socket")
        if sock is not None and isinstance(x, sock.gaierror):
            return True
        try:
            linked = [x.__cause__, x.__context__, getattr(x, "reason", None), *x.args]
        except Exception:
            linked = [x.__cause__, x.__context__]
        todo.extend(y for y in linked if isinstance(y, BaseException))
    return False
