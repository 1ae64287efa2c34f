#!/bin/bash
# Credentials that never enter the sandbox: the operator's egress_credentials
# (config file) and a session's own rule (API, scope `credentials`) are
# injected by the proxy over HTTP and over HTTPS (intercepted with the
# daemon's CA, which the sandbox trusts through /etc/ward/egress-ca.pem), only
# on the rule's path prefix; a host without a rule is tunnelled untouched;
# and the secret is nowhere the sandbox can read, nor in the audit log, the
# daemon's stderr or its state directory. Real servers on loopback
# (tests/egress/servers.py) log what they receive.
. "$(dirname "$0")/../lib.sh"

. "$SRCDIR/tests/integration/serve-lib.sh"
. "$SRCDIR/tests/egress/egress-lib.sh"
[ -z "${prereq_missing[SERVE]:-}" ] || test_set_prereq_missing EGRESS "${prereq_missing[SERVE]}"
CONF=$D/serve.json
marker=$((RANDOM * 1000 + $$ % 1000))
SECRET_OP=s3cret-op-$marker-$(od -An -tx1 -N8 /dev/urandom | tr -d " \n")
SECRET_SESS=s3cret-sess-$marker-$(od -An -tx1 -N8 /dev/urandom | tr -d " \n")
WARD_CA=/etc/ward/egress-ca.pem

A=() NOCRED=()
if [ -z "${prereq_missing[EGRESS]:-}" ] && start_fixtures; then
	python3 - "$CONF" "$DNSP" "$CA" "$SECRET_OP" $EGRESS_NAMES <<-\EOF
	import json, sys
	conf, dnsp, ca, secret, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
	json.dump({
	    "egress_resolve": ["%s=127.0.0.1" % n for n in names],
	    "egress_allow_private": ["127.0.0.1/32"],
	    "egress_dns": ["127.0.0.1:" + dnsp],
	    "egress_ca": ca,
	    "egress_credentials": [{"name": "api-token", "host": "api.test", "path_prefix": "/v1/",
	                            "headers": {"Authorization": "Bearer " + secret}}],
	    "policy": {"network": {"mode": "allowlist",
	                           "allow": ["api.test:*", "allowed.test:*", "plain.test:*"]}},
	    "pool": "none",
	}, open(conf, "w"))
	EOF
	chmod 600 "$CONF"
	A=(-H "Authorization: Bearer $("$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes execute,sessions,credentials --json | key_of)")
	NOCRED=(-H "Authorization: Bearer $("$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes execute,sessions --json | key_of)")
	start_daemon --config "$CONF" > "$D/start.log" 2>&1 || test_set_prereq_missing DAEMON "the daemon did not start with the egress settings"
elif [ -z "${prereq_missing[EGRESS]:-}" ]; then
	test_set_prereq_missing EGRESS "the fixture servers did not start"
fi

# req ARGV...: a one-shot running ARGV, with the test CA at /workspace/ca.pem
req() {
	python3 -c 'import base64, json, sys
ca = base64.b64encode(open(sys.argv[1], "rb").read()).decode()
print(json.dumps({"command": sys.argv[2:], "timeout": 30,
                  "files": [{"path": "ca.pem", "content": ca, "encoding": "base64"}]}))' "$CA" "$@"
}
oneshot() { api POST /v1/executions "${A[@]}" -d "$(req "$@")"; }
cmd() {
	local s=$1; shift
	api POST "/v1/sessions/$s/commands" "${A[@]}" -d "$(python3 -c 'import json, sys; print(json.dumps({"cmd": sys.argv[1:]}))' "$@")"
}
# headers_of SERVER PATH NAME: the values of header NAME in the requests the
# fixture SERVER ("http" or "https") got for PATH, as a JSON list per request
headers_of() {
	python3 - "$FX/requests.log" "$@" <<-\EOF
	import json, sys
	log, server, path, name = sys.argv[1:]
	for line in open(log):
	    r = json.loads(line)
	    if r.get("server") == server and r.get("path") == path:
	        print(json.dumps([v for k, v in r["headers"] if k.lower() == name.lower()]))
	EOF
}
# The search runs inside the sandbox with the secret reversed in its argv
# (the secret itself must not be put there by the test). It reads every
# file outside /usr (the host's, read-only), /sys and /dev, and every
# process's environ and cmdline it may read, and prints "clean N" (files
# read) or each path holding the secret.
FIND='import os, sys
secret = sys.argv[1][::-1].encode()
hits, n = [], 0
def scan(p):
    global n
    try:
        with open(p, "rb") as f: data = f.read(64 << 20)
    except OSError: return
    n += 1
    if secret in data: hits.append(p)
for top in os.listdir("/"):
    if top in ("usr", "proc", "sys", "dev") or not os.path.isdir("/" + top) or os.path.islink("/" + top):
        if os.path.isfile("/" + top): scan("/" + top)
        continue
    for d, dirs, files in os.walk("/" + top):
        for f in files: scan(os.path.join(d, f))
for pid in [p for p in os.listdir("/proc") if p.isdigit()] + ["self"]:
    for f in ("environ", "cmdline"): scan("/proc/%s/%s" % (pid, f))
print(" ".join(hits) if hits else "clean %d" % (n > 0))'
rev() { python3 -c 'import sys; print(sys.argv[1][::-1])' "$1"; }

test_expect_success EGRESS 'the daemon starts with the operator'"'"'s egress settings' '
	[ -s "$D/pid" ] && kill -0 "$(cat "$D/pid")" || { cat "$D/start.log" "$D/serve.log"; false; }
'
test_expect_success EGRESS,DAEMON 'HTTP: the operator'"'"'s header is injected on the prefix, replacing the client'"'"'s' '
	r=$(oneshot sh -c "curl -sS -o /dev/null -w \"%{http_code}\n\" http://api.test:$HTTP/v1/echo
		curl -sS -o /dev/null -w \"%{http_code}\n\" -H \"Authorization: Bearer mine\" http://api.test:$HTTP/v1/echo?2") &&
	expect_eq "$(code "$r")" 200 && expect_eq "$(field "$r" "d[\"stdout\"]")" "200
200" &&
	expect_eq "$(headers_of http /v1/echo Authorization)" "[\"Bearer $SECRET_OP\"]" &&
	expect_eq "$(headers_of http "/v1/echo?2" Authorization)" "[\"Bearer $SECRET_OP\"]"
'
test_expect_success EGRESS,DAEMON 'HTTPS: intercepted for the host with a rule; curl and requests trust the sandbox'"'"'s bundle' '
	r=$(oneshot sh -c "curl -sS -o /dev/null -w \"%{http_code}\n\" https://api.test:$HTTPS/v1/echo
		python3 -c \"import requests; print(requests.get(\\\"https://api.test:$HTTPS/v1/echo?py\\\").status_code)\"
		echo \$SSL_CERT_FILE \$REQUESTS_CA_BUNDLE \$NODE_EXTRA_CA_CERTS \$PIP_CERT \$CURL_CA_BUNDLE \$GIT_SSL_CAINFO
		grep -c PRIVATE $WARD_CA") &&
	expect_eq "$(field "$r" "d[\"stdout\"]")" "200
200
$WARD_CA $WARD_CA $WARD_CA $WARD_CA $WARD_CA $WARD_CA
0" &&
	expect_eq "$(headers_of https /v1/echo Authorization)" "[\"Bearer $SECRET_OP\"]" &&
	expect_eq "$(headers_of https "/v1/echo?py" Authorization)" "[\"Bearer $SECRET_OP\"]"
'
test_expect_success EGRESS,DAEMON 'a path outside the rule'"'"'s prefix gets no header' '
	r=$(oneshot sh -c "curl -sS -o /dev/null -w \"%{http_code}\n\" http://api.test:$HTTP/other/echo
		curl -sS -o /dev/null -w \"%{http_code}\n\" https://api.test:$HTTPS/other/echo") &&
	expect_eq "$(field "$r" "d[\"stdout\"]")" "200
200" &&
	expect_eq "$(headers_of http /other/echo Authorization)" "[]" &&
	expect_eq "$(headers_of https /other/echo Authorization)" "[]"
'
test_expect_success EGRESS,DAEMON 'a host without a rule is tunnelled untouched: the client sees the server'"'"'s own certificate' '
	r=$(oneshot sh -c "curl -sS -o /dev/null -w \"%{http_code}\n\" --cacert /workspace/ca.pem https://allowed.test:$HTTPS/echo
		curl -sS -o /dev/null https://allowed.test:$HTTPS/echo?ward-ca 2>/dev/null; echo curl=\$?") &&
	expect_eq "$(field "$r" "d[\"stdout\"]")" "200
curl=60" &&
	expect_eq "$(headers_of https /echo Authorization)" "[]" &&
	expect_eq "$(headers_of https "/echo?ward-ca" Authorization)" ""
'
test_expect_success EGRESS,DAEMON 'a session'"'"'s own rule needs the credentials scope, and is injected' '
	body=$(python3 -c "import json, sys; print(json.dumps({\"credentials\": [{\"name\": \"sess-key\", \"host\": \"plain.test\",
		\"path_prefix\": \"/\", \"headers\": {\"X-Api-Key\": sys.argv[1]}}]}))" "$SECRET_SESS") &&
	r=$(api POST /v1/sessions "${NOCRED[@]}" -d "$body") && expect_eq "$(code "$r")" 403 &&
	expect_contains "$(body "$r" | ward_json error.message)" credentials &&
	r=$(api POST /v1/sessions "${A[@]}" -d "$body") && expect_eq "$(code "$r")" 201 &&
	S=$(field "$r" "d[\"id\"]") && echo "$S" > "$D/S" &&
	r=$(cmd "$S" curl -sS -o /dev/null -w "%{http_code}" "http://plain.test:$HTTP/sess/echo") &&
	expect_eq "$(field "$r" "d[\"stdout\"]")" 200 &&
	expect_eq "$(headers_of http /sess/echo X-Api-Key)" "[\"$SECRET_SESS\"]" &&
	r=$(cmd "$S" curl -sS -o /dev/null -w "%{http_code}" "http://allowed.test:$HTTP/sess2/echo") &&
	expect_eq "$(headers_of http /sess2/echo X-Api-Key)" "[]"
'
S=$(cat "$D/S" 2>/dev/null)
test_expect_success EGRESS,DAEMON 'no file or environment a one-shot can read holds the operator'"'"'s secret' '
	r=$(oneshot python3 -c "$FIND" "$(rev "$SECRET_OP")") &&
	expect_eq "$(field "$r" "d[\"stdout\"]")" "clean 1" &&
	r=$(oneshot sh -c "env; cat /proc/1/environ 2>/dev/null") && ! expect_contains "$(body "$r")" "$SECRET_OP" > /dev/null
'
test_expect_success EGRESS,DAEMON 'no file or environment the session can read holds either secret' '
	r=$(cmd "$S" python3 -c "$FIND" "$(rev "$SECRET_SESS")") && expect_eq "$(field "$r" "d[\"stdout\"]")" "clean 1" &&
	r=$(cmd "$S" python3 -c "$FIND" "$(rev "$SECRET_OP")") && expect_eq "$(field "$r" "d[\"stdout\"]")" "clean 1" &&
	r=$(cmd "$S" sh -c "env") && ! expect_contains "$(body "$r")" "s3cret-" > /dev/null
'
test_expect_success EGRESS,DAEMON 'the audit log names the rules, never their secrets; nor do stderr and the state' '
	{ grep -q "api-token" "$AUDIT" && grep -q "sess-key" "$AUDIT"; } || { echo "the audit log lacks a rule name"; exit 1; }
	bad=$(grep -rl -e "$SECRET_OP" -e "$SECRET_SESS" "$AUDIT" "$D/serve.log" "$D/run" 2>/dev/null)
	[ -z "$bad" ] || { echo "a secret is in: $bad"; false; }
'
test_done
