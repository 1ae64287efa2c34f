/* lib/kernel.c — language kernels over the sandbox interface.
 *
 * Starts a runner (runners/<lang>/) in a sandbox with the runners bound
 * read-only at /opt/ward/runners, sends JSON-lines requests on its stdin and
 * reads JSON-lines messages from its stdout. The kernel runs untrusted code
 * in its own process, so every line is capped, parsed, and treated as a
 * claim: never as an instruction, never trusted for limits (the sandbox's
 * verdict says how it ended). Strings may hold U+0000 (a program's output
 * is bytes): every string read here is compared by length. A line that is
 * not a protocol message is a protocol violation by the kernel, never the
 * program's output: it is dropped and reported once as a protocol_error.
 */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>

#include "base/util.h"
#include "kernel-internal.h"
#include "workspace.h"
#include "ward/zygote.h"
#include <sodium.h>

#define RUNNERS_INSIDE "/opt/ward/runners"

enum {
	READ_CHUNK = 65536,
	MIN_LINE_MAX = 64 << 20,   /* a matplotlib PNG in base64 fits easily */
};

struct waiter;

struct ward_kernel {
	struct ward_policy policy;
	struct ward_sandbox *sb;
	enum ward_lang lang;
	bool session;           /* the session agent, not one kernel */
	char runners[PATH_MAX];
	struct ward_bind bind;
	/* protocol input */
	char *line;
	size_t line_len, line_cap, line_max;
	bool line_overflow;
	uint64_t bad_lines;     /* lines that were not protocol messages, dropped */
	uint64_t proto_total, proto_max;
	bool out_eof, err_eof;
	/* requests not yet written */
	char *pending;
	size_t pending_len, pending_off;
	unsigned next_id;
	bool dead;
	bool claimed;           /* at most once: the request's files are in */
	struct ward_kernel_input *inputs;
	size_t n_inputs;
	struct waiter *aw;      /* the non-blocking form's awaited reply, or NULL */
	json_t *globals;        /* for the next execute or call request, or NULL */
};

/* The registry, generated from runners/languages.json at build time (see
 * tools/gen-languages.py for why not at run time). */
#define WARD_RUNNERS_INSIDE RUNNERS_INSIDE
#include "languages.h"
static const struct {
	const char *name;
	const char *aliases[4];   /* NULL-terminated */
	const char *extension;
	char *const argv[8];      /* NULL-terminated */
} langs[] = { WARD_LANGS_ROWS };
_Static_assert(ARRAY_SIZE(langs) == WARD_LANG_COUNT,
	       "runners/languages.json and enum ward_lang disagree");

WARD_EXPORT const char *ward_lang_name(enum ward_lang lang)
{
	return (size_t)lang < ARRAY_SIZE(langs) ? langs[lang].name : NULL;
}

WARD_EXPORT const char *ward_lang_extension(enum ward_lang lang)
{
	return (size_t)lang < ARRAY_SIZE(langs) ? langs[lang].extension : NULL;
}

char *const *ward_lang_kernel_argv(enum ward_lang lang)
{
	return (size_t)lang < ARRAY_SIZE(langs) ? langs[lang].argv : NULL;
}

WARD_EXPORT int ward_lang_from_name(const char *name)
{
	for (size_t i = 0; name && i < ARRAY_SIZE(langs); i++) {
		if (strcmp(name, langs[i].name) == 0)
			return (int)i;
		for (const char *const *a = langs[i].aliases; *a; a++)
			if (strcmp(name, *a) == 0)
				return (int)i;
	}
	return -1;
}

WARD_EXPORT struct ward_sandbox *ward_kernel_sandbox(struct ward_kernel *k)
{
	return k->sb;
}

/* The runners: $WARD_RUNNERS, next to the binary in a build tree
 * (build/src/ward -> ../../runners), or the installed data directory. */
static int find_runners(const char *given, char *out, size_t len, struct ward_error *err)
{
	char exe[PATH_MAX], cand[PATH_MAX + 64];
	struct stat st;
	const char *env = getenv("WARD_RUNNERS");
	if (given || env) {
		if (!realpath(given ? given : env, out))
			return ward_error_set(err, errno, "kernel", "runners directory '%s'",
					      given ? given : env);
		return 0;
	}
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash)
			*slash = '\0';
		const char *rel[] = { "/../../runners", "/../share/ward/runners" };
		for (size_t i = 0; i < ARRAY_SIZE(rel); i++) {
			snprintf(cand, sizeof(cand), "%s%s", exe, rel[i]);
			if (stat(cand, &st) == 0 && S_ISDIR(st.st_mode) && realpath(cand, out))
				return 0;
		}
	}
	(void)len;
	return ward_error_set(err, ENOENT, "kernel",
			      "no runners directory found (set WARD_RUNNERS)");
}

static char *kernel_config(const struct ward_policy *p, json_t *lint, bool session)
{
	json_t *c = json_pack("{s:I, s:I, s:I, s:I, s:s, s:[s,s]}",
			      "output_limit", (json_int_t)p->output_limit,
			      "memory_limit", (json_int_t)p->memory,
			      "timeout_ms", (json_int_t)p->timeout_ms,
			      "cpu_time_ms", (json_int_t)p->cpu_time_ms,
			      "network", "none", "writable", "/workspace", "/tmp");
	if (!c)
		return NULL;
	json_t *w = json_object_get(c, "writable");
	for (size_t i = 0; i < p->n_binds; i++)
		if (p->binds[i].writable)
			json_array_append_new(w, json_string(p->binds[i].inside));
	if (lint)
		json_object_set(c, "lint", lint);
	if (session) /* a session's kernels live across calls: the cap is per call */
		json_object_set_new(c, "output_per_request", json_true());
	char *s = json_dumps(c, JSON_COMPACT);
	json_decref(c);
	return s;
}

static int prepare_policy(struct ward_kernel *k, const struct ward_policy *src, json_t *lint,
			  bool session, struct ward_error *err)
{
	int r = ward_policy_copy(&k->policy, src, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *cfg = kernel_config(src, lint, session);
	if (!cfg)
		return ward_error_set(err, ENOMEM, "kernel", "out of memory");
	size_t n = strlen(cfg) + 32;
	_cleanup_free_ char *var = malloc(n);
	if (!var)
		return ward_error_set(err, ENOMEM, "kernel", "out of memory");
	snprintf(var, n, "WARD_KERNEL_CONFIG=%s", cfg);
	if ((r = ward_policy_set(&k->policy, "env", var, "kernel", err)) < 0 ||
	    (r = ward_policy_set(&k->policy, "env", "MPLBACKEND=Agg", "kernel", err)) < 0)
		return r;
	/* The protocol channel carries base64 images and the kernel's own
	 * capped streams: it gets more room than the program's output cap. */
	k->line_max = src->output_limit * 2 > MIN_LINE_MAX ? src->output_limit * 2 : MIN_LINE_MAX;
	k->proto_max = k->line_max * 4;
	return 0;
}

static void emit_stream(const char *name, const char *text, size_t len, ward_kernel_cb cb,
			void *ctx)
{
	json_t *m = json_pack("{s:s, s:{s:s, s:s%}}", "msg_type", "stream", "content", "name",
			      name, "text", text, len);
	if (!m) /* not UTF-8: keep what can be said */
		m = json_pack("{s:s, s:{s:s, s:s}}", "msg_type", "stream", "content", "name", name,
			      "text", "\xef\xbf\xbd");
	if (m && cb)
		cb(m, ctx);
	json_decref(m);
}

/* Whether j is the string s exactly: a string holding U+0000 is compared
 * by its length, never cut at the NUL. */
static bool str_is(json_t *j, const char *s)
{
	size_t n = strlen(s);
	return json_is_string(j) && json_string_length(j) == n &&
	       memcmp(json_string_value(j), s, n) == 0;
}

/* A string of the protocol's own vocabulary (a message type, a request
 * id): never one holding U+0000. */
static const char *word(json_t *j)
{
	const char *s = json_string_value(j);
	return s && strlen(s) == json_string_length(j) ? s : NULL;
}

/* One complete line from the kernel's stdout. Returns the parsed message
 * (new reference) or NULL when the line is not a protocol message. Text
 * may hold U+0000 (printf '\0' is output like any other). */
static json_t *parse_line(const char *line, size_t len)
{
	if (len == 0 || line[0] != '{')
		return NULL;
	json_t *m = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
	if (m && (!json_is_object(m) || !word(json_object_get(m, "msg_type")) ||
		  !json_is_object(json_object_get(m, "content")))) {
		json_decref(m);
		m = NULL;
	}
	return m;
}

/* A line that is not a protocol message: the kernel broke the protocol
 * (its own bug, or code in its process writing on the channel). The line
 * is dropped, never passed off as the program's output; the first one is
 * reported as a protocol_error (runners/PROTOCOL.md, "Transport"). */
static void protocol_violation(struct ward_kernel *k, size_t len, ward_kernel_cb cb, void *ctx)
{
	if (k->bad_lines++ || !cb)
		return;
	char value[160];
	snprintf(value, sizeof(value), "the %s%s sent a line that is not a protocol message "
		 "(%zu bytes); it was dropped", k->session ? "session agent" : ward_lang_name(k->lang),
		 k->session ? "" : " kernel", len);
	json_t *m = json_pack("{s:s, s:{s:s, s:s, s:[], s:s}}", "msg_type", "protocol_error",
			      "content", "ename", "KernelProtocolError", "evalue", value,
			      "traceback", "hint", "the kernel's protocol channel carries only "
			      "JSON messages; do not write to the kernel's private descriptors");
	if (m)
		cb(m, ctx);
	json_decref(m);
}

struct waiter {
	const char *want_type;  /* message type that ends the wait */
	const char *want_id;    /* its parent_id, or NULL */
	json_t *found;          /* its content (new reference) */
	ward_kernel_cb cb;
	void *ctx;
	uint64_t until_ns;      /* give up then (0: only the sandbox's limits) */
};

static void dispatch(struct ward_kernel *k, struct waiter *w, const char *line, size_t len)
{
	json_t *m = parse_line(line, len);
	if (!m) {
		protocol_violation(k, len, w->cb, w->ctx);
		return;
	}
	json_t *pid = json_object_get(m, "parent_id");
	if (w->want_type && !w->found && str_is(json_object_get(m, "msg_type"), w->want_type) &&
	    (!w->want_id || str_is(pid, w->want_id))) {
		w->found = json_incref(json_object_get(m, "content"));
	} else if (w->cb) {
		w->cb(m, w->ctx);
	}
	json_decref(m);
}

/* One read from the kernel's stdout or stderr. Both count towards the
 * channel's cap: past it the sandbox is killed (status output_limit).
 * Returns the bytes read, or 0 when there is nothing (more) to handle. */
static ssize_t read_chunk(struct ward_kernel *k, int fd, char *buf, size_t len, bool *eof)
{
	ssize_t n = read(fd, buf, len);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n <= 0) {
		*eof = true;
		return 0;
	}
	k->proto_total += (uint64_t)n;
	if (k->proto_total > k->proto_max) {
		ward_sandbox_kill(k->sb, WARD_KILL_OUTPUT);
		k->dead = true;
		return 0;
	}
	return n;
}

/* Reads what the kernel wrote on stdout; complete lines are dispatched. A
 * line over the cap is dropped whole (and reported once as stderr). */
static void read_stdout(struct ward_kernel *k, struct waiter *w)
{
	char buf[READ_CHUNK];
	ssize_t n = read_chunk(k, ward_sandbox_stdout(k->sb), buf, sizeof(buf), &k->out_eof);
	for (ssize_t i = 0; i < n; i++) {
		if (buf[i] == '\n') {
			if (!k->line_overflow)
				dispatch(k, w, k->line, k->line_len);
			k->line_len = 0;
			k->line_overflow = false;
			continue;
		}
		if (k->line_overflow)
			continue;
		if (k->line_len + 1 > k->line_max) {
			k->line_overflow = true;
			emit_stream("stderr", "ward: a kernel message over the size cap was dropped\n",
				    54, w->cb, w->ctx);
			continue;
		}
		if (k->line_len + 1 > k->line_cap) {
			size_t cap = k->line_cap ? k->line_cap * 2 : 65536;
			char *nl = realloc(k->line, cap);
			if (!nl) {
				k->line_overflow = true;
				continue;
			}
			k->line = nl;
			k->line_cap = cap;
		}
		k->line[k->line_len++] = buf[i];
	}
}

/* The kernel's raw stderr: interpreter failures before the kernel took
 * over its fds, or child output that went around it. */
static void read_stderr(struct ward_kernel *k, struct waiter *w)
{
	char buf[READ_CHUNK];
	ssize_t n = read_chunk(k, ward_sandbox_stderr(k->sb), buf, sizeof(buf), &k->err_eof);
	if (n > 0)
		emit_stream("stderr", buf, (size_t)n, w->cb, w->ctx);
}

static void write_pending(struct ward_kernel *k)
{
	while (k->pending_off < k->pending_len) {
		ssize_t n = write(ward_sandbox_stdin(k->sb), k->pending + k->pending_off,
				  k->pending_len - k->pending_off);
		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				k->pending_off = k->pending_len; /* the kernel is gone */
			return;
		}
		k->pending_off += (size_t)n;
	}
}

/* Runs the loop until the awaited message arrives or the sandbox ends. */
static int wait_for(struct ward_kernel *k, struct waiter *w)
{
	while (!w->found && !k->dead) {
		bool want_write = k->pending_off < k->pending_len && ward_sandbox_stdin(k->sb) >= 0;
		struct pollfd fds[4] = {
			{ .fd = k->out_eof ? -1 : ward_sandbox_stdout(k->sb), .events = POLLIN },
			{ .fd = k->err_eof ? -1 : ward_sandbox_stderr(k->sb), .events = POLLIN },
			{ .fd = want_write ? ward_sandbox_stdin(k->sb) : -1, .events = POLLOUT },
			{ .fd = ward_sandbox_pidfd(k->sb), .events = POLLIN },
		};
		int t = ward_sandbox_check(k->sb);
		if (w->until_ns) {
			uint64_t now = ward_now_ns();
			if (now >= w->until_ns)
				return -ETIMEDOUT;
			int left = (int)((w->until_ns - now) / 1000000 + 1);
			t = t < 0 || left < t ? left : t;
		}
		int n = poll(fds, 4, t);
		if (n < 0 && errno != EINTR)
			return ward_error_set(NULL, errno, "kernel", "poll");
		if (n <= 0)
			continue;
		if (fds[0].revents)
			read_stdout(k, w);
		if (fds[1].revents)
			read_stderr(k, w);
		if (fds[2].revents)
			write_pending(k);
		/* The init's exit: drain what is left of stdout first. */
		if (fds[3].revents && k->out_eof && k->err_eof && ward_sandbox_exited(k->sb))
			k->dead = true;
		if (k->out_eof && k->err_eof && !w->found && ward_sandbox_exited(k->sb))
			k->dead = true;
	}
	return w->found ? 0 : -ECHILD;
}

/* Queues one request line after any not yet written. */
static int send_request(struct ward_kernel *k, const char *type, json_t *content, char *id,
			size_t idlen, struct ward_error *err)
{
	snprintf(id, idlen, "r%u", ++k->next_id);
	json_t *req = json_pack("{s:s, s:s, s:O}", "msg_type", type, "id", id, "content", content);
	char *s = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	if (!s)
		return ward_error_set(err, ENOMEM, "kernel", "out of memory");
	size_t n = strlen(s), left = k->pending_len - k->pending_off;
	char *buf = malloc(left + n + 1);
	if (!buf) {
		free(s);
		return ward_error_set(err, ENOMEM, "kernel", "out of memory");
	}
	if (left)
		memcpy(buf, k->pending + k->pending_off, left);
	memcpy(buf + left, s, n);
	buf[left + n] = '\n';
	free(s);
	free(k->pending);
	k->pending = buf;
	k->pending_len = left + n + 1;
	k->pending_off = 0;
	write_pending(k);
	return 0;
}

static char *const *kernel_argv(const struct ward_kernel_options *o)
{
	static char *const agent[] = { "/usr/bin/python3", "-I", "-u",
				       RUNNERS_INSIDE "/session/agent.py", NULL };
	if (o->session)
		return agent;
	/* node cannot dup fds itself: its registry entry is a shell wrapper
	 * that gives it a protocol fd */
	return ward_lang_kernel_argv(o->lang);
}

static void kernel_free(struct ward_kernel *k)
{
	ward_policy_release(&k->policy);
	free(k->line);
	free(k->pending);
	free(k->inputs);
	json_decref(k->globals);
	if (k->aw) {
		json_decref(k->aw->found);
		free((char *)k->aw->want_id);
	}
	free(k->aw);
	free(k);
}

static int remember_inputs(struct ward_kernel *k, const struct ward_file *files, size_t n,
			   struct ward_error *err)
{
	if (!n)
		return 0;
	k->inputs = calloc(n, sizeof(*k->inputs));
	if (!k->inputs || sodium_init() < 0)
		return ward_error_set(err, ENOMEM, "kernel", "out of memory");
	for (size_t i = 0; i < n; i++) {
		unsigned char d[crypto_hash_sha256_BYTES];
		crypto_hash_sha256(d, files[i].data, files[i].len);
		sodium_bin2hex(k->inputs[i].sha256, sizeof(k->inputs[i].sha256), d, sizeof(d));
		ward_strlcpy(k->inputs[i].path, files[i].path, sizeof(k->inputs[i].path));
	}
	k->n_inputs = n;
	return 0;
}

/* The request's files, checked before anything is written: each path by
 * the one workspace rule, their total within the workspace's size. */
static int check_files(const struct ward_policy *p, const struct ward_file *files, size_t n,
		       struct ward_error *err)
{
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++) {
		const char *path = files[i].path;
		if (!ward_workspace_path_ok(path))
			return ward_error_set(err, EINVAL, "kernel", "file '%s': expected a relative "
					      "path inside /workspace", path ? path : "");
		if (!files[i].data && files[i].len)
			return ward_error_set(err, EINVAL, "kernel", "file '%s': no data", path);
		total += files[i].len;
		if (total > p->workspace_size)
			return ward_error_set(err, EFBIG, "kernel", "file '%s': the files are larger "
					      "than the workspace (%llu bytes)", path,
					      (unsigned long long)p->workspace_size);
	}
	return 0;
}

/* Writes the files into the running sandbox's /workspace from outside:
 * through the root fd its init handed over, every step beneath the last
 * and never through a link (lib/workspace.h), as the workspace's owner
 * (setfsuid is per thread: only this one changes), so the tmpfs's size
 * and the owner's permissions hold as for the program itself. */
static int place_files(struct ward_kernel *k, const struct ward_file *files, size_t n,
		       struct ward_error *err)
{
	int ws = ward_workspace_open(k->sb);
	if (ws < 0 && errno == ESRCH) { /* no root: the kernel never ran (its verdict says why) */
		ward_error_set(err, ECHILD, "kernel", "the kernel ended before its files were put in");
		return -ECHILD;
	}
	if (ws < 0)
		return ward_error_set(err, errno, "kernel", "the sandbox's /workspace");
	struct stat owner;
	if (fstat(ws, &owner) < 0) {
		int e = errno;
		close(ws);
		return ward_error_set(err, e, "kernel", "/workspace");
	}
	int old_uid = setfsuid((uid_t)-1), old_gid = setfsgid((gid_t)-1);
	setfsgid(owner.st_gid);
	setfsuid(owner.st_uid);
	int r = 0;
	for (size_t i = 0; i < n && r == 0; i++) {
		const struct ward_file *f = &files[i];
		unsigned mode = (f->mode ? f->mode : 0644) & 0777;
		int e = -ward_workspace_write(ws, f->path, f->data ? f->data : "", f->len, mode);
		if (e == ENOSPC || e == EDQUOT)
			r = ward_error_set(err, e, "kernel", "file '%s': the workspace is full "
					   "(%llu bytes)", f->path,
					   (unsigned long long)k->policy.workspace_size);
		else if (e == EEXIST || e == ENXIO)
			r = ward_error_set(err, e, "kernel", "file '%s': something that is not a "
					   "regular file is in the way", f->path);
		else if (e == ELOOP || e == EXDEV || e == ENOTDIR)
			r = ward_error_set(err, e, "kernel", "file '%s': a link or something that "
					   "is not a directory is in the way", f->path);
		else if (e)
			r = ward_error_set(err, e, "kernel", "file '%s'", f->path);
	}
	setfsuid((uid_t)old_uid);
	setfsgid((gid_t)old_gid);
	close(ws);
	return r;
}

WARD_EXPORT int ward_kernel_artifacts(struct ward_kernel *k, const char *copy_to,
				      const struct ward_artifact_limits *lim, json_t **list,
				      json_t **skipped, struct ward_error *err)
{
	return ward_artifacts_collect(k->sb, k->inputs, k->n_inputs, copy_to, lim, list,
				      skipped, err);
}

/* Everything both start forms share: the policy, the runners, the inputs,
 * and the sandbox running the kernel. `async` adds the state of the
 * non-blocking interface. */
static int kernel_launch(const struct ward_policy *policy, const struct ward_kernel_options *o,
			 bool async, struct ward_kernel **out, struct ward_error *err)
{
	*out = NULL;
	char *const *argv = kernel_argv(o);
	if (!argv)
		return ward_error_set(err, EINVAL, "kernel", "unknown language");
	struct ward_kernel *k = calloc(1, sizeof(*k));
	if (!k)
		return ward_error_set(err, ENOMEM, "kernel", "out of memory");
	k->lang = o->lang;
	k->session = o->session;
	int r = 0;
	if (async && !(k->aw = calloc(1, sizeof(*k->aw))))
		r = ward_error_set(err, ENOMEM, "kernel", "out of memory");
	if (r == 0)
		r = check_files(policy, o->files, o->n_files, err);
	if (r == 0)
		r = find_runners(o->runners_dir, k->runners, sizeof(k->runners), err);
	if (r == 0)
		r = prepare_policy(k, policy, o->lint, o->session, err);
	if (r == 0) {
		k->bind = (struct ward_bind){ .host = k->runners, .inside = RUNNERS_INSIDE };
		struct ward_sandbox_options so = {
			.stdin_pipe = true, .binds = &k->bind, .n_binds = 1,
			/* begin's files: written by the init before the kernel starts */
			.files = async ? o->files : NULL, .n_files = async ? o->n_files : 0,
			/* a session's agent is python: the zygote forks it too */
			.launcher = o->zygote && ward_zygote_lang(o->zygote) ==
							 (o->session ? WARD_LANG_PYTHON : o->lang)
					    ? ward_zygote_launcher(o->zygote) : o->launcher,
			.egress = o->egress, .tenant = o->tenant,
			.credentials = o->credentials, .n_credentials = o->n_credentials,
		};
		r = ward_sandbox_start(&k->policy, argv, &so, &k->sb, err);
	}
	if (r < 0) {
		kernel_free(k);
		return r;
	}
	*out = k;
	return 0;
}

static void kernel_discard(struct ward_kernel *k)
{
	ward_sandbox_discard(k->sb);
	kernel_free(k);
}

WARD_EXPORT void ward_kernel_discard(struct ward_kernel *k)
{
	if (k)
		kernel_discard(k);
}

WARD_EXPORT int ward_kernel_prepare(const struct ward_policy *policy, enum ward_lang lang,
				    const struct ward_kernel_options *opts,
				    struct ward_kernel **out, struct ward_error *err)
{
	struct ward_kernel_options o = opts ? *opts : (struct ward_kernel_options){ 0 };
	*out = NULL;
	if (o.n_files || o.session)
		return ward_error_set(err, EINVAL, "kernel", "%s", o.session
				      ? "a session agent is not prepared ahead (ward_kernel_begin)"
				      : "files come with the claim, not with prepare");
	o.lang = lang;
	int r = kernel_launch(policy, &o, false, out, err);
	if (r < 0)
		return r;
	/* Ready when it says so; if it dies first, stop's verdict says why. */
	struct waiter w = { .want_type = "status" };
	if (wait_for(*out, &w) == 0)
		json_decref(w.found);
	return 0;
}

WARD_EXPORT int ward_kernel_claim(struct ward_kernel *k, const struct ward_file *files,
				  size_t n_files, struct ward_error *err)
{
	if (k->claimed)
		return -EALREADY;
	k->claimed = true;
	if (k->dead)
		return ward_error_set(err, ECHILD, "kernel", "the kernel ended before the claim");
	int r = check_files(&k->policy, files, n_files, err);
	if (r == 0 && n_files)
		r = remember_inputs(k, files, n_files, err);
	if (r == 0 && n_files)
		r = place_files(k, files, n_files, err);
	/* the request's time starts now, not when the kernel was prepared */
	ward_sandbox_restart_clock(k->sb);
	return r;
}

/* The claim of start and begin: a kernel that ended before it is kept
 * (the caller learns how from its verdict, as before a claim existed);
 * any other failure ends it. */
static int claim_started(struct ward_kernel **k, const struct ward_kernel_options *o,
			 struct ward_error *err)
{
	int r = ward_kernel_claim(*k, o->files, o->n_files, err);
	if (r == -ECHILD) {
		(*k)->dead = true;
		return 0;
	}
	if (r < 0) {
		kernel_discard(*k);
		*k = NULL;
	}
	return r;
}

WARD_EXPORT int ward_kernel_start(const struct ward_policy *policy,
				  const struct ward_kernel_options *o, struct ward_kernel **out,
				  struct ward_error *err)
{
	struct ward_kernel_options po = *o;
	po.files = NULL;
	po.n_files = 0;
	int r = check_files(policy, o->files, o->n_files, err);
	if (r == 0)
		r = ward_kernel_prepare(policy, o->lang, &po, out, err);
	if (r == 0)
		r = claim_started(out, o, err);
	return r;
}

/* Sends one request and waits for its answer (the blocking form). */
static int request(struct ward_kernel *k, const char *type, json_t *c, const char *want,
		   ward_kernel_cb cb, void *ctx, json_t **reply, struct ward_error *err)
{
	char id[32];
	int r = send_request(k, type, c, id, sizeof(id), err);
	if (r < 0)
		return r;
	struct waiter w = { .want_type = want, .want_id = id, .cb = cb, .ctx = ctx };
	r = wait_for(k, &w);
	*reply = w.found;
	return r;
}

WARD_EXPORT int ward_kernel_execute(struct ward_kernel *k, const char *code, bool stop_on_error,
				    ward_kernel_cb cb, void *ctx, json_t **reply,
				    struct ward_error *err)
{
	*reply = NULL;
	if (k->dead)
		return -ECHILD;
	json_t *c = json_pack("{s:s, s:b}", "code", code, "stop_on_error", stop_on_error);
	if (!c)
		return ward_error_set(err, EINVAL, "kernel", "code is not valid UTF-8");
	int r = request(k, "execute_request", c, "execute_reply", cb, ctx, reply, err);
	json_decref(c);
	return r;
}

WARD_EXPORT int ward_kernel_call(struct ward_kernel *k, const char *source, const char *filename,
				 const char *function, json_t *args, ward_kernel_cb cb, void *ctx,
				 json_t **reply, struct ward_error *err)
{
	*reply = NULL;
	if (k->dead)
		return -ECHILD;
	json_t *c = json_pack("{s:s, s:s, s:s, s:O}", "code", source, "filename", filename,
			      "function", function, "args", args);
	if (!c)
		return ward_error_set(err, EINVAL, "kernel", "source is not valid UTF-8");
	int r = request(k, "call_request", c, "call_reply", cb, ctx, reply, err);
	json_decref(c);
	return r;
}

WARD_EXPORT int ward_kernel_stop(struct ward_kernel *k, struct ward_verdict *v,
				 struct ward_error *err)
{
	if (!k->dead && !ward_sandbox_exited(k->sb)) {
		char id[32];
		json_t *c = json_object();
		if (c && send_request(k, "shutdown_request", c, id, sizeof(id), NULL) == 0) {
			/* a kernel whose code took over gets two seconds, then dies */
			struct waiter w = { .want_type = "shutdown_reply", .want_id = id,
					    .until_ns = ward_now_ns() + 2000000000ull };
			if (wait_for(k, &w) == 0)
				json_decref(w.found);
			else if (!ward_sandbox_exited(k->sb))
				ward_sandbox_kill(k->sb, WARD_KILL_CANCEL);
		}
		json_decref(c);
	}
	int r = ward_sandbox_finish(k->sb, v, err);
	kernel_free(k);
	return r;
}

/* --- the non-blocking form (ward serve): the same loop, one step at a
 * time, with the waiter kept in the kernel between steps. --- */

WARD_EXPORT int ward_kernel_begin(const struct ward_policy *policy,
				  const struct ward_kernel_options *o, struct ward_kernel **out,
				  struct ward_error *err)
{
	/* Claimed at once, its files written by the init before the kernel
	 * starts: a claim from outside would first wait for the init's setup,
	 * and the caller's loop must not wait (kernel.h). */
	int r = kernel_launch(policy, o, true, out, err);
	if (r == 0) {
		(*out)->claimed = true;
		if ((r = remember_inputs(*out, o->files, o->n_files, err)) < 0) {
			kernel_discard(*out);
			*out = NULL;
		}
	}
	return r;
}

static int submit(struct ward_kernel *k, const char *type, json_t *content, const char *want,
		  struct waiter w, struct ward_error *err)
{
	if (!k->aw)
		return ward_error_set(err, EINVAL, "kernel", "not started with ward_kernel_begin");
	if (k->aw->want_type)
		return ward_error_set(err, EBUSY, "kernel", "a request is already awaited");
	if (k->dead)
		return -ECHILD;
	char id[32];
	int r = send_request(k, type, content, id, sizeof(id), err);
	if (r < 0)
		return r;
	char *idcopy = strdup(id);
	if (!idcopy)
		return ward_error_set(err, ENOMEM, "kernel", "out of memory");
	free((char *)k->aw->want_id);
	*k->aw = w;
	k->aw->want_type = want;
	k->aw->want_id = idcopy;
	return 0;
}

WARD_EXPORT void ward_kernel_set_globals(struct ward_kernel *k, json_t *globals)
{
	json_decref(k->globals);
	k->globals = json_incref(globals);
}

/* The globals set for this request go with it (and are then gone). */
static void take_globals(struct ward_kernel *k, json_t *content)
{
	if (k->globals && content)
		json_object_set_new(content, "globals", k->globals);
	else
		json_decref(k->globals);
	k->globals = NULL;
}

WARD_EXPORT int ward_kernel_submit_execute(struct ward_kernel *k, const char *code,
					   bool stop_on_error, ward_kernel_cb cb, void *ctx,
					   struct ward_error *err)
{
	json_t *c = json_pack("{s:s, s:b}", "code", code, "stop_on_error", stop_on_error);
	take_globals(k, c);
	if (!c)
		return ward_error_set(err, EINVAL, "kernel", "code is not valid UTF-8");
	int r = submit(k, "execute_request", c, "execute_reply",
		       (struct waiter){ .cb = cb, .ctx = ctx }, err);
	json_decref(c);
	return r;
}

WARD_EXPORT int ward_kernel_submit_call(struct ward_kernel *k, const char *source,
					const char *filename, const char *function, json_t *args,
					ward_kernel_cb cb, void *ctx, struct ward_error *err)
{
	json_t *c = json_pack("{s:s, s:s, s:s, s:O}", "code", source, "filename", filename,
			      "function", function, "args", args);
	take_globals(k, c);
	if (!c)
		return ward_error_set(err, EINVAL, "kernel", "source is not valid UTF-8");
	int r = submit(k, "call_request", c, "call_reply", (struct waiter){ .cb = cb, .ctx = ctx },
		       err);
	json_decref(c);
	return r;
}

WARD_EXPORT int ward_kernel_submit_shutdown(struct ward_kernel *k, unsigned grace_ms,
					    struct ward_error *err)
{
	json_t *c = json_object();
	if (!c)
		return ward_error_set(err, ENOMEM, "kernel", "out of memory");
	int r = submit(k, "shutdown_request", c, "shutdown_reply",
		       (struct waiter){ .until_ns = ward_now_ns() + grace_ms * 1000000ull }, err);
	json_decref(c);
	return r;
}

WARD_EXPORT int ward_kernel_pollfds(struct ward_kernel *k, struct pollfd fds[WARD_KERNEL_NFDS])
{
	bool want_write = k->pending_off < k->pending_len && ward_sandbox_stdin(k->sb) >= 0;
	fds[0] = (struct pollfd){ .fd = k->out_eof ? -1 : ward_sandbox_stdout(k->sb), .events = POLLIN };
	fds[1] = (struct pollfd){ .fd = k->err_eof ? -1 : ward_sandbox_stderr(k->sb), .events = POLLIN };
	fds[2] = (struct pollfd){ .fd = want_write ? ward_sandbox_stdin(k->sb) : -1, .events = POLLOUT };
	fds[3] = (struct pollfd){ .fd = ward_sandbox_exited(k->sb) ? -1 : ward_sandbox_pidfd(k->sb),
				  .events = POLLIN };
	int t = ward_sandbox_check(k->sb);
	if (k->aw && k->aw->want_type && k->aw->until_ns) {
		uint64_t now = ward_now_ns();
		int left = now >= k->aw->until_ns ? 0 : (int)((k->aw->until_ns - now) / 1000000 + 1);
		t = t < 0 || left < t ? left : t;
	}
	return t;
}

/* The awaited request is over: clear the waiter, hand out what came. */
static json_t *take_found(struct ward_kernel *k)
{
	json_t *found = k->aw->found;
	free((char *)k->aw->want_id);
	*k->aw = (struct waiter){ 0 };
	return found;
}

WARD_EXPORT int ward_kernel_step(struct ward_kernel *k, json_t **reply)
{
	struct pollfd fds[WARD_KERNEL_NFDS];
	*reply = NULL;
	if (!k->aw)
		return -EINVAL;
	ward_kernel_pollfds(k, fds);
	struct waiter *w = k->aw;
	if (!k->dead && poll(fds, WARD_KERNEL_NFDS, 0) > 0) {
		if (fds[0].revents)
			read_stdout(k, w);
		if (fds[1].revents)
			read_stderr(k, w);
		if (fds[2].revents)
			write_pending(k);
	}
	if (w->want_type && w->found) {
		*reply = take_found(k);
		return 1;
	}
	if (w->want_type && w->until_ns && ward_now_ns() >= w->until_ns)
		ward_sandbox_kill(k->sb, WARD_KILL_CANCEL);
	if (k->out_eof && k->err_eof && ward_sandbox_exited(k->sb))
		k->dead = true;
	if (k->dead) {
		json_decref(take_found(k));
		return -ECHILD;
	}
	return 0;
}

WARD_EXPORT int ward_kernel_finish(struct ward_kernel *k, struct ward_verdict *v,
				   struct ward_error *err)
{
	if (!ward_sandbox_exited(k->sb))
		ward_sandbox_kill(k->sb, WARD_KILL_CANCEL);
	int r = ward_sandbox_finish(k->sb, v, err);
	kernel_free(k);
	return r;
}

WARD_EXPORT void ward_kernel_listen(struct ward_kernel *k, ward_kernel_cb cb, void *ctx)
{
	if (k->aw && !k->aw->want_type) {
		k->aw->cb = cb;
		k->aw->ctx = ctx;
	}
}

WARD_EXPORT int ward_kernel_send(struct ward_kernel *k, const char *type, json_t *content,
				 char id[WARD_KERNEL_ID_SIZE], struct ward_error *err)
{
	if (k->dead)
		return -ECHILD;
	return send_request(k, type, content, id, WARD_KERNEL_ID_SIZE, err);
}

WARD_EXPORT size_t ward_kernel_unsent(const struct ward_kernel *k)
{
	return k->pending_len - k->pending_off;
}

WARD_EXPORT void ward_kernel_new_budget(struct ward_kernel *k)
{
	k->proto_total = 0;
}

/* --- the pool's forms: a prepared kernel driven by the loop, and a verdict
 * given as soon as the last reply is in --- */

WARD_EXPORT int ward_kernel_make_async(struct ward_kernel *k, struct ward_error *err)
{
	/* stdin is non-blocking since the sandbox started; stdout and stderr
	 * are read only once poll said so (ward_kernel_step) */
	if (!k->aw && !(k->aw = calloc(1, sizeof(*k->aw))))
		return ward_error_set(err, ENOMEM, "kernel", "out of memory");
	return 0;
}

WARD_EXPORT bool ward_kernel_alive(struct ward_kernel *k)
{
	/* the kernel's end closes its stdout before its init has exited */
	struct pollfd p = { .fd = ward_sandbox_stdout(k->sb), .events = POLLIN };
	if (!k->dead && poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR)))
		k->dead = true;
	return !k->dead && !ward_sandbox_exited(k->sb);
}

WARD_EXPORT int ward_kernel_end(struct ward_kernel *k, struct ward_verdict *v)
{
	if (k->dead || (k->aw && k->aw->want_type))
		return -EAGAIN;
	return ward_sandbox_verdict_now(k->sb, v);
}

WARD_EXPORT int ward_kernel_runners_dir(const char *given, char *out,
				       struct ward_error *err)
{
	return find_runners(given, out, PATH_MAX, err);
}
