/* src/daemon/serve.h — the `ward serve` subcommand, for src/cli/main.c. */
#ifndef WARD_DAEMON_SERVE_H
#define WARD_DAEMON_SERVE_H

/* Runs the daemon until SIGTERM; returns the exit status (0 after a clean
 * shutdown, 1 on a start failure, 2 on a usage error). */
int ward_cli_serve(int argc, char **argv);

/* `ward mcp --connect URL ...` (argv as `ward mcp` got it): a stdio MCP
 * server that relays every message to a daemon's /mcp endpoint (streamable
 * HTTP, libcurl). Linked where libcurl is (`ward-serve`, a dynamic ward); a
 * static ward's version execs `ward-serve` with the same arguments, and
 * ward-serve's main() sends an argv[1] of "mcp" here. Returns the exit
 * status. */
int ward_cli_mcp_connect(int argc, char **argv);

#endif
