/* lib/service/request.c — an execution request's body: JSON in, a checked
 * request out.
 *
 * Everything a client sends is parsed and checked here, before any sandbox
 * exists: the language or argv, a function call (its name's syntax, its
 * args' shape), the globals (identifiers, bounded), inline artifacts
 * (within the operator's cap), the files (confined to /workspace), the
 * policy overrides (on a copy of the daemon's default policy, never above
 * its limits, never host mounts) and the timeout. Every refusal names the
 * field. It must never trust a length, a path or an encoding it was given.
 */
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "internal.h"
#include "ward/egress.h"
#include "workspace.h"

enum {
	MAX_FILES = 256,
	MAX_ARGS = 4096,
	MAX_FUNCTION = 256,          /* bytes of a "function" name */
	MAX_GLOBALS = 1024,          /* names in "globals" */
	MAX_GLOBAL_NAME = 128,       /* bytes of one name */
	MAX_GLOBALS_BYTES = 4 << 20, /* "globals" as compact JSON */
};

void exec_request_release(struct exec_request *r)
{
	for (size_t i = 0; i < r->n_cells; i++)
		free(r->cells[i]);
	free(r->cells);
	free(r->call_source);
	free(r->call_filename);
	free(r->call_function);
	json_decref(r->call_args);
	json_decref(r->globals);
	free(r->artifacts_dir);
	if (r->argv)
		for (size_t i = 0; r->argv[i]; i++)
			free(r->argv[i]);
	free(r->argv);
	for (size_t i = 0; i < r->n_files; i++) {
		free((void *)r->files[i].path);
		free((void *)r->files[i].data);
	}
	free(r->files);
	ward_policy_release(&r->policy);
	ward_egress_credentials_free(r->creds, r->n_creds);
	memset(r, 0, sizeof(*r));
}

static int fail(struct ward_service_error *e, const char *field, const char *msg)
{
	return ward_service_fail(e, 400, "invalid_request", field, "%s", msg);
}

/* "unknown field; known fields: language, code, ..." */
static int unknown_field(const char *field, const char *const *known, size_t n, struct ward_service_error *e)
{
	char msg[512] = "unknown field; known fields: ";
	for (size_t i = 0; i < n; i++) {
		ward_strlcat(msg, known[i], sizeof(msg));
		ward_strlcat(msg, i + 1 < n ? ", " : "", sizeof(msg));
	}
	return fail(e, field, msg);
}

static int parse_argv(struct exec_request *r, json_t *cmd, struct ward_service_error *e)
{
	size_t n = json_array_size(cmd);
	if (!json_is_array(cmd) || n == 0 || n > MAX_ARGS)
		return fail(e, "command", "expected a non-empty array of strings");
	r->argv = calloc(n + 1, sizeof(char *));
	if (!r->argv)
		return fail(e, "command", "out of memory");
	for (size_t i = 0; i < n; i++) {
		json_t *a = json_array_get(cmd, i);
		if (!json_is_string(a) || strlen(json_string_value(a)) != json_string_length(a))
			return fail(e, "command", "expected strings without NUL bytes");
		if (!(r->argv[i] = strdup(json_string_value(a))))
			return fail(e, "command", "out of memory");
	}
	return 0;
}

bool srv_path_ok(const char *p)
{
	return ward_workspace_path_ok(p); /* the library's rule, the only one */
}

static int parse_file(struct ward_file *f, json_t *o, size_t i, struct ward_service_error *e)
{
	char field[64];
	snprintf(field, sizeof(field), "files.%zu", i);
	const char *path = json_string_value(json_object_get(o, "path"));
	json_t *content = json_object_get(o, "content");
	const char *enc = json_string_value(json_object_get(o, "encoding"));
	static const char *const known[] = { "path", "content", "encoding" };
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v)
		if (strcmp(key, "path") && strcmp(key, "content") && strcmp(key, "encoding")) {
			snprintf(field, sizeof(field), "files.%zu.%.32s", i, key);
			return unknown_field(field, known, ARRAY_SIZE(known), e);
		}
	if (!json_object_get(o, "path"))
		return fail(e, field, "path: required");
	if (!path || !srv_path_ok(path))
		return fail(e, field, "path: expected a relative path inside /workspace, without '..'");
	if (!content)
		return fail(e, field, "content: required");
	if (!json_is_string(content))
		return fail(e, field, "content: expected a string");
	if (enc && strcmp(enc, "utf-8") && strcmp(enc, "base64"))
		return fail(e, field, "encoding: expected \"utf-8\" or \"base64\"");
	size_t n = json_string_length(content), len = n;
	char *data = malloc(n + 1);
	if (!data)
		return fail(e, field, "out of memory");
	if (enc && strcmp(enc, "base64") == 0) {
		if (sodium_base642bin((unsigned char *)data, n + 1, json_string_value(content), n,
				      "\n\r ", &len, NULL, sodium_base64_VARIANT_ORIGINAL) != 0) {
			free(data);
			return fail(e, field, "content: invalid base64");
		}
	} else {
		memcpy(data, json_string_value(content), n);
	}
	f->data = data;
	f->len = len;
	f->mode = 0644;
	if (!(f->path = strdup(path)))
		return fail(e, field, "out of memory");
	return 0;
}

static int parse_files(struct exec_request *r, json_t *files, struct ward_service_error *e)
{
	size_t n = json_array_size(files);
	if (!json_is_array(files) || n > MAX_FILES)
		return fail(e, "files", "expected an array of at most 256 {path, content, encoding}");
	if (!n)
		return 0;
	r->files = calloc(n, sizeof(*r->files));
	if (!r->files)
		return fail(e, "files", "out of memory");
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_array_get(files, i);
		if (!json_is_object(o)) {
			char field[32];
			snprintf(field, sizeof(field), "files.%zu", i);
			return fail(e, field, "expected an object {path, content, encoding}");
		}
		if (parse_file(&r->files[r->n_files], o, i, e) < 0) {
			r->n_files++; /* its path and data are released with the rest */
			return -1;
		}
		r->n_files++;
	}
	return 0;
}

/* The library names the field it refused in err->field ("limits.memory");
 * in a request body it sits under "policy". */
static int policy_fail(const struct ward_error *err, struct ward_service_error *e)
{
	char field[WARD_ERROR_FIELD_MAX + 8] = "policy";
	if (err->field[0])
		snprintf(field, sizeof(field), "policy.%s", err->field);
	if (!err->hint[0])
		return fail(e, field, err->message);
	char msg[WARD_ERROR_MSG_MAX + WARD_ERROR_HINT_MAX + 8];
	snprintf(msg, sizeof(msg), "%s; %s", err->message, err->hint);
	return fail(e, field, msg);
}

int svc_parse_policy(struct ward_service *s, struct ward_policy *p, json_t *pol, struct ward_service_error *e)
{
	struct ward_error err;
	ward_error_clear(&err);
	if (ward_policy_copy(p, &s->policy, &err) < 0)
		return fail(e, "policy", "out of memory");
	if (pol) {
		if (!json_is_object(pol))
			return fail(e, "policy", "expected an object");
		/* host paths and weaker isolation are the operator's choice only */
		const char *forbidden[] = { "mounts", "allow_degraded", "image" };
		for (size_t i = 0; i < ARRAY_SIZE(forbidden); i++)
			if (json_object_get(pol, forbidden[i])) {
				char field[64];
				snprintf(field, sizeof(field), "policy.%s", forbidden[i]);
				return fail(e, field, "may not be set through the API");
			}
		char *txt = json_dumps(pol, JSON_COMPACT);
		int rc = txt ? ward_policy_load_json(p, txt, strlen(txt), "policy", &err) : -ENOMEM;
		free(txt);
		if (rc < 0)
			return policy_fail(&err, e);
	}
	/* every field, by the policy library's own table: an override may
	 * only tighten what the operator set */
	if (ward_policy_validate(p, &err) < 0 || ward_policy_check_tighter(&s->policy, p, &err) < 0)
		return policy_fail(&err, e);
	return 0;
}

static int parse_timeout(struct ward_service *s, struct exec_request *r, json_t *t, struct ward_service_error *e)
{
	if (t && svc_parse_seconds(t, s->policy.timeout_ms, &r->policy.timeout_ms) < 0) {
		char lim[32], msg[128];
		snprintf(msg, sizeof(msg), "expected seconds, above 0 and at most %s (the daemon's limit)",
			 ward_format_duration_ms(s->policy.timeout_ms, lim, sizeof(lim)));
		return fail(e, "timeout", msg);
	}
	return 0;
}

json_t *svc_parse_object(const char *body, size_t len, const char *const *known, size_t n_known,
			 struct ward_service_error *e)
{
	json_error_t je;
	json_t *root = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		char msg[256];
		enum json_error_code jc = json_error_code(&je);
		/* jansson's own text names its flag (JSON_ALLOW_NUL) here */
		bool nul = jc == json_error_null_character || jc == json_error_null_byte_in_key;
		snprintf(msg, sizeof(msg), "invalid JSON at line %d, column %d: %s", je.line,
			 je.column, nul ? "strings must not contain \\u0000" : je.text);
		ward_service_fail(e, 400, "invalid_json", NULL, "%s", msg);
		return NULL;
	}
	const char *key;
	json_t *v;
	if (!json_is_object(root)) {
		fail(e, NULL, "expected a JSON object");
		json_decref(root);
		return NULL;
	}
	json_object_foreach(root, key, v) {
		bool ok = false;
		for (size_t i = 0; i < n_known; i++)
			ok = ok || strcmp(key, known[i]) == 0;
		if (!ok) {
			char field[64];
			snprintf(field, sizeof(field), "%.60s", key);
			unknown_field(field, known, n_known, e);
			json_decref(root);
			return NULL;
		}
	}
	return root;
}

int svc_parse_seconds(json_t *v, uint64_t max_ms, uint64_t *out)
{
	double sec = json_number_value(v);
	if (!json_is_number(v) || !(sec > 0) || sec * 1000 > (double)max_ms)
		return -1;
	*out = (uint64_t)(sec * 1000) ? (uint64_t)(sec * 1000) : 1;
	return 0;
}

/* An identifier of python and node alike: ASCII letters, digits, '_'
 * (and '$' for node), not starting with a digit. */
static bool ident_ok(const char *p, size_t len, bool dollar)
{
	if (!len || (*p >= '0' && *p <= '9'))
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = p[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || (dollar && c == '$')))
			return false;
	}
	return true;
}

int svc_parse_function(json_t *root, int lang, const char **function, json_t **args,
		       struct ward_service_error *e)
{
	json_t *f = json_object_get(root, "function"), *a = json_object_get(root, "args");
	*function = NULL;
	*args = NULL;
	if (!f) {
		return a ? fail(e, "args", "only with function (the function or Class.method to "
				"call)") : 0;
	}
	const char *name = json_string_value(f);
	size_t len = name ? strlen(name) : 0;
	bool ok = name && len == json_string_length(f) && len <= MAX_FUNCTION;
	for (const char *p = name; ok && p;) {
		const char *dot = strchr(p, '.');
		ok = ident_ok(p, dot ? (size_t)(dot - p) : strlen(p), lang == WARD_LANG_NODE);
		p = dot ? dot + 1 : NULL;
	}
	if (!ok)
		return fail(e, "function", "expected a function's name or Class.method: identifiers "
			    "joined by '.', at most 256 bytes");
	if (lang != WARD_LANG_PYTHON && lang != WARD_LANG_NODE)
		return fail(e, "function", "function-call mode is available for python and node, "
			    "not for this language");
	if (a && !json_is_object(a) && !json_is_array(a))
		return fail(e, "args", "expected an object (keyword arguments) or an array "
			    "(positional arguments)");
	*function = name;
	*args = a;
	return 0;
}

int svc_parse_globals(json_t *v, int lang, struct ward_service_error *e)
{
	if (!v)
		return 0;
	if (lang != WARD_LANG_PYTHON && lang != WARD_LANG_NODE)
		return fail(e, "globals", "globals are available for python and node, not for this "
			    "language (or a command)");
	if (!json_is_object(v) || json_object_size(v) > MAX_GLOBALS)
		return fail(e, "globals", "expected an object of at most 1024 names and JSON values");
	const char *k;
	json_t *x;
	json_object_foreach(v, k, x) {
		size_t n = strlen(k);
		/* dunder names are the interpreter's (__builtins__, __name__) */
		bool dunder = n >= 4 && strncmp(k, "__", 2) == 0 && strcmp(k + n - 2, "__") == 0;
		if (!ident_ok(k, n, lang == WARD_LANG_NODE) || n > MAX_GLOBAL_NAME || dunder) {
			char field[64];
			snprintf(field, sizeof(field), "globals.%.40s", k);
			return fail(e, field, "expected an identifier (letters, digits and '_', not "
				    "starting with a digit, at most 128 bytes, not a __dunder__ name)");
		}
	}
	char *txt = json_dumps(v, JSON_COMPACT);
	size_t len = txt ? strlen(txt) : 0;
	free(txt);
	if (!txt)
		return fail(e, "globals", "out of memory");
	if (len > MAX_GLOBALS_BYTES)
		return fail(e, "globals", "too large: at most 4 MiB as JSON");
	return 0;
}

/* "function" and "args": the code becomes the tool's source. */
static int parse_call(struct exec_request *r, json_t *root, struct ward_service_error *e)
{
	const char *function;
	json_t *args;
	if (r->lang < 0 && json_object_get(root, "function"))
		return fail(e, "function", "give language and code (the tool's source) with function, "
			    "not command");
	if (svc_parse_function(root, r->lang, &function, &args, e) < 0)
		return -1;
	if (!function)
		return 0;
	char name[16];
	snprintf(name, sizeof(name), "tool%s", ward_lang_extension((enum ward_lang)r->lang));
	r->call_source = r->cells[0];
	r->cells[0] = NULL;
	r->n_cells = 0;
	r->call_args = args ? json_incref(args) : json_object();
	if (!(r->call_function = strdup(function)) || !(r->call_filename = strdup(name)) ||
	    !r->call_args)
		return fail(e, "function", "out of memory");
	return 0;
}

/* "artifacts": {"inline": true, "max_bytes": N}, within the operator's cap. */
static int parse_artifacts(struct ward_service *s, struct exec_request *r, json_t *v,
			   struct ward_service_error *e)
{
	static const char *const known[] = { "inline", "max_bytes" };
	if (!v)
		return 0;
	if (!json_is_object(v))
		return fail(e, "artifacts", "expected an object {\"inline\": true, \"max_bytes\": N}");
	const char *k;
	json_t *x;
	json_object_foreach(v, k, x)
		if (strcmp(k, "inline") && strcmp(k, "max_bytes")) {
			char field[64];
			snprintf(field, sizeof(field), "artifacts.%.40s", k);
			return unknown_field(field, known, ARRAY_SIZE(known), e);
		}
	json_t *in = json_object_get(v, "inline"), *max = json_object_get(v, "max_bytes");
	if (in && !json_is_boolean(in))
		return fail(e, "artifacts.inline", "expected true or false");
	if (max && (!json_is_integer(max) || json_integer_value(max) < 0))
		return fail(e, "artifacts.max_bytes", "expected a number of bytes, 0 or more");
	if (r->lang < 0 && json_is_true(in))
		return fail(e, "artifacts.inline", "only for language and code (a command's files "
			    "are not collected)");
	r->inline_artifacts = json_is_true(in);
	uint64_t cap = s->cfg.artifacts_inline_max;
	r->inline_max = max && (uint64_t)json_integer_value(max) < cap
				? (uint64_t)json_integer_value(max) : cap;
	return 0;
}

static int parse_body(struct ward_service *s, const struct ward_key_info *key, json_t *root,
		      struct exec_request *r, struct ward_service_error *e)
{
	json_t *lang = json_object_get(root, "language"), *code = json_object_get(root, "code");
	json_t *cmd = json_object_get(root, "command");
	r->lang = -1;
	if (cmd && (lang || code))
		return fail(e, "command", "give either command, or language and code");
	if (cmd) {
		if (parse_argv(r, cmd, e) < 0)
			return -1;
	} else {
		if (!lang && !code)
			return fail(e, "language", "required: give language and code, or command");
		if (!lang)
			return fail(e, "language", "required with code: \"python\", \"node\" or \"bash\"");
		if (!json_is_string(lang) || ward_lang_from_name(json_string_value(lang)) < 0)
			return fail(e, "language", "expected \"python\", \"node\" or \"bash\"");
		if (!code)
			return fail(e, "code", "required with language");
		if (!json_is_string(code) || strlen(json_string_value(code)) != json_string_length(code))
			return fail(e, "code", "expected a string without NUL characters");
		r->lang = ward_lang_from_name(json_string_value(lang));
		if (!(r->cells = calloc(1, sizeof(*r->cells))) ||
		    !(r->cells[0] = strdup(json_string_value(code))))
			return fail(e, "code", "out of memory");
		r->n_cells = 1;
	}
	if (parse_call(r, root, e) < 0)
		return -1;
	json_t *g = json_object_get(root, "globals");
	if (svc_parse_globals(g, r->lang, e) < 0)
		return -1;
	r->globals = json_incref(g);
	if (parse_artifacts(s, r, json_object_get(root, "artifacts"), e) < 0)
		return -1;
	json_t *files = json_object_get(root, "files");
	if (files && parse_files(r, files, e) < 0)
		return -1;
	if (svc_parse_policy(s, &r->policy, json_object_get(root, "policy"), e) < 0)
		return -1;
	if (svc_parse_credentials(key, json_object_get(root, "credentials"), &r->creds,
				  &r->n_creds, e) < 0)
		return -1;
	return parse_timeout(s, r, json_object_get(root, "timeout"), e);
}

int exec_request_parse(struct ward_service *s, const struct ward_key_info *key, const char *body,
		       size_t len, struct exec_request *r, struct ward_service_error *e)
{
	static const char *const known[] = { "language", "code", "command", "function", "args",
					     "globals", "artifacts", "files", "policy", "timeout",
					     "credentials" };
	memset(r, 0, sizeof(*r));
	json_t *root = svc_parse_object(body, len, known, ARRAY_SIZE(known), e);
	if (!root)
		return -1;
	int rc = parse_body(s, key, root, r, e);
	json_decref(root);
	if (rc < 0)
		exec_request_release(r);
	return rc;
}

int exec_request_from_spec(struct exec_request *r, struct ward_exec_spec *spec)
{
	memset(r, 0, sizeof(*r));
	r->policy = spec->policy;
	r->lang = spec->lang;
	r->cells = spec->cells;
	r->n_cells = spec->n_cells;
	r->keep_going = spec->keep_going;
	r->call_source = spec->call_source;
	r->call_filename = spec->call_filename;
	r->call_function = spec->call_function;
	r->call_args = spec->call_args;
	r->files = spec->files;
	r->n_files = spec->n_files;
	r->events = spec->events;
	r->anonymous = true;
	r->artifacts_dir = spec->artifacts_dir ? strdup(spec->artifacts_dir) : NULL;
	bool nomem = spec->artifacts_dir && !r->artifacts_dir;
	memset(spec, 0, sizeof(*spec)); /* taken over */
	if (r->call_function && !r->call_args && !(r->call_args = json_object()))
		nomem = true;
	if (nomem)
		return -ENOMEM;
	return r->lang < 0 || (!r->n_cells && !r->call_function) ? -EINVAL : 0;
}
