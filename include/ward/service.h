/* include/ward/service.h — the service core: executions, sessions,
 * admission and quotas, files, the state store, audit and metrics, with no
 * transport.
 *
 * The core is what `ward serve` (HTTP) is a front end of, and what the next
 * front ends (MCP, an E2B-compatible API, the CLI's exec/call) drive the
 * same way. It never sees a socket, a header or a URL: a front end
 * authenticates, routes and parses its own protocol, then calls these
 * functions with plain values; their answers come back either at once (a
 * struct ward_reply) or later as events to the sink the front end gave
 * (struct ward_sink). It must never block: every fd it watches (sandbox
 * pipes, pidfds, timers, its workers' eventfd) sits behind ONE epoll fd
 * (ward_service_fd) that the front end adds to its own loop, calling
 * ward_service_dispatch when it is readable and at least every
 * ward_service_timeout ms. Slow file work runs on the core's worker
 * threads. Signals belong to the front end.
 *
 * Errors are values {status, code, field, message}. status uses HTTP's
 * numbering as a classification (400 bad input, 403 not allowed, 404 no
 * such thing, 409 conflict, 410 gone, 413 too large, 429 a quota, 503
 * busy or stopping, 504 a timeout, 5xx the daemon's fault) because every
 * front end maps from it: HTTP sends it as is, MCP and the CLI turn it
 * into their own error kinds. Nothing re-parses a message.
 *
 * Thread rule: every function here runs on the front end's loop thread;
 * sink callbacks are called on it too, from inside these functions.
 */
#ifndef WARD_SERVICE_H
#define WARD_SERVICE_H

struct ward_launcher;
struct ward_zygote;
struct ward_egress;
struct ward_egress_credential;

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ward/error.h"
#include "ward/policy.h"
#include "ward/result.h"
#include "ward/verdict.h"

struct ward_service;
struct ward_execution;
struct ward_answer;
struct ward_session;
struct ward_key_info;

/* The core's settings (the daemon's config keys of the same names). */
struct ward_service_config {
	char *keys_file;
	char *audit_log;         /* NULL: no audit log */
	bool audit_full_text;
	bool audit_sync;         /* fdatasync every line (default true) */
	uint64_t grace_ms;       /* stopping: how long running executions may finish */
	uint64_t max_executions; /* running at once, all tenants */
	uint64_t max_per_tenant; /* running at once, per tenant */
	char *policy_file;       /* the default policy (JSON) */
	json_t *policy;          /* the config file's "policy" object */
	char *runners;           /* runners directory, NULL: found next to ward */
	char *state_dir;         /* what must survive a crash of the daemon */
	uint64_t session_ttl_ms; /* idle TTL when a session gives none */
	uint64_t max_session_ttl_ms;
	uint64_t max_sessions;   /* all tenants */
	uint64_t max_sessions_per_tenant;
	uint64_t tenant_memory;  /* bytes: memory limits of a tenant's live sandboxes */
	uint64_t max_file;       /* bytes of one file moved through the files API */
	uint64_t artifacts_inline_max; /* bytes of a one-shot's files sent back inline, in all */
	uint64_t max_event_subscribers; /* GET /v1/events streams at once (default 8) */
	json_t *tenants;         /* per-tenant overrides: {"t": {"max_per_tenant": n, ...}} */
	bool embedded;           /* a program's own core (the CLI): no keys, no workers */
	bool no_keys;            /* a program's own core with sessions (`ward mcp`): the
				  * program makes its key; no keys file is read */
	/* the warm pool: kernels prepared ahead per language (enum ward_lang
	 * order), 0: none; never for an embedded core */
	uint64_t pool[3];
	/* Started by the front end before the core (ward/zygote.h), borrowed,
	 * NULL: none. Every sandbox the core starts is cloned by the launcher
	 * (not by a copy of the front end's process); python kernels are
	 * forked by the zygote. */
	struct ward_launcher *launcher;
	struct ward_zygote *zygote;
	/* The egress proxy's operator settings (struct ward_egress_config in
	 * ward/egress.h), owned by the front end's config and checked there:
	 * "NAME=ADDR" resolve overrides, CIDRs opened among the refused
	 * ranges, DNS servers "ADDR[:PORT]", an extra CA file for upstream
	 * TLS (NULL: none), and the operator's credential rules (at most 32,
	 * 16 headers each; their values are secrets: never logged). */
	const char *const *egress_resolve;
	size_t n_egress_resolve;
	const char *const *egress_allow_private;
	size_t n_egress_allow_private;
	const char *const *egress_dns;
	size_t n_egress_dns;
	const char *egress_ca;
	const struct ward_egress_credential *egress_credentials;
	size_t n_egress_credentials;
	/* The proxy, borrowed (an embedded core's program made it); NULL: the
	 * core starts its own from the settings above. */
	struct ward_egress *egress;
};

/* --- errors and answers --- */

enum { WARD_SERVICE_CODE_MAX = 32, WARD_SERVICE_MSG_MAX = 512 };

struct ward_service_error {
	unsigned status;                      /* 0: no error */
	char code[WARD_SERVICE_CODE_MAX];     /* "quota_exceeded", "invalid_request", ... */
	char field[WARD_ERROR_FIELD_MAX + 8]; /* "policy.limits.memory"; "" for none */
	char message[WARD_SERVICE_MSG_MAX];
};

/* Sets e (status, code, field or NULL, printf message); returns -1. */
int ward_service_fail(struct ward_service_error *e, unsigned status, const char *code,
		      const char *field, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* {"error": {"code", "message", "field"}} (new reference); bytes that are
 * not UTF-8 become '?'. NULL only without memory. */
json_t *ward_service_error_json(const struct ward_service_error *e);

/* What a request gives back at once. Exactly one of: err.status set (a
 * refusal); body set (an answer: status and a JSON object, owned); ex set
 * (an execution to wait for or stream: the caller holds one reference,
 * ward_execution_unref); later set (an answer that comes as an ANSWER
 * event: the caller holds one reference, ward_answer_unref). */
struct ward_reply {
	struct ward_service_error err;
	unsigned status;
	json_t *body;
	struct ward_execution *ex;
	bool stream;                 /* ex: the caller asked for events */
	struct ward_answer *later;
	bool took_body;              /* an upload's bytes now belong to the core */
};
void ward_reply_release(struct ward_reply *r);

/* --- events --- */

enum ward_event_kind {
	WARD_EVENT_START,    /* reserved: an execution's start is the reply that
			      * carries it (reply->ex) and its NDJSON "start" line */
	WARD_EVENT_STREAM,   /* NDJSON is queued: ward_execution_read has more; or
			      * (data set) one of the result builder's events */
	WARD_EVENT_VERDICT,  /* the execution is over: ward_execution_result */
	WARD_EVENT_ANSWER,   /* a deferred answer is filled: ward_answer_* */
};

struct ward_event {
	enum ward_event_kind kind;
	struct ward_execution *ex;   /* STREAM, VERDICT */
	struct ward_answer *answer;  /* ANSWER */
	json_t *data;                /* STREAM of an execution run with events: the
				      * builder's event (include/ward/result.h),
				      * borrowed for the call */
};

/* Where a front end hears about what it asked for. event may be called
 * from any ward_* call of the loop thread; it must not free the object it
 * is told about (it holds its own reference for that). */
struct ward_sink {
	void *ctx;
	void (*event)(void *ctx, const struct ward_event *ev);
};

/* --- the event stream (GET /v1/events) --- */

/* One subscriber to the audit events as they happen: the lines the audit
 * log gets (docs/audit.md), or, without a log, the same objects without
 * seq, prev and hash. Its queue is bounded; a subscriber that does not
 * read loses the oldest lines and then reads {"count":N,
 * "event":"events.dropped"}. Loop thread only. */
struct ward_events_sub;

/* tenant NULL or "": every event; else only events whose "tenant" field is
 * it. sink->event (kind WARD_EVENT_STREAM, no execution) is called when
 * lines are queued, and once when the core goes. 0 with *out, or -1 with
 * e: 503 "unavailable" past max_event_subscribers, 400 for a bad tenant. */
int ward_service_events_subscribe(struct ward_service *svc, const char *tenant,
				  const struct ward_sink *sink, struct ward_events_sub **out,
				  struct ward_service_error *e);
/* Up to max bytes of queued lines into buf: > 0, 0 when nothing is queued
 * (wait for the sink), -1 when the stream is over (the core is gone). */
ssize_t ward_events_read(struct ward_events_sub *sub, char *buf, size_t max);
/* Ends the subscription and frees it; NULL is a no-op. */
void ward_events_unsubscribe(struct ward_events_sub *sub);

/* --- the core's life --- */

void ward_service_config_defaults(struct ward_service_config *c);
void ward_service_config_release(struct ward_service_config *c);

/* Loads the default policy, opens the audit log, starts the workers and
 * the core's epoll fd. Takes over *cfg's contents (zeroed). 0 or -1
 * (printed on stderr). */
int ward_service_new(struct ward_service_config *cfg, struct ward_service **out);
/* The settings it runs with (borrowed). */
const struct ward_service_config *ward_service_settings(const struct ward_service *svc);
/* Checks and locks the state directory (its user only; one daemon per
 * state), removes what a killed daemon left (by cgroup) and turns its
 * sessions into tombstones, then starts the egress proxy (its CA lives
 * there). Before anything else is served. 0 or -1
 * (printed). */
int ward_service_open_state(struct ward_service *svc);
/* Ends every session and stops the workers, answering everything that
 * waits (sinks are called): before the front end closes its clients. */
void ward_service_close(struct ward_service *svc);
/* ward_service_close if need be, then frees everything. */
void ward_service_free(struct ward_service *svc);

/* The loop: one fd, readable when the core has work; dispatch does it
 * (never blocks); timeout is the ms until it needs a call anyway (-1:
 * none). */
int ward_service_fd(const struct ward_service *svc);
void ward_service_dispatch(struct ward_service *svc);
int ward_service_timeout(struct ward_service *svc);

/* Stopping: no new work is admitted (503 shutting_down); after the grace
 * every execution is cancelled and every session ended. ward_service_idle
 * is true once nothing runs. */
void ward_service_stop(struct ward_service *svc);
void ward_service_stop_now(struct ward_service *svc);
bool ward_service_idle(const struct ward_service *svc);
unsigned ward_service_running(const struct ward_service *svc);
unsigned ward_service_sessions(const struct ward_service *svc);

/* Keys (reloaded when the file changes). True with *key filled for a
 * valid "wk_..." token. */
bool ward_service_keys_loaded(struct ward_service *svc);
bool ward_service_authenticate(struct ward_service *svc, const char *token,
			       struct ward_key_info *key);

/* Audit: never fails the request (an error is printed). */
void ward_service_audit(struct ward_service *svc, const char *event, json_t *fields);
struct ward_audit *ward_service_audit_log(struct ward_service *svc);

/* Metrics the front end counts into, and the Prometheus text (malloc'd). */
void ward_service_count_request(struct ward_service *svc);
void ward_service_count_denial(struct ward_service *svc, const char *tenant);
void ward_service_count_bad_request(struct ward_service *svc);
void ward_service_count_eviction(struct ward_service *svc);
char *ward_service_metrics(struct ward_service *svc, size_t *len);

/* --- one-shot executions --- */

/* Parses a request body (JSON: language+code or command, files, policy,
 * timeout) and starts it for key. Returns 0: reply->ex on success (also
 * for a sandbox that could not be set up: that is a verdict), reply->err
 * for a refusal (400, 429, 503). */
int ward_service_execute(struct ward_service *svc, const struct ward_key_info *key,
			 const char *body, size_t len, bool stream, struct ward_reply *reply);
/* A one-shot as a program builds it (`ward exec`, `ward call`): read and
 * checked already, run as is (no tightening against the core's default
 * policy: the program's own policy is the operator's). */
struct ward_exec_spec {
	struct ward_policy policy;     /* the effective policy */
	int lang;                      /* enum ward_lang */
	char **cells;                  /* malloc'd array of malloc'd cells */
	size_t n_cells;
	bool keep_going;               /* later cells run after one failed */
	char *call_source;             /* a call instead of cells (all malloc'd) */
	char *call_filename;
	char *call_function;
	json_t *call_args;             /* an object or array (a reference) */
	struct ward_file *files;       /* malloc'd array; paths and data malloc'd */
	size_t n_files;
	const char *artifacts_dir;     /* copy artifacts there (never through a link) */
	bool events;                   /* the builder's events to the sink, as objects */
};
/* Starts it for key; takes over everything in *spec (zeroed, even on
 * failure). Returns 0: reply->ex (a setup failure is a verdict), or
 * reply->err (503, 429; 400 for a spec with no cell or call). Its final
 * JSON has no execution_id. */
int ward_service_run(struct ward_service *svc, const struct ward_key_info *key,
		     struct ward_exec_spec *spec, struct ward_reply *reply);
/* DELETE: cancels the tenant's running execution (or session call). */
int ward_service_cancel(struct ward_service *svc, const struct ward_key_info *key,
			const char *id, struct ward_reply *reply);

/* An execution's events go to sink (NULL: nobody listens; a client that
 * is gone cancels with ward_execution_cancel first). */
void ward_execution_watch(struct ward_execution *ex, const struct ward_sink *sink);
const char *ward_execution_id(const struct ward_execution *ex);
bool ward_execution_done(const struct ward_execution *ex);
/* The final JSON (borrowed), once done. */
json_t *ward_execution_result(struct ward_execution *ex);
/* Copies queued NDJSON out: bytes, 0 with nothing yet (*wait set: a
 * STREAM or VERDICT event follows), or -1 at the end. The queue is bounded
 * (twice the output cap and 1 MiB): what does not fit is dropped and
 * counted in a "dropped" line, never the sandbox stalled; the verdict line
 * is written only once the rest was read. */
ssize_t ward_execution_read(struct ward_execution *ex, char *buf, size_t max, bool *wait);
void ward_execution_cancel(struct ward_execution *ex);
/* Once done: the verdict and the result builder that made the final JSON
 * (borrowed), and the error of an artifacts copy that failed (NULL: none). */
const struct ward_verdict *ward_execution_verdict(const struct ward_execution *ex);
const struct ward_result *ward_execution_output(const struct ward_execution *ex);
const struct ward_error *ward_execution_artifacts_error(const struct ward_execution *ex);
void ward_execution_ref(struct ward_execution *ex);
void ward_execution_unref(struct ward_execution *ex);

/* --- sessions ---
 * Every request function returns 0 and says what happened in *reply
 * (zeroed first): an error, a body, an execution or a later answer. */

/* A request on a session, as a front end parsed it. */
struct ward_session_call {
	const struct ward_key_info *key;
	const char *id;              /* the session, or NULL */
	const char *command_id;      /* a background command, or NULL */
	const char *body;            /* JSON (or an upload's bytes); NULL: none */
	size_t len;
	bool stream;                 /* events, not one final answer */
	const char *path;            /* files: the path argument as sent, or NULL */
	size_t path_len;             /* its length (a NUL inside is refused) */
	const char *mode;            /* files: an upload's octal mode, or NULL */
};

enum ward_file_op { WARD_FILE_GET, WARD_FILE_PUT, WARD_FILE_DELETE };

int ward_session_create(struct ward_service *svc, const struct ward_session_call *q,
			struct ward_reply *reply);
int ward_session_list(struct ward_service *svc, const struct ward_session_call *q,
		      struct ward_reply *reply);
int ward_session_get(struct ward_service *svc, const struct ward_session_call *q,
		     struct ward_reply *reply);
int ward_session_delete(struct ward_service *svc, const struct ward_session_call *q,
			struct ward_reply *reply);
/* PUT network: a live session's egress allow and deny lists (and limits)
 * replaced for its next connections, within the operator's network policy;
 * audited as session.network. 409 when the session has no egress
 * (network.mode "none" when it was created). */
int ward_session_network(struct ward_service *svc, const struct ward_session_call *q,
			 struct ward_reply *reply);
/* POST execute (exec) or commands: a call (reply->ex), or a background
 * command's start (reply->later). */
int ward_session_call(struct ward_service *svc, const struct ward_session_call *q, bool exec,
		      struct ward_reply *reply);
/* A background command's status, or (kill) its end: reply->later. */
int ward_session_command(struct ward_service *svc, const struct ward_session_call *q, bool kill,
			 struct ward_reply *reply);
/* The files API: reply->later. An upload's body (heap) is taken over when
 * reply->took_body is set; its bytes must have been reserved
 * (ward_service_upload_reserve) and len of them go with it. */
int ward_session_files(struct ward_service *svc, const struct ward_session_call *q,
		       enum ward_file_op op, struct ward_reply *reply);

/* Upload bodies held in memory until whole: within 4 x max_file in all and
 * 2 x max_file per tenant. 0, or -1 with e (503 uploads_busy, 429). */
int ward_service_upload_reserve(struct ward_service *svc, const char *tenant, uint64_t bytes,
				struct ward_service_error *e);
void ward_service_upload_release(struct ward_service *svc, const char *tenant, uint64_t bytes);

/* --- deferred answers --- */

void ward_answer_watch(struct ward_answer *a, const struct ward_sink *sink);
bool ward_answer_done(const struct ward_answer *a);
unsigned ward_answer_status(const struct ward_answer *a);
/* The JSON body (borrowed), or NULL for a file: ward_answer_take_file
 * hands over its bytes (malloc'd) with its sha256 and mode (hex, octal). */
json_t *ward_answer_body(const struct ward_answer *a);
char *ward_answer_take_file(struct ward_answer *a, size_t *len, const char **sha256,
			    const char **mode);
void ward_answer_unref(struct ward_answer *a);

#endif
