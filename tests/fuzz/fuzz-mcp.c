/* tests/fuzz/fuzz-mcp.c — JSON-RPC as `ward mcp` reads it (lib/mcp/): the
 * input is split into lines, each handed to one initialized conversation,
 * and must never crash or leak; every message sent back must be one JSON-RPC
 * 2.0 response with a result or an error of a known code, at most one per
 * line. The conversation's key has no scope, so a well-formed tool call is
 * checked against its schema in full and then refused as a tool error,
 * never run: the fuzzer starts no sandbox. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/keys.h"
#include "ward/mcp.h"
#include "ward/service.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t n_sent;

static void on_send(void *ctx, json_t *msg, json_t *related)
{
	(void)ctx;
	(void)related;
	json_t *e = json_object_get(msg, "error");
	const char *v = json_string_value(json_object_get(msg, "jsonrpc"));
	if (!v || strcmp(v, "2.0") != 0 || !json_object_get(msg, "id") ||
	    !json_object_get(msg, "result") == !e)
		abort();
	if (e) {
		json_int_t c = json_integer_value(json_object_get(e, "code"));
		if ((c != -32700 && c != -32600 && c != -32601 && c != -32602 && c != -32603) ||
		    !json_is_string(json_object_get(e, "message")))
			abort();
	}
	n_sent++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ward_service *svc;
	if (!svc) {
		struct ward_service_config c;
		ward_service_config_defaults(&c);
		c.embedded = true;
		if (ward_service_new(&c, &svc) < 0)
			abort();
		ward_service_config_release(&c);
	}
	struct ward_key_info key = { .tenant = "fuzz", .scopes = 0 };
	struct ward_mcp_peer peer = { .send = on_send };
	struct ward_mcp *m;
	if (ward_mcp_new(svc, &key, &peer, &m) < 0)
		abort();
	static const char init[] = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
				   "\"params\":{\"protocolVersion\":\"2025-11-25\"}}";
	ward_mcp_receive(m, init, strlen(init));
	n_sent = 0;
	size_t lines = 0;
	const char *p = (const char *)data, *end = p + size;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		ward_mcp_receive(m, p, n);
		lines++;
		p += n + 1;
	}
	if (n_sent > lines || ward_mcp_pending(m) != 0)
		abort();
	ward_mcp_free(m);
	return 0;
}
