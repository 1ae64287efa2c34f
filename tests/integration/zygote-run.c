/* tests/integration/zygote-run.c — drives the launcher and the zygote for
 * the t08NN-zygote tests and bench/zygote.sh.
 *
 *   zygote-run run [--launcher] [--runs N] [--ballast MIB] [--quiet] -- ARGV...
 *       runs ARGV N times (cold clone, or through a launcher), prints the
 *       (--hold: "hold launcher=L init=I self=S" once started)
 *       program's stdout of the first run, then one line of figures:
 *       "status=ok runs=N start_us=A start_cpu_us=C total_us=B" (A: the
 *       supervisor's side of a start, prepare + claim, wall; C: the CPU
 *       time it spent on it; B: start to verdict), averages.
 *       --ballast touches MIB of heap first, as a daemon holding many
 *       sessions would have; --live N keeps N sandboxes (sleep) alive
 *       meanwhile, started the cold way, with their fds and children;
 *       --kill-launcher kills the launcher after the first run;
 *       --zygote: through a python zygote (no modules) instead.
 *   zygote-run kernel [--zygote MODULES|-] [--runs N] [--quiet] CODE...
 *       per run: prepares a python kernel (cold, or forked by a zygote
 *       preloading MODULES, comma-separated, "-" for none), executes each
 *       CODE as one cell, prints the output of the first run, stops it;
 *       then "status=ok runs=N ready_us=A stop_us=S total_us=B zygote_pid=P"
 *       (A: prepare and claim; S: ward_kernel_stop).
 *       Each run's output is prefixed by nothing: tests compare runs.
 *   --hold: before stopping the last kernel, print "hold zygote=Z
 *       sibling=S child=C" (C: the kernel sandbox's init) and wait for a
 *       line on stdin. --sibling: another kernel of the zygote lives
 *       meanwhile; {zygote} and {sibling} in CODE become their pids.
 *   --keep N: then N kernels at once, each having run the first CODE:
 *       prints "kept ZYGOTE PID..." (the zygote, 0 when cold, then the
 *       kernels' inits), waits for a line on stdin.
 *   --ro HOST:INSIDE, --env NAME=VALUE: added to the policy (both).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "ward/kernel.h"
#include "ward/sandbox.h"
#include "ward/ward.h"
#include "ward/zygote.h"

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* CPU time of this process (not its children): the supervisor's own cost. */
static uint64_t cpu_us(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static int die(const char *what, const struct ward_error *err)
{
	fprintf(stderr, "zygote-run: %s: %s: %s (%s)\n", what, err->layer, err->message,
		strerror(err->code));
	return 1;
}

/* Reads the program's stdout and stderr to EOF; prints stdout when asked. */
static void drain(struct ward_sandbox *sb, bool print)
{
	struct pollfd p[2] = { { .fd = ward_sandbox_stdout(sb), .events = POLLIN },
			       { .fd = ward_sandbox_stderr(sb), .events = POLLIN } };
	int open_ = 2;
	while (open_ > 0) {
		int t = ward_sandbox_check(sb);
		if (poll(p, 2, t < 0 ? 1000 : t) <= 0)
			continue;
		for (int i = 0; i < 2; i++) {
			if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP)))
				continue;
			char buf[4096];
			ssize_t n = read(p[i].fd, buf, sizeof(buf));
			if (n <= 0) {
				p[i].fd = -1;
				open_--;
			} else if (print) {
				fwrite(buf, 1, (size_t)n, i == 0 ? stdout : stderr);
			}
		}
	}
}

/* --ro HOST:INSIDE and --env NAME=VALUE, for both commands. */
static int policy_option(struct ward_policy *p, int argc, char **argv, int *i,
			 struct ward_error *err)
{
	if (strcmp(argv[*i], "--ro") == 0 && *i + 1 < argc)
		return ward_policy_set(p, "mounts.ro", argv[++*i], "--ro", err) < 0 ? -1 : 1;
	if (strcmp(argv[*i], "--env") == 0 && *i + 1 < argc)
		return ward_policy_set(p, "env", argv[++*i], "--env", err) < 0 ? -1 : 1;
	return 0;
}

/* Replaces {zygote} and {sibling} in code with the pids given. */
static char *subst(const char *code, int zygote, int sibling)
{
	size_t cap = strlen(code) * 2 + 64, n = 0;
	char *out = malloc(cap);
	for (const char *c = code; out && *c && n + 24 < cap; c++) {
		const char *keys[] = { "{zygote}", "{sibling}" };
		int vals[] = { zygote, sibling };
		size_t k = 0;
		for (; k < 2; k++)
			if (strncmp(c, keys[k], strlen(keys[k])) == 0)
				break;
		if (k < 2) {
			n += (size_t)snprintf(out + n, cap - n, "%d", vals[k]);
			c += strlen(keys[k]) - 1;
		} else {
			out[n++] = *c;
		}
	}
	if (out)
		out[n] = '\0';
	return out;
}

static int cmd_run(int argc, char **argv)
{
	bool use_launcher = false, quiet = false, hold = false, kill_launcher = false, zyg = false;
	long runs = 1, ballast = 0, live = 0;
	struct ward_error err;
	struct ward_policy p;
	if (ward_policy_init(&p, &err) < 0)
		return die("policy", &err);
	int i = 0;
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--live") == 0 && i + 1 < argc) {
			live = strtol(argv[++i], NULL, 10);
			continue;
		}
		int po = policy_option(&p, argc, argv, &i, &err);
		if (po < 0)
			return die("policy", &err);
		if (po > 0)
			continue;
		if (strcmp(argv[i], "--launcher") == 0)
			use_launcher = true;
		else if (strcmp(argv[i], "--zygote") == 0)
			zyg = true;
		else if (strcmp(argv[i], "--quiet") == 0)
			quiet = true;
		else if (strcmp(argv[i], "--hold") == 0)
			hold = true;
		else if (strcmp(argv[i], "--kill-launcher") == 0)
			kill_launcher = true;
		else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
			runs = strtol(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--ballast") == 0 && i + 1 < argc)
			ballast = strtol(argv[++i], NULL, 10);
	}
	if (i + 1 >= argc)
		return fprintf(stderr, "zygote-run run: no program\n"), 2;
	char **prog = argv + i + 1;
	struct ward_launcher *l = NULL;
	if (use_launcher && !(l = ward_launcher_start(&err)))
		return die("launcher", &err);
	static const char *const no_modules[] = { NULL };
	struct ward_zygote *z = NULL;
	if (zyg && !(z = ward_zygote_start(WARD_LANG_PYTHON, no_modules, NULL, &err)))
		return die("zygote", &err);
	if (z)
		l = ward_zygote_launcher(z);
	if (ballast > 0) {
		size_t n = (size_t)ballast << 20;
		char *b = malloc(n);
		if (b)
			memset(b, 1, n); /* kept: the daemon's state */
	}
	/* --live N: N sandboxes alive meanwhile, started the cold way, as a
	 * daemon's sessions are: their fds, cgroups and children */
	struct ward_sandbox **held = live > 0 ? calloc((size_t)live, sizeof(*held)) : NULL;
	char *sleeper[] = { "/bin/sleep", "600", NULL };
	for (long k = 0; held && k < live; k++)
		if (ward_sandbox_start(&p, sleeper, NULL, &held[k], &err) < 0)
			return die("live", &err);
	uint64_t start_sum = 0, total_sum = 0, cpu_sum = 0;
	const char *status = "ok";
	for (long r = 0; r < runs; r++) {
		if (kill_launcher && r == 1 && l)
			kill(ward_launcher_pid(l), SIGKILL);
		uint64_t c0 = cpu_us();
		struct ward_sandbox_options so = { .launcher = l };
		struct ward_sandbox *sb;
		uint64_t t0 = now_us();
		if (ward_sandbox_start(&p, prog, &so, &sb, &err) < 0)
			return die("start", &err);
		uint64_t t1 = now_us();
		cpu_sum += cpu_us() - c0;
		if (hold) {
			printf("hold launcher=%d init=%d self=%d\n", l ? (int)ward_launcher_pid(l) : 0,
			       (int)ward_sandbox_pid(sb), (int)getpid());
			fflush(stdout);
		}
		drain(sb, r == 0 && !quiet);
		struct ward_verdict v;
		memset(&v, 0, sizeof(v));
		ward_sandbox_finish(sb, &v, &err);
		total_sum += now_us() - t0;
		start_sum += t1 - t0;
		if (v.status != WARD_STATUS_OK)
			status = ward_status_name(v.status);
		if (r == 0 && !quiet)
			fprintf(stderr, "layers=%#x degraded=%#x\n", v.layers, v.degraded);
	}
	for (long k = 0; held && k < live; k++) {
		struct ward_verdict v;
		memset(&v, 0, sizeof(v));
		ward_sandbox_kill(held[k], WARD_KILL_CANCEL);
		ward_sandbox_finish(held[k], &v, &err);
	}
	free(held);
	printf("status=%s runs=%ld start_us=%llu start_cpu_us=%llu total_us=%llu\n", status, runs,
	       (unsigned long long)(start_sum / (uint64_t)runs),
	       (unsigned long long)(cpu_sum / (uint64_t)runs),
	       (unsigned long long)(total_sum / (uint64_t)runs));
	ward_policy_release(&p);
	if (z)
		ward_zygote_stop(z);
	else
		ward_launcher_stop(l);
	return strcmp(status, "ok") != 0;
}

static void print_msg(json_t *msg, void *ctx)
{
	if (*(bool *)ctx)
		return;
	const char *type = json_string_value(json_object_get(msg, "msg_type"));
	json_t *c = json_object_get(msg, "content");
	if (type && strcmp(type, "stream") == 0)
		fputs(json_string_value(json_object_get(c, "text")) ?: "", stdout);
	else if (type && strcmp(type, "error") == 0)
		printf("error: %s: %s\n", json_string_value(json_object_get(c, "ename")) ?: "",
		       json_string_value(json_object_get(c, "evalue")) ?: "");
	else if (type && strcmp(type, "execute_result") == 0) {
		json_t *d = json_object_get(json_object_get(c, "data"), "text/plain");
		printf("%s\n", json_string_value(d) ?: "");
	}
	fflush(stdout);
}

/* --keep N: N kernels alive at once, each having run code; prints
 * "kept PID..." (their inits) and waits for a line on stdin. */
static int keep_kernels(struct ward_policy *p, struct ward_zygote *z, int zpid, long n,
			const char *code)
{
	struct ward_kernel **ks = calloc((size_t)n, sizeof(*ks));
	struct ward_error err;
	long got = 0;
	for (; ks && got < n; got++) {
		struct ward_kernel_options o = { .lang = WARD_LANG_PYTHON, .zygote = z };
		json_t *reply = NULL;
		bool mute = true;
		if (ward_kernel_prepare(p, WARD_LANG_PYTHON, &o, &ks[got], &err) < 0 ||
		    ward_kernel_claim(ks[got], NULL, 0, &err) < 0 ||
		    ward_kernel_execute(ks[got], code, true, print_msg, &mute, &reply, &err) < 0) {
			die("keep", &err);
			break;
		}
		json_decref(reply);
	}
	printf("kept %d", zpid);
	for (long k = 0; k < got; k++)
		printf(" %d", (int)ward_sandbox_pid(ward_kernel_sandbox(ks[k])));
	printf("\n");
	fflush(stdout);
	char line[16];
	if (!fgets(line, sizeof(line), stdin))
		line[0] = '\0';
	for (long k = 0; k < got; k++) {
		struct ward_verdict v;
		memset(&v, 0, sizeof(v));
		ward_kernel_stop(ks[k], &v, &err);
	}
	free(ks);
	return got == n ? 0 : -1;
}

static int cmd_kernel(int argc, char **argv)
{
	const char *mods = NULL;
	bool quiet = false, hold = false, sibling = false;
	long runs = 1, keep = 0;
	struct ward_error err;
	struct ward_policy p;
	if (ward_policy_init(&p, &err) < 0)
		return die("policy", &err);
	int i = 0;
	for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		int po = policy_option(&p, argc, argv, &i, &err);
		if (po < 0)
			return die("policy", &err);
		if (po > 0)
			continue;
		if (strcmp(argv[i], "--sibling") == 0)
			sibling = true;
		else if (strcmp(argv[i], "--zygote") == 0 && i + 1 < argc)
			mods = argv[++i];
		else if (strcmp(argv[i], "--quiet") == 0)
			quiet = true;
		else if (strcmp(argv[i], "--hold") == 0)
			hold = true;
		else if (strcmp(argv[i], "--keep") == 0 && i + 1 < argc)
			keep = strtol(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
			runs = strtol(argv[++i], NULL, 10);
	}
	struct ward_zygote *z = NULL;
	if (mods) {
		const char *list[65] = { NULL };
		char *copy = strdup(mods), *save = NULL;
		size_t n = 0;
		for (char *t = strtok_r(copy, ",", &save); t && n < 64; t = strtok_r(NULL, ",", &save))
			if (strcmp(t, "-") != 0)
				list[n++] = t;
		if (!(z = ward_zygote_start(WARD_LANG_PYTHON, list, NULL, &err)))
			return die("zygote", &err);
		free(copy);
	}
	int zpid = z ? (int)ward_launcher_pid(ward_zygote_launcher(z)) : 0;
	/* a sibling: another kernel of the same zygote, alive meanwhile */
	struct ward_kernel *sib = NULL;
	struct ward_kernel_options so = { .lang = WARD_LANG_PYTHON, .zygote = z };
	if (sibling && (ward_kernel_prepare(&p, WARD_LANG_PYTHON, &so, &sib, &err) < 0 ||
			ward_kernel_claim(sib, NULL, 0, &err) < 0))
		return die("sibling", &err);
	int spid = sib ? (int)ward_sandbox_pid(ward_kernel_sandbox(sib)) : 0;
	uint64_t ready_sum = 0, total_sum = 0, stop_sum = 0;
	const char *status = "ok";
	uint32_t layers = 0, degraded = 0;
	for (long r = 0; r < runs; r++) {
		struct ward_kernel_options o = { .lang = WARD_LANG_PYTHON, .zygote = z };
		struct ward_kernel *k;
		uint64_t t0 = now_us();
		if (ward_kernel_prepare(&p, WARD_LANG_PYTHON, &o, &k, &err) < 0 ||
		    ward_kernel_claim(k, NULL, 0, &err) < 0)
			return die("prepare", &err);
		uint64_t t1 = now_us();
		bool mute = quiet;
		for (int c = i; c < argc; c++) {
			json_t *reply = NULL;
			char *code = subst(argv[c], zpid, spid);
			int rc = code ? ward_kernel_execute(k, code, true, print_msg, &mute, &reply, &err)
				      : -ENOMEM;
			free(code);
			if (rc < 0)
				break;
			json_decref(reply);
		}
		if (hold && r == runs - 1) {
			printf("hold zygote=%d sibling=%d child=%d\n", zpid, spid,
			       (int)ward_sandbox_pid(ward_kernel_sandbox(k)));
			fflush(stdout);
			char line[16];
			if (!fgets(line, sizeof(line), stdin))
				line[0] = '\0';
		}
		struct ward_verdict v;
		memset(&v, 0, sizeof(v));
		uint64_t t2 = now_us();
		ward_kernel_stop(k, &v, &err);
		stop_sum += now_us() - t2;
		total_sum += now_us() - t0;
		ready_sum += t1 - t0;
		if (v.status != WARD_STATUS_OK)
			status = ward_status_name(v.status);
		layers = v.layers;
		degraded = v.degraded;
	}
	if (keep > 0 && keep_kernels(&p, z, zpid, keep, i < argc ? argv[i] : "pass") < 0)
		status = "keep_failed";
	if (sib) {
		struct ward_verdict v;
		memset(&v, 0, sizeof(v));
		ward_kernel_stop(sib, &v, &err);
	}
	printf("status=%s layers=%#x degraded=%#x runs=%ld ready_us=%llu stop_us=%llu "
	       "total_us=%llu zygote_pid=%d\n",
	       status, layers, degraded, runs, (unsigned long long)(ready_sum / (uint64_t)runs),
	       (unsigned long long)(stop_sum / (uint64_t)runs),
	       (unsigned long long)(total_sum / (uint64_t)runs),
	       zpid);
	ward_policy_release(&p);
	ward_zygote_stop(z);
	return strcmp(status, "ok") != 0;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = SIG_IGN };
	sigaction(SIGPIPE, &sa, NULL);
	if (argc > 1 && strcmp(argv[1], "run") == 0)
		return cmd_run(argc - 2, argv + 2);
	if (argc > 1 && strcmp(argv[1], "kernel") == 0)
		return cmd_kernel(argc - 2, argv + 2);
	fprintf(stderr, "usage: zygote-run run|kernel ...\n");
	return 2;
}
