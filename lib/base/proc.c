/* lib/base/proc.c — the one /proc reader: small files into caller storage.
 *
 * Every read of /proc goes through here: bounded by the caller's buffer, no
 * allocation, no stdio, raw syscalls only, so it is child-safe and usable
 * under memory pressure. A file larger than the buffer is an error (-EFBIG),
 * never a silent truncation. Knows nothing about sandboxes.
 */
#include <fcntl.h>
#include <stdio.h>

#include "base/util.h"

/* "/proc/<pid>/<name>", "/proc/self/<name>" or "/proc/<name>". */
static int proc_path(char *path, size_t size, pid_t pid, const char *name)
{
	char num[24];
	ward_strlcpy(path, "/proc/", size);
	if (pid > 0)
		ward_strlcat(path, ward_utoa((uint64_t)pid, num), size);
	else if (pid == WARD_PROC_SELF)
		ward_strlcat(path, "self", size);
	if (pid >= 0)
		ward_strlcat(path, "/", size);
	return ward_strlcat(path, name, size) < size ? 0 : -ENAMETOOLONG;
}

ssize_t ward_proc_read(pid_t pid, const char *name, char *buf, size_t size)
{
	char path[128];
	if (size < 2 || proc_path(path, sizeof(path), pid, name) < 0)
		return -ENAMETOOLONG;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	/* one byte more than fits tells a full buffer from a larger file */
	ssize_t n = ward_read_full(fd, buf, size);
	close(fd);
	if (n < 0)
		return n;
	if ((size_t)n == size)
		return -EFBIG;
	buf[n] = '\0';
	return n;
}

int ward_proc_stat(pid_t pid, struct ward_proc_stat *st)
{
	char buf[2048];
	ssize_t n = ward_proc_read(pid, "stat", buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	/* comm (field 2) may hold spaces and ')': count from the last ')' */
	const char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || !p[2])
		return -EINVAL;
	st->state = p[2];                        /* field 3 */
	p += 2;
	for (int field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -EINVAL;
		p++;
	}
	uint64_t v = 0;                          /* field 22: starttime */
	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (uint64_t)(*p - '0');
	st->starttime = v;
	return 0;
}

bool ward_proc_initial_userns(long long *host_uid)
{
	char buf[4096];
	unsigned long long in, out, count, euid = geteuid();
	bool initial = false;
	int off = 0, n;
	if (host_uid)
		*host_uid = -1;
	if (ward_proc_read(WARD_PROC_SELF, "uid_map", buf, sizeof(buf)) < 0)
		return false;
	for (bool first = true; sscanf(buf + off, "%llu %llu %llu%n", &in, &out, &count, &n) == 3;
	     off += n, first = false) {
		if (first)
			initial = in == 0 && out == 0 && count == 4294967295ull;
		if (host_uid && euid >= in && euid - in < count)
			*host_uid = (long long)(out + (euid - in));
	}
	return initial;
}

uid_t ward_proc_overflow_uid(void)
{
	char buf[32];
	unsigned long v;
	if (ward_proc_read(WARD_PROC_ROOT, "sys/kernel/overflowuid", buf, sizeof(buf)) < 0 ||
	    sscanf(buf, "%lu", &v) != 1)
		return 65534;
	return (uid_t)v;
}
