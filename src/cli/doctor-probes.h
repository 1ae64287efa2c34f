/* src/cli/doctor-probes.h — child probes of `ward doctor` (internal). */
#ifndef WARD_CLI_DOCTOR_PROBES_H
#define WARD_CLI_DOCTOR_PROBES_H

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

#endif
