#!/bin/bash
# bench/run.sh — how long a sandbox costs: the same commands bare, under
# bubblewrap, crun, runc and ward, in one run, on one machine.
#
#   bench/run.sh [--runs N]
#
# A benchmark, not a test: it prints figures and never judges the machine it
# runs on (the targets are printed next to them for reference). Uses
# hyperfine when it is installed, else a plain timing loop; as root it
# installs hyperfine, crun and runc when missing. Environment: WARD (default
# build/src/ward), PYTHON (default /usr/bin/python3, the interpreter the
# sandbox finds first too), BENCH_TOOL=loop to use the timing loop even when
# hyperfine is there.
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
	sed -n '2,13s/^# \{0,1\}//p' "$0"
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
# ensure_pkg PROGRAM [WHAT]: as root with apt-get, the Debian package of
# that name when the program is missing; never as another user.
ensure_pkg() {
	command -v "$1" >/dev/null && return 0
	[ "$(id -u)" = 0 ] && command -v apt-get >/dev/null || return 1
	echo "# installing $1" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null 2>&1 ||
		{ echo "# could not install $1${2:+; $2}" >&2; return 1; }
}
[ "${BENCH_TOOL:-}" != loop ] && ensure_pkg hyperfine "using the timing loop"
ensure_pkg crun || true
ensure_pkg runc || true
[ "${BENCH_TOOL:-}" != loop ] && command -v hyperfine >/dev/null && USE_HYPERFINE=1
HAVE_BWRAP=
if command -v bwrap >/dev/null && bwrap "${BWRAP_ARGS[@]}" /bin/true 2>/dev/null; then
	HAVE_BWRAP=1
else
	echo "# bwrap is missing or cannot run here (apt-get install bubblewrap): its column stays empty" >&2
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ward-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
# the OCI runtimes' user namespace must reach the bundle's root
chmod 755 "$TMP"

# --- the OCI runtimes ---------------------------------------------------------

# A minimal bundle for crun and runc: an empty read-only root with the
# host's /usr bound read-only (and the merged-usr links), /proc, a /dev of
# the runtime's own, a /tmp tmpfs, every namespace (user included: the
# program runs as uid 1000 of a range far from real users, or as the caller
# rootless), the runtime's default capabilities dropped to none. argv is
# given at each run through a copy of the config (OCI has no argv flag).
make_bundle() {
	local b=$TMP/bundle
	mkdir -p "$b/rootfs/usr" "$b/rootfs/proc" "$b/rootfs/dev" "$b/rootfs/tmp"
	local l
	for l in bin lib lib64 sbin; do ln -s "usr/$l" "$b/rootfs/$l"; done
	"$PY" - "$b/config.json" "$(id -u)" "$(id -g)" <<'PYEOF'
import json, sys
path, uid, gid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
root = uid == 0
ids = lambda host: [{"containerID": 0 if root else 1000, "hostID": host, "size": 65536 if root else 1}]
config = {
    "ociVersion": "1.0.2",
    "process": {"terminal": False, "user": {"uid": 1000, "gid": 1000}, "args": ["/bin/true"],
                "env": ["PATH=/usr/local/bin:/usr/bin:/bin"], "cwd": "/", "noNewPrivileges": True,
                "capabilities": {k: [] for k in ("bounding", "effective", "permitted", "inheritable", "ambient")}},
    "root": {"path": "rootfs", "readonly": True},
    "hostname": "sandbox",
    "mounts": [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
        {"destination": "/usr", "type": "bind", "source": "/usr", "options": ["rbind", "ro", "nosuid", "nodev"]},
        {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "size=65536k"]},
    ],
    "linux": {
        "namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount", "cgroup", "user")],
        "uidMappings": ids(0x60000000 if root else uid),
        "gidMappings": ids(0x60000000 if root else gid),
        "maskedPaths": ["/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"],
        "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"],
    },
}
json.dump(config, open(path, "w"), indent=1)
PYEOF
}

# oci_cmd RUNTIME: the command line that runs the bundle, in OCI_CMD (the
# argv of the workload is written into its config by oci_args). Each run
# makes and deletes the container; its state stays in the temp directory.
oci_cmd() {
	OCI_CMD=("$1")
	# crun cannot manage cgroups on a hybrid v1/v2 host; without, it runs
	[ "$1" = crun ] && [ -n "${CRUN_NO_CGROUP:-}" ] && OCI_CMD+=(--cgroup-manager=disabled)
	OCI_CMD+=(--root "$TMP/$1-state" run --bundle "$TMP/bundle" "bench-$$-$1")
}

# oci_args CMD...: sets the bundle's argv.
oci_args() {
	"$PY" - "$TMP/bundle/config.json" "$@" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["process"]["args"] = sys.argv[2:]
json.dump(c, open(sys.argv[1], "w"), indent=1)
PYEOF
}

HAVE_OCI=()
if command -v crun >/dev/null || command -v runc >/dev/null; then
	make_bundle
	for rt in crun runc; do
		command -v $rt >/dev/null || { echo "# $rt is not installed (apt-get install $rt): its column stays empty" >&2; continue; }
		oci_cmd $rt
		if "${OCI_CMD[@]}" >/dev/null 2>"$TMP/oci-err"; then
			HAVE_OCI+=($rt)
		elif [ $rt = crun ] && CRUN_NO_CGROUP=1 && oci_cmd $rt && "${OCI_CMD[@]}" >/dev/null 2>&1; then
			HAVE_OCI+=($rt)
			echo "# crun cannot manage this host's cgroups: it runs without (--cgroup-manager=disabled)" >&2
		else
			echo "# $rt cannot run the bundle here ($(tail -1 "$TMP/oci-err")): its column stays empty" >&2
		fi
	done
fi
have_oci() { [[ " ${HAVE_OCI[*]} " == *" $1 "* ]]; }

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

# row LABEL RUNS CMD...: one workload, bare, under bwrap, crun, runc and
# ward; leaves the ratio and the difference in ROW_RATIO and ROW_DIFF.
row() {
	local label=$1 runs=$2 bare bw=- cr=- rc=- wd ratio=- diff
	shift 2
	bare=$(measure "$runs" "$label-bare" "$@")
	[ -n "$HAVE_BWRAP" ] && bw=$(measure "$runs" "$label-bwrap" bwrap "${BWRAP_ARGS[@]}" "$@")
	if [ ${#HAVE_OCI[@]} -gt 0 ]; then
		oci_args "$@"
		have_oci crun && oci_cmd crun && cr=$(measure "$runs" "$label-crun" "${OCI_CMD[@]}")
		have_oci runc && oci_cmd runc && rc=$(measure "$runs" "$label-runc" "${OCI_CMD[@]}")
	fi
	wd=$(measure "$runs" "$label-ward" "$WARD" run -- "$@")
	[ "$bw" != - ] && ratio=$(awk -v w="$wd" -v b="$bw" 'BEGIN { printf "%.2f", w / b }')
	diff=$(awk -v w="$wd" -v b="$bare" 'BEGIN { printf "%+.2f", w - b }')
	printf '%-18s %9s %9s %9s %9s %9s %11s %11s\n' "$label" "$bare" "$bw" "$cr" "$rc" "$wd" "$ratio" "$diff"
	ROW_RATIO=$ratio ROW_DIFF=$diff
}

tool="timing loop ($([ -n "${EPOCHREALTIME:-}" ] && echo 'bash $EPOCHREALTIME' || echo 'date +%s%N'))"
[ -n "$USE_HYPERFINE" ] && tool="hyperfine $(hyperfine --version | awk '{print $2}')"
versions=$([ -n "$HAVE_BWRAP" ] && bwrap --version || echo 'no bwrap')
for rt in crun runc; do
	have_oci $rt && versions+=", $($rt --version | head -1 | sed 's/ version//')" || versions+=", no $rt"
done
echo "# ward $("$WARD" version | awk '{print $2}'), $versions," \
	"$tool, as $(id -un), Linux $(uname -r), $(nproc) CPUs"
# The targets assume every layer on: say when one is degraded here.
degraded=$("$WARD" run --json -- /bin/true | "$PY" -c \
	'import json, sys; print(", ".join(json.load(sys.stdin)["degraded"]) or "none")')
echo "# runs: $RUNS_TRUE for /bin/true, $RUNS_PY for python3; medians in ms;" \
	"degraded layers: $degraded"
printf '%-18s %9s %9s %9s %9s %9s %11s %11s\n' workload bare bwrap crun runc ward ward/bwrap "ward-bare"
row "/bin/true" "$RUNS_TRUE" /bin/true
true_ratio=$ROW_RATIO
row "python3 -c pass" "$RUNS_PY" "$PY" -c pass
echo "# targets: ward/bwrap <= 0.70 for /bin/true (here $true_ratio);" \
	"ward-bare <= +2 ms for python3 (here $ROW_DIFF ms)"
