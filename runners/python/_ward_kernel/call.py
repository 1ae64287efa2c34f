"""Function-call mode: load a tool file, call one function or method with
JSON arguments, return a JSON value -- or a typed error saying what to fix.

Loaded on the first call_request. It must never call the target with
arguments that do not fit its signature (the mismatch is an ArgumentError,
not the function's own TypeError), nor return a value that is not JSON.
"""

import ast
import difflib
import inspect
import os
import sys

MISSING = object()


class CallError(Exception):
    """A typed failure that is not an exception of the tool's code."""

    def __init__(self, ename, evalue):
        super().__init__(evalue)
        self.ename, self.evalue = ename, evalue


def call_value(kernel, code, filename, function, args, names=None):
    """Load the tool's code, find the target, bind the arguments, call it.
    names (the request's globals) are the module's before its code runs."""
    kernel.add_source(filename, code)
    tree = ast.parse(code, filename)
    if kernel.lint_failed(tree, code):
        raise CallError("PolicyViolation", "the code was not run: see the policy_violation "
                        "messages (lint.deny_imports, lint.deny_calls)")
    module = new_module(kernel, filename)
    module.__dict__.update(names or {})
    exec(compile(tree, filename, "exec", dont_inherit=True), module.__dict__)
    target = resolve(module, function, filename)
    if args is None:
        pos, kw = (), {}
    elif isinstance(args, list):
        pos, kw = tuple(args), {}
    elif isinstance(args, dict):
        pos, kw = (), args
    else:
        raise CallError("ArgumentError", "args must be a JSON object (keyword arguments) or "
                        "an array (positional arguments), not %s" % type(args).__name__)
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        signature = None             # some builtins have none: let the call decide
    if signature is not None:
        try:
            signature.bind(*pos, **kw)
        except TypeError as e:
            raise CallError("ArgumentError", "%s (the signature is %s%s)"
                            % (e, function, signature)) from None
    value = target(*pos, **kw)
    return kernel.loop().run_until_complete(value) if inspect.isawaitable(value) else value


def new_module(kernel, filename):
    """A fresh module named after the file, registered as import would do it
    (dataclasses and pickle look classes up in sys.modules). Its __name__ is
    never "__main__", so an `if __name__ == "__main__":` block does not run."""
    stem = os.path.splitext(os.path.basename(filename))[0]
    mine = stem in kernel.tool_modules
    name = stem if stem.isidentifier() and (mine or stem not in sys.modules) else "__ward_tool__"
    module = type(sys)(name)
    module.__file__ = filename
    sys.modules[name] = module
    kernel.tool_modules.add(name)
    return module


def resolve(module, function, filename):
    """"name", "Class.method" (the class is instantiated with no arguments,
    unless the method is a static or class method) or any dotted path."""
    obj, parts = module, function.split(".")
    for i, part in enumerate(parts):
        found = MISSING
        if part and isinstance(obj, type) and i == len(parts) - 1:
            if inspect.isfunction(inspect.getattr_static(obj, part, None)):
                obj = instantiate(obj, ".".join(parts[:i]))
            found = getattr(obj, part, MISSING)
        elif part:
            found = getattr(obj, part, MISSING)
        if found is MISSING:
            raise CallError("FunctionNotFound", not_found(module, function, filename))
        obj = found
    if not callable(obj):
        raise CallError("FunctionNotFound", "'%s' in %s is a %s, not a function"
                        % (function, filename, type(obj).__name__))
    return obj


def instantiate(cls, qualname):
    try:
        inspect.signature(cls).bind()
    except TypeError as e:
        raise CallError("ArgumentError", "%s cannot be created without arguments (%s); "
                        "the call mode creates the instance with %s()"
                        % (qualname, e, qualname)) from None
    except ValueError:
        pass                         # no signature to check: let the constructor decide
    return cls()


def not_found(module, function, filename):
    names = []
    for k, v in vars(module).items():
        if k.startswith("_") or not callable(v) or getattr(v, "__module__", None) != module.__name__:
            continue                 # only what the file defines, not what it imports
        names.append(k)
        if isinstance(v, type):
            names += ["%s.%s" % (k, m) for m, f in vars(v).items()
                      if not m.startswith("_") and (callable(f) or isinstance(f, (staticmethod, classmethod)))]
    close = difflib.get_close_matches(function, names, 1, 0.6)
    return "'%s' was not found in %s%s; callables defined there: %s" % (
        function, filename, " (did you mean '%s'?)" % close[0] if close else "",
        ", ".join(names) or "none")


def json_problem(v, path="$", depth=0):
    """Where a value stops being JSON: (path, description), or None."""
    if v is None or isinstance(v, (str, bool, int)):
        return None
    if isinstance(v, float):
        return None if v == v and v not in (float("inf"), float("-inf")) else (path, "float %r" % v)
    if depth > 200:
        return path, "a value nested too deeply (or circular)"
    if isinstance(v, (list, tuple)):
        for i, x in enumerate(v):
            p = json_problem(x, "%s[%d]" % (path, i), depth + 1)
            if p:
                return p
        return None
    if isinstance(v, dict):
        for k, x in v.items():
            if not (k is None or isinstance(k, (str, int, float, bool))):
                return path, "a key of type '%s'" % type(k).__name__
            sub = "%s.%s" % (path, k) if isinstance(k, str) and k.isidentifier() else "%s[%r]" % (path, k)
            p = json_problem(x, sub, depth + 1)
            if p:
                return p
        return None
    return path, "a value of type '%s'" % type(v).__name__
