/* lib/service/calls.c — requests on a live session: run code in a
 * context (a cell, or a function call with globals), run a command (foreground or background), a background
 * command's status or kill, and the files API's entry.
 *
 * One call at a time (409 session_busy otherwise); an agent that has not
 * read what it was sent refuses more (503 agent_busy) and is ended if it
 * reads none of it for a while (ttl.c). Every call is audited with its
 * code or command as size and hash.
 */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/util.h"
#include "session.h"

static int start_call(struct session *se, const struct ward_session_call *q, enum exec_kind kind,
		      const char *type, json_t *content, const char *lang, const char *context,
		      uint64_t timeout_ms, struct ward_reply *out)
{
	struct ward_service *s = se->s;
	const struct ward_key_info *key = q->key;
	if (se->fg)
		return svc_reply_error(out, 409, "session_busy", NULL,
			    "session %s is running another call (%s); wait for it or cancel it "
			    "(DELETE /v1/executions/%s)", se->id, ward_execution_id(se->fg), ward_execution_id(se->fg));
	struct ward_policy p;
	struct ward_error err;
	if (ward_policy_copy(&p, &se->call, &err) < 0)
		return svc_reply_error(out, 500, "internal", NULL, "out of memory");
	p.timeout_ms = timeout_ms;
	bool stream = q->stream;
	struct ward_execution *ex = exec_new_in_session(s, se, key, kind, lang, context, &p, stream);
	ward_policy_release(&p);
	if (!ex)
		return svc_reply_error(out, 500, "internal", NULL, "out of memory");
	char id[WARD_KERNEL_ID_SIZE];
	json_object_set_new(content, "timeout_ms", json_integer((json_int_t)timeout_ms));
	ward_kernel_new_budget(se->k);
	int r = ward_kernel_send(se->k, type, content, id, &err);
	ward_sandbox_stats(session_sandbox(se), &se->before);
	se->fg = ex;
	se->fg_timeout_ms = timeout_ms;
	se->fg_interrupted = false;
	se->n_calls++;
	exec_set_session_request(ex, id);
	json_t *f = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s?, s:s?}", "execution_id", ward_execution_id(ex),
			      "session_id", se->id, "key_id", key->id, "tenant", key->tenant, "kind",
			      kind == EXK_EXECUTE ? "execute" : kind == EXK_CALL ? "call" : "command",
			      "language", lang,
			      "context", context);
	if (f) {
		bool full = s->audit && ward_audit_full_text(s->audit);
		json_t *code = json_object_get(content, kind == EXK_COMMAND ? "cmd" : "code");
		char *txt = json_is_string(code) ? strdup(json_string_value(code))
						 : json_dumps(code, JSON_COMPACT | JSON_ENCODE_ANY);
		if (txt)
			ward_audit_text(f, kind == EXK_COMMAND ? "command" : "code", txt, strlen(txt), full);
		free(txt);
		svc_audit(s, "session.call", f);
		json_decref(f);
	}
	out->ex = ex;
	out->stream = stream;
	if (r < 0) /* the sandbox is gone: the next step ends the call */
		se->wake_ns = ward_now_ns();
	else
		sess_sync_fds(se);
	return 0;
}

/* A call's timeout: the session's, or the body's "timeout" within it; 0,
 * or -1 with e naming the field. */
static int check_timeout(json_t *root, const struct session *se, uint64_t *timeout,
			 struct ward_service_error *e)
{
	json_t *t = json_object_get(root, "timeout");
	*timeout = se->call.timeout_ms;
	if (t && svc_parse_seconds(t, se->call.timeout_ms, timeout) < 0)
		return ward_service_fail(e, 400, "invalid_request", "timeout",
					 "expected seconds, above 0 and within the session's limit "
					 "(%llu ms)", (unsigned long long)se->call.timeout_ms);
	return 0;
}

/* An execute body's fields: 0, or -1 with e naming the field. */
static int check_execute(json_t *root, const struct session *se, const char **lname,
			 const char **cname, uint64_t *timeout, struct ward_service_error *e)
{
	json_t *code = json_object_get(root, "code"), *lang = json_object_get(root, "language");
	json_t *ctx = json_object_get(root, "context");
	*lname = lang ? json_string_value(lang) : "python";
	*cname = ctx ? json_string_value(ctx) : "default";
	if (!json_is_string(code) || strlen(json_string_value(code)) != json_string_length(code))
		return ward_service_fail(e, 400, "invalid_request", "code",
					 "expected a string without NUL characters");
	if (!*lname || ward_lang_from_name(*lname) < 0)
		return ward_service_fail(e, 400, "invalid_request", "language",
					 "expected \"python\", \"node\" or \"bash\"");
	if (!*cname || !sess_name_ok(*cname, 64))
		return ward_service_fail(e, 400, "invalid_request", "context",
					 "expected a name of 1-64 characters from [A-Za-z0-9._-]");
	return check_timeout(root, se, timeout, e);
}

/* The agent's request for an execute body: a cell, or (function set) a
 * call of the code's function in the same context; globals with either. */
static json_t *execute_content(json_t *root, const char *lname, const char *cname,
			       const char *function, json_t *args)
{
	json_t *code = json_object_get(root, "code"), *globals = json_object_get(root, "globals");
	char name[16];
	snprintf(name, sizeof(name), "tool%s",
		 ward_lang_extension((enum ward_lang)ward_lang_from_name(lname)));
	/* every call stands alone: an error never aborts the next one */
	json_t *c = function ? json_pack("{s:O, s:s, s:s, s:s, s:s, s:o}", "code", code, "language",
					 lname, "context", cname, "filename", name, "function",
					 function, "args", args ? json_incref(args) : json_object())
			     : json_pack("{s:O, s:s, s:s, s:b}", "code", code, "language", lname,
					 "context", cname, "stop_on_error", 0);
	if (c && globals)
		json_object_set(c, "globals", globals);
	return c;
}

static int execute(struct session *se, const struct ward_session_call *q, struct ward_reply *out)
{
	static const char *const known[] = { "code", "language", "context", "timeout", "function",
					     "args", "globals" };
	json_t *root = sess_parse_body(out, q->body, q->len, known, ARRAY_SIZE(known));
	const char *lname, *cname, *function = NULL;
	json_t *args = NULL;
	uint64_t timeout;
	if (!root || check_execute(root, se, &lname, &cname, &timeout, &out->err) < 0 ||
	    svc_parse_function(root, ward_lang_from_name(lname), &function, &args, &out->err) < 0 ||
	    svc_parse_globals(json_object_get(root, "globals"), ward_lang_from_name(lname),
			      &out->err) < 0) {
		json_decref(root);
		return 0;
	}
	json_t *content = execute_content(root, lname, cname, function, args);
	if (content)
		start_call(se, q, function ? EXK_CALL : EXK_EXECUTE,
			   function ? "call_request" : "execute_request", content, lname, cname,
			   timeout, out);
	else
		svc_reply_error(out, 500, "internal", NULL, "out of memory");
	json_decref(content);
	json_decref(root);
	return 0;
}

/* A command body's fields: 0, or -1 with e naming the field. */
static int check_cmd(json_t *root, const struct session *se, uint64_t *timeout,
		     struct ward_service_error *e)
{
	json_t *cmd = json_object_get(root, "cmd"), *env = json_object_get(root, "env");
	json_t *cwd = json_object_get(root, "cwd"), *bg = json_object_get(root, "background");
	if (json_is_string(cmd)) {
		if (!json_string_length(cmd) || strlen(json_string_value(cmd)) != json_string_length(cmd))
			return ward_service_fail(e, 400, "invalid_request", "cmd",
						 "expected a non-empty string without NUL characters");
	} else if (json_is_array(cmd) && json_array_size(cmd) > 0 && json_array_size(cmd) <= 4096) {
		size_t i;
		json_t *a;
		json_array_foreach(cmd, i, a)
			if (!json_is_string(a) || strlen(json_string_value(a)) != json_string_length(a))
				return ward_service_fail(e, 400, "invalid_request", "cmd",
							 "expected strings without NUL characters");
	} else {
		return ward_service_fail(e, 400, "invalid_request", "cmd",
					 "expected a shell command (a string) or an argv (an array "
					 "of strings)");
	}
	if (env) {
		const char *k;
		json_t *v;
		if (!json_is_object(env) || json_object_size(env) > 1024)
			return ward_service_fail(e, 400, "invalid_request", "env",
						 "expected an object of strings");
		json_object_foreach(env, k, v)
			if (!json_is_string(v) || !*k || strchr(k, '=') ||
			    strlen(json_string_value(v)) != json_string_length(v) ||
			    strcmp(k, "WARD_KERNEL_CONFIG") == 0)
				return ward_service_fail(e, 400, "invalid_request", "env",
							 "expected names without '=' and string values");
	}
	if (cwd && (!json_is_string(cwd) || !json_string_length(cwd) ||
		    strlen(json_string_value(cwd)) != json_string_length(cwd)))
		return ward_service_fail(e, 400, "invalid_request", "cwd", "expected a path");
	if (bg && !json_is_boolean(bg))
		return ward_service_fail(e, 400, "invalid_request", "background",
					 "expected true or false");
	return check_timeout(root, se, timeout, e);
}

/* A background command: the agent's answer comes later. */
static void background(struct session *se, const struct ward_session_call *q, json_t *content,
		       uint64_t timeout, struct ward_reply *out)
{
	json_t *cmd = json_object_get(content, "cmd");
	json_object_set_new(content, "timeout_ms", json_integer((json_int_t)timeout));
	out->later = sess_ask(se, PEND_BG_START, "command_request", content);
	if (!out->later) {
		svc_reply_error(out, 410, "session_ended", "id", "the session's sandbox has ended");
		return;
	}
	json_t *f = json_pack("{s:s, s:s, s:s, s:s}", "session_id", se->id, "key_id", q->key->id,
			      "tenant", q->key->tenant, "kind", "background_command");
	char *txt = json_is_string(cmd) ? strdup(json_string_value(cmd))
					: json_dumps(cmd, JSON_COMPACT);
	if (f && txt)
		ward_audit_text(f, "command", txt, strlen(txt),
				se->s->audit && ward_audit_full_text(se->s->audit));
	free(txt);
	svc_audit(se->s, "session.call", f);
	json_decref(f);
}

static int command(struct session *se, const struct ward_session_call *q, struct ward_reply *out)
{
	static const char *const known[] = { "cmd", "env", "cwd", "timeout", "background" };
	json_t *root = sess_parse_body(out, q->body, q->len, known, ARRAY_SIZE(known));
	uint64_t timeout;
	if (!root || check_cmd(root, se, &timeout, &out->err) < 0) {
		json_decref(root);
		return 0;
	}
	json_t *bg = json_object_get(root, "background");
	json_t *content = json_pack("{s:O, s:O?, s:O?, s:b}", "cmd", json_object_get(root, "cmd"),
				    "env", json_object_get(root, "env"), "cwd",
				    json_object_get(root, "cwd"), "background", json_is_true(bg));
	if (!content)
		svc_reply_error(out, 500, "internal", NULL, "out of memory");
	else if (json_is_true(bg))
		background(se, q, content, timeout, out);
	else
		start_call(se, q, EXK_COMMAND, "command_request", content, NULL, NULL, timeout, out);
	json_decref(content);
	json_decref(root);
	session_touch(se);
	return 0;
}

static int command_op(struct session *se, struct ward_reply *out, bool kill, const char *cid)
{
	if (!sess_name_ok(cid, 31))
		return svc_reply_error(out, 404, "not_found", "command_id", "no such command in this session");
	json_t *content = json_pack("{s:s}", "command_id", cid);
	out->later = content ? sess_ask(se, kill ? PEND_KILL : PEND_STATUS,
				   kill ? "command_kill_request" : "command_status_request", content)
			     : NULL;
	json_decref(content);
	session_touch(se);
	return out->later ? 0 : svc_reply_error(out, 410, "session_ended", "id", "the session's sandbox has ended");
}

/* The live session a call names, whose agent can take a request (agent
 * set) or whose workspace can be reached; NULL after answering. */
static struct session *callable(struct ward_service *s, const struct ward_session_call *q,
				bool agent, struct ward_reply *out)
{
	struct session *se = sess_find(s, q->key, q->id);
	if (!se) {
		svc_reply_error(out, 404, "not_found", "id", "no such session");
		return NULL;
	}
	if (!se->live) {
		sess_gone(out, se);
		return NULL;
	}
	if (agent && se->k && ward_kernel_unsent(se->k) > AGENT_UNSENT_MAX) {
		sess_check_stall(se, ward_now_ns());
		if (!se->live)
			sess_gone(out, se);
		else
			svc_reply_error(out, 503, "agent_busy", NULL,
					"session %s: its agent has not read %zu bytes of earlier "
					"requests; retry later (it is ended if it reads none for %d s)",
					se->id, ward_kernel_unsent(se->k), AGENT_STALL_MS / 1000);
		return NULL;
	}
	return se;
}

int ward_session_files(struct ward_service *s, const struct ward_session_call *q,
		       enum ward_file_op op, struct ward_reply *out)
{
	memset(out, 0, sizeof(*out));
	struct session *se = callable(s, q, false, out);
	if (!se)
		return 0;
	if (!(q->key->scopes & WARD_SCOPE_FILES)) /* checked before; kept where it is used */
		return svc_reply_error(out, 403, "forbidden", "scope", "this key lacks the 'files' scope");
	session_touch(se);
	/* an upload's body is the front end's heap copy: its job takes it */
	return files_route(s, q, se, op, out);
}

int ward_session_command(struct ward_service *s, const struct ward_session_call *q, bool kill,
			 struct ward_reply *out)
{
	memset(out, 0, sizeof(*out));
	struct session *se = callable(s, q, true, out);
	return se ? command_op(se, out, kill, q->command_id) : 0;
}

int ward_session_call(struct ward_service *s, const struct ward_session_call *q, bool exec,
		      struct ward_reply *out)
{
	memset(out, 0, sizeof(*out));
	struct session *se = callable(s, q, true, out);
	if (!se)
		return 0;
	if (s->stopping)
		return svc_reply_error(out, 503, "shutting_down", NULL, "the daemon is shutting down");
	session_touch(se);
	return exec ? execute(se, q, out) : command(se, q, out);
}
