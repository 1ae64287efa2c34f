/* src/daemon/routes.c — the HTTP API's route table and its matcher.
 *
 * One row per endpoint; adding an endpoint is a new row here, a handler in
 * http.c and its description in docs/openapi.json (t0770 checks that the
 * two agree). The matcher only reads its input: no allocation, no
 * libmicrohttpd, bounded by ROUTE_URL_MAX and ROUTE_PARAM_MAX.
 */
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "base/util.h"
#include "routes.h"
#include "server/keys.h"

#define PUBLIC 0u
#define EXECUTE WARD_SCOPE_EXECUTE
#define SESSIONS WARD_SCOPE_SESSIONS
#define FILES WARD_SCOPE_FILES
#define ADMIN WARD_SCOPE_ADMIN

const struct route ward_routes[] = {
	{ "GET", "/healthz", PUBLIC, RH_HEALTHZ, "healthz", RB_NONE },
	{ "GET", "/v1/openapi.json", PUBLIC, RH_OPENAPI, "openapi", RB_NONE },
	{ "GET", "/metrics", ADMIN, RH_METRICS, "metrics", RB_NONE },
	{ "GET", "/v1/events", ADMIN, RH_EVENTS, "events", RB_NONE },
	{ "POST", "/v1/executions", EXECUTE, RH_EXEC_START, "execute", RB_JSON },
	{ "DELETE", "/v1/executions/{id}", EXECUTE, RH_EXEC_CANCEL, "cancel", RB_NONE },
	{ "POST", "/v1/sessions", SESSIONS, RH_SESSION_CREATE, "session", RB_JSON },
	{ "GET", "/v1/sessions", SESSIONS, RH_SESSION_LIST, "session", RB_NONE },
	{ "GET", "/v1/sessions/{id}", SESSIONS, RH_SESSION_GET, "session", RB_NONE },
	{ "DELETE", "/v1/sessions/{id}", SESSIONS, RH_SESSION_DELETE, "session", RB_NONE },
	{ "PUT", "/v1/sessions/{id}/network", SESSIONS, RH_SESSION_NETWORK, "session.network",
	  RB_JSON },
	{ "POST", "/v1/sessions/{id}/execute", SESSIONS, RH_SESSION_EXECUTE, "session.execute", RB_JSON },
	{ "POST", "/v1/sessions/{id}/commands", SESSIONS, RH_SESSION_COMMAND, "session.command", RB_JSON },
	{ "GET", "/v1/sessions/{id}/commands/{command_id}", SESSIONS, RH_COMMAND_STATUS,
	  "session.command", RB_NONE },
	{ "DELETE", "/v1/sessions/{id}/commands/{command_id}", SESSIONS, RH_COMMAND_KILL,
	  "session.command", RB_NONE },
	{ "GET", "/v1/sessions/{id}/files", FILES, RH_FILE_GET, "files", RB_NONE },
	{ "PUT", "/v1/sessions/{id}/files", FILES, RH_FILE_PUT, "files", RB_UPLOAD },
	{ "DELETE", "/v1/sessions/{id}/files", FILES, RH_FILE_DELETE, "files", RB_NONE },
	{ "POST", "/mcp", EXECUTE, RH_MCP, "mcp", RB_JSON },
	{ "DELETE", "/mcp", EXECUTE, RH_MCP, "mcp", RB_NONE },
};
const size_t ward_n_routes = ARRAY_SIZE(ward_routes);

static bool param_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '-' || c == '.';
}

/* One segment of the path, [p, end), against one of the pattern. */
static bool segment_match(const char *pat, size_t plen, const char *p, size_t n,
			  struct route_match *m)
{
	if (plen >= 2 && pat[0] == '{' && pat[plen - 1] == '}') {
		if (n == 0 || n > ROUTE_PARAM_MAX || m->n_params >= ROUTE_MAX_PARAMS ||
		    plen - 2 >= sizeof(m->names[0]))
			return false;
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		for (size_t i = 0; i < n; i++)
			if (!param_char(p[i]))
				return false;
		memcpy(m->params[m->n_params], p, n);
		m->params[m->n_params][n] = '\0';
		memcpy(m->names[m->n_params], pat + 1, plen - 2);
		m->names[m->n_params][plen - 2] = '\0';
		m->n_params++;
		return true;
	}
	return plen == n && memcmp(pat, p, n) == 0;
}

/* The whole path against a pattern; both start with '/'. */
static bool path_match(const char *pattern, const char *path, struct route_match *m)
{
	m->n_params = 0;
	const char *pat = pattern, *p = path;
	while (*pat == '/' && *p == '/') {
		pat++;
		p++;
		const char *pe = strchr(pat, '/'), *e = strchr(p, '/');
		size_t plen = pe ? (size_t)(pe - pat) : strlen(pat);
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (!segment_match(pat, plen, p, n, m))
			return false;
		pat += plen;
		p += n;
	}
	return !*pat && !*p;
}

static void allow_add(struct route_match *m, const char *method)
{
	if (strstr(m->allow, method)) /* each method once */
		return;
	if (m->allow[0])
		ward_strlcat(m->allow, ", ", sizeof(m->allow));
	ward_strlcat(m->allow, method, sizeof(m->allow));
}

int route_match(const char *method, const char *path, struct route_match *m)
{
	memset(m, 0, sizeof(*m));
	if (!method || !path || path[0] != '/' || strnlen(path, ROUTE_URL_MAX + 1) > ROUTE_URL_MAX)
		return -ENOENT;
	bool any = false;
	for (size_t i = 0; i < ward_n_routes; i++) {
		const struct route *r = &ward_routes[i];
		struct route_match cand;
		memset(&cand, 0, sizeof(cand));
		if (!path_match(r->pattern, path, &cand))
			continue;
		if (!any)
			m->public_path = r->scope == PUBLIC;
		any = true;
		if (strcmp(r->method, method) == 0) {
			cand.route = r;
			cand.public_path = m->public_path;
			*m = cand;
			return 0;
		}
		allow_add(m, r->method);
	}
	return any ? -EOPNOTSUPP : -ENOENT;
}

const char *route_param(const struct route_match *m, const char *name)
{
	for (size_t i = 0; i < m->n_params; i++)
		if (strcmp(m->names[i], name) == 0)
			return m->params[i];
	return NULL;
}

int route_print(FILE *f)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < ward_n_routes; i++) {
		const struct route *r = &ward_routes[i];
		json_t *o = json_pack("{s:s, s:s, s:s?, s:s}", "method", r->method, "path",
				      r->pattern, "scope",
				      r->scope ? ward_keys_scope_name(r->scope) : NULL, "action",
				      r->action);
		if (!o || json_array_append_new(a, o) < 0) {
			json_decref(a);
			return -1;
		}
	}
	int rc = a && json_dumpf(a, f, JSON_INDENT(1)) == 0 && fputc('\n', f) != EOF ? 0 : -1;
	json_decref(a);
	return rc;
}
