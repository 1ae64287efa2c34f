/* lib/service/internal.h — what the parts of the service core share.
 *
 * One loop thread owns everything here. The core's fds (each execution's
 * and session's own epoll fd, the workers' eventfd) sit in svc->epfd,
 * which the front end watches (ward_service_fd). Nothing here knows a
 * transport: answers are struct ward_reply values or events to a
 * struct ward_sink (include/ward/service.h). Nothing may block on a
 * client or on a sandbox's program: file work goes to the worker threads
 * (worker.c); what still runs on the loop, bounded (sandbox setup and
 * teardown, a pooled kernel's claim, artifact hashing, audit writes), is
 * listed in docs/api.md. The warm pool's refills and the teardown of
 * finished one-shots run on the workers too (pool.c).
 */
#ifndef WARD_SERVICE_INTERNAL_H
#define WARD_SERVICE_INTERNAL_H

#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "server/audit.h"
#include "server/keys.h"
#include "ward/kernel.h"
#include "ward/policy.h"
#include "ward/result.h"
#include "ward/sandbox.h"
#include "ward/service.h"
#include "ward/verdict.h"

enum { SVC_MAX_TENANTS = 256, SVC_N_BUCKETS = 11, SVC_N_STATUS = WARD_STATUS_COUNT };

struct svc_tenant_count {
	char tenant[WARD_KEY_TENANT_MAX + 1];
	uint64_t executions;
	uint64_t denials;
	unsigned running;
	unsigned sessions;
	uint64_t memory;   /* reserved: memory limits of its live sandboxes */
	uint64_t held;     /* bytes the daemon holds for it (unread streams) */
	uint64_t used_ns;  /* last looked up: the idle one used least recently is freed */
};

struct svc_metrics {
	uint64_t by_status[SVC_N_STATUS];
	uint64_t buckets[SVC_N_BUCKETS];   /* cumulative counts per le */
	uint64_t duration_count;
	double duration_sum;
	uint64_t requests;
	uint64_t denials;                  /* refused for authentication or scope */
	uint64_t bad_requests;             /* other refusals */
	struct svc_tenant_count tenants[SVC_MAX_TENANTS];
	size_t n_tenants;
	uint64_t tenants_freed;            /* idle entries given to another tenant */
	uint64_t connections_evicted;      /* closed unauthenticated (bound or deadline) */
	uint64_t egress_events_dropped;    /* proxy events the ring had no room for */
};

struct svc_pool;
struct svc_warm;
struct svc_egress;
struct session;

struct ward_service {
	struct ward_service_config cfg;
	struct ward_policy policy;        /* the default policy */
	int epfd;                         /* the core's watches (ward_service_fd) */
	/* keys: reloaded when the file changes */
	struct ward_keystore *keys;
	struct timespec keys_mtime;
	ino_t keys_ino;
	off_t keys_size;
	struct ward_audit *audit;
	struct ward_execution *execs;          /* running or finishing */
	unsigned running;                 /* one-shot sandboxes */
	struct session *sessions;         /* live ones and tombstones */
	unsigned n_sessions;              /* live ones */
	bool stopping;
	uint64_t stop_deadline_ns;
	bool killed_all;
	int state_lock;                   /* flock on state_dir/lock, -1 */
	struct svc_metrics m;
	struct svc_pool *pool;            /* worker threads (worker.c) */
	struct svc_warm *warm;            /* prepared kernels (pool.c), or NULL */
	struct svc_egress *egress;        /* the proxy and its events (egress.c), or NULL */
	/* The zygote imported the runners as they were when it started: once
	 * the pool sees them change, python kernels start cold (pool.c). */
	bool zygote_stale;
	unsigned tearing_down;            /* finished sandboxes being ended */
	struct svc_job *teardowns;        /* ... not yet given to a worker */
	/* upload bodies held in memory (files.c) */
	uint64_t uploads_total;
	struct { char tenant[WARD_KEY_TENANT_MAX + 1]; uint64_t bytes; } uploads[64];
	/* GET /v1/events: at most cfg.max_event_subscribers (events.c) */
	struct ward_events_sub *event_subs;
};

/* Watches in svc->epfd: data.ptr points at one. */
enum watch_kind { WATCH_EXEC, WATCH_SESSION, WATCH_WORKER, WATCH_EGRESS };
struct watch {
	enum watch_kind kind;
	void *ptr;
};

/* egress.c: the proxy (ward/egress.h) and its events */
/* A request's "credentials" (v may be NULL: none) into *out: 0, or -1 with
 * e (400 naming the field; 403 when the key lacks the scope). */
int svc_parse_credentials(const struct ward_key_info *key, json_t *v,
			  struct ward_egress_credential **out, size_t *n,
			  struct ward_service_error *e);
struct ward_egress_stats;
int svc_egress_start(struct ward_service *s);
void svc_egress_stop(struct ward_service *s);
void svc_egress_dispatch(struct ward_service *s);
/* The proxy sandboxes attach to, or NULL (then an allowlist fails closed). */
struct ward_egress *svc_egress(struct ward_service *s);
void svc_egress_stats(struct ward_service *s, struct ward_egress_stats *st);

/* errors and replies (service.c) */
/* Fills r with an error; returns 0 (the request was answered). */
int svc_reply_error(struct ward_reply *r, unsigned status, const char *code, const char *field,
		    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Fills r with status and body (taken); 0. */
int svc_reply(struct ward_reply *r, unsigned status, json_t *body);
/* {"error": ...} of a code, field and message. */
json_t *svc_error_body(const char *code, const char *field, const char *msg);
void svc_audit(struct ward_service *s, const char *event, json_t *fields);

/* events.c: the event stream's subscribers */
bool svc_events_wanted(const struct ward_service *s);
/* Queues line (taken) for every subscriber whose tenant filter fields match. */
void svc_events_publish(struct ward_service *s, json_t *fields, char *line);
void svc_events_close(struct ward_service *s);

/* request.c */
struct exec_request {
	int lang;                  /* enum ward_lang, or -1 for a command */
	char **cells;              /* the code, one cell or more (a program's run) */
	size_t n_cells;
	bool keep_going;           /* later cells run after one failed */
	char *call_source, *call_filename, *call_function; /* a call instead of cells */
	json_t *call_args;
	json_t *globals;           /* "globals": names set before the code runs, or NULL */
	bool inline_artifacts;     /* "artifacts": {"inline": true}: contents in the verdict */
	uint64_t inline_max;       /* ... within this many bytes in all (the operator's cap wins) */
	char *artifacts_dir;       /* copy-out destination (a program's run), or NULL */
	char **argv;               /* NULL-terminated */
	struct ward_file *files;
	size_t n_files;
	struct ward_policy policy;
	bool stream;               /* NDJSON for the listener */
	bool events;               /* the builder's events, as objects, to the sink */
	bool anonymous;            /* no execution_id in the final JSON */
	struct ward_egress_credential *creds; /* "credentials": the sandbox's own rules */
	size_t n_creds;
};
void exec_request_release(struct exec_request *r);
/* Parses and checks a body (already within the size and depth limits)
 * onto a copy of the default policy. 0, or -1 with e (a 400). */
int exec_request_parse(struct ward_service *s, const struct ward_key_info *key, const char *body,
		       size_t len, struct exec_request *r, struct ward_service_error *e);
/* The policy overrides of a request (pol may be NULL) onto a copy of the
 * default policy: checked, only ever tighter. */
int svc_parse_policy(struct ward_service *s, struct ward_policy *p, json_t *pol,
		     struct ward_service_error *e);
/* A request body that must be a JSON object with only the known keys: the
 * object (new reference), or NULL with a 400 in e. */
json_t *svc_parse_object(const char *body, size_t len, const char *const *known,
			 size_t n_known, struct ward_service_error *e);
/* Takes over a program's spec (include/ward/service.h) as a request. */
int exec_request_from_spec(struct exec_request *r, struct ward_exec_spec *spec);
/* Seconds (a number above 0, at most max_ms) into ms; 0 or -1. */
int svc_parse_seconds(json_t *v, uint64_t max_ms, uint64_t *out);
/* A relative path inside /workspace (the library's one rule). */
bool srv_path_ok(const char *p);
/* A body's "function" and "args" (function mode) for language lang: 0
 * (*function set, or NULL when the body has none), or -1 with e naming
 * the field. */
int svc_parse_function(json_t *root, int lang, const char **function, json_t **args,
		       struct ward_service_error *e);
/* A body's "globals" (v may be NULL: none) for language lang: 0, or -1
 * with e naming the field (the key, for a bad name). */
int svc_parse_globals(json_t *v, int lang, struct ward_service_error *e);

/* admission.c: quotas, checked before a sandbox is made */
struct svc_quota {
	uint64_t max_per_tenant, max_sessions_per_tenant, tenant_memory;
};
void svc_tenant_quota(struct ward_service *s, const char *tenant, struct svc_quota *q);
/* A one-shot for tenant: 0, or -1 with e (503, 429). */
int svc_admit_execution(struct ward_service *s, const char *tenant, struct ward_service_error *e);
/* Its memory, once its policy is known: 0 or -1 with e (429). */
int svc_admit_memory(struct ward_service *s, const char *tenant, uint64_t memory,
		     struct ward_service_error *e);
/* A new session of memory bytes: 0 or -1 with e. */
int svc_admit_session(struct ward_service *s, const char *tenant, uint64_t memory,
		      struct ward_service_error *e);

/* execution.c */
/* Starts an execution (takes over r's contents). 0 or -errno with err. */
int exec_start(struct ward_service *s, struct exec_request *r, const struct ward_key_info *key,
	       struct ward_execution **out, struct ward_error *err);
/* Puts the fds to watch now into epfd (reg: what is there), from a
 * ward_*_pollfds; returns when to step anyway (0: only on an fd). */
uint64_t svc_watch(int epfd, int reg[WARD_KERNEL_NFDS], const struct pollfd fds[WARD_KERNEL_NFDS],
		   int t);
void exec_dispatch(struct ward_service *s, struct ward_execution *ex);
int exec_timeout(struct ward_service *s);
void exec_tick(struct ward_service *s);
struct ward_execution *exec_find(struct ward_service *s, const char *id);
const char *exec_tenant(const struct ward_execution *ex);
void exec_kill_all(struct ward_service *s);
/* exec-stream.c: the bounded NDJSON queue and the sink */
void exec_emit(struct ward_execution *ex, json_t *ev);
void exec_notify(struct ward_execution *ex, enum ward_event_kind kind);
void exec_account(struct ward_execution *ex, size_t held);
void exec_stream_release(struct ward_execution *ex);

/* Session-backed executions (exec-session.c). */
enum exec_kind { EXK_ONESHOT, EXK_EXECUTE, EXK_CALL, EXK_COMMAND };
struct ward_execution *exec_new_in_session(struct ward_service *s, struct session *sess,
				      const struct ward_key_info *key, enum exec_kind kind,
				      const char *lang, const char *context,
				      const struct ward_policy *p, bool stream);
/* One message of the execution's request. */
void exec_session_message(struct ward_execution *ex, json_t *m);
/* The reply arrived (reply set), or the session's sandbox ended (dead set:
 * its verdict). before/after: the sandbox's counters around the call. */
void exec_session_end(struct ward_execution *ex, json_t *reply, const struct ward_verdict *dead,
		      const struct ward_sandbox_stats *before,
		      const struct ward_sandbox_stats *after);
/* The reply of an execute or a call arrived: its files are listed on a
 * worker and the call ends then (the session stays busy meanwhile); true
 * when that was done, false when the caller ends it now (a command, or no
 * worker to take it). */
bool exec_session_defer(struct ward_execution *ex, json_t *reply,
			const struct ward_sandbox_stats *before,
			const struct ward_sandbox_stats *after);
const char *exec_session_request(const struct ward_execution *ex);
void exec_set_session_request(struct ward_execution *ex, const char *id);
uint64_t exec_started_ns(const struct ward_execution *ex);

/* answer.c: an answer that comes later (from a session's agent, or a
 * worker). The requester and the one who fills it each hold a reference. */
struct ward_answer {
	struct ward_answer *next;   /* in its session's list */
	int refs;
	bool done;
	unsigned status;
	json_t *body;
	char *file;                 /* a download's bytes (with body NULL) */
	size_t file_len;
	char sha256[65], mode[8];
	struct ward_sink sink;
	char req_id[WARD_KERNEL_ID_SIZE];
	int kind;
	uint64_t deadline_ns;
	json_t *err;                /* an error the agent sent before its reply */
};
struct ward_answer *deferred_new(void);
/* Fills it (takes body) and tells its sink. */
void deferred_answer(struct ward_answer *d, unsigned status, json_t *body);
void deferred_unref(struct ward_answer *d);

/* sessions (session.c, agent.c, calls.c, ttl.c, state.c) */
void session_dispatch(struct ward_service *s, struct session *se);
int session_timeout(struct ward_service *s);
void session_tick(struct ward_service *s);
void session_interrupt(struct session *se, const char *reason);
void session_destroy_all(struct ward_service *s, const char *reason);
void session_release_all(struct ward_service *s);
int session_recover(struct ward_service *s);
struct ward_sandbox *session_sandbox(struct session *se);
const struct ward_key_info *session_owner(const struct session *se);
const char *session_id(const struct session *se);
void session_touch(struct session *se);

/* files.c: the files API on a live session's sandbox, on a worker */
int files_route(struct ward_service *s, const struct ward_session_call *q, struct session *se,
		enum ward_file_op op, struct ward_reply *out);

/* worker.c: slow work off the loop. A job's run() is called on a worker
 * thread and may touch only what the job owns; done() is called on the
 * loop afterwards (also, with cancelled set and run() never called, when
 * the core stops) and frees the job. */
struct svc_job {
	struct svc_job *next;
	void (*run)(struct svc_job *j);
	void (*done)(struct ward_service *s, struct svc_job *j);
	char tenant[WARD_KEY_TENANT_MAX + 1];
	bool cancelled;
};
int svc_workers_start(struct ward_service *s);
void svc_workers_stop(struct ward_service *s);
/* Queues j: 0, -EAGAIN (the core's queue is full) or -EUSERS (the
 * tenant's share is). */
int svc_job_submit(struct ward_service *s, struct svc_job *j);
unsigned svc_job_limit(bool per_tenant);
void svc_workers_dispatch(struct ward_service *s);

/* metrics.c */
void metrics_verdict(struct ward_service *s, const char *tenant, enum ward_status st,
		     uint64_t wall_ms);
/* A tenant's entry, made (freeing an idle one if the table is full) or
 * NULL when every entry is busy; _find never makes one. */
struct svc_tenant_count *metrics_tenant(struct ward_service *s, const char *tenant);
struct svc_tenant_count *metrics_tenant_find(struct ward_service *s, const char *tenant);

/* pool.c: the warm pool, and the teardown of finished kernels. Counters
 * per language. */
struct svc_warm_stats {
	uint64_t hits, misses, refills, retired, died, failed;
	unsigned size;                     /* ready now */
	uint64_t memory;                   /* memory limits of pooled and filling ones */
};
/* A claim's files are written on the loop: a request with more bytes of
 * files than this starts cold (its files written by the sandbox's init). */
enum { WARM_CLAIM_MAX_BYTES = 256 << 10 };
int warm_start(struct ward_service *s);
void warm_stop(struct ward_service *s);
/* The zygote for new python kernels: cfg.zygote, or NULL once stale. */
struct ward_zygote *svc_zygote(const struct ward_service *s);  /* discards every entry; no refill after */
void warm_free(struct ward_service *s);
void warm_refill(struct ward_service *s);
/* A prepared kernel for r (after admission), unclaimed; NULL: a miss. */
struct ward_kernel *warm_take(struct ward_service *s, const struct exec_request *r);
/* Retires entries while pooled and running sandboxes exceed max_executions. */
void warm_make_room(struct ward_service *s);
unsigned warm_live(const struct ward_service *s);
void warm_tick(struct ward_service *s);
int warm_timeout(struct ward_service *s);
void warm_stats(const struct ward_service *s, int lang, struct svc_warm_stats *st);
/* Ends a kernel whose verdict is out (kill, reap, cgroup) on a worker, or
 * on the loop when none is free; _flush (the next dispatch) hands them
 * over, after the front end sent what the verdict answered. */
void svc_teardown(struct ward_service *s, struct ward_kernel *k);
void svc_teardown_flush(struct ward_service *s);

/* state.c: the state directory */
void svc_state_close(struct ward_service *s);

#endif
