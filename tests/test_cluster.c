/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cluster.c -- locks on Redis Cluster (redis-cluster://): routing by hash slot, aux keys
 * in the key's slot whatever its braces, seeds (a frozen only seed), resharding through ASK and
 * MOVED, shard failovers (LOST unless proven), a frozen node, two processes counting, the
 * hilock command. Size (70 masters, 1,000 nodes, churn): test_cluster_scale.c.
 *
 * One real cluster (3 masters + 3 replicas, cluster_fixture.h) serves the whole suite: started
 * by the runner before the first test and stopped after the last. Tests that break it (kill,
 * failover, resharding, SIGSTOP) run alone (hlt_cluster_exclusive) and leave it healthy; the
 * others share it. Timing asserts are generous upper bounds only. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster_fixture.h"
#include "clients.h"
#include "fixture.h"
#include "hilock.h"
#include "lock.h"   /* hl_key_slot, hl_aux_key: the unit part */
#include "scenario.h"

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
    (void)set;
    if (hlt_cluster_share() < 0) fprintf(stderr, "test_cluster: the cluster fixture did not start\n");
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
    (void)stats;
    hlt_cluster_unshare();
}

HLT_CLUSTER_SHARED_SUITE(cluster)

/* Clients of these tests: hlt_options's with io_timeout_ms 2000 and without the failover guard
 * (failover_guard = 0), since a test's failover would otherwise make every later test's first
 * grant on that shard wait for its ttl. The guard itself is checked in
 * cluster_failover_is_lost_unless_proven. */

#define assert_msg(c, text)                                                                    \
    cr_assert(strstr(hilock_client_errmsg(c), (text)), "errmsg '%s' does not say '%s'",        \
              hilock_client_errmsg(c), (text))

/* A key named prefix<N> whose slot is served by master m. */
static void key_on(hlt_cluster *f, int m, const char *prefix, char *buf, size_t cap)
{
    cr_assert_eq(hlt_cluster_key_on(f, m, prefix, NULL, buf, cap), 0, "no key on master %d", m);
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

/* The options of the scenarios below (as this suite's clients: io 2 s, no failover guard). */
static hilock_options scn_options(hlt_cluster *f)
{
    static const char *url[1];   /* (the options point at it: not this call's stack) */
    hilock_options o;
    url[0] = f->url;
    o = hlt_options(url, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;
    return o;
}

/* (The two tests of a scenario may run at once on the suite's cluster: their keys differ.) */

/* Blocking and on the loop (tests/scenario.h): two keys on each of the three masters, each
 * granted on its own master (and no other's value), extended there (its PTTL follows),
 * checked and released. */
HLT_SCENARIO(cluster, locks_on_keys_of_every_master)
{
    hlt_cluster *f = fx(0);
    hilock_options o = scn_options(f);
    hlt_run *a = hlt_run_new(&o, mode);
    enum { N = 6 };
    hilock *l[N];
    char key[N][64];
    int m[3], shard[N], from[3] = { 0, 0, 0 };
    masters(f, m);
    for (int i = 0; i < N; i++) {
        char *v;
        shard[i] = m[i % 3];
        cr_assert_eq(hlt_cluster_key_on(f, shard[i], mode ? "every:loop:" : "every:", &from[i % 3], key[i], sizeof key[i]), 0,
                     "no key on master %d", shard[i]);
        cr_assert_eq(hlt_run_acquire(a, key[i], 10000, 0, &l[i]), HILOCK_OK, "%s", hlt_run_errmsg(a));
        v = hlt_cluster_get(f, shard[i], key[i]);
        cr_assert(v && !strcmp(v, hilock_token(l[i])), "master %d does not hold %s", shard[i], key[i]);
        free(v);
        cr_assert_gt(hilock_fence(l[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        redisReply *t;
        cr_assert_eq(hlt_run_extend(a, l[i], 20000), HILOCK_OK, "%s", hlt_run_errmsg(a));
        t = hlt_cluster_cmd(f, shard[i], "PTTL %s", key[i]);
        cr_assert(t && t->integer > 10000, "%s: the extend did not reach its master", key[i]);
        freeReplyObject(t);
    }
    for (int i = 0; i < N; i++) cr_assert_eq(hlt_run_check(a, l[i]), HILOCK_OK, "%s", hlt_run_errmsg(a));
    for (int i = 0; i < N; i++) {
        cr_assert_eq(hlt_run_release(a, l[i]), HILOCK_OK, "%s", hlt_run_errmsg(a));
        cr_assert_eq(hlt_cluster_exists(f, shard[i], key[i]), 0, "%s still held", key[i]);
        hilock_free(l[i]);
    }
    hlt_run_free(a);
}

/* Master m's run_id (INFO server), in buf. */
static void run_id_of(hlt_cluster *f, int m, char *buf, size_t cap)
{
    redisReply *r = hlt_cluster_cmd(f, m, "INFO server");
    const char *p = r && r->str ? strstr(r->str, "run_id:") : NULL;
    size_t k = 0;
    cr_assert_not_null(p, "INFO server of master %d", m);
    for (p += 7; k + 1 < cap && *p && *p != '\r' && *p != '\n'; p++) buf[k++] = *p;
    buf[k] = '\0';
    freeReplyObject(r);
}

/* A Cluster node keeps one connection per shard, parked while another shard's is in use: the
 * server's facts (version, clock, run_id) go with it. They stayed in the node, so a parked
 * shard's connection ran with the last other shard's facts (a rolling 6.2 -> 7.0 upgrade sent
 * "#!lua" to 6.2; its fence floor came from another server's clock). The run_id tells. */
Test(cluster, each_shards_connection_keeps_its_own_servers_facts)
{
    hlt_cluster *f = fx(0);
    hilock_options o = hlt_options((const char *[]){ f->url }, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;
    hilock_client *c = hlt_client_new(&o);
    static const int order[] = { 0, 1, 2, 0, 1, 2, 0 };
    char key[3][64], id[3][48];
    int m[3];
    masters(f, m);
    for (int i = 0; i < 3; i++) {
        key_on(f, m[i], "facts:", key[i], sizeof key[i]);
        run_id_of(f, m[i], id[i], sizeof id[i]);
    }
    for (size_t j = 0; j < sizeof order / sizeof order[0]; j++) {
        int i = order[j];
        hilock *l = NULL;
        cr_assert_eq(hilock_acquire(c, key[i], 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
        cr_assert_str_eq(c->nodes[0].facts.run_id, id[i], "step %zu (master %d): another shard's facts", j, m[i]);
        cr_assert_gt(hl_node_server_ms(&c->nodes[0]), 0);
        cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
        cr_assert_eq(hlt_cluster_exists(f, m[i], key[i]), 0);
        hilock_free(l);
    }
    hilock_client_free(c);
}

/* The cluster rule on a thousand keys of every brace shape, and CLUSTER KEYSLOT agrees. */
Test(cluster, aux_keys_hash_to_the_key_slot_whatever_its_braces)
{
    static const char *const shapes[] = {"k%d", "jobs:{t%d}:nightly", "a{}b%d", "a{b%d", "a}b{c%d", "}{w%d}",
                                         "foo{}{bar%d}", "{%d}", "x}%d", "{}%d", "{%d", "%d}"};
    static const char *const sfx[] = {":fence", ":signal", ":waiters"};
    hlt_cluster *f = fx(0);
    char key[64];
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int n = 0; n < 100; n++) {
            snprintf(key, sizeof key, shapes[s], n);
            for (int x = 0; x < 3; x++) {
                char *a = hl_aux_key(key, sfx[x]);
                cr_assert_not_null(a);
                cr_assert_eq(hl_key_slot(a, strlen(a)), hl_key_slot(key, strlen(key)), "%s vs %s", a, key);
                if (n < 3) cr_assert_eq(hlt_cluster_keyslot(f, a), hlt_cluster_keyslot(f, key), "%s", a);
                free(a);
            }
            if (n < 3) cr_assert_eq((int)hl_key_slot(key, strlen(key)), hlt_cluster_keyslot(f, key), "%s", key);
        }
    /* the names of earlier versions where they already shared the slot (one master, moving) */
    {
        char *a = hl_aux_key("orders", ":fence"), *b = hl_aux_key("jobs:{t}:n", ":fence");
        cr_assert_str_eq(a, "{orders}:fence");
        cr_assert_str_eq(b, "jobs:{t}:n:fence");
        free(a);
        free(b);
    }
}

Test(cluster, keys_with_tags_empty_and_unbalanced_braces_lock_on_their_shard)
{
    static const char *const keys[] = {"jobs:{tenant}:nightly", "a{}b", "a{b", "a}b{c", "}{w}", "foo{}{bar}"};
    hlt_cluster *f = fx(0);
    hilock_options o = hlt_options((const char *[]){ f->url }, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;
    hilock_client *c = hlt_client_new(&o);
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        hilock *l;
        int m = hlt_cluster_key_master(f, keys[i]);
        char *fence = hl_aux_key(keys[i], ":fence"), *v;
        cr_assert_eq(hilock_acquire(c, keys[i], 10000, 0, &l), HILOCK_OK, "%s: %s", keys[i], hilock_client_errmsg(c));
        v = hlt_cluster_get(f, m, keys[i]);
        cr_assert(v && !strcmp(v, hilock_token(l)), "%s not on its master", keys[i]);
        cr_assert_eq(hlt_cluster_exists(f, m, fence), 1, "%s not on the key's master", fence);
        cr_assert_eq(hilock_extend(l, 10000), HILOCK_OK, "%s", hilock_client_errmsg(c));
        cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
        cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
        cr_assert_eq(hlt_cluster_exists(f, m, keys[i]), 0);
        free(v);
        free(fence);
        hilock_free(l);
    }
    hilock_client_free(c);
}

Test(cluster, a_seed_list_whose_first_node_is_down_works)
{
    hlt_cluster *f = fx(0);
    char url[600];
    hilock_client *c;
    hilock *l;
    long long t0;
    snprintf(url, sizeof url, "redis-cluster://127.0.0.1:%d,127.0.0.1:%d", hlt_dead_port(), f->port[3]);
    hilock_options o = hlt_options((const char *[]){ url }, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "seeds", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    /* no seed at all: EIO, bounded, naming the seeds */
    snprintf(url, sizeof url, "redis-cluster://127.0.0.1:%d,127.0.0.1:%d", hlt_dead_port(), hlt_dead_port());
    c = hlt_client_new(&o);   /* (o.servers is url, rewritten) */
    t0 = hlt_now_ms();
    cr_assert_eq(hilock_acquire(c, "seeds", 5000, 0, &l), HILOCK_EIO);
    cr_assert_lt(hlt_now_ms() - t0, 3000);
    assert_msg(c, "no seed gave the slot map");
    assert_msg(c, "seed 127.0.0.1:");
    hilock_client_free(c);
}

Test(cluster, bad_cluster_urls_are_einval_with_a_message)
{
    static const char *const bad[][2] = {
        {"redis-cluster://", "missing seed address"},
        {"redis-cluster://127.0.0.1:7000/0", "database 0 only"},
        {"redis-cluster://127.0.0.1:7000#m", "no master name"},
        {"redis-cluster://127.0.0.1:7000,", "empty seed address"},
        {"redis-cluster://127.0.0.1:99999", "bad port"},
        {"redis-cluster://127.0.0.1:7000?a=b", "unexpected query"},
        {"redis-cluster://:pw@", "missing seed address"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        hilock_client *c = NULL;
        cr_assert_eq(hilock_client_open(bad[i][0], &c), HILOCK_EINVAL, "%s", bad[i][0]);
        cr_assert_null(c);
        cr_assert(strstr(hilock_last_config_error(), bad[i][1]), "%s: '%s'", bad[i][0], hilock_last_config_error());
    }
}

/* Resharding the locked key's slot while held, step by step: before, during (the key moved:
 * ASK) and after (MOVED). Never lost, never granted twice; the new owner holds it. */
Test(cluster, resharding_a_held_lock_keeps_it_through_ask_and_moved)
{
    hlt_cluster *f = fx(1);
    hilock_options o = hlt_options((const char *[]){ f->url }, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;
    hilock_client *c = hlt_client_new(&o), *other = hlt_client_new(&o);
    hilock *l, *l2;
    char key[64], *v;
    int m[3], from, to, slot;
    uint64_t fence;
    masters(f, m);
    from = m[0];
    to = m[1];
    key_on(f, from, "reshard:", key, sizeof key);
    slot = hlt_cluster_keyslot(f, key);
    cr_assert_eq(hilock_acquire(c, key, 60000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    fence = hilock_fence(l);
    cr_assert_eq(hlt_cluster_migrate_begin(f, slot, to), 0);
    cr_assert_eq(hilock_extend(l, 60000), HILOCK_OK, "migrating: %s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_check(l), HILOCK_OK, "migrating: %s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_cluster_migrate_keys(f, slot, to), 0);
    cr_assert_eq(hlt_cluster_exists(f, from, key), 0, "the key is still on the source");
    v = hlt_cluster_get(f, to, key);
    cr_assert(v && !strcmp(v, hilock_token(l)), "the target does not hold the lock");
    free(v);
    cr_assert_eq(hilock_extend(l, 60000), HILOCK_OK, "ASK: %s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_check(l), HILOCK_OK, "ASK: %s", hilock_client_errmsg(c));
    cr_assert_neq(hilock_acquire(other, key, 60000, 0, &l2), HILOCK_OK, "granted twice during the migration");
    cr_assert_eq(hlt_cluster_migrate_end(f, slot, to), 0);
    cr_assert_eq(hilock_check(l), HILOCK_OK, "MOVED: %s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_extend(l, 60000), HILOCK_OK, "MOVED: %s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_acquire(other, key, 60000, 0, &l2), HILOCK_BUSY, "%s", hilock_client_errmsg(other));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_cluster_exists(f, to, key), 0);
    cr_assert_eq(hilock_acquire(other, key, 60000, 0, &l2), HILOCK_OK, "%s", hilock_client_errmsg(other));
    cr_assert_gt(hilock_fence(l2), fence, "fence went back across the resharding");
    cr_assert_eq(hilock_release(l2), HILOCK_OK);
    hilock_free(l);
    hilock_free(l2);
    /* back where it was, in one go */
    cr_assert_eq(hlt_cluster_migrate_begin(f, slot, from), 0);
    cr_assert_eq(hlt_cluster_migrate_keys(f, slot, from), 0);
    cr_assert_eq(hlt_cluster_migrate_end(f, slot, from), 0);
    hilock_client_free(c);
    hilock_client_free(other);
    heal(f);
}

/* A shard master dies with a lock its replica never received: LOST (not a quiet NOT_HELD,
 * never OK), while a lock on another shard stays OK. */
Test(cluster, a_killed_shard_master_is_lost_and_other_shards_stay_ok)
{
    hlt_cluster *f = fx(1);
    hilock_options o = hlt_options((const char *[]){ f->url }, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;
    hilock_client *c = hlt_client_new(&o);
    hilock *la, *lb;
    char ka[64], kb[64];
    int m[3], r;
    long long t_kill, t_lost = -1;
    hilock_status st = HILOCK_OK;
    masters(f, m);
    r = hlt_cluster_replica_of(f, m[0]);
    cr_assert_geq(r, 0);
    key_on(f, m[0], "killed:", ka, sizeof ka);
    key_on(f, m[1], "other:", kb, sizeof kb);
    cr_assert_eq(hilock_acquire(c, kb, 60000, 0, &lb), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_cluster_cut(f, r), 0);
    cr_assert_eq(hilock_acquire(c, ka, 60000, 0, &la), HILOCK_OK, "%s", hilock_client_errmsg(c));
    t_kill = hlt_now_ms();
    hlt_cluster_kill(f, m[0]);
    while (hlt_now_ms() - t_kill < 20000) {
        st = hilock_check(la);
        if (st == HILOCK_LOST) {
            t_lost = hlt_now_ms() - t_kill;
            break;
        }
        cr_assert(st == HILOCK_EIO || st == HILOCK_ETIMEDOUT || st == HILOCK_EREPLY, "check said %s: %s",
                  hilock_strerror(st), hilock_client_errmsg(c));
        hlt_sleep_ms(50);
    }
    cr_assert_eq(st, HILOCK_LOST, "%s", hilock_client_errmsg(c));
    fprintf(stderr, "test_cluster: shard master killed -> LOST in %lld ms (%s)\n", t_lost, hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(la), HILOCK_LOST, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_check(lb), HILOCK_OK, "the other shard's lock: %s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(lb), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(la);
    hilock_free(lb);
    hilock_client_free(c);
    heal(f);
}

/* CLUSTER FAILOVER: a lock the replica had is proven to survive (OK, and fences keep growing);
 * a forced failover to a replica cut off before the grant loses it (LOST). */
Test(cluster, cluster_failover_is_lost_unless_proven)
{
    hlt_cluster *f = fx(1);
    hilock_options o = hlt_options((const char *[]){ f->url }, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;
    hilock_client *c = hlt_client_new(&o);
    hilock *l, *l2;
    char key[64];
    int m[3], r, old;
    uint64_t fence;
    masters(f, m);
    old = m[2];
    r = hlt_cluster_replica_of(f, old);
    cr_assert_geq(r, 0);
    key_on(f, old, "failover:", key, sizeof key);
    cr_assert_eq(hilock_acquire(c, key, 60000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    fence = hilock_fence(l);
    hlt_sleep_ms(100);   /* replication: loopback, asynchronous */
    cr_assert_eq(hlt_cluster_failover(f, r, 0), 0, "CLUSTER FAILOVER did not complete");
    cr_assert_eq(hilock_check(l), HILOCK_OK, "clean failover: %s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_extend(l, 60000), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    cr_assert_eq(hilock_acquire(c, key, 60000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_gt(hilock_fence(l), fence, "fence went back across the failover");
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    {   /* the failover guard (on by default, as behind Sentinel), per shard: the promoted
         * master grants nothing for the longest ttl granted in the slot before */
        hilock_options og = hlt_options((const char *[]){ f->url }, 1);
        hilock_client *g;
        char k2[64];
        og.io_timeout_ms = 2000;
        /* a new client reads the seed's slot map: once every node has heard of the failover
         * (before, the seed's map may have no master for the slot: CI, 6.0.20, loaded) */
        cr_assert_eq(hlt_cluster_heal_all(f, 20000), 0);
        g = hlt_client_new(&og);
        key_on(f, r, "guarded:", k2, sizeof k2);
        cr_assert_eq(hilock_acquire(g, k2, 5000, 0, &l), HILOCK_BUSY, "%s", hilock_client_errmsg(g));
        assert_msg(g, "failover guard");
        hilock_client_free(g);
    }
    /* now r is the master and old its replica: cut old, grant, force old to take over */
    cr_assert_eq(hlt_cluster_heal_all(f, 20000), 0);
    cr_assert_eq(hlt_cluster_cut(f, old), 0);
    cr_assert_eq(hilock_acquire(c, key, 60000, 0, &l2), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_cluster_failover(f, old, 1), 0, "CLUSTER FAILOVER FORCE did not complete");
    {
        hilock_status st = hilock_check(l2);
        cr_assert_eq(st, HILOCK_LOST, "%s: %s", hilock_strerror(st), hilock_client_errmsg(c));
    }
    hilock_free(l2);
    hilock_client_free(c);
    heal(f);
}

/* node i's INFO replication field `name` (e.g. "master_replid2:") into out (40 hex + NUL). */
static void repl_field(hlt_cluster *f, int i, const char *name, char out[41])
{
    redisReply *r = hlt_cluster_cmd(f, i, "INFO replication");
    const char *p = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, name) : NULL;
    cr_assert(p && strlen(p) >= strlen(name) + 40, "node %d: no %s", i, name);
    memcpy(out, p + strlen(name), 40);
    out[40] = '\0';
    freeReplyObject(r);
}

/* A shard fails over to a replica that never had its master's history: the replica was
 * restarted empty (no RDB: a new replication id) while its master was frozen, then took over
 * (CLUSTER FAILOVER TAKEOVER). Its master_replid2 is its own old id, not the granting
 * master's, as after a resharding; but the granting master serves no slot any more and this
 * one was promoted: a failover of the shard, LOST (not NOT_HELD "expired or already
 * released"), by check and release alike; also for a client that first hears of it once the
 * old master is back as the new one's replica (a MOVED: its slot map then still gives the old
 * master its other slots). */
Test(cluster, a_failover_to_a_replica_that_never_synced_is_lost_not_a_resharding)
{
    hlt_cluster *f;
    /* On Valkey 7.2 this test ran past its 120 s twice in CI's server matrix (never alone, nor
     * in the suite alone): where it waits is not yet known; until it is, it is not run there */
    if (hlt_server_is_valkey() && hlt_server_version() < 80000)
        cr_skip_test("n/a on Valkey 7.2: the unsynced replica's takeover stalled this test in CI (being looked into)");
    f = fx(1);
    hilock_options o = hlt_options((const char *[]){ f->url }, 1);
    o.io_timeout_ms = 300;
    o.failover_guard = 0;
    hilock_options o2 = hlt_options((const char *[]){ f->url }, 1);
    o2.io_timeout_ms = 2000;
    o2.failover_guard = 0;
    hilock_client *c = hlt_client_new(&o), *later = hlt_client_new(&o2);
    hilock *l, *l2;
    char key[64], key2[80], rdb[200], granted_id[41], replid2[41], msg[3][300];
    int m[3], old, r;
    long long t0, gone;
    hilock_status st[3] = {HILOCK_OK, HILOCK_OK, HILOCK_OK};
    redisReply *x;
    masters(f, m);
    old = m[1];
    r = hlt_cluster_replica_of(f, old);
    cr_assert_geq(r, 0);
    key_on(f, old, "unsynced:", key, sizeof key);
    snprintf(key2, sizeof key2, "{%s}:later", key);
    cr_assert_eq(hilock_acquire(c, key, 60000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_acquire(later, key2, 60000, 0, &l2), HILOCK_OK, "%s", hilock_client_errmsg(later));
    repl_field(f, old, "master_replid:", granted_id);
    hlt_cluster_freeze(f, old);
    hlt_cluster_kill(f, r);
    snprintf(rdb, sizeof rdb, "%s/n%d/dump.rdb", f->dir, r);
    unlink(rdb);   /* (a replica saves what it loads at a full sync: it would resume from it) */
    cr_assert_eq(hlt_cluster_restart(f, r), 0, "the replica did not restart");
    x = hlt_cluster_cmd(f, r, "CLUSTER FAILOVER TAKEOVER");
    cr_assert(x && x->type == REDIS_REPLY_STATUS, "TAKEOVER: %s", x && x->str ? x->str : "no answer");
    freeReplyObject(x);
    cr_assert_eq(hlt_cluster_wait_master(f, r, 20000), 0, "the replica did not take over");
    repl_field(f, r, "master_replid2:", replid2);
    cr_assert_str_neq(replid2, granted_id, "the replica had the master's history: not the case tested");
    cr_assert_eq(hlt_cluster_exists(f, r, key), 0, "the promoted replica has the lock");
    /* the client meets the frozen master (ETIMEDOUT) until its slot map names the new one */
    for (t0 = hlt_now_ms(); hlt_now_ms() - t0 < 20000; hlt_sleep_ms(50)) {
        st[0] = hilock_check(l);
        if (st[0] != HILOCK_EIO && st[0] != HILOCK_ETIMEDOUT) break;
    }
    snprintf(msg[0], sizeof msg[0], "%s", hilock_client_errmsg(c));
    st[1] = hilock_release(l);
    snprintf(msg[1], sizeof msg[1], "%s", hilock_client_errmsg(c));
    gone = hlt_cluster_exists(f, r, key);
    hilock_free(l);
    hilock_client_free(c);
    hlt_cluster_thaw(f, old);   /* it rejoins as the new master's replica (healed before asserting) */
    heal(f);
    st[2] = hilock_check(l2);
    snprintf(msg[2], sizeof msg[2], "%s", hilock_client_errmsg(later));
    hilock_free(l2);
    hilock_client_free(later);
    for (int k = 0; k < 3; k++)
        fprintf(stderr, "test_cluster: unsynced failover, %s -> %s: %s\n", k == 1 ? "release" : "check",
                hilock_strerror(st[k]), msg[k]);
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(st[k], HILOCK_LOST, "%s said %s: %s", k == 1 ? "release" : "check", hilock_strerror(st[k]), msg[k]);
        cr_assert(strstr(msg[k], "a failover of the shard"), "errmsg '%s'", msg[k]);
    }
    cr_assert_eq(gone, 0);
}

/* A slot resharded to another master (which served other slots before, as the granting one
 * still does): a lock that came along with MIGRATE is released OK there and gone from both
 * masters; one that expired after the move is NOT_HELD "expired or already released", not a
 * failover. */
Test(cluster, a_resharded_lock_is_judged_by_its_value_not_as_a_failover)
{
    hlt_cluster *f = fx(1);
    hilock_options o = hlt_options((const char *[]){ f->url }, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;
    hilock_client *c = hlt_client_new(&o);
    hilock *held, *brief;
    char tag[32], key[64], key2[64];
    int m[3], from, to, slot;
    hilock_status st;
    redisReply *x;
    masters(f, m);
    from = m[0];
    to = m[2];
    key_on(f, from, "moved", tag, sizeof tag);
    snprintf(key, sizeof key, "{%s}:held", tag);   /* one slot: the tag's */
    snprintf(key2, sizeof key2, "{%s}:brief", tag);
    slot = hlt_cluster_keyslot(f, key);
    cr_assert_eq(hlt_cluster_keyslot(f, key2), slot);
    cr_assert_eq(hilock_acquire(c, key, 60000, 0, &held), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_acquire(c, key2, 400, 0, &brief), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_cluster_migrate_begin(f, slot, to), 0);
    cr_assert_eq(hlt_cluster_migrate_keys(f, slot, to), 0);
    cr_assert_eq(hlt_cluster_exists(f, from, key), 0, "the key is still on the source");
    cr_assert_eq(hlt_cluster_migrate_end(f, slot, to), 0);
    hlt_sleep_ms(600);   /* the brief one expires on its new master */
    st = hilock_check(brief);
    cr_assert_eq(st, HILOCK_NOT_HELD, "check said %s: %s", hilock_strerror(st), hilock_client_errmsg(c));
    assert_msg(c, "expired or already released");
    st = hilock_release(held);
    cr_assert_eq(st, HILOCK_OK, "release said %s: %s", hilock_strerror(st), hilock_client_errmsg(c));
    cr_assert_eq(hlt_cluster_exists(f, to, key), 0, "not released on the new master");
    x = hlt_cluster_cmd(f, from, "CLUSTER COUNTKEYSINSLOT %d", slot);   /* (GET there: MOVED) */
    cr_assert(x && x->type == REDIS_REPLY_INTEGER && x->integer == 0, "keys of the slot left on the source");
    freeReplyObject(x);
    hilock_free(held);
    hilock_free(brief);
    hilock_client_free(c);
    cr_assert_eq(hlt_cluster_migrate_begin(f, slot, from), 0);   /* back where it was */
    cr_assert_eq(hlt_cluster_migrate_keys(f, slot, from), 0);
    cr_assert_eq(hlt_cluster_migrate_end(f, slot, from), 0);
    heal(f);
}

/* Blocking and on the loop (tests/scenario.h): a lock on each master; one master frozen: while
 * a second caller's acquire waits on it (on the loop: in flight on the same client), the other
 * shards' locks extend OK (on their owners, PTTL renewed); the extend of the frozen master's
 * lock and that acquire end ETIMEDOUT within the bound, saying so; thawed, every lock is
 * released and gone from its master. */
HLT_SCENARIO(cluster, a_frozen_master_is_etimedout_within_the_bound)
{
    hlt_cluster *f = fx(1);
    hilock_options o = scn_options(f);
    hlt_run *r, *w;
    hilock *l[3];
    char key[3][64], cold[64];
    int m[3];
    long long t0;
    o.io_timeout_ms = 300;
    r = hlt_run_new(&o, mode);
    w = hlt_run_peer(r);
    masters(f, m);
    for (int i = 0; i < 3; i++) {
        key_on(f, m[i], mode ? "frozen:loop:" : "frozen:", key[i], sizeof key[i]);
        cr_assert_eq(hlt_run_acquire(r, key[i], 10000, 0, &l[i]), HILOCK_OK, "%s", hlt_run_errmsg(r));
    }
    key_on(f, m[1], mode ? "cold:loop:" : "cold:", cold, sizeof cold);
    hlt_cluster_freeze(f, m[1]);
    t0 = hlt_now_ms();
    hlt_run_begin_acquire(w, cold, 10000, 0);
    for (int i = 0; i < 3; i += 2) {   /* the other shards go on */
        cr_assert_eq(hlt_run_extend(r, l[i], 30000), HILOCK_OK, "%s (master %d): %s", key[i], m[i],
                     hlt_run_errmsg(r));
        redisReply *p = hlt_cluster_cmd(f, m[i], "PTTL %s", key[i]);
        cr_assert(p && p->type == REDIS_REPLY_INTEGER && p->integer > 10000, "%s: PTTL not renewed", key[i]);
        freeReplyObject(p);
    }
    cr_assert_eq(hlt_run_extend(r, l[1], 10000), HILOCK_ETIMEDOUT, "%s", hlt_run_errmsg(r));
    cr_assert(strstr(hlt_run_errmsg(r), "timed out"), "%s", hlt_run_errmsg(r));
    cr_assert_eq(hlt_run_end(w, 10000, NULL), HILOCK_ETIMEDOUT, "%s", hlt_run_errmsg(w));
    cr_assert(strstr(hlt_run_errmsg(w), "timed out"), "%s", hlt_run_errmsg(w));
    cr_assert_lt(hlt_now_ms() - t0, 2000, "not bounded");
    hlt_cluster_thaw(f, m[1]);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(hlt_run_release(r, l[i]), HILOCK_OK, "%s (master %d): %s", key[i], m[i], hlt_run_errmsg(r));
        cr_assert_eq(hlt_cluster_exists(f, m[i], key[i]), 0, "%s still held", key[i]);
        hilock_free(l[i]);
    }
    hlt_run_free(w);
    hlt_run_free(r);
    heal(f);
}

/* The URL's only seed (here a replica: freezing it fails nothing over) hangs after the key's
 * master stalled a call and made the map stale. Every call then waited for that seed within
 * its connect bound and timed out ("no seed gave the slot map", ETIMEDOUT after ~1 s) until it
 * came back; now the masters of the map are asked with it, and the calls run on the key's
 * master, each well within its bound. */
Test(cluster, a_frozen_only_seed_does_not_stop_a_healthy_shard)
{
    hlt_cluster *f = fx(1);
    hilock_client *c;
    hilock *l, *l2;
    char url[128], key[64], key2[64], *v;
    int m[3], seed;
    long long worst = 0, t0;
    masters(f, m);
    seed = hlt_cluster_replica_of(f, m[2]);
    cr_assert_geq(seed, 0);
    snprintf(url, sizeof url, "redis-cluster://127.0.0.1:%d", f->port[seed]);
    hilock_options o = hlt_options((const char *[]){ url }, 1);
    o.io_timeout_ms = 300;
    o.failover_guard = 0;
    c = hlt_client_new(&o);
    key_on(f, m[1], "hungseed:", key, sizeof key);
    key_on(f, m[1], "hungseed2:", key2, sizeof key2);
    cr_assert_eq(hilock_acquire(c, key, 30000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_cluster_freeze(f, m[1]);   /* the key's shard stalls once: the map is stale */
    cr_assert_eq(hilock_extend(l, 30000), HILOCK_ETIMEDOUT, "%s", hilock_client_errmsg(c));
    hlt_cluster_thaw(f, m[1]);
    hlt_cluster_freeze(f, seed);
    t0 = hlt_now_ms();
    for (int i = 0; i < 5; i++) {
        long long t = hlt_now_ms(), d;
        cr_assert_eq(hilock_extend(l, 30000), HILOCK_OK, "call %d: %s", i, hilock_client_errmsg(c));
        cr_assert_eq(hilock_check(l), HILOCK_OK, "call %d: %s", i, hilock_client_errmsg(c));
        if ((d = hlt_now_ms() - t) > worst) worst = d;
    }
    cr_assert_eq(hilock_acquire(c, key2, 30000, 0, &l2), HILOCK_OK, "%s", hilock_client_errmsg(c));
    fprintf(stderr, "test_cluster: frozen seed: 5 extend+check and an acquire in %lld ms (worst pair %lld ms)\n",
            hlt_now_ms() - t0, worst);
    cr_assert_lt(worst, 2000, "a call took %lld ms", worst);
    v = hlt_cluster_get(f, m[1], key2);
    cr_assert(v && !strcmp(v, hilock_token(l2)), "the shard does not hold the new lock");
    free(v);
    v = hlt_cluster_get(f, m[1], key);
    cr_assert(v && !strcmp(v, hilock_token(l)), "the shard does not hold the extended lock");
    free(v);
    cr_assert_eq(hilock_release(l2), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_cluster_exists(f, m[1], key), 0);
    cr_assert_eq(hlt_cluster_exists(f, m[1], key2), 0);
    hlt_cluster_thaw(f, seed);
    hilock_free(l);
    hilock_free(l2);
    hilock_client_free(c);
    heal(f);
}

/* Two processes, each its own client, on keys of every shard: the counters are exact. */
Test(cluster, two_processes_hammering_keys_across_shards_count_exactly)
{
    enum { ROUNDS = 60, NKEYS = 6 };
    hlt_cluster *f = fx(0);
    char keys[NKEYS][64], count[NKEYS][80];
    int m[3], owner[NKEYS];
    pid_t kid[2];
    masters(f, m);
    for (int k = 0; k < NKEYS; k++) {
        char *ck;
        key_on(f, m[k % 3], k < 3 ? "hammer-a:" : "hammer-b:", keys[k], sizeof keys[k]);
        ck = hl_aux_key(keys[k], ":count");
        snprintf(count[k], sizeof count[k], "%s", ck);
        free(ck);
        owner[k] = m[k % 3];
        redisReply *r = hlt_cluster_cmd(f, owner[k], "DEL %s", count[k]);
        if (r) freeReplyObject(r);
    }
    for (int p = 0; p < 2; p++)
        if ((kid[p] = fork()) == 0) {
            hilock_options o = hlt_options((const char *[]){ f->url }, 1);
            hilock_client *c;
            int bad = 0;
            o.io_timeout_ms = 2000;
            o.failover_guard = 0;
            if (hilock_client_new(&o, &c) != HILOCK_OK) _exit(2);   /* (a child: no assert) */
            for (int i = 0; i < ROUNDS * NKEYS && !bad; i++) {
                int k = (i + p) % NKEYS;
                hilock *l;
                redisReply *g, *s;
                if (hilock_acquire(c, keys[k], 5000, 10000, &l) != HILOCK_OK) {
                    bad = 3;
                    break;
                }
                g = hlt_cluster_cmd(f, owner[k], "GET %s", count[k]);   /* read, then write: */
                s = hlt_cluster_cmd(f, owner[k], "SET %s %lld", count[k],   /* only the lock */
                                    (g && g->type == REDIS_REPLY_STRING ? atoll(g->str) : 0) + 1);   /* keeps it exact */
                if (!s || s->type != REDIS_REPLY_STATUS) bad = 4;
                if (g) freeReplyObject(g);
                if (s) freeReplyObject(s);
                if (hilock_release(l) != HILOCK_OK) bad = 5;
                hilock_free(l);
            }
            hilock_client_free(c);
            _exit(bad);
        }
    for (int p = 0; p < 2; p++) cr_assert_eq(hlt_reap(kid[p], 90000), 0, "process %d failed", p);
    for (int k = 0; k < NKEYS; k++) {
        char *v = hlt_cluster_get(f, owner[k], count[k]);
        cr_assert(v && atoll(v) == 2 * ROUNDS, "%s: %s, want %d", count[k], v ? v : "none", 2 * ROUNDS);
        free(v);
    }
}

/* Node i's clients blocked in a command (INFO clients), -1 if it did not answer. */
static long long blocked_on(hlt_cluster *f, int i)
{
    redisReply *r = hlt_cluster_cmd(f, i, "INFO clients");
    const char *p = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "blocked_clients:") : NULL;
    long long n = p ? atoll(p + strlen("blocked_clients:")) : -1;
    if (r) freeReplyObject(r);
    return n;
}

typedef struct blocked_want { hlt_cluster *f; const int *shard; int n; } blocked_want;

/* Is at least one client blocked on each of the n shards? (The cluster is shared: another
 * test's waiter may count too; ours then has at worst its poll, and the bound below says so.) */
static int all_blocked(void *arg)
{
    blocked_want *w = arg;
    for (int i = 0; i < w->n; i++)
        if (blocked_on(w->f, w->shard[i]) < 1) return 0;
    return 1;
}

/* Blocking and on the loop (tests/scenario.h): a waiter on a key of every shard (a BLPOP on a
 * side connection to the shard's master, polling as the fallback, and polling would take
 * seconds) is woken by the holder's release and gets the key on its master. */
HLT_SCENARIO(cluster, wake_on_release_reaches_a_waiter_on_the_owning_shard)
{
    hlt_cluster *f = fx(0);
    hilock_options o = scn_options(f);
    enum { N = 3 };
    hlt_run *a, *w[N];
    hilock *l[N], *wl[N];
    char key[N][64];
    int m[3], from[3] = { 0, 0, 0 };
    long long t0;
    o.retry_delay_ms = o.poll_ms = 5000;   /* (polling would take seconds) */
    a = hlt_run_new(&o, mode);
    masters(f, m);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(hlt_cluster_key_on(f, m[i], mode ? "wake:loop:" : "wake:", &from[i], key[i], sizeof key[i]), 0,
                     "no key on master %d", m[i]);
        cr_assert_eq(hlt_run_acquire(a, key[i], 30000, 0, &l[i]), HILOCK_OK, "%s", hlt_run_errmsg(a));
        w[i] = hlt_run_peer(a);
        hlt_run_begin_acquire(w[i], key[i], 10000, 20000);
    }
    cr_assert(hlt_run_until(a, all_blocked, &(blocked_want){ f, m, N }, 10000),
              "the waiters never blocked on their wake-ups");
    for (int i = 0; i < N; i++) cr_assert_not(hlt_run_ended(w[i]), "waiter %s ended while held", key[i]);
    t0 = hlt_now_ms();
    for (int i = 0; i < N; i++) cr_assert_eq(hlt_run_release(a, l[i]), HILOCK_OK, "%s", hlt_run_errmsg(a));
    for (int i = 0; i < N; i++) {
        char *v;
        cr_assert_eq(hlt_run_end(w[i], 20000, &wl[i]), HILOCK_OK, "waiter %s: %s", key[i], hlt_run_errmsg(w[i]));
        cr_assert_lt(hlt_run_ended_at(w[i]) - t0, 1500, "the waiter of %s was not woken (polling?)", key[i]);
        v = hlt_cluster_get(f, m[i], key[i]);
        cr_assert(v && !strcmp(v, hilock_token(wl[i])), "%s is not the waiter's on master %d", key[i], m[i]);
        free(v);
    }
    for (int i = 0; i < N; i++) {
        cr_assert_eq(hlt_run_release(w[i], wl[i]), HILOCK_OK, "%s", hlt_run_errmsg(w[i]));
        cr_assert_eq(hlt_cluster_exists(f, m[i], key[i]), 0);
        hilock_free(l[i]);
        hilock_free(wl[i]);
        hlt_run_free(w[i]);
    }
    hlt_run_free(a);
}

Test(cluster, the_hilock_command_accepts_a_cluster_url)
{
    hlt_cluster *f = fx(0);
    char bin[512], port[16];
    pid_t kid;
    cr_assert_eq(hlt_built_bin(bin, sizeof bin, "hilock"), 0, "%s not built", bin);
    snprintf(port, sizeof port, "%d", f->port[0]);
    if ((kid = fork()) == 0) {   /* the command sees the lock held (redis-cli follows MOVED) */
        execl(bin, "hilock", "-s", f->url, "-t", "2s", "-w", "20s", "cli:{job}", "--", "sh", "-c",
              "redis-cli -c -p \"$0\" EXISTS 'cli:{job}' | grep -qx 1", port, (char *)NULL);
        _exit(127);
    }
    cr_assert_eq(hlt_reap(kid, 20000), 0, "hilock with a cluster URL failed");
    cr_assert_eq(hlt_cluster_exists(f, hlt_cluster_key_master(f, "cli:{job}"), "cli:{job}"), 0, "not released");
}

/* A cluster URL is one master to Redlock: a quorum over a cluster and two single masters. */
Test(cluster, a_cluster_is_one_redlock_member)
{
    hlt_cluster *f = fx(0);
    hlt_redis *a = hlt_redis_start(NULL), *b = hlt_redis_start(NULL);
    const char *urls[3];
    hilock_options o;
    hilock_client *c = NULL;
    hilock *l;
    char *v;
    int m;
    cr_assert(a && b, "redis-server did not start");
    urls[0] = f->url;
    urls[1] = a->url;
    urls[2] = b->url;
    o = hlt_options(urls, 3);
    o.retry_delay_ms = 50;   /* the library's default */
    o.failover_guard = 0;
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "redlock:{x}", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    m = hlt_cluster_key_master(f, "redlock:{x}");
    v = hlt_cluster_get(f, m, "redlock:{x}");
    cr_assert(v && !strcmp(v, hilock_token(l)), "the cluster does not hold it");
    free(v);
    v = hlt_get(a, "redlock:{x}");
    cr_assert(v && !strcmp(v, hilock_token(l)));
    free(v);
    hlt_redis_kill(b);   /* a quorum of 2 of 3 is left: the cluster is one of them */
    cr_assert_eq(hilock_extend(l, 10000), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_cluster_exists(f, m, "redlock:{x}"), 0);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(a);
    hlt_redis_stop(b);
}

/* node i's INFO replication master_replid and CLUSTER INFO cluster_my_epoch */
static void node_identity(hlt_cluster *f, int i, char replid[41], long long *epoch)
{
    redisReply *a = hlt_cluster_cmd(f, i, "INFO replication"), *b = hlt_cluster_cmd(f, i, "CLUSTER INFO");
    const char *p = a && a->str ? strstr(a->str, "master_replid:") : NULL;
    const char *q = b && b->str ? strstr(b->str, "cluster_my_epoch:") : NULL;
    cr_assert(p && q, "node %d: no identity", i);
    memcpy(replid, p + 14, 40);
    replid[40] = '\0';
    *epoch = atoll(q + 17);
    freeReplyObject(a);
    freeReplyObject(b);
}

/* The slot record of key's slot on node i, hilock:guard:{T} with T a tag of the slot (found
 * among the slot's keys), into rec. */
static void record_key(hlt_cluster *f, int i, const char *key, char *rec, size_t cap)
{
    redisReply *r = hlt_cluster_cmd(f, i, "CLUSTER GETKEYSINSLOT %d 100", hlt_cluster_keyslot(f, key));
    rec[0] = '\0';
    for (size_t k = 0; r && r->type == REDIS_REPLY_ARRAY && k < r->elements; k++)
        if (!strncmp(r->element[k]->str, "hilock:guard:{", 14)) snprintf(rec, cap, "%s", r->element[k]->str);
    if (r) freeReplyObject(r);
    cr_assert(rec[0], "no record in the slot of %s", key);
}

static char *record_epoch(hlt_cluster *f, int i, const char *key)
{
    char rec[64];
    redisReply *r;
    char *v;
    record_key(f, i, key, rec, sizeof rec);
    r = hlt_cluster_cmd(f, i, "HGET %s epoch", rec);
    v = r && r->type == REDIS_REPLY_STRING ? strdup(r->str) : NULL;
    if (r) freeReplyObject(r);
    return v;
}

static void set_record_epoch(hlt_cluster *f, int i, const char *key, const char *value)
{
    char rec[64];
    redisReply *x;
    record_key(f, i, key, rec, sizeof rec);
    x = hlt_cluster_cmd(f, i, "HSET %s epoch %s", rec, value);
    cr_assert(x && x->type == REDIS_REPLY_INTEGER, "could not set the record's epoch");
    freeReplyObject(x);
}

static uint64_t fence_epoch(hilock_client *c, const char *key)
{
    hilock *l;
    uint64_t e;
    cr_assert_eq(hilock_acquire(c, key, 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    e = hilock_fence(l) >> 42;
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    return e;
}

/* Node i's view of the config epoch of the node on port, from its CLUSTER NODES (-1: none) */
static long long epoch_seen(hlt_cluster *f, int i, int port)
{
    redisReply *r = hlt_cluster_cmd(f, i, "CLUSTER NODES");
    char at[32];
    long long e = -1;
    const char *p;
    snprintf(at, sizeof at, ":%d", port);
    for (p = r && r->type == REDIS_REPLY_STRING ? r->str : NULL; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        char addr[128], flags[128], master[64];
        const char *hit;
        long long ping, pong, ep;
        if (sscanf(p, "%*s %127s %127s %63s %lld %lld %lld", addr, flags, master, &ping, &pong, &ep) != 6) continue;
        hit = strstr(addr, at);   /* "ip:port@cport" (3.2+) or "ip:port" */
        if (hit && (hit[strlen(at)] == '@' || hit[strlen(at)] == '\0')) e = ep;
    }
    if (r) freeReplyObject(r);
    return e;
}

/* Every node sees master m's config epoch as m does (gossip carries a bump a moment later;
 * a client's slot map comes from whichever node answers first). */
static void await_epoch_known(hlt_cluster *f, int m)
{
    long long end = hlt_now_ms() + 10000, own = -1;
    int all = 0;
    while (!all && hlt_now_ms() < end) {
        own = epoch_seen(f, m, f->port[m]);
        all = own > 0;
        for (int i = 0; all && i < f->nnodes; i++) all = epoch_seen(f, i, f->port[m]) == own;
        if (!all) hlt_sleep_ms(50);
    }
    cr_assert(all, "the nodes do not agree on node %d's config epoch (its own: %lld) in 10 s", m, own);
}

/* The fencing epoch is the slot's, kept with the master's history in the slot's record: the
 * first grant reads CLUSTER INFO there, later ones take it from the record (no script, no
 * CLUSTER INFO per call); a record epoch below what the slot map gives the master (read while
 * the master was still importing the slot) is read again; one of another history is read
 * again too, and never lowered. */
Test(cluster, the_fence_epoch_is_the_slots_record_checked_against_the_map)
{
    hlt_cluster *f = fx(0);
    hilock_options o = hlt_options((const char *[]){ f->url }, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;
    hilock_client *c = hlt_client_new(&o);
    char key[64], replid[41], want[64], *v;
    long long epoch;
    uint64_t first;
    int m;
    snprintf(key, sizeof key, "epochrec:%d", (int)getpid());
    m = hlt_cluster_key_master(f, key);
    /* (an earlier test's slot move may have bumped its epoch: the map this client reads must
     * already say so, or "below the map's" below means below an older epoch) */
    await_epoch_known(f, m);
    first = fence_epoch(c, key);
    node_identity(f, m, replid, &epoch);
    cr_assert_gt(epoch, 0, "a cluster made by redis-cli gives every master an epoch");
    cr_assert_eq(first, (uint64_t)epoch, "the first grant's epoch is the master's (CLUSTER INFO)");
    snprintf(want, sizeof want, "%s:%lld", replid, epoch);
    v = record_epoch(f, m, key);
    cr_assert(v && !strcmp(v, want), "record epoch '%s', want '%s'", v ? v : "(none)", want);
    free(v);
    cr_assert_eq(fence_epoch(c, key), (uint64_t)epoch);
    /* the next grants take it from the record */
    snprintf(want, sizeof want, "%s:%lld", replid, epoch + 1000);
    set_record_epoch(f, m, key, want);
    cr_assert_eq(fence_epoch(c, key), (uint64_t)epoch + 1000, "the fence did not come from the record");
    /* one below the map's: read again, and written back */
    snprintf(want, sizeof want, "%s:%lld", replid, epoch - 1);
    set_record_epoch(f, m, key, want);
    cr_assert_eq(fence_epoch(c, key), (uint64_t)epoch, "a record epoch below the map's was used");
    snprintf(want, sizeof want, "%s:%lld", replid, epoch);
    v = record_epoch(f, m, key);
    cr_assert(v && !strcmp(v, want), "record epoch '%s' after the re-read, want '%s'", v ? v : "(none)", want);
    free(v);
    /* an epoch of another history (the record moved here with the slot, or a failover) is
     * read again, and is a floor: tokens never go below what the slot has handed out */
    set_record_epoch(f, m, key, "0123456789012345678901234567890123456789:1");
    cr_assert_eq(fence_epoch(c, key), (uint64_t)epoch);
    set_record_epoch(f, m, key, "0123456789012345678901234567890123456789:4000");
    cr_assert_eq(fence_epoch(c, key), 4000, "an epoch below the slot's last one was used");
    snprintf(want, sizeof want, "%s:%d", replid, 4000);
    v = record_epoch(f, m, key);
    cr_assert(v && !strcmp(v, want), "record epoch '%s', want '%s'", v ? v : "(none)", want);
    free(v);
    snprintf(want, sizeof want, "%s:%lld", replid, epoch);
    set_record_epoch(f, m, key, want);
    hilock_client_free(c);
}

/* A cluster of one redis-server that serves every slot, its URL in url: a second cluster
 * for the cost of one server. */
static hlt_redis *one_node_cluster(char *url, size_t cap)
{
    hlt_redis *r = hlt_redis_start("--cluster-enabled yes --cluster-config-file nodes.conf");
    redisReply *x;
    long long end;
    int ok = 0;
    cr_assert_not_null(r);
    x = hlt_cli(r) ? hlt_addslots(hlt_cli(r), 0, 16383) : NULL;
    cr_assert(x && x->type == REDIS_REPLY_STATUS, "ADDSLOTS");
    freeReplyObject(x);
    for (end = hlt_now_ms() + 10000; !ok && hlt_now_ms() < end; hlt_sleep_ms(20)) {
        x = hlt_cmd(r, "CLUSTER INFO");
        ok = x && x->str && strstr(x->str, "cluster_state:ok");
        if (x) freeReplyObject(x);
    }
    cr_assert(ok, "the one-node cluster is not ok");
    snprintf(url, cap, "redis-cluster://127.0.0.1:%d", r->port);
    return r;
}

/* A cluster of one node that has met no other names itself with an empty ip in CLUSTER NODES
 * (":port@cport"): the seed that answered is that node. */
Test(cluster, a_one_node_cluster_is_reached_through_its_seed)
{
    hilock_client *c;
    hilock *l;
    char url[64], *v;
    hlt_redis *r = one_node_cluster(url, sizeof url);
    hilock_options o = hlt_options((const char *[]){ url }, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "solo", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    v = hlt_get(r, "solo");
    cr_assert(v && !strcmp(v, hilock_token(l)));
    free(v);
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_exists(r, "solo"), 0);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* The guard's record on a one-node cluster: its maxttl field (-1: no record). */
static long long record_maxttl(hlt_redis *r)
{
    redisReply *k = hlt_cmd(r, "KEYS hilock:guard:*"), *x;
    long long v = -1;
    cr_assert(k && k->type == REDIS_REPLY_ARRAY && k->elements <= 1, "KEYS hilock:guard:*");
    if (k->elements == 1 && (x = hlt_cmd(r, "HGET %s maxttl", k->element[0]->str))) {
        if (x->type == REDIS_REPLY_STRING) v = atoll(x->str);
        freeReplyObject(x);
    }
    freeReplyObject(k);
    return v;
}

/* A Redlock of two clusters (one node each) under the guard: the first acquire finds no record
 * on either and an extend to a longer ttl outgrows both records, so failover.lua runs on both
 * members, each in a round trip of its own; every member's answer is judged as that member's
 * (a grant is kept on both, the records are written on both). */
Test(cluster, a_redlock_of_two_clusters_judges_each_members_failover_check)
{
    char url[2][64], *v;
    const char *urls[2] = {url[0], url[1]};
    hlt_redis *r[2];
    hilock_options o;
    hilock_client *c = NULL;
    hilock *l;
    for (int k = 0; k < 2; k++) r[k] = one_node_cluster(url[k], sizeof url[k]);
    o = hlt_options(urls, 2);
    o.retry_delay_ms = 50;   /* the library's default */
    o.failover_guard = 1;
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "twoclusters", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    for (int k = 0; k < 2; k++) {
        v = hlt_get(r[k], "twoclusters");
        cr_assert(v && !strcmp(v, hilock_token(l)), "cluster %d does not hold the grant", k);
        free(v);
        cr_assert_eq(record_maxttl(r[k]), 10000, "cluster %d: failover.lua did not write the record", k);
    }
    cr_assert_eq(hilock_extend(l, 30000), HILOCK_OK, "%s", hilock_client_errmsg(c));
    for (int k = 0; k < 2; k++) {
        cr_assert_gt(hlt_pttl(r[k], "twoclusters"), 20000, "cluster %d kept the old ttl", k);
        cr_assert_eq(record_maxttl(r[k]), 30000, "cluster %d: the extend's failover.lua did not run", k);
    }
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    for (int k = 0; k < 2; k++) cr_assert_eq(hlt_exists(r[k], "twoclusters"), 0);
    hilock_free(l);
    hilock_client_free(c);
    for (int k = 0; k < 2; k++) hlt_redis_stop(r[k]);
}
