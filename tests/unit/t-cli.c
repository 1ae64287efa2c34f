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

static void test_net(void)
{
	static struct ward_cli_run o;
	struct ward_error err;
	struct ward_policy p;

	is_int(parse(&o, &err, "--net", "allow:pypi.test,*.example.test:*", "--net=allow:[::1]:8080",
		     "--net", "deny:bad.example.test", "--", "x", NULL), 0, "--net allow and deny");
	is_int(o.n_overrides, 3, "  three overrides");
	is_str(o.overrides[0].field, "network.allow", "  allow: sets network.allow");
	is_str(o.overrides[0].value, "pypi.test,*.example.test:*", "  with the list");
	is_str(o.overrides[2].field, "network.deny", "  deny: sets network.deny");
	is_int(ward_cli_build_policy(&o, &p, &err), 0, "  the policy builds");
	ok(p.net == WARD_NET_ALLOWLIST && p.network.n_allow == 3 && p.network.n_deny == 1,
	   "  an allowlist of three, one deny entry");
	ward_policy_release(&p);
	is_int(parse(&o, &err, "--net", "allow:a.test", "--net", "none", "--", "x", NULL), 0,
	       "--net none after an allow");
	is_int(ward_cli_build_policy(&o, &p, &err), 0, "  builds");
	ok(p.net == WARD_NET_NONE && p.network.n_allow == 0, "  the last one wins: no network");
	ward_policy_release(&p);
	is_int(parse(&o, &err, "--net", "allow:ok.test,a b", "--", "x", NULL), -EINVAL,
	       "a bad entry is refused when parsed");
	is_str(err.message, "--net: expected HOST, *.DOMAIN, HOST:PORT, HOST:* or a CIDR, got \"a b\"",
	       "  naming the flag and the entry");
	ok(strcmp(err.layer, "cli") == 0 && err.code == EINVAL, "  as a usage error");
	is_int(parse(&o, &err, "--net", "allow:127.1", "--", "x", NULL), -EINVAL, "an address as a name");
	has_str(err.message, "write it as a CIDR", "  says how to write it");
	is_int(parse(&o, &err, "--net", "allow:", "--", "x", NULL), -EINVAL, "an empty list");
	is_int(parse(&o, &err, "--net", "host", "--", "x", NULL), -EINVAL, "an unknown form");
	is_str(err.message, "--net: expected none, allow:HOST[:PORT],... or deny:HOST[:PORT],..., got 'host'",
	       "  message");
	is_int(parse(&o, &err, "--net", "deny:x.test", "--", "x", NULL), 0, "deny alone parses");
	ok(ward_cli_build_policy(&o, &p, &err) < 0 && strstr(err.message, "deny entries need mode"),
	   "  but needs an allowlist to build");
	ward_policy_release(&p);
	is_int(parse(&o, &err, "--net", "deny:x.test", "--net", "allow:*.test", "--", "x", NULL), 0,
	       "deny before allow");
	ok(ward_cli_build_policy(&o, &p, &err) == 0 && p.network.n_deny == 1 && p.network.n_allow == 1,
	   "  builds: deny lists apply after the rest");
	ward_policy_release(&p);
}

static void test_egress(void)
{
	static struct ward_cli_run o;
	struct ward_error err;

	is_int(parse(&o, &err, "--egress-resolve", "pypi.test=127.0.0.1", "--egress-resolve=b.test=::1",
		     "--egress-allow-private", "127.0.0.0/8", "--egress-dns", "127.0.0.1:5353",
		     "--egress-dns", "[::1]:53", "--egress-ca", "/etc/ca.pem", "--", "x", NULL), 0,
	       "the --egress-* flags");
	ok(o.n_egress_resolve == 2 && strcmp(o.egress_resolve[0], "pypi.test=127.0.0.1") == 0 &&
	   strcmp(o.egress_resolve[1], "b.test=::1") == 0, "  --egress-resolve twice, in order");
	ok(o.n_egress_allow_private == 1 && strcmp(o.egress_allow_private[0], "127.0.0.0/8") == 0,
	   "  --egress-allow-private");
	ok(o.n_egress_dns == 2 && strcmp(o.egress_dns[1], "[::1]:53") == 0, "  --egress-dns");
	is_str(o.egress_ca, "/etc/ca.pem", "  --egress-ca");
	is_int(o.n_overrides, 0, "  none of them is a policy field");
	is_int(parse(&o, &err, "--egress-resolve", "pypi.test", "--", "x", NULL), -EINVAL,
	       "NAME without =IP");
	is_str(err.message, "--egress-resolve: expected NAME=ADDRESS (an IPv4 or IPv6 address), got \"pypi.test\"",
	       "  message names the flag");
	is_int(parse(&o, &err, "--egress-resolve", "0x7f000001=127.0.0.1", "--", "x", NULL), -EINVAL,
	       "an address as the NAME");
	is_int(parse(&o, &err, "--egress-resolve", "a.test=127.1", "--", "x", NULL), -EINVAL,
	       "a loose spelling as the IP");
	is_int(parse(&o, &err, "--egress-allow-private", "10.1.2.3/8", "--", "x", NULL), -EINVAL,
	       "a CIDR with host bits");
	is_str(err.message, "--egress-allow-private: \"10.1.2.3/8\" has host bits set beyond the /8 "
	       "prefix; did you mean \"10.0.0.0/8\"?", "  message");
	is_int(parse(&o, &err, "--egress-allow-private", "lan.test", "--", "x", NULL), -EINVAL,
	       "a name where a CIDR belongs");
	is_int(parse(&o, &err, "--egress-dns", "127.0.0.1:0", "--", "x", NULL), -EINVAL, "port 0");
	is_int(parse(&o, &err, "--egress-dns", "dns.test", "--", "x", NULL), -EINVAL, "a name");
	has_str(err.message, "--egress-dns: expected ADDRESS or ADDRESS:PORT", "  message");
	is_int(parse(&o, &err, "--egress-ca", "a", "--egress-ca", "b", "--", "x", NULL), -EINVAL,
	       "--egress-ca twice");
	is_int(parse(&o, &err, "--egress-ca", "", "--", "x", NULL), -EINVAL, "--egress-ca empty");
	char *argv[2 + 2 * 70];
	int argc = 0;
	argv[argc++] = (char *)"run";
	for (int i = 0; i < 65; i++) {
		argv[argc++] = (char *)"--egress-dns";
		argv[argc++] = (char *)"127.0.0.1";
	}
	argv[argc++] = (char *)"x";
	is_int(ward_cli_parse_run(argc, argv, &o, &err), -EINVAL, "the 65th --egress-dns is refused");
	is_str(err.message, "--egress-dns: given more than 64 times", "  message");
	is_int(parse(&o, &err, "--", "x", NULL), 0, "a parse without them");
	ok(o.egress_dns == NULL && o.n_egress_dns == 0 && o.egress_ca == NULL, "  has none");
	char *exec_argv[] = { (char *)"exec", (char *)"--egress-dns", (char *)"127.0.0.1",
			      (char *)"-l", (char *)"python", (char *)"-c", (char *)"1", NULL };
	is_int(ward_cli_parse(WARD_CLI_EXEC, 7, exec_argv, &o, &err), 0, "exec takes them too");
	char *call_argv[] = { (char *)"call", (char *)"--egress-dns", (char *)"127.0.0.1", NULL };
	is_int(ward_cli_parse(WARD_CLI_CALL, 3, call_argv, &o, &err), -EINVAL, "call does not");
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
	test_net();
	test_egress();
	return tap_done();
}
