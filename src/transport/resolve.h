/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * resolve.h -- a host name's addresses, looked up on a helper thread (docs/event-loop.md), so that the
 * lookup can be given up at the connect's deadline and never runs on an event loop's thread.
 *
 * getaddrinfo has no deadline of ours (the resolver's own is 5 s per server and try), and
 * nothing can cut it short safely (pthread_cancel inside NSS modules leaks their locks). So
 * each lookup runs on a detached thread of its own, which tells of its end through a pipe
 * the caller polls like a socket; a lookup given up finishes on its thread and frees what it
 * holds. Numeric addresses never come here (tcp.c parses them on the spot).
 *
 * Owns: the helper threads and their pipes. Called by: tcp.c only. Calls: libc.
 */
#ifndef HILOCK_RESOLVE_H
#define HILOCK_RESOLVE_H

#include <stddef.h>

struct addrinfo;
typedef struct hl_lookup hl_lookup;

/* Lookups given up while their thread still runs, at most: past that, a new one is refused
 * at once (a resolver that hangs must not pile up a thread per call). */
#define HL_LOOKUPS_HUNG_MAX 32

/* Start looking up host (AF_UNSPEC: IPv6 and IPv4 at once, one resolver round) for a TCP
 * connect to port. *fd becomes readable when it is done (owned by the lookup: close it only
 * with hl_lookup_end). NULL with err ("cannot resolve HOST: ...") if it cannot start. */
hl_lookup *hl_lookup_start(const char *host, int port, int *fd, char *err, size_t len);

/* 0: not done yet. 1: done, *out = the addresses in the system's order of preference (the
 * caller's now: freeaddrinfo). -1: done and failed, err says "cannot resolve HOST: why". */
int hl_lookup_result(hl_lookup *q, struct addrinfo **out, char *err, size_t len);

/* Let it go, done or not (closes its fd; a running lookup ends on its own). NULL-safe. */
void hl_lookup_end(hl_lookup *q);

#endif
