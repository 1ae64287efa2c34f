/* src/daemon/http.c — the HTTP side of `ward serve`: routes, auth, limits.
 *
 * libmicrohttpd runs in external-epoll mode (no thread of its own); this
 * file only answers its callbacks. Order on every request: route, then the
 * API key (before any body byte is used), then the scope, then the body
 * within its size and depth limits, then the work. Every refusal is a JSON
 * error body; nothing a client sends may crash or block the daemon.
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

enum { MAX_DEPTH = 32, AUDIT_PATH_MAX = 1024, DENIED_INTERVAL_MS = 10000 };

enum route { R_NONE, R_EXEC_POST, R_SESSION };

struct req {
	struct srv *s;
	char *body;
	size_t len, cap;
	uint64_t limit;          /* of the body */
	uint64_t reserved;       /* an upload's body bytes counted by files_upload_reserve */
	int refused;             /* an upload files_upload_reserve refused (its rc) */
	bool upload;             /* a PUT of the files API */
	bool too_big, answered;
	enum route route;
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
	else
		rq->s->m.bad_requests++;
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

static int post_execution(struct req *rq, struct MHD_Connection *c, const char *url)
{
	struct srv *s = rq->s;
	if (rq->too_big) {
		char msg[128];
		snprintf(msg, sizeof(msg), "the body is over the limit of %llu bytes",
			 (unsigned long long)s->cfg.max_body);
		return answer_error(rq, c, 413, "body_too_large", NULL, msg);
	}
	if (too_deep(rq->body, rq->len))
		return answer_error(rq, c, 400, "too_deep", NULL,
				    "JSON nested deeper than 32 levels");
	int q = quota_check(rq, c);
	if (q >= 0)
		return q;
	struct exec_request er;
	unsigned status;
	json_t *error = NULL;
	if (exec_request_parse(s, rq->body ? rq->body : "", rq->len, &er, &status, &error) < 0) {
		rq->answered = true;
		s->m.bad_requests++;
		audit_request(s, &rq->key, "execute", "POST", url, status);
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
	audit_request(s, &rq->key, "execute", "POST", url, 200);
	struct ward_error err;
	ward_error_clear(&err);
	if (exec_start(s, &er, &rq->key, &rq->ex, &err) < 0) {
		exec_request_release(&er);
		return answer_error(rq, c, 500, "internal", NULL, err.message);
	}
	if (stream) /* er was handed over */
		return start_stream(rq, c);
	if (exec_done(rq->ex))
		return answer_exec(rq, c);
	exec_attach(rq->ex, c, false);
	return MHD_YES;
}

static int session_call(struct req *rq, struct MHD_Connection *c, const char *url,
			const char *method)
{
	struct srv *s = rq->s;
	if (rq->too_big) {
		char msg[160];
		snprintf(msg, sizeof(msg), "the body is over the limit of %llu bytes (%s)",
			 (unsigned long long)rq->limit,
			 strcmp(method, "PUT") == 0 ? "max_file" : "max_body");
		return answer_error(rq, c, 413, "body_too_large", NULL, msg);
	}
	if (strcmp(method, "POST") == 0 && too_deep(rq->body, rq->len))
		return answer_error(rq, c, 400, "too_deep", NULL, "JSON nested deeper than 32 levels");
	struct route_out out;
	last_status = 0;
	int r = rq->refused ? files_upload_refuse(c, rq->refused, s)
		: session_route(s, c, &rq->key, method, url, rq->body, rq->len, &out);
	if (rq->refused)
		memset(&out, 0, sizeof(out));
	if (out.took_body) { /* the upload's job has the body and len of the bytes */
		files_upload_release(s, rq->key.tenant, rq->reserved - rq->len);
		rq->body = NULL;
		rq->len = rq->cap = rq->reserved = 0;
	}
	const char *action = strstr(url, "/files") ? "files" : strstr(url, "/execute") ? "session.execute"
			   : strstr(url, "/commands") ? "session.command" : "session";
	audit_request(s, &rq->key, action, method, url, out.ex ? 200 : out.d ? 202 : last_status);
	if (last_status >= 400)
		s->m.bad_requests++;
	if (out.d) {
		rq->d = out.d;
		return MHD_YES;
	}
	if (!out.ex) {
		rq->answered = true;
		return r;
	}
	rq->ex = out.ex;
	if (out.stream)
		return start_stream(rq, c);
	if (exec_done(rq->ex))
		return answer_exec(rq, c);
	exec_attach(rq->ex, c, false);
	return MHD_YES;
}

static int delete_execution(struct req *rq, struct MHD_Connection *c, const char *url)
{
	const char *id = url + strlen("/v1/executions/");
	struct execution *ex = exec_find(rq->s, id);
	/* another tenant's execution does not exist for this one */
	if (!ex || strcmp(exec_tenant(ex), rq->key.tenant) != 0) {
		audit_request(rq->s, &rq->key, "cancel", "DELETE", url, 404);
		return answer_error(rq, c, 404, "not_found", "id", "no such running execution");
	}
	exec_cancel(ex);
	audit_request(rq->s, &rq->key, "cancel", "DELETE", url, 202);
	rq->answered = true;
	json_t *b = json_pack("{s:s, s:s}", "id", id, "status", "cancelling");
	int r = srv_respond_json(c, 202, b);
	json_decref(b);
	return r;
}

static int get_metrics(struct req *rq, struct MHD_Connection *c)
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
	enum MHD_Result ok = MHD_queue_response(c, 200, r);
	MHD_destroy_response(r);
	return ok;
}

static int public_route(struct req *rq, struct MHD_Connection *c, const char *url,
			const char *method)
{
	struct srv *s = rq->s;
	bool get = strcmp(method, "GET") == 0;
	if (strcmp(url, "/healthz") == 0 && get) {
		rq->answered = true;
		json_t *b = json_pack("{s:s, s:i, s:i, s:b}", "status", s->stopping ? "stopping" : "ok",
				      "running", (int)s->running, "sessions", (int)s->n_sessions,
				      "keys_loaded", s->keys != NULL);
		int r = srv_respond_json(c, s->stopping ? 503 : 200, b);
		json_decref(b);
		return r;
	}
	if (strcmp(url, "/v1/openapi.json") == 0 && get) {
		rq->answered = true;
		struct MHD_Response *r = MHD_create_response_from_buffer(
			s->openapi_len, (void *)s->openapi, MHD_RESPMEM_PERSISTENT);
		if (!r)
			return MHD_NO;
		MHD_add_response_header(r, "Content-Type", "application/json");
		enum MHD_Result ok = MHD_queue_response(c, 200, r);
		MHD_destroy_response(r);
		return ok;
	}
	return -1;
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

/* The first call for a request: headers only. */
static int first_call(struct req *rq, struct MHD_Connection *c, const char *url,
		      const char *method)
{
	struct srv *s = rq->s;
	int r = public_route(rq, c, url, method);
	if (r >= 0)
		return r;
	if (!authenticate(s, c, &rq->key)) {
		audit_denied(s, c, "auth.denied", NULL, method, url, NULL);
		return answer_error(rq, c, 401, "unauthorized", NULL,
				    "a valid API key is required (Authorization: Bearer wk_...)");
	}
	bool exec_path = strcmp(url, "/v1/executions") == 0;
	bool exec_id_path = strncmp(url, "/v1/executions/", 15) == 0 && url[15];
	bool sess_path = strncmp(url, "/v1/sessions", 12) == 0 && (!url[12] || url[12] == '/');
	const char *sub = sess_path && url[12] ? strchr(url + 13, '/') : NULL;
	bool files_path = sub && strcmp(sub, "/files") == 0;
	unsigned need = strcmp(url, "/metrics") == 0 ? WARD_SCOPE_ADMIN
		      : exec_path || exec_id_path ? WARD_SCOPE_EXECUTE
		      : files_path ? WARD_SCOPE_FILES : sess_path ? WARD_SCOPE_SESSIONS : 0;
	if (!need) {
		audit_request(s, &rq->key, "unknown", method, url, 404);
		return answer_error(rq, c, 404, "not_found", NULL, "no such endpoint");
	}
	if (!(rq->key.scopes & need)) {
		audit_denied(s, c, "permission.denied", &rq->key, method, url,
			     ward_keys_scope_name(need));
		char msg[96];
		snprintf(msg, sizeof(msg), "this key lacks the '%s' scope", ward_keys_scope_name(need));
		return answer_error(rq, c, 403, "forbidden", "scope", msg);
	}
	if (sess_path) {
		if (strcmp(method, "POST") != 0 && strcmp(method, "PUT") != 0)
			return session_call(rq, c, url, method);
		rq->upload = strcmp(method, "PUT") == 0;
		rq->limit = rq->upload ? s->cfg.max_file : s->cfg.max_body;
		const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
		if (cl && strtoull(cl, NULL, 10) > rq->limit) {
			rq->too_big = true;
			return session_call(rq, c, url, method);
		}
		if (cl && rq->upload && !grow_upload(rq, strtoull(cl, NULL, 10)))
			return session_call(rq, c, url, method);
		rq->route = R_SESSION;
		return MHD_YES;
	}
	if (exec_path && strcmp(method, "POST") == 0) {
		const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
		rq->limit = s->cfg.max_body;
		if (cl && strtoull(cl, NULL, 10) > s->cfg.max_body) {
			rq->too_big = true;
			return post_execution(rq, c, url);
		}
		rq->route = R_EXEC_POST;
		return MHD_YES;
	}
	if (exec_id_path && strcmp(method, "DELETE") == 0)
		return delete_execution(rq, c, url);
	if (need == WARD_SCOPE_ADMIN && strcmp(method, "GET") == 0) {
		audit_request(s, &rq->key, "metrics", method, url, 200);
		return get_metrics(rq, c);
	}
	return answer_error(rq, c, 405, "method_not_allowed", NULL, "method not allowed here");
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
			if (rq->upload && rq->reserved >= rq->len + n)
				cap = (size_t)rq->reserved + 1; /* the Content-Length, reserved whole */
			if (cap > rq->limit + 1)
				cap = (size_t)rq->limit + 1;
			if (rq->upload && !grow_upload(rq, cap - 1))
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
	if (rq->answered || rq->route == R_NONE)
		return MHD_YES;
	if (rq->route == R_SESSION)
		return session_call(rq, c, url, method) == MHD_YES ? MHD_YES : MHD_NO;
	return post_execution(rq, c, url) == MHD_YES ? MHD_YES : MHD_NO;
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
__attribute__((format(printf, 2, 0)))
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
