/* ward/policy.h — the declarative description of one sandbox.
 *
 * A policy is plain data: limits, mounts, environment, network mode and which
 * layers may degrade. lib/policy/ turns JSON or flag strings into this struct;
 * it makes no syscalls and never exits. Everything here is validated before a
 * sandbox is built, and every error names the field that is wrong.
 */
#ifndef WARD_POLICY_H
#define WARD_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ward/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The isolation layers, in the order the pipeline applies them. */
enum ward_layer {
	WARD_LAYER_USERNS,
	WARD_LAYER_MOUNT,
	WARD_LAYER_PID,
	WARD_LAYER_NET,
	WARD_LAYER_IPC,
	WARD_LAYER_UTS,
	WARD_LAYER_CGROUPNS,
	WARD_LAYER_TIME,
	WARD_LAYER_CGROUP,
	WARD_LAYER_RLIMITS,
	WARD_LAYER_PRIVILEGES,
	WARD_LAYER_LANDLOCK,
	WARD_LAYER_SECCOMP,
	WARD_LAYER_ENV,
	WARD_LAYER_COUNT,
};

/* "userns", "mount", ... ; NULL for an unknown id. */
const char *ward_layer_name(enum ward_layer layer);
/* Inverse of ward_layer_name; -1 when unknown. */
int ward_layer_from_name(const char *name);

enum ward_net_mode {
	WARD_NET_NONE = 0, /* a network namespace with only lo */
};

struct ward_bind {
	char *host;    /* absolute host path */
	char *inside;  /* absolute path inside the sandbox */
	bool writable;
};

struct ward_policy {
	/* limits; 0 means "no limit" only where documented */
	uint64_t memory;            /* bytes; default 512 MiB */
	uint64_t pids;              /* default 128 */
	uint64_t timeout_ms;        /* wall time; default 30 s */
	uint64_t cpu_time_ms;       /* CPU time; 0 = none (default) */
	uint64_t cpus_milli;        /* CPU quota, 1000 = one CPU; 0 = none (default) */
	uint64_t workspace_size;    /* bytes; default 64 MiB */
	uint64_t workspace_inodes;  /* default 16384 */
	uint64_t tmp_size;          /* bytes; default 64 MiB */
	uint64_t tmp_inodes;        /* default 16384 */
	uint64_t nofile;            /* RLIMIT_NOFILE; default 1024 */
	uint64_t fsize;             /* RLIMIT_FSIZE bytes; 0 = workspace size */
	uint64_t stack;             /* RLIMIT_STACK bytes; default 8 MiB */
	uint64_t output_limit;      /* stdout+stderr bytes kept; default 16 MiB */

	struct ward_bind *binds;    /* --ro / --rw and policy "mounts" */
	size_t n_binds;

	char **env;                 /* "NAME=VALUE" strings, names unique */
	size_t n_env;

	char *workdir;              /* default "/workspace" */
	char *hostname;             /* default "sandbox" */
	char *image;                /* default "host" */
	enum ward_net_mode net;

	bool root_inside;           /* run as uid 0 inside the user namespace */
	bool require_cgroup;        /* a missing cgroup is an error, not a degrade */
	uint32_t allow_degrade;     /* bit (1u << enum ward_layer): may degrade */
};

/* Fills *p with the secure defaults (the environment gets PATH, HOME, LANG,
 * TMPDIR, ...). Returns 0 or -ENOMEM. */
int ward_policy_init(struct ward_policy *p, struct ward_error *err);

/* Frees everything *p owns and leaves it zeroed. */
void ward_policy_release(struct ward_policy *p);

/* Overlays the fields present in the JSON document (buf, len) onto *p.
 * `source` names the document in messages ("policy.json"). Unknown fields,
 * wrong types and bad values are errors naming the field, e.g.
 * "policy.json: limits.memory: expected a size like \"256M\"".
 * On error *p is unchanged. */
int ward_policy_load_json(struct ward_policy *p, const char *buf, size_t len,
			  const char *source, struct ward_error *err);

/* Sets one field from a string, as the CLI flags do:
 *   "limits.memory" "256M"; "limits.pids" "64"; "limits.timeout" "1.5";
 *   "limits.cpu_time" "2"; "limits.cpus" "0.5"; "limits.workspace_size" "32M";
 *   "mounts.ro" "HOST[:INSIDE]"; "mounts.rw" "HOST[:INSIDE]";
 *   "env" "NAME=VALUE"; "workdir" "/dir"; "network" "none".
 * `source` names the origin ("--memory"). */
int ward_policy_set(struct ward_policy *p, const char *field, const char *value,
		    const char *source, struct ward_error *err);

/* Whole-policy checks (cross-field). */
int ward_policy_validate(const struct ward_policy *p, struct ward_error *err);

/* Serialises *p as a JSON object string (malloc'ed, caller frees); NULL on
 * ENOMEM. */
char *ward_policy_to_json(const struct ward_policy *p);

/* "512M", "1G", "4096", "64k" -> bytes (binary units). 0 or -EINVAL/-ERANGE. */
int ward_parse_size(const char *s, uint64_t *out);
/* "1.5", "30", "250ms", "2s", "1m" -> milliseconds. 0 or -EINVAL/-ERANGE. */
int ward_parse_duration_ms(const char *s, uint64_t *out);

#ifdef __cplusplus
}
#endif
#endif
