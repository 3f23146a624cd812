/* SPDX-License-Identifier: BSD-3-Clause */
/* test_sem.c -- counting semaphores (hilock_sem_acquire, docs/semaphore.md) on one real
 * redis-server: exactly `limit` permits, each a member of KEY's sorted set scored with its
 * expiry by the server's clock; release frees one and wakes one waiter; a dead holder's permit
 * returns after its ttl; fences grow; callers that disagree on the limit; extend, check,
 * validity and keepalive on a permit; Redlock where it keeps the limit; bad input, a key of
 * another kind, Redlock where limit + 1 holders could each hold a quorum, and old servers
 * refused with nothing written. Every test asserts the status and the state read back
 * on a separate connection. Timing asserts are generous upper bounds only. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checks.h"
#include "clients.h"
#include "holders.h"
#include "hilock_async.h"
#include "scenario.h"

#define NEEDS_32() HLT_NEEDS(30200, "the semaphore's script reads the server's clock (Redis 3.2+)")
#define MARKER "hilock:sem"

static hlt_redis *R;

static void setup(void)
{
    R = hlt_redis_start(NULL);
    cr_assert_not_null(R, "redis-server did not start");
}

static void teardown(void) { hlt_redis_stop(R); }

TestSuite(sem, .init = setup, .fini = teardown, .timeout = 30);

static hilock *must_sem(hilock_client *c, const char *key, int limit, int64_t ttl, int64_t wait)
{
    hilock *l = NULL;
    hilock_status st = hilock_sem_acquire(c, key, limit, ttl, wait, &l);
    cr_assert_eq(st, HILOCK_OK, "sem %s limit %d: %s (%s)", key, limit, hilock_strerror(st), hilock_client_errmsg(c));
    cr_assert_not_null(l);
    return l;
}

/* A try-lock that must be BUSY, name the key, leave *out NULL and write nothing. */
static void assert_busy(hilock_client *c, const char *key, int limit)
{
    hlt_assert_unchanged_by(R, c, &(hlt_bg){ .key = key, .limit = limit, .ttl_ms = 5000 }, HILOCK_BUSY, key, 1);
}

static void release_free(hilock *l)
{
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
}

static long long hfield_exists(const char *hash, const char *field)
{
    redisReply *rep = hlt_cmd(R, "HEXISTS %s %s", hash, field);
    long long n = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -99;
    if (rep) freeReplyObject(rep);
    return n;
}

/* ---- the limit ---- */

Test(sem, limit_three_grants_three_permits_then_busy)
{
    NEEDS_32();
    hilock_client *c[4];
    hilock *l[3];
    double score;
    for (int i = 0; i < 4; i++) c[i] = hlt_client_retry(R->url, 10);
    for (int i = 0; i < 3; i++) l[i] = must_sem(c[i], "sem", 3, 20000, 0);
    assert_busy(c[3], "sem", 3);
    cr_log_info("BUSY: %s", hilock_client_errmsg(c[3]));
    cr_assert(strstr(hilock_client_errmsg(c[3]), "3 of 3 permits held (limit 3)"), "errmsg: %s",
              hilock_client_errmsg(c[3]));
    cr_assert_eq(hlt_zcard(R, "sem"), 4, "3 members and the marker");
    cr_assert(hlt_zscore(R, "sem", MARKER, &score) && score >= 1e300, "the marker scores +inf");
    for (int i = 0; i < 3; i++) {
        hlt_assert_expiry(R, l[i], 20000);
        for (int j = 0; j < i; j++) cr_assert_str_neq(hilock_token(l[i]), hilock_token(l[j]));
        cr_assert_eq(strlen(hilock_token(l[i])), 32, "token %s", hilock_token(l[i]));
    }
    cr_assert(hlt_pttl(R, "sem") > 15000 && hlt_pttl(R, "sem") <= 20000, "pttl %lld", hlt_pttl(R, "sem"));
    cr_assert_eq(hlt_exists(R, "{sem}:holders"), 1, "the holder records");
    cr_assert_eq(hlt_zcard(R, "sem"), 4, "the BUSY attempt wrote nothing");
    for (int i = 0; i < 3; i++) release_free(l[i]);
    cr_assert_eq(hlt_exists(R, "sem"), 0, "deleted when its last holder left");
    cr_assert_eq(hlt_exists(R, "{sem}:holders"), 0);
    for (int i = 0; i < 4; i++) hilock_client_free(c[i]);
}

/* A busy limit of 1 says so in words: "its one permit is held", not "1 of 1 permits". */
Test(sem, a_busy_limit_of_one_says_its_one_permit_is_held)
{
    NEEDS_32();
    hilock_client *c1 = hlt_client_retry(R->url, 10), *c2 = hlt_client_retry(R->url, 10);
    hilock *l = must_sem(c1, "sem", 1, 20000, 0), *m = (hilock *)&m;
    cr_assert_eq(hilock_sem_acquire(c2, "sem", 1, 5000, 0, &m), HILOCK_BUSY);
    cr_assert_null(m);
    cr_assert(!strncmp(hilock_client_errmsg(c2), "sem: its one permit is held (limit 1), it expires in ", 53), "%s",
              hilock_client_errmsg(c2));
    cr_assert_eq(hlt_zcard(R, "sem"), 2, "one permit, and the marker");
    release_free(l);
    hilock_client_free(c1);
    hilock_client_free(c2);
}

Test(sem, limit_one_is_a_mutex)
{
    NEEDS_32();
    hilock_client *a = hlt_client_retry(R->url, 10), *b = hlt_client_retry(R->url, 10);
    hilock *l = must_sem(a, "sem", 1, 20000, 0);
    assert_busy(b, "sem", 1);
    release_free(l);
    l = must_sem(b, "sem", 1, 20000, 0);
    release_free(l);
    hilock_client_free(a);
    hilock_client_free(b);
}

Test(sem, release_frees_one_permit_for_another_caller)
{
    NEEDS_32();
    hilock_client *c[3] = { hlt_client_retry(R->url, 10), hlt_client_retry(R->url, 10), hlt_client_retry(R->url, 10) };
    hilock *a = must_sem(c[0], "sem", 2, 20000, 0), *b = must_sem(c[1], "sem", 2, 20000, 0), *n;
    assert_busy(c[2], "sem", 2);
    release_free(a);
    cr_assert_eq(hlt_zscore(R, "sem", hilock_token(b), &(double){ 0 }), 1, "the other permit stays");
    cr_assert_eq(hlt_zcard(R, "sem"), 2);
    n = must_sem(c[2], "sem", 2, 20000, 0);
    cr_assert_eq(hlt_zcard(R, "sem"), 3);
    hlt_assert_expiry(R, n, 20000);
    release_free(b);
    release_free(n);
    for (int i = 0; i < 3; i++) hilock_client_free(c[i]);
}

Test(sem, release_twice_says_not_held)
{
    NEEDS_32();
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_sem(c, "sem", 2, 20000, 0);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    cr_assert_eq(hilock_validity_ms(l), 0);
    cr_assert_eq(hilock_release(l), HILOCK_NOT_HELD);
    cr_assert_eq(hlt_exists(R, "sem"), 0);
    hilock_free(l);
    hilock_client_free(c);
}

/* For hlt_run_until: has a waiter's BLPOP reached the server (INFO blocked_clients)? */
static int one_blocked(void *r) { return hlt_info_int(r, "clients", "blocked_clients:") >= 1; }

/* The waiter polls only every ~5 s (retry_delay_ms), the holder's ttl is 60 s: a grant within
 * 2 s of the release can only be the release's wake-up. */
/* Blocking and on the loop (tests/scenario.h): a semaphore of two grants two (on the loop: side
 * by side on one client), a third waits in the queue, blocked on its wake-up; one release
 * grants it at once, not at its poll. */
HLT_SCENARIO(sem, release_wakes_a_blocked_waiter_before_its_poll)
{
    NEEDS_32();
    hilock_options o = hlt_waiter_options(R->unix_url, 20000);   /* woken, not polled */
    hlt_run *a = hlt_run_new(&o, mode), *b = hlt_run_peer(a), *w = hlt_run_peer(a);
    hilock *la, *lb, *lw;
    long long t_rel, took;
    cr_assert_eq(hlt_run_sem_acquire(a, "pool", 2, 60000, 0, &la), HILOCK_OK, "%s", hlt_run_errmsg(a));
    cr_assert_eq(hlt_run_sem_acquire(b, "pool", 2, 60000, 0, &lb), HILOCK_OK, "%s", hlt_run_errmsg(b));
    cr_assert(hlt_zscore(R, "pool", hilock_token(la), &(double){ 0 }));
    cr_assert(hlt_zscore(R, "pool", hilock_token(lb), &(double){ 0 }));
    cr_assert_eq(hlt_zcard(R, "pool"), 3, "two permits and the kind's marker");
    cr_assert_neq(hilock_fence(la), hilock_fence(lb));
    hlt_run_begin_sem_acquire(w, "pool", 2, 20000, 15000);
    cr_assert(hlt_run_until(w, hlt_zcard_is, &(hlt_zcard_want){ R, "{pool}:wq", 1 }, 5000),
              "the waiter never registered in {pool}:wq");
    /* (hlt_run_until: on the loop the waiter's BLPOP goes out from a later turn, on a side
     * connection it opens first; a plain wait that does not run the loop never sees it) */
    cr_assert(hlt_run_until(w, one_blocked, R, 5000), "the waiter never blocked on its wake-up");
    cr_assert_not(hlt_run_ended(w), "a third permit of two: %s", hlt_run_errmsg(w));
    t_rel = hlt_now_ms();
    cr_assert_eq(hlt_run_release(a, la), HILOCK_OK, "%s", hlt_run_errmsg(a));
    cr_assert_eq(hlt_run_end(w, 10000, &lw), HILOCK_OK, "%s", hlt_run_errmsg(w));
    took = hlt_run_ended_at(w) - t_rel;
    cr_log_info("%s: release -> woken waiter granted: %lld ms", hlt_run_mode_name(w), took);
    cr_assert_lt(took, 2000, "granted %lld ms after the release: polled, not woken", took);
    hlt_assert_expiry(R, lw, 20000);
    cr_assert(hlt_zscore(R, "pool", hilock_token(lw), &(double){ 0 }));
    cr_assert_not(hlt_zscore(R, "pool", hilock_token(la), &(double){ 0 }));
    cr_assert_gt(hilock_fence(lw), hilock_fence(lb));
    cr_assert_eq(hlt_zcard(R, "pool"), 3);
    cr_assert_eq(hlt_exists(R, "{pool}:wq"), 0, "a grant removes its waiter entry");
    cr_assert_eq(hlt_run_release(b, lb), HILOCK_OK, "%s", hlt_run_errmsg(b));
    cr_assert_eq(hlt_run_release(w, lw), HILOCK_OK, "%s", hlt_run_errmsg(w));
    cr_assert_eq(hlt_exists(R, "pool"), 0, "the last holder's release deletes the key");
    hilock_free(la);
    hilock_free(lb);
    hilock_free(lw);
    hlt_run_free(w);
    hlt_run_free(b);
    hlt_run_free(a);
}

Test(sem, waiter_whose_wait_runs_out_is_busy_and_leaves_the_queue)
{
    NEEDS_32();
    hilock_client *a = hlt_client_retry(R->url, 10), *b = hlt_client_retry(R->url, 10);
    hilock *l = must_sem(a, "sem", 1, 20000, 0), *m = (hilock *)&m;
    long long t0 = hlt_now_ms();
    cr_assert_eq(hilock_sem_acquire(b, "sem", 1, 5000, 300, &m), HILOCK_BUSY, "%s", hilock_client_errmsg(b));
    cr_assert_null(m);
    cr_assert_geq(hlt_now_ms() - t0, 250);
    cr_assert_lt(hlt_now_ms() - t0, 5000);
    cr_assert_eq(hlt_zcard(R, "{sem}:wq"), 0, "give_up removes the waiter entry");
    cr_assert_eq(hlt_zcard(R, "sem"), 2);
    release_free(l);
    hilock_client_free(a);
    hilock_client_free(b);
}

/* A waiter leaves the queue when its wait ends: a wait that runs out (cancel 0) with its last
 * attempt, at the wait's end -- two scripts, the first and the last attempt, and no leave call
 * (a waiter that polls seldom, wake = 0, makes its last attempt surely after the end: one that
 * began before it registers again, and a leave call follows); a wait cancelled before its last
 * attempt (cancel 1) with a leave call of its own. */
static void waiter_leaves_the_queue(int cancel)
{
    hilock_client *a = hlt_client_retry(R->url, 10);
    hilock *l = must_sem(a, "sem", 1, 20000, 0);
    hlt_bg w = { .url = R->url, .key = "sem", .limit = 1, .ttl_ms = 20000, .wait_ms = 300,
                 .retry_delay_ms = 5000, .no_wake = 1 };
    if (cancel) {
        w = (hlt_bg){ .url = R->url, .key = "sem", .limit = 1, .ttl_ms = 20000, .wait_ms = 15000 };
        hlt_bg_start(&w);
        cr_assert_eq(hlt_await_zcard(R, "{sem}:wq", 1, 5000), 1, "the waiter never registered");
        hlt_log_commands(R);
        hilock_cancel(w.c);
    } else {
        hlt_log_commands(R);
        hlt_bg_start(&w);
    }
    cr_assert_eq(hlt_bg_join(&w, 10000), cancel ? HILOCK_ECANCELED : HILOCK_BUSY, "%s", w.err);
    cr_assert_eq(hlt_zcard(R, "{sem}:wq"), 0, "the waiter's entry is left behind");
    if (!cancel) cr_assert_eq(hlt_logged(R, "acquire"), 2, "the first and the last attempt");
    cr_assert_eq(hlt_logged(R, "leave"), cancel, "%s leave call", cancel ? "not one" : "a");
    hlt_bg_free(&w);
    release_free(l);
    hilock_client_free(a);
}

Test(sem, a_wait_that_runs_out_leaves_with_its_last_attempt)
{
    NEEDS_32();
    waiter_leaves_the_queue(0);
}

Test(sem, a_cancelled_waiter_leaves_the_queue)
{
    NEEDS_32();
    waiter_leaves_the_queue(1);
}

/* One freed permit wakes one waiter: of two blocked waiters (limit 1), the release grants one
 * at once; the other is woken by that one's release, each well before its poll. */
Test(sem, a_release_wakes_one_waiter_per_freed_permit)
{
    NEEDS_32();
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_sem(c, "sem", 1, 60000, 0);
    hlt_bg w[2];
    long long t_rel;
    int first;
    for (int i = 0; i < 2; i++) {
        w[i] = (hlt_bg){ .url = R->url, .key = "sem", .limit = 1, .ttl_ms = 20000, .wait_ms = 15000,
                         .retry_delay_ms = 5000 };
        hlt_bg_start(&w[i]);
    }
    cr_assert_eq(hlt_await_zcard(R, "{sem}:wq", 2, 5000), 2, "the waiters never registered");
    hlt_sleep_ms(100);
    t_rel = hlt_now_ms();
    release_free(l);
    while (!hlt_bg_done(&w[0]) && !hlt_bg_done(&w[1]) && hlt_now_ms() < t_rel + 2000) hlt_sleep_ms(2);
    first = hlt_bg_done(&w[0]) ? 0 : 1;
    cr_assert(hlt_bg_done(&w[first]), "no waiter woken within 2 s of the release");
    cr_assert_eq(hlt_bg_join(&w[first], 1000), HILOCK_OK, "%s", w[first].err);
    hlt_sleep_ms(200);
    cr_assert_not(hlt_bg_done(&w[1 - first]), "both granted with limit 1: %s", w[1 - first].err);
    cr_assert_eq(hlt_zcard(R, "sem"), 2);
    t_rel = hlt_now_ms();
    cr_assert_eq(hilock_release(w[first].l), HILOCK_OK);
    cr_assert_eq(hlt_bg_join(&w[1 - first], 10000), HILOCK_OK, "%s", w[1 - first].err);
    cr_log_info("second waiter: granted %lld ms after the first one's release", w[1 - first].t_done - t_rel);
    cr_assert_lt(w[1 - first].t_done - t_rel, 2000, "polled, not woken");
    for (int i = 0; i < 2; i++) hlt_bg_free(&w[i]);
    cr_assert_eq(hlt_exists(R, "sem"), 0);
    hilock_client_free(c);
}

/* A waiter whose pause is under a second (poll_ms 400, it keeps the watch) blocks on the
 * signal list all the same: before Redis 6.0 a whole second, not a poll every
 * retry_delay_ms (8 s here, which a release would wait out). */
Test(sem, a_waiter_whose_pause_is_under_a_second_is_woken_by_the_release)
{
    NEEDS_32();
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_sem(c, "sem", 1, 60000, 0);
    hlt_bg w = { .url = R->url, .key = "sem", .limit = 1, .ttl_ms = 20000, .wait_ms = 15000,
                 .retry_delay_ms = 8000, .poll_ms = 400 };
    long long t_rel;
    hlt_bg_start(&w);
    cr_assert_eq(hlt_await_zcard(R, "{sem}:wq", 1, 5000), 1, "the waiter never registered");
    hlt_sleep_ms(600);
    t_rel = hlt_now_ms();
    release_free(l);
    cr_assert_eq(hlt_bg_join(&w, 10000), HILOCK_OK, "%s", w.err);
    cr_log_info("release -> waiter granted: %lld ms", w.t_done - t_rel);
    cr_assert_lt(w.t_done - t_rel, 2000, "granted %lld ms after the release: polled, not woken", w.t_done - t_rel);
    cr_assert_eq(hlt_zcard(R, "sem"), 2, "the marker and the waiter's permit");
    hlt_bg_free(&w);
    cr_assert_eq(hlt_exists(R, "sem"), 0);
    hilock_client_free(c);
}

/* Once the waiters are served and gone, only the fence counter is left (it has a ttl): the
 * waiter queue and the wake-up list expire. */
Test(sem, nothing_but_the_fence_counter_is_left_behind)
{
    NEEDS_32();
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_sem(c, "sem", 1, 60000, 0);
    hlt_bg w = { .url = R->url, .key = "sem", .limit = 1, .ttl_ms = 20000, .wait_ms = 15000 };
    redisReply *keys;
    long long end = hlt_now_ms() + 5000;
    hlt_bg_start(&w);
    cr_assert_eq(hlt_await_zcard(R, "{sem}:wq", 1, 5000), 1);
    release_free(l);
    cr_assert_eq(hlt_bg_join(&w, 10000), HILOCK_OK, "%s", w.err);
    hlt_bg_free(&w);
    while (hlt_dbsize(R) > 1 && hlt_now_ms() < end) hlt_sleep_ms(20);
    keys = hlt_cmd(R, "KEYS *");
    cr_assert(keys && keys->type == REDIS_REPLY_ARRAY);
    cr_assert(keys->elements == 1 && !strcmp(keys->element[0]->str, "{sem}:fence"), "%zu keys left, first %s",
              keys->elements, keys->elements ? keys->element[0]->str : "-");
    freeReplyObject(keys);
    cr_assert_gt(hlt_pttl(R, "{sem}:fence"), 0, "the fence counter has no expiry");
    hilock_client_free(c);
}

Test(sem, the_holder_record_says_since_limit_host_pid_and_program)
{
    NEEDS_32();
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_sem(c, "sem", 3, 20000, 0);
    long long now = hlt_server_ms(R);
    redisReply *rep = hlt_cmd(R, "HGET {sem}:holders %s", hilock_token(l));
    char want[64];
    cr_assert(rep && rep->type == REDIS_REPLY_STRING, "no holder record for %s", hilock_token(l));
    cr_log_info("holder record: %s", rep->str);
    cr_assert_lt(llabs(atoll(rep->str) - now), 5000, "since %s, server clock %lld", rep->str, now);
    snprintf(want, sizeof want, "\n3\n");
    cr_assert(strstr(rep->str, want), "limit: %s", rep->str);
    snprintf(want, sizeof want, "\n%d\n", (int)getpid());
    cr_assert(strstr(rep->str, want), "pid: %s", rep->str);
    cr_assert_gt(hlt_pttl(R, "{sem}:holders"), 15000, "the records expire with the key");
    freeReplyObject(rep);
    release_free(l);
    cr_assert_eq(hlt_exists(R, "{sem}:holders"), 0);
    hilock_client_free(c);
}

/* A permit whose expiry has passed (its member still in the set, not pruned yet) is not
 * renewed by an extend: its place may have been given to another caller already. */
Test(sem, an_expired_permit_is_not_extended_back_to_life)
{
    NEEDS_32();
    hilock_client *a = hlt_client_retry(R->url, 10), *b = hlt_client_retry(R->url, 10);
    hilock *gone = must_sem(a, "sem", 2, 300, 0), *kept = must_sem(b, "sem", 2, 20000, 0);
    hlt_sleep_ms(500);
    cr_assert_eq(hilock_check(gone), HILOCK_NOT_HELD, "%s", hilock_client_errmsg(a));
    cr_assert_eq(hilock_extend(gone, 20000), HILOCK_NOT_HELD, "%s", hilock_client_errmsg(a));
    cr_assert_eq(hlt_zscore(R, "sem", hilock_token(gone), &(double){ 0 }), 0, "renewed an expired permit");
    cr_assert_eq(hlt_zcard(R, "sem"), 2, "the live permit and the marker");
    hlt_assert_expiry(R, kept, 20000);
    hilock_free(gone);
    release_free(kept);
    hilock_client_free(a);
    hilock_client_free(b);
}

/* The key's ttl follows its latest holder: shortening the longest permit brings it down to
 * the next one's expiry, never below a live holder's. */
Test(sem, the_key_expires_with_its_latest_holder)
{
    NEEDS_32();
    hilock_client *a = hlt_client_retry(R->url, 10), *b = hlt_client_retry(R->url, 10);
    hilock *long_ = must_sem(a, "sem", 2, 30000, 0), *short_ = must_sem(b, "sem", 2, 10000, 0);
    cr_assert_gt(hlt_pttl(R, "sem"), 25000);
    cr_assert_eq(hilock_extend(long_, 2000), HILOCK_OK);
    cr_assert(hlt_pttl(R, "sem") > 5000 && hlt_pttl(R, "sem") <= 10000, "pttl %lld: not the latest holder's",
              hlt_pttl(R, "sem"));
    cr_assert_gt(hlt_pttl(R, "{sem}:holders"), 5000);
    release_free(long_);
    release_free(short_);
    hilock_client_free(a);
    hilock_client_free(b);
}

/* Release and extend compare the member: a key that holds another kind now (here a plain
 * lock) is left alone, its value and ttl as they were. */
Test(sem, release_and_extend_leave_a_key_of_another_kind_alone)
{
    NEEDS_32();
    hilock_client *a = hlt_client_retry(R->url, 10), *b = hlt_client_retry(R->url, 10);
    hilock *l = must_sem(a, "k", 2, 20000, 0), *p;
    char *v;
    freeReplyObject(hlt_cmd(R, "DEL k"));
    cr_assert_eq(hilock_acquire(b, "k", 20000, 0, &p), HILOCK_OK, "%s", hilock_client_errmsg(b));
    hlt_sleep_ms(20);
    cr_assert_eq(hilock_extend(l, 60000), HILOCK_NOT_HELD, "%s", hilock_client_errmsg(a));
    cr_assert_leq(hlt_pttl(R, "k"), 20000, "the plain lock's ttl moved");
    cr_assert_eq(hilock_check(l), HILOCK_NOT_HELD, "%s", hilock_client_errmsg(a));
    cr_assert_eq(hilock_release(l), HILOCK_NOT_HELD, "%s", hilock_client_errmsg(a));
    cr_assert(strstr(hilock_client_errmsg(a), "the key holds another kind now"), "%s", hilock_client_errmsg(a));
    v = hlt_get(R, "k");
    cr_assert(v && !strcmp(v, hilock_token(p)), "k holds %s", v);
    free(v);
    release_free(p);
    hilock_free(l);
    hilock_client_free(a);
    hilock_client_free(b);
}

/* ---- expiry ---- */

Test(sem, a_holder_that_never_releases_loses_its_permit_after_its_ttl)
{
    NEEDS_32();
    hilock_client *a = hlt_client_retry(R->url, 10), *b = hlt_client_retry(R->url, 10);
    hilock *dead = must_sem(a, "sem", 1, 600, 0), *l;
    char token[64];
    long long t0 = hlt_now_ms();
    snprintf(token, sizeof token, "%s", hilock_token(dead));
    hilock_free(dead);   /* dies without a release */
    assert_busy(b, "sem", 1);
    l = must_sem(b, "sem", 1, 20000, 10000);
    cr_assert_lt(hlt_now_ms() - t0, 5000, "the permit came back after %lld ms", hlt_now_ms() - t0);
    cr_assert_eq(hlt_zscore(R, "sem", token, &(double){ 0 }), 0, "the dead permit is pruned");
    cr_assert_eq(hfield_exists("{sem}:holders", token), 0, "and its holder record");
    cr_assert_eq(hlt_zcard(R, "sem"), 2);
    hlt_assert_expiry(R, l, 20000);
    release_free(l);
    hilock_client_free(a);
    hilock_client_free(b);
}

Test(sem, free_without_release_leaves_the_member_until_its_ttl)
{
    NEEDS_32();
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_sem(c, "sem", 2, 700, 0);
    char token[64];
    long long end = hlt_now_ms() + 5000;
    snprintf(token, sizeof token, "%s", hilock_token(l));
    hilock_free(l);
    cr_assert_eq(hlt_zscore(R, "sem", token, &(double){ 0 }), 1, "freeing is not releasing");
    cr_assert(hlt_pttl(R, "sem") > 0 && hlt_pttl(R, "sem") <= 700, "pttl %lld", hlt_pttl(R, "sem"));
    while (hlt_exists(R, "sem") && hlt_now_ms() < end) hlt_sleep_ms(10);
    cr_assert_eq(hlt_exists(R, "sem"), 0, "the key follows its last holder's expiry");
    hilock_client_free(c);
}

/* ---- fences ---- */

Test(sem, fences_grow_strictly_across_permits)
{
    NEEDS_32();
    hilock_client *c[3] = { hlt_client_retry(R->url, 10), hlt_client_retry(R->url, 10), hlt_client_retry(R->url, 10) };
    hilock *l[3];
    uint64_t last = 0;
    long long now = hlt_server_ms(R);
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 3; i++) {
            l[i] = must_sem(c[i], "sem", 3, 20000, 0);
            cr_assert_gt(hilock_fence(l[i]), last, "fence %llu after %llu", (unsigned long long)hilock_fence(l[i]),
                         (unsigned long long)last);
            last = hilock_fence(l[i]);
        }
        for (int i = 0; i < 3; i++) release_free(l[i]);
    }
    cr_assert_geq(last, (uint64_t)now, "at least the server's clock floor");
    cr_assert_eq(hlt_exists(R, "{sem}:fence"), 1, "the modern lock's counter");
    for (int i = 0; i < 3; i++) hilock_client_free(c[i]);
}

Test(sem, fences_grow_across_the_lock_and_the_semaphore_of_a_key)
{
    NEEDS_32();
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *a, *b;
    cr_assert_eq(hilock_acquire(c, "k", 20000, 0, &a), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(a), HILOCK_OK);
    b = must_sem(c, "k", 2, 20000, 0);
    cr_assert_gt(hilock_fence(b), hilock_fence(a));
    release_free(b);
    hilock_free(a);
    hilock_client_free(c);
}

/* ---- callers that disagree on the limit (docs/semaphore.md) ---- */

/* Three permits held under limit 3: a limit-2 caller waits until fewer than 2 are held (two
 * releases); a limit-4 caller is granted a fourth at once. */
Test(sem, a_lower_limit_waits_while_holders_reach_it_and_a_higher_one_is_granted)
{
    NEEDS_32();
    hilock_client *c[4];
    hilock *l[3], *hi;
    hlt_bg w = { .url = R->url, .key = "sem", .limit = 2, .ttl_ms = 20000, .wait_ms = 15000 };
    for (int i = 0; i < 4; i++) c[i] = hlt_client_retry(R->url, 10);
    for (int i = 0; i < 3; i++) l[i] = must_sem(c[i], "sem", 3, 20000, 0);
    assert_busy(c[3], "sem", 2);
    cr_assert(strstr(hilock_client_errmsg(c[3]), "(limit 2)"), "errmsg: %s", hilock_client_errmsg(c[3]));
    hi = must_sem(c[3], "sem", 4, 20000, 0);
    cr_assert_eq(hlt_zcard(R, "sem"), 5, "4 holders under limit 4, and the marker");
    release_free(hi);
    hlt_bg_start(&w);
    cr_assert_eq(hlt_await_zcard(R, "{sem}:wq", 1, 5000), 1);
    release_free(l[0]);   /* 2 held: still not fewer than 2 */
    hlt_sleep_ms(300);
    cr_assert_not(hlt_bg_done(&w), "granted with 2 permits held under limit 2: %s", w.err);
    release_free(l[1]);   /* 1 held */
    cr_assert_eq(hlt_bg_join(&w, 10000), HILOCK_OK, "%s", w.err);
    cr_assert_eq(hlt_zcard(R, "sem"), 3);
    release_free(l[2]);
    hlt_bg_free(&w);
    for (int i = 0; i < 4; i++) hilock_client_free(c[i]);
}

/* ---- a permit as a lock ---- */

Test(sem, extend_check_and_validity_work_on_a_permit)
{
    NEEDS_32();
    hilock_client *c = hlt_client_retry(R->url, 10), *o = hlt_client_retry(R->url, 10);
    hilock *l = must_sem(c, "sem", 2, 5000, 0), *other = must_sem(o, "sem", 2, 5000, 0);
    cr_assert(hilock_validity_ms(l) > 0 && hilock_validity_ms(l) <= 5000, "validity %lld",
              (long long)hilock_validity_ms(l));
    cr_assert_eq(hilock_extend(l, 30000), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_assert_expiry(R, l, 30000);
    hlt_assert_expiry(R, other, 5000);   /* the other permit keeps its own expiry */
    cr_assert_gt(hilock_validity_ms(l), 20000);
    cr_assert_gt(hlt_pttl(R, "sem"), 25000, "the key follows its latest holder");
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_gt(hilock_validity_ms(l), 20000);
    /* our member gone (taken by hand): NOT_HELD, and nothing recreated */
    freeReplyObject(hlt_cmd(R, "ZREM sem %s", hilock_token(l)));
    cr_assert_eq(hilock_check(l), HILOCK_NOT_HELD);
    cr_assert_eq(hilock_validity_ms(l), 0);
    cr_assert_eq(hilock_extend(l, 30000), HILOCK_NOT_HELD);
    cr_assert_eq(hlt_zscore(R, "sem", hilock_token(l), &(double){ 0 }), 0, "extend must not re-add it");
    cr_assert_eq(hilock_check(other), HILOCK_OK);
    cr_assert_eq(hilock_release(l), HILOCK_NOT_HELD);
    release_free(other);
    cr_assert_eq(hilock_extend(l, 30000), HILOCK_EINVAL, "extend of a released permit");
    hilock_free(l);
    hilock_client_free(c);
    hilock_client_free(o);
}

/* Blocking and on the loop (tests/scenario.h): a permit is a lock as any other -- extended (the
 * key's expiry follows), checked, kept alive past 3 x its ttl -- and the key, asked as a
 * shared/exclusive lock, is refused naming its kind in the blocking call's words, unchanged.
 * (A ttl of 1 s: with 300 ms, the round trips between the extend and the keepalive's start,
 * or a loaded machine holding up the thread that renews, could let it lapse.) */
HLT_SCENARIO(sem, keepalive_renews_a_permit_past_its_ttl)
{
    NEEDS_32();
    hilock_options o = hlt_options((const char *const[]){ R->unix_url }, 1);
    hlt_run *a = hlt_run_new(&o, mode), *b = hlt_run_peer(a);   /* (b: a key a holds) */
    hilock_client *plain = hlt_client(R->unix_url);
    hilock *l, *m = NULL;
    long long pttl;
    int lost_n = 0;
    char want[256];
    cr_assert_eq(hlt_run_sem_acquire(a, "sem", 2, 30000, 0, &l), HILOCK_OK, "%s", hlt_run_errmsg(a));
    cr_assert_eq(hlt_run_extend(a, l, 1000), HILOCK_OK, "%s", hlt_run_errmsg(a));
    pttl = hlt_pttl(R, "sem");
    cr_assert(pttl > 0 && pttl <= 1000, "PTTL %lld after an extend to 1 s", pttl);
    cr_assert_eq(hlt_run_check(a, l), HILOCK_OK, "%s", hlt_run_errmsg(a));
    cr_assert_eq(hlt_run_keepalive(a, l, hlt_count_lost, &lost_n, NULL), HILOCK_OK, "%s", hlt_run_errmsg(a));
    hlt_run_sleep(a, 3000);   /* 3 x ttl: renewals every third of it */
    cr_assert_eq(hlt_lost_count(&lost_n), 0);
    cr_assert_eq(hlt_run_check(a, l), HILOCK_OK, "%s", hlt_run_errmsg(a));
    cr_assert_eq(hlt_zscore(R, "sem", hilock_token(l), &(double){ 0 }), 1, "not kept for 3 x ttl");
    cr_assert_gt(hilock_validity_ms(l), 0);
    /* the key asked as the other kind: the blocking call's EREPLY, in its words */
    cr_assert_eq(hilock_rw_acquire(plain, "sem", HILOCK_SHARED, 1000, 0, &m), HILOCK_EREPLY);
    snprintf(want, sizeof want, "%s", hilock_client_errmsg(plain));
    cr_assert(strstr(want, "sem holds a semaphore, not a shared/exclusive lock"), "%s", want);
    cr_assert_eq(hlt_run_rw_acquire(b, "sem", HILOCK_SHARED, 1000, 0, &m), HILOCK_EREPLY);
    cr_assert_null(m);
    cr_assert_str_eq(hlt_run_errmsg(b), want);
    cr_assert_eq(hlt_zcard(R, "sem"), 2, "the refused call wrote");
    cr_assert_eq(hlt_run_release(a, l), HILOCK_OK, "%s", hlt_run_errmsg(a));
    cr_assert_eq(hlt_exists(R, "sem"), 0);
    hilock_free(l);
    hilock_client_free(plain);
    hlt_run_free(b);
    hlt_run_free(a);
}

static void lost(hilock *l, hilock_status why, void *arg)
{
    (void)l;
    __atomic_store_n((int *)arg, (int)why, __ATOMIC_RELEASE);
}

/* A keepalive whose renewal finds the permit gone says so (on_lost, NOT_HELD). */
Test(sem, keepalive_reports_a_permit_taken_away)
{
    NEEDS_32();
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_sem(c, "sem", 2, 600, 0);
    int why = -1;
    long long end = hlt_now_ms() + 5000;
    cr_assert_eq(hilock_keepalive(l, lost, &why), HILOCK_OK, "%s", hilock_client_errmsg(c));
    freeReplyObject(hlt_cmd(R, "ZREM sem %s", hilock_token(l)));
    while (__atomic_load_n(&why, __ATOMIC_ACQUIRE) < 0 && hlt_now_ms() < end) hlt_sleep_ms(10);
    cr_assert_eq(why, HILOCK_NOT_HELD, "on_lost: %d", why);
    cr_assert_eq(hlt_zscore(R, "sem", hilock_token(l), &(double){ 0 }), 0, "the keepalive re-added it");
    hilock_free(l);
    hilock_client_free(c);
}

/* min_replicas on a master without replicas: EREPLICAS, and the grant is taken back by
 * member (the key, with only its marker left, goes), the other holder untouched. */
Test(sem, a_permit_without_its_replicas_is_ereplicas_and_undone)
{
    HLT_NEEDS(30200, "the semaphore's script reads the server's clock (Redis 3.2+)");
    hilock_options o;
    hilock_client *c, *d = hlt_client_retry(R->url, 10);
    hilock *l = (hilock *)&l, *other;
    const char *url = R->url;
    o = hlt_options(&url, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    o.min_replicas = 1;
    o.replicas_timeout_ms = 50;
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_sem_acquire(c, "sem", 3, 5000, 0, &l), HILOCK_EREPLICAS, "%s", hilock_client_errmsg(c));
    cr_assert_null(l);
    cr_assert_eq(hlt_exists(R, "sem"), 0, "the permit was not undone");
    other = must_sem(d, "sem", 3, 20000, 0);
    l = (hilock *)&l;
    cr_assert_eq(hilock_sem_acquire(c, "sem", 3, 5000, 0, &l), HILOCK_EREPLICAS, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_zcard(R, "sem"), 2, "the other permit and the marker alone");
    hlt_assert_expiry(R, other, 20000);
    release_free(other);
    hilock_client_free(c);
    hilock_client_free(d);
}

Test(sem, token_and_key_accessors)
{
    NEEDS_32();
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_sem(c, "jobs:{tenant}:batch", 2, 20000, 0);
    cr_assert_str_eq(hilock_key(l), "jobs:{tenant}:batch");
    cr_assert_eq(hlt_zscore(R, "jobs:{tenant}:batch", hilock_token(l), &(double){ 0 }), 1, "the token is the member");
    cr_assert_eq(hlt_exists(R, "jobs:{tenant}:batch:fence"), 1, "aux keys join the key's hash tag");
    cr_assert_eq(hlt_exists(R, "jobs:{tenant}:batch:holders"), 1);
    release_free(l);
    hilock_client_free(c);
}

/* ---- refusals: a status, a message, nothing written ---- */

/* st is EINVAL (msg: the call's message), *out NULL, the database as before (an empty one). */
static void assert_einval_empty_msg(hilock_status st, hilock *const *l, const char *msg)
{
    cr_assert_eq(st, HILOCK_EINVAL, "%s (%s)", hilock_strerror(st), msg);
    cr_assert_null(*l);
    cr_assert_eq(hlt_dbsize(R), 0, "a refused call wrote something");
}

static void assert_einval_empty(hilock_client *c, hilock_status st, hilock *const *l)
{
    assert_einval_empty_msg(st, l, hilock_client_errmsg(c));
}

/* Blocking and on the loop (tests/scenario.h): each bad argument is EINVAL at once, in the
 * same words both ways, and writes nothing (on the loop the _async call refuses it, its done
 * never runs). What each form has of its own is refused too: blocking, a NULL out and a NULL
 * client; on the loop, a NULL client, a NULL done, a client not attached, and the blocking call
 * on an attached client. */
HLT_SCENARIO(sem, bad_limits_and_arguments_are_einval_and_write_nothing)
{
    const char *url = R->url;
    hilock_options o = hlt_options(&url, 1);
    hlt_run *r;
    hilock *l = (hilock *)&l;
    const int bad[] = { 0, -1, HILOCK_SEM_LIMIT_MAX + 1, -2147483647 - 1 };
    o.retry_delay_ms = 10;
    r = hlt_run_new(&o, mode);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char want[64];
        assert_einval_empty_msg(hlt_run_sem_acquire(r, "sem", bad[i], 5000, 0, &l), &l, hlt_run_errmsg(r));
        snprintf(want, sizeof want, "limit must be 1..1000 (got %d)", bad[i]);
        cr_assert_str_eq(hlt_run_errmsg(r), want);
    }
    assert_einval_empty_msg(hlt_run_sem_acquire(r, NULL, 2, 5000, 0, &l), &l, hlt_run_errmsg(r));
    assert_einval_empty_msg(hlt_run_sem_acquire(r, "", 2, 5000, 0, &l), &l, hlt_run_errmsg(r));
    assert_einval_empty_msg(hlt_run_sem_acquire(r, "sem", 2, 0, 0, &l), &l, hlt_run_errmsg(r));
    cr_assert(strstr(hlt_run_errmsg(r), "ttl_ms"), "%s", hlt_run_errmsg(r));
    assert_einval_empty_msg(hlt_run_sem_acquire(r, "sem", 2, -5, 0, &l), &l, hlt_run_errmsg(r));
    assert_einval_empty_msg(hlt_run_sem_acquire(r, "sem", 2, 5000, -2, &l), &l, hlt_run_errmsg(r));
    if (mode == HLT_BLOCKING) {
        l = (hilock *)&l;
        assert_einval_empty(hlt_run_client(r), hilock_sem_acquire(hlt_run_client(r), "sem", 0, 5000, 0, &l), &l);
        cr_assert_eq(hilock_sem_acquire(hlt_run_client(r), "sem", 2, 5000, 0, NULL), HILOCK_EINVAL);
        cr_assert_eq(hilock_sem_acquire(NULL, "sem", 2, 5000, 0, &l), HILOCK_EINVAL);
    } else {
        hilock_client *c = hlt_run_client(r), *plain = hlt_client_new(&o);   /* not attached */
        cr_assert_eq(hilock_sem_acquire_async(NULL, "sem", 2, 5000, 0, hlt_never_done, NULL), HILOCK_EINVAL);
        cr_assert_eq(hilock_sem_acquire_async(c, "sem", 2, 5000, 0, NULL, NULL), HILOCK_EINVAL);
        cr_assert(strstr(hilock_client_errmsg(c), "done"), "%s", hilock_client_errmsg(c));
        cr_assert_eq(hilock_sem_acquire_async(plain, "sem", 2, 5000, 0, hlt_never_done, NULL), HILOCK_EINVAL);
        cr_assert(strstr(hilock_client_errmsg(plain), "not attached"), "%s", hilock_client_errmsg(plain));
        l = (hilock *)&l;
        cr_assert_eq(hilock_sem_acquire(c, "sem", 2, 5000, 0, &l), HILOCK_EINVAL);
        cr_assert(strstr(hilock_client_errmsg(c), "event loop"), "%s", hilock_client_errmsg(c));
        cr_assert_null(l);
        hlt_run_sleep(r, 10);   /* a few loop passes: a done of a refused call would have run */
        cr_assert_eq(hlt_never_ran(), 0, "done ran for a refused call");
        hilock_client_free(plain);
    }
    cr_assert_null(l);
    cr_assert_eq(hlt_dbsize(R), 0);
    hlt_run_free(r);
}

Test(sem, the_largest_limit_is_taken)
{
    NEEDS_32();
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_sem(c, "sem", HILOCK_SEM_LIMIT_MAX, 20000, 0);
    release_free(l);
    hilock_client_free(c);
}

/* The key holds another kind: refused naming it (lock.c's WRONGTYPE path), nothing written. */
static void assert_refused_kind(const char *key, const char *kind_named)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    hlt_assert_unchanged_by(R, c, &(hlt_bg){ .key = key, .limit = 3, .ttl_ms = 5000 }, HILOCK_EREPLY, kind_named, 1);
    hilock_client_free(c);
}

Test(sem, a_key_holding_a_plain_lock_is_refused_naming_it)
{
    NEEDS_32();
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l;
    cr_assert_eq(hilock_acquire(c, "k", 20000, 0, &l), HILOCK_OK);
    assert_refused_kind("k", "k holds a lock, not a semaphore");
    cr_assert_eq(hilock_check(l), HILOCK_OK);
    release_free(l);
    hilock_client_free(c);
}

Test(sem, a_key_holding_a_legacy_stamp_is_refused_naming_it)
{
    NEEDS_32();
    freeReplyObject(hlt_cmd(R, "SET k 1795417220"));
    assert_refused_kind("k", "k holds a lock, not a semaphore");
}

Test(sem, a_key_holding_a_shared_lock_is_refused_naming_it)
{
    NEEDS_32();
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l;
    cr_assert_eq(hilock_rw_acquire(c, "k", HILOCK_SHARED, 20000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    assert_refused_kind("k", "k holds a shared/exclusive lock, not a semaphore");
    release_free(l);
    hilock_client_free(c);
}

Test(sem, a_key_holding_a_hash_is_refused_naming_it)
{
    NEEDS_32();
    freeReplyObject(hlt_cmd(R, "HSET k f v"));
    assert_refused_kind("k", "k holds a hash");
}

Test(sem, a_zset_without_the_marker_is_refused)
{
    NEEDS_32();
    freeReplyObject(hlt_cmd(R, "ZADD k 1 someone"));
    assert_refused_kind("k", "k holds a zset");
}

Test(sem, a_plain_lock_on_a_semaphore_key_is_refused_naming_it)
{
    NEEDS_32();
    hilock_client *a = hlt_client_retry(R->url, 10), *b = hlt_client_retry(R->url, 10);
    hilock *l = must_sem(a, "k", 3, 20000, 0);
    hlt_assert_unchanged_by(R, b, &(hlt_bg){ .key = "k", .plain = 1, .ttl_ms = 5000 }, HILOCK_EREPLY,
                            "k holds a semaphore, not a lock", 1);
    release_free(l);
    hilock_client_free(a);
    hilock_client_free(b);
}

/* Blocking and on the loop (tests/scenario.h): a fair client's semaphore is EINVAL at once
 * with the reason, in the same words both ways; nothing written. */
HLT_SCENARIO(sem, fair_is_refused_with_the_reason)
{
    const char *url = R->url;
    hilock_options o = hlt_options(&url, 1);
    hilock *l = (hilock *)&l;
    hlt_run *r;
    o.retry_delay_ms = 50;   /* the library's default */
    o.fair = 1;
    r = hlt_run_new(&o, mode);
    assert_einval_empty_msg(hlt_run_sem_acquire(r, "sem", 3, 5000, 0, &l), &l, hlt_run_errmsg(r));
    cr_assert_str_eq(hlt_run_errmsg(r), "a semaphore cannot be fair: its waiters are not served in order; "
                     "take permits with fair off");
    cr_assert_eq(hlt_dbsize(R), 0);
    hlt_run_free(r);
}

/* fencing = 0 and bridge are hilock_acquire's: a permit mints its fencing token anyway, and
 * no legacy stamp is written. */
Test(sem, fencing_0_and_bridge_do_not_apply)
{
    NEEDS_32();
    const char *url = R->url;
    hilock_options o = hlt_options(&url, 1);
    hilock_client *c[2];
    o.retry_delay_ms = 50;   /* the library's default */
    o.fencing = 0;
    c[0] = hlt_client_new(&o);
    o.fencing = 1;
    o.bridge = 1;
    c[1] = hlt_client_new(&o);
    hilock *l[2];
    for (int i = 0; i < 2; i++) {
        l[i] = must_sem(c[i], "sem", 3, 20000, 0);
        cr_assert_gt(hilock_fence(l[i]), 0, "client %d: no fencing token", i);
        cr_assert_eq(strlen(hilock_token(l[i])), 32, "token %s", hilock_token(l[i]));
        hlt_assert_expiry(R, l[i], 20000);
    }
    cr_assert_gt(hilock_fence(l[1]), hilock_fence(l[0]));
    for (int i = 0; i < 2; i++) {
        release_free(l[i]);
        hilock_client_free(c[i]);
    }
}

/* Over n masters, each counting its own holders up to limit, limit + 1 holders can each hold a
 * quorum q exactly when (limit + 1) x q <= n x limit (docs/semaphore.md): those are refused,
 * blocking and on the loop (tests/scenario.h), EINVAL at once saying why, nothing written on
 * any master; the boundary's other side is taken (the next tests hold it). */
HLT_SCENARIO(sem, is_refused_where_limit_plus_one_holders_can_each_hold_a_quorum, .timeout = 60)
{
    static const struct { int n, limit; const char *msg; } refused[] = {
        { 3, 2, "a semaphore over 3 masters cannot keep a limit of 2: each master counts its own holders, so 3 "
                "holders can each hold a quorum (2 masters) while no master counts more than 2; over 3 masters "
                "the largest limit kept is 1" },   /* 3 x 2 <= 3 x 2 */
        { 3, 3, NULL }, { 4, 3, NULL },            /* 4 x 3 <= 4 x 3 */
        { 5, 2, "a semaphore over 5 masters cannot keep a limit of 2: each master counts its own holders, so 3 "
                "holders can each hold a quorum (3 masters) while no master counts more than 2; over 5 masters "
                "the largest limit kept is 1" },   /* 3 x 3 <= 5 x 2 */
    };
    hlt_redis *m[5] = { R };
    const char *urls[5] = { NULL };
    for (int i = 1; i < 5; i++) cr_assert_not_null(m[i] = hlt_redis_start(NULL));
    for (int i = 0; i < 5; i++) urls[i] = m[i]->url;
    for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
        hilock_options o = hlt_options(urls, (size_t)refused[k].n);
        hilock *l = (hilock *)&l;
        hlt_run *r;
        o.retry_delay_ms = 50;   /* the library's default */
        r = hlt_run_new(&o, mode);
        cr_assert_eq(hlt_run_sem_acquire(r, "sem", refused[k].limit, 5000, 0, &l), HILOCK_EINVAL,
                     "%d masters, limit %d: %s", refused[k].n, refused[k].limit, hlt_run_errmsg(r));
        cr_assert_null(l);
        cr_log_info("%d masters, limit %d: %s", refused[k].n, refused[k].limit, hlt_run_errmsg(r));
        if (refused[k].msg) cr_assert_str_eq(hlt_run_errmsg(r), refused[k].msg);
        else cr_assert(strstr(hlt_run_errmsg(r), "cannot keep a limit of 3"), "%s", hlt_run_errmsg(r));
        hlt_run_free(r);
    }
    for (int i = 0; i < 5; i++) cr_assert_eq(hlt_dbsize(m[i]), 0, "master %d: nothing written", i);
    for (int i = 1; i < 5; i++) hlt_redis_stop(m[i]);
}

/* n masters (the suite's and n - 1 more), limit, and `holders` callers that each take a permit
 * (the first `limit` must be granted, the rest busy): every master then counts exactly limit
 * permits and the marker; a release lets the next caller in; all released, nothing but the
 * fence counter is left. */
static void limit_kept_over(int n, int limit, int holders)
{
    hlt_redis *m[4] = { R };
    const char *urls[4] = { NULL };
    hilock_client *c[4];
    hilock *l[4] = { NULL };
    hilock_options o;
    for (int i = 1; i < n; i++) cr_assert_not_null(m[i] = hlt_redis_start(NULL));
    for (int i = 0; i < n; i++) urls[i] = m[i]->url;
    o = hlt_options(urls, (size_t)n);
    o.retry_delay_ms = 50;   /* the library's default */
    for (int h = 0; h < holders; h++) {
        c[h] = hlt_client_new(&o);
        hilock_status st = hilock_sem_acquire(c[h], "sem", limit, 20000, 0, &l[h]);
        cr_assert_eq(st, h < limit ? HILOCK_OK : HILOCK_BUSY, "%d masters, limit %d, caller %d: %s (%s)", n,
                     limit, h + 1, hilock_strerror(st), hilock_client_errmsg(c[h]));
    }
    for (int i = 0; i < n; i++)
        cr_assert_eq(hlt_zcard(m[i], "sem"), limit + 1, "master %d: %d permits and the marker", i, limit);
    uint64_t top = 0;
    for (int h = 0; h < limit; h++) top = hilock_fence(l[h]) > top ? hilock_fence(l[h]) : top;
    release_free(l[0]);
    l[0] = must_sem(c[limit], "sem", limit, 20000, 0);   /* the one left out: in now */
    cr_assert_gt(hilock_fence(l[0]), top, "fences grow");
    for (int i = 0; i < n; i++) cr_assert_eq(hlt_zcard(m[i], "sem"), limit + 1, "master %d", i);
    for (int h = 0; h < limit; h++) release_free(l[h]);
    for (int h = 0; h < holders; h++) hilock_client_free(c[h]);
    for (int i = 0; i < n; i++) cr_assert_eq(hlt_exists(m[i], "sem"), 0, "master %d: the key is gone", i);
    for (int i = 1; i < n; i++) hlt_redis_stop(m[i]);
}

/* Two masters: every quorum is both, so each holder counts on both and any limit holds. */
Test(sem, over_two_masters_any_limit_is_kept, .timeout = 60)
{
    NEEDS_32();
    limit_kept_over(2, 3, 4);
}

/* Four masters, quorum 3, limit 2: 3 holders would need 9 permits of the 8 there are. */
Test(sem, over_four_masters_a_limit_of_two_is_kept, .timeout = 60)
{
    NEEDS_32();
    limit_kept_over(4, 2, 3);
}

/* Three masters, limit 1 (a lock): 2 holders would need 4 permits of the 3 there are. */
Test(sem, over_three_masters_a_limit_of_one_is_kept, .timeout = 60)
{
    NEEDS_32();
    limit_kept_over(3, 1, 2);
}

Test(sem, is_not_reentrant)
{
    NEEDS_32();
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_sem(c, "sem", 3, 20000, 0), *m = (hilock *)&m;
    const char *msg = "this client already holds sem (hilock locks are not re-entrant)";
    cr_assert_eq(hilock_sem_acquire(c, "sem", 3, 5000, 0, &m), HILOCK_EINVAL);
    cr_assert_str_eq(hilock_client_errmsg(c), msg);
    cr_assert_null(m);
    cr_assert_eq(hilock_acquire(c, "sem", 5000, 0, &m), HILOCK_EINVAL);
    cr_assert_str_eq(hilock_client_errmsg(c), msg);
    cr_assert_eq(hilock_rw_acquire(c, "sem", HILOCK_SHARED, 5000, 0, &m), HILOCK_EINVAL);
    cr_assert_str_eq(hilock_client_errmsg(c), msg);
    cr_assert_eq(hlt_zcard(R, "sem"), 2, "one permit, and the marker");
    release_free(l);
    m = must_sem(c, "sem", 3, 20000, 0);   /* released: taken again */
    release_free(m);
    hilock_client_free(c);
}

/* ---- tokens at the edge of Lua's numbers (docs/fencing.md) ---- */

/* A permit (or a shared/exclusive grant: the same script) on a counter at or above 2^53 - 1
 * (2^53 + 1, 2^63 - 1) is refused before anything is written: the permits held stay as they
 * were, and the counter too. */
Test(sem, a_fence_counter_at_or_above_2_53_minus_1_refuses_a_permit_and_writes_nothing)
{
    static const char *const past[] = { "9007199254740991", "9007199254740993", "9223372036854775807" };
    NEEDS_32();
    hilock_client *c1 = hlt_client_retry(R->url, 10), *c2 = hlt_client_retry(R->url, 10);
    hilock *held = must_sem(c1, "sem", 3, 20000, 0);
    for (size_t i = 0; i < sizeof past / sizeof *past; i++) {
        char *v;
        freeReplyObject(hlt_cmd(R, "SET {sem}:fence %s PX 600000", past[i]));
        freeReplyObject(hlt_cmd(R, "SET {rw}:fence %s PX 600000", past[i]));
        hlt_assert_unchanged_by(R, c2, &(hlt_bg){ .key = "sem", .limit = 3, .ttl_ms = 5000 }, HILOCK_EREPLY,
                                "{sem}:fence", 1);
        cr_assert(strstr(hilock_client_errmsg(c2), past[i]), "%s", hilock_client_errmsg(c2));
        hlt_assert_unchanged_by(R, c2, &(hlt_bg){ .key = "rw", .mode = HILOCK_SHARED, .ttl_ms = 5000 },
                                HILOCK_EREPLY, "{rw}:fence", 1);
        cr_assert(strstr(hilock_client_errmsg(c2), past[i]), "%s", hilock_client_errmsg(c2));
        cr_assert_eq(hlt_zcard(R, "sem"), 2, "the marker and the one permit held");
        v = hlt_get(R, "{sem}:fence");
        cr_assert_str_eq(v, past[i]);
        free(v);
        cr_assert(hlt_pttl(R, "{sem}:fence") > 0 && hlt_pttl(R, "{sem}:fence") <= 600000);
    }
    release_free(held);
    hilock_client_free(c1);
    hilock_client_free(c2);
}

/* Just below, permits' tokens are exact up to 2^53 - 1, the counter holding their digits. */
Test(sem, fence_tokens_of_permits_up_to_2_53_minus_1_are_exact)
{
    NEEDS_32();
    hilock_client *c[3] = { hlt_client_retry(R->url, 10), hlt_client_retry(R->url, 10), hlt_client_retry(R->url, 10) };
    hilock *l[2];
    char want[24], *v;
    freeReplyObject(hlt_cmd(R, "SET {sem}:fence 9007199254740989 PX 600000"));
    for (int i = 0; i < 2; i++) {
        unsigned long long f = 9007199254740990ULL + (unsigned long long)i;
        l[i] = must_sem(c[i], "sem", 3, 20000, 0);
        cr_assert_eq(hilock_fence(l[i]), f, "fence %llu, want %llu", (unsigned long long)hilock_fence(l[i]), f);
        snprintf(want, sizeof want, "%llu", f);
        v = hlt_get(R, "{sem}:fence");
        cr_assert_str_eq(v, want);
        free(v);
    }
    /* the counter holds the last exact token: the third permit is refused, not 2^53 */
    hlt_assert_unchanged_by(R, c[2], &(hlt_bg){ .key = "sem", .limit = 3, .ttl_ms = 5000 }, HILOCK_EREPLY,
                            "9007199254740991", 1);
    release_free(l[0]);
    release_free(l[1]);
    for (int i = 0; i < 3; i++) hilock_client_free(c[i]);
}

/* Blocking and on the loop (tests/scenario.h): a server before 3.2 cannot run the
 * semaphore's script: EINVAL naming the server's version (on the loop the call is accepted --
 * the version is known once connected -- and ends so in done), the same words both ways;
 * nothing written. */
HLT_SCENARIO(sem, is_einval_on_a_server_older_than_3_2)
{
    const char *url = R->url;
    hilock_options o = hlt_options(&url, 1);
    hilock *l = (hilock *)&l;
    hlt_run *r;
    char want[160];
    if (hlt_server_version() >= 30200 || hlt_server_version() == 0)
        cr_skip_test("n/a on %s: it runs the semaphore", hlt_server_name());
    snprintf(want, sizeof want, "semaphores and shared/exclusive locks need Redis >= 3.2: 127.0.0.1:%d runs %s",
             R->port, hlt_server_name());
    o.retry_delay_ms = 10;
    r = hlt_run_new(&o, mode);
    assert_einval_empty_msg(hlt_run_sem_acquire(r, "sem", 3, 5000, 0, &l), &l, hlt_run_errmsg(r));
    cr_assert_str_eq(hlt_run_errmsg(r), want);
    cr_assert_eq(hlt_dbsize(R), 0);
    hlt_run_free(r);
}
