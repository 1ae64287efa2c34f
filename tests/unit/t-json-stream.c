/* tests/unit/t-json-stream.c — a JSON tree read piece by piece
 * (lib/base/json-stream.c) is byte for byte json_dumps(JSON_COMPACT) and a
 * newline, whatever the size of the pieces: nesting, empty containers,
 * numbers, escapes of every control character, UTF-8, keys that need
 * escaping, and strings far longer than the reader's staging buffer. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/json-stream.h"
#include "tap.h"

static char *read_all(json_t *v, size_t piece, size_t *len)
{
	struct ward_json_reader *r = ward_json_reader_new(v);
	size_t cap = 1 << 16, n = 0;
	char *out = malloc(cap);
	ssize_t k;
	while (r && out) {
		if (n + piece > cap) {
			cap = 2 * (n + piece);
			char *no = realloc(out, cap);
			if (!no)
				break;
			out = no;
		}
		if ((k = ward_json_reader_read(r, out + n, piece)) <= 0)
			break;
		n += (size_t)k;
	}
	ward_json_reader_free(r);
	*len = n;
	return out;
}

static void same(json_t *v, const char *name)
{
	char *want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	size_t wl = strlen(want);
	static const size_t pieces[] = { 1, 7, 4096, 1 << 20 };
	for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
		size_t n;
		char *got = read_all(v, pieces[i], &n);
		ok(got && n == wl + 1 && memcmp(got, want, wl) == 0 && got[wl] == '\n',
		   "%s, in pieces of %zu: as json_dumps (%zu bytes)", name, pieces[i], wl);
		free(got);
	}
	free(want);
}

int main(void)
{
	json_error_t je;
	json_t *v = json_loads("{\"a\":1,\"b\":[true,false,null,1.5,-2,1e300,\"x\"],\"c\":{},"
			       "\"d\":[],\"e\":{\"f\":{\"g\":[[[]]]}},\"\\u00e9t\\u00e9\":\"\\u2028\"}",
			       0, &je);
	same(v, "nesting, scalars, UTF-8");
	json_decref(v);
	char ctl[64];
	for (int i = 0; i < 32; i++)
		ctl[i] = (char)(i + 1 == 32 ? 0x7f : i + 1);
	memcpy(ctl + 32, "\"\\/abc\xc3\xa9", 8);
	v = json_pack("{s:s%, s%:i}", "ctl", ctl, (size_t)40, "k\"\n\x01y", (size_t)5, 7);
	same(v, "every control character, quotes, backslashes; a key to escape");
	json_decref(v);
	v = json_stringn("a\0b", 3);
	same(v, "a NUL inside a string");
	json_decref(v);
	size_t big = 3 * 65536 + 11;
	char *b = malloc(big);
	for (size_t i = 0; i < big; i++)
		b[i] = i % 3 == 0 ? '\x01' : i % 3 == 1 ? 'x' : '\n';
	v = json_pack("{s:s%, s:[s%, {s:s%}]}", "stdout", b, big, "outputs", b, big, "text", b, big);
	same(v, "strings far over the staging buffer");
	json_decref(v);
	free(b);
	v = json_integer(5);
	same(v, "a bare scalar");
	json_decref(v);
	return tap_done();
}
