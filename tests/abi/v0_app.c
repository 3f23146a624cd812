/* SPDX-License-Identifier: BSD-3-Clause */
/* v0_app.c -- an application built against hilock 0.1.0's header (tests/abi/v0/, a frozen,
 * byte-identical copy of include/hilock.h and hilock_legacy.h at commit 6189a95), linked
 * dynamically to the library being tested (build/libhilock.so.0). It must keep working
 * unrebuilt however hilock_options grows (docs/versioning.md): tests/test_abi.c runs it.
 *
 * Its structs live on the heap in blocks of exactly their 0.1.0 size, so a library that read
 * or wrote past them would be caught by AddressSanitizer (make test-asan builds this program
 * and the library with it). It checks that every option reaches the library at its 0.1.0
 * offset (a bad value of each field is refused naming that field), and that non-default
 * options take effect on a real server: acquire/release, drift_factor, codec, legacy_pexpire,
 * wake, min_replicas/replicas_timeout_ms, io_timeout_ms, and the keepalive's max_renewals.
 *
 * usage: v0_app HOST PORT -- prints what it checks; exit 0 = all held. */
#define _GNU_SOURCE
#include <hilock.h>          /* -Itests/abi/v0: the frozen header, never include/ */
#include <hilock_legacy.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int failures;
static redisContext *rc;     /* a separate connection to read back what the server holds */

#define CHECK(cond, ...)                                                            \
    do {                                                                            \
        if (cond) break;                                                            \
        failures++;                                                                 \
        printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                      \
        printf(__VA_ARGS__);                                                        \
        printf("\n");                                                               \
    } while (0)

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static long long server_int(const char *cmd, const char *key)
{
    redisReply *r = redisCommand(rc, "%s %s", cmd, key);
    long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -99;
    freeReplyObject(r);
    return v;
}

/* A fresh 0.1.0-sized options block with the defaults and our server. */
static hilock_options *fresh(const char *const *url)
{
    hilock_options *o = malloc(sizeof *o);
    if (!o) exit(3);
    hilock_options_init(o);
    o->servers = url;
    o->nservers = 1;
    return o;
}

/* Each field at its 0.1.0 offset: a bad value of it is refused, naming it. */
static void probe_fields(const char *const *url)
{
    static const char *const names[] = {   /* what the errmsg names */
        "at most 32 servers", "connect_timeout_ms", "io_timeout_ms", "retry_delay_ms", "drift_factor",
        "min_replicas", "replicas_timeout_ms", "failover_guard must", "bridge", "codec.unit",
        "codec.decimals", "codec.suffix", "skew_margin_ms", "clock_offset_ms", "legacy_pexpire",
        "wake", "failover_guard_ms",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        hilock_options *o = fresh(url);
        hilock_client *c = (hilock_client *)1;
        switch (i) {
        case 0: o->nservers = 33; break;
        case 1: o->connect_timeout_ms = 0; break;
        case 2: o->io_timeout_ms = 3600001; break;
        case 3: o->retry_delay_ms = -1; break;
        case 4: o->drift_factor = 0.5; break;
        case 5: o->min_replicas = 65; break;
        case 6: o->replicas_timeout_ms = 0; break;
        case 7: o->failover_guard = 2; break;
        case 8: o->bridge = 2; break;
        case 9: o->codec.unit = (hilock_unit)7; break;
        case 10: o->codec.decimals = 7; break;
        case 11: o->codec.suffix = (hilock_suffix)9; break;
        case 12: o->skew_margin_ms = -1; break;
        case 13: o->clock_offset_ms = 86400001; break;
        case 14: o->legacy_pexpire = 2; break;
        case 15: o->wake = -1; break;
        case 16: o->failover_guard_ms = -1; break;
        }
        CHECK(hilock_client_new(o, &c) == HILOCK_EINVAL && c == NULL, "field %s", names[i]);
        CHECK(strstr(hilock_last_config_error(), names[i]) != NULL, "field %s: errmsg '%s'", names[i],
              hilock_last_config_error());
        free(o);
    }
    printf("each of the 0.1.0 fields reaches the library at its offset (%zu probed)\n",
           sizeof names / sizeof names[0]);
}

static hilock_client *client(hilock_options *o)
{
    hilock_client *c = NULL;
    CHECK(hilock_client_new(o, &c) == HILOCK_OK, "%s", hilock_last_config_error());
    free(o);   /* the library copied what it keeps */
    if (!c) exit(1);
    return c;
}

static void lost(hilock *l, hilock_status why, void *arg)
{
    (void)l, (void)why, (void)arg;
}

int main(int argc, char **argv)
{
    char url_s[300];
    const char *url = url_s;
    hilock_options *o;
    hilock_keepalive_options *ko;
    hilock_client *c, *holder, *waiter, *other;
    hilock *l, *h;
    hilock_status st;
    long long t0, took;
    if (argc != 3) return 2;
    snprintf(url_s, sizeof url_s, "redis://%s:%s", argv[1], argv[2]);
    if (!(rc = redisConnect(argv[1], atoi(argv[2]))) || rc->err) return 2;
    printf("built against hilock %s: sizeof(hilock_options) = %zu, sizeof(hilock_keepalive_options) = %zu\n",
           HILOCK_VERSION, sizeof(hilock_options), sizeof(hilock_keepalive_options));

    o = fresh(&url);
    /* (double)0.01: where doubles are computed in extended precision (i386's x87,
     * FLT_EVAL_METHOD 2), the constant 0.01 is a long double, unequal to the stored double */
    CHECK(o->connect_timeout_ms == 1000 && o->io_timeout_ms == 1000 && o->retry_delay_ms == 50 &&
          o->drift_factor == (double)0.01 && o->replicas_timeout_ms == 100 && o->failover_guard == -1 &&
          o->codec.plus_one == 1 && o->wake == 1 && o->failover_guard_ms == 0, "defaults");
    free(o);
    probe_fields(&url);

    /* non-default options take effect */
    o = fresh(&url);
    o->io_timeout_ms = 100;
    o->retry_delay_ms = 7;
    o->drift_factor = 0.3;
    o->wake = 0;
    o->legacy_pexpire = 1;
    o->failover_guard_ms = 1234;
    CHECK(hilock_codec_preset("node-redis-lock", &o->codec) == HILOCK_OK, "preset");
    c = client(o);

    st = hilock_acquire(c, "abi:k", 5000, 0, &l);
    CHECK(st == HILOCK_OK, "acquire: %s: %s", hilock_strerror(st), hilock_client_errmsg(c));
    if (l) {
        /* drift 0.3: validity <= 5000 - 1502 */
        CHECK(hilock_validity_ms(l) > 0 && hilock_validity_ms(l) <= 3498, "validity %lld",
              (long long)hilock_validity_ms(l));
        CHECK(hilock_fence(l) > 0 && server_int("EXISTS", "abi:k") == 1, "held");
        CHECK(hilock_release(l) == HILOCK_OK && server_int("EXISTS", "abi:k") == 0, "released");
        hilock_free(l);
    }
    /* ttl 4 leaves < 1 ms after drift 0.3 (1.2 + 2 ms), ~2 ms after the default 0.01 */
    CHECK(hilock_acquire(c, "abi:short", 4, 0, &l) == HILOCK_EINVAL && l == NULL &&
          strstr(hilock_client_errmsg(c), "drift"), "drift_factor: %s", hilock_client_errmsg(c));
    printf("acquire/release with non-default options: ok (drift_factor 0.3 in effect)\n");

    /* codec node-redis-lock: a stamp in ms (13 digits), and legacy_pexpire gives it a TTL */
    st = hilock_legacy_acquire(c, "abi:legacy", 5000, 0, &l);
    CHECK(st == HILOCK_OK, "legacy acquire: %s: %s", hilock_strerror(st), hilock_client_errmsg(c));
    if (l) {
        CHECK(strlen(hilock_token(l)) == 13, "ms stamp: '%s'", hilock_token(l));
        CHECK(server_int("PTTL", "abi:legacy") > 0, "legacy_pexpire");
        CHECK(hilock_release(l) == HILOCK_OK, "legacy release");
        hilock_free(l);
    }
    printf("codec and legacy_pexpire in effect\n");

    /* wake = 0: a waiter polls and leaves no {key}:waiters mark (the default client does) */
    CHECK(hilock_client_open(url, &holder) == HILOCK_OK, "open");
    CHECK(hilock_acquire(holder, "abi:w", 5000, 0, &h) == HILOCK_OK, "holder");
    CHECK(hilock_acquire(c, "abi:w", 5000, 100, &l) == HILOCK_BUSY, "waits, busy");
    CHECK(server_int("EXISTS", "{abi:w}:waiters") == 0, "wake = 0 leaves no waiters mark");
    /* (another client: the holder's own second acquire is refused, not re-entrant) */
    CHECK(hilock_client_open(url, &other) == HILOCK_OK, "open");
    CHECK(hilock_acquire(other, "abi:w", 5000, 100, &l) == HILOCK_BUSY, "default waiter busy");
    CHECK(server_int("EXISTS", "{abi:w}:waiters") == 1, "the default waiter marks itself");
    CHECK(hilock_release(h) == HILOCK_OK, "holder release");
    hilock_free(h);
    hilock_client_free(holder);
    hilock_client_free(other);
    printf("wake = 0 in effect\n");

    /* min_replicas / replicas_timeout_ms: no replica acknowledges within 37 ms */
    o = fresh(&url);
    o->min_replicas = 1;
    o->replicas_timeout_ms = 37;
    waiter = client(o);
    CHECK(hilock_acquire(waiter, "abi:r", 5000, 0, &l) == HILOCK_EREPLICAS, "EREPLICAS");
    CHECK(strstr(hilock_client_errmsg(waiter), "within 37 ms") != NULL, "errmsg '%s'",
          hilock_client_errmsg(waiter));
    CHECK(server_int("EXISTS", "abi:r") == 0, "undone");
    hilock_client_free(waiter);
    printf("min_replicas and replicas_timeout_ms in effect\n");

    /* io_timeout_ms 100: a paused server times the call out long before the default 1000 ms */
    freeReplyObject(redisCommand(rc, "CLIENT PAUSE 5000 WRITE"));
    t0 = now_ms();
    st = hilock_acquire(c, "abi:t", 5000, 0, &l);
    took = now_ms() - t0;
    freeReplyObject(redisCommand(rc, "CLIENT UNPAUSE"));
    CHECK(st == HILOCK_ETIMEDOUT && took < 900, "%s after %lld ms: %s", hilock_strerror(st), took,
          hilock_client_errmsg(c));
    printf("io_timeout_ms in effect (ETIMEDOUT after %lld ms)\n", took);
    hilock_client_free(c);

    /* keepalive options of 0.1.0's size: max_renewals = 1 stops after one renewal */
    CHECK(hilock_client_open(url, &c) == HILOCK_OK, "open");
    CHECK(hilock_acquire(c, "abi:ka", 300, 0, &l) == HILOCK_OK, "acquire");
    if (!(ko = malloc(sizeof *ko))) return 3;
    hilock_keepalive_options_init(ko);
    ko->max_renewals = 1;
    CHECK(hilock_keepalive_ex(l, lost, NULL, ko) == HILOCK_OK, "keepalive: %s", hilock_client_errmsg(c));
    free(ko);
    for (int i = 0; i < 100 && !strstr(hilock_keepalive_errmsg(l), "stopped after 1 renewals"); i++)
        usleep(50 * 1000);
    CHECK(strstr(hilock_keepalive_errmsg(l), "stopped after 1 renewals") != NULL, "'%s'",
          hilock_keepalive_errmsg(l));
    hilock_release(l);
    hilock_free(l);
    hilock_client_free(c);
    printf("keepalive max_renewals in effect\n");

    redisFree(rc);
    printf(failures ? "%d FAILED\n" : "ok\n", failures);
    return failures ? 1 : 0;
}
