/* src/cli/mcp.c — `ward mcp`: an MCP server on stdin/stdout for one client.
 *
 * A front end of the MCP conversation (include/ward/mcp.h) over a service
 * core of this process's own, for a plain user with no daemon: sandboxes
 * are its children, sessions and their files live in a private state
 * directory (mkdtemp, 0700) that is removed at exit, and no keys file is
 * read (the conversation's key is made here: tenant "local", scopes
 * execute, sessions and files). Newline-delimited JSON-RPC comes in on
 * stdin and goes out on stdout. Nothing but JSON-RPC may ever reach
 * stdout: the messages go to a private copy of fd 1 and fd 1 itself is
 * pointed at stderr before the core exists, so a stray print of the
 * library cannot corrupt the stream (sandboxes never inherit either). On
 * stdin's end (or SIGINT, SIGTERM, SIGHUP) everything running is
 * cancelled, every session ended and the state directory removed before
 * it exits. With --connect URL it relays to a daemon's /mcp instead.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"
#include "config.h"
#include "mcp.h"
#include "server/keys.h"
#include "ward/kernel.h"
#include "src/daemon/serve.h"
#include "ward/mcp.h"
#include "ward/service.h"

enum { READ_CHUNK = 65536, STOP_WAIT_MS = 10000, RMTREE_DEPTH = 16 };

static const char mcp_usage[] =
	"usage: ward mcp [--policy FILE]\n"
	"       ward mcp --connect URL [--api-key KEY]\n"
	"\n"
	"An MCP server (Model Context Protocol, 2025-11-25 and 2025-06-18) on stdin\n"
	"and stdout, for an MCP host such as Claude Desktop or Claude Code. Its tools\n"
	"run code in sandboxes: run_python_code, run_code, create_session,\n"
	"close_session, write_file, read_file, list_files (docs/mcp.md).\n"
	"\n"
	"Without --connect the sandboxes are this process's children (no daemon is\n"
	"needed): its sessions live in a private directory removed at exit.\n"
	"stdout carries JSON-RPC only; diagnostics go to stderr. It exits when stdin\n"
	"ends, cancelling what runs.\n"
	"\n"
	"  --policy FILE     the default policy (JSON); requests may only tighten it\n"
	"  --connect URL     relay to a daemon's /mcp endpoint (ward serve)\n"
	"  --api-key KEY     the daemon's API key (default: $WARD_API_KEY)\n"
	"  -h, --help        this text\n";

struct mcp_opts {
	const char *policy;
	bool connect;
	bool api_key;
	bool help;
};

static int parse(int argc, char **argv, struct mcp_opts *o)
{
	static const struct option longs[] = {
		{ "policy", required_argument, NULL, 'p' },
		{ "connect", required_argument, NULL, 'C' },
		{ "api-key", required_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+h", longs, NULL)) != -1) {
		switch (c) {
		case 'p': o->policy = optarg; break;
		case 'C': o->connect = true; break;
		case 'k': o->api_key = true; break; /* --connect's */
		case 'h': o->help = true; break;
		default:
			fprintf(stderr, "ward: error: mcp: unknown or incomplete option '%s'\n%s",
				argv[optind - 1], mcp_usage);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "ward: error: mcp: unexpected argument '%s'\n%s", argv[optind],
			mcp_usage);
		return -1;
	}
	if (o->api_key && !o->connect) {
		fprintf(stderr, "ward: error: mcp: --api-key goes with --connect URL (a local "
			"server needs no key)\n");
		return -1;
	}
	return 0;
}

/* Until the relay is linked in, a ward without it says so. */
__attribute__((weak)) int ward_cli_mcp_connect(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "ward: error: mcp: --connect is not built into this ward\n");
	return 1;
}

/* --- stdout: JSON-RPC only --- */

static int out_fd = -1;

static void send_line(void *ctx, json_t *msg, json_t *related)
{
	(void)ctx;
	(void)related;
	size_t n = 0;
	char *s = ward_json_dump(msg, JSON_COMPACT, 1, &n);
	if (!s)
		return;
	s[n++] = '\n';
	if (ward_write_all(out_fd, s, n) < 0 && errno != EPIPE)
		fprintf(stderr, "ward: mcp: unable to write to stdout: %s\n", strerror(errno));
	free(s);
}

/* fd 1 becomes a private, close-on-exec copy for the messages, and fd 1
 * itself a copy of stderr. */
static int claim_stdout(void)
{
	out_fd = fcntl(1, F_DUPFD_CLOEXEC, 3);
	if (out_fd < 0 || dup2(2, 1) < 0) {
		fprintf(stderr, "ward: error: mcp: unable to set up stdout: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

/* --- the private state directory --- */

/* Removes dir's contents below dirfd, at most RMTREE_DEPTH deep (the core
 * writes a few files and one level of directories there). */
static void rmtree_at(int dirfd, int depth)
{
	DIR *d = fdopendir(dirfd);
	if (!d) {
		close(dirfd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (unlinkat(dirfd, e->d_name, 0) == 0 || (errno != EISDIR && errno != EPERM))
			continue;
		int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0 && depth < RMTREE_DEPTH)
			rmtree_at(sub, depth + 1);
		else if (sub >= 0)
			close(sub);
		unlinkat(dirfd, e->d_name, AT_REMOVEDIR);
	}
	closedir(d);
}

static void remove_state(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0)
		rmtree_at(fd, 0);
	if (rmdir(dir) < 0 && errno != ENOENT)
		fprintf(stderr, "ward: mcp: unable to remove '%s': %s\n", dir, strerror(errno));
}

static int make_state(char *dir, size_t size)
{
	const char *tmp = getenv("TMPDIR");
	if (!tmp || tmp[0] != '/')
		tmp = "/tmp";
	if (snprintf(dir, size, "%s/ward-mcp.XXXXXX", tmp) >= (int)size || !mkdtemp(dir)) {
		fprintf(stderr, "ward: error: mcp: unable to create a state directory in '%s': %s\n",
			tmp, strerror(errno));
		return -1;
	}
	return 0;
}

/* --- the loop --- */

struct line_reader {
	char *buf;
	size_t len, cap;
	bool skipping;      /* the current line is over the limit: dropped to its end */
};

static void too_long(struct ward_mcp *m)
{
	char msg[128];
	snprintf(msg, sizeof(msg), "invalid request: the message is over the limit of %d bytes",
		 WARD_MCP_MESSAGE_MAX);
	json_t *e = json_pack("{s:s, s:n, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", "error", "code",
			      -32600, "message", msg);
	(void)m;
	if (e)
		send_line(NULL, e, NULL);
	json_decref(e);
}

/* Hands every whole line of what was read to the conversation; keeps the
 * rest. A line over WARD_MCP_MESSAGE_MAX is answered once and dropped. */
static void take_lines(struct line_reader *r, struct ward_mcp *m)
{
	size_t start = 0;
	for (;;) {
		char *nl = memchr(r->buf + start, '\n', r->len - start);
		if (!nl)
			break;
		size_t n = (size_t)(nl - (r->buf + start));
		if (r->skipping)
			r->skipping = false;
		else if (n && !(n == 1 && r->buf[start] == '\r'))
			ward_mcp_receive(m, r->buf + start, n);
		start += n + 1;
	}
	memmove(r->buf, r->buf + start, r->len - start);
	r->len -= start;
	if (r->len > WARD_MCP_MESSAGE_MAX) {
		if (!r->skipping)
			too_long(m);
		r->skipping = true;
		r->len = 0;
	}
}

/* 1 more to come, 0 at stdin's end, -1 on an error. */
static int read_stdin(struct line_reader *r, struct ward_mcp *m)
{
	if (r->cap - r->len < READ_CHUNK) {
		size_t cap = r->cap ? r->cap * 2 : 2 * READ_CHUNK;
		while (cap - r->len < READ_CHUNK)
			cap *= 2;
		char *nb = realloc(r->buf, cap);
		if (!nb)
			return -1;
		r->buf = nb;
		r->cap = cap;
	}
	ssize_t n = read(0, r->buf + r->len, READ_CHUNK);
	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 1 : -1;
	if (n == 0) {
		if (r->len && !r->skipping) /* a last line without its newline */
			ward_mcp_receive(m, r->buf, r->len);
		return 0;
	}
	r->len += (size_t)n;
	take_lines(r, m);
	/* past the bound and dropped: the buffer shrinks back */
	if (r->cap > 4 * READ_CHUNK && r->len < READ_CHUNK) {
		char *nb = realloc(r->buf, 2 * READ_CHUNK);
		if (nb) {
			r->buf = nb;
			r->cap = 2 * READ_CHUNK;
		}
	}
	return 1;
}

/* SIGINT, SIGTERM and SIGHUP end the loop as stdin's end does. A handler
 * and a pipe, never a blocked mask: the sandboxes would inherit the mask
 * (a session's kernel is interrupted with SIGINT), while a handler is
 * reset by their execve. */
static int sig_pipe[2] = { -1, -1 };

static void on_signal(int sig)
{
	int e = errno;
	char b = (char)sig;
	if (write(sig_pipe[1], &b, 1) < 0) {
		/* full: one byte is enough to wake the loop */
	}
	errno = e;
}

static int signals_fd(void)
{
	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	return sig_pipe[0];
}

static void serve_loop(struct ward_service *svc, struct ward_mcp *m, int sfd)
{
	struct line_reader r = { 0 };
	for (;;) {
		struct pollfd p[3] = {
			{ .fd = 0, .events = POLLIN },
			{ .fd = ward_service_fd(svc), .events = POLLIN },
			{ .fd = sfd, .events = POLLIN },
		};
		int rc = poll(p, 3, ward_service_timeout(svc));
		if (rc < 0 && errno != EINTR)
			break;
		if (p[2].revents)
			break;
		if (p[0].revents && read_stdin(&r, m) <= 0)
			break;
		ward_service_dispatch(svc);
	}
	free(r.buf);
}

/* Everything running is cancelled and every session ended; the sandboxes
 * are gone (their cgroups removed) before this returns, within a bound. */
static void shut_down(struct ward_service *svc)
{
	ward_service_stop(svc);
	ward_service_stop_now(svc);
	uint64_t until = ward_now_ns() + STOP_WAIT_MS * 1000000ull;
	while (!ward_service_idle(svc) && ward_now_ns() < until) {
		struct pollfd p = { .fd = ward_service_fd(svc), .events = POLLIN };
		int t = ward_service_timeout(svc);
		poll(&p, 1, t < 0 || t > 50 ? 50 : t);
		ward_service_dispatch(svc);
	}
}

static int run_server(const struct mcp_opts *o)
{
	char state[4096];
	int status = 1;
	struct ward_service *svc = NULL;
	struct ward_mcp *m = NULL;
	struct ward_service_config c;
	ward_service_config_defaults(&c);
	c.no_keys = true;
	c.pool[WARD_LANG_PYTHON] = 1; /* one warm python kernel: the first call is as fast as the next */
	int sfd = signals_fd();
	if (sfd < 0 || claim_stdout() < 0 || make_state(state, sizeof(state)) < 0) {
		ward_service_config_release(&c);
		return 1;
	}
	if (!(c.state_dir = strdup(state)) || (o->policy && !(c.policy_file = strdup(o->policy)))) {
		ward_service_config_release(&c);
		remove_state(state);
		return 1;
	}
	struct ward_key_info key = { .scopes = WARD_SCOPE_EXECUTE | WARD_SCOPE_SESSIONS |
					       WARD_SCOPE_FILES };
	ward_strlcpy(key.tenant, "local", sizeof(key.tenant));
	ward_strlcpy(key.id, "local", sizeof(key.id));
	struct ward_mcp_peer peer = { .ctx = NULL, .send = send_line };
	if (ward_service_new(&c, &svc) == 0 && ward_service_open_state(svc) == 0 &&
	    ward_mcp_new(svc, &key, &peer, &m) == 0) {
		serve_loop(svc, m, sfd);
		status = 0;
	}
	ward_mcp_free(m); /* cancels what runs */
	if (svc)
		shut_down(svc);
	ward_service_free(svc);
	ward_service_config_release(&c);
	remove_state(state);
	close(sig_pipe[0]);
	close(sig_pipe[1]);
	return status;
}

int ward_cli_mcp(int argc, char **argv)
{
	/* the relay parses its own options */
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--connect") == 0 || strncmp(argv[i], "--connect=", 10) == 0)
			return ward_cli_mcp_connect(argc, argv);
	struct mcp_opts o = { 0 };
	if (parse(argc, argv, &o) < 0)
		return 2;
	if (o.help) {
		fputs(mcp_usage, stdout);
		return 0;
	}
	return run_server(&o);
}
