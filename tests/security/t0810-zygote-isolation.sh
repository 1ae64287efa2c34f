#!/bin/bash
# A Python zygote's kernels (ward_zygote_start, lib/launcher.c,
# runners/python/zygote.py) are as isolated as cold ones: fresh namespaces
# (none shared with the zygote or with a sibling), the cold kernel's exact
# environment, fds and seccomp and landlock answers; they cannot reach the
# zygote or a sibling; nothing of one kernel reaches the next; the zygote
# keeps no tenant byte, stays single-threaded, and dies with its supervisor.
. "$(dirname "$0")/../lib.sh"

ZR=${WARD_BUILD:-$(dirname "$WARD")/..}/tests/zygote-run
[ -x "$ZR" ] || test_set_prereq_missing ZR "no zygote-run at $ZR (build the tests)"
/usr/bin/python3 -c 'import ctypes' 2>/dev/null || test_set_prereq_missing PY "no /usr/bin/python3 with ctypes"
MODS=numpy,pandas,matplotlib

# hold_start NAME ARGS...: a zygote-run kernel held before its stop; sets
# the pids zygote, sibling and child (the kernel sandbox's init) and self.
hold_start() {
	local name=$1; shift
	mkfifo "$name.in" && { "$ZR" kernel --hold "$@" <"$name.in" >"$name.out" 2>"$name.err" & } &&
	self=$! && exec 7>"$name.in" &&
	wait_for "the held kernel" "grep -q ^hold $name.out" 60 &&
	eval "$(sed -n "s/^hold zygote=\([0-9]*\) sibling=\([0-9]*\) child=\([0-9]*\)/zygote=\1 sibling=\2 child=\3/p" "$name.out")"
}
hold_end() { exec 7>&-; wait "$self"; }

NS="user mnt pid net ipc uts cgroup time"
NS_CELL='import os
print(" ".join(os.readlink("/proc/self/ns/" + t) for t in "'"$NS"'".split()))'

# The zygote is exec'd from the supervisor without unsharing anything: its
# namespaces are this shell's. Read from inside, so it works rootless too
# (where the zygote and the inits are not dumpable, so unreadable).
test_expect_success ZR,PY 'every namespace of a child differs from the supervisor'"'"'s (the zygote'"'"'s)' '
	out=$("$ZR" kernel --zygote $MODS "$NS_CELL" 2>/dev/null | grep -v ^status=) &&
	bad= && for link in $out; do
		t=${link%%:*}; [ "$link" != "$(readlink /proc/self/ns/$t)" ] || bad="$bad $t"
	done
	[ "$(echo $out | wc -w)" = 8 ] && expect_eq "$bad" ""
'

test_expect_success ZR,PY,ROOT 'every namespace of a child differs from the zygote'"'"'s and a sibling'"'"'s' '
	hold_start ns --zygote $MODS --sibling "print(1)" || exit 1
	bad=
	for t in $NS; do
		c=$(readlink /proc/$child/ns/$t) && z=$(readlink /proc/$zygote/ns/$t) &&
		s=$(readlink /proc/$sibling/ns/$t) || { bad="$bad $t:unreadable"; continue; }
		[ "$c" != "$z" ] && [ "$c" != "$s" ] || bad="$bad $t"
	done
	hold_end
	expect_eq "$bad" ""
'

# Arguments chosen so that only seccomp or landlock explains each answer.
PROBE_CELL='import ctypes, os, stat
libc = ctypes.CDLL(None, use_errno=True)
def e(r): return "ok" if r >= 0 else os.strerror(ctypes.get_errno())
print("unshare", e(libc.unshare(0x10000000)))
print("mount", e(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)))
print("ptrace", e(libc.ptrace(16, 1, 0, 0)))
print("keyctl", e(libc.syscall(250, 0, 0, 0, 0, 0)))
print("bpf", e(libc.syscall(321, 0, 0, 0)))
print("io_uring", e(libc.syscall(425, 1, 0)))
try: os.mknod("/tmp/dev", stat.S_IFCHR | 0o600, os.makedev(1, 3)); print("mknod ok")
except OSError as x: print("mknod", x.strerror)
st = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
print("status", st["Seccomp"].strip(), st["NoNewPrivs"].strip(), st["CapEff"].strip())'

test_expect_success ZR,PY 'seccomp and landlock give a child the cold kernel'"'"'s exact answers' '
	"$ZR" kernel "$PROBE_CELL" >cold.out 2>/dev/null &&
	"$ZR" kernel --zygote $MODS "$PROBE_CELL" >zyg.out 2>/dev/null &&
	grep -v ^status= cold.out >cold.l && grep -v ^status= zyg.out >zyg.l &&
	expect_contains "$(cat zyg.l)" "mknod Permission denied" &&
	expect_contains "$(cat zyg.l)" "unshare Operation not permitted" &&
	expect_contains "$(cat zyg.l)" "status 2 1 0000000000000000" &&
	diff cold.l zyg.l &&
	expect_eq "$(grep -o "layers=[^ ]* degraded=[^ ]*" zyg.out)" "$(grep -o "layers=[^ ]* degraded=[^ ]*" cold.out)"
'

STATE_CELL='import os, sys
print("env", sorted(os.environ.items()))
print("fds", sorted(os.listdir("/proc/self/fd")))
print("path", sys.path, sys.argv, os.getcwd(), oct(os.umask(0o22)))
print("ids", os.getuid(), os.getgid(), os.getgroups(), os.getpid())'

test_expect_success ZR,PY 'a child has the cold kernel'"'"'s environment, fds, path and ids, not the zygote'"'"'s' '
	"$ZR" kernel --env TENANT=t1 "$STATE_CELL" >cold.out 2>/dev/null &&
	"$ZR" kernel --env TENANT=t1 --zygote $MODS "$STATE_CELL" >zyg.out 2>/dev/null &&
	expect_contains "$(cat zyg.out)" "('"'"'TENANT'"'"', '"'"'t1'"'"')" &&
	! grep -q "NUM_THREADS\|ward-zygote\|zygote.py" zyg.out &&
	diff <(grep -v ^status= cold.out) <(grep -v ^status= zyg.out)
'

REACH_CELL='import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for who, p in (("zygote", {zygote}), ("sibling", {sibling})):
    try: os.kill(p, 0); print(who, "kill ok")
    except OSError as x: print(who, "kill", x.strerror)
    try: open("/proc/%d/environ" % p, "rb").read(); print(who, "proc ok")
    except OSError as x: print(who, "proc", x.strerror)
    r = libc.ptrace(16, p, 0, 0); print(who, "ptrace", "ok" if r == 0 else os.strerror(ctypes.get_errno()))'

test_expect_success ZR,PY 'a child cannot signal, trace or read the zygote or a sibling' '
	out=$("$ZR" kernel --zygote $MODS --sibling "$REACH_CELL" 2>/dev/null) &&
	expect_eq "$(echo "$out" | grep -v ^status=)" "zygote kill No such process
zygote proc No such file or directory
zygote ptrace Operation not permitted
sibling kill No such process
sibling proc No such file or directory
sibling ptrace Operation not permitted"
'

LEAK_CELL='import sys, os, json, random
print("seen", getattr(json, "_mark", None), "tenant_mod" in sys.modules, os.path.exists("/tmp/mark"),
      os.path.exists("/workspace/mark"), os.environ.get("MARK"), sorted(os.listdir("/proc/self/fd")),
      sorted(p for p in os.listdir("/proc") if p.isdigit()))
print("random", random.getrandbits(64))
json._mark = 1; sys.modules["tenant_mod"] = json; os.environ["MARK"] = "1"
open("/tmp/mark", "w").write("x"); open("/workspace/mark", "w").write("x")
os.dup2(os.open("/etc/hostname", os.O_RDONLY), 50)
import subprocess; subprocess.Popen(["sleep", "60"])'

test_expect_success ZR,PY 'nothing one child does (globals, modules, files, env, fds, processes, random state) reaches the next' '
	"$ZR" kernel --zygote $MODS --runs 3 "$LEAK_CELL" >leak.out 2>/dev/null &&
	[ "$(grep -c "^seen None False False False None " leak.out)" = 3 ] &&
	[ "$(grep ^seen leak.out | sort -u | wc -l)" = 1 ] &&
	[ "$(grep ^random leak.out | sort -u | wc -l)" = 3 ]
'

# The request (policy, env) is read by C code from a memfd that is unmapped
# after the clone, and freed memory is overwritten (M_PERTURB): a marker in
# the policy must be nowhere in the zygote's memory, while the child has it
# (the control: the scan works).
SCAN='import re, sys
pid, needle = int(sys.argv[1]), sys.argv[2].encode()
found = 0
with open("/proc/%d/maps" % pid) as maps, open("/proc/%d/mem" % pid, "rb", 0) as mem:
    for line in maps:
        addr, perms = line.split()[:2]
        if "r" not in perms or "[vvar]" in line or "[vsyscall]" in line:
            continue
        lo, hi = (int(x, 16) for x in addr.split("-"))
        try:
            mem.seek(lo); found += mem.read(hi - lo).count(needle)
        except OSError:
            pass
print(found)'
test_expect_success ZR,PY,ROOT 'the zygote keeps no byte of a request (the child does)' '
	mark=tenant-$RANDOM$RANDOM-secret &&
	hold_start mem --zygote $MODS --env "TENANT_SECRET=$mark" "print(1)" || exit 1
	prog=$(cat /proc/$child/task/$child/children | tr -d " ") &&
	inzyg=$(python3 -c "$SCAN" $zygote "$mark") && inchild=$(python3 -c "$SCAN" $prog "$mark")
	hold_end
	expect_eq "$inzyg" 0 && [ "$inchild" -gt 0 ]
'

test_expect_success ZR,PY 'the zygote is single-threaded with its modules loaded' '
	hold_start thr --zygote $MODS "print(1)" || exit 1
	n=$(ls /proc/$zygote/task | wc -l)
	hold_end
	expect_eq "$n" 1
'

test_expect_success ZR,PY 'a module that is missing is skipped, the others preloaded' '
	out=$("$ZR" kernel --zygote no_such_module,fractions "import sys; print(\"fractions\" in sys.modules, \"no_such_module\" in sys.modules)" 2>err) &&
	expect_contains "$out" "True False" && expect_contains "$(cat err)" "no_such_module not preloaded"
'

# Cgroups are named ward-<supervisor pid>-... (lib/layers/cgroup.c).
test_expect_success ZR,PY 'a kernel'"'"'s end leaves no process and no cgroup' '
	hold_start res --zygote $MODS "import subprocess; subprocess.Popen([\"sleep\", \"60\"]); print(1)" || exit 1
	prog=$(cat /proc/$child/task/$child/children | tr -d " ") && [ -n "$prog" ] &&
	hold_end &&
	wait_for "the kernel to exit" "process_gone $prog" &&
	wait_for "its init to exit" "process_gone $child" &&
	wait_for "the zygote to exit" "process_gone $zygote" &&
	left=$(find /sys/fs/cgroup -maxdepth 4 -name "ward-$self-*" 2>/dev/null) &&
	expect_eq "$left" ""
'

test_expect_success ZR,PY 'killing the supervisor leaves no zygote and no sandbox' '
	hold_start kill --zygote $MODS "print(1)" || exit 1
	[ -d /proc/$zygote ] && [ -d /proc/$child ] && kill -9 $self &&
	wait_for "the zygote to exit" "process_gone $zygote" 20 &&
	wait_for "the sandbox to exit" "process_gone $child" 20 &&
	"$WARD" gc > /dev/null && # what a killed supervisor leaves: its cgroup
	expect_eq "$(find /sys/fs/cgroup -maxdepth 4 -name "ward-$self-*" 2>/dev/null)" ""
'

test_done
