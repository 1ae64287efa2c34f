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
	/* v1: skip the optional hierarchies (freezer, a separate cpuacct, the
	 * hybrid v2 leaf). For callers that kill through the pid namespace and
	 * take CPU time from rusage: each v1 hierarchy joined costs a task
	 * migration, the dearest step of a sandbox's setup. */
	bool lean;
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
	char cpu[PATH_MAX];
	char cpuacct[PATH_MAX];       /* == cpu when mounted together (cpu,cpuacct) */
	char freezer[PATH_MAX];
	int unified_fd;               /* O_DIRECTORY fd of the v2 leaf or -1 */
	/* Set by ward_cgroup_kill. A leaf is single-use: on 6.14+ kernels a
	 * CLONE_INTO_CGROUP child of a cgroup that has seen cgroup.kill is
	 * SIGKILLed at birth, so ward_cgroup_clone_fd then returns -1. */
	bool killed;
	/* Test seam: true when the hierarchy is not on cgroupfs (a fake tree
	 * in a temp dir). Then writes create their file, and destroy unlinks
	 * the leaf's regular files before rmdir, as the kernel would. */
	bool fake;
};

/* Which version is usable under root ("/sys/fs/cgroup" when NULL).
 * Returns WARD_CGROUP_V2 when root is a cgroup2 mount with the memory and
 * pids controllers available, WARD_CGROUP_V1 when the v1 memory and pids
 * hierarchies exist, else WARD_CGROUP_NONE. */
enum ward_cgroup_version ward_cgroup_detect(const char *root);

/* Creates the sandbox's cgroup(s) named `name` under <hierarchy>/ward/ and
 * applies the limits. root is "/sys/fs/cgroup" when NULL; name is one path
 * component (see ward_cgroup_make_name). *cg needs no initialisation; after
 * this call it may always be passed to ward_cgroup_destroy. On failure
 * nothing is left behind. Returns 0 or -errno with err naming the file that
 * failed (layer "cgroup"): -ENODEV when no usable hierarchy exists,
 * -EOPNOTSUPP when a requested limit has no controller. v1: the memory and
 * pids hierarchies are required, cpu only when cpus_milli is set; cpuacct,
 * freezer and <root>/unified are used when present. */
int ward_cgroup_create(struct ward_cgroup *cg, const char *root, const char *name,
		       const struct ward_cgroup_limits *lim, struct ward_error *err);

/* The fd to pass in clone_args.cgroup (CLONE_INTO_CGROUP), or -1 when the
 * caller must use ward_cgroup_attach instead (no cgroup2 leaf, or the
 * cgroup was already killed). Owned by cg; closed by ward_cgroup_destroy. */
int ward_cgroup_clone_fd(const struct ward_cgroup *cg);

/* Moves pid into every hierarchy it is not yet in (v1 controllers; v2 when
 * CLONE_INTO_CGROUP was not used). Called before the sandbox runs code.
 * Returns 0 or -errno; on failure pid may be in some hierarchies only, so
 * the caller kills it. */
int ward_cgroup_attach(struct ward_cgroup *cg, pid_t pid, bool cloned_into,
		       struct ward_error *err);

/* Fills *st (zeroed first; a counter the kernel lacks stays 0). Read after
 * the run: memory_peak falls back to the current usage on v2 kernels
 * without memory.peak (< 5.19). Returns 0, or -errno when the memory
 * cgroup cannot be read at all. */
/* v1: opens the `tasks` file of every hierarchy the sandbox joins, so the
 * child can move itself by writing "0" to each. The kernel takes its global
 * threadgroup lock (and waits for an RCU grace period, ~10-15 ms when idle)
 * for a migration by pid, but not for a thread moving itself. On success
 * *n fds (O_CLOEXEC) are in fds; -EOPNOTSUPP on v2 or a fake tree, where
 * ward_cgroup_attach (or CLONE_INTO_CGROUP) is the way. */
int ward_cgroup_open_self_attach(const struct ward_cgroup *cg, int *fds, size_t max, size_t *n);

int ward_cgroup_read_stats(const struct ward_cgroup *cg, struct ward_cgroup_stats *st);

/* Kills every process in the cgroup (v2: cgroup.kill; v1: freeze, SIGKILL
 * each task, thaw, then cgroup.kill on the unified leaf if any; without
 * either, a pidfd kill loop until cgroup.procs is empty, up to about 2 s).
 * Does not wait for the tasks to be reaped. Sets cg->killed. Returns 0 or
 * -errno. */
int ward_cgroup_kill(struct ward_cgroup *cg);

/* Kills what is left, waits briefly (about 2 s) for the cgroup to empty,
 * removes the leaf directories (never the shared ward/ parents) and closes
 * unified_fd. Safe to call on a zeroed or half-created struct and twice.
 * Returns 0, or -errno (-EBUSY: tasks would not leave; the leaf stays and a
 * later ward_cgroup_gc removes it once this supervisor is gone). */
int ward_cgroup_destroy(struct ward_cgroup *cg, struct ward_error *err);

/* Builds a unique leaf name that embeds the supervisor's pid, its start
 * time (clock ticks, /proc/self/stat field 22) and its pid namespace (the
 * inode of /proc/self/ns/pid), so leftovers of dead supervisors can be
 * recognised: "ward-<pid>-<starttime>-<pidns>-<sandbox_id>".
 * sandbox_id must be 1-40 chars of [A-Za-z0-9._-], or NULL for 16 random
 * hex digits. Returns 0, -EINVAL (bad id) or -ENAMETOOLONG (buf). */
int ward_cgroup_make_name(char *buf, size_t len, const char *sandbox_id);

/* Removes leftovers under every <root>/<hierarchy>/ward/ whose supervisor
 * (pid + start time in the name) no longer runs: kills their tasks, then
 * removes the leaves. Never touches live supervisors' cgroups, nor any
 * entry whose name does not parse. A supervisor hidden by hidepid counts as
 * alive; one from another pid namespace than the caller's is not judged.
 * Returns the number of sandboxes removed or -errno. */
int ward_cgroup_gc(const char *root, struct ward_error *err);

/* ward_cgroup_gc at most once per interval_s, for a per-run caller: a scan
 * costs a /proc lookup per live sandbox, which must not be paid by every
 * run. The time of the last scan is the mtime of `stamp` (a file name in the
 * directory dirfd, made on first use); a stamp in the future counts as due.
 * dirfd < 0 (no runtime directory): scans every time. Returns what
 * ward_cgroup_gc returned, or 0 when no scan was due. */
int ward_cgroup_gc_every(const char *root, int dirfd, const char *stamp,
			 unsigned interval_s, struct ward_error *err);

#endif
