/* SPDX-License-Identifier: BSD-3-Clause */
/* test_findings.c -- what make torture and make fuzz found, pinned down (torture/README.md,
 * "Findings"). Each test replays the situation the harness met, deterministically. */
#include <criterion/criterion.h>
#include <string.h>

#include "checks.h"
#include "clients.h"
#include "fixture.h"
#include "hilock.h"

#define N 5

static hlt_redis *m[N];

static const char *urls[N];   /* m[]'s: the Redlock's servers */

static void start(void)
{
    for (int i = 0; i < N; i++) {
        m[i] = hlt_redis_started(NULL);
        urls[i] = m[i]->url;
    }
}

static void stop(void)
{
    for (int i = 0; i < N; i++) hlt_redis_stop(m[i]);
}

/* A lock granted on a bare majority (masters 0, 1, 2: the other two hold someone else's
 * value), then two of those three stopped: release (and extend, check) hear "ours" from
 * master 2, "someone else's" from 3 and 4, nothing from 0 and 1. The lock may still hold its
 * majority, so nothing is decided (ENOQUORUM), never NOT_HELD; once the masters answer again,
 * the release completes. make torture (redlock) saw NOT_HELD here. */
Test(findings, redlock_release_with_its_majority_stopped_is_undecided)
{
    hilock_options o;
    hilock_client *c;
    hilock *l;
    start();
    o = hlt_options(urls, N);
    /* (1 s: a frozen master costs each call that long; 200 ms timed a loaded machine's
     * acquire out on a live master, and the grant fell short of its quorum) */
    o.io_timeout_ms = o.connect_timeout_ms = 1000;
    o.retry_delay_ms = 50;   /* the library's default */
    c = hlt_client_new(&o);
    for (int i = 3; i < N; i++) freeReplyObject(hlt_cmd(m[i], "SET res someone-else PX 60000"));
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_redis_freeze(m[0]);
    hlt_redis_freeze(m[1]);
    cr_assert_eq(hilock_check(l), HILOCK_ENOQUORUM, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_extend(l, 10000), HILOCK_ENOQUORUM, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_ENOQUORUM, "%s", hilock_client_errmsg(c));
    hlt_redis_thaw(m[0]);
    hlt_redis_thaw(m[1]);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    for (int i = 0; i < 3; i++) cr_assert_eq(hlt_exists(m[i], "res"), 0, "master %d", i);
    for (int i = 3; i < N; i++) {
        char *v = hlt_get(m[i], "res");
        cr_assert_str_eq(v, "someone-else", "master %d: not ours, untouched", i);
        free(v);
    }
    hilock_free(l);
    hilock_client_free(c);
    stop();
}

/* The same lock, when a master that granted it answers "no such key" (it restarted empty):
 * that is evidence, and with only two confirmations left the answer is NOT_HELD. */
Test(findings, redlock_release_after_a_granting_master_lost_it_is_not_held)
{
    hilock_options o;
    hilock_client *c;
    hilock *l;
    start();
    o = hlt_options(urls, N);
    /* (1 s: a frozen master costs each call that long; 200 ms timed a loaded machine's
     * acquire out on a live master, and the grant fell short of its quorum) */
    o.io_timeout_ms = o.connect_timeout_ms = 1000;
    o.retry_delay_ms = 50;   /* the library's default */
    c = hlt_client_new(&o);
    for (int i = 3; i < N; i++) freeReplyObject(hlt_cmd(m[i], "SET res someone-else PX 60000"));
    cr_assert_eq(hilock_acquire(c, "res", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    freeReplyObject(hlt_cmd(m[0], "DEL res"));
    cr_assert_eq(hilock_release(l), HILOCK_NOT_HELD, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    hilock_client_free(c);
    stop();
}
