#!/bin/bash
# `ward mcp`, the stdio MCP server, driven by the official MCP TypeScript
# SDK client (tests/npm, pinned; tests/mcp/stdio-client.mjs) and by raw
# JSON-RPC lines (tests/mcp/stdio-raw.py) for what an SDK never sends:
# initialize and tools/list, the run tools in every language, concurrent
# calls each with its own output, a chart as an image, a timeout and an
# exception as isError with name, value and hint, sessions and their files,
# a cancelled call whose program is killed, every protocol error, the
# bounds, user output that never reaches stdout, and a prompt exit on
# stdin's end that leaves no process, cgroup or state directory.
. "$(dirname "$0")/../lib.sh"

SDK=$SRCDIR/tests/npm/node_modules/@modelcontextprotocol/sdk/dist/esm
if [ -n "${prereq_missing[NODE]:-}" ]; then
	test_set_prereq_missing SDK "node is not installed"
elif [ ! -f "$SDK/client/stdio.js" ]; then
	test_set_prereq_missing SDK "the MCP SDK is not installed (tests/npm/install.sh)"
fi
export WARD_SDK=$SDK
# every ward mcp of this test keeps its state directory here
export TMPDIR=$TEST_TMP/tmp WARD_MCP_TMP=$TEST_TMP/tmp
mkdir -p "$TMPDIR"

sdk() { node "$SRCDIR/tests/mcp/stdio-client.mjs" "$1" > "out.$1" 2>&1; local rc=$?; cat "out.$1"; [ $rc = 0 ] && [ "$(tail -n1 "out.$1")" = ok ]; }
raw() { python3 "$SRCDIR/tests/mcp/stdio-raw.py" "$1" > "out.$1" 2>&1; local rc=$?; cat "out.$1"; [ $rc = 0 ] && [ "$(tail -n1 "out.$1")" = ok ]; }

test_expect_success 'ward mcp --help describes it' '
	"$WARD" mcp --help > help && grep -q "MCP server" help && grep -q -- "--connect URL" help &&
	! "$WARD" mcp --bogus 2> err && grep -q "unknown or incomplete option" err &&
	{ "$WARD" mcp --api-key wk_x < /dev/null 2> err; expect_eq $? 2; } && grep -q "goes with --connect" err
'
test_expect_success SDK 'SDK: initialize, and tools/list with closed schemas' 'sdk init'
test_expect_success SDK 'SDK: run_python_code returns stdout, stderr and the last value' 'sdk python'
test_expect_success SDK,PYTHON 'SDK: run_python_code sets global_variables' 'sdk globals'
test_expect_success SDK 'SDK: run_code in bash and node' 'sdk languages'
test_expect_success SDK 'SDK: six calls at once, each with its own output' 'sdk concurrent'
test_expect_success SDK,PYTHON 'SDK: a matplotlib chart arrives as a PNG ImageContent' 'sdk image'
test_expect_success SDK 'SDK: a timeout is isError with TimeoutError and a hint' 'sdk timeout'
test_expect_success SDK 'SDK: an exception is isError with its name, value, traceback and hint' 'sdk exception'
test_expect_success SDK 'SDK: sessions keep state; write_file, read_file, list_files, close_session' 'sdk sessions'
test_expect_success SDK 'SDK: a cancelled call is killed (its file is never written, its process ends)' 'sdk cancel'
test_expect_success SDK 'SDK: program output to fd 1, /dev/stdout and /proc/self/fd/1 stays its output' 'sdk leak'
test_expect_success PYTHON 'raw: every JSON-RPC error (-32700, -32600, -32601, -32602) with its field' 'raw errors'
test_expect_success PYTHON 'raw: the protocol version is negotiated' 'raw versions'
test_expect_success PYTHON 'raw: a message over 16 MiB, deep nesting, a duplicate id in flight' 'raw bounds'
test_expect_success PYTHON 'raw: nothing but JSON-RPC ever reaches stdout' 'raw leak'
test_expect_success PYTHON 'no signal is blocked in the sandboxes; SIGTERM exits cleanly' 'raw signals'
test_expect_success PYTHON '--policy: its limits hold and only tighten; a bad one is named' 'raw policy'
test_expect_success PYTHON 'stdin'"'"'s end: prompt exit, programs killed, no state directory or cgroup left' 'raw eof'
test_done
