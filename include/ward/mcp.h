/* include/ward/mcp.h — the Model Context Protocol over the service core.
 *
 * One struct ward_mcp is one MCP conversation with one client: a `ward mcp`
 * process's stdin/stdout, or one MCP session (Mcp-Session-Id) of the
 * daemon's `/mcp` endpoint. It speaks JSON-RPC 2.0 as the MCP specification
 * says (2025-11-25 and 2025-06-18, negotiated at initialize): initialize,
 * ping, tools/list, tools/call, notifications/initialized and
 * notifications/cancelled. Its tools (run_python_code, run_code,
 * create_session, close_session, write_file, read_file, list_files) are
 * thin: each becomes a call of the service core (include/ward/service.h)
 * with the conversation's key, exactly as an HTTP request would, and the
 * core's verdict or error becomes the tool's result. Nothing here knows a
 * transport: the front end reads messages, hands them in, and writes what
 * comes out of the peer's send callback.
 *
 * Thread rule: as the core's — everything on the front end's loop thread;
 * send is called from inside ward_mcp_* calls or from the core's dispatch.
 */
#ifndef WARD_MCP_H
#define WARD_MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct ward_service;
struct ward_key_info;
struct ward_mcp;

enum {
	WARD_MCP_MESSAGE_MAX = 16 << 20, /* bytes of one incoming message at most */
	WARD_MCP_PENDING_MAX = 64,       /* requests in flight per conversation */
};

/* Where a conversation's outgoing messages go. send gets one JSON-RPC
 * message (a response or a notification), borrowed for the call; related
 * is the id of the request it answers or belongs to (borrowed; NULL for a
 * message tied to no request), which an HTTP front end uses to pick the
 * response stream. */
struct ward_mcp_peer {
	void *ctx;
	void (*send)(void *ctx, json_t *msg, json_t *related);
};

/* A conversation for key (copied: its tenant and scopes decide what the
 * tools may do; session tools need WARD_SCOPE_SESSIONS, file tools
 * WARD_SCOPE_FILES too). 0, or -1 without memory. */
int ward_mcp_new(struct ward_service *svc, const struct ward_key_info *key,
		 const struct ward_mcp_peer *peer, struct ward_mcp **out);

/* One incoming message as bytes (a stdio line): unparsable JSON is
 * answered with -32700, everything else goes to ward_mcp_handle. */
void ward_mcp_receive(struct ward_mcp *m, const char *buf, size_t len);
/* One incoming message, parsed (borrowed). A request is answered through
 * send, at once or later; a notification or a response is consumed. */
void ward_mcp_handle(struct ward_mcp *m, json_t *msg);

/* Requests received and not answered yet. */
size_t ward_mcp_pending(const struct ward_mcp *m);
/* The protocol version agreed at initialize, or NULL before it. */
const char *ward_mcp_protocol_version(const struct ward_mcp *m);

/* Cancels every request in flight (their executions are cancelled on the
 * core) and frees the conversation; send is not called again. NULL: none. */
void ward_mcp_free(struct ward_mcp *m);

#endif
