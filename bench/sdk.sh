#!/bin/bash
# bench/sdk.sh — the Python SDK's overhead per run_code over a warm session
# against raw HTTP (p50, ratio), on a daemon of its own. A benchmark, not a
# test.
#
#   bench/sdk.sh [--runs N] [--code CODE]
#
# Starts `ward serve` on a temporary socket with a temporary key and state,
# runs bench/sdk.py against it (interleaved rounds: raw HTTP, raw NDJSON,
# the sync SDK, the async SDK), and stops it.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
WARD=${WARD:-$SRC/build/src/ward}
PY=${PYTHON:-python3}
ARGS=()
while [ $# -gt 0 ]; do
	case $1 in
	--runs|--code) ARGS+=("$1" "${2:?}"); shift 2 ;;
	*) echo "usage: bench/sdk.sh [--runs N] [--code CODE]" >&2; exit 2 ;;
	esac
done
d=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$d"' EXIT
key=$("$WARD" keys add --keys-file "$d/keys" --tenant bench --scopes sessions,execute --json |
	"$PY" -c 'import json, sys; print(json.load(sys.stdin)["key"])')
"$WARD" serve --socket "$d/run/ward.sock" --keys-file "$d/keys" --state-dir "$d/state" 2> "$d/serve.log" &
pid=$!
for _ in $(seq 100); do [ -S "$d/run/ward.sock" ] && break; sleep 0.05; done
"$PY" "$SRC/bench/sdk.py" "$d/run/ward.sock" "$key" "${ARGS[@]}"
