#!/bin/bash
# Files out of executions over HTTP: a one-shot's artifacts come back
# inline (base64) within a cap it states, the operator's cap winning over
# the client's; what does not fit, links and special files are listed as
# skipped and never read; a session call lists the files it created or
# changed, and only those.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve-lib.sh"

A=()
if [ -z "${prereq_missing[SERVE]:-}" ]; then
	printf '{"artifacts_inline_max": 1000}\n' > "$D/serve.json"
	A=(-H "Authorization: Bearer $("$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes sessions,execute,files --json | key_of)")
	start_daemon --config "$D/serve.json"
fi

# py CODE EXTRA: a python one-shot of CODE (a file's text) with the JSON
# object EXTRA's keys added
py() {
	python3 -c 'import json, sys
d = {"language": "python", "code": sys.argv[1]}
d.update(json.loads(sys.argv[2]))
print(json.dumps(d))' "$1" "$2" > req.json &&
	api POST /v1/executions "${A[@]}" -d @req.json
}
# art ANSWER PATH KEY: that artifact's KEY (null when it has none)
art() { field "$1" "[a.get(\"$3\") for a in d[\"artifacts\"] if a[\"path\"] == \"$2\"][0]"; }
skipped() { field "$1" "[s[\"reason\"] for s in d[\"artifacts_skipped\"] if s[\"path\"] == \"$2\"]"; }
WRITE='
import os
open("small.txt", "w").write("hello\n")
open("mid.bin", "wb").write(bytes(range(256)) * 2)
os.makedirs("sub", exist_ok=True)
open("sub/big.bin", "wb").write(b"z" * 5000)
'

test_expect_success SERVE 'inline: each file that fits comes back in base64, and the cap is stated' '
	r=$(py "$WRITE" "{\"artifacts\": {\"inline\": true, \"max_bytes\": 600}}") &&
	expect_eq "$(code "$r")" 200 && expect_eq "$(field "$r" "d[\"status\"]")" ok &&
	expect_eq "$(field "$r" "d[\"artifacts_inline_max\"]")" 600 &&
	expect_eq "$(art "$r" small.txt content)" "$(printf "hello\n" | base64)" &&
	expect_eq "$(art "$r" small.txt size)" 6 &&
	expect_eq "$(field "$r" "[a for a in d[\"artifacts\"] if a[\"path\"] == \"mid.bin\"][0].get(\"content\", \"\")" | base64 -d | sha256sum | cut -c1-64)" "$(art "$r" mid.bin sha256)" &&
	expect_eq "$(art "$r" sub/big.bin content)" null &&
	expect_eq "$(art "$r" sub/big.bin size)" 5000 &&
	expect_contains "$(skipped "$r" sub/big.bin)" "content not inline"
'
test_expect_success SERVE 'the cap holds in all: files past what is left are listed without content' '
	r=$(py "$WRITE" "{\"artifacts\": {\"inline\": true, \"max_bytes\": 520}}") &&
	n=$(field "$r" "len([a for a in d[\"artifacts\"] if \"content\" in a])") &&
	total=$(field "$r" "sum(a[\"size\"] for a in d[\"artifacts\"] if \"content\" in a)") &&
	expect_eq "$(field "$r" "len(d[\"artifacts\"])")" 3 &&
	[ "$n" -ge 1 ] && [ "$total" -le 520 ] &&
	expect_eq "$(field "$r" "len([s for s in d[\"artifacts_skipped\"] if \"not inline\" in s[\"reason\"]])")" $((3 - n))
'
test_expect_success SERVE 'the operator cap wins over the client: asked for more, given the operator cap' '
	r=$(py "$WRITE" "{\"artifacts\": {\"inline\": true, \"max_bytes\": 100000000}}") &&
	expect_eq "$(field "$r" "d[\"artifacts_inline_max\"]")" 1000 &&
	expect_eq "$(art "$r" sub/big.bin content)" null &&
	r=$(py "$WRITE" "{\"artifacts\": {\"inline\": true}}") &&
	expect_eq "$(field "$r" "d[\"artifacts_inline_max\"]")" 1000 &&
	expect_eq "$(art "$r" mid.bin size)" 512 &&
	[ "$(art "$r" mid.bin content)" != null ]
'
test_expect_success SERVE 'without inline: no content and no cap in the verdict' '
	r=$(py "$WRITE" "{}") && expect_eq "$(art "$r" small.txt content)" null &&
	expect_eq "$(field "$r" "\"artifacts_inline_max\" in d")" false &&
	r=$(py "$WRITE" "{\"artifacts\": {\"inline\": false}}") && expect_eq "$(art "$r" small.txt content)" null
'
test_expect_success SERVE 'links and special files are never read: listed as skipped, no content' '
	r=$(py "import os
os.symlink(\"/etc/hostname\", \"link\")
os.symlink(\"small.txt\", \"inner\")
open(\"small.txt\", \"w\").write(\"x\")
os.mkfifo(\"fifo\")" "{\"artifacts\": {\"inline\": true, \"max_bytes\": 1000}}") &&
	expect_eq "$(field "$r" "sorted(a[\"path\"] for a in d[\"artifacts\"])")" "[\"small.txt\"]" &&
	expect_contains "$(skipped "$r" link)" "symbolic link" &&
	expect_contains "$(skipped "$r" inner)" "symbolic link" &&
	expect_contains "$(skipped "$r" fifo)" "special file"
'
test_expect_success SERVE 'an input left unchanged is no artifact; one the program changed is' '
	r=$(py "open(\"b.txt\", \"a\").write(\"!\")" "{\"files\": [{\"path\": \"a.txt\", \"content\": \"A\"}, {\"path\": \"b.txt\", \"content\": \"B\"}], \"artifacts\": {\"inline\": true}}") &&
	expect_eq "$(field "$r" "[a[\"path\"] for a in d[\"artifacts\"]]")" "[\"b.txt\"]" &&
	expect_eq "$(art "$r" b.txt content)" "$(printf "B!" | base64)"
'
test_expect_success SERVE 'bad artifacts fields are refused by name' '
	r=$(py 1 "{\"artifacts\": {\"inline\": \"yes\"}}") && expect_eq "$(code "$r")" 400 &&
	expect_eq "$(field "$r" "d[\"error\"][\"field\"]")" artifacts.inline &&
	r=$(py 1 "{\"artifacts\": {\"max_bytes\": -5}}") && expect_eq "$(field "$r" "d[\"error\"][\"field\"]")" artifacts.max_bytes &&
	r=$(py 1 "{\"artifacts\": {\"dir\": \"/tmp\"}}") && expect_eq "$(field "$r" "d[\"error\"][\"field\"]")" artifacts.dir &&
	r=$(api POST /v1/executions "${A[@]}" -d "{\"command\": [\"true\"], \"artifacts\": {\"inline\": true}}") &&
	expect_eq "$(field "$r" "d[\"error\"][\"field\"]")" artifacts.inline
'

sx() {
	python3 -c 'import json, sys; print(json.dumps({"code": sys.argv[1]}))' "$2" > sreq.json &&
	api POST "/v1/sessions/$1/execute" "${A[@]}" -d @sreq.json
}
paths() { field "$1" "sorted(a[\"path\"] for a in d[\"artifacts\"])"; }

test_expect_success SERVE 'a session call lists the files it created or changed, and only those' '
	S=$(field "$(api POST /v1/sessions "${A[@]}" -d "{}")" "d[\"id\"]") && echo "$S" > "$D/S" &&
	r=$(sx "$S" "open(\"a.txt\", \"w\").write(\"1\")
open(\"b.txt\", \"w\").write(\"2\")") &&
	expect_eq "$(paths "$r")" "[\"a.txt\", \"b.txt\"]" &&
	expect_eq "$(art "$r" a.txt sha256)" "$(printf 1 | sha256sum | cut -c1-64)" &&
	expect_eq "$(art "$r" a.txt mime_type)" text/plain && expect_eq "$(art "$r" a.txt content)" null &&
	r=$(sx "$S" "open(\"a.txt\", \"a\").write(\"1\")") && expect_eq "$(paths "$r")" "[\"a.txt\"]" &&
	expect_eq "$(art "$r" a.txt size)" 2 &&
	r=$(sx "$S" "x = 1") && expect_eq "$(paths "$r")" "[]" &&
	r=$(sx "$S" "import os
os.makedirs(\"d/e\", exist_ok=True)
open(\"d/e/c.png\", \"wb\").write(b\"p\")
os.rename(\"b.txt\", \"d/b2.txt\")") &&
	expect_eq "$(paths "$r")" "[\"d/b2.txt\", \"d/e/c.png\"]"
'
S=$(cat "$D/S" 2>/dev/null)
test_expect_success SERVE 'a session call: a file uploaded before it is not its artifact; links are skipped' '
	api PUT "/v1/sessions/$S/files?path=up.txt" "${A[@]}" --data-binary up > /dev/null &&
	r=$(sx "$S" "import os
os.symlink(\"/etc/passwd\", \"lnk\")") &&
	expect_eq "$(paths "$r")" "[]" && expect_contains "$(skipped "$r" lnk)" "symbolic link" &&
	r=$(sx "$S" "1") && expect_eq "$(field "$r" "d[\"artifacts_skipped\"]")" "[]"
'
test_expect_success SERVE 'a session call: the count cap holds' '
	r=$(sx "$S" "for i in range(150): open(\"n%d\" % i, \"w\").write(\"x\")") &&
	expect_eq "$(field "$r" "len(d[\"artifacts\"])")" 100 &&
	expect_eq "$(field "$r" "len([s for s in d[\"artifacts_skipped\"] if \"count cap\" in s[\"reason\"]])")" 50
'
test_expect_success SERVE 'a function call in a session lists its files too' '
	printf "def make(name):\n    open(name, \"w\").write(name)\n    return name\n" > tool.py &&
	python3 -c "import json; print(json.dumps({\"code\": open(\"tool.py\").read(), \"function\": \"make\", \"args\": [\"made.txt\"]}))" > creq.json &&
	r=$(api POST "/v1/sessions/$S/execute" "${A[@]}" -d @creq.json) &&
	expect_eq "$(field "$r" "d[\"value\"]")" made.txt && expect_eq "$(paths "$r")" "[\"made.txt\"]"
'
test_done
