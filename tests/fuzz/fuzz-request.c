/* tests/fuzz/fuzz-request.c — the body of POST /v1/executions, as the
 * service core parses it (lib/service/request.c: language or command,
 * function and args, globals, inline artifacts, files, policy overrides
 * on a copy of the default policy, timeout), must never
 * crash or leak on any input, and every refusal must come with an error
 * body. The HTTP layer's size and depth limits come before it; this
 * target feeds it everything. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/service/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ward_service s;
	static bool ready;
	struct ward_error err;
	if (!ready) {
		if (ward_policy_init(&s.policy, &err) < 0)
			abort();
		ready = true;
	}
	struct exec_request r;
	struct ward_service_error e = { 0 };
	/* every scope: the credentials parser is fed too */
	static const struct ward_key_info key = { .tenant = "fuzz", .scopes = WARD_SCOPE_ALL };
	if (exec_request_parse(&s, &key, (const char *)data, size, &r, &e) == 0) {
		exec_request_release(&r);
	} else {
		json_t *error = ward_service_error_json(&e);
		if (!error || e.status < 400 || e.status > 499 || !e.code[0])
			abort(); /* a refusal always says why, as a 4xx */
		json_decref(error);
	}
	return 0;
}
