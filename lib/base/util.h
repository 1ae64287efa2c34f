/* lib/base/util.h — small helpers with no sandbox knowledge.
 *
 * Scoped cleanup, fd hand-off, EINTR-safe I/O, bounded string copies. Every
 * helper marked child-safe makes only raw syscalls and never allocates.
 */
#ifndef WARD_BASE_UTIL_H
#define WARD_BASE_UTIL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define WARD_EXPORT __attribute__((visibility("default")))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static inline void ward_freep(void *p) { free(*(void **)p); }
static inline void ward_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}

#define _cleanup_free_ __attribute__((cleanup(ward_freep)))
#define _cleanup_close_ __attribute__((cleanup(ward_closep)))

/* Hand-off: returns the value and empties the variable. */
static inline int take_fd(int *fd)
{
	int r = *fd;
	*fd = -1;
	return r;
}
static inline void *take_ptr_(void **p)
{
	void *r = *p;
	*p = NULL;
	return r;
}
#define take_ptr(p) take_ptr_((void **)&(p))

/* Child-safe: copies at most size-1 bytes and terminates; returns strlen(src). */
size_t ward_strlcpy(char *dst, const char *src, size_t size);
/* Child-safe: appends; returns the length it tried to create. */
size_t ward_strlcat(char *dst, const char *src, size_t size);
/* Child-safe: formats v in decimal into buf (>= 21 bytes); returns buf. */
char *ward_utoa(uint64_t v, char *buf);

/* Child-safe: writes all of buf, retrying on EINTR and short writes.
 * Returns 0 or -errno. */
int ward_write_all(int fd, const void *buf, size_t len);
/* Child-safe: reads exactly len bytes unless EOF comes first.
 * Returns bytes read (< len only at EOF) or -errno. */
ssize_t ward_read_full(int fd, void *buf, size_t len);
/* Child-safe: writes a whole small file (O_CLOEXEC|O_NOFOLLOW). 0 or -errno. */
int ward_write_file_at(int dirfd, const char *path, const char *data,
		       size_t len, int flags, mode_t mode);

/* Parent: reads a whole file into a malloc'ed NUL-terminated buffer.
 * Returns 0 or -errno; *len gets the size without the NUL. max caps it
 * (-EFBIG beyond). */
int ward_read_file(const char *path, size_t max, char **out, size_t *len);

/* Parent: j serialized into a buffer of exactly its size plus `extra`
 * spare bytes (json_dumps's growing buffer and final copy cost up to
 * three times a large document: a verdict of 16 MiB of control
 * characters escapes to ~100 MB). NUL-terminated; *len gets the length.
 * NULL on ENOMEM. */
struct json_t;
char *ward_json_dump(const struct json_t *j, size_t flags, size_t extra, size_t *len);

/* The one JSON depth scan, run before a parser recurses: true when buf
 * nests arrays and objects deeper than max outside strings; *at (if not
 * NULL) gets the offset of the bracket that went too deep. Closing
 * brackets never count below zero, so "]]]" cannot buy extra depth. */
bool ward_json_too_deep(const char *buf, size_t len, int max, size_t *at);

/* The one id generator: prefix (may be NULL) then 2 * nbytes lowercase hex
 * digits of fresh randomness (getrandom), NUL-terminated, into buf of size
 * bytes. nbytes is 1 to 32. 0, -ERANGE (does not fit) or -errno. The
 * formats in use: sandbox ids (no prefix, 8 bytes), "ex_" and "se_"
 * (8 bytes), API key ids (6 bytes); see docs/api.md. */
int ward_id_new(char *buf, size_t size, const char *prefix, size_t nbytes);

/* The one /proc reader. pid > 0 reads /proc/<pid>/<name>, WARD_PROC_SELF
 * /proc/self/<name>, WARD_PROC_ROOT /proc/<name> (e.g. "sys/kernel/..."),
 * into buf (size bytes, NUL-terminated). Returns the length, or -errno;
 * -EFBIG when the file does not fit (never a silent truncation).
 * Child-safe: no allocation, raw syscalls. */
enum { WARD_PROC_SELF = 0, WARD_PROC_ROOT = -1 };
ssize_t ward_proc_read(pid_t pid, const char *name, char *buf, size_t size);
/* /proc/<pid>/stat: the state letter (field 3) and the start time in clock
 * ticks after boot (field 22). 0 or -errno (-EINVAL: unparsable).
 * Child-safe. */
struct ward_proc_stat {
	char state;
	uint64_t starttime;
};
int ward_proc_stat(pid_t pid, struct ward_proc_stat *st);
/* Whether this process is in the initial user namespace (its uid_map maps
 * all 2^32-1 ids from 0): root of a nested one, as under `unshare -r`, is
 * not host root. host_uid (may be NULL): the host uid the effective uid
 * stands for, or -1 when the map does not say. */
bool ward_proc_initial_userns(long long *host_uid);
/* The uid the kernel shows for an owner this namespace does not map
 * (/proc/sys/kernel/overflowuid, 65534 if unreadable). */
uid_t ward_proc_overflow_uid(void);

/* Monotonic clock in nanoseconds. Child-safe (vDSO). */
uint64_t ward_now_ns(void);

#include "base/banned.h"

#endif
