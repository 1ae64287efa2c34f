/* lib/service/service.c — the service core's life: settings, the default
 * policy, keys, the audit hook, errors and replies, and the one epoll fd
 * a front end adds to its loop.
 *
 * Everything a front end drives goes through here or the request files
 * (execution.c, session.c, files.c); nothing here knows a transport.
 * ward_service_dispatch never blocks: it takes what epoll says is ready
 * (with a zero timeout) and steps the executions, sessions and worker
 * results it names, then whatever timers are due.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "base/util.h"
#include "internal.h"
#include "ward/egress.h"

void ward_service_config_defaults(struct ward_service_config *c)
{
	memset(c, 0, sizeof(*c));
	c->audit_sync = true;
	c->grace_ms = 10000;
	c->max_executions = 64;
	c->max_per_tenant = 16;
	c->session_ttl_ms = 10 * 60 * 1000;
	c->max_session_ttl_ms = 24 * 3600 * 1000;
	c->max_sessions = 64;
	c->max_sessions_per_tenant = 8;
	c->tenant_memory = 16ull << 30;
	c->max_file = 64u << 20;
	c->artifacts_inline_max = 1u << 20;
	c->max_event_subscribers = 8;
	c->pool[WARD_LANG_PYTHON] = 2;
}

/* The egress settings are owned through const pointers (the proxy reads
 * them as such). */
static void free_strv(const char *const *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free((void *)(uintptr_t)v[i]);
	free((void *)(uintptr_t)v);
}

void ward_service_config_release(struct ward_service_config *c)
{
	free_strv(c->egress_resolve, c->n_egress_resolve);
	free_strv(c->egress_allow_private, c->n_egress_allow_private);
	free_strv(c->egress_dns, c->n_egress_dns);
	free((void *)(uintptr_t)c->egress_ca);
	/* the header values are wiped before they are freed */
	ward_egress_credentials_free((struct ward_egress_credential *)(uintptr_t)c->egress_credentials,
				     c->n_egress_credentials);
	free(c->keys_file);
	free(c->audit_log);
	free(c->policy_file);
	free(c->runners);
	free(c->state_dir);
	json_decref(c->policy);
	json_decref(c->tenants);
	memset(c, 0, sizeof(*c));
}

/* --- errors and replies --- */

int ward_service_fail(struct ward_service_error *e, unsigned status, const char *code,
		      const char *field, const char *fmt, ...)
{
	va_list ap;
	e->status = status;
	ward_strlcpy(e->code, code, sizeof(e->code));
	ward_strlcpy(e->field, field ? field : "", sizeof(e->field));
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	return -1;
}

/* Bytes outside ASCII as '?': a message may quote what a client sent
 * (jansson's parse errors quote the input), and JSON needs UTF-8. */
static void ascii(char *dst, size_t n, const char *src)
{
	size_t i = 0;
	for (; src && src[i] && i + 1 < n; i++)
		dst[i] = (unsigned char)src[i] < 0x80 ? src[i] : '?';
	dst[i] = '\0';
}

json_t *svc_error_body(const char *code, const char *field, const char *msg)
{
	json_t *b = json_pack("{s:{s:s, s:s, s:s?}}", "error", "code", code, "message", msg,
			      "field", field);
	if (b)
		return b;
	char a[WARD_SERVICE_MSG_MAX], f[WARD_ERROR_FIELD_MAX + 8];
	ascii(a, sizeof(a), msg);
	ascii(f, sizeof(f), field);
	return json_pack("{s:{s:s, s:s, s:s?}}", "error", "code", code, "message", a, "field",
			 field ? f : NULL);
}

json_t *ward_service_error_json(const struct ward_service_error *e)
{
	return svc_error_body(e->code, e->field[0] ? e->field : NULL, e->message);
}

int svc_reply_error(struct ward_reply *r, unsigned status, const char *code, const char *field,
		    const char *fmt, ...)
{
	va_list ap;
	char msg[WARD_SERVICE_MSG_MAX];
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ward_service_fail(&r->err, status, code, field, "%s", msg);
	return 0;
}

int svc_reply(struct ward_reply *r, unsigned status, json_t *body)
{
	r->status = status;
	r->body = body;
	if (!body)
		svc_reply_error(r, 500, "internal", NULL, "out of memory");
	return 0;
}

void ward_reply_release(struct ward_reply *r)
{
	json_decref(r->body);
	if (r->ex)
		ward_execution_unref(r->ex);
	if (r->later)
		ward_answer_unref(r->later);
	memset(r, 0, sizeof(*r));
}

/* One path for every event: the audit log's line, which the event stream
 * (events.c) sends as it is; without a log, the same object unchained. */
void svc_audit(struct ward_service *s, const char *event, json_t *fields)
{
	bool wanted = svc_events_wanted(s);
	if (!s->audit && !wanted)
		return;
	struct ward_error err;
	char *line = NULL;
	ward_error_clear(&err);
	if (s->audit ? ward_audit_record_line(s->audit, event, fields, wanted ? &line : NULL,
					      &err) < 0
		     : !(line = ward_audit_event_line(event, fields, &err))) {
		char buf[1024];
		fprintf(stderr, "ward: serve: audit: %s\n", ward_error_format(&err, buf, sizeof(buf)));
	}
	if (line)
		svc_events_publish(s, fields, line);
}

void ward_service_audit(struct ward_service *svc, const char *event, json_t *fields)
{
	svc_audit(svc, event, fields);
}

struct ward_audit *ward_service_audit_log(struct ward_service *svc)
{
	return svc->audit;
}

/* --- keys --- */

/* The keys file is read again when it changed (mtime, inode or size). */
static void keys_reload(struct ward_service *s)
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

bool ward_service_keys_loaded(struct ward_service *svc)
{
	return svc->keys != NULL;
}

bool ward_service_authenticate(struct ward_service *svc, const char *token,
			       struct ward_key_info *key)
{
	memset(key, 0, sizeof(*key));
	if (svc->cfg.embedded || svc->cfg.no_keys)
		return false;
	keys_reload(svc);
	return token && svc->keys && ward_keys_authenticate(svc->keys, token, key) == 0;
}

/* --- life --- */

static int load_policy(struct ward_service *s)
{
	struct ward_error err;
	ward_error_clear(&err);
	int r = ward_policy_init(&s->policy, &err);
	if (r == 0 && s->cfg.policy_file) {
		_cleanup_free_ char *buf = NULL;
		size_t len;
		r = ward_read_file(s->cfg.policy_file, 1 << 20, &buf, &len);
		if (r < 0)
			ward_error_set(&err, -r, "serve", "unable to read '%s'", s->cfg.policy_file);
		else
			r = ward_policy_load_json(&s->policy, buf, len, s->cfg.policy_file, &err);
	}
	if (r == 0 && s->cfg.policy) {
		_cleanup_free_ char *txt = json_dumps(s->cfg.policy, JSON_COMPACT);
		r = txt ? ward_policy_load_json(&s->policy, txt, strlen(txt), "config: policy", &err)
			: -ENOMEM;
	}
	if (r == 0)
		r = ward_policy_validate(&s->policy, &err);
	if (r < 0) {
		char buf[1024];
		fprintf(stderr, "ward: error: %s\n", ward_error_format(&err, buf, sizeof(buf)));
	}
	return r;
}

static int open_audit(struct ward_service *s)
{
	if (!s->cfg.audit_log)
		return 0;
	struct ward_audit_options ao = {
		.full_text = s->cfg.audit_full_text,
		.sync = s->cfg.audit_sync ? WARD_AUDIT_SYNC_EVERY : WARD_AUDIT_SYNC_NONE,
	};
	struct ward_error err;
	if (ward_audit_open(s->cfg.audit_log, &ao, &s->audit, &err) < 0) {
		char buf[1024];
		fprintf(stderr, "ward: error: %s\n", ward_error_format(&err, buf, sizeof(buf)));
		return -1;
	}
	return 0;
}

int ward_service_new(struct ward_service_config *cfg, struct ward_service **out)
{
	struct ward_service *s = calloc(1, sizeof(*s));
	*out = s;
	if (!s)
		return -1;
	s->cfg = *cfg;
	memset(cfg, 0, sizeof(*cfg));
	s->state_lock = -1;
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->cfg.embedded) /* a program's own run: nobody to authenticate, no files API */
		return s->epfd < 0 || load_policy(s) < 0 ||
				       (s->cfg.egress && svc_egress_start(s) < 0)
			       ? -1
			       : 0;
	if (!s->cfg.no_keys && !s->cfg.keys_file &&
	    !(s->cfg.keys_file = strdup(ward_keys_default_path())))
		return -1;
	/* the egress proxy starts with the state directory (its CA lives
	 * there): ward_service_open_state */
	if (s->epfd < 0 || load_policy(s) < 0 || open_audit(s) < 0 || svc_workers_start(s) < 0 ||
	    warm_start(s) < 0)
		return -1;
	if (s->cfg.no_keys)
		return 0;
	keys_reload(s);
	if (!s->keys)
		fprintf(stderr, "ward: serve: warning: no keys in '%s': every request will be refused "
			"(ward keys add)\n", s->cfg.keys_file);
	return 0;
}

const struct ward_service_config *ward_service_settings(const struct ward_service *svc)
{
	return &svc->cfg;
}

void ward_service_close(struct ward_service *s)
{
	warm_stop(s);
	svc_teardown_flush(s);
	svc_workers_stop(s); /* before the answers its jobs fill go */
	svc_teardown_flush(s); /* what their last answers queued (a refill done as it stopped) */
	warm_free(s);
	session_release_all(s);
}

void ward_service_free(struct ward_service *s)
{
	if (!s)
		return;
	ward_service_close(s);
	svc_events_close(s);
	svc_egress_stop(s); /* after every sandbox: they hold attachments */
	ward_audit_free(s->audit);
	ward_keys_free(s->keys);
	ward_policy_release(&s->policy);
	ward_service_config_release(&s->cfg);
	svc_state_close(s);
	if (s->epfd >= 0)
		close(s->epfd);
	free(s);
}

/* --- the loop --- */

int ward_service_fd(const struct ward_service *svc)
{
	return svc->epfd;
}

void ward_service_dispatch(struct ward_service *s)
{
	struct epoll_event evs[64];
	svc_teardown_flush(s);
	int n = epoll_wait(s->epfd, evs, ARRAY_SIZE(evs), 0);
	for (int i = 0; i < n; i++) {
		struct watch *w = evs[i].data.ptr;
		if (w->kind == WATCH_EXEC)
			exec_dispatch(s, w->ptr);
		else if (w->kind == WATCH_SESSION)
			session_dispatch(s, w->ptr);
		else if (w->kind == WATCH_WORKER)
			svc_workers_dispatch(s);
		else if (w->kind == WATCH_EGRESS)
			svc_egress_dispatch(s);
	}
	exec_tick(s);
	session_tick(s);
	warm_tick(s);
	if (s->stopping && s->execs && !s->killed_all && ward_now_ns() >= s->stop_deadline_ns)
		ward_service_stop_now(s);
	if (s->stopping && !s->execs && s->n_sessions)
		session_destroy_all(s, "the daemon stopped");
}

int ward_service_timeout(struct ward_service *s)
{
	int t = exec_timeout(s), se = session_timeout(s), wt = warm_timeout(s);
	if (se >= 0 && (t < 0 || se < t))
		t = se;
	if (wt >= 0 && (t < 0 || wt < t))
		t = wt;
	if (s->teardowns)
		t = 0;
	if (s->stopping && (t < 0 || t > 50))
		t = 50;
	return t;
}

void ward_service_stop(struct ward_service *s)
{
	if (s->stopping) {
		s->stop_deadline_ns = ward_now_ns(); /* asked again: no more grace */
		return;
	}
	s->stopping = true;
	warm_stop(s); /* nothing more is admitted: what waits goes now */
	s->stop_deadline_ns = ward_now_ns() + s->cfg.grace_ms * 1000000ull;
	json_t *f = json_pack("{s:i, s:I}", "running", (int)s->running, "grace_ms",
			      (json_int_t)s->cfg.grace_ms);
	svc_audit(s, "daemon.stopping", f);
	json_decref(f);
}

void ward_service_stop_now(struct ward_service *s)
{
	s->killed_all = true;
	exec_kill_all(s);
	/* a session's call ends with its sandbox, whatever its agent does */
	session_destroy_all(s, "the daemon stopped");
}

bool ward_service_idle(const struct ward_service *s)
{
	return !s->execs && !s->n_sessions;
}

unsigned ward_service_running(const struct ward_service *s)
{
	return s->running;
}

unsigned ward_service_sessions(const struct ward_service *s)
{
	return s->n_sessions;
}

/* --- counters the front end keeps in the core's metrics --- */

void ward_service_count_request(struct ward_service *s)
{
	s->m.requests++;
}

/* A denial never takes a tenant entry: only a tenant already tracked counts it. */
void ward_service_count_denial(struct ward_service *s, const char *tenant)
{
	s->m.denials++;
	struct svc_tenant_count *t = metrics_tenant_find(s, tenant);
	if (t)
		t->denials++;
}

void ward_service_count_bad_request(struct ward_service *s)
{
	s->m.bad_requests++;
}

void ward_service_count_eviction(struct ward_service *s)
{
	s->m.connections_evicted++;
}
