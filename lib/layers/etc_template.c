/* lib/layers/etc_template.c — the image's /etc, prepared once and shared
 * read-only by the sandboxes that want the same one.
 *
 * Writing /etc (~160 KB of host files and the generated accounts) into each
 * sandbox's root cost more than any other step of its mount tree. Instead
 * the tree is built once in ward's runtime directory (lib/layers/rundir.c)
 * as etc-<key>/etc, where the key is a digest of everything that decides
 * its contents: ward's version, the caller's id, every generated file, and
 * the identity (device, inode, size, mtime, ctime) of every host file copied.
 * Each sandbox then binds it read-only, nosuid, nodev and noexec at /etc.
 *
 * A template is used only when it verifies: its directory is the caller's
 * and closed to group and others, and every entry still has the inode,
 * ctime, size, mode and owner its manifest recorded when it was built (a
 * write, a chmod, a replacement or an added entry changes one of them).
 * Anything else is moved aside and rebuilt; a build is made in a temporary
 * directory and renamed into place, so a reader never sees half a template.
 * A good template is never removed by a run: a sandbox may have it mounted
 * (a session, for days), and removing its files would empty that sandbox's
 * /etc. No more than MAX_TEMPLATES are kept: past that, /etc is written per
 * sandbox; `ward gc` removes the ones unused for a day.
 * Parent-only. Never follows a symlink inside the runtime directory.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include "base/util.h"
#include "config.h"
#include "sandbox.h"

enum {
	KEY_BYTES = 16,
	MANIFEST_MAX = 64 * 1024,
	COPY_MAX = 4 << 20,       /* a host file larger than this is left out */
	REMOVE_DEPTH = 8,
	UNUSED_S = 24 * 3600,     /* `ward gc` removes what was unused for a day */
	MAX_TEMPLATES = 8,        /* beyond this many, /etc is written per sandbox */
	TOUCH_S = 3600,           /* a use refreshes the manifest's mtime this often */
};

/* ---- the key ---- */

static void hash_str(crypto_generichash_state *h, const char *s, size_t n)
{
	uint64_t len = n;
	crypto_generichash_update(h, (const unsigned char *)&len, sizeof(len));
	crypto_generichash_update(h, (const unsigned char *)s, n);
}

static void hash_u64(crypto_generichash_state *h, uint64_t v)
{
	crypto_generichash_update(h, (const unsigned char *)&v, sizeof(v));
}

/* Fills st of each COPY entry (st_ino 0: absent) and the key's hex form. */
static void compute_key(const struct ward_etc_entry *e, size_t n, struct stat *st,
			char hex[2 * KEY_BYTES + 1])
{
	crypto_generichash_state h;
	unsigned char key[KEY_BYTES];
	crypto_generichash_init(&h, NULL, 0, sizeof(key));
	hash_str(&h, "ward-etc-template-1 " WARD_VERSION_STRING, strlen("ward-etc-template-1 " WARD_VERSION_STRING));
	hash_u64(&h, geteuid());
	hash_u64(&h, getegid());
	for (size_t i = 0; i < n; i++) {
		hash_u64(&h, e[i].kind);
		hash_str(&h, e[i].name, strlen(e[i].name));
		hash_str(&h, e[i].data ? e[i].data : "", e[i].kind == WARD_ETC_FILE ? e[i].len
						: e[i].data ? strlen(e[i].data) : 0);
		if (e[i].kind != WARD_ETC_COPY)
			continue;
		memset(&st[i], 0, sizeof(st[i]));
		if (stat(e[i].data, &st[i]) < 0 || !S_ISREG(st[i].st_mode) || st[i].st_size > COPY_MAX)
			st[i].st_ino = 0;
		uint64_t id[] = {
			st[i].st_dev, st[i].st_ino, (uint64_t)st[i].st_size,
			(uint64_t)st[i].st_mtim.tv_sec, (uint64_t)st[i].st_mtim.tv_nsec,
			(uint64_t)st[i].st_ctim.tv_sec, (uint64_t)st[i].st_ctim.tv_nsec,
		};
		for (size_t j = 0; j < ARRAY_SIZE(id); j++)
			hash_u64(&h, id[j]);
	}
	crypto_generichash_final(&h, key, sizeof(key));
	sodium_bin2hex(hex, 2 * KEY_BYTES + 1, key, sizeof(key));
}

/* ---- removing a tree without following links ---- */

static void remove_tree(int parent, const char *name, int depth)
{
	if (unlinkat(parent, name, 0) == 0 || errno == ENOENT)
		return;
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	struct dirent *de;
	while (depth < REMOVE_DEPTH && (de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			remove_tree(dirfd(d), de->d_name, depth + 1);
	closedir(d);
	unlinkat(parent, name, AT_REMOVEDIR);
}

static void random_name(char *buf, size_t len, const char *prefix)
{
	unsigned char b[8] = { 0 };
	char hex[17];
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		memcpy(b, &(uint64_t){ ward_now_ns() }, sizeof(b));
	sodium_bin2hex(hex, sizeof(hex), b, sizeof(b));
	snprintf(buf, len, "%s%s", prefix, hex);
}

static bool verify(int rundir, const char *name, uid_t me);

/* Moves a template that failed to verify out of the way, then removes it.
 * Another run may have rebuilt it in between: what was moved is checked
 * again, and a good one is put back (or, if a newer one took its place
 * meanwhile, left aside for `ward gc`: a sandbox may have it mounted, and
 * removing its files would empty that sandbox's /etc). */
static void discard(int rundir, const char *name)
{
	char trash[64];
	random_name(trash, sizeof(trash), ".trash-");
	if (renameat(rundir, name, rundir, trash) < 0)
		return;
	if (!verify(rundir, trash, geteuid()))
		remove_tree(rundir, trash, 0);
	else
		renameat2(rundir, trash, rundir, name, RENAME_NOREPLACE);
}

/* ---- the manifest: one line per entry, "mode ino size ctime.ns name" ---- */

static bool stat_ok(const struct stat *st, uid_t me)
{
	/* a symlink's own mode is always 0777 and never used */
	return st->st_uid == me && (S_ISLNK(st->st_mode) || !(st->st_mode & 022)) &&
	       (!S_ISREG(st->st_mode) || st->st_nlink == 1);
}

static int manifest_line(char *buf, size_t len, int etc, const char *name, struct stat *out)
{
	struct stat tmp, *stp = out ? out : &tmp;
	if (fstatat(etc, name, stp, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	const struct stat st = *stp;
	int n = snprintf(buf, len, "%o %llu %lld %lld.%09ld %s\n", (unsigned)st.st_mode,
			 (unsigned long long)st.st_ino, (long long)st.st_size,
			 (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec, name);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : n;
}

/* Checks every line of the manifest against what is on disk now. */
static bool verify(int rundir, const char *name, uid_t me)
{
	struct stat st;
	_cleanup_free_ char *buf = malloc(MANIFEST_MAX + 1);
	if (!buf)
		return false;
	_cleanup_close_ int top = openat(rundir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (top < 0 || fstat(top, &st) < 0 || !stat_ok(&st, me))
		return false;
	_cleanup_close_ int etc = openat(top, "etc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int mf = openat(top, "manifest", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (etc < 0 || mf < 0 || fstat(mf, &st) < 0 || !S_ISREG(st.st_mode) || !stat_ok(&st, me))
		return false;
	ssize_t len = ward_read_full(mf, buf, MANIFEST_MAX + 1);
	if (len <= 0 || len > MANIFEST_MAX)
		return false;
	buf[len] = '\0';
	time_t now = time(NULL);
	if (now - st.st_mtim.tv_sec > TOUCH_S)
		futimens(mf, NULL); /* in use: not removed as unused */
	size_t lines = 0;
	for (char *line = buf, *next; *line; line = next) {
		char want[PATH_MAX + 128], got[PATH_MAX + 128];
		next = strchr(line, '\n');
		if (!next)
			return false;
		*next++ = '\0';
		const char *nm = strrchr(line, ' ');
		if (!nm || manifest_line(got, sizeof(got), etc, nm + 1, &st) < 0 || !stat_ok(&st, me))
			return false;
		snprintf(want, sizeof(want), "%s\n", line);
		if (strcmp(want, got) != 0)
			return false;
		lines++;
	}
	return lines > 0;
}

/* ---- building ---- */

/* mkdir -p of name's parent below etc; each new directory 0755. */
static int make_parents(int etc, const char *name)
{
	char part[PATH_MAX];
	ward_strlcpy(part, name, sizeof(part));
	for (char *s = strchr(part, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (mkdirat(etc, part, 0755) == 0) {
			if (fchmodat(etc, part, 0755, 0) < 0)
				return -errno;
		} else if (errno != EEXIST) {
			return -errno;
		}
		*s = '/';
	}
	return 0;
}

/* Appends the line of name (once) to the manifest. */
static int add_line(int etc, const char *name, char *buf, size_t cap, size_t *used)
{
	char probe[PATH_MAX + 2];
	snprintf(probe, sizeof(probe), " %s\n", name);
	buf[*used] = '\0';
	if (strstr(buf, probe))
		return 0;
	int n = manifest_line(buf + *used, cap - *used, etc, name, NULL);
	if (n < 0)
		return n;
	*used += (size_t)n;
	return 0;
}

/* The manifest, written once the tree is complete: every directory's ctime
 * has moved for the last time. */
static int add_lines(int etc, const struct ward_etc_entry *e, char *buf, size_t cap, size_t *used)
{
	char part[PATH_MAX];
	int r = 0;
	ward_strlcpy(part, e->name, sizeof(part));
	for (char *s = strchr(part, '/'); r == 0 && s; s = strchr(s + 1, '/')) {
		*s = '\0';
		r = add_line(etc, part, buf, cap, used);
		*s = '/';
	}
	return r < 0 ? r : add_line(etc, e->name, buf, cap, used);
}

static int write_fd(int fd, const char *data, size_t len)
{
	int r = ward_write_all(fd, data, len);
	if (r == 0 && fchmod(fd, 0644) < 0)
		r = -errno;
	return r;
}

/* A host file, copied only if it is still the one the key names. */
static int copy_file(int etc, const char *name, const char *src, const struct stat *want)
{
	_cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (in < 0 || fstat(in, &st) < 0)
		return -errno;
	if (st.st_ino != want->st_ino || st.st_dev != want->st_dev || st.st_size != want->st_size ||
	    st.st_mtim.tv_sec != want->st_mtim.tv_sec || st.st_mtim.tv_nsec != want->st_mtim.tv_nsec)
		return -EAGAIN;
	_cleanup_free_ char *data = malloc((size_t)st.st_size + 1);
	ssize_t n = data ? ward_read_full(in, data, (size_t)st.st_size + 1) : -ENOMEM;
	if (n != st.st_size)
		return n < 0 ? (int)n : -EAGAIN;
	_cleanup_close_ int out = openat(etc, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	return out < 0 ? -errno : write_fd(out, data, (size_t)n);
}

static int build_entry(int etc, const struct ward_etc_entry *e, const struct stat *st)
{
	switch (e->kind) {
	case WARD_ETC_FILE: {
		_cleanup_close_ int fd = openat(etc, e->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		return fd < 0 ? -errno : write_fd(fd, e->data, e->len);
	}
	case WARD_ETC_COPY:
		return copy_file(etc, e->name, e->data, st);
	case WARD_ETC_LINK:
		return symlinkat(e->data, etc, e->name) < 0 ? -errno : 0;
	case WARD_ETC_DIR:
		if (mkdirat(etc, e->name, 0755) < 0 && errno != EEXIST)
			return -errno;
		return fchmodat(etc, e->name, 0755, 0) < 0 ? -errno : 0;
	}
	return -EINVAL;
}

/* Builds the tree in tmp/etc and its manifest in tmp/manifest. A host
 * file that is absent (st_ino 0) is left out, as from a synthesized /etc. */
static int build(int rundir, const char *tmp, const struct ward_etc_entry *e, size_t n,
		 const struct stat *st)
{
	_cleanup_free_ char *manifest = malloc(MANIFEST_MAX);
	size_t used = 0;
	if (!manifest)
		return -ENOMEM;
	if (mkdirat(rundir, tmp, 0755) < 0 || fchmodat(rundir, tmp, 0755, 0) < 0)
		return -errno;
	_cleanup_close_ int top = openat(rundir, tmp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (top < 0 || mkdirat(top, "etc", 0755) < 0 || fchmodat(top, "etc", 0755, 0) < 0)
		return -errno;
	_cleanup_close_ int etc = openat(top, "etc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (etc < 0)
		return -errno;
	int r = 0;
	for (size_t i = 0; r == 0 && i < n; i++)
		if (e[i].kind != WARD_ETC_COPY || st[i].st_ino)
			if ((r = make_parents(etc, e[i].name)) == 0)
				r = build_entry(etc, &e[i], &st[i]);
	for (size_t i = 0; r == 0 && i < n; i++)
		if (e[i].kind != WARD_ETC_COPY || st[i].st_ino)
			r = add_lines(etc, &e[i], manifest, MANIFEST_MAX, &used);
	if (r == 0)
		r = add_line(etc, ".", manifest, MANIFEST_MAX, &used);
	if (r < 0)
		return r;
	_cleanup_close_ int mf = openat(top, "manifest", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	return mf < 0 ? -errno : write_fd(mf, manifest, used);
}

/* How many templates the runtime directory holds. */
static size_t count_templates(int rundir)
{
	size_t n = 0;
	int fd = openat(rundir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return MAX_TEMPLATES;
	}
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		n += strncmp(de->d_name, "etc-", 4) == 0;
	closedir(d);
	return n;
}

int ward_etc_template_gc(int rundir)
{
	int fd = openat(rundir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	time_t now = time(NULL);
	struct dirent *de;
	int removed = 0;
	while ((de = readdir(d)) != NULL) {
		char mf[300];
		struct stat st;
		bool tmp = strncmp(de->d_name, ".trash-", 7) == 0 || strncmp(de->d_name, ".build-", 7) == 0;
		if (!tmp && strncmp(de->d_name, "etc-", 4) != 0)
			continue;
		/* a template's age is its manifest's, refreshed by its use */
		snprintf(mf, sizeof(mf), "%s/%s", de->d_name, tmp ? "." : "manifest");
		if (fstatat(rundir, mf, &st, AT_SYMLINK_NOFOLLOW) == 0 && now - st.st_mtim.tv_sec <= UNUSED_S)
			continue;
		remove_tree(rundir, de->d_name, 0);
		removed++;
	}
	closedir(d);
	return removed;
}

int ward_etc_template_get(int rundir, const char *rundir_path, const struct ward_etc_entry *e,
			  size_t n, char *out, size_t len)
{
	char key[2 * KEY_BYTES + 1], name[64], tmp[64];
	struct stat st[WARD_ETC_MAX];
	uid_t me = geteuid();
	if (n > WARD_ETC_MAX)
		return -E2BIG;
	compute_key(e, n, st, key);
	snprintf(name, sizeof(name), "etc-%s", key);
	int w = snprintf(out, len, "%s/%s/etc", rundir_path, name);
	if (w < 0 || (size_t)w >= len)
		return -ENAMETOOLONG;
	if (verify(rundir, name, me))
		return 0;
	/* Not what it should be: aside with it. Absent: build it, unless the
	 * directory holds enough templates already (host files that change
	 * often): a bound on what the runtime directory holds. */
	if (faccessat(rundir, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		discard(rundir, name);
	if (count_templates(rundir) >= MAX_TEMPLATES)
		return -ENOSPC;
	random_name(tmp, sizeof(tmp), ".build-");
	int r = build(rundir, tmp, e, n, st);
	if (r == 0 && renameat(rundir, tmp, rundir, name) < 0)
		r = -errno; /* another run was faster: use its template */
	if (r < 0)
		remove_tree(rundir, tmp, 0);
	return verify(rundir, name, me) ? 0 : (r < 0 ? r : -EPERM);
}
