/* src/daemon/exec-glue.c — a kernel's messages, gathered for one cell.
 *
 * Everything the kernel says is a claim from untrusted code: only known
 * message types are kept, copied, and capped (streams at the policy's
 * output limit); nothing is obeyed. The JSON matches `ward exec --json`.
 */
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "exec-glue.h"
#include "ward/kernel.h"

void exec_out_init(struct exec_out *o, uint64_t limit)
{
	memset(o, 0, sizeof(*o));
	o->outputs = json_array();
	o->results = json_array();
	o->limit = limit;
}

void exec_out_release(struct exec_out *o)
{
	json_decref(o->outputs);
	json_decref(o->results);
	json_decref(o->error);
	json_decref(o->violation);
	json_decref(o->reply);
	json_decref(o->artifacts);
	json_decref(o->skipped);
	free(o->text[0].data);
	free(o->text[1].data);
	memset(o, 0, sizeof(*o));
}

static void buf_append(struct ward_buffer *b, const char *s, size_t keep)
{
	if (keep && b->len + keep + 1 <= (1u << 30))
		ward_buffer_append(b, s, keep); /* dropped under memory pressure */
}

/* Keeps what fits under the cap; returns how much. */
static size_t keep_text(struct exec_out *o, int which, const char *s, size_t n)
{
	uint64_t room = o->total < o->limit ? o->limit - o->total : 0;
	size_t keep = n < room ? n : (size_t)room;
	o->total += n;
	if (keep < n)
		o->truncated[which] = true;
	buf_append(&o->text[which], s, keep);
	return keep;
}

size_t exec_keep(struct ward_verdict *v, int which, const char *buf, size_t n, uint64_t limit)
{
	uint64_t room = v->usage.output_bytes < limit ? limit - v->usage.output_bytes : 0;
	size_t keep = n < room ? n : (size_t)room;
	v->usage.output_bytes += n;
	if (keep < n)
		*(which == 1 ? &v->stdout_truncated : &v->stderr_truncated) = true;
	buf_append(which == 1 ? &v->out : &v->err, buf, keep);
	return keep;
}

static json_t *stream_event(struct exec_out *o, json_t *c)
{
	const char *name = json_string_value(json_object_get(c, "name"));
	json_t *t = json_object_get(c, "text");
	int which = name && strcmp(name, "stderr") == 0;
	if (!json_is_string(t))
		return NULL;
	size_t kept = keep_text(o, which, json_string_value(t), json_string_length(t));
	if (!kept)
		return NULL;
	const char *name_s = which ? "stderr" : "stdout";
	json_t *text = json_stringn(json_string_value(t), kept);
	if (!text) /* cut inside a UTF-8 sequence */
		text = json_incref(t);
	json_array_append_new(o->outputs, json_pack("{s:s, s:O, s:s}", "name", name_s, "text",
						    text, "type", "stream"));
	return json_pack("{s:s, s:s, s:o}", "event", "stream", "name", name_s, "text", text);
}

json_t *exec_out_message(struct exec_out *o, json_t *m)
{
	const char *type = json_string_value(json_object_get(m, "msg_type"));
	json_t *c = json_object_get(m, "content");
	if (!type || !json_is_object(c))
		return NULL;
	if (strcmp(type, "stream") == 0)
		return stream_event(o, c);
	if (strcmp(type, "execute_result") == 0 || strcmp(type, "display_data") == 0) {
		json_t *data = json_object_get(c, "data");
		json_array_append(o->results, data ? data : json_null());
		json_array_append_new(o->outputs, json_pack("{s:s, s:I}", "type", type, "result",
			(json_int_t)json_array_size(o->results) - 1));
		return json_pack("{s:s, s:s, s:O?}", "event", "result", "type", type, "data", data);
	}
	json_t **keep = strcmp(type, "error") == 0 ? &o->error
		      : strcmp(type, "policy_violation") == 0 ? &o->violation : NULL;
	if (!keep)
		return NULL;
	if (!*keep)
		*keep = json_incref(c);
	json_t *copy = json_deep_copy(c);
	if (copy) {
		json_object_set_new(copy, "type", json_string(type));
		json_array_append(o->outputs, copy);
		json_decref(copy);
	}
	return json_pack("{s:s, s:O}", "event", type, "content", c);
}

void exec_out_reply(struct exec_out *o, json_t *reply)
{
	json_decref(o->reply);
	o->reply = json_incref(reply);
	const char *st = json_string_value(json_object_get(reply, "status"));
	if (st && strcmp(st, "ok") != 0)
		o->code_failed = true;
	if (json_is_true(json_object_get(reply, "stdout_truncated")))
		o->truncated[0] = true;
	if (json_is_true(json_object_get(reply, "stderr_truncated")))
		o->truncated[1] = true;
}

void exec_out_to_verdict(struct exec_out *o, struct ward_verdict *v)
{
	v->out = o->text[0];
	v->err = o->text[1];
	o->text[0] = o->text[1] = (struct ward_buffer){ 0 };
	v->stdout_truncated = o->truncated[0];
	v->stderr_truncated = o->truncated[1];
	v->usage.output_bytes = o->total;
}

void exec_out_adjust(struct exec_out *o, struct ward_verdict *v, const struct ward_policy *p)
{
	ward_kernel_adjust_verdict(v, p, o->violation != NULL, o->code_failed,
				   o->truncated[0] || o->truncated[1]);
}

json_t *exec_out_final(struct exec_out *o, const struct ward_verdict *v,
		       const struct ward_policy *p, bool died, const char *lang)
{
	json_t *f = (json_t *)ward_verdict_to_object(v);
	if (!f)
		return NULL;
	json_t *r = o->reply;
	json_t *cell = json_pack("{s:s, s:O?, s:O}", "status",
				 r ? json_string_value(json_object_get(r, "status")) ?: "error" : "died",
				 "execution_count", r ? json_object_get(r, "execution_count") : NULL,
				 "outputs", o->outputs);
	json_object_set_new(f, "language", json_string(lang));
	json_object_set_new(f, "cells", json_pack("[o?]", cell));
	json_object_set(f, "results", o->results);
	json_t *e = o->error ? ward_kernel_error_object(o->error) : died ? ward_kernel_limit_error(v, p) : NULL;
	json_object_set_new(f, "error", e ? e : json_null());
	json_object_set(f, "policy_violation", o->violation ? o->violation : json_null());
	json_object_set_new(f, "artifacts", o->artifacts ? json_incref(o->artifacts) : json_array());
	json_object_set_new(f, "artifacts_skipped", o->skipped ? json_incref(o->skipped) : json_array());
	return f;
}
