/* lib/supervise.c — ward_run: the supervisor side of one sandbox.
 *
 * Builds the plan, creates the cgroup, clones the child into every
 * namespace at once (and into its cgroup where the kernel allows), writes
 * the id maps, releases the child, then relays or captures output, enforces
 * the wall-time limit and turns what happened into a verdict. Whatever the
 * ending, every fd, the cgroup and the child are gone when it returns.
 */
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "base/util.h"
#include "cgroup.h"
#include "sandbox-child.h"
#include "ward/ward.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif

enum kill_reason { KILL_NONE, KILL_TIMEOUT, KILL_CPU, KILL_CANCEL };

struct run {
	struct ward_plan plan;
	struct ward_cgroup cg;
	bool have_cg;
	int sync[2], report[2], out[2], err[2], in[2];
	int pidfd;
	pid_t pid;
	struct ward_report rep, rep_buf;
	size_t rep_got;
	bool rep_complete;
	enum kill_reason killed_for;
	bool poll_cpu;
	uint64_t output_total;
	char in_buf[4096];
	size_t in_len;
	bool in_eof;
};

static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0) {
			close(p[i]);
			p[i] = -1;
		}
}

static int cap_last(void)
{
	static int cached = -1;
	if (cached < 0) {
		_cleanup_free_ char *buf = NULL;
		cached = 40;
		if (ward_read_file("/proc/sys/kernel/cap_last_cap", 64, &buf, NULL) == 0)
			cached = (int)strtol(buf, NULL, 10);
	}
	return cached;
}

static void make_id(char *buf, size_t len)
{
	unsigned char raw[8];
	static bool sodium_ready;
	if (!sodium_ready)
		sodium_ready = sodium_init() >= 0;
	randombytes_buf(raw, sizeof(raw));
	sodium_bin2hex(buf, len, raw, sizeof(raw));
}

/* Cgroup, or its fallback: without one, rlimits stand in and the verdict
 * says "degraded" — unless the policy requires a cgroup. */
static int setup_cgroup(struct run *r, const char *id, struct ward_error *err)
{
	const struct ward_policy *p = r->plan.policy;
	char name[96];
	struct ward_error cerr;
	ward_error_clear(&cerr);
	int rc = -ENOTSUP;
	if (ward_cgroup_detect(NULL) != WARD_CGROUP_NONE &&
	    ward_cgroup_make_name(name, sizeof(name), id) == 0) {
		struct ward_cgroup_limits lim = {
			.memory = p->memory, .pids = p->pids, .cpus_milli = p->cpus_milli,
			/* total CPU time needs cpuacct; otherwise rusage will do */
			.lean = p->cpu_time_ms == 0,
		};
		rc = ward_cgroup_create(&r->cg, NULL, name, &lim, &cerr);
	} else {
		ward_error_set(&cerr, ENOTSUP, "cgroup", "no usable cgroup hierarchy");
	}
	if (rc == 0) {
		r->have_cg = true;
		r->plan.layers |= 1u << WARD_LAYER_CGROUP;
		return 0;
	}
	if (p->require_cgroup) {
		*err = cerr;
		if (!err->hint[0])
			ward_error_hint(err, "run as root, or delegate a cgroup v2 subtree to "
					     "this user (systemd Delegate=yes)");
		return -(cerr.code ? cerr.code : ENOTSUP);
	}
	r->plan.degraded |= 1u << WARD_LAYER_CGROUP;
	struct ward_plan *pl = &r->plan;
	if (pl->n_rlimits + 2 <= WARD_PLAN_MAX_RLIMITS) {
		/* Coarse stand-ins: the data segment for memory (not the address
		 * space: V8 and the JVM reserve far more than they use), and
		 * processes of the sandbox's uid (counted per user namespace) for
		 * pids. */
		pl->rlimits[pl->n_rlimits++] = (struct ward_rlimit){
			RLIMIT_DATA, { p->memory, p->memory } };
		pl->rlimits[pl->n_rlimits++] = (struct ward_rlimit){
			RLIMIT_NPROC, { p->pids, p->pids } };
	}
	return 0;
}

static int start_child(struct run *r, struct ward_error *err)
{
	struct clone_args args;
	memset(&args, 0, sizeof(args));
	args.flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET |
		     CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWTIME |
		     CLONE_PIDFD;
	args.pidfd = (uint64_t)(uintptr_t)&r->pidfd;
	args.exit_signal = SIGCHLD;
	int cgfd = r->have_cg ? ward_cgroup_clone_fd(&r->cg) : -1;
	if (cgfd >= 0) {
		args.flags |= CLONE_INTO_CGROUP;
		args.cgroup = (uint64_t)cgfd;
	}
	long pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid < 0 && (errno == EINVAL || errno == EPERM) &&
	    (r->plan.allow_degrade & (1u << WARD_LAYER_TIME))) {
		/* time namespaces need Linux >= 5.6 and CONFIG_TIME_NS */
		args.flags &= ~(uint64_t)CLONE_NEWTIME;
		pid = syscall(SYS_clone3, &args, sizeof(args));
		if (pid >= 0)
			r->plan.degraded |= 1u << WARD_LAYER_TIME;
	}
	if (pid < 0) {
		int e = errno;
		ward_error_set(err, e, "userns", "unable to create the sandbox's namespaces");
		if (e == EPERM || e == ENOSPC || e == EUSERS)
			ward_error_hint(err, "user namespaces may be disabled: check "
					     "kernel.unprivileged_userns_clone and "
					     "user.max_user_namespaces ('ward doctor')");
		return -e;
	}
	if (pid == 0) {
		close(r->sync[1]);
		close(r->report[0]);
		close(r->out[0]);
		close(r->err[0]);
		if (r->in[1] >= 0)
			close(r->in[1]);
		ward_child_main(&r->plan, r->sync[0], r->report[1]);
	}
	r->pid = (pid_t)pid;
	close(r->sync[0]);
	close(r->report[1]);
	close(r->out[1]);
	close(r->err[1]);
	close(r->in[0]);
	r->sync[0] = r->report[1] = r->out[1] = r->err[1] = r->in[0] = -1;

	int rc = ward_userns_write_maps(&r->plan, r->pid, err);
	if (rc == 0 && r->have_cg)
		rc = ward_cgroup_attach(&r->cg, r->pid, cgfd >= 0, err);
	/* The write end stays open until the run ends: the init watches it to
	 * learn whether its supervisor is still alive. */
	if (rc == 0 && ward_write_all(r->sync[1], "g", 1) < 0)
		rc = ward_error_set(err, EPIPE, "pid", "the sandbox's init died during setup");
	return rc;
}

static int open_pipes(struct run *r, const struct ward_run_options *o, struct ward_error *err)
{
	if (pipe2(r->sync, O_CLOEXEC) < 0 || pipe2(r->report, O_CLOEXEC) < 0 ||
	    pipe2(r->out, O_CLOEXEC) < 0 || pipe2(r->err, O_CLOEXEC) < 0)
		return ward_error_set(err, errno, "env", "unable to create pipes");
	if (o && o->stdin_fd >= 0) {
		if (pipe2(r->in, O_CLOEXEC) < 0)
			return ward_error_set(err, errno, "env", "unable to create pipes");
		fcntl(r->in[1], F_SETFL, O_NONBLOCK);
	} else {
		r->in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (r->in[0] < 0)
			return ward_error_set(err, errno, "env", "unable to open '/dev/null'");
	}
	r->plan.stdio[0] = r->in[0];
	r->plan.stdio[1] = r->out[1];
	r->plan.stdio[2] = r->err[1];
	return 0;
}

/* Appends to the capture buffer or relays to the caller, within the output
 * cap; excess is counted and dropped, never left blocking the program. */
static void take_output(struct run *r, struct ward_verdict *v, int which,
			const char *buf, size_t n, enum ward_output_mode mode)
{
	uint64_t limit = r->plan.policy->output_limit;
	uint64_t room = r->output_total < limit ? limit - r->output_total : 0;
	size_t keep = n < room ? n : (size_t)room;
	r->output_total += n;
	if (keep < n) {
		if (which == 1)
			v->stdout_truncated = true;
		else
			v->stderr_truncated = true;
	}
	if (!keep)
		return;
	if (mode == WARD_OUTPUT_PASSTHROUGH) {
		ward_write_all(which, buf, keep);
		return;
	}
	struct ward_buffer *b = which == 1 ? &v->out : &v->err;
	if (b->len + keep + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + keep + 1)
			cap *= 2;
		char *nb = realloc(b->data, cap);
		if (!nb)
			return; /* under memory pressure output is dropped, not fatal */
		b->data = nb;
		b->cap = cap;
	}
	memcpy(b->data + b->len, buf, keep);
	b->len += keep;
	b->data[b->len] = '\0';
}

static bool drain(struct run *r, struct ward_verdict *v, int *fd, int which,
		  enum ward_output_mode mode)
{
	char buf[65536];
	ssize_t n = read(*fd, buf, sizeof(buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return true;
	if (n <= 0) {
		close(*fd);
		*fd = -1;
		return false;
	}
	take_output(r, v, which, buf, (size_t)n, mode);
	return true;
}

/* Reports are fixed-size records: first RUNNING (layers final), then the
 * ending. Each complete record replaces the previous one. */
static void read_report(struct run *r)
{
	char *p = (char *)&r->rep_buf;
	ssize_t n = read(r->report[0], p + r->rep_got, sizeof(r->rep_buf) - r->rep_got);
	if (n > 0)
		r->rep_got += (size_t)n;
	if (r->rep_got == sizeof(r->rep_buf)) {
		r->rep = r->rep_buf;
		r->rep_complete = true;
		r->rep_got = 0;
	}
	if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
		close(r->report[0]);
		r->report[0] = -1;
	}
}

/* stdin goes through a small buffer: the caller's fd is read only when the
 * buffer is empty, the pipe written (non-blocking) only when it has room, so
 * a program that never reads its stdin cannot stall the supervisor. */
static void stdin_read(struct run *r, int src)
{
	ssize_t n = read(src, r->in_buf, sizeof(r->in_buf));
	if (n > 0)
		r->in_len = (size_t)n;
	else if (n == 0 || (errno != EINTR && errno != EAGAIN))
		r->in_eof = true;
}

static void stdin_write(struct run *r)
{
	ssize_t n = write(r->in[1], r->in_buf, r->in_len);
	if (n > 0) {
		memmove(r->in_buf, r->in_buf + n, r->in_len - (size_t)n);
		r->in_len -= (size_t)n;
	} else if (n < 0 && errno != EINTR && errno != EAGAIN) {
		r->in_eof = true;
		r->in_len = 0;
	}
}

static void kill_sandbox(struct run *r, enum kill_reason why)
{
	if (r->killed_for != KILL_NONE)
		return;
	r->killed_for = why;
	/* PID 1's death takes every process of the pid namespace with it. */
	syscall(SYS_pidfd_send_signal, r->pidfd, SIGKILL, NULL, 0);
}

/* With a CPU-time limit and a cgroup, the sandbox's total CPU time is
 * checked every CPU_POLL_MS: RLIMIT_CPU alone counts per process. */
enum { CPU_POLL_MS = 50 };

static void check_cpu(struct run *r)
{
	struct ward_cgroup_stats st;
	memset(&st, 0, sizeof(st));
	if (ward_cgroup_read_stats(&r->cg, &st) == 0 &&
	    (st.cpu_user_us + st.cpu_sys_us) / 1000 >= r->plan.policy->cpu_time_ms)
		kill_sandbox(r, KILL_CPU);
}

static int next_timeout(struct run *r, uint64_t deadline, bool exited)
{
	if (exited || r->killed_for != KILL_NONE)
		return -1;
	uint64_t now = ward_now_ns();
	int t = now >= deadline ? 0 : (int)((deadline - now) / 1000000 + 1);
	if (r->poll_cpu && t > CPU_POLL_MS)
		t = CPU_POLL_MS;
	return t;
}

/* The event loop: output, the report, stdin, cancellation, the init's exit,
 * the clock. */
static void supervise(struct run *r, struct ward_verdict *v, const struct ward_run_options *o,
		      uint64_t start_ns)
{
	enum ward_output_mode mode = o ? o->output : WARD_OUTPUT_PASSTHROUGH;
	int cancel_fd = o ? o->cancel_fd : -1;
	uint64_t deadline = start_ns + r->plan.policy->timeout_ms * 1000000ull;
	bool exited = false;
	r->poll_cpu = r->have_cg && r->plan.policy->cpu_time_ms;
	while (!exited || r->out[0] >= 0 || r->err[0] >= 0 || r->report[0] >= 0) {
		if (r->in[1] >= 0 && r->in_eof && !r->in_len) {
			close(r->in[1]);
			r->in[1] = -1;
		}
		bool want_in = r->in[1] >= 0 && !r->in_len && !r->in_eof;
		bool running = !exited && r->killed_for == KILL_NONE;
		struct pollfd fds[7] = {
			{ .fd = r->out[0], .events = POLLIN }, { .fd = r->err[0], .events = POLLIN },
			{ .fd = r->report[0], .events = POLLIN },
			{ .fd = exited ? -1 : r->pidfd, .events = POLLIN },
			{ .fd = want_in ? o->stdin_fd : -1, .events = POLLIN },
			{ .fd = r->in[1] >= 0 && r->in_len ? r->in[1] : -1, .events = POLLOUT },
			{ .fd = running ? cancel_fd : -1, .events = POLLIN },
		};
		int n = poll(fds, 7, next_timeout(r, deadline, exited));
		if (n < 0 && errno != EINTR)
			break;
		if (running && ward_now_ns() >= deadline)
			kill_sandbox(r, KILL_TIMEOUT);
		else if (running && r->poll_cpu)
			check_cpu(r);
		if (n <= 0)
			continue;
		if (fds[0].revents)
			drain(r, v, &r->out[0], 1, mode);
		if (fds[1].revents)
			drain(r, v, &r->err[0], 2, mode);
		if (fds[2].revents)
			read_report(r);
		if (fds[4].revents)
			stdin_read(r, o->stdin_fd);
		if (fds[5].revents)
			stdin_write(r);
		if (fds[6].revents)
			kill_sandbox(r, KILL_CANCEL);
		if (fds[3].revents) {
			siginfo_t si;
			memset(&si, 0, sizeof(si));
			if (waitid((idtype_t)P_PIDFD, (id_t)r->pidfd, &si, WEXITED) == 0 || errno == ECHILD)
				exited = true;
			r->pid = 0;
		}
	}
	v->usage.wall_ms = (ward_now_ns() - start_ns) / 1000000;
}

static void fill_limits(struct run *r, struct ward_verdict *v)
{
	const struct ward_policy *p = r->plan.policy;
	struct ward_cgroup_stats st;
	memset(&st, 0, sizeof(st));
	if (r->have_cg && ward_cgroup_read_stats(&r->cg, &st) == 0) {
		v->usage.peak_memory_bytes = st.memory_peak;
		v->usage.processes_peak = st.pids_peak;
		if (st.cpu_user_us || st.cpu_sys_us) {
			v->usage.cpu_user_ms = st.cpu_user_us / 1000;
			v->usage.cpu_sys_ms = st.cpu_sys_us / 1000;
		}
	}
	bool failed = v->status != WARD_STATUS_OK;
	bool cpu_hit = p->cpu_time_ms &&
		       (r->killed_for == KILL_CPU || v->signal == SIGXCPU ||
			(v->signal == SIGKILL &&
			 v->usage.cpu_user_ms + v->usage.cpu_sys_ms >= p->cpu_time_ms));
	/* The first ending that applies wins: what the kernel enforced on the
	 * sandbox as a whole comes before what the program met on its own. */
	const struct {
		bool hit;
		enum ward_status status;
		const char *limit;
		uint64_t value;
	} endings[] = {
		{ r->killed_for == KILL_CANCEL, WARD_STATUS_KILLED, NULL, 0 },
		{ st.oom_kills > 0, WARD_STATUS_MEMORY_LIMIT, "memory", p->memory },
		{ failed && st.pids_max_events > 0, WARD_STATUS_PIDS_LIMIT, "pids", p->pids },
		{ r->killed_for == KILL_TIMEOUT, WARD_STATUS_TIMEOUT, "timeout", p->timeout_ms },
		{ cpu_hit, WARD_STATUS_CPU_TIMEOUT, "cpu_time", p->cpu_time_ms },
		{ failed && r->rep.kind == WARD_REPORT_EXITED && r->rep.disk_full,
		  WARD_STATUS_DISK_LIMIT, "workspace_size", p->workspace_size },
		{ v->stdout_truncated || v->stderr_truncated, WARD_STATUS_OUTPUT_LIMIT,
		  "output", p->output_limit },
	};
	for (size_t i = 0; i < ARRAY_SIZE(endings); i++) {
		if (!endings[i].hit)
			continue;
		v->status = endings[i].status;
		v->limit = endings[i].limit;
		v->limit_value = endings[i].value;
		return;
	}
}

static int fill_verdict(struct run *r, struct ward_verdict *v, struct ward_error *err)
{
	v->layers = r->rep.layers | (r->plan.layers & (1u << WARD_LAYER_CGROUP));
	v->degraded = r->rep.degraded | r->plan.degraded;
	v->layers &= ~v->degraded;
	v->usage.output_bytes = r->output_total;
	v->usage.cpu_user_ms = r->rep.cpu_user_us / 1000;
	v->usage.cpu_sys_ms = r->rep.cpu_sys_us / 1000;
	v->usage.peak_memory_bytes = r->rep.maxrss_kb * 1024;
	bool complete = r->rep_complete;
	if (complete && r->rep.kind == WARD_REPORT_SETUP_FAILED) {
		v->status = WARD_STATUS_SETUP_FAILED;
		v->setup = r->rep.err;
		*err = r->rep.err;
		return -(err->code ? err->code : EINVAL);
	}
	if (complete && r->rep.kind == WARD_REPORT_EXEC_FAILED) {
		/* like a shell: 127 not found, 126 found but not runnable */
		v->status = WARD_STATUS_ERROR;
		v->exit_code = r->rep.err.code == ENOENT ? 127 : 126;
		v->setup = r->rep.err;
	} else if (complete && r->rep.kind == WARD_REPORT_EXITED) {
		v->exit_code = r->rep.code;
		v->status = r->rep.code == 0 ? WARD_STATUS_OK : WARD_STATUS_ERROR;
	} else if (complete && r->rep.kind == WARD_REPORT_SIGNALED) {
		v->signal = r->rep.code;
		v->status = WARD_STATUS_SIGNALED;
	} else if (complete && r->rep.kind == WARD_REPORT_RUNNING) {
		/* the init was killed while the program ran (timeout, OOM group
		 * kill, or from outside); fill_limits says which */
		v->signal = SIGKILL;
		v->status = WARD_STATUS_SIGNALED;
	} else if (r->killed_for == KILL_NONE) {
		v->status = WARD_STATUS_SETUP_FAILED;
		return ward_error_set(err, ECHILD, "pid", "the sandbox's init died during setup");
	} else {
		v->signal = SIGKILL;
		v->status = WARD_STATUS_SIGNALED;
	}
	fill_limits(r, v);
	return 0;
}

static void run_release(struct run *r)
{
	if (r->pid > 0) {
		syscall(SYS_pidfd_send_signal, r->pidfd, SIGKILL, NULL, 0);
		siginfo_t si;
		waitid((idtype_t)P_PIDFD, (id_t)r->pidfd, &si, WEXITED);
	}
	if (r->pidfd >= 0)
		close(r->pidfd);
	close_pair(r->sync);
	close_pair(r->report);
	close_pair(r->out);
	close_pair(r->err);
	close_pair(r->in);
	if (r->have_cg)
		ward_cgroup_destroy(&r->cg, NULL);
	ward_plan_release(&r->plan);
}

WARD_EXPORT int ward_run(const struct ward_policy *policy, char *const argv[],
			 const struct ward_run_options *opts, struct ward_verdict *v,
			 struct ward_error *err)
{
	uint64_t start = ward_now_ns();
	struct run *r = calloc(1, sizeof(*r));
	if (!r)
		return ward_error_set(err, ENOMEM, "plan", "out of memory");
	int *fds[] = { r->sync, r->report, r->out, r->err, r->in };
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		fds[i][0] = fds[i][1] = -1;
	r->pidfd = -1;
	r->cg.unified_fd = -1;
	make_id(v->sandbox_id, sizeof(v->sandbox_id));

	int rc = ward_plan_build(&r->plan, policy, argv, err);
	if (rc == 0) {
		r->plan.cap_last = cap_last();
		rc = setup_cgroup(r, v->sandbox_id, err);
	}
	if (rc == 0)
		rc = open_pipes(r, opts, err);
	if (rc == 0)
		rc = start_child(r, err);
	if (rc == 0) {
		supervise(r, v, opts, start);
		rc = fill_verdict(r, v, err);
	}
	if (rc < 0) {
		v->status = WARD_STATUS_SETUP_FAILED;
		v->setup = *err;
		v->layers = r->plan.layers;
		v->usage.wall_ms = (ward_now_ns() - start) / 1000000;
	}
	run_release(r);
	free(r);
	return rc;
}
