#!/bin/bash
# /mcp on `ward serve` (the MCP streamable HTTP transport) and `ward mcp
# --connect` (a stdio relay to it), driven by the official MCP TypeScript
# SDK client (tests/npm, pinned) against a real daemon on 127.0.0.1 and its
# unix socket: tools, concurrent calls, images, timeouts, session tools and
# their scope, keys (401, 403, a session bound to its key), DELETE,
# cancellation, protocol errors sent raw, and the bounds.
. "$(dirname "$0")/../lib.sh"

. "$(dirname "$0")/serve-lib.sh"
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export WARD_SDK=$SRCDIR/tests/npm/node_modules/@modelcontextprotocol/sdk/dist/esm
[ -f "$WARD_SDK/client/streamableHttp.js" ] ||
	test_set_prereq_missing SDK "the MCP SDK is not installed (run tests/npm/install.sh)"
MCPJS=$SRCDIR/tests/mcp
export WARD_MCP_URL="http://127.0.0.1:$PORT/mcp"

if [ -z "${prereq_missing[SERVE]:-}" ]; then
	"$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes execute,sessions,files --json | key_of > "$D/k_all"
	"$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes execute,sessions,files --json | key_of > "$D/k_all2"
	"$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes execute --json | key_of > "$D/k_exec"
	"$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes sessions --json | key_of > "$D/k_sess"
	"$WARD" keys add --keys-file "$KEYS" --tenant beta --scopes execute --json | key_of > "$D/k_beta"
	start_daemon --listen "127.0.0.1:$PORT" --mcp-allowed-origins "http://127.0.0.1:1,http://localhost:6274"
fi
K_ALL=$(cat "$D/k_all" 2>/dev/null)
K_EXEC=$(cat "$D/k_exec" 2>/dev/null)
K_SESS=$(cat "$D/k_sess" 2>/dev/null)
K_BETA=$(cat "$D/k_beta" 2>/dev/null)
export WARD_API_KEY=$K_ALL WARD_OTHER_KEY=$(cat "$D/k_all2" 2>/dev/null)

# sdk CASE [VAR=VALUE...]: one case of tests/mcp/http-client.mjs
sdk() { local c=$1; shift; env "$@" timeout 120 node "$MCPJS/http-client.mjs" "$c"; }
# mcp KEY [curl args...]: a raw POST to /mcp; the body, then the status
mcp() {
	local k=$1; shift
	curl -sS -m 30 -w '\n%{http_code}' -H "Authorization: Bearer $k" -H 'Content-Type: application/json' \
		-H 'Accept: application/json, text/event-stream' "$@" "$WARD_MCP_URL"
}
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
# new_session KEY: initializes, prints the Mcp-Session-Id (or the status)
new_session() {
	curl -sS -m 30 -D - -o /dev/null -w '%{http_code}\n' -H "Authorization: Bearer $1" \
		-H 'Content-Type: application/json' -d "$INIT" "$WARD_MCP_URL" |
		python3 -c 'import sys
lines = sys.stdin.read().splitlines()
sid = [l.split(":", 1)[1].strip() for l in lines if l.lower().startswith("mcp-session-id:")]
print(sid[0] if sid else lines[-1])'
}
rpc_code() { body "$1" | ward_json error.code; }

test_expect_success SERVE,NODE,SDK 'the SDK initializes, lists the tools and runs python over /mcp' '
	sdk basic
'
test_expect_success SERVE,NODE,SDK 'concurrent calls on one session each get their own output' '
	sdk concurrent
'
test_expect_success SERVE,NODE,SDK 'a matplotlib chart comes back as an ImageContent PNG' '
	sdk chart
'
test_expect_success SERVE,NODE,SDK 'a timeout is a tool result with isError' '
	sdk timeout
'
test_expect_success SERVE,NODE,SDK 'the session tools work with the sessions scope' '
	sdk sessions
'
test_expect_success SERVE,NODE,SDK 'without the sessions scope the session tools are refused, the rest works' '
	sdk nosessions WARD_API_KEY="$K_EXEC"
'
test_expect_success SERVE,NODE,SDK 'no key and a wrong key are 401 with WWW-Authenticate' '
	curl -sS -D h1 -o b1 -H "Content-Type: application/json" -d "$INIT" "$WARD_MCP_URL" &&
	curl -sS -D h2 -o b2 -H "Authorization: Bearer wk_000000000000_00" -d "$INIT" "$WARD_MCP_URL" &&
	expect_contains "$(head -1 h1)" 401 && expect_contains "$(head -1 h2)" 401 &&
	grep -qi "^WWW-Authenticate: Bearer" h1 && grep -qi "^WWW-Authenticate: Bearer" h2 &&
	sdk refused WARD_API_KEY=wk_000000000000_00 WARD_EXPECT=401
'
test_expect_success SERVE,NODE,SDK 'a key without the execute scope is 403' '
	r=$(mcp "$K_SESS" -d "$INIT") && expect_eq "$(code "$r")" 403 &&
	expect_contains "$(body "$r")" "execute" &&
	sdk refused WARD_API_KEY="$K_SESS" WARD_EXPECT=403
'
test_expect_success SERVE,NODE,SDK 'a session id is 404 to any other key, even of the same tenant' '
	sdk otherkey
'
test_expect_success SERVE,NODE,SDK 'DELETE ends a session and kills what it runs; the id is then 404' '
	sdk deleted
'
test_expect_success SERVE,NODE,SDK 'notifications/cancelled kills the call'"'"'s execution' '
	sdk cancel
'
test_expect_success SERVE,NODE,SDK 'a client that closes its connection cancels its call' '
	sdk hangup
'
test_expect_success SERVE,NODE,SDK 'the POST of a cancelled call ends with 202 and no body' '
	sdk cancelraw
'
test_expect_success SERVE,NODE,SDK 'a request id already in flight in the session is refused' '
	sdk dupid
'
S=
[ -z "${prereq_missing[SERVE]:-}" ] && S=$(new_session "$K_ALL")
test_expect_success SERVE 'protocol errors: bad JSON, a non-request, a batch, an unknown method' '
	r=$(mcp "$K_ALL" -H "Mcp-Session-Id: $S" -d "{not json") &&
	expect_eq "$(code "$r")" 400 && expect_eq "$(rpc_code "$r")" -32700 &&
	r=$(mcp "$K_ALL" -H "Mcp-Session-Id: $S" -d "{\"jsonrpc\":\"2.0\",\"id\":7}") &&
	expect_eq "$(code "$r")" 400 && expect_eq "$(rpc_code "$r")" -32600 &&
	r=$(mcp "$K_ALL" -H "Mcp-Session-Id: $S" -d "[{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}]") &&
	expect_eq "$(code "$r")" 400 && expect_eq "$(rpc_code "$r")" -32600 &&
	r=$(mcp "$K_ALL" -H "Mcp-Session-Id: $S" -d "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"no/such\"}") &&
	expect_eq "$(code "$r")" 200 && expect_eq "$(rpc_code "$r")" -32601 &&
	expect_eq "$(body "$r" | ward_json id)" 9
'
test_expect_success SERVE 'a bad MCP-Protocol-Version is 400; the agreed one is served' '
	r=$(mcp "$K_ALL" -H "Mcp-Session-Id: $S" -H "MCP-Protocol-Version: 2024-01-01" \
		-d "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"ping\"}") &&
	expect_eq "$(code "$r")" 400 && expect_contains "$(body "$r")" MCP-Protocol-Version &&
	r=$(mcp "$K_ALL" -H "Mcp-Session-Id: $S" -H "MCP-Protocol-Version: 2025-06-18" \
		-d "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"ping\"}") &&
	expect_eq "$(code "$r")" 400 &&
	r=$(mcp "$K_ALL" -H "Mcp-Session-Id: $S" -H "MCP-Protocol-Version: 2025-11-25" \
		-d "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"ping\"}") &&
	expect_eq "$(code "$r")" 200 && expect_eq "$(body "$r" | ward_json result)" "{}"
'
test_expect_success SERVE 'no Mcp-Session-Id is 400, an unknown one 404; GET is 405; a notification is 202' '
	r=$(mcp "$K_ALL" -d "{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"ping\"}") &&
	expect_eq "$(code "$r")" 400 &&
	r=$(mcp "$K_ALL" -H "Mcp-Session-Id: $(printf "%064d" 0)" -d "{\"jsonrpc\":\"2.0\",\"id\":14,\"method\":\"ping\"}") &&
	expect_eq "$(code "$r")" 404 &&
	r=$(mcp "$K_ALL" -X GET -H "Mcp-Session-Id: $S") && expect_eq "$(code "$r")" 405 &&
	r=$(mcp "$K_ALL" -H "Mcp-Session-Id: $S" -d "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}") &&
	expect_eq "$(code "$r")" 202 && expect_eq "$(body "$r")" ""
'
test_expect_success SERVE 'a body over max-body is 413' '
	python3 -c "import json; print(json.dumps({\"jsonrpc\": \"2.0\", \"id\": 15, \"method\": \"ping\", \"params\": {\"pad\": \"x\" * (9 << 20)}}))" > big.json &&
	r=$(mcp "$K_ALL" -H "Mcp-Session-Id: $S" --data-binary @big.json) && expect_eq "$(code "$r")" 413
'
test_expect_success SERVE 'a browser Origin not listed in mcp-allowed-origins is 403, a listed one is served' '
	r=$(mcp "$K_ALL" -H "Origin: http://rebound.example" -d "$INIT") && expect_eq "$(code "$r")" 403 &&
	expect_contains "$(body "$r")" Origin &&
	r=$(mcp "$K_ALL" -H "Origin: http://localhost:6274" -d "$INIT") && expect_eq "$(code "$r")" 200 &&
	r=$(mcp "$K_ALL" -H "Origin: http://localhost:62745" -d "$INIT") && expect_eq "$(code "$r")" 403
'
test_expect_success SERVE,NODE,SDK 'ward mcp --connect over the unix socket: the SDK'"'"'s stdio client' '
	WARD_CONNECT="unix://$SOCK" timeout 120 node "$MCPJS/connect-client.mjs" basic
'
# deletes: the DELETE /mcp answered 204 in the audit log
deletes() { grep -c '"method":"DELETE","path":"/mcp".*"status":204' "$AUDIT"; }
test_expect_success SERVE,NODE,SDK 'ward mcp --connect over TCP; the relay ended its session on stdin'"'"'s end' '
	n0=$(deletes) &&
	WARD_CONNECT="http://127.0.0.1:$PORT" timeout 120 node "$MCPJS/connect-client.mjs" basic &&
	wait_for "the DELETE in the audit log" "[ \$(deletes) -gt $n0 ]"
'
test_expect_success SERVE 'ward mcp --connect ends its session on SIGTERM too, and kills what it ran' '
	rm -f term.out && mkfifo in && "$WARD" keys add --keys-file "$KEYS" --tenant delta --scopes execute --json | key_of > k &&
	{ WARD_API_KEY=$(cat k) "$WARD" mcp --connect "unix://$SOCK" < in > term.out 2> err & echo $! > rpid; } &&
	exec 3> in && printf "%s\n" "$INIT" >&3 &&
	wait_for "the initialize answer" "[ -s term.out ]" && n0=$(deletes) && m=$((RANDOM + 5100000)) &&
	printf "%s\n" "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"run_code\",\"arguments\":{\"language\":\"bash\",\"code\":\"sleep $m\"}}}" >&3 &&
	wait_for "the program to run" "pgrep -f \"^sleep $m\$\" > /dev/null" &&
	kill -TERM "$(cat rpid)" && wait_for "the relay to exit" "process_gone $(cat rpid)" &&
	wait_for "the DELETE in the audit log" "[ \$(deletes) -gt $n0 ]" &&
	wait_for "the program to be killed" "! pgrep -f \"^sleep $m\$\" > /dev/null" &&
	exec 3>&- && expect_eq "$(wc -l < term.out)" 1
'
test_expect_success SERVE,NODE,SDK 'ward mcp --connect with a wrong key: a JSON-RPC error, nothing else on stdout' '
	WARD_CONNECT="unix://$SOCK" WARD_API_KEY=wk_000000000000_00 timeout 60 node "$MCPJS/connect-client.mjs" refused &&
	rm -f wrong.out &&
	{ printf "%s\n" "$INIT"; wait_for "the answer" "[ -s wrong.out ]"; } |
		WARD_API_KEY=wk_000000000000_00 timeout 20 "$WARD" mcp --connect "unix://$SOCK" > wrong.out &&
	expect_eq "$(wc -l < wrong.out)" 1 && expect_eq "$(ward_json error.code < wrong.out)" -32603 &&
	expect_contains "$(ward_json error.message < wrong.out)" "HTTP 401" &&
	expect_eq "$(ward_json id < wrong.out)" 1
'
test_expect_success SERVE 'ward mcp --connect refuses a bad URL and a missing key' '
	! WARD_API_KEY= "$WARD" mcp --connect "unix://$SOCK" < /dev/null > out 2> err &&
	expect_contains "$(cat err)" WARD_API_KEY && expect_eq "$(cat out)" "" &&
	! "$WARD" mcp --connect "ftp://x" < /dev/null > out 2> err && expect_contains "$(cat err)" "unix:///PATH"
'
test_expect_success SERVE 'ward mcp --connect relays a text/event-stream answer, event by event' '
	rm -f sse.out port
	python3 "$MCPJS/connect-sse-server.py" > port & spid=$!
	wait_for "the stand-in server" "[ -s port ]" &&
	{ printf "%s\n" "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}" \
		"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}" \
		"{\"jsonrpc\":\"2.0\",\"id\":\"two\",\"method\":\"ping\"}"
	  wait_for "the answers" "[ -f sse.out ] && [ \$(wc -l < sse.out) -ge 4 ]"; } |
		WARD_API_KEY=k timeout 20 "$WARD" mcp --connect "http://127.0.0.1:$(cat port)" > sse.out
	kill $spid &&
	expect_eq "$(wc -l < sse.out)" 4 &&
	expect_eq "$(sed -n 1p sse.out | ward_json method)" notifications/message &&
	expect_eq "$(sed -n 2p sse.out | ward_json result.serverInfo.name)" sse &&
	expect_eq "$(sed -n 4p sse.out | ward_json result.sid)" sse-session-1 &&
	expect_eq "$(sed -n 4p sse.out | ward_json result.version)" 2025-06-18
'
# the bounds, on a daemon of their own
if [ -z "${prereq_missing[SERVE]:-}" ]; then
	stop_daemon
	start_daemon --listen "127.0.0.1:$PORT" --mcp-max-sessions-per-tenant 2 --mcp-max-sessions 3 \
		--mcp-session-idle 2s
fi
test_expect_success SERVE 'MCP sessions: 429 past the tenant'"'"'s bound, 503 past the daemon'"'"'s' '
	a=$(new_session "$K_ALL") && b=$(new_session "$K_EXEC") && expect_eq "${#a}${#b}" 6464 &&
	echo "$a" > "$D/sid_a" &&
	expect_eq "$(new_session "$K_ALL")" 429 &&
	c=$(new_session "$K_BETA") && expect_eq "${#c}" 64 &&
	expect_eq "$(new_session "$K_BETA")" 503 &&
	r=$(mcp "$K_ALL" -d "$INIT") && expect_contains "$(body "$r")" mcp-max-sessions-per-tenant
'
# opened: a new session could be opened (its id printed), for wait_for
opened() { local s; s=$(new_session "$1") && [ "${#s}" = 64 ]; }
test_expect_success SERVE 'an idle MCP session expires: its slot is free and its id is 404' '
	wait_for "an MCP session to expire" "opened \"\$K_BETA\"" 20 &&
	r=$(mcp "$K_ALL" -H "Mcp-Session-Id: $(cat "$D/sid_a")" -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}") &&
	expect_eq "$(code "$r")" 404
'
test_expect_success SERVE,NODE,SDK 'ward mcp --connect opens a new session when the daemon ended its own' '
	k=$("$WARD" keys add --keys-file "$KEYS" --tenant gamma --scopes execute --json | key_of) &&
	WARD_CONNECT="unix://$SOCK" WARD_AUDIT="$AUDIT" WARD_API_KEY=$k timeout 120 node "$MCPJS/connect-client.mjs" reopen
'
test_done
