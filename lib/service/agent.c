/* lib/service/agent.c — the channel to a session's agent, and its state
 * machine.
 *
 * Every message the agent sends is matched to what it answers by
 * parent_id: the one call in flight (its execution gets the messages and
 * the reply), or one of the small requests waiting in se->pend (a
 * background command's start, status or kill), each answered through its
 * deferred answer. A message for nothing (a late one of an interrupted
 * call) is dropped. The agent is a program inside the sandbox: nothing it
 * says is trusted beyond the sandbox's own work.
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

void sess_answer_pends(struct session *se, unsigned status, const char *code, const char *msg)
{
	struct ward_answer *d = se->pend, *next;
	se->pend = NULL;
	for (; d; d = next) {
		next = d->next;
		deferred_answer(d, status, svc_error_body(code, NULL, msg));
		deferred_unref(d);
	}
}

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

static void pend_reply(struct session *se, struct ward_answer *d, json_t *c)
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
			body = svc_error_body("command_failed", "cmd", msg);
			status = 400;
		}
	} else if (d->kind == PEND_STATUS || d->kind == PEND_KILL) {
		const char *state = json_string_value(json_object_get(c, "state"));
		if (!state || strcmp(state, "unknown") == 0) {
			json_decref(body);
			body = svc_error_body("not_found", "command_id", "no such command in this session");
			status = 404;
		}
	}
	deferred_answer(d, status, body);
}

/* Keeps the error that explains a background start that failed. */
static void pend_message(struct ward_answer *d, json_t *m)
{
	const char *type = json_string_value(json_object_get(m, "msg_type"));
	if (!d->err && type && strcmp(type, "error") == 0)
		d->err = json_incref(json_object_get(m, "content"));
}

static void sess_on_message(json_t *m, void *ctx)
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
	struct ward_execution *fg = se->fg;
	if (fg && strcmp(pid, exec_session_request(fg)) == 0) {
		if (strcmp(type, "execute_reply") == 0 || strcmp(type, "call_reply") == 0 ||
		    strcmp(type, "command_reply") == 0) {
			struct ward_sandbox_stats after;
			ward_sandbox_stats(session_sandbox(se), &after);
			if (strcmp(type, "command_reply") != 0)
				context_used(se, c);
			if (exec_session_defer(fg, c, &se->before, &after))
				return; /* its files are listed first (exec-session.c) */
			se->fg = NULL;
			exec_session_end(fg, c, NULL, &se->before, &after);
			session_touch(se);
		} else {
			exec_session_message(fg, m);
		}
		return;
	}
	for (struct ward_answer **p = &se->pend; *p; p = &(*p)->next) {
		struct ward_answer *d = *p;
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

void sess_sync_fds(struct session *se)
{
	struct pollfd fds[WARD_KERNEL_NFDS];
	int t = ward_kernel_pollfds(se->k, fds);
	se->wake_ns = svc_watch(se->epfd, se->reg, fds, t);
}

void sess_send_interrupt(struct session *se, const char *reason)
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
	sess_send_interrupt(se, reason);
	se->fg_interrupted = true;
	sess_sync_fds(se);
}

void session_dispatch(struct ward_service *s, struct session *se)
{
	(void)s;
	if (!se->live || !se->k)
		return;
	json_t *reply = NULL;
	int r = ward_kernel_step(se->k, &reply);
	json_decref(reply);
	if (r == -ECHILD) {
		sess_end(se, "dead", NULL, true);
		return;
	}
	if (se->live)
		sess_sync_fds(se);
}

int sess_start_agent(struct session *se, const struct ward_policy *p, struct ward_error *err)
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
					  .runners_dir = se->s->cfg.runners,
					  .zygote = svc_zygote(se->s), .launcher = se->s->cfg.launcher,
					  .egress = svc_egress(se->s), .tenant = se->key.tenant,
					  .credentials = se->creds, .n_credentials = se->n_creds };
	if (r == 0)
		r = ward_kernel_begin(&sp, &ko, &se->k, err);
	json_decref(lint);
	ward_policy_release(&sp);
	if (r < 0)
		return r;
	ward_kernel_listen(se->k, sess_on_message, se);
	ward_strlcpy(se->sandbox_id, ward_sandbox_id(ward_kernel_sandbox(se->k)), sizeof(se->sandbox_id));
	se->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (se->epfd < 0)
		return ward_error_set(err, errno, "serve", "epoll_create1");
	se->w = (struct watch){ .kind = WATCH_SESSION, .ptr = se };
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &se->w };
	epoll_ctl(se->s->epfd, EPOLL_CTL_ADD, se->epfd, &ev);
	sess_sync_fds(se);
	return 0;
}

struct ward_answer *sess_ask(struct session *se, int kind, const char *type, json_t *content)
{
	char id[WARD_KERNEL_ID_SIZE];
	struct ward_error err;
	if (ward_kernel_send(se->k, type, content, id, &err) < 0)
		return NULL;
	struct ward_answer *d = deferred_new();
	if (!d)
		return NULL;
	d->kind = kind;
	ward_strlcpy(d->req_id, id, sizeof(d->req_id));
	d->deadline_ns = ward_now_ns() + AGENT_ANSWER_MS * 1000000ull;
	d->next = se->pend;
	se->pend = d;
	sess_sync_fds(se);
	return d;
}
