/* SPDX-License-Identifier: BSD-3-Clause */
/* common.h -- what every part of `make bench` uses (common.c): the clock, the exit on a setup
 * failure, percentiles, how a client is made, and running a body in several processes. */
#ifndef HILOCK_BENCH_COMMON_H
#define HILOCK_BENCH_COMMON_H

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

#endif
