/* lib/launcher.h — the request a launcher or a zygote serves (internal).
 *
 * The supervisor sends one request per sandbox over a SOCK_SEQPACKET
 * socket: a fixed header, and over SCM_RIGHTS a memfd with what the plan
 * is built from (the policy as canonical JSON, argv, files, binds) plus
 * the sandbox's fds. The helper builds the same plan, clones the init
 * with CLONE_PARENT and answers with the pid, an error and the pidfd.
 */
#ifndef WARD_LAUNCHER_H
#define WARD_LAUNCHER_H

#include <stdbool.h>
#include <sys/types.h>

#include "sandbox.h"

struct ward_launcher;

/* Supervisor: has l clone the sandbox's init for plan (built by the
 * caller: its policy, argv, files, binds, rlimits and degraded bits are
 * sent), with stdio from plan->stdio, the init's ends of the sync pipe and
 * report socket, the cgroup fd (-1: none) and plan->cg_tasks. Returns the
 * init's pid with *pidfd set, or -errno with err set. Adds to
 * *degraded the layers the launcher had to do without (the time
 * namespace). None of the fds is taken. One request at a time (a mutex);
 * a helper that does not answer within 10 s, or breaks the protocol, is
 * given up: this and every later call fail with EPIPE or ETIMEDOUT
 * (EAGAIN) rather than read an answer out of step. */
long ward_launcher_spawn(struct ward_launcher *l, const struct ward_plan *plan, int sync_fd,
			 int report_fd, int cgroup_fd, int *pidfd, uint32_t *degraded,
			 struct ward_error *err);

enum ward_launch_mode {
	WARD_LAUNCH_EXEC,   /* the program execs argv (a launcher) */
	WARD_LAUNCH_RETURN, /* the program returns to the caller (a zygote) */
};

/* Helper side: serves one request from sock. Returns 0 after answering it,
 * -1 at EOF or on a broken channel (the helper should exit), and in
 * WARD_LAUNCH_RETURN mode 1 in the sandbox's program, after every layer
 * applied, with only fds 0-2 left open. Never returns in the sandbox's
 * init. */
int ward_launcher_serve(int sock, enum ward_launch_mode mode);

/* A launcher for the helper pid that serves requests on sock (owned). */
struct ward_launcher *ward_launcher_adopt(int sock, pid_t pid);

/* The program's environment (the plan's), in the program of a zygote
 * after ward_launcher_serve returned 1; NULL elsewhere. */
char *const *ward_launcher_program_env(void);
/* The plan's argv, likewise: what the zygote is asked to run. */
char *const *ward_launcher_program_argv(void);

#endif
