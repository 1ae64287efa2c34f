/* lib/service/metrics.c — the core's counters, in Prometheus text (what
 * the HTTP front end serves at GET /metrics).
 *
 * Plain counters updated by the loop's single thread; rendering allocates
 * one buffer. Tenant names are validated key data ([A-Za-z0-9._-]), so
 * they need no escaping in labels; at most SVC_MAX_TENANTS are tracked
 * at once, and an idle one gives its entry to a new tenant.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "internal.h"

/* every verdict status has its counter (a new status cannot go uncounted) */
_Static_assert(ARRAY_SIZE(((struct svc_metrics *)0)->by_status) == WARD_STATUS_COUNT,
	       "one /metrics counter per verdict status");

static const double bucket_le[SVC_N_BUCKETS] = { 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300 };

static bool tenant_idle(const struct svc_tenant_count *t)
{
	return !t->running && !t->sessions && !t->memory && !t->held;
}

struct svc_tenant_count *metrics_tenant_find(struct ward_service *s, const char *tenant)
{
	if (!tenant || !*tenant)
		return NULL;
	for (size_t i = 0; i < s->m.n_tenants; i++)
		if (strcmp(s->m.tenants[i].tenant, tenant) == 0)
			return &s->m.tenants[i];
	return NULL;
}

/* The tenant's entry, made if need be. The table holds SVC_MAX_TENANTS:
 * when it is full, the idle entry (no sandbox, no session, no reserved
 * memory, nothing held) used least recently is given to the newcomer, so
 * only 256 tenants busy at once can fill it. The freed tenant's counters
 * leave /metrics; if it comes back they start from 0 (a counter reset, as
 * after a restart). The daemon-wide totals never lose a count. */
struct svc_tenant_count *metrics_tenant(struct ward_service *s, const char *tenant)
{
	struct svc_tenant_count *t = metrics_tenant_find(s, tenant);
	if (t || !tenant || !*tenant) {
		if (t)
			t->used_ns = ward_now_ns();
		return t;
	}
	if (s->m.n_tenants < SVC_MAX_TENANTS) {
		t = &s->m.tenants[s->m.n_tenants++];
	} else {
		for (size_t i = 0; i < s->m.n_tenants; i++) {
			struct svc_tenant_count *c = &s->m.tenants[i];
			if (tenant_idle(c) && (!t || c->used_ns < t->used_ns))
				t = c;
		}
		if (!t)
			return NULL;
		s->m.tenants_freed++;
	}
	memset(t, 0, sizeof(*t));
	ward_strlcpy(t->tenant, tenant, sizeof(t->tenant));
	t->used_ns = ward_now_ns();
	return t;
}

void metrics_verdict(struct ward_service *s, const char *tenant, enum ward_status st, uint64_t wall_ms)
{
	if ((unsigned)st < SVC_N_STATUS)
		s->m.by_status[st]++;
	double sec = (double)wall_ms / 1000.0;
	for (int i = 0; i < SVC_N_BUCKETS; i++)
		if (sec <= bucket_le[i])
			s->m.buckets[i]++;
	s->m.duration_count++;
	s->m.duration_sum += sec;
	struct svc_tenant_count *t = metrics_tenant(s, tenant);
	if (t)
		t->executions++;
}

struct out {
	char *buf;
	size_t len, cap;
	bool oom;
};

__attribute__((format(printf, 2, 3))) static void put(struct out *o, const char *fmt, ...)
{
	for (int tries = 0; tries < 2 && !o->oom; tries++) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			o->oom = true;
			return;
		}
		if ((size_t)n < o->cap - o->len) {
			o->len += (size_t)n;
			return;
		}
		size_t cap = o->cap * 2 + (size_t)n + 1;
		char *nb = realloc(o->buf, cap);
		if (!nb) {
			o->oom = true;
			return;
		}
		o->buf = nb;
		o->cap = cap;
	}
}

/* The per-tenant series: one line per tracked tenant each. */
static void put_tenants(struct out *o, struct ward_service *s)
{
	put(o, "# HELP ward_tenant_executions_total Executions finished, by tenant.\n"
		"# TYPE ward_tenant_executions_total counter\n");
	for (size_t i = 0; i < s->m.n_tenants; i++)
		put(o, "ward_tenant_executions_total{tenant=\"%s\"} %llu\n", s->m.tenants[i].tenant,
		    (unsigned long long)s->m.tenants[i].executions);
	put(o, "# HELP ward_tenant_denials_total Scope denials, by tenant.\n"
		"# TYPE ward_tenant_denials_total counter\n");
	for (size_t i = 0; i < s->m.n_tenants; i++)
		put(o, "ward_tenant_denials_total{tenant=\"%s\"} %llu\n", s->m.tenants[i].tenant,
		    (unsigned long long)s->m.tenants[i].denials);
	put(o, "# HELP ward_tenant_active_sandboxes Sandboxes running now, by tenant.\n"
		"# TYPE ward_tenant_active_sandboxes gauge\n");
	for (size_t i = 0; i < s->m.n_tenants; i++)
		put(o, "ward_tenant_active_sandboxes{tenant=\"%s\"} %u\n", s->m.tenants[i].tenant,
		    s->m.tenants[i].running + s->m.tenants[i].sessions);
	put(o, "# HELP ward_tenant_active_sessions Live sessions, by tenant.\n"
		"# TYPE ward_tenant_active_sessions gauge\n");
	for (size_t i = 0; i < s->m.n_tenants; i++)
		put(o, "ward_tenant_active_sessions{tenant=\"%s\"} %u\n", s->m.tenants[i].tenant,
		    s->m.tenants[i].sessions);
	put(o, "# HELP ward_tenant_memory_bytes Memory limits of a tenant's live sandboxes, summed.\n"
		"# TYPE ward_tenant_memory_bytes gauge\n");
	for (size_t i = 0; i < s->m.n_tenants; i++)
		put(o, "ward_tenant_memory_bytes{tenant=\"%s\"} %llu\n", s->m.tenants[i].tenant,
		    (unsigned long long)s->m.tenants[i].memory);
	put(o, "# HELP ward_tenant_daemon_memory_bytes Daemon memory held for a tenant "
		"(unread streams).\n# TYPE ward_tenant_daemon_memory_bytes gauge\n");
	for (size_t i = 0; i < s->m.n_tenants; i++)
		put(o, "ward_tenant_daemon_memory_bytes{tenant=\"%s\"} %llu\n", s->m.tenants[i].tenant,
		    (unsigned long long)s->m.tenants[i].held);
}

char *ward_service_metrics(struct ward_service *s, size_t *len)
{
	struct out o = { .cap = 8192 };
	if (!(o.buf = malloc(o.cap)))
		return NULL;
	o.buf[0] = '\0';
	put(&o, "# HELP ward_executions_total Executions finished, by verdict status.\n"
		"# TYPE ward_executions_total counter\n");
	for (int i = 0; i < SVC_N_STATUS; i++)
		put(&o, "ward_executions_total{status=\"%s\"} %llu\n",
		    ward_status_name((enum ward_status)i), (unsigned long long)s->m.by_status[i]);
	put(&o, "# HELP ward_execution_duration_seconds Wall time of executions.\n"
		"# TYPE ward_execution_duration_seconds histogram\n");
	for (int i = 0; i < SVC_N_BUCKETS; i++)
		put(&o, "ward_execution_duration_seconds_bucket{le=\"%g\"} %llu\n", bucket_le[i],
		    (unsigned long long)s->m.buckets[i]);
	put(&o, "ward_execution_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
		"ward_execution_duration_seconds_sum %.3f\n"
		"ward_execution_duration_seconds_count %llu\n",
	    (unsigned long long)s->m.duration_count, s->m.duration_sum,
	    (unsigned long long)s->m.duration_count);
	put(&o, "# HELP ward_active_sandboxes Sandboxes running now.\n"
		"# TYPE ward_active_sandboxes gauge\nward_active_sandboxes %u\n",
	    s->running + s->n_sessions);
	put(&o, "# HELP ward_active_sessions Live sessions.\n"
		"# TYPE ward_active_sessions gauge\nward_active_sessions %u\n", s->n_sessions);
	put(&o, "# HELP ward_http_requests_total HTTP requests received.\n"
		"# TYPE ward_http_requests_total counter\nward_http_requests_total %llu\n",
	    (unsigned long long)s->m.requests);
	put(&o, "# HELP ward_denials_total Requests refused for authentication or scope.\n"
		"# TYPE ward_denials_total counter\nward_denials_total %llu\n",
	    (unsigned long long)s->m.denials);
	put(&o, "# HELP ward_bad_requests_total Other refused requests (4xx).\n"
		"# TYPE ward_bad_requests_total counter\nward_bad_requests_total %llu\n",
	    (unsigned long long)s->m.bad_requests);
	put(&o, "# HELP ward_connections_evicted_total Unauthenticated connections closed "
		"(over max-unauthenticated, or past header-timeout).\n"
		"# TYPE ward_connections_evicted_total counter\nward_connections_evicted_total %llu\n",
	    (unsigned long long)s->m.connections_evicted);
	put(&o, "# HELP ward_tenants_freed_total Idle tenant entries given to a new tenant.\n"
		"# TYPE ward_tenants_freed_total counter\nward_tenants_freed_total %llu\n",
	    (unsigned long long)s->m.tenants_freed);
	put_tenants(&o, s);
	if (o.oom) {
		free(o.buf);
		return NULL;
	}
	*len = o.len;
	return o.buf;
}
