#!/bin/bash
# A NUL byte in a program's output, through `ward serve`: it is text like
# any other and comes back as U+0000 (JSON "\u0000") from one-shots, session
# calls, commands and a background command's status, which must stay
# readable. A line on a kernel's protocol channel that is not a message is
# reported as KernelProtocolError, never passed off as the program's output.
# Requests keep refusing NUL (code, commands, environment).
. "$(dirname "$0")/../lib.sh"

. "$(dirname "$0")/serve-lib.sh"
marker=$((RANDOM * 1000 + $$ % 1000 + 7000000))

# the body says "a<NUL>b\n" on stdout, and in JSON as \u0000
nul_stdout() {
	expect_eq "$(field "$r" 'd["stdout"] == "a\x00b\n"')" true &&
	expect_contains "$(body "$r")" '"stdout":"a\u0000b\n"'
}

A=()
if [ -z "${prereq_missing[SERVE]:-}" ]; then
	A=(-H "Authorization: Bearer $("$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes sessions,execute --json | key_of)")
	start_daemon
fi
# A line written on the python kernel's own protocol descriptor.
GARBAGE='import gc, os\nfrom _ward_kernel.streams import Channel\nos.write([o for o in gc.get_objects() if isinstance(o, Channel)][0].proto, b\"garbage\\n\")\nprint(\"after\")'

test_expect_success SERVE 'one-shot: python, bash and node output with a NUL byte is U+0000' '
	r=$(api POST /v1/executions "${A[@]}" -d "{\"language\": \"python\", \"code\": \"print(\\\"a\\\\0b\\\")\"}") &&
	expect_eq "$(code "$r")" 200 && expect_eq "$(field "$r" "d[\"status\"]")" ok && nul_stdout &&
	r=$(api POST /v1/executions "${A[@]}" -d "{\"language\": \"bash\", \"code\": \"printf \\\"a\\\\\\\\0b\\\\\\\\n\\\"\"}") &&
	expect_eq "$(field "$r" "d[\"status\"]")" ok && nul_stdout &&
	if [ -z "${prereq_missing[NODE]:-}" ]; then
		r=$(api POST /v1/executions "${A[@]}" -d "{\"language\": \"node\", \"code\": \"console.log(\\\"a\\\\0b\\\")\"}") &&
		expect_eq "$(field "$r" "d[\"status\"]")" ok && nul_stdout
	fi
'
test_expect_success SERVE 'one-shot: a stream event with a NUL byte is U+0000 too' '
	out=$(curl -sS -m 30 --unix-socket "$SOCK" "${A[@]}" -H "Accept: application/x-ndjson" \
		-d "{\"language\": \"python\", \"code\": \"print(\\\"a\\\\0b\\\")\"}" http://w/v1/executions) &&
	expect_contains "$out" "\"text\":\"a\\u0000b\\n\""
'
test_expect_success SERVE 'one-shot: a non-message line on the protocol channel is KernelProtocolError' '
	r=$(api POST /v1/executions "${A[@]}" -d "{\"language\": \"python\", \"code\": \"$GARBAGE\"}") &&
	expect_eq "$(code "$r")" 200 && expect_eq "$(field "$r" "d[\"status\"]")" error &&
	expect_eq "$(field "$r" "d[\"error\"][\"name\"]")" KernelProtocolError &&
	expect_eq "$(field "$r" "d[\"stdout\"]")" after && ! expect_contains "$(body "$r")" garbage > /dev/null
'

S=
if [ -z "${prereq_missing[SERVE]:-}" ]; then
	r=$(api POST /v1/sessions "${A[@]}" -d "{}")
	[ "$(code "$r")" = 201 ] && S=$(field "$r" 'd["id"]')
fi
test_expect_success SERVE 'session: execute in python and bash, output with a NUL byte is U+0000' '
	r=$(api POST "/v1/sessions/$S/execute" "${A[@]}" -d "{\"code\": \"print(\\\"a\\\\0b\\\")\"}") &&
	expect_eq "$(code "$r")" 200 && expect_eq "$(field "$r" "d[\"status\"]")" ok && nul_stdout &&
	r=$(api POST "/v1/sessions/$S/execute" "${A[@]}" -d "{\"language\": \"bash\", \"code\": \"printf \\\"a\\\\\\\\0b\\\\\\\\n\\\"\"}") &&
	expect_eq "$(field "$r" "d[\"status\"]")" ok && nul_stdout
'
test_expect_success SERVE 'session: a command whose output holds a NUL byte' '
	r=$(api POST "/v1/sessions/$S/commands" "${A[@]}" -d "{\"cmd\": \"printf \\\"a\\\\\\\\0b\\\\\\\\n\\\"\"}") &&
	expect_eq "$(code "$r")" 200 && expect_eq "$(field "$r" "d[\"status\"]")" ok && nul_stdout
'
test_expect_success SERVE 'session: a background command that printed a NUL byte has a readable status' '
	r=$(api POST "/v1/sessions/$S/commands" "${A[@]}" \
		-d "{\"cmd\": \"printf \\\"a\\\\\\\\0b\\\\\\\\n\\\"; exec sleep $marker\", \"background\": true}") &&
	expect_eq "$(code "$r")" 202 && C=$(field "$r" "d[\"command_id\"]") &&
	wait_for "the command to print" "pgrep -f \"^sleep $marker\" > /dev/null" &&
	r=$(api GET "/v1/sessions/$S/commands/$C" "${A[@]}") &&
	expect_eq "$(code "$r")" 200 && expect_eq "$(field "$r" "d[\"state\"]")" running && nul_stdout &&
	r=$(api DELETE "/v1/sessions/$S/commands/$C" "${A[@]}") && expect_eq "$(code "$r")" 200 &&
	wait_for "the command to be killed" "! pgrep -f \"^sleep $marker\" > /dev/null" &&
	r=$(api GET "/v1/sessions/$S/commands/$C" "${A[@]}") &&
	expect_eq "$(code "$r")" 200 && nul_stdout
'
test_expect_success SERVE 'session: a non-message line from a kernel is KernelProtocolError, not stdout' '
	r=$(api POST "/v1/sessions/$S/execute" "${A[@]}" -d "{\"code\": \"$GARBAGE\", \"context\": \"raw\"}") &&
	expect_eq "$(code "$r")" 200 && expect_eq "$(field "$r" "d[\"status\"]")" error &&
	expect_eq "$(field "$r" "d[\"error\"][\"name\"]")" KernelProtocolError &&
	expect_contains "$(field "$r" "d[\"error\"][\"value\"]")" "python kernel sent a line that is not a protocol message" &&
	expect_eq "$(field "$r" "d[\"stdout\"]")" after && ! expect_contains "$(body "$r")" garbage > /dev/null
'
test_expect_success SERVE 'requests keep refusing NUL: code, a command, its environment' '
	for req in "/v1/executions {\"language\": \"python\", \"code\": \"print(1)\\u0000\"}" \
		   "/v1/sessions/$S/execute {\"code\": \"print(1)\\u0000\"}" \
		   "/v1/sessions/$S/commands {\"cmd\": \"echo a\\u0000b\"}" \
		   "/v1/sessions/$S/commands {\"cmd\": [\"env\"], \"env\": {\"X\": \"a\\u0000b\"}}"; do
		r=$(api POST "${req%% *}" "${A[@]}" -d "${req#* }") &&
		expect_eq "$(code "$r")" 400 &&
		expect_contains "$(field "$r" "d[\"error\"][\"message\"]")" "must not contain \\u0000" || exit 1
	done
'
test_done
