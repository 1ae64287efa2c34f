/* lib/service/answer.c — answers that come later.
 *
 * A request the core cannot answer at once (a session agent's reply, a
 * file job on a worker) gets a struct ward_answer: the front end holds one
 * reference and a sink, the one who fills it the other. Filling it calls
 * the sink (the HTTP front end resumes its connection); a front end whose
 * client went away clears the sink and lets go of its reference.
 */
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "internal.h"

struct ward_answer *deferred_new(void)
{
	struct ward_answer *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->refs = 2; /* the filler's and the requester's */
	return d;
}

void deferred_answer(struct ward_answer *d, unsigned status, json_t *body)
{
	if (d->done) {
		json_decref(body);
		return;
	}
	d->done = true;
	d->status = status;
	d->body = body;
	if (d->sink.event) {
		struct ward_event ev = { .kind = WARD_EVENT_ANSWER, .answer = d };
		d->sink.event(d->sink.ctx, &ev);
	}
}

void deferred_unref(struct ward_answer *d)
{
	if (d && --d->refs == 0) {
		free(d->file);
		json_decref(d->body);
		json_decref(d->err);
		free(d);
	}
}

void ward_answer_watch(struct ward_answer *a, const struct ward_sink *sink)
{
	if (sink)
		a->sink = *sink;
	else
		memset(&a->sink, 0, sizeof(a->sink));
}

bool ward_answer_done(const struct ward_answer *a)
{
	return a->done;
}

unsigned ward_answer_status(const struct ward_answer *a)
{
	return a->status;
}

json_t *ward_answer_body(const struct ward_answer *a)
{
	return a->body;
}

char *ward_answer_take_file(struct ward_answer *a, size_t *len, const char **sha256,
			    const char **mode)
{
	char *f = a->file;
	*len = a->file_len;
	*sha256 = a->sha256;
	*mode = a->mode;
	a->file = NULL;
	a->file_len = 0;
	return f;
}

void ward_answer_unref(struct ward_answer *a)
{
	deferred_unref(a);
}
