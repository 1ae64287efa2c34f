/* lib/service/egress.c — the core's egress proxy: started with the core
 * (or borrowed from an embedded core's program), its events brought to the
 * loop for the audit log and /metrics.
 *
 * The proxy decides on its own threads (ward/egress.h) and calls
 * egress_event there. That callback only copies the event into a bounded
 * ring and wakes the loop through an eventfd; the loop writes the audit
 * records. A full ring (a sandbox opening connections faster than the
 * loop runs) drops the newest events and counts them: memory stays bounded
 * and the proxy never waits on the loop.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <sodium.h>

#include "base/util.h"
#include "internal.h"
#include "ward/egress.h"

enum { RING = 1024 };

struct ev_copy {
	char sandbox_id[40];
	char tenant[WARD_KEY_TENANT_MAX + 1];
	char host[256];
	char addr[64];
	char via[16];
	char reason[160];
	char credential[72];
	uint16_t port;
	bool allowed;
	bool end;
	uint64_t bytes_out, bytes_in;
};

struct svc_egress {
	struct ward_egress *e;
	bool owned;
	int efd;
	struct watch w;
	pthread_mutex_t lock;
	struct ev_copy ring[RING];
	size_t head, n;         /* under lock */
	uint64_t dropped;       /* under lock */
};

/* On a proxy thread: copy, never block on the loop. */
static void egress_event(void *ctx, const struct ward_egress_event *ev)
{
	struct svc_egress *g = ctx;
	pthread_mutex_lock(&g->lock);
	if (g->n == RING) {
		g->dropped++;
		pthread_mutex_unlock(&g->lock);
		return;
	}
	struct ev_copy *c = &g->ring[(g->head + g->n) % RING];
	g->n++;
	ward_strlcpy(c->sandbox_id, ev->sandbox_id, sizeof(c->sandbox_id));
	ward_strlcpy(c->tenant, ev->tenant, sizeof(c->tenant));
	ward_strlcpy(c->host, ev->host, sizeof(c->host));
	ward_strlcpy(c->addr, ev->addr, sizeof(c->addr));
	ward_strlcpy(c->via, ev->via, sizeof(c->via));
	ward_strlcpy(c->reason, ev->reason, sizeof(c->reason));
	ward_strlcpy(c->credential, ev->credential, sizeof(c->credential));
	c->port = ev->port;
	c->allowed = ev->allowed;
	c->end = ev->end;
	c->bytes_out = ev->bytes_out;
	c->bytes_in = ev->bytes_in;
	pthread_mutex_unlock(&g->lock);
	uint64_t one = 1;
	ssize_t w = write(g->efd, &one, sizeof(one));
	(void)w; /* EAGAIN: the counter is already nonzero, the loop will look */
}

static void audit_one(struct ward_service *s, const struct ev_copy *c)
{
	json_t *f = json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:s, s:I, s:I}", "sandbox_id",
			      c->sandbox_id, "tenant", c->tenant, "host", c->host, "port",
			      (int)c->port, "address", c->addr, "via", c->via, "decision",
			      c->allowed ? "allowed" : "denied", "bytes_out",
			      (json_int_t)c->bytes_out, "bytes_in", (json_int_t)c->bytes_in);
	if (f && !c->allowed)
		json_object_set_new(f, "reason", json_string(c->reason));
	if (f && c->credential[0])
		json_object_set_new(f, "credential", json_string(c->credential));
	if (f)
		svc_audit(s, c->allowed ? "egress.connection" : "egress.denied", f);
	json_decref(f);
}

void svc_egress_dispatch(struct ward_service *s)
{
	struct svc_egress *g = s->egress;
	uint64_t v;
	if (!g || read(g->efd, &v, sizeof(v)) < 0)
		return;
	for (;;) {
		struct ev_copy c;
		uint64_t dropped;
		pthread_mutex_lock(&g->lock);
		if (!g->n) {
			pthread_mutex_unlock(&g->lock);
			break;
		}
		c = g->ring[g->head];
		g->head = (g->head + 1) % RING;
		g->n--;
		dropped = g->dropped;
		g->dropped = 0;
		pthread_mutex_unlock(&g->lock);
		if (dropped) {
			s->m.egress_events_dropped += dropped;
			json_t *f = json_pack("{s:I}", "dropped", (json_int_t)dropped);
			svc_audit(s, "egress.dropped", f);
			json_decref(f);
		}
		audit_one(s, &c);
	}
}

int svc_egress_start(struct ward_service *s)
{
	struct svc_egress *g = calloc(1, sizeof(*g));
	if (!g)
		return -1;
	pthread_mutex_init(&g->lock, NULL);
	g->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	g->w = (struct watch){ .kind = WATCH_EGRESS, .ptr = g };
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &g->w };
	if (g->efd < 0 || epoll_ctl(s->epfd, EPOLL_CTL_ADD, g->efd, &ev) < 0) {
		fprintf(stderr, "ward: serve: egress: %s\n", strerror(errno));
		goto fail;
	}
	s->egress = g;
	if (s->cfg.egress) {
		g->e = s->cfg.egress;
		return 0;
	}
	const struct ward_service_config *c = &s->cfg;
	struct ward_egress_config ec = {
		.resolve = c->egress_resolve, .n_resolve = c->n_egress_resolve,
		.allow_private = c->egress_allow_private,
		.n_allow_private = c->n_egress_allow_private,
		.dns_servers = c->egress_dns, .n_dns_servers = c->n_egress_dns,
		.ca_file = c->egress_ca, .state_dir = c->state_dir,
		.credentials = c->egress_credentials, .n_credentials = c->n_egress_credentials,
		.on_event = egress_event, .ctx = g,
	};
	struct ward_error err;
	ward_error_clear(&err);
	if (ward_egress_new(&ec, &g->e, &err) < 0) {
		char buf[1024];
		fprintf(stderr, "ward: error: serve: %s\n", ward_error_format(&err, buf, sizeof(buf)));
		s->egress = NULL;
		goto fail;
	}
	g->owned = true;
	return 0;
fail:
	if (g->efd >= 0)
		close(g->efd);
	pthread_mutex_destroy(&g->lock);
	free(g);
	return -1;
}

/* After every sandbox is gone (they hold attachments). */
void svc_egress_stop(struct ward_service *s)
{
	struct svc_egress *g = s->egress;
	if (!g)
		return;
	if (g->owned)
		ward_egress_free(g->e);
	svc_egress_dispatch(s); /* what the last connections reported */
	close(g->efd);
	pthread_mutex_destroy(&g->lock);
	free(g);
	s->egress = NULL;
}

struct ward_egress *svc_egress(struct ward_service *s)
{
	return s->egress ? s->egress->e : NULL;
}

void svc_egress_stats(struct ward_service *s, struct ward_egress_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (s->egress && s->egress->e)
		ward_egress_stats(s->egress->e, st);
}

/* --- credential rules in a request or a config file --- */

static bool cred_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 64)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_' ||
		      *s == '.' || *s == '-'))
			return false;
	return true;
}

static bool header_name_ok(const char *s)
{
	if (!*s || strlen(s) > 64)
		return false;
	for (; *s; s++)
		if (!(*s > 32 && *s < 127) || strchr("()<>@,;:\\\"/[]?={}", *s))
			return false;
	return true;
}

static bool header_value_ok(json_t *v)
{
	const char *s = json_string_value(v);
	size_t n = json_string_length(v);
	if (n > 4096 || strlen(s) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] == '\r' || s[i] == '\n' || s[i] == '\0' || (unsigned char)s[i] == 0x7f)
			return false;
	return true;
}

void ward_egress_credentials_free(struct ward_egress_credential *c, size_t n)
{
	for (size_t i = 0; c && i < n; i++) {
		free(c[i].name);
		free(c[i].host);
		free(c[i].path_prefix);
		for (size_t j = 0; j < c[i].n_headers; j++) {
			sodium_memzero(c[i].headers[j], strlen(c[i].headers[j]));
			free(c[i].headers[j]);
		}
		free(c[i].headers);
	}
	free(c);
}

/* Never puts a header's value into a message: the rule's name and the
 * header's name are enough to find the mistake. */
int ward_egress_credentials_from_json(json_t *v, const char *field,
				      struct ward_egress_credential **out, size_t *n_out,
				      struct ward_error *err)
{
	*out = NULL;
	*n_out = 0;
	if (!json_is_array(v))
		return ward_error_set(err, 0, "", "%s: expected an array of rules", field);
	size_t n = json_array_size(v);
	if (n > 32)
		return ward_error_set(err, 0, "", "%s: at most 32 rules", field);
	struct ward_egress_credential *c = calloc(n ? n : 1, sizeof(*c));
	if (!c)
		return ward_error_set(err, ENOMEM, "", "out of memory");
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_array_get(v, i), *hv;
		const char *key;
		if (!json_is_object(o)) {
			ward_error_set(err, 0, "", "%s[%zu]: expected an object", field, i);
			goto fail;
		}
		json_object_foreach(o, key, hv)
			if (strcmp(key, "name") && strcmp(key, "host") && strcmp(key, "path_prefix") &&
			    strcmp(key, "headers")) {
				ward_error_set(err, 0, "", "%s[%zu].%.64s: unknown field; known "
						"fields: name, host, path_prefix, headers", field, i, key);
				goto fail;
			}
		const char *name = json_string_value(json_object_get(o, "name"));
		const char *host = json_string_value(json_object_get(o, "host"));
		json_t *pp = json_object_get(o, "path_prefix"), *hs = json_object_get(o, "headers");
		if (!name || !cred_name_ok(name)) {
			ward_error_set(err, 0, "", "%s[%zu].name: expected [a-z0-9_.-]{1,64}",
					field, i);
			goto fail;
		}
		struct ward_net_rule rule;
		struct ward_error rerr;
		char f[96];
		snprintf(f, sizeof(f), "%s[%zu].host", field, i);
		if (!host || ward_net_rule_parse(host, &rule, f, &rerr) < 0 ||
		    rule.kind == WARD_NET_RULE_CIDR || rule.port || rule.any_port) {
			if (host && rule.kind != WARD_NET_RULE_CIDR)
				free(rule.host);
			ward_error_set(err, 0, "", "%s: expected a host name or *.domain, "
					"without a port", f);
			goto fail;
		}
		c[i].host = rule.host;
		if (pp && (!json_is_string(pp) || json_string_value(pp)[0] != '/' ||
			   strlen(json_string_value(pp)) != json_string_length(pp) ||
			   json_string_length(pp) > 1024)) {
			ward_error_set(err, 0, "", "%s[%zu].path_prefix: expected a path "
					"starting with '/'", field, i);
			goto fail;
		}
		if (!json_is_object(hs) || json_object_size(hs) == 0 || json_object_size(hs) > 16) {
			ward_error_set(err, 0, "", "%s[%zu].headers: expected an object of 1 "
					"to 16 headers {\"Name\": \"value\"}", field, i);
			goto fail;
		}
		c[i].name = strdup(name);
		c[i].path_prefix = pp ? strdup(json_string_value(pp)) : NULL;
		c[i].headers = calloc(json_object_size(hs), sizeof(char *));
		if (!c[i].name || (pp && !c[i].path_prefix) || !c[i].headers) {
			ward_error_set(err, ENOMEM, "", "out of memory");
			goto fail;
		}
		json_object_foreach(hs, key, hv) {
			if (!header_name_ok(key) || !json_is_string(hv) || !header_value_ok(hv)) {
				ward_error_set(err, 0, "", "%s[%zu].headers.%.64s: expected a "
						"header name (a token) and a string value without CR, "
						"LF or NUL", field, i, key);
				goto fail;
			}
			size_t len = strlen(key) + 2 + json_string_length(hv) + 1;
			char *h = malloc(len);
			if (!h) {
				ward_error_set(err, ENOMEM, "", "out of memory");
				goto fail;
			}
			snprintf(h, len, "%s: %s", key, json_string_value(hv));
			c[i].headers[c[i].n_headers++] = h;
		}
	}
	*out = c;
	*n_out = n;
	return 0;
fail:
	ward_egress_credentials_free(c, n);
	return err->code == ENOMEM ? -ENOMEM : -EINVAL;
}

int svc_parse_credentials(const struct ward_key_info *key, json_t *v,
			  struct ward_egress_credential **out, size_t *n,
			  struct ward_service_error *e)
{
	*out = NULL;
	*n = 0;
	if (!v || json_is_null(v))
		return 0;
	if (!(key->scopes & WARD_SCOPE_CREDENTIALS))
		return ward_service_fail(e, 403, "forbidden", "credentials",
					 "attaching credentials needs a key with the scope "
					 "'credentials'");
	struct ward_error err;
	ward_error_clear(&err);
	int rc = ward_egress_credentials_from_json(v, "credentials", out, n, &err);
	if (rc == -ENOMEM)
		return ward_service_fail(e, 500, "internal", NULL, "out of memory");
	if (rc < 0)
		return ward_service_fail(e, 400, "invalid_request", "credentials", "%s",
					 err.message);
	return 0;
}
