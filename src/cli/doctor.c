/* src/cli/doctor.c — `ward doctor`: what this host offers each isolation layer.
 *
 * Each check probes the kernel the way ward uses it (a namespace is created,
 * a filter installed, a mount made) and reports ok, missing, degraded or
 * skipped, with what ward does without the feature and what fixes it.
 * It must never change the host: every probe that creates a namespace,
 * installs a filter or mounts runs in a forked child that is always reaped;
 * mounts happen only in that child's own mount namespace; every temp dir and
 * cgroup it creates is removed before the check returns.
 */
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/magic.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#include "compat/landlock.h"
#include "doctor.h"
#include "doctor-probes.h"
#include "ward/ward.h"
#include "base/util.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

#define UNUSED __attribute__((unused))
/* Abstract-unix and signal scoping, the last rights ward asks for, came in 6. */
#define DOC_LANDLOCK_FULL_ABI 6
#define DOC_NOBODY 65534
#define DOC_CHILD_TIMEOUT 10 /* seconds before a wedged probe child dies */
#define DOC_AA_SYSCTL "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
#define DOC_USERNS_FIX "first make user namespaces work (see above)"
#define DOC_AA_FIX "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, " \
	"or an AppArmor profile that allows userns for ward"

enum doc_state { DOC_OK, DOC_MISSING, DOC_DEGRADED, DOC_SKIPPED };
/* The user namespace check runs first; later ones blame it for their failure. */
static int doc_userns_err;
static const char *const doc_state_names[] = { "ok", "missing", "degraded", "skipped" };

struct doc_result {
	enum doc_state state;
	char detail[448];
	char without[320];  /* what ward does without the feature */
	char fix[320];      /* the sysctl, kernel option or package that fixes it */
	json_t *data;       /* machine-readable facts for --json */
};

struct doc_ns {
	int flag;
	const char *flag_name;
	const char *max_sysctl;   /* under /proc/sys/user/ */
	const char *kconfig;
	enum ward_layer layer;
};

struct doc_check {
	const char *id;
	const char *name;
	bool required;            /* ward cannot run at all without it */
	const struct doc_ns *ns;  /* namespace checks only */
	void (*probe)(const struct doc_check *c, struct doc_result *r);
};

__attribute__((format(printf, 3, 4)))
static void doc_add(char *buf, size_t size, const char *fmt, ...)
{
	size_t n = strnlen(buf, size);
	va_list ap;
	if (n + 1 >= size)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + n, size - n, fmt, ap);
	va_end(ap);
}
#define ADD(field, ...) doc_add((field), sizeof(field), __VA_ARGS__)

static const char *doc_layer(enum ward_layer layer, const char *fallback)
{
	const char *name = ward_layer_name(layer);
	return name ? name : fallback;
}

/* Reads a numeric sysctl; -1 when this kernel does not have it. */
static long doc_sysctl(const char *path)
{
	_cleanup_free_ char *buf = NULL;
	char *end;
	if (ward_read_file(path, 64, &buf, NULL) < 0)
		return -1;
	errno = 0;
	long v = strtol(buf, &end, 10);
	return errno || end == buf ? -1 : v;
}

/* JSON helpers for the facts: absent values are null, not -1 or 0. */
static json_t *doc_jlong(long v)
{
	return v < 0 ? json_null() : json_integer(v);
}

static json_t *doc_jerrno(int e)
{
	const char *name = e > 0 ? strerrorname_np(e) : NULL;
	return name ? json_string(name) : json_null();
}

/* Merges facts (a json_pack result, consumed) into r->data. */
static void doc_data(struct doc_result *r, json_t *facts)
{
	if (facts)
		json_object_update(r->data, facts);
	json_decref(facts);
}

/* Text for a child's report: a positive errno, or -N for death by signal N.
 * The CLI is single-threaded, so one static buffer will do. */
static const char *doc_why(int e)
{
	static char buf[32];
	if (e >= 0)
		return strerror(e);
	snprintf(buf, sizeof(buf), "killed by signal %d", -e);
	return buf;
}

/* --- namespaces ------------------------------------------------------------ */

static void doc_userns_fix(struct doc_result *r, int e)
{
	long max = doc_sysctl("/proc/sys/user/max_user_namespaces");
	if (e == EINVAL || e == ENOSYS)
		ADD(r->fix, "a kernel built with CONFIG_USER_NS=y");
	else if (e == ENOSPC || e == EUSERS)
		ADD(r->fix, "raise user.max_user_namespaces (%ld here; a container around ward "
		    "may set a lower limit of its own)", max);
	else if (doc_sysctl("/proc/sys/kernel/unprivileged_userns_clone") == 0)
		ADD(r->fix, "sysctl -w kernel.unprivileged_userns_clone=1 (persist it in /etc/sysctl.d/)");
	else if (doc_sysctl(DOC_AA_SYSCTL) == 1)
		ADD(r->fix, DOC_AA_FIX);
	else
		ADD(r->fix, "no sysctl forbids it, so this process is confined (a container's "
		    "seccomp profile, a chroot, an LSM): run ward outside it");
}

/* Root of the initial user namespace. Root of a nested one (`unshare -r`)
 * holds no host rights, and ward maps like an unprivileged user there. */
static bool doc_host_root(void)
{
	return geteuid() == 0 && doc_initial_userns(NULL);
}

/* "created as uid N", and under `unshare -r` what that uid is on the host. */
static void doc_userns_who(struct doc_result *r, const char *what)
{
	long long host;
	ADD(r->detail, "%s as uid %u", what, geteuid());
	if (doc_initial_userns(&host))
		return;
	if (host >= 0)
		ADD(r->detail, " of a nested user namespace (host uid %lld)", host);
	else
		ADD(r->detail, " of a nested user namespace");
}

static void doc_probe_userns(UNUSED const struct doc_check *c, struct doc_result *r)
{
	int flags = CLONE_NEWUSER;
	long max = doc_sysctl("/proc/sys/user/max_user_namespaces");
	int e = doc_child(doc_try_unshare, &flags);
	doc_userns_err = e;
	/* root may where others may not: tell whether rootless ward would work */
	bool tried = e == 0 && doc_host_root();
	int u = tried ? doc_child(doc_try_unshare_as_nobody, &flags) : 0;
	doc_data(r, json_pack("{s:o, s:o, s:o, s:o, s:o}", "errno", doc_jerrno(e),
			      "max_user_namespaces", doc_jlong(max),
			      "unprivileged_userns_clone",
			      doc_jlong(doc_sysctl("/proc/sys/kernel/unprivileged_userns_clone")),
			      "apparmor_restrict_unprivileged_userns",
			      doc_jlong(doc_sysctl(DOC_AA_SYSCTL)),
			      "unprivileged", tried ? json_boolean(u == 0) : json_null()));
	if (e != 0) {
		r->state = DOC_MISSING;
		doc_userns_who(r, "cannot create one");
		ADD(r->detail, ": %s", doc_why(e));
		ADD(r->without, "ward cannot run at all: every sandbox starts in a new user namespace");
		doc_userns_fix(r, e);
		return;
	}
	doc_userns_who(r, "created");
	if (geteuid() == 0 && !doc_host_root())
		ADD(r->detail, ", which holds no capabilities on the host: ward maps like an "
		    "unprivileged user here");
	if (tried && u == 0)
		ADD(r->detail, " and as an unprivileged user (uid %d)", DOC_NOBODY);
	if (tried && u != 0) {
		ADD(r->detail, ", but unprivileged users cannot (%s): rootless ward will not work",
		    doc_why(u));
		doc_userns_fix(r, u);
	}
	if (max >= 0)
		ADD(r->detail, "; user.max_user_namespaces=%ld", max);
}

static void doc_ns_failed(const struct doc_check *c, struct doc_result *r, int e)
{
	const struct doc_ns *ns = c->ns;
	const char *layer = doc_layer(ns->layer, c->id);
	char path[96];
	r->state = c->required ? DOC_MISSING : DOC_DEGRADED;
	ADD(r->detail, "unshare(CLONE_NEWUSER|%s) fails: %s", ns->flag_name, doc_why(e));
	if (c->required)
		ADD(r->without, "ward cannot run: the '%s' layer is required", layer);
	else
		ADD(r->without, "ward refuses to run unless the policy's allow_degraded lists "
		    "\"%s\"; then the sandbox shares the host's %s", layer, c->name);
	snprintf(path, sizeof(path), "/proc/sys/user/%s", ns->max_sysctl);
	if (doc_userns_err)
		ADD(r->fix, DOC_USERNS_FIX);
	else if (e == ENOSPC)
		ADD(r->fix, "raise user.%s (%ld here)", ns->max_sysctl, doc_sysctl(path));
	else if (e == EINVAL)
		ADD(r->fix, "a kernel built with %s=y", ns->kconfig);
	else
		ADD(r->fix, "run ward outside the container or LSM that forbids it");
}

static void doc_probe_ns(const struct doc_check *c, struct doc_result *r)
{
	int flags = CLONE_NEWUSER | c->ns->flag;
	int e = doc_child(doc_try_unshare, &flags);
	doc_data(r, json_pack("{s:o}", "errno", doc_jerrno(e)));
	if (e != 0) {
		doc_ns_failed(c, r, e);
		return;
	}
	ADD(r->detail, "created inside a new user namespace");
	if (c->ns->flag != CLONE_NEWNS)
		return;
	/* A mount namespace is only useful if ward may mount in it. */
	e = doc_child(doc_try_fsmount, NULL);
	doc_data(r, json_pack("{s:o}", "mount_errno", doc_jerrno(e)));
	if (e == 0) {
		ADD(r->detail, ", and a tmpfs mounts in it");
		return;
	}
	r->state = DOC_MISSING;
	ADD(r->detail, ", but mounting a tmpfs in it fails: %s", doc_why(e));
	ADD(r->without, "ward cannot build the sandbox's root file system");
	ADD(r->fix, "%s", doc_sysctl(DOC_AA_SYSCTL) == 1 ? DOC_AA_FIX
		: "a kernel with CONFIG_TMPFS=y; run ward outside a confining container");
}

/* --- cgroups --------------------------------------------------------------- */

static bool doc_is_fs(const char *path, unsigned long magic)
{
	struct statfs sf;
	return statfs(path, &sf) == 0 && (unsigned long)sf.f_type == magic;
}

/* Can this user create a cgroup where ward puts them, <hierarchy>/ward/ (or
 * the hierarchy itself while ward/ does not exist yet)? The probe directory
 * is removed at once, and its name can never look like a sandbox's. */
static bool doc_cgroup_writable(const char *hier)
{
	char dir[PATH_MAX], num[21];
	struct stat st;
	snprintf(dir, sizeof(dir), "%s/ward", hier);
	if (stat(dir, &st) < 0)
		ward_strlcpy(dir, hier, sizeof(dir));
	ward_strlcat(dir, "/doctor-probe-", sizeof(dir));
	ward_strlcat(dir, ward_utoa((uint64_t)getpid(), num), sizeof(dir));
	if (mkdir(dir, 0755) < 0)
		return false;
	rmdir(dir);
	return true;
}

/* Lists the v2 controllers of the hierarchy at dir; returns whether memory
 * and pids, which ward's v2 backend needs, are there and writable. */
static bool doc_cgroup_v2(struct doc_result *r, const char *dir)
{
	_cleanup_free_ char *buf = NULL;
	char path[PATH_MAX], *save = NULL;
	bool mem = false, pids = false;
	json_t *list = json_array();
	snprintf(path, sizeof(path), "%s/cgroup.controllers", dir);
	ward_read_file(path, 1 << 16, &buf, NULL);
	ADD(r->detail, "v2 at %s with controllers:", dir);
	for (char *t = buf ? strtok_r(buf, " \n", &save) : NULL; t; t = strtok_r(NULL, " \n", &save)) {
		ADD(r->detail, " %s", t);
		json_array_append_new(list, json_string(t));
		mem = mem || strcmp(t, "memory") == 0;
		pids = pids || strcmp(t, "pids") == 0;
	}
	if (json_array_size(list) == 0)
		ADD(r->detail, " none");
	bool w = doc_cgroup_writable(dir);
	doc_data(r, json_pack("{s:o, s:b}", "v2_controllers", list, "v2_writable", w));
	ADD(r->detail, w ? " (this user can create ward's cgroups)" : " (read-only to this user)");
	return mem && pids && w;
}

/* Lists the v1 hierarchies ward uses; returns whether memory and pids, which
 * its v1 backend cannot do without, are there and writable. */
static bool doc_cgroup_v1(struct doc_result *r)
{
	static const char *const names[] = { "memory", "pids", "cpu", "freezer" };
	json_t *present = json_array(), *writable = json_array();
	bool ok = true;
	ADD(r->detail, "v1 hierarchies:");
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		char dir[64];
		snprintf(dir, sizeof(dir), "/sys/fs/cgroup/%s", names[i]);
		bool here = doc_is_fs(dir, CGROUP_SUPER_MAGIC);
		bool w = here && doc_cgroup_writable(dir);
		if (here) {
			ADD(r->detail, " %s%s", names[i], w ? "" : " (read-only to this user)");
			json_array_append_new(present, json_string(names[i]));
		}
		if (w)
			json_array_append_new(writable, json_string(names[i]));
		ok = ok && (i >= 2 || w);
	}
	if (json_array_size(present) == 0)
		ADD(r->detail, " none");
	doc_data(r, json_pack("{s:o, s:o}", "v1_hierarchies", present, "v1_writable", writable));
	return ok;
}

static void doc_cgroup_degraded(struct doc_result *r, int version)
{
	r->state = DOC_DEGRADED;
	ADD(r->without, "ward falls back to rlimits (RLIMIT_DATA for memory, RLIMIT_NPROC for "
	    "processes, no CPU quota, no OOM report) and the verdict lists \"%s\" as degraded; "
	    "a policy with \"cgroup\": {\"required\": true} refuses to run",
	    doc_layer(WARD_LAYER_CGROUP, "cgroup"));
	if (version == 0)
		ADD(r->fix, "mount cgroup2 on /sys/fs/cgroup (CONFIG_CGROUPS=y, CONFIG_MEMCG=y, "
		    "CONFIG_CGROUP_PIDS=y)");
	else if (!doc_host_root())
		ADD(r->fix, "run ward as root, or let root create %s/ward owned by this user "
		    "(ward puts every sandbox's cgroup there)",
		    version == 2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/{memory,pids}");
	else
		ADD(r->fix, "enable the %s (CONFIG_MEMCG=y, CONFIG_CGROUP_PIDS=y; "
		    "cgroup_enable=memory on some kernels)",
		    version == 2 ? "memory and pids controllers" : "v1 memory and pids hierarchies");
}

static void doc_probe_cgroup(UNUSED const struct doc_check *c, struct doc_result *r)
{
	const char *root = "/sys/fs/cgroup", *unified = "/sys/fs/cgroup/unified";
	int version = 0;
	bool ok = false;
	if (doc_is_fs(root, CGROUP2_SUPER_MAGIC)) {
		version = 2;
		ok = doc_cgroup_v2(r, root);
	} else if (doc_is_fs(root, TMPFS_MAGIC)) {
		version = 1;
		ok = doc_cgroup_v1(r);
		/* hybrid: ward also uses the v2 tree, for CLONE_INTO_CGROUP and cgroup.kill */
		if (doc_is_fs(unified, CGROUP2_SUPER_MAGIC)) {
			ADD(r->detail, "; hybrid, ");
			doc_cgroup_v2(r, unified);
		}
	} else {
		ADD(r->detail, "no cgroup file system at %s", root);
	}
	doc_data(r, json_pack("{s:i}", "version", version));
	if (!ok)
		doc_cgroup_degraded(r, version);
}

/* --- landlock, seccomp ----------------------------------------------------- */

static void doc_landlock_partial(struct doc_result *r, long abi)
{
	static const char *const feats[] = {
		[2] = "file reparenting (ABI 2, Linux 5.19)",
		[3] = "truncate rights (ABI 3, Linux 6.2)",
		[4] = "TCP bind/connect rules (ABI 4, Linux 6.7)",
		[5] = "device ioctl rights (ABI 5, Linux 6.10)",
		[6] = "abstract-unix-socket and signal scoping (ABI 6, Linux 6.12)",
	};
	const char *sep = "; lacks ";
	r->state = DOC_DEGRADED;
	for (long i = abi + 1; i < (long)ARRAY_SIZE(feats); i++, sep = ", ")
		ADD(r->detail, "%s%s", sep, feats[i]);
	ADD(r->without, "ward handles only the rights ABI %ld knows; the rest are left to the "
	    "mount namespace and seccomp", abi);
	ADD(r->fix, "Linux 6.12 or later for ABI %d", DOC_LANDLOCK_FULL_ABI);
}

static void doc_probe_landlock(const struct doc_check *c, struct doc_result *r)
{
	long abi = syscall(__NR_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	int e = abi < 0 ? errno : 0;
	long errata = abi < 0 ? -1 : syscall(__NR_landlock_create_ruleset, NULL, 0,
					     LANDLOCK_CREATE_RULESET_ERRATA);
	doc_data(r, json_pack("{s:o, s:o, s:o}", "abi", doc_jlong(abi), "errata",
			      doc_jlong(errata), "errno", doc_jerrno(e)));
	if (abi < 0) {
		r->state = DOC_DEGRADED;
		ADD(r->detail, "%s", e == EOPNOTSUPP ? "built in but not enabled at boot"
						     : "not in this kernel");
		ADD(r->without, "file access is limited by the mount namespace alone: ward refuses "
		    "to run unless the policy's allow_degraded lists \"%s\"",
		    doc_layer(WARD_LAYER_LANDLOCK, c->id));
		ADD(r->fix, "%s", e == EOPNOTSUPP
		    ? "add landlock to the lsm= boot parameter (e.g. lsm=landlock,lockdown,yama,apparmor,bpf)"
		    : "a kernel with CONFIG_SECURITY_LANDLOCK=y (Linux 6.12 or later for ABI 6)");
		return;
	}
	ADD(r->detail, "ABI %ld", abi);
	if (errata >= 0)
		ADD(r->detail, ", errata 0x%lx", errata);
	if (abi < DOC_LANDLOCK_FULL_ABI)
		doc_landlock_partial(r, abi);
}

static bool doc_action_avail(uint32_t action)
{
	return syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0;
}

static void doc_probe_seccomp(UNUSED const struct doc_check *c, struct doc_result *r)
{
	int mode = prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
	int e = mode < 0 ? EINVAL : doc_child(doc_try_filter, NULL);
	bool kill_process = doc_action_avail(SECCOMP_RET_KILL_PROCESS);
	bool notif = doc_action_avail(SECCOMP_RET_USER_NOTIF);
	doc_data(r, json_pack("{s:o, s:o, s:b, s:b}", "mode", doc_jlong(mode), "errno",
			      doc_jerrno(e), "kill_process", kill_process, "user_notif", notif));
	if (e != 0 || !kill_process) {
		r->state = DOC_MISSING;
		if (e != 0)
			ADD(r->detail, "cannot install a filter: %s", doc_why(e));
		else
			ADD(r->detail, "filters work, but SECCOMP_RET_KILL_PROCESS is not available");
		ADD(r->without, "ward cannot run: the seccomp layer is required");
		ADD(r->fix, "a kernel built with CONFIG_SECCOMP=y and CONFIG_SECCOMP_FILTER=y "
		    "(Linux 4.14 or later)");
		return;
	}
	ADD(r->detail, "filter mode works; kill_process and %s available",
	    notif ? "user_notif" : "(not user_notif; not needed by ward run)");
	if (mode == 2)
		ADD(r->detail, "; ward itself already runs under a filter (a container?): its "
		    "own stacks on top, and the outer one may deny what ward needs");
}

/* --- mounts ---------------------------------------------------------------- */

static bool doc_has_fs(const char *name)
{
	_cleanup_free_ char *buf = NULL;
	char *save = NULL;
	if (ward_read_file("/proc/filesystems", 1 << 16, &buf, NULL) < 0)
		return false;
	for (char *t = strtok_r(buf, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save))
		if (strcmp(t, name) == 0)
			return true;
	return false;
}

static void doc_probe_overlay(UNUSED const struct doc_check *c, struct doc_result *r)
{
	bool listed = doc_has_fs("overlay");
	const char *where = listed ? "listed" : "not listed";
	int e;
	if (doc_child_in_tmpdir(doc_try_overlay, &e) < 0) {
		r->state = DOC_SKIPPED;
		ADD(r->detail, "%s in /proc/filesystems; mount not tried: no temp dir in /tmp (%s)",
		    where, strerror(e));
		return;
	}
	doc_data(r, json_pack("{s:b, s:o}", "listed", listed, "errno", doc_jerrno(e)));
	if (e == 0) {
		ADD(r->detail, "mounts inside a user namespace");
		return;
	}
	r->state = DOC_MISSING;
	ADD(r->detail, "%s in /proc/filesystems; mounting it inside a user namespace fails: %s",
	    where, doc_why(e));
	ADD(r->without, "the host image does not need it; writable layers over built images "
	    "will not be available");
	ADD(r->fix, "%s", doc_userns_err ? DOC_USERNS_FIX
		: listed ? "Linux 5.11 or later (overlayfs in user namespaces)"
		: "CONFIG_OVERLAY_FS=y or modprobe overlay; Linux 5.11 or later");
}

static void doc_probe_idmap(UNUSED const struct doc_check *c, struct doc_result *r)
{
	int e;
	if (!doc_host_root()) {
		r->state = DOC_SKIPPED;
		ADD(r->detail, "not checked: idmapping a mount needs root%s",
		    geteuid() == 0 ? " of the initial user namespace, and this is root of a "
		    "nested one (as under unshare -r)" : "");
		return;
	}
	if (doc_child_in_tmpdir(doc_try_idmap, &e) < 0) {
		r->state = DOC_SKIPPED;
		ADD(r->detail, "not checked: no temp dir in /tmp (%s)", strerror(e));
		return;
	}
	doc_data(r, json_pack("{s:o}", "errno", doc_jerrno(e)));
	if (e == 0) {
		ADD(r->detail, "MOUNT_ATTR_IDMAP works on a tmpfs clone");
		return;
	}
	r->state = DOC_MISSING;
	ADD(r->detail, "MOUNT_ATTR_IDMAP on a tmpfs clone fails: %s", doc_why(e));
	ADD(r->without, "the host image does not need it; built images run as root could "
	    "not give their files owners inside the sandbox's id range");
	ADD(r->fix, "%s", doc_userns_err ? DOC_USERNS_FIX : "Linux 5.12 or later (6.3 for tmpfs)");
}

/* --- process control and attack surface ------------------------------------ */

static void doc_probe_pidfd(UNUSED const struct doc_check *c, struct doc_result *r)
{
	int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	int e = fd < 0 ? errno : 0;
	doc_data(r, json_pack("{s:o}", "errno", doc_jerrno(e)));
	if (fd >= 0) {
		close(fd);
		ADD(r->detail, "pidfd_open works");
		return;
	}
	r->state = DOC_MISSING;
	ADD(r->detail, "pidfd_open fails: %s", strerror(e));
	ADD(r->without, "ward cannot start sandboxes: it uses clone3 with CLONE_PIDFD");
	ADD(r->fix, "Linux 5.3 or later");
}

static void doc_probe_io_uring(UNUSED const struct doc_check *c, struct doc_result *r)
{
	static const char *const modes[] = {
		"enabled for every user", "limited to kernel.io_uring_group", "disabled",
	};
	long v = doc_sysctl("/proc/sys/kernel/io_uring_disabled");
	doc_data(r, json_pack("{s:o}", "io_uring_disabled", doc_jlong(v)));
	if (v >= 0 && v < (long)ARRAY_SIZE(modes))
		ADD(r->detail, "%s (kernel.io_uring_disabled=%ld)", modes[v], v);
	else
		ADD(r->detail, "no kernel.io_uring_disabled sysctl (before Linux 6.6)");
	ADD(r->detail, "; ward's seccomp filter blocks it in the sandbox either way");
}

static void doc_probe_ia32(UNUSED const struct doc_check *c, struct doc_result *r)
{
#if defined(__x86_64__)
	int e = doc_child(doc_try_int80, NULL);
	bool x32 = syscall(0x40000000L | SYS_getpid) == (long)getpid();  /* the x32 bit */
	doc_data(r, json_pack("{s:b, s:b}", "ia32", e == 0, "x32", x32));
	ADD(r->detail, "i386 syscalls (int 0x80) %s; x32 %s; ward's seccomp filter kills "
	    "any syscall from a foreign architecture", e == 0 ? "are live" : "are off",
	    x32 ? "is live" : "is not built in");
#else
	ADD(r->detail, "not applicable on this architecture; ward's seccomp filter kills "
	    "any syscall from a foreign architecture");
#endif
}

static void doc_probe_newuidmap(UNUSED const struct doc_check *c, struct doc_result *r)
{
	const char *path = "/usr/bin/newuidmap";
	struct stat st;
	bool here = stat(path, &st) == 0;
	bool privileged = here && ((st.st_mode & S_ISUID) ||
				   getxattr(path, "security.capability", NULL, 0) > 0);
	doc_data(r, json_pack("{s:b, s:b}", "present", here, "privileged", privileged));
	if (!here) {
		r->state = DOC_MISSING;
		ADD(r->detail, "%s not found", path);
		ADD(r->without, "nothing changes: as root ward writes the id maps itself, "
		    "rootless it maps only your own id");
		ADD(r->fix, "apt-get install uidmap");
		return;
	}
	ADD(r->detail, "%s present%s; ward does not need it (as root it writes the id maps "
	    "itself, rootless it maps only your own id)", path,
	    privileged ? "" : " but neither setuid nor file-capable");
}

/* --- the table ------------------------------------------------------------- */

#define DOC_NS(flag, sysctl, kconfig, layer) \
	(&(const struct doc_ns){ flag, #flag, sysctl, kconfig, layer })

/* In the order ward applies the layers. `required`: ward cannot run without
 * it under any policy; the cgroup and time namespaces, cgroups and landlock
 * have a weaker fallback the policy may accept. */
static const struct doc_check doc_checks[] = {
	{ "userns", "user namespaces", true, NULL, doc_probe_userns },
	{ "mntns", "mount namespace", true, DOC_NS(CLONE_NEWNS, "max_mnt_namespaces",
		"CONFIG_NAMESPACES", WARD_LAYER_MOUNT), doc_probe_ns },
	{ "pidns", "pid namespace", true, DOC_NS(CLONE_NEWPID, "max_pid_namespaces",
		"CONFIG_PID_NS", WARD_LAYER_PID), doc_probe_ns },
	{ "netns", "net namespace", true, DOC_NS(CLONE_NEWNET, "max_net_namespaces",
		"CONFIG_NET_NS", WARD_LAYER_NET), doc_probe_ns },
	{ "ipcns", "ipc namespace", true, DOC_NS(CLONE_NEWIPC, "max_ipc_namespaces",
		"CONFIG_IPC_NS", WARD_LAYER_IPC), doc_probe_ns },
	{ "utsns", "uts namespace", true, DOC_NS(CLONE_NEWUTS, "max_uts_namespaces",
		"CONFIG_UTS_NS", WARD_LAYER_UTS), doc_probe_ns },
	{ "cgroupns", "cgroup namespace", false, DOC_NS(CLONE_NEWCGROUP, "max_cgroup_namespaces",
		"CONFIG_CGROUPS", WARD_LAYER_CGROUPNS), doc_probe_ns },
	{ "timens", "time namespace", false, DOC_NS(CLONE_NEWTIME, "max_time_namespaces",
		"CONFIG_TIME_NS", WARD_LAYER_TIME), doc_probe_ns },
	{ "cgroup", "cgroups", false, NULL, doc_probe_cgroup },
	{ "landlock", "landlock", false, NULL, doc_probe_landlock },
	{ "seccomp", "seccomp", true, NULL, doc_probe_seccomp },
	{ "pidfd", "pidfd", true, NULL, doc_probe_pidfd },
	{ "overlayfs", "overlayfs", false, NULL, doc_probe_overlay },
	{ "idmap", "idmapped mounts", false, NULL, doc_probe_idmap },
	{ "io_uring", "io_uring", false, NULL, doc_probe_io_uring },
	{ "ia32", "ia32 emulation", false, NULL, doc_probe_ia32 },
	{ "newuidmap", "newuidmap", false, NULL, doc_probe_newuidmap },
};
#define DOC_N ARRAY_SIZE(doc_checks)

/* --- output ---------------------------------------------------------------- */

struct doc_opts {
	bool json, quiet, help;
};

/* One line for the end of the report; returns whether ward can run here. */
static bool doc_summary(const struct doc_result *res, char *buf, size_t len)
{
	size_t n[4] = { 0 };
	const char *sep = ": missing ";
	buf[0] = '\0';
	for (size_t i = 0; i < DOC_N; i++) {
		n[res[i].state]++;
		if (!doc_checks[i].required || res[i].state == DOC_OK)
			continue;
		if (!buf[0])
			doc_add(buf, len, "ward cannot run here");
		doc_add(buf, len, "%s%s", sep, doc_checks[i].name);
		sep = ", ";
	}
	bool ready = !buf[0];
	if (ready)
		doc_add(buf, len, "ward can run here: everything it requires is present");
	doc_add(buf, len, " (%zu ok, %zu missing, %zu degraded, %zu skipped)",
		n[DOC_OK], n[DOC_MISSING], n[DOC_DEGRADED], n[DOC_SKIPPED]);
	return ready;
}

static void doc_print_text(const struct doc_result *res, const struct doc_opts *o,
			   const char *summary)
{
	for (size_t i = 0; i < DOC_N; i++) {
		const struct doc_result *r = &res[i];
		if (o->quiet && r->state == DOC_OK)
			continue;
		printf("%-8s  %s: %s\n", doc_state_names[r->state], doc_checks[i].name, r->detail);
		if (r->without[0])
			printf("%10swithout it: %s\n", "", r->without);
		if (r->fix[0])
			printf("%10sfix: %s\n", "", r->fix);
	}
	if (!o->quiet)
		printf("%s\n", summary);
}

static json_t *doc_jstr(const char *s)
{
	return s[0] ? json_string(s) : json_null();
}

static int doc_print_json(struct doc_result *res, bool ready, const char *summary)
{
	struct utsname u;
	json_t *checks = json_array();
	uname(&u);
	for (size_t i = 0; i < DOC_N; i++) {
		const struct doc_check *c = &doc_checks[i];
		struct doc_result *r = &res[i];
		json_array_append_new(checks, json_pack(
			"{s:s, s:s, s:s, s:b, s:s, s:o, s:o, s:o}", "id", c->id, "name", c->name,
			"state", doc_state_names[r->state], "required", c->required,
			"detail", r->detail, "without", doc_jstr(r->without),
			"fix", doc_jstr(r->fix), "data", take_ptr(r->data)));
	}
	json_t *root = json_pack("{s:s, s:s, s:s, s:I, s:b, s:b, s:s, s:o}",
				 "ward_version", WARD_VERSION, "kernel", u.release,
				 "machine", u.machine, "euid", (json_int_t)geteuid(),
				 "initial_userns", doc_initial_userns(NULL), "ready", ready, "summary", summary, "checks", checks);
	char *s = root && json_array_size(checks) == DOC_N ? json_dumps(root, 0) : NULL;
	json_decref(root);
	if (!s) {
		fprintf(stderr, "ward: error: doctor: unable to format the report: %s\n",
			strerror(ENOMEM));
		return -ENOMEM;
	}
	puts(s);
	free(s);
	return 0;
}

/* --- options and entry ----------------------------------------------------- */

static const char doc_usage[] =
	"usage: ward doctor [--json] [-q]\n"
	"\n"
	"Reports what this host offers each of ward's isolation layers: one line per\n"
	"check, 'ok', 'missing', 'degraded' or 'skipped', and for anything missing\n"
	"what ward does without it and the sysctl, kernel option or package that\n"
	"fixes it.\n"
	"\n"
	"  --json      print one JSON object instead of text\n"
	"  -q          print only the checks that are not ok\n"
	"  --help      show this help\n"
	"\n"
	"Exit status: 0 when everything ward requires is present, 1 when something\n"
	"required is missing, 2 on a usage error.\n";

static int doc_parse(int argc, char **argv, struct doc_opts *o)
{
	static const struct { const char *name; size_t off; } flags[] = {
		{ "--json", offsetof(struct doc_opts, json) },
		{ "-q", offsetof(struct doc_opts, quiet) },
		{ "--quiet", offsetof(struct doc_opts, quiet) },
		{ "--help", offsetof(struct doc_opts, help) },
		{ "-h", offsetof(struct doc_opts, help) },
	};
	for (int i = 1; i < argc; i++) {
		size_t k = 0;
		while (k < ARRAY_SIZE(flags) && strcmp(argv[i], flags[k].name) != 0)
			k++;
		if (k < ARRAY_SIZE(flags)) {
			*(bool *)((char *)o + flags[k].off) = true;
			continue;
		}
		fprintf(stderr, "ward: error: doctor: %s '%s' (see 'ward doctor --help')\n",
			argv[i][0] == '-' ? "unknown option" : "unexpected argument", argv[i]);
		return -EINVAL;
	}
	return 0;
}

int ward_cli_doctor(int argc, char **argv)
{
	struct doc_opts o = { 0 };
	struct doc_result res[DOC_N];
	char summary[512];
	if (doc_parse(argc, argv, &o) < 0)
		return 2;
	if (o.help) {
		fputs(doc_usage, stdout);
		return fflush(stdout) == 0 ? 0 : 1;
	}
	fflush(NULL);  /* probes fork: buffered output must not be written twice */
	memset(res, 0, sizeof(res));
	for (size_t i = 0; i < DOC_N; i++) {
		res[i].data = json_object();
		doc_checks[i].probe(&doc_checks[i], &res[i]);
	}
	int rc = doc_summary(res, summary, sizeof(summary)) ? 0 : 1;
	if (!o.json)
		doc_print_text(res, &o, summary);
	else if (doc_print_json(res, rc == 0, summary) < 0)
		rc = 1;
	for (size_t i = 0; i < DOC_N; i++)
		json_decref(res[i].data);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "ward: error: doctor: unable to write the report: %s\n",
			strerror(errno));
		rc = 1;
	}
	return rc;
}
