/* SPDX-License-Identifier: BSD-3-Clause */
/* test_sentinel.c -- locks behind Sentinel: resolution, failovers, lost locks, the failover
 * guard, WAIT, fencing across failovers. Real redis-server and redis-sentinel processes:
 * every test starts its own master + replica + 3 Sentinels (sentinel_fixture.h, ~0.5 s),
 * so no test sees another's failover; the fixture is stopped in .fini even when an assertion
 * fails, and its processes die with the test process if it crashes.
 *
 * Failovers are deterministic: SENTINEL failover (clean), or, for a lost lock, the recipe of
 * docs/failover-facts.md ("The test beds"): cut replication, acquire, freeze the master, wait for the
 * Sentinels to promote the replica. Timing asserts are generous upper bounds only. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clients.h"
#include "hilock.h"
#include "hilock_observe.h"
#include "scenario.h"
#include "sentinel_fixture.h"

static hlt_sentinel *F;

static void fini(void)
{
    hlt_sentinel_stop(F);
    F = NULL;
}

TestSuite(sentinel, .fini = fini, .timeout = 120);

static hlt_sentinel *fx(void)
{
    F = hlt_sentinel_start();
    cr_assert_not_null(F, "sentinel fixture did not start");
    return F;
}

#define assert_msg(c, text)                                                                    \
    cr_assert(strstr(hilock_client_errmsg(c), (text)), "errmsg '%s' does not say '%s'",        \
              hilock_client_errmsg(c), (text))

#define assert_run_msg(r, text)                                                                \
    cr_assert(strstr(hlt_run_errmsg(r), (text)), "errmsg '%s' does not say '%s'",              \
              hlt_run_errmsg(r), (text))

/* data[i] holds `key` with our token (polled: replication is asynchronous). */
static int holds_within(int i, const char *key, const char *token, long ms)
{
    return hlt_data_holds_within(F, i, key, token, ms);
}

static long long data_pttl(int i, const char *key)
{
    redisReply *r = hlt_data_cmd(F, i, "PTTL %s", key);
    long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -99;
    if (r) freeReplyObject(r);
    return v;
}

static void report(const char *what)
{
    fprintf(stderr, "[timing] %s: promoted %lld ms, all Sentinels switched %lld ms, old master "
            "demoted %lld ms\n", what, F->t_promoted, F->t_switched, F->t_demoted);
}

/* ---- failovers ---- */

/* Blocking and on the loop (tests/scenario.h): the holder's connection still reaches the
 * old master after the failover (it answers ROLE master for ~2 s more); the check asks a
 * Sentinel first, moves to the new master and proves survival. The Sentinel asked first is
 * frozen meanwhile: the check waits out its 300 ms (on the loop, whose own timer keeps
 * ticking) and asks the next. */
HLT_SCENARIO(sentinel, clean_failover_keeps_the_lock_and_blocks_others)
{
    hilock_options o;
    hlt_run *a, *b;
    hilock *l, *l2 = NULL;
    fx();
    o = hlt_options((const char *const[]){ F->url }, 1);
    a = hlt_run_new(&o, mode);
    cr_assert_eq(hlt_run_acquire(a, "job", 30000, 0, &l), HILOCK_OK, "%s", hlt_run_errmsg(a));
    cr_assert_eq(hlt_sentinel_master(F), 0);
    cr_assert(holds_within(1, "job", hilock_token(l), 3000), "the replica never got the lock");

    cr_assert_eq(hlt_sentinel_failover(F, 0), 0, "failover did not complete");
    report("SENTINEL failover");
    kill(F->spid[0], SIGSTOP);
    hlt_run_stall_reset(a);
    cr_assert_eq(hlt_run_check(a, l), HILOCK_OK, "%s", hlt_run_errmsg(a));
    kill(F->spid[0], SIGCONT);
    hlt_run_assert_no_stall(a, 250, 50, "sentinel: check after a failover, first Sentinel frozen");
    cr_assert(holds_within(1, "job", hilock_token(l), 0));

    b = hlt_run_new(&o, mode);
    cr_assert_eq(hlt_run_acquire(b, "job", 30000, 0, &l2), HILOCK_BUSY, "%s", hlt_run_errmsg(b));
    cr_assert_null(l2);
    cr_assert_eq(hlt_run_extend(a, l, 30000), HILOCK_OK, "%s", hlt_run_errmsg(a));
    cr_assert_gt(data_pttl(1, "job"), 25000);
    cr_assert_eq(hlt_run_release(a, l), HILOCK_OK, "%s", hlt_run_errmsg(a));
    cr_assert_eq(hlt_data_exists(F, 1, "job"), 0, "the new master still holds the key");
    /* the key is free, but the new master still guards (it cannot know nothing was lost) */
    cr_assert_eq(hlt_run_acquire(b, "job", 30000, 0, &l2), HILOCK_BUSY);
    assert_run_msg(b, "failover guard");
    cr_assert_eq(hlt_data_exists(F, 1, "job"), 0);
    hilock_free(l);
    hlt_run_free(a);
    hlt_run_free(b);
}

/* Blocking and on the loop: the grant never reached the replica, the master froze and the
 * replica took over; the old master thaws with the key, but check, extend and release report
 * LOST (the loop not stalled meanwhile); a new client is refused by the guard until the lost
 * lock's ttl ran out, then granted a larger fence. */
HLT_SCENARIO(sentinel, lost_lock_is_lost_and_guarded_and_fenced)
{
    const int64_t ttl = 5000;
    hilock_options o;
    hlt_run *a, *b;
    hilock *l, *l2 = NULL;
    long long t_acq, t_ok = 0, end;
    hilock_status st;
    uint64_t f1;
    hilock_stats s;
    fx();
    o = hlt_options((const char *const[]){ F->url }, 1);
    a = hlt_run_new(&o, mode);
    cr_assert_eq(hlt_sentinel_cut(F, 1), 0, "could not cut replication");
    cr_assert_eq(hlt_run_acquire(a, "res", ttl, 0, &l), HILOCK_OK, "%s", hlt_run_errmsg(a));
    t_acq = hlt_now_ms();
    f1 = hilock_fence(l);
    hlt_sleep_ms(200);   /* (time for a write that should not replicate to do so) */
    cr_assert_eq(hlt_data_exists(F, 1, "res"), 0, "the lock reached the replica: not a lost write");

    hlt_sentinel_freeze(F, 0);
    cr_assert_eq(hlt_sentinel_wait_switch(F, 1, 20000), 0, "no failover");
    report("frozen master");
    hlt_sentinel_thaw(F, 0);   /* and it still believes it is the master, with our key */

    hlt_run_stall_reset(a);
    cr_assert_eq(hlt_run_check(a, l), HILOCK_LOST, "%s", hlt_run_errmsg(a));
    assert_run_msg(a, "no proof the lock survived");
    hlt_run_assert_no_stall(a, 250, 0, "sentinel: check of a lost lock");
    cr_assert_eq(hlt_run_extend(a, l, ttl), HILOCK_LOST, "%s", hlt_run_errmsg(a));
    cr_assert_eq(hilock_validity_ms(l), 0);
    cr_assert_eq(hlt_run_release(a, l), HILOCK_LOST, "%s", hlt_run_errmsg(a));
    cr_assert_eq(hlt_data_exists(F, 1, "res"), 0, "the new master has the key");
    cr_assert_eq(hilock_client_stats(hlt_run_client(a), &s), HILOCK_OK);
    cr_assert_eq(s.failovers, 1, "one failover, not one per call that saw it (%llu)",
                 (unsigned long long)s.failovers);
    cr_assert_eq(s.lost, 1, "one lock lost once (%llu)", (unsigned long long)s.lost);

    /* a client that starts after the failover: the new master lacks the key, yet refuses */
    b = hlt_run_new(&o, mode);
    cr_assert_eq(hlt_run_acquire(b, "res", ttl, 0, &l2), HILOCK_BUSY, "%s", hlt_run_errmsg(b));
    assert_run_msg(b, "failover guard");
    cr_assert_eq(hlt_data_exists(F, 1, "res"), 0);
    end = hlt_now_ms() + 3 * ttl;
    while ((st = hlt_run_acquire(b, "res", ttl, 0, &l2)) == HILOCK_BUSY && hlt_now_ms() < end)
        hlt_run_sleep(b, 50);
    t_ok = hlt_now_ms();
    cr_assert_eq(st, HILOCK_OK, "%s", hlt_run_errmsg(b));
    fprintf(stderr, "[timing] lost lock (%s): second holder after %lld ms (ttl %lld)\n",
            hlt_run_mode_name(b), t_ok - t_acq, (long long)ttl);
    /* nobody held it again before the lost lock's ttl ran out */
    cr_assert_geq(t_ok - t_acq, ttl);
    cr_assert(holds_within(1, "res", hilock_token(l2), 0));
    /* fencing: the new master's counter went back, the config-epoch went up */
    cr_assert_gt(hilock_fence(l2), f1, "fence %llu after %llu", (unsigned long long)hilock_fence(l2),
                 (unsigned long long)f1);
    cr_assert_gt(hilock_fence(l2) >> 42, f1 >> 42);   /* +1 per failover (more after a split vote) */
    cr_assert_eq(hlt_run_release(b, l2), HILOCK_OK, "%s", hlt_run_errmsg(b));
    hilock_free(l);
    hilock_free(l2);
    hlt_run_free(a);
    hlt_run_free(b);
}

/* Blocking and on the loop: a waiting acquire rides out the frozen master (timeouts,
 * resolving again, the ROLE check) and is granted on the master the Sentinels promote, within
 * its bound (and the loop's own timer keeps ticking). */
HLT_SCENARIO(sentinel, acquire_while_the_master_is_frozen_is_bounded_then_succeeds)
{
    hilock_options o;
    hlt_run *a;
    hilock *l = NULL;
    long long t0, took;
    hilock_status st;
    fx();
    o = hlt_options((const char *const[]){ F->url }, 1);
    a = hlt_run_new(&o, mode);
    cr_assert_eq(hlt_run_acquire(a, "warm", 1000, 0, &l), HILOCK_OK, "%s", hlt_run_errmsg(a));
    cr_assert_eq(hlt_run_release(a, l), HILOCK_OK, "%s", hlt_run_errmsg(a));
    hilock_free(l);
    l = NULL;
    /* the warm-up's record (longest ttl: 1 s) reaches the replica */
    cr_assert_eq(hlt_sentinel_wait_synced(F, 1, 5000), 0, "the replica never caught up");

    hlt_sentinel_freeze(F, 0);
    hlt_run_stall_reset(a);
    t0 = hlt_now_ms();
    st = hlt_run_acquire(a, "during", 1000, 25000, &l);   /* (a split vote delays a failover 10 s) */
    took = hlt_now_ms() - t0;
    fprintf(stderr, "[timing] acquire across a failover (frozen master, %s): %s after %lld ms\n",
            hlt_run_mode_name(a), hilock_strerror(st), took);
    hlt_sentinel_thaw(F, 0);
    cr_assert_lt(took, 25000 + 1000 + 1000 + 3000, "acquire took %lld ms", took);
    cr_assert_eq(st, HILOCK_OK, "%s", hlt_run_errmsg(a));
    hlt_run_assert_no_stall(a, 250, 0, "sentinel: acquire across a failover (frozen master)");
    cr_assert_eq(hlt_sentinel_wait_switch(F, 1, 5000), 0);
    cr_assert(holds_within(1, "during", hilock_token(l), 0), "not granted on the new master");
    cr_assert_eq(hlt_run_release(a, l), HILOCK_OK, "%s", hlt_run_errmsg(a));
    hilock_free(l);
    hlt_run_free(a);
}

/* A check (or extend) on the new master anchors the lock there, so a second failover is
 * judged against it: replid2 only reaches back one failover. */
Test(sentinel, a_lock_checked_between_two_failovers_survives_both)
{
    hilock_client *c;
    hilock *l;
    fx();
    c = hlt_client(F->url);
    cr_assert_eq(hilock_acquire(c, "twice", 60000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert(holds_within(1, "twice", hilock_token(l), 3000));
    cr_assert_eq(hlt_sentinel_failover(F, 1), 0, "first failover");
    report("SENTINEL failover, waiting for the demotion");
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert(holds_within(0, "twice", hilock_token(l), 3000), "the demoted master did not resync");
    cr_assert_eq(hlt_sentinel_failover(F, 0), 0, "second failover");
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_data_exists(F, 0, "twice"), 0);
    hilock_free(l);
    hilock_client_free(c);
}

/* Close the connections of data node i's clients other than the Sentinels' (and the
 * fixture's own): how many. */
static int kill_data_clients(int i)
{
    /* (TYPE arrived in 5.0: before, replica, master and pubsub links are told by their flags) */
    redisReply *r = hlt_data_cmd(F, i, hlt_server_version() >= 50000 ? "CLIENT LIST TYPE normal" : "CLIENT LIST");
    int n = 0;
    for (const char *p = r && r->type == REDIS_REPLY_STRING ? r->str : ""; *p;) {
        const char *e = strchr(p, '\n'), *nm = strstr(p, " name="), *fl = strstr(p, " flags=");
        long long id = atoll(p + 3);   /* "id=N ..." */
        if (!e) e = p + strlen(p);
        if (fl && fl < e && strcspn(fl + 7, "SMP ") < strcspn(fl + 7, " ")) {
            p = *e ? e + 1 : e;   /* a replica, master or pubsub link, not a normal client */
            continue;
        }
        if (!strncmp(p, "id=", 3) && !(nm && nm < e && !strncmp(nm + 6, "sentinel", 8)) &&
            !(strstr(p, " cmd=client") && strstr(p, " cmd=client") < e)) {
            redisReply *k = hlt_data_cmd(F, i, "CLIENT KILL ID %lld", id);
            n += k && k->type == REDIS_REPLY_INTEGER ? (int)k->integer : 0;
            if (k) freeReplyObject(k);
        }
        p = *e ? e + 1 : e;
    }
    if (r) freeReplyObject(r);
    return n;
}

/* "Did the master move?" takes part of the call's bound, not a connect timeout of its own:
 * with every Sentinel frozen and the data connection closed by the server, an extend asks
 * the Sentinels (nobody answers), then must resolve again to reconnect (nobody answers).
 * (The Sentinels stay frozen for less than their down-after, 1 s: no failover follows.) */
Test(sentinel, did_the_master_move_with_frozen_sentinels_stays_within_the_bound)
{
    hilock_options o;
    hilock_client *c = NULL;
    hilock *l;
    long long t0, dt;
    hilock_status st;
    const int io_ms = 100, connect_ms = 600, bound_ms = io_ms + connect_ms;
    fx();
    o = hlt_options((const char *[]){F->url}, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    o.io_timeout_ms = io_ms;
    o.connect_timeout_ms = connect_ms;
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "k", 30000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(kill_data_clients(0), 1, "the client's connection was not found");
    for (int k = 0; k < HLT_NSENTINELS; k++) kill(F->spid[k], SIGSTOP);
    hlt_sleep_ms(150);   /* past the 100 ms in which a Sentinel's last answer is reused */
    t0 = hlt_now_ms();
    st = hilock_extend(l, 30000);
    dt = hlt_now_ms() - t0;
    for (int k = 0; k < HLT_NSENTINELS; k++) kill(F->spid[k], SIGCONT);
    fprintf(stderr, "[timing] extend, Sentinels frozen, connection closed: %s after %lld ms "
            "(bound %d ms)\n", hilock_strerror(st), dt, bound_ms);
    cr_assert(st == HILOCK_EIO || st == HILOCK_ETIMEDOUT, "%s: %s", hilock_strerror(st),
              hilock_client_errmsg(c));
    cr_assert_lt(dt, bound_ms + 300, "extend took %lld ms, bound %d ms", dt, bound_ms);
    cr_assert_gt(hilock_validity_ms(l), 0, "an unanswered question is no loss");
    /* the Sentinels answer again: the lock is still ours on the same master */
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_data_exists(F, 0, "k"), 0);
    hilock_free(l);
    hilock_client_free(c);
}

/* Acquire in a loop while a manual failover runs (the old master stays up, answering ROLE
 * master and taking writes until it is demoted): every call returns within its bound, and
 * a lock that later checks OK really is on the new master. */
Test(sentinel, acquires_racing_a_failover_never_check_ok_wrongly)
{
    hilock_client *c;
    hilock *locks[200];
    int n = 0, ok = 0, lost = 0, errs = 0;
    long long end;
    redisReply *r;
    fx();
    hilock_options o = hlt_options((const char *[]){ F->url }, 1);
    o.failover_guard = 0;
    c = hlt_client_new(&o);   /* guard off: the checks alone must be right */
    r = hlt_sentinel_cmd(F, 0, "SENTINEL failover %s", F->name);
    cr_assert(r && r->type == REDIS_REPLY_STATUS, "SENTINEL failover: %s", r ? r->str : "no reply");
    freeReplyObject(r);
    end = hlt_now_ms() + 4000;
    while (hlt_now_ms() < end && n < 200) {
        char key[32];
        hilock *l = NULL;
        long long t0 = hlt_now_ms();
        hilock_status st;
        snprintf(key, sizeof key, "race%d", n);
        st = hilock_acquire(c, key, 60000, 1000, &l);
        cr_assert_lt(hlt_now_ms() - t0, 1000 + 1000 + 1000 + 2000);
        if (st == HILOCK_OK) locks[n++] = l;
        else if (st == HILOCK_EIO || st == HILOCK_ETIMEDOUT) errs++;
        else cr_assert_fail("acquire: %s (%s)", hilock_strerror(st), hilock_client_errmsg(c));
        hlt_sleep_ms(20);
    }
    cr_assert_eq(hlt_sentinel_wait_switch(F, 1, 5000), 0);
    cr_assert_eq(hlt_sentinel_wait_replica(F, 0, 20000), 0, "old master not demoted");
    for (int i = 0; i < n; i++) {
        hilock_status st = hilock_check(locks[i]);
        char key[32];
        snprintf(key, sizeof key, "race%d", i);
        if (st == HILOCK_OK) {
            ok++;
            cr_assert(holds_within(1, key, hilock_token(locks[i]), 0), "%s checked OK but is not on "
                      "the new master", key);
        } else {
            cr_assert(st == HILOCK_LOST || st == HILOCK_NOT_HELD, "check %s: %s (%s)", key,
                      hilock_strerror(st), hilock_client_errmsg(c));
            lost++;
        }
        hilock_free(locks[i]);
    }
    fprintf(stderr, "[count] racing a failover: %d granted (%d survived, %d lost), %d errors\n",
            n, ok, lost, errs);
    cr_assert_gt(ok, 0);
    hilock_client_free(c);
}

/* ---- WAIT ---- */

/* Blocking and on the loop (tests/scenario.h): min_replicas with the replica cut off is
 * EREPLICAS saying so, the grant undone (with a wait too: not retried); the master asked by
 * its own address (a direct URL) is EREPLICAS and undone alike. Healed, the grant is on the
 * replica; cut again, an extend is EREPLICAS and the old validity stands; the release deletes
 * the key. */
HLT_SCENARIO(sentinel, min_replicas_with_replication_cut_is_ereplicas_and_leaves_no_key)
{
    hilock *l = NULL;
    hlt_run *r, *d;
    const char *url[1], *direct[1];
    hilock_options o;
    fx();
    url[0] = F->url;
    o = hlt_options(url, 1);
    o.min_replicas = 1;
    r = hlt_run_new(&o, mode);
    direct[0] = F->data[0]->url;
    o = hlt_options(direct, 1);
    o.min_replicas = 1;
    o.replicas_timeout_ms = 50;
    d = hlt_run_new(&o, mode);
    cr_assert_eq(hlt_sentinel_cut(F, 1), 0);
    cr_assert_eq(hlt_run_acquire(r, "mr", 5000, 0, &l), HILOCK_EREPLICAS, "%s", hlt_run_errmsg(r));
    cr_assert_null(l);
    assert_run_msg(r, "0 of 1 replicas");
    cr_assert_eq(hlt_data_exists(F, 0, "mr"), 0);
    /* with a wait: not retried (a missing replica is not a busy lock) */
    cr_assert_eq(hlt_run_acquire(r, "mr", 5000, 2000, &l), HILOCK_EREPLICAS, "%s", hlt_run_errmsg(r));
    cr_assert_eq(hlt_data_exists(F, 0, "mr"), 0);
    cr_assert_eq(hlt_run_acquire(d, "wr", 30000, 0, &l), HILOCK_EREPLICAS, "%s", hlt_run_errmsg(d));
    cr_assert_null(l);
    cr_assert_eq(hlt_data_exists(F, 0, "wr"), 0, "the direct grant was not undone");

    cr_assert_eq(hlt_sentinel_heal(F, 1), 0);
    cr_assert_eq(hlt_sentinel_wait_replica(F, 1, 10000), 0);
    cr_assert_eq(hlt_run_acquire(r, "mr", 5000, 0, &l), HILOCK_OK, "%s", hlt_run_errmsg(r));
    cr_assert(holds_within(1, "mr", hilock_token(l), 0), "WAIT said 1, the replica lacks it");
    /* extend with the replica gone again: EREPLICAS, the old validity stands */
    cr_assert_eq(hlt_sentinel_cut(F, 1), 0);
    cr_assert_eq(hlt_run_extend(r, l, 60000), HILOCK_EREPLICAS, "%s", hlt_run_errmsg(r));
    cr_assert_leq(hilock_validity_ms(l), 5000);
    cr_assert_gt(hilock_validity_ms(l), 0);
    cr_assert_eq(hlt_run_release(r, l), HILOCK_OK, "%s", hlt_run_errmsg(r));
    cr_assert_eq(hlt_data_exists(F, 0, "mr"), 0);
    hilock_free(l);
    hlt_run_free(d);
    hlt_run_free(r);
}

/* ---- resolution ---- */

Test(sentinel, dead_sentinels_first_in_the_list_are_skipped)
{
    char url[600];
    hilock_client *c;
    hilock *l;
    long long t0;
    fx();
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d#%s",
             hlt_dead_port(), hlt_dead_port(), F->sport[2], F->name);
    c = hlt_client(url);
    t0 = hlt_now_ms();
    cr_assert_eq(hilock_acquire(c, "skip", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_lt(hlt_now_ms() - t0, 3000);
    cr_assert(holds_within(0, "skip", hilock_token(l), 0));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    hilock_client_free(c);
}

Test(sentinel, wrong_master_name_is_einval_at_once)
{
    char url[600];
    hilock_client *c;
    hilock *l = (hilock *)&l;
    long long t0;
    fx();
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d#nosuchmaster",
             F->sport[0], F->sport[1]);
    c = hlt_client(url);
    t0 = hlt_now_ms();
    cr_assert_eq(hilock_acquire(c, "k", 5000, 3000, &l), HILOCK_EINVAL, "%s", hilock_client_errmsg(c));
    cr_assert_lt(hlt_now_ms() - t0, 1500, "a wrong name is not worth waiting for");
    cr_assert_null(l);
    assert_msg(c, "nosuchmaster");
    assert_msg(c, "knows this master name");
    cr_assert_eq(hlt_data_exists(F, 0, "k"), 0);
    hilock_client_free(c);
}

Test(sentinel, all_sentinels_down_is_eio_within_the_bound)
{
    char url[300], port[16];
    hilock_client *c;
    hilock *l = (hilock *)&l;
    long long t0;
    int p = hlt_dead_port();
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d#m", p,
             hlt_dead_port(), hlt_dead_port());
    snprintf(port, sizeof port, "%d", p);
    c = hlt_client(url);
    t0 = hlt_now_ms();
    cr_assert_eq(hilock_acquire(c, "k", 5000, 0, &l), HILOCK_EIO);
    cr_assert_lt(hlt_now_ms() - t0, 1500);
    cr_assert_null(l);
    assert_msg(c, "no Sentinel answered");
    assert_msg(c, port);
    assert_msg(c, "refused");
    t0 = hlt_now_ms();
    cr_assert_eq(hilock_acquire(c, "k", 5000, 500, &l), HILOCK_EIO);   /* retried, then EIO */
    cr_assert_lt(hlt_now_ms() - t0, 500 + 1000 + 1000 + 1000);
    hilock_client_free(c);
}

Test(sentinel, an_address_that_is_a_replica_fails_the_role_check)
{
    char url[300];
    hilock_client *c;
    hilock *l = (hilock *)&l;
    redisReply *r;
    fx();
    /* a Sentinel told to monitor the replica as a master names it (ROLE says slave) */
    r = hlt_sentinel_cmd(F, 0, "SENTINEL MONITOR fake 127.0.0.1 %d 2", F->data[1]->port);
    cr_assert(r && r->type == REDIS_REPLY_STATUS, "SENTINEL MONITOR: %s", r ? r->str : "no reply");
    freeReplyObject(r);
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d#fake", F->sport[0]);
    c = hlt_client(url);
    cr_assert_eq(hilock_acquire(c, "k", 5000, 0, &l), HILOCK_EIO, "%s", hilock_client_errmsg(c));
    cr_assert_null(l);
    assert_msg(c, "ROLE is 'slave'");
    cr_assert_eq(hlt_data_exists(F, 1, "k"), 0);
    cr_assert_eq(hlt_data_exists(F, 0, "k"), 0);
    hilock_client_free(c);
}

Test(sentinel, the_url_password_is_for_the_data_nodes)
{
    char url[600], *sent;
    hilock_client *c;
    hilock *l = NULL;
    F = hlt_sentinel_start_auth("s3cret");
    cr_assert_not_null(F);
    sent = strstr(F->url, "://") + 3;
    snprintf(url, sizeof url, "redis-sentinel://:s3cret@%s", sent);
    c = hlt_client(url);
    cr_assert_eq(hilock_acquire(c, "pw", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert(holds_within(0, "pw", hilock_token(l), 0));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    hilock_client_free(c);
    c = hlt_client(F->url);   /* no password: the Sentinels answer, the master refuses */
    cr_assert_eq(hilock_acquire(c, "pw", 5000, 0, &l), HILOCK_EAUTH, "%s", hilock_client_errmsg(c));
    hilock_client_free(c);
    snprintf(url, sizeof url, "redis-sentinel://:wrong@%s", sent);
    c = hlt_client(url);
    cr_assert_eq(hilock_acquire(c, "pw", 5000, 0, &l), HILOCK_EAUTH, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_data_exists(F, 0, "pw"), 0);
    hilock_client_free(c);
}

/* The Sentinels' own password (requirepass on each Sentinel) comes from the URL's query; the
 * user info stays the data nodes'. The two differ here, so neither can stand in for the other. */
Test(sentinel, a_sentinel_password_in_the_query_authenticates_to_the_sentinels)
{
    char url[700], *sent, *hash;
    hilock_client *c;
    hilock *l = NULL;
    HLT_NEEDS(50001, "a Sentinel has no password of its own before Redis 5.0.1");
    F = hlt_sentinel_start_opts("dAtaPw", "sEntPw");
    cr_assert_not_null(F, "sentinel fixture did not start");
    sent = strstr(F->url, "://") + 3;
    snprintf(url, sizeof url, "redis-sentinel://:dAtaPw@%s", sent);
    c = hlt_client(url);
    cr_assert_eq(hilock_acquire(c, "spw", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert(holds_within(0, "spw", hilock_token(l), 0));
    hlt_sleep_ms(150);   /* older than 100 ms: check and release ask a Sentinel again */
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_data_exists(F, 0, "spw"), 0);
    hilock_free(l);
    hilock_client_free(c);
    /* with the ACL user named too (Sentinel's default user; Sentinel knows ACL users from 6.2:
     * before, AUTH takes only a password) */
    if (hlt_server_version() < 60200) return;
    hash = strchr(sent, '#');
    snprintf(url, sizeof url, "redis-sentinel://:dAtaPw@%.*s?sentinel_username=default&"
             "sentinel_password=sEntPw%s", (int)(strchr(sent, '?') - sent), sent, hash);
    c = hlt_client(url);
    cr_assert_eq(hilock_acquire(c, "spw", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    hilock_client_free(c);
}

Test(sentinel, a_missing_or_wrong_sentinel_password_is_eauth_naming_the_sentinel)
{
    char url[700], *sent, port[40];
    const char *q[] = { "", "?sentinel_password=Wr0ngPw" }, *why[] = { "NOAUTH", hlt_server_version() >= 60000 ? "WRONGPASS" : "invalid password" };
    HLT_NEEDS(50001, "a Sentinel has no password of its own before Redis 5.0.1");
    F = hlt_sentinel_start_opts("dAtaPw", "sEntPw");
    cr_assert_not_null(F, "sentinel fixture did not start");
    sent = strstr(F->url, "://") + 3;
    snprintf(port, sizeof port, "sentinel 127.0.0.1:%d", F->sport[0]);
    for (int i = 0; i < 2; i++) {
        hilock_client *c;
        hilock *l = (hilock *)&l;
        long long t0;
        snprintf(url, sizeof url, "redis-sentinel://:dAtaPw@%.*s%s%s", (int)(strchr(sent, '?') - sent),
                 sent, q[i], strchr(sent, '#'));
        c = hlt_client(url);
        t0 = hlt_now_ms();
        cr_assert_eq(hilock_acquire(c, "spw", 5000, 0, &l), HILOCK_EAUTH, "%s: %s", q[i],
                     hilock_client_errmsg(c));
        cr_assert_lt(hlt_now_ms() - t0, 1500);
        cr_assert_null(l);
        assert_msg(c, port);
        assert_msg(c, why[i]);
        cr_assert_null(strstr(hilock_client_errmsg(c), "Pw"), "echoes a password: %s",
                       hilock_client_errmsg(c));
        t0 = hlt_now_ms();   /* waiting does not help, and ends within its bound */
        cr_assert_eq(hilock_acquire(c, "spw", 5000, 500, &l), HILOCK_EAUTH, "%s", hilock_client_errmsg(c));
        cr_assert_lt(hlt_now_ms() - t0, 500 + 1500);
        cr_assert_eq(hlt_data_exists(F, 0, "spw"), 0);
        hilock_client_free(c);
    }
}

/* ---- the same checks without Sentinel (failover_guard = 1 on plain URLs) ---- */

TestSuite(guard, .timeout = 60);

static int guard_field(hlt_redis *r, const char *field, long long *v)
{
    redisReply *x = hlt_cmd(r, "HGET hilock:guard %s", field);
    int ok = x && x->type == REDIS_REPLY_STRING;
    if (ok) *v = atoll(x->str);
    if (x) freeReplyObject(x);
    return ok;
}

/* REPLICAOF NO ONE by hand: the promoted replica guards for the longest ttl that was granted
 * on its master (replicated in hilock:guard), not just the requester's shorter one. */
Test(guard, a_promoted_replica_guards_for_the_longest_replicated_ttl)
{
    char extra[128];
    hlt_redis *a = hlt_redis_start("--repl-diskless-sync-delay 0"), *b;
    hilock_client *ca, *cb;
    hilock *l = NULL;
    long long maxttl = 0, since = 0, until = 0, t0, end;
    redisReply *r;
    hilock_status st;
    cr_assert_not_null(a);
    snprintf(extra, sizeof extra, "--repl-diskless-sync-delay 0 --replicaof 127.0.0.1 %d", a->port);
    b = hlt_redis_start(extra);
    cr_assert_not_null(b);
    hilock_options o = hlt_options((const char *[]){ a->url }, 1);
    o.failover_guard = 1;
    o.min_replicas = 1;
    ca = hlt_client_new(&o);   /* WAIT 1: the grant and its record are on b */
    end = hlt_now_ms() + 10000;
    while ((st = hilock_acquire(ca, "long", 3000, 0, &l)) == HILOCK_EREPLICAS && hlt_now_ms() < end)
        hlt_sleep_ms(50);   /* until b has synced */
    cr_assert_eq(st, HILOCK_OK, "%s", hilock_client_errmsg(ca));
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    cr_assert(guard_field(b, "maxttl", &maxttl) && maxttl == 3000, "maxttl %lld on the replica", maxttl);
    /* a fresh master is not guarded */
    cr_assert(guard_field(a, "until", &until) && until == 0);

    r = hlt_cmd(b, "%s NO ONE", hlt_replicaof());
    cr_assert(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    hilock_options o2 = hlt_options((const char *[]){ b->url }, 1);
    o2.failover_guard = 1;
    cb = hlt_client_new(&o2);
    t0 = hlt_now_ms();
    cr_assert_eq(hilock_acquire(cb, "short", 1000, 0, &l), HILOCK_BUSY, "%s", hilock_client_errmsg(cb));
    assert_msg(cb, "failover guard");
    cr_assert_eq(hlt_exists(b, "short"), 0);
    cr_assert(guard_field(b, "since", &since) && guard_field(b, "until", &until));
    cr_assert_eq(until - since, 3000, "guard of %lld ms", until - since);
    cr_assert_eq(hilock_acquire(cb, "short", 1000, 6000, &l), HILOCK_OK, "%s", hilock_client_errmsg(cb));
    cr_assert_geq(hlt_now_ms() - t0, 2500);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(ca);
    hilock_client_free(cb);
    hlt_redis_stop(b);
    hlt_redis_stop(a);
}

/* the server's clock in ms (the record's times are the server's TIME) */
static long long server_ms(hlt_redis *r)
{
    redisReply *x = hlt_cmd(r, "TIME");
    long long v;
    cr_assert(x && x->type == REDIS_REPLY_ARRAY && x->elements == 2);
    v = atoll(x->element[0]->str) * 1000 + atoll(x->element[1]->str) / 1000;
    freeReplyObject(x);
    return v;
}

static void set_record(hlt_redis *r, const char *field, long long v)
{
    redisReply *x = hlt_cmd(r, "HSET hilock:guard %s %lld", field, v);
    cr_assert(x && x->type == REDIS_REPLY_INTEGER, "HSET %s", field);
    freeReplyObject(x);
}

/* The identity read is plain INFO replication + HMGET of the record in the lock's own
 * pipeline; failover.lua runs only where those cannot settle a call: the record's first
 * call, a ttl above maxttl, a guard that may run. Each case, and that a steady client sends
 * no script but the lock's own. */
Test(guard, steady_calls_run_no_failover_script_and_the_record_still_rules)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c;
    hilock *l;
    long long v = 0, evals;
    cr_assert_not_null(r);
    hilock_options o = hlt_options((const char *[]){ r->url }, 1);
    o.failover_guard = 1;
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "steady", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    cr_assert(guard_field(r, "maxttl", &v) && v == 5000, "maxttl %lld", v);   /* the first call's script */
    evals = hlt_info_int(r, "commandstats", "cmdstat_evalsha:calls=");
    for (int i = 0; i < 20; i++) {   /* same ttl, same history: acquire.lua + release.lua only */
        cr_assert_eq(hilock_acquire(c, "steady", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
        cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
        hilock_free(l);
    }
    cr_assert_eq(hlt_info_int(r, "commandstats", "cmdstat_evalsha:calls=") - evals, 40, "%lld scripts for 20 cycles",
                 hlt_info_int(r, "commandstats", "cmdstat_evalsha:calls=") - evals);
    /* a longer ttl than the record knows: the script raises maxttl */
    cr_assert_eq(hilock_acquire(c, "steady", 8000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert(guard_field(r, "maxttl", &v) && v == 8000, "maxttl %lld", v);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    /* a guard on the record (as a failover starts it): the fast path must not skip it */
    set_record(r, "until", server_ms(r) + 60000);
    cr_assert_eq(hilock_acquire(c, "steady", 5000, 0, &l), HILOCK_BUSY, "%s", hilock_client_errmsg(c));
    assert_msg(c, "failover guard");
    cr_assert_eq(hlt_exists(r, "steady"), 0);
    /* a guard that has passed: granted, and the record reads 0 again (no script next time) */
    set_record(r, "until", server_ms(r) - 1000);
    cr_assert_eq(hilock_acquire(c, "steady", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert(guard_field(r, "until", &v) && v == 0, "until %lld", v);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    /* a record of another history (as replicated from a predecessor): the script starts it
     * again for this one (a master never promoted: no guard) */
    {
        redisReply *x = hlt_cmd(r, "HSET hilock:guard replid %s", "0123456789012345678901234567890123456789");
        cr_assert_not_null(x);
        freeReplyObject(x);
    }
    cr_assert_eq(hilock_acquire(c, "steady", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    {
        redisReply *a = hlt_cmd(r, "HGET hilock:guard replid"), *b = hlt_cmd(r, "INFO replication");
        cr_assert(a && a->type == REDIS_REPLY_STRING && b && b->str && strstr(b->str, a->str),
                  "the record's replid is not the master's");
        freeReplyObject(a);
        freeReplyObject(b);
    }
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* failover.lua itself, as the slow path runs it a round trip after the grant: a grant made
 * while the guard ran is undone even when the guard has passed by the time the script runs
 * (the grant's time is read from its key's ttl). */
Test(guard, a_grant_made_during_the_guard_is_undone_even_if_the_guard_has_passed_since)
{
    hlt_redis *r = hlt_redis_start(NULL);
    FILE *fp = fopen("src/lua/failover.lua", "r");
    char body[8192], replid[41];
    size_t n;
    redisReply *x;
    long long now;
    const char *p = NULL;
    cr_assert_not_null(r);
    cr_assert_not_null(fp, "run from the repository's root");
    n = fread(body, 1, sizeof body - 1, fp);
    fclose(fp);
    body[n] = '\0';
    x = hlt_cmd(r, "INFO replication");
    cr_assert(x && x->str && (p = strstr(x->str, "master_replid:")));
    memcpy(replid, p + 14, 40);
    replid[40] = '\0';
    freeReplyObject(x);
    now = server_ms(r);
    /* granted 3 s ago with a 10 s ttl; the record's guard ended 1 s ago */
    x = hlt_cmd(r, "SET k tok PX 7000");
    freeReplyObject(x);
    x = hlt_cmd(r, "HSET hilock:guard replid %s maxttl 0 until %lld", replid, now - 1000);
    freeReplyObject(x);
    x = hlt_cmd(r, "EVAL %s 2 hilock:guard k acquire tok 10000 0 1 0", body);
    cr_assert(x && x->type == REDIS_REPLY_ARRAY && x->elements == 6, "%s", x && x->str ? x->str : "?");
    cr_assert_geq(x->element[5]->integer, 1, "the grant was kept");
    freeReplyObject(x);
    cr_assert_eq(hlt_exists(r, "k"), 0);
    /* the same grant made after the guard: kept, and the record reads no guard again */
    x = hlt_cmd(r, "SET k tok PX 10000");
    freeReplyObject(x);
    x = hlt_cmd(r, "HSET hilock:guard until %lld", now - 1000);
    freeReplyObject(x);
    x = hlt_cmd(r, "EVAL %s 2 hilock:guard k acquire tok 10000 0 1 0", body);
    cr_assert(x && x->type == REDIS_REPLY_ARRAY && x->elements == 6);
    cr_assert_eq(x->element[5]->integer, 0);
    freeReplyObject(x);
    cr_assert_eq(hlt_exists(r, "k"), 1);
    cr_assert(guard_field(r, "until", &now) && now == 0);
    hlt_redis_stop(r);
}

/* Blocking and on the loop (tests/scenario.h): a direct master restarted (no persistence: a
 * new history). With failover_guard on, its grant cannot be vouched for: check is LOST saying
 * the master changed, and the lock's validity is 0; without, the key is simply gone: NOT_HELD. */
HLT_SCENARIO(guard, a_restarted_master_is_lost_with_identity_on_and_not_held_without)
{
    HLT_NEEDS(40000, "failover_guard needs replication ids (PSYNC2, Redis 4.0+)");
    hlt_redis *r = hlt_redis_start(NULL);
    const char *url[1];
    hlt_run *on, *off;
    hilock *l1, *l2;
    cr_assert_not_null(r);
    url[0] = r->url;
    hilock_options o = hlt_options(url, 1);
    o.failover_guard = 1;
    on = hlt_run_new(&o, mode);
    o.failover_guard = 0;
    off = hlt_run_new(&o, mode);
    cr_assert_eq(hlt_run_acquire(on, "a", 30000, 0, &l1), HILOCK_OK, "%s", hlt_run_errmsg(on));
    cr_assert_eq(hlt_run_acquire(off, "b", 30000, 0, &l2), HILOCK_OK, "%s", hlt_run_errmsg(off));
    cr_assert_eq(hlt_redis_restart(r), 0);
    /* idle connections are probed, and reopened, before use once idle 250 ms (the library's
     * STALE_AFTER_US); on the loop it runs meanwhile and sees the old connections close */
    hlt_run_sleep(on, 300);
    cr_assert_eq(hlt_run_check(on, l1), HILOCK_LOST, "%s", hlt_run_errmsg(on));
    assert_run_msg(on, "the master changed");
    cr_assert_eq(hilock_validity_ms(l1), 0);
    cr_assert_eq(hlt_run_check(off, l2), HILOCK_NOT_HELD, "%s", hlt_run_errmsg(off));
    hilock_free(l1);
    hilock_free(l2);
    hlt_run_free(off);
    hlt_run_free(on);
    hlt_redis_stop(r);
}

Test(guard, plain_urls_by_default_send_and_write_nothing_more)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c;
    hilock *l;
    cr_assert_not_null(r);
    cr_assert_eq(hilock_client_open(r->url, &c), HILOCK_OK);
    cr_assert_eq(hilock_acquire(c, "plain", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    cr_assert_eq(hlt_exists(r, "hilock:guard"), 0);
    cr_assert_eq(hlt_dbsize(r), 2);   /* the fence counter and the holder record only */
    cr_assert_eq(hlt_exists(r, "{plain}:holder"), 1);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* ---- the fixture itself ---- */

static int dead(pid_t pid)
{
    char path[64], buf[256];
    FILE *f;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (!(f = fopen(path, "r"))) return 1;
    buf[0] = '\0';
    if (!fgets(buf, sizeof buf, f)) buf[0] = '\0';
    fclose(f);
    return strstr(buf, ") Z ") != NULL || strstr(buf, ") X ") != NULL;   /* zombie: gone */
}

typedef struct started {
    pid_t pid[5];
    char  dir[3][128];
} started;

Test(sentinel, fixture_processes_die_with_a_crashed_test)
{
    int fds[2];
    pid_t child, *pids;
    started s;
    char cmd[512];
    long long end;
    cr_assert_eq(pipe(fds), 0);
    child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {   /* a "test" that starts a fixture and crashes */
        hlt_sentinel *f = hlt_sentinel_start();
        started p;
        memset(&p, 0, sizeof p);
        if (f) {
            p.pid[0] = f->data[0]->pid;
            p.pid[1] = f->data[1]->pid;
            for (int k = 0; k < 3; k++) p.pid[2 + k] = f->spid[k];
            snprintf(p.dir[0], sizeof p.dir[0], "%s", f->dir);
            snprintf(p.dir[1], sizeof p.dir[1], "%s", f->data[0]->dir);
            snprintf(p.dir[2], sizeof p.dir[2], "%s", f->data[1]->dir);
        }
        if (write(fds[1], &p, sizeof p) != (ssize_t)sizeof p) _exit(2);
        kill(getpid(), SIGKILL);   /* a crash, without a core file */
        _exit(3);
    }
    close(fds[1]);
    cr_assert_eq(read(fds[0], &s, sizeof s), (ssize_t)sizeof s);
    close(fds[0]);
    waitpid(child, NULL, 0);
    pids = s.pid;
    /* what a crash cannot clean: the temp dirs (removed here, once the processes are gone) */
    snprintf(cmd, sizeof cmd, "sleep 0.5; rm -rf '%s' '%s' '%s'", s.dir[0], s.dir[1], s.dir[2]);
    for (int i = 0; i < 5; i++) cr_assert_gt(pids[i], 0, "the child's fixture did not start");
    end = hlt_now_ms() + 5000;
    for (int i = 0; i < 5; i++) {
        while (!dead(pids[i]) && hlt_now_ms() < end) hlt_sleep_ms(20);
        cr_assert(dead(pids[i]), "process %d outlived the crashed test", (int)pids[i]);
    }
    cr_assert_eq(system(cmd), 0);
}
