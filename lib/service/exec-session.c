/* lib/service/exec-session.c — a call in a session, as an execution.
 *
 * The session's agent runs it (session.c and agent.c drive the agent);
 * this keeps the output, the listener and the verdict, as for a one-shot,
 * with the same result builder, and lists the files an execute or a call
 * created or changed (on a worker, below). What the agent says is a claim from
 * inside the sandbox: a call that failed is named by the cgroup's counters
 * (an OOM kill or a refused fork during the call), never by its word.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "../artifacts.h"
#include "base/util.h"
#include "execution.h"
#include "session.h"
#include "workspace.h"


const char *exec_session_request(const struct ward_execution *ex) { return ex->req_id; }
uint64_t exec_started_ns(const struct ward_execution *ex) { return ex->start_ns; }

void exec_set_session_request(struct ward_execution *ex, const char *id)
{
	ward_strlcpy(ex->req_id, id, sizeof(ex->req_id));
}

struct ward_execution *exec_new_in_session(struct ward_service *s, struct session *sess,
				      const struct ward_key_info *key, enum exec_kind kind,
				      const char *lang, const char *context,
				      const struct ward_policy *p, bool stream)
{
	struct exec_request r;
	memset(&r, 0, sizeof(r));
	r.lang = -1;
	r.stream = stream;
	struct ward_error err;
	if (ward_policy_copy(&r.policy, p, &err) < 0)
		return NULL;
	struct ward_execution *ex = exec_new(s, &r, key);
	if (!ex) {
		exec_request_release(&r);
		return NULL;
	}
	ex->kind = kind;
	ex->sess = sess;
	ward_strlcpy(ex->lang, lang ? lang : "", sizeof(ex->lang));
	ward_strlcpy(ex->context, context ? context : "", sizeof(ex->context));
	ward_strlcpy(ex->v.sandbox_id, ward_sandbox_id(session_sandbox(sess)), sizeof(ex->v.sandbox_id));
	/* the clock of file status changes (ctime), taken before the request
	 * is sent: whatever the call touches is stamped at or after it */
	clock_gettime(CLOCK_REALTIME_COARSE, &ex->call_since);
	ex->next = s->execs;
	s->execs = ex;
	exec_emit(ex, json_pack("{s:s, s:s, s:s, s:s}", "event", "start", "id", ex->id, "sandbox_id",
			   ex->v.sandbox_id, "session_id", session_id(sess)));
	return ex;
}

void exec_session_message(struct ward_execution *ex, json_t *m)
{
	if (ex->kind == EXK_EXECUTE || ex->kind == EXK_CALL) {
		exec_on_message(m, ex);
		return;
	}
	const char *type = json_string_value(json_object_get(m, "msg_type"));
	json_t *c = json_object_get(m, "content");
	if (!type || strcmp(type, "stream") != 0)
		return;
	const char *name = json_string_value(json_object_get(c, "name"));
	json_t *t = json_object_get(c, "text");
	if (!json_is_string(t))
		return;
	int which = name && strcmp(name, "stderr") == 0 ? 2 : 1;
	size_t kept = ward_verdict_keep(&ex->v, which, json_string_value(t), json_string_length(t),
				ex->req.policy.output_limit);
	if (kept)
		exec_emit(ex, json_pack("{s:s, s:s, s:s%}", "event", "stream", "name",
				   which == 1 ? "stdout" : "stderr", "text", json_string_value(t), kept));
}

static uint64_t since(uint64_t before, uint64_t after)
{
	return after > before ? after - before : 0;
}

/* A call's share of the session's egress: the counters' growth during the
 * call, and the refusals listed since it began. */
static void call_network(struct ward_net_usage *v, const struct ward_net_usage *b,
			 const struct ward_net_usage *a)
{
	memset(v, 0, sizeof(*v));
	if (!a->present)
		return;
	v->present = true;
	v->connections = since(b->connections, a->connections);
	v->bytes_out = since(b->bytes_out, a->bytes_out);
	v->bytes_in = since(b->bytes_in, a->bytes_in);
	v->denied_total = since(b->denied_total, a->denied_total);
	for (size_t i = b->n_denied; i < a->n_denied; i++)
		v->denied[v->n_denied++] = a->denied[i];
	/* a limit is the session's: named once it was hit during this call */
	v->limit = a->limit && !b->limit ? a->limit : NULL;
}

/* What the agent's reply status means as a verdict. A context that died
 * is explained by the cgroup's counters, never guessed from the signal. */
static void session_status(struct ward_execution *ex, json_t *reply,
			   const struct ward_sandbox_stats *b, const struct ward_sandbox_stats *a)
{
	struct ward_verdict *v = &ex->v;
	const struct ward_policy *p = &ex->req.policy;
	const char *st = json_string_value(json_object_get(reply, "status"));
	json_t *code = json_object_get(reply, "exit_code"), *sig = json_object_get(reply, "signal");
	bool oom = a->oom_kills > b->oom_kills, pids = a->pids_max_events > b->pids_max_events;
	st = st ? st : "error";
	v->exit_code = json_is_integer(code) ? (int)json_integer_value(code) : 0;
	v->signal = json_is_integer(sig) ? (int)json_integer_value(sig) : 0;
	v->status = WARD_STATUS_OK;
	bool stopped = strcmp(st, "killed") == 0 || strcmp(st, "timeout") == 0;
	if (stopped && !v->signal) /* interrupted (SIGINT), or its context killed */
		v->signal = json_is_true(json_object_get(reply, "context_lost")) ? SIGKILL : SIGINT;
	if (strcmp(st, "killed") == 0) {
		v->status = WARD_STATUS_KILLED;
	} else if (strcmp(st, "timeout") == 0) {
		v->status = WARD_STATUS_TIMEOUT;
		v->limit = "timeout";
		v->limit_value = p->timeout_ms;
	} else if (oom && strcmp(st, "ok") != 0) {
		v->status = WARD_STATUS_MEMORY_LIMIT;
		v->limit = "memory";
		v->limit_value = p->memory;
	} else if (pids && strcmp(st, "ok") != 0) {
		v->status = WARD_STATUS_PIDS_LIMIT;
		v->limit = "pids";
		v->limit_value = p->pids;
	} else if (strcmp(st, "died") == 0 || strcmp(st, "signaled") == 0) {
		v->status = v->signal ? WARD_STATUS_SIGNALED : WARD_STATUS_ERROR;
		if (!v->signal && !v->exit_code)
			v->exit_code = 1;
	} else if (strcmp(st, "policy_violation") == 0) {
		v->status = WARD_STATUS_POLICY_VIOLATION;
		v->exit_code = 3;
	} else if (strcmp(st, "ok") != 0) {
		v->status = WARD_STATUS_ERROR;
		if (!v->exit_code)
			v->exit_code = 1;
	}
	v->usage.peak_memory_bytes = a->memory_peak;
	v->usage.cpu_user_ms = a->cpu_ms - (b->cpu_ms < a->cpu_ms ? b->cpu_ms : a->cpu_ms);
	call_network(&v->network, &b->network, &a->network);
}

void exec_session_end(struct ward_execution *ex, json_t *reply, const struct ward_verdict *dead,
		      const struct ward_sandbox_stats *before,
		      const struct ward_sandbox_stats *after)
{
	if (ex->state == EX_DONE)
		return;
	struct ward_verdict *v = &ex->v;
	if (dead) {
		/* the session's sandbox ended: its verdict says why */
		v->status = dead->status;
		v->limit = dead->limit;
		v->limit_value = dead->limit_value;
		v->signal = dead->signal;
		v->exit_code = dead->exit_code;
		v->usage.peak_memory_bytes = dead->usage.peak_memory_bytes;
		if (v->status == WARD_STATUS_OK) {
			v->status = WARD_STATUS_ERROR;
			v->exit_code = 1;
		}
		ex->died = true;
	} else {
		session_status(ex, reply, before, after);
	}
	v->usage.wall_ms = (ward_now_ns() - ex->start_ns) / 1000000;
	if (ex->kind == EXK_EXECUTE || ex->kind == EXK_CALL) {
		if (ex->kind == EXK_CALL)
			ward_result_call_reply(&ex->out, reply);
		else
			ward_result_reply(&ex->out, reply);
		ward_result_to_verdict(&ex->out, v);
		if (!reply)
			ex->out.code_failed = true;
		if (v->status == WARD_STATUS_ERROR && ex->out.violation)
			v->status = WARD_STATUS_OK; /* the adjust below names it */
		ward_result_adjust(&ex->out, v, &ex->req.policy);
		bool died = ex->died || (reply && v->status != WARD_STATUS_OK &&
					 v->status != WARD_STATUS_ERROR &&
					 v->status != WARD_STATUS_POLICY_VIOLATION && !ex->out.error);
		/* the session's state machine says when its kernel could not answer */
		ex->out.died = died;
		ex->final = ward_result_final(&ex->out, v, &ex->req.policy, ex->lang);
		if (ex->final) {
			json_object_set_new(ex->final, "context", json_string(ex->context));
			json_object_set_new(ex->final, "context_new",
					    json_boolean(json_is_true(json_object_get(reply, "context_new"))));
			json_object_set_new(ex->final, "context_lost",
					    json_boolean(!reply || json_is_true(json_object_get(reply, "context_lost"))));
		}
	} else {
		if ((v->stdout_truncated || v->stderr_truncated) && v->status == WARD_STATUS_OK) {
			v->status = WARD_STATUS_OUTPUT_LIMIT;
			v->limit = "output";
			v->limit_value = ex->req.policy.output_limit;
		}
		ex->final = (json_t *)ward_verdict_to_object(v);
	}
	if (ex->final) {
		json_object_set_new(ex->final, "session_id", json_string(session_id(ex->sess)));
		json_object_del(ex->final, "layers");
		json_object_del(ex->final, "degraded");
	}
	exec_finish_common(ex);
}

/* --- a call's files, listed on a worker ---
 *
 * The files a call created or changed are those under /workspace whose
 * status changed (ctime) since the call began: one bounded scan after the
 * reply, through the job's own fd of the workspace, with the one-shots'
 * caps. The session stays busy (se->fg) until the listing is in, so no
 * later call's files mix in. */

struct list_job {
	struct svc_job j;
	struct ward_execution *ex;       /* a reference */
	int ws;
	struct timespec since;
	json_t *reply;
	struct ward_sandbox_stats before, after;
	json_t *list, *skipped;
	struct ward_error err;
	int rc;
};

static void list_run(struct svc_job *j)
{
	struct list_job *lj = (struct list_job *)j;
	struct ward_artifact_limits lim = { .max_file = 16u << 20, .max_total = 64u << 20,
					    .max_count = 100 };
	lj->rc = ward_artifacts_scan(lj->ws, &lj->since, &lim, &lj->list, &lj->skipped, &lj->err);
}

/* Ends the call with the listing (or with a note on why there is none). */
static void list_done(struct ward_service *s, struct svc_job *j)
{
	(void)s;
	struct list_job *lj = (struct list_job *)j;
	struct ward_execution *ex = lj->ex;
	/* ended meanwhile (the session's sandbox ended: its verdict is out) */
	if (ex->state != EX_DONE) {
		struct session *se = ex->sess;
		if (se->fg == ex)
			se->fg = NULL;
		if (j->cancelled || lj->rc < 0) {
			json_decref(lj->list);
			lj->list = NULL;
			json_decref(lj->skipped);
			lj->skipped = json_pack("[{s:s, s:s}]", "path", "", "reason", j->cancelled
						? "not listed: the daemon is stopping"
						: "not listed: the workspace could not be read");
		}
		ex->out.artifacts = lj->list;
		ex->out.skipped = lj->skipped;
		lj->list = lj->skipped = NULL;
		exec_session_end(ex, lj->reply, NULL, &lj->before, &lj->after);
		session_touch(se);
	}
	json_decref(lj->list);
	json_decref(lj->skipped);
	json_decref(lj->reply);
	if (lj->ws >= 0)
		close(lj->ws);
	ward_execution_unref(ex);
	free(lj);
}

bool exec_session_defer(struct ward_execution *ex, json_t *reply,
			const struct ward_sandbox_stats *before,
			const struct ward_sandbox_stats *after)
{
	if (ex->kind != EXK_EXECUTE && ex->kind != EXK_CALL)
		return false;
	struct list_job *lj = calloc(1, sizeof(*lj));
	if (!lj)
		return false;
	lj->ws = ward_workspace_open(session_sandbox(ex->sess));
	if (lj->ws < 0) {
		free(lj);
		return false;
	}
	lj->j.run = list_run;
	lj->j.done = list_done;
	ward_strlcpy(lj->j.tenant, ex->key.tenant, sizeof(lj->j.tenant));
	lj->ex = ex;
	lj->since = ex->call_since;
	lj->reply = json_incref(reply);
	lj->before = *before;
	lj->after = *after;
	ward_execution_ref(ex);
	if (svc_job_submit(ex->s, &lj->j) == 0)
		return true;
	/* every worker busy: the call ends now, its files unlisted (said so) */
	json_decref(lj->reply);
	close(lj->ws);
	ward_execution_unref(ex);
	free(lj);
	ex->out.skipped = json_pack("[{s:s, s:s}]", "path", "", "reason",
				    "not listed: the daemon's workers are busy");
	return false;
}
