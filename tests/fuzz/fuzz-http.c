/* tests/fuzz/fuzz-http.c — request heads (lib/egress/http.c) must never
 * crash, leak or read past the input, and a head that parses must rewrite
 * into one that parses again with the same host and path, one
 * "Connection: close" and the rule's header exactly once. The input is
 * copied to a buffer of its own size so ASan sees any overread. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "egress/intercept.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t count_lines(const char *s, size_t n, const char *name)
{
	size_t c = 0, nl = strlen(name);
	for (size_t i = 0; i + nl <= n; i++)
		if ((i == 0 || s[i - 1] == '\n') && strncasecmp(s + i, name, nl) == 0)
			c++;
	return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	struct egress_http_req req;
	const char *why;
	ssize_t r = egress_http_parse(buf, size, &req, &why);
	if (r > 0 && !req.connect) {
		char *hd[] = { "Authorization: Bearer fuzz" };
		struct ward_egress_credential rule = { "fuzz", req.host, NULL, hd, 1 };
		const struct ward_egress_credential *rules[] = { &rule };
		char *out;
		size_t len;
		const char *applied;
		if (egress_http_rewrite(buf, &req, rules, 1, &out, &len, &applied) == 0) {
			struct egress_http_req again;
			ssize_t r2 = egress_http_parse(out, len, &again, &why);
			/* the rewrite may add a few header fields and bytes (CRLF
			 * for LF, ": "): a head at the bounds may not fit again */
			bool bound = r2 < 0 && why &&
				     (strstr(why, "more than 256") || strstr(why, "too long"));
			if (!bound && (r2 != (ssize_t)len ||
			    strcmp(again.host, req.host) != 0 || strcmp(again.path, req.path) != 0 ||
			    count_lines(out, len, "authorization:") != 1 ||
			    count_lines(out, len, "connection:") != 1))
				abort();
			free(out);
		}
	}
	free(buf);
	return 0;
}
