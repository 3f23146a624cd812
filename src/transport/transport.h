/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Layer: transport
 * May call: base platform
 *
 * transport.h -- how bytes reach a server and come back: one connection's byte stream.
 *
 * Owns: sockets (connect, read, write, close) and, for a transport with a session layer
 * (TLS: session.c), its records and handshake. Knows nothing of RESP, commands,
 * nodes or topology. May call: base (util) and platform only. Called by: the engine (engine.c), through the ops
 * table a node was given by the client (client.c), so a second transport is a second table,
 * not branches in the engine.
 *
 * Implementations: hl_transport_tcp (tcp.c): plain TCP and unix sockets;
 * hl_transport_tls (tls.c): TLS over tcp.c's TCP sockets (rediss://).
 */
#ifndef HILOCK_TRANSPORT_H
#define HILOCK_TRANSPORT_H

#include <stddef.h>

typedef enum hl_io {
    HL_IO_OK = 0,       /* done (connect_step: connected; read/write: *n > 0 bytes) */
    HL_IO_WANT_READ,    /* nothing now: wait for POLLIN (hl_io_conn.want says so too) */
    HL_IO_WANT_WRITE,   /* nothing now: wait for POLLOUT */
    HL_IO_CLOSED,       /* the peer is gone: EOF on read; EPIPE/ECONNRESET on write */
    HL_IO_ERROR         /* broken: ops->error() says why */
} hl_io;

struct hl_transport_ops;

/* One connection. The engine embeds it, zeroed, and hands it to ops->connect_start; fd is what
 * it polls, for the events poll_events() names. Private to the transport past that.
 * While connecting, fd may change at each connect_step (a host name's lookup is done and its
 * first address dialed; an address refused, the next one dialed): read it again after each.
 * The fd it replaces stays open until the next call on k (connect_step or close), so an
 * event loop can stop watching it first (hilock_loop's rule: unwatched before closed). */
typedef struct hl_io_conn {
    const struct hl_transport_ops *ops;
    int   fd;            /* -1: none */
    int   connected;     /* connect_step said OK */
    int   want;          /* the events the last WANT_* asked for (POLLIN/POLLOUT) */
    const void *cfg;     /* the transport's settings, from node->transport_cfg (set by the
                            engine before connect_start; TLS: its context), NULL for plain */
    void *session;       /* a session layer's state (TLS); NULL for plain sockets */
    int   silent;        /* TCP: nothing received yet (a close now may be a TLS port's) */
    int   blocking;      /* plain sockets: O_NONBLOCK cleared for read_wait (see there) */
    int   rcvtimeo_ms;   /* plain sockets: the SO_RCVTIMEO in effect (0: none set) */
    void *dial;          /* TCP to a host name: its lookup and addresses, until connected */
    char  why[128];      /* the last error, in words ("Connection refused") */
} hl_io_conn;

typedef struct hl_transport_ops {
    const char *name;    /* "tcp" */
    int handshake;       /* its connect ends in a handshake of its own (TLS): an event says how
                            long it took (hl_conn_connected) */
    /* Start a non-blocking connect to host:port, or to the unix socket at path host when
     * port < 0. 0: started (or done: connect_step says which); -1: failed at once, err says
     * why (no fd left open). Never blocks: a host name is looked up on a helper thread, and
     * fd is that lookup's until it is done (see tcp.c). */
    int    (*connect_start)(hl_io_conn *k, const char *host_or_path, int port, char *err, size_t len);
    /* Advance the connect once fd polled ready: OK = connected (and, for a session layer,
     * handshaken), WANT_* = not yet, ERROR = failed (error() says why). */
    hl_io  (*connect_step)(hl_io_conn *k);
    hl_io  (*read)(hl_io_conn *k, void *buf, size_t cap, size_t *n);
    /* Never raises SIGPIPE. */
    hl_io  (*write)(hl_io_conn *k, const void *buf, size_t len, size_t *n);
    /* Bytes already read from the socket and decoded but not yet returned by read (a TLS
     * record's rest): read again before waiting for POLLIN. Plain sockets: 0. */
    size_t (*pending)(const hl_io_conn *k);
    /* The poll events to wait for, given what the engine wants (POLLIN for replies, POLLOUT
     * for bytes to send): while connecting, what the connect needs. */
    short  (*poll_events)(const hl_io_conn *k, short wanted);
    const char *(*error)(const hl_io_conn *k);
    /* A deadline passed before the connect was seen to complete: "connect" if it really
     * had not, else "read" (it completed unseen: the time ran out waiting for a reply);
     * "resolve HOST" if the host name's lookup had not even ended. */
    const char *(*timeout_error)(const hl_io_conn *k);
    void   (*close)(hl_io_conn *k);   /* and free its state; k may be started again */
    /* Asked of a connected, idle connection (no command in flight): 1 if the server closed it
     * since (EOF, reset, an error), so the engine reconnects before sending; 0 if it looks
     * alive. Never blocks. Plain sockets: anything readable. TLS: records the server sends
     * unasked (session tickets) are read and mean alive. */
    int    (*idle_closed)(hl_io_conn *k);
    /* read, but first wait for data up to timeout_ms (> 0) in the read itself, as one system
     * call: the engine's one-node round trip (a poll() then a read() costs one call more).
     * WANT_READ: nothing came in time (or a signal): the engine decides what follows. Only
     * on a connected socket. NULL: not offered (TLS: OpenSSL reads a non-blocking socket). */
    hl_io  (*read_wait)(hl_io_conn *k, void *buf, size_t cap, size_t *n, int timeout_ms);
} hl_transport_ops;

extern const hl_transport_ops hl_transport_tcp;
extern const hl_transport_ops hl_transport_tls;   /* tls.c: cfg = a struct hl_tls_ctx */

#endif
