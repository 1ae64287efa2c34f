/* lib/layers/uts.c — the uts namespace: the sandbox's own hostname.
 * Child-safe. Must never touch the host's hostname (it runs only after
 * clone with CLONE_NEWUTS). */
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "sandbox.h"

int ward_uts_apply(struct ward_plan *plan, struct ward_error *err)
{
	if (sethostname(plan->hostname, strlen(plan->hostname)) < 0)
		return ward_error_setv(err, errno, "uts", "unable to set the hostname '",
				       plan->hostname, "'", NULL);
	if (setdomainname("", 0) < 0)
		return ward_error_setv(err, errno, "uts", "unable to clear the domain name", NULL);
	return 0;
}
