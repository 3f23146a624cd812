/* SPDX-License-Identifier: BSD-3-Clause */
/* session.c -- see session.h. OpenSSL 3 over a caller's non-blocking socket. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "platform.h"
#include "session.h"

struct hl_tls_ctx {
    int      refs;          /* atomic: a client and its keepalives' private clients share it */
    SSL_CTX *ssl_ctx;
    char    *server_name;   /* NULL: each session's host */
    int      verify;
    int      has_cert;
};

struct hl_tls {
    SSL  *ssl;
    int   fd;
    int   sys_errno;       /* errno of a failed send/recv: OpenSSL does not keep it */
    int   eof;             /* recv returned 0 */
    int   first_byte;      /* the first byte the server sent (-1: none yet): TLS or not */
    int   cert_requested;  /* the server asked for a client certificate */
    int   has_cert;        /* and we had one to give */
    int   done;            /* handshake finished */
    int   answered;        /* application data has arrived since */
    int   broken;          /* a fatal error: no more I/O, no close_notify */
    pid_t pid;             /* the process that made it: a forked child's copy sends nothing */
    char  err[256];
};

/* ---- once per process ---- */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static BIO_METHOD *bio_method;   /* kept for the life of the process */

static int  bio_write(BIO *b, const char *buf, int len);
static int  bio_read(BIO *b, char *buf, int len);
static long bio_ctrl(BIO *b, int cmd, long num, void *ptr);

/* Our own socket BIO rather than OpenSSL's: its writes must use MSG_NOSIGNAL (a library may
 * not change the process's SIGPIPE disposition), and its reads note the server's first byte
 * and EOF, which turn a cryptic "wrong version number" into "not a TLS server". */
static void tls_lib_init(void)
{
    BIO_METHOD *m;
    int type = BIO_get_new_index();
    if (OPENSSL_init_ssl(0, NULL) != 1 || type < 0) return;
    m = BIO_meth_new(type | BIO_TYPE_SOURCE_SINK, "hilock socket");
    if (m && BIO_meth_set_write(m, bio_write) && BIO_meth_set_read(m, bio_read) &&
        BIO_meth_set_ctrl(m, bio_ctrl)) {
        bio_method = m;
        return;
    }
    BIO_meth_free(m);
}

/* ---- the socket BIO ---- */

static int bio_write(BIO *b, const char *buf, int len)
{
    struct hl_tls *t = BIO_get_data(b);
    ssize_t w;
    BIO_clear_retry_flags(b);
    do w = send(t->fd, buf, (size_t)len, HL_PLAT_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    if (w >= 0) return (int)w;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        BIO_set_retry_write(b);
    else
        t->sys_errno = errno;
    return -1;
}

static int bio_read(BIO *b, char *buf, int len)
{
    struct hl_tls *t = BIO_get_data(b);
    ssize_t r;
    BIO_clear_retry_flags(b);
    do r = recv(t->fd, buf, (size_t)len, 0);
    while (r < 0 && errno == EINTR);
    if (r > 0 && t->first_byte < 0) t->first_byte = (unsigned char)buf[0];
    if (r >= 0) {
        t->eof = r == 0;
        return (int)r;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        BIO_set_retry_read(b);
    else
        t->sys_errno = errno;
    return -1;
}

/* OpenSSL flushes after each handshake flight (must succeed: nothing is buffered here) and
 * asks BIO_eof after a read of 0 to tell an EOF from a failure. */
static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    struct hl_tls *t = BIO_get_data(b);
    (void)num;
    (void)ptr;
    if (cmd == BIO_CTRL_FLUSH) return 1;
    if (cmd == BIO_CTRL_EOF) return t && t->eof;
    return 0;
}

/* ---- the context ---- */

static void set_err(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    if (!err || !len) return;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}

/* The earliest error in OpenSSL's queue, in words (a missing file is the system's own
 * "No such file or directory"), then the queue emptied. */
static const char *ossl_why(char *buf, size_t len)
{
    unsigned long e = ERR_peek_error();
    const char *s = NULL;
    if (e && ERR_SYSTEM_ERROR(e))
        s = strerror(ERR_GET_REASON(e));
    else if (e)
        s = ERR_reason_error_string(e);
    if (!s && e) {
        ERR_error_string_n(e, buf, len);
        s = buf;
    }
    ERR_clear_error();
    return s ? s : "unknown error";
}

/* A passphrase prompt on the terminal would block a library: an encrypted key fails, and
 * the error says so (*asked). */
static int no_passphrase(char *buf, int size, int rw, void *asked)
{
    (void)buf, (void)size, (void)rw;
    *(int *)asked = 1;
    return 0;
}

/* The trust store: the given CA file and/or directory, else the system's. A directory is
 * read lazily by OpenSSL (a wrong one would only show as "unable to get local issuer
 * certificate" later), so it is checked here. */
static int load_trust(SSL_CTX *s, const hl_tls_config *cfg, char *err, size_t len)
{
    char buf[256];
    struct stat st;
    if (cfg->ca_path && stat(cfg->ca_path, &st) != 0) {
        set_err(err, len, "TLS: tls_ca_path %s: %s", cfg->ca_path, strerror(errno));
        return -1;
    }
    if (cfg->ca_path && !S_ISDIR(st.st_mode)) {
        set_err(err, len, "TLS: tls_ca_path %s: not a directory", cfg->ca_path);
        return -1;
    }
    if (cfg->ca_file && SSL_CTX_load_verify_file(s, cfg->ca_file) != 1) {
        set_err(err, len, "TLS: tls_ca_file %s: %s", cfg->ca_file, ossl_why(buf, sizeof buf));
        return -1;
    }
    if (cfg->ca_path && SSL_CTX_load_verify_dir(s, cfg->ca_path) != 1) {
        set_err(err, len, "TLS: tls_ca_path %s: %s", cfg->ca_path, ossl_why(buf, sizeof buf));
        return -1;
    }
    if (!cfg->ca_file && !cfg->ca_path && SSL_CTX_set_default_verify_paths(s) != 1) {
        set_err(err, len, "TLS: the system trust store: %s", ossl_why(buf, sizeof buf));
        return -1;
    }
    return 0;
}

static int load_client_cert(SSL_CTX *s, const hl_tls_config *cfg, char *err, size_t len)
{
    char buf[256];
    int asked = 0;
    if (!cfg->cert_file && !cfg->key_file) return 0;
    if (!cfg->cert_file || !cfg->key_file) {
        set_err(err, len, "TLS: tls_cert_file and tls_key_file go together (%s is missing)",
                cfg->cert_file ? "tls_key_file" : "tls_cert_file");
        return -1;
    }
    if (SSL_CTX_use_certificate_chain_file(s, cfg->cert_file) != 1) {
        set_err(err, len, "TLS: tls_cert_file %s: %s", cfg->cert_file, ossl_why(buf, sizeof buf));
        return -1;
    }
    SSL_CTX_set_default_passwd_cb(s, no_passphrase);
    SSL_CTX_set_default_passwd_cb_userdata(s, &asked);
    /* (a key of the certificate's type is checked against it here, any other type below) */
    if (SSL_CTX_use_PrivateKey_file(s, cfg->key_file, SSL_FILETYPE_PEM) != 1 &&
        ERR_GET_REASON(ERR_peek_error()) != X509_R_KEY_VALUES_MISMATCH) {
        set_err(err, len, "TLS: tls_key_file %s: %s", cfg->key_file,
                asked ? "encrypted with a passphrase (give the key unencrypted)" : ossl_why(buf, sizeof buf));
        ERR_clear_error();
        return -1;
    }
    SSL_CTX_set_default_passwd_cb_userdata(s, NULL);   /* (&asked dies with this call) */
    if (SSL_CTX_check_private_key(s) != 1) {
        set_err(err, len, "TLS: tls_key_file %s does not match tls_cert_file %s", cfg->key_file,
                cfg->cert_file);
        ERR_clear_error();
        return -1;
    }
    return 1;
}

struct hl_tls_ctx *hl_tls_ctx_new(const hl_tls_config *cfg, char *err, size_t err_len)
{
    struct hl_tls_ctx *x;
    int certs;
    pthread_once(&init_once, tls_lib_init);
    x = calloc(1, sizeof *x);
    if (!bio_method || !x || !(x->ssl_ctx = SSL_CTX_new(TLS_client_method())) ||
        (cfg->server_name && !(x->server_name = strdup(cfg->server_name)))) {
        set_err(err, err_len, "TLS: out of memory");
        hl_tls_ctx_free(x);
        ERR_clear_error();
        return NULL;
    }
    x->refs = 1;
    x->verify = cfg->verify;
    /* Partial writes and a moving buffer: the caller writes from a buffer that it appends to
     * (and reallocates) while a record is pending. */
    SSL_CTX_set_mode(x->ssl_ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_min_proto_version(x->ssl_ctx, TLS1_2_VERSION);
    /* Read ahead: a reply's records come in one recv, not two (header, body) per record --
     * half the system calls of a round trip; hl_tls_pending counts what it buffers. */
    SSL_CTX_set_read_ahead(x->ssl_ctx, 1);
    SSL_CTX_set_verify(x->ssl_ctx, cfg->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    if (load_trust(x->ssl_ctx, cfg, err, err_len) != 0 ||
        (certs = load_client_cert(x->ssl_ctx, cfg, err, err_len)) < 0) {
        hl_tls_ctx_free(x);
        return NULL;
    }
    x->has_cert = certs > 0;
    return x;
}

struct hl_tls_ctx *hl_tls_ctx_ref(struct hl_tls_ctx *x)
{
    __atomic_add_fetch(&x->refs, 1, __ATOMIC_RELAXED);
    return x;
}

void hl_tls_ctx_free(struct hl_tls_ctx *x)
{
    /* refs is 0 only in a context that failed half-way through hl_tls_ctx_new */
    if (!x || (__atomic_load_n(&x->refs, __ATOMIC_RELAXED) > 0 &&
               __atomic_sub_fetch(&x->refs, 1, __ATOMIC_ACQ_REL) > 0))
        return;
    SSL_CTX_free(x->ssl_ctx);
    free(x->server_name);
    free(x);
}

/* ---- a session ---- */

/* Called by OpenSSL when the server's CertificateRequest arrives: a later "handshake
 * failure" alert then most likely means "I wanted your certificate". */
static int note_cert_request(SSL *ssl, void *arg)
{
    (void)ssl;
    ((struct hl_tls *)arg)->cert_requested = 1;
    return 1;
}

static int is_ip_literal(const char *s)
{
    unsigned char a[16];
    return inet_pton(AF_INET, s, a) == 1 || inet_pton(AF_INET6, s, a) == 1;
}

/* SNI names a host, never an address (RFC 6066); the certificate must carry the name as a
 * DNS name or the address as an IP address (not as a CN: X509_check_ip ignores CNs). */
static int set_peer_name(SSL *ssl, const char *name, int verify)
{
    if (is_ip_literal(name))
        return !verify || X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1;
    if (SSL_set_tlsext_host_name(ssl, name) != 1) return 0;
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    return !verify || SSL_set1_host(ssl, name) == 1;
}

struct hl_tls *hl_tls_new(struct hl_tls_ctx *x, int fd, const char *host, char *err, size_t err_len)
{
    const char *name = x->server_name ? x->server_name : host;
    struct hl_tls *t;
    BIO *bio;
    if (!name || !*name) {
        set_err(err, err_len, "TLS: no host name to send and verify");
        return NULL;
    }
    t = calloc(1, sizeof *t);
    if (!t || !(t->ssl = SSL_new(x->ssl_ctx)) || !(bio = BIO_new(bio_method))) {
        set_err(err, err_len, "TLS: out of memory");
        hl_tls_free(t);
        ERR_clear_error();
        return NULL;
    }
    t->fd = fd;
    t->pid = getpid();   /* (once per connection) */
    t->first_byte = -1;
    t->has_cert = x->has_cert;
    BIO_set_data(bio, t);
    BIO_set_init(bio, 1);
    SSL_set_bio(t->ssl, bio, bio);   /* the SSL owns the BIO from here */
    SSL_set_cert_cb(t->ssl, note_cert_request, t);
    SSL_set_connect_state(t->ssl);
    if (!set_peer_name(t->ssl, name, x->verify)) {
        set_err(err, err_len, "TLS: cannot use \"%s\" as the server's name", name);
        hl_tls_free(t);
        ERR_clear_error();
        return NULL;
    }
    return t;
}

void hl_tls_free(struct hl_tls *t)
{
    if (!t) return;
    /* One try, never waits. Not from a forked child (hilock.h: it may free its copy of a
     * client): the session is the parent's, socket and keys, and a close_notify from here
     * would make the server end the parent's connection under its lock. */
    if (t->ssl && t->done && !t->broken && t->pid == getpid()) SSL_shutdown(t->ssl);
    SSL_free(t->ssl);
    ERR_clear_error();
    free(t);
}

const char *hl_tls_error(const struct hl_tls *t) { return t->err; }
size_t hl_tls_pending(const struct hl_tls *t)
{
    return t->broken ? 0 : (size_t)SSL_pending(t->ssl) + (size_t)SSL_has_pending(t->ssl);
}

/* ---- errors in words ---- */

static hl_tls_io tls_fail(struct hl_tls *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static hl_tls_io tls_fail(struct hl_tls *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->err, sizeof t->err, fmt, ap);
    va_end(ap);
    t->broken = 1;
    ERR_clear_error();   /* nothing of this failure may show up in the next call's */
    return HL_TLS_ERROR;
}

static void append_name(char *out, size_t len, const char *name, size_t n)
{
    size_t used = strlen(out);
    if (used + n + 3 > len) return;   /* (a long list: the first names say enough) */
    if (used) memcpy(out + used, ", ", 2), used += 2;
    memcpy(out + used, name, n);
    out[used + n] = '\0';
}

/* What a certificate is for: its DNS names and IP addresses, else its common name. */
static void cert_names(X509 *c, char *out, size_t len)
{
    GENERAL_NAMES *san = c ? X509_get_ext_d2i(c, NID_subject_alt_name, NULL, NULL) : NULL;
    char ip[INET6_ADDRSTRLEN];
    out[0] = '\0';
    for (int i = 0; i < sk_GENERAL_NAME_num(san); i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(san, i);
        const ASN1_STRING *s = g->type == GEN_DNS ? g->d.dNSName : g->type == GEN_IPADD ? g->d.iPAddress : NULL;
        int n = s ? ASN1_STRING_length(s) : 0;
        if (g->type == GEN_DNS)
            append_name(out, len, (const char *)ASN1_STRING_get0_data(s), (size_t)n);
        else if (s && (n == 4 || n == 16) &&
                 inet_ntop(n == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(s), ip, sizeof ip))
            append_name(out, len, ip, strlen(ip));
    }
    GENERAL_NAMES_free(san);
    if (!out[0] && c)
        X509_NAME_get_text_by_NID(X509_get_subject_name(c), NID_commonName, out, (int)len);
    if (!out[0]) snprintf(out, len, "no name");
}

/* The chain check failed: which link, in the words of the verify result. The server's own
 * certificate is the first of the chain it sent (not yet "the peer's" when it failed). */
static hl_tls_io verify_failed(struct hl_tls *t)
{
    long v = SSL_get_verify_result(t->ssl);
    STACK_OF(X509) *chain = SSL_get_peer_cert_chain(t->ssl);
    char names[160];
    if (v == X509_V_ERR_HOSTNAME_MISMATCH || v == X509_V_ERR_IP_ADDRESS_MISMATCH) {
        cert_names(sk_X509_num(chain) > 0 ? sk_X509_value(chain, 0) : NULL, names, sizeof names);
        return tls_fail(t, "TLS: host name mismatch (certificate is for %s)", names);
    }
    if (v == X509_V_ERR_CERT_HAS_EXPIRED) return tls_fail(t, "TLS: certificate has expired");
    return tls_fail(t, "TLS: certificate verify failed (%s)", X509_verify_cert_error_string(v));
}

/* The server's word on our client certificate. Under TLS 1.2 a missing one is a plain
 * "handshake failure" alert after the server asked for one; under TLS 1.3 the handshake is
 * over for us before the server checks, and its "certificate required" alert is often lost:
 * it closes at once, and our first command, arriving on a closed socket, brings a reset that
 * wipes the alert. So a server that asked for a certificate and then dropped the session
 * before answering anything refused (or missed) it. */
enum { CERT_FINE, CERT_MISSING, CERT_REFUSED };
static int client_cert_problem(const struct hl_tls *t, int reason, int dropped)
{
    int refused = t->cert_requested && ((dropped && t->done && !t->answered) ||
                                         reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE);
    if (reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED || (refused && !t->has_cert))
        return CERT_MISSING;
    if (!t->cert_requested || !t->has_cert) return CERT_FINE;
    switch (reason) {
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
        return CERT_REFUSED;
    }
    return refused ? CERT_REFUSED : CERT_FINE;
}

/* A TLS server's first byte starts a record: change_cipher_spec, alert, handshake,
 * application data or heartbeat (20..24). Anything else (a RESP '-', '+', '$'...) is not TLS. */
static int not_tls(const struct hl_tls *t)
{
    return !t->done && t->first_byte >= 0 && (t->first_byte < 20 || t->first_byte > 24);
}

/* The end of the session; a later call is an error with these words. */
static hl_tls_io closed(struct hl_tls *t)
{
    tls_fail(t, "TLS: the server closed the connection");
    return HL_TLS_CLOSED;
}

static hl_tls_io cert_refused(struct hl_tls *t, int problem, unsigned long code)
{
    const char *alert = ERR_GET_LIB(code) == ERR_LIB_SSL ? ERR_reason_error_string(code) : NULL;
    if (problem == CERT_MISSING) return tls_fail(t, "TLS: server requires a client certificate");
    return tls_fail(t, "TLS: server refused the client certificate (%s)", alert ? alert : "it closed the connection");
}

#define NOT_TLS "TLS: not a TLS server (a plain one takes redis://; or a wrong port?)"

/* A call failed with SSL_get_error() == e: a want, the end of the session, or an error in words. */
static hl_tls_io outcome(struct hl_tls *t, int e, int reading)
{
    unsigned long code = ERR_peek_error();
    int reason = ERR_GET_LIB(code) == ERR_LIB_SSL ? ERR_GET_REASON(code) : 0;
    int eof = e == SSL_ERROR_ZERO_RETURN || reason == SSL_R_UNEXPECTED_EOF_WHILE_READING ||
              (e == SSL_ERROR_SYSCALL && !t->sys_errno && !code);
    int dropped = eof || t->sys_errno == ECONNRESET || t->sys_errno == EPIPE, cert;
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        ERR_clear_error();
        return e == SSL_ERROR_WANT_READ ? HL_TLS_WANT_READ : HL_TLS_WANT_WRITE;
    }
    if (not_tls(t)) return tls_fail(t, "%s", NOT_TLS);
    if (!t->done && t->first_byte < 0 && dropped) return tls_fail(t, "%s: it closed the connection", NOT_TLS);
    if ((cert = client_cert_problem(t, reason, dropped)) != CERT_FINE) return cert_refused(t, cert, code);
    if (eof && reading && t->done) return closed(t);
    if (eof) return tls_fail(t, "TLS: the server closed the connection");
    if (t->sys_errno) return tls_fail(t, "TLS: %s", strerror(t->sys_errno));
    if (reason == SSL_R_CERTIFICATE_VERIFY_FAILED) return verify_failed(t);
    if (code) {
        char buf[256];
        return tls_fail(t, "TLS: %s", ossl_why(buf, sizeof buf));
    }
    return tls_fail(t, "TLS: %s failed", t->done ? (reading ? "read" : "write") : "handshake");
}

const char *hl_tls_timeout_error(const struct hl_tls *t)
{
    if (t->done) return NULL;
    if (t->first_byte < 0)
        return "TLS: no answer to the handshake (not a TLS server? a plain one takes redis://; or a wrong port?)";
    return "TLS: the handshake stalled";
}

/* ---- I/O ---- */

/* Each call starts with an empty queue: SSL_get_error() reads it, and an error left there by
 * other OpenSSL code on this thread would be taken for ours. */
static void tls_begin(struct hl_tls *t)
{
    ERR_clear_error();
    t->sys_errno = 0;
}

hl_tls_io hl_tls_handshake(struct hl_tls *t)
{
    int r;
    if (t->broken) return HL_TLS_ERROR;
    if (t->done) return HL_TLS_OK;
    tls_begin(t);
    r = SSL_connect(t->ssl);
    if (r == 1) {
        t->done = 1;
        return HL_TLS_OK;
    }
    return outcome(t, SSL_get_error(t->ssl, r), 0);
}

hl_tls_io hl_tls_read(struct hl_tls *t, void *buf, size_t cap, size_t *n)
{
    *n = 0;
    if (t->broken) return HL_TLS_ERROR;
    tls_begin(t);
    if (SSL_read_ex(t->ssl, buf, cap, n) == 1) {
        t->answered = 1;
        return HL_TLS_OK;
    }
    return outcome(t, SSL_get_error(t->ssl, 0), 1);
}

hl_tls_io hl_tls_write(struct hl_tls *t, const void *buf, size_t len, size_t *n)
{
    *n = 0;
    if (t->broken) return HL_TLS_ERROR;
    if (len == 0) return HL_TLS_OK;
    tls_begin(t);
    if (SSL_write_ex(t->ssl, buf, len, n) == 1) return HL_TLS_OK;
    return outcome(t, SSL_get_error(t->ssl, 0), 0);
}
