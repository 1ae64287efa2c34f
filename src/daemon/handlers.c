/* src/daemon/handlers.c — the route table's handlers, and the adapter
 * between the service core and libmicrohttpd.
 *
 * A handler turns the matched row, its parameters, the body and a few
 * headers (Accept, the files API's path and mode) into one call of the
 * core (include/ward/service.h) and turns its struct ward_reply into an
 * answer: an error body, a JSON body, an execution to wait for or to
 * stream, or an answer that comes later. What comes later comes as an
 * event to the request's waiter, which resumes the suspended connection;
 * a client that hangs up while it waits for an execution cancels it. No
 * rule is decided here: quotas, paths, verdicts are the core's.
 */
#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>

#include "base/json-stream.h"
#include "base/util.h"
#include "http.h"

enum { MAX_DEPTH = 32 };

/* What a suspended request waits for, and the sink the core tells. It
 * outlives the request while a streaming response still reads from it. */
struct waiter {
	int refs;
	struct srv *s;
	struct MHD_Connection *c;      /* NULL once the request is over */
	struct ward_execution *ex;     /* a reference, or NULL */
	struct ward_answer *answer;    /* a reference, or NULL */
	bool suspended, cw_on;
	struct watch cw;               /* the client's hang-up, while it waits */
};

static void client_watch(struct waiter *w, bool on)
{
	if (on == w->cw_on || !w->c)
		return;
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(w->c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci)
		return;
	w->cw = (struct watch){ .kind = WATCH_CLIENT, .ptr = w };
	struct epoll_event ev = { .events = EPOLLRDHUP, .data.ptr = &w->cw };
	if (epoll_ctl(w->s->epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, ci->connect_fd, &ev) == 0 ||
	    !on)
		w->cw_on = on;
}

/* The core's events: there is data, a verdict or an answer; wake it. */
static void waiter_event(void *ctx, const struct ward_event *ev)
{
	struct waiter *w = ctx;
	(void)ev;
	if (w->c && w->suspended) {
		client_watch(w, false);
		w->suspended = false;
		MHD_resume_connection(w->c);
	}
}

static void waiter_suspend(struct waiter *w)
{
	if (!w->c || w->suspended)
		return;
	w->suspended = true;
	MHD_suspend_connection(w->c);
	if (w->ex) /* a client gone while its execution runs cancels it */
		client_watch(w, true);
}

static void waiter_unref(struct waiter *w)
{
	if (!w || --w->refs > 0)
		return;
	if (w->ex)
		ward_execution_unref(w->ex);
	if (w->answer)
		ward_answer_unref(w->answer);
	free(w);
}

/* Takes over the reply's execution or answer reference. */
static struct waiter *waiter_new(struct req *rq, struct ward_reply *r)
{
	struct waiter *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->refs = 1;
	w->s = rq->s;
	w->c = rq->c;
	w->ex = r->ex;
	w->answer = r->later;
	r->ex = NULL;
	r->later = NULL;
	struct ward_sink sink = { .ctx = w, .event = waiter_event };
	if (w->ex)
		ward_execution_watch(w->ex, &sink);
	if (w->answer)
		ward_answer_watch(w->answer, &sink);
	rq->w = w;
	return w;
}

void srv_http_client_gone(struct srv *s, void *ptr)
{
	struct waiter *w = ptr;
	(void)s;
	client_watch(w, false);
	if (w->ex)
		ward_execution_cancel(w->ex);
}

void http_req_end(struct req *rq, bool client_gone)
{
	struct waiter *w = rq->w;
	if (rq->mcp)
		srv_mcp_req_end(rq);
	if (!w)
		return;
	client_watch(w, false);
	if (w->ex) {
		ward_execution_watch(w->ex, NULL);
		if (client_gone && !ward_execution_done(w->ex))
			ward_execution_cancel(w->ex);
	}
	if (w->answer)
		ward_answer_watch(w->answer, NULL);
	w->c = NULL;
	w->suspended = false;
	rq->w = NULL;
	waiter_unref(w);
}

static int http_dispatch(struct req *rq);

/* --- answers --- */

/* Queues r (its headers set) as the answer with status, noted for the
 * audit line, and drops this reference to it. */
static int queue_response(struct req *rq, unsigned status, struct MHD_Response *r)
{
	http_note_status(status);
	enum MHD_Result ok = MHD_queue_response(rq->c, status, r);
	MHD_destroy_response(r);
	return ok;
}

static ssize_t json_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	ssize_t n = ward_json_reader_read(cls, buf, max);
	return n > 0 ? n : n == 0 ? MHD_CONTENT_READER_END_OF_STREAM
				  : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void json_reader_free(void *cls)
{
	ward_json_reader_free(cls);
}

/* The final JSON, written as the client reads it (lib/base/json-stream.h):
 * the daemon never holds it escaped, which for output of control
 * characters is six times the output cap, for stdout and the outputs. */
static int answer_exec(struct req *rq)
{
	rq->answered = true;
	struct ward_json_reader *jr = ward_json_reader_new(ward_execution_result(rq->w->ex));
	struct MHD_Response *r = jr ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 65536,
									json_reader, jr,
									json_reader_free)
				    : NULL;
	if (!r) {
		ward_json_reader_free(jr);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "application/json");
	return queue_response(rq, 200, r);
}

/* A caller waiting for the final JSON: now, or when the execution wakes it. */
static int wait_exec(struct req *rq)
{
	if (ward_execution_done(rq->w->ex))
		return answer_exec(rq);
	waiter_suspend(rq->w);
	return MHD_YES;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct waiter *w = cls;
	(void)pos;
	bool wait;
	ssize_t n = ward_execution_read(w->ex, buf, max, &wait);
	if (n == 0 && wait)
		waiter_suspend(w);
	return n < 0 ? MHD_CONTENT_READER_END_OF_STREAM : n;
}

static void stream_free(void *cls)
{
	waiter_unref(cls);
}

static int start_stream(struct req *rq)
{
	struct waiter *w = rq->w;
	struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32768,
								   stream_reader, w, stream_free);
	if (!r)
		return MHD_NO;
	w->refs++;
	MHD_add_response_header(r, "Content-Type", "application/x-ndjson");
	MHD_add_response_header(r, "Ward-Execution-Id", ward_execution_id(w->ex));
	rq->answered = true;
	return queue_response(rq, 200, r);
}

/* A later answer, filled: its JSON, or a file's bytes. */
static int answer_later(struct req *rq)
{
	struct ward_answer *a = rq->w->answer;
	rq->answered = true;
	json_t *body = ward_answer_body(a);
	if (body)
		return srv_respond_json(rq->c, ward_answer_status(a), body);
	size_t len;
	const char *sha, *mode;
	char *data = ward_answer_take_file(a, &len, &sha, &mode);
	struct MHD_Response *r = data ? MHD_create_response_from_buffer(len, data,
									MHD_RESPMEM_MUST_FREE)
				      : NULL;
	if (!r) {
		free(data);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "application/octet-stream");
	MHD_add_response_header(r, "Ward-File-Sha256", sha);
	MHD_add_response_header(r, "Ward-File-Mode", mode);
	return queue_response(rq, ward_answer_status(a), r);
}

/* The core's reply, as an answer now or a wait. */
static int reply_out(struct req *rq, struct ward_reply *r)
{
	int ret;
	if (r->took_body) { /* the upload's job has the body and len of the reserved bytes */
		ward_service_upload_release(rq->s->svc, rq->key.tenant, rq->reserved - rq->len);
		rq->body = NULL;
		rq->len = rq->cap = rq->reserved = 0;
	}
	if (r->err.status) {
		ret = srv_respond_error(rq->c, &r->err);
	} else if (r->body) {
		ret = srv_respond_json(rq->c, r->status, r->body);
	} else if (!r->ex && !r->later) { /* the core said nothing: its fault, never a hang */
		ret = answer_error(rq, 500, "internal", NULL, "no answer");
	} else if (!waiter_new(rq, r)) {
		ret = MHD_NO;
	} else if (rq->w->answer) {
		ret = ward_answer_done(rq->w->answer) ? answer_later(rq)
						      : (waiter_suspend(rq->w), MHD_YES);
	} else {
		ret = r->stream ? start_stream(rq) : wait_exec(rq);
	}
	ward_reply_release(r);
	return ret;
}

int http_next_call(struct req *rq)
{
	struct waiter *w = rq->w;
	if (rq->mcp)
		return srv_mcp_next(rq);
	if (w && w->answer && !rq->answered)
		return ward_answer_done(w->answer) ? answer_later(rq) : MHD_YES;
	if (w && w->ex && !rq->answered)
		return wait_exec(rq); /* woken early: wait again */
	if (rq->answered || !rq->pending)
		return MHD_YES;
	return http_dispatch(rq);
}

/* --- the handlers, one per route_handler --- */

static bool wants_stream(struct MHD_Connection *c)
{
	const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept");
	return a && strstr(a, "application/x-ndjson");
}

static int h_exec_start(struct req *rq)
{
	struct ward_reply r;
	ward_service_execute(rq->s->svc, &rq->key, rq->body, rq->len, wants_stream(rq->c), &r);
	return reply_out(rq, &r);
}

static int h_exec_cancel(struct req *rq)
{
	struct ward_reply r;
	ward_service_cancel(rq->s->svc, &rq->key, route_param(&rq->m, "id"), &r);
	return reply_out(rq, &r);
}

static int h_metrics(struct req *rq)
{
	size_t n;
	char *txt = ward_service_metrics(rq->s->svc, &n);
	if (!txt)
		return answer_error(rq, 500, "internal", NULL, "out of memory");
	struct MHD_Response *r = MHD_create_response_from_buffer(n, txt, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(txt);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4");
	return queue_response(rq, 200, r);
}

static int h_healthz(struct req *rq)
{
	struct srv *s = rq->s;
	json_t *b = json_pack("{s:s, s:i, s:i, s:b}", "status", s->stopping ? "stopping" : "ok",
			      "running", (int)ward_service_running(s->svc), "sessions",
			      (int)ward_service_sessions(s->svc), "keys_loaded",
			      ward_service_keys_loaded(s->svc));
	int r = srv_respond_json(rq->c, s->stopping ? 503 : 200, b);
	json_decref(b);
	return r;
}

static int h_openapi(struct req *rq)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		rq->s->openapi_len, (void *)rq->s->openapi, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "application/json");
	return queue_response(rq, 200, r);
}

/* A session request as the core takes it: the row's parameters, the body,
 * and (files) the path and mode arguments as sent. */
static struct ward_session_call call_of(struct req *rq)
{
	struct ward_session_call q = {
		.key = &rq->key, .id = route_param(&rq->m, "id"),
		.command_id = route_param(&rq->m, "command_id"), .body = rq->body, .len = rq->len,
		.stream = wants_stream(rq->c),
		.mode = MHD_lookup_connection_value(rq->c, MHD_GET_ARGUMENT_KIND, "mode"),
	};
	if (MHD_lookup_connection_value_n(rq->c, MHD_GET_ARGUMENT_KIND, "path", 4, &q.path,
					  &q.path_len) != MHD_YES)
		q.path = NULL;
	return q;
}

#define SESSION_HANDLER(name, call)                                                  \
	static int name(struct req *rq)                                               \
	{                                                                             \
		struct ward_session_call q = call_of(rq);                             \
		struct ward_reply r;                                                  \
		call;                                                                 \
		return reply_out(rq, &r);                                             \
	}
SESSION_HANDLER(h_session_create, ward_session_create(rq->s->svc, &q, &r))
SESSION_HANDLER(h_session_list, ward_session_list(rq->s->svc, &q, &r))
SESSION_HANDLER(h_session_get, ward_session_get(rq->s->svc, &q, &r))
SESSION_HANDLER(h_session_delete, ward_session_delete(rq->s->svc, &q, &r))
SESSION_HANDLER(h_session_network, ward_session_network(rq->s->svc, &q, &r))
SESSION_HANDLER(h_session_execute, ward_session_call(rq->s->svc, &q, true, &r))
SESSION_HANDLER(h_session_command, ward_session_call(rq->s->svc, &q, false, &r))
SESSION_HANDLER(h_command_status, ward_session_command(rq->s->svc, &q, false, &r))
SESSION_HANDLER(h_command_kill, ward_session_command(rq->s->svc, &q, true, &r))
SESSION_HANDLER(h_file_get, ward_session_files(rq->s->svc, &q, WARD_FILE_GET, &r))
SESSION_HANDLER(h_file_put, ward_session_files(rq->s->svc, &q, WARD_FILE_PUT, &r))
SESSION_HANDLER(h_file_delete, ward_session_files(rq->s->svc, &q, WARD_FILE_DELETE, &r))

typedef int handler_fn(struct req *rq);
/* One function per row kind of the route table (routes.h). */
static handler_fn *const handlers[] = {
	[RH_HEALTHZ] = h_healthz,
	[RH_OPENAPI] = h_openapi,
	[RH_METRICS] = h_metrics,
	[RH_EVENTS] = h_events,
	[RH_EXEC_START] = h_exec_start,
	[RH_EXEC_CANCEL] = h_exec_cancel,
	[RH_SESSION_CREATE] = h_session_create,
	[RH_SESSION_LIST] = h_session_list,
	[RH_SESSION_GET] = h_session_get,
	[RH_SESSION_DELETE] = h_session_delete,
	[RH_SESSION_EXECUTE] = h_session_execute,
	[RH_SESSION_COMMAND] = h_session_command,
	[RH_COMMAND_STATUS] = h_command_status,
	[RH_COMMAND_KILL] = h_command_kill,
	[RH_FILE_GET] = h_file_get,
	[RH_FILE_PUT] = h_file_put,
	[RH_FILE_DELETE] = h_file_delete,
	[RH_SESSION_NETWORK] = h_session_network,
	[RH_MCP] = srv_mcp_handle,
};
_Static_assert(ARRAY_SIZE(handlers) == ROUTE_N_HANDLERS, "a handler for every route kind");

/* Runs the matched row's handler once its body (if any) is whole: the
 * body's limits first, then the handler; an authenticated request gets
 * one audit line with the row's action and the answer's status. */
static int http_dispatch(struct req *rq)
{
	struct srv *s = rq->s;
	const struct route *rt = rq->m.route;
	int r;
	rq->pending = false;
	http_note_status(0);
	if (rq->too_big) {
		char msg[160];
		snprintf(msg, sizeof(msg), "the body is over the limit of %llu bytes (%s)",
			 (unsigned long long)rq->limit, rt->body == RB_UPLOAD ? "max_file" : "max_body");
		r = answer_error(rq, 413, "body_too_large", NULL, msg);
	} else if (rt->body == RB_JSON && ward_json_too_deep(rq->body, rq->len, MAX_DEPTH, NULL)) {
		r = answer_error(rq, 400, "too_deep", NULL, "JSON nested deeper than 32 levels");
	} else if (rq->refused.status) {
		r = srv_respond_error(rq->c, &rq->refused);
	} else {
		r = handlers[rt->handler](rq);
	}
	if (!rq->w)
		rq->answered = true;
	if (rt->scope) {
		unsigned st = rq->w ? (rq->w->ex ? 200 : 202) : http_last_status();
		audit_request(s, &rq->key, rt->action, rt->method, rq->url, st);
		if (st >= 400 && st != 401 && st != 403)
			ward_service_count_bad_request(s->svc);
	}
	return r;
}

/* An upload's body is held in memory until it is whole: its bytes are
 * reserved in the core first, within the bounds it keeps. False when
 * refused (rq->refused set; what was held is let go). */
static bool grow_upload(struct req *rq, uint64_t bytes)
{
	if (bytes <= rq->reserved)
		return true;
	if (ward_service_upload_reserve(rq->s->svc, rq->key.tenant, bytes - rq->reserved,
					&rq->refused) == 0) {
		rq->reserved = bytes;
		return true;
	}
	ward_service_upload_release(rq->s->svc, rq->key.tenant, rq->reserved);
	free(rq->body);
	rq->body = NULL;
	rq->len = rq->cap = rq->reserved = 0;
	return false;
}

bool http_take_body(struct req *rq, const char *data, size_t n)
{
	if (rq->answered || rq->too_big || rq->refused.status)
		return true;
	if (rq->len + n > rq->limit) {
		rq->too_big = true;
		return true;
	}
	if (rq->len + n + 1 > rq->cap) {
		size_t cap = rq->cap ? rq->cap : 4096;
		while (cap < rq->len + n + 1)
			cap *= 2;
		bool upload = rq->m.route && rq->m.route->body == RB_UPLOAD;
		if (upload && rq->reserved >= rq->len + n)
			cap = (size_t)rq->reserved + 1; /* the Content-Length, reserved whole */
		if (cap > rq->limit + 1)
			cap = (size_t)rq->limit + 1;
		if (upload && !grow_upload(rq, cap - 1))
			return true;
		char *nb = realloc(rq->body, cap);
		if (!nb)
			return false;
		rq->body = nb;
		rq->cap = cap;
	}
	memcpy(rq->body + rq->len, data, n);
	rq->len += n;
	return true;
}

static int not_found(struct req *rq, const char *method, int rc)
{
	ward_service_count_bad_request(rq->s->svc);
	if (rq->key.tenant[0])
		audit_request(rq->s, &rq->key, "unknown", method, rq->url, rc == -ENOENT ? 404 : 405);
	if (rc == -ENOENT)
		return answer_error(rq, 404, "not_found", NULL, "no such endpoint");
	rq->answered = true;
	char msg[128];
	snprintf(msg, sizeof(msg), "method not allowed here; allowed: %s", rq->m.allow);
	json_t *b = json_pack("{s:{s:s, s:s, s:n}}", "error", "code", "method_not_allowed",
			      "message", msg, "field");
	size_t n = 0;
	char *txt = b ? ward_json_dump(b, JSON_COMPACT, 1, &n) : NULL;
	json_decref(b);
	if (!txt)
		return MHD_NO;
	txt[n++] = '\n';
	struct MHD_Response *r = MHD_create_response_from_buffer(n, txt, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(txt);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "application/json");
	MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, rq->m.allow);
	return queue_response(rq, 405, r);
}

int http_first_call(struct req *rq, const char *url, const char *method)
{
	struct srv *s = rq->s;
	rq->url = url;
	int rc = route_match(method, url, &rq->m);
	const struct route *rt = rq->m.route;
	if (rc == 0 && !rt->scope)
		return http_dispatch(rq);
	if (rc == -EOPNOTSUPP && rq->m.public_path)
		return not_found(rq, method, rc);
	if (!http_authenticate(rq)) {
		audit_denied(s, rq->c, "auth.denied", NULL, method, url, NULL);
		return answer_error(rq, 401, "unauthorized", NULL,
				    "a valid API key is required (Authorization: Bearer wk_...)");
	}
	if (rc < 0)
		return not_found(rq, method, rc);
	if (!(rq->key.scopes & rt->scope)) {
		const char *need = ward_keys_scope_name(rt->scope);
		audit_denied(s, rq->c, "permission.denied", &rq->key, method, url, need);
		char msg[96];
		snprintf(msg, sizeof(msg), "this key lacks the '%s' scope", need);
		return answer_error(rq, 403, "forbidden", "scope", msg);
	}
	if (rt->body == RB_NONE)
		return http_dispatch(rq);
	rq->limit = rt->body == RB_UPLOAD ? ward_service_settings(s->svc)->max_file : s->cfg.max_body;
	const char *cl = MHD_lookup_connection_value(rq->c, MHD_HEADER_KIND, "Content-Length");
	if (cl && strtoull(cl, NULL, 10) > rq->limit) {
		rq->too_big = true;
		return http_dispatch(rq);
	}
	if (cl && rt->body == RB_UPLOAD && !grow_upload(rq, strtoull(cl, NULL, 10)))
		return http_dispatch(rq);
	rq->pending = true;
	return MHD_YES;
}
