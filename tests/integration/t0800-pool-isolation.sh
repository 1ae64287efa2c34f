#!/bin/bash
# The warm pool: a one-shot served by a pooled kernel sees nothing of the
# one before it (module globals, sys.modules, files in /tmp and /workspace,
# environment, open fds, child processes): each request gets a sandbox of
# its own, destroyed after. A pooled kernel never claimed holds no tenant
# data; a request whose effective policy differs misses the pool; a request
# refused at admission takes no entry; nothing of the pool is left once the
# daemon has stopped.
. "$(dirname "$0")/../lib.sh"

. "$(dirname "$0")/serve-lib.sh"

command -v python3 >/dev/null || test_set_prereq_missing SERVE "python3 is not installed"
"$WARD" exec --lang python -c "1" > /dev/null 2>&1 ||
	test_set_prereq_missing SERVE "ward exec --lang python does not run here"

A=() M=()
if [ -z "${prereq_missing[SERVE]:-}" ]; then
	"$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes execute --json | key_of > "$D/k"
	"$WARD" keys add --keys-file "$KEYS" --tenant other --scopes execute --json | key_of > "$D/k2"
	"$WARD" keys add --keys-file "$KEYS" --tenant ops --scopes admin --json | key_of > "$D/km"
	printf '{"tenants": {"other": {"max_per_tenant": 1}}}\n' > "$D/conf.json"
	start_daemon --config "$D/conf.json" --pool python=2
	A=(-H "Authorization: Bearer $(cat "$D/k")")
	B=(-H "Authorization: Bearer $(cat "$D/k2")")
	M=(-H "Authorization: Bearer $(cat "$D/km")")
fi

# metric NAME: its python sample from /metrics
metric() {
	curl -sS -m 10 --unix-socket "$SOCK" "${M[@]}" http://w/metrics |
		sed -n "s/^$1{language=\"python\"} //p"
}
pool_full() { [ "$(metric ward_pool_size)" = 2 ]; }
# run FILE CODE [extra JSON members]: a python one-shot, its final JSON to FILE
run() {
	python3 -c 'import json, sys; d = {"language": "python", "code": sys.argv[1]}; d.update(json.loads(sys.argv[2] or "{}")); print(json.dumps(d))' \
		"$2" "${3:-}" > "$1.req" &&
	curl -sS -m 30 --unix-socket "$SOCK" "${A[@]}" --data-binary @"$1.req" http://w/v1/executions > "$1"
}
# what a request can see of the sandbox it runs in, as one JSON line
OBSERVE='import json, os, sys
print(json.dumps({
  "global": "leak_global" in globals(),
  "module": "leak_module" in sys.modules,
  "tmp": sorted(os.listdir("/tmp")),
  "workspace": sorted(os.listdir("/workspace")),
  "env": os.environ.get("LEAK_ENV"),
  "fds": sorted(int(f) for f in os.listdir("/proc/self/fd")),
  "procs": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
}))'
POLLUTE='import os, subprocess, sys, types
leak_global = 1
sys.modules["leak_module"] = types.ModuleType("leak_module")
open("/tmp/leak", "w").write("x")
open("/workspace/leak", "w").write("x")
os.environ["LEAK_ENV"] = "1"
leak_fd = os.open("/tmp/leak", os.O_RDONLY)
os.set_inheritable(leak_fd, True)
leak_child = subprocess.Popen(["sleep", "300"], start_new_session=True)
print("polluted")'
stdout_of() { ward_json stdout < "$1"; }

test_expect_success SERVE 'a bad --pool is refused, naming the setting and what it expects' '
	for bad in python=x ruby=1 python=65 python python=-1; do
		"$WARD" serve --socket "$D/bad.sock" --keys-file "$KEYS" --pool "$bad" > bad.out 2>&1
		expect_eq "$?" 2 || exit 1
		expect_contains "$(cat bad.out)" "pool: expected LANGUAGE=N" || exit 1
	done
	for bad in "{\"python\": 65}" "{\"ruby\": 1}" "{\"python\": \"x\"}" 3; do
		echo "{\"pool\": $bad}" > bad.json &&
		"$WARD" serve --config bad.json --socket "$D/bad.sock" --keys-file "$KEYS" > bad.out 2>&1
		expect_eq "$?" 2 || exit 1
		expect_contains "$(cat bad.out)" "pool" || exit 1
	done
'

test_expect_success SERVE 'the pool fills (python=2)' '
	wait_for "two pooled python kernels" pool_full
'

test_expect_success SERVE 'a request after a polluting one sees nothing of it: a fresh pooled sandbox each' '
	h0=$(metric ward_pool_hits_total) &&
	run base.json "$OBSERVE" && wait_for "the pool to refill" pool_full &&
	run dirty.json "$POLLUTE" && wait_for "the pool to refill" pool_full &&
	run after.json "$OBSERVE" &&
	expect_eq "$(ward_json status < dirty.json)" ok &&
	expect_eq "$(stdout_of dirty.json)" polluted &&
	expect_eq "$(metric ward_pool_hits_total)" $((h0 + 3)) &&
	python3 - base.json dirty.json after.json <<-\EOF
	import json, sys
	base, dirty, after = (json.load(open(f)) for f in sys.argv[1:])
	ids = {d["sandbox_id"] for d in (base, dirty, after)}
	assert len(ids) == 3, ids
	b, a = json.loads(base["stdout"]), json.loads(after["stdout"])
	assert not a["global"] and not a["module"], a
	assert "leak" not in a["tmp"] and a["workspace"] == [], a
	assert a["env"] is None, a
	assert a["fds"] == b["fds"], (b["fds"], a["fds"])
	assert a["procs"] == b["procs"], (b["procs"], a["procs"])
	EOF
'

# what a sandbox's setup leaves that a pooled start could get wrong: the
# kernel's signal mask and dispositions (a refill runs on a worker thread,
# which blocks every signal), its umask, ids, limits, and the modes of the
# directories the setup made
SETUP='import json, os, resource
st = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
print(json.dumps({
  "sig": [st[k].strip() for k in ("SigBlk", "SigIgn", "NoNewPrivs", "Seccomp", "CapEff")],
  "umask": os.umask(0o22),
  "ids": [os.getuid(), os.getgid(), os.getgroups()],
  "rlimits": [resource.getrlimit(getattr(resource, r)) for r in ("RLIMIT_NOFILE", "RLIMIT_FSIZE", "RLIMIT_CORE", "RLIMIT_STACK", "RLIMIT_NPROC")],
  "modes": [oct(os.stat(p).st_mode) for p in ("/", "/etc", "/tmp", "/workspace", "/dev")],
  "cwd": os.getcwd(),
}))'

test_expect_success SERVE 'a pooled sandbox is set up like a cold one (signals, umask, ids, limits, modes)' '
	wait_for "the pool to refill" pool_full &&
	h0=$(metric ward_pool_hits_total) &&
	run warm.json "$SETUP" && run cold.json "$SETUP" "{\"timeout\": 7}" &&
	expect_eq "$(metric ward_pool_hits_total)" $((h0 + 1)) &&
	expect_eq "$(stdout_of warm.json)" "$(stdout_of cold.json)"
'

# the daemon's children that are sandboxes' inits; a pooled kernel is the
# only child of its init
kernels() {
	local d=$(cat "$D/pid") c p
	for c in /proc/[0-9]*; do
		[ "$(sed -n "s/^PPid:\t//p" "$c/status" 2>/dev/null)" = "$d" ] || continue
		for p in $(cat "$c"/task/*/children 2>/dev/null); do echo "$p"; done
	done
}

test_expect_success SERVE 'a pooled kernel never claimed holds no tenant data' '
	m=secret-$RANDOM$RANDOM &&
	run sec.json "print(open(\"in.txt\").read())" \
		"{\"files\": [{\"path\": \"in.txt\", \"content\": \"$m\"}]}" &&
	expect_eq "$(stdout_of sec.json)" "$m" &&
	wait_for "the pool to refill" pool_full &&
	ks=$(kernels) && [ -n "$ks" ] &&
	for k in $ks; do
		ls -A "/proc/$k/root/workspace" > ws.txt || exit 1
		expect_eq "$(cat ws.txt)" "" || exit 1
		! grep -rqs "$m" "/proc/$k/root/workspace" "/proc/$k/root/tmp" "/proc/$k/environ" \
			"/proc/$k/cmdline" || { echo "# $m found in kernel $k"; exit 1; }
	done
'

test_expect_success SERVE 'another effective policy, or files over the claim bound, miss the pool and start cold' '
	h0=$(metric ward_pool_hits_total) m0=$(metric ward_pool_misses_total) &&
	run pol.json "print(2)" "{\"policy\": {\"limits\": {\"memory\": \"100M\"}}}" &&
	expect_eq "$(stdout_of pol.json)" 2 &&
	python3 -c "import json; print(json.dumps({\"language\": \"python\", \"code\": \"import os; print(os.path.getsize(\\\"big.txt\\\"))\", \"files\": [{\"path\": \"big.txt\", \"content\": \"x\" * (300 << 10)}]}))" > big.req &&
	curl -sS -m 30 --unix-socket "$SOCK" "${A[@]}" --data-binary @big.req http://w/v1/executions > big.json &&
	expect_eq "$(stdout_of big.json)" $((300 << 10)) &&
	expect_eq "$(metric ward_pool_hits_total)" "$h0" &&
	expect_eq "$(metric ward_pool_misses_total)" $((m0 + 2))
'

test_expect_success SERVE 'a request refused at admission takes no pooled kernel (the claim comes after it)' '
	wait_for "the pool to refill" pool_full &&
	curl -sS -m 30 --unix-socket "$SOCK" "${B[@]}" -d "{\"command\": [\"sleep\", \"30\"]}" \
		http://w/v1/executions > /dev/null 2>&1 &
	wait_for "the other tenant to run" "curl -sS --unix-socket \"$SOCK\" \"\${M[@]}\" http://w/metrics | grep -q \"ward_tenant_active_sandboxes{tenant=\\\"other\\\"} 1\"" &&
	h0=$(metric ward_pool_hits_total) m0=$(metric ward_pool_misses_total) &&
	r=$(api POST /v1/executions "${B[@]}" -d "{\"language\": \"python\", \"code\": \"print(1)\"}") &&
	expect_eq "$(code "$r")" 429 &&
	expect_eq "$(metric ward_pool_size)" 2 &&
	expect_eq "$(metric ward_pool_hits_total)" "$h0" &&
	expect_eq "$(metric ward_pool_misses_total)" "$m0"
'

test_expect_success SERVE 'after the daemon stops, no pooled kernel, sandbox process or cgroup of it is left' '
	wait_for "the pool to refill" pool_full &&
	dpid=$(cat "$D/pid") && ks=$(kernels) && [ -n "$ks" ] &&
	stop_daemon && expect_eq "$(cat "$D/rc")" 0 &&
	for k in $ks; do process_gone "$k" || { echo "# kernel $k is left"; exit 1; }; done &&
	expect_eq "$(find /sys/fs/cgroup -maxdepth 6 -name "ward-$dpid-*" 2>/dev/null | wc -l)" 0
'

test_done
