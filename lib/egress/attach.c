/* lib/egress/attach.c — the egress proxy's threads: ward_egress_new/free,
 * attaching and detaching sandboxes, and the acceptor (one thread, one
 * epoll over every sandbox's listeners and DNS stub). The acceptor never
 * blocks: it accepts, checks the connection limits and hands each
 * connection to a thread of its own (proxy.c); DNS queries are answered
 * inline from the sandbox's table. Detach never waits on the network: it
 * shuts the sandbox's sockets down and the last thread to let go frees. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "egress/intercept.h"
#include "egress/internal.h"
#include "base/util.h"

enum {
	DEFAULT_MAX_CONNECTIONS = 1024,
	SANDBOX_DEFAULT_CONNECTIONS = 64,
	CONN_STACK = 256 * 1024,
	BURST = 64,               /* accepts or queries per wakeup, then others get a turn */
	FREE_WAIT_MS = 5000,      /* how long ward_egress_free waits for connection threads */
};

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static void wake(struct ward_egress *e)
{
	uint64_t one = 1;
	if (write(e->evfd, &one, sizeof(one)) < 0) {
		/* the counter is saturated: the acceptor is awake anyway */
	}
}

/* A refusal without a thread: reset (SO_LINGER 0) and close. */
static void reset_close(int fd)
{
	struct linger l = { .l_onoff = 1, .l_linger = 0 };
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

void egress_conn_end(struct egress_conn *c)
{
	struct ward_egress_sandbox *s = c->s;
	struct ward_egress *e = s->e;
	pthread_mutex_lock(&s->lock);
	for (struct egress_conn **p = &s->conns; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			s->n_conns--;
			break;
		}
	if (c->fd >= 0)
		close(c->fd);
	if (c->up >= 0)
		close(c->up);
	pthread_mutex_unlock(&s->lock);
	atomic_fetch_sub(&e->active, 1);
	free(c);
	egress_sandbox_put(s);
	egress_put(e);
}

/* The connection limits, under s->lock: NULL or the reason. */
static const char *over_limit(struct ward_egress_sandbox *s, char *buf, size_t len)
{
	struct ward_egress *e = s->e;
	uint64_t max = s->net->p.max_connections ? s->net->p.max_connections
		: SANDBOX_DEFAULT_CONNECTIONS;
	if (s->n_conns >= max) {
		snprintf(buf, len, "connection limit reached (%llu)", (unsigned long long)max);
		s->usage.limit = "connections";
		return buf;
	}
	if (atomic_load(&e->active) >= e->max_connections) {
		snprintf(buf, len, "connection limit reached (%u)", e->max_connections);
		return buf;
	}
	return NULL;
}

static void accept_one(struct ward_egress_sandbox *s, int lfd)
{
	struct ward_egress *e = s->e;
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return;
	struct egress_conn *c = calloc(1, sizeof(*c));
	if (!c) {
		reset_close(fd);
		return;
	}
	c->s = s;
	c->fd = fd;
	c->up = -1;
	char why[64];
	pthread_mutex_lock(&s->lock);
	const char *reason = atomic_load(&s->detached) ? "the sandbox is gone"
		: over_limit(s, why, sizeof(why));
	if (!reason) {
		c->next = s->conns;
		s->conns = c;
		s->n_conns++;
		atomic_fetch_add(&e->active, 1);
		atomic_fetch_add(&s->refs, 1);
		atomic_fetch_add(&e->refs, 1);
	}
	pthread_mutex_unlock(&s->lock);
	if (reason) {
		/* before the program sees the reset; a captured connection's
		 * destination is known without reading a byte */
		struct egress_addr a;
		uint16_t port = 0;
		char host[INET6_ADDRSTRLEN] = "";
		bool captured = egress_original_dst(fd, &a, &port) == 0;
		if (captured)
			egress_addr_str(&a, host, sizeof(host));
		egress_deny(s, host, port, host, captured ? "transparent" : "connect", reason);
		reset_close(fd);
		free(c);
		return;
	}
	pthread_attr_t attr;
	pthread_t t;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, CONN_STACK);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int rc = pthread_create(&t, &attr, egress_conn_main, c);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		struct linger l = { .l_onoff = 1, .l_linger = 0 };
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
		egress_conn_end(c);
	}
}

/* The stub's policy: a name any allow entry names (whatever its port),
 * unless a deny entry refuses it on every port. */
static bool dns_allowed(struct ward_egress_sandbox *s, const char *name)
{
	struct egress_addr a;
	if (egress_addr_literal(name, &a) != 0)
		return false;
	struct egress_net *n = egress_net_get(s);
	bool ok = false;
	for (size_t i = 0; i < n->p.n_allow && !ok; i++)
		ok = n->p.allow[i].kind != WARD_NET_RULE_CIDR
			&& egress_rule_match(&n->p.allow[i], name, NULL, 0);
	for (size_t i = 0; i < n->p.n_deny && ok; i++)
		if (n->p.deny[i].any_port && egress_rule_match(&n->p.deny[i], name, NULL, 0))
			ok = false;
	egress_net_put(n);
	return ok;
}

static void dns_serve(struct ward_egress_sandbox *s, int fd)
{
	for (int burst = 0; burst < BURST; burst++) {
		unsigned char buf[EGRESS_DNS_MAX + 1], out[EGRESS_DNS_MAX];
		struct sockaddr_storage from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
		if (n < 0)
			return;
		struct egress_dns_query q;
		if (egress_dns_parse_query(buf, (size_t)n, &q) < 0)
			continue;     /* not a query we answer: dropped */
		int rcode = 0;
		uint32_t addr = 0;
		if (!dns_allowed(s, q.name)) {
			rcode = 5;    /* REFUSED */
			/* resolvers retry and ask again per search domain: one
			 * record per name in a row, not one per packet */
			if (strcmp(s->dns_last, q.name) != 0) {
				ward_strlcpy(s->dns_last, q.name, sizeof(s->dns_last));
				egress_deny(s, q.name, 53, "", "dns", "not in the allowlist");
			}
		} else if (q.qtype == 1 && q.qclass == 1) {
			addr = egress_fake_assign(&s->fake, q.name);
			if (!addr)
				rcode = 2;   /* SERVFAIL: the table is full */
		}
		size_t len = egress_dns_reply(buf, &q, rcode, addr, out, sizeof(out));
		if (len)
			sendto(fd, out, len, MSG_DONTWAIT, (struct sockaddr *)&from, fl);
	}
}

/* Lets go of the detached sandboxes' listeners (all when stopping). */
static void unregister(struct ward_egress *e, bool all)
{
	struct ward_egress_sandbox *gone = NULL;
	pthread_mutex_lock(&e->lock);
	for (struct ward_egress_sandbox **p = &e->sandboxes; *p;) {
		struct ward_egress_sandbox *s = *p;
		if (!all && !atomic_load(&s->detached)) {
			p = &s->next;
			continue;
		}
		*p = s->next;
		for (int k = 0; k < 3; k++)
			if (s->fds[k] >= 0) {
				epoll_ctl(e->epfd, EPOLL_CTL_DEL, s->fds[k], NULL);
				close(s->fds[k]);
				s->fds[k] = -1;
			}
		s->unregistered = true;
		atomic_fetch_sub(&e->n_sandboxes, 1);
		s->next = gone;
		gone = s;
	}
	pthread_mutex_unlock(&e->lock);
	while (gone) {
		struct ward_egress_sandbox *s = gone;
		gone = s->next;
		egress_sandbox_put(s);
	}
}

static void *acceptor_main(void *arg)
{
	struct ward_egress *e = arg;
	while (!atomic_load(&e->stop)) {
		struct epoll_event ev[32];
		int n = epoll_wait(e->epfd, ev, 32, -1);
		bool sweep = false;
		for (int i = 0; i < n; i++) {
			struct egress_listener *l = ev[i].data.ptr;
			if (!l) {
				uint64_t v;
				if (read(e->evfd, &v, sizeof(v)) < 0) {
					/* nothing to read: another wakeup took it */
				}
				sweep = true;
				continue;
			}
			/* a detached sandbox is still valid memory until the sweep */
			if (atomic_load(&l->s->detached)) {
				sweep = true;
				continue;
			}
			if (l->kind == EGRESS_DNS4)
				dns_serve(l->s, l->s->fds[EGRESS_DNS4]);
			else
				for (int b = 0; b < BURST && !atomic_load(&l->s->detached); b++) {
					uint64_t before = atomic_load(&e->active);
					accept_one(l->s, l->s->fds[l->kind]);
					if (atomic_load(&e->active) == before)
						break;
				}
		}
		if (sweep)
			unregister(e, false);
	}
	unregister(e, true);
	return NULL;
}

static int parse_config(struct ward_egress *e, const struct ward_egress_config *cfg,
			struct ward_error *err)
{
	e->resolve = calloc(cfg->n_resolve + 1, sizeof(*e->resolve));
	e->allow_private = calloc(cfg->n_allow_private + 1, sizeof(*e->allow_private));
	if (!e->resolve || !e->allow_private)
		return ward_error_set(err, ENOMEM, "egress", "out of memory");
	for (size_t i = 0; i < cfg->n_resolve; i++) {
		const char *eq = strchr(cfg->resolve[i], '=');
		struct egress_override *o = &e->resolve[i];
		struct egress_cidr c;
		if (!eq || eq == cfg->resolve[i] || egress_cidr_parse(eq + 1, &c) < 0
		    || c.prefix != (c.net.family == AF_INET ? 32u : 128u))
			return ward_error_set(err, EINVAL, "egress",
				"resolve '%s': expected NAME=ADDR (an IPv4 or IPv6 address)",
				cfg->resolve[i]);
		if (!(o->name = strndup(cfg->resolve[i], (size_t)(eq - cfg->resolve[i]))))
			return ward_error_set(err, ENOMEM, "egress", "out of memory");
		for (char *p = o->name; *p; p++)
			if (*p >= 'A' && *p <= 'Z')
				*p = (char)(*p + 32);
		o->addr = c.net;
		e->n_resolve++;
	}
	for (size_t i = 0; i < cfg->n_allow_private; i++) {
		if (egress_cidr_parse(cfg->allow_private[i], &e->allow_private[i]) < 0)
			return ward_error_set(err, EINVAL, "egress",
				"allow_private '%s': expected a CIDR like \"10.0.0.0/8\" or an address",
				cfg->allow_private[i]);
		e->n_allow_private++;
	}
	size_t csv_len = 1;
	for (size_t i = 0; i < cfg->n_dns_servers; i++) {
		const char *d = cfg->dns_servers[i];
		if (!*d || strpbrk(d, ", \t"))
			return ward_error_set(err, EINVAL, "egress",
				"dns '%s': expected ADDR or ADDR:PORT", d);
		csv_len += strlen(d) + 1;
	}
	if (cfg->n_dns_servers) {
		if (!(e->dns_csv = calloc(1, csv_len)))
			return ward_error_set(err, ENOMEM, "egress", "out of memory");
		for (size_t i = 0; i < cfg->n_dns_servers; i++) {
			if (i)
				ward_strlcat(e->dns_csv, ",", csv_len);
			ward_strlcat(e->dns_csv, cfg->dns_servers[i], csv_len);
		}
	}
	if (cfg->ca_file && access(cfg->ca_file, R_OK) < 0)
		return ward_error_set(err, errno, "egress", "ca file '%s' is not readable",
				      cfg->ca_file);
	if ((cfg->ca_file && !(e->ca_file = strdup(cfg->ca_file)))
	    || (cfg->state_dir && !(e->state_dir = strdup(cfg->state_dir)))
	    || ward_egress_credentials_copy(cfg->credentials, cfg->n_credentials, &e->creds) < 0)
		return ward_error_set(err, ENOMEM, "egress", "out of memory");
	e->n_creds = cfg->n_credentials;
	e->max_connections = cfg->max_connections ? cfg->max_connections : DEFAULT_MAX_CONNECTIONS;
	e->on_event = cfg->on_event;
	e->ctx = cfg->ctx;
	return 0;
}

int ward_egress_new(const struct ward_egress_config *cfg, struct ward_egress **out,
		    struct ward_error *err)
{
	*out = NULL;
	struct ward_egress *e = calloc(1, sizeof(*e));
	if (!e)
		return ward_error_set(err, ENOMEM, "egress", "out of memory");
	atomic_init(&e->refs, 1);
	e->epfd = e->evfd = -1;
	pthread_mutex_init(&e->lock, NULL);
	int rc = parse_config(e, cfg, err);
	/* The CA exists before the first sandbox is planned: a sandbox learns
	 * the bundle to trust (ward_egress_ca_bundle) before it is attached
	 * with its own rules. With the operator's rules it must exist; with a
	 * state directory only, a failure waits for the first rule to matter. */
	if (rc == 0 && e->n_creds && !EGRESS_HAVE_TLS) {
		rc = ward_error_set(err, ENOTSUP, "egress", "credential rules need TLS interception, "
				    "which this program is built without (ward serve has it)");
	} else if (rc == 0 && (e->n_creds || e->state_dir) && EGRESS_HAVE_TLS) {
		struct ward_error terr;
		ward_error_clear(&terr);
		if (egress_tls_new(e->state_dir, e->ca_file, &e->tls, &terr) < 0) {
			e->tls = NULL;
			if (e->n_creds) {
				*err = terr;
				rc = -(terr.code ? terr.code : EIO);
			}
		}
	}
	if (rc == 0) {
		e->epfd = epoll_create1(EPOLL_CLOEXEC);
		e->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
		if (e->epfd < 0 || e->evfd < 0 || epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->evfd, &ev) < 0)
			rc = ward_error_set(err, errno, "egress", "unable to create the proxy's epoll");
	}
	if (rc == 0 && (rc = -pthread_create(&e->acceptor, NULL, acceptor_main, e)) < 0)
		ward_error_set(err, -rc, "egress", "unable to start the proxy's thread");
	if (rc < 0) {
		egress_put(e);
		return rc;
	}
	*out = e;
	return 0;
}

static void detach(struct ward_egress_sandbox *s)
{
	struct ward_egress *e = s->e;
	pthread_mutex_lock(&e->lock);
	bool first = !s->released;
	s->released = true;
	pthread_mutex_unlock(&e->lock);
	if (!first)
		return;
	atomic_store(&s->detached, true);
	pthread_mutex_lock(&s->lock);
	/* blocked connection threads wake up on a shut-down socket; their
	 * fds stay open (and theirs) until egress_conn_end */
	for (struct egress_conn *c = s->conns; c; c = c->next) {
		shutdown(c->fd, SHUT_RDWR);
		if (c->up >= 0)
			shutdown(c->up, SHUT_RDWR);
	}
	pthread_mutex_unlock(&s->lock);
	wake(e);
	egress_sandbox_put(s);
}

void ward_egress_detach(struct ward_egress_sandbox *s)
{
	if (s)
		detach(s);
}

void ward_egress_free(struct ward_egress *e)
{
	if (!e)
		return;
	for (;;) {
		struct ward_egress_sandbox *s = NULL;
		pthread_mutex_lock(&e->lock);
		for (struct ward_egress_sandbox *p = e->sandboxes; p && !s; p = p->next)
			if (!p->released)
				s = p;
		pthread_mutex_unlock(&e->lock);
		if (!s)
			break;
		detach(s);
	}
	atomic_store(&e->stop, true);
	wake(e);
	pthread_join(e->acceptor, NULL);
	/* connection threads hold references: the last one frees */
	for (int waited = 0; atomic_load(&e->active) && waited < FREE_WAIT_MS; waited += 10)
		sleep_ms(10);
	egress_put(e);
}

static int sandbox_new(struct ward_egress *e, const char *id, const char *tenant,
		       const struct ward_net_policy *net, const struct ward_egress_credential *creds,
		       size_t n_creds, struct ward_egress_sandbox **out)
{
	struct ward_egress_sandbox *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	atomic_init(&s->refs, 1);
	s->e = e;
	atomic_fetch_add(&e->refs, 1);
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->fake.lock, NULL);
	for (int k = 0; k < 3; k++) {
		s->fds[k] = -1;
		s->lst[k].s = s;
		s->lst[k].kind = k;
	}
	s->id = strdup(id ? id : "");
	s->tenant = strdup(tenant ? tenant : "");
	s->net = egress_net_new(net);
	*out = s;
	if (!s->id || !s->tenant || !s->net || ward_egress_credentials_copy(creds, n_creds, &s->creds) < 0)
		return -ENOMEM;
	s->n_creds = n_creds;
	s->usage.present = true;
	return 0;
}

int ward_egress_attach(struct ward_egress *e, const char *sandbox_id, const char *tenant,
		       const struct ward_net_policy *net,
		       const struct ward_egress_credential *creds, size_t n_creds,
		       struct ward_egress_fds *fds, struct ward_egress_sandbox **out,
		       struct ward_error *err)
{
	int in[3] = { fds->tcp4, fds->tcp6, fds->dns4 };
	fds->tcp4 = fds->tcp6 = fds->dns4 = -1;
	*out = NULL;
	struct ward_egress_sandbox *s = NULL;
	int rc = sandbox_new(e, sandbox_id, tenant, net, creds, n_creds, &s);
	if (rc < 0) {
		ward_error_set(err, -rc, "egress", "out of memory");
		goto fail;
	}
	const char *why = NULL;
	if (n_creds && !egress_tls_get(e, &why)) {
		rc = ward_error_set(err, EIO, "egress", "%s", why);
		goto fail;
	}
	atomic_fetch_add(&s->refs, 1);     /* the acceptor's */
	pthread_mutex_lock(&e->lock);
	for (int k = 0; k < 3; k++) {
		s->fds[k] = in[k];
		in[k] = -1;
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &s->lst[k] };
		/* the acceptor must never block in accept or recvfrom */
		if (s->fds[k] >= 0 && fcntl(s->fds[k], F_SETFL, fcntl(s->fds[k], F_GETFL) | O_NONBLOCK) < 0
		    && rc == 0)
			rc = ward_error_set(err, errno, "egress", "unable to make the sandbox's listener non-blocking");
		if (s->fds[k] >= 0 && epoll_ctl(e->epfd, EPOLL_CTL_ADD, s->fds[k], &ev) < 0 && rc == 0)
			rc = ward_error_set(err, errno, "egress", "unable to watch the sandbox's listener");
	}
	s->next = e->sandboxes;
	e->sandboxes = s;
	atomic_fetch_add(&e->n_sandboxes, 1);
	pthread_mutex_unlock(&e->lock);
	if (rc < 0) {
		detach(s);
		return rc;
	}
	*out = s;
	return 0;
fail:
	for (int k = 0; k < 3; k++)
		if (in[k] >= 0)
			close(in[k]);
	egress_sandbox_put(s);
	return rc;
}

int ward_egress_update(struct ward_egress_sandbox *s, const struct ward_net_policy *net,
		       struct ward_error *err)
{
	struct egress_net *n = egress_net_new(net);
	if (!n)
		return ward_error_set(err, ENOMEM, "egress", "out of memory");
	pthread_mutex_lock(&s->lock);
	struct egress_net *old = s->net;
	s->net = n;
	pthread_mutex_unlock(&s->lock);
	egress_net_put(old);
	return 0;
}

void ward_egress_usage(struct ward_egress_sandbox *s, struct ward_net_usage *u)
{
	pthread_mutex_lock(&s->lock);
	*u = s->usage;
	pthread_mutex_unlock(&s->lock);
	u->present = true;
}

int ward_egress_last_denial(struct ward_egress_sandbox *s, struct ward_net_denial *d)
{
	pthread_mutex_lock(&s->lock);
	bool has = s->has_last;
	if (has)
		*d = s->last;
	pthread_mutex_unlock(&s->lock);
	return has ? 0 : -ENOENT;
}
