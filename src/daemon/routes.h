/* src/daemon/routes.h — the HTTP API as one table.
 *
 * Every endpoint is one row {method, pattern, scope, handler, audit
 * action, body}: the table drives dispatch, the scope check and the audit
 * action, and `ward serve --print-routes` prints it (t0770 compares it with
 * docs/openapi.json). A URL is matched once per request into captured
 * parameters; nothing else looks at the URL. Knows nothing of
 * libmicrohttpd: the matcher is a pure function (tests/unit/t-routes.c).
 */
#ifndef WARD_DAEMON_ROUTES_H
#define WARD_DAEMON_ROUTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum {
	ROUTE_MAX_PARAMS = 2,
	ROUTE_PARAM_MAX = 64,   /* bytes of one captured segment */
	ROUTE_URL_MAX = 2048,   /* a longer path matches nothing */
	ROUTE_ALLOW_MAX = 64,   /* "GET, PUT, DELETE" */
};

/* What the front end runs for a row (src/daemon/http.c keeps one function
 * per id, checked by a static assert on ROUTE_N_HANDLERS). */
enum route_handler {
	RH_HEALTHZ,
	RH_OPENAPI,
	RH_METRICS,
	RH_EVENTS,
	RH_EXEC_START,
	RH_EXEC_CANCEL,
	RH_SESSION_CREATE,
	RH_SESSION_LIST,
	RH_SESSION_GET,
	RH_SESSION_DELETE,
	RH_SESSION_EXECUTE,
	RH_SESSION_COMMAND,
	RH_COMMAND_STATUS,
	RH_COMMAND_KILL,
	RH_FILE_GET,
	RH_FILE_PUT,
	RH_FILE_DELETE,
	RH_SESSION_NETWORK,
	RH_MCP,
	ROUTE_N_HANDLERS
};

/* What a request carries: nothing, a JSON object (within max_body and the
 * depth limit), or a file's bytes (within max_file, reserved as they come). */
enum route_body { RB_NONE, RB_JSON, RB_UPLOAD };

struct route {
	const char *method;
	const char *pattern;          /* "/v1/sessions/{id}/files" */
	unsigned scope;               /* WARD_SCOPE_*; 0: public, no key asked */
	enum route_handler handler;
	const char *action;           /* the audit line's "action" */
	enum route_body body;
};

struct route_match {
	const struct route *route;    /* NULL: no row for this method and path */
	size_t n_params;
	char names[ROUTE_MAX_PARAMS][24];
	char params[ROUTE_MAX_PARAMS][ROUTE_PARAM_MAX + 1];
	char allow[ROUTE_ALLOW_MAX];  /* the path's methods, when only the method differed */
	bool public_path;             /* the path (any method) needs no key */
};

extern const struct route ward_routes[];
extern const size_t ward_n_routes;

/* Matches method and the decoded path (no query) against the table.
 * A captured segment is 1-ROUTE_PARAM_MAX bytes of [A-Za-z0-9._-], never
 * "." or ".."; literal segments match exactly, so a trailing or doubled
 * '/' matches nothing. Returns 0 (m->route set), -ENOENT (no path
 * matches: 404) or -EOPNOTSUPP (the path matches with other methods,
 * listed in m->allow: 405). */
int route_match(const char *method, const char *path, struct route_match *m);

/* A captured parameter by its name in the pattern, or NULL. */
const char *route_param(const struct route_match *m, const char *name);

/* The table as JSON (an array of {method, path, scope, action}) on f.
 * 0 or -1. */
int route_print(FILE *f);

#endif
