#!/bin/bash
# `ward audit verify`: an intact log verifies; an edited, a deleted, a
# swapped and a truncated line are each reported at the right line with the
# right reason and exit 1; usage and I/O errors are exit 2. Until `ward
# serve` exists, the log comes from tests/audit-writer (lib/server/audit.c).
# A third-party check written from docs/audit.md alone accepts the same log.
. "$(dirname "$0")/../lib.sh"

AUDIT_WRITER=${WARD_BUILD:-$(dirname "$WARD")/..}/tests/audit-writer
[ -x "$AUDIT_WRITER" ] ||
	test_set_prereq_missing WRITER "tests/audit-writer is not built ($AUDIT_WRITER)"
# `ward audit` is dispatched by src/cli/main.c; an older ward does not know it.
if "$WARD" audit --help 2>&1 >/dev/null | grep -q "unknown command 'audit'"; then
	test_set_prereq_missing AUDIT "this ward has no 'audit' command yet"
fi

# The log: 100 records of the daemon's kinds, 4 threads at once.
[ -x "$AUDIT_WRITER" ] && "$AUDIT_WRITER" "$TEST_TMP/audit.log" 100 --threads 4 2>/dev/null

# verify_is FILE STATUS LINE: `ward audit verify FILE` exits STATUS, prints LINE.
verify_is() {
	local out rc
	out=$("$WARD" audit verify "$1" 2>&1)
	rc=$?
	expect_eq "$rc" "$2" && expect_eq "$out" "$3"
}

test_expect_success WRITER 'the writer creates the log with mode 0600, 100 lines' '
	expect_eq "$(stat -c %a audit.log)" 600 &&
	expect_eq "$(wc -l <audit.log)" 100
'
test_expect_success WRITER 'code and output are recorded by size and sha256 only' '
	! grep -q "print(sum" audit.log &&
	grep -q "\"code\":{\"sha256\":\"[0-9a-f]\{64\}\",\"size\":22}" audit.log
'
test_expect_success WRITER 'with full_text the text itself is kept too' '
	"$AUDIT_WRITER" full.log 5 --full-text 2>/dev/null &&
	grep -q "\"text\":\"print(sum(range(10)))\\\\n\"" full.log
'
test_expect_success WRITER,AUDIT 'an intact log verifies' '
	verify_is audit.log 0 "ok: 100 lines, chain intact"
'
test_expect_success WRITER,AUDIT 'a second writer continues the chain' '
	cp audit.log two.log &&
	"$AUDIT_WRITER" two.log 10 2>/dev/null &&
	verify_is two.log 0 "ok: 110 lines, chain intact"
'
test_expect_success WRITER,AUDIT 'an edited line is caught at its line' '
	sed "7s/\"tenant\":\"acme\"/\"tenant\":\"evil\"/" audit.log >edited.log &&
	! cmp -s audit.log edited.log &&
	verify_is edited.log 1 "line 7: hash does not match its content (edited)"
'
test_expect_success WRITER,AUDIT 'a deleted line is caught where it was' '
	sed 7d audit.log >deleted.log &&
	verify_is deleted.log 1 "line 7: seq 8 follows 6 (1 line deleted)"
'
test_expect_success WRITER,AUDIT 'two swapped lines are caught at the first' '
	awk "NR==7{held=\$0; next} {print} NR==8{print held}" audit.log >swapped.log &&
	expect_eq "$(sed -n 8p swapped.log)" "$(sed -n 7p audit.log)" &&
	verify_is swapped.log 1 "line 7: seq 8 follows 6 (reordered)"
'
test_expect_success WRITER,AUDIT 'a truncated last line is caught' '
	head -c -40 audit.log >truncated.log &&
	verify_is truncated.log 1 "line 100: truncated (the file does not end with a newline)"
'
test_expect_success WRITER,AUDIT 'a line that is not JSON is caught' '
	sed "50s/.*/oops/" audit.log >garbage.log &&
	{ "$WARD" audit verify garbage.log >out; expect_eq "$?" 1; } &&
	# the rest of the message is jansson'"'"'s, and varies with its version
	expect_contains "$(cat out)" "line 50: not valid JSON (" &&
	expect_eq "$(wc -l <out)" 1
'
test_expect_success WRITER,AUDIT,PYTHON 'an edit with its hash recomputed breaks the next line' '
	python3 - audit.log rewritten.log <<-\PY &&
	import hashlib, sys
	lines = open(sys.argv[1], "rb").read().split(b"\n")[:-1]
	line = lines[6].replace(b"\"tenant\":\"acme\"", b"\"tenant\":\"evil\"")
	body = line[:-75] + b"}"
	lines[6] = line[:-66] + hashlib.blake2b(body, digest_size=32).hexdigest().encode() + b"\"}"
	open(sys.argv[2], "wb").write(b"\n".join(lines) + b"\n")
	PY
	verify_is rewritten.log 1 "line 8: prev does not match line 7'"'"'s hash (a line before it was rewritten, deleted or reordered)"
'
test_expect_success WRITER,PYTHON 'a verifier written from docs/audit.md accepts the log' '
	python3 - audit.log <<-\PY
	import hashlib, json, sys
	prev, seq = "0" * 64, 0
	for n, raw in enumerate(open(sys.argv[1], "rb"), 1):
	    assert raw.endswith(b"\n"), n
	    line = raw[:-1]
	    assert line[-75:-66] == b",\"hash\":\"" and line.endswith(b"\"}"), n
	    rec = json.loads(line)
	    digest = hashlib.blake2b(line[:-75] + b"}", digest_size=32).hexdigest()
	    assert rec["hash"] == digest, (n, "edited")
	    assert rec["prev"] == prev and rec["seq"] == seq + 1, (n, "chain")
	    prev, seq = digest, rec["seq"]
	assert seq == 100
	PY
'
test_expect_success WRITER,AUDIT '--json reports the break as fields' '
	{ "$WARD" audit verify --json edited.log >out; expect_eq "$?" 1; } &&
	python3 -c "
import json
d = json.load(open(\"out\"))
assert d[\"ok\"] is False and d[\"bad_line\"] == 7 and d[\"lines\"] == 6, d
assert d[\"reason\"] == \"edited\" and d[\"last_seq\"] == 6, d
assert d[\"message\"] == \"line 7: hash does not match its content (edited)\", d
"
'
test_expect_success WRITER,AUDIT '--json of an intact log' '
	"$WARD" audit verify audit.log --json >out &&
	python3 -c "
import json
d = json.load(open(\"out\"))
last = json.loads(open(\"audit.log\").read().splitlines()[-1])
assert d[\"ok\"] is True and d[\"bad_line\"] is None and d[\"lines\"] == 100, d
assert d[\"last_seq\"] == 100 and d[\"last_hash\"] == last[\"hash\"], d
"
'
test_expect_success WRITER 'a writer refuses to extend a broken log and names the line' '
	head -c -40 audit.log >refused.log &&
	cp refused.log before.log &&
	! "$AUDIT_WRITER" refused.log 1 2>err &&
	expect_contains "$(cat err)" "audit: line 100 of '"'"'refused.log'"'"': truncated (the file does not end with a newline)" &&
	cmp -s before.log refused.log
'
test_expect_success AUDIT 'an empty log is intact' '
	: >empty.log &&
	verify_is empty.log 0 "ok: 0 lines, chain intact"
'
test_expect_success AUDIT 'a missing file is exit 2 with the reason' '
	verify_is missing.log 2 "ward: error: audit: unable to open '"'"'missing.log'"'"': No such file or directory"
'
test_expect_success AUDIT 'usage errors are exit 2' '
	{ "$WARD" audit verify 2>err; expect_eq "$?" 2; } &&
	expect_contains "$(cat err)" "verify needs a FILE" &&
	{ "$WARD" audit frobnicate 2>err; expect_eq "$?" 2; } &&
	expect_contains "$(cat err)" "unknown subcommand '"'"'frobnicate'"'"'" &&
	{ "$WARD" audit verify a b 2>err; expect_eq "$?" 2; } &&
	expect_contains "$(cat err)" "unexpected argument '"'"'b'"'"'" &&
	{ "$WARD" audit verify --genesis 2>err; expect_eq "$?" 2; } &&
	expect_contains "$(cat err)" "--genesis needs a value" &&
	{ "$WARD" audit verify --genesis xyz empty.log 2>err; expect_eq "$?" 2; } &&
	expect_contains "$(cat err)" "genesis: expected 64 hex digits"
'
test_expect_success AUDIT 'ward audit --help describes verify' '
	"$WARD" audit --help >out &&
	expect_contains "$(cat out)" "usage: ward audit verify FILE [--json] [--genesis HEX]"
'
test_done
