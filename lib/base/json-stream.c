/* lib/base/json-stream.c — a JSON tree serialized as it is read
 * (json-stream.h). The output is jansson's JSON_COMPACT form: objects in
 * their insertion order (jansson's own order since 2.8), scalars written by
 * jansson itself, and strings escaped by jansson a bounded piece at a time;
 * this file only walks the tree and writes the brackets, commas and colons
 * between what jansson encodes.
 */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json-stream.h"

enum { STAGE = 64 * 1024, SLACK = 8 };

struct frame {
	json_t *v;
	void *iter;        /* an object's next member */
	size_t idx;        /* an array's next element */
	bool first;
};

struct ward_json_reader {
	json_t *root;
	struct frame *st;
	size_t depth, cap;
	bool started, done;
	/* a string being escaped: a value, or a key (then ':' and its value) */
	const char *s;
	size_t s_len, s_off;
	bool in_string, is_key;
	json_t *pending;   /* the value of the key being written */
	char buf[STAGE];
	size_t len, off;
};

struct ward_json_reader *ward_json_reader_new(json_t *root)
{
	struct ward_json_reader *r = calloc(1, sizeof(*r));
	if (r)
		r->root = json_incref(root);
	return r;
}

void ward_json_reader_free(struct ward_json_reader *r)
{
	if (!r)
		return;
	json_decref(r->root);
	free(r->st);
	free(r);
}

static void put(struct ward_json_reader *r, const char *p, size_t n)
{
	memcpy(r->buf + r->len, p, n);
	r->len += n;
}

static int push(struct ward_json_reader *r, json_t *v)
{
	if (r->depth == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 16;
		struct frame *nf = realloc(r->st, cap * sizeof(*nf));
		if (!nf)
			return -ENOMEM;
		r->st = nf;
		r->cap = cap;
	}
	r->st[r->depth++] = (struct frame){ .v = v, .first = true,
					    .iter = json_is_object(v) ? json_object_iter(v) : NULL };
	return 0;
}


static void begin_string(struct ward_json_reader *r, const char *s, size_t n, bool key)
{
	put(r, "\"", 1);
	r->s = s;
	r->s_len = n;
	r->s_off = 0;
	r->in_string = true;
	r->is_key = key;
}

/* Starts writing v: a bracket (and a frame), a string, or a scalar whole. */
static int begin_value(struct ward_json_reader *r, json_t *v)
{
	if (json_is_object(v) || json_is_array(v)) {
		put(r, json_is_object(v) ? "{" : "[", 1);
		return push(r, v);
	}
	if (json_is_string(v)) {
		begin_string(r, json_string_value(v), json_string_length(v), false);
		return 0;
	}
	char num[64];
	size_t n = json_dumpb(v, num, sizeof(num), JSON_COMPACT | JSON_ENCODE_ANY);
	if (!n || n > sizeof(num))
		return -ENOMEM;
	put(r, num, n);
	return 0;
}

/* Escapes what fits of the current string. jansson escapes it, a piece at
 * a time: each piece ends on a UTF-8 character boundary and jansson
 * escapes character by character, so the pieces together are exactly the
 * whole string's escaped form; no escaping is written here. */
static int escape(struct ward_json_reader *r)
{
	while (r->s_off < r->s_len) {
		/* an escaped byte takes at most 6 bytes, plus the quotes jansson
		 * puts around a piece */
		size_t room = STAGE - r->len - SLACK;
		if (room < 6 * 16 + 2)
			return 0; /* full: go on at the next fill */
		size_t n = (room - 2) / 6;
		if (n > r->s_len - r->s_off)
			n = r->s_len - r->s_off;
		else
			while (n > 1 && ((unsigned char)r->s[r->s_off + n] & 0xc0) == 0x80)
				n--; /* never split a character */
		json_t *piece = json_stringn_nocheck(r->s + r->s_off, n);
		size_t w = piece ? json_dumpb(piece, r->buf + r->len, room, JSON_ENCODE_ANY) : 0;
		json_decref(piece);
		if (w < 2 || w > room)
			return -ENOMEM;
		/* drop jansson's quotes around the piece */
		memmove(r->buf + r->len, r->buf + r->len + 1, w - 2);
		r->len += w - 2;
		r->s_off += n;
	}
	put(r, "\"", 1);
	r->in_string = false;
	if (r->is_key) /* the member's value follows */
		put(r, ":", 1);
	return 0;
}

/* One step outside a string: a key's value, the next member or element,
 * a closing bracket, or the end. */
static int step(struct ward_json_reader *r)
{
	if (r->pending) {
		json_t *v = r->pending;
		r->pending = NULL;
		return begin_value(r, v);
	}
	if (!r->started) {
		r->started = true;
		return begin_value(r, r->root);
	}
	if (!r->depth) {
		put(r, "\n", 1);
		r->done = true;
		return 0;
	}
	struct frame *f = &r->st[r->depth - 1];
	bool obj = json_is_object(f->v);
	if (obj ? !f->iter : f->idx >= json_array_size(f->v)) {
		put(r, obj ? "}" : "]", 1);
		r->depth--;
		return 0;
	}
	if (!f->first)
		put(r, ",", 1);
	f->first = false;
	if (!obj)
		return begin_value(r, json_array_get(f->v, f->idx++));
	const char *key = json_object_iter_key(f->iter);
	r->pending = json_object_iter_value(f->iter);
	f->iter = json_object_iter_next(f->v, f->iter);
	begin_string(r, key, strlen(key), true);
	return 0;
}

/* Fills the staging buffer: every step writes at most SLACK bytes, a
 * scalar at most 64, and a string as much as fits. */
static int fill(struct ward_json_reader *r)
{
	r->len = r->off = 0;
	while (!r->done && r->len + 64 + SLACK <= STAGE) {
		if (r->in_string) {
			int rc = escape(r);
			if (rc < 0)
				return rc;
			if (r->in_string)
				break; /* full */
			continue;
		}
		int rc = step(r);
		if (rc < 0)
			return rc;
	}
	return 0;
}

ssize_t ward_json_reader_read(struct ward_json_reader *r, char *out, size_t max)
{
	size_t n = 0;
	while (n < max) {
		if (r->off == r->len) {
			if (r->done)
				break;
			int rc = fill(r);
			if (rc < 0)
				return rc;
			if (r->off == r->len)
				break;
		}
		size_t k = r->len - r->off < max - n ? r->len - r->off : max - n;
		memcpy(out + n, r->buf + r->off, k);
		r->off += k;
		n += k;
	}
	return (ssize_t)n;
}
