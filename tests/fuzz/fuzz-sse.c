/* tests/fuzz/fuzz-sse.c — the text/event-stream reader of `ward mcp
 * --connect` (src/daemon/sse.h). The input's first byte chooses the size
 * of the pieces the rest is fed in and the reader's max (32 bytes or
 * 1 MiB); the events must be the same whether the bytes come in one feed
 * or in pieces, none may be over max, hold a CR (every CR ends a line) or
 * lack its NUL, and the reader must never crash, leak or hold more than
 * max. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/daemon/sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct log {
	uint64_t sum;   /* FNV-1a over the events, each ended by a NUL */
	size_t n, max;
};

static void on_event(void *ctx, const char *d, size_t len)
{
	struct log *l = ctx;
	if (len > l->max || d[len] != '\0' || memchr(d, '\r', len))
		abort();
	l->n++;
	if (!l->sum)
		l->sum = 1469598103934665603ull;
	for (size_t i = 0; i <= len; i++)
		l->sum = (l->sum ^ (unsigned char)d[i]) * 1099511628211ull;
}

static void run(const char *in, size_t n, size_t max, size_t step, struct log *l)
{
	struct srv_sse p;
	srv_sse_init(&p, max);
	l->max = max;
	for (size_t off = 0; off < n;) {
		size_t k = step && n - off > step ? step : n - off;
		if (srv_sse_feed(&p, in + off, k, on_event, l) < 0)
			abort(); /* no allocation fails here */
		if (p.llen > max || p.dlen > max)
			abort();
		off += k;
	}
	srv_sse_release(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t step = (size_t)(data[0] & 15), max = data[0] & 16 ? 32 : 1 << 20;
	static struct log a, b;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	run((const char *)data + 1, size - 1, max, 0, &a);
	run((const char *)data + 1, size - 1, max, step ? step : 1, &b);
	if (a.n != b.n || a.sum != b.sum)
		abort();
	return 0;
}
