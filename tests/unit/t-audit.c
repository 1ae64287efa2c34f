/* tests/unit/t-audit.c — the audit log: chain, concurrency, tampering.
 *
 * Writes 100 records from several threads and a second process at once and
 * verifies them; then checks that copies with a line edited, deleted,
 * swapped, duplicated, rewritten (hash recomputed) or truncated are caught at
 * exactly the right line with the right reason; that a writer refuses a
 * broken tail unless forced; that a short write is rolled back; and that
 * code and output are kept by size and sha256 unless full_text. Lines are
 * also checked against the documented hash rule, implemented here again.
 */
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "server/audit.h"
#include "tap.h"
#include "base/util.h"

enum { N_THREADS = 4, PER_THREAD = 15, CHILD_RECORDS = 40, N_LINES = 100, MAX_LINES = 256 };

static char dir[200];
static char log_path[256];

struct lines {
	char *data;               /* the file, NUL-terminated */
	char *line[MAX_LINES];    /* into data, each NUL-terminated (its '\n' replaced) */
	size_t n;
};

static void load_lines(const char *path, struct lines *l)
{
	size_t len;
	memset(l, 0, sizeof(*l));
	if (ward_read_file(path, 64 << 20, &l->data, &len) < 0)
		return;
	for (char *p = l->data; *p && l->n < MAX_LINES;) {
		char *nl = strchr(p, '\n');
		l->line[l->n++] = p;
		if (!nl)
			break;
		*nl = '\0';
		p = nl + 1;
	}
}

/* Writes lines[order[i]] for each i (a negative index ends the list), each
 * with a '\n' unless it is the last and cut_newline. */
static void write_lines(const char *path, const struct lines *l, const int *order,
			bool cut_newline)
{
	FILE *f = fopen(path, "we");
	for (size_t i = 0; order[i] >= 0; i++)
		fprintf(f, "%s%s", l->line[order[i]], cut_newline && order[i + 1] < 0 ? "" : "\n");
	fclose(f);
}

/* 0, 1, ..., n-1 and the terminator, for editing. */
static void identity(int *order, size_t n)
{
	for (size_t i = 0; i < n; i++)
		order[i] = (int)i;
	order[n] = -1;
}

static void remove_at(int *order, size_t at)
{
	do
		order[at] = order[at + 1];
	while (order[at++] >= 0);
}

static void verify(const char *path, const char *genesis, struct ward_audit_report *rep)
{
	struct ward_error err;
	int r = ward_audit_verify(path, genesis, rep, &err);
	if (r < 0)
		diag("verify %s: %s", path, err.message);
}

/* Verifies a copy and checks the first break, its reason and message. */
static void expect_break(const char *name, uint64_t line, enum ward_audit_break reason,
			 const char *message)
{
	struct ward_audit_report rep;
	char path[320];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	verify(path, NULL, &rep);
	is_int(rep.bad_line, line, "%s: first bad line", name);
	if (!ok(rep.reason == reason, "%s: reason is %s", name, ward_audit_break_name(reason)))
		diag("got %s: %s", ward_audit_break_name(rep.reason), rep.message);
	is_str(rep.message, message, "%s: message", name);
}

static int record(struct ward_audit *a, const char *event, int who, int i)
{
	struct ward_error err;
	json_t *f = json_pack("{s:i, s:i, s:s}", "writer", who, "i", i, "tenant", "acme");
	int r = ward_audit_record(a, event, f, &err);
	json_decref(f);
	if (r < 0)
		diag("record: %s", err.message);
	return r;
}

struct thread_arg {
	struct ward_audit *a;
	int id;
	int failed;
};

static void *thread_main(void *p)
{
	struct thread_arg *t = p;
	for (int i = 0; i < PER_THREAD; i++)
		t->failed += record(t->a, "request", t->id, i) < 0;
	return NULL;
}

/* The other process: its own handle on the same file, appending while the
 * parent's threads do. */
static int child_main(int go)
{
	struct ward_audit *a;
	struct ward_error err;
	char c;
	if (read(go, &c, 1) != 1 || ward_audit_open(log_path, NULL, &a, &err) < 0)
		return 1;
	int failed = 0;
	for (int i = 0; i < CHILD_RECORDS; i++)
		failed += record(a, "sandbox.create", 100, i) < 0;
	ward_audit_free(a);
	return failed ? 1 : 0;
}

static void test_concurrent_writers(void)
{
	struct ward_audit *a;
	struct ward_error err;
	struct thread_arg args[N_THREADS];
	pthread_t th[N_THREADS];
	int go[2];
	struct stat st;

	ok(pipe2(go, O_CLOEXEC) == 0, "pipe");
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		_exit(child_main(go[0]));
	is_int(ward_audit_open(log_path, NULL, &a, &err), 0, "open a new log");
	ok(stat(log_path, &st) == 0 && (st.st_mode & 07777) == 0600, "created with mode 0600");
	ok(write(go[1], "g", 1) == 1, "child started");
	for (int i = 0; i < N_THREADS; i++) {
		args[i] = (struct thread_arg){ .a = a, .id = i };
		pthread_create(&th[i], NULL, thread_main, &args[i]);
	}
	int failed = 0, status = -1;
	for (int i = 0; i < N_THREADS; i++) {
		pthread_join(th[i], NULL);
		failed += args[i].failed;
	}
	waitpid(pid, &status, 0);
	close(go[0]);
	close(go[1]);
	is_int(failed, 0, "%d threads wrote %d records each", N_THREADS, PER_THREAD);
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	   "a second process wrote %d records meanwhile", CHILD_RECORDS);
	ward_audit_free(a);

	struct ward_audit_report rep;
	verify(log_path, NULL, &rep);
	is_int(rep.bad_line, 0, "the chain is intact: %s", rep.message[0] ? rep.message : "ok");
	is_int(rep.lines, N_LINES, "%d lines", N_LINES);
	is_int(rep.last_seq, N_LINES, "seq runs 1..%d", N_LINES);

	/* How interleaved were the writers? Informative only: timing decides. */
	struct lines l;
	load_lines(log_path, &l);
	int switches = 0;
	for (size_t i = 1; i < l.n; i++)
		switches += (strstr(l.line[i], "\"writer\":100") != NULL) !=
			    (strstr(l.line[i - 1], "\"writer\":100") != NULL);
	diag("the two processes took turns %d times", switches);
	free(l.data);
}

/* The hash rule of docs/audit.md, implemented again from the text: body =
 * line without its last 75 bytes, plus "}"; hash = BLAKE2b-256(body); the
 * first prev is 64 zeros, each next prev the hash before. */
static void test_documented_rule(void)
{
	struct lines l;
	char prev[65], hex[65];
	unsigned char h[32];
	bool good = true;
	memset(prev, '0', 64);
	prev[64] = '\0';
	load_lines(log_path, &l);
	for (size_t i = 0; i < l.n && good; i++) {
		const char *line = l.line[i];
		size_t len = strlen(line);
		char *body = malloc(len);
		memcpy(body, line, len - 75);
		body[len - 75] = '}';
		body[len - 74] = '\0';
		crypto_generichash(h, 32, (unsigned char *)body, len - 74, NULL, 0);
		sodium_bin2hex(hex, sizeof(hex), h, 32);
		json_t *o = json_loads(body, 0, NULL);
		char *canon = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
		good = strncmp(line + len - 75, ",\"hash\":\"", 9) == 0 &&
		       strncmp(line + len - 66, hex, 64) == 0 &&
		       json_is_string(json_object_get(o, "prev")) &&
		       strcmp(json_string_value(json_object_get(o, "prev")), prev) == 0 &&
		       json_integer_value(json_object_get(o, "seq")) == (json_int_t)i + 1 &&
		       canon && strcmp(canon, body) == 0;
		if (!good)
			diag("line %zu: %s", i + 1, line);
		memcpy(prev, hex, sizeof(prev));
		free(canon);
		json_decref(o);
		free(body);
	}
	ok(good && l.n == N_LINES, "every line follows the documented hash rule");
	json_t *o = json_loads(l.line[0], 0, NULL);
	const char *t = json_string_value(json_object_get(o, "time"));
	ok(t && strlen(t) == 24 && t[10] == 'T' && t[19] == '.' && t[23] == 'Z',
	   "time is RFC 3339 UTC with milliseconds: %s", t ? t : "(none)");
	json_decref(o);
	free(l.data);
}

/* Recomputes a line's hash after an edit, as a forger would. */
static void rehash(char *line)
{
	size_t len = strlen(line);
	unsigned char h[32];
	char hex[65];
	char *body = strdup(line);
	body[len - 75] = '}';
	crypto_generichash(h, 32, (unsigned char *)body, len - 74, NULL, 0);
	sodium_bin2hex(hex, sizeof(hex), h, 32);
	memcpy(line + len - 66, hex, 64);
	free(body);
}

static void make_copy(const char *name, const struct lines *l, const int *order, bool cut)
{
	char path[320];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	write_lines(path, l, order, cut);
}

static void test_tampering(void)
{
	struct lines l;
	int order[MAX_LINES + 1];
	load_lines(log_path, &l);

	/* A value changed in line 7. */
	char *seven = l.line[6];
	char *v = strstr(seven, "\"tenant\":\"acme\"");
	ok(v != NULL, "line 7 has a tenant");
	if (v)
		memcpy(v + 10, "evil", 4);
	identity(order, l.n);
	make_copy("edited", &l, order, false);
	expect_break("edited", 7, WARD_AUDIT_EDITED,
		     "line 7: hash does not match its content (edited)");

	/* The same edit with the hash recomputed: the next line's prev breaks. */
	rehash(seven);
	make_copy("rewritten", &l, order, false);
	expect_break("rewritten", 8, WARD_AUDIT_PREV,
		     "line 8: prev does not match line 7's hash (a line before it was "
		     "rewritten, deleted or reordered)");
	free(l.data);
	load_lines(log_path, &l);

	identity(order, l.n);
	remove_at(order, 6);
	make_copy("deleted", &l, order, false);
	expect_break("deleted", 7, WARD_AUDIT_DELETED, "line 7: seq 8 follows 6 (1 line deleted)");

	identity(order, l.n);
	remove_at(order, 40);
	remove_at(order, 40);
	remove_at(order, 40);
	make_copy("deleted3", &l, order, false);
	expect_break("deleted3", 41, WARD_AUDIT_DELETED,
		     "line 41: seq 44 follows 40 (3 lines deleted)");

	identity(order, l.n);
	remove_at(order, 0);
	make_copy("deleted-first", &l, order, false);
	expect_break("deleted-first", 1, WARD_AUDIT_DELETED,
		     "line 1: seq 2 opens the log (1 line deleted)");

	identity(order, l.n);
	order[6] = 7;
	order[7] = 6;
	make_copy("swapped", &l, order, false);
	expect_break("swapped", 7, WARD_AUDIT_REORDERED, "line 7: seq 8 follows 6 (reordered)");

	identity(order, l.n);
	order[20] = 30;
	order[30] = 20;
	make_copy("swapped-far", &l, order, false);
	expect_break("swapped-far", 21, WARD_AUDIT_DELETED,
		     "line 21: seq 31 follows 20 (10 lines deleted)");

	identity(order, l.n + 1);
	order[l.n] = (int)l.n - 1;  /* the last line twice */
	order[l.n + 1] = -1;
	make_copy("duplicated", &l, order, false);
	expect_break("duplicated", 101, WARD_AUDIT_REORDERED,
		     "line 101: seq 100 follows 100 (duplicated)");

	identity(order, l.n);
	make_copy("no-final-newline", &l, order, true);
	expect_break("no-final-newline", 100, WARD_AUDIT_TRUNCATED,
		     "line 100: truncated (the file does not end with a newline)");

	l.line[99][strlen(l.line[99]) / 2] = '\0';
	make_copy("truncated", &l, order, true);
	expect_break("truncated", 100, WARD_AUDIT_TRUNCATED,
		     "line 100: truncated (the file does not end with a newline)");

	l.line[4] = "garbage";
	make_copy("malformed", &l, order, false);
	struct ward_audit_report rep;
	char path[320];
	snprintf(path, sizeof(path), "%s/malformed", dir);
	verify(path, NULL, &rep);
	ok(rep.bad_line == 5 && rep.reason == WARD_AUDIT_MALFORMED, "malformed: line 5");
	/* the rest is jansson's wording, which varies with its version */
	has_str(rep.message, "line 5: not valid JSON (", "malformed: message");
	free(l.data);
	load_lines(log_path, &l);

	l.line[9] = "{\"seq\":10}";
	make_copy("not-a-record", &l, order, false);
	expect_break("not-a-record", 10, WARD_AUDIT_MALFORMED,
		     "line 10: not an audit record (\"time\" or \"event\" is missing)");
	free(l.data);

	snprintf(path, sizeof(path), "%s/long", dir);
	FILE *f = fopen(path, "we");
	for (size_t i = 0; i <= WARD_AUDIT_LINE_MAX; i++)
		fputc('x', f);
	fputc('\n', f);
	fclose(f);
	expect_break("long", 1, WARD_AUDIT_TOO_LONG, "line 1: longer than 1048576 bytes");

	snprintf(path, sizeof(path), "%s/empty", dir);
	close(open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
	expect_break("empty", 0, WARD_AUDIT_INTACT, "");
}

/* A writer refuses to extend a broken tail, names the line, and with force
 * starts a new segment after it. */
static void test_broken_tail(void)
{
	struct ward_audit *a;
	struct ward_error err;
	struct ward_audit_report rep;
	char path[320];
	snprintf(path, sizeof(path), "%s/truncated", dir);
	is_int(ward_audit_open(path, NULL, &a, &err), -EBADMSG, "open refuses a truncated tail");
	has_str(err.message, "line 100 of '", "the error names the line");
	has_str(err.message, "': truncated (the file does not end with a newline)",
		"and says why");
	ok(a == NULL, "no handle on failure");

	snprintf(path, sizeof(path), "%s/edited-last", dir);
	struct lines l;
	int order[MAX_LINES + 1];
	load_lines(log_path, &l);
	l.line[99][strlen(l.line[99]) - 70] ^= 1;  /* a digit of prev */
	identity(order, l.n);
	write_lines(path, &l, order, false);
	free(l.data);
	is_int(ward_audit_open(path, NULL, &a, &err), -EBADMSG, "open refuses an edited last line");
	has_str(err.message, "line 100 of '", "naming line 100");

	struct ward_audit_options o = { .force = true };
	snprintf(path, sizeof(path), "%s/truncated", dir);
	is_int(ward_audit_open(path, &o, &a, &err), 0, "force opens it");
	is_int(record(a, "request", 0, 0), 0, "and records after a new segment");
	ward_audit_free(a);
	load_lines(path, &l);
	is_int(l.n, 102, "a segment line and the record follow the broken line");
	has_str(l.n > 100 ? l.line[100] : "", "\"event\":\"audit.segment\"", "audit.segment");
	has_str(l.n > 100 ? l.line[100] : "", "\"broken_line\":100", "names the broken line");
	has_str(l.n > 100 ? l.line[100] : "", "\"seq\":1,", "and starts over at seq 1");
	free(l.data);
	verify(path, NULL, &rep);
	is_int(rep.bad_line, 100, "verify still reports the broken line");
	is_int(ward_audit_open(path, NULL, &a, &err), 0, "the new segment reopens without force");
	ward_audit_free(a);
}

/* Two handles in one process stand for two processes (flock is per open
 * file): each continues from the other's last line. Then a foreign line. */
static void test_handoff(void)
{
	struct ward_audit *a, *b;
	struct ward_error err;
	struct ward_audit_report rep;
	char path[320], hex[WARD_AUDIT_HEX_SIZE];
	snprintf(path, sizeof(path), "%s/handoff", dir);
	ward_audit_open(path, NULL, &a, &err);
	ward_audit_open(path, NULL, &b, &err);
	int r = 0;
	for (int i = 0; i < 5; i++)
		r |= record(a, "request", 1, i) | record(b, "request", 2, i) | record(b, "verdict", 2, i);
	is_int(r, 0, "two handles alternate");
	is_int(ward_audit_head(b, hex), 15, "the head is seq 15");
	verify(path, NULL, &rep);
	ok(rep.bad_line == 0 && rep.lines == 15 && strcmp(rep.last_hash, hex) == 0,
	   "15 lines, intact, head hash as verify sees it");

	int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	ok(write(fd, "not json\n", 9) == 9, "a foreign writer appends garbage");
	close(fd);
	is_int(ward_audit_record(a, "request", NULL, &err), -EBADMSG,
	       "the next record refuses to extend it");
	has_str(err.message, "line 16 of '", "naming line 16");
	ward_audit_free(a);
	ward_audit_free(b);
}

static void test_bad_input(void)
{
	struct ward_audit *a;
	struct ward_error err;
	char path[320];
	snprintf(path, sizeof(path), "%s/input", dir);
	ward_audit_open(path, NULL, &a, &err);
	json_t *f = json_pack("{s:i}", "seq", 5);
	is_int(ward_audit_record(a, "request", f, &err), -EINVAL, "a reserved key is refused");
	has_str(err.message, "field 'seq' is reserved", "and named");
	json_decref(f);
	is_int(ward_audit_record(a, "Bad Event", NULL, &err), -EINVAL, "a bad event is refused");
	is_int(ward_audit_record(a, "", NULL, &err), -EINVAL, "an empty event is refused");
	f = json_array();
	is_int(ward_audit_record(a, "request", f, &err), -EINVAL, "fields must be an object");
	json_decref(f);
	f = json_object();
	char *big = malloc(WARD_AUDIT_LINE_MAX);
	memset(big, 'a', WARD_AUDIT_LINE_MAX - 1);
	big[WARD_AUDIT_LINE_MAX - 1] = '\0';
	json_object_set_new(f, "blob", json_string(big));
	is_int(ward_audit_record(a, "request", f, &err), -EMSGSIZE, "an oversized line is refused");
	free(big);
	json_decref(f);
	is_int(ward_audit_record(a, "request", NULL, &err), 0, "a record without fields");
	ward_audit_free(a);
	struct ward_audit_options o = { .genesis = "abc" };
	is_int(ward_audit_open(path, &o, &a, &err), -EINVAL, "a bad genesis is refused");
	struct ward_audit_report rep;
	is_int(ward_audit_verify(dir, NULL, &rep, &err), -EISDIR, "verify of a directory fails");
	snprintf(path, sizeof(path), "%s/missing", dir);
	is_int(ward_audit_verify(path, NULL, &rep, &err), -ENOENT, "verify of a missing file fails");
	is_int(ward_audit_open(dir, NULL, &a, &err), -EISDIR, "open of a directory fails");
}

static void test_genesis(void)
{
	static const char g[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
	struct ward_audit_options o = { .genesis = g, .sync = WARD_AUDIT_SYNC_NONE };
	struct ward_audit *a;
	struct ward_error err;
	struct ward_audit_report rep;
	char path[320];
	snprintf(path, sizeof(path), "%s/genesis", dir);
	ward_audit_open(path, &o, &a, &err);
	record(a, "request", 0, 0);
	record(a, "request", 0, 1);
	ward_audit_free(a);
	verify(path, g, &rep);
	ok(rep.bad_line == 0 && rep.lines == 2, "a configured genesis verifies with it");
	verify(path, NULL, &rep);
	is_str(rep.message, "line 1: prev does not match the genesis hash (the log does not "
	       "start here)", "and not without it");
}

/* A short write (RLIMIT_FSIZE) is cut back: the file stays a valid chain. */
static void test_short_write(void)
{
	struct ward_audit *a;
	struct ward_error err;
	struct ward_audit_report rep;
	struct stat before, after;
	char path[320];
	snprintf(path, sizeof(path), "%s/short", dir);
	ward_audit_open(path, NULL, &a, &err);
	record(a, "request", 0, 0);
	stat(path, &before);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		struct sigaction sa = { .sa_handler = SIG_IGN };
		struct rlimit rl = { (rlim_t)before.st_size + 40, (rlim_t)before.st_size + 40 };
		sigaction(SIGXFSZ, &sa, NULL);
		setrlimit(RLIMIT_FSIZE, &rl);
		int r = ward_audit_record(a, "request", NULL, &err);
		_exit(r == -ENOSPC && strstr(err.message, "short write") ? 0 : 1);
	}
	int status;
	waitpid(pid, &status, 0);
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a short write is an error");
	stat(path, &after);
	is_int(after.st_size, before.st_size, "and is removed from the file");
	is_int(record(a, "request", 0, 1), 0, "the next record goes in");
	ward_audit_free(a);
	verify(path, NULL, &rep);
	ok(rep.bad_line == 0 && rep.lines == 2, "the chain is intact");
}

static void test_text(void)
{
	char hex[WARD_AUDIT_HEX_SIZE];
	ward_audit_digest("abc", 3, hex);
	is_str(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	       "sha256 of 'abc'");

	json_t *f = json_object();
	is_int(ward_audit_text(f, "code", "print(1)", 8, false), 0, "code by digest");
	char *s = json_dumps(f, JSON_COMPACT | JSON_SORT_KEYS);
	is_str(s, "{\"code\":{\"sha256\":\"d287bb7f9d15abdc5b6e98536263815744b6ef21"
	       "c8f3c839fc434ca70d8efe99\",\"size\":8}}", "size and sha256 only");
	free(s);
	ward_audit_digest("print(1)", 8, hex);
	is_str(json_string_value(json_object_get(json_object_get(f, "code"), "sha256")), hex,
	       "the digest of the code");
	ok(!json_object_get(json_object_get(f, "code"), "text"), "no text by default");

	ward_audit_text(f, "stdout", "1\n", 2, true);
	is_str(json_string_value(json_object_get(json_object_get(f, "stdout"), "text")), "1\n",
	       "full_text keeps the text");
	ward_audit_text(f, "bin", "\xff\xfe\x00", 3, true);
	is_str(json_string_value(json_object_get(json_object_get(f, "bin"), "base64")), "//4A",
	       "bytes that are not UTF-8 go in base64");

	size_t len = WARD_AUDIT_TEXT_MAX + 101;
	char *big = malloc(len);
	big[0] = 'a';
	for (size_t i = 1; i + 1 < len; i += 2)
		memcpy(big + i, "\xc3\xa9", 2);  /* é: the cut falls inside one */
	ward_audit_text(f, "out", big, len, true);
	json_t *o = json_object_get(f, "out");
	is_int(json_integer_value(json_object_get(o, "size")), len, "size is the whole text's");
	ok(json_is_true(json_object_get(o, "truncated")), "truncated");
	is_int(json_string_length(json_object_get(o, "text")), WARD_AUDIT_TEXT_MAX - 1,
	       "cut at a character boundary");
	free(big);
	is_int(ward_audit_text(f, "empty", NULL, 0, true), 0, "an empty text");
	is_int(ward_audit_text(NULL, "x", "a", 1, false), -EINVAL, "fields must be an object");
	json_decref(f);
}

static void remove_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.')
			unlinkat(dirfd(d), e->d_name, 0);
	if (d)
		closedir(d);
	rmdir(dir);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "%s/t-audit.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(log_path, sizeof(log_path), "%s/audit.log", dir);
	if (sodium_init() < 0)
		return 1;
	test_text();
	test_concurrent_writers();
	test_documented_rule();
	test_tampering();
	test_broken_tail();
	test_handoff();
	test_bad_input();
	test_genesis();
	test_short_write();

	if (!getenv("T_AUDIT_KEEP"))
		remove_dir();
	else
		diag("kept %s", dir);
	return tap_done();
}
