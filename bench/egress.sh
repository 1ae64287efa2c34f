#!/bin/bash
# bench/egress.sh — what the egress proxy costs: a download through it from
# a sandbox against the same download on the host, and the time it adds to
# setting up a connection (an HTTP CONNECT tunnel, a transparently captured
# connection, a plain HTTP forward). A benchmark, not a test: it prints
# figures and their ratios and never judges the machine.
#
#   bench/egress.sh [--bytes N] [--runs N] [--conns N]
#
# --bytes: the download's size (default 100000000); --runs: downloads per
# mode, the median is reported (default 5); --conns: connections per
# latency figure, after 20 warm-up ones (default 300). The server is the
# tests' fixture (tests/egress/servers.py) on 127.0.0.1; the client is
# bench/egress.py, the same code on the host ("direct") and inside one
# `ward run --net allow:...` sandbox. Environment: WARD (default
# build/src/ward).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
WARD=${WARD:-$SRC/build/src/ward}
PY=/usr/bin/python3
BYTES=100000000 RUNS=5 CONNS=300

usage() {
	sed -n '2,17s/^# \{0,1\}//p' "$0"
	exit "${1:-0}"
}
num() { [[ $2 =~ ^[1-9][0-9]*$ ]] || { echo "bench: $1 needs a positive number" >&2; exit 2; }; }
while [ $# -gt 0 ]; do
	case $1 in
	--bytes) num "$1" "${2:-}"; BYTES=$2; shift 2 ;;
	--runs) num "$1" "${2:-}"; RUNS=$2; shift 2 ;;
	--conns) num "$1" "${2:-}"; CONNS=$2; shift 2 ;;
	-h | --help) usage 0 ;;
	*) echo "bench: unknown option '$1'" >&2; usage 2 >&2 ;;
	esac
done
[ -x "$WARD" ] || { echo "bench: no ward binary at $WARD (build it, or set WARD)" >&2; exit 1; }
case $("$WARD" run --help 2>&1) in
*"--net allow:"*) ;;
*) echo "bench: this ward has no egress proxy (no --net allow:)" >&2; exit 1 ;;
esac

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ward-bench-egress.XXXXXX")
chmod 755 "$TMP"
FXPID=
trap '[ -n "$FXPID" ] && kill "$FXPID" 2>/dev/null; rm -rf "$TMP"' EXIT
"$PY" "$SRC/tests/egress/servers.py" "$TMP/fx" > "$TMP/fx.log" 2>&1 &
FXPID=$!
for _ in $(seq 600); do [ -s "$TMP/fx/servers.json" ] && break; sleep 0.05; done
[ -s "$TMP/fx/servers.json" ] || { cat "$TMP/fx.log" >&2; echo "bench: the fixture servers did not start" >&2; exit 1; }
HTTP=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["http"])' "$TMP/fx/servers.json")
mkdir "$TMP/bin" && cp "$SRC/bench/egress.py" "$TMP/bin/" && chmod -R a+rX "$TMP/bin"

echo "# host (direct), 127.0.0.1:$HTTP" >&2
{
	"$PY" "$SRC/bench/egress.py" download direct 127.0.0.1 "$HTTP" "$BYTES" "$RUNS"
	"$PY" "$SRC/bench/egress.py" latency direct 127.0.0.1 "$HTTP" "$CONNS"
} | sed 's/^{/{"side": "host", /' > "$TMP/host.jsonl"

echo "# sandbox (through the proxy)" >&2
"$WARD" run --json --timeout 600 --memory 1G --ro "$TMP/bin:/bench" \
	--net "allow:bench.test:$HTTP" --egress-resolve bench.test=127.0.0.1 --egress-allow-private 127.0.0.1/32 \
	-- python3 /bench/egress.py suite bench.test "$HTTP" "$BYTES" "$RUNS" "$CONNS" > "$TMP/verdict.json" || true
"$PY" -c 'import json, sys
v = json.load(open(sys.argv[1]))
if v["status"] != "ok":
    sys.exit("bench: the sandbox side failed (%s): %s" % (v["status"], v["stderr"][-2000:]))
sys.stdout.write(v["stdout"])' "$TMP/verdict.json" | sed 's/^{/{"side": "sandbox", /' > "$TMP/sandbox.jsonl"

cat "$TMP/host.jsonl" "$TMP/sandbox.jsonl"
"$PY" - "$TMP/host.jsonl" "$TMP/sandbox.jsonl" <<'PYEOF'
import json, sys
rows = [json.loads(l) for f in sys.argv[1:] for l in open(f) if l.strip()]
get = lambda what, mode: next(r for r in rows if r["what"] == what and r["mode"] == mode)
d, l = get("download", "direct"), get("latency", "direct")
print()
print("download of %d MB, median of %d (MB/s; ratio to the host's direct download)" % (d["bytes"] // 1000000, d["runs"]))
print("  %-24s %9.1f  1.00" % ("host, direct", d["mb_s_median"]))
for m in ("forward", "connect", "transparent"):
    r = get("download", m)
    print("  %-24s %9.1f  %.2f" % ("sandbox, " + m, r["mb_s_median"], r["mb_s_median"] / d["mb_s_median"]))
print("connection setup to the first byte, p50 over %d (ms; added by the proxy)" % l["n"])
print("  %-24s %9.3f" % ("host, direct", l["p50_ms"]))
for m in ("forward", "connect", "transparent"):
    r = get("latency", m)
    print("  %-24s %9.3f  %+.3f" % ("sandbox, " + m, r["p50_ms"], r["p50_ms"] - l["p50_ms"]))
PYEOF
