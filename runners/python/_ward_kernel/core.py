"""The Python kernel itself: requests, cells, rich output, figures.

runners/python/kernel.py is the entry point; docs/kernels.md describes the
behaviour for users and runners/PROTOCOL.md the wire format. The output side
is streams.py; errors.py, lint.py and call.py load on first use.

It must never die on bad input, and never import a third-party module that
the user's code has not imported.
"""

import _ast as ast                   # the node classes, without ast.py's import cost
import io
import os
import sys

from _ward_kernel import wire
from _ward_kernel.streams import BinaryWriter, Channel, Writer

CO_COROUTINE = 0x80                  # inspect.CO_COROUTINE, without importing inspect
AWAIT_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
PARSE_FLAGS = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
RESULT = "_ward_cell_value_"         # where a cell leaves its last expression's value
REPR_METHODS = (("_repr_html_", "text/html"), ("_repr_markdown_", "text/markdown"),
                ("_repr_svg_", "image/svg+xml"), ("_repr_png_", "image/png"),
                ("_repr_jpeg_", "image/jpeg"), ("_repr_json_", "application/json"),
                ("_repr_latex_", "text/latex"))


class Kernel:
    def __init__(self, config):
        self.config = config
        self.count = 0
        self.aborting = False
        self.loop_ = self.libc = self.errors_ = self.lint_ = None
        self.running = False         # the user's code (or its reprs, figures, tool) is running
        self.deadline = None         # (monotonic seconds, timeout_ms) of a session call
        self.shown = set()           # figures display()ed in this cell: not shown again
        self.sources = {}            # cell and tool sources, for tracebacks
        self.tool_modules = set()
        self.user_site = None        # ~/.local/lib/pythonX.Y/site-packages, once known
        os.environ["MPLBACKEND"] = "Agg"     # before any user code; subprocesses inherit it
        os.environ.setdefault("MPLCONFIGDIR", "/tmp/matplotlib")
        writable = config.get("writable")
        if not isinstance(writable, list) or "/tmp" in writable:
            # Caches (fontconfig's, pip's) go to /tmp, not HOME=/workspace: they are not artifacts.
            os.environ.setdefault("XDG_CACHE_HOME", "/tmp/.cache")
        limit = config.get("output_limit")
        self.ch = Channel(limit if type(limit) is int and limit > 0 else None)
        # in a session the cap holds per request, not over the kernel's life
        self.ch.per_request = config.get("output_per_request") is True
        sys.stdout = Writer(self.ch, "stdout", 1)
        sys.stderr = Writer(self.ch, "stderr", 2)
        sys.argv = [""]
        try:
            self.cwd = os.getcwd()
            sys.path.append(self.cwd)  # after the stdlib, so a user's json.py cannot break the kernel
        except OSError:
            self.cwd = None
        sys.meta_path.insert(0, ImportHooks({"matplotlib.pyplot": self.patch_pyplot,
                                             "linecache": self.patch_linecache}))
        import builtins
        builtins.display = self.display
        import _signal
        _signal.signal(_signal.SIGINT, self.on_sigint)
        main = type(sys)("__main__")     # pickle and multiprocessing look names up here
        main.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = main
        self.ns = main.__dict__

    # -- requests
    def serve(self):
        requests = open(self.ch.requests, "rb", buffering=1 << 16)
        while True:
            try:
                line = requests.readline()
                if not line:
                    self.finish(reply=False)
                if line.strip():
                    self.handle(line)
            except KeyboardInterrupt:
                pass                 # an interrupt between cells: the kernel carries on

    def handle(self, line):
        try:
            req = wire.loads(line)
        except ValueError as e:
            return self.protocol_error("the request is not JSON: %s" % e, parent=None)
        if not isinstance(req, dict):
            return self.protocol_error("the request is not a JSON object", parent=None)
        rid = req.get("id")
        rid = rid if isinstance(rid, (str, int)) and not isinstance(rid, bool) else None
        mt, content = req.get("msg_type"), req.get("content")
        content = {} if content is None else content
        handler = {"execute_request": self.execute, "call_request": self.call,
                   "shutdown_request": lambda _: self.finish(reply=True)}.get(mt)
        if handler is None:
            return self.protocol_error("unknown msg_type %r: expected execute_request, "
                                       "call_request or shutdown_request" % (mt,), parent=rid)
        if not isinstance(content, dict):
            return self.protocol_error("%s: content must be a JSON object" % mt, parent=rid)
        self.ch.begin(rid)
        handler(content)

    def protocol_error(self, evalue, parent=False):
        if parent is not False:
            self.ch.begin(parent)
        self.ch.message("error", {"ename": "ProtocolError", "evalue": evalue, "traceback": []})

    def finish(self, reply):
        """Run atexit handlers and flush files the user's code left open, then
        exit 0 without waiting for its threads."""
        try:
            import atexit
            import gc
            atexit._run_exitfuncs()
            for obj in gc.get_objects():
                if isinstance(obj, io.IOBase) and not isinstance(obj, (Writer, BinaryWriter)):
                    try:
                        if not obj.closed and obj.writable():
                            obj.flush()
                    except Exception:
                        pass
        except BaseException:
            pass
        self.flush_c_stdio()
        self.ch.flush()
        if reply:
            self.ch.message("shutdown_reply", {})
        os._exit(0)

    # -- cells
    def execute(self, content):
        code, stop = content.get("code"), content.get("stop_on_error", True) is not False
        # the session agent interrupts a call at its deadline (monotonic
        # seconds): an interrupt then is the timeout, not a cancel
        deadline, ms = content.get("deadline"), content.get("timeout_ms")
        self.deadline = (deadline, ms) if type(deadline) in (int, float) and type(ms) is int else None
        if self.aborting and stop:
            return self.reply("aborted")
        self.aborting = False
        status = "error"
        self.ch.set_busy(True)
        try:
            names = content.get("globals")
            if not isinstance(code, str):
                self.protocol_error("execute_request: content.code must be a string")
            elif not globals_ok(names):
                self.protocol_error("execute_request: content.globals must be an object whose "
                                    "keys are identifiers")
            else:
                if names:            # before the code, outside it: no line of the cell moves
                    self.ns.update(names)
                self.count += 1
                self.add_user_site()
                self.running = True
                status = self.run_cell(code)
                self.flush_figures()
        except BaseException as e:   # a fault of the kernel itself, or an untimely interrupt
            self.ch.message("error", self.errors().content(e, None, "KernelError"))
            status = "error"
        finally:
            self.running = False
            self.flush_c_stdio()
            self.ch.set_busy(False)
            self.aborting = status != "ok" and stop
            self.reply(status)

    def reply(self, status):
        self.ch.flush()              # first, so that the truncation flags are final
        self.ch.message("execute_reply", {
            "status": status, "execution_count": self.count,
            "stdout_truncated": self.ch.truncated["stdout"],
            "stderr_truncated": self.ch.truncated["stderr"]})

    def run_cell(self, code):
        filename = "<cell %d>" % self.count
        self.add_source(filename, code)
        try:
            tree = compile(code, filename, "exec", PARSE_FLAGS, dont_inherit=True)
        except (SyntaxError, ValueError) as e:
            return self.report(e, filename)
        if self.lint_failed(tree, code):
            return "policy_violation"
        last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        if last:                     # one code object, so an await anywhere makes it all async
            where = {k: getattr(last, k) for k in ("lineno", "col_offset", "end_lineno", "end_col_offset")}
            tree.body[-1] = ast.Assign(targets=[ast.Name(RESULT, ast.Store(), **where)],
                                       value=last.value, **where)
        try:
            code_obj = compile(tree, filename, "exec", AWAIT_FLAGS, dont_inherit=True)
        except (SyntaxError, ValueError) as e:
            return self.report(e, filename)
        self.ns.pop(RESULT, None)
        try:
            if code_obj.co_flags & CO_COROUTINE:
                self.loop().run_until_complete(eval(code_obj, self.ns))
            else:
                eval(code_obj, self.ns)
        except BaseException as e:   # SystemExit and KeyboardInterrupt too: the kernel stays
            sys.last_type, sys.last_value, sys.last_traceback = type(e), e, e.__traceback__
            return self.report(e, filename)
        finally:
            value = self.ns.pop(RESULT, None)
        if value is not None and not semicolon_after(code, last):
            self.ns["_"] = value
            data, metadata = self.bundle(value, result=True)
            self.ch.message("execute_result", {"execution_count": self.count,
                                               "data": data, "metadata": metadata})
        return "ok"

    def add_user_site(self):
        """`pip install --user` puts packages in the user site directory, which
        -I leaves off sys.path and which may appear after the kernel started:
        add it (after the stdlib, like the cwd) once it exists. One isdir per cell."""
        if self.user_site is None:
            import site
            try:
                self.user_site = site.getusersitepackages() or ""
            except Exception:        # no home directory to be found: no user site
                self.user_site = ""
        if self.user_site and self.user_site not in sys.path and os.path.isdir(self.user_site):
            import importlib
            import site
            site.addsitedir(self.user_site)
            importlib.invalidate_caches()

    def on_sigint(self, _signum, _frame):
        """SIGINT interrupts the user's code; between cells there is nothing
        to interrupt, and a request being read or answered must not be lost."""
        if self.ch.child:
            raise KeyboardInterrupt  # a forked child: Python's usual behaviour
        if self.running:
            self.ch.interrupt()

    def report(self, e, filename):
        if isinstance(e, KeyboardInterrupt) and self.deadline:
            if timed_out(self.deadline):
                self.ch.message("error", self.errors().timeout(e, filename, self.deadline[1]))
                return "error"
        self.ch.message("error", self.errors().content(e, filename))
        return "error"

    def loop(self):
        if self.loop_ is None:       # one loop for the kernel's life
            import asyncio
            self.loop_ = asyncio.new_event_loop()
            asyncio.set_event_loop(self.loop_)
        return self.loop_

    def errors(self):
        if self.errors_ is None:
            from _ward_kernel.errors import Errors
            self.errors_ = Errors(self.config, self.cwd, self.sources)
        return self.errors_

    def lint_failed(self, tree, code):
        """Whether the policy lint denies this code; if so, it says why."""
        if self.lint_ is None:
            lint = self.config.get("lint")
            lint = lint if isinstance(lint, dict) else {}
            deny_imports = [s for s in lint.get("deny_imports") or () if isinstance(s, str)]
            deny_calls = [s for s in lint.get("deny_calls") or () if isinstance(s, str)]
            if not (deny_imports or deny_calls):
                self.lint_ = False
                return False
            from _ward_kernel.lint import Lint
            self.lint_ = Lint(deny_imports, deny_calls)
        violations = self.lint_.check(tree, code) if self.lint_ else []
        for v in violations:
            self.ch.message("policy_violation", v)
        return bool(violations)

    def add_source(self, filename, code):
        self.sources[filename] = (len(code), None, code.splitlines(True), filename)
        if "linecache" in sys.modules:
            self.patch_linecache(sys.modules["linecache"])

    def patch_linecache(self, linecache):
        """Cells' sources for tracebacks, warnings and inspect; linecache is
        imported only when something needs it (mtime None: checkcache() keeps them)."""
        linecache.cache.update(self.sources)

    def patch_pyplot(self, pyplot):
        """pyplot.show() shows the open figures now (Jupyter's inline backend)
        instead of warning that Agg cannot show them."""
        flush = self.flush_figures

        def show(*_args, **_kwargs):
            """Show the open figures now, and close them (ward's kernel)."""
            flush()                  # a function, not a bound method: pyplot sets attributes on it
        pyplot.show = show

    def flush_c_stdio(self):
        if "ctypes" in sys.modules:  # only code that loaded ctypes can have used C stdio buffers
            try:
                if self.libc is None:
                    self.libc = sys.modules["ctypes"].CDLL(None)
                self.libc.fflush(None)
            except Exception:
                pass

    # -- rich output
    def display(self, *objs, raw=False, metadata=None, **_ignored):
        """Show objects as rich output, like IPython's display(); with raw=True
        the objects are MIME bundles such as {"text/html": "<b>hi</b>"}."""
        for obj in objs:
            md = dict(metadata) if isinstance(metadata, dict) else {}
            if raw:
                if not isinstance(obj, dict):
                    raise TypeError("display(raw=True) takes MIME bundles (dicts), not %s"
                                    % type(obj).__name__)
                data = {k: mime_value(k, v) for k, v in obj.items() if isinstance(k, str)}
                data = {k: v for k, v in data.items() if v is not None}
            else:
                data, more = self.bundle(obj)
                md.update(more)
            self.ch.message("display_data", {"data": data, "metadata": md})

    def bundle(self, obj, result=False):
        """The MIME bundle of obj: repr() as text/plain, plus what its
        _repr_*_ methods give. A failing repr method is a note on stderr."""
        data, md = {"text/plain": safe_repr(obj)}, {}
        if isinstance(obj, type):
            return data, md
        mf = sys.modules.get("matplotlib.figure")
        if mf is not None and isinstance(obj, mf.Figure):
            plt = sys.modules.get("matplotlib.pyplot")
            pyplot_owned = plt is not None and getattr(obj, "number", None) in plt.get_fignums()
            if not (result and pyplot_owned):   # otherwise it is shown after the cell
                data.update(self.guard(lambda: figure_bundle(obj), obj, "savefig") or {})
                self.shown.add(id(obj))
            return data, md
        bundle = self.guard(lambda: obj._repr_mimebundle_(include=None, exclude=None),
                            obj, "_repr_mimebundle_")
        if isinstance(bundle, tuple) and len(bundle) == 2:
            bundle, more = bundle
            md.update(more if isinstance(more, dict) else {})
        for mime, v in (bundle.items() if isinstance(bundle, dict) else ()):
            v = mime_value(mime, v) if isinstance(mime, str) else None
            if v is not None:
                data[mime] = v
        for method, mime in REPR_METHODS:
            if mime not in data:
                v = self.guard(lambda: getattr(obj, method)(), obj, method)
                v = v[0] if isinstance(v, tuple) and len(v) == 2 else v   # (data, metadata)
                v = None if v is None else mime_value(mime, v)
                if v is not None:
                    data[mime] = v
        if not isinstance(data["text/plain"], str):
            data["text/plain"] = safe_repr(obj)
        return data, md

    def guard(self, fn, obj, method):
        if method != "savefig" and not callable(getattr(type(obj), method, None)):
            return None
        try:
            return fn()
        except Exception as e:
            self.ch.text("stderr", "ward: %s.%s() raised %s: %s\n"
                         % (type(obj).__name__, method, type(e).__name__, e))
            return None

    def flush_figures(self):
        """Open pyplot figures become image/png display_data, then are closed."""
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        try:
            figures = [plt.figure(n) for n in plt.get_fignums()]
        except Exception:
            return
        for fig in figures:
            if id(fig) not in self.shown:
                data = self.guard(lambda: figure_bundle(fig), fig, "savefig")
                if data:
                    self.ch.message("display_data", {"data": data, "metadata": {}})
        self.shown.clear()
        try:
            plt.close("all")
        except Exception:
            pass

    # -- function-call mode (_ward_kernel/call.py)
    def call(self, content):
        from _ward_kernel.call import CallError, call_value, json_problem
        from _ward_kernel.errors import human_size
        code, filename = content.get("code"), content.get("filename") or "tool.py"
        function, args = content.get("function"), content.get("args")
        names = content.get("globals")
        deadline, ms = content.get("deadline"), content.get("timeout_ms")
        self.deadline = (deadline, ms) if type(deadline) in (int, float) and type(ms) is int else None
        try:
            if not (isinstance(code, str) and isinstance(filename, str) and isinstance(function, str)):
                raise CallError("ProtocolError", "call_request: content.code, content.filename "
                                "and content.function must be strings")
            if not globals_ok(names):
                raise CallError("ProtocolError", "call_request: content.globals must be an object "
                                "whose keys are identifiers")
            self.add_user_site()
            self.running = True
            value = call_value(self, code, filename, function, args, names)
        except CallError as e:
            return self.call_error({"ename": e.ename, "evalue": e.evalue, "traceback": []})
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt) and self.deadline and timed_out(self.deadline):
                return self.call_error(self.errors().timeout(e, filename, self.deadline[1]))
            return self.call_error(self.errors().content(e, filename))
        finally:
            self.running = False
        problem = json_problem(value)
        if problem:
            return self.call_error({"ename": "SerializationError", "traceback": [], "evalue":
                                    "the return value is not JSON-serialisable: %s at %s"
                                    % (problem[1], problem[0])})
        size = len(wire.dumps(value).encode("utf-8", "replace"))
        if self.ch.limit is not None and size > self.ch.limit:
            return self.call_error({"ename": "SerializationError", "traceback": [], "evalue":
                                    "the return value is %s of JSON, over the output limit of %s"
                                    % (human_size(size), human_size(self.ch.limit))})
        self.ch.message("call_reply", {"status": "ok", "value": value})

    def call_error(self, error):
        self.ch.message("call_reply", {"status": "error", "error": error})


def timed_out(deadline):
    """An interrupt at or past a session call's deadline is its timeout."""
    import time
    return time.monotonic() >= deadline[0] - 0.005


def globals_ok(names):
    """A request's globals: absent, or an object whose keys are identifiers
    that are not the interpreter's own __dunder__ names."""
    return names is None or isinstance(names, dict) and all(
        k.isidentifier() and not (k.startswith("__") and k.endswith("__")) for k in names)


class ImportHooks:
    """A meta-path finder that runs a function on a module right after it is
    first imported (the module is found and loaded by the usual finders)."""

    def __init__(self, after):
        self.after = after

    def find_spec(self, name, path=None, target=None):
        if name not in self.after:
            return None
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
        else:
            return None
        exec_module, patch = getattr(spec.loader, "exec_module", None), self.after[name]
        if exec_module is None:
            return spec

        def exec_and_patch(module):
            exec_module(module)
            try:
                patch(module)
            except Exception:
                pass                 # a module unlike the one expected: leave it as it is
        try:
            spec.loader.exec_module = exec_and_patch
        except (AttributeError, TypeError):
            pass                     # an unusual loader: the module stays unpatched
        return spec


def semicolon_after(code, node):
    """IPython's rule: a cell whose last expression is followed by ';' shows no result."""
    lines = code.split("\n")
    rest = lines[node.end_lineno - 1].encode()[node.end_col_offset:].decode("utf-8", "replace")
    return (rest + "\n".join(lines[node.end_lineno:])).lstrip().startswith(";")


def safe_repr(obj):
    try:
        return repr(obj)
    except Exception as e:
        return "<%s object (repr() raised %s)>" % (type(obj).__name__, type(e).__name__)


def figure_bundle(fig):
    import base64
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return {"text/plain": repr(fig), "image/png": base64.b64encode(buf.getvalue()).decode("ascii")}


def mime_value(mime, v):
    """The JSON form of one MIME bundle entry, or None when it has none."""
    if mime == "application/json" or mime.endswith("+json"):
        if isinstance(v, (str, bytes)):
            try:
                v = wire.loads(v)
            except ValueError:
                return None
        try:
            wire.dumps(v)
        except (TypeError, ValueError, RecursionError):
            return None
        return v
    if mime.startswith("image/") and mime != "image/svg+xml":
        if isinstance(v, (bytes, bytearray, memoryview)):
            import base64
            return base64.b64encode(v).decode("ascii")
        return "".join(v.split()) if isinstance(v, str) else None
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "replace")
    return v if isinstance(v, str) else None


def read_config():
    raw = os.environ.get("WARD_KERNEL_CONFIG")
    if not raw:
        return {}, None
    try:
        config = wire.loads(raw)
    except ValueError as e:
        return {}, "WARD_KERNEL_CONFIG is not JSON (%s); running without limits or lint" % e
    if not isinstance(config, dict):
        return {}, "WARD_KERNEL_CONFIG is not a JSON object; running without limits or lint"
    return config, None


def main():
    config, problem = read_config()
    kernel = Kernel(config)
    if problem:
        kernel.protocol_error(problem)
    kernel.ch.message("status", {"execution_state": "idle", "language": "python",
                                 "language_version": "%d.%d.%d" % sys.version_info[:3]})
    kernel.serve()
