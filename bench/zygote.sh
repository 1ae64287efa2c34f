#!/bin/bash
# bench/zygote.sh — what the launcher and the Python zygote change, in one
# run, side by side (paired, A B A B: both sides see the same noise).
#
#   bench/zygote.sh [--runs N] [--pairs P] [--keep K]
#
#   1. the supervisor's side of a sandbox start (prepare + claim of
#      /bin/true: wall and CPU), cold clone vs launcher, with the supervisor
#      at its own size, with 400 sandboxes alive (as a daemon's sessions,
#      with their fds and children), and after touching 400 and 1600 MiB
#      of heap (what a large daemon carries into every clone it makes);
#   2. a python kernel ready to take a request: cold start vs forked by a
#      zygote (numpy, pandas, matplotlib preloaded), and a one-shot
#      `import numpy; numpy.arange(10).sum()` start to verdict;
#   3. PSS per idle kernel (init + kernel, /proc/PID/smaps_rollup) with K
#      kernels alive at once, cold vs zygote.
# A benchmark, not a test: it prints figures and judges nothing.
# Environment: WARD_BUILD (default build).
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${WARD_BUILD:-$SRC/build}
ZR=$BUILD/tests/zygote-run
RUNS=50 PAIRS=3 KEEP=20
MODS=numpy,pandas,matplotlib
while [ $# -gt 0 ]; do
	case $1 in
	--runs) RUNS=$2; shift 2 ;;
	--pairs) PAIRS=$2; shift 2 ;;
	--keep) KEEP=$2; shift 2 ;;
	-h|--help) sed -n '2,18s/^# \{0,1\}//p' "$0"; exit 0 ;;
	*) echo "bench: unknown option '$1'" >&2; exit 2 ;;
	esac
done
[[ $RUNS =~ ^[1-9][0-9]*$ && $PAIRS =~ ^[1-9][0-9]*$ && $KEEP =~ ^[1-9][0-9]*$ ]] ||
	{ echo "bench: --runs, --pairs and --keep need positive numbers" >&2; exit 2; }
[ -x "$ZR" ] || { echo "bench: no $ZR (build the tests)" >&2; exit 1; }

# field NAME LINE: the value of NAME=... in a zygote-run summary line
field() { sed -n "s/.*[ ^]$1=\([^ ]*\).*/\1/p" <<<" $2"; }
# median of the numbers on stdin
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }

echo "# 1. supervisor's side of a start (/bin/true, $RUNS runs x $PAIRS pairs; medians of the pair averages, µs)"
printf '%-14s %-9s %10s %10s %10s\n' supervisor path start_wall start_cpu start_to_verdict
for load in "none" "--live 400" "--ballast 400" "--ballast 1600"; do
	args=(); [ "$load" != none ] && args=($load)
	declare -A w=() c=() t=()
	for ((p = 0; p < PAIRS; p++)); do
		for path in cold launcher; do
			flag=; [ $path = launcher ] && flag=--launcher
			line=$(nice "$ZR" run $flag --quiet "${args[@]}" --runs $RUNS -- /bin/true)
			w[$path]+="$(field start_us "$line") " c[$path]+="$(field start_cpu_us "$line") "
			t[$path]+="$(field total_us "$line") "
		done
	done
	for path in cold launcher; do
		printf '%-14s %-9s %10s %10s %10s\n' "${load#--}" $path \
			"$(tr ' ' '\n' <<<"${w[$path]}" | grep . | median)" \
			"$(tr ' ' '\n' <<<"${c[$path]}" | grep . | median)" \
			"$(tr ' ' '\n' <<<"${t[$path]}" | grep . | median)"
	done
	unset w c t
done

echo
echo "# 2. python kernels ($RUNS runs x $PAIRS pairs; medians, µs): ready = prepare + claim"
printf '%-28s %-7s %10s %10s %10s\n' cell path ready stop total
for cell in 'pass' 'import numpy; numpy.arange(10).sum()'; do
	declare -A r=() s=() t=()
	for ((p = 0; p < PAIRS; p++)); do
		for path in cold zygote; do
			flag=(); [ $path = zygote ] && flag=(--zygote $MODS)
			line=$(nice "$ZR" kernel --quiet "${flag[@]}" --runs $RUNS "$cell" 2>/dev/null | tail -1)
			r[$path]+="$(field ready_us "$line") " s[$path]+="$(field stop_us "$line") "
			t[$path]+="$(field total_us "$line") "
		done
	done
	for path in cold zygote; do
		printf '%-28.28s %-7s %10s %10s %10s\n' "$cell" $path \
			"$(tr ' ' '\n' <<<"${r[$path]}" | grep . | median)" \
			"$(tr ' ' '\n' <<<"${s[$path]}" | grep . | median)" \
			"$(tr ' ' '\n' <<<"${t[$path]}" | grep . | median)"
	done
	unset r s t
done

# pss_tree PID: PSS in kB of PID and all its descendants
pss_tree() {
	local pid=$1 sum kid
	sum=$(awk '/^Pss:/{print $2}' /proc/$pid/smaps_rollup 2>/dev/null || echo 0)
	for kid in $(cat /proc/$pid/task/*/children 2>/dev/null); do
		sum=$((sum + $(pss_tree $kid)))
	done
	echo "${sum:-0}"
}

echo
echo "# 3. PSS per idle kernel, $KEEP alive at once, each having run 'import numpy' (kB; the zygote's own PSS apart)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for path in cold zygote; do
	flag=(); [ $path = zygote ] && flag=(--zygote $MODS)
	mkfifo "$tmp/in.$path"
	nice "$ZR" kernel --quiet "${flag[@]}" --runs 1 --keep $KEEP 'import numpy' <"$tmp/in.$path" >"$tmp/out.$path" 2>/dev/null &
	pid=$!
	exec 9>"$tmp/in.$path"
	for ((i = 0; i < 1200; i++)); do grep -q '^kept' "$tmp/out.$path" && break; sleep 0.1; done
	set -- $(sed -n 's/^kept //p' "$tmp/out.$path")
	zp=${1:-0}; shift || true
	total=0
	for k in "$@"; do total=$((total + $(pss_tree $k))); done
	zyg=0
	[ "$zp" != 0 ] && zyg=$(awk '/^Pss:/{print $2}' /proc/$zp/smaps_rollup 2>/dev/null || echo 0)
	exec 9>&-
	wait $pid || true
	printf '%-7s per kernel %6d kB   zygote itself %6d kB\n' $path $((total / KEEP)) "$zyg"
done
