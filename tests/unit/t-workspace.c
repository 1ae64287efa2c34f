/* tests/unit/t-workspace.c — the one workspace-path rule (lib/workspace.c),
 * which the CLI's --file, the daemon's files and the sandbox's setup all
 * apply: a name with dots is a name; a ".." component is refused. */
#include <string.h>

#include "tap.h"
#include "workspace.h"

int main(void)
{
	static const char *const good[] = { "a", "a..b", "..a", "a..", "dir/a..b", ".hidden",
					    "a/b/c.txt", "...", "é" };
	static const char *const bad[] = { "", "/a", "..", ".", "a/..", "../a", "a/../b", "a//b",
					   "a/", "a/./b", "a\nb", "a\tb", "a\x7f" };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ok(ward_workspace_path_ok(good[i]), "accepted: '%s'", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(!ward_workspace_path_ok(bad[i]), "refused: '%s'", bad[i]);
	char longp[WARD_WORKSPACE_PATH_MAX + 2];
	memset(longp, 'a', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = '\0';
	ok(!ward_workspace_path_ok(longp), "refused: longer than %d bytes", WARD_WORKSPACE_PATH_MAX);
	longp[WARD_WORKSPACE_PATH_MAX] = '\0';
	ok(ward_workspace_path_ok(longp), "accepted: exactly %d bytes", WARD_WORKSPACE_PATH_MAX);
	ok(!ward_workspace_path_ok(NULL), "refused: NULL");
	return tap_done();
}
