/* lib/service/files.c — files in a session: upload, download, delete, list.
 *
 * Done by the daemon itself, through the O_PATH fd of the session's root
 * that its init handed over: /workspace is opened with RESOLVE_IN_ROOT,
 * and every path below it with openat2(RESOLVE_BENEATH | NO_SYMLINKS |
 * NO_MAGICLINKS | NO_XDEV), so no "..", symlink or mount a program plants
 * can lead the daemon out of the workspace. Every operation runs with the
 * fsuid and fsgid of the workspace's owner (the sandbox user), which also
 * drops the daemon's file capabilities for its duration: the daemon can do
 * there exactly what the sandbox user can, and what it creates belongs to
 * that user. The tmpfs's size limit holds as for the program.
 *
 * The loop only checks the request and hands it to a worker (worker.c):
 * the job holds its own fd of the workspace (a session that ends meanwhile
 * is no harm), the body, and copies of the names it audits. A worker
 * changes its own fsuid only (setfsuid is per thread: glibc calls the
 * system call directly, without the set*id broadcast to every thread).
 * Every open is O_NONBLOCK and checks the file type: a FIFO, or a file
 * under a lease the sandbox holds, is refused at once instead of holding a
 * worker for the lease-break time.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>

#include "base/util.h"
#include "internal.h"
#include "workspace.h"

enum { MAX_ENTRIES = 10000, MAX_DEPTH = 32, MAX_PATH_LEN = 1000 };

struct file_job {
	struct svc_job j;
	enum ward_file_op op;
	int ws;                       /* the job's own fd of /workspace */
	struct stat owner;            /* the workspace's owner: the fsuid */
	char path[MAX_PATH_LEN + 1];
	unsigned long mode;           /* PUT */
	char *body;                   /* PUT: the upload; GET: the file read */
	size_t len;
	uint64_t max_file;
	/* the answer */
	unsigned status;
	json_t *answer;               /* JSON, or NULL with body: a file */
	char sha[65], fmode[8];
	const char *event;            /* the audit event, on success */
	char session_id[24], key_id[sizeof(((struct ward_key_info *)0)->id)];
	struct ward_answer *d;
};

/* --- what a request may name --- */

/* "/workspace/a/b", "a/b" -> "a/b"; "" for the workspace itself; NULL when
 * the path is not inside it or is not plain. */
static const char *normalise(const char *p)
{
	if (!p)
		return "";
	if (strncmp(p, "/workspace", 10) == 0 && (p[10] == '/' || !p[10]))
		p += p[10] ? 11 : 10;
	return !*p || srv_path_ok(p) ? p : NULL;
}

/* The path argument: 0 with *out, or -1 with e. */
static int path_arg(const struct ward_session_call *q, const char **out,
		    struct ward_service_error *e)
{
	const char *raw = q->path;
	if (raw && strlen(raw) != q->path_len)
		return ward_service_fail(e, 400, "invalid_request", "path",
					 "the path contains a NUL byte (%%00)");
	size_t len = raw ? strlen(raw) : 0;
	bool root = raw && (strcmp(raw, "/workspace") == 0 || strcmp(raw, "/workspace/") == 0);
	if (len && raw[len - 1] == '/' && !root)
		return ward_service_fail(e, 400, "invalid_request", "path",
					 "the path ends with '/': name the file or directory "
					 "without it");
	*out = normalise(raw);
	if (!*out)
		return ward_service_fail(e, 400, "invalid_request", "path",
					 "expected a path inside /workspace, without '..', '.' or "
					 "empty components");
	return 0;
}

/* --- upload bodies held in memory --- */

static uint64_t cap_total(struct ward_service *s) { return 4 * s->cfg.max_file; }
static uint64_t cap_tenant(struct ward_service *s) { return 2 * s->cfg.max_file; }

int ward_service_upload_reserve(struct ward_service *s, const char *tenant, uint64_t bytes,
				struct ward_service_error *e)
{
	int slot = -1, free_slot = -1;
	for (int i = 0; i < (int)ARRAY_SIZE(s->uploads); i++) {
		if (s->uploads[i].bytes && strcmp(s->uploads[i].tenant, tenant) == 0)
			slot = i;
		else if (!s->uploads[i].bytes && free_slot < 0)
			free_slot = i;
	}
	bool full = s->uploads_total + bytes > cap_total(s) || (slot < 0 && free_slot < 0);
	bool mine = !full && (slot >= 0 ? s->uploads[slot].bytes + bytes > cap_tenant(s)
					: bytes > cap_tenant(s));
	if (full)
		return ward_service_fail(e, 503, "uploads_busy", "uploads",
					 "unfinished uploads hold %llu bytes of daemon memory at most "
					 "(4 x max_file), all in use; retry later",
					 (unsigned long long)cap_total(s));
	if (mine)
		return ward_service_fail(e, 429, "quota_exceeded", "uploads",
					 "this tenant's unfinished uploads hold %llu bytes of daemon "
					 "memory at most (2 x max_file); retry when one has finished",
					 (unsigned long long)cap_tenant(s));
	if (slot < 0) {
		slot = free_slot;
		ward_strlcpy(s->uploads[slot].tenant, tenant, sizeof(s->uploads[slot].tenant));
	}
	s->uploads[slot].bytes += bytes;
	s->uploads_total += bytes;
	return 0;
}

void ward_service_upload_release(struct ward_service *s, const char *tenant, uint64_t bytes)
{
	for (size_t i = 0; i < ARRAY_SIZE(s->uploads); i++)
		if (s->uploads[i].bytes && strcmp(s->uploads[i].tenant, tenant) == 0) {
			uint64_t n = bytes < s->uploads[i].bytes ? bytes : s->uploads[i].bytes;
			s->uploads[i].bytes -= n;
			s->uploads_total -= n < s->uploads_total ? n : s->uploads_total;
			return;
		}
}

/* --- on a worker --- */

static void fail(struct file_job *fj, unsigned status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void fail(struct file_job *fj, unsigned status, const char *code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fj->status = status;
	json_decref(fj->answer);
	fj->answer = svc_error_body(code, "path", msg);
}

static void path_error(struct file_job *fj, int e)
{
	const char *path = fj->path;
	switch (e) {
	case ENOENT:
		return fail(fj, 404, "not_found", "'%s' does not exist in /workspace", path);
	case ELOOP:
	case EXDEV:
		return fail(fj, 400, "path_not_allowed",
			    "'%s' is, or passes through, a symbolic link or another mount; only "
			    "plain paths inside /workspace are served", path);
	case EAGAIN: /* EWOULDBLOCK: O_NONBLOCK met a lease */
		return fail(fj, 409, "file_busy", "'%s' is held by a file lease a program in the "
			    "sandbox took; retry when it lets go", path);
	case ENXIO: /* O_NONBLOCK write open of a FIFO or socket */
		return fail(fj, 400, "not_a_file", "'%s' is not a regular file", path);
	case ENOTDIR:
		return fail(fj, 400, "path_not_allowed", "a parent of '%s' is not a directory", path);
	case EISDIR:
		return fail(fj, 409, "is_a_directory", "'%s' is a directory", path);
	case EACCES:
	case EPERM:
		return fail(fj, 403, "permission_denied", "the sandbox user may not access '%s'", path);
	case ENOSPC:
	case EDQUOT:
		return fail(fj, 507, "workspace_full", "the workspace is full (its size is limited "
			    "by policy.limits.workspace_size)");
	default:
		return fail(fj, 500, "internal", "'%s': %s", path, strerror(e));
	}
}

static const char *type_of(mode_t m)
{
	return S_ISREG(m) ? "file" : S_ISDIR(m) ? "directory" : S_ISLNK(m) ? "symlink" : "other";
}

struct lister {
	json_t *entries;
	unsigned n;
	bool truncated;
};

static void list_entry(struct lister *l, const char *rel, const struct stat *st)
{
	bool escaped = false;
	json_t *name = ward_workspace_name_json(rel, &escaped);
	char mode[8];
	snprintf(mode, sizeof(mode), "%04o", (unsigned)(st->st_mode & 07777));
	json_t *e = json_pack("{s:o, s:s, s:I, s:s, s:f}", "path", name, "type",
			      type_of(st->st_mode), "size", (json_int_t)st->st_size, "mode", mode,
			      "mtime", (double)st->st_mtim.tv_sec + (double)st->st_mtim.tv_nsec / 1e9);
	if (e && escaped)
		json_object_set_new(e, "path_escaped", json_true());
	if (e && json_array_append_new(l->entries, e) == 0)
		l->n++;
}

static void walk(struct lister *l, int dirfd, const char *prefix, int depth)
{
	DIR *d = ward_dir_stream(dirfd);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (l->n >= MAX_ENTRIES) {
			l->truncated = true;
			break;
		}
		struct stat st;
		if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		char rel[4096];
		int n = snprintf(rel, sizeof(rel), "%s%s%s", prefix, *prefix ? "/" : "", e->d_name);
		if (n < 0 || (size_t)n >= sizeof(rel))
			continue;
		list_entry(l, rel, &st);
		if (S_ISDIR(st.st_mode) && depth < MAX_DEPTH) {
			int sub = ward_open_beneath(dirfd, e->d_name, O_RDONLY | O_DIRECTORY, 0);
			if (sub >= 0) {
				walk(l, sub, rel, depth + 1);
				close(sub);
			}
		}
	}
	closedir(d);
}

static void list(struct file_job *fj, int dirfd)
{
	struct lister l = { .entries = json_array() };
	if (!l.entries)
		return fail(fj, 500, "internal", "out of memory");
	walk(&l, dirfd, fj->path, 0);
	fj->status = 200;
	fj->answer = json_pack("{s:s, s:o, s:b}", "path", fj->path, "entries", l.entries,
			       "truncated", l.truncated);
	if (!fj->answer)
		fail(fj, 500, "internal", "out of memory");
}

static void sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char d[crypto_hash_sha256_BYTES];
	crypto_hash_sha256(d, data, len);
	sodium_bin2hex(out, 65, d, sizeof(d));
}

static void download(struct file_job *fj)
{
	if (!*fj->path)
		return list(fj, fj->ws);
	int fd = ward_open_beneath(fj->ws, fj->path, O_RDONLY | O_NONBLOCK, 0);
	if (fd < 0)
		return path_error(fj, errno);
	struct stat st;
	if (fstat(fd, &st) < 0) {
		path_error(fj, errno);
	} else if (S_ISDIR(st.st_mode)) {
		list(fj, fd);
	} else if (!S_ISREG(st.st_mode)) {
		fail(fj, 400, "not_a_file", "'%s' is not a regular file (%s)", fj->path,
		     type_of(st.st_mode));
	} else if ((uint64_t)st.st_size > fj->max_file) {
		fail(fj, 413, "file_too_large", "'%s' is %lld bytes, over the limit of %llu "
		     "(max_file)", fj->path, (long long)st.st_size, (unsigned long long)fj->max_file);
	} else {
		size_t cap = (size_t)st.st_size, len = 0;
		char *buf = malloc(cap ? cap : 1);
		ssize_t n = 1;
		while (buf && len < cap && (n = read(fd, buf + len, cap - len)) > 0)
			len += (size_t)n;
		if (!buf || n < 0) {
			path_error(fj, buf ? errno : ENOMEM);
			free(buf);
		} else {
			fj->body = buf;
			fj->len = len;
			fj->status = 200;
			fj->event = "file.download";
			sha256_hex(buf, len, fj->sha);
			snprintf(fj->fmode, sizeof(fj->fmode), "%04o", (unsigned)(st.st_mode & 07777));
		}
	}
	close(fd);
}

static void upload(struct file_job *fj)
{
	const char *leaf;
	int e = 0, dir = ward_mkdirs_beneath(fj->ws, fj->path, &leaf);
	/* no O_TRUNC before the type is known: a FIFO stays untouched */
	int fd = dir < 0 ? -1 : ward_open_beneath(dir, leaf, O_WRONLY | O_CREAT | O_NONBLOCK,
						  (unsigned)fj->mode);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		e = errno;
	} else if (!S_ISREG(st.st_mode)) {
		fail(fj, 400, "not_a_file", "'%s' is not a regular file (%s)", fj->path,
		     type_of(st.st_mode));
		close(fd);
		close(dir);
		return;
	} else if (ftruncate(fd, 0) < 0) {
		e = errno;
	}
	for (size_t off = 0; fd >= 0 && !e && off < fj->len;) {
		ssize_t n = write(fd, fj->body + off, fj->len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			e = n < 0 ? errno : EIO;
		else
			off += (size_t)n;
	}
	if (fd >= 0 && !e)
		fchmod(fd, (mode_t)fj->mode); /* past the umask, and for a file that existed */
	if (e && fd >= 0)
		unlinkat(dir, leaf, 0); /* no half-written file stays */
	if (fd >= 0)
		close(fd);
	if (dir >= 0)
		close(dir);
	if (e)
		return path_error(fj, e);
	sha256_hex(fj->body ? fj->body : "", fj->len, fj->sha);
	snprintf(fj->fmode, sizeof(fj->fmode), "%04lo", fj->mode);
	fj->status = 201;
	fj->event = "file.upload";
	fj->answer = json_pack("{s:s, s:I, s:s, s:s}", "path", fj->path, "size",
			       (json_int_t)fj->len, "sha256", fj->sha, "mode", fj->fmode);
}

/* Removes everything under top, at any depth, without recursion: one fd
 * at a time goes down to a directory without subdirectories, empties and
 * removes it, and comes back up through "..", checked against the inode
 * it came from (a program that moves directories meanwhile cannot send
 * the walk elsewhere). 0 or -errno. */
static int empty_tree(int top)
{
	struct level { dev_t dev; ino_t ino; char name[256]; } *lv = NULL;
	size_t depth = 0, cap = 0;
	struct stat st;
	int cur = fcntl(top, F_DUPFD_CLOEXEC, 3), rc = 0;
	if (cur < 0 || fstat(cur, &st) < 0)
		rc = -errno;
	while (rc == 0) {
		DIR *d = ward_dir_stream(cur);
		if (!d) {
			rc = -errno;
			break;
		}
		char sub[256] = "";
		struct dirent *e;
		while (rc == 0 && (e = readdir(d))) {
			if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
				continue;
			if (unlinkat(cur, e->d_name, 0) == 0)
				continue;
			if (errno != EISDIR && errno != EPERM)
				rc = -errno;
			else
				ward_strlcpy(sub, e->d_name, sizeof(sub));
			break;
		}
		closedir(d);
		if (rc)
			break;
		if (*sub) { /* down */
			if (depth == cap) {
				cap = cap ? 2 * cap : 64;
				struct level *nl = realloc(lv, cap * sizeof(*lv));
				if (!nl) {
					rc = -ENOMEM;
					break;
				}
				lv = nl;
			}
			int next = ward_open_beneath(cur, sub, O_RDONLY | O_DIRECTORY, 0);
			if (next < 0) {
				rc = -errno;
				break;
			}
			lv[depth] = (struct level){ .dev = st.st_dev, .ino = st.st_ino };
			ward_strlcpy(lv[depth].name, sub, sizeof(lv[depth].name));
			depth++;
			close(cur);
			cur = next;
			if (fstat(cur, &st) < 0)
				rc = -errno;
			continue;
		}
		if (depth == 0) /* top is empty */
			break;
		/* up: cur is empty */
		depth--;
		int up = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (up < 0 || fstat(up, &st) < 0 || st.st_dev != lv[depth].dev ||
		    st.st_ino != lv[depth].ino) {
			rc = up < 0 ? -errno : -ESTALE;
			if (up >= 0)
				close(up);
			break;
		}
		close(cur);
		cur = up;
		if (unlinkat(cur, lv[depth].name, AT_REMOVEDIR) < 0 && errno != ENOENT)
			rc = -errno;
	}
	if (cur >= 0)
		close(cur);
	free(lv);
	return rc;
}

static void delete(struct file_job *fj)
{
	const char *path = fj->path;
	const char *slash = strrchr(path, '/'), *leaf = slash ? slash + 1 : path;
	char parent[MAX_PATH_LEN + 1];
	ward_strlcpy(parent, path, sizeof(parent));
	if (slash)
		parent[slash - path] = '\0';
	int dir = slash ? ward_open_beneath(fj->ws, parent, O_RDONLY | O_DIRECTORY, 0)
		        : fcntl(fj->ws, F_DUPFD_CLOEXEC, 3);
	int e = dir < 0 ? errno : 0;
	if (!e && unlinkat(dir, leaf, 0) < 0) {
		e = errno;
		if (e == EISDIR || e == EPERM) {
			int sub = ward_open_beneath(dir, leaf, O_RDONLY | O_DIRECTORY, 0);
			int rc = sub < 0 ? -errno : empty_tree(sub);
			if (sub >= 0)
				close(sub);
			e = rc < 0 ? -rc : unlinkat(dir, leaf, AT_REMOVEDIR) < 0 ? errno : 0;
		}
	}
	if (dir >= 0)
		close(dir);
	if (e == ESTALE)
		return fail(fj, 409, "changed", "'%s' was moved while it was being deleted; "
			    "part of it may be left", path);
	if (e)
		return path_error(fj, e);
	fj->status = 200;
	fj->event = "file.delete";
	fj->answer = json_pack("{s:s, s:b}", "path", path, "deleted", 1);
}

static void file_run(struct svc_job *j)
{
	struct file_job *fj = (struct file_job *)j;
	/* every operation as the sandbox user, reads included; this thread only */
	int old_uid = setfsuid((uid_t)-1), old_gid = setfsgid((gid_t)-1);
	setfsgid(fj->owner.st_gid);
	setfsuid(fj->owner.st_uid);
	if (fj->op == WARD_FILE_GET)
		download(fj);
	else if (fj->op == WARD_FILE_PUT)
		upload(fj);
	else
		delete(fj);
	setfsuid((uid_t)old_uid);
	setfsgid((gid_t)old_gid);
}

/* --- back on the loop --- */

static void audit_file(struct ward_service *s, struct file_job *fj)
{
	json_t *f = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s?}", "session_id", fj->session_id,
			      "tenant", fj->j.tenant, "key_id", fj->key_id, "path", fj->path,
			      "size", (json_int_t)(fj->op == WARD_FILE_DELETE ? 0 : fj->len), "sha256",
			      fj->op == WARD_FILE_DELETE ? NULL : fj->sha);
	svc_audit(s, fj->event, f);
	json_decref(f);
}

static void file_done(struct ward_service *s, struct svc_job *j)
{
	struct file_job *fj = (struct file_job *)j;
	if (j->cancelled)
		fail(fj, 503, "shutting_down", "the daemon is shutting down");
	else if (fj->event)
		audit_file(s, fj);
	if (fj->op == WARD_FILE_PUT)
		ward_service_upload_release(s, j->tenant, fj->len);
	bool file = fj->status == 200 && !fj->answer && fj->op == WARD_FILE_GET;
	if (file) { /* the bytes go with the answer */
		fj->d->file = fj->body ? fj->body : malloc(1);
		fj->d->file_len = fj->len;
		fj->body = NULL;
		ward_strlcpy(fj->d->sha256, fj->sha, sizeof(fj->d->sha256));
		ward_strlcpy(fj->d->mode, fj->fmode, sizeof(fj->d->mode));
		if (!fj->d->file)
			fail(fj, 500, "internal", "out of memory");
	}
	if (!fj->answer && !(file && fj->d->file))
		fail(fj, 500, "internal", "out of memory");
	deferred_answer(fj->d, fj->status, fj->answer);
	deferred_unref(fj->d);
	free(fj->body);
	close(fj->ws);
	free(fj);
}

/* The path and mode arguments of an operation: 0, or -1 with e. */
static int file_args(const struct ward_session_call *q, enum ward_file_op op, const char **path,
		     unsigned long *mode, struct ward_service_error *e)
{
	if (path_arg(q, path, e) < 0)
		return -1;
	if (op == WARD_FILE_PUT && !**path)
		return ward_service_fail(e, 400, "invalid_request", "path",
					 "expected the path of a file inside /workspace");
	if (op == WARD_FILE_DELETE && !**path)
		return ward_service_fail(e, 400, "invalid_request", "path",
					 "expected a path inside /workspace (not the workspace "
					 "itself)");
	const char *ms = q->mode;
	if (op == WARD_FILE_PUT && ms) {
		char *end;
		*mode = strtoul(ms, &end, 8);
		if (!*ms || *end || *mode > 0777)
			return ward_service_fail(e, 400, "invalid_request", "mode",
						 "expected octal permissions like 0644 (at most 0777)");
	}
	return 0;
}

/* Checks the request and hands it to a worker: out->later gets the answer. */
int files_route(struct ward_service *s, const struct ward_session_call *q, struct session *se,
		enum ward_file_op op, struct ward_reply *out)
{
	const char *path;
	unsigned long mode = 0644;
	if (file_args(q, op, &path, &mode, &out->err) < 0)
		return 0;
	struct ward_sandbox *sb = session_sandbox(se);
	struct file_job *fj = calloc(1, sizeof(*fj));
	if (!fj)
		return svc_reply_error(out, 500, "internal", NULL, "out of memory");
	fj->ws = sb ? ward_workspace_open(sb) : -1;
	if (fj->ws < 0 || fstat(fj->ws, &fj->owner) < 0) {
		if (fj->ws >= 0)
			close(fj->ws);
		free(fj);
		return svc_reply_error(out, 410, "session_ended", "id",
				       "the session's workspace cannot be reached (its sandbox ended)");
	}
	fj->j.run = file_run;
	fj->j.done = file_done;
	ward_strlcpy(fj->j.tenant, session_owner(se)->tenant, sizeof(fj->j.tenant));
	ward_strlcpy(fj->key_id, session_owner(se)->id, sizeof(fj->key_id));
	ward_strlcpy(fj->session_id, session_id(se), sizeof(fj->session_id));
	ward_strlcpy(fj->path, path, sizeof(fj->path));
	fj->op = op;
	fj->mode = mode;
	fj->max_file = s->cfg.max_file;
	/* the requester waits for the answer, which the job gives */
	fj->d = deferred_new();
	if (!fj->d) {
		close(fj->ws);
		free(fj);
		return svc_reply_error(out, 500, "internal", NULL, "out of memory");
	}
	out->later = fj->d;
	if (op == WARD_FILE_PUT) {
		fj->body = (char *)q->body;
		fj->len = q->len;
	}
	int rc = svc_job_submit(s, &fj->j);
	if (rc == 0) {
		out->took_body = op == WARD_FILE_PUT;
		return 0;
	}
	char msg[200];
	if (rc == -EUSERS)
		snprintf(msg, sizeof(msg), "this tenant has %u file operations under way, the most "
			 "it may; retry when one has finished", svc_job_limit(true));
	else
		snprintf(msg, sizeof(msg), "the daemon has %u file operations under way, the most it "
			 "takes; retry later", svc_job_limit(false));
	deferred_answer(fj->d, rc == -EUSERS ? 429 : 503,
			svc_error_body(rc == -EUSERS ? "quota_exceeded" : "files_busy", "files", msg));
	deferred_unref(fj->d);
	close(fj->ws);
	free(fj);
	return 0;
}
