#!/bin/bash
# The kernels' own test suites (they drive each runner over its protocol,
# outside any sandbox), reported as TAP: one line per test.
. "$(dirname "$0")/../lib.sh"

py_suite() {
	local dir=$1 line name n=0
	(cd "$SRCDIR" && /usr/bin/python3 -m unittest discover -v -s "runners/$dir" -p 'test_*.py' 2>&1) > "$TEST_TMP/$dir.log"
	while IFS= read -r line; do
		case "$line" in
		*" ... ok"|*" ... skipped"*|*" ... FAIL"|*" ... ERROR")
			name=${line%% (*}
			test_count=$((test_count + 1))
			case "$line" in
			*" ... ok") echo "ok $test_count - $dir kernel: $name" ;;
			*" ... skipped"*) echo "ok $test_count # SKIP $dir kernel: $name (${line##*skipped })" ;;
			*) test_failed=$((test_failed + 1)); echo "not ok $test_count - $dir kernel: $name" ;;
			esac ;;
		esac
	done < "$TEST_TMP/$dir.log"
	if grep -qE "^(FAILED|OK)" "$TEST_TMP/$dir.log"; then :; else
		test_count=$((test_count + 1)); test_failed=$((test_failed + 1))
		echo "not ok $test_count - $dir kernel: the suite did not finish"
		tail -20 "$TEST_TMP/$dir.log" | sed 's/^/#   /'
	fi
	grep -q "^FAILED" "$TEST_TMP/$dir.log" && sed -n '/^====/,$p' "$TEST_TMP/$dir.log" | head -40 | sed 's/^/#   /'
	return 0
}

node_suite() {
	local out pass fail
	out=$(cd "$SRCDIR" && node --test --test-reporter=tap runners/node/ 2>&1)
	pass=$(echo "$out" | sed -n 's/^# pass \([0-9]*\)$/\1/p')
	fail=$(echo "$out" | sed -n 's/^# fail \([0-9]*\)$/\1/p')
	test_count=$((test_count + 1))
	if [ -n "$pass" ] && [ "$fail" = 0 ] && [ "$pass" -gt 0 ]; then
		echo "ok $test_count - node kernel: $pass tests"
	else
		test_failed=$((test_failed + 1))
		echo "not ok $test_count - node kernel: ${pass:-?} passed, ${fail:-?} failed"
		echo "$out" | grep -E "not ok|Error" | head -20 | sed 's/^/#   /'
	fi
}

py_suite python
py_suite bash
py_suite session
if command -v node >/dev/null; then node_suite; else
	test_count=$((test_count + 1)); echo "ok $test_count # SKIP node kernel (node is not installed)"
fi
test_expect_success NODE 'a lint the kernel cannot apply is refused by name, never ignored (node, bash)' '
	echo "{\"lint\": {\"deny_calls\": [\"eval\"]}}" > lint.json &&
	for l in node bash; do
		out=$("$WARD" exec --lang $l --json --policy lint.json -c "echo ran" 2>&1); rc=$?
		expect_eq "$rc" 1 && expect_eq "$(echo "$out" | ward_json error.name)" PolicyError &&
		expect_contains "$(echo "$out" | ward_json error.value)" "lint.deny_calls: the $l kernel cannot apply lint" &&
		! expect_contains "$(echo "$out" | ward_json stdout)" ran >/dev/null || exit 1
	done
'
test_done
