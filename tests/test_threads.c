/* SPDX-License-Identifier: BSD-3-Clause */
/* test_threads.c -- the thread rule's check (hilock.h): a client (and its locks) used from a
 * second thread while one thread is inside a call gets HILOCK_EINVAL "client used from two
 * threads at once", having sent nothing; never a crash, a hang or commands interleaved on
 * the connection. Real redis-server. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "fixture.h"
#include "hilock.h"

#define TWO_THREADS "client used from two threads at once"
#define CALLS 2000

typedef struct hammer {
    hilock_client *c;
    hilock        *shared;   /* one lock both threads check */
    const char    *key;      /* this thread's own key */
    pthread_barrier_t *start;
    long           refused, done, bad;
    char           why[300]; /* the first unexpected outcome */
} hammer;

/* OK, BUSY, NOT_HELD, or EINVAL with the message (read on this thread): anything else is bad. */
static void judge(hammer *h, const char *call, hilock_status st)
{
    const char *msg = hilock_client_errmsg(h->c);
    h->done++;
    if (st == HILOCK_OK || st == HILOCK_BUSY || st == HILOCK_NOT_HELD) return;
    if (st == HILOCK_EINVAL && !strcmp(msg, TWO_THREADS)) {
        h->refused++;
        sched_yield();   /* (let the other thread's call end: both threads then get turns) */
        return;
    }
    if (!h->bad++)
        snprintf(h->why, sizeof h->why, "%s: %s: %s", call, hilock_strerror(st), msg);
}

/* Release until the call is not refused (the other thread may be inside): bounded. */
static void release_mine(hammer *h, hilock **mine)
{
    hilock_status st = HILOCK_EINVAL;
    for (int i = 0; i < 100000 && st == HILOCK_EINVAL; i++) {
        if ((st = hilock_release(*mine)) == HILOCK_EINVAL) sched_yield();
        judge(h, "release", st);
    }
    if (st != HILOCK_EINVAL) {   /* (else the lock stays, and the key check below fails) */
        hilock_free(*mine);
        *mine = NULL;
    }
}

static void *hammer_main(void *arg)
{
    hammer *h = arg;
    hilock *mine = NULL;
    pthread_barrier_wait(h->start);   /* (both hammer at once) */
    for (int i = 0; i < CALLS; i++) {
        hilock_status st;
        if (!mine) {
            st = hilock_acquire(h->c, h->key, 10000, 0, &mine);
            judge(h, "acquire", st);
        } else if (i % 3 == 0) {
            st = hilock_release(mine);
            judge(h, "release", st);
            if (st != HILOCK_EINVAL) {
                hilock_free(mine);
                mine = NULL;
            }
        } else if (i % 3 == 1) {
            judge(h, "extend", hilock_extend(mine, 10000));
        } else {
            judge(h, "check", hilock_check(h->shared));
        }
    }
    if (mine) release_mine(h, &mine);
    return NULL;
}

/* Every error reply the server sent, by prefix, except NOSCRIPT (the EVALSHA fallback's):
 * a command mangled by two writers shows up here ("ERR unknown command ..."). */
static void assert_no_error_replies(hlt_redis *r)
{
    redisReply *rep = hlt_cmd(r, "INFO errorstats");
    const char *p;
    cr_assert(rep && rep->type == REDIS_REPLY_STRING);
    for (p = strstr(rep->str, "errorstat_"); p; p = strstr(p + 1, "errorstat_"))
        cr_assert(!strncmp(p, "errorstat_NOSCRIPT:", 19), "the server answered errors: %.80s", p);
    freeReplyObject(rep);
}

Test(threads, two_threads_on_one_client_get_a_clear_refusal_and_the_stream_stays_whole, .timeout = 120)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *shared;
    hammer h[2];
    pthread_t th[2];
    pthread_barrier_t start;
    char *v;
    pthread_barrier_init(&start, NULL, 2);
    cr_assert_eq(hilock_client_open(r->url, &c), HILOCK_OK);
    cr_assert_eq(hilock_acquire(c, "shared", 60000, 0, &shared), HILOCK_OK, "%s", hilock_client_errmsg(c));
    memset(h, 0, sizeof h);
    for (int i = 0; i < 2; i++) {
        h[i].c = c;
        h[i].shared = shared;
        h[i].key = i ? "mine:1" : "mine:0";
        h[i].start = &start;
        cr_assert_eq(pthread_create(&th[i], NULL, hammer_main, &h[i]), 0);
    }
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(h[i].bad, 0, "thread %d: %ld unexpected outcomes, the first: %s", i, h[i].bad, h[i].why);
        cr_log_info("thread %d: %ld calls, %ld refused (two threads)", i, h[i].done, h[i].refused);
    }
    assert_no_error_replies(r);
    cr_assert_eq(hlt_exists(r, "mine:0"), 0, "every lock a thread got was released");
    cr_assert_eq(hlt_exists(r, "mine:1"), 0);
    cr_assert_not_null(v = hlt_get(r, "shared"), "the shared lock was only checked");
    cr_assert_str_eq(v, hilock_token(shared));
    free(v);
    /* and the client is whole: this thread uses it as before */
    cr_assert_eq(hilock_check(shared), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_release_gone(r, c, shared, "shared");
    hilock_client_free(c);
    hlt_redis_stop(r);
}

typedef struct waiter {
    hilock_client *c;
    hilock_status  st;
    char           errmsg[300];
} waiter;

static void *wait_busy(void *arg)
{
    waiter *w = arg;
    hilock *l = NULL;
    w->st = hilock_acquire(w->c, "taken", 5000, 4000, &l);   /* waits 4 s on a held key */
    snprintf(w->errmsg, sizeof w->errmsg, "%s", hilock_client_errmsg(w->c));
    hilock_free(l);
    return NULL;
}

/* Someone else holds "taken"; w's thread waits for it inside an acquire on c. */
static void start_waiting_thread(hlt_redis *r, hilock_client *c, waiter *w, pthread_t *th)
{
    redisReply *rep = hlt_cmd(r, "SET taken someone-else PX 30000");
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    w->c = c;
    cr_assert_eq(pthread_create(th, NULL, wait_busy, w), 0);
    /* the other thread is inside its acquire, waiting: seen blocked in its BLPOP (a fixed
     * 300 ms did not always see it there on a loaded machine) */
    for (long long end = hlt_now_ms() + 3000; hlt_info_int(r, "clients", "blocked_clients:") < 1;)
        if (hlt_now_ms() > end) cr_assert_fail("the waiting thread never blocked");
        else hlt_sleep_ms(5);
}

Test(threads, a_refused_call_changes_nothing_and_keeps_the_other_threads_message, .timeout = 60)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *l;
    waiter w = { 0 };
    pthread_t th;
    char *v;
    cr_assert_eq(hilock_client_open(r->url, &c), HILOCK_OK);
    cr_assert_eq(hilock_acquire(c, "mine", 60000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    start_waiting_thread(r, c, &w, &th);
    cr_assert_eq(hilock_release(l), HILOCK_EINVAL);
    cr_assert_str_eq(hilock_client_errmsg(c), TWO_THREADS);
    cr_assert_eq(hilock_extend(l, 60000), HILOCK_EINVAL);
    cr_assert_eq(hilock_check(l), HILOCK_EINVAL);
    cr_assert_eq(hilock_keepalive(l, NULL, NULL), HILOCK_EINVAL);
    cr_assert_str_eq(hilock_client_errmsg(c), TWO_THREADS);
    pthread_join(th, NULL);
    cr_assert_eq(w.st, HILOCK_BUSY, "%s", w.errmsg);
    cr_assert(strstr(w.errmsg, "taken"), "the waiting thread's own message: %s", w.errmsg);
    cr_assert_not_null(v = hlt_get(r, "mine"), "the refused release deleted nothing");
    cr_assert_str_eq(v, hilock_token(l));
    free(v);
    /* its turn now: the same calls go through, and errmsg is the client's again */
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_str_eq(hilock_client_errmsg(c), "");
    hlt_release_gone(r, c, l, "mine");
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* A refusal names its client by serial, not address: a new client made where the refused
 * one was freed starts with errmsg "" (before: "client used from two threads at once" until
 * its first call, on the thread refused). The allocator usually gives the address back at
 * once; the clients made while looking for it are kept until the end, so each try is new. */
Test(threads, a_new_client_made_where_a_refused_one_was_freed_reports_no_refusal, .timeout = 60)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c, *made[16];
    hilock *l = NULL;
    waiter w = { 0 };
    pthread_t th;
    int n = 0, same = 0;
    cr_assert_eq(hilock_client_open(r->url, &c), HILOCK_OK);
    start_waiting_thread(r, c, &w, &th);
    cr_assert_eq(hilock_acquire(c, "mine", 60000, 0, &l), HILOCK_EINVAL);
    cr_assert_str_eq(hilock_client_errmsg(c), TWO_THREADS);
    pthread_join(th, NULL);
    cr_assert_eq(hlt_exists(r, "mine"), 0, "the refused acquire wrote nothing");
    hilock_client_free(c);
    while (n < 16 && !same) {
        cr_assert_eq(hilock_client_open(r->url, &made[n]), HILOCK_OK);
        same = made[n] == c;
        cr_assert_str_eq(hilock_client_errmsg(made[n]), "", "new client %d (%s address)", n,
                         same ? "the freed client's" : "another");
        n++;
    }
    printf("threads: a new client took the freed one's address: %s (after %d)\n", same ? "yes" : "no", n);
    while (n > 0) hilock_client_free(made[--n]);
    hlt_redis_stop(r);
}
