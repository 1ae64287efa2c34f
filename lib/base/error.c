/* lib/base/error.c — the fixed-size error record.
 * Must never allocate: it is filled in the sandbox child and under ENOMEM. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "ward/error.h"

WARD_EXPORT void ward_error_clear(struct ward_error *err)
{
	if (!err)
		return;
	err->code = 0;
	err->layer[0] = err->message[0] = err->hint[0] = err->field[0] = '\0';
}

WARD_EXPORT int ward_error_set(struct ward_error *err, int code, const char *layer,
			       const char *fmt, ...)
{
	if (err) {
		va_list ap;
		err->code = code;
		ward_strlcpy(err->layer, layer ? layer : "", sizeof(err->layer));
		va_start(ap, fmt);
		vsnprintf(err->message, sizeof(err->message), fmt, ap);
		va_end(ap);
		err->hint[0] = '\0';
		err->field[0] = '\0';
	}
	return code ? -code : -EINVAL;
}

WARD_EXPORT int ward_error_setv(struct ward_error *err, int code, const char *layer, ...)
{
	if (err) {
		va_list ap;
		const char *s;
		err->code = code;
		ward_strlcpy(err->layer, layer ? layer : "", sizeof(err->layer));
		err->message[0] = '\0';
		err->hint[0] = '\0';
		err->field[0] = '\0';
		va_start(ap, layer);
		while ((s = va_arg(ap, const char *)) != NULL)
			ward_strlcat(err->message, s, sizeof(err->message));
		va_end(ap);
	}
	return code ? -code : -EINVAL;
}

WARD_EXPORT void ward_error_hint(struct ward_error *err, const char *hint)
{
	if (err)
		ward_strlcpy(err->hint, hint ? hint : "", sizeof(err->hint));
}

WARD_EXPORT void ward_error_field(struct ward_error *err, const char *field)
{
	if (err)
		ward_strlcpy(err->field, field ? field : "", sizeof(err->field));
}

WARD_EXPORT char *ward_error_format(const struct ward_error *err, char *buf, size_t len)
{
	if (!len)
		return buf;
	buf[0] = '\0';
	if (err->layer[0]) {
		ward_strlcat(buf, err->layer, len);
		ward_strlcat(buf, ": ", len);
	}
	ward_strlcat(buf, err->message[0] ? err->message : "unknown error", len);
	if (err->code > 0) {
		ward_strlcat(buf, ": ", len);
		ward_strlcat(buf, strerror(err->code), len);
	}
	if (err->hint[0]) {
		ward_strlcat(buf, " (hint: ", len);
		ward_strlcat(buf, err->hint, len);
		ward_strlcat(buf, ")", len);
	}
	return buf;
}
