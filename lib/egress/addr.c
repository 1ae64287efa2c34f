/* lib/egress/addr.c — which addresses the egress proxy refuses, and what
 * counts as an address. A destination spelled as a number in any form
 * (decimal, octal, hex, short dotted, bracketed IPv6, IPv4-mapped) is an
 * address, judged as one: it must never reach a resolver as a name. No
 * syscalls, no allocation. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "egress/internal.h"
#include "base/util.h"

struct range {
	unsigned char net[16];
	unsigned bits;
	const char *name;
};

/* Checked in order: the first match names the range (metadata before
 * link-local, the broadcast address before 240/4). */
static const struct range v4_refused[] = {
	{ { 169, 254, 169, 254 }, 32, "metadata" },
	{ { 0 }, 8, "unspecified" },
	{ { 10 }, 8, "private" },
	{ { 100, 64 }, 10, "cgnat" },
	{ { 127 }, 8, "loopback" },
	{ { 169, 254 }, 16, "link-local" },
	{ { 172, 16 }, 12, "private" },
	{ { 192, 0, 0 }, 24, "reserved" },
	{ { 192, 0, 2 }, 24, "documentation" },
	{ { 192, 168 }, 16, "private" },
	{ { 198, 18 }, 15, "benchmark" },
	{ { 198, 51, 100 }, 24, "documentation" },
	{ { 203, 0, 113 }, 24, "documentation" },
	{ { 224 }, 4, "multicast" },
	{ { 255, 255, 255, 255 }, 32, "reserved" },
	{ { 240 }, 4, "reserved" },
};

static const struct range v6_refused[] = {
	{ { 0 }, 128, "unspecified" },
	{ { [15] = 1 }, 128, "loopback" },
	{ { 0xfd, 0x00, 0x0e, 0xc2, [15] = 0x54, [14] = 0x02 }, 128, "metadata" },
	{ { 0xfc }, 7, "private" },
	{ { 0xfe, 0x80 }, 10, "link-local" },
	{ { 0xff }, 8, "multicast" },
	{ { 0x20, 0x01, 0x0d, 0xb8 }, 32, "documentation" },
	{ { 0 }, 96, "reserved" },     /* IPv4-compatible, deprecated */
};

static bool prefix_eq(const unsigned char *a, const unsigned char *net, unsigned bits)
{
	unsigned full = bits / 8, rest = bits % 8;
	if (memcmp(a, net, full) != 0)
		return false;
	if (rest == 0)
		return true;
	unsigned char mask = (unsigned char)(0xffu << (8 - rest));
	return (a[full] & mask) == (net[full] & mask);
}

/* The IPv4 address an IPv6 one carries, when it is IPv4-mapped
 * (::ffff:0:0/96) or NAT64 (64:ff9b::/96). */
static bool v6_inner_v4(const unsigned char *a, struct egress_addr *v4)
{
	static const unsigned char mapped[12] = { [10] = 0xff, [11] = 0xff };
	static const unsigned char nat64[12] = { 0x00, 0x64, 0xff, 0x9b };
	if (memcmp(a, mapped, 12) != 0 && memcmp(a, nat64, 12) != 0)
		return false;
	v4->family = AF_INET;
	memset(v4->a, 0, sizeof(v4->a));
	memcpy(v4->a, a + 12, 4);
	return true;
}

const char *egress_addr_refused(const struct egress_addr *a)
{
	if (a->family == AF_INET) {
		for (size_t i = 0; i < sizeof(v4_refused) / sizeof(v4_refused[0]); i++)
			if (prefix_eq(a->a, v4_refused[i].net, v4_refused[i].bits))
				return v4_refused[i].name;
		return NULL;
	}
	struct egress_addr v4;
	if (v6_inner_v4(a->a, &v4))
		return egress_addr_refused(&v4);
	for (size_t i = 0; i < sizeof(v6_refused) / sizeof(v6_refused[0]); i++)
		if (prefix_eq(a->a, v6_refused[i].net, v6_refused[i].bits))
			return v6_refused[i].name;
	return NULL;
}

bool egress_cidr_contains(const struct egress_cidr *c, const struct egress_addr *a)
{
	struct egress_addr v4;
	if (c->net.family == AF_INET && a->family == AF_INET6 && v6_inner_v4(a->a, &v4)
	    && a->a[0] == 0)   /* IPv4-mapped only: NAT64 is another host */
		a = &v4;
	if (c->net.family != a->family)
		return false;
	return prefix_eq(a->a, c->net.a, c->prefix);
}

int egress_cidr_parse(const char *text, struct egress_cidr *c)
{
	char buf[INET6_ADDRSTRLEN + 8];
	if (ward_strlcpy(buf, text, sizeof(buf)) >= sizeof(buf))
		return -EINVAL;
	char *slash = strchr(buf, '/');
	if (slash)
		*slash = '\0';
	memset(c, 0, sizeof(*c));
	if (inet_pton(AF_INET, buf, c->net.a) == 1)
		c->net.family = AF_INET;
	else if (inet_pton(AF_INET6, buf, c->net.a) == 1)
		c->net.family = AF_INET6;
	else
		return -EINVAL;
	unsigned max = c->net.family == AF_INET ? 32 : 128;
	c->prefix = max;
	if (slash) {
		char *end;
		if (!isdigit((unsigned char)slash[1]))
			return -EINVAL;
		unsigned long p = strtoul(slash + 1, &end, 10);
		if (*end || p > max)
			return -EINVAL;
		c->prefix = (unsigned)p;
	}
	/* host bits must be zero: "10.0.0.1/8" is a mistake worth naming */
	for (unsigned bit = c->prefix; bit < max; bit++)
		if (c->net.a[bit / 8] & (0x80u >> (bit % 8)))
			return -EINVAL;
	return 0;
}

const char *egress_addr_str(const struct egress_addr *a, char *buf, size_t len)
{
	if (!inet_ntop(a->family, a->a, buf, (socklen_t)len))
		ward_strlcpy(buf, "?", len);
	return buf;
}

bool egress_addr_equal(const struct egress_addr *x, const struct egress_addr *y)
{
	return x->family == y->family
		&& memcmp(x->a, y->a, x->family == AF_INET ? 4 : 16) == 0;
}

/* A label that is a number in a spelling inet_aton reads ("127", "0x7f",
 * "0177"): a name ending in one is meant as an address. */
static bool numeric_label(const char *s, size_t n)
{
	if (n == 0)
		return false;
	size_t i = 0;
	if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		for (i = 2; i < n; i++)
			if (!isxdigit((unsigned char)s[i]))
				return false;
		return true;
	}
	for (; i < n; i++)
		if (!isdigit((unsigned char)s[i]))
			return false;
	return true;
}

/* A host name as DNS knows it: labels of letters, digits, '-' and '_',
 * 1..63 bytes, 253 in all. */
static bool valid_name(const char *s, size_t n, size_t *last_label)
{
	if (n == 0 || n > 253)
		return false;
	size_t label = 0;
	*last_label = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch == '.') {
			if (label == 0)
				return false;
			label = 0;
			*last_label = i + 1;
			continue;
		}
		if (!isalnum(ch) && ch != '-' && ch != '_')
			return false;
		if (++label > 63)
			return false;
	}
	return label > 0;
}

int egress_addr_literal(const char *name, struct egress_addr *a)
{
	char buf[256];
	size_t n = strlen(name);
	if (n == 0 || n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, name, n + 1);
	memset(a, 0, sizeof(*a));
	if (buf[0] == '[') {
		if (buf[n - 1] != ']')
			return -EINVAL;
		buf[n - 1] = '\0';
		if (inet_pton(AF_INET6, buf + 1, a->a) != 1)
			return -EINVAL;
		a->family = AF_INET6;
		return 1;
	}
	if (strchr(buf, ':')) {
		if (inet_pton(AF_INET6, buf, a->a) != 1)
			return -EINVAL;
		a->family = AF_INET6;
		return 1;
	}
	if (buf[n - 1] == '.')          /* "127.0.0.1." is still 127.0.0.1 */
		buf[--n] = '\0';
	size_t last;
	if (!valid_name(buf, n, &last))
		return -EINVAL;
	struct in_addr in;
	/* valid_name let no space through, so inet_aton's "ignore what
	 * follows a space" cannot hide anything */
	if (inet_aton(buf, &in) == 1) {
		a->family = AF_INET;
		memcpy(a->a, &in, 4);
		return 1;
	}
	return numeric_label(buf + last, n - last) ? -EINVAL : 0;
}
