/* SPDX-License-Identifier: BSD-3-Clause */
/* test_guarded_sentinel.c -- hilock_guarded_command (issue 38) behind Sentinel, real servers
 * (sentinel_fixture.h: a master, a replica, three Sentinels): after a failover that kept the
 * lock (it had reached the replica) the guarded write runs on the new master; after one that
 * lost it (replication cut, the master frozen until the replica took over, then thawed with
 * the key) it is LOST or NOT_HELD and nothing ran, on the new master or the old. What each
 * server holds is read back on connections of the fixture's own. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients.h"
#include "hilock.h"
#include "sentinel_fixture.h"

static hlt_sentinel *F;

static void fini(void)
{
    hlt_sentinel_stop(F);
    F = NULL;
}

TestSuite(guarded_sentinel, .fini = fini, .timeout = 120);
#define NEEDS_40() HLT_NEEDS(40000, "Sentinel URLs need failover awareness (Redis 4.0+)")

static hilock_client *client_for(void)
{
    hilock_options o;
    F = hlt_sentinel_start();
    cr_assert_not_null(F, "sentinel fixture did not start");
    o = hlt_options((const char *const[]){ F->url }, 1);
    return hlt_client_new(&o);
}

static hilock_status set_guarded(hilock *l, const char *key, const char *v, hilock_reply **r)
{
    return hilock_guarded_command(l, 3, (const char *[]){ "SET", key, v }, NULL, r);
}

Test(guarded_sentinel, a_failover_that_kept_the_lock_lets_the_write_run_on_the_new_master)
{
    hilock_client *c;
    hilock *l = NULL;
    hilock_reply *r = NULL;
    char *v;
    NEEDS_40();
    c = client_for();
    cr_assert_eq(hilock_acquire(c, "gs:job", 30000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert(hlt_data_holds_within(F, 1, "gs:job", hilock_token(l), 3000), "the replica never got the lock");
    cr_assert_eq(hlt_sentinel_failover(F, 0), 0, "failover did not complete");
    cr_assert_eq(set_guarded(l, "gs:state", "after", &r), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_reply_free(r);
    v = hlt_data_get(F, 1, "gs:state");
    cr_assert(v && !strcmp(v, "after"), "the new master holds %s", v ? v : "(none)");
    free(v);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    hilock_client_free(c);
}

Test(guarded_sentinel, a_failover_that_lost_the_lock_runs_nothing)
{
    hilock_client *c;
    hilock *l = NULL;
    hilock_reply *r = (hilock_reply *)1;
    hilock_status st;
    NEEDS_40();
    c = client_for();
    cr_assert_eq(hlt_sentinel_cut(F, 1), 0, "could not cut replication");
    cr_assert_eq(hilock_acquire(c, "gs:res", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_sleep_ms(200);   /* (time for a write that should not replicate to do so) */
    cr_assert_eq(hlt_data_exists(F, 1, "gs:res"), 0, "the lock reached the replica: not a lost write");
    hlt_sentinel_freeze(F, 0);
    cr_assert_eq(hlt_sentinel_wait_switch(F, 1, 20000), 0, "no failover");
    hlt_sentinel_thaw(F, 0);   /* and it still believes it is the master, with our key */
    st = set_guarded(l, "gs:state", "late", &r);
    cr_log_info("after the failover: %s: %s", hilock_strerror(st), hilock_client_errmsg(c));
    cr_assert(st == HILOCK_LOST || st == HILOCK_NOT_HELD, "%s: %s", hilock_strerror(st), hilock_client_errmsg(c));
    cr_assert_null(r);
    cr_assert_eq(hlt_data_exists(F, 1, "gs:state"), 0, "the write ran on the new master");
    cr_assert_eq(hlt_data_exists(F, 0, "gs:state"), 0, "the write ran on the old master");
    cr_assert_eq(hilock_validity_ms(l), 0);
    hilock_free(l);
    hilock_client_free(c);
}
