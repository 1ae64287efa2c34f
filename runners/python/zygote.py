"""ward's Python zygote: a clean interpreter that forks sandboxed kernels.

Started by the supervisor (lib/zygote.c) as
`/usr/bin/python3 -I -u zygote.py LIBWARD_ZYGOTE_SO MODULE...` with a socket
as fd 3. It imports the modules it is given (a missing one is skipped), the
kernel's own package, then never runs anything else: for each sandbox the C
library (lib/launcher.c) clones a child into fresh namespaces and a cgroup;
that child becomes the sandbox's init and forks the program, which applies
every layer (environment, limits, privileges, landlock, seccomp, verify) and
only then returns here, to run the kernel exactly as kernel.py would.

It must never see a tenant's bytes: the requests are read by C code and
freed memory is overwritten; this file only loops.
"""

import os
import sys

INSIDE = "/opt/ward/runners/python"   # where the sandbox sees this directory
HERE = os.path.dirname(os.path.abspath(__file__))
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
    return loaded


def single_threaded():
    return len(os.listdir("/proc/self/task")) == 1


def child(lib, base_path):
    """In the sandbox's program, every layer on: become a cold kernel."""
    import ctypes
    ctypes.pythonapi.PyOS_AfterFork_Child()            # locks, thread state, at-fork hooks
    env = lib.ward_zygote_environ()
    plan_env = []
    i = 0
    while env[i] is not None:
        plan_env.append(env[i].decode("utf-8", "surrogateescape"))
        i += 1
    os.environ.clear()                                 # the plan's environment, not ours
    for item in plan_env:
        name, _, value = item.partition("=")
        os.environ[name] = value
    sys.argv = [INSIDE + "/kernel.py"]
    sys.path[:] = base_path                            # as -I gives kernel.py: no script dir
    sys.path_importer_cache.clear()
    # The preloaded objects stay frozen: the collector (and the kernel's
    # exit, which walks gc.get_objects()) leaves their shared pages alone.
    code = 0
    try:
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
            child(lib, base_path)
        if r < 0:
            return 0


if __name__ == "__main__":
    sys.exit(main())
