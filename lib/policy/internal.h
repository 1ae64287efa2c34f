/* lib/policy/internal.h — shared by the policy sources; not installed.
 *
 * parse.c turns strings into numbers and checked paths and keeps the lint
 * name lists, policy.c owns the rest of the struct and the flag table,
 * json.c maps documents onto both. Nothing here makes a syscall or exits. Every error is recorded with a `where` prefix the
 * caller built ("policy.json: limits.memory" or "--memory"), so each message
 * names its origin exactly once.
 */
#ifndef WARD_POLICY_INTERNAL_H
#define WARD_POLICY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ward/error.h"
#include "ward/policy.h"

enum {
	WP_MAX_MOUNTS = 32,       /* the plan holds 80 mount ops; the image needs the rest */
	WP_MAX_ENV = 256,
	WP_MAX_ENV_NAME = 255,
	WP_MAX_ENV_VALUE = 32768,
	WP_MAX_PATH = 4095,       /* PATH_MAX without the NUL */
	WP_MAX_DOC = 64 * 1024,
	WP_MAX_DEPTH = 8,
	WP_GOT_MAX = 80,          /* room for a quoted, truncated value in messages */
	WP_WHERE_MAX = 320,       /* "<source>: <path>" */
	WP_PATH_MAX = 192,        /* a dotted path; keys in it are cut at 64 bytes */
	WP_MAX_LINT = 256,        /* names per lint list */
	WP_MAX_LINT_NAME = 128,
	WP_MAX_NET_RULES = 256,   /* entries per network list */
	WP_NET_CONN_DEFAULT = 64,
	WP_NET_CONN_MAX = 4096,
};

enum wp_kind {
	WP_SIZE,      /* bytes: "512M", 4096 */
	WP_COUNT,     /* a whole number */
	WP_DURATION,  /* milliseconds: "250ms", "2s", 1.5 (seconds) */
	WP_CPUS,      /* thousandths of a CPU: 0.5 -> 500 */
};

/* Which way a limit tightens, for overrides (ward_policy_check_tighter).
 * 0 is no order: every row must name one (the unit test checks). */
enum wp_tight {
	WP_TIGHT_SMALLER = 1,          /* smaller is tighter; 0 is out of range */
	WP_TIGHT_SMALLER_0_NONE,       /* smaller is tighter; 0 ("no limit") is the loosest */
	WP_TIGHT_SMALLER_0_WORKSPACE,  /* smaller is tighter; 0 is the workspace size */
};

/* One numeric field of struct ward_policy, shared by the flag table and the
 * "limits" object so both accept exactly the same values. */
struct wp_limit {
	const char *key;      /* the key under "limits"; the flag field is "limits.<key>" */
	enum wp_kind kind;
	size_t offset;        /* of a uint64_t in struct ward_policy */
	uint64_t min, max;    /* inclusive */
	const char *zero;     /* what 0 means ("no limit"), or NULL: 0 is out of range */
	enum wp_tight tight;
	const char *why;      /* why the range is what it is, for messages, or NULL */
};

extern const struct wp_limit wp_limits[];
extern const size_t wp_n_limits;
const struct wp_limit *wp_limit_find(const char *key);

/* Every member of struct ward_policy that is not a limit, with the rule an
 * override must keep (tighten.c). The rows and wp_limits[] together cover
 * the struct's bytes: [offset, end), first member aligned to align. */
struct wp_member {
	const char *field;    /* the field path errors name: "env", "cgroup.required" */
	size_t offset, end, align;
	/* 0, or an error naming the field (or a path below it) */
	int (*tighten)(const struct ward_policy *base, const struct ward_policy *p,
		       const char *field, struct ward_error *err);
};

extern const struct wp_member wp_members[];
extern const size_t wp_n_members;
/* True for a member an override may change freely (workdir, hostname). */
bool wp_member_is_free(const struct wp_member *m);

/* One list of the "lint" object, shared by the flag table and the JSON
 * object like wp_limit. The lists live in parse.c. */
struct wp_lint {
	const char *key;       /* the key under "lint"; the flag field is "lint.<key>" */
	const char *expected;  /* one entry, for messages: "a module name like ..." */
	const char *array;     /* the whole list, for messages: "an array of module names" */
	size_t names, count;   /* offsets of a char ** and a size_t in struct ward_policy */
};

extern const struct wp_lint wp_lints[];
extern const size_t wp_n_lints;
const struct wp_lint *wp_lint_find(const char *key);
/* The list's array (NULL when empty) and its length in *n. */
char **wp_lint_get(const struct ward_policy *p, const struct wp_lint *l, size_t *n);

/* --- errors (policy.c) --- */
int wp_fail(struct ward_error *err, const char *where, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int wp_nomem(struct ward_error *err, const char *where);
/* Records "<source>: <field>: <message>" and the field path in err->field. */
int wp_fail_at(struct ward_error *err, const char *source, const char *field,
	       const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* For r < 0: sets err->field to field unless a deeper call already did.
 * Returns r. */
int wp_field(struct ward_error *err, int r, const char *field);

/* --- values (parse.c) --- */
int wp_parse_count(const char *s, uint64_t *out);
int wp_parse_cpus(const char *s, uint64_t *milli);
int wp_parse_kind(enum wp_kind kind, const char *s, uint64_t *out);
/* The canonical text of v ("512M", "30s", "0.5", "128"); buf >= 32 bytes.
 * It parses back to v exactly. */
char *wp_format(enum wp_kind kind, uint64_t v, char *buf, size_t len);
const char *wp_expected(enum wp_kind kind);
/* s in double quotes, control characters escaped, cut at ~60 bytes. */
char *wp_quote(const char *s, char *buf, size_t len);
bool wp_utf8_valid(const char *s);
bool wp_env_name_valid(const char *s, size_t len);
/* path == dir, or path lies below dir (both normal absolute paths). */
bool wp_path_within(const char *path, const char *dir);
/* Checks an absolute path. With out, stores a malloc'ed normal form (repeated
 * and trailing slashes folded); without, s must already be in normal form. */
int wp_path_check(const char *s, char **out, const char *where,
		  struct ward_error *err);
int wp_check_host(const char *path, const char *where, struct ward_error *err);
int wp_check_inside(const char *path, const char *where, struct ward_error *err);
int wp_check_hostname(const char *s, const char *where, struct ward_error *err);

/* --- lint lists (parse.c) --- */
void wp_lint_release(struct ward_policy *p);
/* Appends src's names to dst's (empty) lists. 0 or -ENOMEM; dst may then
 * hold part of them, for ward_policy_release. */
int wp_lint_copy(struct ward_policy *dst, const struct ward_policy *src);
/* The same names in every list, in any order. */
bool wp_lint_equal(const struct ward_policy *a, const struct ward_policy *b);
/* Adds one name (at most WP_MAX_LINT_NAME bytes, [A-Za-z_][A-Za-z0-9_]*
 * parts joined by dots); a name already listed is ignored, so the limit
 * counts distinct names. */
int wp_lint_add(struct ward_policy *p, const struct wp_lint *l, const char *name,
		const char *where, struct ward_error *err);
/* A comma-separated list, as the flag gives it; on error *p is unchanged. */
int wp_lint_set_list(struct ward_policy *p, const struct wp_lint *l,
		     const char *list, const char *where, struct ward_error *err);
/* ward_policy_validate's checks: count, names, no name twice. */
int wp_lint_validate(const struct ward_policy *p, struct ward_error *err);

/* --- setters (policy.c): each validates fully before touching *p --- */
int wp_limit_apply(struct ward_policy *p, const struct wp_limit *l, int rc,
		   uint64_t v, const char *got, const char *where,
		   struct ward_error *err);
int wp_limit_set_str(struct ward_policy *p, const struct wp_limit *l,
		     const char *s, const char *got, const char *where,
		     struct ward_error *err);
int wp_bind_add(struct ward_policy *p, const char *host, const char *inside,
		bool writable, const char *where_host, const char *where_inside,
		struct ward_error *err);
/* value NULL removes the variable. */
int wp_env_set(struct ward_policy *p, const char *name, const char *value,
	       const char *where, struct ward_error *err);
int wp_degrade_add(struct ward_policy *p, const char *name, const char *where,
		   struct ward_error *err);
int wp_set_workdir(struct ward_policy *p, const char *s, const char *where,
		   struct ward_error *err);
int wp_set_hostname(struct ward_policy *p, const char *s, const char *where,
		    struct ward_error *err);
int wp_set_image(struct ward_policy *p, const char *s, const char *where,
		 struct ward_error *err);

/* --- network (net.c: one entry; network.c: the object and its JSON form;
 * tighten.c: its order) --- */
int wp_net_rule_parse(const char *text, struct ward_net_rule *r, const char *where,
		      struct ward_error *err);
void wp_net_rule_release(struct ward_net_rule *r);
int wp_net_rule_copy(struct ward_net_rule *dst, const struct ward_net_rule *src);
/* Same kind, name or network, and ports. */
bool wp_net_rule_equal(const struct ward_net_rule *a, const struct ward_net_rule *b);
/* Everything c covers, o covers too (tighten.c's order). */
bool wp_net_rule_within(const struct ward_net_rule *c, const struct ward_net_rule *o);

/* The defaults: mode none, no entries, 64 connections, no byte limits. */
void wp_net_init(struct ward_net_policy *n);
int wp_net_copy(struct ward_net_policy *dst, const struct ward_net_policy *src);
bool wp_net_equal(const struct ward_net_policy *a, const struct ward_net_policy *b);
/* Appends one parsed entry to a list; an entry already listed is dropped
 * (it is released), so the limit counts distinct entries. 0, -EINVAL (too
 * many, message at where) or -ENOMEM; *r is consumed either way. */
int wp_net_list_add(struct ward_net_rule **list, size_t *n, struct ward_net_rule *r,
		    const char *where, struct ward_error *err);
void wp_net_list_release(struct ward_net_rule **list, size_t *n);
/* The whole object's rules (entries, limits, mode against the lists);
 * messages "<source>: network.allow[2]: ...". */
int wp_net_validate(const struct ward_net_policy *n, const char *source,
		    struct ward_error *err);
/* ward_policy_set's "network", "network.allow", "network.deny",
 * "network.max_connections", "network.max_bytes_out", "network.max_bytes_in". */
int wp_net_set(struct ward_policy *p, const char *key, const char *value, const char *where,
	       struct ward_error *err);
/* --- JSON (json.c), shared with network.c --- */
struct json_t;
struct wp_json_ctx {
	struct ward_policy *p;
	const char *source;     /* "policy.json" */
	struct ward_error *err;
	struct json_t *root;    /* the whole document (permissions' conflicts) */
};
const char *wp_json_where(const struct wp_json_ctx *c, const char *path, char *buf,
			  size_t len);
const char *wp_json_path_key(char *dst, size_t len, const char *parent, const char *key);
const char *wp_json_path_index(char *dst, size_t len, const char *parent, size_t i);
const char *wp_json_got(struct json_t *v, char *buf, size_t len);
int wp_json_type_error(struct wp_json_ctx *c, const char *path, const char *expected,
		       struct json_t *v);
int wp_json_unknown_key(struct wp_json_ctx *c, const char *path, const char *const *names,
			size_t n, size_t stride);
/* Bounds (size, depth) checked, then parsed: a new reference, or NULL with
 * *r and c->err set. */
struct json_t *wp_json_parse(const struct wp_json_ctx *c, const char *buf, size_t len, int *r);
/* The "network" object onto c->p->network (and c->p->net). */
int wp_net_json_apply(struct wp_json_ctx *c, const char *path, struct json_t *obj);
/* The canonical object; *ok false on ENOMEM. */
struct json_t *wp_net_json(const struct ward_net_policy *n, bool *ok);

/* --- permissions (permissions.c): the shorthand, "writable", "exec" --- */
int wp_json_permissions(struct wp_json_ctx *c, const char *path, struct json_t *obj);
int wp_json_writable(struct wp_json_ctx *c, const char *path, struct json_t *v);
int wp_json_exec(struct wp_json_ctx *c, const char *path, struct json_t *v);
/* Adds "writable" and "exec" to root where they are not the defaults. */
void wp_fs_json(const struct ward_policy *p, struct json_t *root, bool *ok);
void wp_writable_release(struct ward_policy *p);
/* Appends src's list to dst's (empty) one; 0 or -ENOMEM. */
int wp_writable_copy(struct ward_policy *dst, const struct ward_policy *src);
bool wp_writable_equal(const struct ward_policy *a, const struct ward_policy *b);
/* ward_policy_validate's checks of both, landlock not degradable with them. */
int wp_writable_validate(const struct ward_policy *p, struct ward_error *err);

/* The environment a fresh policy starts with, NULL-terminated. */
extern const char *const wp_default_env[];

#endif
