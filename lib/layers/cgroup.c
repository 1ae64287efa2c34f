/* lib/layers/cgroup.c — one cgroup per sandbox: the front end (detect,
 * create, attach, kill, destroy, names, gc) and the file helpers that the
 * v1 and v2 backends share.
 *
 * Parent-only: this file allocates and uses stdio, so it never runs in the
 * sandbox child. It must never touch a cgroup it did not create, other than
 * the leaves of dead ward supervisors of its own pid namespace (ward_cgroup_gc), and never remove the
 * shared <hierarchy>/ward/ parents, which other supervisors use concurrently.
 */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>

#include "base/util.h"
#include "cgroup.h"
#include "layers/cgroup-internal.h"

#define DEFAULT_ROOT "/sys/fs/cgroup"
#define DELEGATE_HINT "run as root, or delegate a cgroup v2 subtree to this user (systemd Delegate=yes)"
#define NS_PER_MS 1000000ull

/* ---- file helpers ------------------------------------------------------ */

int ward_cg_join(char *buf, size_t len, const char *a, const char *b)
{
	int n = snprintf(buf, len, "%s/%s", a, b);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

bool ward_cg_on_cgroupfs(const char *dir)
{
	struct statfs sfs;
	if (statfs(dir, &sfs) < 0)
		return false;
	return sfs.f_type == CGROUP_SUPER_MAGIC || sfs.f_type == CGROUP2_SUPER_MAGIC;
}

void ward_cg_hint(struct ward_error *err, int code)
{
	if (code == EACCES || code == EPERM || code == EROFS || code == ENOENT)
		ward_error_hint(err, DELEGATE_HINT);
}

int ward_cg_write(const struct ward_cgroup *cg, const char *dir, const char *file,
		  const char *value, struct ward_error *err)
{
	char path[PATH_MAX];
	int r = ward_cg_join(path, sizeof(path), dir, file);
	if (r < 0)
		return ward_error_set(err, -r, "cgroup", "path too long: '%s/%s'", dir, file);
	/* The kernel creates the files at mkdir; the fake tree cannot. */
	int flags = cg->fake ? O_CREAT | O_TRUNC : 0;
	r = ward_write_file_at(AT_FDCWD, path, value, strlen(value), flags, 0644);
	if (r < 0) {
		ward_error_set(err, -r, "cgroup", "unable to write '%s' to '%s'", value, path);
		if (r == -ENOENT)
			ward_error_hint(err, "the kernel lacks this file: is its controller enabled "
					     "in the parent's cgroup.subtree_control?");
		else
			ward_cg_hint(err, -r);
	}
	return r;
}

int ward_cg_write_u64(const struct ward_cgroup *cg, const char *dir,
		      const char *file, uint64_t v, struct ward_error *err)
{
	char num[24];
	return ward_cg_write(cg, dir, file, ward_utoa(v, num), err);
}

long ward_cg_read(const char *dir, const char *file, char *buf, size_t len)
{
	char path[PATH_MAX];
	int r = ward_cg_join(path, sizeof(path), dir, file);
	if (r < 0)
		return r;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	ssize_t n = ward_read_full(fd, buf, len - 1);
	if (n < 0)
		return n;
	buf[n] = '\0';
	return n;
}

/* Parses one unsigned decimal at *p (no sign, no blanks before), moving *p
 * past it. Returns 0 or -EINVAL. */
static int parse_u64(const char **p, uint64_t *out)
{
	char *end;
	if (!isdigit((unsigned char)**p))
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(*p, &end, 10);
	if (errno)
		return -EINVAL;
	*p = end;
	*out = v;
	return 0;
}

int ward_cg_read_u64(const char *dir, const char *file, uint64_t *out)
{
	char buf[64];
	long n = ward_cg_read(dir, file, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	const char *p = buf;
	if (parse_u64(&p, out) < 0 || (*p && *p != '\n'))
		return -EINVAL;
	return 0;
}

/* Finds "key N" at the start of a line of text. */
static int find_key(const char *text, const char *key, uint64_t *out)
{
	size_t klen = strlen(key);
	for (const char *line = text; line && *line; ) {
		if (strncmp(line, key, klen) == 0 && line[klen] == ' ') {
			const char *p = line + klen + 1;
			return parse_u64(&p, out);
		}
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return -ENOENT;
}

int ward_cg_read_key(const char *dir, const char *file, const char *key,
		     uint64_t *out)
{
	char buf[4096];
	long n = ward_cg_read(dir, file, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	return find_key(buf, key, out);
}

bool ward_cg_has_word(const char *words, const char *word)
{
	size_t wlen = strlen(word);
	for (const char *p = words; *p; ) {
		p += strspn(p, " \t\n");
		size_t n = strcspn(p, " \t\n");
		if (n == wlen && strncmp(p, word, n) == 0)
			return true;
		p += n;
	}
	return false;
}

int ward_cg_make_leaf(const struct ward_cgroup *cg, const char *hier, char *out,
		      size_t len, struct ward_error *err)
{
	char parent[PATH_MAX], leaf[PATH_MAX];
	if (ward_cg_join(parent, sizeof(parent), hier, "ward") < 0 ||
	    ward_cg_join(leaf, sizeof(leaf), parent, cg->name) < 0 || strlen(leaf) >= len)
		return ward_error_set(err, ENAMETOOLONG, "cgroup", "path too long under '%s'", hier);
	if (mkdir(parent, 0755) < 0 && errno != EEXIST) {
		int e = errno;
		ward_error_set(err, e, "cgroup", "unable to create '%s'", parent);
		ward_cg_hint(err, e);
		return -e;
	}
	/* out is filled only on success, so a failed create never removes a
	 * directory that it did not make (EEXIST). */
	if (mkdir(leaf, 0755) < 0) {
		int e = errno;
		ward_error_set(err, e, "cgroup", "unable to create '%s'", leaf);
		ward_cg_hint(err, e);
		return -e;
	}
	ward_strlcpy(out, leaf, len);
	return 0;
}

/* Fake tree only: the kernel's interface files are virtual and vanish with
 * rmdir; on a plain file system the ones the fake wrote must go first. */
static void unlink_fake_files(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		struct stat sb;
		if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(sb.st_mode))
			unlinkat(dirfd(d), de->d_name, 0);
	}
	closedir(d);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int ward_cg_remove_leaf(const struct ward_cgroup *cg, const char *dir,
			uint64_t deadline_ns)
{
	if (!dir[0])
		return 0;
	if (cg->fake)
		unlink_fake_files(dir);
	for (;;) {
		if (rmdir(dir) == 0 || errno == ENOENT)
			return 0;
		int e = errno;
		/* EBUSY: tasks are still exiting (v1 has no populated event). */
		if (e != EBUSY || ward_now_ns() >= deadline_ns)
			return -e;
		sleep_ms(10);
	}
}

int ward_cg_wait_empty(const char *dir, uint64_t deadline_ns)
{
	char path[PATH_MAX], buf[256];
	if (ward_cg_join(path, sizeof(path), dir, "cgroup.events") < 0)
		return -ENAMETOOLONG;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf[n] = '\0';
		uint64_t populated;
		if (find_key(buf, "populated", &populated) < 0)
			return -EINVAL;
		if (!populated)
			return 0;
		uint64_t now = ward_now_ns();
		if (now >= deadline_ns)
			return -ETIMEDOUT;
		/* The kernel raises POLLPRI when the file changes; the cap is
		 * only a safety net against a missed wake-up. */
		uint64_t ms = (deadline_ns - now) / NS_PER_MS + 1;
		struct pollfd pfd = { .fd = fd, .events = POLLPRI };
		poll(&pfd, 1, ms > 100 ? 100 : (int)ms);
	}
}

/* Reads dir/cgroup.procs into a malloc'ed array. Returns the count or -errno. */
static long read_procs(const char *dir, pid_t **out)
{
	char path[PATH_MAX];
	_cleanup_free_ char *text = NULL;
	if (ward_cg_join(path, sizeof(path), dir, "cgroup.procs") < 0)
		return -ENAMETOOLONG;
	int r = ward_read_file(path, 1u << 22, &text, NULL);
	if (r < 0)
		return r;
	size_t n = 0, cap = 0;
	pid_t *pids = NULL;
	for (const char *p = text; *p; ) {
		uint64_t v;
		p += strspn(p, " \n");
		if (!*p)
			break;
		if (parse_u64(&p, &v) < 0 || v == 0 || v > INT_MAX)
			break;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			pid_t *np = realloc(pids, cap * sizeof(*pids));
			if (!np) {
				free(pids);
				return -ENOMEM;
			}
			pids = np;
		}
		pids[n++] = (pid_t)v;
	}
	*out = pids;
	return (long)n;
}

/* One pass: SIGKILL what dir/cgroup.procs lists. A pid read from the list
 * may be recycled before we signal it, so each is pinned with a pidfd first,
 * and signalled only if the list still holds it afterwards: then the pidfd
 * is either that task or one that is already dead. Returns the count. */
static long signal_procs(const char *dir)
{
	_cleanup_free_ pid_t *pids = NULL;
	_cleanup_free_ pid_t *again = NULL;
	long n = read_procs(dir, &pids);
	if (n <= 0)
		return n;
	_cleanup_free_ int *fds = calloc((size_t)n, sizeof(*fds));
	if (!fds)
		return -ENOMEM;
	for (long i = 0; i < n; i++)
		fds[i] = pidfd_open(pids[i], 0);
	long m = read_procs(dir, &again);
	for (long i = 0; i < n; i++) {
		for (long j = 0; fds[i] >= 0 && j < m; j++) {
			if (again[j] == pids[i]) {
				pidfd_send_signal(fds[i], SIGKILL, NULL, 0);
				break;
			}
		}
		if (fds[i] >= 0)
			close(fds[i]);
	}
	return n;
}

int ward_cg_kill_procs(const char *dir, uint64_t deadline_ns)
{
	for (;;) {
		long n = signal_procs(dir);
		if (n == -ENOENT || n == 0)
			return 0;
		if (n < 0)
			return (int)n;
		if (ward_now_ns() >= deadline_ns)
			return -ETIMEDOUT;
		/* Killed tasks stay listed until they exit; forks may add more. */
		sleep_ms(5);
	}
}

int ward_cg_kill_procs_once(const char *dir)
{
	long n = signal_procs(dir);
	return n < 0 && n != -ENOENT ? (int)n : 0;
}

/* ---- front end --------------------------------------------------------- */

enum ward_cgroup_version ward_cgroup_detect(const char *root)
{
	char buf[512], dir[PATH_MAX];
	if (!root)
		root = DEFAULT_ROOT;
	if (ward_cg_read(root, "cgroup.controllers", buf, sizeof(buf)) >= 0 &&
	    ward_cg_has_word(buf, "memory") && ward_cg_has_word(buf, "pids"))
		return WARD_CGROUP_V2;
	static const char *const need[] = { "memory/cgroup.procs", "pids/cgroup.procs" };
	for (size_t i = 0; i < ARRAY_SIZE(need); i++) {
		if (ward_cg_join(dir, sizeof(dir), root, need[i]) < 0 || access(dir, F_OK) < 0)
			return WARD_CGROUP_NONE;
	}
	return WARD_CGROUP_V1;
}

/* A leaf name is one path component of safe characters. */
static bool valid_name(const char *s, size_t max)
{
	size_t n = strlen(s);
	if (n == 0 || n >= max || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

static void reset(struct ward_cgroup *cg)
{
	memset(cg, 0, sizeof(*cg));
	cg->unified_fd = -1;
}

int ward_cgroup_create(struct ward_cgroup *cg, const char *root, const char *name,
		       const struct ward_cgroup_limits *lim, struct ward_error *err)
{
	char probe[PATH_MAX];
	reset(cg);
	if (!root)
		root = DEFAULT_ROOT;
	if (ward_strlcpy(cg->root, root, sizeof(cg->root)) >= sizeof(cg->root))
		return ward_error_set(err, ENAMETOOLONG, "cgroup", "cgroup root too long: '%s'", root);
	if (!valid_name(name, sizeof(cg->name)))
		return ward_error_set(err, EINVAL, "cgroup", "invalid cgroup name '%s'", name);
	ward_strlcpy(cg->name, name, sizeof(cg->name));
	enum ward_cgroup_version v = ward_cgroup_detect(root);
	if (v == WARD_CGROUP_NONE) {
		ward_error_set(err, ENODEV, "cgroup",
			       "no cgroup v2 with the memory and pids controllers, nor v1 "
			       "memory and pids hierarchies, under '%s'", root);
		ward_error_hint(err, DELEGATE_HINT);
		return -ENODEV;
	}
	/* Which hierarchy decides fake mode: on a v1 host <root> is a tmpfs. */
	if (ward_cg_join(probe, sizeof(probe), root, v == WARD_CGROUP_V2 ? "." : "memory") < 0)
		return ward_error_set(err, ENAMETOOLONG, "cgroup", "cgroup root too long: '%s'", root);
	cg->fake = !ward_cg_on_cgroupfs(probe);
	cg->version = v;
	int r = v == WARD_CGROUP_V2 ? ward_cg_v2_create(cg, lim, err)
				    : ward_cg_v1_create(cg, lim, err);
	if (r < 0)
		ward_cgroup_destroy(cg, NULL);
	return r;
}

int ward_cgroup_clone_fd(const struct ward_cgroup *cg)
{
	return cg->version == WARD_CGROUP_NONE || cg->killed ? -1 : cg->unified_fd;
}

int ward_cgroup_attach(struct ward_cgroup *cg, pid_t pid, bool cloned_into,
		       struct ward_error *err)
{
	char num[24];
	/* memory first, so that every page the sandbox touches is charged to
	 * it; cpu and cpuacct are one directory when mounted together. */
	const char *dirs[] = {
		cg->memory, cg->pids, cg->cpu,
		strcmp(cg->cpuacct, cg->cpu) ? cg->cpuacct : "",
		cg->freezer, cloned_into ? "" : cg->unified,
	};
	if (pid <= 0)
		return ward_error_set(err, EINVAL, "cgroup", "invalid pid %d", (int)pid);
	ward_utoa((uint64_t)pid, num);
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		if (!dirs[i][0])
			continue;
		int r = ward_cg_write(cg, dirs[i], "cgroup.procs", num, err);
		if (r < 0)
			return r;
	}
	return 0;
}

int ward_cgroup_open_self_attach(const struct ward_cgroup *cg, int *fds, size_t max, size_t *n)
{
	const char *dirs[] = {
		cg->memory, cg->pids, cg->cpu,
		strcmp(cg->cpuacct, cg->cpu) ? cg->cpuacct : "", cg->freezer,
	};
	*n = 0;
	if (cg->version != WARD_CGROUP_V1 || cg->fake)
		return -EOPNOTSUPP;
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		char path[PATH_MAX];
		if (!dirs[i][0])
			continue;
		int fd = -1;
		if (*n < max && ward_cg_join(path, sizeof(path), dirs[i], "tasks") == 0)
			fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0) {
			int e = *n >= max ? E2BIG : errno;
			while (*n)
				close(fds[--*n]);
			return -e;
		}
		fds[(*n)++] = fd;
	}
	return 0;
}

int ward_cgroup_read_stats(const struct ward_cgroup *cg, struct ward_cgroup_stats *st)
{
	memset(st, 0, sizeof(*st));
	switch (cg->version) {
	case WARD_CGROUP_V2:
		return ward_cg_v2_read_stats(cg, st);
	case WARD_CGROUP_V1:
		return ward_cg_v1_read_stats(cg, st);
	default:
		return -ENODEV;
	}
}

static int kill_until(struct ward_cgroup *cg, uint64_t deadline_ns)
{
	cg->killed = true;
	switch (cg->version) {
	case WARD_CGROUP_V2:
		return ward_cg_v2_kill(cg, deadline_ns);
	case WARD_CGROUP_V1:
		return ward_cg_v1_kill(cg, deadline_ns);
	default:
		return 0;
	}
}

int ward_cgroup_kill(struct ward_cgroup *cg)
{
	return kill_until(cg, ward_now_ns() + WARD_CG_WAIT_MS * NS_PER_MS);
}

int ward_cgroup_destroy(struct ward_cgroup *cg, struct ward_error *err)
{
	/* A zeroed struct has version NONE; create sets unified_fd = -1 before
	 * anything else, so fd 0 is never closed by mistake. */
	if (cg->version == WARD_CGROUP_NONE)
		return 0;
	uint64_t deadline = ward_now_ns() + WARD_CG_WAIT_MS * NS_PER_MS;
	kill_until(cg, deadline);
	if (cg->unified[0])
		ward_cg_wait_empty(cg->unified, deadline);
	if (cg->unified_fd >= 0)
		close(take_fd(&cg->unified_fd));
	char *dirs[] = { cg->unified, cg->memory, cg->pids, cg->cpu, cg->cpuacct, cg->freezer };
	int first = 0;
	bool left = false;
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		int r = ward_cg_remove_leaf(cg, dirs[i], deadline);
		if (r < 0) {
			/* Keep the path so that a second call retries it. */
			if (!first)
				first = ward_error_set(err, -r, "cgroup", "unable to remove '%s'", dirs[i]);
			left = true;
			continue;
		}
		dirs[i][0] = '\0';
	}
	if (!left)
		reset(cg);
	return first;
}

/* ---- names and garbage collection ---------------------------------------- */

/* Start time of pid (0: this process) in clock ticks, /proc/<pid>/stat
 * field 22. comm (field 2) may hold spaces and ')', so count from the last
 * ')'. Returns 0 or -errno. */
static int read_starttime(pid_t pid, uint64_t *out)
{
	struct ward_proc_stat st;
	int r = ward_proc_stat(pid ? pid : WARD_PROC_SELF, &st);
	if (r == 0)
		*out = st.starttime;
	return r;
}

/* The inode of our pid namespace: pids in a name mean something only there. */
static int own_pidns(uint64_t *out)
{
	struct stat sb;
	if (stat("/proc/self/ns/pid", &sb) < 0)
		return -errno;
	*out = (uint64_t)sb.st_ino;
	return 0;
}

int ward_cgroup_make_name(char *buf, size_t len, const char *sandbox_id)
{
	char rnd[17];
	uint64_t start = 0, ns = 0;
	if (!sandbox_id) {
		unsigned char b[8];
		if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
			return errno ? -errno : -EIO;
		for (size_t i = 0; i < sizeof(b); i++)
			snprintf(rnd + 2 * i, 3, "%02x", b[i]);
		sandbox_id = rnd;
	}
	if (!valid_name(sandbox_id, 41))
		return -EINVAL;
	int r = read_starttime(0, &start);
	if (r == 0)
		r = own_pidns(&ns);
	if (r < 0)
		return r;
	int n = snprintf(buf, len, "ward-%d-%llu-%llu-%s", (int)getpid(),
			 (unsigned long long)start, (unsigned long long)ns, sandbox_id);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

/* "ward-<pid>-<start>-<pidns>-<id>" → pid, start, pidns. */
static bool parse_name(const char *name, pid_t *pid, uint64_t *start, uint64_t *ns)
{
	uint64_t v;
	const char *p = name;
	if (strncmp(p, "ward-", 5) != 0)
		return false;
	p += 5;
	if (parse_u64(&p, &v) < 0 || *p++ != '-' || v == 0 || v > INT_MAX)
		return false;
	*pid = (pid_t)v;
	if (parse_u64(&p, start) < 0 || *p++ != '-' ||
	    parse_u64(&p, ns) < 0 || *p++ != '-' || !*p)
		return false;
	return true;
}

/* Dead when /proc says so or the pid now belongs to a later process. A pid
 * hidden by hidepid (ENOENT, yet kill(0) finds it) or unreadable for any
 * other reason counts as alive: leaking a leaf beats killing a sandbox. */
static bool supervisor_alive(pid_t pid, uint64_t start)
{
	uint64_t now;
	int r = read_starttime(pid, &now);
	if (r == 0)
		return now == start;
	if (r == -ENOENT || r == -ESRCH)
		return !(kill(pid, 0) < 0 && errno == ESRCH);
	return true;
}

/* Where each hierarchy's leaf goes in struct ward_cgroup. "" is a pure v2
 * root, whose leaf is the unified one. */
static const struct {
	const char *hier;
	size_t off;
} gc_hiers[] = {
	{ ".", offsetof(struct ward_cgroup, unified) },
	{ "unified", offsetof(struct ward_cgroup, unified) },
	{ "memory", offsetof(struct ward_cgroup, memory) },
	{ "pids", offsetof(struct ward_cgroup, pids) },
	{ "cpu", offsetof(struct ward_cgroup, cpu) },
	{ "cpuacct", offsetof(struct ward_cgroup, cpuacct) },
	{ "freezer", offsetof(struct ward_cgroup, freezer) },
};

/* Rebuilds the struct of a dead supervisor's sandbox from what exists on
 * disk and destroys it. Returns 0 or -errno. */
static int reap(const char *root, const char *name, struct ward_error *err)
{
	struct ward_cgroup cg;
	reset(&cg);
	ward_strlcpy(cg.root, root, sizeof(cg.root));
	ward_strlcpy(cg.name, name, sizeof(cg.name));
	cg.version = WARD_CGROUP_V2;
	for (size_t i = 0; i < ARRAY_SIZE(gc_hiers); i++) {
		char leaf[PATH_MAX];
		struct stat sb;
		int n = snprintf(leaf, sizeof(leaf), "%s/%s/ward/%s", root, gc_hiers[i].hier, name);
		if (n < 0 || (size_t)n >= sizeof(leaf) || stat(leaf, &sb) < 0 || !S_ISDIR(sb.st_mode))
			continue;
		ward_strlcpy((char *)&cg + gc_hiers[i].off, leaf, PATH_MAX);
		if (i >= 1)
			cg.version = WARD_CGROUP_V1;
		cg.fake = !ward_cg_on_cgroupfs(leaf);
	}
	return ward_cgroup_destroy(&cg, err);
}

/* Adds the dead supervisors' leaf names found in dir to *names (deduped).
 * A supervisor of another pid namespace cannot be judged from here: its
 * pid means another process in ours, so its leaves are left alone. */
static int scan(const char *dir, uint64_t own_ns, char (**names)[96], size_t *n)
{
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
	struct dirent *de;
	int r = 0;
	while ((de = readdir(d)) != NULL) {
		pid_t pid;
		uint64_t start, ns;
		size_t i;
		if (strlen(de->d_name) >= 96 || !parse_name(de->d_name, &pid, &start, &ns) ||
		    ns != own_ns || supervisor_alive(pid, start))
			continue;
		for (i = 0; i < *n && strcmp((*names)[i], de->d_name); i++)
			;
		if (i < *n)
			continue;
		char (*nn)[96] = realloc(*names, (*n + 1) * sizeof(**names));
		if (!nn) {
			r = -ENOMEM;
			break;
		}
		*names = nn;
		ward_strlcpy(nn[(*n)++], de->d_name, 96);
	}
	closedir(d);
	return r;
}

int ward_cgroup_gc(const char *root, struct ward_error *err)
{
	_cleanup_free_ char (*names)[96] = NULL;
	size_t n = 0;
	uint64_t own_ns = 0;
	if (!root)
		root = DEFAULT_ROOT;
	int r = own_pidns(&own_ns);
	if (r < 0)
		return ward_error_set(err, -r, "cgroup", "unable to stat '/proc/self/ns/pid'");
	for (size_t i = 0; i < ARRAY_SIZE(gc_hiers); i++) {
		char dir[PATH_MAX];
		if (snprintf(dir, sizeof(dir), "%s/%s/ward", root, gc_hiers[i].hier) >= (int)sizeof(dir))
			continue;
		r = scan(dir, own_ns, &names, &n);
		if (r < 0)
			return ward_error_set(err, -r, "cgroup", "unable to list '%s'", dir);
	}
	int removed = 0, first = 0;
	for (size_t i = 0; i < n; i++) {
		r = reap(root, names[i], first ? NULL : err);
		if (r == 0)
			removed++;
		else if (!first)
			first = r;
	}
	return first ? first : removed;
}

int ward_cgroup_gc_every(const char *root, int dirfd, const char *stamp,
			 unsigned interval_s, struct ward_error *err)
{
	struct stat st;
	struct timespec now;
	if (dirfd >= 0 && fstatat(dirfd, stamp, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISREG(st.st_mode) && clock_gettime(CLOCK_REALTIME, &now) == 0 &&
	    st.st_mtim.tv_sec <= now.tv_sec &&
	    now.tv_sec - st.st_mtim.tv_sec < (time_t)interval_s)
		return 0;
	/* Stamped before the scan: concurrent runs that see it skip theirs
	 * rather than all scanning at once. */
	if (dirfd >= 0) {
		int fd = openat(dirfd, stamp, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd >= 0) {
			futimens(fd, NULL);
			close(fd);
		}
	}
	return ward_cgroup_gc(root, err);
}
