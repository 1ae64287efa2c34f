#!/bin/bash
# A file the sandbox wrote can never be run as a program: not by execve,
# not through the dynamic loader, not mapped executable, not from a memfd.
# Each check asserts the exact denial and fails if its protection goes:
# noexec on every writable mount (lib/layers/mounts.c) and the memfd_create
# guard (lib/layers/seccomp-rules.h). docs/threat-model.md says what holds.
. "$(dirname "$0")/../lib.sh"

[ -x "$WARD_PROBE" ] || test_set_prereq_missing PROBE "no ward-probe at $WARD_PROBE"
mkdir -p "$TEST_TMP/rw" && chmod 777 "$TEST_TMP/rw"
probe() { "$WARD" run -q --ro "$WARD_PROBE:/probe" --rw "$TEST_TMP/rw:/rw" -- /probe "$@"; }

for dir in /tmp /workspace /rw; do
	test_expect_success PROBE "a file written in $dir cannot be mapped executable (EPERM, noexec)" '
		out=$(probe mmap-exec '"$dir"'/ward-probe-x) &&
		expect_eq "$out" "mmap-exec errno=EPERM"
	'
	test_expect_success PROBE "a file written in $dir cannot be executed (EACCES)" '
		out=$(probe execve-written '"$dir"'/ward-probe-x) &&
		expect_eq "$out" "execve-written errno=EACCES"
	'
done
test_expect_success 'the dynamic loader cannot run a binary copied to /workspace or /tmp' '
	out=$("$WARD" run -q -- sh -c "
		ld=\$(ls /lib64/ld-linux-x86-64.so.2 /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 2>/dev/null | head -1)
		for d in /workspace /tmp; do
			cp /bin/echo \$d/e && \$ld \$d/e RAN 2>&1 | sed s,\$d,DIR,g
		done") &&
	expect_eq "$out" "DIR/e: error while loading shared libraries: DIR/e: failed to map segment from shared object
DIR/e: error while loading shared libraries: DIR/e: failed to map segment from shared object"
'
test_expect_success PROBE 'a plain memfd looks absent (ENOSYS), so it cannot be filled and run' '
	out=$(probe memfd-exec) && expect_eq "$out" "memfd-exec errno=ENOSYS"
'
test_expect_success PROBE 'a memfd sealed against exec cannot be run (EACCES)' '
	out=$(probe memfd-exec sealed) && expect_eq "$out" "memfd-exec errno=EACCES"
'
test_expect_success PROBE 'programs from a read-only bind still run' '
	out=$(probe memfd-sealed) && expect_eq "$out" "memfd-sealed ok"
'
test_expect_success PYTHON 'what needs executable memory keeps working: ctypes callbacks, numpy, node' '
	out=$("$WARD" run -q -- python3 -c "
import ctypes, numpy
cb = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(lambda x: x * 2)
print(cb(21), int(numpy.arange(4).sum()))") && expect_eq "$out" "42 6" &&
	out=$("$WARD" run -q -- node -e "new WebAssembly.Module(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0])); console.log(\"wasm\")") &&
	expect_eq "$out" wasm
'
test_done
