/* SPDX-License-Identifier: BSD-3-Clause */
/* test_async_cluster.c -- redis-cluster:// on an event loop (libuv, one thread): routing per
 * key to its shard's master, a slot moved under load (ASK, MOVED, a map fetched again on the
 * loop), calls across shards in flight at once, the client freed mid-flight (a frozen shard:
 * test_cluster.c's scenario, blocking and on the loop).
 *
 * One real cluster (3 masters + 3 replicas, cluster_fixture.h) serves the suite, as in
 * test_cluster.c; tests that break it run alone (hlt_cluster_exclusive) and leave it healthy.
 * Timing asserts are generous upper bounds only; the loop-stall figures are printed. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "cluster_fixture.h"
#include "clients.h"
#include "fixture.h"
#include "loop_run.h"
#include "hilock_libuv.h"
#include "scenario.h"

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
    (void)set;
    if (hlt_cluster_share() < 0) fprintf(stderr, "test_async_cluster: the cluster fixture did not start\n");
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
    (void)stats;
    hlt_cluster_unshare();
}

HLT_CLUSTER_SHARED_SUITE(async_cluster)

/* A key named prefix<N> whose slot is served by master m (from index *from on). */
static void key_on(hlt_cluster *f, int m, const char *prefix, int *from, char *buf, size_t cap)
{
    cr_assert_eq(hlt_cluster_key_on(f, m, prefix, from, buf, cap), 0, "no key on master %d", m);
}

static void masters(hlt_cluster *f, int m[3])
{
    cr_assert_eq(hlt_cluster_masters(f, m), 3, "the cluster has not 3 masters");
}

static void heal(hlt_cluster *f)
{
    for (int i = 0; i < HLT_CLUSTER_NODES; i++) {
        redisReply *r = hlt_cluster_cmd(f, i, "PING");
        if (!r) cr_assert_eq(hlt_cluster_restart(f, i), 0, "node %d did not restart", i);
        else freeReplyObject(r);
        hlt_cluster_heal(f, i);
    }
    cr_assert_eq(hlt_cluster_heal_all(f, 30000), 0, "the cluster did not heal");
}

/* ---- calls and their results ---- */

#define N_MAX 100

typedef struct run {
    hilock_client *c;
    int            ended[N_MAX], done, wrong;
    hilock_status  st[N_MAX];
    hilock        *lock[N_MAX];
    char           err[N_MAX][160];
    int            shard[N_MAX];   /* master index of the key */
    char           key[N_MAX][48];
    int            again;          /* extend each lock again as it ends (while 1) */
    long           extends, failed;
} run;

typedef struct ctx { run *r; int i; } ctx;
static ctx ctxs[N_MAX];

static void *arg_of(run *r, int i)
{
    ctxs[i].r = r;
    ctxs[i].i = i;
    return &ctxs[i];
}

static void on_done(hilock_status st, hilock *l, void *arg)
{
    ctx *x = arg;
    run *r = x->r;
    if (r->ended[x->i]) r->wrong++;
    r->ended[x->i]++;
    r->st[x->i] = st;
    snprintf(r->err[x->i], sizeof r->err[x->i], "%s", hilock_client_errmsg(r->c));
    if (l && !r->lock[x->i]) r->lock[x->i] = l;
    r->done++;
}

static void on_extended(hilock_status st, hilock *l, void *arg)
{
    ctx *x = arg;
    run *r = x->r;
    r->extends++;
    if (st != HILOCK_OK) {
        r->failed++;
        snprintf(r->err[x->i], sizeof r->err[x->i], "%s", hilock_client_errmsg(r->c));
    }
    if (r->again && st == HILOCK_OK && hilock_extend_async(l, 10000, on_extended, arg) == HILOCK_OK) return;
    r->ended[x->i]++;
    r->done++;
}

static void reset(run *r)
{
    memset(r->ended, 0, sizeof r->ended);
    memset(r->st, 0, sizeof r->st);
    r->done = 0;
}

/* Clients here: hlt_options's with each test's io timeout, attached to its loop, and
 * failover_guard 0 (off, as test_cluster.c does where a failover or a resharding must not
 * slow or fail the next calls) unless a test keeps the default, -1 (on for a cluster). */

/* n keys, spread over the three masters in turn (r->shard, r->key). */
static void keys_across(hlt_cluster *f, run *r, int n, const char *prefix)
{
    int m[3], from[3] = {0, 0, 0};
    masters(f, m);
    for (int i = 0; i < n; i++) {
        r->shard[i] = m[i % 3];
        key_on(f, m[i % 3], prefix, &from[i % 3], r->key[i], sizeof r->key[i]);
    }
}

static void acquire_keys(run *r, int n, int64_t ttl)
{
    for (int i = 0; i < n; i++)
        cr_assert_eq(hilock_acquire_async(r->c, r->key[i], ttl, 0, on_done, arg_of(r, i)), HILOCK_OK,
                     "%s", hilock_client_errmsg(r->c));
}

/* Each lock's token is its key's value on the key's own master, and on no other. */
static void assert_held_on_owner(hlt_cluster *f, run *r, int n)
{
    for (int i = 0; i < n; i++) {
        char *v = hlt_cluster_get(f, r->shard[i], r->key[i]);
        cr_assert_not_null(v, "%s is not on its master %d", r->key[i], r->shard[i]);
        cr_assert_str_eq(v, hilock_token(r->lock[i]), "%s", r->key[i]);
        free(v);
    }
}

static void assert_gone(hlt_cluster *f, run *r, int n)
{
    for (int i = 0; i < n; i++)
        cr_assert_eq(hlt_cluster_exists(f, r->shard[i], r->key[i]), 0, "%s still held", r->key[i]);
}

static void lock_calls(run *r, int n, hilock_status (*fn)(hilock *, hilock_done_fn, void *))
{
    for (int i = 0; i < n; i++)
        cr_assert_eq(fn(r->lock[i], on_done, arg_of(r, i)), HILOCK_OK, "%s", hilock_client_errmsg(r->c));
}

static void assert_all(run *r, int n, hilock_status want, const char *what)
{
    for (int i = 0; i < n; i++)
        cr_assert_eq(r->st[i], want, "%s %d (%s, master %d): %s: %s", what, i, r->key[i], r->shard[i],
                     hilock_strerror(r->st[i]), r->err[i]);
    cr_assert_eq(r->wrong, 0, "a done ran twice");
}

static void free_locks(run *r, int n)
{
    for (int i = 0; i < n; i++) {
        hilock_free(r->lock[i]);
        r->lock[i] = NULL;
    }
}

/* The loop's stall: tests/scenario.h's hlt_ticker (a 2 ms timer; max_gap, the longest gap). */

/* ---- tests ---- */

Test(async_cluster, fifty_calls_in_flight_across_the_shards_all_land_on_their_masters)
{
    static run r;
    hlt_cluster *f = fx(0);
    uv_loop_t loop;
    int n = 50;
    uv_loop_init(&loop);
    memset(&r, 0, sizeof r);
    keys_across(f, &r, n, "fifty:");
    hilock_options o = hlt_options((const char *[]){ f->url }, 1);
    o.io_timeout_ms = 2000;
    r.c = hlt_client_new(&o);
    cr_assert_eq(hilock_libuv_attach(r.c, &loop), HILOCK_OK, "%s", hilock_client_errmsg(r.c));
    acquire_keys(&r, n, 10000);   /* all at once, on a new client: one slot map fetch */
    hlt_loop_run(&loop, &r.done, n, 15000);
    assert_all(&r, n, HILOCK_OK, "acquire");
    assert_held_on_owner(f, &r, n);
    reset(&r);
    lock_calls(&r, n, hilock_release_async);
    hlt_loop_run(&loop, &r.done, n, 15000);
    assert_all(&r, n, HILOCK_OK, "release");
    assert_gone(f, &r, n);
    free_locks(&r, n);
    hilock_client_free(r.c);
    hlt_loop_close(&loop);
}

/* The resharding of one slot, in a thread of its own (the fixture's calls block). */
typedef struct mover { hlt_cluster *f; int slot, to, rc; volatile int over; } mover;

static void *move_slot(void *arg)
{
    mover *m = arg;
    struct timespec pause = {0, 50 * 1000000};
    nanosleep(&pause, NULL);   /* the extends are going by then */
    m->rc = hlt_cluster_migrate_begin(m->f, m->slot, m->to);
    nanosleep(&pause, NULL);   /* (while it migrates: ASK for what has gone) */
    if (!m->rc) m->rc = hlt_cluster_migrate_keys(m->f, m->slot, m->to);
    nanosleep(&pause, NULL);
    if (!m->rc) m->rc = hlt_cluster_migrate_end(m->f, m->slot, m->to);
    __atomic_store_n(&m->over, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* 40 locks in one slot, each extended again as soon as its extend ends (40 in flight at all
 * times), while another thread moves the slot to another master: every extend succeeds
 * (TRYAGAIN, ASK, then MOVED and a slot map fetched again on the loop), the locks end on the
 * new master, and the loop's own timer keeps ticking. */
Test(async_cluster, a_slot_moved_under_load_is_followed_without_stalling_the_loop)
{
    static run r;
    hlt_cluster *f = fx(1);
    uv_loop_t loop;
    hlt_ticker tk;
    mover mv;
    pthread_t th;
    int n = 40, m[3], from, slot;
    int64_t t0;
    uv_loop_init(&loop);
    memset(&r, 0, sizeof r);
    masters(f, m);
    from = hlt_cluster_key_master(f, "{moving}");
    slot = hlt_cluster_keyslot(f, "{moving}");
    cr_assert(from >= 0 && slot >= 0);
    for (int i = 0; i < n; i++) {
        snprintf(r.key[i], sizeof r.key[i], "{moving}:%d", i);
        r.shard[i] = from;
    }
    hilock_options o = hlt_options((const char *[]){ f->url }, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;
    r.c = hlt_client_new(&o);
    cr_assert_eq(hilock_libuv_attach(r.c, &loop), HILOCK_OK, "%s", hilock_client_errmsg(r.c));
    acquire_keys(&r, n, 10000);
    hlt_loop_run(&loop, &r.done, n, 10000);
    assert_all(&r, n, HILOCK_OK, "acquire");
    reset(&r);
    mv.f = f;
    mv.slot = slot;
    mv.to = m[0] == from ? m[1] : m[0];
    mv.rc = -1;
    mv.over = 0;
    hlt_ticker_start(&loop, &tk);
    t0 = hlt_now_ms();
    r.again = 1;
    for (int i = 0; i < n; i++)
        cr_assert_eq(hilock_extend_async(r.lock[i], 10000, on_extended, arg_of(&r, i)), HILOCK_OK);
    cr_assert_eq(pthread_create(&th, NULL, move_slot, &mv), 0);
    /* the loop runs while the slot moves; then a few more rounds on the new master */
    while (!__atomic_load_n(&mv.over, __ATOMIC_ACQUIRE) && hlt_now_ms() - t0 < 30000)
        uv_run(&loop, UV_RUN_ONCE);
    pthread_join(th, NULL);
    {
        long at = r.extends;
        while (r.extends < at + 3 * n && r.failed == 0 && hlt_now_ms() - t0 < 40000)
            uv_run(&loop, UV_RUN_ONCE);
    }
    r.again = 0;
    hlt_loop_run(&loop, &r.done, n, 10000);
    hlt_ticker_stop(&tk);
    printf("async_cluster: slot %d moved from master %d to %d under %d extends in flight: %ld "
           "extends, %ld failed; a 2 ms loop timer ticked %ld times, longest gap %lld ms\n", slot,
           from, mv.to, n, r.extends, r.failed, tk.ticks, (long long)tk.max_gap);
    cr_assert_eq(mv.rc, 0, "the slot did not move");
    for (int i = 0; i < n; i++) cr_assert_eq(r.failed, 0, "extend of %s: %s", r.key[i], r.err[i]);
    cr_assert_gt(tk.ticks, 20, "the loop's own timer hardly ran");
    cr_assert_lt(tk.max_gap, 250, "the loop stalled %lld ms", (long long)tk.max_gap);
    for (int i = 0; i < n; i++) r.shard[i] = mv.to;
    assert_held_on_owner(f, &r, n);   /* the locks moved with the slot, and were kept */
    reset(&r);
    lock_calls(&r, n, hilock_check_async);
    hlt_loop_run(&loop, &r.done, n, 10000);
    assert_all(&r, n, HILOCK_OK, "check after the move");
    reset(&r);
    lock_calls(&r, n, hilock_release_async);
    hlt_loop_run(&loop, &r.done, n, 10000);
    assert_all(&r, n, HILOCK_OK, "release after the move");
    assert_gone(f, &r, n);
    free_locks(&r, n);
    hilock_client_free(r.c);
    hlt_loop_close(&loop);
    /* the slot goes home */
    cr_assert_eq(hlt_cluster_migrate_begin(f, slot, from), 0);
    cr_assert_eq(hlt_cluster_migrate_keys(f, slot, from), 0);
    cr_assert_eq(hlt_cluster_migrate_end(f, slot, from), 0);
    heal(f);
}

/* hilock_client_free with calls in flight on every shard -- first while the slot map is still
 * being fetched on the loop, then with the calls on the shards' connections -- ends each one
 * (done runs once, before it returns), and leaves nothing behind (ASan: no leak). */
Test(async_cluster, freeing_the_client_ends_the_calls_in_flight_on_every_shard)
{
    static run r;
    hlt_cluster *f = fx(0);
    uv_loop_t loop;
    int n = 30;
    uv_loop_init(&loop);
    memset(&r, 0, sizeof r);
    for (int round = 0; round < 2; round++) {
        reset(&r);
        keys_across(f, &r, n, round ? "freed1:" : "freed0:");   /* (round 0's grants stay held) */
        hilock_options o = hlt_options((const char *[]){ f->url }, 1);
        o.io_timeout_ms = 2000;
        o.failover_guard = 0;
        r.c = hlt_client_new(&o);
        cr_assert_eq(hilock_libuv_attach(r.c, &loop), HILOCK_OK, "%s", hilock_client_errmsg(r.c));
        if (round == 1) {   /* the map in hand and the connections open */
            acquire_keys(&r, 1, 10000);
            hlt_loop_run(&loop, &r.done, 1, 10000);
            cr_assert_eq(r.st[0], HILOCK_OK, "%s", r.err[0]);
            reset(&r);
            cr_assert_eq(hilock_release_async(r.lock[0], on_done, arg_of(&r, 0)), HILOCK_OK);
            hlt_loop_run(&loop, &r.done, 1, 10000);
            hilock_free(r.lock[0]);
            r.lock[0] = NULL;
            reset(&r);
        }
        acquire_keys(&r, n, 10000);
        uv_run(&loop, UV_RUN_NOWAIT);   /* started: a map fetch, or commands on the wire */
        uv_run(&loop, UV_RUN_NOWAIT);
        hilock_client_free(r.c);
        cr_assert_eq(r.done, n, "round %d: only %d of %d calls ended in hilock_client_free", round,
                     r.done, n);
        for (int i = 0; i < n; i++) {
            cr_assert_eq(r.ended[i], 1);
            cr_assert(r.st[i] == HILOCK_OK || r.st[i] == HILOCK_EIO, "round %d, call %d: %s: %s",
                      round, i, hilock_strerror(r.st[i]), r.err[i]);
        }
        uv_run(&loop, UV_RUN_NOWAIT);
        cr_assert_eq(r.done, n, "a done ran after hilock_client_free returned");
        free_locks(&r, n);
    }
    hlt_loop_close(&loop);
}
