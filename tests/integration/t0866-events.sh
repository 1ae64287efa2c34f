#!/bin/bash
# GET /v1/events: the audit events as NDJSON as they happen, for the admin
# scope only — a timeout, a memory limit, a policy violation, an egress
# denial and an expired session each arrive; a subscriber that does not
# read loses the oldest lines and is told how many, while the daemon keeps
# answering; the number of subscribers is capped; ?tenant= filters.
. "$(dirname "$0")/../lib.sh"

. "$(dirname "$0")/serve-lib.sh"

STREAMS=()
if [ -z "${prereq_missing[SERVE]:-}" ]; then
	printf '%s\n' '{"max_event_subscribers": 3, "pool": "none",
	  "policy": {"network": {"allow": ["allowed.test"]}}}' > "$D/serve.json"
	"$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes execute,sessions,admin --json |
		key_of > "$D/k_admin"
	"$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes execute,sessions --json |
		key_of > "$D/k_exec"
	start_daemon --config "$D/serve.json"
fi
ADMIN=(-H "Authorization: Bearer $(cat "$D/k_admin" 2>/dev/null)")
EXEC=(-H "Authorization: Bearer $(cat "$D/k_exec" 2>/dev/null)")
# The streams this test opens (curl), ended at its end.
trap 'for p in "${STREAMS[@]}"; do kill "$p" 2>/dev/null; done; stop_daemon; rm -rf "$TEST_TMP"' EXIT

# subscribe FILE [QUERY]: an admin stream into FILE, in the background;
# returns once the daemon has it (its own request line is the first event)
subscribe() {
	curl -sN -m 120 --unix-socket "$SOCK" "${ADMIN[@]}" "http://w/v1/events${2:-}" > "$1" &
	STREAMS+=($!)
	echo $! > "$1.pid"
}
exec_py() {
	local pol=${2:-"{}"}
	api POST /v1/executions "${EXEC[@]}" -d "$(python3 -c 'import json, sys
print(json.dumps({"language": "python", "code": sys.argv[1], "timeout": 5,
                  "policy": json.loads(sys.argv[2])}))' "$1" "$pol")"
}
# event FILE NAME [FIELD VALUE]: the stream has that event (with that field)
event() {
	python3 - "$@" <<-\EOF
	import json, sys
	path, name = sys.argv[1], sys.argv[2]
	for line in open(path):
	    try:
	        e = json.loads(line)
	    except ValueError:
	        continue  # the line being written
	    if e.get("event") == name and (len(sys.argv) < 5 or str(e.get(sys.argv[3])) == sys.argv[4]):
	        sys.exit(0)
	sys.exit(1)
	EOF
}

# A stream whose client is gone holds its place until the next line is
# written to it: each try here writes one (its request's own line).
settle() {
	wait_for "a free place" 'r=$(api GET /v1/events "${ADMIN[@]}" -m 1 2>/dev/null); [ "$(code "$r")" = 200 ]'
}

test_expect_success SERVE 'the stream needs a key (401) with the admin scope (403)' '
	r=$(api GET /v1/events) && expect_eq "$(code "$r")" 401 &&
	r=$(api GET /v1/events "${EXEC[@]}") && expect_eq "$(code "$r")" 403 &&
	expect_contains "$(body "$r")" "admin"
'
test_expect_success SERVE 'a subscriber gets the events as they happen' '
	settle && subscribe all.ndjson && subscribe beta.ndjson "?tenant=beta" &&
	wait_for "the stream to open" "event all.ndjson request action events" &&
	r=$(exec_py "while True: pass" "{\"limits\": {\"timeout\": 1}}") &&
	expect_eq "$(field "$r" "d[\"status\"]")" timeout &&
	wait_for "limit.exceeded (timeout)" "event all.ndjson limit.exceeded limit timeout" &&
	r=$(exec_py "b = bytearray(256 << 20); print(len(b))" "{\"limits\": {\"memory\": \"64M\"}}") &&
	if [ "$(field "$r" "d[\"status\"]")" = memory_limit ]; then
		wait_for "limit.exceeded (memory)" "event all.ndjson limit.exceeded status memory_limit"
	else
		echo "# no memory cgroup here: the memory limit is RLIMIT_AS ($(field "$r" "d[\"status\"]"))"
	fi &&
	r=$(exec_py "import socket" "{\"lint\": {\"deny_imports\": [\"socket\"]}}") &&
	expect_eq "$(field "$r" "d[\"status\"]")" policy_violation &&
	wait_for "policy.violation" "event all.ndjson policy.violation name socket" &&
	r=$(exec_py "import urllib.request
try:
    urllib.request.urlopen(\"http://denied.test/\", timeout=5)
except Exception as e:
    print(type(e).__name__)") &&
	wait_for "egress.denied" "event all.ndjson egress.denied" &&
	s=$(api POST /v1/sessions "${EXEC[@]}" -d "{\"ttl\": 1}") &&
	{ expect_eq "$(code "$s")" 201 || { echo "$s"; false; }; } && id=$(field "$s" "d[\"id\"]") &&
	wait_for "session.expired" "event all.ndjson session.expired session_id $id" 20
'
test_expect_success SERVE 'every line is one JSON object, the audit log'"'"'s own line' '
	python3 - all.ndjson "$AUDIT" <<-\EOF
	import json, sys
	stream = [l for l in open(sys.argv[1]).read().splitlines(True) if l.endswith("\n")]
	log = set(open(sys.argv[2]).read().splitlines(True))
	assert stream, "no lines"
	for l in stream:
	    json.loads(l)
	    assert l in log, "not a line of the audit log: " + l
	EOF
'
test_expect_success SERVE '?tenant= sees only that tenant'"'"'s events' '
	! event beta.ndjson limit.exceeded && ! event beta.ndjson execution.verdict
'
test_expect_success SERVE 'subscribers are capped (503), a closed one frees its place' '
	settle &&
	for i in 1 2 3; do
		subscribe s$i.ndjson && wait_for "stream $i" "grep -q action.:.events s$i.ndjson" || exit 1
	done &&
	r=$(api GET /v1/events "${ADMIN[@]}") && expect_eq "$(code "$r")" 503 &&
	expect_contains "$(body "$r")" "max-event-subscribers" &&
	kill "$(cat s3.ndjson.pid)" && settle
'
test_expect_success SERVE 'a subscriber that does not read loses the oldest lines, told how many; the daemon answers' '
	for p in "${STREAMS[@]}"; do kill "$p" 2>/dev/null; done
	python3 - "$SOCK" "$(cat "$D/k_admin")" <<-\EOF
	import json, socket, sys, time
	path, key = sys.argv[1], sys.argv[2]
	def conn():
	    s = socket.socket(socket.AF_UNIX)
	    s.settimeout(30)
	    s.connect(path)
	    return s
	auth = "Authorization: Bearer %s\r\n" % key
	slow = conn()
	slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
	slow.sendall(("GET /v1/events HTTP/1.1\r\nHost: w\r\n%s\r\n" % auth).encode())
	# many events while it reads nothing: one audit line per request
	fast = conn()
	req = ("GET /v1/sessions HTTP/1.1\r\nHost: w\r\n%s\r\n" % auth).encode()
	t0 = time.monotonic()
	buf = b""
	for i in range(4000):
	    fast.sendall(req)
	    while buf.count(b"\r\n\r\n") == 0 or len(buf) < buf.index(b"\r\n\r\n") + 4 + int(
	            [l for l in buf.split(b"\r\n") if l.lower().startswith(b"content-length:")][0].split(b":")[1]):
	        buf += fast.recv(65536)
	    head, _, rest = buf.partition(b"\r\n\r\n")
	    n = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0].split(b":")[1])
	    assert head.startswith(b"HTTP/1.1 200"), head
	    buf = rest[n:]
	took = time.monotonic() - t0
	# now read: a dropped notice with a count, then lines again
	data = b""
	slow.settimeout(5)
	try:
	    while b"events.dropped" not in data or data.count(b"\n") < 50:
	        chunk = slow.recv(65536)
	        if not chunk:
	            break
	        data += chunk
	except socket.timeout:
	    pass
	drops = [json.loads(l[l.index(b"{"):]) for l in data.split(b"\n") if b"events.dropped" in l]
	print("4000 requests in %.1fs; dropped notices: %s" % (took, drops[:3]))
	assert drops and drops[0]["count"] > 0, data[-500:]
	EOF
	r=$(api GET /healthz) && expect_eq "$(code "$r")" 200
'
test_done
