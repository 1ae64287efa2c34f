/* lib/layers/rundir.c — ward's runtime directory: what is prepared once
 * and reused by later runs (the /etc template, the leftover-scan stamp).
 *
 * As root of the initial user namespace: /run/ward. Otherwise
 * $XDG_RUNTIME_DIR/ward, else $XDG_STATE_HOME/ward, else
 * $HOME/.local/state/ward, made 0750 as root (as `ward serve` makes it for
 * its socket), else 0700. Parent-only. It must never hand out a directory
 * that another user could write: the directory itself is the caller's and
 * closed to group and others, every directory above it is root's or the
 * caller's and writable by others only with the sticky bit. Anything else
 * fails closed (the callers then do without: the per-run path).
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/util.h"
#include "sandbox.h"

static int default_path(char *buf, size_t len, bool initial)
{
	const char *xdg_run = getenv("XDG_RUNTIME_DIR"), *xdg_state = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");
	int n;
	if (geteuid() == 0 && initial)
		n = snprintf(buf, len, "/run/ward");
	else if (xdg_run && xdg_run[0] == '/')
		n = snprintf(buf, len, "%s/ward", xdg_run);
	else if (xdg_state && xdg_state[0] == '/')
		n = snprintf(buf, len, "%s/ward", xdg_state);
	else if (home && home[0] == '/')
		n = snprintf(buf, len, "%s/.local/state/ward", home);
	else
		return -ENOENT;
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Whether st may sit on the way to the runtime directory (last: is it). In
 * a nested user namespace host root shows as the overflow uid. */
static bool dir_ok(const struct stat *st, bool last, uid_t unmapped)
{
	uid_t me = geteuid();
	if (!S_ISDIR(st->st_mode))
		return false;
	if (last)
		return st->st_uid == me && !(st->st_mode & 022);
	if (st->st_uid != 0 && st->st_uid != me && st->st_uid != unmapped)
		return false;
	return !(st->st_mode & 022) || (st->st_mode & S_ISVTX);
}

/* Walks path from "/" without following a symlink, creating what is missing
 * (mode), checking each directory on its open fd. Returns an O_PATH fd of
 * the last one, or -errno. */
static int walk_checked(const char *path, mode_t mode, uid_t unmapped)
{
	char buf[PATH_MAX];
	if (ward_strlcpy(buf, path, sizeof(buf)) >= sizeof(buf))
		return -ENAMETOOLONG;
	int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	char *save = NULL;
	for (char *c = strtok_r(buf + 1, "/", &save); fd >= 0 && c;) {
		char *next = strtok_r(NULL, "/", &save);
		if (mkdirat(fd, c, mode) == 0 && !next)
			(void)!fchmodat(fd, c, mode, 0); /* whatever the umask took away */
		int sub = openat(fd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		struct stat st;
		if (sub >= 0 && (fstat(sub, &st) < 0 || !dir_ok(&st, !next, unmapped))) {
			close(sub);
			return -EPERM;
		}
		fd = sub;
		c = next;
	}
	return fd < 0 ? -errno : fd;
}

int ward_rundir_open(char *path, size_t len)
{
	bool initial = ward_proc_initial_userns(NULL);
	int r = default_path(path, len, initial);
	if (r < 0)
		return r;
	return walk_checked(path, geteuid() == 0 && initial ? 0750 : 0700,
			    initial ? (uid_t)-1 : ward_proc_overflow_uid());
}
