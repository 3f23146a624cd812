/* SPDX-License-Identifier: BSD-3-Clause */
/* test_legacy.c -- the SETNX/GETSET recipe against a real redis-server: values on the wire,
 * take-over of expired stamps, the documented race, crashed holders, late releases, clock
 * skew, the skew margin, "<" vs "<=" at the exact stamp, and values that are never stolen.
 *
 * The "doc peer" below is an emulation, written for these tests, of a client that follows
 * the documented recipe with separate SETNX / GET / GETSET / guarded DEL commands. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "checks.h"
#include "clients.h"
#include "fixture.h"
#include "hilock.h"
#include "hilock_legacy.h"
#include "holders.h"   /* hlt_db_snapshot */
#include "peer.h"

static long long wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void setb(hlt_redis *r, const char *key, const char *v, size_t len)
{
    redisReply *rep = hlt_cmd(r, "SET %s %b", key, v, len);
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
}

static int64_t stamp_of(const char *preset, const char *v)
{
    hilock_codec k;
    int64_t s = 0;
    cr_assert_eq(hilock_codec_preset(preset, &k), HILOCK_OK);
    cr_assert_eq(hilock_codec_parse(&k, v, strlen(v), &s), HILOCK_OK, "\"%s\"", v);
    return s;
}

/* ---- the values on the wire ---- */

Test(legacy, doc_writes_seconds_plus_timeout_plus_one_without_ttl)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_codec_client(r->url, "doc", 0);
    hilock *l;
    long long before = hlt_wall_ms() / 1000, after;
    cr_assert_eq(hilock_legacy_acquire(c, "lock.doc", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    after = hlt_wall_ms() / 1000;
    hlt_holds(r, "lock.doc", hilock_token(l));
    cr_assert(hlt_matches(hilock_token(l), "^[0-9]{10}$"), "%s", hilock_token(l));
    long long v = atoll(hilock_token(l));
    cr_assert(v >= before + 10 + 1 && v <= after + 10 + 1, "%lld not in [%lld, %lld]", v, before + 11, after + 11);
    cr_assert_eq(hlt_pttl(r, "lock.doc"), -1);
    cr_assert(hilock_fence(l) > 1600000000000ULL);
    cr_assert(hilock_validity_ms(l) > 5000 && hilock_validity_ms(l) <= 10000);
    cr_assert_str_eq(hilock_key(l), "lock.doc");
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_holds(r, "lock.doc", NULL);
    cr_assert_eq(hilock_release(l), HILOCK_NOT_HELD);
    cr_assert_eq(hilock_check(l), HILOCK_NOT_HELD);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(legacy, every_preset_writes_its_own_format)
{
    static const struct { const char *preset, *re; } t[] = {
        { "doc", "^[0-9]{10}$" },
        { "node-redis-lock", "^[0-9]{13}$" },
        { "jedis-lock", "^[0-9]{13}$" },
        { "redis-objects", "^[0-9]{10}\\.[0-9]{1,7}$" },   /* Ruby's shortest float */
        { "redis-py-2", "^[0-9]{10}\\.[0-9]{1,7}$" },      /* Python's repr */
        { "ruby-redis-lock", "^[0-9]{10}-[0-9]+-[0-9]+$" },
    };
    hlt_redis *r = hlt_redis_start(NULL);
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        hilock_client *c = hlt_codec_client(r->url, t[i].preset, 0);
        hilock *l;
        long long t0 = wall_us();
        cr_assert_eq(hilock_legacy_acquire(c, "lock:fmt", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
        hlt_holds(r, "lock:fmt", hilock_token(l));
        cr_assert(hlt_matches(hilock_token(l), t[i].re), "%s: \"%s\"", t[i].preset, hilock_token(l));
        /* stamp = now + timeout (+1 unit), truncated to the codec's resolution */
        int64_t s = stamp_of(t[i].preset, hilock_token(l));
        cr_assert(s >= t0 + 5000000 - 1000000 && s <= wall_us() + 5000000 + 1000000, "%s: %lld",
                  t[i].preset, (long long)s);
        if (!strcmp(t[i].preset, "redis-objects") || !strcmp(t[i].preset, "redis-py-2")) {
            /* byte for byte what the peer writes for one microsecond of the call */
            long long t1 = wall_us(), add = strcmp(t[i].preset, "redis-py-2") ? 6000000 : 5000000;
            hilock_codec k;
            char v[HILOCK_CODEC_MAX];
            int found = 0;
            cr_assert_eq(hilock_codec_preset(t[i].preset, &k), HILOCK_OK);
            for (long long x = t0; x <= t1 && !found; x++)
                found = hilock_codec_format(&k, x + add, v, sizeof v) == HILOCK_OK &&
                        !strcmp(v, hilock_token(l));
            cr_assert(found, "%s: \"%s\" is no value the peer writes in [%lld, %lld]", t[i].preset,
                      hilock_token(l), t0, t1);
        }
        if (!strcmp(t[i].preset, "ruby-redis-lock")) {
            char pid[32];
            snprintf(pid, sizeof pid, "-%ld-", (long)getpid());
            cr_assert(strstr(hilock_token(l), pid), "%s", hilock_token(l));
        }
        cr_assert_eq(hilock_release(l), HILOCK_OK);
        hlt_holds(r, "lock:fmt", NULL);
        hilock_free(l);
        hilock_client_free(c);
    }
    hlt_redis_stop(r);
}

Test(legacy, pexpire_option_gives_the_key_a_ttl)
{
    hlt_redis *r = hlt_redis_start(NULL);
    const char *url = r->url;
    hilock_options o = hlt_codec_options(&url, "jedis-lock");
    o.legacy_pexpire = 1;
    hilock_client *c = hlt_client_new(&o);
    hilock *l;
    cr_assert_eq(hilock_legacy_acquire(c, "lock.px", 3000, 0, &l), HILOCK_OK);
    long long p = hlt_pttl(r, "lock.px");
    cr_assert(p > 0 && p <= 3000, "pttl %lld", p);
    cr_assert_eq(hilock_extend(l, 20000), HILOCK_OK, "%s", hilock_client_errmsg(c));
    p = hlt_pttl(r, "lock.px");
    cr_assert(p > 15000 && p <= 20000, "pttl %lld", p);
    hlt_holds(r, "lock.px", hilock_token(l));
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* ---- held, expired, taken over ---- */

Test(legacy, a_live_stamp_is_busy_and_untouched)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_codec_client(r->url, "node-redis-lock", 0);
    hilock *l = (hilock *)1;
    char v[32];
    snprintf(v, sizeof v, "%lld", hlt_wall_ms() + 60000);
    hlt_set(r, "lock.live", v, 0);
    cr_assert_eq(hilock_legacy_acquire(c, "lock.live", 1000, 0, &l), HILOCK_BUSY);
    cr_assert_null(l);
    cr_assert(strstr(hilock_client_errmsg(c), "lock.live") && strstr(hilock_client_errmsg(c), v),
              "%s", hilock_client_errmsg(c));
    long long t0 = hlt_now_ms();
    cr_assert_eq(hilock_legacy_acquire(c, "lock.live", 1000, 150, &l), HILOCK_BUSY);
    cr_assert(hlt_now_ms() - t0 < 2000);
    hlt_holds(r, "lock.live", v);
    cr_assert_eq(hlt_pttl(r, "lock.live"), -1);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(legacy, an_expired_stamp_is_taken_over_even_by_a_single_try)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_codec_client(r->url, "node-redis-lock", 0);
    hilock *l;
    char v[32];
    snprintf(v, sizeof v, "%lld", hlt_wall_ms() - 1000);
    hlt_set(r, "lock.exp", v, 0);
    cr_assert_eq(hilock_legacy_acquire(c, "lock.exp", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_holds(r, "lock.exp", hilock_token(l));
    cr_assert_str_neq(hilock_token(l), v);
    cr_assert_eq(hlt_pttl(r, "lock.exp"), -1);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(legacy, expired_values_of_other_formats_are_taken_over)
{
    static const struct { const char *preset, *v; } t[] = {
        { "ruby-redis-lock", "1600000000-123-456" },
        { "ruby-redis-lock", "1600000000-123" },
        { "redis-py-2", "1600000000.25" },
        { "redis-objects", "1600000000.123456" },
        { "doc", "1600000000" },
        { "jedis-lock", "1600000000000" },
    };
    hlt_redis *r = hlt_redis_start(NULL);
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        hilock_client *c = hlt_codec_client(r->url, t[i].preset, 0);
        hilock *l;
        hlt_set(r, "lock:x", t[i].v, 0);
        cr_assert_eq(hilock_legacy_acquire(c, "lock:x", 5000, 0, &l), HILOCK_OK, "%s: %s", t[i].v,
                     hilock_client_errmsg(c));
        hlt_holds(r, "lock:x", hilock_token(l));
        cr_assert_eq(hilock_release(l), HILOCK_OK);
        hilock_free(l);
        hilock_client_free(c);
    }
    hlt_redis_stop(r);
}

Test(legacy, an_expired_stamp_with_a_ttl_is_waited_for_not_stolen)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_codec_client(r->url, "jedis-lock", 0);
    hilock *l = NULL;
    char v[32];
    snprintf(v, sizeof v, "%lld", hlt_wall_ms() - 5000);
    long long t0 = hlt_now_ms();   /* before the SET: its PX ends 400 ms after this, or later */
    hlt_set(r, "lock.ttl", v, 400);
    cr_assert_eq(hilock_legacy_acquire(c, "lock.ttl", 2000, 0, &l), HILOCK_BUSY);
    cr_assert(strstr(hilock_client_errmsg(c), "TTL"), "%s", hilock_client_errmsg(c));
    hlt_holds(r, "lock.ttl", v);
    cr_assert_eq(hilock_legacy_acquire(c, "lock.ttl", 2000, 5000, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert(hlt_now_ms() - t0 >= 395, "took over %lld ms after the SET, before its PX ended", hlt_now_ms() - t0);
    hlt_holds(r, "lock.ttl", hilock_token(l));
    hilock_release(l);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(legacy, a_fresh_stamp_is_computed_on_the_attempt_that_wins)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_codec_client(r->url, "jedis-lock", 0);
    hilock *l;
    char v[32];
    long long start = hlt_wall_ms();
    snprintf(v, sizeof v, "%lld", start + 400);
    hlt_set(r, "lock.fresh", v, 0);
    cr_assert_eq(hilock_legacy_acquire(c, "lock.fresh", 1000, 5000, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    /* a stamp computed at the start of the wait would be ~start + 1001: already half gone */
    long long s = atoll(hilock_token(l));
    cr_assert(s >= start + 400 + 1000, "stamp %lld is from before the wait (start %lld)", s, start);
    cr_assert(hilock_validity_ms(l) > 0);
    hilock_release(l);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* ---- values that are never stolen ---- */

Test(legacy, values_that_are_not_stamps_are_never_taken)
{
    static const char *bad[] = { "garbage", "", "c0ffee-4f1d-token", "1", "123456", "1.7e9", "-1",
                                 "4f1d2a7b9c0e11aa22bb33cc44dd55ee", "1600000000-123-456" };
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_codec_client(r->url, "node-redis-lock", 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hilock *l = (hilock *)1;
        hlt_set(r, "lock.bad", bad[i], 0);
        cr_assert_eq(hilock_legacy_acquire(c, "lock.bad", 1000, 0, &l), HILOCK_BUSY, "\"%s\"", bad[i]);
        cr_assert_null(l);
        const char *m = hilock_client_errmsg(c);
        cr_assert(strstr(m, "lock.bad") && strstr(m, "not a stamp") && strstr(m, "never"), "%s", m);
        char quoted[64];
        snprintf(quoted, sizeof quoted, "\"%s\"", bad[i]);
        cr_assert(strstr(m, quoted), "message does not name the value: %s", m);
        hlt_holds(r, "lock.bad", bad[i]);
        cr_assert_eq(hlt_pttl(r, "lock.bad"), -1);
    }
    /* and while waiting, too */
    hilock *l = NULL;
    hlt_set(r, "lock.bad", "garbage", 0);
    long long t0 = hlt_now_ms();
    cr_assert_eq(hilock_legacy_acquire(c, "lock.bad", 1000, 200, &l), HILOCK_BUSY);
    cr_assert(hlt_now_ms() - t0 < 2000);
    hlt_holds(r, "lock.bad", "garbage");
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(legacy, binary_values_are_shown_escaped)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_codec_client(r->url, "doc", 0);
    hilock *l;
    setb(r, "lock.bin", "17\0\x01\xff\"x", 7);
    cr_assert_eq(hilock_legacy_acquire(c, "lock.bin", 5000, 0, &l), HILOCK_BUSY);
    cr_assert(strstr(hilock_client_errmsg(c), "17\\x00\\x01\\xff\\x22x"), "%s", hilock_client_errmsg(c));
    redisReply *rep = hlt_cmd(r, "STRLEN lock.bin");
    cr_assert_eq(rep->integer, 7);
    freeReplyObject(rep);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(legacy, a_modern_lock_is_never_taken)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *m, *c = hlt_codec_client(r->url, "node-redis-lock", 0);
    hilock *ml, *l = NULL;
    cr_assert_eq(hilock_client_open(r->url, &m), HILOCK_OK);
    cr_assert_eq(hilock_acquire(m, "lock.modern", 5000, 0, &ml), HILOCK_OK);
    cr_assert_eq(hilock_legacy_acquire(c, "lock.modern", 1000, 100, &l), HILOCK_BUSY);
    hlt_holds(r, "lock.modern", hilock_token(ml));
    cr_assert_eq(hilock_release(ml), HILOCK_OK);
    hilock_free(ml);
    hilock_client_free(m);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(legacy, a_unit_mismatch_is_reported_not_stolen)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *ms = hlt_codec_client(r->url, "node-redis-lock", 0);
    hilock_client *s = hlt_codec_client(r->url, "doc", 0);
    hilock *l = NULL;
    char v[32];
    /* a live seconds stamp: a ms client would read 1970 and steal it */
    snprintf(v, sizeof v, "%lld", hlt_wall_ms() / 1000 + 30);
    hlt_set(r, "lock.unit", v, 0);
    cr_assert_eq(hilock_legacy_acquire(ms, "lock.unit", 1000, 0, &l), HILOCK_BUSY);
    cr_assert(strstr(hilock_client_errmsg(ms), "looks like seconds"), "%s", hilock_client_errmsg(ms));
    hlt_holds(r, "lock.unit", v);
    /* an expired ms stamp read by a seconds client: far future, never stolen, and said so */
    snprintf(v, sizeof v, "%lld", hlt_wall_ms() - 60000);
    hlt_set(r, "lock.unit", v, 0);
    cr_assert_eq(hilock_legacy_acquire(s, "lock.unit", 1000, 0, &l), HILOCK_BUSY);
    cr_assert(strstr(hilock_client_errmsg(s), "looks like milliseconds"), "%s", hilock_client_errmsg(s));
    hlt_holds(r, "lock.unit", v);
    hilock_client_free(ms);
    hilock_client_free(s);
    hlt_redis_stop(r);
}

Test(legacy, a_key_of_another_type_is_ereply_and_untouched)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_codec_client(r->url, "doc", 0);
    hilock *l = (hilock *)1;
    freeReplyObject(hlt_cmd(r, "HSET lock.h f v"));
    cr_assert_eq(hilock_legacy_acquire(c, "lock.h", 5000, 0, &l), HILOCK_EREPLY);
    cr_assert_null(l);
    cr_assert(strstr(hilock_client_errmsg(c), "WRONGTYPE"), "%s", hilock_client_errmsg(c));
    redisReply *rep = hlt_cmd(r, "HGET lock.h f");
    cr_assert_str_eq(rep->str, "v");
    freeReplyObject(rep);
    cr_assert_eq(hlt_dbsize(r), 1);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* ---- bad input: a clear status, nothing written ---- */

Test(legacy, bad_arguments_are_einval_and_change_nothing)
{
    hlt_redis *r = hlt_redis_start(NULL);
    const char *url = r->url;
    hilock_options o = hlt_codec_options(&url, "doc");
    o.skew_margin_ms = 2000;
    hilock_client *c = hlt_client_new(&o);
    hilock *l = (hilock *)1;
    char big[HILOCK_KEY_MAX + 2];
    memset(big, 'k', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    cr_assert_eq(hilock_legacy_acquire(NULL, "k", 5000, 0, &l), HILOCK_EINVAL);
    cr_assert_null(l);
    cr_assert_eq(hilock_legacy_acquire(c, NULL, 5000, 0, &l), HILOCK_EINVAL);
    cr_assert_eq(hilock_legacy_acquire(c, "", 5000, 0, &l), HILOCK_EINVAL);
    cr_assert_eq(hilock_legacy_acquire(c, big, 5000, 0, &l), HILOCK_EINVAL);
    cr_assert_eq(hilock_legacy_acquire(c, "k", 5000, 0, NULL), HILOCK_EINVAL);
    cr_assert_eq(hilock_legacy_acquire(c, "k", 0, 0, &l), HILOCK_EINVAL);
    cr_assert_eq(hilock_legacy_acquire(c, "k", -5, 0, &l), HILOCK_EINVAL);
    cr_assert_eq(hilock_legacy_acquire(c, "k", HILOCK_TTL_MAX_MS + 1, 0, &l), HILOCK_EINVAL);
    cr_assert_eq(hilock_legacy_acquire(c, "k", 5000, -2, &l), HILOCK_EINVAL);
    /* the 2 s skew margin eats a 1.5 s timeout */
    cr_assert_eq(hilock_legacy_acquire(c, "k", 1500, 0, &l), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(c), "skew_margin_ms"), "%s", hilock_client_errmsg(c));
    cr_assert_null(l);
    cr_assert_eq(hlt_dbsize(r), 0);
    hilock_client_free(c);

    /* several servers: legacy peers know no quorum */
    hlt_redis *r2 = hlt_redis_start(NULL);
    const char *urls[] = { r->url, r2->url, r->unix_url };
    o = hlt_options(urls, 3);
    o.retry_delay_ms = 50;   /* the library's default */
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_legacy_acquire(c, "k", 5000, 0, &l), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(c), "one server"), "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_dbsize(r), 0);
    cr_assert_eq(hlt_dbsize(r2), 0);
    hilock_client_free(c);
    hlt_redis_stop(r2);
    hlt_redis_stop(r);
}

/* ---- the documented race: two take-overs of one expired lock at once ---- */

typedef struct racer {
    hlt_redis         *r;
    pthread_barrier_t *go;
    hilock_client     *c;      /* NULL: the doc peer */
    redisContext      *rc;
    hilock            *won;
    int                peer_won;
    char               peer_value[32];
} racer;

static void *race(void *arg)
{
    racer *x = arg;
    pthread_barrier_wait(x->go);
    if (x->c) {
        if (hilock_legacy_acquire(x->c, "lock.race", 5000, 0, &x->won) != HILOCK_OK) x->won = NULL;
    } else {
        x->peer_won = hlt_doc_peer_try(x->rc, "lock.race", 5000, x->peer_value);
    }
    return NULL;
}

static void race_rounds(int with_peer, int rounds)
{
    hlt_redis *r = hlt_redis_start(NULL);
    pthread_barrier_t go;
    racer x[2];
    int ours = 0, peers = 0, overwritten = 0;
    memset(x, 0, sizeof x);
    pthread_barrier_init(&go, NULL, 2);
    for (int i = 0; i < 2; i++) {
        x[i].r = r;
        x[i].go = &go;
        if (i == 1 && with_peer) {
            struct timeval tv = { 2, 0 };
            x[i].rc = redisConnectWithTimeout("127.0.0.1", r->port, tv);
            cr_assert(x[i].rc && !x[i].rc->err);
        } else {
            x[i].c = hlt_codec_client(r->url, "jedis-lock", 0);
        }
    }
    for (int round = 0; round < rounds; round++) {
        pthread_t th[2];
        char expired[32];
        int winners = 0;
        hilock *w = NULL;
        snprintf(expired, sizeof expired, "%lld", hlt_wall_ms() - 10000);
        hlt_set(r, "lock.race", expired, 0);
        for (int i = 0; i < 2; i++) {
            x[i].won = NULL;
            x[i].peer_won = 0;
            pthread_create(&th[i], NULL, race, &x[i]);
        }
        for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
        for (int i = 0; i < 2; i++) {
            if (x[i].won) { winners++; ours++; w = x[i].won; }
            if (x[i].peer_won) { winners++; peers++; }
        }
        cr_assert_eq(winners, 1, "round %d: %d winners", round, winners);
        char *v = hlt_get(r, "lock.race");
        cr_assert_not_null(v, "round %d: the winner's key was deleted", round);
        if (w) {
            /* our win; a losing doc peer may have overwritten our value with its own stamp
             * (the recipe's accepted hazard), but nobody deleted the key, and our release
             * deletes only our exact value */
            if (strcmp(v, hilock_token(w))) {
                overwritten++;
                cr_assert_str_eq(v, x[1].peer_value);
                cr_assert_eq(hilock_release(w), HILOCK_NOT_HELD);
                hlt_holds(r, "lock.race", v);
            } else {
                cr_assert_eq(hilock_release(w), HILOCK_OK);
                hlt_holds(r, "lock.race", NULL);
            }
            hilock_free(w);
        } else {
            cr_assert_str_eq(v, x[1].peer_value, "round %d: the losing hilock client wrote", round);
        }
        free(v);
    }
    cr_log_info("race: %d rounds, hilock won %d, doc peer won %d, peer overwrote our value %d",
                rounds, ours, peers, overwritten);
    for (int i = 0; i < 2; i++) {
        hilock_client_free(x[i].c);
        if (x[i].rc) redisFree(x[i].rc);
    }
    pthread_barrier_destroy(&go);
    hlt_redis_stop(r);
}

Test(legacy_race, two_hilock_takeovers_of_one_expired_lock_one_wins)
{
    race_rounds(0, 60);
}

Test(legacy_race, hilock_and_a_doc_peer_take_over_at_once_one_wins)
{
    race_rounds(1, 60);
}

/* ---- crashes, late releases, skew ---- */

Test(legacy, a_crashed_holder_is_taken_over_after_its_stamp_passes)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *a = hlt_codec_client(r->url, "node-redis-lock", 0);
    hilock_client *b = hlt_codec_client(r->url, "node-redis-lock", 0);
    hilock *la, *lb = NULL;
    cr_assert_eq(hilock_legacy_acquire(a, "lock.crash", 1000, 0, &la), HILOCK_OK);
    int64_t sa = stamp_of("node-redis-lock", hilock_token(la));
    hilock_free(la);   /* the holder dies: no release, no TTL */
    cr_assert_eq(hlt_pttl(r, "lock.crash"), -1);
    cr_assert_eq(hilock_legacy_acquire(b, "lock.crash", 600, 0, &lb), HILOCK_BUSY);
    cr_assert_eq(hilock_legacy_acquire(b, "lock.crash", 5000, 5000, &lb), HILOCK_OK, "%s", hilock_client_errmsg(b));
    cr_assert(wall_us() >= sa, "taken over before the dead holder's stamp passed");
    hlt_holds(r, "lock.crash", hilock_token(lb));
    cr_assert_eq(hilock_release(lb), HILOCK_OK);
    hilock_free(lb);
    hilock_client_free(a);
    hilock_client_free(b);
    hlt_redis_stop(r);
}

Test(legacy, a_late_release_after_takeover_deletes_nothing)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *a = hlt_codec_client(r->url, "jedis-lock", 0);
    hilock_client *b = hlt_codec_client(r->url, "jedis-lock", 0);
    hilock *la, *lb;
    cr_assert_eq(hilock_legacy_acquire(a, "lock.late", 1000, 0, &la), HILOCK_OK);
    hlt_sleep_ms(1200);   /* a pauses past its stamp */
    cr_assert_eq(hilock_legacy_acquire(b, "lock.late", 5000, 0, &lb), HILOCK_OK, "%s", hilock_client_errmsg(b));
    cr_assert_eq(hilock_validity_ms(la), 0);
    cr_assert_eq(hilock_check(la), HILOCK_NOT_HELD);
    cr_assert_eq(hilock_extend(la, 5000), HILOCK_NOT_HELD);
    cr_assert_eq(hilock_release(la), HILOCK_NOT_HELD);
    cr_assert(strstr(hilock_client_errmsg(a), "has passed"), "%s", hilock_client_errmsg(a));
    hlt_holds(r, "lock.late", hilock_token(lb));
    cr_assert_eq(hilock_release(lb), HILOCK_OK);
    hilock_free(la);
    hilock_free(lb);
    hilock_client_free(a);
    hilock_client_free(b);
    hlt_redis_stop(r);
}

Test(legacy, skew_injected_into_our_client_never_deletes_the_new_owner)
{
    hlt_redis *r = hlt_redis_start(NULL);
    /* a's clock is 3 s behind: its 1 s stamp is already 2 s old for everyone else */
    const char *url = r->url;
    hilock_options o = hlt_codec_options(&url, "jedis-lock");
    o.clock_offset_ms = -3000;
    hilock_client *a = hlt_client_new(&o);
    hilock_client *b = hlt_codec_client(r->url, "jedis-lock", 0);
    hilock *la, *lb;
    cr_assert_eq(hilock_legacy_acquire(a, "lock.skew", 1000, 0, &la), HILOCK_OK);
    int64_t sa = stamp_of("jedis-lock", hilock_token(la));
    cr_assert(sa < wall_us() - 1000000, "offset not applied: %s", hilock_token(la));
    cr_assert(hilock_validity_ms(la) > 0);   /* a believes it holds the lock */
    cr_assert_eq(hilock_legacy_acquire(b, "lock.skew", 5000, 0, &lb), HILOCK_OK, "%s", hilock_client_errmsg(b));
    /* a's own guard passes (its clock), the compare on the exact value saves b */
    cr_assert_eq(hilock_check(la), HILOCK_NOT_HELD);
    cr_assert(strstr(hilock_client_errmsg(a), "another value"), "%s", hilock_client_errmsg(a));
    cr_assert_eq(hilock_extend(la, 2000), HILOCK_NOT_HELD);
    hlt_holds(r, "lock.skew", hilock_token(lb));
    cr_assert_eq(hilock_release(la), HILOCK_NOT_HELD);
    hlt_holds(r, "lock.skew", hilock_token(lb));
    cr_assert_eq(hilock_release(lb), HILOCK_OK);
    hilock_free(la);
    hilock_free(lb);
    hilock_client_free(a);
    hilock_client_free(b);
    hlt_redis_stop(r);
}

Test(legacy, clock_offset_moves_our_stamps)
{
    hlt_redis *r = hlt_redis_start(NULL);
    const char *url = r->url;
    hilock_options o = hlt_codec_options(&url, "jedis-lock");
    o.clock_offset_ms = 60000;
    hilock_client *c = hlt_client_new(&o);
    hilock *l;
    long long before = hlt_wall_ms();
    cr_assert_eq(hilock_legacy_acquire(c, "lock.off", 1000, 0, &l), HILOCK_OK);
    long long s = atoll(hilock_token(l));
    cr_assert(s >= before + 61001 && s <= hlt_wall_ms() + 61001, "%lld", s - before);
    hilock_release(l);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(legacy, the_skew_margin_delays_takeover_and_shortens_validity)
{
    hlt_redis *r = hlt_redis_start(NULL);
    const char *url = r->url;
    hilock_options o = hlt_codec_options(&url, "jedis-lock");
    o.skew_margin_ms = 2000;
    hilock_client *c = hlt_client_new(&o);
    hilock *l = NULL;
    char v[32];
    snprintf(v, sizeof v, "%lld", hlt_wall_ms() - 1000);   /* passed 1 s ago: within the margin */
    hlt_set(r, "lock.m", v, 0);
    cr_assert_eq(hilock_legacy_acquire(c, "lock.m", 5000, 0, &l), HILOCK_BUSY);
    hlt_holds(r, "lock.m", v);
    snprintf(v, sizeof v, "%lld", hlt_wall_ms() - 3000);   /* passed 3 s ago: beyond it */
    hlt_set(r, "lock.m", v, 0);
    cr_assert_eq(hilock_legacy_acquire(c, "lock.m", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert(hilock_validity_ms(l) <= 3000 && hilock_validity_ms(l) > 1000, "%lld",
              (long long)hilock_validity_ms(l));
    hlt_holds(r, "lock.m", hilock_token(l));
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* "<" vs "<=" at the exact stamp: with seconds, "now" equals the stamp for a whole second. */
Test(legacy, lt_and_le_disagree_at_the_exact_stamp)
{
    hlt_redis *r = hlt_redis_start(NULL);
    const char *url = r->url;
    hilock_options o = hlt_codec_options(&url, "doc");
    o.codec.expired_if_equal = 0;
    hilock_client *lt = hlt_client_new(&o);
    o.codec.expired_if_equal = 1;
    hilock_client *le = hlt_client_new(&o);
    int done = 0;
    for (int tries = 0; tries < 4 && !done; tries++) {
        hilock *l = NULL;
        char v[32];
        long long us = wall_us(), sec;
        /* start 50 ms into a second, so both attempts fall within it */
        hlt_sleep_ms((long)(1000 - (us / 1000) % 1000 + 50));
        sec = wall_us() / 1000000;
        snprintf(v, sizeof v, "%lld", sec);
        hlt_set(r, "lock.eq", v, 0);
        hilock_status a = hilock_legacy_acquire(lt, "lock.eq", 5000, 0, &l);
        char *after_lt = hlt_get(r, "lock.eq");
        hilock_status b = hilock_legacy_acquire(le, "lock.eq", 5000, 0, &l);
        if (wall_us() / 1000000 != sec) {   /* crossed into the next second: try again */
            if (l) { hilock_release(l); hilock_free(l); l = NULL; }
            free(after_lt);
            continue;
        }
        cr_assert_eq(a, HILOCK_BUSY, "\"<\" took a stamp equal to now");
        cr_assert_str_eq(after_lt, v);
        cr_assert_eq(b, HILOCK_OK, "\"<=\" did not take a stamp equal to now: %s", hilock_client_errmsg(le));
        hlt_holds(r, "lock.eq", hilock_token(l));
        hilock_release(l);
        hilock_free(l);
        free(after_lt);
        done = 1;
    }
    cr_assert(done, "could not stay within one second");
    hilock_client_free(lt);
    hilock_client_free(le);
    hlt_redis_stop(r);
}

/* ---- release, extend, check on a legacy lock ---- */

Test(legacy, release_never_deletes_a_value_that_is_not_ours)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_codec_client(r->url, "jedis-lock", 0);
    hilock *l;
    char other[32];
    cr_assert_eq(hilock_legacy_acquire(c, "lock.o", 5000, 0, &l), HILOCK_OK);
    /* a doc peer that lost a GETSET race overwrote our stamp with its own */
    snprintf(other, sizeof other, "%lld", atoll(hilock_token(l)) + 7);   /* never equal to ours */
    hlt_set(r, "lock.o", other, 0);
    cr_assert_eq(hilock_check(l), HILOCK_NOT_HELD);
    cr_assert_eq(hilock_extend(l, 5000), HILOCK_NOT_HELD);
    cr_assert_eq(hilock_release(l), HILOCK_NOT_HELD);
    cr_assert(strstr(hilock_client_errmsg(c), "another value"), "%s", hilock_client_errmsg(c));
    hlt_holds(r, "lock.o", other);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(legacy, extend_writes_a_fresh_later_stamp)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_codec_client(r->url, "node-redis-lock", 0);
    hilock *l;
    char old[64];
    cr_assert_eq(hilock_legacy_acquire(c, "lock.ext", 1000, 0, &l), HILOCK_OK);
    snprintf(old, sizeof old, "%s", hilock_token(l));
    uint64_t fence = hilock_fence(l);
    long long before = hlt_wall_ms();
    cr_assert_eq(hilock_extend(l, 10000), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_str_neq(hilock_token(l), old);
    long long s = atoll(hilock_token(l));
    cr_assert(s >= before + 10001 && s <= hlt_wall_ms() + 10001, "%lld", s - before);
    hlt_holds(r, "lock.ext", hilock_token(l));
    cr_assert_eq(hlt_pttl(r, "lock.ext"), -1);
    cr_assert(hilock_validity_ms(l) > 5000);
    cr_assert_eq(hilock_fence(l), fence);
    cr_assert_eq(hilock_check(l), HILOCK_OK);
    cr_assert_eq(hilock_extend(l, 0), HILOCK_EINVAL);
    hlt_holds(r, "lock.ext", hilock_token(l));
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hlt_holds(r, "lock.ext", NULL);
    cr_assert_eq(hilock_extend(l, 1000), HILOCK_EINVAL);   /* released */
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(legacy, fences_grow_with_every_grant)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_codec_client(r->url, "jedis-lock", 0);
    uint64_t last = 0;
    for (int i = 0; i < 5; i++) {
        hilock *l;
        cr_assert_eq(hilock_legacy_acquire(c, "lock.f", 5000, 0, &l), HILOCK_OK);
        cr_assert_gt(hilock_fence(l), last);
        last = hilock_fence(l);
        cr_assert_eq(hilock_release(l), HILOCK_OK);
        hilock_free(l);
    }
    cr_assert(hlt_pttl(r, "{lock.f}:fence") > 0);   /* the counter expires too */
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* legacy_acquire.lua (legacy and bridge grants) mints as acquire.lua does: its clock floor is
 * the server's clock read by the connection's handshake, so no TIME runs inside the script
 * (refused before a write on servers before 5.0), and a token minted after the counter is
 * gone still exceeds the last one, from a fresh client too. */
Test(legacy, legacy_and_bridge_tokens_outlive_the_counter_and_call_no_time_in_the_script)
{
    hlt_redis *r = hlt_redis_started(NULL);
    uint64_t last = 0;
    freeReplyObject(hlt_cmd(r, "CONFIG RESETSTAT"));
    for (int i = 0; i < 6; i++) {
        hilock_options o;
        hilock_client *c = NULL;
        hilock *l;
        const char *url = r->url;
        o = hlt_options(&url, 1);
        o.retry_delay_ms = 50;   /* the library's default */
        o.bridge = i % 2;   /* bridge: hilock_acquire writes a legacy stamp */
        c = hlt_client_new(&o);
        for (int k = 0; k < 3; k++) {
            cr_assert_eq(o.bridge ? hilock_acquire(c, "lock.t", 5000, 0, &l)
                                  : hilock_legacy_acquire(c, "lock.t", 5000, 0, &l),
                         HILOCK_OK, "%s", hilock_client_errmsg(c));
            cr_assert_gt(hilock_fence(l), last, "fence %llu after %llu", (unsigned long long)hilock_fence(l),
                         (unsigned long long)last);
            last = hilock_fence(l);
            cr_assert_eq(hilock_release(l), HILOCK_OK);
            hilock_free(l);
        }
        hilock_client_free(c);
        freeReplyObject(hlt_cmd(r, "PEXPIRE {lock.t}:fence 1"));   /* gone, by the server's clock */
        hlt_sleep_ms(5);
        cr_assert_eq(hlt_exists(r, "{lock.t}:fence"), 0);
    }
    cr_assert_eq(hlt_info_int(r, "commandstats", "cmdstat_time:calls="), 6,
                 "TIME once per connection (its handshake), never in the script");
    hlt_redis_stop(r);
}

/* A client of one kind on r: 'l' legacy (hilock_legacy_acquire), 'b' bridge, 'f' fair.
 * Its grant's fencing token must exceed above. */
static void grant_once(hlt_redis *r, char kind, const char *key, uint64_t above)
{
    hilock_options o;
    hilock_client *c = NULL;
    hilock *l;
    const char *url = r->url;
    o = hlt_options(&url, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    o.bridge = kind == 'b';
    o.fair = kind == 'f';
    c = hlt_client_new(&o);
    cr_assert_eq(kind == 'l' ? hilock_legacy_acquire(c, key, 5000, 0, &l) : hilock_acquire(c, key, 5000, 0, &l),
                 HILOCK_OK, "%c: %s", kind, hilock_client_errmsg(c));
    cr_assert_gt(hilock_fence(l), above, "%c", kind);   /* counter + 1 */
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
}

#define KEEP_35D (35LL * 24 * 3600 * 1000)

/* A hot key's counter runs ahead of the clock (more than a grant a millisecond). Kept only
 * ttl + 1 hour after its last grant, it would expire while still ahead, and the next grant
 * would mint from the clock: a smaller token. Every kind keeps it that hour plus its lead. */
Test(legacy, a_counter_ahead_of_the_clock_is_kept_its_lead_too_by_every_kind)
{
    hlt_redis *r = hlt_redis_started(NULL);
    const char *kinds = hlt_server_version() >= 30200 ? "lbf" : "lb";   /* fair: 3.2+ */
    for (int i = 0; kinds[i]; i++) {
        long long lead = 4LL * 3600 * 1000, pttl;   /* 4 hours ahead */
        long long ahead = hlt_wall_ms() + lead;
        freeReplyObject(hlt_cmd(r, "SET {lock.h}:fence %lld PX 20000", ahead));
        grant_once(r, kinds[i], "lock.h", (uint64_t)ahead);
        pttl = hlt_pttl(r, "{lock.h}:fence");
        cr_assert_gt(pttl, 3600 * 1000 + lead - 60000, "%c: kept %lld ms, lead %lld ms", kinds[i], pttl, lead);
        cr_assert_leq(pttl, 5000 + 3600 * 1000 + lead + 60000, "%c: kept %lld ms", kinds[i], pttl);
    }
    hlt_redis_stop(r);
}

/* A counter that holds a Redlock epoch (>= 2^42) is kept 35 days by acquire.lua: a legacy,
 * bridge or fair grant on the key must not cut it back to the hour of a plain counter, and
 * one with no expiry at all gets the long keep, not garbage. */
Test(legacy, grants_of_every_kind_keep_an_epoch_counter_for_35_days)
{
    hlt_redis *r = hlt_redis_start(NULL);
    const char *kinds = hlt_server_version() >= 30200 ? "lbf" : "lb";   /* fair: 3.2+ */
    freeReplyObject(hlt_cmd(r, "SET {lock.e}:fence 6193708302103 PX %lld", KEEP_35D));
    for (int i = 0; kinds[i]; i++) {
        grant_once(r, kinds[i], "lock.e", 6193708302103ULL);
        long long pttl = hlt_pttl(r, "{lock.e}:fence");
        cr_assert(pttl > KEEP_35D - 600000, "after %c: pttl %lld", kinds[i], pttl);
    }
    for (int i = 0; kinds[i]; i++) {
        freeReplyObject(hlt_cmd(r, "SET {lock.n}:fence 6193708302103"));   /* no expiry */
        grant_once(r, kinds[i], "lock.n", 6193708302103ULL);
        long long pttl = hlt_pttl(r, "{lock.n}:fence");
        cr_assert(pttl > KEEP_35D - 600000 && pttl <= KEEP_35D + 10000, "after %c: pttl %lld", kinds[i], pttl);
    }
    hlt_redis_stop(r);
}

/* ---- tokens at the edge of Lua's numbers (docs/fencing.md) ---- */

/* The acquire of a client of kind 'l' (hilock_legacy_acquire) or 'b' (bridge: hilock_acquire
 * writes a legacy stamp). */
static hilock_status legacy_kind_acquire(hilock_client *c, char kind, const char *key, hilock **l)
{
    return kind == 'l' ? hilock_legacy_acquire(c, key, 5000, 0, l) : hilock_acquire(c, key, 5000, 0, l);
}

/* A legacy or bridge grant on a counter at or above 2^53 - 1 is refused (EREPLY naming the
 * counter and its value) before anything is written: not on a free key, nor on taking over
 * an expired stamp, which stays as it was. 2^53 + 1 and 2^63 - 1 as well. */
Test(legacy, a_fence_counter_at_or_above_2_53_minus_1_refuses_legacy_and_bridge_grants)
{
    static const char *const past[] = { "9007199254740991", "9007199254740993", "9223372036854775807" };
    hlt_redis *r = hlt_redis_started(NULL);
    for (const char *kind = "lb"; *kind; kind++) {
        /* kind 'l': hilock_legacy_acquire; 'b', bridge: hilock_acquire writes a legacy stamp */
        const char *url = r->url;
        hilock_options o = hlt_options(&url, 1);
        o.retry_delay_ms = 10;
        o.bridge = *kind == 'b';
        hilock_client *c = hlt_client_new(&o);
        for (size_t i = 0; i < sizeof past / sizeof *past; i++)
            for (int stamp = 0; stamp < 2; stamp++) {
                hilock *l = (hilock *)&l;
                char *before, *after, *v;
                hilock_status st;
                freeReplyObject(hlt_cmd(r, "FLUSHALL"));
                freeReplyObject(hlt_cmd(r, "SET {lock.big}:fence %s PX 600000", past[i]));
                if (stamp)   /* a doc stamp expired 100 s ago, no TTL: it would be taken over */
                    freeReplyObject(hlt_cmd(r, "SET lock.big %lld", hlt_wall_ms() / 1000 - 100));
                before = hlt_db_snapshot(r, NULL);
                st = legacy_kind_acquire(c, *kind, "lock.big", &l);
                cr_assert_eq(st, HILOCK_EREPLY, "%c %s: %s (%s)", *kind, past[i], hilock_strerror(st),
                             hilock_client_errmsg(c));
                cr_assert_null(l);
                cr_assert(strstr(hilock_client_errmsg(c), "{lock.big}:fence") &&
                          strstr(hilock_client_errmsg(c), past[i]), "%s", hilock_client_errmsg(c));
                after = hlt_db_snapshot(r, NULL);
                cr_assert_str_eq(after, before, "%c %s: the refusal wrote", *kind, past[i]);
                v = hlt_get(r, "{lock.big}:fence");
                cr_assert_str_eq(v, past[i]);
                cr_assert_gt(hlt_pttl(r, "{lock.big}:fence"), 0);
                cr_assert_leq(hlt_pttl(r, "{lock.big}:fence"), 600000);
                free(v);
                free(before);
                free(after);
            }
        hilock_client_free(c);
    }
    hlt_redis_stop(r);
}

/* Just below the limit, legacy and bridge tokens are exact up to 2^53 - 1, written back to the
 * counter digit for digit; the next grant is refused. */
Test(legacy, legacy_and_bridge_fence_tokens_up_to_2_53_minus_1_are_exact)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c[2];
    hilock *l;
    char want[24], *v;
    const char *url = r->url;
    hilock_options o = hlt_options(&url, 1);
    o.retry_delay_ms = 10;
    c[0] = hlt_client_new(&o);   /* legacy: hilock_legacy_acquire */
    o.bridge = 1;                /* bridge: hilock_acquire writes a legacy stamp */
    c[1] = hlt_client_new(&o);
    freeReplyObject(hlt_cmd(r, "SET {lock.e}:fence 9007199254740989 PX 600000"));
    for (unsigned long long f = 9007199254740990ULL; f <= 9007199254740991ULL; f++) {
        int k = (int)(f & 1);   /* legacy, then bridge */
        cr_assert_eq(legacy_kind_acquire(c[k], "lb"[k], "lock.e", &l), HILOCK_OK, "%s", hilock_client_errmsg(c[k]));
        cr_assert_eq(hilock_fence(l), f, "%c: fence %llu, want %llu", "lb"[k], (unsigned long long)hilock_fence(l), f);
        snprintf(want, sizeof want, "%llu", f);
        v = hlt_get(r, "{lock.e}:fence");
        cr_assert_str_eq(v, want);
        free(v);
        cr_assert_eq(hilock_release(l), HILOCK_OK);
        hilock_free(l);
    }
    l = (hilock *)&l;
    cr_assert_eq(legacy_kind_acquire(c[0], 'l', "lock.e", &l), HILOCK_EREPLY);
    cr_assert_null(l);
    cr_assert(strstr(hilock_client_errmsg(c[0]), "9007199254740991"), "%s", hilock_client_errmsg(c[0]));
    cr_assert_eq(hlt_exists(r, "lock.e"), 0);
    hilock_client_free(c[0]);
    hilock_client_free(c[1]);
    hlt_redis_stop(r);
}

Test(legacy, an_unreachable_server_is_an_error_not_busy)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_codec_client(r->url, "doc", 0);
    hilock *l = (hilock *)1;
    hlt_redis_kill(r);
    hilock_status st = hilock_legacy_acquire(c, "lock.down", 5000, 0, &l);
    cr_assert(st == HILOCK_EIO || st == HILOCK_ETIMEDOUT, "%s", hilock_strerror(st));
    cr_assert_null(l);
    cr_assert(strstr(hilock_client_errmsg(c), "127.0.0.1"), "%s", hilock_client_errmsg(c));
    hilock_client_free(c);
    hlt_redis_stop(r);
}
