#!/bin/bash
# What an agent learns from a refused connection through `ward serve`: the
# error of python code whose request the allowlist refused carries a hint
# naming the host, the reason and what the allowlist holds (so a model asks
# for the right host instead of retrying), and a session's call reports its
# own share of the session's egress (its connections and refusals, not the
# calls' before it). Real servers on loopback (tests/egress/servers.py).
. "$(dirname "$0")/../lib.sh"

. "$(dirname "$0")/serve-lib.sh"
. "$SRCDIR/tests/egress/egress-lib.sh"
[ -z "${prereq_missing[SERVE]:-}" ] || test_set_prereq_missing EGRESS "${prereq_missing[SERVE]}"
CONF=$D/serve.json

A=()
if [ -z "${prereq_missing[EGRESS]:-}" ] && start_fixtures; then
	python3 - "$CONF" "$DNSP" "$HTTP" $EGRESS_NAMES <<-\EOF
	import json, sys
	conf, dnsp, http, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
	json.dump({
	    "egress_resolve": ["%s=127.0.0.1" % n for n in names],
	    "egress_allow_private": ["127.0.0.1/32"],
	    "egress_dns": ["127.0.0.1:" + dnsp],
	    "policy": {"network": {"mode": "allowlist", "allow": ["allowed.test:" + http]}},
	    "pool": "none",
	}, open(conf, "w"))
	EOF
	A=(-H "Authorization: Bearer $("$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes execute,sessions --json | key_of)")
	start_daemon --config "$CONF" > "$D/start.log" 2>&1 || test_set_prereq_missing DAEMON "the daemon did not start with the egress settings"
elif [ -z "${prereq_missing[EGRESS]:-}" ]; then
	test_set_prereq_missing EGRESS "the fixture servers did not start"
fi

# py CODE: an execution request body running python CODE
py() { python3 -c 'import json, sys; print(json.dumps({"language": "python", "code": sys.argv[1], "timeout": 30}))' "$1"; }
GET='import urllib.request
urllib.request.urlopen("http://%s:%s/echo").read()'
get() { printf "$GET" "$1" "$HTTP"; }

test_expect_success EGRESS,DAEMON 'a refused request'"'"'s error names the host, the reason and the allowlist' '
	r=$(api POST /v1/executions "${A[@]}" -d "$(py "$(get other.test)")") &&
	expect_eq "$(code "$r")" 200 && body "$r" > v.json &&
	expect_eq "$(vget v.json "[v[\"status\"], v[\"error\"][\"name\"]]")" "[\"error\", \"HTTPError\"]" &&
	expect_eq "$(vget v.json "v[\"error\"][\"hint\"]")" \
		"the sandbox'"'"'s network allowlist refused other.test:$HTTP (not in the allowlist); it allows: allowed.test:$HTTP"
'
test_expect_success EGRESS,DAEMON 'an error that is not about the network gets no egress hint' '
	r=$(api POST /v1/executions "${A[@]}" -d "$(py "import urllib.request
try:
    urllib.request.urlopen(\"http://other.test:$HTTP/\")
except Exception:
    pass
1/0")") && body "$r" > v.json &&
	expect_eq "$(vget v.json "[v[\"error\"][\"name\"], \"hint\" in v[\"error\"], v[\"network\"][\"denied_total\"]]")" \
		"[\"ZeroDivisionError\", false, 1]"
'
test_expect_success EGRESS,DAEMON 'a session'"'"'s call reports its own connections and refusals' '
	s=$(body "$(api POST /v1/sessions "${A[@]}" -d "{}")" | id_of) &&
	r=$(api POST "/v1/sessions/$s/execute" "${A[@]}" -d "$(py "$(get allowed.test)")") &&
	body "$r" > v1.json &&
	expect_eq "$(vget v1.json "[v[\"status\"], v[\"network\"][\"connections\"], v[\"network\"][\"denied_total\"]]")" "[\"ok\", 1, 0]" &&
	r=$(api POST "/v1/sessions/$s/execute" "${A[@]}" -d "$(py "$(get other.test)")") &&
	body "$r" > v2.json &&
	expect_eq "$(vget v2.json "[v[\"network\"][\"connections\"], v[\"network\"][\"denied\"]]")" \
		"[0, [{\"host\": \"other.test\", \"port\": $HTTP, \"reason\": \"not in the allowlist\"}]]" &&
	expect_eq "$(vget v2.json "v[\"error\"][\"hint\"]")" \
		"the sandbox'"'"'s network allowlist refused other.test:$HTTP (not in the allowlist); it allows: allowed.test:$HTTP" &&
	r=$(api POST "/v1/sessions/$s/execute" "${A[@]}" -d "$(py "1")") && body "$r" > v3.json &&
	expect_eq "$(vget v3.json "[v[\"network\"][\"connections\"], v[\"network\"][\"denied\"], v[\"network\"][\"denied_total\"]]")" "[0, [], 0]"
'

test_done
