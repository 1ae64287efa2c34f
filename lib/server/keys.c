/* lib/server/keys.c — API keys: the keys file, its atomic rewrite, and the
 * per-request check.
 *
 * The file is JSON lines, one key each, holding a salted BLAKE2b of the
 * secret. It must never hold, log or return a secret: the only copy leaves
 * through ward_keys_add()'s out_key. Authentication must never tell its
 * failure reasons apart, by answer or by timing. A rewrite must never lose a
 * key another process added meanwhile, and never replace a file it could not
 * parse.
 */
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include "server/keys.h"
#include "base/util.h"

struct keys_entry {
	struct ward_key_info info;
	unsigned char salt[WARD_KEY_SALT_BYTES];
	unsigned char hash[WARD_KEY_HASH_BYTES];
	size_t line;                        /* in the file, for messages */
};

struct ward_keystore {
	struct keys_entry *keys;
	size_t n, cap;
};

static const char *const keys_scope_names[] = { "execute", "sessions", "files", "admin", "credentials" };

/* --- names and checks ------------------------------------------------------ */

/* Copies s for a message: printable ASCII only, at most 64 characters. User
 * input echoed in errors must not carry terminal escapes. */
static const char *keys_quote(const char *s, size_t n, char *buf, size_t size)
{
	size_t j = 0;
	for (size_t i = 0; i < n && s[i] && j + 4 < size; i++) {
		if (i == 64) {
			memcpy(buf + j, "...", 3);
			j += 3;
			break;
		}
		unsigned char c = (unsigned char)s[i];
		buf[j++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	buf[j] = '\0';
	return buf;
}

static bool keys_is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

static unsigned keys_scope_bit(const char *name, size_t n)
{
	for (size_t i = 0; i < ARRAY_SIZE(keys_scope_names); i++)
		if (strlen(keys_scope_names[i]) == n && memcmp(keys_scope_names[i], name, n) == 0)
			return 1u << i;
	return 0;
}

WARD_EXPORT const char *ward_keys_scope_name(unsigned scope)
{
	for (size_t i = 0; i < ARRAY_SIZE(keys_scope_names); i++)
		if (scope == 1u << i)
			return keys_scope_names[i];
	return NULL;
}

WARD_EXPORT char *ward_keys_scopes_format(unsigned mask, char *buf, size_t len)
{
	if (!len)
		return buf;
	buf[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(keys_scope_names); i++) {
		if (!(mask & (1u << i)))
			continue;
		if (buf[0])
			ward_strlcat(buf, ",", len);
		ward_strlcat(buf, keys_scope_names[i], len);
	}
	return buf;
}

/* Adds one scope name to *mask; the message says what is wrong with it. */
static int keys_scope_add(const char *name, size_t n, unsigned *mask, struct ward_error *err)
{
	char q[80];
	unsigned bit = keys_scope_bit(name, n);
	if (!bit)
		return ward_error_set(err, 0, NULL,
				      "unknown scope '%s' (expected execute, sessions, files, admin or credentials)",
				      keys_quote(name, n, q, sizeof(q)));
	if (*mask & bit)
		return ward_error_set(err, 0, NULL, "duplicate scope '%s'",
				      keys_quote(name, n, q, sizeof(q)));
	*mask |= bit;
	return 0;
}

WARD_EXPORT int ward_keys_scopes_parse(const char *list, unsigned *mask, struct ward_error *err)
{
	char q[80];
	*mask = 0;
	if (!list || !list[0])
		return ward_error_set(err, 0, NULL, "expected at least one scope");
	for (const char *p = list;;) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		if (n == 0) {
			*mask = 0;
			return ward_error_set(err, 0, NULL, "empty scope in '%s'",
					      keys_quote(list, strlen(list), q, sizeof(q)));
		}
		int r = keys_scope_add(p, n, mask, err);
		if (r < 0) {
			*mask = 0;
			return r;
		}
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

WARD_EXPORT int ward_keys_check_tenant(const char *tenant, struct ward_error *err)
{
	char q[80];
	size_t n = strnlen(tenant, WARD_KEY_TENANT_MAX + 1);
	if (n == 0)
		return ward_error_set(err, 0, NULL, "empty tenant name");
	if (n > WARD_KEY_TENANT_MAX)
		return ward_error_set(err, 0, NULL, "tenant name longer than %d characters",
				      WARD_KEY_TENANT_MAX);
	for (size_t i = 0; i < n; i++) {
		char c = tenant[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return ward_error_set(err, 0, NULL,
					      "invalid tenant '%s' (expected letters, digits, '.', '_' or '-')",
					      keys_quote(tenant, n, q, sizeof(q)));
	}
	/* Tenant names may become path components in the daemon. */
	if (strcmp(tenant, ".") == 0 || strcmp(tenant, "..") == 0)
		return ward_error_set(err, 0, NULL, "invalid tenant '%s'", tenant);
	return 0;
}

WARD_EXPORT int ward_keys_check_id(const char *id, struct ward_error *err)
{
	char q[80];
	size_t n = strnlen(id, WARD_KEY_ID_LEN + 1);
	/* A whole key pasted where its id belongs: never echo the secret. */
	if (strncmp(id, "wk_", 3) == 0)
		return ward_error_set(err, 0, NULL,
				      "invalid key id: that is a whole key; give only its id, "
				      "the %d hex digits after 'wk_'", WARD_KEY_ID_LEN);
	if (n != WARD_KEY_ID_LEN || !keys_is_hex(id, n))
		return ward_error_set(err, 0, NULL,
				      "invalid key id '%s' (expected %d lowercase hex digits)",
				      keys_quote(id, strlen(id), q, sizeof(q)), WARD_KEY_ID_LEN);
	return 0;
}

/* Notes are shown by `ward keys list`: no control characters. */
static int keys_check_note(const char *note, struct ward_error *err)
{
	size_t n = strnlen(note, WARD_KEY_NOTE_MAX + 1);
	if (n > WARD_KEY_NOTE_MAX)
		return ward_error_set(err, 0, NULL, "note longer than %d bytes", WARD_KEY_NOTE_MAX);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)note[i] < 0x20 || note[i] == 0x7f)
			return ward_error_set(err, 0, NULL, "note contains a control character");
	json_t *s = json_string(note);
	json_decref(s);
	return s ? 0 : ward_error_set(err, 0, NULL, "note is not valid UTF-8");
}

/* "YYYY-MM-DDTHH:MM:SSZ" */
static bool keys_check_created(const char *s)
{
	static const char pattern[] = "dddd-dd-ddTdd:dd:ddZ";
	if (strlen(s) != sizeof(pattern) - 1)
		return false;
	for (size_t i = 0; pattern[i]; i++)
		if (pattern[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != pattern[i])
			return false;
	return true;
}

/* --- one line of the file -------------------------------------------------- */

__attribute__((format(printf, 3, 4)))
static int keys_why(char *why, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, size, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int keys_get_str(json_t *o, const char *field, size_t max, bool required,
			const char **out, char *why, size_t size)
{
	json_t *v = json_object_get(o, field);
	*out = "";
	if (!v)
		return required ? keys_why(why, size, "%s: missing", field) : 0;
	if (!json_is_string(v))
		return keys_why(why, size, "%s: expected a string", field);
	if (json_string_length(v) > max || strlen(json_string_value(v)) != json_string_length(v))
		return keys_why(why, size, "%s: longer than %zu bytes or contains NUL", field, max);
	*out = json_string_value(v);
	return 0;
}

static int keys_get_hex(json_t *o, const char *field, unsigned char *bin, size_t n,
			char *why, size_t size)
{
	const char *s;
	int r = keys_get_str(o, field, 2 * n, true, &s, why, size);
	if (r < 0)
		return r;
	if (strlen(s) != 2 * n || !keys_is_hex(s, 2 * n) ||
	    sodium_hex2bin(bin, n, s, 2 * n, NULL, NULL, NULL) != 0)
		return keys_why(why, size, "%s: expected %zu lowercase hex digits", field, 2 * n);
	return 0;
}

static int keys_get_scopes(json_t *o, unsigned *mask, char *why, size_t size)
{
	json_t *a = json_object_get(o, "scopes"), *v;
	struct ward_error e;
	size_t i;
	*mask = 0;
	if (!json_is_array(a) || json_array_size(a) == 0)
		return keys_why(why, size, "scopes: expected a non-empty array of scope names");
	json_array_foreach(a, i, v) {
		if (!json_is_string(v))
			return keys_why(why, size, "scopes: expected a non-empty array of scope names");
		if (keys_scope_add(json_string_value(v), json_string_length(v), mask, &e) < 0)
			return keys_why(why, size, "scopes: %s", e.message);
	}
	return 0;
}

static int keys_parse_fields(json_t *o, struct keys_entry *e, char *why, size_t size)
{
	static const char *const known[] = { "id", "tenant", "scopes", "salt", "hash",
					     "created", "revoked", "note" };
	struct ward_error err;
	const char *field, *s;
	json_t *v;
	char q[80];
	json_object_foreach(o, field, v) {
		size_t k = 0;
		while (k < ARRAY_SIZE(known) && strcmp(field, known[k]) != 0)
			k++;
		if (k == ARRAY_SIZE(known))
			return keys_why(why, size, "unknown field '%s'",
					keys_quote(field, strlen(field), q, sizeof(q)));
	}
	if (keys_get_str(o, "id", WARD_KEY_ID_LEN, true, &s, why, size) < 0)
		return -EINVAL;
	if (ward_keys_check_id(s, &err) < 0)
		return keys_why(why, size, "id: %s", err.message);
	ward_strlcpy(e->info.id, s, sizeof(e->info.id));
	if (keys_get_str(o, "tenant", WARD_KEY_TENANT_MAX, true, &s, why, size) < 0)
		return -EINVAL;
	if (ward_keys_check_tenant(s, &err) < 0)
		return keys_why(why, size, "tenant: %s", err.message);
	ward_strlcpy(e->info.tenant, s, sizeof(e->info.tenant));
	if (keys_get_scopes(o, &e->info.scopes, why, size) < 0 ||
	    keys_get_hex(o, "salt", e->salt, sizeof(e->salt), why, size) < 0 ||
	    keys_get_hex(o, "hash", e->hash, sizeof(e->hash), why, size) < 0 ||
	    keys_get_str(o, "created", WARD_KEY_CREATED_MAX - 1, true, &s, why, size) < 0)
		return -EINVAL;
	if (!keys_check_created(s))
		return keys_why(why, size, "created: expected a UTC time like \"2025-01-31T23:59:59Z\"");
	ward_strlcpy(e->info.created, s, sizeof(e->info.created));
	v = json_object_get(o, "revoked");
	if (v && !json_is_boolean(v))
		return keys_why(why, size, "revoked: expected true or false");
	e->info.revoked = json_is_true(v);
	if (keys_get_str(o, "note", WARD_KEY_NOTE_MAX, false, &s, why, size) < 0)
		return -EINVAL;
	if (keys_check_note(s, &err) < 0)
		return keys_why(why, size, "note: %s", err.message);
	ward_strlcpy(e->info.note, s, sizeof(e->info.note));
	return 0;
}

static int keys_parse_line(const char *line, size_t len, struct keys_entry *e,
			   char *why, size_t size)
{
	json_error_t jerr;
	memset(e, 0, sizeof(*e));
	if (len > WARD_KEYS_LINE_MAX)
		return keys_why(why, size, "longer than %d bytes", WARD_KEYS_LINE_MAX);
	json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!o)
		return keys_why(why, size, "invalid JSON: %s", jerr.text);
	int r = json_is_object(o) ? keys_parse_fields(o, e, why, size)
				  : keys_why(why, size, "expected a JSON object");
	json_decref(o);
	return r;
}

/* --- the keystore ---------------------------------------------------------- */

static struct keys_entry *keys_find(const struct ward_keystore *ks, const char *id)
{
	for (size_t i = 0; i < ks->n; i++)
		if (strcmp(ks->keys[i].info.id, id) == 0)
			return &ks->keys[i];
	return NULL;
}

static int keys_append(struct ward_keystore *ks, const struct keys_entry *e)
{
	if (ks->n == ks->cap) {
		size_t cap = ks->cap ? ks->cap * 2 : 16;
		struct keys_entry *k = reallocarray(ks->keys, cap, sizeof(*k));
		if (!k)
			return -ENOMEM;
		ks->keys = k;
		ks->cap = cap;
	}
	ks->keys[ks->n++] = *e;
	return 0;
}

static bool keys_blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
			return false;
	return true;
}

static int keys_parse(const char *path, const char *buf, size_t len, struct ward_keystore *ks,
		      struct ward_error *err)
{
	struct keys_entry e;
	char why[WARD_ERROR_MSG_MAX];
	size_t lineno = 0;
	for (size_t off = 0; off < len;) {
		const char *nl = memchr(buf + off, '\n', len - off);
		size_t n = nl ? (size_t)(nl - (buf + off)) : len - off;
		const char *line = buf + off;
		off += n + 1;
		lineno++;
		if (keys_blank(line, n))
			continue;
		if (keys_parse_line(line, n, &e, why, sizeof(why)) < 0)
			return ward_error_set(err, 0, "keys", "keys file '%s', line %zu: %s",
					      path, lineno, why);
		const struct keys_entry *dup = keys_find(ks, e.info.id);
		if (dup)
			return ward_error_set(err, 0, "keys",
					      "keys file '%s', line %zu: id: duplicate key id '%s' (also on line %zu)",
					      path, lineno, e.info.id, dup->line);
		e.line = lineno;
		if (keys_append(ks, &e) < 0)
			return ward_error_set(err, ENOMEM, "keys", "unable to load '%s'", path);
	}
	return 0;
}

/* Reads a regular file of at most WARD_KEYS_FILE_MAX bytes. O_NONBLOCK: a
 * FIFO planted at path must not hang the daemon. */
static int keys_read(const char *path, bool nofollow, char **out, size_t *len,
		     struct stat *st, struct ward_error *err)
{
	int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (nofollow ? O_NOFOLLOW : 0);
	_cleanup_close_ int fd = open(path, flags);
	if (fd < 0 && errno == ELOOP && nofollow) {
		ward_error_set(err, ELOOP, "keys", "keys file '%s' is a symbolic link", path);
		ward_error_hint(err, "point --keys-file or WARD_KEYS_FILE at the link's target");
		return -ELOOP;
	}
	if (fd < 0)
		return ward_error_set(err, errno, "keys", "unable to open '%s'", path);
	if (fstat(fd, st) < 0)
		return ward_error_set(err, errno, "keys", "unable to stat '%s'", path);
	if (!S_ISREG(st->st_mode))
		return ward_error_set(err, EINVAL, "keys", "keys file '%s' is not a regular file", path);
	if (st->st_size > WARD_KEYS_FILE_MAX)
		return ward_error_set(err, EFBIG, "keys", "keys file '%s' is larger than %d bytes",
				      path, WARD_KEYS_FILE_MAX);
	size_t size = (size_t)st->st_size;
	_cleanup_free_ char *buf = malloc(size + 1);
	if (!buf)
		return ward_error_set(err, ENOMEM, "keys", "unable to read '%s'", path);
	/* The file may have grown since fstat: read one byte more to see it. */
	ssize_t n = ward_read_full(fd, buf, size + 1);
	if (n < 0)
		return ward_error_set(err, (int)-n, "keys", "unable to read '%s'", path);
	if ((size_t)n > size)
		return ward_error_set(err, EAGAIN, "keys", "keys file '%s' changed while being read",
				      path);
	buf[n] = '\0';
	*len = (size_t)n;
	*out = take_ptr(buf);
	return 0;
}

WARD_EXPORT const char *ward_keys_default_path(void)
{
	const char *p = secure_getenv("WARD_KEYS_FILE");
	return p && p[0] ? p : WARD_KEYS_DEFAULT_PATH;
}

WARD_EXPORT void ward_keys_free(struct ward_keystore *ks)
{
	if (!ks)
		return;
	if (ks->keys)
		sodium_memzero(ks->keys, ks->cap * sizeof(*ks->keys));
	free(ks->keys);
	free(ks);
}

static int keys_load(const char *path, bool nofollow, struct ward_keystore **out,
		     struct stat *st, struct ward_error *err)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	*out = NULL;
	if (sodium_init() < 0)
		return ward_error_set(err, EIO, "keys", "unable to initialise libsodium");
	int r = keys_read(path, nofollow, &buf, &len, st, err);
	if (r < 0)
		return r;
	struct ward_keystore *ks = calloc(1, sizeof(*ks));
	if (!ks)
		return ward_error_set(err, ENOMEM, "keys", "unable to load '%s'", path);
	r = keys_parse(path, buf, len, ks, err);
	if (r < 0) {
		ward_keys_free(ks);
		return r;
	}
	*out = ks;
	return 0;
}

WARD_EXPORT int ward_keys_load(const char *path, struct ward_keystore **out,
			       struct ward_error *err)
{
	struct stat st;
	return keys_load(path, false, out, &st, err);
}

WARD_EXPORT size_t ward_keys_count(const struct ward_keystore *ks)
{
	return ks ? ks->n : 0;
}

WARD_EXPORT const struct ward_key_info *ward_keys_get(const struct ward_keystore *ks, size_t i)
{
	return ks && i < ks->n ? &ks->keys[i].info : NULL;
}

/* --- authentication -------------------------------------------------------- */

/* Splits "wk_<id>_<secret>"; false when it is not exactly that shape. The
 * shape is the client's own knowledge, so this may return early. */
static bool keys_split(const char *presented, char *id, unsigned char *secret)
{
	const size_t n = WARD_KEY_STR_SIZE - 1;
	const char *hex = presented + 3 + WARD_KEY_ID_LEN + 1;
	if (strnlen(presented, n + 1) != n || memcmp(presented, "wk_", 3) != 0 ||
	    presented[3 + WARD_KEY_ID_LEN] != '_' || !keys_is_hex(presented + 3, WARD_KEY_ID_LEN) ||
	    !keys_is_hex(hex, 2 * WARD_KEY_SECRET_BYTES))
		return false;
	memcpy(id, presented + 3, WARD_KEY_ID_LEN);
	id[WARD_KEY_ID_LEN] = '\0';
	return sodium_hex2bin(secret, WARD_KEY_SECRET_BYTES, hex, 2 * WARD_KEY_SECRET_BYTES,
			      NULL, NULL, NULL) == 0;
}

static void keys_hash(const unsigned char *secret, const unsigned char *salt, unsigned char *out)
{
	crypto_generichash(out, WARD_KEY_HASH_BYTES, secret, WARD_KEY_SECRET_BYTES,
			   salt, WARD_KEY_SALT_BYTES);
}

WARD_EXPORT int ward_keys_authenticate(const struct ward_keystore *ks, const char *presented,
				       struct ward_key_info *out)
{
	/* Stands in for the key when there is none, so that every failure
	 * hashes and compares exactly like a wrong secret does. */
	static const struct keys_entry decoy;
	unsigned char secret[WARD_KEY_SECRET_BYTES] = { 0 };
	unsigned char hash[WARD_KEY_HASH_BYTES];
	char id[WARD_KEY_ID_LEN + 1] = "";
	const struct keys_entry *match = NULL;

	bool good = presented && keys_split(presented, id, secret);
	/* Every entry is looked at, matching or not. */
	for (size_t i = 0; ks && i < ks->n; i++)
		if (sodium_memcmp(ks->keys[i].info.id, id, sizeof(id)) == 0)
			match = &ks->keys[i];
	const struct keys_entry *e = match ? match : &decoy;
	keys_hash(secret, e->salt, hash);
	bool same = sodium_memcmp(hash, e->hash, sizeof(hash)) == 0;
	good = good && match && same && !e->info.revoked;
	sodium_memzero(secret, sizeof(secret));
	sodium_memzero(hash, sizeof(hash));
	if (out) {
		if (good)
			*out = e->info;
		else
			memset(out, 0, sizeof(*out));
	}
	return good ? 0 : -EACCES;
}

/* --- writing --------------------------------------------------------------- */

static json_t *keys_entry_json(const struct keys_entry *e)
{
	char salt[2 * WARD_KEY_SALT_BYTES + 1], hash[2 * WARD_KEY_HASH_BYTES + 1];
	json_t *scopes = json_array();
	for (size_t i = 0; scopes && i < ARRAY_SIZE(keys_scope_names); i++)
		if (e->info.scopes & (1u << i))
			json_array_append_new(scopes, json_string(keys_scope_names[i]));
	sodium_bin2hex(salt, sizeof(salt), e->salt, sizeof(e->salt));
	sodium_bin2hex(hash, sizeof(hash), e->hash, sizeof(e->hash));
	json_t *o = json_pack("{s:s, s:s, s:o, s:s, s:s, s:s}", "id", e->info.id,
			      "tenant", e->info.tenant, "scopes", scopes, "salt", salt,
			      "hash", hash, "created", e->info.created);
	if (o && e->info.revoked && json_object_set_new(o, "revoked", json_true()) < 0)
		goto fail;
	if (o && e->info.note[0] && json_object_set_new(o, "note", json_string(e->info.note)) < 0)
		goto fail;
	return o;
fail:
	json_decref(o);
	return NULL;
}

/* The whole file, one compact JSON object per line. */
static char *keys_serialize(const struct ward_keystore *ks, size_t *len)
{
	char *buf = NULL;
	bool ok = true;
	FILE *f = open_memstream(&buf, len);
	if (!f)
		return NULL;
	for (size_t i = 0; ok && i < ks->n; i++) {
		json_t *o = keys_entry_json(&ks->keys[i]);
		ok = o && json_dumpf(o, f, JSON_COMPACT) == 0 && fputc('\n', f) != EOF;
		json_decref(o);
	}
	if (fclose(f) != 0 || !ok) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* path's directory and base name; false when they do not fit. */
static bool keys_split_path(const char *path, char *dir, char *base, size_t size)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return ward_strlcpy(dir, ".", size) < size && ward_strlcpy(base, path, size) < size;
	size_t n = slash == path ? 1 : (size_t)(slash - path);
	if (n >= size || ward_strlcpy(base, slash + 1, size) >= size)
		return false;
	memcpy(dir, path, n);
	dir[n] = '\0';
	return base[0] != '\0';
}

/* Writes buf to a temp file next to path, makes it durable, renames it over
 * path, and makes the rename durable. The new file is 0600 and keeps the
 * owner of the one it replaces (old, or NULL), so a daemon user keeps its
 * access after root adds a key. */
static int keys_write_atomic(const char *path, const char *buf, size_t len,
			     const struct stat *old, struct ward_error *err)
{
	char dir[PATH_MAX], base[PATH_MAX], tmp[PATH_MAX];
	if (!keys_split_path(path, dir, base, sizeof(dir)) ||
	    snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, base) >= (int)sizeof(tmp))
		return ward_error_set(err, ENAMETOOLONG, "keys", "unable to write '%s'", path);
	_cleanup_close_ int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return ward_error_set(err, errno, "keys", "unable to create a temporary file in '%s'",
				      dir);
	int r = 0;
	if (fchmod(fd, 0600) < 0)
		r = ward_error_set(err, errno, "keys", "unable to chmod '%s'", tmp);
	else if (old && (old->st_uid != geteuid() || old->st_gid != getegid()) &&
		 fchown(fd, old->st_uid, old->st_gid) < 0)
		r = ward_error_set(err, errno, "keys", "unable to give '%s' the owner of '%s'",
				   tmp, path);
	else if ((r = ward_write_all(fd, buf, len)) < 0)
		r = ward_error_set(err, -r, "keys", "unable to write '%s'", tmp);
	else if (fsync(fd) < 0)
		r = ward_error_set(err, errno, "keys", "unable to sync '%s'", tmp);
	else if (close(take_fd(&fd)) < 0 && errno != EINTR)
		r = ward_error_set(err, errno, "keys", "unable to write '%s'", tmp);
	else if (rename(tmp, path) < 0)
		r = ward_error_set(err, errno, "keys", "unable to rename '%s' to '%s'", tmp, path);
	if (r < 0) {
		unlink(tmp);
		return r;
	}
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) < 0)
		return ward_error_set(err, errno, "keys", "unable to sync directory '%s'", dir);
	return 0;
}

/* Locks "<path>.lock" (created 0600). The keys file itself cannot be the
 * lock: the rename replaces its inode, and a waiter would hold a lock on the
 * old one. Creates path's parent directory when create is set. */
static int keys_lock(const char *path, bool create, struct ward_error *err)
{
	char lock[PATH_MAX], dir[PATH_MAX], base[PATH_MAX];
	if (snprintf(lock, sizeof(lock), "%s.lock", path) >= (int)sizeof(lock) ||
	    !keys_split_path(path, dir, base, sizeof(dir)))
		return ward_error_set(err, ENAMETOOLONG, "keys", "unable to lock '%s'", path);
	int flags = O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY;
	int fd = open(lock, flags, 0600);
	if (fd < 0 && errno == ENOENT && create) {
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			return ward_error_set(err, errno, "keys", "unable to create directory '%s'",
					      dir);
		fd = open(lock, flags, 0600);
	}
	if (fd < 0)
		return ward_error_set(err, errno, "keys", "unable to open lock file '%s'", lock);
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			int e = errno;
			close(fd);
			return ward_error_set(err, e, "keys", "unable to lock '%s'", lock);
		}
	}
	return fd;
}

typedef int (*keys_edit_fn)(struct ward_keystore *ks, void *ctx, struct ward_error *err);

/* Read-modify-write under the lock: loads path (missing is empty when
 * create is set), lets edit change it, and writes it back atomically.
 * Nothing is written when loading or edit fails. */
static int keys_update(const char *path, bool create, keys_edit_fn edit, void *ctx,
		       struct ward_error *err)
{
	struct ward_keystore *ks = NULL;
	struct stat st;
	bool exists = true;
	_cleanup_close_ int lock = keys_lock(path, create, err);
	if (lock < 0)
		return lock;
	int r = keys_load(path, true, &ks, &st, err);
	if (r == -ENOENT && create) {
		exists = false;
		ks = calloc(1, sizeof(*ks));
		if (!ks)
			return ward_error_set(err, ENOMEM, "keys", "unable to load '%s'", path);
	} else if (r < 0) {
		return r;
	}
	r = edit(ks, ctx, err);
	if (r >= 0) {
		size_t len = 0;
		_cleanup_free_ char *buf = keys_serialize(ks, &len);
		r = buf ? keys_write_atomic(path, buf, len, exists ? &st : NULL, err)
			: ward_error_set(err, ENOMEM, "keys", "unable to write '%s'", path);
	}
	ward_keys_free(ks);
	return r;
}

/* --- add and revoke -------------------------------------------------------- */

struct keys_add_ctx {
	struct keys_entry e;
	unsigned char secret[WARD_KEY_SECRET_BYTES];
};

static int keys_add_edit(struct ward_keystore *ks, void *p, struct ward_error *err)
{
	struct keys_add_ctx *c = p;
	/* 48 random bits: a clash is rare but possible, so draw again. */
	for (int tries = 0;; tries++) {
		if (tries == 16)
			return ward_error_set(err, EEXIST, "keys", "unable to draw an unused key id");
		ward_id_new(c->e.info.id, sizeof(c->e.info.id), NULL, WARD_KEY_ID_LEN / 2);
		if (!keys_find(ks, c->e.info.id))
			break;
	}
	randombytes_buf(c->secret, sizeof(c->secret));
	randombytes_buf(c->e.salt, sizeof(c->e.salt));
	keys_hash(c->secret, c->e.salt, c->e.hash);
	if (keys_append(ks, &c->e) < 0)
		return ward_error_set(err, ENOMEM, "keys", "unable to add a key");
	return 0;
}

WARD_EXPORT int ward_keys_add(const char *path, const char *tenant, unsigned scopes,
			      const char *note, char *out_key, size_t len,
			      struct ward_key_info *info, struct ward_error *err)
{
	struct keys_add_ctx c;
	struct tm tm;
	time_t now = time(NULL);
	if (len < WARD_KEY_STR_SIZE)
		return ward_error_set(err, ENOBUFS, "keys", "key buffer too small");
	out_key[0] = '\0';
	if (ward_keys_check_tenant(tenant, err) < 0)
		return -EINVAL;
	if (!scopes)
		return ward_error_set(err, 0, NULL, "expected at least one scope");
	if (scopes & ~(unsigned)WARD_SCOPE_ALL)
		return ward_error_set(err, 0, NULL, "unknown scope bits 0x%x",
				      scopes & ~(unsigned)WARD_SCOPE_ALL);
	if (note && keys_check_note(note, err) < 0)
		return -EINVAL;
	memset(&c, 0, sizeof(c));
	ward_strlcpy(c.e.info.tenant, tenant, sizeof(c.e.info.tenant));
	c.e.info.scopes = scopes;
	ward_strlcpy(c.e.info.note, note ? note : "", sizeof(c.e.info.note));
	if (!gmtime_r(&now, &tm) ||
	    strftime(c.e.info.created, sizeof(c.e.info.created), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		return ward_error_set(err, EOVERFLOW, "keys", "unable to format the time");
	int r = keys_update(path, true, keys_add_edit, &c, err);
	if (r == 0) {
		memcpy(out_key, "wk_", 3);
		memcpy(out_key + 3, c.e.info.id, WARD_KEY_ID_LEN);
		out_key[3 + WARD_KEY_ID_LEN] = '_';
		sodium_bin2hex(out_key + 4 + WARD_KEY_ID_LEN, 2 * WARD_KEY_SECRET_BYTES + 1,
			       c.secret, sizeof(c.secret));
		if (info)
			*info = c.e.info;
	}
	sodium_memzero(&c, sizeof(c));
	return r;
}

struct keys_revoke_ctx {
	const char *path, *id;
	bool loaded;                /* the file existed and parsed */
	struct ward_key_info info;
};

static int keys_revoke_edit(struct ward_keystore *ks, void *p, struct ward_error *err)
{
	struct keys_revoke_ctx *c = p;
	struct keys_entry *e = keys_find(ks, c->id);
	c->loaded = true;
	if (!e)
		return ward_error_set(err, ENOENT, "keys", "no key with id '%s' in '%s'",
				      c->id, c->path);
	e->info.revoked = true;
	c->info = e->info;
	return 0;
}

WARD_EXPORT int ward_keys_revoke(const char *path, const char *id, struct ward_key_info *info,
				 struct ward_error *err)
{
	struct keys_revoke_ctx c = { .path = path, .id = id };
	if (ward_keys_check_id(id, err) < 0)
		return -EINVAL;
	int r = keys_update(path, false, keys_revoke_edit, &c, err);
	if (r == -ENOENT && !c.loaded)
		r = ward_error_set(err, ENOENT, "keys", "no key with id '%s' in '%s' (no such file)",
				   id, path);
	if (r == 0 && info)
		*info = c.info;
	return r;
}
