/* SPDX-License-Identifier: BSD-3-Clause */
/* tls.c -- TLS over the plain transport's sockets (docs/tls.md).
 *
 * The socket is tcp.c's (its connect, CLOEXEC, NODELAY, MSG_NOSIGNAL); the session
 * is tls.c's. connect_step runs the TCP connect and then the TLS handshake, so the handshake
 * counts in connect_timeout_ms and a server that goes silent in it times out as a connect
 * does, in tls.c's words. k->cfg is the client's TLS context (hl_tls_ctx).
 * Below the engine (transport.h's Layer line); calls tcp.c and session.c only. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session.h"
#include "transport.h"

typedef struct tls_state {
    struct hl_tls *tls;   /* NULL until the TCP connect is done */
    char host[256];       /* the host dialed: SNI and the name verified (unless server_name) */
} tls_state;

static hl_io from_tls(hl_io_conn *k, hl_tls_io r)
{
    tls_state *s = k->session;
    switch (r) {
    case HL_TLS_OK: k->want = 0; return HL_IO_OK;
    case HL_TLS_WANT_READ: k->want = POLLIN; return HL_IO_WANT_READ;
    case HL_TLS_WANT_WRITE: k->want = POLLOUT; return HL_IO_WANT_WRITE;
    case HL_TLS_CLOSED: return HL_IO_CLOSED;
    default:
        snprintf(k->why, sizeof k->why, "%s", hl_tls_error(s->tls));
        return HL_IO_ERROR;
    }
}

static int tls_connect_start(hl_io_conn *k, const char *host, int port, char *err, size_t len)
{
    tls_state *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, len, "out of memory");
        return -1;
    }
    if (hl_transport_tcp.connect_start(k, host, port, err, len) < 0) {
        free(s);
        return -1;
    }
    snprintf(s->host, sizeof s->host, "%s", host);
    k->ops = &hl_transport_tls;
    k->session = s;
    return 0;
}

static hl_io tls_connect_step(hl_io_conn *k)
{
    tls_state *s = k->session;
    hl_io r;
    if (!s->tls) {
        if ((r = hl_transport_tcp.connect_step(k)) != HL_IO_OK) return r;
        k->connected = 0;   /* not until the handshake is done */
        if (!(s->tls = hl_tls_new((struct hl_tls_ctx *)k->cfg, k->fd, s->host, k->why, sizeof k->why)))
            return HL_IO_ERROR;
    }
    if ((r = from_tls(k, hl_tls_handshake(s->tls))) == HL_IO_OK) k->connected = 1;
    return r == HL_IO_CLOSED ? HL_IO_ERROR : r;
}

static hl_io tls_read(hl_io_conn *k, void *buf, size_t cap, size_t *n)
{
    tls_state *s = k->session;
    return from_tls(k, hl_tls_read(s->tls, buf, cap, n));
}

static hl_io tls_write(hl_io_conn *k, const void *buf, size_t len, size_t *n)
{
    tls_state *s = k->session;
    return from_tls(k, hl_tls_write(s->tls, buf, len, n));
}

static size_t tls_pending(const hl_io_conn *k)
{
    const tls_state *s = k->session;
    return s && s->tls && k->connected ? hl_tls_pending(s->tls) : 0;
}

/* A record's read may need a write (and the reverse): what the session last asked is
 * added to what the engine wants; while connecting, only what the connect needs. */
static short tls_poll_events(const hl_io_conn *k, short wanted)
{
    const tls_state *s = k->session;
    if (!s->tls) return hl_transport_tcp.poll_events(k, wanted);   /* (a host name: its lookup) */
    if (!k->connected) return (short)(k->want ? k->want : POLLIN);
    return (short)(wanted | k->want);
}

static const char *tls_error(const hl_io_conn *k)
{
    return k->why[0] ? k->why : "unknown error";
}

static const char *tls_timeout_error(const hl_io_conn *k)
{
    const tls_state *s = k->session;
    const char *w;
    if (!s->tls) return hl_transport_tcp.timeout_error(k);
    if (!k->connected && (w = hl_tls_timeout_error(s->tls))) return w;
    return k->connected ? "read" : "connect";
}

/* A server sends records an idle client has not asked for (TLS 1.3 session tickets, a key
 * update): a readable socket is not a closed one. Read what is there: no application data
 * is expected, so any, an EOF or an error means the connection is not worth keeping. */
static int tls_idle_closed(hl_io_conn *k)
{
    tls_state *s = k->session;
    struct pollfd pf = { k->fd, POLLIN, 0 };
    char b[64];
    size_t n;
    hl_tls_io r;
    if (poll(&pf, 1, 0) == 0) return 0;
    if (!s->tls || !k->connected) return 1;
    r = hl_tls_read(s->tls, b, sizeof b, &n);
    return !(r == HL_TLS_WANT_READ || r == HL_TLS_WANT_WRITE);
}

static void tls_close(hl_io_conn *k)
{
    tls_state *s = k->session;
    if (s) hl_tls_free(s->tls);
    free(s);
    k->session = NULL;
    hl_transport_tcp.close(k);
}

const hl_transport_ops hl_transport_tls = {
    .name = "tls",
    .handshake = 1,
    .connect_start = tls_connect_start,
    .connect_step = tls_connect_step,
    .read = tls_read,
    .write = tls_write,
    .pending = tls_pending,
    .poll_events = tls_poll_events,
    .error = tls_error,
    .timeout_error = tls_timeout_error,
    .close = tls_close,
    .idle_closed = tls_idle_closed,
    .read_wait = NULL,
};
