/* src/cli/run.h — `ward run` and `ward gc`. */
#ifndef WARD_CLI_RUN_H
#define WARD_CLI_RUN_H

struct ward_cli_run;
struct ward_egress;
struct ward_error;
struct ward_policy;

int ward_cli_run(int argc, char **argv);
/* network.mode "allowlist": the run's own egress proxy, from the --egress-*
 * flags; *out stays NULL for mode "none". Freed with ward_egress_free after
 * the sandbox is released. 0, or -errno with err naming the setting. */
int ward_cli_egress_new(const struct ward_cli_run *o, const struct ward_policy *p,
			struct ward_egress **out, struct ward_error *err);
int ward_cli_gc(int argc, char **argv);

#endif
