/* lib/sandbox-child.h — what the sandbox's init reports to its supervisor
 * (internal). Fixed-size records over a socket: RUNNING (with fds), then
 * the ending. */
#ifndef WARD_SANDBOX_CHILD_H
#define WARD_SANDBOX_CHILD_H

#include <stdbool.h>
#include <stdint.h>

#include "sandbox.h"

enum ward_report_kind {
	WARD_REPORT_NONE,          /* nothing reported (init died first) */
	WARD_REPORT_EXITED,        /* code = exit status */
	WARD_REPORT_SIGNALED,      /* code = signal number */
	WARD_REPORT_SETUP_FAILED,  /* err names the layer */
	WARD_REPORT_EXEC_FAILED,   /* err says why execve failed */
	WARD_REPORT_RUNNING,       /* the program exec'd; layers are final */
};

struct ward_report {
	enum ward_report_kind kind;
	int code;
	uint32_t layers;
	uint32_t degraded;
	uint64_t cpu_user_us;
	uint64_t cpu_sys_us;
	uint64_t maxrss_kb;
	bool disk_full;            /* /workspace or /tmp had no space or inodes left */
	uint32_t passed;           /* RUNNING: the WARD_PASS_* fds that ride with it */
	struct ward_error err;
};

/* The fds a RUNNING record carries (SCM_RIGHTS), in this order, each one
 * only when its bit is set in ward_report.passed: the sandbox's root, then
 * the egress proxy's listeners (struct ward_egress_fds). */
enum {
	WARD_PASS_ROOT = 1u << 0,
	WARD_PASS_TCP4 = 1u << 1,
	WARD_PASS_TCP6 = 1u << 2,
	WARD_PASS_DNS4 = 1u << 3,
	WARD_PASS_MAX = 4,
};

/* The cloned child's entry point. Never returns. */
__attribute__((noreturn)) void ward_child_main(struct ward_plan *plan, int sync_fd,
					       int report_fd);

/* A zygote's child (lib/launcher.c): the same init, but the program is
 * forked, not exec'd; returns in the program only, once its layers are on. */
void ward_child_main_return(struct ward_plan *plan, int sync_fd, int report_fd);

#endif
