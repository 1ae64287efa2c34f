/* lib/egress/intercept.h — the HTTP and TLS parts of the egress proxy
 * (internal): request heads read with libhttp-parser and rewritten, and TLS
 * interception for hosts with credential rules. Used by the proxy's
 * connection threads (lib/egress/proxy.c); everything here may block the
 * calling connection thread, never another. */
#ifndef WARD_EGRESS_INTERCEPT_H
#define WARD_EGRESS_INTERCEPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ward/egress.h"

enum { EGRESS_HEAD_MAX = 16384 };   /* a request head longer than this is refused */

/* One request head, as parsed. */
struct egress_http_req {
	char method[16];
	bool absolute;          /* "GET http://host:port/path" (forward proxy form) */
	bool connect;           /* "CONNECT host:port" */
	char host[256];         /* from the target (absolute, CONNECT) or the Host header; lowercased */
	uint16_t port;          /* 80 when absent for http://, the given port for CONNECT */
	char path[4096];        /* origin-form target: "/a?b" ("" for CONNECT) */
	size_t head_len;        /* bytes up to and including the blank line */
};

/* Parses the request head at the start of buf. Returns head_len (> 0) when
 * a whole head is there, 0 when more bytes are needed (and len <
 * EGRESS_HEAD_MAX), -EINVAL for a malformed head, an https:// target, or
 * one too long (*why says which, for the 400 reply). */
ssize_t egress_http_parse(const char *buf, size_t len, struct egress_http_req *req,
			  const char **why);

/* The head to send upstream: request line in origin form, Proxy-* and
 * hop-by-hop headers removed, "Connection: close", and the headers of every
 * rule in `rules` whose host and path prefix match added (replacing a
 * header of the same name). *applied gets the first applied rule's name
 * (or NULL). *out is malloc'ed. 0 or -ENOMEM / -EINVAL. */
int egress_http_rewrite(const char *buf, const struct egress_http_req *req,
			const struct ward_egress_credential *const *rules, size_t n_rules,
			char **out, size_t *out_len, const char **applied);

/* True when a rule's host ("x.com" or "*.x.com") matches host. */
bool egress_cred_host_match(const struct ward_egress_credential *c, const char *host);

/* Byte accounting and limits shared by the relays. The relays call
 * count() for every chunk before they forward it; a nonzero return stops
 * the connection (limit hit, or the sandbox detached). */
struct egress_io {
	int (*count)(void *ctx, bool out, size_t n);
	void *ctx;
	int idle_ms;            /* give up after this long without a byte either way */
};

struct egress_tls;          /* the interception CA and the upstream trust */

/* The four egress_tls_* functions live in lib/egress/tls.c, the only part
 * of ward that needs OpenSSL, linked only into the programs that serve
 * credential rules (ward serve, the tests). Elsewhere (the static `ward`,
 * whose every run is a process start that OpenSSL's CPU probing and
 * relocations would slow down) they are weak and NULL: EGRESS_HAVE_TLS is
 * false and interception is refused with a reason. */
#define EGRESS_WEAK __attribute__((weak))
#define EGRESS_HAVE_TLS (egress_tls_new != NULL)

/* Loads (or creates, 0600, in state_dir; in memory when state_dir is NULL)
 * the interception CA, and the upstream trust: the host's default store
 * plus ca_file. Writes the bundle (host store + CA certificate) that
 * sandboxes trust next to the CA. 0 or a negative errno, err set. */
EGRESS_WEAK int egress_tls_new(const char *state_dir, const char *ca_file, struct egress_tls **out,
		   struct ward_error *err);
EGRESS_WEAK void egress_tls_free(struct egress_tls *t);
/* The bundle's host path (see ward_egress_ca_bundle). */
EGRESS_WEAK const char *egress_tls_bundle(const struct egress_tls *t);

/* Intercepts one HTTPS connection on the calling thread: a TLS server
 * towards the sandbox (client_fd, a certificate for `host` signed by the
 * CA), a TLS client towards the upstream (upstream_fd, already connected to
 * the pinned address; verifies `host`, SNI `host`), then relays requests
 * one by one, each head rewritten by egress_http_rewrite with `rules`.
 * Returns 0 when either side closed, or a negative errno; *why (static
 * text) says what failed ("upstream certificate not trusted", ...);
 * *applied gets the first applied rule's name. Closes neither fd. */
EGRESS_WEAK int egress_tls_intercept(struct egress_tls *t, int client_fd, int upstream_fd,
			 const char *host, const struct ward_egress_credential *const *rules,
			 size_t n_rules, const struct egress_io *io, const char **why,
			 const char **applied);

/* The SNI of a TLS ClientHello at the start of buf (lib/egress/sni.c):
 * 1 and name copied (lowercased) when found, 0 when the hello has no SNI,
 * -EAGAIN when more bytes are needed, -EINVAL when buf is not a TLS
 * ClientHello. Bounded: reads at most len bytes, never allocates. */
int egress_sni_parse(const unsigned char *buf, size_t len, char *name, size_t name_len);

#endif
