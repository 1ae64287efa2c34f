#!/usr/bin/python3
"""ward's Python kernel: runs a model's code cells inside the sandbox.

Started as `/usr/bin/python3 -I -u /opt/ward/runners/python/kernel.py`. It
speaks runners/PROTOCOL.md: JSON requests on stdin, JSON messages on a
private copy of the original stdout; whatever the user's code writes --
print(), C libraries, subprocesses -- comes out as `stream` messages.
docs/kernels.md describes it for users.

This file stays tiny on purpose: Python compiles a script at every start
(about 6 ms for the kernel), but imports modules from cached bytecode, so the
kernel lives in the _ward_kernel package next to this file (compile it ahead
with `python3 -m compileall runners/python`; the sandbox's copy is read-only).

It is not a security boundary: the lint is advisory and the kernel shares its
process with the code it runs, so the supervisor treats everything it says
as data.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)             # only to find the kernel's own package; removed at once
try:
    from _ward_kernel.core import main
finally:
    sys.path.remove(HERE)

if __name__ == "__main__":
    main()
