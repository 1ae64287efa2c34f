#!/bin/bash
# `ward serve` sessions: real HTTP against the real daemon — stateful
# execution in named contexts, commands, files, packages that persist,
# cancel, timeouts, limits, TTL, tenant isolation, quotas, and recovery
# after the daemon is killed.
. "$(dirname "$0")/../lib.sh"

/usr/bin/python3 -m pip --version > /dev/null 2>&1 || test_set_prereq_missing PIP "python3-pip is not installed"
command -v npm > /dev/null 2>&1 || test_set_prereq_missing NPM "npm is not installed"

. "$(dirname "$0")/serve-lib.sh"
CONF=$D/serve.json
marker=$((RANDOM * 1000 + $$ % 1000 + 8000000))

A=() B=() NOFILES=() SMALL=() TINY=()
if [ -z "${prereq_missing[SERVE]:-}" ]; then
	cat > "$CONF" <<-EOF
	{"max_sessions_per_tenant": 6, "session_ttl": 60,
	 "tenants": {"small": {"max_sessions_per_tenant": 1, "tenant_memory": "300M"},
	             "tiny": {"max_per_tenant": 1}},
	 "max_file": "1M"}
	EOF
	A=(-H "Authorization: Bearer $("$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes sessions,files,execute,admin --json | key_of)")
	B=(-H "Authorization: Bearer $("$WARD" keys add --keys-file "$KEYS" --tenant beta --scopes sessions,files --json | key_of)")
	NOFILES=(-H "Authorization: Bearer $("$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes sessions --json | key_of)")
	SMALL=(-H "Authorization: Bearer $("$WARD" keys add --keys-file "$KEYS" --tenant small --scopes sessions,execute --json | key_of)")
	TINY=(-H "Authorization: Bearer $("$WARD" keys add --keys-file "$KEYS" --tenant tiny --scopes sessions,execute --json | key_of)")
	start_daemon --config "$CONF"
fi
new_session() { r=$(api POST /v1/sessions "${A[@]}" -d "${1:-{\}}") && [ "$(code "$r")" = 201 ] && field "$r" 'd["id"]'; }
ex() { api POST "/v1/sessions/$1/execute" "${A[@]}" -d "$2"; }
# session_is ID STATUS: the session's status now, for wait_for
session_is() { [ "$(field "$(api GET "/v1/sessions/$1" "${A[@]}")" 'd["status"]')" = "$2" ]; }
running() { pgrep -f "^sleep $1" > /dev/null; }

test_expect_success SERVE 'a session is created, listed and read by its tenant' '
	S=$(new_session) && echo "$S" > "$D/S" && expect_contains "$S" se_ &&
	r=$(api GET "/v1/sessions/$S" "${A[@]}") && expect_eq "$(code "$r")" 200 &&
	expect_eq "$(field "$r" "d[\"id\"]")" "$S" && expect_eq "$(field "$r" "d[\"image\"]")" host &&
	r=$(api GET /v1/sessions "${A[@]}") &&
	expect_eq "$(field "$r" "[s[\"id\"] for s in d[\"sessions\"]].count(\"$S\")")" 1
'
S=$(cat "$D/S" 2>/dev/null)
test_expect_success SERVE 'variables persist across calls; named contexts are separate' '
	r=$(ex "$S" "{\"code\": \"x = 41\"}") && expect_eq "$(field "$r" "d[\"status\"]")" ok &&
	expect_eq "$(field "$r" "d[\"context_new\"]")" true &&
	r=$(ex "$S" "{\"code\": \"print(x + 1)\"}") && expect_eq "$(field "$r" "d[\"stdout\"]")" 42 &&
	expect_eq "$(field "$r" "d[\"context_new\"]")" false &&
	expect_eq "$(field "$r" "d[\"session_id\"]")" "$S" &&
	r=$(ex "$S" "{\"code\": \"print(x)\", \"context\": \"other\"}") &&
	expect_eq "$(field "$r" "d[\"status\"]")" error &&
	expect_eq "$(field "$r" "d[\"error\"][\"name\"]")" NameError &&
	r=$(api GET "/v1/sessions/$S" "${A[@]}") &&
	expect_eq "$(field "$r" "sorted(c[\"context\"] for c in d[\"contexts\"])")" "[\"default\", \"other\"]"
'
test_expect_success SERVE 'bash and node contexts live in the same session and see the same files' '
	r=$(ex "$S" "{\"language\": \"bash\", \"code\": \"cd /workspace; v=7; echo shared > f.txt\"}") &&
	expect_eq "$(field "$r" "d[\"status\"]")" ok &&
	r=$(ex "$S" "{\"language\": \"bash\", \"code\": \"echo \$v\"}") && expect_eq "$(field "$r" "d[\"stdout\"]")" 7 &&
	r=$(ex "$S" "{\"code\": \"print(open(\\\"/workspace/f.txt\\\").read().strip())\"}") &&
	expect_eq "$(field "$r" "d[\"stdout\"]")" shared
'
test_expect_success SERVE,NODE 'a node context keeps its globals' '
	r=$(ex "$S" "{\"language\": \"node\", \"code\": \"let n = 5\"}") && expect_eq "$(field "$r" "d[\"status\"]")" ok &&
	r=$(ex "$S" "{\"language\": \"node\", \"code\": \"console.log(n * 2)\"}") && expect_eq "$(field "$r" "d[\"stdout\"]")" 10
'
test_expect_success SERVE 'commands: shell string or argv, env, cwd, exit status and streams' '
	r=$(api POST "/v1/sessions/$S/commands" "${A[@]}" -d "{\"cmd\": \"echo out; echo err >&2; exit 3\"}") &&
	expect_eq "$(code "$r")" 200 && expect_eq "$(field "$r" "d[\"status\"]")" error &&
	expect_eq "$(field "$r" "d[\"exit_code\"]")" 3 && expect_eq "$(field "$r" "d[\"stdout\"]")" out &&
	expect_eq "$(field "$r" "d[\"stderr\"]")" err &&
	api POST "/v1/sessions/$S/commands" "${A[@]}" -d "{\"cmd\": [\"mkdir\", \"-p\", \"sub\"]}" > /dev/null &&
	r=$(api POST "/v1/sessions/$S/commands" "${A[@]}" -d "{\"cmd\": [\"sh\", \"-c\", \"echo \$GREETING; pwd\"], \"env\": {\"GREETING\": \"hello\"}, \"cwd\": \"sub\"}") &&
	expect_eq "$(field "$r" "d[\"status\"]")" ok &&
	expect_eq "$(field "$r" "d[\"stdout\"]")" "hello
/workspace/sub" &&
	r=$(api POST "/v1/sessions/$S/commands" "${A[@]}" -d "{\"cmd\": [\"/nonexistent\"]}") &&
	expect_eq "$(field "$r" "d[\"status\"]")" error && expect_eq "$(field "$r" "d[\"exit_code\"]")" 127 &&
	r=$(api POST "/v1/sessions/$S/commands" "${A[@]}" -d "{\"cmd\": \"sleep 5\", \"timeout\": 0.5}") &&
	expect_eq "$(field "$r" "d[\"status\"]")" timeout && expect_eq "$(field "$r" "d[\"limit\"][\"name\"]")" timeout
'
test_expect_success SERVE 'bad command requests are 400s naming the field' '
	r=$(api POST "/v1/sessions/$S/commands" "${A[@]}" -d "{\"cmd\": 3}") &&
	expect_eq "$(code "$r")" 400 && expect_eq "$(field "$r" "d[\"error\"][\"field\"]")" cmd &&
	r=$(api POST "/v1/sessions/$S/commands" "${A[@]}" -d "{\"cmd\": \"true\", \"env\": {\"A=B\": \"x\"}}") &&
	expect_eq "$(field "$r" "d[\"error\"][\"field\"]")" env &&
	r=$(api POST "/v1/sessions/$S/commands" "${A[@]}" -d "{\"cmd\": \"true\", \"timeout\": 99999}") &&
	expect_eq "$(field "$r" "d[\"error\"][\"field\"]")" timeout &&
	r=$(api POST "/v1/sessions/$S/execute" "${A[@]}" -d "{\"code\": \"1\", \"context\": \"../x\"}") &&
	expect_eq "$(field "$r" "d[\"error\"][\"field\"]")" context &&
	r=$(api POST "/v1/sessions/$S/execute" "${A[@]}" -d "{\"code\": \"1\", \"language\": \"cobol\"}") &&
	expect_eq "$(field "$r" "d[\"error\"][\"field\"]")" language &&
	r=$(api POST "/v1/sessions" "${A[@]}" -d "{\"ttl\": -1}") && expect_eq "$(field "$r" "d[\"error\"][\"field\"]")" ttl &&
	r=$(api POST "/v1/sessions" "${A[@]}" -d "{\"image\": \"ubuntu\"}") && expect_eq "$(field "$r" "d[\"error\"][\"field\"]")" image &&
	r=$(api POST "/v1/sessions" "${A[@]}" -d "{\"policy\": {\"mounts\": []}}") &&
	expect_eq "$(field "$r" "d[\"error\"][\"field\"]")" policy.mounts
'
test_expect_success SERVE 'session settings are checked at start: the TTLs, the state dir' '
	! "$WARD" serve --socket "$TEST_TMP/x.sock" --max-session-ttl 48h > out 2>&1 &&
	expect_contains "$(cat out)" "max-session-ttl: at most 24h" &&
	! "$WARD" serve --socket "$TEST_TMP/x.sock" --session-ttl 2h --max-session-ttl 1h > out 2>&1 &&
	expect_contains "$(cat out)" "session-ttl (2h) is above max-session-ttl (1h)" &&
	! "$WARD" serve --socket "$TEST_TMP/x.sock" --keys-file "$KEYS" --state-dir relative/dir > out 2>&1 &&
	expect_contains "$(cat out)" "state-dir: '"'"'relative/dir'"'"': expected an absolute path" &&
	[ ! -e "$TEST_TMP/x.sock" ]
'
test_expect_success SERVE 'a background command runs on; its status and output are read; it is killed' '
	r=$(api POST "/v1/sessions/$S/commands" "${A[@]}" -d "{\"cmd\": \"echo started; exec sleep $marker\", \"background\": true}") &&
	expect_eq "$(code "$r")" 202 && C=$(field "$r" "d[\"command_id\"]") &&
	wait_for "the command to run" "running $marker" &&
	r=$(api GET "/v1/sessions/$S/commands/$C" "${A[@]}") && expect_eq "$(field "$r" "d[\"state\"]")" running &&
	expect_eq "$(field "$r" "d[\"stdout\"]")" started &&
	r=$(api DELETE "/v1/sessions/$S/commands/$C" "${A[@]}") && expect_eq "$(code "$r")" 200 &&
	wait_for "the command to be killed" "[ \"\$(field \"\$(api GET /v1/sessions/$S/commands/$C \"\${A[@]}\")\" \"d[\\\"status\\\"]\")\" = killed ]" &&
	expect_eq "$(pgrep -f "^sleep $marker" | wc -l)" 0 &&
	r=$(api GET "/v1/sessions/$S/commands/c999" "${A[@]}") && expect_eq "$(code "$r")" 404 &&
	r=$(api POST "/v1/sessions/$S/commands" "${A[@]}" -d "{\"cmd\": [\"/nonexistent\"], \"background\": true}") &&
	expect_eq "$(code "$r")" 400 && expect_contains "$(field "$r" "d[\"error\"][\"message\"]")" "could not be started: FileNotFoundError"
'
test_expect_success SERVE 'files: upload, download, list with size, mode and mtime, delete' '
	printf "a,b\n1,2\n" > data.csv &&
	r=$(api PUT "/v1/sessions/$S/files?path=in/data.csv&mode=0600" "${A[@]}" --data-binary @data.csv) &&
	expect_eq "$(code "$r")" 201 && expect_eq "$(field "$r" "d[\"sha256\"]")" "$(sha256sum data.csv | cut -d" " -f1)" &&
	r=$(ex "$S" "{\"code\": \"import pandas as pd; print(pd.read_csv(\\\"in/data.csv\\\").b.sum()); open(\\\"out.txt\\\", \\\"w\\\").write(\\\"made\\\")\"}") &&
	expect_eq "$(field "$r" "d[\"stdout\"]")" 2 &&
	curl -sS --unix-socket "$SOCK" "${A[@]}" -o got.txt "http://w/v1/sessions/$S/files?path=/workspace/out.txt" &&
	expect_eq "$(cat got.txt)" made &&
	r=$(api GET "/v1/sessions/$S/files" "${A[@]}") &&
	expect_eq "$(field "$r" "[[e[\"type\"], e[\"size\"], e[\"mode\"]] for e in d[\"entries\"] if e[\"path\"] == \"in/data.csv\"][0]")" "[\"file\", 8, \"0600\"]" &&
	expect_eq "$(field "$r" "all(e[\"mtime\"] > 1e9 for e in d[\"entries\"])")" true &&
	r=$(api DELETE "/v1/sessions/$S/files?path=in" "${A[@]}") && expect_eq "$(code "$r")" 200 &&
	r=$(api GET "/v1/sessions/$S/files?path=in/data.csv" "${A[@]}") && expect_eq "$(code "$r")" 404
'
test_expect_success SERVE 'files: no way out of the workspace (.., absolute, symlinks, mounts); size cap; scope' '
	for p in ../etc/passwd /etc/passwd a/../../x "a//b" ""; do
		r=$(api PUT "/v1/sessions/$S/files?path=$p" "${A[@]}" -d x) && expect_eq "$(code "$r")" 400 || exit 1
	done
	api POST "/v1/sessions/$S/commands" "${A[@]}" -d "{\"cmd\": \"ln -s /etc/passwd pw; ln -s / rootdir; ln -s /tmp tmpl\"}" > /dev/null &&
	r=$(api GET "/v1/sessions/$S/files?path=pw" "${A[@]}") && expect_eq "$(code "$r")" 400 &&
	expect_eq "$(field "$r" "d[\"error\"][\"code\"]")" path_not_allowed &&
	r=$(api PUT "/v1/sessions/$S/files?path=rootdir/etc/evil" "${A[@]}" -d x) && expect_eq "$(code "$r")" 400 &&
	r=$(api PUT "/v1/sessions/$S/files?path=pw" "${A[@]}" -d x) && expect_eq "$(code "$r")" 400 &&
	r=$(api GET "/v1/sessions/$S/files?path=tmpl" "${A[@]}") && expect_eq "$(code "$r")" 400 &&
	expect_eq "$(head -c 5 /etc/passwd)" "root:" &&
	head -c 1100000 /dev/zero > big &&
	r=$(api PUT "/v1/sessions/$S/files?path=big" "${A[@]}" --data-binary @big) && expect_eq "$(code "$r")" 413 &&
	r=$(api GET "/v1/sessions/$S/files" "${NOFILES[@]}") && expect_eq "$(code "$r")" 403 &&
	expect_eq "$(field "$r" "d[\"error\"][\"field\"]")" scope &&
	for p in "files/" "files/x" "execute/" "commands/"; do
		r=$(api GET "/v1/sessions/$S/$p" "${NOFILES[@]}") && expect_eq "$(code "$r")" 404 || exit 1
		r=$(api PUT "/v1/sessions/$S/$p?path=sneak" "${NOFILES[@]}" -d x) && expect_eq "$(code "$r")" 404 || exit 1
	done
'
test_expect_success SERVE 'an uploaded file belongs to the sandbox user, who can change it' '
	api PUT "/v1/sessions/$S/files?path=mine.txt" "${A[@]}" -d v1 > /dev/null &&
	r=$(ex "$S" "{\"code\": \"import os; open(\\\"mine.txt\\\", \\\"a\\\").write(\\\"+\\\"); print(os.stat(\\\"mine.txt\\\").st_uid == os.getuid())\"}") &&
	expect_eq "$(field "$r" "d[\"stdout\"]")" True
'
test_expect_success SERVE,PIP 'a package installed with pip --user is importable in the next call' '
	python3 - <<-\EOF &&
	import zipfile
	with zipfile.ZipFile("wardpkg-1.0-py3-none-any.whl", "w") as z:
	    z.writestr("wardpkg/__init__.py", "VALUE = 42\n")
	    z.writestr("wardpkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: wardpkg\nVersion: 1.0\n")
	    z.writestr("wardpkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
	    z.writestr("wardpkg-1.0.dist-info/RECORD", "")
	EOF
	r=$(api PUT "/v1/sessions/$S/files?path=wardpkg-1.0-py3-none-any.whl" "${A[@]}" --data-binary @wardpkg-1.0-py3-none-any.whl) &&
	expect_eq "$(code "$r")" 201 &&
	r=$(api POST "/v1/sessions/$S/commands" "${A[@]}" -d "{\"cmd\": \"python3 -m pip install --user --no-index wardpkg-1.0-py3-none-any.whl\", \"timeout\": 25}") &&
	expect_eq "$(field "$r" "d[\"status\"]")" ok &&
	r=$(ex "$S" "{\"code\": \"import wardpkg; print(wardpkg.VALUE)\"}") && expect_eq "$(field "$r" "d[\"stdout\"]")" 42
'
test_expect_success SERVE,NPM,NODE 'a package installed with npm into the workspace is requirable in the next call' '
	r=$(api PUT "/v1/sessions/$S/files?path=pkgs/wardnpm/package.json" "${A[@]}" -d "{\"name\": \"wardnpm\", \"version\": \"1.0.0\", \"main\": \"index.js\"}") &&
	r=$(api PUT "/v1/sessions/$S/files?path=pkgs/wardnpm/index.js" "${A[@]}" -d "module.exports = { value: 43 };") &&
	r=$(api POST "/v1/sessions/$S/commands" "${A[@]}" -d "{\"cmd\": \"npm install --offline --no-audit --no-fund ./pkgs/wardnpm\", \"timeout\": 25}") &&
	expect_eq "$(field "$r" "d[\"status\"]")" ok &&
	r=$(ex "$S" "{\"language\": \"node\", \"code\": \"console.log(require(\\\"wardnpm\\\").value)\"}") &&
	expect_eq "$(field "$r" "d[\"stdout\"]")" 43
'
test_expect_success SERVE 'a second call while one runs is 409; DELETE of the execution kills it quickly; the session stays usable' '
	ex "$S" "{\"code\": \"y = 5\"}" > /dev/null &&
	curl -sS -N -m 20 --unix-socket "$SOCK" "${A[@]}" -H "Accept: application/x-ndjson" \
		-d "{\"code\": \"print(1, flush=True)\nwhile True: pass\"}" "http://w/v1/sessions/$S/execute" > stream.ndjson &
	cpid=$!
	wait_for "the call to run" "has_event stream.ndjson stream" &&
	E=$(head -n1 stream.ndjson | ward_json id) &&
	r=$(ex "$S" "{\"code\": \"1\"}") && expect_eq "$(code "$r")" 409 &&
	expect_eq "$(field "$r" "d[\"error\"][\"code\"]")" session_busy &&
	t0=$(date +%s%N) && r=$(api DELETE "/v1/executions/$E" "${A[@]}") && expect_eq "$(code "$r")" 202 &&
	wait $cpid && t1=$(date +%s%N) &&
	expect_eq "$(tail -n1 stream.ndjson | ward_json status)" killed &&
	[ $(( (t1 - t0) / 1000000 )) -lt 1000 ] &&
	r=$(ex "$S" "{\"code\": \"print(y)\"}") && expect_eq "$(field "$r" "d[\"stdout\"]")" 5
'
test_expect_success SERVE 'a call past its timeout is reported as timeout; the context keeps its state' '
	r=$(ex "$S" "{\"code\": \"import time\\nwhile True: time.sleep(0.01)\", \"timeout\": 0.5}") &&
	expect_eq "$(field "$r" "d[\"status\"]")" timeout && expect_eq "$(field "$r" "d[\"limit\"][\"name\"]")" timeout &&
	# in a one-shot'"'"'s words: TimeoutError with the limit as value and hint, no kernel frames
	expect_eq "$(field "$r" "d[\"error\"][\"name\"]")" TimeoutError &&
	expect_contains "$(field "$r" "d[\"error\"][\"hint\"]")" "wall-time limit of 500 ms was reached" &&
	expect_eq "$(field "$r" "d[\"error\"][\"value\"]")" "$(field "$r" "d[\"error\"][\"hint\"]")" &&
	tb=$(field "$r" "d[\"error\"][\"traceback\"]") && expect_contains "$tb" "<cell" &&
	! expect_contains "$tb" _ward_kernel >/dev/null &&
	r=$(ex "$S" "{\"code\": \"print(y + 1)\"}") && expect_eq "$(field "$r" "d[\"stdout\"]")" 6
'
test_expect_success SERVE,NODE 'node and bash calls past their timeout say the same: TimeoutError, the limit as value and hint' '
	for call in "\"language\": \"node\", \"code\": \"while (true) {}\"" \
		    "\"language\": \"bash\", \"code\": \"sleep 30\""; do
		r=$(ex "$S" "{$call, \"timeout\": 0.5}") &&
		expect_eq "$(field "$r" "d[\"status\"]")" timeout &&
		expect_eq "$(field "$r" "d[\"error\"][\"name\"]")" TimeoutError &&
		expect_contains "$(field "$r" "d[\"error\"][\"hint\"]")" "wall-time limit of 500 ms was reached" &&
		expect_eq "$(field "$r" "d[\"error\"][\"value\"]")" "$(field "$r" "d[\"error\"][\"hint\"]")" || return 1
	done &&
	r=$(ex "$S" "{\"language\": \"node\", \"code\": \"console.log(n + 1)\"}") && expect_eq "$(field "$r" "d[\"stdout\"]")" 6
'
test_expect_success SERVE,ROOT 'out of memory in a context is memory_limit, not a crash; the session goes on' '
	M=$(new_session "{\"policy\": {\"limits\": {\"memory\": \"192M\"}}}") &&
	r=$(ex "$M" "{\"code\": \"z = 1\"}") &&
	r=$(ex "$M" "{\"code\": \"b = bytearray(600 << 20)\"}") &&
	expect_eq "$(field "$r" "d[\"status\"]")" memory_limit && expect_eq "$(field "$r" "d[\"limit\"][\"name\"]")" memory &&
	expect_eq "$(field "$r" "d[\"context_lost\"]")" true &&
	r=$(ex "$M" "{\"code\": \"print(2 + 2)\"}") && expect_eq "$(field "$r" "d[\"stdout\"]")" 4 &&
	expect_eq "$(code "$(api DELETE "/v1/sessions/$M" "${A[@]}")")" 200
'
test_expect_success SERVE 'an output flood is cut at the output limit (output_limit); the session goes on' '
	O=$(new_session "{\"policy\": {\"limits\": {\"output\": \"64K\"}}}") &&
	r=$(ex "$O" "{\"code\": \"for i in range(64): print(\\\"x\\\" * 8192)\"}") &&
	expect_eq "$(field "$r" "d[\"status\"]")" output_limit &&
	expect_eq "$(field "$r" "d[\"stdout_truncated\"]")" true &&
	expect_eq "$(field "$r" "len(d[\"stdout\"]) <= 65536")" true &&
	r=$(ex "$O" "{\"code\": \"print(3)\"}") && expect_eq "$(field "$r" "d[\"status\"]")" ok &&
	expect_eq "$(field "$r" "d[\"stdout\"]")" 3 &&
	api DELETE "/v1/sessions/$O" "${A[@]}" > /dev/null
'
test_expect_success SERVE 'the lint of a session policy: policy_violation, audited; the session goes on' '
	P=$(new_session "{\"policy\": {\"lint\": {\"deny_imports\": [\"socket\"]}}}") &&
	r=$(ex "$P" "{\"code\": \"import socket\"}") &&
	expect_eq "$(field "$r" "d[\"status\"]")" policy_violation &&
	expect_eq "$(field "$r" "d[\"policy_violation\"][\"name\"]")" socket &&
	grep -q "\"event\":\"policy.violation\".*\"session_id\":\"$P\"" "$AUDIT" &&
	r=$(ex "$P" "{\"code\": \"print(5)\"}") && expect_eq "$(field "$r" "d[\"stdout\"]")" 5 &&
	api DELETE "/v1/sessions/$P" "${A[@]}" > /dev/null
'
test_expect_success SERVE 'NDJSON from a session: start, streams in order, the verdict last' '
	curl -sS --unix-socket "$SOCK" "${A[@]}" -H "Accept: application/x-ndjson" \
		-d "{\"code\": \"import time\\nfor i in range(3):\\n    print(i, flush=True); time.sleep(0.1)\"}" \
		"http://w/v1/sessions/$S/execute" > ev.ndjson &&
	python3 - ev.ndjson <<-\EOF
	import json, sys
	ev = [json.loads(l) for l in open(sys.argv[1])]
	assert ev[0]["event"] == "start" and ev[0]["session_id"].startswith("se_"), ev[0]
	assert ev[-1]["event"] == "verdict" and ev[-1]["status"] == "ok", ev[-1]
	text = "".join(e["text"] for e in ev if e["event"] == "stream")
	assert text == "0\n1\n2\n", text
	EOF
'
test_expect_success SERVE 'another tenant cannot list, read, execute in, use files of, or delete the session' '
	r=$(api GET /v1/sessions "${B[@]}") && expect_eq "$(field "$r" "len(d[\"sessions\"])")" 0 &&
	expect_eq "$(code "$(api GET "/v1/sessions/$S" "${B[@]}")")" 404 &&
	expect_eq "$(code "$(api POST "/v1/sessions/$S/execute" "${B[@]}" -d "{\"code\": \"1\"}")")" 404 &&
	expect_eq "$(code "$(api POST "/v1/sessions/$S/commands" "${B[@]}" -d "{\"cmd\": \"true\"}")")" 404 &&
	expect_eq "$(code "$(api GET "/v1/sessions/$S/files?path=out.txt" "${B[@]}")")" 404 &&
	expect_eq "$(code "$(api DELETE "/v1/sessions/$S" "${B[@]}")")" 404 &&
	expect_eq "$(code "$(api GET "/v1/sessions/$S" "${A[@]}")")" 200
'
test_expect_success SERVE 'quotas: sessions per tenant and tenant memory answer 429 naming the quota' '
	r=$(api POST /v1/sessions "${SMALL[@]}" -d "{\"policy\": {\"limits\": {\"memory\": \"128M\"}}}") && expect_eq "$(code "$r")" 201 &&
	Q=$(field "$r" "d[\"id\"]") &&
	r=$(api POST /v1/sessions "${SMALL[@]}" -d "{}") && expect_eq "$(code "$r")" 429 &&
	expect_eq "$(field "$r" "d[\"error\"][\"field\"]")" max_sessions_per_tenant &&
	r=$(api POST /v1/executions "${SMALL[@]}" -d "{\"command\": [\"true\"], \"policy\": {\"limits\": {\"memory\": \"256M\"}}}") &&
	expect_eq "$(code "$r")" 429 && expect_eq "$(field "$r" "d[\"error\"][\"field\"]")" tenant_memory &&
	r=$(api POST /v1/executions "${SMALL[@]}" -d "{\"command\": [\"true\"], \"policy\": {\"limits\": {\"memory\": \"64M\"}}}") &&
	expect_eq "$(code "$r")" 200 &&
	expect_eq "$(code "$(api DELETE "/v1/sessions/$Q" "${SMALL[@]}")")" 200 &&
	r=$(api POST /v1/executions "${SMALL[@]}" -d "{\"command\": [\"true\"], \"policy\": {\"limits\": {\"memory\": \"256M\"}}}") &&
	expect_eq "$(code "$r")" 200
'
test_expect_success SERVE 'quotas: a session is a sandbox: max_per_tenant counts sessions and executions together' '
	r=$(api POST /v1/sessions "${TINY[@]}" -d "{}") && expect_eq "$(code "$r")" 201 && Q=$(field "$r" "d[\"id\"]") &&
	r=$(api POST /v1/executions "${TINY[@]}" -d "{\"command\": [\"true\"]}") && expect_eq "$(code "$r")" 429 &&
	expect_eq "$(field "$r" "d[\"error\"][\"field\"]")" max_per_tenant &&
	r=$(api POST /v1/sessions "${TINY[@]}" -d "{}") && expect_eq "$(code "$r")" 429 &&
	expect_eq "$(field "$r" "d[\"error\"][\"field\"]")" max_per_tenant &&
	api DELETE "/v1/sessions/$Q" "${TINY[@]}" > /dev/null &&
	r=$(api POST /v1/executions "${TINY[@]}" -d "{\"command\": [\"true\"]}") && expect_eq "$(code "$r")" 200
'
test_expect_success SERVE 'an idle session expires after its TTL (audited); a call extends it' '
	T=$(new_session "{\"ttl\": 1.5}") &&
	# not a wait for a state: the call must come late enough that its
	# extension shows (without it, the session would expire 0.5 s later)
	sleep 1 &&
	t1=$(date +%s%N) && r=$(ex "$T" "{\"code\": \"1\"}") && expect_eq "$(code "$r")" 200 &&
	wait_for "the session to expire" "! session_is $T ready" &&
	ms=$(( ($(date +%s%N) - t1) / 1000000 )) &&
	{ [ "$ms" -ge 1500 ] || { echo "expired $ms ms after the call: the call did not extend the TTL"; false; }; } &&
	r=$(api GET "/v1/sessions/$T" "${A[@]}") &&
	expect_eq "$(field "$r" "d[\"status\"]")" expired && expect_contains "$(field "$r" "d[\"reason\"]")" TTL &&
	r=$(ex "$T" "{\"code\": \"1\"}") && expect_eq "$(code "$r")" 410 &&
	grep -q "\"event\":\"session.expired\".*$T" "$AUDIT"
'
test_expect_success SERVE 'metrics count live sessions' '
	m=$(api GET /metrics "${A[@]}") && n=$(grep "^ward_active_sessions " <<<"$m" | cut -d" " -f2) &&
	X=$(new_session) && m=$(api GET /metrics "${A[@]}") &&
	expect_eq "$(grep "^ward_active_sessions " <<<"$m" | cut -d" " -f2)" $((n + 1)) &&
	expect_contains "$m" "ward_tenant_active_sessions{tenant=\"acme\"}" &&
	api DELETE "/v1/sessions/$X" "${A[@]}" > /dev/null &&
	m=$(api GET /metrics "${A[@]}") && expect_eq "$(grep "^ward_active_sessions " <<<"$m" | cut -d" " -f2)" "$n"
'
test_expect_success SERVE 'DELETE ends the session: its processes are gone, then it is 404' '
	X=$(new_session) &&
	r=$(api POST "/v1/sessions/$X/commands" "${A[@]}" -d "{\"cmd\": \"exec sleep $((marker + 1))\", \"background\": true}") &&
	wait_for "the command to run" "running $((marker + 1))" &&
	expect_eq "$(code "$(api DELETE "/v1/sessions/$X" "${A[@]}")")" 200 &&
	wait_for "the session'"'"'s processes to end" "! running $((marker + 1))" &&
	wait_for "the session to be gone (404)" "[ \$(code \"\$(api GET /v1/sessions/$X \"\${A[@]}\")\") = 404 ]"
'
test_expect_success SERVE 'no daemon fd is left over by sessions, calls, files, cancels and ends' '
	pid=$(cat "$D/pid") && n0=$(ls /proc/$pid/fd | wc -l) &&
	h0=$(curl -sS --unix-socket "$SOCK" http://w/healthz | ward_json sessions) &&
	for i in 1 2 3; do
		X=$(new_session) &&
		ex "$X" "{\"code\": \"print(1)\"}" > /dev/null &&
		api POST "/v1/sessions/$X/commands" "${A[@]}" -d "{\"cmd\": \"true\"}" > /dev/null &&
		api PUT "/v1/sessions/$X/files?path=f" "${A[@]}" -d x > /dev/null &&
		api GET "/v1/sessions/$X/files?path=f" "${A[@]}" > /dev/null &&
		api GET "/v1/sessions/$X/files" "${A[@]}" > /dev/null &&
		curl -sS -N -m 0.5 --unix-socket "$SOCK" "${A[@]}" -H "Accept: application/x-ndjson" \
			-d "{\"code\": \"while True: pass\"}" "http://w/v1/sessions/$X/execute" > /dev/null 2>&1
		wait_for "the cut call to end" "session_is $X ready" &&
		api DELETE "/v1/sessions/$X" "${A[@]}" > /dev/null || exit 1
	done
	wait_for "the daemon to close every fd of them" "[ \$(ls /proc/$pid/fd | wc -l) = $n0 ]" &&
	expect_eq "$(curl -sS --unix-socket "$SOCK" http://w/healthz | ward_json sessions)" "$h0"
'
test_expect_success SERVE 'after a SIGKILL of the daemon, the next start removes what it left and marks its sessions lost' '
	L=$(new_session) &&
	api POST "/v1/sessions/$L/commands" "${A[@]}" -d "{\"cmd\": \"exec sleep $((marker + 2))\", \"background\": true}" > /dev/null &&
	wait_for "the command to run" "running $((marker + 2))" &&
	old=$(cat "$D/pid") && ls "$D/run/state/sessions/$L.json" &&
	kill -KILL "$old" && wait_for "the daemon to die" "[ -f \"$D/rc\" ]" &&
	start_daemon --config "$CONF" &&
	r=$(api GET "/v1/sessions/$L" "${A[@]}") && expect_eq "$(field "$r" "d[\"status\"]")" lost &&
	r=$(ex "$L" "{\"code\": \"1\"}") && expect_eq "$(code "$r")" 410 &&
	expect_eq "$(pgrep -f "^sleep $((marker + 2))" | wc -l)" 0 &&
	expect_eq "$(ls "$D/run/state/sessions" | wc -l)" 0 &&
	expect_eq "$(find /sys/fs/cgroup -maxdepth 6 -name "ward-$old-*" 2>/dev/null | wc -l)" 0 &&
	grep -q "\"event\":\"session.lost\".*$L" "$AUDIT"
'
test_expect_success SERVE 'SIGTERM ends every session; nothing is left' '
	X=$(new_session) &&
	api POST "/v1/sessions/$X/commands" "${A[@]}" -d "{\"cmd\": \"exec sleep $((marker + 3))\", \"background\": true}" > /dev/null &&
	pid=$(cat "$D/pid") && stop_daemon && expect_eq "$(cat "$D/rc")" 0 &&
	expect_eq "$(pgrep -f "^sleep $((marker + 3))" | wc -l)" 0 &&
	expect_eq "$(ls "$D/run/state/sessions" | wc -l)" 0 &&
	expect_eq "$(find /sys/fs/cgroup -maxdepth 6 -name "ward-$pid-*" 2>/dev/null | wc -l)" 0
'
test_expect_success SERVE 'the audit log verifies and records sessions, calls, files and the loss' '
	"$WARD" audit verify "$AUDIT" &&
	for e in policy.violation session.create session.call file.upload file.download file.delete session.delete session.expired session.lost session.shutdown; do
		grep -q "\"event\":\"$e\"" "$AUDIT" || { echo "no $e"; exit 1; }
	done
'
test_done
