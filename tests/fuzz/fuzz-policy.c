/* tests/fuzz/fuzz-policy.c — fuzz the policy parsers.
 *
 * The input is a JSON document for ward_policy_load_json, and also a flag:
 * the bytes before the first NUL or newline name the field, the rest is the
 * value for ward_policy_set. Whatever the bytes, the library must not crash,
 * leak or leave a half-applied policy, and every policy it accepts must
 * survive to_json -> load_json unchanged (abort() here marks a finding).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ward/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Loads what to_json printed onto fresh defaults and compares. */
static void check_round_trip(const struct ward_policy *p)
{
	struct ward_error err;
	struct ward_policy back;
	char *json = ward_policy_to_json(p);
	if (!json)
		return;  /* ENOMEM only: every accepted string is valid UTF-8 */
	if (ward_policy_init(&back, &err) == 0) {
		/* a policy grown by flags may print larger than a document may be */
		size_t len = strlen(json);
		if (len <= 64 * 1024 &&
		    (ward_policy_load_json(&back, json, len, "round-trip", &err) < 0 ||
		     !ward_policy_equal(p, &back)))
			abort();
		ward_policy_release(&back);
	}
	free(json);
}

static void fuzz_json(const uint8_t *data, size_t size)
{
	struct ward_error err;
	struct ward_policy p, before;
	if (ward_policy_init(&p, &err) < 0)
		return;
	if (ward_policy_copy(&before, &p, &err) < 0) {
		ward_policy_release(&p);
		return;
	}
	if (ward_policy_load_json(&p, (const char *)data, size, "fuzz.json", &err) < 0) {
		if (!ward_policy_equal(&p, &before) || !err.message[0])
			abort();
	} else {
		(void)ward_policy_validate(&p, &err);
		check_round_trip(&p);
	}
	ward_policy_release(&before);
	ward_policy_release(&p);
}

static void fuzz_flag(const uint8_t *data, size_t size)
{
	struct ward_error err;
	struct ward_policy p;
	char *buf = malloc(size + 1);
	if (!buf)
		return;
	memcpy(buf, data, size);
	buf[size] = '\0';
	/* field = up to the first NUL or newline; value = the rest up to a NUL */
	size_t cut = strcspn(buf, "\n");
	const char *value = cut < size ? buf + cut + 1 : "";
	buf[cut] = '\0';
	if (ward_policy_init(&p, &err) == 0) {
		if (ward_policy_set(&p, buf, value, "--fuzz", &err) == 0)
			check_round_trip(&p);
		ward_policy_release(&p);
	}
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_json(data, size);
	fuzz_flag(data, size);
	return 0;
}
