/* tests/unit/t-verdict.c — status names and the verdict's JSON form. */
#include <jansson.h>
#include <stdio.h>
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
	ok(json_object_get(o, "network") == NULL, "no network object without network.present");
	json_decref(o);
	free(s);
	ward_verdict_release(&v);

	/* network.mode "allowlist": the network object */
	ward_verdict_init(&v);
	v.network.present = true;
	v.network.connections = 3;
	v.network.bytes_out = 1234;
	v.network.bytes_in = 56789;
	v.network.denied_total = 20;
	v.network.n_denied = WARD_NET_DENIED_MAX;
	for (size_t i = 0; i < WARD_NET_DENIED_MAX; i++) {
		snprintf(v.network.denied[i].host, sizeof(v.network.denied[i].host), "h%zu.test", i);
		v.network.denied[i].port = 443;
		snprintf(v.network.denied[i].reason, sizeof(v.network.denied[i].reason),
			 "not in the allowlist");
	}
	strcpy(v.network.denied[1].host, "bad\xff.test");
	memset(v.network.denied[2].reason, 'r', sizeof(v.network.denied[2].reason)); /* no NUL */
	s = ward_verdict_to_json(&v);
	o = s ? json_loads(s, 0, &e) : NULL;
	json_t *n = json_object_get(o, "network");
	ok(json_is_object(n), "network object when present");
	is_int(json_integer_value(json_object_get(n, "connections")), 3, "  connections");
	is_int(json_integer_value(json_object_get(n, "bytes_out")), 1234, "  bytes_out");
	is_int(json_integer_value(json_object_get(n, "bytes_in")), 56789, "  bytes_in");
	is_int(json_integer_value(json_object_get(n, "denied_total")), 20, "  denied_total");
	ok(json_object_get(n, "limit") == NULL, "  no limit when none was hit");
	json_t *d = json_object_get(n, "denied");
	is_int((long long)json_array_size(d), WARD_NET_DENIED_MAX, "  the listed denials");
	is_str(json_string_value(json_object_get(json_array_get(d, 0), "host")), "h0.test", "  host");
	is_int(json_integer_value(json_object_get(json_array_get(d, 0), "port")), 443, "  port");
	is_str(json_string_value(json_object_get(json_array_get(d, 0), "reason")),
	       "not in the allowlist", "  reason");
	is_str(json_string_value(json_object_get(json_array_get(d, 1), "host")), "bad\xef\xbf\xbd.test",
	       "  a host that is not UTF-8 is repaired");
	is_int((long long)strlen(json_string_value(json_object_get(json_array_get(d, 2), "reason"))),
	       sizeof(v.network.denied[2].reason), "  a reason without its NUL stops at its size");
	const char *nkeys[] = { "connections", "bytes_out", "bytes_in", "denied", "denied_total" };
	ok(json_object_size(n) == sizeof(nkeys) / sizeof(nkeys[0]), "  exactly the contract's keys");
	json_decref(o);
	free(s);
	v.network.limit = "bytes_out";
	v.network.n_denied = 0;
	s = ward_verdict_to_json(&v);
	o = s ? json_loads(s, 0, &e) : NULL;
	n = json_object_get(o, "network");
	is_str(json_string_value(json_object_get(n, "limit")), "bytes_out", "limit once hit");
	is_int((long long)json_array_size(json_object_get(n, "denied")), 0, "  an empty denied list");
	json_decref(o);
	free(s);
	ward_verdict_release(&v);
	return tap_done();
}
