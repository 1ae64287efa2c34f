/* lib/layers/net.c — the network namespace: loopback, and for an allowlist
 * the capture that sends every outbound connection to ward's proxy.
 *
 * A fresh network namespace has lo down; bringing it up lets programs use
 * loopback sockets (servers and clients inside one sandbox). No other
 * interface exists, so with network.mode "none" nothing leaves the sandbox:
 * there is not even a route (connect says ENETUNREACH).
 *
 * With network.mode "allowlist" the init, still holding every capability of
 * its user namespace, also installs (over netlink, bytes built at build time
 * by tools/gen-netlink.c with libmnl and libnftnl):
 *   - default routes through lo (src 127.0.0.1 and ::1), so that a connect
 *     to any address reaches the output hook instead of failing;
 *   - the `inet ward` nftables table: TCP not to loopback is redirected to
 *     port WARD_EGRESS_PORT on loopback; everything else not to loopback is
 *     rejected (TCP with a reset, the rest with an ICMP
 *     administratively-prohibited, which a local sender sees as EPERM);
 * and then makes the proxy's listeners (struct ward_egress_fds): TCP
 * 127.0.0.1:3128 and [::1]:3128, UDP 127.0.0.1:53. The init passes them to
 * its supervisor with the RUNNING record (lib/sandbox.c) and closes its
 * copies; they are close-on-exec, so the program never holds one. A
 * failure at any step fails the run: no capture, no run.
 *
 * A kernel without IPv6 (no AF_INET6 socket can be made in the sandbox)
 * gets no IPv6 route, no [::1] listener and the table without its ip6 rules:
 * there is no IPv6 traffic to capture there.
 * Child-safe: raw syscalls and the plan, no allocation.
 */
#include <arpa/inet.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "base/util.h"
#include "netlink-msgs.h"
#include "sandbox.h"
#include "ward/egress.h"

enum {
	NL_TIMEOUT_S = 5,        /* the kernel answers at once; this bounds a broken one */
	LISTEN_BACKLOG = 128,    /* connections wait here until the proxy attaches */
};

static int lo_up(struct ward_error *err)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return ward_error_setv(err, errno, "net", "unable to open a socket", NULL);
	memset(&ifr, 0, sizeof(ifr));
	ward_strlcpy(ifr.ifr_name, "lo", sizeof(ifr.ifr_name));
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		goto fail;
	ifr.ifr_flags = (short)(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
	if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		goto fail;
	close(fd);
	return 0;
fail:
	ward_error_setv(err, errno, "net", "unable to bring up 'lo'", NULL);
	close(fd);
	return -err->code;
}

enum { NL_ROUTE_STEP, NL_NFT_STEP };

static int capture_failed(struct ward_error *err, int code, const char *what, int step)
{
	int r = ward_error_setv(err, code, "net", "unable to install the egress capture: ", what,
				NULL);
	if (step == NL_NFT_STEP)
		ward_error_hint(err, "network.mode allowlist needs nf_tables with NAT, redirect and "
				     "reject (modules nf_tables, nft_chain_nat, nft_redir, "
				     "nft_reject_inet)");
	return r;
}

/* Sends one message (or one batch) to the kernel and reads an ACK for every
 * step; the first error fails with that step's feature. 0 or -errno. */
static int nl_talk(int fd, const void *msg, size_t len, const struct ward_nl_step *steps,
		   size_t n, int kind, struct ward_error *err)
{
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	ssize_t sent;
	while ((sent = sendto(fd, msg, len, 0, (struct sockaddr *)&kernel, sizeof(kernel))) < 0 &&
	       errno == EINTR)
		;
	if (sent != (ssize_t)len)
		return capture_failed(err, sent < 0 ? errno : EIO, steps[0].feature, kind);
	uint32_t acked = 0, want = n >= 32 ? ~0u : (1u << n) - 1;
	/* aligned for struct nlmsghdr; an ACK of a success is a few dozen
	 * bytes, an error echoes the request (NETLINK_CAP_ACK is not set) */
	union {
		char buf[8192];
		struct nlmsghdr align;
	} u;
	while (acked != want) {
		ssize_t got = recv(fd, u.buf, sizeof(u.buf), 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return capture_failed(err, got < 0 ? (errno == EAGAIN ? ETIMEDOUT : errno) : EIO,
					      "the kernel did not acknowledge every step", kind);
		size_t left = (size_t)got;
		for (struct nlmsghdr *h = (struct nlmsghdr *)u.buf; NLMSG_OK(h, left);
		     h = NLMSG_NEXT(h, left)) {
			if (h->nlmsg_type != NLMSG_ERROR)
				continue;
			const struct nlmsgerr *e = NLMSG_DATA(h);
			size_t i = 0;
			while (i < n && steps[i].seq != h->nlmsg_seq)
				i++;
			if (e->error != 0)
				return capture_failed(err, -e->error,
						      i < n ? steps[i].feature : steps[0].feature, kind);
			if (i < n)
				acked |= 1u << i;
		}
	}
	return 0;
}

static int nl_send(int proto, const void *msg, size_t len, const struct ward_nl_step *steps,
		   size_t n, const char *missing, struct ward_error *err)
{
	int kind = proto == NETLINK_NETFILTER ? NL_NFT_STEP : NL_ROUTE_STEP;
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, proto);
	if (fd < 0)
		return capture_failed(err, errno, missing, kind);
	struct timeval tv = { .tv_sec = NL_TIMEOUT_S };
	int r = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0
		? capture_failed(err, errno, missing, kind)
		: nl_talk(fd, msg, len, steps, n, kind, err);
	close(fd);
	return r;
}

static const struct ward_nl_step route4_step[] = {
	{ 1, "an IPv4 default route through 'lo' was refused" },
};
static const struct ward_nl_step route6_step[] = {
	{ 1, "an IPv6 default route through 'lo' was refused" },
};

/* A listener of the proxy's: close-on-exec, so the program never inherits
 * it; -1 with err set. */
static int listener(int family, int type, const void *addr, socklen_t len,
		    struct ward_error *err)
{
	int fd = socket(family, type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	int one = 1;
	if (family == AF_INET6 &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0)
		goto fail;
	if (bind(fd, addr, len) < 0 ||
	    (type == SOCK_STREAM && listen(fd, LISTEN_BACKLOG) < 0))
		goto fail;
	return fd;
fail:
	ward_error_setv(err, errno, "net", "unable to make the egress listener on ",
			family == AF_INET6 ? "[::1]" : "127.0.0.1",
			type == SOCK_STREAM ? " (tcp)" : " (udp)", NULL);
	if (fd >= 0)
		close(fd);
	return -1;
}

static int make_listeners(struct ward_plan *plan, bool v6, struct ward_error *err)
{
	struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons(WARD_EGRESS_PORT),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons(WARD_EGRESS_PORT),
				   .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	if ((plan->egress.tcp4 = listener(AF_INET, SOCK_STREAM, &a4, sizeof(a4), err)) < 0)
		return -err->code;
	if (v6 && (plan->egress.tcp6 = listener(AF_INET6, SOCK_STREAM, &a6, sizeof(a6), err)) < 0)
		return -err->code;
	a4.sin_port = htons(53);
	if ((plan->egress.dns4 = listener(AF_INET, SOCK_DGRAM, &a4, sizeof(a4), err)) < 0)
		return -err->code;
	return 0;
}

/* Closes what make_listeners made (a failed run must not leave them to
 * the init's report). */
static void drop_listeners(struct ward_plan *plan)
{
	int *fds[] = { &plan->egress.tcp4, &plan->egress.tcp6, &plan->egress.dns4 };
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		if (*fds[i] >= 0) {
			close(*fds[i]);
			*fds[i] = -1;
		}
}

static int capture(struct ward_plan *plan, struct ward_error *err)
{
	/* IPv6 exists when an IPv6 socket can be made at all */
	int probe = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool v6 = probe >= 0;
	if (probe >= 0)
		close(probe);
	else if (errno != EAFNOSUPPORT)
		return ward_error_setv(err, errno, "net", "unable to open an IPv6 socket", NULL);
	int r = nl_send(NETLINK_ROUTE, ward_nl_route4, sizeof(ward_nl_route4), route4_step, 1,
			"rtnetlink is unavailable", err);
	if (r == 0 && v6)
		r = nl_send(NETLINK_ROUTE, ward_nl_route6, sizeof(ward_nl_route6), route6_step, 1,
			    "rtnetlink is unavailable", err);
	if (r == 0 && v6)
		r = nl_send(NETLINK_NETFILTER, ward_nl_nft_batch, sizeof(ward_nl_nft_batch),
			    ward_nl_nft_steps, ARRAY_SIZE(ward_nl_nft_steps),
			    "nf_tables is unavailable (CONFIG_NETFILTER_NETLINK, CONFIG_NF_TABLES)",
			    err);
	else if (r == 0)
		r = nl_send(NETLINK_NETFILTER, ward_nl_nft_batch4, sizeof(ward_nl_nft_batch4),
			    ward_nl_nft_steps4, ARRAY_SIZE(ward_nl_nft_steps4),
			    "nf_tables is unavailable (CONFIG_NETFILTER_NETLINK, CONFIG_NF_TABLES)",
			    err);
	if (r == 0 && (r = make_listeners(plan, v6, err)) < 0)
		drop_listeners(plan);
	return r;
}

int ward_net_apply(struct ward_plan *plan, struct ward_error *err)
{
	int r = lo_up(err);
	if (r < 0 || plan->policy->network.mode != WARD_NET_ALLOWLIST)
		return r;
	return capture(plan, err);
}
