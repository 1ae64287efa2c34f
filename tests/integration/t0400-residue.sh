#!/bin/bash
# No residue: after any run, however it ended — including a SIGKILL of the
# supervisor — no process, cgroup, mount or temp directory is left.
. "$(dirname "$0")/../lib.sh"

RUNS=${WARD_RESIDUE_RUNS:-200}
marker=$((4000 + RANDOM % 1000)).$$
# host processes whose command line carries our marker
strays() { pgrep -f "^sleep $marker" | wc -l; }
# The host's mount table is shared with everything else on this machine, so
# the check is for ward's own signatures among the mounts that appeared: the
# staging root, the sandbox's /proc and its workspace tmpfs.
host_mounts() { cut -d" " -f5- /proc/self/mountinfo | sort; }
ward_mounts_new() {
	comm -13 "$1" <(host_mounts) | grep -E "nr_inodes=4096|hidepid=|nr_inodes=16384" || true
}
# cgroup leaves whose supervisor is gone (names embed the supervisor's pid)
dead_leaves() {
	local d n pid
	for d in /sys/fs/cgroup/*/ward/ward-*; do
		[ -d "$d" ] || continue
		n=${d##*/ward-}; pid=${n%%-*}
		kill -0 "$pid" 2>/dev/null || [ -d /proc/$pid ] || echo "$d"
	done
}
# ward makes no temp files on the host; if it ever did, it would honour
# TMPDIR, so the runs get a private one that must stay empty.
tmp_entries() { ls -A "$TEST_TMP/tmpdir" | wc -l; }

test_expect_success 'a SIGTERM-ignoring process, a double-forked daemon and a late child are gone' '
	"$WARD" run -q -- sh -c "
		trap \"\" TERM; (trap \"\" TERM; exec sleep $marker) &
		( (setsid sleep $marker &) & ) ;
		(sleep 1; exec sleep $marker) &
		echo started" > out && expect_eq "$(cat out)" started &&
	# an absence has no event to poll for: wait past the late child'"'"'s 1 s
	sleep 1.5 && expect_eq "$(strays)" 0
'
# Each hostile run must end the way it was meant to (its verdict status):
# a run that failed to start would leave nothing behind and prove nothing.
# Without a cgroup (rootless, no delegation) the memory and fork bombs end
# through rlimits, as plain errors.
if "$WARD" run --json -- true | grep -q '"degraded":\[\]'; then
	bombs="memory_limit pids_limit"
else
	bombs="error error"
fi
want_status() {
	case $(($1 % 8)) in
	0) echo "${bombs% *}" ;; 1) echo "${bombs#* }" ;; 2) echo cpu_timeout ;; 3) echo timeout ;;
	4) echo output_limit ;; 5) echo disk_limit ;; 6) echo signaled ;; 7) echo error ;;
	esac
}
hostile() {
	case $(($1 % 8)) in
	0) "$WARD" run --json --memory 32M -- python3 -c "b = bytearray(256 << 20)" ;;
	1) "$WARD" run --json --pids 16 --timeout 10 -- sh -c "while :; do sleep $marker & done" ;;
	2) "$WARD" run --json --cpu-time 0.2 -- sh -c "while :; do :; done" ;;
	3) "$WARD" run --json --timeout 0.2 -- sleep $marker ;;
	4) "$WARD" run --json --output-limit 64K -- sh -c "yes | head -c 4000000" ;;
	5) "$WARD" run --json --workspace-size 1M -- sh -c "cat /dev/zero > /workspace/f" ;;
	6) "$WARD" run --json -- sh -c "sleep $marker & kill -SEGV \$\$" ;;
	7) "$WARD" run --json -- sh -c "trap \"\" TERM; sleep $marker & sleep $marker & exit 3" ;;
	esac
}
test_expect_success "$RUNS hostile runs in a row end as meant and leave nothing behind" '
	host_mounts > mounts.before; mkdir -p "$TEST_TMP/tmpdir"; t0=$(tmp_entries)
	bad=0 i=0
	while [ $i -lt $RUNS ]; do
		got=$(TMPDIR=$TEST_TMP/tmpdir hostile $i 2>/dev/null </dev/null |
			grep -o "^{\"status\":\"[a-z_]*\"" | cut -d\" -f4)
		want=$(want_status $i)
		[ "$got" = "$want" ] || { echo "run $i: status ${got:-none}, want $want"; bad=$((bad + 1)); }
		i=$((i + 1))
	done
	expect_eq "$bad" 0 &&
	wait_for "no stray process" "[ \"\$(strays)\" = 0 ]" &&
	expect_eq "$(ward_mounts_new mounts.before)" "" &&
	expect_eq "$(tmp_entries)" "$t0" && expect_eq "$(dead_leaves)" ""
'
test_expect_success 'SIGKILL of the supervisor kills the sandbox; ward gc removes the rest' '
	"$WARD" run -q -- sh -c "sleep $marker & sleep $marker" & wp=$!
	wait_for "two sleeps in the sandbox" "[ \$(strays) -ge 2 ]" 5 &&
	expect_eq "$(strays)" 2 &&
	kill -KILL $wp && wait $wp 2>/dev/null
	wait_for "the sandbox to die with its supervisor" "[ \$(strays) = 0 ]" 5 &&
	"$WARD" gc >/dev/null && expect_eq "$(dead_leaves)" ""
'
test_expect_success '50 runs in parallel do not interfere' '
	i=0; while [ $i -lt 50 ]; do
		"$WARD" run -q -- sh -c "echo $i > /workspace/v; sleep 0.2; cat /workspace/v; hostname" > par.$i 2>&1 &
		i=$((i + 1))
	done
	wait
	i=0; while [ $i -lt 50 ]; do
		expect_eq "$(cat par.$i)" "$i
sandbox" || exit 1
		i=$((i + 1))
	done
	expect_eq "$(dead_leaves)" ""
'
test_expect_success 'the library leaks no fd, no child and no cgroup over many runs' '
	"$WARD_BUILD/tests/library-runs" "${WARD_LIBRARY_RUNS:-100}"
'
test_done
