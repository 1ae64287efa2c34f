/* tests/unit/fake-runners.h — a runners directory whose "node" kernel is a
 * shell script of the test's own (the registry runs it as
 * `/bin/sh {runners}/node/kernel.sh`), for unit tests that drive the
 * kernel channel through the public API against a kernel that misbehaves on
 * request. Header-only: each test is one program. */
#ifndef WARD_TEST_FAKE_RUNNERS_H
#define WARD_TEST_FAKE_RUNNERS_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Makes $TMPDIR/<tag>.XXXXXX (0755, reachable by the sandbox user) with
 * node/kernel.sh holding script. dir receives the path. 0 or -1. */
static inline int fake_runners_make(char *dir, size_t size, const char *tag, const char *script)
{
	char path[512];
	snprintf(dir, size, "%s/%s.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", tag);
	if (!mkdtemp(dir) || chmod(dir, 0755) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/node", dir);
	if (mkdir(path, 0755) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/node/kernel.sh", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	size_t len = strlen(script);
	ssize_t n = write(fd, script, len);
	close(fd);
	return n == (ssize_t)len ? 0 : -1;
}

/* Removes what fake_runners_make made (the test removes its own extras
 * first). */
static inline void fake_runners_remove(const char *dir)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/node/kernel.sh", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/node", dir);
	rmdir(path);
	rmdir(dir);
}

#endif
