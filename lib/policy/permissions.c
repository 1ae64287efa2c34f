/* lib/policy/permissions.c — the "permissions" shorthand, and the two
 * fields it needs of its own ("writable", "exec").
 *
 * {"env", "read", "write", "net", "run", "ffi"}, each false, true or a
 * list, as Deno users know them. Each switch maps onto ward's own fields
 * when the document is loaded: nothing of the shorthand survives in the
 * policy, so --print-policy shows what it became, the tightening rules of
 * those fields apply unchanged, and a switch can never mean more than the
 * fields it sets. true leaves a field as it was: a switch only narrows.
 * The switches apply after the rest of their document, so "read" and
 * "write" act on the document's own "mounts" too.
 * docs/policy.md is the reference, including what "ffi" cannot enforce.
 * No syscalls; a document that names a switch and the field it sets (both
 * "permissions.net" and "network") is an error naming both.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "policy/internal.h"

/* ffi: false, at the interpreter's level only (lint, advisory): the
 * modules that reach native code from Python, and node's loader of native
 * addons. What the kernel adds is in docs/policy.md. */
static const char *const ffi_imports[] = { "ctypes", "_ctypes", "cffi" };
static const char *const ffi_calls[] = { "process.dlopen" };

/* Each switch and the fields of ward's it replaces, which the same document
 * may not also give. ("mounts" may: the switches narrow them.) */
static const struct {
	const char *key;
	const char *fields[2];
} conflicts[] = {
	{ "env", { "env", NULL } },
	{ "read", { NULL, NULL } },
	{ "write", { "writable", NULL } },
	{ "net", { "network", NULL } },
	{ "run", { "exec", NULL } },
	{ "ffi", { NULL, NULL } },
};

static bool under_scratch(const char *path)
{
	return wp_path_within(path, "/workspace") || wp_path_within(path, "/tmp");
}

/* --- the "writable" list --- */

void wp_writable_release(struct ward_policy *p)
{
	for (size_t i = 0; i < p->n_writable; i++)
		free(p->writable[i]);
	free(p->writable);
	p->writable = NULL;
	p->n_writable = 0;
}

/* Takes ownership of path (a normal form), also on failure. */
static int writable_push(struct ward_policy *p, char *path)
{
	for (size_t i = 0; i < p->n_writable; i++)
		if (strcmp(p->writable[i], path) == 0) {
			free(path);
			return 0;
		}
	char **v = realloc(p->writable, (p->n_writable + 2) * sizeof(*v));
	if (!v) {
		free(path);
		return -ENOMEM;
	}
	v[p->n_writable++] = path;
	v[p->n_writable] = NULL;
	p->writable = v;
	return 0;
}

int wp_writable_copy(struct ward_policy *dst, const struct ward_policy *src)
{
	for (size_t i = 0; i < src->n_writable; i++) {
		char *s = strdup(src->writable[i]);
		if (!s || writable_push(dst, s) < 0)
			return -ENOMEM;
	}
	return 0;
}

bool wp_writable_equal(const struct ward_policy *a, const struct ward_policy *b)
{
	if (a->writable_only != b->writable_only || a->n_writable != b->n_writable)
		return false;
	for (size_t i = 0; i < a->n_writable; i++) {
		bool found = false;
		for (size_t j = 0; !found && j < b->n_writable; j++)
			found = strcmp(a->writable[i], b->writable[j]) == 0;
		if (!found)
			return false;
	}
	return true;
}

/* One path of a writable list: absolute, at or below /workspace or /tmp. */
static int writable_add(struct ward_policy *p, const char *s, const char *where,
			struct ward_error *err)
{
	char *norm = NULL, q[WP_GOT_MAX];
	int r = wp_path_check(s, &norm, where, err);
	if (r < 0)
		return r;
	if (!under_scratch(norm)) {
		free(norm);
		return wp_fail(err, where, "%s is not at or below /workspace or /tmp",
			       wp_quote(s, q, sizeof(q)));
	}
	if (p->n_writable >= WP_MAX_MOUNTS) {
		free(norm);
		return wp_fail(err, where, "too many writable paths (at most %d)", WP_MAX_MOUNTS);
	}
	return writable_push(p, norm) < 0 ? wp_nomem(err, where) : 0;
}

int wp_writable_validate(const struct ward_policy *p, struct ward_error *err)
{
	char field[WP_PATH_MAX], where[WP_WHERE_MAX];
	if (p->n_writable && !p->writable_only)
		return wp_fail_at(err, "policy", "writable", "a list is given but not in force");
	for (size_t i = 0; i < p->n_writable; i++) {
		snprintf(field, sizeof(field), "writable[%zu]", i);
		snprintf(where, sizeof(where), "policy: %s", field);
		int r = p->writable[i] ? wp_path_check(p->writable[i], NULL, where, err)
				       : wp_fail(err, where, "must be set");
		if (r == 0 && !under_scratch(p->writable[i]))
			r = wp_fail(err, where, "is not at or below /workspace or /tmp");
		if (wp_field(err, r, field) < 0)
			return r;
	}
	/* both are landlock rules: a degraded landlock would drop them */
	bool ll = p->allow_degrade & (1u << WARD_LAYER_LANDLOCK);
	if (ll && p->writable_only)
		return wp_fail_at(err, "policy", "writable",
				  "is enforced by landlock, but allow_degraded lists \"landlock\"");
	if (ll && p->exec_program_only)
		return wp_fail_at(err, "policy", "exec",
				  "\"program\" is enforced by landlock, but allow_degraded lists \"landlock\"");
	return 0;
}

/* --- ward's own fields in JSON --- */

int wp_json_writable(struct wp_json_ctx *c, const char *path, json_t *v)
{
	char sub[WP_PATH_MAX], where[WP_WHERE_MAX];
	size_t i;
	json_t *e;
	if (json_is_null(v)) {
		wp_writable_release(c->p);
		c->p->writable_only = false;
		return 0;
	}
	if (!json_is_array(v))
		return wp_json_type_error(c, path, "null or an array of paths", v);
	wp_writable_release(c->p);
	c->p->writable_only = true;
	json_array_foreach(v, i, e) {
		wp_json_path_index(sub, sizeof(sub), path, i);
		if (!json_is_string(e))
			return wp_json_type_error(c, sub, "a path", e);
		int r = wp_field(c->err, writable_add(c->p, json_string_value(e),
						      wp_json_where(c, sub, where, sizeof(where)),
						      c->err), sub);
		if (r < 0)
			return r;
	}
	return 0;
}

int wp_json_exec(struct wp_json_ctx *c, const char *path, json_t *v)
{
	const char *s = json_string_value(v);
	if (s && strcmp(s, "any") == 0)
		c->p->exec_program_only = false;
	else if (s && strcmp(s, "program") == 0)
		c->p->exec_program_only = true;
	else
		return wp_json_type_error(c, path, "\"any\" or \"program\"", v);
	return 0;
}

void wp_fs_json(const struct ward_policy *p, json_t *root, bool *ok)
{
	/* left out at their defaults, so older policies print as they did */
	if (p->writable_only) {
		json_t *a = json_array();
		for (size_t i = 0; a && i < p->n_writable; i++)
			if (json_array_append_new(a, json_string(p->writable[i])) < 0)
				*ok = false;
		if (!a || json_object_set_new(root, "writable", a) < 0)
			*ok = false;
	}
	if (p->exec_program_only && json_object_set_new(root, "exec", json_string("program")) < 0)
		*ok = false;
}

/* --- the switches --- */

static bool is_default_env(const char *entry, size_t len)
{
	for (size_t i = 0; wp_default_env[i]; i++)
		if (strncmp(wp_default_env[i], entry, len) == 0 && wp_default_env[i][len] == '=')
			return true;
	return false;
}

static bool listed(json_t *list, const char *s, size_t len)
{
	size_t i;
	json_t *e;
	json_array_foreach(list, i, e) {
		const char *t = json_string_value(e);
		if (t && strlen(t) == len && strncmp(t, s, len) == 0)
			return true;
	}
	return false;
}

/* The types every list switch shares: false, true or an array of strings
 * (at most max). */
static int switch_type(struct wp_json_ctx *c, const char *path, json_t *v, const char *what,
		       size_t max)
{
	char sub[WP_PATH_MAX], expected[96], where[WP_WHERE_MAX];
	size_t i;
	json_t *e;
	snprintf(expected, sizeof(expected), "true, false or an array of %s", what);
	if (json_is_boolean(v))
		return 0;
	if (!json_is_array(v))
		return wp_json_type_error(c, path, expected, v);
	if (json_array_size(v) > max)
		return wp_fail(c->err, wp_json_where(c, path, where, sizeof(where)),
			       "too many entries (at most %zu)", max);
	json_array_foreach(v, i, e) {
		wp_json_path_index(sub, sizeof(sub), path, i);
		if (!json_is_string(e))
			return wp_json_type_error(c, sub, what, e);
	}
	return 0;
}

/* env: the variables ward sets by default stay; of the others, false
 * keeps none and a list keeps the names it lists. A listed name the policy
 * does not set stays unset (the CLI sets the host's value first). */
static int perm_env(struct wp_json_ctx *c, const char *path, json_t *v)
{
	char sub[WP_PATH_MAX], where[WP_WHERE_MAX];
	size_t i;
	json_t *e;
	int r = switch_type(c, path, v, "variable names", WP_MAX_ENV);
	if (r < 0 || json_is_true(v))
		return r;
	json_array_foreach(v, i, e) {
		const char *name = json_string_value(e);
		wp_json_path_index(sub, sizeof(sub), path, i);
		if (!wp_env_name_valid(name, strlen(name)))
			return wp_json_type_error(c, sub, "a variable name like \"API_URL\"", e);
	}
	for (size_t k = c->p->n_env; k-- > 0;) {
		const char *entry = c->p->env[k], *eq = strchr(entry, '=');
		size_t len = (size_t)(eq - entry);
		char name[WP_MAX_ENV_NAME + 1];
		if (is_default_env(entry, len) || (json_is_array(v) && listed(v, entry, len)))
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)len, entry);
		r = wp_env_set(c->p, name, NULL, wp_json_where(c, path, where, sizeof(where)),
			       c->err);
		if (r < 0)
			return r;
	}
	return 0;
}

static void bind_remove(struct ward_policy *p, size_t i)
{
	free(p->binds[i].host);
	free(p->binds[i].inside);
	memmove(&p->binds[i], &p->binds[i + 1], (p->n_binds - i - 1) * sizeof(p->binds[0]));
	p->n_binds--;
}

static ssize_t bind_at(const struct ward_policy *p, const char *inside)
{
	for (size_t i = 0; i < p->n_binds; i++)
		if (p->binds[i].inside && strcmp(p->binds[i].inside, inside) == 0)
			return (ssize_t)i;
	return -1;
}

/* One entry of read or write that names a host path: a bind of it at the
 * same path, read-only or writable. An existing bind there is kept (made
 * writable for write: an operator's read-only one then fails tightening). */
static int perm_bind(struct wp_json_ctx *c, const char *sub, const char *path, bool rw)
{
	char where[WP_WHERE_MAX];
	wp_json_where(c, sub, where, sizeof(where));
	ssize_t at = bind_at(c->p, path);
	if (at >= 0) {
		c->p->binds[at].writable |= rw;
		return 0;
	}
	return wp_bind_add(c->p, path, path, rw, where, where, c->err);
}

/* read: the image and the program's own /workspace and /tmp are always
 * readable; the switch is about host files, which only binds show. false
 * drops the read-only binds; a list keeps or adds exactly those. */
static int perm_read(struct wp_json_ctx *c, const char *path, json_t *v)
{
	char sub[WP_PATH_MAX], where[WP_WHERE_MAX], q[WP_GOT_MAX];
	size_t i;
	json_t *e;
	int r = switch_type(c, path, v, "absolute paths", WP_MAX_MOUNTS);
	if (r < 0 || json_is_true(v))
		return r;
	json_array_foreach(v, i, e) {
		_cleanup_free_ char *norm = NULL;
		wp_json_path_index(sub, sizeof(sub), path, i);
		wp_json_where(c, sub, where, sizeof(where));
		r = wp_path_check(json_string_value(e), &norm, where, c->err);
		if (r == 0 && under_scratch(norm))
			r = wp_fail(c->err, where, "%s: /workspace and /tmp are always readable; "
				    "list host paths to mount read-only",
				    wp_quote(norm, q, sizeof(q)));
		if (r == 0)
			r = perm_bind(c, sub, norm, false);
		if (wp_field(c->err, r, sub) < 0)
			return r;
	}
	for (size_t k = c->p->n_binds; k-- > 0;)
		if (!c->p->binds[k].writable &&
		    (json_is_false(v) || !listed(v, c->p->binds[k].inside,
						 strlen(c->p->binds[k].inside))))
			bind_remove(c->p, k);
	return 0;
}

/* write: false makes every bind read-only and /workspace and /tmp too; a
 * list makes writable exactly what it names: paths at or below /workspace
 * or /tmp ("writable"), host paths as writable binds. */
static int perm_write(struct wp_json_ctx *c, const char *path, json_t *v)
{
	char sub[WP_PATH_MAX], where[WP_WHERE_MAX];
	size_t i;
	json_t *e;
	int r = switch_type(c, path, v, "absolute paths", WP_MAX_MOUNTS);
	if (r < 0 || json_is_true(v))
		return r;
	wp_writable_release(c->p);
	c->p->writable_only = true;
	json_array_foreach(v, i, e) {
		_cleanup_free_ char *norm = NULL;
		wp_json_path_index(sub, sizeof(sub), path, i);
		wp_json_where(c, sub, where, sizeof(where));
		r = wp_path_check(json_string_value(e), &norm, where, c->err);
		if (r == 0)
			r = under_scratch(norm) ? writable_add(c->p, norm, where, c->err)
						: perm_bind(c, sub, norm, true);
		if (wp_field(c->err, r, sub) < 0)
			return r;
	}
	for (size_t k = 0; k < c->p->n_binds; k++)
		if (json_is_false(v) || !listed(v, c->p->binds[k].inside,
						strlen(c->p->binds[k].inside)))
			c->p->binds[k].writable = false;
	return 0;
}

/* net: false is mode "none"; a list is the allowlist (the policy's deny
 * entries stay). true would mean every destination, which ward's egress
 * does not offer: the list says where. */
static int perm_net(struct wp_json_ctx *c, const char *path, json_t *v)
{
	char sub[WP_PATH_MAX], where[WP_WHERE_MAX];
	struct ward_net_rule *allow = NULL;
	size_t n = 0, i;
	json_t *e;
	int r = switch_type(c, path, v, "allowlist entries", WP_MAX_NET_RULES);
	if (r < 0)
		return r;
	if (json_is_true(v))
		return wp_fail(c->err, wp_json_where(c, path, where, sizeof(where)),
			       "expected false or an array of allowlist entries like "
			       "\"pypi.org\": true (every destination) is not offered; list them");
	if (json_is_false(v))
		return ward_policy_set(c->p, "network", "none",
				       wp_json_where(c, path, where, sizeof(where)), c->err);
	json_array_foreach(v, i, e) {
		struct ward_net_rule rule;
		wp_json_path_index(sub, sizeof(sub), path, i);
		wp_json_where(c, sub, where, sizeof(where));
		r = wp_net_rule_parse(json_string_value(e), &rule, where, c->err);
		if (r == 0)
			r = wp_net_list_add(&allow, &n, &rule, where, c->err);
		if (wp_field(c->err, r, sub) < 0) {
			wp_net_list_release(&allow, &n);
			return r;
		}
	}
	wp_net_list_release(&c->p->network.allow, &c->p->network.n_allow);
	c->p->network.allow = allow;
	c->p->network.n_allow = n;
	c->p->network.mode = WARD_NET_ALLOWLIST;
	c->p->net = WARD_NET_ALLOWLIST;
	return 0;
}

static int perm_run(struct wp_json_ctx *c, const char *path, json_t *v)
{
	if (!json_is_boolean(v))
		return wp_json_type_error(c, path, "true or false", v);
	if (json_is_false(v))
		c->p->exec_program_only = true;
	return 0;
}

static int perm_ffi(struct wp_json_ctx *c, const char *path, json_t *v)
{
	char where[WP_WHERE_MAX];
	if (!json_is_boolean(v))
		return wp_json_type_error(c, path, "true or false", v);
	if (json_is_true(v))
		return 0;
	wp_json_where(c, path, where, sizeof(where));
	const struct wp_lint *imports = wp_lint_find("deny_imports");
	const struct wp_lint *calls = wp_lint_find("deny_calls");
	for (size_t i = 0; i < ARRAY_SIZE(ffi_imports); i++) {
		int r = wp_lint_add(c->p, imports, ffi_imports[i], where, c->err);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < ARRAY_SIZE(ffi_calls); i++) {
		int r = wp_lint_add(c->p, calls, ffi_calls[i], where, c->err);
		if (r < 0)
			return r;
	}
	return 0;
}

typedef int (*perm_fn)(struct wp_json_ctx *c, const char *path, json_t *v);
static const struct {
	const char *key;
	perm_fn fn;
} switches[] = {
	{ "env", perm_env }, { "read", perm_read }, { "write", perm_write },
	{ "net", perm_net }, { "run", perm_run }, { "ffi", perm_ffi },
};
_Static_assert(ARRAY_SIZE(switches) == ARRAY_SIZE(conflicts), "one conflict row per switch");

/* A switch and a field it sets, both in one document: which wins would be
 * a guess. */
static int check_conflicts(struct wp_json_ctx *c, const char *path, json_t *obj, json_t *root)
{
	char sub[WP_PATH_MAX], where[WP_WHERE_MAX];
	for (size_t i = 0; i < ARRAY_SIZE(conflicts); i++) {
		if (!json_object_get(obj, conflicts[i].key))
			continue;
		for (size_t k = 0; k < 2 && conflicts[i].fields[k]; k++) {
			if (!json_object_get(root, conflicts[i].fields[k]))
				continue;
			wp_json_path_key(sub, sizeof(sub), path, conflicts[i].key);
			return wp_field(c->err,
					wp_fail(c->err, wp_json_where(c, sub, where, sizeof(where)),
						"conflicts with \"%s\" in the same document: give "
						"one or the other", conflicts[i].fields[k]), sub);
		}
	}
	return 0;
}

int wp_json_permissions(struct wp_json_ctx *c, const char *path, json_t *obj)
{
	json_t *root = c->root;
	const char *k;
	json_t *v;
	if (!json_is_object(obj))
		return wp_json_type_error(c, path, "an object", obj);
	int r = check_conflicts(c, path, obj, root);
	if (r < 0)
		return r;
	json_object_foreach(obj, k, v) {
		char sub[WP_PATH_MAX];
		size_t i = 0;
		while (i < ARRAY_SIZE(switches) && strcmp(k, switches[i].key) != 0)
			i++;
		wp_json_path_key(sub, sizeof(sub), path, k);
		if (i == ARRAY_SIZE(switches))
			return wp_json_unknown_key(c, sub, &switches[0].key, ARRAY_SIZE(switches),
						   sizeof(switches[0]));
	}
	/* in the table's order, whatever the document's: read drops the
	 * read-only binds before write makes writable ones read-only */
	for (size_t i = 0; i < ARRAY_SIZE(switches); i++) {
		char sub[WP_PATH_MAX];
		if (!(v = json_object_get(obj, switches[i].key)))
			continue;
		wp_json_path_key(sub, sizeof(sub), path, switches[i].key);
		r = wp_field(c->err, switches[i].fn(c, sub, v), sub);
		if (r < 0)
			return r;
	}
	return 0;
}
