/* src/cli/keys.h — `ward keys add|list|revoke`: the API keys of `ward serve`.
 *
 * It must never print a secret except the new key of `add`, once, on
 * stdout, and never print hashes.
 */
#ifndef WARD_CLI_KEYS_H
#define WARD_CLI_KEYS_H

/* Runs `ward keys SUBCOMMAND [OPTIONS]`; argv[0] is "keys".
 * The keys file is --keys-file PATH, else $WARD_KEYS_FILE, else
 * /etc/ward/keys. Results go to stdout (JSON with --json), errors to
 * stderr. Returns the exit status: 0 on success, 1 when the operation
 * failed (unreadable or malformed file, unknown key id), 2 on a usage
 * error (the message names the flag). Parent-only. */
int ward_cli_keys(int argc, char **argv);

#endif
