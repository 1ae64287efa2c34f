/* lib/policy/json.c — JSON policy documents onto a policy, and back.
 *
 * Documents are untrusted: size and nesting are bounded before jansson sees
 * them, unknown keys are errors (a typo must never silently fall back to a
 * default), and the document is applied to a copy so a failure leaves the
 * caller's policy untouched. Values go through the same setters as the CLI
 * flags, so both accept exactly the same things. No syscalls beyond what
 * jansson does on a buffer.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "policy/internal.h"

typedef int (*json_fn)(struct wp_json_ctx *c, const char *path, json_t *v);

struct key {
	const char *name;
	json_fn fn;
};

/* "policy.json: limits.memory"; the document itself when path is empty. */
const char *wp_json_where(const struct wp_json_ctx *c, const char *path, char *buf,
			    size_t len)
{
	if (path[0])
		snprintf(buf, len, "%s: %s", c->source, path);
	else
		snprintf(buf, len, "%s", c->source);
	return buf;
}

/* Appends a key to a dotted path. Keys are untrusted: control characters
 * become '?' and long keys are cut, so the message stays readable. */
const char *wp_json_path_key(char *dst, size_t len, const char *parent,
			    const char *key)
{
	enum { KEY_SHOWN = 64 };
	size_t o = (size_t)snprintf(dst, len, "%s%s", parent, parent[0] ? "." : "");
	for (size_t i = 0; key[i] && o + 4 < len; i++, o++) {
		if (i == KEY_SHOWN) {
			memcpy(dst + o, "...", 3);
			o += 3;
			break;
		}
		unsigned char ch = (unsigned char)key[i];
		dst[o] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
	}
	dst[o < len ? o : len - 1] = '\0';
	return dst;
}

const char *wp_json_path_index(char *dst, size_t len, const char *parent, size_t i)
{
	snprintf(dst, len, "%s[%zu]", parent, i);
	return dst;
}

/* The value as the message shows it (always written into buf): strings
 * quoted, numbers as jansson prints them, containers by kind. */
const char *wp_json_got(json_t *v, char *buf, size_t len)
{
	static const char *const kinds[] = {
		[JSON_OBJECT] = "an object", [JSON_ARRAY] = "an array",
		[JSON_TRUE] = "true", [JSON_FALSE] = "false", [JSON_NULL] = "null",
	};
	if (json_is_string(v))
		return wp_quote(json_string_value(v), buf, len);
	if (json_is_integer(v)) {
		snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	} else if (json_is_real(v)) {
		/* jansson formats reals without the locale's decimal comma */
		char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(10));
		ward_strlcpy(buf, s ? s : "a number", len);
		free(s);
	} else {
		ward_strlcpy(buf, kinds[json_typeof(v)], len);
	}
	return buf;
}

int wp_json_type_error(struct wp_json_ctx *c, const char *path, const char *expected,
		      json_t *v)
{
	char where[WP_WHERE_MAX], got[WP_GOT_MAX];
	return wp_field(c->err, wp_fail(c->err, wp_json_where(c, path, where, sizeof(where)),
					"expected %s, got %s", expected,
					wp_json_got(v, got, sizeof(got))), path);
}

int wp_json_unknown_key(struct wp_json_ctx *c, const char *path, const char *const *names,
		       size_t n, size_t stride)
{
	char where[WP_WHERE_MAX], hint[WARD_ERROR_HINT_MAX] = "known fields: ";
	int r = wp_fail(c->err, wp_json_where(c, path, where, sizeof(where)),
			"unknown field");
	for (size_t i = 0; i < n; i++) {
		const char *name = *(const char *const *)(const void *)
			((const char *)names + i * stride);
		ward_strlcat(hint, name, sizeof(hint));
		if (i + 1 < n)
			ward_strlcat(hint, ", ", sizeof(hint));
	}
	ward_error_hint(c->err, hint);
	return wp_field(c->err, r, path);
}

static int walk(struct wp_json_ctx *c, const char *path, json_t *obj,
		const struct key *keys, size_t n)
{
	const char *k;
	json_t *v;
	if (!json_is_object(obj))
		return wp_json_type_error(c, path, "an object", obj);
	json_object_foreach(obj, k, v) {
		char sub[WP_PATH_MAX];
		const struct key *h = NULL;
		wp_json_path_key(sub, sizeof(sub), path, k);
		for (size_t i = 0; !h && i < n; i++)
			if (strcmp(k, keys[i].name) == 0)
				h = &keys[i];
		if (!h)
			return wp_json_unknown_key(c, sub, &keys[0].name, n, sizeof(keys[0]));
		int r = wp_field(c->err, h->fn(c, sub, v), sub);
		if (r < 0)
			return r;
	}
	return 0;
}

/* --- limits --- */

/* A JSON real as fixed-point text for the shared parsers ("1.500000"),
 * formatted by hand so LC_NUMERIC cannot turn the point into a comma. */
static int real_to_text(double x, char *buf, size_t len)
{
	if (!(x >= 0))
		return -EINVAL;
	if (x >= 1e15)
		return -ERANGE;
	uint64_t whole = (uint64_t)x;
	uint64_t frac = (uint64_t)((x - (double)whole) * 1e6 + 0.5);
	if (frac >= 1000000) {
		whole++;
		frac -= 1000000;
	}
	if (whole == 0 && frac == 0 && x > 0)
		return -ERANGE;  /* too small to show; never let it mean "none" */
	snprintf(buf, len, "%" PRIu64 ".%06" PRIu64, whole, frac);
	return 0;
}

/* Which JSON types each kind takes: sizes and durations as text ("512M",
 * "250ms"), durations and CPUs as fractional numbers, counts only whole. */
static int limit_json(struct wp_json_ctx *c, const char *path, const struct wp_limit *l,
		      json_t *v)
{
	char where[WP_WHERE_MAX], got[WP_GOT_MAX], text[48];
	bool text_ok = l->kind == WP_SIZE || l->kind == WP_DURATION;
	bool real_ok = l->kind == WP_DURATION || l->kind == WP_CPUS;
	int rc = -EINVAL;

	wp_json_where(c, path, where, sizeof(where));
	wp_json_got(v, got, sizeof(got));
	if (json_is_string(v) && text_ok)
		return wp_limit_set_str(c->p, l, json_string_value(v), got, where, c->err);
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		snprintf(text, sizeof(text), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		return wp_limit_set_str(c->p, l, text, got, where, c->err);
	}
	if (json_is_real(v) && real_ok) {
		rc = real_to_text(json_real_value(v), text, sizeof(text));
		if (rc == 0)
			return wp_limit_set_str(c->p, l, text, got, where, c->err);
	}
	return wp_limit_apply(c->p, l, rc, 0, got, where, c->err);
}

static int j_limits(struct wp_json_ctx *c, const char *path, json_t *obj)
{
	const char *k;
	json_t *v;
	if (!json_is_object(obj))
		return wp_json_type_error(c, path, "an object", obj);
	json_object_foreach(obj, k, v) {
		char sub[WP_PATH_MAX];
		const struct wp_limit *l = wp_limit_find(k);
		wp_json_path_key(sub, sizeof(sub), path, k);
		if (!l)
			return wp_json_unknown_key(c, sub, &wp_limits[0].key, wp_n_limits,
					   sizeof(wp_limits[0]));
		int r = wp_field(c->err, limit_json(c, sub, l, v), sub);
		if (r < 0)
			return r;
	}
	return 0;
}

/* --- mounts --- */

/* Names only: a mount is applied as a whole, not key by key. */
static const struct key mount_keys[] = {
	{ "host", NULL }, { "inside", NULL }, { "writable", NULL },
};

static int mount_json(struct wp_json_ctx *c, const char *path, json_t *m)
{
	char sub[WP_PATH_MAX], wh[WP_WHERE_MAX], wi[WP_WHERE_MAX];
	const char *k;
	json_t *v, *host, *inside, *writable;

	if (!json_is_object(m))
		return wp_json_type_error(c, path, "an object", m);
	/* check every key and type first, then apply the mount as a whole */
	json_object_foreach(m, k, v) {
		size_t i = 0;
		while (i < ARRAY_SIZE(mount_keys) && strcmp(k, mount_keys[i].name))
			i++;
		wp_json_path_key(sub, sizeof(sub), path, k);
		if (i == ARRAY_SIZE(mount_keys))
			return wp_json_unknown_key(c, sub, &mount_keys[0].name,
					   ARRAY_SIZE(mount_keys), sizeof(mount_keys[0]));
		bool flag = strcmp(k, "writable") == 0;
		if (flag ? !json_is_boolean(v) : !json_is_string(v))
			return wp_json_type_error(c, sub, flag ? "true or false" : "a string", v);
	}
	host = json_object_get(m, "host");
	inside = json_object_get(m, "inside");
	writable = json_object_get(m, "writable");
	if (!host)
		return wp_fail(c->err, wp_json_where(c, path, wh, sizeof(wh)),
			       "missing required field \"host\"");
	if (c->p->n_binds >= WP_MAX_MOUNTS)
		return wp_fail(c->err, wp_json_where(c, path, wh, sizeof(wh)),
			       "too many mounts (at most %d)", WP_MAX_MOUNTS);
	wp_json_where(c, wp_json_path_key(sub, sizeof(sub), path, "host"), wh, sizeof(wh));
	wp_json_where(c, wp_json_path_key(sub, sizeof(sub), path, "inside"), wi, sizeof(wi));
	return wp_bind_add(c->p, json_string_value(host),
			   inside ? json_string_value(inside) : NULL,
			   writable && json_is_true(writable), wh,
			   inside ? wi : wh, c->err);
}

static int j_mounts(struct wp_json_ctx *c, const char *path, json_t *arr)
{
	size_t i;
	json_t *m;
	if (!json_is_array(arr))
		return wp_json_type_error(c, path, "an array of mounts", arr);
	json_array_foreach(arr, i, m) {
		char sub[WP_PATH_MAX];
		wp_json_path_index(sub, sizeof(sub), path, i);
		int r = wp_field(c->err, mount_json(c, sub, m), sub);
		if (r < 0)
			return r;
	}
	return 0;
}

/* --- env, strings, small objects --- */

static int j_env(struct wp_json_ctx *c, const char *path, json_t *obj)
{
	const char *k;
	json_t *v;
	if (!json_is_object(obj))
		return wp_json_type_error(c, path, "an object of NAME: \"VALUE\" pairs", obj);
	json_object_foreach(obj, k, v) {
		char sub[WP_PATH_MAX], where[WP_WHERE_MAX];
		/* a bad name is reported on "env", since it is no field name */
		bool named = wp_env_name_valid(k, strlen(k));
		wp_json_path_key(sub, sizeof(sub), path, k);
		if (named && !json_is_string(v) && !json_is_null(v))
			return wp_json_type_error(c, sub, "a string or null", v);
		wp_json_where(c, named ? sub : path, where, sizeof(where));
		int r = wp_field(c->err,
				 wp_env_set(c->p, k, json_is_string(v) ? json_string_value(v) : NULL,
					    where, c->err), named ? sub : path);
		if (r < 0)
			return r;
	}
	return 0;
}

typedef int (*string_setter)(struct ward_policy *p, const char *s,
			     const char *where, struct ward_error *err);

static int string_field(struct wp_json_ctx *c, const char *path, json_t *v,
			string_setter fn)
{
	char where[WP_WHERE_MAX];
	if (!json_is_string(v))
		return wp_json_type_error(c, path, "a string", v);
	return fn(c->p, json_string_value(v), wp_json_where(c, path, where, sizeof(where)),
		  c->err);
}

static int j_workdir(struct wp_json_ctx *c, const char *path, json_t *v)
{
	return string_field(c, path, v, wp_set_workdir);
}

static int j_hostname(struct wp_json_ctx *c, const char *path, json_t *v)
{
	return string_field(c, path, v, wp_set_hostname);
}

static int j_image(struct wp_json_ctx *c, const char *path, json_t *v)
{
	return string_field(c, path, v, wp_set_image);
}

static int bool_field(struct wp_json_ctx *c, const char *path, json_t *v, bool *slot)
{
	if (!json_is_boolean(v))
		return wp_json_type_error(c, path, "true or false", v);
	*slot = json_is_true(v);
	return 0;
}

static int j_user_root(struct wp_json_ctx *c, const char *path, json_t *v)
{
	return bool_field(c, path, v, &c->p->root_inside);
}

static int j_cgroup_required(struct wp_json_ctx *c, const char *path, json_t *v)
{
	return bool_field(c, path, v, &c->p->require_cgroup);
}

static const struct key user_keys[] = { { "root", j_user_root } };
static const struct key cgroup_keys[] = { { "required", j_cgroup_required } };

static int j_network(struct wp_json_ctx *c, const char *path, json_t *v)
{
	return wp_net_json_apply(c, path, v);
}

static int j_user(struct wp_json_ctx *c, const char *path, json_t *v)
{
	return walk(c, path, v, user_keys, ARRAY_SIZE(user_keys));
}

static int j_cgroup(struct wp_json_ctx *c, const char *path, json_t *v)
{
	return walk(c, path, v, cgroup_keys, ARRAY_SIZE(cgroup_keys));
}

static int j_degraded(struct wp_json_ctx *c, const char *path, json_t *arr)
{
	size_t i;
	json_t *v;
	if (!json_is_array(arr))
		return wp_json_type_error(c, path, "an array of layer names", arr);
	json_array_foreach(arr, i, v) {
		char sub[WP_PATH_MAX], where[WP_WHERE_MAX];
		wp_json_path_index(sub, sizeof(sub), path, i);
		if (!json_is_string(v))
			return wp_json_type_error(c, sub, "a layer name", v);
		int r = wp_field(c->err, wp_degrade_add(c->p, json_string_value(v),
							wp_json_where(c, sub, where, sizeof(where)),
							c->err), sub);
		if (r < 0)
			return r;
	}
	return 0;
}

/* --- lint --- */

static int lint_list_json(struct wp_json_ctx *c, const char *path, const struct wp_lint *l,
			  json_t *arr)
{
	size_t i;
	json_t *v;
	if (!json_is_array(arr))
		return wp_json_type_error(c, path, l->array, arr);
	json_array_foreach(arr, i, v) {
		/* room for "[index]" after a full path, so the index is never cut */
		char sub[WP_PATH_MAX + 24], where[WP_WHERE_MAX];
		wp_json_path_index(sub, sizeof(sub), path, i);
		if (!json_is_string(v))
			return wp_json_type_error(c, sub, l->expected, v);
		int r = wp_field(c->err, wp_lint_add(c->p, l, json_string_value(v),
						     wp_json_where(c, sub, where, sizeof(where)),
						     c->err), sub);
		if (r < 0)
			return r;
	}
	return 0;
}

static int j_lint(struct wp_json_ctx *c, const char *path, json_t *obj)
{
	const char *k;
	json_t *v;
	if (!json_is_object(obj))
		return wp_json_type_error(c, path, "an object", obj);
	json_object_foreach(obj, k, v) {
		char sub[WP_PATH_MAX];
		const struct wp_lint *l = wp_lint_find(k);
		wp_json_path_key(sub, sizeof(sub), path, k);
		if (!l)
			return wp_json_unknown_key(c, sub, &wp_lints[0].key, wp_n_lints,
					   sizeof(wp_lints[0]));
		int r = lint_list_json(c, sub, l, v);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Applied after the rest of the document (ward_policy_load_json). */
static int j_permissions_later(struct wp_json_ctx *c, const char *path, json_t *v)
{
	(void)c, (void)path, (void)v;
	return 0;
}

static const struct key top_keys[] = {
	{ "limits", j_limits },
	{ "mounts", j_mounts },
	{ "env", j_env },
	{ "workdir", j_workdir },
	{ "hostname", j_hostname },
	{ "image", j_image },
	{ "network", j_network },
	{ "user", j_user },
	{ "cgroup", j_cgroup },
	{ "allow_degraded", j_degraded },
	{ "lint", j_lint },
	{ "permissions", j_permissions_later },
	{ "writable", wp_json_writable },
	{ "exec", wp_json_exec },
};

/* --- loading --- */

/* jansson recurses once per level (up to 2048); the schema needs 3. Counting
 * brackets outside strings first keeps hostile nesting away from it. */
static int json_check_depth(const struct wp_json_ctx *c, const char *buf, size_t len)
{
	size_t at;
	if (!ward_json_too_deep(buf, len, WP_MAX_DEPTH, &at))
		return 0;
	int line = 1, col = 0; /* the position is only for the message */
	for (size_t i = 0; i <= at; i++, col++)
		if (buf[i] == '\n') {
			line++;
			col = -1;
		}
	return ward_error_set(c->err, 0, NULL, "%s:%d:%d: nesting deeper than %d levels",
			      c->source, line, col, WP_MAX_DEPTH);
}

json_t *wp_json_parse(const struct wp_json_ctx *c, const char *buf, size_t len, int *r)
{
	json_error_t je;
	json_t *root;

	*r = 0;
	if (len > WP_MAX_DOC) {
		*r = wp_fail(c->err, c->source,
			     "document is %zu bytes, more than the limit of %d KiB",
			     len, WP_MAX_DOC / 1024);
		return NULL;
	}
	if ((*r = json_check_depth(c, buf, len)) < 0)
		return NULL;
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		enum json_error_code code = json_error_code(&je);
		/* jansson's text names its own flag here; say what is wrong */
		bool nul = code == json_error_null_character ||
			   code == json_error_null_byte_in_key;
		if (code == json_error_out_of_memory)
			*r = wp_nomem(c->err, c->source);
		else
			*r = ward_error_set(c->err, 0, NULL, "%s:%d:%d: invalid JSON: %s",
					    c->source, je.line, je.column,
					    nul ? "strings must not contain \\u0000" : je.text);
	}
	return root;
}

WARD_EXPORT int ward_policy_load_json(struct ward_policy *p, const char *buf,
				      size_t len, const char *source,
				      struct ward_error *err)
{
	struct wp_json_ctx c = { .source = source ? source : "policy", .err = err };
	struct ward_policy copy;
	json_t *root;
	int r;

	if (!p)
		return wp_fail(err, c.source, "no policy given");
	root = wp_json_parse(&c, buf ? buf : "", buf ? len : 0, &r);
	if (!root)
		return r;
	if (!json_is_object(root)) {
		r = wp_json_type_error(&c, "", "a JSON object at the top level", root);
		json_decref(root);
		return r;
	}
	r = ward_policy_copy(&copy, p, err);
	if (r == 0) {
		c.p = &copy;
		c.root = root;
		r = walk(&c, "", root, top_keys, ARRAY_SIZE(top_keys));
		json_t *perms = json_object_get(root, "permissions");
		if (r == 0 && perms)
			r = wp_field(err, wp_json_permissions(&c, "permissions", perms), "permissions");
		if (r < 0) {
			ward_policy_release(&copy);
		} else {
			ward_policy_release(p);
			*p = copy;
		}
	}
	json_decref(root);
	return r;
}

/* --- serialising --- */

/* Adds key: value, taking the reference; jansson drops value on failure, so
 * one flag collects every failure (ENOMEM) for the end. */
static void put(json_t *obj, const char *key, json_t *v, bool *ok)
{
	if (json_object_set_new(obj, key, v) < 0)
		*ok = false;
}

static json_t *limits_json(const struct ward_policy *p, bool *ok)
{
	json_t *o = json_object();
	for (size_t i = 0; o && i < wp_n_limits; i++) {
		const struct wp_limit *l = &wp_limits[i];
		uint64_t v = *(const uint64_t *)(const void *)((const char *)p + l->offset);
		char text[32];
		json_t *j;
		if (l->kind == WP_COUNT || (l->kind == WP_CPUS && v % 1000 == 0))
			j = json_integer((json_int_t)(l->kind == WP_CPUS ? v / 1000 : v));
		else if (l->kind == WP_CPUS)
			j = json_real((double)v / 1000.0);
		else
			j = json_string(wp_format(l->kind, v, text, sizeof(text)));
		put(o, l->key, j, ok);
	}
	return o;
}

static json_t *mounts_json(const struct ward_policy *p, bool *ok)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < p->n_binds; i++) {
		json_t *m = json_object();
		if (m) {
			put(m, "host", json_string(p->binds[i].host), ok);
			put(m, "inside", json_string(p->binds[i].inside), ok);
			put(m, "writable", json_boolean(p->binds[i].writable), ok);
		}
		if (json_array_append_new(a, m) < 0)
			*ok = false;
	}
	return a;
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void put_entry(json_t *o, const char *entry, bool *ok)
{
	const char *eq = strchr(entry, '=');
	char *name = eq ? strndup(entry, (size_t)(eq - entry)) : NULL;
	if (name)
		put(o, name, json_string(eq + 1), ok);
	else if (eq)
		*ok = false;
	free(name);
}

/* The variables sorted (order carries no meaning, and equal policies must
 * print the same bytes for audit digests), then null for each default the
 * policy removed: the output is an overlay on the defaults, so loading it
 * onto a fresh policy gives this one back. */
static json_t *env_json(const struct ward_policy *p, bool *ok)
{
	json_t *o = json_object();
	char **sorted = p->n_env ? malloc(p->n_env * sizeof(*sorted)) : NULL;
	if (!o || (p->n_env && !sorted)) {
		free(sorted);
		*ok = false;
		return o;
	}
	size_t n = 0;
	for (size_t i = 0; i < p->n_env; i++)
		if (p->env[i])
			sorted[n++] = p->env[i];
	if (n)
		qsort(sorted, n, sizeof(*sorted), cmp_entry);
	for (size_t i = 0; i < n; i++)
		put_entry(o, sorted[i], ok);
	free(sorted);
	for (size_t i = 0; wp_default_env[i]; i++) {
		const char *d = wp_default_env[i];
		size_t len = strcspn(d, "=");
		char name[64];
		ward_strlcpy(name, d, len + 1);
		if (!json_object_get(o, name))
			put(o, name, json_null(), ok);
	}
	return o;
}

static json_t *degraded_json(const struct ward_policy *p, bool *ok)
{
	json_t *a = json_array();
	for (int i = 0; a && i < WARD_LAYER_COUNT; i++)
		if ((p->allow_degrade & (1u << i)) &&
		    json_array_append_new(a, json_string(ward_layer_name((enum ward_layer)i))) < 0)
			*ok = false;
	return a;
}

/* Sorted, like env: the order names were added in carries no meaning. A
 * hand-filled NULL entry fails the whole output, like a non-UTF-8 string. */
static json_t *names_json(char *const *v, size_t n, bool *ok)
{
	json_t *a = json_array();
	char **sorted = n ? malloc(n * sizeof(*sorted)) : NULL;
	size_t m = 0;
	if (!a || (n && !sorted)) {
		free(sorted);
		*ok = false;
		return a;
	}
	for (size_t i = 0; i < n; i++)
		if (v && v[i])
			sorted[m++] = v[i];
	if (m < n)
		*ok = false;
	if (m)
		qsort(sorted, m, sizeof(*sorted), cmp_entry);
	for (size_t i = 0; i < m; i++)
		if (json_array_append_new(a, json_string(sorted[i])) < 0)
			*ok = false;
	free(sorted);
	return a;
}

static json_t *lint_json(const struct ward_policy *p, bool *ok)
{
	json_t *o = json_object();
	for (size_t k = 0; o && k < wp_n_lints; k++) {
		size_t n;
		char **v = wp_lint_get(p, &wp_lints[k], &n);
		put(o, wp_lints[k].key, names_json(v, n, ok), ok);
	}
	return o;
}

static bool lint_empty(const struct ward_policy *p)
{
	return p->n_lint_deny_imports == 0 && p->n_lint_deny_calls == 0;
}

static json_t *one(const char *key, json_t *v, bool *ok)
{
	json_t *o = json_object();
	if (o)
		put(o, key, v, ok);
	else
		json_decref(v);
	return o;
}

WARD_EXPORT char *ward_policy_to_json(const struct ward_policy *p)
{
	bool ok = true;
	char *out = NULL;
	json_t *root = json_object();
	if (!root)
		return NULL;
	put(root, "limits", limits_json(p, &ok), &ok);
	put(root, "mounts", mounts_json(p, &ok), &ok);
	put(root, "env", env_json(p, &ok), &ok);
	put(root, "workdir", json_string(p->workdir ? p->workdir : ""), &ok);
	put(root, "hostname", json_string(p->hostname ? p->hostname : ""), &ok);
	put(root, "image", json_string(p->image ? p->image : ""), &ok);
	put(root, "network", wp_net_json(&p->network, &ok), &ok);
	put(root, "user", one("root", json_boolean(p->root_inside), &ok), &ok);
	put(root, "cgroup", one("required", json_boolean(p->require_cgroup), &ok), &ok);
	put(root, "allow_degraded", degraded_json(p, &ok), &ok);
	/* left out when empty, so policies without lint print as they always did */
	if (!lint_empty(p))
		put(root, "lint", lint_json(p, &ok), &ok);
	wp_fs_json(p, root, &ok);
	if (ok)
		out = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
	json_decref(root);
	return out;
}

WARD_EXPORT json_t *ward_policy_lint_json(const struct ward_policy *p)
{
	bool ok = true;
	if (!p || lint_empty(p))
		return NULL;
	json_t *o = lint_json(p, &ok);
	if (o && !ok) {
		json_decref(o);
		o = NULL;
	}
	return o;
}
