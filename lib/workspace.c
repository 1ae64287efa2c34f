/* lib/workspace.c — see workspace.h. */
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "base/util.h"
#include "workspace.h"

bool ward_workspace_path_ok(const char *p)
{
	size_t n = p ? strlen(p) : 0;
	if (n == 0 || n > WARD_WORKSPACE_PATH_MAX || p[0] == '/')
		return false;
	for (const char *c = p; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return false;
	/* each component: not empty, not ".", not ".." */
	for (const char *c = p;;) {
		const char *slash = strchr(c, '/');
		size_t len = slash ? (size_t)(slash - c) : strlen(c);
		if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!slash)
			return true;
		c = slash + 1;
	}
}

int ward_open_beneath(int dirfd, const char *name, int flags, unsigned mode)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
		.mode = (flags & O_CREAT) ? mode : 0,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	return (int)syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
}

int ward_workspace_open(const struct ward_sandbox *sb)
{
	int root = ward_sandbox_open_root(sb);
	if (root < 0)
		return -1;
	/* /workspace is a mount of its own: no NO_XDEV for this one step */
	struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	int ws = (int)syscall(SYS_openat2, root, "workspace", &how, sizeof(how));
	int e = errno;
	close(root);
	errno = e;
	return ws;
}

DIR *ward_dir_stream(int dirfd)
{
	int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d && fd >= 0) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return d;
}

int ward_mkdirs_beneath(int dir, const char *rel, const char **leaf)
{
	const char *slash = strrchr(rel, '/');
	*leaf = slash ? slash + 1 : rel;
	int cur = fcntl(dir, F_DUPFD_CLOEXEC, 3);
	if (!slash || cur < 0)
		return cur;
	char buf[4096];
	if ((size_t)(slash - rel) >= sizeof(buf)) {
		close(cur);
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, rel, (size_t)(slash - rel));
	buf[slash - rel] = '\0';
	for (char *save = NULL, *comp = strtok_r(buf, "/", &save); comp;
	     comp = strtok_r(NULL, "/", &save)) {
		int next = -1;
		if (mkdirat(cur, comp, 0755) == 0 || errno == EEXIST)
			next = ward_open_beneath(cur, comp, O_RDONLY | O_DIRECTORY, 0);
		int e = errno;
		close(cur);
		if (next < 0) {
			errno = e;
			return -1;
		}
		cur = next;
	}
	return cur;
}

int ward_workspace_write(int ws, const char *path, const void *data, size_t len, unsigned mode)
{
	const char *leaf;
	int e = 0, dir = ward_mkdirs_beneath(ws, path, &leaf);
	/* no O_TRUNC before the type is known: a FIFO stays untouched */
	int fd = dir < 0 ? -1 : ward_open_beneath(dir, leaf, O_WRONLY | O_CREAT | O_NONBLOCK, mode);
	struct stat st = { 0 };
	if (fd < 0 || fstat(fd, &st) < 0)
		e = errno;
	else if (!S_ISREG(st.st_mode))
		e = EEXIST;
	else if (ftruncate(fd, 0) < 0)
		e = errno;
	for (size_t off = 0; fd >= 0 && !e && off < len;) {
		ssize_t n = write(fd, (const char *)data + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			e = n < 0 ? errno : EIO;
		else
			off += (size_t)n;
	}
	/* the mode past the umask, and for a file that existed */
	if (fd >= 0 && !e && fchmod(fd, (mode_t)mode) < 0)
		e = errno;
	if (e && fd >= 0 && S_ISREG(st.st_mode))
		unlinkat(dir, leaf, 0); /* no half-written file stays */
	if (fd >= 0)
		close(fd);
	if (dir >= 0)
		close(dir);
	return -e;
}
