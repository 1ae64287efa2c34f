/* src/daemon/serve.h — the `ward serve` subcommand, for src/cli/main.c. */
#ifndef WARD_DAEMON_SERVE_H
#define WARD_DAEMON_SERVE_H

/* Runs the daemon until SIGTERM; returns the exit status (0 after a clean
 * shutdown, 1 on a start failure, 2 on a usage error). */
int ward_cli_serve(int argc, char **argv);

#endif
