/* lib/workspace.h — reaching into a running sandbox's /workspace from
 * outside, without being led out of it (internal; artifacts and the
 * daemon's files API share it).
 *
 * Every lookup is an openat2 that refuses symlinks, magic links, ".." out
 * of the starting directory and mount crossings, at every step and
 * atomically, so a program that plants links or races them cannot point
 * the caller at a host file.
 */
#ifndef WARD_WORKSPACE_H
#define WARD_WORKSPACE_H

#include <dirent.h>
#include <stdbool.h>

#include "ward/sandbox.h"

enum { WARD_WORKSPACE_PATH_MAX = 1000 };

/* The one workspace-path rule, for the library, the CLI and the daemon: a
 * relative path of at most WARD_WORKSPACE_PATH_MAX bytes, no control
 * characters, no empty, "." or ".." component (so "a..b" is a name like
 * any other, "a/../b" and "a//b" and "a/" are refused). Makes no syscall;
 * says nothing about links (ward_open_beneath refuses those). */
bool ward_workspace_path_ok(const char *path);

/* openat2(dirfd, name) with RESOLVE_BENEATH | NO_SYMLINKS | NO_MAGICLINKS |
 * NO_XDEV, O_NOFOLLOW and O_CLOEXEC added to flags; mode with O_CREAT. */
int ward_open_beneath(int dirfd, const char *name, int flags, unsigned mode);

/* An O_RDONLY | O_DIRECTORY fd of the sandbox's /workspace, through its
 * root (RESOLVE_IN_ROOT, no symlinks), or -1 with errno set. */
int ward_workspace_open(const struct ward_sandbox *sb);

/* A directory stream on a duplicate of dirfd (dirfd stays the caller's),
 * or NULL. */
DIR *ward_dir_stream(int dirfd);

/* Creates the parent directories of rel under dir, each step beneath the
 * last; returns a dirfd of the last one (the caller closes it) and points
 * *leaf at rel's last component; -1 with errno set. */
int ward_mkdirs_beneath(int dir, const char *rel, const char **leaf);

/* Writes a regular file at path (ward_workspace_path_ok) under the
 * workspace dirfd ws: parents made with ward_mkdirs_beneath, the file
 * opened with ward_open_beneath (O_NONBLOCK: a planted FIFO never blocks),
 * truncated only once it is known to be a regular file, then given mode.
 * What exists there and is not a regular file is -EEXIST and stays; a
 * write that fails (ENOSPC: the workspace is full) leaves no file. Runs
 * with the caller's fsuid: set it to the workspace's owner first.
 * 0 or -errno. */
int ward_workspace_write(int ws, const char *path, const void *data, size_t len, unsigned mode);

/* A workspace name as JSON (a new reference, NULL on ENOMEM): itself, or,
 * when it is not UTF-8, with every byte above 0x7f and every backslash
 * written \xNN and *escaped set (docs/api.md, "path_escaped"). In
 * lib/artifacts.c; the artifact lists and the file listings use it. */
struct json_t;
struct json_t *ward_workspace_name_json(const char *rel, bool *escaped);

#endif
