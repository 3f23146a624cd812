/* SPDX-License-Identifier: BSD-3-Clause */
/* tcp.c -- the plain transport: TCP (IPv4, IPv6) and unix sockets.
 *
 * Owns the sockets (made and sent on through the platform layer, src/platform/platform.h):
 * non-blocking connect, close-on-exec (a program the caller runs with fork
 * + exec, e.g. the hilock command's COMMAND, must not inherit them), TCP_NODELAY (a round
 * trip is one small write: never wait for Nagle), send(MSG_NOSIGNAL) (writing to a server
 * that went away must be an EPIPE we report, never a SIGPIPE that kills the caller, and
 * blocking the signal around every round trip would cost four system calls). A host name is
 * looked up by resolve.c on a helper thread, whose pipe the connect polls first (below).
 * Below the engine (transport.h's Layer line); calls resolve.c, nothing of the library above util. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "platform.h"
#include "resolve.h"
#include "transport.h"

static void set_why(hl_io_conn *k, int err)
{
    snprintf(k->why, sizeof k->why, "%s", strerror(err));
}

/* socket + connect of one address: 0 started (or done), else the errno. */
static int dial(hl_io_conn *k, int family, const struct sockaddr *sa, socklen_t len)
{
    int one = 1, e;
    int fd = hl_plat_socket(family, SOCK_STREAM);
    if (fd < 0) return errno;
    if (family != AF_UNIX) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, sa, len) == 0 || errno == EINPROGRESS) {
        k->fd = fd;
        return 0;
    }
    e = errno;
    close(fd);
    return e;
}

static int connect_unix(hl_io_conn *k, const char *path, char *err, size_t len)
{
    struct sockaddr_un sa;
    int e;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof sa.sun_path) {
        snprintf(err, len, "unix socket path too long");
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    if ((e = dial(k, AF_UNIX, (const struct sockaddr *)&sa, sizeof sa)) == 0) return 0;
    snprintf(err, len, "%s", strerror(e));
    return -1;
}

/* A host name's connect (k->dial), from its lookup to the first address that takes the
 * connect. The addresses are tried in the system's order of preference (RFC 6724: "localhost"
 * may give ::1 then 127.0.0.1), each after the one before failed (refused, unreachable),
 * all within the connect's deadline, which the engine keeps: an address that swallows the
 * connect takes what is left of it. An fd given up (the lookup's, a refused socket's) is kept
 * in `retired` until the next call on k (transport.h: a loop unwatches it first). */
typedef struct dial_state {
    hl_lookup       *q;         /* the lookup, until its addresses are in */
    struct addrinfo *ai, *next; /* its addresses; the next one to try */
    hl_lookup       *retired_q; /* the ended lookup: its fd closes at the next call */
    int              retired_fd;
    int              err;       /* the last address's errno */
    char             what[80];  /* "resolve HOST": timeout_error while the lookup runs */
} dial_state;

static void dial_retire_done(dial_state *d)
{
    hl_lookup_end(d->retired_q);
    d->retired_q = NULL;
    if (d->retired_fd >= 0) close(d->retired_fd);
    d->retired_fd = -1;
}

static void dial_free(hl_io_conn *k)
{
    dial_state *d = k->dial;
    if (!d) return;
    dial_retire_done(d);
    hl_lookup_end(d->q);
    if (d->ai) freeaddrinfo(d->ai);
    free(d);
    k->dial = NULL;
}

/* The lookup of a name: fd is its pipe until the addresses are in. */
static int dial_name(hl_io_conn *k, const char *host, int port, char *err, size_t len)
{
    dial_state *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, len, "out of memory");
        return -1;
    }
    d->retired_fd = -1;
    if (!(d->q = hl_lookup_start(host, port, &k->fd, err, len))) {
        free(d);
        return -1;
    }
    snprintf(d->what, sizeof d->what, "resolve %.60s", host);
    k->dial = d;
    return 0;
}

/* Dial the next address that takes a connect; the fd polled so far (the lookup's pipe, a
 * socket that failed) is retired. WANT_WRITE, or ERROR with the last address's words. */
static hl_io dial_next(hl_io_conn *k, dial_state *d)
{
    d->retired_fd = k->fd;
    k->fd = -1;
    while (d->next) {
        struct addrinfo *p = d->next;
        d->next = p->ai_next;
        if ((d->err = dial(k, p->ai_family, p->ai_addr, p->ai_addrlen)) == 0) {
            k->want = POLLOUT;
            return HL_IO_WANT_WRITE;
        }
    }
    set_why(k, d->err ? d->err : EADDRNOTAVAIL);
    return HL_IO_ERROR;
}

/* The lookup has ended (its pipe is readable): its addresses, or why not. */
static hl_io dial_looked_up(hl_io_conn *k, dial_state *d)
{
    int r = hl_lookup_result(d->q, &d->ai, k->why, sizeof k->why);
    if (r == 0) {
        k->want = POLLIN;
        return HL_IO_WANT_READ;
    }
    if (r < 0) return HL_IO_ERROR;
    d->retired_q = d->q;   /* (k->fd is its pipe, which closes with it) */
    d->q = NULL;
    d->next = d->ai;
    k->fd = -1;
    return dial_next(k, d);
}

/* A numeric address (IPv4, IPv6 literal, with a zone) is parsed without any lookup, and
 * dialed at once: the common case costs what it did before names were looked up. */
static int dial_numeric(hl_io_conn *k, const char *host, int port, char *err, size_t len)
{
    struct addrinfo hints, *ai, *p;
    char serv[16];
    int rv, e = 0;
    snprintf(serv, sizeof serv, "%d", port);
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    if ((rv = getaddrinfo(host, serv, &hints, &ai)) != 0) {
        if (rv == EAI_NONAME) return 1;   /* a name */
        snprintf(err, len, "%s", gai_strerror(rv));
        return -1;
    }
    for (p = ai; p; p = p->ai_next)   /* the first address that takes the connect */
        if ((e = dial(k, p->ai_family, p->ai_addr, p->ai_addrlen)) == 0) break;
    freeaddrinfo(ai);
    if (k->fd >= 0) return 0;
    snprintf(err, len, "%s", strerror(e ? e : EADDRNOTAVAIL));
    return -1;
}

static int tcp_connect_start(hl_io_conn *k, const char *host, int port, char *err, size_t len)
{
    int r;
    k->ops = &hl_transport_tcp;
    k->fd = -1;
    k->connected = 0;
    k->blocking = k->rcvtimeo_ms = 0;
    k->why[0] = '\0';
    k->dial = NULL;
    k->silent = port >= 0;
    if (port < 0) return connect_unix(k, host, err, len);
    if ((r = dial_numeric(k, host, port, err, len)) <= 0) return r;
    return dial_name(k, host, port, err, len);
}

static hl_io tcp_connect_step(hl_io_conn *k)
{
    dial_state *d = k->dial;
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (d) {
        dial_retire_done(d);   /* (a loop has stopped watching it by now) */
        if (d->q) return dial_looked_up(k, d);
    }
    if (getsockopt(k->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0) soerr = errno;
    if (soerr && d && d->next) {   /* refused (or unreachable): the next address */
        d->err = soerr;
        return dial_next(k, d);
    }
    if (soerr) {
        set_why(k, soerr);
        return HL_IO_ERROR;
    }
    dial_free(k);
    k->connected = 1;
    return HL_IO_OK;
}

/* A TLS-only port (Redis's tls-port) given plain RESP fails its handshake and closes or
 * resets the connection before a single byte comes back: say what that most likely means.
 * (A plain server that closes at once -- a crash -- reads the same; hence "may".) */
#define TLS_HINT " before any reply (the server may require TLS: use rediss://)"

/* What a recv() returned (r), for read and read_wait alike. A socket that never answered
 * and closes now may be a TLS port given plain RESP: the words say so. EINTR (read_wait only:
 * read retries it) is "nothing yet": the engine decides what follows. */
static hl_io read_result(hl_io_conn *k, ssize_t r, size_t *n)
{
    if (r > 0) {
        *n = (size_t)r;
        k->silent = 0;
        return HL_IO_OK;
    }
    if (r == 0 && k->silent) {
        snprintf(k->why, sizeof k->why, "Server closed the connection%s", TLS_HINT);
        return HL_IO_ERROR;
    }
    if (r == 0) return HL_IO_CLOSED;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        k->want = POLLIN;
        return HL_IO_WANT_READ;
    }
    set_why(k, errno);
    if (k->silent && errno == ECONNRESET) snprintf(k->why, sizeof k->why, "%s%s", strerror(ECONNRESET), TLS_HINT);
    return HL_IO_ERROR;
}

static hl_io tcp_read(hl_io_conn *k, void *buf, size_t cap, size_t *n)
{
    ssize_t r;
    *n = 0;
    do r = recv(k->fd, buf, cap, MSG_DONTWAIT);   /* (the socket may be blocking: read_wait) */
    while (r < 0 && errno == EINTR);
    return read_result(k, r, n);
}

static hl_io tcp_write(hl_io_conn *k, const void *buf, size_t len, size_t *n)
{
    ssize_t w;
    *n = 0;
    do w = send(k->fd, buf, len, HL_PLAT_NOSIGNAL | MSG_DONTWAIT);
    while (w < 0 && errno == EINTR);
    if (w >= 0) {
        *n = (size_t)w;
        return HL_IO_OK;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
        k->want = POLLOUT;
        return HL_IO_WANT_WRITE;
    }
    set_why(k, errno);
    return errno == EPIPE || errno == ECONNRESET ? HL_IO_CLOSED : HL_IO_ERROR;
}

/* The socket is made blocking on first use (reads and writes elsewhere pass MSG_DONTWAIT, so
 * they stay non-blocking) and waits with SO_RCVTIMEO, set again only when timeout_ms changes
 * (the engine keeps it steady across round trips). */
static hl_io tcp_read_wait(hl_io_conn *k, void *buf, size_t cap, size_t *n, int timeout_ms)
{
    ssize_t r;
    *n = 0;
    if (!k->blocking) {
        int fl = fcntl(k->fd, F_GETFL);
        if (fl < 0 || fcntl(k->fd, F_SETFL, fl & ~O_NONBLOCK) < 0) goto fail;
        k->blocking = 1;
    }
    if (timeout_ms != k->rcvtimeo_ms) {
        struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
        /* (until it is set, a failure must not leave a wait without a bound) */
        k->rcvtimeo_ms = 0;
        if (timeout_ms <= 0 || setsockopt(k->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0) goto fail;
        k->rcvtimeo_ms = timeout_ms;
    }
    r = recv(k->fd, buf, cap, 0);
    return read_result(k, r, n);
fail:
    set_why(k, errno);
    return HL_IO_ERROR;
}

static size_t tcp_pending(const hl_io_conn *k)
{
    (void)k;
    return 0;
}

static short tcp_poll_events(const hl_io_conn *k, short wanted)
{
    const dial_state *d = k->dial;
    if (d && d->q) return POLLIN;   /* the lookup's pipe */
    return k->connected ? wanted : POLLOUT;
}

static const char *tcp_error(const hl_io_conn *k)
{
    return k->why[0] ? k->why : "unknown error";
}

/* The connect may well have completed unseen (the engine was busy elsewhere: building a
 * pipeline, another node, a Sentinel). */
static const char *tcp_timeout_error(const hl_io_conn *k)
{
    struct pollfd pf = { k->fd, POLLOUT, 0 };
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    const dial_state *d = k->dial;
    if (d && d->q) return d->what;
    if (k->connected) return "read";
    if (poll(&pf, 1, 0) == 1 && getsockopt(k->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 &&
        soerr == 0)
        return "read";
    return "connect";
}

static void tcp_close(hl_io_conn *k)
{
    const dial_state *d = k->dial;
    if (k->fd >= 0 && !(d && d->q)) close(k->fd);   /* (the lookup's pipe closes with it) */
    dial_free(k);
    k->fd = -1;
    k->connected = 0;
}

/* An idle connection has nothing to read: readable means EOF or a reset. */
static int tcp_idle_closed(hl_io_conn *k)
{
    struct pollfd pf = { k->fd, POLLIN, 0 };
    return poll(&pf, 1, 0) != 0;
}

const hl_transport_ops hl_transport_tcp = {
    .name = "tcp",
    .connect_start = tcp_connect_start,
    .connect_step = tcp_connect_step,
    .read = tcp_read,
    .write = tcp_write,
    .pending = tcp_pending,
    .poll_events = tcp_poll_events,
    .error = tcp_error,
    .timeout_error = tcp_timeout_error,
    .close = tcp_close,
    .idle_closed = tcp_idle_closed,
    .read_wait = tcp_read_wait,
};
