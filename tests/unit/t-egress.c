/* tests/unit/t-egress.c — the egress proxy over real sockets on loopback:
 * listeners made here stand for a sandbox's (ward_egress_fds), small
 * upstream servers run on threads, names map to 127.0.0.1 through the
 * proxy's resolve overrides, and 127.0.0.1/32 is the only private address
 * opened. Each refusal is asserted with its exact text, next to a control
 * that is allowed, so that only the protection explains the refusal. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include "tap.h" /* stdio before base/banned.h */
#include "egress/internal.h"
#include "ward/egress.h"
#include "base/util.h"

/* Upstream servers ----------------------------------------------------------- */

struct upstream {
	int fd;
	uint16_t port;
	char tag;                  /* what it answers: "<tag>\n" */
	pthread_mutex_t lock;
	char last[4096];           /* the first bytes of the last connection */
	atomic_ulong received;     /* bytes, all connections */
	atomic_int conns;
};

struct served {
	struct upstream *u;
	int fd;
};

/* MSG_NOSIGNAL: a proxy that hung up must not end this process */
static bool send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

static void *serve_one(void *arg)
{
	struct served *sv = arg;
	struct upstream *u = sv->u;
	char buf[16384];
	ssize_t n = read(sv->fd, buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = '\0';
		atomic_fetch_add(&u->received, (unsigned long)n);
		pthread_mutex_lock(&u->lock);
		ward_strlcpy(u->last, buf, sizeof(u->last));
		pthread_mutex_unlock(&u->lock);
		if (strncmp(buf, "BIG", 3) == 0 || strncmp(buf, "FLOOD", 5) == 0) {
			/* 1 MiB, or until the proxy stops taking it (256 MiB at most) */
			static char big[65536];
			memset(big, 'x', sizeof(big));
			for (int i = 0; i < (buf[0] == 'B' ? 16 : 4096); i++)
				if (!send_all(sv->fd, big, sizeof(big)))
					break;
		} else if (strncmp(buf, "ECHO\n", 5) == 0) {
			/* everything after the word back, until the end */
			bool up = send_all(sv->fd, buf + 5, (size_t)n - 5);
			while (up && (n = read(sv->fd, buf, sizeof(buf))) > 0)
				up = send_all(sv->fd, buf, (size_t)n);
		} else if (strncmp(buf, "GET ", 4) == 0) {
			char r[128];
			int l = snprintf(r, sizeof(r), "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n%c\n", u->tag);
			if (write(sv->fd, r, (size_t)l) < 0) {
			}
		} else {
			char r[2] = { u->tag, '\n' };
			if (write(sv->fd, r, 2) < 0) {
			}
			/* then a sink: count what else comes */
			while ((n = read(sv->fd, buf, sizeof(buf))) > 0)
				atomic_fetch_add(&u->received, (unsigned long)n);
		}
	}
	close(sv->fd);
	free(sv);
	return NULL;
}

static void *upstream_main(void *arg)
{
	struct upstream *u = arg;
	for (;;) {
		int fd = accept4(u->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			return NULL;
		atomic_fetch_add(&u->conns, 1);
		struct served *sv = malloc(sizeof(*sv));
		sv->u = u;
		sv->fd = fd;
		pthread_t t;
		pthread_create(&t, NULL, serve_one, sv);
		pthread_detach(t);
	}
}

static int listen_on(const char *ip, uint16_t port, int type, uint16_t *got)
{
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, ip, &a.sin_addr);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || (type == SOCK_STREAM && listen(fd, 64) < 0)) {
		close(fd);
		return -1;
	}
	socklen_t l = sizeof(a);
	getsockname(fd, (struct sockaddr *)&a, &l);
	if (got)
		*got = ntohs(a.sin_port);
	return fd;
}

static void upstream_start(struct upstream *u, const char *ip, uint16_t port, char tag)
{
	memset(u, 0, sizeof(*u));
	pthread_mutex_init(&u->lock, NULL);
	u->tag = tag;
	u->fd = listen_on(ip, port, SOCK_STREAM, &u->port);
	if (u->fd >= 0) {
		pthread_t t;
		pthread_create(&t, NULL, upstream_main, u);
		pthread_detach(t);
	}
}

/* Events ------------------------------------------------------------------------ */

struct seen {
	char host[256], via[16], reason[160], addr[64], credential[64];
	uint16_t port;
	bool allowed, end;
	uint64_t out, in;
};
static pthread_mutex_t ev_lock = PTHREAD_MUTEX_INITIALIZER;
static struct seen events[256];
static size_t n_events;

static void on_event(void *ctx, const struct ward_egress_event *ev)
{
	(void)ctx;
	pthread_mutex_lock(&ev_lock);
	if (n_events < 256) {
		struct seen *s = &events[n_events++];
		ward_strlcpy(s->host, ev->host, sizeof(s->host));
		ward_strlcpy(s->via, ev->via, sizeof(s->via));
		ward_strlcpy(s->reason, ev->reason, sizeof(s->reason));
		ward_strlcpy(s->addr, ev->addr, sizeof(s->addr));
		ward_strlcpy(s->credential, ev->credential, sizeof(s->credential));
		s->port = ev->port;
		s->allowed = ev->allowed;
		s->end = ev->end;
		s->out = ev->bytes_out;
		s->in = ev->bytes_in;
	}
	pthread_mutex_unlock(&ev_lock);
}

/* The sandbox side -------------------------------------------------------------- */

static struct ward_egress *E;
static uint16_t UP;              /* the upstream 'A' on 127.0.0.1 */

struct box {
	struct ward_egress_sandbox *s;
	uint16_t port;               /* the proxy's TCP listener */
	int dns;                     /* a UDP socket connected to the stub */
};

static void policy_of(struct ward_net_policy *p, const char *allow, const char *deny)
{
	memset(p, 0, sizeof(*p));
	p->mode = WARD_NET_ALLOWLIST;
	p->max_connections = 64;
	const char *lists[2] = { allow, deny };
	for (int l = 0; l < 2; l++) {
		char buf[1024], *save = NULL;
		if (!lists[l])
			continue;
		/* "%u" stands for the upstream's port */
		size_t o = 0;
		for (const char *c = lists[l]; *c && o + 8 < sizeof(buf); c++) {
			if (c[0] == '%' && c[1] == 'u') {
				o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%u", UP);
				c++;
			} else {
				buf[o++] = *c;
			}
		}
		buf[o] = '\0';
		for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			struct ward_net_rule **r = l ? &p->deny : &p->allow;
			size_t *n = l ? &p->n_deny : &p->n_allow;
			*r = realloc(*r, (*n + 1) * sizeof(**r));
			struct ward_error err;
			if (ward_net_rule_parse(t, &(*r)[*n], "network.allow", &err) < 0)
				diag("bad rule %s: %s", t, err.message);
			else
				(*n)++;
		}
	}
}

static void policy_free(struct ward_net_policy *p)
{
	for (size_t i = 0; i < p->n_allow; i++)
		free(p->allow[i].host);
	for (size_t i = 0; i < p->n_deny; i++)
		free(p->deny[i].host);
	free(p->allow);
	free(p->deny);
}

static void box_attach(struct box *b, const char *allow, const char *deny, uint64_t max_conn,
		       uint64_t max_out, uint64_t max_in)
{
	struct ward_net_policy p;
	policy_of(&p, allow, deny);
	p.max_connections = max_conn;
	p.max_bytes_out = max_out;
	p.max_bytes_in = max_in;
	uint16_t dport;
	struct ward_egress_fds fds = {
		.tcp4 = listen_on("127.0.0.1", 0, SOCK_STREAM, &b->port),
		.tcp6 = -1,
		.dns4 = listen_on("127.0.0.1", 0, SOCK_DGRAM, &dport),
	};
	b->dns = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(dport) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	connect(b->dns, (struct sockaddr *)&a, sizeof(a));
	struct ward_error err;
	if (ward_egress_attach(E, "sb-1", "tenant-1", &p, NULL, 0, &fds, &b->s, &err) < 0)
		diag("attach: %s", err.message);
	policy_free(&p);
}

static void box_detach(struct box *b)
{
	ward_egress_detach(b->s);
	close(b->dns);
}

static int dial(uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Reads until want is seen, EOF or 5 s; returns the bytes (NUL-terminated). */
static ssize_t recv_until(int fd, char *buf, size_t len, const char *want)
{
	size_t got = 0;
	buf[0] = '\0';
	while (got + 1 < len) {
		struct pollfd p = { fd, POLLIN, 0 };
		if (poll(&p, 1, 5000) <= 0)
			break;
		ssize_t n = read(fd, buf + got, len - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		buf[got] = '\0';
		if (want && strstr(buf, want))
			break;
	}
	return (ssize_t)got;
}

static void send_str(int fd, const char *s)
{
	if (write(fd, s, strlen(s)) < 0)
		diag("write: %s", strerror(errno));
}

/* CONNECT target; returns the fd (200 read) or -1, with the answer in buf. */
static int connect_via(struct box *b, const char *target, char *buf, size_t len)
{
	int fd = dial(b->port);
	char req[512];
	snprintf(req, sizeof(req), "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target);
	send_str(fd, req);
	recv_until(fd, buf, len, "\r\n\r\n");
	if (strncmp(buf, "HTTP/1.1 200", 12) == 0)
		return fd;
	recv_until(fd, buf + strlen(buf), len - strlen(buf), "\n\0");
	close(fd);
	return -1;
}

/* The body of a 403 for target, or "" when it was let through. */
static const char *refusal(struct box *b, const char *target)
{
	static char buf[2048];
	int fd = connect_via(b, target, buf, sizeof(buf));
	if (fd >= 0) {
		close(fd);
		return "(allowed)";
	}
	if (!strstr(buf, "X-Ward-Egress: denied"))
		return buf;
	char *body = strstr(buf, "\r\n\r\n");
	return body ? body + 4 : buf;
}

static void expect_refused(struct box *b, const char *target, const char *reason)
{
	char want[512], host[256];
	ward_strlcpy(host, target, sizeof(host));
	snprintf(want, sizeof(want), "ward egress: refused %s: %s\n", host, reason);
	is_str(refusal(b, target), want, "CONNECT %s: %s", target, reason);
}

/* A tunnel that reaches upstream A: sends "ping", expects "A". */
static bool tunnel_ok(struct box *b, const char *target)
{
	char buf[512];
	int fd = connect_via(b, target, buf, sizeof(buf));
	if (fd < 0)
		return false;
	send_str(fd, "ping\n");
	recv_until(fd, buf, sizeof(buf), "\n");
	close(fd);
	return strcmp(buf, "A\n") == 0;
}


/* A minimal TLS 1.2 ClientHello, with an SNI extension when sni is given. */
static size_t client_hello(unsigned char *b, const char *sni)
{
	size_t n = 0, sl = sni ? strlen(sni) : 0;
	unsigned char body[512];
	size_t m = 0;
	body[m++] = 3;
	body[m++] = 3;
	memset(body + m, 7, 32);
	m += 32;
	body[m++] = 0;                     /* session id */
	body[m++] = 0;
	body[m++] = 2;
	body[m++] = 0x13;
	body[m++] = 0x01;                  /* one cipher suite */
	body[m++] = 1;
	body[m++] = 0;                     /* compression: null */
	if (sni) {
		size_t ext = 9 + sl;
		body[m++] = (unsigned char)(ext >> 8);
		body[m++] = (unsigned char)ext;
		body[m++] = 0;
		body[m++] = 0;                 /* server_name */
		body[m++] = (unsigned char)((sl + 5) >> 8);
		body[m++] = (unsigned char)(sl + 5);
		body[m++] = (unsigned char)((sl + 3) >> 8);
		body[m++] = (unsigned char)(sl + 3);
		body[m++] = 0;                 /* host_name */
		body[m++] = (unsigned char)(sl >> 8);
		body[m++] = (unsigned char)sl;
		memcpy(body + m, sni, sl);
		m += sl;
	}
	b[n++] = 0x16;
	b[n++] = 3;
	b[n++] = 1;
	b[n++] = (unsigned char)((m + 4) >> 8);
	b[n++] = (unsigned char)(m + 4);
	b[n++] = 1;
	b[n++] = 0;
	b[n++] = (unsigned char)(m >> 8);
	b[n++] = (unsigned char)m;
	memcpy(b + n, body, m);
	return n + m;
}

/* Sends a ClientHello through a CONNECT tunnel: true when upstream A
 * answered (the hello went through), false when the proxy cut it. */
static bool hello_through(struct box *b, const char *target, const char *sni)
{
	char buf[512];
	unsigned char h[600];
	int fd = connect_via(b, target, buf, sizeof(buf));
	if (fd < 0)
		return false;
	size_t n = client_hello(h, sni);
	if (write(fd, h, n) < 0) {
	}
	recv_until(fd, buf, sizeof(buf), "\n");
	close(fd);
	return strcmp(buf, "A\n") == 0;
}

static bool last_reason(struct box *b, const char *want)
{
	struct ward_net_denial d;
	if (ward_egress_last_denial(b->s, &d) < 0)
		return false;
	if (strcmp(d.reason, want) != 0)
		diag("last denial: '%s', want '%s'", d.reason, want);
	return strcmp(d.reason, want) == 0;
}

static void test_connect(void)
{
	struct box b;
	char t[256];
	box_attach(&b, "allowed.test:%u,other.test,*.deny.test:*,127.0.0.0/8:*,bad.test:*,meta.test:*,"
		   "[::]/0:*",
		   "evil.deny.test:*", 64, 0, 0);
	snprintf(t, sizeof(t), "allowed.test:%u", UP);
	ok(tunnel_ok(&b, t), "CONNECT to an allowed name is tunnelled");
	snprintf(t, sizeof(t), "ALLOWED.test:%u", UP);
	ok(tunnel_ok(&b, t), "names compare without case");
	snprintf(t, sizeof(t), "nothere.test:%u", UP);
	expect_refused(&b, t, "not in the allowlist");
	snprintf(t, sizeof(t), "allowed.test:%u", UP + 1);
	char why[128];
	snprintf(why, sizeof(why), "port %u not allowed for allowed.test", UP + 1);
	expect_refused(&b, t, why);
	snprintf(t, sizeof(t), "good.deny.test:%u", UP);
	ok(tunnel_ok(&b, t), "a name under an allowed *.domain is tunnelled");
	snprintf(t, sizeof(t), "evil.deny.test:%u", UP);
	expect_refused(&b, t, "denied by network.deny entry 'evil.deny.test:*'");

	/* addresses: CIDR entries open literals; refused ranges stay refused
	 * unless allow_private (127.0.0.1/32 here) names them */
	snprintf(t, sizeof(t), "127.0.0.1:%u", UP);
	ok(tunnel_ok(&b, t), "a literal inside an allowed CIDR and allow_private is tunnelled");
	static const char *const spellings[] = { "127.0.0.2", "2130706434", "0x7f000002",
		"0177.0.0.2", "127.2", "[::ffff:127.0.0.2]", "127.0.0.2." };
	for (size_t i = 0; i < sizeof(spellings) / sizeof(spellings[0]); i++) {
		snprintf(t, sizeof(t), "%s:%u", spellings[i], UP);
		const char *shown = strchr(spellings[i], ':') ? "::ffff:127.0.0.2" : "127.0.0.2";
		snprintf(why, sizeof(why), "private address %s (loopback)", shown);
		expect_refused(&b, t, why);
	}
	static const char *const v6[][2] = {
		{ "[::1]", "::1 (loopback)" },
		{ "[fd00:ec2::254]", "fd00:ec2::254 (metadata)" },
		{ "[64:ff9b::a9fe:a9fe]", "64:ff9b::a9fe:a9fe (metadata)" },
		{ "[fe80::1]", "fe80::1 (link-local)" },
		{ "[fc00::5]", "fc00::5 (private)" },
	};
	for (size_t i = 0; i < sizeof(v6) / sizeof(v6[0]); i++) {
		snprintf(t, sizeof(t), "%s:%u", v6[i][0], UP);
		snprintf(why, sizeof(why), "private address %s", v6[i][1]);
		expect_refused(&b, t, why);
	}
	snprintf(t, sizeof(t), "2130706433:%u", UP);
	ok(tunnel_ok(&b, t), "2130706433 is 127.0.0.1 (an address, not a name)");
	snprintf(t, sizeof(t), "0x7f.1:%u", UP);
	ok(tunnel_ok(&b, t), "0x7f.1 is 127.0.0.1");
	snprintf(t, sizeof(t), "bad.test:%u", UP);
	expect_refused(&b, t, "private address 127.0.0.2 (loopback)");
	snprintf(t, sizeof(t), "meta.test:%u", UP);
	expect_refused(&b, t, "private address 169.254.169.254 (metadata)");
	snprintf(t, sizeof(t), "10.1.2.3:%u", UP);
	expect_refused(&b, t, "not in the allowlist");

	/* TLS: the server name must be the name allowed */
	snprintf(t, sizeof(t), "allowed.test:%u", UP);
	ok(hello_through(&b, t, "allowed.test"), "a ClientHello for the allowed name goes through");
	ok(!hello_through(&b, t, "other.test"), "a ClientHello for another name is cut");
	ok(last_reason(&b, "TLS server name 'other.test' does not match 'allowed.test'"),
	   "... with the reason");
	ok(!hello_through(&b, t, NULL), "a ClientHello without a name is cut");
	ok(last_reason(&b, "TLS without a server name to 'allowed.test'"), "... with the reason");
	snprintf(t, sizeof(t), "127.0.0.1:%u", UP);
	ok(hello_through(&b, t, "allowed.test"), "an address with an allowed server name goes through");
	ok(!hello_through(&b, t, "nothere.test"), "an address with a server name not allowed is cut");
	box_detach(&b);
}

static void test_http_forward(void)
{
	struct box b;
	box_attach(&b, "allowed.test:%u", NULL, 64, 0, 0);
	int fd = dial(b.port);
	char req[512], buf[2048];
	snprintf(req, sizeof(req),
		 "GET http://allowed.test:%u/p?q=1 HTTP/1.1\r\nHost: allowed.test:%u\r\n"
		 "Proxy-Connection: keep-alive\r\n\r\n", UP, UP);
	send_str(fd, req);
	recv_until(fd, buf, sizeof(buf), "A\n");
	close(fd);
	ok(strstr(buf, "200 OK") && strstr(buf, "A\n"), "plain HTTP is forwarded and answered");
	struct upstream *u = NULL;
	(void)u;
	box_detach(&b);
}

static struct upstream UA;

static void test_http_forward_head(void)
{
	pthread_mutex_lock(&UA.lock);
	char last[4096];
	ward_strlcpy(last, UA.last, sizeof(last));
	pthread_mutex_unlock(&UA.lock);
	ok(strncmp(last, "GET /p?q=1 HTTP/1.1\r\n", 21) == 0, "upstream sees the origin form");
	ok(strcasestr(last, "\r\nConnection: close\r\n") != NULL, "upstream sees Connection: close");
	ok(strcasestr(last, "Proxy-Connection") == NULL, "no Proxy-Connection upstream");

	struct box b;
	box_attach(&b, "allowed.test:%u", NULL, 64, 0, 0);
	int fd = dial(b.port);
	char req[512], buf[2048];
	snprintf(req, sizeof(req), "GET http://2130706434:%u/ HTTP/1.1\r\nHost: 2130706434:%u\r\n\r\n",
		 UP, UP);
	send_str(fd, req);
	recv_until(fd, buf, sizeof(buf), "loopback)\n");
	close(fd);
	char want[128];
	snprintf(want, sizeof(want), "ward egress: refused 2130706434:%u: not in the allowlist\n", UP);
	if (!ok(strncmp(buf, "HTTP/1.1 403 Forbidden\r\n", 24) == 0 && strstr(buf, want),
		"plain HTTP to a decimal address is refused with a 403"))
		diag("got: %s", buf);
	fd = dial(b.port);
	send_str(fd, "GET /local HTTP/1.1\r\nHost: x\r\n\r\n");
	recv_until(fd, buf, sizeof(buf), "\n\n");
	close(fd);
	ok(strncmp(buf, "HTTP/1.1 400 Bad Request\r\n", 26) == 0, "an origin-form request gets a 400");
	box_detach(&b);
}

static int socks(struct box *b, unsigned char atyp, const void *addr, size_t alen, uint16_t port,
		 unsigned char *code)
{
	int fd = dial(b->port);
	unsigned char m[300] = { 5, 1, 0 }, r[16];
	if (write(fd, m, 3) < 0 || recv_until(fd, (char *)r, 3, NULL) != 2 || r[1] != 0) {
		close(fd);
		return -1;
	}
	size_t n = 0;
	m[n++] = 5;
	m[n++] = 1;
	m[n++] = 0;
	m[n++] = atyp;
	if (atyp == 3)
		m[n++] = (unsigned char)alen;
	memcpy(m + n, addr, alen);
	n += alen;
	m[n++] = (unsigned char)(port >> 8);
	m[n++] = (unsigned char)port;
	if (write(fd, m, n) < 0 || recv_until(fd, (char *)r, 11, NULL) < 2) {
		close(fd);
		return -1;
	}
	*code = r[1];
	if (r[1] != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static bool socks_ok(struct box *b, unsigned char atyp, const void *addr, size_t alen,
		     unsigned char *code)
{
	int fd = socks(b, atyp, addr, alen, UP, code);
	if (fd < 0)
		return false;
	char buf[64];
	send_str(fd, "ping\n");
	recv_until(fd, buf, sizeof(buf), "\n");
	close(fd);
	return strcmp(buf, "A\n") == 0;
}

/* One DNS question to the stub: the rcode, *ancount, *addr (host order). */
static int ask(struct box *b, const char *name, uint16_t qtype, int *ancount, uint32_t *addr)
{
	unsigned char q[300] = { 0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0 };
	size_t n = 12;
	char copy[256];
	ward_strlcpy(copy, name, sizeof(copy));
	char *save = NULL;
	for (char *l = strtok_r(copy, ".", &save); l; l = strtok_r(NULL, ".", &save)) {
		q[n++] = (unsigned char)strlen(l);
		memcpy(q + n, l, strlen(l));
		n += strlen(l);
	}
	q[n++] = 0;
	q[n++] = (unsigned char)(qtype >> 8);
	q[n++] = (unsigned char)qtype;
	q[n++] = 0;
	q[n++] = 1;
	unsigned char r[512];
	if (send(b->dns, q, n, 0) < 0)
		return -1;
	struct pollfd p = { b->dns, POLLIN, 0 };
	if (poll(&p, 1, 5000) <= 0)
		return -1;
	ssize_t got = recv(b->dns, r, sizeof(r), 0);
	if (got < 12 || r[0] != 0x12 || r[1] != 0x34 || !(r[2] & 0x80))
		return -1;
	*ancount = r[6] << 8 | r[7];
	*addr = 0;
	if (*ancount == 1 && (size_t)got >= n + 16)
		*addr = (uint32_t)r[n + 12] << 24 | (uint32_t)r[n + 13] << 16
			| (uint32_t)r[n + 14] << 8 | r[n + 15];
	return r[3] & 0xf;
}

static void test_socks_dns(void)
{
	struct box b;
	unsigned char code = 0xff;
	box_attach(&b, "allowed.test:%u,127.0.0.0/8:*", NULL, 64, 0, 0);
	ok(socks_ok(&b, 3, "allowed.test", 12, &code), "SOCKS5 to an allowed name");
	ok(!socks_ok(&b, 3, "nothere.test", 12, &code) && code == 2,
	   "SOCKS5 to another name: 0x02 (not allowed by ruleset)");
	ok(socks(&b, 3, "allowed.test", 12, 0, &code) < 0 && code == 2, "SOCKS5 to port 0: 0x02");
	ok(last_reason(&b, "port 0 not allowed for allowed.test"), "... port 0 not allowed");
	unsigned char lo1[4] = { 127, 0, 0, 1 }, lo2[4] = { 127, 0, 0, 2 };
	ok(socks_ok(&b, 1, lo1, 4, &code), "SOCKS5 to an allowed IPv4 address");
	ok(!socks_ok(&b, 1, lo2, 4, &code) && code == 2, "SOCKS5 to 127.0.0.2: 0x02");
	ok(last_reason(&b, "private address 127.0.0.2 (loopback)"), "... as a private address");

	int an = -1;
	uint32_t a1 = 0, a2 = 0, a3 = 0;
	is_int(ask(&b, "allowed.test", 1, &an, &a1), 0, "DNS: an allowed name: NOERROR");
	ok(an == 1 && (a1 >> 17) == (WARD_EGRESS_FAKE_NET >> 17), "... with a 198.18/15 address");
	is_int(ask(&b, "Allowed.Test", 1, &an, &a2), 0, "DNS: the same name again");
	ok(a1 == a2 && a1 != 0, "... gets the same address");
	is_int(ask(&b, "nothere.test", 1, &an, &a3), 5, "DNS: another name: REFUSED");
	struct ward_net_usage u0, u1;
	ward_egress_usage(b.s, &u0);
	for (int i = 0; i < 5; i++)
		ask(&b, "nothere.test", 1, &an, &a3);
	ward_egress_usage(b.s, &u1);
	is_int(u1.denied_total - u0.denied_total, 0, "DNS: a name refused again is not recorded again");
	ask(&b, "other.nothere.test", 1, &an, &a3);
	ward_egress_usage(b.s, &u1);
	is_int(u1.denied_total - u0.denied_total, 1, "DNS: another refused name is");
	is_int(ask(&b, "allowed.test", 28, &an, &a3), 0, "DNS: AAAA of an allowed name: NOERROR");
	is_int(an, 0, "... without an answer");

	/* the fake address stands for the name, in this sandbox only */
	char name[256] = "";
	ok(egress_fake_lookup(&b.s->fake, a1, name, sizeof(name)) && strcmp(name, "allowed.test") == 0,
	   "the fake address maps back to its name");
	unsigned char fake[4] = { (unsigned char)(a1 >> 24), (unsigned char)(a1 >> 16),
				  (unsigned char)(a1 >> 8), (unsigned char)a1 };
	ok(socks_ok(&b, 1, fake, 4, &code), "SOCKS5 to the fake address reaches the name's upstream");
	unsigned char unknown[4] = { 198, 18, 3, 3 };
	ok(!socks_ok(&b, 1, unknown, 4, &code) && code == 2, "an unknown fake address is refused");
	ok(last_reason(&b, "not in the allowlist"), "... as not in the allowlist");
	box_detach(&b);
}

static void test_limits_and_usage(void)
{
	struct box b;
	char t[64], buf[512];
	snprintf(t, sizeof(t), "allowed.test:%u", UP);
	box_attach(&b, "allowed.test:%u", NULL, 2, 1000, 0);

	/* two connections held open; the third is over the sandbox's limit */
	int c1 = connect_via(&b, t, buf, sizeof(buf));
	int c2 = connect_via(&b, t, buf, sizeof(buf));
	ok(c1 >= 0 && c2 >= 0, "two connections within max_connections 2");
	int c3 = dial(b.port);
	ssize_t n = recv_until(c3, buf, sizeof(buf), NULL);
	ok(n <= 0, "the third is reset without an answer");
	close(c3);
	ok(last_reason(&b, "connection limit reached (2)"), "... connection limit reached (2)");
	close(c1);
	close(c2);

	/* bytes_out: the connection stops at the limit */
	for (int i = 0; i < 500; i++) {     /* the closed ones may take a moment to let go */
		struct ward_net_usage u;
		ward_egress_usage(b.s, &u);
		int fd = -1;
		if ((fd = connect_via(&b, t, buf, sizeof(buf))) >= 0) {
			send_str(fd, "ping\n");
			recv_until(fd, buf, sizeof(buf), "\n");
			char big[4000];
			memset(big, 'y', sizeof(big));
			ssize_t w = write(fd, big, sizeof(big));
			(void)w;
			recv_until(fd, buf, sizeof(buf), NULL);
			close(fd);
			break;
		}
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
	}
	struct ward_net_usage u;
	for (int i = 0; i < 500; i++) {
		ward_egress_usage(b.s, &u);
		if (u.limit && strcmp(u.limit, "bytes_out") == 0)
			break;
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
	}
	is_str(u.limit ? u.limit : "(none)", "bytes_out", "usage.limit is bytes_out");
	ok(u.bytes_out <= 1000, "no more than 1000 bytes went out (%llu)",
	   (unsigned long long)u.bytes_out);
	ok(last_reason(&b, "bytes_out limit reached (1000)"), "... bytes_out limit reached (1000)");
	expect_refused(&b, t, "bytes_out limit reached (1000)");
	ward_egress_usage(b.s, &u);
	ok(u.connections >= 3, "connections counted (%llu)", (unsigned long long)u.connections);
	ward_egress_usage(b.s, &u);
	ok(u.present && u.denied_total >= 3 && u.n_denied == u.denied_total,
	   "denied_total counts every refusal (%llu)", (unsigned long long)u.denied_total);
	is_str(u.denied[0].reason, "connection limit reached (2)", "denied[0] is the first refusal");
	box_detach(&b);
}

/* Large transfers ---------------------------------------------------------------- */

/* Byte i of a long stream: a byte lost, repeated or moved anywhere shows. */
static unsigned char stream_byte(uint64_t i)
{
	uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull;
	return (unsigned char)((x ^ (x >> 29)) >> 40);
}

/* Sends total bytes of the stream on fd (then a half-close) while reading
 * the echo and comparing it; returns the bytes that came back, bad the
 * ones that differ, eof whether the end came back too. */
static size_t echo_stream(int fd, size_t total, size_t *bad, bool *eof)
{
	static unsigned char out[65536], in[65536];
	size_t sent = 0, got = 0;
	*bad = 0;
	*eof = false;
	while (!*eof) {
		struct pollfd p = { fd, (short)(POLLIN | (sent < total ? POLLOUT : 0)), 0 };
		if (poll(&p, 1, 10000) <= 0)
			break;
		if (sent < total && (p.revents & POLLOUT)) {
			size_t n = total - sent < sizeof(out) ? total - sent : sizeof(out);
			for (size_t j = 0; j < n; j++)
				out[j] = stream_byte(sent + j);
			ssize_t w = send(fd, out, n, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (w < 0 && errno != EAGAIN)
				break;
			sent += w > 0 ? (size_t)w : 0;
			if (sent == total)
				shutdown(fd, SHUT_WR);
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t r = recv(fd, in, sizeof(in), MSG_DONTWAIT);
			if (r < 0 && errno != EAGAIN)
				break;
			*eof = r == 0;
			for (ssize_t j = 0; j < r; j++)
				*bad += in[j] != stream_byte(got + (size_t)j);
			got += r > 0 ? (size_t)r : 0;
		}
	}
	return got;
}

/* Reads until the end or a reset, at most 10 s; returns the bytes. */
static size_t drain(int fd, bool *all_x)
{
	static char in[65536];
	size_t got = 0;
	*all_x = true;
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		if (poll(&p, 1, 10000) <= 0)
			return got;
		ssize_t r = read(fd, in, sizeof(in));
		if (r <= 0)
			return got;
		for (ssize_t j = 0; j < r; j++)
			*all_x = *all_x && in[j] == 'x';
		got += (size_t)r;
	}
}

static uint64_t usage_in(struct box *b)
{
	struct ward_net_usage u;
	ward_egress_usage(b->s, &u);
	return u.bytes_in;
}

/* The relay moves large transfers exactly: content, ends, counts and
 * limits as for small ones; a sandbox detached in the middle of one
 * ends it without a signal reaching the process. */
static void test_large(void)
{
	enum { TOTAL = 8 << 20, LIMIT = 300000 };
	struct box b;
	char t[64], buf[512];
	snprintf(t, sizeof(t), "allowed.test:%u", UP);
	box_attach(&b, "allowed.test:%u", NULL, 8, 0, 0);
	int fd = connect_via(&b, t, buf, sizeof(buf));
	size_t bad = 0, got = 0;
	bool eof = false;
	if (fd >= 0) {
		send_str(fd, "ECHO\n");
		got = echo_stream(fd, TOTAL, &bad, &eof);
		close(fd);
	}
	ok(got == TOTAL && bad == 0, "8 MiB through a tunnel and back, byte-exact (%zu bytes, %zu differ)",
	   got, bad);
	ok(eof, "each end is passed on: the upstream saw ours, we saw its");
	struct ward_net_usage u;
	for (int i = 0; i < 500; i++) {
		ward_egress_usage(b.s, &u);
		if (u.bytes_in >= TOTAL)
			break;
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
	}
	ok(u.bytes_out == TOTAL + 5 && u.bytes_in == TOTAL, "every byte counted once (out %llu, in %llu)",
	   (unsigned long long)u.bytes_out, (unsigned long long)u.bytes_in);
	box_detach(&b);

	/* bytes_in met in the middle of a 1 MiB download */
	box_attach(&b, "allowed.test:%u", NULL, 8, 0, LIMIT);
	bool all_x = false;
	got = 0;
	if ((fd = connect_via(&b, t, buf, sizeof(buf))) >= 0) {
		send_str(fd, "BIG\n");
		got = drain(fd, &all_x);
		close(fd);
	}
	ward_egress_usage(b.s, &u);
	ok(got > 0 && got <= LIMIT && all_x, "a 1 MiB download stops at bytes_in %d (%zu bytes came)",
	   LIMIT, got);
	ok(u.bytes_in <= LIMIT, "no more than %d bytes counted in (%llu)", LIMIT,
	   (unsigned long long)u.bytes_in);
	ok(last_reason(&b, "bytes_in limit reached (300000)"), "... bytes_in limit reached (300000)");
	box_detach(&b);

	/* detached while the relay waits to write to a program that stopped reading */
	box_attach(&b, "allowed.test:%u", NULL, 8, 0, 0);
	int small = 4096;
	fd = connect_via(&b, t, buf, sizeof(buf));
	if (fd >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
		send_str(fd, "FLOOD\n");
	}
	uint64_t last = 0;
	for (int i = 0, same = 0; i < 500 && same < 5; i++) {   /* until bytes_in stands still */
		struct timespec ts = { 0, 20000000 };
		nanosleep(&ts, NULL);
		uint64_t now = usage_in(&b);
		same = now > 0 && now == last ? same + 1 : 0;
		last = now;
	}
	size_t before = n_events;
	ward_egress_detach(b.s);
	got = fd >= 0 ? drain(fd, &all_x) : 0;
	const struct seen *end = NULL;
	for (int i = 0; i < 500 && !end; i++) {
		pthread_mutex_lock(&ev_lock);
		for (size_t j = before; j < n_events && !end; j++)
			if (events[j].end && strcmp(events[j].host, "allowed.test") == 0)
				end = &events[j];
		pthread_mutex_unlock(&ev_lock);
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
	}
	ok(last > 0 && end, "detached mid-transfer (%llu bytes in): the relay ends, the process lives on",
	   (unsigned long long)last);
	if (fd >= 0)
		close(fd);
	close(b.dns);
}

static const struct seen *find_event(const char *host, bool end)
{
	for (size_t i = n_events; i-- > 0;)
		if (strcmp(events[i].host, host) == 0 && events[i].end == end)
			return &events[i];
	return NULL;
}

static void test_events_update(void)
{
	struct box b;
	char t[64];
	box_attach(&b, "events.test:%u", NULL, 64, 0, 0);
	snprintf(t, sizeof(t), "events.test:%u", UP);
	pthread_mutex_lock(&ev_lock);
	n_events = 0;
	pthread_mutex_unlock(&ev_lock);
	ok(tunnel_ok(&b, t), "a tunnel for the events");
	snprintf(t, sizeof(t), "other.test:%u", UP);
	expect_refused(&b, t, "not in the allowlist");
	const struct seen *ev = NULL;
	for (int i = 0; i < 500 && !ev; i++) {
		pthread_mutex_lock(&ev_lock);
		ev = find_event("events.test", true);
		pthread_mutex_unlock(&ev_lock);
		if (!ev) {
			struct timespec ts = { 0, 10000000 };
			nanosleep(&ts, NULL);
		}
	}
	if (!ok(ev && ev->allowed && strcmp(ev->via, "connect") == 0 && ev->port == UP
		&& strcmp(ev->addr, "127.0.0.1") == 0 && ev->out == 5 && ev->in == 2,
		"the allowed connection's end event: via, port, addr, bytes") && ev)
		diag("via %s port %u addr %s out %llu in %llu", ev->via, ev->port, ev->addr,
		     (unsigned long long)ev->out, (unsigned long long)ev->in);
	ev = find_event("other.test", false);
	ok(ev && !ev->allowed && strcmp(ev->reason, "not in the allowlist") == 0 && ev->port == UP,
	   "the refusal's event");

	struct ward_net_policy p;
	policy_of(&p, "events.test:%u,other.test:%u", NULL);
	struct ward_error err;
	ok(ward_egress_update(b.s, &p, &err) == 0, "update");
	policy_free(&p);
	ok(tunnel_ok(&b, t), "the updated list applies to the next connection");

	/* detach with a connection open: prompt, and the thread lets go */
	char buf[256];
	int fd = connect_via(&b, t, buf, sizeof(buf));
	uint64_t t0 = ward_now_ns();
	ward_egress_detach(b.s);
	ok(ward_now_ns() - t0 < 100000000u, "detach returns at once");
	ssize_t n = recv_until(fd, buf, sizeof(buf), NULL);
	ok(n <= 0 && ward_now_ns() - t0 < 3000000000u, "the open connection is closed promptly");
	close(fd);
	close(b.dns);
	struct ward_egress_stats st = { 0 };
	for (int i = 0; i < 500; i++) {
		ward_egress_stats(E, &st);
		if (st.active == 0 && st.sandboxes == 0)
			break;
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
	}
	ok(st.active == 0 && st.sandboxes == 0, "no connection or sandbox left after detach");
	ok(st.connections > 0 && st.denied > 0, "process-wide counters");
}

/* DNS rebinding: a resolver answering 127.0.0.1 then 127.0.0.2 ------------------- */

static atomic_int dns_answers;

static void *rebind_dns(void *arg)
{
	int fd = *(int *)arg;
	for (;;) {
		unsigned char q[512], r[512];
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(fd, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);
		if (n < 0)
			return NULL;
		struct egress_dns_query dq;
		if (egress_dns_parse_query(q, (size_t)n, &dq) < 0)
			continue;
		uint32_t a = 0;
		int rcode = 3;      /* NXDOMAIN */
		if (strcmp(dq.name, "rebind.test") == 0) {
			rcode = 0;
			if (dq.qtype == 1)
				a = (atomic_fetch_add(&dns_answers, 1) % 2) ? 0x7f000002 : 0x7f000001;
		}
		size_t len = egress_dns_reply(q, &dq, rcode, a, r, sizeof(r));
		sendto(fd, r, len, 0, (struct sockaddr *)&from, fl);
	}
}

static void test_rebinding(uint16_t dns_port, bool have_b)
{
	struct box b;
	char t[64], buf[512];
	(void)dns_port;
	box_attach(&b, "rebind.test:%u,gone.test:*", NULL, 64, 0, 0);
	snprintf(t, sizeof(t), "rebind.test:%u", UP);
	int reached = 0, refused = 0, wrong = 0;
	for (int i = 0; i < 6; i++) {
		int fd = connect_via(&b, t, buf, sizeof(buf));
		if (fd < 0) {
			refused += strstr(buf, "private address 127.0.0.2 (loopback)") != NULL;
			continue;
		}
		send_str(fd, "ping\n");
		recv_until(fd, buf, sizeof(buf), "\n");
		close(fd);
		reached += strcmp(buf, "A\n") == 0;
		wrong += strcmp(buf, "B\n") == 0;
	}
	ok(reached > 0 && refused > 0 && reached + refused == 6,
	   "rebinding: each connection reaches 127.0.0.1 or is refused (%d, %d)", reached, refused);
	if (have_b)
		is_int(wrong, 0, "rebinding: none reaches 127.0.0.2");
	else
		skip("127.0.0.2 cannot be bound here");
	snprintf(t, sizeof(t), "gone.test:%u", UP);
	expect_refused(&b, t, "name does not resolve");
	box_detach(&b);
}

/* Credential rules: the header is added by the proxy, for the name decided ------ */

static void last_request(char *buf, size_t len)
{
	pthread_mutex_lock(&UA.lock);
	ward_strlcpy(buf, UA.last, len);
	pthread_mutex_unlock(&UA.lock);
}

static void test_credentials(void)
{
	char *headers[] = { "Authorization: Bearer s3cret" };
	struct ward_egress_credential cred = { .name = "gh", .host = "cred.test",
		.path_prefix = NULL, .headers = headers, .n_headers = 1 };
	struct ward_net_policy p;
	policy_of(&p, "cred.test:%u,allowed.test:%u", NULL);
	uint16_t dport;
	struct box b;
	struct ward_egress_fds fds = {
		.tcp4 = listen_on("127.0.0.1", 0, SOCK_STREAM, &b.port), .tcp6 = -1,
		.dns4 = listen_on("127.0.0.1", 0, SOCK_DGRAM, &dport),
	};
	b.dns = -1;
	struct ward_error err;
	int rc = ward_egress_attach(E, "sb-c", "", &p, &cred, 1, &fds, &b.s, &err);
	policy_free(&p);
	if (!ok(rc == 0, "attach with a credential rule")) {
		diag("%s", err.message);
		return;
	}
	ok(ward_egress_ca_bundle(E) != NULL, "a CA bundle exists for the sandbox to trust");
	char req[512], buf[2048], last[4096];

	/* plain HTTP through the proxy: injected */
	int fd = dial(b.port);
	snprintf(req, sizeof(req), "GET http://cred.test:%u/x HTTP/1.1\r\nHost: cred.test:%u\r\n\r\n",
		 UP, UP);
	send_str(fd, req);
	recv_until(fd, buf, sizeof(buf), "A\n");
	close(fd);
	last_request(last, sizeof(last));
	if (!ok(strstr(last, "\r\nAuthorization: Bearer s3cret\r\n") != NULL,
		"plain HTTP to a host with a rule: the upstream sees the header"))
		diag("client got: %s\nupstream got: %s", buf, last);

	/* plain HTTP in a tunnel to another allowed host that claims the rule's
	 * host in its Host header: nothing injected */
	snprintf(req, sizeof(req), "allowed.test:%u", UP);
	fd = connect_via(&b, req, buf, sizeof(buf));
	send_str(fd, "GET /y HTTP/1.1\r\nHost: cred.test\r\n\r\n");
	recv_until(fd, buf, sizeof(buf), "A\n");
	close(fd);
	last_request(last, sizeof(last));
	ok(strncmp(last, "GET /y", 6) == 0 && strstr(last, "s3cret") == NULL,
	   "a Host header naming the rule's host gets nothing elsewhere");

	/* plain HTTP in a tunnel to the rule's host: injected there too */
	snprintf(req, sizeof(req), "cred.test:%u", UP);
	fd = connect_via(&b, req, buf, sizeof(buf));
	send_str(fd, "GET /z HTTP/1.1\r\nHost: cred.test\r\n\r\n");
	recv_until(fd, buf, sizeof(buf), "A\n");
	close(fd);
	last_request(last, sizeof(last));
	ok(strncmp(last, "GET /z", 6) == 0 && strstr(last, "Authorization: Bearer s3cret"),
	   "plain HTTP in a tunnel to the rule's host: injected");
	const struct seen *ev = NULL;
	for (int i = 0; i < 500 && !ev; i++) {
		pthread_mutex_lock(&ev_lock);
		ev = find_event("cred.test", true);
		pthread_mutex_unlock(&ev_lock);
		if (!ev) {
			struct timespec ts = { 0, 10000000 };
			nanosleep(&ts, NULL);
		}
	}
	ok(ev && strcmp(ev->credential, "gh") == 0, "the event names the rule, not its value");
	ward_egress_detach(b.s);
}

static int run(char *const argv[]);

/* HTTPS to a host with a rule: intercepted, the header added upstream -------------- */

static X509 *make_cert(const char *name, X509 *issuer, EVP_PKEY *issuer_key, EVP_PKEY *key)
{
	X509 *c = X509_new();
	X509_set_version(c, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(c), issuer ? 2 : 1);
	X509_gmtime_adj(X509_getm_notBefore(c), -3600);
	X509_gmtime_adj(X509_getm_notAfter(c), 86400);
	X509_NAME_add_entry_by_txt(X509_get_subject_name(c), "CN", MBSTRING_ASC,
				   (const unsigned char *)name, -1, -1, 0);
	X509_set_issuer_name(c, X509_get_subject_name(issuer ? issuer : c));
	X509_set_pubkey(c, key);
	X509V3_CTX ctx;
	X509V3_set_ctx(&ctx, issuer ? issuer : c, c, NULL, NULL, 0);
	char san[300];
	snprintf(san, sizeof(san), "DNS:%s", name);
	const char *exts[][2] = {
		{ "basicConstraints", issuer ? "CA:FALSE" : "critical,CA:TRUE" },
		{ "keyUsage", issuer ? "critical,digitalSignature" : "critical,keyCertSign" },
		{ issuer ? "subjectAltName" : "subjectKeyIdentifier", issuer ? san : "hash" },
	};
	for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
		X509_EXTENSION *e = X509V3_EXT_conf(NULL, &ctx, exts[i][0], exts[i][1]);
		X509_add_ext(c, e, -1);
		X509_EXTENSION_free(e);
	}
	X509_sign(c, issuer_key ? issuer_key : key, EVP_sha256());
	return c;
}

struct tls_up {
	int lfd;
	SSL_CTX *ctx;
	char seen[8192];
};

static void *tls_up_main(void *arg)
{
	struct tls_up *u = arg;
	int fd = accept4(u->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct timeval tv = { 10, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	SSL *s = SSL_new(u->ctx);
	SSL_set_fd(s, fd);
	size_t n = 0;
	if (SSL_accept(s) == 1) {
		int r;
		while (!strstr(u->seen, "\r\n\r\n")
		       && (r = SSL_read(s, u->seen + n, (int)(sizeof(u->seen) - 1 - n))) > 0)
			u->seen[n += (size_t)r] = '\0';
		const char *resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi";
		SSL_write(s, resp, (int)strlen(resp));
		SSL_shutdown(s);
	}
	SSL_free(s);
	close(fd);
	return NULL;
}

static void test_interception(void)
{
	char dir[] = "/tmp/t-egress-XXXXXX", ca_path[64], state[64];
	if (!mkdtemp(dir)) {
		skip("no temporary directory");
		return;
	}
	EVP_PKEY *ca_key = EVP_EC_gen("P-256"), *key = EVP_EC_gen("P-256");
	X509 *ca = make_cert("ward test upstream CA", NULL, NULL, ca_key);
	X509 *cert = make_cert("tls.test", ca, ca_key, key);
	snprintf(ca_path, sizeof(ca_path), "%s/ca.pem", dir);
	snprintf(state, sizeof(state), "%s/state", dir);
	mkdir(state, 0700);
	FILE *f = fopen(ca_path, "w");
	PEM_write_X509(f, ca);
	fclose(f);

	struct tls_up u = { .ctx = SSL_CTX_new(TLS_server_method()) };
	SSL_CTX_use_certificate(u.ctx, cert);
	SSL_CTX_use_PrivateKey(u.ctx, key);
	uint16_t port;
	u.lfd = listen_on("127.0.0.1", 0, SOCK_STREAM, &port);
	pthread_t t;
	pthread_create(&t, NULL, tls_up_main, &u);

	/* a proxy that trusts the test CA for upstreams */
	const char *resolve[] = { "tls.test=127.0.0.1" };
	const char *priv[] = { "127.0.0.1/32" };
	struct ward_egress_config cfg = { .resolve = resolve, .n_resolve = 1,
		.allow_private = priv, .n_allow_private = 1, .ca_file = ca_path, .state_dir = state };
	struct ward_egress *e = NULL;
	struct ward_error err;
	if (!ok(ward_egress_new(&cfg, &e, &err) == 0, "a proxy with a state directory starts"))
		diag("%s", err.message);
	const char *bundle = e ? ward_egress_ca_bundle(e) : NULL;
	ok(bundle != NULL, "its CA bundle exists before any sandbox");
	char *headers[] = { "Authorization: Bearer s3cret" };
	struct ward_egress_credential cred = { .name = "api", .host = "tls.test",
		.headers = headers, .n_headers = 1 };
	struct ward_net_rule r;
	ward_net_rule_parse("tls.test:*", &r, "network.allow", &err);
	struct ward_net_policy p = { .mode = WARD_NET_ALLOWLIST, .allow = &r, .n_allow = 1,
				     .max_connections = 8 };
	struct box b = { .dns = -1 };
	uint16_t dport;
	struct ward_egress_fds fds = {
		.tcp4 = listen_on("127.0.0.1", 0, SOCK_STREAM, &b.port), .tcp6 = -1,
		.dns4 = listen_on("127.0.0.1", 0, SOCK_DGRAM, &dport),
	};
	if (!e || ward_egress_attach(e, "sb-tls", "", &p, &cred, 1, &fds, &b.s, &err) < 0) {
		ok(0, "attach: %s", err.message);
		free(r.host);
		return;
	}
	free(r.host);

	char target[64], buf[512];
	snprintf(target, sizeof(target), "tls.test:%u", port);
	int fd = connect_via(&b, target, buf, sizeof(buf));
	SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_load_verify_locations(cctx, bundle, NULL);
	SSL_CTX_set_verify(cctx, SSL_VERIFY_PEER, NULL);
	SSL *s = SSL_new(cctx);
	SSL_set_tlsext_host_name(s, "tls.test");
	SSL_set1_host(s, "tls.test");
	SSL_set_fd(s, fd);
	int hs = fd >= 0 ? SSL_connect(s) : -1;
	ok(hs == 1, "the program's TLS client trusts the proxy's certificate through the bundle");
	char resp[512] = "";
	if (hs == 1) {
		const char *req = "GET /v1/x HTTP/1.1\r\nHost: tls.test\r\n\r\n";
		SSL_write(s, req, (int)strlen(req));
		int n, got = 0;
		while ((n = SSL_read(s, resp + got, (int)sizeof(resp) - 1 - got)) > 0)
			resp[got += n] = '\0';
	}
	ok(strstr(resp, "200 OK") && strstr(resp, "hi"), "the upstream's answer comes back");
	pthread_join(t, NULL);
	ok(strstr(u.seen, "GET /v1/x HTTP/1.1\r\n") && strstr(u.seen, "\r\nAuthorization: Bearer s3cret\r\n"),
	   "the upstream sees the header over TLS");
	SSL_free(s);
	SSL_CTX_free(cctx);
	if (fd >= 0)
		close(fd);
	ward_egress_detach(b.s);
	ward_egress_free(e);
	SSL_CTX_free(u.ctx);
	close(u.lfd);
	X509_free(cert);
	X509_free(ca);
	EVP_PKEY_free(key);
	EVP_PKEY_free(ca_key);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "%s", dir);
	char *rm[] = { "rm", "-rf", cmd, NULL };
	run(rm);
}

/* A captured connection ------------------------------------------------------------ */

static int run(char *const argv[])
{
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		dup2(null, 2);
		/* ip and nft live in sbin, which an unprivileged PATH lacks */
		static const char *const dirs[] = { "/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/" };
		char path[256];
		for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
			snprintf(path, sizeof(path), "%s%s", dirs[i], argv[0]);
			execv(path, argv);
		}
		_exit(127);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (write(fd, text, strlen(text)) < 0) {
		}
		close(fd);
	}
}

/* The child: a user and network namespace of its own with the capture
 * rules, its listeners passed out; then a program that ignores proxies. */
static void transparent_child(int sock)
{
	char map[64];
	uid_t uid = getuid();
	gid_t gid = getgid();
	if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
		_exit(77);
	write_file("/proc/self/setgroups", "deny");
	snprintf(map, sizeof(map), "0 %u 1", uid);
	write_file("/proc/self/uid_map", map);
	snprintf(map, sizeof(map), "0 %u 1", gid);
	write_file("/proc/self/gid_map", map);
	char *lo[] = { "ip", "link", "set", "lo", "up", NULL };
	/* without "src 127.0.0.1" replies to a redirected connection are lost */
	char *route[] = { "ip", "route", "add", "default", "dev", "lo", "src", "127.0.0.1", NULL };
	char *table[] = { "nft", "add", "table", "inet", "wardt", NULL };
	char *chain[] = { "nft", "add", "chain", "inet", "wardt", "o",
			  "{ type nat hook output priority -100; }", NULL };
	char *rule[] = { "nft", "add", "rule", "inet", "wardt", "o", "meta", "l4proto", "tcp",
			 "ip", "daddr", "!=", "127.0.0.0/8", "redirect", "to", ":3128", NULL };
	if (run(lo) || run(route) || run(table) || run(chain) || run(rule))
		_exit(77);
	uint16_t p;
	int fds[2] = { listen_on("127.0.0.1", 3128, SOCK_STREAM, &p),
		       listen_on("127.0.0.1", 53, SOCK_DGRAM, &p) };
	if (fds[0] < 0 || fds[1] < 0)
		_exit(77);
	char cbuf[CMSG_SPACE(sizeof(fds))] = { 0 }, one = 'f';
	struct iovec iov = { &one, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	if (sendmsg(sock, &m, 0) < 0 || read(sock, &one, 1) != 1)
		_exit(2);

	/* the program: resolves through the stub, connects directly */
	struct box b = { .dns = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0) };
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(53) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	connect(b.dns, (struct sockaddr *)&a, sizeof(a));
	int an = 0;
	uint32_t fake = 0;
	unsigned char result = 0;
	if (ask(&b, "allowed.test", 1, &an, &fake) == 0 && fake) {
		result |= 4;
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		a.sin_port = htons(UP);
		a.sin_addr.s_addr = htonl(fake);
		char buf[64];
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
			result |= 8;
			send_str(fd, "ping\n");
			recv_until(fd, buf, sizeof(buf), "\n");
			result |= strcmp(buf, "A\n") == 0 ? 1 : 0;
		}
		close(fd);
	}
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	inet_pton(AF_INET, "203.0.113.5", &a.sin_addr);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
		char buf[64];
		if (write(fd, "ping\n", 5) < 0 || recv_until(fd, buf, sizeof(buf), "\n") <= 0)
			result |= 2;     /* reset or closed, nothing answered */
	} else {
		result |= 2;
	}
	close(fd);
	if (write(sock, &result, 1) != 1)
		_exit(2);
	_exit(0);
}

static void test_transparent(void)
{
	int sv[2];
	socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[0]);
		transparent_child(sv[1]);
	}
	close(sv[1]);
	int fds[2] = { -1, -1 };
	char one, cbuf[CMSG_SPACE(sizeof(fds))];
	struct iovec iov = { &one, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };
	if (recvmsg(sv[0], &m, 0) <= 0 || !CMSG_FIRSTHDR(&m)) {
		int st = 0;
		waitpid(pid, &st, 0);
		skip("no user and network namespace with nft capture rules here (exit %d)",
		     WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		skip("see above");
		close(sv[0]);
		return;
	}
	memcpy(fds, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(fds));
	struct ward_net_policy p;
	policy_of(&p, "allowed.test:%u", NULL);
	struct ward_egress_fds efds = { .tcp4 = fds[0], .tcp6 = -1, .dns4 = fds[1] };
	struct ward_egress_sandbox *s = NULL;
	struct ward_error err;
	ok(ward_egress_attach(E, "sb-t", "", &p, NULL, 0, &efds, &s, &err) == 0, "attach the namespace's listeners");
	policy_free(&p);
	unsigned char result = 0;
	if (write(sv[0], "g", 1) != 1 || read(sv[0], &result, 1) != 1)
		result = 0;
	int st = 0;
	waitpid(pid, &st, 0);
	if (!ok(result & 1, "a captured connection to the stub's address reaches the allowed name")) {
		struct ward_net_usage u;
		ward_egress_usage(s, &u);
		diag("child: %s %s", result & 4 ? "resolved" : "no answer from the stub",
		     result & 8 ? "connected" : "not connected");
		pthread_mutex_lock(&ev_lock);
		for (size_t i = 0; i < n_events; i++)
			diag("event %s %s:%u %s allowed=%d end=%d out=%llu in=%llu '%s'", events[i].via, events[i].host,
			     events[i].port, events[i].addr, events[i].allowed, events[i].end,
			     (unsigned long long)events[i].out, (unsigned long long)events[i].in, events[i].reason);
		pthread_mutex_unlock(&ev_lock);
		for (size_t i = 0; i < u.n_denied; i++)
			diag("denied %s:%u: %s", u.denied[i].host, u.denied[i].port, u.denied[i].reason);
	}
	ok(result & 2, "a captured connection to an address not allowed is reset");
	struct ward_net_denial d;
	char want[64];
	snprintf(want, sizeof(want), "203.0.113.5");
	ok(ward_egress_last_denial(s, &d) == 0 && strcmp(d.host, want) == 0 && d.port == UP
	   && strcmp(d.reason, "not in the allowlist") == 0, "... recorded as not in the allowlist");
	ward_egress_detach(s);
	close(sv[0]);
}

int main(void)
{
	upstream_start(&UA, "127.0.0.1", 0, 'A');
	UP = UA.port;
	struct upstream UB;
	upstream_start(&UB, "127.0.0.2", UP, 'B');   /* the same port on another loopback */
	uint16_t dns_port;
	int dns_fd = listen_on("127.0.0.1", 0, SOCK_DGRAM, &dns_port);
	pthread_t dt;
	pthread_create(&dt, NULL, rebind_dns, &dns_fd);
	pthread_detach(dt);

	char dns[64];
	snprintf(dns, sizeof(dns), "127.0.0.1:%u", dns_port);
	const char *resolve[] = { "allowed.test=127.0.0.1", "other.test=127.0.0.1",
		"good.deny.test=127.0.0.1", "evil.deny.test=127.0.0.1", "bad.test=127.0.0.2",
		"meta.test=169.254.169.254", "events.test=127.0.0.1",
		"cred.test=127.0.0.1" };
	const char *priv[] = { "127.0.0.1/32" };
	const char *servers[] = { dns };
	struct ward_egress_config cfg = {
		.resolve = resolve, .n_resolve = 8,
		.allow_private = priv, .n_allow_private = 1,
		.dns_servers = servers, .n_dns_servers = 1,
		.on_event = on_event,
	};
	struct ward_error err;
	if (!ok(ward_egress_new(&cfg, &E, &err) == 0, "the proxy starts"))
		diag("%s", err.message);
	const char *bad[] = { "nothing" };
	struct ward_egress_config bad_cfg = { .resolve = bad, .n_resolve = 1 };
	struct ward_egress *e2 = NULL;
	ok(ward_egress_new(&bad_cfg, &e2, &err) == -EINVAL && strstr(err.message, "resolve 'nothing'"),
	   "a bad resolve entry is named");

	test_connect();
	test_http_forward();
	test_http_forward_head();
	test_socks_dns();
	test_limits_and_usage();
	test_large();
	test_events_update();
	test_rebinding(dns_port, UB.fd >= 0);
	test_transparent();
	test_credentials();
	test_interception();
	ward_egress_free(E);
	return tap_done();
}
