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

int ward_artifacts_collect(struct ward_sandbox *sb, const struct ward_kernel_input *inputs,
			   size_t n_inputs, const char *copy_to,
			   const struct ward_artifact_limits *lim, json_t **list, json_t **skipped,
			   struct ward_error *err);

#endif
