/* lib/service/pool.c — the warm pool: language kernels prepared ahead for
 * one-shot executions, and the teardown of finished ones off the loop.
 *
 * A pooled entry is a kernel started by ward_kernel_prepare with the
 * operator's default policy (the one a request without overrides gets),
 * its imports done, /workspace empty, no request data: it belongs to no
 * tenant. It is keyed by (image, policy digest, language); the image is
 * "host" today. A request whose effective policy has that digest and whose
 * language has entries takes one after admission (exec_start), claims it
 * (its files, its clock) and is its only user: a claimed kernel is
 * destroyed after its one request, never put back. Anything else misses
 * and starts cold.
 *
 * It must never block the loop or grow without a bound: refills run on
 * the core's worker threads (ward_kernel_prepare waits for the kernel to
 * be ready), at most POOL_REFILLS at once; each language holds at most its
 * configured size (at most POOL_MAX_PER_LANG), and pooled plus running
 * sandboxes stay within max_executions. Entries whose kernel died while
 * they waited are dropped and counted; a policy change retires entries of
 * the old digest; stopping the core discards them all.
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/util.h"
#include "internal.h"

enum {
	POOL_REFILLS = 2,          /* prepares running at once, all languages */
	POOL_SWEEP_MS = 1000,      /* how often waiting entries are checked */
	POOL_BACKOFF_MAX_MS = 60000,
	STAMP_MAX_ENTRIES = 1024,  /* files looked at for the runners' stamp */
	STAMP_DEPTH = 4,
};

_Static_assert(sizeof(((struct ward_service_config *)0)->pool) ==
	       WARD_LANG_COUNT * sizeof(uint64_t), "one pool size per language");

struct warm_entry {
	struct warm_entry *next;
	struct ward_kernel *k;
	unsigned char digest[WARD_POLICY_DIGEST_LEN];
	uint64_t stamp;            /* the runners' when it was prepared */
};

struct svc_warm {
	unsigned char digest[WARD_POLICY_DIGEST_LEN]; /* of the default policy */
	char runners[PATH_MAX];               /* "": not found (refills fail) */
	uint64_t stamp;                       /* the runners' state, each sweep */
	uint64_t zygote_stamp;                /* and when the pool started */
	struct warm_entry *ready[WARD_LANG_COUNT];
	unsigned n_ready[WARD_LANG_COUNT];
	unsigned filling;                     /* refill jobs out, all languages */
	unsigned n_filling[WARD_LANG_COUNT];
	bool stopped;
	uint64_t next_sweep_ns;
	sigset_t loop_mask;                   /* a cold start's, for the refills */
	/* a language whose refills fail (no node on this host, a broken
	 * runner) waits before the next try, twice as long each time up to
	 * POOL_BACKOFF_MAX_MS; a kept refill resets it */
	uint64_t retry_ns[WARD_LANG_COUNT];
	unsigned fails[WARD_LANG_COUNT];
	struct svc_warm_stats st[WARD_LANG_COUNT];
};

struct refill_job {
	struct svc_job j;
	enum ward_lang lang;
	struct ward_policy policy;            /* the job's own copy */
	char *runners;
	struct ward_zygote *zygote;           /* borrowed from the config */
	struct ward_launcher *launcher;
	sigset_t mask;
	unsigned char digest[WARD_POLICY_DIGEST_LEN];
	uint64_t stamp;
	struct ward_kernel *k;
	int rc;
	struct ward_error err;
};

/* Adds what identifies one file's content (inode, size, times) to h. */
static uint64_t stamp_add(uint64_t h, const struct stat *st)
{
	const uint64_t v[] = { (uint64_t)st->st_ino, (uint64_t)st->st_size,
			       (uint64_t)st->st_mtim.tv_sec, (uint64_t)st->st_mtim.tv_nsec,
			       (uint64_t)st->st_ctim.tv_sec, (uint64_t)st->st_ctim.tv_nsec };
	for (size_t i = 0; i < ARRAY_SIZE(v); i++)
		h = (h ^ v[i]) * 0x100000001b3ull; /* FNV-1a over words */
	return h;
}

static uint64_t stamp_dir(int dfd, int depth, uint64_t h, unsigned *n)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;
	if (!d) {
		close(dfd);
		return h;
	}
	while ((e = readdir(d)) != NULL && ++*n < STAMP_MAX_ENTRIES) {
		struct stat st;
		if (e->d_name[0] == '.' || strcmp(e->d_name, "__pycache__") == 0 ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		h = stamp_add(h, &st);
		int sub;
		if (S_ISDIR(st.st_mode) && depth < STAMP_DEPTH &&
		    (sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC |
				  O_NOFOLLOW)) >= 0)
			h = stamp_dir(sub, depth + 1, h, n);
	}
	closedir(d);
	return h;
}

/* The runners directory's state: its files' inodes, sizes and times (not
 * their bytes), at most STAMP_MAX_ENTRIES of them, bytecode caches left
 * out. The operator's directory on the host: read on the loop once per
 * sweep, bounded. An update that replaces or edits a runner changes it. */
static uint64_t runners_stamp(const char *dir)
{
	unsigned n = 0;
	int fd = dir[0] ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	return fd < 0 ? 0 : stamp_dir(fd, 0, 0xcbf29ce484222325ull, &n);
}

/* The one place a pooled kernel is made: with the options a cold start of
 * the same request would use, minus its files (execution.c). */
static int warm_prepare(struct refill_job *r)
{
	json_t *lint = (json_t *)ward_policy_lint_json(&r->policy);
	struct ward_kernel_options o = { .lang = r->lang, .lint = lint, .runners_dir = r->runners,
					 .zygote = r->zygote, .launcher = r->launcher };
	int rc = ward_kernel_prepare(&r->policy, r->lang, &o, &r->k, &r->err);
	json_decref(lint);
	return rc;
}

static void refill_run(struct svc_job *j)
{
	struct refill_job *r = (struct refill_job *)j;
	/* Workers block every signal; the sandbox inherits the mask of the
	 * thread that starts it, so it gets a cold start's. */
	sigset_t old;
	pthread_sigmask(SIG_SETMASK, &r->mask, &old);
	r->rc = warm_prepare(r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static uint64_t pool_memory(const struct ward_service *s)
{
	return s->policy.memory;
}

/* A kernel that ended before it said it was ready: why, for the operator
 * (the first time, then every 100th). It has ended: its verdict is at hand
 * at once. */
static void died_report(struct ward_service *s, struct refill_job *r)
{
	struct ward_verdict v;
	struct ward_error err;
	uint64_t n = s->warm->st[r->lang].died;
	ward_verdict_init(&v);
	ward_error_clear(&err);
	ward_kernel_stop(r->k, &v, &err);
	r->k = NULL;
	if (n == 1 || n % 100 == 0)
		fprintf(stderr, "ward: serve: warning: pool: a %s kernel ended before it was ready "
			"(%s%s%s%s%s%s%s; stderr: %.200s)\n", ward_lang_name(r->lang),
			ward_status_name(v.status), v.limit ? ", limit " : "", v.limit ? v.limit : "",
			v.setup.message[0] ? ": " : "", v.setup.message,
			v.setup.code ? ": " : "", v.setup.code ? strerror(v.setup.code) : "",
			v.err.data ? v.err.data : "");
	ward_verdict_release(&v);
}

static void refill_done(struct ward_service *s, struct svc_job *j)
{
	struct refill_job *r = (struct refill_job *)j;
	struct svc_warm *w = s->warm;
	w->filling--;
	w->n_filling[r->lang]--;
	bool keep = !j->cancelled && r->rc == 0 && r->k && !w->stopped &&
		    memcmp(r->digest, w->digest, sizeof(w->digest)) == 0 && r->stamp == w->stamp &&
		    w->n_ready[r->lang] < s->cfg.pool[r->lang];
	bool failed = false;
	if (keep && !ward_kernel_alive(r->k)) {
		w->st[r->lang].died++;
		keep = false;
		failed = true;
		died_report(s, r);
	} else if (!j->cancelled && r->rc < 0) {
		failed = true;
		w->st[r->lang].failed++;
		if (w->st[r->lang].failed == 1 || w->st[r->lang].failed % 100 == 0)
			fprintf(stderr, "ward: serve: warning: pool: unable to prepare a %s kernel: "
				"%s: %s\n", ward_lang_name(r->lang), r->err.layer, r->err.message);
	}
	if (failed) {
		unsigned n = w->fails[r->lang] < 6 ? w->fails[r->lang]++ : 6;
		uint64_t ms = (uint64_t)POOL_SWEEP_MS << n;
		w->retry_ns[r->lang] = ward_now_ns() +
			(ms < POOL_BACKOFF_MAX_MS ? ms : POOL_BACKOFF_MAX_MS) * 1000000ull;
	}
	if (keep) {
		w->fails[r->lang] = 0;
		w->retry_ns[r->lang] = 0;
		struct warm_entry *e = calloc(1, sizeof(*e));
		if (e) {
			e->k = r->k;
			e->stamp = r->stamp;
			memcpy(e->digest, r->digest, sizeof(e->digest));
			e->next = w->ready[r->lang];
			w->ready[r->lang] = e;
			w->n_ready[r->lang]++;
			w->st[r->lang].refills++;
			r->k = NULL;
		}
	}
	if (r->k) /* not kept: ended off the loop like any other */
		svc_teardown(s, r->k);
	ward_policy_release(&r->policy);
	free(r->runners);
	free(r);
	warm_refill(s);
}

unsigned warm_live(const struct ward_service *s)
{
	const struct svc_warm *w = s->warm;
	unsigned n = 0;
	for (int l = 0; w && l < WARD_LANG_COUNT; l++)
		n += w->n_ready[l];
	return w ? n + w->filling : 0;
}

/* Refills while there is room: POOL_REFILLS at once, each language up to
 * its size, pooled and running sandboxes within max_executions, none
 * while stopping. A failed start is retried at the next sweep, not at
 * once (a broken runner must not spin the workers). */
void warm_refill(struct ward_service *s)
{
	struct svc_warm *w = s->warm;
	if (!w || w->stopped || s->stopping)
		return;
	uint64_t now = ward_now_ns();
	for (int l = 0; l < WARD_LANG_COUNT; l++) {
		while (w->filling < POOL_REFILLS && now >= w->retry_ns[l] &&
		       w->n_ready[l] + w->n_filling[l] < s->cfg.pool[l] &&
		       s->running + s->tearing_down + warm_live(s) < s->cfg.max_executions) {
			struct refill_job *r = calloc(1, sizeof(*r));
			struct ward_error err;
			if (!r)
				return;
			r->lang = (enum ward_lang)l;
			r->mask = w->loop_mask;
			r->zygote = svc_zygote(s);
			r->launcher = s->cfg.launcher;
			memcpy(r->digest, w->digest, sizeof(r->digest));
			r->stamp = w->stamp;
			r->j.run = refill_run;
			r->j.done = refill_done;
			ward_strlcpy(r->j.tenant, "(pool)", sizeof(r->j.tenant));
			if (ward_policy_copy(&r->policy, &s->policy, &err) < 0 ||
			    (s->cfg.runners && !(r->runners = strdup(s->cfg.runners))) ||
			    svc_job_submit(s, &r->j) < 0) {
				ward_policy_release(&r->policy);
				free(r->runners);
				free(r);
				return;
			}
			w->filling++;
			w->n_filling[l]++;
		}
		if (w->filling >= POOL_REFILLS)
			return;
	}
}

int warm_start(struct ward_service *s)
{
	struct ward_error err;
	bool any = false;
	for (int l = 0; l < WARD_LANG_COUNT; l++)
		any = any || s->cfg.pool[l];
	if (!any || s->cfg.embedded)
		return 0;
	/* A pooled sandbox would be attached to the egress proxy before a
	 * tenant asked for it (its events would name nobody, its credential
	 * rules could not be the request's): an operator's allowlist policy
	 * starts every sandbox for its request. */
	if (s->policy.network.mode != WARD_NET_NONE) {
		fprintf(stderr, "ward: serve: pool: off: the default policy has network.mode "
			"\"allowlist\" (egress sandboxes start for their request)\n");
		return 0;
	}
	struct svc_warm *w = calloc(1, sizeof(*w));
	if (!w)
		return -1;
	if (ward_policy_digest(&s->policy, w->digest, &err) < 0) {
		fprintf(stderr, "ward: error: pool: %s\n", err.message);
		free(w);
		return -1;
	}
	if (ward_kernel_runners_dir(s->cfg.runners, w->runners, &err) < 0)
		w->runners[0] = '\0'; /* the refills say why */
	w->stamp = w->zygote_stamp = runners_stamp(w->runners);
	pthread_sigmask(SIG_SETMASK, NULL, &w->loop_mask);
	/* The first refill comes from the loop's first dispatch, not from
	 * here: the front end is still setting up, and what it changes for
	 * the whole process for a moment (the umask while it binds its
	 * socket) a sandbox started on a worker meanwhile would inherit. */
	w->next_sweep_ns = 0;
	s->warm = w;
	return 0;
}

struct ward_zygote *svc_zygote(const struct ward_service *s)
{
	return s->zygote_stale ? NULL : s->cfg.zygote;
}

/* An entry leaves the pool unused: ended off the loop like a finished one. */
static void drop(struct ward_service *s, int l, struct warm_entry **p)
{
	struct warm_entry *e = *p;
	*p = e->next;
	s->warm->n_ready[l]--;
	svc_teardown(s, e->k);
	free(e);
}

/* Drops what died, and what a policy change made stale. */
static void sweep(struct ward_service *s)
{
	struct svc_warm *w = s->warm;
	w->stamp = runners_stamp(w->runners);
	if (w->stamp != w->zygote_stamp && s->cfg.zygote && !s->zygote_stale) {
		s->zygote_stale = true;
		fprintf(stderr, "ward: serve: the runners changed: python kernels start cold "
			"from now on (the zygote holds the old ones until a restart)\n");
	}
	for (int l = 0; l < WARD_LANG_COUNT; l++)
		for (struct warm_entry **p = &w->ready[l]; *p;) {
			bool stale = memcmp((*p)->digest, w->digest, sizeof(w->digest)) != 0 ||
				     (*p)->stamp != w->stamp ||
				     w->n_ready[l] > s->cfg.pool[l];
			bool dead = !stale && !ward_kernel_alive((*p)->k);
			if (!stale && !dead) {
				p = &(*p)->next;
				continue;
			}
			if (stale)
				w->st[l].retired++;
			else
				w->st[l].died++;
			drop(s, l, p);
		}
}

struct ward_kernel *warm_take(struct ward_service *s, const struct exec_request *r)
{
	struct svc_warm *w = s->warm;
	unsigned char d[WARD_POLICY_DIGEST_LEN];
	struct ward_error err;
	if (!w || r->lang < 0 || r->lang >= WARD_LANG_COUNT || !s->cfg.pool[r->lang])
		return NULL;
	struct svc_warm_stats *st = &w->st[r->lang];
	/* a claim's files are written on the loop: small ones only */
	uint64_t bytes = 0;
	for (size_t i = 0; i < r->n_files; i++)
		bytes += r->files[i].len;
	if (bytes > WARM_CLAIM_MAX_BYTES || ward_policy_digest(&r->policy, d, &err) < 0 ||
	    memcmp(d, w->digest, sizeof(d)) != 0) {
		st->misses++;
		return NULL;
	}
	struct ward_kernel *k = NULL;
	while (!k && w->ready[r->lang]) {
		struct warm_entry **p = &w->ready[r->lang];
		if (memcmp((*p)->digest, d, sizeof(d)) != 0) {
			st->retired++;
			drop(s, r->lang, p);
		} else if (!ward_kernel_alive((*p)->k)) {
			st->died++;
			drop(s, r->lang, p);
		} else {
			struct warm_entry *e = *p;
			*p = e->next;
			w->n_ready[r->lang]--;
			k = e->k;
			free(e);
		}
	}
	if (k)
		st->hits++;
	else
		st->misses++;
	return k;
}

void warm_make_room(struct ward_service *s)
{
	struct svc_warm *w = s->warm;
	for (int l = 0; w && l < WARD_LANG_COUNT; l++)
		while (w->ready[l] && s->running + warm_live(s) > s->cfg.max_executions) {
			w->st[l].retired++;
			drop(s, l, &w->ready[l]);
		}
}

void warm_tick(struct ward_service *s)
{
	struct svc_warm *w = s->warm;
	if (!w || w->stopped)
		return;
	uint64_t now = ward_now_ns();
	if (now < w->next_sweep_ns)
		return;
	w->next_sweep_ns = now + POOL_SWEEP_MS * 1000000ull;
	sweep(s);
	warm_refill(s);
}

int warm_timeout(struct ward_service *s)
{
	struct svc_warm *w = s->warm;
	if (!w || w->stopped)
		return -1;
	uint64_t now = ward_now_ns();
	return now >= w->next_sweep_ns ? 0 : (int)((w->next_sweep_ns - now) / 1000000 + 1);
}

/* Every waiting entry goes to the teardown (workers, off the loop: the
 * loop still answers while the daemon stops); ward_service_close waits for
 * the workers, so none is left once the core is closed. */
void warm_stop(struct ward_service *s)
{
	struct svc_warm *w = s->warm;
	if (!w || w->stopped)
		return;
	w->stopped = true;
	for (int l = 0; l < WARD_LANG_COUNT; l++)
		while (w->ready[l]) {
			struct warm_entry *e = w->ready[l];
			w->ready[l] = e->next;
			w->n_ready[l]--;
			w->st[l].retired++;
			svc_teardown(s, e->k);
			free(e);
		}
}

void warm_free(struct ward_service *s)
{
	warm_stop(s);
	free(s->warm);
	s->warm = NULL;
}

void warm_stats(const struct ward_service *s, int lang, struct svc_warm_stats *st)
{
	const struct svc_warm *w = s->warm;
	memset(st, 0, sizeof(*st));
	if (!w)
		return;
	*st = w->st[lang];
	st->size = w->n_ready[lang];
	st->memory = (uint64_t)(w->n_ready[lang] + w->n_filling[lang]) * pool_memory(s);
}

/* --- teardown after the verdict --- */

struct teardown_job {
	struct svc_job j;
	struct ward_kernel *k;
};

static void teardown_run(struct svc_job *j)
{
	struct teardown_job *t = (struct teardown_job *)j;
	ward_kernel_discard(t->k);
	t->k = NULL;
}

static void teardown_done(struct ward_service *s, struct svc_job *j)
{
	struct teardown_job *t = (struct teardown_job *)j;
	ward_kernel_discard(t->k); /* cancelled (the core stops): here */
	s->tearing_down--;
	free(t);
	warm_refill(s);
}

/* Queued for the next turn of the loop, so that the front end sends the
 * answer first: a worker ending a sandbox takes a CPU. */
void svc_teardown(struct ward_service *s, struct ward_kernel *k)
{
	struct teardown_job *t = calloc(1, sizeof(*t));
	if (!t) {
		ward_kernel_discard(k);
		return;
	}
	t->k = k;
	t->j.run = teardown_run;
	t->j.done = teardown_done;
	ward_strlcpy(t->j.tenant, "(teardown)", sizeof(t->j.tenant));
	t->j.next = s->teardowns;
	s->teardowns = &t->j;
	s->tearing_down++;
}

void svc_teardown_flush(struct ward_service *s)
{
	struct svc_job *j = s->teardowns, *next;
	s->teardowns = NULL;
	for (; j; j = next) {
		next = j->next;
		if (svc_job_submit(s, j) == 0)
			continue;
		/* no worker free (or an embedded core): here */
		teardown_done(s, j);
	}
}
