/* src/cli/exec.h — `ward exec` and `ward call`. */
#ifndef WARD_CLI_EXEC_H
#define WARD_CLI_EXEC_H

/* mode: WARD_CLI_EXEC or WARD_CLI_CALL (options.h). */
int ward_cli_code(int mode, int argc, char **argv);

#endif
