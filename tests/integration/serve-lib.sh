# tests/integration/serve-lib.sh — what the `ward serve` tests share: the
# SERVE prerequisite, a daemon of the test's own, and a curl client.
# Sourced after lib.sh; the test sets D (its directory), SOCK, KEYS and
# AUDIT first.

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
