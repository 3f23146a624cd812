/* SPDX-License-Identifier: BSD-3-Clause */
/* bench.h -- what the parts of `make bench` share (bench/bench.c, bench/fairness.c, bench/tls.c,
 * bench/async.c, bench/fastpath.c): the clock, the exit on a setup failure, percentiles, how a
 * client is made, and the uncontended runner with its baselines. */
#ifndef HILOCK_BENCH_H
#define HILOCK_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "fixture.h"
#include "hilock.h"

int64_t now_us(void);                          /* CLOCK_MONOTONIC, us */
int64_t cpu_us(void);                          /* this process's user + system CPU, us */
int64_t server_cpu_us(hlt_redis *r);           /* r's used_cpu_user + sys (INFO cpu), us */
void    die(const char *what, const char *why);   /* prints "bench: what: why", exit(1) */
int     cmp_i64(const void *a, const void *b);    /* qsort order of int64_t */
double  pct_ms(const int64_t *v, size_t n, double q);   /* nearest rank of sorted us, in ms */

/* A client on urls with the default options, then tune(&o) if tune is not NULL; dies if the
 * options are refused. */
hilock_client *client_with(const char *const *urls, size_t n, void (*tune)(hilock_options *o));
void tune_no_wake(hilock_options *o);   /* wake = 0: pure polling */

/* Run body(i, arg) for i = 0..n-1, each in a forked process (stdout flushed first), and
 * wait for them all; dies with `what` if one fails. */
void in_processes(int n, void (*body)(int i, void *arg), void *arg, const char *what);

/* The event-loop API's throughput curve of issue 13 (bench/async.c), on server r. */
void async_bench(hlt_redis *r);
/* Uncontended acquire+release cycles/s of a client of url on a libuv loop, flight cycles in
 * flight (keys bench:async:0..flight-1), for secs (bench/async.c). */
double async_loop_rate(const char *url, int flight, double secs);

/* Uncontended acquire+release cycles on one connection (bench.c): hilock (a client with
 * tune applied, NULL = defaults) against (a) the very commands the library sends and (b) a
 * bare SET NX PX + the library's release, in interleaved slices. variants: a mask of
 * 1 << V_SAME / V_SETNX (hilock always runs); the others are left 0 in *res. */
typedef enum variant { V_OURS, V_SAME, V_SETNX, NVARIANTS } variant;
typedef struct result {
    double rate[NVARIANTS];   /* cycles/s over all slices */
    double cpu[NVARIANTS];    /* client CPU us per cycle */
    double ratio[NVARIANTS];  /* median over slices of hilock's rate / this variant's */
} result;
void uncontended(hlt_redis *r, int unix_socket, void (*tune)(hilock_options *o), unsigned variants,
                 result *res);

/* The fast-path table of issue 14 (bench/fastpath.c): options.fencing = 0 against (b), on TCP
 * and a unix socket, next to fenced[] (the default client's results, [0] TCP, [1] unix). */
void fastpath(hlt_redis *r, const result fenced[2]);

/* Redis Cluster vs the single master r (bench/cluster.c), secs seconds in all. */
void cluster_bench(double secs);   /* its own servers: fresh, like the cluster's */

/* The fairness table of issue 14 (bench/fairness.c), on server r. */
void fairness(hlt_redis *r);

/* TLS next to plain TCP (bench/tls.c), on a server of its own; run_s per variant. */
void tls_bench(double run_s);

#endif
