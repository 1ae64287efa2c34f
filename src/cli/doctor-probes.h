/* src/cli/doctor-probes.h — child probes of `ward doctor` (internal). */
#ifndef WARD_CLI_DOCTOR_PROBES_H
#define WARD_CLI_DOCTOR_PROBES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

int doc_reap(pid_t pid);
/* Runs fn in a forked child: 0, a positive errno, or -N for signal N. */
int doc_child(int (*fn)(const void *), const void *arg);
/* The same in a private temp dir (passed as arg), removed afterwards. */
int doc_child_in_tmpdir(int (*fn)(const void *), int *err);
int doc_try_unshare(const void *arg);
int doc_try_unshare_as_nobody(const void *arg);
int doc_try_fsmount(const void *arg);
int doc_write_proc(const char *path, const char *a, uint64_t id, const char *b);
int doc_try_overlay(const void *arg);
int doc_userns_fd(void);
int doc_try_idmap(const void *arg);
int doc_try_filter(const void *arg);
int doc_try_int80(const void *arg);
/* Whether this process is in the initial user namespace, by the library's
 * rule (lib/layers/userns.c: its uid_map maps all 2^32-1 ids). Root of a
 * nested one, as under `unshare -r`, is not host root: ward maps like an
 * unprivileged user there. *host_uid (may be NULL) is the host id that the
 * euid stands for, or -1 when the map does not say. */
bool doc_initial_userns(long long *host_uid);

#endif
