/* lib/compat/mount.h — the new mount API, for glibc 2.36 and old uapi headers.
 * glibc's <sys/mount.h> and <linux/mount.h> conflict, so only the glibc one is
 * included and the rest is defined here with guards. */
#ifndef WARD_COMPAT_MOUNT_H
#define WARD_COMPAT_MOUNT_H

#include <fcntl.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef MOVE_MOUNT_T_EMPTY_PATH
#define MOVE_MOUNT_T_EMPTY_PATH 0x00000040
#endif
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV 0x00000004
#define MOUNT_ATTR_NOEXEC 0x00000008
#endif
#ifndef MOUNT_ATTR_IDMAP
#define MOUNT_ATTR_IDMAP 0x00100000
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

#ifndef MOUNT_ATTR_SIZE_VER0
struct mount_attr {
	uint64_t attr_set;
	uint64_t attr_clr;
	uint64_t propagation;
	uint64_t userns_fd;
};
#define MOUNT_ATTR_SIZE_VER0 32
#endif

/* Raw wrappers: child-safe and independent of the glibc version. */
static inline long ward_open_tree(int dfd, const char *path, unsigned flags)
{
	return syscall(SYS_open_tree, dfd, path, flags);
}
static inline long ward_move_mount(int from_dfd, const char *from, int to_dfd,
				   const char *to, unsigned flags)
{
	return syscall(SYS_move_mount, from_dfd, from, to_dfd, to, flags);
}
static inline long ward_mount_setattr(int dfd, const char *path, unsigned flags,
				      struct mount_attr *attr, size_t size)
{
	return syscall(SYS_mount_setattr, dfd, path, flags, attr, size);
}

#endif
