/* lib/layers/cgroupns.c — the cgroup namespace: the sandbox sees its own
 * cgroup as the root of the hierarchy.
 *
 * Created in the child rather than at clone: on cgroup v1 the child joins
 * its hierarchies only after clone, and the namespace's root must be the
 * sandbox's own cgroup, not the supervisor's. Child-safe. */
#include <sched.h>

#include "base/util.h"
#include "sandbox.h"

int ward_cgroupns_apply(struct ward_plan *plan, struct ward_error *err)
{
	(void)plan; /* degradable: the pipeline (lib/sandbox.c) decides */
	if (unshare(CLONE_NEWCGROUP) < 0) {
		ward_error_setv(err, errno, "cgroupns", "unable to create a cgroup namespace", NULL);
		ward_error_hint(err, "CONFIG_CGROUPS with cgroup namespaces (Linux >= 4.6)");
		return -err->code;
	}
	return 0;
}
