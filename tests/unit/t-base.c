/* tests/unit/t-base.c — lib/base's shared rules: the id generator and the
 * /proc reader. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h" /* stdio before base/banned.h */
#include "base/util.h"

static bool all_hex(const char *s)
{
	for (; *s; s++)
		if (!strchr("0123456789abcdef", *s))
			return false;
	return true;
}

static void test_ids(void)
{
	char a[32], b[32], small[10];
	is_int(ward_id_new(a, sizeof(a), "ex_", 8), 0, "an execution id");
	is_int(strlen(a), 19, "ex_ and 16 hex digits");
	ok(strncmp(a, "ex_", 3) == 0 && all_hex(a + 3), "prefix then lowercase hex: %s", a);
	is_int(ward_id_new(b, sizeof(b), "ex_", 8), 0, "another");
	ok(strcmp(a, b) != 0, "two ids differ");
	is_int(ward_id_new(a, sizeof(a), NULL, 6), 0, "a key id: no prefix");
	ok(strlen(a) == 12 && all_hex(a), "12 hex digits: %s", a);
	memset(small, 'x', sizeof(small));
	is_int(ward_id_new(small, sizeof(small), "se_", 8), -ERANGE, "too small a buffer is refused");
	is_int(small[0], 'x', "and left untouched");
	is_int(ward_id_new(a, sizeof(a), "", 0), -ERANGE, "no random bytes is refused");
}

static void test_proc(void)
{
	char buf[4096], tiny[8];
	ok(ward_proc_read(WARD_PROC_SELF, "stat", buf, sizeof(buf)) > 0, "reads /proc/self/stat");
	ok(ward_proc_read(getpid(), "stat", tiny, sizeof(tiny)) == -EFBIG,
	   "a file larger than the buffer is -EFBIG, not truncated");
	ok(ward_proc_read(WARD_PROC_ROOT, "sys/kernel/cap_last_cap", buf, sizeof(buf)) > 0 &&
		   strtol(buf, NULL, 10) > 30,
	   "reads /proc/sys/kernel/cap_last_cap");
	struct ward_proc_stat me, child;
	is_int(ward_proc_stat(WARD_PROC_SELF, &me), 0, "stat of self");
	is_int(me.state, 'R', "self is running");
	ok(me.starttime > 0, "a start time");
	/* a child whose comm holds ") " must parse the same way */
	int p[2];
	if (pipe(p) < 0)
		return;
	pid_t pid = fork();
	if (pid == 0) {
		close(p[1]);
		char c;
		if (read(p[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(p[0]);
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	FILE *f = fopen(path, "w");
	if (f) {
		fputs("a) b 9 9", f);
		fclose(f);
	}
	is_int(ward_proc_stat(pid, &child), 0, "stat of a child named 'a) b 9 9'");
	ok(child.state == 'S' || child.state == 'R', "its state (%c)", child.state);
	ok(child.starttime >= me.starttime, "started after us");
	close(p[1]);
	waitpid(pid, NULL, 0);
	is_int(ward_proc_stat(pid, &child), -ENOENT, "a reaped pid is -ENOENT");
}

int main(void)
{
	test_ids();
	test_proc();
	return tap_done();
}
