"""ward's Python zygote: a clean interpreter that forks sandboxed kernels.

Started by the supervisor (lib/zygote.c) as
`/usr/bin/python3 -I -u zygote.py LIBWARD_ZYGOTE_SO MODULE...` with a socket
as fd 3. It imports the modules it is given (a missing one is skipped), the
kernel's own package, then never runs anything else: for each sandbox the C
library (lib/launcher.c) clones a child into fresh namespaces and a cgroup;
that child becomes the sandbox's init and forks the program, which applies
every layer (environment, limits, privileges, landlock, seccomp, verify) and
only then returns here, to run the kernel exactly as kernel.py would.

It runs exactly two programs, chosen by the plan's argv (PROGRAMS below,
what lib/kernel.c asks for): the python kernel, and a session's agent
(runners/session/agent.py, compiled here once). Any other argv exits 127
in its sandbox, as an exec of a missing program would. A session's agent
forks its python contexts (become_kernel): they unwind the agent's stack
and run the kernel from here, as a one-shot child does.

It must never see a tenant's bytes: the requests are read by C code and
freed memory is overwritten; this file only loops.
"""

import os
import signal
import sys

RUNNERS_INSIDE = "/opt/ward/runners"  # where the sandbox sees the runners
INSIDE = RUNNERS_INSIDE + "/python"
AGENT_INSIDE = RUNNERS_INSIDE + "/session/agent.py"
HERE = os.path.dirname(os.path.abspath(__file__))
# The plan's argv -> what runs; the argvs lib/kernel.c gives a python
# kernel and a session's agent. Nothing else is run.
PROGRAMS = {("/usr/bin/python3", "-I", "-u", INSIDE + "/kernel.py"): "kernel",
            ("/usr/bin/python3", "-I", "-u", AGENT_INSIDE): "agent"}
MATH_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "GOTO_NUM_THREADS")


def preload(modules):
    """Imports what is asked, one thread per math library: the zygote must
    stay single-threaded, a clone copies only the calling thread."""
    for name in MATH_THREADS:
        os.environ[name] = "1"
    os.environ["MPLBACKEND"] = "Agg"
    os.environ["MPLCONFIGDIR"] = "/tmp/matplotlib"   # the kernel's own default
    import importlib
    loaded = []
    for name in modules:
        try:
            importlib.import_module(name)
            loaded.append(name)
        except Exception as e:                         # a missing module is not fatal
            print("ward-zygote: %s not preloaded: %s" % (name, e), file=sys.stderr)
    sys.path.insert(0, HERE)
    try:
        import _ward_kernel.core                       # noqa: F401 (and its submodules)
        for sub in ("call", "errors", "lint", "streams", "wire"):
            importlib.import_module("_ward_kernel." + sub)
    finally:
        sys.path.remove(HERE)
    for name in MATH_THREADS:
        del os.environ[name]
    reseed()                                           # its lazy imports, once for all children
    return loaded


def agent_code():
    """The session agent, compiled once under the name it has inside."""
    path = os.path.join(os.path.dirname(HERE), "session", "agent.py")
    try:
        with open(path, "rb") as f:
            return compile(f.read(), AGENT_INSIDE, "exec", dont_inherit=True)
    except (OSError, SyntaxError) as e:
        print("ward-zygote: no session agent: %s" % e, file=sys.stderr)
        return None


def single_threaded():
    return len(os.listdir("/proc/self/task")) == 1


class Become(BaseException):
    """Raised in a context forked from the agent: unwinds the agent's stack
    (no handler of the agent catches a BaseException) back to run_agent."""


def become_kernel(stdin, stdout, stderr, ready, cwd, agent):
    """In a python context just forked from a zygote-born agent: what an
    exec'd kernel gets from spawn and exec (its own session, the pipes as
    stdio, signals as a fresh python3 sets them, no signal blocked, cwd);
    the agent's state (its contexts, commands and their output, requests,
    selector) dropped; then unwinds to run_agent, which closes every other
    fd. Never returns."""
    try:
        os.setsid()
        os.write(ready, b"s")                          # the agent may signal the group now
        for i, fd in enumerate((stdin, stdout, stderr)):
            os.dup2(fd, i)
        signal.set_wakeup_fd(-1)
        for signum in signal.valid_signals():             # exec: caught -> default, ignored stays
            if signum not in (signal.SIGKILL, signal.SIGSTOP) and signal.getsignal(signum) != signal.SIG_IGN:
                try:
                    signal.signal(signum, signal.SIG_DFL)
                except (OSError, ValueError):
                    pass
        signal.signal(signal.SIGINT, signal.default_int_handler)   # then what python3 sets
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_SETMASK, ())
        os.chdir(cwd)
        vars(agent).clear()
    except BaseException:
        os._exit(127)
    raise Become()


def run_agent(code):
    """Runs the session agent as `python3 -I -u agent.py` would. Returns
    only in a python context forked from it, with the agent gone: its
    state dropped, its fds (the protocol's, its selector's, its pipes to
    other contexts) closed."""
    import types
    if code is None:
        os._exit(127)
    sys.argv = [AGENT_INSIDE]
    mod = types.ModuleType("__main__")
    mod.__file__ = AGENT_INSIDE
    mod.__builtins__ = __builtins__
    mod.__ward_zygote__ = types.SimpleNamespace(become_kernel=become_kernel)
    sys.modules["__main__"] = mod
    try:
        exec(code, mod.__dict__)
        os._exit(0)                                    # it exits by itself; never here
    except Become:
        pass
    mod.__dict__.clear()
    del mod
    sys.modules["__main__"] = types.ModuleType("__main__")   # the kernel makes its own
    subprocess = sys.modules.get("subprocess")
    if subprocess is not None:
        subprocess._active.clear()                     # the agent's commands: not our children
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    # Not collected but frozen: a collection would write to every page of
    # the agent's objects and copy them into the context (~1 MiB). What
    # cycles are left (objects of the agent's classes, emptied) stay
    # unreachable, out of gc.get_objects() (gc.unfreeze() brings them back).
    import gc
    gc.freeze()


def forget_environment():
    """What the zygote's modules cached from its own environment (HOME
    unset: root's home) is recomputed from the plan's, as a fresh python3
    computes it at start: the user site `pip install --user` fills, the
    sysconfig paths, the temporary directory."""
    import site
    site.USER_BASE = site.USER_SITE = None
    site.getusersitepackages()
    sysconfig = sys.modules.get("sysconfig")
    if sysconfig is not None and sysconfig._CONFIG_VARS is not None:   # not freed: ~1000 strings
        sysconfig._CONFIG_VARS["userbase"] = site.getuserbase()
    tempfile = sys.modules.get("tempfile")
    if tempfile is not None:
        tempfile.tempdir = None


def reseed():
    """A fork copies the zygote's random states: new ones per child."""
    import random
    random.seed()
    np_random = sys.modules.get("numpy.random")
    if np_random is not None:
        np_random.seed()


def child(lib, base_path, agent):
    """In the sandbox's program, every layer on: become a cold kernel, or
    a session's agent."""
    import ctypes
    ctypes.pythonapi.PyOS_AfterFork_Child()            # locks, thread state, at-fork hooks
    argv, env = [], lib.ward_zygote_environ()
    plan_env = []
    i = 0
    while env[i] is not None:
        plan_env.append(env[i].decode("utf-8", "surrogateescape"))
        i += 1
    args = lib.ward_zygote_argv()
    i = 0
    while args and args[i] is not None:
        argv.append(args[i].decode("utf-8", "surrogateescape"))
        i += 1
    program = PROGRAMS.get(tuple(argv))
    if program is None:
        print("ward-zygote: %r is not a program of this zygote" % (argv[:1],), file=sys.stderr)
        os._exit(127)
    os.environ.clear()                                 # the plan's environment, not ours
    for item in plan_env:
        name, _, value = item.partition("=")
        os.environ[name] = value
    del env, args, plan_env
    sys.path[:] = base_path                            # as -I gives: no script dir
    # Only the finders of the runners' host directory go: clearing the
    # cache would free every directory listing in it, writing to (and so
    # copying) ~2.5 MiB of the zygote's pages into each child.
    for entry in (HERE, os.path.join(HERE, "_ward_kernel")):   # not iterated: that writes
        sys.path_importer_cache.pop(entry, None)               # to every key's page
    forget_environment()
    # The preloaded objects stay frozen: the collector (and the kernel's
    # exit, which walks gc.get_objects()) leaves their shared pages alone.
    code = 0
    try:
        if program == "agent":                         # random reseeded at fork; numpy unused
            run_agent(agent)
        reseed()                                       # a kernel's own state, not the zygote's
        sys.argv = [INSIDE + "/kernel.py"]
        from _ward_kernel.core import main             # preloaded: no path needed
        main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    finally:
        import atexit
        atexit._run_exitfuncs()
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except Exception:
                pass
        os._exit(code)


def main():
    import ctypes
    so, modules = sys.argv[1], sys.argv[2:]
    base_path = list(sys.path)                         # what -I gives: the stdlib only
    loaded = preload(modules)
    lib = ctypes.PyDLL(so)                             # keeps the GIL: one thread anyway
    lib.ward_zygote_serve.argtypes = [ctypes.c_int]
    lib.ward_zygote_environ.restype = ctypes.POINTER(ctypes.c_char_p)
    lib.ward_zygote_argv.restype = ctypes.POINTER(ctypes.c_char_p)
    agent = agent_code()
    if not single_threaded():
        print("ward-zygote: more than one thread after the imports", file=sys.stderr)
        return 3
    if lib.ward_zygote_harden() != 0:
        return 3
    import gc
    gc.collect()
    gc.freeze()                                        # the collector leaves shared pages alone
    sys.stderr.flush()
    os.write(3, b"ready")
    print("ward-zygote: ready (%s)" % (",".join(loaded) or "no modules"), file=sys.stderr)
    while True:
        r = lib.ward_zygote_serve(3)
        if r == 1:
            child(lib, base_path, agent)
        if r < 0:
            return 0


if __name__ == "__main__":
    sys.exit(main())
