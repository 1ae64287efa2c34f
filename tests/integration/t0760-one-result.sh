#!/bin/bash
# One result: the same cell and the same policy give the same verdict and
# the same JSON through `ward exec --json` and `POST /v1/executions` (both
# use lib/kernel/result.c). Ids, timings and measured usage differ by
# nature and are left out of the comparison; everything else must match.
. "$(dirname "$0")/../lib.sh"

. "$(dirname "$0")/serve-lib.sh"
AUTH=()

if [ -z "${prereq_missing[SERVE]:-}" ]; then
	"$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes execute --json | key_of > "$D/k"
	start_daemon
	AUTH=(-H "Authorization: Bearer $(cat "$D/k")")
fi

# both NAME POLICY CODE: runs CODE under POLICY (a JSON object) both ways;
# the normalised verdicts land in NAME.cli and NAME.http.
both() {
	local name=$1 policy=$2 code=$3
	printf '%s' "$policy" > "$name.policy"
	"$WARD" exec --json --lang python --policy "$name.policy" -c "$code" > "$name.cli.raw"
	python3 -c 'import json, sys
print(json.dumps({"language": "python", "code": sys.argv[1], "policy": json.loads(sys.argv[2])}))' \
		"$code" "$policy" > "$name.req"
	curl -sS -m 60 --unix-socket "$SOCK" "${AUTH[@]}" --data-binary @"$name.req" \
		http://w/v1/executions > "$name.http.raw"
	for side in cli http; do
		python3 -c 'import json, sys
v = json.load(open(sys.argv[1]))
for k in ("execution_id", "sandbox_id"):
    v.pop(k, None)
v["usage"] = {"output_bytes": v.get("usage", {}).get("output_bytes")}
print(json.dumps(v, sort_keys=True, indent=1))' "$name.$side.raw" > "$name.$side" || return 1
	done
}
same() {
	if ! cmp -s "$1.cli" "$1.http"; then
		diff -u "$1.cli" "$1.http" | head -40
		return 1
	fi
}
field() { ward_json "$2" < "$1.cli"; }

test_expect_success SERVE 'ok: a stream, the same JSON both ways' '
	both ok "{}" "print(\"hi\")" && same ok &&
	expect_eq "$(field ok status)" ok && expect_eq "$(field ok stdout)" hi
'
test_expect_success SERVE 'an error with its hint, the same JSON both ways' '
	both err "{}" "import nosuchmodule_ward" && same err &&
	expect_eq "$(field err status)" error && expect_eq "$(field err error.name)" ModuleNotFoundError
'
test_expect_success SERVE 'the last expression is a result, the same JSON both ways' '
	both last "{}" "x = 6
x * 7" && same last && expect_eq "$(field last results.0.text/plain)" 42
'
test_expect_success SERVE 'a PNG display_data, the same JSON both ways' '
	both png "{}" "class P:
    def __repr__(self):
        return \"P\"
    def _repr_png_(self):
        return b\"\\x89PNG\\r\\n\\x1a\\n\" + bytes(64)
display(P())" && same png &&
	expect_contains "$(python3 -c "import json; print(list(json.load(open(\"png.cli\"))[\"results\"][0]))")" image/png
'
test_expect_success SERVE 'output over a 1K cap is output_limit with OutputLimitError both ways' '
	both cap "{\"limits\": {\"output\": \"1K\"}}" "print(\"x\" * 5000)" && same cap &&
	expect_eq "$(field cap status)" output_limit && expect_eq "$(field cap error.name)" OutputLimitError &&
	expect_eq "$(field cap stdout_truncated)" true
'
test_expect_success SERVE 'a stderr flood under a 1K cap, the same JSON both ways' '
	both flood "{\"limits\": {\"output\": \"1K\"}}" "import sys
for i in range(2000): sys.stderr.write(\"e\" * 100 + \"\\n\")" && same flood &&
	expect_eq "$(field flood status)" output_limit &&
	expect_eq "$(python3 -c "import json; print(len(json.load(open(\"flood.cli\"))[\"stderr\"]))")" 1024
'
test_expect_success SERVE 'a timeout is TimeoutError with its value both ways' '
	both slow "{\"limits\": {\"timeout\": \"1s\"}}" "while True: pass" && same slow &&
	expect_eq "$(field slow status)" timeout && expect_eq "$(field slow error.name)" TimeoutError
'
# Without a cgroup (rootless, no delegation) memory is an rlimit: the cell
# raises MemoryError and the verdict is an error, the same both ways.
mem_status=memory_limit
"$WARD" run --json -- true | grep -q '"degraded":\[\]' || mem_status=error
test_expect_success SERVE "the memory limit is $mem_status both ways" '
	both mem "{\"limits\": {\"memory\": \"64M\"}}" "x = [bytearray(1 << 20) for _ in range(400)]" &&
	same mem && expect_eq "$(field mem status)" $mem_status
'
test_expect_success SERVE 'one path rule: a file named a..b is accepted both ways, a/../b refused both ways' '
	echo hi > host.txt &&
	"$WARD" exec --json --lang python --file "host.txt:a..b" -c "print(open(\"a..b\").read())" > dots.cli &&
	expect_eq "$(ward_json status < dots.cli)" ok &&
	r=$(api POST /v1/executions "${AUTH[@]}" -d "{\"language\": \"python\", \"code\": \"print(open(\\\"a..b\\\").read())\", \"files\": [{\"path\": \"a..b\", \"content\": \"hi\"}]}") &&
	expect_eq "$(code "$r")" 200 && expect_eq "$(body "$r" | ward_json status)" ok &&
	expect_eq "$(body "$r" | ward_json stdout)" hi &&
	! "$WARD" exec --json --lang python --file "host.txt:a/../b" -c 1 2> refused.err &&
	expect_contains "$(cat refused.err)" "inside /workspace" &&
	r=$(api POST /v1/executions "${AUTH[@]}" -d "{\"language\": \"python\", \"code\": \"1\", \"files\": [{\"path\": \"a/../b\", \"content\": \"hi\"}]}") &&
	expect_eq "$(code "$r")" 400 && expect_eq "$(body "$r" | ward_json error.field)" files.0
'

test_done
