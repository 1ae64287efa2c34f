#!/bin/bash
# `ward serve`: real HTTP against the real daemon, over a unix socket and
# 127.0.0.1 — auth, limits, one-shot executions, NDJSON streams, cancel,
# slow clients, metrics, audit, SIGTERM shutdown.
. "$(dirname "$0")/../lib.sh"

. "$(dirname "$0")/serve-lib.sh"
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
marker=$((RANDOM * 1000 + $$ % 1000 + 7000000))

AUTH=()

if [ -z "${prereq_missing[SERVE]:-}" ]; then
	"$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes execute,admin --json | key_of > "$D/k_exec"
	"$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes sessions --json | key_of > "$D/k_sess"
	"$WARD" keys add --keys-file "$KEYS" --tenant beta --scopes execute --json > "$D/k_beta.json"
	"$WARD" keys add --keys-file "$KEYS" --tenant gamma --scopes execute --json | key_of > "$D/k_gamma"
	start_daemon --listen "127.0.0.1:$PORT"
fi
test_expect_success SERVE 'the daemon starts on a fresh socket dir, mode 0660' '
	[ -s "$D/pid" ] && kill -0 "$(cat "$D/pid")" && expect_eq "$(stat -c %a "$SOCK")" 660
'
[ -f "$D/k_exec" ] && AUTH=(-H "Authorization: Bearer $(cat "$D/k_exec")")
BETA=(-H "Authorization: Bearer $(key_of < "$D/k_beta.json" 2>/dev/null)")

test_expect_success SERVE 'a second daemon on the same socket is refused' '
	! "$WARD" serve --socket "$SOCK" --keys-file "$KEYS" > out 2>&1 &&
	expect_contains "$(cat out)" "another daemon is listening"
'
test_expect_success SERVE 'healthz answers on the unix socket and on TCP' '
	r=$(api GET /healthz) && expect_eq "$(code "$r")" 200 &&
	expect_eq "$(body "$r" | ward_json status)" ok &&
	expect_eq "$(curl -sS "http://127.0.0.1:$PORT/healthz" | ward_json status)" ok
'
test_expect_success SERVE 'no key, a bad key and a revoked key get the same 401 JSON' '
	a=$(api POST /v1/executions -d "{}") &&
	b=$(api POST /v1/executions -H "Authorization: Bearer wk_000000000000_00" -d "{}") &&
	"$WARD" keys revoke --keys-file "$KEYS" "$(key_of < "$D/k_beta.json" | cut -d_ -f2)" > /dev/null &&
	c=$(api POST /v1/executions "${BETA[@]}" -d "{}") &&
	expect_eq "$(code "$a")$(code "$b")$(code "$c")" 401401401 &&
	expect_eq "$(body "$a")" "$(body "$c")" && expect_eq "$(body "$b")" "$(body "$c")" &&
	expect_eq "$(body "$a" | ward_json error.code)" unauthorized
'
test_expect_success SERVE 'a key without the execute scope gets 403 naming the scope' '
	r=$(api POST /v1/executions -H "Authorization: Bearer $(cat "$D/k_sess")" -d "{}") &&
	expect_eq "$(code "$r")" 403 && expect_contains "$(body "$r" | ward_json error.message)" execute
'
test_expect_success SERVE 'malformed JSON, deep JSON, an oversized body, unknown fields: 4xx JSON naming it' '
	r=$(api POST /v1/executions "${AUTH[@]}" -d "{\"language\": ") &&
	expect_eq "$(code "$r")" 400 && expect_eq "$(body "$r" | ward_json error.code)" invalid_json &&
	deep=$(python3 -c "print(\"[\" * 40 + \"]\" * 40)") &&
	r=$(api POST /v1/executions "${AUTH[@]}" -d "$deep") &&
	expect_eq "$(code "$r")" 400 && expect_eq "$(body "$r" | ward_json error.code)" too_deep &&
	head -c 9000000 /dev/zero > big &&
	r=$(api POST /v1/executions "${AUTH[@]}" --data-binary @big) &&
	expect_eq "$(code "$r")" 413 && expect_eq "$(body "$r" | ward_json error.code)" body_too_large &&
	r=$(api POST /v1/executions "${AUTH[@]}" -d "{\"language\": \"python\", \"code\": \"1\", \"colour\": 1}") &&
	expect_eq "$(code "$r")" 400 && expect_eq "$(body "$r" | ward_json error.field)" colour &&
	r=$(api POST /v1/executions "${AUTH[@]}" -d "{\"language\": \"cobol\", \"code\": \"1\"}") &&
	expect_eq "$(body "$r" | ward_json error.field)" language
'
test_expect_success SERVE 'a bad policy override is a 400 naming the field; host mounts are refused' '
	r=$(api POST /v1/executions "${AUTH[@]}" -d "{\"command\": [\"true\"], \"policy\": {\"limits\": {\"memory\": \"lots\"}}}") &&
	expect_eq "$(code "$r")" 400 && expect_eq "$(body "$r" | ward_json error.field)" policy.limits.memory &&
	r=$(api POST /v1/executions "${AUTH[@]}" -d "{\"command\": [\"true\"], \"policy\": {\"mounts\": [{\"host\": \"/etc\", \"inside\": \"/mnt\"}]}}") &&
	expect_eq "$(code "$r")" 400 && expect_eq "$(body "$r" | ward_json error.field)" policy.mounts
'
test_expect_success SERVE 'one-shot python: results, streams, and the exec --json shape' '
	r=$(api POST /v1/executions "${AUTH[@]}" -d "{\"language\": \"python\", \"code\": \"print(6)\\n6 * 7\"}") &&
	expect_eq "$(code "$r")" 200 && body "$r" > v.json &&
	expect_eq "$(ward_json status < v.json)" ok && expect_eq "$(ward_json stdout < v.json)" 6 &&
	expect_eq "$(ward_json results.0.text/plain < v.json)" 42 &&
	expect_eq "$(ward_json language < v.json)" python
'
test_expect_success SERVE 'one-shot command with a base64 file and a policy override' '
	r=$(api POST /v1/executions "${AUTH[@]}" -d "{\"command\": [\"cat\", \"in/data.txt\"],
		\"files\": [{\"path\": \"in/data.txt\", \"content\": \"aGVsbG8=\", \"encoding\": \"base64\"}],
		\"policy\": {\"limits\": {\"pids\": 16}}, \"timeout\": 5}") &&
	expect_eq "$(code "$r")" 200 && expect_eq "$(body "$r" | ward_json stdout)" hello &&
	expect_eq "$(body "$r" | ward_json status)" ok
'
test_expect_success SERVE 'a file path outside /workspace is refused' '
	r=$(api POST /v1/executions "${AUTH[@]}" -d "{\"command\": [\"true\"], \"files\": [{\"path\": \"../x\", \"content\": \"\"}]}") &&
	expect_eq "$(code "$r")" 400 && expect_eq "$(body "$r" | ward_json error.field)" files.0
'
test_expect_success SERVE 'NDJSON: start, streams in order, then the verdict last' '
	curl -sSN -m 20 --unix-socket "$SOCK" "${AUTH[@]}" -H "Accept: application/x-ndjson" \
		-d "{\"language\": \"python\", \"code\": \"import time\\nfor i in range(3):\\n    print(i, flush=True); time.sleep(0.1)\\nraise ValueError(7)\"}" \
		http://w/v1/executions > s.ndjson &&
	python3 -c "
import json
ev = [json.loads(l) for l in open(\"s.ndjson\")]
kinds = [e[\"event\"] for e in ev]
assert kinds[0] == \"start\" and kinds[-1] == \"verdict\", kinds
assert [e[\"text\"] for e in ev if e[\"event\"] == \"stream\"] == [\"0\n\", \"1\n\", \"2\n\"], ev
assert kinds.index(\"error\") < len(kinds) - 1
assert ev[-1][\"status\"] == \"error\" and ev[-1][\"error\"][\"name\"] == \"ValueError\"
"
'
test_expect_success SERVE 'DELETE cancels a running execution quickly (killed); another tenant gets 404' '
	curl -sSN -m 20 --unix-socket "$SOCK" "${AUTH[@]}" -H "Accept: application/x-ndjson" \
		-d "{\"language\": \"python\", \"code\": \"import time\\nprint(1, flush=True)\\ntime.sleep(30)\"}" \
		http://w/v1/executions > c.ndjson &
	cpid=$!
	wait_for "the program to print" "has_event c.ndjson stream" &&
	id=$(head -n1 c.ndjson | id_of) &&
	r=$(api DELETE "/v1/executions/$id" -H "Authorization: Bearer $(cat "$D/k_gamma")") &&
	expect_eq "$(code "$r")" 404 &&
	t0=$(date +%s%N) &&
	r=$(api DELETE "/v1/executions/$id" "${AUTH[@]}") && expect_eq "$(code "$r")" 202 &&
	wait_for "the verdict" "has_event c.ndjson verdict" &&
	ms=$(( ($(date +%s%N) - t0) / 1000000 )) && wait $cpid &&
	expect_eq "$(tail -n1 c.ndjson | ward_json status)" killed &&
	{ [ "$ms" -lt 500 ] || { echo "cancel took $ms ms"; false; }; } &&
	r=$(api DELETE "/v1/executions/$id" "${AUTH[@]}") && expect_eq "$(code "$r")" 404
'
test_expect_success SERVE 'closing the stream cancels the execution' '
	before=$(api GET /metrics "${AUTH[@]}" | grep "^ward_executions_total{status=\"killed\"}" | cut -d" " -f2) &&
	curl -sSN -m 1 --unix-socket "$SOCK" "${AUTH[@]}" -H "Accept: application/x-ndjson" \
		-d "{\"command\": [\"sleep\", \"$marker\"]}" http://w/v1/executions > /dev/null 2>&1
	killed() { api GET /metrics "${AUTH[@]}" | grep "^ward_executions_total{status=\"killed\"}" | cut -d" " -f2; }
	wait_for "one more killed execution" "[ \"\$(killed)\" = $((before + 1)) ]" &&
	wait_for "the program to end" "! pgrep -f \"^sleep $marker\" > /dev/null"
'
test_expect_success SERVE 'a stalled client (half a request, a stream never read) stalls nobody' '
	python3 - "$SOCK" "$(cat "$D/k_exec")" <<-\EOF
	import json, socket, sys, time
	path, key = sys.argv[1], sys.argv[2]
	def conn():
	    s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(path); return s
	half = conn(); half.sendall(b"POST /v1/executions HTTP/1.1\r\nHost: w\r\nAuthor")
	body = json.dumps({"command": ["sh", "-c", "yes | head -c 4000000"]}).encode()
	flood = conn()
	flood.sendall(b"POST /v1/executions HTTP/1.1\r\nHost: w\r\nAuthorization: Bearer " + key.encode() +
	              b"\r\nAccept: application/x-ndjson\r\nContent-Type: application/json\r\nContent-Length: " +
	              str(len(body)).encode() + b"\r\n\r\n" + body)
	# not a wait for a state: the flood gets time to fill the unread socket;
	# /healthz must answer at any point of it
	time.sleep(0.3)
	t0 = time.time()
	c = conn(); c.sendall(b"GET /healthz HTTP/1.1\r\nHost: w\r\nConnection: close\r\n\r\n")
	data = b""
	while True:
	    chunk = c.recv(4096)
	    if not chunk: break
	    data += chunk
	assert b" 200 " in data.split(b"\r\n")[0], data
	assert time.time() - t0 < 1.0, time.time() - t0
	half.close(); flood.close()
	EOF
'
test_expect_success SERVE 'metrics move: executions by status, durations, denials, tenants' '
	m=$(api GET /metrics "${AUTH[@]}") && expect_eq "$(code "$m")" 200 &&
	expect_contains "$m" "ward_executions_total{status=\"ok\"} " &&
	ok=$(grep "^ward_executions_total{status=\"ok\"}" <<<"$m" | cut -d" " -f2) &&
	[ "$ok" -ge 2 ] && expect_contains "$m" "ward_execution_duration_seconds_bucket{le=\"+Inf\"}" &&
	den=$(grep "^ward_denials_total" <<<"$m" | cut -d" " -f2) && [ "$den" -ge 4 ] &&
	expect_contains "$m" "ward_tenant_executions_total{tenant=\"acme\"}" &&
	r=$(api POST /v1/executions "${AUTH[@]}" -d "{\"command\": [\"true\"]}") &&
	m2=$(api GET /metrics "${AUTH[@]}") &&
	expect_eq "$(grep "^ward_executions_total{status=\"ok\"}" <<<"$m2" | cut -d" " -f2)" $((ok + 1))
'
test_expect_success SERVE 'no daemon fd is left over by finished, failed and cancelled executions' '
	pid=$(cat "$D/pid") && n0=$(ls /proc/$pid/fd | wc -l) &&
	for i in 1 2 3 4 5; do
		api POST /v1/executions "${AUTH[@]}" -d "{\"language\": \"python\", \"code\": \"print(1)\"}" > /dev/null &&
		api POST /v1/executions "${AUTH[@]}" -d "{\"command\": [\"false\"]}" > /dev/null &&
		api POST /v1/executions "${AUTH[@]}" -d "{\"command\": [\"/nonexistent\"]}" > /dev/null || exit 1
		curl -sS -m 0.3 --unix-socket "$SOCK" "${AUTH[@]}" -H "Accept: application/x-ndjson" \
			-d "{\"command\": [\"sleep\", \"$marker\"]}" http://w/v1/executions > /dev/null 2>&1
	done
	wait_for "the daemon to close every fd of them" "[ \$(ls /proc/$pid/fd | wc -l) = $n0 ]" &&
	wait_for "the cancelled programs to end" "! pgrep -f \"^sleep $marker\" > /dev/null"
'
test_expect_success SERVE 'metrics need the admin scope' '
	r=$(api GET /metrics -H "Authorization: Bearer $(cat "$D/k_sess")") && expect_eq "$(code "$r")" 403
'
test_expect_success SERVE 'the OpenAPI document is served and describes the executions endpoint' '
	r=$(api GET /v1/openapi.json) && expect_eq "$(code "$r")" 200 &&
	body "$r" | python3 -c "import json, sys; d = json.load(sys.stdin); assert d[\"openapi\"].startswith(\"3.\"); assert \"/v1/executions\" in d[\"paths\"]"
'
test_expect_success SERVE 'SIGTERM: no new connections, short work finishes, the rest is killed after the grace; exit 0, nothing left' '
	curl -sS -m 20 --unix-socket "$SOCK" "${AUTH[@]}" -d "{\"command\": [\"sleep\", \"$marker\"]}" \
		http://w/v1/executions > term.json &
	cpid=$!
	curl -sS -m 20 --unix-socket "$SOCK" "${AUTH[@]}" -d "{\"command\": [\"sh\", \"-c\", \"sleep 0.4; echo done\"]}" \
		http://w/v1/executions > short.json &
	spid=$!
	wait_for "the long program to run" "pgrep -f \"^sleep $marker\" > /dev/null" &&
	pid=$(cat "$D/pid") && kill -TERM "$pid" && t0=$(date +%s) &&
	r=$(curl -sS -m 5 --unix-socket "$SOCK" http://w/healthz 2>&1); expect_contains "$r" "curl: (7)" &&
	wait_for "the daemon to exit" "[ -f \"$D/rc\" ]"
	wait $cpid $spid
	expect_eq "$(cat "$D/rc")" 0 && expect_eq "$(ward_json status < term.json)" killed &&
	expect_eq "$(ward_json stdout < short.json)" done &&
	[ $(( $(date +%s) - t0 )) -le 4 ] && [ ! -e "$SOCK" ] &&
	expect_eq "$(pgrep -f "^sleep $marker" | wc -l)" 0 &&
	expect_eq "$(find /sys/fs/cgroup -maxdepth 6 -name "ward-$pid-*" 2>/dev/null | wc -l)" 0
'
test_expect_success SERVE 'the audit log verifies and records requests, sandboxes, verdicts and denials' '
	"$WARD" audit verify "$AUDIT" &&
	python3 - "$AUDIT" <<-\EOF
	import json, sys
	ev = [json.loads(l) for l in open(sys.argv[1])]
	kinds = {e["event"] for e in ev}
	for k in ("daemon.start", "request", "auth.denied", "permission.denied", "sandbox.create",
	          "execution.verdict", "sandbox.destroy", "daemon.stop"):
	    assert k in kinds, k
	c = [e for e in ev if e["event"] == "sandbox.create"][0]
	assert len(c["policy_digest"]) == 64 and c["tenant"] == "acme" and c["key_id"]
	v = [e for e in ev if e["event"] == "execution.verdict"]
	assert all("sha256" in e["stdout"] and "text" not in e["stdout"] for e in v)
	EOF
'
test_expect_success SERVE 'a stale socket is replaced; a config file is read (body limit, tenant quota → 429); unknown keys are named' '
	python3 -c "import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$SOCK" || exit 1
	echo "{\"max_body\": \"1k\", \"grace\": 1, \"max_per_tenant\": 1}" > conf.json || exit 1
	"$WARD" serve --config conf.json --socket "$SOCK" --keys-file "$KEYS" \
		--state-dir "$D/state2" > "$D/serve2.log" 2>&1 &
	spid=$!
	wait_for "the second daemon to answer" "curl -sf --unix-socket \"$SOCK\" http://w/healthz > /dev/null"
	head -c 2000 /dev/zero > b2 &&
	r=$(api POST /v1/executions "${AUTH[@]}" --data-binary @b2)
	curl -sS -m 20 --unix-socket "$SOCK" "${AUTH[@]}" -d "{\"command\": [\"sleep\", \"$marker\"]}" \
		http://w/v1/executions > /dev/null 2>&1 &
	wait_for "the program to run" "pgrep -f \"^sleep $marker\" > /dev/null"
	q=$(api POST /v1/executions "${AUTH[@]}" -d "{\"command\": [\"true\"]}")
	kill "$spid"; wait "$spid"; src=$?; wait
	expect_eq "$src" 0 && expect_eq "$(code "$r")" 413 && expect_eq "$(code "$q")" 429 &&
	expect_eq "$(body "$q" | ward_json error.field)" max_per_tenant &&
	echo "{\"colour\": 1}" > bad.json &&
	! "$WARD" serve --config bad.json --socket "$D/x.sock" > out 2>&1 &&
	expect_contains "$(cat out)" "unknown key '"'"'colour'"'"'"
'
test_done
