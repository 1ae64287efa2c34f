/* lib/egress/cred.h — credential rules: which requests a rule applies to,
 * and whether a rule is well formed (internal to lib/egress). Pure
 * functions: no I/O, no allocation. egress_cred_host_match is declared in
 * intercept.h. */
#ifndef WARD_EGRESS_CRED_H
#define WARD_EGRESS_CRED_H

#include <stdbool.h>
#include <stddef.h>

#include "ward/egress.h"

enum { EGRESS_CRED_HEADER_MAX = 8192 };  /* one "Name: value" of a rule */

/* True when the rule's path_prefix (NULL, "" or "/": every path) covers
 * path (origin form, "/a/b?q"). "/v1/" covers "/v1/x"; "/v1" covers "/v1",
 * "/v1/x" and "/v1?q" but not "/v10". A path with a dot segment ("/..",
 * "/%2e%2e"), an encoded slash or a backslash is covered only by an
 * every-path rule: the upstream may normalize it out of the prefix. */
bool egress_cred_path_match(const struct ward_egress_credential *c, const char *path);

/* True when the rule applies to a request for host and path. */
bool egress_cred_match(const struct ward_egress_credential *c, const char *host,
		       const char *path);

/* Checks one rule: a name, a host ("x.com" or "*.x.com"), a path prefix
 * starting with "/" (or none), and headers "Name: value" with a token name
 * and a value without CR, LF or NUL. 0, or -EINVAL with *why naming what is
 * wrong (static text). */
int egress_cred_check(const struct ward_egress_credential *c, const char **why);

/* Splits a rule header "Name: value": *name_len gets the name's length,
 * *value the first byte of the value (leading blanks skipped). False when
 * the header is malformed (see egress_cred_check). */
bool egress_cred_header_split(const char *h, size_t *name_len, const char **value);

/* True for a byte allowed in an HTTP header name (RFC 9110 token). */
bool egress_http_tchar(unsigned char c);

#endif
