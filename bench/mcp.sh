#!/bin/bash
# bench/mcp.sh — MCP `run_python_code` latency (p50, p99) as an MCP host
# sees it, with the official MCP TypeScript SDK client (tests/npm), over
# each way ward serves MCP:
#   stdio          `ward mcp` (a private core, sandboxes as its children)
#   connect-unix   `ward mcp --connect unix://...` (the stdio relay) to ward serve
#   connect-tcp    `ward mcp --connect http://127.0.0.1:PORT` to ward serve
#   http           the daemon's /mcp directly (streamable HTTP)
# A benchmark, not a test: it prints figures and never judges the machine.
#
#   bench/mcp.sh [--runs N] [--warmup N]
#
# --runs: timed calls per mode, one after the other (default 100); --warmup:
# untimed calls first (default 10). The code is `print(1 + 1)`: what is
# measured is the path, not python. Environment: WARD (default
# build/src/ward). Needs node and tests/npm installed (tests/npm/install.sh).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
WARD=${WARD:-$SRC/build/src/ward}
RUNS=100 WARMUP=10

usage() {
	sed -n '2,17s/^# \{0,1\}//p' "$0"
	exit "${1:-0}"
}
num() { [[ $2 =~ ^[1-9][0-9]*$ ]] || { echo "bench: $1 needs a positive number" >&2; exit 2; }; }
while [ $# -gt 0 ]; do
	case $1 in
	--runs) num "$1" "${2:-}"; RUNS=$2; shift 2 ;;
	--warmup) num "$1" "${2:-}"; WARMUP=$2; shift 2 ;;
	-h | --help) usage 0 ;;
	*) echo "bench: unknown option '$1'" >&2; usage 2 >&2 ;;
	esac
done
[ -x "$WARD" ] || { echo "bench: no ward binary at $WARD (build it, or set WARD)" >&2; exit 1; }
export WARD_SDK=$SRC/tests/npm/node_modules/@modelcontextprotocol/sdk/dist/esm
[ -f "$WARD_SDK/client/index.js" ] || { echo "bench: run tests/npm/install.sh first" >&2; exit 1; }
command -v node > /dev/null || { echo "bench: node is not installed" >&2; exit 1; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ward-bench-mcp.XXXXXX")
chmod 755 "$TMP"
SPID=
trap '[ -n "$SPID" ] && kill "$SPID" 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP"' EXIT
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
KEY=$("$WARD" keys add --keys-file "$TMP/keys" --tenant bench --scopes execute,sessions,files --json |
	python3 -c 'import json, sys; print(json.load(sys.stdin)["key"])')
"$WARD" serve --socket "$TMP/run/ward.sock" --keys-file "$TMP/keys" --state-dir "$TMP/state" \
	--listen "127.0.0.1:$PORT" > "$TMP/serve.log" 2>&1 &
SPID=$!
for _ in $(seq 600); do
	curl -sf --unix-socket "$TMP/run/ward.sock" http://w/healthz > /dev/null 2>&1 && break
	sleep 0.05
done
curl -sf --unix-socket "$TMP/run/ward.sock" http://w/healthz > /dev/null ||
	{ cat "$TMP/serve.log" >&2; echo "bench: the daemon did not start" >&2; exit 1; }

echo "# $("$WARD" version 2>/dev/null | head -1), $(uname -sr), $(nproc) CPUs, as $(id -un); node $(node --version)"
echo "# $RUNS calls per mode after $WARMUP warm-up calls, one at a time; run_python_code 'print(1 + 1)'"
printf '%-14s %10s %10s %10s\n' mode p50_ms p99_ms mean_ms
# one LABEL MODE VAR=VALUE...: one mode's line
one() {
	local label=$1 mode=$2; shift 2
	env BENCH_LABEL="$label" "$@" node "$SRC/bench/mcp.mjs" "$mode" "$RUNS" "$WARMUP" |
		python3 -c 'import json, sys; d = json.load(sys.stdin); print("%-14s %10.1f %10.1f %10.1f" % (d["mode"], d["p50_ms"], d["p99_ms"], d["mean_ms"]))'
}
one stdio stdio WARD="$WARD" WARD_MCP_ARGS=
one connect-unix stdio WARD="$WARD" WARD_API_KEY="$KEY" WARD_MCP_ARGS="--connect unix://$TMP/run/ward.sock"
one connect-tcp stdio WARD="$WARD" WARD_API_KEY="$KEY" WARD_MCP_ARGS="--connect http://127.0.0.1:$PORT"
one http http WARD_MCP_URL="http://127.0.0.1:$PORT/mcp" WARD_API_KEY="$KEY"
