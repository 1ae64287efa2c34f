/* src/daemon/session.c — sessions: a sandbox that lives between calls.
 *
 * A session is one sandbox running the session agent
 * (runners/session/agent.py), which starts a language kernel per named
 * context and runs commands; variables, files and installed packages live
 * as long as the sandbox. The daemon speaks to the agent in JSON lines,
 * listening to every message and matching answers to requests by
 * parent_id: one call (an execute or a foreground command) at a time, plus
 * small requests (a background command's status, a kill) that may overlap
 * it. Everything the agent says is a claim from inside the sandbox, and
 * can only be about the sandbox's own work: a call that failed is named by
 * the cgroup's counters (an OOM kill or a refused fork during the call
 * makes it memory_limit or pids_limit), its wall time is the daemon's own
 * clock, and a call the agent does not end in time is ended by killing
 * the whole sandbox.
 *
 * A session that ends (deleted, expired, killed by a limit, lost in a
 * crash of the daemon) leaves a tombstone for an hour, so a client asking
 * for it learns why instead of a bare 404. A state file per live session
 * (state_dir/sessions/ID.json) lets the next daemon mark a killed one's
 * sessions lost; their sandboxes are found by their cgroups, never by a
 * pid in the file.
 */
#include <dirent.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#include "base/util.h"
#include "daemon.h"

enum {
	MAX_TOMBSTONES = 1024,
	AGENT_ANSWER_MS = 5000,      /* a small request the agent leaves unanswered */
	INTERRUPT_AFTER_MS = 1000,   /* past a call's timeout: ask the agent */
	KILL_AFTER_MS = 5000,        /* past a call's timeout: end the sandbox */
	SESSION_LIFETIME_MS = 24 * 3600 * 1000,
	/* Requests the agent has not read wait in the daemon's memory: past
	 * AGENT_UNSENT_MAX none is queued (503 agent_busy), so they hold at
	 * most that plus one request; and an agent that reads none of them
	 * for AGENT_STALL_MS (stopped, or stuck) ends its session. */
	AGENT_UNSENT_MAX = 1 << 20,
	AGENT_STALL_MS = 10000,
};

enum pend_kind { PEND_BG_START, PEND_STATUS, PEND_KILL };

struct session {
	struct session *next;
	struct srv *s;
	char id[24];
	struct ward_key_info key;
	bool live;
	char ended[16];              /* "expired", "lost", "dead" (tombstones) */
	char reason[200];
	struct ward_policy call;     /* per-call policy (its timeout is a call's) */
	struct ward_kernel *k;
	char sandbox_id[40];
	int epfd;
	struct watch w;
	int reg[WARD_KERNEL_NFDS];
	uint64_t wake_ns;
	bool ready;
	double created, last_used;   /* epoch seconds */
	uint64_t ttl_ms, expires_ns, tomb_until_ns;
	char digest[WARD_AUDIT_HEX_SIZE];
	uint64_t mem;
	struct execution *fg;
	uint64_t fg_timeout_ms;
	bool fg_interrupted;
	bool backstopped;            /* killed because a call overran its timeout */
	struct ward_sandbox_stats before;
	json_t *contexts;            /* "lang/name" -> {language, context, executions} */
	uint64_t n_calls;
	struct deferred *pend;
	size_t unsent;               /* what the agent had not read at the last look */
	uint64_t stall_since_ns;     /* since when it has read none of it (0: all read) */
};

static double epoch_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct ward_sandbox *session_sandbox(struct session *se)
{
	return se->k ? ward_kernel_sandbox(se->k) : NULL;
}

const struct ward_key_info *session_owner(const struct session *se) { return &se->key; }
const char *session_id(const struct session *se) { return se->id; }

void session_touch(struct session *se)
{
	se->last_used = epoch_now();
	se->expires_ns = ward_now_ns() + se->ttl_ms * 1000000ull;
}

/* --- deferred answers --- */

struct deferred *deferred_new(struct MHD_Connection *c)
{
	struct deferred *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->refs = 2; /* the session's and the request's */
	d->c = c;
	MHD_suspend_connection(c);
	return d;
}

void deferred_answer(struct deferred *d, unsigned status, json_t *body)
{
	if (d->done) {
		json_decref(body);
		return;
	}
	d->done = true;
	d->status = status;
	d->body = body;
	if (d->c)
		MHD_resume_connection(d->c);
}

void deferred_unref(struct deferred *d)
{
	if (d && --d->refs == 0) {
		if (d->resp)
			MHD_destroy_response(d->resp);
		json_decref(d->body);
		json_decref(d->err);
		free(d);
	}
}

static void answer_pends(struct session *se, unsigned status, const char *code, const char *msg)
{
	struct deferred *d = se->pend, *next;
	se->pend = NULL;
	for (; d; d = next) {
		next = d->next;
		deferred_answer(d, status, srv_error_body(code, NULL, msg));
		deferred_unref(d);
	}
}

/* --- quotas --- */

void srv_tenant_quota(struct srv *s, const char *tenant, struct sess_quota *q)
{
	q->max_per_tenant = s->cfg.max_per_tenant;
	q->max_sessions_per_tenant = s->cfg.max_sessions_per_tenant;
	q->tenant_memory = s->cfg.tenant_memory;
	json_t *t = json_object_get(s->cfg.tenants, tenant);
	json_t *v;
	if ((v = json_object_get(t, "max_per_tenant")) && json_is_integer(v))
		q->max_per_tenant = (uint64_t)json_integer_value(v);
	if ((v = json_object_get(t, "max_sessions_per_tenant")) && json_is_integer(v))
		q->max_sessions_per_tenant = (uint64_t)json_integer_value(v);
	if ((v = json_object_get(t, "tenant_memory")) && json_is_integer(v))
		q->tenant_memory = (uint64_t)json_integer_value(v);
}

/* --- the state file --- */

static int state_path(struct srv *s, const char *id, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/sessions/%s.json", s->cfg.state_dir, id);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static void state_write(struct session *se)
{
	char path[PATH_MAX];
	if (state_path(se->s, se->id, path, sizeof(path)) < 0)
		return;
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:f}", "id", se->id, "tenant",
			      se->key.tenant, "key_id", se->key.id, "sandbox_id", se->sandbox_id,
			      "created", se->created);
	int fd = o ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
	if (o && (fd < 0 || json_dumpfd(o, fd, JSON_COMPACT) < 0))
		fprintf(stderr, "ward: serve: unable to write '%s': %s\n", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	json_decref(o);
}

static void state_remove(struct session *se)
{
	char path[PATH_MAX];
	if (state_path(se->s, se->id, path, sizeof(path)) == 0)
		unlink(path);
}

/* --- life and death --- */

static void sync_fds(struct session *se);

static void unwatch(struct session *se)
{
	for (int i = 0; i < WARD_KERNEL_NFDS; i++)
		se->reg[i] = -1;
	if (se->epfd >= 0) {
		epoll_ctl(se->s->epfd, EPOLL_CTL_DEL, se->epfd, NULL);
		close(se->epfd);
		se->epfd = -1;
	}
}

static void release_quota(struct session *se)
{
	struct srv *s = se->s;
	struct srv_tenant_count *t = metrics_tenant(s, se->key.tenant);
	if (t) {
		t->sessions -= t->sessions ? 1 : 0;
		t->memory -= se->mem < t->memory ? se->mem : t->memory;
	}
	s->n_sessions -= s->n_sessions ? 1 : 0;
	se->mem = 0;
}

static void count_tombstones(struct srv *s)
{
	unsigned n = 0;
	struct session *oldest = NULL;
	for (struct session *se = s->sessions; se; se = se->next)
		if (!se->live) {
			n++;
			if (!oldest || se->tomb_until_ns < oldest->tomb_until_ns)
				oldest = se;
		}
	if (n > MAX_TOMBSTONES && oldest)
		oldest->tomb_until_ns = 1; /* the next tick removes it */
}

/* Ends a live session: kills its sandbox, ends its call with the
 * sandbox's verdict, answers what waits, and leaves a tombstone (or, for a
 * DELETE, nothing). */
static void end_session(struct session *se, const char *ended, const char *reason, bool tomb)
{
	struct srv *s = se->s;
	if (!se->live)
		return;
	struct ward_verdict v;
	ward_verdict_init(&v);
	struct ward_error err;
	ward_error_clear(&err);
	if (se->k) {
		ward_kernel_finish(se->k, &v, &err);
		se->k = NULL;
	}
	unwatch(se);
	if (se->backstopped) {
		/* the call overran: its own timeout is the limit it met */
		v.status = WARD_STATUS_TIMEOUT;
		v.limit = "timeout";
		v.limit_value = se->fg_timeout_ms;
		if (!reason)
			reason = "a call did not end within its timeout and 5 s more";
	}
	if (se->fg) {
		struct execution *fg = se->fg;
		se->fg = NULL;
		exec_session_end(fg, NULL, &v, NULL, NULL);
	}
	char msg[256];
	snprintf(msg, sizeof(msg), "session %s has ended (%s)", se->id, ended);
	answer_pends(se, 410, "session_ended", msg);
	se->live = false;
	ward_strlcpy(se->ended, ended, sizeof(se->ended));
	if (reason)
		ward_strlcpy(se->reason, reason, sizeof(se->reason));
	else
		snprintf(se->reason, sizeof(se->reason), "%s%s%s", ward_status_name(v.status),
			 v.limit ? ": limit " : "", v.limit ? v.limit : "");
	release_quota(se);
	state_remove(se);
	json_t *f = json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:I}}", "session_id", se->id, "tenant",
			      se->key.tenant, "sandbox_id", se->sandbox_id, "ended", ended, "reason",
			      se->reason, "usage", "peak_memory_bytes",
			      (json_int_t)v.usage.peak_memory_bytes);
	srv_audit(s, strcmp(ended, "expired") == 0 ? "session.expired"
		     : strcmp(ended, "deleted") == 0 ? "session.delete"
		     : strcmp(ended, "shutdown") == 0 ? "session.shutdown" : "session.dead", f);
	json_decref(f);
	f = json_pack("{s:s, s:s}", "sandbox_id", se->sandbox_id, "session_id", se->id);
	srv_audit(s, "sandbox.destroy", f);
	json_decref(f);
	ward_verdict_release(&v);
	se->tomb_until_ns = tomb ? ward_now_ns() + 3600ull * 1000000000ull : 1;
	if (tomb)
		count_tombstones(s);
}

static void session_free(struct session *se)
{
	ward_policy_release(&se->call);
	json_decref(se->contexts);
	free(se);
}

static void remove_session(struct srv *s, struct session *se)
{
	for (struct session **p = &s->sessions; *p; p = &(*p)->next)
		if (*p == se) {
			*p = se->next;
			break;
		}
	session_free(se);
}

/* --- the agent's messages --- */

static void context_used(struct session *se, json_t *reply)
{
	const char *lang = json_string_value(json_object_get(reply, "language"));
	const char *ctx = json_string_value(json_object_get(reply, "context"));
	if (!lang || !ctx || strlen(lang) > 16 || strlen(ctx) > 64)
		return;
	char key[96];
	snprintf(key, sizeof(key), "%s/%s", lang, ctx);
	json_t *c = json_object_get(se->contexts, key);
	if (json_is_true(json_object_get(reply, "context_lost"))) {
		json_object_del(se->contexts, key);
		return;
	}
	if (!c && json_object_size(se->contexts) < 64) {
		c = json_pack("{s:s, s:s, s:I}", "language", lang, "context", ctx, "executions",
			      (json_int_t)0);
		json_object_set_new(se->contexts, key, c);
	}
	if (c)
		json_object_set_new(c, "executions",
				    json_integer(json_integer_value(json_object_get(c, "executions")) + 1));
}

static void pend_reply(struct session *se, struct deferred *d, json_t *c)
{
	json_t *body = json_deep_copy(c);
	unsigned status = 200;
	if (!body)
		return;
	json_object_set_new(body, "session_id", json_string(se->id));
	if (d->kind == PEND_BG_START) {
		const char *st = json_string_value(json_object_get(c, "status"));
		if (st && strcmp(st, "running") == 0) {
			status = 202;
		} else {
			char msg[400];
			const char *en = json_string_value(json_object_get(d->err, "ename"));
			const char *ev = json_string_value(json_object_get(d->err, "evalue"));
			snprintf(msg, sizeof(msg), "the command could not be started%s%s%s%.300s",
				 en ? ": " : "", en ? en : "", ev ? ": " : "", ev ? ev : "");
			json_decref(body);
			body = srv_error_body("command_failed", "cmd", msg);
			status = 400;
		}
	} else if (d->kind == PEND_STATUS || d->kind == PEND_KILL) {
		const char *state = json_string_value(json_object_get(c, "state"));
		if (!state || strcmp(state, "unknown") == 0) {
			json_decref(body);
			body = srv_error_body("not_found", "command_id", "no such command in this session");
			status = 404;
		}
	}
	deferred_answer(d, status, body);
}

/* Keeps the error that explains a background start that failed. */
static void pend_message(struct deferred *d, json_t *m)
{
	const char *type = json_string_value(json_object_get(m, "msg_type"));
	if (!d->err && type && strcmp(type, "error") == 0)
		d->err = json_incref(json_object_get(m, "content"));
}

static void on_message(json_t *m, void *ctx)
{
	struct session *se = ctx;
	const char *type = json_string_value(json_object_get(m, "msg_type"));
	const char *pid = json_string_value(json_object_get(m, "parent_id"));
	json_t *c = json_object_get(m, "content");
	if (!type)
		return;
	if (!pid) {
		if (strcmp(type, "status") == 0)
			se->ready = true;
		return;
	}
	struct execution *fg = se->fg;
	if (fg && strcmp(pid, exec_session_request(fg)) == 0) {
		if (strcmp(type, "execute_reply") == 0 || strcmp(type, "command_reply") == 0) {
			struct ward_sandbox_stats after;
			ward_sandbox_stats(session_sandbox(se), &after);
			if (strcmp(type, "execute_reply") == 0)
				context_used(se, c);
			se->fg = NULL;
			exec_session_end(fg, c, NULL, &se->before, &after);
			session_touch(se);
		} else {
			exec_session_message(fg, m);
		}
		return;
	}
	for (struct deferred **p = &se->pend; *p; p = &(*p)->next) {
		struct deferred *d = *p;
		if (strcmp(d->req_id, pid) != 0)
			continue;
		if (strstr(type, "_reply")) {
			*p = d->next;
			pend_reply(se, d, c);
			deferred_unref(d);
		} else {
			pend_message(d, m);
		}
		return;
	}
	/* late messages of an interrupted call: dropped */
}

/* --- the loop's part --- */

static void sync_fds(struct session *se)
{
	struct pollfd fds[WARD_KERNEL_NFDS];
	int t = ward_kernel_pollfds(se->k, fds);
	se->wake_ns = srv_watch(se->epfd, se->reg, fds, t);
}

static void send_interrupt(struct session *se, const char *reason)
{
	char id[WARD_KERNEL_ID_SIZE];
	json_t *c = json_pack("{s:s}", "reason", reason);
	struct ward_error err;
	if (c)
		ward_kernel_send(se->k, "interrupt_request", c, id, &err);
	json_decref(c);
}

void session_interrupt(struct session *se, const char *reason)
{
	if (!se->live || !se->fg || !se->k)
		return;
	send_interrupt(se, reason);
	se->fg_interrupted = true;
	sync_fds(se);
}

/* A call past its timeout: the agent was told and did not end it. */
static void backstop(struct session *se, uint64_t now)
{
	if (!se->fg || !se->fg_timeout_ms)
		return;
	uint64_t start = exec_started_ns(se->fg);
	uint64_t t = se->fg_timeout_ms * 1000000ull;
	if (!se->fg_interrupted && now >= start + t + INTERRUPT_AFTER_MS * 1000000ull) {
		send_interrupt(se, "timeout");
		se->fg_interrupted = true;
	}
	if (now >= start + t + KILL_AFTER_MS * 1000000ull && !se->backstopped) {
		se->backstopped = true;
		ward_sandbox_kill(session_sandbox(se), WARD_KILL_TIMEOUT);
	}
}

void session_dispatch(struct srv *s, struct session *se)
{
	(void)s;
	if (!se->live || !se->k)
		return;
	json_t *reply = NULL;
	int r = ward_kernel_step(se->k, &reply);
	json_decref(reply);
	if (r == -ECHILD) {
		end_session(se, "dead", NULL, true);
		return;
	}
	if (se->live)
		sync_fds(se);
}

/* The agent reads its requests, or its session ends: it never holds the
 * daemon's memory for long. */
static void check_stall(struct session *se, uint64_t now)
{
	size_t unsent = se->k ? ward_kernel_unsent(se->k) : 0;
	if (!unsent)
		se->stall_since_ns = 0;
	else if (!se->stall_since_ns || unsent < se->unsent)
		se->stall_since_ns = now; /* first seen, or it read some */
	se->unsent = unsent;
	if (se->stall_since_ns && now >= se->stall_since_ns + AGENT_STALL_MS * 1000000ull) {
		char why[160];
		snprintf(why, sizeof(why), "the session's agent read none of its requests for %d s "
			 "(%zu bytes waiting): it was stopped or is stuck", AGENT_STALL_MS / 1000, unsent);
		end_session(se, "stalled", why, true);
	}
}

static uint64_t next_wake(struct session *se)
{
	uint64_t best = se->live ? se->wake_ns : 0;
	uint64_t cand[3] = { 0, 0, 0 };
	if (se->live && !se->fg && !se->pend)
		cand[0] = se->expires_ns;
	if (se->live && se->fg && se->fg_timeout_ms)
		cand[1] = exec_started_ns(se->fg) + se->fg_timeout_ms * 1000000ull +
			  (se->fg_interrupted ? KILL_AFTER_MS : INTERRUPT_AFTER_MS) * 1000000ull;
	if (!se->live)
		cand[2] = se->tomb_until_ns;
	if (se->live && se->stall_since_ns && (!best || se->stall_since_ns + AGENT_STALL_MS * 1000000ull < best))
		best = se->stall_since_ns + AGENT_STALL_MS * 1000000ull;
	for (struct deferred *d = se->pend; d; d = d->next)
		if (!best || d->deadline_ns < best)
			best = d->deadline_ns;
	for (int i = 0; i < 3; i++)
		if (cand[i] && (!best || cand[i] < best))
			best = cand[i];
	return best;
}

int session_timeout(struct srv *s)
{
	uint64_t now = ward_now_ns(), best = 0;
	for (struct session *se = s->sessions; se; se = se->next) {
		uint64_t w = next_wake(se);
		if (w && (!best || w < best))
			best = w;
	}
	if (!best)
		return -1;
	return best <= now ? 0 : (int)((best - now) / 1000000 + 1);
}

static void expire_pends(struct session *se, uint64_t now)
{
	for (struct deferred **p = &se->pend; *p;) {
		struct deferred *d = *p;
		if (d->deadline_ns > now) {
			p = &d->next;
			continue;
		}
		*p = d->next;
		deferred_answer(d, 504, srv_error_body("agent_timeout", NULL,
						       "the session's agent did not answer in time"));
		deferred_unref(d);
	}
}

void session_tick(struct srv *s)
{
	uint64_t now = ward_now_ns();
	struct session *se = s->sessions, *next;
	for (; se; se = next) {
		next = se->next;
		if (!se->live) {
			if (se->tomb_until_ns && se->tomb_until_ns <= now)
				remove_session(s, se);
			continue;
		}
		if (se->wake_ns && se->wake_ns <= now)
			session_dispatch(s, se);
		if (!se->live)
			continue;
		backstop(se, now);
		expire_pends(se, now);
		check_stall(se, now);
		if (!se->live)
			continue;
		if (!se->fg && !se->pend && se->expires_ns <= now) {
			char why[96];
			snprintf(why, sizeof(why), "idle for its TTL (%llu s)",
				 (unsigned long long)(se->ttl_ms / 1000));
			end_session(se, "expired", why, true);
		}
	}
}

void session_destroy_all(struct srv *s, const char *reason)
{
	for (struct session *se = s->sessions; se; se = se->next)
		if (se->live)
			end_session(se, "shutdown", reason, false);
}

void session_release_all(struct srv *s)
{
	session_destroy_all(s, "the daemon stopped");
	while (s->sessions) {
		struct session *se = s->sessions;
		s->sessions = se->next;
		session_free(se);
	}
}

/* --- JSON views --- */

static json_t *session_json(struct session *se)
{
	const char *status = !se->live ? se->ended : se->fg ? "busy" : se->ready ? "ready" : "starting";
	json_t *ctxs = json_array();
	const char *key;
	json_t *v;
	json_object_foreach(se->contexts, key, v)
		json_array_append(ctxs, v);
	double expires = se->last_used + (double)se->ttl_ms / 1000.0;
	json_t *o = json_pack("{s:s, s:s, s:s, s:f, s:f, s:f, s:f, s:s, s:s, s:s, s:o, s:I, s:I}",
			      "id", se->id, "status", status, "image", "host", "created_at", se->created,
			      "last_used_at", se->last_used, "expires_at", expires,
			      "ttl", (double)se->ttl_ms / 1000.0, "sandbox_id", se->sandbox_id,
			      "policy_digest", se->digest, "tenant", se->key.tenant,
			      "contexts", ctxs ? ctxs : json_array(),
			      "executions", (json_int_t)se->n_calls,
			      "memory_limit", (json_int_t)se->call.memory);
	if (o && !se->live)
		json_object_set_new(o, "reason", json_string(se->reason));
	if (o && strcmp(se->ended, "lost") == 0) {
		/* what the state file did not keep is unknown, not a default */
		const char *unknown[] = { "ttl", "expires_at", "policy_digest", "memory_limit" };
		for (size_t i = 0; i < ARRAY_SIZE(unknown); i++)
			json_object_set_new(o, unknown[i], json_null());
	}
	return o;
}

static int respond(struct MHD_Connection *c, unsigned status, json_t *body)
{
	int r = srv_respond_json(c, status, body);
	json_decref(body);
	return r;
}

static int fail(struct MHD_Connection *c, unsigned status, const char *code, const char *field,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int fail(struct MHD_Connection *c, unsigned status, const char *code, const char *field,
		const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return srv_respond_error(c, status, code, field, "%s", msg);
}

/* --- requests --- */

/* The body as an object with only the known keys ({} when there is none),
 * or NULL after answering 400. */
static json_t *parse_body(struct MHD_Connection *c, const char *body, size_t len,
			  const char *const *known, size_t n_known, int *answered)
{
	unsigned st;
	json_t *error = NULL;
	*answered = -1;
	if (!body && len == 0)
		return json_object();
	json_t *root = srv_parse_object(body, len, known, n_known, &st, &error);
	if (!root)
		*answered = respond(c, st, error);
	return root;
}

static bool name_ok(const char *n, size_t max)
{
	size_t len = strlen(n);
	if (!len || len > max)
		return false;
	for (const char *p = n; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' || *p == '.'))
			return false;
	return true;
}

static int quota_refusal(struct srv *s, struct MHD_Connection *c, const char *tenant,
			 uint64_t memory)
{
	struct sess_quota q;
	srv_tenant_quota(s, tenant, &q);
	struct srv_tenant_count *t = metrics_tenant(s, tenant);
	if (s->stopping)
		return fail(c, 503, "shutting_down", NULL, "the daemon is shutting down");
	if (!t) /* quotas that cannot be counted are not granted */
		return fail(c, 429, "quota_exceeded", "tenants",
			    "the daemon tracks at most %d tenants", SRV_MAX_TENANTS);
	if (s->n_sessions >= s->cfg.max_sessions)
		return fail(c, 429, "quota_exceeded", "max_sessions",
			    "quota max_sessions (%llu) reached; retry later",
			    (unsigned long long)s->cfg.max_sessions);
	if (t->running + t->sessions >= q.max_per_tenant)
		return fail(c, 429, "quota_exceeded", "max_per_tenant",
			    "quota max_per_tenant (%llu sandboxes: executions and sessions) reached "
			    "for tenant '%s'", (unsigned long long)q.max_per_tenant, tenant);
	if (t->sessions >= q.max_sessions_per_tenant)
		return fail(c, 429, "quota_exceeded", "max_sessions_per_tenant",
			    "quota max_sessions_per_tenant (%llu) reached for tenant '%s'",
			    (unsigned long long)q.max_sessions_per_tenant, tenant);
	if (q.tenant_memory && t->memory + memory > q.tenant_memory)
		return fail(c, 429, "quota_exceeded", "tenant_memory",
			    "quota tenant_memory (%llu bytes) reached for tenant '%s': %llu in use, "
			    "%llu asked", (unsigned long long)q.tenant_memory, tenant,
			    (unsigned long long)t->memory, (unsigned long long)memory);
	return -1;
}

static int start_sandbox(struct session *se, const struct ward_policy *p, struct ward_error *err)
{
	struct ward_policy sp;
	int r = ward_policy_copy(&sp, p, err);
	if (r < 0)
		return r;
	/* The sandbox lives for the session; a call's limits are the agent's
	 * and the backstop's. */
	sp.timeout_ms = SESSION_LIFETIME_MS;
	sp.cpu_time_ms = 0;
	static const char *const env[] = {
		"PIP_BREAK_SYSTEM_PACKAGES=1", /* --user installs land in /workspace */
		"PIP_DISABLE_PIP_VERSION_CHECK=1",
		"XDG_CACHE_HOME=/tmp/.cache",
		"npm_config_cache=/tmp/.npm",
		"npm_config_update_notifier=false",
	};
	for (size_t i = 0; i < ARRAY_SIZE(env) && r == 0; i++)
		r = ward_policy_set(&sp, "env", env[i], "session", err);
	json_t *lint = r == 0 ? (json_t *)ward_policy_lint_json(p) : NULL;
	struct ward_kernel_options ko = { .lang = WARD_LANG_PYTHON, .session = true, .lint = lint,
					  .runners_dir = se->s->cfg.runners };
	if (r == 0)
		r = ward_kernel_begin(&sp, &ko, &se->k, err);
	json_decref(lint);
	ward_policy_release(&sp);
	if (r < 0)
		return r;
	ward_kernel_listen(se->k, on_message, se);
	ward_strlcpy(se->sandbox_id, ward_sandbox_id(ward_kernel_sandbox(se->k)), sizeof(se->sandbox_id));
	se->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (se->epfd < 0)
		return ward_error_set(err, errno, "serve", "epoll_create1");
	se->w = (struct watch){ .kind = WATCH_SESSION, .ptr = se };
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &se->w };
	epoll_ctl(se->s->epfd, EPOLL_CTL_ADD, se->epfd, &ev);
	sync_fds(se);
	return 0;
}

static struct session *session_new(struct srv *s, const struct ward_key_info *key)
{
	struct session *se = calloc(1, sizeof(*se));
	if (!se)
		return NULL;
	se->s = s;
	se->key = *key;
	se->epfd = -1;
	for (int i = 0; i < WARD_KERNEL_NFDS; i++)
		se->reg[i] = -1;
	se->contexts = json_object();
	ward_id_new(se->id, sizeof(se->id), "se_", 8);
	se->created = se->last_used = epoch_now();
	return se;
}

static int create(struct srv *s, struct MHD_Connection *c, const struct ward_key_info *key,
		  const char *body, size_t len)
{
	static const char *const known[] = { "image", "policy", "ttl" };
	int answered;
	json_t *root = parse_body(c, body, len, known, ARRAY_SIZE(known), &answered);
	if (!root)
		return answered;
	json_t *img = json_object_get(root, "image"), *ttl = json_object_get(root, "ttl");
	uint64_t ttl_ms = s->cfg.session_ttl_ms;
	if (img && (!json_is_string(img) || strcmp(json_string_value(img), "host") != 0)) {
		json_decref(root);
		return fail(c, 400, "invalid_request", "image",
			    "expected \"host\", the only image this daemon has");
	}
	if (ttl && srv_parse_seconds(ttl, s->cfg.max_session_ttl_ms, &ttl_ms) < 0) {
		json_decref(root);
		return fail(c, 400, "invalid_request", "ttl",
			    "expected seconds, above 0 and at most %llu",
			    (unsigned long long)(s->cfg.max_session_ttl_ms / 1000));
	}
	struct session *se = session_new(s, key);
	if (!se) {
		json_decref(root);
		return fail(c, 500, "internal", NULL, "out of memory");
	}
	unsigned st;
	json_t *error = NULL;
	int r = srv_parse_policy(s, &se->call, json_object_get(root, "policy"), &st, &error);
	json_decref(root);
	if (r < 0) {
		session_free(se);
		return respond(c, st, error);
	}
	int q = quota_refusal(s, c, key->tenant, se->call.memory);
	if (q >= 0) {
		session_free(se);
		return q;
	}
	se->ttl_ms = ttl_ms;
	char *pj = ward_policy_to_json(&se->call);
	ward_audit_digest(pj ? pj : "", pj ? strlen(pj) : 0, se->digest);
	free(pj);
	struct ward_error err;
	ward_error_clear(&err);
	if (start_sandbox(se, &se->call, &err) < 0) {
		if (se->k) {
			struct ward_verdict v;
			struct ward_error e2;
			ward_verdict_init(&v);
			ward_kernel_finish(se->k, &v, &e2);
			ward_verdict_release(&v);
		}
		unwatch(se);
		session_free(se);
		char buf[1024];
		return fail(c, 500, "setup_failed", NULL, "%s",
			    ward_error_format(&err, buf, sizeof(buf)));
	}
	se->live = true;
	se->mem = se->call.memory;
	s->n_sessions++;
	struct srv_tenant_count *t = metrics_tenant(s, key->tenant);
	if (t) {
		t->sessions++;
		t->memory += se->mem;
	}
	se->next = s->sessions;
	s->sessions = se;
	session_touch(se);
	state_write(se);
	json_t *f = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "session_id", se->id, "key_id",
			      key->id, "tenant", key->tenant, "sandbox_id", se->sandbox_id,
			      "policy_digest", se->digest, "ttl_ms", (json_int_t)se->ttl_ms);
	srv_audit(s, "session.create", f);
	json_decref(f);
	f = json_pack("{s:s, s:s, s:s}", "sandbox_id", se->sandbox_id, "session_id", se->id,
		      "policy_digest", se->digest);
	srv_audit(s, "sandbox.create", f);
	json_decref(f);
	return respond(c, 201, session_json(se));
}

static struct session *find(struct srv *s, const struct ward_key_info *key, const char *id)
{
	for (struct session *se = s->sessions; se; se = se->next)
		/* another tenant's session does not exist for this one */
		if (strcmp(se->id, id) == 0 && strcmp(se->key.tenant, key->tenant) == 0)
			return se;
	return NULL;
}

static int list(struct srv *s, struct MHD_Connection *c, const struct ward_key_info *key)
{
	json_t *arr = json_array();
	for (struct session *se = s->sessions; arr && se; se = se->next)
		if (strcmp(se->key.tenant, key->tenant) == 0)
			json_array_append_new(arr, session_json(se));
	return respond(c, 200, json_pack("{s:o}", "sessions", arr ? arr : json_array()));
}

static int gone(struct MHD_Connection *c, struct session *se)
{
	return fail(c, 410, "session_ended", "id", "session %s has ended (%s): %s", se->id,
		    se->ended, se->reason);
}

static int start_call(struct session *se, struct MHD_Connection *c,
		      const struct ward_key_info *key, enum exec_kind kind, const char *type,
		      json_t *content, const char *lang, const char *context, uint64_t timeout_ms,
		      struct route_out *out)
{
	struct srv *s = se->s;
	if (se->fg)
		return fail(c, 409, "session_busy", NULL,
			    "session %s is running another call (%s); wait for it or cancel it "
			    "(DELETE /v1/executions/%s)", se->id, exec_id(se->fg), exec_id(se->fg));
	struct ward_policy p;
	struct ward_error err;
	if (ward_policy_copy(&p, &se->call, &err) < 0)
		return fail(c, 500, "internal", NULL, "out of memory");
	p.timeout_ms = timeout_ms;
	bool stream = false;
	const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept");
	stream = a && strstr(a, "application/x-ndjson");
	struct execution *ex = exec_new_in_session(s, se, key, kind, lang, context, &p, stream);
	ward_policy_release(&p);
	if (!ex)
		return fail(c, 500, "internal", NULL, "out of memory");
	char id[WARD_KERNEL_ID_SIZE];
	json_object_set_new(content, "timeout_ms", json_integer((json_int_t)timeout_ms));
	ward_kernel_new_budget(se->k);
	int r = ward_kernel_send(se->k, type, content, id, &err);
	ward_sandbox_stats(session_sandbox(se), &se->before);
	se->fg = ex;
	se->fg_timeout_ms = timeout_ms;
	se->fg_interrupted = false;
	se->n_calls++;
	exec_set_session_request(ex, id);
	json_t *f = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s?, s:s?}", "execution_id", exec_id(ex),
			      "session_id", se->id, "key_id", key->id, "tenant", key->tenant, "kind",
			      kind == EXK_EXECUTE ? "execute" : "command", "language", lang,
			      "context", context);
	if (f) {
		bool full = s->audit && ward_audit_full_text(s->audit);
		json_t *code = json_object_get(content, kind == EXK_EXECUTE ? "code" : "cmd");
		char *txt = json_is_string(code) ? strdup(json_string_value(code))
						 : json_dumps(code, JSON_COMPACT | JSON_ENCODE_ANY);
		if (txt)
			ward_audit_text(f, kind == EXK_EXECUTE ? "code" : "command", txt, strlen(txt), full);
		free(txt);
		srv_audit(s, "session.call", f);
		json_decref(f);
	}
	out->ex = ex;
	out->stream = stream;
	if (r < 0) /* the sandbox is gone: the next step ends the call */
		se->wake_ns = ward_now_ns();
	else
		sync_fds(se);
	return MHD_YES;
}

static int execute(struct session *se, struct MHD_Connection *c, const struct ward_key_info *key,
		   const char *body, size_t len, struct route_out *out)
{
	static const char *const known[] = { "code", "language", "context", "timeout" };
	int answered;
	json_t *root = parse_body(c, body, len, known, ARRAY_SIZE(known), &answered);
	if (!root)
		return answered;
	json_t *code = json_object_get(root, "code"), *lang = json_object_get(root, "language");
	json_t *ctx = json_object_get(root, "context");
	const char *lname = lang ? json_string_value(lang) : "python";
	const char *cname = ctx ? json_string_value(ctx) : "default";
	uint64_t timeout = se->call.timeout_ms;
	int r = -1;
	if (!json_is_string(code) || strlen(json_string_value(code)) != json_string_length(code))
		r = fail(c, 400, "invalid_request", "code", "expected a string without NUL characters");
	else if (!lname || ward_lang_from_name(lname) < 0)
		r = fail(c, 400, "invalid_request", "language", "expected \"python\", \"node\" or \"bash\"");
	else if (!cname || !name_ok(cname, 64))
		r = fail(c, 400, "invalid_request", "context",
			 "expected a name of 1-64 characters from [A-Za-z0-9._-]");
	else if (json_object_get(root, "timeout") &&
		 srv_parse_seconds(json_object_get(root, "timeout"), se->call.timeout_ms, &timeout) < 0)
		r = fail(c, 400, "invalid_request", "timeout",
			 "expected seconds, above 0 and within the session's limit (%llu ms)",
			 (unsigned long long)se->call.timeout_ms);
	if (r >= 0) {
		json_decref(root);
		return r;
	}
	/* every call stands alone: an error never aborts the next one */
	json_t *content = json_pack("{s:O, s:s, s:s, s:b}", "code", code, "language", lname,
				    "context", cname, "stop_on_error", 0);
	r = content ? start_call(se, c, key, EXK_EXECUTE, "execute_request", content, lname, cname,
				 timeout, out)
		    : fail(c, 500, "internal", NULL, "out of memory");
	json_decref(content);
	json_decref(root);
	return r;
}

static int check_cmd(struct MHD_Connection *c, json_t *cmd, json_t *env, json_t *cwd)
{
	if (json_is_string(cmd)) {
		if (!json_string_length(cmd) || strlen(json_string_value(cmd)) != json_string_length(cmd))
			return fail(c, 400, "invalid_request", "cmd", "expected a non-empty string without NUL characters");
	} else if (json_is_array(cmd) && json_array_size(cmd) > 0 && json_array_size(cmd) <= 4096) {
		size_t i;
		json_t *a;
		json_array_foreach(cmd, i, a)
			if (!json_is_string(a) || strlen(json_string_value(a)) != json_string_length(a))
				return fail(c, 400, "invalid_request", "cmd",
					    "expected strings without NUL characters");
	} else {
		return fail(c, 400, "invalid_request", "cmd",
			    "expected a shell command (a string) or an argv (an array of strings)");
	}
	if (env) {
		const char *k;
		json_t *v;
		if (!json_is_object(env) || json_object_size(env) > 1024)
			return fail(c, 400, "invalid_request", "env", "expected an object of strings");
		json_object_foreach(env, k, v)
			if (!json_is_string(v) || !*k || strchr(k, '=') ||
			    strlen(json_string_value(v)) != json_string_length(v) ||
			    strcmp(k, "WARD_KERNEL_CONFIG") == 0)
				return fail(c, 400, "invalid_request", "env",
					    "expected names without '=' and string values");
	}
	if (cwd && (!json_is_string(cwd) || !json_string_length(cwd) ||
		    strlen(json_string_value(cwd)) != json_string_length(cwd)))
		return fail(c, 400, "invalid_request", "cwd", "expected a path");
	return -1;
}

static struct deferred *ask(struct session *se, struct MHD_Connection *c, int kind,
			    const char *type, json_t *content)
{
	char id[WARD_KERNEL_ID_SIZE];
	struct ward_error err;
	if (ward_kernel_send(se->k, type, content, id, &err) < 0)
		return NULL;
	struct deferred *d = deferred_new(c);
	if (!d)
		return NULL;
	d->kind = kind;
	ward_strlcpy(d->req_id, id, sizeof(d->req_id));
	d->deadline_ns = ward_now_ns() + AGENT_ANSWER_MS * 1000000ull;
	d->next = se->pend;
	se->pend = d;
	sync_fds(se);
	return d;
}

static int command(struct session *se, struct MHD_Connection *c, const struct ward_key_info *key,
		   const char *body, size_t len, struct route_out *out)
{
	static const char *const known[] = { "cmd", "env", "cwd", "timeout", "background" };
	int answered;
	json_t *root = parse_body(c, body, len, known, ARRAY_SIZE(known), &answered);
	if (!root)
		return answered;
	json_t *cmd = json_object_get(root, "cmd"), *env = json_object_get(root, "env");
	json_t *cwd = json_object_get(root, "cwd"), *bg = json_object_get(root, "background");
	uint64_t timeout = se->call.timeout_ms;
	int r = check_cmd(c, cmd, env, cwd);
	if (r < 0 && bg && !json_is_boolean(bg))
		r = fail(c, 400, "invalid_request", "background", "expected true or false");
	if (r < 0 && json_object_get(root, "timeout") &&
	    srv_parse_seconds(json_object_get(root, "timeout"), se->call.timeout_ms, &timeout) < 0)
		r = fail(c, 400, "invalid_request", "timeout",
			 "expected seconds, above 0 and within the session's limit (%llu ms)",
			 (unsigned long long)se->call.timeout_ms);
	if (r >= 0) {
		json_decref(root);
		return r;
	}
	json_t *content = json_pack("{s:O, s:O?, s:O?, s:b}", "cmd", cmd, "env", env, "cwd", cwd,
				    "background", json_is_true(bg));
	if (!content) {
		json_decref(root);
		return fail(c, 500, "internal", NULL, "out of memory");
	}
	if (json_is_true(bg)) {
		json_object_set_new(content, "timeout_ms", json_integer((json_int_t)timeout));
		out->d = ask(se, c, PEND_BG_START, "command_request", content);
		r = out->d ? MHD_YES : fail(c, 410, "session_ended", "id", "the session's sandbox has ended");
		if (out->d) {
			json_t *f = json_pack("{s:s, s:s, s:s, s:s}", "session_id", se->id, "key_id",
					      key->id, "tenant", key->tenant, "kind", "background_command");
			char *txt = json_is_string(cmd) ? strdup(json_string_value(cmd))
							: json_dumps(cmd, JSON_COMPACT);
			if (f && txt)
				ward_audit_text(f, "command", txt, strlen(txt),
						se->s->audit && ward_audit_full_text(se->s->audit));
			free(txt);
			srv_audit(se->s, "session.call", f);
			json_decref(f);
		}
	} else {
		r = start_call(se, c, key, EXK_COMMAND, "command_request", content, NULL, NULL, timeout, out);
	}
	json_decref(content);
	json_decref(root);
	session_touch(se);
	return r;
}

static int command_op(struct session *se, struct MHD_Connection *c, bool kill,
		      const char *cid, struct route_out *out)
{
	if (!name_ok(cid, 31))
		return fail(c, 404, "not_found", "command_id", "no such command in this session");
	json_t *content = json_pack("{s:s}", "command_id", cid);
	out->d = content ? ask(se, c, kill ? PEND_KILL : PEND_STATUS,
			       kill ? "command_kill_request" : "command_status_request", content)
			 : NULL;
	json_decref(content);
	session_touch(se);
	return out->d ? MHD_YES : fail(c, 410, "session_ended", "id", "the session's sandbox has ended");
}

int session_create(struct srv *s, const struct sess_call *q, struct route_out *out)
{
	memset(out, 0, sizeof(*out));
	return create(s, q->c, q->key, q->body, q->len);
}

int session_list(struct srv *s, const struct sess_call *q, struct route_out *out)
{
	memset(out, 0, sizeof(*out));
	return list(s, q->c, q->key);
}

int session_get(struct srv *s, const struct sess_call *q, struct route_out *out)
{
	memset(out, 0, sizeof(*out));
	struct session *se = find(s, q->key, q->id);
	if (!se)
		return fail(q->c, 404, "not_found", "id", "no such session");
	return respond(q->c, 200, session_json(se));
}

int session_delete(struct srv *s, const struct sess_call *q, struct route_out *out)
{
	memset(out, 0, sizeof(*out));
	struct session *se = find(s, q->key, q->id);
	if (!se)
		return fail(q->c, 404, "not_found", "id", "no such session");
	if (se->live)
		end_session(se, "deleted", "deleted by its owner", false);
	else
		se->tomb_until_ns = 1;
	return respond(q->c, 200, json_pack("{s:s, s:s}", "id", se->id, "status", "deleted"));
}

/* The live session a call names, whose agent can take a request (agent
 * set) or whose workspace can be reached; NULL after answering. */
static struct session *callable(struct srv *s, const struct sess_call *q, bool agent,
				int *answered)
{
	struct session *se = find(s, q->key, q->id);
	if (!se) {
		*answered = fail(q->c, 404, "not_found", "id", "no such session");
		return NULL;
	}
	if (!se->live) {
		*answered = gone(q->c, se);
		return NULL;
	}
	if (agent && se->k && ward_kernel_unsent(se->k) > AGENT_UNSENT_MAX) {
		check_stall(se, ward_now_ns());
		*answered = se->live ? fail(q->c, 503, "agent_busy", NULL,
					    "session %s: its agent has not read %zu bytes of earlier "
					    "requests; retry later (it is ended if it reads none for %d s)",
					    se->id, ward_kernel_unsent(se->k), AGENT_STALL_MS / 1000)
				     : gone(q->c, se);
		return NULL;
	}
	return se;
}

int session_files(struct srv *s, const struct sess_call *q, enum file_op op, struct route_out *out)
{
	memset(out, 0, sizeof(*out));
	int answered;
	struct session *se = callable(s, q, false, &answered);
	if (!se)
		return answered;
	if (!(q->key->scopes & WARD_SCOPE_FILES)) /* checked before; kept where it is used */
		return fail(q->c, 403, "forbidden", "scope", "this key lacks the 'files' scope");
	session_touch(se);
	/* body is the request's heap copy (http.c): an upload's job takes it */
	return files_route(s, q->c, se, op, (char *)q->body, q->len, out);
}

int session_command_status(struct srv *s, const struct sess_call *q, bool kill,
			   struct route_out *out)
{
	memset(out, 0, sizeof(*out));
	int answered;
	struct session *se = callable(s, q, true, &answered);
	return se ? command_op(se, q->c, kill, q->command_id, out) : answered;
}

int session_call(struct srv *s, const struct sess_call *q, bool exec, struct route_out *out)
{
	memset(out, 0, sizeof(*out));
	int answered;
	struct session *se = callable(s, q, true, &answered);
	if (!se)
		return answered;
	if (s->stopping)
		return fail(q->c, 503, "shutting_down", NULL, "the daemon is shutting down");
	session_touch(se);
	return exec ? execute(se, q->c, q->key, q->body, q->len, out)
		    : command(se, q->c, q->key, q->body, q->len, out);
}

/* --- after a crash --- */

/* A state file is the daemon's own: a regular file of its user, closed to
 * others, small. Anything else is ignored and removed. */
static json_t *state_read(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	json_t *o = NULL;
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	    !(st.st_mode & 022) && st.st_size <= 4096) {
		json_error_t je;
		o = json_loadfd(fd, JSON_REJECT_DUPLICATES, &je);
	}
	close(fd);
	return o;
}

/* A session of a daemon that was killed: its sandbox is already gone (the
 * init dies with its supervisor, PR_SET_PDEATHSIG, and ward_cgroup_gc has
 * removed the dead supervisor's cgroups); the file only makes it a
 * tombstone. Nothing in it is ever used to signal a process. */
static void recover_one(struct srv *s, int dfd, const char *name)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/sessions/%s", s->cfg.state_dir, name);
	json_t *o = state_read(dfd, name);
	const char *id = json_string_value(json_object_get(o, "id"));
	const char *tenant = json_string_value(json_object_get(o, "tenant"));
	const char *key_id = json_string_value(json_object_get(o, "key_id"));
	const char *sbid = json_string_value(json_object_get(o, "sandbox_id"));
	double created = json_number_value(json_object_get(o, "created"));
	unlinkat(dfd, name, 0);
	if (!id || !tenant || !key_id || !sbid || strlen(id) >= 24 || strlen(tenant) > WARD_KEY_TENANT_MAX ||
	    strlen(key_id) >= sizeof(((struct ward_key_info *)0)->id)) {
		fprintf(stderr, "ward: serve: %s: not a session state file; removed\n", path);
		json_decref(o);
		return;
	}
	struct session *se = calloc(1, sizeof(*se));
	if (se) {
		se->s = s;
		se->epfd = -1;
		ward_strlcpy(se->id, id, sizeof(se->id));
		ward_strlcpy(se->key.tenant, tenant, sizeof(se->key.tenant));
		ward_strlcpy(se->key.id, key_id, sizeof(se->key.id));
		ward_strlcpy(se->sandbox_id, sbid, sizeof(se->sandbox_id));
		ward_strlcpy(se->ended, "lost", sizeof(se->ended));
		ward_strlcpy(se->reason, "the daemon was killed; its sandbox was removed at restart",
			     sizeof(se->reason));
		se->contexts = json_object();
		se->created = se->last_used = created;
		se->tomb_until_ns = ward_now_ns() + 3600ull * 1000000000ull;
		struct ward_error e2;
		ward_policy_init(&se->call, &e2);
		se->next = s->sessions;
		s->sessions = se;
	}
	json_t *f = json_pack("{s:s, s:s, s:s, s:s}", "session_id", id, "tenant", tenant,
			      "key_id", key_id, "sandbox_id", sbid);
	srv_audit(s, "session.lost", f);
	json_decref(f);
	fprintf(stderr, "ward: serve: session %s (tenant %s) was lost with the previous daemon\n",
		id, tenant);
	json_decref(o);
}

int session_recover(struct srv *s)
{
	/* serve.c has checked and locked state_dir: only this user writes it */
	char dir[PATH_MAX];
	struct stat st;
	snprintf(dir, sizeof(dir), "%s/sessions", s->cfg.state_dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		fprintf(stderr, "ward: error: serve: state-dir: unable to create '%s': %s\n", dir,
			strerror(errno));
		return -1;
	}
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd >= 0 && fstat(dfd, &st) == 0 && (st.st_uid != geteuid() || (st.st_mode & 022))) {
		fprintf(stderr, "ward: error: serve: state-dir: '%s' %s\n", dir,
			st.st_uid != geteuid() ? "is not owned by the daemon's user"
					       : "is writable by group or others (chmod go-w)");
		close(dfd);
		return -1;
	}
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		fprintf(stderr, "ward: error: serve: state-dir: unable to open '%s': %s\n", dir,
			strerror(errno));
		if (dfd >= 0)
			close(dfd);
		return -1;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n > 5 && strcmp(e->d_name + n - 5, ".json") == 0)
			recover_one(s, dfd, e->d_name);
	}
	closedir(d);
	return 0;
}
