#!/bin/bash
# `ward keys add|list|revoke`: the keys file of `ward serve`. A key is shown
# once and never stored; usage errors exit 2 naming the flag; concurrent adds
# lose nothing. (Authentication itself is covered by tests/unit/t-keys.c.)
. "$(dirname "$0")/../lib.sh"

help=$("$WARD" keys --help 2>&1)
case $help in
*"unknown command"*)
	test_set_prereq_missing KEYS "this ward has no 'keys' command (dispatch not wired in src/cli/main.c)" ;;
esac

K=$TEST_TMP/keys
keys() { "$WARD" keys "$@" --keys-file "$K"; }
# expect_exit WANT CMD...: runs CMD, keeps its stderr in $err, checks the status.
expect_exit() {
	local want=$1; shift
	err=$("$@" 2>&1 >/dev/null)
	local rc=$?
	[ "$rc" = "$want" ] || { echo "exit $rc, want $want: $err"; return 1; }
}

test_expect_success KEYS 'keys --help describes add, list and revoke' '
	out=$("$WARD" keys --help) &&
	expect_contains "$out" "ward keys add --tenant" &&
	expect_contains "$out" "ward keys revoke KEY_ID" &&
	expect_contains "$out" "--keys-file PATH"
'
test_expect_success KEYS 'list with no keys file is empty' '
	out=$(keys list) && expect_eq "$out" "" &&
	out=$(keys list --json) && expect_eq "$out" "[]" &&
	test ! -e "$K"
'
test_expect_success KEYS 'add prints only the key, once, on stdout' '
	key=$(keys add --tenant acme --scopes execute,sessions --note "ci runner" 2>stderr) &&
	echo "$key" > key1 &&
	[ "$(printf "%s\n" "$key" | wc -l)" = 1 ] &&
	echo "$key" | grep -Eq "^wk_[0-9a-f]{12}_[0-9a-f]{64}\$" &&
	expect_contains "$(cat stderr)" "shown only this once"
'
test_expect_success KEYS 'the keys file is 0600 and holds no secret' '
	key=$(cat key1) && secret=${key#wk_*_} &&
	expect_eq "$(stat -c %a "$K")" 600 &&
	! grep -q "$secret" "$K" && grep -q "\"hash\":" "$K" &&
	expect_eq "$(wc -l < "$K")" 1
'
test_expect_success KEYS 'list shows the key without secret or hash' '
	key=$(cat key1) && id=${key:3:12} &&
	out=$(keys list) &&
	expect_contains "$out" "$id" && expect_contains "$out" acme &&
	expect_contains "$out" "execute,sessions" && expect_contains "$out" active &&
	expect_contains "$out" "ci runner" &&
	hash=$(sed "s/.*\"hash\":\"\([0-9a-f]*\)\".*/\1/" "$K") &&
	case "$out" in *"${key#wk_*_}"*|*"$hash"*) false ;; esac
'
test_expect_success KEYS,PYTHON 'add --json and list --json' '
	out=$(keys add --tenant beta --scopes admin,files --json) &&
	expect_eq "$(echo "$out" | ward_json tenant)" beta &&
	expect_eq "$(echo "$out" | ward_json scopes)" "[\"files\", \"admin\"]" &&
	id=$(echo "$out" | ward_json id) && key=$(echo "$out" | ward_json key) &&
	expect_eq "$key" "${key%%_*}_${id}_${key#wk_*_}" &&
	list=$(keys list --json) &&
	expect_eq "$(echo "$list" | ward_json 1.id)" "$id" &&
	expect_eq "$(echo "$list" | ward_json 1.revoked)" false &&
	expect_eq "$(echo "$list" | ward_json 0.note)" "ci runner" &&
	case "$list" in *hash*|*salt*|*"${key#wk_*_}"*) false ;; esac
'
test_expect_success KEYS 'revoke marks the key revoked; again is fine' '
	key=$(cat key1) && id=${key:3:12} &&
	out=$(keys revoke "$id") && expect_contains "$out" "revoked key $id" &&
	keys list | grep "^$id " | grep -q revoked &&
	keys revoke "$id" >/dev/null &&
	expect_eq "$(stat -c %a "$K")" 600
'
test_expect_success KEYS 'revoking an unknown id fails (1) naming it' '
	expect_exit 1 keys revoke 0123456789ab &&
	expect_contains "$err" "no key with id '"'"'0123456789ab'"'"'"
'
test_expect_success KEYS 'usage errors exit 2 and name the flag' '
	expect_exit 2 keys add --scopes execute && expect_contains "$err" "missing --tenant" &&
	expect_exit 2 keys add --tenant t && expect_contains "$err" "missing --scopes" &&
	expect_exit 2 keys add --tenant t --scopes execute,bogus &&
	expect_contains "$err" "--scopes: unknown scope '"'"'bogus'"'"'" &&
	expect_exit 2 keys add --tenant t --scopes "" &&
	expect_contains "$err" "--scopes: expected at least one scope" &&
	expect_exit 2 keys add --tenant "a b" --scopes files &&
	expect_contains "$err" "--tenant: invalid tenant '"'"'a b'"'"'" &&
	expect_exit 2 "$WARD" keys add --scopes files --tenant &&
	expect_contains "$err" "--tenant needs a value" &&
	expect_exit 2 keys list --tenant t &&
	expect_contains "$err" "--tenant is not an option of '"'"'keys list'"'"'" &&
	expect_exit 2 keys list --bogus && expect_contains "$err" "unknown option '"'"'--bogus'"'"'" &&
	expect_exit 2 keys revoke && expect_contains "$err" "missing the key id" &&
	expect_exit 2 keys revoke "$(cat key1)" && expect_contains "$err" "that is a whole key" &&
	key=$(cat key1) && case "$err" in *"${key:16:8}"*) false ;; esac &&
	expect_exit 2 "$WARD" keys frobnicate && expect_contains "$err" "unknown subcommand" &&
	expect_exit 2 "$WARD" keys && expect_contains "$err" "missing subcommand" &&
	expect_exit 2 "$WARD" keys list --keys-file "" && expect_contains "$err" "--keys-file: empty path"
'
test_expect_success KEYS 'failed adds leave the file as it was' '
	cp "$K" before && keys add --tenant "a b" --scopes files 2>/dev/null; cmp before "$K"
'
test_expect_success KEYS 'WARD_KEYS_FILE chooses the file; --keys-file=PATH works' '
	WARD_KEYS_FILE=$TEST_TMP/envkeys "$WARD" keys add --tenant e --scopes execute >/dev/null 2>&1 &&
	test -s "$TEST_TMP/envkeys" &&
	out=$("$WARD" keys list --keys-file="$TEST_TMP/envkeys") && expect_contains "$out" " e "
'
test_expect_success KEYS 'a malformed line is an error naming the line' '
	cp "$K" bad && echo "{not json" >> bad &&
	n=$(wc -l < bad) &&
	expect_exit 1 "$WARD" keys list --keys-file bad &&
	expect_contains "$err" "line $n: invalid JSON" &&
	expect_exit 1 "$WARD" keys add --keys-file bad --tenant t --scopes files &&
	expect_contains "$err" "line $n:"
'
test_expect_success KEYS 'concurrent adds from 12 processes lose no key' '
	mkdir par && cd par &&
	for i in $(seq 12); do
		"$WARD" keys add --keys-file par --tenant "t$i" --scopes execute > "k$i" 2>/dev/null &
	done
	wait
	expect_eq "$(cat k* | sort -u | wc -l)" 12 &&
	expect_eq "$(wc -l < par)" 12 &&
	expect_eq "$(ls -A | grep -c "^\.par\.")" 0
'
test_done
