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
	if (unshare(CLONE_NEWCGROUP) < 0) {
		if (plan->allow_degrade & (1u << WARD_LAYER_CGROUPNS)) {
			plan->degraded |= 1u << WARD_LAYER_CGROUPNS;
			return 0;
		}
		ward_error_setv(err, errno, "cgroupns", "unable to create a cgroup namespace", NULL);
		ward_error_hint(err, "CONFIG_CGROUPS with cgroup namespaces (Linux >= 4.6)");
		return -err->code;
	}
	plan->layers |= 1u << WARD_LAYER_CGROUPNS;
	return 0;
}
