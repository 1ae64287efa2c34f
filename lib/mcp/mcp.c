/* lib/mcp/mcp.c — one MCP conversation: JSON-RPC 2.0 in, responses out.
 *
 * The protocol part of include/ward/mcp.h: messages are checked (a JSON-RPC
 * 2.0 object, a bounded id, a method, object params), initialize
 * negotiates the protocol version, ping and tools/list are answered at
 * once, tools/call goes to tools.c, and notifications/cancelled cancels a
 * call in flight on the core and sends nothing (as the specification
 * says). It must never answer a request twice, never answer a
 * notification, never hold more than WARD_MCP_PENDING_MAX calls or parse
 * more than WARD_MCP_MESSAGE_MAX bytes, and never copy a client's string
 * without a bound.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "config.h"
#include "internal.h"

/* Newest first: an unsupported version is answered with the first. */
static const char *const versions[] = { "2025-11-25", "2025-06-18" };

int mcp_rpc_fail(struct mcp_rpc_error *e, int code, const char *field, const char *fmt, ...)
{
	va_list ap;
	e->code = code;
	ward_strlcpy(e->field, field ? field : "", sizeof(e->field));
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	return -1;
}

/* A client's string as a message may quote it: at most MCP_QUOTE_MAX
 * bytes, anything but printable ASCII as '?' (a cut never splits UTF-8). */
const char *mcp_quote(const char *s, char buf[MCP_QUOTE_MAX + 1])
{
	size_t i = 0;
	for (; s && s[i] && i < MCP_QUOTE_MAX; i++)
		buf[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	buf[i] = '\0';
	return buf;
}

static void send_msg(struct ward_mcp *m, json_t *msg, json_t *related)
{
	if (msg && m->peer.send)
		m->peer.send(m->peer.ctx, msg, related);
	json_decref(msg);
}

static void send_result(struct ward_mcp *m, json_t *id, json_t *result)
{
	if (!result) {
		json_t *err = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error",
					"code", MCP_INTERNAL_ERROR, "message", "out of memory");
		send_msg(m, err, id);
		return;
	}
	send_msg(m, json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result), id);
}

static void send_error(struct ward_mcp *m, json_t *id, const struct mcp_rpc_error *e)
{
	json_t *err = json_pack("{s:i, s:s}", "code", e->code, "message", e->message);
	if (err && e->field[0])
		json_object_set_new(err, "data", json_pack("{s:s}", "field", e->field));
	json_t *null = json_null();
	send_msg(m, err ? json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : null,
				    "error", err)
			: NULL,
		 id);
}

int ward_mcp_new(struct ward_service *svc, const struct ward_key_info *key,
		 const struct ward_mcp_peer *peer, struct ward_mcp **out)
{
	struct ward_mcp *m = calloc(1, sizeof(*m));
	*out = m;
	if (!m)
		return -1;
	m->svc = svc;
	m->key = *key;
	m->peer = *peer;
	return 0;
}

size_t ward_mcp_pending(const struct ward_mcp *m)
{
	return m->n_calls;
}

const char *ward_mcp_protocol_version(const struct ward_mcp *m)
{
	return m->version;
}

/* --- calls in flight --- */

static void call_unlink(struct mcp_call *c)
{
	struct ward_mcp *m = c->m;
	for (struct mcp_call **p = &m->calls; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			m->n_calls--;
			break;
		}
}

/* Lets go of the call's references (the core's event, if one is being
 * delivered, holds its own) and frees it. cancel: a call still running on
 * the core is cancelled there. */
static void call_free(struct mcp_call *c, bool cancel)
{
	if (c->ex) {
		ward_execution_watch(c->ex, NULL);
		if (cancel && !ward_execution_done(c->ex))
			ward_execution_cancel(c->ex);
		ward_execution_unref(c->ex);
	}
	if (c->answer) {
		ward_answer_watch(c->answer, NULL);
		ward_answer_unref(c->answer);
	}
	json_decref(c->id);
	free(c);
}

/* The call is over: its result goes out, once. Its references are let go
 * later (reap): this may run inside the core's event about them. */
static void call_done(struct mcp_call *c)
{
	struct ward_mcp *m = c->m;
	call_unlink(c);
	if (c->ex)
		ward_execution_watch(c->ex, NULL);
	if (c->answer)
		ward_answer_watch(c->answer, NULL);
	c->next = m->done;
	m->done = c;
	send_result(m, c->id, mcp_call_result(c));
}

static void reap(struct ward_mcp *m)
{
	while (m->done) {
		struct mcp_call *c = m->done;
		m->done = c->next;
		call_free(c, false);
	}
}

static void call_event(void *ctx, const struct ward_event *ev)
{
	struct mcp_call *c = ctx;
	if ((ev->kind == WARD_EVENT_VERDICT && c->ex && ward_execution_done(c->ex)) ||
	    (ev->kind == WARD_EVENT_ANSWER && c->answer && ward_answer_done(c->answer)))
		call_done(c);
}

static struct mcp_call *call_find(struct ward_mcp *m, json_t *id)
{
	for (struct mcp_call *c = m->calls; c; c = c->next)
		if (json_equal(c->id, id))
			return c;
	return NULL;
}

static void tools_call(struct ward_mcp *m, json_t *id, json_t *params)
{
	struct mcp_rpc_error e;
	if (call_find(m, id)) {
		mcp_rpc_fail(&e, MCP_INVALID_REQUEST, "id",
			     "invalid request: id: a request with this id is still in flight");
		return send_error(m, id, &e);
	}
	struct mcp_call *c = calloc(1, sizeof(*c));
	if (!c || !(c->id = json_deep_copy(id))) {
		free(c);
		mcp_rpc_fail(&e, MCP_INTERNAL_ERROR, NULL, "out of memory");
		return send_error(m, id, &e);
	}
	c->m = m;
	if (m->n_calls >= WARD_MCP_PENDING_MAX) {
		struct ward_service_error se;
		ward_service_fail(&se, 429, "quota_exceeded", "pending",
				  "%d tool calls are in flight in this conversation, the most it "
				  "takes; retry when one has finished", WARD_MCP_PENDING_MAX);
		send_result(m, id, mcp_tool_error(c, &se));
		return call_free(c, false);
	}
	json_t *result = NULL;
	if (mcp_tool_call(m, c, params, &result, &e) < 0) {
		send_error(m, id, &e);
		return call_free(c, false);
	}
	if (!c->ex && !c->answer) {
		send_result(m, id, result);
		return call_free(c, false);
	}
	c->next = m->calls;
	m->calls = c;
	m->n_calls++;
	struct ward_sink sink = { .ctx = c, .event = call_event };
	/* done already (a sandbox that could not be set up is a verdict too) */
	if (c->ex) {
		ward_execution_watch(c->ex, &sink);
		if (ward_execution_done(c->ex))
			call_done(c);
	} else {
		ward_answer_watch(c->answer, &sink);
		if (ward_answer_done(c->answer))
			call_done(c);
	}
}

/* --- methods --- */

static void initialize(struct ward_mcp *m, json_t *id, json_t *params)
{
	struct mcp_rpc_error e;
	json_t *pv = json_object_get(params, "protocolVersion");
	if (m->version) {
		mcp_rpc_fail(&e, MCP_INVALID_REQUEST, NULL,
			     "invalid request: initialize: the conversation is initialized already");
		return send_error(m, id, &e);
	}
	if (!json_is_string(pv)) {
		mcp_rpc_fail(&e, MCP_INVALID_PARAMS, "protocolVersion",
			     "invalid params: protocolVersion: %s", pv ? "expected a string"
								       : "required");
		return send_error(m, id, &e);
	}
	json_t *caps = json_object_get(params, "capabilities");
	if (caps && !json_is_object(caps)) {
		mcp_rpc_fail(&e, MCP_INVALID_PARAMS, "capabilities",
			     "invalid params: capabilities: expected an object");
		return send_error(m, id, &e);
	}
	/* the client's version when ward speaks it, else ward's newest: the
	 * client then decides whether it can go on */
	m->version = versions[0];
	for (size_t i = 0; i < ARRAY_SIZE(versions); i++)
		if (strcmp(json_string_value(pv), versions[i]) == 0)
			m->version = versions[i];
	json_t *r = json_pack(
		"{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", m->version,
		"capabilities", "tools", "listChanged", 0, "serverInfo", "name", "ward", "title",
		"ward sandbox", "version", WARD_VERSION_STRING, "instructions",
		"Runs code in disposable, kernel-isolated sandboxes (python, bash, node). "
		"Failures come back with isError and a hint; create_session keeps variables "
		"and files between calls.");
	send_result(m, id, r);
}

/* A request with a valid id and method: answered now, or (tools/call)
 * when the core has done it. */
static void request(struct ward_mcp *m, json_t *id, const char *method, json_t *params)
{
	struct mcp_rpc_error e;
	char q[MCP_QUOTE_MAX + 1];
	if (strcmp(method, "initialize") == 0)
		return initialize(m, id, params);
	if (strcmp(method, "ping") == 0) /* at any time, also before initialize */
		return send_result(m, id, json_object());
	if (!m->version) {
		mcp_rpc_fail(&e, MCP_INVALID_REQUEST, NULL,
			     "invalid request: '%s' before initialize (send initialize first)",
			     mcp_quote(method, q));
		return send_error(m, id, &e);
	}
	if (strcmp(method, "tools/list") == 0) {
		json_t *cursor = json_object_get(params, "cursor");
		if (cursor && !json_is_string(cursor)) {
			mcp_rpc_fail(&e, MCP_INVALID_PARAMS, "cursor",
				     "invalid params: cursor: expected a string");
			return send_error(m, id, &e);
		}
		return send_result(m, id, mcp_tools_list()); /* one page: no nextCursor */
	}
	if (strcmp(method, "tools/call") == 0)
		return tools_call(m, id, params);
	mcp_rpc_fail(&e, MCP_METHOD_NOT_FOUND, "method",
		     "method not found: '%s' (ward serves initialize, ping, tools/list and "
		     "tools/call)", mcp_quote(method, q));
	send_error(m, id, &e);
}

/* notifications/cancelled: the call's execution is cancelled on the core
 * and no response is sent (the specification's rule); a request that is
 * unknown or answered already is ignored. */
static void cancelled(struct ward_mcp *m, json_t *params)
{
	json_t *rid = json_object_get(params, "requestId");
	struct mcp_call *c = rid ? call_find(m, rid) : NULL;
	if (!c)
		return;
	call_unlink(c);
	call_free(c, true);
}

static void notification(struct ward_mcp *m, const char *method, json_t *params)
{
	if (strcmp(method, "notifications/initialized") == 0)
		m->ready = m->version != NULL;
	else if (strcmp(method, "notifications/cancelled") == 0)
		cancelled(m, params);
	/* others (progress, roots/list_changed, ...) need nothing from ward */
}

/* The id of a request: a string of at most MCP_ID_MAX bytes or an integer
 * (MCP allows no null). */
static bool id_ok(json_t *id)
{
	return json_is_integer(id) || (json_is_string(id) && json_string_length(id) <= MCP_ID_MAX);
}

void ward_mcp_handle(struct ward_mcp *m, json_t *msg)
{
	struct mcp_rpc_error e;
	reap(m);
	json_t *id = json_object_get(msg, "id");
	json_t *method = json_object_get(msg, "method");
	json_t *params = json_object_get(msg, "params");
	json_t *good_id = id && id_ok(id) ? id : NULL;
	if (!json_is_object(msg)) {
		mcp_rpc_fail(&e, MCP_INVALID_REQUEST, NULL, "invalid request: expected a JSON-RPC 2.0 "
			     "object%s", json_is_array(msg) ? " (batches are not part of MCP)" : "");
		return send_error(m, NULL, &e);
	}
	if (!method && (json_object_get(msg, "result") || json_object_get(msg, "error")))
		return; /* a response: ward sends no requests, nothing waits for one */
	const char *v = json_string_value(json_object_get(msg, "jsonrpc"));
	if (!v || strcmp(v, "2.0") != 0) {
		mcp_rpc_fail(&e, MCP_INVALID_REQUEST, "jsonrpc",
			     "invalid request: jsonrpc: expected \"2.0\"");
		return send_error(m, good_id, &e);
	}
	if (id && !good_id) {
		mcp_rpc_fail(&e, MCP_INVALID_REQUEST, "id", "invalid request: id: expected a string "
			     "of at most %d bytes or an integer", MCP_ID_MAX);
		return send_error(m, NULL, &e);
	}
	if (!json_is_string(method)) {
		mcp_rpc_fail(&e, MCP_INVALID_REQUEST, "method", "invalid request: method: %s",
			     method ? "expected a string" : "required");
		return send_error(m, good_id, &e);
	}
	if (params && !json_is_object(params)) {
		if (!id)
			return; /* a notification is never answered */
		mcp_rpc_fail(&e, MCP_INVALID_PARAMS, "params", "invalid params: params: expected "
			     "an object");
		return send_error(m, id, &e);
	}
	if (!id)
		return notification(m, json_string_value(method), params);
	request(m, id, json_string_value(method), params);
}

void ward_mcp_receive(struct ward_mcp *m, const char *buf, size_t len)
{
	struct mcp_rpc_error e;
	reap(m);
	if (len > WARD_MCP_MESSAGE_MAX) {
		mcp_rpc_fail(&e, MCP_INVALID_REQUEST, NULL, "invalid request: the message is over "
			     "the limit of %d bytes", WARD_MCP_MESSAGE_MAX);
		return send_error(m, NULL, &e);
	}
	/* jansson recurses: the depth is bounded before it parses */
	if (ward_json_too_deep(buf, len, MCP_DEPTH_MAX, NULL)) {
		mcp_rpc_fail(&e, MCP_PARSE_ERROR, NULL, "parse error: JSON nested deeper than %d "
			     "levels", MCP_DEPTH_MAX);
		return send_error(m, NULL, &e);
	}
	json_error_t je;
	json_t *msg = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
	if (!msg) {
		char q[MCP_QUOTE_MAX + 1];
		mcp_rpc_fail(&e, MCP_PARSE_ERROR, NULL, "parse error: line %d, column %d: %s",
			     je.line, je.column, json_error_code(&je) == json_error_null_character
							 ? "a \\u0000 escape is not allowed"
							 : mcp_quote(je.text, q));
		return send_error(m, NULL, &e);
	}
	ward_mcp_handle(m, msg);
	json_decref(msg);
}

void ward_mcp_free(struct ward_mcp *m)
{
	if (!m)
		return;
	m->peer.send = NULL;
	reap(m);
	while (m->calls) {
		struct mcp_call *c = m->calls;
		m->calls = c->next;
		call_free(c, true);
	}
	free(m);
}
