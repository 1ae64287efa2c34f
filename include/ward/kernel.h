/* ward/kernel.h — language kernels: run code, not argv, and get results an
 * agent can use.
 *
 * A kernel is a runner started inside a sandbox (runners/PROTOCOL.md) that
 * executes cells in one persistent namespace. The supervisor sends requests
 * and reads JSON-lines messages with Jupyter's names (stream, execute_result,
 * display_data, error). Everything the kernel says is untrusted: lines are
 * capped and parsed, never obeyed. Parent-only.
 */
#ifndef WARD_KERNEL_H
#define WARD_KERNEL_H

#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#include "ward/error.h"
#include "ward/policy.h"
#include "ward/sandbox.h"
#include "ward/verdict.h"

#ifdef __cplusplus
extern "C" {
#endif

enum ward_lang {
	WARD_LANG_PYTHON,
	WARD_LANG_NODE,
	WARD_LANG_BASH,
	WARD_LANG_COUNT,
};

/* The languages come from one registry, runners/languages.json, which the
 * session agent reads too; its order is this enum's (checked at build).
 * "python", "node", "bash" and back (a name or an alias); -1 when
 * unknown. ward_lang_extension gives ".py", ".js", ".sh"; NULL out of
 * range. Child-safe (static tables). */
const char *ward_lang_name(enum ward_lang lang);
int ward_lang_from_name(const char *name);
const char *ward_lang_extension(enum ward_lang lang);

struct ward_kernel;
struct ward_zygote;
struct ward_launcher;
struct ward_egress;
struct ward_egress_credential;

struct ward_kernel_options {
	enum ward_lang lang;
	const struct ward_file *files;   /* put into /workspace (see start, begin) */
	size_t n_files;
	const char *runners_dir;         /* host directory; NULL: found next to ward */
	json_t *lint;                    /* {"deny_imports": [...], "deny_calls": [...]} or NULL */
	/* Run the session agent (runners/session/agent.py) instead of one
	 * kernel: it starts a kernel per named context and runs commands
	 * (runners/PROTOCOL.md, "Sessions"). lang is then unused. Only with
	 * ward_kernel_begin; drive it with ward_kernel_listen/send. */
	bool session;
	/* A zygote of lang (ward/zygote.h) forks the kernel instead of a cold
	 * start; for a session, a python zygote forks the agent (whose python
	 * contexts are then forked from it). NULL or another language: a cold
	 * start. */
	struct ward_zygote *zygote;
	/* Any other start (cold, or a session's agent): a launcher
	 * (ward/zygote.h) clones the sandbox instead of the caller; NULL: the
	 * caller clones it. */
	struct ward_launcher *launcher;
	/* network.mode "allowlist": passed to the sandbox (ward_sandbox_options) */
	struct ward_egress *egress;
	const char *tenant;
	const struct ward_egress_credential *credentials;
	size_t n_credentials;
};

/* Called for each message as it arrives (borrowed; valid during the call).
 * Strings may hold U+0000 (a program's output is bytes): read them with
 * json_string_length. A line from the kernel that is not a protocol message
 * is dropped; the first one of a kernel's life comes here as a message of
 * type "protocol_error" ({ename "KernelProtocolError", evalue, traceback,
 * hint}, no parent_id), never as output. */
typedef void (*ward_kernel_cb)(json_t *msg, void *ctx);

/* ---- the two phases: prepare, then claim ----
 *
 * ward_kernel_prepare does what does not need the request: the sandbox is
 * prepared and started (ward_sandbox_prepare and ward_sandbox_claim) with
 * the language kernel, and it returns once the kernel has said it is ready
 * (its first "status" message: its imports are done), with /workspace
 * empty and no request sent. If the kernel dies or hits a limit first, it
 * still returns 0: ward_kernel_stop's verdict says why. The policy is
 * copied; the limits (memory, pids, CPU, time, sizes) are those of the
 * policy the kernel was prepared with — a pool keys prepared kernels by
 * its digest (ward_policy_digest) and gives each to a request of that
 * digest. o may be NULL; o->lang is not read (lang is), and o->files and
 * o->session must be unset (EINVAL): files come with the claim, a session
 * agent is only started by ward_kernel_begin.
 *
 * ward_kernel_claim hands a prepared kernel to one request, exactly once:
 * a second claim is -EALREADY and changes nothing. It puts the request's
 * files into /workspace from outside, through the sandbox's root fd: each
 * path by the workspace rule (relative, no "." or ".." component: "a..b"
 * is a name), every step beneath the last with no symlink, magic link or
 * mount crossing followed (the kernel's code may have run since prepare and
 * planted links: they are refused, never followed), as the workspace's
 * owner (fsuid and fsgid), within the policy's workspace size (EFBIG before
 * anything is written; ENOSPC from the tmpfs). Every error names the file;
 * the files placed before it stay, so a failed claim's kernel is only fit
 * for ward_kernel_stop or ward_kernel_discard. -ECHILD when the kernel has
 * ended. The wall-time limit (and the verdict's wall_ms) counts from the
 * claim, not from prepare: a prepared kernel may wait in a pool. CPU time
 * is the cgroup's since the sandbox started (imports included; per process
 * with RLIMIT_CPU when there is no cgroup): a pool must leave the kernels
 * it keeps enough of the CPU-time limit. Then the caller sends its first
 * request (ward_kernel_execute or ward_kernel_call). */
int ward_kernel_prepare(const struct ward_policy *policy, enum ward_lang lang,
			const struct ward_kernel_options *o, struct ward_kernel **out,
			struct ward_error *err);
int ward_kernel_claim(struct ward_kernel *k, const struct ward_file *files, size_t n_files,
		      struct ward_error *err);

/* Ends a kernel (claimed or not) without a verdict and frees everything:
 * the sandbox's processes, cgroup and /workspace go with it. NULL is a
 * no-op. */
void ward_kernel_discard(struct ward_kernel *k);

/* ward_kernel_prepare then ward_kernel_claim with o->files: bad paths or files larger than the workspace are
 * refused before any sandbox starts; a kernel that ended before its claim
 * is returned all the same (stop's verdict says why). The policy is
 * copied. */
int ward_kernel_start(const struct ward_policy *policy, const struct ward_kernel_options *o,
		      struct ward_kernel **out, struct ward_error *err);

/* Runs one cell. Returns 0 with *reply set to the execute_reply content (a
 * new reference) when the kernel answered; -ECHILD when the sandbox ended
 * meanwhile (killed by a limit: ward_kernel_stop's verdict says which). */
int ward_kernel_execute(struct ward_kernel *k, const char *code, bool stop_on_error,
			ward_kernel_cb cb, void *ctx, json_t **reply, struct ward_error *err);

/* Function-call mode: loads `source` (named `filename`), calls `function`
 * ("name" or "Class.method") with `args` (a JSON object or array), and
 * returns the call_reply content in *reply. */
int ward_kernel_call(struct ward_kernel *k, const char *source, const char *filename,
		     const char *function, json_t *args, ward_kernel_cb cb, void *ctx,
		     json_t **reply, struct ward_error *err);

struct ward_artifact_limits {
	uint64_t max_file;   /* bytes; larger files are listed but not copied */
	uint64_t max_total;  /* bytes copied in all */
	uint32_t max_count;  /* files listed */
	/* Contents inline: each listed file whose bytes fit what is left of
	 * max_inline (in all) gets "content" (base64); one that does not is
	 * listed without it and reported in *skipped. */
	bool inline_content;
	uint64_t max_inline;
};

/* Lists files created or changed under /workspace (path, size, sha256, MIME
 * type; inputs put there unchanged are left out) into *list (a new JSON
 * array); with lim->inline_content, their bytes too, read through the same
 * fd that hashes them (memory: at most lim->max_inline bytes, and their
 * base64); with copy_to, copies them there — never following a symlink out
 * of the workspace, never copying special files, within the limits. Hits of
 * a limit are reported in *skipped (a new JSON array of {path, reason}). */
int ward_kernel_artifacts(struct ward_kernel *k, const char *copy_to,
			  const struct ward_artifact_limits *lim, json_t **list,
			  json_t **skipped, struct ward_error *err);

/* Asks the kernel to shut down, ends the sandbox, fills the verdict (stdout
 * and stderr there are the kernel's own, outside the protocol) and frees
 * everything. */
int ward_kernel_stop(struct ward_kernel *k, struct ward_verdict *v, struct ward_error *err);

/* A kernel's error content ({ename, evalue, traceback, hint}) in the
 * verdict's field names ({name, value, traceback, hint}); a new reference. */
json_t *ward_kernel_error_object(json_t *content);

/* The error that stands for a limit (or a cancel) when the kernel could not
 * answer: its name, and a hint with the limit's value; a new reference. */
json_t *ward_kernel_limit_error(const struct ward_verdict *v, const struct ward_policy *p);

/* A sandbox that ended cleanly, told from the kernel's side: a lint hit
 * is policy_violation (exit code 3); a failed cell is pids_limit when the
 * pids limit refused it a fork (usage.forks_refused), else error (1); text
 * dropped at the cap is output_limit. Any other status stays. */
void ward_kernel_adjust_verdict(struct ward_verdict *v, const struct ward_policy *p,
				bool violation, bool code_failed, bool truncated);

/* The sandbox under the kernel (for its id and limits). */
struct ward_sandbox *ward_kernel_sandbox(struct ward_kernel *k);


/* The non-blocking form, for a caller that owns the event loop (ward serve).
 * Nothing below waits: the caller polls the fds ward_kernel_pollfds gives
 * and calls ward_kernel_step when one is ready or the timeout expires.
 * One request is awaited at a time.
 *
 * ward_kernel_begin starts the sandbox like ward_kernel_start but does not
 * wait for the kernel to say it is ready (requests queue in the pipe
 * meanwhile; its "status" message reaches the callback of the request
 * being awaited, if any). Its kernel is claimed at once, and o->files are
 * written by the sandbox's init before the kernel starts (as for a plain
 * program, ward_sandbox_options): a claim from outside needs the sandbox's
 * root, which exists only once the init's setup is done, and waiting for
 * that here would stall the caller's loop. */
int ward_kernel_begin(const struct ward_policy *policy, const struct ward_kernel_options *o,
		      struct ward_kernel **out, struct ward_error *err);

/* Names and values (a JSON object whose keys the caller checked) set in
 * the program's namespace before the next submitted request's code runs:
 * the next execute_request or call_request carries them as "globals"
 * (runners/PROTOCOL.md), then they are forgotten. Takes a reference; NULL
 * clears. */
void ward_kernel_set_globals(struct ward_kernel *k, json_t *globals);

/* Queues one execute_request and awaits its execute_reply; messages before
 * it go to cb. Returns 0, -EBUSY when a request is already awaited, -ECHILD
 * when the sandbox has ended, or -errno with err set. */
int ward_kernel_submit_execute(struct ward_kernel *k, const char *code, bool stop_on_error,
			       ward_kernel_cb cb, void *ctx, struct ward_error *err);

/* Queues one call_request (as ward_kernel_call) and awaits its call_reply;
 * returns as ward_kernel_submit_execute. */
int ward_kernel_submit_call(struct ward_kernel *k, const char *source, const char *filename,
			    const char *function, json_t *args, ward_kernel_cb cb, void *ctx,
			    struct ward_error *err);

/* Queues a shutdown_request and awaits its reply for at most grace_ms;
 * past that, ward_kernel_step kills the sandbox (WARD_KILL_CANCEL). */
int ward_kernel_submit_shutdown(struct ward_kernel *k, unsigned grace_ms, struct ward_error *err);

enum { WARD_KERNEL_NFDS = 4 };

/* Fills fds (WARD_KERNEL_NFDS entries; fd -1 for an unused slot) with what
 * to watch now, and returns how many ms the caller may wait before calling
 * ward_kernel_step anyway (-1: only when an fd is ready). The set changes
 * after each step (stdin is watched only while a request is unwritten).
 * Like ward_sandbox_check, it enforces the sandbox's time limits now. */
int ward_kernel_pollfds(struct ward_kernel *k, struct pollfd fds[WARD_KERNEL_NFDS]);

/* Does what is ready now (reads, writes, limit checks), never blocking.
 * Returns 1 when the awaited reply arrived (*reply: its content, a new
 * reference; NULL for a shutdown reply), 0 while it is still awaited (or
 * nothing is), -ECHILD once the sandbox has ended without it. */
int ward_kernel_step(struct ward_kernel *k, json_t **reply);

/* Kills the sandbox if it still runs, waits for its end, fills the verdict
 * as ward_kernel_stop does, and frees everything. */
int ward_kernel_finish(struct ward_kernel *k, struct ward_verdict *v, struct ward_error *err);

/* A prepared kernel (ward_kernel_prepare, then ward_kernel_claim) driven
 * in the non-blocking form from here on, as if from ward_kernel_begin.
 * 0 or -ENOMEM. */
int ward_kernel_make_async(struct ward_kernel *k, struct ward_error *err);

/* Whether the kernel still runs: false once its stdout is closed (it
 * ended) or its sandbox is over (a pool drops the ones that died while
 * they waited). Never blocks. */
bool ward_kernel_alive(struct ward_kernel *k);

/* The verdict once the last reply is in, without waiting for the kernel
 * to shut down: what ward_kernel_finish would give for a kernel that
 * exited 0 now, usage (wall, CPU, peak memory, processes) sampled now from
 * the sandbox's cgroup, the limits checked as at the end (an OOM kill in
 * the sandbox is still memory_limit). The caller sets v->out, v->err, the
 * truncation flags and output_bytes first, as for ward_sandbox_finish.
 * The kernel keeps running: end it with ward_kernel_discard (which may run
 * on another thread). Returns 0, or -EAGAIN when the verdict cannot be
 * told before the end (no cgroup, a request still awaited, the sandbox
 * already over or killed): then finish it as before. */
int ward_kernel_end(struct ward_kernel *k, struct ward_verdict *v);

/* The runners directory a kernel started now would use: given, else
 * $WARD_RUNNERS, else next to ward (out has PATH_MAX bytes). 0 or -errno.
 * A pool stamps its kernels with the directory's state to retire them
 * when the runners change. */
int ward_kernel_runners_dir(const char *given, char *out, struct ward_error *err);

enum { WARD_KERNEL_ID_SIZE = 32 };

/* The listening form (sessions), on a kernel from ward_kernel_begin with
 * no request awaited: every message goes to cb, replies included, and the
 * caller matches them to its requests by parent_id. */
void ward_kernel_listen(struct ward_kernel *k, ward_kernel_cb cb, void *ctx);

/* Queues a request (after any not yet written) without awaiting anything;
 * its id, echoed as the answers' parent_id, goes to id. 0, -ECHILD when
 * the sandbox has ended, or -errno with err set. */
int ward_kernel_send(struct ward_kernel *k, const char *type, json_t *content,
		     char id[WARD_KERNEL_ID_SIZE], struct ward_error *err);

/* Bytes of requests queued that the kernel has not read yet (they wait in
 * the caller's memory until its stdin has room). */
size_t ward_kernel_unsent(const struct ward_kernel *k);

/* The protocol channel's byte cap counts from here again: a session
 * calls it at each call, so the cap holds per call, not per lifetime. */
void ward_kernel_new_budget(struct ward_kernel *k);

#ifdef __cplusplus
}
#endif
#endif
