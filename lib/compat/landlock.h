/* lib/compat/landlock.h — the landlock uapi as the running kernel knows it.
 *
 * The build host's <linux/landlock.h> (linux-libc-dev 6.1) only knows ABI 2,
 * while the kernels we run on go up to ABI 7. This header fills the gap with
 * #ifndef-guarded definitions, our own full-size ruleset attribute, raw
 * syscall wrappers (glibc has none) and the table of which rights each ABI
 * understands. It states kernel facts only: which rights the sandbox grants
 * is decided in lib/layers/landlock.c. Everything here is child-safe.
 */
#ifndef WARD_COMPAT_LANDLOCK_H
#define WARD_COMPAT_LANDLOCK_H

#include <linux/landlock.h>
#include <linux/types.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The syscall numbers are the same on every architecture since 5.1. */
#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#endif
#ifndef __NR_landlock_add_rule
#define __NR_landlock_add_rule 445
#endif
#ifndef __NR_landlock_restrict_self
#define __NR_landlock_restrict_self 446
#endif

/* landlock_create_ruleset() flags. */
#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif
#ifndef LANDLOCK_CREATE_RULESET_ERRATA
#define LANDLOCK_CREATE_RULESET_ERRATA (1U << 1)
#endif

/* Filesystem rights newer than ABI 2. */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)   /* ABI 3 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)  /* ABI 5 */
#endif

/* Network rights and the port rule (ABI 4). They arrived together, so one
 * guard covers the macros and the struct; the rule type is an enum upstream,
 * which #ifndef cannot see, hence the macro under the same guard. */
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#define LANDLOCK_RULE_NET_PORT 2
struct landlock_net_port_attr {
	__u64 allowed_access;
	__u64 port;
};
#endif

/* IPC scopes (ABI 6). */
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

/* landlock_restrict_self() audit flags (ABI 7). */
#ifndef LANDLOCK_RESTRICT_SELF_LOG_SAME_EXEC_OFF
#define LANDLOCK_RESTRICT_SELF_LOG_SAME_EXEC_OFF (1U << 0)
#endif
#ifndef LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON
#define LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON (1U << 1)
#endif
#ifndef LANDLOCK_RESTRICT_SELF_LOG_SUBDOMAINS_OFF
#define LANDLOCK_RESTRICT_SELF_LOG_SUBDOMAINS_OFF (1U << 2)
#endif

/* The ruleset attribute as of ABI 6. The uapi struct of the build host has
 * only the first field; the kernel takes the size as an argument, so we pass
 * ward_landlock_attr_size(abi) bytes of this one. */
struct ward_landlock_ruleset_attr {
	__u64 handled_access_fs;
	__u64 handled_access_net;   /* ABI 4 */
	__u64 scoped;               /* ABI 6 */
};

/* The 13 rights of ABI 1: EXECUTE (bit 0) up to MAKE_SYM (bit 12). */
#define WARD_LANDLOCK_FS_V1 ((1ULL << 13) - 1)

/* Rights that may be granted on a non-directory; any other right in a rule
 * for a file makes landlock_add_rule() fail with EINVAL. */
#define WARD_LANDLOCK_FS_FILE                                                  \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |          \
	 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |          \
	 LANDLOCK_ACCESS_FS_IOCTL_DEV)

/* Every filesystem right the given ABI knows; 0 for abi <= 0. Rights we do
 * not know (a future ABI) are never handled, so a newer kernel behaves like
 * the newest ABI this file describes. */
static inline uint64_t ward_landlock_fs_handled(int abi)
{
	uint64_t mask = 0;
	if (abi >= 1)
		mask |= WARD_LANDLOCK_FS_V1;
	if (abi >= 2)
		mask |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		mask |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		mask |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return mask;
}

/* Every IPC scope the given ABI knows. */
static inline uint64_t ward_landlock_scoped(int abi)
{
	if (abi >= 6)
		return LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
	return 0;
}

/* How many bytes of struct ward_landlock_ruleset_attr the given ABI reads.
 * A kernel rejects a larger size only when the extra bytes are nonzero, but
 * passing exactly what it knows keeps the call obviously valid. */
static inline size_t ward_landlock_attr_size(int abi)
{
	if (abi >= 6)
		return sizeof(struct ward_landlock_ruleset_attr);
	if (abi >= 4)
		return offsetof(struct ward_landlock_ruleset_attr, scoped);
	return offsetof(struct ward_landlock_ruleset_attr, handled_access_net);
}

/* Raw syscalls: return the syscall's result, -1 with errno on failure. */
static inline int ward_sys_landlock_create_ruleset(
	const struct ward_landlock_ruleset_attr *attr, size_t size, __u32 flags)
{
	return (int)syscall(__NR_landlock_create_ruleset, attr, size, flags);
}

static inline int ward_sys_landlock_add_rule(int ruleset_fd, int rule_type,
					     const void *rule_attr, __u32 flags)
{
	return (int)syscall(__NR_landlock_add_rule, ruleset_fd, rule_type,
			    rule_attr, flags);
}

static inline int ward_sys_landlock_restrict_self(int ruleset_fd, __u32 flags)
{
	return (int)syscall(__NR_landlock_restrict_self, ruleset_fd, flags);
}

#endif
