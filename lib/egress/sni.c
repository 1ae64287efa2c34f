/* lib/egress/sni.c — the server name of a TLS ClientHello.
 *
 * Reads the first TLS record only: a handshake record (0x16, version 0x0301
 * to 0x0304) holding a ClientHello, then session id, cipher suites and
 * compression methods are skipped and the extensions walked for
 * server_name / host_name. Every length is checked against the structure
 * that encloses it, the record, and the bytes at hand, in that order, so a
 * lie in a length is -EINVAL and a short buffer is -EAGAIN. A hello that
 * spans records is read as far as the first record goes: if the SNI is not
 * in it, -EINVAL (every client we know of sends a hello far smaller than a
 * record). Never allocates; reads at most len bytes.
 */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "egress/intercept.h"
#include "base/util.h"

enum {
	REC_HDR = 5,              /* type, version, length */
	REC_MAX = 16384 + 2048,   /* TLSCiphertext bound (RFC 8446 5.2) */
	HS_HDR = 4,               /* type, 24-bit length */
	EXT_SERVER_NAME = 0,
	NAME_HOST = 0,
};

struct cur {
	const unsigned char *buf;
	size_t len;      /* bytes at hand */
	size_t rec_end;  /* end of the first record */
	size_t pos;
};

/* Checks that n bytes at c->pos lie inside the structure ending at `end`,
 * the first record, and the bytes at hand. */
static int need(const struct cur *c, size_t n, size_t end)
{
	if (c->pos + n > end)
		return -EINVAL;   /* a length that overruns its enclosing structure */
	if (c->pos + n > c->rec_end)
		return -EINVAL;   /* the hello continues in another record */
	if (c->pos + n > c->len)
		return -EAGAIN;
	return 0;
}

static size_t get(const struct cur *c, size_t at, size_t n)
{
	size_t v = 0;
	for (size_t i = 0; i < n; i++)
		v = v << 8 | c->buf[at + i];
	return v;
}

/* Skips a vector with an n-byte length prefix inside `end`. */
static int skip_vec(struct cur *c, size_t n, size_t end, size_t min, size_t max)
{
	int r = need(c, n, end);
	if (r < 0)
		return r;
	size_t l = get(c, c->pos, n);
	if (l < min || l > max)
		return -EINVAL;
	c->pos += n;
	if ((r = need(c, l, end)) < 0)
		return r;
	c->pos += l;
	return 0;
}

/* The server_name extension's body [c->pos, end): one host_name. */
static int read_server_name(struct cur *c, size_t end, char *name, size_t name_len)
{
	int r = need(c, 2, end);
	if (r < 0)
		return r;
	size_t list_end = c->pos + 2 + get(c, c->pos, 2);
	if (list_end != end)
		return -EINVAL;
	c->pos += 2;
	if ((r = need(c, 3, end)) < 0)
		return r;
	if (c->buf[c->pos] != NAME_HOST)
		return -EINVAL;
	size_t n = get(c, c->pos + 1, 2);
	c->pos += 3;
	if ((r = need(c, n, end)) < 0)
		return r;
	if (c->pos + n != end)
		return -EINVAL;   /* a second entry: servers refuse it, so do we */
	if (n == 0 || n > 255 || n >= name_len)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = c->buf[c->pos + i];
		if (!isalnum(ch) && ch != '.' && ch != '-' && ch != '_')
			return -EINVAL;
		name[i] = (char)tolower(ch);
	}
	name[n] = '\0';
	c->pos = end;
	return 1;
}

/* Walks the extensions block [c->pos, end). */
static int walk_extensions(struct cur *c, size_t end, char *name, size_t name_len)
{
	int found = 0, r;
	while (c->pos < end) {
		if ((r = need(c, 4, end)) < 0)
			return found && r == -EINVAL && c->pos + 4 > c->rec_end ? found : r;
		size_t type = get(c, c->pos, 2), l = get(c, c->pos + 2, 2);
		c->pos += 4;
		size_t ext_end = c->pos + l;
		if (ext_end > end)
			return -EINVAL;
		if (type != EXT_SERVER_NAME) {
			if ((r = need(c, l, end)) < 0)
				return found && r == -EINVAL && ext_end > c->rec_end ? found : r;
			c->pos = ext_end;
			continue;
		}
		if (found)
			return -EINVAL;   /* two server_name extensions */
		if ((r = read_server_name(c, ext_end, name, name_len)) < 0)
			return r;
		found = 1;
	}
	return found;
}

int egress_sni_parse(const unsigned char *buf, size_t len, char *name, size_t name_len)
{
	if (name_len > 0)
		name[0] = '\0';
	/* the record header, judged byte by byte as it arrives */
	if (len >= 1 && buf[0] != 0x16)
		return -EINVAL;
	if (len >= 2 && buf[1] != 0x03)
		return -EINVAL;
	if (len >= 3 && (buf[2] < 0x01 || buf[2] > 0x04))
		return -EINVAL;
	if (len < REC_HDR)
		return -EAGAIN;
	size_t rec_len = (size_t)buf[3] << 8 | buf[4];
	if (rec_len < HS_HDR || rec_len > REC_MAX)
		return -EINVAL;
	struct cur c = { buf, len, REC_HDR + rec_len, REC_HDR };
	if (len > REC_HDR && buf[REC_HDR] != 1)
		return -EINVAL;   /* not a ClientHello */
	if (len < REC_HDR + HS_HDR)
		return -EAGAIN;
	size_t hs_end = REC_HDR + HS_HDR + get(&c, REC_HDR + 1, 3);
	c.pos = REC_HDR + HS_HDR;
	int r;
	/* legacy_version, random */
	if ((r = need(&c, 2 + 32, hs_end)) < 0)
		return r;
	c.pos += 2 + 32;
	if ((r = skip_vec(&c, 1, hs_end, 0, 32)) < 0)           /* session id */
		return r;
	if ((r = skip_vec(&c, 2, hs_end, 2, 65534)) < 0)        /* cipher suites */
		return r;
	if ((r = skip_vec(&c, 1, hs_end, 1, 255)) < 0)          /* compression */
		return r;
	if (c.pos == hs_end)
		return 0;                                           /* no extensions */
	if ((r = need(&c, 2, hs_end)) < 0)
		return r;
	size_t ext_end = c.pos + 2 + get(&c, c.pos, 2);
	if (ext_end != hs_end)
		return -EINVAL;
	c.pos += 2;
	return walk_extensions(&c, ext_end, name, name_len);
}
