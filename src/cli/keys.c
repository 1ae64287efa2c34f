/* src/cli/keys.c — `ward keys add|list|revoke`: manage the keys file of
 * `ward serve`.
 *
 * Option parsing records only; the keys file is touched after every flag has
 * been checked. It must never print a secret except the new key of `add`
 * (once, on stdout, then wiped), and never print a hash or salt.
 */
#include <jansson.h>
#include <sodium.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "keys.h"
#include "server/keys.h"
#include "base/util.h"

enum keys_cmd { KEYS_ADD = 1 << 0, KEYS_LIST = 1 << 1, KEYS_REVOKE = 1 << 2 };
#define KEYS_ANY (KEYS_ADD | KEYS_LIST | KEYS_REVOKE)

static const struct { const char *name; enum keys_cmd cmd; } keys_cmds[] = {
	{ "add", KEYS_ADD }, { "list", KEYS_LIST }, { "revoke", KEYS_REVOKE },
};

struct keys_opts {
	enum keys_cmd cmd;
	const char *name;        /* of the subcommand, for messages */
	const char *keys_file, *tenant, *scopes, *note, *id;
	bool json, help;
};

/* Flags with a value set a const char * field; the others a bool. */
static const struct keys_flag {
	const char *name;
	unsigned cmds;           /* subcommands that take it */
	bool value;
	size_t off;
} keys_flags[] = {
	{ "--keys-file", KEYS_ANY, true, offsetof(struct keys_opts, keys_file) },
	{ "--json", KEYS_ANY, false, offsetof(struct keys_opts, json) },
	{ "--help", KEYS_ANY, false, offsetof(struct keys_opts, help) },
	{ "-h", KEYS_ANY, false, offsetof(struct keys_opts, help) },
	{ "--tenant", KEYS_ADD, true, offsetof(struct keys_opts, tenant) },
	{ "--scopes", KEYS_ADD, true, offsetof(struct keys_opts, scopes) },
	{ "--note", KEYS_ADD, true, offsetof(struct keys_opts, note) },
};

static const char keys_usage[] =
	"usage: ward keys add --tenant TENANT --scopes SCOPE[,SCOPE...] [--note TEXT] [--json]\n"
	"       ward keys list [--json]\n"
	"       ward keys revoke KEY_ID [--json]\n"
	"\n"
	"Manages the API keys of 'ward serve'. A key is shown once, by 'add'; the keys\n"
	"file keeps only a salted hash of it.\n"
	"\n"
	"  --keys-file PATH   the keys file (default: $WARD_KEYS_FILE, else /etc/ward/keys)\n"
	"  --tenant TENANT    the tenant the key acts for: 1-64 of A-Z a-z 0-9 . _ -\n"
	"  --scopes LIST      what the key may do: execute, sessions, files, admin,\n"
	"                     credentials (attach egress credential rules)\n"
	"  --note TEXT        a remark shown by 'list' (who holds the key, where)\n"
	"  --json             print JSON instead of text\n"
	"  --help             show this help\n"
	"\n"
	"Exit status: 0 on success, 1 when the operation failed, 2 on a usage error.\n";

__attribute__((format(printf, 2, 3)))
static int keys_usage_error(const struct keys_opts *o, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "ward: error: keys%s%s: ", o->name ? " " : "", o->name ? o->name : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see 'ward keys --help')\n", stderr);
	return -EINVAL;
}

static int keys_fail(const struct ward_error *err)
{
	char buf[WARD_ERROR_MSG_MAX + WARD_ERROR_HINT_MAX + 64];
	fprintf(stderr, "ward: error: %s\n", ward_error_format(err, buf, sizeof(buf)));
	return 1;
}

/* One argument; *i moves past a separate value. */
static int keys_parse_arg(int argc, char **argv, int *i, struct keys_opts *o)
{
	const char *arg = argv[*i], *eq = strchr(arg, '=');
	size_t n = eq && arg[0] == '-' ? (size_t)(eq - arg) : strlen(arg);
	const struct keys_flag *f = NULL;
	for (size_t k = 0; k < ARRAY_SIZE(keys_flags); k++)
		if (strlen(keys_flags[k].name) == n && strncmp(arg, keys_flags[k].name, n) == 0)
			f = &keys_flags[k];
	if (!f && arg[0] == '-' && arg[1])
		return keys_usage_error(o, "unknown option '%.*s'", (int)n, arg);
	if (!f) {
		if (o->cmd != KEYS_REVOKE || o->id)
			return keys_usage_error(o, "unexpected argument '%s'", arg);
		o->id = arg;
		return 0;
	}
	if (!(f->cmds & o->cmd))
		return keys_usage_error(o, "%s is not an option of 'keys %s'", f->name, o->name);
	if (!f->value) {
		if (eq)
			return keys_usage_error(o, "%s takes no value", f->name);
		*(bool *)((char *)o + f->off) = true;
		return 0;
	}
	const char *value = eq ? eq + 1 : *i + 1 < argc ? argv[++*i] : NULL;
	if (!value)
		return keys_usage_error(o, "%s needs a value", f->name);
	*(const char **)((char *)o + f->off) = value;
	return 0;
}

/* Checks what each subcommand needs; *scopes gets add's scope bits. */
static int keys_check(struct keys_opts *o, unsigned *scopes)
{
	struct ward_error err;
	if (o->keys_file && !o->keys_file[0])
		return keys_usage_error(o, "--keys-file: empty path");
	if (o->cmd == KEYS_ADD) {
		if (!o->tenant)
			return keys_usage_error(o, "missing --tenant");
		if (!o->scopes)
			return keys_usage_error(o, "missing --scopes");
		if (ward_keys_check_tenant(o->tenant, &err) < 0)
			return keys_usage_error(o, "--tenant: %s", err.message);
		if (ward_keys_scopes_parse(o->scopes, scopes, &err) < 0)
			return keys_usage_error(o, "--scopes: %s", err.message);
	}
	if (o->cmd == KEYS_REVOKE) {
		if (!o->id)
			return keys_usage_error(o, "missing the key id");
		if (ward_keys_check_id(o->id, &err) < 0)
			return keys_usage_error(o, "%s", err.message);
	}
	return 0;
}

static int keys_parse(int argc, char **argv, struct keys_opts *o, unsigned *scopes)
{
	if (argc < 2)
		return keys_usage_error(o, "missing subcommand (add, list or revoke)");
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		o->help = true;
		return 0;
	}
	for (size_t k = 0; k < ARRAY_SIZE(keys_cmds); k++)
		if (strcmp(argv[1], keys_cmds[k].name) == 0) {
			o->cmd = keys_cmds[k].cmd;
			o->name = keys_cmds[k].name;
		}
	if (!o->cmd)
		return keys_usage_error(o, "unknown subcommand '%s' (expected add, list or revoke)",
					argv[1]);
	for (int i = 2; i < argc; i++)
		if (keys_parse_arg(argc, argv, &i, o) < 0)
			return -EINVAL;
	return o->help ? 0 : keys_check(o, scopes);
}

/* --- subcommands ------------------------------------------------------------ */

/* Everything printed here is [A-Za-z0-9._,:-]: JSON-safe without escaping,
 * and the key never passes through an allocator that would not wipe it. */
static int keys_add(const struct keys_opts *o, const char *path, unsigned scopes)
{
	struct ward_error err;
	struct ward_key_info info;
	char key[WARD_KEY_STR_SIZE], names[WARD_KEY_SCOPES_MAX];
	if (ward_keys_add(path, o->tenant, scopes, o->note, key, sizeof(key), &info, &err) < 0)
		return keys_fail(&err);
	ward_keys_scopes_format(info.scopes, names, sizeof(names));
	if (o->json) {
		printf("{\"id\":\"%s\",\"key\":\"%s\",\"tenant\":\"%s\",\"scopes\":[", info.id, key,
		       info.tenant);
		for (const char *p = names; *p;) {
			size_t n = strcspn(p, ",");
			printf("%s\"%.*s\"", p == names ? "" : ",", (int)n, p);
			p += n + (p[n] == ',');
		}
		printf("],\"created\":\"%s\"}\n", info.created);
	} else {
		printf("%s\n", key);
	}
	int rc = fflush(stdout) == 0 ? 0 : 1;
	sodium_memzero(key, sizeof(key));
	if (rc) {
		fprintf(stderr, "ward: error: keys add: unable to print the new key: %s; "
			"revoke it with 'ward keys revoke %s'\n", strerror(errno), info.id);
		return rc;
	}
	if (!o->json)
		fprintf(stderr, "ward: added key %s for tenant '%s' (%s); it is shown only this once\n",
			info.id, info.tenant, names);
	return 0;
}

static json_t *keys_info_json(const struct ward_key_info *k)
{
	json_t *scopes = json_array();
	for (unsigned bit = 1; scopes && bit & WARD_SCOPE_ALL; bit <<= 1)
		if (k->scopes & bit)
			json_array_append_new(scopes, json_string(ward_keys_scope_name(bit)));
	return json_pack("{s:s, s:s, s:o, s:s, s:b, s:s}", "id", k->id, "tenant", k->tenant,
			 "scopes", scopes, "created", k->created, "revoked", k->revoked,
			 "note", k->note);
}

static int keys_list_json(const struct ward_keystore *ks)
{
	json_t *all = json_array();
	for (size_t i = 0; all && i < ward_keys_count(ks); i++)
		if (json_array_append_new(all, keys_info_json(ward_keys_get(ks, i))) < 0) {
			json_decref(all);
			all = NULL;
		}
	char *s = all ? json_dumps(all, JSON_COMPACT) : NULL;
	json_decref(all);
	if (!s) {
		fprintf(stderr, "ward: error: keys list: unable to format the list: %s\n",
			strerror(ENOMEM));
		return 1;
	}
	puts(s);
	free(s);
	return 0;
}

static void keys_list_text(const struct ward_keystore *ks)
{
	int w = 6;  /* strlen("TENANT") */
	for (size_t i = 0; i < ward_keys_count(ks); i++) {
		int n = (int)strlen(ward_keys_get(ks, i)->tenant);
		w = n > w ? n : w;
	}
	if (ward_keys_count(ks))
		printf("%-12s  %-*s  %-28s  %-20s  %-7s  %s\n", "ID", w, "TENANT", "SCOPES",
		       "CREATED", "STATUS", "NOTE");
	for (size_t i = 0; i < ward_keys_count(ks); i++) {
		const struct ward_key_info *k = ward_keys_get(ks, i);
		char names[WARD_KEY_SCOPES_MAX];
		printf("%-12s  %-*s  %-28s  %-20s  %-*s%s%s\n", k->id, w, k->tenant,
		       ward_keys_scopes_format(k->scopes, names, sizeof(names)), k->created,
		       k->note[0] ? 7 : 0, k->revoked ? "revoked" : "active",
		       k->note[0] ? "  " : "", k->note);
	}
}

static int keys_list(const struct keys_opts *o, const char *path)
{
	struct ward_error err;
	struct ward_keystore *ks = NULL;
	int r = ward_keys_load(path, &ks, &err);
	if (r < 0 && r != -ENOENT)
		return keys_fail(&err);
	/* No keys file yet: no keys. */
	int rc = 0;
	if (o->json)
		rc = keys_list_json(ks);
	else
		keys_list_text(ks);
	ward_keys_free(ks);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "ward: error: keys list: unable to write: %s\n", strerror(errno));
		rc = 1;
	}
	return rc;
}

static int keys_revoke(const struct keys_opts *o, const char *path)
{
	struct ward_error err;
	struct ward_key_info info;
	if (ward_keys_revoke(path, o->id, &info, &err) < 0)
		return keys_fail(&err);
	if (o->json)
		printf("{\"id\":\"%s\",\"tenant\":\"%s\",\"revoked\":true}\n", info.id, info.tenant);
	else
		printf("revoked key %s of tenant '%s'\n", info.id, info.tenant);
	return fflush(stdout) == 0 ? 0 : 1;
}

int ward_cli_keys(int argc, char **argv)
{
	struct keys_opts o = { 0 };
	unsigned scopes = 0;
	if (keys_parse(argc, argv, &o, &scopes) < 0)
		return 2;
	if (o.help) {
		fputs(keys_usage, stdout);
		return fflush(stdout) == 0 ? 0 : 1;
	}
	const char *path = o.keys_file ? o.keys_file : ward_keys_default_path();
	switch (o.cmd) {
	case KEYS_ADD:
		return keys_add(&o, path, scopes);
	case KEYS_LIST:
		return keys_list(&o, path);
	case KEYS_REVOKE:
		return keys_revoke(&o, path);
	}
	return 2;
}
