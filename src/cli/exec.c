/* src/cli/exec.c — `ward exec` and `ward call`: code in, results out.
 *
 * A thin front end of the service core (include/ward/service.h): the
 * options, files and cells are read and checked here, then one execution
 * runs in a core of this process's own, driven by a private loop; its
 * events (streams, results, errors) are printed as they come, and the end
 * prints for a person (terminal) or as one JSON verdict (--json) — the same
 * execution, result builder and verdict as `POST /v1/executions`. Exit
 * status: 0 when every cell ran cleanly, 1 when code raised, 3 for a lint
 * hit (policy_violation), 4 when a clean run's --artifacts could not be
 * copied (the reason on stderr), otherwise as `ward run` (125 setup, 128+N
 * killed by a limit or signal).
 */
#include <fcntl.h>
#include <jansson.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/util.h"
#include "config.h"
#include "exec.h"
#include "options.h"
#include "run.h"
#include "status.h"
#include "server/keys.h"
#include "ward/egress.h"
#include "ward/kernel.h"
#include "ward/result.h"
#include "ward/service.h"
#include "workspace.h"

enum { EXIT_USAGE = 2, EXIT_LINT = 3, EXIT_ARTIFACTS = 4, EXIT_SETUP = 125 };

static void print_bundle(json_t *data, const char *prefix)
{
	json_t *plain = json_object_get(data, "text/plain");
	const char *key;
	json_t *val;
	if (json_is_string(plain)) { /* whole, past any NUL byte */
		fputs(prefix, stdout);
		fwrite(json_string_value(plain), 1, json_string_length(plain), stdout);
		putchar('\n');
	}
	json_object_foreach(data, key, val) {
		if (strcmp(key, "text/plain") == 0)
			continue;
		char *dumped = json_is_string(val) ? NULL : json_dumps(val, JSON_ENCODE_ANY | JSON_COMPACT);
		size_t n = dumped ? strlen(dumped) : json_string_length(val);
		free(dumped);
		printf("%s[%s, %zu bytes; use --json to get it]\n", prefix, key, n);
	}
	/* streams are written straight to the fds: keep the order */
	fflush(stdout);
}

static void print_error(json_t *c)
{
	json_t *tb = json_object_get(c, "traceback"), *line;
	const char *name = json_string_value(json_object_get(c, "ename"));
	const char *value = json_string_value(json_object_get(c, "evalue"));
	bool said = false;
	size_t i;
	json_array_foreach(tb, i, line) {
		const char *l = json_string_value(line);
		if (!l)
			continue;
		fprintf(stderr, "%s\n", l);
		/* Python's traceback ends with "Name: value", node's starts so */
		said = said || (name && strncmp(l, name, strlen(name)) == 0);
	}
	if (!said)
		fprintf(stderr, "%s: %s\n", name ? name : "Error", value ? value : "");
	const char *hint = json_string_value(json_object_get(c, "hint"));
	if (hint)
		fprintf(stderr, "hint: %s\n", hint);
}

/* Without --json, each event as it comes: streams to the fds (what the
 * cap kept), bundles and errors in words. */
static void print_event(json_t *ev, void *ctx)
{
	(void)ctx;
	const char *type = json_string_value(json_object_get(ev, "event"));
	json_t *c = json_object_get(ev, "content");
	if (strcmp(type, "stream") == 0) {
		const char *name = json_string_value(json_object_get(ev, "name"));
		json_t *t = json_object_get(ev, "text");
		ward_write_all(strcmp(name, "stderr") == 0 ? 2 : 1, json_string_value(t),
			       json_string_length(t));
	} else if (strcmp(type, "result") == 0) {
		print_bundle(json_object_get(ev, "data"), "");
	} else if (strcmp(type, "error") == 0) {
		print_error(c);
	} else if (strcmp(type, "policy_violation") == 0) {
		fprintf(stderr, "ward: policy_violation: %s (line %lld, column %lld)\n",
			json_string_value(json_object_get(c, "message")) ?: "lint",
			json_integer_value(json_object_get(c, "line")),
			json_integer_value(json_object_get(c, "col")));
	}
}

/* --file HOST[:PATH]: PATH is relative to /workspace (or absolute under it);
 * without it, the host file's name. */
static int load_file(const char *spec, struct ward_file *f, uint64_t max, struct ward_error *err)
{
	const char *colon = strchr(spec, ':');
	char host[4096];
	size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
	if (n == 0 || n >= sizeof(host))
		return ward_error_set(err, EINVAL, "cli", "--file: expected HOST[:PATH], got '%s'", spec);
	memcpy(host, spec, n);
	host[n] = '\0';
	const char *inside = colon ? colon + 1 : strrchr(host, '/') ? strrchr(host, '/') + 1 : host;
	if (strncmp(inside, "/workspace/", 11) == 0)
		inside += 11;
	if (!ward_workspace_path_ok(inside))
		return ward_error_set(err, EINVAL, "cli",
				      "--file: '%s': the path must be inside /workspace", inside);
	char *data;
	size_t len;
	int r = ward_cli_read_regular(host, "--file", (size_t)max, &data, &len, err);
	if (r < 0)
		return r;
	char *p = strdup(inside);
	if (!p) {
		free(data);
		return ward_error_set(err, ENOMEM, "cli", "out of memory");
	}
	*f = (struct ward_file){ .path = p, .data = data, .len = len, .mode = 0644 };
	return 0;
}

static char *load_cell(const struct ward_cli_cell *c, struct ward_error *err)
{
	if (!c->from_file)
		return strdup(c->text);
	char *data = NULL;
	size_t len;
	int r = strcmp(c->text, "-") == 0 ? ward_read_file("/dev/stdin", 16u << 20, &data, &len)
					  : ward_read_file(c->text, 16u << 20, &data, &len);
	if (r < 0)
		ward_error_set(err, -r, "cli", "unable to read '%s'", c->text);
	return data;
}

struct job {
	struct ward_cli_run *o;
	struct ward_policy policy;
	struct ward_file files[WARD_CLI_MAX_FILES];
	size_t n_files;
	char *codes[WARD_CLI_MAX_CELLS]; /* exec: the cells, loaded before start */
	char *tool_src;         /* call: the tool file */
	json_t *args;           /* call: the arguments */
	bool artifacts_failed;  /* --artifacts DIR could not be filled */
};

/* The core's events: the builder's, printed as they come (terminal). */
static void on_event(void *ctx, const struct ward_event *ev)
{
	if (ev->kind == WARD_EVENT_STREAM && ev->data)
		print_event(ev->data, ctx);
}

static void print_json(json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	if (s)
		puts(s);
	free(s);
}

/* The call's value (or its error), for a person. */
static void print_call(const struct ward_result *r)
{
	if (r->value) {
		char *s = json_dumps(r->value, JSON_ENCODE_ANY | JSON_INDENT(2));
		if (s)
			puts(s);
		free(s);
	} else if (r->error) {
		print_error(r->error);
	}
}

static void print_terminal(struct job *j, const struct ward_execution *ex)
{
	const struct ward_verdict *v = ward_execution_verdict(ex);
	const struct ward_result *r = ward_execution_output(ex);
	if (j->o->mode == WARD_CLI_CALL && !r->died)
		print_call(r);
	if (j->o->quiet)
		return;
	ward_cli_note_degraded(j->o, &j->policy, v);
	if (r->died && v->status != WARD_STATUS_SETUP_FAILED) { /* that one says its layer below */
		json_t *e = ward_kernel_limit_error(v, &j->policy);
		fprintf(stderr, "ward: %s: %s\n", json_string_value(json_object_get(e, "name")),
			json_string_value(json_object_get(e, "hint")));
		json_decref(e);
	}
	size_t i;
	json_t *a;
	json_array_foreach(r->artifacts, i, a)
		fprintf(stderr, "ward: artifact %s (%lld bytes, %s)%s\n",
			json_string_value(json_object_get(a, "path")),
			json_integer_value(json_object_get(a, "size")),
			json_string_value(json_object_get(a, "mime_type")),
			json_is_true(json_object_get(a, "copied")) ? ", copied" : "");
	json_array_foreach(r->skipped, i, a)
		fprintf(stderr, "ward: artifact %s skipped: %s\n",
			json_string_value(json_object_get(a, "path")),
			json_string_value(json_object_get(a, "reason")));
	if (v->status == WARD_STATUS_SETUP_FAILED) {
		char buf[1024];
		fprintf(stderr, "ward: error: %s\n", ward_error_format(&v->setup, buf, sizeof(buf)));
	}
}

static const char exec_usage[] =
	"usage: ward exec --lang python|node|bash [OPTIONS] [-c CODE]... [-f FILE]... [-]\n"
	"       ward call --lang python -f TOOL.py --function NAME|Class.method [--args JSON]\n"
	"\n"
	"Runs code in a language kernel inside a fresh sandbox. Cells share one\n"
	"namespace (variables persist); the value of a cell's last expression is its\n"
	"result. Exit status: 0 ok, 1 the code raised, 3 policy_violation, 4 the\n"
	"artifacts could not be copied, 125 setup failed, 128+N killed by a limit\n"
	"or signal N.\n"
	"\n"
	"  -l, --lang LANG        python, node or bash\n"
	"  -c, --code CODE        a cell (repeatable)\n"
	"  -f, --cell-file FILE   a cell from a file (exec); the tool file (call)\n"
	"  -                      a cell from stdin\n"
	"  --keep-going           run later cells after one fails\n"
	"  --function NAME        call: the function, or Class.method (instantiated)\n"
	"  --args JSON            call: arguments, an object (by name) or array\n"
	"  --file HOST[:PATH]     copy a host file into /workspace first\n"
	"  --artifacts DIR        copy files the code created or changed to DIR\n"
	"  --json                 print one JSON verdict with results and artifacts\n"
	"  --print-policy         print the effective policy as JSON and exit\n"
	"  and the policy options of 'ward run' (--policy, --memory, --timeout, ...)\n";

/* Everything the code needs is read and checked before any sandbox exists. */
static int load_code(struct job *j, struct ward_error *err)
{
	if (j->o->mode == WARD_CLI_EXEC) {
		for (size_t i = 0; i < j->o->n_cells; i++)
			if (!(j->codes[i] = load_cell(&j->o->cells[i], err)))
				return -EINVAL;
		return 0;
	}
	size_t len;
	int r = ward_read_file(j->o->tool_file, 16u << 20, &j->tool_src, &len);
	if (r < 0)
		return ward_error_set(err, -r, "cli", "-f: unable to read '%s'", j->o->tool_file);
	json_error_t je;
	j->args = json_loads(j->o->args ? j->o->args : "{}", 0, &je);
	if (!j->args)
		return ward_error_set(err, EINVAL, "cli", "--args: invalid JSON at column %d: %s",
				      je.column, json_error_code(&je) == json_error_null_character
						 ? "a \\u0000 escape is not allowed" : je.text);
	if (!json_is_object(j->args) && !json_is_array(j->args))
		return ward_error_set(err, EINVAL, "cli", "--args: expected a JSON object or array");
	return 0;
}

/* --artifacts DIR: refused before anything runs when a symlink is in its
 * path; the library checks again, atomically, when it opens DIR. */
static int check_artifacts_dir(const char *dir, struct ward_error *err)
{
	struct open_how how = { .flags = O_PATH | O_CLOEXEC,
				.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	int fd = (int)syscall(SYS_openat2, AT_FDCWD, dir, &how, sizeof(how));
	if (fd >= 0) {
		struct stat st;
		bool is_dir = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
		close(fd);
		if (!is_dir)
			return ward_error_set(err, EINVAL, "cli", "--artifacts: '%s' is not a directory",
					      dir);
		return 0;
	}
	if (errno == ELOOP)
		return ward_error_set(err, EINVAL, "cli",
				      "--artifacts: '%s' is, or passes through, a symbolic link "
				      "(ward never writes through one; give the real path)", dir);
	return 0; /* missing: created at the end, beneath its parent */
}

static int setup_job(struct job *j, struct ward_error *err)
{
	int r = ward_cli_build_policy(j->o, &j->policy, err);
	if (r < 0)
		return r;
	if (j->o->artifacts_dir && (r = check_artifacts_dir(j->o->artifacts_dir, err)) < 0)
		return r;
	if (ward_lang_from_name(j->o->lang) < 0)
		return ward_error_set(err, EINVAL, "cli", "--lang: expected python, node or bash, got '%s'",
				      j->o->lang);
	for (size_t i = 0; i < j->o->n_files; i++) {
		if ((r = load_file(j->o->files[i], &j->files[i], j->policy.workspace_size, err)) < 0)
			return r;
		j->n_files++;
	}
	return load_code(j, err);
}

static void release_job(struct job *j)
{
	for (size_t i = 0; i < j->n_files; i++) {
		free((void *)j->files[i].path);
		free((void *)j->files[i].data);
	}
	json_decref(j->args);
	free(j->tool_src);
	for (size_t i = 0; i < WARD_CLI_MAX_CELLS; i++)
		free(j->codes[i]);
	ward_policy_release(&j->policy);
}

/* What the core takes: the job's policy (a copy), files, cells or call,
 * handed over. 0 or -ENOMEM. */
static int make_spec(struct job *j, struct ward_exec_spec *sp)
{
	memset(sp, 0, sizeof(*sp));
	sp->lang = ward_lang_from_name(j->o->lang);
	sp->keep_going = j->o->keep_going;
	sp->artifacts_dir = j->o->artifacts_dir;
	sp->events = !j->o->json;
	struct ward_error e;
	if (ward_policy_copy(&sp->policy, &j->policy, &e) < 0)
		return -ENOMEM;
	if (j->n_files && !(sp->files = calloc(j->n_files, sizeof(*sp->files))))
		return -ENOMEM;
	for (; sp->n_files < j->n_files; sp->n_files++)
		sp->files[sp->n_files] = j->files[sp->n_files];
	j->n_files = 0;
	if (j->o->mode == WARD_CLI_CALL) {
		const char *base = strrchr(j->o->tool_file, '/');
		sp->call_source = j->tool_src;
		sp->call_args = j->args;
		j->tool_src = NULL;
		j->args = NULL;
		sp->call_filename = strdup(base ? base + 1 : j->o->tool_file);
		sp->call_function = strdup(j->o->function);
		return sp->call_filename && sp->call_function ? 0 : -ENOMEM;
	}
	if (!(sp->cells = calloc(j->o->n_cells ? j->o->n_cells : 1, sizeof(char *))))
		return -ENOMEM;
	for (; sp->n_cells < j->o->n_cells; sp->n_cells++) {
		sp->cells[sp->n_cells] = j->codes[sp->n_cells];
		j->codes[sp->n_cells] = NULL;
	}
	return 0;
}

/* Runs the job in a core of this process's own and prints what comes;
 * returns the exit status. The loop is the front end's: the core's fd, its
 * timeout, and its dispatch, until the execution is done. */
static int drive(struct job *j, struct ward_error *err)
{
	struct ward_service_config c;
	ward_service_config_defaults(&c);
	c.embedded = true;
	struct ward_service *svc = NULL;
	struct ward_exec_spec sp;
	struct ward_reply reply;
	memset(&reply, 0, sizeof(reply));
	struct ward_key_info key;
	memset(&key, 0, sizeof(key));
	ward_strlcpy(key.tenant, "cli", sizeof(key.tenant));
	int status = EXIT_SETUP;
	/* network.mode "allowlist": this run's proxy, lent to the core */
	struct ward_egress *egress = NULL;
	if (ward_cli_egress_new(j->o, &j->policy, &egress, err) < 0) {
		ward_cli_print_error(err);
		ward_service_config_release(&c);
		return status;
	}
	c.egress = egress;
	if (ward_service_new(&c, &svc) < 0 || make_spec(j, &sp) < 0) {
		ward_error_set(err, ENOMEM, "cli", "out of memory");
		ward_cli_print_error(err);
	} else if (ward_service_run(svc, &key, &sp, &reply) == 0 && reply.ex) {
		struct ward_sink sink = { .ctx = NULL, .event = on_event };
		ward_execution_watch(reply.ex, &sink);
		while (!ward_execution_done(reply.ex)) {
			struct pollfd p = { .fd = ward_service_fd(svc), .events = POLLIN };
			poll(&p, 1, ward_service_timeout(svc));
			ward_service_dispatch(svc);
		}
		const struct ward_error *aerr = ward_execution_artifacts_error(reply.ex);
		if (aerr)
			fprintf(stderr, "ward: %s: %s\n", aerr->layer, aerr->message);
		j->artifacts_failed = aerr && j->o->artifacts_dir;
		if (j->o->json)
			print_json(ward_execution_result(reply.ex));
		else
			print_terminal(j, reply.ex);
		status = ward_cli_exit_status(ward_execution_verdict(reply.ex));
		/* the code's own failure says more; a clean run whose files were
		 * not delivered must not look like success */
		if (status == 0 && j->artifacts_failed)
			status = EXIT_ARTIFACTS;
	} else {
		fprintf(stderr, "ward: error: %s\n", reply.err.message);
	}
	ward_reply_release(&reply);
	ward_service_free(svc);
	c.egress = NULL; /* borrowed by the core, ours to free after it */
	ward_service_config_release(&c);
	ward_egress_free(egress);
	return status;
}

/* --print-policy: the effective policy (file, then flags), nothing run. */
static int print_policy(const struct ward_cli_run *o, struct ward_error *err)
{
	struct ward_policy p;
	memset(&p, 0, sizeof(p));
	int status = EXIT_USAGE;
	if (ward_cli_build_policy(o, &p, err) < 0) {
		ward_cli_print_error(err);
	} else {
		char *s = ward_policy_to_json(&p);
		status = s ? 0 : EXIT_SETUP;
		if (s)
			puts(s);
		free(s);
	}
	ward_policy_release(&p);
	return status;
}

int ward_cli_code(int mode, int argc, char **argv)
{
	struct job j;
	memset(&j, 0, sizeof(j));
	struct ward_cli_run *o = calloc(1, sizeof(*o));
	struct ward_error err;
	ward_error_clear(&err);
	if (!o)
		return EXIT_SETUP;
	j.o = o;
	int status = EXIT_USAGE;
	if (ward_cli_parse((enum ward_cli_mode)mode, argc, argv, o, &err) < 0) {
		ward_cli_print_error(&err);
		goto out;
	}
	if (o->help) {
		fputs(exec_usage, stdout);
		status = 0;
		goto out;
	}
	if (o->version) {
		printf("ward %s\n", WARD_VERSION_STRING);
		status = 0;
		goto out;
	}
	if (o->print_policy) {
		status = print_policy(o, &err);
		goto out;
	}
	if (setup_job(&j, &err) < 0) {
		ward_cli_print_error(&err);
		goto out;
	}
	/* SIGINT keeps its default: ward dies, the sandbox dies with it (its
	 * init's parent-death signal) and the next ward removes the cgroup. */
	status = drive(&j, &err);
out:
	release_job(&j);
	free(o);
	return status;
}
