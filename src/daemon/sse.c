/* src/daemon/sse.c — an incremental text/event-stream reader (sse.h).
 *
 * Byte by byte, so that a feed may end anywhere (inside a line, between a
 * CR and its LF); every buffer is bounded by max. No I/O.
 */
#include <stdlib.h>
#include <string.h>

#include "sse.h"

void srv_sse_init(struct srv_sse *p, size_t max)
{
	memset(p, 0, sizeof(*p));
	p->max = max;
}

void srv_sse_release(struct srv_sse *p)
{
	free(p->line);
	free(p->data);
	size_t max = p->max, dropped = p->dropped;
	srv_sse_init(p, max);
	p->dropped = dropped;
}

/* Room for n more bytes (and a NUL) in *buf, within max. */
static int reserve(char **buf, size_t *cap, size_t len, size_t n)
{
	if (len + n + 1 <= *cap)
		return 0;
	size_t c = *cap ? *cap : 256;
	while (c < len + n + 1)
		c *= 2;
	char *nb = realloc(*buf, c);
	if (!nb)
		return -1;
	*buf = nb;
	*cap = c;
	return 0;
}

/* A whole line (p->line, p->llen bytes). */
static int line_end(struct srv_sse *p, srv_sse_event_fn *ev, void *ctx)
{
	const char *l = p->line ? p->line : "";
	size_t n = p->llen;
	p->llen = 0;
	if (n == 0) { /* a blank line: the event ends */
		if (p->over)
			p->dropped++;
		else if (p->dlen) {
			p->data[--p->dlen] = '\0'; /* the last data line's "\n" */
			ev(ctx, p->data, p->dlen);
		}
		p->dlen = 0;
		p->over = false;
		return 0;
	}
	const char *colon = memchr(l, ':', n);
	size_t name = colon ? (size_t)(colon - l) : n;
	if (name != 4 || memcmp(l, "data", 4) != 0 || p->over)
		return 0; /* a comment (name 0), another field, or a dropped event */
	const char *v = colon ? colon + 1 : l + n;
	size_t vn = (size_t)(l + n - v);
	if (vn && *v == ' ')
		v++, vn--;
	if (p->dlen + vn + 1 > p->max) {
		p->over = true;
		return 0;
	}
	if (reserve(&p->data, &p->dcap, p->dlen, vn + 1) < 0)
		return -1;
	memcpy(p->data + p->dlen, v, vn);
	p->dlen += vn;
	p->data[p->dlen++] = '\n';
	p->data[p->dlen] = '\0';
	return 0;
}

int srv_sse_feed(struct srv_sse *p, const char *buf, size_t n, srv_sse_event_fn *ev, void *ctx)
{
	for (size_t i = 0; i < n; i++) {
		char c = buf[i];
		if (c == '\n' && p->cr) {
			p->cr = false;
			continue;
		}
		p->cr = c == '\r';
		if (c == '\r' || c == '\n') {
			if (line_end(p, ev, ctx) < 0)
				goto oom;
			continue;
		}
		if (p->llen + 1 > p->max) { /* a line over max: its event is dropped */
			p->over = true;
			continue;
		}
		if (reserve(&p->line, &p->lcap, p->llen, 1) < 0)
			goto oom;
		p->line[p->llen++] = c;
	}
	return 0;
oom:
	srv_sse_release(p);
	return -1;
}
