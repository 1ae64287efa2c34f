/* src/daemon/files.c — files in a session: upload, download, delete, list.
 *
 * Done by the daemon itself, through the O_PATH fd of the session's root
 * that its init handed over: /workspace is opened with RESOLVE_IN_ROOT,
 * and every path below it with openat2(RESOLVE_BENEATH | NO_SYMLINKS |
 * NO_MAGICLINKS | NO_XDEV), so no "..", symlink or mount a program plants
 * can lead the daemon out of the workspace. Every operation runs with the
 * fsuid and fsgid of the workspace's owner (the sandbox user), which also
 * drops the daemon's file capabilities for its duration: the daemon can do
 * there exactly what the sandbox user can, and what it creates belongs to
 * that user. The tmpfs's size limit holds as for the program. Files move whole
 * (capped by max_file), on the loop: large ones hold it for a few ms.
 */
#include <dirent.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>

#include "base/util.h"
#include "daemon.h"
#include "workspace.h"

enum { MAX_ENTRIES = 10000, MAX_DEPTH = 32, MAX_PATH_LEN = 1000 };

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

static int path_error(struct MHD_Connection *c, int e, const char *path)
{
	switch (e) {
	case ENOENT:
		return srv_respond_error(c, 404, "not_found", "path", "'%s' does not exist in /workspace", path);
	case ELOOP:
	case EXDEV:
	case EAGAIN:
		return srv_respond_error(c, 400, "path_not_allowed", "path",
					 "'%s' is, or passes through, a symbolic link or another "
					 "mount; only plain paths inside /workspace are served", path);
	case ENOTDIR:
		return srv_respond_error(c, 400, "path_not_allowed", "path",
					 "a parent of '%s' is not a directory", path);
	case EISDIR:
		return srv_respond_error(c, 409, "is_a_directory", "path", "'%s' is a directory", path);
	case EACCES:
	case EPERM:
		return srv_respond_error(c, 403, "permission_denied", "path",
					 "the sandbox user may not access '%s'", path);
	case ENOSPC:
	case EDQUOT:
		return srv_respond_error(c, 507, "workspace_full", "path",
					 "the workspace is full (its size is limited by "
					 "policy.limits.workspace_size)");
	default:
		return srv_respond_error(c, 500, "internal", "path", "'%s': %s", path, strerror(e));
	}
}

struct fsid {
	int uid, gid;
};

static struct fsid become(const struct stat *owner)
{
	struct fsid old = { setfsuid((uid_t)-1), setfsgid((gid_t)-1) };
	setfsgid(owner->st_gid);
	setfsuid(owner->st_uid);
	return old;
}

static void restore(struct fsid old)
{
	setfsuid((uid_t)old.uid);
	setfsgid((gid_t)old.gid);
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
		char mode[8];
		snprintf(mode, sizeof(mode), "%04o", (unsigned)(st.st_mode & 07777));
		json_array_append_new(l->entries,
			json_pack("{s:s, s:s, s:I, s:s, s:f}", "path", rel, "type", type_of(st.st_mode),
				  "size", (json_int_t)st.st_size, "mode", mode,
				  "mtime", (double)st.st_mtim.tv_sec + (double)st.st_mtim.tv_nsec / 1e9));
		l->n++;
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

static int list(struct MHD_Connection *c, int dirfd, const char *path)
{
	struct lister l = { .entries = json_array() };
	if (!l.entries)
		return srv_respond_error(c, 500, "internal", NULL, "out of memory");
	walk(&l, dirfd, path, 0);
	json_t *b = json_pack("{s:s, s:o, s:b}", "path", path, "entries", l.entries, "truncated",
			      l.truncated);
	int r = srv_respond_json(c, 200, b);
	json_decref(b);
	return r;
}

static void sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char d[crypto_hash_sha256_BYTES];
	crypto_hash_sha256(d, data, len);
	sodium_bin2hex(out, 65, d, sizeof(d));
}

static void audit_file(struct srv *s, struct session *se, const char *event, const char *path,
		       uint64_t size, const char *sha)
{
	json_t *f = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s?}", "session_id", session_id(se),
			      "tenant", session_owner(se)->tenant, "key_id", session_owner(se)->id,
			      "path", path, "size", (json_int_t)size, "sha256", sha);
	srv_audit(s, event, f);
	json_decref(f);
}

static int download(struct srv *s, struct MHD_Connection *c, struct session *se, int ws,
		    const char *path)
{
	if (!*path)
		return list(c, ws, "");
	int fd = ward_open_beneath(ws, path, O_RDONLY | O_NONBLOCK, 0);
	if (fd < 0)
		return path_error(c, errno, path);
	struct stat st;
	int r;
	if (fstat(fd, &st) < 0) {
		r = path_error(c, errno, path);
	} else if (S_ISDIR(st.st_mode)) {
		r = list(c, fd, path);
	} else if (!S_ISREG(st.st_mode)) {
		r = srv_respond_error(c, 400, "not_a_file", "path",
				      "'%s' is not a regular file (%s)", path, type_of(st.st_mode));
	} else if ((uint64_t)st.st_size > s->cfg.max_file) {
		r = srv_respond_error(c, 413, "file_too_large", "path",
				      "'%s' is %lld bytes, over the limit of %llu (max_file)", path,
				      (long long)st.st_size, (unsigned long long)s->cfg.max_file);
	} else {
		size_t cap = (size_t)st.st_size, len = 0;
		char *buf = malloc(cap ? cap : 1);
		ssize_t n = 1;
		while (buf && len < cap && (n = read(fd, buf + len, cap - len)) > 0)
			len += (size_t)n;
		if (!buf || n < 0) {
			free(buf);
			r = path_error(c, buf ? errno : ENOMEM, path);
		} else {
			char sha[65], mode[8];
			sha256_hex(buf, len, sha);
			snprintf(mode, sizeof(mode), "%04o", (unsigned)(st.st_mode & 07777));
			struct MHD_Response *resp =
				MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
			if (!resp) {
				free(buf);
				close(fd);
				return MHD_NO;
			}
			MHD_add_response_header(resp, "Content-Type", "application/octet-stream");
			MHD_add_response_header(resp, "Ward-File-Sha256", sha);
			MHD_add_response_header(resp, "Ward-File-Mode", mode);
			srv_note_status(200);
			r = MHD_queue_response(c, 200, resp);
			MHD_destroy_response(resp);
			audit_file(s, se, "file.download", path, len, sha);
		}
	}
	close(fd);
	return r;
}

static int upload(struct srv *s, struct MHD_Connection *c, struct session *se, int ws,
		  const char *path, const char *body, size_t len)
{
	if (!*path)
		return srv_respond_error(c, 400, "invalid_request", "path",
					 "expected the path of a file inside /workspace");
	const char *ms = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "mode");
	unsigned long mode = 0644;
	if (ms) {
		char *end;
		mode = strtoul(ms, &end, 8);
		if (!*ms || *end || mode > 0777)
			return srv_respond_error(c, 400, "invalid_request", "mode",
						 "expected octal permissions like 0644 (at most 0777)");
	}
	const char *leaf;
	int e = 0, dir = ward_mkdirs_beneath(ws, path, &leaf);
	int fd = dir < 0 ? -1 : ward_open_beneath(dir, leaf, O_WRONLY | O_CREAT | O_TRUNC, (unsigned)mode);
	if (fd < 0)
		e = errno;
	size_t off = 0;
	while (fd >= 0 && off < len) {
		ssize_t n = write(fd, body + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			e = n < 0 ? errno : EIO;
			break;
		}
		off += (size_t)n;
	}
	if (fd >= 0 && !e)
		fchmod(fd, (mode_t)mode); /* past the umask, and for a file that existed: mode= or 0644 */
	if (e && fd >= 0)
		unlinkat(dir, leaf, 0); /* no half-written file stays */
	if (fd >= 0)
		close(fd);
	if (dir >= 0)
		close(dir);
	if (e)
		return path_error(c, e, path);
	char sha[65], m[8];
	sha256_hex(body ? body : "", len, sha);
	snprintf(m, sizeof(m), "%04lo", mode);
	audit_file(s, se, "file.upload", path, len, sha);
	json_t *b = json_pack("{s:s, s:I, s:s, s:s}", "path", path, "size", (json_int_t)len,
			      "sha256", sha, "mode", m);
	int r = srv_respond_json(c, 201, b);
	json_decref(b);
	return r;
}

/* Removes everything under dirfd (bounded); 0 or -errno. */
static int empty_dir(int dirfd, int depth)
{
	if (depth > MAX_DEPTH)
		return -ELOOP;
	DIR *d = ward_dir_stream(dirfd);
	if (!d)
		return -errno;
	int rc = 0;
	struct dirent *e;
	while (rc == 0 && (e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (unlinkat(dirfd, e->d_name, 0) == 0)
			continue;
		if (errno != EISDIR && errno != EPERM) {
			rc = -errno;
			break;
		}
		int sub = ward_open_beneath(dirfd, e->d_name, O_RDONLY | O_DIRECTORY, 0);
		if (sub < 0) {
			rc = -errno;
			break;
		}
		rc = empty_dir(sub, depth + 1);
		close(sub);
		if (rc == 0 && unlinkat(dirfd, e->d_name, AT_REMOVEDIR) < 0)
			rc = -errno;
	}
	closedir(d);
	return rc;
}

static int delete(struct srv *s, struct MHD_Connection *c, struct session *se, int ws,
		  const char *path)
{
	if (!*path)
		return srv_respond_error(c, 400, "invalid_request", "path",
					 "expected a path inside /workspace (not the workspace itself)");
	const char *slash = strrchr(path, '/'), *leaf = slash ? slash + 1 : path;
	char parent[MAX_PATH_LEN + 1];
	ward_strlcpy(parent, path, sizeof(parent));
	if (slash)
		parent[slash - path] = '\0';
	int dir = slash ? ward_open_beneath(ws, parent, O_RDONLY | O_DIRECTORY, 0) : fcntl(ws, F_DUPFD_CLOEXEC, 3);
	int e = dir < 0 ? errno : 0;
	if (!e && unlinkat(dir, leaf, 0) < 0) {
		e = errno;
		if (e == EISDIR || e == EPERM) {
			int sub = ward_open_beneath(dir, leaf, O_RDONLY | O_DIRECTORY, 0);
			int rc = sub < 0 ? -errno : empty_dir(sub, 0);
			if (sub >= 0)
				close(sub);
			e = rc < 0 ? -rc : unlinkat(dir, leaf, AT_REMOVEDIR) < 0 ? errno : 0;
		}
	}
	if (dir >= 0)
		close(dir);
	if (e)
		return path_error(c, e, path);
	audit_file(s, se, "file.delete", path, 0, NULL);
	json_t *b = json_pack("{s:s, s:b}", "path", path, "deleted", 1);
	int r = srv_respond_json(c, 200, b);
	json_decref(b);
	return r;
}

int files_route(struct srv *s, struct MHD_Connection *c, struct session *se,
		const char *method, const char *raw, const char *body, size_t len)
{
	const char *path = normalise(raw);
	if (!path)
		return srv_respond_error(c, 400, "invalid_request", "path",
					 "expected a path inside /workspace, without '..', '.' or "
					 "empty components");
	struct ward_sandbox *sb = session_sandbox(se);
	int ws = sb ? ward_workspace_open(sb) : -1;
	struct stat owner;
	if (ws < 0 || fstat(ws, &owner) < 0) {
		if (ws >= 0)
			close(ws);
		return srv_respond_error(c, 410, "session_ended", "id",
					 "the session's workspace cannot be reached (its sandbox ended)");
	}
	int r;
	/* every operation as the sandbox user, reads included */
	struct fsid old = become(&owner);
	if (strcmp(method, "GET") == 0)
		r = download(s, c, se, ws, path);
	else if (strcmp(method, "PUT") == 0)
		r = upload(s, c, se, ws, path, body, len);
	else if (strcmp(method, "DELETE") == 0)
		r = delete(s, c, se, ws, path);
	else
		r = srv_respond_error(c, 405, "method_not_allowed", NULL, "method not allowed here");
	restore(old);
	close(ws);
	return r;
}
