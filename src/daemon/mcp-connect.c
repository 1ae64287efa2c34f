/* src/daemon/mcp-connect.c — `ward mcp --connect URL`: a stdio MCP server
 * that is a relay to a daemon's /mcp endpoint (streamable HTTP).
 *
 * Every line on stdin is one JSON-RPC message, POSTed as it is (libcurl,
 * one multi handle: up to WARD_MCP_PENDING_MAX requests in flight, stdin
 * not read past that); every message the daemon answers, as one
 * application/json body or as the events of a text/event-stream (sse.h),
 * is written to stdout as one line. stdout carries nothing else, ever: diagnostics go to
 * stderr, and a failure the daemon did not answer in JSON-RPC (it is
 * unreachable, a 401, a 404 for an ended session) becomes a JSON-RPC
 * error for the request it belongs to. The Mcp-Session-Id the daemon gives
 * at initialize, and the protocol version it agreed, go with every later
 * message; nothing else is sent until initialize is answered. A session
 * the daemon ended (404: it expired while the host was idle) is opened
 * again with the host's own initialize, and the request sent again in it.
 * On stdin's
 * end (or SIGTERM, SIGINT, SIGHUP) it exits at once: the requests in flight
 * are dropped (their connections close, which cancels them on the daemon)
 * and the session is ended with DELETE. The key comes from WARD_API_KEY or --api-key.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "serve.h"
#include "sse.h"
#include "ward/mcp.h"

enum {
	LINE_MAX_BYTES = WARD_MCP_MESSAGE_MAX,     /* one stdin line */
	ANSWER_MAX = WARD_MCP_MESSAGE_MAX + 4096,  /* one answer's body */
	SID_MAX = 128,
	DELETE_TIMEOUT_MS = 2000,
};

struct relay {
	CURLM *multi;
	char url[2048];
	char unix_path[108];
	char *auth;                 /* "Authorization: Bearer ..." */
	char sid[SID_MAX + 1];      /* the session, once initialize was answered */
	char version[32];           /* the protocol version agreed */
	bool init_in_flight;
	unsigned in_flight;
	char *line;                 /* stdin, not yet a whole line */
	size_t len, cap;
	bool eof, overlong;
	struct xfer *xfers;         /* in flight */
	char *init_line;            /* the host's initialize, to open a new session */
	size_t init_len;
	bool served;                /* the session has answered a request */
};

/* One POST in flight. */
struct xfer {
	struct xfer *prev, *next;
	struct relay *rl;
	CURL *h;
	struct curl_slist *hdrs;
	char *body;
	size_t blen;
	json_t *id;                 /* the request's id; NULL: a notification or response */
	bool init;
	bool hidden;                /* the relay's own initialize: its answer is not written */
	char sent_sid[SID_MAX + 1]; /* the session it was sent in */
	char *resp;
	size_t rlen;
	bool too_big;
	char sid[SID_MAX + 1];
	bool sse;                   /* the answer is a text/event-stream */
	bool sse_seen;              /* it carried x->id's response */
	struct srv_sse sp;
};

/* --- stdout: JSON-RPC lines only --- */

static void emit(json_t *msg)
{
	size_t n = 0;
	char *txt = ward_json_dump(msg, JSON_COMPACT, 1, &n);
	if (!txt)
		return;
	txt[n++] = '\n';
	for (size_t off = 0; off < n;) {
		ssize_t w = write(STDOUT_FILENO, txt + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			_exit(0); /* the host is gone */
		off += (size_t)w;
	}
	free(txt);
}

/* A JSON-RPC error for request id (nothing for a notification). */
static void emit_error(const json_t *id, int code, const char *msg)
{
	if (!id) {
		fprintf(stderr, "ward: mcp: %s\n", msg);
		return;
	}
	json_t *e = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error",
			      "code", code, "message", msg);
	if (e)
		emit(e);
	json_decref(e);
}

/* --- one POST --- */

static void note_init(struct relay *rl, struct xfer *x, json_t *answer);

/* One event of a text/event-stream answer: a JSON-RPC message, written. */
static void on_event(void *ctx, const char *data, size_t len)
{
	struct xfer *x = ctx;
	json_t *msg = json_loadb(data, len, 0, NULL);
	if (!json_is_object(msg)) {
		fprintf(stderr, "ward: mcp: an event of the daemon's stream is not a JSON-RPC message\n");
		json_decref(msg);
		return;
	}
	json_t *id = json_object_get(msg, "id");
	if (x->id && id && json_equal(id, x->id) &&
	    (json_object_get(msg, "result") || json_object_get(msg, "error"))) {
		x->sse_seen = true;
		if (x->init)
			note_init(x->rl, x, msg);
	}
	if (!x->hidden)
		emit(msg);
	json_decref(msg);
}

static size_t on_body(char *p, size_t sz, size_t n, void *ctx)
{
	struct xfer *x = ctx;
	size_t len = sz * n;
	if (x->sse)
		return srv_sse_feed(&x->sp, p, len, on_event, x) == 0 ? len : 0;
	if (x->rlen + len > ANSWER_MAX) {
		x->too_big = true;
		return 0;
	}
	char *nb = realloc(x->resp, x->rlen + len + 1);
	if (!nb)
		return 0;
	x->resp = nb;
	memcpy(x->resp + x->rlen, p, len);
	x->rlen += len;
	x->resp[x->rlen] = '\0';
	return len;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ctx)
{
	struct xfer *x = ctx;
	size_t len = sz * n;
	static const char name[] = "mcp-session-id:", ct[] = "content-type:";
	if (len > sizeof(ct) - 1 && strncasecmp(p, ct, sizeof(ct) - 1) == 0) {
		const char *v = p + sizeof(ct) - 1;
		while (*v == ' ' || *v == '\t')
			v++;
		x->sse = strncasecmp(v, "text/event-stream", 17) == 0;
	}
	if (len > sizeof(name) - 1 && strncasecmp(p, name, sizeof(name) - 1) == 0) {
		const char *v = p + sizeof(name) - 1;
		size_t vn = len - (sizeof(name) - 1);
		while (vn && (*v == ' ' || *v == '\t'))
			v++, vn--;
		while (vn && (v[vn - 1] == '\r' || v[vn - 1] == '\n' || v[vn - 1] == ' '))
			vn--;
		if (vn && vn <= SID_MAX) {
			memcpy(x->sid, v, vn);
			x->sid[vn] = '\0';
		}
	}
	return len;
}

static CURL *easy_new(struct relay *rl, struct curl_slist **hdrs)
{
	CURL *h = curl_easy_init();
	if (!h)
		return NULL;
	curl_easy_setopt(h, CURLOPT_URL, rl->url);
	if (rl->unix_path[0])
		curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, rl->unix_path);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	struct curl_slist *l = curl_slist_append(NULL, rl->auth);
	if (l && rl->sid[0]) {
		char b[SID_MAX + 32];
		snprintf(b, sizeof(b), "Mcp-Session-Id: %s", rl->sid);
		l = curl_slist_append(l, b);
	}
	if (l && rl->version[0]) {
		char b[64];
		snprintf(b, sizeof(b), "MCP-Protocol-Version: %s", rl->version);
		l = curl_slist_append(l, b);
	}
	*hdrs = l;
	return h;
}

static void xfer_free(struct xfer *x)
{
	struct relay *rl = x->rl;
	if (x->prev || rl->xfers == x) {
		*(x->prev ? &x->prev->next : &rl->xfers) = x->next;
		if (x->next)
			x->next->prev = x->prev;
	}
	if (x->h)
		curl_multi_remove_handle(x->rl->multi, x->h);
	curl_easy_cleanup(x->h);
	curl_slist_free_all(x->hdrs);
	srv_sse_release(&x->sp);
	free(x->body);
	free(x->resp);
	json_decref(x->id);
	free(x);
}

/* POSTs one stdin line (taken over); hidden: the relay's own initialize. */
static void post(struct relay *rl, char *line, size_t len, bool hidden)
{
	json_t *msg = json_loadb(line, len, 0, NULL);
	json_t *id = json_object_get(msg, "id"), *method = json_object_get(msg, "method");
	struct xfer *x = calloc(1, sizeof(*x));
	if (!x) {
		free(line);
		json_decref(msg);
		return;
	}
	x->rl = rl;
	x->body = line;
	x->blen = len;
	x->hidden = hidden;
	ward_strlcpy(x->sent_sid, rl->sid, sizeof(x->sent_sid));
	srv_sse_init(&x->sp, ANSWER_MAX);
	x->id = json_is_string(method) && id ? json_incref(id) : NULL;
	x->init = x->id && strcmp(json_string_value(method), "initialize") == 0;
	json_decref(msg);
	char *keep = x->init && !hidden ? malloc(len + 1) : NULL;
	if (keep) { /* kept to open a new session if this one ends */
		memcpy(keep, line, len + 1);
		free(rl->init_line);
		rl->init_line = keep;
		rl->init_len = len;
	}
	x->h = easy_new(rl, &x->hdrs);
	x->hdrs = curl_slist_append(x->hdrs, "Content-Type: application/json");
	x->hdrs = x->hdrs ? curl_slist_append(x->hdrs, "Accept: application/json, text/event-stream") : NULL;
	if (!x->h || !x->hdrs) {
		emit_error(x->id, -32603, "ward: out of memory");
		xfer_free(x);
		return;
	}
	curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, x->hdrs);
	curl_easy_setopt(x->h, CURLOPT_POSTFIELDS, x->body);
	curl_easy_setopt(x->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(x->h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(x->h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(x->h, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(x->h, CURLOPT_PRIVATE, x);
	if (curl_multi_add_handle(rl->multi, x->h) != CURLM_OK) {
		curl_easy_cleanup(x->h);
		x->h = NULL;
		emit_error(x->id, -32603, "ward: unable to start the request");
		xfer_free(x);
		return;
	}
	rl->in_flight++;
	rl->init_in_flight |= x->init;
	x->next = rl->xfers;
	if (rl->xfers)
		rl->xfers->prev = x;
	rl->xfers = x;
}

static void post_line(struct relay *rl, char *line, size_t len)
{
	post(rl, line, len, false);
}

/* Puts a line back in front of what stdin gave, to be sent again. */
static bool requeue(struct relay *rl, const char *line, size_t len)
{
	if (rl->cap - rl->len < len + 1) {
		char *nb = realloc(rl->line, rl->len + len + 1);
		if (!nb)
			return false;
		rl->line = nb;
		rl->cap = rl->len + len + 1;
	}
	memmove(rl->line + len + 1, rl->line, rl->len);
	memcpy(rl->line, line, len);
	rl->line[len] = '\n';
	rl->len += len + 1;
	return true;
}

/* A request answered 404: its session ended on the daemon (it expired
 * while the host was idle, or the daemon restarted). The first to see it
 * opens a new session with the host's own initialize (its answer kept to
 * the relay) and the request, and those after it, are sent again in it;
 * a new session that ends before it answered anything is not retried: the
 * 404 goes to the host. True when x will be sent again. */
static bool retry(struct relay *rl, struct xfer *x)
{
	static const char initialized[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}";
	if (!rl->init_line || !x->sent_sid[0] || rl->overlong)
		return false;
	if (strcmp(rl->sid, x->sent_sid) != 0) /* a new session is there, or coming */
		return requeue(rl, x->body, x->blen);
	char *init = malloc(rl->init_len + 1);
	if (!init || !rl->served ||
	    !requeue(rl, x->body, x->blen) || !requeue(rl, initialized, sizeof(initialized) - 1)) {
		free(init);
		return false;
	}
	fprintf(stderr, "ward: mcp: the daemon ended the MCP session (expired?); opening a new one\n");
	rl->served = false;
	rl->sid[0] = '\0';
	memcpy(init, rl->init_line, rl->init_len + 1);
	post(rl, init, rl->init_len, true);
	return true;
}

/* initialize answered: its session and version go with what follows. */
static void note_init(struct relay *rl, struct xfer *x, json_t *answer)
{
	json_t *res = json_object_get(answer, "result");
	const char *v = json_string_value(json_object_get(res, "protocolVersion"));
	if (!res || !x->sid[0])
		return;
	ward_strlcpy(rl->sid, x->sid, sizeof(rl->sid));
	rl->served = !x->hidden; /* the host's own: reopened if it ends */
	if (v && strlen(v) < sizeof(rl->version))
		ward_strlcpy(rl->version, v, sizeof(rl->version));
}

/* What an answer's body holds: one JSON-RPC message (application/json),
 * written as is; an error body of the daemon's becomes a JSON-RPC error
 * for the request. */
static void xfer_done(struct xfer *x, CURLcode cc)
{
	struct relay *rl = x->rl;
	long status = 0;
	char msg[512];
	curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
	json_t *id = x->hidden ? NULL : x->id; /* a hidden one's errors go to stderr */
	if (cc != CURLE_OK) {
		snprintf(msg, sizeof(msg), "ward: %.200s: %s", rl->url,
			 x->too_big ? "the answer is over the size limit" : curl_easy_strerror(cc));
		emit_error(id, -32603, msg);
		return;
	}
	if (status >= 200 && status < 300 && !x->init && rl->sid[0] &&
	    strcmp(x->sent_sid, rl->sid) == 0)
		rl->served = true; /* a session that works: reopened if it ends */
	if (status == 404 && x->id && !x->init && retry(rl, x))
		return;
	if (x->sse) { /* its events are out: was the answer one of them? */
		snprintf(msg, sizeof(msg), "ward: HTTP %ld from %.200s: the stream ended without "
			 "the answer", status, rl->url);
		if (id && !x->sse_seen)
			emit_error(id, -32603, msg);
		return;
	}
	json_t *b = x->rlen ? json_loadb(x->resp, x->rlen, 0, NULL) : NULL;
	bool rpc = json_is_object(b) && json_object_get(b, "jsonrpc") &&
		   (json_object_get(b, "result") || json_object_get(b, "error"));
	if (status == 404 && x->id)
		rl->sid[0] = '\0'; /* the session ended: initialize again */
	if (rpc && (x->id || status < 300)) {
		if (x->init)
			note_init(rl, x, b);
		if (x->id && json_is_null(json_object_get(b, "id")))
			json_object_set(b, "id", x->id);
		if (!x->hidden)
			emit(b);
	} else if (status >= 300) {
		const char *why = json_string_value(json_object_get(json_object_get(b, "error"),
								    "message"));
		snprintf(msg, sizeof(msg), "ward: HTTP %ld from %.200s%s%.200s", status, rl->url,
			 why ? ": " : "", why ? why : "");
		emit_error(id, -32603, msg);
	} else if (id && status != 202) { /* 202: cancelled, nothing to answer */
		emit_error(id, -32603, "ward: the daemon's answer is not a JSON-RPC message");
	}
	json_decref(b);
}

static void reap(struct relay *rl)
{
	CURLMsg *m;
	int left;
	while ((m = curl_multi_info_read(rl->multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		char *p = NULL;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &p);
		struct xfer *x = (struct xfer *)(void *)p;
		CURLcode cc = m->data.result;
		rl->in_flight--;
		if (x->init)
			rl->init_in_flight = false;
		xfer_done(x, cc);
		xfer_free(x);
	}
}

/* --- stdin --- */

/* Sends the whole lines buffered, while the bounds allow; true when one
 * was held back (initialize in flight, or WARD_MCP_PENDING_MAX reached). */
static bool drain_lines(struct relay *rl)
{
	while (rl->len) {
		if (rl->init_in_flight || rl->in_flight >= WARD_MCP_PENDING_MAX)
			return true;
		char *nl = memchr(rl->line, '\n', rl->len);
		if (!nl)
			return false;
		size_t n = (size_t)(nl - rl->line);
		if (rl->overlong) {
			rl->overlong = false;
		} else if (n && !(n == 1 && rl->line[0] == '\r')) {
			char *copy = malloc(n + 1);
			if (copy) {
				memcpy(copy, rl->line, n);
				copy[n] = '\0';
				post_line(rl, copy, n);
			}
		}
		memmove(rl->line, nl + 1, rl->len - n - 1);
		rl->len -= n + 1;
	}
	return false;
}

static void read_stdin(struct relay *rl)
{
	if (rl->cap - rl->len < 65536) {
		size_t cap = rl->cap ? rl->cap * 2 : 1 << 16;
		if (cap > LINE_MAX_BYTES + 65536)
			cap = LINE_MAX_BYTES + 65536;
		char *nb = cap > rl->cap ? realloc(rl->line, cap) : NULL;
		if (nb) {
			rl->line = nb;
			rl->cap = cap;
		}
	}
	if (rl->len == rl->cap) { /* a line over the limit: answered, then skipped */
		json_t *e = json_pack("{s:s, s:n, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", "error",
				      "code", -32700, "message", "ward: a message is over 16 MiB");
		if (e)
			emit(e);
		json_decref(e);
		rl->len = 0;
		rl->overlong = true;
	}
	ssize_t n = read(STDIN_FILENO, rl->line + rl->len, rl->cap - rl->len);
	if (n == 0)
		rl->eof = true;
	else if (n > 0)
		rl->len += (size_t)n;
	else if (errno != EAGAIN && errno != EINTR)
		rl->eof = true;
}

/* --- options, URL, the end --- */

static int parse_url(struct relay *rl, const char *u)
{
	if (strncmp(u, "unix://", 7) == 0) {
		if (u[7] != '/' || strlen(u + 7) >= sizeof(rl->unix_path))
			return -1;
		ward_strlcpy(rl->unix_path, u + 7, sizeof(rl->unix_path));
		ward_strlcpy(rl->url, "http://localhost/mcp", sizeof(rl->url));
		return 0;
	}
	const char *rest = strncmp(u, "http://", 7) == 0 ? u + 7 :
			   strncmp(u, "https://", 8) == 0 ? u + 8 : NULL;
	if (!rest || !*rest || *rest == '/' || strlen(u) + 5 > sizeof(rl->url))
		return -1;
	const char *path = strchr(rest, '/');
	snprintf(rl->url, sizeof(rl->url), "%.*s%s", (int)(path ? (size_t)(path - u) : strlen(u)),
		 u, !path || strcmp(path, "/") == 0 ? "/mcp" : path);
	return 0;
}

static int parse_args(struct relay *rl, int argc, char **argv, const char **key)
{
	const char *url = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		bool is_url = strncmp(a, "--connect", 9) == 0 && (!a[9] || a[9] == '=');
		bool is_key = strncmp(a, "--api-key", 9) == 0 && (!a[9] || a[9] == '=');
		if (!is_url && !is_key) {
			fprintf(stderr, "ward: error: mcp: '%s' does not apply with --connect "
				"(the daemon's settings do)\n", a);
			return -1;
		}
		v = a[9] == '=' ? a + 10 : i + 1 < argc ? argv[++i] : NULL;
		if (!v) {
			fprintf(stderr, "ward: error: mcp: %s needs a value\n", a);
			return -1;
		}
		*(is_url ? &url : key) = v;
	}
	if (!url || parse_url(rl, url) < 0) {
		fprintf(stderr, "ward: error: mcp: --connect: expected unix:///PATH, "
			"http://HOST:PORT or https://HOST[:PORT][/PATH], got '%s'\n",
			url ? url : "nothing");
		return -1;
	}
	if (!*key || !**key) {
		fprintf(stderr, "ward: error: mcp: --connect needs an API key with the execute "
			"scope: WARD_API_KEY or --api-key\n");
		return -1;
	}
	return 0;
}

/* Ends the session on the daemon (bounded: the host waits for our exit). */
static void end_session(struct relay *rl)
{
	struct curl_slist *hdrs = NULL;
	CURL *h = rl->sid[0] ? easy_new(rl, &hdrs) : NULL;
	if (h && hdrs) {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE");
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)DELETE_TIMEOUT_MS);
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
		struct xfer sink = { 0 };
		curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
		curl_easy_perform(h);
		free(sink.resp);
	}
	curl_easy_cleanup(h);
	curl_slist_free_all(hdrs);
}

/* SIGTERM, SIGINT, SIGHUP: the end, as stdin's (the loop looks at least
 * once a second; poll returns at once when interrupted). */
static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
	stop_signal = sig;
}

static int relay_loop(struct relay *rl)
{
	int fl = fcntl(STDIN_FILENO, F_GETFL);
	if (fl >= 0)
		fcntl(STDIN_FILENO, F_SETFL, fl | O_NONBLOCK);
	int running = 0, rc = 0;
	for (;;) {
		curl_multi_perform(rl->multi, &running);
		reap(rl);
		bool held = drain_lines(rl);
		if (rl->eof || stop_signal)
			break;
		curl_multi_perform(rl->multi, &running); /* starts what was added */
		struct curl_waitfd in = { .fd = STDIN_FILENO, .events = CURL_WAIT_POLLIN };
		if (curl_multi_poll(rl->multi, held ? NULL : &in, held ? 0 : 1, 1000, NULL) !=
		    CURLM_OK) {
			rc = 1;
			break;
		}
		struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
		if (!held && poll(&p, 1, 0) > 0)
			read_stdin(rl);
	}
	if (fl >= 0)
		fcntl(STDIN_FILENO, F_SETFL, fl);
	return rc;
}

int ward_cli_mcp_connect(int argc, char **argv)
{
	struct relay rl = { 0 };
	const char *key = getenv("WARD_API_KEY");
	if (parse_args(&rl, argc, argv, &key) < 0)
		return 2;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(rl.multi = curl_multi_init())) {
		fprintf(stderr, "ward: error: mcp: unable to start libcurl\n");
		return 1;
	}
	size_t an = strlen(key) + 32;
	rl.auth = malloc(an);
	if (!rl.auth)
		return 1;
	snprintf(rl.auth, an, "Authorization: Bearer %s", key);
	struct sigaction sa = { .sa_handler = on_stop }; /* no SA_RESTART */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	int rc = relay_loop(&rl);
	/* the end: what is in flight is dropped (the daemon cancels it as its
	 * connection closes), then the session is ended */
	while (rl.xfers)
		xfer_free(rl.xfers);
	end_session(&rl);
	curl_multi_cleanup(rl.multi);
	curl_global_cleanup();
	free(rl.line);
	free(rl.auth);
	free(rl.init_line);
	return rc;
}
