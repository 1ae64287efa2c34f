/* tests/unit/tap.h — a minimal TAP producer for C unit tests.
 *
 * Usage: ok(cond, "name %d", x); is_int(a, b, "name"); is_str(a, b, "name");
 * skip("reason"); return tap_done(); The plan line is printed at the end.
 */
#ifndef WARD_TAP_H
#define WARD_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

__attribute__((format(printf, 2, 3), unused))
static int ok(int cond, const char *fmt, ...)
{
	va_list ap;
	tap_n++;
	if (!cond)
		tap_failed++;
	printf("%sok %d - ", cond ? "" : "not ", tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	return cond;
}

__attribute__((format(printf, 1, 2), unused))
static void diag(const char *fmt, ...)
{
	va_list ap;
	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

__attribute__((format(printf, 1, 2), unused))
static void skip(const char *fmt, ...)
{
	va_list ap;
	tap_n++;
	printf("ok %d # SKIP ", tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

#define is_int(got, want, ...)                                                \
	do {                                                                  \
		long long g_ = (long long)(got), w_ = (long long)(want);     \
		if (!ok(g_ == w_, __VA_ARGS__))                               \
			diag("got %lld, want %lld", g_, w_);                  \
	} while (0)

#define is_str(got, want, ...)                                                \
	do {                                                                  \
		const char *g_ = (got), *w_ = (want);                         \
		if (!ok(g_ && w_ && strcmp(g_, w_) == 0, __VA_ARGS__))        \
			diag("got '%s', want '%s'", g_ ? g_ : "(null)",      \
			     w_ ? w_ : "(null)");                             \
	} while (0)

#define has_str(hay, needle, ...)                                             \
	do {                                                                  \
		const char *h_ = (hay), *n_ = (needle);                       \
		if (!ok(h_ && strstr(h_, n_) != NULL, __VA_ARGS__))           \
			diag("'%s' does not contain '%s'", h_ ? h_ : "(null)", n_); \
	} while (0)

__attribute__((unused))
static int tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif
