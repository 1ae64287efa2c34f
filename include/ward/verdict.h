/* ward/verdict.h — how a run ended, typed, with limits and usage.
 *
 * The library fills this struct; `ward run --json` prints the same fields.
 * Every ending is reported as itself: an OOM kill is never guessed from a
 * SIGKILL, a timeout is never reported as a crash.
 */
#ifndef WARD_VERDICT_H
#define WARD_VERDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ward/error.h"
#include "ward/policy.h"

#ifdef __cplusplus
extern "C" {
#endif

enum ward_status {
	WARD_STATUS_OK,
	WARD_STATUS_ERROR,
	WARD_STATUS_TIMEOUT,
	WARD_STATUS_CPU_TIMEOUT,
	WARD_STATUS_MEMORY_LIMIT,
	WARD_STATUS_PIDS_LIMIT,
	WARD_STATUS_OUTPUT_LIMIT,
	WARD_STATUS_DISK_LIMIT,
	WARD_STATUS_SIGNALED,
	WARD_STATUS_KILLED,
	WARD_STATUS_SETUP_FAILED,
	WARD_STATUS_POLICY_VIOLATION,  /* the advisory lint refused the code */
	/* A new status goes above: the name table (lib/verdict.c) and the
	 * daemon's counters (/metrics) are tied to this count by static
	 * asserts, so it cannot go unnamed or uncounted. */
	WARD_STATUS_COUNT
};

/* "ok", "error", "timeout", ... */
const char *ward_status_name(enum ward_status status);

struct ward_usage {
	uint64_t wall_ms;
	uint64_t cpu_user_ms;
	uint64_t cpu_sys_ms;
	uint64_t peak_memory_bytes;
	uint64_t processes_peak;
	uint64_t forks_refused;      /* forks the pids limit refused (cgroup) */
	uint64_t output_bytes;      /* produced, including what was dropped */
};

/* What the sandbox did on the network (policy network.mode "allowlist"). */
enum { WARD_NET_DENIED_MAX = 16 };
struct ward_net_denial {
	char host[256];             /* the name, or the address as text */
	uint16_t port;
	char reason[128];           /* "not in the allowlist", "private address 10.0.0.1", ... */
};
struct ward_net_usage {
	bool present;               /* false: mode "none", no "network" in the JSON */
	uint64_t connections;       /* allowed connections */
	uint64_t bytes_out;         /* sandbox -> upstream */
	uint64_t bytes_in;          /* upstream -> sandbox */
	uint64_t denied_total;      /* every refusal, including those not listed */
	size_t n_denied;            /* the first WARD_NET_DENIED_MAX, in order */
	struct ward_net_denial denied[WARD_NET_DENIED_MAX];
	const char *limit;          /* "connections", "bytes_out", "bytes_in" once hit, else NULL */
};

struct ward_buffer {
	char *data;                 /* NUL-terminated, may contain other NULs */
	size_t len;
	size_t cap;
};

struct ward_verdict {
	enum ward_status status;
	int exit_code;              /* valid when the program exited */
	int signal;                 /* valid when it was killed by a signal, else 0 */
	const char *limit;          /* which limit was hit ("memory", ...) or NULL */
	uint64_t limit_value;       /* its value, in the limit's unit */
	struct ward_usage usage;
	struct ward_buffer out;     /* captured stdout (capture mode only) */
	struct ward_buffer err;     /* captured stderr (capture mode only) */
	bool stdout_truncated;
	bool stderr_truncated;
	uint32_t layers;            /* bit (1u << enum ward_layer): applied */
	uint32_t degraded;          /* bit (1u << enum ward_layer): degraded */
	char sandbox_id[40];
	struct ward_net_usage network;
	struct ward_error setup;    /* filled when status is SETUP_FAILED */
};

/* Appends n bytes and keeps the buffer NUL-terminated. Returns 0, or -ENOMEM
 * (the buffer is unchanged). */
int ward_buffer_append(struct ward_buffer *b, const void *data, size_t n);

/* The one output cap: counts n more bytes into *total and returns how
 * many of them may be kept under limit (the rest is dropped). Used for
 * commands, kernels' streams, `ward run`, `ward exec` and `ward serve`. */
size_t ward_output_keep(uint64_t *total, uint64_t limit, size_t n);

/* A program's output (which: 1 stdout, 2 stderr) into v's buffers within
 * limit, counted in usage.output_bytes, truncation flagged. Returns the
 * bytes kept (under memory pressure they are counted but dropped). */
size_t ward_verdict_keep(struct ward_verdict *v, int which, const char *buf, size_t n,
			 uint64_t limit);

void ward_verdict_init(struct ward_verdict *v);
void ward_verdict_release(struct ward_verdict *v);

/* The verdict as one JSON object (malloc'ed string, caller frees), or NULL on
 * ENOMEM. */
char *ward_verdict_to_json(const struct ward_verdict *v);

/* The same as a jansson object (new reference), for callers that add to it
 * (the kernels' results, artifacts). Declared with a forward type so that
 * this header does not need jansson. */
struct json_t;
struct json_t *ward_verdict_to_object(const struct ward_verdict *v);

#ifdef __cplusplus
}
#endif
#endif
