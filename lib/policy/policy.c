/* lib/policy/policy.c — the policy struct: defaults, setters, flags, checks.
 *
 * Every setter validates its input completely before it touches the policy,
 * so a failed call leaves the policy as it was. No syscalls, no exits; the
 * only failure that is not the caller's input is ENOMEM.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "policy/internal.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)
#define TiB (UINT64_C(1) << 40)
#define HOUR_MS UINT64_C(3600000)

/* Indexed by enum ward_layer; the names are what "allow_degraded" and the
 * verdict use. */
static const char *const layer_names[WARD_LAYER_COUNT] = {
	[WARD_LAYER_USERNS] = "userns",
	[WARD_LAYER_MOUNT] = "mount",
	[WARD_LAYER_PID] = "pid",
	[WARD_LAYER_NET] = "net",
	[WARD_LAYER_IPC] = "ipc",
	[WARD_LAYER_UTS] = "uts",
	[WARD_LAYER_CGROUPNS] = "cgroupns",
	[WARD_LAYER_TIME] = "time",
	[WARD_LAYER_CGROUP] = "cgroup",
	[WARD_LAYER_RLIMITS] = "rlimits",
	[WARD_LAYER_PRIVILEGES] = "privileges",
	[WARD_LAYER_LANDLOCK] = "landlock",
	[WARD_LAYER_SECCOMP] = "seccomp",
	[WARD_LAYER_ENV] = "env",
};

/* Only layers with a weaker fallback may degrade: landlock (the mount
 * namespace still hides the host), cgroup (rlimits still bound the program),
 * and the time and cgroup namespaces (information hiding only). The others
 * are the boundary itself. */
static const uint32_t degradable = (1u << WARD_LAYER_LANDLOCK) |
				   (1u << WARD_LAYER_CGROUP) |
				   (1u << WARD_LAYER_TIME) |
				   (1u << WARD_LAYER_CGROUPNS);

WARD_EXPORT const char *ward_layer_name(enum ward_layer layer)
{
	if ((unsigned)layer >= WARD_LAYER_COUNT)
		return NULL;
	return layer_names[layer];
}

WARD_EXPORT int ward_layer_from_name(const char *name)
{
	for (int i = 0; name && i < WARD_LAYER_COUNT; i++)
		if (strcmp(name, layer_names[i]) == 0)
			return i;
	return -1;
}

/* Nothing comes from the host environment. HOME and TMPDIR point at the two
 * writable tmpfs mounts; MPLCONFIGDIR because matplotlib fails to import
 * without a writable config dir; no bytecode writes into read-only images. */
const char *const wp_default_env[] = {
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"HOME=/workspace",
	"LANG=C.UTF-8",
	"TMPDIR=/tmp",
	"USER=sandbox",
	"LOGNAME=sandbox",
	"SHELL=/bin/sh",
	"MPLCONFIGDIR=/tmp/matplotlib",
	"PYTHONDONTWRITEBYTECODE=1",
	NULL,
};

#define LIMIT(key, kind, field, lo, hi, zero, tight) \
	{ key, kind, offsetof(struct ward_policy, field), lo, hi, zero, tight, NULL }
#define LIMIT_WHY(key, kind, field, lo, hi, zero, tight, why) \
	{ key, kind, offsetof(struct ward_policy, field), lo, hi, zero, tight, why }
#define NO_LIMIT "no limit"
#define SMALLER WP_TIGHT_SMALLER
#define SMALLER_0_NONE WP_TIGHT_SMALLER_0_NONE

/* Ranges: a floor below which programs cannot start at all, a ceiling that
 * catches unit mistakes ("512G" for "512M"). The last column is the order
 * an override must keep (tighten.c). pids: below 2 not even ward-init and
 * the program can both exist; the sandbox could only fail to start. */
const struct wp_limit wp_limits[] = {
	LIMIT("memory", WP_SIZE, memory, 4 * MiB, TiB, NULL, SMALLER),
	LIMIT_WHY("pids", WP_COUNT, pids, 2, 65536, NULL, SMALLER,
		  "ward-init and the program are a process each"),
	LIMIT("timeout", WP_DURATION, timeout_ms, 1, 24 * HOUR_MS, NULL, SMALLER),
	LIMIT("cpu_time", WP_DURATION, cpu_time_ms, 1, 24 * HOUR_MS, NO_LIMIT, SMALLER_0_NONE),
	LIMIT("cpus", WP_CPUS, cpus_milli, 10, 1024 * 1000, NO_LIMIT, SMALLER_0_NONE),
	LIMIT("workspace_size", WP_SIZE, workspace_size, MiB, TiB, NULL, SMALLER),
	LIMIT("workspace_inodes", WP_COUNT, workspace_inodes, 64, 1u << 24, NULL, SMALLER),
	LIMIT("tmp_size", WP_SIZE, tmp_size, MiB, TiB, NULL, SMALLER),
	LIMIT("tmp_inodes", WP_COUNT, tmp_inodes, 64, 1u << 24, NULL, SMALLER),
	LIMIT("nofile", WP_COUNT, nofile, 16, 1u << 20, NULL, SMALLER),
	LIMIT("file_size", WP_SIZE, fsize, 1, TiB, "the workspace size",
	      WP_TIGHT_SMALLER_0_WORKSPACE),
	LIMIT("stack", WP_SIZE, stack, 128 * KiB, GiB, NULL, SMALLER),
	LIMIT("output", WP_SIZE, output_limit, KiB, GiB, NULL, SMALLER),
};
const size_t wp_n_limits = ARRAY_SIZE(wp_limits);

const struct wp_limit *wp_limit_find(const char *key)
{
	for (size_t i = 0; key && i < wp_n_limits; i++)
		if (strcmp(key, wp_limits[i].key) == 0)
			return &wp_limits[i];
	return NULL;
}

static uint64_t *limit_slot(struct ward_policy *p, const struct wp_limit *l)
{
	return (uint64_t *)(void *)((char *)p + l->offset);
}

static uint64_t limit_get(const struct ward_policy *p, const struct wp_limit *l)
{
	return *(const uint64_t *)(const void *)((const char *)p + l->offset);
}

/* Policy errors carry no errno and no layer: the message already says where
 * ("policy.json: limits.memory: ...") and the CLI prints it as is. */
int wp_fail(struct ward_error *err, const char *where, const char *fmt, ...)
{
	char msg[WARD_ERROR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return ward_error_set(err, 0, NULL, "%s: %s", where, msg);
}

/* "policy: limits.memory: ..." with the field path recorded as well. */
int wp_fail_at(struct ward_error *err, const char *source, const char *field,
	       const char *fmt, ...)
{
	char msg[WARD_ERROR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	int r = ward_error_set(err, 0, NULL, "%s: %s: %s", source, field, msg);
	ward_error_field(err, field);
	return r;
}

int wp_field(struct ward_error *err, int r, const char *field)
{
	if (r < 0 && err && !err->field[0])
		ward_error_field(err, field);
	return r;
}

int wp_nomem(struct ward_error *err, const char *where)
{
	return ward_error_set(err, ENOMEM, NULL, "%s: unable to allocate the policy",
			      where);
}

/* --- lifetime --- */

static int env_push(struct ward_policy *p, char *entry)
{
	/* one spare slot keeps env NULL-terminated, ready for execve */
	char **e = realloc(p->env, (p->n_env + 2) * sizeof(*e));
	if (!e)
		return -ENOMEM;
	e[p->n_env++] = entry;
	e[p->n_env] = NULL;
	p->env = e;
	return 0;
}

WARD_EXPORT int ward_policy_init(struct ward_policy *p, struct ward_error *err)
{
	*p = (struct ward_policy){
		.memory = 512 * MiB,
		.pids = 128,
		.timeout_ms = 30 * 1000,
		.workspace_size = 64 * MiB,
		.workspace_inodes = 16384,
		.tmp_size = 64 * MiB,
		.tmp_inodes = 16384,
		.nofile = 1024,
		.stack = 8 * MiB,
		.output_limit = 16 * MiB,
		.net = WARD_NET_NONE,
	};
	wp_net_init(&p->network);
	p->workdir = strdup("/workspace");
	p->hostname = strdup("sandbox");
	p->image = strdup("host");
	bool ok = p->workdir && p->hostname && p->image;
	for (size_t i = 0; ok && wp_default_env[i]; i++) {
		char *e = strdup(wp_default_env[i]);
		ok = e && env_push(p, e) == 0;
		if (!ok)
			free(e);
	}
	if (!ok) {
		ward_policy_release(p);
		return wp_nomem(err, "policy");
	}
	return 0;
}

WARD_EXPORT void ward_policy_release(struct ward_policy *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_binds; i++) {
		free(p->binds[i].host);
		free(p->binds[i].inside);
	}
	free(p->binds);
	for (size_t i = 0; i < p->n_env; i++)
		free(p->env[i]);
	free(p->env);
	wp_lint_release(p);
	wp_writable_release(p);
	ward_net_policy_release(&p->network);
	free(p->workdir);
	free(p->hostname);
	free(p->image);
	*p = (struct ward_policy){ 0 };
}

static char *dup_or_null(const char *s, bool *ok)
{
	char *d = s ? strdup(s) : NULL;
	if (s && !d)
		*ok = false;
	return d;
}

WARD_EXPORT int ward_policy_copy(struct ward_policy *dst,
				 const struct ward_policy *src,
				 struct ward_error *err)
{
	bool ok = true;
	*dst = *src;
	dst->binds = NULL;
	dst->n_binds = 0;
	dst->env = NULL;
	dst->n_env = 0;
	/* before anything can fail: releasing dst must not free src's lists */
	dst->lint_deny_imports = NULL;
	dst->n_lint_deny_imports = 0;
	dst->lint_deny_calls = NULL;
	dst->n_lint_deny_calls = 0;
	dst->writable = NULL;
	dst->n_writable = 0;
	dst->network.allow = NULL;
	dst->network.n_allow = 0;
	dst->network.deny = NULL;
	dst->network.n_deny = 0;
	dst->workdir = dup_or_null(src->workdir, &ok);
	dst->hostname = dup_or_null(src->hostname, &ok);
	dst->image = dup_or_null(src->image, &ok);
	if (ok && src->n_binds) {
		dst->binds = calloc(src->n_binds, sizeof(*dst->binds));
		ok = dst->binds != NULL;
	}
	for (size_t i = 0; ok && i < src->n_binds; i++) {
		dst->binds[i].host = dup_or_null(src->binds[i].host, &ok);
		dst->binds[i].inside = dup_or_null(src->binds[i].inside, &ok);
		dst->binds[i].writable = src->binds[i].writable;
		dst->n_binds++;
	}
	for (size_t i = 0; ok && i < src->n_env; i++) {
		char *e = dup_or_null(src->env[i], &ok);
		if (ok && env_push(dst, e) < 0) {
			free(e);
			ok = false;
		}
	}
	if (ok)
		ok = wp_lint_copy(dst, src) == 0;
	if (ok)
		ok = wp_writable_copy(dst, src) == 0;
	if (ok)
		ok = wp_net_copy(&dst->network, &src->network) == 0;
	if (!ok) {
		ward_policy_release(dst);
		return wp_nomem(err, "policy");
	}
	return 0;
}

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static ssize_t env_find(char *const *env, size_t n, const char *name, size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (env[i] && strncmp(env[i], name, len) == 0 && env[i][len] == '=')
			return (ssize_t)i;
	return -1;
}

WARD_EXPORT bool ward_policy_equal(const struct ward_policy *a,
				   const struct ward_policy *b)
{
	for (size_t i = 0; i < wp_n_limits; i++)
		if (limit_get(a, &wp_limits[i]) != limit_get(b, &wp_limits[i]))
			return false;
	if (a->n_binds != b->n_binds || a->n_env != b->n_env ||
	    !str_eq(a->workdir, b->workdir) || !str_eq(a->hostname, b->hostname) ||
	    !str_eq(a->image, b->image) || a->net != b->net ||
	    !wp_net_equal(&a->network, &b->network) ||
	    a->root_inside != b->root_inside ||
	    a->require_cgroup != b->require_cgroup ||
	    a->allow_degrade != b->allow_degrade ||
	    a->exec_program_only != b->exec_program_only || !wp_writable_equal(a, b))
		return false;
	for (size_t i = 0; i < a->n_binds; i++)
		if (!str_eq(a->binds[i].host, b->binds[i].host) ||
		    !str_eq(a->binds[i].inside, b->binds[i].inside) ||
		    a->binds[i].writable != b->binds[i].writable)
			return false;
	/* names are unique, so same size + every entry present = same set */
	for (size_t i = 0; i < a->n_env; i++) {
		const char *eq = a->env[i] ? strchr(a->env[i], '=') : NULL;
		ssize_t j = eq ? env_find(b->env, b->n_env, a->env[i],
					  (size_t)(eq - a->env[i])) : -1;
		if (j < 0 || strcmp(a->env[i], b->env[j]) != 0)
			return false;
	}
	return wp_lint_equal(a, b);
}

/* --- setters shared by flags and JSON --- */

static bool limit_in_range(const struct wp_limit *l, uint64_t v)
{
	return (v == 0 && l->zero) || (v >= l->min && v <= l->max);
}

static int limit_range_error(const struct wp_limit *l, const char *got,
			     const char *where, struct ward_error *err)
{
	char lo[32], hi[32];
	wp_format(l->kind, l->min, lo, sizeof(lo));
	wp_format(l->kind, l->max, hi, sizeof(hi));
	if (l->zero)
		return wp_fail(err, where, "must be 0 (%s) or between %s and %s, got %s",
			       l->zero, lo, hi, got);
	if (l->why)
		return wp_fail(err, where, "must be between %s and %s (%s), got %s", lo, hi,
			       l->why, got);
	return wp_fail(err, where, "must be between %s and %s, got %s", lo, hi, got);
}

int wp_limit_apply(struct ward_policy *p, const struct wp_limit *l, int rc,
		   uint64_t v, const char *got, const char *where,
		   struct ward_error *err)
{
	if (rc == -EINVAL)
		return wp_fail(err, where, "expected %s, got %s", wp_expected(l->kind), got);
	if (rc < 0 || !limit_in_range(l, v))
		return limit_range_error(l, got, where, err);
	*limit_slot(p, l) = v;
	return 0;
}

int wp_limit_set_str(struct ward_policy *p, const struct wp_limit *l,
		     const char *s, const char *got, const char *where,
		     struct ward_error *err)
{
	uint64_t v = 0;
	int rc = wp_parse_kind(l->kind, s, &v);
	return wp_limit_apply(p, l, rc, v, got, where, err);
}

/* Mounts are made in list order, so a mount over an earlier one's parent
 * would hide it; the earlier entries are binds[0..n_before). */
static int bind_check(const struct ward_policy *p, const struct ward_bind *b,
		      size_t n_before, const char *where_host,
		      const char *where_inside, struct ward_error *err)
{
	char q[WP_GOT_MAX], q2[WP_GOT_MAX];
	int r = wp_check_host(b->host, where_host, err);
	if (r == 0)
		r = wp_check_inside(b->inside, where_inside, err);
	for (size_t i = 0; r == 0 && i < n_before; i++) {
		const char *earlier = p->binds[i].inside;
		if (strcmp(earlier, b->inside) == 0)
			r = wp_fail(err, where_inside, "%s is already mounted",
				    wp_quote(b->inside, q, sizeof(q)));
		else if (wp_path_within(earlier, b->inside))
			r = wp_fail(err, where_inside,
				    "%s would hide %s, which is mounted before it; list it first",
				    wp_quote(b->inside, q, sizeof(q)),
				    wp_quote(earlier, q2, sizeof(q2)));
	}
	return r;
}

int wp_bind_add(struct ward_policy *p, const char *host, const char *inside,
		bool writable, const char *where_host, const char *where_inside,
		struct ward_error *err)
{
	struct ward_bind b = { .writable = writable };
	int r;

	if (p->n_binds >= WP_MAX_MOUNTS)
		return wp_fail(err, where_host, "too many mounts (at most %d)",
			       WP_MAX_MOUNTS);
	r = wp_path_check(host, &b.host, where_host, err);
	if (r == 0)
		r = wp_path_check(inside ? inside : host, &b.inside, where_inside, err);
	if (r == 0)
		r = bind_check(p, &b, p->n_binds, where_host, where_inside, err);
	if (r == 0) {
		struct ward_bind *nb = realloc(p->binds, (p->n_binds + 1) * sizeof(*nb));
		if (!nb) {
			r = wp_nomem(err, where_host);
		} else {
			p->binds = nb;
			p->binds[p->n_binds++] = b;
			return 0;
		}
	}
	free(b.host);
	free(b.inside);
	return r;
}

static int env_check_name(const char *name, size_t len, const char *where,
			  struct ward_error *err)
{
	char q[WP_GOT_MAX], copy[WP_GOT_MAX];
	if (wp_env_name_valid(name, len))
		return 0;
	ward_strlcpy(copy, name, len + 1 < sizeof(copy) ? len + 1 : sizeof(copy));
	return wp_fail(err, where,
		       "invalid variable name %s: use letters, digits and \"_\", not starting with a digit",
		       wp_quote(copy, q, sizeof(q)));
}

static int env_check_value(const char *value, const char *where,
			   struct ward_error *err)
{
	if (strlen(value) > WP_MAX_ENV_VALUE)
		return wp_fail(err, where, "value is longer than %d bytes",
			       WP_MAX_ENV_VALUE);
	if (!wp_utf8_valid(value))
		return wp_fail(err, where, "value must be valid UTF-8");
	return 0;
}

int wp_env_set(struct ward_policy *p, const char *name, const char *value,
	       const char *where, struct ward_error *err)
{
	size_t len = strlen(name);
	int r = env_check_name(name, len, where, err);
	if (r == 0 && value)
		r = env_check_value(value, where, err);
	if (r < 0)
		return r;
	ssize_t i = env_find(p->env, p->n_env, name, len);
	if (!value) {
		if (i >= 0) {
			free(p->env[i]);
			memmove(&p->env[i], &p->env[i + 1],
				(p->n_env - (size_t)i) * sizeof(*p->env));
			p->n_env--;
		}
		return 0;
	}
	if (i < 0 && p->n_env >= WP_MAX_ENV)
		return wp_fail(err, where, "too many variables (at most %d)", WP_MAX_ENV);
	size_t n = len + 1 + strlen(value) + 1;
	char *e = malloc(n);
	if (!e)
		return wp_nomem(err, where);
	snprintf(e, n, "%s=%s", name, value);
	if (i >= 0) {
		free(p->env[i]);
		p->env[i] = e;
	} else if (env_push(p, e) < 0) {
		free(e);
		return wp_nomem(err, where);
	}
	return 0;
}

static int degrade_bit(const char *name, const char *where, struct ward_error *err)
{
	char q[WP_GOT_MAX];
	int id = ward_layer_from_name(name);
	if (id < 0)
		return wp_fail(err, where,
			       "unknown layer %s; layers that may degrade: landlock, cgroup, time, cgroupns",
			       wp_quote(name, q, sizeof(q)));
	if (!(degradable & (1u << id)))
		return wp_fail(err, where,
			       "layer %s can never degrade; only landlock, cgroup, time and cgroupns may",
			       wp_quote(name, q, sizeof(q)));
	return id;
}

int wp_degrade_add(struct ward_policy *p, const char *name, const char *where,
		   struct ward_error *err)
{
	int id = degrade_bit(name, where, err);
	if (id < 0)
		return id;
	p->allow_degrade |= 1u << id;
	return 0;
}

static int replace_str(char **slot, char *s, const char *where,
		       struct ward_error *err)
{
	if (!s)
		return wp_nomem(err, where);
	free(*slot);
	*slot = s;
	return 0;
}

int wp_set_workdir(struct ward_policy *p, const char *s, const char *where,
		   struct ward_error *err)
{
	char *d = NULL;
	int r = wp_path_check(s, &d, where, err);
	return r < 0 ? r : replace_str(&p->workdir, d, where, err);
}

int wp_set_hostname(struct ward_policy *p, const char *s, const char *where,
		    struct ward_error *err)
{
	int r = wp_check_hostname(s, where, err);
	return r < 0 ? r : replace_str(&p->hostname, strdup(s), where, err);
}

/* Only the host image exists so far; built images will add names here. */
int wp_set_image(struct ward_policy *p, const char *s, const char *where,
		 struct ward_error *err)
{
	char q[WP_GOT_MAX];
	if (strcmp(s, "host") != 0)
		return wp_fail(err, where, "expected one of \"host\", got %s",
			       wp_quote(s, q, sizeof(q)));
	return replace_str(&p->image, strdup(s), where, err);
}

/* --- flags: ward_policy_set --- */

static int set_mount(struct ward_policy *p, const char *v, bool rw,
		     const char *where, struct ward_error *err)
{
	char q[WP_GOT_MAX];
	const char *colon = strchr(v, ':');
	if (!v[0] || colon == v || (colon && !colon[1]))
		return wp_fail(err, where, "expected HOST[:INSIDE], got %s",
			       wp_quote(v, q, sizeof(q)));
	_cleanup_free_ char *host = colon ? strndup(v, (size_t)(colon - v)) : strdup(v);
	if (!host)
		return wp_nomem(err, where);
	return wp_bind_add(p, host, colon ? colon + 1 : NULL, rw, where, where, err);
}

static int set_ro(struct ward_policy *p, const char *v, const char *where,
		  struct ward_error *err)
{
	return set_mount(p, v, false, where, err);
}

static int set_rw(struct ward_policy *p, const char *v, const char *where,
		  struct ward_error *err)
{
	return set_mount(p, v, true, where, err);
}

static int set_env(struct ward_policy *p, const char *v, const char *where,
		   struct ward_error *err)
{
	char q[WP_GOT_MAX];
	const char *eq = strchr(v, '=');
	if (!eq || eq == v)
		return wp_fail(err, where, "expected NAME=VALUE, got %s",
			       wp_quote(v, q, sizeof(q)));
	_cleanup_free_ char *name = strndup(v, (size_t)(eq - v));
	if (!name)
		return wp_nomem(err, where);
	return wp_env_set(p, name, eq + 1, where, err);
}

static int set_env_unset(struct ward_policy *p, const char *v, const char *where,
			 struct ward_error *err)
{
	return wp_env_set(p, v, NULL, where, err);
}

static int parse_bool(const char *v, bool *out, const char *where,
		      struct ward_error *err)
{
	char q[WP_GOT_MAX];
	if (strcmp(v, "true") == 0 || strcmp(v, "false") == 0) {
		*out = v[0] == 't';
		return 0;
	}
	return wp_fail(err, where, "expected true or false, got %s",
		       wp_quote(v, q, sizeof(q)));
}

static int set_root(struct ward_policy *p, const char *v, const char *where,
		    struct ward_error *err)
{
	return parse_bool(v, &p->root_inside, where, err);
}

static int set_cgroup_required(struct ward_policy *p, const char *v,
			       const char *where, struct ward_error *err)
{
	return parse_bool(v, &p->require_cgroup, where, err);
}

/* "landlock,cgroup": all names are checked before any bit is set. */
static int set_degraded(struct ward_policy *p, const char *v, const char *where,
			struct ward_error *err)
{
	uint32_t bits = 0;
	for (const char *c = v;; c++) {
		char name[32];
		size_t n = strcspn(c, ",");
		ward_strlcpy(name, c, n + 1 < sizeof(name) ? n + 1 : sizeof(name));
		if (n >= sizeof(name))
			name[sizeof(name) - 2] = '?';  /* too long to be a layer */
		int id = degrade_bit(name, where, err);
		if (id < 0)
			return id;
		bits |= 1u << id;
		c += n;
		if (!*c)
			break;
	}
	p->allow_degrade |= bits;
	return 0;
}

typedef int (*setter_fn)(struct ward_policy *p, const char *value,
			 const char *where, struct ward_error *err);

static const struct {
	const char *field;
	setter_fn fn;
} setters[] = {
	{ "mounts.ro", set_ro },
	{ "mounts.rw", set_rw },
	{ "env", set_env },
	{ "env.unset", set_env_unset },
	{ "workdir", wp_set_workdir },
	{ "hostname", wp_set_hostname },
	{ "image", wp_set_image },
	{ "user.root", set_root },
	{ "cgroup.required", set_cgroup_required },
	{ "allow_degraded", set_degraded },
};

WARD_EXPORT int ward_policy_set(struct ward_policy *p, const char *field,
				const char *value, const char *source,
				struct ward_error *err)
{
	char q[WP_GOT_MAX];
	const char *where = source ? source : field ? field : "policy";
	if (!p || !field || !value)
		return wp_fail(err, where, "no field or value given");
	if (strncmp(field, "limits.", 7) == 0) {
		const struct wp_limit *l = wp_limit_find(field + 7);
		if (l)
			return wp_field(err, wp_limit_set_str(p, l, value,
							      wp_quote(value, q, sizeof(q)),
							      where, err), field);
	}
	if (strncmp(field, "lint.", 5) == 0) {
		const struct wp_lint *l = wp_lint_find(field + 5);
		if (l)
			return wp_field(err, wp_lint_set_list(p, l, value, where, err), field);
	}
	if (strcmp(field, "network") == 0 || strncmp(field, "network.", 8) == 0)
		return wp_field(err, wp_net_set(p, field, value, where, err), field);
	for (size_t i = 0; i < ARRAY_SIZE(setters); i++)
		if (strcmp(field, setters[i].field) == 0)
			return wp_field(err, setters[i].fn(p, value, where, err), field);
	return wp_fail(err, where, "unknown policy field %s", wp_quote(field, q, sizeof(q)));
}

/* --- whole-policy checks --- */

/* Re-checks what the setters check, for policies filled in by hand. */
static int validate_fields(const struct ward_policy *p, struct ward_error *err)
{
	char where[WP_WHERE_MAX], field[WP_PATH_MAX], got[32];
	for (size_t i = 0; i < wp_n_limits; i++) {
		const struct wp_limit *l = &wp_limits[i];
		uint64_t v = limit_get(p, l);
		snprintf(field, sizeof(field), "limits.%s", l->key);
		snprintf(where, sizeof(where), "policy: %s", field);
		if (!limit_in_range(l, v))
			return wp_field(err, limit_range_error(l, wp_format(l->kind, v, got,
									    sizeof(got)),
							       where, err), field);
	}
	if (!p->workdir || !p->hostname || !p->image)
		return wp_fail(err, "policy", "workdir, hostname and image must be set");
	int r = wp_field(err, wp_path_check(p->workdir, NULL, "policy: workdir", err),
			 "workdir");
	if (r == 0)
		r = wp_field(err, wp_check_hostname(p->hostname, "policy: hostname", err),
			     "hostname");
	if (r == 0 && strcmp(p->image, "host") != 0)
		r = wp_fail_at(err, "policy", "image", "expected one of \"host\"");
	if (r == 0 && p->net != p->network.mode)
		r = wp_fail_at(err, "policy", "network.mode",
			       "the policy's net and network.mode differ");
	if (r == 0)
		r = wp_net_validate(&p->network, "policy", err);
	return r;
}

static int validate_binds(const struct ward_policy *p, struct ward_error *err)
{
	char where[WP_WHERE_MAX];
	char field[WP_PATH_MAX];
	if (p->n_binds > WP_MAX_MOUNTS)
		return wp_fail_at(err, "policy", "mounts", "too many mounts (at most %d)",
				  WP_MAX_MOUNTS);
	for (size_t i = 0; i < p->n_binds; i++) {
		snprintf(field, sizeof(field), "mounts[%zu]", i);
		if (!p->binds[i].host || !p->binds[i].inside)
			return wp_fail_at(err, "policy", field, "host and inside must be set");
	}
	for (size_t i = 0; i < p->n_binds; i++) {
		const struct ward_bind *b = &p->binds[i];
		int r;
		snprintf(where, sizeof(where), "policy: mounts[%zu]", i);
		r = wp_path_check(b->host, NULL, where, err);
		if (r == 0)
			r = wp_path_check(b->inside, NULL, where, err);
		if (r == 0)
			r = bind_check(p, b, i, where, where, err);
		snprintf(field, sizeof(field), "mounts[%zu]", i);
		if (wp_field(err, r, field) < 0)
			return r;
	}
	return 0;
}

static int validate_env(const struct ward_policy *p, struct ward_error *err)
{
	char where[WP_WHERE_MAX], field[WP_PATH_MAX];
	if (p->n_env > WP_MAX_ENV)
		return wp_fail_at(err, "policy", "env", "too many variables (at most %d)",
				  WP_MAX_ENV);
	for (size_t i = 0; i < p->n_env; i++) {
		const char *e = p->env[i], *eq = e ? strchr(e, '=') : NULL;
		int r;
		snprintf(field, sizeof(field), "env[%zu]", i);
		snprintf(where, sizeof(where), "policy: %s", field);
		if (!eq)
			return wp_fail_at(err, "policy", field, "expected NAME=VALUE");
		size_t len = (size_t)(eq - e);
		r = env_check_name(e, len, where, err);
		if (r == 0)
			r = env_check_value(eq + 1, where, err);
		if (r == 0 && env_find(p->env, i, e, len) >= 0)
			r = wp_fail(err, where, "variable %.*s is set twice",
				    (int)len, e);
		if (wp_field(err, r, field) < 0)
			return r;
	}
	return 0;
}

/* The program must start somewhere it can see: the two tmpfs mounts ward
 * always creates, or a mount the policy adds. */
static int validate_workdir(const struct ward_policy *p, struct ward_error *err)
{
	char q[WP_GOT_MAX];
	if (wp_path_within(p->workdir, "/workspace") ||
	    wp_path_within(p->workdir, "/tmp"))
		return 0;
	for (size_t i = 0; i < p->n_binds; i++)
		if (wp_path_within(p->workdir, p->binds[i].inside))
			return 0;
	return wp_fail_at(err, "policy", "workdir",
			  "%s is not inside /workspace, /tmp or a mount",
			  wp_quote(p->workdir, q, sizeof(q)));
}

static int validate_degrade(const struct ward_policy *p, struct ward_error *err)
{
	uint32_t bad = p->allow_degrade & ~degradable;
	if (bad) {
		int id = __builtin_ctz(bad);
		const char *name = ward_layer_name((enum ward_layer)id);
		return wp_fail_at(err, "policy", "allow_degraded",
				  "layer \"%s\" can never degrade", name ? name : "?");
	}
	if (p->require_cgroup && (p->allow_degrade & (1u << WARD_LAYER_CGROUP)))
		return wp_fail_at(err, "policy", "cgroup.required",
				  "is true, but allow_degraded lists \"cgroup\"");
	return 0;
}

WARD_EXPORT int ward_policy_validate(const struct ward_policy *p,
				     struct ward_error *err)
{
	int r = validate_fields(p, err);
	if (r == 0)
		r = validate_binds(p, err);
	if (r == 0)
		r = validate_env(p, err);
	if (r == 0)
		r = wp_lint_validate(p, err);
	if (r == 0)
		r = validate_workdir(p, err);
	if (r == 0)
		r = validate_degrade(p, err);
	if (r == 0)
		r = wp_writable_validate(p, err);
	return r;
}
