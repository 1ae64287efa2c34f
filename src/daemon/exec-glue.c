/* src/daemon/exec-glue.c — the daemon's calls into the one result builder
 * (lib/kernel/result.c) and the one output cap (lib/verdict.c). Nothing
 * is decided here: `ward exec --json` and `POST /v1/executions` give the
 * same JSON because they run the same code. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "exec-glue.h"

void exec_out_init(struct exec_out *o, uint64_t limit)
{
	/* on ENOMEM the result stays empty and every feed is a no-op */
	ward_result_init(o, limit);
}

void exec_out_release(struct exec_out *o)
{
	ward_result_release(o);
}

void exec_out_message(struct exec_out *o, json_t *m, ward_result_sink sink, void *ctx)
{
	ward_result_set_sink(o, sink, ctx);
	ward_result_message(o, m);
}

void exec_out_reply(struct exec_out *o, json_t *reply)
{
	ward_result_reply(o, reply);
}

void exec_out_to_verdict(struct exec_out *o, struct ward_verdict *v)
{
	ward_result_to_verdict(o, v);
}

void exec_out_adjust(struct exec_out *o, struct ward_verdict *v, const struct ward_policy *p)
{
	ward_result_adjust(o, v, p);
}

json_t *exec_out_final(struct exec_out *o, const struct ward_verdict *v,
		       const struct ward_policy *p, bool died, const char *lang)
{
	/* the session's state machine says when its kernel could not answer */
	o->died = died;
	return ward_result_final(o, v, p, lang);
}

size_t exec_keep(struct ward_verdict *v, int which, const char *buf, size_t n, uint64_t limit)
{
	return ward_verdict_keep(v, which, buf, n, limit);
}
