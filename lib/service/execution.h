/* lib/service/execution.h — one execution, as execution.c (one-shots),
 * exec-stream.c (its NDJSON queue and sink) and exec-session.c (a call in
 * a session) share it. Private to lib/service. */
#ifndef WARD_SERVICE_EXECUTION_H
#define WARD_SERVICE_EXECUTION_H

#include "base/json-stream.h"
#include "internal.h"

enum ex_state { EX_RUNNING, EX_SHUTDOWN, EX_DRAIN, EX_DONE };

struct ward_execution {
	struct ward_execution *next;
	struct ward_service *s;
	struct timespec call_since;  /* a call in a session: when it began (for its files) */
	int refs;
	char id[40];
	enum exec_kind kind;
	struct session *sess;    /* a call in a session: no sandbox of its own */
	char req_id[WARD_KERNEL_ID_SIZE];
	char lang[16], context[72];
	uint64_t mem;            /* reserved against the tenant's memory quota */
	struct ward_key_info key;
	struct exec_request req;
	struct ward_kernel *k;
	struct ward_sandbox *sb;
	enum ex_state state;
	int epfd;
	struct watch w;
	int reg[WARD_KERNEL_NFDS];
	uint64_t wake_ns, start_ns;
	char digest[WARD_AUDIT_HEX_SIZE];
	struct ward_result out;  /* a kernel's messages, gathered (lib/kernel/result.c) */
	bool out_eof, err_eof;   /* command: its pipes */
	bool died;
	size_t cell;             /* the cell in flight */
	bool art_failed;         /* an artifacts copy failed: art_err says why */
	struct ward_error art_err;
	struct ward_verdict v;
	json_t *final;
	/* who listens, and what it has not read yet */
	struct ward_sink sink;
	bool stream;
	char *sbuf;              /* unread NDJSON: at most stream_limit() */
	size_t slen, scap, soff;
	uint64_t dropped_events, dropped_bytes;
	bool verdict_due;        /* the verdict event, once the rest is read */
	struct ward_json_reader *verdict; /* that event, being written as it is read */
	size_t held;             /* counted against the tenant (exec_account()) */
};

/* execution.c */
struct ward_execution *exec_new(struct ward_service *s, struct exec_request *r,
			   const struct ward_key_info *key);
/* What every ending shares: the id, the accounting, the last event. */
void exec_finish_common(struct ward_execution *ex);
/* The kernel's messages into the result (and events when streaming). */
void exec_on_message(json_t *m, void *ctx);

#endif
