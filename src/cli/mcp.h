/* src/cli/mcp.h — `ward mcp`: an MCP server on stdio (src/cli/mcp.c). */
#ifndef WARD_CLI_MCP_H
#define WARD_CLI_MCP_H

/* Serves one MCP client on stdin/stdout until stdin ends; with --connect
 * relays to a daemon. Returns the exit status (0, 1 setup failed, 2 usage). */
int ward_cli_mcp(int argc, char **argv);

#endif
