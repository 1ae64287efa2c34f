/* tests/fuzz/fuzz-policy.c — fuzz the policy parsers.
 *
 * The input is a JSON document for ward_policy_load_json and for
 * ward_net_policy_from_json (a network object alone), a flag (the bytes
 * before the first NUL or newline name the field, the rest is the value for
 * ward_policy_set), and one network entry for ward_net_rule_parse. Whatever the bytes, the library must not crash,
 * leak or leave a half-applied policy, and every policy it accepts must
 * survive to_json -> load_json unchanged, every accepted entry its
 * canonical text (abort() here marks a finding).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "policy/internal.h"
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

/* The network object alone: what it accepts prints and parses back equal. */
static void fuzz_net_json(const uint8_t *data, size_t size)
{
	struct ward_error err;
	struct ward_net_policy n, back;
	if (ward_net_policy_from_json(&n, (const char *)data, size, "fuzz", &err) < 0) {
		if (n.allow || n.deny || !err.message[0])
			abort();
		return;
	}
	json_t *o = ward_net_policy_to_json(&n);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (text) {
		if (ward_net_policy_from_json(&back, text, strlen(text), "round-trip", &err) < 0 ||
		    !wp_net_equal(&n, &back))
			abort();
		ward_net_policy_release(&back);
	}
	free(text);
	ward_net_policy_release(&n);
}

/* One entry: its canonical text parses to the same rule, and matching it
 * against itself and an address never crashes. */
static void fuzz_rule(const uint8_t *data, size_t size)
{
	struct ward_error err;
	struct ward_net_rule r, back;
	char text[320], *buf = malloc(size + 1);
	if (!buf)
		return;
	memcpy(buf, data, size);
	buf[size] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (ward_net_rule_parse(buf, &r, "fuzz", &err) == 0) {
		ward_net_rule_format(&r, text, sizeof(text));
		if (ward_net_rule_parse(text, &back, "fuzz", &err) < 0 || !wp_net_rule_equal(&r, &back))
			abort();
		static const unsigned char addr[16] = { 10, 1, 2, 3 };
		(void)ward_net_rule_match(&r, r.host ? r.host : text, AF_INET, addr, 443);
		(void)ward_net_rule_match(&r, buf, AF_INET6, addr, r.port);
		if (r.kind != WARD_NET_RULE_SUFFIX &&
		    !ward_net_rule_match(&r, r.host, r.family, r.addr, r.port ? r.port : 443))
			abort();  /* a rule covers its own destination */
		wp_net_rule_release(&back);
		wp_net_rule_release(&r);
	}
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_json(data, size);
	fuzz_flag(data, size);
	fuzz_net_json(data, size);
	fuzz_rule(data, size);
	return 0;
}
