#!/bin/bash
# The daemon under load: many one-shot executions from concurrent clients,
# a share of them hostile. Every benign one succeeds, and afterwards no
# sandbox process, cgroup or daemon fd is left. Cold starts only: the
# warm pool's own load and residue are t0810's.
. "$(dirname "$0")/../lib.sh"

N=${WARD_LOAD_N:-2000}
help=$("$WARD" serve --help 2>&1)
case $help in
*"usage: ward serve"*) ;;
*) test_set_prereq_missing SERVE "this ward has no 'serve' (${help%%$'\n'*})" ;;
esac

D=$TEST_TMP/srv
SOCK=$D/ward.sock
mkdir -p "$D"
start() {
	"$WARD" keys add --keys-file "$D/keys" --tenant load --scopes execute --json |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["key"])' > "$D/key" &&
	{ "$WARD" serve --socket "$SOCK" --keys-file "$D/keys" --state-dir "$D/state" --max-executions 32 \
		--max-per-tenant 32 --pool none --audit-log "$D/audit.log" --audit-sync=false > "$D/serve.log" 2>&1 &
	  echo $! > "$D/pid"; } &&
	wait_for "the daemon to listen" listening
}
listening() {
	[ -S "$SOCK" ] && python3 -c "
import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])" "$SOCK" 2>/dev/null
}
pid() { cat "$D/pid"; }
trap '[ -f "$D/pid" ] && kill "$(pid)" 2>/dev/null; rm -rf "$TEST_TMP"' EXIT

test_expect_success SERVE 'the daemon starts' 'start'
test_expect_success SERVE "$N executions from 16 clients, 5% hostile: every benign one succeeds" '
	fds0=$(ls /proc/$(pid)/fd | wc -l)
	python3 "$SRCDIR/tests/integration/api-load.py" "$SOCK" "$(cat "$D/key")" "$N" 16 5 > load.json &&
	cat load.json && cp load.json "$D/" &&
	expect_eq "$(ward_json answered < load.json)" "$N" &&
	expect_eq "$(ward_json benign_failed < load.json)" 0 &&
	wait_for "the daemon to close every fd of the load" "[ \$(ls /proc/\$(pid)/fd | wc -l) = $fds0 ]"
'
test_expect_success SERVE 'afterwards: no sandbox process and no cgroup of the daemon is left' '
	n=0; for c in /proc/[0-9]*; do
		p=${c#/proc/}; [ "$(cat $c/status 2>/dev/null | sed -n "s/^PPid:\t//p")" = "$(pid)" ] && n=$((n + 1))
	done
	expect_eq "$n" 0 && expect_eq "$(ls -d /sys/fs/cgroup/*/ward/ward-$(pid)-* 2>/dev/null | wc -l)" 0
'
# Under AddressSanitizer the shadow memory and quarantine come on top.
LIMIT_KB=$([ -n "${ASAN_OPTIONS:-}" ] && echo 1048576 || echo 65536)
test_expect_success SERVE "the daemon's memory stayed bounded (RSS under $((LIMIT_KB / 1024)) MiB)" '
	rss=$(sed -n "s/^VmRSS:\t *\([0-9]*\) kB/\1/p" /proc/$(pid)/status) &&
	{ [ "$rss" -lt "$LIMIT_KB" ] || { echo "RSS $rss kB"; false; }; }
'
test_expect_success SERVE 'the audit log verifies after the load' '
	kill "$(pid)" && wait_for "the daemon to exit" "process_gone $(pid)" &&
	"$WARD" audit verify "$D/audit.log" > /dev/null
'
test_done
