# tests/egress/egress-lib.sh — what the egress tests share: the EGRESS
# prerequisite, the fixture servers (tests/egress/servers.py) and the
# operator flags that open them to a sandbox, and readers for the verdict's
# network object. Sourced after lib.sh (and serve-lib.sh, if any); it sets
# FX (the fixtures' directory), HTTP, HTTPS, DNSP (their ports), CA (the
# test CA) and EGRESS_OP (the operator flags), and owns the EXIT trap.
#
# Nothing here reaches beyond loopback or asks a real DNS server: names are
# mapped with --egress-resolve (rebind.test alone goes to the fixture's DNS
# server), and 127.0.0.1/32 is the only private range the operator opens.
# 127.0.0.2 stays refused: the leak listeners there log any connection that
# gets through.

EGRESS_PY=/usr/bin/python3
FX=$TEST_TMP/fx
FXPID=
HTTP= HTTPS= DNSP= CA=$FX/tls/ca.pem
EGRESS_OP=()
# the names the proxy resolves by itself, and what to
EGRESS_NAMES="allowed.test other.test pypi.test npm.test git.test api.test plain.test denied.test"

# FIXTURES: the servers can be built and run here; EGRESS: and this ward
# has the proxy (its `run --help` offers `--net allow:`)
[ -x "$EGRESS_PY" ] || test_set_prereq_missing FIXTURES "no /usr/bin/python3 for the fixture servers"
for p in openssl curl git npm node; do
	command -v "$p" >/dev/null || test_set_prereq_missing FIXTURES "$p is not installed (the fixtures need it)"
done
help=$("$WARD" run --help 2>&1)
case $help in
*"--net allow:"*) ;;
*) test_set_prereq_missing EGRESS "ward has no egress proxy" ;;
esac
[ -z "${prereq_missing[FIXTURES]:-}" ] || test_set_prereq_missing EGRESS "${prereq_missing[FIXTURES]}"

# stop_fixtures: kills the servers this test started (their pid only)
stop_fixtures() {
	[ -n "$FXPID" ] && kill "$FXPID" 2>/dev/null
	[ -f "$FX/pid" ] && kill "$(cat "$FX/pid")" 2>/dev/null
	return 0
}
if declare -F stop_daemon > /dev/null; then
	trap 'stop_fixtures; [ ! -f "$D/pid" ] || stop_daemon; rm -rf "$TEST_TMP"' EXIT
else
	trap 'stop_fixtures; rm -rf "$TEST_TMP"' EXIT
fi

# start_fixtures: starts tests/egress/servers.py on fresh ports and waits
# for its servers.json; sets HTTP, HTTPS, DNSP and EGRESS_OP.
start_fixtures() {
	"$EGRESS_PY" "$SRCDIR/tests/egress/servers.py" "$FX" > "$TEST_TMP/fx.log" 2>&1 &
	FXPID=$!
	if ! wait_for "the fixture servers" '[ -s "$FX/servers.json" ]' 60; then
		cat "$TEST_TMP/fx.log"
		return 1
	fi
	eval "$("$EGRESS_PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
print("HTTP=%d HTTPS=%d DNSP=%d" % (d["http"], d["https"], d["dns"]))' "$FX/servers.json")"
	EGRESS_OP=(--egress-allow-private 127.0.0.1/32 --egress-dns "127.0.0.1:$DNSP")
	local n
	for n in $EGRESS_NAMES; do EGRESS_OP+=(--egress-resolve "$n=127.0.0.1"); done
	EGRESS_OP+=(--egress-resolve leak.test=127.0.0.2)
	mkdir -p "$FX/bin" &&
	cp "$SRCDIR/tests/egress/dnsq.py" "$SRCDIR/tests/egress/proxyq.py" "$CA" "$FX/bin/" &&
	chmod -R a+rX "$FX/bin"
}

# wrun ARGS... -- PROGRAM...: ward run with the operator flags and, at
# /fixture, the test CA (ca.pem) and the query tools (dnsq.py, proxyq.py);
# the verdict JSON on stdout
wrun() {
	"$WARD" run --json --timeout 60 --ro "$FX/bin:/fixture" "${EGRESS_OP[@]}" "$@"
}

# vget FILE EXPR: EXPR, a python expression on the verdict v in FILE
vget() {
	python3 -c "import json, sys; v = json.load(open(sys.argv[1])); x = $2; print(json.dumps(x) if isinstance(x, (dict, list, bool)) or x is None else x)" "$1"
}
# has_denial FILE HOST PORT REASON: the verdict in FILE lists exactly this
# refusal in network.denied
has_denial() {
	python3 - "$@" <<-\EOF
	import json, sys
	f, host, port, reason = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
	v = json.load(open(f))
	d = v.get("network", {}).get("denied", [])
	want = {"host": host, "port": port, "reason": reason}
	if not any({k: e.get(k) for k in want} == want for e in d):
	    print("no denial %s in network.denied: %s" % (json.dumps(want), json.dumps(d)))
	    sys.exit(1)
	EOF
}
# refused_line HOST PORT REASON: the 403 body the proxy sends
refused_line() { printf 'ward egress: refused %s:%s: %s' "$1" "$2" "$3"; }
# no_leak: nothing reached the leak listeners on 127.0.0.2
no_leak() {
	if [ -s "$FX/leaks.log" ]; then
		echo "a connection reached 127.0.0.2:"; cat "$FX/leaks.log"
		return 1
	fi
}
# dns_queries NAME: how many queries for NAME the fixture DNS server saw
dns_queries() { grep -c "^$1 " "$FX/dns.log" || true; }
# upstream_saw PATTERN: the fixture servers logged a request matching it
upstream_saw() { grep -q -- "$1" "$FX/requests.log"; }
