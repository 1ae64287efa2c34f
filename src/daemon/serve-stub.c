/* src/daemon/serve-stub.c — `ward serve` and `ward mcp --connect` in a
 * static ward.
 *
 * libmicrohttpd's static form needs gnutls and p11-kit archives a host
 * rarely has, so a static ward leaves the daemon to `ward-serve`, a
 * dynamically linked helper built beside it (src/daemon/main.c). This stub
 * only finds it — next to this binary (build tree), else in libexecdir —
 * and execs it with the same arguments and environment (for the relay,
 * "mcp" first: ward-serve's main() sends that to ward_cli_mcp_connect,
 * which needs libcurl).
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "serve.h"

static void try_exec(const char *dir, char **argv)
{
	char path[PATH_MAX];
	if ((size_t)snprintf(path, sizeof(path), "%s/ward-serve", dir) >= sizeof(path))
		return;
	if (access(path, X_OK) == 0)
		execv(path, argv);
}

/* Execs ward-serve with argv; returns only when it is not found. */
static int exec_serve(char **argv, const char *what)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			try_exec(exe, argv);
		}
	}
#ifdef WARD_LIBEXECDIR
	try_exec(WARD_LIBEXECDIR, argv);
#endif
	fprintf(stderr, "ward: error: %s: this ward is static and 'ward-serve' (its dynamically "
		"linked daemon) was not found next to it"
#ifdef WARD_LIBEXECDIR
		" or in " WARD_LIBEXECDIR
#endif
		"\n", what);
	return 1;
}

int ward_cli_serve(int argc, char **argv)
{
	(void)argc;
	return exec_serve(argv, "serve");
}

int ward_cli_mcp_connect(int argc, char **argv)
{
	/* ward-serve mcp ARGS...: argv[0] is "mcp" already */
	char **av = calloc((size_t)argc + 2, sizeof(*av));
	if (!av)
		return 1;
	av[0] = (char *)"ward-serve";
	for (int i = 0; i < argc; i++)
		av[i + 1] = argv[i];
	int r = exec_serve(av, "mcp --connect");
	free(av);
	return r;
}
