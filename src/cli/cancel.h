/* src/cli/cancel.h — SIGINT, SIGTERM and SIGHUP as a readable fd. */
#ifndef WARD_CLI_CANCEL_H
#define WARD_CLI_CANCEL_H

/* Installs the handlers once and returns the read end of a pipe that
 * becomes readable when one of the signals arrives (-1 if none could be
 * made). The process lives for one run, so the pipe is never closed. */
int ward_cli_cancel_fd(void);

#endif
