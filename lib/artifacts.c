/* lib/artifacts.c — files a run created or changed under /workspace.
 *
 * Read from outside, while the sandbox still runs, through its init's root
 * (/proc/<pid>/root) with openat2: every step stays beneath the workspace,
 * no symlink is ever followed and no other mount is entered, so a program
 * cannot point ward at a host file. Only regular files are hashed and
 * copied; symlinks and special files are listed as skipped. Copies land
 * under the caller's directory without following symlinks there either,
 * within count, size and total caps that are reported when hit. The
 * destination itself is opened without following a symlink anywhere in its
 * path.
 *
 * What is read is bounded, whether it is copied or only listed (the
 * daemon lists and hashes on its loop): a file over the per-file cap, or
 * past the total cap of bytes read in one scan, is listed with a null
 * sha256 and a reason, never read; and no file is read past the size it
 * had when it was listed (a program still writing cannot stretch it).
 *
 * Contents asked inline are read through the same fd as the hash, within
 * the caller's inline budget (bytes in all): the memory held is that
 * budget and its base64, never more; a file that does not fit is listed
 * without its content and reported as skipped.
 *
 * Names are bytes: one that is not UTF-8 is listed (and skipped) with its
 * bytes escaped and "path_escaped": true, as the files API lists it, and
 * copied under its real name; none is ever dropped from the account.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "artifacts.h"
#include "base/util.h"
#include "kernel-internal.h"
#include "workspace.h"

enum { MAX_DEPTH = 16, SCAN_MAX_ENTRIES = 10000 };

static const char *mime_of(const char *path)
{
	static const struct { const char *ext, *mime; } types[] = {
		{ ".png", "image/png" }, { ".jpg", "image/jpeg" }, { ".jpeg", "image/jpeg" },
		{ ".gif", "image/gif" }, { ".svg", "image/svg+xml" }, { ".webp", "image/webp" },
		{ ".pdf", "application/pdf" }, { ".json", "application/json" },
		{ ".csv", "text/csv" }, { ".tsv", "text/tab-separated-values" },
		{ ".txt", "text/plain" }, { ".md", "text/markdown" }, { ".html", "text/html" },
		{ ".htm", "text/html" }, { ".xml", "application/xml" }, { ".py", "text/x-python" },
		{ ".js", "text/javascript" }, { ".sh", "text/x-shellscript" },
		{ ".parquet", "application/vnd.apache.parquet" }, { ".zip", "application/zip" },
		{ ".gz", "application/gzip" }, { ".tar", "application/x-tar" },
		{ ".xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" },
		{ ".npy", "application/octet-stream" }, { ".log", "text/plain" },
	};
	const char *dot = strrchr(path, '.');
	const char *slash = strrchr(path, '/');
	if (dot && (!slash || dot > slash))
		for (size_t i = 0; i < ARRAY_SIZE(types); i++)
			if (strcasecmp(dot, types[i].ext) == 0)
				return types[i].mime;
	return "application/octet-stream";
}

struct scan {
	const struct ward_artifact_limits *lim;
	const struct ward_kernel_input *inputs;
	size_t n_inputs;
	int dest;                /* destination dirfd or -1 */
	json_t *list, *skipped;
	uint32_t listed;
	uint64_t copied_total;
	uint64_t read_total;     /* bytes hashed (and copied), at most lim->max_total */
	uint64_t inline_left;    /* bytes of contents that may still go inline */
	const struct timespec *since; /* only files whose status changed since, or NULL */
	unsigned entries;
};

static bool older(const struct timespec *t, const struct timespec *since)
{
	return t->tv_sec < since->tv_sec || (t->tv_sec == since->tv_sec && t->tv_nsec < since->tv_nsec);
}

json_t *ward_workspace_name_json(const char *rel, bool *escaped)
{
	*escaped = false;
	json_t *j = json_string(rel);
	if (j)
		return j;
	/* 4 bytes out per byte in: a path of up to 4095 bytes always fits */
	char out[4 * 4096 + 1];
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)rel; *p && o + 5 < sizeof(out); p++) {
		if (*p >= 0x80 || *p == '\\')
			o += (size_t)snprintf(out + o, sizeof(out) - o, "\\x%02x", *p);
		else
			out[o++] = (char)*p;
	}
	out[o] = '\0';
	*escaped = true;
	return json_string(out);
}

/* Appends {"path": rel, ...fields} to a (takes fields; rel escaped when it
 * is not UTF-8, with "path_escaped": true). */
static void append_entry(json_t *a, const char *rel, json_t *fields)
{
	bool escaped;
	json_t *e = fields ? json_pack("{s:o}", "path", ward_workspace_name_json(rel, &escaped)) : NULL;
	if (e && json_object_update(e, fields) == 0) {
		if (escaped)
			json_object_set_new(e, "path_escaped", json_true());
		json_array_append(a, e);
	}
	json_decref(e);
	json_decref(fields);
}

static void skip(struct scan *s, const char *path, const char *reason)
{
	append_entry(s->skipped, path, json_pack("{s:s}", "reason", reason));
}

/* Hashes the first size bytes of fd, copying to out (when >= 0) and into
 * mem (when set: size bytes of room; *got says how many came) as it goes. */
static int hash_copy(int fd, int out, uint64_t size, char hex[65], char *mem, size_t *got)
{
	crypto_hash_sha256_state st;
	unsigned char digest[crypto_hash_sha256_BYTES];
	char buf[65536];
	crypto_hash_sha256_init(&st);
	for (;;) {
		size_t want = size < sizeof(buf) ? (size_t)size : sizeof(buf);
		ssize_t n = want ? read(fd, buf, want) : 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		size -= (uint64_t)n;
		if (mem) {
			memcpy(mem + *got, buf, (size_t)n);
			*got += (size_t)n;
		}
		crypto_hash_sha256_update(&st, (unsigned char *)buf, (unsigned long long)n);
		if (out >= 0 && ward_write_all(out, buf, (size_t)n) < 0)
			return -EIO;
	}
	crypto_hash_sha256_final(&st, digest);
	sodium_bin2hex(hex, 65, digest, sizeof(digest));
	return 0;
}

static bool unchanged_input(const struct scan *s, const char *rel, const char *hex)
{
	for (size_t i = 0; i < s->n_inputs; i++)
		if (strcmp(s->inputs[i].path, rel) == 0 && strcmp(s->inputs[i].sha256, hex) == 0)
			return true;
	return false;
}

/* "16 MiB", or bytes */
static void human(uint64_t n, char *buf, size_t len)
{
	if (n && n % (1u << 20) == 0)
		snprintf(buf, len, "%llu MiB", (unsigned long long)(n >> 20));
	else
		snprintf(buf, len, "%llu bytes", (unsigned long long)n);
}

/* True when a file of size may be read: within the per-file cap and the
 * total; otherwise it is reported as skipped. */
static bool within_caps(struct scan *s, const char *rel, uint64_t size)
{
	char cap[32], why[160];
	if (size > s->lim->max_file) {
		human(s->lim->max_file, cap, sizeof(cap));
		snprintf(why, sizeof(why), "larger than the per-file cap (%s): listed, not hashed "
			 "or copied", cap);
	} else if (s->read_total + size > s->lim->max_total) {
		human(s->lim->max_total, cap, sizeof(cap));
		snprintf(why, sizeof(why), "over the total cap (%s) of bytes read in one run: "
			 "listed, not hashed or copied", cap);
	} else {
		s->read_total += size;
		return true;
	}
	skip(s, rel, why);
	return false;
}

static int copy_target(struct scan *s, const char *rel, uint64_t size)
{
	if (s->dest < 0)
		return -1;
	const char *leaf;
	int dir = ward_mkdirs_beneath(s->dest, rel, &leaf);
	if (dir < 0) {
		skip(s, rel, "unable to create its directory in the destination");
		return -1;
	}
	int out = ward_open_beneath(dir, leaf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	close(dir);
	if (out < 0)
		skip(s, rel, "unable to create it in the destination");
	else
		s->copied_total += size;
	return out;
}

/* Room for a file's content inline, taken from the budget; NULL when it
 * does not fit (skipped says why) or inline contents were not asked. */
static char *inline_room(struct scan *s, const char *rel, uint64_t size)
{
	if (!s->lim->inline_content)
		return NULL;
	char why[200];
	if (size > s->inline_left) {
		snprintf(why, sizeof(why), "content not inline: %llu bytes, over what is left "
			 "(%llu) of the inline cap of %llu bytes (artifacts_inline_max)",
			 (unsigned long long)size, (unsigned long long)s->inline_left,
			 (unsigned long long)s->lim->max_inline);
		skip(s, rel, why);
		return NULL;
	}
	char *mem = malloc(size ? (size_t)size : 1);
	if (!mem) {
		skip(s, rel, "content not inline: out of memory");
		return NULL;
	}
	s->inline_left -= size;
	return mem;
}

/* {"content": base64} onto an entry's fields. */
static void add_content(json_t *fields, const char *mem, size_t len)
{
	size_t cap = sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_ORIGINAL);
	char *b64 = malloc(cap);
	if (b64 && fields) {
		sodium_bin2base64(b64, cap, (const unsigned char *)mem, len,
				  sodium_base64_VARIANT_ORIGINAL);
		json_object_set_new(fields, "content", json_string(b64));
	}
	free(b64);
}

static void regular_file(struct scan *s, int dirfd, const char *name, const char *rel)
{
	int fd = ward_open_beneath(dirfd, name, O_RDONLY | O_NONBLOCK, 0);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		skip(s, rel, fd < 0 ? "unreadable" : "not a regular file");
		if (fd >= 0)
			close(fd);
		return;
	}
	char hex[65];
	uint64_t size = (uint64_t)st.st_size;
	if (!within_caps(s, rel, size)) {
		close(fd);
		append_entry(s->list, rel, json_pack("{s:I, s:n, s:s, s:b}", "size", (json_int_t)size,
			"sha256", "mime_type", mime_of(rel), "copied", 0));
		return;
	}
	int out = copy_target(s, rel, size);
	size_t got = 0;
	char *mem = inline_room(s, rel, size);
	int r = hash_copy(fd, out, size, hex, mem, &got);
	close(fd);
	if (out >= 0)
		close(out);
	if (r < 0 || unchanged_input(s, rel, hex)) {
		if (mem) /* not listed: its room goes back */
			s->inline_left += size;
		free(mem);
		if (r < 0)
			skip(s, rel, "read failed");
		return;
	}
	/* the size read (a file that shrank meanwhile says its new size) */
	json_t *fields = json_pack("{s:I, s:s, s:s, s:b}", "size", (json_int_t)(mem ? got : size),
				   "sha256", hex, "mime_type", mime_of(rel), "copied", out >= 0);
	if (mem)
		add_content(fields, mem, got);
	free(mem);
	append_entry(s->list, rel, fields);
}

static void walk(struct scan *s, int dirfd, const char *prefix, int depth)
{
	DIR *d = ward_dir_stream(dirfd);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		char rel[4096];
		snprintf(rel, sizeof(rel), "%s%s%s", prefix, *prefix ? "/" : "", e->d_name);
		struct stat st;
		if (++s->entries > SCAN_MAX_ENTRIES) {
			skip(s, rel, "scan stopped: too many entries");
			break;
		}
		if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			int sub = depth < MAX_DEPTH ? ward_open_beneath(dirfd, e->d_name, O_RDONLY | O_DIRECTORY, 0) : -1;
			if (sub < 0) {
				skip(s, rel, "directory not entered (depth, or another mount)");
				continue;
			}
			walk(s, sub, rel, depth + 1);
			close(sub);
		} else if (s->since && older(&st.st_ctim, s->since)) {
			continue; /* not touched since: not this call's */
		} else if (S_ISLNK(st.st_mode)) {
			skip(s, rel, "symbolic link: never followed or copied");
		} else if (!S_ISREG(st.st_mode)) {
			skip(s, rel, "special file: never copied");
		} else if (s->listed >= s->lim->max_count) {
			skip(s, rel, "over the artifact count cap");
		} else {
			s->listed++;
			regular_file(s, dirfd, e->d_name, rel);
		}
	}
	closedir(d);
}

/* openat2 that never follows a symlink, at any step of path. */
static int open_no_links(int dirfd, const char *path, int flags)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC),
				.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

/* The caller's destination directory, created when missing. No symlink is
 * followed anywhere in its path: one planted there by another local user
 * would send files the sandbox chose wherever it points, written with the
 * caller's rights (as root, into /etc). Everything below is then created
 * relative to the returned fd. */
static int open_destination(const char *path, struct ward_error *err)
{
	char parent[4096];
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/')
		n--;
	if (n == 0 || n >= sizeof(parent))
		return ward_error_set(err, ENAMETOOLONG, "artifacts", "bad destination '%s'", path);
	memcpy(parent, path, n);
	parent[n] = '\0';
	int fd = open_no_links(AT_FDCWD, parent, O_RDONLY | O_DIRECTORY);
	if (fd < 0 && errno == ENOENT) {
		/* mkdir beneath the parent's fd, so a link in the parent's path
		 * cannot place even an empty directory elsewhere */
		char *slash = strrchr(parent, '/');
		const char *leaf = slash ? slash + 1 : parent;
		const char *dir = slash ? (slash == parent ? "/" : parent) : ".";
		if (slash)
			*slash = '\0';
		int pfd = open_no_links(AT_FDCWD, dir, O_PATH | O_DIRECTORY);
		if (pfd >= 0) {
			if (mkdirat(pfd, leaf, 0755) == 0 || errno == EEXIST)
				fd = open_no_links(pfd, leaf, O_RDONLY | O_DIRECTORY);
			int saved = errno;
			close(pfd);
			errno = saved;
		}
	}
	if (fd >= 0)
		return fd;
	if (errno == ELOOP)
		return ward_error_set(err, ELOOP, "artifacts",
				      "refusing the destination '%s': it is, or passes through, a "
				      "symbolic link (ward never writes through one; give the real path)",
				      path);
	return ward_error_set(err, errno, "artifacts", "unable to open the destination '%s'", path);
}

int ward_artifacts_scan(int ws, const struct timespec *since,
			const struct ward_artifact_limits *lim, json_t **list, json_t **skipped,
			struct ward_error *err)
{
	struct scan s = { .lim = lim, .dest = -1, .list = json_array(), .skipped = json_array(),
			  .since = since };
	if (!s.list || !s.skipped) {
		json_decref(s.list);
		json_decref(s.skipped);
		return ward_error_set(err, ENOMEM, "artifacts", "out of memory");
	}
	walk(&s, ws, "", 0);
	*list = s.list;
	*skipped = s.skipped;
	return 0;
}

int ward_artifacts_collect(struct ward_sandbox *sb, const struct ward_kernel_input *inputs,
			   size_t n_inputs, const char *copy_to,
			   const struct ward_artifact_limits *lim, json_t **list, json_t **skipped,
			   struct ward_error *err)
{
	struct scan s = { .lim = lim, .inputs = inputs, .n_inputs = n_inputs, .dest = -1,
			  .list = json_array(), .skipped = json_array(),
			  .inline_left = lim->inline_content ? lim->max_inline : 0 };
	int rc = 0, ws = -1;
	if (!s.list || !s.skipped) {
		rc = ward_error_set(err, ENOMEM, "artifacts", "out of memory");
		goto out;
	}
	if (copy_to && (s.dest = open_destination(copy_to, err)) < 0) {
		rc = s.dest;
		s.dest = -1;
		goto out;
	}
	ws = ward_workspace_open(sb);
	if (ws < 0) {
		rc = ward_error_set(err, errno, "artifacts", "unable to open the sandbox's /workspace");
		goto out;
	}
	walk(&s, ws, "", 0);
out:
	if (ws >= 0)
		close(ws);
	if (s.dest >= 0)
		close(s.dest);
	if (rc < 0) {
		json_decref(s.list);
		json_decref(s.skipped);
		return rc;
	}
	*list = s.list;
	*skipped = s.skipped;
	return 0;
}
