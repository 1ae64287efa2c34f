/* lib/layers/cgroup-internal.h — helpers shared by the cgroup front end
 * (cgroup.c) and its two backends (cgroup-v1.c, cgroup-v2.c). Not a public
 * interface: nothing outside lib/layers/cgroup*.c includes it.
 *
 * Every helper takes full paths built from cg->root, so the same code runs
 * against the kernel and against the fake cgroupfs of tests/unit/t-cgroup.c.
 */
#ifndef WARD_CGROUP_INTERNAL_H
#define WARD_CGROUP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgroup.h"
#include "ward/error.h"

/* cpu.max / cpu.cfs_period_us: the kernel default, so quota = milli * 100. */
#define WARD_CG_CPU_PERIOD_US 100000ull
/* The kernel refuses a CFS quota below 1 ms. */
#define WARD_CG_CPU_MIN_QUOTA_US 1000ull
/* How long kill/destroy wait for tasks to leave before giving up. */
#define WARD_CG_WAIT_MS 2000

/* Joins "a/b" into buf. Returns 0 or -ENAMETOOLONG. */
int ward_cg_join(char *buf, size_t len, const char *a, const char *b);

/* True when dir lives on cgroupfs or cgroup2fs (statfs magic). The test
 * seam: on any other file system the tree is a fake (see cg->fake). */
bool ward_cg_on_cgroupfs(const char *dir);

/* Writes value to dir/file in one write(2), as the kernel wants. In fake
 * mode the file is created (the kernel would have made it at mkdir).
 * Records "unable to write 'value' to 'path'" in err on failure. */
int ward_cg_write(const struct ward_cgroup *cg, const char *dir, const char *file,
		  const char *value, struct ward_error *err);
int ward_cg_write_u64(const struct ward_cgroup *cg, const char *dir,
		      const char *file, uint64_t v, struct ward_error *err);

/* Reads a small file dir/file into buf (NUL-terminated, truncated to len-1).
 * Returns the length or -errno. */
long ward_cg_read(const char *dir, const char *file, char *buf, size_t len);
/* Reads a file holding one decimal number. Returns 0 or -errno. */
int ward_cg_read_u64(const char *dir, const char *file, uint64_t *out);
/* Finds "key N" in a flat-keyed file (memory.events, cpu.stat, ...).
 * Returns 0, -ENOENT when the key is absent, or -errno from the read. */
int ward_cg_read_key(const char *dir, const char *file, const char *key,
		     uint64_t *out);
/* Whether the space-separated list `words` contains `word`. */
bool ward_cg_has_word(const char *words, const char *word);

/* mkdir <hier>/ward (shared, kept forever) then <hier>/ward/<cg->name> into
 * out. EEXIST on the leaf is an error: names are unique per sandbox. */
int ward_cg_make_leaf(const struct ward_cgroup *cg, const char *hier, char *out,
		      size_t len, struct ward_error *err);
/* Removes a leaf, retrying while the kernel still says EBUSY (tasks exiting)
 * until deadline_ns. In fake mode unlinks the regular files first. A leaf
 * that is already gone is success. */
int ward_cg_remove_leaf(const struct ward_cgroup *cg, const char *dir,
			uint64_t deadline_ns);

/* Waits until dir/cgroup.events says "populated 0" or deadline_ns passes.
 * Returns 0, -ETIMEDOUT, or -errno (-ENOENT: no cgroup.events). */
int ward_cg_wait_empty(const char *dir, uint64_t deadline_ns);
/* SIGKILLs every process listed in dir/cgroup.procs, through pidfds so a
 * recycled pid is never hit; repeats until the list is empty (forks race
 * the loop) or deadline_ns. Returns 0, -ETIMEDOUT or -errno. */
int ward_cg_kill_procs(const char *dir, uint64_t deadline_ns);
/* One pass of the same, for a frozen cgroup whose list cannot change.
 * Returns 0 or -errno (a vanished cgroup is 0). */
int ward_cg_kill_procs_once(const char *dir);

/* Adds the EACCES/EPERM/EROFS/ENOENT hint about root and delegation. */
void ward_cg_hint(struct ward_error *err, int code);

/* Backends. create: cg->root, name, fake and version are set, every path
 * empty and unified_fd -1; on failure the caller destroys what exists. */
int ward_cg_v2_create(struct ward_cgroup *cg, const struct ward_cgroup_limits *lim,
		      struct ward_error *err);
int ward_cg_v2_read_stats(const struct ward_cgroup *cg, struct ward_cgroup_stats *st);
int ward_cg_v2_kill(const struct ward_cgroup *cg, uint64_t deadline_ns);

int ward_cg_v1_create(struct ward_cgroup *cg, const struct ward_cgroup_limits *lim,
		      struct ward_error *err);
int ward_cg_v1_read_stats(const struct ward_cgroup *cg, struct ward_cgroup_stats *st);
int ward_cg_v1_kill(const struct ward_cgroup *cg, uint64_t deadline_ns);

#endif
