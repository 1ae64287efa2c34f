#!/bin/bash
# `ward serve` and its state directory: nobody but the daemon's user may
# write it, nothing in it names a process to kill, one daemon per state
# directory, and the default lies outside world-writable directories.
. "$(dirname "$0")/../lib.sh"

. "$(dirname "$0")/serve-lib.sh"
STATE=$D/run/state
marker=$((RANDOM * 1000 + $$ % 1000 + 7000000))

# the operator's policy, which requests and sessions may only tighten (as
# root, cgroups are there to be required)
REQUIRED=false
[ -n "$ROOT" ] && REQUIRED=true
cat > "$D/policy.json" <<-EOF
{"limits": {"cpus": 0.25, "nofile": 256, "memory": "512M"},
 "env": {"PROXY": "http://10.0.0.1:3128"}, "cgroup": {"required": $REQUIRED}}
EOF
A=()
if [ -z "${prereq_missing[SERVE]:-}" ]; then
	A=(-H "Authorization: Bearer $("$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes sessions,execute --json | key_of)")
fi
# bystander N: starts `sleep N`, an unrelated process of this user, and
# prints its pid (recorded in $D/sleeps for the cleanup).
bystander() {
	sleep "$1" > /dev/null 2>&1 < /dev/null &
	echo $! >> "$D/sleeps"
	echo $!
}
trap 'stop_daemon; [ -f "$D/sleeps" ] && kill $(cat "$D/sleeps") 2>/dev/null; rm -rf "$TEST_TMP"' EXIT

# serve_refused OUT DIR [FLAGS...]: a daemon on a socket of its own with
# state directory DIR must exit non-zero; its stderr goes to OUT.
serve_refused() {
	local out=$1 dir=$2; shift 2
	! timeout 20 "$WARD" serve --socket "$D/other.sock" --keys-file "$KEYS" \
		--state-dir "$dir" "$@" > "$out" 2>&1
}
# a session file as a killed daemon would have left it, naming pid $2
plant() {
	mkdir -p "$1/sessions" && chmod 700 "$1" "$1/sessions" &&
	printf '{"id": "se_planted0000000", "tenant": "acme", "key_id": "k0", "sandbox_id": "sb0", "init_pid": %s, "created": %s}\n' \
		"$2" "$(date +%s.%N)" > "$1/sessions/se_planted0000000.json"
}
# running, not a zombie waiting for a reaper
alive() { [ -r "/proc/$1/status" ] && ! grep -q "^State:.*zombie" "/proc/$1/status"; }

test_expect_success SERVE,ROOT 'a state directory owned by another user is refused, and nothing it names is killed' '
	s=$(bystander $marker) &&
	plant "$D/theirs" "$s" && chown -R 65534:65534 "$D/theirs" &&
	serve_refused out "$D/theirs" &&
	expect_contains "$(cat out)" "state-dir: '"'"'$D/theirs'"'"'" &&
	expect_contains "$(cat out)" "is not owned by the daemon'"'"'s user" &&
	alive "$s" && [ -f "$D/theirs/sessions/se_planted0000000.json" ]
'
test_expect_success SERVE 'a state directory others can write is refused' '
	mkdir -p "$D/open" && chmod 777 "$D/open" &&
	serve_refused out "$D/open" &&
	expect_contains "$(cat out)" "is writable by group or others" &&
	[ ! -e "$D/open/lock" ]
'
test_expect_success SERVE 'a state directory below a directory others can write is refused' '
	mkdir -p "$D/shared/state" && chmod 777 "$D/shared" && chmod 700 "$D/shared/state" &&
	serve_refused out "$D/shared/state" &&
	expect_contains "$(cat out)" "(at '"'"'$D/shared'"'"')" &&
	expect_contains "$(cat out)" "writable by group or others and not sticky"
'
test_expect_success SERVE 'a session file naming an unrelated process never makes the daemon kill it' '
	s=$(bystander $((marker + 1))) &&
	plant "$STATE" "$s" &&
	start_daemon --policy "$D/policy.json" &&
	r=$(api GET /v1/sessions/se_planted0000000 "${A[@]}") &&
	expect_eq "$(code "$r")" 200 && expect_contains "$(body "$r")" "\"lost\"" &&
	alive "$s" && expect_eq "$(ls "$STATE/sessions" | wc -l)" 0
'
test_expect_success SERVE 'a second daemon on another socket with the same state directory is refused; the first one'"'"'s session lives on' '
	r=$(api POST /v1/sessions "${A[@]}" -d "{}") && expect_eq "$(code "$r")" 201 &&
	S=$(body "$r" | id_of) && echo "$S" > "$D/S" &&
	api POST "/v1/sessions/$S/commands" "${A[@]}" -d "{\"cmd\": \"exec sleep $((marker + 2))\", \"background\": true}" > /dev/null &&
	for _ in $(seq 100); do pgrep -f "^sleep $((marker + 2))" > /dev/null && break; sleep 0.05; done &&
	pgrep -f "^sleep $((marker + 2))" > /dev/null &&
	serve_refused out "$STATE" &&
	expect_contains "$(cat out)" "another daemon holds '"'"'$STATE'"'"'" &&
	r=$(api POST "/v1/sessions/$S/execute" "${A[@]}" -d "{\"code\": \"print(6 * 7)\"}") &&
	expect_eq "$(code "$r")" 200 && expect_contains "$(body "$r")" 42 &&
	pgrep -f "^sleep $((marker + 2))" > /dev/null
'
test_expect_success SERVE 'a second daemon on the same socket is refused; the session lives on' '
	S=$(cat "$D/S") &&
	! timeout 20 "$WARD" serve --socket "$SOCK" --keys-file "$KEYS" --state-dir "$D/state3" > out 2>&1 &&
	expect_contains "$(cat out)" "another daemon is listening" &&
	! timeout 20 "$WARD" serve --socket "$SOCK" --keys-file "$KEYS" --state-dir "$STATE" > out 2>&1 &&
	r=$(api POST "/v1/sessions/$S/execute" "${A[@]}" -d "{\"code\": \"print(6 * 7)\"}") &&
	expect_eq "$(code "$r")" 200 && expect_contains "$(body "$r")" 42 &&
	pgrep -f "^sleep $((marker + 2))" > /dev/null
'
# refused PATH POLICY FIELD TEXT: the override is a 400 naming FIELD
refused() {
	local r
	r=$(api POST "$1" "${A[@]}" -d "{\"command\": [\"true\"], \"policy\": $2}") &&
	expect_eq "$(code "$r")" 400 && expect_eq "$(body "$r" | ward_json error.field)" "$3" &&
	expect_contains "$(body "$r" | ward_json error.message)" "$4"
}
test_expect_success SERVE 'an execution'"'"'s policy may not loosen cpus, nofile, memory, the operator'"'"'s env or cgroup.required' '
	refused /v1/executions "{\"limits\": {\"cpus\": 64}}" policy.limits.cpus "64 is looser than the operator'"'"'s 0.25" &&
	refused /v1/executions "{\"limits\": {\"cpus\": 0}}" policy.limits.cpus "no limit is looser" &&
	refused /v1/executions "{\"limits\": {\"nofile\": 4096}}" policy.limits.nofile "4096 is looser than the operator'"'"'s 256" &&
	refused /v1/executions "{\"limits\": {\"memory\": \"1G\"}}" policy.limits.memory "1G is looser than the operator'"'"'s 512M" &&
	refused /v1/executions "{\"env\": {\"PROXY\": \"http://evil\"}}" policy.env.PROXY "may not be changed" &&
	{ [ -z "$ROOT" ] || # rootless, cgroups may be missing: the operator cannot require them
	  refused /v1/executions "{\"cgroup\": {\"required\": false}}" policy.cgroup.required "false is looser"; }
'
test_expect_success SERVE 'an execution may remove an operator'"'"'s variable (that only takes from the program)' '
	r=$(api POST /v1/executions "${A[@]}" -d "{\"command\": [\"sh\", \"-c\", \"echo \\\"[\${PROXY-unset}]\\\"\"], \"policy\": {\"env\": {\"PROXY\": null}}}") &&
	expect_eq "$(code "$r")" 200 && expect_eq "$(body "$r" | ward_json stdout)" "[unset]"
'
test_expect_success SERVE 'a session'"'"'s policy may not loosen them either' '
	r=$(api POST /v1/sessions "${A[@]}" -d "{\"policy\": {\"limits\": {\"nofile\": 100000}}}") &&
	expect_eq "$(code "$r")" 400 && expect_eq "$(body "$r" | ward_json error.field)" policy.limits.nofile &&
	r=$(api POST /v1/sessions "${A[@]}" -d "{\"policy\": {\"env\": {\"PROXY\": \"x\"}}}") &&
	expect_eq "$(code "$r")" 400 && expect_eq "$(body "$r" | ward_json error.field)" policy.env.PROXY
'
test_expect_success SERVE 'errors name the field: unknown fields list the known ones, a missing one says required' '
	r=$(api POST /v1/executions "${A[@]}" -d "{\"colour\": 1}") &&
	expect_eq "$(code "$r")" 400 && expect_eq "$(body "$r" | ward_json error.field)" colour &&
	expect_contains "$(body "$r" | ward_json error.message)" "known fields: language, code, command, function, args, globals, artifacts, files, policy, timeout" &&
	r=$(api POST /v1/executions "${A[@]}" -d "{\"language\": \"python\"}") &&
	expect_eq "$(body "$r" | ward_json error.field)" code &&
	expect_contains "$(body "$r" | ward_json error.message)" required &&
	r=$(api POST /v1/executions "${A[@]}" -d "{\"policy\": {\"limits\": {\"pids\": 1}}, \"command\": [\"true\"]}") &&
	expect_eq "$(body "$r" | ward_json error.field)" policy.limits.pids &&
	expect_contains "$(body "$r" | ward_json error.message)" "ward-init and the program" &&
	r=$(api POST /v1/executions "${A[@]}" -d "{\"policy\": {\"limit\": {}}, \"command\": [\"true\"]}") &&
	expect_eq "$(body "$r" | ward_json error.field)" policy.limit &&
	expect_contains "$(body "$r" | ward_json error.message)" "known fields: limits, mounts" &&
	printf "{\"code\": \"a\\\\u0000b\", \"language\": \"python\"}" > nul.json &&
	r=$(api POST /v1/executions "${A[@]}" --data-binary @nul.json) &&
	expect_eq "$(code "$r")" 400 && expect_contains "$(body "$r")" "must not contain" &&
	case $(body "$r") in *JSON_ALLOW_NUL*) exit 1 ;; esac
'
test_expect_success SERVE 'a tighter override is applied' '
	r=$(api POST /v1/executions "${A[@]}" -d "{\"command\": [\"sh\", \"-c\", \"ulimit -n\"], \"policy\": {\"limits\": {\"nofile\": 128}, \"env\": {\"MINE\": \"1\"}}}") &&
	expect_eq "$(code "$r")" 200 && expect_eq "$(body "$r" | ward_json stdout)" 128
'
stop_daemon

# start_daemon_default: a daemon without --state-dir, on a socket in
# $D/def, up until it answers, then stopped. Fails when it never answers.
start_daemon_default() {
	local up=1 p
	"$WARD" serve --socket "$D/def/ward.sock" --keys-file "$KEYS" > "$D/def.log" 2>&1 &
	p=$!
	for _ in $(seq 100); do
		curl -sf --unix-socket "$D/def/ward.sock" http://w/healthz > /dev/null && { up=0; break; }
		sleep 0.05
	done
	kill "$p" && wait "$p"
	[ $up = 0 ] || cat "$D/def.log"
	return $up
}
export -f start_daemon_default
export D KEYS WARD
test_expect_success SERVE,NONROOT 'the default state directory is $XDG_STATE_HOME/ward, else ~/.local/state/ward, never beside the socket' '
	mkdir -p "$D/xdg" "$D/home" && chmod 700 "$D/xdg" "$D/home" &&
	( export XDG_STATE_HOME=$D/xdg; start_daemon_default ) &&
	[ -f "$D/xdg/ward/lock" ] && [ ! -e "$D/def/state" ] &&
	expect_eq "$(stat -c %a "$D/xdg/ward")" 700 &&
	( unset XDG_STATE_HOME; export HOME=$D/home; start_daemon_default ) &&
	[ -f "$D/home/.local/state/ward/lock" ] && [ ! -e "$D/def/state" ]
'
test_expect_success SERVE,ROOT 'as root the default state directory is /var/lib/ward, never beside the socket' '
	mkdir -p "$D/xdg" "$D/home" &&
	XDG_STATE_HOME=$D/xdg HOME=$D/home unshare -m --propagation private bash -c "
		mount -t tmpfs tmpfs /var/lib && start_daemon_default &&
		[ -f /var/lib/ward/lock ] && [ \"\$(stat -c %a:%u /var/lib/ward)\" = 700:0 ]
	" &&
	[ ! -e "$D/def/state" ] && [ ! -e "$D/xdg/ward" ] && [ ! -e "$D/home/.local" ]
'
test_done
