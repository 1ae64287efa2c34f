/* lib/egress/dns.c — the sandbox's DNS stub (a bounded query parser, the
 * reply, the per-sandbox table of fake addresses) and the proxy's own
 * resolver (c-ares, on the connection's thread, with a deadline). The stub
 * never asks anyone: it answers allowed names with an address from
 * 198.18.0.0/15 that the proxy maps back, so no query made inside a sandbox
 * ever leaves it. */
#include <arpa/inet.h>
#include <ares.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "egress/internal.h"
#include "base/util.h"

uint32_t egress_fake_assign(struct egress_fake *f, const char *name)
{
	uint32_t addr = 0;
	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < f->n; i++)
		if (strcmp(f->names[i], name) == 0) {
			addr = WARD_EGRESS_FAKE_NET + 1 + (uint32_t)i;
			goto out;
		}
	if (f->n < EGRESS_FAKE_MAX && (f->names[f->n] = strdup(name)) != NULL) {
		addr = WARD_EGRESS_FAKE_NET + 1 + (uint32_t)f->n;
		f->n++;
	}
out:
	pthread_mutex_unlock(&f->lock);
	return addr;
}

bool egress_fake_lookup(struct egress_fake *f, uint32_t addr, char *buf, size_t len)
{
	bool found = false;
	if (addr <= WARD_EGRESS_FAKE_NET)
		return false;
	uint32_t i = addr - WARD_EGRESS_FAKE_NET - 1;
	pthread_mutex_lock(&f->lock);
	if (i < f->n) {
		ward_strlcpy(buf, f->names[i], len);
		found = true;
	}
	pthread_mutex_unlock(&f->lock);
	return found;
}

void egress_fake_release(struct egress_fake *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->names[i]);
	f->n = 0;
	pthread_mutex_destroy(&f->lock);
}

static uint16_t get16(const unsigned char *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void put16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
}

int egress_dns_parse_query(const unsigned char *buf, size_t len, struct egress_dns_query *q)
{
	if (len < 12 || len > EGRESS_DNS_MAX)
		return -EINVAL;
	q->id = get16(buf);
	q->flags = get16(buf + 2);
	/* a query (QR 0), opcode 0, exactly one question, nothing else that
	 * would need reading (EDNS in the additional section is ignored) */
	if ((q->flags & 0x8000) || ((q->flags >> 11) & 0xf) != 0 || get16(buf + 4) != 1
	    || get16(buf + 6) != 0 || get16(buf + 8) != 0)
		return -EINVAL;
	size_t at = 12, out = 0;
	for (;;) {
		if (at >= len)
			return -EINVAL;
		unsigned l = buf[at++];
		if (l == 0)
			break;
		if (l > 63 || at + l > len)   /* compression pointers included */
			return -EINVAL;
		if (out + l + 1 >= sizeof(q->name))
			return -EINVAL;
		if (out)
			q->name[out++] = '.';
		for (unsigned i = 0; i < l; i++) {
			unsigned char ch = buf[at + i];
			if (ch == '.' || ch < 0x21 || ch > 0x7e)
				return -EINVAL;
			q->name[out++] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
		}
		at += l;
	}
	if (out == 0 || at + 4 > len)
		return -EINVAL;
	q->name[out] = '\0';
	q->qtype = get16(buf + at);
	q->qclass = get16(buf + at + 2);
	q->question_end = at + 4;
	return 0;
}

size_t egress_dns_reply(const unsigned char *buf, const struct egress_dns_query *q, int rcode,
			uint32_t addr, unsigned char *out, size_t out_len)
{
	size_t n = q->question_end;
	if (n + (addr ? 16 : 0) > out_len)
		return 0;
	memcpy(out, buf, n);
	/* QR, the query's RD, RA; the rcode */
	put16(out + 2, (uint16_t)(0x8000 | (q->flags & 0x0100) | 0x0080 | (rcode & 0xf)));
	put16(out + 4, 1);
	put16(out + 6, addr ? 1 : 0);
	put16(out + 8, 0);
	put16(out + 10, 0);
	if (addr) {
		unsigned char *r = out + n;
		put16(r, 0xc00c);          /* the name: a pointer to the question's */
		put16(r + 2, 1);           /* A */
		put16(r + 4, 1);           /* IN */
		put16(r + 6, 0);
		put16(r + 8, 5);           /* TTL 5 s: the table may change */
		put16(r + 10, 4);
		uint32_t be = htonl(addr);
		memcpy(r + 12, &be, 4);
		n += 16;
	}
	return n;
}

/* The resolver ----------------------------------------------------------- */

static pthread_once_t ares_once = PTHREAD_ONCE_INIT;
static int ares_init_rc = ARES_ENOTINITIALIZED;

static void ares_init_once(void)
{
	ares_init_rc = ares_library_init(ARES_LIB_INIT_ALL);
}

struct resolve_ctx {
	bool done;
	int status;
	struct egress_addrs *out;
};

static void on_addrinfo(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
	struct resolve_ctx *r = arg;
	(void)timeouts;
	r->done = true;
	r->status = status;
	if (status == ARES_SUCCESS && res) {
		for (struct ares_addrinfo_node *n = res->nodes; n && r->out->n < EGRESS_ADDRS_MAX;
		     n = n->ai_next) {
			struct egress_addr *a = &r->out->a[r->out->n];
			memset(a, 0, sizeof(*a));
			if (n->ai_family == AF_INET) {
				a->family = AF_INET;
				memcpy(a->a, &((struct sockaddr_in *)(void *)n->ai_addr)->sin_addr, 4);
			} else if (n->ai_family == AF_INET6) {
				a->family = AF_INET6;
				memcpy(a->a, &((struct sockaddr_in6 *)(void *)n->ai_addr)->sin6_addr, 16);
			} else {
				continue;
			}
			r->out->n++;
		}
	}
	if (res)
		ares_freeaddrinfo(res);
}

/* Drives the channel until the callback ran or the deadline passed. */
static void resolve_wait(ares_channel ch, struct resolve_ctx *r, int timeout_ms)
{
	uint64_t deadline = ward_now_ns() + (uint64_t)timeout_ms * 1000000u;
	while (!r->done) {
		ares_socket_t socks[ARES_GETSOCK_MAXNUM];
		int bits = ares_getsock(ch, socks, ARES_GETSOCK_MAXNUM);
		struct pollfd pfd[ARES_GETSOCK_MAXNUM];
		nfds_t n = 0;
		for (int i = 0; i < ARES_GETSOCK_MAXNUM; i++) {
			short ev = 0;
			/* c-ares' own macros shift a signed 1 into the sign bit */
			if ((unsigned)bits & (1u << i))
				ev |= POLLIN;
			if ((unsigned)bits & (1u << (i + ARES_GETSOCK_MAXNUM)))
				ev |= POLLOUT;
			if (ev) {
				pfd[n].fd = socks[i];
				pfd[n].events = ev;
				pfd[n].revents = 0;
				n++;
			}
		}
		uint64_t now = ward_now_ns();
		if (now >= deadline)
			break;
		struct timeval tv, *tvp, maxtv = { 1, 0 };
		tvp = ares_timeout(ch, &maxtv, &tv);
		int wait = (int)(tvp->tv_sec * 1000 + tvp->tv_usec / 1000) + 1;
		int left = (int)((deadline - now) / 1000000u) + 1;
		int rc = poll(pfd, n, wait < left ? wait : left);
		if (rc < 0 && errno != EINTR)
			break;
		if (rc <= 0) {
			ares_process_fd(ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
			continue;
		}
		for (nfds_t i = 0; i < n && !r->done; i++)
			ares_process_fd(ch,
				(pfd[i].revents & (POLLIN | POLLERR | POLLHUP)) ? pfd[i].fd : ARES_SOCKET_BAD,
				(pfd[i].revents & POLLOUT) ? pfd[i].fd : ARES_SOCKET_BAD);
	}
}

int egress_resolve(const char *name, const char *servers_csv, int timeout_ms,
		   struct egress_addrs *out, const char **why)
{
	out->n = 0;
	pthread_once(&ares_once, ares_init_once);
	if (ares_init_rc != ARES_SUCCESS) {
		*why = ares_strerror(ares_init_rc);
		return -EIO;
	}
	struct ares_options opt = {
		/* no search list, no hosts file: the name is asked as given */
		.flags = ARES_FLAG_NOSEARCH | ARES_FLAG_NOALIASES,
		.timeout = timeout_ms / 3 > 0 ? timeout_ms / 3 : 1,
		.tries = 2,
		.lookups = (char *)"b",
	};
	ares_channel ch;
	int rc = ares_init_options(&ch, &opt,
		ARES_OPT_FLAGS | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_LOOKUPS);
	if (rc != ARES_SUCCESS) {
		*why = ares_strerror(rc);
		return -EIO;
	}
	if (servers_csv && (rc = ares_set_servers_ports_csv(ch, servers_csv)) != ARES_SUCCESS) {
		ares_destroy(ch);
		*why = ares_strerror(rc);
		return -EIO;
	}
	struct resolve_ctx r = { .out = out };
	struct ares_addrinfo_hints hints = { .ai_family = AF_UNSPEC, .ai_flags = ARES_AI_NOSORT };
	ares_getaddrinfo(ch, name, NULL, &hints, on_addrinfo, &r);
	resolve_wait(ch, &r, timeout_ms);
	ares_destroy(ch);     /* runs the callback with ARES_EDESTRUCTION if pending */
	if (!r.done || r.status == ARES_ETIMEOUT || r.status == ARES_EDESTRUCTION) {
		*why = ares_strerror(ARES_ETIMEOUT);
		return -EIO;
	}
	if (r.status == ARES_ENOTFOUND || r.status == ARES_ENODATA
	    || (r.status == ARES_SUCCESS && out->n == 0))
		return -ENOENT;
	if (r.status != ARES_SUCCESS) {
		*why = ares_strerror(r.status);
		return -EIO;
	}
	return 0;
}
