/* src/cli/options.c — table-driven parsing of `ward run` options.
 * Each flag is one table row: its names, whether it takes a value, and the
 * policy field it sets. Parsing never touches the filesystem; building the
 * policy reads only the --policy file. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "options.h"

enum kind { FLAG_FIELD, FLAG_BOOL, FLAG_POLICY, FLAG_VERBOSE };

struct flag {
	const char *name;     /* long name, "--memory" */
	char short_name;      /* 0 if none */
	enum kind kind;
	const char *field;    /* FLAG_FIELD: policy field */
	size_t bool_offset;   /* FLAG_BOOL: offset of the bool in ward_cli_run */
};

#define B(member) offsetof(struct ward_cli_run, member)

static const struct flag flags[] = {
	{ "--policy", 0, FLAG_POLICY, NULL, 0 },
	{ "--memory", 0, FLAG_FIELD, "limits.memory", 0 },
	{ "--pids", 0, FLAG_FIELD, "limits.pids", 0 },
	{ "--timeout", 0, FLAG_FIELD, "limits.timeout", 0 },
	{ "--cpu-time", 0, FLAG_FIELD, "limits.cpu_time", 0 },
	{ "--cpus", 0, FLAG_FIELD, "limits.cpus", 0 },
	{ "--workspace-size", 0, FLAG_FIELD, "limits.workspace_size", 0 },
	{ "--output-limit", 0, FLAG_FIELD, "limits.output", 0 },
	{ "--ro", 0, FLAG_FIELD, "mounts.ro", 0 },
	{ "--rw", 0, FLAG_FIELD, "mounts.rw", 0 },
	{ "--env", 'e', FLAG_FIELD, "env", 0 },
	{ "--workdir", 'w', FLAG_FIELD, "workdir", 0 },
	{ "--net", 0, FLAG_FIELD, "network", 0 },
	{ "--json", 0, FLAG_BOOL, NULL, B(json) },
	{ "--quiet", 'q', FLAG_BOOL, NULL, B(quiet) },
	{ "--verbose", 'v', FLAG_VERBOSE, NULL, 0 },
	{ "--help", 'h', FLAG_BOOL, NULL, B(help) },
	{ "--version", 'V', FLAG_BOOL, NULL, B(version) },
	{ "--stdin", 'i', FLAG_BOOL, NULL, B(stdin) },
	{ "--print-policy", 0, FLAG_BOOL, NULL, B(print_policy) },
};

const char ward_cli_run_usage[] =
	"usage: ward run [OPTIONS] -- PROGRAM [ARG...]\n"
	"\n"
	"Runs PROGRAM in a fresh sandbox. Exit status: the program's; 128+N when it\n"
	"was killed by signal N; 125 when the sandbox could not be set up.\n"
	"\n"
	"  --policy FILE          policy file (JSON); flags override it\n"
	"  --memory SIZE          memory limit (default 512M)\n"
	"  --pids N               process limit (default 128)\n"
	"  --timeout SECONDS      wall-time limit (default 30)\n"
	"  --cpu-time SECONDS     CPU-time limit (default none)\n"
	"  --cpus N               CPU quota, e.g. 0.5 (default none)\n"
	"  --workspace-size SIZE  size of /workspace (default 64M)\n"
	"  --output-limit SIZE    stdout+stderr kept (default 16M)\n"
	"  --ro HOST[:INSIDE]     bind a host path read-only\n"
	"  --rw HOST[:INSIDE]     bind a host path read-write\n"
	"  -e, --env NAME=VALUE   set a variable (nothing of the host leaks)\n"
	"  -w, --workdir DIR      working directory (default /workspace)\n"
	"  --net none             network mode (only loopback)\n"
	"  -i, --stdin            relay ward's stdin (default /dev/null)\n"
	"  --json                 print the verdict as one JSON object\n"
	"  --print-policy         print the effective policy as JSON and exit\n"
	"  -q, --quiet            no messages from ward itself\n"
	"  -v, --verbose          more messages (repeatable)\n"
	"  -h, --help             this text\n"
	"  -V, --version          ward's version\n";

static const struct flag *find_long(const char *name, size_t len)
{
	for (size_t i = 0; i < ARRAY_SIZE(flags); i++)
		if (strlen(flags[i].name + 2) == len && strncmp(flags[i].name + 2, name, len) == 0)
			return &flags[i];
	return NULL;
}

static const struct flag *find_short(char c)
{
	for (size_t i = 0; i < ARRAY_SIZE(flags); i++)
		if (flags[i].short_name == c)
			return &flags[i];
	return NULL;
}

static bool takes_value(const struct flag *f)
{
	return f->kind == FLAG_FIELD || f->kind == FLAG_POLICY;
}

static int record(struct ward_cli_run *o, const struct flag *f, const char *value,
		  const char *typed, struct ward_error *err)
{
	switch (f->kind) {
	case FLAG_POLICY:
		if (o->policy_file)
			return ward_error_set(err, EINVAL, "cli", "%s: given twice", typed);
		o->policy_file = value;
		return 0;
	case FLAG_FIELD:
		if (o->n_overrides >= WARD_CLI_MAX_OVERRIDES)
			return ward_error_set(err, E2BIG, "cli", "%s: too many options", typed);
		o->overrides[o->n_overrides++] = (struct ward_cli_override){ f->field, value, typed };
		return 0;
	case FLAG_BOOL:
		*(bool *)((char *)o + f->bool_offset) = true;
		return 0;
	case FLAG_VERBOSE:
		o->verbose++;
		return 0;
	}
	return 0;
}

/* One argument that starts with '-': "--name", "--name=value", "-x",
 * "-xVALUE" or a cluster of boolean short flags. Returns how many argv
 * entries it used, or -EINVAL. */
static int parse_one(int argc, char **argv, int i, struct ward_cli_run *o, struct ward_error *err)
{
	const char *a = argv[i];
	if (a[1] == '-') {
		const char *name = a + 2, *eq = strchr(name, '=');
		const struct flag *f = find_long(name, eq ? (size_t)(eq - name) : strlen(name));
		if (!f)
			return ward_error_set(err, EINVAL, "cli", "unknown option '%s' (see 'ward run --help')", a);
		if (!takes_value(f)) {
			if (eq)
				return ward_error_set(err, EINVAL, "cli", "%s takes no value", f->name);
			return record(o, f, NULL, f->name, err) < 0 ? -EINVAL : 1;
		}
		if (eq)
			return record(o, f, eq + 1, f->name, err) < 0 ? -EINVAL : 1;
		if (i + 1 >= argc)
			return ward_error_set(err, EINVAL, "cli", "%s: expected a value", f->name);
		return record(o, f, argv[i + 1], f->name, err) < 0 ? -EINVAL : 2;
	}
	for (const char *c = a + 1; *c; c++) {
		const struct flag *f = find_short(*c);
		if (!f)
			return ward_error_set(err, EINVAL, "cli", "unknown option '-%c' (see 'ward run --help')", *c);
		if (!takes_value(f)) {
			if (record(o, f, NULL, f->name, err) < 0)
				return -EINVAL;
			continue;
		}
		if (c[1])
			return record(o, f, c + 1, f->name, err) < 0 ? -EINVAL : 1;
		if (i + 1 >= argc)
			return ward_error_set(err, EINVAL, "cli", "%s: expected a value", f->name);
		return record(o, f, argv[i + 1], f->name, err) < 0 ? -EINVAL : 2;
	}
	return 1;
}

int ward_cli_parse_run(int argc, char **argv, struct ward_cli_run *o, struct ward_error *err)
{
	memset(o, 0, sizeof(*o));
	int i = 1;
	while (i < argc) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (a[0] != '-' || a[1] == '\0')
			break; /* the program starts here */
		int used = parse_one(argc, argv, i, o, err);
		if (used < 0)
			return used;
		i += used;
	}
	if (i < argc)
		o->argv = &argv[i];
	if (!o->argv && !o->help && !o->version && !o->print_policy)
		return ward_error_set(err, EINVAL, "cli", "no program given (usage: ward run [OPTIONS] -- PROGRAM [ARG...])");
	return 0;
}

/* On the command line a relative HOST in "HOST[:INSIDE]" means relative to
 * the current directory (the policy file itself takes absolute paths only). */
static int absolute_host(const char *value, char *out, size_t len, const char *flag,
			 struct ward_error *err)
{
	const char *colon = strchr(value, ':');
	size_t n = colon ? (size_t)(colon - value) : strlen(value);
	char host[PATH_MAX], resolved[PATH_MAX];
	if (n == 0 || n >= sizeof(host))
		return ward_error_set(err, EINVAL, "cli", "%s: expected HOST[:INSIDE]", flag);
	memcpy(host, value, n);
	host[n] = '\0';
	if (!realpath(host, resolved))
		return ward_error_set(err, errno, "cli", "%s: unable to resolve '%s'", flag, host);
	if ((size_t)snprintf(out, len, "%s%s", resolved, colon ? colon : "") >= len)
		return ward_error_set(err, ENAMETOOLONG, "cli", "%s: path too long", flag);
	return 0;
}

int ward_cli_build_policy(const struct ward_cli_run *o, struct ward_policy *p,
			  struct ward_error *err)
{
	int r = ward_policy_init(p, err);
	if (r < 0)
		return r;
	if (o->policy_file) {
		_cleanup_free_ char *buf = NULL;
		size_t len = 0;
		r = ward_read_file(o->policy_file, 1 << 20, &buf, &len);
		if (r < 0)
			return ward_error_set(err, -r, "policy", "unable to read '%s'", o->policy_file);
		r = ward_policy_load_json(p, buf, len, o->policy_file, err);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < o->n_overrides; i++) {
		const struct ward_cli_override *ov = &o->overrides[i];
		char abs[PATH_MAX + 2048];
		const char *value = ov->value;
		if (strncmp(ov->field, "mounts.", 7) == 0 && value[0] != '/') {
			r = absolute_host(value, abs, sizeof(abs), ov->flag, err);
			if (r < 0)
				return r;
			value = abs;
		}
		r = ward_policy_set(p, ov->field, value, ov->flag, err);
		if (r < 0)
			return r;
	}
	return ward_policy_validate(p, err);
}
