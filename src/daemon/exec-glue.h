/* src/daemon/exec-glue.h — a kernel's messages gathered into the JSON that
 * `ward exec --json` prints, for one cell. A small duplicate of the CLI's
 * glue (src/cli/exec.c), kept apart so the CLI's behaviour cannot change. */
#ifndef WARD_DAEMON_EXEC_GLUE_H
#define WARD_DAEMON_EXEC_GLUE_H

#include <jansson.h>

#include "ward/policy.h"
#include "ward/verdict.h"

struct exec_out {
	json_t *outputs;        /* the cell's outputs */
	json_t *results;        /* execute_result / display_data bundles */
	json_t *error;          /* the first error */
	json_t *violation;      /* the first policy_violation */
	json_t *reply;          /* the execute_reply content */
	json_t *artifacts, *skipped;
	bool code_failed;
	struct ward_buffer text[2];
	bool truncated[2];
	uint64_t total, limit;
};

void exec_out_init(struct exec_out *o, uint64_t limit);
void exec_out_release(struct exec_out *o);
/* Gathers one kernel message; returns the NDJSON event to send (new
 * reference) or NULL. */
json_t *exec_out_message(struct exec_out *o, json_t *m);
/* The execute_reply (borrowed). */
void exec_out_reply(struct exec_out *o, json_t *reply);
/* Moves the streams into the verdict (before ward_kernel_finish). */
void exec_out_to_verdict(struct exec_out *o, struct ward_verdict *v);
/* After the sandbox's verdict: a failed cell is an error, a lint hit a
 * policy_violation, a truncation output_limit. */
void exec_out_adjust(struct exec_out *o, struct ward_verdict *v, const struct ward_policy *p);
/* The final object (new reference). */
json_t *exec_out_final(struct exec_out *o, const struct ward_verdict *v,
		       const struct ward_policy *p, bool died, const char *lang);
/* A command's output into v's buffers within limit; returns bytes kept. */
size_t exec_keep(struct ward_verdict *v, int which, const char *buf, size_t n, uint64_t limit);

#endif
