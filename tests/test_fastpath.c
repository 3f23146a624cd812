/* SPDX-License-Identifier: BSD-3-Clause */
/* test_fastpath.c -- options.fencing = 0 (issue 14, "fast path without fencing"): the modern
 * lock granted by one plain SET NX PX, without a fencing token, keeping everything else the
 * modern lock promises -- release/extend/check by exact compare, wake-on-release, undo of
 * unknown writes, keepalive, Redlock, Sentinel failover awareness and WAIT -- and excluding
 * fenced clients on the same key. Real redis-servers; every test asserts the status and what
 * is left in Redis, read back on a separate connection. Timing asserts are generous upper
 * bounds only. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "clients.h"
#include "fixture.h"
#include "hilock.h"
#include "hilock_legacy.h"
#include "sentinel_fixture.h"

#define SLOW_POLL_MS 10000   /* a fallback this slow cannot explain a prompt acquire */

HLT_SUITE_WITH_SERVER(fastpath, R, .timeout = 60);

static hilock *must_acquire(hilock_client *c, const char *key, int64_t ttl, int64_t wait)
{
    hilock *l = NULL;
    hilock_status st = hilock_acquire(c, key, ttl, wait, &l);
    cr_assert_eq(st, HILOCK_OK, "acquire %s: %s (%s)", key, hilock_strerror(st), hilock_client_errmsg(c));
    return l;
}

static long long nkeys(hlt_redis *r, const char *pattern)
{
    redisReply *rep = hlt_cmd(r, "KEYS %s", pattern);
    long long n = rep && rep->type == REDIS_REPLY_ARRAY ? (long long)rep->elements : -1;
    if (rep) freeReplyObject(rep);
    return n;
}

/* ---- the grant ---- */

Test(fastpath, acquire_writes_exactly_the_token_with_the_ttl_and_no_fence_key)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    o.fencing = 0;
    hilock_client *c = hlt_client_new(&o);
    hilock *l;
    long long pttl;
    redisReply *rep = hlt_cmd(R, "CONFIG RESETSTAT");
    freeReplyObject(rep);
    l = must_acquire(c, "job", 30000, 0);
    hlt_holds(R, "job", hilock_token(l));
    cr_assert_eq(strlen(hilock_token(l)), 32);
    pttl = hlt_pttl(R, "job");
    cr_assert(pttl > 25000 && pttl <= 30000, "pttl %lld", pttl);
    cr_assert_eq(hilock_fence(l), 0);
    cr_assert_eq(hlt_exists(R, "{job}:fence"), 0, "no fencing counter");
    cr_assert_eq(nkeys(R, "*"), 1, "the lock key alone");
    /* one plain SET: no script ran for the grant (the connection's handshake aside) */
    cr_assert_eq(hlt_info_int(R, "commandstats", "cmdstat_set:calls="), 1);
    cr_assert_eq(hlt_info_int(R, "commandstats", "cmdstat_evalsha:calls="), -1);
    cr_assert_eq(hlt_info_int(R, "commandstats", "cmdstat_eval:calls="), -1);
    cr_assert_gt(hilock_validity_ms(l), 25000);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(nkeys(R, "*"), 0, "nothing left");
    hilock_free(l);
    hilock_client_free(c);
}

Test(fastpath, release_extend_and_check_compare_the_exact_value)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    o.fencing = 0;
    hilock_client *c = hlt_client_new(&o);
    hilock *l = must_acquire(c, "job", 5000, 0);
    redisReply *rep;
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_extend(l, 60000), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_gt(hlt_pttl(R, "job"), 55000);
    cr_assert_gt(hilock_validity_ms(l), 55000);
    hlt_holds(R, "job", hilock_token(l));

    rep = hlt_cmd(R, "SET job someone-else PX 60000");   /* taken behind our back */
    freeReplyObject(rep);
    cr_assert_eq(hilock_check(l), HILOCK_NOT_HELD);
    cr_assert_eq(hilock_extend(l, 60000), HILOCK_NOT_HELD);
    cr_assert_eq(hilock_release(l), HILOCK_NOT_HELD);
    cr_assert(strstr(hilock_client_errmsg(c), "another owner"), "%s", hilock_client_errmsg(c));
    hlt_holds(R, "job", "someone-else");   /* never touched */
    hilock_free(l);

    rep = hlt_cmd(R, "DEL job");
    freeReplyObject(rep);
    l = must_acquire(c, "job", 5000, 0);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hlt_holds(R, "job", NULL);
    cr_assert_eq(hilock_release(l), HILOCK_NOT_HELD, "a second release");
    hilock_free(l);
    hilock_client_free(c);
}

Test(fastpath, a_busy_try_lock_is_busy_and_leaves_the_holder_alone)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    o.fencing = 0;
    hilock_client *c1 = hlt_client_new(&o), *c2 = hlt_client_new(&o);
    hilock *l = must_acquire(c1, "job", 30000, 0), *l2 = NULL;
    cr_assert_eq(hilock_acquire(c2, "job", 30000, 0, &l2), HILOCK_BUSY);
    cr_assert_null(l2);
    cr_assert(strstr(hilock_client_errmsg(c2), "job: held by another owner"), "%s", hilock_client_errmsg(c2));
    hlt_holds(R, "job", hilock_token(l));
    cr_assert_eq(hlt_exists(R, "{job}:waiters"), 0, "a try-lock does not wait: no mark");
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c1);
    hilock_client_free(c2);
}

Test(fastpath, a_wait_gives_up_at_its_deadline_with_busy)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    o.fencing = 0;
    hilock_client *c1 = hlt_client_new(&o), *c2 = hlt_client_new(&o);
    hilock *l = must_acquire(c1, "job", 30000, 0), *l2 = NULL;
    long long t0 = hlt_now_ms();
    cr_assert_eq(hilock_acquire(c2, "job", 30000, 300, &l2), HILOCK_BUSY);
    cr_assert_lt(hlt_now_ms() - t0, 5000, "bounded by its wait");
    cr_assert_geq(hlt_now_ms() - t0, 300);
    hlt_holds(R, "job", hilock_token(l));
    cr_assert_gt(hlt_pttl(R, "{job}:waiters"), 0, "the waiter marked the lock awaited, with a ttl");
    hilock_free(l);
    hilock_client_free(c1);
    hilock_client_free(c2);
}

Test(fastpath, a_key_of_another_type_is_ereply_and_untouched)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    o.fencing = 0;
    hilock_client *c = hlt_client_new(&o);
    hilock *l = NULL;
    redisReply *rep = hlt_cmd(R, "HSET job f v");
    freeReplyObject(rep);
    cr_assert_eq(hilock_acquire(c, "job", 5000, 2000, &l), HILOCK_EREPLY, "%s", hilock_client_errmsg(c));
    cr_assert(strstr(hilock_client_errmsg(c), "WRONGTYPE"), "%s", hilock_client_errmsg(c));
    cr_assert_null(l);
    rep = hlt_cmd(R, "TYPE job");
    cr_assert_str_eq(rep->str, "hash");
    freeReplyObject(rep);
    cr_assert_eq(nkeys(R, "*"), 1, "nothing written");
    hilock_client_free(c);
}

/* ---- waiting ---- */

typedef struct waiter {
    hilock_client *c;
    const char    *key;
    int64_t        wait_ms;
    hilock_status  st, rel;
    long long      t_acquired;
    pthread_t      th;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    hilock *l = NULL;
    w->st = hilock_acquire(w->c, w->key, 30000, w->wait_ms, &l);
    w->t_acquired = hlt_now_ms();
    if (w->st == HILOCK_OK) {
        w->rel = hilock_release(l);
        hilock_free(l);
    }
    return NULL;
}

/* A holder of one kind, a waiter of the other (or the same): the release wakes the waiter. */
static void woken_by_release(int holder_fencing, int waiter_fencing)
{
    const char *url = R->url, *uurl = R->unix_url;
    hilock_options o = hlt_options(&url, 1);
    o.retry_delay_ms = 50;
    o.fencing = holder_fencing;
    hilock_client *hc = hlt_client_new(&o);
    hilock *h = must_acquire(hc, "job", 30000, 0);
    hilock_options o2 = hlt_options(&uurl, 1);
    o2.retry_delay_ms = SLOW_POLL_MS;
    o2.fencing = waiter_fencing;
    waiter w = { hlt_client_new(&o2), "job", 20000, HILOCK_EINVAL,
                 HILOCK_EINVAL, 0, 0 };
    long long end = hlt_now_ms() + 5000, t_rel;
    cr_assert_eq(pthread_create(&w.th, NULL, waiter_main, &w), 0);
    while (hlt_info_int(R, "clients", "blocked_clients:") != 1 && hlt_now_ms() < end) hlt_sleep_ms(2);
    cr_assert_eq(hlt_info_int(R, "clients", "blocked_clients:"), 1, "the waiter blocks on the signal");
    cr_assert_gt(hlt_pttl(R, "{job}:waiters"), 0, "its busy attempt marked the lock awaited");
    t_rel = hlt_now_ms();
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    pthread_join(w.th, NULL);
    cr_assert_eq(w.st, HILOCK_OK, "%s", hilock_client_errmsg(w.c));
    cr_assert_eq(w.rel, HILOCK_OK);
    /* the fallback poll would take >= 5 s, the holder's ttl 30 s */
    cr_assert_lt(w.t_acquired - t_rel, 2000, "took %lld ms after the release", w.t_acquired - t_rel);
    cr_assert_eq(hlt_exists(R, "job"), 0);
    cr_assert_eq(hlt_exists(R, "{job}:fence"), holder_fencing || waiter_fencing ? 1 : 0);
    hilock_free(h);
    hilock_client_free(hc);
    hilock_client_free(w.c);
}

Test(fastpath, release_wakes_a_blocked_waiter) { woken_by_release(0, 0); }
Test(fastpath, a_fenced_release_wakes_an_unfenced_waiter) { woken_by_release(1, 0); }
Test(fastpath, an_unfenced_release_wakes_a_fenced_waiter) { woken_by_release(0, 1); }

/* ---- mutual exclusion, fenced and unfenced clients mixed ---- */

#define NWORKERS 4
#define ROUNDS   100

typedef struct worker {
    int       id, fencing;
    pthread_t th;
    int       fails;
    int       overlaps;
} worker;

static int holder = -1;   /* who is in the critical section, by this process's own account */

static void *worker_main(void *arg)
{
    worker *w = arg;
    const char *url = R->url;
    hilock_options o = hlt_options(&url, 1);
    hilock_client *c = NULL;
    redisContext *rc = redisConnect("127.0.0.1", R->port);
    o.fencing = w->fencing;
    o.retry_delay_ms = 5;
    if (hilock_client_new(&o, &c) != HILOCK_OK || !rc || rc->err) {
        w->fails++;
        return NULL;
    }
    for (int i = 0; i < ROUNDS; i++) {
        hilock *l;
        redisReply *rep;
        long long v;
        if (hilock_acquire(c, "counter:lock", 10000, 20000, &l) != HILOCK_OK) {
            w->fails++;
            continue;
        }
        if (__atomic_exchange_n(&holder, w->id, __ATOMIC_SEQ_CST) != -1) w->overlaps++;
        /* a read-modify-write that only mutual exclusion keeps exact */
        rep = redisCommand(rc, "GET counter");
        v = rep && rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
        if (rep) freeReplyObject(rep);
        rep = redisCommand(rc, "SET counter %lld", v + 1);
        if (rep) freeReplyObject(rep);
        __atomic_store_n(&holder, -1, __ATOMIC_SEQ_CST);
        if (hilock_release(l) != HILOCK_OK) w->fails++;
        hilock_free(l);
    }
    redisFree(rc);
    hilock_client_free(c);
    return NULL;
}

Test(fastpath, fenced_and_unfenced_clients_never_overlap)
{
    worker w[NWORKERS];
    char *v;
    memset(w, 0, sizeof w);
    for (int i = 0; i < NWORKERS; i++) {
        w[i].id = i;
        w[i].fencing = i % 2;
        cr_assert_eq(pthread_create(&w[i].th, NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < NWORKERS; i++) {
        pthread_join(w[i].th, NULL);
        cr_assert_eq(w[i].fails, 0, "worker %d (fencing %d) failed %d times", i, w[i].fencing, w[i].fails);
        cr_assert_eq(w[i].overlaps, 0, "worker %d saw another holder", i);
    }
    v = hlt_get(R, "counter");
    cr_assert_not_null(v);
    cr_assert_eq(atoll(v), NWORKERS * ROUNDS, "counter %s", v);
    free(v);
    cr_assert_eq(hlt_exists(R, "counter:lock"), 0);
}

/* ---- failures, keepalive, other kinds ---- */

Test(fastpath, an_acquire_that_timed_out_is_undone_on_the_next_contact)
{
    const char *url = R->url;
    hilock_options o = hlt_options(&url, 1);
    o.retry_delay_ms = 10;
    o.fencing = 0;
    o.io_timeout_ms = 300;
    hilock_client *c = hlt_client_new(&o);
    hilock *l = must_acquire(c, "warmup", 5000, 3000);
    long long end;
    hilock_free(l);
    l = NULL;
    hlt_redis_freeze(R);
    cr_assert_eq(hilock_acquire(c, "k", 30000, 0, &l), HILOCK_ETIMEDOUT);
    cr_assert_null(l);
    hlt_redis_thaw(R);
    /* the server still runs the SET it had buffered: it lands after the timeout */
    end = hlt_now_ms() + 3000;
    while (hlt_exists(R, "k") != 1 && hlt_now_ms() < end) hlt_sleep_ms(10);
    cr_assert_eq(hlt_exists(R, "k"), 1, "the buffered SET never ran");
    /* the next call on this client first deletes it by token: it is free again at once */
    l = must_acquire(c, "k", 5000, 0);
    hlt_release_gone(R, NULL, l, "k");
    hilock_client_free(c);
}

Test(fastpath, keepalive_renews_an_unfenced_lock_past_its_ttl)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    o.fencing = 0;
    hilock_client *c = hlt_client_new(&o);
    hilock *l = must_acquire(c, "job", 600, 0);
    cr_assert_eq(hilock_keepalive(l, NULL, NULL), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_sleep_ms(1500);
    hlt_holds(R, "job", hilock_token(l));
    cr_assert_gt(hilock_validity_ms(l), 0);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hlt_holds(R, "job", NULL);
    cr_assert_eq(hlt_exists(R, "{job}:fence"), 0);
    hilock_free(l);
    hilock_client_free(c);
}

Test(fastpath, legacy_acquire_keeps_its_fencing_token)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    o.fencing = 0;
    hilock_client *c = hlt_client_new(&o);
    hilock *l = NULL;
    cr_assert_eq(hilock_legacy_acquire(c, "old", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_gt(hilock_fence(l), 0, "the recipe's script mints it as before");
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
}

/* ---- bad input ---- */

Test(fastpath, fencing_other_than_0_or_1_is_einval_at_client_creation)
{
    const int bad[] = { -1, 2, 100 };
    const char *url = R->url;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hilock_options o;
        hilock_client *c = (hilock_client *)&o;
        hilock_options_init(&o);
        o.servers = &url;
        o.nservers = 1;
        o.fencing = bad[i];
        cr_assert_eq(hilock_client_new(&o, &c), HILOCK_EINVAL, "fencing %d", bad[i]);
        cr_assert_null(c);
        cr_assert(strstr(hilock_last_config_error(), "fencing must be 0 or 1"), "%s",
                  hilock_last_config_error());
    }
    cr_assert_eq(nkeys(R, "*"), 0);
}

Test(fastpath, fencing_0_with_bridge_is_einval_at_client_creation)
{
    const char *url = R->url;
    hilock_options o;
    hilock_client *c = NULL;
    hilock_options_init(&o);
    cr_assert_eq(o.fencing, 1, "the default keeps today's behaviour");
    o.servers = &url;
    o.nservers = 1;
    o.fencing = 0;
    o.bridge = 1;
    cr_assert_eq(hilock_client_new(&o, &c), HILOCK_EINVAL);
    cr_assert_null(c);
    cr_assert(strstr(hilock_last_config_error(), "bridge"), "%s", hilock_last_config_error());
    cr_assert_eq(nkeys(R, "*"), 0);
}

/* ---- Redlock ---- */

Test(fastpath, redlock_of_three_grants_everywhere_without_a_fence)
{
    hlt_redis *m[3] = { R, hlt_redis_start(NULL), hlt_redis_start(NULL) };
    const char *urls[3];
    hilock_client *c, *c2;
    hilock *l, *l2 = NULL;
    cr_assert(m[1] && m[2]);
    for (int i = 0; i < 3; i++) urls[i] = m[i]->url;
    hilock_options o = hlt_options(urls, 3);
    o.retry_delay_ms = 10;
    o.fencing = 0;
    c = hlt_client_new(&o);
    o.fencing = 1;
    c2 = hlt_client_new(&o);
    l = must_acquire(c, "job", 30000, 0);
    cr_assert_eq(hilock_fence(l), 0);
    for (int i = 0; i < 3; i++) {
        hlt_holds(m[i], "job", hilock_token(l));
        cr_assert_gt(hlt_pttl(m[i], "job"), 25000);
        cr_assert_eq(hlt_exists(m[i], "{job}:fence"), 0, "master %d has a fencing counter", i);
    }
    /* a fenced Redlock client is kept out, and writes nothing that stays */
    cr_assert_eq(hilock_acquire(c2, "job", 30000, 0, &l2), HILOCK_BUSY, "%s", hilock_client_errmsg(c2));
    cr_assert(strstr(hilock_client_errmsg(c2), "held by another owner on 3 of 3 masters"), "%s",
              hilock_client_errmsg(c2));
    cr_assert_eq(hilock_extend(l, 60000), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    for (int i = 0; i < 3; i++) hlt_holds(m[i], "job", NULL);
    hilock_free(l);
    /* one master down: still a quorum */
    hlt_redis_kill(m[2]);
    l = must_acquire(c, "job", 30000, 0);
    cr_assert_eq(hilock_fence(l), 0);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    hilock_client_free(c);
    hilock_client_free(c2);
    hlt_redis_stop(m[1]);
    hlt_redis_stop(m[2]);
}

/* ---- Sentinel ---- */

static hlt_sentinel *SF;

static void sentinel_fini(void)
{
    hlt_sentinel_stop(SF);
    SF = NULL;
}

/* failover.lua and WAIT ride along the plain SET: identity is recorded at the grant (the lock
 * survives a clean failover, proven against the new master), WAIT counts the replica, the
 * Sentinel epoch does not turn "no token" into one, and the guard holds after the failover. */
Test(fastpath, sentinel_failover_awareness_and_wait_work_without_a_script, .fini = sentinel_fini,
     .timeout = 120)
{
    HLT_NEEDS(40000, "Sentinel needs replication ids (PSYNC2, Redis 4.0+)");
    hilock_options o;
    hilock_client *c1 = NULL, *c2 = NULL;
    hilock *l, *l2 = NULL;
    char *v;
    SF = hlt_sentinel_start();
    cr_assert_not_null(SF, "sentinel fixture did not start");
    o = hlt_options((const char *const[]){ SF->url }, 1);
    o.fencing = 0;
    o.min_replicas = 1;
    o.replicas_timeout_ms = 3000;   /* generous: a loaded machine's replica may lag 100 ms */
    o.retry_delay_ms = 20;
    c1 = hlt_client_new(&o);
    o.min_replicas = 0;
    c2 = hlt_client_new(&o);

    l = must_acquire(c1, "job", 30000, 0);   /* WAIT 1: the replica has it on return */
    cr_assert_eq(hilock_fence(l), 0);
    cr_assert_eq(hlt_sentinel_master(SF), 0);
    v = hlt_data_get(SF, 1, "job");
    cr_assert(v && !strcmp(v, hilock_token(l)), "the replica acknowledged the grant");
    free(v);
    cr_assert_eq(hlt_data_exists(SF, 0, "{job}:fence"), 0);

    cr_assert_eq(hlt_sentinel_failover(SF, 0), 0, "failover did not complete");
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c1));
    cr_assert_eq(hilock_acquire(c2, "job", 30000, 0, &l2), HILOCK_BUSY, "%s", hilock_client_errmsg(c2));
    cr_assert_null(l2);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c1));
    cr_assert_eq(hlt_data_exists(SF, 1, "job"), 0);
    /* the key is free, but the new master guards: failover.lua deletes the plain SET's value */
    cr_assert_eq(hilock_acquire(c2, "job", 30000, 0, &l2), HILOCK_BUSY);
    cr_assert(strstr(hilock_client_errmsg(c2), "failover guard"), "%s", hilock_client_errmsg(c2));
    cr_assert_eq(hlt_data_exists(SF, 1, "job"), 0);
    hilock_free(l);
    hilock_client_free(c1);
    hilock_client_free(c2);
}
