/* lib/layers/privileges.c — the program holds no privilege at all.
 *
 * setsid (no controlling terminal), every capability set emptied (bounding,
 * ambient, permitted, effective, inheritable), securebits locked so an exec
 * as uid 0 inside cannot regain any, the unprivileged inside uid (1000)
 * unless the policy asks for root inside the user namespace, and
 * no_new_privs. Child-safe; once this has run there is no way back, so any
 * failure ends the child.
 */
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/util.h"
#include "sandbox.h"

static int fail(struct ward_error *err, const char *what)
{
	return ward_error_setv(err, errno, "privileges", what, NULL);
}

int ward_privileges_apply(struct ward_plan *plan, struct ward_error *err)
{
	if (setsid() < 0)
		return fail(err, "unable to start a new session");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return fail(err, "unable to clear the ambient capabilities");
	/* The bounding set needs CAP_SETPCAP, which the uid switch below
	 * takes away: drop it first. */
	for (int cap = 0; cap <= plan->cap_last; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return fail(err, "unable to drop the bounding capabilities");
	unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
			     SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
			     SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
			     SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
	if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0)
		return fail(err, "unable to lock the securebits");
	long uid = (long)plan->uid, gid = (long)plan->gid;
	if (syscall(SYS_setresgid, gid, gid, gid) < 0)
		return fail(err, "unable to switch to the sandbox group");
	if (syscall(SYS_setresuid, uid, uid, uid) < 0)
		return fail(err, "unable to switch to the sandbox user");
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = { { 0 } };
	if (syscall(SYS_capset, &hdr, data) < 0)
		return fail(err, "unable to empty the capability sets");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return fail(err, "unable to set no_new_privs");
	return 0;
}
