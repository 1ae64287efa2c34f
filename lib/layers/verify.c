/* lib/layers/verify.c — after every layer is applied, check that it holds.
 *
 * Runs after seccomp, right before execve: a new user namespace must now be
 * impossible, no capability may remain, no_new_privs and the seccomp filter
 * must be in force. A check that fails stops the run (fail closed).
 * Child-safe.
 */
#include <linux/capability.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/util.h"
#include "sandbox.h"

int ward_verify_apply(struct ward_plan *plan, struct ward_error *err)
{
	(void)plan;
	if (unshare(CLONE_NEWUSER) == 0 || errno != EPERM)
		return ward_error_setv(err, errno ? errno : EPERM, "verify",
				       "a new user namespace is still possible", NULL);
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
		return ward_error_setv(err, EPERM, "verify", "no_new_privs is not set", NULL);
	if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != 2)
		return ward_error_setv(err, EPERM, "verify", "the seccomp filter is not in force", NULL);
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data) < 0)
		return ward_error_setv(err, errno, "verify", "unable to read capabilities", NULL);
	for (int i = 0; i < 2; i++)
		if (data[i].effective || data[i].permitted || data[i].inheritable)
			return ward_error_setv(err, EPERM, "verify", "capabilities remain", NULL);
	return 0;
}
