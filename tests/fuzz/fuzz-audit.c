/* tests/fuzz/fuzz-audit.c — the audit verifier reads files an attacker may
 * have edited: it must report, never crash, on any bytes. */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "server/audit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("audit", MFD_CLOEXEC);
	if (fd < 0 || write(fd, data, size) != (ssize_t)size) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	struct ward_audit_report report;
	struct ward_error err;
	ward_audit_verify(path, NULL, &report, &err);
	close(fd);
	return 0;
}
