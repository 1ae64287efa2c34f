/* lib/base/util.c — small helpers with no sandbox knowledge.
 * Must never know about namespaces, policies or layers. */
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/util.h"

size_t ward_strlcpy(char *dst, const char *src, size_t size)
{
	size_t n = strlen(src);
	if (size) {
		size_t c = n < size - 1 ? n : size - 1;
		memcpy(dst, src, c);
		dst[c] = '\0';
	}
	return n;
}

size_t ward_strlcat(char *dst, const char *src, size_t size)
{
	size_t d = strnlen(dst, size);
	if (d == size)
		return d + strlen(src);
	return d + ward_strlcpy(dst + d, src, size - d);
}

char *ward_utoa(uint64_t v, char *buf)
{
	char tmp[21];
	size_t i = 0, j = 0;
	do {
		tmp[i++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (i)
		buf[j++] = tmp[--i];
	buf[j] = '\0';
	return buf;
}

int ward_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

ssize_t ward_read_full(int fd, void *buf, size_t len)
{
	char *p = buf;
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, p + got, len - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

int ward_write_file_at(int dirfd, const char *path, const char *data,
		       size_t len, int flags, mode_t mode)
{
	int fd = openat(dirfd, path, flags | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return -errno;
	int r = ward_write_all(fd, data, len);
	if (close(fd) < 0 && r == 0 && errno != EINTR)
		r = -errno;
	return r;
}

int ward_read_file(const char *path, size_t max, char **out, size_t *len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t cap = 4096, n = 0;
	_cleanup_free_ char *buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (n + 1 >= cap) {
			if (cap > max + 1)
				return -EFBIG;
			char *nb = realloc(buf, cap * 2);
			if (!nb)
				return -ENOMEM;
			buf = nb;
			cap *= 2;
		}
		ssize_t r = read(fd, buf + n, cap - n - 1);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > max)
			return -EFBIG;
	}
	buf[n] = '\0';
	*out = take_ptr(buf);
	if (len)
		*len = n;
	return 0;
}

bool ward_json_too_deep(const char *b, size_t n, int max, size_t *at)
{
	int depth = 0;
	bool in_str = false, esc = false;
	for (size_t i = 0; i < n; i++) {
		char ch = b[i];
		if (in_str) {
			if (esc)
				esc = false;
			else if (ch == '\\')
				esc = true;
			else if (ch == '"')
				in_str = false;
		} else if (ch == '"') {
			in_str = true;
		} else if (ch == '[' || ch == '{') {
			if (++depth > max) {
				if (at)
					*at = i;
				return true;
			}
		} else if ((ch == ']' || ch == '}') && depth > 0) {
			depth--;
		}
	}
	return false;
}

char *ward_json_dump(const json_t *j, size_t flags, size_t extra, size_t *len)
{
	size_t n = json_dumpb(j, NULL, 0, flags);
	char *buf = n && n < SIZE_MAX - extra - 1 ? malloc(n + extra + 1) : NULL;
	if (!buf)
		return NULL;
	if (json_dumpb(j, buf, n, flags) != n) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

uint64_t ward_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
