/* lib/server/audit.h — the audit log of `ward serve`: append-only JSON
 * lines, each carrying the hash of the one before it.
 *
 * One record is one line: the canonical JSON serialisation (compact, keys
 * sorted) of {"seq", "time", "event", the caller's fields, "prev"}, with
 * ,"hash":"<hex>" inserted before its final '}'. hash is BLAKE2b-256 of
 * that serialisation, prev is the hash of the line before (64 zeros, or a
 * configured genesis, on the first line). docs/audit.md is the reference
 * for third-party verifiers.
 *
 * It must never rewrite or reorder what is already in the file, never
 * write part of a line (each line is one write(), rolled back if short),
 * and never record code or program output in full unless the
 * configuration opts in (ward_audit_text). Everything here is parent-only:
 * it allocates, takes locks and does file I/O. Nothing here exits or
 * aborts.
 */
#ifndef WARD_SERVER_AUDIT_H
#define WARD_SERVER_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ward/error.h"

struct json_t;  /* jansson's json_t, without making this header need jansson */

enum {
	WARD_AUDIT_HASH_BYTES = 32,          /* BLAKE2b-256 and SHA-256 alike */
	WARD_AUDIT_HEX_SIZE = 65,            /* 64 hex digits and the NUL */
	WARD_AUDIT_LINE_MAX = 1 << 20,       /* bytes in a line, '\n' excluded */
	WARD_AUDIT_TEXT_MAX = 64 << 10,      /* bytes of text kept by full_text */
};

/* When the writer calls fdatasync(). */
enum ward_audit_sync {
	/* After every line, outside the in-process lock so that concurrent
	 * writers share flushes: ward_audit_record() returns once its line is
	 * on disk. Costs ~0.1 ms per line on ext4/virtio (docs/audit.md). */
	WARD_AUDIT_SYNC_EVERY,
	/* Never: lines survive a crash of the daemon (they are in the page
	 * cache once write() returns), not a crash of the host. */
	WARD_AUDIT_SYNC_NONE,
};

struct ward_audit_options {
	bool full_text;              /* ward_audit_text() keeps the text itself */
	enum ward_audit_sync sync;   /* default (zero): WARD_AUDIT_SYNC_EVERY */
	/* 64 hex digits: the prev of the first line, e.g. the last hash of the
	 * log this one replaces. NULL: 64 zeros. */
	const char *genesis;
	/* When the file's last line is not a valid record (a torn write, an
	 * edit), start a new chain segment after it instead of refusing: a
	 * record {"event":"audit.segment","seq":1,"prev":<genesis>,"reason":
	 * "...","broken_line":N} is appended (after a '\n' if the file does not
	 * end in one). `ward audit verify` still reports line N. */
	bool force;
};

/* An audit log open for appending; opaque. One per process and path:
 * threads share it (an internal mutex orders them), processes coordinate
 * through flock(). Not usable in a child after fork(). */
struct ward_audit;

/* Opens (creating with mode 0600) the log at path for appending, with
 * O_RDWR|O_APPEND|O_CREAT|O_CLOEXEC: read access is needed to continue the
 * chain from the file's last line. opts NULL means all defaults. Checks
 * only the last line (hash and layout), not the whole chain.
 * Returns 0 and *out (free with ward_audit_free); -EBADMSG when the last
 * line is not a valid record and opts->force is not set, with err naming
 * the line ("audit: line 7 of '/var/log/ward/audit.log': truncated ...");
 * -EINVAL for a bad genesis or a path that is not a regular file (-EISDIR
 * for a directory); or another -errno from open, flock or read. With force,
 * a failure to write the segment record is returned as such. *out is NULL
 * on failure. */
int ward_audit_open(const char *path, const struct ward_audit_options *opts,
		    struct ward_audit **out, struct ward_error *err);

/* Closes the file and frees a. NULL is a no-op. */
void ward_audit_free(struct ward_audit *a);

/* Whether the configuration opted in to full text (pass it to
 * ward_audit_text). */
bool ward_audit_full_text(const struct ward_audit *a);

/* Appends one record: event (non-empty, at most 64 bytes of [a-z0-9._-])
 * and the members of fields, which stays the caller's (borrowed; NULL for
 * none). fields must not use the reserved keys seq, time, event, prev and
 * hash. Under the mutex and an exclusive flock, it re-reads the file's last
 * line if another process appended since, so chains stay valid across
 * writers; the line goes out in a single write(), and a short write is
 * truncated away. Thread-safe.
 * Returns 0; -EINVAL (bad event, reserved key, text that is not UTF-8);
 * -EMSGSIZE when the line would exceed WARD_AUDIT_LINE_MAX; -EBADMSG when
 * another writer left an invalid last line; -ENOMEM; or -errno from
 * write/fdatasync (after a failed fdatasync the line is in the file but
 * may not be durable). */
int ward_audit_record(struct ward_audit *a, const char *event, struct json_t *fields,
		      struct ward_error *err);

/* ward_audit_record, and on success the line as written (its '\n'
 * included, NUL-terminated, malloc'ed: the caller frees it) in *line when
 * line is not NULL; *line is NULL on failure. The event stream
 * (GET /v1/events) sends these very lines. */
int ward_audit_record_line(struct ward_audit *a, const char *event, struct json_t *fields,
			   char **line, struct ward_error *err);

/* The same record without a log to chain it to: the canonical JSON of
 * {"time", "event", the caller's fields} and a '\n' (no seq, prev or
 * hash), malloc'ed; NULL with err set (the checks of ward_audit_record,
 * or ENOMEM). For the event stream of a daemon without an audit log. */
char *ward_audit_event_line(const char *event, struct json_t *fields, struct ward_error *err);

/* The seq and hash (hex) of the last line this writer knows of. For tests
 * and for anchoring the chain elsewhere. Thread-safe. */
uint64_t ward_audit_head(struct ward_audit *a, char hex[WARD_AUDIT_HEX_SIZE]);

/* SHA-256 of data as 64 lowercase hex digits and a NUL. Never fails. */
void ward_audit_digest(const void *data, size_t len, char hex[WARD_AUDIT_HEX_SIZE]);

/* Sets fields[key] to {"size": len, "sha256": hex} describing text. With
 * full_text it also keeps the text: "text" when it is UTF-8, else
 * "base64"; only the first WARD_AUDIT_TEXT_MAX bytes, with "truncated":
 * true when cut (size and sha256 always describe the whole). text may hold
 * NULs; it may be NULL when len is 0. Returns 0, -EINVAL or -ENOMEM. */
int ward_audit_text(struct json_t *fields, const char *key, const char *text, size_t len,
		    bool full_text);

/* Why verification stopped. */
enum ward_audit_break {
	WARD_AUDIT_INTACT,
	WARD_AUDIT_EDITED,       /* hash does not match the line's content */
	WARD_AUDIT_PREV,         /* prev is not the previous line's hash */
	WARD_AUDIT_DELETED,      /* seq jumps forward */
	WARD_AUDIT_REORDERED,    /* seq goes back, or the missing seq comes next */
	WARD_AUDIT_MALFORMED,    /* not JSON, or not a ward audit record */
	WARD_AUDIT_TRUNCATED,    /* the file does not end with a newline */
	WARD_AUDIT_TOO_LONG,     /* a line longer than WARD_AUDIT_LINE_MAX */
};

/* "intact", "edited", "prev", "deleted", "reordered", "malformed",
 * "truncated", "too_long". */
const char *ward_audit_break_name(enum ward_audit_break b);

struct ward_audit_report {
	uint64_t lines;              /* lines that verified, before any break */
	uint64_t bad_line;           /* 1-based line of the first break, 0 if intact */
	enum ward_audit_break reason;
	uint64_t last_seq;           /* seq of the last line that verified, 0 if none */
	char last_hash[WARD_AUDIT_HEX_SIZE];  /* its hash, or the genesis */
	/* "line 7: hash does not match its content (edited)"; "" when intact */
	char message[WARD_ERROR_MSG_MAX];
};

/* Verifies the log at path from its first line: each line's hash, its prev
 * against the line before (the first against genesis: 64 hex digits, NULL
 * for zeros), seq counting up from 1 by one. Stops at the first break.
 * Reads with a fixed buffer (WARD_AUDIT_LINE_MAX + 1 bytes), whatever the
 * file's size. Returns 0 when the file could be read — intact or not:
 * report->bad_line says — or -errno (open, read) / -EINVAL (bad genesis)
 * with err set. */
int ward_audit_verify(const char *path, const char *genesis,
		      struct ward_audit_report *report, struct ward_error *err);

/* --- repeated denials ---
 * A client that is refused (no valid key, a missing scope) chooses how
 * often: recording each refusal in full would let it write the log as fast
 * as it can send. A tally records the first refusal of a source (an
 * address, a peer uid, a key) in each interval in full, with its method
 * and path cut to WARD_AUDIT_DENIED_TEXT bytes (ward_audit_clip), counts
 * the rest, and at the interval's end writes one "request.denied" line per
 * source: {"source", "count" (all of the interval, the first included),
 * "interval_ms"}. It tracks at most WARD_AUDIT_TALLY_SOURCES sources per
 * interval; past that, the others share the source "other". Single-
 * threaded (the caller's loop); the lines go through ward_audit_record, so
 * the chain stays one chain. */
enum {
	WARD_AUDIT_DENIED_TEXT = 256,        /* bytes of a denied request's path */
	WARD_AUDIT_TALLY_SOURCES = 256,
	WARD_AUDIT_SOURCE_MAX = 64,          /* bytes of a source's name, NUL included */
};

struct ward_audit_tally;

/* A tally with intervals of interval_ms (at least 1). NULL on ENOMEM. */
struct ward_audit_tally *ward_audit_tally_new(uint64_t interval_ms);
void ward_audit_tally_free(struct ward_audit_tally *t);
/* Counts one denial from source at now_ns (CLOCK_MONOTONIC). Returns true
 * when this one should be recorded in full (the source's first in the
 * interval), false when it is only counted. */
bool ward_audit_tally_add(struct ward_audit_tally *t, const char *source, uint64_t now_ns);
/* Writes the summaries of an interval that has ended (or of the current
 * one too when all is set: at shutdown) to a (NULL: only forgets them).
 * Returns when the current interval ends (ns, 0: nothing counted). */
uint64_t ward_audit_tally_flush(struct ward_audit_tally *t, struct ward_audit *a,
				uint64_t now_ns, bool all);
/* Sets fields[key] to text cut to max bytes, every byte outside printable
 * ASCII as '?', and fields[key "_size"] to len when it was cut. Returns 0
 * or -ENOMEM. */
int ward_audit_clip(struct json_t *fields, const char *key, const char *text, size_t len,
		    size_t max);

#endif
