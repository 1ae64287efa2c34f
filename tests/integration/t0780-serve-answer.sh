#!/bin/bash
# A final JSON is written as the client reads it, never held whole: a
# one-shot that prints 16 MiB of control characters at a 16M output cap has
# a ~200 MB answer (each character escapes to six bytes, in stdout and in
# the cell's outputs), and the daemon's peak memory (VmHWM) grows by far
# less than that, answered whole or streamed as NDJSON (the verdict line).
. "$(dirname "$0")/../lib.sh"

. "$(dirname "$0")/serve-lib.sh"

command -v python3 >/dev/null || test_set_prereq_missing SERVE "python3 is not installed"
"$WARD" exec --lang python -c "1" > /dev/null 2>&1 ||
	test_set_prereq_missing SERVE "ward exec --lang python does not run here"
A=()
# Under AddressSanitizer freed memory waits in a quarantine and every
# allocation carries redzones: a small quarantine and three times the
# allowance. The release pass holds the bound exactly.
LIMIT_KB=120000
if [ -n "${ASAN_OPTIONS:-}" ]; then
	export ASAN_OPTIONS="$ASAN_OPTIONS:quarantine_size_mb=16"
	LIMIT_KB=360000
fi

if [ -z "${prereq_missing[SERVE]:-}" ]; then
	"$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes execute --json | key_of > "$D/k"
	echo '{"limits": {"output": "16M", "memory": "1G", "timeout": "60s"}}' > "$D/policy.json"
	start_daemon --policy "$D/policy.json"
	A=(-H "Authorization: Bearer $(cat "$D/k")")
fi
hwm() { awk '/^VmHWM/ {print $2}' "/proc/$(cat "$D/pid")/status"; }
CODE='{"language": "python", "code": "import sys\nsys.stdout.write(\"\\x01\" * (16 << 20))"}'

# the daemon's peak grows by less than 120 MB (it was 246 MB whole, 443 MB streamed)
test_expect_success SERVE 'a 200 MB answer, whole: the daemon peaks far below it' '
	h0=$(hwm) &&
	curl -sS -m 120 --unix-socket "$SOCK" "${A[@]}" -d "$CODE" http://w/v1/executions -o out.json &&
	h1=$(hwm) && echo "# VmHWM $h0 kB -> $h1 kB, answer $(stat -c %s out.json) bytes" &&
	python3 -c "import json, sys; d = json.load(open(\"out.json\")); assert d[\"status\"] == \"ok\" and d[\"stdout\"] == \"\\x01\" * (16 << 20), d.get(\"status\")" &&
	[ "$(stat -c %s out.json)" -gt 190000000 ] && [ $((h1 - h0)) -lt $LIMIT_KB ]
'
test_expect_success SERVE 'the same streamed: the verdict line is written as it is read' '
	h0=$(hwm) &&
	curl -sS -m 120 --unix-socket "$SOCK" "${A[@]}" -H "Accept: application/x-ndjson" -d "$CODE" \
		http://w/v1/executions -o out.ndjson &&
	h1=$(hwm) && echo "# VmHWM $h0 kB -> $h1 kB, stream $(stat -c %s out.ndjson) bytes" &&
	python3 -c "import json; v = [json.loads(l) for l in open(\"out.ndjson\")][-1]; assert v[\"event\"] == \"verdict\" and v[\"stdout\"] == \"\\x01\" * (16 << 20)" &&
	[ $((h1 - h0)) -lt $LIMIT_KB ]
'
test_done
