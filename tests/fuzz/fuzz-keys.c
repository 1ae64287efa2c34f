/* tests/fuzz/fuzz-keys.c — the keys file parser and key authentication
 * must never crash or leak on any input. The bytes become a file (a memfd,
 * named through /proc/self/fd) because the parser reads a path; the first
 * line is also presented as a key. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "server/keys.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("keys", MFD_CLOEXEC);
	if (fd < 0 || write(fd, data, size) != (ssize_t)size) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	char path[64], key[128];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	struct ward_keystore *ks = NULL;
	struct ward_error err;
	if (ward_keys_load(path, &ks, &err) == 0) {
		size_t n = size < sizeof(key) - 1 ? size : sizeof(key) - 1;
		memcpy(key, data, n);
		key[n] = '\0';
		struct ward_key_info info;
		ward_keys_authenticate(ks, key, &info);
		ward_keys_free(ks);
	}
	close(fd);
	return 0;
}
