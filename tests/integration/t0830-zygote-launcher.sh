#!/bin/bash
# Sandboxes cloned by a launcher (ward_sandbox_options.launcher, lib/launcher.c)
# are the same sandboxes: the same layers, the same verdicts, the exact same
# seccomp denials as a sandbox the supervisor cloned itself; the init is the
# supervisor's child, and nothing outlives the supervisor.
. "$(dirname "$0")/../lib.sh"

ZR=${WARD_BUILD:-$(dirname "$WARD")/..}/tests/zygote-run
[ -x "$ZR" ] || test_set_prereq_missing ZR "no zygote-run at $ZR (build the tests)"
[ -x "$WARD_PROBE" ] || test_set_prereq_missing PROBE "no ward-probe at $WARD_PROBE"

test_expect_success ZR 'a program runs through the launcher with every layer of a cold start' '
	cold=$("$ZR" run -- /bin/echo hello 2>&1) &&
	warm=$("$ZR" run --launcher -- /bin/echo hello 2>&1) &&
	expect_contains "$warm" "hello" &&
	expect_eq "$(echo "$warm" | grep ^layers=)" "$(echo "$cold" | grep ^layers=)"
'

test_expect_success ZR 'exit codes and signals reach the verdict through the launcher' '
	out=$("$ZR" run --launcher --quiet -- /bin/sh -c "exit 3"); expect_contains "$out" "status=error" &&
	out=$("$ZR" run --launcher --quiet -- /bin/sh -c "kill -SEGV \$\$"); expect_contains "$out" "status=signaled" &&
	out=$("$ZR" run --launcher --quiet --runs 20 -- /bin/true); expect_contains "$out" "status=ok runs=20"
'

test_expect_success ZR,PROBE 'every seccomp answer is the cold one (ward-probe all)' '
	"$ZR" run --ro "$WARD_PROBE:/probe" -- /probe all >cold.out 2>/dev/null </dev/null
	"$ZR" run --launcher --ro "$WARD_PROBE:/probe" -- /probe all >warm.out 2>/dev/null </dev/null
	grep -v "^status=" cold.out >cold.lines && grep -v "^status=" warm.out >warm.lines &&
	[ "$(wc -l <cold.lines)" -gt 20 ] && diff cold.lines warm.lines
'

# The init is cloned with CLONE_PARENT: its parent is the supervisor, not
# the launcher, so the supervisor's pidfd, wait and parent-death signal hold.
test_expect_success ZR 'the sandbox'"'"'s init is the supervisor'"'"'s child' '
	mkfifo in && { "$ZR" run --launcher --hold -- /bin/sleep 30 <in >held.out 2>&1 & } && exec 3>in &&
	wait_for "the held sandbox" "grep -q ^hold held.out" &&
	set -- $(sed -n "s/^hold launcher=\([0-9]*\) init=\([0-9]*\) self=\([0-9]*\)/\1 \2 \3/p" held.out) &&
	ppid=$(awk "/^PPid:/{print \$2}" /proc/$2/status) &&
	kill -9 $3; exec 3>&-
	expect_eq "$ppid" "$3" &&
	wait_for "the sandbox to exit" "process_gone $2" &&
	"$WARD" gc > /dev/null # its cgroup: what a killed supervisor leaves
'

test_expect_success ZR 'killing the supervisor leaves no launcher and no sandbox' '
	mkfifo in2 && { "$ZR" run --launcher --hold -- /bin/sleep 30 <in2 >held2.out 2>&1 & } && exec 4>in2 &&
	wait_for "the held sandbox" "grep -q ^hold held2.out" &&
	set -- $(sed -n "s/^hold launcher=\([0-9]*\) init=\([0-9]*\) self=\([0-9]*\)/\1 \2 \3/p" held2.out) &&
	[ -d /proc/$1 ] && [ -d /proc/$2 ] &&
	kill -9 $3 && exec 4>&- &&
	wait_for "the launcher to exit" "process_gone $1" &&
	wait_for "the sandbox to exit" "process_gone $2" &&
	"$WARD" gc > /dev/null &&
	expect_eq "$(find /sys/fs/cgroup -maxdepth 4 -name "ward-$3-*" 2>/dev/null)" ""
'

test_expect_success ZR 'a dead launcher fails the next start with a clear error, at once' '
	! out=$(timeout 20 "$ZR" run --launcher --quiet --kill-launcher --runs 3 -- /bin/true 2>&1) &&
	expect_contains "$out" "launcher: the launcher did not answer"
'

test_done
