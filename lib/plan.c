/* lib/plan.c — turns a policy into a plan, in the parent, before clone.
 *
 * Everything that parses, allocates or can fail slowly happens here; the
 * child only reads the plan. The string arena is allocated once and never
 * grows, so pointers into it stay valid for the plan's lifetime. What the
 * policy alone decides is built once per policy digest and cached (below).
 */
#include <pthread.h>
#include <sodium.h>
#include <string.h>

#include "base/util.h"
#include "sandbox.h"

enum { WARD_PLAN_ARENA = 256 * 1024 };

const char *ward_plan_strdup(struct ward_plan *plan, const char *s, size_t len)
{
	if (!plan->strings) {
		plan->strings = malloc(WARD_PLAN_ARENA);
		if (!plan->strings)
			return NULL;
		plan->strings_cap = WARD_PLAN_ARENA;
		plan->strings_len = 0;
	}
	if (len + 1 > plan->strings_cap - plan->strings_len)
		return NULL;
	char *d = plan->strings + plan->strings_len;
	memcpy(d, s, len);
	d[len] = '\0';
	plan->strings_len += len + 1;
	return d;
}

int ward_plan_add_mount(struct ward_plan *plan, const struct ward_mount_op *op,
			struct ward_error *err)
{
	if (plan->n_mounts >= WARD_PLAN_MAX_MOUNTS)
		return ward_error_set(err, E2BIG, "mount",
				      "too many mounts (at most %d)", WARD_PLAN_MAX_MOUNTS);
	struct ward_mount_op *m = &plan->mounts[plan->n_mounts++];
	*m = *op;
	m->fd = -1;
	return 0;
}

int ward_plan_build(struct ward_plan *plan, const struct ward_policy_plan *base,
		    char *const argv[], const struct ward_sandbox_options *opts,
		    struct ward_error *err)
{
	const struct ward_policy *policy = &base->policy;
	memset(plan, 0, sizeof(*plan));
	plan->policy = policy;
	plan->base = base;
	plan->argv = argv;
	if (opts) {
		plan->files = opts->files;
		plan->n_files = opts->n_files;
		plan->extra_binds = opts->binds;
		plan->n_extra_binds = opts->n_binds;
	}
	plan->workdir = policy->workdir ? policy->workdir : "/workspace";
	plan->hostname = policy->hostname ? policy->hostname : WARD_DEFAULT_HOSTNAME;
	plan->allow_degrade = policy->allow_degrade;
	plan->egress = (struct ward_egress_fds){ -1, -1, -1 };
	/* the supervisor adds the proxy's CA bundle as one of ward's binds
	 * (a launcher gets it with the others): the environment follows */
	for (size_t i = 0; i < plan->n_extra_binds; i++)
		if (policy->network.mode == WARD_NET_ALLOWLIST && plan->extra_binds[i].inside &&
		    strcmp(plan->extra_binds[i].inside, WARD_EGRESS_CA_PATH) == 0)
			plan->egress_ca = true;

	if (!argv || !argv[0] || !argv[0][0])
		return ward_error_set(err, EINVAL, "plan", "no program to run");
	/* The layer table (lib/sandbox.c) orders the preparation too. */
	int r = ward_layers_prepare(ward_layers, ward_n_layers, plan, err);
	if (r < 0) {
		ward_plan_release(plan);
		return r;
	}
	return 0;
}

void ward_plan_release(struct ward_plan *plan)
{
	for (size_t i = 0; i < plan->n_mounts; i++)
		if (plan->mounts[i].fd >= 0)
			close(plan->mounts[i].fd);
	free(plan->strings);
	free(plan->envp);
	if (!plan->seccomp_borrowed)
		ward_seccomp_release(&plan->seccomp);
	memset(plan, 0, sizeof(*plan));
}

/* ---- the plan cache ---- */

enum { CACHE_DEFAULT = 32, CACHE_MAX = 1024 };

struct ward_plan_cache {
	pthread_mutex_t lock;
	struct ward_policy_plan **slots;   /* n used of max; bounded by max */
	size_t n, max;
	uint64_t tick, hits, misses;
};

WARD_EXPORT int ward_policy_digest(const struct ward_policy *p,
				   unsigned char out[WARD_POLICY_DIGEST_LEN],
				   struct ward_error *err)
{
	_cleanup_free_ char *canon = ward_policy_to_json(p);
	if (!canon)
		return ward_error_set(err, ENOMEM, "plan", "unable to serialize the policy");
	/* BLAKE2b needs no sodium_init: it uses no randomness */
	crypto_generichash(out, WARD_POLICY_DIGEST_LEN, (const unsigned char *)canon,
			   strlen(canon), NULL, 0);
	return 0;
}

WARD_EXPORT void ward_policy_plan_unref(struct ward_policy_plan *pp)
{
	if (!pp || __atomic_sub_fetch(&pp->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	ward_seccomp_release(&pp->seccomp);
	ward_policy_release(&pp->policy);
	free(pp);
}

WARD_EXPORT const unsigned char *ward_policy_plan_digest(const struct ward_policy_plan *pp)
{
	return pp->digest;
}

WARD_EXPORT const struct ward_policy *ward_policy_plan_policy(const struct ward_policy_plan *pp)
{
	return &pp->policy;
}

static struct ward_policy_plan *policy_plan_new(const struct ward_policy *policy,
						const unsigned char *digest,
						struct ward_error *err)
{
	struct ward_policy_plan *pp = calloc(1, sizeof(*pp));
	if (!pp) {
		ward_error_set(err, ENOMEM, "plan", "out of memory");
		return NULL;
	}
	pp->refs = 1;
	memcpy(pp->digest, digest, WARD_POLICY_DIGEST_LEN);
	if (ward_policy_copy(&pp->policy, policy, err) < 0) {
		free(pp);
		return NULL;
	}
	if (ward_seccomp_build(&pp->policy, &pp->seccomp, err) < 0) {
		ward_policy_plan_unref(pp);
		return NULL;
	}
	return pp;
}

WARD_EXPORT struct ward_plan_cache *ward_plan_cache_new(size_t max_entries)
{
	struct ward_plan_cache *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->max = max_entries ? (max_entries < CACHE_MAX ? max_entries : CACHE_MAX)
			     : CACHE_DEFAULT;
	c->slots = calloc(c->max, sizeof(*c->slots));
	if (!c->slots || pthread_mutex_init(&c->lock, NULL) != 0) {
		free(c->slots);
		free(c);
		return NULL;
	}
	return c;
}

WARD_EXPORT void ward_plan_cache_free(struct ward_plan_cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		ward_policy_plan_unref(c->slots[i]);
	pthread_mutex_destroy(&c->lock);
	free(c->slots);
	free(c);
}

static struct ward_plan_cache *default_cache;
static void default_cache_init(void) { default_cache = ward_plan_cache_new(CACHE_DEFAULT); }

WARD_EXPORT struct ward_plan_cache *ward_plan_cache_default(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, default_cache_init);
	return default_cache;
}

/* Under c->lock: the entry for digest and policy, with a new reference. */
static struct ward_policy_plan *cache_find(struct ward_plan_cache *c, const unsigned char *digest,
					   const struct ward_policy *policy)
{
	for (size_t i = 0; i < c->n; i++) {
		struct ward_policy_plan *pp = c->slots[i];
		if (memcmp(pp->digest, digest, WARD_POLICY_DIGEST_LEN) != 0 ||
		    !ward_policy_equal(&pp->policy, policy))
			continue;
		pp->used = ++c->tick;
		__atomic_add_fetch(&pp->refs, 1, __ATOMIC_ACQ_REL);
		return pp;
	}
	return NULL;
}

/* Under c->lock: adds pp (the cache takes a reference), evicting the least
 * recently used entry when full. Entries still held elsewhere live on. */
static void cache_insert(struct ward_plan_cache *c, struct ward_policy_plan *pp)
{
	if (c->n == c->max) {
		size_t lru = 0;
		for (size_t i = 1; i < c->n; i++)
			if (c->slots[i]->used < c->slots[lru]->used)
				lru = i;
		ward_policy_plan_unref(c->slots[lru]);
		c->slots[lru] = c->slots[--c->n];
	}
	pp->used = ++c->tick;
	__atomic_add_fetch(&pp->refs, 1, __ATOMIC_ACQ_REL);
	c->slots[c->n++] = pp;
}

WARD_EXPORT struct ward_policy_plan *ward_plan_cache_get(struct ward_plan_cache *c,
							 const struct ward_policy *policy,
							 struct ward_error *err)
{
	unsigned char digest[WARD_POLICY_DIGEST_LEN];
	if (ward_policy_digest(policy, digest, err) < 0)
		return NULL;
	pthread_mutex_lock(&c->lock);
	struct ward_policy_plan *pp = cache_find(c, digest, policy);
	if (pp)
		c->hits++;
	else
		c->misses++;
	pthread_mutex_unlock(&c->lock);
	if (pp)
		return pp;
	/* Built outside the lock: other threads' lookups do not wait on it. */
	struct ward_policy_plan *fresh = policy_plan_new(policy, digest, err);
	if (!fresh)
		return NULL;
	pthread_mutex_lock(&c->lock);
	pp = cache_find(c, digest, policy); /* another thread may have won */
	if (!pp)
		cache_insert(c, fresh);
	pthread_mutex_unlock(&c->lock);
	if (pp) {
		ward_policy_plan_unref(fresh);
		return pp;
	}
	return fresh;
}

WARD_EXPORT void ward_plan_cache_stats(struct ward_plan_cache *c, size_t *entries,
				       uint64_t *hits, uint64_t *misses)
{
	pthread_mutex_lock(&c->lock);
	if (entries)
		*entries = c->n;
	if (hits)
		*hits = c->hits;
	if (misses)
		*misses = c->misses;
	pthread_mutex_unlock(&c->lock);
}
