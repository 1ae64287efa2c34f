/* tests/fuzz/fuzz-dns.c — the egress DNS stub's query parser (it reads
 * whatever a sandbox sends to 127.0.0.1:53) must never crash or read out of
 * bounds, and a reply built from what it accepted must stay within the
 * reply buffer and echo the question. The parsed name then goes through the
 * address-literal check the stub applies before its policy. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct egress_dns_query q;
	if (egress_dns_parse_query(data, size, &q) < 0)
		return 0;
	if (q.question_end > size || strlen(q.name) >= sizeof(q.name))
		abort();
	unsigned char out[EGRESS_DNS_MAX];
	for (int rcode = 0; rcode <= 5; rcode += 5) {
		size_t n = egress_dns_reply(data, &q, rcode, rcode ? 0 : WARD_EGRESS_FAKE_NET + 1,
					    out, sizeof(out));
		if (n > sizeof(out) || (n && memcmp(out + 12, data + 12, q.question_end - 12) != 0))
			abort();
	}
	struct egress_addr a;
	if (egress_addr_literal(q.name, &a) == 1)
		egress_addr_refused(&a);
	return 0;
}
