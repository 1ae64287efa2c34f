/* tests/unit/t-mcp.c — the MCP conversation (include/ward/mcp.h) over a real
 * service core, with no transport: every JSON-RPC error code and the
 * parameter it names, version negotiation, the tools' schemas, the bounds
 * (message size, nesting, id length, requests in flight), a tool call that
 * runs, one whose notifications/cancelled kills its execution and gets no
 * response, and ward_mcp_free cancelling everything in flight. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/keys.h"
#include "tap.h"
#include "ward/kernel.h"
#include "ward/mcp.h"
#include "ward/service.h"

static json_t *sent; /* every message the conversation sent */

static void on_send(void *ctx, json_t *msg, json_t *related)
{
	(void)ctx;
	json_t *id = json_object_get(msg, "id");
	/* related is the id of the request answered */
	if (!json_is_null(id) && !json_equal(id, related))
		diag("send: related is not the answered id");
	json_array_append(sent, msg);
}

/* The last message sent since mark, or NULL. */
static json_t *last(size_t mark)
{
	size_t n = json_array_size(sent);
	return n > mark ? json_array_get(sent, n - 1) : NULL;
}

static void send_str(struct ward_mcp *m, const char *s)
{
	ward_mcp_receive(m, s, strlen(s));
}

/* Sends s and checks that exactly one error with code (and data.field)
 * came back. */
static bool error_is(struct ward_mcp *m, const char *s, int code, const char *field)
{
	size_t mark = json_array_size(sent);
	send_str(m, s);
	json_t *r = last(mark);
	json_t *e = json_object_get(r, "error");
	const char *f = json_string_value(json_object_get(json_object_get(e, "data"), "field"));
	bool okay = json_array_size(sent) == mark + 1 && json_integer_value(json_object_get(e, "code")) == code &&
		    json_is_string(json_object_get(e, "message")) &&
		    (!field || (f && strcmp(f, field) == 0));
	if (!okay) {
		char *d = r ? json_dumps(r, JSON_COMPACT) : NULL;
		diag("sent %.200s, got %s", s, d ? d : "nothing");
		free(d);
	}
	return okay;
}

static struct ward_service *service(void)
{
	struct ward_service_config c;
	ward_service_config_defaults(&c);
	c.no_keys = true;
	c.max_executions = c.max_per_tenant = 80;
	c.tenant_memory = 1ull << 50; /* 64 sandboxes of the default 512M */
	memset(c.pool, 0, sizeof(c.pool));
	struct ward_service *svc = NULL;
	if (ward_service_new(&c, &svc) < 0) {
		ward_service_free(svc);
		svc = NULL;
	}
	ward_service_config_release(&c);
	return svc;
}

static void spin(struct ward_service *svc, bool (*done)(void *), void *ctx)
{
	for (int i = 0; i < 3000 && !done(ctx); i++) {
		struct pollfd p = { .fd = ward_service_fd(svc), .events = POLLIN };
		int t = ward_service_timeout(svc);
		poll(&p, 1, t < 0 || t > 10 ? 10 : t);
		ward_service_dispatch(svc);
	}
}

static bool no_pending(void *ctx)
{
	return ward_mcp_pending(ctx) == 0;
}

static bool idle(void *ctx)
{
	return ward_service_running(ctx) == 0;
}

static const char init_msg[] = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":"
			       "{\"protocolVersion\":\"%s\",\"capabilities\":{}}}";

static void versions(struct ward_service *svc, const struct ward_key_info *key)
{
	static const char *const cases[][2] = {
		{ "2025-11-25", "2025-11-25" }, { "2025-06-18", "2025-06-18" },
		{ "2024-11-05", "2025-11-25" }, { "x", "2025-11-25" },
	};
	struct ward_mcp_peer peer = { .send = on_send };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ward_mcp *m;
		ward_mcp_new(svc, key, &peer, &m);
		char buf[256];
		snprintf(buf, sizeof(buf), init_msg, cases[i][0]);
		size_t mark = json_array_size(sent);
		ok(ward_mcp_protocol_version(m) == NULL, "%s: no version before initialize", cases[i][0]);
		send_str(m, buf);
		json_t *r = json_object_get(last(mark), "result");
		const char *v = json_string_value(json_object_get(r, "protocolVersion"));
		ok(v && strcmp(v, cases[i][1]) == 0 && strcmp(ward_mcp_protocol_version(m), cases[i][1]) == 0,
		   "asked %s, agreed %s", cases[i][0], cases[i][1]);
		ok(json_is_object(json_object_get(json_object_get(r, "capabilities"), "tools")) &&
		   json_is_string(json_object_get(json_object_get(r, "serverInfo"), "version")),
		   "%s: the tools capability and serverInfo", cases[i][0]);
		ward_mcp_free(m);
	}
}

static void errors(struct ward_mcp *m)
{
	ok(error_is(m, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", -32600, NULL),
	   "a request before initialize: -32600");
	size_t mark = json_array_size(sent);
	send_str(m, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}");
	ok(json_is_object(json_object_get(last(mark), "result")), "ping before initialize is answered");
	char buf[256];
	snprintf(buf, sizeof(buf), init_msg, "2025-06-18");
	send_str(m, buf);
	send_str(m, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	static const struct {
		const char *msg, *field, *why;
		int code;
	} cases[] = {
		{ "{nope", NULL, "bad JSON", -32700 },
		{ "{\"a\":1,\"a\":2}", NULL, "a duplicate key", -32700 },
		{ "{\"s\":\"\\u0000\"}", NULL, "a NUL escape", -32700 },
		{ "[]", NULL, "an array (batches are not MCP)", -32600 },
		{ "42", NULL, "a number", -32600 },
		{ "{\"id\":1,\"method\":\"ping\"}", "jsonrpc", "no jsonrpc", -32600 },
		{ "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", "jsonrpc", "jsonrpc 1.0", -32600 },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1}", "method", "no method", -32600 },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}", "method", "a number as method", -32600 },
		{ "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", "id", "a null id", -32600 },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", "id", "a fractional id", -32600 },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":[]}", "params",
		  "params an array", -32602 },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\"}}",
		  NULL, "a second initialize", -32600 },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"prompts/list\"}", "method", "an unknown method",
		  -32601 },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"cursor\":1}}",
		  "cursor", "a cursor that is not a string", -32602 },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}", "name",
		  "tools/call without name", -32602 },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"rm_rf\"}}",
		  "name", "an unknown tool", -32602 },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"run_code\",\"arguments\":\"x\"}}",
		  "arguments", "arguments a string", -32602 },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"run_python_code\"}}",
		  "python_code", "a required parameter missing", -32602 },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"run_python_code\",\"arguments\":{\"python_code\":\"1\",\"x\":1}}}",
		  "x", "an unknown parameter", -32602 },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"run_python_code\",\"arguments\":{\"python_code\":[]}}}",
		  "python_code", "a mistyped parameter", -32602 },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"run_python_code\",\"arguments\":{\"python_code\":\"1\",\"timeout\":-1}}}",
		  "timeout", "a negative timeout", -32602 },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"run_python_code\",\"arguments\":{\"python_code\":\"1\",\"global_variables\":[]}}}",
		  "global_variables", "global_variables an array", -32602 },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"run_code\",\"arguments\":{\"code\":\"1\",\"language\":\"ruby\"}}}",
		  "language", "a language outside the enum", -32602 },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"read_file\",\"arguments\":{\"path\":\"a\"}}}",
		  "session_id", "read_file without session_id", -32602 },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"write_file\",\"arguments\":{\"session_id\":\"s\",\"path\":\"a\",\"content\":\"\",\"mode\":\"0x644\"}}}",
		  "mode", "a mode that is not octal", -32602 },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"write_file\",\"arguments\":{\"session_id\":\"s\",\"path\":\"a\",\"content\":\"\",\"encoding\":\"hex\"}}}",
		  "encoding", "an unknown encoding", -32602 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ok(error_is(m, cases[i].msg, cases[i].code, cases[i].field), "%s: %d%s%s", cases[i].why,
		   cases[i].code, cases[i].field ? " naming " : "", cases[i].field ? cases[i].field : "");
	/* an id over 256 bytes */
	char big[600];
	snprintf(big, sizeof(big), "{\"jsonrpc\":\"2.0\",\"id\":\"%0300d\",\"method\":\"ping\"}", 0);
	ok(error_is(m, big, -32600, "id"), "an id over 256 bytes: -32600 naming id");
	/* notifications and responses are never answered */
	mark = json_array_size(sent);
	send_str(m, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/unknown\"}");
	send_str(m, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":7}}");
	send_str(m, "{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"params\":5}");
	send_str(m, "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}");
	ok(json_array_size(sent) == mark, "no answer to notifications and responses");
}

static void bounds(struct ward_mcp *m)
{
	size_t n = (size_t)WARD_MCP_MESSAGE_MAX + 1;
	char *huge = malloc(n);
	if (huge) {
		memset(huge, ' ', n);
		size_t mark = json_array_size(sent);
		ward_mcp_receive(m, huge, n);
		json_t *e = json_object_get(last(mark), "error");
		ok(json_integer_value(json_object_get(e, "code")) == -32600,
		   "a message over WARD_MCP_MESSAGE_MAX: -32600");
		free(huge);
	}
	char deep[4096];
	memset(deep, '[', 2000);
	memset(deep + 2000, ']', 2000);
	deep[4000] = '\0';
	ok(error_is(m, deep, -32700, NULL), "nesting 2000 deep: -32700 before jansson parses it");
}

static void schemas(struct ward_mcp *m)
{
	size_t mark = json_array_size(sent);
	send_str(m, "{\"jsonrpc\":\"2.0\",\"id\":\"t\",\"method\":\"tools/list\"}");
	json_t *tools = json_object_get(json_object_get(last(mark), "result"), "tools"), *t;
	size_t i;
	ok(json_array_size(tools) == 7, "seven tools");
	bool good = true;
	json_array_foreach(tools, i, t) {
		json_t *s = json_object_get(t, "inputSchema"), *p, *r;
		const char *name = json_string_value(json_object_get(t, "name"));
		const char *k;
		size_t j;
		good = good && name && json_is_string(json_object_get(t, "description")) &&
		       json_is_false(json_object_get(s, "additionalProperties"));
		json_object_foreach(json_object_get(s, "properties"), k, p)
			good = good && json_is_string(json_object_get(p, "type")) &&
			       json_is_string(json_object_get(p, "description"));
		json_array_foreach(json_object_get(s, "required"), j, r)
			good = good && json_object_get(json_object_get(s, "properties"), json_string_value(r));
		if (name && strcmp(name, "run_code") == 0) {
			char *e = json_dumps(json_object_get(json_object_get(json_object_get(s, "properties"),
									     "language"), "enum"), JSON_COMPACT);
			ok(e && strcmp(e, "[\"python\",\"bash\",\"node\"]") == 0, "run_code: the language enum");
			free(e);
		}
		if (name && strcmp(name, "run_python_code") == 0)
			ok(json_array_size(json_object_get(s, "required")) == 1 &&
			   strcmp(json_string_value(json_array_get(json_object_get(s, "required"), 0)) ?: "",
				  "python_code") == 0,
			   "run_python_code: python_code alone is required");
	}
	ok(good, "every schema is closed, every parameter typed and described, every required one defined");
}

/* A tool call that runs, one cancelled, the bound on calls in flight, and
 * the end of the conversation cancelling the rest. */
static void calls(struct ward_service *svc, const struct ward_key_info *key)
{
	struct ward_mcp_peer peer = { .send = on_send };
	struct ward_mcp *m;
	ward_mcp_new(svc, key, &peer, &m);
	char buf[256];
	snprintf(buf, sizeof(buf), init_msg, "2025-11-25");
	send_str(m, buf);
	size_t mark = json_array_size(sent);
	send_str(m, "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"tools/call\",\"params\":{\"name\":"
		    "\"run_code\",\"arguments\":{\"language\":\"bash\",\"code\":\"echo hi; exit 3\"}}}");
	if (ward_mcp_pending(m) != 1) {
		skip("the core started no execution (no sandboxes here)");
		ward_mcp_free(m);
		return;
	}
	spin(svc, no_pending, m);
	json_t *r = json_object_get(last(mark), "result");
	const char *text = json_string_value(json_object_get(json_array_get(json_object_get(r, "content"), 0), "text"));
	ok(text && strstr(text, "<stdout>\nhi\n</stdout>") && json_is_true(json_object_get(r, "isError")),
	   "a call's result: its stdout, isError for a failed run");
	/* cancelled: the execution ends, no response */
	mark = json_array_size(sent);
	send_str(m, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
		    "\"run_code\",\"arguments\":{\"language\":\"bash\",\"code\":\"sleep 60\"}}}");
	ok(ward_mcp_pending(m) == 1 && ward_service_running(svc) == 1, "a call in flight");
	send_str(m, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":5}}");
	ok(ward_mcp_pending(m) == 0, "cancelled: no longer pending");
	spin(svc, idle, svc);
	ok(ward_service_running(svc) == 0 && json_array_size(sent) == mark,
	   "cancelled: its execution ended and nothing was sent");
	/* WARD_MCP_PENDING_MAX in flight: one more is refused as a tool error */
	for (int i = 0; i < WARD_MCP_PENDING_MAX; i++) {
		snprintf(buf, sizeof(buf), "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":"
			 "{\"name\":\"run_code\",\"arguments\":{\"language\":\"bash\",\"code\":\"sleep 60\"}}}",
			 100 + i);
		send_str(m, buf);
	}
	if (!ok(ward_mcp_pending(m) == WARD_MCP_PENDING_MAX, "%d calls in flight", WARD_MCP_PENDING_MAX)) {
		char *d = json_dumps(last(0), JSON_COMPACT);
		diag("pending %zu; last: %.400s", ward_mcp_pending(m), d ? d : "");
		free(d);
	}
	mark = json_array_size(sent);
	send_str(m, "{\"jsonrpc\":\"2.0\",\"id\":\"over\",\"method\":\"tools/call\",\"params\":{\"name\":"
		    "\"run_code\",\"arguments\":{\"language\":\"bash\",\"code\":\"true\"}}}");
	r = last(mark);
	text = json_string_value(json_object_get(json_array_get(json_object_get(json_object_get(r, "result"),
										 "content"), 0), "text"));
	ok(text && strstr(text, "quota_exceeded") && strstr(text, "pending") &&
	   ward_mcp_pending(m) == WARD_MCP_PENDING_MAX,
	   "one more: an isError result naming the bound, and not started");
	/* a duplicate id in flight */
	ok(error_is(m, "{\"jsonrpc\":\"2.0\",\"id\":100,\"method\":\"tools/call\",\"params\":{\"name\":"
		       "\"run_code\",\"arguments\":{\"language\":\"bash\",\"code\":\"true\"}}}", -32600, "id"),
	   "an id still in flight: -32600 naming id");
	mark = json_array_size(sent);
	ward_mcp_free(m);
	spin(svc, idle, svc);
	ok(ward_service_running(svc) == 0 && json_array_size(sent) == mark,
	   "ward_mcp_free cancels every call in flight and sends nothing");
}

int main(void)
{
	sent = json_array();
	struct ward_service *svc = service();
	if (!svc) {
		skip("the service core did not start");
		return tap_done();
	}
	struct ward_key_info key = { .tenant = "t", .id = "k",
				     .scopes = WARD_SCOPE_EXECUTE | WARD_SCOPE_SESSIONS | WARD_SCOPE_FILES };
	struct ward_mcp_peer peer = { .send = on_send };
	struct ward_mcp *m;
	ok(ward_mcp_new(svc, &key, &peer, &m) == 0, "a conversation");
	errors(m);
	bounds(m);
	schemas(m);
	ward_mcp_free(m);
	versions(svc, &key);
	/* a key without the scope: a tool error naming it, never a call */
	struct ward_key_info narrow = key;
	narrow.scopes = WARD_SCOPE_EXECUTE;
	ward_mcp_new(svc, &narrow, &peer, &m);
	char buf[256];
	snprintf(buf, sizeof(buf), init_msg, "2025-11-25");
	send_str(m, buf);
	size_t mark = json_array_size(sent);
	send_str(m, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
		    "\"create_session\",\"arguments\":{}}}");
	json_t *r = json_object_get(last(mark), "result");
	const char *text = json_string_value(json_object_get(json_array_get(json_object_get(r, "content"), 0), "text"));
	ok(json_is_true(json_object_get(r, "isError")) && text && strstr(text, "'sessions' scope") &&
	   ward_service_sessions(svc) == 0, "a key without the sessions scope: isError naming it");
	ward_mcp_free(m);
	calls(svc, &key);
	ward_service_free(svc);
	json_decref(sent);
	return tap_done();
}
