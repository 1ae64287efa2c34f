/* ward/policy.h — the declarative description of one sandbox.
 *
 * A policy is plain data: limits, mounts, environment, network mode, which
 * layers may degrade, and the advisory lint lists for the language kernels.
 * lib/policy/ turns JSON or flag strings into this struct; it makes no
 * syscalls and never exits. Everything here is validated before a
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

/* jansson's json_t, declared rather than included: <jansson.h> brings in
 * <stdio.h>, which breaks child-side sources that include this header after
 * base/banned.h. */
struct json_t;

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
	WARD_NET_NONE = 0,      /* a network namespace with only lo */
	WARD_NET_ALLOWLIST = 1, /* lo, plus egress through ward's proxy (ward/egress.h) */
};

/* One entry of network.allow or network.deny (docs/policy.md):
 *   "example.com"          the host itself, ports 80 and 443
 *   "*.example.com"        any name one label or more below it (not the
 *                          domain itself), ports 80 and 443
 *   "example.com:8443"     one port;  "example.com:*"  every port
 *   "10.0.0.0/8", "10.1.2.3", "2001:db8::/32", "[2001:db8::1]:443",
 *   "10.0.0.0/8:5432"      addresses (CIDR; a bare address is /32 or /128)
 * Names are stored lowercased, without a trailing dot. */
enum ward_net_rule_kind {
	WARD_NET_RULE_HOST,    /* host: exact name */
	WARD_NET_RULE_SUFFIX,  /* host: "example.com" for "*.example.com" */
	WARD_NET_RULE_CIDR,    /* addr/prefix */
};

struct ward_net_rule {
	enum ward_net_rule_kind kind;
	char *host;                 /* HOST, SUFFIX; NULL for CIDR */
	int family;                 /* CIDR: AF_INET or AF_INET6 */
	unsigned char addr[16];     /* CIDR: network address, host bits zero */
	unsigned prefix;            /* CIDR: 0..32 or 0..128 */
	uint16_t port;              /* one port; 0 with any_port false: 80 and 443 */
	bool any_port;              /* ":*" */
};

struct ward_net_policy {
	enum ward_net_mode mode;
	struct ward_net_rule *allow;
	size_t n_allow;
	struct ward_net_rule *deny; /* checked first: a deny match refuses */
	size_t n_deny;
	uint64_t max_connections;   /* at once; default 64 */
	uint64_t max_bytes_out;     /* all connections together; 0 = no limit (default) */
	uint64_t max_bytes_in;      /* 0 = no limit (default) */
};

/* The canonical text of a rule ("*.example.com", "example.com:*",
 * "10.0.0.0/8:5432", "[2001:db8::]/32:443"), as the policy JSON prints it
 * and as ward_net_rule_parse reads it back. buf of at least 320 bytes. */
char *ward_net_rule_format(const struct ward_net_rule *r, char *buf, size_t len);
/* Parses one entry; r->host is malloc'ed. 0 or -EINVAL (err names `field`,
 * e.g. "network.allow[2]", and says what was expected) or -ENOMEM. */
int ward_net_rule_parse(const char *text, struct ward_net_rule *r, const char *field,
			struct ward_error *err);
/* True when the rule covers (name or address, port). name may be NULL (an
 * address-only destination); addr may be NULL (not resolved yet: only name
 * rules can match, and a CIDR rule matches a name that is a strict address
 * literal, "10.0.0.1" or "2001:db8::1"). family AF_INET or AF_INET6 with
 * addr; an IPv4-mapped IPv6 address is matched as the IPv4 address inside
 * it. Names compare without case and without a trailing dot; "*.d" covers
 * names one label or more below d, not d itself; no port given in the rule
 * means 80 and 443. Which list the rule is on is the caller's business. */
bool ward_net_rule_match(const struct ward_net_rule *r, const char *name, int family,
			 const unsigned char *addr, uint16_t port);

/* The network object alone, for the proxy and for a live session's update
 * (PUT /v1/sessions/{id}/network). Defaults: mode "none", no entries, 64
 * connections, no byte limits. */

/* Parses a JSON document holding one network object ({"mode": ...,
 * "allow": [...], ...}, as in a policy) into *out (uninitialised storage),
 * then checks it whole. Messages read "<source>: network.allow[2]: ...",
 * err->field "network.allow[2]". 0, -EINVAL or -ENOMEM; on error *out is
 * empty (the defaults), nothing to release. */
int ward_net_policy_from_json(struct ward_net_policy *out, const char *buf, size_t len,
			      const char *source, struct ward_error *err);
/* Applies such a document onto *n as a policy document would: "allow"
 * replaces the list, "deny" adds to it, mode "none" empties both, limits
 * replace. A live session's update applies the client's body onto the
 * operator's network object, so the operator's deny entries stay, then
 * checks the result with ward_net_policy_check_tighter. 0, -EINVAL or
 * -ENOMEM; on error *n is unchanged. */
int ward_net_policy_apply_json(struct ward_net_policy *n, const char *buf, size_t len,
			       const char *source, struct ward_error *err);
/* Deep copy into uninitialised storage; 0 or -ENOMEM (then *dst is empty). */
int ward_net_policy_copy(struct ward_net_policy *dst, const struct ward_net_policy *src,
			 struct ward_error *err);
/* Frees the lists; leaves the defaults. NULL is a no-op. */
void ward_net_policy_release(struct ward_net_policy *n);
/* The canonical object, as in ward_policy_to_json: a new reference, NULL on
 * ENOMEM. */
struct json_t *ward_net_policy_to_json(const struct ward_net_policy *n);
/* Whether *p reaches no further than *base (the operator's): mode "none"
 * always passes; else both are allowlists, every entry of p's allow lies
 * within one of base's (the same host; a host or a narrower "*." under a
 * base "*."; a CIDR inside a base CIDR; ports among the base entry's:
 * 80 or 443 within the default pair, anything within ":*"), every base deny
 * entry is in p's deny list (p may add more), and each limit is as small
 * or smaller (0, no limit, is the loosest). 0, or -EINVAL naming the entry:
 * "policy: network.allow[1]: 'evil.test' is not within the operator's
 * allowlist; ...", err->field "network.allow[1]". */
int ward_net_policy_check_tighter(const struct ward_net_policy *base,
				  const struct ward_net_policy *p, struct ward_error *err);

/* The egress proxy's operator settings (ward/egress.h), checked where they
 * are given (the CLI's --egress-* flags, the daemon's config):
 *   RESOLVE        "NAME=ADDR": a host name as in a rule and an IPv4 or
 *                  IPv6 address;
 *   ALLOW_PRIVATE  "CIDR", as in a rule, without a port;
 *   DNS            "ADDR", "ADDR:PORT" (IPv4) or "[ADDR]:PORT" (IPv6).
 * 0 or -EINVAL with the message "<field>: expected ..., got \"...\"". */
enum ward_net_setting {
	WARD_NET_SETTING_RESOLVE,
	WARD_NET_SETTING_ALLOW_PRIVATE,
	WARD_NET_SETTING_DNS,
};
int ward_net_setting_check(enum ward_net_setting kind, const char *value, const char *field,
			   struct ward_error *err);

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

	char **env;                 /* "NAME=VALUE" strings, names unique;
				       env[n_env] is NULL unless env is */
	size_t n_env;

	char *workdir;              /* default "/workspace" */
	char *hostname;             /* default "sandbox" */
	char *image;                /* default "host" */
	enum ward_net_mode net;     /* == network.mode, kept for old callers */
	struct ward_net_policy network;

	bool root_inside;           /* run as uid 0 inside the user namespace */
	bool require_cgroup;        /* a missing cgroup is an error, not a degrade */
	uint32_t allow_degrade;     /* bit (1u << enum ward_layer): may degrade */

	/* "lint": advisory checks the language kernels run on code before it
	 * runs; not isolation (docs/policy.md). Dotted names ("os.system"),
	 * unique, in the order added; each array is NULL-terminated unless it
	 * is NULL (the default: empty). */
	char **lint_deny_imports;   /* modules code may not import */
	size_t n_lint_deny_imports;
	char **lint_deny_calls;     /* functions code may not call */
	size_t n_lint_deny_calls;

	/* "writable": with writable_only, the program may write below
	 * /workspace and /tmp only at these paths (normal absolute paths at or
	 * below /workspace or /tmp; unique; NULL-terminated unless NULL), the
	 * rest of both is read-only (landlock). Without it (the default) both
	 * are writable whole. Writable binds are their own ("mounts"). */
	char **writable;
	size_t n_writable;
	bool writable_only;
	/* "exec": "program": the kernel lets the program execute only the file
	 * ward starts (and the #! interpreter and ELF loader that file needs),
	 * never another program (landlock EXECUTE; docs/policy.md says what
	 * remains possible). false ("any", the default): whatever the image
	 * and read-only binds hold. */
	bool exec_program_only;
};

/* Fills *p with the secure defaults (the environment gets PATH, HOME, LANG,
 * TMPDIR, ...; nothing from the host; see docs/policy.md). Returns 0 or
 * -ENOMEM (then *p is zeroed). Parent-only: the functions below allocate;
 * only ward_layer_name and ward_layer_from_name are child-safe.
 * Policy errors carry code 0 and an empty layer: the message names the
 * origin and the field ("policy.json: limits.memory: ..."). */
int ward_policy_init(struct ward_policy *p, struct ward_error *err);

/* Frees everything *p owns and leaves it zeroed. */
void ward_policy_release(struct ward_policy *p);

/* Overlays the fields present in the JSON document (buf, len) onto *p.
 * `source` names the document in messages ("policy.json"). Unknown fields,
 * wrong types and bad values are errors naming the field, e.g.
 * "policy.json: limits.memory: expected a size like \"256M\"".
 * Scalars replace, "env" merges (null removes a name), "mounts",
 * "allow_degraded" and the "lint" lists add to what *p has (a name already
 * listed is ignored). In "network", "allow" replaces the list (so an
 * override can narrow the operator's) and makes the mode "allowlist", "deny"
 * adds to it, and mode "none" empties both. Syntax errors read
 * "policy.json:3:15: invalid JSON: ..."; documents over 64 KiB or nested
 * deeper than 8 levels are refused. Cross-field checks are left to
 * ward_policy_validate, so flags applied afterwards can still fix them.
 * Returns 0, -EINVAL or -ENOMEM. On error *p is unchanged. */
int ward_policy_load_json(struct ward_policy *p, const char *buf, size_t len,
			  const char *source, struct ward_error *err);

/* Sets one field from a string, as the CLI flags do:
 *   "limits.memory" "256M"; "limits.pids" "64"; "limits.timeout" "1.5";
 *   "limits.cpu_time" "2"; "limits.cpus" "0.5"; "limits.workspace_size" "32M";
 *   (every key of the JSON "limits" object works as "limits.<key>")
 *   "mounts.ro" "HOST[:INSIDE]"; "mounts.rw" "HOST[:INSIDE]" (split at the
 *   first ':'); "env" "NAME=VALUE"; "env.unset" "NAME"; "workdir" "/dir";
 *   "hostname" "name"; "image" "host"; "network" "none"|"allowlist" ("none"
 *   empties the lists); "network.allow" "a.test,b.test:8080" (adds, and
 *   makes the mode "allowlist"); "network.deny" "*.evil.test" (adds);
 *   "network.max_connections" "16"; "network.max_bytes_out" "100M";
 *   "network.max_bytes_in" "1G";
 *   "user.root" "true"|"false"; "cgroup.required" "true"|"false";
 *   "allow_degraded" "landlock,cgroup" (adds);
 *   "lint.deny_imports" "subprocess,socket"; "lint.deny_calls" "eval,os.system"
 *   (add; names already listed are ignored).
 * `source` names the origin ("--memory"); messages read
 * "--memory: expected a size like \"256M\", got \"lots\"". Returns 0,
 * -EINVAL or -ENOMEM; on error *p is unchanged. */
int ward_policy_set(struct ward_policy *p, const char *field, const char *value,
		    const char *source, struct ward_error *err);

/* Whole-policy checks, run once all files and flags are applied: every
 * field's own rules again (for policies filled in by hand; lint lists must
 * also hold no name twice), plus workdir
 * inside /workspace, /tmp or a mount, and cgroup.required not combined with
 * a degradable cgroup. Messages read "policy: workdir: ...". 0 or -EINVAL
 * (-ENOMEM never). */
int ward_policy_validate(const struct ward_policy *p, struct ward_error *err);

/* Checks that *p (an override applied on a copy of *base) is no looser
 * than *base in any field: every limit as small or smaller ("no limit" is
 * the loosest; a file size of 0 means the workspace size), mounts only the
 * base's own (read-only where the base's is), the base's environment
 * variables not changed (removing one is tighter), image unchanged, the network
 * within the operator's (ward_net_policy_check_tighter),
 * user.root only where the base allows it, cgroup.required kept, no
 * layer degradable that the base does not allow, the base's lint names
 * kept. workdir and hostname may differ. Fails on the first looser field:
 * "policy: limits.cpus: 64 is looser than the operator's 0.25; ...", with
 * err->field set ("limits.cpus", "env.PATH", "mounts[0]"). 0 or -EINVAL. */
int ward_policy_check_tighter(const struct ward_policy *base, const struct ward_policy *p,
			      struct ward_error *err);

/* Serialises *p as a JSON object string (malloc'ed, caller frees); NULL on
 * ENOMEM (or when a hand-filled string is not UTF-8). The output is
 * canonical (sizes and durations as exact strings, env and lint lists
 * sorted, defaults that were removed listed as null, "lint" left out when
 * both of its lists are empty), so equal policies print the same bytes, and
 * loading it onto a fresh ward_policy_init() policy gives *p back. */
char *ward_policy_to_json(const struct ward_policy *p);

/* Deep copy: *dst (uninitialised storage) gets its own copies of every
 * string and array; release it with ward_policy_release. 0 or -ENOMEM (then
 * *dst is zeroed). */
int ward_policy_copy(struct ward_policy *dst, const struct ward_policy *src,
		     struct ward_error *err);

/* True when a and b describe the same sandbox: every field equal, mounts in
 * the same order, the same environment and lint names in any order. */
bool ward_policy_equal(const struct ward_policy *a, const struct ward_policy *b);

/* The lint lists as the kernel configuration carries them:
 * {"deny_imports": [...], "deny_calls": [...]}, both keys always present,
 * names sorted. Returns a new reference (json_decref it), or NULL when both
 * lists are empty -- and on ENOMEM, which a caller that must not run without
 * its lint tells apart by the counts in *p. */
struct json_t *ward_policy_lint_json(const struct ward_policy *p);

/* "512M", "1G", "4096", "64k", "1.5G" -> bytes (binary units k/K m/M g/G
 * t/T; a fraction needs a unit and is rounded down). 0 or -EINVAL/-ERANGE
 * (overflow, or a nonzero value that rounds to 0). */
int ward_parse_size(const char *s, uint64_t *out);
/* "1.5", "30", "250ms", "2s", "1m", "1h" -> milliseconds (a bare number is
 * seconds). 0 or -EINVAL/-ERANGE, as ward_parse_size. */
int ward_parse_duration_ms(const char *s, uint64_t *out);

/* The exact text of a size ("512M", "1536K", "4096") or a duration ("30s",
 * "250ms", "2h"), as ward_parse_size and ward_parse_duration_ms read it
 * back: what messages show instead of a raw number. buf of at least 32
 * bytes; returns buf. */
char *ward_format_size(uint64_t bytes, char *buf, size_t len);
char *ward_format_duration_ms(uint64_t ms, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
