/* lib/service/session.h — one session, as the files that drive it share
 * it: session.c (its life: create, end, find, views), agent.c (the agent
 * channel and its state machine), calls.c (execute, commands, files
 * requests), ttl.c (timeouts, the backstop, the idle TTL) and state.c (the
 * state store). Private to lib/service.
 *
 * A session is one sandbox running the session agent
 * (runners/session/agent.py), which starts a language kernel per named
 * context and runs commands; variables, files and installed packages live
 * as long as the sandbox. The core speaks to the agent in JSON lines,
 * listening to every message and matching answers to requests by
 * parent_id: one call (an execute or a foreground command) at a time, plus
 * small requests (a background command's status, a kill) that may overlap
 * it. Everything the agent says is a claim from inside the sandbox, and
 * can only be about the sandbox's own work.
 */
#ifndef WARD_SERVICE_SESSION_H
#define WARD_SERVICE_SESSION_H

#include "internal.h"

enum {
	MAX_TOMBSTONES = 1024,
	AGENT_ANSWER_MS = 5000,      /* a small request the agent leaves unanswered */
	INTERRUPT_AFTER_MS = 1000,   /* past a call's timeout: ask the agent */
	KILL_AFTER_MS = 5000,        /* past a call's timeout: end the sandbox */
	SESSION_LIFETIME_MS = 24 * 3600 * 1000,
	/* Requests the agent has not read wait in the core's memory: past
	 * AGENT_UNSENT_MAX none is queued (503 agent_busy), so they hold at
	 * most that plus one request; and an agent that reads none of them
	 * for AGENT_STALL_MS (stopped, or stuck) ends its session. */
	AGENT_UNSENT_MAX = 1 << 20,
	AGENT_STALL_MS = 10000,
};

enum pend_kind { PEND_BG_START, PEND_STATUS, PEND_KILL };

struct session {
	struct session *next;
	struct ward_service *s;
	char id[24];
	struct ward_key_info key;
	bool live;
	char ended[16];              /* "expired", "lost", "dead" (tombstones) */
	char reason[200];
	struct ward_policy call;     /* per-call policy (its timeout is a call's) */
	struct ward_kernel *k;
	char sandbox_id[40];
	int epfd;
	struct watch w;
	int reg[WARD_KERNEL_NFDS];
	uint64_t wake_ns;
	bool ready;
	double created, last_used;   /* epoch seconds */
	uint64_t ttl_ms, expires_ns, tomb_until_ns;
	char digest[WARD_AUDIT_HEX_SIZE];
	uint64_t mem;
	struct ward_execution *fg;
	uint64_t fg_timeout_ms;
	bool fg_interrupted;
	bool backstopped;            /* killed because a call overran its timeout */
	struct ward_sandbox_stats before;
	json_t *contexts;            /* "lang/name" -> {language, context, executions} */
	uint64_t n_calls;
	struct ward_answer *pend;
	size_t unsent;               /* what the agent had not read at the last look */
	uint64_t stall_since_ns;     /* since when it has read none of it (0: all read) */
	struct ward_egress_credential *creds; /* the session's own egress rules */
	size_t n_creds;
};

/* session.c */
double sess_epoch_now(void);
/* Ends a live session: kills its sandbox, ends its call with the
 * sandbox's verdict, answers what waits, and leaves a tombstone (tomb) or
 * nothing. */
void sess_end(struct session *se, const char *ended, const char *reason, bool tomb);
void sess_free(struct session *se);
void sess_remove(struct ward_service *s, struct session *se);
json_t *sess_json(struct session *se);
/* The tenant's session of that id (another tenant's does not exist). */
struct session *sess_find(struct ward_service *s, const struct ward_key_info *key, const char *id);
/* 410 with why it ended; 0. */
int sess_gone(struct ward_reply *out, struct session *se);
/* The body as an object with only the known keys ({} when there is none),
 * or NULL with out's error set. */
json_t *sess_parse_body(struct ward_reply *out, const char *body, size_t len,
			const char *const *known, size_t n_known);
bool sess_name_ok(const char *n, size_t max);
void sess_unwatch(struct session *se);

/* agent.c */
/* Starts the sandbox and its agent under p. 0 or -errno with err. */
int sess_start_agent(struct session *se, const struct ward_policy *p, struct ward_error *err);
void sess_sync_fds(struct session *se);
/* Sends a small request; its answer comes to the returned deferred (the
 * session's list holds one reference, the caller the other). */
struct ward_answer *sess_ask(struct session *se, int kind, const char *type, json_t *content);
void sess_send_interrupt(struct session *se, const char *reason);
void sess_answer_pends(struct session *se, unsigned status, const char *code, const char *msg);

/* ttl.c */
/* The agent reads its requests, or its session ends. */
void sess_check_stall(struct session *se, uint64_t now);

/* state.c */
void sess_state_write(struct session *se);
void sess_state_remove(struct session *se);

#endif
