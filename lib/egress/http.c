/* lib/egress/http.c — request heads, read with libhttp-parser (strict
 * mode) and rebuilt for the upstream.
 *
 * Only the head is read; the body is the upstream's business (the head we
 * send says "Connection: close", so one request is served per connection).
 * Everything that could make the proxy and the upstream disagree on what
 * the request is gets refused here: two Host headers, a Host that differs
 * from an absolute target, obsolete line folding, Content-Length with
 * Transfer-Encoding, control bytes in names or values. The head we send is
 * rebuilt from the parsed pieces (CRLF line ends, origin-form target), never
 * copied through. No byte here is hand-parsed as HTTP: the grammar is
 * http-parser's, this file only collects what it reports.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <http_parser.h>

#include "egress/cred.h"
#include "egress/intercept.h"
#include "base/util.h"

enum { HEAD_FIELDS_MAX = 256 };  /* header fields in one head; more: refused */

/* Offsets into a head of at most EGRESS_HEAD_MAX bytes: 16 bits suffice,
 * and a whole struct head (2 KiB) sits on the connection thread's stack. */
struct span {
	uint16_t off, len;
};
_Static_assert(EGRESS_HEAD_MAX <= UINT16_MAX, "spans are 16-bit");

struct head {
	const char *buf;
	struct span url;
	struct span name[HEAD_FIELDS_MAX], value[HEAD_FIELDS_MAX];
	size_t n;
	bool done;
	unsigned short major, minor;
	unsigned method;
	const char *why;
};

static struct head *head_of(http_parser *p) { return p->data; }

static int on_url(http_parser *p, const char *at, size_t len)
{
	struct head *h = head_of(p);
	if (h->url.len == 0)
		h->url.off = (uint16_t)(at - h->buf);
	h->url.len = (uint16_t)(h->url.len + len);
	return 0;
}

static int on_field(http_parser *p, const char *at, size_t len)
{
	struct head *h = head_of(p);
	if (h->n == HEAD_FIELDS_MAX) {
		h->why = "malformed request head: more than 256 header fields";
		return 1;
	}
	h->name[h->n] = (struct span){ (uint16_t)(at - h->buf), (uint16_t)len };
	h->value[h->n] = (struct span){ (uint16_t)(at - h->buf + len), 0 };
	h->n++;
	return 0;
}

static int on_value(http_parser *p, const char *at, size_t len)
{
	struct head *h = head_of(p);
	if (h->n == 0)
		return 1;
	/* http-parser's fast path lets DEL through; no control byte but HT
	 * goes upstream */
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)at[i];
		if ((c < 0x20 && c != '\t') || c == 0x7f) {
			h->why = "malformed request head: control character in a header value";
			return 1;
		}
	}
	h->value[h->n - 1] = (struct span){ (uint16_t)(at - h->buf), (uint16_t)len };
	return 0;
}

static int on_headers_complete(http_parser *p)
{
	struct head *h = head_of(p);
	h->done = true;
	h->major = p->http_major;
	h->minor = p->http_minor;
	h->method = p->method;
	http_parser_pause(p, 1);   /* stop at the blank line: the body is not ours */
	return 0;
}

static const http_parser_settings parser_settings = {
	.on_url = on_url,
	.on_header_field = on_field,
	.on_header_value = on_value,
	.on_headers_complete = on_headers_complete,
};

static const char *errno_why(enum http_errno e)
{
	switch (e) {
	case HPE_UNEXPECTED_CONTENT_LENGTH:
		return "malformed request head: Content-Length with Transfer-Encoding, or two Content-Length headers";
	case HPE_INVALID_HEADER_TOKEN:
		return "malformed request head: invalid character in a header name or value";
	case HPE_INVALID_METHOD:
		return "malformed request head: unknown method";
	case HPE_INVALID_URL:
		return "malformed request head: invalid request target";
	case HPE_INVALID_VERSION:
		return "malformed request head: invalid HTTP version";
	case HPE_INVALID_CONTENT_LENGTH:
		return "malformed request head: invalid Content-Length";
	case HPE_INVALID_TRANSFER_ENCODING:
		return "malformed request head: invalid Transfer-Encoding";
	case HPE_LF_EXPECTED:
		return "malformed request head: bare CR in the head";
	default:
		return "malformed request head";
	}
}

static bool span_is(const struct head *h, struct span s, const char *lit)
{
	return s.len == strlen(lit) && strncasecmp(h->buf + s.off, lit, s.len) == 0;
}

/* Obsolete line folding: a line of the head that starts with a blank
 * continues the previous header (RFC 9112 5.2 says reject or replace;
 * http-parser joins it, an upstream may not). */
static bool has_obs_fold(const char *buf, size_t head_len)
{
	for (size_t i = 0; i + 1 < head_len; i++)
		if (buf[i] == '\n' && (buf[i + 1] == ' ' || buf[i + 1] == '\t'))
			return true;
	return false;
}

/* Runs http-parser over the head at buf. Returns head_len, 0 or -EINVAL. */
static ssize_t head_parse(const char *buf, size_t len, struct head *h)
{
	memset(h, 0, offsetof(struct head, name));
	h->n = 0;
	h->done = false;
	h->why = NULL;
	h->buf = buf;
	http_parser p;
	http_parser_init(&p, HTTP_REQUEST);
	p.data = h;
	size_t n = len < EGRESS_HEAD_MAX ? len : EGRESS_HEAD_MAX;
	size_t used = http_parser_execute(&p, &parser_settings, buf, n);
	enum http_errno e = HTTP_PARSER_ERRNO(&p);
	if (h->why)
		return -EINVAL;
	if (e == HPE_PAUSED && h->done) {
		/* paused in on_headers_complete, on the head's last LF */
		if (used >= n || buf[used] != '\n') {
			h->why = "malformed request head";
			return -EINVAL;
		}
		if (has_obs_fold(buf, used + 1)) {
			h->why = "malformed request head: obsolete line folding";
			return -EINVAL;
		}
		return (ssize_t)used + 1;
	}
	if (e != HPE_OK) {
		h->why = errno_why(e);
		return -EINVAL;
	}
	if (len >= EGRESS_HEAD_MAX) {
		h->why = "request head too long (more than 16384 bytes)";
		return -EINVAL;
	}
	return 0;
}

static bool copy_host(char *dst, size_t size, const char *src, size_t n)
{
	if (n == 0 || n >= size)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)src[i];
		/* http-parser allows a zone id ("%25eth0") and userinfo-ish bytes
		 * in an IPv6 literal; a name to connect to has neither */
		if (!isalnum(c) && c != '.' && c != '-' && c != '_' && c != ':')
			return false;
		dst[i] = (char)tolower(c);
	}
	dst[n] = '\0';
	return true;
}

/* "host", "host:port", "[v6]", "[v6]:port" (a Host header or a CONNECT
 * target). *has_port says whether a port was given; default 80. */
static bool parse_authority(const char *s, size_t n, char *host, size_t host_size,
			    uint16_t *port, bool *has_port)
{
	char tmp[300];
	if (n == 0 || n + 4 > sizeof(tmp))
		return false;
	memcpy(tmp, s, n);
	const char *colon = s[0] == '[' ? memmem(s, n, "]:", 2) : memchr(s, ':', n);
	*has_port = colon != NULL;
	if (!*has_port) {
		memcpy(tmp + n, ":80", 3);
		n += 3;
	}
	struct http_parser_url u;
	http_parser_url_init(&u);
	if (http_parser_parse_url(tmp, n, 1, &u) != 0 || u.port == 0)
		return false;
	*port = u.port;
	return copy_host(host, host_size, tmp + u.field_data[UF_HOST].off,
			 u.field_data[UF_HOST].len);
}

static bool set_path(struct egress_http_req *req, const char *s, size_t n)
{
	if (n >= sizeof(req->path))
		return false;
	memcpy(req->path, s, n);
	req->path[n] = '\0';
	return true;
}

/* An absolute-form target: http:// only, no userinfo. */
static const char *parse_absolute(const char *url, size_t n, struct egress_http_req *req)
{
	struct http_parser_url u;
	http_parser_url_init(&u);
	if (http_parser_parse_url(url, n, 0, &u) != 0 || !(u.field_set & (1 << UF_SCHEMA)))
		return "malformed request head: invalid request target";
	const char *scheme = url + u.field_data[UF_SCHEMA].off;
	size_t sl = u.field_data[UF_SCHEMA].len;
	if (sl == 5 && strncasecmp(scheme, "https", 5) == 0)
		return "https:// target: use CONNECT for TLS";
	if (sl != 4 || strncasecmp(scheme, "http", 4) != 0)
		return "unsupported scheme in the request target (only http://)";
	if (u.field_set & (1 << UF_USERINFO))
		return "user information in the request target";
	if (!(u.field_set & (1 << UF_HOST)) ||
	    !copy_host(req->host, sizeof(req->host), url + u.field_data[UF_HOST].off,
		       u.field_data[UF_HOST].len))
		return "malformed request head: invalid host in the request target";
	req->port = (u.field_set & (1 << UF_PORT)) ? u.port : 80;
	if (req->port == 0)
		return "malformed request head: invalid port in the request target";
	req->absolute = true;
	/* the origin form: path and query, never the fragment */
	size_t end = n, start;
	if (u.field_set & (1 << UF_FRAGMENT))
		end = (size_t)u.field_data[UF_FRAGMENT].off - 1;
	if (u.field_set & (1 << UF_PATH))
		start = u.field_data[UF_PATH].off;
	else if (u.field_set & (1 << UF_QUERY))
		start = (size_t)u.field_data[UF_QUERY].off - 1;
	else
		start = end;   /* "http://h", "http://h?#f": no path, no query */
	if (start > end)
		start = end;
	if (!(u.field_set & (1 << UF_PATH))) {
		if (n + 1 >= sizeof(req->path))
			return "request target too long";
		req->path[0] = '/';
		memcpy(req->path + 1, url + start, end - start);
		req->path[1 + end - start] = '\0';
		return NULL;
	}
	return set_path(req, url + start, end - start) ? NULL : "request target too long";
}

static const char *parse_target(const struct head *h, struct egress_http_req *req)
{
	const char *url = h->buf + h->url.off;
	size_t n = h->url.len;
	if (h->method == HTTP_CONNECT) {
		bool has_port;
		req->connect = true;
		if (n == 0 || url[0] == '/' ||
		    !parse_authority(url, n, req->host, sizeof(req->host), &req->port, &has_port) ||
		    !has_port)
			return "malformed request head: CONNECT target: expected host:port";
		return NULL;
	}
	if (n > 0 && url[0] == '/') {
		struct http_parser_url u;
		http_parser_url_init(&u);
		if (http_parser_parse_url(url, n, 0, &u) != 0)
			return "malformed request head: invalid request target";
		return set_path(req, url, n) ? NULL : "request target too long";
	}
	if (n == 1 && url[0] == '*' && h->method == HTTP_OPTIONS)
		return set_path(req, url, n) ? NULL : "request target too long";
	return parse_absolute(url, n, req);
}

/* The Host header: exactly one when the target has no host of its own;
 * never two, never one that names another host than the target. */
static const char *check_host(const struct head *h, struct egress_http_req *req)
{
	size_t at = SIZE_MAX;
	for (size_t i = 0; i < h->n; i++) {
		if (!span_is(h, h->name[i], "host"))
			continue;
		if (at != SIZE_MAX)
			return "two Host headers";
		at = i;
	}
	if (at == SIZE_MAX)
		return req->absolute || req->connect ? NULL : "no Host header";
	char host[256];
	uint16_t port;
	bool has_port;
	if (!parse_authority(h->buf + h->value[at].off, h->value[at].len, host, sizeof(host),
			     &port, &has_port))
		return "Host header: expected host[:port]";
	if (!req->absolute && !req->connect) {
		memcpy(req->host, host, sizeof(host));
		req->port = port;
		return NULL;
	}
	if (strcmp(host, req->host) != 0 || ((req->absolute || has_port) && port != req->port))
		return "Host header disagrees with the request target";
	return NULL;
}

ssize_t egress_http_parse(const char *buf, size_t len, struct egress_http_req *req,
			  const char **why)
{
	struct head h;
	*why = NULL;
	memset(req, 0, sizeof(*req));
	ssize_t r = head_parse(buf, len, &h);
	if (r <= 0) {
		*why = h.why;
		return r;
	}
	if (h.major != 1) {
		*why = "malformed request head: only HTTP/1.x";
		return -EINVAL;
	}
	ward_strlcpy(req->method, http_method_str((enum http_method)h.method), sizeof(req->method));
	req->port = 80;
	*why = parse_target(&h, req);
	if (!*why)
		*why = check_host(&h, req);
	if (*why)
		return -EINVAL;
	req->head_len = (size_t)r;
	return r;
}

/* A small growing buffer; err sticks. */
struct out {
	char *p;
	size_t len, cap;
	bool err;
};

static void out_add(struct out *o, const char *s, size_t n)
{
	if (o->err)
		return;
	if (o->len + n + 1 > o->cap) {
		size_t cap = (o->len + n + 1) * 2;
		char *p = realloc(o->p, cap);
		if (!p) {
			o->err = true;
			return;
		}
		o->p = p;
		o->cap = cap;
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len] = '\0';
}

static void out_str(struct out *o, const char *s) { out_add(o, s, strlen(s)); }

/* Hop-by-hop headers the proxy consumes or replaces (RFC 9110 7.6.1). */
static const char *const hop_by_hop[] = {
	"connection", "keep-alive", "proxy-connection", "proxy-authorization",
	"proxy-authenticate", "te", "trailer", "upgrade",
};

/* Headers that frame the request: never dropped because Connection names
 * them (the body is relayed as the client framed it). */
static const char *const framing[] = { "host", "content-length", "transfer-encoding" };

static bool name_in(const struct head *h, struct span name, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (span_is(h, name, list[i]))
			return true;
	return false;
}

/* True when a Connection header of the head lists `name`. */
static bool named_by_connection(const struct head *h, struct span name)
{
	for (size_t i = 0; i < h->n; i++) {
		if (!span_is(h, h->name[i], "connection"))
			continue;
		const char *v = h->buf + h->value[i].off, *end = v + h->value[i].len;
		while (v < end) {
			while (v < end && (*v == ',' || *v == ' ' || *v == '\t'))
				v++;
			const char *t = v;
			while (v < end && *v != ',' && *v != ' ' && *v != '\t')
				v++;
			if ((size_t)(v - t) == name.len && strncasecmp(t, h->buf + name.off, name.len) == 0)
				return true;
		}
	}
	return false;
}

/* True when a matching rule sets a header called `name` (n bytes). */
static bool rule_sets(const struct ward_egress_credential *const *rules, const bool *match,
		      size_t n_rules, const char *name, size_t n)
{
	for (size_t r = 0; r < n_rules; r++) {
		for (size_t i = 0; match[r] && i < rules[r]->n_headers; i++) {
			size_t nl;
			const char *v;
			if (egress_cred_header_split(rules[r]->headers[i], &nl, &v) && nl == n &&
			    strncasecmp(rules[r]->headers[i], name, n) == 0)
				return true;
		}
	}
	return false;
}

static void add_rule_headers(struct out *o, const struct ward_egress_credential *const *rules,
			     const bool *match, size_t n_rules)
{
	for (size_t r = 0; r < n_rules; r++) {
		for (size_t i = 0; match[r] && i < rules[r]->n_headers; i++) {
			const char *hd = rules[r]->headers[i];
			size_t nl;
			const char *v;
			/* the first matching rule that sets a name wins */
			if (!egress_cred_header_split(hd, &nl, &v) || rule_sets(rules, match, r, hd, nl))
				continue;
			out_add(o, hd, nl);
			out_str(o, ": ");
			out_str(o, v);
			out_str(o, "\r\n");
		}
	}
}

static void add_host(struct out *o, const struct egress_http_req *req)
{
	char port[8];
	bool v6 = strchr(req->host, ':') != NULL;
	out_str(o, "Host: ");
	out_str(o, v6 ? "[" : "");
	out_str(o, req->host);
	out_str(o, v6 ? "]" : "");
	if (req->port != 80) {
		snprintf(port, sizeof(port), ":%u", (unsigned)req->port);
		out_str(o, port);
	}
	out_str(o, "\r\n");
}

int egress_http_rewrite(const char *buf, const struct egress_http_req *req,
			const struct ward_egress_credential *const *rules, size_t n_rules,
			char **out, size_t *out_len, const char **applied)
{
	struct head h;
	bool match[64];
	*out = NULL;
	*out_len = 0;
	*applied = NULL;
	if (req->connect || n_rules > ARRAY_SIZE(match) ||
	    head_parse(buf, req->head_len, &h) != (ssize_t)req->head_len)
		return -EINVAL;
	for (size_t r = 0; r < n_rules; r++) {
		const char *why;
		if (egress_cred_check(rules[r], &why) < 0)
			return -EINVAL;   /* never emit a malformed header */
		match[r] = egress_cred_match(rules[r], req->host, req->path);
		if (match[r] && !*applied)
			*applied = rules[r]->name;
	}
	struct out o = { 0 };
	char line[32];
	out_str(&o, req->method);
	out_str(&o, " ");
	out_str(&o, req->path);
	snprintf(line, sizeof(line), " HTTP/%u.%u\r\n", (unsigned)h.major, (unsigned)h.minor);
	out_str(&o, line);
	bool host_seen = false;
	for (size_t i = 0; i < h.n; i++) {
		struct span nm = h.name[i];
		if (name_in(&h, nm, hop_by_hop, ARRAY_SIZE(hop_by_hop)) ||
		    (!name_in(&h, nm, framing, ARRAY_SIZE(framing)) && named_by_connection(&h, nm)) ||
		    rule_sets(rules, match, n_rules, buf + nm.off, nm.len))
			continue;
		host_seen |= span_is(&h, nm, "host");
		out_add(&o, buf + nm.off, nm.len);
		out_str(&o, ": ");
		out_add(&o, buf + h.value[i].off, h.value[i].len);
		out_str(&o, "\r\n");
	}
	if (!host_seen && !rule_sets(rules, match, n_rules, "Host", 4))
		add_host(&o, req);
	add_rule_headers(&o, rules, match, n_rules);
	out_str(&o, "Connection: close\r\n\r\n");
	if (o.err) {
		free(o.p);
		*applied = NULL;
		return -ENOMEM;
	}
	*out = o.p;
	*out_len = o.len;
	return 0;
}
