/* lib/supervise.c — the supervisor side of one sandbox: its lifecycle.
 *
 * Builds the plan, creates the cgroup, clones the child into every
 * namespace at once (and into its cgroup where the kernel allows), writes
 * the id maps, releases the child; enforces the wall-time and CPU-time
 * limits; waits for the end and turns what happened into a verdict.
 * Whatever the ending, every fd, the cgroup and the child are gone when
 * ward_sandbox_finish returns. The caller drives output (lib/run.c for the
 * one-shot form, lib/kernel.c for language kernels).
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "base/util.h"
#include "compat/clone.h"
#include "cgroup.h"
#include "kernel-internal.h" /* ward_sandbox_restart_clock */
#include "launcher.h"
#include "sandbox-child.h"
#include "ward/egress.h"
#include "ward/sandbox.h"


struct ward_sandbox {
	struct ward_plan plan;
	struct ward_policy_plan *pp; /* a reference: the plan points into it */
	bool claimed;           /* at most once: the init waits for it */
	struct ward_cgroup cg;
	bool have_cg;
	int sync[2], report[2], out[2], err[2], in[2];
	int pidfd;
	pid_t pid;
	bool exited;
	uint64_t start_ns, deadline_ns;
	enum ward_kill_reason killed_for;
	bool poll_cpu;
	char id[40];
	struct ward_report rep;
	bool rep_complete;
	bool rep_eof;           /* the report channel closed: the init is gone */
	bool ended;             /* ward_sandbox_end returned */
	int root_fd;            /* the sandbox's root, sent by its init */
	uint64_t killed_user_us, killed_sys_us; /* sampled when it was killed */
	struct ward_launcher *launcher; /* clones the init instead of us (options) */

	/* network.mode "allowlist": the proxy (options), what attaching needs
	 * (copied: the options need not outlive ward_sandbox_prepare), the
	 * attachment once the init's listeners came, or why it failed */
	struct ward_egress *egress;
	char *tenant;
	struct ward_egress_credential *creds;
	size_t n_creds;
	struct ward_bind *binds;        /* the options' binds plus the CA bundle's */
	struct ward_egress_sandbox *att;
	bool egress_failed;
	struct ward_error egress_err;
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
		char buf[32];
		cached = 40;
		if (ward_proc_read(WARD_PROC_ROOT, "sys/kernel/cap_last_cap", buf, sizeof(buf)) > 0)
			cached = (int)strtol(buf, NULL, 10);
	}
	return cached;
}

/* Cgroup, or its fallback: without one, rlimits stand in and the verdict
 * says "degraded" — unless the policy requires a cgroup. */
static int setup_cgroup(struct ward_sandbox *r, const char *id, struct ward_error *err)
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
		r->have_cg = true; /* the pipeline marks the layer applied */
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

static int start_child(struct ward_sandbox *r, struct ward_error *err)
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
	/* v1: the child moves itself, which spares the kernel's global lock */
	bool self_attach = r->have_cg && cgfd < 0 &&
			   ward_cgroup_open_self_attach(&r->cg, r->plan.cg_tasks,
							ARRAY_SIZE(r->plan.cg_tasks),
							&r->plan.n_cg_tasks) == 0;
	long pid = r->launcher ? ward_launcher_spawn(r->launcher, &r->plan, r->sync[0], r->report[1],
						     cgfd, &r->pidfd, &r->plan.degraded, err)
			       : syscall(SYS_clone3, &args, sizeof(args));
	if (pid < 0 && r->launcher) {
		for (size_t i = 0; i < r->plan.n_cg_tasks; i++)
			close(r->plan.cg_tasks[i]);
		return (int)pid;
	}
	if (pid < 0 && (errno == EINVAL || errno == EPERM) &&
	    (r->plan.allow_degrade & (1u << WARD_LAYER_TIME))) {
		/* time namespaces need Linux >= 5.6 and CONFIG_TIME_NS */
		args.flags &= ~(uint64_t)CLONE_NEWTIME;
		pid = syscall(SYS_clone3, &args, sizeof(args));
		if (pid >= 0)
			r->plan.degraded |= 1u << WARD_LAYER_TIME;
	}
	if (pid != 0) /* the child has its copies; the parent needs none */
		for (size_t i = 0; i < r->plan.n_cg_tasks; i++)
			close(r->plan.cg_tasks[i]);
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
	if (rc == 0 && r->have_cg && !self_attach)
		rc = ward_cgroup_attach(&r->cg, r->pid, cgfd >= 0, err);
	/* The init now waits for "g" on the sync pipe: ward_sandbox_claim. */
	return rc;
}

static int open_pipes(struct ward_sandbox *r, const struct ward_sandbox_options *o, struct ward_error *err)
{
	/* The report channel is a socket: its RUNNING record carries an fd. */
	if (pipe2(r->sync, O_CLOEXEC) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, r->report) < 0 ||
	    pipe2(r->out, O_CLOEXEC) < 0 || pipe2(r->err, O_CLOEXEC) < 0)
		return ward_error_set(err, errno, "env", "unable to create pipes");
	if (o && o->stdin_pipe) {
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


static void fill_limits(struct ward_sandbox *r, struct ward_verdict *v)
{
	const struct ward_policy *p = r->plan.policy;
	struct ward_cgroup_stats st;
	memset(&st, 0, sizeof(st));
	if (r->have_cg && ward_cgroup_read_stats(&r->cg, &st) == 0) {
		v->usage.peak_memory_bytes = st.memory_peak;
		v->usage.processes_peak = st.pids_peak;
		v->usage.forks_refused = st.pids_max_events;
		if (st.cpu_user_us || st.cpu_sys_us) {
			v->usage.cpu_user_ms = st.cpu_user_us / 1000;
			v->usage.cpu_sys_ms = st.cpu_sys_us / 1000;
		}
	}
	bool failed = v->status != WARD_STATUS_OK;
	bool cpu_hit = p->cpu_time_ms &&
		       (r->killed_for == WARD_KILL_CPU || v->signal == SIGXCPU ||
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
		{ r->killed_for == WARD_KILL_CANCEL, WARD_STATUS_KILLED, NULL, 0 },
		{ st.oom_kills > 0, WARD_STATUS_MEMORY_LIMIT, "memory", p->memory },
		{ failed && st.pids_max_events > 0, WARD_STATUS_PIDS_LIMIT, "pids", p->pids },
		{ r->killed_for == WARD_KILL_TIMEOUT, WARD_STATUS_TIMEOUT, "timeout", p->timeout_ms },
		{ cpu_hit, WARD_STATUS_CPU_TIMEOUT, "cpu_time", p->cpu_time_ms },
		{ failed && r->rep.kind == WARD_REPORT_EXITED && r->rep.disk_full,
		  WARD_STATUS_DISK_LIMIT, "workspace_size", p->workspace_size },
		{ v->stdout_truncated || v->stderr_truncated || r->killed_for == WARD_KILL_OUTPUT,
		  WARD_STATUS_OUTPUT_LIMIT,
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

/* network.mode "allowlist" only: the proxy's counters of this sandbox
 * (zero when it never got as far as running). */
static void fill_network(struct ward_sandbox *r, struct ward_verdict *v)
{
	memset(&v->network, 0, sizeof(v->network));
	if (!r->egress)
		return;
	if (r->att)
		ward_egress_usage(r->att, &v->network);
	v->network.present = true;
}

static int fill_verdict(struct ward_sandbox *r, struct ward_verdict *v, struct ward_error *err)
{
	v->layers = r->rep.layers;
	v->degraded = r->rep.degraded | r->plan.degraded;
	v->layers &= ~v->degraded;
	/* the program's own figures when it reported them, else what was
	 * sampled when it was killed (a timeout, a limit, a cancel) */
	uint64_t user = r->rep.cpu_user_us, sys = r->rep.cpu_sys_us;
	if (r->killed_user_us + r->killed_sys_us > user + sys) {
		user = r->killed_user_us;
		sys = r->killed_sys_us;
	}
	v->usage.cpu_user_ms = user / 1000;
	v->usage.cpu_sys_ms = sys / 1000;
	v->usage.peak_memory_bytes = r->rep.maxrss_kb * 1024;
	bool complete = r->rep_complete;
	if (r->egress_failed) { /* the program ran, without its proxy: killed at once */
		v->status = WARD_STATUS_SETUP_FAILED;
		v->setup = r->egress_err;
		*err = r->egress_err;
		return -(err->code ? err->code : EINVAL);
	}
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
	} else if (r->killed_for == 0) {
		v->status = WARD_STATUS_SETUP_FAILED;
		return ward_error_set(err, ECHILD, "pid", "the sandbox's init died during setup");
	} else {
		v->signal = SIGKILL;
		v->status = WARD_STATUS_SIGNALED;
	}
	fill_limits(r, v);
	return 0;
}

/* ---- egress: the options' part, kept until the init's listeners come ---- */

static void egress_release(struct ward_sandbox *r)
{
	ward_egress_credentials_free(r->creds, r->n_creds);
	r->creds = NULL;
	r->n_creds = 0;
	free(r->tenant);
	r->tenant = NULL;
}

/* Keeps what attaching needs, and adds the proxy's CA bundle (when it has
 * one) to ward's own read-only binds: the plan binds it at
 * WARD_EGRESS_CA_PATH and names it in the environment; a launcher gets it
 * with the other binds. *o becomes the options the plan is built from. */
static int egress_prepare(struct ward_sandbox *r, const struct ward_policy *policy,
			  struct ward_sandbox_options *o, struct ward_error *err)
{
	if (policy->network.mode != WARD_NET_ALLOWLIST)
		return 0;
	if (!o->egress)
		return ward_error_set(err, EINVAL, "net",
				      "network.mode allowlist needs an egress proxy");
	r->egress = o->egress;
	r->tenant = strdup(o->tenant ? o->tenant : "");
	if (!r->tenant ||
	    ward_egress_credentials_copy(o->credentials, o->n_credentials, &r->creds) < 0)
		return ward_error_set(err, ENOMEM, "net", "out of memory");
	r->n_creds = o->n_credentials;
	const char *bundle = ward_egress_ca_bundle(o->egress);
	if (!bundle)
		return 0;
	r->binds = calloc(o->n_binds + 1, sizeof(*r->binds));
	char *host = strdup(bundle);
	if (!r->binds || !host) {
		free(host);
		return ward_error_set(err, ENOMEM, "net", "out of memory");
	}
	/* the first entry owns its strings; the others are the caller's */
	r->binds[0] = (struct ward_bind){ .host = host, .inside = (char *)WARD_EGRESS_CA_PATH };
	if (o->n_binds)
		memcpy(r->binds + 1, o->binds, o->n_binds * sizeof(*r->binds));
	o->binds = r->binds;
	o->n_binds++;
	return 0;
}

/* The init's listeners came with the RUNNING record: the proxy serves the
 * sandbox from now on (connections made so far wait in the backlog). Any
 * failure ends the sandbox with a setup failure: no proxy, no run. */
static void egress_attach(struct ward_sandbox *r, struct ward_egress_fds *fds)
{
	int rc;
	if (fds->tcp4 < 0 || fds->dns4 < 0) {
		int *all[] = { &fds->tcp4, &fds->tcp6, &fds->dns4 };
		for (size_t i = 0; i < ARRAY_SIZE(all); i++)
			if (*all[i] >= 0)
				close(*all[i]);
		rc = ward_error_set(&r->egress_err, EPROTO, "net",
				    "the sandbox's init passed no egress listeners");
	} else {
		rc = ward_egress_attach(r->egress, r->id, r->tenant, &r->plan.policy->network,
					r->creds, r->n_creds, fds, &r->att, &r->egress_err);
	}
	if (rc < 0) {
		r->att = NULL;
		r->egress_failed = true;
		if (!r->egress_err.layer[0])
			ward_strlcpy(r->egress_err.layer, "net", sizeof(r->egress_err.layer));
		ward_sandbox_kill(r, WARD_KILL_CANCEL);
	}
}

static void run_release(struct ward_sandbox *r)
{
	if (r->pid > 0) {
		syscall(SYS_pidfd_send_signal, r->pidfd, SIGKILL, NULL, 0);
		siginfo_t si;
		waitid((idtype_t)P_PIDFD, (id_t)r->pidfd, &si, WEXITED);
	}
	if (r->pidfd >= 0)
		close(r->pidfd);
	if (r->root_fd >= 0)
		close(r->root_fd);
	/* after the kill: the proxy closes the listeners and connections */
	ward_egress_detach(r->att);
	r->att = NULL;
	egress_release(r);
	close_pair(r->sync);
	close_pair(r->report);
	close_pair(r->out);
	close_pair(r->err);
	close_pair(r->in);
	if (r->have_cg)
		ward_cgroup_destroy(&r->cg, NULL);
	ward_plan_release(&r->plan);
	if (r->binds) {
		free(r->binds[0].host);
		free(r->binds);
		r->binds = NULL;
	}
	ward_policy_plan_unref(r->pp);
	r->pp = NULL;
}


/* ---- the public lifecycle ---- */

WARD_EXPORT int ward_sandbox_prepare(const struct ward_policy *policy, char *const argv[],
				     const struct ward_sandbox_options *opts,
				     struct ward_sandbox **out, struct ward_error *err)
{
	struct ward_sandbox *r = calloc(1, sizeof(*r));
	*out = NULL;
	if (!r)
		return ward_error_set(err, ENOMEM, "plan", "out of memory");
	int *fds[] = { r->sync, r->report, r->out, r->err, r->in };
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		fds[i][0] = fds[i][1] = -1;
	r->pidfd = -1;
	r->root_fd = -1;
	r->cg.unified_fd = -1;
	r->start_ns = ward_now_ns(); /* again at the claim */
	r->launcher = opts ? opts->launcher : NULL;
	ward_id_new(r->id, sizeof(r->id), NULL, 8);

	struct ward_sandbox_options o;
	if (opts)
		o = *opts;
	else
		memset(&o, 0, sizeof(o));
	struct ward_plan_cache *cache = ward_plan_cache_default();
	r->pp = cache ? ward_plan_cache_get(cache, policy, err) : NULL;
	int rc = r->pp ? 0 : (cache ? -(err->code ? err->code : ENOMEM)
				    : ward_error_set(err, ENOMEM, "plan", "out of memory"));
	/* before the plan and the clone, and from the policy the init will
	 * apply: an allowlist without a proxy fails closed */
	if (rc == 0)
		rc = egress_prepare(r, &r->pp->policy, &o, err);
	if (rc == 0)
		rc = ward_plan_build(&r->plan, r->pp, argv, &o, err);
	if (rc == 0) {
		r->plan.cap_last = cap_last();
		rc = setup_cgroup(r, r->id, err);
	}
	if (rc == 0)
		rc = open_pipes(r, &o, err);
	if (rc == 0)
		rc = start_child(r, err);
	if (rc < 0) {
		run_release(r);
		free(r);
		return rc;
	}
	r->poll_cpu = r->have_cg && r->plan.policy->cpu_time_ms;
	*out = r;
	return 0;
}

WARD_EXPORT int ward_sandbox_claim(struct ward_sandbox *r, struct ward_error *err)
{
	if (r->claimed)
		return -EALREADY;
	r->claimed = true;
	/* The clocks run from the claim: a prepared sandbox may wait. */
	r->start_ns = ward_now_ns();
	r->deadline_ns = r->start_ns + r->plan.policy->timeout_ms * 1000000ull;
	/* The write end stays open until the run ends: the init watches it to
	 * learn whether its supervisor is still alive. */
	if (ward_write_all(r->sync[1], "g", 1) < 0)
		return ward_error_set(err, EPIPE, "pid", "the sandbox's init died during setup");
	return 0;
}

void ward_sandbox_restart_clock(struct ward_sandbox *r)
{
	if (!r->claimed || r->killed_for)
		return;
	r->start_ns = ward_now_ns();
	r->deadline_ns = r->start_ns + r->plan.policy->timeout_ms * 1000000ull;
}

WARD_EXPORT bool ward_sandbox_claimed(const struct ward_sandbox *sb) { return sb->claimed; }

WARD_EXPORT void ward_sandbox_discard(struct ward_sandbox *sb)
{
	if (!sb)
		return;
	run_release(sb);
	free(sb);
}

WARD_EXPORT int ward_sandbox_start(const struct ward_policy *policy, char *const argv[],
				   const struct ward_sandbox_options *opts,
				   struct ward_sandbox **out, struct ward_error *err)
{
	int rc = ward_sandbox_prepare(policy, argv, opts, out, err);
	if (rc == 0 && (rc = ward_sandbox_claim(*out, err)) < 0) {
		ward_sandbox_discard(*out);
		*out = NULL;
	}
	return rc;
}

WARD_EXPORT const char *ward_sandbox_id(const struct ward_sandbox *sb) { return sb->id; }
WARD_EXPORT struct ward_egress_sandbox *ward_sandbox_egress(const struct ward_sandbox *sb)
{
	return sb->att;
}
WARD_EXPORT int ward_sandbox_stdin(const struct ward_sandbox *sb) { return sb->in[1]; }
WARD_EXPORT int ward_sandbox_stdout(const struct ward_sandbox *sb) { return sb->out[0]; }
WARD_EXPORT int ward_sandbox_stderr(const struct ward_sandbox *sb) { return sb->err[0]; }
WARD_EXPORT int ward_sandbox_pidfd(const struct ward_sandbox *sb) { return sb->pidfd; }

WARD_EXPORT void ward_sandbox_close_stdin(struct ward_sandbox *sb)
{
	if (sb->in[1] >= 0) {
		close(sb->in[1]);
		sb->in[1] = -1;
	}
}

/* CPU time of the sandbox's processes, taken just before the init is
 * killed. The kernel's pid-namespace teardown reaps what is left with
 * SIGCHLD ignored, which drops their times, and a killed init reports
 * nothing: without this a timeout would say 0 ms. Each live process counts
 * its own time and that of the children it reaped (utime, stime, cutime,
 * cstime of /proc/PID/stat); the tree is walked from the init through the
 * children lists of its threads, at most SAMPLE_MAX processes. */
enum { SAMPLE_MAX = 4096 };

static void add_times(pid_t pid, uint64_t ticks[2])
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? ward_read_full(fd, buf, sizeof(buf) - 1) : -1;
	if (n <= 0)
		return;
	buf[n] = '\0';
	const char *p = strrchr(buf, ')'); /* the name may hold spaces and ')' */
	unsigned long long ut, st, cut, cst;
	if (p && sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu",
			&ut, &st, &cut, &cst) == 4) {
		ticks[0] += ut + cut;
		ticks[1] += st + cst;
	}
}

/* Appends the children of every thread of pid to list. */
static void add_children(pid_t pid, pid_t *list, size_t *n)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL && *n < SAMPLE_MAX) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/children", (int)pid, e->d_name);
		_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t got = fd >= 0 ? ward_read_full(fd, buf, sizeof(buf) - 1) : -1;
		if (got <= 0)
			continue;
		buf[got] = '\0';
		for (char *s = buf, *end; *n < SAMPLE_MAX; s = end) {
			long c = strtol(s, &end, 10);
			if (end == s)
				break;
			list[(*n)++] = (pid_t)c;
		}
	}
	if (d)
		closedir(d);
}

static void sample_cpu(struct ward_sandbox *sb)
{
	pid_t *list = malloc(SAMPLE_MAX * sizeof(*list));
	uint64_t ticks[2] = { 0, 0 };
	long hz = sysconf(_SC_CLK_TCK);
	if (!list || hz <= 0 || sb->pid <= 0) {
		free(list);
		return;
	}
	size_t n = 0;
	list[n++] = sb->pid;
	for (size_t i = 0; i < n; i++) {
		add_times(list[i], ticks);
		add_children(list[i], list, &n);
	}
	free(list);
	sb->killed_user_us = ticks[0] * 1000000u / (uint64_t)hz;
	sb->killed_sys_us = ticks[1] * 1000000u / (uint64_t)hz;
}

WARD_EXPORT void ward_sandbox_kill(struct ward_sandbox *sb, enum ward_kill_reason why)
{
	if (sb->killed_for || sb->exited)
		return;
	sb->killed_for = why;
	sample_cpu(sb);
	/* PID 1's death takes every process of the pid namespace with it. */
	syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
}

WARD_EXPORT pid_t ward_sandbox_pid(const struct ward_sandbox *sb)
{
	return sb->pid;
}

WARD_EXPORT int ward_sandbox_stats(const struct ward_sandbox *sb, struct ward_sandbox_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (sb->att) /* egress counters, cgroup or not */
		ward_egress_usage(sb->att, &st->network);
	struct ward_cgroup_stats cs;
	if (!sb->have_cg || ward_cgroup_read_stats(&sb->cg, &cs) < 0)
		return 0;
	st->cgroup = true;
	st->memory_peak = cs.memory_peak;
	st->oom_kills = cs.oom_kills;
	st->pids_max_events = cs.pids_max_events;
	st->cpu_ms = (cs.cpu_user_us + cs.cpu_sys_us) / 1000;
	return 0;
}

/* With a CPU-time limit and a cgroup, the sandbox's total CPU time is
 * checked every CPU_POLL_MS: RLIMIT_CPU alone counts per process. */
enum { CPU_POLL_MS = 50 };

/* An allowlist sandbox's listeners come with the RUNNING record, a few
 * milliseconds after the claim. Its connections wait in their backlog until
 * the proxy has them, so they must not wait for the caller to read the
 * report channel, which not every caller watches (a kernel's loop, the
 * service's commands): every caller calls ward_sandbox_check, and until the
 * record came it looks for it, without waiting, every ATTACH_POLL_MS. Only
 * a RUNNING record is taken here (peeked first, without its fds): the final
 * one is left to the caller's own reading. True while still waiting. */
enum { ATTACH_POLL_MS = 5 };

static bool read_record(struct ward_sandbox *r);

static bool egress_pending(struct ward_sandbox *sb)
{
	if (!sb->egress || sb->att || sb->egress_failed || sb->rep_complete || sb->rep_eof)
		return false;
	struct ward_report rec;
	ssize_t n = recv(sb->report[0], &rec, sizeof(rec), MSG_PEEK | MSG_DONTWAIT);
	if ((n < 0 && (errno == EAGAIN || errno == EINTR)) || (n > 0 && n < (ssize_t)sizeof(rec)))
		return true;
	if (n == (ssize_t)sizeof(rec) && rec.kind == WARD_REPORT_RUNNING)
		read_record(sb); /* a record is sent whole: this does not wait */
	return false;
}

WARD_EXPORT int ward_sandbox_check(struct ward_sandbox *sb)
{
	if (sb->exited || sb->killed_for || !sb->claimed)
		return -1;
	uint64_t now = ward_now_ns();
	if (now >= sb->deadline_ns) {
		ward_sandbox_kill(sb, WARD_KILL_TIMEOUT);
		return -1;
	}
	if (sb->poll_cpu) {
		struct ward_cgroup_stats st;
		memset(&st, 0, sizeof(st));
		if (ward_cgroup_read_stats(&sb->cg, &st) == 0 &&
		    (st.cpu_user_us + st.cpu_sys_us) / 1000 >= sb->plan.policy->cpu_time_ms) {
			ward_sandbox_kill(sb, WARD_KILL_CPU);
			return -1;
		}
	}
	int t = (int)((sb->deadline_ns - now) / 1000000 + 1);
	if (sb->poll_cpu && t > CPU_POLL_MS)
		t = CPU_POLL_MS;
	if (egress_pending(sb) && t > ATTACH_POLL_MS)
		t = ATTACH_POLL_MS;
	return t;
}

WARD_EXPORT bool ward_sandbox_exited(struct ward_sandbox *sb)
{
	if (sb->exited)
		return true;
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	/* errno only when waitid failed: after a success it is whatever an
	 * earlier call left, and a stale ECHILD would call a live sandbox
	 * gone (it would then never be killed) */
	int r = waitid((idtype_t)P_PIDFD, (id_t)sb->pidfd, &si, WEXITED | WNOHANG);
	if ((r == 0 && si.si_pid) || (r < 0 && errno == ECHILD))
		sb->exited = true;
	return sb->exited;
}

/* The fds of a complete record, by the WARD_PASS_* bits it names: the
 * root, and the egress listeners, which go to the proxy at once. Fds that
 * do not match the bits (a truncated control message) are all closed. */
static void take_fds(struct ward_sandbox *r, const struct ward_report *rec, int *fds, int n)
{
	int slot[WARD_PASS_MAX] = { -1, -1, -1, -1 };
	int want = __builtin_popcount(rec->passed & ((1u << WARD_PASS_MAX) - 1));
	for (int i = 0, k = 0; i < WARD_PASS_MAX && want == n; i++)
		if (rec->passed & (1u << i))
			slot[i] = fds[k++];
	if (want != n)
		for (int i = 0; i < n; i++)
			close(fds[i]);
	if (slot[0] >= 0 && r->root_fd < 0)
		r->root_fd = slot[0];
	else if (slot[0] >= 0)
		close(slot[0]);
	struct ward_egress_fds e = { slot[1], slot[2], slot[3] };
	if (rec->kind == WARD_REPORT_RUNNING && r->egress && !r->att && !r->egress_failed) {
		egress_attach(r, &e);
		return;
	}
	for (int i = 1; i < WARD_PASS_MAX; i++)
		if (slot[i] >= 0)
			close(slot[i]);
}

/* Reads one report record, keeping the fds that come with it. Returns false
 * at EOF or on a partial record. */
static bool read_record(struct ward_sandbox *r)
{
	struct ward_report rec;
	union {
		char buf[CMSG_SPACE(WARD_PASS_MAX * sizeof(int))];
		struct cmsghdr align;
	} u;
	int fds[WARD_PASS_MAX];
	int n_fds = 0;
	bool lost = false;
	size_t got = 0;
	while (got < sizeof(rec)) {
		struct iovec iov = { .iov_base = (char *)&rec + got, .iov_len = sizeof(rec) - got };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
				      .msg_controllen = sizeof(u.buf) };
		ssize_t n = recvmsg(r->report[0], &msg, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			for (int i = 0; i < n_fds; i++)
				close(fds[i]);
			r->rep_eof = true;
			return false;
		}
		lost |= (msg.msg_flags & MSG_CTRUNC) != 0;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < k; i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
				if (n_fds < WARD_PASS_MAX)
					fds[n_fds++] = fd;
				else
					close(fd);
			}
		}
		got += (size_t)n;
	}
	if (lost) /* some fds never came: the rest cannot be told apart */
		rec.passed = ~0u;
	take_fds(r, &rec, fds, n_fds);
	r->rep = rec;
	r->rep_complete = true;
	return true;
}

WARD_EXPORT int ward_sandbox_open_root(const struct ward_sandbox *csb)
{
	struct ward_sandbox *sb = (struct ward_sandbox *)csb;
	/* The fd comes with the RUNNING record, sent as soon as the program
	 * has started; a setup failure sends none. */
	if (sb->root_fd < 0 && !sb->rep_complete)
		read_record(sb);
	if (sb->root_fd < 0) {
		errno = ESRCH;
		return -1;
	}
	return (int)fcntl(sb->root_fd, F_DUPFD_CLOEXEC, 3);
}

/* Reads the init's reports: RUNNING (layers final), then the ending. Each
 * complete record replaces the previous one; a partial one is ignored. */
static void read_reports(struct ward_sandbox *r)
{
	while (!r->rep_eof && read_record(r))
		;
}

/* The init's last word: how the program ended, or why it never ran. */
static bool final_report(const struct ward_sandbox *r)
{
	return r->rep_complete && r->rep.kind != WARD_REPORT_RUNNING &&
	       r->rep.kind != WARD_REPORT_NONE;
}

WARD_EXPORT int ward_sandbox_report_fd(const struct ward_sandbox *sb)
{
	return sb->ended || sb->rep_eof || final_report(sb) ? -1 : sb->report[0];
}

WARD_EXPORT bool ward_sandbox_program_ended(struct ward_sandbox *sb)
{
	if (final_report(sb) || sb->rep_eof || sb->exited)
		return true;
	struct pollfd pfd = { .fd = sb->report[0], .events = POLLIN };
	if (poll(&pfd, 1, 0) == 1)
		read_record(sb); /* a record is written whole: this does not wait */
	return final_report(sb) || sb->rep_eof;
}

WARD_EXPORT int ward_sandbox_end(struct ward_sandbox *sb, struct ward_verdict *v,
				 struct ward_error *err)
{
	if (sb->ended)
		return -EALREADY;
	ward_sandbox_close_stdin(sb);
	if (!sb->claimed) /* never released: nothing ran, nothing to wait for */
		ward_sandbox_kill(sb, WARD_KILL_CANCEL);
	while (!ward_sandbox_program_ended(sb) && !ward_sandbox_exited(sb)) {
		struct pollfd pfd[2] = {
			{ .fd = sb->pidfd, .events = POLLIN },
			{ .fd = sb->report[0], .events = POLLIN },
		};
		poll(pfd, 2, ward_sandbox_check(sb));
	}
	if (ward_sandbox_exited(sb))
		read_reports(sb); /* whatever the init sent before it died */
	sb->ended = true;
	ward_strlcpy(v->sandbox_id, sb->id, sizeof(v->sandbox_id));
	v->usage.wall_ms = (ward_now_ns() - sb->start_ns) / 1000000;
	fill_network(sb, v);
	int rc = fill_verdict(sb, v, err);
	if (rc < 0) {
		v->status = WARD_STATUS_SETUP_FAILED;
		v->setup = *err;
	}
	return rc;
}

WARD_EXPORT void ward_sandbox_release(struct ward_sandbox *sb)
{
	if (!sb)
		return;
	run_release(sb);
	free(sb);
}

WARD_EXPORT int ward_sandbox_finish(struct ward_sandbox *sb, struct ward_verdict *v,
				    struct ward_error *err)
{
	int rc = ward_sandbox_end(sb, v, err);
	ward_sandbox_release(sb);
	return rc;
}

/* The verdict of a kernel that answered its last request, taken now while
 * its sandbox still runs: what ward_sandbox_finish would say had the
 * program exited 0 at this moment, with the usage read from the cgroup.
 * Only with a cgroup (rootless without one has no usage before the end)
 * and once the RUNNING record is there; -EAGAIN otherwise, and the caller
 * ends the sandbox the usual way. The sandbox is left running. */
int ward_sandbox_verdict_now(struct ward_sandbox *sb, struct ward_verdict *v)
{
	struct pollfd pfd = { .fd = sb->report[0], .events = POLLIN };
	if (!sb->have_cg || sb->killed_for || !sb->claimed || ward_sandbox_exited(sb))
		return -EAGAIN;
	if (!sb->rep_complete && (poll(&pfd, 1, 0) != 1 || !read_record(sb)))
		return -EAGAIN;
	if (sb->rep.kind != WARD_REPORT_RUNNING)
		return -EAGAIN;
	ward_strlcpy(v->sandbox_id, sb->id, sizeof(v->sandbox_id));
	v->usage.wall_ms = (ward_now_ns() - sb->start_ns) / 1000000;
	v->layers = sb->rep.layers & ~(sb->rep.degraded | sb->plan.degraded);
	v->degraded = sb->rep.degraded | sb->plan.degraded;
	v->exit_code = 0;
	v->signal = 0;
	v->status = WARD_STATUS_OK;
	fill_network(sb, v);
	/* what the init's rusage would have said, per process from /proc;
	 * the cgroup's figures replace it when it counts CPU (fill_limits) */
	sample_cpu(sb);
	v->usage.cpu_user_ms = sb->killed_user_us / 1000;
	v->usage.cpu_sys_ms = sb->killed_sys_us / 1000;
	sb->killed_user_us = sb->killed_sys_us = 0;
	fill_limits(sb, v);
	return 0;
}
