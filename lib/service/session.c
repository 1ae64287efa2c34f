/* lib/service/session.c — a session's life: create, find, view, end.
 *
 * A session that ends (deleted, expired, killed by a limit, lost in a
 * crash of the daemon) leaves a tombstone for an hour, so a client asking
 * for it learns why instead of a bare "no such session". Creating one is
 * admitted against the quotas (admission.c) before its sandbox exists;
 * its state file (state.c) is written once it runs.
 */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/util.h"
#include "session.h"
#include "ward/egress.h"
#include "ward/sandbox.h"

const struct ward_key_info *session_owner(const struct session *se) { return &se->key; }
const char *session_id(const struct session *se) { return se->id; }

double sess_epoch_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct ward_sandbox *session_sandbox(struct session *se)
{
	return se->k ? ward_kernel_sandbox(se->k) : NULL;
}

void session_touch(struct session *se)
{
	se->last_used = sess_epoch_now();
	se->expires_ns = ward_now_ns() + se->ttl_ms * 1000000ull;
}

void sess_unwatch(struct session *se)
{
	for (int i = 0; i < WARD_KERNEL_NFDS; i++)
		se->reg[i] = -1;
	if (se->epfd >= 0) {
		epoll_ctl(se->s->epfd, EPOLL_CTL_DEL, se->epfd, NULL);
		close(se->epfd);
		se->epfd = -1;
	}
}

static void sess_release_quota(struct session *se)
{
	struct ward_service *s = se->s;
	struct svc_tenant_count *t = metrics_tenant(s, se->key.tenant);
	if (t) {
		t->sessions -= t->sessions ? 1 : 0;
		t->memory -= se->mem < t->memory ? se->mem : t->memory;
	}
	s->n_sessions -= s->n_sessions ? 1 : 0;
	se->mem = 0;
}

static void count_tombstones(struct ward_service *s)
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
void sess_end(struct session *se, const char *ended, const char *reason, bool tomb)
{
	struct ward_service *s = se->s;
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
	sess_unwatch(se);
	if (se->backstopped) {
		/* the call overran: its own timeout is the limit it met */
		v.status = WARD_STATUS_TIMEOUT;
		v.limit = "timeout";
		v.limit_value = se->fg_timeout_ms;
		if (!reason)
			reason = "a call did not end within its timeout and 5 s more";
	}
	if (se->fg) {
		struct ward_execution *fg = se->fg;
		se->fg = NULL;
		exec_session_end(fg, NULL, &v, NULL, NULL);
	}
	char msg[256];
	snprintf(msg, sizeof(msg), "session %s has ended (%s)", se->id, ended);
	sess_answer_pends(se, 410, "session_ended", msg);
	se->live = false;
	ward_strlcpy(se->ended, ended, sizeof(se->ended));
	if (reason)
		ward_strlcpy(se->reason, reason, sizeof(se->reason));
	else
		snprintf(se->reason, sizeof(se->reason), "%s%s%s", ward_status_name(v.status),
			 v.limit ? ": limit " : "", v.limit ? v.limit : "");
	sess_release_quota(se);
	sess_state_remove(se);
	json_t *f = json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:I}}", "session_id", se->id, "tenant",
			      se->key.tenant, "sandbox_id", se->sandbox_id, "ended", ended, "reason",
			      se->reason, "usage", "peak_memory_bytes",
			      (json_int_t)v.usage.peak_memory_bytes);
	svc_audit(s, strcmp(ended, "expired") == 0 ? "session.expired"
		     : strcmp(ended, "deleted") == 0 ? "session.delete"
		     : strcmp(ended, "shutdown") == 0 ? "session.shutdown" : "session.dead", f);
	json_decref(f);
	f = json_pack("{s:s, s:s}", "sandbox_id", se->sandbox_id, "session_id", se->id);
	svc_audit(s, "sandbox.destroy", f);
	json_decref(f);
	ward_verdict_release(&v);
	se->tomb_until_ns = tomb ? ward_now_ns() + 3600ull * 1000000000ull : 1;
	if (tomb)
		count_tombstones(s);
}

void sess_free(struct session *se)
{
	ward_policy_release(&se->call);
	json_decref(se->contexts);
	ward_egress_credentials_free(se->creds, se->n_creds);
	free(se);
}

void sess_remove(struct ward_service *s, struct session *se)
{
	for (struct session **p = &s->sessions; *p; p = &(*p)->next)
		if (*p == se) {
			*p = se->next;
			break;
		}
	sess_free(se);
}

void session_destroy_all(struct ward_service *s, const char *reason)
{
	for (struct session *se = s->sessions; se; se = se->next)
		if (se->live)
			sess_end(se, "shutdown", reason, false);
}

void session_release_all(struct ward_service *s)
{
	session_destroy_all(s, "the daemon stopped");
	while (s->sessions) {
		struct session *se = s->sessions;
		s->sessions = se->next;
		sess_free(se);
	}
}

json_t *sess_json(struct session *se)
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

/* The body as an object with only the known keys ({} when there is none),
 * or NULL after answering 400. */
json_t *sess_parse_body(struct ward_reply *out, const char *body, size_t len,
			const char *const *known, size_t n_known)
{
	if (!body && len == 0)
		return json_object();
	return svc_parse_object(body, len, known, n_known, &out->err);
}

bool sess_name_ok(const char *n, size_t max)
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

static struct session *session_new(struct ward_service *s, const struct ward_key_info *key)
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
	se->created = se->last_used = sess_epoch_now();
	return se;
}

/* A session whose sandbox runs: counted, listed, stored, audited. */
static void go_live(struct ward_service *s, struct session *se)
{
	const struct ward_key_info *key = &se->key;
	se->live = true;
	se->mem = se->call.memory;
	s->n_sessions++;
	struct svc_tenant_count *t = metrics_tenant(s, key->tenant);
	if (t) {
		t->sessions++;
		t->memory += se->mem;
	}
	se->next = s->sessions;
	s->sessions = se;
	session_touch(se);
	sess_state_write(se);
	json_t *f = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "session_id", se->id, "key_id",
			      key->id, "tenant", key->tenant, "sandbox_id", se->sandbox_id,
			      "policy_digest", se->digest, "ttl_ms", (json_int_t)se->ttl_ms);
	svc_audit(s, "session.create", f);
	json_decref(f);
	f = json_pack("{s:s, s:s, s:s}", "sandbox_id", se->sandbox_id, "session_id", se->id,
		      "policy_digest", se->digest);
	svc_audit(s, "sandbox.create", f);
	json_decref(f);
}

static int create(struct ward_service *s, struct ward_reply *out, const struct ward_key_info *key,
		  const char *body, size_t len)
{
	static const char *const known[] = { "image", "policy", "ttl", "credentials" };
	json_t *root = sess_parse_body(out, body, len, known, ARRAY_SIZE(known));
	if (!root)
		return 0;
	json_t *img = json_object_get(root, "image"), *ttl = json_object_get(root, "ttl");
	uint64_t ttl_ms = s->cfg.session_ttl_ms;
	if (img && (!json_is_string(img) || strcmp(json_string_value(img), "host") != 0)) {
		json_decref(root);
		return svc_reply_error(out, 400, "invalid_request", "image",
			    "expected \"host\", the only image this daemon has");
	}
	if (ttl && svc_parse_seconds(ttl, s->cfg.max_session_ttl_ms, &ttl_ms) < 0) {
		json_decref(root);
		return svc_reply_error(out, 400, "invalid_request", "ttl",
			    "expected seconds, above 0 and at most %llu",
			    (unsigned long long)(s->cfg.max_session_ttl_ms / 1000));
	}
	struct session *se = session_new(s, key);
	if (!se) {
		json_decref(root);
		return svc_reply_error(out, 500, "internal", NULL, "out of memory");
	}
	int r = svc_parse_policy(s, &se->call, json_object_get(root, "policy"), &out->err);
	if (r == 0)
		r = svc_parse_credentials(key, json_object_get(root, "credentials"), &se->creds,
					  &se->n_creds, &out->err);
	json_decref(root);
	if (r < 0 || svc_admit_session(s, key->tenant, se->call.memory, &out->err) < 0) {
		sess_free(se);
		return 0;
	}
	se->ttl_ms = ttl_ms;
	char *pj = ward_policy_to_json(&se->call);
	ward_audit_digest(pj ? pj : "", pj ? strlen(pj) : 0, se->digest);
	free(pj);
	struct ward_error err;
	ward_error_clear(&err);
	if (sess_start_agent(se, &se->call, &err) < 0) {
		if (se->k) {
			struct ward_verdict v;
			struct ward_error e2;
			ward_verdict_init(&v);
			ward_kernel_finish(se->k, &v, &e2);
			ward_verdict_release(&v);
		}
		sess_unwatch(se);
		sess_free(se);
		char buf[1024];
		return svc_reply_error(out, 500, "setup_failed", NULL, "%s",
			    ward_error_format(&err, buf, sizeof(buf)));
	}
	go_live(s, se);
	return svc_reply(out, 201, sess_json(se));
}

struct session *sess_find(struct ward_service *s, const struct ward_key_info *key, const char *id)
{
	for (struct session *se = s->sessions; se; se = se->next)
		/* another tenant's session does not exist for this one */
		if (strcmp(se->id, id) == 0 && strcmp(se->key.tenant, key->tenant) == 0)
			return se;
	return NULL;
}

static int list(struct ward_service *s, struct ward_reply *out, const struct ward_key_info *key)
{
	json_t *arr = json_array();
	for (struct session *se = s->sessions; arr && se; se = se->next)
		if (strcmp(se->key.tenant, key->tenant) == 0)
			json_array_append_new(arr, sess_json(se));
	return svc_reply(out, 200, json_pack("{s:o}", "sessions", arr ? arr : json_array()));
}

int sess_gone(struct ward_reply *out, struct session *se)
{
	return svc_reply_error(out, 410, "session_ended", "id", "session %s has ended (%s): %s", se->id,
		    se->ended, se->reason);
}

int ward_session_create(struct ward_service *s, const struct ward_session_call *q,
			struct ward_reply *out)
{
	memset(out, 0, sizeof(*out));
	return create(s, out, q->key, q->body, q->len);
}

int ward_session_list(struct ward_service *s, const struct ward_session_call *q,
		      struct ward_reply *out)
{
	memset(out, 0, sizeof(*out));
	return list(s, out, q->key);
}

int ward_session_get(struct ward_service *s, const struct ward_session_call *q,
		     struct ward_reply *out)
{
	memset(out, 0, sizeof(*out));
	struct session *se = sess_find(s, q->key, q->id);
	if (!se)
		return svc_reply_error(out, 404, "not_found", "id", "no such session");
	return svc_reply(out, 200, sess_json(se));
}

int ward_session_delete(struct ward_service *s, const struct ward_session_call *q,
			struct ward_reply *out)
{
	memset(out, 0, sizeof(*out));
	struct session *se = sess_find(s, q->key, q->id);
	if (!se)
		return svc_reply_error(out, 404, "not_found", "id", "no such session");
	if (se->live)
		sess_end(se, "deleted", "deleted by its owner", false);
	else
		se->tomb_until_ns = 1;
	return svc_reply(out, 200, json_pack("{s:s, s:s}", "id", se->id, "status", "deleted"));
}

int ward_session_network(struct ward_service *s, const struct ward_session_call *q,
			 struct ward_reply *out)
{
	memset(out, 0, sizeof(*out));
	struct session *se = sess_find(s, q->key, q->id);
	if (!se)
		return svc_reply_error(out, 404, "not_found", "id", "no such session");
	if (!se->live)
		return sess_gone(out, se);
	struct ward_egress_sandbox *att = se->k ? ward_sandbox_egress(ward_kernel_sandbox(se->k))
						: NULL;
	if (se->call.network.mode != WARD_NET_ALLOWLIST || !att)
		return svc_reply_error(out, 409, "conflict", "network.mode",
			    "the session was created without egress (network.mode \"none\"); "
			    "create it with network.mode \"allowlist\" to change its allowlist");
	struct ward_net_policy np;
	struct ward_error err;
	ward_error_clear(&err);
	/* onto the operator's object: its deny entries stay, what the body
	 * leaves out is the operator's */
	if (ward_net_policy_copy(&np, &s->policy.network, &err) < 0)
		return svc_reply_error(out, 500, "internal", NULL, "out of memory");
	if (ward_net_policy_apply_json(&np, q->body ? q->body : "", q->len, "network", &err) < 0) {
		ward_net_policy_release(&np);
		if (err.code == ENOMEM)
			return svc_reply_error(out, 500, "internal", NULL, "out of memory");
		return svc_reply_error(out, 400, "invalid_request",
				       err.field[0] ? err.field : "network", "%s", err.message);
	}
	if (ward_net_policy_check_tighter(&s->policy.network, &np, &err) < 0) {
		ward_net_policy_release(&np);
		return svc_reply_error(out, 400, "invalid_request",
				       err.field[0] ? err.field : "network", "%s", err.message);
	}
	if (ward_egress_update(att, &np, &err) < 0) {
		ward_net_policy_release(&np);
		return svc_reply_error(out, 500, "internal", NULL, "out of memory");
	}
	json_t *nj = ward_net_policy_to_json(&np);
	ward_net_policy_release(&se->call.network);
	se->call.network = np;
	se->call.net = np.mode;
	json_t *f = json_pack("{s:s, s:s, s:s, s:O?}", "session_id", se->id, "key_id", q->key->id,
			      "tenant", q->key->tenant, "network", nj);
	svc_audit(s, "session.network", f);
	json_decref(f);
	return svc_reply(out, 200, json_pack("{s:s, s:o?}", "id", se->id, "network", nj));
}
