/* lib/layers/mounts.c — the mount namespace: a tmpfs root built from the plan.
 *
 * Parent: appends /dev, /proc, /workspace, /tmp and the policy's binds to the
 * image's operations. Child: opens every bind source with open_tree before
 * anything is shadowed, mounts a tmpfs staging root, creates each target
 * without ever following a symlink, attaches the mounts, then
 * pivot_root(".", ".") and detaches the old root, and makes the root
 * read-only. Everything is nosuid and nodev except the five device binds.
 * Child code: raw syscalls only, no allocation.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>

#include "base/util.h"
#include "compat/mount.h"
#include "sandbox.h"
#include "workspace.h"

/* Where the new root is staged inside the child's private mount namespace.
 * Host paths are never resolved after it is mounted (sources are opened
 * first), so shadowing the host's /tmp here is harmless. */
#define STAGE "/tmp"

#ifndef MQUEUE_MAGIC
#define MQUEUE_MAGIC 0x19800202
#endif
#ifndef CONFIGFS_MAGIC
#define CONFIGFS_MAGIC 0x62656570
#endif
#ifndef FUSECTL_SUPER_MAGIC
#define FUSECTL_SUPER_MAGIC 0x65735543
#endif

static const char *const devices[] = { "null", "zero", "full", "random", "urandom" };

static int add_op(struct ward_plan *plan, struct ward_mount_op op, struct ward_error *err)
{
	return ward_plan_add_mount(plan, &op, err);
}

static const char *tmpfs_options(struct ward_plan *plan, uint64_t size, uint64_t inodes,
				 const char *mode)
{
	char buf[160];
	int n = snprintf(buf, sizeof(buf), "size=%llu,nr_inodes=%llu,mode=%s,uid=%u,gid=%u",
			 (unsigned long long)size, (unsigned long long)inodes, mode,
			 (unsigned)plan->uid, (unsigned)plan->gid);
	return ward_plan_strdup(plan, buf, (size_t)n);
}

static int prepare_dev(struct ward_plan *plan, struct ward_error *err)
{
	static const struct { const char *target, *link; } links[] = {
		{ "/dev/fd", "/proc/self/fd" }, { "/dev/stdin", "/proc/self/fd/0" },
		{ "/dev/stdout", "/proc/self/fd/1" }, { "/dev/stderr", "/proc/self/fd/2" },
		{ "/dev/shm", "/tmp" },
	};
	int r;
	for (size_t i = 0; i < ARRAY_SIZE(devices); i++) {
		char host[32], *h;
		snprintf(host, sizeof(host), "/dev/%s", devices[i]);
		if (!(h = (char *)ward_plan_strdup(plan, host, strlen(host))))
			return ward_error_set(err, ENOMEM, "mount", "plan arena exhausted");
		r = add_op(plan, (struct ward_mount_op){ .kind = WARD_MNT_BIND, .src = h,
			   .target = h, .device = true, .writable = true }, err);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
		r = add_op(plan, (struct ward_mount_op){ .kind = WARD_MNT_SYMLINK,
			   .target = links[i].target, .src = links[i].link }, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Caller's files, written into the fresh /workspace by the init and handed
 * to the sandbox user. Paths stay inside /workspace: relative, no "..". */
static int prepare_files(struct ward_plan *plan, struct ward_error *err)
{
	uint64_t total = 0;
	for (size_t i = 0; i < plan->n_files; i++) {
		const struct ward_file *f = &plan->files[i];
		const char *p = f->path;
		if (!ward_workspace_path_ok(p))
			return ward_error_set(err, EINVAL, "mount",
					      "file '%s': expected a relative path inside /workspace",
					      p ? p : "");
		total += f->len;
		if (total > plan->policy->workspace_size)
			return ward_error_set(err, EFBIG, "mount",
					      "files larger than the workspace (%llu bytes)",
					      (unsigned long long)plan->policy->workspace_size);
		char target[1100];
		int n = snprintf(target, sizeof(target), "/workspace/%s", p);
		const char *t = ward_plan_strdup(plan, target, (size_t)n);
		if (!t)
			return ward_error_set(err, ENOMEM, "mount", "plan arena exhausted");
		int r = add_op(plan, (struct ward_mount_op){ .kind = WARD_MNT_FILE, .target = t,
			       .data = f->data, .len = f->len, .mode = f->mode ? f->mode : 0644,
			       .owned = true }, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static int idmap_bind(struct ward_plan *plan, struct ward_mount_op *m, struct ward_error *err);

/* "writable" paths below /workspace and /tmp that no file of the caller's
 * names: directories of the sandbox user's, so that a listed path is
 * there to write into (landlock rules need an existing path). */
static int prepare_writable(struct ward_plan *plan, struct ward_error *err)
{
	const struct ward_policy *p = plan->policy;
	for (size_t i = 0; p->writable_only && i < p->n_writable; i++) {
		const char *w = p->writable[i];
		bool file = strcmp(w, "/workspace") == 0 || strcmp(w, "/tmp") == 0;
		for (size_t k = 0; !file && k < plan->n_files; k++)
			file = strncmp(w, "/workspace/", 11) == 0 &&
			       strcmp(w + 11, plan->files[k].path) == 0;
		if (file)
			continue;
		int r = add_op(plan, (struct ward_mount_op){ .kind = WARD_MNT_DIR, .target = w,
			       .mode = 0755, .owned = true }, err);
		if (r < 0)
			return r;
	}
	return 0;
}

int ward_mounts_prepare(struct ward_plan *plan, struct ward_error *err)
{
	const struct ward_policy *p = plan->policy;
	const char *ws = tmpfs_options(plan, p->workspace_size, p->workspace_inodes, "0755");
	const char *tmp = tmpfs_options(plan, p->tmp_size, p->tmp_inodes, "1777");
	if (!ws || !tmp)
		return ward_error_set(err, ENOMEM, "mount", "plan arena exhausted");
	int r = prepare_dev(plan, err);
	if (r < 0)
		return r;
	/* subset=pid hides the kernel's global files; hidepid=invisible hides
	 * processes of other users (PID 1 is one of them). */
	struct ward_mount_op ops[] = {
		{ .kind = WARD_MNT_PROC, .target = "/proc", .data = "hidepid=invisible,subset=pid" },
		{ .kind = WARD_MNT_TMPFS, .target = "/workspace", .data = ws },
		{ .kind = WARD_MNT_TMPFS, .target = "/tmp", .data = tmp },
	};
	for (size_t i = 0; i < ARRAY_SIZE(ops); i++)
		if ((r = add_op(plan, ops[i], err)) < 0)
			return r;
	if ((r = prepare_files(plan, err)) < 0)
		return r;
	if ((r = prepare_writable(plan, err)) < 0)
		return r;
	for (size_t i = 0; i < plan->n_extra_binds; i++) {
		const struct ward_bind *b = &plan->extra_binds[i];
		r = add_op(plan, (struct ward_mount_op){ .kind = WARD_MNT_BIND, .src = b->host,
			   .target = b->inside, .writable = false }, err);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < p->n_binds; i++) {
		const struct ward_bind *b = &p->binds[i];
		r = add_op(plan, (struct ward_mount_op){ .kind = WARD_MNT_BIND, .src = b->host,
			   .target = b->inside ? b->inside : b->host, .writable = b->writable }, err);
		if (r == 0 && b->writable && !plan->rootless)
			r = idmap_bind(plan, &plan->mounts[plan->n_mounts - 1], err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- child side ---- */

static int fail(struct ward_error *err, const char *what, const char *path)
{
	return ward_error_setv(err, errno, "mount", what, " '", path, "'", NULL);
}

/* ---- what a bind source is, after resolution ----
 *
 * The policy refuses "/", /proc, /sys and /dev by name; a symlink or a bind
 * mount elsewhere reaches them under another name. So the opened source is
 * checked too: its filesystem type, and whether it is the host's root or
 * on the filesystem mounted at one of the host's kernel directories.
 * Child-safe (fstatfs, fstat, stat), used by parent and child alike. */

static const struct {
	unsigned long magic;
	const char *name;
} kernel_fs[] = {
	{ PROC_SUPER_MAGIC, "a procfs" }, { SYSFS_MAGIC, "a sysfs" },
	{ DEVPTS_SUPER_MAGIC, "a devpts" }, { MQUEUE_MAGIC, "an mqueue filesystem" },
	{ CGROUP_SUPER_MAGIC, "a cgroup filesystem" }, { CGROUP2_SUPER_MAGIC, "a cgroup2 filesystem" },
	{ DEBUGFS_MAGIC, "a debugfs" }, { TRACEFS_MAGIC, "a tracefs" },
	{ SECURITYFS_MAGIC, "a securityfs" }, { BPF_FS_MAGIC, "a bpf filesystem" },
	{ PSTOREFS_MAGIC, "a pstore filesystem" }, { EFIVARFS_MAGIC, "an efivarfs" },
	{ BINFMTFS_MAGIC, "binfmt_misc" }, { NSFS_MAGIC, "a namespace file" },
	{ CONFIGFS_MAGIC, "a configfs" }, { FUSECTL_SUPER_MAGIC, "a fusectl filesystem" },
};

/* Host directories whose whole filesystem is off limits when it is mounted
 * there (devtmpfs and /dev/shm are tmpfs to fstatfs: only the device
 * number tells them apart). */
static const char *const host_kernel_dirs[] = { "/proc", "/sys", "/dev", "/dev/shm" };

static int refuse(struct ward_error *err, const char *src, const char *what, const char *why)
{
	return ward_error_setv(err, 0, "mount", "cannot share '", src, "' from the host: it ",
			       what, why, NULL);
}

/* Host directories that hold the kernel's interfaces: a source that
 * resolves to one of them, or below, is refused whatever it is called. */
static const char *const host_kernel_trees[] = { "/proc", "/sys", "/dev" };

static bool within(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static int check_source(int fd, const char *src, struct ward_error *err);

/* open_tree of a bind source, checked: the path is resolved once (O_PATH,
 * symlinks followed as a bind would), the resolved name is checked against
 * host_kernel_trees, the tree is cloned from that very fd, and what it is
 * checked by check_source. Returns the tree fd or a negative errno with
 * err set. Child-safe: raw syscalls and stack buffers only. */
static int open_source(const char *src, unsigned flags, bool checked, struct ward_error *err)
{
	int path = open(src, O_PATH | O_CLOEXEC);
	if (path < 0)
		return fail(err, "unable to open", src);
	if (checked) {
		char link[32] = "/proc/self/fd/", real[PATH_MAX];
		char num[12], *d = num + sizeof(num);
		*--d = '\0';
		unsigned v = (unsigned)path;
		do
			*--d = (char)('0' + v % 10);
		while ((v /= 10) != 0);
		ward_strlcat(link, d, sizeof(link));
		ssize_t n = readlink(link, real, sizeof(real) - 1);
		if (n < 0) {
			int r = fail(err, "unable to resolve", src);
			close(path);
			return r;
		}
		real[n] = '\0';
		for (size_t i = 0; i < ARRAY_SIZE(host_kernel_trees); i++)
			if (within(real, host_kernel_trees[i])) {
				close(path);
				return ward_error_setv(err, 0, "mount", "cannot share '", src,
						       "' from the host: it resolves to '", real,
						       "', and ", host_kernel_trees[i],
						       " is a host kernel interface", NULL);
			}
	}
	int tree = (int)ward_open_tree(path, "", flags | AT_EMPTY_PATH);
	int saved = errno;
	close(path);
	if (tree < 0) {
		errno = saved;
		return fail(err, "unable to open", src);
	}
	int r = checked ? check_source(tree, src, err) : 0;
	if (r < 0) {
		close(tree);
		return r;
	}
	return tree;
}

static int check_source(int fd, const char *src, struct ward_error *err)
{
	struct statfs fs;
	struct stat st, root, dir;
	if (fstatfs(fd, &fs) < 0 || fstat(fd, &st) < 0 || stat("/", &root) < 0)
		return fail(err, "unable to inspect", src);
	for (size_t i = 0; i < ARRAY_SIZE(kernel_fs); i++)
		if ((unsigned long)fs.f_type == kernel_fs[i].magic)
			return refuse(err, src, "is ", kernel_fs[i].name);
	if (st.st_dev == root.st_dev && st.st_ino == root.st_ino)
		return refuse(err, src, "is the host's root ", "(\"/\"); bind a specific directory");
	for (size_t i = 0; i < ARRAY_SIZE(host_kernel_dirs); i++) {
		const char *d = host_kernel_dirs[i];
		if (stat(d, &dir) == 0 && dir.st_dev != root.st_dev && dir.st_dev == st.st_dev)
			return refuse(err, src, "resolves into the host's ", d);
	}
	return 0;
}

/* Parent, as root, for a writable bind: the sandbox's user has host ids
 * of its own (the subordinate range), which own nothing on the host, so a
 * plain bind of the caller's directory is not writable inside. An idmapped
 * mount shows the source's owner and group as the sandbox's user and
 * group, and what the program creates there belongs to that owner on the
 * host. Needs CAP_SYS_ADMIN in the initial namespace, so it is done here
 * and the sealed mount is handed to the child (m->fd). A source owned by
 * root is mapped like any other (`ward run --rw ./out:/out` as root works,
 * and the files are root's), which is safe only because nothing the program
 * makes there can carry privilege: seccomp refuses every set-id mode, the
 * program holds no capability (no CAP_SETFCAP for file capabilities, no
 * CAP_FSETID, so a write to an existing setuid file clears its bit), and the
 * mount is nosuid, nodev and noexec (like every writable mount: what the
 * program writes it cannot run). A filesystem without idmap support keeps the
 * plain bind. */
static int idmap_bind(struct ward_plan *plan, struct ward_mount_op *m, struct ward_error *err)
{
	struct stat st;
	int tree = open_source(m->src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE, true, err);
	if (tree < 0)
		return tree;
	int r = 0;
	if (fstat(tree, &st) < 0)
		r = fail(err, "unable to stat", m->src);
	if (r < 0) {
		close(tree);
		return r;
	}
	int ns = ward_userns_idmap_fd(plan, st.st_uid, st.st_gid, err);
	if (ns < 0) {
		close(tree);
		return ns;
	}
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
						  MOUNT_ATTR_NOEXEC,
				   .userns_fd = (uint64_t)ns };
	r = (int)ward_mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr));
	int saved = errno;
	close(ns);
	if (r < 0) {
		close(tree);
		if (saved == EINVAL || saved == EOPNOTSUPP)
			return 0; /* no idmap support below: the plain bind */
		errno = saved;
		return fail(err, "unable to idmap", m->src);
	}
	m->fd = tree;
	return 0;
}

int ward_mounts_open_sources(struct ward_plan *plan, struct ward_error *err)
{
	for (size_t i = 0; i < plan->n_mounts; i++) {
		struct ward_mount_op *m = &plan->mounts[i];
		if (m->kind != WARD_MNT_BIND || m->fd >= 0)
			continue; /* an idmapped bind was opened and sealed by the parent */
		unsigned flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC;
		if (!m->device)
			flags |= AT_RECURSIVE;
		int fd = open_source(m->src, flags, !m->device, err);
		if (fd < 0) {
			if (m->optional && fd == -ENOENT)
				continue;
			return fd;
		}
		m->fd = fd;
		struct mount_attr attr = { .attr_set = MOUNT_ATTR_NOSUID };
		/* noexec wherever the sandbox can write: no execve, no ld.so and
		 * no mmap(PROT_EXEC) of a file it made (docs/threat-model.md) */
		if (m->device || m->writable || m->noexec)
			attr.attr_set |= MOUNT_ATTR_NOEXEC;
		if (!m->device)
			attr.attr_set |= MOUNT_ATTR_NODEV;
		if (!m->writable)
			attr.attr_set |= MOUNT_ATTR_RDONLY;
		if (ward_mount_setattr(m->fd, "", AT_EMPTY_PATH | (m->device ? 0 : AT_RECURSIVE),
				       &attr, sizeof(attr)) < 0)
			return fail(err, "unable to seal", m->src);
	}
	return 0;
}

/* Opens (creating as needed) each component of `path` below dirfd, never
 * following a symlink; returns an O_PATH fd of the last directory. When
 * `leaf_file` is set the last component is created as an empty file. */
static int walk_create(int rootfd, const char *path, bool leaf_file, unsigned mode)
{
	char buf[PATH_MAX];
	if (ward_strlcpy(buf, path, sizeof(buf)) >= sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	/* cur is rootfd itself until the first component is open: rootfd is
	 * the caller's, never closed here */
	int cur = rootfd;
	char *s = buf;
	while (cur >= 0 && *s) {
		while (*s == '/')
			s++;
		if (!*s)
			break;
		char *e = strchr(s, '/');
		if (e)
			*e = '\0';
		bool last = !e || !e[1 + strspn(e + 1, "/")];
		if (last && leaf_file) {
			int f = openat(cur, s, O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
			if (f >= 0)
				close(f);
		} else if (mkdirat(cur, s, last ? mode : 0755) < 0 && errno != EEXIST) {
			if (cur != rootfd)
				close(cur);
			return -1;
		}
		int next = openat(cur, s, O_PATH | O_NOFOLLOW | O_CLOEXEC | (last && leaf_file ? 0 : O_DIRECTORY));
		if (cur != rootfd)
			close(cur);
		cur = next;
		s = e ? e + 1 : s + strlen(s);
	}
	return cur == rootfd ? (int)fcntl(rootfd, F_DUPFD_CLOEXEC, 3) : cur;
}

/* Full path of target inside the staging root, for mount(2) calls. */
static const char *staged(char *buf, size_t len, const char *target)
{
	ward_strlcpy(buf, STAGE, len);
	ward_strlcat(buf, target, len);
	return buf;
}

static int apply_one(int rootfd, const struct ward_plan *plan, struct ward_mount_op *m,
		     struct ward_error *err)
{
	char path[PATH_MAX];
	int fd = -1, r = 0;
	switch (m->kind) {
	case WARD_MNT_DIR:
		fd = walk_create(rootfd, m->target, false, m->mode ? m->mode : 0755);
		if (fd >= 0 && m->owned && fchownat(fd, "", plan->uid, plan->gid, AT_EMPTY_PATH) < 0)
			r = -1;
		break;
	case WARD_MNT_FILE:
		fd = walk_create(rootfd, m->target, true, 0);
		if (fd >= 0) {
			int w = ward_write_file_at(AT_FDCWD, staged(path, sizeof(path), m->target),
						   m->data, m->len, O_TRUNC, 0644);
			if (w < 0)
				errno = -w, r = -1;
			else if (m->owned && (fchownat(fd, "", plan->uid, plan->gid, AT_EMPTY_PATH) < 0 ||
					      fchmodat(AT_FDCWD, path, m->mode & 07777, 0) < 0))
				r = -1;
		}
		break;
	case WARD_MNT_SYMLINK: {
		const char *slash = strrchr(m->target, '/');
		char parent[PATH_MAX];
		ward_strlcpy(parent, m->target, sizeof(parent));
		parent[slash - m->target] = '\0';
		fd = walk_create(rootfd, parent, false, 0755);
		if (fd >= 0 && symlinkat(m->src, fd, slash + 1) < 0)
			r = -1;
		break;
	}
	case WARD_MNT_BIND: {
		if (m->fd < 0)
			return 0; /* optional and absent */
		struct stat st;
		if (fstat(m->fd, &st) < 0)
			return fail(err, "unable to stat", m->src);
		fd = walk_create(rootfd, m->target, !S_ISDIR(st.st_mode), 0755);
		if (fd >= 0 && ward_move_mount(m->fd, "", fd, "",
					       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
			r = -1;
		break;
	}
	case WARD_MNT_TMPFS:
	case WARD_MNT_PROC:
		fd = walk_create(rootfd, m->target, false, 0755);
		if (fd >= 0 && mount(m->kind == WARD_MNT_PROC ? "proc" : "tmpfs",
				     staged(path, sizeof(path), m->target),
				     m->kind == WARD_MNT_PROC ? "proc" : "tmpfs",
				     MS_NOSUID | MS_NODEV | MS_NOEXEC, /* writable or procfs */
				     m->data) < 0)
			r = -1;
		break;
	}
	if (fd < 0 || r < 0) {
		int saved = errno;
		if (fd >= 0)
			close(fd);
		errno = saved;
		return fail(err, "unable to create", m->target);
	}
	close(fd);
	return 0;
}

int ward_mounts_apply(struct ward_plan *plan, struct ward_error *err)
{
	/* Nothing we mount may propagate back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return fail(err, "unable to make private", "/");
	if (mount("tmpfs", STAGE, "tmpfs", MS_NOSUID | MS_NODEV,
		  "size=4m,nr_inodes=4096,mode=0755") < 0)
		return fail(err, "unable to mount the root tmpfs on", STAGE);
	int rootfd = open(STAGE, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return fail(err, "unable to open", STAGE);
	for (size_t i = 0; i < plan->n_mounts; i++) {
		int r = apply_one(rootfd, plan, &plan->mounts[i], err);
		if (r < 0) {
			close(rootfd);
			return r;
		}
		if (plan->mounts[i].fd >= 0) {
			close(plan->mounts[i].fd);
			plan->mounts[i].fd = -1;
		}
	}
	close(rootfd);
	/* pivot_root(".", "."): the old root ends up stacked on the new one and
	 * is detached at once, so no path to the host remains. */
	if (chdir(STAGE) < 0)
		return fail(err, "unable to enter", STAGE);
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return fail(err, "unable to pivot_root into", STAGE);
	if (umount2(".", MNT_DETACH) < 0)
		return fail(err, "unable to detach the old root", "/");
	if (chdir("/") < 0)
		return fail(err, "unable to enter", "/");
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
		  NULL) < 0)
		return fail(err, "unable to make read-only", "/");
	return 0;
}
