/* lib/egress/cred.c — which requests a credential rule applies to.
 *
 * A rule's secret goes only where the rule says: its host (exactly, or any
 * name under a "*." suffix) and its path prefix on a segment boundary. When
 * in doubt (a path the upstream might normalize out of the prefix) the rule
 * does not match: the request goes without the secret, never the secret
 * somewhere else. Never logs or copies a header value.
 */
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "egress/cred.h"
#include "egress/intercept.h"
#include "base/util.h"

bool egress_http_tchar(unsigned char c)
{
	if (isalnum(c))
		return true;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

bool egress_cred_host_match(const struct ward_egress_credential *c, const char *host)
{
	if (!c || !c->host || !host || !*host || !*c->host)
		return false;
	if (strncmp(c->host, "*.", 2) != 0)
		return strcasecmp(c->host, host) == 0;
	/* "*.x.com": one label or more before ".x.com", never "x.com" itself */
	const char *suffix = c->host + 1;   /* ".x.com" */
	size_t sl = strlen(suffix), hl = strlen(host);
	if (sl < 2 || hl <= sl)
		return false;
	return strcasecmp(host + hl - sl, suffix) == 0 && host[0] != '.';
}

/* A dot segment or an encoded separator before the query: the upstream may
 * resolve "/v1/../admin" to "/admin". */
static bool path_ambiguous(const char *path)
{
	size_t end = strcspn(path, "?#");
	for (size_t i = 0; i < end; i++) {
		if (path[i] == '\\')
			return true;
		if (path[i] == '%' && i + 2 < end) {
			char a = path[i + 1], b = (char)tolower((unsigned char)path[i + 2]);
			if (a == '2' && (b == 'e' || b == 'f'))
				return true;
			if (a == '5' && b == 'c')
				return true;
		}
		if (path[i] == '/' && path[i + 1] == '.') {
			size_t j = i + 1;
			while (j < end && path[j] == '.')
				j++;
			if (j == end || path[j] == '/')
				return true;
		}
	}
	return false;
}

bool egress_cred_path_match(const struct ward_egress_credential *c, const char *path)
{
	const char *p = c ? c->path_prefix : NULL;
	if (!p || !*p || strcmp(p, "/") == 0)
		return true;
	if (!path || path_ambiguous(path))
		return false;
	size_t pl = strlen(p);
	if (strncmp(path, p, pl) != 0)
		return false;
	if (p[pl - 1] == '/')
		return true;
	char next = path[pl];
	return next == '\0' || next == '/' || next == '?' || next == '#';
}

bool egress_cred_match(const struct ward_egress_credential *c, const char *host,
		       const char *path)
{
	return egress_cred_host_match(c, host) && egress_cred_path_match(c, path);
}

bool egress_cred_header_split(const char *h, size_t *name_len, const char **value)
{
	if (!h)
		return false;
	size_t n = 0;
	while (egress_http_tchar((unsigned char)h[n]))
		n++;
	if (n == 0 || h[n] != ':')
		return false;
	const char *v = h + n + 1;
	while (*v == ' ' || *v == '\t')
		v++;
	if (strlen(h) > EGRESS_CRED_HEADER_MAX)
		return false;
	for (const char *q = v; *q; q++)
		if (*q == '\r' || *q == '\n' || ((unsigned char)*q < 0x20 && *q != '\t') || *q == 0x7f)
			return false;
	*name_len = n;
	*value = v;
	return true;
}

int egress_cred_check(const struct ward_egress_credential *c, const char **why)
{
	*why = NULL;
	if (!c->name || !*c->name)
		*why = "credential: name: expected a non-empty string";
	else if (!c->host || !*c->host || strchr(c->host + (c->host[0] == '*'), '*') ||
		 (c->host[0] == '*' && (c->host[1] != '.' || !c->host[2])))
		*why = "credential: host: expected a name like \"api.example.com\" or \"*.example.com\"";
	else if (c->path_prefix && *c->path_prefix && c->path_prefix[0] != '/')
		*why = "credential: path_prefix: expected a path starting with \"/\"";
	else if (c->n_headers == 0)
		*why = "credential: headers: expected at least one header";
	for (size_t i = 0; !*why && i < c->n_headers; i++) {
		size_t nl;
		const char *v;
		if (!egress_cred_header_split(c->headers[i], &nl, &v))
			*why = "credential: headers: expected \"Name: value\" with a token name and no CR, LF or control characters";
	}
	return *why ? -EINVAL : 0;
}
