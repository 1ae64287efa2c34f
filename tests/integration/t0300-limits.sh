#!/bin/bash
# Every ending reported as itself, each produced by a real payload.
. "$(dirname "$0")/../lib.sh"

verdict() { "$WARD" run --json "$@"; }
field() { ward_json "$1" < v.json; }

# Without a cgroup (rootless, no delegation) the kernel cannot count OOM
# kills or refused forks for the sandbox as a whole: those verdicts need one.
if ! "$WARD" run --json -- true | grep -q '"degraded":\[\]'; then
	test_set_prereq_missing CGROUP "no usable cgroup for this user (rootless without delegation)"
fi

test_expect_success 'exit 0 is ok' '
	verdict -- true > v.json; expect_eq "$(field status)" ok && expect_eq "$(field exit_code)" 0
'
test_expect_success 'a non-zero exit is error, with the code' '
	verdict -- sh -c "exit 4" > v.json; expect_eq "$(field status)" error && expect_eq "$(field exit_code)" 4
'
test_expect_success CGROUP 'a memory bomb is memory_limit, with a peak near the limit' '
	verdict --memory 64M -- python3 -c "
b = []
while True: b.append(bytearray(8 << 20))" > v.json
	expect_eq "$(field status)" memory_limit && expect_eq "$(field limit.name)" memory &&
	expect_eq "$(field limit.value)" 67108864 &&
	peak=$(field usage.peak_memory_bytes) && [ "$peak" -ge 50000000 ] && [ "$peak" -le 67108864 ]
'
test_expect_success NONROOT 'rootless without a cgroup: memory is capped by rlimits, cgroup degraded' '
	verdict --memory 64M -- python3 -c "b = bytearray(200 << 20)" > v.json
	expect_eq "$(field degraded)" "[\"cgroup\"]" && expect_eq "$(field status)" error &&
	expect_contains "$(field stderr)" MemoryError
'
test_expect_success CGROUP 'a fork bomb is pids_limit, and the host keeps its process count' '
	before=$(ls /proc | grep -c "^[0-9]")
	verdict --pids 32 --timeout 20 -- python3 -c "
import os, time
while True:
    os.fork()" > v.json &
	vp=$!
	max=0
	while kill -0 $vp 2>/dev/null; do
		n=$(ls /proc | grep -c "^[0-9]"); [ $n -gt $max ] && max=$n; sleep 0.05
	done
	wait $vp
	expect_eq "$(field status)" pids_limit && expect_eq "$(field limit.value)" 32 &&
	[ $max -lt $((before + 80)) ] || { echo "before $before max $max"; false; }
'
test_expect_success 'a busy loop with --cpu-time 1 is cpu_timeout' '
	verdict --cpu-time 1 -- python3 -c "while True: pass" > v.json
	expect_eq "$(field status)" cpu_timeout && expect_eq "$(field limit.value)" 1000 &&
	cpu=$(( $(field usage.cpu_user_ms) + $(field usage.cpu_sys_ms) )) && [ $cpu -ge 900 ]
'
test_expect_success 'sleep 100 with --timeout 1 is timeout after about a second' '
	verdict --timeout 1 -- sleep 100 > v.json
	expect_eq "$(field status)" timeout && expect_eq "$(field signal)" 9 &&
	wall=$(field usage.wall_ms) && [ $wall -ge 1000 ] && [ $wall -lt 3000 ]
'
test_expect_success '100 MB of output is output_limit, without blocking' '
	verdict --timeout 20 -- python3 -c "
import sys
for _ in range(100): sys.stdout.write(\"x\" * (1 << 20))" > v.json
	expect_eq "$(field status)" output_limit && expect_eq "$(field stdout_truncated)" true &&
	expect_eq "$(field usage.output_bytes)" 104857600 && [ $(field usage.wall_ms) -lt 15000 ]
'
test_expect_success 'passthrough output is capped too' '
	n=$("$WARD" run -q --output-limit 1M -- python3 -c "print(\"y\" * (4 << 20))" | wc -c)
	expect_eq "$n" 1048576
'
test_expect_success 'filling /workspace is disk_limit' '
	verdict --workspace-size 4M -- sh -c "cat /dev/zero > /workspace/fill" > v.json
	expect_eq "$(field status)" disk_limit && expect_eq "$(field limit.value)" 4194304
'
test_expect_success 'kill -SEGV $$ is signaled, with the signal' '
	verdict -- sh -c "kill -SEGV \$\$" > v.json
	expect_eq "$(field status)" signaled && expect_eq "$(field signal)" 11 &&
	expect_eq "$(field exit_code)" null
'
test_expect_success 'SIGINT to ward cancels the run: killed' '
	m=$((60000 + RANDOM))
	"$WARD" run --json -- sleep $m > v.json & wp=$!
	wait_for "the program to run" "pgrep -f \"^sleep $m\$\" >/dev/null" &&
	kill -INT $wp; wait $wp; rc=$?
	expect_eq $rc 137 && expect_eq "$(field status)" killed
'
test_expect_success 'a setup failure is setup_failed with the layer' '
	verdict --ro /nonexistent-ward-src -- true > v.json; rc=$?
	expect_eq $rc 125 && expect_eq "$(field status)" setup_failed && expect_eq "$(field error.layer)" mount
'
test_expect_success CGROUP 'a fork bomb the kernel survives is pids_limit too, not a plain error (ward exec)' '
	"$WARD" exec --json --lang python --pids 16 -c "import os
while True: os.fork()" > v.json
	expect_eq "$(field status)" pids_limit && expect_eq "$(field limit.name)" pids &&
	expect_eq "$(field limit.value)" 16 && [ "$(field usage.forks_refused)" -gt 0 ]
'
test_expect_success CGROUP 'a cell that fails for its own reasons stays an error (forks_refused is 0)' '
	"$WARD" exec --json --lang python --pids 16 -c "raise ValueError(1)" > v.json
	expect_eq "$(field status)" error && expect_eq "$(field usage.forks_refused)" 0
'
test_expect_success CGROUP '--cpus caps the CPU quota' '
	verdict --cpus 0.2 --timeout 2 -- python3 -c "while True: pass" > v.json
	cpu=$(( $(field usage.cpu_user_ms) + $(field usage.cpu_sys_ms) ))
	expect_eq "$(field status)" timeout && [ $cpu -lt 900 ] || { echo "cpu $cpu ms in 2 s"; false; }
'
test_expect_success NONROOT 'cgroup.required turns the missing cgroup into a setup failure naming it' '
	echo "{\"cgroup\": {\"required\": true}}" > req.json &&
	"$WARD" run --json --policy req.json -- true > v.json; rc=$?
	expect_eq $rc 125 && expect_eq "$(field status)" setup_failed && expect_eq "$(field error.layer)" cgroup
'
test_expect_success CGROUP 'cgroup.required is satisfied where a cgroup can be made' '
	echo "{\"cgroup\": {\"required\": true}}" > req.json &&
	"$WARD" run --json --policy req.json -- true > v.json &&
	expect_eq "$(field status)" ok && expect_contains "$(field layers)" cgroup
'
test_expect_success 'open files are capped (RLIMIT_NOFILE)' '
	out=$("$WARD" run -q -- sh -c "ulimit -n") && expect_eq "$out" 1024
'
test_expect_success 'file size is capped (RLIMIT_FSIZE) and core dumps are off' '
	out=$("$WARD" run -q -- sh -c "ulimit -c; ulimit -f") && expect_eq "$(echo $out)" "0 131080"
'
test_done
