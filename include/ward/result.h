/* ward/result.h — a kernel's messages gathered into a verdict and its JSON.
 *
 * One builder for every front end: `ward exec`/`ward call` and `ward serve`
 * feed it the same kernel messages and get the same verdict and the same
 * final JSON (docs/verdict.md, "ward exec and ward call"). Everything a
 * kernel says is a claim from untrusted code: only known message types are
 * kept, copied and capped; nothing is obeyed.
 *
 * Memory: the streams are kept once, in two buffers capped together at the
 * policy's output limit; a cell's stream outputs are (name, offset, length)
 * references into them until ward_result_final, and stream events are cut
 * into pieces of at most WARD_RESULT_EVENT_CHUNK bytes, so an execution
 * holds about one copy of its capped output plus the event being sent.
 * Rich results and errors are bounded by the kernel channel's caps
 * (lib/kernel.c); the number of output entries by WARD_RESULT_MAX_OUTPUTS.
 *
 * Order of use: init, set_sink (optional), message/reply for each cell (or
 * call_reply), to_verdict, then the sandbox's finish (ward_kernel_finish or
 * ward_kernel_stop), adjust, final, release. Parent-only; not thread-safe.
 */
#ifndef WARD_RESULT_H
#define WARD_RESULT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "ward/policy.h"
#include "ward/verdict.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
	WARD_RESULT_EVENT_CHUNK = 64 << 10,  /* bytes of stream text per event, at most */
	WARD_RESULT_MAX_OUTPUTS = 10000,     /* output entries kept, all cells together */
};

/* An event for a client that streams (borrowed; valid during the call):
 * {"event": "stream", "name", "text"}, {"event": "result", "type", "data"},
 * {"event": "error" | "policy_violation", "content"}. */
typedef void (*ward_result_sink)(json_t *event, void *ctx);

struct ward_result {
	/* Read-only for the caller, except where said. */
	json_t *error;          /* the first error content (the kernel's words), or NULL */
	json_t *violation;      /* the first policy_violation content, or NULL */
	json_t *reply;          /* the last reply's content, or NULL */
	json_t *value;          /* call: the returned value, or NULL */
	json_t *artifacts;      /* the caller may set these (owned, released here) */
	json_t *skipped;
	bool code_failed;       /* a cell or the call raised (the caller may set it) */
	bool died;              /* the kernel ended before answering */
	struct ward_buffer text[2]; /* stdout, stderr: one capped copy */
	bool truncated[2];
	uint64_t total;         /* stream bytes produced, kept or not */
	uint64_t limit;         /* the output cap */
	/* private */
	json_t *cells;          /* closed cells */
	json_t *outputs;        /* the open cell's outputs */
	json_t *results;        /* every execute_result / display_data bundle */
	size_t n_outputs;
	uint64_t dropped;       /* outputs not kept past WARD_RESULT_MAX_OUTPUTS */
	bool call;
	ward_result_sink sink;
	void *ctx;
};

/* Empty result for a policy's output cap. 0, or -ENOMEM (r is then
 * released). */
int ward_result_init(struct ward_result *r, uint64_t output_limit);
/* Frees everything r holds. Safe on a zeroed or released result. */
void ward_result_release(struct ward_result *r);

/* Where events go (NULL: nowhere; no event is then built). */
void ward_result_set_sink(struct ward_result *r, ward_result_sink sink, void *ctx);

/* One kernel message ({"msg_type", "content"}, borrowed): stream,
 * execute_result, display_data, error and policy_violation are kept;
 * protocol_error (the channel's: a line that was not a message) is kept as
 * an error and makes the run an error whatever the reply says; any other
 * type is ignored. Text may hold U+0000 and is kept whole (by length);
 * types, names and statuses match only when equal in full. */
void ward_result_message(struct ward_result *r, json_t *msg);

/* Ends the open cell with its execute_reply content (borrowed), or with
 * NULL when the kernel ended first (the cell is "died"). */
void ward_result_reply(struct ward_result *r, json_t *reply);

/* Function-call mode: the call_reply content (borrowed), or NULL when the
 * kernel ended first. The final JSON then has "value", not "cells". */
void ward_result_call_reply(struct ward_result *r, json_t *reply);

/* Moves the streams into v's buffers, with their truncation and the bytes
 * produced. Call it before the sandbox's finish fills the rest. */
void ward_result_to_verdict(struct ward_result *r, struct ward_verdict *v);

/* The verdict told from the kernel's side, once the sandbox's is known: a
 * failed cell is an error (or pids_limit), a lint hit policy_violation,
 * a truncation output_limit (ward_kernel_adjust_verdict). */
void ward_result_adjust(struct ward_result *r, struct ward_verdict *v,
			const struct ward_policy *p);

/* The final object (a new reference, NULL on ENOMEM): v's JSON with
 * language, cells (or value), results, error, policy_violation, artifacts
 * and artifacts_skipped. error is the kernel's first error, else, when
 * the kernel died or the output was cut, the limit that explains it with
 * its value (ward_kernel_limit_error). Reads the streams from v (after
 * ward_result_to_verdict). */
json_t *ward_result_final(struct ward_result *r, const struct ward_verdict *v,
			  const struct ward_policy *p, const char *lang);

#ifdef __cplusplus
}
#endif
#endif
