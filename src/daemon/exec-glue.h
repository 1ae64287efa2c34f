/* src/daemon/exec-glue.h — the daemon's names for the library's result
 * builder (include/ward/result.h), so that `ward serve` and `ward exec`
 * build one result with one code. A thin shim: nothing is decided here. */
#ifndef WARD_DAEMON_EXEC_GLUE_H
#define WARD_DAEMON_EXEC_GLUE_H

#include <jansson.h>

#include "ward/policy.h"
#include "ward/result.h"
#include "ward/verdict.h"

/* The execution's builder: `struct exec_out` is `struct ward_result` (its
 * fields error, violation, code_failed, artifacts and skipped are read
 * and set by execution.c). */
#define exec_out ward_result

void exec_out_init(struct exec_out *o, uint64_t limit);
void exec_out_release(struct exec_out *o);
/* Gathers one kernel message; its events (bounded pieces) go to sink when
 * one is given. */
void exec_out_message(struct exec_out *o, json_t *m, ward_result_sink sink, void *ctx);
/* The execute_reply (borrowed), or NULL when the kernel died first. */
void exec_out_reply(struct exec_out *o, json_t *reply);
/* Moves the streams into the verdict (before ward_kernel_finish). */
void exec_out_to_verdict(struct exec_out *o, struct ward_verdict *v);
/* After the sandbox's verdict: a failed cell is an error, a lint hit a
 * policy_violation, a truncation output_limit. */
void exec_out_adjust(struct exec_out *o, struct ward_verdict *v, const struct ward_policy *p);
/* The final object (new reference); died: the kernel could not answer. */
json_t *exec_out_final(struct exec_out *o, const struct ward_verdict *v,
		       const struct ward_policy *p, bool died, const char *lang);
/* A command's output into v's buffers within limit; returns bytes kept. */
size_t exec_keep(struct ward_verdict *v, int which, const char *buf, size_t n, uint64_t limit);

#endif
