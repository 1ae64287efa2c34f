/* lib/zygote-module.c — what a zygote's runtime calls (libward-zygote.so,
 * loaded by runners/python/zygote.py through ctypes).
 *
 * The runtime calls ward_zygote_harden once its modules are loaded, then
 * ward_zygote_serve in a loop: 0 after each sandbox it started, -1 when the
 * supervisor is gone, 1 in a sandbox's program, with every layer on (and
 * dumpable, as after an exec); ward_zygote_argv then says what to run. The
 * runtime must hold no thread but the caller's.
 */
#include <malloc.h>
#include <signal.h>
#include <sys/prctl.h>

#include "base/util.h"
#include "launcher.h"

int ward_zygote_harden(void);
int ward_zygote_serve(int sock);
char *const *ward_zygote_environ(void);
char *const *ward_zygote_argv(void);

WARD_EXPORT int ward_zygote_harden(void)
{
	/* Nothing of the same uid may read or trace the zygote; freed memory
	 * is overwritten so no request outlives its clone (lib/launcher.c):
	 * M_PERTURB fills what is freed, fastbins off (and tcache off, from
	 * the environment lib/zygote.c gives) so no free skips it. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || mallopt(M_PERTURB, 0x5a) != 1 ||
	    mallopt(M_MXFAST, 0) != 1)
		return -1;
	return 0;
}

WARD_EXPORT int ward_zygote_serve(int sock)
{
	int r = ward_launcher_serve(sock, WARD_LAUNCH_RETURN);
	/* The program: the privilege drop left it non-dumpable (invisible in
	 * the sandbox's /proc, unlike a cold one); an exec would undo that. */
	if (r == 1 && prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
		_exit(126);
	return r;
}

WARD_EXPORT char *const *ward_zygote_environ(void)
{
	return ward_launcher_program_env();
}

WARD_EXPORT char *const *ward_zygote_argv(void)
{
	return ward_launcher_program_argv();
}
