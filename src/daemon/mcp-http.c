/* src/daemon/mcp-http.c — `/mcp`: the Model Context Protocol's streamable
 * HTTP transport (2025-11-25, 2025-06-18) over the MCP core (ward/mcp.h).
 *
 * This file is a transport and nothing else: it authenticates nothing
 * (http.c did, with the route's `execute` scope), decides no tool's rule
 * (the core does, per tool and per scope), and only carries JSON-RPC
 * messages between one HTTP request and one MCP conversation:
 *   - POST carries one message. A request is answered on its own response
 *     (application/json) when the core sends the response with its id; the
 *     connection is suspended meanwhile, and a client that hangs up cancels
 *     the request (notifications/cancelled to the core, which kills its
 *     execution). A notification or a response gets 202 with no body.
 *   - initialize opens a conversation: an unguessable Mcp-Session-Id (32
 *     random bytes, hex) bound to the key that created it; any other key,
 *     an unknown or an expired id gets 404, exactly alike.
 *   - DELETE ends it (its requests in flight are cancelled); GET has no
 *     route (405: this server offers no standalone stream).
 * Bounds, all counted here: conversations per tenant and in all
 * (mcp-max-sessions-per-tenant, mcp-max-sessions), an idle expiry
 * (mcp-session-idle), requests waiting per conversation
 * (WARD_MCP_PENDING_MAX), the body (max-body, by http.c). A response is one
 * message held until sent, its size bounded by the core's output caps; a
 * client that does not read it is closed by the connection's idle timeout.
 * Nothing here blocks or waits on a client.
 */
#include <microhttpd.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>

#include "base/util.h"
#include "http.h"
#include "ward/mcp.h"

enum { SID_BYTES = 32, SID_LEN = 2 * SID_BYTES };

struct mcp_call;

/* One MCP conversation (Mcp-Session-Id). */
struct mcp_sess {
	struct mcp_sess *prev, *next;
	struct srv *s;
	char id[SID_LEN + 1];
	char key_id[sizeof(((struct ward_key_info *)0)->id)];
	char tenant[sizeof(((struct ward_key_info *)0)->tenant)];
	struct ward_mcp *m;
	uint64_t last_ns;                /* the last request or answer */
	struct mcp_call *calls;          /* requests waiting for their answer */
	size_t n_calls;                  /* at most WARD_MCP_PENDING_MAX */
};

/* One POSTed request waiting for its answer; owned by its HTTP request
 * (rq->mcp), listed in its conversation until answered or given up. */
struct mcp_call {
	struct mcp_call *prev, *next;
	struct mcp_sess *sess;           /* NULL once answered or detached */
	struct req *rq;
	json_t *id;                      /* the JSON-RPC id */
	json_t *answer;                  /* the response, once sent */
	bool ended;                      /* the conversation ended first: 404 */
	bool cancelled;                  /* the client cancelled it: 202, no answer */
	bool gone;                       /* the client hung up */
	bool suspended, cw_on;
	char new_sid[SID_LEN + 1];       /* initialize: the id to hand out */
	struct watch cw;
};

static struct mcp_sess *sessions;
static size_t n_sessions;

/* --- answers --- */

static int respond(struct req *rq, unsigned status, json_t *body, const char *sid)
{
	size_t n = 0;
	char *txt = body ? ward_json_dump(body, JSON_COMPACT, 1, &n) : NULL;
	if (body && !txt)
		return MHD_NO;
	if (txt)
		txt[n++] = '\n';
	struct MHD_Response *r = txt ? MHD_create_response_from_buffer(n, txt, MHD_RESPMEM_MUST_FREE)
				     : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	if (!r) {
		free(txt);
		return MHD_NO;
	}
	if (txt)
		MHD_add_response_header(r, "Content-Type", "application/json");
	if (sid)
		MHD_add_response_header(r, "Mcp-Session-Id", sid);
	rq->answered = true;
	http_note_status(status);
	enum MHD_Result ok = MHD_queue_response(rq->c, status, r);
	MHD_destroy_response(r);
	return ok;
}

/* A JSON-RPC error as the HTTP answer (the spec's codes: -32700 parse
 * error, -32600 invalid request), with the request's id or null. */
static int rpc_error(struct req *rq, unsigned status, int code, const char *msg, json_t *id)
{
	json_t *b = json_pack("{s:s, s:O?, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error",
			      "code", code, "message", msg);
	if (!b)
		return MHD_NO;
	if (!id)
		json_object_set_new(b, "id", json_null());
	int r = respond(rq, status, b, NULL);
	json_decref(b);
	return r;
}

/* --- conversations --- */

static void call_watch(struct mcp_call *k, bool on)
{
	if (on == k->cw_on)
		return;
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(k->rq->c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci)
		return;
	k->cw = (struct watch){ .kind = WATCH_MCP, .ptr = k };
	struct epoll_event ev = { .events = EPOLLRDHUP, .data.ptr = &k->cw };
	if (epoll_ctl(k->rq->s->epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, ci->connect_fd, &ev) ==
		    0 || !on)
		k->cw_on = on;
}

static void call_wake(struct mcp_call *k)
{
	if (!k->suspended)
		return;
	call_watch(k, false);
	k->suspended = false;
	MHD_resume_connection(k->rq->c);
}

static void call_detach(struct mcp_call *k)
{
	struct mcp_sess *ss = k->sess;
	if (!ss)
		return;
	*(k->prev ? &k->prev->next : &ss->calls) = k->next;
	if (k->next)
		k->next->prev = k->prev;
	k->prev = k->next = NULL;
	k->sess = NULL;
	ss->n_calls--;
	ss->last_ns = ward_now_ns();
}

/* The client no longer waits for k: its request is cancelled on the core
 * as a notifications/cancelled would (the execution it runs is killed). */
static void call_abandon(struct mcp_call *k)
{
	struct mcp_sess *ss = k->sess;
	if (!ss)
		return;
	call_detach(k);
	json_t *n = json_pack("{s:s, s:s, s:{s:O, s:s}}", "jsonrpc", "2.0", "method",
			      "notifications/cancelled", "params", "requestId", k->id, "reason",
			      "the client closed its connection");
	if (n)
		ward_mcp_handle(ss->m, n);
	json_decref(n);
}

/* The core's outgoing messages: a response goes to the request that waits
 * for its id; anything else (a notification: no stream to carry it) and a
 * response nobody waits for any more are dropped. */
static void sess_send(void *ctx, json_t *msg, json_t *related)
{
	struct mcp_sess *ss = ctx;
	if (!related || !json_is_object(msg) ||
	    (!json_object_get(msg, "result") && !json_object_get(msg, "error")))
		return;
	for (struct mcp_call *k = ss->calls; k; k = k->next) {
		if (!json_equal(k->id, related))
			continue;
		k->answer = json_incref(msg);
		call_detach(k);
		call_wake(k);
		return;
	}
}

/* Ends a conversation: its requests still waiting are answered 404 (their
 * executions are cancelled by ward_mcp_free). */
static void sess_free(struct mcp_sess *ss)
{
	*(ss->prev ? &ss->prev->next : &sessions) = ss->next;
	if (ss->next)
		ss->next->prev = ss->prev;
	n_sessions--;
	while (ss->calls) {
		struct mcp_call *k = ss->calls;
		call_detach(k);
		k->ended = true;
		call_wake(k);
	}
	ward_mcp_free(ss->m);
	sodium_memzero(ss->id, sizeof(ss->id));
	free(ss);
}

/* The conversation sid names, if key made it; anything else is NULL, alike. */
static struct mcp_sess *sess_find(const char *sid, const struct ward_key_info *key)
{
	if (!sid || strlen(sid) != SID_LEN)
		return NULL;
	for (struct mcp_sess *ss = sessions; ss; ss = ss->next)
		if (sodium_memcmp(ss->id, sid, SID_LEN) == 0)
			return strcmp(ss->key_id, key->id) == 0 ? ss : NULL;
	return NULL;
}

/* A new conversation for rq's key within the bounds, or NULL with the
 * refusal answered (429 the tenant's, 503 the daemon's, 500 memory). */
static struct mcp_sess *sess_new(struct req *rq, int *ret)
{
	const struct srv_config *cfg = &rq->s->cfg;
	size_t mine = 0;
	for (struct mcp_sess *ss = sessions; ss; ss = ss->next)
		mine += strcmp(ss->tenant, rq->key.tenant) == 0;
	char msg[160];
	if (mine >= cfg->mcp_max_sessions_per_tenant) {
		snprintf(msg, sizeof(msg), "this tenant has %zu MCP sessions open, its limit "
			 "(mcp-max-sessions-per-tenant); end one with DELETE /mcp", mine);
		*ret = answer_error(rq, 429, "quota_exceeded", "mcp-max-sessions-per-tenant", msg);
		return NULL;
	}
	if (n_sessions >= cfg->mcp_max_sessions) {
		snprintf(msg, sizeof(msg), "the daemon has %zu MCP sessions open, its limit "
			 "(mcp-max-sessions)", n_sessions);
		*ret = answer_error(rq, 503, "busy", "mcp-max-sessions", msg);
		return NULL;
	}
	struct mcp_sess *ss = calloc(1, sizeof(*ss));
	struct ward_mcp_peer peer = { .ctx = ss, .send = sess_send };
	if (!ss || ward_mcp_new(rq->s->svc, &rq->key, &peer, &ss->m) < 0) {
		free(ss);
		*ret = answer_error(rq, 500, "internal", NULL, "out of memory");
		return NULL;
	}
	unsigned char raw[SID_BYTES];
	randombytes_buf(raw, sizeof(raw));
	sodium_bin2hex(ss->id, sizeof(ss->id), raw, sizeof(raw));
	ward_strlcpy(ss->key_id, rq->key.id, sizeof(ss->key_id));
	ward_strlcpy(ss->tenant, rq->key.tenant, sizeof(ss->tenant));
	ss->s = rq->s;
	ss->last_ns = ward_now_ns();
	ss->next = sessions;
	if (sessions)
		sessions->prev = ss;
	sessions = ss;
	n_sessions++;
	return ss;
}

/* --- the checks every method makes --- */

static const char *header(struct req *rq, const char *name)
{
	return MHD_lookup_connection_value(rq->c, MHD_HEADER_KIND, name);
}

/* A browser's request (it has an Origin) must come from an origin the
 * operator listed (mcp-allowed-origins, comma-separated, exact): a page
 * whose name was rebound to this address cannot drive the endpoint. */
static bool origin_ok(struct req *rq)
{
	const char *o = header(rq, "Origin"), *list = rq->s->cfg.mcp_allowed_origins;
	if (!o)
		return true;
	size_t n = strlen(o);
	for (const char *p = list; p && *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == n && n && memcmp(p, o, n) == 0)
			return true;
		p = e ? e + 1 : p + len;
	}
	return false;
}

/* MCP-Protocol-Version, when sent, is one this server speaks and the one
 * the conversation agreed on (ss NULL: before there is one). */
static bool version_ok(struct req *rq, struct mcp_sess *ss)
{
	const char *v = header(rq, "MCP-Protocol-Version");
	if (!v)
		return true;
	if (strcmp(v, "2025-11-25") != 0 && strcmp(v, "2025-06-18") != 0)
		return false;
	const char *agreed = ss ? ward_mcp_protocol_version(ss->m) : NULL;
	return !agreed || strcmp(agreed, v) == 0;
}

/* --- POST --- */

static bool id_ok(const json_t *id)
{
	return json_is_string(id) || json_is_integer(id);
}

/* Waits for k's answer: now if the core gave it, else suspended. */
static int call_wait(struct mcp_call *k)
{
	if (k->answer || k->ended)
		return srv_mcp_next(k->rq);
	k->suspended = true;
	http_note_status(200);
	MHD_suspend_connection(k->rq->c);
	call_watch(k, true);
	return MHD_YES;
}

/* A request (it has an id): registered before the core sees it, since the
 * core may answer from inside ward_mcp_handle. */
static int post_request(struct req *rq, struct mcp_sess *ss, json_t *msg, bool init)
{
	json_t *id = json_object_get(msg, "id");
	for (struct mcp_call *k = ss->calls; k; k = k->next)
		if (json_equal(k->id, id))
			return rpc_error(rq, 400, -32600, "a request with this id is in flight", id);
	if (ss->n_calls >= WARD_MCP_PENDING_MAX)
		return rpc_error(rq, 429, -32000, "too many requests in flight in this session",
				 id);
	struct mcp_call *k = calloc(1, sizeof(*k));
	if (!k)
		return MHD_NO;
	k->rq = rq;
	k->id = json_incref(id);
	k->sess = ss;
	k->next = ss->calls;
	if (ss->calls)
		ss->calls->prev = k;
	ss->calls = k;
	ss->n_calls++;
	rq->mcp = k;
	size_t before = ward_mcp_pending(ss->m);
	ward_mcp_handle(ss->m, msg);
	if (init) {
		if (k->answer && json_object_get(k->answer, "result"))
			ward_strlcpy(k->new_sid, ss->id, sizeof(k->new_sid));
		else
			sess_free(ss); /* no conversation without a successful initialize */
	} else if (!k->answer && k->sess && ward_mcp_pending(ss->m) <= before) {
		/* neither answered nor taken: the core answered it under another id */
		call_detach(k);
		k->answer = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id,
				      "error", "code", -32600, "message", "invalid request");
	}
	return call_wait(k);
}

/* A notification or a response: 202. A request the client cancels gets
 * no response from the core (the specification's rule), so the POST that
 * waits for it is closed with 202 and no body. */
static int post_other(struct req *rq, struct mcp_sess *ss, json_t *msg)
{
	const char *method = json_string_value(json_object_get(msg, "method"));
	json_t *rid = json_object_get(json_object_get(msg, "params"), "requestId");
	struct mcp_call *k = NULL;
	if (method && strcmp(method, "notifications/cancelled") == 0 && rid)
		for (k = ss->calls; k && !json_equal(k->id, rid); k = k->next)
			;
	ward_mcp_handle(ss->m, msg);
	for (struct mcp_call *c = ss->calls; k && c; c = c->next)
		if (c == k) { /* still waiting: not answered while cancelled */
			call_detach(k);
			k->cancelled = true;
			call_wake(k);
			break;
		}
	return respond(rq, 202, NULL, NULL);
}

static int mcp_post(struct req *rq)
{
	json_error_t jerr;
	json_t *msg = json_loadb(rq->body ? rq->body : "", rq->len, JSON_REJECT_DUPLICATES, &jerr);
	if (!msg)
		return rpc_error(rq, 400, -32700, "parse error: the body is not JSON", NULL);
	int r = MHD_NO;
	json_t *id = json_object_get(msg, "id"), *method = json_object_get(msg, "method");
	bool request = json_is_string(method) && id;
	bool response = !method && id && (json_object_get(msg, "result") || json_object_get(msg, "error"));
	bool notification = json_is_string(method) && !id;
	if (!json_is_object(msg)) {
		r = rpc_error(rq, 400, -32600, json_is_array(msg) ? "invalid request: batches are "
			      "not supported (one JSON-RPC message per POST)" : "invalid request: "
			      "expected a JSON-RPC message (an object)", NULL);
	} else if ((request && !id_ok(id)) || (!request && !response && !notification)) {
		r = rpc_error(rq, 400, -32600, "invalid request: expected a JSON-RPC request, "
			      "notification or response", id_ok(id) ? id : NULL);
	} else if (request && strcmp(json_string_value(method), "initialize") == 0) {
		struct mcp_sess *ss = version_ok(rq, NULL) ? sess_new(rq, &r) : NULL;
		if (!version_ok(rq, NULL))
			r = rpc_error(rq, 400, -32600, "unsupported MCP-Protocol-Version "
				      "(2025-11-25, 2025-06-18)", id);
		else if (ss)
			r = post_request(rq, ss, msg, true);
	} else {
		const char *sid = header(rq, "Mcp-Session-Id");
		struct mcp_sess *ss = sess_find(sid, &rq->key);
		if (!sid)
			r = rpc_error(rq, 400, -32600, "an Mcp-Session-Id header is required "
				      "(initialize first)", request ? id : NULL);
		else if (!ss)
			r = rpc_error(rq, 404, -32001, "no such MCP session (ended or expired: "
				      "initialize a new one)", request ? id : NULL);
		else if (!version_ok(rq, ss))
			r = rpc_error(rq, 400, -32600, "unsupported MCP-Protocol-Version: expected "
				      "the version agreed at initialize", request ? id : NULL);
		else if (request)
			ss->last_ns = ward_now_ns(), r = post_request(rq, ss, msg, false);
		else
			ss->last_ns = ward_now_ns(), r = post_other(rq, ss, msg);
	}
	json_decref(msg);
	return r;
}

/* --- DELETE --- */

static int mcp_delete(struct req *rq)
{
	const char *sid = header(rq, "Mcp-Session-Id");
	struct mcp_sess *ss = sess_find(sid, &rq->key);
	if (!sid)
		return answer_error(rq, 400, "invalid_request", "Mcp-Session-Id",
				    "an Mcp-Session-Id header names the session to end");
	if (!ss)
		return answer_error(rq, 404, "not_found", "Mcp-Session-Id",
				    "no such MCP session (ended or expired)");
	sess_free(ss);
	return respond(rq, 204, NULL, NULL);
}

/* --- the front end's hooks (http.h) --- */

int srv_mcp_handle(struct req *rq)
{
	if (!origin_ok(rq))
		return answer_error(rq, 403, "forbidden", "Origin",
				    "this Origin may not use /mcp (mcp-allowed-origins)");
	if (strcmp(rq->m.route->method, "DELETE") == 0)
		return mcp_delete(rq);
	return mcp_post(rq);
}

int srv_mcp_next(struct req *rq)
{
	struct mcp_call *k = rq->mcp;
	if (k->gone)
		return MHD_NO;
	if (k->answer)
		return respond(rq, 200, k->answer, k->new_sid[0] ? k->new_sid : NULL);
	if (k->ended)
		return rpc_error(rq, 404, -32001, "the MCP session ended", k->id);
	if (k->cancelled)
		return respond(rq, 202, NULL, NULL);
	if (!k->suspended) { /* woken early: wait again */
		k->suspended = true;
		MHD_suspend_connection(rq->c);
		call_watch(k, true);
	}
	return MHD_YES;
}

void srv_mcp_req_end(struct req *rq)
{
	struct mcp_call *k = rq->mcp;
	rq->mcp = NULL;
	call_watch(k, false);
	call_abandon(k);
	json_decref(k->id);
	json_decref(k->answer);
	free(k);
}

void srv_mcp_client_gone(struct srv *s, void *ptr)
{
	struct mcp_call *k = ptr;
	(void)s;
	call_watch(k, false);
	k->gone = true;
	call_abandon(k);
	if (k->suspended) { /* libmicrohttpd then sees the hang-up and ends it */
		k->suspended = false;
		MHD_resume_connection(k->rq->c);
	}
}

/* Conversations idle past mcp-session-idle, with nothing in flight, end
 * (audited: the client's next request is 404 and it must start again). */
void srv_mcp_tick(struct srv *s)
{
	uint64_t now = ward_now_ns(), idle = s->cfg.mcp_session_idle_ms * 1000000ull;
	for (struct mcp_sess *ss = sessions, *nx; ss; ss = nx) {
		nx = ss->next;
		if (ss->n_calls || ward_mcp_pending(ss->m) || now - ss->last_ns < idle)
			continue;
		json_t *f = json_pack("{s:s, s:s}", "key_id", ss->key_id, "tenant", ss->tenant);
		ward_service_audit(s->svc, "mcp.session.expired", f);
		json_decref(f);
		sess_free(ss);
	}
}

int srv_mcp_timeout(struct srv *s)
{
	uint64_t now = ward_now_ns(), idle = s->cfg.mcp_session_idle_ms * 1000000ull, best = 0;
	for (struct mcp_sess *ss = sessions; ss; ss = ss->next) {
		if (ss->n_calls || ward_mcp_pending(ss->m))
			continue; /* busy: its answer or end wakes the loop */
		uint64_t end = ss->last_ns + idle;
		best = !best || end < best ? end : best;
	}
	if (!best)
		return -1;
	return best <= now ? 0 : (int)((best - now) / 1000000 > 60000 ? 60000 : (best - now) / 1000000 + 1);
}

void srv_mcp_close_all(void)
{
	while (sessions)
		sess_free(sessions);
}
