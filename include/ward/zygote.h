/* ward/zygote.h — sandboxes started by a helper process instead of by a
 * copy of the caller.
 *
 * A launcher is a small process forked once from the caller (call
 * ward_launcher_start early, from the thread that will outlive every
 * sandbox, before other threads exist). For each sandbox the caller sends
 * it the request (policy, argv, files, binds and the sandbox's fds); the
 * launcher builds the same plan and clones the sandbox's init with
 * CLONE_PARENT, so the init is still the caller's child: its pidfd, its
 * wait, its parent-death signal and its verdict are exactly those of a
 * sandbox the caller cloned itself. The caller then writes the id maps
 * and releases the init as before. What changes is what the clone copies:
 * the launcher's few pages, not the caller's whole address space.
 *
 * A zygote is a launcher whose process is a language runtime (Python
 * first) that preloaded its modules and never ran untrusted code: its
 * sandbox's program is not exec'd but forked, applies the same layers in
 * the same order, and returns into the runtime to serve the kernel
 * protocol. Parent-only; every function here is thread-safe.
 */
#ifndef WARD_ZYGOTE_H
#define WARD_ZYGOTE_H

#include <sys/types.h>

#include "ward/error.h"
#include "ward/kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ward_launcher;

/* Forks the launcher. It dies with the caller's thread (parent-death
 * signal) and when ward_launcher_stop closes its socket. NULL with err
 * set on failure. */
struct ward_launcher *ward_launcher_start(struct ward_error *err);
/* Stops the launcher (waits for it) and frees *l. Sandboxes it started
 * live on: they are the caller's children. NULL is a no-op. */
void ward_launcher_stop(struct ward_launcher *l);
/* The launcher's pid (in the caller's pid namespace). */
pid_t ward_launcher_pid(const struct ward_launcher *l);

struct ward_zygote;

/* Starts a zygote for lang (only WARD_LANG_PYTHON today; call it, like
 * ward_launcher_start, from the thread that outlives its sandboxes): the image's
 * python3 running runners/python/zygote.py from runners_dir (NULL: found
 * as for kernels), which imports each of modules (NULL: numpy, pandas,
 * matplotlib; a module that is missing is skipped) with one thread per
 * math library, then says it is ready. Blocks until then (seconds: it
 * imports). NULL with err set when the runtime cannot start. Its
 * sandboxes' programs are lang's kernel or a session's agent, as the
 * plan's argv says (it is not exec'd; any other argv exits 127); it finds libward-zygote.so next to the binary in a build tree,
 * through $WARD_ZYGOTE_MODULE, or installed under libdir/ward. */
struct ward_zygote *ward_zygote_start(enum ward_lang lang, const char *const *modules,
				      const char *runners_dir, struct ward_error *err);
/* Stops the zygote and frees *z. NULL is a no-op. */
void ward_zygote_stop(struct ward_zygote *z);
/* The launcher side of a zygote: what ward_sandbox_options.launcher takes.
 * Owned by the zygote. */
struct ward_launcher *ward_zygote_launcher(struct ward_zygote *z);
/* The language a zygote serves. */
enum ward_lang ward_zygote_lang(const struct ward_zygote *z);

#ifdef __cplusplus
}
#endif
#endif
