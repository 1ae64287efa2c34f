/* lib/mcp/internal.h — what the protocol (mcp.c) and the tools (tools.c)
 * share. Nothing here knows a transport; nothing here decides what the
 * core decides (quotas, paths, verdicts): a tool only builds the request
 * the HTTP API would get and turns the core's answer into a tool result. */
#ifndef WARD_MCP_INTERNAL_H
#define WARD_MCP_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "server/keys.h"
#include "ward/mcp.h"
#include "ward/service.h"

/* JSON-RPC 2.0's error codes (and MCP's use of them). */
enum {
	MCP_PARSE_ERROR = -32700,
	MCP_INVALID_REQUEST = -32600,
	MCP_METHOD_NOT_FOUND = -32601,
	MCP_INVALID_PARAMS = -32602,
	MCP_INTERNAL_ERROR = -32603,
};

enum {
	MCP_ID_MAX = 256,      /* bytes of a string request id */
	MCP_QUOTE_MAX = 64,    /* bytes of a client's name quoted in a message */
	MCP_PATH_MAX = 1024,   /* bytes of a file tool's path (the core allows 1000) */
	MCP_DEPTH_MAX = 64,    /* JSON nesting of one message */
};

/* A JSON-RPC error before it is sent: code, message, and the parameter at
 * fault ("" for none; sent as data.field). */
struct mcp_rpc_error {
	int code;
	char field[64];
	char message[512];
};

int mcp_rpc_fail(struct mcp_rpc_error *e, int code, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* A client's string as a message may quote it: at most MCP_QUOTE_MAX
 * bytes, anything but printable ASCII as '?'. Returns buf. */
const char *mcp_quote(const char *s, char buf[MCP_QUOTE_MAX + 1]);

struct mcp_tool;

/* A tools/call waiting for the core: an execution or a deferred answer. */
struct mcp_call {
	struct ward_mcp *m;
	struct mcp_call *next;
	json_t *id;                    /* the request's id (owned) */
	const struct mcp_tool *tool;
	struct ward_execution *ex;     /* a reference, or NULL */
	struct ward_answer *answer;    /* a reference, or NULL */
	char path[MCP_PATH_MAX + 1];   /* read_file: the path asked for */
};

struct ward_mcp {
	struct ward_service *svc;
	struct ward_key_info key;
	struct ward_mcp_peer peer;
	const char *version;           /* agreed at initialize (a static string), or NULL */
	bool ready;                    /* notifications/initialized received */
	struct mcp_call *calls;        /* in flight, newest first */
	size_t n_calls;                /* at most WARD_MCP_PENDING_MAX */
	/* answered from inside a core event, whose sender must not see its
	 * object freed under it (service.h): let go at the next message or
	 * at the end; at most WARD_MCP_PENDING_MAX, as no call starts
	 * between two messages */
	struct mcp_call *done;
};

/* --- tools.c --- */

/* {"tools": [...]}: every tool with its input schema (new reference). */
json_t *mcp_tools_list(void);

/* tools/call: params checked against the tool's schema (a -32602 with the
 * parameter named, -1), then the core called. 0 with *result set (an
 * answer now: a result, isError or not), or 0 with c->ex or c->answer set
 * (the answer comes as an event: mcp_call_result then). */
int mcp_tool_call(struct ward_mcp *m, struct mcp_call *c, json_t *params, json_t **result,
		  struct mcp_rpc_error *e);

/* The result of a call whose execution or answer is done (new reference;
 * NULL only without memory). */
json_t *mcp_call_result(struct mcp_call *c);

/* An isError result that says what the core refused and which parameter. */
json_t *mcp_tool_error(const struct mcp_call *c, const struct ward_service_error *err);

#endif
