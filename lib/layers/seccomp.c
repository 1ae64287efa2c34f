/* lib/layers/seccomp.c — the syscall filter: the last layer before execve.
 *
 * The program is compiled at build time (tools/gen-seccomp.c, from the rules
 * in seccomp-rules.h): libseccomp needs ~2 ms to compile it, more than a whole
 * `ward run /bin/true` may cost. The parent copies the embedded program into
 * the plan; the child installs it with one raw syscall. This file must never
 * relax the program: the policy can only ever add restrictions.
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/util.h"
#include "sandbox.h"
#include "seccomp-bpf.h" /* generated: ward_seccomp_program[] */

#if !defined(__x86_64__)
#error "ward's seccomp program is x86_64-only (see docs/seccomp.md)"
#endif

_Static_assert(ARRAY_SIZE(ward_seccomp_program) <= BPF_MAXINSNS,
	       "seccomp program longer than the kernel accepts");

int ward_seccomp_build(const struct ward_policy *policy, struct sock_fprog *prog,
		       struct ward_error *err)
{
	size_t n = ARRAY_SIZE(ward_seccomp_program);
	struct sock_filter *copy;

	/* One program for every policy today; the parameter is where a
	 * stricter variant would be chosen. */
	(void)policy;
	prog->len = 0;
	prog->filter = NULL;
	/* A private copy keeps the ownership rule simple: the plan owns what it
	 * points to, and release frees it. */
	copy = malloc(sizeof(ward_seccomp_program));
	if (!copy)
		return ward_error_set(err, ENOMEM, "seccomp",
				      "unable to allocate the filter (%zu instructions)", n);
	memcpy(copy, ward_seccomp_program, sizeof(ward_seccomp_program));
	prog->filter = copy;
	prog->len = (unsigned short)n;
	return 0;
}

void ward_seccomp_release(struct sock_fprog *prog)
{
	if (!prog)
		return;
	free(prog->filter);
	prog->filter = NULL;
	prog->len = 0;
}

/* Child-safe: one raw syscall, no allocation. The caller has set
 * no_new_privs, so no capability is needed. */
int ward_seccomp_apply(const struct sock_fprog *prog, struct ward_error *err)
{
	int e;

	if (!prog || !prog->filter || prog->len == 0)
		return ward_error_setv(err, EINVAL, "seccomp",
				       "no filter was built for this sandbox", NULL);
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog) == 0)
		return 0;
	e = errno;
	ward_error_setv(err, e, "seccomp", "unable to install the syscall filter", NULL);
	if (e == EACCES)
		ward_error_hint(err, "no_new_privs must be set first (prctl PR_SET_NO_NEW_PRIVS)");
	else if (e == EINVAL)
		ward_error_hint(err, "the kernel needs CONFIG_SECCOMP_FILTER");
	return -e;
}

/* The program is the policy's: a plan built from a cached policy plan
 * borrows its copy. */
int ward_seccomp_prepare(struct ward_plan *plan, struct ward_error *err)
{
	if (plan->base && plan->base->seccomp.filter) {
		plan->seccomp = plan->base->seccomp;
		plan->seccomp_borrowed = true;
		return 0;
	}
	return ward_seccomp_build(plan->policy, &plan->seccomp, err);
}

/* Child-safe. */
int ward_seccomp_apply_plan(struct ward_plan *plan, struct ward_error *err)
{
	return ward_seccomp_apply(&plan->seccomp, err);
}
