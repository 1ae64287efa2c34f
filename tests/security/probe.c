/* tests/security/probe.c — one forbidden attempt, reported exactly.
 *
 * Usage: ward-probe NAME [ARG]   makes exactly one attempt and prints
 *                                "NAME ok" or "NAME errno=ENAME"; an attempt
 *                                the sandbox kills ends this process by that
 *                                signal.
 *        ward-probe all          each item of the seccomp contract in its own
 *                                child, one line each; a killed child prints
 *                                "NAME signal=SIGNAME" (tests/security/
 *                                expected.txt lists what each line must be)
 *        ward-probe list         the names, one a line
 *
 * Static and dependency-free, so it runs in any image: raw syscall() with
 * numbers from <sys/syscall.h>, newer ones defined here. Every attempt is
 * harmless if it succeeds, even run by mistake as root on the host: bad
 * pointers or flags where success would change anything, an immediate undo
 * (detach, exit, unlink) where success is the point, and no byte that a
 * shell would act on. Where possible an attempt would succeed without the
 * filter, so "ok" shows a hole and the expected errno can only come from ward.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

/* Newer than the 6.1 uapi headers. */
#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif
#ifndef __NR_statmount
#define __NR_statmount 457
#endif
#ifndef __NR_listmount
#define __NR_listmount 458
#endif
#ifndef __NR_open_tree_attr
#define __NR_open_tree_attr 467
#endif
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif
#ifndef O_TMPFILE
#define O_TMPFILE (020000000 | O_DIRECTORY)
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#define X32_SYSCALL_BIT 0x40000000L
#define HIGH_BITS 0x100000000L     /* ignored by the kernel for 32-bit args */
#define BAD_PTR 1L                 /* EFAULT if the kernel ever reads it */
#define KEY_SPEC_PROCESS_KEYRING (-2L)
#define KEY_SPEC_SESSION_KEYRING (-3L)
#define UFFD_USER_MODE_ONLY 1L
#define NETLINK_NETFILTER 12L
#define PTRACE_TRACEME_ 0L
#define PTRACE_DETACH_ 17L
#define PTRACE_SEIZE_ 0x4206L
#define SYSLOG_ACTION_SIZE_BUFFER 10L
#define MFD_CLOEXEC_ 0x0001L
#define MFD_NOEXEC_SEAL_ 0x0008L
/* a script whose run would be harmless and silent: no result line */
static const char script[] = "#!/bin/true\n";

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* struct clone_args up to CLONE_ARGS_SIZE_VER0, without <linux/sched.h>
 * (which clashes with <sched.h>). */
struct probe_clone_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack,
		stack_size, tls;
};

/* >= 0: success; < 0: -errno. */
static long raw(long nr, long a, long b, long c, long d, long e, long f)
{
	long r = syscall(nr, a, b, c, d, e, f);
	return r < 0 ? -errno : r;
}

#define R0(nr) raw(nr, 0, 0, 0, 0, 0, 0)
#define R1(nr, a) raw(nr, a, 0, 0, 0, 0, 0)
#define R2(nr, a, b) raw(nr, a, b, 0, 0, 0, 0)
#define R3(nr, a, b, c) raw(nr, a, b, c, 0, 0, 0)
#define R4(nr, a, b, c, d) raw(nr, a, b, c, d, 0, 0)
#define R5(nr, a, b, c, d, e) raw(nr, a, b, c, d, e, 0)
#define R6(nr, a, b, c, d, e, f) raw(nr, a, b, c, d, e, f)
#define P(s) ((long)(uintptr_t)(s))

/* --- attempts that are one syscall with fixed arguments --- */

static long p_io_uring_setup(const char *arg)
{
	struct io_uring_params p;

	(void)arg;
	memset(&p, 0, sizeof(p));
	return R2(__NR_io_uring_setup, 1, P(&p));
}

static long p_io_uring_enter(const char *a) { (void)a; return R6(__NR_io_uring_enter, -1, 0, 0, 0, 0, 0); }
static long p_io_uring_register(const char *a) { (void)a; return R4(__NR_io_uring_register, -1, 0, 0, 0); }
static long p_bpf(const char *a) { (void)a; return R3(__NR_bpf, 9999, BAD_PTR, 0); }
static long p_perf_event_open(const char *a) { (void)a; return R5(__NR_perf_event_open, BAD_PTR, 0, -1, -1, 0); }
static long p_ptrace_traceme(const char *a) { (void)a; return R1(__NR_ptrace, PTRACE_TRACEME_); }
static long p_keyctl(const char *a) { (void)a; return R3(__NR_keyctl, 0, KEY_SPEC_SESSION_KEYRING, 0); }
static long p_add_key(const char *a) { (void)a; return R5(__NR_add_key, P("user"), P("ward-probe"), P("x"), 1, KEY_SPEC_PROCESS_KEYRING); }
static long p_request_key(const char *a) { (void)a; return R4(__NR_request_key, P("user"), P("ward-probe-none"), 0, 0); }
static long p_mount(const char *a) { (void)a; return R5(__NR_mount, BAD_PTR, BAD_PTR, BAD_PTR, 0, 0); }
static long p_umount2(const char *a) { (void)a; return R2(__NR_umount2, BAD_PTR, 0); }
static long p_pivot_root(const char *a) { (void)a; return R2(__NR_pivot_root, BAD_PTR, BAD_PTR); }
static long p_chroot(const char *a) { (void)a; return R1(__NR_chroot, P("/")); }
static long p_move_mount(const char *a) { (void)a; return R5(__NR_move_mount, -1, P(""), -1, P(""), 0); }
static long p_open_tree(const char *a) { (void)a; return R3(__NR_open_tree, AT_FDCWD, P("/"), O_CLOEXEC); }
static long p_open_tree_attr(const char *a) { (void)a; return R5(__NR_open_tree_attr, AT_FDCWD, P("/"), O_CLOEXEC, 0, 0); }
static long p_fsopen(const char *a) { (void)a; return R2(__NR_fsopen, P("tmpfs"), 1 /* FSOPEN_CLOEXEC */); }
static long p_fsmount(const char *a) { (void)a; return R3(__NR_fsmount, -1, 0, 0); }
static long p_fsconfig(const char *a) { (void)a; return R5(__NR_fsconfig, -1, 6 /* CMD_CREATE */, 0, 0, 0); }
static long p_fspick(const char *a) { (void)a; return R3(__NR_fspick, AT_FDCWD, P("/"), 1 /* FSPICK_CLOEXEC */); }
static long p_mount_setattr(const char *a) { (void)a; return R5(__NR_mount_setattr, -1, P(""), 0, 0, 0); }
static long p_unshare_user(const char *a) { (void)a; return R1(__NR_unshare, CLONE_NEWUSER); }
static long p_unshare_net(const char *a) { (void)a; return R1(__NR_unshare, CLONE_NEWNET); }
static long p_userfaultfd(const char *a) { (void)a; return R1(__NR_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY); }
static long p_init_module(const char *a) { (void)a; return R3(__NR_init_module, BAD_PTR, 0, BAD_PTR); }
static long p_finit_module(const char *a) { (void)a; return R3(__NR_finit_module, -1, P(""), 0); }
static long p_delete_module(const char *a) { (void)a; return R2(__NR_delete_module, P("ward_probe_none"), O_NONBLOCK); }
static long p_kexec_load(const char *a) { (void)a; return R4(__NR_kexec_load, 0, 0, 0, 0x7fff0000L); }
static long p_kexec_file_load(const char *a) { (void)a; return R5(__NR_kexec_file_load, -1, -1, 0, 0, 0x7fff0000L); }
/* wrong magic: EINVAL even for a caller allowed to reboot */
static long p_reboot(const char *a) { (void)a; return R4(__NR_reboot, 0, 0, 0, 0); }
static long p_swapon(const char *a) { (void)a; return R2(__NR_swapon, BAD_PTR, 0); }
static long p_swapoff(const char *a) { (void)a; return R1(__NR_swapoff, BAD_PTR); }
static long p_acct(const char *a) { (void)a; return R1(__NR_acct, BAD_PTR); }
static long p_quotactl(const char *a) { (void)a; return R4(__NR_quotactl, 0, BAD_PTR, 0, 0); }
static long p_quotactl_fd(const char *a) { (void)a; return R4(__NR_quotactl_fd, -1, 0, 0, 0); }
static long p_syslog(const char *a) { (void)a; return R3(__NR_syslog, SYSLOG_ACTION_SIZE_BUFFER, 0, 0); }
static long p_personality(const char *a) { (void)a; return R1(__NR_personality, PER_LINUX32); }
static long p_personality_query(const char *a) { (void)a; return R1(__NR_personality, 0xffffffffL); }
static long p_open_by_handle_at(const char *a) { (void)a; return R3(__NR_open_by_handle_at, AT_FDCWD, BAD_PTR, O_RDONLY); }
static long p_fanotify_init(const char *a) { (void)a; return R2(__NR_fanotify_init, 0, O_RDONLY); }
static long p_cachestat(const char *a) { (void)a; return R4(__NR_cachestat, 0, BAD_PTR, BAD_PTR, 0); }
static long p_statmount(const char *a) { (void)a; return R4(__NR_statmount, BAD_PTR, BAD_PTR, 0, 0); }
static long p_listmount(const char *a) { (void)a; return R4(__NR_listmount, BAD_PTR, BAD_PTR, 0, 0); }
static long p_unknown(const char *a) { (void)a; return R0(1000); }
static long p_socket_packet(const char *a) { (void)a; return R3(__NR_socket, AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0); }
static long p_socket_vsock(const char *a) { (void)a; return R3(__NR_socket, AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0); }
static long p_socket_alg(const char *a) { (void)a; return R3(__NR_socket, AF_ALG, SOCK_SEQPACKET | SOCK_CLOEXEC, 0); }
static long p_netlink_netfilter(const char *a) { (void)a; return R3(__NR_socket, AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER); }
static long p_netlink_route(const char *a) { (void)a; return R3(__NR_socket, AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0); }
static long p_socket_inet(const char *a) { (void)a; return R3(__NR_socket, AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); }
static long p_socket_unix(const char *a) { (void)a; return R3(__NR_socket, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0); }

static long p_socketpair_inet(const char *arg)
{
	int sv[2];

	(void)arg;
	return R4(__NR_socketpair, AF_INET, SOCK_STREAM, 0, P(sv));
}

static long p_name_to_handle_at(const char *arg)
{
	union { struct file_handle fh; char buf[sizeof(struct file_handle) + 128]; } h;
	int mount_id;

	(void)arg;
	h.fh.handle_bytes = 128;
	return R5(__NR_name_to_handle_at, AT_FDCWD, P("/"), P(&h), P(&mount_id), 0);
}

/* Own memory: always permitted by the kernel, so only a filter says no. */
static long p_process_vm(long nr)
{
	char src[8] = "ward", dst[8] = "";
	struct iovec local = { dst, sizeof(dst) }, remote = { src, sizeof(src) };

	if (nr == __NR_process_vm_writev) {
		local.iov_base = src;
		remote.iov_base = dst;
	}
	return R6(nr, getpid(), P(&local), 1, P(&remote), 1, 0);
}

static long p_process_vm_readv(const char *a) { (void)a; return p_process_vm(__NR_process_vm_readv); }
static long p_process_vm_writev(const char *a) { (void)a; return p_process_vm(__NR_process_vm_writev); }

/* --- attempts that need a little setup or an undo --- */

/* Seizes a child of ours (a parent may always trace its own child, so only
 * a filter says no; seizing sends no SIGSTOP), then lets it go. Not pid 1:
 * run by mistake on a host that would be the real init. */
static long p_ptrace_attach(const char *arg)
{
	pid_t pid;
	long r;

	(void)arg;
	pid = fork();
	if (pid == 0) {
		pause();
		_exit(0);
	}
	if (pid < 0)
		return -errno;
	r = R4(__NR_ptrace, PTRACE_SEIZE_, pid, 0, 0);
	if (r >= 0)
		R4(__NR_ptrace, PTRACE_DETACH_, pid, 0, 0);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return r;
}

/* Joins the namespace it is already in. */
static long p_setns(const char *arg)
{
	int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	long r;

	(void)arg;
	if (fd < 0)
		fd = open("/proc/self/ns/uts", O_RDONLY | O_CLOEXEC);
	r = R2(__NR_setns, fd, 0);
	if (fd >= 0)
		close(fd);
	return r;
}

/* Fork-like: a child that slipped through leaves at once. */
static long reap(long r)
{
	if (r == 0)
		_exit(0);
	if (r > 0)
		waitpid((pid_t)r, NULL, 0);
	return r > 0 ? 0 : r;
}

static long p_clone(long flags) { return reap(R5(__NR_clone, flags | SIGCHLD, 0, 0, 0, 0)); }
static long p_clone_newuser(const char *a) { (void)a; return p_clone(CLONE_NEWUSER); }
static long p_clone_newns(const char *a) { (void)a; return p_clone(CLONE_NEWNS); }
static long p_clone_newpid(const char *a) { (void)a; return p_clone(CLONE_NEWPID); }
static long p_clone_newuser_high(const char *a) { (void)a; return p_clone(HIGH_BITS | CLONE_NEWUSER); }
static long p_fork(const char *a) { (void)a; return p_clone(0); }

static long p_clone3(const char *arg)
{
	struct probe_clone_args ca;

	(void)arg;
	memset(&ca, 0, sizeof(ca));
	ca.exit_signal = SIGCHLD;
	return reap(R2(__NR_clone3, P(&ca), (long)sizeof(ca)));
}

static void *thread_main(void *arg)
{
	return arg;
}

/* glibc's pthread_create tries clone3 and falls back to clone on ENOSYS. */
static long p_thread(const char *arg)
{
	pthread_t t;
	int e;

	(void)arg;
	e = pthread_create(&t, NULL, thread_main, NULL);
	if (e)
		return -e;
	pthread_join(t, NULL);
	return 0;
}

/* In a new session there is no controlling terminal left to hang up. */
static long p_vhangup(const char *arg)
{
	long r = -EPROTO;
	int fds[2], status;
	pid_t pid;

	(void)arg;
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid == 0) {
		r = setsid() < 0 ? -errno : R0(__NR_vhangup);
		_exit(write(fds[1], &r, sizeof(r)) == sizeof(r) ? 0 : 1);
	}
	close(fds[1]);
	if (pid < 0 || read(fds[0], &r, sizeof(r)) != sizeof(r))
		r = -EPROTO;
	if (pid > 0)
		waitpid(pid, &status, 0);
	close(fds[0]);
	return r;
}

/* Terminal ioctls on a pipe: the kernel would say ENOTTY, so EPERM is the
 * filter's, and nothing can be typed into any terminal through a hole. */
static long ioctl_on_pipe(unsigned long cmd)
{
	char c = '\0';
	int fds[2];
	long r;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	r = R3(__NR_ioctl, fds[0], (long)cmd, P(&c));
	close(fds[0]);
	close(fds[1]);
	return r;
}

static long p_tiocsti(const char *a) { (void)a; return ioctl_on_pipe(TIOCSTI); }
static long p_tiocsti_high(const char *a) { (void)a; return ioctl_on_pipe((unsigned long)HIGH_BITS | TIOCSTI); }
static long p_tioclinux(const char *a) { (void)a; return ioctl_on_pipe(TIOCLINUX); }
static long p_fionread(const char *a) { (void)a; return ioctl_on_pipe(FIONREAD); }

/* i386 getpid (20) through the compat entry point. */
static long p_int80(const char *arg)
{
	long r;

	(void)arg;
	__asm__ volatile("int $0x80"
			 : "=a"(r)
			 : "a"(20L)
			 : "rcx", "r8", "r9", "r10", "r11", "memory");
	return r;
}

static long p_x32(const char *a) { (void)a; return R0(X32_SYSCALL_BIT | __NR_getpid); }

/* --- escape probes for the integration tests (not part of "all") --- */

/* A character device where the program may write: the user namespace must
 * refuse it. An accidental success is removed at once. */
static long p_mknod(const char *arg)
{
	const char *path = arg ? arg : "/workspace/ward-probe-null";
	long r = R4(__NR_mknodat, AT_FDCWD, P(path), S_IFCHR | 0666, (long)makedev(1, 3));

	if (r >= 0)
		unlink(path);
	return r;
}

static long p_setuid_root(const char *a) { (void)a; return R1(__NR_setuid, 0); }

/* Opening is the attempt; nothing is ever written. */
static long p_proc_self_exe_write(const char *arg)
{
	long r = R3(__NR_open, P("/proc/self/exe"), O_WRONLY | O_CLOEXEC, 0);

	(void)arg;
	if (r >= 0)
		close((int)r);
	return r;
}

/* What the sandbox's pid 1 sees as /etc; the names go to stderr. */
static long p_proc1_root(const char *arg)
{
	int fd = openat(AT_FDCWD, "/proc/1/root/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *d;
	DIR *dir;

	(void)arg;
	if (fd < 0)
		return -errno;
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return -errno;
	}
	errno = 0;
	while ((d = readdir(dir)) != NULL)
		fprintf(stderr, "proc1-root: %s\n", d->d_name);
	closedir(dir);
	return errno ? -errno : 0;
}

/* TIOCSTI on a given fd (the program's stdin may be the host's terminal).
 * The byte is NUL: nothing a shell would run. */
static long p_tiocsti_fd(const char *arg)
{
	char *end = NULL, c = '\0';
	long fd;

	if (!arg)
		return -EINVAL;
	errno = 0;
	fd = strtol(arg, &end, 10);
	if (errno || end == arg || *end || fd < 0 || fd > INT32_MAX)
		return -EINVAL;
	return R3(__NR_ioctl, fd, TIOCSTI, P(&c));
}

/* Generated binaries (docs/threat-model.md). A memfd must be sealed
 * against exec; a plain one is what a loader would fill and run. */
static long p_memfd_plain(const char *a) { (void)a; return R2(__NR_memfd_create, P("p"), MFD_CLOEXEC_); }
static long p_memfd_sealed(const char *a)
{
	long fd = R2(__NR_memfd_create, P("p"), MFD_CLOEXEC_ | MFD_NOEXEC_SEAL_);

	(void)a;
	if (fd >= 0)
		close((int)fd);
	return fd < 0 ? fd : 0;
}

/* Fills a memfd (sealed when arg is "sealed") with a script and runs it in
 * place: a success replaces the probe with /bin/true, which prints nothing. */
static long p_memfd_exec(const char *arg)
{
	long flags = MFD_CLOEXEC_ | (arg && strcmp(arg, "sealed") == 0 ? MFD_NOEXEC_SEAL_ : 0);
	long fd = R2(__NR_memfd_create, P("x"), flags);
	char *argv[] = { (char *)"x", NULL }, *envp[] = { NULL };

	if (fd < 0)
		return fd;
	if (write((int)fd, script, sizeof(script) - 1) != (ssize_t)sizeof(script) - 1)
		return -errno;
	fchmod((int)fd, 0755);
	return R5(__NR_execveat, fd, P(""), P(argv), P(envp), AT_EMPTY_PATH);
}

/* A file the program wrote (default /tmp/ward-probe-x), made executable
 * and run (arg "exec") or mapped PROT_EXEC (anything else). */
static long written_file(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	static char page[4096];

	if (fd < 0)
		return -errno;
	memcpy(page, script, sizeof(script) - 1);
	if (write(fd, page, sizeof(page)) != (ssize_t)sizeof(page)) {
		close(fd);
		return -EIO;
	}
	return fd;
}
static long p_mmap_exec(const char *arg)
{
	const char *path = arg ? arg : "/tmp/ward-probe-x";
	long fd = written_file(path), r;
	void *m;

	if (fd < 0)
		return fd;
	m = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, (int)fd, 0);
	r = m == MAP_FAILED ? -errno : 0;
	if (m != MAP_FAILED)
		munmap(m, 4096);
	close((int)fd);
	unlink(path);
	return r;
}
static long p_execve_written(const char *arg)
{
	const char *path = arg ? arg : "/tmp/ward-probe-x";
	char *argv[] = { (char *)"x", NULL }, *envp[] = { NULL };
	long fd = written_file(path), r;

	if (fd < 0)
		return fd;
	close((int)fd);
	r = R3(__NR_execve, P(path), P(argv), P(envp));
	unlink(path);
	return r;
}

/* Set-id modes (docs/seccomp.md). Each attempt works in a fresh directory
 * under ARG (default /tmp), e.g. a --rw mount, on a file of its own: the
 * kernel would allow every one, so EPERM is the filter's. Whatever was made
 * is removed before the result is reported. */
struct scratch {
	char dir[256], file[300], made[300];
	int fd;
};

static long scratch_open(struct scratch *s, const char *arg)
{
	int n = snprintf(s->dir, sizeof(s->dir), "%s/ward-probe-XXXXXX", arg ? arg : "/tmp");

	s->fd = -1;
	if (n < 0 || (size_t)n >= sizeof(s->dir) || !mkdtemp(s->dir))
		return -EINVAL;
	snprintf(s->file, sizeof(s->file), "%s/f", s->dir);
	snprintf(s->made, sizeof(s->made), "%s/made", s->dir);
	s->fd = open(s->file, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	return s->fd < 0 ? -errno : 0;
}

static long scratch_close(struct scratch *s, long r)
{
	if (s->fd >= 0)
		close(s->fd);
	unlink(s->made);
	rmdir(s->made);
	unlink(s->file);
	rmdir(s->dir);
	return r;
}

enum setid_call {
	SC_CHMOD, SC_FCHMOD, SC_FCHMODAT, SC_FCHMODAT2, SC_OPEN, SC_OPENAT,
	SC_TMPFILE, SC_CREAT, SC_MKDIR, SC_MKDIRAT, SC_MKNOD, SC_MKNODAT,
	SC_OPEN_EXISTING,
};

static long setid_call(struct scratch *s, enum setid_call c, long mode)
{
	long creat = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, fd;

	switch (c) {
	case SC_CHMOD: return R2(__NR_chmod, P(s->file), mode);
	case SC_FCHMOD: return R2(__NR_fchmod, s->fd, mode);
	case SC_FCHMODAT: return R3(__NR_fchmodat, AT_FDCWD, P(s->file), mode);
	case SC_FCHMODAT2: return R4(__NR_fchmodat2, AT_FDCWD, P(s->file), mode, 0);
	case SC_OPEN: fd = R3(__NR_open, P(s->made), creat, mode); break;
	case SC_OPENAT: fd = R4(__NR_openat, AT_FDCWD, P(s->made), creat, mode); break;
	case SC_TMPFILE: fd = R4(__NR_openat, AT_FDCWD, P(s->dir), O_TMPFILE | O_WRONLY | O_CLOEXEC, mode); break;
	case SC_CREAT: fd = R2(__NR_creat, P(s->made), mode); break;
	case SC_MKDIR: return R2(__NR_mkdir, P(s->made), mode);
	case SC_MKDIRAT: return R3(__NR_mkdirat, AT_FDCWD, P(s->made), mode);
	case SC_MKNOD: return R3(__NR_mknod, P(s->made), S_IFREG | mode, 0);
	case SC_MKNODAT: return R4(__NR_mknodat, AT_FDCWD, P(s->made), S_IFIFO | mode, 0);
	/* without O_CREAT the kernel ignores the mode, and so must the filter */
	case SC_OPEN_EXISTING: fd = R3(__NR_open, P(s->file), O_RDONLY | O_CLOEXEC, mode); break;
	default: return -EINVAL;
	}
	if (fd >= 0)
		close((int)fd);
	return fd < 0 ? fd : 0;
}

static long setid(const char *arg, enum setid_call c, long mode)
{
	struct scratch s;
	long r = scratch_open(&s, arg);

	return scratch_close(&s, r < 0 ? r : setid_call(&s, c, mode));
}

#define SUID (long)S_ISUID
#define SGID (long)S_ISGID
static long p_chmod_setuid(const char *a) { return setid(a, SC_CHMOD, SUID | 0755); }
static long p_chmod_setgid(const char *a) { return setid(a, SC_CHMOD, SGID | 0755); }
static long p_chmod_setuid_high(const char *a) { return setid(a, SC_CHMOD, HIGH_BITS | SUID | 0755); }
static long p_fchmod_setuid(const char *a) { return setid(a, SC_FCHMOD, SUID | 0755); }
static long p_fchmodat_setgid(const char *a) { return setid(a, SC_FCHMODAT, SGID | 0755); }
static long p_fchmodat2_setuid(const char *a) { return setid(a, SC_FCHMODAT2, SUID | 0755); }
static long p_open_creat_setuid(const char *a) { return setid(a, SC_OPEN, SUID | 0755); }
static long p_openat_creat_setgid(const char *a) { return setid(a, SC_OPENAT, SGID | 0755); }
static long p_openat_tmpfile_setuid(const char *a) { return setid(a, SC_TMPFILE, SUID | 0755); }
static long p_creat_setuid(const char *a) { return setid(a, SC_CREAT, SUID | 0755); }
static long p_mkdir_setgid(const char *a) { return setid(a, SC_MKDIR, SGID | 0755); }
static long p_mkdirat_setuid(const char *a) { return setid(a, SC_MKDIRAT, SUID | 0755); }
static long p_mknod_setuid(const char *a) { return setid(a, SC_MKNOD, SUID | 0755); }
static long p_mknodat_setgid(const char *a) { return setid(a, SC_MKNODAT, SGID | 0644); }
static long p_chmod_plain(const char *a) { return setid(a, SC_CHMOD, 01755); }
static long p_openat_creat_plain(const char *a) { return setid(a, SC_OPENAT, 0755); }
static long p_open_setuid_nocreat(const char *a) { return setid(a, SC_OPEN_EXISTING, SUID | 0755); }

/* openat2 carries its mode in a struct seccomp cannot read: ENOSYS, so
 * callers fall back to openat. Opening "/" read-only always works. */
static long p_openat2(const char *arg)
{
	uint64_t how[3] = { O_RDONLY | O_CLOEXEC, 0, 0 };
	long fd = R4(__NR_openat2, AT_FDCWD, P("/"), P(how), (long)sizeof(how));

	(void)arg;
	if (fd >= 0)
		close((int)fd);
	return fd < 0 ? fd : 0;
}

/* --- the table --- */

enum {
	ALL = 1 << 0,   /* part of "all": the seccomp contract */
	KILL = 1 << 1,  /* expected to be killed: no core file */
};

struct item {
	const char *name;
	long (*fn)(const char *arg);
	unsigned flags;
};

static const struct item items[] = {
	{ "io_uring_setup", p_io_uring_setup, ALL },
	{ "io_uring_enter", p_io_uring_enter, ALL },
	{ "io_uring_register", p_io_uring_register, ALL },
	{ "bpf", p_bpf, ALL },
	{ "perf_event_open", p_perf_event_open, ALL },
	{ "userfaultfd", p_userfaultfd, ALL },
	{ "ptrace-traceme", p_ptrace_traceme, ALL },
	{ "ptrace-attach", p_ptrace_attach, ALL },
	{ "process_vm_readv", p_process_vm_readv, ALL },
	{ "process_vm_writev", p_process_vm_writev, ALL },
	{ "keyctl", p_keyctl, ALL },
	{ "add_key", p_add_key, ALL },
	{ "request_key", p_request_key, ALL },
	{ "mount", p_mount, ALL },
	{ "umount2", p_umount2, ALL },
	{ "pivot_root", p_pivot_root, ALL },
	{ "chroot", p_chroot, ALL },
	{ "move_mount", p_move_mount, ALL },
	{ "open_tree", p_open_tree, ALL },
	{ "open_tree_attr", p_open_tree_attr, ALL },
	{ "fsopen", p_fsopen, ALL },
	{ "fsmount", p_fsmount, ALL },
	{ "fsconfig", p_fsconfig, ALL },
	{ "fspick", p_fspick, ALL },
	{ "mount_setattr", p_mount_setattr, ALL },
	{ "unshare-user", p_unshare_user, ALL },
	{ "unshare-net", p_unshare_net, ALL },
	{ "setns", p_setns, ALL },
	{ "clone-newuser", p_clone_newuser, ALL },
	{ "clone-newns", p_clone_newns, ALL },
	{ "clone-newpid", p_clone_newpid, ALL },
	{ "clone-newuser-high", p_clone_newuser_high, ALL },
	{ "clone3", p_clone3, ALL },
	{ "init_module", p_init_module, ALL },
	{ "finit_module", p_finit_module, ALL },
	{ "delete_module", p_delete_module, ALL },
	{ "kexec_load", p_kexec_load, ALL },
	{ "kexec_file_load", p_kexec_file_load, ALL },
	{ "reboot", p_reboot, ALL },
	{ "swapon", p_swapon, ALL },
	{ "swapoff", p_swapoff, ALL },
	{ "acct", p_acct, ALL },
	{ "quotactl", p_quotactl, ALL },
	{ "quotactl_fd", p_quotactl_fd, ALL },
	{ "syslog", p_syslog, ALL },
	{ "vhangup", p_vhangup, ALL },
	{ "personality", p_personality, ALL },
	{ "open_by_handle_at", p_open_by_handle_at, ALL },
	{ "name_to_handle_at", p_name_to_handle_at, ALL },
	{ "fanotify_init", p_fanotify_init, ALL },
	{ "tiocsti", p_tiocsti, ALL },
	{ "tiocsti-high", p_tiocsti_high, ALL },
	{ "tioclinux", p_tioclinux, ALL },
	{ "socket-packet", p_socket_packet, ALL },
	{ "socket-vsock", p_socket_vsock, ALL },
	{ "socket-alg", p_socket_alg, ALL },
	{ "netlink-netfilter", p_netlink_netfilter, ALL },
	{ "socketpair-inet", p_socketpair_inet, ALL },
	{ "cachestat", p_cachestat, ALL },
	{ "statmount", p_statmount, ALL },
	{ "listmount", p_listmount, ALL },
	{ "unknown-syscall", p_unknown, ALL },
	{ "int80", p_int80, ALL | KILL },
	{ "x32", p_x32, ALL | KILL },
	/* what must keep working */
	{ "fork", p_fork, ALL },
	{ "thread", p_thread, ALL },
	{ "personality-query", p_personality_query, ALL },
	{ "ioctl-fionread", p_fionread, ALL },
	{ "socket-unix", p_socket_unix, ALL },
	{ "socket-inet", p_socket_inet, ALL },
	{ "netlink-route", p_netlink_route, ALL },
	{ "memfd-plain", p_memfd_plain, ALL },
	{ "memfd-sealed", p_memfd_sealed, ALL },
	{ "chmod-setuid", p_chmod_setuid, ALL },
	{ "chmod-setgid", p_chmod_setgid, ALL },
	{ "chmod-setuid-high", p_chmod_setuid_high, ALL },
	{ "fchmod-setuid", p_fchmod_setuid, ALL },
	{ "fchmodat-setgid", p_fchmodat_setgid, ALL },
	{ "fchmodat2-setuid", p_fchmodat2_setuid, ALL },
	{ "open-creat-setuid", p_open_creat_setuid, ALL },
	{ "openat-creat-setgid", p_openat_creat_setgid, ALL },
	{ "openat-tmpfile-setuid", p_openat_tmpfile_setuid, ALL },
	{ "creat-setuid", p_creat_setuid, ALL },
	{ "mkdir-setgid", p_mkdir_setgid, ALL },
	{ "mkdirat-setuid", p_mkdirat_setuid, ALL },
	{ "mknod-setuid", p_mknod_setuid, ALL },
	{ "mknodat-setgid", p_mknodat_setgid, ALL },
	{ "openat2", p_openat2, ALL },
	{ "chmod-sticky", p_chmod_plain, ALL },
	{ "openat-creat-plain", p_openat_creat_plain, ALL },
	{ "open-setuid-nocreat", p_open_setuid_nocreat, ALL },
	/* escape probes, one at a time */
	{ "memfd-exec", p_memfd_exec, 0 },
	{ "mmap-exec", p_mmap_exec, 0 },
	{ "execve-written", p_execve_written, 0 },
	{ "mknod", p_mknod, 0 },
	{ "setuid-root", p_setuid_root, 0 },
	{ "proc-self-exe-write", p_proc_self_exe_write, 0 },
	{ "proc1-root", p_proc1_root, 0 },
	{ "tiocsti-fd", p_tiocsti_fd, 0 },
};

/* --- running and reporting --- */

static void print_result(const char *name, long r)
{
	const char *e = r < 0 ? strerrorname_np((int)-r) : NULL;

	if (r >= 0)
		printf("%s ok\n", name);
	else if (e)
		printf("%s errno=%s\n", name, e);
	else
		printf("%s errno=%ld\n", name, -r);
}

static void no_core(void)
{
	struct rlimit zero = { 0, 0 };

	setrlimit(RLIMIT_CORE, &zero);
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

static void run_child(const struct item *it, int wfd)
{
	long r;

	if (it->flags & KILL)
		no_core();
	r = it->fn(NULL);
	_exit(write(wfd, &r, sizeof(r)) == sizeof(r) ? 0 : 1);
}

/* Each item in its own child, so a kill or a changed personality stays
 * there; the parent prints every line. */
static int run_all(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(items); i++) {
		const struct item *it = &items[i];
		int fds[2], status = 0;
		long r = 0;
		ssize_t n = 0;
		pid_t pid;

		if (!(it->flags & ALL))
			continue;
		fflush(stdout);
		if (pipe2(fds, O_CLOEXEC) < 0)
			return 1;
		pid = fork();
		if (pid == 0) {
			close(fds[0]);
			run_child(it, fds[1]);
		}
		close(fds[1]);
		if (pid > 0)
			n = read(fds[0], &r, sizeof(r));
		close(fds[0]);
		if (pid < 0 || waitpid(pid, &status, 0) < 0)
			printf("%s error=fork\n", it->name);
		else if (WIFSIGNALED(status))
			printf("%s signal=SIG%s\n", it->name, sigabbrev_np(WTERMSIG(status)));
		else if (n == (ssize_t)sizeof(r))
			print_result(it->name, r);
		else
			printf("%s error=exit-%d\n", it->name, WEXITSTATUS(status));
	}
	return fflush(stdout) == 0 ? 0 : 1;
}

static int usage(void)
{
	fprintf(stderr, "usage: ward-probe NAME [ARG] | all | list\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3)
		return usage();
	if (strcmp(argv[1], "all") == 0)
		return run_all();
	if (strcmp(argv[1], "list") == 0) {
		for (size_t i = 0; i < ARRAY_SIZE(items); i++)
			printf("%s%s\n", items[i].name, items[i].flags & ALL ? "" : " (single)");
		return 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(items); i++) {
		if (strcmp(argv[1], items[i].name) != 0)
			continue;
		if (items[i].flags & KILL)
			no_core();
		print_result(items[i].name, items[i].fn(argc == 3 ? argv[2] : NULL));
		return fflush(stdout) == 0 ? 0 : 1;
	}
	return usage();
}
