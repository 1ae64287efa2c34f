/* lib/layers/seccomp-rules.h — ward's seccomp policy, as data, in one place.
 *
 * Only tools/gen-seccomp.c includes this: it compiles the tables into one
 * classic-BPF program at build time (libseccomp takes ~2 ms, over the whole
 * per-run budget) and lib/layers/seccomp.c embeds the result. docs/seccomp.md
 * explains each choice and tests/security/expected.txt is the contract; change
 * all three together. Must never grow a rule that depends on run-time state.
 *
 * x86_64 only: numbers are x86_64 syscall numbers, and every other ABI (i386
 * through int 0x80, x32) is killed by the architecture check.
 */
#ifndef WARD_SECCOMP_RULES_H
#define WARD_SECCOMP_RULES_H

#include <errno.h>
#include <fcntl.h>
#include <sys/personality.h>
#include <sched.h>
#include <linux/netlink.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

/* Syscalls newer than the 6.1 uapi headers (the kernel is 6.18). */
#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif
#ifndef __NR_map_shadow_stack
#define __NR_map_shadow_stack 453
#endif
#ifndef __NR_futex_wake
#define __NR_futex_wake 454
#endif
#ifndef __NR_futex_wait
#define __NR_futex_wait 455
#endif
#ifndef __NR_futex_requeue
#define __NR_futex_requeue 456
#endif
#ifndef __NR_mseal
#define __NR_mseal 462
#endif
#ifndef __NR_setxattrat
#define __NR_setxattrat 463
#endif
#ifndef __NR_getxattrat
#define __NR_getxattrat 464
#endif
#ifndef __NR_listxattrat
#define __NR_listxattrat 465
#endif
#ifndef __NR_removexattrat
#define __NR_removexattrat 466
#endif
#ifndef __NR_open_tree_attr
#define __NR_open_tree_attr 467
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* The answer for any syscall not in the table: "not implemented", so a libc
 * or runtime probing a newer syscall falls back to an older one. */
#define WARD_SC_DEFAULT_ERRNO ENOSYS

struct ward_sc_rule {
	const char *name;
	int nr;
	int errnum;     /* 0: allow; otherwise fail with this errno */
};

#define ALLOW(n) { #n, __NR_##n, 0 }
#define DENY(n, e) { #n, __NR_##n, e }

static const struct ward_sc_rule ward_sc_rules[] = {
	/* files and descriptors */
	/* open, openat, creat, mkdir, mkdirat, mknod, mknodat, chmod, fchmod,
	 * fchmodat and fchmodat2 refuse a set-id mode in the argument guard */
	ALLOW(read), ALLOW(write), ALLOW(open), ALLOW(openat),
	ALLOW(creat), ALLOW(close), ALLOW(close_range), ALLOW(lseek),
	ALLOW(pread64), ALLOW(pwrite64), ALLOW(readv), ALLOW(writev),
	ALLOW(preadv), ALLOW(pwritev), ALLOW(preadv2), ALLOW(pwritev2),
	ALLOW(stat), ALLOW(fstat), ALLOW(lstat), ALLOW(newfstatat), ALLOW(statx),
	ALLOW(statfs), ALLOW(fstatfs), ALLOW(access), ALLOW(faccessat),
	ALLOW(faccessat2), ALLOW(dup), ALLOW(dup2), ALLOW(dup3), ALLOW(fcntl),
	ALLOW(flock), ALLOW(fsync), ALLOW(fdatasync), ALLOW(sync), ALLOW(syncfs),
	ALLOW(sync_file_range), ALLOW(truncate), ALLOW(ftruncate),
	ALLOW(fallocate), ALLOW(fadvise64), ALLOW(readahead), ALLOW(getdents),
	ALLOW(getdents64), ALLOW(getcwd), ALLOW(chdir), ALLOW(fchdir),
	ALLOW(rename), ALLOW(renameat), ALLOW(renameat2), ALLOW(mkdir),
	ALLOW(mkdirat), ALLOW(rmdir), ALLOW(link), ALLOW(linkat), ALLOW(unlink),
	ALLOW(unlinkat), ALLOW(symlink), ALLOW(symlinkat), ALLOW(readlink),
	ALLOW(readlinkat), ALLOW(chmod), ALLOW(fchmod), ALLOW(fchmodat),
	ALLOW(fchmodat2), ALLOW(chown), ALLOW(fchown), ALLOW(lchown),
	ALLOW(fchownat), ALLOW(umask), ALLOW(utime), ALLOW(utimes),
	ALLOW(futimesat), ALLOW(utimensat),
	/* mknod makes FIFOs and sockets; device nodes fail in the user namespace */
	ALLOW(mknod), ALLOW(mknodat),
	ALLOW(setxattr), ALLOW(lsetxattr), ALLOW(fsetxattr), ALLOW(getxattr),
	ALLOW(lgetxattr), ALLOW(fgetxattr), ALLOW(listxattr), ALLOW(llistxattr),
	ALLOW(flistxattr), ALLOW(removexattr), ALLOW(lremovexattr),
	ALLOW(fremovexattr), ALLOW(setxattrat), ALLOW(getxattrat),
	ALLOW(listxattrat), ALLOW(removexattrat),
	ALLOW(sendfile), ALLOW(splice), ALLOW(tee), ALLOW(vmsplice),
	ALLOW(copy_file_range),
	/* memfd_create: only sealed against exec, by the argument guard */
	ALLOW(memfd_create),
	/* ioctl: TIOCSTI and TIOCLINUX are refused by the argument guard */
	ALLOW(ioctl),
	ALLOW(pipe), ALLOW(pipe2),
	ALLOW(inotify_init), ALLOW(inotify_init1), ALLOW(inotify_add_watch),
	ALLOW(inotify_rm_watch),
	/* event loops */
	ALLOW(poll), ALLOW(ppoll), ALLOW(select), ALLOW(pselect6),
	ALLOW(epoll_create), ALLOW(epoll_create1), ALLOW(epoll_ctl),
	ALLOW(epoll_wait), ALLOW(epoll_pwait), ALLOW(epoll_pwait2),
	ALLOW(eventfd), ALLOW(eventfd2), ALLOW(signalfd), ALLOW(signalfd4),
	ALLOW(timerfd_create), ALLOW(timerfd_settime), ALLOW(timerfd_gettime),
	/* Linux AIO, used by databases; io_uring is refused below */
	ALLOW(io_setup), ALLOW(io_destroy), ALLOW(io_getevents),
	ALLOW(io_pgetevents), ALLOW(io_submit), ALLOW(io_cancel),
	/* memory */
	ALLOW(mmap), ALLOW(mprotect), ALLOW(munmap), ALLOW(mremap), ALLOW(brk),
	ALLOW(msync), ALLOW(mincore), ALLOW(madvise), ALLOW(mlock),
	ALLOW(mlock2), ALLOW(munlock), ALLOW(mlockall), ALLOW(munlockall),
	ALLOW(mbind), ALLOW(set_mempolicy), ALLOW(get_mempolicy),
	ALLOW(set_mempolicy_home_node), ALLOW(pkey_mprotect), ALLOW(pkey_alloc),
	ALLOW(pkey_free), ALLOW(membarrier), ALLOW(map_shadow_stack),
	ALLOW(mseal),
	/* System V and POSIX IPC, private to the IPC namespace */
	ALLOW(shmget), ALLOW(shmat), ALLOW(shmctl), ALLOW(shmdt), ALLOW(semget),
	ALLOW(semop), ALLOW(semtimedop), ALLOW(semctl), ALLOW(msgget),
	ALLOW(msgsnd), ALLOW(msgrcv), ALLOW(msgctl), ALLOW(mq_open),
	ALLOW(mq_unlink), ALLOW(mq_timedsend), ALLOW(mq_timedreceive),
	ALLOW(mq_notify), ALLOW(mq_getsetattr),
	/* sockets: socket and socketpair families are limited by the guard */
	ALLOW(socket), ALLOW(socketpair), ALLOW(connect), ALLOW(accept),
	ALLOW(accept4), ALLOW(bind), ALLOW(listen), ALLOW(shutdown),
	ALLOW(sendto), ALLOW(recvfrom), ALLOW(sendmsg), ALLOW(recvmsg),
	ALLOW(sendmmsg), ALLOW(recvmmsg), ALLOW(getsockname),
	ALLOW(getpeername), ALLOW(setsockopt), ALLOW(getsockopt),
	/* processes and threads: clone loses namespace flags in the guard */
	ALLOW(clone), ALLOW(fork), ALLOW(vfork), ALLOW(execve), ALLOW(execveat),
	ALLOW(exit), ALLOW(exit_group), ALLOW(wait4), ALLOW(waitid),
	ALLOW(set_tid_address), ALLOW(set_robust_list), ALLOW(get_robust_list),
	ALLOW(futex), ALLOW(futex_waitv), ALLOW(futex_wake), ALLOW(futex_wait),
	ALLOW(futex_requeue), ALLOW(rseq), ALLOW(arch_prctl), ALLOW(prctl),
	ALLOW(getpid), ALLOW(getppid), ALLOW(gettid), ALLOW(getpgrp),
	ALLOW(getpgid), ALLOW(setpgid), ALLOW(getsid), ALLOW(setsid),
	ALLOW(pidfd_open), ALLOW(pidfd_send_signal),
	ALLOW(sched_yield), ALLOW(sched_setaffinity), ALLOW(sched_getaffinity),
	ALLOW(sched_setparam), ALLOW(sched_getparam),
	ALLOW(sched_setscheduler), ALLOW(sched_getscheduler),
	ALLOW(sched_setattr), ALLOW(sched_getattr),
	ALLOW(sched_get_priority_max), ALLOW(sched_get_priority_min),
	ALLOW(sched_rr_get_interval), ALLOW(getpriority), ALLOW(setpriority),
	ALLOW(ioprio_get), ALLOW(ioprio_set), ALLOW(getcpu),
	/* personality: only the query and PER_LINUX pass the guard */
	ALLOW(personality),
	/* only ever narrows what the caller can do */
	ALLOW(seccomp), ALLOW(landlock_create_ruleset), ALLOW(landlock_add_rule),
	ALLOW(landlock_restrict_self),
	/* signals */
	ALLOW(rt_sigaction), ALLOW(rt_sigprocmask), ALLOW(rt_sigreturn),
	ALLOW(rt_sigpending), ALLOW(rt_sigtimedwait), ALLOW(rt_sigqueueinfo),
	ALLOW(rt_tgsigqueueinfo), ALLOW(rt_sigsuspend), ALLOW(sigaltstack),
	ALLOW(kill), ALLOW(tkill), ALLOW(tgkill), ALLOW(pause),
	ALLOW(restart_syscall),
	/* time */
	ALLOW(nanosleep), ALLOW(clock_nanosleep), ALLOW(clock_gettime),
	ALLOW(clock_getres), ALLOW(gettimeofday), ALLOW(time), ALLOW(times),
	ALLOW(alarm), ALLOW(getitimer), ALLOW(setitimer), ALLOW(timer_create),
	ALLOW(timer_settime), ALLOW(timer_gettime), ALLOW(timer_getoverrun),
	ALLOW(timer_delete),
	/* identity and limits, all confined to the user namespace */
	ALLOW(getuid), ALLOW(geteuid), ALLOW(getgid), ALLOW(getegid),
	ALLOW(getresuid), ALLOW(getresgid), ALLOW(getgroups), ALLOW(setuid),
	ALLOW(setgid), ALLOW(setreuid), ALLOW(setregid), ALLOW(setresuid),
	ALLOW(setresgid), ALLOW(setfsuid), ALLOW(setfsgid), ALLOW(setgroups),
	ALLOW(capget), ALLOW(capset), ALLOW(getrlimit), ALLOW(setrlimit),
	ALLOW(prlimit64), ALLOW(getrusage), ALLOW(uname), ALLOW(sysinfo),
	ALLOW(getrandom),

	/* --- refused with a chosen errno (see docs/seccomp.md) --- */
	/* kernel attack surface with a userspace fallback: look absent */
	DENY(io_uring_setup, ENOSYS), DENY(io_uring_enter, ENOSYS),
	DENY(io_uring_register, ENOSYS),
	/* so glibc falls back to clone(2), whose flags the guard can read */
	DENY(clone3, ENOSYS),
	/* its mode sits in memory that seccomp cannot read, so a set-id mode
	 * could not be refused: libc and runtimes fall back to openat */
	DENY(openat2, ENOSYS),
	/* other processes' memory and the kernel's tracing machinery */
	DENY(ptrace, EPERM), DENY(process_vm_readv, EPERM),
	DENY(process_vm_writev, EPERM), DENY(bpf, EPERM),
	DENY(perf_event_open, EPERM), DENY(userfaultfd, EPERM),
	/* kernel keyrings are not namespaced */
	DENY(keyctl, EPERM), DENY(add_key, EPERM), DENY(request_key, EPERM),
	/* the mount table is fixed by the sandbox */
	DENY(mount, EPERM), DENY(umount2, EPERM), DENY(pivot_root, EPERM),
	DENY(chroot, EPERM), DENY(move_mount, EPERM), DENY(open_tree, EPERM),
	DENY(open_tree_attr, EPERM), DENY(fsopen, EPERM), DENY(fsmount, EPERM),
	DENY(fsconfig, EPERM), DENY(fspick, EPERM), DENY(mount_setattr, EPERM),
	/* no new namespaces, no joining others */
	DENY(unshare, EPERM), DENY(setns, EPERM),
	/* whole-machine administration */
	DENY(init_module, EPERM), DENY(finit_module, EPERM),
	DENY(delete_module, EPERM), DENY(kexec_load, EPERM),
	DENY(kexec_file_load, EPERM), DENY(reboot, EPERM), DENY(swapon, EPERM),
	DENY(swapoff, EPERM), DENY(acct, EPERM), DENY(quotactl, EPERM),
	DENY(quotactl_fd, EPERM), DENY(syslog, EPERM), DENY(vhangup, EPERM),
	/* file handles bypass path-based checks (the "shocker" escape) */
	DENY(open_by_handle_at, EPERM), DENY(name_to_handle_at, EPERM),
	DENY(fanotify_init, EPERM),
};

#undef ALLOW
#undef DENY

/* --- argument guards: checked before the table, on the low 32 bits ---
 * The kernel reads these arguments as 32-bit values, so the guard compares
 * only the low word: a caller cannot dodge it by setting the high bits. */

/* clone(2) flags that create namespaces: EPERM. CLONE_NEWTIME shares its bit
 * with the exit signal in clone(2) and is invalid there; refusing it costs
 * nothing. */
#define WARD_SC_CLONE_NS_FLAGS                                                \
	((uint32_t)(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS |           \
		    CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |            \
		    CLONE_NEWNET | CLONE_NEWTIME))
#define WARD_SC_CLONE_ERRNO EPERM

/* ioctl(2) requests that type into, or reconfigure, a terminal that may be
 * shared with the host: EPERM. */
static const uint32_t ward_sc_ioctl_denied[] = { TIOCSTI, TIOCLINUX };
#define WARD_SC_IOCTL_ERRNO EPERM

/* personality(2): the query and plain PER_LINUX pass; any change is EPERM. */
static const uint32_t ward_sc_personality_allowed[] = { PER_LINUX, 0xffffffffu };
#define WARD_SC_PERSONALITY_ERRNO EPERM

/* socket(2) families: every other one is EAFNOSUPPORT, which closes the
 * rarely used protocol stacks (and their module autoloading) to the sandbox.
 * AF_NETLINK is limited to NETLINK_ROUTE (getaddrinfo, getifaddrs). */
static const uint32_t ward_sc_socket_families[] = { AF_UNIX, AF_INET, AF_INET6 };
#define WARD_SC_SOCKET_ERRNO EAFNOSUPPORT
static const uint32_t ward_sc_netlink_protocols[] = { NETLINK_ROUTE };
#define WARD_SC_NETLINK_ERRNO EPROTONOSUPPORT
/* socketpair(2) exists only for AF_UNIX in practice. */
#define WARD_SC_SOCKETPAIR_FAMILY AF_UNIX

/* memfd_create(2) without MFD_NOEXEC_SEAL: ENOSYS, so callers fall back to
 * a file in /tmp, which is noexec. A memfd is the one writable file that no
 * mount flag covers: unsealed, it could be filled and then run with
 * execveat(AT_EMPTY_PATH) or through /proc/self/fd. A sealed one cannot. */
#define WARD_SC_MEMFD_REQUIRED 0x0008u /* MFD_NOEXEC_SEAL, Linux >= 6.3 */
#define WARD_SC_MEMFD_ERRNO ENOSYS

/* A mode with S_ISUID or S_ISGID: EPERM, from chmod, fchmod, fchmodat,
 * fchmodat2, creat, mkdir, mkdirat, mknod, mknodat, and open and openat when
 * they create (O_CREAT or O_TMPFILE). A --rw directory is an idmapped mount
 * on which the sandbox user is the directory's owner on the host: a set-id
 * file made there would, run on the host, take that owner's identity. There
 * is no "strip the bit" in seccomp; programs see the errno the kernel gives
 * an unprivileged chmod of someone else's file. */
#define WARD_SC_SETID_MODE ((uint32_t)(S_ISUID | S_ISGID))
#define WARD_SC_O_TMPFILE_BIT 020000000u /* __O_TMPFILE, without O_DIRECTORY */
#define WARD_SC_CREATE_FLAGS ((uint32_t)O_CREAT | WARD_SC_O_TMPFILE_BIT)
#define WARD_SC_SETID_ERRNO EPERM

#endif
