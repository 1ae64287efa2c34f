#!/bin/bash
# Egress through `ward serve`: the operator's network policy and --egress-*
# settings (from the config file), one-shots that narrow the operator's
# allowlist (a widening is refused, naming the entry), a live session whose
# allowlist is replaced with PUT /v1/sessions/{id}/network (the next
# connection follows it; audited as session.network), the verdict's network
# object and the egress metrics. Real servers on loopback
# (tests/egress/servers.py); no internet, no DNS.
. "$(dirname "$0")/../lib.sh"

. "$(dirname "$0")/serve-lib.sh"
. "$SRCDIR/tests/egress/egress-lib.sh"
[ -z "${prereq_missing[SERVE]:-}" ] || test_set_prereq_missing EGRESS "${prereq_missing[SERVE]}"
CONF=$D/serve.json

A=() B=()
if [ -z "${prereq_missing[EGRESS]:-}" ] && start_fixtures; then
	python3 - "$CONF" "$DNSP" $EGRESS_NAMES <<-\EOF
	import json, sys
	conf, dnsp, names = sys.argv[1], sys.argv[2], sys.argv[3:]
	json.dump({
	    "egress_resolve": ["%s=127.0.0.1" % n for n in names] + ["leak.test=127.0.0.2"],
	    "egress_allow_private": ["127.0.0.1/32"],
	    "egress_dns": ["127.0.0.1:" + dnsp],
	    "policy": {"network": {"mode": "allowlist",
	                           "allow": ["allowed.test:*", "other.test:*", "plain.test:*"]}},
	    "pool": "none",
	}, open(conf, "w"))
	EOF
	A=(-H "Authorization: Bearer $("$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes execute,sessions,admin --json | key_of)")
	B=(-H "Authorization: Bearer $("$WARD" keys add --keys-file "$KEYS" --tenant beta --scopes execute,sessions --json | key_of)")
	start_daemon --config "$CONF" > "$D/start.log" 2>&1 || test_set_prereq_missing DAEMON "the daemon did not start with the egress settings"
elif [ -z "${prereq_missing[EGRESS]:-}" ]; then
	test_set_prereq_missing EGRESS "the fixture servers did not start"
fi

CURL_SEEN='curl -s -o /tmp/b -w "%{http_code} %header{x-ward-egress}\n" "$@"; cat /tmp/b'
# req NETWORK ARGV...: an execution request running ARGV with the policy's
# network object NETWORK (JSON; "" for none)
req() {
	python3 -c 'import json, sys
b = {"command": sys.argv[2:], "timeout": 30}
if sys.argv[1]: b["policy"] = {"network": json.loads(sys.argv[1])}
print(json.dumps(b))' "$@"
}
# seen URL: the argv that prints what curl saw (status, X-Ward-Egress, body)
seen() { printf '%s\n' sh -c "$CURL_SEEN" curl "$1"; }
oneshot() { local net=$1; shift; api POST /v1/executions "${A[@]}" -d "$(req "$net" "$@")"; }
# cmd SESSION ARGV...: a foreground command in the session
cmd() {
	local s=$1; shift
	api POST "/v1/sessions/$s/commands" "${A[@]}" -d "$(python3 -c 'import json, sys; print(json.dumps({"cmd": sys.argv[1:]}))' "$@")"
}
# the 403 the program sees, as CURL_SEEN prints it
refused() { printf '403 denied\n%s' "$(refused_line "$1" "$2" "$3")"; }
ok_echo() { vget "$1" '" ".join((lambda d: [d["server"], d["headers"]["Host"]])(json.loads(v["stdout"])))'; }

test_expect_success EGRESS 'the daemon starts with the operator'"'"'s egress settings' '
	[ -s "$D/pid" ] && kill -0 "$(cat "$D/pid")" || { cat "$D/start.log" "$D/serve.log"; false; }
'
test_expect_success EGRESS,DAEMON 'a one-shot gets the operator'"'"'s allowlist; the verdict counts its traffic' '
	r=$(oneshot "" curl -sS "http://other.test:$HTTP/echo") && expect_eq "$(code "$r")" 200 &&
	body "$r" > v.json && expect_eq "$(ok_echo v.json)" "http other.test:$HTTP" &&
	expect_eq "$(vget v.json "[v[\"network\"][\"connections\"] >= 1, v[\"network\"][\"bytes_in\"] > 0, v[\"network\"][\"denied\"]]")" "[true, true, []]"
'
test_expect_success EGRESS,DAEMON 'a one-shot narrows the operator'"'"'s allowlist: what it dropped is refused' '
	r=$(oneshot "{\"mode\": \"allowlist\", \"allow\": [\"allowed.test:$HTTP\"]}" sh -c "$CURL_SEEN" curl "http://other.test:$HTTP/echo") &&
	expect_eq "$(code "$r")" 200 && body "$r" > v.json &&
	expect_eq "$(vget v.json "v[\"stdout\"]")" "$(refused other.test "$HTTP" "not in the allowlist")" &&
	expect_eq "$(vget v.json "v[\"network\"][\"denied\"]")" \
		"[{\"host\": \"other.test\", \"port\": $HTTP, \"reason\": \"not in the allowlist\"}]" &&
	expect_eq "$(vget v.json "v[\"network\"][\"denied_total\"]")" 1 &&
	r=$(oneshot "{\"mode\": \"allowlist\", \"allow\": [\"allowed.test:$HTTP\"]}" curl -sS "http://allowed.test:$HTTP/echo") &&
	body "$r" > v.json && expect_eq "$(ok_echo v.json)" "http allowed.test:$HTTP"
'
test_expect_success EGRESS,DAEMON 'a one-shot may turn the network off; the verdict then has no network object' '
	r=$(oneshot "{\"mode\": \"none\"}" sh -c "env | grep -ci proxy") && body "$r" > v.json &&
	expect_eq "$(vget v.json "[v[\"stdout\"].strip(), \"network\" in v]")" "[\"0\", false]"
'
test_expect_success EGRESS,DAEMON 'a one-shot widening the operator'"'"'s allowlist is refused, naming the entry' '
	r=$(oneshot "{\"mode\": \"allowlist\", \"allow\": [\"allowed.test:*\", \"denied.test:*\"]}" true) &&
	{ [ "$(code "$r")" = 400 ] || [ "$(code "$r")" = 403 ]; } &&
	expect_contains "$(body "$r")" "denied.test" &&
	! upstream_saw denied.test
'
test_expect_success EGRESS,DAEMON 'a session'"'"'s allowlist is replaced at runtime; the next connection follows it' '
	r=$(api POST /v1/sessions "${A[@]}" -d "{\"policy\": {\"network\": {\"mode\": \"allowlist\", \"allow\": [\"allowed.test:*\"]}}}") &&
	expect_eq "$(code "$r")" 201 && S=$(field "$r" "d[\"id\"]") && echo "$S" > "$D/S" &&
	r=$(cmd "$S" curl -sS "http://allowed.test:$HTTP/echo") && body "$r" > v.json &&
	expect_eq "$(ok_echo v.json)" "http allowed.test:$HTTP" &&
	r=$(cmd "$S" sh -c "$CURL_SEEN" curl "http://other.test:$HTTP/echo") &&
	expect_eq "$(field "$r" "d[\"stdout\"]")" "$(refused other.test "$HTTP" "not in the allowlist")" &&
	r=$(api PUT "/v1/sessions/$S/network" "${A[@]}" -d "{\"mode\": \"allowlist\", \"allow\": [\"other.test:*\"]}") &&
	expect_eq "$(code "$r")" 200 &&
	r=$(cmd "$S" curl -sS "http://other.test:$HTTP/echo") && body "$r" > v.json &&
	expect_eq "$(ok_echo v.json)" "http other.test:$HTTP" &&
	r=$(cmd "$S" sh -c "$CURL_SEEN" curl "http://allowed.test:$HTTP/echo") &&
	expect_eq "$(field "$r" "d[\"stdout\"]")" "$(refused allowed.test "$HTTP" "not in the allowlist")"
'
S=$(cat "$D/S" 2>/dev/null)
test_expect_success EGRESS,DAEMON 'a runtime update beyond the operator'"'"'s list is refused and changes nothing' '
	r=$(api PUT "/v1/sessions/$S/network" "${A[@]}" -d "{\"mode\": \"allowlist\", \"allow\": [\"other.test:*\", \"denied.test:*\"]}") &&
	{ [ "$(code "$r")" = 400 ] || [ "$(code "$r")" = 403 ]; } && expect_contains "$(body "$r")" "denied.test" &&
	r=$(cmd "$S" curl -sS "http://other.test:$HTTP/echo") && body "$r" > v.json &&
	expect_eq "$(ok_echo v.json)" "http other.test:$HTTP" &&
	r=$(cmd "$S" sh -c "$CURL_SEEN" curl "http://denied.test:$HTTP/echo") &&
	expect_eq "$(field "$r" "d[\"stdout\"]")" "$(refused denied.test "$HTTP" "not in the allowlist")" &&
	! upstream_saw denied.test
'
test_expect_success EGRESS,DAEMON 'a malformed network object is a 400 naming the field; another tenant gets 404' '
	r=$(api PUT "/v1/sessions/$S/network" "${A[@]}" -d "{\"mode\": \"allowlist\", \"allow\": [\"bad host:99999\"]}") &&
	expect_eq "$(code "$r")" 400 && expect_contains "$(body "$r" | ward_json error.field)" "allow" &&
	r=$(api PUT "/v1/sessions/$S/network" "${B[@]}" -d "{\"mode\": \"allowlist\", \"allow\": [\"other.test:*\"]}") &&
	expect_eq "$(code "$r")" 404
'
test_expect_success EGRESS,DAEMON 'the audit log records the update (session.network) and the connections; it verifies' '
	wait_for "the session.network record" "grep -q \"session.network\" \"$AUDIT\"" &&
	grep "session.network" "$AUDIT" | grep -q "$S" &&
	grep -q "other.test" "$AUDIT" && grep -q "not in the allowlist" "$AUDIT" &&
	"$WARD" audit verify "$AUDIT" > /dev/null
'
test_expect_success EGRESS,DAEMON 'metrics carry the egress counters' '
	m=$(api GET /metrics "${A[@]}") && expect_eq "$(code "$m")" 200 &&
	n=$(grep -v "^#" <<<"$m" | grep -c egress) && [ "$n" -ge 2 ] ||
		{ echo "egress lines: $(grep egress <<<"$m")"; false; }
'
test_expect_success EGRESS,DAEMON 'the session ends; its proxy side is gone (a new one starts clean)' '
	r=$(api DELETE "/v1/sessions/$S" "${A[@]}") && expect_eq "$(code "$r")" 200 &&
	r=$(oneshot "" curl -sS "http://allowed.test:$HTTP/echo") && body "$r" > v.json &&
	expect_eq "$(ok_echo v.json)" "http allowed.test:$HTTP"
'
test_done
