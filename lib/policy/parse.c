/* lib/policy/parse.c — strings to numbers, checked paths and names, and the
 * lint name lists.
 *
 * Pure functions over memory: no syscalls, no exits, and no locale, so "1.5"
 * means the same under every LC_NUMERIC (numbers are parsed digit by digit,
 * never with strtod). The only allocations are the normal form of a path and
 * the lint name lists.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "policy/internal.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)
#define TiB (UINT64_C(1) << 40)

struct unit {
	const char *suffix;
	uint64_t mult;       /* in the kind's base unit (bytes, ms, milli-CPUs) */
};

/* Binary units only: "1G" is 2^30 bytes, as cgroups and tmpfs count them. */
static const struct unit size_units[] = {
	{ "", 1 },
	{ "k", KiB }, { "K", KiB }, { "m", MiB }, { "M", MiB },
	{ "g", GiB }, { "G", GiB }, { "t", TiB }, { "T", TiB },
};
/* A bare number is seconds, matching the JSON number form. */
static const struct unit duration_units[] = {
	{ "", 1000 }, { "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 },
};
static const struct unit cpu_units[] = { { "", 1000 } };
static const struct unit count_units[] = { { "", 1 } };

/* Six digits keep fraction * mult below 2^64 for the largest unit (2^40). */
enum { FRAC_DIGITS_MAX = 6 };

static const struct unit *find_unit(const char *s, const struct unit *units,
				    size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(s, units[i].suffix) == 0)
			return &units[i];
	return NULL;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* DIGITS ["." DIGITS] [UNIT] -> value in base units. The fraction is rounded
 * down to a whole base unit and needs a unit larger than the base ("1.5"
 * bytes means nothing). A nonzero value that rounds to 0 is -ERANGE, so a
 * tiny limit can never turn into "no limit". Syntax errors win over
 * overflow so "99999999999999999999x" is -EINVAL. */
static int parse_fixed(const char *s, const struct unit *units, size_t n,
		       uint64_t *out)
{
	uint64_t whole = 0, frac = 0, scale = 1, v;
	bool nonzero = false, overflow = false;
	const char *q = s;

	if (!s || !is_digit(*q))
		return -EINVAL;
	for (; is_digit(*q); q++) {
		unsigned d = (unsigned)(*q - '0');
		nonzero |= d != 0;
		overflow |= __builtin_mul_overflow(whole, 10, &whole);
		overflow |= __builtin_add_overflow(whole, d, &whole);
	}
	if (*q == '.') {
		if (!is_digit(*++q))
			return -EINVAL;
		for (int k = 0; is_digit(*q); q++, k++) {
			if (k == FRAC_DIGITS_MAX)
				return -EINVAL;
			frac = frac * 10 + (unsigned)(*q - '0');
			scale *= 10;
			nonzero |= *q != '0';
		}
	}
	const struct unit *u = find_unit(q, units, n);
	if (!u || (scale > 1 && u->mult == 1))
		return -EINVAL;
	if (overflow || __builtin_mul_overflow(whole, u->mult, &v) ||
	    __builtin_add_overflow(v, frac * u->mult / scale, &v))
		return -ERANGE;
	if (v == 0 && nonzero)
		return -ERANGE;
	*out = v;
	return 0;
}

WARD_EXPORT int ward_parse_size(const char *s, uint64_t *out)
{
	return parse_fixed(s, size_units, ARRAY_SIZE(size_units), out);
}

WARD_EXPORT int ward_parse_duration_ms(const char *s, uint64_t *out)
{
	return parse_fixed(s, duration_units, ARRAY_SIZE(duration_units), out);
}

int wp_parse_count(const char *s, uint64_t *out)
{
	return parse_fixed(s, count_units, ARRAY_SIZE(count_units), out);
}

int wp_parse_cpus(const char *s, uint64_t *milli)
{
	return parse_fixed(s, cpu_units, ARRAY_SIZE(cpu_units), milli);
}

int wp_parse_kind(enum wp_kind kind, const char *s, uint64_t *out)
{
	switch (kind) {
	case WP_SIZE:
		return ward_parse_size(s, out);
	case WP_DURATION:
		return ward_parse_duration_ms(s, out);
	case WP_CPUS:
		return wp_parse_cpus(s, out);
	case WP_COUNT:
		break;
	}
	return wp_parse_count(s, out);
}

/* The largest unit that divides v exactly, so the text parses back to v. */
static char *format_units(uint64_t v, const struct unit *units, size_t n,
			  char *buf, size_t len)
{
	for (size_t i = n; i-- > 0;) {
		if (units[i].mult > 1 && v % units[i].mult == 0) {
			snprintf(buf, len, "%" PRIu64 "%s", v / units[i].mult,
				 units[i].suffix);
			return buf;
		}
	}
	snprintf(buf, len, "%" PRIu64, v);
	return buf;
}

char *wp_format(enum wp_kind kind, uint64_t v, char *buf, size_t len)
{
	static const struct unit sizes_up[] = {
		{ "K", KiB }, { "M", MiB }, { "G", GiB }, { "T", TiB },
	};
	static const struct unit durations_up[] = {
		{ "s", 1000 }, { "m", 60000 }, { "h", 3600000 },
	};
	if (v == 0 || kind == WP_COUNT) {
		snprintf(buf, len, "%" PRIu64, v);
	} else if (kind == WP_SIZE) {
		format_units(v, sizes_up, ARRAY_SIZE(sizes_up), buf, len);
	} else if (kind == WP_DURATION) {
		if (v % 1000)
			snprintf(buf, len, "%" PRIu64 "ms", v);
		else
			format_units(v, durations_up, ARRAY_SIZE(durations_up),
				     buf, len);
	} else {
		/* thousandths: "0.5", "0.01", "2" */
		char frac[8];
		unsigned f = (unsigned)(v % 1000);
		snprintf(frac, sizeof(frac), ".%03u", f);
		size_t i = strnlen(frac, sizeof(frac));
		while (f && i > 2 && frac[i - 1] == '0')
			frac[--i] = '\0';
		snprintf(buf, len, "%" PRIu64 "%s", v / 1000, f ? frac : "");
	}
	return buf;
}

WARD_EXPORT char *ward_format_size(uint64_t bytes, char *buf, size_t len)
{
	return wp_format(WP_SIZE, bytes, buf, len);
}

WARD_EXPORT char *ward_format_duration_ms(uint64_t ms, char *buf, size_t len)
{
	return wp_format(WP_DURATION, ms, buf, len);
}

const char *wp_expected(enum wp_kind kind)
{
	switch (kind) {
	case WP_SIZE:
		return "a size like \"256M\"";
	case WP_DURATION:
		return "a duration like \"30s\" or \"250ms\"";
	case WP_CPUS:
		return "a number of CPUs like 0.5";
	case WP_COUNT:
		break;
	}
	return "a whole number";
}

/* Messages quote untrusted text: escape what could drive a terminal and cut
 * long values (never inside a UTF-8 sequence) so the field name survives. */
char *wp_quote(const char *s, char *buf, size_t len)
{
	enum { SHOWN = 60 };
	size_t o = 0, limit = len > 8 ? len - 8 : 0;
	if (len < 8) {
		if (len)
			buf[0] = '\0';
		return buf;
	}
	if (limit > SHOWN)
		limit = SHOWN;
	buf[o++] = '"';
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		/* past the limit, finish a sequence (3 more bytes at most: the
		 * text may not be UTF-8 at all) and stop */
		bool cont = (*c & 0xc0) == 0x80;
		if (o >= limit && (!cont || o >= limit + 3)) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		if (*c < 0x20 || *c == 0x7f) {
			snprintf(buf + o, len - o, "\\x%02x", *c);
			o += 4;
		} else if (*c == '"' || *c == '\\') {
			buf[o++] = '\\';
			buf[o++] = (char)*c;
		} else {
			buf[o++] = (char)*c;
		}
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}

/* Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF):
 * every string must survive the trip through JSON, which requires it. */
bool wp_utf8_valid(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	while (*s) {
		unsigned c = *s, cp, min;
		size_t n;
		if (c < 0x80) {
			s++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			n = 1, cp = c & 0x1f, min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			n = 2, cp = c & 0x0f, min = 0x800;
		} else if ((c & 0xf8) == 0xf0) {
			n = 3, cp = c & 0x07, min = 0x10000;
		} else {
			return false;
		}
		for (size_t i = 1; i <= n; i++) {
			if ((s[i] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i] & 0x3fu);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		s += n + 1;
	}
	return true;
}

bool wp_env_name_valid(const char *s, size_t len)
{
	if (len == 0 || len > WP_MAX_ENV_NAME || is_digit(s[0]))
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (!(c == '_' || is_digit(c) || (c >= 'a' && c <= 'z') ||
		      (c >= 'A' && c <= 'Z')))
			return false;
	}
	return true;
}

bool wp_path_within(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	if (n == 1 && dir[0] == '/')
		return path[0] == '/';
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Rejects what could escape or confuse a mount: relative paths, "." and ".."
 * (the kernel would resolve them against the host or the new root), control
 * characters, and text that cannot round-trip through JSON. */
static int path_scan(const char *s, const char *where, struct ward_error *err)
{
	char q[WP_GOT_MAX];
	size_t len = strlen(s);

	if (s[0] != '/')
		return wp_fail(err, where, "expected an absolute path, got %s",
			       wp_quote(s, q, sizeof(q)));
	if (len > WP_MAX_PATH)
		return wp_fail(err, where, "path is longer than %d bytes",
			       WP_MAX_PATH);
	if (!wp_utf8_valid(s))
		return wp_fail(err, where, "path must be valid UTF-8, got %s",
			       wp_quote(s, q, sizeof(q)));
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return wp_fail(err, where,
				       "path must not contain control characters, got %s",
				       wp_quote(s, q, sizeof(q)));
	for (const char *c = s; *c;) {
		size_t n = strcspn(c, "/");
		if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return wp_fail(err, where,
				       "path must not contain \".\" or \"..\" components, got %s",
				       wp_quote(s, q, sizeof(q)));
		c += n;
		c += strspn(c, "/");
	}
	return 0;
}

int wp_path_check(const char *s, char **out, const char *where,
		  struct ward_error *err)
{
	char q[WP_GOT_MAX];
	int r = path_scan(s, where, err);
	if (r < 0)
		return r;
	if (!out) {
		size_t len = strlen(s);
		if (strstr(s, "//") || (len > 1 && s[len - 1] == '/'))
			return wp_fail(err, where,
				       "path must be in normal form (no repeated or trailing \"/\"), got %s",
				       wp_quote(s, q, sizeof(q)));
		return 0;
	}
	char *d = malloc(strlen(s) + 1);
	if (!d)
		return wp_nomem(err, where);
	size_t o = 0;
	for (const char *c = s; *c; c++)
		if (*c != '/' || (o == 0 || d[o - 1] != '/'))
			d[o++] = *c;
	if (o > 1 && d[o - 1] == '/')
		o--;
	d[o] = '\0';
	*out = d;
	return 0;
}

struct reserved {
	const char *dir;
	const char *why;
};

/* Host paths that would hand the sandbox a view of the host kernel's state. */
static const struct reserved host_reserved[] = {
	{ "/proc", "is a host kernel interface" },
	{ "/sys", "is a host kernel interface" },
	{ "/dev", "is a host kernel interface" },
};

/* Inside paths ward builds itself or takes from the image (read-only, so a
 * mount point below them could not even be created). */
static const struct reserved inside_reserved[] = {
	{ "/proc", "is managed by ward" },
	{ "/sys", "is managed by ward" },
	{ "/dev", "is managed by ward" },
	{ "/etc", "belongs to the image" },
	{ "/usr", "belongs to the image" },
	{ "/bin", "belongs to the image" },
	{ "/sbin", "belongs to the image" },
	{ "/lib", "belongs to the image" },
	{ "/lib32", "belongs to the image" },
	{ "/lib64", "belongs to the image" },
	{ "/libx32", "belongs to the image" },
};

int wp_check_host(const char *path, const char *where, struct ward_error *err)
{
	char q[WP_GOT_MAX];
	if (strcmp(path, "/") == 0)
		return wp_fail(err, where,
			       "cannot share the whole host filesystem (\"/\"); bind a specific directory");
	for (size_t i = 0; i < ARRAY_SIZE(host_reserved); i++)
		if (wp_path_within(path, host_reserved[i].dir))
			return wp_fail(err, where, "cannot share %s from the host: %s %s",
				       wp_quote(path, q, sizeof(q)),
				       host_reserved[i].dir, host_reserved[i].why);
	return 0;
}

int wp_check_inside(const char *path, const char *where, struct ward_error *err)
{
	char q[WP_GOT_MAX];
	if (strcmp(path, "/") == 0)
		return wp_fail(err, where, "cannot mount over \"/\": the root is the image");
	for (size_t i = 0; i < ARRAY_SIZE(inside_reserved); i++)
		if (wp_path_within(path, inside_reserved[i].dir))
			return wp_fail(err, where, "cannot mount over %s: %s %s",
				       wp_quote(path, q, sizeof(q)),
				       inside_reserved[i].dir, inside_reserved[i].why);
	return 0;
}

/* One RFC 1123 label: what sethostname and every resolver accept. */
int wp_check_hostname(const char *s, const char *where, struct ward_error *err)
{
	char q[WP_GOT_MAX];
	size_t len = strlen(s);
	bool ok = len >= 1 && len <= 63 && s[0] != '-' && s[len - 1] != '-';
	for (size_t i = 0; ok && i < len; i++) {
		char c = s[i];
		ok = c == '-' || is_digit(c) || (c >= 'a' && c <= 'z') ||
		     (c >= 'A' && c <= 'Z');
	}
	if (!ok)
		return wp_fail(err, where,
			       "expected a hostname of 1 to 63 letters, digits and \"-\" (not first or last), got %s",
			       wp_quote(s, q, sizeof(q)));
	return 0;
}

/* --- the lint lists ---
 *
 * Advisory checks the language kernels run before code runs; the kernel
 * layers are the boundary, never these (docs/policy.md). Each list is a
 * NULL-terminated array of unique dotted names, in the order added. */

#define LINT(key, field, expected, array) \
	{ key, expected, array, offsetof(struct ward_policy, field), \
	  offsetof(struct ward_policy, n_##field) }

const struct wp_lint wp_lints[] = {
	LINT("deny_imports", lint_deny_imports,
	     "a module name like \"subprocess\" or \"os.path\"", "an array of module names"),
	LINT("deny_calls", lint_deny_calls,
	     "a function name like \"eval\" or \"os.system\"", "an array of function names"),
};
const size_t wp_n_lints = ARRAY_SIZE(wp_lints);

const struct wp_lint *wp_lint_find(const char *key)
{
	for (size_t i = 0; key && i < wp_n_lints; i++)
		if (strcmp(key, wp_lints[i].key) == 0)
			return &wp_lints[i];
	return NULL;
}

char **wp_lint_get(const struct ward_policy *p, const struct wp_lint *l, size_t *n)
{
	*n = *(const size_t *)(const void *)((const char *)p + l->count);
	return *(char **const *)(const void *)((const char *)p + l->names);
}

static char ***lint_slot(struct ward_policy *p, const struct wp_lint *l, size_t **n)
{
	*n = (size_t *)(void *)((char *)p + l->count);
	return (char ***)(void *)((char *)p + l->names);
}

static bool is_ident_start(char c)
{
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* [A-Za-z_][A-Za-z0-9_]* parts joined by single dots: what both Python and
 * JavaScript read as a module path or an attribute chain ("os.path",
 * "subprocess.run"). ASCII only, so every accepted name prints as itself. */
static bool dotted_name_valid(const char *s)
{
	bool start = true;  /* at the first character of a part */
	for (; *s; s++) {
		if (*s == '.' && !start)
			start = true;
		else if (is_ident_start(*s) || (!start && is_digit(*s)))
			start = false;
		else
			return false;
	}
	return !start;
}

static int lint_check_name(const char *s, const struct wp_lint *l,
			   const char *where, struct ward_error *err)
{
	char q[WP_GOT_MAX];
	if (strnlen(s, WP_MAX_LINT_NAME + 1) > WP_MAX_LINT_NAME)
		return wp_fail(err, where, "name is longer than %d bytes",
			       WP_MAX_LINT_NAME);
	if (!dotted_name_valid(s))
		return wp_fail(err, where, "expected %s, got %s", l->expected,
			       wp_quote(s, q, sizeof(q)));
	return 0;
}

static bool names_has(char *const *v, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] && strcmp(v[i], s) == 0)
			return true;
	return false;
}

/* Appends a copy of s; on ENOMEM the list is unchanged. */
static int names_push(char ***v, size_t *n, const char *s)
{
	char *d = strdup(s);
	/* one spare slot keeps the list NULL-terminated */
	char **nv = d ? realloc(*v, (*n + 2) * sizeof(*nv)) : NULL;
	if (!nv) {
		free(d);
		return -ENOMEM;
	}
	nv[(*n)++] = d;
	nv[*n] = NULL;
	*v = nv;
	return 0;
}

/* Frees the entries from index keep on, and the array when keep is 0. */
static void names_cut(char ***v, size_t *n, size_t keep)
{
	while (*n > keep) {
		free((*v)[--*n]);
		(*v)[*n] = NULL;
	}
	if (keep == 0) {
		free(*v);
		*v = NULL;
	}
}

void wp_lint_release(struct ward_policy *p)
{
	for (size_t k = 0; k < wp_n_lints; k++) {
		size_t *n;
		char ***v = lint_slot(p, &wp_lints[k], &n);
		names_cut(v, n, 0);
	}
}

int wp_lint_copy(struct ward_policy *dst, const struct ward_policy *src)
{
	for (size_t k = 0; k < wp_n_lints; k++) {
		size_t n, *dn;
		char **v = wp_lint_get(src, &wp_lints[k], &n);
		char ***dv = lint_slot(dst, &wp_lints[k], &dn);
		for (size_t i = 0; i < n; i++)
			if (names_push(dv, dn, v[i]) < 0)
				return -ENOMEM;
	}
	return 0;
}

/* Lists hold no duplicates, so equal lengths and every name of a in b mean
 * the same set. */
bool wp_lint_equal(const struct ward_policy *a, const struct ward_policy *b)
{
	for (size_t k = 0; k < wp_n_lints; k++) {
		size_t na, nb;
		char **va = wp_lint_get(a, &wp_lints[k], &na);
		char **vb = wp_lint_get(b, &wp_lints[k], &nb);
		if (na != nb)
			return false;
		for (size_t i = 0; i < na; i++)
			if (!va[i] || !names_has(vb, nb, va[i]))
				return false;
	}
	return true;
}

int wp_lint_add(struct ward_policy *p, const struct wp_lint *l, const char *name,
		const char *where, struct ward_error *err)
{
	size_t *n;
	char ***v = lint_slot(p, l, &n);
	int r = lint_check_name(name, l, where, err);
	if (r < 0 || names_has(*v, *n, name))
		return r;
	if (*n >= WP_MAX_LINT)
		return wp_fail(err, where, "too many names (at most %d)", WP_MAX_LINT);
	return names_push(v, n, name) < 0 ? wp_nomem(err, where) : 0;
}

int wp_lint_set_list(struct ward_policy *p, const struct wp_lint *l,
		     const char *list, const char *where, struct ward_error *err)
{
	size_t *n;
	char ***names = lint_slot(p, l, &n);
	size_t before = *n;
	for (const char *c = list;; c++) {
		/* one byte past the limit, so a long name is still seen as too long */
		char name[WP_MAX_LINT_NAME + 2];
		size_t len = strcspn(c, ",");
		ward_strlcpy(name, c, len + 1 < sizeof(name) ? len + 1 : sizeof(name));
		int r = wp_lint_add(p, l, name, where, err);
		if (r < 0) {
			names_cut(names, n, before);
			return r;
		}
		c += len;
		if (!*c)
			break;
	}
	return 0;
}

int wp_lint_validate(const struct ward_policy *p, struct ward_error *err)
{
	char where[WP_WHERE_MAX], field[WP_PATH_MAX], q[WP_GOT_MAX];
	for (size_t k = 0; k < wp_n_lints; k++) {
		const struct wp_lint *l = &wp_lints[k];
		size_t n;
		char **v = wp_lint_get(p, l, &n);
		snprintf(field, sizeof(field), "lint.%s", l->key);
		if (n > WP_MAX_LINT)
			return wp_fail_at(err, "policy", field, "too many names (at most %d)",
					  WP_MAX_LINT);
		for (size_t i = 0; i < n; i++) {
			const char *s = v ? v[i] : NULL;
			int r;
			snprintf(field, sizeof(field), "lint.%s[%zu]", l->key, i);
			snprintf(where, sizeof(where), "policy: %s", field);
			if (!s)
				return wp_fail_at(err, "policy", field, "expected %s", l->expected);
			r = lint_check_name(s, l, where, err);
			if (r == 0 && names_has(v, i, s))
				r = wp_fail(err, where, "%s is listed twice",
					    wp_quote(s, q, sizeof(q)));
			if (wp_field(err, r, field) < 0)
				return r;
		}
	}
	return 0;
}
