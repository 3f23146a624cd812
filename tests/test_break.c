/* SPDX-License-Identifier: BSD-3-Clause */
/* test_break.c -- hilock_break (include/hilock_inspect.h) and `hilock break`: a stuck holder
 * removed with its aux records -- a lock, a semaphore's permits (one by token, then all), a
 * shared/exclusive lock's readers, a legacy stamp, a fair lock -- its waiters woken, the fence
 * counter never touched; nothing removed for a token of no holder, without confirmation, for a
 * key that changed since it was shown, for a key that holds no lock, for bad input; a holder
 * under keepalive losing it at its next renewal, and a `hilock` holder's COMMAND stopped;
 * Redlock (each master) and Cluster (the slot's master). Every test reads the state back on a
 * separate connection. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checks.h"
#include "clients.h"
#include "cluster_fixture.h"
#include "fixture.h"
#include "holders.h"
#include "sentinel_fixture.h"
#include "hilock.h"
#include "hilock_inspect.h"

#define NEEDS_32() HLT_NEEDS(30200, "semaphores and shared/exclusive locks need Redis 3.2")

/* What the callbacks saw (at most 8 masters). */
typedef struct seen {
    int  shown, confirms, done;
    int  answer;                           /* confirm's answer */
    void (*meanwhile)(struct seen *);      /* run inside confirm: the key changes */
    void *ctx;
    char outcome[8][16], kind[8][16], err[8][200];
    hilock_break_report rep[8];
} seen;

static void on_show(size_t m, const hilock_lock_view *v, const char *e, void *arg)
{
    seen *s = arg;
    (void)m, (void)v, (void)e;
    s->shown++;
}

static int on_confirm(void *arg)
{
    seen *s = arg;
    s->confirms++;
    if (s->meanwhile) s->meanwhile(s);
    return s->answer;
}

static void on_done(size_t m, const hilock_break_report *r, const char *e, void *arg)
{
    seen *s = arg;
    s->done++;
    if (m >= 8) return;
    if (!r) {
        snprintf(s->err[m], sizeof s->err[m], "%s", e);
        return;
    }
    s->rep[m] = *r;
    snprintf(s->outcome[m], sizeof s->outcome[m], "%s", r->outcome);
    snprintf(s->kind[m], sizeof s->kind[m], "%s", r->kind ? r->kind : "");
}

static hilock_status do_break(hilock_client *c, const char *key, const char *token, seen *s)
{
    return hilock_break(c, key, token, on_show, on_confirm, on_done, s);
}

static long long counter(hlt_redis *r, const char *fence_key)
{
    char *v = hlt_get(r, fence_key);
    long long n = v ? strtoll(v, NULL, 10) : -1;
    free(v);
    return n;
}

static long long hexists(hlt_redis *r, const char *key, const char *field)
{
    redisReply *rep = hlt_cmd(r, "HEXISTS %s %s", key, field);
    long long n = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
    freeReplyObject(rep);
    return n;
}

static long long llen(hlt_redis *r, const char *key)
{
    redisReply *rep = hlt_cmd(r, "LLEN %s", key);
    long long n = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
    freeReplyObject(rep);
    return n;
}

/* ZSCORE key member: is it there? */
static int member(hlt_redis *r, const char *key, const char *m)
{
    double score;
    return hlt_zscore(r, key, m, &score);
}

/* The whole database is as it was (before: hlt_db_snapshot's). */
static void same_db(hlt_redis *r, const char *before, const char *what)
{
    char *now = hlt_db_snapshot(r, NULL);
    cr_assert_str_eq(now, before, "%s: the database changed", what);
    free(now);
}

static void must(hilock_status st, hilock_client *c)
{
    cr_assert_eq(st, HILOCK_OK, "%s", hilock_client_errmsg(c));
}

static hilock *lock_of(hilock_client *c, const char *key, int64_t ttl)
{
    hilock *l = NULL;
    must(hilock_acquire(c, key, ttl, 0, &l), c);
    return l;
}

/* a permit on a client of its own: a client holds a key once (locks are not re-entrant) */
static hilock *permit_of(hlt_redis *r, hilock_client **own, const char *key, int limit)
{
    hilock *l = NULL;
    *own = hlt_client(r->url);
    must(hilock_sem_acquire(*own, key, limit, 30000, 0, &l), *own);
    return l;
}

static void release_free(hilock *l)
{
    hilock_release(l);
    hilock_free(l);
}

/* ---- a lock ---- */

Test(breaking, a_lock_goes_with_its_holder_record_and_the_fence_counter_stays)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *a = hlt_client(r->url), *op = hlt_client(r->url);
    hilock *l = lock_of(a, "job", 30000), *n;
    seen s = { .answer = 1 };
    long long fence = counter(r, "{job}:fence");
    cr_assert_gt(fence, 0);
    cr_assert_eq(hlt_exists(r, "{job}:holder"), 1, "a grant writes its holder record");
    cr_assert_eq(do_break(op, "job", NULL, &s), HILOCK_OK, "%s", hilock_client_errmsg(op));
    cr_assert_eq(s.shown, 1);
    cr_assert_eq(s.confirms, 1);
    cr_assert_eq(s.done, 1);
    cr_assert_str_eq(s.outcome[0], "removed");
    cr_assert_str_eq(s.kind[0], "lock");
    cr_assert_eq(s.rep[0].removed, 1);
    cr_assert_eq(s.rep[0].records, 1, "the holder record went with it");
    cr_assert_eq(s.rep[0].fence, fence);
    cr_assert_eq(hlt_exists(r, "job"), 0);
    cr_assert_eq(hlt_exists(r, "{job}:holder"), 0);
    cr_assert_eq(counter(r, "{job}:fence"), fence, "the fence counter is never reset");
    cr_assert_gt(hlt_pttl(r, "{job}:fence"), 0, "nor its expiry removed");
    cr_assert_eq(hilock_check(l), HILOCK_NOT_HELD, "%s", hilock_client_errmsg(a));
    n = lock_of(op, "job", 30000);
    cr_assert_gt(hilock_fence(n), (uint64_t)fence, "the next token is larger");
    release_free(n);
    hilock_free(l);
    hilock_client_free(a);
    hilock_client_free(op);
    hlt_redis_stop(r);
}

/* ---- a semaphore: one permit by token, then all ---- */

Test(breaking, a_semaphore_loses_one_permit_by_token_then_all)
{
    hlt_redis *r;
    hilock_client *a, *op, *pc[3];
    hilock *l[3];
    seen s = { .answer = 1 }, t = { .answer = 1 };
    long long fence;
    NEEDS_32();
    r = hlt_redis_started(NULL);
    a = hlt_client(r->url);
    op = hlt_client(r->url);
    for (int i = 0; i < 3; i++) l[i] = permit_of(r, &pc[i], "pool", 3);
    fence = counter(r, "{pool}:fence");
    cr_assert_eq(hlt_zcard(r, "pool"), 4, "3 permits and the marker");
    cr_assert_eq(do_break(op, "pool", hilock_token(l[1]), &s), HILOCK_OK, "%s", hilock_client_errmsg(op));
    cr_assert_str_eq(s.outcome[0], "removed");
    cr_assert_str_eq(s.kind[0], "semaphore");
    cr_assert_eq(s.rep[0].removed, 1);
    cr_assert_eq(s.rep[0].left, 2);
    cr_assert_eq(s.rep[0].records, 1);
    cr_assert_eq(hlt_zcard(r, "pool"), 3);
    cr_assert_eq(member(r, "pool", hilock_token(l[1])), 0);
    cr_assert_eq(member(r, "pool", hilock_token(l[0])), 1);
    cr_assert_eq(hexists(r, "{pool}:holders", hilock_token(l[1])), 0);
    cr_assert_eq(hexists(r, "{pool}:holders", hilock_token(l[2])), 1);
    cr_assert_eq(hilock_check(l[1]), HILOCK_NOT_HELD);
    cr_assert_eq(hilock_check(l[0]), HILOCK_OK, "%s", hilock_client_errmsg(pc[0]));
    cr_assert_eq(counter(r, "{pool}:fence"), fence);

    cr_assert_eq(do_break(op, "pool", NULL, &t), HILOCK_OK, "%s", hilock_client_errmsg(op));
    cr_assert_str_eq(t.outcome[0], "removed");
    cr_assert_eq(t.rep[0].removed, 2);
    cr_assert_eq(t.rep[0].left, 0);
    cr_assert_eq(t.rep[0].records, 2);
    cr_assert_eq(hlt_exists(r, "pool"), 0);
    cr_assert_eq(hlt_exists(r, "{pool}:holders"), 0);
    cr_assert_eq(counter(r, "{pool}:fence"), fence, "the fence counter is never reset");
    cr_assert_eq(hilock_check(l[0]), HILOCK_NOT_HELD);
    for (int i = 0; i < 3; i++) {
        hilock_free(l[i]);
        hilock_client_free(pc[i]);
    }
    hilock_client_free(a);
    hilock_client_free(op);
    hlt_redis_stop(r);
}

/* ---- a shared/exclusive lock's readers, and the writer they held off woken ---- */

Test(breaking, readers_go_and_the_waiting_writer_is_woken, .timeout = 60)
{
    hlt_redis *r;
    hilock_client *a, *op;
    hilock *s1 = NULL, *s2 = NULL;
    seen s = { .answer = 1 };
    hlt_bg w;
    long long fence;
    NEEDS_32();
    r = hlt_redis_started(NULL);
    a = hlt_client(r->url);
    op = hlt_client(r->url);
    must(hilock_rw_acquire(a, "doc", HILOCK_SHARED, 60000, 0, &s1), a);
    must(hilock_rw_acquire(op, "doc", HILOCK_SHARED, 60000, 0, &s2), op);
    fence = counter(r, "{doc}:fence");
    memset(&w, 0, sizeof w);
    w.url = r->url;
    w.key = "doc";
    w.mode = HILOCK_EXCLUSIVE;
    w.ttl_ms = 30000;
    w.wait_ms = 40000;
    w.poll_ms = 20000;   /* a poll would come late: only the wake-up brings it in time */
    hlt_bg_start(&w);
    cr_assert_eq(hlt_await_zcard(r, "{doc}:wq", 1, 10000), 1, "the writer never registered");
    cr_assert_eq(do_break(op, "doc", NULL, &s), HILOCK_OK, "%s", hilock_client_errmsg(op));
    cr_assert_str_eq(s.kind[0], "rwlock");
    cr_assert_eq(s.rep[0].removed, 2);
    cr_assert_eq(s.rep[0].woken, 1, "the waiting writer is woken");
    cr_assert_eq(s.rep[0].fence, fence, "read as it was: untouched");
    cr_assert_eq(hlt_bg_join(&w, 15000), HILOCK_OK, "%s", w.err);
    cr_assert_eq(member(r, "doc", hilock_token(w.l)), 1, "the writer holds it now");
    cr_assert_eq(member(r, "doc", hilock_token(s1)), 0);
    cr_assert_eq(hexists(r, "{doc}:holders", hilock_token(s2)), 0);
    cr_assert_gt(counter(r, "{doc}:fence"), fence, "tokens keep growing");
    cr_assert_eq(hilock_check(s1), HILOCK_NOT_HELD);
    hlt_bg_free(&w);
    hilock_free(s1);
    hilock_free(s2);
    hilock_client_free(a);
    hilock_client_free(op);
    hlt_redis_stop(r);
}

/* ---- legacy stamps (no TTL: the stuck lock of the old recipe) ---- */

Test(breaking, a_legacy_stamp_goes_and_no_counter_appears)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *op = hlt_client(r->url);
    static const char *const stamps[] = { "1795931409", "1795931409123", "1795931409.25", "1795931409-4242-7" };
    for (size_t i = 0; i < sizeof stamps / sizeof stamps[0]; i++) {
        seen s = { .answer = 1 };
        hlt_set(r, "cron", stamps[i], 0);
        cr_assert_eq(do_break(op, "cron", NULL, &s), HILOCK_OK, "%s: %s", stamps[i], hilock_client_errmsg(op));
        cr_assert_str_eq(s.kind[0], "legacy", "%s", stamps[i]);
        cr_assert_eq(s.rep[0].removed, 1);
        cr_assert_eq(s.rep[0].fence, -1, "no counter");
        cr_assert_eq(hlt_exists(r, "cron"), 0, "%s", stamps[i]);
        cr_assert_eq(hlt_dbsize(r), 0, "nothing written: no counter, no signal");
    }
    hilock_client_free(op);
    hlt_redis_stop(r);
}

/* ---- a fair lock: its queue's head is called ---- */

typedef struct fair_waiter {
    hilock_client *c;
    hilock        *l;
    hilock_status  st;
    pthread_t      th;
} fair_waiter;

static void *fair_wait(void *arg)
{
    fair_waiter *w = arg;
    w->st = hilock_acquire(w->c, "q", 30000, 40000, &w->l);
    return NULL;
}

Test(breaking, a_fair_lock_goes_and_its_queue_head_is_called, .timeout = 60)
{
    hlt_redis *r;
    hilock_options o;
    hilock_client *h, *op;
    hilock *l;
    fair_waiter w;
    seen s = { .answer = 1 };
    long long fence;
    NEEDS_32();
    r = hlt_redis_started(NULL);
    o = hlt_options((const char *[]){ r->url }, 1);
    o.fair = 1;
    o.poll_ms = 20000;   /* a poll would come late: only the call brings it in time */
    h = hlt_client_new(&o);
    op = hlt_client(r->url);
    l = lock_of(h, "q", 60000);
    fence = counter(r, "{q}:fence");
    memset(&w, 0, sizeof w);
    w.c = hlt_client_new(&o);
    cr_assert_eq(pthread_create(&w.th, NULL, fair_wait, &w), 0);
    HLT_AWAIT(llen(r, "{q}:fq") == 1, 10000, "the waiter never queued");
    HLT_AWAIT(hlt_info_int(r, "clients", "blocked_clients:") >= 1 || hlt_server_version() < 60000, 10000,
              "the waiter never blocked");
    cr_assert_eq(do_break(op, "q", NULL, &s), HILOCK_OK, "%s", hilock_client_errmsg(op));
    cr_assert_str_eq(s.kind[0], "lock");
    cr_assert_eq(s.rep[0].woken, 1, "the queue's head is called");
    cr_assert_eq(s.rep[0].fence, fence);
    HLT_AWAIT(w.l != NULL || w.st != HILOCK_OK, 15000, "the head was not served");
    pthread_join(w.th, NULL);
    cr_assert_eq(w.st, HILOCK_OK, "%s", hilock_client_errmsg(w.c));
    cr_assert_gt(hilock_fence(w.l), (uint64_t)fence);
    cr_assert_eq(hilock_check(l), HILOCK_NOT_HELD);
    release_free(w.l);
    hilock_free(l);
    hilock_client_free(w.c);
    hilock_client_free(h);
    hilock_client_free(op);
    hlt_redis_stop(r);
}

/* ---- nothing removed ---- */

Test(breaking, a_token_of_no_holder_removes_nothing)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *a = hlt_client(r->url), *op = hlt_client(r->url);
    hilock *l = lock_of(a, "job", 30000);
    char *before = hlt_db_snapshot(r, NULL);
    seen s = { .answer = 1 };
    cr_assert_eq(do_break(op, "job", "0123456789abcdef0123456789abcdef", &s), HILOCK_NOT_HELD);
    cr_assert(strstr(hilock_client_errmsg(op), "no holder has token"), "%s", hilock_client_errmsg(op));
    cr_assert_eq(s.shown, 1);
    cr_assert_eq(s.confirms, 0, "nothing to confirm");
    cr_assert_eq(s.done, 0);
    same_db(r, before, "refused");
    { hilock_status cst = hilock_check(l); cr_assert_eq(cst, HILOCK_OK, "%s: %s", hilock_strerror(cst), hilock_client_errmsg(a)); }
    if (hlt_server_version() >= 30200) {
        hilock_client *pc;
        hilock *p = permit_of(r, &pc, "pool", 3);
        seen t = { .answer = 1 };
        free(before);
        before = hlt_db_snapshot(r, NULL);
        cr_assert_eq(do_break(op, "pool", hilock_token(l), &t), HILOCK_NOT_HELD, "%s", hilock_client_errmsg(op));
        same_db(r, before, "refused");
        release_free(p);
        hilock_client_free(pc);
    }
    cr_assert_eq(do_break(op, "nokey", NULL, &s), HILOCK_NOT_HELD);
    cr_assert(strstr(hilock_client_errmsg(op), "no such key"), "%s", hilock_client_errmsg(op));
    free(before);
    release_free(l);
    hilock_client_free(a);
    hilock_client_free(op);
    hlt_redis_stop(r);
}

Test(breaking, not_confirmed_removes_nothing)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *a = hlt_client(r->url), *op = hlt_client(r->url);
    hilock *l = lock_of(a, "job", 30000);
    char *before = hlt_db_snapshot(r, NULL);
    seen s = { .answer = 0 };
    cr_assert_eq(do_break(op, "job", NULL, &s), HILOCK_ECANCELED);
    cr_assert(strstr(hilock_client_errmsg(op), "not confirmed"), "%s", hilock_client_errmsg(op));
    cr_assert_eq(s.confirms, 1);
    cr_assert_eq(s.done, 0);
    same_db(r, before, "refused");
    { hilock_status cst = hilock_check(l); cr_assert_eq(cst, HILOCK_OK, "%s: %s", hilock_strerror(cst), hilock_client_errmsg(a)); }
    free(before);
    release_free(l);
    hilock_client_free(a);
    hilock_client_free(op);
    hlt_redis_stop(r);
}

/* What changes while the operator reads: the holder goes and another takes the key. */
typedef struct swap { hlt_redis *r; hilock_client *c; hilock *old, *now; const char *key; hilock_client *own; } swap;

static void swap_holder(seen *s)
{
    swap *w = s->ctx;
    cr_assert_eq(hilock_release(w->old), HILOCK_OK);
    w->now = lock_of(w->c, w->key, 30000);
}

static void one_more_permit(seen *s)
{
    swap *w = s->ctx;
    w->now = permit_of(w->r, &w->own, w->key, 3);
}

Test(breaking, a_key_that_changed_since_it_was_shown_is_not_touched)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *a = hlt_client(r->url), *op = hlt_client(r->url);
    swap w = { r, a, lock_of(a, "job", 30000), NULL, "job", NULL };
    seen s = { .answer = 1, .meanwhile = swap_holder, .ctx = &w };
    char *v;
    cr_assert_eq(do_break(op, "job", NULL, &s), HILOCK_BUSY, "%s", hilock_client_errmsg(op));
    cr_assert(strstr(hilock_client_errmsg(op), "changed"), "%s", hilock_client_errmsg(op));
    cr_assert_str_eq(s.outcome[0], "changed");
    v = hlt_get(r, "job");
    cr_assert_str_eq(v, hilock_token(w.now), "the new holder's value is untouched");
    free(v);
    cr_assert_eq(hlt_exists(r, "{job}:holder"), 1, "and its holder record");
    cr_assert_eq(hilock_check(w.now), HILOCK_OK);
    release_free(w.now);
    hilock_free(w.old);
    if (hlt_server_version() >= 30200) {
        hilock_client *pc;
        hilock *p = permit_of(r, &pc, "pool", 3);
        swap v2 = { r, a, p, NULL, "pool", NULL };
        seen t = { .answer = 1, .meanwhile = one_more_permit, .ctx = &v2 };
        cr_assert_eq(do_break(op, "pool", NULL, &t), HILOCK_BUSY, "%s", hilock_client_errmsg(op));
        cr_assert_eq(hlt_zcard(r, "pool"), 3, "both permits and the marker stay");
        cr_assert_eq(hilock_check(p), HILOCK_OK);
        release_free(v2.now);
        release_free(p);
        hilock_client_free(v2.own);
        hilock_client_free(pc);
    }
    hilock_client_free(a);
    hilock_client_free(op);
    hlt_redis_stop(r);
}

Test(breaking, a_key_that_holds_no_lock_is_refused_with_nothing_removed)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *a = hlt_client(r->url), *op = hlt_client(r->url);
    hilock *l = lock_of(a, "job", 30000);
    static const char *const keys[] = { "greeting", "h", "z", "big", "{job}:fence", "{job}:holder" };
    char big[400];
    char *before;
    memset(big, '1', sizeof big - 1);
    big[sizeof big - 1] = '\0';   /* digits, but longer than any stamp */
    hlt_set(r, "greeting", "hello", 0);
    hlt_set(r, "big", big, 0);
    freeReplyObject(hlt_cmd(r, "HSET h f v"));
    freeReplyObject(hlt_cmd(r, "ZADD z 1 m"));
    before = hlt_db_snapshot(r, NULL);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        seen s = { .answer = 1 };
        cr_assert_eq(do_break(op, keys[i], NULL, &s), HILOCK_EINVAL, "%s", keys[i]);
        cr_assert(strstr(hilock_client_errmsg(op), "not a lock") || strstr(hilock_client_errmsg(op), "aux key"),
                  "%s: %s", keys[i], hilock_client_errmsg(op));
        cr_assert_eq(s.confirms, 0, "%s: refused before asking", keys[i]);
        cr_assert_eq(s.done, 0);
        same_db(r, before, keys[i]);
    }
    free(before);
    release_free(l);
    hilock_client_free(a);
    hilock_client_free(op);
    hlt_redis_stop(r);
}

Test(breaking, bad_input_is_refused_and_changes_nothing)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *a = hlt_client(r->url), *op = hlt_client(r->url);
    hilock *l = lock_of(a, "job", 30000);
    char *before = hlt_db_snapshot(r, NULL), longkey[HILOCK_KEY_MAX + 2], longtok[HILOCK_VIEW_VALUE_MAX + 2];
    seen s = { .answer = 1 };
    static const struct { const char *token, *says; } toks[] = {
        { "", "token is empty" }, { "a b", "blank" }, { "ab\x01", "control" }, { "\xc3\xa9t\xc3\xa9", "non-ASCII" },
    };
    memset(longkey, 'k', sizeof longkey - 1);
    longkey[sizeof longkey - 1] = '\0';
    memset(longtok, 'a', sizeof longtok - 1);
    longtok[sizeof longtok - 1] = '\0';
    cr_assert_eq(hilock_break(NULL, "job", NULL, NULL, NULL, NULL, NULL), HILOCK_EINVAL);
    cr_assert_eq(do_break(op, NULL, NULL, &s), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(op), "key is NULL"), "%s", hilock_client_errmsg(op));
    cr_assert_eq(do_break(op, "", NULL, &s), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(op), "key is empty"), "%s", hilock_client_errmsg(op));
    cr_assert_eq(do_break(op, longkey, NULL, &s), HILOCK_EINVAL);
    cr_assert_eq(do_break(op, "job", longtok, &s), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(op), "longer than"), "%s", hilock_client_errmsg(op));
    for (size_t i = 0; i < sizeof toks / sizeof toks[0]; i++) {
        cr_assert_eq(do_break(op, "job", toks[i].token, &s), HILOCK_EINVAL, "%s", toks[i].says);
        cr_assert(strstr(hilock_client_errmsg(op), toks[i].says), "%s", hilock_client_errmsg(op));
    }
    cr_assert_eq(s.shown + s.confirms + s.done, 0, "refused before the look");
    same_db(r, before, "refused");
    /* callbacks are optional: a program may break without showing or asking */
    cr_assert_eq(hilock_break(op, "job", NULL, NULL, NULL, NULL, NULL), HILOCK_OK, "%s", hilock_client_errmsg(op));
    cr_assert_eq(hlt_exists(r, "job"), 0);
    free(before);
    hilock_free(l);
    hilock_client_free(a);
    hilock_client_free(op);
    hlt_redis_stop(r);
}

/* ---- the holder learns of it ---- */

static volatile int lost_why = -1;

static void on_lost(hilock *l, hilock_status why, void *arg)
{
    (void)l, (void)arg;
    lost_why = (int)why;
}

Test(breaking, a_holder_under_keepalive_learns_at_its_next_renewal, .timeout = 60)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *a = hlt_client(r->url), *op = hlt_client(r->url);
    hilock *l = lock_of(a, "job", 1500);
    seen s = { .answer = 1 };
    cr_assert_eq(hilock_keepalive(l, on_lost, NULL), HILOCK_OK, "%s", hilock_client_errmsg(a));
    cr_assert_eq(do_break(op, "job", NULL, &s), HILOCK_OK, "%s", hilock_client_errmsg(op));
    HLT_AWAIT(lost_why >= 0, 15000, "the keepalive never reported the loss");
    cr_assert_eq(lost_why, HILOCK_NOT_HELD, "%s", hilock_strerror((hilock_status)lost_why));
    cr_assert_eq(hlt_exists(r, "job"), 0, "a lost key is never re-created");
    hilock_release(l);
    hilock_free(l);
    hilock_client_free(a);
    hilock_client_free(op);
    hlt_redis_stop(r);
}

/* ---- Redlock: each master ---- */

Test(breaking, redlock_masters_each_lose_the_lock, .timeout = 60)
{
    hlt_redis *m[3];
    const char *urls[3];
    hilock_options o;
    hilock_client *a, *op;
    hilock *l;
    seen s = { .answer = 1 };
    long long fence[3];
    for (int i = 0; i < 3; i++) {
        m[i] = hlt_redis_started(NULL);
        urls[i] = m[i]->url;
    }
    o = hlt_options(urls, 3);
    a = hlt_client_new(&o);
    op = hlt_client_new(&o);
    l = lock_of(a, "job", 30000);
    for (int i = 0; i < 3; i++) fence[i] = counter(m[i], "{job}:fence");
    cr_assert_eq(do_break(op, "job", NULL, &s), HILOCK_OK, "%s", hilock_client_errmsg(op));
    cr_assert_eq(s.shown, 3);
    cr_assert_eq(s.confirms, 1, "one question for every master");
    cr_assert_eq(s.done, 3);
    for (int i = 0; i < 3; i++) {
        cr_assert_str_eq(s.outcome[i], "removed", "master %d", i);
        cr_assert_eq(hlt_exists(m[i], "job"), 0, "master %d", i);
        cr_assert_eq(counter(m[i], "{job}:fence"), fence[i], "master %d: counter kept", i);
    }
    cr_assert_eq(hilock_check(l), HILOCK_NOT_HELD);
    hilock_free(l);
    hilock_client_free(a);
    hilock_client_free(op);
    for (int i = 0; i < 3; i++) hlt_redis_stop(m[i]);
}

/* ---- Sentinel: the master it names ---- */

Test(breaking, behind_sentinel_the_master_loses_it, .timeout = 120)
{
    hlt_sentinel *f;
    hilock_client *a, *op;
    hilock *l;
    seen s = { .answer = 1 };
    long long fence;
    HLT_NEEDS(40000, "Sentinel URLs need failover awareness (Redis 4.0+)");
    f = hlt_sentinel_start();
    cr_assert_not_null(f, "the Sentinels did not start");
    a = hlt_client(f->url);
    op = hlt_client(f->url);
    l = lock_of(a, "job", 30000);
    fence = counter(f->data[0], "{job}:fence");
    cr_assert_eq(hlt_exists(f->data[0], "job"), 1);
    cr_assert_eq(do_break(op, "job", NULL, &s), HILOCK_OK, "%s", hilock_client_errmsg(op));
    cr_assert_str_eq(s.outcome[0], "removed");
    cr_assert_eq(hlt_exists(f->data[0], "job"), 0);
    cr_assert_eq(hlt_exists(f->data[0], "{job}:holder"), 0);
    cr_assert_eq(counter(f->data[0], "{job}:fence"), fence);
    cr_assert_eq(hilock_check(l), HILOCK_NOT_HELD);
    hilock_free(l);
    hilock_client_free(a);
    hilock_client_free(op);
    hlt_sentinel_stop(f);
}

/* ---- Cluster: the master of the key's slot ---- */

/* The key on the cluster's masters: how many hold it */
static int cluster_holders(hlt_cluster *f, const char *key)
{
    int n = 0;
    for (int i = 0; i < f->nnodes; i++) {
        redisReply *rep = hlt_cluster_cmd(f, i, "EXISTS %s", key);
        n += rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 1;
        freeReplyObject(rep);
    }
    return n;
}

Test(breaking, on_a_cluster_the_slot_master_loses_it, .timeout = 120)
{
    hlt_cluster *f;
    hilock_client *a, *op;
    hilock *l;
    seen s = { .answer = 1 };
    HLT_NEEDS(40000, "Cluster URLs need failover awareness (Redis 4.0+)");
    f = hlt_cluster_start_masters();
    cr_assert_not_null(f, "the cluster did not start");
    a = hlt_client(f->url);
    op = hlt_client(f->url);
    l = lock_of(a, "job", 30000);
    cr_assert_eq(cluster_holders(f, "job"), 1);
    cr_assert_eq(do_break(op, "job", NULL, &s), HILOCK_OK, "%s", hilock_client_errmsg(op));
    cr_assert_str_eq(s.outcome[0], "removed");
    cr_assert_eq(cluster_holders(f, "job"), 0);
    cr_assert_eq(cluster_holders(f, "{job}:holder"), 0);
    cr_assert_eq(cluster_holders(f, "{job}:fence"), 1, "the counter stays");
    cr_assert_eq(hilock_check(l), HILOCK_NOT_HELD);
    hilock_free(l);
    hilock_client_free(a);
    hilock_client_free(op);
    hlt_cluster_stop(f);
}

/* ---- the command ---- */

static char bin[PATH_MAX];

/* no terminal (setsid, stdin /dev/null), stdout and stderr to files in the server's dir */
typedef struct no_tty { hlt_redis *r; const char *out, *err; } no_tty;

static int detach(void *arg)
{
    const no_tty *t = arg;
    int in = open("/dev/null", O_RDONLY);
    int o = open(hlt_path(t->r, t->out), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = open(hlt_path(t->r, t->err), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || o < 0 || e < 0 || chdir(t->r->dir) < 0) return -1;
    setsid();
    dup2(in, 0);
    dup2(o, 1);
    dup2(e, 2);
    return 0;
}

static pid_t hilock_run(hlt_redis *r, const char *const *args, const char *out, const char *err)
{
    no_tty t = { r, out, err };
    cr_assert_eq(hlt_built_bin(bin, sizeof bin, "hilock"), 0, "%s not built", bin);
    return hlt_spawn(bin, args, detach, &t);
}

Test(breaking, the_command_stops_a_hilock_holders_command, .timeout = 60)
{
    hlt_redis *r = hlt_redis_started(NULL);
    const char *hold[] = { "-s", r->url, "-t", "3", "job", "sh", "-c", "echo $$ > pid.txt; exec sleep 60", NULL };
    const char *brk_args[] = { "-s", r->url, "break", "--force", "job", NULL };
    pid_t holder = hilock_run(r, hold, "hold.out", "hold.err"), cmd;
    long long fence;
    const char *out;
    HLT_AWAIT(atoi(hlt_slurp(r, "pid.txt")) > 0, 10000, "COMMAND never started");
    cmd = atoi(hlt_slurp(r, "pid.txt"));
    fence = counter(r, "{job}:fence");
    cr_assert_eq(hlt_reap(hilock_run(r, brk_args, "brk.out", "brk.err"), 20000), 0, "%s", hlt_slurp(r, "brk.err"));
    out = hlt_slurp(r, "brk.out");
    cr_assert(strstr(out, "removed the lock"), "%s", out);
    cr_assert(strstr(out, "never reset"), "%s", out);
    cr_assert(strstr(out, "program \"hilock\""), "the holder shown: %s", out);
    cr_assert_eq(hlt_reap(holder, 20000), 75, "the holder exits 'lost': %s", hlt_slurp(r, "hold.err"));
    cr_assert(strstr(hlt_slurp(r, "hold.err"), "lock lost"), "%s", hlt_slurp(r, "hold.err"));
    HLT_AWAIT(kill(cmd, 0) == -1 && errno == ESRCH, 10000, "COMMAND (pid %d) still runs", (int)cmd);
    cr_assert_eq(hlt_exists(r, "job"), 0);
    cr_assert_eq(counter(r, "{job}:fence"), fence);
    hlt_redis_stop(r);
}

Test(breaking, the_command_refuses_without_force_and_a_terminal)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *a = hlt_client(r->url);
    hilock *l = lock_of(a, "job", 30000);
    const char *args[] = { "-s", r->url, "break", "job", NULL };
    const char *none[] = { "-s", r->url, "break", "--force", "nokey", NULL };
    const char *user[] = { "-s", r->url, "break", "--force", "greeting", NULL };
    const char *token[] = { "-s", r->url, "break", "--force", "--token", "0123456789abcdef0123456789abcdef", "job", NULL };
    char *before;
    hlt_set(r, "greeting", "hello", 0);
    before = hlt_db_snapshot(r, NULL);
    cr_assert_eq(hlt_reap(hilock_run(r, args, "o", "e"), 20000), 77, "%s", hlt_slurp(r, "e"));
    cr_assert(strstr(hlt_slurp(r, "e"), "no terminal"), "%s", hlt_slurp(r, "e"));
    cr_assert(strstr(hlt_slurp(r, "o"), "modern lock"), "it showed the holder: %s", hlt_slurp(r, "o"));
    cr_assert_eq(hlt_reap(hilock_run(r, none, "o", "e"), 20000), 1, "%s", hlt_slurp(r, "e"));
    cr_assert_eq(hlt_reap(hilock_run(r, user, "o", "e"), 20000), 64, "%s", hlt_slurp(r, "e"));
    cr_assert(strstr(hlt_slurp(r, "e"), "not a lock"), "%s", hlt_slurp(r, "e"));
    cr_assert_eq(hlt_reap(hilock_run(r, token, "o", "e"), 20000), 1, "%s", hlt_slurp(r, "e"));
    same_db(r, before, "nothing removed");
    { hilock_status cst = hilock_check(l); cr_assert_eq(cst, HILOCK_OK, "%s: %s", hilock_strerror(cst), hilock_client_errmsg(a)); }
    free(before);
    release_free(l);
    hilock_client_free(a);
    hlt_redis_stop(r);
}

/* The question on the controlling terminal (/dev/tty: stdin is /dev/null), answered y. */
typedef struct on_tty { no_tty io; const char *pts; } on_tty;

static int with_tty(void *arg)
{
    const on_tty *t = arg;
    int fd;
    if (detach((void *)&t->io) < 0) return -1;   /* setsid: the pty opened next becomes ours */
    if ((fd = open(t->pts, O_RDWR)) < 0) return -1;
    close(fd);   /* /dev/tty stays ours */
    return 0;
}

Test(breaking, the_command_asks_on_the_terminal, .timeout = 60)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *a = hlt_client(r->url);
    hilock *l = lock_of(a, "job", 30000);
    const char *args[] = { "-s", r->url, "break", "job", NULL };
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    char seen_text[4096] = "";
    size_t n = 0;
    on_tty t;
    pid_t pid;
    cr_assert(m >= 0 && grantpt(m) == 0 && unlockpt(m) == 0 && ptsname(m));
    t.io = (no_tty){ r, "o", "e" };
    t.pts = ptsname(m);
    cr_assert_eq(hlt_built_bin(bin, sizeof bin, "hilock"), 0, "%s not built", bin);
    pid = hlt_spawn(bin, args, with_tty, &t);
    for (long long end = hlt_now_ms() + 20000; !strstr(seen_text, "[y/N]") && hlt_now_ms() < end;) {
        struct pollfd p = { m, POLLIN, 0 };
        ssize_t got;
        if (poll(&p, 1, 100) == 1 && (got = read(m, seen_text + n, sizeof seen_text - 1 - n)) > 0) {
            n += (size_t)got;
            seen_text[n] = '\0';
        }
    }
    cr_assert(strstr(seen_text, "[y/N]"), "no question on the terminal: '%s' (stderr %s)", seen_text, hlt_slurp(r, "e"));
    cr_assert_eq(hlt_exists(r, "job"), 1, "nothing removed before the answer");
    cr_assert_eq(write(m, "y\n", 2), 2);
    cr_assert_eq(hlt_reap(pid, 20000), 0, "%s", hlt_slurp(r, "e"));
    cr_assert(strstr(hlt_slurp(r, "o"), "removed the lock"), "%s", hlt_slurp(r, "o"));
    cr_assert_eq(hlt_exists(r, "job"), 0);
    close(m);
    hilock_free(l);
    hilock_client_free(a);
    hlt_redis_stop(r);
}
