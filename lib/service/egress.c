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

enum { RING = 1024, TURN = 64 };

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
	/* A sandbox may refuse-loop thousands of connections a second: each
	 * turn writes at most TURN lines (each may fdatasync) and leaves the
	 * rest for the next, so the loop keeps serving everyone else; what the
	 * ring cannot hold meanwhile is dropped and counted. */
	for (unsigned done = 0;; done++) {
		if (done == TURN) {
			uint64_t one = 1;
			ssize_t w = write(g->efd, &one, sizeof(one));
			(void)w; /* EAGAIN: already signalled */
			break;
		}
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

enum { CRED_MAX = 32, CRED_HEADERS_MAX = 16, CRED_NAME_MAX = 64,
       CRED_PATH_MAX = 1024, HEADER_NAME_MAX = 128, HEADER_VALUE_MAX = 8192 };

static bool cred_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > CRED_NAME_MAX)
		return false;
	for (const char *c = s; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || strchr("_.-", *c)))
			return false;
	return true;
}

/* RFC 9110 token */
static bool header_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > HEADER_NAME_MAX)
		return false;
	for (const char *c = s; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || strchr("!#$%&'*+-.^_`|~", *c)))
			return false;
	return true;
}

static bool path_prefix_ok(const char *s)
{
	size_t n = strlen(s);
	if (s[0] != '/' || n > CRED_PATH_MAX)
		return false;
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
			return false;
	return true;
}

/* A host as a rule names one: "api.example.com" or "*.example.com". */
static int cred_host(const char *v, const char *where, struct ward_error *err)
{
	struct ward_error perr;
	struct ward_net_rule r;
	int rc = ward_net_rule_parse(v, &r, where, &perr);
	bool ok = rc == 0 && r.kind != WARD_NET_RULE_CIDR && !r.port && !r.any_port;
	free(r.host);
	if (rc < 0)
		ward_error_set(err, 0, "", "%s", perr.message);
	else if (!ok)
		ward_error_set(err, 0, "", "%s: expected a host name or *.domain, without a port, got '%s'",
			where, v);
	return rc < 0 || !ok ? -1 : 0;
}

static int cred_headers(struct ward_egress_credential *r, json_t *h, const char *where,
			struct ward_error *err)
{
	const char *name;
	json_t *v;
	char sub[4600];
	if (!json_is_object(h) || json_object_size(h) == 0 ||
	    json_object_size(h) > CRED_HEADERS_MAX) {
		ward_error_set(err, 0, "", "%s: expected an object of 1 to %d \"Name\": \"value\" headers",
			where, CRED_HEADERS_MAX);
		return -1;
	}
	if (!(r->headers = calloc(json_object_size(h), sizeof(*r->headers))))
		return ward_error_set(err, ENOMEM, "", "out of memory");
	json_object_foreach(h, name, v) {
		snprintf(sub, sizeof(sub), "%s.%.128s", where, name);
		if (!header_name_ok(name)) {
			ward_error_set(err, 0, "", "%s: a header name is a token (letters, digits and !#$%%&'*+-.^_`|~)",
				where);
			return -1;
		}
		for (size_t k = 0; k < r->n_headers; k++)
			if (strncasecmp(r->headers[k], name, strlen(name)) == 0 &&
			    r->headers[k][strlen(name)] == ':') {
				ward_error_set(err, 0, "", "%s: given twice (header names ignore case)", sub);
				return -1;
			}
		/* the value is never shown, only what is wrong with it */
		const char *val = json_string_value(v);
		size_t len = val ? json_string_length(v) : 0;
		if (!val || len != strlen(val) || strpbrk(val, "\r\n") || len > HEADER_VALUE_MAX) {
			ward_error_set(err, 0, "", "%s: expected a string of at most %d bytes without CR, LF or NUL (the value is not shown)",
				sub, HEADER_VALUE_MAX);
			return -1;
		}
		size_t n = strlen(name) + 2 + len + 1;
		char *line = malloc(n);
		if (!line)
			return -1;
		snprintf(line, n, "%s: %s", name, val);
		r->headers[r->n_headers++] = line;
	}
	return 0;
}

static int cred_rule(struct ward_egress_credential *r, json_t *o, const char *where,
		     struct ward_error *err)
{
	static const char *const known[] = { "name", "host", "path_prefix", "headers" };
	const char *key;
	json_t *v;
	char sub[4400];
	if (!json_is_object(o)) {
		ward_error_set(err, 0, "", "%s: expected an object {name, host, path_prefix, headers}", where);
		return -1;
	}
	json_object_foreach(o, key, v) {
		size_t i = 0;
		while (i < ARRAY_SIZE(known) && strcmp(key, known[i]) != 0)
			i++;
		snprintf(sub, sizeof(sub), "%s.%.64s", where, key);
		if (i == ARRAY_SIZE(known)) {
			ward_error_set(err, 0, "", "%s: unknown key (known: name, host, path_prefix, headers)", sub);
			return -1;
		}
		if (i < 3 && !json_is_string(v)) {
			ward_error_set(err, 0, "", "%s: expected a string", sub);
			return -1;
		}
	}
	const char *name = json_string_value(json_object_get(o, "name"));
	const char *host = json_string_value(json_object_get(o, "host"));
	const char *prefix = json_string_value(json_object_get(o, "path_prefix"));
	snprintf(sub, sizeof(sub), "%s.name", where);
	if (!name || !cred_name_ok(name)) {
		ward_error_set(err, 0, "", "%s: expected 1 to %d of a-z, 0-9, '_', '.' and '-'", sub,
			CRED_NAME_MAX);
		return -1;
	}
	snprintf(sub, sizeof(sub), "%s.host", where);
	if (!host) {
		ward_error_set(err, 0, "", "%s: missing", sub);
		return -1;
	}
	if (cred_host(host, sub, err) < 0)
		return -1;
	snprintf(sub, sizeof(sub), "%s.path_prefix", where);
	if (prefix && !path_prefix_ok(prefix)) {
		ward_error_set(err, 0, "", "%s: expected a path starting with '/', without spaces or control characters, at most %d bytes",
			sub, CRED_PATH_MAX);
		return -1;
	}
	if (!(r->name = strdup(name)) || !(r->host = strdup(host)) ||
	    (prefix && !(r->path_prefix = strdup(prefix))))
		return -1;
	snprintf(sub, sizeof(sub), "%s.headers", where);
	return cred_headers(r, json_object_get(o, "headers") ? json_object_get(o, "headers") : json_null(), sub,
			    err);
}


int ward_egress_credentials_from_json(json_t *v, const char *field,
				      struct ward_egress_credential **out, size_t *n_out,
				      struct ward_error *err)
{
	char where[4200];
	*out = NULL;
	*n_out = 0;
	if (!json_is_array(v) || json_array_size(v) > CRED_MAX) {
		ward_error_set(err, 0, "", "%s: expected an array of at most %d rules", field, CRED_MAX);
		ward_error_field(err, field);
		return -EINVAL;
	}
	size_t n = json_array_size(v), i;
	struct ward_egress_credential *rules = calloc(n + 1, sizeof(*rules));
	if (!rules)
		return ward_error_set(err, ENOMEM, "", "out of memory");
	json_t *o;
	json_array_foreach(v, i, o) {
		snprintf(where, sizeof(where), "%s[%zu]", field, i);
		int rc = cred_rule(&rules[i], o, where, err);
		for (size_t k = 0; rc == 0 && k < i; k++)
			if (strcmp(rules[k].name, rules[i].name) == 0)
				rc = ward_error_set(err, 0, "", "%s.name: '%s' is also the name of rule %zu",
						    where, rules[i].name, k);
		if (rc < 0) {
			ward_error_field(err, where);
			int code = err->code == ENOMEM ? -ENOMEM : -EINVAL;
			ward_egress_credentials_free(rules, i + 1);
			return code;
		}
	}
	*out = rules;
	*n_out = n;
	return 0;
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
