/* SPDX-License-Identifier: BSD-3-Clause */
/* test_rw.c -- shared/exclusive locks (hilock_rw_acquire, docs/rwlock.md) on real
 * redis-servers: shared holders together, an exclusive one alone; writer preference (a
 * waiting writer stops new shared grants, and gets the key when the readers leave); a
 * writer's release wakes every waiting reader; fences; the plain lock (hilock_acquire) and
 * the shared lock exclude each other on one key; a key of another kind refused naming it;
 * Redlock over three masters; a failover behind Sentinel. Every test asserts the status and
 * the state read back on a separate connection. Timing asserts are generous upper bounds. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "clients.h"
#include "checks.h"
#include "holders.h"
#include "hilock_async.h"
#include "scenario.h"
#include "sentinel_fixture.h"

#define NEEDS_32() HLT_NEEDS(30200, "the shared/exclusive lock's script reads the server's clock (Redis 3.2+)")
#define MARKER "hilock:rw"
#define X HILOCK_EXCLUSIVE
#define S HILOCK_SHARED
/* Waiters poll only this seldom (retry_delay_ms, jittered down to half): a grant within
 * WOKEN_MS of the release that frees it is the release's wake-up, not a poll. */
#define SLOW_POLL_MS 5000
#define WOKEN_MS 2000

static hlt_redis *R;

static void setup(void)
{
    R = hlt_redis_start(NULL);
    cr_assert_not_null(R, "redis-server did not start");
}

static void teardown(void) { hlt_redis_stop(R); }

TestSuite(rw, .init = setup, .fini = teardown, .timeout = 30);

static const char *mode_name(hilock_rw_mode m) { return m == S ? "shared" : "exclusive"; }

static hilock *must_rw(hilock_client *c, const char *key, hilock_rw_mode m, int64_t ttl, int64_t wait)
{
    hilock *l = NULL;
    hilock_status st = hilock_rw_acquire(c, key, m, ttl, wait, &l);
    cr_assert_eq(st, HILOCK_OK, "%s %s: %s (%s)", mode_name(m), key, hilock_strerror(st), hilock_client_errmsg(c));
    cr_assert_not_null(l);
    return l;
}

/* A try-lock that must be BUSY, name the key, leave *out NULL and write nothing (whole = 0:
 * to the key alone, while a waiter refreshes its own entries). */
static void assert_busy_says(hilock_client *c, const char *key, hilock_rw_mode m, const char *says, int whole)
{
    hlt_assert_unchanged_by(R, c, &(hlt_bg){ .key = key, .mode = m, .ttl_ms = 5000 }, HILOCK_BUSY, says, whole);
}

static void assert_busy(hilock_client *c, const char *key, hilock_rw_mode m) { assert_busy_says(c, key, m, key, 1); }

static void release_free(hilock *l)
{
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
}

/* l's token is "x:"/"s:" + 30 lowercase hex digits, and KEY's member scored its expiry. */
static void assert_grant(hlt_redis *r, const hilock *l, hilock_rw_mode m, int64_t ttl)
{
    const char *t = hilock_token(l);
    cr_assert_eq(strlen(t), 32, "token %s", t);
    cr_assert(!strncmp(t, m == S ? "s:" : "x:", 2), "%s token %s", mode_name(m), t);
    cr_assert_eq(strspn(t + 2, "0123456789abcdef"), 30, "token %s", t);
    hlt_assert_expiry(r, l, ttl);
}

/* ---- shared and exclusive ---- */

Test(rw, shared_holders_hold_together)
{
    NEEDS_32();
    hilock_client *c[3] = { hlt_client_retry(R->url, 10), hlt_client_retry(R->url, 10), hlt_client_retry(R->url, 10) };
    hilock *l[3];
    double score;
    for (int i = 0; i < 3; i++) l[i] = must_rw(c[i], "k", S, 20000, 0);
    for (int i = 0; i < 3; i++) assert_grant(R, l[i], S, 20000);
    cr_assert_eq(hlt_zcard(R, "k"), 4, "3 members and the marker");
    cr_assert(hlt_zscore(R, "k", MARKER, &score) && score >= 1e300, "the marker scores +inf");
    cr_assert_eq(hlt_exists(R, "{k}:holders"), 1);
    for (int i = 0; i < 3; i++) release_free(l[i]);
    cr_assert_eq(hlt_exists(R, "k"), 0, "deleted when its last holder left");
    cr_assert_eq(hlt_exists(R, "{k}:holders"), 0);
    for (int i = 0; i < 3; i++) hilock_client_free(c[i]);
}

Test(rw, exclusive_holds_alone)
{
    NEEDS_32();
    hilock_client *a = hlt_client_retry(R->url, 10), *b = hlt_client_retry(R->url, 10);
    hilock *x = must_rw(a, "k", X, 20000, 0);
    assert_grant(R, x, X, 20000);
    cr_assert_eq(hlt_zcard(R, "k"), 2);
    assert_busy_says(b, "k", X, "k: held exclusive, expires in ", 1);
    assert_busy_says(b, "k", S, "k: held exclusive, expires in ", 1);
    release_free(x);
    cr_assert_eq(hlt_exists(R, "k"), 0);
    x = must_rw(b, "k", X, 20000, 0);
    release_free(x);
    hilock_client_free(a);
    hilock_client_free(b);
}

Test(rw, exclusive_is_busy_while_shared_is_held)
{
    NEEDS_32();
    hilock_client *a = hlt_client_retry(R->url, 10), *b = hlt_client_retry(R->url, 10);
    hilock *s = must_rw(a, "k", S, 20000, 0);
    assert_busy_says(b, "k", X, "k: held shared by 1, the first expires in ", 1);
    release_free(s);
    s = must_rw(b, "k", X, 20000, 0);
    release_free(s);
    hilock_client_free(a);
    hilock_client_free(b);
}

/* ---- writer preference and wake-ups ---- */

/* Blocking and on the loop (tests/scenario.h): two readers hold; a writer waits, and so does
 * a reader that comes after it (writer preference: a try is BUSY saying so); the last
 * reader's release wakes the writer first, the writer's release the reader. (On the loop the
 * five callers are one client's calls side by side.) */
HLT_SCENARIO(rw, a_waiting_writer_stops_new_readers_and_gets_the_key_when_they_leave)
{
    NEEDS_32();
    hilock_options o = hlt_waiter_options(R->unix_url, 20000);   /* woken, not polled */
    hlt_run *a = hlt_run_new(&o, mode), *b = hlt_run_peer(a), *c = hlt_run_peer(a);
    hlt_run *w = hlt_run_peer(a), *r = hlt_run_peer(a);
    hilock *r1, *r2, *lw, *lr, *l = (hilock *)&l;
    long long t_rel, pttl;
    uint64_t top;
    char *before, *after;
    cr_assert_eq(hlt_run_rw_acquire(a, "k", S, 60000, 0, &r1), HILOCK_OK, "%s", hlt_run_errmsg(a));
    cr_assert_eq(hlt_run_rw_acquire(b, "k", S, 60000, 0, &r2), HILOCK_OK, "%s", hlt_run_errmsg(b));
    assert_grant(R, r1, S, 60000);
    assert_grant(R, r2, S, 60000);
    cr_assert_eq(hlt_zcard(R, "k"), 3, "two shared holders and the kind's marker");
    top = hilock_fence(r1) > hilock_fence(r2) ? hilock_fence(r1) : hilock_fence(r2);
    hlt_run_begin_rw_acquire(w, "k", X, 20000, 15000);
    cr_assert(hlt_run_until(w, hlt_zcard_is, &(hlt_zcard_want){ R, "{k}:wq", 1 }, 5000),
              "the writer never registered in {k}:wq");
    /* a try: BUSY, saying why, and the key as it was (its ttl not renewed) */
    before = hlt_db_snapshot(R, "k");
    pttl = hlt_pttl(R, "k");
    cr_assert_eq(hlt_run_rw_acquire(c, "k", S, 5000, 0, &l), HILOCK_BUSY, "%s", hlt_run_errmsg(c));
    cr_assert_null(l);
    cr_assert(strstr(hlt_run_errmsg(c), "k: held shared by 2 (a writer waits)"), "%s", hlt_run_errmsg(c));
    after = hlt_db_snapshot(R, "k");
    cr_assert_str_eq(after, before, "the busy try changed the key");
    cr_assert_leq(hlt_pttl(R, "k"), pttl, "the key's ttl was renewed");
    free(before);
    free(after);
    hlt_run_begin_rw_acquire(r, "k", S, 20000, 15000);
    cr_assert(hlt_run_until(r, hlt_zcard_is, &(hlt_zcard_want){ R, "{k}:wq", 2 }, 5000),
              "the reader after the writer did not wait");
    cr_assert_eq(hlt_zcard(R, "k"), 3, "no new shared grant while a writer waits");
    cr_assert_eq(hlt_run_release(a, r1), HILOCK_OK, "%s", hlt_run_errmsg(a));
    hlt_run_sleep(a, 200);   /* (time for a wrong grant beside the other reader) */
    cr_assert_not(hlt_run_ended(w), "the writer was granted beside a reader: %s", hlt_run_errmsg(w));
    cr_assert_not(hlt_run_ended(r), "a reader was granted while a writer waits: %s", hlt_run_errmsg(r));
    t_rel = hlt_now_ms();
    cr_assert_eq(hlt_run_release(b, r2), HILOCK_OK, "%s", hlt_run_errmsg(b));
    cr_assert_eq(hlt_run_end(w, 10000, &lw), HILOCK_OK, "%s", hlt_run_errmsg(w));
    cr_log_info("%s: last reader's release -> writer granted: %lld ms", hlt_run_mode_name(w),
                hlt_run_ended_at(w) - t_rel);
    cr_assert_lt(hlt_run_ended_at(w) - t_rel, WOKEN_MS, "granted %lld ms after the release: polled, not woken",
                 hlt_run_ended_at(w) - t_rel);
    cr_assert_not(hlt_run_ended(r), "the reader was served before (or beside) the writer");
    assert_grant(R, lw, X, 20000);
    cr_assert_gt(hilock_fence(lw), top, "an exclusive grant's fence exceeds every earlier grant's");
    cr_assert_eq(hlt_zcard(R, "k"), 2, "the writer alone (and the marker)");
    cr_assert_eq(hlt_zcard(R, "{k}:wq"), 1, "a grant removes its waiter entry (the reader's is left)");
    t_rel = hlt_now_ms();
    cr_assert_eq(hlt_run_release(w, lw), HILOCK_OK, "%s", hlt_run_errmsg(w));
    cr_assert_eq(hlt_run_end(r, 10000, &lr), HILOCK_OK, "%s", hlt_run_errmsg(r));
    cr_assert_lt(hlt_run_ended_at(r) - t_rel, WOKEN_MS, "the reader was not woken by the writer's release");
    cr_assert_gt(hilock_fence(lr), hilock_fence(lw));
    cr_assert(hlt_zscore(R, "k", hilock_token(lr), &(double){ 0 }));
    cr_assert_not(hlt_zscore(R, "k", hilock_token(lw), &(double){ 0 }));
    cr_assert_eq(hlt_exists(R, "{k}:wq"), 0);
    cr_assert_eq(hlt_run_release(r, lr), HILOCK_OK, "%s", hlt_run_errmsg(r));
    cr_assert_eq(hlt_exists(R, "k"), 0);
    cr_assert_eq(hlt_run_rw_acquire(c, "k", S, 20000, 0, &l), HILOCK_OK, "no writer waits any more: %s",
                 hlt_run_errmsg(c));
    cr_assert_eq(hlt_run_release(c, l), HILOCK_OK, "%s", hlt_run_errmsg(c));
    cr_assert_eq(hlt_exists(R, "k"), 0);
    hilock_free(r1);
    hilock_free(r2);
    hilock_free(lw);
    hilock_free(lr);
    hilock_free(l);
    hlt_run_free(r);
    hlt_run_free(w);
    hlt_run_free(c);
    hlt_run_free(b);
    hlt_run_free(a);
}

Test(rw, a_writers_release_wakes_every_waiting_reader)
{
    NEEDS_32();
    enum { N = 3 };
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *x = must_rw(c, "k", X, 60000, 0);
    hlt_bg r[N];
    long long t_rel;
    for (int i = 0; i < N; i++) {
        r[i] = (hlt_bg){ .url = R->url, .key = "k", .mode = S, .ttl_ms = 20000, .wait_ms = 15000,
                         .retry_delay_ms = SLOW_POLL_MS };
        hlt_bg_start(&r[i]);
    }
    cr_assert_eq(hlt_await_zcard(R, "{k}:wq", N, 5000), N, "the readers never all registered in {k}:wq");
    hlt_sleep_ms(100);
    t_rel = hlt_now_ms();
    release_free(x);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(hlt_bg_join(&r[i], 10000), HILOCK_OK, "reader %d: %s", i, r[i].err);
        cr_log_info("writer's release -> reader %d granted: %lld ms", i, r[i].t_done - t_rel);
        cr_assert_lt(r[i].t_done - t_rel, WOKEN_MS, "reader %d granted %lld ms after the release: polled", i,
                     r[i].t_done - t_rel);
        assert_grant(R, r[i].l, S, 20000);
    }
    cr_assert_eq(hlt_zcard(R, "k"), N + 1, "all readers hold together");
    for (int i = 0; i < N; i++) hlt_bg_free(&r[i]);
    cr_assert_eq(hlt_exists(R, "k"), 0);
    hilock_client_free(c);
}

Test(rw, waiter_whose_wait_runs_out_is_busy_and_leaves_the_queue)
{
    NEEDS_32();
    hilock_client *a = hlt_client_retry(R->url, 10), *b = hlt_client_retry(R->url, 10), *d = hlt_client_retry(R->url, 10);
    hilock *s = must_rw(a, "k", S, 20000, 0), *m = (hilock *)&m;
    cr_assert_eq(hilock_rw_acquire(b, "k", X, 5000, 300, &m), HILOCK_BUSY, "%s", hilock_client_errmsg(b));
    cr_assert_null(m);
    cr_assert_eq(hlt_zcard(R, "{k}:wq"), 0, "give_up removes the writer's entry");
    m = must_rw(d, "k", S, 20000, 0);   /* so readers are no longer held back */
    release_free(m);
    release_free(s);
    hilock_client_free(a);
    hilock_client_free(b);
    hilock_client_free(d);
}

/* A writer that gives up held new readers off while it waited: its leave wakes them (before,
 * they slept to their next poll). slow_poll: the writer polls seldom (wake = 0), so its last
 * attempt surely comes at the wait's end, and leaves with it: the writer's entry goes and the
 * readers are woken by that attempt, with no leave call after it. (One that began before the
 * end registers again, and a leave call follows.) */
static void readers_woken_when_a_writer_gives_up(int slow_poll)
{
    hilock_client *a = hlt_client_retry(R->url, 10);
    hilock *s = must_rw(a, "k", S, 60000, 0);
    hlt_bg r = { .url = R->url, .key = "k", .mode = S, .ttl_ms = 20000, .wait_ms = 15000,
                 .retry_delay_ms = SLOW_POLL_MS };
    long long t_gone;
    hlt_bg w = { .url = R->url, .key = "k", .mode = X, .ttl_ms = 20000, .wait_ms = 1500 };
    if (slow_poll) {
        w.retry_delay_ms = 5000;
        w.no_wake = 1;
    }
    hlt_bg_start(&w);
    cr_assert_eq(hlt_await_zcard(R, "{k}:wq", 1, 5000), 1, "the writer never registered in {k}:wq");
    hlt_bg_start(&r);
    cr_assert_eq(hlt_await_zcard(R, "{k}:wq", 2, 5000), 2, "the reader never registered in {k}:wq");
    hlt_log_commands(R);
    cr_assert_eq(hlt_bg_join(&w, 10000), HILOCK_BUSY, "%s", w.err);
    t_gone = hlt_now_ms();
    cr_assert_eq(hlt_bg_join(&r, 10000), HILOCK_OK, "%s", r.err);
    cr_log_info("writer gave up -> reader granted: %lld ms", r.t_done - t_gone);
    cr_assert_lt(r.t_done - t_gone, WOKEN_MS, "granted %lld ms after the writer left: polled, not woken",
                 r.t_done - t_gone);
    if (slow_poll) cr_assert_eq(hlt_logged(R, "leave"), 0, "a leave call after the writer's last attempt");
    cr_assert_eq(hlt_zcard(R, "{k}:wq"), 0, "an entry is left behind");
    assert_grant(R, r.l, S, 20000);
    hlt_bg_free(&w);
    hlt_bg_free(&r);
    release_free(s);
    hilock_client_free(a);
}

Test(rw, a_writer_that_gives_up_wakes_the_readers_it_held_off)
{
    NEEDS_32();
    readers_woken_when_a_writer_gives_up(0);
}

Test(rw, a_writers_wait_that_runs_out_leaves_with_its_last_attempt)
{
    NEEDS_32();
    readers_woken_when_a_writer_gives_up(1);
}

/* Writer preference among waiters: an exclusive holder's release wakes the waiting writer,
 * not the waiting reader; the writer's release then wakes the reader. */
Test(rw, a_writers_release_wakes_the_next_writer_before_the_readers)
{
    NEEDS_32();
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *x = must_rw(c, "k", X, 60000, 0);
    hlt_bg w = { .url = R->url, .key = "k", .mode = X, .ttl_ms = 20000, .wait_ms = 15000,
                 .retry_delay_ms = SLOW_POLL_MS };
    hlt_bg r = { .url = R->url, .key = "k", .mode = S, .ttl_ms = 20000, .wait_ms = 15000,
                 .retry_delay_ms = SLOW_POLL_MS };
    long long t_rel;
    hlt_bg_start(&w);
    cr_assert_eq(hlt_await_zcard(R, "{k}:wq", 1, 5000), 1);
    hlt_bg_start(&r);
    cr_assert_eq(hlt_await_zcard(R, "{k}:wq", 2, 5000), 2);
    hlt_sleep_ms(100);
    t_rel = hlt_now_ms();
    release_free(x);
    cr_assert_eq(hlt_bg_join(&w, 10000), HILOCK_OK, "%s", w.err);
    cr_assert_lt(w.t_done - t_rel, WOKEN_MS, "the writer was granted %lld ms after the release: polled",
                 w.t_done - t_rel);
    hlt_sleep_ms(200);
    cr_assert_not(hlt_bg_done(&r), "a reader was granted beside a writer: %s", r.err);
    t_rel = hlt_now_ms();
    cr_assert_eq(hilock_release(w.l), HILOCK_OK);
    cr_assert_eq(hlt_bg_join(&r, 10000), HILOCK_OK, "%s", r.err);
    cr_log_info("writer's release -> waiting reader granted: %lld ms", r.t_done - t_rel);
    cr_assert_lt(r.t_done - t_rel, WOKEN_MS, "the reader was granted %lld ms after the release: polled",
                 r.t_done - t_rel);
    hlt_bg_free(&w);
    hlt_bg_free(&r);
    hilock_client_free(c);
}

/* A writer that dies while it waits holds new readers off only until its registration lapses
 * (about retry_delay_ms x 1.5 + io_timeout_ms: ~1.1 s by default), not for ever. */
/* ms until the latest entry of a waiters' set lapses, by the server's clock (its score: when
 * it lapses, permits.lua), or -1 for none */
static long long entry_left_ms(hlt_redis *r, const char *wq)
{
    redisReply *t = hlt_cmd(r, "TIME"), *e = hlt_cmd(r, "ZRANGE %s -1 -1 WITHSCORES", wq);
    long long left = -1;
    if (t && t->type == REDIS_REPLY_ARRAY && t->elements == 2 && e && e->type == REDIS_REPLY_ARRAY &&
        e->elements == 2)
        left = atoll(e->element[1]->str) - (atoll(t->element[0]->str) * 1000 + atoll(t->element[1]->str) / 1000);
    freeReplyObject(t);
    freeReplyObject(e);
    return left;
}

Test(rw, a_dead_waiting_writer_holds_readers_off_only_until_its_entry_lapses)
{
    NEEDS_32();
    hilock_client *a = hlt_client_retry(R->url, 10), *b = hlt_client_retry(R->url, 10);
    hilock *s = must_rw(a, "k", S, 60000, 0), *n = NULL;
    hilock_status st = HILOCK_BUSY;
    long long t_kill, end;
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        hilock_client *c;
        hilock *l;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        alarm(30);
        if (hilock_client_open(R->url, &c) != HILOCK_OK) _exit(9);
        _exit(hilock_rw_acquire(c, "k", X, 20000, 20000, &l) == HILOCK_OK ? 0 : 1);
    }
    cr_assert_eq(hlt_await_zcard(R, "{k}:wq", 1, 5000), 1, "the writer never registered");
    kill(pid, SIGKILL);
    t_kill = hlt_now_ms();
    cr_assert_eq(hlt_reap(pid, 5000), 128 + SIGKILL);
    /* held off while the dead writer's entry lives -- looked at only with 300 ms of it left
     * (a loaded machine may reach this line after the entry, renewed each poll, has lapsed) */
    if (entry_left_ms(R, "{k}:wq") > 300) assert_busy(b, "k", S);
    else cr_log_warn("the dead writer's entry had lapsed before the first look: busy not checked");
    end = t_kill + 5000;
    while ((st = hilock_rw_acquire(b, "k", S, 20000, 0, &n)) == HILOCK_BUSY && hlt_now_ms() < end) hlt_sleep_ms(20);
    cr_assert_eq(st, HILOCK_OK, "readers still held off %lld ms after the writer died: %s", hlt_now_ms() - t_kill,
                 hilock_client_errmsg(b));
    cr_log_info("a dead writer held readers off for %lld ms", hlt_now_ms() - t_kill);
    /* the waiters' set expires with its last entry: by the server's expiry rule (now > when) it
     * may still be there in the very millisecond the grant saw the entry lapse */
    cr_assert_eq(hlt_await_zcard(R, "{k}:wq", 0, 1000), 0, "the lapsed entry is gone");
    release_free(n);
    release_free(s);
    hilock_client_free(a);
    hilock_client_free(b);
}

/* At most HILOCK_SEM_LIMIT_MAX shared holders at once (the holders are written by hand). */
Test(rw, shared_holders_are_capped_at_the_largest_limit)
{
    NEEDS_32();
    enum { N = HILOCK_SEM_LIMIT_MAX };
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l;
    long long exp = hlt_server_ms(R) + 60000;
    const char **argv = calloc(2 + 2 * (N + 1), sizeof *argv);
    char (*txt)[40] = calloc(2 * (N + 1), sizeof *txt);
    redisReply *rep;
    int argc = 0;
    cr_assert(argv && txt);
    argv[argc++] = "ZADD";
    argv[argc++] = "k";
    for (int i = 0; i < N; i++) {
        snprintf(txt[2 * i], sizeof txt[0], "%lld", exp);
        snprintf(txt[2 * i + 1], sizeof txt[0], "s:%030d", i);
        argv[argc++] = txt[2 * i];
        argv[argc++] = txt[2 * i + 1];
    }
    argv[argc++] = "+inf";
    argv[argc++] = MARKER;
    rep = redisCommandArgv(hlt_cli(R), argc, argv, NULL);
    cr_assert(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == N + 1);
    freeReplyObject(rep);
    freeReplyObject(hlt_cmd(R, "PEXPIRE k 60000"));
    assert_busy(c, "k", S);
    freeReplyObject(hlt_cmd(R, "ZREM k s:%030d", 0));
    l = must_rw(c, "k", S, 20000, 0);
    cr_assert_eq(hlt_zcard(R, "k"), N + 1);
    release_free(l);
    free(argv);
    free(txt);
    hilock_client_free(c);
}

/* A writer that polls (options.wake = 0) registers as a waiter all the same: new readers are
 * held off, and it gets the key once they leave. */
Test(rw, a_polling_writer_is_preferred_too)
{
    NEEDS_32();
    hilock_client *a = hlt_client_retry(R->url, 10), *b = hlt_client_retry(R->url, 10);
    hilock *s = must_rw(a, "k", S, 60000, 0);
    hlt_bg w = { .url = R->url, .key = "k", .mode = X, .ttl_ms = 20000, .wait_ms = 15000, .no_wake = 1 };
    hlt_bg_start(&w);
    cr_assert_eq(hlt_await_zcard(R, "{k}:wq", 1, 5000), 1, "a polling writer never registered in {k}:wq");
    assert_busy_says(b, "k", S, "k: held shared by 1 (a writer waits)", 0);
    release_free(s);
    cr_assert_eq(hlt_bg_join(&w, 10000), HILOCK_OK, "%s", w.err);
    assert_grant(R, w.l, X, 20000);
    hlt_bg_free(&w);
    hilock_client_free(a);
    hilock_client_free(b);
}

/* ---- fences ---- */

Test(rw, an_exclusive_fence_exceeds_every_earlier_fence)
{
    NEEDS_32();
    hilock_client *c[3] = { hlt_client_retry(R->url, 10), hlt_client_retry(R->url, 10), hlt_client_retry(R->url, 10) };
    hilock *l[3], *x, *s;
    uint64_t top = 0;
    for (int i = 0; i < 3; i++) {
        l[i] = must_rw(c[i], "k", S, 20000, 0);
        if (hilock_fence(l[i]) > top) top = hilock_fence(l[i]);
        cr_assert_gt(hilock_fence(l[i]), 0);
    }
    for (int i = 0; i < 3; i++) release_free(l[i]);
    x = must_rw(c[0], "k", X, 20000, 0);
    cr_assert_gt(hilock_fence(x), top, "exclusive %llu, earlier shared up to %llu",
                 (unsigned long long)hilock_fence(x), (unsigned long long)top);
    top = hilock_fence(x);
    release_free(x);
    s = must_rw(c[1], "k", S, 20000, 0);
    cr_assert_gt(hilock_fence(s), top);
    release_free(s);
    cr_assert_eq(hlt_exists(R, "{k}:fence"), 1, "the modern lock's counter");
    for (int i = 0; i < 3; i++) hilock_client_free(c[i]);
}

/* ---- the plain lock on the same key ---- */

Test(rw, a_plain_lock_is_busy_on_a_key_held_shared)
{
    NEEDS_32();
    hilock_client *a = hlt_client_retry(R->url, 10), *b = hlt_client_retry(R->url, 10);
    hilock *s = must_rw(a, "k", S, 20000, 0), *p;
    hlt_assert_unchanged_by(R, b, &(hlt_bg){ .key = "k", .plain = 1, .ttl_ms = 5000 }, HILOCK_BUSY, "k", 1);
    release_free(s);
    cr_assert_eq(hilock_acquire(b, "k", 5000, 0, &p), HILOCK_OK, "%s", hilock_client_errmsg(b));
    release_free(p);
    hilock_client_free(a);
    hilock_client_free(b);
}

/* A plain lock busy on a key held shared or exclusive says what holds it, and that those
 * holders renew (the key's PTTL is when it frees only if they stop): not "held by another
 * owner, expires in 29.7 s" (issue 36); nothing written. */
Test(rw, a_plain_lock_busy_on_grants_says_who_holds_it_and_that_they_renew)
{
    NEEDS_32();
    hilock_client *a = hlt_client_retry(R->url, 10), *b = hlt_client_retry(R->url, 10),
                  *p = hlt_client_retry(R->url, 10);
    hilock *s1 = must_rw(a, "k", S, 20000, 0), *s2 = must_rw(b, "k", S, 20000, 0), *x, *l = (hilock *)&l;
    cr_assert_eq(hilock_acquire(p, "k", 5000, 0, &l), HILOCK_BUSY, "%s", hilock_client_errmsg(p));
    cr_assert_null(l);
    cr_log_info("%s", hilock_client_errmsg(p));
    cr_assert(!strncmp(hilock_client_errmsg(p), "k: held shared by 2 readers, who renew their grants (the last expires "
                       "in ", 73) && strstr(hilock_client_errmsg(p), " unless renewed)"), "%s", hilock_client_errmsg(p));
    release_free(s2);
    cr_assert_eq(hilock_acquire(p, "k", 5000, 0, &l), HILOCK_BUSY);
    cr_assert(!strncmp(hilock_client_errmsg(p), "k: held shared by 1 reader, who renew", 37), "%s", hilock_client_errmsg(p));
    release_free(s1);
    x = must_rw(a, "k", X, 20000, 0);
    cr_assert_eq(hilock_acquire(p, "k", 5000, 0, &l), HILOCK_BUSY);
    cr_assert(!strncmp(hilock_client_errmsg(p), "k: held exclusive (a shared/exclusive lock's writer, who renews its "
                       "grant: it expires in ", 89), "%s", hilock_client_errmsg(p));
    cr_assert_eq(hlt_zcard(R, "k"), 2, "the exclusive grant and the marker, nothing of the plain lock");
    release_free(x);
    hilock_client_free(a);
    hilock_client_free(b);
    hilock_client_free(p);
}

Test(rw, shared_and_exclusive_are_busy_on_a_key_held_by_a_plain_lock)
{
    NEEDS_32();
    hilock_client *a = hlt_client_retry(R->url, 10), *b = hlt_client_retry(R->url, 10);
    hilock *p, *s;
    cr_assert_eq(hilock_acquire(a, "k", 20000, 0, &p), HILOCK_OK);
    assert_busy_says(b, "k", S, "k: held by another owner, expires in ", 1);
    assert_busy_says(b, "k", X, "k: held by another owner, expires in ", 1);
    cr_assert_eq(hilock_check(p), HILOCK_OK);
    release_free(p);
    s = must_rw(b, "k", S, 20000, 0);
    release_free(s);
    hilock_client_free(a);
    hilock_client_free(b);
}

/* A plain-lock writer waiting on a key held shared: no new shared grant, and the last
 * reader's release wakes it ({k}:signal, since it marked {k}:waiters). */
Test(rw, a_waiting_plain_lock_stops_new_readers_and_is_woken)
{
    NEEDS_32();
    hilock_client *a = hlt_client_retry(R->url, 10), *b = hlt_client_retry(R->url, 10);
    hilock *s = must_rw(a, "k", S, 60000, 0);
    hlt_bg w = { .url = R->url, .key = "k", .plain = 1, .ttl_ms = 20000, .wait_ms = 15000,
                 .retry_delay_ms = SLOW_POLL_MS };
    long long end, t_rel;
    hlt_bg_start(&w);
    end = hlt_now_ms() + 5000;
    while (!hlt_exists(R, "{k}:waiters") && hlt_now_ms() < end) hlt_sleep_ms(5);
    cr_assert_eq(hlt_exists(R, "{k}:waiters"), 1, "the plain waiter never marked {k}:waiters");
    assert_busy_says(b, "k", S, "k: held shared by 1 (a writer waits)", 0);
    hlt_sleep_ms(100);
    t_rel = hlt_now_ms();
    release_free(s);
    cr_assert_eq(hlt_bg_join(&w, 10000), HILOCK_OK, "%s", w.err);
    cr_log_info("reader's release -> plain writer granted: %lld ms", w.t_done - t_rel);
    cr_assert_lt(w.t_done - t_rel, WOKEN_MS, "granted %lld ms after the release: polled, not woken",
                 w.t_done - t_rel);
    {
        char *v = hlt_get(R, "k");
        cr_assert(v && !strcmp(v, hilock_token(w.l)), "k holds %s", v);
        free(v);
    }
    hlt_bg_free(&w);
    hilock_client_free(a);
    hilock_client_free(b);
}

/* options.wake = 0: the plain writer still marks the key once it knows readers hold it (its
 * mark is what holds new readers off), so a stream of readers cannot starve it. */
Test(rw, a_plain_writer_without_wake_up_still_stops_new_readers)
{
    NEEDS_32();
    hilock_client *a = hlt_client_retry(R->url, 10), *b = hlt_client_retry(R->url, 10);
    hilock *s = must_rw(a, "k", S, 60000, 0);
    hlt_bg w = { .url = R->url, .key = "k", .plain = 1, .ttl_ms = 20000, .wait_ms = 15000, .no_wake = 1 };
    long long end;
    hlt_bg_start(&w);
    end = hlt_now_ms() + 5000;
    while (!hlt_exists(R, "{k}:waiters") && hlt_now_ms() < end) hlt_sleep_ms(5);
    cr_assert_eq(hlt_exists(R, "{k}:waiters"), 1, "the plain waiter (wake = 0) never marked {k}:waiters");
    assert_busy_says(b, "k", S, "k: held shared by 1 (a writer waits)", 0);
    release_free(s);
    cr_assert_eq(hlt_bg_join(&w, 10000), HILOCK_OK, "%s", w.err);
    hlt_bg_free(&w);
    hilock_client_free(a);
    hilock_client_free(b);
}

/* A release leaves the key expiring with its latest remaining holder: a key that kept the
 * released holder's longer expiry would hold a plain lock off with nobody in it. */
Test(rw, a_release_leaves_the_key_expiring_with_its_latest_remaining_holder)
{
    NEEDS_32();
    hilock_client *a = hlt_client_retry(R->url, 10), *b = hlt_client_retry(R->url, 10), *p = hlt_client_retry(R->url, 10);
    hilock *long_one = must_rw(a, "k", S, 60000, 0), *short_one = must_rw(b, "k", S, 1500, 0), *pl = NULL;
    release_free(long_one);
    cr_assert_leq(hlt_pttl(R, "k"), 1500, "k lives %lld ms, past its last holder", hlt_pttl(R, "k"));
    hilock_free(short_one);   /* its holder died: the key goes with its permit */
    cr_assert_eq(hilock_acquire(p, "k", 5000, 5000, &pl), HILOCK_OK, "%s", hilock_client_errmsg(p));
    cr_assert_eq(hilock_release(pl), HILOCK_OK);
    hilock_free(pl);
    hilock_client_free(a);
    hilock_client_free(b);
    hilock_client_free(p);
}

/* The {k}:waiters marker a plain-lock writer leaves outlives its wait (it lapses on its own,
 * ~2 s later by default): once that writer has had its turn and released, no writer waits,
 * and a shared try-lock on the free key must be granted, not told "a writer waits". */
Test(rw, a_plain_writers_finished_turn_does_not_hold_readers_off)
{
    NEEDS_32();
    hilock_client *a = hlt_client_retry(R->url, 10), *b = hlt_client_retry(R->url, 10);
    hilock *s = must_rw(a, "k", S, 60000, 0), *n = NULL;
    hlt_bg w = { .url = R->url, .key = "k", .plain = 1, .ttl_ms = 20000, .wait_ms = 15000 };
    hilock_status st;
    long long end;
    hlt_bg_start(&w);
    end = hlt_now_ms() + 5000;
    while (!hlt_exists(R, "{k}:waiters") && hlt_now_ms() < end) hlt_sleep_ms(5);
    release_free(s);
    cr_assert_eq(hlt_bg_join(&w, 10000), HILOCK_OK, "%s", w.err);
    cr_assert_eq(hilock_release(w.l), HILOCK_OK);
    cr_assert_eq(hlt_exists(R, "k"), 0, "the key is free");
    /* its mark was cut to one pause (75 ms here) by its grant, not left for its whole life
     * (about 1.1 s): a reader waiting 500 ms gets in */
    cr_assert_leq(hlt_pttl(R, "{k}:waiters"), 76, "the writer's mark outlives its turn");
    st = hilock_rw_acquire(b, "k", S, 20000, 500, &n);
    cr_assert_eq(st, HILOCK_OK, "shared acquire on a free key after the plain writer's turn: %s (%s; "
                 "{k}:waiters pttl %lld)", hilock_strerror(st), hilock_client_errmsg(b), hlt_pttl(R, "{k}:waiters"));
    release_free(n);
    hlt_bg_free(&w);
    hilock_client_free(a);
    hilock_client_free(b);
}

/* A plain-lock writer that gives up behind a reader cuts its mark, as its grant would have:
 * new readers are not held off for the mark's whole life (poll_ms + io_timeout_ms: ~2 s) after
 * it left, and the reader already in keeps its grant (the command's `hilock -w 0.3 KEY`, then
 * `hilock -n --shared KEY`, said "a writer waits" for seconds). */
Test(rw, a_plain_writer_that_gives_up_behind_a_reader_lets_new_readers_in)
{
    NEEDS_32();
    hilock_client *a = hlt_client(R->url), *b = hlt_client(R->url), *w = hlt_client(R->url);
    hilock *s = must_rw(a, "gu", S, 60000, 0), *n = NULL, *l = NULL;
    hilock_status st;
    cr_assert_eq(hilock_acquire(w, "gu", 20000, 300, &l), HILOCK_BUSY, "%s", hilock_client_errmsg(w));
    cr_assert_null(l);
    cr_assert_leq(hlt_pttl(R, "{gu}:waiters"), 76, "the writer's mark outlives its wait: %lld ms",
                  hlt_pttl(R, "{gu}:waiters"));
    /* (the cut mark lives up to 76 ms more: a try once it is gone) */
    HLT_AWAIT(hlt_exists(R, "{gu}:waiters") == 0, 1000, "the cut mark never lapsed");
    st = hilock_rw_acquire(b, "gu", S, 20000, 0, &n);
    cr_assert_eq(st, HILOCK_OK, "a new reader after the writer gave up: %s (%s)", hilock_strerror(st),
                 hilock_client_errmsg(b));
    cr_assert_eq(hlt_zcard(R, "gu"), 3, "two readers (and the kind's marker)");
    release_free(n);
    release_free(s);
    cr_assert_eq(hlt_exists(R, "gu"), 0);
    hilock_client_free(a);
    hilock_client_free(b);
    hilock_client_free(w);
}

/* ---- refusals ---- */

static void assert_refused_kind(const char *key, const char *kind_named)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    for (int m = X; m <= S; m++)
        hlt_assert_unchanged_by(R, c, &(hlt_bg){ .key = key, .mode = (hilock_rw_mode)m, .ttl_ms = 5000 },
                                HILOCK_EREPLY, kind_named, 1);
    hilock_client_free(c);
}

Test(rw, a_semaphore_key_is_refused_naming_it)
{
    NEEDS_32();
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l;
    cr_assert_eq(hilock_sem_acquire(c, "k", 3, 20000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    assert_refused_kind("k", "k holds a semaphore, not a shared/exclusive lock");
    release_free(l);
    hilock_client_free(c);
}

Test(rw, a_hash_key_is_refused_naming_it)
{
    NEEDS_32();
    freeReplyObject(hlt_cmd(R, "HSET k f v"));
    assert_refused_kind("k", "k holds a hash");
}

/* Blocking and on the loop (tests/scenario.h): each bad argument is EINVAL at once, in the
 * same words both ways, and writes nothing (on the loop the _async call refuses it, its done
 * never runs). What each form has of its own is refused too: blocking, a NULL out and a NULL
 * client; on the loop, a NULL client, a NULL done, a client not attached, and the blocking call
 * on an attached client. */
HLT_SCENARIO(rw, bad_modes_and_arguments_are_einval_and_write_nothing)
{
    const char *url = R->url;
    hilock_options o = hlt_options(&url, 1);
    hlt_run *r;
    hilock *l = (hilock *)&l;
    const int bad[] = { 2, -1, 99 };
    o.retry_delay_ms = 10;
    r = hlt_run_new(&o, mode);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char want[64];
        cr_assert_eq(hlt_run_rw_acquire(r, "k", (hilock_rw_mode)bad[i], 5000, 0, &l), HILOCK_EINVAL, "mode %d",
                     bad[i]);
        cr_assert_null(l);
        snprintf(want, sizeof want, "mode must be HILOCK_EXCLUSIVE or HILOCK_SHARED (got %d)", bad[i]);
        cr_assert_str_eq(hlt_run_errmsg(r), want);
    }
    cr_assert_eq(hlt_run_rw_acquire(r, NULL, S, 5000, 0, &l), HILOCK_EINVAL);
    cr_assert_eq(hlt_run_rw_acquire(r, "", S, 5000, 0, &l), HILOCK_EINVAL);
    cr_assert_eq(hlt_run_rw_acquire(r, "k", S, 0, 0, &l), HILOCK_EINVAL);
    cr_assert(strstr(hlt_run_errmsg(r), "ttl_ms"), "%s", hlt_run_errmsg(r));
    cr_assert_eq(hlt_run_rw_acquire(r, "k", X, 5000, -2, &l), HILOCK_EINVAL);
    cr_assert_null(l);
    if (mode == HLT_BLOCKING) {
        l = (hilock *)&l;
        cr_assert_eq(hilock_rw_acquire(hlt_run_client(r), "k", 2, 5000, 0, &l), HILOCK_EINVAL);
        cr_assert_null(l);
        cr_assert_eq(hilock_rw_acquire(hlt_run_client(r), "k", S, 5000, 0, NULL), HILOCK_EINVAL);
        cr_assert_eq(hilock_rw_acquire(NULL, "k", S, 5000, 0, &l), HILOCK_EINVAL);
    } else {
        hilock_client *c = hlt_run_client(r), *plain = hlt_client_new(&o);   /* not attached */
        cr_assert_eq(hilock_rw_acquire_async(NULL, "k", S, 5000, 0, hlt_never_done, NULL), HILOCK_EINVAL);
        cr_assert_eq(hilock_rw_acquire_async(c, "k", S, 5000, 0, NULL, NULL), HILOCK_EINVAL);
        cr_assert(strstr(hilock_client_errmsg(c), "done"), "%s", hilock_client_errmsg(c));
        cr_assert_eq(hilock_rw_acquire_async(plain, "k", S, 5000, 0, hlt_never_done, NULL), HILOCK_EINVAL);
        cr_assert(strstr(hilock_client_errmsg(plain), "not attached"), "%s", hilock_client_errmsg(plain));
        l = (hilock *)&l;
        cr_assert_eq(hilock_rw_acquire(c, "k", S, 5000, 0, &l), HILOCK_EINVAL);
        cr_assert(strstr(hilock_client_errmsg(c), "event loop"), "%s", hilock_client_errmsg(c));
        cr_assert_null(l);
        hlt_run_sleep(r, 10);   /* a few loop passes: a done of a refused call would have run */
        cr_assert_eq(hlt_never_ran(), 0, "done ran for a refused call");
        hilock_client_free(plain);
    }
    cr_assert_null(l);
    cr_assert_eq(hlt_dbsize(R), 0, "a refused call wrote something");
    hlt_run_free(r);
}

/* Blocking and on the loop (tests/scenario.h): a fair client's shared/exclusive lock is EINVAL
 * at once with the reason, in the same words both ways; nothing written. */
HLT_SCENARIO(rw, fair_is_refused_with_the_reason)
{
    const char *url = R->url;
    hilock_options o = hlt_options(&url, 1);
    hilock *l = (hilock *)&l;
    hlt_run *r;
    o.retry_delay_ms = 10;
    o.fair = 1;
    r = hlt_run_new(&o, mode);
    cr_assert_eq(hlt_run_rw_acquire(r, "k", S, 5000, 0, &l), HILOCK_EINVAL, "%s", hlt_run_errmsg(r));
    cr_assert_null(l);
    cr_assert_str_eq(hlt_run_errmsg(r),
                     "a shared/exclusive lock cannot be fair: it serves a waiting writer before new readers "
                     "instead; take grants with fair off");
    cr_assert_eq(hlt_dbsize(R), 0);
    hlt_run_free(r);
}

Test(rw, is_not_reentrant)
{
    NEEDS_32();
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_rw(c, "k", S, 20000, 0), *m = (hilock *)&m;
    const char *msg = "this client already holds k (hilock locks are not re-entrant)";
    cr_assert_eq(hilock_rw_acquire(c, "k", S, 5000, 0, &m), HILOCK_EINVAL);
    cr_assert_str_eq(hilock_client_errmsg(c), msg);
    cr_assert_null(m);
    cr_assert_eq(hilock_rw_acquire(c, "k", X, 5000, 0, &m), HILOCK_EINVAL);
    cr_assert_str_eq(hilock_client_errmsg(c), msg);
    cr_assert_eq(hilock_acquire(c, "k", 5000, 0, &m), HILOCK_EINVAL);
    cr_assert_str_eq(hilock_client_errmsg(c), msg);
    cr_assert_eq(hlt_zcard(R, "k"), 2);
    release_free(l);
    l = must_rw(c, "k", X, 20000, 0);
    release_free(l);
    hilock_client_free(c);
}

/* Blocking and on the loop (tests/scenario.h): a server before 3.2 cannot run the lock's
 * script: EINVAL in either mode, naming the server's version (on the loop the call is accepted
 * -- the version is known once connected -- and ends so in done), the same words both ways;
 * nothing written. */
HLT_SCENARIO(rw, is_einval_on_a_server_older_than_3_2)
{
    const char *url = R->url;
    hilock_options o = hlt_options(&url, 1);
    hlt_run *r;
    char want[160];
    if (hlt_server_version() >= 30200 || hlt_server_version() == 0)
        cr_skip_test("n/a on %s: it runs the shared/exclusive lock", hlt_server_name());
    snprintf(want, sizeof want, "semaphores and shared/exclusive locks need Redis >= 3.2: 127.0.0.1:%d runs %s",
             R->port, hlt_server_name());
    o.retry_delay_ms = 10;
    r = hlt_run_new(&o, mode);
    for (int m = X; m <= S; m++) {
        hilock *l = (hilock *)&l;
        cr_assert_eq(hlt_run_rw_acquire(r, "k", (hilock_rw_mode)m, 5000, 0, &l), HILOCK_EINVAL, "%s: %s",
                     mode_name((hilock_rw_mode)m), hlt_run_errmsg(r));
        cr_assert_null(l);
        cr_assert_str_eq(hlt_run_errmsg(r), want);
        cr_assert_eq(hlt_dbsize(R), 0);
    }
    hlt_run_free(r);
}

/* ---- a grant as a lock ---- */

/* Blocking and on the loop (tests/scenario.h): a shared grant is a lock as any other --
 * extended (the key's expiry follows), checked, kept alive past 3 x its ttl -- and the key,
 * asked as a semaphore, is refused naming its kind in the blocking call's words, unchanged. */
HLT_SCENARIO(rw, extend_check_keepalive_and_accessors_work_on_a_grant)
{
    NEEDS_32();
    hilock_options o = hlt_options((const char *const[]){ R->unix_url }, 1);
    hlt_run *a = hlt_run_new(&o, mode), *b = hlt_run_peer(a);   /* (b: a key a holds) */
    hilock_client *plain = hlt_client(R->unix_url);
    hilock *s, *m = NULL;
    long long pttl;
    int lost_n = 0;
    char want[256];
    cr_assert_eq(hlt_run_rw_acquire(a, "jobs:{t}:db", S, 300, 0, &s), HILOCK_OK, "%s", hlt_run_errmsg(a));
    cr_assert_str_eq(hilock_key(s), "jobs:{t}:db");
    cr_assert_eq(hlt_exists(R, "jobs:{t}:db:holders"), 1, "aux keys join the key's hash tag");
    cr_assert_eq(hlt_run_extend(a, s, 30000), HILOCK_OK, "%s", hlt_run_errmsg(a));
    assert_grant(R, s, S, 30000);
    cr_assert_gt(hilock_validity_ms(s), 20000);
    cr_assert_eq(hlt_run_extend(a, s, 1000), HILOCK_OK, "%s", hlt_run_errmsg(a));
    pttl = hlt_pttl(R, "jobs:{t}:db");
    cr_assert(pttl > 0 && pttl <= 1000, "PTTL %lld after an extend to 1 s", pttl);
    cr_assert_eq(hlt_run_check(a, s), HILOCK_OK, "%s", hlt_run_errmsg(a));
    cr_assert_eq(hlt_run_keepalive(a, s, hlt_count_lost, &lost_n, NULL), HILOCK_OK, "%s", hlt_run_errmsg(a));
    hlt_run_sleep(a, 3000);   /* 3 x ttl: renewals every third of it (a ttl of 300 ms had
                               * only 200 ms of slack for a starved thread on a loaded machine) */
    cr_assert_eq(hlt_lost_count(&lost_n), 0);
    cr_assert_eq(hlt_run_check(a, s), HILOCK_OK, "%s", hlt_run_errmsg(a));
    cr_assert(hlt_zscore(R, "jobs:{t}:db", hilock_token(s), &(double){ 0 }), "not kept for 3 x ttl");
    cr_assert_gt(hilock_validity_ms(s), 0);
    /* the key asked as the other kind: the blocking call's EREPLY, in its words */
    cr_assert_eq(hilock_sem_acquire(plain, "jobs:{t}:db", 2, 1000, 0, &m), HILOCK_EREPLY);
    snprintf(want, sizeof want, "%s", hilock_client_errmsg(plain));
    cr_assert(strstr(want, "jobs:{t}:db holds a shared/exclusive lock"), "%s", want);
    cr_assert_eq(hlt_run_sem_acquire(b, "jobs:{t}:db", 2, 1000, 0, &m), HILOCK_EREPLY);
    cr_assert_null(m);
    cr_assert_str_eq(hlt_run_errmsg(b), want);
    cr_assert_eq(hlt_zcard(R, "jobs:{t}:db"), 2, "the refused call wrote");
    cr_assert_eq(hlt_run_release(a, s), HILOCK_OK, "%s", hlt_run_errmsg(a));
    cr_assert_eq(hlt_exists(R, "jobs:{t}:db"), 0);
    hilock_free(s);
    hilock_client_free(plain);
    hlt_run_free(b);
    hlt_run_free(a);
}

Test(rw, check_and_extend_of_a_vanished_grant_are_not_held)
{
    NEEDS_32();
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *x = must_rw(c, "k", X, 20000, 0);
    freeReplyObject(hlt_cmd(R, "ZREM k %s", hilock_token(x)));
    cr_assert_eq(hilock_check(x), HILOCK_NOT_HELD);
    cr_assert_eq(hilock_extend(x, 20000), HILOCK_NOT_HELD);
    cr_assert_eq(hlt_zscore(R, "k", hilock_token(x), &(double){ 0 }), 0, "extend must not re-add it");
    cr_assert_eq(hilock_release(x), HILOCK_NOT_HELD);
    hilock_free(x);
    hilock_client_free(c);
}

Test(rw, free_without_release_leaves_the_member_until_its_ttl)
{
    NEEDS_32();
    hilock_client *a = hlt_client_retry(R->url, 10), *b = hlt_client_retry(R->url, 10);
    hilock *x = must_rw(a, "k", X, 700, 0);
    char token[64];
    long long t0 = hlt_now_ms();
    snprintf(token, sizeof token, "%s", hilock_token(x));
    hilock_free(x);
    cr_assert_eq(hlt_zscore(R, "k", token, &(double){ 0 }), 1, "freeing is not releasing");
    assert_busy(b, "k", S);
    x = must_rw(b, "k", S, 20000, 10000);
    cr_assert_lt(hlt_now_ms() - t0, 5000);
    cr_assert_eq(hlt_zscore(R, "k", token, &(double){ 0 }), 0, "the dead grant is pruned");
    release_free(x);
    hilock_client_free(a);
    hilock_client_free(b);
}

/* ---- Redlock: three direct masters ---- */

/* Blocking and on the loop (tests/scenario.h): over three masters (Redlock: allowed,
 * docs/rwlock.md) two shared grants -- asked side by side (on the loop: in flight together on
 * one client) -- hold on every master; an exclusive try beside them is BUSY and leaves no member
 * anywhere; once they are released (the key gone everywhere) it is granted on every master, a
 * shared try is then BUSY, and its release leaves nothing. */
HLT_SCENARIO(rw, over_three_masters_exclusive_and_shared_exclude_each_other)
{
    NEEDS_32();
    hlt_redis *m[3] = { R, hlt_redis_start(NULL), hlt_redis_start(NULL) };
    const char *urls[3];
    hlt_run *a, *b, *d;
    hilock *s1, *s2, *x;
    cr_assert(m[1] && m[2]);
    for (int i = 0; i < 3; i++) urls[i] = m[i]->url;
    hilock_options o = hlt_options(urls, 3);
    o.retry_delay_ms = 10;
    a = hlt_run_new(&o, mode);
    b = hlt_run_new(&o, mode);
    d = hlt_run_peer(a);
    hlt_run_begin_rw_acquire(a, "k", S, 20000, 0);
    cr_assert_eq(hlt_run_rw_acquire(d, "k", S, 20000, 0, &s2), HILOCK_OK, "%s", hlt_run_errmsg(d));
    cr_assert_eq(hlt_run_end(a, 20000, &s1), HILOCK_OK, "%s", hlt_run_errmsg(a));
    for (int i = 0; i < 3; i++) assert_grant(m[i], s1, S, 20000), assert_grant(m[i], s2, S, 20000);
    x = (hilock *)&x;
    cr_assert_eq(hlt_run_rw_acquire(b, "k", X, 20000, 0, &x), HILOCK_BUSY, "%s", hlt_run_errmsg(b));
    cr_assert_null(x);
    for (int i = 0; i < 3; i++) cr_assert_eq(hlt_zcard(m[i], "k"), 3, "master %d: the busy try wrote", i);
    cr_assert_eq(hlt_run_release(a, s1), HILOCK_OK, "%s", hlt_run_errmsg(a));
    cr_assert_eq(hlt_run_release(d, s2), HILOCK_OK, "%s", hlt_run_errmsg(d));
    for (int i = 0; i < 3; i++) cr_assert_eq(hlt_exists(m[i], "k"), 0, "master %d", i);
    cr_assert_eq(hlt_run_rw_acquire(b, "k", X, 20000, 0, &x), HILOCK_OK, "%s", hlt_run_errmsg(b));
    for (int i = 0; i < 3; i++) assert_grant(m[i], x, X, 20000);
    hilock *s3 = (hilock *)&s3;
    cr_assert_eq(hlt_run_rw_acquire(a, "k", S, 20000, 0, &s3), HILOCK_BUSY, "%s", hlt_run_errmsg(a));
    cr_assert_null(s3);
    for (int i = 0; i < 3; i++) cr_assert_eq(hlt_zcard(m[i], "k"), 2, "master %d: the writer alone", i);
    cr_assert_eq(hlt_run_release(b, x), HILOCK_OK, "%s", hlt_run_errmsg(b));
    for (int i = 0; i < 3; i++) cr_assert_eq(hlt_exists(m[i], "k"), 0, "master %d: left after the release", i);
    hilock_free(s1);
    hilock_free(s2);
    hilock_free(x);
    hlt_run_free(d);
    hlt_run_free(b);
    hlt_run_free(a);
    hlt_redis_stop(m[1]);
    hlt_redis_stop(m[2]);
}

/* Redlock: a writer waiting on three masters holds new readers off there too, and the last
 * reader's release (signalled by every master) wakes it. */
Test(rw, over_three_masters_a_waiting_writer_stops_readers_and_is_woken)
{
    NEEDS_32();
    hlt_redis *m[3] = { R, hlt_redis_start(NULL), hlt_redis_start(NULL) };
    const char *urls[3];
    hilock_client *a, *b;
    hilock *s;
    hlt_bg w = { .urls = urls, .nurls = 3, .key = "k", .mode = X, .ttl_ms = 20000, .wait_ms = 15000,
                 .retry_delay_ms = SLOW_POLL_MS };
    long long t_rel;
    cr_assert(m[1] && m[2]);
    for (int i = 0; i < 3; i++) urls[i] = m[i]->url;
    hilock_options o = hlt_options(urls, 3);
    o.retry_delay_ms = 10;
    a = hlt_client_new(&o);
    b = hlt_client_new(&o);
    s = must_rw(a, "k", S, 60000, 0);
    hlt_bg_start(&w);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(hlt_await_zcard(m[i], "{k}:wq", 1, 5000), 1, "master %d: the writer never registered", i);
    {
        hilock *n = (hilock *)&n;
        cr_assert_eq(hilock_rw_acquire(b, "k", S, 20000, 0, &n), HILOCK_BUSY, "%s", hilock_client_errmsg(b));
        cr_assert_null(n);
    }
    hlt_sleep_ms(100);
    t_rel = hlt_now_ms();
    release_free(s);
    cr_assert_eq(hlt_bg_join(&w, 10000), HILOCK_OK, "%s", w.err);
    cr_log_info("Redlock: last reader's release -> writer granted: %lld ms", w.t_done - t_rel);
    cr_assert_lt(w.t_done - t_rel, WOKEN_MS, "granted %lld ms after the release: polled, not woken",
                 w.t_done - t_rel);
    for (int i = 0; i < 3; i++) assert_grant(m[i], w.l, X, 20000);
    hlt_bg_free(&w);
    hilock_client_free(a);
    hilock_client_free(b);
    hlt_redis_stop(m[1]);
    hlt_redis_stop(m[2]);
}

/* options.fair is hilock_acquire too: on a key held shared it is BUSY, as the default lock. */
/* The fair lock's queue knows nothing of readers (a fair writer would not hold new readers
 * off): it refuses an rw key, naming it, as it refuses a semaphore's (hilock.h). */
Test(rw, a_fair_plain_lock_refuses_a_key_held_shared_naming_it)
{
    NEEDS_32();
    const char *url = R->url;
    hilock_options o = hlt_options(&url, 1);
    o.retry_delay_ms = 10;
    o.fair = 1;
    hilock_client *a = hlt_client_retry(R->url, 10), *f = hlt_client_new(&o);
    hilock *s = must_rw(a, "k", S, 20000, 0);
    hlt_assert_unchanged_by(R, f, &(hlt_bg){ .key = "k", .plain = 1, .ttl_ms = 5000 }, HILOCK_EREPLY,
                            "WRONGTYPE: k holds a shared/exclusive lock, not a lock", 1);
    release_free(s);
    hilock_client_free(a);
    hilock_client_free(f);
}

/* ---- Sentinel ---- */

static hlt_sentinel *SF;

static void sentinel_fini(void)
{
    hlt_sentinel_stop(SF);
    SF = NULL;
}

/* The recipe of the sentinel suite for a lost write: cut replication, grant, freeze the
 * master, let the Sentinels promote the replica, thaw: check and release say LOST. */
Test(rw, a_failover_after_a_shared_grant_makes_check_and_release_lost, .fini = sentinel_fini, .timeout = 60)
{
    HLT_NEEDS(40000, "Sentinel needs replication ids (PSYNC2, Redis 4.0+)");
    hilock_client *c;
    hilock *s;
    SF = hlt_sentinel_start();
    cr_assert_not_null(SF, "sentinel fixture did not start");
    hilock_options o = hlt_options((const char *const[]){ SF->url }, 1);
    o.retry_delay_ms = 10;
    c = hlt_client_new(&o);
    cr_assert_eq(hlt_sentinel_cut(SF, 1), 0, "could not cut replication");
    s = must_rw(c, "k", S, 5000, 0);
    assert_grant(SF->data[0], s, S, 5000);
    hlt_sleep_ms(200);
    cr_assert_eq(hlt_data_exists(SF, 1, "k"), 0, "the grant reached the replica: not a lost write");
    hlt_sentinel_freeze(SF, 0);
    cr_assert_eq(hlt_sentinel_wait_switch(SF, 1, 20000), 0, "no failover");
    hlt_sentinel_thaw(SF, 0);
    cr_assert_eq(hilock_check(s), HILOCK_LOST, "%s", hilock_client_errmsg(c));
    cr_assert(strstr(hilock_client_errmsg(c), "no proof the lock survived"), "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_validity_ms(s), 0);
    cr_assert_eq(hilock_release(s), HILOCK_LOST, "%s", hilock_client_errmsg(c));
    hilock_free(s);
    hilock_client_free(c);
}

/* The read-back connection of r anew (a failover's role change closes the old one: a write
 * on it would raise SIGPIPE). */
static void fresh_cli(hlt_redis *r)
{
    if (r->cli) redisFree(r->cli);
    r->cli = NULL;
}

/* A clean failover (SENTINEL failover, the grant replicated): the new master proves the
 * grants survived (failover.lua on a sorted set): check, extend and release work there. */
Test(rw, grants_survive_a_clean_failover, .fini = sentinel_fini, .timeout = 60)
{
    HLT_NEEDS(40000, "Sentinel needs replication ids (PSYNC2, Redis 4.0+)");
    hilock_client *c, *d;
    hilock *s, *x = (hilock *)&x;
    long long end;
    double score;
    SF = hlt_sentinel_start();
    cr_assert_not_null(SF, "sentinel fixture did not start");
    hilock_options o = hlt_options((const char *const[]){ SF->url }, 1);
    o.retry_delay_ms = 10;
    c = hlt_client_new(&o);
    d = hlt_client_new(&o);
    s = must_rw(c, "k", S, 30000, 0);
    end = hlt_now_ms() + 3000;
    while (!hlt_zscore(SF->data[1], "k", hilock_token(s), &score) && hlt_now_ms() < end) hlt_sleep_ms(10);
    cr_assert(hlt_zscore(SF->data[1], "k", hilock_token(s), &score), "the replica never got the grant");
    cr_assert_eq(hlt_sentinel_failover(SF, 0), 0, "failover did not complete");
    fresh_cli(SF->data[1]);
    cr_assert_eq(hilock_check(s), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_rw_acquire(d, "k", X, 30000, 0, &x), HILOCK_BUSY, "%s", hilock_client_errmsg(d));
    cr_assert_null(x);
    cr_assert_eq(hilock_extend(s, 30000), HILOCK_OK, "%s", hilock_client_errmsg(c));
    assert_grant(SF->data[1], s, S, 30000);
    cr_assert_eq(hilock_release(s), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_exists(SF->data[1], "k"), 0);
    hilock_free(s);
    hilock_client_free(c);
    hilock_client_free(d);
}
