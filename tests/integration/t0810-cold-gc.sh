#!/bin/bash
# The leftover scan is off the per-run path, and leftovers are still
# removed: `ward run` scans for the cgroups of dead supervisors at most once
# per interval (a stamp in the runtime directory), `ward gc` always.
. "$(dirname "$0")/../lib.sh"
test_user_prereqs

# The hierarchy a leaf is looked for in: cgroup v1 memory, else the v2 root.
hier=/sys/fs/cgroup/memory
[ -d $hier ] || hier=/sys/fs/cgroup
stamp=/run/ward/cgroup-gc.stamp

# plant: a leaf named like one of a supervisor that is dead (a pid that
# just exited, in our pid namespace); prints its path.
plant() {
	local dead ns
	sh -c 'exit 0' & dead=$!
	wait $dead
	ns=$(stat -L -c %i /proc/self/ns/pid)
	mkdir -p "$hier/ward" &&
	mkdir "$hier/ward/ward-$dead-1-$ns-planted$1" &&
	echo "$hier/ward/ward-$dead-1-$ns-planted$1"
}

test_expect_success REALROOT 'a run whose scan is due removes a dead supervisor'"'"'s cgroup' '
	"$WARD" run -- true &&
	leaf=$(plant a) && test -d "$leaf" &&
	touch -d "1 hour ago" $stamp &&
	"$WARD" run -- true &&
	test ! -e "$leaf"
'
test_expect_success REALROOT 'a run within the interval does not scan; ward gc does' '
	"$WARD" run -- true && touch $stamp &&
	leaf=$(plant b) &&
	"$WARD" run -- true && test -d "$leaf" &&
	"$WARD" gc >/dev/null && test ! -e "$leaf"
'
test_expect_success REALROOT 'a stamp in the future does not put the scan off' '
	leaf=$(plant c) &&
	touch -d "tomorrow" $stamp &&
	"$WARD" run -- true && test ! -e "$leaf"
'
test_expect_success REALROOT 'a stamp directory writable by others is not used: the scan runs' '
	leaf=$(plant d) && touch $stamp && mode=$(stat -c %a /run/ward) &&
	chmod 0777 /run/ward &&
	"$WARD" run -- true; rc=$?
	chmod "$mode" /run/ward
	[ $rc = 0 ] && test ! -e "$leaf"
'
test_done
