/* src/cli/run.h — `ward run` and `ward gc`. */
#ifndef WARD_CLI_RUN_H
#define WARD_CLI_RUN_H

int ward_cli_run(int argc, char **argv);
int ward_cli_gc(int argc, char **argv);

#endif
