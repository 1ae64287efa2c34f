/* lib/egress/tls.c — TLS interception for hosts with credential rules.
 *
 * A per-process CA (EC P-256, kept in state_dir/egress-ca/, key 0600 and
 * refused when anyone else could read it or it belongs to someone else)
 * signs a leaf certificate per host on demand (cached, bounded). The
 * sandbox's TLS ends here; the upstream's begins here and is verified
 * against the host's trust store plus the operator's ca_file, with the
 * host name checked. Between them one request head is read, rewritten with
 * the rules (egress_http_rewrite adds "Connection: close"), and the rest of
 * the connection is relayed as is: one request per intercepted connection,
 * the client reconnects for the next (every HTTP client does on
 * "Connection: close"). Runs on the calling connection thread only; every
 * wait is a poll bounded by io->idle_ms. The CA key never leaves this file.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "egress/intercept.h"
#include "base/util.h"

enum {
	LEAF_MAX = 256,            /* leaf certificates cached (LRU) */
	PEM_MAX = 1 << 20,         /* a CA file we read */
	BUNDLE_MAX = 16 << 20,     /* the host's bundle we copy */
	IDLE_DEFAULT_MS = 60000,
};
#define HOST_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define CA_DAYS 3650

struct leaf {
	char host[256];
	X509 *cert;
	time_t not_after;
	uint64_t used;
};

struct egress_tls {
	EVP_PKEY *ca_key;
	X509 *ca_cert;
	EVP_PKEY *leaf_key;     /* one key for every leaf: minting stays cheap */
	SSL_CTX *server;        /* towards sandboxes */
	SSL_CTX *upstream;      /* towards upstreams: verified */
	char dir[4096];         /* where the bundle is */
	bool tmp_dir;           /* made by us (state_dir NULL): removed on free */
	char bundle[4200];
	pthread_mutex_t mu;     /* guards cache and tick */
	struct leaf cache[LEAF_MAX];
	uint64_t tick;
};

static int ssl_error(struct ward_error *err, const char *what)
{
	char buf[256] = "";
	unsigned long e = ERR_get_error();
	if (e)
		ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	return ward_error_set(err, EPROTO, "egress", "%s%s%s", what, *buf ? ": " : "", buf);
}

static EVP_PKEY *new_p256(void)
{
	return EVP_EC_gen("P-256");
}

static bool add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
	X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	bool ok = ext && X509_add_ext(cert, ext, -1) == 1;
	X509_EXTENSION_free(ext);
	return ok;
}

static bool random_serial(X509 *cert)
{
	unsigned char b[16];
	if (RAND_bytes(b, sizeof(b)) != 1)
		return false;
	b[0] &= 0x7f;   /* positive */
	b[0] |= 0x01;   /* and 16 bytes long */
	BIGNUM *bn = BN_bin2bn(b, sizeof(b), NULL);
	bool ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert)) != NULL;
	BN_free(bn);
	return ok;
}

static X509 *make_ca(EVP_PKEY *key)
{
	X509 *c = X509_new();
	X509_NAME *n = c ? X509_get_subject_name(c) : NULL;
	if (!c || X509_set_version(c, 2) != 1 || !random_serial(c) ||
	    !X509_gmtime_adj(X509_getm_notBefore(c), -3600) ||
	    !X509_gmtime_adj(X509_getm_notAfter(c), (long)CA_DAYS * 86400) ||
	    X509_NAME_add_entry_by_txt(n, "O", MBSTRING_ASC, (const unsigned char *)"ward", -1, -1, 0) != 1 ||
	    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
				       (const unsigned char *)"ward egress interception CA", -1, -1, 0) != 1 ||
	    X509_set_issuer_name(c, n) != 1 || X509_set_pubkey(c, key) != 1 ||
	    !add_ext(c, c, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
	    !add_ext(c, c, NID_key_usage, "critical,keyCertSign,cRLSign") ||
	    !add_ext(c, c, NID_subject_key_identifier, "hash") ||
	    !add_ext(c, c, NID_authority_key_identifier, "keyid:always") ||
	    X509_sign(c, key, EVP_sha256()) <= 0) {
		X509_free(c);
		return NULL;
	}
	return c;
}

static X509 *make_leaf(const struct egress_tls *t, const char *host)
{
	unsigned char ip[16];
	bool literal = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
	char san[300];
	snprintf(san, sizeof(san), "%s:%s", literal ? "IP" : "DNS", host);
	X509 *c = X509_new();
	X509_NAME *n = c ? X509_get_subject_name(c) : NULL;
	if (!c || X509_set_version(c, 2) != 1 || !random_serial(c) ||
	    !X509_gmtime_adj(X509_getm_notBefore(c), -3600) ||
	    !X509_gmtime_adj(X509_getm_notAfter(c), 86400) ||
	    (strlen(host) <= 64 &&
	     X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)host, -1, -1, 0) != 1) ||
	    X509_set_issuer_name(c, X509_get_subject_name(t->ca_cert)) != 1 ||
	    X509_set_pubkey(c, t->leaf_key) != 1 ||
	    !add_ext(c, t->ca_cert, NID_basic_constraints, "critical,CA:FALSE") ||
	    !add_ext(c, t->ca_cert, NID_key_usage, "critical,digitalSignature") ||
	    !add_ext(c, t->ca_cert, NID_ext_key_usage, "serverAuth") ||
	    !add_ext(c, t->ca_cert, NID_subject_alt_name, san) ||
	    !add_ext(c, t->ca_cert, NID_subject_key_identifier, "hash") ||
	    !add_ext(c, t->ca_cert, NID_authority_key_identifier, "keyid:always") ||
	    X509_sign(c, t->ca_key, EVP_sha256()) <= 0) {
		X509_free(c);
		return NULL;
	}
	return c;
}

/* The leaf for host, from the cache or minted (a reference the caller
 * frees). Minting happens outside the lock. */
static X509 *leaf_for(struct egress_tls *t, const char *host)
{
	time_t now = time(NULL);
	pthread_mutex_lock(&t->mu);
	for (size_t i = 0; i < LEAF_MAX; i++) {
		struct leaf *l = &t->cache[i];
		if (l->cert && strcmp(l->host, host) == 0 && l->not_after - 3600 > now) {
			l->used = ++t->tick;
			X509_up_ref(l->cert);
			X509 *c = l->cert;
			pthread_mutex_unlock(&t->mu);
			return c;
		}
	}
	pthread_mutex_unlock(&t->mu);
	X509 *c = make_leaf(t, host);
	if (!c)
		return NULL;
	pthread_mutex_lock(&t->mu);
	struct leaf *victim = &t->cache[0];
	for (size_t i = 0; i < LEAF_MAX; i++) {
		if (!t->cache[i].cert || strcmp(t->cache[i].host, host) == 0) {
			victim = &t->cache[i];
			break;
		}
		if (t->cache[i].used < victim->used)
			victim = &t->cache[i];
	}
	X509_free(victim->cert);
	ward_strlcpy(victim->host, host, sizeof(victim->host));
	X509_up_ref(c);
	victim->cert = c;
	victim->not_after = now + 86400;
	victim->used = ++t->tick;
	pthread_mutex_unlock(&t->mu);
	return c;
}

/* Writes data to dir/name through a temporary file and a rename. */
static int write_atomic(const char *dir, const char *name, const void *data, size_t len,
			mode_t mode, struct ward_error *err)
{
	char tmp[4300], path[4300];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s/.%s.%d.tmp", dir, name, (int)getpid());
	unlink(tmp);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return ward_error_set(err, errno, "egress", "unable to create '%s'", tmp);
	int r = ward_write_all(fd, data, len);
	if (r == 0 && (fchmod(fd, mode) < 0 || fsync(fd) < 0))
		r = -errno;
	close(fd);
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		unlink(tmp);
		return ward_error_set(err, -r, "egress", "unable to write '%s'", path);
	}
	return 0;
}

static char *pem_of(int (*write)(BIO *, void *), void *obj, size_t *len)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *out = NULL, *p;
	if (b && write(b, obj) == 1) {
		long n = BIO_get_mem_data(b, &p);
		out = n > 0 ? malloc((size_t)n) : NULL;
		if (out) {
			memcpy(out, p, (size_t)n);
			*len = (size_t)n;
		}
	}
	BIO_free(b);
	return out;
}

static int write_cert(BIO *b, void *c) { return PEM_write_bio_X509(b, c); }
static int write_key(BIO *b, void *k)
{
	return PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL);
}

/* Reads a PEM file; the key must be ours and private. */
static int read_pem(const char *path, bool secret, char **out, size_t *len, struct ward_error *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return ward_error_set(err, errno, "egress", "unable to open '%s'", path);
	struct stat st;
	int r = fstat(fd, &st) < 0 ? ward_error_set(err, errno, "egress", "unable to stat '%s'", path) : 0;
	if (r == 0 && !S_ISREG(st.st_mode))
		r = ward_error_set(err, EINVAL, "egress", "'%s' is not a regular file", path);
	else if (r == 0 && secret && st.st_uid != geteuid())
		r = ward_error_set(err, EPERM, "egress", "CA key '%s' is owned by uid %u, not by uid %u",
				   path, (unsigned)st.st_uid, (unsigned)geteuid());
	else if (r == 0 && secret && (st.st_mode & 077))
		r = ward_error_set(err, EPERM, "egress",
				   "CA key '%s' is readable by others (mode %04o); expected 0600",
				   path, (unsigned)(st.st_mode & 07777));
	if (r == 0 && st.st_size > PEM_MAX)
		r = ward_error_set(err, EFBIG, "egress", "'%s' is larger than 1 MiB", path);
	/* read from the fd that was checked, not the path again */
	char *buf = r == 0 ? malloc((size_t)st.st_size + 1) : NULL;
	if (r == 0 && !buf)
		r = ward_error_set(err, ENOMEM, "egress", "out of memory");
	ssize_t n = buf ? ward_read_full(fd, buf, (size_t)st.st_size) : 0;
	if (buf && n < 0)
		r = ward_error_set(err, (int)-n, "egress", "unable to read '%s'", path);
	close(fd);
	if (r < 0) {
		free(buf);
		return r;
	}
	buf[n] = '\0';
	*out = buf;
	*len = (size_t)n;
	return 0;
}

static int load_ca(struct egress_tls *t, const char *key_path, const char *cert_path,
		   struct ward_error *err)
{
	_cleanup_free_ char *kp = NULL, *cp = NULL;
	size_t kl, cl;
	int r = read_pem(key_path, true, &kp, &kl, err);
	if (r < 0 || (r = read_pem(cert_path, false, &cp, &cl, err)) < 0)
		return r;
	BIO *kb = BIO_new_mem_buf(kp, (int)kl), *cb = BIO_new_mem_buf(cp, (int)cl);
	t->ca_key = kb ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
	t->ca_cert = cb ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
	BIO_free(kb);
	BIO_free(cb);
	OPENSSL_cleanse(kp, kl);
	if (!t->ca_key || !t->ca_cert || X509_check_private_key(t->ca_cert, t->ca_key) != 1)
		return ssl_error(err, "the interception CA in the state directory is unusable "
				      "(remove egress-ca/ to make a new one)");
	return 0;
}

static int create_ca(struct egress_tls *t, bool persist, struct ward_error *err)
{
	t->ca_key = new_p256();
	t->ca_cert = t->ca_key ? make_ca(t->ca_key) : NULL;
	if (!t->ca_cert)
		return ssl_error(err, "unable to create the interception CA");
	if (!persist)
		return 0;
	size_t kl = 0, cl = 0;
	char *kp = pem_of(write_key, t->ca_key, &kl);
	_cleanup_free_ char *cp = pem_of(write_cert, t->ca_cert, &cl);
	int r = kp && cp ? 0 : ward_error_set(err, ENOMEM, "egress", "unable to encode the CA");
	/* the key first: a certificate is never there without its key */
	if (r == 0)
		r = write_atomic(t->dir, "ca-key.pem", kp, kl, 0600, err);
	if (r == 0)
		r = write_atomic(t->dir, "ca.pem", cp, cl, 0644, err);
	if (kp)
		OPENSSL_cleanse(kp, kl);
	free(kp);
	return r;
}

static int setup_ca(struct egress_tls *t, const char *state_dir, struct ward_error *err)
{
	if (!state_dir) {
		const char *tmp = getenv("TMPDIR");
		snprintf(t->dir, sizeof(t->dir), "%s/ward-egress-XXXXXX", tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(t->dir))
			return ward_error_set(err, errno, "egress", "unable to create a directory in '%s'",
					      tmp && *tmp ? tmp : "/tmp");
		t->tmp_dir = true;
		return create_ca(t, false, err);
	}
	if ((size_t)snprintf(t->dir, sizeof(t->dir), "%s/egress-ca", state_dir) >= sizeof(t->dir))
		return ward_error_set(err, ENAMETOOLONG, "egress", "state directory '%s' too long", state_dir);
	if (mkdir(t->dir, 0700) < 0 && errno != EEXIST)
		return ward_error_set(err, errno, "egress", "unable to create '%s'", t->dir);
	char key[4200], cert[4200];
	snprintf(key, sizeof(key), "%s/ca-key.pem", t->dir);
	snprintf(cert, sizeof(cert), "%s/ca.pem", t->dir);
	if (access(key, F_OK) == 0)
		return load_ca(t, key, cert, err);
	if (errno != ENOENT)
		return ward_error_set(err, errno, "egress", "unable to access '%s'", key);
	return create_ca(t, true, err);
}

/* The bundle sandboxes trust: the host's store, then our CA. */
static int write_bundle(struct egress_tls *t, struct ward_error *err)
{
	_cleanup_free_ char *host = NULL, *ca = NULL;
	size_t hl = 0, cl = 0;
	int r = ward_read_file(HOST_BUNDLE, BUNDLE_MAX, &host, &hl);
	if (r < 0 && r != -ENOENT)
		return ward_error_set(err, -r, "egress", "unable to read '%s'", HOST_BUNDLE);
	ca = pem_of(write_cert, t->ca_cert, &cl);
	char *all = ca ? malloc(hl + 1 + cl) : NULL;
	if (!all)
		return ward_error_set(err, ENOMEM, "egress", "unable to build the CA bundle");
	if (hl)
		memcpy(all, host, hl);
	size_t n = hl;
	if (hl && host[hl - 1] != '\n')
		all[n++] = '\n';
	memcpy(all + n, ca, cl);
	r = write_atomic(t->dir, "bundle.pem", all, n + cl, 0644, err);
	free(all);
	snprintf(t->bundle, sizeof(t->bundle), "%s/bundle.pem", t->dir);
	return r;
}

static int setup_ctx(struct egress_tls *t, const char *ca_file, struct ward_error *err)
{
	t->server = SSL_CTX_new(TLS_server_method());
	t->upstream = SSL_CTX_new(TLS_client_method());
	t->leaf_key = new_p256();
	if (!t->server || !t->upstream || !t->leaf_key ||
	    SSL_CTX_set_min_proto_version(t->server, TLS1_2_VERSION) != 1 ||
	    SSL_CTX_set_min_proto_version(t->upstream, TLS1_2_VERSION) != 1)
		return ssl_error(err, "unable to set up TLS");
	SSL_CTX_set_verify(t->upstream, SSL_VERIFY_PEER, NULL);
	/* a peer that closes without close_notify ends the relay like one
	 * that sends it: the client frames its own response */
	SSL_CTX_set_options(t->server, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION |
					       SSL_OP_NO_TICKET);
	/* no resumption towards sandboxes: one connection, one request, and
	 * no ticket key to keep */
	SSL_CTX_set_num_tickets(t->server, 0);
	SSL_CTX_set_session_cache_mode(t->server, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_options(t->upstream, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
	if (SSL_CTX_set_default_verify_paths(t->upstream) != 1)
		return ssl_error(err, "unable to load the host's trust store");
	if (ca_file && SSL_CTX_load_verify_locations(t->upstream, ca_file, NULL) != 1) {
		int r = ssl_error(err, "unable to load the CA file");
		ward_error_field(err, "egress_ca");
		char m[WARD_ERROR_MSG_MAX];
		snprintf(m, sizeof(m), "egress_ca: '%.80s': %.280s", ca_file, err->message);
		ward_strlcpy(err->message, m, sizeof(err->message));
		return r;
	}
	static const unsigned char alpn[] = "\x08http/1.1";
	SSL_CTX_set_alpn_protos(t->upstream, alpn, sizeof(alpn) - 1);
	return 0;
}

int egress_tls_new(const char *state_dir, const char *ca_file, struct egress_tls **out,
		   struct ward_error *err)
{
	*out = NULL;
	struct egress_tls *t = calloc(1, sizeof(*t));
	if (!t)
		return ward_error_set(err, ENOMEM, "egress", "out of memory");
	pthread_mutex_init(&t->mu, NULL);
	int r = setup_ca(t, state_dir, err);
	if (r == 0)
		r = setup_ctx(t, ca_file, err);
	if (r == 0)
		r = write_bundle(t, err);
	if (r < 0) {
		egress_tls_free(t);
		return r;
	}
	*out = t;
	return 0;
}

void egress_tls_free(struct egress_tls *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < LEAF_MAX; i++)
		X509_free(t->cache[i].cert);
	SSL_CTX_free(t->server);
	SSL_CTX_free(t->upstream);
	EVP_PKEY_free(t->leaf_key);
	EVP_PKEY_free(t->ca_key);
	X509_free(t->ca_cert);
	if (t->tmp_dir) {
		if (*t->bundle)
			unlink(t->bundle);
		rmdir(t->dir);
	}
	pthread_mutex_destroy(&t->mu);
	free(t);
}

const char *egress_tls_bundle(const struct egress_tls *t)
{
	return t && *t->bundle ? t->bundle : NULL;
}

/* One intercepted connection. */
struct conn {
	SSL *ssl[2];            /* [0] the sandbox's side, [1] the upstream's */
	int fd[2];
	int idle_ms;
	const struct egress_io *io;
};

/* *why for refusals that carry a detail: per thread, valid until the
 * thread's next egress_tls_intercept. */
static __thread char why_buf[200];

static int poll_one(int fd, short ev, int idle_ms)
{
	struct pollfd p = { fd, ev, 0 };
	int n;
	do
		n = poll(&p, 1, idle_ms);
	while (n < 0 && errno == EINTR);
	return n > 0 ? 0 : n == 0 ? -ETIMEDOUT : -errno;
}

/* After an SSL call returned r <= 0: waits for what it wants. */
static int wait_ssl(SSL *s, int fd, int r, int idle_ms)
{
	int e = SSL_get_error(s, r);
	if (e == SSL_ERROR_WANT_READ)
		return poll_one(fd, POLLIN, idle_ms);
	if (e == SSL_ERROR_WANT_WRITE)
		return poll_one(fd, POLLOUT, idle_ms);
	return e == SSL_ERROR_ZERO_RETURN ? -ECONNRESET : -EPROTO;
}

static int handshake(SSL *s, int fd, bool server, int idle_ms)
{
	for (;;) {
		ERR_clear_error();
		int r = server ? SSL_accept(s) : SSL_connect(s);
		if (r == 1)
			return 0;
		if ((r = wait_ssl(s, fd, r, idle_ms)) < 0)
			return r;
	}
}

static int ssl_write_all(SSL *s, int fd, const char *buf, size_t len, int idle_ms)
{
	while (len > 0) {
		ERR_clear_error();
		int r = SSL_write(s, buf, len > 1 << 30 ? 1 << 30 : (int)len);
		if (r > 0) {
			buf += r;
			len -= (size_t)r;
		} else if ((r = wait_ssl(s, fd, r, idle_ms)) < 0) {
			return r;
		}
	}
	return 0;
}

static int count(struct conn *k, bool out, size_t n, const char **why)
{
	int r = k->io && k->io->count ? k->io->count(k->io->ctx, out, n) : 0;
	if (r != 0)
		*why = "connection stopped (a limit was reached or the sandbox detached)";
	return r == 0 ? 0 : r < 0 ? r : -ECANCELED;
}

static int connect_upstream(struct egress_tls *t, struct conn *k, const char *host,
			    const char **why)
{
	unsigned char ip[16];
	bool literal = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
	SSL *u = k->ssl[1] = SSL_new(t->upstream);
	if (!u)
		return -ENOMEM;
	X509_VERIFY_PARAM *vp = SSL_get0_param(u);
	X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if ((!literal && SSL_set_tlsext_host_name(u, host) != 1) ||
	    (literal ? X509_VERIFY_PARAM_set1_ip_asc(vp, host) : X509_VERIFY_PARAM_set1_host(vp, host, 0)) != 1 ||
	    SSL_set_fd(u, k->fd[1]) != 1) {
		*why = "upstream TLS setup failed";
		return -EPROTO;
	}
	int r = handshake(u, k->fd[1], false, k->idle_ms);
	if (r == 0)
		return 0;
	long v = SSL_get_verify_result(u);
	if (r == -ETIMEDOUT) {
		*why = "upstream TLS handshake timed out";
	} else if (v != X509_V_OK) {
		snprintf(why_buf, sizeof(why_buf), "upstream certificate not trusted: %s",
			 X509_verify_cert_error_string(v));
		*why = why_buf;
		r = -EPROTO;
	} else {
		*why = "upstream TLS handshake failed";
	}
	return r;
}

static int accept_client(struct egress_tls *t, struct conn *k, const char *host, const char **why)
{
	X509 *leaf = leaf_for(t, host);
	SSL *c = k->ssl[0] = leaf ? SSL_new(t->server) : NULL;
	int ok = c && SSL_use_certificate(c, leaf) == 1 && SSL_use_PrivateKey(c, t->leaf_key) == 1 &&
		 SSL_set_fd(c, k->fd[0]) == 1;
	X509_free(leaf);
	if (!ok) {
		*why = "unable to make a certificate for the host";
		return -ENOMEM;
	}
	int r = handshake(c, k->fd[0], true, k->idle_ms);
	if (r < 0)
		*why = r == -ETIMEDOUT ? "sandbox TLS handshake timed out" : "sandbox TLS handshake failed";
	return r;
}

/* Reads one request head from the sandbox. 0 (*len bytes in buf, head
 * parsed), 1 when the sandbox closed first, or a negative errno. */
static int read_head(struct conn *k, char *buf, size_t *len, struct egress_http_req *req,
		     const char **why)
{
	*len = 0;
	for (;;) {
		ERR_clear_error();
		int r = SSL_read(k->ssl[0], buf + *len, (int)(EGRESS_HEAD_MAX - *len));
		if (r > 0) {
			*len += (size_t)r;
			ssize_t h = egress_http_parse(buf, *len, req, why);
			if (h != 0)
				return h > 0 ? 0 : (int)h;
			continue;
		}
		int e = SSL_get_error(k->ssl[0], r);
		if (e == SSL_ERROR_ZERO_RETURN)
			return 1;
		if ((r = wait_ssl(k->ssl[0], k->fd[0], r, k->idle_ms)) < 0) {
			*why = r == -ETIMEDOUT ? "no request from the sandbox in time" : "TLS error from the sandbox";
			return r;
		}
	}
}

static void refuse(struct conn *k, const char *host, const char *why)
{
	char body[512], head[768];
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	unsigned port = 443;
	if (getpeername(k->fd[1], (struct sockaddr *)&ss, &sl) == 0)
		port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						      : ((struct sockaddr_in *)&ss)->sin_port);
	bool v6 = strchr(host, ':') != NULL;
	int bl = snprintf(body, sizeof(body), "ward egress: refused %s%s%s:%u: %s\n", v6 ? "[" : "",
			  host, v6 ? "]" : "", port, why);
	int hl = snprintf(head, sizeof(head),
			  "HTTP/1.1 400 Bad Request\r\nX-Ward-Egress: denied\r\nContent-Type: text/plain\r\n"
			  "Content-Length: %d\r\nConnection: close\r\n\r\n%s", bl, body);
	ssl_write_all(k->ssl[0], k->fd[0], head, (size_t)hl, k->idle_ms);
	SSL_shutdown(k->ssl[0]);
}

/* Relays both ways until one side closes. */
static int relay(struct conn *k, char *buf, size_t size, const char **why)
{
	short want[2] = { POLLIN, POLLIN };
	for (;;) {
		bool progress = false;
		for (int d = 0; d < 2; d++) {
			ERR_clear_error();
			int r = SSL_read(k->ssl[d], buf, (int)size);
			if (r > 0) {
				int c = count(k, d == 0, (size_t)r, why);
				if (c < 0)
					return c;
				if ((c = ssl_write_all(k->ssl[!d], k->fd[!d], buf, (size_t)r, k->idle_ms)) < 0) {
					*why = d ? "unable to write to the sandbox" : "unable to write to the upstream";
					return c;
				}
				progress = true;
				want[d] = POLLIN;
				continue;
			}
			int e = SSL_get_error(k->ssl[d], r);
			if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
				want[d] = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
				continue;
			}
			if (e == SSL_ERROR_ZERO_RETURN) {
				SSL_shutdown(k->ssl[!d]);   /* pass the close on */
				return 0;
			}
			*why = d ? "TLS error from the upstream" : "TLS error from the sandbox";
			return -EPROTO;
		}
		if (progress)
			continue;
		struct pollfd p[2] = { { k->fd[0], want[0], 0 }, { k->fd[1], want[1], 0 } };
		int n = poll(p, 2, k->idle_ms);
		if (n == 0) {
			*why = "idle timeout";
			return -ETIMEDOUT;
		}
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

static int serve_one(struct egress_tls *t, struct conn *k, const char *host,
		     const struct ward_egress_credential *const *rules, size_t n_rules,
		     const char **why, const char **applied)
{
	(void)t;
	enum { BUF = EGRESS_HEAD_MAX };
	_cleanup_free_ char *buf = malloc(BUF);
	if (!buf)
		return -ENOMEM;
	size_t len;
	struct egress_http_req req;
	int r = read_head(k, buf, &len, &req, why);
	if (r == -EINVAL)
		refuse(k, host, *why);
	if (r != 0)
		return r > 0 ? 0 : r;
	/* the rules are chosen by the name the connection was allowed for:
	 * a Host naming another host would take that host's secret here */
	if (req.connect || strcasecmp(req.host, host) != 0) {
		*why = req.connect ? "CONNECT inside an intercepted connection"
				   : "Host header disagrees with the TLS server name";
		refuse(k, host, *why);
		return -EINVAL;
	}
	_cleanup_free_ char *head = NULL;
	size_t head_len;
	if ((r = egress_http_rewrite(buf, &req, rules, n_rules, &head, &head_len, applied)) < 0) {
		*why = "unable to rewrite the request head";
		return r;
	}
	if ((r = count(k, true, head_len + len - req.head_len, why)) < 0)
		return r;
	if ((r = ssl_write_all(k->ssl[1], k->fd[1], head, head_len, k->idle_ms)) < 0 ||
	    (r = ssl_write_all(k->ssl[1], k->fd[1], buf + req.head_len, len - req.head_len, k->idle_ms)) < 0) {
		*why = "unable to write to the upstream";
		return r;
	}
	return relay(k, buf, BUF, why);
}

int egress_tls_intercept(struct egress_tls *t, int client_fd, int upstream_fd,
			 const char *host, const struct ward_egress_credential *const *rules,
			 size_t n_rules, const struct egress_io *io, const char **why,
			 const char **applied)
{
	static const char none[] = "";
	*why = none;
	*applied = NULL;
	struct conn k = { { NULL, NULL }, { client_fd, upstream_fd },
			  io && io->idle_ms > 0 ? io->idle_ms : IDLE_DEFAULT_MS, io };
	int flags[2] = { fcntl(client_fd, F_GETFL), fcntl(upstream_fd, F_GETFL) };
	if (flags[0] < 0 || flags[1] < 0 ||
	    fcntl(client_fd, F_SETFL, flags[0] | O_NONBLOCK) < 0 ||
	    fcntl(upstream_fd, F_SETFL, flags[1] | O_NONBLOCK) < 0) {
		*why = "bad file descriptor";
		return -EBADF;
	}
	/* OpenSSL writes with write(2): a peer that went away would raise
	 * SIGPIPE in the whole process. Blocked on this thread, and a
	 * SIGPIPE our writes left pending is taken before unblocking. */
	sigset_t pipe_set, old_mask, pending;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	sigpending(&pending);
	bool was_pending = sigismember(&pending, SIGPIPE) == 1;
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
	/* the upstream first: a sandbox whose upstream is not trusted sees
	 * its own handshake fail, not a connection that dies later */
	int r = connect_upstream(t, &k, host, why);
	if (r == 0)
		r = accept_client(t, &k, host, why);
	if (r == 0)
		r = serve_one(t, &k, host, rules, n_rules, why, applied);
	if (!*why)
		*why = none;
	SSL_free(k.ssl[0]);
	SSL_free(k.ssl[1]);
	ERR_clear_error();
	fcntl(client_fd, F_SETFL, flags[0]);
	fcntl(upstream_fd, F_SETFL, flags[1]);
	static const struct timespec zero = { 0, 0 };
	if (!was_pending && sigismember(&old_mask, SIGPIPE) != 1)
		while (sigtimedwait(&pipe_set, NULL, &zero) == SIGPIPE)
			;
	pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
	return r;
}
