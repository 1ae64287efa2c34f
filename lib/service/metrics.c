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
#include "ward/egress.h"

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

/* A series' HELP and TYPE lines. */
static void put_head(struct out *o, const char *name, const char *type, const char *help)
{
	put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A series of one sample. */
static void put_one(struct out *o, const char *name, const char *type, const char *help,
		    unsigned long long v)
{
	put_head(o, name, type, help);
	put(o, "%s %llu\n", name, v);
}

static uint64_t t_executions(const struct svc_tenant_count *t) { return t->executions; }
static uint64_t t_denials(const struct svc_tenant_count *t) { return t->denials; }
static uint64_t t_sandboxes(const struct svc_tenant_count *t) { return t->running + t->sessions; }
static uint64_t t_sessions(const struct svc_tenant_count *t) { return t->sessions; }
static uint64_t t_memory(const struct svc_tenant_count *t) { return t->memory; }
static uint64_t t_held(const struct svc_tenant_count *t) { return t->held; }

/* The per-tenant series, in this order: one line per tracked tenant each. */
static const struct {
	const char *name, *type, *help;
	uint64_t (*value)(const struct svc_tenant_count *t);
} tenant_series[] = {
	{ "ward_tenant_executions_total", "counter", "Executions finished, by tenant.",
	  t_executions },
	{ "ward_tenant_denials_total", "counter", "Scope denials, by tenant.", t_denials },
	{ "ward_tenant_active_sandboxes", "gauge", "Sandboxes running now, by tenant.",
	  t_sandboxes },
	{ "ward_tenant_active_sessions", "gauge", "Live sessions, by tenant.", t_sessions },
	{ "ward_tenant_memory_bytes", "gauge",
	  "Memory limits of a tenant's live sandboxes, summed.", t_memory },
	{ "ward_tenant_daemon_memory_bytes", "gauge",
	  "Daemon memory held for a tenant (unread streams).", t_held },
};

static void put_tenants(struct out *o, struct ward_service *s)
{
	for (size_t k = 0; k < ARRAY_SIZE(tenant_series); k++) {
		put_head(o, tenant_series[k].name, tenant_series[k].type, tenant_series[k].help);
		for (size_t i = 0; i < s->m.n_tenants; i++)
			put(o, "%s{tenant=\"%s\"} %llu\n", tenant_series[k].name,
			    s->m.tenants[i].tenant,
			    (unsigned long long)tenant_series[k].value(&s->m.tenants[i]));
	}
}

static uint64_t w_hits(const struct svc_warm_stats *w) { return w->hits; }
static uint64_t w_misses(const struct svc_warm_stats *w) { return w->misses; }
static uint64_t w_size(const struct svc_warm_stats *w) { return w->size; }
static uint64_t w_refills(const struct svc_warm_stats *w) { return w->refills; }
static uint64_t w_retired(const struct svc_warm_stats *w) { return w->retired; }
static uint64_t w_died(const struct svc_warm_stats *w) { return w->died; }
static uint64_t w_failed(const struct svc_warm_stats *w) { return w->failed; }
static uint64_t w_memory(const struct svc_warm_stats *w) { return w->memory; }

/* The warm pool's series, one line per language each. */
static const struct {
	const char *name, *type, *help;
	uint64_t (*value)(const struct svc_warm_stats *w);
} pool_series[] = {
	{ "ward_pool_hits_total", "counter", "One-shots that got a pooled kernel, by language.",
	  w_hits },
	{ "ward_pool_misses_total", "counter",
	  "One-shots that started cold (another policy, large files, pool empty).", w_misses },
	{ "ward_pool_size", "gauge", "Pooled kernels ready now, by language.", w_size },
	{ "ward_pool_refills_total", "counter", "Kernels prepared into the pool.", w_refills },
	{ "ward_pool_retired_total", "counter",
	  "Pooled kernels discarded unused (policy change, room, shutdown).", w_retired },
	{ "ward_pool_died_total", "counter", "Pooled kernels that ended while they waited.",
	  w_died },
	{ "ward_pool_failed_total", "counter", "Pool refills that could not start a kernel.",
	  w_failed },
	{ "ward_pool_memory_bytes", "gauge",
	  "Memory limits of pooled (and filling) sandboxes, summed.", w_memory },
};

static void put_pool(struct out *o, struct ward_service *s)
{
	struct svc_warm_stats st[WARD_LANG_COUNT];
	for (int l = 0; l < WARD_LANG_COUNT; l++)
		warm_stats(s, l, &st[l]);
	for (size_t k = 0; k < ARRAY_SIZE(pool_series); k++) {
		put_head(o, pool_series[k].name, pool_series[k].type, pool_series[k].help);
		for (int l = 0; l < WARD_LANG_COUNT; l++)
			put(o, "%s{language=\"%s\"} %llu\n", pool_series[k].name,
			    ward_lang_name((enum ward_lang)l),
			    (unsigned long long)pool_series[k].value(&st[l]));
	}
}

/* The egress proxy's counters (ward/egress.h). */
static void put_egress(struct out *o, struct ward_service *s)
{
	struct ward_egress_stats st;
	svc_egress_stats(s, &st);
	put_one(o, "ward_egress_connections_total", "counter",
		"Connections the egress proxy allowed.", st.connections);
	put_one(o, "ward_egress_denied_total", "counter",
		"Connections and DNS names the egress proxy refused.", st.denied);
	put_one(o, "ward_egress_active_connections", "gauge",
		"Egress connections open now.", st.active);
	put_one(o, "ward_egress_bytes_out_total", "counter",
		"Bytes sandboxes sent through the egress proxy.", st.bytes_out);
	put_one(o, "ward_egress_bytes_in_total", "counter",
		"Bytes sandboxes received through the egress proxy.", st.bytes_in);
	put_one(o, "ward_egress_sandboxes", "gauge",
		"Sandboxes attached to the egress proxy now.", st.sandboxes);
	put_one(o, "ward_egress_events_dropped_total", "counter",
		"Egress audit events dropped because the loop fell behind.",
		s->m.egress_events_dropped);
}

char *ward_service_metrics(struct ward_service *s, size_t *len)
{
	struct out o = { .cap = 8192 };
	if (!(o.buf = malloc(o.cap)))
		return NULL;
	o.buf[0] = '\0';
	put_head(&o, "ward_executions_total", "counter", "Executions finished, by verdict status.");
	for (int i = 0; i < SVC_N_STATUS; i++)
		put(&o, "ward_executions_total{status=\"%s\"} %llu\n",
		    ward_status_name((enum ward_status)i), (unsigned long long)s->m.by_status[i]);
	put_head(&o, "ward_execution_duration_seconds", "histogram", "Wall time of executions.");
	for (int i = 0; i < SVC_N_BUCKETS; i++)
		put(&o, "ward_execution_duration_seconds_bucket{le=\"%g\"} %llu\n", bucket_le[i],
		    (unsigned long long)s->m.buckets[i]);
	put(&o, "ward_execution_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
		"ward_execution_duration_seconds_sum %.3f\n"
		"ward_execution_duration_seconds_count %llu\n",
	    (unsigned long long)s->m.duration_count, s->m.duration_sum,
	    (unsigned long long)s->m.duration_count);
	put_one(&o, "ward_active_sandboxes", "gauge", "Sandboxes running now.",
		s->running + s->n_sessions);
	put_one(&o, "ward_active_sessions", "gauge", "Live sessions.", s->n_sessions);
	put_one(&o, "ward_http_requests_total", "counter", "HTTP requests received.",
		s->m.requests);
	put_one(&o, "ward_denials_total", "counter",
		"Requests refused for authentication or scope.", s->m.denials);
	put_one(&o, "ward_bad_requests_total", "counter", "Other refused requests (4xx).",
		s->m.bad_requests);
	put_one(&o, "ward_connections_evicted_total", "counter",
		"Unauthenticated connections closed (over max-unauthenticated, or past "
		"header-timeout).", s->m.connections_evicted);
	put_one(&o, "ward_tenants_freed_total", "counter",
		"Idle tenant entries given to a new tenant.", s->m.tenants_freed);
	put_tenants(&o, s);
	put_pool(&o, s);
	put_egress(&o, s);
	if (o.oom) {
		free(o.buf);
		return NULL;
	}
	*len = o.len;
	return o.buf;
}
