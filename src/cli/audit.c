/* src/cli/audit.c — `ward audit verify`: is an audit log's hash chain intact?
 *
 * Recomputes every line's hash and checks each prev link and seq from the
 * first line, then reports the first line where an edit, a deletion or a
 * reordering broke the chain. Read-only: it never writes to, locks or repairs
 * the log it checks.
 */
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "audit.h"
#include "base/util.h"
#include "server/audit.h"

enum { EXIT_BROKEN = 1, EXIT_USAGE = 2 };

static const char audit_usage[] =
	"usage: ward audit verify FILE [--json] [--genesis HEX]\n"
	"\n"
	"Checks the hash chain of a 'ward serve' audit log from its first line:\n"
	"each line's hash against its content, its prev against the line before,\n"
	"and its seq. Prints 'ok: N lines, chain intact', or the first line where\n"
	"an edit, a deletion or a reordering broke the chain, and why.\n"
	"\n"
	"  --json          print one JSON object instead of text\n"
	"  --genesis HEX   the prev of the first line (default: 64 zeros), e.g. the\n"
	"                  last hash of the log this one continues\n"
	"  --help          show this help\n"
	"\n"
	"Deleting lines from the end cannot be seen from the file alone: compare\n"
	"last_seq and last_hash (--json) with a copy kept elsewhere.\n"
	"\n"
	"Exit status: 0 when the chain is intact, 1 at a break, 2 on a usage error\n"
	"or when FILE cannot be read. The format is described in docs/audit.md.\n";

struct audit_opts {
	bool json;
	bool help;
	const char *genesis;
	const char *file;
};

static int audit_parse(int argc, char **argv, struct audit_opts *o)
{
	static const struct {
		const char *name;
		size_t off;
		bool value;    /* takes the next argument (a string), else a flag */
	} opts[] = {
		{ "--json", offsetof(struct audit_opts, json), false },
		{ "--help", offsetof(struct audit_opts, help), false },
		{ "-h", offsetof(struct audit_opts, help), false },
		{ "--genesis", offsetof(struct audit_opts, genesis), true },
	};
	for (int i = 2; i < argc; i++) {
		size_t k = 0;
		while (k < ARRAY_SIZE(opts) && strcmp(argv[i], opts[k].name) != 0)
			k++;
		if (k < ARRAY_SIZE(opts) && !opts[k].value) {
			*(bool *)((char *)o + opts[k].off) = true;
		} else if (k < ARRAY_SIZE(opts)) {
			if (++i == argc) {
				fprintf(stderr, "ward: error: audit: %s needs a value (see 'ward "
					"audit --help')\n", opts[k].name);
				return -EINVAL;
			}
			*(const char **)((char *)o + opts[k].off) = argv[i];
		} else if (argv[i][0] != '-' && !o->file) {
			o->file = argv[i];
		} else {
			fprintf(stderr, "ward: error: audit: %s '%s' (see 'ward audit --help')\n",
				argv[i][0] == '-' ? "unknown option" : "unexpected argument", argv[i]);
			return -EINVAL;
		}
	}
	if (!o->file && !o->help) {
		fprintf(stderr, "ward: error: audit: verify needs a FILE (see 'ward audit "
			"--help')\n");
		return -EINVAL;
	}
	return 0;
}

static int audit_print_json(const char *file, const struct ward_audit_report *rep)
{
	bool intact = rep->bad_line == 0;
	json_t *o = json_pack("{s:b, s:s, s:I, s:I, s:s, s:o, s:s, s:s}",
			      "ok", intact,
			      "file", file,
			      "lines", (json_int_t)rep->lines,
			      "last_seq", (json_int_t)rep->last_seq,
			      "last_hash", rep->last_hash,
			      "bad_line", intact ? json_null() : json_integer((json_int_t)rep->bad_line),
			      "reason", ward_audit_break_name(rep->reason),
			      "message", rep->message);
	char *s = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
	json_decref(o);
	if (!s) {
		fprintf(stderr, "ward: error: audit: unable to format the report\n");
		return -ENOMEM;
	}
	puts(s);
	free(s);
	return 0;
}

int ward_cli_audit(int argc, char **argv)
{
	struct audit_opts o = { 0 };
	struct ward_audit_report rep;
	struct ward_error err;
	char buf[WARD_ERROR_MSG_MAX + 256];
	bool verify = argc > 1 && strcmp(argv[1], "verify") == 0;
	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
			 strcmp(argv[1], "help") == 0)) {
		fputs(audit_usage, stdout);
		return fflush(stdout) == 0 ? 0 : 1;
	}
	if (!verify) {
		if (argc > 1)
			fprintf(stderr, "ward: error: audit: unknown subcommand '%s'\n", argv[1]);
		fputs(audit_usage, stderr);
		return EXIT_USAGE;
	}
	if (audit_parse(argc, argv, &o) < 0)
		return EXIT_USAGE;
	if (o.help) {
		fputs(audit_usage, stdout);
		return fflush(stdout) == 0 ? 0 : 1;
	}
	ward_error_clear(&err);
	if (ward_audit_verify(o.file, o.genesis, &rep, &err) < 0) {
		fprintf(stderr, "ward: error: %s\n", ward_error_format(&err, buf, sizeof(buf)));
		return EXIT_USAGE;
	}
	if (o.json) {
		if (audit_print_json(o.file, &rep) < 0)
			return EXIT_USAGE;
	} else if (rep.bad_line) {
		printf("%s\n", rep.message);
	} else {
		printf("ok: %llu line%s, chain intact\n", (unsigned long long)rep.lines,
		       rep.lines == 1 ? "" : "s");
	}
	if (fflush(stdout) != 0) {
		fprintf(stderr, "ward: error: audit: unable to write the report: %s\n",
			strerror(errno));
		return EXIT_USAGE;
	}
	return rep.bad_line ? EXIT_BROKEN : 0;
}
