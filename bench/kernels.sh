#!/bin/bash
# bench/kernels.sh — cold start of the language kernels, the verdict's cost,
# and the cgroup's cost, in one run. A benchmark, not a test.
#
#   bench/kernels.sh [--runs N]
#
# Cold time from `ward exec` start to its end for print(1) in python and
# console.log(1) in node (an upper bound on the time to the first result: it
# includes the kernel's shutdown and the sandbox's teardown), and for
# `import numpy, pandas`; `ward run --json -- /bin/true` against plain
# `ward run -- /bin/true`; cgroup setup and teardown per sandbox.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
WARD=${WARD:-$SRC/build/src/ward}
BUILD=${WARD_BUILD:-$(dirname "$(dirname "$WARD")")}
RUNS=30
[ "${1:-}" = --runs ] && RUNS=${2:?--runs needs a number}
command -v hyperfine >/dev/null || { echo "bench: hyperfine is needed (apt-get install hyperfine)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

hyperfine -N --warmup 3 --runs "$RUNS" --export-json "$out/k.json" \
	"$WARD exec --lang python -c print(1)" \
	"/usr/bin/python3 -c print(1)" \
	"$WARD exec --lang node -c console.log(1)" \
	"/usr/bin/node -e console.log(1)" \
	"$WARD exec --lang python -c 'import numpy, pandas'" \
	"/usr/bin/python3 -c 'import numpy, pandas'" \
	"$WARD run -- /bin/true" \
	"$WARD run --json -- /bin/true" >/dev/null
python3 - "$out/k.json" <<'PY'
import json, sys
rs = json.load(open(sys.argv[1]))["results"]
print("# medians in ms (%d runs each); bare interpreters for comparison" % len(rs[0]["times"]))
for r in rs:
    cmd = r["command"]
    if " exec " in cmd or " run " in cmd:
        cmd = "ward " + cmd.split(" ", 1)[1]
    print("%-55s %8.2f" % (cmd, r["median"] * 1000))
plain, js = rs[6]["median"], rs[7]["median"]
print("%-55s %+8.2f" % ("--json over plain ward run", (js - plain) * 1000))
PY
if [ "$(id -u)" = 0 ] && [ -x "$BUILD/bench/cgroup-cost" ]; then
	"$BUILD/bench/cgroup-cost" 200
fi
