/* lib/egress/egress.c — the egress proxy's engine: its settings, the
 * attached sandboxes, the acceptor thread (every sandbox's listeners and
 * DNS stub, one epoll), counters and events. Each accepted connection runs
 * on its own thread (proxy.c). Nothing here runs on the caller's loop: the
 * public calls only take short locks. Bounds: a sandbox's connections
 * (policy network.max_connections), all connections (config
 * max_connections), a sandbox's fake names (EGRESS_FAKE_MAX), its denied
 * list (WARD_NET_DENIED_MAX). */
#include <arpa/inet.h>
#include <errno.h>
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


/* Rules ------------------------------------------------------------------ */

/* ward_net_rule_match, where port 0 means "on any port the rule names"
 * (the DNS stub's question, the "wrong port" hint). */
bool egress_rule_match(const struct ward_net_rule *r, const char *name,
		       const struct egress_addr *a, uint16_t port)
{
	if (port == 0)
		port = r->any_port ? 1 : r->port ? r->port : 80;
	return ward_net_rule_match(r, name, a ? a->family : 0, a ? a->a : NULL, port);
}

static void rules_free(struct ward_net_rule *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(r[i].host);
	free(r);
}

static int rules_copy(const struct ward_net_rule *src, size_t n, struct ward_net_rule **out)
{
	*out = NULL;
	if (n == 0)
		return 0;
	struct ward_net_rule *r = calloc(n, sizeof(*r));
	if (!r)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		r[i] = src[i];
		if (src[i].host && !(r[i].host = strdup(src[i].host))) {
			rules_free(r, i);
			return -ENOMEM;
		}
	}
	*out = r;
	return 0;
}

struct egress_net *egress_net_new(const struct ward_net_policy *p)
{
	struct egress_net *n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	atomic_init(&n->refs, 1);
	n->p = *p;
	n->p.allow = n->p.deny = NULL;
	if (rules_copy(p->allow, p->n_allow, &n->p.allow) < 0
	    || rules_copy(p->deny, p->n_deny, &n->p.deny) < 0) {
		rules_free(n->p.allow, p->n_allow);
		free(n);
		return NULL;
	}
	return n;
}

void egress_net_put(struct egress_net *n)
{
	if (n && atomic_fetch_sub(&n->refs, 1) == 1) {
		rules_free(n->p.allow, n->p.n_allow);
		rules_free(n->p.deny, n->p.n_deny);
		free(n);
	}
}

struct egress_net *egress_net_get(struct ward_egress_sandbox *s)
{
	pthread_mutex_lock(&s->lock);
	struct egress_net *n = s->net;
	atomic_fetch_add(&n->refs, 1);
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* Credentials -------------------------------------------------------------- */

WARD_EXPORT void ward_egress_credentials_free(struct ward_egress_credential *c, size_t n)
{
	for (size_t i = 0; c && i < n; i++) {
		free(c[i].name);
		free(c[i].host);
		free(c[i].path_prefix);
		for (size_t j = 0; c[i].headers && j < c[i].n_headers; j++) {
			if (c[i].headers[j])   /* the secret does not outlive its rule */
				explicit_bzero(c[i].headers[j], strlen(c[i].headers[j]));
			free(c[i].headers[j]);
		}
		free(c[i].headers);
	}
	free(c);
}

WARD_EXPORT int ward_egress_credentials_copy(const struct ward_egress_credential *src, size_t n,
					     struct ward_egress_credential **out)
{
	*out = NULL;
	if (n == 0)
		return 0;
	struct ward_egress_credential *c = calloc(n, sizeof(*c));
	if (!c)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		c[i].name = strdup(src[i].name ? src[i].name : "");
		c[i].host = strdup(src[i].host ? src[i].host : "");
		c[i].path_prefix = src[i].path_prefix ? strdup(src[i].path_prefix) : NULL;
		c[i].headers = calloc(src[i].n_headers + 1, sizeof(char *));
		bool ok = c[i].name && c[i].host && c[i].headers
			&& (!src[i].path_prefix || c[i].path_prefix);
		for (size_t j = 0; ok && j < src[i].n_headers; j++) {
			ok = (c[i].headers[j] = strdup(src[i].headers[j])) != NULL;
			c[i].n_headers = j + 1;
		}
		if (!ok) {
			ward_egress_credentials_free(c, i + 1);
			return -ENOMEM;
		}
	}
	*out = c;
	return 0;
}

/* Counters and events ------------------------------------------------------- */

static void note_denial(struct ward_egress_sandbox *s, const char *host, uint16_t port,
			const char *reason)
{
	struct ward_net_denial d = { .port = port };
	ward_strlcpy(d.host, host, sizeof(d.host));
	ward_strlcpy(d.reason, reason, sizeof(d.reason));
	pthread_mutex_lock(&s->lock);
	if (s->usage.n_denied < WARD_NET_DENIED_MAX)
		s->usage.denied[s->usage.n_denied++] = d;
	s->usage.denied_total++;
	s->last = d;
	s->has_last = true;
	pthread_mutex_unlock(&s->lock);
}

static void emit(struct ward_egress_sandbox *s, const struct ward_egress_event *ev)
{
	if (s->e->on_event)
		s->e->on_event(s->e->ctx, ev);
}

void egress_deny(struct ward_egress_sandbox *s, const char *host, uint16_t port,
		 const char *addr, const char *via, const char *reason)
{
	note_denial(s, host, port, reason);
	atomic_fetch_add(&s->e->denied, 1);
	struct ward_egress_event ev = {
		.sandbox_id = s->id, .tenant = s->tenant, .host = host, .port = port,
		.addr = addr ? addr : "", .via = via, .allowed = false, .reason = reason,
		.credential = "", .end = false,
	};
	emit(s, &ev);
}

void egress_finish(struct ward_egress_sandbox *s, const char *host, uint16_t port,
		   const char *addr, const char *via, const char *credential,
		   const char *reason, uint64_t out, uint64_t in)
{
	if (reason && *reason)
		note_denial(s, host, port, reason);
	struct ward_egress_event ev = {
		.sandbox_id = s->id, .tenant = s->tenant, .host = host, .port = port,
		.addr = addr ? addr : "", .via = via, .allowed = true,
		.reason = reason ? reason : "", .credential = credential ? credential : "",
		.end = true, .bytes_out = out, .bytes_in = in,
	};
	emit(s, &ev);
}

int egress_count(struct ward_egress_sandbox *s, bool out, size_t n, char *why, size_t why_len)
{
	if (atomic_load(&s->detached)) {
		ward_strlcpy(why, "the sandbox is gone", why_len);
		return -ECONNABORTED;
	}
	int rc = 0;
	pthread_mutex_lock(&s->lock);
	uint64_t *used = out ? &s->usage.bytes_out : &s->usage.bytes_in;
	uint64_t max = out ? s->net->p.max_bytes_out : s->net->p.max_bytes_in;
	if (max && *used + n > max) {
		const char *what = out ? "bytes_out" : "bytes_in";
		s->usage.limit = what;
		*(out ? &s->hit_out : &s->hit_in) = true;
		snprintf(why, why_len, "%s limit reached (%llu)", what, (unsigned long long)max);
		rc = -EDQUOT;
	} else {
		*used += n;
	}
	pthread_mutex_unlock(&s->lock);
	if (rc == 0)
		atomic_fetch_add(out ? &s->e->bytes_out : &s->e->bytes_in, n);
	return rc;
}

/* The engine's lifetime ------------------------------------------------------ */

void egress_put(struct ward_egress *e)
{
	if (!e || atomic_fetch_sub(&e->refs, 1) != 1)
		return;
	for (size_t i = 0; i < e->n_resolve; i++)
		free(e->resolve[i].name);
	free(e->resolve);
	free(e->allow_private);
	free(e->dns_csv);
	free(e->ca_file);
	free(e->state_dir);
	ward_egress_credentials_free(e->creds, e->n_creds);
	if (e->tls)
		egress_tls_free(e->tls);
	if (e->epfd >= 0)
		close(e->epfd);
	if (e->evfd >= 0)
		close(e->evfd);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

void egress_sandbox_put(struct ward_egress_sandbox *s)
{
	if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	struct ward_egress *e = s->e;
	egress_net_put(s->net);
	ward_egress_credentials_free(s->creds, s->n_creds);
	egress_fake_release(&s->fake);
	pthread_mutex_destroy(&s->lock);
	free(s->id);
	free(s->tenant);
	free(s);
	egress_put(e);
}

struct egress_tls *egress_tls_get(struct ward_egress *e, const char **why)
{
	if (!EGRESS_HAVE_TLS) {
		*why = "TLS interception is not built into this program";
		return NULL;
	}
	pthread_mutex_lock(&e->lock);
	if (!e->tls) {
		struct ward_error err;
		if (egress_tls_new(e->state_dir, e->ca_file, &e->tls, &err) < 0)
			e->tls = NULL;
	}
	struct egress_tls *t = e->tls;
	pthread_mutex_unlock(&e->lock);
	if (!t)
		*why = "the interception CA is unavailable";
	return t;
}

const char *ward_egress_ca_bundle(struct ward_egress *e)
{
	pthread_mutex_lock(&e->lock);
	const char *b = e->tls ? egress_tls_bundle(e->tls) : NULL;
	pthread_mutex_unlock(&e->lock);
	return b;
}

void ward_egress_stats(struct ward_egress *e, struct ward_egress_stats *st)
{
	st->connections = atomic_load(&e->connections);
	st->denied = atomic_load(&e->denied);
	st->active = atomic_load(&e->active);
	st->bytes_out = atomic_load(&e->bytes_out);
	st->bytes_in = atomic_load(&e->bytes_in);
	st->sandboxes = atomic_load(&e->n_sandboxes);
}

