/* tests/unit/t-cold.c — the cold path's library parts: the verdict before
 * the teardown (ward_sandbox_end, ward_sandbox_release), and the /etc
 * template (ward_etc_template_get) against a runtime directory of its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h" /* stdio before base/banned.h */
#include "base/util.h"
#include "sandbox.h"
#include "ward/sandbox.h"

/* ---- the verdict first, the teardown after ---- */

static void test_end_release(void)
{
	struct ward_policy p;
	struct ward_error err;
	struct ward_sandbox *sb = NULL;
	char *argv[] = { "/bin/sh", "-c", "exit 3", NULL };
	ward_error_clear(&err);
	ward_policy_init(&p, &err);
	if (ward_sandbox_start(&p, argv, NULL, &sb, &err) < 0) {
		char buf[600];
		skip("this host cannot make a sandbox: %s", ward_error_format(&err, buf, sizeof(buf)));
		ward_policy_release(&p);
		return;
	}
	pid_t pid = ward_sandbox_pid(sb);
	struct ward_verdict v;
	ward_verdict_init(&v);
	is_int(ward_sandbox_end(sb, &v, &err), 0, "end: the verdict");
	is_int(v.status, WARD_STATUS_ERROR, "status error");
	is_int(v.exit_code, 3, "exit code 3");
	ok(v.layers != 0, "the layers are reported");
	ok(ward_sandbox_program_ended(sb), "the program has ended");
	is_int(ward_sandbox_report_fd(sb), -1, "nothing more to wait for on the report fd");
	is_int(ward_sandbox_end(sb, &v, &err), -EALREADY, "a second end is refused");
	ward_sandbox_release(sb);
	ok(kill(pid, 0) < 0 && errno == ESRCH, "release kills and reaps the init");
	ward_verdict_release(&v);
	ward_sandbox_release(NULL);
	ok(1, "release of NULL is a no-op");
	ward_policy_release(&p);
}

/* A live sandbox is not taken for an ended one because errno happened to
 * hold ECHILD from an earlier call: it would then never be killed (the
 * daemon's load test left busy kernels running when that was so). */
static void test_exited_errno(void)
{
	struct ward_policy p;
	struct ward_error err;
	struct ward_sandbox *sb = NULL;
	char *argv[] = { "/bin/sh", "-c", "read x", NULL };
	struct ward_sandbox_options so = { .stdin_pipe = true };
	ward_error_clear(&err);
	ward_policy_init(&p, &err);
	if (ward_sandbox_start(&p, argv, &so, &sb, &err) < 0) {
		skip("this host cannot make a sandbox");
		ward_policy_release(&p);
		return;
	}
	errno = ECHILD;
	ok(!ward_sandbox_exited(sb), "a live sandbox is not exited, whatever errno held");
	ward_sandbox_kill(sb, WARD_KILL_CANCEL);
	struct ward_verdict v;
	ward_verdict_init(&v);
	ward_sandbox_finish(sb, &v, &err);
	is_int(v.status, WARD_STATUS_KILLED, "and a kill still reaches it");
	ward_verdict_release(&v);
	ward_policy_release(&p);
}

/* ---- the /etc template ---- */

static const struct ward_etc_entry entries[] = {
	{ WARD_ETC_FILE, "passwd", "root:x:0:0::/:/bin/sh\n", 22 },
	{ WARD_ETC_FILE, "resolv.conf", "", 0 },
	{ WARD_ETC_COPY, "copied", NULL, 0 },          /* data: set below */
	{ WARD_ETC_COPY, "ssl/absent.cnf", "/nonexistent/ward-t-cold", 0 },
	{ WARD_ETC_LINK, "localtime", "/usr/share/zoneinfo/UTC", 0 },
	{ WARD_ETC_DIR, "ssl/certs", NULL, 0 },
};

static char rundir[PATH_MAX];
static struct ward_etc_entry e[ARRAY_SIZE(entries)];

static int get(char *path, size_t len)
{
	int fd = open(rundir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	int r = ward_etc_template_get(fd, rundir, e, ARRAY_SIZE(e), path, len);
	close(fd);
	return r;
}

static bool file_is(const char *dir, const char *name, const char *want)
{
	char path[PATH_MAX + 64], *data = NULL;
	size_t len = 0;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	bool same = ward_read_file(path, 1 << 20, &data, &len) == 0 && len == strlen(want) &&
		    memcmp(data, want, len) == 0;
	free(data);
	return same;
}

static ino_t ino_of(const char *dir, const char *name)
{
	char path[PATH_MAX + 64];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return lstat(path, &st) == 0 ? st.st_ino : 0;
}

static void append(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	chmod(path, 0644);
	int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd >= 0) {
		ward_write_all(fd, text, strlen(text));
		close(fd);
	}
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)f;
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void test_template(void)
{
	char tmp[] = "/tmp/ward-t-cold.XXXXXX", host[PATH_MAX], path[PATH_MAX], again[PATH_MAX];
	if (!mkdtemp(tmp)) {
		skip("no temp dir");
		return;
	}
	snprintf(rundir, sizeof(rundir), "%s/run", tmp);
	snprintf(host, sizeof(host), "%s/host-file", tmp);
	mkdir(rundir, 0700);
	ward_write_file_at(AT_FDCWD, host, "host content\n", 13, O_CREAT | O_TRUNC, 0644);
	memcpy(e, entries, sizeof(e));
	e[2].data = host;

	is_int(get(path, sizeof(path)), 0, "a template is built");
	ok(file_is(path, "passwd", "root:x:0:0::/:/bin/sh\n"), "a generated file holds its content");
	ok(file_is(path, "resolv.conf", ""), "an empty one too");
	ok(file_is(path, "copied", "host content\n"), "a host file is copied by content");
	ok(ino_of(path, "ssl/absent.cnf") == 0, "an absent host file is left out");
	char link[64] = { 0 }, lp[PATH_MAX + 64];
	snprintf(lp, sizeof(lp), "%s/localtime", path);
	ok(readlink(lp, link, sizeof(link) - 1) > 0 && strcmp(link, "/usr/share/zoneinfo/UTC") == 0,
	   "the link");
	struct stat st;
	snprintf(lp, sizeof(lp), "%s/ssl/certs", path);
	ok(stat(lp, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0755,
	   "a mount point directory, 0755");
	snprintf(lp, sizeof(lp), "%s/passwd", path);
	ok(stat(lp, &st) == 0 && (st.st_mode & 07777) == 0644 && st.st_uid == geteuid(),
	   "files are 0644 and the caller's");

	ino_t first = ino_of(path, "passwd");
	is_int(get(again, sizeof(again)), 0, "a second call");
	is_str(again, path, "finds the same template");
	ok(ino_of(path, "passwd") == first, "and does not rebuild it");

	append(path, "passwd", "evil:x:0:0::/:/bin/sh\n");
	is_int(get(again, sizeof(again)), 0, "a tampered template");
	ok(file_is(path, "passwd", "root:x:0:0::/:/bin/sh\n"), "is rebuilt with the right content");

	snprintf(lp, sizeof(lp), "%s/passwd", path);
	chmod(lp, 0666);
	is_int(get(again, sizeof(again)), 0, "a file others may write");
	ok(stat(lp, &st) == 0 && (st.st_mode & 07777) == 0644, "is rebuilt closed");

	chmod(path, 0775);
	is_int(get(again, sizeof(again)), 0, "a directory the group may write");
	ok(stat(path, &st) == 0 && (st.st_mode & 07777) == 0755, "is rebuilt closed");

	snprintf(lp, sizeof(lp), "%s/planted", path);
	ward_write_file_at(AT_FDCWD, lp, "x", 1, O_CREAT | O_TRUNC, 0644);
	is_int(get(again, sizeof(again)), 0, "an entry planted beside the others");
	ok(access(lp, F_OK) < 0, "is gone with the rebuilt template");

	/* the key follows the host file: a new content, a new template */
	ward_write_file_at(AT_FDCWD, host, "changed\n", 8, O_TRUNC, 0644);
	is_int(get(again, sizeof(again)), 0, "a changed host file");
	ok(strcmp(again, path) != 0 && file_is(again, "copied", "changed\n"),
	   "gives another template with its new content");

	/* a symlink in place of a template is never followed */
	char top[PATH_MAX];
	snprintf(top, sizeof(top), "%s", again);
	*strrchr(top, '/') = '\0';
	char saved[PATH_MAX];
	snprintf(saved, sizeof(saved), "%s/moved", tmp);
	rename(top, saved);
	if (symlinkat(saved, AT_FDCWD, top) == 0) {
		is_int(get(again, sizeof(again)), 0, "a symlink in place of the template");
		ok(lstat(top, &st) == 0 && S_ISDIR(st.st_mode), "is replaced by a real one");
	}

	ok(nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0, "cleaned up");
}

int main(void)
{
	test_template();
	test_end_release();
	test_exited_errno();
	return tap_done();
}
