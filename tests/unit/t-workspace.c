/* tests/unit/t-workspace.c — the workspace path rules, as tables.
 *
 * Two checks guard every path a client names inside /workspace: the one
 * name rule (ward_workspace_path_ok, which the daemon's srv_path_ok, the
 * CLI's --file and the sandbox's setup all apply), and the
 * lookups of lib/workspace.c, which must keep any name, however it got
 * there, beneath the directory it starts from (openat2 RESOLVE_BENEATH, no
 * symlinks). Each row says what must happen and why.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"
#include "workspace.h"

bool srv_path_ok(const char *p); /* lib/service/request.c */

static void name_rule(void)
{
	static const struct { const char *path; bool ok; const char *why; } rows[] = {
		{ "a", true, "a plain name" },
		{ "a..b", true, "two dots inside a name are a name" },
		{ "..a", true, "a name starting with two dots" },
		{ "d/e/f.txt", true, "nested" },
		{ ".hidden", true, "a dot file" },
		{ "", false, "empty" },
		{ "..", false, "the parent" },
		{ "../x", false, "up and out" },
		{ "d/../../x", false, "down, then up and out" },
		{ "d/..", false, "a trailing parent" },
		{ ".", false, "the workspace itself" },
		{ "./a", false, "a dot component" },
		{ "a/./b", false, "a dot component inside" },
		{ "a//b", false, "an empty component" },
		{ "/a", false, "absolute" },
		{ "/", false, "the root" },
		{ "a\nb", false, "a newline" },
		{ "a\tb", false, "a tab" },
		{ "a\x1b[2Jb", false, "an escape sequence" },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		ok(srv_path_ok(rows[i].path) == rows[i].ok, "name rule: %s (%s)",
		   rows[i].ok ? "accepts" : "refuses", rows[i].why);

	ok(!srv_path_ok("a/"), "name rule: refuses a trailing '/'");
	ok(!srv_path_ok("a/./b") && !ward_workspace_path_ok("a/"), "the daemon's rule is the library's");

	/* Length: 1000 bytes pass, 1001 do not. A NUL ends a C string, so the
	 * JSON layer must refuse it before (JSON_ALLOW_NUL is never set). */
	char longest[1002];
	memset(longest, 'a', sizeof(longest));
	longest[1000] = '\0';
	ok(srv_path_ok(longest), "name rule: accepts 1000 bytes");
	longest[1000] = 'a';
	longest[1001] = '\0';
	ok(!srv_path_ok(longest), "name rule: refuses 1001 bytes");
	for (int c = 1; c < 0x20; c++) {
		char p[4] = { 'a', (char)c, 'b', '\0' };
		if (srv_path_ok(p)) {
			ok(0, "name rule: refuses control character %#x", c);
			return;
		}
	}
	ok(1, "name rule: refuses every control character 0x01-0x1f");
}

/* The library's rule itself, at its edges. */
static void library_rule(void)
{
	static const char *const good[] = { "a", "a..b", "..a", "a..", "dir/a..b", ".hidden",
					    "a/b/c.txt", "...", "\xc3\xa9" };
	static const char *const bad[] = { "", "/a", "..", ".", "a/..", "../a", "a/../b", "a//b",
					   "a/", "a/./b", "a\nb", "a\tb", "a\x7f" };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ok(ward_workspace_path_ok(good[i]), "library rule: accepts '%s'", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(!ward_workspace_path_ok(bad[i]), "library rule: refuses row %zu", i);
	char longp[WARD_WORKSPACE_PATH_MAX + 2];
	memset(longp, 'a', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = '\0';
	ok(!ward_workspace_path_ok(longp), "library rule: refuses %d bytes", WARD_WORKSPACE_PATH_MAX + 1);
	longp[WARD_WORKSPACE_PATH_MAX] = '\0';
	ok(ward_workspace_path_ok(longp), "library rule: accepts %d bytes", WARD_WORKSPACE_PATH_MAX);
	ok(!ward_workspace_path_ok(NULL), "library rule: refuses NULL");
}

/* What lib/workspace.c does with one name below ws: create its parents and
 * the file itself; 0 or -errno. */
static int create(int ws, const char *rel)
{
	const char *leaf;
	int dir = ward_mkdirs_beneath(ws, rel, &leaf);
	if (dir < 0)
		return -errno;
	int fd = ward_open_beneath(dir, leaf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int e = errno;
	close(dir);
	if (fd < 0)
		return -e;
	close(fd);
	return 0;
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static void lookups(void)
{
	char top[] = "/tmp/t-workspace.XXXXXX", ws[64], p[128];
	if (!mkdtemp(top)) {
		skip("mkdtemp: %s", strerror(errno));
		return;
	}
	snprintf(ws, sizeof(ws), "%s/ws", top);
	mkdir(ws, 0755);
	/* planted links: to a host dir, to the parent, to a magic link */
	static const char *const links[][2] = {
		{ "/etc", "etc" }, { "..", "up" }, { "/proc/self/root", "proc" },
	};
	for (size_t i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/%s", ws, links[i][1]);
		if (symlinkat(links[i][0], AT_FDCWD, p) < 0)
			diag("symlink %s: %s", p, strerror(errno));
	}
	int fd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	static const struct { const char *path; int want; const char *why; } rows[] = {
		{ "a..b", 0, "a name with two dots is created" },
		{ "d/e/a..b", 0, "parents are created beneath" },
		{ "..", -EXDEV, "the parent is beyond" },
		{ "../escaped", -EXDEV, "up and out is beyond" },
		{ "d/../../escaped", -EXDEV, "down, then up and out" },
		/* a link as a parent: O_DIRECTORY | O_NOFOLLOW on it is ENOTDIR */
		{ "etc/escaped", -ENOTDIR, "a symlinked parent is refused" },
		{ "etc", -ELOOP, "no symlink is followed (leaf)" },
		{ "up/escaped", -ENOTDIR, "a link to the parent is refused" },
		{ "proc/escaped", -ENOTDIR, "a magic link is refused" },
		{ ".", -EISDIR, "the workspace itself is no file" },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		int r = create(fd, rows[i].path);
		ok(r == rows[i].want, "lookup '%s': %s (got %s)", rows[i].path, rows[i].why,
		   r ? strerror(-r) : "created");
	}
	is_int(count_entries(top), 1, "nothing was created beside the workspace");
	ok(access("/etc/escaped", F_OK) < 0, "nothing was created in /etc");
	close(fd);
	/* clean up what the rows created */
	const char *made[] = { "d/e/a..b", "d/e", "d", "a..b", "etc", "up", "proc" };
	for (size_t i = 0; i < sizeof(made) / sizeof(made[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", ws, made[i]);
		if (unlink(p) < 0)
			rmdir(p);
	}
	rmdir(ws);
	rmdir(top);
}

int main(void)
{
	name_rule();
	library_rule();
	lookups();
	return tap_done();
}
