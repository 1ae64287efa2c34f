/* lib/base/json-stream.h — a JSON document written out piece by piece.
 *
 * json_dumps (and ward_json_dump) build a whole document in memory; for a
 * verdict of 16 MiB of control characters that is ~100 MB per copy of the
 * text, escaped. A reader instead walks the tree and writes its compact
 * serialization (byte for byte what json_dumps(JSON_COMPACT) gives, then a
 * newline) into a caller's buffer as it is read, holding one small
 * staging buffer and a stack of where it is: memory stays that of the
 * tree, whatever the escaping costs. A transport with flow control (an
 * HTTP response read by a slow client) pulls at its own pace.
 *
 * The tree must not change while it is read (the reader holds a
 * reference). Strings must be valid UTF-8 (as jansson makes them).
 */
#ifndef WARD_BASE_JSON_STREAM_H
#define WARD_BASE_JSON_STREAM_H

#include <stddef.h>
#include <sys/types.h>

struct json_t;
struct ward_json_reader;

/* A reader of root (a reference is taken), or NULL on ENOMEM. */
struct ward_json_reader *ward_json_reader_new(struct json_t *root);
/* Up to max bytes of the serialization into buf: the count, 0 at the end,
 * or -ENOMEM. */
ssize_t ward_json_reader_read(struct ward_json_reader *r, char *buf, size_t max);
void ward_json_reader_free(struct ward_json_reader *r);

#endif
