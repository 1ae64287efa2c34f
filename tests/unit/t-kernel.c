/* tests/unit/t-kernel.c — the kernel channel's framing and caps.
 *
 * lib/kernel.c reads JSON lines from a kernel that runs untrusted code, so
 * everything it reads is hostile: lines split anywhere, lines that are not
 * messages, a line over the cap, a flood past the channel's byte budget, a
 * kernel that dies mid-line. A fake runners directory holds a "node kernel"
 * (node/kernel.sh, a shell script: node's command line is /bin/sh and that
 * script) that misbehaves on request: the code of each execute_request names
 * what it does. It runs in a real sandbox, through the public API only, in
 * both forms (blocking, and begin/step as ward serve drives it). Each case
 * asserts exactly what the channel makes of it. The caps, with the default
 * 16 MiB output limit: a line holds at most 64 MiB, the channel carries at
 * most 256 MiB (stdout and stderr together) per budget.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake-runners.h"
#include "tap.h"
#include "ward/kernel.h"
#include "ward/ward.h"

#define MiB (1024u * 1024u)
#define LINE_MAX_BYTES (64u * MiB)      /* 2 x output limit, at least 64 MiB */
#define BUDGET_BYTES (4u * LINE_MAX_BYTES)

/* The fake kernel. Framing: `printf` then `sleep` makes separate writes, so
 * the supervisor reads the pieces separately (a multibyte character is cut
 * in two too). $1 of each case is the request's id. */
#define AT_CAP_PREFIX "{\"msg_type\":\"stream\",\"content\":{\"name\":\"stdout\",\"text\":\""
#define AT_CAP_SUFFIX "\"}}"
static const char fake_kernel[] =
	"export PATH=/usr/bin:/bin\n"
	"printf '{\"msg_type\":\"status\",\"content\":{\"execution_state\":\"idle\"}}\\n'\n"
	"reply() { printf '{\"msg_type\":\"execute_reply\",\"parent_id\":\"%s\",\"content\":{\"status\":\"ok\",\"case\":\"%s\"}}\\n' \"$1\" \"$2\"; }\n"
	"stream() { printf '{\"msg_type\":\"stream\",\"parent_id\":\"%s\",\"content\":{\"name\":\"stdout\",\"text\":\"%s\"}}\\n' \"$1\" \"$2\"; }\n"
	"xs() { head -c \"$1\" /dev/zero | tr '\\0' x; }\n"
	"while read -r line; do\n"
	"  id=${line#*\\\"id\\\":\\\"}; id=${id%%\\\"*}\n"
	"  case $line in\n"
	"  *shutdown_request*)\n"
	"    printf '{\"msg_type\":\"shutdown_reply\",\"parent_id\":\"%s\",\"content\":{}}\\n' \"$id\"; exit 0 ;;\n"
	"  *'\"code\":\"split\"'*)\n"
	"    printf '{\"msg_type\":\"stream\",\"parent_id\":\"%s\",\"content\":{\"name\":\"stdout\",\"te' \"$id\"; sleep 0.05\n"
	"    printf 'xt\":\"a\\\\nb \\303'; sleep 0.05\n"
	"    printf '\\251\"}}\\n{\"msg_type\":\"execute_reply\",\"parent_id\":\"stale\",\"content\":{\"status\":\"stale\"}}\\n{\"msg_'; sleep 0.05\n"
	"    printf 'type\":\"execute_reply\",\"parent_id\":\"%s\",' \"$id\"; sleep 0.05\n"
	"    printf '\"content\":{\"status\":\"ok\",\"case\":\"split\"}}\\n' ;;\n"
	"  *'\"code\":\"notjson\"'*)\n"
	"    printf 'hello world\\n\\n{not json\\n[1,2]\\n{\"msg_type\":\"stream\"}\\n'\n"
	"    printf '{\"msg_type\":\"stream\",\"content\":{\"name\":\"stdout\",\"text\":\"dup\"},\"msg_type\":\"error\"}\\n'\n"
	"    printf '{\"msg_type\":\"execute_reply\",\"parent_id\":\"%s\",\"content\":{}}junk\\n' \"$id\"\n"
	"    printf '\\377\\376\\n'\n"
	"    reply \"$id\" notjson ;;\n"
	"  *'\"code\":\"atcap\"'*)\n"
	"    p='" AT_CAP_PREFIX "'; s='" AT_CAP_SUFFIX "'\n"
	"    { printf '%s' \"$p\"; xs $((67108864 - ${#p} - ${#s})); printf '%s\\n' \"$s\"; reply \"$id\" atcap; } ;;\n"
	"  *'\"code\":\"overcap\"'*)\n"
	"    { printf '{'; xs 67108864; printf '\\n'; stream \"$id\" after; reply \"$id\" overcap; } ;;\n"
	"  *'\"code\":\"flood-stdout\"'*)\n"
	"    tr '\\0' x < /dev/zero ;;\n"
	"  *'\"code\":\"flood-stderr\"'*)\n"
	"    tr '\\0' x < /dev/zero >&2 ;;\n"
	"  *'\"code\":\"eof\"'*)\n"
	"    stream \"$id\" before\n"
	"    printf '{\"msg_type\":\"execute_reply\",\"parent_id\":\"%s\",\"content\":{\"status\":\"ok\"}}' \"$id\"; exit 7 ;;\n"
	"  *) reply \"$id\" unknown ;;\n"
	"  esac\n"
	"done\n";

static char runners[256];

/* What the callback saw. */
struct seen {
	unsigned messages;      /* protocol messages (not streams) */
	unsigned replies;       /* execute_reply messages among them */
	unsigned streams;       /* stream messages */
	unsigned protocol_errors; /* protocol_error messages (lines that were not messages) */
	unsigned cap_notes;     /* the "over the size cap" note on stderr */
	size_t out_bytes, err_bytes;
	char out[4096];         /* stdout stream text, concatenated (the start) */
	size_t big_stream;      /* length of the largest stream text */
};

static void on_msg(json_t *m, void *ctx)
{
	struct seen *s = ctx;
	const char *type = json_string_value(json_object_get(m, "msg_type"));
	json_t *c = json_object_get(m, "content");
	if (!type || strcmp(type, "stream") != 0) {
		s->protocol_errors += type && strcmp(type, "protocol_error") == 0;
		s->messages++;
		s->replies += type && strcmp(type, "execute_reply") == 0;
		return;
	}
	s->streams++;
	const char *name = json_string_value(json_object_get(c, "name"));
	const char *text = json_string_value(json_object_get(c, "text"));
	size_t len = json_string_length(json_object_get(c, "text"));
	if (!name || !text)
		return;
	if (len > s->big_stream)
		s->big_stream = len;
	if (strcmp(name, "stderr") == 0) {
		s->err_bytes += len;
		s->cap_notes += strcmp(text, "ward: a kernel message over the size cap was dropped\n") == 0;
	} else {
		s->out_bytes += len;
		size_t used = strlen(s->out);
		if (len < sizeof(s->out) - used)
			memcpy(s->out + used, text, len + 1);
	}
}

static int make_runners(void)
{
	return fake_runners_make(runners, sizeof(runners), "t-kernel", fake_kernel);
}

static void remove_runners(void)
{
	fake_runners_remove(runners);
}

/* A policy with a time limit that ends a case the channel fails to end. */
static int policy(struct ward_policy *p, const char *timeout, struct ward_error *err)
{
	if (ward_policy_init(p, err) < 0)
		return -1;
	if (ward_policy_set(p, "limits.timeout", timeout, "test", err) < 0) {
		ward_policy_release(p);
		return -1;
	}
	return 0;
}

static const struct ward_kernel_options options = { .lang = WARD_LANG_NODE, .runners_dir = runners };

/* Runs `code` through the non-blocking form, as ward serve does: poll the
 * fds the kernel names, step, until the reply or the end. */
static int run_async(struct ward_kernel *k, const char *code, struct seen *s, json_t **reply)
{
	struct ward_error err;
	int r = ward_kernel_submit_execute(k, code, false, on_msg, s, &err);
	if (r < 0)
		return r;
	for (;;) {
		struct pollfd fds[WARD_KERNEL_NFDS];
		int t = ward_kernel_pollfds(k, fds);
		if (poll(fds, WARD_KERNEL_NFDS, t < 0 || t > 1000 ? 1000 : t) < 0 && errno != EINTR)
			return -errno;
		r = ward_kernel_step(k, reply);
		if (r != 0)
			return r == 1 ? 0 : r;
	}
}

/* The fake kernel under a time limit of `timeout` seconds, started in the
 * step form (async) or the blocking one; NULL, reported under `what`,
 * when it does not start. */
static struct ward_kernel *kernel_up(bool async, const char *timeout, const char *what)
{
	struct ward_policy p;
	struct ward_error err;
	struct ward_kernel *k = NULL;
	if (policy(&p, timeout, &err) < 0) {
		ok(0, "%s: policy: %s", what, err.message);
		return NULL;
	}
	int r = async ? ward_kernel_begin(&p, &options, &k, &err)
		      : ward_kernel_start(&p, &options, &k, &err);
	ward_policy_release(&p);
	if (!ok(r == 0, "%s: the fake kernel starts", what)) {
		diag("%s", err.message);
		return NULL;
	}
	return k;
}

/* One request, in the kernel's form: 0 with the reply, or a negative errno. */
static int run_case(struct ward_kernel *k, bool async, const char *code, struct seen *s,
		    json_t **reply)
{
	struct ward_error err;
	return async ? run_async(k, code, s, reply)
		     : ward_kernel_execute(k, code, false, on_msg, s, reply, &err);
}

/* Ends the kernel, in its form, with its verdict in v (v to release). */
static int kernel_down(struct ward_kernel *k, bool async, struct ward_verdict *v)
{
	struct ward_error err;
	ward_verdict_init(v);
	return async ? ward_kernel_finish(k, v, &err) : ward_kernel_stop(k, v, &err);
}

static const char *reply_case(json_t *reply)
{
	return json_string_value(json_object_get(reply, "case"));
}

/* Well-formed messages split over several writes (a UTF-8 character cut
 * in two), several in one read, a reply for another request. */
static void framing(bool async)
{
	const char *form = async ? "step" : "blocking";
	struct ward_verdict v;
	struct seen s = { 0 };
	json_t *reply = NULL;
	struct ward_kernel *k = kernel_up(async, "60", form);
	if (!k)
		return;
	int r = run_case(k, async, "split", &s, &reply);
	is_int(r, 0, "%s: split lines: the reply arrives", form);
	is_str(reply_case(reply), "split", "%s: split lines: the reply is its own, whole", form);
	json_decref(reply);
	is_int(s.streams, 1, "%s: split lines: one stream message", form);
	is_str(s.out, "a\nb \xc3\xa9", "%s: split lines: its text whole, the cut character joined", form);
	is_int(s.messages, async ? 2 : 1, "%s: split lines: a reply to another id goes to the callback%s",
	       form, async ? " (and the start's status)" : "");
	is_int(s.replies, 1, "%s: split lines: ... as one execute_reply", form);

	/* Lines that are not protocol messages are never passed off as the
	 * program's stdout: they are dropped, and the first one in the
	 * kernel's life becomes one protocol_error message. */
	s = (struct seen){ 0 };
	r = run_case(k, async, "notjson", &s, &reply);
	is_int(r, 0, "%s: not JSON: the reply arrives", form);
	is_str(reply_case(reply), "notjson", "%s: not JSON: the reply is the real one", form);
	json_decref(reply);
	is_int(s.protocol_errors, 1,
	       "%s: not JSON: the first bad line in the kernel's life is one protocol_error", form);
	is_int(s.streams, 0, "%s: not JSON: none of the 8 lines became a stdout stream", form);
	is_str(s.out, "", "%s: not JSON: text, empty, broken, an array, no content, duplicate keys, "
	       "trailing junk, non-UTF-8: none reached stdout", form);

	/* A line of exactly the cap is delivered; one byte more is dropped
	 * whole, noted once, and the next line is read normally. */
	s = (struct seen){ 0 };
	r = run_case(k, async, "atcap", &s, &reply);
	is_int(r, 0, "%s: a line of the cap: the reply arrives", form);
	json_decref(reply);
	is_int(s.big_stream, LINE_MAX_BYTES - strlen(AT_CAP_PREFIX AT_CAP_SUFFIX), "%s: a line of %u bytes (the cap) is delivered whole",
	       form, LINE_MAX_BYTES);
	is_int(s.cap_notes, 0, "%s: ... with no note", form);

	s = (struct seen){ 0 };
	r = run_case(k, async, "overcap", &s, &reply);
	is_int(r, 0, "%s: a line over the cap: the reply arrives", form);
	is_str(reply_case(reply), "overcap", "%s: a line over the cap: the reply is the real one", form);
	json_decref(reply);
	is_int(s.cap_notes, 1, "%s: a line over the cap is noted once on stderr", form);
	is_str(s.out, "after", "%s: ... dropped whole; the next line is read from its start", form);
	is_int(s.streams, 2, "%s: ... the note and the next line, nothing else", form);

	r = kernel_down(k, async, &v);
	is_int(r, 0, "%s: the kernel stops", form);
	ward_verdict_release(&v);
}

/* A kernel that floods, or dies mid-line: one kernel per case, since the
 * case ends it. The time limit (20 s) is what would end a flood that the
 * budget failed to stop; the verdict tells the two apart. */
static void ending(const char *code, bool async, enum ward_status want, int want_exit,
		   struct seen *s, int *rc, json_t **reply)
{
	char what[64];
	struct ward_verdict v;
	*reply = NULL;
	snprintf(what, sizeof(what), "%s %s", async ? "step" : "blocking", code);
	struct ward_kernel *k = kernel_up(async, "20", what);
	if (!k)
		return;
	*rc = run_case(k, async, code, s, reply);
	int r = kernel_down(k, async, &v);
	is_int(r, 0, "%s: the sandbox is finished", what);
	if (!ok(v.status == want, "%s: the verdict is %s", what, ward_status_name(want)))
		diag("got %s (exit %d, signal %d)", ward_status_name(v.status), v.exit_code, v.signal);
	if (want_exit >= 0)
		is_int(v.exit_code, want_exit, "%s: ... with the kernel's exit code", what);
	ward_verdict_release(&v);
}

static void endings(bool async)
{
	const char *form = async ? "step" : "blocking";
	struct seen s = { 0 };
	json_t *reply;
	int r = 1;

	/* One endless line on stdout: dropped at the line cap, then cut at the
	 * channel's budget. */
	ending("flood-stdout", async, WARD_STATUS_OUTPUT_LIMIT, -1, &s, &r, &reply);
	is_int(r, -ECHILD, "%s flood-stdout: the request ends with -ECHILD, no reply", form);
	ok(reply == NULL, "%s flood-stdout: ... and no reply object", form);
	json_decref(reply);
	is_int(s.cap_notes, 1, "%s flood-stdout: the line over the cap is noted once", form);
	is_int(s.out_bytes, 0, "%s flood-stdout: none of it reaches the caller as stdout", form);

	/* Endless stderr: it reaches the caller as streams, and counts against
	 * the same budget. */
	s = (struct seen){ 0 };
	ending("flood-stderr", async, WARD_STATUS_OUTPUT_LIMIT, -1, &s, &r, &reply);
	is_int(r, -ECHILD, "%s flood-stderr: the request ends with -ECHILD", form);
	json_decref(reply);
	ok(s.err_bytes > BUDGET_BYTES - 2 * 65536 && s.err_bytes <= BUDGET_BYTES,
	   "%s flood-stderr: the caller got the budget, at most (%zu of %u bytes)", form,
	   s.err_bytes, BUDGET_BYTES);
	ok(s.big_stream <= 65536, "%s flood-stderr: in pieces of at most 64 KiB (largest %zu)", form,
	   s.big_stream);

	/* EOF mid-line: a complete reply object without its newline is not a
	 * message; the request ends with the sandbox. */
	s = (struct seen){ 0 };
	ending("eof", async, WARD_STATUS_ERROR, 7, &s, &r, &reply);
	is_int(r, -ECHILD, "%s eof mid-line: the request ends with -ECHILD", form);
	ok(reply == NULL, "%s eof mid-line: the unterminated reply is not taken", form);
	json_decref(reply);
	is_int(s.replies, 0, "%s eof mid-line: ... nor passed on as a message", form);
	is_str(s.out, "before", "%s eof mid-line: the complete line before it arrived", form);
}

int main(void)
{
	struct sigaction sa = { .sa_handler = SIG_IGN };
	sigaction(SIGPIPE, &sa, NULL);
	if (make_runners() < 0) {
		printf("Bail out! fake runners directory: %s\n", strerror(errno));
		return 1;
	}
	/* Whether a sandbox can start here at all (a host without user
	 * namespaces, say): that is no finding about the channel. */
	struct ward_policy p;
	struct ward_error err;
	struct ward_kernel *k = NULL;
	struct ward_verdict v;
	if (policy(&p, "10", &err) < 0) {
		printf("Bail out! policy: %s\n", err.message);
		return 1;
	}
	int r = ward_kernel_begin(&p, &options, &k, &err);
	ward_policy_release(&p);
	if (r < 0) {
		skip("the sandbox cannot start here: %s", err.message);
		remove_runners();
		return tap_done();
	}
	kernel_down(k, true, &v);
	ward_verdict_release(&v);
	framing(false);
	framing(true);
	endings(false);
	endings(true);
	remove_runners();
	return tap_done();
}
