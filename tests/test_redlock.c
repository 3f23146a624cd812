/* SPDX-License-Identifier: BSD-3-Clause */
/* test_redlock.c -- the same API over N independent masters (Redlock), on real redis-servers.
 * Every test starts its own masters; timing asserts are generous upper bounds ("does not
 * hang", "does not wait for the full io_timeout") or bounds the design guarantees. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clients.h"
#include "fixture.h"
#include "hilock.h"
#include "base.h"   /* hl_lua_fence_raise */
#include "holders.h"   /* hlt_db_snapshot, hlt_server_ms */
#include "scenario.h"
#include "kind.h"   /* HL_FENCE_KEEP_MS, HL_FENCE_EPOCH_KEEP_MS */
#include "sentinel_fixture.h"

#define NMAX 5
#define IO_MS 5000   /* long on purpose: Redlock calls must finish far sooner */

typedef struct cluster {
    hlt_redis *m[NMAX];
    const char *url[NMAX + 1];
    int n;
} cluster;

static void start(cluster *k, int n)
{
    memset(k, 0, sizeof *k);
    k->n = n;
    for (int i = 0; i < n; i++) {
        k->m[i] = hlt_redis_start(NULL);
        cr_assert_not_null(k->m[i], "redis-server %d did not start", i);
        /* a mix of unix sockets and TCP: nothing may assume one kind of member */
        k->url[i] = i % 2 ? k->m[i]->unix_url : k->m[i]->url;
    }
}

static void stop(cluster *k)
{
    for (int i = 0; i < k->n; i++) hlt_redis_stop(k->m[i]);
}

/* The suite's client options (and maker): hlt_options's over urls, a long io timeout, waits retried
 * every 10 ms. */
static hilock_options options_for(const char *const *urls, int n)
{
    hilock_options o = hlt_options(urls, (size_t)n);
    o.io_timeout_ms = IO_MS;
    o.retry_delay_ms = 10;
    return o;
}

static hilock_client *client_for(const char *const *urls, int n)
{
    hilock_options o = options_for(urls, n);
    return hlt_client_new(&o);
}

/* How many of the first `upto` masters hold `value` at `key` (killed ones do not; frozen
 * ones must be left out, the read-back would wait for them). */
static int holders_in(cluster *k, int upto, const char *key, const char *value)
{
    int n = 0;
    for (int i = 0; i < upto; i++) {
        char *v = k->m[i]->pid > 0 ? hlt_get(k->m[i], key) : NULL;
        if (v && !strcmp(v, value)) n++;
        free(v);
    }
    return n;
}

static int holders(cluster *k, const char *key, const char *value)
{
    return holders_in(k, k->n, key, value);
}

static int with_key_in(cluster *k, int upto, const char *key)
{
    int n = 0;
    for (int i = 0; i < upto; i++)
        if (k->m[i]->pid > 0 && hlt_exists(k->m[i], key) == 1) n++;
    return n;
}

static int with_key(cluster *k, const char *key) { return with_key_in(k, k->n, key); }

static void set_on(hlt_redis *r, const char *key, const char *value, long long px)
{
    redisReply *rep = hlt_cmd(r, "SET %s %s PX %lld", key, value, px);
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
}

static unsigned long long fence_on(hlt_redis *r, const char *fence_key)
{
    char *v = hlt_get(r, fence_key);
    unsigned long long f = v ? strtoull(v, NULL, 10) : 0;
    free(v);
    return f;
}

static long long drift_ms(long long ttl) { return ttl / 100 + 2; }

/* n callers at once (begun by peers of r: on blocking, a client and a thread each; on the
 * loop, n calls in flight on r's client), keys prefix0..: each granted with its token on
 * every master of k, its fence minted; then, master `kill` down (-1: none), each released OK
 * where it can be, and no key left on a master still up. */
static void many_at_once(hlt_run *r, cluster *k, int n, const char *prefix, int kill)
{
    hlt_run *p[200];
    hilock *l[200];
    char key[64];
    cr_assert_leq(n, 200);
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s%d", prefix, i);
        p[i] = hlt_run_peer(r);
        hlt_run_begin_acquire(p[i], key, 30000, 0);
    }
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s%d", prefix, i);
        cr_assert_eq(hlt_run_end(p[i], 30000, &l[i]), HILOCK_OK, "acquire %s: %s", key, hlt_run_errmsg(p[i]));
        cr_assert_eq(holders(k, key, hilock_token(l[i])), k->n, "%s not ours on every master", key);
        cr_assert_gt(hilock_fence(l[i]), 0);
    }
    if (kill >= 0) hlt_redis_kill(k->m[kill]);   /* still a quorum: released where it can be */
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s%d", prefix, i);
        cr_assert_eq(hlt_run_release(p[i], l[i]), HILOCK_OK, "release %s: %s", key, hlt_run_errmsg(p[i]));
        cr_assert_eq(with_key(k, key), 0, "%s left on a master", key);
        hilock_free(l[i]);
        hlt_run_free(p[i]);
    }
}

/* Blocking and on the loop (tests/scenario.h): one token on every master, each key's PTTL the
 * ttl, the validity below it less the drift, a fence a quorum's counter is at or above;
 * checked, released (twice: said, not done again). Then many callers at once (16 clients
 * blocking, 200 calls in flight on one client on the loop) on keys of their own, each granted
 * on every master; with a master killed, every release is OK and nothing is left. */
HLT_SCENARIO(redlock, grants_on_every_master_with_one_token, .timeout = 60)
{
    cluster k;
    hilock *l;
    start(&k, 5);
    hilock_options o = options_for(k.url, k.n);
    hlt_run *r = hlt_run_new(&o, mode);
    cr_assert_eq(hlt_run_acquire(r, "res", 10000, 0, &l), HILOCK_OK, "%s", hlt_run_errmsg(r));
    cr_assert_str_eq(hlt_run_errmsg(r), "");
    cr_assert_eq(holders(&k, "res", hilock_token(l)), 5);
    for (int i = 0; i < 5; i++) {
        long long p = hlt_pttl(k.m[i], "res");
        cr_assert(p > 9000 && p <= 10000, "pttl %lld on master %d", p, i);
    }
    cr_assert(hilock_validity_ms(l) > 9000 && hilock_validity_ms(l) <= 10000 - drift_ms(10000));
    cr_assert(hilock_fence(l) > 1000000000000ULL);
    int at_or_above = 0;   /* a quorum holds a counter >= the token: later quorums mint more */
    for (int i = 0; i < 5; i++) at_or_above += fence_on(k.m[i], "{res}:fence") >= hilock_fence(l);
    cr_assert_geq(at_or_above, 3);
    cr_assert_eq(hlt_run_check(r, l), HILOCK_OK, "%s", hlt_run_errmsg(r));
    cr_assert_eq(hlt_run_release(r, l), HILOCK_OK, "%s", hlt_run_errmsg(r));
    cr_assert_eq(with_key(&k, "res"), 0);
    cr_assert_eq(hilock_validity_ms(l), 0);
    cr_assert_eq(hlt_run_release(r, l), HILOCK_NOT_HELD);   /* twice: said, not done again */
    hilock_free(l);
    many_at_once(r, &k, mode == HLT_ON_LOOP ? 200 : 16, "rl:", 4);
    hlt_run_free(r);
    stop(&k);
}

Test(redlock, works_with_two_masters_down)
{
    cluster k;
    hilock *l;
    start(&k, 5);
    hilock_client *c = client_for(k.url, k.n);
    hlt_redis_kill(k.m[0]);
    hlt_redis_kill(k.m[3]);
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(holders(&k, "res", hilock_token(l)), 3);
    cr_assert(hilock_validity_ms(l) > 9000);
    cr_assert_eq(hilock_extend(l, 20000), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(with_key(&k, "res"), 0);
    hilock_free(l);
    hilock_client_free(c);
    stop(&k);
}

Test(redlock, three_masters_down_is_enoquorum_at_once)
{
    cluster k;
    hilock *l = (hilock *)1;
    char want[128];
    const char *urls[5];
    start(&k, 5);
    for (int i = 0; i < 5; i++) urls[i] = k.m[i]->url;   /* TCP names in the message */
    hilock_client *c = client_for(urls, 5);
    for (int i = 0; i < 3; i++) hlt_redis_kill(k.m[i]);
    long long t = hlt_now_ms();
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_ENOQUORUM);
    cr_assert_lt(hlt_now_ms() - t, 1000, "refused connections must fail fast");
    cr_assert_null(l);
    const char *msg = hilock_client_errmsg(c);
    cr_assert(strstr(msg, "no quorum (granted on 2 of 5 masters, 3 needed): ") == msg, "%s", msg);
    snprintf(want, sizeof want, "127.0.0.1:%d: connect: Connection refused; 127.0.0.1:%d: connect: "
             "Connection refused; 127.0.0.1:%d: connect: Connection refused", k.m[0]->port,
             k.m[1]->port, k.m[2]->port);
    cr_assert(strstr(msg, want), "%s", msg);
    cr_assert_eq(with_key(&k, "res"), 0, "the partial grant on the live two is undone");
    /* waiting does not change the verdict, and the wait stays bounded */
    t = hlt_now_ms();
    cr_assert_eq(hilock_acquire(c, "res", 10000, 300, &l), HILOCK_ENOQUORUM);
    cr_assert_lt(hlt_now_ms() - t, 2000);
    cr_assert_eq(with_key(&k, "res"), 0);
    hilock_client_free(c);
    stop(&k);
}

Test(redlock, frozen_master_costs_the_per_master_timeout_not_io_timeout)
{
    cluster k;
    hilock *l, *l2;
    start(&k, 5);
    hilock_client *c = client_for(k.url, k.n);
    hlt_redis_freeze(k.m[4]);
    long long t = hlt_now_ms();
    /* ttl 10 s: each master gets 5% = 500 ms, far below io_timeout (5 s) */
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    long long took = hlt_now_ms() - t;
    cr_assert_lt(took, 2500, "acquire took %lld ms", took);
    cr_assert_geq(took, 400, "the frozen master was given its time (%lld ms)", took);
    cr_assert(hilock_validity_ms(l) <= 10000 - drift_ms(10000) - 400);
    cr_assert(hilock_validity_ms(l) > 8000);
    cr_assert_eq(holders_in(&k, 4, "res", hilock_token(l)), 4);
    t = hlt_now_ms();
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_lt(hlt_now_ms() - t, 2500);
    cr_assert_eq(with_key_in(&k, 4, "res"), 0);
    hlt_redis_thaw(k.m[4]);
    hlt_sleep_ms(200);   /* it now runs what was queued for it, in any order */
    /* our write may have landed late on the thawed master; the next contact undoes it */
    cr_assert_eq(hilock_acquire(c, "other", 10000, 0, &l2), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_exists(k.m[4], "res"), 0);
    cr_assert_eq(holders(&k, "other", hilock_token(l2)), 5);
    cr_assert_eq(hilock_release(l2), HILOCK_OK);
    hilock_free(l2);
    hilock_free(l);
    hilock_client_free(c);
    stop(&k);
}

/* Values with no TTL on enough masters that no wait can end: BUSY says so (the command
 * prints it before it waits); on too few to rule us out alone, no such hint. */
Test(redlock, holders_without_a_ttl_on_a_quorums_worth_of_masters_are_named_as_never_expiring)
{
    cluster k;
    hilock *b = NULL;
    start(&k, 3);
    hilock_client *c = client_for(k.url, k.n);
    freeReplyObject(hlt_cmd(k.m[0], "SET res 1700000000.5"));
    freeReplyObject(hlt_cmd(k.m[1], "SET res 1700000000.5"));
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &b), HILOCK_BUSY, "%s", hilock_client_errmsg(c));
    cr_assert(strstr(hilock_client_errmsg(c), "res: held by another owner on 2 of 3 masters; res has no TTL: "
                     "it will never expire by itself on 2 of them (see hilock inspect res; hilock break "
                     "removes it): "),
              "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_exists(k.m[2], "res"), 0, "the partial grant was undone");
    freeReplyObject(hlt_cmd(k.m[1], "PEXPIRE res 30000"));
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &b), HILOCK_BUSY, "%s", hilock_client_errmsg(c));
    cr_assert_null(strstr(hilock_client_errmsg(c), "has no TTL"), "%s", hilock_client_errmsg(c));
    hilock_client_free(c);
    stop(&k);
}

Test(redlock, quorum_held_by_another_client_is_busy)
{
    cluster k;
    hilock *a, *b = (hilock *)1;
    start(&k, 5);
    hilock_client *ca = client_for(k.url, k.n), *cb = client_for(k.url, k.n);
    cr_assert_eq(hilock_acquire(ca, "res", 10000, 0, &a), HILOCK_OK, "%s", hilock_client_errmsg(ca));
    cr_assert_eq(hilock_acquire(cb, "res", 10000, 0, &b), HILOCK_BUSY);
    cr_assert_null(b);
    cr_assert(strstr(hilock_client_errmsg(cb), "res: held by another owner on 5 of 5 masters: "),
              "%s", hilock_client_errmsg(cb));
    {   /* each master's line says the holder's time as a single-master BUSY does (hl_ms_shown) */
        const char *m = strstr(hilock_client_errmsg(cb), ": held by another owner, expires in ");
        double s = 0;
        cr_assert(m && sscanf(m, ": held by another owner, expires in %lf s", &s) == 1 && s > 5 && s <= 10.0,
                  "%s", hilock_client_errmsg(cb));
    }
    long long t = hlt_now_ms();
    cr_assert_eq(hilock_acquire(cb, "res", 10000, 200, &b), HILOCK_BUSY);
    cr_assert_geq(hlt_now_ms() - t, 200);
    cr_assert_lt(hlt_now_ms() - t, 3000);
    cr_assert_eq(holders(&k, "res", hilock_token(a)), 5, "B changed nothing");
    cr_assert_eq(hilock_release(a), HILOCK_OK);
    cr_assert_eq(hilock_acquire(cb, "res", 10000, 0, &b), HILOCK_OK, "%s", hilock_client_errmsg(cb));
    cr_assert_eq(holders(&k, "res", hilock_token(b)), 5);
    cr_assert_eq(hilock_release(b), HILOCK_OK);
    hilock_free(a);
    hilock_free(b);
    hilock_client_free(ca);
    hilock_client_free(cb);
    stop(&k);
}

Test(redlock, minority_held_by_a_crashed_client_does_not_block)
{
    cluster k;
    hilock *l;
    start(&k, 5);
    hilock_client *c = client_for(k.url, k.n);
    set_on(k.m[0], "res", "crashed-holder", 60000);
    set_on(k.m[1], "res", "crashed-holder", 60000);
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(holders(&k, "res", hilock_token(l)), 3);
    cr_assert_eq(hilock_extend(l, 10000), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(holders(&k, "res", "crashed-holder"), 2, "never touch a value that is not ours");
    cr_assert_eq(with_key(&k, "res"), 2);
    hilock_free(l);
    hilock_client_free(c);
    stop(&k);
}

/* Blocking and on the loop (tests/scenario.h): another owner on 3 of 5 masters: BUSY saying
 * so, the two grants undone; again with a wait, each attempt gives its partial grant back (the
 * fence counter alone is left, expiring). Then another owner on two, two masters down: the one
 * grant the call got is undone, the other owner's keys untouched. */
HLT_SCENARIO(redlock, partial_grants_are_undone_after_a_failed_attempt)
{
    cluster k;
    hilock *l;
    hilock_status st;
    start(&k, 5);
    hilock_options o = options_for(k.url, k.n);
    hlt_run *r = hlt_run_new(&o, mode);
    for (int i = 0; i < 3; i++) set_on(k.m[i], "res", "other-owner", 60000);
    cr_assert_eq(hlt_run_acquire(r, "res", 10000, 0, &l), HILOCK_BUSY, "%s", hlt_run_errmsg(r));
    cr_assert(strstr(hlt_run_errmsg(r), "held by another owner on 3 of 5 masters"), "%s", hlt_run_errmsg(r));
    cr_assert_eq(hlt_exists(k.m[3], "res"), 0);
    cr_assert_eq(hlt_exists(k.m[4], "res"), 0);
    /* several attempts: each one gives its partial grant back before the next */
    cr_assert_eq(hlt_run_acquire(r, "res", 10000, 300, &l), HILOCK_BUSY, "%s", hlt_run_errmsg(r));
    for (int i = 3; i < 5; i++) {
        cr_assert_eq(hlt_exists(k.m[i], "res"), 0);
        /* what is left is the fence counter, and it expires (ttl + 1 h), and the client's
         * holder record (2 x ttl: acquire.lua) */
        cr_assert_leq(hlt_dbsize(k.m[i]), 2);
        long long p = hlt_pttl(k.m[i], "{res}:fence");
        cr_assert(p > 0 && p <= 10000 + 3600 * 1000, "fence pttl %lld", p);
        p = hlt_pttl(k.m[i], "{res}:holder");
        cr_assert(p == -2 || (p > 0 && p <= 2 * 10000), "holder record pttl %lld", p);
    }
    cr_assert_eq(holders(&k, "res", "other-owner"), 3);
    /* the other owner on masters 0 and 1 only, 3 and 4 down: the grant on 2 alone is undone */
    freeReplyObject(hlt_cmd(k.m[2], "DEL res"));
    hlt_redis_kill(k.m[3]);
    hlt_redis_kill(k.m[4]);
    st = hlt_run_acquire(r, "res", 10000, 0, &l);
    cr_assert(st == HILOCK_BUSY || st == HILOCK_ENOQUORUM, "%s: %s", hilock_strerror(st), hlt_run_errmsg(r));
    cr_assert_null(l);
    cr_assert_eq(hlt_exists(k.m[2], "res"), 0, "the grant on master 2 alone was not undone");
    cr_assert_eq(holders(&k, "res", "other-owner"), 2, "another owner's key was touched");
    hlt_run_free(r);
    stop(&k);
}

Test(redlock, extend_on_a_majority_recomputes_validity)
{
    cluster k;
    hilock *l;
    start(&k, 5);
    hilock_client *c = client_for(k.url, k.n);
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_redis_kill(k.m[1]);
    hlt_redis_kill(k.m[2]);
    cr_assert_eq(hilock_extend(l, 30000), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert(hilock_validity_ms(l) > 20000 && hilock_validity_ms(l) <= 30000 - drift_ms(30000));
    for (int j = 0; j < 3; j++) {
        int i = (int[]){ 0, 3, 4 }[j];   /* the live ones */
        long long p = hlt_pttl(k.m[i], "res");
        cr_assert(p > 20000 && p <= 30000, "pttl %lld on master %d", p, i);
    }
    /* one more down: no majority answers, so no verdict; the lock keeps its validity */
    hlt_redis_kill(k.m[3]);
    int64_t before = hilock_validity_ms(l);
    cr_assert_eq(hilock_extend(l, 60000), HILOCK_ENOQUORUM);
    cr_assert(strstr(hilock_client_errmsg(c), "extend: no quorum (answered 2 of 5 masters, 3 needed): "),
              "%s", hilock_client_errmsg(c));
    cr_assert_leq(hilock_validity_ms(l), before);
    cr_assert(hilock_validity_ms(l) > 20000);
    hilock_free(l);
    hilock_client_free(c);
    stop(&k);
}

Test(redlock, extend_with_too_few_masters_keeps_the_shorter_validity)
{
    cluster k;
    hilock *l;
    start(&k, 5);
    hilock_client *c = client_for(k.url, k.n);
    cr_assert_eq(hilock_acquire(c, "res", 30000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    for (int i = 0; i < 3; i++) hlt_redis_kill(k.m[i]);
    cr_assert_eq(hilock_extend(l, 5000), HILOCK_ENOQUORUM);
    /* the shorter ttl landed on the two that answered: the old validity is no longer safe */
    cr_assert_leq(hilock_validity_ms(l), 5000);
    cr_assert_leq(hlt_pttl(k.m[3], "res"), 5000);
    hilock_free(l);
    hilock_client_free(c);
    stop(&k);
}

Test(redlock, extend_below_a_quorum_is_not_held_and_cleans_up)
{
    cluster k;
    hilock *l;
    start(&k, 5);
    hilock_client *c = client_for(k.url, k.n);
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    for (int i = 0; i < 3; i++) {   /* as if they restarted empty */
        redisReply *r = hlt_cmd(k.m[i], "DEL res");
        freeReplyObject(r);
    }
    set_on(k.m[0], "res", "new-owner", 60000);
    cr_assert_eq(hilock_extend(l, 10000), HILOCK_NOT_HELD);
    cr_assert(strstr(hilock_client_errmsg(c), "ours on 2 of 5 masters (3 needed)"), "%s",
              hilock_client_errmsg(c));
    cr_assert_eq(hilock_validity_ms(l), 0);
    cr_assert_eq(holders(&k, "res", hilock_token(l)), 0, "what was left is given back");
    cr_assert_eq(holders(&k, "res", "new-owner"), 1);
    cr_assert_eq(hilock_check(l), HILOCK_NOT_HELD);
    cr_assert_eq(hilock_release(l), HILOCK_NOT_HELD);
    hilock_free(l);
    hilock_client_free(c);
    stop(&k);
}

Test(redlock, release_with_masters_down)
{
    cluster k;
    hilock *l;
    char want[96];
    start(&k, 5);
    hilock_client *c = client_for(k.url, k.n);
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_redis_kill(k.m[0]);
    hlt_redis_kill(k.m[4]);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(with_key(&k, "res"), 0);
    hilock_free(l);
    cr_assert_eq(hlt_redis_restart(k.m[0]), 0);
    cr_assert_eq(hlt_redis_restart(k.m[4]), 0);

    /* three frozen: no verdict yet, but the value is gone where it could be reached */
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    for (int i = 0; i < 3; i++) hlt_redis_freeze(k.m[i]);
    long long t = hlt_now_ms();
    cr_assert_eq(hilock_release(l), HILOCK_ENOQUORUM);
    cr_assert_lt(hlt_now_ms() - t, 2500);
    snprintf(want, sizeof want, "127.0.0.1:%d: read: timed out", k.m[0]->port);
    cr_assert(strstr(hilock_client_errmsg(c), want), "%s", hilock_client_errmsg(c));
    cr_assert(strstr(hilock_client_errmsg(c), "release: no quorum (answered 2 of 5 masters"), "%s",
              hilock_client_errmsg(c));
    cr_assert_eq(hilock_validity_ms(l), 0, "a lock being released is not safe to use");
    cr_assert_eq(hlt_exists(k.m[3], "res"), 0);
    cr_assert_eq(hlt_exists(k.m[4], "res"), 0);
    for (int i = 0; i < 3; i++) hlt_redis_thaw(k.m[i]);
    /* called again: what the first call did counts, so this is a release of a held lock */
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(with_key(&k, "res"), 0);
    cr_assert_eq(hilock_release(l), HILOCK_NOT_HELD);
    hilock_free(l);
    hilock_client_free(c);
    stop(&k);
}

typedef struct thaw_later {
    hlt_redis *r;
    long ms;
} thaw_later;

static void *thaw_after(void *arg)
{
    thaw_later *t = arg;
    hlt_sleep_ms(t->ms);
    hlt_redis_thaw(t->r);
    return NULL;
}

Test(redlock, a_slow_master_shrinks_validity)
{
    cluster k;
    hilock *l;
    pthread_t th;
    thaw_later tl;
    start(&k, 3);
    hilock_client *c = client_for(k.url, k.n);
    /* ttl 20 s: each master may take 1 s; the slow one answers after ~300 ms */
    cr_assert_eq(hilock_acquire(c, "res", 20000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    int64_t fast = hilock_validity_ms(l);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);

    hlt_redis_freeze(k.m[2]);
    tl.r = k.m[2];
    tl.ms = 300;
    cr_assert_eq(pthread_create(&th, NULL, thaw_after, &tl), 0);
    cr_assert_eq(hilock_acquire(c, "res", 20000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    int64_t slow = hilock_validity_ms(l);
    pthread_join(th, NULL);
    cr_assert_eq(holders(&k, "res", hilock_token(l)), 3, "the slow master answered in time");
    cr_assert(slow <= fast - 200, "validity %lld with a slow master, %lld without", (long long)slow,
              (long long)fast);
    cr_assert(slow > 15000, "validity %lld", (long long)slow);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    stop(&k);
}

/* ---- contention: several processes, one counter only the holder may touch ---- */

typedef struct shared {
    int inside;                 /* holders right now: must never exceed 1 */
    int overlaps;               /* times a holder found another inside */
    long counter;               /* incremented non-atomically by the holder */
    unsigned long long fence;   /* last fencing token seen: must only grow */
    int fence_backwards;
    int errors;
} shared;

static void worker(const char *const *urls, int n, shared *sh, int rounds)
{
    hilock_options o = hlt_options(urls, (size_t)n);
    hilock_client *c;
    o.io_timeout_ms = IO_MS;
    o.retry_delay_ms = 5;
    /* (a forked child: it says what failed by its exit code, not by an assert) */
    if (hilock_client_new(&o, &c) != HILOCK_OK) _exit(2);
    for (int i = 0; i < rounds; i++) {
        hilock *l;
        hilock_status st = hilock_acquire(c, "counter-lock", 10000, 20000, &l);
        if (st != HILOCK_OK) {
            __atomic_add_fetch(&sh->errors, 1, __ATOMIC_SEQ_CST);
            fprintf(stderr, "acquire: %s: %s\n", hilock_strerror(st), hilock_client_errmsg(c));
            continue;
        }
        if (__atomic_add_fetch(&sh->inside, 1, __ATOMIC_SEQ_CST) != 1)
            __atomic_add_fetch(&sh->overlaps, 1, __ATOMIC_SEQ_CST);
        if (hilock_fence(l) <= sh->fence) sh->fence_backwards++;
        sh->fence = hilock_fence(l);
        long v = sh->counter;
        usleep(300);   /* widen the window a second holder would need */
        sh->counter = v + 1;
        __atomic_sub_fetch(&sh->inside, 1, __ATOMIC_SEQ_CST);
        if (hilock_release(l) != HILOCK_OK) __atomic_add_fetch(&sh->errors, 1, __ATOMIC_SEQ_CST);
        hilock_free(l);
    }
    hilock_client_free(c);
}

static void contend(int masters, int procs, int rounds)
{
    cluster k;
    pid_t pid[8];
    shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(sh, MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    start(&k, masters);
    for (int p = 0; p < procs; p++) {
        pid[p] = fork();
        cr_assert_geq(pid[p], 0);
        if (pid[p] == 0) {
            worker(k.url, masters, sh, rounds);
            _exit(0);
        }
    }
    for (int p = 0; p < procs; p++) {
        int st;
        cr_assert_eq(waitpid(pid[p], &st, 0), pid[p]);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker %d ended with %d", p, st);
    }
    cr_assert_eq(sh->errors, 0);
    cr_assert_eq(sh->overlaps, 0, "two holders at once");
    cr_assert_eq(sh->fence_backwards, 0, "a fencing token did not grow");
    cr_assert_eq(sh->counter, (long)procs * rounds);
    cr_assert_eq(with_key(&k, "counter-lock"), 0);
    munmap(sh, sizeof *sh);
    stop(&k);
}

Test(redlock, contention_on_3_masters_never_yields_two_holders) { contend(3, 4, 25); }
Test(redlock, contention_on_5_masters_never_yields_two_holders) { contend(5, 4, 25); }

/* ---- fencing ---- */

Test(redlock, fence_is_above_any_token_a_quorum_issued)
{
    cluster k;
    hilock *l;
    start(&k, 5);
    hilock_client *c = client_for(k.url, k.n);
    /* one master's counter is far ahead (it issued tokens the others never saw) */
    set_on(k.m[0], "{res}:fence", "5000000000000", 3600000);
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    unsigned long long f1 = hilock_fence(l);
    cr_assert_eq(f1, 5000000000001ULL);
    /* written back: every granted master now mints above it */
    for (int i = 0; i < 5; i++) cr_assert_geq(fence_on(k.m[i], "{res}:fence"), f1, "master %d", i);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    /* the master that knew the high value is gone: the next quorum still goes above it */
    hlt_redis_kill(k.m[0]);
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_gt(hilock_fence(l), f1);
    unsigned long long f2 = hilock_fence(l);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    /* disjoint-but-one quorums: {1,2,3} then {3,4,0'} (0 restarted empty) */
    cr_assert_eq(hlt_redis_restart(k.m[0]), 0);
    hlt_redis_kill(k.m[4]);
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    unsigned long long f3 = hilock_fence(l);
    cr_assert_gt(f3, f2);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hlt_redis_kill(k.m[1]);
    hlt_redis_kill(k.m[2]);
    cr_assert_eq(hlt_redis_restart(k.m[4]), 0);
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_gt(hilock_fence(l), f3);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    stop(&k);
}

/* A token ahead of a master's clock (another master's counter ran ahead: a hot key) is
 * written back to the lagging masters, kept an hour past the time their clock reaches it,
 * not an hour from now: expired while still ahead, a master mints from its clock, below. */
Test(redlock, a_raised_counter_is_kept_its_lead_over_the_clock)
{
    cluster k;
    hilock *l;
    char ahead[32];
    long long lead = 4LL * 3600 * 1000;   /* 4 hours, below 2^42 (no epoch) */
    start(&k, 3);
    hilock_client *c = client_for(k.url, k.n);
    snprintf(ahead, sizeof ahead, "%lld", (long long)time(NULL) * 1000 + lead);
    set_on(k.m[0], "{res}:fence", ahead, 20000);
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_fence(l), strtoull(ahead, NULL, 10) + 1);
    for (int i = 1; i < 3; i++) {
        long long pttl = hlt_pttl(k.m[i], "{res}:fence");
        cr_assert_geq(fence_on(k.m[i], "{res}:fence"), hilock_fence(l), "master %d", i);
        cr_assert_gt(pttl, 3600 * 1000 + lead - 60000, "master %d: kept %lld ms, lead %lld ms", i, pttl, lead);
    }
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    stop(&k);
}

/* ---- tokens at the edge of Lua's numbers (docs/fencing.md) ---- */

static const char *const past_2_53[] = { "9007199254740991", "9007199254740993", "9223372036854775807" };

/* Counters at or above 2^53 - 1 (2^53 + 1, 2^63 - 1) on two of three masters: they refuse to
 * mint, errors alone rule out a quorum (EREPLY, naming the counter and its value), and the
 * third master's grant is undone; the two are left as they were. */
Test(redlock, a_fence_counter_at_or_above_2_53_minus_1_on_a_majority_is_ereply_and_undone)
{
    cluster k;
    start(&k, 3);
    hilock_client *c = client_for(k.url, k.n);
    for (size_t i = 0; i < sizeof past_2_53 / sizeof *past_2_53; i++) {
        hilock *l = (hilock *)&l;
        char *before[2], *after;
        hilock_status st;
        for (int m = 0; m < 3; m++) freeReplyObject(hlt_cmd(k.m[m], "FLUSHALL"));
        for (int m = 0; m < 2; m++) {
            set_on(k.m[m], "{res}:fence", past_2_53[i], 600000);
            before[m] = hlt_db_snapshot(k.m[m], NULL);
        }
        st = hilock_acquire(c, "res", 10000, 0, &l);
        cr_assert_eq(st, HILOCK_EREPLY, "%s: %s (%s)", past_2_53[i], hilock_strerror(st), hilock_client_errmsg(c));
        cr_assert_null(l);
        cr_assert(strstr(hilock_client_errmsg(c), "{res}:fence") && strstr(hilock_client_errmsg(c), past_2_53[i]),
                  "%s", hilock_client_errmsg(c));
        cr_assert_eq(with_key(&k, "res"), 0, "the third master's grant is undone");
        for (int m = 0; m < 2; m++) {
            char *v = hlt_get(k.m[m], "{res}:fence");
            after = hlt_db_snapshot(k.m[m], NULL);
            cr_assert_str_eq(after, before[m], "master %d: the refusal wrote", m);
            cr_assert_str_eq(v, past_2_53[i]);
            free(v);
            free(after);
            free(before[m]);
        }
    }
    hilock_client_free(c);
    stop(&k);
}

/* One master's counter just below the limit: the token is exact, and fence_raise.lua writes
 * its very digits to the other masters; tokens go on to 2^53 - 1, then every master refuses. */
Test(redlock, fence_tokens_up_to_2_53_minus_1_are_exact_and_raised_digit_for_digit)
{
    cluster k;
    hilock *l;
    char want[24];
    start(&k, 3);
    hilock_client *c = client_for(k.url, k.n);
    set_on(k.m[0], "{res}:fence", "9007199254740989", 600000);
    for (unsigned long long f = 9007199254740990ULL; f <= 9007199254740991ULL; f++) {
        cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
        cr_assert_eq(hilock_fence(l), f, "fence %llu, want %llu", (unsigned long long)hilock_fence(l), f);
        snprintf(want, sizeof want, "%llu", f);
        for (int m = 0; m < 3; m++) {
            char *v = hlt_get(k.m[m], "{res}:fence");
            cr_assert_not_null(v);
            cr_assert_str_eq(v, want, "master %d", m);
            free(v);
        }
        cr_assert_eq(hilock_release(l), HILOCK_OK);
        hilock_free(l);
    }
    l = (hilock *)&l;
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_EREPLY, "%s", hilock_client_errmsg(c));
    cr_assert_null(l);
    cr_assert(strstr(hilock_client_errmsg(c), "9007199254740991"), "%s", hilock_client_errmsg(c));
    cr_assert_eq(with_key(&k, "res"), 0);
    hilock_client_free(c);
    stop(&k);
}

/* fence_raise.lua itself (a counter changed between a grant and its raise cannot be staged
 * without timing): a counter at or above 2^53 - 1, or a token of 2^53 or more, is an error
 * naming them, with nothing written; a token of 2^53 - 1 is written digit for digit. */
Test(redlock, fence_raise_refuses_what_lua_cannot_count_exactly)
{
    cluster k;
    redisReply *x;
    char *v;
    long long now;
    start(&k, 1);
    now = hlt_server_ms(k.m[0]);
    for (size_t i = 0; i < sizeof past_2_53 / sizeof *past_2_53; i++) {
        set_on(k.m[0], "{r}:fence", past_2_53[i], 600000);
        x = hlt_cmd(k.m[0], "EVAL %s 1 {r}:fence 9007199254740990 3600000 3024000000 %lld",
                    hl_lua_fence_raise.body, now);
        cr_assert(x && x->type == REDIS_REPLY_ERROR && strstr(x->str, "{r}:fence") && strstr(x->str, past_2_53[i]),
                  "%s: %s", past_2_53[i], x && x->str ? x->str : "not an error");
        freeReplyObject(x);
        v = hlt_get(k.m[0], "{r}:fence");
        cr_assert_str_eq(v, past_2_53[i]);
        free(v);
        cr_assert_leq(hlt_pttl(k.m[0], "{r}:fence"), 600000);
    }
    set_on(k.m[0], "{r}:fence", "5", 600000);
    x = hlt_cmd(k.m[0], "EVAL %s 1 {r}:fence 9007199254740993 3600000 3024000000 %lld", hl_lua_fence_raise.body, now);
    cr_assert(x && x->type == REDIS_REPLY_ERROR && strstr(x->str, "9007199254740993"), "%s",
              x && x->str ? x->str : "not an error");
    freeReplyObject(x);
    v = hlt_get(k.m[0], "{r}:fence");
    cr_assert_str_eq(v, "5");
    free(v);
    set_on(k.m[0], "{r}:fence", "9007199254740990", 600000);
    x = hlt_cmd(k.m[0], "EVAL %s 1 {r}:fence 9007199254740991 3600000 3024000000 %lld", hl_lua_fence_raise.body, now);
    cr_assert(x && x->type == REDIS_REPLY_INTEGER && x->integer == 1);
    freeReplyObject(x);
    v = hlt_get(k.m[0], "{r}:fence");
    cr_assert_str_eq(v, "9007199254740991");
    free(v);
    stop(&k);
}

/* A Sentinel member puts its config epoch in bits 63..42 of the token; the direct members
 * put none. The token (epoch bits and all) is the floor the quorum keeps, so a later quorum
 * without the epoch member still mints above it (before the fix: 1 << 42 | c, then a bare c). */
static hlt_sentinel *SF;

static void sentinel_fini(void)
{
    hlt_sentinel_stop(SF);
    SF = NULL;
}

/* A Redlock of two direct members around a Sentinel member (urls: direct, Sentinel, direct)
 * whose config-epoch is 1; *m: the data node that is its master. Its client: client_for's
 * options with failover_guard 0 (no guard: the promoted master would grant nothing for a ttl,
 * and the epoch is the Sentinels' either way). */
static void epoch_redlock(cluster *k, const char *urls[3], int *m)
{
    start(k, 2);
    SF = hlt_sentinel_start();
    cr_assert_not_null(SF, "sentinel fixture did not start");
    cr_assert_eq(hlt_sentinel_failover(SF, 1), 0, "the failover that gives config-epoch 1");
    *m = hlt_sentinel_master(SF);
    cr_assert_geq(*m, 0);
    urls[0] = k->url[0];
    urls[1] = SF->url;
    urls[2] = k->url[1];
}

/* The Sentinel member cannot answer (both its data nodes frozen: no failover either), or is
 * back. */
static void epoch_member_down(int down)
{
    for (int i = 0; i < 2; i++) {
        if (down) hlt_sentinel_freeze(SF, i);
        else hlt_sentinel_thaw(SF, i);
    }
}

Test(redlock, fence_grows_when_the_next_quorum_leaves_out_the_epoch_member, .fini = sentinel_fini,
     .timeout = 120)
{
    HLT_NEEDS(40000, "Sentinel needs replication ids (PSYNC2, Redis 4.0+)");
    cluster k;
    hilock *l;
    const char *urls[3];
    unsigned long long f[4], floor[2][3];
    int m;
    hilock_options o;
    hilock_client *c;
    epoch_redlock(&k, urls, &m);
    o = hlt_options(urls, 3);
    o.io_timeout_ms = IO_MS;
    o.retry_delay_ms = 10;
    o.failover_guard = 0;
    c = hlt_client_new(&o);
    /* 1: all three grant; the Sentinel member's epoch is in the token */
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    f[0] = hilock_fence(l);
    cr_assert(hlt_data_holds_within(SF, m, "res", hilock_token(l), 2000), "the Sentinel member granted");
    cr_assert_geq(f[0] >> 42, 1, "fence %llu carries no epoch", f[0]);
    /* the floor on the quorum is the token itself, epoch bits included (asserted below) */
    for (int i = 0; i < 2; i++) floor[0][i] = fence_on(k.m[i], "{res}:fence");
    char *v = hlt_data_get(SF, m, "{res}:fence");
    floor[0][2] = v ? strtoull(v, NULL, 10) : 0;
    free(v);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    /* 2: the epoch member cannot answer */
    epoch_member_down(1);
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    f[1] = hilock_fence(l);
    cr_assert_eq(holders(&k, "res", hilock_token(l)), 2);
    for (int i = 0; i < 2; i++) floor[1][i] = fence_on(k.m[i], "{res}:fence");
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    /* 3: it is back, with the floor it was given at 1 (below the direct members' now) */
    epoch_member_down(0);
    cr_assert_eq(hilock_acquire(c, "res", 10000, 3000, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    f[2] = hilock_fence(l);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    /* 4: a second failover (config-epoch 2): its counter holds an epoch-1 token, and the
     * higher epoch still goes on top (one direct member down: the quorum needs it) */
    hlt_redis_kill(k.m[1]);
    cr_assert_eq(hlt_sentinel_wait_replica(SF, 1 - m, 10000), 0);
    int tries = 0;   /* the Sentinels may see the replica as down a while after the thaw */
    while (hlt_sentinel_failover(SF, 0) != 0 && ++tries < 20) hlt_sleep_ms(500);
    cr_assert_lt(tries, 20, "the second failover did not happen");
    cr_assert_eq(hilock_acquire(c, "res", 10000, 10000, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    f[3] = hilock_fence(l);
    cr_assert(hlt_data_holds_within(SF, 1 - m, "res", hilock_token(l), 2000), "the new master granted");
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    fprintf(stderr, "[fence] epoch member in, out, back, failed over: %llu, %llu, %llu, %llu; counters "
            "after the first two (direct, direct, Sentinel): %llu %llu %llu, %llu %llu\n", f[0], f[1],
            f[2], f[3], floor[0][0], floor[0][1], floor[0][2], floor[1][0], floor[1][1]);
    cr_assert_gt(f[1], f[0], "the quorum without the epoch member went back: %llu then %llu", f[0], f[1]);
    cr_assert_gt(f[2], f[1], "the epoch member's return went back: %llu then %llu", f[1], f[2]);
    cr_assert_gt(f[3], f[2], "a higher epoch went back: %llu then %llu", f[2], f[3]);
    cr_assert_eq(f[3] >> 42, 2, "fence %llu: not epoch 2", f[3]);
    for (int i = 0; i < 2; i++) {
        cr_assert_geq(floor[0][i], f[0], "master %d keeps %llu, below the token %llu", i, floor[0][i], f[0]);
        cr_assert_geq(floor[1][i], f[1], "master %d keeps %llu, below the token %llu", i, floor[1][i], f[1]);
    }
    cr_assert_geq(floor[0][2], f[0], "the epoch member keeps %llu, below the token %llu", floor[0][2], f[0]);
    hilock_client_free(c);
    stop(&k);
}

/* Cut the remaining life of `key` by `ms`, as if that much time had gone by; a key with no
 * more life left is gone (PEXPIRE with a time <= 0 deletes it). */
static void age_by(hlt_redis *r, const char *key, long long ms)
{
    redisReply *rep = hlt_cmd(r, "PEXPIRE %s %lld", key, hlt_pttl(r, key) - ms);
    cr_assert(rep && rep->type == REDIS_REPLY_INTEGER);
    freeReplyObject(rep);
}

/* The counters that hold an epoch are, for a quorum without the epoch member, the only floor
 * above the clock: they are kept HL_FENCE_EPOCH_KEEP_MS past a grant, not the hour, and a
 * later grant with a shorter ttl does not shorten that. (Before the fix they expired an hour
 * after the last grant, and the nightly job with its Sentinel member down minted from the
 * clock, below the token it had before.) */
Test(redlock, fence_with_an_epoch_outlives_an_idle_hour, .fini = sentinel_fini, .timeout = 120)
{
    HLT_NEEDS(40000, "Sentinel needs replication ids (PSYNC2, Redis 4.0+)");
    cluster k;
    hilock *l;
    const char *urls[3];
    const long long ttl = 60000, idle = HL_FENCE_KEEP_MS + 60000;
    long long pttl[2][2];   /* the direct members' counters: after the Redlock grant, the plain one */
    int m;
    hilock_options o;
    hilock_client *c;
    epoch_redlock(&k, urls, &m);
    o = hlt_options(urls, 3);
    o.io_timeout_ms = IO_MS;
    o.retry_delay_ms = 10;
    o.failover_guard = 0;
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "res", ttl, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    unsigned long long f0 = hilock_fence(l);
    cr_assert_geq(f0 >> 42, 1, "fence %llu carries no epoch", f0);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    for (int i = 0; i < 2; i++) pttl[0][i] = hlt_pttl(k.m[i], "{res}:fence");
    /* a plain grant (one master) of a shorter ttl on the first direct member */
    hilock_client *one = client_for(&k.url[0], 1);
    cr_assert_eq(hilock_acquire(one, "res", 1000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(one));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(one));
    hilock_free(l);
    hilock_client_free(one);
    for (int i = 0; i < 2; i++) pttl[1][i] = hlt_pttl(k.m[i], "{res}:fence");
    /* an hour (and the ttl) with no grant; then the job, its Sentinel member down */
    for (int i = 0; i < 2; i++) age_by(k.m[i], "{res}:fence", idle);
    int kept = with_key(&k, "{res}:fence");
    epoch_member_down(1);
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    unsigned long long f1 = hilock_fence(l);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    epoch_member_down(0);
    fprintf(stderr, "[fence] with an epoch: %llu; counters' pttl after it %lld %lld, after a plain "
            "grant %lld %lld; counters left after an idle hour: %d; then without the epoch member: "
            "%llu\n", f0, pttl[0][0], pttl[0][1], pttl[1][0], pttl[1][1], kept, f1);
    for (int i = 0; i < 2; i++)
        cr_assert(pttl[0][i] > ttl + HL_FENCE_EPOCH_KEEP_MS - 10000 &&
                  pttl[0][i] <= ttl + HL_FENCE_EPOCH_KEEP_MS, "master %d: pttl %lld", i, pttl[0][i]);
    /* generous for the time between the reads; shortened, it would have lost ttl - 1000 */
    cr_assert_geq(pttl[1][0], pttl[0][0] - 10000, "the plain grant shortened the counter's life");
    cr_assert_eq(kept, 2, "a counter with an epoch did not outlive the hour");
    cr_assert_gt(f1, f0, "the quorum without the epoch member went back after an idle hour: "
                 "%llu then %llu", f0, f1);
    hilock_client_free(c);
    stop(&k);
}

/* ---- errors ---- */

Test(redlock, error_replies_on_a_majority_are_ereply_not_a_wait)
{
    cluster k;
    hilock *l;
    start(&k, 5);
    hilock_client *c = client_for(k.url, k.n);
    for (int i = 0; i < 3; i++) {
        redisReply *r = hlt_cmd(k.m[i], "HSET res f v");
        freeReplyObject(r);
    }
    long long t = hlt_now_ms();
    cr_assert_eq(hilock_acquire(c, "res", 10000, 3000, &l), HILOCK_EREPLY);
    cr_assert_lt(hlt_now_ms() - t, 1500, "a wrong type is not cured by waiting");
    cr_assert(strstr(hilock_client_errmsg(c), "WRONGTYPE"), "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_exists(k.m[3], "res"), 0);
    cr_assert_eq(hlt_exists(k.m[4], "res"), 0);
    /* on a minority only: a quorum is still there */
    redisReply *r = hlt_cmd(k.m[2], "DEL res");
    freeReplyObject(r);
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(holders(&k, "res", hilock_token(l)), 3);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    hilock_client_free(c);
    stop(&k);
}

Test(redlock, one_url_keeps_the_single_master_behaviour)
{
    cluster k;
    hilock *a, *b;
    char want[96];
    start(&k, 1);
    hilock_client *c = client_for(k.url, k.n), *c2 = client_for(k.url, k.n);
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &a), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_acquire(c2, "res", 10000, 0, &b), HILOCK_BUSY);
    cr_assert(!strncmp(hilock_client_errmsg(c2), "res: held by another owner, expires in ", 39), "%s",
              hilock_client_errmsg(c2));
    cr_assert_eq(hilock_check(a), HILOCK_OK);
    cr_assert_eq(hilock_release(a), HILOCK_OK);
    hilock_free(a);
    hlt_redis_kill(k.m[0]);
    hlt_sleep_ms(300);   /* idle: the engine reopens (and finds no server) rather than reads EOF */
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &a), HILOCK_EIO, "not ENOQUORUM");
    snprintf(want, sizeof want, "127.0.0.1:%d: connect: Connection refused", k.m[0]->port);
    cr_assert_str_eq(hilock_client_errmsg(c), want);
    hilock_client_free(c);
    hilock_client_free(c2);
    stop(&k);
}

Test(redlock, check_needs_a_quorum_and_recomputes_validity)
{
    cluster k;
    hilock *l;
    start(&k, 5);
    hilock_client *c = client_for(k.url, k.n);
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    for (int i = 0; i < 5; i++) freeReplyObject(hlt_cmd(k.m[i], "PEXPIRE res 3000"));
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_leq(hilock_validity_ms(l), 3000, "the servers say 3 s are left");
    cr_assert_gt(hilock_validity_ms(l), 2000);
    /* a quorum holds it for a minute, two masters for 30 s: a minute it is */
    for (int i = 0; i < 5; i++)
        freeReplyObject(hlt_cmd(k.m[i], "PEXPIRE res %d", i < 3 ? 60000 : 30000));
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_gt(hilock_validity_ms(l), 50000);
    cr_assert_leq(hilock_validity_ms(l), 60000);
    hlt_redis_kill(k.m[0]);
    hlt_redis_kill(k.m[1]);
    hlt_redis_kill(k.m[2]);
    int64_t before = hilock_validity_ms(l);
    cr_assert_eq(hilock_check(l), HILOCK_ENOQUORUM);
    cr_assert_leq(hilock_validity_ms(l), before);
    cr_assert_gt(hilock_validity_ms(l), 0, "no verdict: validity unchanged");
    cr_assert_eq(hlt_redis_restart(k.m[0]), 0);   /* back, empty */
    cr_assert_eq(hilock_check(l), HILOCK_NOT_HELD);
    cr_assert(strstr(hilock_client_errmsg(c), "ours on 2 of 5 masters (3 needed)"), "%s",
              hilock_client_errmsg(c));
    cr_assert_eq(hilock_validity_ms(l), 0);
    hilock_free(l);
    hilock_client_free(c);
    stop(&k);
}

Test(redlock, two_masters_need_both)
{
    cluster k;
    hilock *l;
    start(&k, 2);
    hilock_client *c = client_for(k.url, k.n);
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hlt_redis_kill(k.m[1]);
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_ENOQUORUM);
    cr_assert(strstr(hilock_client_errmsg(c), "granted on 1 of 2 masters, 2 needed"), "%s",
              hilock_client_errmsg(c));
    cr_assert_eq(with_key(&k, "res"), 0);
    hilock_client_free(c);
    stop(&k);
}

Test(redlock, a_sentinel_url_can_be_a_member)
{
    HLT_NEEDS(40000, "Sentinel needs replication ids (PSYNC2, Redis 4.0+)");
    cluster k;
    hilock *l;
    char sentinel[128];
    const char *urls[3];
    start(&k, 2);
    /* nothing listens there: this member is simply down, and two of three is a quorum */
    snprintf(sentinel, sizeof sentinel, "redis-sentinel://127.0.0.1:%d#mymaster", hlt_dead_port());
    urls[0] = k.url[0];
    urls[1] = sentinel;
    urls[2] = k.url[1];
    hilock_client *c = client_for(urls, 3);
    long long t = hlt_now_ms();
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_lt(hlt_now_ms() - t, 2500);
    cr_assert_eq(holders(&k, "res", hilock_token(l)), 2);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(with_key(&k, "res"), 0);
    hilock_free(l);
    hilock_client_free(c);
    stop(&k);
}

Test(redlock, bad_input_changes_nothing)
{
    cluster k;
    hilock_client *c;
    hilock *l = (hilock *)1;
    hilock_options o;
    const char *urls[3];
    start(&k, 2);
    urls[0] = k.url[0];
    urls[1] = "redis://127.0.0.1:notaport";
    urls[2] = k.url[1];
    hilock_options_init(&o);
    o.servers = urls;
    o.nservers = 3;
    cr_assert_eq(hilock_client_new(&o, &c), HILOCK_EINVAL);
    cr_assert_null(c);
    cr_assert(strstr(hilock_last_config_error(), "server 2 of 3 (redis://127.0.0.1:notaport): bad port"), "%s", hilock_last_config_error());
    c = client_for(k.url, k.n);
    cr_assert_eq(hilock_acquire(c, "res", 0, 0, &l), HILOCK_EINVAL);
    cr_assert_null(l);
    cr_assert_eq(hilock_acquire(c, "", 1000, 0, &l), HILOCK_EINVAL);
    cr_assert_eq(hlt_dbsize(k.m[0]) + hlt_dbsize(k.m[1]), 0);
    hilock_client_free(c);
    stop(&k);
}

/* One server under two names (TCP and its unix socket): the members answer with the same
 * run_id, and the second is refused at connect, so one server can never make a quorum alone. */
Test(redlock, the_same_server_under_two_names_is_refused_at_connect)
{
    cluster k;
    hilock_client *c;
    hilock *l = NULL;
    start(&k, 2);
    {
        const char *twice[] = { k.m[0]->url, k.m[0]->unix_url };
        const char *three[] = { k.m[0]->url, k.m[0]->unix_url, k.m[1]->url };
        c = client_for(twice, 2);
        cr_assert_eq(hilock_acquire(c, "job", 10000, 0, &l), HILOCK_EINVAL, "%s", hilock_client_errmsg(c));
        cr_assert(strstr(hilock_client_errmsg(c), "server 1 and server 2 of 2 are the same server (run_id"),
                  "%s", hilock_client_errmsg(c));
        cr_assert_null(l);
        cr_assert_eq(hlt_exists(k.m[0], "job"), 0, "the grant on the first name was undone");
        hilock_client_free(c);
        /* three listed, two distinct: a grant needs both distinct servers */
        c = client_for(three, 3);
        freeReplyObject(hlt_cmd(k.m[1], "SET job someone-else"));
        cr_assert_neq(hilock_acquire(c, "job", 10000, 0, &l), HILOCK_OK,
                      "one server answered for two members: %s", hilock_client_errmsg(c));
        cr_assert_eq(hlt_exists(k.m[0], "job"), 0, "undone");
        hilock_client_free(c);
    }
    stop(&k);
}

/* A member whose ACL user may not run INFO (INFO is in @dangerous; a renamed INFO, a proxy
 * without it answer alike): its run_id is simply not known, and the lock works as before the
 * run_id check (before the fix: every member's handshake failed, and so did every acquire).
 * Blocking and on the loop (tests/scenario.h; the loop's handshake is the blocking one's): a
 * lock granted on the three, extended, released; then several callers at once (4 clients
 * blocking, 20 calls in flight on the loop), each granted on every master and released. */
HLT_SCENARIO(redlock, members_whose_user_may_not_run_info_still_lock)
{
    cluster k;
    hilock *l;
    char url[3][300];
    const char *urls[3];
    HLT_NEEDS(60000, "no ACL users before 6.0");
    start(&k, 3);
    for (int i = 0; i < 3; i++) {
        redisReply *rep = hlt_acl_setuser(k.m[i], "locker on >pw ~* &* +@all -@dangerous");
        cr_assert(rep && rep->type == REDIS_REPLY_STATUS, "ACL SETUSER on master %d", i);
        freeReplyObject(rep);
        snprintf(url[i], sizeof url[i], "redis://locker:pw@127.0.0.1:%d", k.m[i]->port);
        urls[i] = url[i];
    }
    hilock_options o = options_for(urls, 3);
    hlt_run *r = hlt_run_new(&o, mode);
    cr_assert_eq(hlt_run_acquire(r, "res", 10000, 0, &l), HILOCK_OK, "%s", hlt_run_errmsg(r));
    cr_assert_eq(holders(&k, "res", hilock_token(l)), 3);
    cr_assert_eq(hlt_run_extend(r, l, 10000), HILOCK_OK, "%s", hlt_run_errmsg(r));
    cr_assert_eq(hlt_run_release(r, l), HILOCK_OK, "%s", hlt_run_errmsg(r));
    cr_assert_eq(with_key(&k, "res"), 0);
    hilock_free(l);
    many_at_once(r, &k, mode == HLT_ON_LOOP ? 20 : 4, "acl:", -1);
    hlt_run_free(r);
    stop(&k);
}

/* A Sentinel member reads its master's run_id too: the same master also listed by address is
 * one server, refused at connect (before the fix only direct members were compared, and that
 * master's grant counted twice in the quorum). */
Test(redlock, a_sentinel_member_and_its_master_by_address_are_refused_at_connect,
     .fini = sentinel_fini, .timeout = 60)
{
    HLT_NEEDS(40000, "Sentinel needs replication ids (PSYNC2, Redis 4.0+)");
    cluster k;
    hilock *l = NULL;
    char direct[300];
    const char *urls[2];
    int m;
    start(&k, 1);
    SF = hlt_sentinel_start();
    cr_assert_not_null(SF, "sentinel fixture did not start");
    m = hlt_sentinel_master(SF);
    cr_assert_geq(m, 0);
    snprintf(direct, sizeof direct, "redis://127.0.0.1:%d", SF->data[m]->port);
    urls[0] = SF->url;
    urls[1] = direct;
    hilock_client *c = client_for(urls, 2);
    cr_assert_eq(hilock_acquire(c, "job", 10000, 0, &l), HILOCK_EINVAL, "%s", hilock_client_errmsg(c));
    cr_assert(strstr(hilock_client_errmsg(c), "server 1 and server 2 of 2 are the same server (run_id"),
              "%s", hilock_client_errmsg(c));
    cr_assert_null(l);
    char *v = hlt_data_get(SF, m, "job");
    cr_assert_null(v, "the grant under the other name was not undone: %s", v);
    hilock_client_free(c);
    /* and the Sentinel member with a distinct master still locks */
    urls[1] = k.url[0];
    c = client_for(urls, 2);
    cr_assert_eq(hilock_acquire(c, "job", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(holders(&k, "job", hilock_token(l)), 1);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    hilock_client_free(c);
    stop(&k);
}
