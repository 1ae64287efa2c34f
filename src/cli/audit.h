/* src/cli/audit.h — `ward audit`: checks the audit log of `ward serve`.
 *
 * Read-only: it never writes to, locks or repairs the log it checks.
 */
#ifndef WARD_CLI_AUDIT_H
#define WARD_CLI_AUDIT_H

/* Runs `ward audit verify FILE [--json] [--genesis HEX]` and `ward audit
 * --help`; argv[0] is "audit". Prints "ok: N lines, chain intact" or the
 * first break ("line 7: hash does not match its content (edited)") on
 * stdout, or one JSON object with --json; errors go to stderr. Returns the
 * exit status: 0 when the chain is intact, 1 at a break, 2 on a usage error
 * or when FILE cannot be read. Parent-only. */
int ward_cli_audit(int argc, char **argv);

#endif
