/* tests/unit/t-landlock.c — the landlock layer: rules, ABI masking, denials.
 *
 * Builds a fake plan over a temp tree (/tmp/ward-ll-XXXXXX/<run>/{ro,rw,tmp}),
 * checks the rules ward_landlock_prepare derives from it, then forks children
 * that apply the layer (with host paths: the children are not pivoted) and
 * report the exact errno of each probe. One control child runs the same
 * probes without the layer, so every denial below is known to come from
 * landlock and not from file modes: the tree is world-writable on purpose.
 * Runs as root and as an unprivileged user. Never touches anything outside
 * its temp tree except reading /usr and writing /dev/null.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "compat/landlock.h"
#include "sandbox.h"
#include "ward/error.h"
#include "ward/policy.h"

#include "base/util.h"
#include "tap.h"

#define A(x) LANDLOCK_ACCESS_FS_##x
#define RD (A(READ_FILE) | A(READ_DIR))
#define WR                                                                     \
	(A(WRITE_FILE) | A(REMOVE_DIR) | A(REMOVE_FILE) | A(MAKE_DIR) |        \
	 A(MAKE_REG) | A(MAKE_SOCK) | A(MAKE_FIFO) | A(MAKE_SYM) | A(REFER) |  \
	 A(TRUNCATE))
#define LAYER_BIT (1u << WARD_LAYER_LANDLOCK)
#define ANY_MKNOD (-2) /* control: 0 as real root, EPERM otherwise */

enum { PATHLEN = 256 };

static char base[PATHLEN];
static char parent_sock[64]; /* abstract name, without the leading NUL */

struct tree {
	char root[PATHLEN], ro[PATHLEN], rw[PATHLEN], tmp[PATHLEN];
	char file[PATHLEN], missing[PATHLEN], link[PATHLEN];
	int tag;
};

struct report {
	int apply;
	uint32_t layers, degraded;
	struct ward_error err;
	int results[64];
};

/* ---- tree and plan -------------------------------------------------- */

/* Paths here are short (/tmp/ward-ll-XXXXXX/run7/ro/existing). */
static void join(char *dst, const char *dir, const char *name)
{
	ward_strlcpy(dst, dir, PATHLEN);
	ward_strlcat(dst, "/", PATHLEN);
	ward_strlcat(dst, name, PATHLEN);
}

static int mkfile(const char *path, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (fd < 0 || write(fd, "data\n", 5) != 5)
		return -1;
	return close(fd);
}

static int copy_true(const char *dir, const char *name)
{
	static char buf[1 << 20];
	char dst[PATHLEN];
	ssize_t n;
	int in, out;

	if (name)
		join(dst, dir, name);
	else
		ward_strlcpy(dst, dir, sizeof(dst));
	in = open("/bin/true", O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return -1;
	n = ward_read_full(in, buf, sizeof(buf));
	close(in);
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0777);
	if (n <= 0 || out < 0 || ward_write_all(out, buf, (size_t)n) < 0)
		return -1;
	return close(out);
}

/* Creates <base>/<name> with every file the probes touch; 0 or -1. */
static int make_tree(struct tree *t, const char *name, int tag)
{
	static const char *const files[] = {
		"ro/existing", "ro/victim", "rw/existing", "rw/victim",
		"rw/mv1", "rw/mv2", "rw/mv3", "outside",
	};
	char p[PATHLEN];
	size_t i;

	t->tag = tag;
	join(t->root, base, name);
	join(t->ro, t->root, "ro");
	join(t->rw, t->root, "rw");
	join(t->tmp, t->root, "tmp");
	join(t->file, t->root, "file-true");
	join(t->missing, t->root, "missing");
	join(t->link, t->root, "link");
	if (mkdir(t->root, 0777) || mkdir(t->ro, 0777) || mkdir(t->rw, 0777) ||
	    mkdir(t->tmp, 0777))
		return -1;
	for (i = 0; i < ARRAY_SIZE(files); i++) {
		join(p, t->root, files[i]);
		if (mkfile(p, 0666))
			return -1;
	}
	if (copy_true(t->ro, "true") || copy_true(t->rw, "true") ||
	    copy_true(t->tmp, "true") || copy_true(t->file, NULL))
		return -1;
	return symlink("ro", t->link);
}

static struct ward_mount_op *add_op(struct ward_plan *plan,
				    enum ward_mount_kind kind, const char *src,
				    const char *target, bool writable, bool device)
{
	struct ward_mount_op *op = &plan->mounts[plan->n_mounts++];
	memset(op, 0, sizeof(*op));
	op->kind = kind;
	op->src = src;
	op->target = target;
	op->writable = writable;
	op->device = device;
	op->fd = -1;
	return op;
}

/* The shape of a real plan, with host paths as targets. */
/* The policy the plans are made for: the defaults' shape, no writable list,
 * any program may be executed. */
static struct ward_policy plan_policy;

static struct ward_plan *new_plan(void)
{
	struct ward_plan *plan = calloc(1, sizeof(*plan));
	if (plan)
		plan->policy = &plan_policy;
	return plan;
}

static void fill_plan(struct ward_plan *plan, const struct tree *t)
{
	memset(plan, 0, sizeof(*plan));
	plan->policy = &plan_policy;
	add_op(plan, WARD_MNT_DIR, NULL, t->root, false, false);
	add_op(plan, WARD_MNT_BIND, "/usr", "/usr", false, false);
	add_op(plan, WARD_MNT_BIND, t->ro, t->ro, false, false);
	add_op(plan, WARD_MNT_BIND, t->rw, t->rw, true, false);
	add_op(plan, WARD_MNT_TMPFS, NULL, t->tmp, false, false);
	add_op(plan, WARD_MNT_BIND, t->file, t->file, false, false);
	add_op(plan, WARD_MNT_BIND, "/dev/null", "/dev/null", true, true);
	add_op(plan, WARD_MNT_PROC, NULL, "/proc", false, false);
	add_op(plan, WARD_MNT_SYMLINK, "ro", t->link, false, false);
	/* The host lacks it, so the mount layer skips it; its target too. */
	add_op(plan, WARD_MNT_BIND, "/nonexistent", t->missing, false, false)
		->optional = true;
}

static const struct ward_landlock_rule *find_rule(const struct ward_plan *plan,
						   const char *path)
{
	size_t i;
	for (i = 0; i < plan->n_landlock; i++)
		if (!strcmp(plan->landlock[i].path, path))
			return &plan->landlock[i];
	return NULL;
}

static void is_rule(const struct ward_plan *plan, const char *path,
		    uint64_t want, const char *what)
{
	const struct ward_landlock_rule *r = find_rule(plan, path);
	if (!ok(r != NULL, "prepare: %s has a rule", what))
		return;
	if (!ok(r->access == want, "prepare: %s rights are exact", what))
		diag("got %#llx, want %#llx", (unsigned long long)r->access,
		     (unsigned long long)want);
}

/* ---- probes (run in the restricted child; return 0 or errno) -------- */

static int rc(int r)
{
	return r < 0 ? errno : 0;
}

static int open_rel(const struct tree *t, const char *rel, int flags)
{
	char p[PATHLEN];
	int fd;
	join(p, t->root, rel);
	fd = open(p, flags | O_CLOEXEC, 0666);
	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

static int at_rel(const struct tree *t, const char *rel, int op)
{
	char p[PATHLEN];
	join(p, t->root, rel);
	switch (op) {
	case 0: return rc(mkdir(p, 0777));
	case 1: return rc(mkfifo(p, 0666));
	case 2: return rc(symlink("existing", p));
	case 3: return rc(unlink(p));
	case 4: return rc(truncate(p, 0));
	default: return rc(mknod(p, S_IFCHR | 0666, makedev(1, 3)));
	}
}

static int two_rel(const struct tree *t, const char *from, const char *to,
		   bool link_it)
{
	char a[PATHLEN], b[PATHLEN];
	join(a, t->root, from);
	join(b, t->root, to);
	return rc(link_it ? link(a, b) : rename(a, b));
}

/* Runs path in a grandchild; 0 when it exited 0, else the execve errno. */
static int exec_path(const char *path)
{
	char *const argv[] = { (char *)path, NULL };
	char *const envp[] = { NULL };
	int fds[2], status, e = 0;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC))
		return errno;
	pid = fork();
	if (pid == 0) {
		execve(path, argv, envp);
		e = errno;
		(void)!write(fds[1], &e, sizeof(e));
		_exit(127);
	}
	close(fds[1]);
	if (ward_read_full(fds[0], &e, sizeof(e)) != sizeof(e))
		e = 0;
	close(fds[0]);
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	if (!e && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		return -1;
	return e;
}

static int exec_rel(const struct tree *t, const char *rel)
{
	char p[PATHLEN];
	join(p, t->root, rel);
	return exec_path(p);
}

static int devnull(bool use_ioctl)
{
	struct termios tio;
	int fd = open("/dev/null", O_RDWR | O_TRUNC | O_CLOEXEC), e = 0;
	if (fd < 0)
		return errno;
	if (use_ioctl)
		e = rc(ioctl(fd, TCGETS, &tio));
	else if (write(fd, "x", 1) != 1)
		e = errno;
	close(fd);
	return e;
}

/* Maps a rw file PROT_EXEC: landlock's EXECUTE covers execve only, so this
 * succeeds (a noexec mount is what stops it). */
static int map_exec(const struct tree *t)
{
	char p[PATHLEN];
	void *m;
	int fd, e = 0;
	join(p, t->root, "rw/true");
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	m = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED)
		e = errno;
	else
		munmap(m, 4096);
	close(fd);
	return e;
}

static socklen_t abstract_addr(struct sockaddr_un *sa, const char *name)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path + 1, name, strlen(name));
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
}

/* Connects to an abstract socket; own: listens on it first, in this domain. */
static int abstract_connect(const struct tree *t, bool own)
{
	struct sockaddr_un sa;
	char name[64];
	socklen_t len;
	int l = -1, c, e;

	snprintf(name, sizeof(name), "ward-ll-own-%d-%d", (int)getpid(), t->tag);
	len = abstract_addr(&sa, own ? name : parent_sock);
	if (own) {
		l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (l < 0 || bind(l, (struct sockaddr *)&sa, len) || listen(l, 1))
			return errno;
	}
	c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c < 0)
		return errno;
	e = rc(connect(c, (struct sockaddr *)&sa, len));
	close(c);
	if (l >= 0)
		close(l);
	return e;
}

/* ---- probe table: name, action, expected errno per ABI (0 = control) -- */

static int p_read_outside(const struct tree *t) { return open_rel(t, "outside", O_RDONLY); }
static int p_read_ro(const struct tree *t) { return open_rel(t, "ro/existing", O_RDONLY); }
static int p_list_ro(const struct tree *t) { return open_rel(t, "ro", O_RDONLY | O_DIRECTORY); }
static int p_create_ro(const struct tree *t) { return open_rel(t, "ro/new", O_WRONLY | O_CREAT); }
static int p_write_ro(const struct tree *t) { return open_rel(t, "ro/existing", O_WRONLY); }
static int p_create_outside(const struct tree *t) { return open_rel(t, "new", O_WRONLY | O_CREAT); }
static int p_create_rw(const struct tree *t) { return open_rel(t, "rw/new", O_WRONLY | O_CREAT); }
static int p_write_rw(const struct tree *t) { return open_rel(t, "rw/existing", O_WRONLY); }
static int p_create_tmp(const struct tree *t) { return open_rel(t, "tmp/new", O_WRONLY | O_CREAT); }
static int p_trunc_ro(const struct tree *t) { return at_rel(t, "ro/existing", 4); }
static int p_trunc_rw(const struct tree *t) { return at_rel(t, "rw/existing", 4); }
static int p_mkdir_ro(const struct tree *t) { return at_rel(t, "ro/d", 0); }
static int p_mkdir_rw(const struct tree *t) { return at_rel(t, "rw/d", 0); }
static int p_fifo_ro(const struct tree *t) { return at_rel(t, "ro/fifo", 1); }
static int p_fifo_rw(const struct tree *t) { return at_rel(t, "rw/fifo", 1); }
static int p_symlink_ro(const struct tree *t) { return at_rel(t, "ro/sym", 2); }
static int p_symlink_rw(const struct tree *t) { return at_rel(t, "rw/sym", 2); }
static int p_unlink_ro(const struct tree *t) { return at_rel(t, "ro/victim", 3); }
static int p_unlink_rw(const struct tree *t) { return at_rel(t, "rw/victim", 3); }
static int p_mknod_rw(const struct tree *t) { return at_rel(t, "rw/null", 5); }
static int p_rename_ro(const struct tree *t) { return two_rel(t, "rw/mv1", "ro/mv1", false); }
static int p_link_ro(const struct tree *t) { return two_rel(t, "rw/existing", "ro/lnk", true); }
static int p_rename_tmp(const struct tree *t) { return two_rel(t, "rw/mv2", "tmp/mv2", false); }
static int p_link_tmp(const struct tree *t) { return two_rel(t, "rw/existing", "tmp/lnk", true); }
static int p_rename_same(const struct tree *t) { return two_rel(t, "rw/mv3", "rw/mv3b", false); }
static int p_exec_ro(const struct tree *t) { return exec_rel(t, "ro/true"); }
static int p_exec_file(const struct tree *t) { return exec_rel(t, "file-true"); }
static int p_exec_usr(const struct tree *t) { (void)t; return exec_path("/bin/true"); }
static int p_exec_rw(const struct tree *t) { return exec_rel(t, "rw/true"); }
static int p_exec_tmp(const struct tree *t) { return exec_rel(t, "tmp/true"); }
static int p_map_exec(const struct tree *t) { return map_exec(t); }
static int p_null_write(const struct tree *t) { (void)t; return devnull(false); }
static int p_null_ioctl(const struct tree *t) { (void)t; return devnull(true); }
static int p_signal(const struct tree *t) { (void)t; return rc(kill(getppid(), SIGUSR1)); }
static int p_unix_parent(const struct tree *t) { return abstract_connect(t, false); }
static int p_unix_own(const struct tree *t) { return abstract_connect(t, true); }

enum want { OK, DENY, TRUNC3, REFER2, IOCTL5, SCOPE6, MKNOD };

struct probe {
	const char *name;
	int (*fn)(const struct tree *t);
	enum want want;
};

static const struct probe probes[] = {
	{ "read a file outside the mounts", p_read_outside, OK },
	{ "read a file in ro", p_read_ro, OK },
	{ "list ro", p_list_ro, OK },
	{ "create a file in ro", p_create_ro, DENY },
	{ "open a ro file for writing", p_write_ro, DENY },
	{ "create a file outside the mounts", p_create_outside, DENY },
	{ "create a file in rw", p_create_rw, OK },
	{ "open a rw file for writing", p_write_rw, OK },
	{ "create a file in tmpfs", p_create_tmp, OK },
	{ "truncate a ro file", p_trunc_ro, TRUNC3 },
	{ "truncate a rw file", p_trunc_rw, OK },
	{ "mkdir in ro", p_mkdir_ro, DENY },
	{ "mkdir in rw", p_mkdir_rw, OK },
	{ "mkfifo in ro", p_fifo_ro, DENY },
	{ "mkfifo in rw", p_fifo_rw, OK },
	{ "symlink in ro", p_symlink_ro, DENY },
	{ "symlink in rw", p_symlink_rw, OK },
	{ "unlink in ro", p_unlink_ro, DENY },
	{ "unlink in rw", p_unlink_rw, OK },
	{ "mknod a char device in rw", p_mknod_rw, MKNOD },
	{ "rename rw -> ro", p_rename_ro, DENY },
	{ "link rw -> ro", p_link_ro, DENY },
	{ "rename rw -> tmpfs", p_rename_tmp, REFER2 },
	{ "link rw -> tmpfs", p_link_tmp, REFER2 },
	{ "rename within rw", p_rename_same, OK },
	{ "exec from ro", p_exec_ro, OK },
	{ "exec a ro-bound file", p_exec_file, OK },
	{ "exec /bin/true from /usr", p_exec_usr, OK },
	{ "exec from rw", p_exec_rw, DENY },
	{ "exec from tmpfs", p_exec_tmp, DENY },
	{ "mmap PROT_EXEC a rw file (not covered by landlock)", p_map_exec, OK },
	{ "write /dev/null (O_TRUNC)", p_null_write, OK },
	{ "ioctl(TCGETS) on /dev/null", p_null_ioctl, IOCTL5 },
	{ "signal the parent", p_signal, SCOPE6 },
	{ "connect to the parent's abstract socket", p_unix_parent, SCOPE6 },
	{ "connect to its own abstract socket", p_unix_own, OK },
};

/* The exact errno a probe must give; abi 0 is the control (no layer). */
static int expected(enum want w, int abi)
{
	switch (w) {
	case OK: return 0;
	case DENY: return abi ? EACCES : 0;
	case TRUNC3: return abi >= 3 ? EACCES : 0;
	/* ABI 1 cannot grant REFER, so every reparenting is EXDEV there. */
	case REFER2: return abi == 1 ? EXDEV : 0;
	case IOCTL5: return abi >= 5 ? EACCES : ENOTTY;
	case SCOPE6: return abi >= 6 ? EPERM : 0;
	case MKNOD: return abi ? EACCES : ANY_MKNOD;
	}
	return -1;
}

/* ---- children ------------------------------------------------------- */

/* Forks a child that applies plan (unless !apply) and runs the probes. */
static int run_child(struct ward_plan *plan, const struct tree *t, bool apply,
		     struct report *rep)
{
	int fds[2], status;
	pid_t pid;
	size_t i;

	memset(rep, 0, sizeof(*rep));
	if (pipe2(fds, O_CLOEXEC))
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
		if (apply) /* through the pipeline, which keeps the bits */
			rep->apply = ward_layers_apply(ward_layer_find(WARD_LAYER_LANDLOCK), 1,
						       WARD_STAGE_PROGRAM, plan, &rep->err);
		rep->layers = plan->layers;
		rep->degraded = plan->degraded;
		for (i = 0; t && rep->apply == 0 && i < ARRAY_SIZE(probes); i++)
			rep->results[i] = probes[i].fn(t);
		_exit(ward_write_all(fds[1], rep, sizeof(*rep)) ? 1 : 0);
	}
	close(fds[1]);
	if (pid < 0 || ward_read_full(fds[0], rep, sizeof(*rep)) != sizeof(*rep)) {
		close(fds[0]);
		return -1;
	}
	close(fds[0]);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		return -1;
	return 0;
}

static const char *ename(int e)
{
	const char *n = e > 0 ? strerrorname_np(e) : NULL;
	return e == 0 ? "0" : n ? n : "?";
}

static void check_probes(const struct report *rep, int abi, const char *who)
{
	size_t i;
	for (i = 0; i < ARRAY_SIZE(probes); i++) {
		int got = rep->results[i], want = expected(probes[i].want, abi);
		if (want == ANY_MKNOD) {
			ok(got == 0 || got == EPERM, "%s: %s -> %s (0 or EPERM)",
			   who, probes[i].name, ename(got));
			continue;
		}
		if (!ok(got == want, "%s: %s -> %s", who, probes[i].name, ename(want)))
			diag("got %s", ename(got));
	}
}

/* Control, then every ABI from 1 to the kernel's, each on a fresh tree. */
static void test_enforcement(int kernel_abi)
{
	struct ward_plan *plan = new_plan();
	struct ward_error err;
	struct report rep;
	struct tree t;
	char name[16], who[16];
	int abi;

	for (abi = 0; plan && abi <= kernel_abi; abi++) {
		snprintf(name, sizeof(name), "run%d", abi);
		snprintf(who, sizeof(who), abi ? "abi %d" : "control", abi);
		if (!ok(make_tree(&t, name, abi) == 0, "%s: tree created", who))
			break;
		fill_plan(plan, &t);
		ward_error_clear(&err);
		is_int(ward_landlock_prepare(plan, &err), 0, "%s: prepare", who);
		/* Forcing an older ABI checks the masks and attr sizes it uses. */
		plan->landlock_abi = abi;
		if (!ok(run_child(plan, &t, abi > 0, &rep) == 0, "%s: child ran", who))
			continue;
		if (!ok(rep.apply == 0, "%s: apply", who)) {
			char buf[640];
			diag("%s", ward_error_format(&rep.err, buf, sizeof(buf)));
			continue;
		}
		is_int(rep.layers & LAYER_BIT, abi ? LAYER_BIT : 0,
		       "%s: landlock layer bit %s", who, abi ? "set" : "clear");
		check_probes(&rep, abi, who);
	}
	free(plan);
}

/* ---- plan-level tests ----------------------------------------------- */

static void test_compat(void)
{
	static const size_t sizes[] = { 0, 8, 8, 8, 16, 16, 24, 24, 24 };
	int abi;

	is_int(sizeof(struct ward_landlock_ruleset_attr), 24, "compat: attr is 24 bytes");
	is_int(sizeof(struct landlock_net_port_attr), 16, "compat: net port attr is 16 bytes");
	for (abi = 1; abi <= 8; abi++)
		is_int(ward_landlock_attr_size(abi), sizes[abi], "compat: abi %d attr size", abi);
	is_int(ward_landlock_fs_handled(0), 0, "compat: abi 0 handles nothing");
	is_int(ward_landlock_fs_handled(1), 0x1fff, "compat: abi 1 handles 13 rights");
	is_int(ward_landlock_fs_handled(2), 0x3fff, "compat: abi 2 adds REFER");
	is_int(ward_landlock_fs_handled(4), 0x7fff, "compat: abi 3-4 add TRUNCATE");
	is_int(ward_landlock_fs_handled(5), 0xffff, "compat: abi 5 adds IOCTL_DEV");
	is_int(ward_landlock_fs_handled(9), 0xffff, "compat: newer ABIs handle only known rights");
	is_int(ward_landlock_scoped(5), 0, "compat: no scopes before abi 6");
	is_int(ward_landlock_scoped(6), 3, "compat: abi 6 scopes abstract unix and signals");
}

static void test_prepare_rules(void)
{
	struct ward_plan *plan = new_plan();
	struct ward_error err;
	struct tree t;
	size_t i;

	if (!plan || make_tree(&t, "rules", 99)) {
		ok(0, "prepare: fixture");
		free(plan);
		return;
	}
	fill_plan(plan, &t);
	is_int(ward_landlock_prepare(plan, &err), 0, "prepare: succeeds");
	is_int(plan->landlock_abi, ward_landlock_abi(), "prepare: records the probed abi");
	is_int(plan->n_landlock, 8, "prepare: one rule for / and one per bind or tmpfs");
	is_str(plan->landlock[0].path, "/", "prepare: the first rule is /");
	is_rule(plan, "/", RD, "read-only root");
	is_rule(plan, "/usr", RD | A(EXECUTE), "image (/usr)");
	is_rule(plan, t.ro, RD | A(EXECUTE), "ro bind");
	is_rule(plan, t.rw, RD | WR, "rw bind");
	is_rule(plan, t.tmp, RD | WR, "tmpfs");
	is_rule(plan, t.file, RD | A(EXECUTE), "ro file bind");
	is_rule(plan, "/dev/null", A(READ_FILE) | A(WRITE_FILE), "device");
	is_rule(plan, t.missing, RD | A(EXECUTE), "optional bind");
	ok(!find_rule(plan, "/proc") && !find_rule(plan, t.root) &&
	   !find_rule(plan, t.link), "prepare: no rule for proc, dirs or symlinks");
	for (i = 0; i < plan->n_landlock; i++) {
		uint64_t a = plan->landlock[i].access;
		ok(!((a & A(EXECUTE)) && (a & A(WRITE_FILE))),
		   "prepare: %s is not both writable and executable", plan->landlock[i].path);
		ok(!(a & (A(MAKE_CHAR) | A(MAKE_BLOCK) | A(IOCTL_DEV))),
		   "prepare: %s grants no device creation or ioctl", plan->landlock[i].path);
	}
	free(plan);
}

static void test_prepare_edges(void)
{
	struct ward_plan *plan = new_plan();
	static char targets[WARD_PLAN_MAX_MOUNTS][16];
	struct ward_error err;
	size_t i;

	if (!plan)
		return;
	add_op(plan, WARD_MNT_BIND, "/a", "/x", true, false);
	add_op(plan, WARD_MNT_BIND, "/b", "/x", false, false);
	add_op(plan, WARD_MNT_TMPFS, NULL, "/", false, false);
	is_int(ward_landlock_prepare(plan, &err), 0, "prepare: shadowed targets");
	is_int(plan->n_landlock, 2, "prepare: a target gets one rule");
	is_rule(plan, "/x", RD | A(EXECUTE), "shadowing ro bind (the later op wins)");
	is_rule(plan, "/", RD, "tmpfs on / (the root never becomes writable)");

	memset(plan, 0, sizeof(*plan));
	plan->policy = &plan_policy;
	add_op(plan, WARD_MNT_BIND, "/a", "relative/x", false, false);
	ward_error_clear(&err);
	is_int(ward_landlock_prepare(plan, &err), -EINVAL, "prepare: relative target fails");
	has_str(err.message, "'relative/x'", "prepare: the error names the target");
	is_str(err.layer, "landlock", "prepare: the error names the layer");

	memset(plan, 0, sizeof(*plan));
	plan->policy = &plan_policy;
	for (i = 0; i < WARD_PLAN_MAX_MOUNTS; i++) {
		snprintf(targets[i], sizeof(targets[i]), "/m%zu", i);
		add_op(plan, WARD_MNT_TMPFS, NULL, targets[i], false, false);
	}
	ward_error_clear(&err);
	is_int(ward_landlock_prepare(plan, &err), -E2BIG, "prepare: too many rules fails");
	has_str(err.message, "too many landlock rules", "prepare: and says so");
	free(plan);
}

/* Landlock rights follow inodes and add up along paths: both ways of
 * making a written file executable must be closed by prepare. */
static void test_prepare_overlap(void)
{
	struct ward_plan *plan = new_plan();
	struct ward_error err;
	struct tree t;

	if (!plan || make_tree(&t, "overlap", 98)) {
		ok(0, "overlap: fixture");
		free(plan);
		return;
	}
	add_op(plan, WARD_MNT_BIND, "/usr", "/usr", false, false);
	add_op(plan, WARD_MNT_BIND, t.root, "/in", false, false);
	add_op(plan, WARD_MNT_BIND, t.rw, "/in-same", false, false);
	add_op(plan, WARD_MNT_BIND, t.ro, "/in-ro", false, false);
	add_op(plan, WARD_MNT_BIND, t.rw, "/out", true, false);
	add_op(plan, WARD_MNT_BIND, "/nonexistent", "/opt", false, false)->optional = true;
	is_int(ward_landlock_prepare(plan, &err), 0, "overlap: prepare succeeds");
	is_rule(plan, "/in", RD, "ro bind of a parent of a rw source (no EXECUTE)");
	is_rule(plan, "/in-same", RD, "ro bind of a rw source itself (no EXECUTE)");
	is_rule(plan, "/in-ro", RD | A(EXECUTE), "ro bind beside a rw source");
	is_rule(plan, "/usr", RD | A(EXECUTE), "unrelated image bind");
	is_rule(plan, "/opt", RD | A(EXECUTE), "absent optional bind");

	memset(plan, 0, sizeof(*plan));
	plan->policy = &plan_policy;
	add_op(plan, WARD_MNT_BIND, t.ro, "/tools", false, false);
	add_op(plan, WARD_MNT_TMPFS, NULL, "/toolsx", false, false);
	is_int(ward_landlock_prepare(plan, &err), 0, "nesting: a sibling sharing a prefix is fine");

	memset(plan, 0, sizeof(*plan));
	plan->policy = &plan_policy;
	add_op(plan, WARD_MNT_BIND, t.ro, "/tools", false, false);
	add_op(plan, WARD_MNT_BIND, t.rw, "/tools/out", true, false);
	ward_error_clear(&err);
	is_int(ward_landlock_prepare(plan, &err), -EINVAL,
	       "nesting: rw mount inside an executable mount fails");
	has_str(err.message, "'/tools/out' is inside the executable mount '/tools'",
		"nesting: the error names both mounts");

	memset(plan, 0, sizeof(*plan));
	plan->policy = &plan_policy;
	add_op(plan, WARD_MNT_BIND, t.ro, "/", false, false);
	add_op(plan, WARD_MNT_TMPFS, NULL, "/tmp", false, false);
	ward_error_clear(&err);
	is_int(ward_landlock_prepare(plan, &err), -EINVAL,
	       "nesting: an executable root with a tmpfs fails");
	free(plan);
}

/* ABI 0 needs no kernel support, so these run in this process. */
static void test_unavailable(void)
{
	struct ward_plan *plan = new_plan();
	struct ward_error err;

	if (!plan)
		return;
	plan->allow_degrade = LAYER_BIT;
	const struct ward_layer_desc *row = ward_layer_find(WARD_LAYER_LANDLOCK);
	is_int(ward_layers_apply(row, 1, WARD_STAGE_PROGRAM, plan, &err), 0,
	       "abi 0: degrades when allowed");
	is_int(plan->degraded, LAYER_BIT, "abi 0: marked degraded");
	is_int(plan->layers, 0, "abi 0: not marked applied");

	memset(plan, 0, sizeof(*plan));
	plan->policy = &plan_policy;
	plan->allow_degrade = ~LAYER_BIT;
	ward_error_clear(&err);
	is_int(ward_layers_apply(row, 1, WARD_STAGE_PROGRAM, plan, &err), -EOPNOTSUPP,
	       "abi 0: fails when not allowed");
	is_str(err.layer, "landlock", "abi 0: error names the layer");
	is_str(err.message, "landlock is not available", "abi 0: error message");
	has_str(err.hint, "lsm=", "abi 0: hint names the boot parameter");
	has_str(err.hint, "CONFIG_SECURITY_LANDLOCK", "abi 0: hint names the kernel option");
	is_int(plan->degraded | plan->layers, 0, "abi 0: nothing marked");
	free(plan);
}

/* A rule path through a symlink must fail, naming the path, before any
 * restriction: run it in a child anyway, in case it did not. */
static void test_apply_errors(int kernel_abi)
{
	struct ward_plan *plan = new_plan();
	struct report rep;
	char via[PATHLEN];

	if (!plan)
		return;
	join(via, base, "rules/link/existing");
	plan->landlock_abi = kernel_abi;
	plan->landlock[0].path = "/";
	plan->landlock[0].access = RD;
	plan->landlock[1].path = via;
	plan->landlock[1].access = RD | WR;
	plan->n_landlock = 2;
	if (ok(run_child(plan, NULL, true, &rep) == 0, "symlinked rule: child ran")) {
		is_int(rep.apply, -ELOOP, "symlinked rule: apply fails with ELOOP");
		has_str(rep.err.message, via, "symlinked rule: the error names the path");
		is_int(rep.layers, 0, "symlinked rule: layer not marked applied");
	}
	free(plan);
}

/* ---- main ----------------------------------------------------------- */

static int listen_parent_socket(void)
{
	struct sockaddr_un sa;
	socklen_t len;
	int fd;

	snprintf(parent_sock, sizeof(parent_sock), "ward-ll-parent-%d", (int)getpid());
	len = abstract_addr(&sa, parent_sock);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, len) || listen(fd, 64))
		return -1;
	return fd;
}

static int remove_one(const char *path, const struct stat *st, int type,
		      struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (type == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

static void cleanup(void)
{
	if (base[0])
		nftw(base, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
	struct sigaction sa;
	int abi, sock;

	umask(0);
	/* The signal probe aims SIGUSR1 at us: it must be harmless when the
	 * scope is missing (control run, ABI < 6). */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	sigaction(SIGUSR1, &sa, NULL);

	ward_strlcpy(base, "/tmp/ward-ll-XXXXXX", sizeof(base));
	if (!mkdtemp(base) || chmod(base, 0755)) {
		ok(0, "temp dir %s", base);
		return tap_done();
	}
	sock = listen_parent_socket();
	ok(sock >= 0, "listening on the abstract socket @%s", parent_sock);
	abi = ward_landlock_abi();
	diag("kernel landlock abi %d, euid %d", abi, (int)geteuid());

	test_compat();
	test_prepare_rules();
	test_prepare_edges();
	test_prepare_overlap();
	test_unavailable();
	if (abi <= 0) {
		skip("landlock is not available on this kernel (abi %d)", abi);
	} else {
		test_apply_errors(abi);
		test_enforcement(abi);
	}
	if (sock >= 0)
		close(sock);
	cleanup();
	return tap_done();
}
