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
struct ward_launcher;
struct ward_egress;
struct ward_egress_sandbox;
struct ward_egress_credential;

/* A file put into /workspace, owned by the sandbox user: by the init before
 * the program starts (ward_sandbox_options), or by a kernel's claim from
 * outside (ward_kernel_claim, kernel.h). The data must stay valid until
 * the call that takes it returns. */
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
	/* NULL: the caller clones the sandbox itself. Else a launcher or a
	 * zygote (ward/zygote.h) clones it, as the caller's child. */
	struct ward_launcher *launcher;
	/* network.mode "allowlist": the proxy that serves this sandbox
	 * (ward/egress.h), required then (the run fails closed without it),
	 * with the tenant its events name and the sandbox's own credential
	 * rules (added to the proxy's). */
	struct ward_egress *egress;
	const char *tenant;
	const struct ward_egress_credential *credentials;
	size_t n_credentials;
};

enum ward_kill_reason {
	WARD_KILL_TIMEOUT = 1,  /* the wall-time limit */
	WARD_KILL_CPU,          /* the CPU-time limit */
	WARD_KILL_CANCEL,       /* the caller cancelled: status "killed" */
	WARD_KILL_OUTPUT,       /* the output cap of a kernel's protocol channel */
};

/* ---- plans, cached per policy digest ----
 *
 * What a policy alone decides (today: the policy's own deep copy, the
 * seccomp program, the probed landlock ABI and capability count) is built
 * once per policy and shared, read-only, by every sandbox of that policy.
 * A cache is keyed by the policy digest: BLAKE2b-256 over the policy's
 * canonical JSON (ward_policy_to_json); a hit is also checked with
 * ward_policy_equal, so nothing the JSON leaves out can alias two policies.
 * Thread-safe: every function below may be called from any thread at once
 * (one mutex per cache, atomic reference counts). Parent-only. */
enum { WARD_POLICY_DIGEST_LEN = 32 };

struct ward_plan_cache;
struct ward_policy_plan;

/* The digest of *p. 0, or -ENOMEM (err set). */
int ward_policy_digest(const struct ward_policy *p,
		       unsigned char out[WARD_POLICY_DIGEST_LEN], struct ward_error *err);

/* A cache holding at most max_entries plans (0 means 32); the least recently
 * used one is evicted past that. NULL on ENOMEM. */
struct ward_plan_cache *ward_plan_cache_new(size_t max_entries);
/* Drops the cache's references; plans still held by callers live on until
 * their last ward_policy_plan_unref. NULL is a no-op. */
void ward_plan_cache_free(struct ward_plan_cache *c);
/* The process-wide cache that ward_sandbox_prepare uses (32 entries). */
struct ward_plan_cache *ward_plan_cache_default(void);
/* The plan of *policy: the cached one (same policy, same object) or one
 * built now and cached. Returns a new reference, owned by the caller
 * (ward_policy_plan_unref), or NULL with err set. The plan keeps its own
 * copy of the policy: *policy may go away afterwards. */
struct ward_policy_plan *ward_plan_cache_get(struct ward_plan_cache *c,
					     const struct ward_policy *policy,
					     struct ward_error *err);
/* How many plans the cache holds, and how many lookups hit and missed. */
void ward_plan_cache_stats(struct ward_plan_cache *c, size_t *entries,
			   uint64_t *hits, uint64_t *misses);
/* Drops a reference; the last one frees the plan. NULL is a no-op. */
void ward_policy_plan_unref(struct ward_policy_plan *pp);
const unsigned char *ward_policy_plan_digest(const struct ward_policy_plan *pp);
/* The plan's own copy of the policy, valid as long as the reference. */
const struct ward_policy *ward_policy_plan_policy(const struct ward_policy_plan *pp);

/* ---- the lifecycle: prepare, claim, exchange, finish ----
 *
 * ward_sandbox_prepare does everything that does not need the request's
 * turn: the plan (from the default cache), the cgroup, the pipes, the clone
 * into every namespace, the id maps and the cgroup attachment. The sandbox's
 * init then waits, before any layer is applied and before the program
 * exists. ward_sandbox_claim releases it: the layers apply, the program
 * starts, and the wall-time limit counts from the claim. A prepared sandbox
 * can be claimed exactly once (a second claim is -EALREADY and changes
 * nothing); one never claimed is ended with ward_sandbox_discard.
 * At this level argv, files and limits are fixed at prepare time (the
 * child is a copy of the plan made at clone, and a plain program needs its
 * files before it starts). The language kernels add their own two phases
 * on top (ward_kernel_prepare, ward_kernel_claim in kernel.h): prepared up
 * to a ready runner, then claimed with the request's files and a fresh
 * wall clock, so a pool keyed by (image, policy digest, language) keeps
 * kernels that differ only in what the claim gives them. */

/* Prepares a sandbox for argv. On success *out owns every resource until
 * ward_sandbox_finish or ward_sandbox_discard. On failure nothing is left
 * and err names the layer. */
int ward_sandbox_prepare(const struct ward_policy *policy, char *const argv[],
			 const struct ward_sandbox_options *opts, struct ward_sandbox **out,
			 struct ward_error *err);
/* Claims a prepared sandbox: its program starts. 0; -EALREADY if it was
 * claimed before; another -errno (err set) when its init died meanwhile —
 * then ward_sandbox_finish reports setup_failed as for any early death. */
int ward_sandbox_claim(struct ward_sandbox *sb, struct ward_error *err);
/* True once ward_sandbox_claim succeeded. */
bool ward_sandbox_claimed(const struct ward_sandbox *sb);
/* Kills and frees a sandbox without a verdict (claimed or not). */
void ward_sandbox_discard(struct ward_sandbox *sb);

/* Prepares and claims at once (the one-shot paths). On failure nothing is
 * left and err names the layer. */
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

/* The sandbox's attachment to its egress proxy (ward_egress_update,
 * ward_egress_last_denial), or NULL: network.mode "none", or not running yet. */
struct ward_egress_sandbox *ward_sandbox_egress(const struct ward_sandbox *sb);

/* The sandbox's cgroup counters while it runs (sessions read them around
 * each call to tell an OOM or a refused fork from a crash). */
struct ward_sandbox_stats {
	bool cgroup;               /* false: no cgroup (rootless); all zero */
	uint64_t memory_peak;      /* bytes */
	uint64_t oom_kills;
	uint64_t pids_max_events;  /* forks refused by the pids limit */
	uint64_t cpu_ms;           /* user + system */
	/* network.mode "allowlist": the egress proxy's counters so far (a
	 * session's call reports the difference); present false otherwise */
	struct ward_net_usage network;
};
int ward_sandbox_stats(const struct ward_sandbox *sb, struct ward_sandbox_stats *st);

/* ---- the end: the verdict first, the teardown after ----
 *
 * The verdict is known as soon as the program has ended: its init reports
 * how (exit status, signal, rusage) before it exits. Tearing the sandbox
 * down — the init's exit, which kills and reaps what the program left in
 * its pid namespace and drops its mount and network namespaces, then the
 * cgroup's removal and the fds — takes a while longer and need not delay
 * the answer. A caller that answers someone (the service) calls
 * ward_sandbox_end, answers, then ward_sandbox_release; ward_sandbox_finish
 * is both at once. Until ward_sandbox_release returns, the sandbox still
 * holds its processes, cgroup and fds: a caller that must leave nothing
 * behind when it returns (ward run) calls it before returning. */

/* Readable when the init has something to report: the program started,
 * the program ended, or the init died (EOF). -1 once the program's end is
 * known. Owned by the sandbox. For a caller's poll loop, in place of
 * ward_sandbox_pidfd, to learn of the end before the teardown. */
int ward_sandbox_report_fd(const struct ward_sandbox *sb);
/* True once the program has ended (its init's final report, or the init is
 * gone). Reads a pending report; never blocks. */
bool ward_sandbox_program_ended(struct ward_sandbox *sb);

/* Waits until the program has ended (enforcing the limits meanwhile) and
 * fills the verdict — the caller sets v->out, v->err, the *_truncated
 * flags and v->usage.output_bytes first, from what it read. Does not wait
 * for the teardown. Returns 0, a negative errno when the sandbox failed
 * during setup (v says setup_failed), or -EALREADY on a second call. The
 * sandbox stays owned by the caller: ward_sandbox_release must follow. */
int ward_sandbox_end(struct ward_sandbox *sb, struct ward_verdict *v,
		     struct ward_error *err);
/* Tears the sandbox down and frees it: kills what is left (the init, and
 * with it the pid namespace), reaps the init, removes the cgroup, closes
 * every fd. Blocks until all of that is done (bounded: about 2 s for a
 * cgroup that will not empty, see ward_cgroup_destroy). Valid after
 * ward_sandbox_end, or instead of ward_sandbox_discard. NULL is a no-op. */
void ward_sandbox_release(struct ward_sandbox *sb);

/* ward_sandbox_end, then ward_sandbox_release: waits for the sandbox to
 * end, fills the verdict and frees everything. Returns as
 * ward_sandbox_end. */
int ward_sandbox_finish(struct ward_sandbox *sb, struct ward_verdict *v,
			struct ward_error *err);

#ifdef __cplusplus
}
#endif
#endif
