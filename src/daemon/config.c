/* src/daemon/config.c — `ward serve` settings: a JSON config file and flags
 * (the HTTP front end's own, and the service core's, struct
 * ward_service_config).
 *
 * One table names every setting once: its config key, its flag (the same
 * name) and its type. The file is read first, flags override it. Unknown
 * keys and bad values are errors that name the key; nothing here starts
 * anything.
 */
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "daemon.h"
#include "ward/egress.h"
#include "ward/kernel.h"
#include "ward/policy.h"

/* K_LIST: a repeatable flag, an array of strings in the file. */
enum kind { K_STR, K_SIZE, K_DUR, K_BOOL, K_UINT, K_POOL, K_LIST };

/* Values of each K_LIST setting; credential rules and their headers. */
enum { LIST_MAX = 64 };

/* The most kernels one language's pool may hold. */
enum { POOL_MAX_PER_LANG = 64 };

struct setting {
	const char *name;
	enum kind kind;
	size_t off;
	const char *help;
	size_t off_n;                   /* K_LIST: the count */
	enum ward_net_setting check;    /* K_LIST: how a value is checked */
};

#define S(name, kind, field, help) { name, kind, offsetof(struct srv_config, field), help }
#define L(name, field, check, help)                                                     \
	{ name, K_LIST, offsetof(struct srv_config, core.field), help,                   \
	  offsetof(struct srv_config, core.n_##field), check }
static const struct setting settings[] = {
	S("socket", K_STR, socket, "unix socket path (\"none\": no unix socket)"),
	S("listen", K_STR, listen, "also listen on TCP, 127.0.0.1:PORT"),
	S("keys-file", K_STR, core.keys_file, "the API keys file (ward keys add)"),
	S("audit-log", K_STR, core.audit_log, "the hash-chained audit log"),
	S("audit-full-text", K_BOOL, core.audit_full_text, "record code and output in full"),
	S("audit-sync", K_BOOL, core.audit_sync, "fdatasync every audit line (default true)"),
	S("max-body", K_SIZE, max_body, "request body limit (default 8M)"),
	S("max-header", K_SIZE, max_header, "request header memory limit (default 32k)"),
	S("grace", K_DUR, core.grace_ms, "SIGTERM: time running executions get (default 10s)"),
	S("max-executions", K_UINT, core.max_executions, "running at once (default 64)"),
	S("max-per-tenant", K_UINT, core.max_per_tenant, "sandboxes at once per tenant, executions and sessions (default 16)"),
	S("policy", K_STR, core.policy_file, "default policy file (JSON)"),
	S("runners", K_STR, core.runners, "language runners directory"),
	S("state-dir", K_STR, core.state_dir, "what a restart needs, owned by this user and closed to others (default: /var/lib/ward as root, else $XDG_STATE_HOME/ward)"),
	S("session-ttl", K_DUR, core.session_ttl_ms, "idle TTL of a session (default 10m)"),
	S("max-session-ttl", K_DUR, core.max_session_ttl_ms, "the longest TTL a session may ask (default 24h)"),
	S("max-sessions", K_UINT, core.max_sessions, "live sessions, all tenants (default 64)"),
	S("max-sessions-per-tenant", K_UINT, core.max_sessions_per_tenant, "live sessions per tenant (default 8)"),
	S("tenant-memory", K_SIZE, core.tenant_memory, "memory limits of a tenant's live sandboxes, summed (default 16G; 0: none)"),
	S("pool", K_POOL, core.pool, "kernels kept ready for one-shots, per language: python=4,node=1,bash=0 (default python=2; \"none\": no pool)"),
	S("zygote", K_STR, zygote, "python kernels forked by a zygote that preloaded its modules: python or none (default; experimental, see docs/api.md)"),
	S("zygote-modules", K_STR, zygote_modules, "what the zygote preloads, comma-separated (default numpy,pandas,matplotlib; a missing one is skipped)"),
	S("launcher", K_BOOL, launcher, "sandboxes cloned by a small launcher process, not by a copy of the daemon (default false; experimental)"),
	S("max-file", K_SIZE, core.max_file, "one file through the files API (default 64M)"),
	S("artifacts-inline-max", K_SIZE, core.artifacts_inline_max, "a one-shot's files sent back inline in its verdict, in all (default 1M; the client's max_bytes cannot exceed it)"),
	S("max-event-subscribers", K_UINT, core.max_event_subscribers, "GET /v1/events streams at once (default 8)"),
	S("max-connections", K_UINT, max_connections, "open HTTP connections, per listener (default 1000)"),
	S("max-per-address", K_UINT, max_per_address, "TCP connections from one address (default 64)"),
	S("max-unauthenticated", K_UINT, max_unauthenticated, "connections without a valid key yet; the oldest is closed past it (default 64)"),
	S("header-timeout", K_DUR, header_timeout_ms, "a connection must authenticate within it (default 10s)"),
	S("idle-timeout", K_DUR, idle_timeout_ms, "an idle connection is closed after it (default 60s)"),
	L("egress-resolve", egress_resolve, WARD_NET_SETTING_RESOLVE, "NAME=IP: the egress proxy resolves NAME to IP only (repeatable)"),
	L("egress-allow-private", egress_allow_private, WARD_NET_SETTING_ALLOW_PRIVATE, "CIDR: a private, loopback or link-local range the egress proxy may reach (repeatable)"),
	L("egress-dns", egress_dns, WARD_NET_SETTING_DNS, "ADDR[:PORT]: the egress proxy's DNS server (repeatable; default: /etc/resolv.conf)"),
	S("mcp-max-sessions", K_UINT, mcp_max_sessions, "MCP sessions open on /mcp, all tenants (default 256)"),
	S("mcp-max-sessions-per-tenant", K_UINT, mcp_max_sessions_per_tenant, "MCP sessions open on /mcp per tenant (default 16)"),
	S("mcp-session-idle", K_DUR, mcp_session_idle_ms, "an MCP session unused this long ends (default 30m)"),
	S("mcp-allowed-origins", K_STR, mcp_allowed_origins, "browser origins /mcp accepts, comma-separated and exact (default none: a request with an Origin header is refused)"),
	S("egress-ca", K_STR, core.egress_ca, "extra CA file (PEM) the egress proxy trusts for upstream TLS"),
};
#undef S
#undef L

void srv_config_defaults(struct srv_config *c)
{
	memset(c, 0, sizeof(*c));
	ward_service_config_defaults(&c->core);
	c->max_body = 8u << 20;
	c->max_header = 32u << 10;
	c->max_connections = 1000;
	c->max_per_address = 64;
	c->max_unauthenticated = 64;
	c->header_timeout_ms = 10000;
	c->idle_timeout_ms = 60000;
	c->mcp_max_sessions = 256;
	c->mcp_max_sessions_per_tenant = 16;
	c->mcp_session_idle_ms = 30 * 60000;
}

static void release_egress_credentials(struct ward_service_config *core)
{
	struct ward_service_config egress = { 0 };
	egress.egress_credentials = core->egress_credentials;
	egress.n_egress_credentials = core->n_egress_credentials;
	ward_service_config_release(&egress);
	core->egress_credentials = NULL;
	core->n_egress_credentials = 0;
}

/* The egress settings are freed by the core's release, which owns them
 * once the core has taken the config over. */
static void release_egress(struct ward_service_config *core)
{
	struct ward_service_config egress = { 0 };
	egress.egress_resolve = core->egress_resolve;
	egress.n_egress_resolve = core->n_egress_resolve;
	egress.egress_allow_private = core->egress_allow_private;
	egress.n_egress_allow_private = core->n_egress_allow_private;
	egress.egress_dns = core->egress_dns;
	egress.n_egress_dns = core->n_egress_dns;
	egress.egress_credentials = core->egress_credentials;
	egress.n_egress_credentials = core->n_egress_credentials;
	ward_service_config_release(&egress);
	core->egress_resolve = core->egress_allow_private = core->egress_dns = NULL;
	core->n_egress_resolve = core->n_egress_allow_private = core->n_egress_dns = 0;
	core->egress_credentials = NULL;
	core->n_egress_credentials = 0;
}

void srv_config_release(struct srv_config *c)
{
	for (size_t i = 0; i < ARRAY_SIZE(settings); i++)
		if (settings[i].kind == K_STR)
			free(*(char **)((char *)c + settings[i].off));
	release_egress(&c->core);
	json_decref(c->core.policy);
	json_decref(c->core.tenants);
	memset(c, 0, sizeof(*c));
}

static const struct setting *find_setting(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(settings); i++)
		if (strcmp(settings[i].name, name) == 0)
			return &settings[i];
	return NULL;
}

/* "python=4,node=1": the languages named get their size, the others
 * none; "none" (or "") empties every pool. */
static int set_pool(uint64_t sizes[WARD_LANG_COUNT], const char *v, const char *origin)
{
	uint64_t n[WARD_LANG_COUNT] = { 0 };
	char buf[256];
	if (strlen(v) >= sizeof(buf))
		goto bad;
	ward_strlcpy(buf, strcmp(v, "none") == 0 ? "" : v, sizeof(buf));
	for (char *save = NULL, *item = strtok_r(buf, ",", &save); item;
	     item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '='), *end;
		if (!eq)
			goto bad;
		*eq = '\0';
		int lang = ward_lang_from_name(item);
		errno = 0;
		unsigned long long k = strtoull(eq + 1, &end, 10);
		if (lang < 0 || errno || end == eq + 1 || *end || eq[1] == '-' ||
		    k > POOL_MAX_PER_LANG)
			goto bad;
		n[lang] = k;
	}
	memcpy(sizes, n, sizeof(n));
	return 0;
bad:
	fprintf(stderr, "ward: error: %spool: expected LANGUAGE=N,... with a language of "
		"python, node, bash and N from 0 to %d (or \"none\"), got '%s'\n", origin,
		POOL_MAX_PER_LANG, v);
	return -1;
}

static const char *const **list_slot(struct srv_config *c, const struct setting *st,
				     size_t **n)
{
	*n = (size_t *)(void *)((char *)c + st->off_n);
	return (const char *const **)(void *)((char *)c + st->off);
}

static void list_clear(struct srv_config *c, const struct setting *st)
{
	size_t *n;
	const char *const **slot = list_slot(c, st, &n);
	for (size_t i = 0; *slot && i < *n; i++)
		free((void *)(uintptr_t)(*slot)[i]);
	free((void *)(uintptr_t)*slot);
	*slot = NULL;
	*n = 0;
}

/* One value of a K_LIST setting, checked, appended. where: "--egress-dns"
 * or "ward.json: egress-dns[1]". */
static int list_add(struct srv_config *c, const struct setting *st, const char *v,
		    const char *where)
{
	struct ward_error err;
	size_t *n;
	const char *const **slot = list_slot(c, st, &n);
	if (*n >= LIST_MAX) {
		fprintf(stderr, "ward: error: %s: at most %d values\n", where, LIST_MAX);
		return -1;
	}
	if (ward_net_setting_check(st->check, v, where, &err) < 0) {
		fprintf(stderr, "ward: error: %s\n", err.message);
		return -1;
	}
	char *d = strdup(v);
	const char **grown = d ? realloc((void *)(uintptr_t)*slot, (*n + 1) * sizeof(*grown)) : NULL;
	if (!grown) {
		free(d);
		fprintf(stderr, "ward: error: %s: out of memory\n", where);
		return -1;
	}
	grown[(*n)++] = d;
	*slot = grown;
	return 0;
}

/* Sets one value given as a string (flags, and string values in the file). */
static int set_string(struct srv_config *c, const struct setting *st, const char *v,
		      const char *origin)
{
	void *p = (char *)c + st->off;
	uint64_t n;
	char *end;
	switch (st->kind) {
	case K_STR: {
		char *d = strdup(v);
		if (!d)
			return -1;
		free(*(char **)p);
		*(char **)p = d;
		return 0;
	}
	case K_SIZE:
		if (ward_parse_size(v, &n) == 0) {
			*(uint64_t *)p = n;
			return 0;
		}
		fprintf(stderr, "ward: error: %s%s: expected a size like \"8M\", got '%s'\n", origin,
			st->name, v);
		return -1;
	case K_DUR:
		if (ward_parse_duration_ms(v, &n) == 0) {
			*(uint64_t *)p = n;
			return 0;
		}
		fprintf(stderr, "ward: error: %s%s: expected a duration like \"10s\", got '%s'\n",
			origin, st->name, v);
		return -1;
	case K_BOOL:
		if (strcmp(v, "true") == 0 || strcmp(v, "false") == 0) {
			*(bool *)p = v[0] == 't';
			return 0;
		}
		fprintf(stderr, "ward: error: %s%s: expected true or false, got '%s'\n", origin,
			st->name, v);
		return -1;
	case K_POOL:
		return set_pool((uint64_t *)p, v, origin);
	case K_LIST: {
		char where[4200];
		snprintf(where, sizeof(where), "%s%s", origin, st->name);
		return list_add(c, st, v, where);
	}
	case K_UINT:
		errno = 0;
		n = strtoull(v, &end, 10);
		if (!errno && end != v && !*end && v[0] != '-' && n > 0 && n < 1000000) {
			*(uint64_t *)p = n;
			return 0;
		}
		fprintf(stderr, "ward: error: %s%s: expected a positive integer, got '%s'\n", origin,
			st->name, v);
		return -1;
	}
	return -1;
}

/* A JSON value from the config file: strings as flags; numbers for sizes,
 * counts and durations (seconds); booleans for booleans. */
static int set_json(struct srv_config *c, const struct setting *st, json_t *v, const char *file)
{
	char origin[4200], num[64];
	snprintf(origin, sizeof(origin), "%s: ", file);
	if (st->kind == K_LIST) {
		/* an array of strings, in order */
		size_t i;
		json_t *e;
		if (!json_is_array(v)) {
			fprintf(stderr, "ward: error: %s: %s: expected an array of strings\n", file,
				st->name);
			return -1;
		}
		json_array_foreach(v, i, e) {
			char where[4200];
			snprintf(where, sizeof(where), "%s: %s[%zu]", file, st->name, i);
			if (!json_is_string(e)) {
				fprintf(stderr, "ward: error: %s: expected a string\n", where);
				return -1;
			}
			if (list_add(c, st, json_string_value(e), where) < 0)
				return -1;
		}
		return 0;
	}
	if (json_is_string(v))
		return set_string(c, st, json_string_value(v), origin);
	if (st->kind == K_POOL && json_is_object(v)) {
		/* {"python": 4, "node": 1}: as "python=4,node=1" */
		char spec[256] = "", item[64];
		const char *lang;
		json_t *n;
		json_object_foreach(v, lang, n) {
			if (!json_is_integer(n) || strlen(lang) > 16) {
				fprintf(stderr, "ward: error: %s: pool.%s: expected a count\n", file, lang);
				return -1;
			}
			size_t used = strlen(spec);
			snprintf(item, sizeof(item), "%s%s=%lld", used ? "," : "", lang,
				 (long long)json_integer_value(n));
			ward_strlcpy(spec + used, item, sizeof(spec) - used);
		}
		return set_string(c, st, spec[0] ? spec : "none", origin);
	}
	if (st->kind == K_BOOL && json_is_boolean(v))
		return set_string(c, st, json_is_true(v) ? "true" : "false", origin);
	if ((st->kind == K_SIZE || st->kind == K_UINT || st->kind == K_DUR) && json_is_number(v)) {
		snprintf(num, sizeof(num), "%.17g", json_number_value(v));
		return set_string(c, st, num, origin);
	}
	fprintf(stderr, "ward: error: %s: %s: wrong type\n", file, st->name);
	return -1;
}

/* "tenants": {"acme": {"max_per_tenant": 4, "max_sessions_per_tenant": 2,
 * "tenant_memory": "4G"}}: sizes become bytes here. */
static int check_tenants(json_t *t, const char *file)
{
	static const char *const known[] = { "max_per_tenant", "max_sessions_per_tenant",
					     "tenant_memory" };
	const char *name, *key;
	json_t *o, *v;
	if (!json_is_object(t)) {
		fprintf(stderr, "ward: error: %s: tenants: expected an object of tenant names\n", file);
		return -1;
	}
	json_object_foreach(t, name, o) {
		if (!json_is_object(o)) {
			fprintf(stderr, "ward: error: %s: tenants.%s: expected an object\n", file, name);
			return -1;
		}
		json_object_foreach(o, key, v) {
			size_t i = 0;
			while (i < ARRAY_SIZE(known) && strcmp(key, known[i]) != 0)
				i++;
			uint64_t n = 0;
			bool ok = i < ARRAY_SIZE(known);
			if (ok && i == 2 && json_is_string(v))
				ok = ward_parse_size(json_string_value(v), &n) == 0;
			else if (ok)
				ok = json_is_integer(v) && json_integer_value(v) >= 0 &&
				     (n = (uint64_t)json_integer_value(v), true);
			if (!ok) {
				fprintf(stderr, "ward: error: %s: tenants.%s.%s: %s\n", file, name, key,
					i < ARRAY_SIZE(known) ? "expected a non-negative integer (or a size like \"4G\")"
							      : "unknown key");
				return -1;
			}
			json_object_set_new(o, key, json_integer((json_int_t)n));
		}
	}
	return 0;
}

/* --- egress_credentials: [{name, host, path_prefix, headers: {Name: value}}]
 * checked by the service core's one parser (ward/egress.h), which never
 * shows a header's value. */

static int load_credentials(struct srv_config *c, json_t *a, const char *file)
{
	char field[4200];
	struct ward_error err;
	struct ward_egress_credential *rules;
	size_t n;
	ward_error_clear(&err);
	snprintf(field, sizeof(field), "%s: egress_credentials", file);
	if (ward_egress_credentials_from_json(a, field, &rules, &n, &err) < 0) {
		fprintf(stderr, "ward: error: %s\n", err.message);
		return -1;
	}
	release_egress_credentials(&c->core);
	c->core.egress_credentials = rules;
	c->core.n_egress_credentials = n;
	return 0;
}

static int load_file(struct srv_config *c, const char *path)
{
	json_error_t je;
	json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		enum json_error_code jc = json_error_code(&je);
		/* jansson's own text names its flag (JSON_ALLOW_NUL) here */
		bool nul = jc == json_error_null_character || jc == json_error_null_byte_in_key;
		/* jansson quotes the text near the error, which may be a secret
		 * (a credential's header value): the position says enough */
		char *near = strstr(je.text, " near '");
		if (near)
			*near = '\0';
		fprintf(stderr, "ward: error: %s:%d:%d: %s\n", path, je.line, je.column,
			nul ? "strings must not contain \\u0000" : je.text);
		return -1;
	}
	int r = 0;
	const char *key;
	json_t *v;
	if (!json_is_object(root)) {
		fprintf(stderr, "ward: error: %s: expected a JSON object\n", path);
		r = -1;
	}
	json_object_foreach(root, key, v) {
		if (r < 0)
			break;
		if (strcmp(key, "policy") == 0 && json_is_object(v)) {
			json_decref(c->core.policy);
			c->core.policy = json_incref(v);
			continue;
		}
		if (strcmp(key, "egress_credentials") == 0 || strcmp(key, "egress-credentials") == 0) {
			r = load_credentials(c, v, path);
			continue;
		}
		if (strcmp(key, "tenants") == 0) {
			if ((r = check_tenants(v, path)) == 0) {
				json_decref(c->core.tenants);
				c->core.tenants = json_incref(v);
			}
			continue;
		}
		char name[64];
		ward_strlcpy(name, key, sizeof(name));
		for (char *p = name; *p; p++)
			if (*p == '_')
				*p = '-';
		const struct setting *st = find_setting(name);
		if (!st) {
			fprintf(stderr, "ward: error: %s: unknown key '%s'\n", path, key);
			r = -1;
			break;
		}
		r = set_json(c, st, v, path);
	}
	json_decref(root);
	return r;
}

static void usage(FILE *f)
{
	fputs("usage: ward serve [--config FILE] [OPTIONS]\n\n"
	      "Runs the sandbox service: an HTTP/JSON API on a unix socket (and\n"
	      "optionally TCP). See docs/api.md. Options (also config-file keys, with\n"
	      "'-' or '_'):\n\n  --config FILE            a JSON file with these settings\n", f);
	for (size_t i = 0; i < ARRAY_SIZE(settings); i++)
		fprintf(f, "  --%-22s %s\n", settings[i].name, settings[i].help);
}

/* "numpy,pandas.io": dotted identifiers, at most 32 of them. */
static bool modules_ok(const char *v)
{
	size_t n = 1, len = 0;
	for (const char *c = v; *c; c++) {
		bool word = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '_' ||
			    (len > 0 && ((*c >= '0' && *c <= '9') || *c == '.'));
		if (*c == ',' && len > 0) {
			n++;
			len = 0;
		} else if (word && len < 128) {
			len++;
		} else {
			return false;
		}
	}
	return len > 0 && n <= 32;
}

int srv_config_parse(struct srv_config *c, int argc, char **argv)
{
	/* The file first, wherever --config is, so flags override it. */
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--config") == 0 && i + 1 < argc && load_file(c, argv[i + 1]) < 0)
			return -1;
		if (strncmp(a, "--config=", 9) == 0 && load_file(c, a + 9) < 0)
			return -1;
	}
	bool flag_lists[ARRAY_SIZE(settings)] = { false };
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return 1;
		}
		if (strncmp(argv[i], "--", 2) != 0) {
			fprintf(stderr, "ward: error: serve: unexpected argument '%s'\n", argv[i]);
			return -1;
		}
		char name[128];
		ward_strlcpy(name, argv[i] + 2, sizeof(name));
		char *eq = strchr(name, '=');
		const char *v = eq ? strchr(argv[i], '=') + 1 : NULL;
		if (eq)
			*eq = '\0';
		const struct setting *st = find_setting(name);
		if (!st && strcmp(name, "config") != 0) {
			fprintf(stderr, "ward: error: serve: unknown option '--%s'\n", name);
			usage(stderr);
			return -1;
		}
		if (!v && st && st->kind == K_BOOL)
			v = "true";
		else if (!v && i + 1 < argc)
			v = argv[++i];
		if (!v) {
			fprintf(stderr, "ward: error: --%s: expected a value\n", name);
			return -1;
		}
		if (!st)
			continue;
		/* a list flag replaces the file's list, and its repeats add */
		size_t idx = (size_t)(st - settings);
		if (st->kind == K_LIST && !flag_lists[idx]) {
			list_clear(c, st);
			flag_lists[idx] = true;
		}
		if (set_string(c, st, v, "--") < 0)
			return -1;
	}
	if (c->core.max_session_ttl_ms > 24ull * 3600 * 1000) {
		fprintf(stderr, "ward: error: max-session-ttl: at most 24h (a session's sandbox "
			"lives at most that long)\n");
		return -1;
	}
	if (c->core.session_ttl_ms > c->core.max_session_ttl_ms) {
		char a[32], b[32];
		fprintf(stderr, "ward: error: session-ttl (%s) is above max-session-ttl (%s)\n",
			ward_format_duration_ms(c->core.session_ttl_ms, a, sizeof(a)),
			ward_format_duration_ms(c->core.max_session_ttl_ms, b, sizeof(b)));
		return -1;
	}
	if (c->zygote && strcmp(c->zygote, "python") != 0 && strcmp(c->zygote, "none") != 0) {
		fprintf(stderr, "ward: error: zygote: expected python or none, got '%s'\n", c->zygote);
		return -1;
	}
	if (c->zygote_modules && !modules_ok(c->zygote_modules)) {
		fprintf(stderr, "ward: error: zygote-modules: expected python module names "
			"separated by commas (letters, digits, '_' and '.'), got '%s'\n",
			c->zygote_modules);
		return -1;
	}
	return 0;
}
