/* lib/kernel/result.c — the one result builder: a kernel's messages, kept
 * once and capped, into the verdict and the final JSON that `ward exec
 * --json` prints and `POST /v1/executions` answers.
 *
 * It must never trust a kernel's claim (types are checked, sizes capped)
 * and never hold more than one copy of the capped streams: cells point
 * into the stream buffers until the final JSON is built, and events are
 * built in bounded pieces, only when someone listens. Stream text is
 * bytes that may hold U+0000: it is handled by length, never by strlen,
 * and names and statuses are compared whole.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "ward/kernel.h"
#include "ward/result.h"

WARD_EXPORT int ward_result_init(struct ward_result *r, uint64_t output_limit)
{
	memset(r, 0, sizeof(*r));
	r->limit = output_limit;
	r->cells = json_array();
	r->outputs = json_array();
	r->results = json_array();
	if (r->cells && r->outputs && r->results)
		return 0;
	ward_result_release(r);
	return -ENOMEM;
}

WARD_EXPORT void ward_result_release(struct ward_result *r)
{
	json_decref(r->error);
	json_decref(r->violation);
	json_decref(r->reply);
	json_decref(r->value);
	json_decref(r->artifacts);
	json_decref(r->skipped);
	json_decref(r->cells);
	json_decref(r->outputs);
	json_decref(r->results);
	free(r->text[0].data);
	free(r->text[1].data);
	memset(r, 0, sizeof(*r));
}

WARD_EXPORT void ward_result_set_sink(struct ward_result *r, ward_result_sink sink, void *ctx)
{
	r->sink = sink;
	r->ctx = ctx;
}

/* Whether j is the string s exactly (a string holding U+0000 is not cut
 * at the NUL). */
static bool str_is(json_t *j, const char *s)
{
	size_t n = strlen(s);
	return json_is_string(j) && json_string_length(j) == n &&
	       memcmp(json_string_value(j), s, n) == 0;
}

static void send_event(struct ward_result *r, json_t *ev)
{
	if (ev && r->sink)
		r->sink(ev, r->ctx);
	json_decref(ev);
}

/* Appends an output entry within the bound (takes e). */
static void add_output(struct ward_result *r, json_t *e)
{
	if (!e)
		return;
	if (r->n_outputs >= WARD_RESULT_MAX_OUTPUTS) {
		r->dropped++;
		json_decref(e);
		return;
	}
	if (json_array_append_new(r->outputs, e) == 0)
		r->n_outputs++;
}

/* The longest prefix of s[0..n) that does not end inside a UTF-8
 * sequence (s is valid UTF-8: it came from a JSON string). */
static size_t utf8_prefix(const char *s, size_t n, size_t full)
{
	if (n >= full)
		return full;
	while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	return n;
}

/* Stream events for text just kept, in pieces of at most
 * WARD_RESULT_EVENT_CHUNK bytes cut at character boundaries. */
static void stream_events(struct ward_result *r, const char *name, const char *s, size_t n)
{
	for (size_t off = 0; off < n;) {
		size_t len = utf8_prefix(s + off, WARD_RESULT_EVENT_CHUNK, n - off);
		if (len == 0) /* not UTF-8 after all: nothing sensible to send */
			return;
		send_event(r, json_pack("{s:s, s:s, s:s%}", "event", "stream", "name", name, "text",
					s + off, len));
		off += len;
	}
}

/* A stream entry refers to [off, off + len) of its stream's buffer; the
 * text is put in by ward_result_final. Adjacent text of one stream
 * extends the last entry. */
static void stream_output(struct ward_result *r, int which, size_t off, size_t len)
{
	const char *name = which ? "stderr" : "stdout";
	size_t n = json_array_size(r->outputs);
	json_t *last = n ? json_array_get(r->outputs, n - 1) : NULL;
	json_t *lo = json_object_get(last, "off"), *ll = json_object_get(last, "len");
	const char *lname = json_string_value(json_object_get(last, "name"));
	if (lo && ll && lname && strcmp(lname, name) == 0 &&
	    (size_t)(json_integer_value(lo) + json_integer_value(ll)) == off) {
		json_object_set_new(last, "len", json_integer(json_integer_value(ll) + (json_int_t)len));
		return;
	}
	add_output(r, json_pack("{s:s, s:s, s:I, s:I}", "type", "stream", "name", name, "off",
				(json_int_t)off, "len", (json_int_t)len));
}

static void on_stream(struct ward_result *r, json_t *c)
{
	json_t *t = json_object_get(c, "text");
	int which = str_is(json_object_get(c, "name"), "stderr");
	if (!json_is_string(t))
		return;
	const char *s = json_string_value(t);
	size_t n = json_string_length(t);
	size_t keep = utf8_prefix(s, ward_output_keep(&r->total, r->limit, n), n);
	if (keep < n)
		r->truncated[which] = true;
	if (!keep)
		return;
	struct ward_buffer *b = &r->text[which];
	size_t off = b->len;
	/* under memory pressure text is dropped, not fatal */
	if (ward_buffer_append(b, s, keep) < 0)
		return;
	stream_output(r, which, off, keep);
	if (r->sink)
		stream_events(r, which ? "stderr" : "stdout", s, keep);
}

static void on_bundle(struct ward_result *r, const char *type, json_t *c)
{
	json_t *data = json_object_get(c, "data");
	/* the bundle is kept once, in results; the cell points at it */
	json_array_append(r->results, data ? data : json_null());
	add_output(r, json_pack("{s:s, s:I}", "type", type, "result",
				(json_int_t)json_array_size(r->results) - 1));
	if (r->sink)
		send_event(r, json_pack("{s:s, s:s, s:O?}", "event", "result", "type", type,
					"data", data));
}

static void on_error(struct ward_result *r, const char *type, json_t *c, json_t **first)
{
	if (!*first)
		*first = json_incref(c);
	json_t *copy = json_deep_copy(c);
	if (copy)
		json_object_set_new(copy, "type", json_string(type));
	add_output(r, copy);
	if (r->sink)
		send_event(r, json_pack("{s:s, s:O}", "event", type, "content", c));
}

WARD_EXPORT void ward_result_message(struct ward_result *r, json_t *m)
{
	json_t *type = json_object_get(m, "msg_type");
	json_t *c = json_object_get(m, "content");
	if (!json_is_object(c))
		return;
	if (str_is(type, "stream")) {
		on_stream(r, c);
	} else if (str_is(type, "execute_result") || str_is(type, "display_data")) {
		on_bundle(r, json_string_value(type), c);
	} else if (str_is(type, "error")) {
		on_error(r, "error", c, &r->error);
	} else if (str_is(type, "policy_violation")) {
		on_error(r, "policy_violation", c, &r->violation);
	} else if (str_is(type, "protocol_error")) {
		/* the kernel broke its protocol: what it says cannot be trusted
		 * to be complete, so the run is an error whatever it replies */
		on_error(r, "error", c, &r->error);
		r->code_failed = true;
	}
}

/* What a reply says beyond its status: the kernel's own truncation. */
static void note_reply(struct ward_result *r, json_t *reply)
{
	json_decref(r->reply);
	r->reply = json_incref(reply);
	if (!reply) {
		r->died = true;
		return;
	}
	if (!str_is(json_object_get(reply, "status"), "ok"))
		r->code_failed = true;
	if (json_is_true(json_object_get(reply, "stdout_truncated")))
		r->truncated[0] = true;
	if (json_is_true(json_object_get(reply, "stderr_truncated")))
		r->truncated[1] = true;
}

WARD_EXPORT void ward_result_reply(struct ward_result *r, json_t *reply)
{
	note_reply(r, reply);
	json_t *js = json_object_get(reply, "status");
	const char *st = json_string_value(js);
	if (st && strlen(st) != json_string_length(js))
		st = NULL; /* not a status word */
	json_t *cell = json_pack("{s:s, s:O?, s:O}", "status", reply ? st ? st : "error" : "died",
				 "execution_count", json_object_get(reply, "execution_count"),
				 "outputs", r->outputs);
	if (cell && r->dropped)
		json_object_set_new(cell, "outputs_dropped", json_integer((json_int_t)r->dropped));
	r->dropped = 0;
	if (cell)
		json_array_append_new(r->cells, cell);
	json_t *fresh = json_array();
	if (fresh) {
		json_decref(r->outputs);
		r->outputs = fresh;
	}
}

WARD_EXPORT void ward_result_call_reply(struct ward_result *r, json_t *reply)
{
	r->call = true;
	note_reply(r, reply);
	if (!reply)
		return;
	if (str_is(json_object_get(reply, "status"), "ok")) {
		json_decref(r->value);
		r->value = json_incref(json_object_get(reply, "value"));
		return;
	}
	json_t *e = json_object_get(reply, "error");
	if (json_is_object(e) && !r->error)
		r->error = json_incref(e);
}

WARD_EXPORT void ward_result_to_verdict(struct ward_result *r, struct ward_verdict *v)
{
	free(v->out.data);
	free(v->err.data);
	v->out = r->text[0];
	v->err = r->text[1];
	r->text[0] = r->text[1] = (struct ward_buffer){ 0 };
	v->stdout_truncated = r->truncated[0];
	v->stderr_truncated = r->truncated[1];
	v->usage.output_bytes = r->total;
}

WARD_EXPORT void ward_result_adjust(struct ward_result *r, struct ward_verdict *v,
				    const struct ward_policy *p)
{
	ward_kernel_adjust_verdict(v, p, r->violation != NULL, r->code_failed,
				   r->truncated[0] || r->truncated[1]);
}

/* Replaces a stream entry's reference by its text, read from v. */
static void resolve_stream(json_t *e, const struct ward_verdict *v)
{
	json_t *jo = json_object_get(e, "off"), *jl = json_object_get(e, "len");
	if (!jo || !jl)
		return;
	const struct ward_buffer *b = str_is(json_object_get(e, "name"), "stderr") ? &v->err : &v->out;
	size_t off = (size_t)json_integer_value(jo), len = (size_t)json_integer_value(jl);
	if (off > b->len)
		off = b->len;
	if (len > b->len - off)
		len = b->len - off;
	json_object_del(e, "off");
	json_object_del(e, "len");
	json_t *t = b->data ? json_stringn(b->data + off, len) : NULL;
	json_object_set_new(e, "text", t ? t : json_string(""));
}

static void resolve_cells(json_t *cells, const struct ward_verdict *v)
{
	size_t i, j;
	json_t *cell, *e;
	json_array_foreach(cells, i, cell) {
		json_array_foreach(json_object_get(cell, "outputs"), j, e)
			resolve_stream(e, v);
	}
}

/* Does the error look like a refused connection or name? (Python's and
 * node's spellings.) */
static bool network_error(json_t *e)
{
	static const char *const marks[] = {
		"Connection", "URLError", "HTTPError", "ProxyError", "gaierror", "SSLError",
		"RemoteDisconnected", "ProtocolError", "MaxRetryError", "403", "refused", "reset",
		"name resolution", "Name or service not known", "ECONNRESET", "ECONNREFUSED",
		"ENOTFOUND", "EAI_AGAIN", "fetch failed", "ward egress", "Tunnel connection failed",
	};
	const char *name = json_string_value(json_object_get(e, "name"));
	const char *value = json_string_value(json_object_get(e, "value"));
	for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++)
		if ((name && strstr(name, marks[i])) || (value && strstr(value, marks[i])))
			return true;
	return false;
}

/* A refused connection's error says which host the allowlist refused and
 * what it holds, so a model asks for the right host instead of retrying. */
static void egress_hint(json_t *e, const struct ward_verdict *v, const struct ward_policy *p)
{
	const struct ward_net_usage *n = &v->network;
	if (!e || !n->present || !n->n_denied || !network_error(e))
		return;
	const struct ward_net_denial *d = &n->denied[n->n_denied - 1];
	char hint[1024], rule[320];
	int len = snprintf(hint, sizeof(hint), "the sandbox's network allowlist refused %s:%u (%s); ",
			   d->host, (unsigned)d->port, d->reason);
	size_t off = len > 0 && (size_t)len < sizeof(hint) ? (size_t)len : sizeof(hint) - 1;
	if (!p || !p->network.n_allow) {
		snprintf(hint + off, sizeof(hint) - off, "it allows nothing");
	} else {
		snprintf(hint + off, sizeof(hint) - off, "it allows: ");
		for (size_t i = 0; i < p->network.n_allow; i++) {
			off = strlen(hint);
			if (off + 64 >= sizeof(hint)) {
				ward_strlcat(hint, ", ...", sizeof(hint));
				break;
			}
			snprintf(hint + off, sizeof(hint) - off, "%s%s", i ? ", " : "",
				 ward_net_rule_format(&p->network.allow[i], rule, sizeof(rule)));
		}
	}
	json_object_set_new(e, "hint", json_string(hint));
}

WARD_EXPORT json_t *ward_result_final(struct ward_result *r, const struct ward_verdict *v,
				      const struct ward_policy *p, const char *lang)
{
	/* a cell the kernel never answered */
	if (!r->call && (json_array_size(r->outputs) || !json_array_size(r->cells) || r->dropped))
		ward_result_reply(r, NULL);
	json_t *f = (json_t *)ward_verdict_to_object(v);
	if (!f)
		return NULL;
	resolve_cells(r->cells, v);
	json_object_set_new(f, "language", json_string(lang ? lang : ""));
	if (r->call)
		json_object_set(f, "value", r->value ? r->value : json_null());
	else
		json_object_set(f, "cells", r->cells);
	json_object_set(f, "results", r->results);
	json_t *e = NULL;
	if (r->error)
		e = ward_kernel_error_object(r->error);
	else if (r->died || v->status == WARD_STATUS_OUTPUT_LIMIT)
		e = ward_kernel_limit_error(v, p); /* a limit, with its value */
	egress_hint(e, v, p);
	json_object_set_new(f, "error", e ? e : json_null());
	json_object_set(f, "policy_violation", r->violation ? r->violation : json_null());
	json_object_set_new(f, "artifacts", r->artifacts ? json_incref(r->artifacts) : json_array());
	json_object_set_new(f, "artifacts_skipped",
			    r->skipped ? json_incref(r->skipped) : json_array());
	return f;
}
