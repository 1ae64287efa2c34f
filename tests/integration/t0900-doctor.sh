#!/bin/bash
# `ward doctor`: the report covers every check in both formats, its exit
# status agrees with what it found, usage errors are exit 2, and it leaves
# nothing behind on the host (temp dirs, mounts, cgroups, processes).
. "$(dirname "$0")/../lib.sh"

checks='user namespaces
mount namespace
pid namespace
net namespace
ipc namespace
uts namespace
cgroup namespace
time namespace
cgroups
landlock
seccomp
pidfd
overlayfs
idmapped mounts
io_uring
ia32 emulation
newuidmap'

test_expect_success 'doctor exits 0 on this machine' '
	"$WARD" doctor >out 2>err || { cat out err; false; }
'
test_expect_success 'the text report mentions each check' '
	"$WARD" doctor >out
	echo "$checks" | while IFS= read -r c; do
		grep -q "^[a-z]*  *$c: " out || { echo "no line for $c"; cat out; exit 1; }
	done
'
test_expect_success 'every check line starts with its state' '
	"$WARD" doctor >out
	n=$(grep -cE "^(ok|missing|degraded|skipped)  +[a-z_0-9 ]+: " out)
	expect_eq "$n" "$(echo "$checks" | wc -l)"
'
test_expect_success 'the last line says whether ward can run here' '
	"$WARD" doctor >out
	expect_contains "$(tail -1 out)" "ward can run here"
'
test_expect_success 'a missing or degraded check says what ward does and how to fix it' '
	"$WARD" doctor >out
	awk "/^(missing|degraded) /{n=NR} n && NR==n+1 && !/without it: /{bad=1} END{exit bad}" out ||
		{ cat out; false; }
'
test_expect_success '--json is one object with the documented keys' '
	"$WARD" doctor --json >out &&
	python3 -c "
import json, sys
d = json.load(open(\"out\"))
for k in (\"ward_version\", \"kernel\", \"machine\", \"euid\", \"initial_userns\", \"ready\", \"summary\", \"checks\"):
    assert k in d, k
for c in d[\"checks\"]:
    for k in (\"id\", \"name\", \"state\", \"required\", \"detail\", \"without\", \"fix\", \"data\"):
        assert k in c, (c.get(\"id\"), k)
    assert c[\"state\"] in (\"ok\", \"missing\", \"degraded\", \"skipped\"), c
    assert isinstance(c[\"data\"], dict), c
assert d[\"ready\"] is True, d[\"summary\"]
"
'
test_expect_success '--json names the same checks as the text' '
	"$WARD" doctor --json | python3 -c "
import json, sys
print(\"\\n\".join(c[\"name\"] for c in json.load(sys.stdin)[\"checks\"]))" >names &&
	expect_eq "$(cat names)" "$checks"
'
test_expect_success '--json ids are stable' '
	out=$("$WARD" doctor --json | python3 -c "
import json, sys
print(\" \".join(c[\"id\"] for c in json.load(sys.stdin)[\"checks\"]))") &&
	expect_eq "$out" "userns mntns pidns netns ipcns utsns cgroupns timens cgroup landlock seccomp pidfd overlayfs idmap io_uring ia32 newuidmap"
'
test_expect_success '--json: required checks are exactly the boundary layers' '
	out=$("$WARD" doctor --json | python3 -c "
import json, sys
print(\" \".join(c[\"id\"] for c in json.load(sys.stdin)[\"checks\"] if c[\"required\"]))") &&
	expect_eq "$out" "userns mntns pidns netns ipcns utsns seccomp pidfd"
'
test_expect_success '--json reports the landlock ABI as a number' '
	abi=$("$WARD" doctor --json | python3 -c "
import json, sys
print([c for c in json.load(sys.stdin)[\"checks\"] if c[\"id\"] == \"landlock\"][0][\"data\"][\"abi\"])") &&
	[ "$abi" -ge 1 ]
'
test_expect_success '-q prints only the checks that are not ok' '
	"$WARD" doctor -q >out &&
	! grep -q "^ok " out &&
	expect_eq "$(grep -cE "^(missing|degraded|skipped) " out)" \
		"$("$WARD" doctor | grep -cE "^(missing|degraded|skipped) ")"
'
test_expect_success ROOT 'as root, idmapped mounts are checked, not skipped' '
	"$WARD" doctor >out && grep -q "^ok  *idmapped mounts: " out
'
test_expect_success NONROOT 'unprivileged, the idmapped mount check is skipped with a reason' '
	"$WARD" doctor >out && grep -q "^skipped  *idmapped mounts: not checked: " out
'
# Root of a nested user namespace is not host root: doctor must not report
# what only host root could do (idmapped mounts) as missing, nor call
# unprivileged user namespaces broken because it cannot switch to nobody.
unshare -r true 2>/dev/null || test_set_prereq_missing UNSHARE "unshare -r does not work here"
test_expect_success UNSHARE 'under unshare -r, doctor knows it is not host root' '
	unshare -r "$WARD" doctor >out; rc=$?
	cat out
	expect_eq $rc 0 &&
	grep -q "^ok  *user namespaces: created as uid 0 of a nested user namespace (host uid [0-9]*), which holds no capabilities on the host" out &&
	grep -q "^skipped  *idmapped mounts: not checked: idmapping a mount needs root of the initial user namespace" out &&
	! grep -q "rootless ward will not work" out &&
	expect_eq "$(unshare -r "$WARD" doctor --json | python3 -c "import json, sys; print(json.load(sys.stdin)[\"initial_userns\"])")" False
'
test_expect_success 'an unknown option is exit 2 and names the option' '
	"$WARD" doctor --bogus >out 2>err; rc=$?
	expect_eq "$rc" 2 && expect_contains "$(cat err)" "--bogus" && [ ! -s out ]
'
test_expect_success 'an unexpected argument is exit 2 and names it' '
	"$WARD" doctor extra >out 2>err; rc=$?
	expect_eq "$rc" 2 && expect_contains "$(cat err)" "extra"
'
test_expect_success '--help prints the usage and exits 0' '
	out=$("$WARD" doctor --help) && expect_contains "$out" "usage: ward doctor"
'
test_expect_success 'doctor leaves no temp dir, mount or cgroup behind' '
	before_tmp=$(ls -d /tmp/ward-doctor-* 2>/dev/null | wc -l)
	before_mnt=$(wc -l </proc/self/mountinfo)
	"$WARD" doctor >/dev/null && "$WARD" doctor --json >/dev/null
	expect_eq "$(ls -d /tmp/ward-doctor-* 2>/dev/null | wc -l)" "$before_tmp" &&
	expect_eq "$(wc -l </proc/self/mountinfo)" "$before_mnt" &&
	expect_eq "$(find /sys/fs/cgroup -maxdepth 3 -name "doctor-probe-*" 2>/dev/null | wc -l)" 0
'
test_expect_success 'doctor leaves no process behind' '
	"$WARD" doctor >/dev/null &
	pid=$!
	wait $pid
	! ps -eo args= | grep -Fqx "$WARD doctor"
'

test_done
