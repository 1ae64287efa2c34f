/* tests/unit/t-keys.c — API keys: scopes and tenants, the add / authenticate /
 * revoke round trip, every way a presented key is refused, the keys file's
 * mode, atomicity and malformed lines, and concurrent adds from many
 * processes. Works in a temp dir only. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "server/keys.h"
#include "base/util.h"

static char dir[64];

static char *path_in(const char *name)
{
	static char buf[8][256];
	static int n;
	char *p = buf[n++ % 8];
	snprintf(p, 256, "%s/%s", dir, name);
	return p;
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0)
		diag("cannot write %s", path);
}

static char *read_text(const char *path)
{
	static char buf[1 << 16];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	buf[n] = '\0';
	if (f)
		fclose(f);
	return buf;
}

static int mode_of(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (int)(st.st_mode & 07777) : -1;
}

static int remove_one(const char *p, const struct stat *st, int type, struct FTW *f)
{
	(void)st, (void)type, (void)f;
	return remove(p);
}

static void test_scopes(void)
{
	struct ward_error err;
	unsigned m = 99;
	char buf[WARD_KEY_SCOPES_MAX];
	is_int(ward_keys_scopes_parse("execute,sessions", &m, &err), 0, "scopes parse");
	is_int(m, WARD_SCOPE_EXECUTE | WARD_SCOPE_SESSIONS, "scopes bits");
	is_int(ward_keys_scopes_parse("admin,files,sessions,execute,credentials", &m, &err), 0, "all scopes");
	is_int(m, WARD_SCOPE_ALL, "all bits");
	is_str(ward_keys_scopes_format(m, buf, sizeof(buf)), "execute,sessions,files,admin,credentials",
	       "format in bit order");
	is_str(ward_keys_scopes_format(WARD_SCOPE_FILES, buf, sizeof(buf)), "files", "format one");
	is_str(ward_keys_scope_name(WARD_SCOPE_ADMIN), "admin", "scope name");
	ok(ward_keys_scope_name(3) == NULL && ward_keys_scope_name(0) == NULL &&
	   ward_keys_scope_name(32) == NULL, "no name for several or unknown bits");

	static const struct { const char *in, *msg; } bad[] = {
		{ "", "expected at least one scope" },
		{ "execute,,files", "empty scope in 'execute,,files'" },
		{ "execute,", "empty scope in 'execute,'" },
		{ ",execute", "empty scope in ',execute'" },
		{ "root", "unknown scope 'root' (expected execute, sessions, files, admin or credentials)" },
		{ "EXECUTE", "unknown scope 'EXECUTE' (expected execute, sessions, files, admin or credentials)" },
		{ "files,files", "duplicate scope 'files'" },
		{ "exec\033[1m", "unknown scope 'exec?[1m' (expected execute, sessions, files, admin or credentials)" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		m = 99;
		is_int(ward_keys_scopes_parse(bad[i].in, &m, &err), -EINVAL, "scopes #%zu refused", i);
		is_str(err.message, bad[i].msg, "message for scopes #%zu", i);
		is_int(m, 0, "no bits on error #%zu", i);
	}
}

static void test_tenants(void)
{
	struct ward_error err;
	char long_name[80];
	memset(long_name, 'a', 64);
	long_name[64] = '\0';
	is_int(ward_keys_check_tenant("acme", &err), 0, "tenant acme");
	is_int(ward_keys_check_tenant("A.b_c-9", &err), 0, "tenant with . _ -");
	is_int(ward_keys_check_tenant(long_name, &err), 0, "64-character tenant");
	long_name[64] = 'a';
	long_name[65] = '\0';
	is_int(ward_keys_check_tenant(long_name, &err), -EINVAL, "65-character tenant refused");
	is_str(err.message, "tenant name longer than 64 characters", "message for long tenant");
	is_int(ward_keys_check_tenant("", &err), -EINVAL, "empty tenant refused");
	is_str(err.message, "empty tenant name", "message for empty tenant");
	is_int(ward_keys_check_tenant("a b", &err), -EINVAL, "tenant with a space refused");
	is_str(err.message, "invalid tenant 'a b' (expected letters, digits, '.', '_' or '-')",
	       "message names the tenant");
	is_int(ward_keys_check_tenant("a/b", &err), -EINVAL, "tenant with a slash refused");
	is_int(ward_keys_check_tenant("..", &err), -EINVAL, "tenant '..' refused");
	is_int(ward_keys_check_tenant("x\033]0;", &err), -EINVAL, "control characters refused");
	has_str(err.message, "'x?]0;'", "control characters are not echoed");
	is_int(ward_keys_check_id("0123456789ab", &err), 0, "valid id");
	is_int(ward_keys_check_id("0123456789AB", &err), -EINVAL, "uppercase id refused");
	is_str(err.message, "invalid key id '0123456789AB' (expected 12 lowercase hex digits)",
	       "message for a bad id");
	is_int(ward_keys_check_id("0123456789abc", &err), -EINVAL, "long id refused");
}

/* Keys with a wrong piece, each refused with -EACCES and *out zeroed. */
static void test_refusals(const struct ward_keystore *ks, const char *key)
{
	struct ward_key_info info;
	size_t n = strlen(key);
	const char *names[12];
	char bufs[12][WARD_KEY_STR_SIZE + 8];
	size_t nc = 0;
#define CASE(name, ...) (snprintf(bufs[nc], sizeof(bufs[nc]), __VA_ARGS__), names[nc++] = (name))
	CASE("wrong secret", "%.*s%c", (int)(n - 1), key, key[n - 1] == '0' ? '1' : '0');
	CASE("unknown id", "wk_%s%s", key[3] == 'f' ? "e" : "f", key + 4);
	CASE("empty", "%s", "");
	CASE("prefix only", "%s", "wk_");
	CASE("no first underscore", "wk0%s", key + 3);
	CASE("no second underscore", "wk_%.12s0%s", key + 3, key + 16);
	CASE("bad hex", "%.*sg", (int)(n - 1), key);
	CASE("uppercase hex", "%.*sA", (int)(n - 1), key);
	CASE("overlong", "%s0", key);
	CASE("truncated", "%.*s", (int)(n - 1), key);
	CASE("wrong prefix", "xk_%s", key + 3);
	CASE("trailing newline", "%s\n", key);
#undef CASE
	for (size_t i = 0; i < nc; i++) {
		memset(&info, 0xa5, sizeof(info));
		is_int(ward_keys_authenticate(ks, bufs[i], &info), -EACCES, "refused: %s", names[i]);
		ok(info.id[0] == 0 && info.tenant[0] == 0 && info.scopes == 0,
		   "nothing returned: %s", names[i]);
	}
	is_int(ward_keys_authenticate(ks, NULL, &info), -EACCES, "NULL key refused");
	is_int(ward_keys_authenticate(NULL, key, &info), -EACCES, "no keystore: refused");
}

static int no_temp_files(void)
{
	DIR *d = opendir(path_in("sub"));
	struct dirent *e;
	int clean = 1;
	while (d && (e = readdir(d)))
		if (strncmp(e->d_name, ".keys.", 6) == 0)
			clean = 0;
	if (d)
		closedir(d);
	return clean;
}

static void test_round_trip(void)
{
	const char *path = path_in("sub/keys");
	struct ward_error err;
	struct ward_key_info info, got;
	struct ward_keystore *ks = NULL;
	char a[WARD_KEY_STR_SIZE], b[WARD_KEY_STR_SIZE], small[20];

	is_int(ward_keys_load(path, &ks, &err), -ENOENT, "no keys file: -ENOENT");
	ok(ks == NULL, "no keystore on failure");
	is_int(ward_keys_add(path, "acme", WARD_SCOPE_EXECUTE | WARD_SCOPE_SESSIONS, "ci runner",
			     a, sizeof(a), &info, &err), 0, "add a key (creates dir and file)");
	is_int(strlen(a), WARD_KEY_STR_SIZE - 1, "key is %d characters", WARD_KEY_STR_SIZE - 1);
	ok(strncmp(a, "wk_", 3) == 0 && a[15] == '_' && strncmp(a + 3, info.id, 12) == 0,
	   "key is wk_<id>_<secret>: %.16s...", a);
	is_str(info.tenant, "acme", "info tenant");
	ok(info.created[0] && !info.revoked, "info created %s, not revoked", info.created);
	is_int(mode_of(path), 0600, "keys file is 0600");
	is_int(mode_of(path_in("sub")), 0700, "created directory is 0700");
	is_int(mode_of(path_in("sub/keys.lock")), 0600, "lock file is 0600");
	const char *text = read_text(path);
	ok(strstr(text, a + 16) == NULL && strstr(text, a) == NULL, "secret is not in the file");
	has_str(text, "\"hash\":\"", "file holds a hash");
	has_str(text, "\"salt\":\"", "file holds a salt");

	is_int(ward_keys_add(path, "other-tenant", WARD_SCOPE_ADMIN, NULL, b, sizeof(b), NULL, &err),
	       0, "add a second key");
	ok(strcmp(a, b) != 0 && strncmp(a, b, 15) != 0, "keys and ids differ");
	is_int(ward_keys_add(path, "acme", WARD_SCOPE_FILES, NULL, small, sizeof(small), NULL, &err),
	       -ENOBUFS, "small buffer refused");
	is_int(ward_keys_add(path, "a b", WARD_SCOPE_FILES, NULL, b + 0, 0, NULL, &err), -ENOBUFS,
	       "zero-length buffer refused first");

	is_int(ward_keys_load(path, &ks, &err), 0, "load");
	is_int(ward_keys_count(ks), 2, "two keys");
	const struct ward_key_info *k0 = ward_keys_get(ks, 0);
	ok(k0 && strcmp(k0->id, info.id) == 0 && strcmp(k0->note, "ci runner") == 0 &&
	   k0->scopes == (WARD_SCOPE_EXECUTE | WARD_SCOPE_SESSIONS), "first key listed as added");
	ok(ward_keys_get(ks, 2) == NULL, "get out of range is NULL");
	is_int(ward_keys_authenticate(ks, a, &got), 0, "first key authenticates");
	is_str(got.tenant, "acme", "tenant from authentication");
	is_str(got.id, info.id, "id from authentication");
	is_int(got.scopes, WARD_SCOPE_EXECUTE | WARD_SCOPE_SESSIONS, "scopes from authentication");
	is_int(ward_keys_authenticate(ks, b, &got), 0, "second key authenticates");
	is_str(got.tenant, "other-tenant", "second tenant");
	test_refusals(ks, a);
	ward_keys_free(ks);

	is_int(ward_keys_revoke(path, info.id, &got, &err), 0, "revoke");
	ok(got.revoked && strcmp(got.tenant, "acme") == 0, "revoke reports the key");
	is_int(ward_keys_revoke(path, info.id, NULL, &err), 0, "revoking again succeeds");
	is_int(ward_keys_revoke(path, "ffffffffffff", NULL, &err), -ENOENT, "unknown id: -ENOENT");
	has_str(err.message, "no key with id 'ffffffffffff' in '", "message names the id");
	is_int(ward_keys_revoke(path, "wk_12", NULL, &err), -EINVAL, "malformed id: -EINVAL");
	is_int(ward_keys_revoke(path, a, NULL, &err), -EINVAL, "a whole key is not an id");
	ok(strstr(err.message, a + 16) == NULL && strstr(err.message, "whole key"),
	   "the message does not echo the secret: %s", err.message);
	is_int(ward_keys_revoke(path_in("nope/keys"), "ffffffffffff", NULL, &err), -ENOENT,
	       "revoke without a keys file: -ENOENT");
	has_str(err.message, "(no such file)", "message says the file is missing");
	ok(access(path_in("nope"), F_OK) != 0, "revoke does not create directories");
	is_int(ward_keys_load(path, &ks, &err), 0, "reload");
	is_int(ward_keys_authenticate(ks, a, &got), -EACCES, "revoked key refused");
	ok(got.tenant[0] == 0, "nothing returned for a revoked key");
	is_int(ward_keys_authenticate(ks, b, &got), 0, "other key still works");
	ok(ward_keys_get(ks, 0)->revoked && !ward_keys_get(ks, 1)->revoked, "list shows revocation");
	ward_keys_free(ks);
	has_str(read_text(path), "\"revoked\":true", "file records the revocation");
	is_int(mode_of(path), 0600, "still 0600 after rewrites");
	ok(no_temp_files(), "no temporary files left behind");
	sodium_memzero(a, sizeof(a));
}

static void test_add_checks(void)
{
	const char *path = path_in("checks");
	struct ward_error err;
	char k[WARD_KEY_STR_SIZE];
	char note[300];
	is_int(ward_keys_add(path, "a b", WARD_SCOPE_FILES, NULL, k, sizeof(k), NULL, &err),
	       -EINVAL, "bad tenant refused");
	has_str(err.message, "invalid tenant 'a b'", "message names the tenant");
	is_int(ward_keys_add(path, "t", 0, NULL, k, sizeof(k), NULL, &err), -EINVAL,
	       "no scopes refused");
	is_str(err.message, "expected at least one scope", "message for no scopes");
	is_int(ward_keys_add(path, "t", 1u << 7, NULL, k, sizeof(k), NULL, &err), -EINVAL,
	       "unknown scope bit refused");
	is_int(ward_keys_add(path, "t", WARD_SCOPE_FILES, "a\nb", k, sizeof(k), NULL, &err), -EINVAL,
	       "note with a newline refused");
	is_str(err.message, "note contains a control character", "message for the note");
	memset(note, 'n', sizeof(note) - 1);
	note[sizeof(note) - 1] = '\0';
	is_int(ward_keys_add(path, "t", WARD_SCOPE_FILES, note, k, sizeof(k), NULL, &err), -EINVAL,
	       "long note refused");
	is_int(ward_keys_add(path, "t", WARD_SCOPE_FILES, "caf\xc3", k, sizeof(k), NULL, &err),
	       -EINVAL, "invalid UTF-8 note refused");
	is_int(ward_keys_add(path, "t", WARD_SCOPE_FILES, "caf\xc3\xa9", k, sizeof(k), NULL, &err),
	       0, "UTF-8 note accepted");
	ok(access(path, F_OK) == 0, "file exists after the only good add");

	/* Under `unshare -r` root cannot chown to an unmapped uid. */
	if (geteuid() == 0 && chown(path, 65534, 65534) == 0) {
		struct stat st;
		is_int(ward_keys_add(path, "t", WARD_SCOPE_FILES, NULL, k, sizeof(k), NULL, &err), 0,
		       "root adds a key");
		ok(stat(path, &st) == 0 && st.st_uid == 65534 && st.st_gid == 65534,
		   "the rewritten file keeps its owner");
	} else {
		skip("keeping the owner on rewrite needs root (and uid 65534 mapped)");
	}

	const char *link = path_in("link");
	ok(symlink(path, link) == 0, "symlink to the keys file");
	is_int(ward_keys_add(link, "t", WARD_SCOPE_FILES, NULL, k, sizeof(k), NULL, &err), -ELOOP,
	       "add through a symlink refused (the rename would replace the link)");
	struct ward_keystore *ks = NULL;
	is_int(ward_keys_load(link, &ks, &err), 0, "load follows a symlink");
	ward_keys_free(ks);

	setenv("WARD_KEYS_FILE", path, 1);
	is_str(ward_keys_default_path(), path, "WARD_KEYS_FILE is the default path");
	setenv("WARD_KEYS_FILE", "", 1);
	is_str(ward_keys_default_path(), "/etc/ward/keys", "empty WARD_KEYS_FILE is ignored");
	unsetenv("WARD_KEYS_FILE");
	is_str(ward_keys_default_path(), "/etc/ward/keys", "default path");
}

#define SALT "00112233445566778899aabbccddeeff"
#define HASH "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define LINE(id, rest) "{\"id\":\"" id "\",\"tenant\":\"t\",\"scopes\":[\"execute\"]," \
	"\"salt\":\"" SALT "\",\"hash\":\"" HASH "\",\"created\":\"2025-01-31T23:59:59Z\"" rest "}\n"

static void test_malformed(void)
{
	const char *path = path_in("bad");
	struct ward_error err;
	struct ward_keystore *ks = NULL;
	static const struct { const char *second, *msg; } bad[] = {
		{ "not json\n", "line 2: invalid JSON: " },
		{ "[1]\n", "line 2: expected a JSON object" },
		{ "{\"id\":\"aaaaaaaaaaaa\"}\n", "line 2: tenant: missing" },
		{ LINE("aaaaaaaaaaaa", ",\"extra\":1"), "line 2: unknown field 'extra'" },
		{ LINE("aaaaaaaaaaaa", ",\"revoked\":\"yes\""), "line 2: revoked: expected true or false" },
		{ LINE("aaaaaaaaaaaa", ",\"note\":\"a\\u001bb\""),
		  "line 2: note: note contains a control character" },
		{ LINE("AAAAAAAAAAAA", ""),
		  "line 2: id: invalid key id 'AAAAAAAAAAAA' (expected 12 lowercase hex digits)" },
		{ LINE("012345678901", ""),
		  "line 2: id: duplicate key id '012345678901' (also on line 1)" },
		{ "{\"id\":\"aaaaaaaaaaaa\",\"tenant\":\"t\",\"scopes\":[\"root\"]}\n",
		  "line 2: scopes: unknown scope 'root' (expected execute, sessions, files, admin or credentials)" },
		{ "{\"id\":\"aaaaaaaaaaaa\",\"tenant\":\"t\",\"scopes\":[]}\n",
		  "line 2: scopes: expected a non-empty array of scope names" },
		{ "{\"id\":\"aaaaaaaaaaaa\",\"tenant\":\"t\",\"scopes\":[\"files\"],\"salt\":\"00\"}\n",
		  "line 2: salt: expected 32 lowercase hex digits" },
		{ "{\"id\":\"aaaaaaaaaaaa\",\"id\":\"aaaaaaaaaaaa\"}\n", "line 2: invalid JSON: " },
		{ "\n\n{\"id\":1}\n", "line 4: id: expected a string" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[2048];
		snprintf(text, sizeof(text), "%s%s", LINE("012345678901", ""), bad[i].second);
		write_text(path, text);
		static char sentinel;
		ks = (struct ward_keystore *)&sentinel;
		is_int(ward_keys_load(path, &ks, &err), -EINVAL, "malformed file #%zu refused", i);
		ok(ks == NULL, "no keystore for malformed file #%zu", i);
		has_str(err.message, bad[i].msg, "message #%zu names the line", i);
	}
	has_str(err.message, "keys file '", "message names the file");

	/* A NUL byte inside a line. */
	int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	ok(fd >= 0 && write(fd, "{\"id\0\":1}\n", 10) == 10, "write a line with a NUL byte");
	close(fd);
	is_int(ward_keys_load(path, &ks, &err), -EINVAL, "NUL byte refused");
	has_str(err.message, "line 1: ", "NUL byte: message names the line");

	/* An overlong line. */
	static char big[WARD_KEYS_LINE_MAX + 64];
	memset(big, ' ', sizeof(big) - 2);
	big[sizeof(big) - 2] = '\n';
	big[0] = '{';
	big[sizeof(big) - 3] = '}';
	write_text(path, big);
	is_int(ward_keys_load(path, &ks, &err), -EINVAL, "overlong line refused");
	has_str(err.message, "line 1: longer than 4096 bytes", "overlong: message");

	/* Blank lines are fine, and a missing final newline too. */
	write_text(path, "\n" LINE("012345678901", "") "  \n" LINE("aaaaaaaaaaaa", ",\"revoked\":false"));
	char text[1024];
	ward_strlcpy(text, read_text(path), sizeof(text));
	text[strlen(text) - 1] = '\0';
	write_text(path, text);
	is_int(ward_keys_load(path, &ks, &err), 0, "blank lines and no final newline accepted");
	is_int(ward_keys_count(ks), 2, "two keys read");
	ward_keys_free(ks);

	/* add refuses to rewrite a file it cannot parse, and leaves it alone. */
	write_text(path, LINE("012345678901", "") "garbage\n");
	ward_strlcpy(text, read_text(path), sizeof(text));
	char k[WARD_KEY_STR_SIZE];
	is_int(ward_keys_add(path, "t", WARD_SCOPE_FILES, NULL, k, sizeof(k), NULL, &err), -EINVAL,
	       "add to a malformed file refused");
	has_str(err.message, "line 2: invalid JSON", "add names the bad line");
	is_str(read_text(path), text, "malformed file left untouched");
	ok(k[0] == '\0', "no key handed out");

	/* Size cap, and something that is not a regular file. */
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	ok(fd >= 0 && ftruncate(fd, WARD_KEYS_FILE_MAX + 1) == 0, "make a file over the cap");
	close(fd);
	is_int(ward_keys_load(path, &ks, &err), -EFBIG, "file over the cap refused");
	unlink(path);
	ok(mkfifo(path, 0600) == 0, "a FIFO at the path");
	is_int(ward_keys_load(path, &ks, &err), -EINVAL, "FIFO refused without hanging");
	has_str(err.message, "is not a regular file", "FIFO: message");
	unlink(path);
}

/* N processes add M keys each at once: every key must survive. */
static void test_concurrent(void)
{
	enum { N = 8, M = 5 };
	const char *path = path_in("concurrent");
	char keys[N * M][WARD_KEY_STR_SIZE];
	int p[2];
	if (pipe(p) < 0) {
		skip("pipe: %s", strerror(errno));
		return;
	}
	fflush(stdout);
	for (int i = 0; i < N; i++) {
		pid_t pid = fork();
		if (pid == 0) {
			close(p[0]);
			for (int j = 0; j < M; j++) {
				struct ward_error err;
				char k[WARD_KEY_STR_SIZE];
				if (ward_keys_add(path, "t", WARD_SCOPE_EXECUTE, NULL, k, sizeof(k),
						  NULL, &err) < 0 ||
				    write(p[1], k, sizeof(k)) != (ssize_t)sizeof(k))
					_exit(1);
			}
			_exit(0);
		}
	}
	close(p[1]);
	size_t got = 0;
	ssize_t r;
	while (got < sizeof(keys) && (r = read(p[0], (char *)keys + got, sizeof(keys) - got)) > 0)
		got += (size_t)r;
	close(p[0]);
	int failed = 0, status;
	while (wait(&status) > 0)
		failed += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
	is_int(failed, 0, "all %d adders succeeded", N);
	is_int(got, sizeof(keys), "all %d keys handed out", N * M);
	struct ward_error err;
	struct ward_keystore *ks = NULL;
	is_int(ward_keys_load(path, &ks, &err), 0, "load after concurrent adds");
	is_int(ward_keys_count(ks), N * M, "no key lost");
	int authenticated = 0;
	for (int i = 0; i < N * M; i++)
		authenticated += ward_keys_authenticate(ks, keys[i], NULL) == 0;
	is_int(authenticated, N * M, "every key authenticates");
	ward_keys_free(ks);
	is_int(mode_of(path), 0600, "still 0600");
}

int main(void)
{
	snprintf(dir, sizeof(dir), "%s", "/tmp/t-keys.XXXXXX");
	if (!mkdtemp(dir)) {
		printf("Bail out! mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	test_scopes();
	test_tenants();
	test_round_trip();
	test_add_checks();
	test_malformed();
	test_concurrent();
	nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
	return tap_done();
}
