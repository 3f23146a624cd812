/* SPDX-License-Identifier: BSD-3-Clause */
/* holders.h -- Criterion helpers for the suites of the zset kinds (test_sem.c, test_rw.c): the
 * holders' sorted set read back on a separate connection, the server's clock, a snapshot of a
 * whole database (to prove a refusal wrote nothing), and an acquire run on a thread of its
 * own (a waiter), with its own client, joined within a bound. */
#ifndef HILOCK_TEST_HOLDERS_H
#define HILOCK_TEST_HOLDERS_H

#include <pthread.h>
#include <stdint.h>
#include "fixture.h"
#include "hilock.h"

/* ZCARD key (-99 if the server did not answer with an integer). */
long long hlt_zcard(hlt_redis *r, const char *key);
/* ZSCORE key member: 1 and *score if the member is there, 0 if not ("inf" reads as 1e300). */
int       hlt_zscore(hlt_redis *r, const char *key, const char *member, double *score);
/* The server's clock (TIME) in ms since 1970. */
long long hlt_server_ms(hlt_redis *r);
/* Poll (every 5 ms, at most limit_ms) until ZCARD key == n; the last count seen. */
long long hlt_await_zcard(hlt_redis *r, const char *key, long long n, long limit_ms);
/* Every key of the database (key NULL), or key alone, with its type and DUMP, sorted:
 * malloc'd text to compare. */
char     *hlt_db_snapshot(hlt_redis *r, const char *key);

/* What a waiter asks: hilock_sem_acquire (limit > 0), hilock_rw_acquire (limit 0), or
 * hilock_acquire (plain = 1). */
typedef struct hlt_bg {
    const char     *url, *key;
    const char *const *urls;           /* several masters (Redlock): nurls of them, else url */
    size_t          nurls;
    int             limit, plain;
    hilock_rw_mode  mode;
    int64_t         ttl_ms, wait_ms, retry_delay_ms;
    int64_t         poll_ms;           /* 0: retry_delay_ms if given, else the default */
    int             no_wake;           /* options.wake = 0: polling only */
    int             fair;              /* options.fair = 1 (with plain: the fair lock) */
    /* filled in */
    hilock_client  *c;
    hilock         *l;
    hilock_status   st;
    char            err[256];
    long long       t_start, t_done;   /* hlt_now_ms() */
    int             done;
    pthread_t       th;
} hlt_bg;

/* Ask q's acquire (its key, kind, ttl and wait) on c, in this thread. */
hilock_status hlt_ask(hilock_client *c, const hlt_bg *q, hilock **out);
/* Ask q on c: it must answer `want` with *out NULL and an errmsg holding `says`, and leave the
 * database (whole = 0: q's key alone, for a test whose waiter writes its own keys meanwhile)
 * as it was, the key's ttl not renewed. */
void hlt_assert_unchanged_by(hlt_redis *r, hilock_client *c, const hlt_bg *q, hilock_status want,
                             const char *says, int whole);
/* l's token is a member of its key, scored its expiry by r's clock: now + ttl (- 2 s). */
void hlt_assert_expiry(hlt_redis *r, const hilock *l, int64_t ttl);

/* Make bg's client (on bg->url, retry_delay_ms as given, 50 if 0) and start its acquire on
 * a new thread. */
void hlt_bg_start(hlt_bg *bg);
/* Has it returned (without waiting)? */
int  hlt_bg_done(hlt_bg *bg);
/* Join it within limit_ms (asserts it returned); its status. */
hilock_status hlt_bg_join(hlt_bg *bg, long limit_ms);
/* Release (if held) and free its lock and client. */
void hlt_bg_free(hlt_bg *bg);

#endif
