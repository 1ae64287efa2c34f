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
};

/* "python", "node", "bash" and back; -1 when unknown. */
const char *ward_lang_name(enum ward_lang lang);
int ward_lang_from_name(const char *name);

struct ward_kernel;

struct ward_kernel_options {
	enum ward_lang lang;
	const struct ward_file *files;   /* put into /workspace before start */
	size_t n_files;
	const char *runners_dir;         /* host directory; NULL: found next to ward */
	json_t *lint;                    /* {"deny_imports": [...], "deny_calls": [...]} or NULL */
};

/* Called for each message as it arrives (borrowed; valid during the call). */
typedef void (*ward_kernel_cb)(json_t *msg, void *ctx);

/* Starts a sandbox running the kernel and waits until it says it is ready.
 * The policy is copied. */
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
};

/* Lists files created or changed under /workspace (path, size, sha256, MIME
 * type; inputs put there unchanged are left out) into *list (a new JSON
 * array); with copy_to, copies them there — never following a symlink out
 * of the workspace, never copying special files, within the limits. Hits of
 * a limit are reported in *skipped (a new JSON array of {path, reason}). */
int ward_kernel_artifacts(struct ward_kernel *k, const char *copy_to,
			  const struct ward_artifact_limits *lim, json_t **list,
			  json_t **skipped, struct ward_error *err);

/* Asks the kernel to shut down, ends the sandbox, fills the verdict (stdout
 * and stderr there are the kernel's own, outside the protocol) and frees
 * everything. */
int ward_kernel_stop(struct ward_kernel *k, struct ward_verdict *v, struct ward_error *err);

/* The sandbox under the kernel (for its id and limits). */
struct ward_sandbox *ward_kernel_sandbox(struct ward_kernel *k);

#ifdef __cplusplus
}
#endif
#endif
