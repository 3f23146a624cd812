/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * session.h -- TLS over a socket the caller has already connected (OpenSSL 3). Internal, not API.
 *
 * Owns: the OpenSSL context made from the TLS settings, and per connection the SSL session,
 * its handshake, record reads/writes and the words of its errors. Does not own the socket:
 * the caller creates, connects, polls and closes the fd; this layer never blocks, never
 * polls, never sleeps and never touches the process's signal mask (its writes use
 * send(MSG_NOSIGNAL), so a server that went away is an error, never a SIGPIPE).
 * May call: OpenSSL and libc only; knows nothing of hilock's clients, nodes or options.
 *
 * The non-blocking contract, the same for handshake, read and write: a call returns
 * HL_TLS_OK when it made progress, or HL_TLS_WANT_READ / HL_TLS_WANT_WRITE: wait until the
 * fd is readable / writable (POLLIN / POLLOUT) and call the same function again. Either
 * direction may be asked by any call: a read may need to write (a TLS 1.3 key update) and a
 * write may need to read. HL_TLS_ERROR ends the session: hl_tls_error() says why, in words
 * a person can act on ("TLS: certificate verify failed (unable to get local issuer
 * certificate)"); the caller closes it. OpenSSL's error queue is left empty after every call.
 *
 * Threads: a context may be shared by sessions in different threads; one session is used
 * by one thread at a time.
 */
#ifndef HILOCK_SESSION_H
#define HILOCK_SESSION_H

#include <stddef.h>

/* The TLS settings, the same meaning as the options of the same names (tls_ca_file...).
 * Borrowed: hl_tls_ctx_new copies what it keeps. NULL = not set. */
typedef struct hl_tls_config {
    const char *ca_file;       /* PEM bundle of trusted CAs; with ca_path NULL too: the system store */
    const char *ca_path;       /* directory of hashed CA certificates (c_rehash) */
    const char *cert_file;     /* client certificate (PEM, may hold its chain), with key_file */
    const char *key_file;      /* its private key (PEM) */
    const char *server_name;   /* SNI and the name verified; NULL = the host each session dials */
    int         verify;        /* 1 = verify the chain and the host name; 0 = encrypt only (unsafe) */
} hl_tls_config;

typedef enum hl_tls_io {
    HL_TLS_OK = 0,       /* handshake done / bytes moved */
    HL_TLS_WANT_READ,    /* poll the fd for POLLIN, then call the same function again */
    HL_TLS_WANT_WRITE,   /* poll the fd for POLLOUT, then call the same function again */
    HL_TLS_CLOSED,       /* read: the server ended the session (close_notify or EOF); later calls: ERROR */
    HL_TLS_ERROR         /* the session is broken: hl_tls_error() says why */
} hl_tls_io;

struct hl_tls_ctx;   /* the settings, loaded and checked once; shared by many sessions */
struct hl_tls;       /* one session over one fd */

/* Load cfg (CA, client certificate and key) into a new context. Returns NULL on failure with
 * why in err (err_len bytes): a file that cannot be read, a key that does not match the
 * certificate, a certificate without a key, out of memory. Free with hl_tls_ctx_free. */
struct hl_tls_ctx *hl_tls_ctx_new(const hl_tls_config *cfg, char *err, size_t err_len);
/* One more owner of x (thread-safe): each owner calls hl_tls_ctx_free once; the last frees
 * it. So a second client with the same settings shares the files loaded once. Returns x. */
struct hl_tls_ctx *hl_tls_ctx_ref(struct hl_tls_ctx *x);
/* Drop one owner (thread-safe); NULL-safe. Sessions made from it stay valid (OpenSSL counts
 * its own references). */
void hl_tls_ctx_free(struct hl_tls_ctx *x);

/* A session over fd (a connected non-blocking socket; not taken over: the caller closes it
 * after hl_tls_free). host = the host dialed (name or IP literal): unless the
 * context has a server_name, it is the SNI (names only, never an IP) and the name the
 * certificate must carry. Nothing is sent until the first hl_tls_handshake. Returns NULL
 * with why in err on failure (out of memory). */
struct hl_tls *hl_tls_new(struct hl_tls_ctx *x, int fd, const char *host, char *err, size_t err_len);

/* One step of the client handshake: OK when done (then read/write), WANT_READ/WANT_WRITE,
 * or ERROR. The caller's deadline bounds it: a server that stops answering just keeps
 * returning WANT_READ. Note: under TLS 1.3 the handshake ends before the server has checked
 * a client certificate; a server that refuses it says so at the first read (HL_TLS_ERROR,
 * "TLS: server requires a client certificate"). */
hl_tls_io hl_tls_handshake(struct hl_tls *t);

/* Read up to cap decrypted bytes into buf: OK with *n > 0, WANT_READ/WANT_WRITE (*n = 0),
 * CLOSED or ERROR. Decrypted bytes can wait inside the session where poll() cannot see
 * them: after OK, read again (or check hl_tls_pending) before waiting for POLLIN. */
hl_tls_io hl_tls_read(struct hl_tls *t, void *buf, size_t cap, size_t *n);
/* Write from buf: OK with 0 < *n <= len (a part may be taken: write the rest next),
 * WANT_READ/WANT_WRITE (*n = 0) or ERROR (a server that went away: EPIPE, no SIGPIPE).
 * After a WANT, call again with the same bytes first (the buffer may have moved or grown,
 * never shrunk). len == 0 is OK with *n = 0. */
hl_tls_io hl_tls_write(struct hl_tls *t, const void *buf, size_t len, size_t *n);
/* > 0 if the session holds bytes poll() cannot see: decrypted ones, or records read ahead
 * from the socket (the context reads ahead: one recv per reply, not one per record header
 * and one per body). Read (until WANT_READ) before waiting for POLLIN. */
size_t hl_tls_pending(const struct hl_tls *t);

/* Why the last call returned HL_TLS_ERROR ("TLS: ..."); "" before any error. */
const char *hl_tls_error(const struct hl_tls *t);
/* Words for the caller's deadline passing while the layer still wanted to read or write:
 * during the handshake, "TLS: no answer to the handshake (not a TLS server? wrong port?)"
 * when the server sent nothing at all (a plain Redis port never answers a ClientHello: it
 * waits for a newline the hello does not carry before a NUL), or "TLS: the handshake
 * stalled"; NULL once the handshake is done (a command's timeout is the caller's to word). */
const char *hl_tls_timeout_error(const struct hl_tls *t);

/* End the session: a close_notify if the socket takes it now (never waits; skipped after an
 * error, and in a forked child: the session is the parent's), then free. The fd stays open.
 * NULL-safe. */
void hl_tls_free(struct hl_tls *t);

#endif
