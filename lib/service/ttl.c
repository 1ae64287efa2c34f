/* lib/service/ttl.c — a session's clocks: the call's timeout and the
 * backstop past it, the agent's answer deadline and stall, the idle TTL,
 * and tombstones' hour.
 *
 * A call past its timeout is first interrupted through the agent
 * (INTERRUPT_AFTER_MS later), and if the agent does not end it, the
 * whole sandbox is killed (KILL_AFTER_MS later): a session never holds a
 * tenant's quota past what it was allowed, whatever runs inside.
 */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/util.h"
#include "session.h"

/* A call past its timeout: the agent was told and did not end it. */
static void sess_backstop(struct session *se, uint64_t now)
{
	if (!se->fg || !se->fg_timeout_ms)
		return;
	uint64_t start = exec_started_ns(se->fg);
	uint64_t t = se->fg_timeout_ms * 1000000ull;
	if (!se->fg_interrupted && now >= start + t + INTERRUPT_AFTER_MS * 1000000ull) {
		sess_send_interrupt(se, "timeout");
		se->fg_interrupted = true;
	}
	if (now >= start + t + KILL_AFTER_MS * 1000000ull && !se->backstopped) {
		se->backstopped = true;
		ward_sandbox_kill(session_sandbox(se), WARD_KILL_TIMEOUT);
	}
}

/* The agent reads its requests, or its session ends: it never holds the
 * daemon's memory for long. */
void sess_check_stall(struct session *se, uint64_t now)
{
	size_t unsent = se->k ? ward_kernel_unsent(se->k) : 0;
	if (!unsent)
		se->stall_since_ns = 0;
	else if (!se->stall_since_ns || unsent < se->unsent)
		se->stall_since_ns = now; /* first seen, or it read some */
	se->unsent = unsent;
	if (se->stall_since_ns && now >= se->stall_since_ns + AGENT_STALL_MS * 1000000ull) {
		char why[160];
		snprintf(why, sizeof(why), "the session's agent read none of its requests for %d s "
			 "(%zu bytes waiting): it was stopped or is stuck", AGENT_STALL_MS / 1000, unsent);
		sess_end(se, "stalled", why, true);
	}
}

static uint64_t next_wake(struct session *se)
{
	uint64_t best = se->live ? se->wake_ns : 0;
	uint64_t cand[3] = { 0, 0, 0 };
	if (se->live && !se->fg && !se->pend)
		cand[0] = se->expires_ns;
	if (se->live && se->fg && se->fg_timeout_ms)
		cand[1] = exec_started_ns(se->fg) + se->fg_timeout_ms * 1000000ull +
			  (se->fg_interrupted ? KILL_AFTER_MS : INTERRUPT_AFTER_MS) * 1000000ull;
	if (!se->live)
		cand[2] = se->tomb_until_ns;
	if (se->live && se->stall_since_ns && (!best || se->stall_since_ns + AGENT_STALL_MS * 1000000ull < best))
		best = se->stall_since_ns + AGENT_STALL_MS * 1000000ull;
	for (struct ward_answer *d = se->pend; d; d = d->next)
		if (!best || d->deadline_ns < best)
			best = d->deadline_ns;
	for (int i = 0; i < 3; i++)
		if (cand[i] && (!best || cand[i] < best))
			best = cand[i];
	return best;
}

int session_timeout(struct ward_service *s)
{
	uint64_t now = ward_now_ns(), best = 0;
	for (struct session *se = s->sessions; se; se = se->next) {
		uint64_t w = next_wake(se);
		if (w && (!best || w < best))
			best = w;
	}
	if (!best)
		return -1;
	return best <= now ? 0 : (int)((best - now) / 1000000 + 1);
}

static void expire_pends(struct session *se, uint64_t now)
{
	for (struct ward_answer **p = &se->pend; *p;) {
		struct ward_answer *d = *p;
		if (d->deadline_ns > now) {
			p = &d->next;
			continue;
		}
		*p = d->next;
		deferred_answer(d, 504, svc_error_body("agent_timeout", NULL,
						       "the session's agent did not answer in time"));
		deferred_unref(d);
	}
}

void session_tick(struct ward_service *s)
{
	uint64_t now = ward_now_ns();
	struct session *se = s->sessions, *next;
	for (; se; se = next) {
		next = se->next;
		if (!se->live) {
			if (se->tomb_until_ns && se->tomb_until_ns <= now)
				sess_remove(s, se);
			continue;
		}
		if (se->wake_ns && se->wake_ns <= now)
			session_dispatch(s, se);
		if (!se->live)
			continue;
		sess_backstop(se, now);
		expire_pends(se, now);
		sess_check_stall(se, now);
		if (!se->live)
			continue;
		if (!se->fg && !se->pend && se->expires_ns <= now) {
			char why[96];
			snprintf(why, sizeof(why), "idle for its TTL (%llu s)",
				 (unsigned long long)(se->ttl_ms / 1000));
			sess_end(se, "expired", why, true);
		}
	}
}
