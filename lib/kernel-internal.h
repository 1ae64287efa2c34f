/* lib/kernel-internal.h — what lib/kernel.c shares with lib/artifacts.c. */
#ifndef WARD_KERNEL_INTERNAL_H
#define WARD_KERNEL_INTERNAL_H

#include "ward/kernel.h"

/* A file put into /workspace at start, remembered to tell an unchanged
 * input from an artifact. */
struct ward_kernel_input {
	char path[1024];
	char sha256[65];
};

/* The kernel's command line of lang from the registry (runners/languages.json,
 * with "{runners}" as mounted in the sandbox), NULL-terminated; NULL when out
 * of range. */
char *const *ward_lang_kernel_argv(enum ward_lang lang);

/* The wall-time limit (and the verdict's wall_ms) of a claimed sandbox
 * counts from now again: a prepared kernel's claim calls it. In
 * lib/supervise.c. */
void ward_sandbox_restart_clock(struct ward_sandbox *sb);

/* The verdict of a sandbox whose program is taken to have exited 0 now
 * (usage sampled now); the sandbox keeps running. 0, or -EAGAIN when it
 * cannot be told before the end (no cgroup, no RUNNING record yet, already
 * over). In lib/supervise.c. */
struct ward_verdict;
int ward_sandbox_verdict_now(struct ward_sandbox *sb, struct ward_verdict *v);

int ward_artifacts_collect(struct ward_sandbox *sb, const struct ward_kernel_input *inputs,
			   size_t n_inputs, const char *copy_to,
			   const struct ward_artifact_limits *lim, json_t **list, json_t **skipped,
			   struct ward_error *err);

#endif
