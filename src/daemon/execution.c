/* src/daemon/execution.c — one-shot executions, driven by the daemon's loop.
 *
 * An execution is a fresh sandbox running either a language kernel (one
 * cell) or a command, stepped without blocking: its fds sit behind one
 * epoll fd in the main loop, and each step reads what is ready. Events are
 * buffered as NDJSON for a streaming client; the final JSON is what
 * `ward exec --json` / `ward run --json` print. It must never wait on the
 * program or the client: a slow reader only grows its own (capped) buffer.
 */
#include <fcntl.h>
#include <signal.h>
#include <microhttpd.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>

#include "base/util.h"
#include "daemon.h"
#include "exec-glue.h"

enum ex_state { EX_RUNNING, EX_SHUTDOWN, EX_DRAIN, EX_DONE };
enum { STREAM_SLACK = 1 << 20 };

struct execution {
	struct execution *next;
	struct srv *s;
	int refs;
	char id[40];
	enum exec_kind kind;
	struct session *sess;    /* a call in a session: no sandbox of its own */
	char req_id[WARD_KERNEL_ID_SIZE];
	char lang[16], context[72];
	uint64_t mem;            /* reserved against the tenant's memory quota */
	struct ward_key_info key;
	struct exec_request req;
	struct ward_kernel *k;
	struct ward_sandbox *sb;
	enum ex_state state;
	int epfd;
	struct watch w, cw;
	int reg[WARD_KERNEL_NFDS];
	uint64_t wake_ns, start_ns;
	char digest[WARD_AUDIT_HEX_SIZE];
	struct exec_out out;     /* a kernel's messages, gathered */
	bool out_eof, err_eof;   /* command: its pipes */
	bool died;
	struct ward_verdict v;
	json_t *final;
	/* the client waiting for it */
	struct MHD_Connection *conn;
	bool stream, suspended, cw_on;
	char *sbuf;              /* unread NDJSON: at most stream_limit() */
	size_t slen, scap, soff;
	uint64_t dropped_events, dropped_bytes;
	bool verdict_due;        /* the verdict event, once the rest is read */
	size_t held;             /* counted against the tenant (account()) */
};

const char *exec_id(const struct execution *ex) { return ex->id; }
const char *exec_tenant(const struct execution *ex) { return ex->key.tenant; }
bool exec_done(const struct execution *ex) { return ex->state == EX_DONE; }
json_t *exec_result(struct execution *ex) { return ex->final; }

static void client_watch(struct execution *ex, bool on)
{
	if (on == ex->cw_on || !ex->conn)
		return;
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(ex->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci)
		return;
	ex->cw = (struct watch){ .kind = WATCH_CLIENT, .ptr = ex };
	struct epoll_event ev = { .events = EPOLLRDHUP, .data.ptr = &ex->cw };
	if (epoll_ctl(ex->s->epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, ci->connect_fd, &ev) == 0 ||
	    !on)
		ex->cw_on = on;
}

/* Wakes the waiting client: there is data, or the end. */
static void wake(struct execution *ex)
{
	if (ex->conn && ex->suspended) {
		client_watch(ex, false);
		ex->suspended = false;
		MHD_resume_connection(ex->conn);
	}
}

static void suspend(struct execution *ex)
{
	if (!ex->conn || ex->suspended)
		return;
	ex->suspended = true;
	MHD_suspend_connection(ex->conn);
	client_watch(ex, true);
}

/* The NDJSON a streaming client has not read yet is bounded per
 * execution: twice the output cap (a control character escapes to six
 * bytes, ordinary text to about one) plus room for rich results. Past it,
 * events are dropped, never the sandbox stalled: the client gets one
 * "dropped" line (how many events, how many bytes) once there is room
 * again, and the verdict still carries the whole capped output. */
static size_t stream_limit(const struct execution *ex)
{
	uint64_t lim = 2 * ex->req.policy.output_limit + STREAM_SLACK;
	return lim > SIZE_MAX / 2 ? SIZE_MAX / 2 : (size_t)lim;
}

/* What the daemon holds for this execution, counted against its tenant
 * (ward_tenant_daemon_memory_bytes, and the tenant_memory quota). */
static void account(struct execution *ex, size_t held)
{
	if (held == ex->held)
		return;
	struct srv_tenant_count *t = metrics_tenant(ex->s, ex->key.tenant);
	if (t) {
		t->held -= ex->held < t->held ? ex->held : t->held;
		t->held += held;
	}
	ex->held = held;
}

/* Appends one line; the verdict (last) may pass the bound, nothing else. */
static bool append_line(struct execution *ex, const char *line, size_t n, bool last)
{
	size_t pending = ex->slen - ex->soff;
	if (!last && pending + n + 1 > stream_limit(ex))
		return false;
	if (ex->slen + n + 1 > ex->scap && ex->soff) {
		memmove(ex->sbuf, ex->sbuf + ex->soff, pending);
		ex->slen = pending;
		ex->soff = 0;
	}
	if (ex->slen + n + 1 > ex->scap) {
		size_t cap = ex->scap ? ex->scap * 2 : 4096, lim = stream_limit(ex);
		if (cap > lim)
			cap = lim;
		if (cap < ex->slen + n + 1)
			cap = ex->slen + n + 1;
		char *nb = realloc(ex->sbuf, cap);
		if (!nb)
			return false;
		ex->sbuf = nb;
		ex->scap = cap;
		account(ex, cap);
	}
	memcpy(ex->sbuf + ex->slen, line, n);
	ex->sbuf[ex->slen + n] = '\n';
	ex->slen += n + 1;
	return true;
}

/* Appends one NDJSON event for a streaming client (takes ev). */
static void emit(struct execution *ex, json_t *ev)
{
	if (!ev)
		return;
	const char *kind = json_string_value(json_object_get(ev, "event"));
	bool last = kind && strcmp(kind, "verdict") == 0;
	char *line = ex->stream ? json_dumps(ev, JSON_COMPACT) : NULL;
	json_decref(ev);
	if (!line)
		return;
	size_t n = strlen(line);
	if (ex->dropped_events) {
		json_t *d = json_pack("{s:s, s:I, s:I}", "event", "dropped", "events",
				      (json_int_t)ex->dropped_events, "bytes",
				      (json_int_t)ex->dropped_bytes);
		char *dl = d ? json_dumps(d, JSON_COMPACT) : NULL;
		json_decref(d);
		if (dl && append_line(ex, dl, strlen(dl), last))
			ex->dropped_events = ex->dropped_bytes = 0;
		free(dl);
	}
	if (ex->dropped_events || !append_line(ex, line, n, last)) {
		ex->dropped_events++;
		ex->dropped_bytes += n + 1;
	}
	free(line);
	wake(ex);
}

static void on_event(json_t *ev, void *ctx)
{
	emit(ctx, json_incref(ev));
}

static void on_message(json_t *m, void *ctx)
{
	struct execution *ex = ctx;
	exec_out_message(&ex->out, m, ex->stream ? on_event : NULL, ex);
}

ssize_t exec_read_stream(struct execution *ex, char *buf, size_t max, bool *wait)
{
	*wait = false;
	if (ex->soff < ex->slen) {
		size_t n = ex->slen - ex->soff < max ? ex->slen - ex->soff : max;
		memcpy(buf, ex->sbuf + ex->soff, n);
		ex->soff += n;
		if (ex->soff == ex->slen)
			ex->soff = ex->slen = 0;
		if (!ex->slen && ex->scap > 65536) {
			/* drained: what a burst needed is given back */
			free(ex->sbuf);
			ex->sbuf = NULL;
			ex->scap = 0;
			account(ex, 0);
		}
		return (ssize_t)n;
	}
	if (ex->verdict_due) {
		/* the last event is written once the client has read the rest, so
		 * the daemon never holds both (it is the whole output again) */
		ex->verdict_due = false;
		json_t *ev = json_pack("{s:s}", "event", "verdict");
		if (ev)
			json_object_update(ev, ex->final);
		emit(ex, ev);
		if (ex->soff < ex->slen)
			return exec_read_stream(ex, buf, max, wait);
	}
	if (ex->state == EX_DONE)
		return -1;
	*wait = true;
	suspend(ex);
	return 0;
}

void exec_attach(struct execution *ex, struct MHD_Connection *c, bool stream)
{
	ex->conn = c;
	if (!stream && ex->state != EX_DONE)
		suspend(ex);
}

void exec_detach(struct execution *ex, bool client_gone)
{
	client_watch(ex, false);
	ex->conn = NULL;
	ex->suspended = false;
	if (client_gone && ex->state != EX_DONE)
		exec_cancel(ex);
}

static void ex_free(struct execution *ex)
{
	exec_request_release(&ex->req);
	exec_out_release(&ex->out);
	ward_verdict_release(&ex->v);
	json_decref(ex->final);
	account(ex, 0);
	free(ex->sbuf);
	free(ex);
}

void exec_ref(struct execution *ex)
{
	ex->refs++;
}

void exec_client_gone(struct execution *ex)
{
	client_watch(ex, false);
	exec_cancel(ex);
}

void exec_unref(struct execution *ex)
{
	if (ex && --ex->refs == 0)
		ex_free(ex);
}

void exec_cancel(struct execution *ex)
{
	if (ex->state == EX_DONE)
		return;
	if (ex->sess) {
		/* the session stays: only its call is interrupted */
		session_interrupt(ex->sess, "cancel");
		return;
	}
	/* the pidfd says when it is over; the loop finishes it (and looks at
	 * once, in case it was already over) */
	ward_sandbox_kill(ex->k ? ward_kernel_sandbox(ex->k) : ex->sb, WARD_KILL_CANCEL);
	ex->wake_ns = ward_now_ns();
}

struct execution *exec_find(struct srv *s, const char *id)
{
	for (struct execution *ex = s->execs; ex; ex = ex->next)
		if (strcmp(ex->id, id) == 0)
			return ex;
	return NULL;
}

/* The fds to watch now, into the execution's own epoll set. */
static void sync_fds(struct execution *ex)
{
	struct pollfd fds[WARD_KERNEL_NFDS] = { { .fd = -1 }, { .fd = -1 }, { .fd = -1 }, { .fd = -1 } };
	int t;
	if (ex->k) {
		t = ward_kernel_pollfds(ex->k, fds);
	} else {
		bool exited = ward_sandbox_exited(ex->sb);
		fds[0] = (struct pollfd){ .fd = ex->out_eof ? -1 : ward_sandbox_stdout(ex->sb), .events = POLLIN };
		fds[1] = (struct pollfd){ .fd = ex->err_eof ? -1 : ward_sandbox_stderr(ex->sb), .events = POLLIN };
		fds[3] = (struct pollfd){ .fd = exited ? -1 : ward_sandbox_pidfd(ex->sb), .events = POLLIN };
		t = exited ? -1 : ward_sandbox_check(ex->sb);
	}
	ex->wake_ns = srv_watch(ex->epfd, ex->reg, fds, t);
}

uint64_t srv_watch(int epfd, int reg[WARD_KERNEL_NFDS], const struct pollfd fds[WARD_KERNEL_NFDS],
		   int t)
{
	bool any = false;
	for (int i = 0; i < WARD_KERNEL_NFDS; i++) {
		if (reg[i] != fds[i].fd) {
			if (reg[i] >= 0)
				epoll_ctl(epfd, EPOLL_CTL_DEL, reg[i], NULL);
			reg[i] = -1;
			struct epoll_event ev = { .events = fds[i].events == POLLOUT ? EPOLLOUT : EPOLLIN };
			if (fds[i].fd >= 0 && epoll_ctl(epfd, EPOLL_CTL_ADD, fds[i].fd, &ev) == 0)
				reg[i] = fds[i].fd;
		}
		any = any || reg[i] >= 0;
	}
	/* Nothing left to watch (the init exited between the step and now):
	 * the next step, at once, finishes it. */
	if (!any)
		return ward_now_ns();
	return t < 0 ? 0 : ward_now_ns() + (uint64_t)t * 1000000ull;
}

/* The exit code as the verdict's JSON gives it: none (null) when a signal
 * ended the program, when ward stopped it (a limit, a cancel) without an
 * exit status of its own, or when it never started. */
static json_t *exit_code_json(const struct ward_verdict *v)
{
	bool stopped = v->status == WARD_STATUS_TIMEOUT || v->status == WARD_STATUS_CPU_TIMEOUT ||
		       v->status == WARD_STATUS_MEMORY_LIMIT || v->status == WARD_STATUS_KILLED ||
		       v->status == WARD_STATUS_PIDS_LIMIT;
	if (v->signal || v->status == WARD_STATUS_SETUP_FAILED || (stopped && !v->exit_code))
		return json_null();
	return json_integer(v->exit_code);
}

static void audit_verdict(struct execution *ex)
{
	json_t *f = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s?, s:o, s:o, s:{s:I, s:I, s:I, s:I, s:I}}",
			      "execution_id", ex->id, "key_id", ex->key.id, "tenant", ex->key.tenant,
			      "sandbox_id", ex->v.sandbox_id, "status", ward_status_name(ex->v.status),
			      "limit", ex->v.limit, "exit_code", exit_code_json(&ex->v), "signal",
			      ex->v.signal ? json_integer(ex->v.signal) : json_null(),
			      "usage", "wall_ms", (json_int_t)ex->v.usage.wall_ms,
			      "cpu_user_ms", (json_int_t)ex->v.usage.cpu_user_ms,
			      "cpu_sys_ms", (json_int_t)ex->v.usage.cpu_sys_ms,
			      "peak_memory_bytes", (json_int_t)ex->v.usage.peak_memory_bytes,
			      "output_bytes", (json_int_t)ex->v.usage.output_bytes);
	if (!f)
		return;
	bool full = ex->s->audit && ward_audit_full_text(ex->s->audit);
	ward_audit_text(f, "stdout", ex->v.out.data, ex->v.out.len, full);
	ward_audit_text(f, "stderr", ex->v.err.data, ex->v.err.len, full);
	if (ex->sess)
		json_object_set_new(f, "session_id", json_string(session_id(ex->sess)));
	srv_audit(ex->s, "execution.verdict", f);
	json_decref(f);
	if (ex->out.violation) {
		/* what the lint refused, as the kernel reported it (a claim: the
		 * sandbox contains the code either way) */
		json_t *c = ex->out.violation;
		f = json_pack("{s:s, s:s, s:s, s:s, s:s?, s:s?, s:O?, s:O?}", "execution_id", ex->id,
			      "key_id", ex->key.id, "tenant", ex->key.tenant, "sandbox_id",
			      ex->v.sandbox_id, "rule", json_string_value(json_object_get(c, "rule")),
			      "name", json_string_value(json_object_get(c, "name")),
			      "line", json_object_get(c, "line"), "col", json_object_get(c, "col"));
		if (f && ex->sess)
			json_object_set_new(f, "session_id", json_string(session_id(ex->sess)));
		srv_audit(ex->s, "policy.violation", f);
		json_decref(f);
	}
	if (ex->sess)
		return;
	f = json_pack("{s:s, s:s}", "sandbox_id", ex->v.sandbox_id, "execution_id", ex->id);
	srv_audit(ex->s, "sandbox.destroy", f);
	json_decref(f);
}

static void unlink_exec(struct execution *ex)
{
	struct srv *s = ex->s;
	for (struct execution **p = &s->execs; *p; p = &(*p)->next)
		if (*p == ex) {
			*p = ex->next;
			break;
		}
	if (ex->sess)
		return;
	s->running--;
	struct srv_tenant_count *t = metrics_tenant(s, ex->key.tenant);
	if (t && t->running)
		t->running--;
	if (t)
		t->memory -= ex->mem < t->memory ? ex->mem : t->memory;
}

/* What every ending shares: the id, the accounting, the last event. */
static void finish_common(struct execution *ex)
{
	if (!ex->final)
		ex->final = json_pack("{s:s}", "status", ward_status_name(ex->v.status));
	json_object_set_new(ex->final, "execution_id", json_string(ex->id));
	for (int i = 0; i < WARD_KERNEL_NFDS; i++)
		ex->reg[i] = -1;
	if (ex->epfd >= 0) {
		epoll_ctl(ex->s->epfd, EPOLL_CTL_DEL, ex->epfd, NULL);
		close(ex->epfd);
		ex->epfd = -1;
	}
	ex->state = EX_DONE;
	metrics_verdict(ex->s, ex->key.tenant, ex->v.status, ex->v.usage.wall_ms);
	audit_verdict(ex);
	unlink_exec(ex);
	ex->verdict_due = ex->stream; /* exec_read_stream writes it */
	wake(ex);
	exec_unref(ex); /* the registry's reference */
}

/* The end: the verdict, the final JSON, the last event, the accounting. */
static void finish(struct execution *ex)
{
	struct ward_error err;
	ward_error_clear(&err);
	if (ex->k) {
		exec_out_to_verdict(&ex->out, &ex->v);
		ward_kernel_finish(ex->k, &ex->v, &err);
		ex->k = NULL;
		exec_out_adjust(&ex->out, &ex->v, &ex->req.policy);
		ex->final = exec_out_final(&ex->out, &ex->v, &ex->req.policy, ex->died,
					   ward_lang_name((enum ward_lang)ex->req.lang));
	} else {
		if (ex->sb)
			ward_sandbox_finish(ex->sb, &ex->v, &err);
		ex->sb = NULL;
		ex->final = (json_t *)ward_verdict_to_object(&ex->v);
	}
	finish_common(ex);
}

/* A command: output into the verdict's buffers within the cap. */
static void read_cmd(struct execution *ex, int fd, int which, bool *eof)
{
	char buf[65536];
	ssize_t n = read(fd, buf, sizeof(buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		*eof = true;
		return;
	}
	size_t kept = exec_keep(&ex->v, which, buf, (size_t)n, ex->req.policy.output_limit);
	if (kept)
		emit(ex, json_pack("{s:s, s:s, s:s%}", "event", "stream", "name",
				   which == 1 ? "stdout" : "stderr", "text", buf, kept));
}

static void step_command(struct execution *ex)
{
	ward_sandbox_check(ex->sb);
	if (!ex->out_eof)
		read_cmd(ex, ward_sandbox_stdout(ex->sb), 1, &ex->out_eof);
	if (!ex->err_eof)
		read_cmd(ex, ward_sandbox_stderr(ex->sb), 2, &ex->err_eof);
	if (ex->out_eof && ex->err_eof && ward_sandbox_exited(ex->sb))
		finish(ex);
}

/* Artifacts are listed while the sandbox still runs (through its root). */
static void collect_artifacts(struct execution *ex)
{
	struct ward_artifact_limits lim = { .max_file = 16u << 20, .max_total = 64u << 20,
					    .max_count = 100 };
	struct ward_error err;
	ward_kernel_artifacts(ex->k, NULL, &lim, &ex->out.artifacts, &ex->out.skipped, &err);
}

static void step_kernel(struct execution *ex)
{
	json_t *reply = NULL;
	int r = ward_kernel_step(ex->k, &reply);
	if (r == 1 && ex->state == EX_RUNNING) {
		exec_out_reply(&ex->out, reply);
		json_decref(reply);
		collect_artifacts(ex);
		struct ward_error err;
		ex->state = ward_kernel_submit_shutdown(ex->k, 2000, &err) == 0 ? EX_SHUTDOWN : EX_DRAIN;
		return;
	}
	json_decref(reply);
	if (r == 1 && ex->state == EX_SHUTDOWN)
		ex->state = EX_DRAIN;
	if (r == -ECHILD) {
		ex->died = ex->state == EX_RUNNING;
		finish(ex);
	}
}

void exec_dispatch(struct srv *s, struct execution *ex)
{
	(void)s;
	if (ex->state == EX_DONE)
		return;
	if (ex->k)
		step_kernel(ex);
	else
		step_command(ex);
	if (ex->state != EX_DONE)
		sync_fds(ex);
}

void exec_tick(struct srv *s)
{
	uint64_t now = ward_now_ns();
	struct execution *ex = s->execs, *next;
	for (; ex; ex = next) {
		next = ex->next;
		if (ex->wake_ns && ex->wake_ns <= now)
			exec_dispatch(s, ex);
	}
}

int exec_timeout(struct srv *s)
{
	uint64_t now = ward_now_ns(), best = 0;
	for (struct execution *ex = s->execs; ex; ex = ex->next)
		if (ex->wake_ns && (!best || ex->wake_ns < best))
			best = ex->wake_ns;
	if (!best)
		return -1;
	return best <= now ? 0 : (int)((best - now) / 1000000 + 1);
}

void exec_kill_all(struct srv *s)
{
	struct execution *ex = s->execs, *next;
	for (; ex; ex = next) {
		next = ex->next;
		exec_cancel(ex);
	}
}

static int start_sandbox(struct execution *ex, struct ward_error *err)
{
	struct exec_request *r = &ex->req;
	if (r->lang < 0) {
		struct ward_sandbox_options so = { .files = r->files, .n_files = r->n_files };
		int rc = ward_sandbox_start(&r->policy, r->argv, &so, &ex->sb, err);
		if (rc < 0)
			return rc;
		ward_strlcpy(ex->v.sandbox_id, ward_sandbox_id(ex->sb), sizeof(ex->v.sandbox_id));
		/* our read ends only: a step must never wait on the program */
		int fds[2] = { ward_sandbox_stdout(ex->sb), ward_sandbox_stderr(ex->sb) };
		for (int i = 0; i < 2; i++)
			if (fds[i] >= 0)
				fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
		return 0;
	}
	json_t *lint = (json_t *)ward_policy_lint_json(&r->policy);
	struct ward_kernel_options ko = { .lang = (enum ward_lang)r->lang, .files = r->files,
					  .n_files = r->n_files, .lint = lint,
					  .runners_dir = ex->s->cfg.runners };
	int rc = ward_kernel_begin(&r->policy, &ko, &ex->k, err);
	json_decref(lint);
	if (rc < 0)
		return rc;
	ward_strlcpy(ex->v.sandbox_id, ward_sandbox_id(ward_kernel_sandbox(ex->k)),
		     sizeof(ex->v.sandbox_id));
	rc = ward_kernel_submit_execute(ex->k, r->code, true, on_message, ex, err);
	if (rc == -ECHILD)
		rc = 0; /* died at once: the step says how */
	return rc;
}

static void audit_create(struct execution *ex)
{
	json_t *f = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "execution_id", ex->id,
			      "key_id", ex->key.id, "tenant", ex->key.tenant,
			      "sandbox_id", ex->v.sandbox_id, "policy_digest", ex->digest,
			      "kind", ex->req.lang < 0 ? "command" : ward_lang_name((enum ward_lang)ex->req.lang));
	if (!f)
		return;
	bool full = ex->s->audit && ward_audit_full_text(ex->s->audit);
	if (ex->req.code)
		ward_audit_text(f, "code", ex->req.code, strlen(ex->req.code), full);
	if (ex->req.argv) {
		json_t *a = json_array();
		for (size_t i = 0; a && ex->req.argv[i] && i < 64; i++)
			json_array_append_new(a, json_string(ex->req.argv[i]));
		char *txt = a ? json_dumps(a, JSON_COMPACT) : NULL;
		if (txt)
			ward_audit_text(f, "command", txt, strlen(txt), full);
		free(txt);
		json_decref(a);
	}
	srv_audit(ex->s, "sandbox.create", f);
	json_decref(f);
}

static struct execution *ex_new(struct srv *s, struct exec_request *r,
				const struct ward_key_info *key)
{
	struct execution *ex = calloc(1, sizeof(*ex));
	if (!ex)
		return NULL;
	ex->s = s;
	ex->refs = 2; /* the registry's, the requester's */
	ex->key = *key;
	ex->req = *r;
	ex->stream = r->stream;
	memset(r, 0, sizeof(*r));
	ex->epfd = -1;
	for (int i = 0; i < WARD_KERNEL_NFDS; i++)
		ex->reg[i] = -1;
	ward_verdict_init(&ex->v);
	exec_out_init(&ex->out, ex->req.policy.output_limit);
	ward_id_new(ex->id, sizeof(ex->id), "ex_", 8);
	char *pj = ward_policy_to_json(&ex->req.policy);
	ward_audit_digest(pj ? pj : "", pj ? strlen(pj) : 0, ex->digest);
	free(pj);
	ex->start_ns = ward_now_ns();
	return ex;
}

int exec_start(struct srv *s, struct exec_request *r, const struct ward_key_info *key,
	       struct execution **out, struct ward_error *err)
{
	struct execution *ex = ex_new(s, r, key);
	if (!ex)
		return ward_error_set(err, ENOMEM, "serve", "out of memory");
	ex->next = s->execs;
	s->execs = ex;
	s->running++;
	struct srv_tenant_count *t = metrics_tenant(s, key->tenant);
	ex->mem = ex->req.policy.memory;
	if (t) {
		t->running++;
		t->memory += ex->mem;
	}
	*out = ex;
	ex->epfd = epoll_create1(EPOLL_CLOEXEC);
	int rc = ex->epfd < 0 ? ward_error_set(err, errno, "serve", "epoll_create1") : 0;
	if (rc == 0)
		rc = start_sandbox(ex, err);
	emit(ex, json_pack("{s:s, s:s, s:s}", "event", "start", "id", ex->id, "sandbox_id",
			   ex->v.sandbox_id));
	if (rc < 0) {
		/* a setup failure is a verdict like any other */
		ex->v.status = WARD_STATUS_SETUP_FAILED;
		ex->v.setup = *err;
		if (ex->k)
			ward_kernel_finish(ex->k, &ex->v, err);
		ex->k = NULL;
		finish(ex);
		return 0;
	}
	audit_create(ex);
	ex->w = (struct watch){ .kind = WATCH_EXEC, .ptr = ex };
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &ex->w };
	epoll_ctl(s->epfd, EPOLL_CTL_ADD, ex->epfd, &ev);
	sync_fds(ex);
	return 0;
}

/* --- calls in a session: the session's agent runs them; this keeps the
 * output, the client and the verdict, as for a one-shot. --- */

const char *exec_session_request(const struct execution *ex) { return ex->req_id; }
uint64_t exec_started_ns(const struct execution *ex) { return ex->start_ns; }

void exec_set_session_request(struct execution *ex, const char *id)
{
	ward_strlcpy(ex->req_id, id, sizeof(ex->req_id));
}

struct execution *exec_new_in_session(struct srv *s, struct session *sess,
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
	struct execution *ex = ex_new(s, &r, key);
	if (!ex) {
		exec_request_release(&r);
		return NULL;
	}
	ex->kind = kind;
	ex->sess = sess;
	ward_strlcpy(ex->lang, lang ? lang : "", sizeof(ex->lang));
	ward_strlcpy(ex->context, context ? context : "", sizeof(ex->context));
	ward_strlcpy(ex->v.sandbox_id, ward_sandbox_id(session_sandbox(sess)), sizeof(ex->v.sandbox_id));
	ex->next = s->execs;
	s->execs = ex;
	emit(ex, json_pack("{s:s, s:s, s:s, s:s}", "event", "start", "id", ex->id, "sandbox_id",
			   ex->v.sandbox_id, "session_id", session_id(sess)));
	return ex;
}

void exec_session_message(struct execution *ex, json_t *m)
{
	if (ex->kind == EXK_EXECUTE) {
		on_message(m, ex);
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
	size_t kept = exec_keep(&ex->v, which, json_string_value(t), json_string_length(t),
				ex->req.policy.output_limit);
	if (kept)
		emit(ex, json_pack("{s:s, s:s, s:s%}", "event", "stream", "name",
				   which == 1 ? "stdout" : "stderr", "text", json_string_value(t), kept));
}

/* What the agent's reply status means as a verdict. A context that died
 * is explained by the cgroup's counters, never guessed from the signal. */
static void session_status(struct execution *ex, json_t *reply,
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
}

void exec_session_end(struct execution *ex, json_t *reply, const struct ward_verdict *dead,
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
	if (ex->kind == EXK_EXECUTE) {
		exec_out_reply(&ex->out, reply);
		exec_out_to_verdict(&ex->out, v);
		if (!reply)
			ex->out.code_failed = true;
		if (v->status == WARD_STATUS_ERROR && ex->out.violation)
			v->status = WARD_STATUS_OK; /* the adjust below names it */
		exec_out_adjust(&ex->out, v, &ex->req.policy);
		bool died = ex->died || (reply && v->status != WARD_STATUS_OK &&
					 v->status != WARD_STATUS_ERROR &&
					 v->status != WARD_STATUS_POLICY_VIOLATION && !ex->out.error);
		ex->final = exec_out_final(&ex->out, v, &ex->req.policy, died, ex->lang);
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
	finish_common(ex);
}
