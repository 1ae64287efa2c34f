/* lib/plan.c — turns a policy into a plan, in the parent, before clone.
 *
 * Everything that parses, allocates or can fail slowly happens here; the
 * child only reads the plan. The string arena is allocated once and never
 * grows, so pointers into it stay valid for the plan's lifetime.
 */
#include <string.h>

#include "base/util.h"
#include "sandbox.h"

enum { WARD_PLAN_ARENA = 256 * 1024 };

const char *ward_plan_strdup(struct ward_plan *plan, const char *s, size_t len)
{
	if (!plan->strings) {
		plan->strings = malloc(WARD_PLAN_ARENA);
		if (!plan->strings)
			return NULL;
		plan->strings_cap = WARD_PLAN_ARENA;
		plan->strings_len = 0;
	}
	if (len + 1 > plan->strings_cap - plan->strings_len)
		return NULL;
	char *d = plan->strings + plan->strings_len;
	memcpy(d, s, len);
	d[len] = '\0';
	plan->strings_len += len + 1;
	return d;
}

int ward_plan_add_mount(struct ward_plan *plan, const struct ward_mount_op *op,
			struct ward_error *err)
{
	if (plan->n_mounts >= WARD_PLAN_MAX_MOUNTS)
		return ward_error_set(err, E2BIG, "mount",
				      "too many mounts (at most %d)", WARD_PLAN_MAX_MOUNTS);
	struct ward_mount_op *m = &plan->mounts[plan->n_mounts++];
	*m = *op;
	m->fd = -1;
	return 0;
}

int ward_plan_build(struct ward_plan *plan, const struct ward_policy *policy,
		    char *const argv[], const struct ward_sandbox_options *opts,
		    struct ward_error *err)
{
	memset(plan, 0, sizeof(*plan));
	plan->policy = policy;
	plan->argv = argv;
	if (opts) {
		plan->files = opts->files;
		plan->n_files = opts->n_files;
		plan->extra_binds = opts->binds;
		plan->n_extra_binds = opts->n_binds;
	}
	plan->workdir = policy->workdir ? policy->workdir : "/workspace";
	plan->hostname = policy->hostname ? policy->hostname : "sandbox";
	plan->allow_degrade = policy->allow_degrade;

	if (!argv || !argv[0] || !argv[0][0])
		return ward_error_set(err, EINVAL, "plan", "no program to run");
	/* The layer table (lib/sandbox.c) orders the preparation too. */
	int r = ward_layers_prepare(ward_layers, ward_n_layers, plan, err);
	if (r < 0) {
		ward_plan_release(plan);
		return r;
	}
	return 0;
}

void ward_plan_release(struct ward_plan *plan)
{
	for (size_t i = 0; i < plan->n_mounts; i++)
		if (plan->mounts[i].fd >= 0)
			close(plan->mounts[i].fd);
	free(plan->strings);
	free(plan->envp);
	ward_seccomp_release(&plan->seccomp);
	memset(plan, 0, sizeof(*plan));
}
