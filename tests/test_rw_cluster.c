/* SPDX-License-Identifier: BSD-3-Clause */
/* test_rw_cluster.c -- semaphores and shared/exclusive locks on Redis Cluster: every key of a
 * lock (KEY's sorted set, its fence counter, holder records, waiter queue) lives in KEY's slot,
 * on the master that serves it, and grant, exclusion and release work there. One real cluster
 * (cluster_fixture.h) for the suite, started by the runner; the tests only share it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_fixture.h"
#include "clients.h"
#include "fixture.h"
#include "hilock.h"
#include "holders.h"

#define NEEDS_40() HLT_NEEDS(40000, "Cluster URLs need failover awareness (Redis 4.0+)")

HLT_CLUSTER_SHARE_HOOK("test_rw_cluster", 40000)
HLT_CLUSTER_UNSHARE_HOOK()

HLT_CLUSTER_SHARED_SUITE(rw_cluster)

static long long zcard_on(hlt_cluster *f, int i, const char *key)
{
    redisReply *r = hlt_cluster_cmd(f, i, "ZCARD %s", key);
    long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -99;
    if (r) freeReplyObject(r);
    return n;
}

/* Every aux key of `key` named in `aux` (suffixes) is on master m, in key's slot. */
static void assert_aux_on(hlt_cluster *f, int m, const char *key, const char *const *aux, size_t n)
{
    char name[128];
    for (size_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "{%s}%s", key, aux[i]);
        cr_assert_eq(hlt_cluster_keyslot(f, name), hlt_cluster_keyslot(f, key), "%s", name);
        cr_assert_eq(hlt_cluster_exists(f, m, name), 1, "%s is not on master %d", name, m);
    }
}

Test(rw_cluster, shared_and_exclusive_grant_and_release_on_every_master)
{
    NEEDS_40();
    hlt_cluster *f = fx(0);
    hilock_options o = hlt_options((const char *[]){ f->url }, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;
    hilock_client *a = hlt_client_new(&o), *b = hlt_client_new(&o);
    static const char *const aux[] = { ":fence", ":holders" };
    int m[3];
    cr_assert_eq(hlt_cluster_masters(f, m), 3);
    for (int i = 0; i < 3; i++) {
        char key[64];
        hilock *s1, *s2, *x = NULL;
        cr_assert_eq(hlt_cluster_key_on(f, m[i], "rw", NULL, key, sizeof key), 0);
        cr_assert_eq(hilock_rw_acquire(a, key, HILOCK_SHARED, 10000, 0, &s1), HILOCK_OK, "%s", hilock_client_errmsg(a));
        cr_assert_eq(hilock_rw_acquire(b, key, HILOCK_SHARED, 10000, 0, &s2), HILOCK_OK, "%s", hilock_client_errmsg(b));
        cr_assert_eq(zcard_on(f, m[i], key), 3, "master %d: two readers and the marker", m[i]);
        assert_aux_on(f, m[i], key, aux, 2);
        cr_assert_eq(hilock_release(s2), HILOCK_OK);
        cr_assert_eq(hilock_rw_acquire(b, key, HILOCK_EXCLUSIVE, 10000, 0, &x), HILOCK_BUSY, "%s",
                     hilock_client_errmsg(b));
        cr_assert_eq(hilock_check(s1), HILOCK_OK, "%s", hilock_client_errmsg(a));
        cr_assert_eq(hilock_release(s1), HILOCK_OK, "%s", hilock_client_errmsg(a));
        cr_assert_eq(hilock_rw_acquire(b, key, HILOCK_EXCLUSIVE, 10000, 0, &x), HILOCK_OK, "%s",
                     hilock_client_errmsg(b));
        cr_assert_gt(hilock_fence(x), hilock_fence(s1));
        cr_assert_eq(hilock_extend(x, 20000), HILOCK_OK, "%s", hilock_client_errmsg(b));
        cr_assert_eq(hilock_release(x), HILOCK_OK, "%s", hilock_client_errmsg(b));
        cr_assert_eq(hlt_cluster_exists(f, m[i], key), 0);
        hilock_free(s1);
        hilock_free(s2);
        hilock_free(x);
    }
    hilock_client_free(a);
    hilock_client_free(b);
}

Test(rw_cluster, semaphore_permits_on_a_tagged_key)
{
    NEEDS_40();
    hlt_cluster *f = fx(0);
    hilock_options o = hlt_options((const char *[]){ f->url }, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;
    hilock_client *c[3] = { hlt_client_new(&o), hlt_client_new(&o), hlt_client_new(&o) };
    static const char *const aux[] = { ":fence", ":holders" };
    const char *key = "jobs:{batch}:nightly";
    char name[64];
    hilock *l[2], *n = NULL;
    int m = hlt_cluster_key_master(f, key);
    cr_assert_geq(m, 0);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(hilock_sem_acquire(c[i], key, 2, 10000, 0, &l[i]), HILOCK_OK, "%s", hilock_client_errmsg(c[i]));
    cr_assert_eq(hilock_sem_acquire(c[2], key, 2, 10000, 0, &n), HILOCK_BUSY, "%s", hilock_client_errmsg(c[2]));
    cr_assert_eq(zcard_on(f, m, key), 3);
    for (size_t i = 0; i < 2; i++) {   /* a tagged key's aux keys append to it */
        snprintf(name, sizeof name, "%s%s", key, aux[i]);
        cr_assert_eq(hlt_cluster_exists(f, m, name), 1, "%s is not on master %d", name, m);
    }
    cr_assert_eq(hilock_release(l[0]), HILOCK_OK, "%s", hilock_client_errmsg(c[0]));
    cr_assert_eq(hilock_sem_acquire(c[2], key, 2, 10000, 0, &n), HILOCK_OK, "%s", hilock_client_errmsg(c[2]));
    cr_assert_gt(hilock_fence(n), hilock_fence(l[1]));
    cr_assert_eq(hilock_release(n), HILOCK_OK);
    cr_assert_eq(hilock_release(l[1]), HILOCK_OK);
    cr_assert_eq(hlt_cluster_exists(f, m, key), 0);
    hilock_free(l[0]);
    hilock_free(l[1]);
    hilock_free(n);
    for (int i = 0; i < 3; i++) hilock_client_free(c[i]);
}

/* A writer waiting on a cluster key is woken by the last reader's release: the waiter queue
 * and the wake-up lists are in the key's slot too. */
Test(rw_cluster, a_waiting_writer_is_woken_on_the_keys_master)
{
    NEEDS_40();
    hlt_cluster *f = fx(0);
    hilock_options o = hlt_options((const char *[]){ f->url }, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;
    hilock_client *a = hlt_client_new(&o);
    hilock *s;
    hlt_bg w = { .url = f->url, .key = "jobs:{wake}:db", .mode = HILOCK_EXCLUSIVE, .ttl_ms = 10000,
                 .wait_ms = 15000, .retry_delay_ms = 5000 };
    int m = hlt_cluster_key_master(f, w.key);
    long long t_rel, end;
    cr_assert_geq(m, 0);
    cr_assert_eq(hilock_rw_acquire(a, w.key, HILOCK_SHARED, 30000, 0, &s), HILOCK_OK, "%s", hilock_client_errmsg(a));
    hlt_bg_start(&w);
    end = hlt_now_ms() + 5000;
    while (zcard_on(f, m, "jobs:{wake}:db:wq") != 1 && hlt_now_ms() < end) hlt_sleep_ms(5);
    cr_assert_eq(zcard_on(f, m, "jobs:{wake}:db:wq"), 1, "the writer never registered on master %d", m);
    hlt_sleep_ms(100);
    t_rel = hlt_now_ms();
    cr_assert_eq(hilock_release(s), HILOCK_OK, "%s", hilock_client_errmsg(a));
    cr_assert_eq(hlt_bg_join(&w, 10000), HILOCK_OK, "%s", w.err);
    cr_log_info("cluster: reader's release -> writer granted: %lld ms", w.t_done - t_rel);
    cr_assert_lt(w.t_done - t_rel, 2000, "granted %lld ms after the release: polled, not woken", w.t_done - t_rel);
    cr_assert_eq(zcard_on(f, m, w.key), 2);
    hlt_bg_free(&w);
    hilock_free(s);
    hilock_client_free(a);
}
