/* ward/error.h — the error contract shared by every fallible ward function.
 *
 * A fallible function returns int (0, or a negative errno) or a pointer (NULL)
 * and takes `struct ward_error *err` last. The struct lives in caller storage
 * and has a fixed size, so it crosses the clone boundary by value and works
 * under memory pressure. It must never allocate.
 */
#ifndef WARD_ERROR_H
#define WARD_ERROR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
	WARD_ERROR_LAYER_MAX = 24,
	WARD_ERROR_MSG_MAX = 384,
	WARD_ERROR_HINT_MAX = 192,
	WARD_ERROR_FIELD_MAX = 128,
};

struct ward_error {
	int code;                          /* positive errno of the failing call, 0 if none */
	char layer[WARD_ERROR_LAYER_MAX];  /* isolation layer or module, "" if none */
	char message[WARD_ERROR_MSG_MAX];  /* lowercase, without the errno text */
	char hint[WARD_ERROR_HINT_MAX];    /* how to fix it (sysctl, package, option), or "" */
	/* The input field that is wrong, as a dotted path relative to its
	 * document ("limits.memory", "env.PATH", "mounts[0].host"), or "".
	 * Set where the field is known, so a caller that reports it (an HTTP
	 * error's "field") never takes the message apart. */
	char field[WARD_ERROR_FIELD_MAX];
};

/* Clears *err. Child-safe. */
void ward_error_clear(struct ward_error *err);

/* Records an error (printf-style message, no trailing errno text; that is
 * added from `code` when formatting). Returns -code, or -EINVAL when code is 0.
 * Parent-only (uses vsnprintf). err may be NULL. */
int ward_error_set(struct ward_error *err, int code, const char *layer,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Child-safe variant: message is the concatenation of the NULL-terminated
 * string list. No allocation, no stdio, no locale. Returns -code. */
int ward_error_setv(struct ward_error *err, int code, const char *layer, ...)
	__attribute__((sentinel));

/* Sets the hint. Child-safe. */
void ward_error_hint(struct ward_error *err, const char *hint);

/* Sets the field path (cut to fit). ward_error_set and ward_error_setv
 * clear it. Child-safe. err may be NULL. */
void ward_error_field(struct ward_error *err, const char *field);

/* Formats "layer: message: strerror(code)" into buf (always terminated).
 * Returns buf. Parent-only. */
char *ward_error_format(const struct ward_error *err, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
