#!/bin/bash
# The seccomp contract, from inside a real sandbox: `ward-probe all` makes
# every attempt of tests/security/expected.txt in its own child, and each line
# it prints must be exactly the expected one (the errno, or the killing
# signal). One TAP line per item, so a regression names the syscall.
. "$(dirname "$0")/../lib.sh"

EXPECTED=$SRCDIR/tests/security/expected.txt
OUT=$TEST_TMP/probe-all.out

[ -x "$WARD" ] || test_set_prereq_missing WARD "no ward binary at $WARD"
[ -x "$WARD_PROBE" ] || test_set_prereq_missing PROBE "no ward-probe at $WARD_PROBE"

test_expect_success WARD,PROBE 'ward-probe all runs inside ward run' '
	"$WARD" run ${WARD_RUN_NET:+--net "$WARD_RUN_NET"} --ro "$WARD_PROBE:/probe" -- /probe all </dev/null >"$OUT" 2>"$OUT.err"
	rc=$?
	cat "$OUT.err"
	[ $rc = 0 ] && [ -s "$OUT" ]
'

# probe_line NAME: the line the probe printed for NAME, or nothing.
probe_line() {
	[ -f "$OUT" ] && grep -E "^$1 " "$OUT"
}

while read -r name want <&3; do
	case "$name" in '' | '#'*) continue ;; esac
	test_expect_success WARD,PROBE "$name: $want" '
		got=$(probe_line "$name")
		expect_eq "${got:-(no line for $name)}" "$name $want"
	'
done 3<"$EXPECTED"

# An attempt the probe makes but the contract does not list is untested.
test_expect_success WARD,PROBE 'every probe result is listed in expected.txt' '
	[ -s "$OUT" ] || exit 1
	unlisted=$(cut -d" " -f1 "$OUT" | while read -r n; do
		grep -qE "^$n " "$EXPECTED" || echo "$n"
	done)
	expect_eq "$unlisted" ""
'

test_done
