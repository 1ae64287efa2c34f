#!/bin/bash
# `ward serve` under the attacks that used to freeze its loop: a FIFO or a
# file lease planted in /workspace under an upload, a one-shot that leaves
# 6.4 GB of sparse files to hash, and slow uploads held in memory. While
# each runs, /healthz and another tenant's execution keep answering, and
# the daemon's memory stays bounded. Also the files API's edge cases:
# names that are not UTF-8, a trailing slash, a NUL in the path, and a
# directory deeper than any fixed recursion.
. "$(dirname "$0")/../lib.sh"

. "$(dirname "$0")/serve-lib.sh"
CONF=$D/serve.json

# What "keeps answering" means: every /healthz during the attack within
# HEALTH_MS, another tenant's one-shot within EXEC_MS.
HEALTH_MS=500
EXEC_MS=3000
KA= KB= KC=
if [ -z "${prereq_missing[SERVE]:-}" ]; then
	cat > "$CONF" <<-EOF
	{"max_sessions_per_tenant": 4, "session_ttl": 120, "max_file": "8M"}
	EOF
	KA=$("$WARD" keys add --keys-file "$KEYS" --tenant acme --scopes sessions,files,execute --json | key_of)
	KB=$("$WARD" keys add --keys-file "$KEYS" --tenant beta --scopes sessions,files,execute --json | key_of)
	KC=$("$WARD" keys add --keys-file "$KEYS" --tenant gamma --scopes sessions,files,execute --json | key_of)
	start_daemon --config "$CONF"
fi
A=(-H "Authorization: Bearer $KA")
B=(-H "Authorization: Bearer $KB")
C=(-H "Authorization: Bearer $KC")
new_session() { r=$(api POST /v1/sessions "${A[@]}" -d '{}') && [ "$(code "$r")" = 201 ] && field "$r" 'd["id"]'; }
ex() { api POST "/v1/sessions/$1/execute" "${A[@]}" -d "$2"; }
daemon_pid() { cat "$D/pid"; }
# mkbody: the code on stdin as an execute body
mkbody() { python3 -c 'import json, sys; print(json.dumps({"code": sys.stdin.read()}))'; }

# probe ATTACK-COMMAND...: runs the attack, and while it runs asks /healthz
# every 50 ms and starts one execution of tenant beta; prints JSON with the
# slowest /healthz (ms), the execution's time (ms) and status, the attack's
# time (ms) and its output (the last line: an HTTP status).
cat > "$TEST_TMP/probe.py" <<'EOF'
import http.client, json, socket, subprocess, sys, threading, time
sock, key, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
class Conn(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(self.timeout)
        self.sock.connect(sock)
def get(method, path, body=None, timeout=10.0):
    t = time.monotonic()
    try:
        c = Conn("w", timeout=timeout)
        c.request(method, path, body, {"Authorization": "Bearer " + key} if body else {})
        r = c.getresponse(); data = r.read(); st = r.status
    except Exception as e:
        st, data = 0, str(e).encode()
    return (time.monotonic() - t) * 1000, st, data
t0 = time.monotonic()
atk = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
res = {}
def other():
    time.sleep(0.3)
    ms, st, data = get("POST", "/v1/executions", b'{"command": ["/bin/true"]}')
    res["exec_ms"], res["exec_http"] = round(ms), st
    try: res["exec_status"] = json.loads(data)["status"]
    except Exception: res["exec_status"] = None
th = threading.Thread(target=other); th.start()
worst, n = 0.0, 0
while (atk.poll() is None or th.is_alive()) and time.monotonic() - t0 < 40:
    ms, st, _ = get("GET", "/healthz", timeout=5.0)
    worst = max(worst, ms if st == 200 else 5000.0); n += 1
    time.sleep(0.05)
out = atk.communicate()[0].decode(errors="replace").strip()
th.join()
res.update(healthz_worst_ms=round(worst), healthz_n=n,
           attack_ms=round((time.monotonic() - t0) * 1000), attack=out.splitlines()[-1:] or [""])
res["attack"] = res["attack"][0]
print(json.dumps(res))
EOF
# slow.py SOCK SESSION KEY:N...: N uploads per key, each announcing 8 MiB
# and sending 7.5 MiB of it, then holding; prints the statuses answered
# before the body was whole (0: none yet), and waits for a line on stdin.
cat > "$TEST_TMP/slow.py" <<'EOF'
import json, socket, sys
sock, sess, specs = sys.argv[1], sys.argv[2], sys.argv[3:]
conns = []
for spec in specs:
    key, n = spec.rsplit(":", 1)
    for i in range(int(n)):
        c = socket.socket(socket.AF_UNIX); c.connect(sock)
        c.sendall(("PUT /v1/sessions/%s/files?path=slow%d HTTP/1.1\r\nHost: w\r\n"
                   "Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n"
                   % (sess, len(conns), key, 8 << 20)).encode())
        conns.append(c)
        c.settimeout(0.5)
        try:
            c.sendall(b"x" * (15 << 19))
        except OSError:
            pass
statuses = []
for c in conns:
    c.settimeout(0.5)
    try:
        statuses.append(int(c.recv(4096).split()[1]))
    except (OSError, IndexError, ValueError):
        statuses.append(0)
print(json.dumps(sorted(statuses)), flush=True)
sys.stdin.readline()
EOF
probe() { python3 "$TEST_TMP/probe.py" "$SOCK" "$KB" "$@" | tee -a "$D/figures"; }
# checks a probe's figures: the loop kept answering
kept_answering() {
	echo "$1" &&
	expect_eq "$(ward_json exec_status <<<"$1")" ok &&
	expect_eq "$(python3 -c "import json, sys; d = json.loads(sys.argv[1]); print(d[\"healthz_worst_ms\"] < $HEALTH_MS and d[\"exec_ms\"] < $EXEC_MS)" "$1")" True
}
put() { curl -sS -m 60 --unix-socket "$SOCK" -X PUT -w '\n%{http_code}' "${A[@]}" "$@"; }

test_expect_success SERVE 'a session to attack from' '
	S=$(new_session) && echo "$S" > "$D/S"
'
S=$(cat "$D/S" 2>/dev/null)

test_expect_success SERVE 'a FIFO planted in /workspace: the upload onto it is refused, the loop keeps answering' '
	r=$(ex "$S" "{\"code\": \"import os; os.mkfifo(\\\"/workspace/fifo\\\")\"}") &&
	expect_eq "$(field "$r" "d[\"status\"]")" ok &&
	f=$(probe curl -sS -m 30 --unix-socket "$SOCK" -X PUT "${A[@]}" -o "$D/fifo.out" -w "%{http_code}" \
		"http://w/v1/sessions/$S/files?path=fifo" -d x) &&
	kept_answering "$f" &&
	expect_eq "$(ward_json attack <<<"$f")" 400 &&
	expect_eq "$(ward_json error.code < "$D/fifo.out")" not_a_file &&
	expect_eq "$(ward_json error.field < "$D/fifo.out")" path
'

test_expect_success SERVE 'a file lease taken in the sandbox: the upload is refused at once, the loop keeps answering' '
	r=$(ex "$S" "{\"code\": \"import fcntl, os, signal\\nsignal.signal(signal.SIGIO, signal.SIG_IGN)\\nleased = open(\\\"/workspace/leased\\\", \\\"w\\\")\\nfcntl.fcntl(leased, 1024, fcntl.F_WRLCK)\\nprint(fcntl.fcntl(leased, 1025))\"}") &&
	expect_eq "$(field "$r" "d[\"status\"]")" ok && expect_eq "$(field "$r" "d[\"stdout\"]")" 1 &&
	f=$(probe curl -sS -m 60 --unix-socket "$SOCK" -X PUT "${A[@]}" -o "$D/lease.out" -w "%{http_code}" \
		"http://w/v1/sessions/$S/files?path=leased" -d x) &&
	kept_answering "$f" &&
	expect_eq "$(ward_json attack <<<"$f")" 409 &&
	expect_eq "$(ward_json error.code < "$D/lease.out")" file_busy &&
	r=$(api GET "/v1/sessions/$S/files?path=leased" "${A[@]}") && expect_eq "$(code "$r")" 409 &&
	expect_eq "$(field "$r" "d[\"error\"][\"code\"]")" file_busy
'

test_expect_success SERVE '100 sparse 64 MiB files left by a one-shot: nothing over the cap is hashed, the loop keeps answering' '
	python3 -c "import json; print(json.dumps({\"language\": \"python\", \"code\":
		\"for i in range(100):\\n    open(\\\"/workspace/s%d\\\" % i, \\\"wb\\\").truncate(64 << 20)\"}))" > sparse.json &&
	f=$(probe curl -sS -m 60 --unix-socket "$SOCK" "${A[@]}" -o "$D/sparse.out" -w "%{http_code}" \
		http://w/v1/executions -d @sparse.json) &&
	kept_answering "$f" &&
	expect_eq "$(ward_json attack <<<"$f")" 200 &&
	expect_eq "$(ward_json status < "$D/sparse.out")" ok &&
	v=$(cat "$D/sparse.out") &&
	expect_eq "$(python3 -c "import json, sys; d = json.load(sys.stdin); a = d[\"artifacts\"]; k = {x[\"path\"]: x[\"reason\"] for x in d[\"artifacts_skipped\"]}; print(len(a), {x[\"sha256\"] for x in a}, {x[\"size\"] for x in a}, k.get(\"s7\"))" <<<"$v")" \
		"100 {None} {67108864} larger than the per-file cap (16 MiB): listed, not hashed or copied"
'

test_expect_success SERVE 'slow uploads: what they hold in memory is capped in all and per tenant; the loop keeps answering' '
	rss() { sed -n "s/^VmRSS:[^0-9]*\([0-9]*\).*/\1/p" /proc/$(daemon_pid)/status; }
	rss0=$(rss) &&
	mkfifo go && { python3 "$TEST_TMP/slow.py" "$SOCK" "$S" "$KA:4" "$KB:4" "$KC:4" < go > slow.out & } &&
	exec 9> go &&
	for _ in $(seq 300); do [ -s slow.out ] && break; sleep 0.1; done &&
	rss1=$(rss) && f=$(probe true) && exec 9>&- && wait &&
	echo "statuses $(cat slow.out) rss $rss0 -> $rss1 kB" | tee -a "$D/figures" &&
	kept_answering "$f" &&
	expect_eq "$(cat slow.out)" "[0, 0, 0, 0, 429, 429, 503, 503, 503, 503, 503, 503]" &&
	expect_eq "$(( (rss1 - rss0) < 40 * 1024 ))" 1 &&
	r=$(api PUT "/v1/sessions/$S/files?path=after" "${A[@]}" -d x) && expect_eq "$(code "$r")" 201
'

test_expect_success SERVE 'files: a name that is not UTF-8 is listed, escaped and flagged, and can be read' '
	r=$(ex "$S" "$(mkbody <<-"EOF"
	import os
	os.makedirs("/workspace/odd", exist_ok=True)
	open(b"/workspace/odd/caf\xe9\\x.txt", "w").write("bytes")
	open("/workspace/odd/plain.txt", "w").write("plain")
	EOF
	)") && expect_eq "$(field "$r" "d[\"status\"]")" ok &&
	r=$(api GET "/v1/sessions/$S/files?path=odd" "${A[@]}") && expect_eq "$(code "$r")" 200 &&
	expect_eq "$(field "$r" "sorted((e[\"path\"], e.get(\"path_escaped\", False)) for e in d[\"entries\"])")" \
		"[[\"odd/caf\\\\xe9\\\\x5cx.txt\", true], [\"odd/plain.txt\", false]]" &&
	r=$(api GET "/v1/sessions/$S/files?path=odd/caf%E9%5Cx.txt" "${A[@]}") && expect_eq "$(code "$r")" 200 &&
	expect_eq "$(body "$r")" bytes
'

test_expect_success SERVE 'files: a trailing slash or a NUL in the path is refused, naming path' '
	for m in GET PUT DELETE; do
		r=$(api $m "/v1/sessions/$S/files?path=odd/" "${A[@]}" -d x) && expect_eq "$(code "$r")" 400 &&
		expect_eq "$(field "$r" "d[\"error\"][\"field\"]")" path &&
		expect_contains "$(field "$r" "d[\"error\"][\"message\"]")" "ends with" || exit 1
		r=$(api $m "/v1/sessions/$S/files?path=odd/plain.txt%00.png" "${A[@]}" -d x) && expect_eq "$(code "$r")" 400 &&
		expect_eq "$(field "$r" "d[\"error\"][\"field\"]")" path &&
		expect_contains "$(field "$r" "d[\"error\"][\"message\"]")" "NUL" || exit 1
	done &&
	r=$(api GET "/v1/sessions/$S/files?path=odd/plain.txt" "${A[@]}") && expect_eq "$(body "$r")" plain &&
	r=$(api GET "/v1/sessions/$S/files?path=/workspace/" "${A[@]}") && expect_eq "$(code "$r")" 200
'

test_expect_success SERVE 'files: a directory 400 levels deep is deleted whole' '
	r=$(ex "$S" "$(mkbody <<-"EOF"
	import os
	p = "/workspace/deep" + "/d" * 400
	os.makedirs(p)
	for i in range(0, 400, 50):
	    open("/workspace/deep" + "/d" * i + "/f", "w").write("x")
	open(p + "/bottom", "w").write("x")
	EOF
	)") && expect_eq "$(field "$r" "d[\"status\"]")" ok &&
	r=$(api DELETE "/v1/sessions/$S/files?path=deep" "${A[@]}") && expect_eq "$(code "$r")" 200 &&
	expect_eq "$(field "$r" "d[\"deleted\"]")" true &&
	r=$(api GET "/v1/sessions/$S/files?path=deep" "${A[@]}") && expect_eq "$(code "$r")" 404
'

# the figures: how long /healthz and another tenant took during each attack
[ -f "$D/figures" ] && sed 's/^/# /' "$D/figures"
test_done
