/* src/daemon/sse.h — an incremental reader of text/event-stream (the
 * HTML Living Standard's "server-sent events"), for `ward mcp --connect`,
 * whose daemon may answer a POST with a stream of JSON-RPC messages.
 *
 * Only what MCP uses is kept: each event's data lines, joined with "\n";
 * comments, "event", "id" and "retry" fields are read and dropped. Lines
 * end with CRLF, LF or CR, split anywhere between feeds. Bounded: a line
 * or an event's data over max bytes drops that event (counted), never
 * grows memory past max. Pure: no I/O, no globals (tests/fuzz/fuzz-sse.c).
 */
#ifndef WARD_DAEMON_SSE_H
#define WARD_DAEMON_SSE_H

#include <stdbool.h>
#include <stddef.h>

struct srv_sse {
	size_t max;          /* bytes of a line and of an event's data */
	char *line;          /* the line being read */
	size_t llen, lcap;
	char *data;          /* the event being read: its data lines */
	size_t dlen, dcap;
	bool cr;             /* the last byte was CR: a LF next ends nothing */
	bool over;           /* this event went over max: dropped at its end */
	size_t dropped;      /* events dropped for their size */
};

/* Called once per event that has data: the data (NUL-terminated, len
 * bytes, borrowed for the call). */
typedef void srv_sse_event_fn(void *ctx, const char *data, size_t len);

/* An empty reader whose lines and events hold at most max bytes. */
void srv_sse_init(struct srv_sse *p, size_t max);
/* Reads n more bytes; ev is called for each event they complete. 0, or -1
 * without memory (the reader is then empty, as after srv_sse_release). */
int srv_sse_feed(struct srv_sse *p, const char *buf, size_t n, srv_sse_event_fn *ev,
		 void *ctx);
/* Frees what p holds; an event not ended by a blank line is dropped. */
void srv_sse_release(struct srv_sse *p);

#endif
