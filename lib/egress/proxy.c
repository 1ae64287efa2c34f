/* lib/egress/proxy.c — one connection from a sandbox, on its own thread:
 * what it asks for (a captured connection's original destination, HTTP
 * CONNECT, a plain HTTP forward, SOCKS5), the decision, the resolution and
 * the pinned upstream, the TLS server name check, and the relay. Every
 * wait has a timeout; every buffer has a bound. A refusal gives the
 * program a prompt, one-line answer (see ward/egress.h); nothing the
 * program sends is trusted for a decision once made: the address checked
 * is the address connected to. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "egress/intercept.h"
#include "egress/internal.h"
#include "base/util.h"

#ifndef IP6T_SO_ORIGINAL_DST
#define IP6T_SO_ORIGINAL_DST 80
#endif

enum { RELAY_BUF = 64 * 1024, RELAY_PIPE = 256 * 1024, MAX_RULES = 32 };

enum via { VIA_TRANSPARENT, VIA_CONNECT, VIA_HTTP, VIA_SOCKS5 };
static const char *const via_name[] = { "transparent", "connect", "http", "socks5" };

/* How a refusal is answered, by the protocol the program spoke. */
enum answer { ANSWER_403, ANSWER_400, ANSWER_502 };

struct conn {
	struct egress_conn *c;
	struct ward_egress_sandbox *s;
	struct ward_egress *e;
	enum via via;
	bool replied;               /* CONNECT 200 / SOCKS success sent */
	char host[256];             /* the name, or the address as text */
	bool is_name;
	struct egress_addr addr;    /* the literal; then the pinned address */
	char addr_text[INET6_ADDRSTRLEN];
	uint16_t port;
	struct egress_http_req req; /* VIA_HTTP */
	char head[EGRESS_HEAD_MAX]; /* bytes read from the program, not yet forwarded */
	size_t head_len;
	const struct ward_egress_credential *rules[MAX_RULES];
	size_t n_rules;
	const char *applied;
	uint64_t out, in;
	char why[640];             /* a reason; recorded cut to 128 bytes */
};

/* I/O with deadlines (every socket here is non-blocking) ------------------ */

static int wait_fd(int fd, short events, int ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	int rc;
	do
		rc = poll(&p, 1, ms);
	while (rc < 0 && errno == EINTR);
	if (rc == 0)
		return -ETIMEDOUT;
	if (rc < 0)
		return -errno;
	return (p.revents & (POLLERR | POLLNVAL)) && !(p.revents & POLLIN) ? -EPIPE : 0;
}

static ssize_t read_some(int fd, void *buf, size_t n, int ms, int flags)
{
	for (;;) {
		ssize_t r = recv(fd, buf, n, flags | MSG_DONTWAIT);
		if (r >= 0)
			return r;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		int rc = wait_fd(fd, POLLIN, ms);
		if (rc < 0)
			return rc;
	}
}

static int write_all(int fd, const void *buf, size_t n, int ms)
{
	const char *p = buf;
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		int rc = wait_fd(fd, POLLOUT, ms);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int read_exact(int fd, void *buf, size_t n, int ms)
{
	for (size_t got = 0; got < n;) {
		ssize_t r = read_some(fd, (char *)buf + got, n - got, ms, 0);
		if (r <= 0)
			return r == 0 ? -ECONNRESET : (int)r;
		got += (size_t)r;
	}
	return 0;
}

/* Refusals ------------------------------------------------------------------ */

static void reset(int fd)
{
	struct linger l = { .l_onoff = 1, .l_linger = 0 };
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
}

static void answer(struct conn *k, enum answer how, const char *reason)
{
	int fd = k->c->fd;
	if (k->via == VIA_TRANSPARENT || k->replied) {
		reset(fd);
		return;
	}
	if (k->via == VIA_SOCKS5) {
		/* 0x02 not allowed by ruleset; 0x04 host unreachable; 0x05 refused */
		unsigned char code = how == ANSWER_502 ? 0x05
			: (strncmp(reason, "name does not", 13) == 0
			   || strncmp(reason, "resolution failed", 17) == 0) ? 0x04 : 0x02;
		unsigned char r[10] = { 5, code, 0, 1 };
		write_all(fd, r, sizeof(r), 1000);
		return;
	}
	static const char *const status[] = {
		[ANSWER_403] = "403 Forbidden", [ANSWER_400] = "400 Bad Request",
		[ANSWER_502] = "502 Bad Gateway",
	};
	char body[512], msg[768];
	bool v6 = strchr(k->host, ':') != NULL;   /* "[::1]:443", as it was asked for */
	int bl = snprintf(body, sizeof(body), "ward egress: refused %s%s%s:%u: %s\n", v6 ? "[" : "",
			  k->host[0] ? k->host : "?", v6 ? "]" : "", k->port, reason);
	if (bl < 0 || (size_t)bl >= sizeof(body))
		bl = (int)strlen(body);
	int ml = snprintf(msg, sizeof(msg),
		"HTTP/1.1 %s\r\nX-Ward-Egress: denied\r\nContent-Type: text/plain\r\n"
		"Content-Length: %d\r\nConnection: close\r\n\r\n%s", status[how], bl, body);
	if (ml > 0 && (size_t)ml < sizeof(msg))
		write_all(fd, msg, (size_t)ml, 1000);
}

/* Refuses: answers the program and records the denial. Returns -EACCES. */
static int refuse(struct conn *k, enum answer how, const char *reason)
{
	/* recorded before the program hears of it: its error hint reads it */
	egress_deny(k->s, k->host, k->port, k->addr_text, via_name[k->via], reason);
	answer(k, how, reason);
	return -EACCES;
}

/* What the program asks for ------------------------------------------------- */

int egress_original_dst(int fd, struct egress_addr *a, uint16_t *port)
{
	struct sockaddr_storage self, orig;
	socklen_t sl = sizeof(self), ol = sizeof(orig);
	if (getsockname(fd, (struct sockaddr *)&self, &sl) < 0)
		return -ENOENT;
	int rc = self.ss_family == AF_INET6
		? getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &orig, &ol)
		: getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &orig, &ol);
	if (rc < 0 || orig.ss_family != self.ss_family)
		return -ENOENT;
	memset(a, 0, sizeof(*a));
	if (orig.ss_family == AF_INET) {
		struct sockaddr_in *o = (void *)&orig, *m = (void *)&self;
		if (o->sin_addr.s_addr == m->sin_addr.s_addr && o->sin_port == m->sin_port)
			return -ENOENT;
		a->family = AF_INET;
		memcpy(a->a, &o->sin_addr, 4);
		*port = ntohs(o->sin_port);
	} else {
		struct sockaddr_in6 *o = (void *)&orig, *m = (void *)&self;
		if (memcmp(&o->sin6_addr, &m->sin6_addr, 16) == 0 && o->sin6_port == m->sin6_port)
			return -ENOENT;
		a->family = AF_INET6;
		memcpy(a->a, &o->sin6_addr, 16);
		*port = ntohs(o->sin6_port);
	}
	return 0;
}

/* Takes the destination as the program named it: a name, or an address
 * in any spelling (never resolved as a name). */
static int set_host(struct conn *k, const char *host)
{
	ward_strlcpy(k->host, host, sizeof(k->host));
	for (char *p = k->host; *p; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p + 32);
	int rc = egress_addr_literal(k->host, &k->addr);
	k->is_name = rc == 0;
	return rc < 0 ? -EINVAL : 0;
}

static int read_socks5(struct conn *k)
{
	int fd = k->c->fd;
	unsigned char b[262];
	if (read_exact(fd, b, 2, EGRESS_HELLO_MS) < 0 || b[0] != 5
	    || read_exact(fd, b + 2, b[1], EGRESS_HELLO_MS) < 0)
		return -EPROTO;
	bool noauth = memchr(b + 2, 0, b[1]) != NULL;
	unsigned char m[2] = { 5, noauth ? 0x00 : 0xff };
	if (write_all(fd, m, 2, EGRESS_HELLO_MS) < 0 || !noauth)
		return -EPROTO;
	if (read_exact(fd, b, 4, EGRESS_HELLO_MS) < 0 || b[0] != 5)
		return -EPROTO;
	if (b[1] != 1) {     /* CONNECT only: 0x07 command not supported */
		unsigned char r[10] = { 5, 7, 0, 1 };
		write_all(fd, r, sizeof(r), 1000);
		return -EPROTO;
	}
	char host[256];
	unsigned char atyp = b[3];
	if (atyp == 1 || atyp == 4) {
		size_t n = atyp == 1 ? 4 : 16;
		if (read_exact(fd, b, n + 2, EGRESS_HELLO_MS) < 0)
			return -EPROTO;
		inet_ntop(atyp == 1 ? AF_INET : AF_INET6, b, host, sizeof(host));
		k->port = (uint16_t)(b[n] << 8 | b[n + 1]);
	} else if (atyp == 3) {
		if (read_exact(fd, b, 1, EGRESS_HELLO_MS) < 0 || b[0] == 0)
			return -EPROTO;
		size_t n = b[0];
		if (read_exact(fd, b, n + 2, EGRESS_HELLO_MS) < 0)
			return -EPROTO;
		if (memchr(b, 0, n))
			return -EPROTO;
		memcpy(host, b, n);
		host[n] = '\0';
		k->port = (uint16_t)(b[n] << 8 | b[n + 1]);
	} else {
		unsigned char r[10] = { 5, 8, 0, 1 };   /* address type not supported */
		write_all(fd, r, sizeof(r), 1000);
		return -EPROTO;
	}
	k->via = VIA_SOCKS5;
	return set_host(k, host);
}

/* An HTTP request head to the explicit proxy: CONNECT or an absolute URL. */
static int read_http(struct conn *k)
{
	const char *why = "malformed request";
	for (;;) {
		ssize_t r = read_some(k->c->fd, k->head + k->head_len, sizeof(k->head) - k->head_len,
				      EGRESS_HELLO_MS, 0);
		if (r <= 0) {
			if (r == 0 || k->head_len == 0)
				return -EPROTO;
			break;
		}
		k->head_len += (size_t)r;
		ssize_t h = egress_http_parse(k->head, k->head_len, &k->req, &why);
		if (h > 0)
			break;
		if (h < 0 || k->head_len >= sizeof(k->head)) {
			k->via = VIA_HTTP;
			refuse(k, ANSWER_400, why);
			return -EACCES;
		}
	}
	k->via = k->req.connect ? VIA_CONNECT : VIA_HTTP;
	k->port = k->req.port;
	if (!k->req.connect && !k->req.absolute) {
		ward_strlcpy(k->host, k->req.host, sizeof(k->host));
		refuse(k, ANSWER_400, "not a proxy request (expected CONNECT or an absolute URL)");
		return -EACCES;
	}
	if (set_host(k, k->req.host) < 0)
		return refuse(k, ANSWER_403, "not in the allowlist");
	return 0;
}

/* Classifies the connection; 0, -EPROTO (dropped silently) or -EACCES. */
static int classify(struct conn *k)
{
	if (egress_original_dst(k->c->fd, &k->addr, &k->port) == 0) {
		k->via = VIA_TRANSPARENT;
		egress_addr_str(&k->addr, k->host, sizeof(k->host));
		k->is_name = false;
	} else {
		unsigned char first;
		if (read_some(k->c->fd, &first, 1, EGRESS_HELLO_MS, MSG_PEEK) != 1)
			return -EPROTO;
		int rc = first == 5 ? read_socks5(k) : read_http(k);
		if (rc < 0)
			return rc == -EINVAL ? refuse(k, ANSWER_403, "not in the allowlist") : rc;
	}
	/* a fake address of this sandbox's DNS stub stands for its name */
	uint32_t v4;
	memcpy(&v4, k->addr.a, 4);
	v4 = ntohl(v4);
	if (!k->is_name && k->addr.family == AF_INET
	    && (v4 >> (32 - WARD_EGRESS_FAKE_BITS)) == (WARD_EGRESS_FAKE_NET >> (32 - WARD_EGRESS_FAKE_BITS))) {
		if (!egress_fake_lookup(&k->s->fake, v4, k->host, sizeof(k->host)))
			return refuse(k, ANSWER_403, "not in the allowlist");
		k->is_name = true;
	}
	return 0;
}

/* The decision ---------------------------------------------------------------- */

/* The policy for (name or address, port): NULL when allowed, else the
 * reason in k->why. */
static const char *policy(struct conn *k, const struct egress_net *n, const struct egress_addr *a)
{
	const char *name = k->is_name ? k->host : NULL;
	for (size_t i = 0; i < n->p.n_deny; i++)
		if (egress_rule_match(&n->p.deny[i], name, a, k->port)) {
			char t[320];
			ward_net_rule_format(&n->p.deny[i], t, sizeof(t));
			snprintf(k->why, sizeof(k->why), "denied by network.deny entry '%s'", t);
			return k->why;
		}
	if (!a || !k->is_name) {    /* allow entries: names by name, literals by CIDR */
		bool host_only = false;
		for (size_t i = 0; i < n->p.n_allow; i++) {
			if (egress_rule_match(&n->p.allow[i], name, a, k->port))
				return NULL;
			host_only = host_only || egress_rule_match(&n->p.allow[i], name, a, 0);
		}
		if (host_only)
			snprintf(k->why, sizeof(k->why), "port %u not allowed for %s", k->port, k->host);
		else
			ward_strlcpy(k->why, "not in the allowlist", sizeof(k->why));
		return k->why;
	}
	return NULL;
}

/* An address the name resolved to (or the literal): NULL when it may be
 * connected to, else the reason in k->why. */
static const char *addr_check(struct conn *k, const struct egress_net *n, const struct egress_addr *a)
{
	const char *range = egress_addr_refused(a);
	if (range) {
		bool opened = false;
		for (size_t i = 0; i < k->e->n_allow_private && !opened; i++)
			opened = egress_cidr_contains(&k->e->allow_private[i], a);
		if (!opened) {
			char t[INET6_ADDRSTRLEN];
			snprintf(k->why, sizeof(k->why), "private address %s (%s)",
				 egress_addr_str(a, t, sizeof(t)), range);
			return k->why;
		}
	}
	return k->is_name ? policy(k, n, a) : NULL;   /* a deny CIDR covers names' addresses too */
}

static int resolve(struct conn *k, struct egress_addrs *out)
{
	out->n = 0;
	if (!k->is_name) {
		out->a[out->n++] = k->addr;
		return 0;
	}
	for (size_t i = 0; i < k->e->n_resolve; i++)
		if (strcmp(k->e->resolve[i].name, k->host) == 0) {
			out->a[out->n++] = k->e->resolve[i].addr;
			return 0;
		}
	const char *why = "";
	int rc = egress_resolve(k->host, k->e->dns_csv, EGRESS_RESOLVE_MS, out, &why);
	if (rc == -ENOENT)
		return refuse(k, ANSWER_403, "name does not resolve");
	if (rc < 0) {
		snprintf(k->why, sizeof(k->why), "resolution failed: %s", why);
		return refuse(k, ANSWER_403, k->why);
	}
	return 0;
}

static int connect_to(const struct egress_addr *a, uint16_t port)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t len;
	if (a->family == AF_INET) {
		struct sockaddr_in *s4 = (void *)&ss;
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		memcpy(&s4->sin_addr, a->a, 4);
		len = sizeof(*s4);
	} else {
		struct sockaddr_in6 *s6 = (void *)&ss;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		memcpy(&s6->sin6_addr, a->a, 16);
		len = sizeof(*s6);
	}
	int fd = socket(a->family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	int soerr = 0;
	socklen_t sl = sizeof(soerr);
	int rc = wait_fd(fd, POLLOUT, EGRESS_CONNECT_MS);
	if (rc == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0)
		return fd;
	close(fd);
	return rc < 0 ? rc : -(soerr ? soerr : ECONNREFUSED);
}

/* Decides, resolves, checks and connects (the pinned address). */
static int decide_and_connect(struct conn *k)
{
	struct egress_net *n = egress_net_get(k->s);
	int rc = 0;
	const char *why = NULL;
	if (k->port == 0) {     /* no rule names port 0; the matcher's 0 means "any" */
		snprintf(k->why, sizeof(k->why), "port 0 not allowed for %s", k->host);
		why = k->why;
	} else {
		why = policy(k, n, k->is_name ? NULL : &k->addr);
	}
	if (!why) {
		pthread_mutex_lock(&k->s->lock);
		const struct ward_net_usage *u = &k->s->usage;
		if (n->p.max_bytes_out && (u->bytes_out >= n->p.max_bytes_out || k->s->hit_out))
			snprintf(k->why, sizeof(k->why), "bytes_out limit reached (%llu)",
				 (unsigned long long)n->p.max_bytes_out);
		else if (n->p.max_bytes_in && (u->bytes_in >= n->p.max_bytes_in || k->s->hit_in))
			snprintf(k->why, sizeof(k->why), "bytes_in limit reached (%llu)",
				 (unsigned long long)n->p.max_bytes_in);
		else
			k->why[0] = '\0';
		pthread_mutex_unlock(&k->s->lock);
		why = k->why[0] ? k->why : NULL;
	}
	if (why) {
		rc = refuse(k, ANSWER_403, why);
		goto out;
	}
	struct egress_addrs addrs;
	if ((rc = resolve(k, &addrs)) < 0)
		goto out;
	char first[sizeof(k->why)] = "";
	for (size_t i = 0; i < addrs.n && k->c->up < 0; i++) {
		if ((why = addr_check(k, n, &addrs.a[i])) != NULL) {
			if (!first[0])
				ward_strlcpy(first, why, sizeof(first));
			continue;
		}
		int fd = connect_to(&addrs.a[i], k->port);
		if (fd < 0) {
			ward_strlcpy(first, "upstream refused the connection", sizeof(first));
			continue;
		}
		k->addr = addrs.a[i];
		egress_addr_str(&k->addr, k->addr_text, sizeof(k->addr_text));
		pthread_mutex_lock(&k->s->lock);
		k->c->up = fd;   /* under the lock: detach shuts it down */
		bool gone = atomic_load(&k->s->detached);
		pthread_mutex_unlock(&k->s->lock);
		if (gone)
			rc = -ECONNABORTED;
	}
	if (rc == 0 && k->c->up < 0) {
		if (!first[0])
			ward_strlcpy(first, "name does not resolve", sizeof(first));
		ward_strlcpy(k->why, first, sizeof(k->why));
		bool upstream = strcmp(first, "upstream refused the connection") == 0;
		rc = refuse(k, upstream ? ANSWER_502 : ANSWER_403, k->why);
	}
out:
	egress_net_put(n);
	return rc;
}


/* The TLS server name ------------------------------------------------------------ */

/* Is the SNI allowed for an address destination: as a name on this port. */
static bool sni_allowed(struct conn *k, const char *sni)
{
	struct egress_net *n = egress_net_get(k->s);
	bool ok = false;
	for (size_t i = 0; i < n->p.n_allow && !ok; i++)
		ok = n->p.allow[i].kind != WARD_NET_RULE_CIDR
			&& egress_rule_match(&n->p.allow[i], sni, NULL, k->port);
	for (size_t i = 0; i < n->p.n_deny && ok; i++)
		ok = !egress_rule_match(&n->p.deny[i], sni, NULL, k->port);
	egress_net_put(n);
	return ok;
}

/* Looks at the program's first bytes (pending ones, then the socket's,
 * peeked: nothing is consumed) for a ClientHello and checks its server
 * name. 1: TLS, name checked; 0: not TLS and allowed; <0: refused. */
static int hello_check(struct conn *k, unsigned char *buf, size_t cap)
{
	size_t pend = k->head_len < cap ? k->head_len : cap, n = 0;
	uint64_t deadline = ward_now_ns() + (uint64_t)EGRESS_HELLO_MS * 1000000u;
	int rc = -EAGAIN;
	char sni[256] = "";
	memcpy(buf, k->head, pend);
	for (;;) {
		ssize_t r = recv(k->c->fd, buf + pend, cap - pend, MSG_PEEK | MSG_DONTWAIT);
		bool eof = r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR);
		size_t now = pend + (r > 0 ? (size_t)r : 0);
		if (now > 0 && (buf[0] != 0x16 || (now > 1 && buf[1] != 0x03))) {
			rc = -ENOTSUP;       /* not TLS */
			break;
		}
		if (now > n && now > 1 && (rc = egress_sni_parse(buf, now, sni, sizeof(sni))) != -EAGAIN)
			break;
		if (eof && now == 0)
			return 0;    /* closed without a byte: nothing to check */
		if (eof || now >= cap || ward_now_ns() >= deadline)
			break;
		if (now == n) {
			/* nothing new yet: the peeked data stays readable, so poll
			 * would not wait; a short sleep bounds the spinning */
			struct timespec ts = { 0, 5000000 };
			if (now == 0)
				wait_fd(k->c->fd, POLLIN, EGRESS_HELLO_MS);
			else
				nanosleep(&ts, NULL);
		}
		n = now;
	}
	if (rc == -ENOTSUP) {
		if (k->port == 443 && k->is_name) {
			snprintf(k->why, sizeof(k->why), "TLS without a server name to '%s'", k->host);
			return refuse(k, ANSWER_403, k->why);
		}
		return 0;
	}
	if (rc == 1 && (k->is_name ? strcasecmp(sni, k->host) == 0 : sni_allowed(k, sni)))
		return 1;
	if (rc == 1)
		snprintf(k->why, sizeof(k->why), "TLS server name '%s' does not match '%s'", sni, k->host);
	else if (k->is_name)
		snprintf(k->why, sizeof(k->why), "TLS without a server name to '%s'", k->host);
	else
		return 1;   /* an allowed address without a name: nothing to compare */
	return refuse(k, ANSWER_403, k->why);
}

/* Relaying ------------------------------------------------------------------------- */

static void mark_allowed(struct conn *k, bool *counted)
{
	if (*counted)
		return;
	*counted = true;
	pthread_mutex_lock(&k->s->lock);
	k->s->usage.connections++;
	pthread_mutex_unlock(&k->s->lock);
	atomic_fetch_add(&k->e->connections, 1);
}

static int count(void *ctx, bool out, size_t n)
{
	struct conn *k = ctx;
	int rc = egress_count(k->s, out, n, k->why, sizeof(k->why));
	if (rc == 0)
		*(out ? &k->out : &k->in) += n;
	return rc;
}

/* Sends a rewritten request head and what followed it upstream. */
static int forward_head(struct conn *k)
{
	char *out = NULL;
	size_t out_len = 0;
	const char *applied = NULL;
	int rc = egress_http_rewrite(k->head, &k->req, k->rules, k->n_rules, &out, &out_len, &applied);
	if (rc < 0) {
		refuse(k, ANSWER_400, "malformed request");
		return rc;
	}
	if (applied && !k->applied)
		k->applied = applied;
	size_t rest = k->head_len - k->req.head_len;
	if ((rc = count(k, true, out_len + rest)) == 0)
		rc = write_all(k->c->up, out, out_len, EGRESS_IDLE_MS);
	if (rc == 0 && rest)
		rc = write_all(k->c->up, k->head + k->req.head_len, rest, EGRESS_IDLE_MS);
	free(out);
	k->head_len = 0;
	return rc;
}

/* Reads a plain request head inside a tunnel or a captured connection
 * (for a host with credential rules); the destination stays the one
 * decided, whatever the Host header says. */
static int read_inner_head(struct conn *k)
{
	const char *why = "malformed request";
	for (;;) {
		ssize_t h = k->head_len ? egress_http_parse(k->head, k->head_len, &k->req, &why) : 0;
		if (h > 0)
			break;
		if (h < 0 || k->head_len >= sizeof(k->head))
			return refuse(k, ANSWER_400, why);
		ssize_t r = read_some(k->c->fd, k->head + k->head_len, sizeof(k->head) - k->head_len,
				      EGRESS_IDLE_MS, 0);
		if (r <= 0)
			return -EPIPE;
		k->head_len += (size_t)r;
	}
	ward_strlcpy(k->req.host, k->host, sizeof(k->req.host));
	k->req.port = k->port;
	return 0;
}

/* The relay moves bytes with splice(2), socket to pipe to socket, never
 * through this process: a pipe per direction, made once per connection,
 * RELAY_PIPE bytes if the pipe limits allow (the default otherwise), and
 * drained before the next read, so it holds at most one step's bytes.
 * Without pipes, or on sockets that take no splice, the bytes are copied
 * through buf, RELAY_BUF at a time. Either way a step's bytes are counted
 * before any of them goes on: refused, they are dropped with the pipe. */
struct pipes {
	int fd[2][2];               /* [direction][read end, write end]; -1: copying */
	size_t cap[2];
};

/* What one step did, or a negative errno: a limit, the connection ends. */
enum step { STEP_ON, STEP_EOF, STEP_FAIL, STEP_STOP };

static void pipes_close(struct pipes *pp)
{
	for (int d = 0; d < 2; d++)
		for (int j = 0; j < 2; j++) {
			if (pp->fd[d][j] >= 0)
				close(pp->fd[d][j]);
			pp->fd[d][j] = -1;
		}
}

static void pipes_open(struct pipes *pp)
{
	memset(pp->fd, -1, sizeof(pp->fd));
	for (int d = 0; d < 2; d++) {
		if (pipe2(pp->fd[d], O_CLOEXEC | O_NONBLOCK) < 0) {
			pipes_close(pp);
			return;
		}
		/* refused past /proc/sys/fs/pipe-max-size or the user's pipe
		 * pages: the pipe keeps its size */
		(void)fcntl(pp->fd[d][1], F_SETPIPE_SZ, RELAY_PIPE);
		int size = fcntl(pp->fd[d][1], F_GETPIPE_SZ);
		pp->cap[d] = size > 0 ? (size_t)size : 4096;
	}
}

/* splice(2) into a socket has no MSG_NOSIGNAL: a peer that went away
 * raises SIGPIPE, fatal to a process that does not ignore it. Blocked on
 * this thread while relaying; one our splices left pending is taken
 * before unblocking. */
struct sigpipe_guard {
	sigset_t old;
	bool was_pending;
};

static void sigpipe_block(struct sigpipe_guard *g)
{
	sigset_t set, pending;
	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	sigpending(&pending);
	g->was_pending = sigismember(&pending, SIGPIPE) == 1;
	pthread_sigmask(SIG_BLOCK, &set, &g->old);
}

static void sigpipe_restore(const struct sigpipe_guard *g)
{
	static const struct timespec zero = { 0, 0 };
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	if (!g->was_pending && sigismember(&g->old, SIGPIPE) != 1)
		while (sigtimedwait(&set, NULL, &zero) == SIGPIPE)
			;
	pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* Copies what side i has to the other side through buf. */
static int step_copy(struct conn *k, int i, const int fds[2], unsigned char *buf)
{
	ssize_t r = read_some(fds[i], buf, RELAY_BUF, 0, 0);
	if (r == -ETIMEDOUT)
		return STEP_ON;
	if (r <= 0)
		return r == 0 ? STEP_EOF : STEP_FAIL;
	int rc = count(k, i == 0, (size_t)r);
	if (rc < 0)
		return rc;
	return write_all(fds[1 - i], buf, (size_t)r, EGRESS_IDLE_MS) < 0 ? STEP_STOP : STEP_ON;
}

/* Empties pipe i into fd, n bytes, with the write timeout of write_all. */
static int pipe_drain(struct pipes *pp, int i, int fd, size_t n)
{
	while (n) {
		ssize_t w = splice(pp->fd[i][0], NULL, fd, NULL, n, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (w > 0) {
			n -= (size_t)w;
			continue;
		}
		if (w == 0 || (errno != EAGAIN && errno != EINTR))
			return w == 0 ? -EPIPE : -errno;
		int rc = wait_fd(fd, POLLOUT, EGRESS_IDLE_MS);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Splices what side i has into its pipe, counts it, then splices it out
 * to the other side. A socket that takes no splice (EINVAL, or ENOSYS)
 * turns the connection to copying; the pipes are empty then. */
static int step_splice(struct conn *k, struct pipes *pp, int i, const int fds[2],
		       unsigned char *buf)
{
	ssize_t r = splice(fds[i], NULL, pp->fd[i][1], NULL, pp->cap[i],
			   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return STEP_ON;
	if (r < 0 && (errno == EINVAL || errno == ENOSYS)) {
		pipes_close(pp);
		return step_copy(k, i, fds, buf);
	}
	if (r <= 0)
		return r == 0 ? STEP_EOF : STEP_FAIL;
	int rc = count(k, i == 0, (size_t)r);
	if (rc < 0)
		return rc;
	return pipe_drain(pp, i, fds[1 - i], (size_t)r) < 0 ? STEP_STOP : STEP_ON;
}

/* Both ways until both sides closed (each end passed on as a half-close),
 * a limit, idleness, a failed write or a refused ClientHello. */
static int relay_loop(struct conn *k, unsigned char *buf, bool check, bool *counted,
		      struct pipes *pp)
{
	int fds[2] = { k->c->fd, k->c->up };
	bool open[2] = { true, true };
	while (open[0] || open[1]) {
		struct pollfd p[2] = { { fds[0], open[0] ? POLLIN : 0, 0 },
				       { fds[1], open[1] ? POLLIN : 0, 0 } };
		int rc = poll(p, 2, EGRESS_IDLE_MS);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc <= 0)
			return 0;      /* idle: closed quietly */
		for (int i = 0; i < 2; i++) {
			if (!open[i] || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (i == 0 && check) {
				if (hello_check(k, buf, EGRESS_HELLO_MAX) < 0)
					return -EACCES;
				check = false;
			}
			mark_allowed(k, counted);
			int s = pp->fd[0][0] >= 0 ? step_splice(k, pp, i, fds, buf)
						  : step_copy(k, i, fds, buf);
			if (s < 0)
				return s;
			if (s == STEP_EOF || s == STEP_FAIL) {
				open[i] = false;
				shutdown(fds[1 - i], SHUT_WR);
			}
			if (s == STEP_FAIL || s == STEP_STOP)
				return 0;
		}
	}
	return 0;
}

/* Relays both ways until both sides closed, a limit, idleness or a
 * refused ClientHello. check: look at the program's first bytes first. */
static int relay(struct conn *k, unsigned char *buf, bool check, bool *counted)
{
	if (k->head_len) {      /* bytes the program sent after CONNECT */
		if (check && hello_check(k, buf, EGRESS_HELLO_MAX) < 0)
			return -EACCES;
		check = false;
		int rc = count(k, true, k->head_len);
		if (rc < 0)
			return rc;
		if (write_all(k->c->up, k->head, k->head_len, EGRESS_IDLE_MS) < 0)
			return -EPIPE;
		k->head_len = 0;
	}
	struct pipes pp;
	struct sigpipe_guard g;
	pipes_open(&pp);
	sigpipe_block(&g);
	int rc = relay_loop(k, buf, check, counted, &pp);
	sigpipe_restore(&g);
	pipes_close(&pp);
	return rc;
}

static void collect_rules(struct conn *k)
{
	const struct ward_egress_credential *sets[2] = { k->e->creds, k->s->creds };
	size_t ns[2] = { k->e->n_creds, k->s->n_creds };
	for (int j = 0; j < 2; j++)
		for (size_t i = 0; i < ns[j] && k->n_rules < MAX_RULES; i++)
			if (egress_cred_host_match(&sets[j][i], k->host))
				k->rules[k->n_rules++] = &sets[j][i];
}

/* A host with credential rules: TLS is intercepted, plain HTTP rewritten. */
static int serve_with_rules(struct conn *k, unsigned char *buf, bool *counted)
{
	if (!k->head_len && wait_fd(k->c->fd, POLLIN, EGRESS_IDLE_MS) < 0)
		return 0;
	int rc = hello_check(k, buf, EGRESS_HELLO_MAX);
	if (rc < 0)
		return rc;
	if (rc == 1) {
		const char *why = NULL, *applied = NULL;
		struct egress_tls *t = k->head_len ? NULL : egress_tls_get(k->e, &why);
		if (!t)
			return refuse(k, ANSWER_403, why ? why : "malformed request");
		mark_allowed(k, counted);
		struct egress_io io = { .count = count, .ctx = k, .idle_ms = EGRESS_IDLE_MS };
		rc = egress_tls_intercept(t, k->c->fd, k->c->up, k->host, k->rules, k->n_rules,
					  &io, &why, &applied);
		k->applied = applied;
		return rc;
	}
	if ((rc = read_inner_head(k)) < 0 || (rc = forward_head(k)) < 0)
		return rc;
	return relay(k, buf, false, counted);
}

static int reply_success(struct conn *k)
{
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	static const unsigned char socks_ok[10] = { 5, 0, 0, 1 };
	int rc = 0;
	if (k->via == VIA_CONNECT) {
		rc = write_all(k->c->fd, ok, sizeof(ok) - 1, EGRESS_IDLE_MS);
		memmove(k->head, k->head + k->req.head_len, k->head_len - k->req.head_len);
		k->head_len -= k->req.head_len;
	} else if (k->via == VIA_SOCKS5) {
		rc = write_all(k->c->fd, socks_ok, sizeof(socks_ok), EGRESS_IDLE_MS);
	}
	k->replied = k->via == VIA_CONNECT || k->via == VIA_SOCKS5;
	return rc;
}

void *egress_conn_main(void *arg)
{
	struct egress_conn *c = arg;
	struct conn *k = calloc(1, sizeof(*k));
	unsigned char *buf = malloc(RELAY_BUF);
	bool counted = false;
	int rc = -ENOMEM;
	if (!k || !buf) {
		reset(c->fd);
		goto out;
	}
	k->c = c;
	k->s = c->s;
	k->e = c->s->e;
	if ((rc = classify(k)) < 0)
		goto out;
	if (!k->is_name)
		egress_addr_str(&k->addr, k->addr_text, sizeof(k->addr_text));
	collect_rules(k);
	if ((rc = decide_and_connect(k)) < 0 || (rc = reply_success(k)) < 0)
		goto out;
	if (k->via == VIA_HTTP)
		rc = forward_head(k) < 0 ? -EPIPE : relay(k, buf, false, &counted);
	else if (k->n_rules)
		rc = serve_with_rules(k, buf, &counted);
	else
		rc = relay(k, buf, true, &counted);
	if (rc == -EACCES)
		goto out;     /* refused on its ClientHello: recorded */
	if (rc == -EDQUOT)
		reset(c->fd);
	mark_allowed(k, &counted);
	egress_finish(k->s, k->host, k->port, k->addr_text, via_name[k->via], k->applied,
		      rc == -EDQUOT ? k->why : "", k->out, k->in);
out:
	free(buf);
	free(k);
	egress_conn_end(c);
	return NULL;
}
