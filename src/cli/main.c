/* src/cli/main.c — the ward command: dispatch to subcommands.
 * Must never run anything of the caller's before a sandbox exists. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "config.h"
#include "doctor.h"
#include "audit.h"
#include "exec.h"
#include "keys.h"
#include "mcp.h"
#include "options.h"
#include "run.h"
#include "src/daemon/serve.h"

static const char usage[] =
	"usage: ward COMMAND [OPTIONS]\n"
	"\n"
	"Runs untrusted code in a disposable, kernel-isolated sandbox.\n"
	"\n"
	"commands:\n"
	"  run [OPTIONS] -- PROGRAM [ARG...]   run a program in a fresh sandbox\n"
	"  exec --lang LANG -c CODE...         run code cells in a language kernel\n"
	"  call --lang python -f F --function  call a function with JSON arguments\n"
	"  doctor [--json]                     what this host supports, and fixes\n"
	"  keys add|list|revoke                manage API keys (stored hashed)\n"
	"  audit verify FILE                   check an audit log's hash chain\n"
	"  serve [OPTIONS]                     the HTTP/JSON sandbox service (docs/api.md)\n"
	"  gc                                  remove what dead supervisors left\n"
	"  help                                this text\n"
	"  version                             ward's version\n"
	"\n"
	"'ward COMMAND --help' describes each command.\n";

/* fds 0-2 must exist: pipes created later must never land on them. */
static void ensure_stdio(void)
{
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
			_exit(125);
}

int main(int argc, char **argv)
{
	ensure_stdio();
	/* A closed reader must give EPIPE, not kill the supervisor mid-run. */
	struct sigaction sa = { .sa_handler = SIG_IGN };
	sigaction(SIGPIPE, &sa, NULL);

	if (argc < 2) {
		fputs(usage, stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "run") == 0)
		return ward_cli_run(argc - 1, argv + 1);
	if (strcmp(cmd, "exec") == 0)
		return ward_cli_code(WARD_CLI_EXEC, argc - 1, argv + 1);
	if (strcmp(cmd, "call") == 0)
		return ward_cli_code(WARD_CLI_CALL, argc - 1, argv + 1);
	if (strcmp(cmd, "keys") == 0)
		return ward_cli_keys(argc - 1, argv + 1);
	if (strcmp(cmd, "audit") == 0)
		return ward_cli_audit(argc - 1, argv + 1);
	if (strcmp(cmd, "doctor") == 0)
		return ward_cli_doctor(argc - 1, argv + 1);
	if (strcmp(cmd, "serve") == 0)
		return ward_cli_serve(argc - 1, argv + 1);
	if (strcmp(cmd, "mcp") == 0)
		return ward_cli_mcp(argc - 1, argv + 1);
	if (strcmp(cmd, "gc") == 0)
		return ward_cli_gc(argc - 1, argv + 1);
	if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
		fputs(usage, stdout);
		return 0;
	}
	if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
		printf("ward %s\n", WARD_VERSION_STRING);
		return 0;
	}
	fprintf(stderr, "ward: error: unknown command '%s'\n%s", cmd, usage);
	return 2;
}
