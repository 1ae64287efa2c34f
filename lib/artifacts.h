/* lib/artifacts.h — the workspace scan of lib/artifacts.c, for a caller
 * that holds its own fd of a sandbox's /workspace (a session call's
 * listing, made on a worker thread of the service core). */
#ifndef WARD_ARTIFACTS_H
#define WARD_ARTIFACTS_H

#include <jansson.h>
#include <time.h>

#include "ward/error.h"
#include "ward/kernel.h"

/* Lists the regular files under the workspace ws (an fd of it, borrowed)
 * whose status changed at or after since (st_ctime: created, written,
 * renamed, chmod-ed), as ward_kernel_artifacts lists (path, size, sha256,
 * mime_type, within lim's caps; links and special files skipped, never
 * followed), without copying. Reads only through ws, never through a link
 * or into another mount. 0 with *list and *skipped (new arrays), or
 * -errno with err. Safe on any thread: it touches only ws and what it
 * allocates. */
int ward_artifacts_scan(int ws, const struct timespec *since,
			const struct ward_artifact_limits *lim, json_t **list, json_t **skipped,
			struct ward_error *err);

#endif
