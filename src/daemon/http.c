/* src/daemon/http.c — the HTTP side of `ward serve`: connections, auth,
 * limits, libmicrohttpd's callbacks (handlers.c answers the routes).
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
#include "http.h"

enum { AUDIT_PATH_MAX = 1024, DENIED_INTERVAL_MS = 10000 };

/* The status of the last answer queued (for the audit line). */
static unsigned last_status;
/* The next answer closes its connection (a refused client keeps no slot). */
static bool close_next;

unsigned http_last_status(void)
{
	return last_status;
}

void http_note_status(unsigned status)
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
	if (status == 401) /* RFC 9110: a 401 names its scheme */
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"ward\"");
	if (close_next)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
	close_next = false;
	last_status = status;
	enum MHD_Result ok = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ok;
}

int srv_respond_error(struct MHD_Connection *c, const struct ward_service_error *e)
{
	json_t *b = ward_service_error_json(e); /* bytes that are not UTF-8 become '?' */
	int r = srv_respond_json(c, e->status, b);
	json_decref(b);
	return r;
}

int answer_error(struct req *rq, unsigned status, const char *code, const char *field,
		 const char *msg)
{
	struct ward_service_error e;
	rq->answered = true;
	close_next = status == 401;
	if (status == 401 || status == 403)
		ward_service_count_denial(rq->s->svc, rq->key.tenant[0] ? rq->key.tenant : NULL);
	ward_service_fail(&e, status, code, field, "%s", msg);
	return srv_respond_error(rq->c, &e);
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
		ward_service_count_eviction(s->svc);
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
		ward_service_count_eviction(s->svc);
		unauth_close(unauth_head);
	}
}

bool http_authenticate(struct req *rq)
{
	const char *h = MHD_lookup_connection_value(rq->c, MHD_HEADER_KIND, "Authorization");
	if (!ward_service_authenticate(rq->s->svc, h && strncmp(h, "Bearer ", 7) == 0 ? h + 7 : NULL,
				       &rq->key))
		return false;
	conn_authenticated(rq->c);
	return true;
}

void audit_request(struct srv *s, const struct ward_key_info *k, const char *action,
			  const char *method, const char *url, unsigned status)
{
	json_t *f = json_pack("{s:s, s:s, s:s, s:s, s:i}", "key_id", k->id, "tenant",
			      k->tenant, "action", action, "method", method, "status", (int)status);
	if (f && ward_audit_clip(f, "path", url, strlen(url), AUDIT_PATH_MAX) == 0)
		ward_service_audit(s->svc, "request", f);
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

void audit_denied(struct srv *s, struct MHD_Connection *c, const char *event,
		  const struct ward_key_info *k, const char *method, const char *url,
		  const char *scope)
{
	char src[WARD_AUDIT_SOURCE_MAX];
	if (!ward_service_audit_log(s->svc))
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
		ward_service_audit(s->svc, event, f);
	json_decref(f);
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
		rq->c = c;
		ward_service_count_request(rq->s->svc);
		*con_cls = rq;
		return http_first_call(rq, url, method) == MHD_YES ? MHD_YES : MHD_NO;
	}
	if (*upload_size) {
		size_t n = *upload_size;
		*upload_size = 0;
		return http_take_body(rq, upload, n) ? MHD_YES : MHD_NO;
	}
	return http_next_call(rq) == MHD_YES ? MHD_YES : MHD_NO;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
		      enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)c;
	struct req *rq = *con_cls;
	if (!rq)
		return;
	http_req_end(rq, toe != MHD_REQUEST_TERMINATED_COMPLETED_OK);
	if (rq->reserved)
		ward_service_upload_release(rq->s->svc, rq->key.tenant, rq->reserved);
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
	srv_mcp_tick(s);
	if (denials)
		ward_audit_tally_flush(denials, ward_service_audit_log(s->svc), ward_now_ns(), false);
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
	int mt = srv_mcp_timeout(s);
	if (mt >= 0 && (best < 0 || mt < best))
		best = mt;
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
		ward_audit_tally_flush(denials, ward_service_audit_log(s->svc), ward_now_ns(), true);
	ward_audit_tally_free(denials);
	denials = NULL;
}
