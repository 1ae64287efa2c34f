/* lib/verdict.c — the verdict's names and its JSON form.
 * The JSON schema is documented in docs/verdict.md; field names here and
 * there must match. */
#include <jansson.h>
#include <string.h>

#include "base/util.h"
#include "ward/verdict.h"

static const char *const status_names[] = {
	[WARD_STATUS_OK] = "ok",
	[WARD_STATUS_ERROR] = "error",
	[WARD_STATUS_TIMEOUT] = "timeout",
	[WARD_STATUS_CPU_TIMEOUT] = "cpu_timeout",
	[WARD_STATUS_MEMORY_LIMIT] = "memory_limit",
	[WARD_STATUS_PIDS_LIMIT] = "pids_limit",
	[WARD_STATUS_OUTPUT_LIMIT] = "output_limit",
	[WARD_STATUS_DISK_LIMIT] = "disk_limit",
	[WARD_STATUS_SIGNALED] = "signaled",
	[WARD_STATUS_KILLED] = "killed",
	[WARD_STATUS_SETUP_FAILED] = "setup_failed",
	[WARD_STATUS_POLICY_VIOLATION] = "policy_violation",
};
_Static_assert(ARRAY_SIZE(status_names) == WARD_STATUS_COUNT, "every status has a name");

WARD_EXPORT const char *ward_status_name(enum ward_status status)
{
	if ((size_t)status >= ARRAY_SIZE(status_names))
		return "unknown";
	return status_names[status];
}

WARD_EXPORT int ward_buffer_append(struct ward_buffer *b, const void *data, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *nb = realloc(b->data, cap);
		if (!nb)
			return -ENOMEM;
		b->data = nb;
		b->cap = cap;
	}
	memcpy(b->data + b->len, data, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

WARD_EXPORT size_t ward_output_keep(uint64_t *total, uint64_t limit, size_t n)
{
	uint64_t room = *total < limit ? limit - *total : 0;
	*total += n;
	return n < room ? n : (size_t)room;
}

WARD_EXPORT size_t ward_verdict_keep(struct ward_verdict *v, int which, const char *buf, size_t n,
				     uint64_t limit)
{
	size_t keep = ward_output_keep(&v->usage.output_bytes, limit, n);
	if (keep < n)
		*(which == 1 ? &v->stdout_truncated : &v->stderr_truncated) = true;
	/* under memory pressure output is dropped, not fatal */
	if (keep)
		ward_buffer_append(which == 1 ? &v->out : &v->err, buf, keep);
	return keep;
}

WARD_EXPORT void ward_verdict_init(struct ward_verdict *v)
{
	memset(v, 0, sizeof(*v));
}

WARD_EXPORT void ward_verdict_release(struct ward_verdict *v)
{
	free(v->out.data);
	free(v->err.data);
	memset(v, 0, sizeof(*v));
}

static json_t *layer_list(uint32_t bits)
{
	json_t *a = json_array();
	for (int i = 0; i < WARD_LAYER_COUNT && a; i++)
		if (bits & (1u << i))
			json_array_append_new(a, json_string(ward_layer_name((enum ward_layer)i)));
	return a;
}

static json_t *text(const struct ward_buffer *b)
{
	/* Output is bytes; JSON wants UTF-8. Invalid sequences would make the
	 * whole verdict unencodable, so they become U+FFFD; a NUL byte is
	 * U+0000 (JSON "\u0000"), kept like any other character. */
	json_t *s = json_stringn(b->data ? b->data : "", b->len);
	if (s)
		return s;
	char *fixed = malloc(b->len * 3 + 1);
	if (!fixed)
		return json_string("");
	size_t o = 0;
	for (size_t i = 0; i < b->len;) {
		unsigned char c = (unsigned char)b->data[i];
		size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
		json_t *probe = n && i + n <= b->len ? json_stringn(b->data + i, n) : NULL;
		if (probe) {
			memcpy(fixed + o, b->data + i, n);
			o += n;
			i += n;
		} else {
			memcpy(fixed + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
		json_decref(probe);
	}
	s = json_stringn(fixed, o);
	free(fixed);
	return s ? s : json_string("");
}

/* A fixed-size field of the verdict as JSON text: cut at its NUL or its
 * size, invalid UTF-8 replaced (a host name comes from the sandbox). */
static json_t *field_text(const char *s, size_t size)
{
	struct ward_buffer b = { .data = (char *)s, .len = strnlen(s, size) };
	return text(&b);
}

/* "network": present only in allowlist mode (docs/verdict.md). */
static json_t *network_json(const struct ward_net_usage *n)
{
	json_t *o = json_object(), *denied = json_array();
	if (!o || !denied) {
		json_decref(o);
		json_decref(denied);
		return NULL;
	}
	size_t shown = n->n_denied < WARD_NET_DENIED_MAX ? n->n_denied : WARD_NET_DENIED_MAX;
	for (size_t i = 0; i < shown; i++) {
		const struct ward_net_denial *d = &n->denied[i];
		json_t *e = json_object();
		if (!e)
			continue;
		json_object_set_new(e, "host", field_text(d->host, sizeof(d->host)));
		json_object_set_new(e, "port", json_integer(d->port));
		json_object_set_new(e, "reason", field_text(d->reason, sizeof(d->reason)));
		json_array_append_new(denied, e);
	}
	json_object_set_new(o, "connections", json_integer((json_int_t)n->connections));
	json_object_set_new(o, "bytes_out", json_integer((json_int_t)n->bytes_out));
	json_object_set_new(o, "bytes_in", json_integer((json_int_t)n->bytes_in));
	json_object_set_new(o, "denied", denied);
	json_object_set_new(o, "denied_total", json_integer((json_int_t)n->denied_total));
	if (n->limit)
		json_object_set_new(o, "limit", json_string(n->limit));
	return o;
}

WARD_EXPORT char *ward_verdict_to_json(const struct ward_verdict *v)
{
	json_t *o = ward_verdict_to_object(v);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return s;
}

WARD_EXPORT json_t *ward_verdict_to_object(const struct ward_verdict *v)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	json_object_set_new(o, "status", json_string(ward_status_name(v->status)));
	json_object_set_new(o, "exit_code", v->signal || v->status == WARD_STATUS_SETUP_FAILED
				? json_null() : json_integer(v->exit_code));
	json_object_set_new(o, "signal", v->signal ? json_integer(v->signal) : json_null());
	if (v->limit) {
		json_object_set_new(o, "limit", json_pack("{s:s, s:I}", "name", v->limit,
							  "value", (json_int_t)v->limit_value));
	} else {
		json_object_set_new(o, "limit", json_null());
	}
	json_object_set_new(o, "usage", json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
		"wall_ms", (json_int_t)v->usage.wall_ms,
		"cpu_user_ms", (json_int_t)v->usage.cpu_user_ms,
		"cpu_sys_ms", (json_int_t)v->usage.cpu_sys_ms,
		"peak_memory_bytes", (json_int_t)v->usage.peak_memory_bytes,
		"processes_peak", (json_int_t)v->usage.processes_peak,
		"forks_refused", (json_int_t)v->usage.forks_refused,
		"output_bytes", (json_int_t)v->usage.output_bytes));
	json_object_set_new(o, "stdout", text(&v->out));
	json_object_set_new(o, "stderr", text(&v->err));
	json_object_set_new(o, "stdout_truncated", json_boolean(v->stdout_truncated));
	json_object_set_new(o, "stderr_truncated", json_boolean(v->stderr_truncated));
	json_object_set_new(o, "layers", layer_list(v->layers));
	json_object_set_new(o, "degraded", layer_list(v->degraded));
	json_object_set_new(o, "sandbox_id", json_string(v->sandbox_id));
	if (v->network.present)
		json_object_set_new(o, "network", network_json(&v->network));
	if (v->setup.message[0]) {
		json_object_set_new(o, "error", json_pack("{s:s, s:s, s:s, s:s?}",
			"layer", v->setup.layer, "message", v->setup.message,
			"reason", v->setup.code > 0 ? strerror(v->setup.code) : "",
			"hint", v->setup.hint[0] ? v->setup.hint : NULL));
	}
	return o;
}
