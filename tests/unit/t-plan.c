/* tests/unit/t-plan.c — the layer pipeline, the plan cache and the two-phase
 * lifecycle.
 *
 * The pipeline is driven with rows of its own descriptor type whose apply
 * steps succeed or fail on demand, through the same ward_layers_apply the
 * sandbox's init and program run. The cache is checked for identity (same
 * policy, same object), its bound and LRU eviction, and from several threads
 * at once. The lifecycle part starts real sandboxes and skips, saying why,
 * where this host cannot make one.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h" /* stdio before base/banned.h */
#include "base/util.h"
#include "sandbox.h"
#include "ward/sandbox.h"

static int calls;

static int step_ok(struct ward_plan *plan, struct ward_error *err)
{
	(void)plan;
	(void)err;
	calls++;
	return 0;
}

/* Fails like a layer does: err set, no layer name (the pipeline adds it). */
static int step_fail(struct ward_plan *plan, struct ward_error *err)
{
	(void)plan;
	calls++;
	return ward_error_setv(err, EPERM, "", "unable to do it", NULL);
}

/* Fails like a layer the kernel lacks. */
static int step_missing(struct ward_plan *plan, struct ward_error *err)
{
	(void)plan;
	calls++;
	return ward_error_setv(err, EOPNOTSUPP, "", "not available", NULL);
}

#define BIT(l) (1u << (l))

static void test_pipeline(void)
{
	const struct ward_layer_desc rows[] = {
		{ WARD_LAYER_UTS, WARD_STAGE_PROGRAM, NULL, step_ok, false },
		{ WARD_LAYER_LANDLOCK, WARD_STAGE_PROGRAM, NULL, step_missing, true },
		{ WARD_LAYER_ENV, WARD_STAGE_PROGRAM, NULL, step_ok, false },
		{ WARD_LAYER_NET, WARD_STAGE_INIT, NULL, step_fail, false },
	};
	const struct ward_layer_desc broken[] = {
		{ WARD_LAYER_LANDLOCK, WARD_STAGE_PROGRAM, NULL, step_fail, true },
	};
	struct ward_plan plan;
	struct ward_error err;

	/* a degradable layer that fails, allowed: degraded, the run goes on */
	memset(&plan, 0, sizeof(plan));
	plan.allow_degrade = BIT(WARD_LAYER_LANDLOCK);
	ward_error_clear(&err);
	calls = 0;
	is_int(ward_layers_apply(rows, ARRAY_SIZE(rows), WARD_STAGE_PROGRAM, &plan, &err), 0,
	       "degradable failure, allowed: the stage succeeds");
	is_int(plan.degraded, BIT(WARD_LAYER_LANDLOCK), "the pipeline marks it degraded");
	is_int(plan.layers, BIT(WARD_LAYER_UTS) | BIT(WARD_LAYER_ENV),
	       "the others applied, the degraded one not");
	is_int(calls, 3, "only the stage's rows ran");
	is_int(err.code, 0, "no error left behind");

	/* the same layer, not allowed: the run stops and names it */
	memset(&plan, 0, sizeof(plan));
	ward_error_clear(&err);
	calls = 0;
	is_int(ward_layers_apply(rows, ARRAY_SIZE(rows), WARD_STAGE_PROGRAM, &plan, &err), -EOPNOTSUPP,
	       "degradable failure, not allowed: the stage fails");
	is_str(err.layer, "landlock", "the error names the layer");
	is_int(calls, 2, "nothing after the failed row ran");
	is_int(plan.layers, BIT(WARD_LAYER_UTS), "only what applied is marked");
	is_int(plan.degraded, 0, "nothing marked degraded");

	/* allowed to degrade, but failing for another reason than a missing
	 * kernel feature (a rule path it cannot open): fail closed */
	memset(&plan, 0, sizeof(plan));
	plan.allow_degrade = BIT(WARD_LAYER_LANDLOCK);
	ward_error_clear(&err);
	is_int(ward_layers_apply(broken, ARRAY_SIZE(broken), WARD_STAGE_PROGRAM, &plan, &err), -EPERM,
	       "a degradable layer that fails for another reason stops the run");
	is_int(plan.degraded, 0, "and is not marked degraded");

	/* a layer that may not degrade stops the run even when the policy
	 * lists it (the policy cannot make the boundary optional) */
	memset(&plan, 0, sizeof(plan));
	plan.allow_degrade = ~0u;
	ward_error_clear(&err);
	is_int(ward_layers_apply(rows, ARRAY_SIZE(rows), WARD_STAGE_INIT, &plan, &err), -EPERM,
	       "non-degradable failure stops the run");
	is_str(err.layer, "net", "the error names the layer");
	is_int(plan.degraded, 0, "a non-degradable layer is never marked degraded");

	/* a row the supervisor already degraded is skipped */
	memset(&plan, 0, sizeof(plan));
	plan.degraded = BIT(WARD_LAYER_NET);
	ward_error_clear(&err);
	is_int(ward_layers_apply(rows, ARRAY_SIZE(rows), WARD_STAGE_INIT, &plan, &err), 0,
	       "a row degraded before the stage is skipped");
	is_int(plan.layers, 0, "and not marked applied");
}

/* The real table: the order constraints its comments state. */
static void test_table(void)
{
	size_t userns = 0, mount = 0, landlock = 0, seccomp = 0, last_prog = 0;
	bool stages_ordered = true;
	for (size_t i = 0; i < ward_n_layers; i++) {
		const struct ward_layer_desc *l = &ward_layers[i];
		if (l->id == WARD_LAYER_USERNS)
			userns = i;
		if (l->id == WARD_LAYER_MOUNT)
			mount = i;
		if (l->id == WARD_LAYER_LANDLOCK)
			landlock = i;
		if (l->id == WARD_LAYER_SECCOMP)
			seccomp = i;
		if (l->stage == WARD_STAGE_PROGRAM)
			last_prog = i;
		if (i && l->stage < ward_layers[i - 1].stage)
			stages_ordered = false;
	}
	ok(stages_ordered, "init rows come before program rows");
	ok(userns < mount, "userns is prepared before the mount list");
	ok(mount < landlock, "landlock rules are derived after the mount list");
	ok(seccomp + 1 == last_prog && ward_layers[last_prog].id == -1 &&
		   ward_layers[last_prog].apply == ward_verify_apply,
	   "seccomp is the last layer, followed only by the verification");
	/* every layer the policy can name has exactly one row that keeps its bit */
	for (int id = 0; id < WARD_LAYER_COUNT; id++) {
		size_t n = 0;
		for (size_t i = 0; i < ward_n_layers; i++)
			n += ward_layers[i].id == id;
		is_int(n, 1, "layer %s has one row", ward_layer_name((enum ward_layer)id));
	}
	/* degradable rows are those allow_degraded accepts, and no other */
	for (size_t i = 0; i < ward_n_layers; i++) {
		const struct ward_layer_desc *l = &ward_layers[i];
		if (l->id < 0)
			continue;
		struct ward_policy p;
		struct ward_error err;
		ward_policy_init(&p, &err);
		bool accepted = ward_policy_set(&p, "allow_degraded",
						ward_layer_name((enum ward_layer)l->id),
						"test", &err) == 0;
		ok(accepted == l->degradable, "%s: degradable in the table iff allow_degraded accepts it",
		   ward_layer_name((enum ward_layer)l->id));
		ward_policy_release(&p);
	}
}

static int policy_with(struct ward_policy *p, const char *memory)
{
	struct ward_error err;
	if (ward_policy_init(p, &err) < 0)
		return -1;
	return memory ? ward_policy_set(p, "limits.memory", memory, "test", &err) : 0;
}

static void test_cache(void)
{
	struct ward_policy a, a2, b, c;
	struct ward_error err;
	unsigned char da[WARD_POLICY_DIGEST_LEN], da2[WARD_POLICY_DIGEST_LEN],
		db[WARD_POLICY_DIGEST_LEN];
	policy_with(&a, "100M");
	policy_with(&a2, "100M");
	policy_with(&b, "200M");
	policy_with(&c, "300M");
	ward_policy_digest(&a, da, &err);
	ward_policy_digest(&a2, da2, &err);
	ward_policy_digest(&b, db, &err);
	ok(memcmp(da, da2, sizeof(da)) == 0, "equal policies have equal digests");
	ok(memcmp(da, db, sizeof(da)) != 0, "different policies have different digests");

	struct ward_plan_cache *cache = ward_plan_cache_new(2);
	struct ward_policy_plan *pa = ward_plan_cache_get(cache, &a, &err);
	struct ward_policy_plan *pa2 = ward_plan_cache_get(cache, &a2, &err);
	struct ward_policy_plan *pb = ward_plan_cache_get(cache, &b, &err);
	ok(pa && pa == pa2, "same policy, same plan object");
	ok(pb && pb != pa, "different policy, different plan object");
	ok(pa && ward_policy_plan_policy(pa) != &a &&
		   ward_policy_equal(ward_policy_plan_policy(pa), &a),
	   "the plan holds its own copy of the policy");
	size_t n = 0;
	uint64_t hits = 0, misses = 0;
	ward_plan_cache_stats(cache, &n, &hits, &misses);
	is_int(n, 2, "two entries");
	is_int(hits, 1, "one hit");
	is_int(misses, 2, "two misses");

	/* a used after b: b is the least recently used when c comes in */
	struct ward_policy_plan *pa3 = ward_plan_cache_get(cache, &a, &err);
	struct ward_policy_plan *pc = ward_plan_cache_get(cache, &c, &err);
	ward_plan_cache_stats(cache, &n, NULL, NULL);
	is_int(n, 2, "bounded: still two entries after a third policy");
	struct ward_policy_plan *pa4 = ward_plan_cache_get(cache, &a, &err);
	struct ward_policy_plan *pb2 = ward_plan_cache_get(cache, &b, &err);
	ok(pa4 == pa, "the recently used plan stayed");
	ok(pb2 && pb2 != pb, "the least recently used plan was evicted and is built again");
	ok(pb && ward_policy_equal(ward_policy_plan_policy(pb), &b),
	   "an evicted plan still held by a caller stays valid");

	struct ward_policy_plan *held[] = { pa, pa2, pb, pa3, pc, pa4, pb2 };
	ward_plan_cache_free(cache);
	ok(pc && ward_policy_equal(ward_policy_plan_policy(pc), &c),
	   "plans outlive the cache while referenced");
	for (size_t i = 0; i < ARRAY_SIZE(held); i++)
		ward_policy_plan_unref(held[i]);
	ward_policy_release(&a);
	ward_policy_release(&a2);
	ward_policy_release(&b);
	ward_policy_release(&c);
}

struct worker {
	struct ward_plan_cache *cache;
	const struct ward_policy *policy;
	struct ward_policy_plan *seen[200];
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct ward_error err;
	for (size_t i = 0; i < ARRAY_SIZE(w->seen); i++)
		w->seen[i] = ward_plan_cache_get(w->cache, w->policy, &err);
	return NULL;
}

static void test_threads(void)
{
	struct ward_policy p;
	policy_with(&p, "64M");
	struct ward_plan_cache *cache = ward_plan_cache_new(4);
	struct worker w[4];
	pthread_t t[4];
	for (int i = 0; i < 4; i++) {
		w[i].cache = cache;
		w[i].policy = &p;
		pthread_create(&t[i], NULL, worker_main, &w[i]);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	bool same = true;
	for (int i = 0; i < 4; i++)
		for (size_t j = 0; j < ARRAY_SIZE(w[i].seen); j++)
			same = same && w[i].seen[j] && w[i].seen[j] == w[0].seen[0];
	ok(same, "four threads at once get one plan object");
	size_t n = 0;
	ward_plan_cache_stats(cache, &n, NULL, NULL);
	is_int(n, 1, "and the cache holds one entry");
	for (int i = 0; i < 4; i++)
		for (size_t j = 0; j < ARRAY_SIZE(w[i].seen); j++)
			ward_policy_plan_unref(w[i].seen[j]);
	ward_plan_cache_free(cache);
	ward_policy_release(&p);
}

static bool readable(int fd, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	return poll(&pfd, 1, ms) > 0;
}

static void test_lifecycle(void)
{
	struct ward_policy p;
	struct ward_error err;
	struct ward_sandbox *sb = NULL;
	char *argv[] = { "/bin/echo", "ran", NULL };
	policy_with(&p, NULL);
	ward_error_clear(&err);
	if (ward_sandbox_prepare(&p, argv, NULL, &sb, &err) < 0) {
		char buf[600];
		skip("this host cannot make a sandbox: %s", ward_error_format(&err, buf, sizeof(buf)));
		ward_policy_release(&p);
		return;
	}
	ok(!ward_sandbox_claimed(sb), "a prepared sandbox is not claimed");
	ok(!readable(ward_sandbox_stdout(sb), 200), "its program does not run before the claim");
	is_int(ward_sandbox_claim(sb, &err), 0, "the first claim succeeds");
	is_int(ward_sandbox_claim(sb, &err), -EALREADY, "a second claim is refused");
	char out[16] = { 0 };
	ok(readable(ward_sandbox_stdout(sb), 10000) &&
		   read(ward_sandbox_stdout(sb), out, sizeof(out) - 1) > 0,
	   "the claimed program runs");
	is_str(out, "ran\n", "once");
	struct ward_verdict v;
	ward_verdict_init(&v);
	is_int(ward_sandbox_finish(sb, &v, &err), 0, "finish");
	is_int(v.status, WARD_STATUS_OK, "status ok");
	ward_verdict_release(&v);

	/* never claimed: finish ends it without running anything */
	sb = NULL;
	ok(ward_sandbox_prepare(&p, argv, NULL, &sb, &err) == 0, "prepare again");
	ward_verdict_init(&v);
	if (sb)
		ward_sandbox_finish(sb, &v, &err);
	is_int(v.status, WARD_STATUS_KILLED, "an unclaimed sandbox finishes as killed");
	is_int(v.usage.output_bytes, 0, "and produced nothing");
	ward_verdict_release(&v);

	/* discarded: nothing is left behind */
	sb = NULL;
	ok(ward_sandbox_prepare(&p, argv, NULL, &sb, &err) == 0, "prepare a third time");
	pid_t pid = sb ? ward_sandbox_pid(sb) : 0;
	ward_sandbox_discard(sb);
	ok(pid > 0 && kill(pid, 0) < 0 && errno == ESRCH, "discard kills and reaps the init");

	struct ward_plan_cache *dc = ward_plan_cache_default();
	size_t n = 0;
	uint64_t hits = 0;
	ward_plan_cache_stats(dc, &n, &hits, NULL);
	is_int(n, 1, "three sandboxes of one policy: one cached plan");
	is_int(hits, 2, "built once, reused twice");
	ward_policy_release(&p);
}

int main(void)
{
	test_pipeline();
	test_table();
	test_cache();
	test_threads();
	test_lifecycle();
	return tap_done();
}
