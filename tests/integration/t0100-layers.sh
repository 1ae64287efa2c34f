#!/bin/bash
# Each isolation layer, checked from inside the sandbox. Every check here
# fails if its layer is removed.
. "$(dirname "$0")/../lib.sh"

run() { "$WARD" run -q "$@"; }

test_expect_success 'a program runs and its output comes through' '
	out=$(run -- /bin/echo hello) && expect_eq "$out" hello
'
test_expect_success 'host processes are invisible (pid namespace)' '
	sleep 300 & spid=$!
	out=$(run -- sh -c "ls /proc | grep -E \"^[0-9]+\$\" | sort -n | tail -1; test ! -e /proc/$spid && echo hidden")
	kill $spid
	n=$(echo "$out" | head -1); expect_eq "$(echo "$out" | tail -1)" hidden && [ "$n" -le 10 ]
'
test_expect_success ROOT 'the init (PID 1) is invisible to the program (hidepid)' '
	out=$(run -- sh -c "test -e /proc/1 && echo visible || echo hidden") && expect_eq "$out" hidden
'
test_expect_success 'the program is not PID 1; an init is' '
	out=$(run -- sh -c "echo \$\$") && [ "$out" -gt 1 ]
'
test_expect_success 'secrets and homes of the host are absent' '
	run -- sh -c "test ! -e /etc/shadow && test ! -e /root && test ! -e /home && test ! -e /var && test ! -e /run && test ! -e /sys"
'
test_expect_success '/etc is synthesized: a sandbox user, not the host accounts' '
	out=$(run -- cat /etc/passwd) &&
	expect_eq "$out" "root:x:0:0:root:/root:/bin/sh
sandbox:x:1000:1000:sandbox:/workspace:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin" &&
	run -- cat /etc/group > group &&
	while IFS=: read -r name _; do
		case $name in root|nobody|nogroup|sandbox) continue ;; esac
		if grep -q "^$name:" group; then echo "host group $name leaked"; exit 1; fi
	done < /etc/group
'
test_expect_success 'writes outside /workspace and /tmp fail' '
	run -- sh -c "for p in /etc/x /usr/x /x /proc/x /dev/x /bin/x; do if touch \$p 2>/dev/null; then echo WROTE \$p; exit 1; fi; done"
'
test_expect_success '/workspace and /tmp are writable; workdir is /workspace' '
	out=$(run -- sh -c "echo a > /workspace/f && echo b > /tmp/g && cat /workspace/f /tmp/g && pwd") &&
	expect_eq "$out" "a
b
/workspace"
'
test_expect_success 'the workspace size cap holds (ENOSPC)' '
	out=$(run --workspace-size 2M -- sh -c "dd if=/dev/zero of=/workspace/big bs=1M count=8 2>&1; true") &&
	expect_contains "$out" "No space left on device"
'
test_expect_success 'the workspace inode cap holds' '
	out=$("$WARD" run -- sh -c "i=0; while [ \$i -lt 20000 ]; do : > /workspace/f\$i; i=\$((i+1)); done" 2>&1)
	expect_contains "$out" "No space left on device" && expect_contains "$out" disk_limit
'
test_expect_success 'only lo exists, and it is up' '
	out=$(run -- python3 -c "import socket; print(socket.if_nameindex())") &&
	expect_eq "$out" "[(1, '"'"'lo'"'"')]"
'
test_expect_success 'loopback sockets work inside' '
	out=$(run -- python3 -c "
import socket
s = socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen()
c = socket.create_connection(s.getsockname()); a, _ = s.accept()
c.sendall(b\"ping\"); print(a.recv(4).decode())") && expect_eq "$out" ping
'
test_expect_success 'no route out: connecting to a public address fails' '
	out=$(run -- python3 -c "
import socket
try:
    socket.create_connection((\"1.1.1.1\", 53), timeout=2); print(\"connected\")
except OSError as e:
    print(e.errno)") && expect_eq "$out" 101
'
test_expect_success 'capabilities empty, no_new_privs, seccomp filter' '
	out=$(run -- grep -E "^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):" /proc/self/status | tr -s "\t " " ") &&
	expect_eq "$out" "CapInh: 0000000000000000
CapPrm: 0000000000000000
CapEff: 0000000000000000
CapBnd: 0000000000000000
CapAmb: 0000000000000000
NoNewPrivs: 1
Seccomp: 2"
'
test_expect_success 'the program runs as uid 1000 inside' '
	out=$(run -- sh -c "id -u; id -g") && expect_eq "$out" "1000
1000"
'
test_expect_success ROOT 'host root is never mapped into the sandbox' '
	out=$(run -- cat /proc/self/uid_map /proc/self/gid_map) &&
	expect_eq "$(echo "$out" | wc -l)" 2 &&
	echo "$out" | awk "\$2 == 0 { bad = 1 } END { exit bad }"
'
test_expect_success NONROOT 'rootless: only the caller is mapped' '
	out=$(run -- cat /proc/self/uid_map | tr -s " ") &&
	expect_eq "$out" " 1000 $(id -u) 1"
'
test_expect_success 'landlock: nothing executes from /workspace' '
	out=$(run -- sh -c "cp /bin/true /workspace/t && chmod +x /workspace/t && /workspace/t 2>&1; echo \$?") &&
	expect_contains "$out" "Permission denied" && expect_eq "$(echo "$out" | tail -1)" 126
'
test_expect_success 'hostname is sandbox (uts namespace)' '
	out=$(run -- cat /proc/sys/kernel/hostname 2>/dev/null || run -- python3 -c "import socket; print(socket.gethostname())") &&
	expect_eq "$out" sandbox
'
test_expect_success 'ipc, uts, net, cgroup, time, mnt, pid, user namespaces differ from the host' '
	for ns in ipc uts net cgroup time mnt pid user; do
		host=$(readlink /proc/self/ns/$ns)
		inside=$(run -- readlink /proc/self/ns/$ns)
		[ -n "$inside" ] && [ "$host" != "$inside" ] || { echo "$ns: $host = $inside"; exit 1; }
	done
'
test_expect_success 'the environment is clean: nothing of the host leaks' '
	out=$(WARD_SECRET=leak run -- env | sort) &&
	! expect_contains "$out" WARD_SECRET >/dev/null &&
	expect_contains "$out" "HOME=/workspace" && expect_contains "$out" "PATH=" &&
	[ "$(echo "$out" | wc -l)" -le 14 ]
'
test_expect_success '--env sets a variable' '
	out=$(run --env GREETING=hi -- sh -c "echo \$GREETING") && expect_eq "$out" hi
'
test_expect_success 'no inherited fds; stdin is /dev/null' '
	exec 7</dev/null
	out=$(run -- sh -c "ls /proc/self/fd | tr \"\\n\" \" \"; readlink /proc/self/fd/0") &&
	exec 7<&- &&
	expect_eq "$out" "0 1 2 3 /dev/null"
'
test_expect_success '--stdin relays the caller'"'"'s input' '
	out=$(echo piped | run --stdin -- cat) && expect_eq "$out" piped
'
test_expect_success '/dev is minimal: no tty, no disks' '
	out=$(run -- ls /dev | tr "\n" " ") &&
	expect_eq "$out" "fd full null random shm stderr stdin stdout urandom zero "
'
test_expect_success 'every mount is nosuid; all but the device nodes nodev' '
	run -- cat /proc/self/mountinfo > mi &&
	! grep -v nosuid mi && ! grep -v nodev mi | grep -vE " /dev/(null|zero|full|random|urandom) "
'
test_expect_success 'the root and the image are read-only' '
	run -- cat /proc/self/mountinfo > mi &&
	grep -E "^[0-9]+ [0-9]+ [^ ]+ [^ ]+ / ro," mi && grep -E " /usr ro," mi
'
test_expect_success 'python3, node and bash scripts run normally' '
	a=$(run -- python3 -c "import json, hashlib, threading, subprocess; print(subprocess.run([\"echo\", \"py\"], capture_output=True, text=True).stdout.strip())") &&
	b=$(run -- node -e "const os = require(\"os\"); setTimeout(() => console.log(\"node\", os.hostname()), 10)") &&
	c=$(run -- bash -c "f() { echo bash; }; f | cat") &&
	expect_eq "$a $b $c" "py node sandbox bash"
'
test_expect_success PYTHON 'numpy, pandas and matplotlib work' '
	out=$(run -- python3 -c "
import numpy as np, pandas as pd, matplotlib
matplotlib.use(\"Agg\")
import matplotlib.pyplot as plt
plt.plot([1, 2]); plt.savefig(\"/workspace/p.png\")
print(int(np.arange(4).sum()), len(pd.DataFrame({\"a\": [1, 2]})))") &&
	expect_eq "$out" "6 2"
'
test_expect_success 'exit status is the program'"'"'s' '
	run -- sh -c "exit 3"; expect_eq $? 3
'
test_expect_success 'killed by signal N gives 128+N' '
	run -- sh -c "kill -SEGV \$\$"; expect_eq $? 139
'
test_expect_success 'a missing program gives 127 and says why' '
	out=$("$WARD" run -- /nonexistent 2>&1); rc=$?
	expect_eq $rc 127 && expect_contains "$out" "unable to run '"'"'/nonexistent'"'"'"
'
test_expect_success 'setup failure gives 125 and names the layer' '
	out=$("$WARD" run --ro /nonexistent-ward-path -- true 2>&1); rc=$?
	expect_eq $rc 125 && expect_contains "$out" "mount: unable to open '"'"'/nonexistent-ward-path'"'"'"
'
test_expect_success 'background processes die with the program' '
	start=$(date +%s)
	out=$(run -- sh -c "sleep 100 & sleep 100 & echo started") && expect_eq "$out" started &&
	[ $(( $(date +%s) - start )) -lt 20 ]
'
test_expect_success 'the wall-time limit kills' '
	out=$("$WARD" run --json --timeout 1 -- sleep 30); rc=$?
	expect_eq $rc 137 && expect_eq "$(echo "$out" | ward_json status)" timeout &&
	expect_contains "$(echo "$out" | ward_json layers)" seccomp
'
test_expect_success '--ro binds read-only, --rw read-write' '
	mkdir -p ro rw && echo data > ro/file && chmod 777 rw &&
	out=$(run --ro "$PWD/ro:/data" --rw "$PWD/rw:/out" -- sh -c "cat /data/file; touch /data/x 2>/dev/null && echo BAD; echo w > /out/y") &&
	expect_eq "$out" data && expect_eq "$(cat rw/y)" w
'
test_expect_success 'the --json verdict has the layers applied' '
	out=$("$WARD" run --json -- true) &&
	layers=$(echo "$out" | ward_json layers) &&
	for l in userns mount pid net ipc uts cgroupns time rlimits privileges landlock seccomp env; do
		expect_contains "$layers" "\"$l\"" || exit 1
	done
'
# ward ignores SIGPIPE itself (a dead reader must not kill it); what a
# caller of ward ignores (glibc's 32 and 33 under some runners) is not ward's.
test_expect_success 'the program inherits neither ward'"'"'s SIGPIPE ignore nor a blocked signal (SIGPIPE ends a writer quietly)' '
	out=$("$WARD" run -q -- grep -E "^Sig(Blk|Ign):" /proc/self/status) &&
	expect_contains "$out" "SigBlk:	0000000000000000" &&
	ign=$(echo "$out" | sed -n "s/^SigIgn:[[:space:]]*//p") &&
	test -n "$ign" && test $(( 0x$ign & 0x1000 )) = 0 &&
	err=$("$WARD" run -q -- sh -c "yes | head -c 1 >/dev/null" 2>&1 >/dev/null) &&
	! expect_contains "$err" "Broken pipe" 2>/dev/null
'
test_done
