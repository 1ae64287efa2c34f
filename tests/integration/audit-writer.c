/* tests/integration/audit-writer.c — appends audit records for the tests.
 *
 *   audit-writer FILE N [--sync every|none] [--threads T] [--full-text]
 *
 * Writes N records shaped like the daemon's (request, denial, sandbox
 * lifecycle, verdict, file transfer), cycling through those events, from T
 * threads (default 1), then prints "wrote N records in U us/record" on
 * stderr. Stands in for `ward serve` until it exists; it is also the
 * benchmark for the fsync choice in docs/audit.md. Exit 0, or 1 with the
 * error on stderr.
 */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "server/audit.h"
#include "base/util.h"

enum { MAX_THREADS = 64 };

struct job {
	struct ward_audit *a;
	long first, count;
	int failed;
	struct ward_error err;
};

/* Record i: one of the daemon's events, with its usual fields. */
static json_t *fields_for(struct ward_audit *a, long i, const char **event)
{
	static const char code[] = "print(sum(range(10)))\n";
	char sandbox[32];
	snprintf(sandbox, sizeof(sandbox), "sbx-%06ld", i / 5);
	json_t *f = json_pack("{s:s, s:s, s:s}", "key_id", "0123456789ab", "tenant", "acme",
			      "sandbox_id", sandbox);
	switch (i % 5) {
	case 0:
		*event = "request";
		json_object_set_new(f, "action", json_string("execute"));
		json_object_set_new(f, "policy_digest", json_string(
			"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"));
		ward_audit_text(f, "code", code, sizeof(code) - 1, ward_audit_full_text(a));
		break;
	case 1:
		*event = "sandbox.create";
		break;
	case 2:
		*event = "file.upload";
		json_object_set_new(f, "path", json_string("/workspace/data.csv"));
		ward_audit_text(f, "content", "a,b\n1,2\n", 8, false);
		break;
	case 3:
		*event = "verdict";
		json_object_set_new(f, "status", json_string("ok"));
		json_object_set_new(f, "limit", json_null());
		json_object_set_new(f, "usage", json_pack("{s:i, s:i, s:I}", "wall_ms", 41,
							  "cpu_user_ms", 30,
							  "peak_memory_bytes", (json_int_t)9437184));
		ward_audit_text(f, "stdout", "45\n", 3, ward_audit_full_text(a));
		break;
	default:
		*event = "sandbox.destroy";
		break;
	}
	return f;
}

static void *run(void *p)
{
	struct job *j = p;
	for (long i = j->first; i < j->first + j->count && !j->failed; i++) {
		const char *event;
		json_t *f = fields_for(j->a, i, &event);
		j->failed = !f || ward_audit_record(j->a, event, f, &j->err) < 0;
		json_decref(f);
	}
	return NULL;
}

static long number(const char *s)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	return errno || *end || end == s || v < 0 ? -1 : v;
}

int main(int argc, char **argv)
{
	struct ward_audit_options o = { 0 };
	struct ward_error err;
	struct job jobs[MAX_THREADS];
	pthread_t th[MAX_THREADS];
	long threads = 1, n = argc > 2 ? number(argv[2]) : -1;
	char buf[WARD_ERROR_MSG_MAX + 256];
	for (int i = 3; i < argc; i++) {
		if (strcmp(argv[i], "--full-text") == 0)
			o.full_text = true;
		else if (strcmp(argv[i], "--sync") == 0 && i + 1 < argc)
			o.sync = strcmp(argv[++i], "none") == 0 ? WARD_AUDIT_SYNC_NONE
								 : WARD_AUDIT_SYNC_EVERY;
		else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
			threads = number(argv[++i]);
		else
			n = -1;
	}
	if (n < 0 || threads < 1 || threads > MAX_THREADS) {
		fprintf(stderr, "usage: audit-writer FILE N [--sync every|none] [--threads T] "
			"[--full-text]\n");
		return 2;
	}
	if (ward_audit_open(argv[1], &o, &jobs[0].a, &err) < 0) {
		fprintf(stderr, "audit-writer: %s\n", ward_error_format(&err, buf, sizeof(buf)));
		return 1;
	}
	uint64_t t0 = ward_now_ns();
	for (long t = 0; t < threads; t++) {
		jobs[t] = (struct job){ .a = jobs[0].a, .first = n * t / threads,
					.count = n * (t + 1) / threads - n * t / threads };
		pthread_create(&th[t], NULL, run, &jobs[t]);
	}
	int rc = 0;
	for (long t = 0; t < threads; t++) {
		pthread_join(th[t], NULL);
		if (jobs[t].failed) {
			fprintf(stderr, "audit-writer: %s\n",
				ward_error_format(&jobs[t].err, buf, sizeof(buf)));
			rc = 1;
		}
	}
	uint64_t ns = ward_now_ns() - t0;
	ward_audit_free(jobs[0].a);
	fprintf(stderr, "wrote %ld records in %.1f us/record\n", n,
		n ? (double)ns / 1e3 / (double)n : 0.0);
	return rc;
}
