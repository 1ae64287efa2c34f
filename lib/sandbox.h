/* lib/sandbox.h — the plan and the layer interface (internal).
 *
 * The parent turns a policy into a plan: every path, mount, map line, file
 * content, rlimit, landlock rule and the compiled seccomp program are decided
 * and allocated here, before clone. The child only applies the plan, with raw
 * syscalls: no malloc, no stdio, no locale. A layer is a file in lib/layers/
 * plus one row in the table in lib/sandbox.c (struct ward_layer_desc).
 */
#ifndef WARD_SANDBOX_H
#define WARD_SANDBOX_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "ward/egress.h"
#include "ward/error.h"
#include "ward/policy.h"
#include "ward/sandbox.h"

enum {
	WARD_PLAN_MAX_MOUNTS = 80,
	WARD_PLAN_MAX_FILES = 24,
	WARD_PLAN_MAX_LANDLOCK = 80,
	WARD_PLAN_MAX_RLIMITS = 8,
	WARD_INSIDE_UID = 1000,
	WARD_INSIDE_GID = 1000,
};

enum ward_mount_kind {
	WARD_MNT_DIR,      /* mkdir target */
	WARD_MNT_SYMLINK,  /* symlink(src) at target */
	WARD_MNT_FILE,     /* regular file at target with content */
	WARD_MNT_BIND,     /* bind host src (opened before any tmpfs) at target */
	WARD_MNT_TMPFS,    /* tmpfs at target with data options */
	WARD_MNT_PROC,     /* procfs at target with data options */
};

struct ward_mount_op {
	enum ward_mount_kind kind;
	const char *src;       /* host path (BIND), link text (SYMLINK) */
	const char *target;    /* absolute path inside the sandbox */
	const char *data;      /* TMPFS/PROC options, FILE content */
	size_t len;            /* FILE content length */
	unsigned mode;         /* DIR/FILE/TMPFS mode */
	bool writable;         /* BIND: read-write */
	bool device;           /* BIND: a device node (keeps dev, adds noexec) */
	bool optional;         /* BIND: skip silently when the host lacks src */
	bool owned;            /* FILE, DIR: owned by the sandbox user, not by root */
	bool noexec;           /* BIND: read-only data, mounted noexec too */
	int fd;                /* BIND: open_tree fd, filled in the child */
};

/* Where a sandbox with credential rules finds the proxy's CA bundle (its
 * mount point is part of an allowlist sandbox's /etc). */
#define WARD_EGRESS_CA_ETC "ward/egress-ca.pem"
#define WARD_EGRESS_CA_PATH "/etc/" WARD_EGRESS_CA_ETC

/* The hostname of a policy that names none. */
#define WARD_DEFAULT_HOSTNAME "sandbox"

struct ward_landlock_rule {
	const char *path;      /* inside the sandbox */
	uint64_t access;       /* LANDLOCK_ACCESS_FS_* before ABI masking */
};

struct ward_rlimit {
	int resource;
	struct rlimit value;
};

/* What a policy alone decides, shared read-only by every plan of that
 * policy (see ward_plan_cache_get in ward/sandbox.h). */
struct ward_policy_plan {
	unsigned char digest[WARD_POLICY_DIGEST_LEN];
	struct ward_policy policy;     /* own deep copy */
	struct sock_fprog seccomp;     /* owned; plans borrow it */
	int refs;                      /* atomic; the cache holds one */
	uint64_t used;                 /* the cache's LRU tick (under its mutex) */
};

struct ward_plan {
	const struct ward_policy *policy;
	const struct ward_policy_plan *base; /* held by the sandbox, outlives the plan */
	bool seccomp_borrowed;         /* seccomp points into base: not freed here */

	/* identity */
	bool rootless;
	uid_t host_uid;
	gid_t host_gid;
	uid_t uid;             /* the program's uid inside */
	gid_t gid;
	char uid_map[96];
	char gid_map[96];
	uint64_t id_base[2];   /* as root: host uid, gid of inside id 0 */

	/* mounts, applied in order inside the new root */
	struct ward_mount_op mounts[WARD_PLAN_MAX_MOUNTS];
	size_t n_mounts;
	char *strings;         /* owns the paths and contents the ops point to */
	size_t strings_len, strings_cap;

	/* program */
	char *const *argv;
	const struct ward_file *files;  /* for /workspace, set by ward_plan_build */
	size_t n_files;
	const struct ward_bind *extra_binds; /* ward's own read-only binds */
	size_t n_extra_binds;
	char **envp;           /* NULL-terminated, owned */
	const char *path_env;  /* value of PATH in envp, for lookups */
	const char *workdir;
	const char *hostname;
	int stdio[3];          /* the program's fds 0-2, set by the supervisor */
	int cg_tasks[6];       /* v1 `tasks` files the init writes "0" to */
	size_t n_cg_tasks;
	int cap_last;          /* highest capability number this kernel knows */

	struct ward_rlimit rlimits[WARD_PLAN_MAX_RLIMITS];
	size_t n_rlimits;

	struct ward_landlock_rule landlock[WARD_PLAN_MAX_LANDLOCK];
	size_t n_landlock;
	int landlock_abi;      /* probed in the parent; 0 when unavailable */

	struct sock_fprog seccomp; /* compiled in the parent (owned) */

	/* network.mode "allowlist": the proxy's listeners, made by the init
	 * in the sandbox's network namespace (lib/layers/net.c) and passed
	 * to the supervisor with the RUNNING record; -1 where absent */
	struct ward_egress_fds egress;
	/* the proxy's CA bundle is bound at WARD_EGRESS_CA_PATH (one of the
	 * extra binds): the program's environment names it */
	bool egress_ca;

	uint32_t allow_degrade;
	uint32_t layers;       /* filled as layers apply */
	uint32_t degraded;
};

/* Parent: builds a plan for argv from the policy's cached part (base, which
 * the caller keeps alive for the plan's lifetime); files go into /workspace. */
int ward_plan_build(struct ward_plan *plan, const struct ward_policy_plan *base,
		    char *const argv[], const struct ward_sandbox_options *opts,
		    struct ward_error *err);
void ward_plan_release(struct ward_plan *plan);
/* Parent: copies s into the plan's string arena; NULL on ENOMEM.
 * Pointers stay valid until ward_plan_release (the arena is allocated once,
 * large enough, by ward_plan_build). */
const char *ward_plan_strdup(struct ward_plan *plan, const char *s, size_t len);
int ward_plan_add_mount(struct ward_plan *plan, const struct ward_mount_op *op,
			struct ward_error *err);

/* --- the layer descriptor: one row per step of the pipeline ---
 *
 * lib/sandbox.c holds the one ordered table (ward_layers[]). The pipeline,
 * not the layer, keeps the verdict's bits: a row whose apply succeeds (or
 * that has none: clone gave it) sets the applied bit of its id; a row whose
 * apply fails is reported as degraded when it is degradable and the policy
 * allows it (allow_degraded), and otherwise stops the run with an error that
 * names the layer. A layer function only applies, or fails with err set. */
typedef int (*ward_layer_fn)(struct ward_plan *, struct ward_error *);

enum ward_stage {
	WARD_STAGE_INIT,     /* in the sandbox's init (PID 1), before the program exists */
	WARD_STAGE_PROGRAM,  /* in the program, between vfork and execve */
};

struct ward_layer_desc {
	int id;                /* enum ward_layer whose bits this row keeps; -1: a step
				* of a layer whose bit another row sets */
	enum ward_stage stage;
	ward_layer_fn prepare; /* parent, before clone, in table order; may allocate.
				* A failure always stops the build. NULL: none */
	ward_layer_fn apply;   /* child-safe: plan data and raw syscalls. NULL: the
				* layer was given by clone or by the supervisor */
	bool degradable;       /* a failed apply may degrade (policy.allow_degrade) */
};

extern const struct ward_layer_desc ward_layers[];
extern const size_t ward_n_layers;

/* The row of layer id in ward_layers (its first row), or NULL. */
const struct ward_layer_desc *ward_layer_find(int id);
/* Parent: runs every row's prepare in table order. 0 or -errno (err set). */
int ward_layers_prepare(const struct ward_layer_desc *rows, size_t n,
			struct ward_plan *plan, struct ward_error *err);
/* Child-safe: applies the rows of one stage in order, keeping plan->layers
 * and plan->degraded (rows already marked degraded, e.g. by the supervisor,
 * are skipped). Returns 0, or the failing row's -errno with err naming the
 * layer. */
int ward_layers_apply(const struct ward_layer_desc *rows, size_t n, enum ward_stage stage,
		      struct ward_plan *plan, struct ward_error *err);

/* --- layers: parent-side preparation (may allocate) --- */
int ward_userns_prepare(struct ward_plan *plan, struct ward_error *err);
int ward_image_host_prepare(struct ward_plan *plan, struct ward_error *err);

/* The image's /etc as a list (lib/layers/image_host.c), synthesized into
 * each sandbox's root or prepared once as a template (etc_template.c). */
enum ward_etc_kind {
	WARD_ETC_FILE,  /* data, len: the content */
	WARD_ETC_COPY,  /* data: a host file copied by content; absent: left out */
	WARD_ETC_LINK,  /* data: the link's text */
	WARD_ETC_DIR,   /* a directory (a mount point) */
};
struct ward_etc_entry {
	enum ward_etc_kind kind;
	const char *name;      /* relative to /etc: "passwd", "ssl/openssl.cnf" */
	const char *data;
	size_t len;
};
enum { WARD_ETC_MAX = 24 };

/* Parent: the path (in out) of a template of /etc holding exactly entries
 * e, in the runtime directory rundir (an fd of rundir_path): an existing
 * one that verifies, else one built now. 0, or -errno (the caller then
 * synthesizes /etc). See lib/layers/etc_template.c. */
int ward_etc_template_get(int rundir, const char *rundir_path, const struct ward_etc_entry *e,
			  size_t n, char *out, size_t len);
/* Parent: removes the templates in rundir unused for a day, and what
 * interrupted builds left. Returns how many, or -errno. Whatever sandbox
 * still has one mounted loses its /etc files: for `ward gc`, not for a run. */
int ward_etc_template_gc(int rundir);

/* ward_run up to the verdict (lib/run.c): *sb is left to the caller, who
 * calls ward_sandbox_release (always: *sb may be NULL on a setup failure),
 * e.g. after writing the verdict out. */
struct ward_run_options;
int ward_run_ended(const struct ward_policy *policy, char *const argv[],
		   const struct ward_run_options *opts, struct ward_verdict *v,
		   struct ward_error *err, struct ward_sandbox **sb);

/* Parent: opens ward's runtime directory (lib/layers/rundir.c), creating
 * it when missing, and checks that no other user can write it or anything
 * above it. Returns an O_PATH directory fd and its path in path, or -errno
 * (-EPERM: unsafe; -ENOENT: no default for this user). */
int ward_rundir_open(char *path, size_t len);
int ward_mounts_prepare(struct ward_plan *plan, struct ward_error *err);
int ward_landlock_prepare(struct ward_plan *plan, struct ward_error *err);
int ward_rlimits_prepare(struct ward_plan *plan, struct ward_error *err);
int ward_env_prepare(struct ward_plan *plan, struct ward_error *err);

/* seccomp: builds the allowlist filter into *prog (owned by the caller, free
 * with ward_seccomp_release). Parent-only. */
int ward_seccomp_build(const struct ward_policy *policy, struct sock_fprog *prog,
		       struct ward_error *err);
void ward_seccomp_release(struct sock_fprog *prog);

/* Parent, as root: an O_CLOEXEC fd of a new user namespace that maps host
 * owner:group onto the host ids of the sandbox's user, for an idmapped
 * mount. Returns the fd or -errno with err set. */
int ward_userns_idmap_fd(const struct ward_plan *plan, uid_t owner, gid_t group,
			 struct ward_error *err);

/* Parent, after clone: writes the child's uid_map, setgroups, gid_map. */
int ward_userns_write_maps(const struct ward_plan *plan, pid_t pid,
			   struct ward_error *err);

/* --- layers: child-side application (child-safe: raw syscalls only) --- */
/* Opens every bind source with open_tree(OPEN_TREE_CLONE), still with the
 * caller's host credentials, before anything can shadow the host paths. */
int ward_mounts_open_sources(struct ward_plan *plan, struct ward_error *err);
/* Takes the sandbox's own root identity inside the user namespace. */
int ward_userns_enter(struct ward_plan *plan, struct ward_error *err);
int ward_cgroupns_apply(struct ward_plan *plan, struct ward_error *err);
int ward_mounts_apply(struct ward_plan *plan, struct ward_error *err);
int ward_uts_apply(struct ward_plan *plan, struct ward_error *err);
int ward_net_apply(struct ward_plan *plan, struct ward_error *err);
int ward_env_apply(struct ward_plan *plan, struct ward_error *err);
int ward_rlimits_apply(struct ward_plan *plan, struct ward_error *err);
int ward_privileges_apply(struct ward_plan *plan, struct ward_error *err);
int ward_landlock_apply(struct ward_plan *plan, struct ward_error *err);
/* Installs the filter; must be the last layer before execve. */
int ward_seccomp_apply(const struct sock_fprog *prog, struct ward_error *err);
/* After seccomp: checks that the layers hold (a new user namespace is
 * impossible, no capabilities, no_new_privs set). */
int ward_verify_apply(struct ward_plan *plan, struct ward_error *err);
/* The seccomp layer in the descriptor's shape: the plan's filter. */
int ward_seccomp_prepare(struct ward_plan *plan, struct ward_error *err);
int ward_seccomp_apply_plan(struct ward_plan *plan, struct ward_error *err);

/* Probes the running kernel's landlock ABI: >0 version, 0 unavailable. */
int ward_landlock_abi(void);

#endif
