/* lib/layers/cgroup-v2.c — the cgroup v2 backend: <root>/ward/<name> with
 * the memory, pids and cpu controllers enabled down the chain.
 *
 * Parent-only. It writes only to <root>/cgroup.subtree_control (to enable
 * controllers, never to disable them), to the shared <root>/ward parent and
 * to the sandbox's own leaf.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/util.h"
#include "cgroup.h"
#include "layers/cgroup-internal.h"

/* Enables in dir/cgroup.subtree_control the controllers of `avail` that it
 * lacks, in one write: the kernel applies a list atomically. Only cgroups
 * without processes of their own may do this ("no internal processes"); the
 * hierarchy root is exempt, and ward/ never holds a process. */
static int enable_controllers(const struct ward_cgroup *cg, const char *dir,
			      const char *avail, struct ward_error *err)
{
	static const char *const want[] = { "memory", "pids", "cpu" };
	char cur[512], req[64] = "";
	long n = ward_cg_read(dir, "cgroup.subtree_control", cur, sizeof(cur));
	if (n < 0)
		return ward_error_set(err, (int)-n, "cgroup",
				      "unable to read '%s/cgroup.subtree_control'", dir);
	for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
		if (!ward_cg_has_word(avail, want[i]) || ward_cg_has_word(cur, want[i]))
			continue;
		if (req[0])
			ward_strlcat(req, " ", sizeof(req));
		ward_strlcat(req, "+", sizeof(req));
		ward_strlcat(req, want[i], sizeof(req));
	}
	if (!req[0])
		return 0;
	int r = ward_cg_write(cg, dir, "cgroup.subtree_control", req, err);
	if (r == -EBUSY)
		ward_error_hint(err, "this cgroup holds processes, so v2 cannot enable controllers "
				     "for its children: move them to a child cgroup first");
	return r;
}

/* memory.swap.max and memory.oom.group may be missing (no swap accounting,
 * kernels before 4.19): nothing to enforce then, so ENOENT is not fatal. */
static int write_optional(const struct ward_cgroup *cg, const char *file,
			  const char *value, struct ward_error *err)
{
	int r = ward_cg_write(cg, cg->unified, file, value, NULL);
	if (r == 0 || r == -ENOENT)
		return 0;
	return ward_cg_write(cg, cg->unified, file, value, err);
}

static int apply_limits(const struct ward_cgroup *cg, const struct ward_cgroup_limits *lim,
			struct ward_error *err)
{
	const char *d = cg->unified;
	int r;
	if (lim->memory && (r = ward_cg_write_u64(cg, d, "memory.max", lim->memory, err)) < 0)
		return r;
	/* Swap is always off: a sandbox's memory limit must mean RAM. */
	if ((r = write_optional(cg, "memory.swap.max", "0", err)) < 0)
		return r;
	/* An OOM kill takes the whole sandbox, not one random task of it. */
	if ((r = write_optional(cg, "memory.oom.group", "1", err)) < 0)
		return r;
	if (lim->pids && (r = ward_cg_write_u64(cg, d, "pids.max", lim->pids, err)) < 0)
		return r;
	if (lim->cpus_milli) {
		char val[48];
		uint64_t quota = lim->cpus_milli * (WARD_CG_CPU_PERIOD_US / 1000);
		if (quota < WARD_CG_CPU_MIN_QUOTA_US)
			quota = WARD_CG_CPU_MIN_QUOTA_US;
		snprintf(val, sizeof(val), "%llu %llu", (unsigned long long)quota,
			 WARD_CG_CPU_PERIOD_US);
		if ((r = ward_cg_write(cg, d, "cpu.max", val, err)) < 0)
			return r;
	}
	return 0;
}

int ward_cg_v2_create(struct ward_cgroup *cg, const struct ward_cgroup_limits *lim,
		      struct ward_error *err)
{
	char avail[512], parent[PATH_MAX];
	long n = ward_cg_read(cg->root, "cgroup.controllers", avail, sizeof(avail));
	if (n < 0)
		return ward_error_set(err, (int)-n, "cgroup", "unable to read '%s/cgroup.controllers'",
				      cg->root);
	if (lim->cpus_milli && !ward_cg_has_word(avail, "cpu")) {
		ward_error_set(err, EOPNOTSUPP, "cgroup",
			       "a cpu limit needs the cpu controller, which '%s' does not offer", cg->root);
		ward_error_hint(err, "enable cpu in the parent's cgroup.subtree_control, or drop the cpu limit");
		return -EOPNOTSUPP;
	}
	if (ward_cg_join(parent, sizeof(parent), cg->root, "ward") < 0)
		return ward_error_set(err, ENAMETOOLONG, "cgroup", "path too long under '%s'", cg->root);
	if (mkdir(parent, 0755) < 0 && errno != EEXIST) {
		int e = errno;
		ward_error_set(err, e, "cgroup", "unable to create '%s'", parent);
		ward_cg_hint(err, e);
		return -e;
	}
	int r = enable_controllers(cg, cg->root, avail, err);
	if (r == 0)
		r = enable_controllers(cg, parent, avail, err);
	if (r == 0)
		r = ward_cg_make_leaf(cg, cg->root, cg->unified, sizeof(cg->unified), err);
	if (r < 0)
		return r;
	/* O_PATH will not do: CLONE_INTO_CGROUP checks the file's operations. */
	cg->unified_fd = open(cg->unified, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg->unified_fd < 0)
		return ward_error_set(err, errno, "cgroup", "unable to open '%s'", cg->unified);
	return apply_limits(cg, lim, err);
}

int ward_cg_v2_read_stats(const struct ward_cgroup *cg, struct ward_cgroup_stats *st)
{
	const char *d = cg->unified;
	/* memory.peak came in 5.19; before it the current usage is all there
	 * is, a lower bound of the peak. */
	if (ward_cg_read_u64(d, "memory.peak", &st->memory_peak) < 0) {
		int r = ward_cg_read_u64(d, "memory.current", &st->memory_peak);
		if (r < 0)
			return r;
	}
	ward_cg_read_key(d, "memory.events", "oom_kill", &st->oom_kills);
	ward_cg_read_key(d, "pids.events", "max", &st->pids_max_events);
	ward_cg_read_u64(d, "pids.peak", &st->pids_peak);
	ward_cg_read_key(d, "cpu.stat", "user_usec", &st->cpu_user_us);
	ward_cg_read_key(d, "cpu.stat", "system_usec", &st->cpu_sys_us);
	return 0;
}

int ward_cg_v2_kill(const struct ward_cgroup *cg, uint64_t deadline_ns)
{
	if (!cg->unified[0])
		return 0;
	/* cgroup.kill (5.14) is atomic: forks cannot outrun it. */
	int r = ward_cg_write(cg, cg->unified, "cgroup.kill", "1", NULL);
	if (r != -ENOENT)
		return r;
	return ward_cg_kill_procs(cg->unified, deadline_ns);
}
