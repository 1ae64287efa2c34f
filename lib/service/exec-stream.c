/* lib/service/exec-stream.c — an execution's listener: its sink, and the
 * bounded NDJSON queue a streaming listener reads.
 *
 * The core pushes events (start, stream, verdict) to the sink the front
 * end gave; the NDJSON itself waits in a queue the front end reads at its
 * own pace (ward_execution_read), so a transport with flow control never
 * makes the core wait and never makes it hold more than the bound below.
 * What the queue holds is counted against the tenant.
 */
#include <stdio.h>
#include <string.h>

#include "base/json-stream.h"
#include "base/util.h"
#include "execution.h"

enum { STREAM_SLACK = 1 << 20 };

void ward_execution_watch(struct ward_execution *ex, const struct ward_sink *sink)
{
	if (sink)
		ex->sink = *sink;
	else
		memset(&ex->sink, 0, sizeof(ex->sink));
}

void exec_notify(struct ward_execution *ex, enum ward_event_kind kind)
{
	if (!ex->sink.event)
		return;
	struct ward_event ev = { .kind = kind, .ex = ex };
	ex->sink.event(ex->sink.ctx, &ev);
}

void exec_stream_release(struct ward_execution *ex)
{
	ward_json_reader_free(ex->verdict);
	ex->verdict = NULL;
	exec_account(ex, 0);
	free(ex->sbuf);
	ex->sbuf = NULL;
	ex->slen = ex->scap = ex->soff = 0;
}

/* The NDJSON a streaming client has not read yet is bounded per
 * execution: twice the output cap (a control character escapes to six
 * bytes, ordinary text to about one) plus room for rich results. Past it,
 * events are dropped, never the sandbox stalled: the client gets one
 * "dropped" line (how many events, how many bytes) once there is room
 * again, and the verdict still carries the whole capped output. */
static size_t stream_limit(const struct ward_execution *ex)
{
	uint64_t lim = 2 * ex->req.policy.output_limit + STREAM_SLACK;
	return lim > SIZE_MAX / 2 ? SIZE_MAX / 2 : (size_t)lim;
}

/* What the daemon holds for this execution, counted against its tenant
 * (ward_tenant_daemon_memory_bytes, and the tenant_memory quota). */
void exec_account(struct ward_execution *ex, size_t held)
{
	if (held == ex->held)
		return;
	struct svc_tenant_count *t = metrics_tenant(ex->s, ex->key.tenant);
	if (t) {
		t->held -= ex->held < t->held ? ex->held : t->held;
		t->held += held;
	}
	ex->held = held;
}

/* Appends one line; the verdict (last) may pass the bound, nothing else. */
static bool append_line(struct ward_execution *ex, const char *line, size_t n, bool last)
{
	size_t pending = ex->slen - ex->soff;
	if (!last && pending + n + 1 > stream_limit(ex))
		return false;
	if (ex->slen + n + 1 > ex->scap && ex->soff) {
		memmove(ex->sbuf, ex->sbuf + ex->soff, pending);
		ex->slen = pending;
		ex->soff = 0;
	}
	if (ex->slen + n + 1 > ex->scap) {
		size_t cap = ex->scap ? ex->scap * 2 : 4096, lim = stream_limit(ex);
		if (cap > lim)
			cap = lim;
		if (cap < ex->slen + n + 1)
			cap = ex->slen + n + 1;
		char *nb = realloc(ex->sbuf, cap);
		if (!nb)
			return false;
		ex->sbuf = nb;
		ex->scap = cap;
		exec_account(ex, cap);
	}
	memcpy(ex->sbuf + ex->slen, line, n);
	ex->sbuf[ex->slen + n] = '\n';
	ex->slen += n + 1;
	return true;
}

/* What was dropped, as one line, once there is room for it. */
static void dropped_line(struct ward_execution *ex, bool last)
{
	json_t *d = json_pack("{s:s, s:I, s:I}", "event", "dropped", "events",
			      (json_int_t)ex->dropped_events, "bytes", (json_int_t)ex->dropped_bytes);
	char *dl = d ? json_dumps(d, JSON_COMPACT) : NULL;
	json_decref(d);
	if (dl && append_line(ex, dl, strlen(dl), last))
		ex->dropped_events = ex->dropped_bytes = 0;
	free(dl);
}

/* Appends one NDJSON event for a listener (takes ev). */
void exec_emit(struct ward_execution *ex, json_t *ev)
{
	if (!ev)
		return;
	const char *kind = json_string_value(json_object_get(ev, "event"));
	bool last = kind && strcmp(kind, "verdict") == 0;
	char *line = ex->stream ? json_dumps(ev, JSON_COMPACT) : NULL;
	json_decref(ev);
	if (!line)
		return;
	size_t n = strlen(line);
	if (ex->dropped_events)
		dropped_line(ex, last);
	if (ex->dropped_events || !append_line(ex, line, n, last)) {
		ex->dropped_events++;
		ex->dropped_bytes += n + 1;
	}
	free(line);
	exec_notify(ex, WARD_EVENT_STREAM);
}

static void on_event(json_t *ev, void *ctx)
{
	exec_emit(ctx, json_incref(ev));
}

/* A builder's event, as an object, to a listener that prints as it goes. */
static void on_event_object(json_t *ev, void *ctx)
{
	struct ward_execution *ex = ctx;
	if (!ex->sink.event)
		return;
	struct ward_event e = { .kind = WARD_EVENT_STREAM, .ex = ex, .data = ev };
	ex->sink.event(ex->sink.ctx, &e);
}

void exec_on_message(json_t *m, void *ctx)
{
	struct ward_execution *ex = ctx;
	ward_result_set_sink(&ex->out, ex->stream ? on_event : ex->req.events ? on_event_object : NULL,
			     ex);
	ward_result_message(&ex->out, m);
}

ssize_t ward_execution_read(struct ward_execution *ex, char *buf, size_t max, bool *wait)
{
	*wait = false;
	if (ex->soff < ex->slen) {
		size_t n = ex->slen - ex->soff < max ? ex->slen - ex->soff : max;
		memcpy(buf, ex->sbuf + ex->soff, n);
		ex->soff += n;
		if (ex->soff == ex->slen)
			ex->soff = ex->slen = 0;
		if (!ex->slen && ex->scap > 65536) {
			/* drained: what a burst needed is given back */
			free(ex->sbuf);
			ex->sbuf = NULL;
			ex->scap = 0;
			exec_account(ex, 0);
		}
		return (ssize_t)n;
	}
	if (ex->verdict_due) {
		/* The last event is written once the client has read the rest, so
		 * the core never holds both; and it is written as it is read
		 * (lib/base/json-stream.h), never whole: escaped, it can be six
		 * times the output cap, twice. A "dropped" line comes first. */
		ex->verdict_due = false;
		json_t *ev = json_pack("{s:s}", "event", "verdict");
		if (ev && json_object_update(ev, ex->final) == 0)
			ex->verdict = ward_json_reader_new(ev);
		json_decref(ev);
		if (ex->dropped_events && ex->stream)
			dropped_line(ex, true);
		if (ex->soff < ex->slen)
			return ward_execution_read(ex, buf, max, wait);
	}
	if (ex->verdict) {
		ssize_t n = ward_json_reader_read(ex->verdict, buf, max);
		if (n > 0)
			return n;
		ward_json_reader_free(ex->verdict);
		ex->verdict = NULL;
	}
	if (ex->state == EX_DONE)
		return -1;
	*wait = true; /* a STREAM or VERDICT event says when to read again */
	return 0;
}

