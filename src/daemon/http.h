/* src/daemon/http.h — what http.c (libmicrohttpd's callbacks, connections,
 * authentication, the audit of requests) and handlers.c (the route
 * table's handlers and the adapter between the core's replies and events
 * and libmicrohttpd) share. Private to src/daemon. */
#ifndef WARD_DAEMON_HTTP_H
#define WARD_DAEMON_HTTP_H

#include "daemon.h"
#include "routes.h"

struct waiter;
struct mcp_call;

/* One request, from its first callback to its completion. */
struct req {
	struct srv *s;
	struct MHD_Connection *c;
	char *body;
	size_t len, cap;
	uint64_t limit;          /* of the body */
	uint64_t reserved;       /* an upload's body bytes reserved in the core */
	struct ward_service_error refused; /* an upload the core refused to hold */
	bool too_big, answered;
	bool pending;            /* a body is being read: the handler runs at its end */
	struct route_match m;
	const char *url;         /* libmicrohttpd's, for the request's lifetime */
	struct ward_key_info key;
	struct waiter *w;        /* an execution or a later answer it waits for */
	struct mcp_call *mcp;    /* /mcp: a JSON-RPC request waiting for its answer */
};

/* http.c */
int srv_respond_json(struct MHD_Connection *c, unsigned status, json_t *body);
int srv_respond_error(struct MHD_Connection *c, const struct ward_service_error *e);
/* Answers rq with an error (401 and 403 count as denials). */
int answer_error(struct req *rq, unsigned status, const char *code, const char *field,
		 const char *msg);
/* The status of the last answer queued, for the audit line. */
unsigned http_last_status(void);
void http_note_status(unsigned status);
bool http_authenticate(struct req *rq);
void audit_request(struct srv *s, const struct ward_key_info *k, const char *action,
		   const char *method, const char *url, unsigned status);
void audit_denied(struct srv *s, struct MHD_Connection *c, const char *event,
		  const struct ward_key_info *k, const char *method, const char *url,
		  const char *scope);

/* handlers.c */
/* The first call of a request (headers only): routes it, and answers or
 * waits for its body. MHD_YES or MHD_NO. */
int http_first_call(struct req *rq, const char *url, const char *method);
/* A later call without body bytes: the body is whole, or the request was
 * resumed. */
int http_next_call(struct req *rq);
/* Keeps (within its reservation) a piece of the body. False: out of memory. */
bool http_take_body(struct req *rq, const char *data, size_t n);
/* The request is over (client_gone: before its answer was sent). */
void http_req_end(struct req *rq, bool client_gone);

/* mcp-http.c: /mcp, the MCP streamable HTTP transport */
int srv_mcp_handle(struct req *rq);
/* A later call of a request with rq->mcp set (resumed: its answer came). */
int srv_mcp_next(struct req *rq);
/* rq (with rq->mcp) is over: a request still unanswered is cancelled. */
void srv_mcp_req_end(struct req *rq);
/* events.c: GET /v1/events */
int h_events(struct req *rq);

#endif
