/* tests/unit/t-cgroup.c — the cgroup layer, against a fake cgroupfs and,
 * as root, against the kernel.
 *
 * The fake is a temp dir laid out like /sys/fs/cgroup (v2, or v1 hybrid
 * with Debian's cpu,cpuacct symlinks). Like the kernel, the test creates the
 * interface files of directories that exist before a call; in a leaf that
 * create makes, the library's fake mode creates every file it writes, so a
 * leaf's listing is exactly what create wrote. The fake's cgroup.procs never
 * empties by itself: the test truncates it when the kernel would.
 *
 * The kernel tests create only ward-<this pid>-... leaves and remove them;
 * they never run gc on the real tree, which may hold other users' leaves.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "tap.h"

#define MiB (1024ull * 1024)
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static char tmp[64];
static char buf[8192];

/* ---- fake tree helpers ------------------------------------------------- */

__attribute__((format(printf, 1, 2)))
static const char *P(const char *fmt, ...)
{
	static char paths[4][PATH_MAX];
	static int next;
	char *p = paths[next++ % 4];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p, PATH_MAX, fmt, ap);
	va_end(ap);
	return p;
}

/* A long-lived path under the temp dir (P's ring is reused quickly). */
static const char *R(const char *name)
{
	static char roots[16][PATH_MAX];
	static int next;
	char *p = roots[next++ % 16];
	snprintf(p, PATH_MAX, "%s/%s", tmp, name);
	return p;
}

static void put(const char *path, const char *content)
{
	FILE *f = fopen(path, "w");
	if (!f || fputs(content, f) < 0 || fclose(f) != 0)
		diag("cannot write %s: %s", path, strerror(errno));
}

static const char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return "(missing)";
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted, space-separated entries of dir: what create wrote into a leaf. */
static const char *listing(const char *dir)
{
	static char out[1024];
	char *names[64];
	size_t n = 0;
	DIR *d = opendir(dir);
	out[0] = '\0';
	if (!d)
		return "(missing)";
	struct dirent *de;
	while ((de = readdir(d)) && n < 64)
		if (de->d_name[0] != '.')
			names[n++] = strdup(de->d_name);
	closedir(d);
	qsort(names, n, sizeof(names[0]), cmp_str);
	for (size_t i = 0; i < n; i++) {
		size_t used = strlen(out);
		snprintf(out + used, sizeof(out) - used, "%s%s", i ? " " : "", names[i]);
		free(names[i]);
	}
	return out;
}

static bool exists(const char *path)
{
	struct stat sb;
	return lstat(path, &sb) == 0;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	remove(path);
	return 0;
}

static void rm_rf(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void mk(const char *path)
{
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		diag("cannot mkdir %s: %s", path, strerror(errno));
}

/* A cgroup2 root offering `controllers`, with a ward/ parent already made
 * by an earlier run (so its kernel files exist). */
static void fake_v2(const char *root, const char *controllers, const char *subtree)
{
	mk(root);
	put(P("%s/cgroup.controllers", root), controllers);
	put(P("%s/cgroup.subtree_control", root), subtree);
	put(P("%s/cgroup.procs", root), "");
	mk(P("%s/ward", root));
	put(P("%s/ward/cgroup.subtree_control", root), "");
}

/* A Debian-style v1 hybrid: cpu and cpuacct are symlinks to cpu,cpuacct. */
static void fake_v1(const char *root, bool memsw, bool extras)
{
	static const char *const hiers[] = { "memory", "pids", "cpu,cpuacct", "freezer", "unified" };
	mk(root);
	for (size_t i = 0; i < (extras ? 5u : 3u); i++) {
		mk(P("%s/%s", root, hiers[i]));
		put(P("%s/%s/cgroup.procs", root, hiers[i]), "");
	}
	if (symlink("cpu,cpuacct", P("%s/cpu", root)) < 0 ||
	    symlink("cpu,cpuacct", P("%s/cpuacct", root)) < 0)
		diag("symlink: %s", strerror(errno));
	if (memsw)
		put(P("%s/memory/memory.memsw.limit_in_bytes", root), "9223372036854771712\n");
	if (extras)
		put(P("%s/unified/cgroup.controllers", root), "");
}

static pid_t sleeper(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		for (;;)
			pause();
	}
	return pid;
}

static bool killed_by(pid_t pid, int sig)
{
	int status;
	return waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == sig;
}

static unsigned long long own_pidns(void)
{
	struct stat sb;
	return stat("/proc/self/ns/pid", &sb) == 0 ? (unsigned long long)sb.st_ino : 0;
}

/* Our start time, parsed independently of the library. */
static unsigned long long own_starttime(void)
{
	const char *s = strrchr(slurp("/proc/self/stat"), ')');
	unsigned long long v = 0;
	for (int field = 2; s && field < 22; field++)
		if ((s = strchr(s, ' ')))
			s++;
	if (s)
		sscanf(s, "%llu", &v);
	return v;
}

/* ---- names ------------------------------------------------------------- */

static void test_names(void)
{
	char name[96], want[96];
	snprintf(want, sizeof(want), "ward-%d-%llu-%llu-box.1", (int)getpid(), own_starttime(), own_pidns());
	is_int(ward_cgroup_make_name(name, sizeof(name), "box.1"), 0, "make_name: ok");
	is_str(name, want, "make_name: ward-<pid>-<starttime>-<pidns>-<id>");
	is_int(ward_cgroup_make_name(name, sizeof(name), "a/b"), -EINVAL, "make_name: '/' refused");
	is_int(ward_cgroup_make_name(name, sizeof(name), ""), -EINVAL, "make_name: empty id refused");
	is_int(ward_cgroup_make_name(name, 12, "box"), -ENAMETOOLONG, "make_name: short buffer");
	is_int(ward_cgroup_make_name(name, sizeof(name), NULL), 0, "make_name: random id");
	const char *id = strrchr(name, '-');
	ok(id && strlen(id + 1) == 16 && strspn(id + 1, "0123456789abcdef") == 16,
	   "make_name: random id is 16 hex digits (%s)", name);
}

/* ---- detect ------------------------------------------------------------ */

static void test_detect(void)
{
	fake_v2(R("d2"), "cpuset cpu io memory pids\n", "");
	fake_v2(R("d2n"), "cpu memory\n", "");
	fake_v1(R("d1"), true, true);
	mk(R("d0"));
	is_int(ward_cgroup_detect(R("d2")), WARD_CGROUP_V2, "detect: v2 root with memory+pids");
	is_int(ward_cgroup_detect(R("d2n")), WARD_CGROUP_NONE, "detect: v2 root without pids");
	is_int(ward_cgroup_detect(R("d1")), WARD_CGROUP_V1, "detect: v1 hybrid");
	is_int(ward_cgroup_detect(R("d0")), WARD_CGROUP_NONE, "detect: empty dir");
	is_int(ward_cgroup_detect(R("nope")), WARD_CGROUP_NONE, "detect: missing root");
}

/* ---- v2 on the fake ---------------------------------------------------- */

static void v2_check_create(const char *root, const struct ward_cgroup *cg)
{
	const char *leaf = cg->unified;
	is_int(cg->version, WARD_CGROUP_V2, "v2: version");
	ok(cg->fake, "v2: fake mode detected (not on cgroupfs)");
	is_str(leaf, P("%s/ward/n2", root), "v2: leaf path");
	ok(ward_cgroup_clone_fd(cg) >= 0, "v2: clone fd open");
	is_str(slurp(P("%s/cgroup.subtree_control", root)), "+pids +cpu",
	       "v2: root enables only the missing controllers, in one write");
	is_str(slurp(P("%s/ward/cgroup.subtree_control", root)), "+memory +pids +cpu",
	       "v2: ward/ enables memory, pids, cpu");
	is_str(listing(leaf), "cpu.max memory.max memory.oom.group memory.swap.max pids.max",
	       "v2: exactly these files written");
	is_str(slurp(P("%s/memory.max", leaf)), "67108864", "v2: memory.max");
	is_str(slurp(P("%s/memory.swap.max", leaf)), "0", "v2: swap off");
	is_str(slurp(P("%s/memory.oom.group", leaf)), "1", "v2: oom.group");
	is_str(slurp(P("%s/pids.max", leaf)), "32", "v2: pids.max");
	is_str(slurp(P("%s/cpu.max", leaf)), "150000 100000", "v2: cpu.max from 1500 milli");
}

static void v2_check_stats(const char *leaf, struct ward_cgroup *cg)
{
	struct ward_cgroup_stats st;
	put(P("%s/memory.peak", leaf), "33554432\n");
	put(P("%s/memory.events", leaf), "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 1\n");
	put(P("%s/pids.events", leaf), "max 3\n");
	put(P("%s/pids.peak", leaf), "16\n");
	put(P("%s/cpu.stat", leaf), "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 0\n");
	is_int(ward_cgroup_read_stats(cg, &st), 0, "v2 stats: ok");
	is_int(st.memory_peak, 32 * MiB, "v2 stats: memory.peak");
	is_int(st.oom_kills, 1, "v2 stats: oom_kill, not oom or max");
	is_int(st.pids_max_events, 3, "v2 stats: pids.events max");
	is_int(st.pids_peak, 16, "v2 stats: pids.peak");
	is_int(st.cpu_user_us, 1000, "v2 stats: user_usec");
	is_int(st.cpu_sys_us, 500, "v2 stats: system_usec");
	unlink(P("%s/memory.peak", leaf));
	put(P("%s/memory.current", leaf), "1234\n");
	ward_cgroup_read_stats(cg, &st);
	is_int(st.memory_peak, 1234, "v2 stats: memory.current without memory.peak");
}

static void test_v2_fake(void)
{
	const char *root = R("v2");
	char leaf[PATH_MAX];
	struct ward_cgroup cg;
	struct ward_error err;
	struct ward_cgroup_limits lim = { .memory = 64 * MiB, .pids = 32, .cpus_milli = 1500 };
	fake_v2(root, "cpu memory pids\n", "memory\n");
	if (!ok(ward_cgroup_create(&cg, root, "n2", &lim, &err) == 0, "v2: create"))
		return diag("%s", err.message);
	v2_check_create(root, &cg);
	snprintf(leaf, sizeof(leaf), "%s", cg.unified);
	is_int(ward_cgroup_attach(&cg, 4242, false, &err), 0, "v2: attach");
	is_str(slurp(P("%s/cgroup.procs", leaf)), "4242", "v2: attach writes cgroup.procs");
	unlink(P("%s/cgroup.procs", leaf));
	ward_cgroup_attach(&cg, 4243, true, &err);
	ok(!exists(P("%s/cgroup.procs", leaf)), "v2: attach after CLONE_INTO_CGROUP writes nothing");
	v2_check_stats(leaf, &cg);
	is_int(ward_cgroup_kill(&cg), 0, "v2: kill");
	is_str(slurp(P("%s/cgroup.kill", leaf)), "1", "v2: kill writes cgroup.kill");
	put(P("%s/cgroup.events", leaf), "populated 0\nfrozen 0\n");
	is_int(ward_cgroup_destroy(&cg, &err), 0, "v2: destroy");
	ok(!exists(leaf), "v2: leaf removed");
	ok(exists(P("%s/ward", root)), "v2: shared ward/ parent kept");
	ok(cg.version == WARD_CGROUP_NONE && cg.unified_fd == -1, "v2: struct reset");
	is_int(ward_cgroup_destroy(&cg, &err), 0, "v2: second destroy is a no-op");
}

static void test_v2_errors(void)
{
	const char *root = R("v2e");
	struct ward_cgroup cg;
	struct ward_error err;
	char msg[1024];
	struct ward_cgroup_limits lim = { .memory = 64 * MiB, .pids = 32, .cpus_milli = 500 };

	fake_v2(root, "memory pids\n", "");
	is_int(ward_cgroup_create(&cg, root, "e1", &lim, &err), -EOPNOTSUPP, "v2: cpu limit without cpu controller");
	has_str(err.message, "cpu controller", "v2: ... says which controller");
	ok(!exists(P("%s/ward/e1", root)), "v2: ... leaves nothing");

	lim.cpus_milli = 0;
	mk(P("%s/ward/taken", root));
	put(P("%s/ward/taken/keep", root), "x");
	is_int(ward_cgroup_create(&cg, root, "taken", &lim, &err), -EEXIST, "v2: existing leaf refused");
	ok(exists(P("%s/ward/taken/keep", root)), "v2: ... and not removed");
	is_int(ward_cgroup_create(&cg, root, "../x", &lim, &err), -EINVAL, "v2: name with '/' refused");

	is_int(ward_cgroup_create(&cg, R("nope"), "n", &lim, &err), -ENODEV, "missing root: ENODEV");
	has_str(ward_error_format(&err, msg, sizeof(msg)), "Delegate=yes", "missing root: hint names delegation");
	is_int(ward_cgroup_destroy(&cg, &err), 0, "destroy after failed create");
}

/* ---- v1 on the fake ---------------------------------------------------- */

static void v1_check_create(const char *root, const struct ward_cgroup *cg)
{
	is_int(cg->version, WARD_CGROUP_V1, "v1: version");
	is_str(cg->memory, P("%s/memory/ward/n1", root), "v1: memory leaf");
	is_str(cg->cpu, P("%s/cpu/ward/n1", root), "v1: cpu leaf");
	is_str(cg->cpuacct, cg->cpu, "v1: cpu,cpuacct is one leaf");
	is_str(cg->unified, P("%s/unified/ward/n1", root), "v1: unified leaf on a hybrid");
	ok(ward_cgroup_clone_fd(cg) >= 0, "v1: clone fd is the unified leaf");
	is_str(listing(cg->memory), "memory.limit_in_bytes memory.memsw.limit_in_bytes memory.swappiness",
	       "v1: memory files written");
	is_str(slurp(P("%s/memory.limit_in_bytes", cg->memory)), "33554432", "v1: limit_in_bytes");
	is_str(slurp(P("%s/memory.memsw.limit_in_bytes", cg->memory)), "33554432", "v1: memsw = limit");
	is_str(slurp(P("%s/memory.swappiness", cg->memory)), "0", "v1: swappiness 0");
	is_str(listing(cg->pids), "pids.max", "v1: pids files written");
	is_str(slurp(P("%s/pids.max", cg->pids)), "16", "v1: pids.max");
	is_str(listing(cg->cpu), "cpu.cfs_period_us cpu.cfs_quota_us", "v1: cpu files written");
	is_str(slurp(P("%s/cpu.cfs_period_us", cg->cpu)), "100000", "v1: cfs period");
	is_str(slurp(P("%s/cpu.cfs_quota_us", cg->cpu)), "25000", "v1: cfs quota from 250 milli");
	is_str(listing(cg->freezer), "", "v1: freezer untouched");
	is_str(listing(cg->unified), "", "v1: unified untouched");
}

static void v1_check_stats(struct ward_cgroup *cg)
{
	struct ward_cgroup_stats st;
	put(P("%s/memory.max_usage_in_bytes", cg->memory), "33554432\n");
	put(P("%s/memory.oom_control", cg->memory), "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
	put(P("%s/memory.failcnt", cg->memory), "99\n");
	put(P("%s/pids.events", cg->pids), "max 5\n");
	put(P("%s/pids.peak", cg->pids), "16\n");
	put(P("%s/cpuacct.stat", cg->cpuacct), "user 150\nsystem 25\n");
	is_int(ward_cgroup_read_stats(cg, &st), 0, "v1 stats: ok");
	is_int(st.memory_peak, 32 * MiB, "v1 stats: max_usage_in_bytes");
	is_int(st.oom_kills, 2, "v1 stats: oom_control oom_kill (not failcnt)");
	is_int(st.pids_max_events, 5, "v1 stats: pids.events max");
	is_int(st.pids_peak, 16, "v1 stats: pids.peak");
	long hz = sysconf(_SC_CLK_TCK);
	is_int(st.cpu_user_us, 150 * 1000000 / hz, "v1 stats: cpuacct.stat user ticks");
	is_int(st.cpu_sys_us, 25 * 1000000 / hz, "v1 stats: cpuacct.stat system ticks");
	put(P("%s/cpuacct.usage_user", cg->cpuacct), "2000000\n");
	put(P("%s/cpuacct.usage_sys", cg->cpuacct), "1000000\n");
	ward_cgroup_read_stats(cg, &st);
	ok(st.cpu_user_us == 2000 && st.cpu_sys_us == 1000, "v1 stats: cpuacct.usage_* in ns preferred");
}

/* Freeze, SIGKILL, thaw on the fake: the listed pid is our own sleeper. */
static void v1_check_kill(struct ward_cgroup *cg)
{
	struct ward_error err;
	pid_t pid = sleeper();
	is_int(ward_cgroup_attach(cg, pid, true, &err), 0, "v1: attach");
	char want[16];
	snprintf(want, sizeof(want), "%d", (int)pid);
	is_str(slurp(P("%s/cgroup.procs", cg->memory)), want, "v1: attach joins memory");
	is_str(slurp(P("%s/cgroup.procs", cg->freezer)), want, "v1: attach joins freezer");
	ok(!exists(P("%s/cgroup.procs", cg->unified)), "v1: attach skips unified when cloned into");
	is_int(ward_cgroup_kill(cg), 0, "v1: kill");
	ok(killed_by(pid, SIGKILL), "v1: kill SIGKILLs the frozen task");
	is_str(slurp(P("%s/freezer.state", cg->freezer)), "THAWED", "v1: freezer thawed after the kill");
	is_str(slurp(P("%s/cgroup.kill", cg->unified)), "1", "v1: cgroup.kill on the unified leaf too");
	/* The kernel drops dead tasks from cgroup.procs; the fake cannot. */
	const char *dirs[] = { cg->memory, cg->pids, cg->cpu, cg->freezer };
	for (size_t i = 0; i < 4; i++)
		put(P("%s/cgroup.procs", dirs[i]), "");
}

static void test_v1_fake(void)
{
	const char *root = R("v1");
	struct ward_cgroup cg;
	struct ward_error err;
	struct ward_cgroup_limits lim = { .memory = 32 * MiB, .pids = 16, .cpus_milli = 250 };
	fake_v1(root, true, true);
	if (!ok(ward_cgroup_create(&cg, root, "n1", &lim, &err) == 0, "v1: create"))
		return diag("%s", err.message);
	v1_check_create(root, &cg);
	v1_check_stats(&cg);
	v1_check_kill(&cg);
	struct ward_cgroup saved = cg;
	is_int(ward_cgroup_destroy(&cg, &err), 0, "v1: destroy");
	ok(!exists(saved.memory) && !exists(saved.pids) && !exists(saved.cpu) &&
	   !exists(saved.freezer) && !exists(saved.unified), "v1: every leaf removed");
	ok(exists(P("%s/memory/ward", root)), "v1: shared ward/ parents kept");
}

/* No memsw (swap accounting off), no freezer, no unified tree. */
static void test_v1_minimal(void)
{
	const char *root = R("v1m");
	struct ward_cgroup cg;
	struct ward_error err;
	struct ward_cgroup_limits lim = { .memory = 32 * MiB };
	fake_v1(root, false, false);
	if (!ok(ward_cgroup_create(&cg, root, "m", &lim, &err) == 0, "v1 minimal: create"))
		return diag("%s", err.message);
	is_str(listing(cg.memory), "memory.limit_in_bytes memory.swappiness", "v1 minimal: no memsw file written");
	ok(!cg.freezer[0] && !cg.unified[0], "v1 minimal: no freezer or unified leaf");
	is_int(ward_cgroup_clone_fd(&cg), -1, "v1 minimal: no clone fd, attach instead");
	is_int(ward_cgroup_destroy(&cg, &err), 0, "v1 minimal: destroy (kill loop on empty procs)");
}

/* ---- gc on the fake ---------------------------------------------------- */

static void gc_populate(const char *root, const char *const *names, size_t n)
{
	struct ward_cgroup_limits lim = { .memory = 32 * MiB, .pids = 8 };
	for (size_t i = 0; i < n; i++) {
		struct ward_cgroup cg;
		struct ward_error err;
		if (ward_cgroup_create(&cg, root, names[i], &lim, &err) < 0)
			diag("gc setup: %s", err.message);
		if (cg.unified_fd >= 0)
			close(cg.unified_fd);
	}
}

/* live: this process. stale: our pid with another start time (recycled).
 * gone: a pid above pid_max. alien: gone, but from another pid namespace,
 * where that pid may well be alive. */
static void test_gc(const char *root, const char *where)
{
	char live[96], stale[96], gone[96], alien[96], other[PATH_MAX];
	unsigned long long start = own_starttime(), ns = own_pidns();
	long pid_max = strtol(slurp("/proc/sys/kernel/pid_max"), NULL, 10);
	ward_cgroup_make_name(live, sizeof(live), "live");
	snprintf(stale, sizeof(stale), "ward-%d-%llu-%llu-stale", (int)getpid(), start + 1, ns);
	snprintf(gone, sizeof(gone), "ward-%ld-%llu-%llu-gone", pid_max, start, ns);
	snprintf(alien, sizeof(alien), "ward-%ld-%llu-%llu-alien", pid_max, start, ns + 1);
	const char *const names[] = { live, stale, gone, alien };
	gc_populate(root, names, ARRAY_SIZE(names));
	const char *mem = ward_cgroup_detect(root) == WARD_CGROUP_V1 ? "memory/ward" : "ward";
	snprintf(other, sizeof(other), "%s/%s/ward-x-1-2-y", root, mem);
	mk(other);
	mk(P("%s/%s/not-ours", root, mem));

	struct ward_error err;
	is_int(ward_cgroup_gc(root, &err), 2, "gc %s: two dead supervisors' sandboxes removed", where);
	ok(exists(P("%s/%s/%s", root, mem, live)), "gc %s: live supervisor's leaf kept", where);
	ok(!exists(P("%s/%s/%s", root, mem, stale)), "gc %s: recycled pid (start time differs) removed", where);
	ok(!exists(P("%s/%s/%s", root, mem, gone)), "gc %s: vanished pid removed", where);
	ok(exists(P("%s/%s/%s", root, mem, alien)), "gc %s: other pid namespace's leaf kept", where);
	if (!strcmp(mem, "memory/ward"))
		ok(!exists(P("%s/pids/ward/%s", root, stale)) && !exists(P("%s/unified/ward/%s", root, gone)) &&
		   exists(P("%s/freezer/ward/%s", root, live)), "gc %s: every hierarchy handled", where);
	ok(exists(other) && exists(P("%s/%s/not-ours", root, mem)), "gc %s: unparsable names untouched", where);
	is_int(ward_cgroup_gc(root, &err), 0, "gc %s: nothing more to do", where);
}

static void test_gc_fake(void)
{
	const char *r2 = R("gc2");
	fake_v2(r2, "cpu memory pids\n", "");
	test_gc(r2, "v2");
	const char *r1 = R("gc1");
	fake_v1(r1, true, true);
	test_gc(r1, "v1");
}

/* ---- the kernel ---------------------------------------------------------- */

/* Each scenario gets a fresh leaf, as each sandbox does. A leaf must not be
 * reused after a kill anyway: on 6.14+ kernels, every CLONE_INTO_CGROUP
 * child of a cgroup that has seen cgroup.kill is SIGKILLed at birth
 * (kill_seq is sampled from the parent's cgroup, compared with the
 * target's). */

struct spawned {
	pid_t pid;
	bool cloned;       /* through CLONE_INTO_CGROUP */
	bool ready;        /* it reached fn alive */
};

/* Starts fn in a child that waits on a pipe until it has joined every
 * hierarchy, so it runs no code outside the sandbox's cgroup; then waits
 * until the child reports that it is running. */
static struct spawned spawn(struct ward_cgroup *cg, int (*fn)(void))
{
	struct spawned s = { -1, false, false };
	struct ward_error err;
	int go[2], rdy[2];
	char c;
	if (pipe2(go, O_CLOEXEC) < 0 || pipe2(rdy, O_CLOEXEC) < 0)
		return s;
	int fd = ward_cgroup_clone_fd(cg);
	if (fd >= 0) {
		struct clone_args ca;
		memset(&ca, 0, sizeof(ca));
		ca.flags = CLONE_INTO_CGROUP;
		ca.exit_signal = SIGCHLD;
		ca.cgroup = (uint64_t)fd;
		s.pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
		s.cloned = s.pid >= 0;
	}
	if (!s.cloned)
		s.pid = fork();
	if (s.pid == 0) {
		if (read(go[0], &c, 1) != 1 || write(rdy[1], "r", 1) != 1)
			_exit(99);
		_exit(fn());
	}
	close(go[0]);
	close(rdy[1]);
	if (s.pid > 0 && ward_cgroup_attach(cg, s.pid, s.cloned, &err) < 0)
		diag("attach: %s", err.message);
	if (write(go[1], "g", 1) != 1)
		diag("spawn: the child died before it was released: %s", strerror(errno));
	s.ready = read(rdy[0], &c, 1) == 1;
	close(go[1]);
	close(rdy[0]);
	return s;
}

/* Touches 64 MiB, twice the limit. */
static int hog(void)
{
	size_t len = 64 * MiB;
	volatile char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 2;
	for (size_t i = 0; i < len; i += 4096)
		m[i] = 1;
	return 0;
}

/* Forks until pids.max says no; the children sleep. Exits with the count. */
static int forker(void)
{
	int n = 0;
	for (; n < 64; n++) {
		pid_t pid = fork();
		if (pid < 0)
			return errno == EAGAIN ? n : 100;
		if (pid == 0) {
			for (;;)
				pause();
		}
	}
	return n;
}

static int sleepy(void)
{
	for (;;)
		pause();
	return 0;
}

/* Reaps orphans handed to us as subreaper; returns how many died of sig. */
static int reap_all(int sig, int want)
{
	int n = 0, killed = 0;
	for (int tries = 0; tries < 500 && n < want; tries++) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);
		if (pid > 0) {
			n++;
			killed += WIFSIGNALED(status) && WTERMSIG(status) == sig;
			continue;
		}
		if (pid < 0)
			break;
		struct timespec ts = { 0, 10 * 1000000L };
		nanosleep(&ts, NULL);
	}
	return killed;
}

static bool in_cgroup(pid_t pid, const char *name)
{
	return strstr(slurp(P("/proc/%d/cgroup", (int)pid)), name) != NULL;
}

static bool still_running(pid_t pid)
{
	int status;
	return waitpid(pid, &status, WNOHANG) == 0;
}

static const struct ward_cgroup_limits real_lim = { .memory = 32 * MiB, .pids = 16, .cpus_milli = 500 };

/* Creates a fresh leaf for one scenario; false (with a skip or a failure
 * already reported) when it cannot. */
static bool real_create(struct ward_cgroup *cg, const char *root, const char *id, bool *denied)
{
	struct ward_error err;
	char name[96], msg[1024];
	ward_cgroup_make_name(name, sizeof(name), id);
	int r = ward_cgroup_create(cg, root, name, &real_lim, &err);
	if (r == -EACCES || r == -EPERM || r == -EROFS) {
		*denied = true;
		return false;
	}
	if (!ok(r == 0, "real: create %s", name))
		diag("%s", ward_error_format(&err, msg, sizeof(msg)));
	return r == 0;
}

/* Destroys and checks that not a directory is left. */
static void real_gone(struct ward_cgroup *cg, const char *what)
{
	struct ward_error err;
	struct ward_cgroup saved = *cg;
	const char *dirs[] = { saved.unified, saved.memory, saved.pids, saved.cpu, saved.cpuacct, saved.freezer };
	int r = ward_cgroup_destroy(cg, &err);
	bool gone = r == 0;
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		if (dirs[i][0] && exists(dirs[i])) {
			diag("left behind: %s", dirs[i]);
			gone = false;
		}
	}
	ok(gone, "real: destroy after %s leaves no directory (%d)", what, r);
}

static void real_oom(struct ward_cgroup *cg, enum ward_cgroup_version v)
{
	struct ward_cgroup_stats st;
	if (v == WARD_CGROUP_V2)
		is_str(slurp(P("%s/cpu.max", cg->unified)), "50000 100000\n", "real: cpu.max");
	else
		is_str(slurp(P("%s/cpu.cfs_quota_us", cg->cpu)), "50000\n", "real: cfs quota");
	struct spawned s = spawn(cg, hog);
	ok(s.ready, "real: hog started (cloned into: %s)", s.cloned ? "yes" : "no");
	if (v == WARD_CGROUP_V1)
		ok(in_cgroup(s.pid, P("memory:/ward/%s", cg->name)), "real: child in the memory leaf");
	if (s.cloned)
		ok(in_cgroup(s.pid, P("0::/ward/%s", cg->name)), "real: child cloned into the unified leaf");
	ok(killed_by(s.pid, SIGKILL), "real: 64M in a 32M cgroup is OOM-killed");
	is_int(ward_cgroup_read_stats(cg, &st), 0, "real: read_stats");
	ok(st.oom_kills >= 1, "real: oom_kills = %llu", (unsigned long long)st.oom_kills);
	ok(st.memory_peak > 24 * MiB && st.memory_peak <= 33 * MiB,
	   "real: memory_peak near 32M (%llu)", (unsigned long long)st.memory_peak);
}

static void real_pids(struct ward_cgroup *cg)
{
	struct ward_cgroup_stats st;
	int status = 0;
	struct spawned s = spawn(cg, forker);
	waitpid(s.pid, &status, 0);
	ok(s.ready && WIFEXITED(status) && WEXITSTATUS(status) == 15,
	   "real: 15 forks fit under pids.max 16 (status %#x)", status);
	ward_cgroup_read_stats(cg, &st);
	ok(st.pids_max_events >= 1, "real: pids_max_events = %llu", (unsigned long long)st.pids_max_events);
	ok(st.pids_peak == 0 || st.pids_peak == 16, "real: pids_peak = %llu", (unsigned long long)st.pids_peak);
	is_int(ward_cgroup_kill(cg), 0, "real: kill the orphans");
	is_int(reap_all(SIGKILL, 15), 15, "real: all 15 orphans SIGKILLed");
}

/* Two sleepers: one cloned into the unified leaf as ward does, one only in
 * the v1 hierarchies (cloned_into lies), which only the freezer path
 * reaches. */
static void real_kill(struct ward_cgroup *cg, enum ward_cgroup_version v)
{
	struct ward_error err;
	struct spawned s = spawn(cg, sleepy);
	pid_t v1only = sleeper();
	is_int(ward_cgroup_attach(cg, v1only, v == WARD_CGROUP_V1, &err), 0, "real: attach a forked sleeper");
	ok(s.ready && still_running(s.pid) && still_running(v1only), "real: sleepers running before the kill");
	is_int(ward_cgroup_kill(cg), 0, "real: kill");
	ok(killed_by(s.pid, SIGKILL), "real: sleeping task SIGKILLed");
	ok(killed_by(v1only, SIGKILL), "real: task outside the unified leaf SIGKILLed too");
	if (v == WARD_CGROUP_V1)
		is_str(slurp(P("%s/freezer.state", cg->freezer)), "THAWED\n", "real: freezer thawed after the kill");
}

static void real_destroy_busy(struct ward_cgroup *cg)
{
	struct spawned s = spawn(cg, sleepy);
	ok(s.ready && still_running(s.pid), "real: sleeper running before destroy");
	real_gone(cg, "a live task");
	ok(killed_by(s.pid, SIGKILL), "real: destroy killed it");
}

static void real_write_error(const char *root)
{
	struct ward_cgroup cg;
	struct ward_error err;
	char name[96];
	struct ward_cgroup_limits lim = { .memory = 32 * MiB, .pids = 16, .cpus_milli = 1000000000000ull };
	ward_cgroup_make_name(name, sizeof(name), "t-err");
	int r = ward_cgroup_create(&cg, root, name, &lim, &err);
	ok(r < 0, "real: absurd cpu quota refused (%d)", r);
	has_str(err.message, "unable to write '100000000000000' to '", "real: error names value and file");
	ok(!exists(P("%s/memory/ward/%s", root, name)) && !exists(P("%s/ward/%s", root, name)),
	   "real: failed create leaves nothing");
}

static void real_suite(const char *root, enum ward_cgroup_version v, const char *label)
{
	struct ward_cgroup cg;
	bool denied = false;
	if (!real_create(&cg, root, "t-oom", &denied)) {
		if (denied)
			skip("real %s: this process may not create cgroups (unshare -r?)", label);
		return;
	}
	ok(!cg.fake, "real %s: not in fake mode", label);
	real_oom(&cg, v);
	real_gone(&cg, "an OOM kill");
	if (real_create(&cg, root, "t-pids", &denied)) {
		real_pids(&cg);
		real_gone(&cg, "pids.max");
	}
	if (real_create(&cg, root, "t-kill", &denied)) {
		real_kill(&cg, v);
		ok(ward_cgroup_clone_fd(&cg) == -1, "real: no clone fd once killed (kernel kill_seq trap)");
		real_gone(&cg, "a kill");
	}
	if (real_create(&cg, root, "t-busy", &denied))
		real_destroy_busy(&cg);
	real_write_error(root);
}

static void test_real(void)
{
	const char *root = "/sys/fs/cgroup";
	if (geteuid() != 0) {
		skip("real cgroup tests need root (or a delegated v2 subtree, not supported yet)");
		return;
	}
	enum ward_cgroup_version v = ward_cgroup_detect(root);
	/* Orphans of the pids test must come back to us, not to pid 1; a
	 * child that dies early must fail a test, not kill us with SIGPIPE. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	struct sigaction sa = { .sa_handler = SIG_IGN };
	sigaction(SIGPIPE, &sa, NULL);
	if (v == WARD_CGROUP_V2)
		real_suite(root, v, "v2");
	else
		skip("cgroup v2 controllers not available on this host (%s)",
		     v == WARD_CGROUP_V1 ? "v1 hybrid" : "no cgroup");
	if (v == WARD_CGROUP_V1)
		real_suite(root, v, "v1");
	else
		skip("cgroup v1 memory and pids hierarchies not available on this host");
}

int main(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/t-cgroup-XXXXXX");
	if (!mkdtemp(tmp)) {
		printf("Bail out! mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	test_names();
	test_detect();
	test_v2_fake();
	test_v2_errors();
	test_v1_fake();
	test_v1_minimal();
	test_gc_fake();
	rm_rf(tmp);
	test_real();
	return tap_done();
}
