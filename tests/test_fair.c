/* SPDX-License-Identifier: BSD-3-Clause */
/* test_fair.c -- options.fair (src/kinds/fair.c, docs/fairness.md): first come, first served; a
 * dead, frozen or departed waiter leaves the queue within the bound; try-lock does not pass
 * the queue; fair and non-fair clients never overlap; nothing is left behind; unsupported
 * configurations are refused. Waiters are processes, each with its own client, queued one
 * after another (the next starts once the queue holds the previous one), so the order of
 * arrival is known. Real redis-servers; timing asserts are generous upper bounds only. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checks.h"
#include "clients.h"
#include "fixture.h"
#include "hilock.h"
#include "hilock_legacy.h"
#include "holders.h"   /* hlt_db_snapshot, hlt_server_ms */
#include "sentinel_fixture.h"
#include "kinds.h"   /* hl_kind_fair.give_up: the state an out-of-memory re-token leaves */

#define IO_MS 200
#define RETRY_MS 50
/* docs/fairness.md: a silent waiter's entry lapses after 2 io + the longest pause (a waiter
 * behind the head pauses through a watch's lease and a poll, 4 x poll_ms, which these waiters
 * set to RETRY_MS as well: the bounds of these tests stay short) */
#define BOUND_MS (2 * IO_MS + 4 * RETRY_MS + 1)
#define MAXW 16
#define WAITER_TTL_MS 3000   /* short: behind Sentinel it is also the failover guard's length */

/* Shared with the waiter processes (MAP_SHARED). */
typedef struct board {
    int       next;            /* grants so far */
    int       seq[MAXW];       /* waiter i was the seq[i]-th grant (1-based); 0 = none */
    long long t_grant[MAXW];   /* hlt_now_ms() of its grant (CLOCK_MONOTONIC: one clock) */
    int       overlaps;        /* mixed test: grants that found another holder inside */
} board;

static board *board_new(void)
{
    board *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(b, MAP_FAILED);
    memset(b, 0, sizeof *b);
    return b;
}

/* The suite's one client maker: hlt_options's on url with the suite's short io timeout (a
 * silent waiter's entry lapses within BOUND_MS) and retry delay, fair and wake as given. The
 * waiter processes make theirs with hilock_client_new: a child says what failed by its exit
 * code, not by an assert. */
static hilock_client *client_opts(const char *url, int fair, int wake)
{
    hilock_options o = hlt_options(&url, 1);
    o.io_timeout_ms = IO_MS;
    o.retry_delay_ms = RETRY_MS;
    o.poll_ms = RETRY_MS;
    o.fair = fair;
    o.wake = wake;
    return hlt_client_new(&o);
}

/* A waiter process: its own client, acquire (waiting), record the grant, hold, release.
 * Exits 0 after a grant and release, 10 + status otherwise. Dies with the test. */
static pid_t spawn_waiter(const char *url, int fair, int wake, const char *key, int idx, int hold_ms,
                          board *b)
{
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        hilock_options o = hlt_options(&url, 1);
        hilock_client *c;
        hilock *l;
        hilock_status st;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        alarm(60);
        o.io_timeout_ms = IO_MS;
        o.retry_delay_ms = RETRY_MS;
        o.poll_ms = RETRY_MS;
        o.fair = fair;
        o.wake = wake;
        if (hilock_client_new(&o, &c) != HILOCK_OK) _exit(9);
        if ((st = hilock_acquire(c, key, WAITER_TTL_MS, 20000, &l)) != HILOCK_OK) _exit(10 + (int)st);
        b->seq[idx] = __sync_add_and_fetch(&b->next, 1);
        b->t_grant[idx] = hlt_now_ms();
        hlt_sleep_ms(hold_ms);
        st = hilock_release(l);
        hilock_free(l);
        hilock_client_free(c);
        _exit(st == HILOCK_OK ? 0 : 10 + (int)st);
    }
    return pid;
}

static long long llen(hlt_redis *r, const char *key)
{
    redisReply *rep = hlt_cmd(r, "LLEN %s", key);
    long long n = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
    if (rep) freeReplyObject(rep);
    return n;
}

/* Wait (bounded) until the queue of `key` ("{key}:fq") holds n waiters. */
static void await_queue(hlt_redis *r, const char *qkey, long long n)
{
    long long end = hlt_now_ms() + 5000;
    while (llen(r, qkey) != n && hlt_now_ms() < end) hlt_sleep_ms(2);
    cr_assert_eq(llen(r, qkey), n, "queue %s: %lld waiters, expected %lld", qkey, llen(r, qkey), n);
}

static long long nkeys(hlt_redis *r, const char *pattern)
{
    redisReply *rep = hlt_cmd(r, "KEYS %s", pattern);
    long long n = rep && rep->type == REDIS_REPLY_ARRAY ? (long long)rep->elements : -1;
    if (rep) freeReplyObject(rep);
    return n;
}

/* Every key but the fencing counter (kept ttl + 1 h by design, with a TTL) is gone within the
 * bound once every client is gone. (KEYS, not DBSIZE: DBSIZE counts unreaped expired keys.) */
static void assert_nothing_left(hlt_redis *r, const char *fence_key)
{
    long long end = hlt_now_ms() + 2 * BOUND_MS + 2000;
    while (nkeys(r, "*") > 1 && hlt_now_ms() < end) hlt_sleep_ms(20);
    cr_assert_eq(nkeys(r, "*"), 1, "%lld keys left, expected the fencing counter alone", nkeys(r, "*"));
    cr_assert_eq(hlt_exists(r, fence_key), 1);
    cr_assert_gt(hlt_pttl(r, fence_key), 0, "the fencing counter has no expiry");
}

static void reap_ok(pid_t pid)
{
    int st = hlt_reap(pid, 30000);
    cr_assert_eq(st, 0, "waiter %d exited %d", (int)pid, st);
}

/* ---- order ---- */

static void order_of_grants_is_order_of_arrival(int wake, int n)
{
    hlt_redis *r = hlt_redis_started(NULL);
    board *b = board_new();
    hilock_client *c;
    hilock *h;
    pid_t pid[MAXW];
    c = client_opts(r->url, 1, wake);
    cr_assert_not_null(c);
    cr_assert_eq(hilock_acquire(c, "job", 30000, 0, &h), HILOCK_OK, "%s", hilock_client_errmsg(c));
    for (int i = 0; i < n; i++) {
        pid[i] = spawn_waiter(r->url, 1, wake, "job", i, 5, b);
        await_queue(r, "{job}:fq", i + 1);
    }
    cr_assert_eq(hilock_release(h), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(h);
    /* the releaser asks again at once: it cannot jump the queue, it comes last */
    cr_assert_eq(hilock_acquire(c, "job", 30000, 20000, &h), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(b->next, n, "the releaser got the lock after %d of %d waiters", b->next, n);
    for (int i = 0; i < n; i++) reap_ok(pid[i]);
    for (int i = 0; i < n; i++) cr_assert_eq(b->seq[i], i + 1, "waiter %d was served %d-th", i, b->seq[i]);
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    hilock_free(h);
    hilock_client_free(c);
    assert_nothing_left(r, "{job}:fence");
    hlt_redis_stop(r);
}

Test(fair, grants_follow_the_order_of_arrival_of_ten_waiters, .timeout = 90)
{
    order_of_grants_is_order_of_arrival(1, 10);
}

Test(fair, grants_follow_the_order_of_arrival_when_polling, .timeout = 90)
{
    order_of_grants_is_order_of_arrival(0, 4);
}

/* ---- dead and frozen waiters ---- */

Test(fair, killed_and_frozen_waiters_cost_the_rest_at_most_the_bound_each, .timeout = 90)
{
    hlt_redis *r = hlt_redis_started(NULL);
    board *b = board_new();
    hilock_client *c;
    hilock *h;
    pid_t pid[5];
    long long t_rel, took;
    c = client_opts(r->url, 1, 1);
    cr_assert_eq(hilock_acquire(c, "job", 30000, 0, &h), HILOCK_OK);
    for (int i = 0; i < 5; i++) {   /* A, K (killed), B, S (frozen), C */
        pid[i] = spawn_waiter(r->url, 1, 1, "job", i, 5, b);
        await_queue(r, "{job}:fq", i + 1);
    }
    kill(pid[1], SIGKILL);
    kill(pid[3], SIGSTOP);
    t_rel = hlt_now_ms();
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    hilock_free(h);
    reap_ok(pid[0]);
    reap_ok(pid[2]);
    reap_ok(pid[4]);
    cr_assert(b->seq[0] == 1 && b->seq[2] == 2 && b->seq[4] == 3, "served %d %d %d", b->seq[0],
              b->seq[2], b->seq[4]);
    took = b->t_grant[4] - t_rel;
    cr_log_info("release -> the last live waiter, past one dead and one frozen: %lld ms "
                "(bound per silent waiter: %d ms)", took, BOUND_MS);
    /* each silent waiter costs at most the bound (plus a poll and round trips): far from the
     * holder's 30 s ttl, and from 5 s per dead waiter */
    cr_assert_lt(took, 2 * BOUND_MS + 1500, "took %lld ms", took);
    kill(pid[3], SIGKILL);
    cr_assert_eq(hlt_reap(pid[1], 5000), 128 + SIGKILL);
    cr_assert_eq(hlt_reap(pid[3], 5000), 128 + SIGKILL);
    hilock_client_free(c);
    assert_nothing_left(r, "{job}:fence");
    hlt_redis_stop(r);
}

Test(fair, waiter_whose_wait_runs_out_leaves_the_queue_at_once)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *hc, *wc;
    hilock *h, *l = NULL;
    hc = client_opts(r->url, 1, 1);
    wc = client_opts(r->url, 1, 1);
    cr_assert_eq(hilock_acquire(hc, "job", 30000, 0, &h), HILOCK_OK);
    cr_assert_eq(hilock_acquire(wc, "job", 30000, 300, &l), HILOCK_BUSY);
    cr_assert_null(l);
    cr_assert(strstr(hilock_client_errmsg(wc), "job: held by another owner"), "%s", hilock_client_errmsg(wc));
    cr_assert_eq(nkeys(r, "{job}:f[qbs]*"), 0, "the queue outlived the wait");
    cr_assert_eq(hlt_exists(r, "job"), 1);
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    hilock_free(h);
    hilock_client_free(hc);
    hilock_client_free(wc);
    hlt_redis_stop(r);
}

/* ---- try-lock and non-fair clients ---- */

/* hc holds "job" (*h) and one fair waiter process is queued behind it. */
static pid_t held_with_one_waiter(hlt_redis *r, hilock_client *hc, hilock **h, board *b)
{
    pid_t w;
    cr_assert_eq(hilock_acquire(hc, "job", 30000, 0, h), HILOCK_OK, "%s", hilock_client_errmsg(hc));
    w = spawn_waiter(r->url, 1, 1, "job", 0, 5, b);
    await_queue(r, "{job}:fq", 1);
    return w;
}

/* Freeze the queued waiter w, then release h: the key is free, and its turn the frozen head's. */
static void freeze_head_and_release(hlt_redis *r, pid_t w, hilock *h)
{
    kill(w, SIGSTOP);
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    hilock_free(h);
    cr_assert_eq(hlt_exists(r, "job"), 0);
}

Test(fair, try_lock_says_busy_while_waiters_are_queued, .timeout = 60)
{
    hlt_redis *r = hlt_redis_started(NULL);
    board *b = board_new();
    hilock_client *hc, *tc;
    hilock *h, *l = NULL;
    pid_t w;
    long long end;
    hc = client_opts(r->url, 1, 1);
    tc = client_opts(r->url, 1, 1);
    w = held_with_one_waiter(r, hc, &h, b);
    /* held, and a waiter queued: BUSY, and a try-lock does not join the queue */
    cr_assert_eq(hilock_acquire(tc, "job", 30000, 0, &l), HILOCK_BUSY);
    cr_assert_eq(llen(r, "{job}:fq"), 1);
    /* free, but its turn is the (frozen) head's: still BUSY, nothing written */
    freeze_head_and_release(r, w, h);
    cr_assert_eq(hilock_acquire(tc, "job", 30000, 0, &l), HILOCK_BUSY);
    cr_assert_null(l);
    cr_assert(strstr(hilock_client_errmsg(tc), "1 waiter(s) queued first"), "%s", hilock_client_errmsg(tc));
    cr_assert_eq(hlt_exists(r, "job"), 0);
    cr_assert_eq(llen(r, "{job}:fq"), 1);
    /* once the frozen head's entry lapses (the bound), the try-lock gets it */
    end = hlt_now_ms() + 2 * BOUND_MS + 2000;
    while (hilock_acquire(tc, "job", 30000, 0, &l) == HILOCK_BUSY && hlt_now_ms() < end) hlt_sleep_ms(20);
    cr_assert_not_null(l, "still BUSY %d ms after the head froze: %s", 2 * BOUND_MS + 2000,
                       hilock_client_errmsg(tc));
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    kill(w, SIGKILL);
    cr_assert_eq(hlt_reap(w, 5000), 128 + SIGKILL);
    hilock_client_free(hc);
    hilock_client_free(tc);
    assert_nothing_left(r, "{job}:fence");
    hlt_redis_stop(r);
}

Test(fair, non_fair_client_may_pass_the_queue_but_never_overlaps, .timeout = 60)
{
    hlt_redis *r = hlt_redis_started(NULL);
    board *b = board_new();
    hilock_client *hc, *nc;
    hilock *h, *l = NULL;
    pid_t w;
    long long calls;
    hc = client_opts(r->url, 1, 1);
    nc = client_opts(r->url, 0, 1);
    cr_assert_not_null(nc);
    w = held_with_one_waiter(r, hc, &h, b);
    cr_assert_eq(hilock_acquire(nc, "job", 30000, 0, &l), HILOCK_BUSY);   /* a fair holder */
    freeze_head_and_release(r, w, h);
    /* the queue's head is frozen: a non-fair try-lock passes it (documented) */
    cr_assert_eq(hilock_acquire(nc, "job", 30000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(nc));
    cr_assert_eq(hilock_acquire(hc, "job", 30000, 0, &h), HILOCK_BUSY);
    calls = hlt_script_calls(r);
    kill(w, SIGCONT);   /* the waiter, still the head, gets it only after the non-fair holder */
    /* thawed, it takes the release's wake-up and tries again (fair.lua) while l is held */
    HLT_AWAIT(hlt_script_calls(r) > calls, 10000, "the thawed waiter never tried again");
    cr_assert_eq(b->next, 0, "a fair waiter got a key a non-fair client holds");
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    reap_ok(w);
    cr_assert_eq(b->next, 1);
    hilock_client_free(hc);
    hilock_client_free(nc);
    hlt_redis_stop(r);
}

/* Mixed fair and non-fair processes hammer one key: a read-modify-write counter under the
 * lock comes out exact, and no grant finds another holder inside. */
static void hammer(const char *url, int port, int fair, int rounds, board *b)
{
    hilock_options o = hlt_options(&url, 1);
    hilock_client *c = NULL;
    redisContext *rc = redisConnect("127.0.0.1", port);
    o.io_timeout_ms = IO_MS;
    o.retry_delay_ms = RETRY_MS;
    o.poll_ms = RETRY_MS;
    o.fair = fair;
    if (hilock_client_new(&o, &c) != HILOCK_OK || !rc || rc->err) _exit(9);
    for (int i = 0; i < rounds; i++) {
        hilock *l;
        redisReply *rep;
        long long v;
        if (hilock_acquire(c, "job", 10000, 30000, &l) != HILOCK_OK) _exit(11);
        rep = redisCommand(rc, "INCR inside");
        if (!rep || rep->integer != 1) __sync_add_and_fetch(&b->overlaps, 1);
        freeReplyObject(rep);
        rep = redisCommand(rc, "GET counter");
        v = rep && rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
        freeReplyObject(rep);
        freeReplyObject(redisCommand(rc, "SET counter %lld", v + 1));
        freeReplyObject(redisCommand(rc, "DECR inside"));
        if (hilock_release(l) != HILOCK_OK) _exit(12);
        hilock_free(l);
    }
    redisFree(rc);
    hilock_client_free(c);
}

Test(fair, counter_is_exact_with_fair_and_non_fair_clients_mixed, .timeout = 120)
{
    hlt_redis *r = hlt_redis_started(NULL);
    board *b = board_new();
    pid_t pid[4];
    char *v;
    for (int i = 0; i < 4; i++) {
        pid[i] = fork();
        cr_assert(pid[i] >= 0);
        if (pid[i] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            alarm(100);
            hammer(r->url, r->port, i % 2, 100, b);
            _exit(0);
        }
    }
    for (int i = 0; i < 4; i++) cr_assert_eq(hlt_reap(pid[i], 110000), 0, "process %d", i);
    v = hlt_get(r, "counter");
    cr_assert_str_eq(v, "400");
    free(v);
    cr_assert_eq(b->overlaps, 0);
    v = hlt_get(r, "inside");
    cr_assert_str_eq(v, "0");
    free(v);
    hlt_redis_stop(r);
}

/* ---- keys ---- */

Test(fair, queue_keys_share_the_slot_of_a_tagged_key_and_expire)
{
    hlt_redis *r = hlt_redis_started(NULL);
    board *b = board_new();
    hilock_client *hc;
    hilock *h;
    pid_t w;
    hc = client_opts(r->url, 1, 1);
    cr_assert_eq(hilock_acquire(hc, "jobs:{tenant}:nightly", 30000, 0, &h), HILOCK_OK);
    w = spawn_waiter(r->url, 1, 1, "jobs:{tenant}:nightly", 0, 5, b);
    await_queue(r, "jobs:{tenant}:nightly:fq", 1);
    cr_assert_eq(hlt_exists(r, "jobs:{tenant}:nightly:fb"), 1);
    cr_assert_gt(hlt_pttl(r, "jobs:{tenant}:nightly:fq"), 0);
    cr_assert_leq(hlt_pttl(r, "jobs:{tenant}:nightly:fq"), BOUND_MS);
    cr_assert_gt(hlt_pttl(r, "jobs:{tenant}:nightly:fb"), 0);
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    hilock_free(h);
    reap_ok(w);
    hilock_client_free(hc);
    assert_nothing_left(r, "jobs:{tenant}:nightly:fence");
    hlt_redis_stop(r);
}

/* A waiter's entry lives 2 x io_timeout_ms + retry_delay_ms, by its own client's options:
 * the queue's keys must last as long as the longest-lived entry, not as the last writer's. */
Test(fair, queue_keys_last_as_long_as_the_longest_lived_entry, .timeout = 60)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *hc, *quick;
    hilock *h, *l = NULL;
    pid_t slow;
    hc = client_opts(r->url, 1, 1);
    cr_assert_eq(hilock_acquire(hc, "job", 30000, 0, &h), HILOCK_OK);
    slow = fork();   /* a waiter whose entry lives 2 x 5000 + 2000 ms; it calls again >= 1 s later */
    cr_assert(slow >= 0);
    if (slow == 0) {
        const char *url = r->url;
        hilock_options o = hlt_options(&url, 1);
        hilock_client *c;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        alarm(60);
        o.io_timeout_ms = 5000;
        o.retry_delay_ms = 2000;
        o.fair = 1;
        if (hilock_client_new(&o, &c) != HILOCK_OK) _exit(9);
        _exit(hilock_acquire(c, "job", 30000, 20000, &l) == HILOCK_OK ? 0 : 1);
    }
    await_queue(r, "{job}:fq", 1);
    quick = client_opts(r->url, 1, 1);   /* its entry lives 2 x 200 + 50 ms; it gives up at once */
    cr_assert_eq(hilock_acquire(quick, "job", 30000, 20, &l), HILOCK_BUSY, "%s", hilock_client_errmsg(quick));
    cr_assert_eq(llen(r, "{job}:fq"), 1, "the quick waiter left, the slow one waits");
    cr_assert_gt(hlt_pttl(r, "{job}:fq"), 5000, "the queue expires with the slow waiter's entry");
    cr_assert_gt(hlt_pttl(r, "{job}:fb"), 5000);
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    hilock_free(h);
    reap_ok(slow);   /* and it is served */
    hilock_client_free(quick);
    hilock_client_free(hc);
    hlt_redis_stop(r);
}

Test(fair, keepalive_renews_a_fair_lock)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *l;
    c = client_opts(r->url, 1, 1);
    cr_assert_eq(hilock_acquire(c, "job", 1000, 0, &l), HILOCK_OK);
    cr_assert_eq(hilock_keepalive(l, NULL, NULL), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_sleep_ms(2500);   /* 2.5 ttls: renewals every third of it (a ttl of 300 ms had
                            * only 200 ms of slack for a starved thread on a loaded machine) */
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_release_gone(r, NULL, l, "job");
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* ---- unsupported configurations: EINVAL, a message, nothing changed ---- */

static hilock_status new_client(const char *const *urls, size_t n, int fair, int bridge, hilock_client **c)
{
    hilock_options o;
    hilock_options_init(&o);
    o.servers = urls;
    o.nservers = n;
    o.fair = fair;
    o.bridge = bridge;
    return hilock_client_new(&o, c);
}

/* A fair client's options on one server (never reached): the test adds what is refused. */
static void fair_options(hilock_options *o, const char *const *url)
{
    hilock_options_init(o);
    o->servers = url;
    o->nservers = 1;
    o->fair = 1;
}

/* hilock_client_new refuses o with EINVAL, makes no client, and its message holds why. */
static void assert_refused(const hilock_options *o, const char *why)
{
    hilock_client *c = (hilock_client *)o;   /* (not NULL: the refusal must clear it) */
    cr_assert_eq(hilock_client_new(o, &c), HILOCK_EINVAL);
    cr_assert_null(c);
    cr_assert(strstr(hilock_last_config_error(), why), "%s", hilock_last_config_error());
}

Test(fair, is_refused_with_several_servers)
{
    const char *urls[] = { "redis://127.0.0.1:1", "redis://127.0.0.1:2", "redis://127.0.0.1:3" };
    hilock_client *c = (hilock_client *)urls;
    cr_assert_eq(new_client(urls, 3, 1, 0, &c), HILOCK_EINVAL);
    cr_assert_null(c);
    cr_assert(strstr(hilock_last_config_error(), "fair is not supported with 3 servers (Redlock)"), "%s",
              hilock_last_config_error());
    cr_assert_eq(new_client(urls, 3, 0, 0, &c), HILOCK_OK);   /* the same without fair */
    hilock_client_free(c);
}

Test(fair, is_refused_with_bridge_and_other_values)
{
    const char *url = "redis://127.0.0.1:1";
    hilock_client *c = NULL;
    cr_assert_eq(new_client(&url, 1, 1, 1, &c), HILOCK_EINVAL);
    cr_assert_null(c);
    cr_assert(strstr(hilock_last_config_error(), "fair is not supported with bridge"), "%s",
              hilock_last_config_error());
    cr_assert_eq(new_client(&url, 1, 2, 0, &c), HILOCK_EINVAL);
    cr_assert(strstr(hilock_last_config_error(), "fair must be 0 or 1"), "%s", hilock_last_config_error());
    cr_assert_eq(new_client(&url, 1, -1, 0, &c), HILOCK_EINVAL);
    cr_assert_null(c);
}

/* A fair grant is the queue's script, which mints the token: fencing = 0 (the plain SET NX PX
 * path) cannot be honoured, so the pair is refused rather than one of them ignored. */
Test(fair, is_refused_with_fencing_0)
{
    const char *url = "redis://127.0.0.1:1";
    hilock_options o;
    fair_options(&o, &url);
    o.fencing = 0;
    assert_refused(&o, "fair = 1 needs fencing = 1");
}

/* A waiter pausing longer than io_timeout_ms could outlive its own queue entry (src/kinds/fair.c):
 * FIFO would silently end, so the combination is refused. */
Test(fair, is_refused_with_retry_delay_longer_than_io_timeout)
{
    const char *url = "redis://127.0.0.1:1";
    hilock_client *c;
    hilock_options o;
    fair_options(&o, &url);
    o.io_timeout_ms = 100;
    o.retry_delay_ms = 101;
    assert_refused(&o, "fair = 1 needs retry_delay_ms <= io_timeout_ms");
    o.retry_delay_ms = 100;   /* equal: served */
    cr_assert_eq(hilock_client_new(&o, &c), HILOCK_OK, "%s", hilock_last_config_error());
    hilock_client_free(c);
    o.fair = 0;               /* and without fair, any pause */
    o.retry_delay_ms = 5000;
    cr_assert_eq(hilock_client_new(&o, &c), HILOCK_OK, "%s", hilock_last_config_error());
    hilock_client_free(c);
}

Test(fair, legacy_acquire_refuses_a_fair_client_and_writes_nothing)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *l = (hilock *)&c;
    c = client_opts(r->url, 1, 1);
    cr_assert_eq(hilock_legacy_acquire(c, "job", 30000, 0, &l), HILOCK_EINVAL);
    cr_assert_null(l);
    cr_assert(strstr(hilock_client_errmsg(c), "a legacy lock cannot be fair: the legacy recipe has no queue"), "%s",
              hilock_client_errmsg(c));
    cr_assert_eq(hlt_dbsize(r), 0);
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

Test(fair, behind_sentinel_the_release_calls_the_head, .fini = sentinel_fini, .timeout = 90)
{
    HLT_NEEDS(40000, "Sentinel needs replication ids (PSYNC2, Redis 4.0+)");
    board *b = board_new();
    hlt_redis *m;
    hilock_client *c;
    hilock *h;
    pid_t w[2];
    SF = hlt_sentinel_start();
    cr_assert_not_null(SF, "sentinel fixture did not start");
    m = SF->data[hlt_sentinel_master(SF)];
    c = client_opts(SF->url, 1, 1);
    cr_assert_eq(hilock_acquire(c, "job", 30000, 0, &h), HILOCK_OK, "%s", hilock_client_errmsg(c));
    for (int i = 0; i < 2; i++) {
        w[i] = spawn_waiter(SF->url, 1, 1, "job", i, 5, b);
        await_queue(m, "{job}:fq", i + 1);
    }
    cr_assert_eq(hilock_release(h), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(h);
    for (int i = 0; i < 2; i++) reap_ok(w[i]);
    cr_assert(b->seq[0] == 1 && b->seq[1] == 2);
    hilock_client_free(c);
}

Test(fair, behind_sentinel_a_failover_is_detected_and_the_waiter_gets_its_turn, .fini = sentinel_fini,
     .timeout = 120)
{
    HLT_NEEDS(40000, "Sentinel needs replication ids (PSYNC2, Redis 4.0+)");
    board *b = board_new();
    hilock_client *c;
    hilock *h;
    pid_t w;
    char *v = NULL;
    long long end;
    SF = hlt_sentinel_start();
    cr_assert_not_null(SF, "sentinel fixture did not start");
    cr_assert_eq(hlt_sentinel_master(SF), 0);
    c = client_opts(SF->url, 1, 1);
    cr_assert_eq(hilock_acquire(c, "job", WAITER_TTL_MS, 0, &h), HILOCK_OK, "%s", hilock_client_errmsg(c));
    w = spawn_waiter(SF->url, 1, 1, "job", 0, 5, b);
    await_queue(SF->data[0], "{job}:fq", 1);
    end = hlt_now_ms() + 3000;   /* the replica has the grant and the queue */
    while (hlt_now_ms() < end && (!(v = hlt_data_get(SF, 1, "job")) || !hlt_data_exists(SF, 1, "{job}:fq"))) {
        free(v);
        v = NULL;
        hlt_sleep_ms(10);
    }
    cr_assert(v && !strcmp(v, hilock_token(h)), "the replica never got the lock");
    free(v);
    cr_assert_eq(hlt_sentinel_failover(SF, 0), 0, "failover did not complete");
    /* the fair kind keeps failover awareness: the new master proves the lock survived */
    cr_assert_eq(hilock_check(h), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(h), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(h);
    /* the waiter follows the master and gets the lock once the new master's guard is over */
    reap_ok(w);
    cr_assert_eq(b->seq[0], 1);
    cr_assert_eq(hlt_data_exists(SF, 1, "job"), 0);
    hilock_client_free(c);
}

/* A retry's new token rebuilds the queue's names (init); out of memory there leaves them NULL,
 * and an earlier attempt may have left queued set (give_up had no time to leave). The final
 * give_up of the acquire then built its "leave" from a NULL name (strlen(NULL): a crash);
 * now it sends nothing (the old entry lapses within the bound). */
Test(fair, give_up_without_queue_names_sends_nothing)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *hc;
    hilock *h;
    char *v;
    hc = client_opts(r->url, 1, 1);
    cr_assert_eq(hilock_acquire(hc, "nameless", 30000, 0, &h), HILOCK_OK, "%s", hilock_client_errmsg(hc));
    free(h->queue_key);
    h->queue_key = NULL;   /* as init leaves it when a name cannot be allocated */
    h->queued = 1;
    hl_kind_fair.give_up(h, hl_deadline_of(1000000, hl_now_us() + 5000000));
    cr_assert_not_null(v = hlt_get(r, "nameless"), "the grant is untouched");
    cr_assert_str_eq(v, hilock_token(h));
    free(v);
    cr_assert_not_null(h->queue_key = hl_aux_key(h->key, ":fq"));   /* (to release it) */
    cr_assert_eq(hilock_release(h), HILOCK_OK, "%s", hilock_client_errmsg(hc));
    hilock_free(h);
    hilock_client_free(hc);
    assert_nothing_left(r, "{nameless}:fence");
    hlt_redis_stop(r);
}

/* ---- tokens at the edge of Lua's numbers (docs/fencing.md) ---- */

/* A fair acquire on a counter at or above 2^53 - 1 (2^53 + 1, 2^63 - 1) is refused before
 * anything is written, on a free key and with a waiter queued ahead (its queue as it was). */
Test(fair, a_fence_counter_at_or_above_2_53_minus_1_refuses_the_grant_and_leaves_the_queue)
{
    static const char *const past[] = { "9007199254740991", "9007199254740993", "9223372036854775807" };
    HLT_NEEDS(30200, "fair locks write after TIME (Redis 3.2+)");
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    c = client_opts(r->url, 1, 1);
    for (size_t i = 0; i < sizeof past / sizeof *past; i++)
        for (int queued = 0; queued < 2; queued++) {
            hilock *l = (hilock *)&l;
            char *before, *after, *v;
            hilock_status st;
            freeReplyObject(hlt_cmd(r, "FLUSHALL"));
            freeReplyObject(hlt_cmd(r, "SET {job}:fence %s PX 600000", past[i]));
            if (queued) {   /* another waiter at the head, its entry live for a minute */
                freeReplyObject(hlt_cmd(r, "RPUSH {job}:fq other"));
                freeReplyObject(hlt_cmd(r, "ZADD {job}:fb %lld other", hlt_server_ms(r) + 60000));
            }
            before = hlt_db_snapshot(r, NULL);
            st = hilock_acquire(c, "job", 5000, 0, &l);
            cr_assert_eq(st, HILOCK_EREPLY, "%s: %s (%s)", past[i], hilock_strerror(st), hilock_client_errmsg(c));
            cr_assert_null(l);
            cr_assert(strstr(hilock_client_errmsg(c), "{job}:fence") && strstr(hilock_client_errmsg(c), past[i]),
                      "%s", hilock_client_errmsg(c));
            after = hlt_db_snapshot(r, NULL);
            cr_assert_str_eq(after, before, "%s: the refusal wrote", past[i]);
            cr_assert_eq(hlt_exists(r, "job"), 0);
            v = hlt_get(r, "{job}:fence");
            cr_assert_str_eq(v, past[i]);
            cr_assert(hlt_pttl(r, "{job}:fence") > 0 && hlt_pttl(r, "{job}:fence") <= 600000);
            free(v);
            free(before);
            free(after);
        }
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* Just below, fair tokens are exact up to 2^53 - 1, and the counter holds their digits. */
Test(fair, fence_tokens_up_to_2_53_minus_1_are_exact)
{
    HLT_NEEDS(30200, "fair locks write after TIME (Redis 3.2+)");
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *l;
    char want[24], *v;
    c = client_opts(r->url, 1, 1);
    freeReplyObject(hlt_cmd(r, "SET {job}:fence 9007199254740989 PX 600000"));
    for (unsigned long long f = 9007199254740990ULL; f <= 9007199254740991ULL; f++) {
        cr_assert_eq(hilock_acquire(c, "job", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
        cr_assert_eq(hilock_fence(l), f, "fence %llu, want %llu", (unsigned long long)hilock_fence(l), f);
        snprintf(want, sizeof want, "%llu", f);
        v = hlt_get(r, "{job}:fence");
        cr_assert_str_eq(v, want);
        free(v);
        cr_assert_eq(hilock_release(l), HILOCK_OK);
        hilock_free(l);
    }
    l = (hilock *)&l;
    cr_assert_eq(hilock_acquire(c, "job", 5000, 0, &l), HILOCK_EREPLY);
    cr_assert_null(l);
    cr_assert_eq(hlt_exists(r, "job"), 0);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* ---- a grant undone after an error reply calls the head, as a release does ---- */

typedef struct timed_waiter {
    const char   *url;
    int           min_replicas;   /* 1 on a server without replicas: WAIT says 0, the grant is undone */
    hilock_status st;
    long long     done_ms;        /* hlt_now_ms() when its acquire returned */
} timed_waiter;

/* A fair waiter on "job" in a thread, its own client: blocks for poll_ms 20 s between
 * attempts, so only a signal can end its wait promptly. */
static void *timed_wait(void *arg)
{
    timed_waiter *w = arg;
    hilock_options o = hlt_options(&w->url, 1);
    hilock_client *c;
    hilock *l = NULL;
    o.fair = 1;
    o.poll_ms = 20000;
    o.min_replicas = w->min_replicas;
    o.replicas_timeout_ms = 50;
    if (hilock_client_new(&o, &c) != HILOCK_OK) {
        w->st = HILOCK_ENOMEM;
        return NULL;
    }
    w->st = hilock_acquire(c, "job", 30000, 25000, &l);
    w->done_ms = hlt_now_ms();
    if (l) hilock_release(l);
    hilock_free(l);
    hilock_client_free(c);
    return NULL;
}

Test(fair, a_grant_undone_for_too_few_replicas_calls_the_next_waiter, .timeout = 60)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = client_opts(r->url, 1, 1);
    hilock *h;
    timed_waiter a = { r->url, 1, HILOCK_OK, 0 }, b = { r->url, 0, HILOCK_OK, 0 };
    pthread_t ta, tb;
    long long released;
    cr_assert_eq(hilock_acquire(c, "job", 30000, 0, &h), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(pthread_create(&ta, NULL, timed_wait, &a), 0);
    await_queue(r, "{job}:fq", 1);
    cr_assert_eq(pthread_create(&tb, NULL, timed_wait, &b), 0);
    await_queue(r, "{job}:fq", 2);
    /* the head (a) is called, granted, and its grant undone: no replica acknowledged */
    released = hlt_now_ms();
    cr_assert_eq(hilock_release(h), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(h);
    pthread_join(tb, NULL);
    pthread_join(ta, NULL);
    cr_assert_eq(a.st, HILOCK_EREPLICAS, "%s", hilock_strerror(a.st));
    cr_assert_eq(b.st, HILOCK_OK, "%s", hilock_strerror(b.st));
    /* woken, not by its 20 s poll (a loaded machine's bound: well under it) */
    cr_assert_lt(b.done_ms - released, 10000, "the next waiter got it %lld ms after the release",
                 b.done_ms - released);
    cr_assert_eq(hlt_exists(r, "job"), 0);
    cr_assert_eq(nkeys(r, "{job}:f[qbs]*"), 0, "the queue's keys are gone");
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* The engine's undo of a grant (undo.lua: a WAIT that refused it, a write whose answer never
 * came, sent first on the next contact) calls the head too: no leave need follow. */
Test(fair, the_engines_undo_of_a_grant_calls_the_head, .timeout = 60)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = client_opts(r->url, 1, 1);
    hilock *h;
    timed_waiter b = { r->url, 0, HILOCK_OK, 0 };
    pthread_t tb;
    long long undone;
    cr_assert_eq(hilock_acquire(c, "job", 30000, 0, &h), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(pthread_create(&tb, NULL, timed_wait, &b), 0);
    await_queue(r, "{job}:fq", 1);
    hlt_sleep_ms(100);   /* (its BLPOP under way: a signal sent before it is taken as well) */
    undone = hlt_now_ms();
    hl_undo_add(c, 0, "job", hilock_token(h), 30000);
    cr_assert_eq(hl_exec(c, 1, NULL, 0, hl_deadline_of(2000000, hl_now_us() + 2000000)), 1u, "the undo's round trip");
    hl_exec_clear(c);
    pthread_join(tb, NULL);
    cr_assert_eq(b.st, HILOCK_OK, "%s", hilock_strerror(b.st));
    cr_assert_lt(b.done_ms - undone, 10000, "the waiter got it %lld ms after the undo (its poll: 20 s)",
                 b.done_ms - undone);
    cr_assert_eq(hilock_check(h), HILOCK_NOT_HELD, "the grant was undone");
    cr_assert_eq(hlt_exists(r, "job"), 0);
    cr_assert_eq(nkeys(r, "{job}:f[qbs]*"), 0, "the queue's keys are gone");
    hilock_free(h);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* undo.lua finds a tagged key's queue by its names (the suffix appended to the key) */
Test(fair, the_engines_undo_calls_the_head_of_a_tagged_keys_queue, .timeout = 60)
{
    hlt_redis *r = hlt_redis_start(NULL);
    redisReply *rep;
    /* a queue whose head waits (its entry and beat), the key held by the value to undo */
    freeReplyObject(hlt_cmd(r, "SET a{t}b v1 PX 30000"));
    freeReplyObject(hlt_cmd(r, "RPUSH a{t}b:fq w1 w2"));
    freeReplyObject(hlt_cmd(r, "ZADD a{t}b:fb 99999999999999 w1 99999999999999 w2"));
    freeReplyObject(hlt_cmd(r, "PEXPIRE a{t}b:fq 30000"));
    rep = hlt_cmd(r, "EVAL %s 1 a{t}b v1", hl_lua_undo.body);
    cr_assert(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 1, "undo.lua: %s",
              rep && rep->str ? rep->str : "?");
    freeReplyObject(rep);
    cr_assert_eq(hlt_exists(r, "a{t}b"), 0);
    cr_assert_eq(llen(r, "a{t}b:fs:w1"), 1, "the head is called");
    cr_assert_gt(hlt_pttl(r, "a{t}b:fs:w1"), 0, "its signal lapses");
    cr_assert_eq(hlt_exists(r, "a{t}b:fs:w2"), 0, "only the head");
    /* another value: nothing deleted, nobody called */
    freeReplyObject(hlt_cmd(r, "DEL a{t}b:fs:w1"));
    freeReplyObject(hlt_cmd(r, "SET a{t}b v2 PX 30000"));
    rep = hlt_cmd(r, "EVAL %s 1 a{t}b v1", hl_lua_undo.body);
    cr_assert(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == -1);
    freeReplyObject(rep);
    cr_assert_eq(hlt_exists(r, "a{t}b:fs:w1"), 0);
    cr_assert_eq(hlt_exists(r, "a{t}b"), 1);
    hlt_redis_stop(r);
}
