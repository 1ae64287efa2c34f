/* src/cli/cancel.c — cancellation by signal, as a self-pipe.
 * The handler only writes one byte: async-signal-safe. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "base/util.h"
#include "cancel.h"

static int write_end = -1, read_end = -1;

static void on_cancel(int sig)
{
	(void)sig;
	int saved = errno;
	if (write_end >= 0 && write(write_end, "c", 1) < 0) {
		/* a full pipe already says "cancel" */
	}
	errno = saved;
}

int ward_cli_cancel_fd(void)
{
	int p[2];
	if (read_end >= 0 || pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return read_end;
	read_end = p[0];
	write_end = p[1];
	struct sigaction sa = { .sa_handler = on_cancel };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	return read_end;
}
