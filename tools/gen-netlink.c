/* tools/gen-netlink.c — builds, at build time, the netlink messages that
 * install the egress capture in a sandbox's network namespace.
 *
 * Usage: gen-netlink OUTPUT.h
 *
 * lib/layers/net.c sends these bytes as they are: the sandbox's init may
 * not allocate, and ward is linked -static-pie while libmnl has no static
 * archive, so neither libnftnl nor libmnl is linked into ward. This program
 * links both (dynamically) and writes a C header of constant arrays:
 *   - ward_nl_route4, ward_nl_route6: RTM_NEWROUTE for
 *     `default dev lo src 127.0.0.1` and `default dev lo src ::1` (lo is
 *     interface 1 in a fresh network namespace);
 *   - ward_nl_nft_batch: one nftables transaction (NFNL_MSG_BATCH_BEGIN ...
 *     NFNL_MSG_BATCH_END) creating the table below, and
 *     ward_nl_nft_batch4, the same without the IPv6 rules, for a kernel
 *     without IPv6 (there, no IPv6 socket can be made at all);
 *   - ward_nl_nft_steps[], ward_nl_nft_steps4[]: the sequence number of
 *     each message that asks for an ACK and the kernel feature it needs,
 *     for the error that names what is missing;
 *   - WARD_NFT_RULESET: the table as `nft list ruleset` prints it
 *     (tests/unit/t-netcap.c applies the bytes and compares).
 * A build-time tool, never linked into ward: it may allocate and print.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/rtnetlink.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "ward/egress.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* The capture, in nft's own words. Every TCP connection that does not go to
 * loopback is redirected to the proxy's listener (WARD_EGRESS_PORT) on the
 * loopback address of its family; after the nat chain, the filter chain
 * sees loopback destinations only for what may pass, and refuses the rest:
 * TCP with a reset, anything else (UDP other than to the loopback DNS stub,
 * ICMP, raw IP) with an ICMP administratively-prohibited, which a local
 * sender sees as EPERM. The chain's policy is drop as well: a packet no
 * rule matched never leaves. */
#define RULESET_V6_NAT "\t\tmeta l4proto tcp ip6 daddr != ::1 redirect to :3128\n"
#define RULESET_V6_ACCEPT "\t\tip6 daddr ::1 accept\n"
#define RULESET(v6nat, v6accept)                                                            \
	"table inet ward {\n"                                                               \
	"\tchain nat_output {\n"                                                            \
	"\t\ttype nat hook output priority -100; policy accept;\n"                          \
	"\t\tmeta l4proto tcp ip daddr != 127.0.0.0/8 redirect to :3128\n"                  \
	v6nat                                                                               \
	"\t}\n"                                                                             \
	"\n"                                                                                \
	"\tchain filter_output {\n"                                                         \
	"\t\ttype filter hook output priority filter; policy drop;\n"                       \
	"\t\tip daddr 127.0.0.0/8 accept\n"                                                 \
	v6accept                                                                            \
	"\t\tmeta l4proto tcp reject with tcp reset\n"                                      \
	"\t\treject with icmpx admin-prohibited\n"                                          \
	"\t}\n"                                                                             \
	"}\n"

static const char ruleset[] = RULESET(RULESET_V6_NAT, RULESET_V6_ACCEPT);
static const char ruleset4[] = RULESET("", "");

_Static_assert(WARD_EGRESS_PORT == 3128, "the ruleset text names port 3128");

static const char TABLE[] = "ward";
static const char NAT_CHAIN[] = "nat_output";
static const char FILTER_CHAIN[] = "filter_output";

static __attribute__((noreturn)) void die(const char *what)
{
	fprintf(stderr, "gen-netlink: %s\n", what);
	exit(1);
}

/* ---- the routes ---- */

static size_t build_route(char *buf, size_t len, int family, const void *src, size_t src_len)
{
	memset(buf, 0, len);
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWROUTE;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
	nlh->nlmsg_seq = 1;
	struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = (unsigned char)family;
	rtm->rtm_dst_len = 0; /* default */
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_BOOT;
	/* no gateway: the destination is on the link (as `ip route` says) */
	rtm->rtm_scope = RT_SCOPE_LINK;
	rtm->rtm_type = RTN_UNICAST;
	mnl_attr_put_u32(nlh, RTA_OIF, 1); /* lo */
	mnl_attr_put(nlh, RTA_PREFSRC, src_len, src);
	if (nlh->nlmsg_len > len)
		die("route message too long");
	return nlh->nlmsg_len;
}

/* ---- the nftables transaction ---- */

struct step {
	uint32_t seq;
	const char *feature;
};

struct batch {
	struct mnl_nlmsg_batch *b;
	uint32_t seq;
	struct step steps[16];
	size_t n_steps;
};

static void next(struct batch *bt, const char *feature)
{
	if (feature) {
		if (bt->n_steps == ARRAY_SIZE(bt->steps))
			die("too many steps");
		bt->steps[bt->n_steps++] = (struct step){ bt->seq, feature };
	}
	bt->seq++;
	if (!mnl_nlmsg_batch_next(bt->b))
		die("batch buffer too small");
}

static struct nftnl_expr *expr(const char *name)
{
	struct nftnl_expr *e = nftnl_expr_alloc(name);
	if (!e)
		die("out of memory");
	return e;
}

static void add_meta(struct nftnl_rule *r, uint32_t key)
{
	struct nftnl_expr *e = expr("meta");
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
	nftnl_rule_add_expr(r, e);
}

static void add_cmp(struct nftnl_rule *r, uint32_t op, const void *data, uint32_t len)
{
	struct nftnl_expr *e = expr("cmp");
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
	nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
	nftnl_rule_add_expr(r, e);
}

static void add_u8_eq(struct nftnl_rule *r, uint32_t key, uint8_t v)
{
	add_meta(r, key);
	add_cmp(r, NFT_CMP_EQ, &v, sizeof(v));
}

/* The destination's loopback test of one family, as nft compiles it:
 * `ip daddr 127.0.0.0/8` is the first byte of the address; `ip6 daddr ::1`
 * the whole address. The family check comes first (the inet table sees
 * both). */
static void add_daddr(struct nftnl_rule *r, int family, uint32_t op)
{
	static const unsigned char lo4[1] = { 127 };
	static const unsigned char lo6[16] = { [15] = 1 };
	add_u8_eq(r, NFT_META_NFPROTO, family == AF_INET ? NFPROTO_IPV4 : NFPROTO_IPV6);
	struct nftnl_expr *e = expr("payload");
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, NFT_PAYLOAD_NETWORK_HEADER);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, family == AF_INET ? 16 : 24);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, family == AF_INET ? 1 : 16);
	nftnl_rule_add_expr(r, e);
	if (family == AF_INET)
		add_cmp(r, op, lo4, sizeof(lo4));
	else
		add_cmp(r, op, lo6, sizeof(lo6));
}

static void put_rule(struct batch *bt, struct nftnl_rule *r, const char *feature)
{
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, TABLE);
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
	struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(bt->b), NFT_MSG_NEWRULE,
						     NFPROTO_INET,
						     NLM_F_APPEND | NLM_F_CREATE | NLM_F_ACK,
						     bt->seq);
	nftnl_rule_nlmsg_build_payload(nlh, r);
	nftnl_rule_free(r);
	next(bt, feature);
}

static struct nftnl_rule *rule(const char *chain)
{
	struct nftnl_rule *r = nftnl_rule_alloc();
	if (!r)
		die("out of memory");
	nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain);
	return r;
}

/* meta l4proto tcp ip[6] daddr != LOOPBACK redirect to :3128 */
static void redirect_rule(struct batch *bt, int family)
{
	struct nftnl_rule *r = rule(NAT_CHAIN);
	add_u8_eq(r, NFT_META_L4PROTO, IPPROTO_TCP);
	add_daddr(r, family, NFT_CMP_NEQ);
	uint16_t port = htons(WARD_EGRESS_PORT);
	struct nftnl_expr *e = expr("immediate");
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
	nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, &port, sizeof(port));
	nftnl_rule_add_expr(r, e);
	e = expr("redir");
	nftnl_expr_set_u32(e, NFTNL_EXPR_REDIR_REG_PROTO_MIN, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_REDIR_FLAGS, NF_NAT_RANGE_PROTO_SPECIFIED);
	nftnl_rule_add_expr(r, e);
	put_rule(bt, r, family == AF_INET
		 ? "nf_tables redirection is unavailable (CONFIG_NF_NAT, CONFIG_NFT_REDIR)"
		 : "nf_tables IPv6 redirection is unavailable (CONFIG_NF_NAT, CONFIG_NFT_REDIR, "
		   "CONFIG_IPV6)");
}

/* ip[6] daddr LOOPBACK accept */
static void accept_rule(struct batch *bt, int family)
{
	struct nftnl_rule *r = rule(FILTER_CHAIN);
	add_daddr(r, family, NFT_CMP_EQ);
	struct nftnl_expr *e = expr("immediate");
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, NF_ACCEPT);
	nftnl_rule_add_expr(r, e);
	put_rule(bt, r, "nf_tables filtering is unavailable (CONFIG_NF_TABLES_INET)");
}

/* meta l4proto tcp reject with tcp reset; reject with icmpx admin-prohibited */
static void reject_rules(struct batch *bt)
{
	static const char feature[] = "nf_tables reject is unavailable (CONFIG_NFT_REJECT, "
				      "CONFIG_NFT_REJECT_INET)";
	struct nftnl_rule *r = rule(FILTER_CHAIN);
	add_u8_eq(r, NFT_META_L4PROTO, IPPROTO_TCP);
	struct nftnl_expr *e = expr("reject");
	nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, NFT_REJECT_TCP_RST);
	nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE, 0);
	nftnl_rule_add_expr(r, e);
	put_rule(bt, r, feature);

	r = rule(FILTER_CHAIN);
	e = expr("reject");
	nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, NFT_REJECT_ICMPX_UNREACH);
	nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE, NFT_REJECT_ICMPX_ADMIN_PROHIBITED);
	nftnl_rule_add_expr(r, e);
	put_rule(bt, r, feature);
}

static void put_chain(struct batch *bt, const char *name, const char *type, int prio,
		      uint32_t policy, const char *feature)
{
	struct nftnl_chain *c = nftnl_chain_alloc();
	if (!c)
		die("out of memory");
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, TABLE);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
	nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, type);
	nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, NF_INET_LOCAL_OUT);
	nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, prio);
	nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, policy);
	struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(bt->b), NFT_MSG_NEWCHAIN,
						     NFPROTO_INET, NLM_F_CREATE | NLM_F_ACK, bt->seq);
	nftnl_chain_nlmsg_build_payload(nlh, c);
	nftnl_chain_free(c);
	next(bt, feature);
}

/* The whole transaction into buf; returns its length. */
static size_t build_batch(char *buf, size_t len, bool v6, struct batch *bt)
{
	memset(buf, 0, len);
	memset(bt, 0, sizeof(*bt));
	bt->b = mnl_nlmsg_batch_start(buf, len);
	bt->seq = 1;
	nftnl_batch_begin(mnl_nlmsg_batch_current(bt->b), bt->seq);
	next(bt, NULL);

	struct nftnl_table *t = nftnl_table_alloc();
	if (!t)
		die("out of memory");
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, TABLE);
	struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(bt->b), NFT_MSG_NEWTABLE,
						     NFPROTO_INET, NLM_F_CREATE | NLM_F_ACK, bt->seq);
	nftnl_table_nlmsg_build_payload(nlh, t);
	nftnl_table_free(t);
	next(bt, "nf_tables is unavailable (CONFIG_NF_TABLES, CONFIG_NF_TABLES_INET)");

	put_chain(bt, NAT_CHAIN, "nat", -100, NF_ACCEPT,
		  "nf_tables nat is unavailable (CONFIG_NF_NAT, CONFIG_NFT_NAT)");
	put_chain(bt, FILTER_CHAIN, "filter", 0, NF_DROP,
		  "nf_tables filtering is unavailable (CONFIG_NF_TABLES_INET)");
	redirect_rule(bt, AF_INET);
	if (v6)
		redirect_rule(bt, AF_INET6);
	accept_rule(bt, AF_INET);
	if (v6)
		accept_rule(bt, AF_INET6);
	reject_rules(bt);

	nftnl_batch_end(mnl_nlmsg_batch_current(bt->b), bt->seq);
	next(bt, NULL);
	size_t n = mnl_nlmsg_batch_size(bt->b);
	mnl_nlmsg_batch_stop(bt->b);
	return n;
}

/* ---- output ---- */

static void put_bytes(FILE *f, const char *name, const char *buf, size_t n)
{
	fprintf(f, "static const unsigned char %s[%zu] = {", name, n);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s0x%02x,", i % 12 ? " " : "\n\t", (unsigned char)buf[i]);
	fprintf(f, "\n};\n\n");
}

static void put_steps(FILE *f, const char *name, const struct batch *bt)
{
	fprintf(f, "static const struct ward_nl_step %s[%zu] = {\n", name, bt->n_steps);
	for (size_t i = 0; i < bt->n_steps; i++)
		fprintf(f, "\t{ %u, \"%s\" },\n", bt->steps[i].seq, bt->steps[i].feature);
	fprintf(f, "};\n\n");
}

static void put_string(FILE *f, const char *name, const char *s)
{
	fprintf(f, "#define %s \\\n\t\"", name);
	for (; *s; s++) {
		if (*s == '\n')
			fprintf(f, "\\n\"%s", s[1] ? " \\\n\t\"" : "\n");
		else if (*s == '\t')
			fprintf(f, "\\t");
		else
			fputc(*s, f);
	}
	fprintf(f, "\n");
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen-netlink OUTPUT.h\n");
		return 2;
	}
	static char route4[256], route6[256], batch[16384], batch4[16384];
	struct in_addr src4 = { htonl(INADDR_LOOPBACK) };
	struct in6_addr src6 = IN6ADDR_LOOPBACK_INIT;
	size_t n4 = build_route(route4, sizeof(route4), AF_INET, &src4, sizeof(src4));
	size_t n6 = build_route(route6, sizeof(route6), AF_INET6, &src6, sizeof(src6));
	struct batch full, only4;
	size_t nb = build_batch(batch, sizeof(batch), true, &full);
	size_t nb4 = build_batch(batch4, sizeof(batch4), false, &only4);

	FILE *f = fopen(argv[1], "we");
	if (!f) {
		fprintf(stderr, "gen-netlink: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	fprintf(f, "/* Generated by tools/gen-netlink.c with libmnl and libnftnl: do not edit.\n"
		   " *\n * The routes: default dev lo src 127.0.0.1; default dev lo src ::1\n"
		   " * The nftables transaction (ward_nl_nft_batch4 leaves out the ip6 lines):\n *\n");
	for (const char *s = ruleset; *s;) {
		const char *nl = strchr(s, '\n');
		fprintf(f, nl > s ? " *  %.*s\n" : " *\n", (int)(nl - s), s);
		s = nl + 1;
	}
	fprintf(f, " */\n#ifndef WARD_NETLINK_MSGS_H\n#define WARD_NETLINK_MSGS_H\n\n"
		   "#include <stdint.h>\n\n"
		   "struct ward_nl_step {\n\tuint32_t seq;\n\tconst char *feature;\n};\n\n");
	put_bytes(f, "ward_nl_route4", route4, n4);
	put_bytes(f, "ward_nl_route6", route6, n6);
	put_bytes(f, "ward_nl_nft_batch", batch, nb);
	put_steps(f, "ward_nl_nft_steps", &full);
	put_bytes(f, "ward_nl_nft_batch4", batch4, nb4);
	put_steps(f, "ward_nl_nft_steps4", &only4);
	put_string(f, "WARD_NFT_RULESET", ruleset);
	put_string(f, "WARD_NFT_RULESET4", ruleset4);
	fprintf(f, "\n#endif\n");
	if (fclose(f) != 0) {
		fprintf(stderr, "gen-netlink: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	return 0;
}
