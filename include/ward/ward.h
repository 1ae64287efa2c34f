/* ward/ward.h — run a program in a fresh sandbox.
 *
 * The caller is the supervisor: it builds a plan from a policy (parsing and
 * allocation happen here, before clone), starts the sandbox, relays or
 * captures its output, enforces the wall-time limit, and fills a verdict.
 * Nothing is left behind when ward_run returns, however the run ended.
 */
#ifndef WARD_WARD_H
#define WARD_WARD_H

#include "ward/error.h"
#include "ward/policy.h"
#include "ward/verdict.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WARD_VERSION "0.1.0"

enum ward_output_mode {
	WARD_OUTPUT_PASSTHROUGH, /* relay to the caller's fds 1 and 2 */
	WARD_OUTPUT_CAPTURE,     /* keep in verdict->out / verdict->err */
};

struct ward_egress;

struct ward_run_options {
	enum ward_output_mode output;
	int stdin_fd;            /* relayed to the program's stdin; -1: /dev/null */
	int verbose;             /* reserved: the CLI prints a summary when > 0 */
	int cancel_fd;           /* readable = cancel: the sandbox is killed and
				  * the status is "killed"; -1: none */
	struct ward_egress *egress; /* network.mode "allowlist": its proxy (ward/egress.h) */
};

/* Runs argv (argv[0] resolved inside the sandbox through the policy's PATH)
 * under policy. Returns 0 when the program ran (whatever its status; see
 * verdict), or a negative errno when the sandbox could not be set up; then
 * verdict->status is WARD_STATUS_SETUP_FAILED and err names the layer.
 * Parent-only; the caller keeps ownership of everything it passes. */
int ward_run(const struct ward_policy *policy, char *const argv[],
	     const struct ward_run_options *opts, struct ward_verdict *verdict,
	     struct ward_error *err);

#ifdef __cplusplus
}
#endif
#endif
