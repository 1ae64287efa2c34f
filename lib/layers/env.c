/* lib/layers/env.c — the program's environment and file descriptors.
 * Only what the policy sets reaches the program: no variable of the host
 * leaks, every fd but 0-2 is closed, stdin is /dev/null unless the caller
 * relays one. */
#include <fcntl.h>
#include <sys/syscall.h>
#include <string.h>

#include "base/util.h"
#include "sandbox.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

int ward_env_prepare(struct ward_plan *plan, struct ward_error *err)
{
	const struct ward_policy *p = plan->policy;
	plan->envp = calloc(p->n_env + 1, sizeof(char *));
	if (!plan->envp)
		return ward_error_set(err, ENOMEM, "env", "out of memory");
	for (size_t i = 0; i < p->n_env; i++) {
		plan->envp[i] = p->env[i];
		if (strncmp(p->env[i], "PATH=", 5) == 0)
			plan->path_env = p->env[i] + 5;
	}
	if (!plan->path_env)
		plan->path_env = "/usr/local/bin:/usr/bin:/bin";
	return 0;
}

/* Called in the program child with the three stdio fds in plan->stdio. */
int ward_env_apply(struct ward_plan *plan, struct ward_error *err)
{
	for (int i = 0; i < 3; i++) {
		if (plan->stdio[i] == i) {
			if (fcntl(i, F_SETFD, 0) < 0)
				goto fail;
		} else if (dup2(plan->stdio[i], i) < 0) {
			goto fail;
		}
	}
	/* Everything else is marked close-on-exec rather than closed, so the
	 * report channel to the init survives until the exec succeeds. */
	if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		goto fail;
	if (chdir(plan->workdir) < 0)
		return ward_error_setv(err, errno, "env", "unable to enter the working directory '",
				       plan->workdir, "'", NULL);
	return 0;
fail:
	return ward_error_setv(err, errno, "env", "unable to set up file descriptors", NULL);
}
