/* ward/sandbox.h — a running sandbox, driven by the caller.
 *
 * ward_run (ward.h) is the one-shot form. This interface lets a caller keep a
 * sandbox alive, talk to its program over pipes (the language kernels do),
 * reach its files, and decide when it ends: start, exchange, finish. The
 * caller owns the event loop: it polls the fds below and calls
 * ward_sandbox_check() when its timeout expires. Parent-only.
 */
#ifndef WARD_SANDBOX_API_H
#define WARD_SANDBOX_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ward/error.h"
#include "ward/policy.h"
#include "ward/verdict.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ward_sandbox;

/* A file put into /workspace before the program starts, owned by the
 * sandbox user. The data must stay valid until ward_sandbox_start returns. */
struct ward_file {
	const char *path;     /* relative to /workspace; no "..", no leading "/" */
	const void *data;
	size_t len;
	unsigned mode;        /* 0 means 0644 */
};

struct ward_sandbox_options {
	bool stdin_pipe;               /* a pipe to the program's stdin (else /dev/null) */
	const struct ward_file *files;
	size_t n_files;
	/* Extra binds chosen by ward itself (not by the policy), e.g. the
	 * language runners, read-only at a path the policy may not use. */
	const struct ward_bind *binds;
	size_t n_binds;
};

enum ward_kill_reason {
	WARD_KILL_TIMEOUT = 1,  /* the wall-time limit */
	WARD_KILL_CPU,          /* the CPU-time limit */
	WARD_KILL_CANCEL,       /* the caller cancelled: status "killed" */
	WARD_KILL_OUTPUT,       /* the output cap of a kernel's protocol channel */
};

/* Builds and starts a sandbox running argv. On success *out owns every
 * resource until ward_sandbox_finish. On failure nothing is left and err
 * names the layer. */
int ward_sandbox_start(const struct ward_policy *policy, char *const argv[],
		       const struct ward_sandbox_options *opts, struct ward_sandbox **out,
		       struct ward_error *err);

const char *ward_sandbox_id(const struct ward_sandbox *sb);
/* The program's stdin (write end, non-blocking; -1 without stdin_pipe),
 * stdout and stderr (read ends). Owned by the sandbox. */
int ward_sandbox_stdin(const struct ward_sandbox *sb);
int ward_sandbox_stdout(const struct ward_sandbox *sb);
int ward_sandbox_stderr(const struct ward_sandbox *sb);
/* The init's pid (in the caller's pid namespace). */
pid_t ward_sandbox_pid(const struct ward_sandbox *sb);
/* Readable when the sandbox's init has exited. */
int ward_sandbox_pidfd(const struct ward_sandbox *sb);
void ward_sandbox_close_stdin(struct ward_sandbox *sb);

/* Kills every process of the sandbox; the first reason given is kept. */
void ward_sandbox_kill(struct ward_sandbox *sb, enum ward_kill_reason why);
/* Enforces the wall-time and CPU-time limits now. Returns how many ms the
 * caller may wait before calling it again, or -1 when nothing is pending. */
int ward_sandbox_check(struct ward_sandbox *sb);
/* True once the init has exited (reaps it; never blocks). */
bool ward_sandbox_exited(struct ward_sandbox *sb);

/* An O_PATH fd of the sandbox's root directory while it runs (through
 * /proc/<init>/root), for reading files out with openat2(RESOLVE_IN_ROOT).
 * The caller closes it. -1 with errno set when the sandbox is gone. */
int ward_sandbox_open_root(const struct ward_sandbox *sb);

/* The sandbox's cgroup counters while it runs (sessions read them around
 * each call to tell an OOM or a refused fork from a crash). */
struct ward_sandbox_stats {
	bool cgroup;               /* false: no cgroup (rootless); all zero */
	uint64_t memory_peak;      /* bytes */
	uint64_t oom_kills;
	uint64_t pids_max_events;  /* forks refused by the pids limit */
	uint64_t cpu_ms;           /* user + system */
};
int ward_sandbox_stats(const struct ward_sandbox *sb, struct ward_sandbox_stats *st);

/* Waits for the sandbox to end (enforcing its limits meanwhile), fills the
 * verdict — the caller sets v->out, v->err, the *_truncated flags and
 * v->usage.output_bytes first, from what it read — and frees everything.
 * Returns 0, or a negative errno when the sandbox failed during setup. */
int ward_sandbox_finish(struct ward_sandbox *sb, struct ward_verdict *v,
			struct ward_error *err);

#ifdef __cplusplus
}
#endif
#endif
