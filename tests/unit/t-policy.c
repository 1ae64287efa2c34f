/* tests/unit/t-policy.c — the policy library: defaults, every field, every
 * kind of bad value with its exact message, and the guarantees the header
 * makes (unchanged on error, to_json round trip). Pure memory; runs in
 * milliseconds.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <jansson.h>

#include "policy/internal.h"
#include "ward/policy.h"
#include "tap.h"

#define MiB (UINT64_C(1) << 20)

static struct ward_error err;

static int load(struct ward_policy *p, const char *json)
{
	ward_error_clear(&err);
	return ward_policy_load_json(p, json, strlen(json), "policy.json", &err);
}

static int set(struct ward_policy *p, const char *field, const char *value,
	       const char *source)
{
	ward_error_clear(&err);
	return ward_policy_set(p, field, value, source, &err);
}

static const char *env_get(const struct ward_policy *p, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; i < p->n_env; i++)
		if (strncmp(p->env[i], name, n) == 0 && p->env[i][n] == '=')
			return p->env[i] + n + 1;
	return NULL;
}

/* A test name on one TAP line. */
static const char *oneline(const char *s)
{
	static char buf[64];
	size_t i = 0;
	for (; s[i] && i + 1 < sizeof(buf); i++)
		buf[i] = s[i] == '\n' ? ' ' : s[i];
	buf[i] = '\0';
	return buf;
}

/* Loads json onto fresh defaults: it must fail with exactly msg and leave
 * the policy as it was. */
static void json_fails(const char *json, const char *msg)
{
	struct ward_policy p, d;
	ward_policy_init(&p, &err);
	ward_policy_init(&d, &err);
	int r = load(&p, json);
	ok(r == -EINVAL && ward_policy_equal(&p, &d), "rejected, unchanged: %s", oneline(json));
	is_str(err.message, msg, "  message");
	ward_policy_release(&p);
	ward_policy_release(&d);
}

static void set_fails(const char *field, const char *value, const char *source,
		      const char *msg)
{
	struct ward_policy p, d;
	ward_policy_init(&p, &err);
	ward_policy_init(&d, &err);
	int r = set(&p, field, value, source);
	ok(r == -EINVAL && ward_policy_equal(&p, &d), "%s %.40s rejected, unchanged",
	   field, value);
	is_str(err.message, msg, "  message");
	ward_policy_release(&p);
	ward_policy_release(&d);
}

static void test_layers(void)
{
	static const char *const names[] = {
		"userns", "mount", "pid", "net", "ipc", "uts", "cgroupns", "time",
		"cgroup", "rlimits", "privileges", "landlock", "seccomp", "env",
	};
	int good = 1;
	for (int i = 0; i < WARD_LAYER_COUNT; i++) {
		const char *n = ward_layer_name((enum ward_layer)i);
		good &= n && strcmp(n, names[i]) == 0 && ward_layer_from_name(n) == i;
	}
	ok(good, "all %d layer names map both ways", WARD_LAYER_COUNT);
	ok(ward_layer_name(WARD_LAYER_COUNT) == NULL, "no name past the last layer");
	is_int(ward_layer_from_name("nope"), -1, "unknown layer name");
	is_int(ward_layer_from_name(NULL), -1, "NULL layer name");
}

static void test_defaults(void)
{
	struct ward_policy p;
	is_int(ward_policy_init(&p, &err), 0, "init");
	is_int(p.n_binds, 0, "no binds");
	is_str(p.workdir, "/workspace", "workdir");
	is_str(p.hostname, "sandbox", "hostname");
	is_str(p.image, "host", "image");
	is_int(p.net, WARD_NET_NONE, "network none");
	ok(!p.root_inside && !p.require_cgroup && p.allow_degrade == 0,
	   "not root, cgroup not required, nothing degrades");
	is_int(p.n_env, 9, "nine variables");
	is_str(env_get(&p, "PATH"), "/usr/local/bin:/usr/bin:/bin", "PATH");
	is_str(env_get(&p, "HOME"), "/workspace", "HOME");
	is_str(env_get(&p, "LANG"), "C.UTF-8", "LANG");
	is_str(env_get(&p, "TMPDIR"), "/tmp", "TMPDIR");
	ok(strcmp(env_get(&p, "USER"), "sandbox") == 0 &&
	   strcmp(env_get(&p, "LOGNAME"), "sandbox") == 0, "USER, LOGNAME");
	is_str(env_get(&p, "SHELL"), "/bin/sh", "SHELL");
	is_str(env_get(&p, "MPLCONFIGDIR"), "/tmp/matplotlib", "MPLCONFIGDIR");
	is_str(env_get(&p, "PYTHONDONTWRITEBYTECODE"), "1", "PYTHONDONTWRITEBYTECODE");
	ok(p.env[p.n_env] == NULL, "env is NULL-terminated");
	ok(p.lint_deny_imports == NULL && p.n_lint_deny_imports == 0 &&
	   p.lint_deny_calls == NULL && p.n_lint_deny_calls == 0, "no lint");
	ok(ward_policy_lint_json(&p) == NULL, "no lint JSON");
	is_int(ward_policy_validate(&p, &err), 0, "defaults validate");
	ward_policy_release(&p);
	ok(p.env == NULL && p.workdir == NULL && p.n_env == 0, "release zeroes");
	ward_policy_release(&p);
	ok(1, "release twice is harmless");
}

static void test_parse_size(void)
{
	static const struct { const char *s; int rc; uint64_t v; } cases[] = {
		{ "0", 0, 0 }, { "4096", 0, 4096 }, { "64k", 0, 65536 },
		{ "64K", 0, 65536 }, { "512M", 0, 512 * MiB }, { "1g", 0, 1024 * MiB },
		{ "1.5G", 0, 1536 * MiB }, { "2T", 0, UINT64_C(2) << 40 },
		{ "0.5k", 0, 512 }, { "0.1K", 0, 102 }, { "007", 0, 7 },
		{ "", -EINVAL, 0 }, { "lots", -EINVAL, 0 }, { "-1", -EINVAL, 0 },
		{ "+1", -EINVAL, 0 }, { " 1", -EINVAL, 0 }, { "1 G", -EINVAL, 0 },
		{ "1GB", -EINVAL, 0 }, { "1MiB", -EINVAL, 0 }, { "1.5", -EINVAL, 0 },
		{ ".5G", -EINVAL, 0 }, { "5.G", -EINVAL, 0 }, { "1e3", -EINVAL, 0 },
		{ "1.1234567G", -EINVAL, 0 }, { "1P", -EINVAL, 0 },
		{ "18446744073709551616", -ERANGE, 0 }, { "16777216T", -ERANGE, 0 },
		{ "0.000001K", -ERANGE, 0 }, { "99999999999999999999x", -EINVAL, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v = 0;
		int rc = ward_parse_size(cases[i].s, &v);
		ok(rc == cases[i].rc && v == cases[i].v, "size \"%s\" -> %d %llu",
		   cases[i].s, cases[i].rc, (unsigned long long)cases[i].v);
	}
	ok(ward_parse_size(NULL, &(uint64_t){ 0 }) == -EINVAL, "size NULL");
}

static void test_parse_duration(void)
{
	static const struct { const char *s; int rc; uint64_t v; } cases[] = {
		{ "30", 0, 30000 }, { "1.5", 0, 1500 }, { "0.001", 0, 1 },
		{ "250ms", 0, 250 }, { "2s", 0, 2000 }, { "1m", 0, 60000 },
		{ "1.5m", 0, 90000 }, { "1h", 0, 3600000 }, { "0", 0, 0 },
		{ "1.5ms", -EINVAL, 0 }, { "2M", -EINVAL, 0 }, { "1d", -EINVAL, 0 },
		{ "s", -EINVAL, 0 }, { "", -EINVAL, 0 }, { "1 s", -EINVAL, 0 },
		{ "0.0001", -ERANGE, 0 }, { "9999999999999999999h", -ERANGE, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v = 0;
		int rc = ward_parse_duration_ms(cases[i].s, &v);
		ok(rc == cases[i].rc && v == cases[i].v, "duration \"%s\" -> %d %llu",
		   cases[i].s, cases[i].rc, (unsigned long long)cases[i].v);
	}
}

/* One row per limit: default; a good flag value; a malformed and an out of
 * range flag value; a good JSON value; a JSON value of the wrong type; an out
 * of range JSON value. Messages are exact. */
struct limit_case {
	const char *key, *flag;
	uint64_t def;
	const char *good; uint64_t good_v;
	const char *bad, *bad_msg;
	const char *range, *range_msg;
	const char *jgood; uint64_t jgood_v;
	const char *jtype, *jtype_msg;
	const char *jrange, *jrange_msg;
};

#define PJ "policy.json: limits."
static const struct limit_case limit_cases[] = {
	{ "memory", "--memory", 512 * MiB,
	  "256M", 256 * MiB,
	  "lots", "--memory: expected a size like \"256M\", got \"lots\"",
	  "1M", "--memory: must be between 4M and 1T, got \"1M\"",
	  "1073741824", 1024 * MiB,
	  "true", PJ "memory: expected a size like \"256M\", got true",
	  "\"2T\"", PJ "memory: must be between 4M and 1T, got \"2T\"" },
	{ "pids", "--pids", 128,
	  "64", 64,
	  "12k", "--pids: expected a whole number, got \"12k\"",
	  "1", "--pids: must be between 2 and 65536 (ward-init and the program are a process each), got \"1\"",
	  "256", 256,
	  "\"64\"", PJ "pids: expected a whole number, got \"64\"",
	  "100000", PJ "pids: must be between 2 and 65536 (ward-init and the program are a process each), got 100000" },
	{ "timeout", "--timeout", 30000,
	  "1.5", 1500,
	  "soon", "--timeout: expected a duration like \"30s\" or \"250ms\", got \"soon\"",
	  "25h", "--timeout: must be between 1ms and 24h, got \"25h\"",
	  "2.5", 2500,
	  "[1]", PJ "timeout: expected a duration like \"30s\" or \"250ms\", got an array",
	  "0", PJ "timeout: must be between 1ms and 24h, got 0" },
	{ "cpu_time", "--cpu-time", 0,
	  "2", 2000,
	  "2x", "--cpu-time: expected a duration like \"30s\" or \"250ms\", got \"2x\"",
	  "0.0001", "--cpu-time: must be 0 (no limit) or between 1ms and 24h, got \"0.0001\"",
	  "\"250ms\"", 250,
	  "null", PJ "cpu_time: expected a duration like \"30s\" or \"250ms\", got null",
	  "90000", PJ "cpu_time: must be 0 (no limit) or between 1ms and 24h, got 90000" },
	{ "cpus", "--cpus", 0,
	  "0.5", 500,
	  "half", "--cpus: expected a number of CPUs like 0.5, got \"half\"",
	  "2000", "--cpus: must be 0 (no limit) or between 0.01 and 1024, got \"2000\"",
	  "1.25", 1250,
	  "\"2\"", PJ "cpus: expected a number of CPUs like 0.5, got \"2\"",
	  "0.001", PJ "cpus: must be 0 (no limit) or between 0.01 and 1024, got 0.001" },
	{ "workspace_size", "--workspace-size", 64 * MiB,
	  "32M", 32 * MiB,
	  "32MB", "--workspace-size: expected a size like \"256M\", got \"32MB\"",
	  "512k", "--workspace-size: must be between 1M and 1T, got \"512k\"",
	  "\"1G\"", 1024 * MiB,
	  "1.5", PJ "workspace_size: expected a size like \"256M\", got 1.5",
	  "-1", PJ "workspace_size: expected a size like \"256M\", got -1" },
	{ "workspace_inodes", "--workspace-inodes", 16384,
	  "1000", 1000,
	  "-1", "--workspace-inodes: expected a whole number, got \"-1\"",
	  "10", "--workspace-inodes: must be between 64 and 16777216, got \"10\"",
	  "4096", 4096,
	  "1.5", PJ "workspace_inodes: expected a whole number, got 1.5",
	  "99999999", PJ "workspace_inodes: must be between 64 and 16777216, got 99999999" },
	{ "tmp_size", "--tmp-size", 64 * MiB,
	  "128M", 128 * MiB,
	  "1.5", "--tmp-size: expected a size like \"256M\", got \"1.5\"",
	  "0", "--tmp-size: must be between 1M and 1T, got \"0\"",
	  "2097152", 2 * MiB,
	  "{}", PJ "tmp_size: expected a size like \"256M\", got an object",
	  "\"1025G\"", PJ "tmp_size: must be between 1M and 1T, got \"1025G\"" },
	{ "tmp_inodes", "--tmp-inodes", 16384,
	  "64", 64,
	  "many", "--tmp-inodes: expected a whole number, got \"many\"",
	  "63", "--tmp-inodes: must be between 64 and 16777216, got \"63\"",
	  "100", 100,
	  "\"1k\"", PJ "tmp_inodes: expected a whole number, got \"1k\"",
	  "16777217", PJ "tmp_inodes: must be between 64 and 16777216, got 16777217" },
	{ "nofile", "--nofile", 1024,
	  "4096", 4096,
	  "", "--nofile: expected a whole number, got \"\"",
	  "8", "--nofile: must be between 16 and 1048576, got \"8\"",
	  "65536", 65536,
	  "false", PJ "nofile: expected a whole number, got false",
	  "2000000", PJ "nofile: must be between 16 and 1048576, got 2000000" },
	{ "file_size", "--file-size", 0,
	  "10M", 10 * MiB,
	  "10 M", "--file-size: expected a size like \"256M\", got \"10 M\"",
	  "2T", "--file-size: must be 0 (the workspace size) or between 1 and 1T, got \"2T\"",
	  "\"1G\"", 1024 * MiB,
	  "{}", PJ "file_size: expected a size like \"256M\", got an object",
	  "\"99999999999999999999\"",
	  PJ "file_size: must be 0 (the workspace size) or between 1 and 1T, got \"99999999999999999999\"" },
	{ "stack", "--stack", 8 * MiB,
	  "16M", 16 * MiB,
	  "big", "--stack: expected a size like \"256M\", got \"big\"",
	  "64k", "--stack: must be between 128K and 1G, got \"64k\"",
	  "1048576", MiB,
	  "true", PJ "stack: expected a size like \"256M\", got true",
	  "\"2G\"", PJ "stack: must be between 128K and 1G, got \"2G\"" },
	{ "output", "--output-limit", 16 * MiB,
	  "1M", MiB,
	  "1.5", "--output-limit: expected a size like \"256M\", got \"1.5\"",
	  "100", "--output-limit: must be between 1K and 1G, got \"100\"",
	  "\"64K\"", 65536,
	  "[]", PJ "output: expected a size like \"256M\", got an array",
	  "0", PJ "output: must be between 1K and 1G, got 0" },
};

static uint64_t *limit_field(struct ward_policy *p, const char *key)
{
	static const struct { const char *key; size_t off; } map[] = {
#define F(k, f) { k, offsetof(struct ward_policy, f) }
		F("memory", memory), F("pids", pids), F("timeout", timeout_ms),
		F("cpu_time", cpu_time_ms), F("cpus", cpus_milli),
		F("workspace_size", workspace_size), F("workspace_inodes", workspace_inodes),
		F("tmp_size", tmp_size), F("tmp_inodes", tmp_inodes), F("nofile", nofile),
		F("file_size", fsize), F("stack", stack), F("output", output_limit),
#undef F
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(map[i].key, key) == 0)
			return (uint64_t *)(void *)((char *)p + map[i].off);
	return NULL;
}

static void test_limit(const struct limit_case *c)
{
	struct ward_policy p;
	char field[64], json[256];
	ward_policy_init(&p, &err);
	snprintf(field, sizeof(field), "limits.%s", c->key);
	is_int(*limit_field(&p, c->key), c->def, "%s default", c->key);
	ok(set(&p, field, c->good, c->flag) == 0 &&
	   *limit_field(&p, c->key) == c->good_v, "%s %s", c->flag, c->good);
	set_fails(field, c->bad, c->flag, c->bad_msg);
	set_fails(field, c->range, c->flag, c->range_msg);
	snprintf(json, sizeof(json), "{\"limits\": {\"%s\": %s}}", c->key, c->jgood);
	ok(load(&p, json) == 0 && *limit_field(&p, c->key) == c->jgood_v, "%s", json);
	snprintf(json, sizeof(json), "{\"limits\": {\"%s\": %s}}", c->key, c->jtype);
	json_fails(json, c->jtype_msg);
	snprintf(json, sizeof(json), "{\"limits\": {\"%s\": %s}}", c->key, c->jrange);
	json_fails(json, c->jrange_msg);
	ward_policy_release(&p);
}

static void test_limits_misc(void)
{
	struct ward_policy p;
	ward_policy_init(&p, &err);
	ok(load(&p, "{\"limits\": {\"cpu_time\": 5, \"cpus\": 2}}") == 0 &&
	   p.cpu_time_ms == 5000 && p.cpus_milli == 2000, "integer seconds and CPUs");
	ok(load(&p, "{\"limits\": {\"cpu_time\": 0, \"cpus\": 0, \"file_size\": 0}}") == 0 &&
	   p.cpu_time_ms == 0 && p.cpus_milli == 0 && p.fsize == 0, "0 switches limits off");
	ok(set(&p, "limits.cpus", "0.015", "--cpus") == 0 && p.cpus_milli == 15,
	   "CPUs to a thousandth");
	ok(set(&p, "limits.timeout", "1m", "--timeout") == 0 && p.timeout_ms == 60000,
	   "timeout in minutes");
	ok(load(&p, "{\"limits\": {\"timeout\": 0.0015}}") == 0 && p.timeout_ms == 1,
	   "fractional milliseconds round down");
	json_fails("{\"limits\": {\"timeout\": 1e300}}",
		   PJ "timeout: must be between 1ms and 24h, got 1e300");
	json_fails("{\"limits\": {\"cpu_time\": 0.0000001}}",
		   PJ "cpu_time: must be 0 (no limit) or between 1ms and 24h, got 1e-7");
	json_fails("{\"limits\": 5}", "policy.json: limits: expected an object, got 5");
	ward_policy_release(&p);
}

static void test_unknown_keys(void)
{
	json_fails("{\"limit\": {}}", "policy.json: limit: unknown field");
	is_str(err.hint, "known fields: limits, mounts, env, workdir, hostname, image, "
	       "network, user, cgroup, allow_degraded, lint, permissions, writable, exec",
	       "  hint lists the fields");
	json_fails("{\"limits\": {\"memroy\": \"1G\"}}", PJ "memroy: unknown field");
	has_str(err.hint, "memory, pids, timeout", "  hint lists the limits");
	json_fails("{\"mounts\": [{\"host\": \"/a\", \"hots\": \"/b\"}]}",
		   "policy.json: mounts[0].hots: unknown field");
	is_str(err.hint, "known fields: host, inside, writable", "  hint for mounts");
	json_fails("{\"network\": {\"alow\": []}}", "policy.json: network.alow: unknown field");
	is_str(err.hint, "known fields: mode, allow, deny, max_connections, max_bytes_out, "
	       "max_bytes_in", "  hint for network");
	json_fails("{\"user\": {\"uid\": 0}}", "policy.json: user.uid: unknown field");
	json_fails("{\"cgroup\": {\"path\": \"/x\"}}", "policy.json: cgroup.path: unknown field");
	json_fails("{\"a\\u0001b\": 1}", "policy.json: a?b: unknown field");
	json_fails("{\"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk\": 1}",
		   "policy.json: kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk...: unknown field");
}

static void test_syntax(void)
{
	json_fails("{\n  \"limits\": {\n    \"memory\": ]\n}",
		   "policy.json:3:15: invalid JSON: unexpected token near ']'");
	json_fails("", "policy.json:1:0: invalid JSON: '[' or '{' expected near end of file");
	json_fails("{\"workdir\": \"/tmp\", \"workdir\": \"/tmp\"}",
		   "policy.json:1:29: invalid JSON: duplicate object key near '\"workdir\"'");
	json_fails("{} x", "policy.json:1:4: invalid JSON: end of file expected near 'x'");
	json_fails("[1]", "policy.json: expected a JSON object at the top level, got an array");
	json_fails("{\"mounts\": [[[[[[[[]]]]]]]]}",
		   "policy.json:1:19: nesting deeper than 8 levels");
	json_fails("{\"x\": [[[[[[[]]]]]]]}", "policy.json: x: unknown field");
	json_fails("{\"env\": {\"A\": \"\\u0000\"}}",
		   "policy.json:1:22: invalid JSON: strings must not contain \\u0000");

	struct ward_policy p;
	ward_policy_init(&p, &err);
	ok(load(&p, "{\"env\": {\"BRACKETS\": \"[[[[[[[[[[{{{{{{{{\"}}") == 0,
	   "brackets inside strings do not count as nesting");
	size_t big = 64 * 1024 + 1;
	char *doc = malloc(big);
	memset(doc, ' ', big);
	doc[0] = '{';
	doc[big - 1] = '}';
	ok(ward_policy_load_json(&p, doc, big, "big.json", &err) == -EINVAL, "oversized document");
	is_str(err.message, "big.json: document is 65537 bytes, more than the limit of 64 KiB",
	       "  message");
	ok(ward_policy_load_json(&p, doc, big - 1, "big.json", &err) == -EINVAL &&
	   strstr(err.message, "big.json:1:65536: invalid JSON") != NULL,
	   "64 KiB is parsed: %s", err.message);
	free(doc);
	ok(ward_policy_load_json(&p, NULL, 0, NULL, &err) == -EINVAL &&
	   strncmp(err.message, "policy:1:0: invalid JSON", 24) == 0, "NULL buffer: %s", err.message);
	ward_policy_release(&p);
}
#undef PJ

static void test_mounts_json(void)
{
	struct ward_policy p;
	ward_policy_init(&p, &err);
	ok(load(&p, "{\"mounts\": [{\"host\": \"/srv/data\", \"inside\": \"/data\"},"
		    " {\"host\": \"/home/u//out/\", \"writable\": true},"
		    " {\"host\": \"/srv/lib\", \"inside\": \"/library\", \"writable\": false}]}") == 0,
	   "three mounts");
	is_int(p.n_binds, 3, "  count");
	ok(strcmp(p.binds[0].host, "/srv/data") == 0 && strcmp(p.binds[0].inside, "/data") == 0 &&
	   !p.binds[0].writable, "  explicit inside, read-only by default");
	ok(strcmp(p.binds[1].host, "/home/u/out") == 0 &&
	   strcmp(p.binds[1].inside, "/home/u/out") == 0 && p.binds[1].writable,
	   "  inside defaults to host, slashes folded, writable");
	ok(strcmp(p.binds[2].inside, "/library") == 0, "  /library is not /lib");
	ok(load(&p, "{\"mounts\": [{\"host\": \"/srv/more\", \"inside\": \"/more\"}]}") == 0 &&
	   p.n_binds == 4, "a second document adds mounts");
	ward_policy_release(&p);
}

#define PM "policy.json: mounts[0]"
static void test_mounts_json_errors(void)
{
	json_fails("{\"mounts\": {}}", "policy.json: mounts: expected an array of mounts, got an object");
	json_fails("{\"mounts\": [\"/data\"]}", PM ": expected an object, got \"/data\"");
	json_fails("{\"mounts\": [{\"inside\": \"/x\"}]}", PM ": missing required field \"host\"");
	json_fails("{\"mounts\": [{\"host\": 5}]}", PM ".host: expected a string, got 5");
	json_fails("{\"mounts\": [{\"host\": \"/a\", \"inside\": null}]}",
		   PM ".inside: expected a string, got null");
	json_fails("{\"mounts\": [{\"host\": \"/a\", \"writable\": \"yes\"}]}",
		   PM ".writable: expected true or false, got \"yes\"");
	json_fails("{\"mounts\": [{\"host\": \"data\"}]}",
		   PM ".host: expected an absolute path, got \"data\"");
	json_fails("{\"mounts\": [{\"host\": \"/a\", \"inside\": \"/b/../etc\"}]}",
		   PM ".inside: path must not contain \".\" or \"..\" components, got \"/b/../etc\"");
	json_fails("{\"mounts\": [{\"host\": \"/a/./b\"}]}",
		   PM ".host: path must not contain \".\" or \"..\" components, got \"/a/./b\"");
	json_fails("{\"mounts\": [{\"host\": \"/a\\nb\"}]}",
		   PM ".host: path must not contain control characters, got \"/a\\x0ab\"");
	json_fails("{\"mounts\": [{\"host\": \"/\", \"inside\": \"/host\"}]}",
		   PM ".host: cannot share the whole host filesystem (\"/\"); bind a specific directory");
	json_fails("{\"mounts\": [{\"host\": \"/sys/fs\", \"inside\": \"/x\"}]}",
		   PM ".host: cannot share \"/sys/fs\" from the host: /sys is a host kernel interface");
	json_fails("{\"mounts\": [{\"host\": \"/proc\", \"inside\": \"/x\"}]}",
		   PM ".host: cannot share \"/proc\" from the host: /proc is a host kernel interface");
	json_fails("{\"mounts\": [{\"host\": \"/a\", \"inside\": \"//\"}]}",
		   PM ".inside: cannot mount over \"/\": the root is the image");
	json_fails("{\"mounts\": [{\"host\": \"/a\", \"inside\": \"/etc\"}]}",
		   PM ".inside: cannot mount over \"/etc\": /etc belongs to the image");
	json_fails("{\"mounts\": [{\"host\": \"/a\", \"inside\": \"/usr/local/data\"}]}",
		   PM ".inside: cannot mount over \"/usr/local/data\": /usr belongs to the image");
	json_fails("{\"mounts\": [{\"host\": \"/a\", \"inside\": \"/lib64/x\"}]}",
		   PM ".inside: cannot mount over \"/lib64/x\": /lib64 belongs to the image");
	json_fails("{\"mounts\": [{\"host\": \"/a\", \"inside\": \"/dev/shm\"}]}",
		   PM ".inside: cannot mount over \"/dev/shm\": /dev is managed by ward");
	json_fails("{\"mounts\": [{\"host\": \"/a\", \"inside\": \"/data\"},"
		   " {\"host\": \"/b\", \"inside\": \"/data/\"}]}",
		   "policy.json: mounts[1].inside: \"/data\" is already mounted");
	json_fails("{\"mounts\": [{\"host\": \"/a\"}, {\"host\": \"/a\"}]}",
		   "policy.json: mounts[1].host: \"/a\" is already mounted");
	json_fails("{\"mounts\": [{\"host\": \"/a\", \"inside\": \"/data/out\"},"
		   " {\"host\": \"/b\", \"inside\": \"/data\"}]}",
		   "policy.json: mounts[1].inside: \"/data\" would hide \"/data/out\", "
		   "which is mounted before it; list it first");
}
#undef PM

static void test_mounts_limit(void)
{
	char doc[4096];
	size_t o = (size_t)snprintf(doc, sizeof(doc), "{\"mounts\": [");
	for (int i = 0; i <= 32; i++)
		o += (size_t)snprintf(doc + o, sizeof(doc) - o, "%s{\"host\": \"/m%d\"}",
				      i ? ", " : "", i);
	snprintf(doc + o, sizeof(doc) - o, "]}");
	json_fails(doc, "policy.json: mounts[32]: too many mounts (at most 32)");
}

static void test_mounts_flags(void)
{
	struct ward_policy p;
	ward_policy_init(&p, &err);
	ok(set(&p, "mounts.ro", "/srv/data:/data", "--ro") == 0 && p.n_binds == 1 &&
	   strcmp(p.binds[0].host, "/srv/data") == 0 &&
	   strcmp(p.binds[0].inside, "/data") == 0 && !p.binds[0].writable, "--ro HOST:INSIDE");
	ok(set(&p, "mounts.rw", "/srv/out", "--rw") == 0 && p.n_binds == 2 &&
	   strcmp(p.binds[1].inside, "/srv/out") == 0 && p.binds[1].writable, "--rw HOST");
	ok(set(&p, "mounts.ro", "/x:/data", "--ro") == -EINVAL &&
	   strcmp(err.message, "--ro: \"/data\" is already mounted") == 0 && p.n_binds == 2,
	   "flag clashes with an earlier mount: %s", err.message);
	ward_policy_release(&p);
	set_fails("mounts.ro", "", "--ro", "--ro: expected HOST[:INSIDE], got \"\"");
	set_fails("mounts.ro", "/a:", "--ro", "--ro: expected HOST[:INSIDE], got \"/a:\"");
	set_fails("mounts.ro", ":/a", "--ro", "--ro: expected HOST[:INSIDE], got \":/a\"");
	set_fails("mounts.rw", "/a:/proc", "--rw", "--rw: cannot mount over \"/proc\": /proc is managed by ward");
	set_fails("mounts.rw", "/a:rel", "--rw", "--rw: expected an absolute path, got \"rel\"");
	set_fails("mounts.ro", "/a\xff", "--ro", "--ro: path must be valid UTF-8, got \"/a\xff\"");
}

static void test_env(void)
{
	struct ward_policy p;
	ward_policy_init(&p, &err);
	ok(load(&p, "{\"env\": {\"FOO\": \"bar\", \"HOME\": \"/tmp\", \"LANG\": null,"
		    " \"GONE\": null, \"_x1\": \"\"}}") == 0, "env object");
	is_str(env_get(&p, "FOO"), "bar", "  added");
	ok(strcmp(p.env[1], "HOME=/tmp") == 0, "  replaced in place");
	ok(env_get(&p, "LANG") == NULL && p.n_env == 10, "  null removes; removing a missing name is fine");
	is_str(env_get(&p, "_x1"), "", "  empty value");
	ok(p.env[p.n_env] == NULL, "  still NULL-terminated");
	ok(set(&p, "env", "FOO=a=b", "--env") == 0, "--env NAME=VALUE");
	is_str(env_get(&p, "FOO"), "a=b", "  value keeps later '='");
	ok(set(&p, "env.unset", "PATH", "--unset-env") == 0 && env_get(&p, "PATH") == NULL,
	   "env.unset removes");
	ward_policy_release(&p);

	json_fails("{\"env\": []}", "policy.json: env: expected an object of NAME: \"VALUE\" pairs, got an array");
	json_fails("{\"env\": {\"A-B\": \"x\"}}",
		   "policy.json: env: invalid variable name \"A-B\": use letters, digits and \"_\", not starting with a digit");
	json_fails("{\"env\": {\"\": \"x\"}}",
		   "policy.json: env: invalid variable name \"\": use letters, digits and \"_\", not starting with a digit");
	json_fails("{\"env\": {\"A\": true}}", "policy.json: env.A: expected a string or null, got true");
	set_fails("env", "FOO", "--env", "--env: expected NAME=VALUE, got \"FOO\"");
	set_fails("env", "=x", "--env", "--env: expected NAME=VALUE, got \"=x\"");
	set_fails("env", "1X=y", "--env",
		  "--env: invalid variable name \"1X\": use letters, digits and \"_\", not starting with a digit");
	set_fails("env", "X=\xc3", "--env", "--env: value must be valid UTF-8");
	set_fails("env.unset", "A B", "--unset-env",
		  "--unset-env: invalid variable name \"A B\": use letters, digits and \"_\", not starting with a digit");
}

static void test_env_limits(void)
{
	struct ward_policy p;
	char *doc = malloc(40100);
	size_t o = (size_t)snprintf(doc, 40100, "{\"env\": {\"BIG\": \"");
	memset(doc + o, 'x', 32769);
	snprintf(doc + o + 32769, 40100 - o - 32769, "\"}}");
	json_fails(doc, "policy.json: env.BIG: value is longer than 32768 bytes");
	free(doc);

	ward_policy_init(&p, &err);
	int r = 0;
	char kv[32];
	for (int i = 0; r == 0 && i < 300; i++) {
		snprintf(kv, sizeof(kv), "V%d=1", i);
		r = set(&p, "env", kv, "--env");
	}
	ok(r == -EINVAL && p.n_env == 256, "at most 256 variables");
	is_str(err.message, "--env: too many variables (at most 256)", "  message");
	ok(set(&p, "env", "V0=2", "--env") == 0, "replacing works at the limit");
	ward_policy_release(&p);
}

static void test_strings(void)
{
	struct ward_policy p;
	ward_policy_init(&p, &err);
	ok(load(&p, "{\"workdir\": \"/workspace/src/\", \"hostname\": \"box-1\","
		    " \"image\": \"host\", \"network\": {\"mode\": \"none\"}}") == 0 &&
	   strcmp(p.workdir, "/workspace/src") == 0 && strcmp(p.hostname, "box-1") == 0,
	   "workdir, hostname, image, network");
	ok(set(&p, "workdir", "/tmp", "--workdir") == 0 && strcmp(p.workdir, "/tmp") == 0,
	   "--workdir");
	ok(set(&p, "hostname", "A1", "--hostname") == 0 && strcmp(p.hostname, "A1") == 0,
	   "--hostname");
	ok(set(&p, "network", "none", "--net") == 0 && set(&p, "image", "host", "--image") == 0,
	   "--net none, --image host");
	ward_policy_release(&p);

	json_fails("{\"workdir\": 5}", "policy.json: workdir: expected a string, got 5");
	json_fails("{\"workdir\": \"src\"}", "policy.json: workdir: expected an absolute path, got \"src\"");
	json_fails("{\"workdir\": \"/workspace/..\"}",
		   "policy.json: workdir: path must not contain \".\" or \"..\" components, got \"/workspace/..\"");
#define HN "expected a hostname of 1 to 63 letters, digits and \"-\" (not first or last), got "
	json_fails("{\"hostname\": \"-x\"}", "policy.json: hostname: " HN "\"-x\"");
	json_fails("{\"hostname\": \"a.b\"}", "policy.json: hostname: " HN "\"a.b\"");
	json_fails("{\"hostname\": \"\"}", "policy.json: hostname: " HN "\"\"");
	set_fails("hostname", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "--hostname",
		  "--hostname: " HN "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...\"");
#undef HN
	json_fails("{\"image\": \"debian\"}", "policy.json: image: expected one of \"host\", got \"debian\"");
	json_fails("{\"network\": {\"mode\": \"host\"}}",
		   "policy.json: network.mode: expected one of \"none\", \"allowlist\", got \"host\"");
	json_fails("{\"network\": \"none\"}", "policy.json: network: expected an object, got \"none\"");
	set_fails("network", "bridge", "--net", "--net: expected one of \"none\", \"allowlist\", got \"bridge\"");
}

static void test_bools(void)
{
	struct ward_policy p;
	ward_policy_init(&p, &err);
	ok(load(&p, "{\"user\": {\"root\": true}, \"cgroup\": {\"required\": true}}") == 0 &&
	   p.root_inside && p.require_cgroup, "user.root, cgroup.required");
	ok(set(&p, "user.root", "false", "--root") == 0 && !p.root_inside, "--root false");
	ok(set(&p, "cgroup.required", "false", "--require-cgroup") == 0 && !p.require_cgroup,
	   "--require-cgroup false");
	ward_policy_release(&p);
	json_fails("{\"user\": {\"root\": \"yes\"}}", "policy.json: user.root: expected true or false, got \"yes\"");
	json_fails("{\"cgroup\": {\"required\": 1}}", "policy.json: cgroup.required: expected true or false, got 1");
	json_fails("{\"user\": []}", "policy.json: user: expected an object, got an array");
	set_fails("user.root", "yes", "--root", "--root: expected true or false, got \"yes\"");
}

static void test_degraded(void)
{
	static const char *const never[] = {
		"userns", "mount", "pid", "net", "seccomp", "privileges", "env",
	};
	struct ward_policy p;
	char doc[128], msg[256];
	ward_policy_init(&p, &err);
	ok(load(&p, "{\"allow_degraded\": [\"landlock\", \"cgroup\"]}") == 0 &&
	   p.allow_degrade == ((1u << WARD_LAYER_LANDLOCK) | (1u << WARD_LAYER_CGROUP)),
	   "landlock and cgroup may degrade");
	ok(set(&p, "allow_degraded", "time,cgroupns", "--allow-degraded") == 0 &&
	   p.allow_degrade == ((1u << WARD_LAYER_LANDLOCK) | (1u << WARD_LAYER_CGROUP) |
			       (1u << WARD_LAYER_TIME) | (1u << WARD_LAYER_CGROUPNS)),
	   "flag adds time and cgroupns");
	ward_policy_release(&p);
	for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++) {
		snprintf(doc, sizeof(doc), "{\"allow_degraded\": [\"%s\"]}", never[i]);
		snprintf(msg, sizeof(msg), "policy.json: allow_degraded[0]: layer \"%s\" can "
			 "never degrade; only landlock, cgroup, time and cgroupns may", never[i]);
		json_fails(doc, msg);
	}
	json_fails("{\"allow_degraded\": [\"landlock\", \"nope\"]}",
		   "policy.json: allow_degraded[1]: unknown layer \"nope\"; layers that may degrade: "
		   "landlock, cgroup, time, cgroupns");
	json_fails("{\"allow_degraded\": \"landlock\"}",
		   "policy.json: allow_degraded: expected an array of layer names, got \"landlock\"");
	json_fails("{\"allow_degraded\": [1]}", "policy.json: allow_degraded[0]: expected a layer name, got 1");
	set_fails("allow_degraded", "landlock,userns", "--allow-degraded",
		  "--allow-degraded: layer \"userns\" can never degrade; only landlock, cgroup, time and cgroupns may");
	set_fails("allow_degraded", "landlock,", "--allow-degraded",
		  "--allow-degraded: unknown layer \"\"; layers that may degrade: landlock, cgroup, time, cgroupns");
}

static void test_set_misc(void)
{
	set_fails("limits.bogus", "1", "--bogus", "--bogus: unknown policy field \"limits.bogus\"");
	set_fails("mounts", "/a", "--mount", "--mount: unknown policy field \"mounts\"");
	set_fails("limits.memory", "x", NULL, "limits.memory: expected a size like \"256M\", got \"x\"");
	char junk[200];
	memset(junk, 0x9b, sizeof(junk) - 1);  /* continuation bytes, no lead byte */
	junk[sizeof(junk) - 1] = '\0';
	struct ward_policy j;
	ward_policy_init(&j, &err);
	ok(set(&j, junk, "1", "--x") == -EINVAL && strlen(err.message) < 100,
	   "a long non-UTF-8 field name is cut in the message");
	ward_policy_release(&j);
	struct ward_policy p;
	ward_policy_init(&p, &err);
	ok(set(&p, "limits.memory", NULL, "--memory") == -EINVAL &&
	   strcmp(err.message, "--memory: no field or value given") == 0, "NULL value");
	ok(set(&p, NULL, "1", NULL) == -EINVAL && strcmp(err.message, "policy: no field or value given") == 0,
	   "NULL field");
	ward_policy_release(&p);
}

static void test_overrides(void)
{
	struct ward_policy p;
	ward_policy_init(&p, &err);
	ok(load(&p, "{\"limits\": {\"memory\": \"1G\", \"timeout\": 10},"
		    " \"env\": {\"FOO\": \"file\"}, \"workdir\": \"/tmp\"}") == 0, "file");
	ok(set(&p, "limits.memory", "256M", "--memory") == 0 && p.memory == 256 * MiB,
	   "flag overrides the file's memory");
	is_int(p.timeout_ms, 10000, "  file's timeout stays");
	ok(set(&p, "env", "FOO=flag", "--env") == 0, "flag overrides an env value");
	is_str(env_get(&p, "FOO"), "flag", "  value");
	ok(set(&p, "workdir", "/workspace", "--workdir") == 0 && strcmp(p.workdir, "/workspace") == 0,
	   "flag overrides workdir");
	ward_policy_release(&p);
}

static void test_unchanged_on_error(void)
{
	struct ward_policy p, before;
	ward_policy_init(&p, &err);
	load(&p, "{\"mounts\": [{\"host\": \"/srv\"}], \"env\": {\"A\": \"1\"}}");
	ward_policy_copy(&before, &p, &err);
	ok(load(&p, "{\"limits\": {\"memory\": \"1G\", \"pids\": 5}, \"env\": {\"A\": \"2\", \"PATH\": null},"
		    " \"mounts\": [{\"host\": \"/x\"}], \"workdir\": \"/tmp\","
		    " \"allow_degraded\": [\"landlock\"], \"hostname\": \"-bad\"}") == -EINVAL,
	   "a late error fails the load");
	ok(ward_policy_equal(&p, &before), "  the policy is exactly as before");
	ok(p.memory == 512 * MiB && strcmp(env_get(&p, "A"), "1") == 0 && p.n_binds == 1,
	   "  memory, env and mounts untouched");
	ward_policy_release(&before);
	ward_policy_release(&p);
}

static void test_validate(void)
{
	struct ward_policy p;
	ward_policy_init(&p, &err);
	set(&p, "workdir", "/opt/x", "--workdir");
	is_int(ward_policy_validate(&p, &err), -EINVAL, "workdir outside every writable place");
	is_str(err.message, "policy: workdir: \"/opt/x\" is not inside /workspace, /tmp or a mount", "  message");
	set(&p, "mounts.ro", "/srv/opt:/opt", "--ro");
	is_int(ward_policy_validate(&p, &err), 0, "workdir inside a mount");
	set(&p, "cgroup.required", "true", "--require-cgroup");
	set(&p, "allow_degraded", "cgroup", "--allow-degraded");
	is_int(ward_policy_validate(&p, &err), -EINVAL, "required and degradable cgroup");
	is_str(err.message, "policy: cgroup.required: is true, but allow_degraded lists \"cgroup\"", "  message");
	p.require_cgroup = false;
	p.memory = 0;
	ward_policy_validate(&p, &err);
	is_str(err.message, "policy: limits.memory: must be between 4M and 1T, got 0", "hand-set memory");
	p.memory = 512 * MiB;
	p.allow_degrade |= 1u << WARD_LAYER_SECCOMP;
	ward_policy_validate(&p, &err);
	is_str(err.message, "policy: allow_degraded: layer \"seccomp\" can never degrade", "hand-set degrade");
	p.allow_degrade = 0;
	set(&p, "mounts.rw", "/srv/x:/opt/x", "--rw");
	is_int(ward_policy_validate(&p, &err), 0, "a mount inside an earlier one");
	struct ward_bind t = p.binds[0];
	p.binds[0] = p.binds[1];
	p.binds[1] = t;
	ward_policy_validate(&p, &err);
	is_str(err.message, "policy: mounts[1]: \"/opt\" would hide \"/opt/x\", which is "
	       "mounted before it; list it first", "hand-swapped mount order");
	p.binds[1] = p.binds[0];
	p.binds[0] = t;
	free(p.binds[0].inside);
	p.binds[0].inside = strdup("/opt/");
	ward_policy_validate(&p, &err);
	is_str(err.message, "policy: mounts[0]: path must be in normal form (no repeated or "
	       "trailing \"/\"), got \"/opt/\"", "hand-set bind path");
	ward_policy_release(&p);

	ward_policy_init(&p, &err);
	free(p.env[2]);
	p.env[2] = strdup("PATH=/bin");
	ward_policy_validate(&p, &err);
	is_str(err.message, "policy: env[2]: variable PATH is set twice", "hand-set duplicate env");
	ward_policy_release(&p);
}

static void test_round_trip(void)
{
	struct ward_policy p, q;
	ward_policy_init(&p, &err);
	ok(load(&p, "{\"limits\": {\"memory\": \"1.5G\", \"timeout\": 1.5, \"cpu_time\": \"90s\","
		    " \"cpus\": 0.33, \"file_size\": 12345, \"stack\": \"1536K\"},"
		    " \"mounts\": [{\"host\": \"/srv/d\", \"inside\": \"/data\"},"
		    " {\"host\": \"/srv/o\", \"inside\": \"/data/out\", \"writable\": true}],"
		    " \"env\": {\"HOME\": null, \"Q\": \"\\\"quoted\\\"\\n\\u00e9\"},"
		    " \"workdir\": \"/data/out\", \"user\": {\"root\": true},"
		    " \"allow_degraded\": [\"time\", \"landlock\"]}") == 0, "a busy policy");
	set(&p, "env.unset", "PATH", "--unset-env");
	set(&p, "env", "PATH=/opt/bin", "--env");
	char *json = ward_policy_to_json(&p);
	ok(json != NULL, "to_json");
	has_str(json, "\"memory\": \"1536M\"", "  sizes print with the largest exact unit");
	has_str(json, "\"timeout\": \"1500ms\"", "  durations print exactly");
	has_str(json, "\"cpu_time\": \"90s\"", "  whole seconds print as s");
	has_str(json, "\"cpus\": 0.33", "  CPUs print as a number");
	has_str(json, "\"HOME\": null", "  removed defaults print as null");
	ward_policy_init(&q, &err);
	ok(load(&q, json) == 0, "to_json output loads: %s", err.message);
	ok(ward_policy_equal(&p, &q), "  and gives the same policy");
	char *again = ward_policy_to_json(&q);
	ok(again && strcmp(json, again) == 0, "  and prints the same bytes (env sorted)");
	ok(ward_policy_validate(&q, &err) == 0, "  and validates");
	free(again);
	free(json);
	ward_policy_release(&q);
	ward_policy_release(&p);

	ward_policy_init(&p, &err);
	ward_policy_init(&q, &err);
	json = ward_policy_to_json(&p);
	ok(load(&q, json) == 0 && ward_policy_equal(&p, &q), "defaults round-trip");
	again = ward_policy_to_json(&q);
	ok(again && strcmp(json, again) == 0, "  byte for byte");
	free(again);
	free(json);
	ward_policy_release(&q);
	ward_policy_release(&p);
}

/* --- lint --- */

#define PL "policy.json: lint."
#define EXP_IMPORT "expected a module name like \"subprocess\" or \"os.path\", got "
#define EXP_CALL "expected a function name like \"eval\" or \"os.system\", got "

/* The list joined with ',' (in list order), for one-line comparisons. */
static const char *joined(char *const *v, size_t n)
{
	static char buf[512];
	buf[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		if (i)
			strncat(buf, ",", sizeof(buf) - strlen(buf) - 1);
		strncat(buf, v[i], sizeof(buf) - strlen(buf) - 1);
	}
	return buf;
}

/* The compact dump of ward_policy_lint_json (NULL stays NULL). */
static const char *lint_dump(const struct ward_policy *p)
{
	static char buf[1024];
	json_t *j = ward_policy_lint_json(p);
	if (!j)
		return NULL;
	char *s = json_dumps(j, JSON_COMPACT);
	snprintf(buf, sizeof(buf), "%s", s ? s : "");
	free(s);
	json_decref(j);
	return buf;
}

static void test_lint_good(void)
{
	struct ward_policy p;
	ward_policy_init(&p, &err);
	ok(load(&p, "{\"lint\": {\"deny_imports\": [\"subprocess\", \"socket\", \"os.path\", \"subprocess\"],"
		    " \"deny_calls\": [\"eval\", \"exec\", \"os.system\", \"_a1.B_2\"]}}") == 0,
	   "lint object: %s", err.message);
	is_int(p.n_lint_deny_imports, 3, "  a duplicate import is ignored");
	is_str(joined(p.lint_deny_imports, p.n_lint_deny_imports), "subprocess,socket,os.path",
	       "  imports in the order given");
	is_str(joined(p.lint_deny_calls, p.n_lint_deny_calls), "eval,exec,os.system,_a1.B_2",
	       "  calls in the order given");
	ok(p.lint_deny_imports[3] == NULL && p.lint_deny_calls[4] == NULL, "  NULL-terminated");
	ok(load(&p, "{\"lint\": {}}") == 0 && load(&p, "{\"lint\": {\"deny_calls\": []}}") == 0 &&
	   p.n_lint_deny_imports == 3 && p.n_lint_deny_calls == 4, "empty object and list change nothing");
	ok(load(&p, "{\"lint\": {\"deny_calls\": [\"compile\", \"eval\"]}}") == 0 &&
	   p.n_lint_deny_calls == 5, "a second document adds");
	ok(set(&p, "lint.deny_calls", "__import__,eval,compile,getattr", "--deny-call") == 0,
	   "flag list");
	is_str(joined(p.lint_deny_calls, p.n_lint_deny_calls),
	       "eval,exec,os.system,_a1.B_2,compile,__import__,getattr", "  adds the new names only");
	ok(set(&p, "lint.deny_imports", "ctypes", "--deny-import") == 0 &&
	   p.n_lint_deny_imports == 4 && strcmp(p.lint_deny_imports[3], "ctypes") == 0,
	   "flag with one name");
	is_str(lint_dump(&p), "{\"deny_imports\":[\"ctypes\",\"os.path\",\"socket\",\"subprocess\"],"
	       "\"deny_calls\":[\"__import__\",\"_a1.B_2\",\"compile\",\"eval\",\"exec\",\"getattr\","
	       "\"os.system\"]}", "lint JSON, sorted");
	is_int(ward_policy_validate(&p, &err), 0, "validates");
	ward_policy_release(&p);
	ok(p.lint_deny_imports == NULL && p.n_lint_deny_calls == 0, "release zeroes the lists");

	ward_policy_init(&p, &err);
	char name[160];
	memset(name, 'x', 128);
	name[128] = '\0';
	ok(set(&p, "lint.deny_calls", name, "--deny-call") == 0, "a name of 128 bytes");
	ok(set(&p, "lint.deny_calls", "A.b.C9._", "--deny-call") == 0, "dotted, any case");
	ward_policy_release(&p);

	ward_policy_init(&p, &err);
	set(&p, "lint.deny_calls", "os.system", "--deny-call");
	is_str(lint_dump(&p), "{\"deny_imports\":[],\"deny_calls\":[\"os.system\"]}",
	       "lint JSON has both keys");
	ward_policy_release(&p);
}

static void test_lint_errors(void)
{
	static const char *const bad[] = {
		"", ".", "os.", ".os", "os..path", "1abc", "os.2x", "a-b", "a b", "$x",
		"os.system()", " os", "\xc3\xa9", "a\\u0001b",
	};
	char doc[256], msg[256], name[200];
	json_fails("{\"lint\": []}", "policy.json: lint: expected an object, got an array");
	json_fails("{\"lint\": null}", "policy.json: lint: expected an object, got null");
	json_fails("{\"lint\": {\"deny_import\": []}}", PL "deny_import: unknown field");
	is_str(err.hint, "known fields: deny_imports, deny_calls", "  hint lists the lint fields");
	json_fails("{\"lint\": {\"deny_calls\": [], \"allow_calls\": []}}", PL "allow_calls: unknown field");
	json_fails("{\"lint\": {\"deny_calls\": \"eval\"}}",
		   PL "deny_calls: expected an array of function names, got \"eval\"");
	json_fails("{\"lint\": {\"deny_imports\": {}}}",
		   PL "deny_imports: expected an array of module names, got an object");
	json_fails("{\"lint\": {\"deny_calls\": [\"eval\", \"exec\", \"os.system\", 3]}}",
		   PL "deny_calls[3]: " EXP_CALL "3");
	json_fails("{\"lint\": {\"deny_imports\": [null]}}", PL "deny_imports[0]: " EXP_IMPORT "null");
	json_fails("{\"lint\": {\"deny_imports\": [[\"os\"]]}}", PL "deny_imports[0]: " EXP_IMPORT "an array");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char shown[32];
		/* the message escapes control characters as \xNN */
		snprintf(shown, sizeof(shown), "%s", strcmp(bad[i], "a\\u0001b") ? bad[i] : "a\\x01b");
		snprintf(doc, sizeof(doc), "{\"lint\": {\"deny_calls\": [\"eval\", \"%s\"]}}", bad[i]);
		snprintf(msg, sizeof(msg), PL "deny_calls[1]: " EXP_CALL "\"%s\"", shown);
		json_fails(doc, msg);
	}
	memset(name, 'x', 129);
	name[129] = '\0';
	snprintf(doc, sizeof(doc), "{\"lint\": {\"deny_imports\": [\"%s\"]}}", name);
	json_fails(doc, PL "deny_imports[0]: name is longer than 128 bytes");
	name[60] = '-';
	snprintf(doc, sizeof(doc), "{\"lint\": {\"deny_imports\": [\"%s\"]}}", name);
	json_fails(doc, PL "deny_imports[0]: name is longer than 128 bytes");

	set_fails("lint.deny_calls", "eval,os..system", "--deny-call",
		  "--deny-call: " EXP_CALL "\"os..system\"");
	set_fails("lint.deny_calls", "eval,", "--deny-call", "--deny-call: " EXP_CALL "\"\"");
	set_fails("lint.deny_imports", "", "--deny-import", "--deny-import: " EXP_IMPORT "\"\"");
	set_fails("lint.deny_imports", "os, sys", "--deny-import", "--deny-import: " EXP_IMPORT "\" sys\"");
	set_fails("lint.deny_imports", "a\x01", "--deny-import", "--deny-import: " EXP_IMPORT "\"a\\x01\"");
	set_fails("lint.deny_imports", "\xff", "--deny-import", "--deny-import: " EXP_IMPORT "\"\xff\"");
	memset(name, 'y', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	set_fails("lint.deny_calls", name, "--deny-call", "--deny-call: name is longer than 128 bytes");
	set_fails("lint.deny_attrs", "x", "--lint", "--lint: unknown policy field \"lint.deny_attrs\"");
	set_fails("lint", "x", "--lint", "--lint: unknown policy field \"lint\"");
}

static void test_lint_limits(void)
{
	struct ward_policy p;
	char doc[8192], kv[16];
	size_t o = (size_t)snprintf(doc, sizeof(doc), "{\"lint\": {\"deny_imports\": [\"m0\"");
	for (int i = 0; i < 256; i++)
		o += (size_t)snprintf(doc + o, sizeof(doc) - o, ", \"m%d\"", i);
	snprintf(doc + o, sizeof(doc) - o, "]}}");
	ward_policy_init(&p, &err);
	ok(load(&p, doc) == 0 && p.n_lint_deny_imports == 256, "256 names; duplicates do not count");
	ward_policy_release(&p);
	snprintf(doc + o, sizeof(doc) - o, ", \"m256\"]}}");
	json_fails(doc, PL "deny_imports[257]: too many names (at most 256)");

	ward_policy_init(&p, &err);
	int r = 0;
	for (int i = 0; r == 0 && i < 300; i++) {
		snprintf(kv, sizeof(kv), "f%d", i);
		r = set(&p, "lint.deny_calls", kv, "--deny-call");
	}
	ok(r == -EINVAL && p.n_lint_deny_calls == 256, "at most 256 names by flag");
	is_str(err.message, "--deny-call: too many names (at most 256)", "  message");
	ok(set(&p, "lint.deny_calls", "f0,f255", "--deny-call") == 0, "names already listed fit at the limit");
	ward_policy_release(&p);

	/* a failed flag takes back the names it added before the bad one */
	ward_policy_init(&p, &err);
	set(&p, "lint.deny_calls", "eval", "--deny-call");
	ok(set(&p, "lint.deny_calls", "exec,compile,1x", "--deny-call") == -EINVAL &&
	   p.n_lint_deny_calls == 1 && strcmp(p.lint_deny_calls[0], "eval") == 0 &&
	   p.lint_deny_calls[1] == NULL, "a failed list leaves the earlier names only");
	ok(set(&p, "lint.deny_imports", "os,sys,", "--deny-import") == -EINVAL &&
	   p.lint_deny_imports == NULL && p.n_lint_deny_imports == 0, "  and an empty list empty");
	for (int i = 1; i < 255; i++) {
		snprintf(kv, sizeof(kv), "f%d", i);
		set(&p, "lint.deny_calls", kv, "--deny-call");
	}
	ok(set(&p, "lint.deny_calls", "g1,g2", "--deny-call") == -EINVAL && p.n_lint_deny_calls == 255,
	   "a list that passes the limit adds nothing");
	ward_policy_release(&p);

	/* a late error in a document leaves the lists as they were */
	ward_policy_init(&p, &err);
	load(&p, "{\"lint\": {\"deny_calls\": [\"eval\"]}}");
	ok(load(&p, "{\"lint\": {\"deny_calls\": [\"exec\"], \"deny_imports\": [\"os\"]}, \"hostname\": \"-\"}") == -EINVAL &&
	   p.n_lint_deny_calls == 1 && p.n_lint_deny_imports == 0, "a failed document adds no names");
	ward_policy_release(&p);
}

static char **names(const char *const *v, size_t *n)
{
	size_t k = 0;
	while (v[k])
		k++;
	char **a = calloc(k + 1, sizeof(*a));
	for (size_t i = 0; i < k; i++)
		a[i] = v[i] ? strdup(v[i]) : NULL;
	*n = k;
	return a;
}

static void test_lint_validate(void)
{
	struct ward_policy p;
	ward_policy_init(&p, &err);
	p.lint_deny_calls = names((const char *const[]){ "eval", "exec", "eval", NULL },
				  &p.n_lint_deny_calls);
	is_int(ward_policy_validate(&p, &err), -EINVAL, "hand-set duplicate name");
	is_str(err.message, "policy: lint.deny_calls[2]: \"eval\" is listed twice", "  message");
	free(p.lint_deny_calls[2]);
	p.lint_deny_calls[2] = strdup("os..system");
	ward_policy_validate(&p, &err);
	is_str(err.message, "policy: lint.deny_calls[2]: " EXP_CALL "\"os..system\"", "hand-set bad name");
	free(p.lint_deny_calls[2]);
	p.lint_deny_calls[2] = NULL;
	ward_policy_validate(&p, &err);
	is_str(err.message, "policy: lint.deny_calls[2]: expected a function name like \"eval\" or "
	       "\"os.system\"", "hand-set NULL name");
	char *json = ward_policy_to_json(&p);
	ok(json == NULL && ward_policy_lint_json(&p) == NULL, "  prints nothing rather than crash");
	free(json);
	p.n_lint_deny_calls = 2;
	is_int(ward_policy_validate(&p, &err), 0, "hand-set good lists validate");
	ward_policy_release(&p);

	ward_policy_init(&p, &err);
	char kv[16];
	for (int i = 0; i < 256; i++) {
		snprintf(kv, sizeof(kv), "m%d", i);
		set(&p, "lint.deny_imports", kv, "--deny-import");
	}
	char **more = realloc(p.lint_deny_imports, 258 * sizeof(*more));
	more[256] = strdup("extra");
	more[257] = NULL;
	p.lint_deny_imports = more;
	p.n_lint_deny_imports = 257;
	ward_policy_validate(&p, &err);
	is_str(err.message, "policy: lint.deny_imports: too many names (at most 256)", "hand-set 257 names");
	ward_policy_release(&p);
}

static void test_lint_copy_equal(void)
{
	struct ward_policy a, b, c;
	ward_policy_init(&a, &err);
	ward_policy_init(&b, &err);
	set(&a, "lint.deny_calls", "eval,exec", "--deny-call");
	set(&a, "lint.deny_imports", "socket", "--deny-import");
	ok(!ward_policy_equal(&a, &b), "lint makes policies differ");
	set(&b, "lint.deny_imports", "socket", "--deny-import");
	set(&b, "lint.deny_calls", "exec,eval", "--deny-call");
	ok(ward_policy_equal(&a, &b), "the same names in another order are equal");
	is_int(ward_policy_copy(&c, &a, &err), 0, "copy");
	ok(ward_policy_equal(&a, &c) && c.lint_deny_calls != a.lint_deny_calls &&
	   c.lint_deny_calls[0] != a.lint_deny_calls[0] && c.lint_deny_calls[2] == NULL,
	   "  deep, equal, NULL-terminated");
	set(&c, "lint.deny_calls", "compile", "--deny-call");
	ok(!ward_policy_equal(&a, &c) && a.n_lint_deny_calls == 2, "  changing the copy leaves the original");
	ward_policy_release(&c);
	set(&b, "lint.deny_calls", "compile", "--deny-call");
	set(&a, "lint.deny_calls", "getattr", "--deny-call");
	ok(!ward_policy_equal(&a, &b), "same count, different names");
	ward_policy_release(&a);
	ward_policy_release(&b);

	ward_policy_init(&a, &err);
	ward_policy_copy(&c, &a, &err);
	ok(c.lint_deny_calls == NULL && c.lint_deny_imports == NULL, "copy of empty lists is empty");
	ward_policy_release(&c);
	ward_policy_release(&a);
}

static void test_lint_round_trip(void)
{
	struct ward_policy p, q;
	ward_policy_init(&p, &err);
	set(&p, "lint.deny_imports", "subprocess,socket", "--deny-import");
	set(&p, "lint.deny_calls", "os.system,eval,exec", "--deny-call");
	char *json = ward_policy_to_json(&p);
	json_t *root = json ? json_loads(json, 0, NULL) : NULL;
	char *lint = root ? json_dumps(json_object_get(root, "lint"), JSON_COMPACT) : NULL;
	is_str(lint, "{\"deny_imports\":[\"socket\",\"subprocess\"],\"deny_calls\":[\"eval\",\"exec\",\"os.system\"]}",
	       "to_json prints lint sorted");
	free(lint);
	json_decref(root);
	ward_policy_init(&q, &err);
	ok(load(&q, json) == 0 && ward_policy_equal(&p, &q), "loads back to the same policy");
	set(&q, "lint.deny_calls", "exec", "--deny-call");
	char *again = ward_policy_to_json(&q);
	ok(again && strcmp(json, again) == 0, "  prints the same bytes");
	ok(ward_policy_validate(&q, &err) == 0, "  validates");
	free(again);
	free(json);
	ward_policy_release(&q);
	ward_policy_release(&p);

	ward_policy_init(&p, &err);
	set(&p, "lint.deny_imports", "ctypes", "--deny-import");
	json = ward_policy_to_json(&p);
	has_str(json, "\"deny_calls\": []", "an empty list prints when the other is not");
	ward_policy_init(&q, &err);
	ok(load(&q, json) == 0 && ward_policy_equal(&p, &q), "  and round-trips");
	free(json);
	ward_policy_release(&q);
	ward_policy_release(&p);

	ward_policy_init(&p, &err);
	json = ward_policy_to_json(&p);
	ok(json && strstr(json, "lint") == NULL, "no lint section without names");
	free(json);
	ward_policy_release(&p);
}
#undef PL
#undef EXP_IMPORT
#undef EXP_CALL

/* --- overrides only tighten (ward_policy_check_tighter) --- */

struct span {
	const char *name;
	size_t offset, end, align;
};

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* wp_limits[] and wp_members[] together must tile struct ward_policy: a
 * member in neither table (one with no tightening rule) leaves a gap. */
static void test_tighten_covers_struct(void)
{
	struct span spans[64];
	size_t n = 0;
	int good = 1;
	for (size_t i = 0; i < wp_n_limits && n < 64; i++) {
		spans[n++] = (struct span){ wp_limits[i].key, wp_limits[i].offset,
					    wp_limits[i].offset + sizeof(uint64_t), _Alignof(uint64_t) };
		if (!wp_limits[i].tight) {
			good = 0;
			diag("limits.%s has no tightening order", wp_limits[i].key);
		}
	}
	ok(good, "every one of the %zu limits has a tightening order", wp_n_limits);
	for (size_t i = 0; i < wp_n_members && n < 64; i++)
		spans[n++] = (struct span){ wp_members[i].field, wp_members[i].offset,
					    wp_members[i].end, wp_members[i].align };
	qsort(spans, n, sizeof(spans[0]), span_cmp);
	size_t end = 0;
	good = 1;
	for (size_t i = 0; i < n; i++) {
		size_t want = (end + spans[i].align - 1) / spans[i].align * spans[i].align;
		if (spans[i].offset != want) {
			good = 0;
			diag("bytes %zu-%zu of struct ward_policy (before %s) have no tightening rule",
			     end, spans[i].offset, spans[i].name);
		}
		end = spans[i].end;
	}
	size_t a = _Alignof(struct ward_policy);
	if ((end + a - 1) / a * a != sizeof(struct ward_policy)) {
		good = 0;
		diag("bytes %zu-%zu of struct ward_policy have no tightening rule", end,
		     sizeof(struct ward_policy));
	}
	ok(good, "the limits and the %zu other rules cover every byte of struct ward_policy",
	   wp_n_members);
}

/* The operator's policy for the walks: every limit finite where it can
 * be, a mount, a lint name, cgroup required. */
static void tighten_base(struct ward_policy *b)
{
	ward_policy_init(b, &err);
	ok(load(b, "{\"limits\": {\"cpus\": 0.25, \"cpu_time\": \"10s\", \"file_size\": \"8M\"},"
		   " \"mounts\": [{\"host\": \"/usr/share\", \"inside\": \"/data\"}],"
		   " \"env\": {\"PROXY\": \"http://10.0.0.1\"}, \"cgroup\": {\"required\": true},"
		   " \"lint\": {\"deny_imports\": [\"socket\"]},"
		   " \"writable\": [\"/workspace/out\", \"/tmp\"], \"exec\": \"program\","
		   " \"network\": {\"allow\": [\"pypi.test\", \"*.example.test:*\", \"10.0.0.0/8\"],"
		   " \"deny\": [\"bad.example.test\"], \"max_connections\": 16,"
		   " \"max_bytes_out\": \"100M\"}}") == 0, "the operator's policy loads");
}

static int tighter(const struct ward_policy *b, const struct ward_policy *p)
{
	ward_error_clear(&err);
	return ward_policy_check_tighter(b, p, &err);
}

/* Each limit: one step looser is refused naming it, one step tighter
 * passes; where 0 means "no limit", 0 is refused too. */
static void test_tighten_limits(void)
{
	struct ward_policy b, p;
	tighten_base(&b);
	ward_policy_copy(&p, &b, &err);
	is_int(tighter(&b, &p), 0, "the operator's own policy passes");
	ward_policy_release(&p);
	for (size_t i = 0; i < wp_n_limits; i++) {
		const struct wp_limit *l = &wp_limits[i];
		char field[64];
		snprintf(field, sizeof(field), "limits.%s", l->key);
		ward_policy_copy(&p, &b, &err);
		uint64_t *v = (uint64_t *)(void *)((char *)&p + l->offset);
		uint64_t base = *v;
		*v = base + 1;
		ok(tighter(&b, &p) == -EINVAL && strcmp(err.field, field) == 0,
		   "%s one above the operator's is refused, naming the field", field);
		if (err.field[0] && strcmp(err.field, field))
			diag("field '%s', message '%s'", err.field, err.message);
		*v = base - 1;
		ok(tighter(&b, &p) == 0, "%s one below the operator's passes", field);
		if (l->tight != WP_TIGHT_SMALLER) {
			*v = 0;
			ok(tighter(&b, &p) == -EINVAL && strcmp(err.field, field) == 0,
			   "%s 0 (%s) is refused", field, l->zero);
		}
		ward_policy_release(&p);
	}
	ward_policy_copy(&p, &b, &err);
	p.cpus_milli = 64000;
	tighter(&b, &p);
	is_str(err.message, "policy: limits.cpus: 64 is looser than the operator's 0.25; "
	       "an override may only tighten the operator's policy", "the message is in the field's units");
	ward_policy_release(&p);
	/* file_size 0 is the workspace size: looser than 8M unless the workspace is smaller */
	ward_policy_copy(&p, &b, &err);
	p.fsize = 0;
	ok(tighter(&b, &p) == -EINVAL && strcmp(err.field, "limits.file_size") == 0,
	   "file_size 0 (the 64M workspace) is looser than 8M");
	p.workspace_size = 4 * MiB;
	is_int(tighter(&b, &p), 0, "file_size 0 with a 4M workspace is tighter than 8M");
	ward_policy_release(&p);
	ward_policy_release(&b);
}

typedef void (*loosen_fn)(struct ward_policy *p);

static void l_mounts(struct ward_policy *p) { p->binds[0].writable = true; }
static void l_env(struct ward_policy *p) { ward_policy_set(p, "env", "PROXY=http://evil.test", NULL, &err); }
static void l_writable(struct ward_policy *p) { p->writable_only = false; }
static void l_exec(struct ward_policy *p) { p->exec_program_only = false; }
static void l_image(struct ward_policy *p) { free(p->image); p->image = strdup("other"); }
static void l_network(struct ward_policy *p) { ward_policy_set(p, "network.allow", "evil.test", NULL, &err); }
static void l_root(struct ward_policy *p) { p->root_inside = true; }
static void l_cgroup(struct ward_policy *p) { p->require_cgroup = false; }
static void l_degraded(struct ward_policy *p) { p->allow_degrade |= 1u << WARD_LAYER_LANDLOCK; }
static void l_lint(struct ward_policy *p)
{
	free(p->lint_deny_imports[0]);
	free(p->lint_deny_imports);
	p->lint_deny_imports = NULL;
	p->n_lint_deny_imports = 0;
}
static void f_workdir(struct ward_policy *p) { ward_policy_set(p, "workdir", "/tmp", NULL, &err); }
static void f_hostname(struct ward_policy *p) { ward_policy_set(p, "hostname", "box", NULL, &err); }

/* How this test loosens each member. A member of wp_members[] missing
 * here fails the walk: a new member needs a case. */
static const struct {
	const char *field, *refused;  /* refused: the field path named; NULL: free */
	loosen_fn fn;
} loosen[] = {
	{ "mounts", "mounts[0]", l_mounts },
	{ "env", "env.PROXY", l_env },
	{ "workdir", NULL, f_workdir },
	{ "hostname", NULL, f_hostname },
	{ "image", "image", l_image },
	{ "network", "network.allow[3]", l_network },
	{ "user.root", "user.root", l_root },
	{ "cgroup.required", "cgroup.required", l_cgroup },
	{ "allow_degraded", "allow_degraded", l_degraded },
	{ "lint", "lint.deny_imports", l_lint },
	{ "writable", "writable", l_writable },
	{ "exec", "exec", l_exec },
};

static void test_tighten_members(void)
{
	struct ward_policy b, p;
	tighten_base(&b);
	for (size_t i = 0; i < wp_n_members; i++) {
		const struct wp_member *m = &wp_members[i];
		size_t k = 0;
		while (k < sizeof(loosen) / sizeof(loosen[0]) && strcmp(loosen[k].field, m->field))
			k++;
		if (k == sizeof(loosen) / sizeof(loosen[0])) {
			ok(0, "%s: the walk has a case for it", m->field);
			continue;
		}
		ok((loosen[k].refused == NULL) == wp_member_is_free(m),
		   "%s is %s", m->field, loosen[k].refused ? "checked" : "free to change");
		ward_policy_copy(&p, &b, &err);
		loosen[k].fn(&p);
		if (loosen[k].refused)
			ok(tighter(&b, &p) == -EINVAL && strcmp(err.field, loosen[k].refused) == 0 &&
			   strstr(err.message, loosen[k].refused),
			   "%s loosened is refused, naming %s", m->field, loosen[k].refused);
		else
			is_int(tighter(&b, &p), 0, "%s changed passes", m->field);
		ward_policy_release(&p);
	}
	/* tightening members passes */
	ward_policy_copy(&p, &b, &err);
	free(p.binds[0].host);
	free(p.binds[0].inside);
	p.n_binds = 0;
	ward_policy_set(&p, "env", "MINE=1", NULL, &err);
	ward_policy_set(&p, "lint.deny_calls", "eval", NULL, &err);
	ward_policy_set(&p, "lint.deny_imports", "os", NULL, &err);
	is_int(tighter(&b, &p), 0, "fewer mounts, an added variable and added lint names pass");
	ward_policy_release(&p);
	ward_policy_copy(&p, &b, &err);
	ward_policy_set(&p, "env", "PROXY=http://evil", NULL, &err);
	ok(tighter(&b, &p) == -EINVAL && strcmp(err.field, "env.PROXY") == 0 &&
	   strstr(err.message, "may not be changed"), "an operator's variable changed is refused");
	ward_policy_release(&p);
	ward_policy_release(&b);
}

/* --- network: entries, the object, its order --- */

/* text -> canonical text (NULL: the same), or the error message. */
static const struct {
	const char *in, *out, *error;
} rule_cases[] = {
	{ "example.com", NULL, NULL },
	{ "Example.COM.", "example.com", NULL },
	{ "*.example.com", NULL, NULL },
	{ "*.Example.com.:443", "*.example.com:443", NULL },
	{ "example.com:8443", NULL, NULL },
	{ "example.com:*", NULL, NULL },
	{ "xn--bcher-kva.example", NULL, NULL },
	{ "a-b.c0", NULL, NULL },
	{ "10.0.0.0/8", NULL, NULL },
	{ "10.1.2.3", NULL, NULL },
	{ "10.1.2.3/32", "10.1.2.3", NULL },
	{ "10.0.0.0/8:5432", NULL, NULL },
	{ "0.0.0.0/0:*", NULL, NULL },
	{ "2001:db8::/32", NULL, NULL },
	{ "2001:DB8::1", "2001:db8::1", NULL },
	{ "2001:db8::1/128", "2001:db8::1", NULL },
	{ "[2001:db8::1]:443", NULL, NULL },
	{ "[2001:db8::]/32:443", NULL, NULL },
	{ "[2001:db8::1]", "2001:db8::1", NULL },
	{ "[2001:db8::]/32:*", NULL, NULL },
	{ "2001:db8::/32:443", NULL, "F: expected HOST, *.DOMAIN, HOST:PORT, HOST:* or a CIDR, got "
				     "\"2001:db8::/32:443\": an IPv6 address with a port needs "
				     "brackets, as in \"[2001:db8::1]:443\"" },
	{ "a b", NULL, "F: expected HOST, *.DOMAIN, HOST:PORT, HOST:* or a CIDR, got \"a b\"" },
	{ "", NULL, "F: expected HOST, *.DOMAIN, HOST:PORT, HOST:* or a CIDR, got \"\"" },
	{ "127.1", NULL, "F: \"127.1\" is an address, not a host name; write it as a CIDR: "
			 "\"127.0.0.1\" (or \"127.0.0.1/32\")" },
	{ "0x7f000001", NULL, "F: \"0x7f000001\" is an address, not a host name; write it as a "
			      "CIDR: \"127.0.0.1\" (or \"127.0.0.1/32\")" },
	{ "2130706433", NULL, "F: \"2130706433\" is an address, not a host name; write it as a "
			      "CIDR: \"127.0.0.1\" (or \"127.0.0.1/32\")" },
	{ "0177.0.0.1:80", NULL, "F: \"0177.0.0.1:80\" is an address, not a host name; write it "
				 "as a CIDR: \"127.0.0.1\" (or \"127.0.0.1/32\")" },
	{ "1.2.3.4.5", NULL, "F: \"1.2.3.4.5\" is not a host name (its last label is a number); "
			     "write an address as a CIDR like \"10.0.0.1\" or \"10.0.0.0/8\"" },
	{ "10.1.2.3/8", NULL, "F: \"10.1.2.3/8\" has host bits set beyond the /8 prefix; did you "
			      "mean \"10.0.0.0/8\"?" },
	{ "2001:db8::1/32", NULL, "F: \"2001:db8::1/32\" has host bits set beyond the /32 "
				  "prefix; did you mean \"2001:db8::/32\"?" },
	{ "10.0.0.0/33", NULL, "F: \"10.0.0.0/33\": the prefix length must be a number from 0 to 32" },
	{ "10.0.0.0/08", NULL, "F: \"10.0.0.0/08\": the prefix length must be a number from 0 to 32" },
	{ "2001:db8::1:443:*", NULL, "F: expected HOST, *.DOMAIN, HOST:PORT, HOST:* or a CIDR, got "
				     "\"2001:db8::1:443:*\": an IPv6 address with a port needs "
				     "brackets, as in \"[2001:db8::1]:443\"" },
	{ "a.test:80:90", NULL, "F: expected HOST, *.DOMAIN, HOST:PORT, HOST:* or a CIDR, got "
				"\"a.test:80:90\": at most one ':', before the port" },
	{ "[10.0.0.1]:80", NULL, "F: expected HOST, *.DOMAIN, HOST:PORT, HOST:* or a CIDR, got "
				 "\"[10.0.0.1]:80\": brackets are for IPv6 addresses" },
	{ "example.com:0", NULL, "F: \"example.com:0\": the port must be between 1 and 65535 (or \"*\" for every port)" },
	{ "example.com:65536", NULL, "F: \"example.com:65536\": the port must be between 1 and 65535 (or \"*\" for every port)" },
	{ "example.com:http", NULL, "F: expected HOST, *.DOMAIN, HOST:PORT, HOST:* or a CIDR, got "
				    "\"example.com:http\": a port is a number from 1 to 65535, or \"*\"" },
	{ "*", NULL, "F: expected HOST, *.DOMAIN, HOST:PORT, HOST:* or a CIDR, got \"*\": '*' may "
		     "only be the whole first label, as in \"*.example.com\"" },
	{ "a.*.example.com", NULL, "F: expected HOST, *.DOMAIN, HOST:PORT, HOST:* or a CIDR, got "
				   "\"a.*.example.com\": '*' may only be the whole first label, as in \"*.example.com\"" },
	{ "-a.example.com", NULL, "F: expected HOST, *.DOMAIN, HOST:PORT, HOST:* or a CIDR, got "
				  "\"-a.example.com\": a label may not start or end with '-'" },
	{ "a..example.com", NULL, "F: expected HOST, *.DOMAIN, HOST:PORT, HOST:* or a CIDR, got "
				  "\"a..example.com\": a name has an empty label" },
	{ "under_score.test", NULL, "F: expected HOST, *.DOMAIN, HOST:PORT, HOST:* or a CIDR, got "
				    "\"under_score.test\": a name may hold only letters, digits, '-' and '.'" },
	{ "b\xc3\xbc" "cher.example", NULL, "F: expected HOST, *.DOMAIN, HOST:PORT, HOST:* or a CIDR, got "
				  "\"b\xc3\xbc" "cher.example\": an internationalized name must be given in its "
				  "ASCII form (punycode, \"xn--...\")" },
	{ "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.test", NULL,
	  "F: expected HOST, *.DOMAIN, HOST:PORT, HOST:* or a CIDR, got \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...\": "
	  "a label is longer than 63 bytes" },
};

static void test_net_rules(void)
{
	for (size_t i = 0; i < sizeof(rule_cases) / sizeof(rule_cases[0]); i++) {
		struct ward_net_rule r;
		char text[320];
		ward_error_clear(&err);
		int rc = ward_net_rule_parse(rule_cases[i].in, &r, "F", &err);
		if (rule_cases[i].error) {
			ok(rc == -EINVAL && r.host == NULL, "refused: %s", oneline(rule_cases[i].in));
			is_str(err.message, rule_cases[i].error, "  message");
			is_str(err.field, "F", "  field");
			continue;
		}
		const char *want = rule_cases[i].out ? rule_cases[i].out : rule_cases[i].in;
		ok(rc == 0, "parses: %s", rule_cases[i].in);
		if (rc < 0) {
			diag("%s", err.message);
			continue;
		}
		is_str(ward_net_rule_format(&r, text, sizeof(text)), want, "  canonical text");
		struct ward_net_rule back;
		ok(ward_net_rule_parse(text, &back, "F", &err) == 0 && wp_net_rule_equal(&r, &back),
		   "  which parses back to the same rule");
		wp_net_rule_release(&back);
		wp_net_rule_release(&r);
	}
	/* 253 bytes is the longest name; 254 is refused */
	char name[300];
	memset(name, 'a', sizeof(name));
	for (size_t i = 63; i < 260; i += 64)
		name[i] = '.';
	name[253] = '\0';
	struct ward_net_rule r;
	ok(ward_net_rule_parse(name, &r, "F", &err) == 0, "a 253-byte name parses");
	wp_net_rule_release(&r);
	name[253] = 'a';
	name[254] = '\0';
	ok(ward_net_rule_parse(name, &r, "F", &err) == -EINVAL &&
	   strstr(err.message, "a name longer than 253 bytes"), "a 254-byte name is refused");
}

static bool m(const char *rule, const char *name, const char *addr, uint16_t port)
{
	struct ward_net_rule r;
	unsigned char bin[16];
	int family = 0;
	if (ward_net_rule_parse(rule, &r, "F", &err) < 0)
		return false;
	if (addr)
		family = inet_pton(AF_INET, addr, bin) == 1 ? AF_INET :
			 inet_pton(AF_INET6, addr, bin) == 1 ? AF_INET6 : 0;
	bool hit = ward_net_rule_match(&r, name, family, addr ? bin : NULL, port);
	wp_net_rule_release(&r);
	return hit;
}

static void test_net_match(void)
{
	ok(m("example.com", "example.com", NULL, 443), "a host on 443");
	ok(m("example.com", "Example.Com.", NULL, 80), "  on 80, case and trailing dot ignored");
	ok(!m("example.com", "example.com", NULL, 8080), "  not on 8080 (default ports 80, 443)");
	ok(!m("example.com", "www.example.com", NULL, 443), "  not a name below it");
	ok(!m("example.com", "badexample.com", NULL, 443), "  not a name ending like it");
	ok(m("example.com:8080", "example.com", NULL, 8080), "one port");
	ok(!m("example.com:8080", "example.com", NULL, 443), "  only that port");
	ok(m("example.com:*", "example.com", NULL, 22), "every port");
	ok(m("*.example.com", "www.example.com", NULL, 443), "*.d covers one label below");
	ok(m("*.example.com", "a.b.example.com", NULL, 443), "  and more");
	ok(!m("*.example.com", "example.com", NULL, 443), "  not d itself");
	ok(!m("*.example.com", "evilexample.com", NULL, 443), "  not a name ending like it");
	ok(!m("*.example.com", ".example.com", NULL, 443), "  not an empty label");
	ok(!m("example.com", NULL, "93.184.216.34", 443), "a name rule needs a name");
	ok(m("10.0.0.0/8", NULL, "10.9.8.7", 443), "a CIDR covers an address in it");
	ok(!m("10.0.0.0/8", NULL, "11.0.0.1", 443), "  not one outside");
	ok(m("10.0.0.0/8", "db.internal", "10.1.1.1", 80), "  the address a name resolved to");
	ok(!m("10.0.0.0/8", "db.internal", NULL, 80), "  not a name that is not resolved yet");
	ok(m("10.0.0.0/8", "10.2.3.4", NULL, 443), "  an address literal given as the name");
	ok(!m("10.0.0.0/8", "012.2.3.4", NULL, 443), "  but not an octal spelling of one");
	ok(m("10.0.0.0/8", NULL, "::ffff:10.1.2.3", 443), "  an IPv4-mapped IPv6 address");
	ok(!m("10.0.0.0/8:5432", NULL, "10.1.2.3", 443), "  with a port, only that port");
	ok(m("10.0.0.0/8:5432", NULL, "10.1.2.3", 5432), "  which it covers");
	ok(m("2001:db8::/32", NULL, "2001:db8:1::5", 443), "an IPv6 CIDR");
	ok(!m("2001:db8::/32", NULL, "2001:db9::5", 443), "  not outside");
	ok(!m("2001:db8::/32", NULL, "10.0.0.1", 443), "  not an IPv4 address");
	ok(m("10.1.2.0/23", NULL, "10.1.3.255", 443), "a prefix not on a byte boundary");
	ok(!m("10.1.2.0/23", NULL, "10.1.4.0", 443), "  and its end");
	ok(m("0.0.0.0/0:*", NULL, "203.0.113.9", 1), "/0 covers every address");
	ok(!ward_net_rule_match(NULL, "x", 0, NULL, 443), "no rule matches nothing");
}

/* The same policy printed: the network part of to_json. */
static char *net_json(const struct ward_policy *p)
{
	json_t *o = ward_net_policy_to_json(&p->network);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return s;
}

static void test_net_json(void)
{
	struct ward_policy p, q;
	ward_policy_init(&p, &err);
	is_int(p.network.mode, WARD_NET_NONE, "network: mode none by default");
	is_int((long long)p.network.max_connections, 64, "  64 connections");
	is_int((long long)(p.network.max_bytes_out + p.network.max_bytes_in), 0, "  no byte limits");
	char *s = net_json(&p);
	is_str(s, "{\"mode\":\"none\"}", "  prints as mode none alone");
	free(s);
	ok(load(&p, "{\"network\": {\"allow\": [\"PyPI.test\", \"*.example.test:*\", \"10.0.0.0/8\","
		    " \"[2001:db8::]/32:443\", \"pypi.test\"], \"deny\": [\"bad.example.test\"],"
		    " \"max_connections\": 8, \"max_bytes_out\": \"100M\", \"max_bytes_in\": 1073741824}}") == 0,
	   "an allowlist loads: %s", err.message);
	is_int(p.net, WARD_NET_ALLOWLIST, "  allow without mode means allowlist, and net follows");
	is_int((long long)p.network.n_allow, 4, "  a repeated entry is listed once");
	s = net_json(&p);
	is_str(s, "{\"mode\":\"allowlist\",\"allow\":[\"pypi.test\",\"*.example.test:*\",\"10.0.0.0/8\","
		  "\"[2001:db8::]/32:443\"],\"deny\":[\"bad.example.test\"],\"max_connections\":8,"
		  "\"max_bytes_out\":\"100M\",\"max_bytes_in\":\"1G\"}", "  canonical, in the given order");
	free(s);
	/* round trip through the whole policy */
	char *json = ward_policy_to_json(&p);
	ward_policy_init(&q, &err);
	ok(json && load(&q, json) == 0 && ward_policy_equal(&p, &q), "  the policy round-trips");
	ok(ward_policy_validate(&q, &err) == 0, "  and validates");
	char *again = ward_policy_to_json(&q);
	ok(again && json && strcmp(json, again) == 0, "  byte for byte");
	free(again);
	ward_policy_release(&q);
	/* a copy is deep and equal; a change makes it unequal and prints differently */
	ward_policy_copy(&q, &p, &err);
	ok(ward_policy_equal(&p, &q), "  a copy is equal");
	set(&q, "network.allow", "other.test", "--net");
	ok(!ward_policy_equal(&p, &q), "  one more entry is not equal");
	again = ward_policy_to_json(&q);
	ok(again && json && strcmp(json, again) != 0, "  and prints differently (the digest sees it)");
	free(again);
	ward_policy_release(&q);
	ward_policy_copy(&q, &p, &err);
	q.network.max_bytes_in = 5;
	ok(!ward_policy_equal(&p, &q), "  another limit is not equal");
	ward_policy_release(&q);
	/* an override: allow replaces, deny adds, mode none empties */
	ok(load(&p, "{\"network\": {\"allow\": [\"pypi.test\"], \"deny\": [\"x.example.test\"]}}") == 0 &&
	   p.network.n_allow == 1 && p.network.n_deny == 2, "allow replaces the list, deny adds to it");
	ok(load(&p, "{\"network\": {\"mode\": \"none\"}}") == 0 && p.net == WARD_NET_NONE &&
	   p.network.n_allow == 0 && p.network.n_deny == 0, "mode none empties both");
	s = net_json(&p);
	is_str(s, "{\"mode\":\"none\",\"max_connections\":8,\"max_bytes_out\":\"100M\",\"max_bytes_in\":\"1G\"}",
	       "  and prints the limits that differ from the defaults");
	free(s);
	free(json);
	json = ward_policy_to_json(&p);
	ward_policy_init(&q, &err);
	ok(json && load(&q, json) == 0 && ward_policy_equal(&p, &q), "  which round-trips");
	ward_policy_release(&q);
	free(json);
	ok(load(&p, "{\"network\": {\"mode\": \"allowlist\"}}") == 0 && p.net == WARD_NET_ALLOWLIST &&
	   p.network.n_allow == 0, "an empty allowlist (nothing reachable) is valid");
	ok(ward_policy_validate(&p, &err) == 0, "  and validates");
	ward_policy_release(&p);
}

#define NA "policy.json: network.allow"
static void test_net_json_errors(void)
{
	json_fails("{\"network\": {\"allow\": [\"ok.test\", \"ok2.test\", \"a b\"]}}",
		   NA "[2]: expected HOST, *.DOMAIN, HOST:PORT, HOST:* or a CIDR, got \"a b\"");
	is_str(err.field, "network.allow[2]", "  field");
	json_fails("{\"network\": {\"deny\": [\"127.1\"], \"mode\": \"allowlist\"}}",
		   "policy.json: network.deny[0]: \"127.1\" is an address, not a host name; write "
		   "it as a CIDR: \"127.0.0.1\" (or \"127.0.0.1/32\")");
	json_fails("{\"network\": {\"allow\": [1]}}",
		   NA "[0]: expected an entry like \"example.com\", got 1");
	json_fails("{\"network\": {\"allow\": \"a.test\"}}",
		   NA ": expected an array of entries like \"example.com\", got \"a.test\"");
	json_fails("{\"network\": {\"mode\": \"none\", \"allow\": [\"a.test\"]}}",
		   NA ": not allowed with mode \"none\" (no network at all); use mode \"allowlist\"");
	is_str(err.field, "network.allow", "  field");
	json_fails("{\"network\": {\"deny\": [\"a.test\"]}}",
		   "policy.json: network.deny: entries need mode \"allowlist\" (with mode \"none\" "
		   "the sandbox has no network)");
	json_fails("{\"network\": {\"max_connections\": 0}}",
		   "policy.json: network.max_connections: must be between 1 and 4096, got 0");
	json_fails("{\"network\": {\"max_connections\": 4097}}",
		   "policy.json: network.max_connections: must be between 1 and 4096, got 4097");
	json_fails("{\"network\": {\"max_connections\": \"8\"}}",
		   "policy.json: network.max_connections: expected a whole number, got \"8\"");
	json_fails("{\"network\": {\"max_bytes_out\": \"lots\"}}",
		   "policy.json: network.max_bytes_out: expected a size like \"256M\", got \"lots\"");
	json_fails("{\"network\": {\"max_bytes_in\": -1}}",
		   "policy.json: network.max_bytes_in: expected a size like \"256M\", got -1");
	json_fails("{\"network\": {\"max_bytes_in\": \"2048T\"}}",
		   "policy.json: network.max_bytes_in: must be 0 (no limit) or between 1 and 1024T, got \"2048T\"");
	/* 256 entries at most */
	size_t cap = 300 * 16 + 64, o = 0;
	char *doc = malloc(cap);
	o += (size_t)snprintf(doc + o, cap - o, "{\"network\": {\"allow\": [");
	for (int i = 0; i < 257; i++)
		o += (size_t)snprintf(doc + o, cap - o, "%s\"h%d.test\"", i ? "," : "", i);
	snprintf(doc + o, cap - o, "]}}");
	json_fails(doc, NA ": too many entries (at most 256), got 257");
	free(doc);
}
#undef NA

static void test_net_set(void)
{
	struct ward_policy p;
	ward_policy_init(&p, &err);
	ok(set(&p, "network.allow", "a.test,B.test:8080", "--net") == 0 &&
	   p.net == WARD_NET_ALLOWLIST && p.network.mode == WARD_NET_ALLOWLIST &&
	   p.network.n_allow == 2, "network.allow adds and sets allowlist");
	ok(set(&p, "network.allow", "c.test", "--net") == 0 && p.network.n_allow == 3, "  again adds");
	ok(set(&p, "network.deny", "*.evil.test,10.0.0.0/8", "--net") == 0 && p.network.n_deny == 2,
	   "network.deny adds");
	ok(set(&p, "network.allow", "d.test,a b", "--net") == -EINVAL && p.network.n_allow == 3,
	   "a bad entry in the list changes nothing");
	is_str(err.message, "--net: expected HOST, *.DOMAIN, HOST:PORT, HOST:* or a CIDR, got \"a b\"",
	       "  message");
	is_str(err.field, "network.allow", "  field");
	ok(set(&p, "network.max_connections", "8", "--x") == 0 && p.network.max_connections == 8,
	   "network.max_connections");
	ok(set(&p, "network.max_bytes_out", "1M", "--x") == 0 && p.network.max_bytes_out == MiB,
	   "network.max_bytes_out");
	ok(set(&p, "network.max_bytes_in", "0", "--x") == 0 && p.network.max_bytes_in == 0,
	   "network.max_bytes_in 0 is no limit");
	ok(set(&p, "network.max_connections", "0", "--x") == -EINVAL &&
	   strcmp(err.message, "--x: must be between 1 and 4096, got \"0\"") == 0,
	   "max_connections 0 is refused");
	ok(set(&p, "network.colour", "1", "--x") == -EINVAL &&
	   strcmp(err.message, "--x: unknown policy field \"network.colour\"") == 0, "unknown key");
	ok(ward_policy_validate(&p, &err) == 0, "the result validates");
	ok(set(&p, "network", "none", "--net") == 0 && p.net == WARD_NET_NONE &&
	   p.network.n_allow == 0 && p.network.n_deny == 0, "network none empties the lists");
	ok(set(&p, "network.deny", "x.test", "--net") == -EINVAL && p.network.n_deny == 0,
	   "a deny list without an allowlist is refused");
	is_str(err.message, "--net: deny entries need mode \"allowlist\" (allow some hosts first; "
	       "with mode \"none\" the sandbox has no network)", "  message");
	ok(set(&p, "network", "allowlist", "--net") == 0 && set(&p, "network.deny", "x.test", "--net") == 0 &&
	   ward_policy_validate(&p, &err) == 0, "  and kept with one");
	p.network.mode = p.net = WARD_NET_NONE;
	ok(ward_policy_validate(&p, &err) == -EINVAL &&
	   strcmp(err.message, "policy: network.deny: entries need mode \"allowlist\" (with mode "
			       "\"none\" the sandbox has no network)") == 0,
	   "  a hand-filled one under mode none is refused by validate");
	p.network.mode = p.net = WARD_NET_ALLOWLIST;
	/* 256 distinct entries at most; a repeat does not count */
	char list[256 * 12];
	size_t o = 0;
	for (int i = 0; i < 250; i++)
		o += (size_t)snprintf(list + o, sizeof(list) - o, "%sh%d.test", i ? "," : "", i);
	ok(set(&p, "network.allow", list, "--net") == 0 && p.network.n_allow == 250, "250 entries");
	ok(set(&p, "network.allow", "h1.test,h2.test,z1.test,z2.test,z3.test,z4.test,z5.test,z6.test", "--net") == 0 &&
	   p.network.n_allow == 256, "  repeats do not count: 256");
	ok(set(&p, "network.allow", "z7.test", "--net") == -EINVAL &&
	   strcmp(err.message, "--net: too many entries (at most 256)") == 0 && p.network.n_allow == 256,
	   "  the 257th is refused");
	ward_policy_release(&p);
}

static void test_net_validate(void)
{
	struct ward_policy p;
	ward_policy_init(&p, &err);
	set(&p, "network.allow", "a.test,10.0.0.0/8", NULL);
	p.net = WARD_NET_NONE;
	ok(ward_policy_validate(&p, &err) == -EINVAL && strcmp(err.field, "network.mode") == 0,
	   "net and network.mode must agree");
	p.net = WARD_NET_ALLOWLIST;
	p.network.allow[1].addr[3] = 1;  /* host bits */
	ok(ward_policy_validate(&p, &err) == -EINVAL && strcmp(err.field, "network.allow[1]") == 0 &&
	   strstr(err.message, "host bits"), "a hand-filled CIDR with host bits is refused");
	p.network.allow[1].addr[3] = 0;
	p.network.allow[0].host[0] = 'A';
	ok(ward_policy_validate(&p, &err) == -EINVAL && strcmp(err.field, "network.allow[0]") == 0,
	   "a hand-filled name not in its normal form is refused");
	p.network.allow[0].host[0] = 'a';
	p.network.max_connections = 0;
	ok(ward_policy_validate(&p, &err) == -EINVAL &&
	   strcmp(err.field, "network.max_connections") == 0, "max_connections 0 is refused");
	p.network.max_connections = 1;
	p.network.mode = p.net = (enum ward_net_mode)7;
	ok(ward_policy_validate(&p, &err) == -EINVAL && strcmp(err.field, "network.mode") == 0,
	   "an unknown mode is refused");
	p.network.mode = p.net = WARD_NET_ALLOWLIST;
	ok(ward_policy_validate(&p, &err) == 0, "and the policy repaired passes");
	ward_policy_release(&p);
}

static int net_tighter(const char *base, const char *client)
{
	struct ward_net_policy b, c;
	ward_error_clear(&err);
	if (ward_net_policy_from_json(&b, base, strlen(base), "operator", &err) < 0) {
		diag("base: %s", err.message);
		return -100;
	}
	if (ward_net_policy_from_json(&c, client, strlen(client), "client", &err) < 0) {
		diag("client: %s", err.message);
		ward_net_policy_release(&b);
		return -100;
	}
	ward_error_clear(&err);
	int r = ward_net_policy_check_tighter(&b, &c, &err);
	ward_net_policy_release(&b);
	ward_net_policy_release(&c);
	return r;
}

#define OP "{\"allow\": [\"pypi.test\", \"*.example.test\", \"api.test:8443\", \"git.test:*\"," \
	   " \"10.0.0.0/8\", \"[2001:db8::]/32:443\"], \"deny\": [\"bad.example.test\"]," \
	   " \"max_connections\": 16, \"max_bytes_out\": \"100M\"}"
#define DENY ", \"deny\": [\"bad.example.test\"]"
#define KEEP DENY ", \"max_connections\": 16, \"max_bytes_out\": \"100M\""

static void test_net_tighten(void)
{
	static const struct {
		const char *allow; /* the client's allow list, JSON */
		const char *field; /* NULL: tighter */
	} cases[] = {
		{ "[\"pypi.test\"]", NULL },
		{ "[\"pypi.test:443\", \"pypi.test:80\"]", NULL },
		{ "[\"www.example.test\", \"a.b.example.test:443\"]", NULL },
		{ "[\"*.example.test\", \"*.cdn.example.test\"]", NULL },
		{ "[\"api.test:8443\", \"git.test:22\", \"git.test:*\"]", NULL },
		{ "[\"10.1.0.0/16\", \"10.2.3.4:443\", \"[2001:db8:1::]/48:443\"]", NULL },
		{ "[]", NULL },
		{ "[\"pypi.test\", \"evil.test\"]", "network.allow[1]" },
		{ "[\"pypi.test:8080\"]", "network.allow[0]" },
		{ "[\"pypi.test:*\"]", "network.allow[0]" },
		{ "[\"example.test\"]", "network.allow[0]" },
		{ "[\"*.test\"]", "network.allow[0]" },
		{ "[\"www.example.test:8443\"]", "network.allow[0]" },
		{ "[\"api.test\"]", "network.allow[0]" },
		{ "[\"*.pypi.test\"]", "network.allow[0]" },
		{ "[\"11.0.0.0/8\"]", "network.allow[0]" },
		{ "[\"0.0.0.0/0\"]", "network.allow[0]" },
		{ "[\"[2001:db8::]/31:443\"]", "network.allow[0]" },
		{ "[\"2001:db8::1\"]", "network.allow[0]" },
		{ "[\"10.0.0.0/8\", \"10.0.0.1\"]", NULL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char doc[512];
		snprintf(doc, sizeof(doc), "{\"mode\": \"allowlist\", \"allow\": %s" KEEP "}",
			 cases[i].allow);
		int r = net_tighter(OP, doc);
		if (!cases[i].field)
			is_int(r, 0, "within the operator's: %s", cases[i].allow);
		else
			ok(r == -EINVAL && strcmp(err.field, cases[i].field) == 0,
			   "looser, naming %s: %s", cases[i].field, cases[i].allow);
	}
	net_tighter(OP, "{\"allow\": [\"pypi.test\", \"evil.test\"]" KEEP "}");
	is_str(err.message, "policy: network.allow[1]: 'evil.test' is not within the operator's "
	       "allowlist; an override may only tighten the operator's policy", "the message names the entry");
	is_int(net_tighter(OP, "{\"mode\": \"none\"}"), 0, "mode none is always tighter");
	is_int(net_tighter("{\"mode\": \"none\"}", "{\"mode\": \"none\"}"), 0, "  also under none");
	ok(net_tighter("{\"mode\": \"none\"}", "{\"mode\": \"allowlist\"}") == -EINVAL &&
	   strcmp(err.field, "network.mode") == 0, "an allowlist under the operator's none is looser");
	is_str(err.message, "policy: network.mode: \"allowlist\" is looser than the operator's "
	       "\"none\"; an override may only tighten the operator's policy", "  message");
	ok(net_tighter(OP, "{\"allow\": [\"pypi.test\"]}") == -EINVAL &&
	   strcmp(err.field, "network.deny") == 0, "dropping the operator's deny entry is looser");
	is_str(err.message, "policy: network.deny: the operator's 'bad.example.test' may not be "
	       "removed; an override may only tighten the operator's policy", "  message");
	is_int(net_tighter(OP, "{\"allow\": [\"pypi.test\"], \"deny\": [\"bad.example.test\", \"x.test\"],"
				   " \"max_connections\": 16, \"max_bytes_out\": \"100M\"}"),
	       0, "adding deny entries is tighter");
	ok(net_tighter(OP, "{\"allow\": []" DENY ", \"max_connections\": 17, \"max_bytes_out\": \"100M\"}") == -EINVAL &&
	   strcmp(err.field, "network.max_connections") == 0, "more connections is looser");
	is_int(net_tighter(OP, "{\"allow\": []" DENY ", \"max_connections\": 1, \"max_bytes_out\": \"1M\","
			       " \"max_bytes_in\": 5}"),
	       0, "fewer connections, a byte limit where there was none: tighter");
	ok(net_tighter(OP, "{\"allow\": []" DENY ", \"max_connections\": 16, \"max_bytes_out\": 0}") == -EINVAL &&
	   strcmp(err.field, "network.max_bytes_out") == 0, "no limit under 100M is looser");
	is_str(err.message, "policy: network.max_bytes_out: no limit is looser than the operator's "
	       "100M; an override may only tighten the operator's policy", "  message");
	ok(net_tighter(OP, "{\"allow\": []" DENY ", \"max_connections\": 16, \"max_bytes_out\": \"101M\"}") == -EINVAL,
	   "101M under 100M is looser");
}
#undef OP
#undef DENY
#undef KEEP

/* Through the policy: an override loaded on a copy of the operator's. */
static void test_net_override(void)
{
	struct ward_policy b, p;
	ward_policy_init(&b, &err);
	ok(load(&b, "{\"network\": {\"allow\": [\"*.example.test\", \"pypi.test\"],"
		    " \"deny\": [\"bad.example.test\"]}}") == 0, "an operator's allowlist");
	ward_policy_copy(&p, &b, &err);
	ok(load(&p, "{\"network\": {\"allow\": [\"www.example.test\"]}}") == 0, "a client narrows it");
	is_int(ward_policy_check_tighter(&b, &p, &err), 0, "  which is tighter (the deny list stays)");
	ward_policy_release(&p);
	ward_policy_copy(&p, &b, &err);
	ok(load(&p, "{\"network\": {\"allow\": [\"www.example.test\", \"evil.test\"]}}") == 0 &&
	   ward_policy_check_tighter(&b, &p, &err) == -EINVAL, "a client widens it: refused");
	is_str(err.field, "network.allow[1]", "  naming the entry");
	ward_policy_release(&p);
	ward_policy_copy(&p, &b, &err);
	ok(load(&p, "{\"network\": {\"mode\": \"none\"}}") == 0 &&
	   ward_policy_check_tighter(&b, &p, &err) == 0, "a client turns the network off: tighter");
	ward_policy_release(&p);
	ward_policy_release(&b);
	ward_policy_init(&b, &err);
	ward_policy_copy(&p, &b, &err);
	ok(load(&p, "{\"network\": {\"allow\": [\"pypi.test\"]}}") == 0 &&
	   ward_policy_check_tighter(&b, &p, &err) == -EINVAL &&
	   strcmp(err.field, "network.mode") == 0, "an allowlist under the default none: refused");
	ward_policy_release(&p);
	ward_policy_release(&b);
}

static void test_net_from_json(void)
{
	struct ward_net_policy n;
	const char *doc = "{\"allow\": [\"a.test\"], \"max_bytes_in\": \"1M\"}";
	ok(ward_net_policy_from_json(&n, doc, strlen(doc), "body", &err) == 0 &&
	   n.mode == WARD_NET_ALLOWLIST && n.n_allow == 1 && n.max_bytes_in == MiB &&
	   n.max_connections == 64, "ward_net_policy_from_json");
	struct ward_net_policy c;
	ok(ward_net_policy_copy(&c, &n, &err) == 0 && c.allow != n.allow && c.allow[0].host != n.allow[0].host &&
	   wp_net_equal(&c, &n), "ward_net_policy_copy is deep");
	ward_net_policy_release(&c);
	ward_net_policy_release(&n);
	ok(n.allow == NULL && n.n_allow == 0 && n.max_connections == 64, "release leaves the defaults");
	doc = "{\"allow\": [\"a.test\", \"x y\"]}";
	ok(ward_net_policy_from_json(&n, doc, strlen(doc), "body", &err) == -EINVAL && n.allow == NULL,
	   "a bad entry");
	is_str(err.message, "body: network.allow[1]: expected HOST, *.DOMAIN, HOST:PORT, HOST:* or a "
	       "CIDR, got \"x y\"", "  message");
	is_str(err.field, "network.allow[1]", "  field");
	/* an update applied onto the operator's object */
	struct ward_net_policy op;
	doc = "{\"allow\": [\"*.example.test\"], \"deny\": [\"bad.example.test\"], \"max_connections\": 8}";
	ok(ward_net_policy_from_json(&op, doc, strlen(doc), "operator", &err) == 0, "an operator's object");
	ok(ward_net_policy_copy(&n, &op, &err) == 0, "  copied");
	doc = "{\"allow\": [\"www.example.test\"], \"deny\": [\"x.example.test\"]}";
	ok(ward_net_policy_apply_json(&n, doc, strlen(doc), "body", &err) == 0 && n.n_allow == 1 &&
	   n.n_deny == 2 && n.max_connections == 8, "apply_json: allow replaces, deny adds, limits stay");
	is_int(ward_net_policy_check_tighter(&op, &n, &err), 0, "  and the result is within the operator's");
	doc = "{\"allow\": [\"evil.test\", \"a b\"]}";
	ok(ward_net_policy_apply_json(&n, doc, strlen(doc), "body", &err) == -EINVAL && n.n_allow == 1 &&
	   strcmp(n.allow[0].host, "www.example.test") == 0, "  a bad body leaves it unchanged");
	doc = "{\"allow\": [\"evil.test\"]}";
	ok(ward_net_policy_apply_json(&n, doc, strlen(doc), "body", &err) == 0 &&
	   ward_net_policy_check_tighter(&op, &n, &err) == -EINVAL &&
	   strcmp(err.field, "network.allow[0]") == 0, "  a wider one applies, and the check refuses it");
	ward_net_policy_release(&n);
	ward_net_policy_release(&op);
	doc = "{\"allow\": [";
	ok(ward_net_policy_from_json(&n, doc, strlen(doc), "body", &err) == -EINVAL &&
	   strncmp(err.message, "body:1:", 7) == 0, "invalid JSON: %s", err.message);
	doc = "[]";
	ok(ward_net_policy_from_json(&n, doc, strlen(doc), "body", &err) == -EINVAL &&
	   strcmp(err.message, "body: network: expected an object, got an array") == 0,
	   "not an object: %s", err.message);
}

static void test_net_settings(void)
{
	static const struct {
		enum ward_net_setting kind;
		const char *value;
		bool good;
	} cases[] = {
		{ WARD_NET_SETTING_RESOLVE, "pypi.test=127.0.0.1", true },
		{ WARD_NET_SETTING_RESOLVE, "PyPI.test=::1", true },
		{ WARD_NET_SETTING_RESOLVE, "pypi.test=127.1", false },
		{ WARD_NET_SETTING_RESOLVE, "pypi.test=", false },
		{ WARD_NET_SETTING_RESOLVE, "=127.0.0.1", false },
		{ WARD_NET_SETTING_RESOLVE, "pypi.test", false },
		{ WARD_NET_SETTING_RESOLVE, "*.pypi.test=127.0.0.1", false },
		{ WARD_NET_SETTING_RESOLVE, "pypi.test:80=127.0.0.1", false },
		{ WARD_NET_SETTING_RESOLVE, "10.0.0.1=127.0.0.1", false },
		{ WARD_NET_SETTING_RESOLVE, "a b=127.0.0.1", false },
		{ WARD_NET_SETTING_ALLOW_PRIVATE, "127.0.0.0/8", true },
		{ WARD_NET_SETTING_ALLOW_PRIVATE, "127.0.0.1", true },
		{ WARD_NET_SETTING_ALLOW_PRIVATE, "fd00::/8", true },
		{ WARD_NET_SETTING_ALLOW_PRIVATE, "127.0.0.1/8", false },
		{ WARD_NET_SETTING_ALLOW_PRIVATE, "10.0.0.0/8:80", false },
		{ WARD_NET_SETTING_ALLOW_PRIVATE, "local.test", false },
		{ WARD_NET_SETTING_DNS, "127.0.0.1", true },
		{ WARD_NET_SETTING_DNS, "127.0.0.1:5353", true },
		{ WARD_NET_SETTING_DNS, "::1", true },
		{ WARD_NET_SETTING_DNS, "[::1]:5353", true },
		{ WARD_NET_SETTING_DNS, "[::1]", true },
		{ WARD_NET_SETTING_DNS, "127.0.0.1:0", false },
		{ WARD_NET_SETTING_DNS, "127.0.0.1:65536", false },
		{ WARD_NET_SETTING_DNS, "[127.0.0.1]:53", false },
		{ WARD_NET_SETTING_DNS, "[::1]53", false },
		{ WARD_NET_SETTING_DNS, "dns.test", false },
		{ WARD_NET_SETTING_DNS, "", false },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ward_error_clear(&err);
		int r = ward_net_setting_check(cases[i].kind, cases[i].value, "--flag", &err);
		ok(cases[i].good ? r == 0 : r == -EINVAL && strncmp(err.message, "--flag: ", 8) == 0,
		   "setting %d %s: %s", cases[i].kind, cases[i].value, cases[i].good ? "good" : "refused");
		if (r < 0 && cases[i].good)
			diag("%s", err.message);
	}
	ward_net_setting_check(WARD_NET_SETTING_RESOLVE, "pypi.test", "--egress-resolve", &err);
	is_str(err.message, "--egress-resolve: expected NAME=ADDRESS (an IPv4 or IPv6 address), got "
	       "\"pypi.test\"", "the message names the flag");
	ward_net_setting_check(WARD_NET_SETTING_ALLOW_PRIVATE, "127.0.0.1/8", "--egress-allow-private", &err);
	is_str(err.message, "--egress-allow-private: \"127.0.0.1/8\" has host bits set beyond the /8 "
	       "prefix; did you mean \"127.0.0.0/8\"?", "  and says what is wrong");
}

static void test_error_field(void)
{
	struct ward_policy p;
	ward_policy_init(&p, &err);
	load(&p, "{\"limits\": {\"memory\": \"lots\"}}");
	is_str(err.field, "limits.memory", "a JSON error records its field path");
	load(&p, "{\"limits\": {\"colour\": 1}}");
	is_str(err.field, "limits.colour", "an unknown key records its path");
	load(&p, "{\"env\": {\"A\": 1}}");
	is_str(err.field, "env.A", "an env value records its path");
	load(&p, "{\"cgroup\": {\"required\": 1}}");
	is_str(err.field, "cgroup.required", "a nested bool records its path");
	load(&p, "{\"limits\": ");
	is_str(err.field, "", "a syntax error has no field");
	set(&p, "limits.nofile", "1", "--nofile");
	is_str(err.field, "limits.nofile", "a flag records its field");
	p.tmp_inodes = 1;
	ward_error_clear(&err);
	ward_policy_validate(&p, &err);
	is_str(err.field, "limits.tmp_inodes", "validate records its field");
	ward_error_set(&err, 0, NULL, "x");
	is_str(err.field, "", "ward_error_set clears the field");
	ward_policy_release(&p);
}

/* --- permissions --- */

#define PP "policy.json: permissions."

static void test_permissions_map(void)
{
	struct ward_policy p;
	ward_policy_init(&p, &err);
	ok(load(&p, "{\"env\": {\"A\": \"1\", \"B\": \"2\"}, \"mounts\": ["
		    "{\"host\": \"/srv/ro\", \"inside\": \"/ro\"},"
		    "{\"host\": \"/srv/rw\", \"inside\": \"/rw\", \"writable\": true}]}") == 0 &&
	   load(&p, "{\"permissions\": {\"env\": [\"A\", \"NOT_SET\"], \"run\": false, \"ffi\": false,"
		    " \"net\": [\"pypi.org\", \"*.pythonhosted.org\"],"
		    " \"write\": [\"/workspace/out\", \"/tmp\", \"/rw\"], \"read\": [\"/ro\", \"/data\"]}}") == 0,
	   "every switch maps: %s", err.message);
	ok(env_get(&p, "A") && !env_get(&p, "B") && !env_get(&p, "NOT_SET") && env_get(&p, "PATH"),
	   "env: the listed variable stays, the others go, the defaults stay, an unset name stays unset");
	ok(p.exec_program_only, "run false: exec \"program\"");
	ok(p.n_lint_deny_imports == 3 && p.n_lint_deny_calls == 1, "ffi false: the lint names");
	ok(p.network.mode == WARD_NET_ALLOWLIST && p.net == WARD_NET_ALLOWLIST && p.network.n_allow == 2,
	   "net list: the allowlist");
	ok(p.writable_only && p.n_writable == 2 && strcmp(p.writable[0], "/workspace/out") == 0,
	   "write list: the scratch paths are the writable list");
	ok(p.n_binds == 3 && strcmp(p.binds[0].inside, "/ro") == 0 && !p.binds[0].writable &&
	   strcmp(p.binds[1].inside, "/rw") == 0 && p.binds[1].writable &&
	   strcmp(p.binds[2].host, "/data") == 0 && strcmp(p.binds[2].inside, "/data") == 0 &&
	   !p.binds[2].writable, "read/write lists: binds kept, a host path added read-only");
	is_int(ward_policy_validate(&p, &err), 0, "the result validates");
	char *j = ward_policy_to_json(&p);
	has_str(j, "\"exec\": \"program\"", "  the effective policy prints exec");
	has_str(j, "\"writable\": [", "  and writable");
	ok(j && !strstr(j, "permissions"), "  and no shorthand");
	struct ward_policy back;
	ward_policy_init(&back, &err);
	ok(j && load(&back, j) == 0 && ward_policy_equal(&back, &p), "  it loads back to the same policy");
	free(j);
	ward_policy_release(&back);
	ward_policy_release(&p);

	ward_policy_init(&p, &err);
	ok(load(&p, "{\"env\": {\"A\": \"1\"}, \"network\": {\"allow\": [\"a.test\"]}, \"mounts\": ["
		    "{\"host\": \"/srv/ro\", \"inside\": \"/ro\"},"
		    "{\"host\": \"/srv/rw\", \"inside\": \"/rw\", \"writable\": true}]}") == 0 &&
	   load(&p, "{\"permissions\": {\"write\": false, \"read\": false, \"env\": false,"
		    " \"net\": false, \"run\": true, \"ffi\": true}}") == 0, "false everywhere: %s", err.message);
	ok(!env_get(&p, "A") && env_get(&p, "HOME"), "env false: only the defaults");
	ok(p.n_binds == 1 && strcmp(p.binds[0].inside, "/rw") == 0 && !p.binds[0].writable,
	   "read false drops read-only binds; write false makes the rest read-only");
	ok(p.writable_only && p.n_writable == 0, "write false: /workspace and /tmp read-only");
	ok(p.network.mode == WARD_NET_NONE && p.network.n_allow == 0, "net false: mode none");
	ok(!p.exec_program_only && p.n_lint_deny_imports == 0, "run true, ffi true: nothing changes");
	ward_policy_release(&p);

	ward_policy_init(&p, &err);
	ok(load(&p, "{\"permissions\": {\"write\": [\"/workspace/out\"]}}") == 0 &&
	   load(&p, "{\"writable\": null}") == 0 && !p.writable_only && p.n_writable == 0,
	   "writable null: the default again");
	ward_policy_release(&p);
}

static void test_permissions_errors(void)
{
	json_fails("{\"permissions\": 1}", "policy.json: permissions: expected an object, got 1");
	json_fails("{\"permissions\": {\"swim\": true}}", PP "swim: unknown field");
	is_str(err.field, "permissions.swim", "  err->field");
	has_str(err.hint, "env, read, write, net, run, ffi", "  hint lists the switches");
	json_fails("{\"permissions\": {\"env\": \"A\"}}",
		   PP "env: expected true, false or an array of variable names, got \"A\"");
	json_fails("{\"permissions\": {\"env\": [\"A\", \"1B\"]}}",
		   PP "env[1]: expected a variable name like \"API_URL\", got \"1B\"");
	is_str(err.field, "permissions.env[1]", "  err->field");
	json_fails("{\"permissions\": {\"env\": [3]}}", PP "env[0]: expected variable names, got 3");
	json_fails("{\"permissions\": {\"read\": [\"rel\"]}}",
		   PP "read[0]: expected an absolute path, got \"rel\"");
	json_fails("{\"permissions\": {\"read\": [\"/workspace/in\"]}}",
		   PP "read[0]: \"/workspace/in\": /workspace and /tmp are always readable; "
		   "list host paths to mount read-only");
	json_fails("{\"permissions\": {\"write\": {}}}",
		   PP "write: expected true, false or an array of absolute paths, got an object");
	json_fails("{\"permissions\": {\"net\": true}}",
		   PP "net: expected false or an array of allowlist entries like \"pypi.org\": "
		   "true (every destination) is not offered; list them");
	json_fails("{\"permissions\": {\"net\": [\"ok.test\", \"bad host\"]}}",
		   PP "net[1]: expected HOST, *.DOMAIN, HOST:PORT, HOST:* or a CIDR, got \"bad host\"");
	is_str(err.field, "permissions.net[1]", "  a bad entry is named");
	json_fails("{\"permissions\": {\"run\": \"no\"}}", PP "run: expected true or false, got \"no\"");
	json_fails("{\"permissions\": {\"ffi\": []}}", PP "ffi: expected true or false, got an array");
	json_fails("{\"writable\": [\"/etc\"]}",
		   "policy.json: writable[0]: \"/etc\" is not at or below /workspace or /tmp");
	json_fails("{\"writable\": 1}", "policy.json: writable: expected null or an array of paths, got 1");
	json_fails("{\"exec\": \"none\"}", "policy.json: exec: expected \"any\" or \"program\", got \"none\"");
	/* conflicts name both fields */
	json_fails("{\"network\": {\"mode\": \"none\"}, \"permissions\": {\"net\": false}}",
		   PP "net: conflicts with \"network\" in the same document: give one or the other");
	is_str(err.field, "permissions.net", "  err->field");
	json_fails("{\"permissions\": {\"env\": false}, \"env\": {\"A\": \"1\"}}",
		   PP "env: conflicts with \"env\" in the same document: give one or the other");
	json_fails("{\"permissions\": {\"run\": false}, \"exec\": \"any\"}",
		   PP "run: conflicts with \"exec\" in the same document: give one or the other");
	json_fails("{\"writable\": [], \"permissions\": {\"write\": true}}",
		   PP "write: conflicts with \"writable\" in the same document: give one or the other");
	/* landlock enforces both: it may not degrade under them */
	struct ward_policy p;
	ward_policy_init(&p, &err);
	ok(load(&p, "{\"permissions\": {\"run\": false}, \"allow_degraded\": [\"landlock\"]}") == 0 &&
	   ward_policy_validate(&p, &err) == -EINVAL && strcmp(err.field, "exec") == 0,
	   "run false with a degradable landlock is refused");
	is_str(err.message, "policy: exec: \"program\" is enforced by landlock, but allow_degraded "
	       "lists \"landlock\"", "  message");
	ward_policy_release(&p);
}

/* A client's switches on the operator's policy: narrowing passes,
 * widening fails naming the field. */
static void test_permissions_tighten(void)
{
	struct ward_policy b, p;
	ward_policy_init(&b, &err);
	ok(load(&b, "{\"env\": {\"TOKEN\": \"t\", \"URL\": \"u\"},"
		    " \"network\": {\"allow\": [\"pypi.org\", \"files.test\"]},"
		    " \"mounts\": [{\"host\": \"/srv/data\", \"inside\": \"/data\", \"writable\": true}]}") == 0,
	   "the operator's policy");
	static const struct {
		const char *client, *field;  /* field NULL: passes */
	} cases[] = {
		{ "{\"permissions\": {\"env\": [\"URL\"]}}", NULL },
		{ "{\"permissions\": {\"env\": false}}", NULL },
		{ "{\"permissions\": {\"env\": true}}", NULL },
		{ "{\"permissions\": {\"net\": [\"pypi.org\"]}}", NULL },
		{ "{\"permissions\": {\"net\": false}}", NULL },
		{ "{\"permissions\": {\"net\": [\"evil.test\"]}}", "network.allow[0]" },
		{ "{\"permissions\": {\"read\": false, \"write\": false}}", NULL },
		{ "{\"permissions\": {\"write\": [\"/workspace/out\"]}}", NULL },
		{ "{\"permissions\": {\"write\": [\"/data\"]}}", NULL },
		{ "{\"permissions\": {\"read\": [\"/opt/ssl\"]}}", "mounts[1]" },
		{ "{\"permissions\": {\"write\": [\"/srv\"]}}", "mounts[1]" },
		{ "{\"permissions\": {\"run\": false, \"ffi\": false}}", NULL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ward_policy_copy(&p, &b, &err);
		int r = load(&p, cases[i].client);
		if (r == 0)
			r = tighter(&b, &p);
		if (!cases[i].field)
			is_int(r, 0, "tighter: %s", cases[i].client);
		else
			ok(r == -EINVAL && strcmp(err.field, cases[i].field) == 0,
			   "looser, naming %s: %s (%s)", cases[i].field, cases[i].client, err.message);
		ward_policy_release(&p);
	}
	/* the operator's own switches bind the client's */
	ward_policy_release(&b);
	ward_policy_init(&b, &err);
	ok(load(&b, "{\"permissions\": {\"run\": false, \"write\": [\"/workspace/out\"]}}") == 0,
	   "an operator policy with switches");
	ward_policy_copy(&p, &b, &err);
	ok(load(&p, "{\"exec\": \"any\"}") == 0 && tighter(&b, &p) == -EINVAL &&
	   strcmp(err.field, "exec") == 0, "a client cannot turn run back on");
	ward_policy_release(&p);
	ward_policy_copy(&p, &b, &err);
	ok(load(&p, "{\"writable\": [\"/workspace\"]}") == 0 && tighter(&b, &p) == -EINVAL &&
	   strcmp(err.field, "writable[0]") == 0, "nor write outside the operator's writable paths");
	is_str(err.message, "policy: writable[0]: \"/workspace\" is not within the operator's "
	       "writable paths; an override may only tighten the operator's policy", "  message");
	ward_policy_release(&p);
	ward_policy_copy(&p, &b, &err);
	ok(load(&p, "{\"permissions\": {\"write\": [\"/workspace/out/sub\"]}}") == 0 &&
	   tighter(&b, &p) == 0, "a path below the operator's is tighter");
	ward_policy_release(&p);
	ward_policy_release(&b);
}

int main(void)
{
	test_layers();
	test_defaults();
	test_parse_size();
	test_parse_duration();
	for (size_t i = 0; i < sizeof(limit_cases) / sizeof(limit_cases[0]); i++)
		test_limit(&limit_cases[i]);
	test_limits_misc();
	test_unknown_keys();
	test_syntax();
	test_mounts_json();
	test_mounts_json_errors();
	test_mounts_limit();
	test_mounts_flags();
	test_env();
	test_env_limits();
	test_strings();
	test_bools();
	test_degraded();
	test_set_misc();
	test_overrides();
	test_unchanged_on_error();
	test_validate();
	test_round_trip();
	test_lint_good();
	test_lint_errors();
	test_lint_limits();
	test_lint_validate();
	test_lint_copy_equal();
	test_lint_round_trip();
	test_tighten_covers_struct();
	test_tighten_limits();
	test_tighten_members();
	test_error_field();
	test_net_rules();
	test_net_match();
	test_net_json();
	test_net_json_errors();
	test_net_set();
	test_net_validate();
	test_net_tighten();
	test_net_override();
	test_net_from_json();
	test_net_settings();
	test_permissions_map();
	test_permissions_errors();
	test_permissions_tighten();
	return tap_done();
}
