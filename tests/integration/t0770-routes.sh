#!/bin/bash
# The HTTP route table (src/daemon/routes.c) is the API: every row is
# documented in docs/openapi.json with the same method and scope, and every
# documented path and method has a row. Over HTTP: a path the table does not
# know is 404, a known path with another method is 405 with an Allow header
# (before a key is asked for on a public path), and each request's audit
# line carries its row's action.
. "$(dirname "$0")/../lib.sh"

. "$(dirname "$0")/serve-lib.sh"

command -v python3 >/dev/null || test_set_prereq_missing SERVE "python3 is not installed"
A=()

test_expect_success SERVE 'the route table and docs/openapi.json agree (paths, methods, scopes)' '
	"$WARD" serve --print-routes > routes.json &&
	python3 - routes.json "$SRCDIR/docs/openapi.json" <<-\EOF
	import json, re, sys
	routes = json.load(open(sys.argv[1]))
	doc = json.load(open(sys.argv[2]))
	assert len(routes) >= 16, len(routes)
	table = {(r["method"].lower(), r["path"]): r for r in routes}
	assert len(table) == len(routes), "a method and path twice in the table"
	documented = {(m, p): op for p, item in doc["paths"].items()
	              for m, op in item.items() if m != "parameters"}
	missing = sorted(set(table) - set(documented))
	extra = sorted(set(documented) - set(table))
	assert not missing, "routed but not documented: %s" % missing
	assert not extra, "documented but not routed: %s" % extra
	for key, r in table.items():
	    op = documented[key]
	    if r["scope"] is None:
	        assert op.get("security") == [], "%s %s: public, documented with a key" % key
	    else:
	        assert "security" not in op or op["security"], "%s %s: needs a key" % key
	        m = re.search(r"\(scope (\w+)", op.get("summary", ""))
	        assert m and m.group(1) == r["scope"], "%s %s: scope %s, documented %s" % (
	            key + (r["scope"], m and m.group(1)))
	EOF
'

if [ -z "${prereq_missing[SERVE]:-}" ]; then
	"$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes execute,sessions --json | key_of > "$D/k"
	start_daemon
	A=(-H "Authorization: Bearer $(cat "$D/k")")
fi

test_expect_success SERVE 'no row for the path: 404, with a key; 401 without one' '
	for p in /v1/nothing /v1/executions/ /v1/sessions/ /v1/sessions//execute "/v1/sessions/a%2Fb" \
		/v1/sessions/.. /v1/sessions/x/execute/; do
		r=$(api GET "$p" "${A[@]}") && expect_eq "$(code "$r")" 404 &&
		expect_eq "$(body "$r" | ward_json error.code)" not_found || exit 1
	done
	r=$(api GET /v1/nothing) && expect_eq "$(code "$r")" 401
'
test_expect_success SERVE 'a known path with another method: 405 and Allow' '
	curl -sS -m 10 --unix-socket "$SOCK" -X PATCH -D hdr "${A[@]}" -o out \
		-w "%{http_code}" http://w/v1/sessions/se_x > st &&
	expect_eq "$(cat st)" 405 && grep -qi "^Allow: GET, DELETE" hdr &&
	expect_eq "$(ward_json error.code < out)" method_not_allowed &&
	curl -sS -m 10 --unix-socket "$SOCK" -X POST -D hdr2 -o /dev/null -w "%{http_code}" \
		http://w/healthz > st2 &&
	expect_eq "$(cat st2)" 405 && grep -qi "^Allow: GET" hdr2 &&
	r=$(api GET /v1/executions "${A[@]}") && expect_eq "$(code "$r")" 405
'
test_expect_success SERVE 'the audit line carries the row'"'"'s action' '
	r=$(api GET "/v1/sessions/se_nothere" "${A[@]}") && expect_eq "$(code "$r")" 404 &&
	r=$(api DELETE "/v1/executions/ex_nothere" "${A[@]}") && expect_eq "$(code "$r")" 404 &&
	python3 - "$AUDIT" <<-\EOF
	import json, sys
	ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
	req = [e for e in ev if e["event"] == "request"]
	def seen(action, method, path, status):
	    return any(e["action"] == action and e["method"] == method and e["path"] == path
	               and e["status"] == status for e in req)
	assert seen("session", "GET", "/v1/sessions/se_nothere", 404), req
	assert seen("cancel", "DELETE", "/v1/executions/ex_nothere", 404), req
	assert seen("unknown", "GET", "/v1/nothing", 404), req
	EOF
'
test_done
