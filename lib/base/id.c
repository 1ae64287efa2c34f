/* lib/base/id.c — the one id generator: a prefix and random hex digits.
 *
 * Every id ward hands out (sandboxes, executions "ex_", sessions "se_", API
 * keys) is drawn here, so they share one source of randomness and one
 * alphabet: lowercase hex is url-safe, path-safe and needs no escaping in
 * JSON, file names or log lines. The formats are part of the API
 * (docs/api.md): the caller picks the prefix and the number of random
 * bytes, this file never changes them. Knows nothing about sandboxes.
 */
#include <sys/random.h>

#include "base/util.h"

int ward_id_new(char *buf, size_t size, const char *prefix, size_t nbytes)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char raw[32];
	size_t plen = prefix ? strlen(prefix) : 0;
	if (nbytes == 0 || nbytes > sizeof(raw) || size < plen + 2 * nbytes + 1)
		return -ERANGE;
	/* getrandom with no flags blocks only before the pool is first
	 * seeded, never afterwards; requests of <= 256 bytes are not short */
	ssize_t n;
	while ((n = getrandom(raw, nbytes, 0)) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)nbytes)
		return n < 0 ? -errno : -EIO;
	if (plen)
		memcpy(buf, prefix, plen);
	for (size_t i = 0; i < nbytes; i++) {
		buf[plen + 2 * i] = hex[raw[i] >> 4];
		buf[plen + 2 * i + 1] = hex[raw[i] & 15];
	}
	buf[plen + 2 * nbytes] = '\0';
	return 0;
}
