/* tests/unit/t-routes.c — the HTTP route table's matcher (src/daemon/routes.c):
 * every documented path matches its row and captures its parameters; a
 * trailing or doubled '/', an empty or dotted segment, a character outside
 * the id alphabet (what a percent-encoding decodes to) and an overlong path
 * or segment match nothing; a path served under other methods is a 405
 * with the methods it has. */
#include <errno.h>
#include <string.h>

#include "routes.h"
#include "server/keys.h"
#include "tap.h"

static int match(const char *method, const char *path, struct route_match *m)
{
	return route_match(method, path, m);
}

static void good_paths(void)
{
	struct route_match m;
	ok(match("GET", "/healthz", &m) == 0 && m.route->handler == RH_HEALTHZ && !m.route->scope,
	   "GET /healthz: public");
	ok(match("POST", "/v1/executions", &m) == 0 && m.route->handler == RH_EXEC_START &&
	   m.route->scope == WARD_SCOPE_EXECUTE && m.route->body == RB_JSON,
	   "POST /v1/executions: execute scope, a JSON body");
	ok(match("DELETE", "/v1/executions/ex_0123abcd", &m) == 0 &&
	   m.route->handler == RH_EXEC_CANCEL && strcmp(route_param(&m, "id"), "ex_0123abcd") == 0,
	   "DELETE /v1/executions/{id} captures id");
	ok(match("GET", "/v1/sessions/se_1/commands/c-1.x", &m) == 0 &&
	   m.route->handler == RH_COMMAND_STATUS && strcmp(route_param(&m, "id"), "se_1") == 0 &&
	   strcmp(route_param(&m, "command_id"), "c-1.x") == 0 && !route_param(&m, "other"),
	   "two parameters, by name");
	ok(match("PUT", "/v1/sessions/se_1/files", &m) == 0 && m.route->handler == RH_FILE_PUT &&
	   m.route->scope == WARD_SCOPE_FILES && m.route->body == RB_UPLOAD,
	   "PUT .../files: files scope, an upload");
	ok(match("GET", "/metrics", &m) == 0 && m.route->scope == WARD_SCOPE_ADMIN,
	   "GET /metrics: admin scope");
	ok(match("POST", "/v1/sessions/se_1/execute", &m) == 0 &&
	   strcmp(m.route->action, "session.execute") == 0, "the audit action is the row's");
}

static void refused_paths(void)
{
	struct route_match m;
	static const char *const none[] = {
		"/v1/sessions/", "/v1/sessions/se_1/", "/v1/sessions/se_1/files/",
		"/v1/sessions//files", "/v1/sessions/se_1//files", "//v1/sessions",
		"/v1/sessions/./files", "/v1/sessions/../files", "/v1/sessions/se_1/files/x",
		"/v1/sessions/se 1", "/v1/sessions/se%201", "/v1/sessions/se%2Fx/files",
		"/v1/sessions/\xc3\xa9", "/v1/executions/", "/nothing", "", "v1/sessions",
		"/v1/sessions/se_1/commands/", "/healthz/", "/v1/sessions?x=1",
	};
	for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
		ok(match("GET", none[i], &m) == -ENOENT && !m.route, "no route: '%s'", none[i]);
	ok(match("DELETE", "/v1/executions/...", &m) == 0, "'...' is an id like any other");
	ok(match("DELETE", "/v1/executions/..", &m) == -ENOENT, "'..' is never an id");
	char seg[ROUTE_PARAM_MAX + 2], path[ROUTE_URL_MAX + 64];
	memset(seg, 'a', ROUTE_PARAM_MAX);
	seg[ROUTE_PARAM_MAX] = '\0';
	snprintf(path, sizeof(path), "/v1/sessions/%s", seg);
	ok(match("GET", path, &m) == 0 && strlen(route_param(&m, "id")) == ROUTE_PARAM_MAX,
	   "an id of %d bytes is captured whole", ROUTE_PARAM_MAX);
	seg[ROUTE_PARAM_MAX] = 'a';
	seg[ROUTE_PARAM_MAX + 1] = '\0';
	snprintf(path, sizeof(path), "/v1/sessions/%s", seg);
	ok(match("GET", path, &m) == -ENOENT, "an id of %d bytes matches nothing", ROUTE_PARAM_MAX + 1);
	memset(path, 'a', sizeof(path) - 1);
	path[0] = '/';
	path[sizeof(path) - 1] = '\0';
	ok(match("GET", path, &m) == -ENOENT, "an overlong path matches nothing");
	ok(match("GET", NULL, &m) == -ENOENT && match(NULL, "/healthz", &m) == -ENOENT,
	   "no path or method: no route");
}

static void methods(void)
{
	struct route_match m;
	ok(match("PATCH", "/v1/sessions/se_1/files", &m) == -EOPNOTSUPP && !m.route &&
	   strcmp(m.allow, "GET, PUT, DELETE") == 0, "405: Allow lists the path's methods (%s)",
	   m.allow);
	ok(match("GET", "/v1/executions", &m) == -EOPNOTSUPP && strcmp(m.allow, "POST") == 0 &&
	   !m.public_path, "405 on a path that needs a key");
	ok(match("POST", "/healthz", &m) == -EOPNOTSUPP && m.public_path,
	   "405 on a public path says so (no key asked)");
	ok(match("get", "/healthz", &m) == -EOPNOTSUPP, "methods are case-sensitive");
}

static void table(void)
{
	bool seen[ROUTE_N_HANDLERS] = { false };
	bool unique = true;
	for (size_t i = 0; i < ward_n_routes; i++) {
		seen[ward_routes[i].handler] = true;
		for (size_t j = 0; j < i; j++)
			if (strcmp(ward_routes[i].method, ward_routes[j].method) == 0 &&
			    strcmp(ward_routes[i].pattern, ward_routes[j].pattern) == 0)
				unique = false;
		struct route_match m;
		char path[256];
		/* each row's own pattern, with its parameters filled, finds that row */
		size_t o = 0;
		for (const char *p = ward_routes[i].pattern; *p && o + 8 < sizeof(path);) {
			if (*p == '{') {
				memcpy(path + o, "x_1", 3);
				o += 3;
				p = strchr(p, '}') + 1;
			} else {
				path[o++] = *p++;
			}
		}
		path[o] = '\0';
		ok(match(ward_routes[i].method, path, &m) == 0 && m.route == &ward_routes[i],
		   "row %s %s is reached", ward_routes[i].method, ward_routes[i].pattern);
	}
	bool all = true;
	for (int h = 0; h < ROUTE_N_HANDLERS; h++)
		all = all && seen[h];
	ok(unique, "no method and pattern twice");
	ok(all, "every handler kind has a row");
}

int main(void)
{
	good_paths();
	refused_paths();
	methods();
	table();
	return tap_done();
}
