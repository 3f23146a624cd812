/* SPDX-License-Identifier: BSD-3-Clause */
/* test_observe_topo.c -- hilock_observe.h's topology events on the heavy fixtures, one test
 * each: a Sentinel failover (FAILOVER naming the new master, the failover guard's start) and
 * a Cluster resharding (ASK while the slot migrates, MOVED after it, the slot map's refresh),
 * with their counters. The rest: test_observe.c. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "cluster_fixture.h"
#include "clients.h"
#include "fixture.h"
#include "hilock.h"
#include "hilock_observe.h"
#include "observe_rec.h"
#include "sentinel_fixture.h"

static hlt_sentinel *S;
static hlt_cluster *K;

static void fini(void)
{
    hlt_sentinel_stop(S);
    hlt_cluster_stop(K);
    S = NULL;
    K = NULL;
}

TestSuite(observe_topo, .fini = fini, .timeout = 120);

Test(observe_topo, a_sentinel_failover_is_reported_with_the_new_master_and_the_guard)
{
    HLT_NEEDS(40000, "Sentinel needs replication ids (PSYNC2, Redis 4.0+)");
    hilock_client *c, *c2;
    hilock *l, *l2 = NULL;
    hlt_rec *x = hlt_rec_new(), *y = hlt_rec_new();
    const hlt_rec_ev *e;
    hilock_stats s;
    char port[16];
    cr_assert_not_null(S = hlt_sentinel_start(), "sentinel fixture did not start");
    c = hlt_client(S->url);
    hilock_set_observer(c, hlt_rec_observer, x);
    /* (the guard holds off grants for the longest ttl granted before: kept short) */
    cr_assert_eq(hilock_acquire(c, "obs:job", 8000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_rec_count(x, HILOCK_EVENT_FAILOVER), 0);
    cr_assert(hlt_data_holds_within(S, 1, "obs:job", hilock_token(l), 3000), "the replica never got it");
    cr_assert_eq(hlt_sentinel_failover(S, 0), 0, "failover did not complete");
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_not_null(e = hlt_rec_find(x, HILOCK_EVENT_FAILOVER, 0), "no FAILOVER event");
    snprintf(port, sizeof port, ":%d", S->data[1]->port);
    cr_assert(strstr(e->node, port), "the new master (%s) in '%s'", port, e->node);
    hilock_client_stats(c, &s);
    cr_assert_geq(s.failovers, 1);
    cr_assert_geq(s.reconnects, 1, "moved to the new master");
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    /* the new master guards: a new acquire is refused for a while, then granted */
    c2 = hlt_client(S->url);
    hilock_set_observer(c2, hlt_rec_observer, y);
    cr_assert_eq(hilock_acquire(c2, "obs:job", 8000, 20000, &l2), HILOCK_OK, "%s", hilock_client_errmsg(c2));
    cr_assert_not_null(e = hlt_rec_find(y, HILOCK_EVENT_GUARD_START, 0), "no GUARD_START");
    cr_assert_str_eq(e->key, "obs:job");
    cr_assert_eq(e->e.status, HILOCK_BUSY);
    cr_assert_gt(e->e.duration_us, 0, "how long it may hold off");
    cr_assert_eq(hlt_rec_count(y, HILOCK_EVENT_GUARD_START), 1, "once per acquire");
    cr_assert_not_null(e = hlt_rec_find(y, HILOCK_EVENT_GUARD_PASSED, 0), "no GUARD_PASSED");
    cr_assert_gt(e->e.duration_us, 0);
    cr_assert_eq(hilock_release(l2), HILOCK_OK, "%s", hilock_client_errmsg(c2));
    hilock_free(l);
    hilock_free(l2);
    hilock_client_free(c);
    hilock_client_free(c2);
}

Test(observe_topo, a_cluster_resharding_reports_ask_moved_and_the_map_refresh_and_no_first_connect_as_a_reconnect)
{
    HLT_NEEDS(40000, "Cluster URLs need failover awareness (Redis 4.0+)");
    hilock_client *c;
    hilock *l;
    hlt_rec *x = hlt_rec_new();
    const hlt_rec_ev *e;
    hilock_stats s;
    char key[64], target[32];
    int m[3], slot, asks = 0, moves = 0;
    cr_assert_not_null(K = hlt_cluster_start_masters(), "cluster fixture did not start");
    cr_assert_eq(hlt_cluster_masters(K, m), 3);
    cr_assert_eq(hlt_cluster_key_on(K, m[0], "obs:", NULL, key, sizeof key), 0);
    slot = hlt_cluster_keyslot(K, key);
    c = hlt_client(K->url);
    hilock_set_observer(c, hlt_rec_observer, x);
    cr_assert_eq(hilock_acquire(c, key, 60000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_not_null(e = hlt_rec_find(x, HILOCK_EVENT_MAP_REFRESH, 0), "the first map");
    cr_assert_eq(e->e.status, HILOCK_OK);
    cr_assert_geq(e->e.duration_us, 0);
    cr_assert_eq(hlt_rec_count(x, HILOCK_EVENT_REDIRECT), 0);
    for (int i = 1; i < 3; i++) {   /* every shard's first connection: no reconnect */
        char other[64];
        hilock *lo;
        cr_assert_eq(hlt_cluster_key_on(K, m[i], "obs:", NULL, other, sizeof other), 0);
        cr_assert_eq(hilock_acquire(c, other, 60000, 0, &lo), HILOCK_OK, "%s", hilock_client_errmsg(c));
        cr_assert_eq(hilock_release(lo), HILOCK_OK, "%s", hilock_client_errmsg(c));
        hilock_free(lo);
    }
    hilock_client_stats(c, &s);
    cr_assert_geq(s.connects, 3);
    cr_assert_eq(s.reconnects, 0, "a fresh client's shards are first connections");
    for (int i = 0; (e = hlt_rec_find(x, HILOCK_EVENT_CONNECT, i)); i++)
        cr_assert_eq(e->e.reconnect, 0, "connect %d (%s)", i, e->node);
    cr_assert_eq(hlt_cluster_migrate_begin(K, slot, m[1]), 0);
    cr_assert_eq(hlt_cluster_migrate_keys(K, slot, m[1]), 0);
    cr_assert_eq(hilock_check(l), HILOCK_OK, "ASK: %s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_cluster_migrate_end(K, slot, m[1]), 0);
    cr_assert_eq(hilock_check(l), HILOCK_OK, "MOVED: %s", hilock_client_errmsg(c));
    snprintf(target, sizeof target, ":%d", K->port[m[1]]);
    for (int i = 0; (e = hlt_rec_find(x, HILOCK_EVENT_REDIRECT, i)); i++) {
        cr_assert_str_eq(e->key, key);
        cr_assert(strstr(e->target, target), "to the new owner (%s): '%s'", target, e->target);
        asks += e->e.redirect == HILOCK_REDIRECT_ASK;
        moves += e->e.redirect == HILOCK_REDIRECT_MOVED;
    }
    cr_assert_geq(asks, 1, "no ASK");
    cr_assert_geq(moves, 1, "no MOVED");
    hlt_sleep_ms(300);   /* (a stale map is fetched again at most every 250 ms) */
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_geq(hlt_rec_count(x, HILOCK_EVENT_MAP_REFRESH), 2, "the map fetched again after MOVED");
    hilock_client_stats(c, &s);
    cr_assert_eq(s.redirects, (uint64_t)(asks + moves));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    hilock_client_free(c);
}
