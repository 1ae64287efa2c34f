/* src/cli/options.c — table-driven parsing of `ward run` options.
 * Each flag is one table row: its names, whether it takes a value, and the
 * policy field it sets. Parsing never touches the filesystem; building the
 * policy reads only the --policy file. */
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/util.h"
#include "options.h"

enum kind {
	FLAG_FIELD,    /* sets a policy field */
	FLAG_BOOL,     /* sets a bool member */
	FLAG_STRING,   /* sets a string member (once) */
	FLAG_POLICY,
	FLAG_VERBOSE,
	FLAG_CELL,     /* -c CODE: a cell */
	FLAG_CELLFILE, /* -f FILE: a cell from a file (exec), the tool file (call) */
	FLAG_FILEIN,   /* --file HOST:PATH */
	FLAG_NET,      /* --net none | allow:LIST | deny:LIST */
	FLAG_EGRESS,   /* a repeatable --egress-* setting, checked */
	FLAG_FILE,     /* sets a char * member to a file name (once) */
};

enum { RUN = 1 << WARD_CLI_RUN, EXEC = 1 << WARD_CLI_EXEC, CALL = 1 << WARD_CLI_CALL,
       ALL = RUN | EXEC | CALL, CODE = EXEC | CALL };

struct flag {
	const char *name;     /* long name, "--memory" */
	char short_name;      /* 0 if none */
	enum kind kind;
	const char *field;    /* FLAG_FIELD: policy field */
	size_t offset;        /* FLAG_BOOL/FLAG_STRING/FLAG_FILE/FLAG_EGRESS: member of ward_cli_run */
	unsigned modes;       /* where the flag exists */
	size_t count;         /* FLAG_EGRESS: the member counting the values */
	enum ward_net_setting setting;  /* FLAG_EGRESS: how a value is checked */
};

#define B(member) offsetof(struct ward_cli_run, member)

static const struct flag flags[] = {
	{ "--lang", 'l', FLAG_STRING, NULL, B(lang), CODE },
	{ "--code", 'c', FLAG_CELL, NULL, 0, EXEC },
	{ "--cell-file", 'f', FLAG_CELLFILE, NULL, 0, CODE },
	{ "--file", 0, FLAG_FILEIN, NULL, 0, CODE },
	{ "--artifacts", 0, FLAG_STRING, NULL, B(artifacts_dir), CODE },
	{ "--function", 0, FLAG_STRING, NULL, B(function), CALL },
	{ "--args", 0, FLAG_STRING, NULL, B(args), CALL },
	{ "--keep-going", 0, FLAG_BOOL, NULL, B(keep_going), EXEC },
	{ "--policy", 0, FLAG_POLICY, NULL, 0, ALL },
	{ "--memory", 0, FLAG_FIELD, "limits.memory", 0, ALL },
	{ "--pids", 0, FLAG_FIELD, "limits.pids", 0, ALL },
	{ "--timeout", 0, FLAG_FIELD, "limits.timeout", 0, ALL },
	{ "--cpu-time", 0, FLAG_FIELD, "limits.cpu_time", 0, ALL },
	{ "--cpus", 0, FLAG_FIELD, "limits.cpus", 0, ALL },
	{ "--workspace-size", 0, FLAG_FIELD, "limits.workspace_size", 0, ALL },
	{ "--output-limit", 0, FLAG_FIELD, "limits.output", 0, ALL },
	{ "--ro", 0, FLAG_FIELD, "mounts.ro", 0, ALL },
	{ "--rw", 0, FLAG_FIELD, "mounts.rw", 0, ALL },
	{ "--env", 'e', FLAG_FIELD, "env", 0, ALL },
	{ "--workdir", 'w', FLAG_FIELD, "workdir", 0, ALL },
	{ "--net", 0, FLAG_NET, NULL, 0, ALL },
	{ "--egress-resolve", 0, FLAG_EGRESS, NULL, B(egress_resolve), RUN | EXEC,
	  B(n_egress_resolve), WARD_NET_SETTING_RESOLVE },
	{ "--egress-allow-private", 0, FLAG_EGRESS, NULL, B(egress_allow_private), RUN | EXEC,
	  B(n_egress_allow_private), WARD_NET_SETTING_ALLOW_PRIVATE },
	{ "--egress-dns", 0, FLAG_EGRESS, NULL, B(egress_dns), RUN | EXEC,
	  B(n_egress_dns), WARD_NET_SETTING_DNS },
	{ "--egress-ca", 0, FLAG_FILE, NULL, B(egress_ca), RUN | EXEC },
	{ "--json", 0, FLAG_BOOL, NULL, B(json), ALL },
	{ "--quiet", 'q', FLAG_BOOL, NULL, B(quiet), ALL },
	{ "--verbose", 'v', FLAG_VERBOSE, NULL, 0, ALL },
	{ "--help", 'h', FLAG_BOOL, NULL, B(help), ALL },
	{ "--version", 'V', FLAG_BOOL, NULL, B(version), ALL },
	{ "--stdin", 'i', FLAG_BOOL, NULL, B(stdin), RUN },
	{ "--print-policy", 0, FLAG_BOOL, NULL, B(print_policy), ALL },
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
	"  --net none             no network, only loopback (the default)\n"
	"  --net allow:HOST[:PORT],...\n"
	"                         reach these hosts through ward's egress proxy\n"
	"                         (repeatable): HOST, *.DOMAIN, HOST:PORT, HOST:*,\n"
	"                         a CIDR; ports 80 and 443 unless given\n"
	"  --net deny:HOST[:PORT],...\n"
	"                         refuse these even where an allow entry matches\n"
	"  --egress-resolve NAME=IP\n"
	"                         the proxy resolves NAME to IP only (repeatable)\n"
	"  --egress-allow-private CIDR\n"
	"                         let the proxy reach this private, loopback or\n"
	"                         link-local range (repeatable; refused otherwise)\n"
	"  --egress-dns ADDR[:PORT]\n"
	"                         the proxy's DNS server (repeatable; default: the\n"
	"                         host's /etc/resolv.conf)\n"
	"  --egress-ca FILE       extra CA (PEM) trusted for upstream TLS\n"
	"  -i, --stdin            relay ward's stdin (default /dev/null)\n"
	"  --json                 print the verdict as one JSON object\n"
	"  --print-policy         print the effective policy as JSON and exit\n"
	"  -q, --quiet            no messages from ward itself\n"
	"  -v, --verbose          more messages (repeatable)\n"
	"  -h, --help             this text\n"
	"  -V, --version          ward's version\n";

static const struct flag *find_long(enum ward_cli_mode mode, const char *name, size_t len)
{
	for (size_t i = 0; i < ARRAY_SIZE(flags); i++)
		if ((flags[i].modes & (1u << mode)) && strlen(flags[i].name + 2) == len &&
		    strncmp(flags[i].name + 2, name, len) == 0)
			return &flags[i];
	return NULL;
}

static const struct flag *find_short(enum ward_cli_mode mode, char c)
{
	for (size_t i = 0; i < ARRAY_SIZE(flags); i++)
		if ((flags[i].modes & (1u << mode)) && flags[i].short_name == c)
			return &flags[i];
	return NULL;
}

static const char *const mode_names[] = { "run", "exec", "call" };

static bool takes_value(const struct flag *f)
{
	return f->kind != FLAG_BOOL && f->kind != FLAG_VERBOSE;
}

/* A policy error (code 0) as a usage error naming the flag. */
static int usage_error(struct ward_error *err)
{
	char msg[WARD_ERROR_MSG_MAX];
	ward_strlcpy(msg, err->message, sizeof(msg));
	return ward_error_set(err, EINVAL, "cli", "%s", msg);
}

static int add_override(struct ward_cli_run *o, const char *field, const char *value,
			const char *typed, struct ward_error *err)
{
	if (o->n_overrides >= WARD_CLI_MAX_OVERRIDES)
		return ward_error_set(err, E2BIG, "cli", "%s: too many options", typed);
	o->overrides[o->n_overrides++] = (struct ward_cli_override){ field, value, typed };
	return 0;
}

/* "none", "allow:a.test,b.test:8080" or "deny:...": every entry is checked
 * now, so a typo is reported before anything else happens. */
static int record_net(struct ward_cli_run *o, const char *value, const char *typed,
		      struct ward_error *err)
{
	static const struct { const char *prefix, *field; } forms[] = {
		{ "allow:", "network.allow" }, { "deny:", "network.deny" },
	};
	if (strcmp(value, "none") == 0)
		return add_override(o, "network", value, typed, err);
	for (size_t i = 0; i < ARRAY_SIZE(forms); i++) {
		size_t n = strlen(forms[i].prefix);
		if (strncmp(value, forms[i].prefix, n) != 0)
			continue;
		for (const char *c = value + n;;) {
			char entry[320];
			size_t len = strcspn(c, ",");
			struct ward_net_rule r;
			ward_strlcpy(entry, c, len + 1 < sizeof(entry) ? len + 1 : sizeof(entry));
			if (len >= sizeof(entry))
				entry[sizeof(entry) - 2] = '?';  /* too long: the parser says so */
			int rc = ward_net_rule_parse(entry, &r, typed, err);
			free(r.host);
			if (rc < 0)
				return rc == -ENOMEM ? rc : usage_error(err);
			c += len;
			if (!*c++)
				break;
		}
		return add_override(o, forms[i].field, value + n, typed, err);
	}
	return ward_error_set(err, EINVAL, "cli",
			      "%s: expected none, allow:HOST[:PORT],... or deny:HOST[:PORT],..., got '%s'",
			      typed, value);
}

static int record_egress(struct ward_cli_run *o, const struct flag *f, const char *value,
			 const char *typed, struct ward_error *err)
{
	char ***list = (char ***)(void *)((char *)o + f->offset);
	size_t *n = (size_t *)(void *)((char *)o + f->count);
	if (*n >= WARD_CLI_MAX_EGRESS)
		return ward_error_set(err, E2BIG, "cli", "%s: given more than %d times", typed,
				      WARD_CLI_MAX_EGRESS);
	if (ward_net_setting_check(f->setting, value, typed, err) < 0)
		return usage_error(err);
	_Static_assert(WARD_NET_SETTING_DNS < ARRAY_SIZE(o->egress_store), "a list per setting");
	if (!*list)
		*list = o->egress_store[f->setting];
	/* argv's own string: the caller's argv is char ** */
	(*list)[(*n)++] = (char *)(uintptr_t)value;
	return 0;
}

static int record(struct ward_cli_run *o, const struct flag *f, const char *value,
		  const char *typed, struct ward_error *err)
{
	switch (f->kind) {
	case FLAG_NET:
		return record_net(o, value, typed, err);
	case FLAG_EGRESS:
		return record_egress(o, f, value, typed, err);
	case FLAG_FILE: {
		char **slot = (char **)(void *)((char *)o + f->offset);
		if (*slot)
			return ward_error_set(err, EINVAL, "cli", "%s: given twice", typed);
		if (!value[0])
			return ward_error_set(err, EINVAL, "cli", "%s: expected a file name", typed);
		*slot = (char *)(uintptr_t)value;
		return 0;
	}
	case FLAG_POLICY:
		if (o->policy_file)
			return ward_error_set(err, EINVAL, "cli", "%s: given twice", typed);
		o->policy_file = value;
		return 0;
	case FLAG_FIELD:
		return add_override(o, f->field, value, typed, err);
	case FLAG_BOOL:
		*(bool *)((char *)o + f->offset) = true;
		return 0;
	case FLAG_STRING: {
		const char **slot = (const char **)(void *)((char *)o + f->offset);
		if (*slot)
			return ward_error_set(err, EINVAL, "cli", "%s: given twice", typed);
		*slot = value;
		return 0;
	}
	case FLAG_CELL:
	case FLAG_CELLFILE:
		if (f->kind == FLAG_CELLFILE && o->mode == WARD_CLI_CALL) {
			if (o->tool_file)
				return ward_error_set(err, EINVAL, "cli", "%s: given twice", typed);
			o->tool_file = value;
			return 0;
		}
		if (o->n_cells >= WARD_CLI_MAX_CELLS)
			return ward_error_set(err, E2BIG, "cli", "%s: too many cells", typed);
		o->cells[o->n_cells++] = (struct ward_cli_cell){ value, f->kind == FLAG_CELLFILE };
		return 0;
	case FLAG_FILEIN:
		if (o->n_files >= WARD_CLI_MAX_FILES)
			return ward_error_set(err, E2BIG, "cli", "%s: too many files", typed);
		o->files[o->n_files++] = value;
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
		const struct flag *f = find_long(o->mode, name, eq ? (size_t)(eq - name) : strlen(name));
		if (!f)
			return ward_error_set(err, EINVAL, "cli", "unknown option '%.*s' (see 'ward %s --help')",
					      (int)(eq ? eq - a : (long)strlen(a)), a, mode_names[o->mode]);
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
		const struct flag *f = find_short(o->mode, *c);
		if (!f)
			return ward_error_set(err, EINVAL, "cli", "unknown option '-%c' (see 'ward %s --help')",
					      *c, mode_names[o->mode]);
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
	return ward_cli_parse(WARD_CLI_RUN, argc, argv, o, err);
}

/* exec and call take no program: what is left must be "-" (a cell from
 * stdin, exec only). */
static int parse_code_rest(int argc, char **argv, int i, struct ward_cli_run *o,
			   struct ward_error *err)
{
	for (; i < argc; i++) {
		if (o->mode == WARD_CLI_EXEC && strcmp(argv[i], "-") == 0) {
			if (o->n_cells >= WARD_CLI_MAX_CELLS)
				return ward_error_set(err, E2BIG, "cli", "too many cells");
			o->cells[o->n_cells++] = (struct ward_cli_cell){ "-", true };
			continue;
		}
		return ward_error_set(err, EINVAL, "cli", "unexpected argument '%s' (see 'ward %s --help')",
				      argv[i], mode_names[o->mode]);
	}
	if (o->help || o->version || o->print_policy)
		return 0;
	if (!o->lang)
		return ward_error_set(err, EINVAL, "cli", "--lang: expected python, node or bash");
	if (o->mode == WARD_CLI_EXEC && o->n_cells == 0)
		return ward_error_set(err, EINVAL, "cli", "no code given (-c CODE, -f FILE or -)");
	if (o->mode == WARD_CLI_CALL && (!o->tool_file || !o->function))
		return ward_error_set(err, EINVAL, "cli", "ward call needs -f FILE and --function NAME");
	return 0;
}

int ward_cli_parse(enum ward_cli_mode mode, int argc, char **argv, struct ward_cli_run *o,
		   struct ward_error *err)
{
	memset(o, 0, sizeof(*o));
	o->mode = mode;
	int i = 1;
	while (i < argc) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (a[0] != '-' || a[1] == '\0')
			break; /* the program (run) or "-" (exec) starts here */
		int used = parse_one(argc, argv, i, o, err);
		if (used < 0)
			return used;
		i += used;
	}
	if (mode != WARD_CLI_RUN)
		return parse_code_rest(argc, argv, i, o, err);
	if (i < argc)
		o->argv = &argv[i];
	if (!o->argv && !o->help && !o->version && !o->print_policy)
		return ward_error_set(err, EINVAL, "cli", "no program given (usage: ward run [OPTIONS] -- PROGRAM [ARG...])");
	return 0;
}

void ward_cli_print_error(const struct ward_error *err)
{
	char buf[1024];
	bool usage = strcmp(err->layer, "cli") == 0 && (err->code == EINVAL || err->code == E2BIG);
	if (!usage) {
		fprintf(stderr, "ward: error: %s\n", ward_error_format(err, buf, sizeof(buf)));
		return;
	}
	fprintf(stderr, "ward: error: %s", err->message);
	if (err->hint[0])
		fprintf(stderr, " (hint: %s)", err->hint);
	fputc('\n', stderr);
}

int ward_cli_read_regular(const char *path, const char *flag, size_t max, char **out,
			  size_t *len, struct ward_error *err)
{
	/* O_NONBLOCK: opening a FIFO without a writer must not wait */
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	if (fd < 0)
		return ward_error_set(err, errno, "cli", "%s: unable to read '%s'", flag, path);
	if (fstat(fd, &st) < 0)
		return ward_error_set(err, errno, "cli", "%s: unable to read '%s'", flag, path);
	if (!S_ISREG(st.st_mode))
		return ward_error_set(err, EINVAL, "cli", "%s: '%s' is not a regular file", flag, path);
	if ((uint64_t)st.st_size > max)
		return ward_error_set(err, EFBIG, "cli", "%s: '%s' is larger than %zu bytes", flag,
				      path, max);
	char *buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return ward_error_set(err, ENOMEM, "cli", "out of memory");
	/* a regular file never blocks; the size read is the size checked */
	ssize_t n = ward_read_full(fd, buf, (size_t)st.st_size);
	if (n < 0) {
		free(buf);
		return ward_error_set(err, (int)-n, "cli", "%s: unable to read '%s'", flag, path);
	}
	buf[n] = '\0';
	*out = buf;
	if (len)
		*len = (size_t)n;
	return 0;
}

static void human_size(uint64_t n, char *buf, size_t len)
{
	static const char units[] = "KMGT";
	int u = -1;
	while (n >= 1024 && n % 1024 == 0 && u < 3) {
		n /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%llu bytes", (unsigned long long)n);
	else
		snprintf(buf, len, "%llu%c", (unsigned long long)n, units[u]);
}

void ward_cli_note_degraded(const struct ward_cli_run *o, const struct ward_policy *p,
			    const struct ward_verdict *v)
{
	if (o->quiet || o->json || v->status == WARD_STATUS_SETUP_FAILED ||
	    !(v->degraded & (1u << WARD_LAYER_CGROUP)))
		return;
	/* only when the caller asked for a memory limit or a CPU quota (a flag,
	 * or a policy file that moved them from the defaults) */
	struct ward_policy d;
	struct ward_error e;
	bool asked = p->cpus_milli != 0;
	if (ward_policy_init(&d, &e) == 0) {
		asked = asked || p->memory != d.memory;
		ward_policy_release(&d);
	}
	for (size_t i = 0; i < o->n_overrides; i++)
		asked = asked || strcmp(o->overrides[i].field, "limits.memory") == 0 ||
			strcmp(o->overrides[i].field, "limits.cpus") == 0;
	if (!asked)
		return;
	char mem[32];
	human_size(p->memory, mem, sizeof(mem));
	fprintf(stderr, "ward: note: no cgroup for this sandbox: memory %s is a "
			"per-process data-size limit, pids %llu counts the sandbox user's processes",
		mem, (unsigned long long)p->pids);
	if (p->cpus_milli)
		fprintf(stderr, ", and cpus %g is not enforced", (double)p->cpus_milli / 1000.0);
	fputs(" (see 'ward doctor')\n", stderr);
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

/* "permissions": {"env": [names]} passes the host's variables through by
 * name, on the command line only: each one set here is set in the policy
 * before the document is loaded, which then keeps exactly the listed ones
 * (the daemon does not do this: its clients get the operator's variables
 * only). A document the policy library will refuse is left to it. */
static int host_env(struct ward_policy *p, const char *buf, size_t len, const char *source,
		    struct ward_error *err)
{
	json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
	json_t *list = json_object_get(json_object_get(root, "permissions"), "env");
	size_t i;
	json_t *e;
	int r = 0;
	json_array_foreach(list, i, e) {
		const char *name = json_string_value(e), *value = name ? getenv(name) : NULL;
		char where[256];
		if (!value)
			continue;
		snprintf(where, sizeof(where), "%s: permissions.env[%zu]", source, i);
		_cleanup_free_ char *entry = malloc(strlen(name) + strlen(value) + 2);
		if (!entry) {
			r = ward_error_set(err, ENOMEM, "cli", "%s: out of memory", where);
			break;
		}
		snprintf(entry, strlen(name) + strlen(value) + 2, "%s=%s", name, value);
		if ((r = ward_policy_set(p, "env", entry, where, err)) < 0)
			break;
	}
	json_decref(root);
	return r;
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
		r = ward_cli_read_regular(o->policy_file, "--policy", 1 << 20, &buf, &len, err);
		if (r < 0)
			return r;
		r = host_env(p, buf, len, o->policy_file, err);
		if (r == 0)
			r = ward_policy_load_json(p, buf, len, o->policy_file, err);
		if (r < 0)
			return r;
	}
	/* two passes: --net deny: lists after the rest, so that they may come
	 * before the --net allow: that makes the allowlist they belong to */
	for (size_t k = 0; k < 2 * o->n_overrides; k++) {
		const struct ward_cli_override *ov = &o->overrides[k % o->n_overrides];
		if ((strcmp(ov->field, "network.deny") == 0) != (k >= o->n_overrides))
			continue;
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
