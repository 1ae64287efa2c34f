#!/bin/bash
# bench/sessions.sh — session figures of `ward serve`: warm execute and
# command latency, cancel latency, memory per idle session. A benchmark,
# not a test.
#
#   bench/sessions.sh [--calls N] [--idle N] [--oneshots M]
#
# --idle 1000 --oneshots 200 gives the crowd figures: memory per idle
# session with a python context, a warm call's p50/p99 among 1,000 live
# sessions, session create p50, and a one-shot `true` with and without
# the crowd.
#
# Starts a daemon of its own (a temporary socket, keys and state), runs
# bench/sessions.py against it, and stops it.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
WARD=${WARD:-$SRC/build/src/ward}
CALLS=200 IDLE=10 ONESHOTS=0
while [ $# -gt 0 ]; do
	case $1 in
	--calls) CALLS=${2:?}; shift 2 ;;
	--idle) IDLE=${2:?}; shift 2 ;;
	--oneshots) ONESHOTS=${2:?}; shift 2 ;;
	*) echo "usage: bench/sessions.sh [--calls N] [--idle N] [--oneshots M]" >&2; exit 2 ;;
	esac
done
d=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$d"' EXIT
key=$("$WARD" keys add --keys-file "$d/keys" --tenant bench --scopes sessions,execute --json |
	python3 -c 'import json, sys; print(json.load(sys.stdin)["key"])')
"$WARD" serve --socket "$d/run/ward.sock" --keys-file "$d/keys" \
	--max-sessions-per-tenant $((IDLE + 4)) --max-sessions $((IDLE + 4)) \
	--max-per-tenant $((IDLE + 8)) --max-executions $((IDLE + 8)) --tenant-memory 0 2> "$d/serve.log" &
pid=$!
for _ in $(seq 100); do [ -S "$d/run/ward.sock" ] && break; sleep 0.05; done
# `ward serve` execs ward-serve: the daemon keeps this pid
python3 "$SRC/bench/sessions.py" "$d/run/ward.sock" "$key" --calls "$CALLS" --idle "$IDLE" \
	--oneshots "$ONESHOTS" --pid "$pid"
