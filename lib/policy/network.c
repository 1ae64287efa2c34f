/* lib/policy/network.c — the policy's "network" object: its lists of
 * entries, its limits, the flag setters, the whole-object checks and the
 * JSON form.
 *
 * The entries themselves are net.c's; the order an override must keep is
 * tighten.c's. A document's "allow" replaces the list (so an override can
 * narrow the operator's), its "deny" adds to it (so the operator's stay),
 * and mode "none" empties both. Like the rest of the policy
 * library: no syscalls, no exits, every setter checks everything before it
 * touches the policy. p->net always equals p->network.mode.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "policy/internal.h"

#define TiB (UINT64_C(1) << 40)

/* The object's numeric keys, shared by the flags and the JSON object. */
static const struct {
	const char *key;
	enum wp_kind kind;
	size_t offset;        /* of a uint64_t in struct ward_net_policy */
	uint64_t min, max;
	bool zero_none;       /* 0 means "no limit" */
} net_limits[] = {
	{ "max_connections", WP_COUNT, offsetof(struct ward_net_policy, max_connections),
	  1, WP_NET_CONN_MAX, false },
	{ "max_bytes_out", WP_SIZE, offsetof(struct ward_net_policy, max_bytes_out),
	  1, 1024 * TiB, true },
	{ "max_bytes_in", WP_SIZE, offsetof(struct ward_net_policy, max_bytes_in),
	  1, 1024 * TiB, true },
};

static ssize_t net_limit_find(const char *key)
{
	for (size_t i = 0; key && i < ARRAY_SIZE(net_limits); i++)
		if (strcmp(key, net_limits[i].key) == 0)
			return (ssize_t)i;
	return -1;
}

static uint64_t *net_limit_slot(struct ward_net_policy *n, size_t i)
{
	return (uint64_t *)(void *)((char *)n + net_limits[i].offset);
}

static uint64_t net_limit_get(const struct ward_net_policy *n, size_t i)
{
	return *(const uint64_t *)(const void *)((const char *)n + net_limits[i].offset);
}

static int net_limit_check(size_t i, uint64_t v, const char *got, const char *where,
			   struct ward_error *err)
{
	char lo[32], hi[32];
	wp_format(net_limits[i].kind, net_limits[i].min, lo, sizeof(lo));
	wp_format(net_limits[i].kind, net_limits[i].max, hi, sizeof(hi));
	if (net_limits[i].zero_none && v == 0)
		return 0;
	if (v >= net_limits[i].min && v <= net_limits[i].max)
		return 0;
	if (net_limits[i].zero_none)
		return wp_fail(err, where, "must be 0 (no limit) or between %s and %s, got %s", lo,
			       hi, got);
	return wp_fail(err, where, "must be between %s and %s, got %s", lo, hi, got);
}

/* text: "100M", "64"; got: the value as the message shows it. */
static int net_limit_set(struct ward_net_policy *n, size_t i, const char *text, const char *got,
			 const char *where, struct ward_error *err)
{
	uint64_t v = 0;
	int r = wp_parse_kind(net_limits[i].kind, text, &v);
	if (r == -EINVAL)
		return wp_fail(err, where, "expected %s, got %s", wp_expected(net_limits[i].kind),
			       got);
	if (r < 0)
		v = UINT64_MAX;  /* out of range: the check says so */
	r = net_limit_check(i, v, got, where, err);
	if (r == 0)
		*net_limit_slot(n, i) = v;
	return r;
}

/* --- lifetime --- */

void wp_net_init(struct ward_net_policy *n)
{
	*n = (struct ward_net_policy){ .mode = WARD_NET_NONE,
				       .max_connections = WP_NET_CONN_DEFAULT };
}

void wp_net_list_release(struct ward_net_rule **list, size_t *n)
{
	for (size_t i = 0; *list && i < *n; i++)
		wp_net_rule_release(&(*list)[i]);
	free(*list);
	*list = NULL;
	*n = 0;
}

WARD_EXPORT void ward_net_policy_release(struct ward_net_policy *n)
{
	if (!n)
		return;
	wp_net_list_release(&n->allow, &n->n_allow);
	wp_net_list_release(&n->deny, &n->n_deny);
	wp_net_init(n);
}

static int list_copy(struct ward_net_rule **dst, size_t *nd, const struct ward_net_rule *src,
		     size_t ns)
{
	*dst = NULL;
	*nd = 0;
	if (!ns)
		return 0;
	if (!(*dst = calloc(ns, sizeof(**dst))))
		return -ENOMEM;
	for (size_t i = 0; i < ns; i++) {
		if (wp_net_rule_copy(&(*dst)[i], &src[i]) < 0)
			return -ENOMEM;
		(*nd)++;
	}
	return 0;
}

int wp_net_copy(struct ward_net_policy *dst, const struct ward_net_policy *src)
{
	*dst = *src;
	/* before anything can fail: releasing dst must not free src's lists */
	dst->deny = NULL;
	dst->n_deny = 0;
	int r = list_copy(&dst->allow, &dst->n_allow, src->allow, src->n_allow);
	if (r == 0)
		r = list_copy(&dst->deny, &dst->n_deny, src->deny, src->n_deny);
	if (r < 0)
		ward_net_policy_release(dst);
	return r;
}

WARD_EXPORT int ward_net_policy_copy(struct ward_net_policy *dst,
				     const struct ward_net_policy *src, struct ward_error *err)
{
	if (wp_net_copy(dst, src) < 0)
		return wp_nomem(err, "network");
	return 0;
}

static bool list_equal(const struct ward_net_rule *a, size_t na, const struct ward_net_rule *b,
		       size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (!wp_net_rule_equal(&a[i], &b[i]))
			return false;
	return true;
}

bool wp_net_equal(const struct ward_net_policy *a, const struct ward_net_policy *b)
{
	for (size_t i = 0; i < ARRAY_SIZE(net_limits); i++)
		if (net_limit_get(a, i) != net_limit_get(b, i))
			return false;
	return a->mode == b->mode && list_equal(a->allow, a->n_allow, b->allow, b->n_allow) &&
	       list_equal(a->deny, a->n_deny, b->deny, b->n_deny);
}

/* --- lists --- */

int wp_net_list_add(struct ward_net_rule **list, size_t *n, struct ward_net_rule *r,
		    const char *where, struct ward_error *err)
{
	for (size_t i = 0; i < *n; i++)
		if (wp_net_rule_equal(&(*list)[i], r)) {
			wp_net_rule_release(r);
			return 0;
		}
	if (*n >= WP_MAX_NET_RULES) {
		wp_net_rule_release(r);
		return wp_fail(err, where, "too many entries (at most %d)", WP_MAX_NET_RULES);
	}
	struct ward_net_rule *nl = realloc(*list, (*n + 1) * sizeof(*nl));
	if (!nl) {
		wp_net_rule_release(r);
		return wp_nomem(err, where);
	}
	*list = nl;
	nl[(*n)++] = *r;
	*r = (struct ward_net_rule){ 0 };
	return 0;
}

/* --- flags (ward_policy_set) --- */

static void set_mode(struct ward_policy *p, enum ward_net_mode mode)
{
	p->net = p->network.mode = mode;
	if (mode == WARD_NET_NONE) {
		/* the lists mean nothing without the proxy */
		wp_net_list_release(&p->network.allow, &p->network.n_allow);
		wp_net_list_release(&p->network.deny, &p->network.n_deny);
	}
}

static int set_mode_str(struct ward_policy *p, const char *v, const char *where,
			struct ward_error *err)
{
	char q[WP_GOT_MAX];
	if (strcmp(v, "none") == 0)
		set_mode(p, WARD_NET_NONE);
	else if (strcmp(v, "allowlist") == 0)
		set_mode(p, WARD_NET_ALLOWLIST);
	else
		return wp_fail(err, where, "expected one of \"none\", \"allowlist\", got %s",
			       wp_quote(v, q, sizeof(q)));
	return 0;
}

/* "a.test,b.test:8080" onto a copy of the list, swapped in when all of it
 * is good. */
static int add_list(struct ward_net_rule **list, size_t *n, const char *v, const char *where,
		    struct ward_error *err)
{
	struct ward_net_rule *copy = NULL;
	size_t nc = 0;
	int r = list_copy(&copy, &nc, *list, *n);
	if (r < 0) {
		wp_net_list_release(&copy, &nc);
		return wp_nomem(err, where);
	}
	for (const char *c = v; r == 0;) {
		size_t len = strcspn(c, ",");
		char entry[320];
		struct ward_net_rule rule;
		if (len >= sizeof(entry))
			len = sizeof(entry) - 1;  /* too long anyway: the parser says so */
		memcpy(entry, c, len);
		entry[len] = '\0';
		r = wp_net_rule_parse(entry, &rule, where, err);
		if (r == 0)
			r = wp_net_list_add(&copy, &nc, &rule, where, err);
		c += strcspn(c, ",");
		if (!*c)
			break;
		c++;
	}
	if (r < 0) {
		wp_net_list_release(&copy, &nc);
		return r;
	}
	wp_net_list_release(list, n);
	*list = copy;
	*n = nc;
	return 0;
}

int wp_net_set(struct ward_policy *p, const char *key, const char *value, const char *where,
	       struct ward_error *err)
{
	char q[WP_GOT_MAX];
	if (strcmp(key, "network") == 0)
		return set_mode_str(p, value, where, err);
	if (strcmp(key, "network.allow") == 0) {
		int r = add_list(&p->network.allow, &p->network.n_allow, value, where, err);
		if (r == 0)
			set_mode(p, WARD_NET_ALLOWLIST);
		return r;
	}
	if (strcmp(key, "network.deny") == 0) {
		/* a deny list means nothing without the proxy; refused here, so
		 * that every policy the setters accept prints and loads back */
		if (p->network.mode != WARD_NET_ALLOWLIST)
			return wp_fail(err, where, "deny entries need mode \"allowlist\" (allow some "
				       "hosts first; with mode \"none\" the sandbox has no network)");
		return add_list(&p->network.deny, &p->network.n_deny, value, where, err);
	}
	ssize_t i = strncmp(key, "network.", 8) == 0 ? net_limit_find(key + 8) : -1;
	if (i < 0)
		return wp_fail(err, where, "unknown policy field %s", wp_quote(key, q, sizeof(q)));
	return net_limit_set(&p->network, (size_t)i, value, wp_quote(value, q, sizeof(q)), where,
			     err);
}

/* --- whole-object checks --- */

/* A hand-filled entry is good when its text parses back to it. */
static int validate_list(const struct ward_net_rule *list, size_t n, const char *source,
			 const char *name, struct ward_error *err)
{
	char field[WP_PATH_MAX], where[WP_WHERE_MAX], text[320];
	if (n > WP_MAX_NET_RULES) {
		snprintf(field, sizeof(field), "network.%s", name);
		return wp_fail_at(err, source, field, "too many entries (at most %d)",
				  WP_MAX_NET_RULES);
	}
	for (size_t i = 0; i < n; i++) {
		struct ward_net_rule back;
		snprintf(field, sizeof(field), "network.%s[%zu]", name, i);
		snprintf(where, sizeof(where), "%s: %s", source, field);
		ward_net_rule_format(&list[i], text, sizeof(text));
		int r = wp_net_rule_parse(text, &back, where, err);
		bool same = r == 0 && wp_net_rule_equal(&back, &list[i]);
		wp_net_rule_release(&back);
		if (r == 0 && !same)
			r = wp_fail(err, where, "not a valid entry");
		if (r < 0)
			return wp_field(err, r, field);
	}
	return 0;
}

int wp_net_validate(const struct ward_net_policy *n, const char *source, struct ward_error *err)
{
	char where[WP_WHERE_MAX], field[WP_PATH_MAX], got[32];
	if (n->mode != WARD_NET_NONE && n->mode != WARD_NET_ALLOWLIST)
		return wp_fail_at(err, source, "network.mode",
				  "expected one of \"none\", \"allowlist\"");
	if (n->mode == WARD_NET_NONE && (n->n_allow || n->n_deny))
		return wp_fail_at(err, source, n->n_allow ? "network.allow" : "network.deny",
				  "entries need mode \"allowlist\" (with mode \"none\" the sandbox has no network)");
	int r = validate_list(n->allow, n->n_allow, source, "allow", err);
	if (r == 0)
		r = validate_list(n->deny, n->n_deny, source, "deny", err);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(net_limits); i++) {
		snprintf(field, sizeof(field), "network.%s", net_limits[i].key);
		snprintf(where, sizeof(where), "%s: %s", source, field);
		uint64_t v = net_limit_get(n, i);
		r = wp_field(err, net_limit_check(i, v,
						     wp_format(net_limits[i].kind, v, got, sizeof(got)),
						     where, err), field);
	}
	return r;
}

/* --- JSON --- */

static const char *const net_keys[] = {
	"mode", "allow", "deny", "max_connections", "max_bytes_out", "max_bytes_in",
};

/* One document's "network" object, before it is applied. */
struct net_doc {
	bool has_mode, has_allow, has_deny, has_limit[ARRAY_SIZE(net_limits)];
	struct ward_net_policy n;   /* the lists and limits as given */
};

static int doc_list(struct wp_json_ctx *c, const char *path, json_t *arr,
		    struct ward_net_rule **list, size_t *n)
{
	char where[WP_WHERE_MAX];
	size_t i;
	json_t *v;
	if (!json_is_array(arr))
		return wp_json_type_error(c, path, "an array of entries like \"example.com\"", arr);
	if (json_array_size(arr) > WP_MAX_NET_RULES)
		return wp_fail(c->err, wp_json_where(c, path, where, sizeof(where)),
			       "too many entries (at most %d), got %zu", WP_MAX_NET_RULES,
			       json_array_size(arr));
	json_array_foreach(arr, i, v) {
		char sub[WP_PATH_MAX + 24];
		struct ward_net_rule rule;
		wp_json_path_index(sub, sizeof(sub), path, i);
		if (!json_is_string(v))
			return wp_json_type_error(c, sub, "an entry like \"example.com\"", v);
		wp_json_where(c, sub, where, sizeof(where));
		int r = wp_net_rule_parse(json_string_value(v), &rule, where, c->err);
		if (r == 0)
			r = wp_net_list_add(list, n, &rule, where, c->err);
		if (r < 0)
			return wp_field(c->err, r, sub);
	}
	return 0;
}

/* Counts as whole numbers, sizes as text ("100M") or whole numbers. */
static int doc_limit(struct wp_json_ctx *c, const char *path, size_t i, json_t *v,
		     struct ward_net_policy *n)
{
	char where[WP_WHERE_MAX], got[WP_GOT_MAX], text[32];
	wp_json_where(c, path, where, sizeof(where));
	wp_json_got(v, got, sizeof(got));
	if (json_is_string(v) && net_limits[i].kind == WP_SIZE)
		return net_limit_set(n, i, json_string_value(v), got, where, c->err);
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		snprintf(text, sizeof(text), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		return net_limit_set(n, i, text, got, where, c->err);
	}
	return wp_fail(c->err, where, "expected %s, got %s", wp_expected(net_limits[i].kind), got);
}

static int doc_mode(struct wp_json_ctx *c, const char *path, json_t *v, struct net_doc *d)
{
	char where[WP_WHERE_MAX], got[WP_GOT_MAX];
	const char *s = json_string_value(v);
	if (s && (strcmp(s, "none") == 0 || strcmp(s, "allowlist") == 0)) {
		d->n.mode = s[0] == 'n' ? WARD_NET_NONE : WARD_NET_ALLOWLIST;
		d->has_mode = true;
		return 0;
	}
	return wp_fail(c->err, wp_json_where(c, path, where, sizeof(where)),
		       "expected one of \"none\", \"allowlist\", got %s",
		       wp_json_got(v, got, sizeof(got)));
}

static int doc_read(struct wp_json_ctx *c, const char *path, json_t *obj, struct net_doc *d)
{
	const char *k;
	json_t *v;
	if (!json_is_object(obj))
		return wp_json_type_error(c, path, "an object", obj);
	json_object_foreach(obj, k, v) {
		char sub[WP_PATH_MAX];
		ssize_t li = net_limit_find(k);
		int r;
		wp_json_path_key(sub, sizeof(sub), path, k);
		if (strcmp(k, "mode") == 0) {
			r = doc_mode(c, sub, v, d);
		} else if (strcmp(k, "allow") == 0) {
			d->has_allow = true;
			r = doc_list(c, sub, v, &d->n.allow, &d->n.n_allow);
		} else if (strcmp(k, "deny") == 0) {
			d->has_deny = true;
			r = doc_list(c, sub, v, &d->n.deny, &d->n.n_deny);
		} else if (li >= 0) {
			d->has_limit[li] = true;
			r = doc_limit(c, sub, (size_t)li, v, &d->n);
		} else {
			return wp_json_unknown_key(c, sub, net_keys, ARRAY_SIZE(net_keys),
						   sizeof(net_keys[0]));
		}
		if (wp_field(c->err, r, sub) < 0)
			return r;
	}
	if (d->has_mode && d->n.mode == WARD_NET_NONE && (d->has_allow || d->has_deny)) {
		char sub[WP_PATH_MAX], where[WP_WHERE_MAX];
		wp_json_path_key(sub, sizeof(sub), path, d->has_allow ? "allow" : "deny");
		return wp_field(c->err, wp_fail(c->err, wp_json_where(c, sub, where, sizeof(where)),
						"not allowed with mode \"none\" (no network at all); "
						"use mode \"allowlist\""), sub);
	}
	return 0;
}

/* The document onto *t: on error *t may hold part of it (callers work on
 * a copy). */
static int doc_apply(struct wp_json_ctx *c, const char *path, struct net_doc *d,
		     struct ward_net_policy *t)
{
	char sub[WP_PATH_MAX], where[WP_WHERE_MAX];
	wp_json_path_key(sub, sizeof(sub), path, "deny");
	wp_json_where(c, sub, where, sizeof(where));
	if (d->has_allow) {
		wp_net_list_release(&t->allow, &t->n_allow);
		t->allow = d->n.allow;
		t->n_allow = d->n.n_allow;
		d->n.allow = NULL;
		d->n.n_allow = 0;
	}
	for (size_t i = 0; i < d->n.n_deny; i++) {
		int r = wp_net_list_add(&t->deny, &t->n_deny, &d->n.deny[i], where, c->err);
		if (r < 0)
			return wp_field(c->err, r, sub);
	}
	for (size_t i = 0; i < ARRAY_SIZE(net_limits); i++)
		if (d->has_limit[i])
			*net_limit_slot(t, i) = net_limit_get(&d->n, i);
	if (d->has_mode)
		t->mode = d->n.mode;
	else if (d->has_allow)
		t->mode = WARD_NET_ALLOWLIST;  /* an allowlist says what it is */
	if (t->mode == WARD_NET_NONE && d->has_deny)
		return wp_field(c->err, wp_fail(c->err, where,
						"entries need mode \"allowlist\" (with mode \"none\" the sandbox has no network)"),
				sub);
	if (t->mode == WARD_NET_NONE) {
		wp_net_list_release(&t->allow, &t->n_allow);
		wp_net_list_release(&t->deny, &t->n_deny);
	}
	return 0;
}

static int net_json_onto(struct wp_json_ctx *c, const char *path, json_t *obj,
			 struct ward_net_policy *t)
{
	struct net_doc d = { .n = { 0 } };
	int r = doc_read(c, path, obj, &d);
	if (r == 0)
		r = doc_apply(c, path, &d, t);
	ward_net_policy_release(&d.n);
	return r;
}

int wp_net_json_apply(struct wp_json_ctx *c, const char *path, json_t *obj)
{
	int r = net_json_onto(c, path, obj, &c->p->network);
	c->p->net = c->p->network.mode;
	return r;
}

WARD_EXPORT int ward_net_policy_apply_json(struct ward_net_policy *n, const char *buf,
					   size_t len, const char *source,
					   struct ward_error *err)
{
	struct wp_json_ctx c = { .source = source ? source : "network", .err = err };
	struct ward_net_policy copy;
	int r;
	json_t *root = wp_json_parse(&c, buf ? buf : "", buf ? len : 0, &r);
	if (!root)
		return r;
	r = wp_net_copy(&copy, n) < 0 ? wp_nomem(err, c.source) : 0;
	if (r == 0)
		r = net_json_onto(&c, "network", root, &copy);
	if (r == 0)
		r = wp_net_validate(&copy, c.source, err);
	json_decref(root);
	if (r < 0) {
		ward_net_policy_release(&copy);
		return r;
	}
	ward_net_policy_release(n);
	*n = copy;
	return 0;
}

/* A network object alone: the defaults, with the document applied. */
WARD_EXPORT int ward_net_policy_from_json(struct ward_net_policy *out, const char *buf,
					  size_t len, const char *source,
					  struct ward_error *err)
{
	wp_net_init(out);
	return ward_net_policy_apply_json(out, buf, len, source, err);
}

static json_t *rules_json(const struct ward_net_rule *list, size_t n, bool *ok)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++) {
		char text[320];
		if (json_array_append_new(a, json_string(ward_net_rule_format(&list[i], text,
									      sizeof(text)))) < 0)
			*ok = false;
	}
	if (!a)
		*ok = false;
	return a;
}

static void put(json_t *o, const char *key, json_t *v, bool *ok)
{
	if (json_object_set_new(o, key, v) < 0)
		*ok = false;
}

/* Mode "none" prints only what differs from the defaults (the lists are
 * empty then), so a default policy prints {"mode": "none"}; an allowlist
 * prints every key. Entries keep their order. */
json_t *wp_net_json(const struct ward_net_policy *n, bool *ok)
{
	static const struct ward_net_policy defaults = { .max_connections = WP_NET_CONN_DEFAULT };
	bool all = n->mode == WARD_NET_ALLOWLIST;
	json_t *o = json_object();
	if (!o) {
		*ok = false;
		return NULL;
	}
	put(o, "mode", json_string(all ? "allowlist" : "none"), ok);
	if (all) {
		put(o, "allow", rules_json(n->allow, n->n_allow, ok), ok);
		put(o, "deny", rules_json(n->deny, n->n_deny, ok), ok);
	}
	for (size_t i = 0; i < ARRAY_SIZE(net_limits); i++) {
		uint64_t v = net_limit_get(n, i);
		char text[32];
		if (!all && v == net_limit_get(&defaults, i))
			continue;
		put(o, net_limits[i].key,
		    net_limits[i].kind == WP_COUNT ? json_integer((json_int_t)v)
						   : json_string(wp_format(WP_SIZE, v, text,
									   sizeof(text))),
		    ok);
	}
	return o;
}

WARD_EXPORT json_t *ward_net_policy_to_json(const struct ward_net_policy *n)
{
	bool ok = true;
	json_t *o = n ? wp_net_json(n, &ok) : NULL;
	if (o && !ok) {
		json_decref(o);
		o = NULL;
	}
	return o;
}
