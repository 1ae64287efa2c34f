/* lib/compat/clone.h — clone3 flags and waitid's P_PIDFD that Debian 12's
 * uapi headers (Linux 6.1) or glibc 2.36 may lack. */
#ifndef WARD_COMPAT_CLONE_H
#define WARD_COMPAT_CLONE_H

#include <linux/sched.h>
#include <sys/wait.h>

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif

#endif
