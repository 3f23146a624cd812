/* SPDX-License-Identifier: BSD-3-Clause */
/* common.c -- what every part of `make bench` uses (common.h). Calls only the public API and
 * the test fixtures; no part of bench/ is called from here. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "common.h"

int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void die(const char *what, const char *why)
{
    fprintf(stderr, "bench: %s: %s\n", what, why);
    exit(1);
}

int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* nearest-rank percentile of a sorted array, in ms */
double pct_ms(const int64_t *v, size_t n, double q)
{
    size_t i;
    if (n == 0) return 0;
    i = (size_t)(q * (double)n + 0.999999);
    if (i < 1) i = 1;
    return (double)v[(i > n ? n : i) - 1] / 1000.0;
}

hilock_client *client_with(const char *const *urls, size_t n, void (*tune)(hilock_options *o))
{
    hilock_options o;
    hilock_client *c;
    hilock_options_init(&o);
    o.servers = urls;
    o.nservers = n;
    if (tune) tune(&o);
    if (hilock_client_new(&o, &c) != HILOCK_OK) die("client", hilock_last_config_error());
    return c;
}

void tune_no_wake(hilock_options *o)
{
    o->wake = 0;
}

void in_processes(int n, void (*body)(int i, void *arg), void *arg, const char *what)
{
    pid_t *pid = calloc((size_t)n, sizeof *pid);
    if (!pid) die("calloc", "out of memory");
    fflush(stdout);   /* or each child would print what is buffered again */
    for (int i = 0; i < n; i++) {
        if ((pid[i] = fork()) < 0) die("fork", strerror(errno));
        if (pid[i] == 0) {
            body(i, arg);
            _exit(0);
        }
    }
    for (int i = 0; i < n; i++) {
        int st;
        if (waitpid(pid[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) die(what, "failed");
    }
    free(pid);
}

/* This process's CPU time (user + system), us: less sensitive to a busy machine than the
 * wall clock. */
int64_t cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 + ru.ru_utime.tv_usec +
           ru.ru_stime.tv_usec;
}

int64_t server_cpu_us(hlt_redis *r)
{
    redisReply *rep = hlt_cmd(r, "INFO cpu");
    const char *u = rep && rep->str ? strstr(rep->str, "used_cpu_user:") : NULL,
               *s = rep && rep->str ? strstr(rep->str, "used_cpu_sys:") : NULL;
    int64_t t = u && s ? (int64_t)((atof(u + 14) + atof(s + 13)) * 1e6) : 0;
    if (rep) freeReplyObject(rep);
    return t;
}
