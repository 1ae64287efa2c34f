/* lib/layers/cgroup-v1.c — the cgroup v1 backend: one leaf per controller
 * hierarchy (<root>/<controller>/ward/<name>), plus a leaf in the cgroup2
 * tree at <root>/unified on hybrid hosts, for CLONE_INTO_CGROUP, cgroup.kill
 * and populated events.
 *
 * Parent-only. Never relies on memory.failcnt for OOM (it counts every
 * allocation that hit the limit, reclaimed or not), and never SIGKILLs a
 * frozen v1 task without thawing it: such a task does not die until thawed.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/util.h"
#include "cgroup.h"
#include "layers/cgroup-internal.h"

/* Whether <root>/<hier> is a mounted hierarchy (or a fake one). */
static bool hier_path(const struct ward_cgroup *cg, const char *hier, char *out, size_t len)
{
	char probe[PATH_MAX];
	return ward_cg_join(out, len, cg->root, hier) == 0 &&
	       ward_cg_join(probe, sizeof(probe), out, "cgroup.procs") == 0 &&
	       access(probe, F_OK) == 0;
}

/* Debian mounts cpu and cpuacct together as "cpu,cpuacct" with two
 * symlinks; other hosts mount them apart. One directory must not be made,
 * joined or removed twice under two names. */
static bool same_dir(const char *a, const char *b)
{
	struct stat sa, sb;
	return stat(a, &sa) == 0 && stat(b, &sb) == 0 &&
	       sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Makes the leaf in hierarchy `hier`. A missing hierarchy is an error only
 * when `required`; a best-effort one that fails is skipped (out stays ""). */
static int leaf(struct ward_cgroup *cg, const char *hier, char *out, size_t len,
		bool required, struct ward_error *err)
{
	char dir[PATH_MAX];
	if (!hier_path(cg, hier, dir, sizeof(dir))) {
		if (!required)
			return 0;
		ward_error_set(err, ENOENT, "cgroup", "no cgroup v1 %s hierarchy at '%s/%s'",
			       hier, cg->root, hier);
		ward_cg_hint(err, ENOENT);
		return -ENOENT;
	}
	int r = ward_cg_make_leaf(cg, dir, out, len, required ? err : NULL);
	return required ? r : 0;
}

static int make_leaves(struct ward_cgroup *cg, const struct ward_cgroup_limits *lim,
		       struct ward_error *err)
{
	char cpu[PATH_MAX], cpuacct[PATH_MAX], unified[PATH_MAX];
	int r;
	if ((r = leaf(cg, "memory", cg->memory, sizeof(cg->memory), true, err)) < 0 ||
	    (r = leaf(cg, "pids", cg->pids, sizeof(cg->pids), true, err)) < 0 ||
	    ((!lim->lean || lim->cpus_milli) &&
	     (r = leaf(cg, "cpu", cg->cpu, sizeof(cg->cpu), lim->cpus_milli != 0, err)) < 0))
		return r;
	if (lim->lean)
		return 0;
	if (hier_path(cg, "cpu", cpu, sizeof(cpu)) && hier_path(cg, "cpuacct", cpuacct, sizeof(cpuacct)) &&
	    same_dir(cpu, cpuacct))
		ward_strlcpy(cg->cpuacct, cg->cpu, sizeof(cg->cpuacct));
	else
		leaf(cg, "cpuacct", cg->cpuacct, sizeof(cg->cpuacct), false, NULL);
	/* Without a freezer, kill falls back to cgroup.kill or a kill loop. */
	leaf(cg, "freezer", cg->freezer, sizeof(cg->freezer), false, NULL);
	/* The hybrid cgroup2 tree has no controllers here, but gives the
	 * atomic spawn (CLONE_INTO_CGROUP), cgroup.kill and cgroup.events. */
	if (ward_cg_join(unified, sizeof(unified), cg->root, "unified/cgroup.controllers") == 0 &&
	    access(unified, F_OK) == 0) {
		leaf(cg, "unified", cg->unified, sizeof(cg->unified), false, NULL);
		if (cg->unified[0])
			cg->unified_fd = open(cg->unified, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	return 0;
}

static int apply_limits(const struct ward_cgroup *cg, const struct ward_cgroup_limits *lim,
			struct ward_error *err)
{
	char probe[PATH_MAX];
	int r;
	if (lim->memory) {
		if ((r = ward_cg_write_u64(cg, cg->memory, "memory.limit_in_bytes", lim->memory, err)) < 0)
			return r;
		/* memsw (RAM + swap) set to the same value turns swap off. It
		 * must come second: the kernel keeps memsw >= limit. Its files
		 * exist in every memory cgroup, the root included, exactly when
		 * swap accounting is on, so the root tells before the leaf can. */
		if (ward_cg_join(probe, sizeof(probe), cg->root, "memory/memory.memsw.limit_in_bytes") == 0 &&
		    access(probe, F_OK) == 0 &&
		    (r = ward_cg_write_u64(cg, cg->memory, "memory.memsw.limit_in_bytes",
					   lim->memory, err)) < 0)
			return r;
	}
	/* Best effort; the kernel may refuse it on some configurations. */
	ward_cg_write(cg, cg->memory, "memory.swappiness", "0", NULL);
	if (lim->pids && (r = ward_cg_write_u64(cg, cg->pids, "pids.max", lim->pids, err)) < 0)
		return r;
	if (lim->cpus_milli) {
		uint64_t quota = lim->cpus_milli * (WARD_CG_CPU_PERIOD_US / 1000);
		if (quota < WARD_CG_CPU_MIN_QUOTA_US)
			quota = WARD_CG_CPU_MIN_QUOTA_US;
		if ((r = ward_cg_write_u64(cg, cg->cpu, "cpu.cfs_period_us", WARD_CG_CPU_PERIOD_US, err)) < 0 ||
		    (r = ward_cg_write_u64(cg, cg->cpu, "cpu.cfs_quota_us", quota, err)) < 0)
			return r;
	}
	return 0;
}

int ward_cg_v1_create(struct ward_cgroup *cg, const struct ward_cgroup_limits *lim,
		      struct ward_error *err)
{
	int r = make_leaves(cg, lim, err);
	if (r < 0)
		return r;
	return apply_limits(cg, lim, err);
}

/* cpuacct.usage_user/_sys are in ns; the older cpuacct.stat is in USER_HZ
 * ticks; without cpuacct, the hybrid cgroup2 leaf still keeps cpu.stat. */
static void read_cpu(const struct ward_cgroup *cg, struct ward_cgroup_stats *st)
{
	uint64_t u, s;
	const char *d = cg->cpuacct;
	if (d[0] && ward_cg_read_u64(d, "cpuacct.usage_user", &u) == 0 &&
	    ward_cg_read_u64(d, "cpuacct.usage_sys", &s) == 0) {
		st->cpu_user_us = u / 1000;
		st->cpu_sys_us = s / 1000;
		return;
	}
	long hz = sysconf(_SC_CLK_TCK);
	if (d[0] && hz > 0 && ward_cg_read_key(d, "cpuacct.stat", "user", &u) == 0 &&
	    ward_cg_read_key(d, "cpuacct.stat", "system", &s) == 0) {
		st->cpu_user_us = u * 1000000 / (uint64_t)hz;
		st->cpu_sys_us = s * 1000000 / (uint64_t)hz;
		return;
	}
	if (cg->unified[0]) {
		ward_cg_read_key(cg->unified, "cpu.stat", "user_usec", &st->cpu_user_us);
		ward_cg_read_key(cg->unified, "cpu.stat", "system_usec", &st->cpu_sys_us);
	}
}

int ward_cg_v1_read_stats(const struct ward_cgroup *cg, struct ward_cgroup_stats *st)
{
	if (!cg->memory[0])
		return -ENOENT;
	int r = ward_cg_read_u64(cg->memory, "memory.max_usage_in_bytes", &st->memory_peak);
	if (r < 0)
		return r;
	/* The oom_kill line exists since 4.13. */
	ward_cg_read_key(cg->memory, "memory.oom_control", "oom_kill", &st->oom_kills);
	if (cg->pids[0]) {
		ward_cg_read_key(cg->pids, "pids.events", "max", &st->pids_max_events);
		ward_cg_read_u64(cg->pids, "pids.peak", &st->pids_peak);
	}
	read_cpu(cg, st);
	return 0;
}

/* FREEZING turns into FROZEN once every task has stopped. */
static int wait_frozen(const char *dir, uint64_t deadline_ns)
{
	char state[32];
	for (;;) {
		long n = ward_cg_read(dir, "freezer.state", state, sizeof(state));
		if (n < 0)
			return (int)n;
		if (strncmp(state, "FROZEN", 6) == 0)
			return 0;
		if (ward_now_ns() >= deadline_ns)
			return -ETIMEDOUT;
		struct timespec ts = { .tv_nsec = 1000000 };
		nanosleep(&ts, NULL);
	}
}

/* Frozen tasks cannot fork or exit, so one pass over cgroup.procs sees them
 * all; the SIGKILLs take effect at THAWED, which must come even on error,
 * or the tasks would stay frozen forever. */
static int freeze_kill_thaw(const struct ward_cgroup *cg, uint64_t deadline_ns)
{
	int r = ward_cg_write(cg, cg->freezer, "freezer.state", "FROZEN", NULL);
	if (r < 0)
		return r == -ENOENT ? 0 : r;
	int frozen = wait_frozen(cg->freezer, deadline_ns);
	/* Not all frozen (a task in D state): still kill what is there; the
	 * pidfd check in ward_cg_kill_procs_once keeps it safe. */
	r = ward_cg_kill_procs_once(cg->freezer);
	int t = ward_cg_write(cg, cg->freezer, "freezer.state", "THAWED", NULL);
	if (r == 0)
		r = frozen;
	if (r == 0)
		r = t;
	return r;
}

int ward_cg_v1_kill(const struct ward_cgroup *cg, uint64_t deadline_ns)
{
	int r = 0;
	if (cg->freezer[0])
		r = freeze_kill_thaw(cg, deadline_ns);
	if (cg->unified[0]) {
		/* Catches any task that escaped the freezer leaf. */
		int k = ward_cg_write(cg, cg->unified, "cgroup.kill", "1", NULL);
		if (k == -ENOENT)
			k = ward_cg_kill_procs(cg->unified, deadline_ns);
		if (r == 0)
			r = k;
	} else if (!cg->freezer[0]) {
		/* Neither freezer nor cgroup2: a loop that races forks, but
		 * pids.max bounds how many there can be. */
		r = ward_cg_kill_procs(cg->memory[0] ? cg->memory : cg->pids, deadline_ns);
	}
	return r;
}
