/* lib/service/admission.c — what a tenant may start: quotas, checked before
 * a sandbox is made.
 *
 * A tenant's running sandboxes (one-shots and sessions), its sessions and
 * the memory limits of its live sandboxes plus what the core holds for it
 * (unread streams) are counted in its metrics entry; the daemon-wide
 * bounds come from the settings, a tenant's own from "tenants" in the
 * config. A quota that cannot be counted (the tenant table is full of busy
 * tenants) is not granted. Every refusal names the quota.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

void svc_tenant_quota(struct ward_service *s, const char *tenant, struct svc_quota *q)
{
	q->max_per_tenant = s->cfg.max_per_tenant;
	q->max_sessions_per_tenant = s->cfg.max_sessions_per_tenant;
	q->tenant_memory = s->cfg.tenant_memory;
	json_t *t = json_object_get(s->cfg.tenants, tenant);
	json_t *v;
	if ((v = json_object_get(t, "max_per_tenant")) && json_is_integer(v))
		q->max_per_tenant = (uint64_t)json_integer_value(v);
	if ((v = json_object_get(t, "max_sessions_per_tenant")) && json_is_integer(v))
		q->max_sessions_per_tenant = (uint64_t)json_integer_value(v);
	if ((v = json_object_get(t, "tenant_memory")) && json_is_integer(v))
		q->tenant_memory = (uint64_t)json_integer_value(v);
}

static int sandboxes_check(const char *tenant, struct svc_tenant_count *t,
			   const struct svc_quota *q, struct ward_service_error *e)
{
	if (!t)
		return ward_service_fail(e, 429, "quota_exceeded", "tenants",
					 "the daemon tracks at most %d tenants", SVC_MAX_TENANTS);
	if (t->running + t->sessions >= q->max_per_tenant)
		return ward_service_fail(e, 429, "quota_exceeded", "max_per_tenant",
					 "quota max_per_tenant (%llu sandboxes: executions and "
					 "sessions) reached for tenant '%s'",
					 (unsigned long long)q->max_per_tenant, tenant);
	return 0;
}

int svc_admit_execution(struct ward_service *s, const char *tenant, struct ward_service_error *e)
{
	if (s->stopping)
		return ward_service_fail(e, 503, "shutting_down", NULL, "the daemon is shutting down");
	if (s->running >= s->cfg.max_executions)
		return ward_service_fail(e, 429, "quota_exceeded", "max_executions",
					 "quota max_executions (%llu) reached; retry later",
					 (unsigned long long)s->cfg.max_executions);
	struct svc_quota q;
	svc_tenant_quota(s, tenant, &q);
	return sandboxes_check(tenant, metrics_tenant(s, tenant), &q, e);
}

int svc_admit_memory(struct ward_service *s, const char *tenant, uint64_t memory,
		     struct ward_service_error *e)
{
	struct svc_tenant_count *t = metrics_tenant(s, tenant);
	struct svc_quota q;
	svc_tenant_quota(s, tenant, &q);
	uint64_t used = t ? t->memory + t->held : 0; /* sandboxes, and what the core holds */
	if (!q.tenant_memory || used + memory <= q.tenant_memory)
		return 0;
	return ward_service_fail(e, 429, "quota_exceeded", "tenant_memory",
				 "quota tenant_memory (%llu bytes) reached for tenant '%s': %llu in "
				 "use, %llu asked", (unsigned long long)q.tenant_memory, tenant,
				 (unsigned long long)used, (unsigned long long)memory);
}

int svc_admit_session(struct ward_service *s, const char *tenant, uint64_t memory,
		      struct ward_service_error *e)
{
	struct svc_quota q;
	svc_tenant_quota(s, tenant, &q);
	struct svc_tenant_count *t = metrics_tenant(s, tenant);
	if (s->stopping)
		return ward_service_fail(e, 503, "shutting_down", NULL, "the daemon is shutting down");
	if (!t) /* quotas that cannot be counted are not granted */
		return ward_service_fail(e, 429, "quota_exceeded", "tenants",
					 "the daemon tracks at most %d tenants", SVC_MAX_TENANTS);
	if (s->n_sessions >= s->cfg.max_sessions)
		return ward_service_fail(e, 429, "quota_exceeded", "max_sessions",
					 "quota max_sessions (%llu) reached; retry later",
					 (unsigned long long)s->cfg.max_sessions);
	if (sandboxes_check(tenant, t, &q, e) < 0)
		return -1;
	if (t->sessions >= q.max_sessions_per_tenant)
		return ward_service_fail(e, 429, "quota_exceeded", "max_sessions_per_tenant",
					 "quota max_sessions_per_tenant (%llu) reached for tenant '%s'",
					 (unsigned long long)q.max_sessions_per_tenant, tenant);
	if (q.tenant_memory && t->memory + memory > q.tenant_memory)
		return ward_service_fail(e, 429, "quota_exceeded", "tenant_memory",
					 "quota tenant_memory (%llu bytes) reached for tenant '%s': "
					 "%llu in use, %llu asked", (unsigned long long)q.tenant_memory,
					 tenant, (unsigned long long)t->memory,
					 (unsigned long long)memory);
	return 0;
}
