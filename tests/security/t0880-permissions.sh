#!/bin/bash
# The "permissions" switches (docs/policy.md), each checked from inside a
# sandbox with the exact denial, through the CLI and through the daemon's
# API, each against a control run without the switch so that only the
# switch explains the denial.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../integration/serve-lib.sh"

abi=$("$WARD" doctor --json 2>/dev/null | python3 -c "
import json, sys
print([c for c in json.load(sys.stdin)[\"checks\"] if c[\"id\"] == \"landlock\"][0][\"data\"][\"abi\"] or 0)" 2>/dev/null)
[ "${abi:-0}" -ge 1 ] 2>/dev/null ||
	test_set_prereq_missing LANDLOCK "landlock is not available (ward doctor; the lsm= boot parameter)"

# Host data a read switch mounts: outside /tmp, which names the sandbox's own.
HOSTDIR=$(mktemp -d /var/tmp/ward-perm.XXXXXX)
chmod 755 "$HOSTDIR"
mkdir "$HOSTDIR/data" "$HOSTDIR/other"
echo secret > "$HOSTDIR/data/s"
echo other > "$HOSTDIR/other/o"
chmod -R a+rX "$HOSTDIR"
trap 'stop_daemon; rm -rf "$TEST_TMP" "$HOSTDIR"' EXIT

pol() { printf '%s\n' "$1" > "$TEST_TMP/p.json"; echo "$TEST_TMP/p.json"; }
# py POLICY CODE: python3 inside `ward run` with that policy
py() { "$WARD" run --policy "$(pol "$1")" -- /usr/bin/python3 -u -c "$2"; }

# The checks, one line each: NAME RESULT (errno name or "ok"), for the CLI
# (host paths in $1) and the API alike.
CHECKS='
import errno, os, socket, subprocess, sys
def t(name, fn):
    try:
        fn(); print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
def write(p):
    with open(p, "w") as f: f.write("x")
def connect():
    s = socket.socket(); s.settimeout(2); s.connect(("10.255.255.1", 80))
print("env.FOO", os.environ.get("FOO", "absent"))
print("env.BAR", os.environ.get("BAR", "absent"))
print("env.OPKEEP", os.environ.get("OPKEEP", "absent"))
print("env.OPDROP", os.environ.get("OPDROP", "absent"))
print("proxy", os.environ.get("HTTPS_PROXY", "absent"))
host = sys.argv[1] if len(sys.argv) > 1 else "/nonexistent"
t("read.listed", lambda: open(host + "/data/s").read())
t("read.other", lambda: open(host + "/other/o").read())
t("write.workspace", lambda: write("/workspace/x"))
t("write.tmp", lambda: write("/tmp/x"))
t("write.listed", lambda: write("/workspace/out/x"))
t("write.bind", lambda: write(host + "/data/y"))
t("net", connect)
t("exec.ls", lambda: subprocess.run(["/bin/ls", "/"], stdout=subprocess.DEVNULL))
'
checks() { "$WARD" run --policy "$(pol "$1")" -- /usr/bin/python3 -u -c "$CHECKS" "$HOSTDIR" 2>&1; }
line() { grep "^$2 " <<<"$1" | cut -d" " -f2-; }

test_expect_success LANDLOCK 'CLI: the switches, each denial exact' '
	out=$(FOO=foo BAR=bar checks "{\"permissions\": {\"env\": [\"FOO\"], \"read\": [\"$HOSTDIR/data\"],
		\"write\": [\"/workspace/out\"], \"net\": false, \"run\": false}}") &&
	echo "$out" &&
	expect_eq "$(line "$out" env.FOO)" foo && expect_eq "$(line "$out" env.BAR)" absent &&
	expect_eq "$(line "$out" read.listed)" ok && expect_eq "$(line "$out" read.other)" ENOENT &&
	expect_eq "$(line "$out" write.workspace)" EACCES && expect_eq "$(line "$out" write.tmp)" EACCES &&
	expect_eq "$(line "$out" write.listed)" ok && expect_eq "$(line "$out" write.bind)" EROFS &&
	expect_eq "$(line "$out" net)" ENETUNREACH && expect_eq "$(line "$out" exec.ls)" EACCES
'
test_expect_success LANDLOCK 'CLI: the control run, every switch on, gets through' '
	out=$(FOO=foo BAR=bar checks "{\"permissions\": {\"env\": true, \"read\": true, \"write\": true,
		\"run\": true, \"ffi\": true}, \"mounts\": [{\"host\": \"$HOSTDIR/data\",
		\"inside\": \"$HOSTDIR/data\", \"writable\": true}]}") &&
	echo "$out" &&
	expect_eq "$(line "$out" env.FOO)" absent &&
	expect_eq "$(line "$out" read.listed)" ok && expect_eq "$(line "$out" write.workspace)" ok &&
	expect_eq "$(line "$out" write.tmp)" ok && expect_eq "$(line "$out" write.bind)" ok &&
	expect_eq "$(line "$out" exec.ls)" ok
'
test_expect_success LANDLOCK 'CLI: write false leaves nothing writable, binds read-only' '
	out=$(checks "{\"permissions\": {\"write\": false}, \"mounts\": [{\"host\": \"$HOSTDIR/data\",
		\"inside\": \"$HOSTDIR/data\", \"writable\": true}]}") &&
	expect_eq "$(line "$out" write.workspace)" EACCES && expect_eq "$(line "$out" write.tmp)" EACCES &&
	expect_eq "$(line "$out" write.bind)" EROFS
'
test_expect_success LANDLOCK 'CLI: run false stops a shell from starting anything but itself' '
	out=$("$WARD" run --policy "$(pol "{\"permissions\": {\"run\": false}}")" -- \
		/bin/sh -c "/bin/ls / > /dev/null; echo ls=\$?; /usr/bin/env true; echo env=\$?" 2>&1) &&
	expect_contains "$out" "ls=126" && expect_contains "$out" "env=126" &&
	expect_contains "$out" "Permission denied"
'
test_expect_success LANDLOCK 'CLI: run false still runs the python kernel; subprocess gets EACCES' '
	printf "%s\n" "import subprocess" "try:" "    subprocess.run([\"/bin/true\"])" \
		"except PermissionError as e:" "    print(\"denied\", e.errno)" > cell.py &&
	out=$("$WARD" exec --lang python --policy "$(pol "{\"permissions\": {\"run\": false}}")" -f cell.py 2>&1) &&
	expect_eq "$out" "denied 13"
'
test_expect_success 'CLI: ffi false refuses ctypes at the interpreter (lint), labelled as such' '
	printf "import ctypes\n" > ffi.py &&
	"$WARD" exec --lang python --policy "$(pol "{\"permissions\": {\"ffi\": false}}")" -f ffi.py > out 2>&1
	rc=$? && cat out && expect_eq "$rc" 3 && expect_contains "$(cat out)" "lint.deny_imports: ctypes" &&
	"$WARD" exec --lang python --policy "$(pol "{\"permissions\": {\"ffi\": true}}")" -f ffi.py
'
test_expect_success 'CLI: a native library written by the program cannot be mapped (noexec)' '
	out=$(py "{}" "
import _ctypes, ctypes, shutil
shutil.copy(_ctypes.__file__, \"/workspace/lib.so\")
try:
    ctypes.CDLL(\"/workspace/lib.so\"); print(\"loaded\")
except OSError as e:
    print(\"refused\", \"failed to map\" in str(e) or \"not permitted\" in str(e))
" 2>&1) && expect_eq "$out" "refused True"
'
test_expect_success 'CLI: --print-policy shows the fields the switches became' '
	"$WARD" run --policy "$(pol "{\"permissions\": {\"net\": [\"pypi.org\"], \"run\": false,
		\"write\": [\"/workspace/out\"], \"ffi\": false}}")" --print-policy > eff.json &&
	python3 -c "
import json; d = json.load(open(\"eff.json\"))
assert d[\"network\"][\"mode\"] == \"allowlist\" and d[\"network\"][\"allow\"] == [\"pypi.org\"], d[\"network\"]
assert d[\"exec\"] == \"program\" and d[\"writable\"] == [\"/workspace/out\"]
assert \"ctypes\" in d[\"lint\"][\"deny_imports\"] and \"permissions\" not in d
"
'
test_expect_success 'CLI: bad switches and conflicts are errors naming the field' '
	! "$WARD" run --policy "$(pol "{\"permissions\": {\"net\": true}}")" --print-policy 2> e1 &&
	expect_contains "$(cat e1)" "permissions.net: expected false or an array" &&
	! "$WARD" run --policy "$(pol "{\"permissions\": {\"net\": false}, \"network\": {\"mode\": \"none\"}}")" \
		--print-policy 2> e2 &&
	expect_contains "$(cat e2)" "permissions.net: conflicts with \"network\"" &&
	! "$WARD" run --policy "$(pol "{\"permissions\": {\"run\": \"no\"}}")" --print-policy 2> e3 &&
	expect_contains "$(cat e3)" "permissions.run: expected true or false" &&
	! "$WARD" run --policy "$(pol "{\"permissions\": {\"swim\": false}}")" --print-policy 2> e4 &&
	expect_contains "$(cat e4)" "permissions.swim: unknown field"
'

# --- the API: the operator's policy sets variables, a writable mount and an
# allowlist; a client's permissions may only narrow them ---
if [ -z "${prereq_missing[SERVE]:-}" ]; then
	cat > "$D/operator.json" <<EOF
{"env": {"OPKEEP": "kept", "OPDROP": "dropped"},
 "mounts": [{"host": "$HOSTDIR/data", "inside": "$HOSTDIR/data", "writable": true}],
 "network": {"allow": ["example.test"]}}
EOF
	"$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes execute --json | key_of > "$D/k"
	start_daemon --policy "$D/operator.json"
fi
AUTH=(-H "Authorization: Bearer $(cat "$D/k" 2>/dev/null)")
# run POLICY: the checks as one execution with that policy, stdout on ours
run_api() {
	python3 - "$1" "$CHECKS" "$HOSTDIR" > "$TEST_TMP/req.json" <<'EOF'
import json, sys
code = "import sys\nsys.argv = ['x', %r]\n" % sys.argv[3] + sys.argv[2]
print(json.dumps({"language": "python", "code": code, "policy": json.loads(sys.argv[1]), "timeout": 20}))
EOF
	api POST /v1/executions "${AUTH[@]}" --data-binary @"$TEST_TMP/req.json"
}

test_expect_success SERVE,LANDLOCK 'API: the switches narrow the operator policy, each denial exact' '
	r=$(run_api "{\"permissions\": {\"env\": [\"OPKEEP\"], \"write\": [\"/workspace/out\"],
		\"net\": false, \"run\": false, \"read\": false}}") &&
	expect_eq "$(code "$r")" 200 && out=$(field "$r" "d[\"stdout\"]") && echo "$out" &&
	expect_eq "$(line "$out" env.OPKEEP)" kept && expect_eq "$(line "$out" env.OPDROP)" absent &&
	expect_eq "$(line "$out" proxy)" absent && expect_eq "$(line "$out" net)" ENETUNREACH &&
	expect_eq "$(line "$out" write.workspace)" EACCES && expect_eq "$(line "$out" write.listed)" ok &&
	expect_eq "$(line "$out" write.bind)" EROFS && expect_eq "$(line "$out" exec.ls)" EACCES
'
test_expect_success SERVE,LANDLOCK 'API: the control run with the operator policy alone gets through' '
	r=$(run_api "{}") && expect_eq "$(code "$r")" 200 && out=$(field "$r" "d[\"stdout\"]") &&
	echo "$out" &&
	expect_eq "$(line "$out" env.OPDROP)" dropped && expect_contains "$(line "$out" proxy)" "http://" &&
	expect_eq "$(line "$out" write.workspace)" ok && expect_eq "$(line "$out" write.bind)" ok &&
	expect_eq "$(line "$out" exec.ls)" ok
'
test_expect_success SERVE 'API: ffi false refuses ctypes (policy_violation)' '
	r=$(api POST /v1/executions "${AUTH[@]}" -d "{\"language\": \"python\", \"code\": \"import ctypes\",
		\"policy\": {\"permissions\": {\"ffi\": false}}}") &&
	expect_eq "$(code "$r")" 200 && expect_eq "$(field "$r" "d[\"status\"]")" policy_violation
'
test_expect_success SERVE 'API: a switch can never widen the operator policy' '
	r=$(api POST /v1/executions "${AUTH[@]}" -d "{\"language\": \"python\", \"code\": \"1\",
		\"policy\": {\"permissions\": {\"net\": [\"evil.test\"]}}}") &&
	expect_eq "$(code "$r")" 400 && expect_contains "$(body "$r")" "network.allow[0]" &&
	r=$(api POST /v1/executions "${AUTH[@]}" -d "{\"language\": \"python\", \"code\": \"1\",
		\"policy\": {\"permissions\": {\"read\": [\"/srv\"]}}}") &&
	expect_eq "$(code "$r")" 400 && expect_contains "$(body "$r")" "not one of the operator'"'"'s mounts" &&
	r=$(api POST /v1/executions "${AUTH[@]}" -d "{\"language\": \"python\", \"code\": \"1\",
		\"policy\": {\"permissions\": {\"net\": true}}}") &&
	expect_eq "$(code "$r")" 400 && expect_contains "$(body "$r")" "permissions.net" &&
	r=$(api POST /v1/executions "${AUTH[@]}" -d "{\"language\": \"python\", \"code\": \"1\",
		\"policy\": {\"permissions\": {\"net\": false}, \"network\": {\"mode\": \"none\"}}}") &&
	expect_eq "$(code "$r")" 400 && expect_contains "$(body "$r")" "permissions.net: conflicts with" &&
	r=$(api POST /v1/executions "${AUTH[@]}" -d "{\"language\": \"python\",
		\"code\": \"import os; print(os.environ.get(\\\"NOPE\\\", \\\"absent\\\"))\",
		\"policy\": {\"permissions\": {\"env\": [\"NOPE\", \"HOME\"]}}}") &&
	expect_eq "$(code "$r")" 200 && expect_eq "$(field "$r" "d[\"stdout\"]")" absent
'
test_done
