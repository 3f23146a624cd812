/* SPDX-License-Identifier: BSD-3-Clause */
/* test_input.c -- bad input gets a clear status and a message, and changes nothing in Redis
 * (no key written, and for argument errors not even a connection opened). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "clients.h"
#include "fixture.h"
#include "hilock.h"

HLT_SUITE_WITH_SERVER(input, R, .timeout = 30);

static long long connections(void)
{
    redisReply *rep = hlt_cmd(R, "INFO stats");
    const char *p;
    long long v = -1;
    cr_assert(rep && rep->type == REDIS_REPLY_STRING);
    if ((p = strstr(rep->str, "total_connections_received:"))) v = atoll(p + 27);
    freeReplyObject(rep);
    return v;
}

/* Redis holds nothing, and nobody but the read-back connection ever connected. */
static long long conns0;
static void baseline(void) { conns0 = connections(); }
static void assert_untouched(void)
{
    cr_assert_eq(hlt_dbsize(R), 0, "something was written");
    cr_assert_eq(connections(), conns0, "a connection was opened for bad input");
}

/* acquire must say EINVAL, leave *out NULL and explain itself in errmsg */
static void bad_acquire(hilock_client *c, const char *key, int64_t ttl, int64_t wait, const char *why)
{
    hilock *l = (hilock *)&l;
    hilock_status st = hilock_acquire(c, key, ttl, wait, &l);
    cr_assert_eq(st, HILOCK_EINVAL, "key=%s ttl=%lld wait=%lld: %s", key ? key : "(null)", (long long)ttl,
                 (long long)wait, hilock_strerror(st));
    cr_assert_null(l, "*out must be NULL on failure");
    cr_assert(strstr(hilock_client_errmsg(c), why), "errmsg '%s' should mention '%s'", hilock_client_errmsg(c), why);
}

Test(input, acquire_rejects_null_client_key_and_out)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    hilock_client *c = hlt_client_new(&o);
    hilock *l = (hilock *)&l;
    baseline();
    cr_assert_eq(hilock_acquire(NULL, "k", 1000, 0, &l), HILOCK_EINVAL);
    cr_assert_null(l);
    bad_acquire(c, NULL, 1000, 0, "key is NULL");
    cr_assert_eq(hilock_acquire(c, "k", 1000, 0, NULL), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(c), "out"), "errmsg: %s", hilock_client_errmsg(c));
    assert_untouched();
    hilock_client_free(c);
}

Test(input, acquire_rejects_empty_and_overlong_keys)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    hilock_client *c = hlt_client_new(&o);
    char *big = malloc(HILOCK_KEY_MAX + 2);
    hilock *l;
    memset(big, 'x', HILOCK_KEY_MAX + 1);
    big[HILOCK_KEY_MAX + 1] = '\0';
    baseline();
    bad_acquire(c, "", 1000, 0, "empty");
    bad_acquire(c, big, 1000, 0, "longer");
    assert_untouched();
    /* the longest key accepted works, and so does its aux key */
    big[HILOCK_KEY_MAX] = '\0';
    cr_assert_eq(hilock_acquire(c, big, 1000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_exists(R, big), 1);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    free(big);
    hilock_client_free(c);
}

Test(input, acquire_rejects_bad_ttls)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    hilock_client *c = hlt_client_new(&o);
    baseline();
    bad_acquire(c, "k", 0, 0, "ttl_ms");
    bad_acquire(c, "k", -1, 0, "ttl_ms");
    bad_acquire(c, "k", INT64_MIN, 0, "ttl_ms");
    bad_acquire(c, "k", HILOCK_TTL_MAX_MS + 1, 0, "HILOCK_TTL_MAX_MS");
    bad_acquire(c, "k", INT64_MAX, 0, "HILOCK_TTL_MAX_MS");
    bad_acquire(c, "k", INT64_MAX / 1000 + 1, 0, "HILOCK_TTL_MAX_MS");
    bad_acquire(c, "k", 2, 0, "drift");   /* 2 ms is all drift allowance */
    assert_untouched();
    hilock_client_free(c);
}

Test(input, acquire_accepts_the_longest_ttl)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    hilock_client *c = hlt_client_new(&o);
    hilock *l;
    cr_assert_eq(hilock_acquire(c, "k", HILOCK_TTL_MAX_MS, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_gt(hlt_pttl(R, "k"), HILOCK_TTL_MAX_MS - 60000);
    cr_assert_leq(hilock_validity_ms(l), HILOCK_TTL_MAX_MS);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
}

Test(input, acquire_rejects_wait_below_minus_one)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    hilock_client *c = hlt_client_new(&o);
    baseline();
    bad_acquire(c, "k", 1000, -2, "wait_ms");
    bad_acquire(c, "k", 1000, INT64_MIN, "wait_ms");
    assert_untouched();
    hilock_client_free(c);
}

Test(input, acquire_accepts_huge_waits)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    hilock_client *c = hlt_client_new(&o);
    hilock *l, *m = NULL;
    cr_assert_eq(hilock_acquire(c, "k", 5000, INT64_MAX, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    cr_assert_eq(hilock_acquire(c, "k", 5000, INT64_MAX / 1000 + 1, &m), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(m), HILOCK_OK);
    hilock_free(l);
    hilock_free(m);
    hilock_client_free(c);
}

Test(input, extend_rejects_bad_ttls_and_keeps_the_lock)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    hilock_client *c = hlt_client_new(&o);
    hilock *l;
    long long pttl;
    cr_assert_eq(hilock_acquire(c, "k", 30000, 0, &l), HILOCK_OK);
    pttl = hlt_pttl(R, "k");
    cr_assert_eq(hilock_extend(l, 0), HILOCK_EINVAL);
    cr_assert_eq(hilock_extend(l, -5), HILOCK_EINVAL);
    cr_assert_eq(hilock_extend(l, HILOCK_TTL_MAX_MS + 1), HILOCK_EINVAL);
    cr_assert_eq(hilock_extend(l, INT64_MAX), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(c), "ttl_ms"), "errmsg: %s", hilock_client_errmsg(c));
    cr_assert_leq(hlt_pttl(R, "k"), pttl, "the ttl moved");
    cr_assert_gt(hilock_validity_ms(l), 20000, "the validity was lost");
    cr_assert_eq(hilock_check(l), HILOCK_OK);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
}

Test(input, null_lock_is_einval_or_zero_everywhere)
{
    cr_assert_eq(hilock_release(NULL), HILOCK_EINVAL);
    cr_assert_eq(hilock_extend(NULL, 1000), HILOCK_EINVAL);
    cr_assert_eq(hilock_check(NULL), HILOCK_EINVAL);
    cr_assert_eq(hilock_validity_ms(NULL), 0);
    cr_assert_eq(hilock_fence(NULL), 0);
    cr_assert_null(hilock_token(NULL));
    cr_assert_null(hilock_key(NULL));
    cr_assert_eq(hilock_keepalive(NULL, NULL, NULL), HILOCK_EINVAL);
    hilock_free(NULL);
    hilock_client_free(NULL);
    hilock_options_init(NULL);
    cr_assert_str_eq(hilock_client_errmsg(NULL), "no client");
}

Test(input, strerror_is_never_null)
{
    const char *seen[HILOCK_ECANCELED + 1];
    for (int s = HILOCK_OK; s <= HILOCK_ECANCELED; s++) {
        const char *t = hilock_strerror((hilock_status)s);
        cr_assert_not_null(t);
        cr_assert_gt(strlen(t), 0);
        cr_assert_str_neq(t, "unknown status", "status %d has no text", s);
        for (int j = 0; j < s; j++) cr_assert_str_neq(seen[j], t, "statuses %d and %d share a text", j, s);
        seen[s] = t;
    }
    cr_assert_str_eq(hilock_strerror((hilock_status)(HILOCK_ECANCELED + 1)), "unknown status");
    cr_assert_str_eq(hilock_strerror((hilock_status)-1), "unknown status");
    cr_assert_str_eq(hilock_strerror((hilock_status)1000000), "unknown status");
}

/* ---- options ---- */

static void bad_options(const hilock_options *o, const char *why)
{
    hilock_client *c = (hilock_client *)&c;
    cr_assert_eq(hilock_client_new(o, &c), HILOCK_EINVAL, "should reject: %s", why);
    cr_assert_null(c);
    cr_assert(strstr(hilock_last_config_error(), why), "'%s' should mention '%s'", hilock_last_config_error(), why);
}

Test(input, client_new_rejects_bad_options)
{
    hilock_options o;
    const char *url = R->url;
    const char *many[33];
    const char *with_null[2] = { url, NULL };
    hilock_client *c = (hilock_client *)&c;
    baseline();
    cr_assert_eq(hilock_client_new(NULL, &c), HILOCK_EINVAL);
    cr_assert_null(c);
    hilock_options_init(&o);
    cr_assert_eq(hilock_client_new(&o, NULL), HILOCK_EINVAL);
    bad_options(&o, "no server");
    o.servers = &url;
    bad_options(&o, "no server");   /* nservers 0 */
    o.nservers = 1;
#define BAD(field, value, why) do { hilock_options b = o; b.field = value; bad_options(&b, why); } while (0)
    BAD(connect_timeout_ms, 0, "connect_timeout_ms");
    BAD(connect_timeout_ms, -1, "connect_timeout_ms");
    BAD(io_timeout_ms, 0, "io_timeout_ms");
    BAD(io_timeout_ms, INT64_MAX, "io_timeout_ms");
    BAD(retry_delay_ms, 0, "retry_delay_ms");
    BAD(drift_factor, -0.1, "drift_factor");
    BAD(drift_factor, 0.5, "drift_factor");
    BAD(drift_factor, NAN, "drift_factor");
    BAD(min_replicas, -1, "min_replicas");
    BAD(replicas_timeout_ms, 0, "replicas_timeout_ms");
    BAD(failover_guard, 2, "failover_guard");
    BAD(bridge, -1, "bridge");
    BAD(codec.unit, (hilock_unit)7, "codec.unit");
    BAD(codec.decimals, 7, "codec.decimals");
    BAD(codec.suffix, (hilock_suffix)9, "codec.suffix");
    BAD(tls_verify, 2, "tls_verify");
    BAD(tls_verify, -1, "tls_verify");
#undef BAD
    for (int i = 0; i < 33; i++) many[i] = url;
    o.servers = many;
    o.nservers = 33;
    bad_options(&o, "32");
    o.servers = with_null;
    o.nservers = 2;
    bad_options(&o, "NULL");
    assert_untouched();
    /* and the defaults are fine */
    o.servers = &url;
    o.nservers = 1;
    cr_assert_eq(hilock_client_new(&o, &c), HILOCK_OK);
    cr_assert_str_eq(hilock_last_config_error(), "");
    hilock_client_free(c);
}

/* A server listed twice is a Redlock of one server whose two members overwrite each other's
 * key (every lock reads "lost"): refused at creation, naming both entries. */
Test(input, client_new_refuses_a_server_listed_twice)
{
    hilock_options o;
    char upper[64], other[64];
    const char *same[2] = { R->url, R->url };
    const char *sock[3] = { R->url, R->unix_url, R->unix_url };
    const char *cased[2] = { NULL, upper };
    const char *two[2] = { R->url, other };
    hilock_client *c = NULL;
    baseline();
    hilock_options_init(&o);
    o.servers = same;
    o.nservers = 2;
    bad_options(&o, "server 1 and server 2 of 2 are the same server");
    o.servers = sock;
    o.nservers = 3;
    bad_options(&o, "server 2 and server 3 of 3 are the same server");
    /* the host is compared as written (no lookup), without case; the db does not matter */
    cased[0] = "redis://localhost";
    snprintf(upper, sizeof upper, "redis://LOCALHOST:6379/3");
    o.servers = cased;
    o.nservers = 2;
    bad_options(&o, "server 1 and server 2 of 2");
    assert_untouched();
    /* another port is another server */
    snprintf(other, sizeof other, "redis://127.0.0.1:%d", R->port + 1);
    o.servers = two;
    cr_assert_eq(hilock_client_new(&o, &c), HILOCK_OK, "%s", hilock_last_config_error());
    hilock_client_free(c);
}

/* One Sentinel master or one cluster under two URLs: a shared Sentinel (with the same master
 * name) or a shared seed is the same group, in any order the lists give; refused before any
 * connection. A Sentinel group may watch several masters: other names stay members. */
Test(input, client_new_refuses_a_sentinel_master_or_cluster_listed_twice)
{
    hilock_options o;
    char s1[160], s2[160], s3[160], k1[160], k2[160];
    const char *urls[3];
    hilock_client *c = NULL;
    baseline();
    hilock_options_init(&o);
    o.servers = urls;
    o.nservers = 3;
    /* the Sentinel lists name each other's addresses in another order (R's port: a connection
     * opened would show) */
    snprintf(s1, sizeof s1, "redis-sentinel://127.0.0.1:%d,127.0.0.1:1#mymaster", R->port);
    snprintf(s2, sizeof s2, "redis-sentinel://127.0.0.1:2,127.0.0.1:%d#mymaster", R->port);
    urls[0] = s1;
    urls[1] = R->url;
    urls[2] = s2;
    bad_options(&o, "server 1 and server 3 of 3 are the same server (sentinel mymaster)");
    /* clusters: one seed in common is one cluster */
    snprintf(k1, sizeof k1, "redis-cluster://127.0.0.1:3,127.0.0.1:%d", R->port);
    snprintf(k2, sizeof k2, "redis-cluster://127.0.0.1:%d,127.0.0.1:4", R->port);
    urls[0] = k1;
    urls[2] = k2;
    bad_options(&o, "server 1 and server 3 of 3 are the same server (cluster 127.0.0.1:3)");
    assert_untouched();
    /* no false positive: another master of the same Sentinels, disjoint Sentinels or seeds */
    snprintf(s3, sizeof s3, "redis-sentinel://127.0.0.1:2,127.0.0.1:%d#other", R->port);
    urls[0] = s1;
    urls[2] = s3;
    cr_assert_eq(hilock_client_new(&o, &c), HILOCK_OK, "%s", hilock_last_config_error());
    hilock_client_free(c);
    snprintf(s3, sizeof s3, "redis-sentinel://127.0.0.1:5,127.0.0.1:6#mymaster");
    cr_assert_eq(hilock_client_new(&o, &c), HILOCK_OK, "%s", hilock_last_config_error());
    hilock_client_free(c);
    snprintf(k2, sizeof k2, "redis-cluster://127.0.0.1:5,127.0.0.1:6");
    urls[0] = k1;
    urls[2] = k2;
    cr_assert_eq(hilock_client_new(&o, &c), HILOCK_OK, "%s", hilock_last_config_error());
    hilock_client_free(c);
}

Test(input, client_new_rejects_tls_files_it_cannot_use)
{
    hilock_options o;
    const char *url = R->url;
    baseline();
    hilock_options_init(&o);
    cr_assert_eq(o.tls_verify, 1);
    cr_assert_null(o.tls_ca_file);
    cr_assert_null(o.tls_server_name);
    o.servers = &url;
    o.nservers = 1;
#define BAD(field, value, why) do { hilock_options b = o; b.field = value; bad_options(&b, why); } while (0)
    BAD(tls_ca_file, "/nonexistent/ca.pem", "tls_ca_file /nonexistent/ca.pem: No such file");
    BAD(tls_ca_path, "/nonexistent/certs", "tls_ca_path /nonexistent/certs: No such file");
    BAD(tls_ca_path, "/etc/hostname", "not a directory");
    BAD(tls_cert_file, "/etc/hostname", "tls_key_file is missing");
    BAD(tls_key_file, "/etc/hostname", "tls_cert_file is missing");
#undef BAD
    assert_untouched();
}

Test(input, client_open_rejects_null_and_malformed_urls)
{
    static const char *bad[] = {
        "", "localhost", "127.0.0.1:6379", "http://127.0.0.1", "redis//127.0.0.1", "redis:/127.0.0.1",
        "redis://", "redis://:6379", "redis://127.0.0.1:", "redis://127.0.0.1:0", "redis://127.0.0.1:65536",
        "redis://127.0.0.1:99999999999", "redis://127.0.0.1:-1", "redis://127.0.0.1:63x9",
        "redis://127.0.0.1/x", "redis://127.0.0.1/-1", "redis://127.0.0.1/1/2", "redis://127.0.0.1?db=x",
        "redis://127.0.0.1/1?db=1", "redis://127.0.0.1?foo=1",
        "redis://127.0.0.1#m", "redis://user@127.0.0.1", "redis://:@127.0.0.1", "redis://u:p%4@127.0.0.1",
        "redis://u:p%zz@127.0.0.1", "redis://u:p%00x@127.0.0.1", "redis://127.0.0.1 :6379", "redis://127.0.0.1\n",
        "redis://[::1", "redis://[]:6379", "redis://[::1]x", "redis://[zz::1]", "redis://host_with/slash/1",
        "rediss://127.0.0.1:0", "unix://", "unix://relative/path", "unix:///tmp/r.sock?db=", "unix:///tmp/r.sock?db=x",
        "unix:///tmp/r.sock?foo=1", "unix:///tmp/r#x.sock", "redis-sentinel://127.0.0.1",
        "redis-sentinel://127.0.0.1#", "redis-sentinel://#m", "redis-sentinel://a,#m",
        "rediss-sentinel://127.0.0.1", "rediss-sentinel://127.0.0.1:0#m", "rediss-sentinel://a,#m",
    };
    hilock_client *c;
    baseline();
    c = (hilock_client *)&c;
    cr_assert_eq(hilock_client_open(NULL, &c), HILOCK_EINVAL);
    cr_assert_null(c);
    cr_assert_eq(hilock_client_open(R->url, NULL), HILOCK_EINVAL);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        c = (hilock_client *)&c;
        cr_assert_eq(hilock_client_open(bad[i], &c), HILOCK_EINVAL, "accepted '%s'", bad[i]);
        cr_assert_null(c);
        cr_assert_gt(strlen(hilock_last_config_error()), 0, "no reason for '%s'", bad[i]);
    }
    assert_untouched();
}

Test(input, config_errors_never_echo_the_password)
{
    hilock_client *c;
    cr_assert_eq(hilock_client_open("redis://alice:TopSecret99@127.0.0.1:99999", &c), HILOCK_EINVAL);
    cr_assert_null(strstr(hilock_last_config_error(), "TopSecret99"), "%s", hilock_last_config_error());
    cr_assert_eq(hilock_client_open("redis://alice:TopSecret99@bad host", &c), HILOCK_EINVAL);
    cr_assert_null(strstr(hilock_last_config_error(), "TopSecret99"), "%s", hilock_last_config_error());
}

/* ---- wrong type ---- */

static void assert_hash_intact(const char *key)
{
    redisReply *rep = hlt_cmd(R, "HGET %s f", key);
    cr_assert(rep && rep->type == REDIS_REPLY_STRING && !strcmp(rep->str, "v"), "the hash %s was changed", key);
    freeReplyObject(rep);
}

Test(input, a_key_holding_a_hash_is_ereply_and_untouched)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    hilock_client *c = hlt_client_new(&o);
    hilock *l = (hilock *)&l;
    char name[64];
    freeReplyObject(hlt_cmd(R, "HSET k f v"));
    cr_assert_eq(hilock_acquire(c, "k", 5000, 0, &l), HILOCK_EREPLY);
    cr_assert_null(l);
    snprintf(name, sizeof name, "127.0.0.1:%d", R->port);
    cr_assert(strstr(hilock_client_errmsg(c), name), "errmsg names the server: %s", hilock_client_errmsg(c));
    cr_assert(strstr(hilock_client_errmsg(c), "WRONGTYPE"), "errmsg: %s", hilock_client_errmsg(c));
    /* waiting does not help: a wrong type is an error, not a holder */
    cr_assert_eq(hilock_acquire(c, "k", 5000, 2000, &l), HILOCK_EREPLY);
    assert_hash_intact("k");
    cr_assert_eq(hlt_dbsize(R), 1, "nothing else (no fence counter) was written");
    hilock_client_free(c);
}

Test(input, a_lock_key_turned_into_a_hash_is_ereply_for_every_call)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    hilock_client *c = hlt_client_new(&o);
    hilock *l;
    cr_assert_eq(hilock_acquire(c, "k", 30000, 0, &l), HILOCK_OK);
    freeReplyObject(hlt_cmd(R, "DEL k"));
    freeReplyObject(hlt_cmd(R, "HSET k f v"));
    cr_assert_eq(hilock_check(l), HILOCK_EREPLY);
    cr_assert(strstr(hilock_client_errmsg(c), "WRONGTYPE"), "errmsg: %s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_extend(l, 60000), HILOCK_EREPLY);
    cr_assert_eq(hlt_pttl(R, "k"), -1, "extend touched the hash");
    cr_assert_eq(hilock_release(l), HILOCK_EREPLY);
    assert_hash_intact("k");
    hilock_free(l);
    hilock_client_free(c);
}

Test(input, a_fence_key_holding_a_hash_is_ereply_and_leaves_no_lock)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    hilock_client *c = hlt_client_new(&o);
    hilock *l = NULL;
    freeReplyObject(hlt_cmd(R, "HSET {k}:fence f v"));
    cr_assert_eq(hilock_acquire(c, "k", 30000, 0, &l), HILOCK_EREPLY);
    cr_assert_null(l);
    cr_assert_eq(hlt_exists(R, "k"), 0, "a failed acquire left the lock key behind");
    assert_hash_intact("{k}:fence");
    hilock_client_free(c);
}

/* A database the server does not have (its `databases` setting): the server refused, so
 * EREPLY (the command exits 69), saying which databases exist when CONFIG GET may be asked,
 * else that the server refused it; nothing runs in db 0 either way. */
static void db_refused(const char *extra, int db, const char *msg)
{
    char url[300];
    hlt_redis *s = hlt_redis_start(extra);
    cr_assert_not_null(s);
    hilock_options o = hlt_options((const char *[]){ s->url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    hilock_client *c, *good = hlt_client_new(&o);
    hilock *l = NULL;
    /* the script cache is warm, so a command pipelined behind a failed SELECT would write */
    cr_assert_eq(hilock_acquire(good, "warm", 5000, 0, &l), HILOCK_OK);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    l = NULL;
    snprintf(url, sizeof url, "%s/%d", s->url, db);
    cr_assert_eq(hilock_client_open(url, &c), HILOCK_OK);
    cr_assert_eq(hilock_acquire(c, "k", 5000, 0, &l), HILOCK_EREPLY, "%s", hilock_client_errmsg(c));
    cr_log_info("%s", hilock_client_errmsg(c));
    cr_assert(strstr(hilock_client_errmsg(c), msg), "errmsg: %s", hilock_client_errmsg(c));
    cr_assert_null(l);
    cr_assert_eq(hlt_exists(s, "k"), 0, "the key landed in db 0");
    cr_assert_eq(hlt_exists(s, "{k}:fence"), 0, "the fence key landed in db 0");
    hilock_client_free(c);
    hilock_client_free(good);
    hlt_redis_stop(s);
}

Test(input, a_db_the_server_does_not_have_is_ereply_naming_the_databases_it_has)
{
    db_refused("--databases 4", 4, "database 4 does not exist: the server has 4 (0 to 3; its databases setting)");
}

Test(input, a_db_the_server_does_not_have_is_ereply_saying_it_refused_when_config_cannot_tell)
{
    db_refused("--rename-command CONFIG \"\"", 99, "the server refused database 99 (ERR ");
}
