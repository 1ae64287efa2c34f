/* lib/sandbox.c — the pipeline: the ordered list of layers, and the child.
 *
 * The cloned child (already in fresh user, mount, pid, net, ipc, uts, cgroup
 * and time namespaces) becomes the sandbox's init, PID 1. It applies the
 * namespace-wide layers, then vforks the program, which applies the
 * per-process layers and execs. The init reaps orphans and, when the
 * program ends, reports its status and exits; the kernel then kills every
 * process left in the pid namespace. Everything here is child code: plan
 * data and raw syscalls only, no malloc, no stdio, no locale.
 */
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/util.h"
#include "sandbox-child.h"

/* PARK_FD: above REPORT_FD + 2 + WARD_PLAN_MAX_MOUNTS, where adopt_fds
 * moves fds before it places them. */
enum { REPORT_FD = 3, PARK_FD = 128 };

/* The pipeline, in order. The parent runs the prepare steps top to bottom
 * before clone; the init applies the INIT rows after the parent wrote the id
 * maps and attached the cgroup; the program applies the PROGRAM rows between
 * vfork and execve. Each row says why it sits where it does. */
const struct ward_layer_desc ward_layers[] = {
	/* given by clone: the init is PID 1 of a fresh pid namespace */
	{ WARD_LAYER_PID, WARD_STAGE_INIT, NULL, NULL, false },
	/* given by clone: no shared System V IPC or POSIX queues */
	{ WARD_LAYER_IPC, WARD_STAGE_INIT, NULL, NULL, false },
	/* given by clone; the supervisor marks it degraded when it had to
	 * clone without (no CONFIG_TIME_NS) and the policy allows that */
	{ WARD_LAYER_TIME, WARD_STAGE_INIT, NULL, NULL, true },
	/* made by the supervisor before clone; marked degraded there when no
	 * cgroup could be made (rlimits stand in) */
	{ WARD_LAYER_CGROUP, WARD_STAGE_INIT, NULL, NULL, true },
	/* after the parent attached the cgroups: they become the namespace's root */
	{ WARD_LAYER_CGROUPNS, WARD_STAGE_INIT, NULL, ward_cgroupns_apply, true },
	/* host creds still: open the bind sources before anything can shadow them */
	{ -1, WARD_STAGE_INIT, NULL, ward_mounts_open_sources, false },
	/* prepared first (mounts use the inside uid); entered after the binds
	 * are open: files created from here on need a mapped owner */
	{ WARD_LAYER_USERNS, WARD_STAGE_INIT, ward_userns_prepare, ward_userns_enter, false },
	/* the image's part of the mount list: /usr, merged-usr links, /etc */
	{ -1, WARD_STAGE_INIT, ward_image_host_prepare, NULL, false },
	/* /dev, /proc, /workspace, /tmp, binds; proc needs the old root still
	 * visible, so it is mounted before the pivot */
	{ WARD_LAYER_MOUNT, WARD_STAGE_INIT, ward_mounts_prepare, ward_mounts_apply, false },
	/* the hostname */
	{ WARD_LAYER_UTS, WARD_STAGE_INIT, NULL, ward_uts_apply, false },
	/* lo up: loopback sockets work, nothing else exists */
	{ WARD_LAYER_NET, WARD_STAGE_INIT, NULL, ward_net_apply, false },
	/* the program: stdio in place, every other fd close-on-exec */
	{ WARD_LAYER_ENV, WARD_STAGE_PROGRAM, ward_env_prepare, ward_env_apply, false },
	/* raising a limit needs privilege: before it is dropped */
	{ WARD_LAYER_RLIMITS, WARD_STAGE_PROGRAM, ward_rlimits_prepare, ward_rlimits_apply, false },
	/* setsid, caps, securebits, uid, no_new_privs */
	{ WARD_LAYER_PRIVILEGES, WARD_STAGE_PROGRAM, NULL, ward_privileges_apply, false },
	/* needs no_new_privs; its rules derive from the mount list (prepared
	 * above) and name sandbox paths, which exist now */
	{ WARD_LAYER_LANDLOCK, WARD_STAGE_PROGRAM, ward_landlock_prepare, ward_landlock_apply, true },
	/* last: after it only the allowlist remains, and the check below runs
	 * under it */
	{ WARD_LAYER_SECCOMP, WARD_STAGE_PROGRAM, ward_seccomp_prepare, ward_seccomp_apply_plan, false },
	/* verify after applying: no new user namespace, no caps, filter on */
	{ -1, WARD_STAGE_PROGRAM, NULL, ward_verify_apply, false },
};
const size_t ward_n_layers = ARRAY_SIZE(ward_layers);

const struct ward_layer_desc *ward_layer_find(int id)
{
	for (size_t i = 0; i < ward_n_layers; i++)
		if (ward_layers[i].id == id)
			return &ward_layers[i];
	return NULL;
}

int ward_layers_prepare(const struct ward_layer_desc *rows, size_t n,
			struct ward_plan *plan, struct ward_error *err)
{
	for (size_t i = 0; i < n; i++) {
		int r = rows[i].prepare ? rows[i].prepare(plan, err) : 0;
		if (r < 0)
			return r;
	}
	return 0;
}

/* A layer may degrade only when the kernel lacks it (no syscall, no
 * support, or a namespace type it was built without), never because the
 * layer failed on something the host or the policy could fix: a landlock
 * rule path that cannot be opened stops the run. */
static bool feature_missing(int code)
{
	return code == ENOSYS || code == EOPNOTSUPP || code == EINVAL;
}

/* Child-safe: the only place the applied and degraded bits are set. */
int ward_layers_apply(const struct ward_layer_desc *rows, size_t n, enum ward_stage stage,
		      struct ward_plan *plan, struct ward_error *err)
{
	for (size_t i = 0; i < n; i++) {
		const struct ward_layer_desc *l = &rows[i];
		uint32_t bit = l->id >= 0 ? 1u << l->id : 0;
		if (l->stage != stage || (plan->degraded & bit))
			continue;
		if (l->apply && l->apply(plan, err) < 0) {
			if (l->degradable && (plan->allow_degrade & bit) && feature_missing(err->code)) {
				plan->degraded |= bit;
				ward_error_clear(err);
				continue;
			}
			const char *name = l->id >= 0 ? ward_layer_name((enum ward_layer)l->id) : NULL;
			if (!err->layer[0] && name)
				ward_strlcpy(err->layer, name, sizeof(err->layer));
			return -(err->code ? err->code : EINVAL);
		}
		plan->layers |= bit;
	}
	return 0;
}

/* Resolves argv[0] through PATH like execvp, without allocating. */
static int exec_program(struct ward_plan *plan)
{
	const char *prog = plan->argv[0];
	if (strchr(prog, '/')) {
		execve(prog, plan->argv, plan->envp);
		return -errno;
	}
	int first_err = ENOENT;
	for (const char *p = plan->path_env; p && *p;) {
		const char *colon = strchr(p, ':');
		size_t n = colon ? (size_t)(colon - p) : strlen(p);
		char path[4096];
		if (n + 1 + strlen(prog) + 1 <= sizeof(path) && n > 0) {
			memcpy(path, p, n);
			path[n] = '/';
			ward_strlcpy(path + n + 1, prog, sizeof(path) - n - 1);
			execve(path, plan->argv, plan->envp);
			if (errno != ENOENT && errno != ENOTDIR && first_err == ENOENT)
				first_err = errno;
		}
		p = colon ? colon + 1 : NULL;
	}
	return -first_err;
}

/* The program: never returns. Errors land in *rep (shared with the init
 * through vfork) and the child exits 127. */
static __attribute__((noreturn)) void program_main(struct ward_plan *plan,
						   struct ward_report *rep)
{
	/* An ignored signal stays ignored across execve: ward ignores SIGPIPE
	 * for itself, and a program must not inherit that (`yes | head` would
	 * print "Broken pipe" instead of ending quietly). Nothing else is
	 * ignored by any of ward's processes. The mask is inherited too: a
	 * front end that blocks signals for itself must not pass that on. */
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigaction(SIGPIPE, &dfl, NULL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (ward_layers_apply(ward_layers, ward_n_layers, WARD_STAGE_PROGRAM, plan, &rep->err) < 0)
		goto fail;
	rep->layers = plan->layers;
	rep->degraded = plan->degraded;
	int r = exec_program(plan);
	ward_error_setv(&rep->err, -r, "exec", "unable to run '", plan->argv[0], "'", NULL);
	rep->kind = WARD_REPORT_EXEC_FAILED;
	_exit(127);
fail:
	rep->kind = WARD_REPORT_SETUP_FAILED;
	_exit(127);
}

/* The RUNNING record carries an O_PATH fd of the sandbox's root: the
 * supervisor reads files out through it (artifacts) without /proc, which a
 * rootless supervisor could not use on a non-dumpable init. With an
 * allowlist it also carries the proxy's listeners (lib/layers/net.c), which
 * the init then closes: from here on only the supervisor's side holds them
 * (the program never did: they are close-on-exec). rep->passed says which
 * fds came, in the order of the WARD_PASS_* bits; it is cleared after the
 * send, so the final report carries none. */
static void send_running(int fd, struct ward_plan *plan, struct ward_report *rep)
{
	int fds[WARD_PASS_MAX], n = 0;
	int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	const int have[WARD_PASS_MAX] = { root, plan->egress.tcp4, plan->egress.tcp6,
					  plan->egress.dns4 };
	rep->passed = 0;
	for (int i = 0; i < WARD_PASS_MAX; i++)
		if (have[i] >= 0) {
			fds[n++] = have[i];
			rep->passed |= 1u << i;
		}
	union {
		char buf[CMSG_SPACE(sizeof(fds))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = rep, .iov_len = sizeof(*rep) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (n > 0) {
		memset(&u, 0, sizeof(u));
		msg.msg_control = u.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
	}
	while (sendmsg(fd, &msg, MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
	for (int i = 0; i < n; i++)
		close(fds[i]);
	plan->egress = (struct ward_egress_fds){ -1, -1, -1 };
	rep->passed = 0;
}

static __attribute__((noreturn)) void report_and_exit(int fd, struct ward_report *rep)
{
	ward_write_all(fd, rep, sizeof(*rep));
	_exit(0);
}

static bool disk_full(const char *path)
{
	struct statfs st;
	if (statfs(path, &st) < 0)
		return false;
	/* a few blocks of slack: tmpfs rounds to pages */
	return st.f_bavail <= 2 || st.f_ffree == 0;
}

/* PID 1: reap everything; when the program ends, report and exit so the
 * kernel kills whatever is left. */
static __attribute__((noreturn)) void init_wait(int report_fd, pid_t child,
						struct ward_report *rep)
{
	for (;;) {
		int status;
		pid_t pid = wait4(-1, &status, 0, NULL);
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			rep->kind = WARD_REPORT_SETUP_FAILED;
			ward_error_setv(&rep->err, errno, "pid", "init lost its program", NULL);
			report_and_exit(report_fd, rep);
		}
		if (pid != child)
			continue;
		struct rusage ru;
		getrusage(RUSAGE_CHILDREN, &ru);
		rep->cpu_user_us = (uint64_t)ru.ru_utime.tv_sec * 1000000u + (uint64_t)ru.ru_utime.tv_usec;
		rep->cpu_sys_us = (uint64_t)ru.ru_stime.tv_sec * 1000000u + (uint64_t)ru.ru_stime.tv_usec;
		rep->maxrss_kb = (uint64_t)ru.ru_maxrss;
		rep->disk_full = disk_full("/workspace") || disk_full("/tmp");
		if (WIFSIGNALED(status)) {
			rep->kind = WARD_REPORT_SIGNALED;
			rep->code = WTERMSIG(status);
		} else {
			rep->kind = WARD_REPORT_EXITED;
			rep->code = WEXITSTATUS(status);
		}
		report_and_exit(report_fd, rep);
	}
}

/* The kernel clears the parent-death signal when the credentials change,
 * and ward_userns_enter changes them. Arm it again, then make sure the
 * supervisor did not die in between: it holds the sync pipe's write end
 * open for the whole run, so a hang-up means it is gone. */
static void rearm_deathsig(int sync_fd)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		_exit(125);
	struct pollfd pfd = { .fd = sync_fd, .events = POLLIN };
	if (poll(&pfd, 1, 0) != 0)
		_exit(125);
	close(sync_fd);
}

/* The init keeps only the program's stdio (as 0-2), the report pipe (as 3),
 * the sync pipe (as 4) and the binds the parent opened (from 5): copies of
 * the supervisor's other fds must not live on in a sandbox. */
static int adopt_fds(struct ward_plan *plan, int report_fd, int *sync_fd)
{
	/* Park the two pipes out of the way first: their numbers may be 3
	 * and 4 already, in either order. */
	int rep = (int)fcntl(report_fd, F_DUPFD_CLOEXEC, PARK_FD);
	int syn = (int)fcntl(*sync_fd, F_DUPFD_CLOEXEC, PARK_FD);
	if (rep < 0 || syn < 0)
		return -1;
	/* Binds the parent opened (idmapped mounts) are kept too, after the
	 * pipes: parked above every number they can move to. */
	for (size_t i = 0; i < plan->n_mounts; i++)
		if (plan->mounts[i].fd >= 0 &&
		    (plan->mounts[i].fd = (int)fcntl(plan->mounts[i].fd, F_DUPFD_CLOEXEC, PARK_FD)) < 0)
			return -1;
	for (int i = 0; i < 3; i++) {
		if (plan->stdio[i] != i && dup2(plan->stdio[i], i) < 0)
			return -1;
		plan->stdio[i] = i;
	}
	if (dup3(rep, REPORT_FD, O_CLOEXEC) < 0 || dup3(syn, REPORT_FD + 1, O_CLOEXEC) < 0)
		return -1;
	*sync_fd = REPORT_FD + 1;
	int next = REPORT_FD + 2;
	for (size_t i = 0; i < plan->n_mounts; i++)
		if (plan->mounts[i].fd >= 0) {
			if (dup3(plan->mounts[i].fd, next, O_CLOEXEC) < 0)
				return -1;
			plan->mounts[i].fd = next++;
		}
	if (syscall(SYS_close_range, (unsigned)next, ~0U, 0) < 0)
		return -1;
	return REPORT_FD;
}

/* The init's setup, both forms: it dies with its supervisor, waits for
 * "go", joins the cgroup, keeps only its fds, applies the INIT layers (or
 * reports why not and exits), and becomes non-dumpable. rep is what the
 * init reports; a failure never returns. */
static void init_setup(struct ward_plan *plan, int sync_fd, int report_in,
		       struct ward_report *rep)
{
	memset(rep, 0, sizeof(*rep));
	rep->kind = WARD_REPORT_SETUP_FAILED;

	/* The sandbox dies with its supervisor. Set before waiting for "go",
	 * so a supervisor that died earlier is seen as EOF. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		_exit(125);
	char go;
	if (ward_read_full(sync_fd, &go, 1) != 1)
		_exit(125);
	/* Join the v1 cgroups by moving itself (see ward_cgroup_open_self_attach):
	 * before any other step, and long before any code of the sandbox's. */
	for (size_t i = 0; i < plan->n_cg_tasks; i++) {
		if (write(plan->cg_tasks[i], "0", 1) != 1) {
			ward_error_setv(&rep->err, errno, "cgroup", "unable to join the sandbox's cgroup", NULL);
			rep->kind = WARD_REPORT_SETUP_FAILED;
			ward_write_all(report_in, rep, sizeof(*rep));
			_exit(125);
		}
		close(plan->cg_tasks[i]);
	}
	/* From here on the report channel is fd 3 (a constant: vfork below
	 * must not depend on a variable it could clobber). */
	if (adopt_fds(plan, report_in, &sync_fd) != REPORT_FD)
		_exit(125);
	if (ward_layers_apply(ward_layers, ward_n_layers, WARD_STAGE_INIT, plan, &rep->err) < 0) {
		rep->layers = plan->layers;
		rep->degraded = plan->degraded;
		report_and_exit(REPORT_FD, rep);
	}
	rep->layers = plan->layers;
	rep->degraded = plan->degraded;
	rearm_deathsig(sync_fd);

	/* Non-dumpable: the program cannot open /proc/1/{mem,exe,root} of
	 * its init, which is a copy of the supervisor (or of a zygote). */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

void ward_child_main(struct ward_plan *plan, int sync_fd, int report_in)
{
	struct ward_report rep;
	init_setup(plan, sync_fd, report_in, &rep);
	rep.kind = WARD_REPORT_NONE;
	pid_t child = vfork();
	if (child == 0)
		program_main(plan, &rep);
	if (child < 0) {
		ward_error_setv(&rep.err, errno, "pid", "unable to start the program", NULL);
		rep.kind = WARD_REPORT_SETUP_FAILED;
		report_and_exit(REPORT_FD, &rep);
	}
	/* vfork returned: the program has exec'd or failed (rep says which). */
	for (int i = 0; i < 3; i++)
		close(i);
	if (rep.kind == WARD_REPORT_SETUP_FAILED || rep.kind == WARD_REPORT_EXEC_FAILED) {
		int status;
		waitpid(child, &status, 0);
		report_and_exit(REPORT_FD, &rep);
	}
	/* The program runs: say which layers it got, in case the init is
	 * killed before it can send the final report. */
	rep.kind = WARD_REPORT_RUNNING;
	send_running(REPORT_FD, plan, &rep);
	/* The init keeps nothing it does not need: no capabilities left. */
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct caps[2] = { { 0 } };
	syscall(SYS_capset, &hdr, caps);
	init_wait(REPORT_FD, child, &rep);
}

/* A zygote's sandbox: the same init, but the program is forked, not
 * vforked, because it does not exec — it returns into the zygote's runtime
 * after its layers. What vfork gave for free is explicit here: the record
 * the program fills is a shared page, and a pipe says when its layers are
 * on (one byte) or that it failed (EOF). Returns in the program only, with
 * fds 0-2 left and nothing else. */
void ward_child_main_return(struct ward_plan *plan, int sync_fd, int report_in)
{
	struct ward_report *rep = mmap(NULL, sizeof(*rep), PROT_READ | PROT_WRITE,
				       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (rep == MAP_FAILED)
		_exit(125);
	init_setup(plan, sync_fd, report_in, rep);
	int ready[2];
	if (pipe2(ready, O_CLOEXEC) < 0)
		_exit(125);
	rep->kind = WARD_REPORT_NONE;
	pid_t child = fork();
	if (child == 0) {
		close(ready[0]);
		/* as after an exec: the program's own, readable by itself */
		prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
		if (ward_layers_apply(ward_layers, ward_n_layers, WARD_STAGE_PROGRAM, plan,
				      &rep->err) < 0) {
			rep->kind = WARD_REPORT_SETUP_FAILED;
			_exit(127);
		}
		rep->layers = plan->layers;
		rep->degraded = plan->degraded;
		if (write(ready[1], "r", 1) != 1)
			_exit(127);
		/* what an exec would have closed (env marked them close-on-exec) */
		syscall(SYS_close_range, 3U, ~0U, 0);
		return;
	}
	close(ready[1]);
	if (child < 0) {
		ward_error_setv(&rep->err, errno, "pid", "unable to start the program", NULL);
		rep->kind = WARD_REPORT_SETUP_FAILED;
		report_and_exit(REPORT_FD, rep);
	}
	char r;
	ssize_t got;
	while ((got = read(ready[0], &r, 1)) < 0 && errno == EINTR)
		;
	close(ready[0]);
	for (int i = 0; i < 3; i++)
		close(i);
	if (got != 1) {
		int status;
		waitpid(child, &status, 0);
		if (rep->kind != WARD_REPORT_SETUP_FAILED) {
			rep->kind = WARD_REPORT_SETUP_FAILED;
			ward_error_setv(&rep->err, ECHILD, "pid", "the program died during setup", NULL);
		}
		report_and_exit(REPORT_FD, rep);
	}
	struct ward_report copy = *rep;
	copy.kind = WARD_REPORT_RUNNING;
	send_running(REPORT_FD, plan, &copy);
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct caps[2] = { { 0 } };
	syscall(SYS_capset, &hdr, caps);
	init_wait(REPORT_FD, child, &copy);
}
