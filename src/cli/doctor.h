/* src/cli/doctor.h — `ward doctor`: what this host offers each isolation layer.
 *
 * Reports every kernel feature ward relies on, what ward does without a
 * missing one, and the sysctl, kernel option or package that fixes it. It
 * must never change the host: probes run in forked children that are always
 * reaped, and mounts happen only inside a child's own mount namespace.
 */
#ifndef WARD_CLI_DOCTOR_H
#define WARD_CLI_DOCTOR_H

/* Runs `ward doctor [--json] [-q] [--help]`; argv[0] is "doctor".
 * Writes the report to stdout (one JSON object with --json), usage errors to
 * stderr. Returns the exit status: 0 when everything ward requires is
 * present, 1 when something required is missing, 2 on a usage error.
 * Parent-only (forks, allocates, uses stdio). */
int ward_cli_doctor(int argc, char **argv);

#endif
