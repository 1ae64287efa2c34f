/* tests/unit/t-intercept.c — the egress proxy's HTTP, SNI and TLS parts
 * (lib/egress/intercept.h): request heads parsed and rewritten, credential
 * rules matched by host and path, SNI read from real OpenSSL ClientHellos
 * (truncated at every length), and TLS interception end to end over
 * loopback sockets with a test CA made here. Works in a temp dir only. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "tap.h"
#include "egress/cred.h"
#include "egress/intercept.h"

static ssize_t parse(const char *head, struct egress_http_req *req, const char **why)
{
	return egress_http_parse(head, strlen(head), req, why);
}

static void test_parse_forms(void)
{
	struct egress_http_req req;
	const char *why;
	const char *abs = "GET http://Example.TEST:8080/a/b?c=1#frag HTTP/1.1\r\n"
			  "Host: example.test:8080\r\nUser-Agent: t\r\n\r\nBODY";
	is_int(parse(abs, &req, &why), strlen(abs) - 4, "absolute form: head_len stops at the blank line");
	ok(req.absolute && !req.connect, "absolute form: flagged absolute");
	is_str(req.host, "example.test", "absolute form: host lowercased");
	is_int(req.port, 8080, "absolute form: port");
	is_str(req.path, "/a/b?c=1", "absolute form: origin-form path without the fragment");
	is_str(req.method, "GET", "absolute form: method");

	is_int(parse("GET http://example.test HTTP/1.0\r\n\r\n", &req, &why) > 0, 1,
	       "absolute form without path or Host");
	ok(req.port == 80 && strcmp(req.path, "/") == 0, "absolute form: default port 80, path /");

	is_int(parse("GET https://example.test/ HTTP/1.1\r\n\r\n", &req, &why), -EINVAL,
	       "https:// target refused");
	has_str(why, "https://", "https:// refusal says why");
	is_int(parse("GET ftp://example.test/ HTTP/1.1\r\n\r\n", &req, &why), -EINVAL,
	       "ftp:// target refused");
	is_int(parse("GET http://u:p@example.test/ HTTP/1.1\r\n\r\n", &req, &why), -EINVAL,
	       "userinfo in the target refused");

	is_int(parse("CONNECT API.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n", &req, &why) > 0, 1,
	       "CONNECT authority form");
	ok(req.connect && strcmp(req.host, "api.test") == 0 && req.port == 443 && req.path[0] == '\0',
	   "CONNECT: host, port, empty path");
	is_int(parse("CONNECT [2001:DB8::1]:8443 HTTP/1.1\r\n\r\n", &req, &why) > 0, 1,
	       "CONNECT to an IPv6 literal");
	is_str(req.host, "2001:db8::1", "CONNECT v6: host without brackets, lowercased");
	is_int(req.port, 8443, "CONNECT v6: port");
	is_int(parse("CONNECT api.test HTTP/1.1\r\n\r\n", &req, &why), -EINVAL, "CONNECT without a port refused");
	is_int(parse("CONNECT [fe80::1%25eth0]:443 HTTP/1.1\r\n\r\n", &req, &why), -EINVAL,
	       "CONNECT to a zoned IPv6 literal refused");

	is_int(parse("POST /v1/x?q HTTP/1.1\r\nHost: API.test\r\nContent-Length: 3\r\n\r\nabc", &req, &why) > 0,
	       1, "origin form with Host");
	ok(!req.absolute && !req.connect && strcmp(req.host, "api.test") == 0 && req.port == 80 &&
	   strcmp(req.path, "/v1/x?q") == 0, "origin form: host from Host, port 80, path");
	is_int(parse("GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", &req, &why) > 0, 1, "Host with a v6 literal");
	ok(strcmp(req.host, "::1") == 0 && req.port == 8080, "Host v6: host and port");
	is_int(parse("GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", &req, &why), -EINVAL, "origin form without Host refused");
	has_str(why, "no Host header", "no Host: says so");
}

static void test_parse_partial(void)
{
	struct egress_http_req req;
	const char *why;
	const char *head = "GET /x HTTP/1.1\r\nHost: a.test\r\nX-Long: 0123456789\r\n\r\n";
	size_t n = strlen(head);
	int bad = 0;
	for (size_t i = 0; i < n; i++)
		bad += egress_http_parse(head, i, &req, &why) != 0;
	is_int(bad, 0, "every proper prefix of a head: 0 (need more)");
	is_int(egress_http_parse(head, n, &req, &why), n, "the whole head: its length");

	static char big[EGRESS_HEAD_MAX + 64];
	int k = snprintf(big, sizeof(big), "GET / HTTP/1.1\r\nHost: a.test\r\nX-Pad: ");
	memset(big + k, 'a', sizeof(big) - (size_t)k);
	is_int(egress_http_parse(big, EGRESS_HEAD_MAX - 1, &req, &why), 0, "a long head below the bound: need more");
	is_int(egress_http_parse(big, EGRESS_HEAD_MAX, &req, &why), -EINVAL, "a head of EGRESS_HEAD_MAX bytes: refused");
	has_str(why, "too long", "too long: says so");
}

static void test_parse_refusals(void)
{
	static const struct {
		const char *head, *name;
	} bad[] = {
		{ "GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n", "two Host headers" },
		{ "GET / HTTP/1.1\r\nHost: a.test\r\nhost: a.test\r\n\r\n", "two Host headers, same value" },
		{ "GET http://a.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n", "Host disagreeing with an absolute target" },
		{ "GET http://a.test/ HTTP/1.1\r\nHost: a.test:81\r\n\r\n", "Host port disagreeing with the target" },
		{ "CONNECT a.test:443 HTTP/1.1\r\nHost: b.test:443\r\n\r\n", "Host disagreeing with CONNECT" },
		{ "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n",
		  "Content-Length with Transfer-Encoding" },
		{ "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n",
		  "Transfer-Encoding with Content-Length" },
		{ "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\n",
		  "two Content-Length headers" },
		{ "GET / HTTP/1.1\r\nHost: a.test\r\nX-A: b\r\n c\r\n\r\n", "obsolete line folding" },
		{ "GET / HTTP/1.1\r\nHost: a.test\r\nX-A:\r\n\tc\r\n\r\n", "obsolete line folding after an empty value" },
		{ "GET / HTTP/1.1\r\nHost: a.test\r\nX-A: b\rX-B: c\r\n\r\n", "bare CR inside a value" },
		{ "GET / HTTP/1.1\r\nHost : a.test\r\n\r\n", "blank before the colon" },
		{ "GET / HTTP/1.1\r\nHo\x01st: a.test\r\n\r\n", "control byte in a name" },
		{ "GET / HTTP/1.1\r\nHost: a.test\r\nX-A: \x7f\r\n\r\n", "DEL in a value" },
		{ "GET / HTTP/1.1\r\nHost: a_b@c.test\r\n\r\n", "@ in Host" },
		{ "GET / HTTP/2.0\r\nHost: a.test\r\n\r\n", "HTTP/2 head" },
		{ "BREW / HTTP/1.1\r\nHost: a.test\r\n\r\n", "unknown method" },
		{ "GET a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "target neither origin nor absolute" },
	};
	struct egress_http_req req;
	const char *why;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		is_int(parse(bad[i].head, &req, &why), -EINVAL, "refused: %s", bad[i].name);
		ok(why && *why, "refusal has a reason: %s", why ? why : "(none)");
	}
	const char nul[] = "GET / HTTP/1.1\r\nHost: a.test\r\nX-A: b\0c\r\n\r\n";
	is_int(egress_http_parse(nul, sizeof(nul) - 1, &req, &why), -EINVAL, "refused: NUL in a value");
}

static char *hdr_line(const char *s, const char *name)
{
	static char line[512];
	size_t nl = strlen(name);
	for (const char *p = s; p && *p; p = strstr(p, "\r\n") ? strstr(p, "\r\n") + 2 : NULL) {
		if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
			size_t l = strcspn(p, "\r");
			snprintf(line, sizeof(line), "%.*s", (int)l, p);
			return line;
		}
	}
	return NULL;
}

static int count_hdr(const char *s, const char *name)
{
	int n = 0;
	size_t nl = strlen(name);
	for (const char *p = s; p && *p; p = strstr(p, "\r\n") ? strstr(p, "\r\n") + 2 : NULL)
		n += strncasecmp(p, name, nl) == 0 && p[nl] == ':';
	return n;
}

static char *rewrite(const char *head, const struct ward_egress_credential *const *rules,
		     size_t n, const char **applied)
{
	struct egress_http_req req;
	const char *why;
	if (egress_http_parse(head, strlen(head), &req, &why) <= 0) {
		diag("parse failed: %s", why ? why : "");
		return NULL;
	}
	char *out = NULL;
	size_t len;
	if (egress_http_rewrite(head, &req, rules, n, &out, &len, applied) != 0)
		return NULL;
	return out;
}

static void test_rewrite(void)
{
	char *h1[] = { "Authorization: Bearer s3cret", "X-Org: ward" };
	struct ward_egress_credential gh = { "gh", "api.test", "/v1/", h1, 2 };
	const struct ward_egress_credential *rules[] = { &gh };
	const char *applied;
	const char *head = "GET http://api.test/v1/repos?x=1 HTTP/1.1\r\n"
			   "Host: api.test\r\nProxy-Connection: keep-alive\r\n"
			   "Proxy-Authorization: Basic eA==\r\nConnection: keep-alive, X-Drop\r\n"
			   "X-Drop: 1\r\nKeep-Alive: 5\r\nTE: trailers\r\nTrailer: X\r\nUpgrade: h2c\r\n"
			   "AUTHORIZATION: Bearer mine\r\nX-Keep: 1\r\nx-org: sandbox\r\n\r\n";
	char *out = rewrite(head, rules, 1, &applied);
	is_str(out, "GET /v1/repos?x=1 HTTP/1.1\r\nHost: api.test\r\nX-Keep: 1\r\n"
		    "Authorization: Bearer s3cret\r\nX-Org: ward\r\nConnection: close\r\n\r\n",
	       "rewrite: origin form, hop-by-hop and Connection-named headers dropped, rule headers replace");
	is_str(applied, "gh", "rewrite: applied names the rule");
	is_int(count_hdr(out, "authorization"), 1, "the sandbox's own Authorization is replaced, not duplicated");
	free(out);

	out = rewrite("GET /v2/x HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer mine\r\n\r\n", rules, 1, &applied);
	is_str(hdr_line(out, "authorization"), "Authorization: Bearer mine", "path outside the prefix: no injection");
	ok(applied == NULL, "path outside the prefix: nothing applied");
	free(out);

	out = rewrite("GET http://other.test/v1/x HTTP/1.1\r\n\r\n", rules, 1, &applied);
	ok(out && !strstr(out, "s3cret") && applied == NULL, "another host: no injection");
	has_str(out, "Host: other.test\r\n", "absolute form without Host: Host added");
	free(out);

	out = rewrite("GET http://[::1]:8080/ HTTP/1.0\r\n\r\n", rules, 1, &applied);
	has_str(out, "GET / HTTP/1.0\r\nHost: [::1]:8080\r\n", "v6 Host added with brackets and port");
	free(out);

	out = rewrite("POST /v1/x HTTP/1.1\nHost: api.test\nContent-Length: 2\nConnection: content-length\n\nab",
		      rules, 1, &applied);
	is_str(out, "POST /v1/x HTTP/1.1\r\nHost: api.test\r\nContent-Length: 2\r\n"
		    "Authorization: Bearer s3cret\r\nX-Org: ward\r\nConnection: close\r\n\r\n",
	       "bare LF heads come out with CRLF; Connection cannot drop Content-Length");
	free(out);

	char *evil_h[] = { "X-A: b\r\nX-Injected: 1" };
	struct ward_egress_credential evil = { "evil", "api.test", NULL, evil_h, 1 };
	const struct ward_egress_credential *er[] = { &evil };
	ok(rewrite("GET /v1 HTTP/1.1\r\nHost: api.test\r\n\r\n", er, 1, &applied) == NULL,
	   "a rule header with CRLF is never emitted");

	struct egress_http_req req;
	const char *why;
	const char *c = "CONNECT api.test:443 HTTP/1.1\r\n\r\n";
	char *o2;
	size_t l2;
	egress_http_parse(c, strlen(c), &req, &why);
	is_int(egress_http_rewrite(c, &req, rules, 1, &o2, &l2, &applied), -EINVAL, "CONNECT is not rewritten");
}

static void test_match(void)
{
	static const struct {
		const char *prefix, *path;
		bool match;
	} paths[] = {
		{ "/v1/", "/v1/x", true }, { "/v1/", "/v1", false }, { "/v1/", "/v10/x", false },
		{ "/v1", "/v1", true }, { "/v1", "/v1/x", true }, { "/v1", "/v1?q=1", true },
		{ "/v1", "/v10", false }, { "/v1", "/v", false }, { NULL, "/anything", true },
		{ "/", "/x/../y", true }, { "/v1/", "/v1/../admin", false },
		{ "/v1/", "/v1/%2e%2E/admin", false }, { "/v1", "/v1/..", false },
		{ "/v1/", "/v1/a%2fb", false }, { "/v1/", "/v1/a\\..\\b", false },
		{ "/v1/", "/v1/.well-known", true }, { "/v1/", "/v1/a..b", true },
	};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		struct ward_egress_credential c = { "r", "a.test", (char *)paths[i].prefix, NULL, 0 };
		is_int(egress_cred_path_match(&c, paths[i].path), paths[i].match,
		       "path prefix '%s' %s '%s'", paths[i].prefix ? paths[i].prefix : "(none)",
		       paths[i].match ? "covers" : "does not cover", paths[i].path);
	}
	static const struct {
		const char *rule, *host;
		bool match;
	} hosts[] = {
		{ "api.test", "api.test", true }, { "api.test", "API.TEST", true },
		{ "api.test", "x.api.test", false }, { "api.test", "api.test.evil", false },
		{ "*.x.test", "a.x.test", true }, { "*.x.test", "a.b.x.test", true },
		{ "*.x.test", "x.test", false }, { "*.x.test", "ax.test", false },
		{ "*.x.test", ".x.test", false },
	};
	for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
		struct ward_egress_credential c = { "r", (char *)hosts[i].rule, NULL, NULL, 0 };
		is_int(egress_cred_host_match(&c, hosts[i].host), hosts[i].match, "host rule '%s' %s '%s'",
		       hosts[i].rule, hosts[i].match ? "matches" : "does not match", hosts[i].host);
	}
}

/* The first flight of a real OpenSSL client (sni NULL: none), through a
 * socketpair. */
static size_t client_hello(const char *sni, long max_version, unsigned char *buf, size_t size)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return 0;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_max_proto_version(ctx, max_version);
	SSL *ssl = SSL_new(ctx);
	if (sni)
		SSL_set_tlsext_host_name(ssl, sni);
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	SSL_set_fd(ssl, sv[0]);
	int r = SSL_connect(ssl);
	ssize_t n = -1;
	if (r < 0 && SSL_get_error(ssl, r) == SSL_ERROR_WANT_READ)
		n = read(sv[1], buf, size);
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	close(sv[0]);
	close(sv[1]);
	return n > 0 ? (size_t)n : 0;
}

/* Re-frames a one-record hello as two records split at `at` bytes of the
 * handshake. */
static size_t split_records(const unsigned char *in, size_t n, size_t at, unsigned char *out)
{
	size_t body = n - 5;
	memcpy(out, in, 3);
	out[3] = (unsigned char)(at >> 8), out[4] = (unsigned char)at;
	memcpy(out + 5, in + 5, at);
	memcpy(out + 5 + at, in, 3);
	out[5 + at + 3] = (unsigned char)((body - at) >> 8), out[5 + at + 4] = (unsigned char)(body - at);
	memcpy(out + 10 + at, in + 5 + at, body - at);
	return n + 5;
}

/* Offset of the server_name extension (type 0, then the name) in a hello. */
static size_t sni_offset(const unsigned char *h, size_t n, const char *name)
{
	size_t nl = strlen(name);
	for (size_t i = 0; i + nl <= n; i++)
		if (memcmp(h + i, name, nl) == 0)
			return i - 9;   /* type(2) len(2) list(2) name_type(1) len(2) */
	return 0;
}

static void test_sni(void)
{
	unsigned char hello[4096], two[4200];
	char name[256];
	size_t n = client_hello("Api.Test", TLS1_3_VERSION, hello, sizeof(hello));
	ok(n > 100 && n < sizeof(hello), "a real ClientHello captured (%zu bytes)", n);
	is_int(egress_sni_parse(hello, n, name, sizeof(name)), 1, "SNI found");
	is_str(name, "api.test", "SNI lowercased");
	int bad = 0;
	for (size_t i = 0; i < n; i++)
		bad += egress_sni_parse(hello, i, name, sizeof(name)) != -EAGAIN;
	is_int(bad, 0, "every truncation of the hello: -EAGAIN");
	is_int(egress_sni_parse(hello, n, name, 5), -EINVAL, "a name longer than the buffer: -EINVAL");

	unsigned char h12[4096];
	size_t n12 = client_hello("old.test", TLS1_2_VERSION, h12, sizeof(h12));
	is_int(egress_sni_parse(h12, n12, name, sizeof(name)), 1, "TLS 1.2 hello: SNI found");
	is_str(name, "old.test", "TLS 1.2 hello: the name");

	unsigned char none[4096];
	size_t nn = client_hello(NULL, TLS1_3_VERSION, none, sizeof(none));
	is_int(egress_sni_parse(none, nn, name, sizeof(name)), 0, "hello without SNI: 0");
	bad = 0;
	for (size_t i = 0; i < nn; i++)
		bad += egress_sni_parse(none, i, name, sizeof(name)) != -EAGAIN;
	is_int(bad, 0, "every truncation of a hello without SNI: -EAGAIN");

	const char *http = "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n";
	is_int(egress_sni_parse((const unsigned char *)http, strlen(http), name, sizeof(name)), -EINVAL,
	       "plain HTTP: -EINVAL");
	is_int(egress_sni_parse((const unsigned char *)"\x16\x03\x05", 3, name, sizeof(name)), -EINVAL,
	       "record version 0x0305: -EINVAL");
	is_int(egress_sni_parse((const unsigned char *)"\x16\x03\x01\x00\x10\x02", 6, name, sizeof(name)),
	       -EINVAL, "handshake other than ClientHello: -EINVAL");

	size_t at = sni_offset(hello, n, "Api.Test");
	ok(at > 43, "the server_name extension located at %zu", at);
	unsigned char mut[4096];
	memcpy(mut, hello, n);
	mut[at + 2] = 0xff;   /* extension length past the extensions block */
	is_int(egress_sni_parse(mut, n, name, sizeof(name)), -EINVAL, "extension length overrun: -EINVAL");
	memcpy(mut, hello, n);
	mut[at + 8] = 0x40;   /* host_name length past the extension */
	is_int(egress_sni_parse(mut, n, name, sizeof(name)), -EINVAL, "name length overrun: -EINVAL");
	memcpy(mut, hello, n);
	mut[at + 9] = '/';
	is_int(egress_sni_parse(mut, n, name, sizeof(name)), -EINVAL, "a name with '/': -EINVAL");
	memcpy(mut, hello, n);
	mut[5 + 4 + 34] = 33; /* session id longer than 32 */
	is_int(egress_sni_parse(mut, n, name, sizeof(name)), -EINVAL, "session id of 33 bytes: -EINVAL");
	memcpy(mut, hello, n);
	mut[6] = 0xff;        /* handshake length beyond the record and more */
	is_int(egress_sni_parse(mut, n, name, sizeof(name)), -EINVAL, "handshake length overrun: -EINVAL");

	size_t tn = split_records(hello, n, at - 5 - 4, two);
	is_int(egress_sni_parse(two, tn, name, sizeof(name)), -EINVAL,
	       "a hello split across records before the SNI: -EINVAL");
	tn = split_records(hello, n, at - 5 + 30, two);
	is_int(egress_sni_parse(two, tn, name, sizeof(name)), 1,
	       "a hello split across records after the SNI: found");

	unsigned int seed = 1;
	int crashes = 0;
	for (int i = 0; i < 20000; i++) {
		memcpy(mut, hello, n);
		for (int k = 0; k < 4; k++)
			mut[(size_t)rand_r(&seed) % n] = (unsigned char)rand_r(&seed);
		int r = egress_sni_parse(mut, n, name, sizeof(name));
		crashes += r < -EINVAL || r > 1 || (r == 1 && strlen(name) == 0);
	}
	is_int(crashes, 0, "20000 mutated hellos: only the documented results");
}

int main(void)
{
	test_parse_forms();
	test_parse_partial();
	test_parse_refusals();
	test_rewrite();
	test_match();
	test_sni();
	return tap_done();
}
