/* SPDX-License-Identifier: BSD-3-Clause */
/* test_keepalive.c -- background renewal: keeps short locks held, reports a lost lock once,
 * stops at its caps, and never outlives release or free (run many times: the race tests are
 * meant for ASan and TSan builds too). Real redis-servers; timing asserts are generous. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients.h"
#include "fixture.h"
#include "hilock.h"
#include "hilock_legacy.h"
#include "hilock_observe.h"
#include "scenario.h"
#include "sentinel_fixture.h"

/* ---- helpers ---- */

/* Times in these tests are scaled up under valgrind (run-tests.sh sets VALGRIND=1), which
 * runs the renewal thread some 20 times slower than the 100 ms ttl margins here allow. */
static int64_t ms(int64_t x)
{
    static int scale;
    if (!scale) scale = getenv("VALGRIND") && *getenv("VALGRIND") == '1' ? 6 : 1;
    return x * scale;
}

/* Fewer rounds of the race loops under valgrind, as each is slower. */
static int rounds(int n) { return ms(1) > 1 ? n / 5 : n; }

/* What on_lost saw. */
typedef struct lost {
    pthread_mutex_t mu;
    int             calls;
    hilock_status   why;
    int64_t         validity;   /* hilock_validity_ms, from the callback */
    char            msg[256];   /* hilock_keepalive_errmsg, from the callback */
    hilock         *l;          /* the lock it was called for */
} lost;

static void lost_init(lost *x)
{
    memset(x, 0, sizeof *x);
    pthread_mutex_init(&x->mu, NULL);
}

static void on_lost(hilock *l, hilock_status why, void *arg)
{
    lost *x = arg;
    pthread_mutex_lock(&x->mu);
    x->calls++;
    x->why = why;
    x->validity = hilock_validity_ms(l);
    x->l = l;
    snprintf(x->msg, sizeof x->msg, "%s", hilock_keepalive_errmsg(l));
    pthread_mutex_unlock(&x->mu);
}

static int lost_calls(lost *x)
{
    pthread_mutex_lock(&x->mu);
    int n = x->calls;
    pthread_mutex_unlock(&x->mu);
    return n;
}

static int lost_called(void *x) { return lost_calls(x) > 0; }

/* The threads of this process. */
static int count_threads(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d))) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

static void await_lost(lost *x, int64_t wait_ms)
{
    long long end = hlt_now_ms() + wait_ms;
    while (lost_calls(x) == 0 && hlt_now_ms() < end) hlt_sleep_ms(5);
}

/* Renewals that succeeded, counted by an observer on the owner's client (a keepalive's own
 * client takes the observer it has when the keepalive starts): the tests wait for renewals
 * to have happened instead of sleeping a fixed time, which a loaded machine may not honour. */
static void count_renewals(const hilock_event *e, void *arg)
{
    if (e->kind == HILOCK_EVENT_RENEWAL && e->status == HILOCK_OK)
        __atomic_add_fetch((int *)arg, 1, __ATOMIC_SEQ_CST);
}

static int renewals(int *n) { return __atomic_load_n(n, __ATOMIC_SEQ_CST); }

/* Wait (bounded) until *n reaches want; what it reached. */
static int await_renewals(int *n, int want, int64_t wait_ms)
{
    long long end = hlt_now_ms() + wait_ms;
    while (renewals(n) < want && hlt_now_ms() < end) hlt_sleep_ms(5);
    return renewals(n);
}

/* Connections to the server, the read-back one included; waits (bounded) for it to settle at n
 * (a closed connection is noticed by the server a moment later). */
static long long await_conns(hlt_redis *r, long long n)
{
    long long end = hlt_now_ms() + 3000, v;
    while ((v = hlt_info_int(r, "clients", "connected_clients:")) != n && hlt_now_ms() < end) hlt_sleep_ms(5);
    return v;
}

/* ---- tests ---- */

/* 5 ttls: some 15 renewals, each due with two thirds of the ttl left (a ttl of 300 ms left the
 * renewal thread 200 ms of slack, which a loaded machine can take from it). */
Test(keepalive, keeps_a_1s_lock_held_for_5s)
{
    hlt_redis *r = hlt_redis_start(NULL);
    cr_assert_not_null(r);
    hilock_client *c = hlt_client(r->url);
    hilock *l;
    lost x;
    lost_init(&x);
    cr_assert_eq(hilock_acquire(c, "job", ms(1000), 0, &l), HILOCK_OK);
    long long t0 = hlt_now_ms();
    cr_assert_eq(hilock_keepalive(l, on_lost, &x), HILOCK_OK, "%s", hilock_client_errmsg(c));
    while (hlt_now_ms() - t0 < ms(5000)) {   /* 5 s by the clock, looking every 100 ms */
        hlt_sleep_ms(ms(100));
        char *v = hlt_get(r, "job");
        cr_assert(v && !strcmp(v, hilock_token(l)), "lost at %lld ms", hlt_now_ms() - t0);
        free(v);
        cr_assert_gt(hilock_validity_ms(l), 0);
    }
    cr_assert_eq(hilock_check(l), HILOCK_OK);   /* the owner may still ask */
    long long pttl = hlt_pttl(r, "job");
    cr_assert(pttl > 0 && pttl <= ms(1000), "pttl %lld: renewed with the lock's own ttl", pttl);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    cr_assert_eq(hlt_exists(r, "job"), 0);
    cr_assert_eq(lost_calls(&x), 0);
    cr_assert_eq(await_conns(r, 2), 2, "the keepalive's connection is closed by release");
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* Blocking and on the loop (tests/scenario.h): the lock is kept past 3 x its ttl (on the loop
 * by the loop's timer, no thread started; blocking, by a thread of its own), a second
 * keepalive is refused; then the key, deleted from outside once renewed, is reported once,
 * NOT_HELD, and never re-created. (A ttl of 1 s: the loop's thread, or the renewal thread,
 * renews every 333 ms with 667 ms of slack, which a loaded machine cannot take.) */
HLT_SCENARIO(keepalive, a_key_deleted_from_outside_calls_on_lost_once_with_not_held)
{
    hlt_redis *r = hlt_redis_start(NULL);
    cr_assert_not_null(r);
    hilock_options o = hlt_options((const char *const[]){ r->url }, 1);
    hlt_run *a = hlt_run_new(&o, mode);
    hilock *l;
    lost x;
    int n = 0, threads;
    char *v;
    lost_init(&x);
    hilock_set_observer(hlt_run_client(a), count_renewals, &n);
    cr_assert_eq(hlt_run_acquire(a, "job", ms(1000), 0, &l), HILOCK_OK, "%s", hlt_run_errmsg(a));
    threads = count_threads();
    cr_assert_eq(hlt_run_keepalive(a, l, on_lost, &x, NULL), HILOCK_OK, "%s", hlt_run_errmsg(a));
    cr_assert_eq(count_threads(), threads + !hlt_run_on_loop(a),
                 "a keepalive starts a thread when blocking, none on a loop");
    cr_assert_eq(hlt_run_keepalive(a, l, on_lost, &x, NULL), HILOCK_EINVAL, "already running");
    hlt_run_sleep(a, ms(3000));   /* 3 x ttl */
    cr_assert_eq(lost_calls(&x), 0);
    v = hlt_get(r, "job");
    cr_assert(v && !strcmp(v, hilock_token(l)), "the lock was not kept for 3 x ttl");
    free(v);
    cr_assert_gt(hilock_validity_ms(l), 0);
    /* deleted once it has been renewed (a 300 ms ttl and a fixed 150 ms here let a starved
     * renewal thread see the key expire before the DEL) */
    cr_assert_geq(renewals(&n), 1, "no renewal");
    redisReply *rep = hlt_cmd(r, "DEL job");
    cr_assert(rep && rep->integer == 1);
    freeReplyObject(rep);
    hlt_run_until(a, lost_called, &x, ms(3000));
    hlt_run_sleep(a, ms(400));   /* nothing more comes */
    cr_assert_eq(lost_calls(&x), 1);
    cr_assert_eq(x.why, HILOCK_NOT_HELD);
    cr_assert_eq(x.l, l);
    cr_assert_eq(x.validity, 0, "validity is 0 once the loss is known");
    /* the lock says why, on either runner (the loop's said "" until hl_ka_ended) */
    cr_assert(strstr(x.msg, "job") && strstr(x.msg, "expired or already released"), "msg: %s", x.msg);
    cr_assert_str_eq(hilock_keepalive_errmsg(l), x.msg);
    cr_assert_eq(hilock_validity_ms(l), 0);
    cr_assert_eq(hlt_exists(r, "job"), 0, "a lost key is never re-created");
    cr_assert_eq(hlt_run_release(a, l), HILOCK_NOT_HELD);
    cr_assert_eq(lost_calls(&x), 1);
    hilock_free(l);
    hlt_run_free(a);
    hlt_redis_stop(r);
}

Test(keepalive, a_key_taken_by_another_owner_is_reported_and_left_alone)
{
    hlt_redis *r = hlt_redis_start(NULL);
    cr_assert_not_null(r);
    hilock_client *c = hlt_client(r->url);
    hilock *l;
    lost x;
    lost_init(&x);
    cr_assert_eq(hilock_acquire(c, "job", ms(300), 0, &l), HILOCK_OK);
    cr_assert_eq(hilock_keepalive(l, on_lost, &x), HILOCK_OK);
    redisReply *rep = hlt_cmd(r, "SET job someone-else PX 60000");
    freeReplyObject(rep);
    await_lost(&x, ms(3000));
    cr_assert_eq(lost_calls(&x), 1);
    cr_assert_eq(x.why, HILOCK_NOT_HELD);
    cr_assert(strstr(x.msg, "now held by another owner"), "msg: %s", x.msg);
    char *v = hlt_get(r, "job");
    cr_assert_str_eq(v, "someone-else");
    free(v);
    cr_assert_gt(hlt_pttl(r, "job"), 50000, "their ttl is untouched");
    hilock_free(l);   /* free without release: fine, and stops nothing twice */
    hilock_client_free(c);
    hlt_redis_stop(r);
}

static int job_gone(void *r) { return hlt_exists(r, "job") == 0; }

/* Blocking and on the loop: a cap ends the renewals quietly (no on_lost), and the lock says
 * which cap (hilock_keepalive_errmsg) on either runner. */
HLT_SCENARIO(keepalive, stops_quietly_after_max_renewals)
{
    hlt_redis *r = hlt_redis_start(NULL);
    cr_assert_not_null(r);
    hilock_options o = hlt_options((const char *const[]){ r->url }, 1);
    hlt_run *a = hlt_run_new(&o, mode);
    hilock *l;
    lost x;
    hilock_keepalive_options ko;
    lost_init(&x);
    hilock_keepalive_options_init(&ko);
    cr_assert_eq(ko.max_renewals, 0);
    cr_assert_eq(ko.max_hold_ms, 0);
    ko.max_renewals = 2;
    /* (1 s: a renewal is due every 333 ms, with 667 ms of slack before the key expires; a
     * 300 ms ttl left a loaded machine's renewal thread 200 ms, and a lapse is a loss) */
    cr_assert_eq(hlt_run_acquire(a, "job", ms(1000), 0, &l), HILOCK_OK, "%s", hlt_run_errmsg(a));
    cr_assert_eq(hlt_run_keepalive(a, l, on_lost, &x, &ko), HILOCK_OK, "%s", hlt_run_errmsg(a));
    cr_assert_str_eq(hilock_keepalive_errmsg(l), "", "\"\" while it runs");
    hlt_run_until(a, job_gone, r, ms(6000));   /* (it ends ~1.7 s in) */
    cr_assert_eq(hlt_exists(r, "job"), 0, "renewals went on past the cap");
    cr_assert_eq(lost_calls(&x), 0, "a cap is not a loss");
    cr_assert(strstr(hilock_keepalive_errmsg(l), "stopped after 2 renewals"), "%s",
              hilock_keepalive_errmsg(l));
    cr_assert_eq(hilock_validity_ms(l), 0);
    cr_assert_eq(hlt_run_release(a, l), HILOCK_NOT_HELD);
    hilock_free(l);
    hlt_run_free(a);
    hlt_redis_stop(r);
}

Test(keepalive, max_hold_ms_ends_the_lock_then)
{
    hlt_redis *r = hlt_redis_start(NULL);
    cr_assert_not_null(r);
    hilock_client *c = hlt_client(r->url);
    hilock *l;
    lost x;
    hilock_keepalive_options ko;
    lost_init(&x);
    hilock_keepalive_options_init(&ko);
    /* a ttl of 1 s held 3 s (was 300 ms held 800 ms: 200 ms of slack per renewal, which a
     * loaded machine's renewal thread could miss, and a lapse is a loss) */
    ko.max_hold_ms = ms(3000);
    cr_assert_eq(hilock_acquire(c, "job", ms(1000), 0, &l), HILOCK_OK);
    long long t0 = hlt_now_ms();
    cr_assert_eq(hilock_keepalive_ex(l, on_lost, &x, &ko), HILOCK_OK);
    long long end = t0 + ms(8000);
    while (hlt_exists(r, "job") && hlt_now_ms() < end) hlt_sleep_ms(10);
    long long gone = hlt_now_ms() - t0;
    cr_assert_eq(hlt_exists(r, "job"), 0);
    /* renewed well past its own 1 s, and not kept past 3 s (+ the server's expiry lag and
     * this loop's looking, which a loaded machine may slow) */
    cr_assert(gone >= ms(2000) && gone < ms(4500), "the lock ended after %lld ms", gone);
    cr_assert_eq(lost_calls(&x), 0);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(keepalive, extend_and_check_while_it_runs)
{
    hlt_redis *r = hlt_redis_start(NULL);
    cr_assert_not_null(r);
    hilock_client *c = hlt_client(r->url);
    hilock *l;
    lost x;
    int n = 0, before;
    lost_init(&x);
    hilock_set_observer(c, count_renewals, &n);
    /* (1 s, and waits for renewals: a 300 ms ttl, 200 ms in, could lapse on a loaded machine
     * before the extend; and the renewal after it was awaited by a fixed 1.5 s) */
    cr_assert_eq(hilock_acquire(c, "job", ms(1000), 0, &l), HILOCK_OK);
    cr_assert_eq(hilock_keepalive(l, on_lost, &x), HILOCK_OK);
    cr_assert_geq(await_renewals(&n, 1, ms(5000)), 1, "no renewal");
    /* later renewals use the new ttl */
    cr_assert_eq(hilock_extend(l, ms(3000)), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_check(l), HILOCK_OK);
    before = renewals(&n);
    cr_assert_gt(await_renewals(&n, before + 1, ms(8000)), before, "no renewal after the extend");
    long long pttl = hlt_pttl(r, "job");   /* (the old ttl would leave at most 1 s) */
    cr_assert(pttl > ms(1500) && pttl <= ms(3000), "pttl %lld", pttl);
    cr_assert_gt(hilock_validity_ms(l), ms(1400));
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    cr_assert_eq(lost_calls(&x), 0);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(keepalive, survives_dropped_connections)
{
    hlt_redis *r = hlt_redis_start(NULL);
    cr_assert_not_null(r);
    hilock_client *c = hlt_client(r->url);
    hilock *l;
    lost x;
    int n = 0;
    lost_init(&x);
    hilock_set_observer(c, count_renewals, &n);
    /* (a ttl of 1 s, and each kill waits for a renewal: a 300 ms ttl with a kill every 150 ms
     * left a loaded machine's renewal thread 200 ms to reconnect and renew) */
    cr_assert_eq(hilock_acquire(c, "job", ms(1000), 0, &l), HILOCK_OK);
    cr_assert_eq(hilock_keepalive(l, on_lost, &x), HILOCK_OK);
    for (int i = 0; i < 6; i++) {   /* the server's `timeout`, a proxy, CLIENT KILL ... */
        int want = renewals(&n) + 1;
        cr_assert_geq(await_renewals(&n, want, ms(5000)), want, "no renewal after kill %d", i);
        /* 0 to 250 ms after a renewal (one due every ~330 ms): the next one finds its
         * connection closed after more or less idle time */
        hlt_sleep_ms(ms(50 * i));
        redisReply *rep = hlt_cmd(r, "CLIENT KILL TYPE normal SKIPME yes");
        if (rep) freeReplyObject(rep);
    }
    int want = renewals(&n) + 1;
    cr_assert_geq(await_renewals(&n, want, ms(5000)), want, "no renewal after the last kill");
    cr_assert_eq(lost_calls(&x), 0, "on_lost: %s (%s)", hilock_strerror(x.why), x.msg);
    char *v = hlt_get(r, "job");
    cr_assert(v && !strcmp(v, hilock_token(l)));
    free(v);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(keepalive, a_dead_server_is_reported_when_the_validity_runs_out)
{
    hlt_redis *r = hlt_redis_start(NULL);
    cr_assert_not_null(r);
    hilock_client *c = hlt_client(r->url);
    hilock *l;
    lost x;
    lost_init(&x);
    cr_assert_eq(hilock_acquire(c, "job", ms(400), 0, &l), HILOCK_OK);
    long long t0 = hlt_now_ms();
    cr_assert_eq(hilock_keepalive(l, on_lost, &x), HILOCK_OK);
    hlt_redis_kill(r);
    await_lost(&x, ms(5000));
    cr_assert_eq(lost_calls(&x), 1);
    cr_assert(x.why == HILOCK_EIO || x.why == HILOCK_ETIMEDOUT, "why: %s", hilock_strerror(x.why));
    cr_assert(strstr(x.msg, "127.0.0.1"), "names the server: %s", x.msg);
    cr_assert_lt(hlt_now_ms() - t0, ms(3000));
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* lost_margin_ms: failing renewals are retried only while more than the margin is left, so
 * the owner hears of the loss while it can still stop its work before the key expires.
 * Blocking and on the loop (tests/scenario.h). */
HLT_SCENARIO(keepalive, lost_margin_ms_reports_the_loss_that_long_before_the_validity_ends)
{
    hlt_redis *r = hlt_redis_start(NULL);
    cr_assert_not_null(r);
    hilock_options o = hlt_options((const char *const[]){ r->url }, 1);
    hlt_run *a = hlt_run_new(&o, mode);
    hilock_keepalive_options ko;
    hilock *l;
    lost x;
    lost_init(&x);
    /* (6 s and a margin of 3 s: each retry's thread -- or the loop's -- may be held up on a
     * loaded machine, and the loss is then reported later, with less left; the check below
     * allows 1 s of that, still far from both the first failure, 4 s before the end, and the
     * end) */
    cr_assert_eq(hlt_run_acquire(a, "job", ms(6000), 0, &l), HILOCK_OK, "%s", hlt_run_errmsg(a));
    hilock_keepalive_options_init(&ko);
    cr_assert_eq(ko.lost_margin_ms, 0, "the default keeps retrying to the end");
    ko.lost_margin_ms = ms(3000);
    cr_assert_eq(hlt_run_keepalive(a, l, on_lost, &x, &ko), HILOCK_OK, "%s", hlt_run_errmsg(a));
    hlt_redis_kill(r);   /* the renewal due with 4 s left fails, and each retry */
    hlt_run_until(a, lost_called, &x, ms(10000));
    cr_assert_eq(lost_calls(&x), 1);
    cr_assert(x.why == HILOCK_EIO || x.why == HILOCK_ETIMEDOUT, "why: %s", hilock_strerror(x.why));
    fprintf(stderr, "test_keepalive (%s): on_lost with %lld ms of validity left (margin %lld)\n",
            hlt_run_mode_name(a), (long long)x.validity, (long long)ko.lost_margin_ms);
    cr_assert(x.validity > ms(3000) - 1000 && x.validity <= ms(3000) + 50,
              "on_lost came with %lld ms left, not about the 3000 ms margin", (long long)x.validity);
    hilock_free(l);
    hlt_run_free(a);
    hlt_redis_stop(r);
}

Test(keepalive, bad_input_is_refused_and_changes_nothing)
{
    hlt_redis *r = hlt_redis_start(NULL);
    cr_assert_not_null(r);
    hilock_client *c = hlt_client(r->url);
    hilock *l, *g;
    hilock_keepalive_options ko;
    cr_assert_eq(hilock_keepalive(NULL, NULL, NULL), HILOCK_EINVAL);
    cr_assert_eq(hilock_keepalive_ex(NULL, NULL, NULL, NULL), HILOCK_EINVAL);
    hilock_keepalive_options_init(NULL);
    cr_assert_str_eq(hilock_keepalive_errmsg(NULL), "");
    cr_assert_eq(hilock_acquire(c, "job", 60000, 0, &l), HILOCK_OK);
    cr_assert_str_eq(hilock_keepalive_errmsg(l), "");
    hilock_keepalive_options_init(&ko);
    ko.max_renewals = -1;
    cr_assert_eq(hilock_keepalive_ex(l, NULL, NULL, &ko), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(c), "max_renewals"));
    hilock_keepalive_options_init(&ko);
    ko.max_hold_ms = -5;
    cr_assert_eq(hilock_keepalive_ex(l, NULL, NULL, &ko), HILOCK_EINVAL);
    hilock_keepalive_options_init(&ko);
    ko.lost_margin_ms = -1;
    cr_assert_eq(hilock_keepalive_ex(l, NULL, NULL, &ko), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(c), "lost_margin_ms"));
    cr_assert_eq(await_conns(r, 2), 2, "no thread, no connection was made");
    cr_assert_eq(hilock_keepalive(l, NULL, NULL), HILOCK_OK);
    cr_assert_eq(hilock_keepalive(l, NULL, NULL), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(c), "already running"));
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    cr_assert_eq(hilock_keepalive(l, NULL, NULL), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(c), "released"));
    hilock_free(l);
    /* legacy locks: not renewed by a keepalive (yet) */
    cr_assert_eq(hilock_legacy_acquire(c, "old", 60000, 0, &g), HILOCK_OK, "%s", hilock_client_errmsg(c));
    char *before = hlt_get(r, "old");
    cr_assert_eq(hilock_keepalive(g, NULL, NULL), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(c), "a legacy or bridge lock has none"));
    char *after = hlt_get(r, "old");
    cr_assert_str_eq(before, after);
    free(before);
    free(after);
    cr_assert_eq(hilock_release(g), HILOCK_OK);
    hilock_free(g);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(keepalive, free_without_release_stops_the_renewals)
{
    hlt_redis *r = hlt_redis_start(NULL);
    cr_assert_not_null(r);
    hilock_client *c = hlt_client(r->url);
    hilock *l;
    int n = 0;
    hilock_set_observer(c, count_renewals, &n);
    /* renewed twice, then freed (a 300 ms ttl looked at after a fixed 400 ms could have
     * lapsed on a loaded machine before the look) */
    cr_assert_eq(hilock_acquire(c, "job", ms(1000), 0, &l), HILOCK_OK);
    cr_assert_eq(hilock_keepalive(l, NULL, NULL), HILOCK_OK);
    cr_assert_geq(await_renewals(&n, 2, ms(5000)), 2, "not renewed twice");
    cr_assert_eq(hlt_exists(r, "job"), 1);
    hilock_free(l);
    cr_assert_eq(await_conns(r, 2), 2, "the keepalive's connection is closed by free");
    long long end = hlt_now_ms() + ms(4000);   /* (its ttl is 1 s) */
    while (hlt_exists(r, "job") && hlt_now_ms() < end) hlt_sleep_ms(10);
    cr_assert_eq(hlt_exists(r, "job"), 0, "expires by its ttl: nothing renews it");
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(keepalive, renews_on_a_redlock_quorum)
{
    hlt_redis *m[3];
    const char *urls[3];
    for (int i = 0; i < 3; i++) {
        cr_assert_not_null(m[i] = hlt_redis_start(NULL));
        urls[i] = i % 2 ? m[i]->unix_url : m[i]->url;
    }
    hilock_options o = hlt_options(urls, 3);
    hilock_client *c = hlt_client_new(&o);
    hilock *l;
    lost x;
    int n = 0, want;
    lost_init(&x);
    hilock_set_observer(c, count_renewals, &n);
    /* 3 s: each master gets 5% of the ttl per round trip (lock.c), 150 ms even under valgrind
     * or on a loaded machine (1 s gave 50 ms, and 667 ms of retries before a lapse) */
    cr_assert_eq(hilock_acquire(c, "job", ms(3000), 3000, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_keepalive(l, on_lost, &x), HILOCK_OK);
    cr_assert_geq(await_renewals(&n, 1, ms(8000)), 1, "no renewal on three masters");
    hlt_redis_kill(m[2]);   /* a minority going away does not lose it */
    want = renewals(&n) + 3;   /* a whole ttl of renewals on two masters */
    cr_assert_geq(await_renewals(&n, want, ms(15000)), want, "renewals stopped with a master gone");
    for (int i = 0; i < 2; i++) {
        char *v = hlt_get(m[i], "job");
        cr_assert(v && !strcmp(v, hilock_token(l)), "master %d lost it", i);
        free(v);
    }
    cr_assert_eq(lost_calls(&x), 0);
    cr_assert_gt(hilock_validity_ms(l), 0);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    hilock_client_free(c);
    for (int i = 0; i < 3; i++) hlt_redis_stop(m[i]);
}

/* ---- release against renewals: run many times, under ASan and TSan ---- */

Test(keepalive, release_at_any_moment_is_safe)
{
    hlt_redis *r = hlt_redis_start(NULL);
    cr_assert_not_null(r);
    hilock_client *c = hlt_client(r->unix_url);
    unsigned seed = (unsigned)hlt_now_ms();
    for (int i = 0; i < rounds(150); i++) {
        hilock *l;
        hilock_status st;
        /* renewed every ~20 ms; the wait lets a slow (valgrind) first round trip retry */
        cr_assert_eq(hilock_acquire(c, "job", ms(60), 3000, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
        cr_assert_eq(hilock_keepalive(l, NULL, NULL), HILOCK_OK);
        hlt_sleep_ms((long)ms(rand_r(&seed) % 45));
        st = i % 2 ? hilock_release(l) : HILOCK_OK;
        /* OK; NOT_HELD only if this busy machine let it expire between two renewals */
        cr_assert(st == HILOCK_OK || st == HILOCK_NOT_HELD, "%d: %s", i, hilock_strerror(st));
        hilock_free(l);   /* odd rounds: free alone, with the keepalive running */
        if (st == HILOCK_OK && i % 2) cr_assert_eq(hlt_exists(r, "job"), 0);
        redisReply *rep = hlt_cmd(r, "DEL job");   /* the even rounds' key */
        if (rep) freeReplyObject(rep);
    }
    cr_assert_eq(await_conns(r, 2), 2, "every keepalive connection is closed");
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* The server freezes while a renewal is on the wire: release must wait for it, then release. */
typedef struct thaw_arg { hlt_redis *r; long after_ms; } thaw_arg;

static void *thaw_later(void *arg)
{
    thaw_arg *t = arg;
    hlt_sleep_ms(t->after_ms);
    hlt_redis_thaw(t->r);
    return NULL;
}

Test(keepalive, release_while_a_renewal_is_in_flight_is_safe)
{
    hlt_redis *r = hlt_redis_start(NULL);
    cr_assert_not_null(r);
    hilock_client *c = hlt_client(r->url);
    for (int i = 0; i < rounds(20); i++) {
        hilock *l;
        pthread_t th;
        /* The ttl leaves ~950 ms after the thaw: a loaded CI machine (the server
         * matrix runs two suites at once) once let a 150 ms ttl expire here, and a 600 ms one
         * (~350 ms after the thaw) expired when this process was held up ~400 ms around the
         * thaw. The times around the renewal are as they were with 600 ms. */
        thaw_arg ta = { r, (long)ms(100) };
        cr_assert_eq(hilock_acquire(c, "job", ms(1500), 3000, &l), HILOCK_OK);   /* renewal due at ~483 ms */
        cr_assert_eq(hilock_keepalive(l, NULL, NULL), HILOCK_OK);
        hlt_sleep_ms(ms(441));
        hlt_redis_freeze(r);          /* the renewal at ~483 ms gets no answer until ~541 ms */
        pthread_create(&th, NULL, thaw_later, &ta);
        hlt_sleep_ms((long)ms(65 + i % 10));    /* release lands while it is on the wire */
        hilock_status st = hilock_release(l);
        pthread_join(th, NULL);
        cr_assert_eq(st, HILOCK_OK, "%d: %s: %s", i, hilock_strerror(st), hilock_client_errmsg(c));
        cr_assert_eq(hlt_exists(r, "job"), 0);
        hilock_free(l);
    }
    cr_assert_eq(await_conns(r, 2), 2);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* ---- Sentinel ---- */

static hlt_sentinel *SF;

static void sentinel_fini(void)
{
    hlt_sentinel_stop(SF);
    SF = NULL;
}

Test(keepalive, renews_through_sentinel_and_a_failover_ends_in_ok_or_lost, .fini = sentinel_fini,
     .timeout = 90)
{
    HLT_NEEDS(40000, "Sentinel needs replication ids (PSYNC2, Redis 4.0+)");
    SF = hlt_sentinel_start();
    cr_assert_not_null(SF, "sentinel fixture did not start");
    hilock_client *c = hlt_client(SF->url);
    hilock *l;
    lost x;
    lost_init(&x);
    cr_assert_eq(hilock_acquire(c, "job", ms(3000), 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_keepalive(l, on_lost, &x), HILOCK_OK);
    hlt_sleep_ms(ms(1500));
    int m0 = hlt_sentinel_master(SF);
    char *v = hlt_data_get(SF, m0, "job");
    cr_assert(v && !strcmp(v, hilock_token(l)));
    free(v);
    cr_assert_eq(lost_calls(&x), 0);

    /* A clean failover. A renewal that lands on the old master after the replica was promoted
     * (it answers as master for a while) is not on the new one: the renewals can no longer
     * prove the lock, and on_lost says LOST. One that did not keeps it: both are right,
     * nothing else is (never NOT_HELD, never an error, never twice). */
    cr_assert_eq(hlt_sentinel_failover(SF, 0), 0, "failover did not complete");
    hlt_sleep_ms(ms(4000));
    cr_assert_eq(hlt_sentinel_master(SF), 1 - m0);
    if (lost_calls(&x) == 0) {
        cr_log_info("keepalive across a failover: kept (renewed on the new master)");
        v = hlt_data_get(SF, 1 - m0, "job");
        cr_assert(v && !strcmp(v, hilock_token(l)), "the new master does not hold it");
        free(v);
        cr_assert_gt(hilock_validity_ms(l), 0);
        cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
        cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    } else {
        cr_log_info("keepalive across a failover: LOST (%s)", x.msg);
        cr_assert_eq(lost_calls(&x), 1);
        cr_assert_eq(x.why, HILOCK_LOST, "%s: %s", hilock_strerror(x.why), x.msg);
        cr_assert(strstr(x.msg, "job"), "%s", x.msg);
        cr_assert_eq(hilock_check(l), HILOCK_LOST, "%s", hilock_client_errmsg(c));
        hilock_release(l);
    }
    hilock_free(l);
    hilock_client_free(c);
}
