#!/bin/sh
# Starts ward's Node kernel with a private protocol channel (docs/kernels.md, "Node"):
# fd 3 = the original stdout (the protocol), fd 4 = the original stdin (the requests),
# stdin = /dev/null. kernel.js then points fds 1 and 2 at pipes it drains itself, so the
# output of subprocesses becomes `stream` messages. node cannot dup a descriptor, and the
# supervisor's pipes cannot be reopened through /proc inside the sandbox, hence the shell.
case $0 in */*) dir=${0%/*} ;; *) dir=. ;; esac
WARD_NODE_FDS=3,4 exec node "$dir/kernel.js" 3>&1 4<&0 </dev/null
