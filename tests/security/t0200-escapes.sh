#!/bin/bash
# Escape attempts from inside the sandbox, each asserting the exact denial.
# The probe is a static binary bound read-only at /probe.
. "$(dirname "$0")/../lib.sh"

probe() { "$WARD" run ${WARD_RUN_NET:+--net "$WARD_RUN_NET"} -q --ro "$WARD_PROBE:/probe" "$@"; }
su_path=$(command -v su || echo /usr/bin/su)
[ -u "$su_path" ] || test_set_prereq_missing SETUID_SU "no setuid su on this host"

test_expect_success 'the probe runs in the sandbox' '
	[ -x "$WARD_PROBE" ] && out=$(probe -- /probe setuid-root) && [ -n "$out" ]
'
# As root the namespace maps uid 0 but the program has no CAP_SETUID (EPERM);
# rootless, uid 0 is not even mapped (EINVAL).
test_expect_success ROOT 'setuid(0) is refused (EPERM): no capabilities' '
	out=$(probe -- /probe setuid-root) && expect_eq "$out" "setuid-root errno=EPERM"
'
test_expect_success NONROOT 'setuid(0) is refused (EINVAL): uid 0 is not mapped rootless' '
	out=$(probe -- /probe setuid-root) && expect_eq "$out" "setuid-root errno=EINVAL"
'
# landlock answers first (MAKE_CHAR is never granted: EACCES); without it
# the missing CAP_MKNOD would (EPERM).
test_expect_success 'mknod of a device is refused (EACCES from landlock)' '
	out=$(probe -- /probe mknod) && expect_eq "$out" "mknod errno=EACCES"
'
test_expect_success '/proc/self/exe cannot be opened for writing' '
	out=$(probe -- /probe proc-self-exe-write) &&
	case "$out" in "proc-self-exe-write errno=ETXTBSY"|"proc-self-exe-write errno=EROFS"|"proc-self-exe-write errno=EACCES") ;; *) echo "$out"; false ;; esac
'
test_expect_success '/proc/1/root (the init, a copy of the supervisor) is out of reach' '
	out=$(probe -- /probe proc1-root 2>/dev/null) &&
	case "$out" in "proc1-root errno=ENOENT"|"proc1-root errno=EACCES") ;; *) echo "$out"; false ;; esac
'
test_expect_success 'the init'"'"'s exe (the host ward binary) cannot be opened' '
	out=$("$WARD" run ${WARD_RUN_NET:+--net "$WARD_RUN_NET"} -q -- sh -c "cat /proc/1/exe > /dev/null 2>&1 && echo READ || echo denied") &&
	expect_eq "$out" denied
'
test_expect_success 'a symlink inside a --ro directory resolves inside the sandbox' '
	mkdir -p data && ln -sf /etc/shadow data/shadow && ln -sf ../../../../root data/rootdir &&
	out=$("$WARD" run ${WARD_RUN_NET:+--net "$WARD_RUN_NET"} -q --ro "$PWD/data:/data" -- sh -c "cat /data/shadow 2>&1; ls /data/rootdir/ 2>&1; true") &&
	expect_contains "$out" "No such file" && ! expect_contains "$out" "root:" >/dev/null
'
test_expect_success 'a symlink inside a --rw directory cannot be used to write outside' '
	mkdir -p rw && chmod 777 rw && ln -sf /etc rw/etc && ln -sf /tmp/ward-escape-$$ rw/out &&
	cp /etc/passwd passwd.before &&
	out=$("$WARD" run ${WARD_RUN_NET:+--net "$WARD_RUN_NET"} -q --rw "$PWD/rw:/rw" -- sh -c "
		echo x > /rw/etc/passwd 2>/dev/null && echo wrote-etc || echo etc-refused
		echo x > /rw/out && cat /tmp/ward-escape-$$") && rc=0 || rc=$?
	# the links resolve inside the sandbox: its /etc is read-only and its
	# /tmp takes the second write; the host sees neither
	expect_eq "$rc" 0 && expect_eq "$out" "etc-refused
x" &&
	test ! -e /tmp/ward-escape-$$ && cmp passwd.before /etc/passwd
'
test_expect_success 'a --rw target inside the image (through the /bin link) is refused' '
	mkdir -p d && out=$("$WARD" run ${WARD_RUN_NET:+--net "$WARD_RUN_NET"} --rw "$PWD/d:/bin/evil" -- true 2>&1); rc=$?
	expect_eq $rc 2 && expect_contains "$out" "belongs to the image"
'
test_expect_success SETUID_SU 'setuid binaries of the image give no privilege (nosuid)' '
	out=$("$WARD" run ${WARD_RUN_NET:+--net "$WARD_RUN_NET"} -q -- sh -c "su -c id root </dev/null 2>&1; id -u") &&
	expect_eq "$(echo "$out" | tail -1)" 1000 && ! expect_contains "$out" "uid=0(root)" >/dev/null
'
test_expect_success 'TIOCSTI on the caller'"'"'s terminal is refused (EPERM)' '
	command -v script >/dev/null || { echo "no script(1)"; exit 1; }
	out=$(SHELL=/bin/sh script -qec "$WARD run -q --stdin --ro $WARD_PROBE:/probe -- /probe tiocsti-fd 0" /dev/null | tr -d "\r") &&
	expect_eq "$out" "tiocsti-fd errno=EPERM"
'
test_expect_success 'the program'"'"'s stdout is never the caller'"'"'s terminal' '
	out=$(SHELL=/bin/sh script -qec "$WARD run -q -- sh -c \"test -t 1 && echo tty || echo pipe\"" /dev/null | tr -d "\r") &&
	expect_eq "$out" pipe
'
test_expect_success 'ptrace of the init is refused' '
	out=$(probe -- /probe ptrace-attach) && expect_eq "$out" "ptrace-attach errno=EPERM"
'
test_expect_success 'no new user namespace can be made inside (EPERM)' '
	out=$(probe -- /probe unshare-user) && expect_eq "$out" "unshare-user errno=EPERM"
'
test_expect_success 'killing the init from inside does nothing' '
	out=$("$WARD" run ${WARD_RUN_NET:+--net "$WARD_RUN_NET"} -q -- sh -c "kill -9 1 2>&1; echo still-here") &&
	expect_contains "$out" still-here
'
test_done
