/* lib/service/events.c — the event stream: audit events, as they happen,
 * to the operators subscribed (GET /v1/events).
 *
 * svc_audit hands every event's line here once (the very line the audit
 * log got, or the same object without the chain when there is no log).
 * Each subscriber has its own bounded queue: one that does not read loses
 * its oldest lines and is told how many with an "events.dropped" line. It
 * never blocks the loop, never grows past its bound, and the number of
 * subscribers is capped (max_event_subscribers). Everything runs on the
 * loop thread, as svc_audit does.
 */
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "service/internal.h"

/* Per subscriber: whichever bound comes first. A line is at most
 * WARD_AUDIT_LINE_MAX, so one line always fits. */
enum { EV_QUEUE_LINES = 256, EV_QUEUE_BYTES = 2 << 20 };

struct ward_events_sub {
	struct ward_events_sub *next;
	struct ward_service *s;          /* NULL once the core is gone: the stream ends */
	char tenant[WARD_KEY_TENANT_MAX + 1]; /* "": every event */
	struct ward_sink sink;
	char *lines[EV_QUEUE_LINES];     /* a ring: head, n */
	size_t head, n, bytes;
	uint64_t dropped;                /* lost since the last "events.dropped" line */
	char *cur;                       /* the line being read out, and how far */
	size_t cur_len, cur_off;
};

static void drop_oldest(struct ward_events_sub *sub)
{
	char *l = sub->lines[sub->head];
	sub->bytes -= strlen(l);
	free(l);
	sub->head = (sub->head + 1) % EV_QUEUE_LINES;
	sub->n--;
	sub->dropped++;
}

bool svc_events_wanted(const struct ward_service *s)
{
	return s->event_subs != NULL;
}

/* Takes line. fields: the event's fields, for the tenant filter. */
void svc_events_publish(struct ward_service *s, json_t *fields, char *line)
{
	const char *tenant = json_string_value(json_object_get(fields, "tenant"));
	size_t len = strlen(line);
	for (struct ward_events_sub *sub = s->event_subs; sub; sub = sub->next) {
		if (sub->tenant[0] && (!tenant || strcmp(tenant, sub->tenant) != 0))
			continue;
		char *copy = strdup(line);
		if (!copy) {
			sub->dropped++;
			continue;
		}
		while (sub->n && (sub->n == EV_QUEUE_LINES || sub->bytes + len > EV_QUEUE_BYTES))
			drop_oldest(sub);
		sub->lines[(sub->head + sub->n) % EV_QUEUE_LINES] = copy;
		sub->n++;
		sub->bytes += len;
		struct ward_event ev = { .kind = WARD_EVENT_STREAM };
		if (sub->sink.event)
			sub->sink.event(sub->sink.ctx, &ev);
	}
	free(line);
}

WARD_EXPORT int ward_service_events_subscribe(struct ward_service *s, const char *tenant,
					      const struct ward_sink *sink,
					      struct ward_events_sub **out,
					      struct ward_service_error *e)
{
	size_t n = 0;
	*out = NULL;
	for (struct ward_events_sub *sub = s->event_subs; sub; sub = sub->next)
		n++;
	if (n >= s->cfg.max_event_subscribers)
		return ward_service_fail(e, 503, "unavailable", NULL,
					 "%zu event subscribers already (max-event-subscribers)", n);
	if (tenant && strlen(tenant) > WARD_KEY_TENANT_MAX)
		return ward_service_fail(e, 400, "invalid_request", "tenant",
					 "expected a tenant name of at most %d bytes",
					 WARD_KEY_TENANT_MAX);
	struct ward_events_sub *sub = calloc(1, sizeof(*sub));
	if (!sub)
		return ward_service_fail(e, 500, "internal", NULL, "out of memory");
	sub->s = s;
	sub->sink = *sink;
	ward_strlcpy(sub->tenant, tenant ? tenant : "", sizeof(sub->tenant));
	sub->next = s->event_subs;
	s->event_subs = sub;
	*out = sub;
	return 0;
}

/* The next line to read out: a pending "events.dropped" notice first. */
static bool next_line(struct ward_events_sub *sub)
{
	if (sub->dropped) {
		char buf[96];
		int k = snprintf(buf, sizeof(buf), "{\"count\":%llu,\"event\":\"events.dropped\"}\n",
				 (unsigned long long)sub->dropped);
		if (!(sub->cur = strdup(buf)))
			return false;
		sub->cur_len = (size_t)k;
		sub->dropped = 0;
	} else if (sub->n) {
		sub->cur = sub->lines[sub->head];
		sub->cur_len = strlen(sub->cur);
		sub->bytes -= sub->cur_len;
		sub->head = (sub->head + 1) % EV_QUEUE_LINES;
		sub->n--;
	} else {
		return false;
	}
	sub->cur_off = 0;
	return true;
}

WARD_EXPORT ssize_t ward_events_read(struct ward_events_sub *sub, char *buf, size_t max)
{
	size_t out = 0;
	while (out < max) {
		if (!sub->cur && !next_line(sub))
			break;
		size_t k = sub->cur_len - sub->cur_off;
		if (k > max - out)
			k = max - out;
		memcpy(buf + out, sub->cur + sub->cur_off, k);
		out += k;
		sub->cur_off += k;
		if (sub->cur_off == sub->cur_len) {
			free(sub->cur);
			sub->cur = NULL;
		}
	}
	if (out == 0 && !sub->s)
		return -1;
	return (ssize_t)out;
}

WARD_EXPORT void ward_events_unsubscribe(struct ward_events_sub *sub)
{
	if (!sub)
		return;
	if (sub->s)
		for (struct ward_events_sub **p = &sub->s->event_subs; *p; p = &(*p)->next)
			if (*p == sub) {
				*p = sub->next;
				break;
			}
	while (sub->n)
		drop_oldest(sub);
	free(sub->cur);
	free(sub);
}

/* The core is going: every stream ends once its queue is read. */
void svc_events_close(struct ward_service *s)
{
	struct ward_events_sub *sub = s->event_subs;
	s->event_subs = NULL;
	while (sub) {
		struct ward_events_sub *next = sub->next;
		sub->s = NULL;
		sub->next = NULL;
		struct ward_event ev = { .kind = WARD_EVENT_STREAM };
		if (sub->sink.event)
			sub->sink.event(sub->sink.ctx, &ev);
		sub = next;
	}
}
