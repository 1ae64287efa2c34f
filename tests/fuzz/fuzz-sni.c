/* tests/fuzz/fuzz-sni.c — the ClientHello reader (lib/egress/sni.c) must
 * never crash or read past the input, return only its documented values,
 * and give the same answer for a prefix as -EAGAIN or the full answer. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/intercept.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char *buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	char name[256], name2[256];
	int r = egress_sni_parse(buf, size, name, sizeof(name));
	if (r != 1 && r != 0 && r != -EAGAIN && r != -EINVAL)
		abort();
	if (r == 1 && (name[0] == '\0' || strlen(name) > 255))
		abort();
	/* a prefix cannot contradict the whole: it needs more or agrees */
	if (size > 0) {
		int p = egress_sni_parse(buf, size / 2, name2, sizeof(name2));
		if (p != -EAGAIN && p != r)
			abort();
		if (p == 1 && strcmp(name, name2) != 0)
			abort();
	}
	free(buf);
	return 0;
}
