/* SPDX-License-Identifier: BSD-3-Clause */
/* test_transport.c -- the plain transport (src/transport/tcp.c) on its own, against sockets
 * the test listens on (127.0.0.1, ::1, a unix socket; no server needed): the connect of each
 * address kind and of a host name, bytes both ways, the errors in words, and the socket
 * options the engine relies on (close-on-exec, TCP_NODELAY, no SIGPIPE). */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "transport.h"

TestSuite(transport, .timeout = 20);

/* A listener on an ephemeral port of `family`'s loopback; its port in *port, -1 if the
 * family is not available here. */
static int listen_on(int family, int *port)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    memset(&ss, 0, sizeof ss);
    if (family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *a;
    }
    if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 4) < 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    getsockname(fd, (struct sockaddr *)&ss, &len);
    *port = ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                     : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

/* Connect k to host:port (or the unix path when port < 0) through the transport, bounded. */
static void connect_ok(hl_io_conn *k, const char *host, int port)
{
    char err[128] = "";
    hl_io io = HL_IO_WANT_WRITE;
    memset(k, 0, sizeof *k);
    cr_assert_eq(hl_transport_tcp.connect_start(k, host, port, err, sizeof err), 0, "%s: %s", host, err);
    for (int i = 0; i < 100 && io != HL_IO_OK; i++) {
        struct pollfd pf = { k->fd, hl_transport_tcp.poll_events(k, POLLIN), 0 };
        cr_assert_geq(poll(&pf, 1, 100), 0);
        io = hl_transport_tcp.connect_step(k);
        cr_assert(io == HL_IO_OK || io == HL_IO_WANT_WRITE || io == HL_IO_WANT_READ, "%s: %s", host,
                  hl_transport_tcp.error(k));   /* (READ: a host name's lookup) */
    }
    cr_assert_eq(io, HL_IO_OK);
    cr_assert_eq(hl_transport_tcp.poll_events(k, POLLIN), POLLIN);
    cr_assert_str_eq(hl_transport_tcp.timeout_error(k), "read");
}

/* Bytes both ways between k and the accepted peer. */
static void echo_through(hl_io_conn *k, int lfd)
{
    char buf[16];
    size_t n = 0;
    int peer = accept(lfd, NULL, NULL);
    cr_assert_geq(peer, 0);
    cr_assert_eq(hl_transport_tcp.write(k, "PING\r\n", 6, &n), HL_IO_OK);
    cr_assert_eq(n, 6);
    cr_assert_eq(read(peer, buf, sizeof buf), 6);
    cr_assert_eq(hl_transport_tcp.read(k, buf, sizeof buf, &n), HL_IO_WANT_READ);   /* nothing yet */
    cr_assert_eq(write(peer, "+PONG\r\n", 7), 7);
    struct pollfd pf = { k->fd, POLLIN, 0 };
    cr_assert_eq(poll(&pf, 1, 2000), 1);
    cr_assert_eq(hl_transport_tcp.read(k, buf, sizeof buf, &n), HL_IO_OK);
    cr_assert_eq(n, 7);
    cr_assert_eq(memcmp(buf, "+PONG\r\n", 7), 0);
    cr_assert_eq(hl_transport_tcp.pending(k), 0);
    close(peer);
    cr_assert_eq(poll(&pf, 1, 2000), 1);
    cr_assert_eq(hl_transport_tcp.read(k, buf, sizeof buf, &n), HL_IO_CLOSED);
}

Test(transport, talks_over_ipv4_with_nodelay_and_close_on_exec)
{
    hl_io_conn k;
    int port, one = 0;
    socklen_t sl = sizeof one;
    int lfd = listen_on(AF_INET, &port);
    cr_assert_geq(lfd, 0);
    connect_ok(&k, "127.0.0.1", port);
    cr_assert(fcntl(k.fd, F_GETFD) & FD_CLOEXEC);
    cr_assert(fcntl(k.fd, F_GETFL) & O_NONBLOCK);
    cr_assert_eq(getsockopt(k.fd, IPPROTO_TCP, TCP_NODELAY, &one, &sl), 0);
    cr_assert_neq(one, 0);
    echo_through(&k, lfd);
    hl_transport_tcp.close(&k);
    cr_assert_eq(k.fd, -1);
    close(lfd);
}

Test(transport, talks_to_an_ipv6_literal)
{
    hl_io_conn k;
    int port, lfd = listen_on(AF_INET6, &port);
    if (lfd < 0) cr_skip_test("no IPv6 loopback here");
    connect_ok(&k, "::1", port);
    echo_through(&k, lfd);
    hl_transport_tcp.close(&k);
    close(lfd);
}

Test(transport, resolves_a_host_name)
{
    hl_io_conn k;
    int port, lfd = listen_on(AF_INET, &port);
    cr_assert_geq(lfd, 0);
    connect_ok(&k, "localhost", port);   /* (::1 first, if the system says so: refused, then 127.0.0.1) */
    echo_through(&k, lfd);
    hl_transport_tcp.close(&k);
    close(lfd);
}

Test(transport, talks_over_a_unix_socket)
{
    struct sockaddr_un a;
    char dir[] = "/tmp/hilock-transport-XXXXXX", path[100];
    hl_io_conn k;
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/s.sock", dir);
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, path, strlen(path) + 1);
    cr_assert_eq(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(lfd, 4), 0);
    connect_ok(&k, path, -1);
    cr_assert(fcntl(k.fd, F_GETFD) & FD_CLOEXEC);
    echo_through(&k, lfd);
    hl_transport_tcp.close(&k);
    close(lfd);
    unlink(path);
    rmdir(dir);
}

Test(transport, says_connection_refused_in_words)
{
    hl_io_conn k;
    char err[128] = "";
    int port, lfd = listen_on(AF_INET, &port);
    cr_assert_geq(lfd, 0);
    close(lfd);   /* nothing listens there now */
    memset(&k, 0, sizeof k);
    if (hl_transport_tcp.connect_start(&k, "127.0.0.1", port, err, sizeof err) < 0) {
        cr_assert_str_eq(err, "Connection refused");
        return;
    }
    struct pollfd pf = { k.fd, POLLOUT, 0 };
    cr_assert_eq(poll(&pf, 1, 2000), 1);
    cr_assert_eq(hl_transport_tcp.connect_step(&k), HL_IO_ERROR);
    cr_assert_str_eq(hl_transport_tcp.error(&k), "Connection refused");
    hl_transport_tcp.close(&k);
}

Test(transport, refuses_bad_addresses_without_an_fd)
{
    hl_io_conn k;
    char err[128] = "", longp[200];
    memset(&k, 0, sizeof k);
    cr_assert_eq(hl_transport_tcp.connect_start(&k, "/nonexistent/hilock.sock", -1, err, sizeof err), -1);
    cr_assert_str_eq(err, "No such file or directory");
    cr_assert_eq(k.fd, -1);
    memset(longp, 'a', sizeof longp - 1);
    longp[0] = '/';
    longp[sizeof longp - 1] = '\0';
    cr_assert_eq(hl_transport_tcp.connect_start(&k, longp, -1, err, sizeof err), -1);
    cr_assert_str_eq(err, "unix socket path too long");
    cr_assert_eq(k.fd, -1);
}

Test(transport, a_write_to_a_closed_peer_is_closed_not_sigpipe)
{
    hl_io_conn k;
    size_t n = 0;
    int port, lfd = listen_on(AF_INET, &port), peer;
    hl_io io = HL_IO_OK;
    cr_assert_geq(lfd, 0);
    signal(SIGPIPE, SIG_DFL);   /* a SIGPIPE would kill this test */
    connect_ok(&k, "127.0.0.1", port);
    peer = accept(lfd, NULL, NULL);
    close(peer);
    for (int i = 0; i < 200 && io == HL_IO_OK; i++) {
        io = hl_transport_tcp.write(&k, "PING\r\n", 6, &n);
        usleep(5000);
    }
    cr_assert_eq(io, HL_IO_CLOSED, "%s", hl_transport_tcp.error(&k));
    hl_transport_tcp.close(&k);
    close(lfd);
}

/* A TLS-only port given plain RESP closes (or resets) before answering a byte: the words
 * say what that most likely means. Once anything came back (echo_through), a close is a
 * plain HL_IO_CLOSED. */
Test(transport, a_close_before_any_reply_suggests_tls)
{
    hl_io_conn k;
    char buf[16];
    size_t n = 0;
    int port, lfd = listen_on(AF_INET, &port), peer;
    cr_assert_geq(lfd, 0);
    connect_ok(&k, "127.0.0.1", port);
    peer = accept(lfd, NULL, NULL);
    cr_assert_eq(hl_transport_tcp.write(&k, "PING\r\n", 6, &n), HL_IO_OK);
    cr_assert_eq(read(peer, buf, sizeof buf), 6);
    close(peer);
    struct pollfd pf = { k.fd, POLLIN, 0 };
    cr_assert_eq(poll(&pf, 1, 2000), 1);
    cr_assert_eq(hl_transport_tcp.read(&k, buf, sizeof buf, &n), HL_IO_ERROR);
    cr_assert_str_eq(hl_transport_tcp.error(&k), "Server closed the connection before any reply "
                     "(the server may require TLS: use rediss://)");
    hl_transport_tcp.close(&k);
    close(lfd);
}

/* read_wait (the engine's one-node round trip): it waits in the read for data, up to its
 * timeout, and leaves read and write non-blocking afterwards. */
Test(transport, read_wait_waits_for_data_within_its_timeout_and_read_stays_non_blocking)
{
    hl_io_conn k;
    int port, lfd = listen_on(AF_INET, &port), peer;
    char buf[16];
    size_t n = 9;
    struct timespec t0, t1;
    long ms;
    cr_assert_geq(lfd, 0);
    connect_ok(&k, "127.0.0.1", port);
    peer = accept(lfd, NULL, NULL);
    cr_assert_geq(peer, 0);
    cr_assert_eq(write(peer, "+OK\r\n", 5), 5);
    cr_assert_eq(hl_transport_tcp.read_wait(&k, buf, sizeof buf, &n, 1000), HL_IO_OK);
    cr_assert_eq(n, 5);
    cr_assert_eq(memcmp(buf, "+OK\r\n", 5), 0);
    /* nothing comes: WANT_READ after about its timeout, not at once and not forever */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert_eq(hl_transport_tcp.read_wait(&k, buf, sizeof buf, &n, 200), HL_IO_WANT_READ);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    cr_assert(ms >= 150 && ms < 5000, "waited %ld ms", ms);
    cr_assert_eq(n, 0);
    /* the socket now blocks, but read and write still never do */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert_eq(hl_transport_tcp.read(&k, buf, sizeof buf, &n), HL_IO_WANT_READ);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    cr_assert_lt((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000, 100);
    cr_assert_eq(hl_transport_tcp.write(&k, "PING\r\n", 6, &n), HL_IO_OK);
    cr_assert_eq(read(peer, buf, sizeof buf), 6);
    close(peer);   /* EOF: closed */
    cr_assert_eq(hl_transport_tcp.read_wait(&k, buf, sizeof buf, &n, 1000), HL_IO_CLOSED);
    hl_transport_tcp.close(&k);
    close(lfd);
}
