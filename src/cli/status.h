/* src/cli/status.h — a verdict as the exit status of `ward run`/`exec`/`call`:
 * the program's own; 128+N when a signal N ended it; 125 when the sandbox
 * could not be set up. */
#ifndef WARD_CLI_STATUS_H
#define WARD_CLI_STATUS_H

#include "ward/verdict.h"

static inline int ward_cli_exit_status(const struct ward_verdict *v)
{
	if (v->status == WARD_STATUS_SETUP_FAILED)
		return 125;
	if (v->signal)
		return 128 + v->signal;
	return v->exit_code;
}

#endif
