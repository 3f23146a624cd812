/* SPDX-License-Identifier: BSD-3-Clause */
/* test_reentry.c -- hilock locks are not re-entrant (issue 23): an acquire of a key its own
 * blocking client holds is EINVAL at once, with nothing sent, on every blocking acquire entry
 * point (modern, fair, unfenced, legacy, bridge, Redlock, keepalive); after release or free
 * the key is a key like any other, two clients still contend, and so do the tasks of one
 * client attached to an event loop. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "checks.h"
#include "clients.h"
#include "fixture.h"
#include "hilock.h"
#include "hilock_legacy.h"
#include "hilock_libuv.h"

#define HELD "this client already holds %s (hilock locks are not re-entrant)"

HLT_SUITE_WITH_SERVER(reentry, R, .timeout = 60);

typedef enum { K_MODERN, K_FAIR, K_UNFENCED, K_LEGACY, K_BRIDGE } kind;

static hilock_status acquire_as(hilock_client *c, kind k, const char *key, int64_t ttl, int64_t wait,
                                hilock **out)
{
    return k == K_LEGACY ? hilock_legacy_acquire(c, key, ttl, wait, out)
                         : hilock_acquire(c, key, ttl, wait, out);
}

static hilock *must_acquire(hilock_client *c, kind k, const char *key, int64_t ttl, int64_t wait)
{
    hilock *l = NULL;
    hilock_status st = acquire_as(c, k, key, ttl, wait, &l);
    cr_assert_eq(st, HILOCK_OK, "acquire %s: %s (%s)", key, hilock_strerror(st), hilock_client_errmsg(c));
    return l;
}

static long long commands_processed(void)
{
    return hlt_info_int(R, "stats", "total_commands_processed:");
}

/* The second acquire of key on c (wait_ms 3 s: the old code waited it out): EINVAL with the
 * message, well within the wait, *out NULL, and no command reached the server (the only one
 * counted between the two readings is the first INFO); the first lock's value stands. */
static void assert_refused(hilock_client *c, kind k, const char *key, const char *value)
{
    hilock *l2 = (hilock *)1;
    char want[256];
    long long before = commands_processed(), t0 = hlt_now_ms();
    hilock_status st = acquire_as(c, k, key, 30000, 3000, &l2);
    long long took = hlt_now_ms() - t0;
    cr_assert_eq(st, HILOCK_EINVAL, "second acquire of %s: %s (%s)", key, hilock_strerror(st),
                 hilock_client_errmsg(c));
    cr_assert_null(l2);
    snprintf(want, sizeof want, HELD, key);
    cr_assert_str_eq(hilock_client_errmsg(c), want);
    cr_assert_lt(took, 2000, "the refusal took %lld ms", took);
    cr_assert_eq(commands_processed() - before, 1, "the refused acquire sent something");
    if (value) {
        char *v = hlt_get(R, key);
        cr_assert_not_null(v);
        cr_assert_str_eq(v, value);
        free(v);
    }
}

/* Held by c (kind k): the second acquire is refused; after release, acquired again. */
static void refused_then_free_again(kind k)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    hilock_client *c;
    hilock *l;
    o.retry_delay_ms = 10;
    o.fair = k == K_FAIR;
    o.fencing = k != K_UNFENCED;
    o.bridge = k == K_BRIDGE;
    if (k == K_LEGACY || k == K_BRIDGE) cr_assert_eq(hilock_codec_preset("doc", &o.codec), HILOCK_OK);
    c = hlt_client_new(&o);
    l = must_acquire(c, k, "re:k", 30000, 0);
    assert_refused(c, k, "re:k", hilock_token(l));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    l = must_acquire(c, k, "re:k", 30000, 0);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    cr_assert_eq(hlt_exists(R, "re:k"), 0);
    hilock_client_free(c);
}

Test(reentry, modern_acquire_of_a_held_key_is_einval_at_once_and_sends_nothing)
{
    refused_then_free_again(K_MODERN);
}

Test(reentry, fair_acquire_of_a_held_key_is_einval_at_once)
{
    HLT_NEEDS(30200, "fair locks need Redis 3.2");
    refused_then_free_again(K_FAIR);
}

Test(reentry, unfenced_acquire_of_a_held_key_is_einval_at_once)
{
    refused_then_free_again(K_UNFENCED);
}

Test(reentry, legacy_acquire_of_a_held_key_is_einval_at_once)
{
    refused_then_free_again(K_LEGACY);
}

Test(reentry, bridge_acquire_of_a_held_key_is_einval_at_once)
{
    refused_then_free_again(K_BRIDGE);
}

/* A legacy lock and a modern acquire of the same key on one client: the same key. */
Test(reentry, a_legacy_lock_refuses_a_modern_acquire_of_its_key)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    cr_assert_eq(hilock_codec_preset("doc", &o.codec), HILOCK_OK);
    hilock_client *c = hlt_client_new(&o);
    hilock *l = must_acquire(c, K_LEGACY, "re:mixed", 30000, 0);
    assert_refused(c, K_MODERN, "re:mixed", hilock_token(l));
    hilock_free(l);
    hilock_client_free(c);
}

Test(reentry, keepalive_lock_refuses_a_second_acquire_at_once)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    hilock_client *c = hlt_client_new(&o);
    hilock *l = must_acquire(c, K_MODERN, "re:ka", 30000, 0);
    cr_assert_eq(hilock_keepalive(l, NULL, NULL), HILOCK_OK, "%s", hilock_client_errmsg(c));
    assert_refused(c, K_MODERN, "re:ka", hilock_token(l));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    l = must_acquire(c, K_MODERN, "re:ka", 30000, 0);
    hilock_free(l);
    hilock_client_free(c);
}

/* "Live" = not released, not freed: a lock known lost still counts until then. */
Test(reentry, a_lost_lock_counts_until_released)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    hilock_client *c = hlt_client_new(&o);
    hilock *l = must_acquire(c, K_MODERN, "re:lost", 300, 0);
    long long end = hlt_now_ms() + 5000;
    while (hlt_exists(R, "re:lost") && hlt_now_ms() < end) hlt_sleep_ms(20);
    cr_assert_eq(hilock_check(l), HILOCK_NOT_HELD);
    assert_refused(c, K_MODERN, "re:lost", NULL);
    cr_assert_eq(hlt_exists(R, "re:lost"), 0, "the refused acquire wrote the key");
    cr_assert_eq(hilock_release(l), HILOCK_NOT_HELD);
    hilock_free(l);
    l = must_acquire(c, K_MODERN, "re:lost", 30000, 0);
    hilock_free(l);
    hilock_client_free(c);
}

/* Freed without a release: the client no longer holds it, the server still does until its
 * ttl: a plain wait, then OK. */
Test(reentry, a_freed_lock_leaves_an_ordinary_wait_for_its_ttl)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    hilock_client *c = hlt_client_new(&o);
    hilock *l = must_acquire(c, K_MODERN, "re:freed", 400, 0), *l2 = NULL;
    hilock_free(l);
    cr_assert_eq(hilock_acquire(c, "re:freed", 30000, 0, &l2), HILOCK_BUSY, "%s", hilock_client_errmsg(c));
    l2 = must_acquire(c, K_MODERN, "re:freed", 30000, 10000);
    hilock_free(l2);
    hilock_client_free(c);
}

Test(reentry, other_keys_and_other_clients_are_unaffected)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    hilock_client *a = hlt_client_new(&o), *b = hlt_client_new(&o);
    hilock *la = must_acquire(a, K_MODERN, "re:x", 30000, 0);
    hilock *la2 = must_acquire(a, K_MODERN, "re:y", 30000, 0), *lb = NULL;
    hilock_status st = hilock_acquire(b, "re:x", 30000, 0, &lb);
    cr_assert_eq(st, HILOCK_BUSY, "%s (%s)", hilock_strerror(st), hilock_client_errmsg(b));
    cr_assert(strstr(hilock_client_errmsg(b), "held by another owner"), "%s", hilock_client_errmsg(b));
    cr_assert_eq(hilock_release(la), HILOCK_OK);
    lb = must_acquire(b, K_MODERN, "re:x", 30000, 0);
    assert_refused(b, K_MODERN, "re:x", hilock_token(lb));
    hilock_free(la);
    hilock_free(la2);
    hilock_free(lb);
    hilock_client_free(a);
    hilock_client_free(b);
}

/* Many locks of one client (its live locks are kept in lists by key hash): each is refused
 * a second time, each released one can be taken again, the others stay refused. */
Test(reentry, a_client_holding_many_locks_refuses_each_and_frees_each)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    hilock_client *a = hlt_client_new(&o);
    hilock *l[300] = { 0 }, *x = NULL;
    char key[32];
    for (int i = 0; i < 300; i++) {
        snprintf(key, sizeof key, "many:{t}:%d", i);   /* one hash tag: one slot, many lists */
        l[i] = must_acquire(a, K_MODERN, key, 30000, 0);
    }
    for (int i = 0; i < 300; i++) {
        snprintf(key, sizeof key, "many:{t}:%d", i);
        cr_assert_eq(hilock_acquire(a, key, 30000, 0, &x), HILOCK_EINVAL, "%s", key);
        if (i % 2) continue;
        cr_assert_eq(hilock_release(l[i]), HILOCK_OK);
        hilock_free(l[i]);
        l[i] = must_acquire(a, K_MODERN, key, 30000, 0);
    }
    for (int i = 0; i < 300; i++) {
        snprintf(key, sizeof key, "many:{t}:%d", i);
        cr_assert_eq(hilock_release(l[i]), HILOCK_OK);
        hilock_free(l[i]);
        cr_assert_eq(hlt_exists(R, key), 0, "%s", key);
    }
    hilock_client_free(a);
}

Test(reentry, a_long_key_is_named_cut_short_in_the_refusal)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    hilock_client *a = hlt_client_new(&o);
    char *key = malloc(3001), want[256];
    hilock *l = NULL, *l2 = NULL;
    memset(key, 'k', 3000);
    key[3000] = '\0';
    l = must_acquire(a, K_MODERN, key, 30000, 0);
    cr_assert_eq(hilock_acquire(a, key, 30000, 0, &l2), HILOCK_EINVAL);
    snprintf(want, sizeof want, HELD, "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk...(3000 bytes)");
    cr_assert_str_eq(hilock_client_errmsg(a), want);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(a);
    free(key);
}

Test(reentry, redlock_acquire_of_a_held_key_is_einval_at_once)
{
    hlt_redis *r2 = hlt_redis_start(NULL), *r3 = hlt_redis_start(NULL);
    const char *urls[3];
    hilock_client *c;
    hilock *l, *l2 = NULL;
    cr_assert(r2 && r3);
    urls[0] = R->url;
    urls[1] = r2->url;
    urls[2] = r3->url;
    hilock_options o = hlt_options(urls, 3);
    o.retry_delay_ms = 10;
    c = hlt_client_new(&o);
    l = must_acquire(c, K_MODERN, "re:red", 30000, 0);
    assert_refused(c, K_MODERN, "re:red", hilock_token(l));
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    l2 = must_acquire(c, K_MODERN, "re:red", 30000, 0);
    hilock_free(l2);
    hilock_client_free(c);
    hlt_redis_stop(r2);
    hlt_redis_stop(r3);
}

/* ---- the event loop ---- */

typedef struct res { int ended; hilock_status st; hilock *l; } res;

static void on_done(hilock_status st, hilock *l, void *arg)
{
    res *r = arg;
    r->ended++;
    r->st = st;
    r->l = l;
}

static void run_until(uv_loop_t *loop, const int *ended, long limit_ms)
{
    long long end = hlt_now_ms() + limit_ms;
    while (!*ended && hlt_now_ms() < end) uv_run(loop, UV_RUN_NOWAIT), hlt_sleep_ms(1);
    cr_assert(*ended, "no answer within %ld ms", limit_ms);
}

/* On an event loop the client's acquires are its tasks: a second acquire of a key the client
 * holds is not refused; it waits for the first lock's release, woken by it. */
Test(reentry, a_loop_clients_second_acquire_waits_for_the_release_as_a_task)
{
    uv_loop_t loop;
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    hilock_client *c = hlt_client_new(&o);
    res first = {0}, second = {0}, rel = {0};
    long long until;
    uv_loop_init(&loop);
    cr_assert_eq(hilock_libuv_attach(c, &loop), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_acquire_async(c, "re:async", 30000, 0, on_done, &first), HILOCK_OK);
    run_until(&loop, &first.ended, 5000);
    cr_assert_eq(first.st, HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_keepalive(first.l, NULL, NULL), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_acquire_async(c, "re:async", 30000, 20000, on_done, &second), HILOCK_OK,
                 "%s", hilock_client_errmsg(c));
    until = hlt_now_ms() + 300;   /* it waits... */
    while (hlt_now_ms() < until) uv_run(&loop, UV_RUN_NOWAIT), hlt_sleep_ms(1);
    cr_assert_eq(second.ended, 0, "the second acquire ended: %s", hilock_strerror(second.st));
    cr_assert_eq(hilock_release_async(first.l, on_done, &rel), HILOCK_OK);   /* ...for this */
    run_until(&loop, &second.ended, 10000);
    cr_assert_eq(rel.st, HILOCK_OK);
    cr_assert_eq(second.st, HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(first.l);
    hilock_free(second.l);
    hilock_client_free(c);
    uv_run(&loop, UV_RUN_NOWAIT);
    uv_loop_close(&loop);
}
