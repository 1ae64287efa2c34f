/* src/daemon/serve.c — `ward serve`: start, loop, stop.
 *
 * Reads the settings, loads the default policy and the keys, opens the
 * audit log, checks and locks the state directory (only the daemon's user
 * may write it; one daemon per state directory), takes the unix socket
 * (refusing one a live daemon holds, removing a stale one), and runs the one epoll loop: libmicrohttpd's epoll
 * fd, every execution's fds, and a self-pipe for signals (handlers, not a
 * blocked mask: a blocked mask would be inherited by every sandbox). On
 * SIGTERM it stops accepting, gives running executions the grace period,
 * kills what is left, and exits 0 once every sandbox is destroyed.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sodium.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "base/util.h"
#include "cgroup.h"
#include "daemon.h"
#include "routes.h"
#include "serve.h"
#include "ward/ward.h"

extern const char ward_openapi_json[];
extern const char ward_openapi_json_end[];

static int sig_pipe[2] = { -1, -1 };
/* flock on state_dir/lock for the daemon's lifetime: one daemon per state */
static int state_lock = -1;

static void on_signal(int sig)
{
	int saved = errno;
	unsigned char b = (unsigned char)sig;
	if (write(sig_pipe[1], &b, 1) < 0) {
		/* a full pipe already holds a signal */
	}
	errno = saved;
}

void srv_audit(struct srv *s, const char *event, json_t *fields)
{
	if (!s->audit)
		return;
	struct ward_error err;
	if (ward_audit_record(s->audit, event, fields, &err) < 0) {
		char buf[1024];
		fprintf(stderr, "ward: serve: audit: %s\n", ward_error_format(&err, buf, sizeof(buf)));
	}
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

/* --- the state directory --- */

/* Root's in /var/lib; a user's in $XDG_STATE_HOME (or ~/.local/state):
 * never beside a socket, which may sit in a world-writable directory. */
static int state_dir_default(struct srv *s)
{
	char dir[PATH_MAX];
	const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	int n;
	if (geteuid() == 0)
		n = snprintf(dir, sizeof(dir), "/var/lib/ward");
	else if (xdg && xdg[0] == '/')
		n = snprintf(dir, sizeof(dir), "%s/ward", xdg);
	else if (home && home[0] == '/')
		n = snprintf(dir, sizeof(dir), "%s/.local/state/ward", home);
	else {
		fprintf(stderr, "ward: error: serve: state-dir: no default without $HOME or "
			"$XDG_STATE_HOME; give --state-dir\n");
		return -1;
	}
	if (n < 0 || (size_t)n >= sizeof(dir) || !(s->cfg.state_dir = strdup(dir)))
		return -1;
	return 0;
}

/* Why a directory of the state path is unsafe, or NULL. The state
 * directory itself (last) must be the daemon user's and closed to others;
 * a directory above it must be root's or the daemon user's, and writable by
 * others only with the sticky bit (/tmp), where nobody else can move the
 * entries below. */
static const char *dir_unsafe(const struct stat *st, bool last)
{
	uid_t me = geteuid();
	if (!S_ISDIR(st->st_mode))
		return "is not a directory";
	if (last && st->st_uid != me)
		return "is not owned by the daemon's user";
	if (!last && st->st_uid != 0 && st->st_uid != me)
		return "is owned by another user";
	if (last && (st->st_mode & 022))
		return "is writable by group or others (chmod go-w)";
	if (!last && (st->st_mode & 022) && !(st->st_mode & S_ISVTX))
		return "is writable by group or others and not sticky";
	return NULL;
}

/* Creates what is missing (0700), then walks the resolved path from / with
 * O_NOFOLLOW, checking each directory's owner and mode on the open fd. */
static int state_dir_check(const char *path)
{
	char real[PATH_MAX], part[PATH_MAX];
	ward_strlcpy(part, path, sizeof(part));
	for (char *p = part + 1;; p++) {
		if (*p && *p != '/')
			continue;
		char c = *p;
		*p = '\0';
		if (mkdir(part, 0700) < 0 && errno != EEXIST) {
			fprintf(stderr, "ward: error: serve: state-dir: unable to create '%s': %s\n",
				part, strerror(errno));
			return -1;
		}
		if (!(*p = c))
			break;
	}
	if (!realpath(path, real)) {
		fprintf(stderr, "ward: error: serve: state-dir: '%s': %s\n", path, strerror(errno));
		return -1;
	}
	int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	char *save = NULL, *c = strtok_r(real + 1, "/", &save);
	ward_strlcpy(part, "", sizeof(part));
	for (;;) {
		struct stat st;
		const char *why = fd < 0 || fstat(fd, &st) < 0 ? strerror(errno)
							     : dir_unsafe(&st, c == NULL);
		if (why) {
			fprintf(stderr, "ward: error: serve: state-dir: '%s'%s%s%s: %s; the daemon "
				"kills what state files name, so only its user may write there\n",
				path, part[0] ? " (at '" : "", part, part[0] ? "')" : "", why);
			if (fd >= 0)
				close(fd);
			return -1;
		}
		if (!c)
			break;
		ward_strlcat(part, "/", sizeof(part));
		ward_strlcat(part, c, sizeof(part));
		int next = openat(fd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = next;
		c = strtok_r(NULL, "/", &save);
	}
	close(fd);
	return 0;
}

/* Held until the process exits (the fd is O_CLOEXEC: no sandbox keeps it).
 * A second daemon on the same state stops here, before it reads or
 * removes anything. */
static int state_dir_lock(const char *dir)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/lock", dir) >= (int)sizeof(path))
		return -1;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		fprintf(stderr, "ward: error: serve: state-dir: unable to open '%s': %s\n", path,
			strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		if (e == EWOULDBLOCK)
			fprintf(stderr, "ward: error: serve: state-dir: another daemon holds '%s' "
				"(lock '%s'); each daemon needs a state directory of its own "
				"(--state-dir)\n", dir, path);
		else
			fprintf(stderr, "ward: error: serve: state-dir: unable to lock '%s': %s\n",
				path, strerror(e));
		close(fd);
		return -1;
	}
	state_lock = fd;
	return 0;
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

static int load_policy(struct srv *s)
{
	struct ward_error err;
	ward_error_clear(&err);
	int r = ward_policy_init(&s->policy, &err);
	if (r == 0 && s->cfg.policy_file) {
		_cleanup_free_ char *buf = NULL;
		size_t len;
		r = ward_read_file(s->cfg.policy_file, 1 << 20, &buf, &len);
		if (r < 0)
			ward_error_set(&err, -r, "serve", "unable to read '%s'", s->cfg.policy_file);
		else
			r = ward_policy_load_json(&s->policy, buf, len, s->cfg.policy_file, &err);
	}
	if (r == 0 && s->cfg.policy) {
		_cleanup_free_ char *txt = json_dumps(s->cfg.policy, JSON_COMPACT);
		r = txt ? ward_policy_load_json(&s->policy, txt, strlen(txt), "config: policy", &err)
			: -ENOMEM;
	}
	if (r == 0)
		r = ward_policy_validate(&s->policy, &err);
	if (r < 0) {
		char buf[1024];
		fprintf(stderr, "ward: error: %s\n", ward_error_format(&err, buf, sizeof(buf)));
	}
	return r;
}

static int open_audit(struct srv *s)
{
	if (!s->cfg.audit_log)
		return 0;
	struct ward_audit_options ao = {
		.full_text = s->cfg.audit_full_text,
		.sync = s->cfg.audit_sync ? WARD_AUDIT_SYNC_EVERY : WARD_AUDIT_SYNC_NONE,
	};
	struct ward_error err;
	if (ward_audit_open(s->cfg.audit_log, &ao, &s->audit, &err) < 0) {
		char buf[1024];
		fprintf(stderr, "ward: error: %s\n", ward_error_format(&err, buf, sizeof(buf)));
		return -1;
	}
	return 0;
}

static int setup_loop(struct srv *s)
{
	static struct watch sigw = { .kind = WATCH_SIGNAL };
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->epfd < 0 || pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &sigw };
	return epoll_ctl(s->epfd, EPOLL_CTL_ADD, sig_pipe[0], &ev);
}

static void begin_stop(struct srv *s)
{
	if (s->stopping) {
		/* a second signal: no more grace */
		s->stop_deadline_ns = ward_now_ns();
		return;
	}
	s->stopping = true;
	s->stop_deadline_ns = ward_now_ns() + s->cfg.grace_ms * 1000000ull;
	srv_http_quiesce(s);
	if (s->unix_bound)
		unlink(s->cfg.socket);
	json_t *f = json_pack("{s:i, s:I}", "running", (int)s->running, "grace_ms",
			      (json_int_t)s->cfg.grace_ms);
	srv_audit(s, "daemon.stopping", f);
	json_decref(f);
	char grace[32];
	fprintf(stderr, "ward: serve: stopping (%u running, grace %s)\n", s->running,
		ward_format_duration_ms(s->cfg.grace_ms, grace, sizeof(grace)));
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

/* True once everything is over: no execution left, connections drained
 * (or 2 s after the last execution). */
static bool stop_done(struct srv *s, uint64_t *drain_until)
{
	uint64_t now = ward_now_ns();
	if (s->execs && !s->killed_all && now >= s->stop_deadline_ns) {
		s->killed_all = true;
		exec_kill_all(s);
		/* a session's call ends with its sandbox, whatever its agent does */
		session_destroy_all(s, "the daemon stopped");
	}
	if (s->execs)
		return false;
	if (s->n_sessions)
		session_destroy_all(s, "the daemon stopped");
	if (!*drain_until)
		*drain_until = now + 2000000000ull;
	return srv_http_connections(s) == 0 || now >= *drain_until;
}

static int loop_timeout(struct srv *s)
{
	int t = srv_http_timeout(s), e = exec_timeout(s), se = session_timeout(s);
	if (e >= 0 && (t < 0 || e < t))
		t = e;
	if (se >= 0 && (t < 0 || se < t))
		t = se;
	if (s->stopping && (t < 0 || t > 50))
		t = 50;
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
			else if (w->kind == WATCH_EXEC)
				exec_dispatch(s, w->ptr);
			else if (w->kind == WATCH_CLIENT)
				exec_client_gone(w->ptr);
			else if (w->kind == WATCH_SESSION)
				session_dispatch(s, w->ptr);
			else if (w->kind == WATCH_WORKER)
				srv_workers_dispatch(s);
		}
		exec_tick(s);
		session_tick(s);
		srv_http_run(s);
		if (s->stopping && stop_done(s, &drain_until))
			return 0;
	}
}

static int start(struct srv *s)
{
	if (!s->cfg.keys_file && !(s->cfg.keys_file = strdup(ward_keys_default_path())))
		return -1;
	if (!s->cfg.socket && !(s->cfg.socket = strdup("/run/ward/ward.sock")))
		return -1;
	if (load_policy(s) < 0 || open_audit(s) < 0 || setup_loop(s) < 0 || srv_workers_start(s) < 0)
		return -1;
	s->openapi = ward_openapi_json;
	s->openapi_len = (size_t)(ward_openapi_json_end - ward_openapi_json);
	srv_keys_reload(s);
	if (!s->keys)
		fprintf(stderr, "ward: serve: warning: no keys in '%s': every request will be refused "
			"(ward keys add)\n", s->cfg.keys_file);
	bool unix_sock = strcmp(s->cfg.socket, "") != 0 && strcmp(s->cfg.socket, "none") != 0;
	/* Refusals first, before anything is read, killed or removed: a live
	 * daemon on the socket, a state directory others could write, or one
	 * another daemon holds. */
	if (unix_sock && socket_answers(s->cfg.socket)) {
		fprintf(stderr, "ward: error: serve: another daemon is listening on '%s'\n",
			s->cfg.socket);
		return -1;
	}
	if (!s->cfg.state_dir && state_dir_default(s) < 0)
		return -1;
	if (s->cfg.state_dir[0] != '/') {
		fprintf(stderr, "ward: error: serve: state-dir: '%s': expected an absolute path\n",
			s->cfg.state_dir);
		return -1;
	}
	if (state_dir_check(s->cfg.state_dir) < 0 || state_dir_lock(s->cfg.state_dir) < 0)
		return -1;
	/* Leftovers of a killed daemon are found by ward's own cgroup names
	 * (a dead supervisor's pid and start time), never by a pid read from
	 * a file; the state files only turn its sessions into tombstones. */
	ward_cgroup_gc(NULL, NULL);
	if (session_recover(s) < 0)
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
	srv_audit(s, "daemon.start", f);
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
	srv_workers_stop(s); /* before the connections its jobs answer go */
	session_release_all(s);
	srv_http_stop(s);
	if (s->unix_bound && !s->stopping)
		unlink(s->cfg.socket);
	if (s->audit) {
		json_t *f = json_pack("{s:i}", "status", status);
		srv_audit(s, "daemon.stop", f);
		json_decref(f);
	}
	ward_audit_free(s->audit);
	ward_keys_free(s->keys);
	ward_policy_release(&s->policy);
	srv_config_release(&s->cfg);
	if (s->epfd >= 0)
		close(s->epfd);
	if (state_lock >= 0)
		close(state_lock);
	free(s);
	return status;
}
