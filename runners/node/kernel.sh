#!/bin/sh
# Starts ward's Node kernel with a private protocol channel (docs/kernels.md, "Node").
# node can neither dup a descriptor nor make a pipe, and inside the sandbox the
# supervisor's pipes cannot be reopened through /proc, so the shell does it:
#   fd 3  = the original stdout: the protocol
#   fd 4  = the original stdin: the requests
#   fd 0  = /dev/null
#   fds 1 and 2 = two FIFOs that kernel.js drains into `stream` messages (it opens their
#         read ends and removes them at once), so subprocesses' output never reaches fd 3.
# Without /tmp (mkfifo fails) kernel.js makes the FIFOs itself.
case $0 in */*) dir=${0%/*} ;; *) dir=. ;; esac
node=/usr/bin/node
[ -x "$node" ] || node=node
f=/tmp/.ward-node-$$
if mkfifo -m 600 "$f.1" "$f.2" 2>/dev/null; then
	WARD_NODE_FDS=3,4 WARD_NODE_FIFOS="$f.1:$f.2" exec "$node" "$dir/kernel.js" 3>&1 4<&0 </dev/null 1<>"$f.1" 2<>"$f.2"
fi
WARD_NODE_FDS=3,4 exec "$node" "$dir/kernel.js" 3>&1 4<&0 </dev/null
