/* SPDX-License-Identifier: BSD-3-Clause */
/* test_handoff.c -- a waiter is woken by the release (one waiter per release), with polling
 * and the holder's PTTL as fallbacks; signal keys expire. Real redis-servers; timing asserts
 * are generous upper bounds, set far below what the fallback alone could achieve (waiters
 * poll every 10 s here unless the test is about polling), so they prove the wake-up without
 * depending on the machine's speed. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "checks.h"
#include "clients.h"
#include "fixture.h"
#include "hilock.h"
#include "sentinel_fixture.h"

#define SLOW_POLL_MS 10000   /* a fallback this slow cannot explain a prompt acquire */

/* ---- helpers ---- */

static long long blocked(hlt_redis *r) { return hlt_info_int(r, "clients", "blocked_clients:"); }
static long long blpops(hlt_redis *r) { return hlt_info_int(r, "commandstats", "cmdstat_blpop:calls="); }

/* Wait (bounded) until the server has n blocked clients. */
static void await_blocked(hlt_redis *r, long long n)
{
    long long end = hlt_now_ms() + 5000;
    while (blocked(r) != n && hlt_now_ms() < end) hlt_sleep_ms(2);
    cr_assert_eq(blocked(r), n, "expected %lld blocked clients, have %lld", n, blocked(r));
}

/* How many keys match a pattern. */
static long long nkeys(hlt_redis *r, const char *pattern)
{
    redisReply *rep = hlt_cmd(r, "KEYS %s", pattern);
    long long n = rep && rep->type == REDIS_REPLY_ARRAY ? (long long)rep->elements : -1;
    if (rep) freeReplyObject(rep);
    return n;
}

/* No wake-up key without an expiry. (A waiters mark lasts as long as the longest wait that
 * can follow it: with a 10 s poll, 16 s; the tests that wait for it to go poll faster.) */
static void assert_aux_keys_have_ttl(hlt_redis *r)
{
    const char *aux[] = { "*:signal", "*:waiters" };
    for (int i = 0; i < 2; i++) {
        redisReply *rep = hlt_cmd(r, "KEYS %s", aux[i]);
        cr_assert(rep && rep->type == REDIS_REPLY_ARRAY);
        for (size_t k = 0; k < rep->elements; k++)
            cr_assert_gt(hlt_pttl(r, rep->element[k]->str), 0, "%s has no expiry", rep->element[k]->str);
        freeReplyObject(rep);
    }
}

/* ... and none at all once they had time to expire. */
static void assert_aux_keys_expire(hlt_redis *r)
{
    long long end = hlt_now_ms() + 8000;
    assert_aux_keys_have_ttl(r);
    while ((nkeys(r, "*:signal") || nkeys(r, "*:waiters")) && hlt_now_ms() < end) hlt_sleep_ms(20);
    cr_assert_eq(nkeys(r, "*:signal"), 0, "a signal list was left behind");
    cr_assert_eq(nkeys(r, "*:waiters"), 0, "a waiters mark was left behind");
}

/* A waiter: acquires on its own thread with its own client, records when it got the lock,
 * holds it hold_ms, releases it. */
typedef struct waiter {
    hilock_client  *c;
    const char     *key;
    int64_t         ttl_ms, wait_ms, hold_ms;
    hilock_status   st, rel;
    long long       t_acquired;   /* hlt_now_ms() */
    int64_t         validity;     /* hilock_validity_ms at the grant */
    char            token[64];
    pthread_t       th;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    hilock *l = NULL;
    w->st = hilock_acquire(w->c, w->key, w->ttl_ms, w->wait_ms, &l);
    w->t_acquired = hlt_now_ms();
    if (w->st == HILOCK_OK) {
        w->validity = hilock_validity_ms(l);
        snprintf(w->token, sizeof w->token, "%s", hilock_token(l));
        if (w->hold_ms > 0) hlt_sleep_ms((long)w->hold_ms);
        w->rel = hilock_release(l);
        hilock_free(l);
    }
    return NULL;
}

static void waiter_start(waiter *w, hilock_client *c, const char *key, int64_t wait_ms, int64_t hold_ms)
{
    memset(w, 0, sizeof *w);
    w->c = c;
    w->key = key;
    w->ttl_ms = 30000;
    w->wait_ms = wait_ms;
    w->hold_ms = hold_ms;
    w->st = HILOCK_EINVAL;
    cr_assert_eq(pthread_create(&w->th, NULL, waiter_main, w), 0);
}

static void waiter_join(waiter *w)
{
    pthread_join(w->th, NULL);
    hilock_client_free(w->c);
}

/* A server, and on it a holder: *hc (retrying every 50 ms) holds key for 30 s in *h. */
static hlt_redis *held(const char *key, hilock_client **hc, hilock **h)
{
    hlt_redis *r = hlt_redis_started(NULL);
    *hc = hlt_client_retry(r->url, 50);
    cr_assert_eq(hilock_acquire(*hc, key, 30000, 0, h), HILOCK_OK, "%s", hilock_client_errmsg(*hc));
    return r;
}

/* Wait (bounded) until the server has n blocked clients and job's signal list is gone: a waiter
 * woken by a signal (a stale one, or a release's) has taken it and, if the lock was still
 * held, is blocked again; one that is not blocked now cannot be woken without a new signal. */
static void await_parked(hlt_redis *r, long long n)
{
    HLT_AWAIT(blocked(r) == n && !hlt_exists(r, "{job}:signal"), 10000,
              "within 10 s: %lld blocked clients (expected %lld), job's signal list %s", blocked(r), n,
              hlt_exists(r, "{job}:signal") ? "still there" : "gone");
}

/* ---- single master ---- */

Test(handoff, release_wakes_a_blocked_waiter_at_once)
{
    hilock_client *hc;
    hilock *h;
    waiter w;
    hlt_redis *r = held("job", &hc, &h);

    waiter_start(&w, hlt_client_retry(r->unix_url, SLOW_POLL_MS), "job", 20000, 0);
    await_blocked(r, 1);                     /* it waits on the signal list, not sleeping */
    cr_assert_gt(hlt_pttl(r, "{job}:waiters"), 0, "the busy attempt marked the lock awaited");

    long long t_rel = hlt_now_ms();
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    waiter_join(&w);
    cr_assert_eq(w.st, HILOCK_OK);
    cr_assert_eq(w.rel, HILOCK_OK);
    long long lat = w.t_acquired - t_rel;
    cr_log_info("release -> next holder: %lld ms", lat);
    /* the fallback poll would take >= 5 s and the holder's ttl 30 s */
    cr_assert_lt(lat, 2000, "the waiter took %lld ms after the release", lat);
    cr_assert_eq(blpops(r), 1, "one wait, ended by the signal");
    cr_assert_eq(hlt_exists(r, "job"), 0);
    hilock_free(h);
    hilock_client_free(hc);
    assert_aux_keys_have_ttl(r);
    hlt_redis_stop(r);
}

Test(handoff, waiter_acquires_when_the_holder_crashes)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *hc = hlt_client_retry(r->url, 50);
    hilock *h;
    waiter w;
    cr_assert_eq(hilock_acquire(hc, "job", 700, 0, &h), HILOCK_OK);
    /* the holder dies: no release, its connection closes, the key lives out its ttl */
    hilock_free(h);
    hilock_client_free(hc);

    long long t0 = hlt_now_ms();
    waiter_start(&w, hlt_client_retry(r->url, SLOW_POLL_MS), "job", 10000, 0);
    waiter_join(&w);
    cr_assert_eq(w.st, HILOCK_OK);
    /* bounded by the holder's PTTL (0.7 s, + the server's 100 ms timer), not the 5-15 s poll */
    cr_assert_lt(w.t_acquired - t0, 3000, "took %lld ms", w.t_acquired - t0);
    cr_assert_eq(hlt_exists(r, "job"), 0);
    assert_aux_keys_have_ttl(r);
    hlt_redis_stop(r);
}

Test(handoff, waiter_acquires_when_another_client_deletes_the_key_without_signal)
{
    hilock_client *hc;
    hilock *h;
    waiter w;
    hlt_redis *r = held("job", &hc, &h);
    hilock_options o2 = hlt_options((const char *[]){ r->url }, 1);
    o2.retry_delay_ms = 300;
    waiter_start(&w, hlt_client_new(&o2), "job", 20000, 0);   /* polls every 150-450 ms */
    await_blocked(r, 1);

    long long t0 = hlt_now_ms();
    redisReply *rep = hlt_cmd(r, "DEL job");   /* an operator, or a library that does not signal */
    cr_assert(rep && rep->integer == 1);
    freeReplyObject(rep);
    waiter_join(&w);
    cr_assert_eq(w.st, HILOCK_OK);
    cr_assert_lt(w.t_acquired - t0, 5000, "took %lld ms (the holder's ttl is 30 s)", w.t_acquired - t0);
    cr_assert_eq(hilock_release(h), HILOCK_NOT_HELD);   /* ours was deleted: no signal, no harm */
    hilock_free(h);
    hilock_client_free(hc);
    assert_aux_keys_expire(r);
    hlt_redis_stop(r);
}

Test(handoff, one_release_wakes_one_waiter)
{
    hilock_client *hc;
    hilock *h;
    waiter w[3];
    hlt_redis *r = held("job", &hc, &h);
    for (int i = 0; i < 3; i++) waiter_start(&w[i], hlt_client_retry(r->url, SLOW_POLL_MS), "job", 20000, 1500);
    await_blocked(r, 3);

    long long t_rel = hlt_now_ms();
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    /* the woken one holds it 1.5 s: meanwhile the other two stay blocked (a hold of 300 ms
     * left a loaded machine too little time to look before the next handoff) */
    HLT_AWAIT(hlt_exists(r, "job") == 1, 10000, "no waiter took the lock within 10 s of its release");
    cr_assert_eq(blocked(r), 2, "a release woke more than one waiter");
    for (int i = 0; i < 3; i++) waiter_join(&w[i]);

    /* each release handed over to the next: three waits in all, no retries, no polling */
    long long last = 0;
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(w[i].st, HILOCK_OK, "waiter %d: %s", i, hilock_strerror(w[i].st));
        cr_assert_eq(w[i].rel, HILOCK_OK);
        if (w[i].t_acquired > last) last = w[i].t_acquired;
    }
    cr_assert_eq(blpops(r), 3, "BLPOP calls: %lld", blpops(r));
    cr_assert_lt(last - t_rel, 8000, "three handoffs took %lld ms (two holds of 1.5 s)", last - t_rel);
    hilock_free(h);
    hilock_client_free(hc);
    hlt_redis_stop(r);
}

Test(handoff, a_stale_signal_wakes_a_later_waiter_once)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *hc = hlt_client_retry(r->url, 50);
    hilock *h, *h2;
    waiter w;
    /* a release while the lock is marked awaited but nobody blocks: the signal is left */
    cr_assert_eq(hilock_acquire(hc, "job", 30000, 0, &h), HILOCK_OK);
    redisReply *rep = hlt_cmd(r, "SET {job}:waiters 1 PX 5000");
    freeReplyObject(rep);
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    hilock_free(h);
    long long pttl = hlt_pttl(r, "{job}:signal");
    cr_assert(pttl > 0 && pttl <= 1000, "the signal expires within 1 s (pttl %lld)", pttl);

    /* a new holder, and a waiter: it takes the stale signal, fails once, and blocks again */
    cr_assert_eq(hilock_acquire(hc, "job", 30000, 0, &h2), HILOCK_OK);
    waiter_start(&w, hlt_client_retry(r->url, SLOW_POLL_MS), "job", 20000, 0);
    await_parked(r, 1);   /* the stale signal taken, the waiter blocked again */
    cr_assert_leq(blpops(r), 2, "the waiter spins: %lld BLPOPs", blpops(r));
    cr_assert_eq(hilock_release(h2), HILOCK_OK);
    waiter_join(&w);
    cr_assert_eq(w.st, HILOCK_OK);
    hilock_free(h2);
    hilock_client_free(hc);
    hlt_redis_stop(r);
}

Test(handoff, an_uncontended_release_writes_no_signal)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_options o = hlt_options((const char *[]){ r->url }, 1);
    o.retry_delay_ms = 50;
    hilock_client *c = hlt_client_new(&o);
    hilock *l;
    for (int i = 0; i < 20; i++) {
        cr_assert_eq(hilock_acquire(c, "job", 30000, 0, &l), HILOCK_OK);
        cr_assert_eq(hilock_release(l), HILOCK_OK);
        hilock_free(l);
    }
    cr_assert_eq(nkeys(r, "*:signal"), 0);
    cr_assert_eq(nkeys(r, "*:waiters"), 0);
    /* a try-lock that finds it busy will not wait, so it does not mark it either */
    hilock *a, *b;
    hilock_client *c2 = hlt_client_new(&o);   /* (c's own second acquire is refused: not re-entrant) */
    cr_assert_eq(hilock_acquire(c, "job", 30000, 0, &a), HILOCK_OK);
    cr_assert_eq(hilock_acquire(c2, "job", 30000, 0, &b), HILOCK_BUSY);
    cr_assert_eq(nkeys(r, "*:waiters"), 0);
    hlt_release_gone(r, c, a, "job");
    cr_assert_eq(nkeys(r, "*:signal"), 0);
    hilock_client_free(c);
    hilock_client_free(c2);
    hlt_redis_stop(r);
}

Test(handoff, hash_tagged_keys_keep_their_aux_keys_in_the_slot)
{
    hilock_client *hc;
    hilock *h;
    waiter w;
    hlt_redis *r = held("{user:7}:job", &hc, &h);
    waiter_start(&w, hlt_client_retry(r->url, SLOW_POLL_MS), "{user:7}:job", 20000, 0);
    await_blocked(r, 1);
    cr_assert_eq(hlt_exists(r, "{user:7}:job:waiters"), 1);
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    waiter_join(&w);
    cr_assert_eq(w.st, HILOCK_OK);
    hilock_free(h);
    hilock_client_free(hc);
    assert_aux_keys_have_ttl(r);
    hlt_redis_stop(r);
}

Test(handoff, with_wake_off_waiters_poll)
{
    hlt_redis *r = hlt_redis_started(NULL);
    const char *url = r->url;
    hilock_options o = hlt_options(&url, 1);
    o.retry_delay_ms = 50;
    hilock_client *hc = hlt_client_new(&o), *wc;
    hilock *h;
    waiter w;
    o.retry_delay_ms = 100;
    o.wake = 0;
    wc = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(hc, "job", 30000, 0, &h), HILOCK_OK);
    long long base = hlt_script_calls(r);
    waiter_start(&w, wc, "job", 10000, 0);
    /* two attempts at least (a first one may cost two calls: EVALSHA, NOSCRIPT, EVAL): after
     * its first BUSY it was waiting, by polling */
    HLT_AWAIT(hlt_script_calls(r) >= base + 3, 10000, "the waiter did not try again within 10 s");
    cr_assert_eq(blocked(r), 0, "wake = 0 must not block");
    cr_assert_eq(nkeys(r, "*:waiters"), 0, "nor mark the lock");
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    waiter_join(&w);
    cr_assert_eq(w.st, HILOCK_OK);
    cr_assert_eq(blpops(r), -1, "no BLPOP was sent");
    hilock_free(h);
    hilock_client_free(hc);
    hlt_redis_stop(r);
}

Test(handoff, a_waiter_still_gives_up_at_its_deadline)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_options o = hlt_options((const char *[]){ r->url }, 1);
    o.retry_delay_ms = 50;
    hilock_client *hc = hlt_client_new(&o), *wc = hlt_client_retry(r->url, SLOW_POLL_MS);
    hilock *h, *l;
    cr_assert_eq(hilock_acquire(hc, "job", 30000, 0, &h), HILOCK_OK);
    long long t0 = hlt_now_ms();
    cr_assert_eq(hilock_acquire(wc, "job", 30000, 400, &l), HILOCK_BUSY);
    long long took = hlt_now_ms() - t0;
    /* wait_ms + io_timeout_ms is the contract; BLPOP's own timer may add ~100 ms */
    cr_assert(took >= 390 && took < 1400, "took %lld ms", took);
    cr_assert_null(l);
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    hilock_free(h);
    hilock_client_free(hc);
    hilock_client_free(wc);
    assert_aux_keys_expire(r);
    hlt_redis_stop(r);
}

/* ---- the attempt sent behind the block (src/lock/wait.c, hl_behind_block) ---- */

/* A waiter whose block is short beside its ttl (poll_ms 2 s, ttl 30 s) sends its next attempt
 * in the same write as its BLPOP: the server grants it the moment the release's signal pops,
 * with no round trip of the waiter's between. Its validity then counts from that write, before
 * the block: here at least the 500 ms it was seen blocked before the release, never the
 * ttl less the few ms of a grant's own round trip. */
Test(handoff, a_grant_behind_its_block_counts_its_validity_from_before_the_block)
{
    hilock_client *hc;
    hilock *h;
    waiter w;
    long long t_blocked;
    hlt_redis *r;
    HLT_NEEDS(60000, "a fractional BLPOP timeout (Redis 6.0): before it a waiter blocks, then attempts");
    r = held("job", &hc, &h);
    waiter_start(&w, hlt_client_retry(r->url, 2000), "job", 20000, 0);   /* (ttl 30 s) */
    await_blocked(r, 1);
    t_blocked = hlt_now_ms();
    hlt_sleep_ms(500);
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    waiter_join(&w);
    cr_assert_eq(w.st, HILOCK_OK);
    cr_assert_eq(w.rel, HILOCK_OK);
    printf("handoff: a grant behind its block: validity %lld ms of 30000, %lld ms after the block was seen\n",
           (long long)w.validity, w.t_acquired - t_blocked);
    cr_assert_leq(w.validity, 30000 - (w.t_acquired - t_blocked), "validity %lld ms: counted from after the block",
                  (long long)w.validity);
    cr_assert_gt(w.validity, 30000 - 2000 - 1000, "validity %lld ms: more lost than the block", (long long)w.validity);
    cr_assert_eq(blpops(r), 1, "one wait, ended by the signal");
    hilock_free(h);
    hilock_client_free(hc);
    hlt_redis_stop(r);
}

/* A server that refuses BLPOP (an ACL here) answers the attempt behind it all the same; the
 * waiter then polls every retry_delay_ms apart from it (not in a loop of refused BLPOPs and
 * attempts), and gets the lock once it is free. */
Test(handoff, a_waiter_whose_blpop_is_refused_polls_and_still_gets_the_lock)
{
    hlt_redis *r;
    hilock_client *hc;
    hilock *h;
    waiter w;
    redisReply *rep;
    char url[300];
    long long before;
    HLT_NEEDS(60000, "ACL users: Redis 6");
    r = held("job", &hc, &h);
    rep = hlt_acl_setuser(r, "w on >pw ~* &* +@all -blpop");
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    snprintf(url, sizeof url, "redis://w:pw@127.0.0.1:%d", r->port);
    before = hlt_script_calls(r);
    waiter_start(&w, hlt_client_retry(url, 100), "job", 20000, 0);
    hlt_sleep_ms(1000);
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    waiter_join(&w);
    cr_assert_eq(w.st, HILOCK_OK);
    cr_assert_eq(w.rel, HILOCK_OK);
    /* ~1 s of polls every 50-150 ms: about 10; a loop of refused BLPOPs would make thousands */
    printf("handoff: a waiter refused BLPOP made %lld attempts in ~1 s\n", hlt_script_calls(r) - before);
    cr_assert_leq(hlt_script_calls(r) - before, 60, "%lld attempts", hlt_script_calls(r) - before);
    hilock_free(h);
    hilock_client_free(hc);
    hlt_redis_stop(r);
}

/* The script cache emptied while a waiter blocks (SCRIPT FLUSH; a restart or failover would
 * also close its connection): its attempt behind the block is refused NOSCRIPT and sent again
 * as EVAL, behind a BLPOP again. The release's signal was taken by the first one, so the
 * waiter is granted at the end of the second block (its poll), within its wait, and holds
 * the key alone. */
Test(handoff, a_script_cache_flushed_during_the_block_costs_the_waiter_one_poll)
{
    hilock_client *hc;
    hilock *h;
    waiter w;
    redisReply *rep;
    long long t_rel;
    hlt_redis *r = held("job", &hc, &h);
    waiter_start(&w, hlt_client_retry(r->url, 1000), "job", 20000, 0);
    await_blocked(r, 1);
    rep = hlt_cmd(r, "SCRIPT FLUSH");
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    t_rel = hlt_now_ms();
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    waiter_join(&w);
    cr_assert_eq(w.st, HILOCK_OK, "%s", hilock_strerror(w.st));
    cr_assert_eq(w.rel, HILOCK_OK);
    printf("handoff: with the script cache flushed, granted %lld ms after the release\n", w.t_acquired - t_rel);
    cr_assert_lt(w.t_acquired - t_rel, 5000, "took %lld ms (its poll: 1 s)", w.t_acquired - t_rel);
    cr_assert_eq(hlt_exists(r, "job"), 0, "the waiter's release left the key");
    hilock_free(h);
    hilock_client_free(hc);
    hlt_redis_stop(r);
}

/* The server freezes (SIGSTOP) while a waiter blocks with its attempt behind: the round trip
 * ends within the block, io_timeout_ms and the wait's bound, BUSY or ETIMEDOUT, nothing held;
 * once the server is back, whatever the attempt wrote is undone on the next contact and a
 * second client gets the key at once. */
Test(handoff, a_server_frozen_during_the_block_ends_the_wait_within_its_bound)
{
    hilock_client *hc, *c2;
    hilock *h, *l;
    waiter w;
    long long t0;
    hlt_redis *r = held("job", &hc, &h);
    waiter_start(&w, hlt_client_retry(r->url, 1000), "job", 2000, 0);
    t0 = hlt_now_ms();
    await_blocked(r, 1);
    hlt_redis_freeze(r);
    waiter_join(&w);
    hlt_redis_thaw(r);
    printf("handoff: a frozen server ended the wait in %lld ms (%s)\n", w.t_acquired - t0, hilock_strerror(w.st));
    cr_assert(w.st == HILOCK_BUSY || w.st == HILOCK_ETIMEDOUT, "%s", hilock_strerror(w.st));
    /* wait 2 s + the bound of a last attempt (connect + 3 io: 4 s), with slack */
    cr_assert_lt(w.t_acquired - t0, 9000, "took %lld ms", w.t_acquired - t0);
    hlt_holds(r, "job", hilock_token(h));
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    c2 = hlt_client(r->url);
    cr_assert_eq(hilock_acquire(c2, "job", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c2));
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c2);
    hilock_free(h);
    hilock_client_free(hc);
    hlt_redis_stop(r);
}

/* A waiter frozen (SIGSTOP) in its block, its attempt behind it: the release's signal wakes
 * it on the server, which grants it the key -- a frozen holder, for its ttl (3 s) at most, as
 * one frozen just after its grant would be. The next waiter gets the key once that ttl ends,
 * not later; a waiter killed instead is granted nothing (its connection closes). */
Test(handoff, a_waiter_frozen_in_its_block_holds_the_key_for_its_ttl_at_most, .timeout = 60)
{
    hilock_client *hc, *c2;
    hilock *h, *l;
    pid_t pid;
    long long t_rel, took;
    char *v;
    hlt_redis *r;
    HLT_NEEDS(60000, "a fractional BLPOP timeout (Redis 6.0): before it a waiter blocks, then attempts");
    r = held("job", &hc, &h);
    pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {   /* ttl 3 s, poll 0.5 s: its blocks go behind its attempts */
        hilock_client *c = hlt_client_retry(r->url, 500);
        hilock *m;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        alarm(60);
        _exit(hilock_acquire(c, "job", 3000, 30000, &m) == HILOCK_OK ? 0 : 1);
    }
    await_blocked(r, 1);
    kill(pid, SIGSTOP);
    t_rel = hlt_now_ms();
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    HLT_AWAIT(hlt_exists(r, "job"), 5000, "the frozen waiter's attempt was not run");
    v = hlt_get(r, "job");
    cr_assert(v && hlt_pttl(r, "job") <= 3000, "job: %s, pttl %lld", v ? v : "(gone)", hlt_pttl(r, "job"));
    free(v);
    c2 = hlt_client_retry(r->url, 500);
    cr_assert_eq(hilock_acquire(c2, "job", 5000, 10000, &l), HILOCK_OK, "%s", hilock_client_errmsg(c2));
    took = hlt_now_ms() - t_rel;
    printf("handoff: behind a waiter frozen in its block, the next one got the key %lld ms after the release\n", took);
    cr_assert_lt(took, 3000 + 2000, "took %lld ms (the frozen grant's ttl: 3 s)", took);
    hlt_holds(r, "job", hilock_token(l));
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    kill(pid, SIGKILL);
    cr_assert_eq(hlt_reap(pid, 5000), 128 + SIGKILL);
    hilock_client_free(c2);
    hilock_free(h);
    hilock_client_free(hc);
    hlt_redis_stop(r);
}

/* ---- Redlock ---- */

Test(handoff, redlock_waiter_is_woken_through_any_master)
{
    hlt_redis *m[3];
    const char *urls[3];
    for (int i = 0; i < 3; i++) {
        m[i] = hlt_redis_started(NULL);
        urls[i] = i % 2 ? m[i]->unix_url : m[i]->url;
    }
    hilock_options o = hlt_options(urls, 3);
    o.retry_delay_ms = 50;
    hilock_client *hc = hlt_client_new(&o);
    hilock *h;
    waiter w;
    cr_assert_eq(hilock_acquire(hc, "job", 30000, 0, &h), HILOCK_OK, "%s", hilock_client_errmsg(hc));
    /* one master goes away: the waiter blocks on the two others */
    hlt_redis_kill(m[2]);
    hilock_options o2 = hlt_options(urls, 3);
    o2.retry_delay_ms = SLOW_POLL_MS;
    waiter_start(&w, hlt_client_new(&o2), "job", 20000, 0);
    await_blocked(m[0], 1);
    await_blocked(m[1], 1);

    long long t_rel = hlt_now_ms();
    cr_assert_eq(hilock_release(h), HILOCK_OK, "%s", hilock_client_errmsg(hc));
    waiter_join(&w);
    cr_assert_eq(w.st, HILOCK_OK);
    cr_log_info("redlock release -> next holder: %lld ms", w.t_acquired - t_rel);
    cr_assert_lt(w.t_acquired - t_rel, 2000, "took %lld ms", w.t_acquired - t_rel);
    hilock_free(h);
    hilock_client_free(hc);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(blocked(m[i]), 0, "an abandoned BLPOP is still blocked on master %d", i);
        assert_aux_keys_have_ttl(m[i]);
    }
    for (int i = 0; i < 3; i++) hlt_redis_stop(m[i]);
}

Test(handoff, leaves_no_signal_keys)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_options o = hlt_options((const char *[]){ r->url }, 1);
    o.retry_delay_ms = 100;
    o.io_timeout_ms = 300;
    hilock_client *hc = hlt_client_new(&o);
    hilock *h;
    waiter w[2];
    /* a handoff chain, a crashed holder, a waiter that gives up */
    cr_assert_eq(hilock_acquire(hc, "job", 30000, 0, &h), HILOCK_OK);
    for (int i = 0; i < 2; i++) waiter_start(&w[i], hlt_client_new(&o), "job", 10000, 50);
    await_blocked(r, 2);
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    hilock_free(h);
    for (int i = 0; i < 2; i++) {
        waiter_join(&w[i]);
        cr_assert_eq(w[i].st, HILOCK_OK);
    }
    cr_assert_eq(hilock_acquire(hc, "job", 500, 0, &h), HILOCK_OK);
    hilock_free(h);   /* crashed: never released */
    waiter_start(&w[0], hlt_client_new(&o), "job", 100, 0);
    waiter_join(&w[0]);
    cr_assert_eq(w[0].st, HILOCK_BUSY);
    waiter_start(&w[0], hlt_client_new(&o), "job", 5000, 0);
    waiter_join(&w[0]);
    cr_assert_eq(w[0].st, HILOCK_OK);
    hilock_client_free(hc);

    assert_aux_keys_expire(r);
    /* what is left: the fencing counter (kept ttl + 1 h by design) and the holder record of
     * the last grant's client (2 x ttl: acquire.lua) */
    /* (KEYS, not DBSIZE: DBSIZE still counts expired keys the server has not reaped yet) */
    cr_assert_eq(nkeys(r, "*"), 2);
    cr_assert_eq(hlt_exists(r, "{job}:fence"), 1);
    cr_assert(hlt_pttl(r, "{job}:holder") > 0 && hlt_pttl(r, "{job}:holder") <= 2 * 30000);
    hlt_redis_stop(r);
}

/* ---- Sentinel ---- */

static hlt_sentinel *SF;

static void sentinel_fini(void)
{
    hlt_sentinel_stop(SF);
    SF = NULL;
}

Test(handoff, sentinel_waiter_is_woken_by_the_release, .fini = sentinel_fini, .timeout = 60)
{
    HLT_NEEDS(40000, "Sentinel needs replication ids (PSYNC2, Redis 4.0+)");
    SF = hlt_sentinel_start();
    cr_assert_not_null(SF, "sentinel fixture did not start");
    hlt_redis *m = SF->data[hlt_sentinel_master(SF)];
    hilock_client *hc = hlt_client_retry(SF->url, 50);
    hilock *h;
    waiter w;
    cr_assert_eq(hilock_acquire(hc, "job", 30000, 0, &h), HILOCK_OK, "%s", hilock_client_errmsg(hc));
    waiter_start(&w, hlt_client_retry(SF->url, SLOW_POLL_MS), "job", 20000, 0);
    await_blocked(m, 1);

    long long t_rel = hlt_now_ms();
    cr_assert_eq(hilock_release(h), HILOCK_OK, "%s", hilock_client_errmsg(hc));
    waiter_join(&w);
    cr_assert_eq(w.st, HILOCK_OK);
    cr_log_info("sentinel release -> next holder: %lld ms", w.t_acquired - t_rel);
    cr_assert_lt(w.t_acquired - t_rel, 2000, "took %lld ms", w.t_acquired - t_rel);
    cr_assert_eq(w.rel, HILOCK_OK);
    hilock_free(h);
    hilock_client_free(hc);
    assert_aux_keys_have_ttl(m);
}
