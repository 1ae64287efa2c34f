/* tests/unit/t-intercept.c — the egress proxy's HTTP, SNI and TLS parts
 * (lib/egress/intercept.h): request heads parsed and rewritten, credential
 * rules matched by host and path, SNI read from real OpenSSL ClientHellos
 * (truncated at every length), and TLS interception end to end over
 * loopback sockets with a test CA made here. Works in a temp dir only. */
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <strings.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

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

	is_int(parse("GET http://example.test?#a/b HTTP/1.1\r\n\r\n", &req, &why) > 0, 1,
	       "absolute form with an empty query and a fragment");
	is_str(req.path, "/", "empty query and fragment: path /");

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
	   "a rule header with CRLF: the rewrite is refused");

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
	/* the same 11 bytes as two host_name entries, "ab" and "cde" */
	memcpy(mut + at + 6, "\0\0\2ab\0\0\3cde", 11);
	is_int(egress_sni_parse(mut, n, name, sizeof(name)), -EINVAL, "two host_name entries: -EINVAL");
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

/* ---- TLS interception, end to end over loopback ---- */

static char tmpdir[64];

static X509 *make_cert(const char *name, X509 *issuer, EVP_PKEY *issuer_key, EVP_PKEY *key, bool ca)
{
	X509 *c = X509_new();
	X509_set_version(c, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(c), ca ? 1 : 2);
	X509_gmtime_adj(X509_getm_notBefore(c), -3600);
	X509_gmtime_adj(X509_getm_notAfter(c), 86400);
	X509_NAME_add_entry_by_txt(X509_get_subject_name(c), "CN", MBSTRING_ASC,
				   (const unsigned char *)name, -1, -1, 0);
	X509_set_issuer_name(c, X509_get_subject_name(issuer ? issuer : c));
	X509_set_pubkey(c, key);
	X509V3_CTX ctx;
	X509V3_set_ctx(&ctx, issuer ? issuer : c, c, NULL, NULL, 0);
	char san[300];
	unsigned char ip[16];
	snprintf(san, sizeof(san), "%s:%s", inet_pton(AF_INET, name, ip) == 1 ? "IP" : "DNS", name);
	const char *exts[][2] = {
		{ "basicConstraints", ca ? "critical,CA:TRUE" : "CA:FALSE" },
		{ "keyUsage", ca ? "critical,keyCertSign" : "critical,digitalSignature" },
		{ "subjectKeyIdentifier", "hash" },
		{ ca ? "authorityKeyIdentifier" : "subjectAltName", ca ? "keyid:always" : san },
	};
	for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
		X509_EXTENSION *e = X509V3_EXT_conf(NULL, &ctx, exts[i][0], exts[i][1]);
		X509_add_ext(c, e, -1);
		X509_EXTENSION_free(e);
	}
	X509_sign(c, issuer_key ? issuer_key : key, EVP_sha256());
	return c;
}

struct upstream {
	int lfd;
	SSL_CTX *ctx;
	char seen[8192];
};

static void *upstream_main(void *arg)
{
	struct upstream *u = arg;
	/* the test's upstream may answer a proxy that already left; the
	 * proxy itself must cope with that without the test's help */
	sigset_t pipe_set;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
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
		while (!strstr(u->seen, "\r\n\r\n") &&
		       (r = SSL_read(s, u->seen + n, (int)(sizeof(u->seen) - 1 - n))) > 0)
			u->seen[n += (size_t)r] = '\0';
		const char *resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi";
		SSL_write(s, resp, (int)strlen(resp));
		SSL_shutdown(s);
	}
	SSL_free(s);
	close(fd);
	return NULL;
}

struct counts {
	size_t out, in, stop_in_after;
};

static int count_cb(void *ctx, bool out, size_t n)
{
	struct counts *c = ctx;
	*(out ? &c->out : &c->in) += n;
	return c->stop_in_after && c->in > c->stop_in_after ? -EDQUOT : 0;
}

struct proxy {
	struct egress_tls *t;
	int cfd, ufd;
	const char *host;
	const struct ward_egress_credential *const *rules;
	size_t n_rules;
	struct egress_io io;
	int r;
	char why[256], applied[64];
};

static void *proxy_main(void *arg)
{
	struct proxy *p = arg;
	const char *why, *applied;
	/* SIGPIPE unblocked here (the client and upstream threads block it):
	 * a write by the proxy to a peer that left must not kill the process */
	sigset_t pipe_set;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_UNBLOCK, &pipe_set, NULL);
	p->r = egress_tls_intercept(p->t, p->cfd, p->ufd, p->host, p->rules, p->n_rules, &p->io,
				    &why, &applied);
	snprintf(p->why, sizeof(p->why), "%s", why ? why : "(null)");
	snprintf(p->applied, sizeof(p->applied), "%s", applied ? applied : "");
	close(p->cfd);
	close(p->ufd);
	return NULL;
}

struct tls_case {
	const char *host;      /* what the proxy intercepts */
	const char *request;
	struct counts counts;
	bool hangup;           /* the client leaves right after its request */
	const char *client_name;   /* what the client verifies; NULL: up.test */
	SSL_CTX *upstream;         /* NULL: up_ctx */
	/* results */
	int r, handshake;
	char why[256], applied[64], response[4096], upstream_saw[8192];
};

static SSL_CTX *up_ctx;

/* One connection: sandbox client -> egress_tls_intercept -> upstream. */
static void run_case(struct egress_tls *t, const struct ward_egress_credential *const *rules,
		     size_t n_rules, struct tls_case *tc)
{
	struct upstream up = { .ctx = tc->upstream ? tc->upstream : up_ctx };
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	up.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bind(up.lfd, (struct sockaddr *)&a, sizeof(a));
	listen(up.lfd, 1);
	getsockname(up.lfd, (struct sockaddr *)&a, &al);
	int ufd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	connect(ufd, (struct sockaddr *)&a, sizeof(a));
	int sv[2];
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	struct proxy px = { t, sv[1], ufd, tc->host, rules, n_rules,
			    { count_cb, &tc->counts, 10000 }, 0, "", "" };
	pthread_t ut, pt;
	pthread_create(&ut, NULL, upstream_main, &up);
	pthread_create(&pt, NULL, proxy_main, &px);

	struct timeval tv = { 10, 0 };
	setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	SSL_CTX *cc = SSL_CTX_new(TLS_client_method());
	SSL_CTX_load_verify_locations(cc, egress_tls_bundle(t), NULL);
	SSL_CTX_set_verify(cc, SSL_VERIFY_PEER, NULL);
	SSL *c = SSL_new(cc);
	const char *name = tc->client_name ? tc->client_name : "up.test";
	unsigned char ip[16];
	if (inet_pton(AF_INET, name, ip) == 1) {
		X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c), name);
	} else {
		SSL_set_tlsext_host_name(c, name);
		SSL_set1_host(c, name);
	}
	SSL_set_fd(c, sv[0]);
	tc->handshake = SSL_connect(c);
	size_t n = 0;
	if (tc->handshake == 1) {
		/* reads shut before the request: the proxy's next write to us
		 * fails (EPIPE) while it sees no EOF */
		if (tc->hangup)
			shutdown(sv[0], SHUT_RD);
		SSL_write(c, tc->request, (int)strlen(tc->request));
		int r;
		if (tc->hangup)
			pthread_join(pt, NULL);
		while (!tc->hangup && (r = SSL_read(c, tc->response + n, (int)(sizeof(tc->response) - 1 - n))) > 0)
			n += (size_t)r;
	}
	tc->response[n] = '\0';
	SSL_free(c);
	SSL_CTX_free(cc);
	close(sv[0]);
	if (!tc->hangup)
		pthread_join(pt, NULL);
	shutdown(up.lfd, SHUT_RDWR);
	pthread_join(ut, NULL);
	close(up.lfd);
	tc->r = px.r;
	memcpy(tc->why, px.why, sizeof(tc->why));
	memcpy(tc->applied, px.applied, sizeof(tc->applied));
	memcpy(tc->upstream_saw, up.seen, sizeof(up.seen));
}

static char *path_in(const char *name)
{
	static char buf[4][256];
	static int i;
	char *p = buf[i++ % 4];
	snprintf(p, 256, "%s/%s", tmpdir, name);
	return p;
}

static int mode_of(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (int)(st.st_mode & 07777) : -1;
}

static char *slurp(const char *path)
{
	static char buf[4][1 << 20];
	static int i;
	char *b = buf[i++ % 4];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(b, 1, sizeof(buf[0]) - 1, f) : 0;
	b[n] = '\0';
	if (f)
		fclose(f);
	return b;
}

static void test_ca_files(const char *ca)
{
	char ca_file[256];
	snprintf(ca_file, sizeof(ca_file), "%s", ca);
	struct egress_tls *t = NULL;
	struct ward_error err;
	char state[256];
	snprintf(state, sizeof(state), "%s/state", tmpdir);
	mkdir(state, 0700);
	is_int(egress_tls_new(state, ca_file, &t, &err), 0, "CA created in the state directory");
	is_int(mode_of(path_in("state/egress-ca")), 0700, "egress-ca/ is 0700");
	is_int(mode_of(path_in("state/egress-ca/ca-key.pem")), 0600, "the CA key is 0600");
	is_int(mode_of(path_in("state/egress-ca/ca.pem")), 0644, "the CA certificate is 0644");
	is_str(egress_tls_bundle(t), path_in("state/egress-ca/bundle.pem"), "the bundle is next to the CA");
	is_int(mode_of(egress_tls_bundle(t)), 0644, "the bundle is 0644");
	char ca_pem[1 << 16];
	snprintf(ca_pem, sizeof(ca_pem), "%s", slurp(path_in("state/egress-ca/ca.pem")));
	ok(strstr(slurp(egress_tls_bundle(t)), ca_pem) != NULL, "the bundle holds the CA certificate");
	ok(!strstr(slurp(egress_tls_bundle(t)), "PRIVATE KEY"), "the bundle holds no key");
	egress_tls_free(t);

	is_int(egress_tls_new(state, ca_file, &t, &err), 0, "the CA is loaded again");
	is_str(slurp(path_in("state/egress-ca/ca.pem")), ca_pem, "the same CA after a restart");
	egress_tls_free(t);

	chmod(path_in("state/egress-ca/ca-key.pem"), 0644);
	t = NULL;
	is_int(egress_tls_new(state, ca_file, &t, &err), -EPERM, "a CA key readable by others is refused");
	has_str(err.message, "readable by others (mode 0644); expected 0600", "the refusal says why: %s", err.message);
	chmod(path_in("state/egress-ca/ca-key.pem"), 0600);
	/* root only, and not root of a user namespace without uid 65534 */
	if (chown(path_in("state/egress-ca/ca-key.pem"), 65534, 65534) == 0) {
		is_int(egress_tls_new(state, ca_file, &t, &err), -EPERM, "a CA key owned by another uid is refused");
		has_str(err.message, "is owned by uid 65534", "the refusal names the owner: %s", err.message);
		ok(chown(path_in("state/egress-ca/ca-key.pem"), geteuid(), getegid()) == 0, "chown the CA key back");
	} else {
		for (int i = 0; i < 3; i++)
			skip("a CA key owned by another uid: needs root to chown (%s)", strerror(errno));
	}
	is_int(egress_tls_new(state, "/nonexistent/ca.pem", &t, &err), -EPROTO, "a missing ca_file is refused");
	has_str(err.message, "egress_ca: '/nonexistent/ca.pem'", "the refusal names the setting: %s", err.message);

	if (!ok(egress_tls_new(NULL, ca_file, &t, &err) == 0, "a CA in memory (no state directory)"))
		diag("%s", err.message);
	char bundle[4200];
	snprintf(bundle, sizeof(bundle), "%s", egress_tls_bundle(t));
	is_int(mode_of(bundle), 0644, "its bundle exists");
	egress_tls_free(t);
	is_int(mode_of(bundle), -1, "its bundle is removed by egress_tls_free");
}

static int rm_one(const char *p, const struct stat *st, int type, struct FTW *f)
{
	(void)st, (void)type, (void)f;
	return remove(p);
}

static void test_tls(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/t-intercept-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		skip("no temp dir");
		return;
	}
	EVP_PKEY *ca_key = EVP_EC_gen("P-256"), *up_key = EVP_EC_gen("P-256");
	X509 *ca = make_cert("test CA", NULL, NULL, ca_key, true);
	X509 *up = make_cert("up.test", ca, ca_key, up_key, false);
	FILE *f = fopen(path_in("test-ca.pem"), "w");
	PEM_write_X509(f, ca);
	fclose(f);
	up_ctx = SSL_CTX_new(TLS_server_method());
	SSL_CTX_use_certificate(up_ctx, up);
	SSL_CTX_use_PrivateKey(up_ctx, up_key);

	test_ca_files(path_in("test-ca.pem"));

	sigset_t pipe_set;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
	struct egress_tls *t = NULL;
	struct ward_error err;
	char ca_file[256];
	snprintf(ca_file, sizeof(ca_file), "%s", path_in("test-ca.pem"));
	is_int(egress_tls_new(NULL, ca_file, &t, &err), 0, "egress_tls_new with the test CA");
	char *hd[] = { "Authorization: Bearer s3cret" };
	struct ward_egress_credential gh = { "gh", "up.test", "/v1/", hd, 1 };
	const struct ward_egress_credential *rules[] = { &gh };

	static struct tls_case tc;
	memset(&tc, 0, sizeof(tc));
	tc.host = "up.test";
	tc.request = "GET /v1/user HTTP/1.1\r\nHost: up.test\r\nauthorization: Bearer mine\r\n\r\n";
	run_case(t, rules, 1, &tc);
	is_int(tc.handshake, 1, "the sandbox trusts the bundle: handshake");
	is_int(tc.r, 0, "intercept: 0 when the upstream closed (%s)", tc.why);
	is_str(tc.applied, "gh", "intercept: the rule applied");
	has_str(tc.upstream_saw, "\r\nAuthorization: Bearer s3cret\r\n", "the upstream sees the rule's header");
	ok(!strstr(tc.upstream_saw, "mine"), "the upstream never sees the sandbox's own Authorization");
	has_str(tc.upstream_saw, "GET /v1/user HTTP/1.1\r\n", "the upstream sees the request");
	has_str(tc.response, "HTTP/1.1 200 OK", "the sandbox gets the response");
	ok(strstr(tc.response, "\r\n\r\nhi") && !strstr(tc.response, "s3cret"), "the response body, no secret");
	ok(tc.counts.out >= strlen(tc.request) && tc.counts.in == 59, "bytes counted (out %zu, in %zu)",
	   tc.counts.out, tc.counts.in);

	memset(&tc, 0, sizeof(tc));
	tc.host = "up.test";
	tc.request = "GET /v1/user HTTP/1.1\r\nHost: other.test\r\n\r\n";
	run_case(t, rules, 1, &tc);
	is_int(tc.r, -EINVAL, "a Host other than the TLS name is refused");
	has_str(tc.response, "HTTP/1.1 400 Bad Request\r\nX-Ward-Egress: denied\r\n", "the sandbox gets a 400");
	has_str(tc.response, "\r\n\r\nward egress: refused up.test:", "the 400's body names the host and port");
	has_str(tc.response, ": Host header disagrees with the TLS server name\n", "the 400's body says why");
	ok(!strstr(tc.upstream_saw, "s3cret"), "the upstream gets nothing (%zu bytes)", strlen(tc.upstream_saw));

	memset(&tc, 0, sizeof(tc));
	tc.host = "up.test";
	tc.request = "GET /v1/user HTTP/1.1\r\nHost: up.test\r\n\r\n";
	tc.counts.stop_in_after = 10;
	run_case(t, rules, 1, &tc);
	is_int(tc.r, -EDQUOT, "a count that says stop stops the relay");
	ok(!strstr(tc.response, "hi"), "nothing past the stop reaches the sandbox");

	memset(&tc, 0, sizeof(tc));
	tc.host = "up.test";
	tc.request = "GET /v1/user HTTP/1.1\r\nHost: up.test\r\n\r\n";
	tc.hangup = true;
	run_case(t, rules, 1, &tc);
	ok(tc.r == -EPROTO && strcmp(tc.why, "unable to write to the sandbox") == 0, "a sandbox that hangs up: the relay ends (%d, %s), the process lives", tc.r, tc.why);

	EVP_PKEY *ip_key = EVP_EC_gen("P-256");
	X509 *ip_cert = make_cert("127.0.0.1", ca, ca_key, ip_key, false);
	SSL_CTX *ip_ctx = SSL_CTX_new(TLS_server_method());
	SSL_CTX_use_certificate(ip_ctx, ip_cert);
	SSL_CTX_use_PrivateKey(ip_ctx, ip_key);
	char *ip_hd[] = { "Authorization: Bearer ip-secret" };
	struct ward_egress_credential ip_rule = { "ip", "127.0.0.1", NULL, ip_hd, 1 };
	const struct ward_egress_credential *ip_rules[] = { &ip_rule };
	memset(&tc, 0, sizeof(tc));
	tc.host = "127.0.0.1";
	tc.client_name = "127.0.0.1";
	tc.upstream = ip_ctx;
	tc.request = "GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
	run_case(t, ip_rules, 1, &tc);
	is_int(tc.handshake, 1, "an IP literal: the leaf carries the address (iPAddress SAN)");
	ok(tc.r == 0 && strstr(tc.upstream_saw, "Bearer ip-secret"), "an IP literal: upstream verified by address, header added (%s)", tc.why);
	SSL_CTX_free(ip_ctx);
	X509_free(ip_cert);
	EVP_PKEY_free(ip_key);

	memset(&tc, 0, sizeof(tc));
	tc.host = "other.test";
	tc.request = "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n";
	run_case(t, rules, 1, &tc);
	is_int(tc.r, -EPROTO, "an upstream certificate for another name is refused");
	has_str(tc.why, "upstream certificate not trusted: ", "why: %s", tc.why);
	ok(tc.handshake != 1, "the sandbox's handshake fails too");
	egress_tls_free(t);

	is_int(egress_tls_new(NULL, NULL, &t, &err), 0, "egress_tls_new without the test CA");
	memset(&tc, 0, sizeof(tc));
	tc.host = "up.test";
	tc.request = "GET / HTTP/1.1\r\nHost: up.test\r\n\r\n";
	run_case(t, rules, 1, &tc);
	is_int(tc.r, -EPROTO, "an upstream signed by an unknown CA is refused");
	is_str(tc.why, "upstream certificate not trusted: unable to get local issuer certificate", "why says so");
	ok(!strstr(tc.upstream_saw, "s3cret"), "the untrusted upstream never sees the secret");
	egress_tls_free(t);

	SSL_CTX_free(up_ctx);
	X509_free(ca);
	X509_free(up);
	EVP_PKEY_free(ca_key);
	EVP_PKEY_free(up_key);
	nftw(tmpdir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
	test_parse_forms();
	test_parse_partial();
	test_parse_refusals();
	test_rewrite();
	test_match();
	test_sni();
	test_tls();
	return tap_done();
}
