"""The policy lint: denied imports and calls, found in a cell's AST before it runs.

Advisory only. It sees what the source spells out -- `import x`, `from x
import y`, `__import__("x")`, `importlib.import_module("x")` and calls whose
callee is a dotted name -- and nothing computed at run time (getattr, exec of
strings, ...). The sandbox's kernel layers are the boundary, not this. It
must never run or import the code it checks.
"""

import ast

DYNAMIC_IMPORTS = ("__import__", "importlib.import_module", "importlib.__import__")


class Lint:
    def __init__(self, deny_imports, deny_calls):
        self.deny_imports = list(deny_imports)
        self.deny_calls = set(deny_calls)
        self.aliases = {}            # local name -> dotted name, from the cells that ran

    def check(self, tree, code):
        """The `policy_violation` contents for this code, in source order.
        When there are none, the code's imports join the alias map."""
        hits, aliases = self.scan(tree)
        if not hits:
            self.aliases.update(aliases)
            return []
        lines, out = code.split("\n"), []
        for rule, name, matched, node in sorted(hits, key=lambda h: (h[3].lineno, h[3].col_offset)):
            line = lines[node.lineno - 1] if node.lineno <= len(lines) else ""
            col = len(line.encode()[:node.col_offset].decode("utf-8", "replace")) + 1
            what = "import of" if rule == "deny_imports" else "call to"
            out.append({"rule": rule, "name": name, "line": node.lineno, "col": col,
                        "message": "%s '%s' is denied by this sandbox's policy (lint.%s: %s)"
                                   % (what, name, rule, matched)})
        return out

    def denied_module(self, name):
        for d in self.deny_imports:
            if name == d or name.startswith(d + "."):     # a denied "os" denies "os.path"
                return d
        return None

    def scan(self, tree):
        hits, aliases = [], {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    hit = self.denied_module(a.name)
                    if hit:
                        hits.append(("deny_imports", a.name, hit, a))
                    top = a.name.partition(".")[0]
                    aliases[a.asname or top] = a.name if a.asname else top
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                hit = self.denied_module(node.module)
                if hit:
                    hits.append(("deny_imports", node.module, hit, node))
                for a in node.names:
                    full = node.module + "." + a.name
                    sub = None if hit or a.name == "*" else self.denied_module(full)
                    if sub:          # `from os import path` with "os.path" denied
                        hits.append(("deny_imports", full, sub, a))
                    if a.name != "*":
                        aliases[a.asname or a.name] = full
        known = {**self.aliases, **aliases}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = callee(node.func, known)
            if name in self.deny_calls:
                hits.append(("deny_calls", name, name, node))
            if name in DYNAMIC_IMPORTS and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                hit = self.denied_module(node.args[0].value)
                if hit:
                    hits.append(("deny_imports", node.args[0].value, hit, node))
        return hits, aliases


def callee(func, aliases):
    """`os.system` for `os.system(...)`, `o.system(...)` after `import os as o`,
    and `system(...)` after `from os import system`; None when not a dotted name."""
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        return None
    parts.append(aliases.get(func.id, func.id))
    name = ".".join(reversed(parts))
    return name[len("builtins."):] if name.startswith("builtins.") else name
