/* tests/unit/t-verdict.c — status names and the verdict's JSON form. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "ward/verdict.h"

int main(void)
{
	static const char *const names[] = {
		"ok", "error", "timeout", "cpu_timeout", "memory_limit", "pids_limit",
		"output_limit", "disk_limit", "signaled", "killed", "setup_failed",
		"policy_violation",
	};
	ok(sizeof(names) / sizeof(names[0]) == WARD_STATUS_COUNT, "WARD_STATUS_COUNT counts every status");
	for (int i = 0; i < WARD_STATUS_COUNT; i++)
		is_str(ward_status_name((enum ward_status)i), names[i], "status %d is %s", i, names[i]);
	is_str(ward_status_name((enum ward_status)99), "unknown", "out of range");

	struct ward_verdict v;
	ward_verdict_init(&v);
	v.status = WARD_STATUS_MEMORY_LIMIT;
	v.signal = 9;
	v.limit = "memory";
	v.limit_value = 1 << 20;
	v.layers = (1u << WARD_LAYER_USERNS) | (1u << WARD_LAYER_SECCOMP);
	v.degraded = 1u << WARD_LAYER_CGROUP;
	strcpy(v.sandbox_id, "abc");
	v.out.data = strdup("caf\xc3\xa9 \xff ok");
	v.out.len = strlen(v.out.data);
	char *s = ward_verdict_to_json(&v);
	json_error_t e;
	json_t *o = s ? json_loads(s, 0, &e) : NULL;
	ok(o != NULL, "verdict JSON parses");
	is_str(json_string_value(json_object_get(o, "status")), "memory_limit", "status");
	ok(json_is_null(json_object_get(o, "exit_code")), "no exit code when signaled");
	is_int(json_integer_value(json_object_get(o, "signal")), 9, "signal");
	is_str(json_string_value(json_object_get(json_object_get(o, "limit"), "name")), "memory",
	       "limit name");
	is_int(json_integer_value(json_object_get(json_object_get(o, "limit"), "value")), 1 << 20,
	       "limit value");
	is_str(json_string_value(json_array_get(json_object_get(o, "layers"), 1)), "seccomp",
	       "layers listed by name");
	is_str(json_string_value(json_array_get(json_object_get(o, "degraded"), 0)), "cgroup",
	       "degraded listed");
	is_str(json_string_value(json_object_get(o, "stdout")), "caf\xc3\xa9 \xef\xbf\xbd ok",
	       "invalid UTF-8 replaced, valid kept");
	const char *keys[] = { "usage", "stderr", "stdout_truncated", "stderr_truncated",
			       "sandbox_id" };
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		ok(json_object_get(o, keys[i]) != NULL, "has %s", keys[i]);
	json_decref(o);
	free(s);
	ward_verdict_release(&v);
	return tap_done();
}
