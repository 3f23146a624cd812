/* SPDX-License-Identifier: BSD-3-Clause */
/* fakes.h -- the pieces of the fake servers and proxies a suite forks on 127.0.0.1 (listening
 * sockets come from hlt_listen, fixture.h): one way to fork the server, to write all of a
 * reply, and to reach the real server behind a proxy. */
#ifndef HILOCK_TEST_FAKES_H
#define HILOCK_TEST_FAKES_H

#include <stddef.h>
#include <sys/types.h>

/* Send all n bytes of p on fd (MSG_NOSIGNAL, EINTR retried): 0, or -1 once the peer is gone. */
int   hlt_send_all(int fd, const void *p, size_t n);
/* A TCP connection to 127.0.0.1:port (blocking): its fd, or -1. */
int   hlt_connect_port(int port);
/* Fork the server of listening socket ls: a child that accepts for ever and runs serve(fd, arg)
 * in a child of its own per connection (which exits when serve returns). Both die with the
 * test (PR_SET_PDEATHSIG), the accepting child also after alarm_s seconds (0: no alarm); no
 * zombies are left. ls is closed here in the caller; the accepting child's pid is returned
 * (the test fails if fork does). */
pid_t hlt_serve_fork(int ls, unsigned alarm_s, void (*serve)(int fd, void *arg), void *arg);
/* SIGKILL the accepting child and reap it (its connections' children die with it). */
void  hlt_serve_stop(pid_t pid);

#endif
