/* src/daemon/main.c — `ward-serve`: the daemon as its own, dynamically
 * linked program, which a static `ward serve` execs (serve-stub.c), and
 * the relay of a static `ward mcp --connect` (argv[1] "mcp"). The same
 * process setup as src/cli/main.c: fds 0-2 exist, SIGPIPE ignored. */
#include <fcntl.h>
#include <signal.h>
#include <string.h>

#include "base/util.h"
#include "serve.h"

int main(int argc, char **argv)
{
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
			_exit(125);
	struct sigaction sa = { .sa_handler = SIG_IGN };
	sigaction(SIGPIPE, &sa, NULL);
	if (argc > 1 && strcmp(argv[1], "mcp") == 0)
		return ward_cli_mcp_connect(argc - 1, argv + 1);
	return ward_cli_serve(argc, argv);
}
