#!/bin/bash
# Egress denials: every way out that the allowlist proxy must refuse, each
# with the exact reason in the verdict's network.denied and the exact thing
# the program saw (a 403 with the reason, a SOCKS reply, a reset, REFUSED
# from the DNS stub). Each case is one that would succeed without the
# protection: the names resolve (--egress-resolve), a server answers on
# 127.0.0.1, and a leak listener on 127.0.0.2 (the address no operator flag
# opens) logs any connection that gets through.
. "$(dirname "$0")/../lib.sh"
. "$SRCDIR/tests/egress/egress-lib.sh"

if [ -z "${prereq_missing[EGRESS]:-}" ]; then
	start_fixtures || test_set_prereq_missing EGRESS "the fixture servers did not start"
fi
marker=$((RANDOM * 1000 + $$ % 1000))
LOOP=127.0.0.0/8:*
PRIV2="private address 127.0.0.2 (loopback)"

# out FILE: the program's stdout in the verdict in FILE
out() { vget "$1" 'v["stdout"].rstrip("\n")'; }
# in a sandbox: sh -c "$CURL_SEEN" curl URL ARGS... prints curl's status
# and the X-Ward-Egress header on one line, then the body
CURL_SEEN='curl -s -o /tmp/b -w "%{http_code} %header{x-ward-egress}\n" "$@"; cat /tmp/b'

test_expect_success EGRESS 'a host not on the list: 403 with the reason; the server never sees it' '
	wrun --net "allow:allowed.test:*" -- sh -c "$CURL_SEEN" curl "http://denied.test:$HTTP/echo" > v.json &&
	expect_eq "$(out v.json)" "403 denied
$(refused_line denied.test "$HTTP" "not in the allowlist")" &&
	has_denial v.json denied.test "$HTTP" "not in the allowlist" &&
	expect_eq "$(vget v.json "v[\"network\"][\"denied_total\"]")" 1 &&
	! upstream_saw "denied.test"
'
test_expect_success EGRESS 'the right host on the wrong port' '
	wrun --net "allow:allowed.test:$HTTPS" -- sh -c "$CURL_SEEN" curl "http://allowed.test:$HTTP/echo" > v.json &&
	expect_eq "$(out v.json)" "403 denied
$(refused_line allowed.test "$HTTP" "port $HTTP not allowed for allowed.test")" &&
	has_denial v.json allowed.test "$HTTP" "port $HTTP not allowed for allowed.test" &&
	! upstream_saw "allowed.test:$HTTP"
'
test_expect_success EGRESS 'a deny entry wins over an allow entry' '
	wrun --net "allow:*.test:*" --net "deny:denied.test:*" -- sh -c "$CURL_SEEN" curl "http://denied.test:$HTTP/" > v.json &&
	expect_eq "$(out v.json)" "403 denied
$(refused_line denied.test "$HTTP" "denied by network.deny entry '"'"'denied.test:*'"'"'")" &&
	has_denial v.json denied.test "$HTTP" "denied by network.deny entry '"'"'denied.test:*'"'"'" &&
	! upstream_saw "denied.test"
'
test_expect_success EGRESS 'a literal IP that no CIDR entry allows (the operator opened it, the policy did not)' '
	wrun --net "allow:allowed.test:*" -- env -u NO_PROXY -u no_proxy sh -c "$CURL_SEEN" curl "http://127.0.0.1:$HTTP/echo" > v.json &&
	expect_eq "$(out v.json)" "403 denied
$(refused_line 127.0.0.1 "$HTTP" "not in the allowlist")" &&
	has_denial v.json 127.0.0.1 "$HTTP" "not in the allowlist" &&
	! upstream_saw "\"127.0.0.1:$HTTP\"\\]"
'
test_expect_success EGRESS 'a private address directly, though the policy lists its CIDR' '
	wrun --net "allow:$LOOP" -- env -u NO_PROXY -u no_proxy sh -c "$CURL_SEEN" curl "http://127.0.0.2:$HTTP/" > v.json &&
	expect_eq "$(out v.json)" "403 denied
$(refused_line 127.0.0.2 "$HTTP" "$PRIV2")" &&
	has_denial v.json 127.0.0.2 "$HTTP" "$PRIV2" && no_leak
'
test_expect_success EGRESS 'a private address by decimal, octal and hex spellings (GET and CONNECT)' '
	wrun --net "allow:$LOOP" -- sh -c "for h in 2130706434 0177.0.0.2 0x7f000002; do
		python3 /fixture/proxyq.py get http://\$h:$HTTP/; echo; python3 /fixture/proxyq.py connect \$h:$HTTP; echo; done" > v.json &&
	python3 - v.json "$HTTP" "$PRIV2" <<-\EOF &&
	import json, sys
	v = json.load(open(sys.argv[1])); port, reason = sys.argv[2], sys.argv[3]
	got = [l for l in v["stdout"].split("\n") if l]
	want = []
	for h in ("2130706434", "0177.0.0.2", "0x7f000002"):
	    for _ in ("get", "connect"):
	        want.append(("403 denied", {"ward egress: refused %s:%s: %s" % (x, port, reason) for x in (h, "127.0.0.2")}))
	pairs = [(got[i], got[i + 1]) for i in range(0, 12, 2)]
	for (st, body), (wst, wbodies) in zip(pairs, want):
	    assert st == wst and body in wbodies, (st, body, wbodies)
	EOF
	expect_eq "$(vget v.json "sorted({d[\"reason\"] for d in v[\"network\"][\"denied\"]})")" "[\"$PRIV2\"]" &&
	expect_eq "$(vget v.json "v[\"network\"][\"denied_total\"]")" 6 && no_leak
'
test_expect_success EGRESS 'a private address through a redirect from an allowed host' '
	wrun --net "allow:allowed.test:*,$LOOP" -- env -u NO_PROXY -u no_proxy sh -c "$CURL_SEEN" curl -L \
		"http://allowed.test:$HTTP/redirect?to=http://127.0.0.2:$HTTP/" > v.json &&
	expect_eq "$(out v.json)" "403 denied
$(refused_line 127.0.0.2 "$HTTP" "$PRIV2")" &&
	has_denial v.json 127.0.0.2 "$HTTP" "$PRIV2" && upstream_saw "\"path\": \"/redirect?to=" && no_leak
'
test_expect_success EGRESS 'a private address as IPv4-mapped IPv6 (::ffff:127.0.0.2)' '
	wrun --net "allow:$LOOP" -- sh -c "python3 /fixture/proxyq.py get http://[::ffff:127.0.0.2]:$HTTP/; echo
		python3 /fixture/proxyq.py connect [::ffff:127.0.0.2]:$HTTP" > v.json &&
	python3 - v.json "$HTTP" "$PRIV2" <<-\EOF &&
	import json, sys
	v = json.load(open(sys.argv[1])); port, reason = sys.argv[2], sys.argv[3]
	got = [l for l in v["stdout"].split("\n") if l]
	# judged as the IPv4 address inside; either spelling of it is exact
	reasons = {"private address %s (loopback)" % a for a in ("127.0.0.2", "::ffff:127.0.0.2")}
	ok = {"ward egress: refused %s:%s: %s" % (x, port, r)
	      for x in ("[::ffff:127.0.0.2]", "::ffff:127.0.0.2", "127.0.0.2") for r in reasons}
	assert got[0] == "403 denied" and got[1] in ok, got
	assert got[2] == "403 denied" and got[3] in ok, got
	d = v["network"]["denied"]
	assert len(d) == 2 and all(e["reason"] in reasons and e["port"] == int(port) for e in d), d
	EOF
	no_leak
'
test_expect_success EGRESS 'a private address through a name that resolves to it (proxied and captured)' '
	wrun --net "allow:leak.test:*" -- sh -c "$CURL_SEEN" curl "http://leak.test:$HTTP/" > v.json &&
	expect_eq "$(out v.json)" "403 denied
$(refused_line leak.test "$HTTP" "$PRIV2")" &&
	has_denial v.json leak.test "$HTTP" "$PRIV2" &&
	wrun --net "allow:leak.test:*" -- python3 /fixture/proxyq.py tcp leak.test "$HTTP" > v.json &&
	expect_eq "$(out v.json)" ConnectionResetError &&
	has_denial v.json leak.test "$HTTP" "$PRIV2" && no_leak
'
test_expect_success EGRESS 'DNS rebinding (public, then private, then public...) never reaches 127.0.0.2' '
	q0=$(dns_queries rebind.test) &&
	wrun --net "allow:rebind.test:*" -- sh -c "for i in 1 2 3 4 5 6; do
		curl -s -o /dev/null -w \"%{http_code}\n\" http://rebind.test:$HTTP/echo; done
		for i in 1 2 3 4 5 6; do python3 /fixture/proxyq.py tcp rebind.test $HTTP; done" > v.json &&
	python3 - v.json <<-\EOF &&
	import json, sys
	got = json.load(open(sys.argv[1]))["stdout"].split("\n")[:12]
	assert set(got[:6]) <= {"200", "403"} and "200" in got[:6], got
	assert set(got[6:]) <= {"HTTP/1.1 200 OK", "ConnectionResetError"}, got
	EOF
	has_denial v.json rebind.test "$HTTP" "$PRIV2" &&
	q1=$(dns_queries rebind.test) && [ $((q1 - q0)) -ge 2 ] && no_leak
'
test_expect_success EGRESS 'SNI in a CONNECT tunnel must match the name: other name, no name, right name' '
	wrun --net "allow:allowed.test:*" -- sh -c "
		for sni in \"-servername other.test\" -noservername \"-servername allowed.test\"; do
			openssl s_client -proxy 127.0.0.1:3128 -connect allowed.test:$HTTPS \$sni -CAfile /fixture/ca.pem \
				-verify_return_error < /dev/null > /tmp/s 2>&1; echo rc=\$?
		done; grep -q \"Verify return code: 0 (ok)\" /tmp/s && echo verified" > v.json &&
	expect_eq "$(out v.json)" "rc=1
rc=1
rc=0
verified" &&
	has_denial v.json allowed.test "$HTTPS" "TLS server name '"'"'other.test'"'"' does not match '"'"'allowed.test'"'"'" &&
	has_denial v.json allowed.test "$HTTPS" "TLS without a server name to '"'"'allowed.test'"'"'" &&
	! grep -q "\"sni\": \"other.test\"" "$FX/requests.log" && grep -q "\"sni\": \"allowed.test\"" "$FX/requests.log"
'
test_expect_success EGRESS 'SOCKS5: an allowed name connects, a denied one gets reply 2 (not allowed)' '
	wrun --net "allow:allowed.test:*" -- sh -c "python3 /fixture/proxyq.py socks allowed.test $HTTP
		python3 /fixture/proxyq.py socks denied.test $HTTP" > v.json &&
	expect_eq "$(out v.json)" "socks reply 0
socks reply 2" &&
	has_denial v.json denied.test "$HTTP" "not in the allowlist"
'
test_expect_success EGRESS 'raw sockets are refused (EPERM), packet sockets do not exist (EAFNOSUPPORT)' '
	wrun --net "allow:allowed.test:*" -- python3 -c "import socket
for fam, typ, proto in ((socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
                        (socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6),
                        (socket.AF_PACKET, socket.SOCK_RAW, 0)):
    try: socket.socket(fam, typ, proto); print(\"opened\")
    except OSError as e: print(type(e).__name__, e.errno)" > v.json &&
	expect_eq "$(out v.json)" "PermissionError 1
PermissionError 1
OSError 97"
'
test_expect_success EGRESS 'UDP leaves the sandbox only to its DNS stub: an outside resolver gets nothing' '
	wrun --net "allow:allowed.test:*" -- sh -c "python3 /fixture/dnsq.py 8.8.8.8 53 allowed.test
		python3 /fixture/dnsq.py 127.0.0.1 $DNSP allowed.test" > v.json &&
	python3 - v.json <<-\EOF
	import json, sys
	got = json.load(open(sys.argv[1]))["stdout"].split("\n")
	assert got[0].startswith("no answer: ") and got[1].startswith("no answer: "), got
	EOF
'
test_expect_success EGRESS 'the DNS stub: allowed names get a 198.18/15 address, others REFUSED, nothing forwarded' '
	name=exfil-$marker.denied.test &&
	wrun --net "allow:allowed.test:*" -- sh -c "python3 /fixture/dnsq.py 127.0.0.1 53 $name
		python3 /fixture/dnsq.py 127.0.0.1 53 exfil-$marker.allowed.test
		python3 /fixture/dnsq.py 127.0.0.1 53 allowed.test
		python3 /fixture/dnsq.py 127.0.0.1 53 allowed.test AAAA
		getent hosts $name || echo getent=\$?" > v.json &&
	python3 - v.json <<-\EOF &&
	import ipaddress, json, sys
	got = json.load(open(sys.argv[1]))["stdout"].split("\n")
	assert got[0] == "rcode=5 answers=", got
	assert got[1] == "rcode=5 answers=", got
	rc, _, a = got[2].partition(" answers=")
	assert rc == "rcode=0" and ipaddress.ip_address(a) in ipaddress.ip_network("198.18.0.0/15"), got
	assert got[3] == "rcode=0 answers=", got
	assert got[4] == "getent=2", got
	EOF
	expect_eq "$(dns_queries "$name")" 0 && expect_eq "$(dns_queries "exfil-$marker.allowed.test")" 0
'
test_expect_success EGRESS 'a tool ignoring the proxy variables: an allowed host works, a denied one is reset' '
	wrun --net "allow:allowed.test:*" -- sh -c "curl -sS --noproxy \"*\" -o /dev/null -w \"%{http_code}\n\" http://allowed.test:$HTTP/echo
		python3 /fixture/proxyq.py tcp 192.0.2.10 80
		curl -sS --noproxy \"*\" http://denied.test:$HTTP/ 2>/dev/null; echo curl=\$?" > v.json &&
	expect_eq "$(out v.json)" "200
ConnectionResetError
curl=6" &&
	has_denial v.json 192.0.2.10 80 "not in the allowlist" &&
	upstream_saw "\"Host\", \"allowed.test:$HTTP\"" && ! upstream_saw denied.test
'
test_done
