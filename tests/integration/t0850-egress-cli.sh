#!/bin/bash
# Egress from `ward run`: real clients in a sandbox (curl, python urllib and
# requests, node fetch and http, pip, npm, git) reach real servers on this
# machine through the allowlist proxy, whether they honour the proxy
# variables or not; the verdict counts the traffic; --net none still means
# no network at all. The servers are tests/egress/servers.py; the names are
# mapped by --egress-resolve, loopback is opened by --egress-allow-private
# 127.0.0.1/32. No internet, no DNS.
. "$(dirname "$0")/../lib.sh"
. "$SRCDIR/tests/egress/egress-lib.sh"

if [ -z "${prereq_missing[FIXTURES]:-}" ]; then
	start_fixtures || test_set_prereq_missing FIXTURES "the fixture servers did not start"
	[ -n "$HTTP" ] || test_set_prereq_missing EGRESS "the fixture servers did not start"
fi

# sandbox-side programs, read from /fixture
[ -d "$FX/bin" ] && {
cat > "$FX/bin/urllib_get.py" <<-\EOF
	import json, ssl, sys, urllib.request
	ctx = ssl.create_default_context(cafile="/fixture/ca.pem")
	with urllib.request.urlopen(sys.argv[1], context=ctx, timeout=20) as r:
	    d = json.load(r)
	print(r.status, d["server"], d["headers"]["Host"])
	EOF
cat > "$FX/bin/requests_get.py" <<-\EOF
	import sys, requests
	r = requests.get(sys.argv[1], verify="/fixture/ca.pem", timeout=20)
	d = r.json()
	print(r.status_code, d["server"], d["headers"]["Host"])
	EOF
cat > "$FX/bin/node_get.js" <<-\EOF
	// argv: fetch|http URL; prints "STATUS SERVER HOST"
	const [how, url] = process.argv.slice(2);
	const show = (status, text) => {
		const d = JSON.parse(text);
		const host = Object.keys(d.headers).find((k) => k.toLowerCase() === "host");
		console.log(status, d.server, d.headers[host]);
	};
	if (how === "fetch") {
		fetch(url).then(async (r) => show(r.status, await r.text()))
			.catch((e) => { console.log("error", e.cause ? e.cause.code : e.message); process.exit(1); });
	} else {
		const mod = url.startsWith("https:") ? require("https") : require("http");
		mod.get(url, (r) => {
			let body = "";
			r.on("data", (c) => { body += c; });
			r.on("end", () => show(r.statusCode, body));
		}).on("error", (e) => { console.log("error", e.code); process.exit(1); });
	}
	EOF
chmod a+r "$FX"/bin/*
}

ALLOW=
[ -n "$HTTP" ] && ALLOW="allowed.test:$HTTP,allowed.test:$HTTPS"
# out FILE: the program's stdout in the verdict in FILE
out() { vget "$1" 'v["stdout"].rstrip("\n")'; }
# echo_of FILE: "SERVER HOST" of the /echo answer the program printed
echo_of() { vget "$1" '" ".join((lambda d: [d["server"], d["headers"]["Host"]])(json.loads(v["stdout"])))'; }

# --- the fixtures themselves, on the host: what the sandbox tests rely on
test_expect_success FIXTURES 'fixtures: http, https (test CA), redirect, big, leak listener, DNS' '
	expect_eq "$(curl -sS "http://127.0.0.1:$HTTP/echo" | python3 -c "import json, sys; print(json.load(sys.stdin)[\"headers\"][\"Host\"])")" "127.0.0.1:$HTTP" &&
	expect_eq "$(curl -sS --cacert "$CA" --resolve "allowed.test:$HTTPS:127.0.0.1" -o /dev/null -w "%{http_code}" "https://allowed.test:$HTTPS/echo")" 200 &&
	expect_eq "$(curl -sS -o /dev/null -w "%{http_code} %{redirect_url}" "http://127.0.0.1:$HTTP/redirect?to=http://x.test/")" "302 http://x.test/" &&
	expect_eq "$(curl -sS "http://127.0.0.1:$HTTP/big?bytes=1000001" | wc -c)" 1000001 &&
	expect_eq "$(curl -sS "http://127.0.0.2:$HTTP/")" leak && grep -q "\"port\": $HTTP" "$FX/leaks.log" &&
	: > "$FX/leaks.log" &&
	q() { "$EGRESS_PY" "$FX/bin/dnsq.py" 127.0.0.1 "$DNSP" "$@"; } &&
	expect_eq "$(q allowed.test)" "rcode=0 answers=127.0.0.1" &&
	expect_eq "$(q leak.test)" "rcode=0 answers=127.0.0.2" &&
	expect_eq "$(q allowed.test AAAA)" "rcode=0 answers=" &&
	expect_eq "$(q nowhere.test)" "rcode=3 answers=" &&
	expect_eq "$(q rebind.test; q rebind.test)" "rcode=0 answers=127.0.0.1
rcode=0 answers=127.0.0.2" &&
	expect_eq "$(dns_queries nowhere.test)" 1 &&
	# the next rebind answer is 127.0.0.1 again
	q rebind.test > /dev/null && q rebind.test > /dev/null
'
test_expect_success FIXTURES 'fixtures: pip, npm and git work against them directly' '
	"$EGRESS_PY" -m pip install -q --disable-pip-version-check --no-cache-dir --target "$PWD/lib" \
		--index-url "http://127.0.0.1:$HTTP/simple" wardpkg 2>pip.err &&
	expect_eq "$(PYTHONPATH=$PWD/lib "$EGRESS_PY" -c "import wardpkg; print(wardpkg.VALUE)")" 42 &&
	mkdir n && (cd n && HOME=$TEST_TMP npm_config_cache=$TEST_TMP/npmc npm install --no-audit --no-fund \
		--no-update-notifier --replace-registry-host=always --registry "http://127.0.0.1:$HTTP/" ward-npm-test > ../npm.out 2>&1) &&
	expect_eq "$(cd n && node -e "console.log(require(\"ward-npm-test\").value)")" 42 &&
	HOME=$TEST_TMP git clone -q "http://127.0.0.1:$HTTP/repo.git" repo &&
	expect_eq "$(cat repo/README)" "ward egress test repository"
'

# --- through the sandbox
test_expect_success EGRESS 'the sandbox gets the proxy variables and the DNS stub, nothing else' '
	wrun --net "allow:$ALLOW" -- python3 -c "import os
for k in sorted(os.environ):
    if \"proxy\" in k.lower() or k.endswith((\"_CA_BUNDLE\", \"CERT_FILE\", \"_CERT\", \"_CAINFO\", \"_CA_CERTS\")):
        print(k + \"=\" + os.environ[k])
print([l for l in open(\"/etc/resolv.conf\").read().splitlines() if l.startswith(\"nameserver\")])" > v.json &&
	expect_eq "$(out v.json)" "ALL_PROXY=socks5h://127.0.0.1:3128
HTTPS_PROXY=http://127.0.0.1:3128
HTTP_PROXY=http://127.0.0.1:3128
NO_PROXY=localhost,127.0.0.1,::1
all_proxy=socks5h://127.0.0.1:3128
http_proxy=http://127.0.0.1:3128
https_proxy=http://127.0.0.1:3128
no_proxy=localhost,127.0.0.1,::1
npm_config_https_proxy=http://127.0.0.1:3128
npm_config_proxy=http://127.0.0.1:3128
['"'"'nameserver 127.0.0.1'"'"']"
'
test_expect_success EGRESS 'curl through HTTP_PROXY reaches an allowed host; the verdict counts it' '
	wrun --net "allow:$ALLOW" -- curl -sS "http://allowed.test:$HTTP/echo" > v.json &&
	expect_eq "$(vget v.json "v[\"status\"]")" ok &&
	expect_eq "$(echo_of v.json)" "http allowed.test:$HTTP" &&
	expect_eq "$(vget v.json "v[\"network\"][\"connections\"] >= 1 and v[\"network\"][\"bytes_in\"] > 0 and v[\"network\"][\"bytes_out\"] > 0")" true &&
	expect_eq "$(vget v.json "[v[\"network\"][\"denied\"], v[\"network\"][\"denied_total\"], \"limit\" in v[\"network\"]]")" "[[], 0, false]"
'
test_expect_success EGRESS 'curl through HTTPS_PROXY (CONNECT) verifies the server against the test CA' '
	wrun --net "allow:$ALLOW" -- curl -sS --cacert /fixture/ca.pem "https://allowed.test:$HTTPS/echo" > v.json &&
	expect_eq "$(echo_of v.json)" "https allowed.test:$HTTPS" &&
	expect_eq "$(vget v.json "v[\"network\"][\"connections\"] >= 1")" true
'
test_expect_success EGRESS 'curl --noproxy "*" (captured, not proxied) over http and https' '
	wrun --net "allow:$ALLOW" -- sh -c "curl -sS --noproxy \"*\" http://allowed.test:$HTTP/echo; echo;
		curl -sS --noproxy \"*\" --cacert /fixture/ca.pem https://allowed.test:$HTTPS/echo" > v.json &&
	expect_eq "$(vget v.json "[(d[\"server\"], d[\"headers\"][\"Host\"]) for d in map(json.loads, v[\"stdout\"].split(\"\n\"))]")" \
		"[[\"http\", \"allowed.test:$HTTP\"], [\"https\", \"allowed.test:$HTTPS\"]]" &&
	expect_eq "$(vget v.json "v[\"network\"][\"connections\"] >= 2")" true
'
test_expect_success EGRESS 'python urllib, through the proxy, over http and https' '
	wrun --net "allow:$ALLOW" -- sh -c "python3 /fixture/urllib_get.py http://allowed.test:$HTTP/echo &&
		python3 /fixture/urllib_get.py https://allowed.test:$HTTPS/echo" > v.json &&
	expect_eq "$(out v.json)" "200 http allowed.test:$HTTP
200 https allowed.test:$HTTPS"
'
test_expect_success EGRESS 'python requests, through the proxy, over http and https' '
	wrun --net "allow:$ALLOW" -- sh -c "python3 /fixture/requests_get.py http://allowed.test:$HTTP/echo &&
		python3 /fixture/requests_get.py https://allowed.test:$HTTPS/echo" > v.json &&
	expect_eq "$(out v.json)" "200 http allowed.test:$HTTP
200 https allowed.test:$HTTPS"
'
test_expect_success EGRESS,NODE 'node fetch and http.get (they ignore the proxy variables: captured)' '
	wrun --net "allow:$ALLOW" -e NODE_EXTRA_CA_CERTS=/fixture/ca.pem -- sh -c "
		node /fixture/node_get.js fetch http://allowed.test:$HTTP/echo &&
		node /fixture/node_get.js fetch https://allowed.test:$HTTPS/echo &&
		node /fixture/node_get.js http http://allowed.test:$HTTP/echo &&
		node /fixture/node_get.js http https://allowed.test:$HTTPS/echo" > v.json &&
	expect_eq "$(out v.json)" "200 http allowed.test:$HTTP
200 https allowed.test:$HTTPS
200 http allowed.test:$HTTP
200 https allowed.test:$HTTPS"
'
test_expect_success EGRESS 'a plain socket to an allowed name (resolved by the stub) is captured and served' '
	wrun --net "allow:$ALLOW" -- python3 /fixture/proxyq.py tcp allowed.test "$HTTP" > v.json &&
	expect_eq "$(out v.json)" "HTTP/1.1 200 OK"
'
test_expect_success EGRESS 'pip installs a wheel from the index through the proxy; it imports' '
	wrun --net "allow:pypi.test:$HTTP" -- sh -c "python3 -m pip install -q --disable-pip-version-check --no-cache-dir \
		--index-url http://pypi.test:$HTTP/simple --trusted-host pypi.test --target /workspace/lib wardpkg &&
		PYTHONPATH=/workspace/lib python3 -c \"import wardpkg; print(wardpkg.VALUE)\"" > v.json &&
	expect_eq "$(vget v.json "v[\"status\"]")" ok && expect_eq "$(out v.json)" 42 &&
	upstream_saw "\"path\": \"/packages/wardpkg-1.0-py3-none-any.whl\""
'
test_expect_success EGRESS,NODE 'npm installs a package from the registry through the proxy; it loads' '
	wrun --net "allow:npm.test:$HTTP" -e npm_config_cache=/tmp/.npm -- sh -c "npm install --no-audit --no-fund \
		--no-update-notifier --registry http://npm.test:$HTTP/ ward-npm-test > /tmp/npm.log 2>&1 || { cat /tmp/npm.log; exit 1; }
		node -e \"console.log(require(\\\"ward-npm-test\\\").value)\"" > v.json &&
	expect_eq "$(vget v.json "v[\"status\"]")" ok && expect_eq "$(out v.json)" 42 &&
	upstream_saw "\"path\": \"/ward-npm-test/-/ward-npm-test-1.0.0.tgz\""
'
test_expect_success EGRESS 'git clones a repository over HTTP through the proxy' '
	wrun --net "allow:git.test:$HTTP" -- sh -c "git clone -q http://git.test:$HTTP/repo.git /workspace/repo &&
		cat /workspace/repo/README" > v.json &&
	expect_eq "$(vget v.json "v[\"status\"]")" ok && expect_eq "$(out v.json)" "ward egress test repository"
'
test_expect_success EGRESS 'a refusal is prompt and the program sees the reason' '
	t0=$(date +%s%N) &&
	wrun --net "allow:$ALLOW" -- curl -sS "http://denied.test:$HTTP/" > v.json &&
	ms=$(( ($(date +%s%N) - t0) / 1000000 )) &&
	expect_eq "$(out v.json)" "$(refused_line denied.test "$HTTP" "not in the allowlist")" &&
	{ [ "$ms" -lt 5000 ] || { echo "the refused run took $ms ms"; false; }; }
'
test_expect_success EGRESS '--net none (even with the operator flags) means no network, failing fast' '
	wrun --net none -- python3 -c "import os, socket, time
for a in ((\"192.0.2.1\", 80), (\"127.0.0.1\", 3128)):
    t = time.monotonic()
    try: socket.create_connection(a, timeout=5); print(\"connected\")
    except OSError as e: print(type(e).__name__, e.errno, time.monotonic() - t < 1)
print(sorted(k for k in os.environ if \"proxy\" in k.lower()))" > v.json &&
	expect_eq "$(out v.json)" "OSError 101 True
ConnectionRefusedError 111 True
[]" &&
	expect_eq "$(vget v.json "\"network\" in v")" false
'
test_done
