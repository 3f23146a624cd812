/* SPDX-License-Identifier: BSD-3-Clause */
/* test_lock.c -- the modern lock on one real redis-server: acquire, release, extend, check,
 * expiry, validity, fencing tokens, aux keys, the script cache, SELECT, and two processes
 * hammering one key. Every test asserts the status and the state left in Redis. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clients.h"
#include "fixture.h"
#include "hilock.h"
#include "holders.h"   /* hlt_db_snapshot */
#include "lock.h"   /* the clock reading of a client's node */

static hlt_redis *R;

/* A ttl short enough to wait out, long enough for a first round trip under valgrind. */
#define SHORT_TTL 600

static void setup(void)
{
    R = hlt_redis_start(NULL);
    cr_assert_not_null(R, "redis-server did not start");
}

static void teardown(void) { hlt_redis_stop(R); }

TestSuite(lock, .init = setup, .fini = teardown, .timeout = 30);

static hilock *must_acquire(hilock_client *c, const char *key, int64_t ttl, int64_t wait)
{
    hilock *l = NULL;
    hilock_status st = hilock_acquire(c, key, ttl, wait, &l);
    cr_assert_eq(st, HILOCK_OK, "acquire %s: %s (%s)", key, hilock_strerror(st), hilock_client_errmsg(c));
    cr_assert_not_null(l);
    return l;
}

static void assert_value(const char *key, const char *want)
{
    char *v = hlt_get(R, key);
    if (!want) {
        cr_assert_null(v, "%s should not exist, holds %s", key, v);
    } else {
        cr_assert_not_null(v, "%s should hold %s", key, want);
        cr_assert_str_eq(v, want);
    }
    free(v);
}

/* Wait (bounded) until the key is gone: it expired on the server. */
static void wait_gone(const char *key)
{
    long long end = hlt_now_ms() + 5000;
    while (hlt_exists(R, key) != 0 && hlt_now_ms() < end) hlt_sleep_ms(10);
    cr_assert_eq(hlt_exists(R, key), 0, "%s did not expire", key);
}

static long long info_field(const char *section, const char *field)
{
    redisReply *rep = hlt_cmd(R, "INFO %s", section);
    long long v = -1;
    const char *p;
    cr_assert(rep && rep->type == REDIS_REPLY_STRING);
    if ((p = strstr(rep->str, field))) v = atoll(p + strlen(field));
    freeReplyObject(rep);
    return v;
}

/* Redis Cluster's key slot: CRC16/XMODEM of the hash tag (or the key) mod 16384. */
static unsigned keyslot(const char *key)
{
    const char *s = key, *open = strchr(key, '{');
    size_t n = strlen(key);
    unsigned crc = 0;
    if (open) {
        const char *close = strchr(open + 1, '}');
        if (close && close > open + 1) {
            s = open + 1;
            n = (size_t)(close - open - 1);
        }
    }
    for (size_t i = 0; i < n; i++) {
        crc ^= (unsigned)(unsigned char)s[i] << 8;
        for (int b = 0; b < 8; b++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
    return crc % 16384;
}

/* ---- acquire / release ---- */

Test(lock, acquire_writes_token_with_ttl_and_release_deletes_it)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_acquire(c, "k", 5000, 0);
    long long pttl = hlt_pttl(R, "k");
    assert_value("k", hilock_token(l));
    cr_assert(pttl > 0 && pttl <= 5000, "pttl %lld", pttl);
    cr_assert_str_eq(hilock_key(l), "k");
    cr_assert_str_eq(hilock_client_errmsg(c), "");
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_exists(R, "k"), 0);
    cr_assert_eq(hilock_validity_ms(l), 0);
    hilock_free(l);
    hilock_client_free(c);
}

Test(lock, token_is_32_hex_chars_and_new_for_every_acquisition)
{
    enum { N = 20 };
    char seen[N][33];
    hilock_client *c = hlt_client_retry(R->url, 10);
    for (int i = 0; i < N; i++) {
        hilock *l = must_acquire(c, "k", 5000, 0);
        const char *t = hilock_token(l);
        cr_assert_eq(strlen(t), 32, "token %s", t);
        for (const char *p = t; *p; p++) cr_assert(isxdigit((unsigned char)*p) && !isupper((unsigned char)*p), "token %s", t);
        for (int j = 0; j < i; j++) cr_assert_str_neq(seen[j], t, "token repeated");
        memcpy(seen[i], t, 33);
        cr_assert_eq(hilock_release(l), HILOCK_OK);
        hilock_free(l);
    }
    hilock_client_free(c);
}

Test(lock, second_client_gets_busy_and_changes_nothing)
{
    hilock_client *c1 = hlt_client_retry(R->url, 10), *c2 = hlt_client_retry(R->url, 10);
    hilock *l1 = must_acquire(c1, "k", 30000, 0), *l2 = (hilock *)&l2;
    cr_assert_eq(hilock_acquire(c2, "k", 5000, 0, &l2), HILOCK_BUSY);
    cr_assert_null(l2, "*out must be NULL when not acquired");
    cr_assert(strstr(hilock_client_errmsg(c2), "k"), "errmsg: %s", hilock_client_errmsg(c2));
    assert_value("k", hilock_token(l1));
    cr_assert(hlt_pttl(R, "k") > 5000, "the holder's ttl must not change");
    cr_assert_eq(hilock_check(l1), HILOCK_OK);
    hilock_release(l1);
    hilock_free(l1);
    hilock_client_free(c1);
    hilock_client_free(c2);
}

Test(lock, same_client_cannot_take_a_key_it_holds)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l1 = must_acquire(c, "k", 30000, 0), *l2 = NULL;
    cr_assert_eq(hilock_acquire(c, "k", 5000, 0, &l2), HILOCK_EINVAL);   /* not re-entrant */
    cr_assert_str_eq(hilock_client_errmsg(c), "this client already holds k (hilock locks are not re-entrant)");
    assert_value("k", hilock_token(l1));
    hilock_free(l1);
    hilock_client_free(c);
}

Test(lock, one_client_holds_several_keys)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *a = must_acquire(c, "a", 30000, 0), *b = must_acquire(c, "b", 30000, 0);
    assert_value("a", hilock_token(a));
    assert_value("b", hilock_token(b));
    cr_assert_str_neq(hilock_token(a), hilock_token(b));
    cr_assert_eq(hilock_release(b), HILOCK_OK);
    assert_value("a", hilock_token(a));
    cr_assert_eq(hilock_release(a), HILOCK_OK);
    hilock_free(a);
    hilock_free(b);
    hilock_client_free(c);
}

Test(lock, try_lock_returns_at_once)
{
    hilock_client *c1 = hlt_client_retry(R->url, 10), *c2 = hlt_client_retry(R->url, 10);
    hilock *l1 = must_acquire(c1, "k", 60000, 0), *l2 = NULL;
    long long t0 = hlt_now_ms();
    cr_assert_eq(hilock_acquire(c2, "k", 5000, 0, &l2), HILOCK_BUSY);
    cr_assert_lt(hlt_now_ms() - t0, 1000, "try-lock must not wait");
    hilock_free(l1);
    hilock_client_free(c1);
    hilock_client_free(c2);
}

typedef struct later {
    hilock   *l;
    long      delay_ms;
    hilock_status st;
} later;

static void *release_later(void *arg)
{
    later *x = arg;
    hlt_sleep_ms(x->delay_ms);
    x->st = hilock_release(x->l);
    return NULL;
}

/* The holder (its own client, used only by the thread) releases after 200 ms. */
static void wait_for_release(int64_t wait_ms)
{
    hilock_client *c1 = hlt_client_retry(R->url, 10), *c2 = hlt_client_retry(R->url, 10);
    later x = { must_acquire(c1, "k", 60000, 0), 200, HILOCK_EINVAL };
    hilock *l2 = NULL;
    pthread_t th;
    long long t0 = hlt_now_ms(), dt;
    cr_assert_eq(pthread_create(&th, NULL, release_later, &x), 0);
    cr_assert_eq(hilock_acquire(c2, "k", 10000, wait_ms, &l2), HILOCK_OK, "%s", hilock_client_errmsg(c2));
    dt = hlt_now_ms() - t0;
    pthread_join(th, NULL);
    cr_assert_eq(x.st, HILOCK_OK);
    cr_assert_geq(dt, 150, "acquired after %lld ms, before the holder released", dt);
    cr_assert_lt(dt, 5000);
    assert_value("k", hilock_token(l2));
    cr_assert_eq(hilock_release(l2), HILOCK_OK);
    hilock_free(x.l);
    hilock_free(l2);
    hilock_client_free(c1);
    hilock_client_free(c2);
}

Test(lock, wait_succeeds_when_the_holder_releases) { wait_for_release(10000); }
Test(lock, wait_forever_succeeds_when_the_holder_releases) { wait_for_release(HILOCK_WAIT_FOREVER); }

Test(lock, wait_gives_up_at_its_deadline)
{
    hilock_client *c1 = hlt_client_retry(R->url, 10), *c2 = hlt_client_retry(R->url, 10);
    hilock *l1 = must_acquire(c1, "k", 60000, 0), *l2 = NULL;
    long long t0 = hlt_now_ms(), dt;
    cr_assert_eq(hilock_acquire(c2, "k", 5000, 300, &l2), HILOCK_BUSY);
    dt = hlt_now_ms() - t0;
    cr_assert_null(l2);
    cr_assert_geq(dt, 290, "gave up after %lld ms, before its deadline", dt);
    cr_assert_lt(dt, 3000, "gave up after %lld ms", dt);
    assert_value("k", hilock_token(l1));
    hilock_free(l1);
    hilock_client_free(c1);
    hilock_client_free(c2);
}

Test(lock, waiter_takes_the_lock_when_the_holder_expires)
{
    hilock_client *c1 = hlt_client_retry(R->url, 10), *c2 = hlt_client_retry(R->url, 10);
    hilock *l1 = must_acquire(c1, "k", SHORT_TTL, 0);
    long long t0 = hlt_now_ms();
    hilock *l2 = must_acquire(c2, "k", 5000, 10000);
    cr_assert_lt(hlt_now_ms() - t0, 5000);
    assert_value("k", hilock_token(l2));
    cr_assert_gt(hilock_fence(l2), hilock_fence(l1));
    hilock_free(l1);
    hilock_free(l2);
    hilock_client_free(c1);
    hilock_client_free(c2);
}

/* ---- expiry ---- */

Test(lock, expires_after_its_ttl_and_another_client_takes_it)
{
    hilock_client *c1 = hlt_client_retry(R->url, 10), *c2 = hlt_client_retry(R->url, 10);
    hilock *l1 = must_acquire(c1, "k", SHORT_TTL, 0), *l2;
    wait_gone("k");
    cr_assert_eq(hilock_validity_ms(l1), 0);
    l2 = must_acquire(c2, "k", 5000, 0);
    assert_value("k", hilock_token(l2));
    hilock_free(l1);
    hilock_free(l2);
    hilock_client_free(c1);
    hilock_client_free(c2);
}

Test(lock, release_of_an_expired_lock_is_not_held_and_keeps_the_new_holder)
{
    hilock_client *c1 = hlt_client_retry(R->url, 10), *c2 = hlt_client_retry(R->url, 10);
    hilock *l1 = must_acquire(c1, "k", SHORT_TTL, 0), *l2;
    long long pttl;
    wait_gone("k");
    l2 = must_acquire(c2, "k", 30000, 0);
    pttl = hlt_pttl(R, "k");
    cr_assert_eq(hilock_release(l1), HILOCK_NOT_HELD);
    cr_assert(strstr(hilock_client_errmsg(c1), "another owner"), "errmsg: %s", hilock_client_errmsg(c1));
    assert_value("k", hilock_token(l2));
    cr_assert(hlt_pttl(R, "k") <= pttl && hlt_pttl(R, "k") > 20000);
    cr_assert_eq(hilock_check(l2), HILOCK_OK);
    hilock_free(l1);
    hilock_free(l2);
    hilock_client_free(c1);
    hilock_client_free(c2);
}

Test(lock, release_of_an_expired_free_lock_is_not_held)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_acquire(c, "k", SHORT_TTL, 0);
    wait_gone("k");
    cr_assert_eq(hilock_release(l), HILOCK_NOT_HELD);
    cr_assert(strstr(hilock_client_errmsg(c), "expired"), "errmsg: %s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_exists(R, "k"), 0);
    hilock_free(l);
    hilock_client_free(c);
}

Test(lock, release_twice_says_not_held)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_acquire(c, "k", 5000, 0);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    cr_assert_eq(hilock_release(l), HILOCK_NOT_HELD);
    cr_assert_eq(hlt_exists(R, "k"), 0);
    hilock_free(l);
    hilock_client_free(c);
}

Test(lock, release_refuses_a_foreign_value)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_acquire(c, "k", 30000, 0);
    freeReplyObject(hlt_cmd(R, "SET k someone-else PX 30000"));
    cr_assert_eq(hilock_release(l), HILOCK_NOT_HELD);
    assert_value("k", "someone-else");
    hilock_free(l);
    hilock_client_free(c);
}

/* ---- extend ---- */

Test(lock, extend_of_a_held_lock_moves_pttl_and_validity)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_acquire(c, "k", 1000, 0);
    cr_assert_leq(hilock_validity_ms(l), 1000);
    cr_assert_eq(hilock_extend(l, 60000), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_gt(hlt_pttl(R, "k"), 30000);
    cr_assert_gt(hilock_validity_ms(l), 30000);
    cr_assert_leq(hilock_validity_ms(l), 60000);
    assert_value("k", hilock_token(l));
    /* shorter works too: the new validity is ttl from now */
    cr_assert_eq(hilock_extend(l, 2000), HILOCK_OK);
    cr_assert_leq(hlt_pttl(R, "k"), 2000);
    cr_assert_leq(hilock_validity_ms(l), 2000);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
}

/* hilock.h, hilock_extend: a renewal prolongs the same grant, so the fence (and the counter
 * behind it) and the token stay as the acquire made them. */
Test(lock, extend_keeps_the_fence_and_the_token)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_acquire(c, "k", 1000, 0);
    uint64_t fence = hilock_fence(l);
    char token[64], *counter = hlt_get(R, "{k}:fence");
    cr_assert_not_null(counter);
    cr_assert_gt(fence, 0);
    snprintf(token, sizeof token, "%s", hilock_token(l));
    for (int i = 0; i < 3; i++) {
        char *now;
        cr_assert_eq(hilock_extend(l, 5000), HILOCK_OK, "%s", hilock_client_errmsg(c));
        cr_assert_eq(hilock_fence(l), fence);
        cr_assert_str_eq(hilock_token(l), token);
        assert_value("k", token);
        now = hlt_get(R, "{k}:fence");
        cr_assert_str_eq(now, counter);   /* no counter minted by a renewal */
        free(now);
    }
    free(counter);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
}

Test(lock, extend_of_a_lost_lock_is_not_held_and_creates_nothing)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_acquire(c, "k", SHORT_TTL, 0);
    wait_gone("k");
    cr_assert_eq(hilock_extend(l, 60000), HILOCK_NOT_HELD);
    cr_assert_eq(hlt_exists(R, "k"), 0);
    cr_assert_eq(hilock_validity_ms(l), 0);
    hilock_free(l);
    hilock_client_free(c);
}

Test(lock, extend_of_a_taken_lock_is_not_held_and_leaves_the_new_holder)
{
    hilock_client *c1 = hlt_client_retry(R->url, 10), *c2 = hlt_client_retry(R->url, 10);
    hilock *l1 = must_acquire(c1, "k", SHORT_TTL, 0), *l2;
    wait_gone("k");
    l2 = must_acquire(c2, "k", 5000, 0);
    cr_assert_eq(hilock_extend(l1, 60000), HILOCK_NOT_HELD);
    cr_assert_leq(hlt_pttl(R, "k"), 5000, "the new holder's ttl must not move");
    assert_value("k", hilock_token(l2));
    hilock_free(l1);
    hilock_free(l2);
    hilock_client_free(c1);
    hilock_client_free(c2);
}

Test(lock, extend_of_a_released_lock_is_einval)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_acquire(c, "k", 5000, 0);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    cr_assert_eq(hilock_extend(l, 5000), HILOCK_EINVAL);
    cr_assert_eq(hlt_exists(R, "k"), 0);
    hilock_free(l);
    hilock_client_free(c);
}

/* ---- check ---- */

Test(lock, check_tells_held_from_expired_taken_and_released)
{
    hilock_client *c1 = hlt_client_retry(R->url, 10), *c2 = hlt_client_retry(R->url, 10);
    hilock *l1 = must_acquire(c1, "k", SHORT_TTL, 0), *l2;
    cr_assert_eq(hilock_check(l1), HILOCK_OK);
    wait_gone("k");
    cr_assert_eq(hilock_check(l1), HILOCK_NOT_HELD);
    l2 = must_acquire(c2, "k", 5000, 0);
    cr_assert_eq(hilock_check(l1), HILOCK_NOT_HELD);
    cr_assert(strstr(hilock_client_errmsg(c1), "another owner"), "errmsg: %s", hilock_client_errmsg(c1));
    cr_assert_eq(hilock_check(l2), HILOCK_OK);
    cr_assert_eq(hilock_release(l2), HILOCK_OK);
    cr_assert_eq(hilock_check(l2), HILOCK_NOT_HELD);
    cr_assert_eq(hlt_exists(R, "k"), 0);
    hilock_free(l1);
    hilock_free(l2);
    hilock_client_free(c1);
    hilock_client_free(c2);
}

/* ---- validity ---- */

Test(lock, validity_never_exceeds_ttl_and_shrinks)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_acquire(c, "k", 10000, 0);
    int64_t v1 = hilock_validity_ms(l), v2;
    /* drift allowance: ttl * 0.01 + 2 ms */
    cr_assert_leq(v1, 10000 - 102, "validity %lld", (long long)v1);
    cr_assert_gt(v1, 5000);
    hlt_sleep_ms(60);
    v2 = hilock_validity_ms(l);
    cr_assert_lt(v2, v1, "validity did not shrink: %lld then %lld", (long long)v1, (long long)v2);
    cr_assert_leq(v2, v1 - 50);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    cr_assert_eq(hilock_validity_ms(l), 0);
    hilock_free(l);
    hilock_client_free(c);
}

Test(lock, validity_runs_out_before_the_key_does)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_acquire(c, "k", SHORT_TTL, 0);
    long long end = hlt_now_ms() + 5000;
    while (hilock_validity_ms(l) > 0 && hlt_now_ms() < end) hlt_sleep_ms(5);
    cr_assert_eq(hilock_validity_ms(l), 0);
    /* the server's copy may still be there: validity is the safe side */
    hilock_free(l);
    hilock_client_free(c);
}

/* ---- fencing tokens and aux keys ---- */

Test(lock, fencing_tokens_increase_across_holders)
{
    hilock_client *c[2] = { hlt_client_retry(R->url, 10), hlt_client_retry(R->url, 10) };
    uint64_t prev = 0;
    redisReply *t = hlt_cmd(R, "TIME");
    uint64_t server_ms;
    cr_assert(t && t->type == REDIS_REPLY_ARRAY && t->elements == 2);
    server_ms = strtoull(t->element[0]->str, NULL, 10) * 1000;
    freeReplyObject(t);
    for (int i = 0; i < 20; i++) {
        hilock *l = must_acquire(c[i % 2], "k", 5000, 0);
        cr_assert_gt(hilock_fence(l), prev, "fence %llu after %llu", (unsigned long long)hilock_fence(l),
                     (unsigned long long)prev);
        cr_assert_geq(hilock_fence(l), server_ms, "fence is at least the server clock in ms");
        prev = hilock_fence(l);
        cr_assert_eq(hilock_release(l), HILOCK_OK);
        hilock_free(l);
    }
    hilock_client_free(c[0]);
    hilock_client_free(c[1]);
}

Test(lock, fencing_token_honours_a_counter_ahead_of_the_clock)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l;
    /* many grants in one ms, or the server clock stepping back: the counter still grows */
    freeReplyObject(hlt_cmd(R, "SET {k}:fence 99999999999999 PX 60000"));
    l = must_acquire(c, "k", 5000, 0);
    cr_assert_eq(hilock_fence(l), 100000000000000ULL);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    l = must_acquire(c, "k", 5000, 0);
    cr_assert_eq(hilock_fence(l), 100000000000001ULL);
    hilock_free(l);
    hilock_client_free(c);
}

Test(lock, fencing_token_keeps_growing_after_the_counter_is_gone)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    uint64_t prev = 0;
    for (int i = 0; i < 3; i++) {
        hilock *l = must_acquire(c, "k", 5000, 0);
        cr_assert_gt(hilock_fence(l), prev);
        prev = hilock_fence(l);
        cr_assert_eq(hilock_release(l), HILOCK_OK);
        hilock_free(l);
        /* as if it had expired (it is kept ttl + 1 h): the server clock takes over */
        freeReplyObject(hlt_cmd(R, "DEL {k}:fence"));
        hlt_sleep_ms(20);
    }
    hilock_client_free(c);
}

/* The token's clock floor is the server's clock as read by the connection's handshake, passed
 * to the script: no TIME inside it (servers before 5.0 refuse a write after TIME), so the
 * server runs TIME once per connection, not once per grant. */
Test(lock, the_fencing_token_calls_no_time_inside_the_acquire_script)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    uint64_t prev = 0;
    freeReplyObject(hlt_cmd(R, "CONFIG RESETSTAT"));
    for (int i = 0; i < 10; i++) {
        hilock *l = must_acquire(c, "k", 5000, 0);
        cr_assert_gt(hilock_fence(l), prev);
        prev = hilock_fence(l);
        cr_assert_eq(hilock_release(l), HILOCK_OK);
        hilock_free(l);
    }
    cr_assert_eq(hlt_info_int(R, "commandstats", "cmdstat_time:calls="), 1,
                 "TIME once, by the connection's handshake");
    hilock_client_free(c);
}

/* A token minted after the counter is gone (it expired: kept ttl + 1 h; or a restart without
 * persistence lost it) still exceeds the last one, minted by another client on another
 * connection: the floor is the server's clock, whoever reckons it. */
Test(lock, a_token_minted_after_the_counter_expired_exceeds_the_last_one)
{
    hilock_client *a = hlt_client_retry(R->url, 10);
    uint64_t prev = 0;
    for (int i = 0; i < 6; i++) {
        hilock_client *c = i % 2 ? hlt_client_retry(R->url, 10) : a;   /* a long-lived client, and fresh ones */
        hilock *l = must_acquire(c, "k", 5000, 0);
        cr_assert_gt(hilock_fence(l), prev, "fence %llu after %llu", (unsigned long long)hilock_fence(l),
                     (unsigned long long)prev);
        prev = hilock_fence(l);
        cr_assert_eq(hilock_release(l), HILOCK_OK);
        hilock_free(l);
        if (c != a) hilock_client_free(c);
        freeReplyObject(hlt_cmd(R, "PEXPIRE {k}:fence 1"));   /* expires now, by the server's clock */
        /* A floor reads the server's clock late by its TIME reply's trip (a fresh connection's,
         * under emulation, a few ms): the gap before the next grant stands for the hour a
         * counter outlives its last grant, so it must exceed that error, not race it. */
        hlt_sleep_ms(50);
        cr_assert_eq(hlt_exists(R, "{k}:fence"), 0);
    }
    hilock_client_free(a);
}

Test(lock, a_token_minted_after_a_restart_without_persistence_exceeds_the_last_one)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    uint64_t prev = 0;
    for (int i = 0; i < 2; i++) {
        for (int k = 0; k < 20; k++) {   /* several grants in one ms: the counter runs ahead */
            hilock *l = must_acquire(c, "k", 5000, 2000);   /* (the wait retries a broken connection) */
            cr_assert_gt(hilock_fence(l), prev);
            prev = hilock_fence(l);
            cr_assert_eq(hilock_release(l), HILOCK_OK);
            hilock_free(l);
        }
        hlt_sleep_ms(30);   /* the clock passes the counter again (< 1 grant per ms on average) */
        cr_assert_eq(hlt_redis_restart(R), 0);   /* --save '': the counter is gone */
        cr_assert_eq(hlt_exists(R, "{k}:fence"), 0);
    }
    {
        hilock *l = must_acquire(c, "k", 5000, 2000);   /* on a new connection: its own reading */
        cr_assert_gt(hilock_fence(l), prev);
        hilock_free(l);
    }
    hilock_client_free(c);
}

/* The floor counts the client's monotonic time since the reading 1000 ppm slow, so a client
 * clock running fast cannot carry it past the server's; a reading a day old is taken again by
 * a new connection before the next round trip. */
Test(lock, the_clock_floor_runs_slow_and_a_day_old_reading_is_taken_again)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_acquire(c, "k", 5000, 0);
    hl_node *n = &c->nodes[0];
    int64_t read_ms = n->facts.clock_ms, at = n->facts.clock_at_us;
    long long conns = hlt_info_int(R, "stats", "total_connections_received:");
    cr_assert_gt(read_ms, 0, "the handshake read the server's clock");
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    /* as if read 1000 s ago: 1000 s counted 1 s slow */
    n->facts.clock_at_us = at - 1000LL * 1000000;
    cr_assert_geq(hl_node_clock_floor_ms(n), read_ms + 1000 * 1000 - 1000);
    cr_assert_leq(hl_node_clock_floor_ms(n), read_ms + 1000 * 1000 - 1000 + (hl_now_us() - at) / 1000 + 1);
    cr_assert_eq(hl_node_clock_old(n, hl_now_us()), 0);
    /* a day and a minute ago: the next acquire reconnects, and its handshake reads it anew */
    n->facts.clock_at_us = at - (24LL * 3600 + 60) * 1000000;
    cr_assert_eq(hl_node_clock_old(n, hl_now_us()), 1);
    l = must_acquire(c, "k", 5000, 0);
    cr_assert_eq(hlt_info_int(R, "stats", "total_connections_received:"), conns + 1, "a new connection");
    cr_assert_geq(n->facts.clock_at_us, at, "read again");
    cr_assert_eq(hl_node_clock_old(n, hl_now_us()), 0);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
}

/* TIME refused (an ACL user without it): the client's wall clock at the handshake stands in
 * as the reading, counted slow as the server's would be (it followed the client's wall clock
 * unslowed, and was never taken again), and a day-old one is taken again. */
Test(lock, without_time_the_wall_clock_stands_in_counted_slow_and_is_taken_again)
{
    char url[300];
    hilock_client *c;
    hilock *l;
    hl_node *n;
    int64_t w0, at, f;
    long long conns;
    redisReply *rep;
    HLT_NEEDS(60000, "no ACL users");
    rep = hlt_cmd(R, "ACL SETUSER notime on >pw ~* +@all -time");
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS, "ACL SETUSER");
    freeReplyObject(rep);
    snprintf(url, sizeof url, "redis://notime:pw@127.0.0.1:%d", R->port);
    c = hlt_client_retry(url, 10);
    l = must_acquire(c, "k", 5000, 0);
    w0 = hl_wall_us() / 1000;
    n = &c->nodes[0];
    at = n->facts.clock_at_us;
    cr_assert_eq(hl_node_server_ms(n), -1, "TIME refused: the server's clock unknown");
    cr_assert(hilock_fence(l) > 0);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    /* as if read 1000 s ago: the wall clock then + 1000 s counted 1 s slow */
    n->facts.clock_at_us = at - 1000LL * 1000000;
    f = hl_node_clock_floor_ms(n);
    cr_assert_geq(f, w0 - 5000 + 999000, "floor %lld, wall clock %lld", (long long)f, (long long)w0);
    cr_assert_leq(f, w0 + 999000 + 1000, "floor %lld, wall clock %lld", (long long)f, (long long)w0);
    conns = hlt_info_int(R, "stats", "total_connections_received:");
    n->facts.clock_at_us = at - (24LL * 3600 + 60) * 1000000;
    cr_assert_eq(hl_node_clock_old(n, hl_now_us()), 1, "a day-old stand-in is taken again");
    l = must_acquire(c, "k", 5000, 0);
    cr_assert_eq(hlt_info_int(R, "stats", "total_connections_received:"), conns + 1, "a new connection");
    cr_assert_geq(n->facts.clock_at_us, at, "read again");
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
}

/* acquire.lua reads and writes the counter with one INCR: a counter of another type fails the
 * grant (WRONGTYPE) and the lock it had just written is undone; a string that is no integer
 * (nothing of ours writes one) is replaced by the clock, as a counter at 0 would be. */
Test(lock, a_counter_of_another_type_fails_the_grant_and_leaves_no_lock)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = NULL;
    char *v;
    freeReplyObject(hlt_cmd(R, "SADD {w}:fence x"));
    cr_assert_eq(hilock_acquire(c, "w", 5000, 0, &l), HILOCK_EREPLY);
    cr_assert_null(l);
    cr_assert(strstr(hilock_client_errmsg(c), "WRONGTYPE"), "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_exists(R, "w"), 0, "the lock written before the INCR is undone");
    freeReplyObject(hlt_cmd(R, "SET {g}:fence not-a-number PX 60000"));
    l = must_acquire(c, "g", 5000, 0);
    cr_assert_gt(hilock_fence(l), 1700000000000ULL, "the clock, not 1");
    v = hlt_get(R, "{g}:fence");
    cr_assert_eq(strtoull(v, NULL, 10), hilock_fence(l));
    free(v);
    cr_assert_gt(hlt_pttl(R, "{g}:fence"), 3600000, "kept ttl + 1 h");
    hilock_free(l);
    hilock_client_free(c);
}

/* A counter ahead of the clock is INCRed alone (one command): its expiry is renewed to ttl +
 * 1 h on every 1024th grant, not on each, and at once when it falls back to the clock. */
Test(lock, a_counter_ahead_of_the_clock_is_renewed_every_1024th_grant)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    /* below 2^42 (no epoch), far ahead of the clock; 80 grants to the next multiple of 1024 */
    freeReplyObject(hlt_cmd(R, "SET {r}:fence 4398046510000 PX 20000"));
    for (uint64_t want = 4398046510001ULL; want <= 4398046510080ULL; want++) {
        hilock *l = must_acquire(c, "r", 5000, 0);
        cr_assert_eq(hilock_fence(l), want);
        if (want < 4398046510080ULL)
            cr_assert_leq(hlt_pttl(R, "{r}:fence"), 20000, "renewed at %llu", (unsigned long long)want);
        else   /* the 1024th: kept ttl + 1 h + its lead over the clock (~2.6e12 ms here) */
            cr_assert_gt(hlt_pttl(R, "{r}:fence"), 3600000 + (long long)want - 1800000000000LL,
                         "the 1024th: kept ttl + 1 h + the lead");
        cr_assert_eq(hilock_release(l), HILOCK_OK);
        hilock_free(l);
    }
    hilock_client_free(c);
}

/* ---- tokens at the edge of Lua's numbers (docs/fencing.md) ---- */

/* Counters no grant may count from: 2^53 - 1 (its token 2^53 would be exact, the next one,
 * 2^53 + 1, reads as 2^53 again: one token twice), 2^53 + 1, and 2^63 - 1 (INCR overflows,
 * and the clock stood in: the token went back from 9.2e18 to 1.8e12). */
static const char *const past_2_53[] = { "9007199254740991", "9007199254740993", "9223372036854775807" };

/* An acquire of key on its counter's value v: EREPLY naming the counter and v, and the
 * database as it was (no lock, no holder record, the counter's value and expiry kept). */
static void assert_fence_refused(hilock_client *c, const char *key, const char *fence_key, const char *v)
{
    hilock *l = (hilock *)&l;
    char *before = hlt_db_snapshot(R, NULL), *after, *now;
    long long pttl = hlt_pttl(R, fence_key);
    hilock_status st = hilock_acquire(c, key, 5000, 0, &l);
    const char *e = hilock_client_errmsg(c);
    cr_assert_eq(st, HILOCK_EREPLY, "counter %s: %s (%s)", v, hilock_strerror(st), e);
    cr_assert_null(l);
    cr_assert(strstr(e, fence_key) && strstr(e, v), "errmsg names neither %s nor %s: %s", fence_key, v, e);
    after = hlt_db_snapshot(R, NULL);
    cr_assert_str_eq(after, before, "counter %s: the refusal wrote", v);
    cr_assert_eq(hlt_exists(R, key), 0);
    now = hlt_get(R, fence_key);
    cr_assert_str_eq(now, v);
    cr_assert(hlt_pttl(R, fence_key) > 0 && hlt_pttl(R, fence_key) <= pttl, "its expiry kept");
    free(before);
    free(after);
    free(now);
}

Test(lock, a_fence_counter_at_or_above_2_53_minus_1_is_refused_and_nothing_is_written)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    for (size_t i = 0; i < sizeof past_2_53 / sizeof *past_2_53; i++) {
        freeReplyObject(hlt_cmd(R, "SET {big}:fence %s PX 600000", past_2_53[i]));
        assert_fence_refused(c, "big", "{big}:fence", past_2_53[i]);
    }
    /* past 2^63 - 1 (no integer to INCR): refused too, not replaced by the clock */
    freeReplyObject(hlt_cmd(R, "SET {big}:fence 18446744073709551617 PX 600000"));
    assert_fence_refused(c, "big", "{big}:fence", "18446744073709551617");
    hilock_client_free(c);
}

Test(lock, fence_tokens_up_to_2_53_minus_1_are_exact_and_then_refused)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    char want[24], *v;
    freeReplyObject(hlt_cmd(R, "SET {e}:fence 9007199254740989 PX 600000"));
    for (unsigned long long f = 9007199254740990ULL; f <= 9007199254740991ULL; f++) {
        hilock *l = must_acquire(c, "e", 5000, 0);
        cr_assert_eq(hilock_fence(l), f, "fence %llu, want %llu", (unsigned long long)hilock_fence(l), f);
        snprintf(want, sizeof want, "%llu", f);
        v = hlt_get(R, "{e}:fence");
        cr_assert_str_eq(v, want);
        free(v);
        cr_assert_eq(hilock_release(l), HILOCK_OK);
        hilock_free(l);
    }
    /* the counter holds the last exact token: the next grant is refused, not 2^53 twice */
    assert_fence_refused(c, "e", "{e}:fence", "9007199254740991");
    hilock_client_free(c);
}

static void check_fence_key(const char *key, const char *fence_key, int64_t ttl)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_acquire(c, key, ttl, 0);
    char *v = hlt_get(R, fence_key);
    long long pttl = hlt_pttl(R, fence_key);
    cr_assert_not_null(v, "no fence key %s for %s", fence_key, key);
    cr_assert_eq(strtoull(v, NULL, 10), hilock_fence(l));
    free(v);
    cr_assert_eq(keyslot(fence_key), keyslot(key), "%s and %s in different slots", key, fence_key);
    cr_assert(pttl > ttl && pttl <= ttl + 3600 * 1000, "fence key pttl %lld", pttl);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
}

Test(lock, fence_key_shares_the_hash_slot_and_expires)
{
    check_fence_key("plain", "{plain}:fence", 5000);
    check_fence_key("jobs:{tenant7}:nightly", "jobs:{tenant7}:nightly:fence", 5000);
    check_fence_key("{t}", "{t}:fence", 5000);
    check_fence_key("a{b", "{a{b}:fence", 5000);
}

Test(lock, nothing_is_left_without_a_ttl)
{
    hilock_client *c1 = hlt_client_retry(R->url, 10), *c2 = hlt_client_retry(R->url, 10);
    redisReply *keys;
    hilock *l = must_acquire(c1, "x", SHORT_TTL, 0), *m;
    wait_gone("x");
    m = must_acquire(c2, "x", 5000, 0);
    cr_assert_eq(hilock_release(l), HILOCK_NOT_HELD);
    cr_assert_eq(hilock_extend(m, 8000), HILOCK_OK);
    cr_assert_eq(hilock_release(m), HILOCK_OK);
    hilock_free(l);
    hilock_free(m);
    l = must_acquire(c1, "y{t}", 5000, 0);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    keys = hlt_cmd(R, "KEYS *");
    cr_assert(keys && keys->type == REDIS_REPLY_ARRAY);
    /* the two fence counters, and the holder records the grants' clients keep (acquire.lua),
     * each with a ttl */
    cr_assert_eq(keys->elements, 4, "only the two fence counters and holder records are left");
    for (size_t i = 0; i < keys->elements; i++) {
        long long pttl = hlt_pttl(R, keys->element[i]->str);
        cr_assert_gt(pttl, 0, "%s has no ttl", keys->element[i]->str);
    }
    freeReplyObject(keys);
    hilock_client_free(c1);
    hilock_client_free(c2);
}

/* ---- script cache ---- */

static void script_flush(void) { freeReplyObject(hlt_cmd(R, "SCRIPT FLUSH")); }

Test(lock, evalsha_falls_back_to_eval_after_script_flush)
{
    hilock_client *c1 = hlt_client_retry(R->url, 10), *c2 = hlt_client_retry(R->url, 10);
    hilock *l, *m = NULL;
    script_flush();
    l = must_acquire(c1, "k", 2000, 0);
    script_flush();
    cr_assert_eq(hilock_extend(l, 60000), HILOCK_OK, "%s", hilock_client_errmsg(c1));
    cr_assert_gt(hlt_pttl(R, "k"), 30000);
    script_flush();
    cr_assert_eq(hilock_check(l), HILOCK_OK);
    script_flush();
    cr_assert_eq(hilock_acquire(c2, "k", 2000, 0, &m), HILOCK_BUSY, "%s", hilock_client_errmsg(c2));
    script_flush();
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c1));
    cr_assert_eq(hlt_exists(R, "k"), 0);
    script_flush();
    cr_assert_eq(hilock_extend(l, 60000), HILOCK_EINVAL);
    /* EVALSHA is tried first; EVAL only after NOSCRIPT */
    cr_assert_gt(info_field("commandstats", "cmdstat_evalsha:calls="), 0);
    cr_assert_gt(info_field("commandstats", "cmdstat_eval:calls="), 0);
    hilock_free(l);
    hilock_client_free(c1);
    hilock_client_free(c2);
}

/* ---- databases and transports ---- */

static void assert_in_db(int db, const char *key, const char *want)
{
    redisReply *rep = hlt_cmd(R, "SELECT %d", db);
    freeReplyObject(rep);
    assert_value(key, want);
    freeReplyObject(hlt_cmd(R, "SELECT 0"));
}

Test(lock, select_puts_the_key_in_the_chosen_db)
{
    char url[300];
    hilock_client *c;
    hilock *l;
    snprintf(url, sizeof url, "%s/3", R->url);
    c = hlt_client_retry(url, 10);
    l = must_acquire(c, "k", 30000, 0);
    assert_in_db(3, "k", hilock_token(l));
    assert_in_db(0, "k", NULL);
    cr_assert_eq(hilock_check(l), HILOCK_OK);
    cr_assert_eq(hilock_extend(l, 30000), HILOCK_OK);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    assert_in_db(3, "k", NULL);
    hilock_free(l);
    hilock_client_free(c);
}

Test(lock, unix_socket_url_with_db)
{
    char url[300];
    hilock_client *c;
    hilock *l;
    snprintf(url, sizeof url, "%s?db=5", R->unix_url);
    c = hlt_client_retry(url, 10);
    l = must_acquire(c, "k", 30000, 0);
    assert_in_db(5, "k", hilock_token(l));
    assert_in_db(0, "k", NULL);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    assert_in_db(5, "k", NULL);
    hilock_free(l);
    hilock_client_free(c);
}

/* ---- lifetime ---- */

Test(lock, a_lock_keeps_its_client_alive)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_acquire(c, "k", 30000, 0);
    hilock_client_free(c);   /* the caller's reference only */
    cr_assert_eq(hilock_check(l), HILOCK_OK);
    cr_assert_eq(hilock_extend(l, 20000), HILOCK_OK);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    cr_assert_eq(hlt_exists(R, "k"), 0);
    hilock_free(l);
}

Test(lock, free_without_release_leaves_the_key_to_expire)
{
    hilock_client *c = hlt_client_retry(R->url, 10);
    hilock *l = must_acquire(c, "k", 30000, 0);
    char *tok = strdup(hilock_token(l));
    hilock_free(l);
    hilock_client_free(c);
    assert_value("k", tok);
    cr_assert_gt(hlt_pttl(R, "k"), 0);
    free(tok);
}

/* ---- two processes hammering one key ---- */

enum { HAMMER_PROCS = 3, HAMMER_ITERS = 30 };

/* One child: its own client and its own read-back connection; counts in Redis, non-atomically
 * (GET, pause, SET), inside the lock. Exit code says what went wrong. */
static int hammer(const char *url, const char *sock)
{
    hilock_options o = hlt_options(&url, 1);
    hilock_client *c;
    redisContext *rc;
    long long end = hlt_now_ms() + 20000;
    int rv = 0;
    o.retry_delay_ms = 5;
    /* (a forked child: it says what failed by its exit code, not by an assert) */
    if (hilock_client_new(&o, &c) != HILOCK_OK) return 10;
    rc = redisConnectUnix(sock);
    if (!rc || rc->err) rv = 11;
    for (int i = 0; !rv && i < HAMMER_ITERS && hlt_now_ms() < end; i++) {
        hilock *l;
        redisReply *in, *v;
        long long n;
        if (hilock_acquire(c, "hammer", 5000, 10000, &l) != HILOCK_OK) { rv = 12; break; }
        in = redisCommand(rc, "INCR inside");
        if (!in || in->integer != 1) rv = 13;   /* someone else is inside too */
        if (in) freeReplyObject(in);
        v = redisCommand(rc, "GET counter");
        n = v && v->type == REDIS_REPLY_STRING ? atoll(v->str) : 0;
        if (v) freeReplyObject(v);
        usleep(500);
        freeReplyObject(redisCommand(rc, "SET counter %lld", n + 1));
        freeReplyObject(redisCommand(rc, "DECR inside"));
        if (hilock_release(l) != HILOCK_OK && !rv) rv = 14;
        hilock_free(l);
    }
    if (rc) redisFree(rc);
    hilock_client_free(c);
    return rv;
}

Test(lock, processes_hammering_one_key_never_both_hold_it, .timeout = 60)
{
    pid_t pid[HAMMER_PROCS];
    char *v;
    for (int i = 0; i < HAMMER_PROCS; i++) {
        pid[i] = fork();
        cr_assert_geq(pid[i], 0);
        if (pid[i] == 0) _exit(hammer(R->url, R->sock));
    }
    for (int i = 0; i < HAMMER_PROCS; i++) {
        int st;
        cr_assert_eq(waitpid(pid[i], &st, 0), pid[i]);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d: status %d", i, st);
    }
    v = hlt_get(R, "counter");
    cr_assert_not_null(v);
    cr_assert_eq(atoi(v), HAMMER_PROCS * HAMMER_ITERS, "counter %s", v);
    free(v);
    cr_assert_eq(hlt_exists(R, "hammer"), 0);
}
