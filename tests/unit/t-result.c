/* tests/unit/t-result.c — the result builder (lib/kernel/result.c): a table
 * of kernel message sequences, each with the sandbox's verdict, against the
 * status and the JSON the builder must give; the one output cap; bounded
 * stream events; text holding U+0000, kept whole and compared by length. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "tap.h"
#include "ward/kernel.h"
#include "ward/result.h"

struct row {
	const char *name;
	const char *msgs;        /* a JSON array of kernel messages; "REPLY" items are replies */
	enum ward_status sandbox; /* the sandbox's own verdict */
	uint64_t limit;          /* output cap */
	const char *status;      /* expected */
	const char *check;       /* JSON object: expected top-level values (subset) */
};

#define S(n, t) "{\"msg_type\":\"stream\",\"content\":{\"name\":\"" n "\",\"text\":\"" t "\"}}"
#define OK "{\"msg_type\":\"REPLY\",\"content\":{\"status\":\"ok\",\"execution_count\":1}}"
#define ERR "{\"msg_type\":\"REPLY\",\"content\":{\"status\":\"error\",\"execution_count\":1}}"

static const struct row rows[] = {
	{ "ok with streams", "[" S("stdout", "a") "," S("stdout", "b") "," S("stderr", "c") "," OK "]",
	  WARD_STATUS_OK, 1024, "ok",
	  "{\"stdout\":\"ab\",\"stderr\":\"c\",\"error\":null,"
	  "\"cells\":[{\"status\":\"ok\",\"execution_count\":1,\"outputs\":["
	  "{\"type\":\"stream\",\"name\":\"stdout\",\"text\":\"ab\"},"
	  "{\"type\":\"stream\",\"name\":\"stderr\",\"text\":\"c\"}]}]}" },
	{ "an error keeps the kernel's words and hint",
	  "[{\"msg_type\":\"error\",\"content\":{\"ename\":\"NameError\",\"evalue\":\"x\","
	  "\"traceback\":[\"t\"],\"hint\":\"define x\"}}," ERR "]",
	  WARD_STATUS_OK, 1024, "error",
	  "{\"error\":{\"name\":\"NameError\",\"value\":\"x\",\"traceback\":[\"t\"],\"hint\":\"define x\"},"
	  "\"exit_code\":1}" },
	{ "a result is kept once and pointed at",
	  "[{\"msg_type\":\"execute_result\",\"content\":{\"data\":{\"text/plain\":\"42\"}}}," OK "]",
	  WARD_STATUS_OK, 1024, "ok",
	  "{\"results\":[{\"text/plain\":\"42\"}],\"cells\":[{\"status\":\"ok\",\"execution_count\":1,"
	  "\"outputs\":[{\"type\":\"execute_result\",\"result\":0}]}]}" },
	{ "a PNG display_data",
	  "[{\"msg_type\":\"display_data\",\"content\":{\"data\":{\"image/png\":\"iVBORw0KGgo=\"}}}," OK "]",
	  WARD_STATUS_OK, 1024, "ok", "{\"results\":[{\"image/png\":\"iVBORw0KGgo=\"}]}" },
	{ "over the cap: output_limit and OutputLimitError",
	  "[" S("stdout", "0123456789") "," S("stderr", "abc") "," OK "]",
	  WARD_STATUS_OK, 8, "output_limit",
	  "{\"stdout\":\"01234567\",\"stderr\":\"\",\"stdout_truncated\":true,\"stderr_truncated\":true,"
	  "\"limit\":{\"name\":\"output\",\"value\":8},\"error\":{\"name\":\"OutputLimitError\"}}" },
	{ "the cap never cuts a character",
	  "[" S("stdout", "ab\u00e9") "," OK "]", WARD_STATUS_OK, 3, "output_limit",
	  "{\"stdout\":\"ab\"}" },
	{ "the kernel's own truncation counts",
	  "[{\"msg_type\":\"REPLY\",\"content\":{\"status\":\"ok\",\"stderr_truncated\":true}}]",
	  WARD_STATUS_OK, 1024, "output_limit", "{\"stderr_truncated\":true}" },
	{ "a kernel killed by the timeout: TimeoutError",
	  "[" S("stdout", "tick") "]", WARD_STATUS_TIMEOUT, 1024, "timeout",
	  "{\"stdout\":\"tick\",\"error\":{\"name\":\"TimeoutError\"},"
	  "\"cells\":[{\"status\":\"died\",\"execution_count\":null,\"outputs\":[{\"type\":\"stream\",\"name\":\"stdout\",\"text\":\"tick\"}]}]}" },
	{ "a kernel killed by the memory limit: MemoryError",
	  "[]", WARD_STATUS_MEMORY_LIMIT, 1024, "memory_limit",
	  "{\"error\":{\"name\":\"MemoryError\"},\"cells\":[{\"status\":\"died\",\"execution_count\":null,\"outputs\":[]}]}" },
	{ "a lint hit is policy_violation",
	  "[{\"msg_type\":\"policy_violation\",\"content\":{\"rule\":\"deny_imports\",\"name\":\"os\"}}," ERR "]",
	  WARD_STATUS_OK, 1024, "policy_violation",
	  "{\"exit_code\":3,\"policy_violation\":{\"rule\":\"deny_imports\",\"name\":\"os\"}}" },
	{ "a NUL byte is text like any other",
	  "[" S("stdout", "a\\u0000b\\n") "," OK "]", WARD_STATUS_OK, 1024, "ok",
	  "{\"stdout\":\"a\\u0000b\\n\",\"cells\":[{\"status\":\"ok\",\"execution_count\":1,\"outputs\":["
	  "{\"type\":\"stream\",\"name\":\"stdout\",\"text\":\"a\\u0000b\\n\"}]}]}" },
	{ "the cap counts a NUL byte as one byte",
	  "[" S("stdout", "ab\\u0000cd") "," OK "]", WARD_STATUS_OK, 3, "output_limit",
	  "{\"stdout\":\"ab\\u0000\",\"stdout_truncated\":true}" },
	{ "a stream name holding U+0000 is not stderr",
	  "[" S("stderr\\u0000x", "t") "," OK "]", WARD_STATUS_OK, 1024, "ok",
	  "{\"stdout\":\"t\",\"stderr\":\"\"}" },
	{ "a message type holding U+0000 is no known type",
	  "[{\"msg_type\":\"stream\\u0000x\",\"content\":{\"name\":\"stdout\",\"text\":\"t\"}},"
	  "{\"msg_type\":\"error\\u0000\",\"content\":{\"ename\":\"E\"}}," OK "]",
	  WARD_STATUS_OK, 1024, "ok", "{\"stdout\":\"\",\"error\":null}" },
	{ "a reply status holding U+0000 is not ok",
	  "[{\"msg_type\":\"REPLY\",\"content\":{\"status\":\"ok\\u0000\",\"execution_count\":1}}]",
	  WARD_STATUS_OK, 1024, "error",
	  "{\"exit_code\":1,\"cells\":[{\"status\":\"error\",\"execution_count\":1,\"outputs\":[]}]}" },
	{ "a protocol error from the channel: the run is an error, nothing is stdout",
	  "[{\"msg_type\":\"protocol_error\",\"content\":{\"ename\":\"KernelProtocolError\","
	  "\"evalue\":\"dropped\",\"traceback\":[]}}," S("stdout", "after") "," OK "]",
	  WARD_STATUS_OK, 1024, "error",
	  "{\"exit_code\":1,\"stdout\":\"after\",\"error\":{\"name\":\"KernelProtocolError\","
	  "\"value\":\"dropped\",\"traceback\":[]}}" },
	{ "unknown and malformed messages are ignored",
	  "[{\"msg_type\":\"shutdown_reply\",\"content\":{}},{\"msg_type\":\"stream\",\"content\":{\"text\":1}},"
	  "{\"msg_type\":\"error\"}," OK "]",
	  WARD_STATUS_OK, 1024, "ok", "{\"error\":null,\"stdout\":\"\"}" },
};

/* Every key of want is in got with an equal value; objects recursively
 * (a subset), arrays exactly. */
static int subset(json_t *want, json_t *got)
{
	if (!json_is_object(want))
		return json_equal(want, got);
	const char *k;
	json_t *w;
	json_object_foreach(want, k, w)
		if (!subset(w, json_object_get(got, k)))
			return 0;
	return 1;
}

static json_t *run_row(const struct row *r, struct ward_verdict *v)
{
	struct ward_policy p;
	struct ward_error err;
	ward_policy_init(&p, &err);
	p.output_limit = r->limit;
	p.timeout_ms = 1000;
	struct ward_result res;
	if (ward_result_init(&res, r->limit) < 0)
		return NULL;
	json_t *msgs = json_loads(r->msgs, JSON_ALLOW_NUL, NULL);
	size_t i;
	json_t *m;
	json_array_foreach(msgs, i, m) {
		const char *type = json_string_value(json_object_get(m, "msg_type"));
		if (strcmp(type, "REPLY") == 0)
			ward_result_reply(&res, json_object_get(m, "content"));
		else
			ward_result_message(&res, m);
	}
	json_decref(msgs);
	ward_verdict_init(v);
	ward_result_to_verdict(&res, v);
	v->status = r->sandbox;
	ward_result_adjust(&res, v, &p);
	json_t *f = ward_result_final(&res, v, &p, "python");
	ward_result_release(&res);
	ward_policy_release(&p);
	(void)err;
	return f;
}

static void sink_count(json_t *ev, void *ctx)
{
	size_t *max = ctx;
	size_t n = json_string_length(json_object_get(ev, "text"));
	if (n > *max)
		*max = n;
}

static void test_events(void)
{
	/* one stream message of 1 MiB: events come in bounded pieces */
	size_t n = 1u << 20, max = 0;
	char *big = malloc(n + 1);
	memset(big, 'x', n);
	big[n] = '\0';
	json_t *m = json_pack("{s:s, s:{s:s, s:s}}", "msg_type", "stream", "content", "name",
			      "stdout", "text", big);
	struct ward_result res;
	ward_result_init(&res, 16u << 20);
	ward_result_set_sink(&res, sink_count, &max);
	ward_result_message(&res, m);
	ok(max > 0 && max <= WARD_RESULT_EVENT_CHUNK, "a 1 MiB stream is sent in events of at most %d bytes (largest %zu)",
	   WARD_RESULT_EVENT_CHUNK, max);
	ok(res.text[0].len == n, "and kept once, whole");
	/* many tiny messages: output entries stay bounded */
	json_t *c = json_object_get(m, "content");
	for (int i = 0; i < WARD_RESULT_MAX_OUTPUTS + 50; i++) {
		json_object_set_new(c, "name", json_string(i % 2 ? "stdout" : "stderr"));
		json_object_set_new(c, "text", json_string("y"));
		ward_result_message(&res, m);
	}
	ok(json_array_size(res.outputs) == WARD_RESULT_MAX_OUTPUTS,
	   "output entries are capped at %d", WARD_RESULT_MAX_OUTPUTS);
	ward_result_reply(&res, NULL);
	json_t *cell = json_array_get(res.cells, 0);
	ok(json_integer_value(json_object_get(cell, "outputs_dropped")) > 0,
	   "the cell says how many were dropped");
	json_decref(m);
	free(big);
	ward_result_release(&res);
}

static void test_cap(void)
{
	uint64_t total = 0;
	is_int((long)ward_output_keep(&total, 10, 4), 4, "the cap keeps what fits");
	is_int((long)ward_output_keep(&total, 10, 8), 6, "then the rest of the room");
	is_int((long)ward_output_keep(&total, 10, 5), 0, "then nothing");
	is_int((long)total, 17, "and counts everything produced");
	struct ward_verdict v;
	ward_verdict_init(&v);
	ward_verdict_keep(&v, 2, "hello", 5, 3);
	ok(v.err.len == 3 && v.stderr_truncated && !v.stdout_truncated && v.usage.output_bytes == 5,
	   "a command's stderr is cut at the same cap");
	ward_verdict_release(&v);
}

static void sink_nul(json_t *ev, void *ctx)
{
	json_t *t = json_object_get(ev, "text");
	*(int *)ctx = json_string_length(t) == 3 && memcmp(json_string_value(t), "a\0b", 3) == 0;
}

/* Text holding NUL bytes: events and the verdict keep them as U+0000. */
static void test_nul(void)
{
	struct ward_result res;
	int whole = 0;
	ward_result_init(&res, 1024);
	ward_result_set_sink(&res, sink_nul, &whole);
	json_t *m = json_pack("{s:s, s:{s:s, s:s%}}", "msg_type", "stream", "content", "name",
			      "stdout", "text", "a\0b", (size_t)3);
	ward_result_message(&res, m);
	ok(whole, "a stream event keeps a NUL byte and what follows it");
	json_decref(m);
	ward_result_release(&res);

	struct ward_verdict v;
	ward_verdict_init(&v);
	ward_buffer_append(&v.out, "a\0b\xff" "c", 5);
	char *s = ward_verdict_to_json(&v);
	const char *want = "\"stdout\":\"a\\u0000b\xef\xbf\xbd" "c\"";
	ok(s && strstr(s, want), "the verdict says a NUL byte as \\u0000 next to an invalid byte (U+FFFD)");
	if (s && !strstr(s, want))
		diag("got %s", s);
	free(s);
	ward_verdict_release(&v);
}

static void test_depth(void)
{
	char deep[80], shallow[80];
	memset(deep, '[', 40);
	memset(deep + 40, ']', 40);
	size_t at = 0;
	bool deep_hit = ward_json_too_deep(deep, 80, 32, &at);
	ok(deep_hit && at == 32, "40 levels are too deep for 32 (at %zu)", at);
	memset(shallow, ']', 40);
	memset(shallow + 40, '[', 40);
	ok(ward_json_too_deep(shallow, 80, 32, NULL), "leading closers buy no depth");
	ok(!ward_json_too_deep("[\"[[[[[[[[[[\\\"[[[[[[[[[[\"]", 27, 2, NULL), "brackets in strings do not count");
}

int main(void)
{
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ward_verdict v;
		json_t *f = run_row(&rows[i], &v);
		json_t *want = json_loads(rows[i].check, JSON_ALLOW_NUL, NULL);
		is_str(ward_status_name(v.status), rows[i].status, "%s: status", rows[i].name);
		if (!ok(f && want && subset(want, f), "%s: JSON", rows[i].name)) {
			char *s = f ? json_dumps(f, JSON_COMPACT) : NULL;
			diag("got %s", s ? s : "(null)");
			free(s);
		}
		json_decref(want);
		json_decref(f);
		ward_verdict_release(&v);
	}
	test_events();
	test_cap();
	test_nul();
	test_depth();
	return tap_done();
}
