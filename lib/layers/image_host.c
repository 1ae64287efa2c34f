/* lib/layers/image_host.c — the default image "host".
 *
 * Read-only binds of the host's /usr (with the merged-usr links) and a
 * synthesized /etc: generated passwd, group, hosts, hostname, nsswitch.conf,
 * plus a short allowlist of harmless host files that interpreters need to
 * start (the loader cache, python's site hook, openssl's config) copied by
 * content. Never the host's real /etc, nor /root, /home, /var or /run.
 * Host files are read once per process and kept for later plans.
 */
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

static int add_file(struct ward_plan *plan, const char *target, const char *content,
		    struct ward_error *err)
{
	const char *d = ward_plan_strdup(plan, content, strlen(content));
	if (!d)
		return ward_error_set(err, ENOMEM, "image", "plan arena exhausted");
	return add(plan, WARD_MNT_FILE, target, NULL, d, strlen(d), 0644, err);
}

static int add_generated(struct ward_plan *plan, struct ward_error *err)
{
	char buf[1024];
	int r;
	snprintf(buf, sizeof(buf),
		 "root:x:0:0:root:/root:/bin/sh\n"
		 "sandbox:x:%u:%u:sandbox:/workspace:/bin/sh\n"
		 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		 WARD_INSIDE_UID, WARD_INSIDE_GID);
	if ((r = add_file(plan, "/etc/passwd", buf, err)) < 0)
		return r;
	snprintf(buf, sizeof(buf), "root:x:0:\nsandbox:x:%u:\nnogroup:x:65534:\n",
		 WARD_INSIDE_GID);
	if ((r = add_file(plan, "/etc/group", buf, err)) < 0)
		return r;
	snprintf(buf, sizeof(buf), "127.0.0.1\tlocalhost\n127.0.1.1\t%s\n"
		 "::1\tlocalhost ip6-localhost ip6-loopback\n", plan->hostname);
	if ((r = add_file(plan, "/etc/hosts", buf, err)) < 0)
		return r;
	snprintf(buf, sizeof(buf), "%s\n", plan->hostname);
	if ((r = add_file(plan, "/etc/hostname", buf, err)) < 0)
		return r;
	if ((r = add_file(plan, "/etc/nsswitch.conf",
			  "passwd: files\ngroup: files\nshadow: files\n"
			  "hosts: files dns\nnetworks: files\nprotocols: files\n"
			  "services: files\n", err)) < 0)
		return r;
	/* No resolver: the network is off; an empty file makes lookups fail
	 * fast instead of timing out against a missing server. */
	return add_file(plan, "/etc/resolv.conf", "", err);
}

static int add_copies(struct ward_plan *plan, struct ward_error *err)
{
	load_copies();
	for (size_t i = 0; i < ARRAY_SIZE(etc_copies); i++) {
		if (!cache.data[i])
			continue;
		char target[256];
		snprintf(target, sizeof(target), "/etc/%s", etc_copies[i]);
		const char *t = ward_plan_strdup(plan, target, strlen(target));
		if (!t)
			return ward_error_set(err, ENOMEM, "image", "plan arena exhausted");
		int r = add(plan, WARD_MNT_FILE, t, NULL, cache.data[i], cache.len[i], 0644, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Binds: /usr, and host directories that hold only links and public data
 * (the alternatives links point into /usr; the CA bundle is public; the
 * font configuration). */
static int add_binds(struct ward_plan *plan, struct ward_error *err)
{
	static const struct { const char *src, *target; bool optional; } binds[] = {
		{ "/usr", "/usr", false },
		{ "/etc/alternatives", "/etc/alternatives", true },
		{ "/etc/ssl/certs", "/etc/ssl/certs", true },
		/* fontconfig's configuration: matplotlib and friends need it */
		{ "/etc/fonts", "/etc/fonts", true },
	};
	for (size_t i = 0; i < ARRAY_SIZE(binds); i++) {
		struct ward_mount_op op = {
			.kind = WARD_MNT_BIND, .src = binds[i].src,
			.target = binds[i].target, .optional = binds[i].optional,
		};
		int r = ward_plan_add_mount(plan, &op, err);
		if (r < 0)
			return r;
	}
	return 0;
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
	return add(plan, WARD_MNT_SYMLINK, "/etc/localtime", "/usr/share/zoneinfo/UTC",
		   NULL, 0, 0, err);
}

int ward_image_host_prepare(struct ward_plan *plan, struct ward_error *err)
{
	const char *image = plan->policy->image;
	if (image && strcmp(image, "host") != 0)
		return ward_error_set(err, ENOENT, "image", "unknown image '%s'", image);
	int r;
	if ((r = add_binds(plan, err)) < 0 || (r = add_links(plan, err)) < 0 ||
	    (r = add_generated(plan, err)) < 0 || (r = add_copies(plan, err)) < 0)
		return r;
	return 0;
}
