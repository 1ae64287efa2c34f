/* lib/layers/rlimits.c — resource limits set on the program before exec.
 * Core dumps are always off. The rest come from the policy. Lowering a hard
 * limit is irreversible for the program, which is the point. */
#include <sys/resource.h>

#include "base/util.h"
#include "sandbox.h"

static void set(struct ward_plan *plan, int resource, rlim_t soft, rlim_t hard)
{
	struct ward_rlimit *r = &plan->rlimits[plan->n_rlimits++];
	r->resource = resource;
	r->value.rlim_cur = soft;
	r->value.rlim_max = hard;
}

int ward_rlimits_prepare(struct ward_plan *plan, struct ward_error *err)
{
	const struct ward_policy *p = plan->policy;
	(void)err;
	set(plan, RLIMIT_CORE, 0, 0);
	if (p->nofile)
		set(plan, RLIMIT_NOFILE, p->nofile, p->nofile);
	/* By default a single file may be as large as the largest tmpfs, plus a
	 * page, so filling a tmpfs reports ENOSPC rather than SIGXFSZ. */
	uint64_t fsize = p->fsize;
	if (!fsize)
		fsize = (p->workspace_size > p->tmp_size ? p->workspace_size : p->tmp_size) + 4096;
	if (fsize)
		set(plan, RLIMIT_FSIZE, fsize, fsize);
	if (p->stack)
		set(plan, RLIMIT_STACK, p->stack, p->stack);
	if (p->cpu_time_ms) {
		/* The soft limit sends SIGXCPU, the hard one SIGKILL a second
		 * later: a program that ignores the first still stops. */
		rlim_t s = (p->cpu_time_ms + 999) / 1000;
		set(plan, RLIMIT_CPU, s, s + 1);
	}
	return 0;
}

int ward_rlimits_apply(struct ward_plan *plan, struct ward_error *err)
{
	for (size_t i = 0; i < plan->n_rlimits; i++) {
		const struct ward_rlimit *r = &plan->rlimits[i];
		if (prlimit(0, (enum __rlimit_resource)r->resource, &r->value, NULL) < 0)
			return ward_error_setv(err, errno, "rlimits", "unable to set a limit", NULL);
	}
	return 0;
}
