#!/bin/bash
# The warm pool retires what no longer matches: when the runners change on
# disk, the kernels prepared from the old ones are discarded and the pool
# refills from the new ones; a one-shot never gets a kernel of runners that
# are no longer there. A pooled kernel that dies while it waits is dropped,
# counted and replaced, never handed out.
. "$(dirname "$0")/../lib.sh"

. "$(dirname "$0")/serve-lib.sh"

command -v python3 >/dev/null || test_set_prereq_missing SERVE "python3 is not installed"
"$WARD" exec --lang python -c "1" > /dev/null 2>&1 ||
	test_set_prereq_missing SERVE "ward exec --lang python does not run here"

R=$TEST_TMP/runners
if [ -z "${prereq_missing[SERVE]:-}" ]; then
	cp -R "$SRCDIR/runners" "$R"
	"$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes execute --json | key_of > "$D/k"
	"$WARD" keys add --keys-file "$KEYS" --tenant ops --scopes admin --json | key_of > "$D/km"
	start_daemon --runners "$R" --pool python=2
	A=(-H "Authorization: Bearer $(cat "$D/k")")
	M=(-H "Authorization: Bearer $(cat "$D/km")")
fi

metric() {
	curl -sS -m 10 --unix-socket "$SOCK" "${M[@]}" http://w/metrics |
		sed -n "s/^$1{language=\"python\"} //p"
}
pool_full() { [ "$(metric ward_pool_size)" = 2 ]; }
retired_since() { [ "$(metric ward_pool_retired_total)" -ge $(($1 + 2)) ]; }
MARK='import os; print(os.environ.get("WARD_RUNNER_MARK"))'

test_expect_success SERVE 'the pool fills from the runners it was given' '
	wait_for "two pooled python kernels" pool_full &&
	r=$(api POST /v1/executions "${A[@]}" -d "{\"language\": \"python\", \"code\": $(python3 -c "import json, sys; print(json.dumps(sys.argv[1]))" "$MARK")}") &&
	expect_eq "$(field "$r" "d[\"stdout\"]")" "None"
'

test_expect_success SERVE 'a changed runner retires the pooled kernels; the next one-shot runs the new runner from the pool' '
	wait_for "the pool to refill" pool_full &&
	r0=$(metric ward_pool_retired_total) &&
	printf "\nimport os as _os\n_os.environ[\"WARD_RUNNER_MARK\"] = \"2\"\n" \
		>> "$R/python/_ward_kernel/__init__.py" &&
	wait_for "the old kernels to be retired" "retired_since $r0" &&
	wait_for "the pool to refill" pool_full &&
	h0=$(metric ward_pool_hits_total) &&
	r=$(api POST /v1/executions "${A[@]}" -d "{\"language\": \"python\", \"code\": $(python3 -c "import json, sys; print(json.dumps(sys.argv[1]))" "$MARK")}") &&
	expect_eq "$(field "$r" "d[\"stdout\"]")" "2" &&
	expect_eq "$(metric ward_pool_hits_total)" $((h0 + 1))
'

# the pooled kernels: the only child of each sandbox init the daemon started
kernels() {
	local d=$(cat "$D/pid") c p
	for c in /proc/[0-9]*; do
		[ "$(sed -n "s/^PPid:\t//p" "$c/status" 2>/dev/null)" = "$d" ] || continue
		for p in $(cat "$c"/task/*/children 2>/dev/null); do echo "$p"; done
	done
}

test_expect_success SERVE 'a pooled kernel killed while it waits is dropped, counted and replaced; one-shots still succeed' '
	wait_for "the pool to refill" pool_full &&
	d0=$(metric ward_pool_died_total) &&
	ks=$(kernels) && [ -n "$ks" ] && kill -KILL $ks &&
	for k in $ks; do wait_for "kernel $k to end" "process_gone $k" || exit 1; done &&
	r1=$(api POST /v1/executions "${A[@]}" -d "{\"language\": \"python\", \"code\": \"print(3)\"}") &&
	r2=$(api POST /v1/executions "${A[@]}" -d "{\"language\": \"python\", \"code\": \"print(4)\"}") &&
	expect_eq "$(field "$r1" "d[\"status\"] + \" \" + d[\"stdout\"].strip()")" "ok 3" &&
	expect_eq "$(field "$r2" "d[\"status\"] + \" \" + d[\"stdout\"].strip()")" "ok 4" &&
	wait_for "the dead kernels to be counted" "[ \$(metric ward_pool_died_total) -ge \$((d0 + 2)) ]" &&
	wait_for "the pool to refill" pool_full
'

test_done
