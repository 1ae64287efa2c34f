/* src/daemon/http.c — the HTTP side of `ward serve`: routes, auth, limits.
 *
 * libmicrohttpd runs in external-epoll mode (no thread of its own); this
 * file only answers its callbacks. Order on every request: the route table
 * (routes.c) matches the path once, then the API key (before any body byte
 * is used; public rows need none), then 404/405, then the row's scope, then
 * the body within its size and depth limits, then the row's handler; the
 * audit line names the row's action. Every refusal is a JSON error body;
 * nothing a client sends may crash or block the daemon.
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "base/util.h"
#include "daemon.h"
#include "routes.h"

enum { MAX_DEPTH = 32, AUDIT_PATH_MAX = 1024, DENIED_INTERVAL_MS = 10000 };

struct req {
	struct srv *s;
	char *body;
	size_t len, cap;
	uint64_t limit;          /* of the body */
	uint64_t reserved;       /* an upload's body bytes counted by files_upload_reserve */
	int refused;             /* an upload files_upload_reserve refused (its rc) */
	bool too_big, answered;
	bool pending;            /* a body is being read: the handler runs at its end */
	struct route_match m;
	const char *url;         /* libmicrohttpd's, for the request's lifetime */
	struct ward_key_info key;
	struct execution *ex;
	struct deferred *d;
};

/* The status of the last answer queued (for the audit line). */
static unsigned last_status;
/* The next answer closes its connection (a refused client keeps no slot). */
static bool close_next;

void srv_note_status(unsigned status)
{
	last_status = status;
}

int srv_respond_json(struct MHD_Connection *c, unsigned status, json_t *body)
{
	size_t n = 0;
	char *txt = body ? ward_json_dump(body, JSON_COMPACT, 1, &n) : NULL;
	if (txt) {
		txt[n++] = '\n';
		txt[n] = '\0';
	}
	struct MHD_Response *r = txt ? MHD_create_response_from_buffer(n, txt, MHD_RESPMEM_MUST_FREE)
				     : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	if (!r) {
		free(txt);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "application/json");
	if (close_next)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
	close_next = false;
	last_status = status;
	enum MHD_Result ok = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ok;
}

int srv_respond_error(struct MHD_Connection *c, unsigned status, const char *code,
		      const char *field, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_t *b = srv_error_body(code, field, msg); /* bytes that are not UTF-8 become '?' */
	int r = srv_respond_json(c, status, b);
	json_decref(b);
	return r;
}

static int answer_error(struct req *rq, struct MHD_Connection *c, unsigned status,
			const char *code, const char *field, const char *msg)
{
	rq->answered = true;
	close_next = status == 401;
	if (status == 401 || status == 403)
		metrics_denial(rq->s, rq->key.tenant[0] ? rq->key.tenant : NULL);
	return srv_respond_error(c, status, code, field, "%s", msg);
}

/* The keys file is read again when it changed (mtime, inode or size). */
void srv_keys_reload(struct srv *s)
{
	struct stat st;
	if (stat(s->cfg.keys_file, &st) < 0) {
		ward_keys_free(s->keys);
		s->keys = NULL;
		return;
	}
	if (s->keys && st.st_mtim.tv_sec == s->keys_mtime.tv_sec &&
	    st.st_mtim.tv_nsec == s->keys_mtime.tv_nsec && st.st_ino == s->keys_ino &&
	    st.st_size == s->keys_size)
		return;
	struct ward_keystore *ks = NULL;
	struct ward_error err;
	if (ward_keys_load(s->cfg.keys_file, &ks, &err) < 0) {
		char buf[1024];
		fprintf(stderr, "ward: serve: keys file not reloaded: %s\n",
			ward_error_format(&err, buf, sizeof(buf)));
		return; /* the keys loaded before stay in force */
	}
	ward_keys_free(s->keys);
	s->keys = ks;
	s->keys_mtime = st.st_mtim;
	s->keys_ino = st.st_ino;
	s->keys_size = st.st_size;
}

/* Connections that have not authenticated yet (no request with a valid
 * key): at most max_unauthenticated of them, each for at most
 * header_timeout from its accept. A newcomer over the bound evicts the
 * oldest; a deadline passed closes it. Either way the socket is shut down
 * and libmicrohttpd closes it on its next read. So a client that opens
 * many connections and never finishes a request's headers holds a bounded
 * number of slots for a bounded time, and never all of max_connections. */
struct conn {
	struct conn *prev, *next;    /* while unauthenticated: oldest first */
	MHD_socket fd;
	uint64_t deadline_ns;
	bool listed;
};
static struct conn *unauth_head, *unauth_tail;
static unsigned n_unauth;

static void unauth_unlink(struct conn *k)
{
	if (!k->listed)
		return;
	*(k->prev ? &k->prev->next : &unauth_head) = k->next;
	*(k->next ? &k->next->prev : &unauth_tail) = k->prev;
	k->prev = k->next = NULL;
	k->listed = false;
	n_unauth--;
}

static void unauth_close(struct conn *k)
{
	unauth_unlink(k);
	shutdown(k->fd, SHUT_RDWR);
}

static void notify_conn(void *cls, struct MHD_Connection *c, void **socket_context,
			enum MHD_ConnectionNotificationCode toe)
{
	struct srv *s = cls;
	struct conn *k = *socket_context;
	if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (k)
			unauth_unlink(k);
		free(k);
		*socket_context = NULL;
		return;
	}
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci || !(k = calloc(1, sizeof(*k)))) {
		if (ci)
			shutdown(ci->connect_fd, SHUT_RDWR); /* out of memory: refused */
		return;
	}
	k->fd = ci->connect_fd;
	k->deadline_ns = ward_now_ns() + s->cfg.header_timeout_ms * 1000000ull;
	if (n_unauth >= s->cfg.max_unauthenticated && unauth_head) {
		s->m.connections_evicted++;
		unauth_close(unauth_head);
	}
	k->prev = unauth_tail;
	*(unauth_tail ? &unauth_tail->next : &unauth_head) = k;
	unauth_tail = k;
	k->listed = true;
	n_unauth++;
	*socket_context = k;
}

/* A valid key: the connection is no longer bound by the header deadline. */
static void conn_authenticated(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	if (ci && ci->socket_context)
		unauth_unlink(ci->socket_context);
}

static void unauth_expire(struct srv *s)
{
	uint64_t now = ward_now_ns();
	while (unauth_head && unauth_head->deadline_ns <= now) {
		s->m.connections_evicted++;
		unauth_close(unauth_head);
	}
}

static bool authenticate(struct srv *s, struct MHD_Connection *c, struct ward_key_info *key)
{
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	srv_keys_reload(s);
	memset(key, 0, sizeof(*key));
	if (!h || strncmp(h, "Bearer ", 7) != 0 || !s->keys)
		return false;
	if (ward_keys_authenticate(s->keys, h + 7, key) < 0)
		return false;
	conn_authenticated(c);
	return true;
}

static void audit_request(struct srv *s, const struct ward_key_info *k, const char *action,
			  const char *method, const char *url, unsigned status)
{
	json_t *f = json_pack("{s:s, s:s, s:s, s:s, s:i}", "key_id", k->id, "tenant",
			      k->tenant, "action", action, "method", method, "status", (int)status);
	if (f && ward_audit_clip(f, "path", url, strlen(url), AUDIT_PATH_MAX) == 0)
		srv_audit(s, "request", f);
	json_decref(f);
}

/* Refusals: each source's first in an interval in full (method and path
 * cut short), the rest counted into one request.denied line per source
 * (lib/server/audit.h). A 401's source is the client (address, or the
 * peer's uid on the unix socket), a 403's its key. */
static struct ward_audit_tally *denials;

static void conn_source(struct MHD_Connection *c, char src[WARD_AUDIT_SOURCE_MAX])
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;
	char ip[INET_ADDRSTRLEN];
	if (sa && sa->sa_family == AF_INET &&
	    inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, ip,
		      sizeof(ip))) {
		snprintf(src, WARD_AUDIT_SOURCE_MAX, "ip:%s", ip);
		return;
	}
	ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct ucred uc;
	socklen_t len = sizeof(uc);
	if (ci && getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) == 0)
		snprintf(src, WARD_AUDIT_SOURCE_MAX, "uid:%u", (unsigned)uc.uid);
	else
		snprintf(src, WARD_AUDIT_SOURCE_MAX, "unknown");
}

static void audit_denied(struct srv *s, struct MHD_Connection *c, const char *event,
			 const struct ward_key_info *k, const char *method, const char *url,
			 const char *scope)
{
	char src[WARD_AUDIT_SOURCE_MAX];
	if (!s->audit)
		return;
	if (k)
		snprintf(src, sizeof(src), "key:%s", k->id);
	else
		conn_source(c, src);
	if (denials && !ward_audit_tally_add(denials, src, ward_now_ns()))
		return;
	json_t *f = json_pack("{s:s}", "source", src);
	if (f && k)
		json_object_update_new(f, json_pack("{s:s, s:s, s:s}", "key_id", k->id, "tenant",
						    k->tenant, "scope", scope));
	if (f && ward_audit_clip(f, "method", method, strlen(method), 16) == 0 &&
	    ward_audit_clip(f, "path", url, strlen(url), WARD_AUDIT_DENIED_TEXT) == 0)
		srv_audit(s, event, f);
	json_decref(f);
}

/* Nesting deeper than MAX_DEPTH is refused before jansson sees it. */
static bool too_deep(const char *b, size_t n)
{
	return ward_json_too_deep(b, n, MAX_DEPTH, NULL);
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	bool wait;
	ssize_t n = exec_read_stream(cls, buf, max, &wait);
	return n < 0 ? MHD_CONTENT_READER_END_OF_STREAM : n;
}

static void stream_free(void *cls)
{
	exec_unref(cls);
}

static int answer_exec(struct req *rq, struct MHD_Connection *c)
{
	rq->answered = true;
	return srv_respond_json(c, 200, exec_result(rq->ex));
}

/* A caller waiting for the final JSON: now, or when the execution wakes it. */
static int wait_exec(struct req *rq, struct MHD_Connection *c)
{
	if (exec_done(rq->ex))
		return answer_exec(rq, c);
	exec_attach(rq->ex, c, false);
	return MHD_YES;
}

static bool wants_stream(struct MHD_Connection *c)
{
	const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept");
	return a && strstr(a, "application/x-ndjson");
}

static int start_stream(struct req *rq, struct MHD_Connection *c)
{
	struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32768,
								   stream_reader, rq->ex, stream_free);
	if (!r)
		return MHD_NO;
	exec_ref(rq->ex);
	MHD_add_response_header(r, "Content-Type", "application/x-ndjson");
	MHD_add_response_header(r, "Ward-Execution-Id", exec_id(rq->ex));
	exec_attach(rq->ex, c, true);
	rq->answered = true;
	enum MHD_Result ok = MHD_queue_response(c, 200, r);
	MHD_destroy_response(r);
	return ok;
}

static int quota_check(struct req *rq, struct MHD_Connection *c)
{
	struct srv *s = rq->s;
	char msg[160];
	if (s->stopping)
		return answer_error(rq, c, 503, "shutting_down", NULL, "the daemon is shutting down");
	if (s->running >= s->cfg.max_executions) {
		snprintf(msg, sizeof(msg), "quota max_executions (%llu) reached; retry later",
			 (unsigned long long)s->cfg.max_executions);
		return answer_error(rq, c, 429, "quota_exceeded", "max_executions", msg);
	}
	struct srv_tenant_count *t = metrics_tenant(s, rq->key.tenant);
	struct sess_quota q;
	srv_tenant_quota(s, rq->key.tenant, &q);
	if (!t) {
		snprintf(msg, sizeof(msg), "the daemon tracks at most %d tenants", SRV_MAX_TENANTS);
		return answer_error(rq, c, 429, "quota_exceeded", "tenants", msg);
	}
	if (t->running + t->sessions >= q.max_per_tenant) {
		snprintf(msg, sizeof(msg), "quota max_per_tenant (%llu sandboxes: executions and "
			 "sessions) reached for tenant '%s'",
			 (unsigned long long)q.max_per_tenant, rq->key.tenant);
		return answer_error(rq, c, 429, "quota_exceeded", "max_per_tenant", msg);
	}
	return -1;
}

/* The memory a one-shot would reserve, once its policy is known. */
static int memory_check(struct req *rq, struct MHD_Connection *c, uint64_t memory)
{
	struct srv_tenant_count *t = metrics_tenant(rq->s, rq->key.tenant);
	struct sess_quota q;
	srv_tenant_quota(rq->s, rq->key.tenant, &q);
	uint64_t used = t ? t->memory + t->held : 0; /* sandboxes, and what the daemon holds */
	if (!q.tenant_memory || used + memory <= q.tenant_memory)
		return -1;
	char msg[256];
	snprintf(msg, sizeof(msg), "quota tenant_memory (%llu bytes) reached for tenant '%s': "
		 "%llu in use, %llu asked", (unsigned long long)q.tenant_memory, rq->key.tenant,
		 (unsigned long long)used, (unsigned long long)memory);
	return answer_error(rq, c, 429, "quota_exceeded", "tenant_memory", msg);
}

/* --- the handlers, one per route_handler --- */

static int h_exec_start(struct req *rq, struct MHD_Connection *c)
{
	struct srv *s = rq->s;
	int q = quota_check(rq, c);
	if (q >= 0)
		return q;
	struct exec_request er;
	unsigned status;
	json_t *error = NULL;
	if (exec_request_parse(s, rq->body ? rq->body : "", rq->len, &er, &status, &error) < 0) {
		int r = srv_respond_json(c, status, error);
		json_decref(error);
		return r;
	}
	q = memory_check(rq, c, er.policy.memory);
	if (q >= 0) {
		exec_request_release(&er);
		return q;
	}
	bool stream = er.stream = wants_stream(c);
	struct ward_error err;
	ward_error_clear(&err);
	if (exec_start(s, &er, &rq->key, &rq->ex, &err) < 0) {
		exec_request_release(&er);
		return answer_error(rq, c, 500, "internal", NULL, err.message);
	}
	return stream ? start_stream(rq, c) : wait_exec(rq, c);
}

static int h_exec_cancel(struct req *rq, struct MHD_Connection *c)
{
	const char *id = route_param(&rq->m, "id");
	struct execution *ex = exec_find(rq->s, id);
	/* another tenant's execution does not exist for this one */
	if (!ex || strcmp(exec_tenant(ex), rq->key.tenant) != 0)
		return answer_error(rq, c, 404, "not_found", "id", "no such running execution");
	exec_cancel(ex);
	json_t *b = json_pack("{s:s, s:s}", "id", id, "status", "cancelling");
	int r = srv_respond_json(c, 202, b);
	json_decref(b);
	return r;
}

static int h_metrics(struct req *rq, struct MHD_Connection *c)
{
	size_t n;
	char *txt = metrics_render(rq->s, &n);
	rq->answered = true;
	if (!txt)
		return answer_error(rq, c, 500, "internal", NULL, "out of memory");
	struct MHD_Response *r = MHD_create_response_from_buffer(n, txt, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(txt);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4");
	last_status = 200;
	enum MHD_Result ok = MHD_queue_response(c, 200, r);
	MHD_destroy_response(r);
	return ok;
}

static int h_healthz(struct req *rq, struct MHD_Connection *c)
{
	struct srv *s = rq->s;
	json_t *b = json_pack("{s:s, s:i, s:i, s:b}", "status", s->stopping ? "stopping" : "ok",
			      "running", (int)s->running, "sessions", (int)s->n_sessions,
			      "keys_loaded", s->keys != NULL);
	int r = srv_respond_json(c, s->stopping ? 503 : 200, b);
	json_decref(b);
	return r;
}

static int h_openapi(struct req *rq, struct MHD_Connection *c)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		rq->s->openapi_len, (void *)rq->s->openapi, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "application/json");
	last_status = 200;
	enum MHD_Result ok = MHD_queue_response(c, 200, r);
	MHD_destroy_response(r);
	return ok;
}

/* A session route's answer: now, or an execution or a deferred answer. */
static int session_out(struct req *rq, struct MHD_Connection *c, int r, struct route_out *out)
{
	if (out->took_body) { /* the upload's job has the body and len of the bytes */
		files_upload_release(rq->s, rq->key.tenant, rq->reserved - rq->len);
		rq->body = NULL;
		rq->len = rq->cap = rq->reserved = 0;
	}
	if (out->d) {
		rq->d = out->d;
		return MHD_YES;
	}
	if (!out->ex)
		return r;
	rq->ex = out->ex;
	return out->stream ? start_stream(rq, c) : wait_exec(rq, c);
}

static struct sess_call sess_call_of(struct req *rq, struct MHD_Connection *c)
{
	return (struct sess_call){ .c = c, .key = &rq->key, .id = route_param(&rq->m, "id"),
				   .command_id = route_param(&rq->m, "command_id"),
				   .body = rq->body, .len = rq->len };
}

#define SESSION_HANDLER(name, call)                                                  \
	static int name(struct req *rq, struct MHD_Connection *c)                     \
	{                                                                             \
		struct sess_call q = sess_call_of(rq, c);                             \
		struct route_out out;                                                 \
		int r = call;                                                         \
		return session_out(rq, c, r, &out);                                   \
	}
SESSION_HANDLER(h_session_create, session_create(rq->s, &q, &out))
SESSION_HANDLER(h_session_list, session_list(rq->s, &q, &out))
SESSION_HANDLER(h_session_get, session_get(rq->s, &q, &out))
SESSION_HANDLER(h_session_delete, session_delete(rq->s, &q, &out))
SESSION_HANDLER(h_session_execute, session_call(rq->s, &q, true, &out))
SESSION_HANDLER(h_session_command, session_call(rq->s, &q, false, &out))
SESSION_HANDLER(h_command_status, session_command_status(rq->s, &q, false, &out))
SESSION_HANDLER(h_command_kill, session_command_status(rq->s, &q, true, &out))
SESSION_HANDLER(h_file_get, session_files(rq->s, &q, OP_GET, &out))
SESSION_HANDLER(h_file_put, session_files(rq->s, &q, OP_PUT, &out))
SESSION_HANDLER(h_file_delete, session_files(rq->s, &q, OP_DELETE, &out))

typedef int handler_fn(struct req *rq, struct MHD_Connection *c);
/* One function per row kind of the route table (routes.h). */
static handler_fn *const handlers[] = {
	[RH_HEALTHZ] = h_healthz,
	[RH_OPENAPI] = h_openapi,
	[RH_METRICS] = h_metrics,
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
};
_Static_assert(ARRAY_SIZE(handlers) == ROUTE_N_HANDLERS, "a handler for every route kind");

/* Runs the matched row's handler once its body (if any) is whole: the
 * body's limits first, then the handler; an authenticated request gets
 * one audit line with the row's action and the answer's status. */
static int dispatch(struct req *rq, struct MHD_Connection *c)
{
	struct srv *s = rq->s;
	const struct route *rt = rq->m.route;
	int r;
	rq->pending = false;
	last_status = 0;
	if (rq->too_big) {
		char msg[160];
		snprintf(msg, sizeof(msg), "the body is over the limit of %llu bytes (%s)",
			 (unsigned long long)rq->limit, rt->body == RB_UPLOAD ? "max_file" : "max_body");
		r = answer_error(rq, c, 413, "body_too_large", NULL, msg);
	} else if (rt->body == RB_JSON && too_deep(rq->body, rq->len)) {
		r = answer_error(rq, c, 400, "too_deep", NULL, "JSON nested deeper than 32 levels");
	} else if (rq->refused) {
		r = files_upload_refuse(c, rq->refused, s);
	} else {
		r = handlers[rt->handler](rq, c);
	}
	if (!rq->ex && !rq->d)
		rq->answered = true;
	if (rt->scope) {
		unsigned st = rq->ex ? 200 : rq->d ? 202 : last_status;
		audit_request(s, &rq->key, rt->action, rt->method, rq->url, st);
		if (st >= 400 && st != 401 && st != 403)
			s->m.bad_requests++;
	}
	return r;
}

/* An upload's body is held in memory until it is whole: its bytes are
 * reserved first, within the bounds files_upload_reserve keeps. False when
 * refused (rq->refused set; what was held is let go). */
static bool grow_upload(struct req *rq, uint64_t bytes)
{
	if (bytes <= rq->reserved)
		return true;
	int rc = files_upload_reserve(rq->s, rq->key.tenant, bytes - rq->reserved);
	if (rc == 0) {
		rq->reserved = bytes;
		return true;
	}
	files_upload_release(rq->s, rq->key.tenant, rq->reserved);
	free(rq->body);
	rq->body = NULL;
	rq->len = rq->cap = rq->reserved = 0;
	rq->refused = rc;
	return false;
}

static int not_found(struct req *rq, struct MHD_Connection *c, const char *method, int rc)
{
	rq->s->m.bad_requests++;
	if (rq->key.tenant[0])
		audit_request(rq->s, &rq->key, "unknown", method, rq->url, rc == -ENOENT ? 404 : 405);
	if (rc == -ENOENT)
		return answer_error(rq, c, 404, "not_found", NULL, "no such endpoint");
	rq->answered = true;
	char msg[128];
	snprintf(msg, sizeof(msg), "method not allowed here; allowed: %s", rq->m.allow);
	json_t *b = srv_error_body("method_not_allowed", NULL, msg);
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
	last_status = 405;
	enum MHD_Result ok = MHD_queue_response(c, 405, r);
	MHD_destroy_response(r);
	return ok;
}

/* The first call for a request: headers only. The path is matched here,
 * once; everything after reads rq->m. */
static int first_call(struct req *rq, struct MHD_Connection *c, const char *url,
		      const char *method)
{
	struct srv *s = rq->s;
	rq->url = url;
	int rc = route_match(method, url, &rq->m);
	const struct route *rt = rq->m.route;
	if (rc == 0 && !rt->scope)
		return dispatch(rq, c);
	if (rc == -EOPNOTSUPP && rq->m.public_path)
		return not_found(rq, c, method, rc);
	if (!authenticate(s, c, &rq->key)) {
		audit_denied(s, c, "auth.denied", NULL, method, url, NULL);
		return answer_error(rq, c, 401, "unauthorized", NULL,
				    "a valid API key is required (Authorization: Bearer wk_...)");
	}
	if (rc < 0)
		return not_found(rq, c, method, rc);
	if (!(rq->key.scopes & rt->scope)) {
		const char *need = ward_keys_scope_name(rt->scope);
		audit_denied(s, c, "permission.denied", &rq->key, method, url, need);
		char msg[96];
		snprintf(msg, sizeof(msg), "this key lacks the '%s' scope", need);
		return answer_error(rq, c, 403, "forbidden", "scope", msg);
	}
	if (rt->body == RB_NONE)
		return dispatch(rq, c);
	rq->limit = rt->body == RB_UPLOAD ? s->cfg.max_file : s->cfg.max_body;
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
	if (cl && strtoull(cl, NULL, 10) > rq->limit) {
		rq->too_big = true;
		return dispatch(rq, c);
	}
	if (cl && rt->body == RB_UPLOAD && !grow_upload(rq, strtoull(cl, NULL, 10)))
		return dispatch(rq, c);
	rq->pending = true;
	return MHD_YES;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
			       const char *method, const char *version, const char *upload,
			       size_t *upload_size, void **con_cls)
{
	(void)version;
	struct req *rq = *con_cls;
	if (!rq) {
		rq = calloc(1, sizeof(*rq));
		if (!rq)
			return MHD_NO;
		rq->s = cls;
		rq->s->m.requests++;
		*con_cls = rq;
		return first_call(rq, c, url, method) == MHD_YES ? MHD_YES : MHD_NO;
	}
	if (*upload_size) {
		size_t n = *upload_size;
		*upload_size = 0;
		if (rq->answered || rq->too_big || rq->refused)
			return MHD_YES;
		if (rq->len + n > rq->limit) {
			rq->too_big = true;
			return MHD_YES;
		}
		if (rq->len + n + 1 > rq->cap) {
			size_t cap = rq->cap ? rq->cap : 4096;
			while (cap < rq->len + n + 1)
				cap *= 2;
			bool is_upload = rq->m.route && rq->m.route->body == RB_UPLOAD;
			if (is_upload && rq->reserved >= rq->len + n)
				cap = (size_t)rq->reserved + 1; /* the Content-Length, reserved whole */
			if (cap > rq->limit + 1)
				cap = (size_t)rq->limit + 1;
			if (is_upload && !grow_upload(rq, cap - 1))
				return MHD_YES;
			char *nb = realloc(rq->body, cap);
			if (!nb)
				return MHD_NO;
			rq->body = nb;
			rq->cap = cap;
		}
		memcpy(rq->body + rq->len, upload, n);
		rq->len += n;
		return MHD_YES;
	}
	if (rq->d && !rq->answered) {
		if (!rq->d->done)
			return MHD_YES;
		rq->answered = true;
		if (rq->d->resp) { /* a file */
			srv_note_status(rq->d->status);
			return MHD_queue_response(c, rq->d->status, rq->d->resp);
		}
		return srv_respond_json(c, rq->d->status, rq->d->body) == MHD_YES ? MHD_YES : MHD_NO;
	}
	if (rq->ex && !rq->answered) {
		if (exec_done(rq->ex))
			return answer_exec(rq, c) == MHD_YES ? MHD_YES : MHD_NO;
		exec_attach(rq->ex, c, false); /* woken early: wait again */
		return MHD_YES;
	}
	if (rq->answered || !rq->pending)
		return MHD_YES;
	return dispatch(rq, c) == MHD_YES ? MHD_YES : MHD_NO;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
		      enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)c;
	struct req *rq = *con_cls;
	if (!rq)
		return;
	if (rq->ex) {
		exec_detach(rq->ex, toe != MHD_REQUEST_TERMINATED_COMPLETED_OK);
		exec_unref(rq->ex);
	}
	if (rq->d) {
		rq->d->c = NULL;
		deferred_unref(rq->d);
	}
	if (rq->reserved)
		files_upload_release(rq->s, rq->key.tenant, rq->reserved);
	free(rq->body);
	free(rq);
	*con_cls = NULL;
}

static int parse_listen(const char *spec, struct sockaddr_in *sa)
{
	char host[64];
	const char *colon = strrchr(spec, ':');
	if (!colon || (size_t)(colon - spec) >= sizeof(host))
		return -1;
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = '\0';
	char *end;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (*end || port == 0 || port > 65535)
		return -1;
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

/* libmicrohttpd's own messages (malformed requests, mostly): clients choose
 * how many there are, so at most 10 a minute reach stderr. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	static uint64_t window_ns;
	static unsigned count;
	(void)cls;
	uint64_t now = ward_now_ns();
	if (now - window_ns > 60000000000ull) {
		window_ns = now;
		count = 0;
	}
	if (++count > 10)
		return;
	fputs("ward: serve: http: ", stderr);
	vfprintf(stderr, fmt, ap);
}

static struct MHD_Daemon *start_one(struct srv *s, int listen_fd, const struct sockaddr_in *sa)
{
	unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
	size_t mem = s->cfg.max_header < 8192 ? 8192 : (size_t)s->cfg.max_header;
	unsigned idle = (unsigned)((s->cfg.idle_timeout_ms + 999) / 1000);
	if (listen_fd >= 0)
		return MHD_start_daemon(flags, 0, NULL, NULL, handler, s,
					MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
					MHD_OPTION_LISTEN_SOCKET, listen_fd,
					MHD_OPTION_CONNECTION_MEMORY_LIMIT, mem,
					MHD_OPTION_CONNECTION_TIMEOUT, idle,
					MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->cfg.max_connections,
					MHD_OPTION_NOTIFY_CONNECTION, notify_conn, s,
					MHD_OPTION_NOTIFY_COMPLETED, completed, s,
					MHD_OPTION_END);
	/* per address: TCP only (every client of a unix socket has the same) */
	return MHD_start_daemon(flags, ntohs(sa->sin_port), NULL, NULL, handler, s,
				MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
				MHD_OPTION_SOCK_ADDR, sa,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, mem,
				MHD_OPTION_CONNECTION_TIMEOUT, idle,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->cfg.max_connections,
				MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)s->cfg.max_per_address,
				MHD_OPTION_NOTIFY_CONNECTION, notify_conn, s,
				MHD_OPTION_NOTIFY_COMPLETED, completed, s,
				MHD_OPTION_END);
}

static int add_daemon(struct srv *s, struct MHD_Daemon *d)
{
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD);
	if (!di)
		return -1;
	static struct watch w[2];
	int i = s->n_mhd++;
	s->mhd[i] = d;
	s->mhd_fd[i] = di->epoll_fd;
	w[i] = (struct watch){ .kind = WATCH_MHD, .ptr = d, .idx = i };
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &w[i] };
	return epoll_ctl(s->epfd, EPOLL_CTL_ADD, di->epoll_fd, &ev);
}

int srv_http_start(struct srv *s, int unix_fd)
{
	if (!denials && !(denials = ward_audit_tally_new(DENIED_INTERVAL_MS)))
		return -1;
	if (unix_fd >= 0) {
		struct MHD_Daemon *d = start_one(s, unix_fd, NULL);
		if (!d || add_daemon(s, d) < 0) {
			fprintf(stderr, "ward: error: serve: unable to start HTTP on '%s'\n", s->cfg.socket);
			return -1;
		}
	}
	if (s->cfg.listen && *s->cfg.listen) {
		struct sockaddr_in sa;
		if (parse_listen(s->cfg.listen, &sa) < 0) {
			fprintf(stderr, "ward: error: --listen: expected IPV4:PORT, got '%s'\n",
				s->cfg.listen);
			return -1;
		}
		if (ntohl(sa.sin_addr.s_addr) >> 24 != 127)
			fprintf(stderr, "ward: serve: warning: --listen %s is not a loopback address; "
				"the API has no TLS: put a TLS proxy in front\n", s->cfg.listen);
		struct MHD_Daemon *d = start_one(s, -1, &sa);
		if (!d || add_daemon(s, d) < 0) {
			fprintf(stderr, "ward: error: serve: unable to listen on '%s'\n", s->cfg.listen);
			return -1;
		}
	}
	return 0;
}

void srv_http_run(struct srv *s)
{
	unauth_expire(s);
	if (denials)
		ward_audit_tally_flush(denials, s->audit, ward_now_ns(), false);
	for (int i = 0; i < s->n_mhd; i++)
		MHD_run(s->mhd[i]);
}

int srv_http_timeout(struct srv *s)
{
	int best = -1;
	for (int i = 0; i < s->n_mhd; i++) {
		MHD_UNSIGNED_LONG_LONG ms;
		if (MHD_get_timeout(s->mhd[i], &ms) == MHD_YES) {
			int t = ms > 60000 ? 60000 : (int)ms;
			best = best < 0 || t < best ? t : best;
		}
	}
	uint64_t end = denials ? ward_audit_tally_flush(denials, NULL, 0, false) : 0;
	if (end) {
		uint64_t now = ward_now_ns();
		int t = end <= now ? 0 : (int)((end - now) / 1000000 + 1);
		best = best < 0 || t < best ? t : best;
	}
	if (unauth_head) {
		uint64_t now = ward_now_ns(), d = unauth_head->deadline_ns;
		int t = d <= now ? 0 : (int)((d - now) / 1000000 + 1);
		best = best < 0 || t < best ? t : best;
	}
	return best;
}

void srv_http_quiesce(struct srv *s)
{
	for (int i = 0; i < s->n_mhd; i++) {
		MHD_socket fd = MHD_quiesce_daemon(s->mhd[i]);
		if (fd >= 0)
			close(fd);
	}
}

unsigned srv_http_connections(struct srv *s)
{
	unsigned n = 0;
	for (int i = 0; i < s->n_mhd; i++) {
		const union MHD_DaemonInfo *di =
			MHD_get_daemon_info(s->mhd[i], MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
		n += di ? di->num_connections : 0;
	}
	return n;
}

void srv_http_stop(struct srv *s)
{
	for (int i = 0; i < s->n_mhd; i++)
		MHD_stop_daemon(s->mhd[i]);
	s->n_mhd = 0;
	if (denials)
		ward_audit_tally_flush(denials, s->audit, ward_now_ns(), true);
	ward_audit_tally_free(denials);
	denials = NULL;
}
