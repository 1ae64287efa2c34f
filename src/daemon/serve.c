/* src/daemon/serve.c — `ward serve`: start, loop, stop.
 *
 * Reads the settings, starts the service core (include/ward/service.h:
 * the default policy, the keys, the audit log, its workers), refuses a
 * socket a live daemon holds, has the core check and lock its state
 * directory, takes the unix socket (removing a stale one), and runs the
 * one epoll loop: libmicrohttpd's epoll fds, the core's one fd, the
 * clients that wait for an execution, and a self-pipe for signals
 * (handlers, not a blocked mask: a blocked mask would be inherited by
 * every sandbox). On SIGTERM it stops accepting, the core gives running
 * executions the grace period and kills what is left, and it exits 0
 * once every sandbox is destroyed.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sodium.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "base/util.h"
#include "daemon.h"
#include "routes.h"
#include "serve.h"
#include "ward/ward.h"
#include "ward/zygote.h"

extern const char ward_openapi_json[];
extern const char ward_openapi_json_end[];

static int sig_pipe[2] = { -1, -1 };

static void on_signal(int sig)
{
	int saved = errno;
	unsigned char b = (unsigned char)sig;
	if (write(sig_pipe[1], &b, 1) < 0) {
		/* a full pipe already holds a signal */
	}
	errno = saved;
}

static int mkdir_parents(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	ward_strlcpy(dir, path, sizeof(dir));
	for (char *p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, 0750) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return 0;
}

/* True when a daemon answers on the socket at path. Touches nothing. */
static bool socket_answers(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	if (strlen(path) >= sizeof(sa.sun_path) || lstat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
		return false;
	ward_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	int r = connect(fd, (const struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	return r == 0;
}

/* A socket someone answers on is a live daemon's; one nobody answers on is
 * stale and removed; anything else at the path is refused. */
static int claim_path(const struct sockaddr_un *sa)
{
	struct stat st;
	if (lstat(sa->sun_path, &st) < 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISSOCK(st.st_mode)) {
		fprintf(stderr, "ward: error: serve: '%s' exists and is not a socket\n", sa->sun_path);
		return -1;
	}
	if (socket_answers(sa->sun_path)) {
		fprintf(stderr, "ward: error: serve: another daemon is listening on '%s'\n",
			sa->sun_path);
		return -1;
	}
	return unlink(sa->sun_path) == 0 || errno == ENOENT ? 0 : -1;
}

static int open_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path) || path[0] != '/') {
		fprintf(stderr, "ward: error: --socket: '%s': expected an absolute path under %zu bytes\n",
			path, sizeof(sa.sun_path));
		return -1;
	}
	ward_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	if (mkdir_parents(path) < 0 || claim_path(&sa) < 0) {
		if (errno)
			fprintf(stderr, "ward: error: serve: unable to prepare '%s': %s\n", path,
				strerror(errno));
		return -1;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	mode_t old = umask(0117);
	int r = fd < 0 ? -1 : bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || chmod(path, 0660) < 0 || listen(fd, 256) < 0) {
		fprintf(stderr, "ward: error: serve: unable to listen on '%s': %s\n", path,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int setup_loop(struct srv *s)
{
	static struct watch sigw = { .kind = WATCH_SIGNAL }, svcw = { .kind = WATCH_SERVICE };
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->epfd < 0 || pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &sigw };
	struct epoll_event sev = { .events = EPOLLIN, .data.ptr = &svcw };
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, sig_pipe[0], &ev) < 0)
		return -1;
	return epoll_ctl(s->epfd, EPOLL_CTL_ADD, ward_service_fd(s->svc), &sev);
}

static void begin_stop(struct srv *s)
{
	ward_service_stop(s->svc); /* asked again: no more grace */
	if (s->stopping)
		return;
	s->stopping = true;
	srv_http_quiesce(s);
	if (s->unix_bound)
		unlink(s->cfg.socket);
	char grace[32];
	fprintf(stderr, "ward: serve: stopping (%u running, grace %s)\n",
		ward_service_running(s->svc),
		ward_format_duration_ms(ward_service_settings(s->svc)->grace_ms, grace,
					sizeof(grace)));
}

static void on_signals(struct srv *s)
{
	unsigned char b[16];
	ssize_t n;
	while ((n = read(sig_pipe[0], b, sizeof(b))) > 0)
		for (ssize_t i = 0; i < n; i++)
			if (b[i] == SIGTERM || b[i] == SIGINT)
				begin_stop(s);
}

/* True once everything is over: no sandbox left (the core kills what
 * outlives the grace), connections drained (or 2 s after the last). */
static bool stop_done(struct srv *s, uint64_t *drain_until)
{
	uint64_t now = ward_now_ns();
	if (!ward_service_idle(s->svc))
		return false;
	if (!*drain_until)
		*drain_until = now + 2000000000ull;
	return srv_http_connections(s) == 0 || now >= *drain_until;
}

static int loop_timeout(struct srv *s)
{
	int t = srv_http_timeout(s), c = ward_service_timeout(s->svc);
	if (c >= 0 && (t < 0 || c < t))
		t = c;
	return t;
}

int srv_loop(struct srv *s)
{
	struct epoll_event evs[64];
	uint64_t drain_until = 0;
	for (;;) {
		int n = epoll_wait(s->epfd, evs, ARRAY_SIZE(evs), loop_timeout(s));
		if (n < 0 && errno != EINTR)
			return -1;
		for (int i = 0; i < n; i++) {
			struct watch *w = evs[i].data.ptr;
			if (w->kind == WATCH_SIGNAL)
				on_signals(s);
			else if (w->kind == WATCH_CLIENT)
				srv_http_client_gone(s, w->ptr);
			else if (w->kind == WATCH_MCP)
				srv_mcp_client_gone(s, w->ptr);
			else if (w->kind == WATCH_EVENTS)
				srv_events_client_gone(w->ptr);
		}
		/* the core's fds, and its timers, every turn */
		ward_service_dispatch(s->svc);
		srv_http_run(s);
		if (s->stopping && stop_done(s, &drain_until))
			return 0;
	}
}

/* The launcher and the zygote, when the operator asks for them: forked
 * from this thread, which outlives every sandbox, before the core's
 * workers exist (ward/zygote.h). One that cannot start stops the daemon. */
static int start_helpers(struct srv *s)
{
	struct ward_error err;
	ward_error_clear(&err);
	if (s->cfg.launcher && !(s->launcher = ward_launcher_start(&err))) {
		fprintf(stderr, "ward: error: serve: launcher: %s\n", err.message);
		return -1;
	}
	if (!s->cfg.zygote || strcmp(s->cfg.zygote, "python") != 0)
		return 0;
	char *mods = s->cfg.zygote_modules ? strdup(s->cfg.zygote_modules) : NULL;
	const char *list[33];
	size_t n = 0;
	for (char *save = NULL, *m = mods ? strtok_r(mods, ",", &save) : NULL; m && n < 32;
	     m = strtok_r(NULL, ",", &save))
		list[n++] = m;
	list[n] = NULL;
	s->zygote = ward_zygote_start(WARD_LANG_PYTHON, mods ? list : NULL, s->cfg.core.runners,
				      &err);
	free(mods);
	if (!s->zygote) {
		fprintf(stderr, "ward: error: serve: zygote: %s\n", err.message);
		return -1;
	}
	return 0;
}

static int start(struct srv *s)
{
	if (!s->cfg.socket && !(s->cfg.socket = strdup("/run/ward/ward.sock")))
		return -1;
	bool unix_sock = strcmp(s->cfg.socket, "") != 0 && strcmp(s->cfg.socket, "none") != 0;
	/* Refusals first, before anything is read, killed or removed: a live
	 * daemon on the socket, a state directory others could write, or one
	 * another daemon holds. */
	if (unix_sock && socket_answers(s->cfg.socket)) {
		fprintf(stderr, "ward: error: serve: another daemon is listening on '%s'\n",
			s->cfg.socket);
		return -1;
	}
	if (start_helpers(s) < 0)
		return -1;
	s->cfg.core.launcher = s->launcher;
	s->cfg.core.zygote = s->zygote;
	if (ward_service_new(&s->cfg.core, &s->svc) < 0 || setup_loop(s) < 0)
		return -1;
	s->openapi = ward_openapi_json;
	s->openapi_len = (size_t)(ward_openapi_json_end - ward_openapi_json);
	if (ward_service_open_state(s->svc) < 0)
		return -1;
	int ufd = -1;
	if (unix_sock) {
		if ((ufd = open_unix(s->cfg.socket)) < 0)
			return -1;
		s->unix_bound = true;
	}
	if (srv_http_start(s, ufd) < 0)
		return -1;
	if (s->n_mhd == 0) {
		fprintf(stderr, "ward: error: serve: nothing to listen on (--socket, --listen)\n");
		return -1;
	}
	json_t *f = json_pack("{s:s, s:s?, s:s}", "socket", s->cfg.socket, "listen", s->cfg.listen,
			      "version", WARD_VERSION);
	ward_service_audit(s->svc, "daemon.start", f);
	json_decref(f);
	fprintf(stderr, "ward: serve: listening on %s%s%s\n", s->cfg.socket,
		s->cfg.listen ? " and " : "", s->cfg.listen ? s->cfg.listen : "");
	return 0;
}

int ward_cli_serve(int argc, char **argv)
{
	/* hidden: the route table as JSON, which t0770 compares with the
	 * OpenAPI document */
	if (argc == 2 && strcmp(argv[1], "--print-routes") == 0)
		return route_print(stdout) == 0 ? 0 : 1;
	struct srv *s = calloc(1, sizeof(*s));
	if (!s || sodium_init() < 0) {
		free(s);
		return 1;
	}
	s->epfd = -1;
	srv_config_defaults(&s->cfg);
	int r = srv_config_parse(&s->cfg, argc, argv);
	int status = r > 0 ? 0 : 2;
	if (r == 0) {
		status = 1;
		if (start(s) == 0 && srv_loop(s) == 0)
			status = 0;
	}
	if (s->svc) /* answers what waits, while its connections are there */
		ward_service_close(s->svc);
	srv_mcp_close_all(); /* wakes what waits on them, before their connections close */
	srv_http_stop(s);
	if (s->unix_bound && !s->stopping)
		unlink(s->cfg.socket);
	if (s->svc && ward_service_audit_log(s->svc)) {
		json_t *f = json_pack("{s:i}", "status", status);
		ward_service_audit(s->svc, "daemon.stop", f);
		json_decref(f);
	}
	ward_service_free(s->svc);
	/* after the core: its sandboxes are gone, and they are ours anyway */
	ward_zygote_stop(s->zygote);
	ward_launcher_stop(s->launcher);
	srv_config_release(&s->cfg);
	if (s->epfd >= 0)
		close(s->epfd);
	free(s);
	return status;
}
