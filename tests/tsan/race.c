/* SPDX-License-Identifier: BSD-3-Clause */
/* race.c -- the keepalive and handoff races, and the thread rule's check, as a plain program
 * for ThreadSanitizer.
 * (Criterion cannot run under TSan: its inheritable arena fails to map, Snaipe/Criterion#274.)
 * Build and run: make test-tsan. Exits non-zero on a failed check; TSan reports data races
 * itself (run with TSAN_OPTIONS=halt_on_error=1). Bounded: a few seconds. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "hilock.h"

static int failures;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "race.c:%d: %s: ", __LINE__, #cond);                \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
            failures++;                                                         \
        }                                                                       \
    } while (0)

static hilock_client *client(const char *url)
{
    hilock_options o;
    hilock_client *c = NULL;
    hilock_options_init(&o);
    o.servers = &url;
    o.nservers = 1;
    o.retry_delay_ms = 20;
    if (hilock_client_new(&o, &c) != HILOCK_OK) {
        fprintf(stderr, "client: %s\n", hilock_last_config_error());
        exit(2);
    }
    return c;
}

static void del(hlt_redis *r, const char *key)
{
    redisReply *rep = hlt_cmd(r, "DEL %s", key);
    if (rep) freeReplyObject(rep);
}

/* on_lost reads what the header allows from the keepalive thread */
typedef struct lost { pthread_mutex_t mu; int calls; } lost;

static void on_lost(hilock *l, hilock_status why, void *arg)
{
    lost *x = arg;
    int64_t v = hilock_validity_ms(l);
    const char *m = hilock_keepalive_errmsg(l);
    (void)why;
    pthread_mutex_lock(&x->mu);
    x->calls += 1 + (v < 0) + (m == NULL);
    pthread_mutex_unlock(&x->mu);
}

/* 1. release or free at any moment against renewals every ~20 ms */
static void release_vs_renewals(hlt_redis *r, hilock_client *c, unsigned *seed)
{
    for (int i = 0; i < 200; i++) {
        hilock *l;
        if (hilock_acquire(c, "ka", 60, 0, &l) != HILOCK_OK) {
            CHECK(0, "acquire: %s", hilock_client_errmsg(c));
            continue;
        }
        CHECK(hilock_keepalive(l, NULL, NULL) == HILOCK_OK, "%s", hilock_client_errmsg(c));
        hlt_sleep_ms((long)(rand_r(seed) % 40));
        (void)hilock_validity_ms(l);
        if (i % 2) {
            hilock_status st = hilock_release(l);
            CHECK(st == HILOCK_OK || st == HILOCK_NOT_HELD, "release: %s", hilock_strerror(st));
        }
        hilock_free(l);
        del(r, "ka");
    }
}

/* 2. the owner extends, checks and reads validity while renewals run */
static void owner_vs_renewals(hilock_client *c, unsigned *seed)
{
    for (int i = 0; i < 30; i++) {
        hilock *l;
        if (hilock_acquire(c, "ka2", 90, 0, &l) != HILOCK_OK) {
            CHECK(0, "acquire: %s", hilock_client_errmsg(c));
            continue;
        }
        CHECK(hilock_keepalive(l, NULL, NULL) == HILOCK_OK, "%s", hilock_client_errmsg(c));
        for (int k = 0; k < 10; k++) {
            hilock_status st = (k % 3 == 0) ? hilock_extend(l, 90) : hilock_check(l);
            CHECK(st == HILOCK_OK, "extend/check: %s: %s", hilock_strerror(st), hilock_client_errmsg(c));
            CHECK(hilock_validity_ms(l) > 0, "validity");
            hlt_sleep_ms((long)(rand_r(seed) % 15));
        }
        CHECK(hilock_release(l) == HILOCK_OK, "release: %s", hilock_client_errmsg(c));
        hilock_free(l);
    }
}

/* 3. the lost path: on_lost runs on the thread while the owner reads, then releases */
static void lost_vs_owner(hlt_redis *r, hilock_client *c)
{
    for (int i = 0; i < 20; i++) {
        lost x = { PTHREAD_MUTEX_INITIALIZER, 0 };
        hilock *l;
        if (hilock_acquire(c, "ka3", 60, 0, &l) != HILOCK_OK) {
            CHECK(0, "acquire: %s", hilock_client_errmsg(c));
            continue;
        }
        CHECK(hilock_keepalive(l, on_lost, &x) == HILOCK_OK, "%s", hilock_client_errmsg(c));
        del(r, "ka3");
        for (int k = 0; k < 40; k++) {
            (void)hilock_validity_ms(l);
            (void)hilock_keepalive_errmsg(l);
            hlt_sleep_ms(2);
        }
        hilock_status st = hilock_release(l);
        CHECK(st == HILOCK_NOT_HELD, "release: %s", hilock_strerror(st));
        pthread_mutex_lock(&x.mu);
        CHECK(x.calls == 1, "on_lost calls: %d", x.calls);
        pthread_mutex_unlock(&x.mu);
        hilock_free(l);
    }
}

/* 4. handoff: threads with their own clients pass one lock around */
typedef struct worker { const char *url; int n, ok; } worker;

static void *work(void *arg)
{
    worker *w = arg;
    hilock_client *c = client(w->url);
    for (int i = 0; i < w->n; i++) {
        hilock *l;
        if (hilock_acquire(c, "ho", 5000, 5000, &l) != HILOCK_OK) continue;
        w->ok += hilock_release(l) == HILOCK_OK;
        hilock_free(l);
    }
    hilock_client_free(c);
    return NULL;
}

static void handoff(hlt_redis *r)
{
    worker w[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        w[i] = (worker){ r->url, 150, 0 };
        pthread_create(&th[i], NULL, work, &w[i]);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        CHECK(w[i].ok == 150, "worker %d: %d of 150", i, w[i].ok);
    }
}

/* Two threads on one client (the thread rule broken on purpose): each call goes through or
 * is refused with EINVAL and the message; the check itself must be race-free. */
typedef struct shared_arg {
    hilock_client *c;
    const char    *key;
    int            bad;
} shared_arg;

static void *shared_work(void *arg)
{
    shared_arg *a = arg;
    hilock *l = NULL;
    for (int i = 0; i < 300; i++) {
        hilock_status st = l ? hilock_release(l) : hilock_acquire(a->c, a->key, 5000, 0, &l);
        if (st == HILOCK_EINVAL && !strcmp(hilock_client_errmsg(a->c), "client used from two threads at once"))
            continue;
        if (st != HILOCK_OK && st != HILOCK_BUSY) a->bad++;
        if (l && i % 2) {   /* (a release that went through, or not: either way forget it) */
            hilock_free(l);
            l = NULL;
        }
    }
    for (int i = 0; l && i < 100000; i++)
        if (hilock_release(l) != HILOCK_EINVAL) {
            hilock_free(l);
            l = NULL;
        }
    return NULL;
}

static void shared_client(hlt_redis *r)
{
    hilock_client *c = client(r->unix_url);
    shared_arg a[2] = { { c, "shared:0", 0 }, { c, "shared:1", 0 } };
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, shared_work, &a[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CHECK(a[0].bad + a[1].bad == 0, "%d unexpected statuses", a[0].bad + a[1].bad);
    hilock_client_free(c);
}

/* hilock.h: freeing one lock on a thread while another thread uses the client (its other
 * locks, new acquires) is safe; both touch the client's list of live locks (not re-entrant). */
typedef struct freer { hilock *l[40]; int n; } freer;

static void *free_all(void *arg)
{
    freer *f = arg;
    for (int i = 0; i < f->n; i++) hilock_free(f->l[i]);
    return NULL;
}

static void free_while_acquiring(hlt_redis *r)
{
    hilock_client *c = client(r->unix_url);
    freer f = { { NULL }, 0 };
    pthread_t th;
    int ok = 0;
    for (int i = 0; i < 40; i++) {
        char key[32];
        snprintf(key, sizeof key, "fr:%d", i);
        if (hilock_acquire(c, key, 5000, 0, &f.l[f.n]) == HILOCK_OK) f.n++;
    }
    CHECK(f.n == 40, "%d of 40 acquired", f.n);
    pthread_create(&th, NULL, free_all, &f);
    for (int i = 0; i < 100; i++) {
        hilock *l;
        if (hilock_acquire(c, "fr:x", 5000, 0, &l) != HILOCK_OK) continue;
        ok += hilock_release(l) == HILOCK_OK;
        hilock_free(l);
    }
    pthread_join(th, NULL);
    CHECK(ok == 100, "%d of 100 cycles while another thread freed", ok);
    hilock_client_free(c);
}

int main(void)
{
    hlt_redis *r = hlt_redis_start(NULL);
    unsigned seed = (unsigned)hlt_now_ms();
    long long t0 = hlt_now_ms();
    hilock_client *c;
    if (!r) return 2;
    c = client(r->unix_url);
    release_vs_renewals(r, c, &seed);
    owner_vs_renewals(c, &seed);
    lost_vs_owner(r, c);
    handoff(r);
    shared_client(r);
    free_while_acquiring(r);
    hilock_client_free(c);
    hlt_redis_stop(r);
    printf("race: %s (%lld ms)\n", failures ? "FAILED" : "ok", hlt_now_ms() - t0);
    return failures ? 1 : 0;
}
