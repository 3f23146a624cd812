/* SPDX-License-Identifier: BSD-3-Clause */
/* test_wake.c -- waiting without polling (options.wake, poll_ms; src/lock/wait.c): what a
 * waiter costs the server while a holder holds, and that no release signal is lost for long.
 * Each test counts the calls the server served (INFO commandstats: the acquire script and
 * BLPOP), so a waiter that polled would show, whatever the machine's speed. The timing bounds
 * are "does not hang" bounds, set far below the poll a waiter would otherwise need. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "checks.h"
#include "clients.h"
#include "fixture.h"
#include "holders.h"
#include "hilock.h"

#define SLOW_POLL_MS 20000   /* a poll this slow cannot explain a prompt grant */
/* the sorted-set kinds' and the fair lock's scripts write after reading the server's clock */
#define NEEDS_32() HLT_NEEDS(30200, "the script reads the server's clock before it writes (Redis 3.2+)")

/* Before Redis 6.0 a block is whole seconds (src/lock/wait.c): in the last second before a
 * deadline or the holder's expiry a waiter polls every retry_delay_ms (25-75 ms) instead, so
 * these tests allow that second's polls there. */
static long long last_second_polls(void)
{
    return hlt_server_version() >= 60000 ? 0 : 1000 / 25 + 1;
}

static long long stat_calls(hlt_redis *r, const char *cmd)
{
    char field[64];
    long long n;
    snprintf(field, sizeof field, "cmdstat_%s:calls=", cmd);
    n = hlt_info_int(r, "commandstats", field);
    return n > 0 ? n : 0;
}

/* The calls a waiter makes: acquire attempts (scripts) and blocks (BLPOP). */
static long long waiter_calls(hlt_redis *r)
{
    return hlt_script_calls(r) + stat_calls(r, "blpop");
}

static long long blocked(hlt_redis *r) { return hlt_info_int(r, "clients", "blocked_clients:"); }

static long long llen(hlt_redis *r, const char *key)
{
    redisReply *rep = hlt_cmd(r, "LLEN %s", key);
    long long n = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
    freeReplyObject(rep);
    return n;
}

/* exactly n blocked (the count also goes down here) */
static void await_blocked(hlt_redis *r, long long n)
{
    HLT_AWAIT(blocked(r) == n, 10000, "expected %lld blocked clients, have %lld", n, blocked(r));
}

/* A waiter on a thread of its own (its own client): the thread holds w, which must stay put. */
static void waiter(hlt_bg *w, const char *url, const char *key, int64_t wait_ms, int64_t poll_ms)
{
    memset(w, 0, sizeof *w);
    w->url = url;
    w->key = key;
    w->plain = 1;
    w->ttl_ms = 30000;
    w->wait_ms = wait_ms;
    w->poll_ms = poll_ms;
    hlt_bg_start(w);
}

/* A waiter in a process of its own (so it can be stopped while the server answers it): its
 * acquire's status is its exit code (OK: it held the lock, then released it). */
static pid_t spawn_waiter(const char *url, const char *key, int64_t poll_ms)
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
        o.poll_ms = poll_ms;
        if (hilock_client_new(&o, &c) != HILOCK_OK) _exit(99);
        st = hilock_acquire(c, key, 30000, 30000, &l);
        if (st == HILOCK_OK && hilock_release(l) != HILOCK_OK) st = HILOCK_EIO;
        if (st == HILOCK_OK) hilock_free(l);
        hilock_client_free(c);
        _exit((int)st);
    }
    return pid;
}

/* The waiter's exit code (its acquire's status; 128 + N: killed by signal N). */
static int exit_code(pid_t pid)
{
    int code = hlt_reap(pid, 40000);
    cr_assert_neq(code, -1, "waiter %d did not end", (int)pid);
    return code;
}

/* Delete "job" behind the holder's back (no signal) and wait for w to take it: w holds it
 * then (read back); returns how long after the DEL w's acquire returned (ms). */
static long long foreign_del_taken_by(hlt_redis *r, hlt_bg *w, const char *what)
{
    long long t0 = hlt_now_ms(), took;
    redisReply *rep = hlt_cmd(r, "DEL job");
    cr_assert(rep && rep->integer == 1);
    freeReplyObject(rep);
    cr_assert_eq(hlt_bg_join(w, 20000), HILOCK_OK, "%s", w->err);
    took = w->t_done - t0;
    printf("wake: %s, a foreign DEL seen after %lld ms\n", what, took);
    cr_assert_lt(took, 10000, "%s: took %lld ms (the wait: 20-30 s, the holder's ttl longer)", what, took);
    hlt_holds(r, "job", hilock_token(w->l));
    return took;
}

/* While a holder holds for a minute, ten waiters that wait 3 s each cost the server at most
 * about two calls per waiter per poll_ms (1 s) -- the one that keeps the watch does, the others
 * fewer (below) --, not the 20 a second of a waiter that polls every retry_delay_ms (50 ms). */
Test(wake, an_idle_waiter_costs_the_server_at_most_about_two_calls_a_second)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *hc = hlt_client(r->url);
    hilock *h;
    hlt_bg w[10];
    long long before, calls, t0, secs_x10;
    char *v;
    cr_assert_eq(hilock_acquire(hc, "busy", 60000, 0, &h), HILOCK_OK);
    before = waiter_calls(r);
    t0 = hlt_now_ms();
    for (int i = 0; i < 10; i++) waiter(&w[i], r->url, "busy", 3000, 0);
    for (int i = 0; i < 10; i++) cr_assert_eq(hlt_bg_join(&w[i], 20000), HILOCK_BUSY, "waiter %d", i);
    secs_x10 = (hlt_now_ms() - t0) / 100;
    calls = waiter_calls(r) - before;
    printf("wake: 10 waiters for 3 s behind a holder: %lld calls, %.1f per waiter-second\n", calls,
           (double)calls / (double)secs_x10);
    /* 3 s at 0.75-1 s per block: about 3.4 blocks and 4.4 attempts each; the jitter's worst
     * (0.75 s blocks), a block the server ends on its next tick and the attempt at the deadline
     * make at most 5 and 6 (a waiter polling every 50 ms: 60) */
    cr_assert_leq(calls, 10 * (11 + last_second_polls()), "%lld calls from 10 waiters in 3 s", calls);
    cr_assert_geq(calls, 10 * 2, "%lld calls: the waiters did not wait", calls);
    v = hlt_get(r, "busy");
    cr_assert(v && !strcmp(v, hilock_token(h)), "the holder's key changed");
    free(v);
    for (int i = 0; i < 10; i++) hlt_bg_free(&w[i]);
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    hilock_free(h);
    hilock_client_free(hc);
    hlt_redis_stop(r);
}

/* A key deleted without a signal (an operator's DEL, another library) is seen at the next
 * poll (within poll_ms): one block ends, one attempt takes it. */
Test(wake, a_foreign_delete_is_seen_at_the_next_poll)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *hc = hlt_client(r->url);
    hilock *h;
    hlt_bg w;
    long long before;
    cr_assert_eq(hilock_acquire(hc, "job", 30000, 0, &h), HILOCK_OK);
    waiter(&w, r->url, "job", 20000, 0);
    await_blocked(r, 1);
    before = waiter_calls(r);
    foreign_del_taken_by(r, &w, "one waiter");
    cr_assert_leq(waiter_calls(r) - before, 3, "the block that ran out, then one attempt");
    cr_assert_eq(hilock_release(h), HILOCK_NOT_HELD);
    hlt_bg_free(&w);
    hilock_free(h);
    hilock_client_free(hc);
    hlt_redis_stop(r);
}

/* A holder that never releases (crashed) hands over when its ttl runs out: the waiter's block
 * ends at the holder's PTTL, not at its poll (20 s here). */
Test(wake, a_holder_that_expires_hands_over_at_its_expiry)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *hc = hlt_client(r->url);
    hilock *h;
    hlt_bg w;
    long long before;
    cr_assert_eq(hilock_acquire(hc, "job", 1500, 0, &h), HILOCK_OK);
    before = waiter_calls(r);
    waiter(&w, r->url, "job", 20000, SLOW_POLL_MS);
    cr_assert_eq(hlt_bg_join(&w, 20000), HILOCK_OK, "%s", w.err);
    printf("wake: the holder's expiry handed over after %lld ms, %lld calls\n", w.t_done - w.t_start,
           waiter_calls(r) - before);
    cr_assert_lt(w.t_done - w.t_start, 10000, "took %lld ms (ttl 1.5 s, poll 20 s)", w.t_done - w.t_start);
    cr_assert_leq(waiter_calls(r) - before, 4 + last_second_polls(),
                  "a busy attempt, a block to the expiry, the grant");
    hlt_holds(r, "job", hilock_token(w.l));
    hlt_bg_free(&w);
    hilock_free(h);   /* (never released: its ttl ran out) */
    hilock_client_free(hc);
    hlt_redis_stop(r);
}

/* A woken waiter that meets a barger waits again, and the barger's release wakes it: the
 * waiter is stopped while the server pops the release's signal into its connection, the
 * barger takes the key, and the waiter, let go, finds it held. */
Test(wake, a_woken_waiter_that_loses_to_a_barger_is_woken_by_the_bargers_release)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *hc = hlt_client(r->url), *bc = hlt_client(r->url);
    hilock *h, *b;
    pid_t w;
    long long pops;
    int ws;
    cr_assert_eq(hilock_acquire(hc, "job", 30000, 0, &h), HILOCK_OK);
    w = spawn_waiter(r->url, "job", SLOW_POLL_MS);
    await_blocked(r, 1);
    kill(w, SIGSTOP);
    pops = stat_calls(r, "blpop");
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    await_blocked(r, 0);   /* the signal went to the stopped waiter */
    cr_assert_eq(hilock_acquire(bc, "job", 30000, 0, &b), HILOCK_OK, "the barger");
    kill(w, SIGCONT);
    await_blocked(r, 1);   /* it found the barger and blocks again */
    cr_assert_eq(stat_calls(r, "blpop"), pops + 1);
    cr_assert_eq(hilock_release(b), HILOCK_OK);
    ws = exit_code(w);
    cr_assert_eq(ws, HILOCK_OK, "the waiter ended %d", ws);
    cr_assert_eq(hlt_exists(r, "job"), 0, "the waiter released it");
    hilock_free(h);
    hilock_free(b);
    hilock_client_free(hc);
    hilock_client_free(bc);
    hlt_redis_stop(r);
}

/* A woken waiter that dies takes the signal with it: the next waiter sees the free key at its
 * next poll (within poll_ms), not at the holder's ttl. */
Test(wake, a_woken_waiter_that_dies_costs_the_next_one_at_most_a_poll)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *hc = hlt_client(r->url);
    hilock *h;
    hlt_bg w2;
    pid_t w1;
    long long t0;
    cr_assert_eq(hilock_acquire(hc, "job", 60000, 0, &h), HILOCK_OK);
    w1 = spawn_waiter(r->url, "job", SLOW_POLL_MS);
    await_blocked(r, 1);   /* the first blocked: the release's signal is its */
    waiter(&w2, r->url, "job", 30000, 1000);
    await_blocked(r, 2);
    kill(w1, SIGSTOP);
    t0 = hlt_now_ms();
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    await_blocked(r, 1);
    kill(w1, SIGKILL);
    cr_assert_eq(exit_code(w1), 128 + SIGKILL);
    cr_assert_eq(hlt_bg_join(&w2, 20000), HILOCK_OK, "%s", w2.err);
    printf("wake: the next waiter took it %lld ms after a woken waiter died\n", w2.t_done - t0);
    cr_assert_lt(w2.t_done - t0, 10000, "took %lld ms (poll 1 s, the holder's ttl 60 s)", w2.t_done - t0);
    hlt_holds(r, "job", hilock_token(w2.l));
    hlt_bg_free(&w2);
    hilock_free(h);
    hilock_client_free(hc);
    hlt_redis_stop(r);
}

/* A woken waiter whose attempt then fails (here: its user may no longer touch the fence
 * counter: NOPERM, EAUTH) gives up and passes the signal on: the next waiter, whose poll is 20 s,
 * is woken at once. */
Test(wake, a_woken_waiter_whose_attempt_fails_passes_the_signal_on)
{
    hlt_redis *r;
    hilock_client *hc;
    hilock *h;
    hlt_bg w2;
    pid_t w1;
    char url[300];
    long long t0;
    redisReply *rep;
    int ws;
    HLT_NEEDS(70000, "ACL key patterns checked for a script's keys: Redis 7");
    r = hlt_redis_started(NULL);
    rep = hlt_acl_setuser(r, "w1 on >pw ~* &* +@all");
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    snprintf(url, sizeof url, "redis://w1:pw@127.0.0.1:%d", r->port);
    hc = hlt_client(r->url);
    cr_assert_eq(hilock_acquire(hc, "job", 60000, 0, &h), HILOCK_OK);
    w1 = spawn_waiter(url, "job", SLOW_POLL_MS);
    await_blocked(r, 1);
    waiter(&w2, r->url, "job", 30000, SLOW_POLL_MS);
    await_blocked(r, 2);
    kill(w1, SIGSTOP);
    t0 = hlt_now_ms();
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    await_blocked(r, 1);   /* w1 took the signal */
    /* w1's next attempt (it writes {job}:fence) is refused; its pass (release.lua) is not */
    rep = hlt_acl_setuser(r, "w1 resetkeys ~job ~{job}:signal ~{job}:waiters ~{job}:holder");
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    kill(w1, SIGCONT);
    ws = exit_code(w1);
    cr_assert_eq(ws, HILOCK_EAUTH, "w1 ended %d (%s)", ws, hilock_strerror((hilock_status)ws));
    cr_assert_eq(hlt_bg_join(&w2, 20000), HILOCK_OK, "%s", w2.err);
    printf("wake: a passed-on signal woke the next waiter after %lld ms\n", w2.t_done - t0);
    cr_assert_lt(w2.t_done - t0, 10000, "took %lld ms (its poll: 20 s)", w2.t_done - t0);
    hlt_holds(r, "job", hilock_token(w2.l));
    hlt_bg_free(&w2);
    hilock_free(h);
    hilock_client_free(hc);
    hlt_redis_stop(r);
}

/* The watch (src/lock/wait.c): the waiters mark names the one waiter that polls, "<token>
 * <lease end> <lease>" (lease: 3 x its poll_ms); *watch and *lease_ms get its token (or "")
 * and lease, from a separate connection. (The sorted-set kinds' {key}:watch holds the same,
 * a shared/exclusive token with its "s:" or "x:".) */
static void read_watch(hlt_redis *r, const char *mark, char *watch, size_t cap, long long *lease_ms)
{
    char *v = hlt_get(r, mark);
    unsigned long long till = 0;
    int n = 0;
    size_t hex;
    *watch = 0;
    *lease_ms = 0;
    cr_assert(v, "no waiters mark %s", mark);
    cr_assert(strlen(v) < cap && sscanf(v, "%s %llu %lld%n", watch, &till, lease_ms, &n) == 3, "%s holds \"%s\"", mark, v);
    hex = (watch[0] == 'x' || watch[0] == 's') && watch[1] == ':' ? 2 : 0;
    cr_assert(n == (int)strlen(v) && strspn(watch + hex, "0123456789abcdef") == strlen(watch + hex) && till > 0,
              "%s holds \"%s\": not a watch", mark, v);
    free(v);
}

/* While a holder holds, one waiter keeps the watch -- it polls every poll_ms -- and the rest
 * block through its lease (3 x poll_ms), so five waiters cost the server about what two
 * polling ones would: the watcher's ~2 calls per 0.875 s (poll 1 s) and two calls per ~3 s
 * for each of the others; ~14 + 4 x 4 in 6 s, where five that all poll make ~70. The same
 * waiter keeps it throughout (its polls renew the lease with 2 s to spare). */
Test(wake, one_waiter_keeps_the_watch_and_the_others_block_through_its_lease)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *hc = hlt_client(r->url);
    hilock *h;
    hlt_bg w[5];
    char first[64], last[64];
    long long lease, before, calls;
    int granted = 0;
    cr_assert_eq(hilock_acquire(hc, "busy", 60000, 0, &h), HILOCK_OK);
    for (int i = 0; i < 5; i++) waiter(&w[i], r->url, "busy", 9000, 1000);
    await_blocked(r, 5);
    read_watch(r, "{busy}:waiters", first, sizeof first, &lease);
    cr_assert_eq(lease, 3000, "the watch's lease is 3 x poll_ms");
    before = waiter_calls(r);
    hlt_sleep_ms(6000);
    calls = waiter_calls(r) - before;
    read_watch(r, "{busy}:waiters", last, sizeof last, &lease);
    printf("wake: 5 waiters behind one watch for 6 s: %lld calls, %.2f per waiter-second\n", calls,
           (double)calls / 30.0);
    cr_assert_str_eq(last, first, "the watch changed hands while its waiter waited");
    /* the worst case: the watcher's 0.75 s polls (8 x 2 + its late block), and each other's
     * block no shorter than the lease less one poll and a late tick (1.9 s: 4 x 2) */
    cr_assert_leq(calls, 50 + 5 * last_second_polls(), "%lld calls from 5 waiters in 6 s", calls);
    cr_assert_geq(calls, 6, "%lld calls: the watcher did not poll", calls);
    hlt_holds(r, "busy", hilock_token(h));
    cr_assert_eq(hilock_release(h), HILOCK_OK);   /* a release still wakes a waiter at once */
    for (int i = 0; i < 5; i++) {
        hilock_status st = hlt_bg_join(&w[i], 20000);
        cr_assert(st == HILOCK_OK || st == HILOCK_BUSY, "waiter %d: %s", i, w[i].err);
        if (st == HILOCK_OK) {
            granted++;
            hlt_holds(r, "busy", hilock_token(w[i].l));
        }
    }
    cr_assert_eq(granted, 1, "%d waiters were granted the lock released once", granted);
    for (int i = 0; i < 5; i++) hlt_bg_free(&w[i]);   /* (a release: after every join) */
    hilock_free(h);
    hilock_client_free(hc);
    hlt_redis_stop(r);
}

/* Redlock: each master keeps a watch of its own. The first waiter, blocked on every master
 * before the others come, keeps all three; the other four block through its leases. Each
 * master serves ~14 + 4 x 4 calls in 6 s, where five waiters that all poll make ~70 on each
 * (as every Redlock waiter did before). A release still hands the lock to one waiter, on a
 * quorum (each master's signal wakes its own oldest waiter: two may race for it). */
Test(wake, a_redlocks_waiters_keep_one_watch_on_each_master)
{
    hlt_redis *r[3];
    const char *urls[3];
    hilock_options o;
    hilock_client *hc;
    hilock *h;
    hlt_bg w[5];
    char first[3][64], last[64];
    long long lease, before[3];
    int granted = 0;
    for (int m = 0; m < 3; m++) {
        r[m] = hlt_redis_started(NULL);
        urls[m] = r[m]->url;
    }
    o = hlt_options(urls, 3);
    hc = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(hc, "busy", 60000, 0, &h), HILOCK_OK, "%s", hilock_client_errmsg(hc));
    for (int i = 0; i < 5; i++) {
        w[i] = (hlt_bg){ .urls = urls, .nurls = 3, .key = "busy", .plain = 1, .ttl_ms = 30000, .wait_ms = 9000,
                         .poll_ms = 1000 };
        hlt_bg_start(&w[i]);
        if (i == 0)
            for (int m = 0; m < 3; m++) await_blocked(r[m], 1);
    }
    for (int m = 0; m < 3; m++) {
        await_blocked(r[m], 5);
        read_watch(r[m], "{busy}:waiters", first[m], sizeof first[m], &lease);
        cr_assert_eq(lease, 3000, "master %d: the watch's lease is 3 x poll_ms", m);
        cr_assert_str_eq(first[m], first[0], "master %d named another watcher", m);
        before[m] = waiter_calls(r[m]);
    }
    hlt_sleep_ms(6000);
    for (int m = 0; m < 3; m++) {
        long long calls = waiter_calls(r[m]) - before[m];
        read_watch(r[m], "{busy}:waiters", last, sizeof last, &lease);
        printf("wake: 5 Redlock waiters behind one watch for 6 s, master %d: %lld calls, %.2f per waiter-second\n",
               m, calls, (double)calls / 30.0);
        cr_assert_str_eq(last, first[m], "master %d: the watch changed hands while its waiter waited", m);
        cr_assert_leq(calls, 50 + 5 * last_second_polls(), "master %d: %lld calls from 5 waiters in 6 s", m, calls);
        cr_assert_geq(calls, 6, "master %d: %lld calls: the watcher did not poll", m, calls);
        hlt_holds(r[m], "busy", hilock_token(h));
    }
    cr_assert_eq(hilock_release(h), HILOCK_OK);   /* a release still wakes a waiter at once */
    for (int i = 0; i < 5; i++) {
        hilock_status st = hlt_bg_join(&w[i], 20000);
        cr_assert(st == HILOCK_OK || st == HILOCK_BUSY, "waiter %d: %s", i, w[i].err);
        if (st == HILOCK_OK) {   /* on a quorum: each master's signal may wake another waiter */
            int on = 0;
            granted++;
            for (int m = 0; m < 3; m++) {
                char *v = hlt_get(r[m], "busy");
                on += v && !strcmp(v, hilock_token(w[i].l));
                free(v);
            }
            cr_assert_geq(on, 2, "waiter %d holds the lock on %d master(s)", i, on);
        }
    }
    cr_assert_eq(granted, 1, "%d waiters were granted the lock released once", granted);
    for (int i = 0; i < 5; i++) hlt_bg_free(&w[i]);
    hilock_free(h);
    hilock_client_free(hc);
    for (int m = 0; m < 3; m++) hlt_redis_stop(r[m]);
}

/* The fair lock: the head of the queue keeps the watch (it polls every poll_ms); the four
 * behind it beat once per lease (3 x poll_ms, src/kinds/fair.c), their entries living through
 * it: ~14 + 4 x 4 calls in 6 s, where each polled every poll_ms before (~70). None lapses
 * meanwhile, and the release still goes to the head, then in order, each grant as the one
 * before it expires. */
Test(wake, a_fair_locks_waiters_behind_its_head_beat_once_per_lease)
{
    NEEDS_32();
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *hc;
    hilock *h;
    hlt_bg w[5];
    hilock_options o = hlt_options((const char *[]){ r->url }, 1);
    long long before, calls, t_grant[5];
    o.fair = 1;
    hc = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(hc, "busy", 60000, 0, &h), HILOCK_OK, "%s", hilock_client_errmsg(hc));
    for (int i = 0; i < 5; i++) {
        w[i] = (hlt_bg){ .url = r->url, .key = "busy", .plain = 1, .fair = 1, .ttl_ms = 200, .wait_ms = 15000,
                         .poll_ms = 1000 };
        hlt_bg_start(&w[i]);
        HLT_AWAIT(llen(r, "{busy}:fq") == i + 1, 10000, "waiter %d never queued", i);
    }
    /* (before Redis 6.0 a block is whole seconds: there the head, whose pause is shorter,
     * polls every retry_delay_ms, as fair waiters did before) */
    await_blocked(r, hlt_server_version() >= 60000 ? 5 : 4);
    before = waiter_calls(r);
    hlt_sleep_ms(6000);
    calls = waiter_calls(r) - before;
    printf("wake: 5 fair waiters behind a holder for 6 s: %lld calls, %.2f per waiter-second\n", calls,
           (double)calls / 30.0);
    cr_assert_leq(calls, 50 + 5 * last_second_polls(), "%lld calls from 5 waiters in 6 s", calls);
    cr_assert_geq(calls, 6, "%lld calls: the head did not poll", calls);
    cr_assert_eq(llen(r, "{busy}:fq"), 5, "an entry lapsed while its waiter waited");
    hlt_holds(r, "busy", hilock_token(h));
    cr_assert_eq(hilock_release(h), HILOCK_OK);   /* the head first, then each in turn (ttl 200 ms) */
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(hlt_bg_join(&w[i], 20000), HILOCK_OK, "waiter %d: %s", i, w[i].err);
        t_grant[i] = w[i].t_done;
        if (i == 0) continue;
        cr_assert_geq(t_grant[i], t_grant[i - 1], "waiter %d was served before waiter %d", i, i - 1);
        /* each grant lapses unreleased (ttl 200 ms): the new head, woken by the grant that made
         * it head, knows when -- not at the end of its lease-long pause (3-4 s) */
        printf("wake: fair waiter %d granted %lld ms after waiter %d\n", i, t_grant[i] - t_grant[i - 1], i - 1);
        cr_assert_lt(t_grant[i] - t_grant[i - 1], 2500, "waiter %d: %lld ms after the one before", i,
                     t_grant[i] - t_grant[i - 1]);
    }
    for (int i = 0; i < 5; i++) hlt_bg_free(&w[i]);
    hilock_free(h);
    hilock_client_free(hc);
    hlt_redis_stop(r);
}

/* A waiter that polls more often takes the watch over from one that polls less often: each
 * still sees a key freed without a signal within its own poll_ms (here 1 s, behind a watcher
 * whose poll is 20 s). */
Test(wake, a_waiter_that_polls_more_often_takes_the_watch)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *hc = hlt_client(r->url);
    hilock *h;
    hlt_bg slow, fast;
    char who[64];
    long long lease;
    cr_assert_eq(hilock_acquire(hc, "job", 60000, 0, &h), HILOCK_OK);
    waiter(&slow, r->url, "job", 30000, SLOW_POLL_MS);
    await_blocked(r, 1);
    read_watch(r, "{job}:waiters", who, sizeof who, &lease);
    cr_assert_gt(lease, 3000, "the 20 s poller keeps the watch (%lld ms)", lease);
    waiter(&fast, r->url, "job", 30000, 1000);
    await_blocked(r, 2);
    read_watch(r, "{job}:waiters", who, sizeof who, &lease);
    cr_assert_eq(lease, 3000, "the 1 s poller took the watch");
    foreign_del_taken_by(r, &fast, "the 1 s watcher");
    cr_assert_eq(hilock_release(fast.l), HILOCK_OK);   /* which wakes the slow one */
    cr_assert_eq(hlt_bg_join(&slow, 20000), HILOCK_OK, "%s", slow.err);
    hlt_holds(r, "job", hilock_token(slow.l));
    hlt_bg_free(&fast);
    hlt_bg_free(&slow);
    hilock_free(h);
    hilock_client_free(hc);
    hlt_redis_stop(r);
}

/* The watcher killed: its lease runs out unrenewed, and the next waiter to wake takes the
 * watch, so a key deleted without a signal is still seen -- within about a lease and a poll
 * (1.5 + 0.5 s here), not at the holder's ttl (60 s) or the waiter's wait (30 s). */
Test(wake, the_watch_passes_on_when_its_waiter_dies)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *hc = hlt_client(r->url);
    hilock *h;
    hlt_bg w2;
    pid_t w1;
    char who[64];
    long long lease;
    cr_assert_eq(hilock_acquire(hc, "job", 60000, 0, &h), HILOCK_OK);
    w1 = spawn_waiter(r->url, "job", 500);
    await_blocked(r, 1);
    waiter(&w2, r->url, "job", 30000, 500);
    await_blocked(r, 2);
    read_watch(r, "{job}:waiters", who, sizeof who, &lease);
    kill(w1, SIGKILL);
    cr_assert_eq(exit_code(w1), 128 + SIGKILL);
    await_blocked(r, 1);
    foreign_del_taken_by(r, &w2, "the watcher killed");
    hlt_bg_free(&w2);
    hilock_free(h);
    hilock_client_free(hc);
    hlt_redis_stop(r);
}

/* A mark that claims the watch for ever (another client's bug, an operator's SET: a lease end
 * a century away) does not stop a waiter for longer than its own lease and a poll: a key
 * deleted without a signal is still seen within ~4 x poll_ms (2 s here). */
Test(wake, a_mark_that_claims_the_watch_for_ever_costs_a_waiter_at_most_its_own_lease)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *hc = hlt_client(r->url);
    hilock *h;
    hlt_bg w;
    redisReply *rep;
    cr_assert_eq(hilock_acquire(hc, "job", 60000, 0, &h), HILOCK_OK);
    rep = hlt_cmd(r, "SET {job}:waiters %s PX 600000", "ffff 99999999999999999 1");
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    waiter(&w, r->url, "job", 30000, 500);
    await_blocked(r, 1);
    hlt_sleep_ms(300);
    foreign_del_taken_by(r, &w, "behind a watch claimed for ever");
    hlt_bg_free(&w);
    hilock_free(h);
    hilock_client_free(hc);
    hlt_redis_stop(r);
}

/* A semaphore's waiters keep one watch as well ({key}:watch, permits.lua): five waiters for its
 * one permit cost the server what the lock's do (above), the same waiter keeps the watch
 * throughout, and the permit's release still grants one waiter at once. */
Test(wake, a_semaphores_waiters_keep_one_watch)
{
    NEEDS_32();
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *hc = hlt_client(r->url);
    hilock *h;
    hlt_bg w[5];
    char first[64], last[64];
    long long lease, before, calls;
    double score;
    int granted = 0;
    cr_assert_eq(hilock_sem_acquire(hc, "busy", 1, 60000, 0, &h), HILOCK_OK, "%s", hilock_client_errmsg(hc));
    for (int i = 0; i < 5; i++) {
        w[i] = (hlt_bg){ .url = r->url, .key = "busy", .limit = 1, .ttl_ms = 30000, .wait_ms = 9000, .poll_ms = 1000 };
        hlt_bg_start(&w[i]);
    }
    /* (before Redis 6.0 a block is whole seconds: the watcher, whose pause is shorter, blocks
     * one second, as the lock's does) */
    cr_assert_eq(hlt_await_zcard(r, "{busy}:wq", 5, 10000), 5, "the waiters never registered");
    await_blocked(r, 5);
    read_watch(r, "{busy}:watch", first, sizeof first, &lease);
    cr_assert_eq(lease, 3000, "the watch's lease is 3 x poll_ms");
    before = waiter_calls(r);
    hlt_sleep_ms(6000);
    calls = waiter_calls(r) - before;
    read_watch(r, "{busy}:watch", last, sizeof last, &lease);
    printf("wake: 5 semaphore waiters behind one watch for 6 s: %lld calls, %.2f per waiter-second\n", calls,
           (double)calls / 30.0);
    cr_assert_str_eq(last, first, "the watch changed hands while its waiter waited");
    cr_assert_leq(calls, 50 + 5 * last_second_polls(), "%lld calls from 5 waiters in 6 s", calls);
    cr_assert_geq(calls, 6, "%lld calls: the watcher did not poll", calls);
    cr_assert_eq(hilock_release(h), HILOCK_OK);   /* the freed permit wakes a waiter at once */
    for (int i = 0; i < 5; i++) {
        hilock_status st = hlt_bg_join(&w[i], 20000);
        cr_assert(st == HILOCK_OK || st == HILOCK_BUSY, "waiter %d: %s", i, w[i].err);
        if (st == HILOCK_OK) {
            granted++;
            cr_assert_eq(hlt_zscore(r, "busy", hilock_token(w[i].l), &score), 1, "waiter %d holds no permit", i);
        }
    }
    cr_assert_eq(granted, 1, "%d waiters were granted the one permit freed", granted);
    for (int i = 0; i < 5; i++) hlt_bg_free(&w[i]);
    hilock_free(h);
    hilock_client_free(hc);
    hlt_redis_stop(r);
}

/* A writer takes the watch from a reader (a free key goes to the writer first: a reader that
 * kept the watch would find it free and still be refused, and the writer would see it only at
 * the end of the reader's lease), and a key deleted without a signal is then seen by the
 * writer within a poll (1 s), not at the end of the exclusive holder's ttl (60 s). */
Test(wake, a_writer_takes_the_watch_from_a_reader)
{
    NEEDS_32();
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *hc = hlt_client(r->url);
    hilock *h;
    hlt_bg rd = { .url = r->url, .key = "job", .mode = HILOCK_SHARED, .ttl_ms = 30000, .wait_ms = 30000, .poll_ms = 1000 };
    hlt_bg wr = { .url = r->url, .key = "job", .mode = HILOCK_EXCLUSIVE, .ttl_ms = 30000, .wait_ms = 30000, .poll_ms = 1000 };
    redisReply *rep;
    char who[64];
    long long lease, t0;
    double score;
    cr_assert_eq(hilock_rw_acquire(hc, "job", HILOCK_EXCLUSIVE, 60000, 0, &h), HILOCK_OK, "%s", hilock_client_errmsg(hc));
    hlt_bg_start(&rd);
    cr_assert_eq(hlt_await_zcard(r, "{job}:wq", 1, 10000), 1, "the reader never registered");
    read_watch(r, "{job}:watch", who, sizeof who, &lease);
    cr_assert(!strncmp(who, "s:", 2), "the reader keeps the watch: %s", who);
    hlt_bg_start(&wr);
    cr_assert_eq(hlt_await_zcard(r, "{job}:wq", 2, 10000), 2, "the writer never registered");
    read_watch(r, "{job}:watch", who, sizeof who, &lease);
    cr_assert(!strncmp(who, "x:", 2), "the writer took the watch: %s", who);
    t0 = hlt_now_ms();
    rep = hlt_cmd(r, "DEL job");
    cr_assert(rep && rep->integer == 1);
    freeReplyObject(rep);
    cr_assert_eq(hlt_bg_join(&wr, 20000), HILOCK_OK, "%s", wr.err);
    printf("wake: a writer behind its watch saw a foreign DEL after %lld ms\n", wr.t_done - t0);
    cr_assert_lt(wr.t_done - t0, 10000, "took %lld ms (the exclusive holder's ttl: 60 s)", wr.t_done - t0);
    cr_assert_eq(hlt_zscore(r, "job", hilock_token(wr.l), &score), 1, "the writer holds no grant");
    cr_assert_eq(hilock_release(wr.l), HILOCK_OK);   /* which wakes the reader */
    cr_assert_eq(hlt_bg_join(&rd, 20000), HILOCK_OK, "%s", rd.err);
    cr_assert_eq(hlt_zscore(r, "job", hilock_token(rd.l), &score), 1, "the reader holds no grant");
    hlt_bg_free(&wr);
    hlt_bg_free(&rd);
    hilock_free(h);
    hilock_client_free(hc);
    hlt_redis_stop(r);
}

/* A semaphore's watch record claiming the watch for ever (another client's bug, an operator's
 * SET, a value that is no record at all) costs its waiter at most its own lease and a poll, as
 * the lock's mark does: a key deleted without a signal is still seen within ~4 x poll_ms (2 s
 * here), not at the holder's ttl (60 s) or the waiter's wait (30 s). */
Test(wake, a_semaphore_watch_claimed_for_ever_costs_a_waiter_at_most_its_own_lease)
{
    NEEDS_32();
    static const char *const claims[] = { "s:ffff 99999999999999999 1", "not a record" };
    hlt_redis *r = hlt_redis_started(NULL);
    for (size_t i = 0; i < sizeof claims / sizeof claims[0]; i++) {
        hilock_client *hc = hlt_client(r->url);
        hilock *h;
        hlt_bg w = { .url = r->url, .key = "job", .limit = 1, .ttl_ms = 30000, .wait_ms = 30000, .poll_ms = 500 };
        redisReply *rep = hlt_cmd(r, "SET {job}:watch %s PX 600000", claims[i]);
        long long t0;
        double score;
        cr_assert(rep && rep->type == REDIS_REPLY_STATUS);
        freeReplyObject(rep);
        cr_assert_eq(hilock_sem_acquire(hc, "job", 1, 60000, 0, &h), HILOCK_OK, "%s", hilock_client_errmsg(hc));
        hlt_bg_start(&w);
        cr_assert_eq(hlt_await_zcard(r, "{job}:wq", 1, 10000), 1, "the waiter never registered");
        hlt_sleep_ms(300);
        t0 = hlt_now_ms();
        rep = hlt_cmd(r, "DEL job");
        cr_assert(rep && rep->integer == 1);
        freeReplyObject(rep);
        cr_assert_eq(hlt_bg_join(&w, 20000), HILOCK_OK, "%s", w.err);
        printf("wake: behind a semaphore watch claimed as \"%s\", a foreign DEL seen after %lld ms\n", claims[i],
               w.t_done - t0);
        cr_assert_lt(w.t_done - t0, 10000, "took %lld ms (the wait: 30 s, the holder's ttl 60 s)", w.t_done - t0);
        cr_assert_eq(hlt_zscore(r, "job", hilock_token(w.l), &score), 1, "the waiter holds no permit");
        hlt_bg_free(&w);
        hilock_free(h);
        hilock_client_free(hc);
        rep = hlt_cmd(r, "FLUSHALL");
        freeReplyObject(rep);
    }
    hlt_redis_stop(r);
}

/* A grant that came by the watcher's own poll wakes those that can hold beside it: here a
 * plain lock's release, which signals no reader, frees the key, and the reader that keeps the
 * watch (poll 5 s) takes it at its next poll, then wakes the other two, which would otherwise
 * block through its lease (15 s, renewed at its last poll: at least 10 s past the release). */
Test(wake, a_reader_granted_by_its_poll_wakes_the_other_readers)
{
    NEEDS_32();
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *hc = hlt_client(r->url);
    hilock *h;
    hlt_bg rd[3];
    long long t0;
    double score;
    cr_assert_eq(hilock_acquire(hc, "job", 60000, 0, &h), HILOCK_OK, "%s", hilock_client_errmsg(hc));
    for (int i = 0; i < 3; i++) {
        rd[i] = (hlt_bg){ .url = r->url, .key = "job", .mode = HILOCK_SHARED, .ttl_ms = 30000, .wait_ms = 30000,
                          .poll_ms = 5000 };
        hlt_bg_start(&rd[i]);
    }
    await_blocked(r, 3);
    t0 = hlt_now_ms();
    cr_assert_eq(hilock_release(h), HILOCK_OK);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(hlt_bg_join(&rd[i], 40000), HILOCK_OK, "reader %d: %s", i, rd[i].err);
        printf("wake: reader %d granted %lld ms after the plain lock's release\n", i, rd[i].t_done - t0);
        cr_assert_lt(rd[i].t_done - t0, 9000, "reader %d: %lld ms (its poll: 5 s; the watch's lease: 15 s)", i,
                     rd[i].t_done - t0);
        cr_assert_eq(hlt_zscore(r, "job", hilock_token(rd[i].l), &score), 1, "reader %d holds no grant", i);
    }
    for (int i = 0; i < 3; i++) hlt_bg_free(&rd[i]);
    hilock_free(h);
    hilock_client_free(hc);
    hlt_redis_stop(r);
}

/* The same for a semaphore: its key deleted behind the holder's back (no signal), the watcher
 * (poll 3 s) takes a permit at its next poll and wakes one more waiter for the other permit
 * (limit 2), which would otherwise block through the watch's lease until its wait (8 s) ends;
 * the third waiter finds none and waits on. */
Test(wake, a_permit_granted_by_a_poll_wakes_a_waiter_per_permit_left)
{
    NEEDS_32();
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *hc[2] = { hlt_client(r->url), hlt_client(r->url) };   /* (a client holds a key once) */
    hilock *h[2];
    hlt_bg w[3];
    redisReply *rep;
    long long t0;
    double score;
    int granted = 0;
    for (int i = 0; i < 2; i++)
        cr_assert_eq(hilock_sem_acquire(hc[i], "job", 2, 60000, 0, &h[i]), HILOCK_OK, "%s", hilock_client_errmsg(hc[i]));
    for (int i = 0; i < 3; i++) {
        w[i] = (hlt_bg){ .url = r->url, .key = "job", .limit = 2, .ttl_ms = 30000, .wait_ms = 8000, .poll_ms = 3000 };
        hlt_bg_start(&w[i]);
    }
    await_blocked(r, 3);
    t0 = hlt_now_ms();
    rep = hlt_cmd(r, "DEL job");
    cr_assert(rep && rep->integer == 1);
    freeReplyObject(rep);
    for (int i = 0; i < 3; i++) {
        hilock_status st = hlt_bg_join(&w[i], 40000);
        cr_assert(st == HILOCK_OK || st == HILOCK_BUSY, "waiter %d: %s", i, w[i].err);
        if (st != HILOCK_OK) continue;
        granted++;
        printf("wake: waiter %d granted a permit %lld ms after the DEL\n", i, w[i].t_done - t0);
        cr_assert_lt(w[i].t_done - t0, 6500, "waiter %d: %lld ms (its poll: 3 s; its wait: 8 s)", i, w[i].t_done - t0);
        cr_assert_eq(hlt_zscore(r, "job", hilock_token(w[i].l), &score), 1, "waiter %d holds no permit", i);
    }
    cr_assert_eq(granted, 2, "%d waiters were granted the 2 permits freed", granted);
    for (int i = 0; i < 3; i++) hlt_bg_free(&w[i]);
    for (int i = 0; i < 2; i++) {
        hilock_free(h[i]);
        hilock_client_free(hc[i]);
    }
    hlt_redis_stop(r);
}

/* release.lua's signal: an awaited lock's release pushes one element, and one unclaimed
 * element is the most the list keeps (each wakes one waiter; unclaimed, it lapses within 1 s);
 * the release deletes the lock alone: the client's holder record lapses by itself
 * (acquire.lua). Read back on a second connection. */
Test(wake, unclaimed_signals_are_capped_at_one_and_lapse)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c = hlt_client(r->url);
    hilock *l;
    redisReply *rep;
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(hilock_acquire(c, "sig", 30000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
        cr_assert_eq(hlt_exists(r, "{sig}:holder"), 1, "the grant wrote its holder record");
        freeReplyObject(hlt_cmd(r, "SET {sig}:waiters 1 PX 30000"));   /* as a busy attempt marks it */
        cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
        hilock_free(l);
        cr_assert_eq(hlt_exists(r, "sig"), 0);
        cr_assert_eq(hlt_exists(r, "{sig}:holder"), 1, "the holder record lapses by itself");
        rep = hlt_cmd(r, "LLEN {sig}:signal");
        cr_assert(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 1,
                  "release %d left %lld signal elements", i + 1, rep ? rep->integer : -1);
        freeReplyObject(rep);
        cr_assert(hlt_pttl(r, "{sig}:signal") > 0 && hlt_pttl(r, "{sig}:signal") <= 1000, "it lapses within 1 s");
    }
    HLT_AWAIT(hlt_exists(r, "{sig}:signal") == 0, 3000, "the unclaimed signal never lapsed");
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* poll_ms out of range is refused by hilock_client_new, naming it. */
Test(wake, poll_ms_out_of_range_is_refused)
{
    const char *url = "redis://127.0.0.1:1";
    int64_t bad[] = { 0, -1, 600001 };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hilock_options o = hlt_options(&url, 1);
        hilock_client *c = NULL;
        o.poll_ms = bad[i];
        cr_assert_eq(hilock_client_new(&o, &c), HILOCK_EINVAL, "poll_ms %lld", (long long)bad[i]);
        cr_assert_null(c);
        cr_assert(strstr(hilock_last_config_error(), "poll_ms"), "%s", hilock_last_config_error());
    }
}
