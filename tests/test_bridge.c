/* SPDX-License-Identifier: BSD-3-Clause */
/* test_bridge.c -- bridge mode (options.bridge = 1) against a real redis-server: modern locks
 * that legacy clients read as held, and that read legacy locks as held.
 *
 * The "doc peer" below is an emulation, written for these tests, of a client that follows
 * the documented recipe with separate SETNX / GET / GETSET / guarded DEL commands. */
#include <criterion/criterion.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checks.h"
#include "clients.h"
#include "fixture.h"
#include "hilock.h"
#include "hilock_legacy.h"
#include "peer.h"

Test(bridge, writes_a_pure_digits_future_stamp_with_px)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_codec_client(r->url, "node-redis-lock", 1);
    hilock *l;
    long long before = hlt_wall_ms();
    cr_assert_eq(hilock_acquire(c, "lock.b", 2000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert(hlt_matches(hilock_token(l), "^[0-9]{13}$"), "%s", hilock_token(l));
    long long s = atoll(hilock_token(l));
    cr_assert(s >= before + 2000 + 1 && s <= hlt_wall_ms() + 2000 + 2, "stamp - before = %lld", s - before);
    hlt_holds(r, "lock.b", hilock_token(l));
    long long p = hlt_pttl(r, "lock.b");
    cr_assert(p > 1000 && p <= 2000, "pttl %lld", p);
    cr_assert(hilock_fence(l) > 1600000000000ULL);
    cr_assert(hilock_validity_ms(l) > 500 && hilock_validity_ms(l) <= 2000);
    cr_assert_eq(hilock_check(l), HILOCK_OK);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hlt_holds(r, "lock.b", NULL);
    cr_assert_eq(hilock_release(l), HILOCK_NOT_HELD);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(bridge, seconds_and_suffix_codecs_still_write_pure_digits_rounded_up)
{
    static const char *presets[] = { "doc", "ruby-redis-lock", "redis-objects", "redis-py-2" };
    hlt_redis *r = hlt_redis_start(NULL);
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        hilock_client *c = hlt_codec_client(r->url, presets[i], 1);
        hilock *l;
        long long before = hlt_wall_ms();
        cr_assert_eq(hilock_acquire(c, "lock:s", 3000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
        cr_assert(hlt_matches(hilock_token(l), "^[0-9]{10}$"), "%s: %s", presets[i], hilock_token(l));
        /* never before the PX ends, whatever the rounding */
        cr_assert(atoll(hilock_token(l)) * 1000 >= before + 3000, "%s: %s", presets[i], hilock_token(l));
        cr_assert(hlt_pttl(r, "lock:s") > 0);
        cr_assert_eq(hilock_release(l), HILOCK_OK);
        hilock_free(l);
        hilock_client_free(c);
    }
    hlt_redis_stop(r);
}

Test(bridge, legacy_clients_see_a_bridge_lock_as_held)
{
    hlt_redis *r = hlt_redis_start(NULL);
    const char *url = r->url;
    hilock_options o = hlt_codec_options(&url, "node-redis-lock");
    o.bridge = 1;
    hilock_client *b = hlt_client_new(&o), *leg;
    o.bridge = 0;
    leg = hlt_client_new(&o);
    hilock *lb, *ll = NULL;
    struct timeval tv = { 2, 0 };
    redisContext *peer = redisConnectWithTimeout("127.0.0.1", r->port, tv);
    char mine[32];
    cr_assert_eq(hilock_acquire(b, "lock.held", 3000, 0, &lb), HILOCK_OK);
    cr_assert_eq(hilock_legacy_acquire(leg, "lock.held", 3000, 100, &ll), HILOCK_BUSY);
    for (int i = 0; i < 20; i++) cr_assert_eq(hlt_doc_peer_try(peer, "lock.held", 3000, mine), 0);
    hlt_holds(r, "lock.held", hilock_token(lb));
    cr_assert(hlt_pttl(r, "lock.held") > 0, "the PX was stripped");
    cr_assert_eq(hilock_release(lb), HILOCK_OK);
    cr_assert_eq(hlt_doc_peer_try(peer, "lock.held", 3000, mine), 1);
    hlt_holds(r, "lock.held", mine);
    redisFree(peer);
    hilock_free(lb);
    hilock_client_free(b);
    hilock_client_free(leg);
    hlt_redis_stop(r);
}

Test(bridge, bridge_clients_see_legacy_locks_as_held)
{
    hlt_redis *r = hlt_redis_start(NULL);
    const char *url = r->url;
    hilock_options o = hlt_codec_options(&url, "jedis-lock");
    o.bridge = 1;
    hilock_client *b = hlt_client_new(&o), *leg;
    o.bridge = 0;
    leg = hlt_client_new(&o);
    hilock *lb = NULL, *ll;
    cr_assert_eq(hilock_legacy_acquire(leg, "lock.leg", 5000, 0, &ll), HILOCK_OK);
    cr_assert_eq(hilock_acquire(b, "lock.leg", 3000, 0, &lb), HILOCK_BUSY);
    cr_assert_eq(hilock_acquire(b, "lock.leg", 3000, 150, &lb), HILOCK_BUSY);
    cr_assert_null(lb);
    cr_assert(strstr(hilock_client_errmsg(b), "held until"), "%s", hilock_client_errmsg(b));
    hlt_holds(r, "lock.leg", hilock_token(ll));
    cr_assert_eq(hlt_pttl(r, "lock.leg"), -1);
    cr_assert_eq(hilock_release(ll), HILOCK_OK);
    cr_assert_eq(hilock_acquire(b, "lock.leg", 3000, 0, &lb), HILOCK_OK);
    hilock_release(lb);
    hilock_free(lb);
    hilock_free(ll);
    hilock_client_free(b);
    hilock_client_free(leg);
    hlt_redis_stop(r);
}

Test(bridge, takes_over_an_expired_legacy_stamp_without_ttl_and_sets_px)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *b = hlt_codec_client(r->url, "node-redis-lock", 1);
    hilock *l;
    char v[32];
    snprintf(v, sizeof v, "%lld", hlt_wall_ms() - 2000);   /* a crashed 0.0.x holder's stamp */
    hlt_set(r, "lock.crashed", v, 0);
    cr_assert_eq(hilock_acquire(b, "lock.crashed", 2000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(b));
    hlt_holds(r, "lock.crashed", hilock_token(l));
    long long p = hlt_pttl(r, "lock.crashed");
    cr_assert(p > 0 && p <= 2000, "pttl %lld", p);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(b);
    hlt_redis_stop(r);
}

Test(bridge, never_steals_values_that_are_not_stamps)
{
    static const char *bad[] = { "c0ffee-4f1d-token", "", "123456", "1", "garbage" };
    hlt_redis *r = hlt_redis_start(NULL);
    const char *url = r->url;
    hilock_options o = hlt_codec_options(&url, "node-redis-lock");
    o.bridge = 1;
    hilock_client *b = hlt_client_new(&o), *m;
    hilock *l = NULL, *ml;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hlt_set(r, "lock.tok", bad[i], 0);
        cr_assert_eq(hilock_acquire(b, "lock.tok", 2000, 0, &l), HILOCK_BUSY, "\"%s\"", bad[i]);
        cr_assert(strstr(hilock_client_errmsg(b), "not a stamp"), "%s", hilock_client_errmsg(b));
        hlt_holds(r, "lock.tok", bad[i]);
        cr_assert_eq(hlt_pttl(r, "lock.tok"), -1);
    }
    /* a live plain modern lock: random token + PX */
    cr_assert_eq(hilock_client_open(r->url, &m), HILOCK_OK);
    cr_assert_eq(hilock_acquire(m, "lock.modern", 3000, 0, &ml), HILOCK_OK);
    cr_assert_eq(hilock_acquire(b, "lock.modern", 2000, 100, &l), HILOCK_BUSY);
    hlt_holds(r, "lock.modern", hilock_token(ml));
    /* and the plain modern client sees the bridge lock as held */
    hilock *lb, *l2 = NULL;
    cr_assert_eq(hilock_acquire(b, "lock.b2", 3000, 0, &lb), HILOCK_OK);
    cr_assert_eq(hilock_acquire(m, "lock.b2", 3000, 0, &l2), HILOCK_BUSY);
    hlt_holds(r, "lock.b2", hilock_token(lb));
    hilock_release(lb);
    hilock_release(ml);
    hilock_free(lb);
    hilock_free(ml);
    hilock_client_free(m);
    hilock_client_free(b);
    hlt_redis_stop(r);
}

Test(bridge, an_expired_stamp_with_a_ttl_is_waited_for_not_stolen)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *b = hlt_codec_client(r->url, "node-redis-lock", 1);
    hilock *l = NULL;
    char v[32];
    snprintf(v, sizeof v, "%lld", hlt_wall_ms() - 2000);
    long long t0 = hlt_now_ms();   /* before the SET: its PX ends 400 ms after this, or later */
    hlt_set(r, "lock.px", v, 400);   /* e.g. npm redis-lock 0.1.x: legacy value + PX */
    cr_assert_eq(hilock_acquire(b, "lock.px", 2000, 0, &l), HILOCK_BUSY);
    hlt_holds(r, "lock.px", v);
    cr_assert_eq(hilock_acquire(b, "lock.px", 2000, 5000, &l), HILOCK_OK, "%s", hilock_client_errmsg(b));
    cr_assert(hlt_now_ms() - t0 >= 395, "taken %lld ms after the SET, before its PX ended", hlt_now_ms() - t0);
    hilock_release(l);
    hilock_free(l);
    hilock_client_free(b);
    hlt_redis_stop(r);
}

Test(bridge, extend_moves_stamp_and_px_together)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *b = hlt_codec_client(r->url, "jedis-lock", 1);
    hilock *l;
    char old[64];
    cr_assert_eq(hilock_acquire(b, "lock.e", 1000, 0, &l), HILOCK_OK);
    snprintf(old, sizeof old, "%s", hilock_token(l));
    long long before = hlt_wall_ms();
    cr_assert_eq(hilock_extend(l, 10000), HILOCK_OK, "%s", hilock_client_errmsg(b));
    cr_assert_str_neq(hilock_token(l), old);
    long long s = atoll(hilock_token(l));
    cr_assert(s >= before + 10001, "stamp did not move: %lld", s - before);
    hlt_holds(r, "lock.e", hilock_token(l));
    long long p = hlt_pttl(r, "lock.e");
    cr_assert(p > 8000 && p <= 10000, "pttl %lld", p);
    cr_assert(hilock_validity_ms(l) > 5000);
    cr_assert_eq(hilock_check(l), HILOCK_OK);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hlt_holds(r, "lock.e", NULL);
    hilock_free(l);
    hilock_client_free(b);
    hlt_redis_stop(r);
}

Test(bridge, release_compares_the_exact_value)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *b = hlt_codec_client(r->url, "jedis-lock", 1);
    hilock *l;
    char other[32];
    cr_assert_eq(hilock_acquire(b, "lock.r", 3000, 0, &l), HILOCK_OK);
    snprintf(other, sizeof other, "%lld", atoll(hilock_token(l)) + 1);   /* one ms off */
    hlt_set(r, "lock.r", other, 0);
    cr_assert_eq(hilock_check(l), HILOCK_NOT_HELD);
    cr_assert_eq(hilock_release(l), HILOCK_NOT_HELD);
    hlt_holds(r, "lock.r", other);
    hilock_free(l);
    hilock_client_free(b);
    hlt_redis_stop(r);
}

Test(bridge, a_getset_by_a_legacy_peer_only_hurts_after_the_stamp)
{
    /* a peer's GETSET strips the PX: the stamp then governs, and it is in the future */
    hlt_redis *r = hlt_redis_start(NULL);
    const char *url = r->url;
    hilock_options o = hlt_codec_options(&url, "jedis-lock");
    o.bridge = 1;
    hilock_client *b = hlt_client_new(&o), *b2 = hlt_client_new(&o);
    hilock *l, *l2 = NULL;
    cr_assert_eq(hilock_acquire(b, "lock.g", 1000, 0, &l), HILOCK_OK);
    redisReply *rep = hlt_cmd(r, "PERSIST lock.g");
    freeReplyObject(rep);
    cr_assert_eq(hilock_acquire(b2, "lock.g", 600, 0, &l2), HILOCK_BUSY);
    hilock_free(l);   /* the holder dies: no TTL left, only its stamp */
    cr_assert_eq(hilock_acquire(b2, "lock.g", 2000, 5000, &l2), HILOCK_OK, "%s", hilock_client_errmsg(b2));
    cr_assert(hlt_pttl(r, "lock.g") > 0);
    hilock_release(l2);
    hilock_free(l2);
    hilock_client_free(b);
    hilock_client_free(b2);
    hlt_redis_stop(r);
}

Test(bridge, needs_exactly_one_server)
{
    const char *urls[] = { "redis://127.0.0.1:1", "redis://127.0.0.1:2", "redis://127.0.0.1:3" };
    hilock_options o;
    hilock_client *c = (hilock_client *)1;
    hilock_options_init(&o);
    o.servers = urls;
    o.nservers = 3;
    o.bridge = 1;
    cr_assert_eq(hilock_client_new(&o, &c), HILOCK_EINVAL);
    cr_assert_null(c);
    cr_assert(strstr(hilock_last_config_error(), "bridge"), "%s", hilock_last_config_error());
}
