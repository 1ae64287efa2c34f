#!/bin/bash
# Sessions and the python zygote (runners/python/zygote.py): a session's
# agent is forked by the zygote, and its python contexts are forked from
# the agent, yet each context is what an exec'd kernel is: its own session,
# only its pipes and the kernel's own fds (never the agent's protocol fds),
# the same signals, environment, cwd, argv, path and ids as a context of a
# cold agent (--zygote none), no agent frame or object in reach, fresh
# random state; contexts stay apart; interrupt, kill and restart work; and
# the zygote runs nothing but the kernel and the agent.
. "$(dirname "$0")/../lib.sh"

. "$(dirname "$0")/serve-lib.sh"

ZR=${WARD_BUILD:-$(dirname "$WARD")/..}/tests/zygote-run
[ -x "$ZR" ] || test_set_prereq_missing ZR "no zygote-run at $ZR (build the tests)"
command -v python3 >/dev/null || test_set_prereq_missing SERVE "python3 is not installed"
"$WARD" exec --lang python -c "1" > /dev/null 2>&1 ||
	test_set_prereq_missing SERVE "ward exec --lang python does not run here"
# As in t0840: a sanitizer build's zygote module cannot load into python.
if grep -qa "__asan_init" "$WARD" 2>/dev/null; then
	test_set_prereq_missing ZYGOTE "a sanitizer build: the zygote's module cannot load into python"
fi
# What the zygote preloads: a module no kernel imports by itself, and
# numpy when the image has it (its random state must not be shared).
MODS=fractions
/usr/bin/python3 -c "import numpy" 2>/dev/null && MODS=fractions,numpy

A=()
if [ -z "${prereq_missing[SERVE]:-}" ]; then
	"$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes sessions,execute --json | key_of > "$D/k"
	A=(-H "Authorization: Bearer $(cat "$D/k")")
fi
new_session() { r=$(api POST /v1/sessions "${A[@]}" -d "{}") && [ "$(code "$r")" = 201 ] && field "$r" 'd["id"]'; }
# run SESSION CODE [CONTEXT [LANGUAGE]]: the call's answer
run() {
	api POST "/v1/sessions/$1/execute" "${A[@]}" -d "$(python3 -c 'import json, sys
print(json.dumps({"code": sys.argv[1], "context": sys.argv[2], "language": sys.argv[3]}))' \
		"$2" "${3:-default}" "${4:-python}")"
}
# out SESSION CODE [CONTEXT]: its stdout, or its error
out() { local r; r=$(run "$@") && field "$r" 'd["stdout"] if d["status"] == "ok" else d["status"] + ": " + str(d["error"])'; }

# Everything a program can see of how it was started. fds: number and
# target (pipe and socket inodes dropped); signals: those not at default.
STATE='import os, re, signal, sys
def link(f):
    try: return re.sub(r"\[\d+\]", "", os.readlink("/proc/self/fd/" + f))
    except OSError: return None   # the listing'"'"'s own fd
print("fds", [(f, l) for f, l in sorted((f, link(f)) for f in os.listdir("/proc/self/fd")) if l])
print("env", sorted(os.environ.items()))
print("where", os.getcwd(), sys.argv, sys.path, os.umask(0o22), os.getuid(), os.getgid(), os.getgroups())
print("session", os.getpid() == os.getpgid(0) == os.getsid(0))
print("signals", [(s.name, str(signal.getsignal(s)).split(" of ")[0]) for s in signal.valid_signals()
                  if s not in (9, 19) and signal.getsignal(s) != signal.SIG_DFL])
st = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
print("status", [st[k].strip() for k in ("SigBlk", "SigIgn", "SigCgt", "NoNewPrivs", "Seccomp", "CapEff")])
print("main", sorted(k for k in globals() if not k.startswith("_")))
import site, sysconfig, tempfile
print("site", site.getusersitepackages(), sysconfig.get_paths("posix_user")["purelib"], tempfile.gettempdir())'

# Where the context comes from: the marker module already imported, and
# the cmdline of its parent (the agent): the zygote's, or agent.py.
ORIGIN='import os, sys
cmd = open("/proc/%d/cmdline" % os.getppid(), "rb").read().split(b"\0")
print("fractions" in sys.modules, [os.path.basename(a.decode()) for a in cmd if a.endswith(b".py")])'

test_expect_success SERVE,ZYGOTE 'a session'"'"'s agent is forked by the zygote, and its python context by the agent' '
	start_daemon --zygote python --zygote-modules $MODS &&
	grep -q "ward-zygote: ready" "$D/serve.log" &&
	S=$(new_session) && echo "$S" > "$D/S" &&
	expect_eq "$(out "$S" "$ORIGIN")" "True ['"'"'zygote.py'"'"']"
'
S=$(cat "$D/S" 2>/dev/null)

test_expect_success SERVE,ZYGOTE 'contexts keep their own globals and modules, and their own random state' '
	out "$S" "import sys, random; x = 41; sys.modules[\"tenant_mark\"] = sys; print(random.getrandbits(64))" > r1 &&
	out "$S" "import sys, random; print(\"x\" in globals(), \"tenant_mark\" in sys.modules); print(random.getrandbits(64))" other > r2 &&
	expect_eq "$(head -n1 r2)" "False False" &&
	[ "$(cat r1)" != "$(tail -n1 r2)" ] &&
	expect_eq "$(out "$S" "print(x + 1, \"tenant_mark\" in sys.modules)")" "42 True" &&
	if [ "$MODS" = fractions,numpy ]; then
		a=$(out "$S" "import numpy; print(numpy.random.randint(1 << 30))" n1) &&
		b=$(out "$S" "import numpy; print(numpy.random.randint(1 << 30))" n2) &&
		[ "$a" != "$b" ]
	fi
'

# The agent keeps the protocol on two private duplicates made first thing
# (runners/session/agent.py: os.dup(0), os.dup(1)): its fds 3 and 4. The
# context can read the agent'"'"'s fd table (same user, as for a cold agent)
# but must hold neither pipe.
test_expect_success SERVE,ZYGOTE 'a context holds none of the agent'"'"'s fds: not its protocol pipes, not its other contexts'"'"' pipes' '
	r=$(out "$S" "import os
agent = os.getppid()
def links(pid):
    d = \"/proc/%s/fd\" % pid
    return {os.readlink(d + \"/\" + f) for f in os.listdir(d) if os.path.exists(d + \"/\" + f)}
proto = {os.readlink(\"/proc/%d/fd/%d\" % (agent, fd)) for fd in (3, 4)}
mine = links(\"self\")
print(len(proto), sorted(p.split(\":\")[0] for p in proto), proto & mine, len(mine & links(agent)))" other) &&
	# the agent holds this context'"'"'s three pipes (their other ends), and
	# the other contexts'"'"': only those three may be shared
	expect_eq "$r" "2 ['"'"'pipe'"'"', '"'"'pipe'"'"'] set() 3"
'

test_expect_success SERVE,ZYGOTE 'no frame and no object of the agent is in a context'"'"'s reach' '
	r=$(out "$S" "import sys, gc
f, files = sys._getframe(), set()
while f: files.add(f.f_code.co_filename); f = f.f_back
print(sorted(x for x in files if \"session\" in x or \"agent\" in x),
      sorted({type(o).__name__ for o in gc.get_objects() if type(o).__name__ in (\"Agent\", \"Context\", \"Exec\", \"Command\", \"Lines\")}),
      [m for m, v in list(sys.modules.items()) if getattr(v, \"__file__\", \"\") and \"agent\" in v.__file__])") &&
	expect_eq "$r" "[] [] []" &&
	# left uncollected (frozen) to spare the agent'"'"'s pages: emptied
	r=$(out "$S" "import gc
gc.unfreeze()
print([sorted(vars(o)) for o in gc.get_objects() if type(o).__name__ == \"Agent\"])") &&
	expect_contains "$r" "[" && ! expect_contains "$r" "contexts" > /dev/null
'

test_expect_success SERVE,ZYGOTE 'interrupt, timeout, kill and restart of a forked context' '
	r=$(api POST "/v1/sessions/$S/execute" "${A[@]}" -d "{\"code\": \"while True: pass\", \"timeout\": 0.5}") &&
	expect_eq "$(field "$r" "d[\"status\"] + \" \" + str(d[\"context_lost\"])")" "timeout False" &&
	expect_eq "$(out "$S" "print(x)")" 41 &&
	r=$(api POST "/v1/sessions/$S/execute" "${A[@]}" -d "{\"code\": \"import signal\\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\\nwhile True: pass\", \"timeout\": 0.5}") &&
	expect_eq "$(field "$r" "d[\"status\"] + \" \" + str(d[\"context_lost\"])")" "timeout True" &&
	r=$(run "$S" "print(\"x\" in globals())") &&
	expect_eq "$(field "$r" "str(d[\"context_new\"]) + \" \" + d[\"stdout\"].strip()")" "True False" &&
	r=$(run "$S" "import os, signal; os.kill(os.getpid(), signal.SIGKILL)") &&
	expect_eq "$(field "$r" "d[\"status\"] + \" \" + str(d[\"signal\"]) + \" \" + str(d[\"context_lost\"])")" "signaled 9 True" &&
	curl -sS -N -m 20 --unix-socket "$SOCK" "${A[@]}" -H "Accept: application/x-ndjson" \
		-d "{\"code\": \"print(1, flush=True)\nwhile True: pass\"}" "http://w/v1/sessions/$S/execute" > stream.ndjson &
	cpid=$!
	wait_for "the call to run" "has_event stream.ndjson stream" &&
	E=$(head -n1 stream.ndjson | ward_json id) &&
	expect_eq "$(code "$(api DELETE "/v1/executions/$E" "${A[@]}")")" 202 &&
	wait $cpid && expect_eq "$(tail -n1 stream.ndjson | ward_json status)" killed &&
	expect_eq "$(out "$S" "print(2 + 2)")" 4
'

test_expect_success SERVE,ZYGOTE 'bash and node contexts of a forked agent are exec'"'"'d as before' '
	r=$(out "$S" "tr \"\\0\" \" \" < /proc/\$PPID/cmdline" default bash) &&
	expect_contains "$r" "/usr/bin/python3 -I -u /opt/ward/runners/bash/kernel.py" &&
	if [ -z "${prereq_missing[NODE]:-}" ]; then
		r=$(out "$S" "console.log(require(\"fs\").readFileSync(\"/proc/self/cmdline\", \"latin1\").split(\"\\0\")[0])" default node) &&
		expect_contains "$r" node
	fi
'

test_expect_success SERVE,ZYGOTE 'a forked context'"'"'s state, saved for the cold comparison' '
	out "$(new_session)" "$STATE" > "$D/state.zygote" &&
	grep -q "^fds " "$D/state.zygote" && stop_daemon
'

test_expect_success SERVE 'with --zygote none the agent and its python contexts start cold' '
	start_daemon --zygote none &&
	S=$(new_session) &&
	expect_eq "$(out "$S" "$ORIGIN")" "False ['"'"'agent.py'"'"']" &&
	out "$(new_session)" "$STATE" > "$D/state.cold"
'

test_expect_success SERVE,ZYGOTE 'a forked context has an exec'"'"'d kernel'"'"'s fds, signals, environment, cwd, argv, path and ids' '
	expect_contains "$(cat "$D/state.cold")" "session True" &&
	diff "$D/state.cold" "$D/state.zygote"
'

test_expect_success ZR,ZYGOTE 'the zygote runs the kernel and the agent, and nothing else a request names' '
	"$ZR" run --zygote --quiet -- /usr/bin/python3 -I -u /opt/ward/runners/python/kernel.py </dev/null >ok.out 2>ok.err &&
	expect_contains "$(cat ok.out)" "status=ok" &&
	! "$ZR" run --zygote -- /bin/sh -c "echo pwned" </dev/null >bad.out 2>bad.err &&
	expect_contains "$(cat bad.out)" "status=error" && ! grep -q pwned bad.out &&
	expect_contains "$(cat bad.err)" "is not a program of this zygote" &&
	! "$ZR" run --zygote -- /usr/bin/python3 -I -u /opt/ward/runners/python/kernel.py -c 1 </dev/null >bad2.out 2>bad2.err &&
	expect_contains "$(cat bad2.err)" "is not a program of this zygote"
'

test_done
