/* tests/unit/t-netcap.c — the sandbox side of egress: the capture in the
 * sandbox's network namespace (lib/layers/net.c) and the listeners handed
 * to the proxy (lib/sandbox.c, lib/supervise.c).
 *
 * 1. The layer alone, in a child in fresh user and network namespaces:
 *    the generated netlink bytes give exactly the nft ruleset they claim;
 *    TCP anywhere lands on the proxy's listener with its original
 *    destination (IPv4 and IPv6); UDP other than to the DNS stub is
 *    refused; the stub's socket gets what is sent to 127.0.0.1:53; nobody
 *    else can listen on the proxy's port; mode "none" has no route at all.
 * 2. Through ward_sandbox_start: the listeners reach the proxy's attach
 *    (the fake one of tests/unit/egress-fake.c while ward is built without
 *    lib/egress/), a program sees the proxy's environment and resolv.conf,
 *    cannot open a netfilter or packet socket, cannot flush the rules (they
 *    still capture afterwards), and no listener is among its fds; an
 *    allowlist without a proxy, or a proxy that refuses the sandbox, fails
 *    closed.
 * 3. With the real proxy (lib/egress/ built): a program's plain HTTP request
 *    through HTTP_PROXY and a raw connect both reach a host-side server.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h" /* stdio before base/banned.h */
#include "base/util.h"
#include "netlink-msgs.h"
#include "sandbox.h"
#include "ward/egress.h"
#include "ward/sandbox.h"
#include "ward/zygote.h"
#ifndef WARD_HAVE_EGRESS
#include "egress-fake.h"
#endif

#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST 80
#endif
#ifndef IP6T_SO_ORIGINAL_DST
#define IP6T_SO_ORIGINAL_DST 80
#endif

static const char NFT[] = "/usr/sbin/nft";

/* ---- 1. the layer alone ---- */

/* Enters fresh user and network namespaces as uid 0 inside (mapped onto
 * the caller's uid), as a sandbox's init is. */
static int enter_namespaces(void)
{
	char map[64];
	uid_t uid = geteuid();
	gid_t gid = getegid();
	if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
		return -errno;
	int fd = open("/proc/self/setgroups", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		ward_write_all(fd, "deny", 4);
		close(fd);
	}
	snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)uid);
	fd = open("/proc/self/uid_map", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || ward_write_all(fd, map, strlen(map)) < 0)
		return -errno;
	close(fd);
	snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)gid);
	fd = open("/proc/self/gid_map", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || ward_write_all(fd, map, strlen(map)) < 0)
		return -errno;
	close(fd);
	return 0;
}

/* `nft list ruleset` in this namespace, into out. */
static int nft_list(char *out, size_t len)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		execl(NFT, "nft", "list", "ruleset", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	ssize_t n = ward_read_full(p[0], out, len - 1);
	close(p[0]);
	out[n > 0 ? n : 0] = '\0';
	int status;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, ms) == 1;
}

/* A TCP connection to addr lands on the listener lfd, which reads the
 * original destination back; 0 when it matches. */
static int check_capture(int family, const void *addr, socklen_t len, int lfd, char *why,
			 size_t wlen)
{
	int c = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int r = connect(c, addr, len);
	if (r < 0 && errno != EINPROGRESS) {
		snprintf(why, wlen, "connect: %s", strerror(errno));
		close(c);
		return -1;
	}
	if (lfd < 0 || !readable(lfd, 5000)) {
		snprintf(why, wlen, "nothing arrived on the listener");
		close(c);
		return -1;
	}
	int a = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	struct sockaddr_storage orig;
	socklen_t olen = sizeof(orig);
	memset(&orig, 0, sizeof(orig));
	r = a >= 0 && getsockopt(a, family == AF_INET ? SOL_IP : SOL_IPV6,
				 family == AF_INET ? SO_ORIGINAL_DST : IP6T_SO_ORIGINAL_DST,
				 &orig, &olen) == 0 ? 0 : -1;
	if (r < 0)
		snprintf(why, wlen, "SO_ORIGINAL_DST: %s", strerror(errno));
	else if (memcmp(&orig, addr, family == AF_INET ? 8 : 24) != 0) {
		snprintf(why, wlen, "a different original destination");
		r = -1;
	}
	if (a >= 0)
		close(a);
	close(c);
	return r;
}

static void capture_checks(const struct ward_plan *plan, bool v6)
{
	char why[128] = "";
	int one = 1;
	for (int i = 0; i < 3; i++) {
		int fd = i == 0 ? plan->egress.tcp4 : i == 1 ? plan->egress.tcp6 : plan->egress.dns4;
		if (i == 1 && !v6)
			continue;
		ok(fd >= 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC), "listener %d exists and is close-on-exec", i);
	}

	if (access(NFT, X_OK) == 0) {
		char got[4096];
		int r = nft_list(got, sizeof(got));
		if (!ok(r == 0 && strcmp(got, v6 ? WARD_NFT_RULESET : WARD_NFT_RULESET4) == 0,
			"the generated bytes make the ruleset their comment states"))
			diag("nft list ruleset says:\n%s", got);
	} else {
		skip("%s is not installed: the ruleset is not compared", NFT);
	}

	struct sockaddr_in out4 = { .sin_family = AF_INET, .sin_port = htons(80) };
	inet_pton(AF_INET, "93.184.216.34", &out4.sin_addr);
	if (!ok(check_capture(AF_INET, &out4, sizeof(out4), plan->egress.tcp4, why, sizeof(why)) == 0,
		"TCP to 93.184.216.34:80 lands on the tcp4 listener, original destination kept"))
		diag("%s", why);
	out4.sin_port = htons(5432);
	inet_pton(AF_INET, "10.1.2.3", &out4.sin_addr);
	if (!ok(check_capture(AF_INET, &out4, sizeof(out4), plan->egress.tcp4, why, sizeof(why)) == 0,
		"TCP to a private address on any port too (10.1.2.3:5432)"))
		diag("%s", why);
	if (v6) {
		struct sockaddr_in6 out6 = { .sin6_family = AF_INET6, .sin6_port = htons(443) };
		inet_pton(AF_INET6, "2606:2800:220:1:248:1893:25c8:1946", &out6.sin6_addr);
		if (!ok(check_capture(AF_INET6, &out6, sizeof(out6), plan->egress.tcp6, why,
				      sizeof(why)) == 0,
			"TCP to [2606:2800:220:1:248:1893:25c8:1946]:443 lands on the tcp6 listener"))
			diag("%s", why);
	} else {
		skip("no IPv6 in this kernel");
	}

	int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in dns = { .sin_family = AF_INET, .sin_port = htons(53) };
	inet_pton(AF_INET, "8.8.8.8", &dns.sin_addr);
	ssize_t n = sendto(u, "q", 1, 0, (struct sockaddr *)&dns, sizeof(dns));
	if (!ok(n < 0 && errno == EPERM, "UDP to 8.8.8.8:53 is refused (EPERM)"))
		diag("sendto: %zd %s", n, n < 0 ? strerror(errno) : "sent");
	inet_pton(AF_INET, "127.0.0.1", &dns.sin_addr);
	n = sendto(u, "query", 5, 0, (struct sockaddr *)&dns, sizeof(dns));
	char buf[16] = "";
	ssize_t got = plan->egress.dns4 >= 0 && readable(plan->egress.dns4, 5000)
		? recv(plan->egress.dns4, buf, sizeof(buf), MSG_DONTWAIT) : -1;
	ok(n == 5 && got == 5 && memcmp(buf, "query", 5) == 0,
	   "UDP to 127.0.0.1:53 arrives on the DNS stub's socket");
	close(u);

	int b = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(b, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in mine = { .sin_family = AF_INET, .sin_port = htons(WARD_EGRESS_PORT),
				    .sin_addr.s_addr = htonl(INADDR_ANY) };
	int r = bind(b, (struct sockaddr *)&mine, sizeof(mine));
	ok(r < 0 && errno == EADDRINUSE, "nobody else can listen on the proxy's port (EADDRINUSE)");
	close(b);
}

/* Runs fn in a child in fresh namespaces; its TAP lines continue ours. */
static void in_namespaces(void (*fn)(void))
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return;
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		int r = enter_namespaces();
		if (r < 0)
			skip("no user and network namespaces here: %s", strerror(-r));
		else
			fn();
		int counts[2] = { tap_n, tap_failed };
		ward_write_all(p[1], counts, sizeof(counts));
		fflush(stdout);
		_exit(0);
	}
	close(p[1]);
	int counts[2];
	bool got = ward_read_full(p[0], counts, sizeof(counts)) == sizeof(counts);
	close(p[0]);
	int status;
	waitpid(pid, &status, 0);
	if (got) {
		tap_n = counts[0];
		tap_failed = counts[1];
	}
	ok(got && WIFEXITED(status) && WEXITSTATUS(status) == 0, "the namespace child finished");
}

static void layer_allowlist(void)
{
	struct ward_policy pol;
	struct ward_plan plan;
	struct ward_error err;
	ward_error_clear(&err);
	ward_policy_init(&pol, &err);
	pol.network.mode = WARD_NET_ALLOWLIST;
	memset(&plan, 0, sizeof(plan));
	plan.policy = &pol;
	plan.egress = (struct ward_egress_fds){ -1, -1, -1 };
	int probe = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool v6 = probe >= 0;
	if (probe >= 0)
		close(probe);
	int r = ward_net_apply(&plan, &err);
	char buf[600];
	if (!ok(r == 0, "allowlist: the capture is installed"))
		diag("%s", ward_error_format(&err, buf, sizeof(buf)));
	else
		capture_checks(&plan, v6);

	/* every ACK is read: a step the kernel refuses fails the layer (here
	 * the route, which exists already) and makes no listener */
	struct ward_plan again;
	memset(&again, 0, sizeof(again));
	again.policy = &pol;
	again.egress = (struct ward_egress_fds){ -1, -1, -1 };
	ward_error_clear(&err);
	r = ward_net_apply(&again, &err);
	ok(r == -EEXIST && strcmp(err.layer, "net") == 0 &&
	   strstr(err.message, "IPv4 default route") && again.egress.tcp4 < 0,
	   "a refused step fails closed, naming it: %s", ward_error_format(&err, buf, sizeof(buf)));
	ward_policy_release(&pol);
}

static void layer_none(void)
{
	struct ward_policy pol;
	struct ward_plan plan;
	struct ward_error err;
	ward_error_clear(&err);
	ward_policy_init(&pol, &err);
	memset(&plan, 0, sizeof(plan));
	plan.policy = &pol;
	plan.egress = (struct ward_egress_fds){ -1, -1, -1 };
	is_int(ward_net_apply(&plan, &err), 0, "none: lo comes up");
	ok(plan.egress.tcp4 < 0 && plan.egress.tcp6 < 0 && plan.egress.dns4 < 0,
	   "none: no listener is made");
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in out4 = { .sin_family = AF_INET, .sin_port = htons(80) };
	inet_pton(AF_INET, "93.184.216.34", &out4.sin_addr);
	int r = connect(c, (struct sockaddr *)&out4, sizeof(out4));
	ok(r < 0 && errno == ENETUNREACH, "none: TCP to 93.184.216.34 fails with ENETUNREACH");
	close(c);
	if (access(NFT, X_OK) == 0) {
		char got[4096];
		ok(nft_list(got, sizeof(got)) == 0 && got[0] == '\0', "none: no nftables rules");
		/* a refused nftables step is named by what it needed: a chain
		 * already there as a filter chain cannot become the nat one */
		pid_t pid = fork();
		if (pid == 0) {
			execl(NFT, "nft", "add table inet ward; add chain inet ward nat_output "
			      "{ type filter hook output priority 0; }", (char *)NULL);
			_exit(127);
		}
		int status;
		waitpid(pid, &status, 0);
		pol.network.mode = WARD_NET_ALLOWLIST;
		ward_error_clear(&err);
		int r2 = ward_net_apply(&plan, &err);
		char buf[600];
		ok(WIFEXITED(status) && WEXITSTATUS(status) == 0 && r2 < 0 &&
		   strstr(err.message, "nf_tables nat is unavailable") && strstr(err.hint, "nft_chain_nat") &&
		   plan.egress.tcp4 < 0,
		   "a refused nftables step fails closed, naming the feature: %s",
		   ward_error_format(&err, buf, sizeof(buf)));
	}
	ward_policy_release(&pol);
}

/* ---- 2. through ward_sandbox_start ---- */

#ifndef WARD_HAVE_EGRESS
/* The program's side: what it sees, and a captured connection. */
static const char probe_py[] =
	"import os, socket, subprocess\n"
	"out = []\n"
	"def t(name, f):\n"
	"    try: out.append('%s=%s' % (name, f()))\n"
	"    except OSError as e: out.append('%s=E%d' % (name, e.errno))\n"
	"t('proxy', lambda: os.environ.get('HTTPS_PROXY'))\n"
	"t('noproxy', lambda: os.environ.get('NO_PROXY'))\n"
	"t('ca', lambda: os.environ.get('SSL_CERT_FILE'))\n"
	"t('resolv', lambda: open('/etc/resolv.conf').read().strip().replace(' ', '_'))\n"
	"t('netfilter', lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12) and 'open')\n"
	"t('packet', lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0) and 'open')\n"
	"t('raw', lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, 6) and 'open')\n"
	"def bind():\n"
	"    s = socket.socket(); s.bind(('127.0.0.1', 3128)); return 'bound'\n"
	"t('bind', bind)\n"
	"t('fds', lambda: ','.join(sorted(os.listdir('/proc/self/fd'))))\n"
	"t('flush', lambda: subprocess.run(['/usr/sbin/nft', 'flush', 'ruleset'], stderr=subprocess.DEVNULL).returncode)\n"
	"def route():\n"
	"    if not os.path.exists('/usr/sbin/ip'): return 'noip'\n"
	"    return subprocess.run(['ip', 'route', 'del', 'default'], stderr=subprocess.DEVNULL).returncode\n"
	"t('route', route)\n"
	"def capture():\n"
	"    c = socket.create_connection(('93.184.216.34', 80), timeout=20)\n"
	"    c.sendall(b'ping'); return c.recv(4).decode()\n"
	"t('reply', capture)\n"
	"print(' '.join(out), flush=True)\n";
#endif

/* When set, sandboxes are cloned by this launcher (ward/zygote.h), and
 * their policy gets this variable. */
static struct ward_launcher *test_launcher;
static const char *test_env;
static struct ward_net_rule *test_allow; /* network.allow, one entry */

struct run {
	struct ward_verdict v;
	struct ward_error err;
	char out[2048];
	int rc;
};

#ifndef WARD_HAVE_EGRESS
/* Plays the proxy's part of one connection: accept on the listener the fake
 * was given, check the original destination, answer. */
static bool serve_one(void)
{
	struct sockaddr_in want = { .sin_family = AF_INET, .sin_port = htons(80) };
	inet_pton(AF_INET, "93.184.216.34", &want.sin_addr);
	if (egress_fake_fds.tcp4 < 0 || !readable(egress_fake_fds.tcp4, 20000))
		return false;
	int a = accept4(egress_fake_fds.tcp4, NULL, NULL, SOCK_CLOEXEC);
	struct sockaddr_in orig;
	socklen_t olen = sizeof(orig);
	char buf[4];
	bool good = a >= 0 && getsockopt(a, SOL_IP, SO_ORIGINAL_DST, &orig, &olen) == 0 &&
		    orig.sin_addr.s_addr == want.sin_addr.s_addr && orig.sin_port == want.sin_port &&
		    ward_read_full(a, buf, 4) == 4 && memcmp(buf, "ping", 4) == 0 &&
		    ward_write_all(a, "pong", 4) == 0;
	if (a >= 0)
		close(a);
	return good;
}
#endif

/* Runs argv in a sandbox of mode; with serve, answers one captured
 * connection once the listeners are attached. With quiet_report, the loop
 * is a kernel's or the service's: it never watches the report channel and
 * sleeps as long as ward_sandbox_check says. */
static int run_sandbox_loop(enum ward_net_mode mode, struct ward_egress *egress,
			    char *const argv[], bool serve, bool quiet_report, struct run *res)
{
	struct ward_policy p;
	struct ward_sandbox *sb = NULL;
	ward_error_clear(&res->err);
	ward_verdict_init(&res->v);
	res->out[0] = '\0';
	ward_policy_init(&p, &res->err);
	p.network.mode = mode;
	p.net = mode;
	p.timeout_ms = 15000;
	if (test_env)
		ward_policy_set(&p, "env", test_env, "t-netcap", &res->err);
	p.network.allow = test_allow;
	p.network.n_allow = test_allow ? 1 : 0;
	struct ward_sandbox_options so = { .egress = egress, .tenant = "t-netcap",
					   .launcher = test_launcher };
	res->rc = ward_sandbox_start(&p, argv, &so, &sb, &res->err);
	p.network.allow = NULL; /* the caller's */
	p.network.n_allow = 0;
	ward_policy_release(&p);
	if (res->rc < 0)
		return res->rc;
	bool served = !serve;
	size_t len = 0;
	for (int fd = ward_sandbox_stdout(sb); fd >= 0;) {
		/* the supervisor's loop: the report channel and the program's output */
		struct pollfd pfd[2] = { { .fd = fd, .events = POLLIN },
					 { .fd = ward_sandbox_report_fd(sb), .events = POLLIN } };
		int t = ward_sandbox_check(sb);
#ifndef WARD_HAVE_EGRESS
		/* the proxy's part, as soon as it is attached (the check may
		 * have attached it; a real proxy serves on its own threads) */
		if (!served && ward_sandbox_egress(sb))
			served = serve_one();
#endif
		if (poll(pfd, pfd[1].fd >= 0 && !quiet_report ? 2 : 1, t < 0 ? 30000 : t) < 0)
			break;
		if (pfd[1].revents)
			ward_sandbox_program_ended(sb);
#ifndef WARD_HAVE_EGRESS
		if (!served && ward_sandbox_egress(sb))
			served = serve_one();
#endif
		if (pfd[0].revents) {
			ssize_t n = read(fd, res->out + len, sizeof(res->out) - 1 - len);
			if (n <= 0)
				break;
			len += (size_t)n;
			res->out[len] = '\0';
		}
	}
	res->rc = ward_sandbox_end(sb, &res->v, &res->err);
	ward_sandbox_release(sb);
	return served ? res->rc : -EPROTO;
}

static int run_sandbox(enum ward_net_mode mode, struct ward_egress *egress, char *const argv[],
		       bool serve, struct run *res)
{
	return run_sandbox_loop(mode, egress, argv, serve, false, res);
}

static bool have_python(void)
{
	return access("/usr/bin/python3", X_OK) == 0;
}

static void sandbox_refusals(void)
{
	struct run res;
	char *argv[] = { "/bin/true", NULL };
	int r = run_sandbox(WARD_NET_ALLOWLIST, NULL, argv, false, &res);
	ok(r < 0 && strcmp(res.err.layer, "net") == 0 &&
	   strstr(res.err.message, "network.mode allowlist needs an egress proxy"),
	   "an allowlist without a proxy fails before anything runs: %s", res.err.message);
	ward_verdict_release(&res.v);
}

#ifndef WARD_HAVE_EGRESS
static void sandbox_fake(void)
{
	struct ward_egress *e = NULL;
	struct ward_egress_config cfg;
	struct run res;
	char buf[600];
	memset(&cfg, 0, sizeof(cfg));
	ward_egress_new(&cfg, &e, &res.err);

	char *argv[] = { "/usr/bin/python3", "-c", (char *)probe_py, NULL };
	int r = run_sandbox(WARD_NET_ALLOWLIST, e, argv, true, &res);
	if (r < 0 && res.rc == 0) {
		ok(0, "the proxy's side got the captured connection");
		diag("output: %s", res.out);
	} else if (r < 0) {
		skip("the sandbox cannot start here: %s", ward_error_format(&res.err, buf, sizeof(buf)));
		ward_egress_free(e);
		return;
	}
	diag("program: %.*s", (int)strcspn(res.out, "\n"), res.out);
	is_int(res.v.status, WARD_STATUS_OK, "the program ran");
	has_str(res.out, "proxy=" WARD_EGRESS_PROXY_URL, "HTTPS_PROXY points at the proxy");
	has_str(res.out, "noproxy=localhost,127.0.0.1,::1", "NO_PROXY spares loopback");
	has_str(res.out, "ca=None", "no CA variables without a bundle");
	has_str(res.out, "resolv=nameserver_127.0.0.1", "resolv.conf names the DNS stub");
	has_str(res.out, "netfilter=E93", "a netfilter socket cannot be opened (EPROTONOSUPPORT)");
	has_str(res.out, "packet=E97", "a packet socket cannot be opened (EAFNOSUPPORT)");
	has_str(res.out, "raw=E1", "a raw IP socket cannot be opened (EPERM)");
	has_str(res.out, "bind=E98", "the proxy's port cannot be taken (EADDRINUSE)");
	has_str(res.out, "fds=0,1,2,3 ", "the program holds no listener (fd 3 is the listing's)");
	/* nft and ip ran (an exit status, not an errno) and failed: nft's 3
	 * is "no netlink socket", ip's 2 an error from the kernel (EPERM) */
	if (access(NFT, X_OK) == 0)
		has_str(res.out, "flush=3", "`nft flush ruleset` fails in the sandbox");
	if (access("/usr/sbin/ip", X_OK) == 0)
		has_str(res.out, "route=2", "`ip route del default` fails in the sandbox");
	has_str(res.out, "reply=pong", "... and the rules still capture: the proxy's side answered");
	ok(res.v.network.present && res.v.network.connections == 1,
	   "the verdict has the proxy's network usage");

	/* a caller that never reads the report channel (a kernel's loop, the
	 * service's commands): the listeners still reach the proxy before
	 * the program's first connection needs them */
	char *early[] = { "/usr/bin/python3", "-c",
			  "import socket\n"
			  "c = socket.create_connection(('93.184.216.34', 80), timeout=20)\n"
			  "c.sendall(b'ping'); print(c.recv(4).decode())\n", NULL };
	r = run_sandbox_loop(WARD_NET_ALLOWLIST, e, early, true, true, &res);
	if (!ok(r == 0 && strcmp(res.out, "pong\n") == 0,
		"a loop that watches only the program's output attaches the listeners at once"))
		diag("%d, status %s, output '%s'", r, ward_status_name(res.v.status), res.out);
	ward_verdict_release(&res.v);

	/* through a launcher, which builds its own plan from the policy's
	 * JSON: the capture comes with it, or the run is refused */
	struct ward_error lerr;
	test_launcher = ward_launcher_start(&lerr);
	if (test_launcher) {
		struct ward_policy lp;
		ward_policy_init(&lp, &lerr);
		lp.network.mode = lp.net = WARD_NET_ALLOWLIST;
		char *json = ward_policy_to_json(&lp);
		bool carried = json && strstr(json, "allowlist");
		free(json);
		ward_policy_release(&lp);
		r = run_sandbox_loop(WARD_NET_ALLOWLIST, e, early, carried, false, &res);
		if (carried)
			ok(r == 0 && strcmp(res.out, "pong\n") == 0,
			   "through a launcher: the capture and the listeners come with it");
		else
			ok(r < 0 && strcmp(res.err.layer, "net") == 0 &&
			   strstr(res.err.message, "another network.mode"),
			   "through a launcher whose policy JSON lacks network.mode: refused (%s)",
			   res.err.message);
		ward_verdict_release(&res.v);
		ward_launcher_stop(test_launcher);
		test_launcher = NULL;
	} else {
		skip("no launcher here: %s", lerr.message);
	}

	/* a proxy that refuses the sandbox: killed, a setup failure */
	egress_fake_fail = true;
	char *sleeper[] = { "/bin/sleep", "20", NULL };
	uint64_t t0 = ward_now_ns();
	run_sandbox(WARD_NET_ALLOWLIST, e, sleeper, false, &res);
	egress_fake_fail = false;
	is_int(res.v.status, WARD_STATUS_SETUP_FAILED, "a refused attach is a setup failure");
	has_str(res.v.setup.message, "the fake proxy refuses", "... with the proxy's reason");
	ok(ward_now_ns() - t0 < 10000000000ull, "... and the program is killed at once");
	ward_verdict_release(&res.v);

	/* the proxy's CA bundle: bound read-only, named in the environment */
	char dir[] = "/tmp/t-netcap-XXXXXX", path[64];
	if (mkdtemp(dir)) {
		snprintf(path, sizeof(path), "%s/ca.pem", dir);
		int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		ward_write_all(fd, "FAKE-CA\n", 8);
		close(fd);
		chmod(dir, 0755);
		egress_fake_bundle = path;
		char *cat[] = { "/bin/sh", "-c",
				"cat /etc/ward/egress-ca.pem; echo \"$SSL_CERT_FILE $NODE_EXTRA_CA_CERTS\";"
				" echo x 2>/dev/null >/etc/ward/egress-ca.pem || echo read-only", NULL };
		run_sandbox(WARD_NET_ALLOWLIST, e, cat, false, &res);
		egress_fake_bundle = NULL;
		is_str(res.out, "FAKE-CA\n/etc/ward/egress-ca.pem /etc/ward/egress-ca.pem\nread-only\n",
		       "the CA bundle is bound read-only and named by SSL_CERT_FILE and friends");
		ward_verdict_release(&res.v);
		unlink(path);
		rmdir(dir);
	}

	/* the policy's own value of a proxy variable wins */
	char *env[] = { "/bin/sh", "-c", "echo \"$NO_PROXY $HTTP_PROXY\"", NULL };
	test_env = "NO_PROXY=localhost,.internal.test";
	run_sandbox(WARD_NET_ALLOWLIST, e, env, false, &res);
	test_env = NULL;
	is_str(res.out, "localhost,.internal.test " WARD_EGRESS_PROXY_URL "\n",
	       "the policy's NO_PROXY wins; the others stay");
	ward_verdict_release(&res.v);

	/* mode none: nothing of the above */
	char *none[] = { "/bin/sh", "-c", "echo \"[$HTTP_PROXY]\"; cat /etc/resolv.conf; "
			 "test -e /etc/ward || echo no-ward", NULL };
	run_sandbox(WARD_NET_NONE, e, none, false, &res);
	is_str(res.out, "[]\nno-ward\n", "none: no proxy variables, an empty resolv.conf");
	ok(!res.v.network.present, "none: the verdict has no network usage");
	ward_verdict_release(&res.v);
	ward_egress_free(e);
}
#else
/* The real proxy: a plain HTTP request through HTTP_PROXY and a raw connect
 * reach a server on the host's loopback, named by a resolve override. */
static void sandbox_proxy(void)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, 8) < 0 ||
	    getsockname(s, (struct sockaddr *)&a, &alen) < 0) {
		skip("no loopback listener: %s", strerror(errno));
		return;
	}
	pid_t server = fork();
	if (server == 0) {
		for (int i = 0; i < 2; i++) {
			int c = accept(s, NULL, NULL);
			char req[2048];
			if (c >= 0 && read(c, req, sizeof(req)) > 0)
				ward_write_all(c, "HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello", 43);
			if (c >= 0)
				close(c);
		}
		_exit(0);
	}
	close(s);
	const char *resolve[] = { "web.test=127.0.0.1" };
	const char *priv[] = { "127.0.0.1/32" };
	struct ward_net_rule allow = { .kind = WARD_NET_RULE_HOST, .host = "web.test",
				       .any_port = true };
	struct ward_egress_config cfg = { .resolve = resolve, .n_resolve = 1,
					  .allow_private = priv, .n_allow_private = 1 };
	struct ward_egress *e = NULL;
	struct run res;
	char buf[600], script[1024];
	if (ward_egress_new(&cfg, &e, &res.err) < 0) {
		ok(0, "the proxy starts: %s", ward_error_format(&res.err, buf, sizeof(buf)));
		kill(server, SIGKILL);
		waitpid(server, NULL, 0);
		return;
	}
	snprintf(script, sizeof(script),
		 "import urllib.request, socket\n"
		 "print(urllib.request.urlopen('http://web.test:%d/').read().decode())\n"
		 "ip = socket.gethostbyname('web.test')\n"
		 "c = socket.create_connection((ip, %d), timeout=10)\n"
		 "c.sendall(b'GET / HTTP/1.0\\r\\nHost: web.test\\r\\n\\r\\n')\n"
		 "print(c.recv(100).decode().split('\\r\\n\\r\\n')[1])\n",
		 ntohs(a.sin_port), ntohs(a.sin_port));
	char *argv[] = { "/usr/bin/python3", "-c", script, NULL };
	test_allow = &allow;
	int r = run_sandbox(WARD_NET_ALLOWLIST, e, argv, false, &res);
	test_allow = NULL;
	if (r < 0 && !res.v.sandbox_id[0]) { /* never started */
		skip("the sandbox cannot start here: %s", ward_error_format(&res.err, buf, sizeof(buf)));
	} else {
		is_str(res.out, "hello\nhello\n", "through HTTP_PROXY and by a raw connect: the server answered");
		ok(res.v.network.present && res.v.network.connections == 2,
		   "the verdict counts both connections");
	}
	ward_verdict_release(&res.v);
	ward_egress_free(e);
	kill(server, SIGKILL);
	waitpid(server, NULL, 0);
}
#endif

int main(void)
{
	struct sigaction sa = { .sa_handler = SIG_IGN };
	sigaction(SIGPIPE, &sa, NULL);
	in_namespaces(layer_allowlist);
	in_namespaces(layer_none);
	sandbox_refusals();
	if (!have_python()) {
		skip("python3 is not installed: the sandbox probe needs it");
		return tap_done();
	}
#ifndef WARD_HAVE_EGRESS
	sandbox_fake();
	skip("the egress proxy is not built: no end-to-end run through it");
#else
	sandbox_proxy();
#endif
	return tap_done();
}
