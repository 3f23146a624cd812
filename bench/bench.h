/* SPDX-License-Identifier: BSD-3-Clause */
/* bench.h -- the parts of `make bench`, each one entry that bench/bench.c (main, the
 * uncontended runner, contention, Redlock, the fast path) calls in turn: bench/async.c,
 * cluster.c, fairness.c, kinds.c, tls.c. The parts call only common.h's helpers (and cluster.c
 * async.c's loop rate), never bench.c: calls point one way. Also handoff.c and scale.c. */
#ifndef HILOCK_BENCH_H
#define HILOCK_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* The event-loop API's throughput curve of issue 13 (bench/async.c), on server r. */
void async_bench(hlt_redis *r);
/* Uncontended acquire+release cycles/s of a client of url on a libuv loop, flight cycles in
 * flight (keys bench:async:0..flight-1), for secs (bench/async.c). */
double async_loop_rate(const char *url, int flight, double secs);

/* Redis Cluster vs the single master r (bench/cluster.c), secs seconds in all. */
void cluster_bench(double secs);   /* its own servers: fresh, like the cluster's */

/* The fairness table of issue 14 (bench/fairness.c), on server r. */
void fairness(hlt_redis *r);

/* The semaphore and the shared/exclusive lock of issue 26 (bench/kinds.c), on server r:
 * their cycles next to the lock's, a writer's wait under readers, handoffs; run_s per variant. */
void kinds_bench(hlt_redis *r, double run_s);

/* Part 2's handoff against the bare wake floor (issue 34; bench/handoff.c), on server r: hilock,
 * its scripts on bare hiredis and BLPOP + RPUSH + SET NX in interleaved slices; run_s scales the
 * number of handoffs. Then what each command of a handoff costs the server. */
void handoff_floor(hlt_redis *r, double run_s);

/* What 1,000 waiters on one key and 10,000 locks under keepalive cost a server (issue 34;
 * bench/scale.c), on server r; fixed times (~45 s). */
void scale_bench(hlt_redis *r, double run_s);

/* TLS next to plain TCP (bench/tls.c), on a server of its own; run_s per variant. */
void tls_bench(double run_s);

/* A guarded SET next to a plain SET (issue 38; bench/guarded.c), on server r; run_s in all. */
void guarded_bench(hlt_redis *r, double run_s);

#endif
