# tests/integration/serve-lib.sh — what the `ward serve` tests share: the
# SERVE prerequisite, a daemon of the test's own, a curl client and a JSON
# field reader. Sourced after lib.sh; it sets D (the test's directory for
# the daemon), SOCK, KEYS and AUDIT, which the test may use from then on.

D=$TEST_TMP/srv
mkdir -p "$D"
SOCK=$D/run/ward.sock
KEYS=$D/keys
AUDIT=$D/audit.log

help=$("$WARD" serve --help 2>&1)
case $help in
*"usage: ward serve"*) ;;
*) test_set_prereq_missing SERVE "this ward has no 'serve' (${help%%$'\n'*})" ;;
esac
command -v curl >/dev/null || test_set_prereq_missing SERVE "curl is not installed"

key_of() { python3 -c 'import json, sys; print(json.load(sys.stdin)["key"])'; }
id_of() { python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])'; }

# start_daemon [FLAGS...]: the daemon runs under a wrapper that records its
# exit status in $D/rc; its pid is in $D/pid (test bodies run in subshells:
# no $! survives them). Its stderr goes to $D/serve.log.
start_daemon() {
	rm -f "$D/rc"
	( "$WARD" serve --socket "$SOCK" --keys-file "$KEYS" --audit-log "$AUDIT" --grace 1s \
		--state-dir "${SOCK%/*}/state" "$@" >> "$D/serve.log" 2>&1 &
	  echo $! > "$D/pid"; wait $!; echo $? > "$D/rc" ) > /dev/null 2>&1 &
	wait_for "the daemon to answer /healthz" \
		'[ -S "$SOCK" ] && curl -sf --unix-socket "$SOCK" http://w/healthz > /dev/null' && return 0
	cat "$D/serve.log"
	return 1
}
stop_daemon() {
	[ -f "$D/pid" ] && [ ! -f "$D/rc" ] && kill "$(cat "$D/pid")" 2>/dev/null
	wait_for "the daemon to exit" '[ -f "$D/rc" ]'
}
# has_event FILE NAME: an NDJSON stream in FILE has an event NAME, for wait_for
has_event() { grep -qs "\"$2\"" "$1"; }
trap 'stop_daemon; rm -rf "$TEST_TMP"' EXIT

# api METHOD PATH [curl args...]: the body, then the status on the last line
api() {
	local m=$1 p=$2; shift 2
	curl -sS -m 30 --unix-socket "$SOCK" -X "$m" -w '\n%{http_code}' "$@" "http://w$p"
}
body() { sed '$d' <<<"$1"; }
code() { tail -n1 <<<"$1"; }
# jget JSON EXPR: EXPR, a python expression on the parsed JSON d, printed
# (objects, lists, booleans and null as JSON, anything else as it is)
jget() { python3 -c "import json, sys; d = json.load(sys.stdin); v = $2; print(json.dumps(v) if isinstance(v, (dict, list, bool)) or v is None else v)" <<<"$1"; }
# field ANSWER EXPR: jget on the body of an api answer
field() { jget "$(body "$1")" "$2"; }
