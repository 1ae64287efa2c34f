/* ward/egress.h — the egress proxy: every connection a sandbox makes
 * outside itself passes here.
 *
 * A sandbox whose policy says network.mode "allowlist" gets, in its own
 * network namespace, listening sockets made by its init and passed out to
 * the supervisor (struct ward_egress_fds):
 *   - TCP 127.0.0.1:3128 and [::1]:3128: the explicit proxy (HTTP CONNECT,
 *     plain HTTP forwarding, SOCKS5; HTTP_PROXY and friends point here) and
 *     the transparent capture: nftables rules in the namespace redirect
 *     every other outbound TCP connection to this port, and the proxy reads
 *     the original destination (SO_ORIGINAL_DST);
 *   - UDP 127.0.0.1:53: the DNS stub (/etc/resolv.conf points here). It
 *     answers allowed names with an address from 198.18.0.0/15 that stands
 *     for the name within this sandbox, and refuses every other name.
 * Everything else (UDP elsewhere, ICMP, raw sockets) is dropped in the
 * namespace. One struct ward_egress per process (the daemon, or `ward run`)
 * serves every sandbox from its own threads: nothing here runs on the
 * caller's event loop, and nothing blocks it.
 *
 * For each connection the proxy decides on the name (or the address),
 * resolves names itself and pins the address it checked for the life of the
 * connection, refuses private, loopback, link-local, CGNAT, multicast and
 * metadata addresses unless the operator allowed them, checks a TLS
 * ClientHello's SNI against the name, and counts connections and bytes
 * against the policy's limits.
 */
#ifndef WARD_EGRESS_H
#define WARD_EGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ward/error.h"
#include "ward/policy.h"
#include "ward/verdict.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where the sandbox side listens (inside its own network namespace). */
#define WARD_EGRESS_PORT 3128
#define WARD_EGRESS_PROXY_URL "http://127.0.0.1:3128"
/* The DNS stub's synthetic addresses: 198.18.0.0/15 (RFC 2544). */
#define WARD_EGRESS_FAKE_NET 0xc6120000u /* 198.18.0.0, host order */
#define WARD_EGRESS_FAKE_BITS 15

/* The listening sockets a sandbox's init passes out; -1 where absent. */
struct ward_egress_fds {
	int tcp4;   /* 127.0.0.1:3128, listening */
	int tcp6;   /* [::1]:3128, listening (IPV6_V6ONLY); -1 without IPv6 */
	int dns4;   /* UDP 127.0.0.1:53, bound */
};

/* A credential rule: headers the proxy adds (or replaces) on requests to a
 * host, so that the secret never enters the sandbox. HTTPS to a host with a
 * rule is terminated by the proxy with a certificate from the per-process
 * CA (ward_egress_ca_bundle) and re-encrypted to the upstream, which is
 * verified against the host's trust store (plus config.ca_file). The audit
 * and the events carry only `name`. */
struct ward_egress_credential {
	char *name;          /* shown in audit and errors, never the value */
	char *host;          /* "api.example.com" or "*.example.com" */
	char *path_prefix;   /* NULL or "/": every path */
	char **headers;      /* "Name: value" */
	size_t n_headers;
};

/* One decision or one finished connection, for audit and metrics. Called
 * on the proxy's threads: the callee copies what it keeps and must not
 * block for long. Strings are never NULL ("" when unknown). */
struct ward_egress_event {
	const char *sandbox_id;
	const char *tenant;
	const char *host;        /* the name asked for, or the address */
	uint16_t port;
	const char *addr;        /* the address connected to (or refused) */
	const char *via;         /* "connect", "http", "socks5", "transparent", "dns" */
	bool allowed;
	const char *reason;      /* why refused; "" when allowed */
	const char *credential;  /* the rule injected, "" when none */
	bool end;                /* false: a refusal (the only event); true: an allowed connection closed */
	uint64_t bytes_out;
	uint64_t bytes_in;
};

struct ward_egress_config {
	/* "NAME=ADDR" (ADDR IPv4 or IPv6): these names resolve to ADDR and to
	 * nothing else, without asking DNS (like curl's --resolve). */
	const char *const *resolve;
	size_t n_resolve;
	/* CIDRs the operator opens among the ranges refused by default
	 * (private, loopback, link-local, CGNAT, multicast, metadata, ...). */
	const char *const *allow_private;
	size_t n_allow_private;
	/* DNS servers as "ADDR" or "ADDR:PORT" ("[v6]:PORT"); none: the host's
	 * /etc/resolv.conf. */
	const char *const *dns_servers;
	size_t n_dns_servers;
	const char *ca_file;     /* extra PEM CA(s) trusted for upstream TLS; NULL: none */
	const char *state_dir;   /* where the interception CA is kept (created 0700);
				    NULL: a CA in memory for this process only */
	/* Credential rules every sandbox gets (the operator's). */
	const struct ward_egress_credential *credentials;
	size_t n_credentials;
	unsigned max_connections; /* all sandboxes together; 0: 1024 */
	void (*on_event)(void *ctx, const struct ward_egress_event *ev);
	void *ctx;
};

struct ward_egress;          /* the proxy: its threads and its shared state */
struct ward_egress_sandbox;  /* one attached sandbox */

/* Starts the proxy. 0, or a negative errno with err naming "egress" and
 * what failed (a bad resolve entry, CIDR or CA file names the setting). */
int ward_egress_new(const struct ward_egress_config *cfg, struct ward_egress **out,
		    struct ward_error *err);
/* Stops the proxy: detaches every sandbox, closes every connection, joins
 * its threads. NULL is a no-op. */
void ward_egress_free(struct ward_egress *e);

/* Serves one sandbox: takes ownership of the fds (closes them, also on
 * error). `net` and `creds` are copied. The sandbox's own credential rules
 * (`creds`) add to the operator's. 0, or a negative errno with err set. */
int ward_egress_attach(struct ward_egress *e, const char *sandbox_id, const char *tenant,
		       const struct ward_net_policy *net,
		       const struct ward_egress_credential *creds, size_t n_creds,
		       struct ward_egress_fds *fds, struct ward_egress_sandbox **out,
		       struct ward_error *err);
/* Replaces the sandbox's allow and deny lists (and limits) for its next
 * connections; connections already open stay. The caller checked that the
 * new policy is within the operator's. 0 or -ENOMEM. */
int ward_egress_update(struct ward_egress_sandbox *s, const struct ward_net_policy *net,
		       struct ward_error *err);
/* The sandbox's counters so far (present = true). Thread-safe. */
void ward_egress_usage(struct ward_egress_sandbox *s, struct ward_net_usage *u);
/* The most recent refusal, for error hints: 0 and *d filled, or -ENOENT. */
int ward_egress_last_denial(struct ward_egress_sandbox *s, struct ward_net_denial *d);
/* Stops serving the sandbox: closes its listeners and every open
 * connection; frees once its threads let go. Never blocks on the network.
 * NULL is a no-op. */
void ward_egress_detach(struct ward_egress_sandbox *s);

/* The PEM bundle (the host's trust store plus the interception CA's
 * certificate) that sandboxes with credential rules trust, as a host path
 * the sandbox binds read-only; NULL when no rule needs it. The CA's key
 * never leaves the proxy. */
const char *ward_egress_ca_bundle(struct ward_egress *e);

/* Credential rules from JSON ([{name, host, path_prefix, headers: {Name:
 * value}}], at most 32 rules of 1-16 headers): what the daemon's config
 * file and the API take. Messages name the field ("credentials[0].host")
 * and never a header's value. 0, -EINVAL or -ENOMEM; *out freed with
 * ward_egress_credentials_free (which wipes the values). */
struct json_t;
int ward_egress_credentials_from_json(struct json_t *v, const char *field,
				      struct ward_egress_credential **out, size_t *n_out,
				      struct ward_error *err);
void ward_egress_credentials_free(struct ward_egress_credential *c, size_t n);
/* A deep copy of n rules into *out (NULL when n is 0). 0 or -ENOMEM. */
int ward_egress_credentials_copy(const struct ward_egress_credential *src, size_t n,
				 struct ward_egress_credential **out);

/* The process-wide counters, for /metrics. */
struct ward_egress_stats {
	uint64_t connections;     /* allowed, since start */
	uint64_t denied;          /* refused, since start */
	uint64_t active;          /* open now */
	uint64_t bytes_out;
	uint64_t bytes_in;
	uint64_t sandboxes;       /* attached now */
};
void ward_egress_stats(struct ward_egress *e, struct ward_egress_stats *st);

#ifdef __cplusplus
}
#endif
#endif
