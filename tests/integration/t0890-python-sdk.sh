#!/bin/bash
# The Python SDK (clients/python) against a real `ward serve`: it installs
# offline with pip into a fresh venv (its own PEP 517 backend, nothing from
# an index), then its unittest suite runs against this test's daemon — one
# TAP line per test: sync and async sessions, one-shots, function calls,
# files, commands, background commands, every error class, 10 async
# executions at once, and cancellation seen from the daemon's side; over
# the unix socket, and the basics again over TCP (--listen).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve-lib.sh"

# the interpreter of the distribution (python3-venv), not a pyenv shim
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3 || echo python3)
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null ||
	test_set_prereq_missing SDK "the SDK needs python 3.11 or newer ($PY)"
"$PY" -c 'import ensurepip, venv' 2>/dev/null ||
	test_set_prereq_missing SDK "python3-venv is not installed (no ensurepip for $PY)"

# the installed package, never a source tree on the path
unset PYTHONPATH PYTHONHOME
VENV=$TEST_TMP/venv
CONF=$D/serve.json
PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
if [ -z "${prereq_missing[SERVE]:-}" ]; then
	cat > "$CONF" <<-EOF2
	{"max_sessions_per_tenant": 16, "max_per_tenant": 32, "max_file": "1M",
	 "tenants": {"small": {"max_sessions_per_tenant": 1}}}
	EOF2
	KEY=$("$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes execute,sessions,files,admin --json | key_of)
	KEY_NOFILES=$("$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes execute,sessions --json | key_of)
	KEY_SMALL=$("$WARD" keys add --keys-file "$KEYS" --tenant small --scopes execute,sessions --json | key_of)
	start_daemon --config "$CONF" --listen "127.0.0.1:$PORT"
fi

test_expect_success SDK 'pip installs the SDK offline into a fresh venv (no index, in-tree backend)' '
	cp -r "$SRCDIR/clients/python" "$TEST_TMP/sdk-src" &&
	"$PY" -m venv "$VENV" &&
	PIP_NO_INDEX=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
		"$VENV/bin/pip" install -q "$TEST_TMP/sdk-src" &&
	where=$(cd / && "$VENV/bin/python" -c "import ward; print(ward.__file__)") &&
	expect_contains "$where" "$VENV/lib/" &&
	PIP_NO_INDEX=1 "$VENV/bin/pip" show -f ward-sdk | grep -q "ward/aio.py"
'
test_expect_success SDK 'the sdist builds, and installs offline too' '
	out=$(cd "$TEST_TMP/sdk-src" && "$VENV/bin/python" -c "import ward_build; print(ward_build.build_sdist(\"$TEST_TMP\"))") &&
	tar tzf "$TEST_TMP/$out" | grep -q "^ward_sdk-0.1.0/ward/sandbox.py$" &&
	"$PY" -m venv "$TEST_TMP/venv2" &&
	PIP_NO_INDEX=1 PIP_NO_CACHE_DIR=1 "$TEST_TMP/venv2/bin/pip" install -q "$TEST_TMP/$out" &&
	(cd / && "$TEST_TMP/venv2/bin/python" -c "import ward.aio")
'
test_expect_success SDK,SERVE 'examples/agent_reflection.py: the error and its hint go back, the corrected code runs' '
	out=$(cd "$TEST_TMP" && WARD_URL="unix://$SOCK" WARD_API_KEY="$KEY" \
		"$VENV/bin/python" "$SRCDIR/examples/agent_reflection.py") &&
	expect_contains "$out" "hint: IPython is not installed" &&
	expect_contains "$out" "KeyError: '"'"'Price'"'"'" &&
	expect_contains "$out" "answer: 1.5"
'

# The suite's own TAP lines, numbered after ours.
if [ -z "${prereq_missing[SDK]:-}${prereq_missing[SERVE]:-}" ] && [ -x "$VENV/bin/python" ]; then
	out=$(cd "$TEST_TMP" && WARD_URL="unix://$SOCK" WARD_API_KEY="$KEY" \
		WARD_TEST_KEY_NOFILES="$KEY_NOFILES" WARD_TEST_KEY_SMALL="$KEY_SMALL" \
		WARD_TEST_TCP_URL="http://127.0.0.1:$PORT" WARD_SDK_SRC="$TEST_TMP/sdk-src" timeout 600 \
		"$VENV/bin/python" "$SRCDIR/clients/python/tests/tap.py" --offset "$test_count" 2>&1)
	rc=$?
	printf '%s\n' "$out"
	n=$(grep -cE '^(ok|not ok) ' <<<"$out")
	test_count=$((test_count + n))
	test_failed=$((test_failed + $(grep -c '^not ok ' <<<"$out")))
	if [ "$n" = 0 ] || { [ $rc != 0 ] && ! grep -q '^not ok ' <<<"$out"; }; then
		test_count=$((test_count + 1)); test_failed=$((test_failed + 1))
		echo "not ok $test_count - the SDK suite ran (exit $rc)"
	fi
else
	reason=${prereq_missing[SDK]:-${prereq_missing[SERVE]:-the SDK did not install}}
	test_count=$((test_count + 1))
	echo "ok $test_count # SKIP the SDK's test suite ($reason)"
fi
test_done
