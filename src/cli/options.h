/* src/cli/options.h — `ward run` command line, parsed without side effects.
 * Parsing only records; the policy is assembled later (defaults, then the
 * policy file, then the flags), so flags always win. */
#ifndef WARD_CLI_OPTIONS_H
#define WARD_CLI_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "ward/error.h"
#include "ward/policy.h"
#include "ward/verdict.h"

enum { WARD_CLI_MAX_OVERRIDES = 128, WARD_CLI_MAX_CELLS = 64, WARD_CLI_MAX_FILES = 64,
       WARD_CLI_MAX_EGRESS = 64 /* values of each repeatable --egress-* flag */ };

enum ward_cli_mode { WARD_CLI_RUN, WARD_CLI_EXEC, WARD_CLI_CALL };

struct ward_cli_cell {
	const char *text;    /* code, or a path ("-": stdin) when from_file */
	bool from_file;
};

struct ward_cli_override {
	const char *field;   /* ward_policy_set field */
	const char *value;
	const char *flag;    /* as the user typed it, for messages */
};

struct ward_cli_run {
	enum ward_cli_mode mode;
	const char *policy_file;
	struct ward_cli_override overrides[WARD_CLI_MAX_OVERRIDES];
	size_t n_overrides;
	bool json;
	bool quiet;
	int verbose;
	bool help;
	bool version;
	bool stdin;          /* relay ward's stdin to the program */
	bool print_policy;   /* print the effective policy and exit */
	char **argv;         /* run: the program and its arguments */
	/* exec and call */
	const char *lang;
	struct ward_cli_cell cells[WARD_CLI_MAX_CELLS];
	size_t n_cells;
	const char *files[WARD_CLI_MAX_FILES];   /* --file HOST:PATH */
	size_t n_files;
	const char *artifacts_dir;
	const char *tool_file;   /* call: -f FILE */
	const char *function;
	const char *args;
	bool keep_going;         /* exec: run later cells after an error */
	/* run and exec: the egress proxy's operator settings (ward/egress.h),
	 * checked when parsed (ward_net_setting_check). --egress-resolve
	 * NAME=ADDR, --egress-allow-private CIDR, --egress-dns ADDR[:PORT]
	 * (each repeatable, in the order given), --egress-ca FILE (not read
	 * here). Like every value above they point into argv, and each list
	 * lives in egress_store below (NULL while empty): never copy the
	 * struct, pass a pointer. */
	char **egress_resolve;
	size_t n_egress_resolve;
	char **egress_allow_private;
	size_t n_egress_allow_private;
	char **egress_dns;
	size_t n_egress_dns;
	char *egress_ca;
	char *egress_store[3][WARD_CLI_MAX_EGRESS];
};

/* Parses argv (argv[0] is the subcommand) into *o (cleared first).
 * Returns 0 or -EINVAL (-E2BIG past a bound) with err naming the flag. No
 * I/O, no allocation: *o points into argv. `--net none`,
 * `--net allow:HOST[:PORT],...` and `--net deny:...` become overrides of
 * "network", "network.allow" and "network.deny", each entry checked here. */
int ward_cli_parse(enum ward_cli_mode mode, int argc, char **argv, struct ward_cli_run *o,
		   struct ward_error *err);
int ward_cli_parse_run(int argc, char **argv, struct ward_cli_run *o, struct ward_error *err);

/* Builds the effective policy: defaults, then o->policy_file (read here),
 * then the flags in order. Returns 0 or -errno with err naming the field. */
int ward_cli_build_policy(const struct ward_cli_run *o, struct ward_policy *p,
			  struct ward_error *err);

/* Prints err as "ward: error: ..." on stderr. A usage error (layer "cli",
 * EINVAL or E2BIG) is printed as its message alone: no layer prefix and no
 * errno text after it. */
void ward_cli_print_error(const struct ward_error *err);
/* Reads a regular file named by a flag (--policy, --file) into *out (the
 * caller frees it), at most max bytes. The file is opened O_NONBLOCK and
 * checked with fstat before any read, so a FIFO or a device is refused
 * with a message naming the flag instead of blocking. Returns 0 or -errno. */
int ward_cli_read_regular(const char *path, const char *flag, size_t max, char **out,
			  size_t *len, struct ward_error *err);
/* Plain mode, once per run: when the sandbox had no cgroup (rootless,
 * usually) and the caller asked for a memory limit or a CPU quota, says on
 * stderr what the memory, process and CPU limits became. Nothing with
 * --quiet or --json (the verdict lists "cgroup" as degraded) or when the
 * setup failed. */
void ward_cli_note_degraded(const struct ward_cli_run *o, const struct ward_policy *p,
			    const struct ward_verdict *v);
/* The usage text for `ward run`. */
extern const char ward_cli_run_usage[];

#endif
