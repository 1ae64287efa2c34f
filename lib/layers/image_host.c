/* lib/layers/image_host.c — the default image "host".
 *
 * Read-only binds of the host's /usr (with the merged-usr links) and a
 * synthesized /etc: generated passwd, group, hosts, hostname, nsswitch.conf,
 * plus a short allowlist of harmless host files that interpreters need to
 * start (the loader cache, python's site hook, openssl's config) copied by
 * content. Never the host's real /etc, nor /root, /home, /var or /run.
 *
 * /etc is one list (etc_entries). It is prepared once as a read-only
 * template in ward's runtime directory and bound at /etc (etc_template.c);
 * where no template can be had (no safe runtime directory), each sandbox
 * writes the same list into its own root, and host files are then read once
 * per process and kept for later plans.
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/util.h"
#include "sandbox.h"

/* Host files copied by content into the sandbox's /etc (parent reads them
 * once; a missing one is simply left out). Nothing here may hold secrets. */
/* Debian's python sitecustomize is left out on purpose: it only wires in
 * apport, and on a read-only /etc it would be recompiled at every start. */
static const char *const etc_copies[] = {
	"ld.so.cache",
	"ssl/openssl.cnf",
	"matplotlibrc",
	"mime.types",
};
static const char *const etc_host[ARRAY_SIZE(etc_copies)] = {
	"/etc/ld.so.cache",
	"/etc/ssl/openssl.cnf",
	"/etc/matplotlibrc",
	"/etc/mime.types",
};

struct copy_cache {
	bool loaded;
	char *data[ARRAY_SIZE(etc_copies)];
	size_t len[ARRAY_SIZE(etc_copies)];
};
static struct copy_cache cache;

static void load_copies_once(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(etc_copies); i++) {
		char path[256];
		snprintf(path, sizeof(path), "/etc/%s", etc_copies[i]);
		if (ward_read_file(path, 4u << 20, &cache.data[i], &cache.len[i]) < 0)
			cache.data[i] = NULL;
	}
	cache.loaded = true;
}

/* Plans are built on several threads (a pool's refills): read once. */
static void load_copies(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, load_copies_once);
}

static int add(struct ward_plan *plan, enum ward_mount_kind kind, const char *target,
	       const char *src, const char *data, size_t len, unsigned mode,
	       struct ward_error *err)
{
	struct ward_mount_op op = {
		.kind = kind, .target = target, .src = src, .data = data,
		.len = len, .mode = mode,
	};
	return ward_plan_add_mount(plan, &op, err);
}

/* The generated files, in the plan's arena. */
static int generated(struct ward_plan *plan, struct ward_etc_entry *e, size_t *n,
		     struct ward_error *err)
{
	char buf[4][1024];
	bool allowlist = plan->policy->network.mode == WARD_NET_ALLOWLIST;
	snprintf(buf[0], sizeof(buf[0]),
		 "root:x:0:0:root:/root:/bin/sh\n"
		 "sandbox:x:%u:%u:sandbox:/workspace:/bin/sh\n"
		 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		 WARD_INSIDE_UID, WARD_INSIDE_GID);
	snprintf(buf[1], sizeof(buf[1]), "root:x:0:\nsandbox:x:%u:\nnogroup:x:65534:\n",
		 WARD_INSIDE_GID);
	snprintf(buf[2], sizeof(buf[2]), "127.0.0.1\tlocalhost\n127.0.1.1\t%s\n"
		 "::1\tlocalhost ip6-localhost ip6-loopback\n", plan->hostname);
	snprintf(buf[3], sizeof(buf[3]), "%s\n", plan->hostname);
	const struct { const char *name, *content; } files[] = {
		{ "passwd", buf[0] }, { "group", buf[1] }, { "hosts", buf[2] },
		{ "hostname", buf[3] },
		{ "nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\n"
				   "hosts: files dns\nnetworks: files\nprotocols: files\n"
				   "services: files\n" },
		/* No resolver: the network is off; an empty file makes lookups
		 * fail fast instead of timing out against a missing server.
		 * With an allowlist, the proxy's DNS stub (ward/egress.h). The
		 * content is part of the template's key: one template per mode. */
		{ "resolv.conf", allowlist ? "nameserver 127.0.0.1\n" : "" },
		/* the mount point of the proxy's CA bundle (bound when the proxy
		 * has one: lib/supervise.c); empty otherwise */
		{ WARD_EGRESS_CA_ETC, "" },
	};
	size_t n_files = ARRAY_SIZE(files) - (allowlist ? 0 : 1);
	for (size_t i = 0; i < n_files; i++) {
		size_t len = strlen(files[i].content);
		const char *d = ward_plan_strdup(plan, files[i].content, len);
		if (!d)
			return ward_error_set(err, ENOMEM, "image", "plan arena exhausted");
		e[(*n)++] = (struct ward_etc_entry){ WARD_ETC_FILE, files[i].name, d, len };
	}
	return 0;
}

/* Binds into /etc: host directories that hold only links and public data
 * (the alternatives links point into /usr; the CA bundle is public; the
 * font configuration, which matplotlib and friends need). */
static const char *const etc_binds[] = { "alternatives", "ssl/certs", "fonts" };

/* /etc as a list: generated files, host files copied by content, the
 * localtime link, and the directories the binds above land on (where the
 * host has them). */
static int etc_entries(struct ward_plan *plan, struct ward_etc_entry *e, size_t *n,
		       struct ward_error *err)
{
	int r = generated(plan, e, n, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < ARRAY_SIZE(etc_copies); i++)
		e[(*n)++] = (struct ward_etc_entry){ WARD_ETC_COPY, etc_copies[i], etc_host[i], i };
	e[(*n)++] = (struct ward_etc_entry){ WARD_ETC_LINK, "localtime", "/usr/share/zoneinfo/UTC", 0 };
	for (size_t i = 0; i < ARRAY_SIZE(etc_binds); i++) {
		char host[64];
		struct stat st;
		snprintf(host, sizeof(host), "/etc/%s", etc_binds[i]);
		if (stat(host, &st) == 0 && S_ISDIR(st.st_mode))
			e[(*n)++] = (struct ward_etc_entry){ WARD_ETC_DIR, etc_binds[i], NULL, 0 };
	}
	return 0;
}

static const char *etc_target(struct ward_plan *plan, const char *name)
{
	char target[256];
	int len = snprintf(target, sizeof(target), "/etc/%s", name);
	return ward_plan_strdup(plan, target, (size_t)len);
}

/* Without a template each sandbox writes /etc into its own root. A COPY
 * entry's len is its index in the process-wide cache of host files. */
static int synthesize(struct ward_plan *plan, const struct ward_etc_entry *e, size_t n,
		      struct ward_error *err)
{
	load_copies();
	for (size_t i = 0; i < n; i++) {
		const char *t = etc_target(plan, e[i].name);
		if (!t)
			return ward_error_set(err, ENOMEM, "image", "plan arena exhausted");
		int r = 0;
		switch (e[i].kind) {
		case WARD_ETC_FILE:
			r = add(plan, WARD_MNT_FILE, t, NULL, e[i].data, e[i].len, 0644, err);
			break;
		case WARD_ETC_COPY:
			if (cache.data[e[i].len])
				r = add(plan, WARD_MNT_FILE, t, NULL, cache.data[e[i].len],
					cache.len[e[i].len], 0644, err);
			break;
		case WARD_ETC_LINK:
			r = add(plan, WARD_MNT_SYMLINK, t, e[i].data, NULL, 0, 0, err);
			break;
		case WARD_ETC_DIR:
			break; /* the bind makes its directory */
		}
		if (r < 0)
			return r;
	}
	return 0;
}

/* The binds on /etc's mount points; over a template only on the ones it
 * has (it is read-only: nothing can be created in it), otherwise on every
 * one the host has when the sandbox starts. */
static int add_etc_binds(struct ward_plan *plan, const struct ward_etc_entry *e, size_t n,
			 bool template, struct ward_error *err)
{
	for (size_t b = 0; b < ARRAY_SIZE(etc_binds); b++) {
		bool have = !template;
		for (size_t i = 0; i < n && !have; i++)
			have = e[i].kind == WARD_ETC_DIR && strcmp(e[i].name, etc_binds[b]) == 0;
		if (!have)
			continue;
		const char *t = etc_target(plan, etc_binds[b]);
		if (!t)
			return ward_error_set(err, ENOMEM, "image", "plan arena exhausted");
		struct ward_mount_op op = { .kind = WARD_MNT_BIND, .src = t, .target = t,
					    .optional = true };
		int r = ward_plan_add_mount(plan, &op, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Binds the template of this /etc read-only at /etc; *used stays false
 * when there is none (another hostname than the default, no safe runtime
 * directory, or it could not be built), and the caller synthesizes. */
static int use_template(struct ward_plan *plan, const struct ward_etc_entry *e, size_t n,
			bool *used, struct ward_error *err)
{
	char dir[PATH_MAX], path[PATH_MAX];
	*used = false;
	/* The key must not be the policy's to choose: a template per hostname
	 * would let the callers of a service fill the runtime directory. The
	 * default one is shared; any other /etc is written per sandbox. */
	if (strcmp(plan->hostname, WARD_DEFAULT_HOSTNAME) != 0)
		return 0;
	int fd = ward_rundir_open(dir, sizeof(dir));
	if (fd < 0)
		return 0;
	int r = ward_etc_template_get(fd, dir, e, n, path, sizeof(path));
	close(fd);
	if (r < 0)
		return 0;
	const char *src = ward_plan_strdup(plan, path, strlen(path));
	if (!src)
		return ward_error_set(err, ENOMEM, "image", "plan arena exhausted");
	struct ward_mount_op op = { .kind = WARD_MNT_BIND, .src = src, .target = "/etc",
				    .noexec = true };
	*used = true;
	return ward_plan_add_mount(plan, &op, err);
}

/* Merged-usr: /bin, /lib, /lib64, /sbin are links into /usr when the host
 * has them at all. */
static int add_links(struct ward_plan *plan, struct ward_error *err)
{
	static const struct { const char *target, *link; } links[] = {
		{ "/bin", "usr/bin" }, { "/sbin", "usr/sbin" },
		{ "/lib", "usr/lib" }, { "/lib64", "usr/lib64" },
		{ "/lib32", "usr/lib32" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
		struct stat st;
		char usr[32];
		snprintf(usr, sizeof(usr), "/%s", links[i].link);
		if (stat(usr, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		int r = add(plan, WARD_MNT_SYMLINK, links[i].target, links[i].link,
			    NULL, 0, 0, err);
		if (r < 0)
			return r;
	}
	return 0;
}

int ward_image_host_prepare(struct ward_plan *plan, struct ward_error *err)
{
	const char *image = plan->policy->image;
	if (image && strcmp(image, "host") != 0)
		return ward_error_set(err, ENOENT, "image", "unknown image '%s'", image);
	struct ward_etc_entry e[WARD_ETC_MAX];
	size_t n = 0;
	bool template = false;
	int r;
	/* /usr first, then /etc (a template must be in place before the
	 * binds on its mount points), then the merged-usr links */
	if ((r = add(plan, WARD_MNT_BIND, "/usr", "/usr", NULL, 0, 0, err)) < 0 ||
	    (r = etc_entries(plan, e, &n, err)) < 0 ||
	    (r = use_template(plan, e, n, &template, err)) < 0 ||
	    (r = add_etc_binds(plan, e, n, template, err)) < 0 || (r = add_links(plan, err)) < 0)
		return r;
	return template ? 0 : synthesize(plan, e, n, err);
}
