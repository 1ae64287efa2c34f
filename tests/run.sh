#!/bin/bash
# tests/run.sh BUILD — runs every test suite and ends with one line:
# "N passed, N failed, N skipped".
#
# Suites: unit, fuzz corpus replay, integration, security — as root, then as
# an unprivileged user, then as that user under `unshare -r` (unit, security
# and the integration tests in USERNS_INTEGRATION); unit and
# integration again under ASan+UBSan; a clang build with -Werror (build
# only); a short libFuzzer smoke run. Under CI=true a skip counts as a failure
# unless its description matches a line of tests/allowed-skips.txt (with a
# reason).
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
ASAN_BUILD=$SRC/build-asan
FUZZ_BUILD=$SRC/build-fuzz
CLANG_BUILD=$SRC/build-clang
FUZZ_SECONDS=${WARD_FUZZ_SECONDS:-20}
TEST_USER=${WARD_TEST_USER:-ward-test}
passed=0 failed=0 skipped=0
failures=()

allowed_skip() {
	[ "${CI:-}" = true ] || return 0
	local line pat
	while IFS= read -r line; do
		pat=${line%%|*}
		pat=${pat%"${pat##*[![:space:]]}"}
		[ -n "$pat" ] && [ "${pat#\#}" = "$pat" ] || continue
		case "$1" in *"$pat"*) return 0 ;; esac
	done < "$SRC/tests/allowed-skips.txt"
	return 1
}

# run_tap LABEL CMD...: runs one TAP producer and counts its results.
run_tap() {
	local label=$1; shift
	local out rc p=0 f=0 s=0 line
	out=$("$@" 2>&1)
	rc=$?
	while IFS= read -r line; do
		case "$line" in
		"not ok"*"# TODO"*)
			# a known failure, marked in the test: counted as a skip
			if allowed_skip "$line"; then s=$((s + 1)); else
				f=$((f + 1)); failures+=("$label: TODO not allowed under CI: $line"); fi ;;
		"not ok"*)
			f=$((f + 1)); failures+=("$label: $line") ;;
		"ok "*"# SKIP"* | "ok "*"# skip"*)
			if allowed_skip "$line"; then s=$((s + 1)); else
				f=$((f + 1)); failures+=("$label: skip not allowed under CI: $line"); fi ;;
		"ok "*) p=$((p + 1)) ;;
		esac
	done <<< "$out"
	if [ $rc != 0 ] && [ $f = 0 ]; then
		f=1; failures+=("$label: exited $rc without a failing test")
	fi
	if [ $((p + f + s)) = 0 ]; then
		f=1; failures+=("$label: ran no test")
	fi
	passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
	printf '%-4s %-52s %3d passed, %d failed, %d skipped\n' \
		"$([ $f = 0 ] && echo PASS || echo FAIL)" "$label" $p $f $s
	if [ $f != 0 ] || [ -n "${VERBOSE:-}" ]; then
		printf '%s\n' "$out" | grep -E '^(not ok|#)' | head -60 | sed 's/^/     /'
	fi
}

# suite AS BUILDDIR KIND TAG [ONLY]: AS is "" (current user) or a user name;
# TAG "userns" runs inside `unshare -r`; ONLY limits the shell tests to
# these file names.
suite() {
	local as=$1 build=$2 kind=$3 tag=$4 only=${5:-} t
	local wrap=()
	if [ -n "$as" ]; then
		wrap=(setpriv --reuid="$as" --regid="$as" --init-groups --reset-env
		      env PATH=/usr/local/bin:/usr/bin:/bin HOME=/tmp CI="${CI:-}")
	fi
	[ "$tag" = userns ] && wrap+=(unshare -r)
	local envs=(WARD="$build/src/ward" WARD_PROBE="$BUILD/tests/ward-probe" WARD_BUILD="$build")
	# the full load and residue counts run once, in the root release pass
	[ "$tag" = root ] || envs+=(WARD_LOAD_N=300 WARD_RESIDUE_RUNS=100)
	case $kind in
	unit)
		for t in "$build"/tests/t-*; do
			[ -f "$t" ] && [ -x "$t" ] && run_tap "$tag unit/$(basename "$t")" "${wrap[@]}" env "${envs[@]}" "$t"
		done ;;
	fuzz)
		for t in "$build"/tests/fuzz/*-replay; do
			[ -x "$t" ] || continue
			local name; name=$(basename "$t" -replay); name=${name#fuzz-}
			run_tap "$tag fuzz/$(basename "$t")" "${wrap[@]}" "$t" "$SRC/tests/fuzz/corpus/$name"
		done ;;
	integration|security)
		for t in "$SRC"/tests/$kind/t[0-9]*.sh; do
			[ -z "$only" ] || case " $only " in *" $(basename "$t") "*) ;; *) continue ;; esac
			[ -f "$t" ] && run_tap "$tag $kind/$(basename "$t")" "${wrap[@]}" env "${envs[@]}" bash "$t"
		done ;;
	esac
}

ensure_test_user() {
	id "$TEST_USER" >/dev/null 2>&1 ||
		useradd --system --no-create-home --shell /usr/sbin/nologin "$TEST_USER" || return 1
	# the user must reach the build and source trees
	setpriv --reuid="$TEST_USER" --regid="$TEST_USER" --init-groups \
		test -x "$BUILD/src/ward" -a -r "$SRC/tests/lib.sh"
}

# The tree must also build warning-free with clang (about 15 s from scratch
# on 2 CPUs); one TAP test.
clang_build() {
	local log
	if ! command -v clang >/dev/null; then
		echo "ok 1 # SKIP clang -Werror build (clang is not installed)"
		echo "1..1"
		return 0
	fi
	log=$(mktemp)
	if { [ -f "$CLANG_BUILD/build.ninja" ] ||
	     CC=clang meson setup "$CLANG_BUILD" "$SRC" -Dwerror=true --buildtype=release; } >"$log" 2>&1 &&
	   ninja -C "$CLANG_BUILD" >>"$log" 2>&1 && ! grep -q "warning:" "$log"; then
		echo "ok 1 - clang -Werror build"
	else
		echo "not ok 1 - clang -Werror build"
		grep -E "error|warning|FAILED" "$log" | head -30 | sed 's/^/# /'
	fi
	rm -f "$log"
	echo "1..1"
}

fuzz_smoke() {
	command -v clang >/dev/null || { echo "# no clang: fuzz smoke skipped"; return; }
	if [ ! -f "$FUZZ_BUILD/build.ninja" ]; then
		CC=clang meson setup "$FUZZ_BUILD" "$SRC" -Dfuzz=true --buildtype=debug >/dev/null || return 1
	fi
	ninja -C "$FUZZ_BUILD" >/dev/null || return 1
	local f n=0 bad=0
	for f in "$FUZZ_BUILD"/tests/fuzz/fuzz-*; do
		[ -f "$f" ] && [ -x "$f" ] || continue
		local name; name=$(basename "$f"); name=${name#fuzz-}
		local work; work=$(mktemp -d)
		cp -r "$SRC/tests/fuzz/corpus/$name/." "$work/"
		n=$((n + 1))
		if "$f" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=1024 "$work" >"$work.log" 2>&1; then
			echo "ok $n - $(basename "$f") ran ${FUZZ_SECONDS}s without a crash"
		else
			bad=1
			echo "not ok $n - $(basename "$f") found a crash"
			tail -30 "$work.log" | sed 's/^/# /'
		fi
		rm -rf "$work" "$work.log"
	done
	echo "1..$n"
	return $bad
}

echo "== release build, as $(id -un)"
for kind in unit fuzz integration security; do suite "" "$BUILD" $kind root; done

if [ "$(id -u)" = 0 ]; then
	if ensure_test_user; then
		echo "== release build, as $TEST_USER (unprivileged)"
		for kind in unit integration security; do suite "$TEST_USER" "$BUILD" $kind user; done
	else
		failed=$((failed + 1)); failures+=("cannot run as $TEST_USER: build tree not reachable")
	fi
fi

# Under `unshare -r` the suites run as root of a user namespace that only
# maps the caller: ward (and ward doctor) must see that it is not host root
# and map like rootless (tests/lib.sh treats such a run as unprivileged). The
# pass takes about 80 s on 2 CPUs and runs every suite.
USERNS_INTEGRATION=${WARD_USERNS_INTEGRATION-$(cd "$SRC/tests/integration" && ls t[0-9]*.sh | tr '\n' ' ')}
if command -v unshare >/dev/null; then
	userns_as=
	[ "$(id -u)" = 0 ] && id "$TEST_USER" >/dev/null 2>&1 && userns_as=$TEST_USER
	echo "== release build, as ${userns_as:-$(id -un)} under unshare -r"
	userns_t0=$SECONDS
	for kind in unit security; do suite "$userns_as" "$BUILD" $kind userns; done
	suite "$userns_as" "$BUILD" integration userns "$USERNS_INTEGRATION"
	echo "   ($((SECONDS - userns_t0))s)"
else
	failed=$((failed + 1)); failures+=("unshare(1) is missing: no pass under unshare -r")
fi

echo "== ASan+UBSan build"
if [ ! -f "$ASAN_BUILD/build.ninja" ]; then
	meson setup "$ASAN_BUILD" "$SRC" -Db_sanitize=address,undefined -Db_lundef=false \
		--buildtype=debug >/dev/null
fi
if ninja -C "$ASAN_BUILD" >/dev/null; then
	export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
	for kind in unit integration; do suite "" "$ASAN_BUILD" $kind asan; done
	unset ASAN_OPTIONS UBSAN_OPTIONS
else
	failed=$((failed + 1)); failures+=("ASan build failed")
fi

echo "== clang build with -Werror"
run_tap "clang -Werror build" clang_build

echo "== fuzz smoke (${FUZZ_SECONDS}s per target)"
run_tap "fuzz smoke" fuzz_smoke

if [ ${#failures[@]} != 0 ]; then
	echo
	echo "failures:"
	printf '  %s\n' "${failures[@]}"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
