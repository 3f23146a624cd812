/* SPDX-License-Identifier: BSD-3-Clause */
/* test_guarded_cluster.c -- hilock_guarded_command (issue 38) on Redis Cluster: the command's
 * keys, found from the server's key specs, are the script's KEYS; one in the lock key's slot
 * runs on the master that serves it, one outside it is refused (EINVAL) before anything is
 * sent. One real cluster (cluster_fixture.h) for the suite, started by the runner; the tests
 * only share it. What each key holds is read back on the master that serves it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_fixture.h"
#include "clients.h"
#include "fixture.h"
#include "hilock.h"

#define NEEDS_40() HLT_NEEDS(40000, "Cluster URLs need failover awareness (Redis 4.0+)")

HLT_CLUSTER_SHARE_HOOK("test_guarded_cluster", 40000)
HLT_CLUSTER_UNSHARE_HOOK()

HLT_CLUSTER_SHARED_SUITE(guarded_cluster)

/* GET key on the master that serves it: malloc'd, NULL if none. */
static char *get_on(hlt_cluster *f, const char *key)
{
    int m = hlt_cluster_key_master(f, key);
    redisReply *r = m >= 0 ? hlt_cluster_cmd(f, m, "GET %s", key) : NULL;
    char *v = r && r->type == REDIS_REPLY_STRING ? strdup(r->str) : NULL;
    if (r) freeReplyObject(r);
    return v;
}

Test(guarded_cluster, keys_in_the_lock_slot_run_others_are_refused)
{
    NEEDS_40();
    hlt_cluster *f = fx(0);
    hilock_options o = hlt_options((const char *[]){ f->url }, 1);
    hilock_client *c;
    hilock *l = NULL;
    hilock_reply *r = (hilock_reply *)1;
    char *v;
    o.io_timeout_ms = 2000;
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "gc:{job7}:lock", 30000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    /* the lock's {tag}: the same slot, on the same master */
    cr_assert_eq(hilock_guarded_command(l, 3, (const char *[]){ "SET", "gc:{job7}:state", "done" }, NULL, &r),
                 HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_reply_free(r);
    v = get_on(f, "gc:{job7}:state");
    cr_assert(v && !strcmp(v, "done"), "state is %s", v ? v : "(none)");
    free(v);
    /* MSET with one key elsewhere: refused, nothing written, not even the key in the slot */
    cr_assert_eq(hilock_guarded_command(l, 5, (const char *[]){ "MSET", "gc:{job7}:a", "1", "gc:other", "2" },
                                        NULL, &r), HILOCK_EINVAL);
    cr_assert_null(r);
    cr_assert(strstr(hilock_client_errmsg(c), "slot"), "%s", hilock_client_errmsg(c));
    cr_assert(strstr(hilock_client_errmsg(c), "gc:other"), "%s", hilock_client_errmsg(c));
    v = get_on(f, "gc:{job7}:a");
    cr_assert_null(v, "a key was written");
    v = get_on(f, "gc:other");
    cr_assert_null(v, "a key was written");
    /* keys that move (COMMAND GETKEYS): the same rule */
    cr_assert_eq(hilock_guarded_command(l, 4, (const char *[]){ "ZUNIONSTORE", "gc:dest", "1", "gc:{job7}:z" },
                                        NULL, &r), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(c), "gc:dest"), "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_guarded_command(l, 4, (const char *[]){ "ZUNIONSTORE", "gc:{job7}:d", "1", "gc:{job7}:z" },
                                        NULL, &r), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_reply_free(r);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    cr_assert_eq(hilock_guarded_command(l, 3, (const char *[]){ "SET", "gc:{job7}:state", "late" }, NULL, &r),
                 HILOCK_NOT_HELD);
    v = get_on(f, "gc:{job7}:state");
    cr_assert(v && !strcmp(v, "done"), "state is %s", v ? v : "(none)");
    free(v);
    hilock_free(l);
    hilock_client_free(c);
}
