#!/bin/bash
# With --zygote python --launcher, ward serve starts a launcher and a python
# zygote before its core: python one-shots are forked by the zygote (its
# preloaded modules are there before the code imports them); by default
# (--zygote none) kernels start cold; bad values are refused with the
# setting named, and stopping the daemon leaves neither helper behind.
. "$(dirname "$0")/../lib.sh"

. "$(dirname "$0")/serve-lib.sh"

command -v python3 >/dev/null || test_set_prereq_missing SERVE "python3 is not installed"
"$WARD" exec --lang python -c "1" > /dev/null 2>&1 ||
	test_set_prereq_missing SERVE "ward exec --lang python does not run here"
# A sanitizer's runtime cannot be loaded into python after its start: the
# zygote's module of such a build does not load (the daemon refuses to
# start with --zygote python).
if grep -qa "__asan_init" "$WARD" 2>/dev/null; then
	test_set_prereq_missing ZYGOTE "a sanitizer build: the zygote's module cannot load into python"
fi

if [ -z "${prereq_missing[SERVE]:-}" ]; then
	"$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes execute --json | key_of > "$D/k"
	A=(-H "Authorization: Bearer $(cat "$D/k")")
fi

# in_modules MODULE: "True" when a python one-shot finds MODULE imported
# before its code imports anything
in_modules() {
	local r
	r=$(api POST /v1/executions "${A[@]}" \
		-d "{\"language\": \"python\", \"code\": \"import sys; print(\\\"$1\\\" in sys.modules)\"}") &&
	field "$r" 'd["stdout"].strip()'
}
# helpers: the daemon's children that are neither sandboxes nor kernels
helpers() {
	local d=$(cat "$D/pid") c
	for c in /proc/[0-9]*; do
		[ "$(sed -n "s/^PPid:\t//p" "$c/status" 2>/dev/null)" = "$d" ] || continue
		# one pid in NSpid: in the daemon's pid namespace, not a sandbox's
		# init (those are its children too); status, unlike ns/, can be read
		# when the process is not dumpable, as the zygote is not
		case $(cat "$c/comm" 2>/dev/null) in
		ward-launcher|python3)
			[ "$(sed -n "s/^NSpid:\t//p" "$c/status" | wc -w)" = 1 ] && echo "${c#/proc/}" ;;
		esac
	done
}
gone() { local p; for p in $(cat "$D/helpers"); do [ ! -e "/proc/$p" ] || return 1; done; }

test_expect_success SERVE,ZYGOTE 'a python one-shot is forked by the zygote: numpy is imported before the code runs' '
	start_daemon --pool none --zygote python --launcher &&
	grep -q "ward-zygote: ready" "$D/serve.log" &&
	expect_eq "$(in_modules numpy)" "True" &&
	r=$(api POST /v1/executions "${A[@]}" -d "{\"language\": \"python\", \"code\": \"import numpy; print(numpy.arange(10).sum())\"}") &&
	expect_eq "$(field "$r" "d[\"status\"] + \" \" + d[\"stdout\"].strip()")" "ok 45"
'

test_expect_success SERVE,ZYGOTE 'the launcher and the zygote are the daemon children in its own pid namespace, and are gone when it stops' '
	helpers > "$D/helpers" &&
	expect_eq "$(wc -l < "$D/helpers")" 2 &&
	stop_daemon &&
	wait_for "the launcher and the zygote to exit" gone
'

test_expect_success SERVE 'by default and with --zygote none python kernels start cold: numpy is not imported before the code' '
	: > "$D/serve.log" &&
	start_daemon --pool none &&
	expect_eq "$(in_modules numpy)" "False" &&
	stop_daemon &&
	start_daemon --pool python=1 --zygote none &&
	expect_eq "$(in_modules numpy)" "False" &&
	! grep -q "ward-zygote" "$D/serve.log" &&
	stop_daemon
'

test_expect_success SERVE,ZYGOTE 'the pool fills from the zygote, and --zygote-modules says what it preloads' '
	start_daemon --pool python=1 --zygote python --zygote-modules json,xml.dom.minidom &&
	grep -q "ward-zygote: ready (json,xml.dom.minidom)" "$D/serve.log" &&
	expect_eq "$(in_modules xml.dom.minidom)" "True" &&
	expect_eq "$(in_modules numpy)" "False" &&
	stop_daemon
'

test_expect_success SERVE 'bad zygote settings are refused, naming the setting' '
	for bad in "--zygote ruby|zygote: expected python or none, got '\''ruby'\''" \
		   "--zygote-modules os;rm|zygote-modules: expected python module names" \
		   "--zygote-modules ,|zygote-modules: expected python module names" \
		   "--launcher=maybe|--launcher: expected true or false"; do
		set -- ${bad%%|*}
		"$WARD" serve --socket "$D/x.sock" --keys-file "$KEYS" "$@" > bad.out 2>&1
		expect_eq "$?" 2 || exit 1
		expect_contains "$(cat bad.out)" "${bad#*|}" || exit 1
	done &&
	test ! -e "$D/x.sock"
'

test_done
