/* src/daemon/events.c — GET /v1/events: the core's event stream
 * (ward_service_events_subscribe) as an NDJSON response.
 *
 * The response reads the subscriber's queue; with nothing queued the
 * connection is suspended and the core's sink resumes it when a line
 * comes. The queue, its bound and the subscriber cap are the core's: a
 * stream that is not read never holds the loop or more than its queue.
 * A client that hangs up is noticed at once (EPOLLRDHUP on its socket, in
 * the loop's epoll), so a silent stream cannot keep a subscriber's place.
 */
#include <microhttpd.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include "http.h"

struct evstream {
	struct MHD_Connection *c;
	struct ward_events_sub *sub;
	bool suspended, gone;
	int epfd, fd;            /* the hang-up watch; fd -1 when off */
	struct watch w;
};

static void watch_off(struct evstream *es)
{
	/* a closed fd left the epoll set by itself; a reused number is
	 * another file, which DEL does not touch (ENOENT) */
	if (es->fd >= 0)
		epoll_ctl(es->epfd, EPOLL_CTL_DEL, es->fd, NULL);
	es->fd = -1;
}

void srv_events_client_gone(void *ptr)
{
	struct evstream *es = ptr;
	watch_off(es);
	es->gone = true;
	if (es->suspended) {
		es->suspended = false;
		MHD_resume_connection(es->c);
	}
}

static void evstream_event(void *ctx, const struct ward_event *ev)
{
	struct evstream *es = ctx;
	(void)ev;
	if (es->suspended) {
		es->suspended = false;
		MHD_resume_connection(es->c);
	}
}

static ssize_t evstream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct evstream *es = cls;
	(void)pos;
	if (es->gone)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	ssize_t n = ward_events_read(es->sub, buf, max);
	if (n < 0)
		watch_off(es);
	if (n == 0 && !es->suspended) {
		es->suspended = true;
		MHD_suspend_connection(es->c);
	}
	return n < 0 ? MHD_CONTENT_READER_END_OF_STREAM : n;
}

static void evstream_free(void *cls)
{
	struct evstream *es = cls;
	watch_off(es);
	ward_events_unsubscribe(es->sub);
	free(es);
}

int h_events(struct req *rq)
{
	struct ward_service_error e = { 0 };
	const char *tenant = MHD_lookup_connection_value(rq->c, MHD_GET_ARGUMENT_KIND, "tenant");
	struct evstream *es = calloc(1, sizeof(*es));
	if (!es)
		return answer_error(rq, 500, "internal", NULL, "out of memory");
	es->c = rq->c;
	es->fd = -1;
	es->epfd = rq->s->epfd;
	struct ward_sink sink = { .ctx = es, .event = evstream_event };
	if (ward_service_events_subscribe(rq->s->svc, tenant, &sink, &es->sub, &e) < 0) {
		free(es);
		http_note_status(e.status);
		return srv_respond_error(rq->c, &e);
	}
	struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384,
								   evstream_read, es, evstream_free);
	if (!r) {
		evstream_free(es);
		return MHD_NO;
	}
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(rq->c, MHD_CONNECTION_INFO_CONNECTION_FD);
	es->w = (struct watch){ .kind = WATCH_EVENTS, .ptr = es };
	struct epoll_event ev = { .events = EPOLLRDHUP, .data.ptr = &es->w };
	if (ci && epoll_ctl(es->epfd, EPOLL_CTL_ADD, ci->connect_fd, &ev) == 0)
		es->fd = ci->connect_fd;
	MHD_add_response_header(r, "Content-Type", "application/x-ndjson");
	MHD_add_response_header(r, "Cache-Control", "no-store");
	rq->answered = true;
	http_note_status(200);
	enum MHD_Result ok = MHD_queue_response(rq->c, 200, r);
	MHD_destroy_response(r);
	return ok;
}
