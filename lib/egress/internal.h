/* lib/egress/internal.h — the egress proxy's parts as they see each other
 * (internal): address rules (addr.c), the DNS stub and the resolver
 * (dns.c), the engine's shared state (egress.c) and one connection
 * (proxy.c). Nothing here runs on a caller's event loop; every table has
 * a bound stated where it is declared. */
#ifndef WARD_EGRESS_INTERNAL_H
#define WARD_EGRESS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ward/egress.h"

/* One address, IPv4 or IPv6 (network byte order in a[]). */
struct egress_addr {
	int family;              /* AF_INET or AF_INET6 */
	unsigned char a[16];     /* 4 or 16 bytes used */
};

/* A CIDR the operator opened (config.allow_private). */
struct egress_cidr {
	struct egress_addr net;
	unsigned prefix;
};

/* addr.c ------------------------------------------------------------- */

/* Parses a destination given as a name: an IPv4 literal in any spelling
 * inet_aton accepts ("127.1", "0x7f.1", "2130706433", "0177.0.0.1"), an
 * IPv6 literal with or without brackets. 1 and *a set when it is a
 * literal; 0 when it is a name; -EINVAL when it looks numeric (its last
 * label is a number) yet is no valid address, or is no valid host name. */
int egress_addr_literal(const char *name, struct egress_addr *a);
/* The name of the refused range holding a ("loopback", "private",
 * "metadata", ...), or NULL when the address is public. IPv4-mapped IPv6
 * is judged as the IPv4 inside; NAT64 (64:ff9b::/96) of a refused IPv4 too. */
const char *egress_addr_refused(const struct egress_addr *a);
/* True when cidr covers a (an IPv4-mapped IPv6 address also matches as
 * its IPv4). */
bool egress_cidr_contains(const struct egress_cidr *c, const struct egress_addr *a);
/* "ADDR" or "ADDR/PREFIX"; 0 or -EINVAL. */
int egress_cidr_parse(const char *text, struct egress_cidr *c);
/* The address as text (at least INET6_ADDRSTRLEN bytes). */
const char *egress_addr_str(const struct egress_addr *a, char *buf, size_t len);
/* The same family and bytes. */
bool egress_addr_equal(const struct egress_addr *x, const struct egress_addr *y);

/* dns.c -------------------------------------------------------------- */

enum { EGRESS_FAKE_MAX = 1024 };     /* names one sandbox's stub hands out */

/* A sandbox's table of fake addresses: index i stands for 198.18.0.0 + 1 + i. */
struct egress_fake {
	pthread_mutex_t lock;
	char *names[EGRESS_FAKE_MAX];
	size_t n;
};
/* The fake IPv4 address (host order) for name, assigned on first use; 0
 * when the table is full or memory ran out. */
uint32_t egress_fake_assign(struct egress_fake *f, const char *name);
/* The name a fake address (host order) stands for, copied into buf; false
 * when it was never handed out. */
bool egress_fake_lookup(struct egress_fake *f, uint32_t addr, char *buf, size_t len);
void egress_fake_release(struct egress_fake *f);

enum { EGRESS_DNS_MAX = 512 };       /* a stub query or answer (plain UDP DNS) */

struct egress_dns_query {
	uint16_t id;
	uint16_t flags;
	uint16_t qtype, qclass;
	char name[256];          /* lowercased, no trailing dot */
	size_t question_end;     /* offset just after the question */
};
/* Parses a stub query: one question, QR clear, opcode QUERY, no
 * compression in the question. 0 or -EINVAL. Bounded by len; never
 * allocates. */
int egress_dns_parse_query(const unsigned char *buf, size_t len, struct egress_dns_query *q);
/* The reply to q (the question echoed from buf) into out: rcode as given,
 * and one A record (TTL 5) when addr (host order) is nonzero. The length,
 * or 0 when it does not fit. */
size_t egress_dns_reply(const unsigned char *buf, const struct egress_dns_query *q, int rcode,
			uint32_t addr, unsigned char *out, size_t out_len);

enum { EGRESS_ADDRS_MAX = 16 };      /* addresses kept from one resolution */
struct egress_addrs {
	struct egress_addr a[EGRESS_ADDRS_MAX];
	size_t n;
};
/* Resolves name with c-ares (servers: dns_servers, else the host's
 * resolv.conf; no hosts file, no search list), on the calling thread,
 * within timeout_ms. 0, or -ENOENT ("name does not resolve") or -EIO with
 * *why set to c-ares' text. */
int egress_resolve(const char *name, const char *servers_csv, int timeout_ms,
		   struct egress_addrs *out, const char **why);

/* egress.c ------------------------------------------------------------ */

/* A sandbox's allow and deny lists and limits, shared by its connections
 * (refcounted: ward_egress_update swaps in a new one). */
struct egress_net {
	atomic_uint refs;
	struct ward_net_policy p;
};

struct egress_override {        /* config.resolve: NAME=ADDR */
	char *name;
	struct egress_addr addr;
};

struct egress_conn;

struct ward_egress {
	atomic_uint refs;            /* the owner, the acceptor, each connection */
	struct egress_override *resolve;
	size_t n_resolve;
	struct egress_cidr *allow_private;
	size_t n_allow_private;
	char *dns_csv;               /* c-ares servers, NULL: resolv.conf */
	char *ca_file, *state_dir;
	struct ward_egress_credential *creds;
	size_t n_creds;
	unsigned max_connections;
	void (*on_event)(void *ctx, const struct ward_egress_event *ev);
	void *ctx;

	struct egress_tls *tls;      /* made at the first need; under lock */
	pthread_mutex_t lock;        /* sandboxes, tls */
	struct ward_egress_sandbox *sandboxes;
	int epfd, evfd;
	pthread_t acceptor;
	atomic_bool stop;

	atomic_uint_fast64_t connections, denied, active, bytes_out, bytes_in, n_sandboxes;
};

/* What an epoll event stands for: a sandbox's listener. */
struct egress_listener {
	struct ward_egress_sandbox *s;
	int kind;                    /* EGRESS_TCP4, EGRESS_TCP6, EGRESS_DNS4 */
};
enum { EGRESS_TCP4, EGRESS_TCP6, EGRESS_DNS4 };

struct ward_egress_sandbox {
	atomic_uint refs;            /* the caller, the acceptor, each connection */
	struct ward_egress *e;
	struct ward_egress_sandbox *next;   /* e->sandboxes, under e->lock */
	char *id, *tenant;
	int fds[3];                  /* by kind; owned by the acceptor */
	struct egress_listener lst[3];
	atomic_bool detached;
	bool released;               /* the caller's reference was dropped */
	bool unregistered;           /* the acceptor let go (under e->lock) */

	pthread_mutex_t lock;        /* everything below */
	struct egress_net *net;
	struct ward_egress_credential *creds;
	size_t n_creds;
	struct egress_conn *conns;   /* open connections, to shut down on detach */
	unsigned n_conns;
	struct ward_net_usage usage;
	bool hit_out, hit_in;        /* a byte limit stopped a connection */
	struct ward_net_denial last;
	bool has_last;
	struct egress_fake fake;
	char dns_last[256];          /* the last name the stub refused (acceptor only) */
};

/* An accepted connection, on its own thread. */
struct egress_conn {
	struct egress_conn *next;     /* s->conns, under s->lock */
	struct ward_egress_sandbox *s;
	int fd;                       /* from the sandbox */
	int up;                       /* to the upstream, -1 before */
	struct egress_addr listener;  /* the listener's own address */
	uint16_t listener_port;
};

/* Records a refusal: the sandbox's denied list, counters, an event. */
void egress_deny(struct ward_egress_sandbox *s, const char *host, uint16_t port,
		 const char *addr, const char *via, const char *reason);
/* Records a finished allowed connection (an event with end = true). */
void egress_finish(struct ward_egress_sandbox *s, const char *host, uint16_t port,
		   const char *addr, const char *via, const char *credential,
		   const char *reason, uint64_t out, uint64_t in);
/* The sandbox's current lists (a reference; egress_net_put lets go). */
struct egress_net *egress_net_get(struct ward_egress_sandbox *s);
void egress_net_put(struct egress_net *n);
/* Counts n bytes one way; nonzero (and *why set) when a limit was hit or
 * the sandbox detached. */
int egress_count(struct ward_egress_sandbox *s, bool out, size_t n, char *why, size_t why_len);
/* The interception CA, made on first use; NULL (and *why) on failure. */
struct egress_tls *egress_tls_get(struct ward_egress *e, const char **why);
/* The sandbox's connection is over: closes its fds (under the sandbox's
 * lock, so that detach never shuts down a reused fd), drops references. */
void egress_conn_end(struct egress_conn *c);
void egress_sandbox_put(struct ward_egress_sandbox *s);
void egress_put(struct ward_egress *e);

struct egress_net *egress_net_new(const struct ward_net_policy *p);

/* The allow/deny matcher (ward_net_rule_match semantics). */
bool egress_rule_match(const struct ward_net_rule *r, const char *name,
		       const struct egress_addr *a, uint16_t port);

/* proxy.c ------------------------------------------------------------- */

/* A captured connection's original destination (SO_ORIGINAL_DST): 0, or
 * -ENOENT when the connection was made to the listener itself (or the
 * kernel does not know). */
int egress_original_dst(int fd, struct egress_addr *a, uint16_t *port);
/* The connection thread's body: takes c (ends it). */
void *egress_conn_main(void *c);

/* Timeouts (milliseconds). */
enum {
	EGRESS_CONNECT_MS = 10000,
	EGRESS_IDLE_MS = 300000,
	EGRESS_RESOLVE_MS = 5000,
	EGRESS_HELLO_MS = 10000,
	EGRESS_HELLO_MAX = 16384,
};

#endif
