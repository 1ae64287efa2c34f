/* lib/cgroup.h — one cgroup per sandbox, behind one interface (internal).
 *
 * Two backends: cgroup v2 (unified hierarchy with controllers) and cgroup v1
 * (controllers in separate hierarchies; on a hybrid host the v2 tree at
 * <root>/unified is still used for CLONE_INTO_CGROUP, cgroup.kill and
 * populated events). Every path is built under `root` so the logic can be
 * tested against a fake cgroupfs tree. Parent-only; never called in the
 * sandbox child.
 */
#ifndef WARD_CGROUP_H
#define WARD_CGROUP_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ward/error.h"

enum ward_cgroup_version {
	WARD_CGROUP_NONE = 0,
	WARD_CGROUP_V1 = 1,
	WARD_CGROUP_V2 = 2,
};

struct ward_cgroup_limits {
	uint64_t memory;      /* bytes, 0 = none; swap is always off */
	uint64_t pids;        /* 0 = none */
	uint64_t cpus_milli;  /* 1000 = one CPU, 0 = none */
};

struct ward_cgroup_stats {
	uint64_t memory_peak;     /* bytes */
	uint64_t oom_kills;       /* OOM kills inside this cgroup */
	uint64_t pids_peak;       /* best effort: 0 when the kernel has no counter */
	uint64_t pids_max_events; /* fork/clone refused by pids.max */
	uint64_t cpu_user_us;
	uint64_t cpu_sys_us;
};

struct ward_cgroup {
	enum ward_cgroup_version version;
	char root[128];               /* "/sys/fs/cgroup" unless faked */
	char name[96];                /* leaf name, unique per sandbox */
	char unified[PATH_MAX];       /* v2 leaf dir ("" if none) */
	char memory[PATH_MAX];        /* v1 leaf dirs ("" if unused) */
	char pids[PATH_MAX];
	char cpu[PATH_MAX];           /* cpu,cpuacct */
	char freezer[PATH_MAX];
	int unified_fd;               /* O_DIRECTORY fd of the v2 leaf or -1 */
};

/* Which version is usable under root ("/sys/fs/cgroup" when NULL).
 * Returns WARD_CGROUP_V2 when root is a cgroup2 mount with the memory and
 * pids controllers available, WARD_CGROUP_V1 when the v1 memory and pids
 * hierarchies exist, else WARD_CGROUP_NONE. */
enum ward_cgroup_version ward_cgroup_detect(const char *root);

/* Creates the sandbox's cgroup(s) named `name` under <root>/.../ward/ and
 * applies the limits. On failure nothing is left behind. Returns 0 or
 * -errno with err naming the file that failed (layer "cgroup"). */
int ward_cgroup_create(struct ward_cgroup *cg, const char *root, const char *name,
		       const struct ward_cgroup_limits *lim, struct ward_error *err);

/* The fd to pass in clone_args.cgroup (CLONE_INTO_CGROUP), or -1 when the
 * caller must use ward_cgroup_attach instead. */
int ward_cgroup_clone_fd(const struct ward_cgroup *cg);

/* Moves pid into every hierarchy it is not yet in (v1 controllers; v2 when
 * CLONE_INTO_CGROUP was not used). Called before the sandbox runs code. */
int ward_cgroup_attach(struct ward_cgroup *cg, pid_t pid, bool cloned_into,
		       struct ward_error *err);

int ward_cgroup_read_stats(const struct ward_cgroup *cg, struct ward_cgroup_stats *st);

/* Kills every process in the cgroup (v2: cgroup.kill; v1: freeze, SIGKILL
 * each task, thaw). Returns 0 or -errno. */
int ward_cgroup_kill(struct ward_cgroup *cg);

/* Kills what is left, waits briefly for the cgroup to empty, and removes the
 * directories. Safe to call on a zeroed or half-created struct. */
int ward_cgroup_destroy(struct ward_cgroup *cg, struct ward_error *err);

/* Builds a unique leaf name that embeds the supervisor's pid and its start
 * time, so leftovers of dead supervisors can be recognised:
 * "ward-<pid>-<starttime>-<random>". */
int ward_cgroup_make_name(char *buf, size_t len, const char *sandbox_id);

/* Removes leftovers under <root> whose supervisor (pid + start time in the
 * name) no longer runs. Never touches live supervisors' cgroups. Returns the
 * number removed or -errno. */
int ward_cgroup_gc(const char *root, struct ward_error *err);

#endif
