/* SPDX-License-Identifier: BSD-3-Clause */
/* test_semcore.c -- a smoke suite of the sorted-set kinds (src/kinds/permits.c, permits.lua):
 * hilock_sem_acquire and hilock_rw_acquire on one direct master -- grants up to the limit,
 * BUSY with its message, release, an expired holder's permit, shared/exclusive and the plain
 * lock excluding each other, growing fences, a key of another kind refused with nothing
 * written, an unknown write undone by member, old servers refused. State is read back with a
 * separate connection. (tests/test_sem.c and tests/test_rw.c hold the full suites.) */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "clients.h"
#include "fixture.h"
#include "hilock.h"
#include "engine.h"   /* hl_undo_add: a write whose reply was lost */

HLT_SUITE_WITH_SERVER(semcore, srv, .timeout = 30);

static long long zcard(const char *key)
{
    redisReply *r = hlt_cmd(srv, "ZCARD %s", key);
    long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return n;
}

static int member(const char *key, const char *m)
{
    redisReply *r = hlt_cmd(srv, "ZSCORE %s %s", key, m);
    int yes = r && r->type == REDIS_REPLY_STRING;
    freeReplyObject(r);
    return yes;
}

Test(semcore, a_semaphore_grants_up_to_its_limit_then_says_busy_and_a_release_frees_a_permit)
{
    hilock_client *c[4];
    hilock *l[4] = {0};
    HLT_NEEDS(30200, "semaphores need Redis >= 3.2");
    hilock_options o = hlt_options((const char *[]){ srv->url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    o.failover_guard = 0;
    for (int i = 0; i < 4; i++) c[i] = hlt_client_new(&o);
    for (int i = 0; i < 3; i++) cr_assert_eq(hilock_sem_acquire(c[i], "job", 3, 10000, 0, &l[i]), HILOCK_OK,
                                             "%s", hilock_client_errmsg(c[i]));
    cr_assert_eq(zcard("job"), 4);   /* three holders and the marker */
    cr_assert(member("job", hilock_token(l[1])));
    cr_assert(member("job", "hilock:sem"));
    cr_assert(hilock_fence(l[0]) < hilock_fence(l[1]) && hilock_fence(l[1]) < hilock_fence(l[2]));
    cr_assert_eq(hilock_sem_acquire(c[3], "job", 3, 10000, 0, &l[3]), HILOCK_BUSY);
    cr_assert_not_null(strstr(hilock_client_errmsg(c[3]), "job: 3 of 3 permits held (limit 3), the first expires in "),
                       "%s", hilock_client_errmsg(c[3]));
    cr_assert_eq(hilock_check(l[2]), HILOCK_OK);
    cr_assert_eq(hilock_extend(l[2], 20000), HILOCK_OK);
    cr_assert_gt(hilock_validity_ms(l[2]), 15000);
    cr_assert_eq(hilock_release(l[1]), HILOCK_OK);
    cr_assert_not(member("job", hilock_token(l[1])));
    cr_assert_eq(hilock_release(l[1]), HILOCK_NOT_HELD);
    cr_assert_eq(hilock_sem_acquire(c[3], "job", 3, 10000, 0, &l[3]), HILOCK_OK, "%s", hilock_client_errmsg(c[3]));
    cr_assert(hilock_fence(l[3]) > hilock_fence(l[2]));
    for (int i = 0; i < 4; i++) {
        if (i != 1) cr_assert_eq(hilock_release(l[i]), HILOCK_OK);
        hilock_free(l[i]);
        hilock_client_free(c[i]);
    }
    cr_assert_eq(hlt_exists(srv, "job"), 0);   /* the last holder took the key with it */
    cr_assert_eq(hlt_exists(srv, "{job}:holders"), 0);
}

Test(semcore, a_dead_holders_permit_returns_after_its_ttl)
{
    hilock_options o = hlt_options((const char *[]){ srv->url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    o.failover_guard = 0;
    hilock_client *a = hlt_client_new(&o), *b = hlt_client_new(&o);
    hilock *la, *lb;
    long long t0;
    HLT_NEEDS(30200, "semaphores need Redis >= 3.2");
    cr_assert_eq(hilock_sem_acquire(a, "dead", 1, 300, 0, &la), HILOCK_OK);
    hilock_free(la);   /* dies holding it: never released */
    t0 = hlt_now_ms();
    cr_assert_eq(hilock_sem_acquire(b, "dead", 1, 5000, 5000, &lb), HILOCK_OK, "%s", hilock_client_errmsg(b));
    cr_assert_lt(hlt_now_ms() - t0, 4000);
    cr_assert_eq(zcard("dead"), 2);
    cr_assert_eq(hilock_release(lb), HILOCK_OK);
    hilock_free(lb);
    hilock_client_free(a);
    hilock_client_free(b);
}

Test(semcore, exclusive_shared_and_the_plain_lock_exclude_each_other)
{
    hilock_options o = hlt_options((const char *[]){ srv->url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    o.failover_guard = 0;
    hilock_client *a = hlt_client_new(&o), *b = hlt_client_new(&o), *p = hlt_client_new(&o);
    hilock *s1, *s2, *x = NULL, *pl = NULL;
    HLT_NEEDS(30200, "shared/exclusive locks need Redis >= 3.2");
    cr_assert_eq(hilock_rw_acquire(a, "doc", HILOCK_SHARED, 10000, 0, &s1), HILOCK_OK, "%s", hilock_client_errmsg(a));
    cr_assert_eq(hilock_rw_acquire(b, "doc", HILOCK_SHARED, 10000, 0, &s2), HILOCK_OK, "%s", hilock_client_errmsg(b));
    cr_assert_eq(strncmp(hilock_token(s1), "s:", 2), 0);
    cr_assert_eq(strlen(hilock_token(s1)), 32);
    cr_assert(member("doc", hilock_token(s2)));
    cr_assert_eq(hilock_acquire(p, "doc", 10000, 0, &pl), HILOCK_BUSY, "%s", hilock_client_errmsg(p));
    cr_assert_not_null(strstr(hilock_client_errmsg(p), "doc: held shared by 2 readers, who renew their grants"), "%s",
                       hilock_client_errmsg(p));
    cr_assert_eq(hilock_rw_acquire(p, "doc", HILOCK_EXCLUSIVE, 10000, 0, &x), HILOCK_BUSY);
    cr_assert_not_null(strstr(hilock_client_errmsg(p), "doc: held shared by 2, the first expires in "),
                       "%s", hilock_client_errmsg(p));
    cr_assert_eq(hilock_release(s1), HILOCK_OK);
    cr_assert_eq(hilock_release(s2), HILOCK_OK);
    cr_assert_eq(hlt_exists(srv, "doc"), 0);
    cr_assert_eq(hilock_rw_acquire(p, "doc", HILOCK_EXCLUSIVE, 10000, 0, &x), HILOCK_OK, "%s", hilock_client_errmsg(p));
    cr_assert_eq(strncmp(hilock_token(x), "x:", 2), 0);
    cr_assert(hilock_fence(x) > hilock_fence(s2));
    hilock_free(s1);
    cr_assert_eq(hilock_rw_acquire(a, "doc", HILOCK_SHARED, 10000, 0, &s1), HILOCK_BUSY);
    cr_assert_not_null(strstr(hilock_client_errmsg(a), "doc: held exclusive, expires in "), "%s", hilock_client_errmsg(a));
    cr_assert_eq(hilock_release(x), HILOCK_OK);
    hilock_free(x);
    /* a plain lock holds the key: an exclusive holder to both modes */
    cr_assert_eq(hilock_acquire(p, "doc", 10000, 0, &pl), HILOCK_OK, "%s", hilock_client_errmsg(p));
    cr_assert_eq(hilock_rw_acquire(a, "doc", HILOCK_SHARED, 10000, 0, &s1), HILOCK_BUSY);
    cr_assert_not_null(strstr(hilock_client_errmsg(a), "doc: held by another owner, expires in "), "%s",
                       hilock_client_errmsg(a));
    cr_assert_eq(hilock_release(pl), HILOCK_OK);
    hilock_free(pl);
    hilock_free(s2);
    hilock_client_free(a);
    hilock_client_free(b);
    hilock_client_free(p);
}

/* A plain lock whose key expired and was then taken shared (make torture, rw: its extend and
 * release said EREPLY "holds a shared/exclusive lock" where the lock was simply lost). */
Test(semcore, a_plain_lock_whose_expired_key_readers_took_is_not_held_not_an_error)
{
    hilock_options o = hlt_options((const char *[]){ srv->url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    o.failover_guard = 0;
    hilock_client *p = hlt_client_new(&o), *a = hlt_client_new(&o);
    hilock *pl = NULL, *s = NULL;
    HLT_NEEDS(30200, "shared/exclusive locks need Redis >= 3.2");
    cr_assert_eq(hilock_acquire(p, "doc", 10000, 0, &pl), HILOCK_OK, "%s", hilock_client_errmsg(p));
    freeReplyObject(hlt_cmd(srv, "DEL doc"));   /* as if it had expired */
    cr_assert_eq(hilock_rw_acquire(a, "doc", HILOCK_SHARED, 10000, 0, &s), HILOCK_OK, "%s", hilock_client_errmsg(a));
    cr_assert_eq(hilock_check(pl), HILOCK_NOT_HELD, "%s", hilock_client_errmsg(p));
    cr_assert_eq(hilock_extend(pl, 10000), HILOCK_NOT_HELD, "%s", hilock_client_errmsg(p));
    cr_assert_str_eq(hilock_client_errmsg(p), "extend doc: now held by another owner");
    cr_assert_eq(hilock_release(pl), HILOCK_NOT_HELD, "%s", hilock_client_errmsg(p));
    cr_assert_str_eq(hilock_client_errmsg(p), "release doc: now held by another owner");
    cr_assert(member("doc", hilock_token(s)));   /* the readers' grant is untouched */
    cr_assert_eq(hilock_release(s), HILOCK_OK);
    hilock_free(pl);
    hilock_free(s);
    /* a key of a foreign type is still an error, worded */
    cr_assert_eq(hilock_acquire(p, "doc", 10000, 0, &pl), HILOCK_OK, "%s", hilock_client_errmsg(p));
    freeReplyObject(hlt_cmd(srv, "DEL doc"));
    freeReplyObject(hlt_cmd(srv, "HSET doc f v"));
    cr_assert_eq(hilock_release(pl), HILOCK_EREPLY);
    cr_assert_not_null(strstr(hilock_client_errmsg(p), "WRONGTYPE: doc holds a hash, not a lock"), "%s",
                       hilock_client_errmsg(p));
    hilock_free(pl);
    hilock_client_free(p);
    hilock_client_free(a);
}

Test(semcore, a_waiting_writer_stops_new_readers_and_is_woken_by_the_last_release)
{
    hilock_options o = hlt_options((const char *[]){ srv->url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    o.failover_guard = 0;
    hilock_client *a = hlt_client_new(&o), *w = hlt_client_new(&o), *r = hlt_client_new(&o);
    hilock *s, *x, *s2;
    long long t0;
    HLT_NEEDS(30200, "shared/exclusive locks need Redis >= 3.2");
    cr_assert_eq(hilock_rw_acquire(a, "wq", HILOCK_SHARED, 10000, 0, &s), HILOCK_OK);
    /* the writer waits a moment (it registers), then gives up: its registration goes */
    cr_assert_eq(hilock_rw_acquire(w, "wq", HILOCK_EXCLUSIVE, 10000, 200, &x), HILOCK_BUSY);
    cr_assert_eq(zcard("{wq}:wq"), 0);
    /* registered by hand as a live waiting writer: a new reader is refused */
    freeReplyObject(hlt_cmd(srv, "ZADD {wq}:wq 99999999999999 x:0123456789abcdef0123456789abcd"));
    cr_assert_eq(hilock_rw_acquire(r, "wq", HILOCK_SHARED, 10000, 0, &s2), HILOCK_BUSY);
    cr_assert_str_eq(hilock_client_errmsg(r), "wq: held shared by 1 (a writer waits)");
    freeReplyObject(hlt_cmd(srv, "DEL {wq}:wq"));
    t0 = hlt_now_ms();
    cr_assert_eq(hilock_release(s), HILOCK_OK);
    cr_assert_eq(hilock_rw_acquire(w, "wq", HILOCK_EXCLUSIVE, 10000, 5000, &x), HILOCK_OK);
    cr_assert_lt(hlt_now_ms() - t0, 4000);
    cr_assert_eq(hilock_release(x), HILOCK_OK);
    hilock_free(s);
    hilock_free(x);
    hilock_client_free(a);
    hilock_client_free(w);
    hilock_client_free(r);
}

Test(semcore, a_key_of_another_kind_is_refused_naming_it_with_nothing_written)
{
    hilock_options o = hlt_options((const char *[]){ srv->url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    o.failover_guard = 0;
    hilock_client *c = hlt_client_new(&o);
    hilock *l = NULL, *p = NULL;
    HLT_NEEDS(30200, "semaphores need Redis >= 3.2");
    cr_assert_eq(hilock_sem_acquire(c, "k", 2, 10000, 0, &l), HILOCK_OK);
    cr_assert_eq(hilock_rw_acquire(c, "k2", HILOCK_SHARED, 10000, 0, &p), HILOCK_OK);
    {
        hilock_client *d = hlt_client_new(&o);
        hilock *x = NULL;
        long long before = hlt_dbsize(srv);
        cr_assert_eq(hilock_rw_acquire(d, "k", HILOCK_SHARED, 10000, 0, &x), HILOCK_EREPLY);
        cr_assert_not_null(strstr(hilock_client_errmsg(d), "k holds a semaphore, not a shared/exclusive lock"),
                           "%s", hilock_client_errmsg(d));
        cr_assert_eq(hilock_acquire(d, "k", 10000, 0, &x), HILOCK_EREPLY);
        cr_assert_not_null(strstr(hilock_client_errmsg(d), "k holds a semaphore, not a lock"), "%s",
                           hilock_client_errmsg(d));
        cr_assert_eq(hilock_sem_acquire(d, "k2", 2, 10000, 0, &x), HILOCK_EREPLY);
        cr_assert_not_null(strstr(hilock_client_errmsg(d), "k2 holds a shared/exclusive lock, not a semaphore"),
                           "%s", hilock_client_errmsg(d));
        freeReplyObject(hlt_cmd(srv, "SET plain v"));
        freeReplyObject(hlt_cmd(srv, "HSET h f v"));
        cr_assert_eq(hilock_sem_acquire(d, "plain", 2, 10000, 0, &x), HILOCK_EREPLY);
        cr_assert_not_null(strstr(hilock_client_errmsg(d), "plain holds a lock, not a semaphore"), "%s",
                           hilock_client_errmsg(d));
        cr_assert_eq(hilock_rw_acquire(d, "h", HILOCK_EXCLUSIVE, 10000, 0, &x), HILOCK_EREPLY);
        cr_assert_not_null(strstr(hilock_client_errmsg(d), "h holds a hash, not a shared/exclusive lock"), "%s",
                           hilock_client_errmsg(d));
        cr_assert_eq(hlt_dbsize(srv), before + 2);   /* (the two keys set above) */
        cr_assert_eq(zcard("k"), 2);
        hilock_client_free(d);
    }
    {
        hilock *again = NULL;
        cr_assert_eq(hilock_sem_acquire(c, "k", 2, 10000, 0, &again), HILOCK_EINVAL);   /* not re-entrant */
        cr_assert_not_null(strstr(hilock_client_errmsg(c), "already holds k"));
    }
    hilock_free(l);
    hilock_free(p);
    hilock_client_free(c);
}

Test(semcore, bad_arguments_are_refused_with_the_reason)
{
    hilock_options o = hlt_options((const char *[]){ srv->url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    o.failover_guard = 0;
    hilock_client *c = hlt_client_new(&o);
    hilock *l = NULL;
    cr_assert_eq(hilock_sem_acquire(c, "a", 0, 10000, 0, &l), HILOCK_EINVAL);
    cr_assert_str_eq(hilock_client_errmsg(c), "limit must be 1..1000 (got 0)");
    cr_assert_eq(hilock_sem_acquire(c, "a", HILOCK_SEM_LIMIT_MAX + 1, 10000, 0, &l), HILOCK_EINVAL);
    cr_assert_eq(hilock_rw_acquire(c, "a", (hilock_rw_mode)2, 10000, 0, &l), HILOCK_EINVAL);
    cr_assert_str_eq(hilock_client_errmsg(c), "mode must be HILOCK_EXCLUSIVE or HILOCK_SHARED (got 2)");
    cr_assert_null(l);
    cr_assert_eq(hlt_dbsize(srv), 0);
    hilock_client_free(c);
}

Test(semcore, an_unknown_write_is_undone_by_member)
{
    hilock_options o = hlt_options((const char *[]){ srv->url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    o.failover_guard = 0;
    hilock_client *c = hlt_client_new(&o);
    hilock *l, *m;
    HLT_NEEDS(30200, "semaphores need Redis >= 3.2");
    /* a permit whose reply was lost is undone on the next contact (engine.c, undo.lua): its
     * member goes, and the key with it once only the marker is left; a plain value still goes */
    cr_assert_eq(hilock_sem_acquire(c, "u", 2, 10000, 0, &l), HILOCK_OK);
    cr_assert_eq(zcard("u"), 2);
    hl_undo_add(c, 0, "u", hilock_token(l), 10000);
    freeReplyObject(hlt_cmd(srv, "SET p v"));
    hl_undo_add(c, 0, "p", "v", 10000);
    cr_assert_eq(hilock_sem_acquire(c, "w", 2, 10000, 0, &m), HILOCK_OK);   /* the next contact */
    cr_assert_eq(hlt_exists(srv, "u"), 0);
    cr_assert_eq(hlt_exists(srv, "p"), 0);
    cr_assert_eq(hilock_release(l), HILOCK_NOT_HELD);
    cr_assert_eq(hilock_release(m), HILOCK_OK);
    hilock_free(l);
    hilock_free(m);
    hilock_client_free(c);
}

Test(semcore, old_servers_are_refused_naming_the_version)
{
    hilock_options o = hlt_options((const char *[]){ srv->url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    o.failover_guard = 0;
    hilock_client *c = hlt_client_new(&o);
    hilock *l = NULL;
    if (hlt_server_version() >= 30200) cr_skip_test("n/a on %s: it has what 3.2 brought", hlt_server_name());
    cr_assert_eq(hilock_sem_acquire(c, "old", 2, 10000, 0, &l), HILOCK_EINVAL);
    cr_assert_not_null(strstr(hilock_client_errmsg(c), "semaphores and shared/exclusive locks need Redis >= 3.2"),
                       "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_rw_acquire(c, "old", HILOCK_SHARED, 10000, 0, &l), HILOCK_EINVAL);
    cr_assert_eq(hlt_dbsize(srv), 0);
    hilock_client_free(c);
}

/* The failover guard (failover.lua): a grant made while the guard runs is undone by member. */
Test(semcore, a_permit_granted_while_the_failover_guard_runs_is_undone_by_member)
{
    hilock_client *c;
    hilock *l = NULL;
    redisReply *t;
    long long now;
    char *id = NULL, *info;
    HLT_NEEDS(40000, "failover_guard needs replication ids (PSYNC2, Redis 4.0+)");
    hilock_options o = hlt_options((const char *[]){ srv->url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    o.failover_guard = 1;
    c = hlt_client_new(&o);
    /* a record of this history whose guard runs another minute */
    t = hlt_cmd(srv, "INFO replication");
    info = strstr(t->str, "master_replid:");
    cr_assert_not_null(info);
    id = strndup(info + 14, 40);
    freeReplyObject(t);
    t = hlt_cmd(srv, "TIME");
    now = atoll(t->element[0]->str) * 1000 + atoll(t->element[1]->str) / 1000;
    freeReplyObject(t);
    freeReplyObject(hlt_cmd(srv, "HMSET hilock:guard replid %s maxttl 0 until %lld since %lld", id, now + 60000, now));
    cr_assert_eq(hilock_sem_acquire(c, "g", 2, 10000, 0, &l), HILOCK_BUSY, "%s", hilock_client_errmsg(c));
    cr_assert_null(l);
    cr_assert_eq(hlt_exists(srv, "g"), 0, "the permit granted under the guard must be removed");
    freeReplyObject(hlt_cmd(srv, "HSET hilock:guard until 0"));
    cr_assert_eq(hilock_rw_acquire(c, "g", HILOCK_EXCLUSIVE, 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert(member("g", hilock_token(l)));
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    free(id);
}
