#!/bin/bash
# The egress settings as the operator and the user give them: `ward serve`'s
# egress-* keys and flags and its egress_credentials rules, `ward run`'s
# --net and --egress-* flags. Every bad value is refused before anything
# starts, with a message naming the key or flag; a credential's header
# value never appears in any message.
. "$(dirname "$0")/../lib.sh"

fresh() { local d; d=$(mktemp -d "$TEST_TMP/t.XXXXXX") && cd "$d"; }
SECRET="s3cret-$$-$RANDOM"

# fails_with MESSAGE CMD...: CMD exits 2 printing exactly "ward: error: MESSAGE"
# (MESSAGE "*TEXT": containing TEXT), and the secret is nowhere in it.
fails_with() {
	local msg=$1 rc
	shift
	"$@" > out 2>&1
	rc=$?
	expect_eq "$rc" 2 || return 1
	case "$msg" in
	"*"*) expect_contains "$(cat out)" "${msg#\*}" || return 1 ;;
	*) expect_eq "$(cat out)" "ward: error: $msg" || return 1 ;;
	esac
	if grep -q "$SECRET" out; then
		echo "the secret is in: $(cat out)"
		return 1
	fi
}
# serve_fails FILE MESSAGE: `ward serve --config FILE` is refused so.
serve_fails() { fails_with "$2" "$WARD" serve --config "$1" --socket "$PWD/x.sock"; }

test_expect_success 'serve: the egress keys, their flags and credential rules are read' '
	fresh &&
	cat > good.json <<-EOF &&
	{"egress_resolve": ["pypi.test=127.0.0.1", "v6.test=::1"],
	 "egress_allow_private": ["127.0.0.0/8", "fd00::/8"],
	 "egress_dns": ["127.0.0.1:5353", "[::1]:53"], "egress_ca": "/nonexistent/ca.pem",
	 "egress_credentials": [
	  {"name": "gh", "host": "api.test", "path_prefix": "/v1/",
	   "headers": {"Authorization": "Bearer $SECRET"}},
	  {"name": "cdn.all", "host": "*.example.test", "headers": {"X-Key": "$SECRET", "X-Other": "b"}}]}
	EOF
	"$WARD" serve --config good.json --egress-dns 10.0.0.1 --egress-resolve a.test=10.0.0.2 \
		--egress-allow-private 10.0.0.0/8 --egress-ca /x.pem --help > out 2>&1 &&
	expect_contains "$(cat out)" "--egress-allow-private" &&
	! grep -q "$SECRET" out
'

test_expect_success 'serve: bad egress values are refused, naming the key or flag' '
	fresh &&
	echo "{\"egress_resolve\": [\"ok.test=127.0.0.1\", \"127.1=127.0.0.1\"]}" > a.json &&
	serve_fails a.json "a.json: egress-resolve[1]: \"127.1\" is an address, not a host name; write it as a CIDR: \"127.0.0.1\" (or \"127.0.0.1/32\")" &&
	echo "{\"egress_allow_private\": [\"127.0.0.1/8\"]}" > b.json &&
	serve_fails b.json "b.json: egress-allow-private[0]: \"127.0.0.1/8\" has host bits set beyond the /8 prefix; did you mean \"127.0.0.0/8\"?" &&
	echo "{\"egress_dns\": \"127.0.0.1\"}" > c.json &&
	serve_fails c.json "c.json: egress-dns: expected an array of strings" &&
	fails_with "--egress-dns: expected ADDRESS or ADDRESS:PORT (\"[ADDRESS]:PORT\" for IPv6), got \"dns.test\"" \
		"$WARD" serve --egress-dns dns.test --socket "$PWD/x.sock"
'

test_expect_success 'serve: bad credential rules are refused without showing a value' '
	fresh &&
	C="egress_credentials[0]" &&
	printf "{\"egress_credentials\": [{\"name\": \"gh\", \"host\": \"api.test\", \"headers\": {\"Authorization\": \"Bearer %s\\\\r\\\\nX-Evil: 1\"}}]}" "$SECRET" > crlf.json &&
	serve_fails crlf.json "crlf.json: $C.headers.Authorization: expected a string of at most 8192 bytes without CR, LF or NUL (the value is not shown)" &&
	printf "{\"egress_credentials\": [{\"name\": \"gh\", \"host\": \"api.test\", \"headers\": {\"A\": \"%s\\\\u0000\"}}]}" "$SECRET" > nul.json &&
	serve_fails nul.json "*nul.json:1:" &&
	printf "{\"egress_credentials\": [{\"name\": \"gh\", \"host\": \"api.test\", \"headers\": {\"Authorization\": \"Bearer %s" "$SECRET" > cut.json &&
	serve_fails cut.json "*cut.json:1:" &&
	printf "{\"egress_credentials\": [{\"name\": \"gh\", \"host\": \"api.test\", \"headers\": {\"A\": \"%s\\\\x\"}}]}" "$SECRET" > escape.json &&
	serve_fails escape.json "*escape.json:1:" &&
	echo "{\"egress_credentials\": [{\"name\": \"gh\", \"host\": \"10.0.0.0/8\", \"headers\": {\"A\": \"$SECRET\"}}]}" > cidr.json &&
	serve_fails cidr.json "cidr.json: $C.host: expected a host name or *.domain, without a port, got '"'"'10.0.0.0/8'"'"'" &&
	echo "{\"egress_credentials\": [{\"name\": \"gh\", \"host\": \"a b\", \"headers\": {\"A\": \"$SECRET\"}}]}" > host.json &&
	serve_fails host.json "host.json: $C.host: expected HOST, *.DOMAIN, HOST:PORT, HOST:* or a CIDR, got \"a b\"" &&
	echo "{\"egress_credentials\": [{\"name\": \"GH\", \"host\": \"a.test\", \"headers\": {\"A\": \"$SECRET\"}}]}" > name.json &&
	serve_fails name.json "name.json: $C.name: expected 1 to 64 of a-z, 0-9, '"'"'_'"'"', '"'"'.'"'"' and '"'"'-'"'"'" &&
	echo "{\"egress_credentials\": [{\"name\": \"gh\", \"host\": \"a.test\", \"headers\": {\"A b\": \"$SECRET\"}}]}" > token.json &&
	serve_fails token.json "token.json: $C.headers: a header name is a token (letters, digits and !#\$%&'"'"'*+-.^_\`|~)" &&
	echo "{\"egress_credentials\": [{\"name\": \"gh\", \"host\": \"a.test\", \"headers\": {\"A\": \"$SECRET\", \"a\": \"x\"}}]}" > twice.json &&
	serve_fails twice.json "twice.json: $C.headers.a: given twice (header names ignore case)" &&
	echo "{\"egress_credentials\": [{\"name\": \"gh\", \"host\": \"a.test\", \"path_prefix\": \"v1\", \"headers\": {\"A\": \"$SECRET\"}}]}" > prefix.json &&
	serve_fails prefix.json "prefix.json: $C.path_prefix: expected a path starting with '"'"'/'"'"', without spaces or control characters, at most 1024 bytes" &&
	echo "{\"egress_credentials\": [{\"name\": \"gh\", \"host\": \"a.test\", \"headers\": {\"A\": \"$SECRET\"}, \"secret\": \"$SECRET\"}]}" > key.json &&
	serve_fails key.json "key.json: $C.secret: unknown key (known: name, host, path_prefix, headers)" &&
	echo "{\"egress_credentials\": [{\"name\": \"gh\", \"host\": \"a.test\", \"headers\": {\"A\": \"$SECRET\"}}, {\"name\": \"gh\", \"host\": \"b.test\", \"headers\": {\"A\": \"x\"}}]}" > dup.json &&
	serve_fails dup.json "dup.json: egress_credentials[1].name: '"'"'gh'"'"' is also the name of rule 0"
'

test_expect_success 'serve: at most 32 credential rules, 16 headers each' '
	fresh &&
	python3 - "$SECRET" <<-\EOF &&
	import json, sys
	rule = lambda i, n: {"name": "r%d" % i, "host": "h%d.test" % i,
	                     "headers": {"H%d" % k: sys.argv[1] for k in range(n)}}
	json.dump({"egress_credentials": [rule(i, 1) for i in range(33)]}, open("rules.json", "w"))
	json.dump({"egress_credentials": [rule(0, 17)]}, open("headers.json", "w"))
	json.dump({"egress_credentials": [rule(i, 16) for i in range(32)]}, open("max.json", "w"))
	EOF
	serve_fails rules.json "rules.json: egress_credentials: expected an array of at most 32 rules" &&
	serve_fails headers.json "headers.json: egress_credentials[0].headers: expected an object of 1 to 16 \"Name\": \"value\" headers" &&
	"$WARD" serve --config max.json --help > out 2>&1 && ! grep -q "$SECRET" out
'

test_expect_success 'run: --net and --egress-* values are checked before anything runs' '
	fresh &&
	"$WARD" run --net allow:pypi.test,*.example.test:* --net deny:bad.example.test --print-policy > p.json &&
	expect_eq "$(ward_json network.allow < p.json)" "[\"pypi.test\", \"*.example.test:*\"]" &&
	expect_eq "$(ward_json network.mode < p.json)" allowlist &&
	fails_with "--net: expected HOST, *.DOMAIN, HOST:PORT, HOST:* or a CIDR, got \"a b\"" \
		"$WARD" run --net "allow:a b" -- true &&
	fails_with "--egress-resolve: expected NAME=ADDRESS (an IPv4 or IPv6 address), got \"pypi.test\"" \
		"$WARD" run --egress-resolve pypi.test -- true &&
	fails_with "*did you mean \"10.0.0.0/8\"?" \
		"$WARD" exec --lang python --egress-allow-private 10.1.2.3/8 -c 1
'
test_done
