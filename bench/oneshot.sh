#!/bin/bash
# bench/oneshot.sh — one-shot figures of `ward serve` through its unix
# socket: p50/p99 of python `print(1)` and of a numpy line (one client),
# and throughput with several clients, with the warm pool on and off. A
# benchmark, not a test.
#
#   bench/oneshot.sh [--runs N] [--gap MS] [--clients N] [--seconds S] [--pool SPEC] [--rounds N]
#
# Each round starts a daemon with --pool SPEC (default python=4) and one
# with --pool none, one after the other (A B A B), and runs
# bench/oneshot.py against each; one JSON line per daemon.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
WARD=${WARD:-$SRC/build/src/ward}
RUNS=200 GAP=0 CLIENTS=16 SECONDS_=10 POOL=python=4 ROUNDS=1
while [ $# -gt 0 ]; do
	case $1 in
	--runs) RUNS=${2:?}; shift 2 ;;
	--gap) GAP=${2:?}; shift 2 ;;
	--clients) CLIENTS=${2:?}; shift 2 ;;
	--seconds) SECONDS_=${2:?}; shift 2 ;;
	--pool) POOL=${2:?}; shift 2 ;;
	--rounds) ROUNDS=${2:?}; shift 2 ;;
	*) echo "usage: bench/oneshot.sh [--runs N] [--gap MS] [--clients N] [--seconds S] [--pool SPEC] [--rounds N]" >&2
	   exit 2 ;;
	esac
done
d=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$d"' EXIT
key=$("$WARD" keys add --keys-file "$d/keys" --tenant bench --scopes execute --json |
	python3 -c 'import json, sys; print(json.load(sys.stdin)["key"])')
run() {
	local pool=$1
	"$WARD" serve --socket "$d/run/ward.sock" --keys-file "$d/keys" --state-dir "$d/state" \
		--pool "$pool" --max-per-tenant $((CLIENTS + 4)) 2>> "$d/serve.log" &
	pid=$!
	for _ in $(seq 200); do
		curl -sf --unix-socket "$d/run/ward.sock" http://w/healthz > /dev/null 2>&1 && break
		sleep 0.05
	done
	printf '{"pool": "%s", "figures": ' "$pool"
	python3 "$SRC/bench/oneshot.py" "$d/run/ward.sock" "$key" --runs "$RUNS" --gap "$GAP" \
		--clients "$CLIENTS" --seconds "$SECONDS_" | tr -d '\n'
	echo '}'
	kill "$pid"
	wait "$pid" || true
	pid=
}
for _ in $(seq "$ROUNDS"); do
	run "$POOL"
	run none
done
