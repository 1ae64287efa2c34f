/* lib/server/audit.c — the hash-chained audit log: writer and verifier.
 *
 * A line is body[0 .. len-1) + ,"hash":"<64 hex>"} + '\n', where body is the
 * canonical serialisation (jansson JSON_COMPACT|JSON_SORT_KEYS) of the record
 * without "hash", and hash = BLAKE2b-256(body). Verifiers therefore hash
 * bytes of the file, never a re-serialisation: any other JSON library can
 * check a line without reproducing jansson's number or escape formatting.
 *
 * It must never write part of a line (one write() per line, truncated back on
 * a short write), never extend a chain whose last line it cannot verify, and
 * never hold the flock across anything but read-last-line + write.
 */
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include "server/audit.h"
#include "base/util.h"

#define LAYER "audit"
/* ,"hash":" + 64 hex digits + "} : what follows the body's last byte but one */
#define HASH_PREFIX ",\"hash\":\""
enum { HASH_SUFFIX_LEN = 9 + 64 + 2, EVENT_MAX = 64, TAIL_CHUNK = 4096 };

struct ward_audit {
	pthread_mutex_t lock;        /* orders seq/prev among this process's threads */
	int fd;                      /* O_RDWR|O_APPEND; flock()ed around each append */
	char *path;                  /* for messages */
	struct ward_audit_options opts;
	unsigned char genesis[WARD_AUDIT_HASH_BYTES];
	/* The file's last line as this writer knows it, valid while the file's
	 * size is still `end`: another process's append changes the size. */
	uint64_t seq;
	unsigned char prev[WARD_AUDIT_HASH_BYTES];
	off_t end;
};

/* What a valid line holds, for chaining. */
struct audit_line {
	uint64_t seq;
	unsigned char prev[WARD_AUDIT_HASH_BYTES];
	unsigned char hash[WARD_AUDIT_HASH_BYTES];
};

static const char *const break_names[] = {
	[WARD_AUDIT_INTACT] = "intact",
	[WARD_AUDIT_EDITED] = "edited",
	[WARD_AUDIT_PREV] = "prev",
	[WARD_AUDIT_DELETED] = "deleted",
	[WARD_AUDIT_REORDERED] = "reordered",
	[WARD_AUDIT_MALFORMED] = "malformed",
	[WARD_AUDIT_TRUNCATED] = "truncated",
	[WARD_AUDIT_TOO_LONG] = "too_long",
};

const char *ward_audit_break_name(enum ward_audit_break b)
{
	return (size_t)b < ARRAY_SIZE(break_names) ? break_names[b] : "unknown";
}

/* ---- hashing and hex ---------------------------------------------------- */

static void to_hex(const unsigned char bin[WARD_AUDIT_HASH_BYTES], char hex[WARD_AUDIT_HEX_SIZE])
{
	sodium_bin2hex(hex, WARD_AUDIT_HEX_SIZE, bin, WARD_AUDIT_HASH_BYTES);
}

/* 64 lowercase hex digits exactly (as ward writes them). */
static bool parse_hex(const char *s, size_t len, unsigned char bin[WARD_AUDIT_HASH_BYTES])
{
	if (len != 2 * WARD_AUDIT_HASH_BYTES)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return sodium_hex2bin(bin, WARD_AUDIT_HASH_BYTES, s, len, NULL, NULL, NULL) == 0;
}

static int parse_genesis(const char *hex, unsigned char bin[WARD_AUDIT_HASH_BYTES],
			 struct ward_error *err)
{
	char lower[2 * WARD_AUDIT_HASH_BYTES];
	size_t n = hex ? strlen(hex) : 0;
	memset(bin, 0, WARD_AUDIT_HASH_BYTES);
	if (!hex)
		return 0;
	for (size_t i = 0; i < n && i < sizeof(lower); i++)
		lower[i] = (char)(hex[i] >= 'A' && hex[i] <= 'F' ? hex[i] - 'A' + 'a' : hex[i]);
	if (n != sizeof(lower) || !parse_hex(lower, n, bin))
		return ward_error_set(err, EINVAL, LAYER,
				      "genesis: expected 64 hex digits, got '%.80s'", hex);
	return 0;
}

/* BLAKE2b-256 of body = line[0 .. len - HASH_SUFFIX_LEN) + '}'. */
static void line_hash(const char *line, size_t len, unsigned char out[WARD_AUDIT_HASH_BYTES])
{
	crypto_generichash_state st;
	crypto_generichash_init(&st, NULL, 0, WARD_AUDIT_HASH_BYTES);
	crypto_generichash_update(&st, (const unsigned char *)line, len - HASH_SUFFIX_LEN);
	crypto_generichash_update(&st, (const unsigned char *)"}", 1);
	crypto_generichash_final(&st, out, WARD_AUDIT_HASH_BYTES);
}

void ward_audit_digest(const void *data, size_t len, char hex[WARD_AUDIT_HEX_SIZE])
{
	unsigned char h[crypto_hash_sha256_BYTES];
	if (sodium_init() < 0) {
		/* it cannot fail after ward_audit_open or _verify succeeded */
	}
	crypto_hash_sha256(h, data, len);
	to_hex(h, hex);
}

/* ---- one line ----------------------------------------------------------- */

static bool get_hex(json_t *root, const char *key, unsigned char bin[WARD_AUDIT_HASH_BYTES])
{
	json_t *v = json_object_get(root, key);
	return json_is_string(v) && parse_hex(json_string_value(v), json_string_length(v), bin);
}

/* Checks one line (without its '\n'): JSON, the members every record has,
 * "hash" last, and the hash. On failure returns the break and writes why
 * into msg (without the "line N: " prefix). */
static enum ward_audit_break check_line(const char *line, size_t len, struct audit_line *out,
					char *msg, size_t msglen)
{
	json_error_t jerr;
	json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	enum ward_audit_break b = WARD_AUDIT_MALFORMED;
	json_t *seq = json_object_get(root, "seq");
	if (!root) {
		/* jansson quotes the input: keep the message printable ASCII */
		for (char *c = jerr.text; *c; c++)
			if (*c < 0x20 || *c > 0x7e)
				*c = '?';
		snprintf(msg, msglen, "not valid JSON (%s at column %d)", jerr.text, jerr.column);
	} else if (!json_is_object(root)) {
		snprintf(msg, msglen, "not an audit record (not a JSON object)");
	} else if (!json_is_integer(seq) || json_integer_value(seq) < 1) {
		snprintf(msg, msglen, "not an audit record (\"seq\" is missing or not a positive "
			 "integer)");
	} else if (!json_is_string(json_object_get(root, "time")) ||
		   !json_is_string(json_object_get(root, "event"))) {
		snprintf(msg, msglen, "not an audit record (\"time\" or \"event\" is missing)");
	} else if (!get_hex(root, "prev", out->prev) || !get_hex(root, "hash", out->hash)) {
		snprintf(msg, msglen, "not an audit record (\"prev\" or \"hash\" is not 64 hex "
			 "digits)");
	} else if (len < HASH_SUFFIX_LEN + 2 ||
		   memcmp(line + len - HASH_SUFFIX_LEN, HASH_PREFIX, strlen(HASH_PREFIX)) != 0 ||
		   memcmp(line + len - 2, "\"}", 2) != 0) {
		/* Inside a string a '"' is escaped: these bytes can only be the
		 * top-level object's last member, "hash". */
		snprintf(msg, msglen, "not an audit record (\"hash\" is not the last member)");
	} else {
		unsigned char h[WARD_AUDIT_HASH_BYTES];
		out->seq = (uint64_t)json_integer_value(seq);
		line_hash(line, len, h);
		b = memcmp(h, out->hash, sizeof(h)) == 0 ? WARD_AUDIT_INTACT : WARD_AUDIT_EDITED;
		if (b == WARD_AUDIT_EDITED)
			snprintf(msg, msglen, "hash does not match its content (edited)");
	}
	json_decref(root);
	return b;
}

/* ---- the writer --------------------------------------------------------- */

static int lock_file(int fd, int op)
{
	while (flock(fd, op) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

/* The number of the line starting at offset `start` (1-based). Error path
 * only: it reads the file up to there. */
static uint64_t line_number_at(int fd, off_t start)
{
	char buf[16384];
	uint64_t n = 1;
	for (off_t off = 0; off < start;) {
		size_t want = (size_t)(start - off) < sizeof(buf) ? (size_t)(start - off) : sizeof(buf);
		ssize_t r = pread(fd, buf, want, off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		for (ssize_t i = 0; i < r; i++)
			n += buf[i] == '\n';
		off += r;
	}
	return n;
}

/* A tail that cannot be extended: which line, and why. */
struct bad_tail {
	uint64_t line;
	bool newline_missing;
	char why[256];
};

/* Reads the last line of a file of `size` bytes (size > 0) into *out. Returns
 * 0, -EBADMSG with *bad filled, -ENOMEM or -errno. */
static int read_tail(int fd, off_t size, struct audit_line *out, struct bad_tail *bad)
{
	char last;
	errno = 0;
	if (pread(fd, &last, 1, size - 1) != 1)
		return errno ? -errno : -EIO;
	if (last != '\n') {
		bad->newline_missing = true;
		ward_strlcpy(bad->why, "truncated (the file does not end with a newline)",
			     sizeof(bad->why));
		return -EBADMSG;
	}
	/* Windows of 4 KiB, 32 KiB, ... up to one maximal line, its '\n' and
	 * the '\n' before it. */
	const size_t window_max = (size_t)WARD_AUDIT_LINE_MAX + 2;
	for (size_t want = TAIL_CHUNK;; want = want * 8 < window_max ? want * 8 : window_max) {
		size_t n = (off_t)want < size ? want : (size_t)size;
		_cleanup_free_ char *buf = malloc(n);
		if (!buf)
			return -ENOMEM;
		ssize_t r = pread(fd, buf, n, size - (off_t)n);
		if (r < 0)
			return -errno;
		if ((size_t)r != n)
			return -EIO;  /* the file shrank under the lock: not ours to guess */
		char *nl = n > 1 ? memrchr(buf, '\n', n - 1) : NULL;
		if (nl || (off_t)n == size || n == window_max) {
			char *line = nl ? nl + 1 : buf;
			size_t len = (size_t)(buf + n - 1 - line);
			enum ward_audit_break b = WARD_AUDIT_TOO_LONG;
			if (len > WARD_AUDIT_LINE_MAX || (!nl && (off_t)n < size))
				snprintf(bad->why, sizeof(bad->why), "longer than %d bytes",
					 WARD_AUDIT_LINE_MAX);
			else
				b = check_line(line, len, out, bad->why, sizeof(bad->why));
			if (b == WARD_AUDIT_INTACT)
				return 0;
			/* The last line holds no '\n' but its terminator. */
			bad->line = line_number_at(fd, size - 1);
			return -EBADMSG;
		}
	}
}

/* Brings seq/prev/end up to date with the file. Called with both locks. */
static int sync_tail(struct ward_audit *a, off_t size, struct bad_tail *bad,
		     struct ward_error *err)
{
	struct audit_line last;
	if (size == a->end)
		return 0;
	a->end = -1;
	if (size == 0) {
		a->seq = 0;
		memcpy(a->prev, a->genesis, sizeof(a->prev));
		a->end = 0;
		return 0;
	}
	memset(bad, 0, sizeof(*bad));
	int r = read_tail(a->fd, size, &last, bad);
	if (r == -EBADMSG) {
		if (bad->newline_missing)
			bad->line = line_number_at(a->fd, size);
		ward_error_set(err, EBADMSG, LAYER, "line %llu of '%s': %s",
			       (unsigned long long)bad->line, a->path, bad->why);
		ward_error_hint(err, "'ward audit verify' shows the first break; the "
				"force option starts a new chain segment after it");
		return r;
	}
	if (r < 0)
		return ward_error_set(err, -r, LAYER, "unable to read the end of '%s'", a->path);
	a->seq = last.seq;
	memcpy(a->prev, last.hash, sizeof(a->prev));
	a->end = size;
	return 0;
}

/* RFC 3339, UTC, milliseconds: 2025-01-31T23:59:59.123Z */
static void now_rfc3339(char buf[32])
{
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	size_t n = strftime(buf, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, 32 - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

static bool valid_event(const char *event)
{
	size_t n = event ? strlen(event) : 0;
	if (n == 0 || n > EVENT_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = event[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-'))
			return false;
	}
	return true;
}

/* The line for record seq+1: [\n] body-without-'}' ,"hash":"..."} \n.
 * Returns 0 with a malloc'ed buffer in *out, its length in *len and its hash
 * in h, or -errno. */
static int build_line(const struct ward_audit *a, const char *event, json_t *fields,
		      bool newline_first, char **out, size_t *len,
		      unsigned char h[WARD_AUDIT_HASH_BYTES], struct ward_error *err)
{
	char when[32], prev[WARD_AUDIT_HEX_SIZE], hex[WARD_AUDIT_HEX_SIZE];
	now_rfc3339(when);
	to_hex(a->prev, prev);
	json_t *o = json_object();
	if (!o || (fields && json_object_update(o, fields) < 0) ||
	    json_object_set_new(o, "seq", json_integer((json_int_t)(a->seq + 1))) < 0 ||
	    json_object_set_new(o, "time", json_string(when)) < 0 ||
	    json_object_set_new(o, "event", json_string(event)) < 0 ||
	    json_object_set_new(o, "prev", json_string(prev)) < 0) {
		json_decref(o);
		return ward_error_set(err, ENOMEM, LAYER, "unable to build a record");
	}
	_cleanup_free_ char *body = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	if (!body)
		return ward_error_set(err, EINVAL, LAYER, "unable to serialise a '%s' record (a "
				      "string that is not UTF-8, or out of memory)", event);
	size_t blen = strlen(body);
	size_t llen = blen - 1 + HASH_SUFFIX_LEN;
	if (llen > WARD_AUDIT_LINE_MAX)
		return ward_error_set(err, EMSGSIZE, LAYER, "a '%s' record of %zu bytes exceeds "
				      "the line limit (%d)", event, llen, WARD_AUDIT_LINE_MAX);
	crypto_generichash(h, WARD_AUDIT_HASH_BYTES, (const unsigned char *)body, blen, NULL, 0);
	to_hex(h, hex);
	size_t size = llen + 3;  /* a '\n' before, the '\n' after, snprintf's NUL */
	char *line = malloc(size);
	if (!line)
		return ward_error_set(err, ENOMEM, LAYER, "unable to build a record");
	size_t p = 0;
	if (newline_first)
		line[p++] = '\n';
	memcpy(line + p, body, blen - 1);
	p += blen - 1;
	p += (size_t)snprintf(line + p, size - p, "%s%s\"}\n", HASH_PREFIX, hex);
	*len = p;
	*out = line;
	return 0;
}

/* Appends one record. Called with both locks held and the tail in sync. */
static int append(struct ward_audit *a, const char *event, json_t *fields, bool newline_first,
		  char **copy, struct ward_error *err)
{
	unsigned char h[WARD_AUDIT_HASH_BYTES];
	size_t len = 0;
	_cleanup_free_ char *line = NULL;
	int r = build_line(a, event, fields, newline_first, &line, &len, h, err);
	if (r < 0)
		return r;
	ssize_t n;
	do
		n = write(a->fd, line, len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return ward_error_set(err, errno, LAYER, "unable to append to '%s'", a->path);
	if (n != (ssize_t)len) {
		/* Never leave half a line: cut back to where this one began. A
		 * short write to a regular file means the disk or RLIMIT_FSIZE is
		 * full; the next write would say which. */
		if (ftruncate(a->fd, a->end) < 0)
			a->end = -1;
		return ward_error_set(err, ENOSPC, LAYER, "unable to append to '%s': short write "
				      "(%zd of %zu bytes), %s", a->path, n, len,
				      a->end < 0 ? "and unable to remove it" : "removed");
	}
	a->seq++;
	memcpy(a->prev, h, sizeof(h));
	a->end += (off_t)len;
	if (copy)
		*copy = take_ptr(line);
	return 0;
}

static int check_fields(const char *event, json_t *fields, struct ward_error *err)
{
	static const char *const reserved[] = { "seq", "time", "event", "prev", "hash" };
	if (!valid_event(event))
		return ward_error_set(err, EINVAL, LAYER, "event '%.80s': expected 1 to %d "
				      "characters of [a-z0-9._-]", event ? event : "", EVENT_MAX);
	if (fields && !json_is_object(fields))
		return ward_error_set(err, EINVAL, LAYER, "%s: fields must be a JSON object", event);
	for (size_t i = 0; fields && i < ARRAY_SIZE(reserved); i++)
		if (json_object_get(fields, reserved[i]))
			return ward_error_set(err, EINVAL, LAYER, "%s: field '%s' is reserved",
					      event, reserved[i]);
	return 0;
}

/* Takes the flock, syncs with the file, and appends; `force` handles a bad
 * tail by appending an audit.segment record instead. Called with the mutex. */
static int locked_record(struct ward_audit *a, const char *event, json_t *fields, bool force,
			 char **copy, struct ward_error *err)
{
	struct stat st;
	struct bad_tail bad;
	int r = lock_file(a->fd, LOCK_EX);
	if (r < 0)
		return ward_error_set(err, -r, LAYER, "unable to lock '%s'", a->path);
	if (fstat(a->fd, &st) < 0)
		r = ward_error_set(err, errno, LAYER, "unable to stat '%s'", a->path);
	else
		r = sync_tail(a, st.st_size, &bad, err);
	if (r == -EBADMSG && force) {
		json_t *f = json_pack("{s:s, s:I}", "reason", bad.why,
				      "broken_line", (json_int_t)bad.line);
		if (!f)  /* a reason quoting bytes that are not UTF-8 */
			f = json_pack("{s:s, s:I}", "reason", "not a valid record",
				      "broken_line", (json_int_t)bad.line);
		a->seq = 0;
		memcpy(a->prev, a->genesis, sizeof(a->prev));
		a->end = st.st_size;
		ward_error_clear(err);
		r = f ? append(a, "audit.segment", f, bad.newline_missing, NULL, err)
		      : ward_error_set(err, ENOMEM, LAYER, "unable to build a record");
		json_decref(f);
	}
	if (r == 0 && event)
		r = append(a, event, fields, false, copy, err);
	lock_file(a->fd, LOCK_UN);
	return r;
}

int ward_audit_record(struct ward_audit *a, const char *event, json_t *fields,
		      struct ward_error *err)
{
	return ward_audit_record_line(a, event, fields, NULL, err);
}

char *ward_audit_event_line(const char *event, json_t *fields, struct ward_error *err)
{
	char when[32];
	if (check_fields(event, fields, err) < 0)
		return NULL;
	now_rfc3339(when);
	json_t *o = json_object();
	char *body = NULL;
	if (o && (!fields || json_object_update(o, fields) == 0) &&
	    json_object_set_new(o, "time", json_string(when)) == 0 &&
	    json_object_set_new(o, "event", json_string(event)) == 0)
		body = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	size_t n = body ? strlen(body) : 0;
	char *line = body && n <= WARD_AUDIT_LINE_MAX ? realloc(body, n + 2) : NULL;
	if (!line) {
		free(body);
		ward_error_set(err, ENOMEM, LAYER, "unable to build a '%s' event", event);
		return NULL;
	}
	line[n] = '\n';
	line[n + 1] = '\0';
	return line;
}

int ward_audit_record_line(struct ward_audit *a, const char *event, json_t *fields,
			   char **line, struct ward_error *err)
{
	int r = check_fields(event, fields, err);
	if (line)
		*line = NULL;
	if (r < 0)
		return r;
	pthread_mutex_lock(&a->lock);
	r = locked_record(a, event, fields, false, line, err);
	pthread_mutex_unlock(&a->lock);
	/* Outside both locks: threads flushing at once share the disk's work,
	 * and each returns only once its own line (and all before it) is down. */
	if (r == 0 && a->opts.sync == WARD_AUDIT_SYNC_EVERY && fdatasync(a->fd) < 0)
		r = ward_error_set(err, errno, LAYER, "unable to sync '%s'", a->path);
	return r;
}

int ward_audit_open(const char *path, const struct ward_audit_options *opts,
		    struct ward_audit **out, struct ward_error *err)
{
	static const struct ward_audit_options defaults = { .sync = WARD_AUDIT_SYNC_EVERY };
	struct stat st;
	*out = NULL;
	if (sodium_init() < 0)
		return ward_error_set(err, ENOSYS, LAYER, "libsodium failed to initialise");
	struct ward_audit *a = calloc(1, sizeof(*a));
	if (!a)
		return ward_error_set(err, ENOMEM, LAYER, "unable to open '%s'", path);
	a->fd = -1;
	a->end = -1;
	a->opts = opts ? *opts : defaults;
	a->opts.genesis = NULL;  /* not kept: the caller's string */
	pthread_mutex_init(&a->lock, NULL);
	int r = parse_genesis(opts ? opts->genesis : NULL, a->genesis, err);
	if (r == 0 && !(a->path = strdup(path)))
		r = ward_error_set(err, ENOMEM, LAYER, "unable to open '%s'", path);
	if (r == 0 && (a->fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600)) < 0)
		r = ward_error_set(err, errno, LAYER, "unable to open '%s'", path);
	if (r == 0 && fstat(a->fd, &st) < 0)
		r = ward_error_set(err, errno, LAYER, "unable to stat '%s'", path);
	if (r == 0 && !S_ISREG(st.st_mode))
		r = ward_error_set(err, EINVAL, LAYER, "'%s' is not a regular file", path);
	/* Read the last line now, so that a broken chain is refused at start. */
	if (r == 0)
		r = locked_record(a, NULL, NULL, a->opts.force, NULL, err);
	if (r == 0 && a->opts.force && a->opts.sync == WARD_AUDIT_SYNC_EVERY &&
	    fdatasync(a->fd) < 0)
		r = ward_error_set(err, errno, LAYER, "unable to sync '%s'", path);
	if (r < 0) {
		ward_audit_free(a);
		return r;
	}
	*out = a;
	return 0;
}

void ward_audit_free(struct ward_audit *a)
{
	if (!a)
		return;
	ward_closep(&a->fd);
	pthread_mutex_destroy(&a->lock);
	free(a->path);
	free(a);
}

bool ward_audit_full_text(const struct ward_audit *a)
{
	return a->opts.full_text;
}

uint64_t ward_audit_head(struct ward_audit *a, char hex[WARD_AUDIT_HEX_SIZE])
{
	pthread_mutex_lock(&a->lock);
	uint64_t seq = a->seq;
	to_hex(a->prev, hex);
	pthread_mutex_unlock(&a->lock);
	return seq;
}

/* ---- text by digest ----------------------------------------------------- */

/* The kept part of a text as a JSON string, or NULL when it is not UTF-8.
 * A cut may split a character: back off up to three bytes to a boundary. */
static json_t *utf8_prefix(const char *text, size_t keep, bool cut)
{
	for (size_t back = 0; back <= (cut ? 3u : 0u) && back <= keep; back++) {
		json_t *s = json_stringn(text ? text : "", keep - back);
		if (s)
			return s;
	}
	return NULL;
}

/* Adds "text" (UTF-8) or "base64" for the first WARD_AUDIT_TEXT_MAX bytes,
 * and "truncated" when that is not all. */
static int keep_text(json_t *o, const char *text, size_t len)
{
	size_t keep = len < WARD_AUDIT_TEXT_MAX ? len : WARD_AUDIT_TEXT_MAX;
	const char *name = "text";
	json_t *v = utf8_prefix(text, keep, keep < len);
	if (!v) {
		size_t n = sodium_base64_ENCODED_LEN(keep, sodium_base64_VARIANT_ORIGINAL);
		_cleanup_free_ char *b64 = malloc(n);
		if (!b64)
			return -ENOMEM;
		sodium_bin2base64(b64, n, (const unsigned char *)text, keep,
				  sodium_base64_VARIANT_ORIGINAL);
		v = json_string(b64);
		name = "base64";
	}
	if (json_object_set_new(o, name, v) < 0 ||
	    (keep < len && json_object_set_new(o, "truncated", json_true()) < 0))
		return -ENOMEM;
	return 0;
}

int ward_audit_text(json_t *fields, const char *key, const char *text, size_t len,
		    bool full_text)
{
	char hex[WARD_AUDIT_HEX_SIZE];
	if (!json_is_object(fields) || !key || (!text && len))
		return -EINVAL;
	ward_audit_digest(text ? text : "", len, hex);
	json_t *o = json_pack("{s:I, s:s}", "size", (json_int_t)len, "sha256", hex);
	if (!o)
		return -ENOMEM;
	if (full_text && keep_text(o, text, len) < 0) {
		json_decref(o);
		return -ENOMEM;
	}
	/* json_object_set_new drops o itself when it fails */
	return json_object_set_new(fields, key, o) < 0 ? -ENOMEM : 0;
}

/* ---- the verifier ------------------------------------------------------- */

struct reader {
	int fd;
	char *buf;
	size_t cap, start, end;
	bool eof;
};

/* The next line (without '\n') in *line, *len. Returns 1, with *complete
 * false when the file ended without a newline; 0 at the end of the file;
 * -E2BIG for a line over WARD_AUDIT_LINE_MAX; -errno. */
static int reader_next(struct reader *r, const char **line, size_t *len, bool *complete)
{
	for (;;) {
		char *nl = memchr(r->buf + r->start, '\n', r->end - r->start);
		if (nl || (r->eof && r->start < r->end)) {
			*line = r->buf + r->start;
			*len = nl ? (size_t)(nl - *line) : r->end - r->start;
			*complete = nl != NULL;
			r->start += *len + (nl != NULL);
			return *len > WARD_AUDIT_LINE_MAX ? -E2BIG : 1;
		}
		if (r->eof)
			return 0;
		memmove(r->buf, r->buf + r->start, r->end - r->start);
		r->end -= r->start;
		r->start = 0;
		if (r->end == r->cap)
			return -E2BIG;
		ssize_t n = read(r->fd, r->buf + r->end, r->cap - r->end);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		r->eof = n == 0;
		r->end += (size_t)n;
	}
}

static void report_break(struct ward_audit_report *rep, uint64_t line, enum ward_audit_break b,
			 const char *why)
{
	rep->bad_line = line;
	rep->reason = b;
	snprintf(rep->message, sizeof(rep->message), "line %llu: %s", (unsigned long long)line,
		 why);
}

/* The seq of the line after a gap, to tell a deletion from a swap. */
static uint64_t peek_seq(struct reader *r)
{
	const char *line = NULL;
	size_t len = 0;
	bool complete = false;
	uint64_t seq = 0;
	if (reader_next(r, &line, &len, &complete) != 1)
		return 0;
	json_t *root = json_loadb(line, len, 0, NULL);
	json_t *v = json_object_get(root, "seq");
	if (json_is_integer(v) && json_integer_value(v) > 0)
		seq = (uint64_t)json_integer_value(v);
	json_decref(root);
	return seq;
}

/* A valid line that does not continue the chain: say how. */
static void chain_break(struct reader *r, struct ward_audit_report *rep, uint64_t n,
			const struct audit_line *l, const unsigned char last[WARD_AUDIT_HASH_BYTES])
{
	char why[320], after[64];
	uint64_t want = rep->last_seq + 1;
	if (rep->last_seq)
		snprintf(after, sizeof(after), "follows %llu", (unsigned long long)rep->last_seq);
	else
		snprintf(after, sizeof(after), "opens the log");
	if (l->seq == want) {
		if (n == 1)
			snprintf(why, sizeof(why), "prev does not match the genesis hash (the log "
				 "does not start here)");
		else
			snprintf(why, sizeof(why), "prev does not match line %llu's hash (a line "
				 "before it was rewritten, deleted or reordered)",
				 (unsigned long long)(n - 1));
		report_break(rep, n, WARD_AUDIT_PREV, why);
	} else if (l->seq > want && peek_seq(r) != want) {
		uint64_t gone = l->seq - want;
		snprintf(why, sizeof(why), "seq %llu %s (%llu line%s deleted)",
			 (unsigned long long)l->seq, after, (unsigned long long)gone,
			 gone == 1 ? "" : "s");
		report_break(rep, n, WARD_AUDIT_DELETED, why);
	} else {
		bool dup = l->seq == rep->last_seq && memcmp(l->hash, last, WARD_AUDIT_HASH_BYTES) == 0;
		snprintf(why, sizeof(why), "seq %llu %s (%s)", (unsigned long long)l->seq, after,
			 dup ? "duplicated" : "reordered");
		report_break(rep, n, WARD_AUDIT_REORDERED, why);
	}
}

static int verify_fd(struct reader *r, const unsigned char genesis[WARD_AUDIT_HASH_BYTES],
		     struct ward_audit_report *rep)
{
	unsigned char last[WARD_AUDIT_HASH_BYTES];
	char why[320];
	memcpy(last, genesis, sizeof(last));
	for (uint64_t n = 1;; n++) {
		const char *line = NULL;
		size_t len = 0;
		bool complete = false;
		struct audit_line l;
		int k = reader_next(r, &line, &len, &complete);
		if (k == 0)
			break;
		if (k == -E2BIG) {
			snprintf(why, sizeof(why), "longer than %d bytes", WARD_AUDIT_LINE_MAX);
			report_break(rep, n, WARD_AUDIT_TOO_LONG, why);
			break;
		}
		if (k < 0)
			return k;
		if (!complete) {
			report_break(rep, n, WARD_AUDIT_TRUNCATED,
				     "truncated (the file does not end with a newline)");
			break;
		}
		enum ward_audit_break b = check_line(line, len, &l, why, sizeof(why));
		if (b != WARD_AUDIT_INTACT) {
			report_break(rep, n, b, why);
			break;
		}
		if (l.seq != rep->last_seq + 1 || memcmp(l.prev, last, sizeof(last)) != 0) {
			chain_break(r, rep, n, &l, last);
			break;
		}
		rep->lines = n;
		rep->last_seq = l.seq;
		memcpy(last, l.hash, sizeof(last));
	}
	to_hex(last, rep->last_hash);
	return 0;
}

int ward_audit_verify(const char *path, const char *genesis,
		      struct ward_audit_report *report, struct ward_error *err)
{
	unsigned char g[WARD_AUDIT_HASH_BYTES];
	memset(report, 0, sizeof(*report));
	if (sodium_init() < 0)
		return ward_error_set(err, ENOSYS, LAYER, "libsodium failed to initialise");
	int r = parse_genesis(genesis, g, err);
	if (r < 0)
		return r;
	struct reader rd = { .cap = (size_t)WARD_AUDIT_LINE_MAX + 1 };
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ward_error_set(err, errno, LAYER, "unable to open '%s'", path);
	_cleanup_free_ char *buf = malloc(rd.cap);
	if (!buf)
		return ward_error_set(err, ENOMEM, LAYER, "unable to verify '%s'", path);
	rd.fd = fd;
	rd.buf = buf;
	r = verify_fd(&rd, g, report);
	if (r < 0)
		return ward_error_set(err, -r, LAYER, "unable to read '%s'", path);
	return 0;
}

/* --- repeated denials --- */

struct tally_source {
	char name[WARD_AUDIT_SOURCE_MAX];
	uint64_t count;
};

struct ward_audit_tally {
	uint64_t interval_ns, start_ns;  /* start_ns 0: nothing counted */
	size_t n;
	struct tally_source src[WARD_AUDIT_TALLY_SOURCES + 1]; /* the last: "other" */
};

struct ward_audit_tally *ward_audit_tally_new(uint64_t interval_ms)
{
	struct ward_audit_tally *t = calloc(1, sizeof(*t));
	if (t)
		t->interval_ns = (interval_ms ? interval_ms : 1) * 1000000ull;
	return t;
}

void ward_audit_tally_free(struct ward_audit_tally *t)
{
	free(t);
}

bool ward_audit_tally_add(struct ward_audit_tally *t, const char *source, uint64_t now_ns)
{
	if (!t->start_ns)
		t->start_ns = now_ns ? now_ns : 1;
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->src[i].name, source) == 0)
			return t->src[i].count++ == 0;
	struct tally_source *s = &t->src[WARD_AUDIT_TALLY_SOURCES];
	if (t->n < WARD_AUDIT_TALLY_SOURCES) {
		s = &t->src[t->n++];
		snprintf(s->name, sizeof(s->name), "%s", source);
	} else {
		snprintf(s->name, sizeof(s->name), "other");
	}
	return s->count++ == 0;
}

static void tally_write(struct ward_audit *a, const struct tally_source *s, uint64_t interval_ns)
{
	json_t *f = json_pack("{s:s, s:I, s:I}", "source", s->name, "count", (json_int_t)s->count,
			      "interval_ms", (json_int_t)(interval_ns / 1000000));
	struct ward_error err;
	if (f && a)
		ward_audit_record(a, "request.denied", f, &err);
	json_decref(f);
}

uint64_t ward_audit_tally_flush(struct ward_audit_tally *t, struct ward_audit *a,
				uint64_t now_ns, bool all)
{
	if (!t->start_ns)
		return 0;
	if (!all && now_ns < t->start_ns + t->interval_ns)
		return t->start_ns + t->interval_ns;
	for (size_t i = 0; i < t->n; i++)
		tally_write(a, &t->src[i], t->interval_ns);
	if (t->src[WARD_AUDIT_TALLY_SOURCES].count)
		tally_write(a, &t->src[WARD_AUDIT_TALLY_SOURCES], t->interval_ns);
	t->n = 0;
	t->src[WARD_AUDIT_TALLY_SOURCES].count = 0;
	t->start_ns = 0;
	return 0;
}

int ward_audit_clip(json_t *fields, const char *key, const char *text, size_t len, size_t max)
{
	size_t n = len < max ? len : max;
	char *buf = malloc(n + 1);
	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)text[i];
		buf[i] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
	}
	buf[n] = '\0';
	int rc = json_object_set_new(fields, key, json_string(buf)) == 0 ? 0 : -ENOMEM;
	free(buf);
	if (rc == 0 && n < len) {
		char sk[80];
		snprintf(sk, sizeof(sk), "%s_size", key);
		rc = json_object_set_new(fields, sk, json_integer((json_int_t)len)) == 0 ? 0 : -ENOMEM;
	}
	return rc;
}
