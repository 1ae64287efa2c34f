/* lib/server/keys.h — API keys for `ward serve`: the keys file and its checks.
 *
 * A key is given to its user once, as `wk_<id>_<secret>`: a 12-hex-digit id
 * and 64 hex digits of secret (32 random bytes). The keys file holds, per
 * key, the id, the tenant, the scopes, a random salt and
 * BLAKE2b(secret, key = salt) — never the secret. It must never write,
 * log or return a secret after ward_keys_add() hands it over, and an
 * authentication failure must never say why (unknown id, wrong secret,
 * malformed key and revoked key look the same, in answer and in timing).
 *
 * Everything here is parent-only: it allocates, reads files and takes locks.
 * Nothing here exits or aborts.
 */
#ifndef WARD_SERVER_KEYS_H
#define WARD_SERVER_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#include "ward/error.h"

/* Scopes: what a key may do. Each is checked on its own; admin does not
 * imply the others. */
enum ward_key_scope {
	WARD_SCOPE_EXECUTE = 1u << 0,   /* one-shot executions */
	WARD_SCOPE_SESSIONS = 1u << 1,  /* create, use and delete sessions */
	WARD_SCOPE_FILES = 1u << 2,     /* move files in and out of sessions */
	WARD_SCOPE_ADMIN = 1u << 3,     /* metrics, every tenant's view */
	WARD_SCOPE_CREDENTIALS = 1u << 4, /* attach egress credential rules (secrets) */
	WARD_SCOPE_ALL = (1u << 5) - 1,
};

enum {
	WARD_KEY_ID_LEN = 12,              /* hex digits */
	WARD_KEY_SECRET_BYTES = 32,        /* 64 hex digits in the key */
	WARD_KEY_SALT_BYTES = 16,
	WARD_KEY_HASH_BYTES = 32,
	WARD_KEY_TENANT_MAX = 64,          /* [A-Za-z0-9._-]{1,64}, not "." or ".." */
	WARD_KEY_NOTE_MAX = 256,           /* bytes of UTF-8, no control characters */
	WARD_KEY_CREATED_MAX = 24,         /* "2025-01-31T23:59:59Z" and its NUL */
	WARD_KEY_SCOPES_MAX = 52,          /* "execute,sessions,files,admin,credentials" and its NUL */
	/* "wk_" id "_" secret, and the NUL: the size of a key buffer. */
	WARD_KEY_STR_SIZE = 3 + WARD_KEY_ID_LEN + 1 + 2 * WARD_KEY_SECRET_BYTES + 1,
	WARD_KEYS_FILE_MAX = 16 << 20,     /* bytes read from a keys file at most */
	WARD_KEYS_LINE_MAX = 4096,         /* bytes in one line at most */
};

#define WARD_KEYS_DEFAULT_PATH "/etc/ward/keys"

/* What is known about a key, without its secret or hash. */
struct ward_key_info {
	char id[WARD_KEY_ID_LEN + 1];
	char tenant[WARD_KEY_TENANT_MAX + 1];
	unsigned scopes;                   /* enum ward_key_scope bits */
	char created[WARD_KEY_CREATED_MAX];
	bool revoked;
	char note[WARD_KEY_NOTE_MAX + 1];  /* "" when none */
};

/* A keys file loaded in memory; opaque. */
struct ward_keystore;

/* The keys file to use when none is configured: $WARD_KEYS_FILE when set
 * and not empty (ignored in a setuid process), else WARD_KEYS_DEFAULT_PATH.
 * The string is not owned by the caller. */
const char *ward_keys_default_path(void);

/* Loads the keys file at path into a new keystore (*out; free it with
 * ward_keys_free). Reads at most WARD_KEYS_FILE_MAX bytes of a regular file.
 * Returns 0; -ENOENT when the file does not exist (the caller decides
 * whether that means "no keys"); -EINVAL when a line is malformed, with
 * err naming the file, the line number and the field; or another -errno.
 * *out is NULL on failure. */
int ward_keys_load(const char *path, struct ward_keystore **out, struct ward_error *err);

/* Frees a keystore (its hashes are wiped first). NULL is a no-op. */
void ward_keys_free(struct ward_keystore *ks);

/* The number of keys, revoked ones included, in file order. */
size_t ward_keys_count(const struct ward_keystore *ks);

/* Key i (< ward_keys_count), owned by ks; NULL when out of range. */
const struct ward_key_info *ward_keys_get(const struct ward_keystore *ks, size_t i);

/* Checks a key as presented by a client (NUL-terminated, any length).
 * Returns 0 and fills *out (may be NULL) with the key's id, tenant and
 * scopes; or -EACCES, whatever the reason — malformed, unknown id, wrong
 * secret, revoked — after the same work, so neither the answer nor the time
 * taken tells the reasons apart. *out is zeroed on failure. Never fails
 * otherwise; safe to call from many threads on one keystore. */
int ward_keys_authenticate(const struct ward_keystore *ks, const char *presented,
			   struct ward_key_info *out);

/* Creates a key for tenant with scopes (a non-empty subset of
 * WARD_SCOPE_ALL) and an optional note (NULL or ""), and appends it to the
 * keys file at path, creating the file (mode 0600) and, if missing, its
 * parent directory (mode 0700). The file is rewritten atomically under an
 * exclusive lock on "<path>.lock", so concurrent adds and revokes never lose
 * one another's keys; a file that does not parse is left untouched.
 * Writes the key ("wk_<id>_<secret>") to out_key, which must hold
 * WARD_KEY_STR_SIZE bytes; this is the only copy of the secret: the caller
 * shows it once and wipes it (sodium_memzero). Fills *info (may be NULL).
 * Returns 0, -EINVAL on a bad tenant, scopes or note (err names which),
 * -ENOBUFS when len is too small, or -errno with err set. */
int ward_keys_add(const char *path, const char *tenant, unsigned scopes, const char *note,
		  char *out_key, size_t len, struct ward_key_info *info,
		  struct ward_error *err);

/* Marks key id revoked in the keys file at path (same locking and atomic
 * rewrite as ward_keys_add). Revoking a revoked key succeeds and changes
 * nothing. Fills *info (may be NULL) with the key as it now is.
 * Returns 0, -EINVAL on an id that is not 12 lowercase hex digits,
 * -ENOENT when no key has that id (or there is no keys file), or -errno. */
int ward_keys_revoke(const char *path, const char *id, struct ward_key_info *info,
		     struct ward_error *err);

/* Validates a tenant name. Returns 0 or -EINVAL with err saying why. */
int ward_keys_check_tenant(const char *tenant, struct ward_error *err);

/* Validates a key id (12 lowercase hex digits). Returns 0 or -EINVAL. */
int ward_keys_check_id(const char *id, struct ward_error *err);

/* Parses a comma-separated scope list ("execute,files") into *mask.
 * Returns 0, or -EINVAL with err naming the problem: "expected at least
 * one scope", "empty scope in 'LIST'", "unknown scope 'X' (expected
 * execute, sessions, files, admin or credentials)", "duplicate scope 'X'". */
int ward_keys_scopes_parse(const char *list, unsigned *mask, struct ward_error *err);

/* The name of one scope bit ("execute"), or NULL when scope is not exactly
 * one known bit. */
const char *ward_keys_scope_name(unsigned scope);

/* Formats mask as "execute,sessions" (known bits, in bit order) into buf,
 * always terminated; WARD_KEY_SCOPES_MAX bytes always suffice. Returns buf. */
char *ward_keys_scopes_format(unsigned mask, char *buf, size_t len);

#endif
