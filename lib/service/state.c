/* lib/service/state.c — the state store: what must survive a crash of the
 * daemon, and one daemon per state directory.
 *
 * A state file per live session (state_dir/sessions/ID.json) lets the next
 * daemon turn a killed one's sessions into tombstones; their sandboxes are
 * found by ward's own cgroups, never by a pid in a file. The directory
 * must be the daemon user's and closed to others (checked on every
 * component of its path), and an exclusive lock on it is held for the
 * core's lifetime, so a second daemon refuses before it reads or removes
 * anything.
 */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/util.h"
#include "cgroup.h"
#include "session.h"

static int state_path(struct ward_service *s, const char *id, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/sessions/%s.json", s->cfg.state_dir, id);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

void sess_state_write(struct session *se)
{
	char path[PATH_MAX];
	if (state_path(se->s, se->id, path, sizeof(path)) < 0)
		return;
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:f}", "id", se->id, "tenant",
			      se->key.tenant, "key_id", se->key.id, "sandbox_id", se->sandbox_id,
			      "created", se->created);
	int fd = o ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
	if (o && (fd < 0 || json_dumpfd(o, fd, JSON_COMPACT) < 0))
		fprintf(stderr, "ward: serve: unable to write '%s': %s\n", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	json_decref(o);
}

void sess_state_remove(struct session *se)
{
	char path[PATH_MAX];
	if (state_path(se->s, se->id, path, sizeof(path)) == 0)
		unlink(path);
}

/* A state file is the daemon's own: a regular file of its user, closed to
 * others, small. Anything else is ignored and removed. */
static json_t *state_read(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	json_t *o = NULL;
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	    !(st.st_mode & 022) && st.st_size <= 4096) {
		json_error_t je;
		o = json_loadfd(fd, JSON_REJECT_DUPLICATES, &je);
	}
	close(fd);
	return o;
}

/* A session of a daemon that was killed: its sandbox is already gone (the
 * init dies with its supervisor, PR_SET_PDEATHSIG, and ward_cgroup_gc has
 * removed the dead supervisor's cgroups); the file only makes it a
 * tombstone. Nothing in it is ever used to signal a process. */
static void recover_one(struct ward_service *s, int dfd, const char *name)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/sessions/%s", s->cfg.state_dir, name);
	json_t *o = state_read(dfd, name);
	const char *id = json_string_value(json_object_get(o, "id"));
	const char *tenant = json_string_value(json_object_get(o, "tenant"));
	const char *key_id = json_string_value(json_object_get(o, "key_id"));
	const char *sbid = json_string_value(json_object_get(o, "sandbox_id"));
	double created = json_number_value(json_object_get(o, "created"));
	unlinkat(dfd, name, 0);
	if (!id || !tenant || !key_id || !sbid || strlen(id) >= 24 || strlen(tenant) > WARD_KEY_TENANT_MAX ||
	    strlen(key_id) >= sizeof(((struct ward_key_info *)0)->id)) {
		fprintf(stderr, "ward: serve: %s: not a session state file; removed\n", path);
		json_decref(o);
		return;
	}
	struct session *se = calloc(1, sizeof(*se));
	if (se) {
		se->s = s;
		se->epfd = -1;
		ward_strlcpy(se->id, id, sizeof(se->id));
		ward_strlcpy(se->key.tenant, tenant, sizeof(se->key.tenant));
		ward_strlcpy(se->key.id, key_id, sizeof(se->key.id));
		ward_strlcpy(se->sandbox_id, sbid, sizeof(se->sandbox_id));
		ward_strlcpy(se->ended, "lost", sizeof(se->ended));
		ward_strlcpy(se->reason, "the daemon was killed; its sandbox was removed at restart",
			     sizeof(se->reason));
		se->contexts = json_object();
		se->created = se->last_used = created;
		se->tomb_until_ns = ward_now_ns() + 3600ull * 1000000000ull;
		struct ward_error e2;
		ward_policy_init(&se->call, &e2);
		se->next = s->sessions;
		s->sessions = se;
	}
	json_t *f = json_pack("{s:s, s:s, s:s, s:s}", "session_id", id, "tenant", tenant,
			      "key_id", key_id, "sandbox_id", sbid);
	svc_audit(s, "session.lost", f);
	json_decref(f);
	fprintf(stderr, "ward: serve: session %s (tenant %s) was lost with the previous daemon\n",
		id, tenant);
	json_decref(o);
}

int session_recover(struct ward_service *s)
{
	/* ward_service_open_state has checked and locked state_dir: only this
	 * user writes it */
	char dir[PATH_MAX];
	struct stat st;
	snprintf(dir, sizeof(dir), "%s/sessions", s->cfg.state_dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		fprintf(stderr, "ward: error: serve: state-dir: unable to create '%s': %s\n", dir,
			strerror(errno));
		return -1;
	}
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd >= 0 && fstat(dfd, &st) == 0 && (st.st_uid != geteuid() || (st.st_mode & 022))) {
		fprintf(stderr, "ward: error: serve: state-dir: '%s' %s\n", dir,
			st.st_uid != geteuid() ? "is not owned by the daemon's user"
					       : "is writable by group or others (chmod go-w)");
		close(dfd);
		return -1;
	}
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		fprintf(stderr, "ward: error: serve: state-dir: unable to open '%s': %s\n", dir,
			strerror(errno));
		if (dfd >= 0)
			close(dfd);
		return -1;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n > 5 && strcmp(e->d_name + n - 5, ".json") == 0)
			recover_one(s, dfd, e->d_name);
	}
	closedir(d);
	return 0;
}

/* --- the state directory --- */

/* Root's in /var/lib; a user's in $XDG_STATE_HOME (or ~/.local/state):
 * never beside a socket, which may sit in a world-writable directory. Root
 * of a nested user namespace (`unshare -r`) is a user here: /var/lib is not
 * its own. */
static int state_dir_default(struct ward_service *s)
{
	char dir[PATH_MAX];
	const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	int n;
	if (geteuid() == 0 && ward_proc_initial_userns(NULL))
		n = snprintf(dir, sizeof(dir), "/var/lib/ward");
	else if (xdg && xdg[0] == '/')
		n = snprintf(dir, sizeof(dir), "%s/ward", xdg);
	else if (home && home[0] == '/')
		n = snprintf(dir, sizeof(dir), "%s/.local/state/ward", home);
	else {
		fprintf(stderr, "ward: error: serve: state-dir: no default without $HOME or "
			"$XDG_STATE_HOME; give --state-dir\n");
		return -1;
	}
	if (n < 0 || (size_t)n >= sizeof(dir) || !(s->cfg.state_dir = strdup(dir)))
		return -1;
	return 0;
}

/* Why a directory of the state path is unsafe, or NULL. The state
 * directory itself (last) must be the daemon user's and closed to others;
 * a directory above it must be root's or the daemon user's, and writable by
 * others only with the sticky bit (/tmp), where nobody else can move the
 * entries below. In a nested user namespace host root is unmapped and shows
 * as the overflow uid, like every other unmapped owner: such a directory
 * above is accepted (ward cannot tell host root from another unmapped user
 * there; docs/api.md says so), the state directory itself never. */
static const char *dir_unsafe(const struct stat *st, bool last, uid_t unmapped)
{
	uid_t me = geteuid();
	if (!S_ISDIR(st->st_mode))
		return "is not a directory";
	if (last && st->st_uid != me)
		return "is not owned by the daemon's user";
	if (!last && st->st_uid != 0 && st->st_uid != me && st->st_uid != unmapped)
		return "is owned by another user";
	if (last && (st->st_mode & 022))
		return "is writable by group or others (chmod go-w)";
	if (!last && (st->st_mode & 022) && !(st->st_mode & S_ISVTX))
		return "is writable by group or others and not sticky";
	return NULL;
}

/* Creates what is missing (0700), then walks the resolved path from / with
 * O_NOFOLLOW, checking each directory's owner and mode on the open fd. */
static int state_dir_check(const char *path)
{
	char real[PATH_MAX], part[PATH_MAX];
	ward_strlcpy(part, path, sizeof(part));
	for (char *p = part + 1;; p++) {
		if (*p && *p != '/')
			continue;
		char c = *p;
		*p = '\0';
		if (mkdir(part, 0700) < 0 && errno != EEXIST) {
			fprintf(stderr, "ward: error: serve: state-dir: unable to create '%s': %s\n",
				part, strerror(errno));
			return -1;
		}
		if (!(*p = c))
			break;
	}
	if (!realpath(path, real)) {
		fprintf(stderr, "ward: error: serve: state-dir: '%s': %s\n", path, strerror(errno));
		return -1;
	}
	uid_t unmapped = ward_proc_initial_userns(NULL) ? (uid_t)-1 : ward_proc_overflow_uid();
	int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	char *save = NULL, *c = strtok_r(real + 1, "/", &save);
	ward_strlcpy(part, "", sizeof(part));
	for (;;) {
		struct stat st;
		const char *why = fd < 0 || fstat(fd, &st) < 0 ? strerror(errno)
							     : dir_unsafe(&st, c == NULL, unmapped);
		if (why) {
			fprintf(stderr, "ward: error: serve: state-dir: '%s'%s%s%s: %s; what is there "
				"decides what the daemon recovers, so only its user may write there\n",
				path, part[0] ? " (at '" : "", part, part[0] ? "')" : "", why);
			if (fd >= 0)
				close(fd);
			return -1;
		}
		if (!c)
			break;
		ward_strlcat(part, "/", sizeof(part));
		ward_strlcat(part, c, sizeof(part));
		int next = openat(fd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = next;
		c = strtok_r(NULL, "/", &save);
	}
	close(fd);
	return 0;
}

/* Held until the process exits (the fd is O_CLOEXEC: no sandbox keeps it).
 * A second daemon on the same state stops here, before it reads or
 * removes anything. */
/* The lock fd, or -1 (printed). */
static int state_dir_lock(const char *dir)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/lock", dir) >= (int)sizeof(path))
		return -1;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		fprintf(stderr, "ward: error: serve: state-dir: unable to open '%s': %s\n", path,
			strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		if (e == EWOULDBLOCK)
			fprintf(stderr, "ward: error: serve: state-dir: another daemon holds '%s' "
				"(lock '%s'); each daemon needs a state directory of its own "
				"(--state-dir)\n", dir, path);
		else
			fprintf(stderr, "ward: error: serve: state-dir: unable to lock '%s': %s\n",
				path, strerror(e));
		close(fd);
		return -1;
	}
	return fd;
}

int ward_service_open_state(struct ward_service *s)
{
	if (!s->cfg.state_dir && state_dir_default(s) < 0)
		return -1;
	if (s->cfg.state_dir[0] != '/') {
		fprintf(stderr, "ward: error: serve: state-dir: '%s': expected an absolute path\n",
			s->cfg.state_dir);
		return -1;
	}
	if (state_dir_check(s->cfg.state_dir) < 0 ||
	    (s->state_lock = state_dir_lock(s->cfg.state_dir)) < 0)
		return -1;
	/* the egress proxy keeps its interception CA here */
	if (!s->egress && svc_egress_start(s) < 0)
		return -1;
	/* Leftovers of a killed daemon are found by ward's own cgroup names
	 * (a dead supervisor's pid and start time), never by a pid read from
	 * a file; the state files only turn its sessions into tombstones. */
	ward_cgroup_gc(NULL, NULL);
	return session_recover(s);
}

void svc_state_close(struct ward_service *s)
{
	if (s->state_lock >= 0)
		close(s->state_lock);
	s->state_lock = -1;
}
