/* src/cli/run.c — `ward run`: one program, one fresh sandbox.
 * Exit status: the program's; 128+N for signal N; 125 when the sandbox
 * could not be set up (the reason on stderr names the layer); 2 for usage
 * errors. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "cgroup.h"
#include "config.h"
#include "cancel.h"
#include "options.h"
#include "status.h"
#include "run.h"
#include "sandbox.h"
#include "ward/egress.h"
#include "ward/ward.h"

enum { EXIT_USAGE = 2, EXIT_SETUP = 125, GC_INTERVAL_S = 10 };

static void print_error(const struct ward_error *err)
{
	ward_cli_print_error(err);
}


static void print_summary(const struct ward_cli_run *o, const struct ward_verdict *v)
{
	if (o->quiet)
		return;
	if (v->setup.message[0] && v->status != WARD_STATUS_SETUP_FAILED)
		print_error(&v->setup); /* e.g. the program could not be executed */
	if (v->limit)
		fprintf(stderr, "ward: %s: %s limit (%llu) reached\n", ward_status_name(v->status),
			v->limit, (unsigned long long)v->limit_value);
	else if (v->status == WARD_STATUS_KILLED)
		fprintf(stderr, "ward: killed: the run was cancelled\n");
	else if (v->status == WARD_STATUS_SIGNALED)
		fprintf(stderr, "ward: killed by signal %d (%s)\n", v->signal, strsignal(v->signal));
	if (o->verbose) {
		fprintf(stderr, "ward: %s in %llu ms, sandbox %s", ward_status_name(v->status),
			(unsigned long long)v->usage.wall_ms, v->sandbox_id);
		for (int i = 0; i < WARD_LAYER_COUNT; i++)
			if (v->degraded & (1u << i))
				fprintf(stderr, ", %s degraded", ward_layer_name((enum ward_layer)i));
		fputc('\n', stderr);
	}
}

/* The lint is read by the Python kernel alone; `ward run` starts a program,
 * not a kernel, so a lint would be silently ignored: refuse it instead. */
static int refuse_lint(const struct ward_cli_run *o, const struct ward_policy *p,
		       struct ward_error *err)
{
	const char *field = p->n_lint_deny_imports ? "lint.deny_imports"
			    : p->n_lint_deny_calls ? "lint.deny_calls" : NULL;
	if (!field)
		return 0;
	return ward_error_set(err, EINVAL, "cli",
			      "%s%s%s: ward run cannot apply a lint: it starts a program, not a "
			      "language kernel; only the python kernel applies it (ward exec "
			      "--lang python, ward call, the HTTP API)",
			      o->policy_file ? o->policy_file : "", o->policy_file ? ": " : "",
			      field);
}

int ward_cli_egress_new(const struct ward_cli_run *o, const struct ward_policy *p,
			struct ward_egress **out, struct ward_error *err)
{
	*out = NULL;
	if (p->network.mode != WARD_NET_ALLOWLIST)
		return 0;
	/* no state_dir: `ward run` keeps its interception CA in memory, for
	 * this run only */
	struct ward_egress_config cfg = {
		.resolve = (const char *const *)o->egress_resolve,
		.n_resolve = o->n_egress_resolve,
		.allow_private = (const char *const *)o->egress_allow_private,
		.n_allow_private = o->n_egress_allow_private,
		.dns_servers = (const char *const *)o->egress_dns,
		.n_dns_servers = o->n_egress_dns,
		.ca_file = o->egress_ca,
	};
	return ward_egress_new(&cfg, out, err);
}

int ward_cli_run(int argc, char **argv)
{
	struct ward_cli_run *o = calloc(1, sizeof(*o));
	struct ward_error err;
	struct ward_policy policy;
	memset(&policy, 0, sizeof(policy));
	ward_error_clear(&err);
	int status = EXIT_USAGE;
	if (!o)
		return EXIT_SETUP;
	if (ward_cli_parse_run(argc, argv, o, &err) < 0) {
		print_error(&err);
		goto out;
	}
	if (o->help) {
		fputs(ward_cli_run_usage, stdout);
		status = 0;
		goto out;
	}
	if (o->version) {
		printf("ward %s\n", WARD_VERSION_STRING);
		status = 0;
		goto out;
	}
	if (ward_cli_build_policy(o, &policy, &err) < 0) {
		print_error(&err);
		goto out;
	}
	if (o->print_policy) {
		char *s = ward_policy_to_json(&policy);
		status = s ? 0 : EXIT_SETUP;
		if (s)
			puts(s);
		free(s);
		goto out;
	}
	if (refuse_lint(o, &policy, &err) < 0) {
		print_error(&err);
		goto out;
	}
	/* Leftovers of supervisors that were killed are removed, at most once
	 * per GC_INTERVAL_S: a scan costs a lookup per live sandbox. */
	char rundir[PATH_MAX];
	int rfd = ward_rundir_open(rundir, sizeof(rundir));
	ward_cgroup_gc_every(NULL, rfd, "cgroup-gc.stamp", GC_INTERVAL_S, NULL);
	if (rfd >= 0)
		close(rfd);

	struct ward_egress *egress = NULL;
	if (ward_cli_egress_new(o, &policy, &egress, &err) < 0) {
		print_error(&err);
		status = EXIT_SETUP;
		goto out;
	}
	struct ward_run_options opts = {
		.output = o->json ? WARD_OUTPUT_CAPTURE : WARD_OUTPUT_PASSTHROUGH,
		.stdin_fd = o->stdin ? 0 : -1,
		.verbose = o->verbose,
		.cancel_fd = ward_cli_cancel_fd(),
		.egress = egress,
	};
	struct ward_verdict v;
	ward_verdict_init(&v);
	/* The verdict and the exit status come first; the teardown after, but
	 * before this returns: nothing of the sandbox outlives `ward run`. */
	struct ward_sandbox *sb;
	int r = ward_run_ended(&policy, o->argv, &opts, &v, &err, &sb);
	if (r < 0 && !o->json)
		print_error(&err);
	if (o->json) {
		char *s = ward_verdict_to_json(&v);
		if (s)
			puts(s);
		free(s);
	} else {
		ward_cli_note_degraded(o, &policy, &v);
		print_summary(o, &v);
	}
	status = ward_cli_exit_status(&v);
	fflush(stdout);
	ward_sandbox_release(sb);
	ward_egress_free(egress); /* after the release: it detached there */
	ward_verdict_release(&v);
out:
	ward_policy_release(&policy);
	free(o);
	return status;
}

int ward_cli_gc(int argc, char **argv)
{
	(void)argv;
	if (argc > 1) {
		fputs("usage: ward gc\n\nRemoves cgroups left by ward supervisors that no longer run,\n"
		      "and /etc templates no run has used for a day.\n",
		      argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
			      ? stdout : stderr);
		return argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) ? 0 : EXIT_USAGE;
	}
	struct ward_error err;
	ward_error_clear(&err);
	int n = ward_cgroup_gc(NULL, &err);
	if (n < 0) {
		print_error(&err);
		return 1;
	}
	printf("ward: removed %d leftover sandbox%s\n", n, n == 1 ? "" : "es");
	/* and the /etc templates no run has used for a day */
	char dir[PATH_MAX];
	int fd = ward_rundir_open(dir, sizeof(dir));
	int t = fd >= 0 ? ward_etc_template_gc(fd) : 0;
	if (fd >= 0)
		close(fd);
	if (t > 0)
		printf("ward: removed %d unused template%s from '%s'\n", t, t == 1 ? "" : "s", dir);
	return 0;
}
