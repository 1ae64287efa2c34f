/* src/cli/doctor-probes.c — the checks of `ward doctor` that must run in a
 * forked child (namespaces, mounts, filters): the child may be left in odd
 * states, so it always leaves with _exit and is reaped here. Never used by
 * the sandbox itself. */
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/magic.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include "doctor.h"
#include "doctor-probes.h"
#include "ward/ward.h"
#include "base/util.h"

#define UNUSED __attribute__((unused))
#define DOC_NOBODY 65534
#define DOC_CHILD_TIMEOUT 10 /* seconds before a wedged probe child dies */

int doc_reap(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return errno;
	return WIFSIGNALED(st) ? -WTERMSIG(st) : WEXITSTATUS(st);
}

/* Runs fn in a forked child and returns its report: 0, a positive errno, or
 * -N when the child died of signal N. The child leaves with _exit, so stdio
 * buffers are never flushed twice and no atexit handler runs. */
int doc_child(int (*fn)(const void *), const void *arg)
{
	pid_t pid = fork();
	if (pid < 0)
		return errno;
	if (pid == 0) {
		alarm(DOC_CHILD_TIMEOUT);
		_exit(fn(arg) & 0xff);
	}
	return doc_reap(pid);
}

/* Makes a private temp dir, runs fn(dir) in a child, removes the dir: the
 * child's mounts on it died with the child's mount namespace. */
int doc_child_in_tmpdir(int (*fn)(const void *), int *err)
{
	char dir[] = "/tmp/ward-doctor-XXXXXX";
	if (!mkdtemp(dir)) {
		*err = errno;
		return -1;
	}
	*err = doc_child(fn, dir);
	rmdir(dir);
	return 0;
}

/* --- probes that run in children ------------------------------------------ */

int doc_try_unshare(const void *arg)
{
	return unshare(*(const int *)arg) == 0 ? 0 : errno;
}

int doc_try_unshare_as_nobody(const void *arg)
{
	if (setgroups(0, NULL) || setresgid(DOC_NOBODY, DOC_NOBODY, DOC_NOBODY) ||
	    setresuid(DOC_NOBODY, DOC_NOBODY, DOC_NOBODY))
		return errno;
	return doc_try_unshare(arg);
}

/* Proves the new user namespace grants real rights: AppArmor's userns
 * restriction lets unshare succeed but strips the capabilities. */
int doc_try_fsmount(UNUSED const void *arg)
{
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS))
		return errno;
	int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
	if (fs < 0 || fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return errno;
	return fsmount(fs, FSMOUNT_CLOEXEC, 0) < 0 ? errno : 0;
}

/* Writes "<a><id><b>" to a /proc file; 0 or -errno. */
int doc_write_proc(const char *path, const char *a, uint64_t id, const char *b)
{
	char line[64], num[21];
	ward_strlcpy(line, a, sizeof(line));
	ward_strlcat(line, ward_utoa(id, num), sizeof(line));
	ward_strlcat(line, b, sizeof(line));
	return ward_write_file_at(AT_FDCWD, path, line, strlen(line), O_TRUNC, 0);
}

/* Overlay as ward would mount it: inside a user+mount namespace (root mapped
 * onto the caller's ids, the one map any user may write), on a tmpfs that
 * exists only in this child's mount namespace. */
int doc_try_overlay(const void *arg)
{
	const char *dir = arg;
	uid_t uid = geteuid();
	gid_t gid = getegid();
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS))
		return errno;
	int r = ward_write_file_at(AT_FDCWD, "/proc/self/setgroups", "deny", 4, O_TRUNC, 0);
	if (r == 0)
		r = doc_write_proc("/proc/self/uid_map", "0 ", uid, " 1");
	if (r == 0)
		r = doc_write_proc("/proc/self/gid_map", "0 ", gid, " 1");
	if (r < 0)
		return -r;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700") || chdir(dir) ||
	    mkdir("lower", 0700) || mkdir("upper", 0700) || mkdir("work", 0700) ||
	    mkdir("merged", 0700) ||
	    mount("overlay", "merged", "overlay", MS_NOSUID | MS_NODEV,
		  "lowerdir=lower,upperdir=upper,workdir=work"))
		return errno;
	return 0;
}

/* An fd for a new user namespace mapping 0..65535 onto 100000..; its only
 * member is a grandchild that sleeps until the fd is open and is then
 * killed (its alarm covers the case where this child dies first). */
int doc_userns_fd(void)
{
	char path[64];
	int r, fd = -1;
	pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		alarm(DOC_CHILD_TIMEOUT);
		for (;;)
			pause();
	}
	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
	r = doc_write_proc(path, "0 ", 100000, " 65536");
	snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
	if (r == 0)
		r = doc_write_proc(path, "0 ", 100000, " 65536");
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	if (r == 0 && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		r = -errno;
	kill(pid, SIGKILL);
	doc_reap(pid);
	return r < 0 ? r : fd;
}

/* An idmapped clone of a tmpfs, the way image layers would be idmapped. */
int doc_try_idmap(const void *arg)
{
	const char *dir = arg;
	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755"))
		return errno;
	int tree = open_tree(AT_FDCWD, dir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0)
		return errno;
	int userns = doc_userns_fd();
	if (userns < 0)
		return -userns;
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)userns };
	return mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) ? errno : 0;
}

int doc_try_filter(UNUSED const void *arg)
{
	struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = { .len = 1, .filter = &allow };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return errno;
	return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) ? errno : 0;
}

/* An i386 getpid (20) through int 0x80: 0 when it answers; without ia32
 * emulation the child dies of SIGSEGV. */
int doc_try_int80(UNUSED const void *arg)
{
#if defined(__x86_64__)
	struct rlimit none = { 0, 0 };
	long ret;
	setrlimit(RLIMIT_CORE, &none);  /* the expected crash must leave no core */
	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L)
			 : "rcx", "r8", "r9", "r10", "r11", "memory");
	return ret == (long)getpid() ? 0 : ENOSYS;
#else
	return ENOSYS;
#endif
}

bool doc_initial_userns(long long *host_uid)
{
	return ward_proc_initial_userns(host_uid);
}
