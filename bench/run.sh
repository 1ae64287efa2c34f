#!/bin/bash
# bench/run.sh — how long a sandbox costs: the same commands bare, under
# bubblewrap and under ward, in one run, on one machine.
#
#   bench/run.sh [--runs N]
#
# A benchmark, not a test: it prints figures and never judges the machine it
# runs on (the targets are printed next to them for reference). Uses
# hyperfine when it is installed (as root it installs it when missing), else
# a plain timing loop. Environment: WARD (default build/src/ward), PYTHON
# (default /usr/bin/python3, the interpreter the sandbox finds first too),
# BENCH_TOOL=loop to use the timing loop even when hyperfine is there.
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
WARD=${WARD:-$SRC/build/src/ward}
PY=${PYTHON:-/usr/bin/python3}
RUNS_TRUE=200
RUNS_PY=100
WARMUP=10
# bubblewrap with every namespace, the host's /usr and the merged-usr links:
# the closest equivalent of ward's default sandbox that bwrap offers.
BWRAP_ARGS=(--unshare-all --ro-bind /usr /usr --symlink usr/bin /bin
	--symlink usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/sbin /sbin
	--proc /proc --dev /dev --tmpfs /tmp --)

usage() {
	sed -n '2,12s/^# \{0,1\}//p' "$0"
	exit "${1:-0}"
}

while [ $# -gt 0 ]; do
	case $1 in
	--runs)
		[ $# -ge 2 ] && [[ $2 =~ ^[1-9][0-9]*$ ]] || { echo "bench: --runs needs a positive number" >&2; exit 2; }
		RUNS_TRUE=$2 RUNS_PY=$2
		shift 2 ;;
	--runs=*)
		v=${1#--runs=}
		[[ $v =~ ^[1-9][0-9]*$ ]] || { echo "bench: --runs needs a positive number" >&2; exit 2; }
		RUNS_TRUE=$v RUNS_PY=$v
		shift ;;
	-h | --help) usage 0 ;;
	*) echo "bench: unknown option '$1'" >&2; usage 2 >&2 ;;
	esac
done

[ -x "$WARD" ] || { echo "bench: no ward binary at $WARD (build it, or set WARD)" >&2; exit 1; }
[ -x "$PY" ] || { echo "bench: no python at $PY (set PYTHON)" >&2; exit 1; }
"$WARD" run -- /bin/true || { echo "bench: '$WARD run -- /bin/true' fails; see 'ward doctor'" >&2; exit 1; }

USE_HYPERFINE=
if [ "${BENCH_TOOL:-}" != loop ] && ! command -v hyperfine >/dev/null &&
	[ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	echo "# installing hyperfine" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hyperfine >/dev/null 2>&1 ||
		echo "# could not install hyperfine; using the timing loop" >&2
fi
[ "${BENCH_TOOL:-}" != loop ] && command -v hyperfine >/dev/null && USE_HYPERFINE=1
HAVE_BWRAP=
if command -v bwrap >/dev/null && bwrap "${BWRAP_ARGS[@]}" /bin/true 2>/dev/null; then
	HAVE_BWRAP=1
else
	echo "# bwrap is missing or cannot run here (apt-get install bubblewrap): its column stays empty" >&2
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ward-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# --- timing -----------------------------------------------------------------

# median_ms FILE: the median of one number (nanoseconds) per line, in ms.
median_ms() {
	sort -n "$1" | awk '{ v[NR] = $1 } END {
		m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.3f", m / 1e6 }'
}

# now_ns: bash's clock when it has one (no fork inside the measurement),
# else date(1).
now_ns() {
	if [ -n "${EPOCHREALTIME:-}" ]; then
		local t=${EPOCHREALTIME/[.,]/}
		echo "${t}000"
	else
		date +%s%N
	fi
}

# loop_median RUNS CMD...: runs CMD RUNS times after a warmup; prints the
# median in ms.
loop_median() {
	local runs=$1 i t0 t1 out=$TMP/loop
	shift
	for ((i = 0; i < WARMUP; i++)); do "$@" >/dev/null 2>&1; done
	: >"$out"
	for ((i = 0; i < runs; i++)); do
		t0=$(now_ns)
		"$@" >/dev/null 2>&1 || { echo "bench: '$*' failed" >&2; exit 1; }
		t1=$(now_ns)
		echo $((t1 - t0)) >>"$out"
	done
	median_ms "$out"
}

# hyperfine_median RUNS NAME CMD...: the median in ms, as hyperfine measures
# it (no shell in between).
hyperfine_median() {
	local runs=$1 name=$2 json=$TMP/${2//[^A-Za-z0-9]/_}.json
	shift 2
	local cmd
	cmd=$(printf '%q ' "$@")
	# its outlier warnings are noise here; its errors are not
	hyperfine -N --style none --warmup "$WARMUP" --runs "$runs" \
		--command-name "$name" --export-json "$json" "$cmd" >/dev/null 2>"$TMP/err" ||
		{ cat "$TMP/err" >&2; echo "bench: '$*' failed" >&2; exit 1; }
	"$PY" -c 'import json, sys; print("%.3f" % (json.load(open(sys.argv[1]))["results"][0]["median"] * 1e3))' "$json"
}

measure() {
	if [ -n "$USE_HYPERFINE" ]; then
		hyperfine_median "$@"
	else
		local runs=$1
		shift 2
		loop_median "$runs" "$@"
	fi
}

# --- the comparison -----------------------------------------------------------

# row LABEL RUNS CMD...: one workload, bare, under bwrap, under ward; leaves
# the ratio and the difference in ROW_RATIO and ROW_DIFF.
row() {
	local label=$1 runs=$2 bare bw=- wd ratio=- diff
	shift 2
	bare=$(measure "$runs" "$label-bare" "$@")
	[ -n "$HAVE_BWRAP" ] && bw=$(measure "$runs" "$label-bwrap" bwrap "${BWRAP_ARGS[@]}" "$@")
	wd=$(measure "$runs" "$label-ward" "$WARD" run -- "$@")
	[ "$bw" != - ] && ratio=$(awk -v w="$wd" -v b="$bw" 'BEGIN { printf "%.2f", w / b }')
	diff=$(awk -v w="$wd" -v b="$bare" 'BEGIN { printf "%+.2f", w - b }')
	printf '%-18s %9s %9s %9s %11s %13s\n' "$label" "$bare" "$bw" "$wd" "$ratio" "$diff"
	ROW_RATIO=$ratio ROW_DIFF=$diff
}

tool="timing loop ($([ -n "${EPOCHREALTIME:-}" ] && echo 'bash $EPOCHREALTIME' || echo 'date +%s%N'))"
[ -n "$USE_HYPERFINE" ] && tool="hyperfine $(hyperfine --version | awk '{print $2}')"
echo "# ward $("$WARD" version | awk '{print $2}'), $([ -n "$HAVE_BWRAP" ] && bwrap --version || echo 'no bwrap')," \
	"$tool, as $(id -un), Linux $(uname -r), $(nproc) CPUs"
# The targets assume every layer on: say when one is degraded here.
degraded=$("$WARD" run --json -- /bin/true | "$PY" -c \
	'import json, sys; print(", ".join(json.load(sys.stdin)["degraded"]) or "none")')
echo "# runs: $RUNS_TRUE for /bin/true, $RUNS_PY for python3; medians in ms;" \
	"degraded layers: $degraded"
printf '%-18s %9s %9s %9s %11s %13s\n' workload bare bwrap ward ward/bwrap "ward-bare"
row "/bin/true" "$RUNS_TRUE" /bin/true
true_ratio=$ROW_RATIO
row "python3 -c pass" "$RUNS_PY" "$PY" -c pass
echo "# targets: ward/bwrap <= 0.70 for /bin/true (here $true_ratio);" \
	"ward-bare <= +3 ms for python3 (here $ROW_DIFF ms)"
