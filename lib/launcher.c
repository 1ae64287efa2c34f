/* lib/launcher.c — sandboxes cloned by a helper process, not by the caller.
 *
 * A clone copies the caller's page tables and mappings: a daemon with
 * hundreds of sessions pays for each sandbox in proportion to its own
 * size. Here a small helper (the launcher, or a language zygote) receives
 * what the plan is built from, builds the same plan, and clones the init
 * with CLONE_PARENT: the init is the caller's child, so the pidfd, waitid,
 * the parent-death signal and the verdict are those of the cold path. The
 * caller keeps its own copy of the plan (id maps, limits, verdict).
 *
 * The helper must never keep a tenant's bytes: the request is read from a
 * memfd mapped and unmapped per request, and freed heap memory is
 * overwritten (M_PERTURB), because the next sandbox is a copy of the
 * helper. Child code here is plan data and raw syscalls only.
 */
#include <fcntl.h>
#include <linux/sched.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "base/util.h"
#include "compat/clone.h"
#include "launcher.h"
#include "sandbox-child.h"
#include "ward/zygote.h"


enum {
	LAUNCH_MAGIC = 0x3144574c, /* "LWD1" */
	/* memfd, stdin, stdout, stderr, sync, report, cgroup, v1 tasks */
	LAUNCH_FIXED_FDS = 6,
	LAUNCH_MAX_FDS = LAUNCH_FIXED_FDS + 1 + 6,
	LAUNCH_MAX_ARGS = 256,
	LAUNCH_MAX_FILES = 4096,
	LAUNCH_MAX_BINDS = 64,
	/* the filler of freed memory in a helper: no tenant byte survives a free */
	LAUNCH_PERTURB = 0x5a,
	/* a helper that takes longer to answer is broken: the supervisor
	 * stops using it rather than wait (a zygote's clone takes ~3 ms) */
	LAUNCH_TIMEOUT_S = 10,
};

struct launch_req {
	uint32_t magic;
	uint32_t degraded;            /* what the supervisor already degraded (cgroup) */
	int32_t cap_last;
	uint32_t n_rlimits;
	struct ward_rlimit rlimits[WARD_PLAN_MAX_RLIMITS]; /* the supervisor's (cgroup stand-ins) */
	uint32_t has_cgroup_fd;
	uint32_t n_cg_tasks;
	uint32_t net_mode;            /* the supervisor's network.mode: the helper's must match */
	uint64_t blob_len;
};

struct launch_reply {
	int64_t pid;                  /* or -errno */
	uint32_t degraded;
	struct ward_error err;
};

struct ward_launcher {
	pthread_mutex_t lock;         /* one request at a time on sock */
	int sock;
	pid_t pid;
	bool broken;                  /* a request failed midway: the channel is out of step */
};

/* ---- the request's body: policy, argv, files, binds ---- */

struct blob {
	char *p;
	size_t len, off;
	bool bad;
};

static void put(struct blob *b, const void *s, size_t n)
{
	if (b->p)
		memcpy(b->p + b->off, s, n);
	b->off += n;
}

static void put_u64(struct blob *b, uint64_t v) { put(b, &v, sizeof(v)); }

/* A string with its NUL, so the reader can point into the map. */
static void put_str(struct blob *b, const char *s, size_t n)
{
	put_u64(b, n);
	put(b, s, n);
	put(b, "", 1);
}

static void encode(struct blob *b, const char *json, const struct ward_plan *plan)
{
	put_str(b, json, strlen(json));
	uint64_t argc = 0;
	while (plan->argv[argc])
		argc++;
	put_u64(b, argc);
	for (uint64_t i = 0; i < argc; i++)
		put_str(b, plan->argv[i], strlen(plan->argv[i]));
	put_u64(b, plan->n_files);
	for (size_t i = 0; i < plan->n_files; i++) {
		const struct ward_file *f = &plan->files[i];
		put_str(b, f->path, strlen(f->path));
		put_u64(b, f->mode);
		put_str(b, f->data, f->len);
	}
	put_u64(b, plan->n_extra_binds);
	for (size_t i = 0; i < plan->n_extra_binds; i++) {
		const struct ward_bind *bd = &plan->extra_binds[i];
		put_str(b, bd->host, strlen(bd->host));
		put_str(b, bd->inside, strlen(bd->inside));
		put_u64(b, bd->writable);
	}
}

static uint64_t get_u64(struct blob *b)
{
	uint64_t v = 0;
	if (b->len - b->off < sizeof(v)) {
		b->bad = true;
		return 0;
	}
	memcpy(&v, b->p + b->off, sizeof(v));
	b->off += sizeof(v);
	return v;
}

static char *get_str(struct blob *b, size_t *len)
{
	uint64_t n = get_u64(b);
	if (b->bad || n >= b->len - b->off || b->p[b->off + n] != '\0') {
		b->bad = true;
		return NULL;
	}
	char *s = b->p + b->off;
	b->off += n + 1;
	if (len)
		*len = n;
	return s;
}

struct decoded {
	const char *json;
	size_t json_len;
	char *argv[LAUNCH_MAX_ARGS + 1];
	struct ward_file *files;
	struct ward_bind binds[LAUNCH_MAX_BINDS];
	struct ward_sandbox_options opts;
};

static int decode(struct blob *b, struct decoded *d)
{
	d->json = get_str(b, &d->json_len);
	uint64_t argc = get_u64(b);
	if (b->bad || argc == 0 || argc > LAUNCH_MAX_ARGS)
		return -EINVAL;
	for (uint64_t i = 0; i < argc; i++)
		d->argv[i] = get_str(b, NULL);
	d->argv[argc] = NULL;
	uint64_t nf = get_u64(b);
	if (b->bad || nf > LAUNCH_MAX_FILES)
		return -EINVAL;
	if (nf && !(d->files = calloc(nf, sizeof(*d->files))))
		return -ENOMEM;
	for (uint64_t i = 0; i < nf; i++) {
		d->files[i].path = get_str(b, NULL);
		d->files[i].mode = (unsigned)get_u64(b);
		d->files[i].data = get_str(b, &d->files[i].len);
	}
	uint64_t nb = get_u64(b);
	if (b->bad || nb > LAUNCH_MAX_BINDS)
		return -EINVAL;
	for (uint64_t i = 0; i < nb; i++) {
		d->binds[i].host = get_str(b, NULL);
		d->binds[i].inside = get_str(b, NULL);
		d->binds[i].writable = get_u64(b) != 0;
	}
	d->opts = (struct ward_sandbox_options){ .files = d->files, .n_files = nf,
						 .binds = d->binds, .n_binds = nb };
	return b->bad ? -EINVAL : 0;
}

/* ---- the supervisor's side ---- */

static int send_fds(int sock, const void *buf, size_t len, const int *fds, size_t n)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * LAUNCH_MAX_FDS)];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof(u));
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (n) {
		msg.msg_control = u.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * n);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * n);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
	}
	ssize_t r;
	while ((r = sendmsg(sock, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	return r == (ssize_t)len ? 0 : -(r < 0 ? errno : EPROTO);
}

/* Receives one message of exactly len bytes and up to max fds (O_CLOEXEC).
 * Returns the number of fds, -1 at EOF, or -errno. */
static int recv_fds(int sock, void *buf, size_t len, int *fds, size_t max)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * LAUNCH_MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			      .msg_controllen = sizeof(u.buf) };
	ssize_t r;
	while ((r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (r == 0)
		return -1;
	if (r < 0)
		return -errno;
	int n = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if ((size_t)n < max)
				fds[n++] = fd;
			else
				close(fd);
		}
	}
	if ((size_t)r != len || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		for (int i = 0; i < n; i++)
			close(fds[i]);
		return -EPROTO;
	}
	return n;
}

static int make_blob(const struct ward_plan *plan, struct ward_error *err)
{
	_cleanup_free_ char *json = ward_policy_to_json(plan->policy);
	if (!json)
		return ward_error_set(err, ENOMEM, "launcher", "unable to serialize the policy");
	struct blob size = { 0 };
	encode(&size, json, plan);
	int fd = (int)syscall(SYS_memfd_create, "ward-request", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return ward_error_set(err, errno, "launcher", "unable to create the request");
	void *map = MAP_FAILED;
	if (ftruncate(fd, (off_t)size.off) == 0)
		map = mmap(NULL, size.off, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		int e = errno;
		close(fd);
		return ward_error_set(err, e, "launcher", "unable to write the request");
	}
	struct blob b = { .p = map, .len = size.off };
	encode(&b, json, plan);
	munmap(map, size.off);
	/* the helper maps it read-only and cannot be raced by a writer */
	fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
	return fd;
}

long ward_launcher_spawn(struct ward_launcher *l, const struct ward_plan *plan, int sync_fd,
			 int report_fd, int cgroup_fd, int *pidfd, uint32_t *degraded,
			 struct ward_error *err)
{
	int memfd = make_blob(plan, err);
	if (memfd < 0)
		return memfd;
	struct stat st;
	fstat(memfd, &st);
	struct launch_req req = {
		.magic = LAUNCH_MAGIC, .degraded = plan->degraded, .cap_last = plan->cap_last,
		.n_rlimits = (uint32_t)plan->n_rlimits, .has_cgroup_fd = cgroup_fd >= 0,
		.n_cg_tasks = (uint32_t)plan->n_cg_tasks, .blob_len = (uint64_t)st.st_size,
		.net_mode = (uint32_t)plan->policy->network.mode,
	};
	memcpy(req.rlimits, plan->rlimits, sizeof(req.rlimits));
	int fds[LAUNCH_MAX_FDS] = { memfd, plan->stdio[0], plan->stdio[1], plan->stdio[2],
				    sync_fd, report_fd };
	size_t n = LAUNCH_FIXED_FDS;
	if (cgroup_fd >= 0)
		fds[n++] = cgroup_fd;
	for (size_t i = 0; i < plan->n_cg_tasks && n < LAUNCH_MAX_FDS; i++)
		fds[n++] = plan->cg_tasks[i];

	struct launch_reply rep;
	int pfd = -1;
	pthread_mutex_lock(&l->lock);
	int r = l->broken ? -EPIPE : send_fds(l->sock, &req, sizeof(req), fds, n);
	if (r == 0) {
		int got = recv_fds(l->sock, &rep, sizeof(rep), &pfd, 1);
		r = got < 0 ? (got == -1 ? -EPIPE : got) : 0;
		if (r == 0 && rep.pid > 0 && got != 1)
			r = -EPROTO;
	}
	if (r < 0 && !l->broken) {
		/* a late answer would be read as the next request's: stop here */
		l->broken = true;
		shutdown(l->sock, SHUT_RDWR);
	}
	pthread_mutex_unlock(&l->lock);
	close(memfd);
	if (r < 0) {
		if (pfd >= 0)
			close(pfd);
		ward_error_set(err, -r, "launcher", "the launcher did not answer");
		ward_error_hint(err, "it is stopped for good: start another one");
		return -(err->code ? err->code : EPIPE);
	}
	if (rep.pid <= 0) {
		if (pfd >= 0)
			close(pfd);
		*err = rep.err;
		return rep.pid < 0 ? rep.pid : -EPROTO;
	}
	*pidfd = pfd;
	*degraded |= rep.degraded;
	return rep.pid;
}

/* ---- the helper's side ---- */

static char *const *program_env;
static char *const *program_argv;

char *const *ward_launcher_program_env(void) { return program_env; }
char *const *ward_launcher_program_argv(void) { return program_argv; }

static long clone_init(struct ward_plan *plan, int cgroup_fd, int *pidfd, uint32_t *degraded)
{
	struct clone_args args;
	memset(&args, 0, sizeof(args));
	/* CLONE_PARENT: the caller's child, not ours; clone3 then wants
	 * exit_signal 0 and takes the helper's own (SIGCHLD). */
	args.flags = CLONE_PARENT | CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET |
		     CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWTIME | CLONE_PIDFD;
	args.pidfd = (uint64_t)(uintptr_t)pidfd;
	if (cgroup_fd >= 0) {
		args.flags |= CLONE_INTO_CGROUP;
		args.cgroup = (uint64_t)cgroup_fd;
	}
	long pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid < 0 && (errno == EINVAL || errno == EPERM) &&
	    (plan->allow_degrade & (1u << WARD_LAYER_TIME))) {
		args.flags &= ~(uint64_t)CLONE_NEWTIME;
		pid = syscall(SYS_clone3, &args, sizeof(args));
		if (pid >= 0)
			*degraded |= 1u << WARD_LAYER_TIME;
	}
	return pid < 0 ? -errno : pid;
}

/* In the clone: the sandbox's init. Returns only in a zygote's program. */
static int child(struct ward_plan *plan, int sync_fd, int report_fd, enum ward_launch_mode mode)
{
	if (mode == WARD_LAUNCH_EXEC)
		ward_child_main(plan, sync_fd, report_fd);
	ward_child_main_return(plan, sync_fd, report_fd);
	/* the program: nothing of the helper's allocator settings goes on */
	mallopt(M_PERTURB, 0);
	program_env = plan->envp;
	program_argv = plan->argv;
	return 1;
}

static int build(const struct launch_req *req, const int *fds, struct decoded *d,
		 struct ward_policy *pol, struct ward_policy_plan **pp, struct ward_plan *plan,
		 struct ward_error *err)
{
	/* No cache across requests: a cached plan holds its policy (the
	 * tenant's environment) for the next clone to inherit. */
	struct ward_plan_cache *cache = ward_plan_cache_new(1);
	if (!cache)
		return ward_error_set(err, ENOMEM, "launcher", "out of memory");
	int r = ward_policy_init(pol, err);
	if (r == 0)
		r = ward_policy_load_json(pol, d->json, d->json_len, "request", err);
	if (r == 0 && !(*pp = ward_plan_cache_get(cache, pol, err)))
		r = -(err->code ? err->code : ENOMEM);
	ward_plan_cache_free(cache); /* *pp lives on: the caller holds it */
	if (r == 0)
		r = ward_plan_build(plan, *pp, d->argv, &d->opts, err);
	if (r < 0)
		return r;
	/* the egress capture is the init's to install: a policy whose copy
	 * lost its network mode must not start without it */
	if ((uint32_t)plan->policy->network.mode != req->net_mode)
		return ward_error_set(err, EPROTO, "net", "the launcher's copy of the policy has "
				      "another network.mode than the supervisor's");
	/* what the supervisor decided after its own build */
	plan->degraded |= req->degraded;
	plan->cap_last = req->cap_last;
	plan->n_rlimits = req->n_rlimits;
	memcpy(plan->rlimits, req->rlimits, sizeof(plan->rlimits));
	for (int i = 0; i < 3; i++)
		plan->stdio[i] = fds[1 + i];
	size_t first_task = LAUNCH_FIXED_FDS + (req->has_cgroup_fd ? 1 : 0);
	plan->n_cg_tasks = req->n_cg_tasks;
	for (size_t i = 0; i < plan->n_cg_tasks; i++)
		plan->cg_tasks[i] = fds[first_task + i];
	return 0;
}

static int answer(int sock, long pid, uint32_t degraded, const struct ward_error *err, int pidfd)
{
	struct launch_reply rep = { .pid = pid, .degraded = degraded };
	if (err)
		rep.err = *err;
	return send_fds(sock, &rep, sizeof(rep), &pidfd, pidfd >= 0 ? 1 : 0);
}

/* Maps the request's memfd once the header agrees with the fds it came
 * with; MAP_FAILED otherwise. */
static void *map_request(const struct launch_req *req, const int *fds, int n)
{
	size_t want = LAUNCH_FIXED_FDS + (req->has_cgroup_fd ? 1u : 0u) + req->n_cg_tasks;
	struct stat st;
	if (req->magic != LAUNCH_MAGIC || (size_t)n != want || req->n_cg_tasks > 6 ||
	    req->n_rlimits > WARD_PLAN_MAX_RLIMITS || fstat(fds[0], &st) < 0 ||
	    (uint64_t)st.st_size != req->blob_len || req->blob_len == 0)
		return MAP_FAILED;
	return mmap(NULL, req->blob_len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fds[0], 0);
}

/* clone_init, and in a non-dumpable helper (a zygote) a handshake: its
 * clones are non-dumpable too, and a rootless supervisor could not open
 * their /proc files to write the id maps. The clone makes itself
 * dumpable, as a cold init is, and says so before the pid is answered.
 * Returns as clone_init (0 in the clone). */
static long clone_dumpable(struct ward_plan *plan, int cgroup_fd, int *pidfd, uint32_t *degraded,
			   struct ward_error *err)
{
	int dump[2] = { -1, -1 };
	if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0 && pipe2(dump, O_CLOEXEC) < 0)
		return ward_error_set(err, errno, "launcher", "unable to create a pipe");
	long pid = clone_init(plan, cgroup_fd, pidfd, degraded);
	if (pid == 0) {
		if (dump[1] >= 0 && (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0 ||
				     write(dump[1], "d", 1) != 1))
			_exit(125);
		return 0;
	}
	if (dump[1] >= 0) {
		close(dump[1]);
		/* EOF: it died, and the verdict will say so */
		char c;
		ssize_t got = pid > 0 ? read(dump[0], &c, 1) : 0;
		(void)got;
		close(dump[0]);
	}
	if (pid < 0)
		ward_error_set(err, (int)-pid, "userns", "unable to create the sandbox's namespaces");
	return pid;
}

int ward_launcher_serve(int sock, enum ward_launch_mode mode)
{
	struct launch_req req;
	int fds[LAUNCH_MAX_FDS];
	int n = recv_fds(sock, &req, sizeof(req), fds, LAUNCH_MAX_FDS);
	if (n == -1 || n == -ECONNRESET)
		return -1;
	if (n < 0)
		return answer(sock, -EPROTO, 0, NULL, -1) < 0 ? -1 : 0;
	struct ward_error err;
	ward_error_clear(&err);
	void *map = map_request(&req, fds, n);
	long pid = -EPROTO;
	int pidfd = -1;
	uint32_t degraded = 0;
	struct ward_policy pol;
	memset(&pol, 0, sizeof(pol));
	struct ward_policy_plan *pp = NULL;
	struct ward_plan *plan = calloc(1, sizeof(*plan));
	struct decoded *d = calloc(1, sizeof(*d));
	if (map == MAP_FAILED || !plan || !d) {
		ward_error_set(&err, map == MAP_FAILED ? EPROTO : ENOMEM, "launcher", "bad request");
	} else {
		struct blob b = { .p = map, .len = req.blob_len };
		int r = decode(&b, d);
		if (r < 0)
			ward_error_set(&err, -r, "launcher", "bad request");
		else
			r = build(&req, fds, d, &pol, &pp, plan, &err);
		pid = r < 0 ? r : clone_dumpable(plan, req.has_cgroup_fd ? fds[LAUNCH_FIXED_FDS] : -1,
						  &pidfd, &degraded, &err);
		if (pid == 0)
			return child(plan, fds[4], fds[5], mode);
		ward_plan_release(plan);
	}
	ward_policy_plan_unref(pp);
	ward_policy_release(&pol);
	if (d)
		free(d->files);
	free(d);
	free(plan);
	if (map != MAP_FAILED)
		munmap(map, req.blob_len);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	int r = answer(sock, pid, degraded, &err, pidfd);
	if (pidfd >= 0)
		close(pidfd);
	return r < 0 ? -1 : 0;
}

/* ---- the launcher process ---- */

/* In the forked helper: nothing of the caller's but the socket. */
static __attribute__((noreturn)) void launcher_main(int sock, pid_t parent)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
		_exit(1);
	prctl(PR_SET_NAME, "ward-launcher", 0, 0, 0);
	mallopt(M_PERTURB, LAUNCH_PERTURB);
	int high = (int)fcntl(sock, F_DUPFD_CLOEXEC, 10);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (high < 0 || null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
	    dup3(high, 3, O_CLOEXEC) < 0)
		_exit(1);
	if (syscall(SYS_close_range, 4U, ~0U, 0) < 0)
		_exit(1);
	while (ward_launcher_serve(3, WARD_LAUNCH_EXEC) == 0)
		;
	_exit(0);
}

struct ward_launcher *ward_launcher_adopt(int sock, pid_t pid)
{
	struct ward_launcher *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	pthread_mutex_init(&l->lock, NULL);
	l->sock = sock;
	l->pid = pid;
	struct timeval tv = { .tv_sec = LAUNCH_TIMEOUT_S };
	setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return l;
}

WARD_EXPORT struct ward_launcher *ward_launcher_start(struct ward_error *err)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		ward_error_set(err, errno, "launcher", "unable to create a socket");
		return NULL;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0)
		launcher_main(sv[1], parent);
	close(sv[1]);
	struct ward_launcher *l = pid > 0 ? ward_launcher_adopt(sv[0], pid) : NULL;
	if (!l) {
		ward_error_set(err, pid < 0 ? errno : ENOMEM, "launcher", "unable to start the launcher");
		close(sv[0]);
		if (pid > 0)
			waitpid(pid, NULL, 0);
	}
	return l;
}

WARD_EXPORT void ward_launcher_stop(struct ward_launcher *l)
{
	if (!l)
		return;
	close(l->sock); /* EOF: the helper exits */
	if (l->pid > 0)
		while (waitpid(l->pid, NULL, 0) < 0 && errno == EINTR)
			;
	pthread_mutex_destroy(&l->lock);
	free(l);
}

WARD_EXPORT pid_t ward_launcher_pid(const struct ward_launcher *l) { return l->pid; }
