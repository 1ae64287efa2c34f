#!/bin/bash
# Function-call mode and globals over HTTP: POST /v1/executions and a
# session's execute with function and args give the value or a typed error
# (FunctionNotFound, ArgumentError, SerializationError, PolicyViolation),
# the same verdict as `ward call`; globals are names set before the code
# runs; every bad field is refused by name.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve-lib.sh"

A=()
if [ -z "${prereq_missing[SERVE]:-}" ]; then
	A=(-H "Authorization: Bearer $("$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes sessions,execute --json | key_of)")
	start_daemon
fi
command -v node > /dev/null 2>&1 || test_set_prereq_missing NODE "node is not installed"

cat > "$TEST_TMP/tool.py" <<'EOF'
import __main__

class MyTool:
    def run(self, numbers, scale=1):
        return {"sum": sum(numbers) * scale}

def later(n):
    return [n, getattr(__main__, "kept", None)]

def notjson():
    return {1, 2}

def greet(who):
    return GREETING + ", " + who

def boom():
    raise ValueError("bad input")
EOF
cat > "$TEST_TMP/lint.py" <<'EOF'
import subprocess

def f():
    return 1
EOF
cat > "$TEST_TMP/tool.js" <<'EOF'
class MyTool { run({ numbers }) { return { sum: numbers.reduce((a, b) => a + b, 0) + OFFSET }; } }
module.exports = { MyTool };
EOF

# body FILE EXTRA: {"language": "python", "code": <FILE>} with the JSON
# object EXTRA's keys added
body_of() {
	python3 -c 'import json, sys
d = {"language": "python", "code": open(sys.argv[1]).read()}
d.update(json.loads(sys.argv[2]))
print(json.dumps(d))' "$1" "$2"
}
run() { api POST /v1/executions "${A[@]}" -d "$(body_of "$1" "$2")"; }
# refused ANSWER FIELD: a 400 naming FIELD
refused() {
	expect_eq "$(code "$1")" 400 && expect_eq "$(field "$1" 'd["error"]["field"]')" "$2"
}
# the verdict without what differs between two runs of the same call
same() { jget "$1" '{k: v for k, v in d.items() if k not in ("usage", "sandbox_id", "execution_id")}'; }

test_expect_success SERVE 'a one-shot call returns the value (args by name or by position)' '
	r=$(run tool.py "{\"function\": \"MyTool.run\", \"args\": {\"numbers\": [10, 20, 30], \"scale\": 2}}") &&
	expect_eq "$(code "$r")" 200 && expect_eq "$(field "$r" "d[\"status\"]")" ok &&
	expect_eq "$(field "$r" "d[\"value\"]")" "{\"sum\": 120}" &&
	expect_eq "$(field "$r" "\"cells\" in d")" false &&
	r=$(run tool.py "{\"function\": \"later\", \"args\": [7]}") &&
	expect_eq "$(field "$r" "d[\"value\"]")" "[7, null]"
'
test_expect_success SERVE 'every typed error, with the exit status of an error' '
	r=$(run tool.py "{\"function\": \"nope\"}") && expect_eq "$(field "$r" "d[\"status\"]")" error &&
	expect_eq "$(field "$r" "d[\"error\"][\"name\"]")" FunctionNotFound &&
	expect_contains "$(field "$r" "d[\"error\"][\"value\"]")" "MyTool.run" &&
	r=$(run tool.py "{\"function\": \"MyTool.run\", \"args\": {\"wrong\": 1}}") &&
	expect_eq "$(field "$r" "d[\"error\"][\"name\"]")" ArgumentError &&
	r=$(run tool.py "{\"function\": \"notjson\"}") &&
	expect_eq "$(field "$r" "d[\"error\"][\"name\"]")" SerializationError &&
	expect_eq "$(field "$r" "d[\"value\"]")" null &&
	r=$(run tool.py "{\"function\": \"boom\"}") &&
	expect_eq "$(field "$r" "d[\"error\"][\"name\"]")" ValueError &&
	expect_eq "$(field "$r" "d[\"exit_code\"]")" 1 &&
	r=$(run lint.py "{\"function\": \"f\", \"policy\": {\"lint\": {\"deny_imports\": [\"subprocess\"]}}}") &&
	expect_eq "$(field "$r" "d[\"status\"]")" policy_violation &&
	expect_eq "$(field "$r" "d[\"error\"][\"name\"]")" PolicyViolation &&
	expect_eq "$(field "$r" "d[\"policy_violation\"][\"name\"]")" subprocess
'
test_expect_success SERVE 'the same call through ward call and HTTP gives the same verdict' '
	printf "{\"lint\": {\"deny_imports\": [\"subprocess\"]}}" > lint.json &&
	for c in "tool.py MyTool.run {\"numbers\":[1,2]}" "tool.py later [3]" "tool.py nope {}" \
		 "tool.py MyTool.run {\"wrong\":1}" "tool.py notjson {}" "tool.py boom {}" "lint.py f {}"; do
		set -- $c
		pol=; [ "$1" = lint.py ] && pol=", \"policy\": {\"lint\": {\"deny_imports\": [\"subprocess\"]}}"
		cli=$("$WARD" call --json --lang python ${pol:+--policy lint.json} -f "$1" --function "$2" --args "$3")
		r=$(run "$1" "{\"function\": \"$2\", \"args\": $3$pol}")
		expect_eq "$(same "$(body "$r")")" "$(same "$cli")" || exit 1
	done
'
test_expect_success SERVE 'globals are set before the code runs; no line moves, the last value stays' '
	r=$(run /dev/null "{\"code\": \"print(a + b)\\nc = [a, b]\\n1/0 if flag else c\", \"globals\": {\"a\": 1, \"b\": 2, \"flag\": false}}") &&
	expect_eq "$(field "$r" "d[\"stdout\"]")" 3 && expect_eq "$(field "$r" "d[\"results\"][0][\"text/plain\"]")" "[1, 2]" &&
	r=$(run /dev/null "{\"code\": \"x = 1\\n1/0 if flag else 0\", \"globals\": {\"flag\": true}}") &&
	expect_eq "$(field "$r" "d[\"error\"][\"name\"]")" ZeroDivisionError &&
	expect_contains "$(field "$r" "\"\".join(d[\"error\"][\"traceback\"])")" "line 2" &&
	r=$(run tool.py "{\"function\": \"greet\", \"args\": [\"ward\"], \"globals\": {\"GREETING\": \"hello\"}}") &&
	expect_eq "$(field "$r" "d[\"value\"]")" "hello, ward" &&
	r=$(run /dev/null "{\"code\": \"print(type(g).__name__, g[\\\"k\\\"][1])\", \"globals\": {\"g\": {\"k\": [1, null]}}}") &&
	expect_eq "$(field "$r" "d[\"stdout\"]")" "dict None"
'
test_expect_success SERVE,NODE 'node: a call and globals' '
	r=$(api POST /v1/executions "${A[@]}" -d "$(body_of tool.js "{\"language\": \"node\", \"function\": \"MyTool.run\", \"args\": {\"numbers\": [1, 2]}, \"globals\": {\"OFFSET\": 10}}")") &&
	expect_eq "$(field "$r" "d[\"value\"]")" "{\"sum\": 13}" &&
	r=$(api POST /v1/executions "${A[@]}" -d "{\"language\": \"node\", \"code\": \"console.log(n + 1)\", \"globals\": {\"n\": 41}}") &&
	expect_eq "$(field "$r" "d[\"stdout\"]")" 42
'
test_expect_success SERVE 'bad function, args and globals are refused by name' '
	refused "$(run tool.py "{\"function\": \"My Tool\"}")" function &&
	refused "$(run tool.py "{\"function\": \"a..b\"}")" function &&
	refused "$(run tool.py "{\"function\": 3}")" function &&
	refused "$(run tool.py "{\"function\": \"f\", \"args\": 3}")" args &&
	refused "$(run tool.py "{\"args\": {}}")" args &&
	refused "$(run tool.py "{\"function\": \"f\", \"language\": \"bash\"}")" function &&
	refused "$(api POST /v1/executions "${A[@]}" -d "{\"command\": [\"true\"], \"function\": \"f\"}")" function &&
	refused "$(run tool.py "{\"globals\": {\"1x\": 1}}")" globals.1x &&
	refused "$(run tool.py "{\"globals\": {\"a-b\": 1}}")" globals.a-b &&
	refused "$(run tool.py "{\"globals\": {\"__builtins__\": 1}}")" globals.__builtins__ &&
	refused "$(run tool.py "{\"globals\": [1]}")" globals &&
	r=$(run tool.py "{\"language\": \"bash\", \"globals\": {\"a\": 1}}") && refused "$r" globals &&
	expect_contains "$(field "$r" "d[\"error\"][\"message\"]")" "python and node" &&
	python3 -c "import json; print(json.dumps({\"language\": \"python\", \"code\": \"1\", \"globals\": {\"a\": \"x\" * (5 << 20)}}))" > big.json &&
	r=$(api POST /v1/executions "${A[@]}" -d @big.json) && refused "$r" globals &&
	expect_contains "$(field "$r" "d[\"error\"][\"message\"]")" "4 MiB"
'

new_session() { r=$(api POST /v1/sessions "${A[@]}" -d "{}") && field "$r" 'd["id"]'; }
sx() { api POST "/v1/sessions/$1/execute" "${A[@]}" -d "$(body_of "$2" "$3")"; }

test_expect_success SERVE 'a call in a session runs in its context: the session state is there, and stays' '
	S=$(new_session) && echo "$S" > "$D/S" &&
	r=$(sx "$S" /dev/null "{\"code\": \"kept = 41\"}") && expect_eq "$(field "$r" "d[\"status\"]")" ok &&
	r=$(sx "$S" tool.py "{\"function\": \"later\", \"args\": [1]}") &&
	expect_eq "$(code "$r")" 200 && expect_eq "$(field "$r" "d[\"value\"]")" "[1, 41]" &&
	expect_eq "$(field "$r" "d[\"session_id\"]")" "$S" && expect_eq "$(field "$r" "d[\"context\"]")" default &&
	expect_eq "$(field "$r" "d[\"context_new\"]")" false &&
	r=$(sx "$S" /dev/null "{\"code\": \"kept + 1\"}") && expect_eq "$(field "$r" "d[\"results\"][0][\"text/plain\"]")" 42
'
S=$(cat "$D/S" 2>/dev/null)
test_expect_success SERVE 'a session call: every typed error, globals, and the same refusals' '
	r=$(sx "$S" tool.py "{\"function\": \"nope\"}") && expect_eq "$(field "$r" "d[\"error\"][\"name\"]")" FunctionNotFound &&
	expect_eq "$(field "$r" "d[\"status\"]")" error &&
	r=$(sx "$S" tool.py "{\"function\": \"MyTool.run\", \"args\": [1, 2, 3]}") &&
	expect_eq "$(field "$r" "d[\"error\"][\"name\"]")" ArgumentError &&
	r=$(sx "$S" tool.py "{\"function\": \"notjson\"}") && expect_eq "$(field "$r" "d[\"error\"][\"name\"]")" SerializationError &&
	r=$(sx "$S" tool.py "{\"function\": \"greet\", \"args\": {\"who\": \"s\"}, \"globals\": {\"GREETING\": \"hi\"}}") &&
	expect_eq "$(field "$r" "d[\"value\"]")" "hi, s" &&
	r=$(sx "$S" /dev/null "{\"code\": \"print(v * 2)\", \"globals\": {\"v\": 21}}") && expect_eq "$(field "$r" "d[\"stdout\"]")" 42 &&
	r=$(sx "$S" /dev/null "{\"code\": \"v\"}") && expect_eq "$(field "$r" "d[\"results\"][0][\"text/plain\"]")" 21 &&
	refused "$(sx "$S" tool.py "{\"function\": \"x y\"}")" function &&
	refused "$(sx "$S" tool.py "{\"function\": \"f\", \"language\": \"bash\"}")" function &&
	refused "$(sx "$S" tool.py "{\"globals\": {\"9\": 1}}")" globals.9 &&
	refused "$(sx "$S" tool.py "{\"args\": [1]}")" args
'
test_expect_success SERVE 'a session call with a policy lint: PolicyViolation' '
	r=$(api POST /v1/sessions "${A[@]}" -d "{\"policy\": {\"lint\": {\"deny_imports\": [\"subprocess\"]}}}") &&
	L=$(field "$r" "d[\"id\"]") && r=$(sx "$L" lint.py "{\"function\": \"f\"}") &&
	expect_eq "$(field "$r" "d[\"status\"]")" policy_violation &&
	expect_eq "$(field "$r" "d[\"error\"][\"name\"]")" PolicyViolation
'
test_expect_success SERVE 'a session call past its timeout is a timeout, and the context survives' '
	printf "def spin():\n    while True:\n        pass\n" > spin.py &&
	r=$(sx "$S" spin.py "{\"function\": \"spin\", \"timeout\": 0.5}") &&
	expect_eq "$(field "$r" "d[\"status\"]")" timeout && expect_eq "$(field "$r" "d[\"error\"][\"name\"]")" TimeoutError &&
	r=$(sx "$S" /dev/null "{\"code\": \"kept\"}") && expect_eq "$(field "$r" "d[\"results\"][0][\"text/plain\"]")" 41
'
test_expect_success SERVE 'calls are audited: the tool source and the function, one-shot and in a session' '
	sha=$(python3 -c "import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], \"rb\").read()).hexdigest())" tool.py) &&
	python3 - "$AUDIT" "$sha" <<-\EOF
	import json, sys
	events = [json.loads(l) for l in open(sys.argv[1])]
	def fields(e):
	    return e.get("fields", e)
	one = [fields(e) for e in events if "sandbox.create" in json.dumps(e) and "MyTool.run" in json.dumps(e)]
	assert one and one[0]["code"]["sha256"] == sys.argv[2], one[:1]
	sess = [e for e in events if "session.call" in json.dumps(e) and "\"kind\": \"call\"" in json.dumps(e)]
	assert sess, "no session.call of kind call"
	EOF
'
test_done
