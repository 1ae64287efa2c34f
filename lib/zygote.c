/* lib/zygote.c — a language runtime that forks sandboxes (the supervisor's
 * side).
 *
 * ward_zygote_start runs the image's interpreter on the zygote script
 * (runners/python/zygote.py) with one end of a SOCK_SEQPACKET socket as
 * fd 3 and the path of libward-zygote.so, which the script loads to serve
 * the launcher's requests (lib/launcher.c) in WARD_LAUNCH_RETURN mode. The
 * zygote preloads its modules, says "ready" on the socket, and from then
 * on is a launcher like any other: ward_zygote_launcher goes into
 * ward_sandbox_options. It must never run untrusted code: its children
 * do, after every layer of their sandbox is on.
 */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "base/util.h"
#include "config.h"
#include "launcher.h"
#include "ward/zygote.h"

enum { MAX_MODULES = 64, READY_TIMEOUT_MS = 60000 };

struct ward_zygote {
	struct ward_launcher *launcher;
	enum ward_lang lang;
};

static const char *const default_modules[] = { "numpy", "pandas", "matplotlib", NULL };

/* $WARD_ZYGOTE_MODULE (or the path given), else next to the binary in a
 * build tree (build/src/ward: build/lib/), else the installed path. */
static int find_file(const char *given, const char *env, const char *const rel[], size_t n,
		     const char *installed, char *out, size_t len)
{
	struct stat st;
	const char *e = getenv(env);
	if (given || e)
		return realpath(given ? given : e, out) ? 0 : -errno;
	char exe[PATH_MAX], cand[PATH_MAX + 64];
	ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (k > 0) {
		exe[k] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash)
			*slash = '\0';
		for (size_t i = 0; i < n; i++) {
			snprintf(cand, sizeof(cand), "%s%s", exe, rel[i]);
			if (stat(cand, &st) == 0 && realpath(cand, out))
				return 0;
		}
	}
	if (installed && stat(installed, &st) == 0) {
		ward_strlcpy(out, installed, len);
		return 0;
	}
	return -ENOENT;
}

/* The exec'd zygote: the socket as fd 3, stdio /dev/null but stderr. */
static __attribute__((noreturn)) void zygote_exec(int sock, pid_t parent, char *const argv[])
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
		_exit(126);
	int high = (int)fcntl(sock, F_DUPFD, 10);
	int null = open("/dev/null", O_RDWR);
	if (high < 0 || null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(high, 3) < 0)
		_exit(126);
	syscall(SYS_close_range, 4U, ~0U, 0);
	/* what a cold kernel gets from the init: no signal blocked */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* No tcache: glibc's per-thread cache skips M_PERTURB, and a freed
	 * request must leave no byte behind (lib/launcher.c). */
	char *const envp[] = { "PATH=/usr/bin:/bin", "LANG=C.UTF-8",
			       "GLIBC_TUNABLES=glibc.malloc.tcache_count=0", NULL };
	execve(argv[0], argv, envp);
	_exit(127);
}

/* Waits for the zygote's "ready" (its imports are done). */
static int wait_ready(int sock, struct ward_error *err)
{
	struct pollfd pfd = { .fd = sock, .events = POLLIN };
	int r;
	while ((r = poll(&pfd, 1, READY_TIMEOUT_MS)) < 0 && errno == EINTR)
		;
	char buf[16];
	ssize_t n = r > 0 ? recv(sock, buf, sizeof(buf), 0) : -1;
	if (n == 5 && memcmp(buf, "ready", 5) == 0)
		return 0;
	return ward_error_set(err, r == 0 ? ETIMEDOUT : ECHILD, "zygote",
			      "the zygote did not start (see its stderr)");
}


WARD_EXPORT struct ward_zygote *ward_zygote_start(enum ward_lang lang, const char *const *modules,
						  const char *runners_dir, struct ward_error *err)
{
	if (lang != WARD_LANG_PYTHON) {
		ward_error_set(err, ENOTSUP, "zygote", "no zygote for this language (only python)");
		return NULL;
	}
	char runners[PATH_MAX], module[PATH_MAX], script[PATH_MAX + 32];
	const char *const rel_runners[] = { "/../../runners", "/../share/ward/runners" };
	const char *const rel_module[] = { "/../lib/libward-zygote.so" };
	if (find_file(runners_dir, "WARD_RUNNERS", rel_runners, 2, NULL, runners, sizeof(runners)) < 0) {
		ward_error_set(err, ENOENT, "zygote", "no runners directory found (set WARD_RUNNERS)");
		return NULL;
	}
	if (find_file(NULL, "WARD_ZYGOTE_MODULE", rel_module, 1, WARD_ZYGOTE_MODULE, module,
		      sizeof(module)) < 0) {
		ward_error_set(err, ENOENT, "zygote",
			       "libward-zygote.so not found (set WARD_ZYGOTE_MODULE)");
		return NULL;
	}
	snprintf(script, sizeof(script), "%s/python/zygote.py", runners);
	char *argv[MAX_MODULES + 8] = { "/usr/bin/python3", "-I", "-u", script, module };
	size_t n = 5;
	for (const char *const *m = modules ? modules : default_modules; *m && n < MAX_MODULES + 5; m++)
		argv[n++] = (char *)*m;
	argv[n] = NULL;

	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		ward_error_set(err, errno, "zygote", "unable to create a socket");
		return NULL;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0)
		zygote_exec(sv[1], parent, argv);
	close(sv[1]);
	struct ward_zygote *z = calloc(1, sizeof(*z));
	int r = pid < 0 ? ward_error_set(err, errno, "zygote", "unable to start the zygote")
			: !z ? ward_error_set(err, ENOMEM, "zygote", "out of memory")
			     : wait_ready(sv[0], err);
	if (r == 0 && !(z->launcher = ward_launcher_adopt(sv[0], pid)))
		r = ward_error_set(err, ENOMEM, "zygote", "out of memory");
	if (r < 0) {
		close(sv[0]);
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
		free(z);
		return NULL;
	}
	z->lang = lang;
	return z;
}

WARD_EXPORT void ward_zygote_stop(struct ward_zygote *z)
{
	if (!z)
		return;
	ward_launcher_stop(z->launcher);
	free(z);
}

WARD_EXPORT struct ward_launcher *ward_zygote_launcher(struct ward_zygote *z) { return z->launcher; }
WARD_EXPORT enum ward_lang ward_zygote_lang(const struct ward_zygote *z) { return z->lang; }
