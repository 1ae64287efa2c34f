/* lib/layers/userns.c — the user namespace: who the sandbox is on the host.
 *
 * As root, the sandbox gets a subordinate range: inside ids 0..65535 map to
 * host ids starting at a base far from real users; host root (0) is never
 * mapped. Rootless, the only id that can be mapped is the caller's own, so
 * the program's inside id maps to it and setgroups is denied. The parent
 * writes the maps after clone; the child waits for them on the sync pipe.
 * Never maps host root into the sandbox.
 */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "base/util.h"
#include "sandbox.h"

enum { WARD_ID_RANGE = 65536 };
/* 0x60000000: far above the ranges useradd hands out (100000 + 65536 * n). */
static const uint64_t ward_default_id_base = 0x60000000u;

/* Reads "<name>:<start>:<count>" from a subordinate id file; the first line
 * for `name` with count >= WARD_ID_RANGE wins. */
static bool subid_lookup(const char *file, const char *name, uint64_t *base)
{
	_cleanup_free_ char *buf = NULL;
	if (ward_read_file(file, 1 << 20, &buf, NULL) < 0)
		return false;
	size_t nlen = strlen(name);
	for (char *line = buf; line && *line;) {
		char *next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (strncmp(line, name, nlen) == 0 && line[nlen] == ':') {
			char *end;
			unsigned long long start = strtoull(line + nlen + 1, &end, 10);
			if (*end == ':') {
				unsigned long long count = strtoull(end + 1, NULL, 10);
				if (start > 0 && count >= WARD_ID_RANGE) {
					*base = start;
					return true;
				}
			}
		}
		line = next;
	}
	return false;
}

int ward_userns_prepare(struct ward_plan *plan, struct ward_error *err)
{
	const struct ward_policy *p = plan->policy;
	plan->host_uid = geteuid();
	plan->host_gid = getegid();
	plan->rootless = plan->host_uid != 0 || !ward_proc_initial_userns(NULL);
	plan->uid = p->root_inside ? 0 : WARD_INSIDE_UID;
	plan->gid = p->root_inside ? 0 : WARD_INSIDE_GID;

	int n1, n2;
	if (plan->rootless) {
		n1 = snprintf(plan->uid_map, sizeof(plan->uid_map), "%u %u 1\n",
			      (unsigned)plan->uid, (unsigned)plan->host_uid);
		n2 = snprintf(plan->gid_map, sizeof(plan->gid_map), "%u %u 1\n",
			      (unsigned)plan->gid, (unsigned)plan->host_gid);
	} else {
		uint64_t ubase = ward_default_id_base, gbase = ward_default_id_base;
		subid_lookup("/etc/subuid", "ward", &ubase);
		subid_lookup("/etc/subgid", "ward", &gbase);
		if (ubase == 0 || gbase == 0)
			return ward_error_set(err, EINVAL, "userns",
					      "the subordinate id range must not start at 0");
		plan->id_base[0] = ubase;
		plan->id_base[1] = gbase;
		n1 = snprintf(plan->uid_map, sizeof(plan->uid_map), "0 %llu %d\n",
			      (unsigned long long)ubase, WARD_ID_RANGE);
		n2 = snprintf(plan->gid_map, sizeof(plan->gid_map), "0 %llu %d\n",
			      (unsigned long long)gbase, WARD_ID_RANGE);
	}
	if (n1 < 0 || n2 < 0 || (size_t)n1 >= sizeof(plan->uid_map) ||
	    (size_t)n2 >= sizeof(plan->gid_map))
		return ward_error_set(err, EOVERFLOW, "userns", "id map does not fit");
	return 0;
}

static int write_proc(pid_t pid, const char *file, const char *data, struct ward_error *err)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	int r = ward_write_file_at(AT_FDCWD, path, data, strlen(data), 0, 0);
	if (r < 0) {
		ward_error_set(err, -r, "userns", "unable to write '%s'", path);
		if (r == -EPERM)
			ward_error_hint(err, "user namespaces may be restricted: check "
					     "kernel.unprivileged_userns_clone and "
					     "user.max_user_namespaces, or run 'ward doctor'");
		return r;
	}
	return 0;
}

int ward_userns_idmap_fd(const struct ward_plan *plan, uid_t owner, gid_t group,
			 struct ward_error *err)
{
	char umap[64], gmap[64], ns[64];
	snprintf(umap, sizeof(umap), "%u %llu 1\n", (unsigned)owner,
		 (unsigned long long)(plan->id_base[0] + plan->uid));
	snprintf(gmap, sizeof(gmap), "%u %llu 1\n", (unsigned)group,
		 (unsigned long long)(plan->id_base[1] + plan->gid));
	int hold[2];
	if (pipe2(hold, O_CLOEXEC) < 0)
		return ward_error_set(err, errno, "userns", "unable to create a pipe");
	/* A process that only holds the namespace until the pipe closes: raw
	 * clone, so a multithreaded caller is fine; it runs no library code. */
	pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0);
	if (pid == 0) {
		char c;
		close(hold[1]);
		(void)!read(hold[0], &c, 1);
		_exit(0);
	}
	close(hold[0]);
	if (pid < 0) {
		close(hold[1]);
		return ward_error_set(err, errno, "userns", "unable to create the idmap namespace");
	}
	int fd = -1;
	int r = write_proc(pid, "uid_map", umap, err);
	if (r == 0)
		r = write_proc(pid, "gid_map", gmap, err);
	if (r == 0) {
		snprintf(ns, sizeof(ns), "/proc/%d/ns/user", (int)pid);
		fd = open(ns, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			r = ward_error_set(err, errno, "userns", "unable to open '%s'", ns);
	}
	close(hold[1]);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return r < 0 ? r : fd;
}

int ward_userns_write_maps(const struct ward_plan *plan, pid_t pid, struct ward_error *err)
{
	int r = write_proc(pid, "uid_map", plan->uid_map, err);
	if (r < 0)
		return r;
	/* Rootless: the kernel requires setgroups to be denied before an
	 * unprivileged gid_map; as root it stays allowed so the child can
	 * clear its supplementary groups. */
	if (plan->rootless && (r = write_proc(pid, "setgroups", "deny", err)) < 0)
		return r;
	return write_proc(pid, "gid_map", plan->gid_map, err);
}

int ward_userns_enter(struct ward_plan *plan, struct ward_error *err)
{
	/* As root the child still carries host uid 0, which the map leaves out;
	 * it must become the namespace's own root before it creates files.
	 * Rootless, the caller's id is the only one mapped: keep it. */
	long id = plan->rootless ? (long)plan->uid : 0;
	long gid = plan->rootless ? (long)plan->gid : 0;
	if (!plan->rootless && syscall(SYS_setgroups, 0, NULL) < 0)
		return ward_error_setv(err, errno, "userns",
				       "unable to clear supplementary groups", NULL);
	if (syscall(SYS_setresgid, gid, gid, gid) < 0)
		return ward_error_setv(err, errno, "userns",
				       "unable to switch to the namespace's group", NULL);
	if (syscall(SYS_setresuid, id, id, id) < 0)
		return ward_error_setv(err, errno, "userns",
				       "unable to switch to the namespace's root", NULL);
	return 0;
}
