/* tests/integration/t-library.c — the library API over many runs in one
 * process: every status comes back right, and the supervisor keeps no fd,
 * no child and no cgroup from one run to the next. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../unit/tap.h"
#include "ward/ward.h"

static int count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n - 1; /* the directory's own fd */
}

struct payload {
	const char *field, *value;
	const char *argv[5];
	enum ward_status want;
};

int main(int argc, char **argv)
{
	int runs = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 100;
	static const struct payload payloads[] = {
		{ NULL, NULL, { "/bin/true" }, WARD_STATUS_OK },
		{ NULL, NULL, { "/bin/sh", "-c", "exit 3" }, WARD_STATUS_ERROR },
		{ "limits.timeout", "0.2", { "/bin/sleep", "10" }, WARD_STATUS_TIMEOUT },
		{ NULL, NULL, { "/bin/sh", "-c", "kill -SEGV $$" }, WARD_STATUS_SIGNALED },
		{ "limits.output", "1K", { "/bin/sh", "-c", "yes | head -c 100000" },
		  WARD_STATUS_OUTPUT_LIMIT },
		{ "limits.workspace_size", "1M", { "/bin/sh", "-c", "cat /dev/zero > /workspace/f" },
		  WARD_STATUS_DISK_LIMIT },
		{ NULL, NULL, { "/nonexistent" }, WARD_STATUS_ERROR },
	};
	struct sigaction sa = { .sa_handler = SIG_IGN };
	sigaction(SIGPIPE, &sa, NULL);
	int fds_before = count_fds();
	int wrong = 0;
	for (int i = 0; i < runs; i++) {
		const struct payload *pl = &payloads[(size_t)i % (sizeof(payloads) / sizeof(payloads[0]))];
		struct ward_policy p;
		struct ward_error err;
		struct ward_verdict v;
		if (ward_policy_init(&p, &err) < 0 ||
		    (pl->field && ward_policy_set(&p, pl->field, pl->value, "test", &err) < 0)) {
			ok(0, "policy for run %d: %s", i, err.message);
			return tap_done();
		}
		struct ward_run_options o = { .output = WARD_OUTPUT_CAPTURE, .stdin_fd = -1,
					      .cancel_fd = -1 };
		ward_verdict_init(&v);
		ward_run(&p, (char *const *)pl->argv, &o, &v, &err);
		if (v.status != pl->want) {
			wrong++;
			diag("run %d (%s): got %s, want %s: %s", i, pl->argv[0],
			     ward_status_name(v.status), ward_status_name(pl->want), err.message);
		}
		ward_verdict_release(&v);
		ward_policy_release(&p);
	}
	is_int(wrong, 0, "%d runs, every status as expected", runs);
	is_int(count_fds(), fds_before, "no fd kept by the supervisor");
	is_int(waitpid(-1, NULL, WNOHANG), -1, "no child left to reap");
	ok(errno == ECHILD, "no child at all (ECHILD)");
	return tap_done();
}
