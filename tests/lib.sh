# tests/lib.sh — a small git-style TAP library for the shell test suites.
#
#   . "$(dirname "$0")/../lib.sh"
#   test_expect_success 'description' 'commands'
#   test_expect_success PREREQ 'description' 'commands'
#   test_done
#
# Environment: WARD (the ward binary), WARD_PROBE (the static probe),
# WARD_BUILD (the build dir). Each test body runs in a subshell with `set -e`
# off; its exit status decides. A missing prerequisite is a skip that says
# why. Temp files go under a unique directory removed at the end.

set -u
test_count=0
test_failed=0
: "${WARD:=$(cd "$(dirname "$0")/../.." && pwd)/build/src/ward}"
: "${WARD_PROBE:=$(dirname "$WARD")/../tests/ward-probe}"
WARD=$(realpath -m "$WARD"); WARD_PROBE=$(realpath -m "$WARD_PROBE")
export WARD WARD_PROBE
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/ward-test.XXXXXX")
chmod 755 "$TEST_TMP"
trap 'rm -rf "$TEST_TMP"' EXIT
SRCDIR=$(cd "$(dirname "$0")/../.." && pwd)

# Prerequisites: set name -> reason when missing.
declare -A prereq_missing=()
test_set_prereq_missing() { prereq_missing[$1]=$2; }
# Root of a user namespace (unshare -r) is not host root: ward sees the
# namespace and maps like rootless, so such a run counts as unprivileged.
in_userns() { ! grep -qE "^ +0 +0 +4294967295$" /proc/self/uid_map; }
if [ "$(id -u)" = 0 ] && in_userns; then
	test_set_prereq_missing ROOT "needs root (this is root of a user namespace, not host root)"
	ROOT=
elif [ "$(id -u)" = 0 ]; then
	test_set_prereq_missing NONROOT "runs only as an unprivileged user"
	ROOT=1
else
	test_set_prereq_missing ROOT "needs root"
	ROOT=
fi
# test_user_prereqs: REALROOT, root of the initial user namespace (not
# `unshare -r`), where ward maps a subordinate range and has a cgroup; and
# USER, the unprivileged account $TEST_USER for the rootless checks made
# from a root run.
test_user_prereqs() {
	if [ -z "$ROOT" ] || in_userns; then
		test_set_prereq_missing REALROOT "needs root"
	fi
	TEST_USER=${WARD_TEST_USER:-ward-test}
	if [ -n "${prereq_missing[REALROOT]:-}" ]; then
		test_set_prereq_missing USER "needs root"
	elif ! id "$TEST_USER" >/dev/null 2>&1; then
		test_set_prereq_missing USER "no user $TEST_USER (tests/run.sh creates it)"
	fi
}
command -v python3 >/dev/null || test_set_prereq_missing PYTHON "python3 is not installed"
command -v node >/dev/null || test_set_prereq_missing NODE "node is not installed"

test_expect_success() {
	local prereq=
	if [ $# = 3 ]; then prereq=$1; shift; fi
	local desc=$1 body=$2
	test_count=$((test_count + 1))
	local p
	for p in ${prereq//,/ }; do
		if [ -n "${prereq_missing[$p]:-}" ]; then
			echo "ok $test_count # SKIP $desc (${prereq_missing[$p]})"
			return 0
		fi
	done
	local out
	out=$( (cd "$TEST_TMP" && eval "$body") 2>&1 )
	if [ $? = 0 ]; then
		echo "ok $test_count - $desc"
	else
		test_failed=$((test_failed + 1))
		echo "not ok $test_count - $desc"
		printf '%s\n' "$out" | sed 's/^/#   /' | head -40
	fi
}

test_done() {
	echo "1..$test_count"
	[ "$test_failed" = 0 ]
}

# Helpers for bodies.
# ward_json FIELD: read a verdict on stdin and print FIELD (dotted path).
ward_json() {
	python3 -c '
import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    v = v[int(k)] if isinstance(v, list) else v[k]
print(json.dumps(v) if not isinstance(v, str) else v)
' "$1"
}
# wait_for WHAT CMD [SECONDS]: poll CMD (eval'd) every 50 ms until it
# succeeds; after SECONDS (default 10) say what never happened and fail.
# For states a test waits on; never a fixed sleep.
wait_for() {
	local what=$1 cmd=$2 limit=${3:-10} n=0
	local tries=$((limit * 20))
	until eval "$cmd"; do
		n=$((n + 1))
		if [ $n -ge $tries ]; then
			echo "timed out after ${limit}s waiting for $what"
			return 1
		fi
		sleep 0.05
	done
}
# process_gone PID: the process has exited (gone, or a zombie nobody has
# reaped yet), for wait_for.
process_gone() {
	[ ! -d "/proc/$1" ] || grep -qs '^State:[[:space:]]*Z' "/proc/$1/status"
}
# expect_eq GOT WANT
expect_eq() {
	if [ "$1" != "$2" ]; then
		echo "got:  '$1'"
		echo "want: '$2'"
		return 1
	fi
}
# expect_contains HAYSTACK NEEDLE
expect_contains() {
	case "$1" in
	*"$2"*) return 0 ;;
	esac
	echo "'$1'"
	echo "does not contain '$2'"
	return 1
}
