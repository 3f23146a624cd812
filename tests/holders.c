/* SPDX-License-Identifier: BSD-3-Clause */
/* holders.c -- see holders.h */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clients.h"
#include "holders.h"

long long hlt_zcard(hlt_redis *r, const char *key)
{
    redisReply *rep = hlt_cmd(r, "ZCARD %s", key);
    long long n = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -99;
    if (rep) freeReplyObject(rep);
    return n;
}

int hlt_zscore(hlt_redis *r, const char *key, const char *member, double *score)
{
    redisReply *rep = hlt_cmd(r, "ZSCORE %s %s", key, member);
    int there = rep && rep->type == REDIS_REPLY_STRING;
    if (there) *score = strstr(rep->str, "inf") ? 1e300 : strtod(rep->str, NULL);
    if (rep) freeReplyObject(rep);
    return there;
}

long long hlt_server_ms(hlt_redis *r)
{
    redisReply *rep = hlt_cmd(r, "TIME");
    long long ms;
    cr_assert(rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2, "TIME");
    ms = atoll(rep->element[0]->str) * 1000 + atoll(rep->element[1]->str) / 1000;
    freeReplyObject(rep);
    return ms;
}

long long hlt_await_zcard(hlt_redis *r, const char *key, long long n, long limit_ms)
{
    long long end = hlt_now_ms() + limit_ms, got;
    while ((got = hlt_zcard(r, key)) != n && hlt_now_ms() < end) hlt_sleep_ms(5);
    return got;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One line per key: name, type, DUMP in hex. */
static void append_key(hlt_redis *r, const char *key, char **out, size_t *len)
{
    redisReply *t = hlt_cmd(r, "TYPE %s", key), *d = hlt_cmd(r, "DUMP %s", key);
    size_t n = d && d->type == REDIS_REPLY_STRING ? d->len : 0, need = strlen(key) + 32 + 2 * n;
    char *p;
    cr_assert_not_null(*out = realloc(*out, *len + need));
    p = *out + *len;
    p += sprintf(p, "%s %s ", key, t && t->type == REDIS_REPLY_STATUS ? t->str : "?");
    for (size_t i = 0; i < n; i++) p += sprintf(p, "%02x", (unsigned char)d->str[i]);
    *p++ = '\n';
    *p = '\0';
    *len = (size_t)(p - *out);
    if (t) freeReplyObject(t);
    if (d) freeReplyObject(d);
}

char *hlt_db_snapshot(hlt_redis *r, const char *key)
{
    redisReply *keys = hlt_cmd(r, "KEYS %s", key ? key : "*");
    char **names, *out = NULL;
    size_t len = 0;
    cr_assert(keys && keys->type == REDIS_REPLY_ARRAY, "KEYS");
    cr_assert_not_null(names = calloc(keys->elements + 1, sizeof *names));
    for (size_t i = 0; i < keys->elements; i++) names[i] = keys->element[i]->str;
    qsort(names, keys->elements, sizeof *names, by_name);
    cr_assert_not_null(out = strdup(""));
    for (size_t i = 0; i < keys->elements; i++) append_key(r, names[i], &out, &len);
    free(names);
    freeReplyObject(keys);
    return out;
}

hilock_status hlt_ask(hilock_client *c, const hlt_bg *q, hilock **out)
{
    if (q->plain) return hilock_acquire(c, q->key, q->ttl_ms, q->wait_ms, out);
    if (q->limit > 0) return hilock_sem_acquire(c, q->key, q->limit, q->ttl_ms, q->wait_ms, out);
    return hilock_rw_acquire(c, q->key, q->mode, q->ttl_ms, q->wait_ms, out);
}

void hlt_assert_unchanged_by(hlt_redis *r, hilock_client *c, const hlt_bg *q, hilock_status want,
                             const char *says, int whole)
{
    hilock *l = (hilock *)&l;
    char *before = hlt_db_snapshot(r, whole ? NULL : q->key), *after;
    long long pttl = hlt_pttl(r, q->key);
    hilock_status st = hlt_ask(c, q, &l);
    cr_log_info("%s (limit %d, mode %d, plain %d): %s", q->key, q->limit, (int)q->mode, q->plain,
                hilock_client_errmsg(c));
    cr_assert_eq(st, want, "%s: %s, not %s (%s)", q->key, hilock_strerror(st), hilock_strerror(want),
                 hilock_client_errmsg(c));
    cr_assert_null(l, "*out must be NULL when not acquired");
    cr_assert(strstr(hilock_client_errmsg(c), says), "errmsg '%s' does not say '%s'", hilock_client_errmsg(c), says);
    after = hlt_db_snapshot(r, whole ? NULL : q->key);
    cr_assert_str_eq(after, before, "%s changed the database", hilock_strerror(st));
    cr_assert_leq(hlt_pttl(r, q->key), pttl, "the key's ttl was renewed");
    free(before);
    free(after);
}

void hlt_assert_expiry(hlt_redis *r, const hilock *l, int64_t ttl)
{
    double score;
    long long now = hlt_server_ms(r);
    cr_assert(hlt_zscore(r, hilock_key(l), hilock_token(l), &score), "no member %s", hilock_token(l));
    cr_assert(score > now + ttl - 2000 && score <= now + ttl + 50, "score %.0f, server clock %lld, ttl %lld",
              score, now, (long long)ttl);
}

static void *bg_run(void *arg)
{
    hlt_bg *bg = arg;
    bg->st = hlt_ask(bg->c, bg, &bg->l);
    snprintf(bg->err, sizeof bg->err, "%s", hilock_client_errmsg(bg->c));
    bg->t_done = hlt_now_ms();
    __atomic_store_n(&bg->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

void hlt_bg_start(hlt_bg *bg)
{
    hilock_options o = hlt_options(bg->nurls ? bg->urls : &bg->url, bg->nurls ? bg->nurls : 1);
    o.retry_delay_ms = bg->retry_delay_ms ? bg->retry_delay_ms : 50;
    /* (a test that sets the retry delay meant how often a waiter looks: a blocking one too) */
    if (bg->poll_ms || bg->retry_delay_ms) o.poll_ms = bg->poll_ms ? bg->poll_ms : bg->retry_delay_ms;
    o.wake = !bg->no_wake;
    o.fair = bg->fair;
    bg->c = hlt_client_new(&o);
    bg->l = NULL;
    bg->done = 0;
    bg->st = HILOCK_EINVAL;
    bg->t_start = hlt_now_ms();
    cr_assert_eq(pthread_create(&bg->th, NULL, bg_run, bg), 0);
}

int hlt_bg_done(hlt_bg *bg) { return __atomic_load_n(&bg->done, __ATOMIC_ACQUIRE); }

hilock_status hlt_bg_join(hlt_bg *bg, long limit_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += limit_ms / 1000 + 1;
    cr_assert_eq(pthread_timedjoin_np(bg->th, NULL, &ts), 0, "waiter on %s did not return within %ld ms",
                 bg->key, limit_ms);
    return bg->st;
}

void hlt_bg_free(hlt_bg *bg)
{
    if (bg->l) hilock_release(bg->l);
    hilock_free(bg->l);
    hilock_client_free(bg->c);
    bg->l = NULL;
    bg->c = NULL;
}
