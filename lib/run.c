/* lib/run.c — ward_run: one program, one fresh sandbox, one verdict.
 *
 * The one-shot form of the sandbox interface: relays or captures the
 * program's output within the output cap (excess is counted and dropped,
 * the program never blocks), relays the caller's stdin, honours a cancel
 * fd, and lets lib/supervise.c enforce the limits and fill the verdict.
 */
#include <fcntl.h>
#include <poll.h>
#include <string.h>

#include "base/util.h"
#include "ward/sandbox.h"
#include "ward/ward.h"
#include "sandbox.h"

struct relay {
	struct ward_sandbox *sb;
	struct ward_verdict *v;
	enum ward_output_mode mode;
	uint64_t limit;
	int out, err;            /* read ends still open, or -1 */
	int in_src;              /* the caller's stdin, or -1 */
	char in_buf[4096];
	size_t in_len;
	bool in_eof;
};

/* Appends to the capture buffer or relays to the caller, within the cap. */
static void take_output(struct relay *rl, int which, const char *buf, size_t n)
{
	struct ward_verdict *v = rl->v;
	uint64_t total = v->usage.output_bytes;
	uint64_t room = total < rl->limit ? rl->limit - total : 0;
	size_t keep = n < room ? n : (size_t)room;
	v->usage.output_bytes += n;
	if (keep < n)
		*(which == 1 ? &v->stdout_truncated : &v->stderr_truncated) = true;
	if (!keep)
		return;
	if (rl->mode == WARD_OUTPUT_PASSTHROUGH) {
		ward_write_all(which, buf, keep);
		return;
	}
	/* under memory pressure output is dropped, not fatal */
	ward_buffer_append(which == 1 ? &v->out : &v->err, buf, keep);
}

static void drain(struct relay *rl, int *fd, int which)
{
	char buf[65536];
	ssize_t n = read(*fd, buf, sizeof(buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		*fd = -1; /* the sandbox owns and closes it */
		return;
	}
	take_output(rl, which, buf, (size_t)n);
}

/* stdin goes through a small buffer: the caller's fd is read only when the
 * buffer is empty, the pipe written (non-blocking) only when it has room, so
 * a program that never reads its stdin cannot stall the supervisor. */
static void stdin_read(struct relay *rl)
{
	ssize_t n = read(rl->in_src, rl->in_buf, sizeof(rl->in_buf));
	if (n > 0)
		rl->in_len = (size_t)n;
	else if (n == 0 || (errno != EINTR && errno != EAGAIN))
		rl->in_eof = true;
}

static void stdin_write(struct relay *rl)
{
	ssize_t n = write(ward_sandbox_stdin(rl->sb), rl->in_buf, rl->in_len);
	if (n > 0) {
		memmove(rl->in_buf, rl->in_buf + n, rl->in_len - (size_t)n);
		rl->in_len -= (size_t)n;
	} else if (n < 0 && errno != EINTR && errno != EAGAIN) {
		rl->in_eof = true;
		rl->in_len = 0;
	}
}

/* After the program's end, what it wrote is already in the pipes: read it
 * without waiting for an EOF that processes it left behind could hold off
 * until the teardown, and at most this many reads (they may still write). */
enum { TAIL_READS = 32 };

static void loop(struct relay *rl, int cancel_fd)
{
	struct ward_sandbox *sb = rl->sb;
	bool exited = false;
	int tail = 0;
	while ((!exited || rl->out >= 0 || rl->err >= 0) && tail < TAIL_READS) {
		int in = ward_sandbox_stdin(sb);
		if (in >= 0 && rl->in_eof && !rl->in_len) {
			ward_sandbox_close_stdin(sb);
			in = -1;
		}
		struct pollfd fds[6] = {
			{ .fd = rl->out, .events = POLLIN },
			{ .fd = rl->err, .events = POLLIN },
			/* readable when the program ends (or its init dies): the
			 * answer does not wait for the teardown */
			{ .fd = exited ? -1 : ward_sandbox_report_fd(sb), .events = POLLIN },
			{ .fd = in >= 0 && !rl->in_len && !rl->in_eof ? rl->in_src : -1, .events = POLLIN },
			{ .fd = in >= 0 && rl->in_len ? in : -1, .events = POLLOUT },
			{ .fd = exited ? -1 : cancel_fd, .events = POLLIN },
		};
		int n = poll(fds, 6, exited ? 0 : ward_sandbox_check(sb));
		if (n < 0 && errno != EINTR)
			break;
		if (n == 0 && exited)
			break; /* the pipes hold nothing more */
		if (n <= 0)
			continue;
		tail += exited;
		if (fds[5].revents) {
			ward_sandbox_kill(sb, WARD_KILL_CANCEL);
			cancel_fd = -1;
		}
		if (fds[0].revents)
			drain(rl, &rl->out, 1);
		if (fds[1].revents)
			drain(rl, &rl->err, 2);
		if (fds[3].revents)
			stdin_read(rl);
		if (fds[4].revents)
			stdin_write(rl);
		if (fds[2].revents)
			exited = ward_sandbox_program_ended(sb);
	}
}

int ward_run_ended(const struct ward_policy *policy, char *const argv[],
		   const struct ward_run_options *opts, struct ward_verdict *v,
		   struct ward_error *err, struct ward_sandbox **sbp)
{
	struct ward_sandbox_options so = { .stdin_pipe = opts && opts->stdin_fd >= 0,
					   .egress = opts ? opts->egress : NULL };
	struct ward_sandbox *sb;
	uint64_t start = ward_now_ns();
	*sbp = NULL;
	int rc = ward_sandbox_start(policy, argv, &so, &sb, err);
	if (rc < 0) {
		v->status = WARD_STATUS_SETUP_FAILED;
		v->setup = *err;
		v->usage.wall_ms = (ward_now_ns() - start) / 1000000;
		return rc;
	}
	struct relay rl = {
		.sb = sb, .v = v, .mode = opts ? opts->output : WARD_OUTPUT_PASSTHROUGH,
		.limit = policy->output_limit, .out = ward_sandbox_stdout(sb),
		.err = ward_sandbox_stderr(sb), .in_src = opts ? opts->stdin_fd : -1,
	};
	loop(&rl, opts ? opts->cancel_fd : -1);
	*sbp = sb;
	return ward_sandbox_end(sb, v, err);
}

WARD_EXPORT int ward_run(const struct ward_policy *policy, char *const argv[],
			 const struct ward_run_options *opts, struct ward_verdict *v,
			 struct ward_error *err)
{
	struct ward_sandbox *sb;
	int rc = ward_run_ended(policy, argv, opts, v, err, &sb);
	ward_sandbox_release(sb);
	return rc;
}
