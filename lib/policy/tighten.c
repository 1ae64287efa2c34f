/* lib/policy/tighten.c — an override may only tighten the policy below it.
 *
 * Every member of struct ward_policy has a row, in wp_limits[] (the limits,
 * with their order in the `tight` column) or in wp_members[] below (the
 * rest, each with its own rule), and the unit test walks both tables and
 * the struct's layout, so a new field cannot be added without saying how it
 * tightens. A field an override may change freely (the working directory,
 * the hostname: neither widens what the sandbox reaches) says so in its row.
 * No syscalls, no allocation.
 */
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "policy/internal.h"

#define LOOSER "an override may only tighten the operator's policy"

static uint64_t get_u64(const struct ward_policy *p, size_t offset)
{
	return *(const uint64_t *)(const void *)((const char *)p + offset);
}

/* The value a limit stands for, for comparing: "no limit" is the largest,
 * a file size of 0 is the workspace size. */
static uint64_t effective(const struct ward_policy *p, const struct wp_limit *l)
{
	uint64_t v = get_u64(p, l->offset);
	if (v != 0)
		return v;
	if (l->tight == WP_TIGHT_SMALLER_0_WORKSPACE)
		return p->workspace_size;
	if (l->tight == WP_TIGHT_SMALLER_0_NONE)
		return UINT64_MAX;
	return 0;
}

static const char *shown(const struct ward_policy *p, const struct wp_limit *l,
			 char *buf, size_t len)
{
	uint64_t v = get_u64(p, l->offset);
	if (v == 0 && l->zero) {
		char ws[32];
		if (l->tight == WP_TIGHT_SMALLER_0_WORKSPACE)
			snprintf(buf, len, "%s (%s)", l->zero,
				 wp_format(WP_SIZE, p->workspace_size, ws, sizeof(ws)));
		else
			ward_strlcpy(buf, l->zero, len);
		return buf;
	}
	return wp_format(l->kind, v, buf, len);
}

static int check_limits(const struct ward_policy *base, const struct ward_policy *p,
			struct ward_error *err)
{
	for (size_t i = 0; i < wp_n_limits; i++) {
		const struct wp_limit *l = &wp_limits[i];
		char field[WP_PATH_MAX], a[64], b[64];
		if (effective(p, l) <= effective(base, l))
			continue;
		snprintf(field, sizeof(field), "limits.%s", l->key);
		return wp_fail_at(err, "policy", field, "%s is looser than the operator's %s; %s",
				  shown(p, l, a, sizeof(a)), shown(base, l, b, sizeof(b)),
				  LOOSER);
	}
	return 0;
}

/* --- the other members, one rule each --- */

static int free_to_change(const struct ward_policy *base, const struct ward_policy *p,
			  const char *field, struct ward_error *err)
{
	(void)base, (void)p, (void)field, (void)err;
	return 0;
}

/* Each mount must be one of the operator's, and writable only if that one
 * is: a mount is host access, so fewer and read-only is tighter. */
static int mounts_subset(const struct ward_policy *base, const struct ward_policy *p,
			 const char *field, struct ward_error *err)
{
	for (size_t i = 0; i < p->n_binds; i++) {
		const struct ward_bind *b = &p->binds[i];
		bool found = false;
		for (size_t j = 0; !found && j < base->n_binds; j++)
			found = b->host && b->inside && base->binds[j].host &&
				base->binds[j].inside &&
				strcmp(b->host, base->binds[j].host) == 0 &&
				strcmp(b->inside, base->binds[j].inside) == 0 &&
				(!b->writable || base->binds[j].writable);
		if (!found) {
			char sub[WP_PATH_MAX];
			snprintf(sub, sizeof(sub), "%s[%zu]", field, i);
			return wp_fail_at(err, "policy", sub,
					  "not one of the operator's mounts (or writable where it is read-only); %s",
					  LOOSER);
		}
	}
	return 0;
}

static const char *env_lookup(const struct ward_policy *p, const char *name, size_t len)
{
	for (size_t i = 0; i < p->n_env; i++)
		if (p->env[i] && strncmp(p->env[i], name, len) == 0 && p->env[i][len] == '=')
			return p->env[i] + len + 1;
	return NULL;
}

/* The operator's variables stay as they are; an override may add its own.
 * A variable is data the sandbox's own code could set anyway, except that
 * the operator's (a proxy, a path, a token name) are what the operator
 * configured the runtime with. */
static int env_kept(const struct ward_policy *base, const struct ward_policy *p,
		    const char *field, struct ward_error *err)
{
	for (size_t i = 0; i < base->n_env; i++) {
		const char *e = base->env[i], *eq = e ? strchr(e, '=') : NULL;
		if (!eq)
			continue;
		size_t len = (size_t)(eq - e);
		const char *v = env_lookup(p, e, len);
		/* removing one only takes from the program */
		if (!v || strcmp(v, eq + 1) == 0)
			continue;
		char sub[WP_PATH_MAX];
		snprintf(sub, sizeof(sub), "%s.%.*s", field, (int)(len < 64 ? len : 64), e);
		return wp_fail_at(err, "policy", sub,
				  "is set by the operator and may not be changed; %s", LOOSER);
	}
	return 0;
}

static int same_string(const struct ward_policy *base, const struct ward_policy *p,
		       size_t offset, const char *field, struct ward_error *err)
{
	const char *a = *(char *const *)(const void *)((const char *)base + offset);
	const char *b = *(char *const *)(const void *)((const char *)p + offset);
	if (a == b || (a && b && strcmp(a, b) == 0))
		return 0;
	return wp_fail_at(err, "policy", field, "may not differ from the operator's; %s",
			  LOOSER);
}

static int image_same(const struct ward_policy *base, const struct ward_policy *p,
		      const char *field, struct ward_error *err)
{
	return same_string(base, p, offsetof(struct ward_policy, image), field, err);
}

/* --- network --- */

/* Every entry the client allows lies within one of the operator's. */
static int net_allow_within(const struct ward_net_policy *base, const struct ward_net_policy *p,
			    struct ward_error *err)
{
	for (size_t i = 0; i < p->n_allow; i++) {
		bool found = false;
		for (size_t j = 0; !found && j < base->n_allow; j++)
			found = wp_net_rule_within(&p->allow[i], &base->allow[j]);
		if (found)
			continue;
		char sub[WP_PATH_MAX], text[320];
		snprintf(sub, sizeof(sub), "network.allow[%zu]", i);
		return wp_fail_at(err, "policy", sub, "'%s' is not within the operator's allowlist; %s",
				  ward_net_rule_format(&p->allow[i], text, sizeof(text)), LOOSER);
	}
	return 0;
}

/* The operator's deny entries stay; the client may add its own. */
static int net_deny_kept(const struct ward_net_policy *base, const struct ward_net_policy *p,
			 struct ward_error *err)
{
	for (size_t j = 0; j < base->n_deny; j++) {
		bool found = false;
		for (size_t i = 0; !found && i < p->n_deny; i++)
			found = wp_net_rule_equal(&p->deny[i], &base->deny[j]);
		if (found)
			continue;
		char text[320];
		return wp_fail_at(err, "policy", "network.deny",
				  "the operator's '%s' may not be removed; %s",
				  ward_net_rule_format(&base->deny[j], text, sizeof(text)), LOOSER);
	}
	return 0;
}

/* 0 is "no limit", the loosest. */
static int net_limit_smaller(uint64_t base, uint64_t p, const char *field, enum wp_kind kind,
			     struct ward_error *err)
{
	uint64_t eb = base ? base : UINT64_MAX, ep = p ? p : UINT64_MAX;
	char a[32] = "no limit", b[32] = "no limit";
	if (ep <= eb)
		return 0;
	if (p)
		wp_format(kind, p, a, sizeof(a));
	if (base)
		wp_format(kind, base, b, sizeof(b));
	return wp_fail_at(err, "policy", field, "%s is looser than the operator's %s; %s", a, b,
			  LOOSER);
}

WARD_EXPORT int ward_net_policy_check_tighter(const struct ward_net_policy *base,
					      const struct ward_net_policy *p,
					      struct ward_error *err)
{
	/* no network reaches nothing: tighter than any operator's */
	if (p->mode == WARD_NET_NONE)
		return 0;
	if (base->mode != WARD_NET_ALLOWLIST || p->mode != WARD_NET_ALLOWLIST)
		return wp_fail_at(err, "policy", "network.mode",
				  "\"allowlist\" is looser than the operator's \"none\"; %s", LOOSER);
	int r = net_allow_within(base, p, err);
	if (r == 0)
		r = net_deny_kept(base, p, err);
	if (r == 0)
		r = net_limit_smaller(base->max_connections, p->max_connections,
				      "network.max_connections", WP_COUNT, err);
	if (r == 0)
		r = net_limit_smaller(base->max_bytes_out, p->max_bytes_out,
				      "network.max_bytes_out", WP_SIZE, err);
	if (r == 0)
		r = net_limit_smaller(base->max_bytes_in, p->max_bytes_in,
				      "network.max_bytes_in", WP_SIZE, err);
	return r;
}

/* p->net is network.mode (kept equal by every setter), so the one row
 * covers both. */
static int network_tighter(const struct ward_policy *base, const struct ward_policy *p,
			   const char *field, struct ward_error *err)
{
	(void)field;
	if (p->net != p->network.mode)
		return wp_fail_at(err, "policy", "network.mode",
				  "the policy's net and network.mode differ");
	return ward_net_policy_check_tighter(&base->network, &p->network, err);
}

static int root_only_if_allowed(const struct ward_policy *base, const struct ward_policy *p,
				const char *field, struct ward_error *err)
{
	if (!p->root_inside || base->root_inside)
		return 0;
	return wp_fail_at(err, "policy", field, "true is looser than the operator's false; %s",
			  LOOSER);
}

static int cgroup_required_kept(const struct ward_policy *base, const struct ward_policy *p,
				const char *field, struct ward_error *err)
{
	if (p->require_cgroup || !base->require_cgroup)
		return 0;
	return wp_fail_at(err, "policy", field, "false is looser than the operator's true; %s",
			  LOOSER);
}

static int degrade_subset(const struct ward_policy *base, const struct ward_policy *p,
			  const char *field, struct ward_error *err)
{
	uint32_t extra = p->allow_degrade & ~base->allow_degrade;
	if (!extra)
		return 0;
	const char *name = ward_layer_name((enum ward_layer)__builtin_ctz(extra));
	return wp_fail_at(err, "policy", field,
			  "\"%s\" may not degrade under the operator's policy; %s",
			  name ? name : "?", LOOSER);
}

/* Lint is advisory, but the operator's names stay listed. */
static int lint_kept(const struct ward_policy *base, const struct ward_policy *p,
		     const char *field, struct ward_error *err)
{
	for (size_t k = 0; k < wp_n_lints; k++) {
		size_t nb, np;
		char **vb = wp_lint_get(base, &wp_lints[k], &nb);
		char **vp = wp_lint_get(p, &wp_lints[k], &np);
		for (size_t i = 0; i < nb; i++) {
			bool found = false;
			for (size_t j = 0; !found && j < np; j++)
				found = vb[i] && vp[j] && strcmp(vb[i], vp[j]) == 0;
			if (found || !vb[i])
				continue;
			char sub[WP_PATH_MAX], q[WP_GOT_MAX];
			snprintf(sub, sizeof(sub), "%s.%s", field, wp_lints[k].key);
			return wp_fail_at(err, "policy", sub,
					  "%s is listed by the operator and may not be removed; %s",
					  wp_quote(vb[i], q, sizeof(q)), LOOSER);
		}
	}
	return 0;
}

/* Where the operator limits writes below /workspace and /tmp, an override
 * keeps the limit and writes only within the operator's paths. */
static int writable_within(const struct ward_policy *base, const struct ward_policy *p,
			   const char *field, struct ward_error *err)
{
	if (!base->writable_only)
		return 0;
	if (!p->writable_only)
		return wp_fail_at(err, "policy", field,
				  "the operator's policy limits writes to its list; %s", LOOSER);
	for (size_t i = 0; i < p->n_writable; i++) {
		bool found = false;
		for (size_t j = 0; !found && j < base->n_writable; j++)
			found = p->writable[i] && base->writable[j] &&
				wp_path_within(p->writable[i], base->writable[j]);
		if (!found) {
			char sub[WP_PATH_MAX], q[WP_GOT_MAX];
			snprintf(sub, sizeof(sub), "%s[%zu]", field, i);
			return wp_fail_at(err, "policy", sub,
					  "%s is not within the operator's writable paths; %s",
					  wp_quote(p->writable[i] ? p->writable[i] : "", q, sizeof(q)),
					  LOOSER);
		}
	}
	return 0;
}

static int exec_kept(const struct ward_policy *base, const struct ward_policy *p,
		     const char *field, struct ward_error *err)
{
	if (p->exec_program_only || !base->exec_program_only)
		return 0;
	return wp_fail_at(err, "policy", field,
			  "\"any\" is looser than the operator's \"program\"; %s", LOOSER);
}

#define SPAN(first, last)                                                          \
	offsetof(struct ward_policy, first),                                        \
	offsetof(struct ward_policy, last) + sizeof(((struct ward_policy *)0)->last), \
	_Alignof(__typeof__(((struct ward_policy *)0)->first))
#define MEMBER(field, first, last, fn) { field, SPAN(first, last), fn }

const struct wp_member wp_members[] = {
	MEMBER("mounts", binds, n_binds, mounts_subset),
	MEMBER("env", env, n_env, env_kept),
	MEMBER("workdir", workdir, workdir, free_to_change),
	MEMBER("hostname", hostname, hostname, free_to_change),
	MEMBER("image", image, image, image_same),
	MEMBER("network", net, network, network_tighter),
	MEMBER("user.root", root_inside, root_inside, root_only_if_allowed),
	MEMBER("cgroup.required", require_cgroup, require_cgroup, cgroup_required_kept),
	MEMBER("allow_degraded", allow_degrade, allow_degrade, degrade_subset),
	MEMBER("lint", lint_deny_imports, n_lint_deny_calls, lint_kept),
	MEMBER("writable", writable, writable_only, writable_within),
	MEMBER("exec", exec_program_only, exec_program_only, exec_kept),
};
const size_t wp_n_members = ARRAY_SIZE(wp_members);

bool wp_member_is_free(const struct wp_member *m)
{
	return m->tighten == free_to_change;
}

/* A new member of struct ward_policy changes its size (the unit test also
 * checks that the rows tile the struct): give it a row here or in
 * wp_limits[], with its rule, and update this number. */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(struct ward_policy) == 296,
	       "a new struct ward_policy member needs a tightening rule (wp_members[] or wp_limits[])");
#endif

WARD_EXPORT int ward_policy_check_tighter(const struct ward_policy *base,
					  const struct ward_policy *p,
					  struct ward_error *err)
{
	int r = check_limits(base, p, err);
	for (size_t i = 0; r == 0 && i < wp_n_members; i++)
		r = wp_members[i].tighten(base, p, wp_members[i].field, err);
	return r;
}
