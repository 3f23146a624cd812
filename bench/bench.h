/* bench.h -- what the parts of `make bench` share (bench/bench.c, bench/fairness.c): the
 * clock, the exit on a setup failure, percentiles and how a client is made. */
#ifndef HILOCK_BENCH_H
#define HILOCK_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "fixture.h"
#include "hilock.h"

int64_t now_us(void);                          /* CLOCK_MONOTONIC, us */
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

/* Redis Cluster vs the single master r (bench/cluster.c), secs seconds in all. */
void cluster_bench(hlt_redis *r, double secs);

/* The fairness table of issue 14 (bench/fairness.c), on server r. */
void fairness(hlt_redis *r);

#endif
