/* tests/unit/egress-fake.c — a stand-in for the egress proxy (ward/egress.h)
 * for tests/unit/t-netcap.c while ward is built without lib/egress/.
 *
 * It serves nothing: ward_egress_attach keeps the listeners it is given in
 * egress_fake_fds, where the test accepts on them itself, and fails when
 * egress_fake_fail is set. Never linked into ward or its library.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "egress-fake.h"

struct ward_egress {
	int unused;
};
struct ward_egress_sandbox {
	int unused;
};

struct ward_egress_fds egress_fake_fds = { -1, -1, -1 };
int egress_fake_attached;
bool egress_fake_fail;
const char *egress_fake_bundle;

int ward_egress_new(const struct ward_egress_config *cfg, struct ward_egress **out,
		    struct ward_error *err)
{
	(void)cfg;
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : ward_error_set(err, ENOMEM, "egress", "out of memory");
}

void ward_egress_free(struct ward_egress *e)
{
	free(e);
}

static void close_fds(struct ward_egress_fds *f)
{
	int *all[] = { &f->tcp4, &f->tcp6, &f->dns4 };
	for (size_t i = 0; i < 3; i++)
		if (*all[i] >= 0) {
			close(*all[i]);
			*all[i] = -1;
		}
}

int ward_egress_attach(struct ward_egress *e, const char *sandbox_id, const char *tenant,
		       const struct ward_net_policy *net,
		       const struct ward_egress_credential *creds, size_t n_creds,
		       struct ward_egress_fds *fds, struct ward_egress_sandbox **out,
		       struct ward_error *err)
{
	(void)e, (void)sandbox_id, (void)tenant, (void)net, (void)creds, (void)n_creds;
	if (egress_fake_fail) {
		close_fds(fds);
		return ward_error_set(err, ECONNREFUSED, "egress", "the fake proxy refuses");
	}
	close_fds(&egress_fake_fds);
	egress_fake_fds = *fds;
	*fds = (struct ward_egress_fds){ -1, -1, -1 };
	egress_fake_attached++;
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : ward_error_set(err, ENOMEM, "egress", "out of memory");
}

int ward_egress_update(struct ward_egress_sandbox *s, const struct ward_net_policy *net,
		       struct ward_error *err)
{
	(void)s, (void)net, (void)err;
	return 0;
}

void ward_egress_usage(struct ward_egress_sandbox *s, struct ward_net_usage *u)
{
	(void)s;
	memset(u, 0, sizeof(*u));
	u->present = true;
	u->connections = 1;
}

int ward_egress_last_denial(struct ward_egress_sandbox *s, struct ward_net_denial *d)
{
	(void)s, (void)d;
	return -ENOENT;
}

void ward_egress_detach(struct ward_egress_sandbox *s)
{
	if (s)
		close_fds(&egress_fake_fds);
	free(s);
}

const char *ward_egress_ca_bundle(struct ward_egress *e)
{
	(void)e;
	return egress_fake_bundle;
}

void ward_egress_stats(struct ward_egress *e, struct ward_egress_stats *st)
{
	(void)e;
	memset(st, 0, sizeof(*st));
}
