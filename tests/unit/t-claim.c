/* tests/unit/t-claim.c — a kernel's two phases: prepare, then claim.
 *
 * ward_kernel_prepare must return with the kernel ready and /workspace
 * empty; ward_kernel_claim puts the request's files in from outside, once,
 * and must never be led out of the workspace by what the kernel's code
 * planted there before the claim (its imports, in a pool, run untrusted
 * code). A fake runners directory holds a "node kernel" (node/kernel.sh, a
 * shell script) that takes a while to get ready, marks when it is, and,
 * with PLANT set in its environment, plants a directory symlink and a file
 * symlink to a host directory (writable by all: a claim that followed them
 * would write there) and a FIFO in /workspace, or fills it, before saying
 * it is ready. Everything is checked from outside through the sandbox's root,
 * never following a link, and from inside by the kernel itself.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fake-runners.h"
#include "tap.h"
#include "ward/kernel.h"
#include "ward/ward.h"

static const char fake_kernel[] =
	"export PATH=/usr/bin:/bin\n"
	"case $PLANT in\n"
	"links) ln -s \"$OUT\" /workspace/linkdir\n"
	"  ln -s \"$OUT/leaf\" /workspace/leaflink\n"
	"  mkfifo /workspace/fifo ;;\n"
	"fill) head -c 786432 /dev/zero > /workspace/fill ;;\n"
	"esac\n"
	"sleep 0.3; : > /tmp/ready\n"
	"printf '{\"msg_type\":\"status\",\"content\":{\"execution_state\":\"idle\"}}\\n'\n"
	"reply() { printf '{\"msg_type\":\"execute_reply\",\"parent_id\":\"%s\",\"content\":{\"status\":\"ok\",\"case\":\"%s\"}}\\n' \"$1\" \"$2\"; }\n"
	"while read -r line; do\n"
	"  id=${line#*\\\"id\\\":\\\"}; id=${id%%\\\"*}\n"
	"  case $line in\n"
	"  *shutdown_request*)\n"
	"    printf '{\"msg_type\":\"shutdown_reply\",\"parent_id\":\"%s\",\"content\":{}}\\n' \"$id\"; exit 0 ;;\n"
	"  *'\"code\":\"cat\"'*) reply \"$id\" \"$(cat /workspace/a/b/c.txt)$(cat /workspace/a..b)\" ;;\n"
	"  *'\"code\":\"sleep\"'*) sleep 0.5; reply \"$id\" slept ;;\n"
	"  *) reply \"$id\" unknown ;;\n"
	"  esac\n"
	"done\n";

static char runners[256], outside[300];

static int make_runners(void)
{
	if (fake_runners_make(runners, sizeof(runners), "t-claim", fake_kernel) < 0)
		return -1;
	/* a host directory anybody may write: where a planted link points */
	snprintf(outside, sizeof(outside), "%s/outside", runners);
	return mkdir(outside, 0777) < 0 || chmod(outside, 0777) < 0 ? -1 : 0;
}

static void remove_runners(void)
{
	char path[700];
	for (const char *const *f = (const char *const[]){ "x", "leaf", NULL }; *f; f++) {
		snprintf(path, sizeof(path), "%s/%s", outside, *f);
		unlink(path);
	}
	rmdir(outside);
	fake_runners_remove(runners);
}

static const struct ward_kernel_options options = { .runners_dir = runners };

/* A kernel prepared with `plant` (NULL: nothing planted) and timeout. */
static struct ward_kernel *prepared(const char *plant, const char *timeout, const char *ws_size,
				    struct ward_error *err)
{
	struct ward_policy p;
	struct ward_kernel *k = NULL;
	char env[64], out[320];
	snprintf(env, sizeof(env), "PLANT=%s", plant ? plant : "");
	snprintf(out, sizeof(out), "OUT=%s", outside);
	if (ward_policy_init(&p, err) < 0)
		return NULL;
	if (ward_policy_set(&p, "limits.timeout", timeout, "test", err) == 0 &&
	    ward_policy_set(&p, "env", env, "test", err) == 0 &&
	    ward_policy_set(&p, "env", out, "test", err) == 0 &&
	    (!ws_size || ward_policy_set(&p, "limits.workspace_size", ws_size, "test", err) == 0))
		ward_kernel_prepare(&p, WARD_LANG_NODE, &options, &k, err);
	ward_policy_release(&p);
	return k;
}

/* Opens rel under the sandbox's root, following no link; -errno. */
static int open_in(struct ward_kernel *k, const char *rel, int flags)
{
	int root = ward_sandbox_open_root(ward_kernel_sandbox(k));
	if (root < 0)
		return -errno;
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS |
					   RESOLVE_NO_MAGICLINKS };
	int fd = (int)syscall(SYS_openat2, root, rel, &how, sizeof(how));
	int e = errno;
	close(root);
	return fd < 0 ? -e : fd;
}

static bool exists_in(struct ward_kernel *k, const char *rel)
{
	int fd = open_in(k, rel, O_PATH);
	if (fd >= 0)
		close(fd);
	return fd >= 0 || fd == -ELOOP; /* a symlink is there */
}

static void read_in(struct ward_kernel *k, const char *rel, char *buf, size_t len)
{
	buf[0] = '\0';
	int fd = open_in(k, rel, O_RDONLY | O_NONBLOCK);
	if (fd < 0)
		return;
	ssize_t n = read(fd, buf, len - 1);
	buf[n > 0 ? n : 0] = '\0';
	close(fd);
}

/* Entries of /workspace other than "." and "..". */
static int workspace_entries(struct ward_kernel *k)
{
	int fd = open_in(k, "workspace", O_RDONLY | O_DIRECTORY);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d)
		return -1;
	int n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return n;
}

static const char *run(struct ward_kernel *k, const char *code, json_t **reply)
{
	struct ward_error err;
	if (ward_kernel_execute(k, code, false, NULL, NULL, reply, &err) < 0)
		return NULL;
	return json_string_value(json_object_get(*reply, "case"));
}

static void stop(struct ward_kernel *k, const char *what, const char *status)
{
	struct ward_verdict v;
	struct ward_error err;
	ward_verdict_init(&v);
	ward_kernel_stop(k, &v, &err);
	is_str(ward_status_name(v.status), status, "%s: the verdict", what);
	ward_verdict_release(&v);
}

static void prepare_then_claim(void)
{
	struct ward_error err;
	struct ward_kernel *k = prepared(NULL, "60", NULL, &err);
	if (!ok(k != NULL, "prepare")) {
		diag("%s", err.message);
		return;
	}
	ok(exists_in(k, "tmp/ready"), "prepare returns once the kernel said it is ready");
	is_int(workspace_entries(k), 0, "prepare: /workspace is empty");
	static const struct ward_file files[] = {
		{ .path = "a/b/c.txt", .data = "hello", .len = 5 },
		{ .path = "a..b", .data = "-x", .len = 2, .mode = 0600 },
	};
	int r = ward_kernel_claim(k, files, 2, &err);
	is_int(r, 0, "claim with a nested path and 'a..b'");
	if (r < 0)
		diag("%s", err.message);
	char buf[64];
	read_in(k, "workspace/a/b/c.txt", buf, sizeof(buf));
	is_str(buf, "hello", "claim: a/b/c.txt is in, whole");
	struct stat ws, st;
	int wfd = open_in(k, "workspace", O_RDONLY | O_DIRECTORY);
	int ffd = open_in(k, "workspace/a..b", O_RDONLY);
	ok(wfd >= 0 && ffd >= 0 && fstat(wfd, &ws) == 0 && fstat(ffd, &st) == 0 &&
	   st.st_uid == ws.st_uid && st.st_gid == ws.st_gid && (st.st_mode & 07777) == 0600,
	   "claim: a..b belongs to the workspace's owner, mode 0600");
	if (wfd >= 0)
		close(wfd);
	if (ffd >= 0)
		close(ffd);
	static const struct ward_file again[] = { { .path = "second", .data = "2", .len = 1 } };
	is_int(ward_kernel_claim(k, again, 1, &err), -EALREADY, "a second claim is -EALREADY");
	ok(!exists_in(k, "workspace/second"), "... and puts nothing in");
	json_t *reply = NULL;
	const char *c = run(k, "cat", &reply);
	is_str(c ? c : "", "hello-x", "the first request sees the claimed files");
	json_decref(reply);
	stop(k, "prepare then claim", "ok");
}

/* A path the workspace rule refuses: nothing written, not even the good
 * file before it. */
static void bad_path(const char *path)
{
	struct ward_error err;
	struct ward_kernel *k = prepared(NULL, "60", NULL, &err);
	if (!ok(k != NULL, "prepare for '%s'", path))
		return;
	const struct ward_file files[] = { { .path = "good", .data = "g", .len = 1 },
					   { .path = path, .data = "x", .len = 1 } };
	is_int(ward_kernel_claim(k, files, 2, &err), -EINVAL, "claim refuses '%s'", path);
	ok(strstr(err.message, path) != NULL, "... naming it: %s", err.message);
	is_int(workspace_entries(k), 0, "... before writing anything");
	ward_kernel_discard(k);
}

/* What the kernel planted before the claim is refused, never followed. */
static void planted(const char *path, int want, int or, const char *host)
{
	struct ward_error err;
	struct ward_kernel *k = prepared("links", "60", NULL, &err);
	if (!ok(k != NULL, "prepare with links planted"))
		return;
	ok(exists_in(k, "workspace/linkdir") && exists_in(k, "workspace/fifo"),
	   "the kernel planted its links and FIFO before the claim");
	const struct ward_file files[] = { { .path = path, .data = "pwned", .len = 5 } };
	int r = ward_kernel_claim(k, files, 1, &err);
	ok(r == -want || r == -or, "claim of '%s' is refused (%s): %d", path, strerror(want), r);
	ok(strstr(err.message, path) != NULL, "... naming it: %s", err.message);
	char p[400];
	snprintf(p, sizeof(p), "%s/%s", outside, host);
	ok(access(p, F_OK) < 0 && errno == ENOENT,
	   "... and the host's %s, where the link points, was not written", host);
	ward_kernel_discard(k);
}

static void full(void)
{
	struct ward_error err;
	struct ward_kernel *k = prepared(NULL, "60", "1M", &err);
	if (!ok(k != NULL, "prepare with a 1 MiB workspace")) {
		diag("%s", err.message);
		return;
	}
	static char big[(1 << 20) + 1];
	const struct ward_file over[] = { { .path = "big", .data = big, .len = sizeof(big) } };
	is_int(ward_kernel_claim(k, over, 1, &err), -EFBIG,
	       "claim of files larger than the workspace is EFBIG");
	ok(strstr(err.message, "'big'") != NULL, "... naming the file: %s", err.message);
	ward_kernel_discard(k);

	/* the kernel filled 768 KiB: 512 KiB more does not fit in the tmpfs */
	k = prepared("fill", "60", "1M", &err);
	if (!ok(k != NULL, "prepare with a workspace the kernel fills"))
		return;
	const struct ward_file half[] = { { .path = "d/half", .data = big, .len = 512 << 10 } };
	is_int(ward_kernel_claim(k, half, 1, &err), -ENOSPC, "claim into a full workspace is ENOSPC");
	ok(strstr(err.message, "'d/half'") != NULL, "... naming the file: %s", err.message);
	ok(!exists_in(k, "workspace/d/half"), "... and leaves no half-written file");
	ward_kernel_discard(k);
}

static void discard_unclaimed(void)
{
	struct ward_error err;
	struct ward_kernel *k = prepared(NULL, "60", NULL, &err);
	if (!ok(k != NULL, "prepare to discard"))
		return;
	pid_t pid = ward_sandbox_pid(ward_kernel_sandbox(k));
	ok(pid > 0 && kill(pid, 0) == 0, "the prepared kernel's init runs");
	ward_kernel_discard(k);
	errno = 0;
	ok(kill(pid, 0) < 0 && errno == ESRCH, "discarded unclaimed: its init is gone and reaped");
	ward_kernel_discard(NULL);
	ok(1, "discarding NULL is a no-op");
}

/* The wall-time limit counts from the claim: a kernel kept prepared past
 * its timeout still gets its whole time. */
static void clock_from_claim(void)
{
	struct ward_error err;
	struct ward_kernel *k = prepared(NULL, "1", NULL, &err);
	if (!ok(k != NULL, "prepare with a 1 s timeout"))
		return;
	struct timespec ts = { .tv_sec = 1, .tv_nsec = 200000000 };
	nanosleep(&ts, NULL); /* kept in a pool past the timeout */
	is_int(ward_kernel_claim(k, NULL, 0, &err), 0, "claim after 1.2 s");
	json_t *reply = NULL;
	const char *c = run(k, "sleep", &reply);
	is_str(c ? c : "", "slept", "a 0.5 s request after the claim is not timed out");
	json_decref(reply);
	stop(k, "clock from claim", "ok");
}

int main(void)
{
	struct sigaction sa = { .sa_handler = SIG_IGN };
	sigaction(SIGPIPE, &sa, NULL);
	if (make_runners() < 0) {
		printf("Bail out! fake runners directory: %s\n", strerror(errno));
		return 1;
	}
	struct ward_error err;
	struct ward_kernel *k = prepared(NULL, "10", NULL, &err);
	if (!k) {
		skip("the sandbox cannot start here: %s", err.message);
		remove_runners();
		return tap_done();
	}
	ward_kernel_discard(k);
	prepare_then_claim();
	bad_path("../x");
	bad_path("/etc/x");
	bad_path("a/../b");
	/* O_NOFOLLOW | O_DIRECTORY on a link is ENOTDIR */
	planted("linkdir/x", ELOOP, ENOTDIR, "x");
	planted("leaflink", ELOOP, ELOOP, "leaf");
	/* a FIFO without a reader opened O_NONBLOCK for writing is ENXIO */
	planted("fifo", ENXIO, EEXIST, "fifo");
	full();
	discard_unclaimed();
	clock_from_claim();
	remove_runners();
	return tap_done();
}
