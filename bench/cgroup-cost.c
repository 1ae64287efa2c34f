/* bench/cgroup-cost.c — what a sandbox's cgroup costs: create (with the
 * default limits), move a fresh child in, kill, destroy; N times, median.
 * A benchmark, not a test: run as root on a host with a usable hierarchy. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/util.h"
#include "cgroup.h"

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 200;
	if (n < 1 || n > 100000)
		n = 200;
	uint64_t *setup = calloc((size_t)n, sizeof(*setup)), *teardown = calloc((size_t)n, sizeof(*teardown));
	if (!setup || !teardown || ward_cgroup_detect(NULL) == WARD_CGROUP_NONE) {
		fprintf(stderr, "cgroup-cost: no usable cgroup hierarchy (run as root)\n");
		return 1;
	}
	struct ward_cgroup_limits lim = { .memory = 512u << 20, .pids = 128, .lean = true };
	for (int i = 0; i < n; i++) {
		struct ward_cgroup cg;
		struct ward_error err;
		char name[96];
		memset(&cg, 0, sizeof(cg));
		cg.unified_fd = -1;
		ward_cgroup_make_name(name, sizeof(name), NULL);
		pid_t child = fork();
		if (child == 0) {
			pause();
			_exit(0);
		}
		uint64_t t0 = ward_now_ns();
		if (ward_cgroup_create(&cg, NULL, name, &lim, &err) < 0 ||
		    ward_cgroup_attach(&cg, child, false, &err) < 0) {
			fprintf(stderr, "cgroup-cost: %s\n", err.message);
			kill(child, SIGKILL);
			waitpid(child, NULL, 0);
			return 1;
		}
		uint64_t t1 = ward_now_ns();
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		uint64_t t2 = ward_now_ns();
		ward_cgroup_destroy(&cg, NULL);
		uint64_t t3 = ward_now_ns();
		setup[i] = t1 - t0;
		teardown[i] = t3 - t2;
	}
	qsort(setup, (size_t)n, sizeof(*setup), cmp);
	qsort(teardown, (size_t)n, sizeof(*teardown), cmp);
	printf("cgroup per sandbox (%s, %d runs): setup median %.3f ms (p90 %.3f), "
	       "teardown median %.3f ms (p90 %.3f)\n",
	       ward_cgroup_detect(NULL) == WARD_CGROUP_V2 ? "v2" : "v1", n,
	       (double)setup[n / 2] / 1e6, (double)setup[n * 9 / 10] / 1e6,
	       (double)teardown[n / 2] / 1e6, (double)teardown[n * 9 / 10] / 1e6);
	free(setup);
	free(teardown);
	return 0;
}
