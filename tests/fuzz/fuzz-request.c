/* tests/fuzz/fuzz-request.c — the body of POST /v1/executions, as the
 * daemon parses it (src/daemon/request.c: language or command, files,
 * policy overrides on a copy of the default policy, timeout), must never
 * crash or leak on any input, and every refusal must come with an error
 * body. The HTTP layer's size and depth limits come before it; this
 * target feeds it everything. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/daemon/daemon.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct srv s;
	static bool ready;
	struct ward_error err;
	if (!ready) {
		if (ward_policy_init(&s.policy, &err) < 0)
			abort();
		ready = true;
	}
	struct exec_request r;
	unsigned status = 0;
	json_t *error = NULL;
	if (exec_request_parse(&s, (const char *)data, size, &r, &status, &error) == 0) {
		exec_request_release(&r);
	} else if (!error || status < 400 || status > 499) {
		abort(); /* a refusal always says why, as a 4xx */
	}
	json_decref(error);
	return 0;
}
