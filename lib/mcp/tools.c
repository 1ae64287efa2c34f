/* lib/mcp/tools.c — the MCP tools: one table, schemas and checks from it,
 * and each tool as the call of the service core the HTTP API makes.
 *
 * A tool builds the JSON body `POST /v1/executions` (or the session
 * route) would get and calls the same core function with the
 * conversation's key, so the same request gets the same verdict through
 * every front end; it never decides what the core decides. What comes back
 * becomes a tool result: the verdict as text (status, stdout, stderr, the
 * last expression's value, the error with its hint), every image/png as
 * ImageContent, isError for every status but ok and for every refusal.
 * Malformed arguments (unknown tool, a missing, unknown or mistyped
 * parameter) are JSON-RPC errors -32602 naming the parameter: they never
 * reach the core.
 */
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "base/util.h"
#include "internal.h"

enum ptype { P_STRING, P_NUMBER, P_OBJECT };

struct param {
	const char *name;
	enum ptype type;
	bool required;
	size_t max_len;               /* strings: bytes at most (0: the message's bound) */
	const char *const *values;    /* strings: the enum, NULL-terminated, or NULL */
	const char *pattern;          /* strings: the schema's pattern, or NULL */
	const char *description;
};

enum tool_kind { TK_RUN_PYTHON, TK_RUN_CODE, TK_CREATE, TK_CLOSE, TK_WRITE, TK_READ, TK_LIST };

struct mcp_tool {
	const char *name;
	enum tool_kind kind;
	const char *description;
	const struct param *params;
	size_t n_params;
	bool read_only, destructive;
};

enum { SESSION_ID_MAX = 64 };

static const char *const languages[] = { "python", "bash", "node", NULL };
static const char *const encodings[] = { "utf-8", "base64", NULL };

#define SESSION_PARAM(req, what)                                                          \
	{ "session_id", P_STRING, req, SESSION_ID_MAX, NULL, NULL, what }
#define TIMEOUT_PARAM                                                                      \
	{ "timeout", P_NUMBER, false, 0, NULL, NULL,                                       \
	  "Seconds the code may run (wall time), above 0 and within the server's policy; "  \
	  "default: the policy's." }

static const struct param run_python_params[] = {
	{ "python_code", P_STRING, true, 0, NULL, NULL,
	  "Python code to run. The value of its last expression is returned; print() goes "
	  "to stdout." },
	{ "global_variables", P_OBJECT, false, 0, NULL, NULL,
	  "Variables set in the program's namespace before it runs: an object whose keys "
	  "are Python identifiers and whose values are JSON." },
	TIMEOUT_PARAM,
	SESSION_PARAM(false, "Run in this session (from create_session): variables, files "
			     "and installed packages persist between calls. Without it the "
			     "code runs in a fresh sandbox that is destroyed afterwards."),
};

static const struct param run_code_params[] = {
	{ "code", P_STRING, true, 0, NULL, NULL,
	  "The code to run. python and node return the value of the last expression." },
	{ "language", P_STRING, true, 0, languages, NULL, "The language of code." },
	TIMEOUT_PARAM,
	SESSION_PARAM(false, "Run in this session (from create_session): each language "
			     "keeps its own variables; files persist. Without it the code runs "
			     "in a fresh sandbox."),
};

static const struct param create_params[] = {
	{ "ttl", P_NUMBER, false, 0, NULL, NULL,
	  "Seconds of idleness before the session ends by itself; default: the server's." },
	{ "policy", P_OBJECT, false, 0, NULL, NULL,
	  "Policy overrides for the session's sandbox (e.g. {\"limits\": {\"memory\": "
	  "\"512M\"}}); they may only tighten the server's policy." },
};

static const struct param close_params[] = {
	SESSION_PARAM(true, "The session to end; its sandbox and files are destroyed."),
};

static const struct param write_params[] = {
	SESSION_PARAM(true, "The session whose /workspace receives the file."),
	{ "path", P_STRING, true, MCP_PATH_MAX, NULL, NULL,
	  "Path relative to /workspace (or absolute under it); missing directories are "
	  "created." },
	{ "content", P_STRING, true, 0, NULL, NULL, "The file's content." },
	{ "encoding", P_STRING, false, 0, encodings, NULL,
	  "How content is encoded: utf-8 text (default) or base64 bytes." },
	{ "mode", P_STRING, false, 4, NULL, "^0?[0-7]{3}$",
	  "Octal permissions, default 0644." },
};

static const struct param read_params[] = {
	SESSION_PARAM(true, "The session to read from."),
	{ "path", P_STRING, true, MCP_PATH_MAX, NULL, NULL,
	  "Path relative to /workspace (or absolute under it)." },
};

static const struct param list_params[] = {
	SESSION_PARAM(true, "The session to list."),
	{ "path", P_STRING, false, MCP_PATH_MAX, NULL, NULL,
	  "A directory relative to /workspace; default: all of /workspace." },
};

#define TOOL(n, k, d, p, ro, de) { n, k, d, p, ARRAY_SIZE(p), ro, de }
static const struct mcp_tool tools[] = {
	TOOL("run_python_code", TK_RUN_PYTHON,
	     "Run Python code in a disposable, kernel-isolated sandbox (no network unless the "
	     "policy allows it) and return its stdout, stderr, the value of the last "
	     "expression, and matplotlib charts as images. An exception, a timeout or a "
	     "resource limit comes back as an error with its name, value and a hint on how to "
	     "fix the code.",
	     run_python_params, false, false),
	TOOL("run_code", TK_RUN_CODE,
	     "Run python, bash or node code in a disposable, kernel-isolated sandbox and "
	     "return stdout, stderr, the last expression's value and images; failures come "
	     "back as errors with a hint.",
	     run_code_params, false, false),
	TOOL("create_session", TK_CREATE,
	     "Create a sandbox session that keeps variables, files and installed packages "
	     "between calls; returns its session_id for the other tools.",
	     create_params, false, false),
	TOOL("close_session", TK_CLOSE, "End a session: its sandbox and files are destroyed.",
	     close_params, false, true),
	TOOL("write_file", TK_WRITE, "Write a file into a session's /workspace.", write_params,
	     false, true),
	TOOL("read_file", TK_READ,
	     "Read a file from a session's /workspace (text as text, a PNG as an image, other "
	     "bytes base64).",
	     read_params, true, false),
	TOOL("list_files", TK_LIST,
	     "List the files under a session's /workspace (recursively, with size, mode and "
	     "mtime).",
	     list_params, true, false),
};

/* --- the schemas --- */

static json_t *param_schema(const struct param *p)
{
	static const char *const types[] = { [P_STRING] = "string", [P_NUMBER] = "number",
					     [P_OBJECT] = "object" };
	json_t *s = json_pack("{s:s, s:s}", "type", types[p->type], "description", p->description);
	if (!s)
		return NULL;
	if (p->values) {
		json_t *e = json_array();
		for (size_t i = 0; p->values[i]; i++)
			json_array_append_new(e, json_string(p->values[i]));
		json_object_set_new(s, "enum", e);
	}
	if (p->type == P_STRING && p->max_len)
		json_object_set_new(s, "maxLength", json_integer((json_int_t)p->max_len));
	if (p->pattern)
		json_object_set_new(s, "pattern", json_string(p->pattern));
	if (p->type == P_NUMBER)
		json_object_set_new(s, "exclusiveMinimum", json_integer(0));
	if (p->type == P_OBJECT && strcmp(p->name, "global_variables") == 0)
		json_object_set_new(s, "propertyNames",
				    json_pack("{s:s}", "pattern", "^[A-Za-z_][A-Za-z0-9_]*$"));
	return s;
}

static json_t *tool_json(const struct mcp_tool *t)
{
	json_t *props = json_object(), *req = json_array();
	for (size_t i = 0; i < t->n_params; i++) {
		json_object_set_new(props, t->params[i].name, param_schema(&t->params[i]));
		if (t->params[i].required)
			json_array_append_new(req, json_string(t->params[i].name));
	}
	return json_pack("{s:s, s:s, s:{s:s, s:o, s:o, s:b}, s:{s:b, s:b, s:b}}", "name", t->name,
			 "description", t->description, "inputSchema", "type", "object",
			 "properties", props, "required", req, "additionalProperties", 0,
			 "annotations", "readOnlyHint", t->read_only, "destructiveHint",
			 t->destructive, "openWorldHint", 0);
}

json_t *mcp_tools_list(void)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < ARRAY_SIZE(tools); i++) {
		json_t *t = tool_json(&tools[i]);
		if (!t || json_array_append_new(a, t) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a ? json_pack("{s:o}", "tools", a) : NULL;
}

/* --- the arguments --- */

static const struct param *find_param(const struct mcp_tool *t, const char *name)
{
	for (size_t i = 0; i < t->n_params; i++)
		if (strcmp(t->params[i].name, name) == 0)
			return &t->params[i];
	return NULL;
}

static int check_string(const struct param *p, json_t *v, struct mcp_rpc_error *e)
{
	const char *s = json_string_value(v);
	if (p->max_len && json_string_length(v) > p->max_len)
		return mcp_rpc_fail(e, MCP_INVALID_PARAMS, p->name, "invalid params: %s: longer "
				    "than %zu bytes", p->name, p->max_len);
	if (p->values) {
		for (size_t i = 0; p->values[i]; i++)
			if (strcmp(s, p->values[i]) == 0)
				return 0;
		return mcp_rpc_fail(e, MCP_INVALID_PARAMS, p->name, "invalid params: %s: expected "
				    "one of %s%s%s%s%s", p->name, p->values[0],
				    p->values[1] ? ", " : "", p->values[1] ? p->values[1] : "",
				    p->values[1] && p->values[2] ? ", " : "",
				    p->values[1] && p->values[2] ? p->values[2] : "");
	}
	if (p->pattern) { /* the one pattern: an octal mode */
		size_t n = strlen(s), i = n == 4 && s[0] == '0' ? 1 : 0;
		bool ok = n == 3 || (n == 4 && s[0] == '0');
		for (; ok && i < n; i++)
			ok = s[i] >= '0' && s[i] <= '7';
		if (!ok)
			return mcp_rpc_fail(e, MCP_INVALID_PARAMS, p->name, "invalid params: %s: "
					    "expected octal permissions like 0644", p->name);
	}
	return 0;
}

/* Every argument against the tool's table: -1 with e naming the first
 * parameter at fault. */
static int check_args(const struct mcp_tool *t, json_t *args, struct mcp_rpc_error *e)
{
	static const char *const type_names[] = { "a string", "a number", "an object" };
	const char *key;
	json_t *v;
	char q[MCP_QUOTE_MAX + 1];
	json_object_foreach(args, key, v) {
		const struct param *p = find_param(t, key);
		if (!p) {
			mcp_quote(key, q);
			return mcp_rpc_fail(e, MCP_INVALID_PARAMS, q, "invalid params: '%s': unknown "
					    "parameter of %s", q, t->name);
		}
		bool ok = p->type == P_STRING ? json_is_string(v)
			: p->type == P_NUMBER ? json_is_number(v) : json_is_object(v);
		if (!ok)
			return mcp_rpc_fail(e, MCP_INVALID_PARAMS, p->name, "invalid params: %s: "
					    "expected %s", p->name, type_names[p->type]);
		if (p->type == P_NUMBER && !(json_number_value(v) > 0))
			return mcp_rpc_fail(e, MCP_INVALID_PARAMS, p->name, "invalid params: %s: "
					    "expected a number above 0", p->name);
		if (p->type == P_STRING && check_string(p, v, e) < 0)
			return -1;
	}
	for (size_t i = 0; i < t->n_params; i++)
		if (t->params[i].required && !json_object_get(args, t->params[i].name))
			return mcp_rpc_fail(e, MCP_INVALID_PARAMS, t->params[i].name,
					    "invalid params: %s: required", t->params[i].name);
	return 0;
}

/* --- results --- */

static json_t *text_content(const char *s, size_t n)
{
	return json_pack("{s:s, s:s%}", "type", "text", "text", s, n);
}

static json_t *tool_result(json_t *content, bool is_error)
{
	return content ? json_pack("{s:o, s:b}", "content", content, "isError", is_error) : NULL;
}

/* The core's name of a request's field (its first component), as this
 * tool calls it: "globals.x" is "global_variables.x" here. */
static void param_name(const struct mcp_tool *t, const char *field, char *out, size_t size)
{
	static const struct { const char *core, *tool; } names[] = {
		{ "code", "python_code" }, { "globals", "global_variables" }, { "id", "session_id" },
	};
	size_t n = strcspn(field, ".");
	for (size_t i = 0; t && i < ARRAY_SIZE(names); i++)
		if (strlen(names[i].core) == n && strncmp(field, names[i].core, n) == 0 &&
		    (strcmp(names[i].core, "code") != 0 || t->kind == TK_RUN_PYTHON)) {
			snprintf(out, size, "%s%s", names[i].tool, field + n);
			return;
		}
	ward_strlcpy(out, field, size);
}

json_t *mcp_tool_error(const struct mcp_call *c, const struct ward_service_error *err)
{
	char field[sizeof(err->field) + 16];
	char msg[WARD_SERVICE_MSG_MAX + WARD_SERVICE_CODE_MAX + sizeof(field) + 64];
	param_name(c->tool, err->field, field, sizeof(field));
	snprintf(msg, sizeof(msg), "error: %s: %s%s%s%s", err->code, err->message,
		 field[0] ? " (parameter: " : "", field, field[0] ? ")" : "");
	/* the core's messages are ASCII, but may quote what a client sent */
	json_t *t = text_content(msg, strlen(msg));
	if (!t) {
		for (char *p = msg; *p; p++)
			if ((unsigned char)*p >= 0x80)
				*p = '?';
		t = text_content(msg, strlen(msg));
	}
	return tool_result(t ? json_pack("[o]", t) : NULL, true);
}

/* A deferred answer's error body, as a struct ward_service_error. */
static json_t *answer_error(const struct mcp_call *c, unsigned status, json_t *body)
{
	struct ward_service_error se;
	json_t *e = json_object_get(body, "error");
	ward_service_fail(&se, status, json_string_value(json_object_get(e, "code")) ?: "internal",
			  json_string_value(json_object_get(e, "field")), "%s",
			  json_string_value(json_object_get(e, "message")) ?: "no answer");
	return mcp_tool_error(c, &se);
}

/* "<tag>\ntext\n</tag>\n", the shape mcp-run-python's results have. */
static void section(struct ward_buffer *b, const char *tag, const char *s, size_t n)
{
	char open[64];
	snprintf(open, sizeof(open), "<%s>\n", tag);
	ward_buffer_append(b, open, strlen(open));
	ward_buffer_append(b, s, n);
	if (n && s[n - 1] != '\n')
		ward_buffer_append(b, "\n", 1);
	snprintf(open, sizeof(open), "</%s>\n", tag);
	ward_buffer_append(b, open, strlen(open));
}

static void section_json(struct ward_buffer *b, const char *tag, json_t *v)
{
	if (json_is_string(v)) {
		if (json_string_length(v))
			section(b, tag, json_string_value(v), json_string_length(v));
		return;
	}
	char *s = v && !json_is_null(v) ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
	if (s)
		section(b, tag, s, strlen(s));
	free(s);
}

/* The value of the last expression: the last execute_result of the last
 * cell, as text/plain. */
static json_t *return_value(json_t *f)
{
	json_t *cells = json_object_get(f, "cells"), *o, *found = NULL;
	size_t i;
	json_array_foreach(json_object_get(json_array_get(cells, json_array_size(cells) - 1),
					   "outputs"), i, o)
		if (json_is_string(json_object_get(o, "type")) &&
		    strcmp(json_string_value(json_object_get(o, "type")), "execute_result") == 0)
			found = o;
	if (!found)
		return NULL;
	json_t *bundle = json_array_get(json_object_get(f, "results"),
					(size_t)json_integer_value(json_object_get(found, "result")));
	return json_object_get(bundle, "text/plain");
}

static void error_text(struct ward_buffer *b, json_t *err)
{
	struct ward_buffer e = { 0 };
	const char *name = json_string_value(json_object_get(err, "name"));
	const char *value = json_string_value(json_object_get(err, "value"));
	const char *hint = json_string_value(json_object_get(err, "hint"));
	json_t *tb = json_object_get(err, "traceback"), *line;
	size_t i;
	char head[64];
	snprintf(head, sizeof(head), "%s: ", name ? name : "Error");
	ward_buffer_append(&e, head, strlen(head));
	if (value)
		ward_buffer_append(&e, value, strlen(value));
	ward_buffer_append(&e, "\n", 1);
	if (hint) {
		ward_buffer_append(&e, "hint: ", 6);
		ward_buffer_append(&e, hint, strlen(hint));
		ward_buffer_append(&e, "\n", 1);
	}
	json_array_foreach(tb, i, line)
		if (json_is_string(line)) {
			ward_buffer_append(&e, json_string_value(line), json_string_length(line));
			ward_buffer_append(&e, "\n", 1);
		}
	section(b, "error", e.data ? e.data : "", e.len);
	free(e.data);
}

/* A PNG as ImageContent: the kernels send it base64 (Jupyter's form),
 * possibly with line breaks. */
static json_t *image_content(json_t *png)
{
	const char *s = json_string_value(png);
	size_t n = json_string_length(png), k = 0;
	char *clean = malloc(n + 1);
	if (!clean)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (s[i] != '\n' && s[i] != '\r' && s[i] != ' ')
			clean[k++] = s[i];
	json_t *c = json_pack("{s:s, s:s%, s:s}", "type", "image", "data", clean, k, "mimeType",
			      "image/png");
	free(clean);
	return c;
}

/* An execution's final JSON as a tool result. */
static json_t *exec_result(json_t *f)
{
	struct ward_buffer b = { 0 };
	const char *status = json_string_value(json_object_get(f, "status"));
	json_t *limit = json_object_get(f, "limit");
	char line[160];
	snprintf(line, sizeof(line), "<status>%s</status>\n", status ? status : "error");
	ward_buffer_append(&b, line, strlen(line));
	if (json_is_object(limit)) {
		snprintf(line, sizeof(line), "<limit>%s: %lld</limit>\n",
			 json_string_value(json_object_get(limit, "name")) ?: "?",
			 json_integer_value(json_object_get(limit, "value")));
		ward_buffer_append(&b, line, strlen(line));
	}
	section_json(&b, "stdout", json_object_get(f, "stdout"));
	section_json(&b, "stderr", json_object_get(f, "stderr"));
	section_json(&b, "return_value", return_value(f));
	if (json_is_object(json_object_get(f, "error")))
		error_text(&b, json_object_get(f, "error"));
	json_t *pv = json_object_get(f, "policy_violation");
	if (json_is_object(pv))
		section_json(&b, "policy_violation", json_object_get(pv, "message"));
	json_t *content = json_array(), *bundle;
	size_t i;
	/* the text is built from capped parts: the output limit bounds it */
	json_t *t = text_content(b.data ? b.data : "", b.len);
	if (!t) { /* output that is not UTF-8: the JSON kept it escaped */
		char *s = json_dumps(f, JSON_COMPACT);
		t = s ? json_pack("{s:s, s:s}", "type", "text", "text", s) : NULL;
		free(s);
	}
	free(b.data);
	json_array_append_new(content, t);
	json_array_foreach(json_object_get(f, "results"), i, bundle)
		if (json_is_string(json_object_get(bundle, "image/png")))
			json_array_append_new(content, image_content(json_object_get(bundle, "image/png")));
	return tool_result(content, !status || strcmp(status, "ok") != 0);
}

static json_t *json_result(json_t *body)
{
	char *s = json_dumps(body, JSON_COMPACT);
	json_t *r = s ? tool_result(json_pack("[{s:s, s:s}]", "type", "text", "text", s), false)
		      : NULL;
	free(s);
	return r;
}

/* A file's bytes: text when UTF-8, an image for a PNG, else base64. */
static json_t *file_result(struct mcp_call *c)
{
	size_t len;
	const char *sha, *mode;
	char *data = ward_answer_take_file(c->answer, &len, &sha, &mode);
	if (!data)
		return NULL;
	json_t *content = NULL;
	json_t *text = json_stringn(data, len);
	if (text) {
		content = json_pack("[{s:s, s:o}]", "type", "text", "text", text);
	} else {
		size_t n = sodium_base64_encoded_len(len, sodium_base64_VARIANT_ORIGINAL);
		char *b64 = malloc(n);
		if (b64) {
			sodium_bin2base64(b64, n, (const unsigned char *)data, len,
					  sodium_base64_VARIANT_ORIGINAL);
			bool png = len >= 8 && memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0;
			char uri[MCP_PATH_MAX + 32];
			snprintf(uri, sizeof(uri), "file:///workspace/%s", c->path);
			content = png ? json_pack("[{s:s, s:s, s:s}]", "type", "image", "data", b64,
						  "mimeType", "image/png")
				      : json_pack("[{s:s, s:{s:s%, s:s, s:s}}]", "type", "resource",
						  "resource", "uri", uri, strnlen(uri, sizeof(uri)),
						  "mimeType", "application/octet-stream", "blob", b64);
		}
		free(b64);
	}
	free(data);
	return tool_result(content, false);
}

json_t *mcp_call_result(struct mcp_call *c)
{
	if (c->ex)
		return exec_result(ward_execution_result(c->ex));
	unsigned status = ward_answer_status(c->answer);
	json_t *body = ward_answer_body(c->answer);
	if (status >= 400)
		return answer_error(c, status, body);
	return body ? json_result(body) : file_result(c);
}

/* --- the calls --- */

/* The key lacks the scope the HTTP route would need: a tool error. */
static bool scope_missing(struct ward_mcp *m, struct mcp_call *c, unsigned scope, json_t **result)
{
	if (m->key.scopes & scope)
		return false;
	struct ward_service_error se;
	ward_service_fail(&se, 403, "forbidden", "scope", "this key lacks the '%s' scope",
			  ward_keys_scope_name(scope));
	*result = mcp_tool_error(c, &se);
	return true;
}

/* The core's reply: an error or a body now, or an execution or answer to
 * wait for (its reference goes to the call). */
static int take_reply(struct mcp_call *c, struct ward_reply *r, json_t **result)
{
	if (r->err.status)
		*result = mcp_tool_error(c, &r->err);
	else if (r->body)
		*result = json_result(r->body);
	else if (r->ex || r->later) {
		c->ex = r->ex;
		c->answer = r->later;
		r->ex = NULL;
		r->later = NULL;
	} else {
		struct ward_service_error se;
		ward_service_fail(&se, 500, "internal", NULL, "the core gave no answer");
		*result = mcp_tool_error(c, &se);
	}
	ward_reply_release(r);
	return 0;
}

static char *dump(json_t *body, size_t *len)
{
	char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	*len = s ? strlen(s) : 0;
	return s;
}

static int run(struct ward_mcp *m, struct mcp_call *c, json_t *args, json_t **result)
{
	bool py = c->tool->kind == TK_RUN_PYTHON;
	const char *sid = json_string_value(json_object_get(args, "session_id"));
	if (scope_missing(m, c, sid ? WARD_SCOPE_SESSIONS : WARD_SCOPE_EXECUTE, result))
		return 0;
	json_t *body = json_pack("{s:s, s:O}", "language",
				 py ? "python" : json_string_value(json_object_get(args, "language")),
				 "code", json_object_get(args, py ? "python_code" : "code"));
	json_t *v;
	if (body && (v = json_object_get(args, "timeout")))
		json_object_set(body, "timeout", v);
	if (body && (v = json_object_get(args, "global_variables")))
		json_object_set(body, "globals", v);
	size_t len;
	_cleanup_free_ char *s = dump(body, &len);
	struct ward_reply r;
	memset(&r, 0, sizeof(r));
	if (!s)
		ward_service_fail(&r.err, 500, "internal", NULL, "out of memory");
	else if (sid) {
		struct ward_session_call q = { .key = &m->key, .id = sid, .body = s, .len = len };
		ward_session_call(m->svc, &q, true, &r);
	} else {
		ward_service_execute(m->svc, &m->key, s, len, false, &r);
	}
	return take_reply(c, &r, result);
}

static int create(struct ward_mcp *m, struct mcp_call *c, json_t *args, json_t **result)
{
	if (scope_missing(m, c, WARD_SCOPE_SESSIONS, result))
		return 0;
	size_t len;
	_cleanup_free_ char *s = dump(json_deep_copy(args), &len);
	struct ward_reply r;
	memset(&r, 0, sizeof(r));
	struct ward_session_call q = { .key = &m->key, .body = s, .len = len };
	if (!s)
		ward_service_fail(&r.err, 500, "internal", NULL, "out of memory");
	else
		ward_session_create(m->svc, &q, &r);
	/* the session's id under the name the other tools take */
	if (r.body && json_is_string(json_object_get(r.body, "id")))
		json_object_set(r.body, "session_id", json_object_get(r.body, "id"));
	return take_reply(c, &r, result);
}

static int close_session(struct ward_mcp *m, struct mcp_call *c, json_t *args, json_t **result)
{
	if (scope_missing(m, c, WARD_SCOPE_SESSIONS, result))
		return 0;
	struct ward_session_call q = {
		.key = &m->key, .id = json_string_value(json_object_get(args, "session_id")),
	};
	struct ward_reply r;
	ward_session_delete(m->svc, &q, &r);
	return take_reply(c, &r, result);
}

/* write_file's bytes: the content, decoded (heap). NULL with r->err set. */
static char *file_bytes(json_t *args, size_t *len, struct ward_reply *r)
{
	json_t *content = json_object_get(args, "content");
	const char *enc = json_string_value(json_object_get(args, "encoding"));
	size_t n = json_string_length(content);
	char *data = malloc(n + 1);
	if (!data) {
		ward_service_fail(&r->err, 500, "internal", NULL, "out of memory");
		return NULL;
	}
	*len = n;
	if (enc && strcmp(enc, "base64") == 0) {
		if (sodium_base642bin((unsigned char *)data, n + 1, json_string_value(content), n,
				      "\n\r ", len, NULL, sodium_base64_VARIANT_ORIGINAL) != 0) {
			free(data);
			ward_service_fail(&r->err, 400, "invalid_request", "content",
					  "expected base64 (encoding is base64)");
			return NULL;
		}
	} else {
		memcpy(data, json_string_value(content), n);
	}
	return data;
}

static int files(struct ward_mcp *m, struct mcp_call *c, json_t *args, json_t **result)
{
	if (scope_missing(m, c, WARD_SCOPE_FILES, result))
		return 0;
	enum ward_file_op op = c->tool->kind == TK_WRITE ? WARD_FILE_PUT : WARD_FILE_GET;
	const char *path = json_string_value(json_object_get(args, "path"));
	struct ward_session_call q = {
		.key = &m->key, .id = json_string_value(json_object_get(args, "session_id")),
		.path = path, .path_len = path ? strlen(path) : 0,
		.mode = json_string_value(json_object_get(args, "mode")),
	};
	ward_strlcpy(c->path, path ? path : "", sizeof(c->path));
	struct ward_reply r;
	memset(&r, 0, sizeof(r));
	char *data = NULL;
	size_t len = 0;
	if (op == WARD_FILE_PUT) {
		/* the bytes are held until the worker has written them: reserved
		 * in the core as an HTTP upload's are */
		if (!(data = file_bytes(args, &len, &r)))
			return take_reply(c, &r, result);
		if (ward_service_upload_reserve(m->svc, m->key.tenant, len, &r.err) < 0) {
			free(data);
			return take_reply(c, &r, result);
		}
		q.body = data;
		q.len = len;
	}
	ward_session_files(m->svc, &q, op, &r);
	if (op == WARD_FILE_PUT && !r.took_body) {
		ward_service_upload_release(m->svc, m->key.tenant, len);
		free(data);
	}
	return take_reply(c, &r, result);
}

int mcp_tool_call(struct ward_mcp *m, struct mcp_call *c, json_t *params, json_t **result,
		  struct mcp_rpc_error *e)
{
	json_t *name = json_object_get(params, "name");
	json_t *args = json_object_get(params, "arguments");
	char q[MCP_QUOTE_MAX + 1];
	if (!json_is_string(name))
		return mcp_rpc_fail(e, MCP_INVALID_PARAMS, "name", "invalid params: name: %s",
				    name ? "expected a string" : "required");
	for (size_t i = 0; i < ARRAY_SIZE(tools); i++)
		if (strcmp(json_string_value(name), tools[i].name) == 0)
			c->tool = &tools[i];
	if (!c->tool)
		return mcp_rpc_fail(e, MCP_INVALID_PARAMS, "name", "invalid params: name: unknown "
				    "tool '%s'", mcp_quote(json_string_value(name), q));
	if (args && !json_is_object(args))
		return mcp_rpc_fail(e, MCP_INVALID_PARAMS, "arguments",
				    "invalid params: arguments: expected an object");
	json_t *empty = args ? NULL : json_object();
	if (!args)
		args = empty;
	int rc = check_args(c->tool, args, e);
	if (rc == 0) {
		switch (c->tool->kind) {
		case TK_RUN_PYTHON:
		case TK_RUN_CODE: rc = run(m, c, args, result); break;
		case TK_CREATE: rc = create(m, c, args, result); break;
		case TK_CLOSE: rc = close_session(m, c, args, result); break;
		case TK_WRITE:
		case TK_READ:
		case TK_LIST: rc = files(m, c, args, result); break;
		}
	}
	json_decref(empty);
	return rc;
}
