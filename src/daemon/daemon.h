/* src/daemon/daemon.h — what the parts of `ward serve` share.
 *
 * One process, one epoll loop (serve.c): libmicrohttpd runs in
 * external-epoll mode inside it, every execution is a set of fds (its
 * sandbox's pipes and pidfd, behind one per-execution epoll fd) in the same
 * loop, and signals arrive through a self-pipe. Nothing here may block on a
 * client or on a sandbox's program: file work goes to worker threads
 * (worker.c); what still runs on the loop, bounded (sandbox setup and
 * teardown, artifact hashing, audit writes), is listed in docs/api.md.
 */
#ifndef WARD_DAEMON_H
#define WARD_DAEMON_H

#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "server/audit.h"
#include "server/keys.h"
#include "ward/kernel.h"
#include "ward/policy.h"
#include "ward/sandbox.h"
#include "ward/verdict.h"

struct MHD_Daemon;
struct MHD_Connection;

/* Settings: the config file's keys, and flags of the same names. */
struct srv_config {
	char *socket;            /* unix socket path; "" or "none": no unix socket */
	char *listen;            /* "127.0.0.1:PORT" or NULL */
	char *keys_file;
	char *audit_log;         /* NULL: no audit log */
	bool audit_full_text;
	bool audit_sync;         /* fdatasync every line (default true) */
	uint64_t max_body;       /* bytes of a request body */
	uint64_t max_header;     /* bytes of a request's headers (MHD memory limit) */
	uint64_t grace_ms;       /* SIGTERM: how long running executions may finish */
	uint64_t max_executions; /* running at once, all tenants */
	uint64_t max_per_tenant; /* running at once, per tenant */
	char *policy_file;       /* the default policy (JSON) */
	json_t *policy;          /* the config file's "policy" object */
	char *runners;           /* runners directory, NULL: found next to ward */
	/* sessions */
	char *state_dir;         /* what must survive a crash of the daemon */
	uint64_t session_ttl_ms; /* idle TTL when a session gives none */
	uint64_t max_session_ttl_ms;
	uint64_t max_sessions;   /* all tenants */
	uint64_t max_sessions_per_tenant;
	uint64_t tenant_memory;  /* bytes: memory limits of a tenant's live sandboxes */
	uint64_t max_file;       /* bytes of one file moved through the files API */
	json_t *tenants;         /* per-tenant overrides: {"t": {"max_per_tenant": n, ...}} */
	/* connections */
	uint64_t max_connections;     /* per listener (MHD's connection limit) */
	uint64_t max_per_address;     /* TCP: per client address */
	uint64_t max_unauthenticated; /* without a valid key yet; the oldest goes */
	uint64_t header_timeout_ms;   /* to authenticate, from the accept */
	uint64_t idle_timeout_ms;     /* an idle connection (MHD's timeout) */
};

enum { SRV_MAX_TENANTS = 256, SRV_N_BUCKETS = 11, SRV_N_STATUS = WARD_STATUS_COUNT };

struct srv_tenant_count {
	char tenant[WARD_KEY_TENANT_MAX + 1];
	uint64_t executions;
	uint64_t denials;
	unsigned running;
	unsigned sessions;
	uint64_t memory;   /* reserved: memory limits of its live sandboxes */
	uint64_t held;     /* bytes the daemon holds for it (unread streams) */
	uint64_t used_ns;  /* last looked up: the idle one used least recently is freed */
};

struct srv_metrics {
	uint64_t by_status[SRV_N_STATUS];
	uint64_t buckets[SRV_N_BUCKETS];   /* cumulative counts per le */
	uint64_t duration_count;
	double duration_sum;
	uint64_t requests;
	uint64_t denials;                  /* 401 and 403 answers */
	uint64_t bad_requests;             /* other 4xx */
	struct srv_tenant_count tenants[SRV_MAX_TENANTS];
	size_t n_tenants;
	uint64_t tenants_freed;            /* idle entries given to another tenant */
	uint64_t connections_evicted;      /* closed unauthenticated (bound or deadline) */
};

struct execution;
struct session;
struct srv_pool;

struct srv {
	struct srv_config cfg;
	struct ward_policy policy;        /* the default policy */
	int epfd, sigfd;
	struct MHD_Daemon *mhd[2];
	int mhd_fd[2];                    /* their epoll fds */
	int n_mhd;
	bool unix_bound;
	/* keys: reloaded when the file changes */
	struct ward_keystore *keys;
	struct timespec keys_mtime;
	ino_t keys_ino;
	off_t keys_size;
	struct ward_audit *audit;
	struct execution *execs;          /* running or finishing */
	unsigned running;                 /* one-shot sandboxes */
	struct session *sessions;         /* live ones and tombstones */
	unsigned n_sessions;              /* live ones */
	bool stopping;
	uint64_t stop_deadline_ns;
	bool killed_all;
	struct srv_metrics m;
	struct srv_pool *pool;            /* worker threads (worker.c) */
	const char *openapi;              /* the OpenAPI document */
	size_t openapi_len;
};

/* config.c */
void srv_config_defaults(struct srv_config *c);
void srv_config_release(struct srv_config *c);
/* Parses flags (and the file --config names) into c. Returns 0, 1 for
 * --help (printed), or -1 after printing the error. */
int srv_config_parse(struct srv_config *c, int argc, char **argv);

/* http.c */
/* Starts the HTTP daemons: on unix_fd (a listening socket, or -1) and on
 * cfg.listen. 0 or -1 (printed). */
int srv_http_start(struct srv *s, int unix_fd);
void srv_http_stop(struct srv *s);
/* Loads the keys file again when it changed (mtime, inode, size). */
void srv_keys_reload(struct srv *s);
void srv_http_run(struct srv *s);
int srv_http_timeout(struct srv *s);
/* Stops accepting: the listening sockets close, open connections stay. */
void srv_http_quiesce(struct srv *s);
unsigned srv_http_connections(struct srv *s);
/* Answers with {"error": {code, message, field}}; field may be NULL. */
int srv_respond_error(struct MHD_Connection *c, unsigned status, const char *code,
		      const char *field, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
int srv_respond_json(struct MHD_Connection *c, unsigned status, json_t *body);
/* For an answer queued without srv_respond_json: its status, for the audit. */
void srv_note_status(unsigned status);

/* execution.c */
struct exec_request {
	int lang;                  /* enum ward_lang, or -1 for a command */
	char *code;
	char **argv;               /* NULL-terminated */
	struct ward_file *files;
	size_t n_files;
	struct ward_policy policy;
	bool stream;
};
void exec_request_release(struct exec_request *r);
/* Parses and checks a body (already within the size and depth limits)
 * onto a copy of the default policy. 0, or -1 with *status and an error
 * body in *error (new reference). */
int exec_request_parse(struct srv *s, const char *body, size_t len, struct exec_request *r,
		       unsigned *status, json_t **error);

/* The policy overrides of a request (pol may be NULL) onto a copy of the
 * default policy: checked, never above the daemon's limits. */
int srv_parse_policy(struct srv *s, struct ward_policy *p, json_t *pol, unsigned *status,
		     json_t **error);
json_t *srv_error_body(const char *code, const char *field, const char *msg);
/* A request body that must be a JSON object with only the known keys: the
 * object (new reference), or NULL with a 400 and its error body. */
json_t *srv_parse_object(const char *body, size_t len, const char *const *known, size_t n_known,
			 unsigned *status, json_t **error);
/* Seconds (a number above 0, at most max_ms) into ms; 0 or -1. */
int srv_parse_seconds(json_t *v, uint64_t max_ms, uint64_t *out);
/* A relative path inside /workspace: no "..", ".", empty components,
 * control characters or leading "/"; at most 1000 bytes. */
bool srv_path_ok(const char *p);

/* Starts an execution (takes over r's contents). 0 or -errno with err. */
int exec_start(struct srv *s, struct exec_request *r, const struct ward_key_info *key,
	       struct execution **out, struct ward_error *err);
/* Puts the fds to watch now into epfd (reg: what is there), from a
 * ward_*_pollfds; returns when to step anyway (0: only on an fd). */
uint64_t srv_watch(int epfd, int reg[WARD_KERNEL_NFDS], const struct pollfd fds[WARD_KERNEL_NFDS],
		   int t);
/* The loop's part: step executions whose fds or timers are due. */
void exec_dispatch(struct srv *s, struct execution *ex);
/* ms until some execution needs a step anyway (-1: none). */
int exec_timeout(struct srv *s);
void exec_tick(struct srv *s);
void exec_cancel(struct execution *ex);
struct execution *exec_find(struct srv *s, const char *id);
const char *exec_id(const struct execution *ex);
const char *exec_tenant(const struct execution *ex);
bool exec_done(const struct execution *ex);
/* The final JSON (borrowed), once done. */
json_t *exec_result(struct execution *ex);
/* Connection hand-off: a request that waits for ex registers itself. */
void exec_attach(struct execution *ex, struct MHD_Connection *c, bool stream);
void exec_detach(struct execution *ex, bool client_gone);
/* Streams: copies buffered NDJSON out; 0 with nothing yet, -1 at the end. */
ssize_t exec_read_stream(struct execution *ex, char *buf, size_t max, bool *suspend);
void exec_ref(struct execution *ex);
void exec_unref(struct execution *ex);
/* The waiting client hung up: cancel. */
void exec_client_gone(struct execution *ex);
void exec_kill_all(struct srv *s);

/* Session-backed executions (session.c drives them). */
enum exec_kind { EXK_ONESHOT, EXK_EXECUTE, EXK_COMMAND };
struct execution *exec_new_in_session(struct srv *s, struct session *sess,
				      const struct ward_key_info *key, enum exec_kind kind,
				      const char *lang, const char *context,
				      const struct ward_policy *p, bool stream);
/* One message of the execution's request. */
void exec_session_message(struct execution *ex, json_t *m);
/* The reply arrived (reply set), or the session's sandbox ended (dead set:
 * its verdict). before/after: the sandbox's counters around the call. */
void exec_session_end(struct execution *ex, json_t *reply, const struct ward_verdict *dead,
		      const struct ward_sandbox_stats *before,
		      const struct ward_sandbox_stats *after);
const char *exec_session_request(const struct execution *ex);
void exec_set_session_request(struct execution *ex, const char *id);
uint64_t exec_started_ns(const struct execution *ex);

/* session.c */
struct sess_quota {
	uint64_t max_per_tenant, max_sessions_per_tenant, tenant_memory;
};
void srv_tenant_quota(struct srv *s, const char *tenant, struct sess_quota *q);
/* An answer that comes later (from a session's agent): the request's
 * connection is suspended until it is filled. */
struct deferred {
	struct deferred *next;      /* in its session's list */
	int refs;
	bool done;
	unsigned status;
	json_t *body;
	struct MHD_Connection *c;   /* NULL once the client is gone */
	struct MHD_Response *resp;  /* set: the answer instead of status/body */
	char req_id[WARD_KERNEL_ID_SIZE];
	int kind;
	uint64_t deadline_ns;
	json_t *err;                /* an error the agent sent before its reply */
};
struct deferred *deferred_new(struct MHD_Connection *c);
/* Fills it (takes body) and wakes the client. */
void deferred_answer(struct deferred *d, unsigned status, json_t *body);
void deferred_unref(struct deferred *d);

struct route_out {
	struct execution *ex;       /* a call: wait for it, or stream it */
	bool stream;
	struct deferred *d;         /* an answer to wait for */
	bool took_body;             /* the body (and its reserved bytes) now belong to a job */
};
/* A request on /v1/sessions..., as the route table matched it. */
struct sess_call {
	struct MHD_Connection *c;
	const struct ward_key_info *key;
	const char *id;              /* {id}, or NULL */
	const char *command_id;      /* {command_id}, or NULL */
	const char *body;            /* NULL: none (GET, DELETE) */
	size_t len;
};
enum file_op { OP_GET, OP_PUT, OP_DELETE };
/* Each answers q->c now, or fills out (an execution or a deferred answer). */
int session_create(struct srv *s, const struct sess_call *q, struct route_out *out);
int session_list(struct srv *s, const struct sess_call *q, struct route_out *out);
int session_get(struct srv *s, const struct sess_call *q, struct route_out *out);
int session_delete(struct srv *s, const struct sess_call *q, struct route_out *out);
/* POST .../execute (exec) or .../commands. */
int session_call(struct srv *s, const struct sess_call *q, bool exec, struct route_out *out);
/* GET (status) or DELETE (kill) .../commands/{command_id}. */
int session_command_status(struct srv *s, const struct sess_call *q, bool kill,
			   struct route_out *out);
int session_files(struct srv *s, const struct sess_call *q, enum file_op op, struct route_out *out);
void session_dispatch(struct srv *s, struct session *se);
int session_timeout(struct srv *s);
void session_tick(struct srv *s);
void session_interrupt(struct session *se, const char *reason);
void session_destroy_all(struct srv *s, const char *reason);
void session_release_all(struct srv *s);
/* Start: sandboxes a killed daemon left behind are removed, their
 * sessions marked lost. 0 or -1 (printed). */
int session_recover(struct srv *s);
/* files.c: the files API on a live session's sandbox. The work runs on a
 * worker: the answer comes through out->d. An upload's body (heap, as
 * http.c holds it) is taken over when out->took_body is set; of the bytes
 * reserved for it (files_upload_reserve), len go with it. */
int files_route(struct srv *s, struct MHD_Connection *c, struct session *se,
		enum file_op op, char *body, size_t len, struct route_out *out);
/* Upload bodies are held in memory until they are whole: within 4 ×
 * max_file in all and 2 × max_file per tenant. 0, or -ENOSPC (the
 * daemon's share is used: 503) or -EDQUOT (the tenant's: 429). */
int files_upload_reserve(struct srv *s, const char *tenant, uint64_t bytes);
void files_upload_release(struct srv *s, const char *tenant, uint64_t bytes);
/* Answers a refused reservation (rc from files_upload_reserve). */
int files_upload_refuse(struct MHD_Connection *c, int rc, struct srv *s);
struct ward_sandbox *session_sandbox(struct session *se);
const struct ward_key_info *session_owner(const struct session *se);
const char *session_id(const struct session *se);
void session_touch(struct session *se);

/* worker.c: slow work off the loop. A job's run() is called on a worker
 * thread and may touch only what the job owns; done() is called on the
 * loop afterwards (also, with cancelled set and run() never called, when
 * the daemon stops) and frees the job. */
struct srv_job {
	struct srv_job *next;
	void (*run)(struct srv_job *j);
	void (*done)(struct srv *s, struct srv_job *j);
	char tenant[WARD_KEY_TENANT_MAX + 1];
	bool cancelled;
};
int srv_workers_start(struct srv *s);
void srv_workers_stop(struct srv *s);
/* Queues j: 0, -EAGAIN (the daemon's queue is full) or -EUSERS (the
 * tenant's share is). */
int srv_job_submit(struct srv *s, struct srv_job *j);
unsigned srv_job_limit(bool per_tenant);
void srv_workers_dispatch(struct srv *s);

/* metrics.c */
void metrics_verdict(struct srv *s, const char *tenant, enum ward_status st, uint64_t wall_ms);
void metrics_denial(struct srv *s, const char *tenant);
/* A tenant's entry, made (freeing an idle one if the table is full) or
 * NULL when every entry is busy; _find never makes one. */
struct srv_tenant_count *metrics_tenant(struct srv *s, const char *tenant);
struct srv_tenant_count *metrics_tenant_find(struct srv *s, const char *tenant);
char *metrics_render(struct srv *s, size_t *len);

/* audit glue (serve.c): never fails the request */
void srv_audit(struct srv *s, const char *event, json_t *fields);

/* loop.c: watches in the main epoll */
enum watch_kind { WATCH_MHD, WATCH_SIGNAL, WATCH_EXEC, WATCH_CLIENT, WATCH_SESSION, WATCH_WORKER };
struct watch {
	enum watch_kind kind;
	void *ptr;
	int idx;
};
int srv_loop(struct srv *s);

#endif
