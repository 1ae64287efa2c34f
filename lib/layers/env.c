/* lib/layers/env.c — the program's environment and file descriptors.
 * Only what the policy sets reaches the program: no variable of the host
 * leaks, every fd but 0-2 is closed, stdin is /dev/null unless the caller
 * relays one. With network.mode "allowlist", the proxy's variables
 * (ward/egress.h) unless the policy sets them itself. */
#include <fcntl.h>
#include <sys/syscall.h>
#include <string.h>

#include "base/util.h"
#include "sandbox.h"
#include "ward/egress.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* network.mode "allowlist": what points proxy-aware tools at the proxy
 * (ward/egress.h). Tools that ignore them are captured all the same. */
static const char *const proxy_env[] = {
	"HTTP_PROXY=" WARD_EGRESS_PROXY_URL, "HTTPS_PROXY=" WARD_EGRESS_PROXY_URL,
	"http_proxy=" WARD_EGRESS_PROXY_URL, "https_proxy=" WARD_EGRESS_PROXY_URL,
	"ALL_PROXY=socks5h://127.0.0.1:3128", "all_proxy=socks5h://127.0.0.1:3128",
	"NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1",
	"npm_config_proxy=" WARD_EGRESS_PROXY_URL, "npm_config_https_proxy=" WARD_EGRESS_PROXY_URL,
};
/* ... and with the proxy's CA bundle bound: the trust it adds. */
static const char *const ca_env[] = {
	"SSL_CERT_FILE=" WARD_EGRESS_CA_PATH, "REQUESTS_CA_BUNDLE=" WARD_EGRESS_CA_PATH,
	"NODE_EXTRA_CA_CERTS=" WARD_EGRESS_CA_PATH, "PIP_CERT=" WARD_EGRESS_CA_PATH,
	"CURL_CA_BUNDLE=" WARD_EGRESS_CA_PATH, "GIT_SSL_CAINFO=" WARD_EGRESS_CA_PATH,
};

static bool env_has(const struct ward_policy *p, const char *var)
{
	size_t n = (size_t)(strchr(var, '=') - var) + 1;
	for (size_t i = 0; i < p->n_env; i++)
		if (strncmp(p->env[i], var, n) == 0)
			return true;
	return false;
}

/* The policy's own value of a variable wins (a user may widen NO_PROXY):
 * the variables only help tools find the proxy, the capture governs. */
static void add_defaults(struct ward_plan *plan, size_t *n, const char *const *vars, size_t count)
{
	for (size_t i = 0; i < count; i++)
		if (!env_has(plan->policy, vars[i]))
			plan->envp[(*n)++] = (char *)vars[i];
}

int ward_env_prepare(struct ward_plan *plan, struct ward_error *err)
{
	const struct ward_policy *p = plan->policy;
	plan->envp = calloc(p->n_env + ARRAY_SIZE(proxy_env) + ARRAY_SIZE(ca_env) + 1,
			    sizeof(char *));
	if (!plan->envp)
		return ward_error_set(err, ENOMEM, "env", "out of memory");
	size_t n = 0;
	for (size_t i = 0; i < p->n_env; i++) {
		plan->envp[n++] = p->env[i];
		if (strncmp(p->env[i], "PATH=", 5) == 0)
			plan->path_env = p->env[i] + 5;
	}
	if (p->network.mode == WARD_NET_ALLOWLIST)
		add_defaults(plan, &n, proxy_env, ARRAY_SIZE(proxy_env));
	if (p->network.mode == WARD_NET_ALLOWLIST && plan->egress_ca)
		add_defaults(plan, &n, ca_env, ARRAY_SIZE(ca_env));
	if (!plan->path_env)
		plan->path_env = "/usr/local/bin:/usr/bin:/bin";
	return 0;
}

/* Called in the program child with the three stdio fds in plan->stdio. */
int ward_env_apply(struct ward_plan *plan, struct ward_error *err)
{
	for (int i = 0; i < 3; i++) {
		if (plan->stdio[i] == i) {
			if (fcntl(i, F_SETFD, 0) < 0)
				goto fail;
		} else if (dup2(plan->stdio[i], i) < 0) {
			goto fail;
		}
	}
	/* Everything else is marked close-on-exec rather than closed, so the
	 * report channel to the init survives until the exec succeeds. */
	if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		goto fail;
	if (chdir(plan->workdir) < 0)
		return ward_error_setv(err, errno, "env", "unable to enter the working directory '",
				       plan->workdir, "'", NULL);
	return 0;
fail:
	return ward_error_setv(err, errno, "env", "unable to set up file descriptors", NULL);
}
