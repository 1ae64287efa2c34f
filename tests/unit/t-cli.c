/* tests/unit/t-cli.c — `ward run` option parsing, and flags over the policy
 * file over the defaults. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/cli/options.h"
#include "tap.h"

static int parse(struct ward_cli_run *o, struct ward_error *err, const char *first, ...)
{
	char *argv[64];
	int argc = 0;
	va_list ap;
	argv[argc++] = (char *)"run";
	va_start(ap, first);
	for (const char *a = first; a; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	static char *saved[64];
	memcpy(saved, argv, sizeof(argv));
	ward_error_clear(err);
	return ward_cli_parse_run(argc, saved, o, err);
}

static void test_parse(void)
{
	static struct ward_cli_run o;
	struct ward_error err;

	is_int(parse(&o, &err, "--", "/bin/true", NULL), 0, "plain program after --");
	is_str(o.argv[0], "/bin/true", "program recorded");
	is_int(parse(&o, &err, "/bin/echo", "-n", "x", NULL), 0, "program without --");
	is_str(o.argv[1], "-n", "program's own flags are not ward's");
	is_int(parse(&o, &err, "--memory", "64M", "--pids=10", "--", "true", NULL), 0, "value forms");
	is_int(o.n_overrides, 2, "two overrides");
	is_str(o.overrides[0].field, "limits.memory", "--memory sets limits.memory");
	is_str(o.overrides[1].value, "10", "--pids=10 value");
	is_str(o.overrides[1].flag, "--pids", "flag name kept for messages");
	is_int(parse(&o, &err, "-qv", "-v", "--json", "--", "true", NULL), 0, "short cluster");
	ok(o.quiet && o.json && o.verbose == 2, "-q, --json, -v twice");
	is_int(parse(&o, &err, "-eA=1", "-w", "/tmp", "--", "true", NULL), 0, "short with values");
	is_str(o.overrides[0].value, "A=1", "-eA=1");
	is_str(o.overrides[1].field, "workdir", "-w sets workdir");
	is_int(parse(&o, &err, "--bogus", "--", "true", NULL), -EINVAL, "unknown long option");
	is_str(err.message, "unknown option '--bogus' (see 'ward run --help')", "message names it");
	is_int(parse(&o, &err, "-Z", "--", "true", NULL), -EINVAL, "unknown short option");
	is_str(err.message, "unknown option '-Z' (see 'ward run --help')", "message names -Z");
	is_int(parse(&o, &err, "--memory", NULL), -EINVAL, "missing value");
	is_str(err.message, "--memory: expected a value", "message says a value is expected");
	is_int(parse(&o, &err, "--json=yes", "--", "true", NULL), -EINVAL, "boolean with a value");
	is_str(err.message, "--json takes no value", "message");
	is_int(parse(&o, &err, "--json", NULL), -EINVAL, "no program");
	has_str(err.message, "no program given", "message says so");
	is_int(parse(&o, &err, "--help", NULL), 0, "--help needs no program");
	ok(o.help, "help set");
	is_int(parse(&o, &err, "--policy", "a", "--policy", "b", "--", "x", NULL), -EINVAL,
	       "policy twice");
	is_str(err.message, "--policy: given twice", "message");
	is_int(parse(&o, &err, "--ro", "/a:/b", "--rw", "/c", "--net", "none", "--", "x", NULL), 0,
	       "mount flags");
	is_str(o.overrides[0].field, "mounts.ro", "--ro");
	is_str(o.overrides[1].field, "mounts.rw", "--rw");
	is_str(o.overrides[2].field, "network", "--net");
}

static void test_build(void)
{
	static struct ward_cli_run o;
	struct ward_error err;
	struct ward_policy p;
	char path[] = "/tmp/ward-t-cli-XXXXXX";
	int fd = mkstemp(path);
	const char *doc = "{\"limits\": {\"memory\": \"256M\", \"pids\": 50}}";
	ok(fd >= 0 && write(fd, doc, strlen(doc)) == (ssize_t)strlen(doc), "policy file written");
	close(fd);

	parse(&o, &err, "--", "true", NULL);
	is_int(ward_cli_build_policy(&o, &p, &err), 0, "defaults build");
	is_int(p.memory, 512ull << 20, "default memory 512M");
	is_int(p.pids, 128, "default pids 128");
	is_int(p.timeout_ms, 30000, "default timeout 30s");
	is_int(p.workspace_size, 64ull << 20, "default workspace 64M");
	ward_policy_release(&p);

	parse(&o, &err, "--policy", path, "--pids", "7", "--", "true", NULL);
	is_int(ward_cli_build_policy(&o, &p, &err), 0, "file + flag");
	is_int(p.memory, 256ull << 20, "file overrides default");
	is_int(p.pids, 7, "flag overrides file");
	ward_policy_release(&p);

	parse(&o, &err, "--memory", "lots", "--", "true", NULL);
	ok(ward_cli_build_policy(&o, &p, &err) < 0, "bad flag value fails");
	has_str(err.message, "--memory", "error names the flag");
	ward_policy_release(&p);

	parse(&o, &err, "--policy", "/nonexistent/ward.json", "--", "true", NULL);
	ok(ward_cli_build_policy(&o, &p, &err) < 0, "missing policy file fails");
	has_str(err.message, "/nonexistent/ward.json", "error names the file");
	ward_policy_release(&p);
	unlink(path);
}

int main(void)
{
	test_parse();
	test_build();
	return tap_done();
}
