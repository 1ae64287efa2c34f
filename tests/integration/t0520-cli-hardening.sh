#!/bin/bash
# The command line against a hostile local user and a newcomer: destinations
# and bind sources reached through symlinks, FIFOs given as files, --rw
# ownership, usage figures after a timeout, --print-policy, the no-cgroup
# note, error text, and the README's serve snippet run as written.
. "$(dirname "$0")/../lib.sh"

test_user_prereqs
if [ -z "${prereq_missing[USER]:-}" ] &&
   ! setpriv --reuid="$TEST_USER" --regid="$TEST_USER" --init-groups test -x "$WARD"; then
	test_set_prereq_missing USER "$TEST_USER cannot reach $WARD"
fi
# Each test in a directory of its own, reachable by $TEST_USER.
fresh() { local d; d=$(mktemp -d "$TEST_TMP/t.XXXXXX") && chmod 755 "$d" && cd "$d"; }
as_user() { setpriv --reuid="$TEST_USER" --regid="$TEST_USER" --init-groups "$@"; }
command -v curl >/dev/null || test_set_prereq_missing CURL "curl is not installed"
command -v meson >/dev/null && [ -d "${WARD_BUILD:-}" ] ||
	test_set_prereq_missing BUILD "needs meson and WARD_BUILD (the build directory)"

# --- §6: --artifacts never writes through a symlink ---
test_expect_success PYTHON '--artifacts DIR: a symlink at DIR is refused before the run' '
	fresh &&
	mkdir victim && ln -s "$PWD/victim" out &&
	"$WARD" exec --lang python --artifacts out -c "open(\"planted\", \"w\").write(\"x\")" 2>err; rc=$?
	expect_eq $rc 2 &&
	expect_eq "$(cat err)" "ward: error: --artifacts: '"'"'out'"'"' is, or passes through, a symbolic link (ward never writes through one; give the real path)" &&
	expect_eq "$(ls victim)" ""
'
test_expect_success PYTHON '--artifacts DIR: a symlink in the middle of DIR is refused' '
	fresh &&
	mkdir victim && ln -s "$PWD/victim" lnk &&
	"$WARD" exec --lang python --artifacts lnk/sub -c "open(\"planted\", \"w\").write(\"x\")" 2>err; rc=$?
	expect_eq $rc 2 && expect_contains "$(cat err)" "passes through, a symbolic link" &&
	expect_eq "$(ls victim)" ""
'
test_expect_success PYTHON '--artifacts DIR: a symlink planted during the run is refused when copying' '
	fresh && mkdir victim || exit 1
	{ "$WARD" exec --lang python --artifacts "$PWD/late" -c "import time
open(\"planted\", \"w\").write(\"x\"); print(\"ready\", flush=True); time.sleep(3)" >out.txt 2>err; echo $? >rc; } &
	for i in $(seq 300); do grep -q ready out.txt 2>/dev/null && break; sleep 0.1; done
	ln -s "$PWD/victim" late; wait
	expect_contains "$(cat err)" "ward: artifacts: refusing the destination '"'"'$PWD/late'"'"': it is, or passes through, a symbolic link" &&
	expect_eq "$(ls victim)" "" && expect_eq "$(cat rc)" 4
'
# late_link CODE [FLAGS...]: runs CODE with --artifacts late, plants late ->
# victim once the code has written /sig/ready, and prints ward's exit status.
late_link() {
	local code=$1; shift
	mkdir -p victim sig && chmod 777 sig &&
	{ "$WARD" exec --lang python "$@" --rw "$PWD/sig:/sig" --artifacts "$PWD/late" -c "import time
open(\"planted\", \"w\").write(\"x\"); open(\"/sig/ready\", \"w\").close(); time.sleep(2)
$code" >out.txt 2>err; echo $? >rc; } &
	for i in $(seq 300); do [ -e sig/ready ] && break; sleep 0.1; done
	ln -s "$PWD/victim" late; wait
	cat rc
}
test_expect_success PYTHON '--artifacts DIR: refused when copying, --json exits 4 as well' '
	fresh && rc=$(late_link "pass" --json) &&
	expect_eq "$rc" 4 && expect_contains "$(cat err)" "refusing the destination" &&
	expect_eq "$(ls victim)" ""
'
test_expect_success PYTHON '--artifacts DIR: refused when copying, the code'"'"'s own error comes first (1)' '
	fresh && rc=$(late_link "raise ValueError(1)") &&
	expect_eq "$rc" 1 && expect_contains "$(cat err)" "refusing the destination" &&
	expect_eq "$(ls victim)" ""
'
test_expect_success PYTHON '--artifacts DIR: a plain directory is created and filled' '
	fresh &&
	"$WARD" exec --lang python --artifacts new -c "open(\"made\", \"w\").write(\"x\")" >/dev/null 2>err &&
	expect_eq "$(cat new/made)" x
'

# --- §6: bind sources are judged by what they are, not by their name ---
bind_refused() { # LINK-TARGET EXPECTED-TAIL
	ln -s "$1" "$PWD/src" &&
	"$WARD" run --ro "$PWD/src:/x" -- ls /x >out 2>err; rc=$?
	expect_eq $rc 125 && expect_eq "$(cat out)" "" &&
	expect_eq "$(cat err)" "ward: error: mount: cannot share '$PWD/src' from the host: $2"
}
test_expect_success 'a symlink to /proc is not bound' '
	fresh &&
	bind_refused /proc "it resolves to '"'"'/proc'"'"', and /proc is a host kernel interface"
'
test_expect_success 'a symlink into /sys is not bound' '
	fresh &&
	bind_refused /sys/kernel "it resolves to '"'"'/sys/kernel'"'"', and /sys is a host kernel interface"
'
test_expect_success 'a symlink to /dev/shm is not bound' '
	fresh &&
	bind_refused /dev/shm "it resolves to '"'"'/dev/shm'"'"', and /dev is a host kernel interface"
'
test_expect_success 'a symlink to the host root is not bound' '
	fresh &&
	bind_refused / "it is the host'"'"'s root (\"/\"); bind a specific directory"
'
test_expect_success REALROOT 'procfs mounted elsewhere is not bound (its type, not its path)' '
	fresh &&
	mkdir p && unshare -m sh -c "mount -t proc proc $PWD/p && \"$WARD\" run --ro $PWD/p:/x -- ls /x" >out 2>err; rc=$?
	expect_eq $rc 125 && expect_eq "$(cat err)" "ward: error: mount: cannot share '"'"'$PWD/p'"'"' from the host: it is a procfs"
'
test_expect_success USER 'rootless: a symlink to /proc is not bound either' '
	fresh &&
	d=$(mktemp -d) && chmod 755 "$d" && ln -s /proc "$d/p" &&
	as_user "$WARD" run --ro "$d/p:/x" -- ls /x >out 2>err; rc=$?; rm -rf "$d"
	expect_eq $rc 125 && expect_contains "$(cat err)" "and /proc is a host kernel interface"
'

# --- §6: a FIFO is not a file ---
test_expect_success '--policy FIFO is refused at once' '
	fresh &&
	mkfifo f && timeout 20 "$WARD" run --policy f -- true 2>err; rc=$?
	expect_eq $rc 2 && expect_eq "$(cat err)" "ward: error: --policy: '"'"'f'"'"' is not a regular file"
'
test_expect_success '--file FIFO is refused at once' '
	fresh &&
	mkfifo f && timeout 20 "$WARD" exec --lang bash --file f:data -c true 2>err; rc=$?
	expect_eq $rc 2 && expect_eq "$(cat err)" "ward: error: --file: '"'"'f'"'"' is not a regular file"
'

# --- §7: --rw belongs to the directory's owner ---
test_expect_success REALROOT,USER 'as root, --rw of a user'"'"'s directory: files written are the user'"'"'s' '
	fresh &&
	mkdir out && chown "$TEST_USER:$TEST_USER" out &&
	"$WARD" run --rw ./out:/out -- sh -c "echo hi > /out/f && mkdir /out/d" &&
	expect_eq "$(stat -c %U:%G out/f out/d | sort -u)" "$TEST_USER:$TEST_USER" &&
	expect_eq "$(cat out/f)" hi
'
test_expect_success USER 'as that user (rootless), --rw: files written are the user'"'"'s' '
	d=$(mktemp -d) && chown "$TEST_USER:$TEST_USER" "$d" && chmod 755 "$d" &&
	(cd "$d" && as_user "$WARD" run --rw ./:/out -- sh -c "echo hi > /out/f"); rc=$?
	owner=$(stat -c %U:%G "$d/f" 2>&1); rm -rf "$d"
	expect_eq $rc 0 && expect_eq "$owner" "$TEST_USER:$TEST_USER"
'
test_expect_success NONROOT 'rootless, --rw of my directory: files written are mine' '
	fresh &&
	mkdir out && "$WARD" run --rw ./out:/out -- sh -c "echo hi > /out/f" &&
	expect_eq "$(stat -c %u out/f)" "$(id -u)"
'
test_expect_success REALROOT 'as root, --rw of a root-owned directory (the README example) works; nothing there becomes set-id' '
	fresh &&
	mkdir out && chmod 755 out &&
	"$WARD" run --rw ./out:/out -- sh -c "echo hi > /out/f && mkdir /out/d && cp /bin/true /out/t && chmod 755 /out/t" &&
	expect_eq "$(stat -c %U:%G out/f out/d | sort -u)" root:root && expect_eq "$(cat out/f)" hi &&
	"$WARD" run --rw ./out:/out -- sh -c "chmod 4755 /out/t" 2>err; rc=$?
	expect_eq $rc 1 && expect_contains "$(cat err)" "Operation not permitted" &&
	expect_eq "$(find out -perm /6000 | wc -l)" 0
'

# --- §7: a lint where it cannot apply is refused, not ignored ---
test_expect_success 'ward run refuses a policy lint, naming the field' '
	fresh &&
	echo "{\"lint\": {\"deny_calls\": [\"eval\"]}}" >p.json &&
	"$WARD" run --policy p.json -- sh -c "echo ran" >out 2>err; rc=$?
	expect_eq $rc 2 && expect_eq "$(cat out)" "" &&
	expect_eq "$(cat err)" "ward: error: p.json: lint.deny_calls: ward run cannot apply a lint: it starts a program, not a language kernel; only the python kernel applies it (ward exec --lang python, ward call, the HTTP API)" &&
	echo "{\"lint\": {\"deny_imports\": [\"os\"]}}" >q.json &&
	"$WARD" run --policy q.json -- true 2>err2; rc=$?
	expect_eq $rc 2 && expect_contains "$(cat err2)" "q.json: lint.deny_imports: ward run cannot apply a lint"
'
test_expect_success PYTHON 'the same lint is applied by ward exec --lang python' '
	fresh &&
	echo "{\"lint\": {\"deny_calls\": [\"eval\"]}}" >p.json &&
	"$WARD" exec --lang python --policy p.json -c "eval(\"1\")" >out 2>err; rc=$?
	expect_eq $rc 3 && expect_contains "$(cat out err)" "lint.deny_calls"
'

# --- §7: figures and output a newcomer reads ---
test_expect_success 'a run ended by timeout reports its CPU time' '
	fresh &&
	out=$("$WARD" run --json --timeout 1 -- sh -c "while :; do :; done")
	expect_eq "$(echo "$out" | ward_json status)" timeout &&
	ms=$(echo "$out" | ward_json usage.cpu_user_ms) && [ "$ms" -ge 300 ] || { echo "cpu_user_ms=$ms"; exit 1; }
'
test_expect_success USER 'rootless, a run ended by timeout reports its CPU time' '
	fresh &&
	out=$(cd / && as_user "$WARD" run --json --timeout 1 -- sh -c "while :; do :; done")
	ms=$(echo "$out" | ward_json usage.cpu_user_ms) && [ "$ms" -ge 300 ] || { echo "cpu_user_ms=$ms"; exit 1; }
'
test_expect_success 'ward exec --print-policy prints the policy and runs nothing' '
	fresh &&
	"$WARD" exec --lang python --memory 256M --print-policy -c "print(\"ran\")" >out &&
	! grep -q ran out && expect_eq "$(ward_json limits.memory <out)" 256M &&
	"$WARD" exec --print-policy >out2 && expect_eq "$(ward_json limits.memory <out2)" 512M
'
test_expect_success 'ward run --print-policy prints the policy' '
	fresh &&
	"$WARD" run --pids 32 --print-policy >out && expect_eq "$(ward_json limits.pids <out)" 32
'
note="ward: note: no cgroup for this sandbox"
test_expect_success USER 'rootless, plain mode says once what --memory and --cpus became' '
	fresh &&
	(cd / && as_user "$WARD" run --cpus 0.5 --memory 256M -- true) 2>err &&
	expect_eq "$(grep -c "$note" err)" 1 &&
	expect_contains "$(cat err)" "memory 256M is a per-process data-size limit" &&
	expect_contains "$(cat err)" "cpus 0.5 is not enforced" &&
	(cd / && as_user "$WARD" run -q --cpus 0.5 -- true) 2>err2 && expect_eq "$(cat err2)" "" &&
	(cd / && as_user "$WARD" run -- true) 2>err3 && expect_eq "$(cat err3)" ""
'
test_expect_success NONROOT 'rootless, plain mode says once what --cpus became' '
	fresh &&
	"$WARD" run --cpus 0.5 -- true 2>err &&
	expect_eq "$(grep -c "$note" err)" 1 && expect_contains "$(cat err)" "cpus 0.5 is not enforced"
'
test_expect_success REALROOT 'with a cgroup, no note' '
	fresh &&
	"$WARD" run --cpus 0.5 -- true 2>err && expect_eq "$(cat err)" ""
'
test_expect_success 'usage errors carry no errno text and no library names' '
	fresh &&
	"$WARD" run --bogus 2>e1; "$WARD" exec --lang cobol -c 1 2>e2
	"$WARD" call --lang python -f /dev/null --function f --args "{\"a\": \"\\u0000\"}" 2>e3
	expect_eq "$(cat e1)" "ward: error: unknown option '"'"'--bogus'"'"' (see '"'"'ward run --help'"'"')" &&
	expect_eq "$(cat e2)" "ward: error: --lang: expected python, node or bash, got '"'"'cobol'"'"'" &&
	expect_contains "$(cat e3)" ": a \\u0000 escape is not allowed" &&
	! grep -E "Invalid argument|JSON_" e1 e2 e3
'

# --- §7: what is installed and documented ---
test_expect_success REALROOT,BUILD 'meson install: the unit names what it installs' '
	fresh &&
	DESTDIR="$PWD/dest" meson install -C "$WARD_BUILD" --no-rebuild --quiet >/dev/null 2>&1 &&
	unit=$(find dest -name ward.service -path "*systemd/system*") && [ -n "$unit" ] &&
	exe=$(sed -n "s/^ExecStart=\([^ ]*\) serve --config \([^ ]*\)$/\1/p" "$unit") &&
	conf=$(sed -n "s/^ExecStart=\([^ ]*\) serve --config \([^ ]*\)$/\2/p" "$unit") &&
	[ -x "dest$exe" ] && [ -f "dest$conf" ] &&
	doc=$(sed -n "s|^Documentation=.* file://\(.*\)$|\1|p" "$unit") && [ -f "dest$doc" ] &&
	[ -n "$(find dest -path "*sysusers.d/ward.conf")" ] &&
	python3 -c "import json, sys; c = json.load(open(sys.argv[1])); assert c[\"socket\"] == \"/run/ward/ward.sock\"" "dest$conf" &&
	grep -q "^RuntimeDirectory=ward$" "$unit" && grep -q "^LogsDirectory=ward$" "$unit" &&
	grep -q "^StateDirectory=ward$" "$unit" && grep -q "^Group=ward$" "$unit"
'
test_expect_success 'the docs refer to nothing outside the repository' '
	fresh &&
	! grep -rnE "\.\./shared|ARCHITECTURE\.md|STYLE\.md|PLATFORM\.md" \
		"$SRCDIR/README.md" "$SRCDIR/docs" "$SRCDIR/man" "$SRCDIR/dist"
'
test_expect_success PYTHON,CURL 'the README'"'"'s serve snippet runs as written' '
	awk "/^## The service/ { f = 1 } f && /^\`\`\`\$/ { n++; if (n == 2) exit; next } f && n == 1" \
		"$SRCDIR/README.md" >snippet.sh &&
	grep -q "^KEY=" snippet.sh && mkdir bin && ln -s "$WARD" bin/ward &&
	PATH="$PWD/bin:$PATH" TMPDIR="$PWD" timeout 120 bash snippet.sh >out 2>err; rc=$?
	expect_eq $rc 0 &&
	expect_contains "$(cat out)" "\"stdout\":\"42\\n\"" &&
	expect_contains "$(cat out)" "\"stdout\":\"2 data.csv\\n\"" &&
	expect_contains "$(cat out)" "\"status\":\"deleted\"" &&
	expect_eq "$(grep -c "\"status\":\"ok\"" out)" 4
'
test_done
