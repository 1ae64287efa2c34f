/* lib/service/worker.c — a small pool of threads for the slow file work.
 *
 * The loop never waits on a file a sandbox controls: the files API's
 * transfers, listings and deletions run here, on WORKERS threads, and
 * their results come back to the loop through an eventfd it watches. A job
 * owns everything it touches (its own fds, its own copy of names, the
 * upload's body): a worker never reads or writes the daemon's state, and
 * its done() runs on the loop. Queued jobs are bounded in all
 * (MAX_QUEUED) and per tenant (MAX_QUEUED_PER_TENANT), so no tenant can
 * take every worker or grow the queue.
 *
 * Workers start with every signal blocked (signals are the loop's) and
 * never fork.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "base/util.h"
#include "internal.h"

enum {
	WORKERS = 4,
	MAX_QUEUED = 64,             /* waiting or running, all tenants */
	MAX_QUEUED_PER_TENANT = 8,   /* waiting or running, one tenant */
	WORKER_STACK = 1 << 20,
};

struct tenant_jobs {
	char tenant[WARD_KEY_TENANT_MAX + 1];
	unsigned n;
};

struct svc_pool {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct svc_job *todo, **todo_tail;  /* waiting for a worker */
	struct svc_job *done;               /* run, waiting for the loop */
	unsigned queued;                    /* submitted, done() not yet run */
	bool stop;
	int efd;
	struct watch w;
	pthread_t th[WORKERS];
	int n_th;
	/* at most MAX_QUEUED tenants can have a job: one slot each */
	struct tenant_jobs tenants[MAX_QUEUED];
};

static void *worker_main(void *arg)
{
	struct svc_pool *p = arg;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->todo && !p->stop)
			pthread_cond_wait(&p->cv, &p->mu);
		if (!p->todo)
			break;
		struct svc_job *j = p->todo;
		p->todo = j->next;
		if (!p->todo)
			p->todo_tail = &p->todo;
		pthread_mutex_unlock(&p->mu);
		j->run(j);
		pthread_mutex_lock(&p->mu);
		j->next = p->done;
		p->done = j;
		uint64_t one = 1;
		if (write(p->efd, &one, sizeof(one)) < 0) {
			/* the counter is already non-zero: the loop will look */
		}
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int svc_workers_start(struct ward_service *s)
{
	struct svc_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return -1;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->todo_tail = &p->todo;
	p->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->pool = p;
	if (p->efd < 0)
		return -1;
	p->w = (struct watch){ .kind = WATCH_WORKER, .ptr = p };
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &p->w };
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, p->efd, &ev) < 0)
		return -1;
	sigset_t all, old;
	sigfillset(&all);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, WORKER_STACK);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = 0;
	for (int i = 0; i < WORKERS && rc == 0; i++)
		if ((rc = pthread_create(&p->th[i], &attr, worker_main, p)) == 0)
			p->n_th++;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc) {
		fprintf(stderr, "ward: error: serve: unable to start a worker thread: %s\n",
			strerror(rc));
		return -1;
	}
	return 0;
}

static struct tenant_jobs *tenant_slot(struct svc_pool *p, const char *tenant, bool add)
{
	struct tenant_jobs *free_slot = NULL;
	for (size_t i = 0; i < ARRAY_SIZE(p->tenants); i++) {
		struct tenant_jobs *t = &p->tenants[i];
		if (t->n && strcmp(t->tenant, tenant) == 0)
			return t;
		if (!t->n && !free_slot)
			free_slot = t;
	}
	if (add && free_slot)
		ward_strlcpy(free_slot->tenant, tenant, sizeof(free_slot->tenant));
	return add ? free_slot : NULL;
}

int svc_job_submit(struct ward_service *s, struct svc_job *j)
{
	struct svc_pool *p = s->pool;
	if (!p || p->stop || p->queued >= MAX_QUEUED)
		return -EAGAIN;
	struct tenant_jobs *t = tenant_slot(p, j->tenant, true);
	if (!t)
		return -EAGAIN;
	if (t->n >= MAX_QUEUED_PER_TENANT)
		return -EUSERS;
	t->n++;
	p->queued++;
	j->next = NULL;
	pthread_mutex_lock(&p->mu);
	*p->todo_tail = j;
	p->todo_tail = &j->next;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return 0;
}

unsigned svc_job_limit(bool per_tenant)
{
	return per_tenant ? MAX_QUEUED_PER_TENANT : MAX_QUEUED;
}

/* Runs done() of every finished job, oldest first is not promised. */
void svc_workers_dispatch(struct ward_service *s)
{
	struct svc_pool *p = s->pool;
	uint64_t n;
	if (read(p->efd, &n, sizeof(n)) < 0) {
		/* EAGAIN: another wake-up already took it */
	}
	pthread_mutex_lock(&p->mu);
	struct svc_job *j = p->done;
	p->done = NULL;
	pthread_mutex_unlock(&p->mu);
	while (j) {
		struct svc_job *next = j->next;
		struct tenant_jobs *t = tenant_slot(p, j->tenant, false);
		if (t)
			t->n--;
		p->queued--;
		j->done(s, j);
		j = next;
	}
}

void svc_workers_stop(struct ward_service *s)
{
	struct svc_pool *p = s->pool;
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	/* jobs no worker took: done() without run() (j->cancelled) */
	struct svc_job *left = p->todo;
	p->todo = NULL;
	p->todo_tail = &p->todo;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->n_th; i++)
		pthread_join(p->th[i], NULL);
	while (left) {
		struct svc_job *next = left->next;
		left->cancelled = true;
		pthread_mutex_lock(&p->mu);
		left->next = p->done;
		p->done = left;
		pthread_mutex_unlock(&p->mu);
		left = next;
	}
	if (p->efd >= 0)
		svc_workers_dispatch(s);
	if (p->efd >= 0) {
		epoll_ctl(s->epfd, EPOLL_CTL_DEL, p->efd, NULL);
		close(p->efd);
	}
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
	s->pool = NULL;
}
