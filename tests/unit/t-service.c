/* tests/unit/t-service.c — the service core (include/ward/service.h) driven
 * with no transport, as any front end would: refusals are values with a
 * status, a code and the field; quotas and upload bounds hold; and an
 * execution runs from a loop that only knows ward_service_fd, reporting to
 * a sink and through its bounded NDJSON queue. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/keys.h"
#include "tap.h"
#include "ward/service.h"

struct seen {
	unsigned stream, verdict;
};

static void on_event(void *ctx, const struct ward_event *ev)
{
	struct seen *s = ctx;
	if (ev->kind == WARD_EVENT_STREAM)
		s->stream++;
	else if (ev->kind == WARD_EVENT_VERDICT)
		s->verdict++;
}

static bool refused(struct ward_reply *r, unsigned status, const char *code, const char *field)
{
	bool ok = r->err.status == status && strcmp(r->err.code, code) == 0 &&
		  strcmp(r->err.field, field) == 0 && !r->body && !r->ex && !r->later;
	if (!ok)
		diag("got %u %s field '%s': %s", r->err.status, r->err.code, r->err.field,
		     r->err.message);
	ward_reply_release(r);
	return ok;
}

static struct ward_service *service(uint64_t max_executions, char *tmp)
{
	struct ward_service_config c;
	ward_service_config_defaults(&c);
	size_t n = strlen(tmp) + 8;
	c.keys_file = malloc(n);
	snprintf(c.keys_file, n, "%s/keys", tmp);
	c.max_executions = max_executions;
	c.max_file = 10;
	/* no warm pool: its refills and sweeps are timers of their own
	 * (t0800-pool-isolation.sh tests it through the daemon) */
	memset(c.pool, 0, sizeof(c.pool));
	struct ward_service *svc = NULL;
	if (ward_service_new(&c, &svc) < 0) {
		ward_service_free(svc);
		svc = NULL;
	}
	ward_service_config_release(&c);
	return svc;
}

static void refusals(struct ward_service *svc, const struct ward_key_info *key)
{
	struct ward_reply r;
	ward_service_execute(svc, key, "{", 1, false, &r);
	ok(refused(&r, 400, "invalid_json", ""), "bad JSON: 400 invalid_json");
	const char *b = "{\"language\": \"cobol\", \"code\": \"1\"}";
	ward_service_execute(svc, key, b, strlen(b), false, &r);
	ok(refused(&r, 400, "invalid_request", "language"), "an unknown language names the field");
	b = "{\"command\": [\"true\"], \"colour\": 1}";
	ward_service_execute(svc, key, b, strlen(b), false, &r);
	ok(refused(&r, 400, "invalid_request", "colour"), "an unknown field is named");
	b = "{\"command\": [\"true\"], \"files\": [{\"path\": \"../x\", \"content\": \"\"}]}";
	ward_service_execute(svc, key, b, strlen(b), false, &r);
	ok(refused(&r, 400, "invalid_request", "files.0"), "a path out of /workspace: files.0");
	ward_service_cancel(svc, key, "ex_nothere", &r);
	ok(refused(&r, 404, "not_found", "id"), "cancel of an unknown execution: 404 id");
	struct ward_session_call q = { .key = key, .id = "se_nothere" };
	ward_session_get(svc, &q, &r);
	ok(refused(&r, 404, "not_found", "id"), "an unknown session: 404 id");
	ward_session_list(svc, &q, &r);
	ok(r.status == 200 && json_array_size(json_object_get(r.body, "sessions")) == 0,
	   "no sessions yet: an empty list");
	ward_reply_release(&r);
	json_t *e = ward_service_error_json(&(struct ward_service_error){
		.status = 400, .code = "x", .field = "f", .message = "caf\xe9" });
	ok(e && strcmp(json_string_value(json_object_get(json_object_get(e, "error"), "message")),
		       "caf?") == 0, "an error body says bytes that are not UTF-8 as '?'");
	json_decref(e);
}

/* Function mode, globals and inline artifacts: each bad field by name. */
static void call_refusals(struct ward_service *svc, const struct ward_key_info *key)
{
	static const struct {
		const char *body, *field, *why;
	} bad[] = {
		{ "{\"language\":\"python\",\"code\":\"\",\"function\":\"My Tool\"}", "function", "a space" },
		{ "{\"language\":\"python\",\"code\":\"\",\"function\":\"a..b\"}", "function", "an empty part" },
		{ "{\"language\":\"python\",\"code\":\"\",\"function\":\".a\"}", "function", "a leading dot" },
		{ "{\"language\":\"python\",\"code\":\"\",\"function\":\"1a\"}", "function", "a digit first" },
		{ "{\"language\":\"python\",\"code\":\"\",\"function\":\"\"}", "function", "empty" },
		{ "{\"language\":\"python\",\"code\":\"\",\"function\":[\"f\"]}", "function", "not a string" },
		{ "{\"language\":\"bash\",\"code\":\"\",\"function\":\"f\"}", "function", "bash" },
		{ "{\"command\":[\"true\"],\"function\":\"f\"}", "function", "with a command" },
		{ "{\"language\":\"python\",\"code\":\"\",\"function\":\"f\",\"args\":1}", "args", "a number" },
		{ "{\"language\":\"python\",\"code\":\"\",\"function\":\"f\",\"args\":\"x\"}", "args", "a string" },
		{ "{\"language\":\"python\",\"code\":\"\",\"args\":{}}", "args", "without function" },
		{ "{\"language\":\"python\",\"code\":\"\",\"globals\":[]}", "globals", "an array" },
		{ "{\"language\":\"python\",\"code\":\"\",\"globals\":{\"a b\":1}}", "globals.a b", "a space in a name" },
		{ "{\"language\":\"python\",\"code\":\"\",\"globals\":{\"\":1}}", "globals.", "an empty name" },
		{ "{\"language\":\"python\",\"code\":\"\",\"globals\":{\"__name__\":1}}", "globals.__name__", "a dunder" },
		{ "{\"language\":\"python\",\"code\":\"\",\"globals\":{\"$x\":1}}", "globals.$x", "a '$' for python" },
		{ "{\"language\":\"bash\",\"code\":\"\",\"globals\":{\"a\":1}}", "globals", "bash" },
		{ "{\"command\":[\"true\"],\"globals\":{\"a\":1}}", "globals", "a command" },
		{ "{\"language\":\"python\",\"code\":\"\",\"artifacts\":true}", "artifacts", "not an object" },
		{ "{\"language\":\"python\",\"code\":\"\",\"artifacts\":{\"inline\":1}}", "artifacts.inline", "not a boolean" },
		{ "{\"language\":\"python\",\"code\":\"\",\"artifacts\":{\"max_bytes\":-1}}", "artifacts.max_bytes", "negative" },
		{ "{\"language\":\"python\",\"code\":\"\",\"artifacts\":{\"max_bytes\":\"1M\"}}", "artifacts.max_bytes", "a string" },
		{ "{\"language\":\"python\",\"code\":\"\",\"artifacts\":{\"copy\":true}}", "artifacts.copy", "an unknown key" },
		{ "{\"command\":[\"true\"],\"artifacts\":{\"inline\":true}}", "artifacts.inline", "a command" },
	};
	struct ward_reply r;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ward_service_execute(svc, key, bad[i].body, strlen(bad[i].body), false, &r);
		ok(refused(&r, 400, "invalid_request", bad[i].field), "%s: %s refused", bad[i].field,
		   bad[i].why);
	}
	/* 1025 names, and one value over 4 MiB */
	size_t cap = (5u << 20) + 64 * 1100, off = 0;
	char *b = malloc(cap);
	if (!b)
		return;
	off += (size_t)snprintf(b + off, cap - off, "{\"language\":\"python\",\"code\":\"\",\"globals\":{");
	for (int i = 0; i < 1025; i++)
		off += (size_t)snprintf(b + off, cap - off, "%s\"v%d\":%d", i ? "," : "", i, i);
	snprintf(b + off, cap - off, "}}");
	ward_service_execute(svc, key, b, strlen(b), false, &r);
	ok(refused(&r, 400, "invalid_request", "globals"), "globals: more than 1024 names refused");
	off = (size_t)snprintf(b, cap, "{\"language\":\"python\",\"code\":\"\",\"globals\":{\"a\":\"");
	memset(b + off, 'x', 4u << 20);
	off += 4u << 20;
	snprintf(b + off, cap - off, "\"}}");
	ward_service_execute(svc, key, b, strlen(b), false, &r);
	ok(refused(&r, 400, "invalid_request", "globals"), "globals: over 4 MiB of JSON refused");
	free(b);
}

static void uploads(struct ward_service *svc)
{
	struct ward_service_error e;
	memset(&e, 0, sizeof(e));
	/* max_file 10: 20 a tenant, 40 in all */
	ok(ward_service_upload_reserve(svc, "a", 15, &e) == 0, "a tenant holds up to 2 x max_file");
	ok(ward_service_upload_reserve(svc, "a", 10, &e) < 0 && e.status == 429 &&
	   strcmp(e.field, "uploads") == 0, "past it: 429, field uploads");
	ok(ward_service_upload_reserve(svc, "b", 20, &e) == 0, "another tenant has its own share");
	ok(ward_service_upload_reserve(svc, "c", 10, &e) < 0 && e.status == 503 &&
	   strcmp(e.code, "uploads_busy") == 0, "past 4 x max_file in all: 503 uploads_busy");
	ward_service_upload_release(svc, "a", 15);
	ok(ward_service_upload_reserve(svc, "c", 10, &e) == 0, "a release makes room");
	ward_service_upload_release(svc, "b", 20);
	ward_service_upload_release(svc, "c", 10);
}

/* The loop of a front end: the core's one fd, its timeout, dispatch. */
static void run_until_done(struct ward_service *svc, struct ward_execution *ex)
{
	for (int i = 0; i < 2000 && !ward_execution_done(ex); i++) {
		struct pollfd p = { .fd = ward_service_fd(svc), .events = POLLIN };
		int t = ward_service_timeout(svc);
		poll(&p, 1, t < 0 || t > 10 ? 10 : t);
		ward_service_dispatch(svc);
	}
}

static void one_execution(struct ward_service *svc, const struct ward_key_info *key)
{
	const char *b = "{\"command\": [\"echo\", \"hi\"]}";
	struct ward_reply r;
	ward_service_execute(svc, key, b, strlen(b), true, &r);
	if (!r.ex) {
		ward_reply_release(&r);
		skip("the core started no execution");
		return;
	}
	struct seen seen = { 0, 0 };
	struct ward_sink sink = { .ctx = &seen, .event = on_event };
	ward_execution_watch(r.ex, &sink);
	ok(ward_service_running(svc) <= 1, "one execution counted");
	run_until_done(svc, r.ex);
	char buf[65536];
	size_t n = 0;
	bool wait;
	ssize_t k;
	while (n < sizeof(buf) - 1 && (k = ward_execution_read(r.ex, buf + n, sizeof(buf) - 1 - n, &wait)) > 0)
		n += (size_t)k;
	buf[n] = '\0';
	json_t *v = ward_execution_result(r.ex);
	const char *status = json_string_value(json_object_get(v, "status"));
	if (status && strcmp(status, "setup_failed") == 0) {
		skip("sandboxes cannot be set up here (%s)",
		     json_string_value(json_object_get(json_object_get(v, "error"), "value")) ?: "?");
	} else {
		ok(ward_execution_done(r.ex) && status && strcmp(status, "ok") == 0 &&
		   strcmp(json_string_value(json_object_get(v, "stdout")), "hi\n") == 0,
		   "the execution ran from the core's fd alone: ok, stdout 'hi'");
		ok(strstr(buf, "{\"event\":\"start\"") == buf && strstr(buf, "\"text\":\"hi\\n\"") &&
		   strstr(buf, "{\"event\":\"verdict\""), "its NDJSON: start, stream, verdict");
		ok(seen.stream >= 1 && seen.verdict == 1, "the sink heard %u stream and %u verdict events",
		   seen.stream, seen.verdict);
		size_t mlen;
		char *m = ward_service_metrics(svc, &mlen);
		ok(m && strstr(m, "ward_executions_total{status=\"ok\"} 1\n"), "counted in the metrics");
		free(m);
	}
	ward_reply_release(&r);
	ok(ward_service_idle(svc), "nothing left running");
}

/* Credential rules: every refusal names the field and never the secret;
 * a key without the scope is refused before anything is parsed. */
static void credentials(struct ward_service *svc, struct ward_key_info *key)
{
	static const struct {
		const char *creds, *field, *why;
	} bad[] = {
		{ "{}", "credentials", "not an array" },
		{ "[{\"name\":\"Gh\",\"host\":\"a.test\",\"headers\":{\"X\":\"s3cret\"}}]",
		  "credentials", "a name with a capital" },
		{ "[{\"name\":\"gh\",\"host\":\"10.0.0.1\",\"headers\":{\"X\":\"s3cret\"}}]",
		  "credentials", "an address as host" },
		{ "[{\"name\":\"gh\",\"host\":\"a.test:443\",\"headers\":{\"X\":\"s3cret\"}}]",
		  "credentials", "a host with a port" },
		{ "[{\"name\":\"gh\",\"host\":\"a.test\",\"headers\":{\"X\":\"s3cret\\r\\nY: 1\"}}]",
		  "credentials", "a value with CR LF" },
		{ "[{\"name\":\"gh\",\"host\":\"a.test\",\"headers\":{\"X Y\":\"s3cret\"}}]",
		  "credentials", "a header name with a space" },
		{ "[{\"name\":\"gh\",\"host\":\"a.test\",\"headers\":{}}]", "credentials",
		  "no header" },
		{ "[{\"name\":\"gh\",\"host\":\"a.test\",\"path_prefix\":\"v1\","
		  "\"headers\":{\"X\":\"s3cret\"}}]", "credentials", "a prefix without '/'" },
		{ "[{\"name\":\"gh\",\"host\":\"a.test\",\"headers\":{\"X\":\"s3cret\"},"
		  "\"value\":1}]", "credentials", "an unknown field" },
	};
	char body[512];
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ward_reply r;
		snprintf(body, sizeof(body), "{\"command\":[\"true\"],\"credentials\":%s}",
			 bad[i].creds);
		ward_service_execute(svc, key, body, strlen(body), false, &r);
		bool secret = strstr(r.err.message, "s3cret") != NULL;
		ok(!secret && refused(&r, 400, "invalid_request", bad[i].field),
		   "credentials: %s is refused without showing the secret", bad[i].why);
	}
	struct ward_key_info k2 = *key;
	k2.scopes &= ~(unsigned)WARD_SCOPE_CREDENTIALS;
	struct ward_reply r;
	snprintf(body, sizeof(body), "{\"command\":[\"true\"],\"credentials\":[{\"name\":"
		 "\"gh\",\"host\":\"a.test\",\"headers\":{\"X\":\"s3cret\"}}]}");
	ward_service_execute(svc, &k2, body, strlen(body), false, &r);
	ok(refused(&r, 403, "forbidden", "credentials"), "credentials need the scope 'credentials'");
}

int main(void)
{
	char tmp[] = "/tmp/t-service.XXXXXX";
	if (!mkdtemp(tmp))
		return 1;
	struct ward_key_info key;
	memset(&key, 0, sizeof(key));
	snprintf(key.tenant, sizeof(key.tenant), "acme");
	snprintf(key.id, sizeof(key.id), "k1");
	key.scopes = WARD_SCOPE_ALL;
	struct ward_service *svc = service(0, tmp);
	ok(svc && ward_service_fd(svc) >= 0 && ward_service_timeout(svc) < 0,
	   "a core: one fd, no timer while idle");
	struct ward_reply r;
	ward_service_execute(svc, &key, "{}", 2, false, &r);
	ok(refused(&r, 429, "quota_exceeded", "max_executions"), "admission comes first: 429");
	ward_service_free(svc);
	svc = service(4, tmp);
	refusals(svc, &key);
	credentials(svc, &key);
	call_refusals(svc, &key);
	uploads(svc);
	one_execution(svc, &key);
	ward_service_free(svc);
	rmdir(tmp);
	return tap_done();
}
