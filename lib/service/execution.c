/* lib/service/execution.c — one-shot executions, driven by the core's loop.
 *
 * An execution is a fresh sandbox running either a language kernel (one
 * cell) or a command, stepped without blocking: its fds sit behind one
 * epoll fd in the core's, and each step reads what is ready. Events go to
 * the execution's sink and its bounded NDJSON queue (exec-stream.c); the
 * final JSON is what `ward exec --json` prints (one result builder,
 * lib/kernel/result.c). It must never wait on the program or the listener:
 * a slow reader only grows its own (capped) queue.
 */
#include <fcntl.h>
#include <signal.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>

#include "base/util.h"
#include "execution.h"

const char *ward_execution_id(const struct ward_execution *ex) { return ex->id; }
const char *exec_tenant(const struct ward_execution *ex) { return ex->key.tenant; }
bool ward_execution_done(const struct ward_execution *ex) { return ex->state == EX_DONE; }
json_t *ward_execution_result(struct ward_execution *ex) { return ex->final; }

static void ex_free(struct ward_execution *ex)
{
	exec_request_release(&ex->req);
	ward_result_release(&ex->out);
	ward_verdict_release(&ex->v);
	json_decref(ex->final);
	exec_stream_release(ex);
	free(ex);
}

void ward_execution_ref(struct ward_execution *ex)
{
	ex->refs++;
}

void ward_execution_unref(struct ward_execution *ex)
{
	if (ex && --ex->refs == 0)
		ex_free(ex);
}

void ward_execution_cancel(struct ward_execution *ex)
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

struct ward_execution *exec_find(struct ward_service *s, const char *id)
{
	for (struct ward_execution *ex = s->execs; ex; ex = ex->next)
		if (strcmp(ex->id, id) == 0)
			return ex;
	return NULL;
}

/* The fds to watch now, into the execution's own epoll set. */
static void sync_fds(struct ward_execution *ex)
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
	ex->wake_ns = svc_watch(ex->epfd, ex->reg, fds, t);
}

uint64_t svc_watch(int epfd, int reg[WARD_KERNEL_NFDS], const struct pollfd fds[WARD_KERNEL_NFDS],
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

static void audit_verdict(struct ward_execution *ex)
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
	svc_audit(ex->s, "execution.verdict", f);
	json_decref(f);
	if (ex->v.limit) {
		/* a limit stopped it: its own event, for alerting */
		f = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "execution_id", ex->id, "key_id",
			      ex->key.id, "tenant", ex->key.tenant, "sandbox_id", ex->v.sandbox_id,
			      "status", ward_status_name(ex->v.status), "limit", ex->v.limit);
		if (f && ex->sess)
			json_object_set_new(f, "session_id", json_string(session_id(ex->sess)));
		svc_audit(ex->s, "limit.exceeded", f);
		json_decref(f);
	}
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
		svc_audit(ex->s, "policy.violation", f);
		json_decref(f);
	}
	if (ex->sess)
		return;
	f = json_pack("{s:s, s:s}", "sandbox_id", ex->v.sandbox_id, "execution_id", ex->id);
	svc_audit(ex->s, "sandbox.destroy", f);
	json_decref(f);
}

static void unlink_exec(struct ward_execution *ex)
{
	struct ward_service *s = ex->s;
	for (struct ward_execution **p = &s->execs; *p; p = &(*p)->next)
		if (*p == ex) {
			*p = ex->next;
			break;
		}
	if (ex->sess)
		return;
	s->running--;
	struct svc_tenant_count *t = metrics_tenant(s, ex->key.tenant);
	if (t && t->running)
		t->running--;
	if (t)
		t->memory -= ex->mem < t->memory ? ex->mem : t->memory;
}

void exec_finish_common(struct ward_execution *ex)
{
	if (!ex->final)
		ex->final = json_pack("{s:s}", "status", ward_status_name(ex->v.status));
	if (!ex->req.anonymous)
		json_object_set_new(ex->final, "execution_id", json_string(ex->id));
	if (ex->req.inline_artifacts) /* the cap applied: the client's, within the operator's */
		json_object_set_new(ex->final, "artifacts_inline_max",
				    json_integer((json_int_t)ex->req.inline_max));
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
	ex->verdict_due = ex->stream; /* ward_execution_read writes it */
	exec_notify(ex, WARD_EVENT_VERDICT);
	ward_execution_unref(ex); /* the registry's reference */
}

/* The end: the verdict, the final JSON, the last event, the accounting. */
static void finish(struct ward_execution *ex)
{
	struct ward_error err;
	ward_error_clear(&err);
	if (ex->k) {
		ward_result_to_verdict(&ex->out, &ex->v);
		ward_kernel_finish(ex->k, &ex->v, &err);
		ex->k = NULL;
		ward_result_adjust(&ex->out, &ex->v, &ex->req.policy);
		ex->out.died = ex->died;
		ex->final = ward_result_final(&ex->out, &ex->v, &ex->req.policy,
					      ward_lang_name((enum ward_lang)ex->req.lang));
	} else {
		if (ex->sb)
			ward_sandbox_finish(ex->sb, &ex->v, &err);
		ex->sb = NULL;
		ex->final = (json_t *)ward_verdict_to_object(&ex->v);
	}
	exec_finish_common(ex);
}

/* The last reply is in: the verdict now (usage sampled now), the final
 * JSON and the last event at once; the sandbox is killed and torn down
 * after, off the loop (svc_teardown). False when the verdict cannot be told
 * before the end (ward_kernel_end): then the kernel shuts down as before. */
static bool finish_now(struct ward_execution *ex)
{
	struct ward_service *s = ex->s;
	ward_result_to_verdict(&ex->out, &ex->v);
	if (ward_kernel_end(ex->k, &ex->v) < 0) {
		/* back where finish() takes them from */
		ex->out.text[0] = ex->v.out;
		ex->out.text[1] = ex->v.err;
		ex->v.out = ex->v.err = (struct ward_buffer){ 0 };
		return false;
	}
	struct ward_kernel *k = ex->k;
	ex->k = NULL;
	ward_result_adjust(&ex->out, &ex->v, &ex->req.policy);
	ex->out.died = false;
	ex->final = ward_result_final(&ex->out, &ex->v, &ex->req.policy,
				      ward_lang_name((enum ward_lang)ex->req.lang));
	exec_finish_common(ex); /* may free ex */
	svc_teardown(s, k);
	return true;
}

/* A command: output into the verdict's buffers within the cap. */
static void read_cmd(struct ward_execution *ex, int fd, int which, bool *eof)
{
	char buf[65536];
	ssize_t n = read(fd, buf, sizeof(buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		*eof = true;
		return;
	}
	size_t kept = ward_verdict_keep(&ex->v, which, buf, (size_t)n, ex->req.policy.output_limit);
	if (kept)
		exec_emit(ex, json_pack("{s:s, s:s, s:s%}", "event", "stream", "name",
				   which == 1 ? "stdout" : "stderr", "text", buf, kept));
}

static void step_command(struct ward_execution *ex)
{
	ward_sandbox_check(ex->sb);
	if (!ex->out_eof)
		read_cmd(ex, ward_sandbox_stdout(ex->sb), 1, &ex->out_eof);
	if (!ex->err_eof)
		read_cmd(ex, ward_sandbox_stderr(ex->sb), 2, &ex->err_eof);
	if (ex->out_eof && ex->err_eof && ward_sandbox_exited(ex->sb))
		finish(ex);
}

/* Artifacts are listed (and copied out, for a program's run) while the
 * sandbox still runs, through its root. */
static void collect_artifacts(struct ward_execution *ex)
{
	struct ward_artifact_limits lim = { .max_file = 16u << 20, .max_total = 64u << 20,
					    .max_count = 100,
					    .inline_content = ex->req.inline_artifacts,
					    .max_inline = ex->req.inline_max };
	if (ward_kernel_artifacts(ex->k, ex->req.artifacts_dir, &lim, &ex->out.artifacts,
				  &ex->out.skipped, &ex->art_err) < 0 && ex->req.artifacts_dir)
		ex->art_failed = true;
}

/* The next cell, or the call. */
static int submit_next(struct ward_execution *ex, struct ward_error *err)
{
	struct exec_request *r = &ex->req;
	if (ex->cell == 0 && r->globals) /* before the code, once */
		ward_kernel_set_globals(ex->k, r->globals);
	if (r->call_function)
		return ward_kernel_submit_call(ex->k, r->call_source, r->call_filename,
					       r->call_function, r->call_args, exec_on_message, ex,
					       err);
	return ward_kernel_submit_execute(ex->k, r->cells[ex->cell], !r->keep_going,
					  exec_on_message, ex, err);
}

/* What the kernel answered ends a cell (or the call); the next one goes,
 * or the artifacts are taken and the kernel told to stop. */
static void replied(struct ward_execution *ex, json_t *reply)
{
	bool call = ex->req.call_function != NULL;
	if (call)
		ward_result_call_reply(&ex->out, reply);
	else
		ward_result_reply(&ex->out, reply);
	struct ward_error err;
	if (!call && ++ex->cell < ex->req.n_cells) {
		int rc = submit_next(ex, &err);
		if (rc == 0 || rc == -ECHILD) /* gone: the next step says how */
			return;
		ward_result_reply(&ex->out, NULL);
	} else {
		collect_artifacts(ex);
		if (finish_now(ex))
			return;
	}
	ex->state = ward_kernel_submit_shutdown(ex->k, 2000, &err) == 0 ? EX_SHUTDOWN : EX_DRAIN;
}

static void step_kernel(struct ward_execution *ex)
{
	json_t *reply = NULL;
	int r = ward_kernel_step(ex->k, &reply);
	if (r == 1 && ex->state == EX_RUNNING) {
		replied(ex, reply);
		json_decref(reply);
		return;
	}
	json_decref(reply);
	if (r == 1 && ex->state == EX_SHUTDOWN)
		ex->state = EX_DRAIN;
	if (r == -ECHILD) {
		ex->died = ex->state == EX_RUNNING;
		if (ex->died && ex->req.call_function) /* the cell it died in, as the CLI did */
			ward_result_call_reply(&ex->out, NULL);
		else if (ex->died && ex->req.n_cells > 1)
			ward_result_reply(&ex->out, NULL);
		finish(ex);
	}
}

void exec_dispatch(struct ward_service *s, struct ward_execution *ex)
{
	(void)s;
	if (ex->state == EX_DONE)
		return;
	/* finishing drops the registry's reference, maybe the last one (a
	 * requester that cancelled and let go): ex must live to the end here */
	ward_execution_ref(ex);
	if (ex->k)
		step_kernel(ex);
	else
		step_command(ex);
	if (ex->state != EX_DONE)
		sync_fds(ex);
	ward_execution_unref(ex);
}

void exec_tick(struct ward_service *s)
{
	uint64_t now = ward_now_ns();
	struct ward_execution *ex = s->execs, *next;
	for (; ex; ex = next) {
		next = ex->next;
		if (ex->wake_ns && ex->wake_ns <= now)
			exec_dispatch(s, ex);
	}
}

int exec_timeout(struct ward_service *s)
{
	uint64_t now = ward_now_ns(), best = 0;
	for (struct ward_execution *ex = s->execs; ex; ex = ex->next)
		if (ex->wake_ns && (!best || ex->wake_ns < best))
			best = ex->wake_ns;
	if (!best)
		return -1;
	return best <= now ? 0 : (int)((best - now) / 1000000 + 1);
}

void exec_kill_all(struct ward_service *s)
{
	struct ward_execution *ex = s->execs, *next;
	for (; ex; ex = next) {
		next = ex->next;
		ward_execution_cancel(ex);
	}
}

/* A pooled kernel, when one fits: claimed here, after admission (its
 * files, at most WARM_CLAIM_MAX_BYTES, written on the loop), then driven
 * like one from ward_kernel_begin. -1 for a miss, and for a claim that
 * failed: the cold start then says what a cold start says. */
static int start_warm(struct ward_execution *ex, struct ward_error *err)
{
	struct exec_request *r = &ex->req;
	/* a pooled kernel was attached to the proxy before any tenant asked
	 * for it: sandboxes with egress always start for their request */
	if (r->policy.network.mode != WARD_NET_NONE)
		return -1;
	struct ward_kernel *k = warm_take(ex->s, r);
	struct ward_error cerr;
	if (!k)
		return -1;
	if (ward_kernel_claim(k, r->files, r->n_files, &cerr) < 0 ||
	    ward_kernel_make_async(k, &cerr) < 0) {
		ward_kernel_discard(k);
		return -1;
	}
	ex->k = k;
	ward_strlcpy(ex->v.sandbox_id, ward_sandbox_id(ward_kernel_sandbox(k)),
		     sizeof(ex->v.sandbox_id));
	int rc = submit_next(ex, err);
	if (rc == -ECHILD)
		rc = 0; /* died: the step says how */
	/* no refill here: it would take a CPU from this request; the
	 * teardown's end asks for one (pool.c) */
	return rc < 0 ? rc : 0;
}

static int start_sandbox(struct ward_execution *ex, struct ward_error *err)
{
	struct exec_request *r = &ex->req;
	if (r->lang < 0) {
		struct ward_sandbox_options so = { .files = r->files, .n_files = r->n_files,
						   .launcher = ex->s->cfg.launcher,
						   .egress = svc_egress(ex->s),
						   .tenant = ex->key.tenant,
						   .credentials = r->creds,
						   .n_credentials = r->n_creds };
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
	if (start_warm(ex, err) == 0)
		return 0;
	warm_make_room(ex->s); /* a cold start: pooled ones give way past max_executions */
	json_t *lint = (json_t *)ward_policy_lint_json(&r->policy);
	struct ward_kernel_options ko = { .lang = (enum ward_lang)r->lang, .files = r->files,
					  .n_files = r->n_files, .lint = lint,
					  .runners_dir = ex->s->cfg.runners,
					  .zygote = svc_zygote(ex->s), .launcher = ex->s->cfg.launcher,
					  .egress = svc_egress(ex->s), .tenant = ex->key.tenant,
					  .credentials = r->creds, .n_credentials = r->n_creds };
	int rc = ward_kernel_begin(&r->policy, &ko, &ex->k, err);
	json_decref(lint);
	if (rc < 0)
		return rc;
	ward_strlcpy(ex->v.sandbox_id, ward_sandbox_id(ward_kernel_sandbox(ex->k)),
		     sizeof(ex->v.sandbox_id));
	rc = submit_next(ex, err);
	if (rc == -ECHILD)
		rc = 0; /* died at once: the step says how */
	return rc;
}

static void audit_create(struct ward_execution *ex)
{
	json_t *f = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "execution_id", ex->id,
			      "key_id", ex->key.id, "tenant", ex->key.tenant,
			      "sandbox_id", ex->v.sandbox_id, "policy_digest", ex->digest,
			      "kind", ex->req.lang < 0 ? "command" : ward_lang_name((enum ward_lang)ex->req.lang));
	if (!f)
		return;
	bool full = ex->s->audit && ward_audit_full_text(ex->s->audit);
	for (size_t i = 0; i < ex->req.n_cells && i < 1; i++) /* the first cell (an API call has one) */
		ward_audit_text(f, "code", ex->req.cells[i], strlen(ex->req.cells[i]), full);
	if (ex->req.call_function) { /* a call: the tool's source, and what it calls */
		ward_audit_text(f, "code", ex->req.call_source, strlen(ex->req.call_source), full);
		json_object_set_new(f, "function", json_string(ex->req.call_function));
	}
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
	svc_audit(ex->s, "sandbox.create", f);
	json_decref(f);
}

struct ward_execution *exec_new(struct ward_service *s, struct exec_request *r,
			   const struct ward_key_info *key)
{
	struct ward_execution *ex = calloc(1, sizeof(*ex));
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
	/* on ENOMEM the result stays empty and every feed is a no-op */
	ward_result_init(&ex->out, ex->req.policy.output_limit);
	ward_id_new(ex->id, sizeof(ex->id), "ex_", 8);
	char *pj = ward_policy_to_json(&ex->req.policy);
	ward_audit_digest(pj ? pj : "", pj ? strlen(pj) : 0, ex->digest);
	free(pj);
	ex->start_ns = ward_now_ns();
	return ex;
}

int exec_start(struct ward_service *s, struct exec_request *r, const struct ward_key_info *key,
	       struct ward_execution **out, struct ward_error *err)
{
	struct ward_execution *ex = exec_new(s, r, key);
	if (!ex)
		return ward_error_set(err, ENOMEM, "serve", "out of memory");
	ex->next = s->execs;
	s->execs = ex;
	s->running++;
	struct svc_tenant_count *t = metrics_tenant(s, key->tenant);
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
	exec_emit(ex, json_pack("{s:s, s:s, s:s}", "event", "start", "id", ex->id, "sandbox_id",
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


/* --- what a front end asks --- */

int ward_service_execute(struct ward_service *s, const struct ward_key_info *key,
			 const char *body, size_t len, bool stream, struct ward_reply *reply)
{
	memset(reply, 0, sizeof(*reply));
	if (svc_admit_execution(s, key->tenant, &reply->err) < 0)
		return 0;
	struct exec_request er;
	if (exec_request_parse(s, key, body ? body : "", len, &er, &reply->err) < 0)
		return 0;
	if (svc_admit_memory(s, key->tenant, er.policy.memory, &reply->err) < 0) {
		exec_request_release(&er);
		return 0;
	}
	er.stream = stream;
	struct ward_error err;
	ward_error_clear(&err);
	if (exec_start(s, &er, key, &reply->ex, &err) < 0) {
		exec_request_release(&er);
		return svc_reply_error(reply, 500, "internal", NULL, "%s", err.message);
	}
	reply->stream = stream;
	return 0;
}

int ward_service_cancel(struct ward_service *s, const struct ward_key_info *key, const char *id,
			struct ward_reply *reply)
{
	memset(reply, 0, sizeof(*reply));
	struct ward_execution *ex = exec_find(s, id);
	/* another tenant's execution does not exist for this one */
	if (!ex || strcmp(exec_tenant(ex), key->tenant) != 0)
		return svc_reply_error(reply, 404, "not_found", "id", "no such running execution");
	ward_execution_cancel(ex);
	return svc_reply(reply, 202, json_pack("{s:s, s:s}", "id", id, "status", "cancelling"));
}

int ward_service_run(struct ward_service *s, const struct ward_key_info *key,
		     struct ward_exec_spec *spec, struct ward_reply *reply)
{
	memset(reply, 0, sizeof(*reply));
	struct exec_request er;
	int rc = exec_request_from_spec(&er, spec);
	if (rc < 0 || svc_admit_execution(s, key->tenant, &reply->err) < 0) {
		if (rc < 0)
			svc_reply_error(reply, rc == -ENOMEM ? 500 : 400, rc == -ENOMEM ? "internal"
					: "invalid_request", NULL, "%s", rc == -ENOMEM ? "out of memory"
					: "a language and a cell or a call are required");
		exec_request_release(&er);
		return 0;
	}
	struct ward_error err;
	ward_error_clear(&err);
	if (exec_start(s, &er, key, &reply->ex, &err) < 0) {
		exec_request_release(&er);
		return svc_reply_error(reply, 500, "internal", NULL, "%s", err.message);
	}
	return 0;
}

const struct ward_verdict *ward_execution_verdict(const struct ward_execution *ex)
{
	return &ex->v;
}

const struct ward_result *ward_execution_output(const struct ward_execution *ex)
{
	return &ex->out;
}

const struct ward_error *ward_execution_artifacts_error(const struct ward_execution *ex)
{
	return ex->art_failed ? &ex->art_err : NULL;
}
