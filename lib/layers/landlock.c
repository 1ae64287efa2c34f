/* lib/layers/landlock.c — the landlock layer: filesystem rights and IPC scopes.
 *
 * Policy: the sandbox may read everything it can see, write only below the
 * writable mounts (rw binds and tmpfs), and execute only from the image (the
 * /usr bind) and other read-only binds. From ABI 6 it may also neither signal
 * nor reach the abstract unix sockets of processes outside its domain.
 * Narrower on request: with a "writable" list, /workspace and /tmp are
 * read-only but for the listed paths; with "exec": "program", EXECUTE is
 * granted on the program's own file, its #! interpreter and its ELF loader
 * only (resolved in the child, where the paths are the sandbox's).
 *
 * The parent turns the mount plan into rules (ward_landlock_prepare); the
 * child enforces them (ward_landlock_apply) with raw syscalls only: it must
 * never allocate, use stdio, or grant a right the plan did not list.
 *
 * Network rights (TCP bind/connect, ABI 4) are deliberately not handled: the
 * network namespace holds only lo, and egress, when it comes, goes through a
 * host-side proxy. Handle them here once the sandbox gets a real network.
 */
#include <elf.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "compat/landlock.h"
#include "sandbox.h"
#include "ward/error.h"
#include "ward/policy.h"

#include "base/util.h"

#define LL_READ (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)

/* Everything that changes a hierarchy's content. MAKE_CHAR and MAKE_BLOCK
 * stay out (a device node is a way out of the sandbox's view of the
 * filesystem), and so does EXECUTE: what the program writes, it cannot run. */
#define LL_WRITE                                                               \
	(LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |       \
	 LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_DIR |        \
	 LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |          \
	 LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_SYM |          \
	 LANDLOCK_ACCESS_FS_REFER | LANDLOCK_ACCESS_FS_TRUNCATE)

/* Device nodes are opened for I/O only; no IOCTL_DEV, so from ABI 5 the
 * program cannot drive a device it opens (stdio inherited before the
 * restriction keeps working: landlock checks at open time). */
#define LL_DEVICE (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE)

#define LL_LAYER "landlock"

int ward_landlock_abi(void)
{
	int v = ward_sys_landlock_create_ruleset(NULL, 0,
						 LANDLOCK_CREATE_RULESET_VERSION);
	/* ENOSYS: not built in; EOPNOTSUPP: built in but not in lsm=. Any
	 * other failure (a seccomp filter of an outer container) also means
	 * we cannot use it. */
	return v > 0 ? v : 0;
}

/* The rights one mount op adds on top of the "/" read rule; 0 for none. */
static uint64_t mount_access(const struct ward_mount_op *op)
{
	switch (op->kind) {
	case WARD_MNT_BIND:
		if (op->device)
			return LL_DEVICE;
		if (op->writable)
			return LL_READ | LL_WRITE;
		if (op->noexec) /* data (the /etc template): "/" covers reading it */
			return 0;
		return LL_READ | LANDLOCK_ACCESS_FS_EXECUTE;
	case WARD_MNT_TMPFS:
		return LL_READ | LL_WRITE;
	case WARD_MNT_DIR:
	case WARD_MNT_SYMLINK:
	case WARD_MNT_FILE:
	case WARD_MNT_PROC:
		/* Part of the read-only root (or procfs): "/" covers them. */
		return 0;
	}
	return 0;
}

/* Sets the rule for path, replacing an earlier one: a later mount on the
 * same target hides the earlier one, and the rule lands on whatever is on
 * top when the child opens the path. */
static int set_rule(struct ward_plan *plan, const char *path, uint64_t access,
		    struct ward_error *err)
{
	size_t i;
	for (i = 0; i < plan->n_landlock; i++) {
		if (strcmp(plan->landlock[i].path, path) == 0) {
			plan->landlock[i].access = access;
			return 0;
		}
	}
	if (plan->n_landlock >= ARRAY_SIZE(plan->landlock))
		return ward_error_set(err, E2BIG, LL_LAYER,
				      "too many landlock rules (at most %zu): "
				      "unable to add '%s'",
				      ARRAY_SIZE(plan->landlock), path);
	plan->landlock[plan->n_landlock].path = path;
	plan->landlock[plan->n_landlock].access = access;
	plan->n_landlock++;
	return 0;
}

/* True when path is dir or below it, comparing whole components. */
static bool path_within(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (n == 1 && dir[0] == '/')
		return true;
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static bool is_plain_bind(const struct ward_mount_op *op)
{
	return op->kind == WARD_MNT_BIND && !op->device && op->src;
}

/* Landlock attaches a rule to an inode, not to a mount. When a read-only
 * bind and a writable bind share host inodes (the same directory, or one
 * inside the other), the read-only rule's EXECUTE reaches files written
 * through the writable mount: a file written at /out/x could be run as
 * /in/x. Such a read-only bind loses EXECUTE; it keeps READ. Bind mounts and
 * hard links on the host can still alias trees this check cannot see. */
static bool shares_host_inodes(const struct ward_plan *plan,
			       const struct ward_mount_op *ro)
{
	_cleanup_free_ char *a = realpath(ro->src, NULL);
	size_t i;
	if (!a)
		return false; /* absent optional source: no mount, no rule use */
	for (i = 0; i < plan->n_mounts; i++) {
		const struct ward_mount_op *rw = &plan->mounts[i];
		if (!is_plain_bind(rw) || !rw->writable)
			continue;
		_cleanup_free_ char *b = realpath(rw->src, NULL);
		if (b && (path_within(a, b) || path_within(b, a)))
			return true;
	}
	return false;
}

/* Rights add up along a path inside the sandbox, so a writable mount below
 * an executable one (a rw bind at /tools/out under a ro bind at /tools)
 * would make written files runnable. Refuse the plan instead. */
static int check_nesting(const struct ward_plan *plan, struct ward_error *err)
{
	const uint64_t writes = LANDLOCK_ACCESS_FS_WRITE_FILE |
				LANDLOCK_ACCESS_FS_MAKE_REG;
	size_t i, j;
	for (i = 0; i < plan->n_landlock; i++) {
		const struct ward_landlock_rule *w = &plan->landlock[i];
		if (!(w->access & writes))
			continue;
		for (j = 0; j < plan->n_landlock; j++) {
			const struct ward_landlock_rule *x = &plan->landlock[j];
			if (!(x->access & LANDLOCK_ACCESS_FS_EXECUTE) ||
			    !path_within(w->path, x->path))
				continue;
			return ward_error_set(err, EINVAL, LL_LAYER,
					      "writable mount '%s' is inside the "
					      "executable mount '%s': files "
					      "written there could be executed",
					      w->path, x->path);
		}
	}
	return 0;
}

/* The rights of one op; 0 when "/" already covers it. */
static uint64_t op_access(const struct ward_plan *plan,
			  const struct ward_mount_op *op)
{
	uint64_t access = mount_access(op);
	if ((access & LANDLOCK_ACCESS_FS_EXECUTE) && is_plain_bind(op) &&
	    shares_host_inodes(plan, op))
		access &= ~LANDLOCK_ACCESS_FS_EXECUTE;
	/* The root stays read-only whatever is mounted on it: writes go only
	 * to mounts below it. */
	if (access && op->target && strcmp(op->target, "/") == 0)
		access = LL_READ | (access & ~LL_WRITE);
	return access;
}

int ward_landlock_prepare(struct ward_plan *plan, struct ward_error *err)
{
	size_t i;
	int r;

	plan->landlock_abi = ward_landlock_abi();
	plan->n_landlock = 0;
	const struct ward_policy *p = plan->policy;
	r = set_rule(plan, "/", LL_READ, err);
	if (r < 0)
		return r;
	for (i = 0; i < plan->n_mounts; i++) {
		const struct ward_mount_op *op = &plan->mounts[i];
		uint64_t access = op_access(plan, op);
		/* "writable": /workspace and /tmp read-only but for the list */
		if (p->writable_only && op->kind == WARD_MNT_TMPFS)
			access &= ~LL_WRITE;
		/* "exec": "program": the child grants the program's files */
		if (p->exec_program_only)
			access &= ~(uint64_t)LANDLOCK_ACCESS_FS_EXECUTE;
		if (!access)
			continue;
		if (!op->target || op->target[0] != '/')
			return ward_error_set(err, EINVAL, LL_LAYER,
					      "mount target '%s' is not an "
					      "absolute path",
					      op->target ? op->target : "");
		r = set_rule(plan, op->target, access, err);
		if (r < 0)
			return r;
	}
	for (i = 0; p->writable_only && i < p->n_writable; i++) {
		/* a path that does not exist when the program starts stays
		 * read-only (add_path_rule skips it) */
		r = set_rule(plan, p->writable[i], LL_READ | LL_WRITE, err);
		if (r < 0)
			return r;
	}
	return check_nesting(plan, err);
}

/* Landlock is missing: the pipeline (lib/sandbox.c) degrades the layer if
 * the policy allows it, else the run fails with this error. */
static int unavailable(struct ward_error *err)
{
	int r;
	r = ward_error_setv(err, EOPNOTSUPP, LL_LAYER,
			    "landlock is not available", NULL);
	ward_error_hint(err, "enable CONFIG_SECURITY_LANDLOCK and add landlock "
			     "to the lsm= boot parameter");
	return r;
}

/* Opens a rule's path without following symlinks anywhere in it: the paths
 * name mount targets, and a symlink planted in a writable host directory
 * must not move a grant (say, EXECUTE) onto another hierarchy. openat2 is
 * always there when landlock is (5.6 < 5.13). */
static int open_rule_path(const char *path)
{
	struct open_how how;
	memset(&how, 0, sizeof(how));
	how.flags = O_PATH | O_CLOEXEC;
	how.resolve = RESOLVE_NO_SYMLINKS;
	return (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
}

static int add_path_rule(int ruleset, const struct ward_landlock_rule *rule,
			 uint64_t handled, struct ward_error *err)
{
	struct landlock_path_beneath_attr attr;
	struct stat st;
	uint64_t access = rule->access & handled;
	_cleanup_close_ int fd = open_rule_path(rule->path);

	if (fd < 0) {
		/* An optional bind the host lacked was skipped by the mount
		 * layer; a missing path can only lose rights, never gain. */
		if (errno == ENOENT)
			return 0;
		return ward_error_setv(err, errno, LL_LAYER, "unable to open '",
				       rule->path, "' for a landlock rule", NULL);
	}
	if (fstat(fd, &st) < 0)
		return ward_error_setv(err, errno, LL_LAYER, "unable to stat '",
				       rule->path, "'", NULL);
	if (!S_ISDIR(st.st_mode))
		access &= WARD_LANDLOCK_FS_FILE;
	/* The kernel rejects an empty rule with ENOMSG; it grants nothing. */
	if (!access)
		return 0;
	memset(&attr, 0, sizeof(attr));
	attr.allowed_access = access;
	attr.parent_fd = fd;
	if (ward_sys_landlock_add_rule(ruleset, LANDLOCK_RULE_PATH_BENEATH,
				       &attr, 0) < 0)
		return ward_error_setv(err, errno, LL_LAYER,
				       "unable to add a landlock rule for '",
				       rule->path, "'", NULL);
	return 0;
}

/* --- "exec": "program" (child-side: raw syscalls, stack buffers) --- */

/* EXECUTE (and READ_FILE) on the file at path, following symlinks: the
 * rule must land on the inode the kernel opens for execve. ENOENT grants
 * nothing. */
static int exec_rule(int ruleset, const char *path, uint64_t handled, struct ward_error *err)
{
	struct landlock_path_beneath_attr attr;
	struct stat st;
	_cleanup_close_ int fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : ward_error_setv(err, errno, LL_LAYER, "unable to open '",
							      path, "' for a landlock rule", NULL);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return 0;
	memset(&attr, 0, sizeof(attr));
	attr.allowed_access = (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE) & handled;
	attr.parent_fd = fd;
	if (ward_sys_landlock_add_rule(ruleset, LANDLOCK_RULE_PATH_BENEATH, &attr, 0) < 0)
		return ward_error_setv(err, errno, LL_LAYER, "unable to add a landlock rule for '",
				       path, "'", NULL);
	return 0;
}

/* What the kernel opens to run the file at path: the #! interpreter, or
 * the ELF loader (PT_INTERP), into out; false when neither. */
static bool exec_helper(const char *path, char *out, size_t len)
{
	unsigned char head[256];
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : pread(fd, head, sizeof(head) - 1, 0);
	if (n < 4)
		return false;
	if (head[0] == '#' && head[1] == '!') {
		size_t i = 2, k = 0;
		while (i < (size_t)n && (head[i] == ' ' || head[i] == '\t'))
			i++;
		while (i < (size_t)n && k + 1 < len && head[i] != ' ' && head[i] != '\t' &&
		       head[i] != '\n')
			out[k++] = (char)head[i++];
		out[k] = '\0';
		return k > 0 && out[0] == '/';
	}
	if (memcmp(head, ELFMAG, SELFMAG) != 0 || head[EI_CLASS] != ELFCLASS64 ||
	    (size_t)n < sizeof(Elf64_Ehdr))
		return false;
	const Elf64_Ehdr *eh = (const void *)head;
	for (unsigned i = 0; i < eh->e_phnum && i < 64; i++) {
		Elf64_Phdr ph;
		if (pread(fd, &ph, sizeof(ph), (off_t)(eh->e_phoff + (uint64_t)i * eh->e_phentsize)) !=
		    (ssize_t)sizeof(ph))
			return false;
		if (ph.p_type != PT_INTERP)
			continue;
		if (ph.p_filesz == 0 || ph.p_filesz >= len ||
		    pread(fd, out, ph.p_filesz, (off_t)ph.p_offset) != (ssize_t)ph.p_filesz)
			return false;
		out[ph.p_filesz] = '\0';
		return out[0] == '/';
	}
	return false;
}

/* argv[0] as exec_program (lib/sandbox.c) will find it: a path, or the
 * first PATH entry that is executable. */
static bool exec_resolve(const struct ward_plan *plan, char *out, size_t len)
{
	const char *prog = plan->argv[0];
	if (strchr(prog, '/')) {
		ward_strlcpy(out, prog, len);
		return true;
	}
	for (const char *p = plan->path_env; p && *p;) {
		const char *colon = strchr(p, ':');
		size_t n = colon ? (size_t)(colon - p) : strlen(p);
		if (n > 0 && n + 1 + strlen(prog) + 1 <= len) {
			memcpy(out, p, n);
			out[n] = '/';
			ward_strlcpy(out + n + 1, prog, len - n - 1);
			if (access(out, X_OK) == 0)
				return true;
		}
		p = colon ? colon + 1 : NULL;
	}
	return false;
}

/* The program, its #! interpreter and their ELF loaders: what one execve
 * of the program opens for execution, two levels deep (a script's
 * interpreter that is itself a script would need a third: it fails). */
static int exec_rules(int ruleset, const struct ward_plan *plan, uint64_t handled,
		      struct ward_error *err)
{
	char file[4096], next[4096];
	if (!exec_resolve(plan, file, sizeof(file)))
		return 0; /* nothing to run: the execve fails on its own */
	for (int depth = 0; depth < 3; depth++) {
		int r = exec_rule(ruleset, file, handled, err);
		if (r < 0)
			return r;
		if (!exec_helper(file, next, sizeof(next)))
			break;
		memcpy(file, next, sizeof(file));
	}
	return 0;
}

int ward_landlock_apply(struct ward_plan *plan, struct ward_error *err)
{
	struct ward_landlock_ruleset_attr attr;
	int abi = plan->landlock_abi;
	size_t i;
	int r;

	if (abi <= 0)
		return unavailable(err);

	/* Handle every right the kernel knows: an unhandled right is an
	 * allowed one. */
	memset(&attr, 0, sizeof(attr));
	attr.handled_access_fs = ward_landlock_fs_handled(abi);
	attr.scoped = ward_landlock_scoped(abi);

	_cleanup_close_ int ruleset = ward_sys_landlock_create_ruleset(
		&attr, ward_landlock_attr_size(abi), 0);
	if (ruleset < 0)
		return ward_error_setv(err, errno, LL_LAYER,
				       "unable to create a landlock ruleset",
				       NULL);
	for (i = 0; i < plan->n_landlock; i++) {
		r = add_path_rule(ruleset, &plan->landlock[i],
				  attr.handled_access_fs, err);
		if (r < 0)
			return r;
	}
	if (plan->policy->exec_program_only) {
		r = exec_rules(ruleset, plan, attr.handled_access_fs, err);
		if (r < 0)
			return r;
	}
	/* Flags 0: audit records (ABI 7) keep the kernel default, which logs
	 * denials up to the next execve only, so untrusted programs cannot
	 * flood the audit log. */
	if (ward_sys_landlock_restrict_self(ruleset, 0) < 0)
		return ward_error_setv(err, errno, LL_LAYER,
				       "unable to enforce the landlock ruleset",
				       NULL);
	return 0;
}
