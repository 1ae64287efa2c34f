/* lib/policy/net.c — one entry of network.allow / network.deny: parse it,
 * print it, and say whether it covers a destination.
 *
 * Entries come from policy files, flags and API clients, so the parser is
 * strict: a name is a DNS name in its ASCII form (punycode), an address is
 * written as an address (a CIDR), never as a name that some resolver would
 * read as one ("127.1", "0x7f000001", "2130706433"). Pure functions over
 * memory: no syscalls, no locale, no allocation beyond the stored name.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "base/util.h"
#include "policy/internal.h"

#define EXPECTED "expected HOST, *.DOMAIN, HOST:PORT, HOST:* or a CIDR"

enum { NAME_MAX_LEN = 253, LABEL_MAX_LEN = 63, ENTRY_MAX_LEN = 300 };

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_hex(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool label_char(char c)
{
	return (c >= 'a' && c <= 'z') || is_digit(c) || c == '-';
}

/* A decimal number without sign or leading zeros, at most max. */
static int parse_number(const char *s, size_t len, unsigned long max, unsigned long *out)
{
	unsigned long v = 0;
	if (len == 0 || len > 10 || (len > 1 && s[0] == '0'))
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (!is_digit(s[i]))
			return -EINVAL;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

/* "123", "0x7f" or "0X7F": a label an inet_aton-style resolver reads as a
 * number, so a name ending in one is an address in disguise. */
static bool numeric_label(const char *s, size_t len)
{
	size_t i = 0;
	if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		for (i = 2; i < len && is_hex(s[i]); i++)
			;
		return i == len;
	}
	for (; i < len && is_digit(s[i]); i++)
		;
	return len > 0 && i == len;
}

/* Checks a lowercased name without a trailing dot; on failure says why in
 * why (a static string). */
static bool name_valid(const char *s, size_t len, const char **why)
{
	size_t start = 0;
	if (len == 0) {
		*why = "an empty name";
		return false;
	}
	if (len > NAME_MAX_LEN) {
		*why = "a name longer than 253 bytes";
		return false;
	}
	for (size_t i = 0; i <= len; i++) {
		if (i < len && s[i] != '.') {
			if ((unsigned char)s[i] >= 0x80) {
				*why = "an internationalized name must be given in its ASCII form (punycode, \"xn--...\")";
				return false;
			}
			if (!label_char(s[i])) {
				*why = "a name may hold only letters, digits, '-' and '.'";
				return false;
			}
			continue;
		}
		size_t n = i - start;
		if (n == 0) {
			*why = "a name has an empty label";
			return false;
		}
		if (n > LABEL_MAX_LEN) {
			*why = "a label is longer than 63 bytes";
			return false;
		}
		if (s[start] == '-' || s[i - 1] == '-') {
			*why = "a label may not start or end with '-'";
			return false;
		}
		start = i + 1;
	}
	return true;
}

/* The last label of a name is never a number in DNS; an address spelled as
 * a name ("127.1", "2130706433", "10.0.0.0x1") is refused with the address
 * it stands for where inet_aton reads one. */
static int refuse_address_name(const char *name, const char *text, const char *where,
			       struct ward_error *err)
{
	const char *dot = strrchr(name, '.');
	const char *last = dot ? dot + 1 : name;
	char q[WP_GOT_MAX];
	struct in_addr a;
	if (!numeric_label(last, strlen(last)))
		return 0;
	if (inet_aton(name, &a)) {
		char buf[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &a, buf, sizeof(buf));
		return wp_fail(err, where,
			       "%s is an address, not a host name; write it as a CIDR: \"%s\" (or \"%s/32\")",
			       wp_quote(text, q, sizeof(q)), buf, buf);
	}
	return wp_fail(err, where,
		       "%s is not a host name (its last label is a number); write an address as a CIDR like \"10.0.0.1\" or \"10.0.0.0/8\"",
		       wp_quote(text, q, sizeof(q)));
}

static int bad_entry(const char *text, const char *why, const char *where,
		     struct ward_error *err)
{
	char q[WP_GOT_MAX];
	if (why)
		return wp_fail(err, where, EXPECTED ", got %s: %s", wp_quote(text, q, sizeof(q)),
			       why);
	return wp_fail(err, where, EXPECTED ", got %s", wp_quote(text, q, sizeof(q)));
}

/* ":443" or ":*" after the host part, or nothing. */
static int parse_port(const char *s, struct ward_net_rule *r, const char *text,
		      const char *where, struct ward_error *err)
{
	char q[WP_GOT_MAX];
	unsigned long v;
	if (!*s)
		return 0;
	if (*s != ':')
		return bad_entry(text, NULL, where, err);
	s++;
	if (strcmp(s, "*") == 0) {
		r->any_port = true;
		return 0;
	}
	int rc = parse_number(s, strlen(s), 65535, &v);
	if (rc == -EINVAL && *s)
		for (const char *c = s; *c; c++)
			if (!is_digit(*c))
				return bad_entry(text, "a port is a number from 1 to 65535, or \"*\"",
						 where, err);
	if (rc < 0 || v == 0)
		return wp_fail(err, where, "%s: the port must be between 1 and 65535 (or \"*\" for every port)",
			       wp_quote(text, q, sizeof(q)));
	r->port = (uint16_t)v;
	return 0;
}

/* Sets the address bits beyond prefix to zero in a copy and says whether
 * the original had any set. */
static bool host_bits_set(const unsigned char *addr, unsigned prefix, size_t bytes,
			  unsigned char *net)
{
	bool set = false;
	for (size_t i = 0; i < bytes; i++) {
		unsigned keep = prefix >= (i + 1) * 8 ? 8 : prefix > i * 8 ? prefix - (unsigned)i * 8 : 0;
		unsigned char mask = (unsigned char)(keep ? 0xffu << (8 - keep) : 0);
		net[i] = addr[i] & mask;
		set |= net[i] != addr[i];
	}
	return set;
}

/* "ADDR" or "ADDR/N" (the address part of an entry), v4 or v6. */
static int parse_cidr(const char *s, size_t len, struct ward_net_rule *r, const char *text,
		      const char *where, struct ward_error *err)
{
	char addr[INET6_ADDRSTRLEN + 8], q[WP_GOT_MAX];
	const char *slash = memchr(s, '/', len);
	size_t alen = slash ? (size_t)(slash - s) : len;
	unsigned long prefix;
	unsigned char bin[16];

	if (alen == 0 || alen >= INET6_ADDRSTRLEN)
		return bad_entry(text, NULL, where, err);
	memcpy(addr, s, alen);
	addr[alen] = '\0';
	if (inet_pton(AF_INET, addr, bin) == 1)
		r->family = AF_INET;
	else if (inet_pton(AF_INET6, addr, bin) == 1)
		r->family = AF_INET6;
	else
		return bad_entry(text, "not an IPv4 or IPv6 address", where, err);
	unsigned max = r->family == AF_INET ? 32 : 128;
	prefix = max;
	if (slash && parse_number(slash + 1, len - alen - 1, max, &prefix) < 0)
		return wp_fail(err, where, "%s: the prefix length must be a number from 0 to %u",
			       wp_quote(text, q, sizeof(q)), max);
	r->kind = WARD_NET_RULE_CIDR;
	r->prefix = (unsigned)prefix;
	size_t bytes = r->family == AF_INET ? 4 : 16;
	if (host_bits_set(bin, r->prefix, bytes, r->addr)) {
		char shown[INET6_ADDRSTRLEN];
		inet_ntop(r->family, r->addr, shown, sizeof(shown));
		return wp_fail(err, where,
			       "%s has host bits set beyond the /%u prefix; did you mean \"%s/%u\"?",
			       wp_quote(text, q, sizeof(q)), r->prefix, shown, r->prefix);
	}
	return 0;
}

/* A name, "*.name", or an IPv4 address or CIDR: the part before ":PORT". */
static int parse_host(const char *s, size_t len, struct ward_net_rule *r, const char *text,
		      const char *where, struct ward_error *err)
{
	char name[ENTRY_MAX_LEN + 1];
	const char *why = NULL;
	bool suffix = len > 2 && s[0] == '*' && s[1] == '.';

	if (len == 0)
		return bad_entry(text, "no host", where, err);
	if (!suffix && (memchr(s, '/', len) || is_digit(s[len - 1]) ||
			(len > 1 && s[len - 1] == '.' && is_digit(s[len - 2])))) {
		/* an address (or a name ending in a number, refused below) */
		char tmp[ENTRY_MAX_LEN + 1];
		memcpy(tmp, s, len);
		tmp[len] = '\0';
		unsigned char bin[4];
		if (memchr(s, '/', len) || inet_pton(AF_INET, tmp, bin) == 1)
			return parse_cidr(s, len, r, text, where, err);
	}
	if (suffix) {
		s += 2;
		len -= 2;
	}
	if (len > 0 && s[len - 1] == '.')
		len--;  /* "example.com." is the same name */
	for (size_t i = 0; i < len; i++)
		name[i] = s[i] >= 'A' && s[i] <= 'Z' ? (char)(s[i] - 'A' + 'a') : s[i];
	name[len] = '\0';
	if (strchr(name, '*'))
		return bad_entry(text, "'*' may only be the whole first label, as in \"*.example.com\"",
				 where, err);
	if (!name_valid(name, len, &why))
		return bad_entry(text, why, where, err);
	int rc = refuse_address_name(name, text, where, err);
	if (rc < 0)
		return rc;
	r->kind = suffix ? WARD_NET_RULE_SUFFIX : WARD_NET_RULE_HOST;
	r->host = strdup(name);
	return r->host ? 0 : wp_nomem(err, where);
}

/* "[v6]", "[v6]:PORT", "[v6]/N:PORT". */
static int parse_bracketed(const char *text, struct ward_net_rule *r, const char *where,
			   struct ward_error *err)
{
	char buf[ENTRY_MAX_LEN + 1];
	const char *close = strchr(text, ']');
	if (!close)
		return bad_entry(text, "a '[' without its ']'", where, err);
	size_t alen = (size_t)(close - text - 1);
	const char *rest = close + 1;
	const char *prefix_end = rest;
	if (*rest == '/')
		for (prefix_end = rest + 1; is_digit(*prefix_end); prefix_end++)
			;
	/* the address and its prefix as one "ADDR/N" */
	size_t plen = (size_t)(prefix_end - rest);
	if (alen + plen >= sizeof(buf) || memchr(text + 1, ':', alen) == NULL)
		return bad_entry(text, "brackets are for IPv6 addresses", where, err);
	memcpy(buf, text + 1, alen);
	memcpy(buf + alen, rest, plen);
	buf[alen + plen] = '\0';
	int rc = parse_cidr(buf, alen + plen, r, text, where, err);
	if (rc == 0 && r->family != AF_INET6)
		return bad_entry(text, "brackets are for IPv6 addresses", where, err);
	return rc < 0 ? rc : parse_port(prefix_end, r, text, where, err);
}

/* The parser behind ward_net_rule_parse: messages start with `where`, and
 * err->field is left to the caller. On error *r holds nothing. */
int wp_net_rule_parse(const char *text, struct ward_net_rule *r, const char *where,
		      struct ward_error *err)
{
	int rc;
	*r = (struct ward_net_rule){ 0 };
	if (!text)
		return bad_entry("", NULL, where, err);
	size_t len = strlen(text);
	if (len == 0 || len > ENTRY_MAX_LEN)
		return bad_entry(text, len ? "longer than 300 bytes" : NULL, where, err);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)text[i] <= 0x20 || text[i] == 0x7f)
			return bad_entry(text, NULL, where, err);
	const char *first = strchr(text, ':'), *last = strrchr(text, ':');
	if (text[0] == '[') {
		rc = parse_bracketed(text, r, where, err);
	} else if (first && first != last) {
		/* an IPv6 address or CIDR without a port */
		char a[INET6_ADDRSTRLEN];
		unsigned char bin[16];
		size_t alen = strcspn(text, "/");
		if (alen >= sizeof(a))
			alen = sizeof(a) - 1;
		memcpy(a, text, alen);
		a[alen] = '\0';
		if (inet_pton(AF_INET6, a, bin) != 1)
			rc = bad_entry(text, "an IPv6 address with a port needs brackets, as in \"[2001:db8::1]:443\"",
				       where, err);
		else
			rc = parse_cidr(text, len, r, text, where, err);
	} else {
		size_t hlen = first ? (size_t)(first - text) : len;
		rc = parse_host(text, hlen, r, text, where, err);
		if (rc == 0)
			rc = parse_port(text + hlen, r, text, where, err);
	}
	if (rc < 0)
		wp_net_rule_release(r);
	return rc;
}

void wp_net_rule_release(struct ward_net_rule *r)
{
	free(r->host);
	*r = (struct ward_net_rule){ 0 };
}

WARD_EXPORT int ward_net_rule_parse(const char *text, struct ward_net_rule *r,
				    const char *field, struct ward_error *err)
{
	const char *f = field ? field : "network";
	return wp_field(err, wp_net_rule_parse(text, r, f, err), f);
}

WARD_EXPORT char *ward_net_rule_format(const struct ward_net_rule *r, char *buf, size_t len)
{
	char addr[INET6_ADDRSTRLEN], host[INET6_ADDRSTRLEN + 8], port[8] = "";
	bool v6 = r->kind == WARD_NET_RULE_CIDR && r->family == AF_INET6;
	bool has_port = r->any_port || r->port;

	if (r->any_port)
		ward_strlcpy(port, ":*", sizeof(port));
	else if (r->port)
		snprintf(port, sizeof(port), ":%u", (unsigned)r->port);
	if (r->kind != WARD_NET_RULE_CIDR) {
		snprintf(buf, len, "%s%s%s", r->kind == WARD_NET_RULE_SUFFIX ? "*." : "",
			 r->host ? r->host : "", port);
		return buf;
	}
	if (!inet_ntop(r->family, r->addr, addr, sizeof(addr)))
		ward_strlcpy(addr, "?", sizeof(addr));
	unsigned full = v6 ? 128 : 32;
	if (r->prefix == full)
		snprintf(host, sizeof(host), has_port && v6 ? "[%s]" : "%s", addr);
	else
		snprintf(host, sizeof(host), has_port && v6 ? "[%s]/%u" : "%s/%u", addr, r->prefix);
	snprintf(buf, len, "%s%s", host, port);
	return buf;
}

static bool port_covered(const struct ward_net_rule *r, uint16_t port)
{
	if (r->any_port)
		return true;
	if (r->port)
		return port == r->port;
	return port == 80 || port == 443;
}

/* name equal to host, ignoring case and one trailing dot */
static bool name_is(const char *name, size_t nlen, const char *host)
{
	return strlen(host) == nlen && strncasecmp(name, host, nlen) == 0;
}

static bool name_below(const char *name, size_t nlen, const char *domain)
{
	size_t dlen = strlen(domain);
	return nlen > dlen + 1 && name[nlen - dlen - 1] == '.' &&
	       strncasecmp(name + nlen - dlen, domain, dlen) == 0;
}

static bool prefix_match(const unsigned char *a, const unsigned char *net, unsigned prefix)
{
	unsigned full = prefix / 8, rest = prefix % 8;
	if (memcmp(a, net, full) != 0)
		return false;
	if (!rest)
		return true;
	unsigned char mask = (unsigned char)(0xffu << (8 - rest));
	return (a[full] & mask) == net[full];
}

static const unsigned char v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

WARD_EXPORT bool ward_net_rule_match(const struct ward_net_rule *r, const char *name,
				     int family, const unsigned char *addr, uint16_t port)
{
	if (!r || !port_covered(r, port))
		return false;
	if (r->kind != WARD_NET_RULE_CIDR) {
		if (!name || !r->host)
			return false;
		size_t nlen = strlen(name);
		if (nlen > 0 && name[nlen - 1] == '.')
			nlen--;
		return r->kind == WARD_NET_RULE_HOST ? name_is(name, nlen, r->host)
						     : name_below(name, nlen, r->host);
	}
	unsigned char lit[16];
	if (!addr && name) {
		/* an address given as the name: only its strict spellings */
		if (inet_pton(AF_INET, name, lit) == 1)
			family = AF_INET;
		else if (inet_pton(AF_INET6, name, lit) == 1)
			family = AF_INET6;
		else
			return false;
		addr = lit;
	}
	if (!addr)
		return false;
	/* an IPv4-mapped IPv6 address is the IPv4 address inside it */
	if (family == AF_INET6 && r->family == AF_INET && memcmp(addr, v4mapped, 12) == 0) {
		family = AF_INET;
		addr += 12;
	}
	return family == r->family && prefix_match(addr, r->addr, r->prefix);
}

/* --- between rules (tighten.c, network.c) --- */

bool wp_net_rule_equal(const struct ward_net_rule *a, const struct ward_net_rule *b)
{
	if (a->kind != b->kind || a->port != b->port || a->any_port != b->any_port)
		return false;
	if (a->kind != WARD_NET_RULE_CIDR)
		return a->host && b->host && strcmp(a->host, b->host) == 0;
	return a->family == b->family && a->prefix == b->prefix &&
	       memcmp(a->addr, b->addr, a->family == AF_INET ? 4 : 16) == 0;
}

/* The ports of c are among the ports of o. */
static bool ports_within(const struct ward_net_rule *c, const struct ward_net_rule *o)
{
	if (o->any_port)
		return true;
	if (c->any_port)
		return false;
	if (o->port)
		return c->port == o->port;
	return c->port == 0 || c->port == 80 || c->port == 443;
}

bool wp_net_rule_within(const struct ward_net_rule *c, const struct ward_net_rule *o)
{
	if (!ports_within(c, o))
		return false;
	switch (o->kind) {
	case WARD_NET_RULE_HOST:
		return c->kind == WARD_NET_RULE_HOST && c->host && o->host &&
		       strcmp(c->host, o->host) == 0;
	case WARD_NET_RULE_SUFFIX:
		if (c->kind == WARD_NET_RULE_CIDR || !c->host || !o->host)
			return false;
		if (c->kind == WARD_NET_RULE_SUFFIX && strcmp(c->host, o->host) == 0)
			return true;
		return name_below(c->host, strlen(c->host), o->host);
	case WARD_NET_RULE_CIDR:
		return c->kind == WARD_NET_RULE_CIDR && c->family == o->family &&
		       c->prefix >= o->prefix && prefix_match(c->addr, o->addr, o->prefix);
	}
	return false;
}

int wp_net_rule_copy(struct ward_net_rule *dst, const struct ward_net_rule *src)
{
	*dst = *src;
	dst->host = NULL;
	if (src->host && !(dst->host = strdup(src->host)))
		return -ENOMEM;
	return 0;
}

/* --- the proxy's operator settings --- */

static bool address_text(const char *s, size_t len, int *family)
{
	char buf[INET6_ADDRSTRLEN];
	unsigned char bin[16];
	if (len == 0 || len >= sizeof(buf))
		return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (inet_pton(AF_INET, buf, bin) == 1)
		*family = AF_INET;
	else if (inet_pton(AF_INET6, buf, bin) == 1)
		*family = AF_INET6;
	else
		return false;
	return true;
}

static int check_resolve(const char *v, const char *field, struct ward_error *err)
{
	char q[WP_GOT_MAX], name[ENTRY_MAX_LEN + 1];
	const char *eq = strchr(v, '=');
	int family;
	struct ward_net_rule r;
	size_t n = eq ? (size_t)(eq - v) : 0;
	if (!eq || n == 0 || n > ENTRY_MAX_LEN || !address_text(eq + 1, strlen(eq + 1), &family))
		return wp_fail(err, field, "expected NAME=ADDRESS (an IPv4 or IPv6 address), got %s",
			       wp_quote(v, q, sizeof(q)));
	memcpy(name, v, n);
	name[n] = '\0';
	int rc = wp_net_rule_parse(name, &r, field, err);
	bool host = rc == 0 && r.kind == WARD_NET_RULE_HOST && !r.port && !r.any_port;
	wp_net_rule_release(&r);
	if (rc < 0)
		return rc;
	if (!host)
		return wp_fail(err, field, "expected NAME=ADDRESS with a host name, got %s",
			       wp_quote(v, q, sizeof(q)));
	return 0;
}

static int check_cidr(const char *v, const char *field, struct ward_error *err)
{
	char q[WP_GOT_MAX];
	struct ward_net_rule r;
	int rc = wp_net_rule_parse(v, &r, field, err);
	bool cidr = rc == 0 && r.kind == WARD_NET_RULE_CIDR && !r.port && !r.any_port;
	wp_net_rule_release(&r);
	if (rc == 0 && !cidr)
		rc = wp_fail(err, field, "expected a CIDR like \"10.0.0.0/8\" or \"fd00::/8\", got %s",
			     wp_quote(v, q, sizeof(q)));
	return rc;
}

/* "ADDR", "ADDR:PORT" (IPv4), "[ADDR]:PORT" or a bare IPv6 ADDR. */
static int check_dns(const char *v, const char *field, struct ward_error *err)
{
	char q[WP_GOT_MAX];
	const char *addr = v, *port = NULL, *colon = strchr(v, ':');
	size_t alen = strlen(v);
	int family = 0;
	unsigned long pv = 0;
	if (v[0] == '[') {
		const char *close = strchr(v, ']');
		addr = v + 1;
		alen = close ? (size_t)(close - addr) : 0;
		port = close && close[1] == ':' ? close + 2 : NULL;
		if (!close || (close[1] && !port))
			alen = 0;
	} else if (colon && colon == strrchr(v, ':')) {
		alen = (size_t)(colon - v);
		port = colon + 1;
	}
	bool ok = address_text(addr, alen, &family) && (v[0] != '[' || family == AF_INET6) &&
		  (!port || (parse_number(port, strlen(port), 65535, &pv) == 0 && pv > 0));
	if (!ok)
		return wp_fail(err, field,
			       "expected ADDRESS or ADDRESS:PORT (\"[ADDRESS]:PORT\" for IPv6), got %s",
			       wp_quote(v, q, sizeof(q)));
	return 0;
}

WARD_EXPORT int ward_net_setting_check(enum ward_net_setting kind, const char *value,
				       const char *field, struct ward_error *err)
{
	const char *f = field ? field : "egress";
	if (!value)
		return wp_fail(err, f, "no value given");
	switch (kind) {
	case WARD_NET_SETTING_RESOLVE:
		return check_resolve(value, f, err);
	case WARD_NET_SETTING_ALLOW_PRIVATE:
		return check_cidr(value, f, err);
	case WARD_NET_SETTING_DNS:
		return check_dns(value, f, err);
	}
	return wp_fail(err, f, "unknown setting");
}
