/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cancel.c -- hilock_cancel (hilock.h): a blocking call ended from another thread or a
 * signal handler, during a wait and during a round trip a stalled server does not answer;
 * HILOCK_ECANCELED, the client working for the next call, nothing of ours left on the server.
 * Real redis-server. Times here are generous bounds proving "does not hang", never speed. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "clients.h"
#include "fixture.h"
#include "loop_run.h"
#include "hilock.h"
#include "hilock_libuv.h"

/* A cancelled call ends within about 50 ms (hilock.h); 3 s proves it ended by the cancel,
 * not by a wait of its own (HILOCK_WAIT_FOREVER, or a 30 s io timeout), on any machine. */
#define ENDS_WITHIN_MS 3000

typedef struct waiter {
    hilock_client *c;
    const char    *key;
    int64_t        wait_ms;
    hilock        *l;
    hilock_status  st;
    long long      ended;   /* hlt_now_ms() when the call returned */
    char           msg[512];
    volatile int   started;
} waiter;

static void *acquire_main(void *arg)
{
    waiter *w = arg;
    w->started = 1;
    w->st = hilock_acquire(w->c, w->key, 30000, w->wait_ms, &w->l);
    w->ended = hlt_now_ms();
    snprintf(w->msg, sizeof w->msg, "%s", hilock_client_errmsg(w->c));
    return NULL;
}

static void start(waiter *w, pthread_t *th)
{
    cr_assert_eq(pthread_create(th, NULL, acquire_main, w), 0);
    while (!w->started) hlt_sleep_ms(1);
}

/* The waiter is inside its wait: its BUSY attempts have marked the key awaited, and it is
 * blocked in its BLPOP on the key's signal list (not between an attempt and the wait). */
static void until_waiting(hlt_redis *r)
{
    HLT_AWAIT(hlt_exists(r, "{k}:waiters"), 10000, "the waiter never waited");
    HLT_AWAIT(hlt_info_int(r, "clients", "blocked_clients:") >= 1, 10000, "the waiter never blocked in its BLPOP");
}

/* Bytes that connections to 127.0.0.1:port hold unread by the server (rx_queue of its
 * established sockets in /proc/net/tcp): what a frozen server was sent and has not read. */
static long unread_by_server(int port)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    char line[512];
    long total = 0;
    cr_assert_not_null(f, "/proc/net/tcp");
    while (fgets(line, sizeof line, f)) {
        unsigned lport, st;
        unsigned long tx, rx;
        if (sscanf(line, " %*d: %*x:%x %*x:%*x %x %lx:%lx", &lport, &st, &tx, &rx) == 4 && lport == (unsigned)port &&
            st == 1)   /* TCP_ESTABLISHED */
            total += (long)rx;
    }
    fclose(f);
    return total;
}

static void assert_cancelled(const waiter *w, long long cancelled_at)
{
    fprintf(stderr, "cancel: %s ended %lld ms after hilock_cancel (%s)\n", w->wait_ms ? "a wait" : "a round trip",
            w->ended - cancelled_at, hilock_strerror(w->st));
    cr_assert_eq(w->st, HILOCK_ECANCELED, "%s: %s", hilock_strerror(w->st), w->msg);
    cr_assert_null(w->l);
    cr_assert(strstr(w->msg, "cancelled"), "errmsg: %s", w->msg);
    cr_assert_lt(w->ended - cancelled_at, ENDS_WITHIN_MS, "ended %lld ms after the cancel",
                 w->ended - cancelled_at);
    cr_assert_str_eq(hilock_strerror(HILOCK_ECANCELED), "cancelled");
}

/* After a cancel the client works: it takes the key once the holder lets go; its value is
 * on the server (read with a connection of our own). */
static void assert_works_after(hlt_redis *r, hilock_client *c, hilock *holder)
{
    hilock *l = NULL;
    char *v;
    if (holder) cr_assert_eq(hilock_release(holder), HILOCK_OK);
    cr_assert_eq(hilock_acquire(c, "k", 30000, 5000, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_str_eq(v = hlt_get(r, "k"), hilock_token(l));
    free(v);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    cr_assert_eq(hlt_exists(r, "k"), 0);
}

Test(cancel, another_thread_ends_a_wait_forever, .timeout = 60)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_options opt = hlt_options((const char *[]){ r->url }, 1);
    opt.io_timeout_ms = opt.connect_timeout_ms = 2000;
    hilock_client *a = hlt_client_new(&opt), *c = hlt_client_new(&opt);
    hilock *held = NULL;
    waiter w = { .c = c, .key = "k", .wait_ms = HILOCK_WAIT_FOREVER };
    pthread_t th;
    char *v;
    long long at;
    cr_assert_eq(hilock_acquire(a, "k", 30000, 0, &held), HILOCK_OK);
    start(&w, &th);
    until_waiting(r);
    at = hlt_now_ms();
    hilock_cancel(c);
    pthread_join(th, NULL);
    assert_cancelled(&w, at);
    cr_assert_str_eq(v = hlt_get(r, "k"), hilock_token(held), "the holder's value changed");
    free(v);
    assert_works_after(r, c, held);
    hilock_free(held);
    hilock_client_free(a);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

static hilock_client *signalled;
static void on_usr1(int sig)
{
    (void)sig;
    hilock_cancel(signalled);
}

Test(cancel, a_signal_handler_ends_a_wait, .timeout = 60)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_options opt = hlt_options((const char *[]){ r->url }, 1);
    opt.io_timeout_ms = opt.connect_timeout_ms = 2000;
    hilock_client *a = hlt_client_new(&opt), *c = hlt_client_new(&opt);
    hilock *held = NULL;
    waiter w = { .c = c, .key = "k", .wait_ms = 60000 };
    struct sigaction sa, old;
    pthread_t th;
    long long at;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;   /* (no SA_RESTART: the wait's poll sees EINTR too) */
    sigaction(SIGUSR1, &sa, &old);
    signalled = c;
    cr_assert_eq(hilock_acquire(a, "k", 30000, 0, &held), HILOCK_OK);
    start(&w, &th);
    until_waiting(r);
    at = hlt_now_ms();
    pthread_kill(th, SIGUSR1);   /* the handler runs on the waiting thread itself */
    pthread_join(th, NULL);
    sigaction(SIGUSR1, &old, NULL);
    assert_cancelled(&w, at);
    assert_works_after(r, c, held);
    hilock_free(held);
    hilock_client_free(a);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* The server stops answering in the middle of the acquire's round trip (SIGSTOP): with a
 * 30 s io timeout only the cancel can end it. Once the server runs again it may carry out
 * the acquire it had read: the client's next round trip deletes that value first. */
Test(cancel, a_stalled_round_trip_ends_and_its_write_is_undone, .timeout = 90)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_options opt = hlt_options((const char *[]){ r->url }, 1);
    opt.io_timeout_ms = opt.connect_timeout_ms = 30000;
    hilock_options opt2 = hlt_options((const char *[]){ r->url }, 1);
    opt2.io_timeout_ms = opt2.connect_timeout_ms = 2000;
    hilock_client *c = hlt_client_new(&opt), *d = hlt_client_new(&opt2);
    hilock *other = NULL;
    waiter w = { .c = c, .key = "k", .wait_ms = 0 };
    pthread_t th;
    long long at;
    cr_assert_eq(hilock_acquire(c, "warm", 1000, 0, &other), HILOCK_OK);   /* connected, scripts loaded */
    hilock_release(other);
    hilock_free(other);
    hlt_redis_freeze(r);
    start(&w, &th);
    /* the acquire is written (it waits, unread, in the frozen server's socket), and waits for
     * the answer */
    HLT_AWAIT(unread_by_server(r->port) > 0, 10000, "the acquire was not sent to the frozen server");
    at = hlt_now_ms();
    hilock_cancel(c);
    pthread_join(th, NULL);
    hlt_redis_thaw(r);
    assert_cancelled(&w, at);
    /* the next call on c (another key, same server) undoes the acquire if it landed */
    cr_assert_eq(hilock_acquire(c, "other", 30000, 0, &other), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_exists(r, "k"), 0, "the cancelled acquire's value is still there");
    cr_assert_eq(hilock_release(other), HILOCK_OK);
    hilock_free(other);
    assert_works_after(r, d, NULL);
    hilock_client_free(c);
    hilock_client_free(d);
    hlt_redis_stop(r);
}

/* A cancel made between calls: release and check do not answer it (it was not theirs); the
 * next acquire does, at once, sending nothing; the one after works. */
Test(cancel, one_made_between_calls_is_kept_for_the_next_acquire, .timeout = 60)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_options opt = hlt_options((const char *[]){ r->url }, 1);
    opt.io_timeout_ms = opt.connect_timeout_ms = 2000;
    hilock_client *c = hlt_client_new(&opt);
    hilock *l = NULL, *m = NULL;
    long long cmds, own;
    cr_assert_eq(hilock_acquire(c, "held", 30000, 0, &l), HILOCK_OK);
    hilock_cancel(c);
    hilock_cancel(c);   /* (two before one call: consumed together) */
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_release_gone(r, c, l, "held");
    cmds = hlt_info_int(r, "stats", "total_commands_processed");
    own = hlt_info_int(r, "stats", "total_commands_processed") - cmds;   /* what our INFO adds */
    cmds += own;
    cr_assert_eq(hilock_acquire(c, "k", 30000, HILOCK_WAIT_FOREVER, &m), HILOCK_ECANCELED);
    cr_assert_null(m);
    cr_assert(strstr(hilock_client_errmsg(c), "cancelled"), "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_info_int(r, "stats", "total_commands_processed") - own, cmds, "the cancelled acquire sent a command");
    cr_assert_eq(hlt_exists(r, "k"), 0);
    assert_works_after(r, c, NULL);
    hilock_cancel(NULL);   /* NULL-safe */
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* A cancel from the thread of a keepalive's owner does not stop the keepalive (a client of
 * its own): the lock stays held past its ttl. */
Test(cancel, a_keepalive_goes_on, .timeout = 60)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_options opt = hlt_options((const char *[]){ r->url }, 1);
    opt.io_timeout_ms = opt.connect_timeout_ms = 2000;
    hilock_client *c = hlt_client_new(&opt);
    hilock *l = NULL;
    char *v;
    cr_assert_eq(hilock_acquire(c, "k", 1000, 0, &l), HILOCK_OK);
    cr_assert_eq(hilock_keepalive(l, NULL, NULL), HILOCK_OK, "%s", hilock_client_errmsg(c));
    for (int i = 0; i < 10; i++) hilock_cancel(c);
    hlt_sleep_ms(2500);
    cr_assert_str_eq(v = hlt_get(r, "k"), hilock_token(l), "the keepalive stopped");
    free(v);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    cr_assert_eq(hlt_exists(r, "k"), 0);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* ---- a client attached to an event loop: every call in flight ends ECANCELED ---- */

typedef struct outcome {
    int           n;
    hilock_status st;
    hilock       *l;
    char          msg[512];
    hilock_client *c;
} outcome;

static void on_done(hilock_status st, hilock *l, void *arg)
{
    outcome *o = arg;
    o->n++;
    o->st = st;
    o->l = l;
    snprintf(o->msg, sizeof o->msg, "%s", hilock_client_errmsg(o->c));
}

static void *cancel_later(void *arg)
{
    hlt_sleep_ms(300);
    hilock_cancel(arg);
    return NULL;
}

/* The loop's client works after a cancel: it takes key and gives it back. */
static void loop_works_after(uv_loop_t *loop, hlt_redis *r, hilock_client *c, const char *key)
{
    outcome o = { .c = c };
    char *v;
    cr_assert_eq(hilock_acquire_async(c, key, 30000, 5000, on_done, &o), HILOCK_OK);
    hlt_loop_run(loop, &o.n, 1, 10000);
    cr_assert_eq(o.st, HILOCK_OK, "%s", o.msg);
    cr_assert_str_eq(v = hlt_get(r, key), hilock_token(o.l));
    free(v);
    cr_assert_eq(hilock_release_async(o.l, on_done, &o), HILOCK_OK);
    hlt_loop_run(loop, &o.n, 2, 10000);
    cr_assert_eq(o.st, HILOCK_OK, "%s", o.msg);
    hilock_free(o.l);
    cr_assert_eq(hlt_exists(r, key), 0);
}

Test(cancel, another_thread_ends_a_loop_clients_waits, .timeout = 60)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_options opt = hlt_options((const char *[]){ r->url }, 1);
    opt.io_timeout_ms = opt.connect_timeout_ms = 2000;
    hilock_client *a = hlt_client_new(&opt), *c;
    hilock *held = NULL;
    outcome w1 = { 0 }, w2 = { 0 };
    uv_loop_t loop;
    pthread_t th;
    long long at;
    char *v;
    uv_loop_init(&loop);
    c = w1.c = w2.c = hlt_client_new(&opt);
    cr_assert_eq(hilock_libuv_attach(c, &loop), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_acquire(a, "k", 30000, 0, &held), HILOCK_OK);
    cr_assert_eq(hilock_acquire_async(c, "k", 30000, HILOCK_WAIT_FOREVER, on_done, &w1), HILOCK_OK);
    cr_assert_eq(hilock_acquire_async(c, "k", 30000, HILOCK_WAIT_FOREVER, on_done, &w2), HILOCK_OK);
    hlt_loop_run(&loop, NULL, 0, 300);   /* both waiting */
    cr_assert_eq(w1.n + w2.n, 0, "a waiter ended: %s / %s", w1.msg, w2.msg);
    cr_assert_eq(pthread_create(&th, NULL, cancel_later, c), 0);
    at = hlt_now_ms();
    hlt_loop_run(&loop, &w2.n, 1, ENDS_WITHIN_MS + 300);
    hlt_loop_run(&loop, &w1.n, 1, 1000);
    pthread_join(th, NULL);
    cr_assert_lt(hlt_now_ms() - at, ENDS_WITHIN_MS + 300);
    cr_assert_eq(w1.st, HILOCK_ECANCELED, "%s: %s", hilock_strerror(w1.st), w1.msg);
    cr_assert_eq(w2.st, HILOCK_ECANCELED, "%s: %s", hilock_strerror(w2.st), w2.msg);
    cr_assert_null(w1.l);
    cr_assert_null(w2.l);
    cr_assert(strstr(w1.msg, "cancelled"), "%s", w1.msg);
    cr_assert_str_eq(v = hlt_get(r, "k"), hilock_token(held));
    free(v);
    cr_assert_eq(hilock_release(held), HILOCK_OK);
    hilock_free(held);
    loop_works_after(&loop, r, c, "k");
    hilock_client_free(c);
    hlt_loop_close(&loop);
    hilock_client_free(a);
    hlt_redis_stop(r);
}

Test(cancel, a_loop_clients_stalled_round_trip_ends_and_its_write_is_undone, .timeout = 90)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c;
    outcome w = { 0 };
    uv_loop_t loop;
    pthread_t th;
    uv_loop_init(&loop);
    hilock_options opt = hlt_options((const char *[]){ r->url }, 1);
    opt.io_timeout_ms = opt.connect_timeout_ms = 30000;
    c = w.c = hlt_client_new(&opt);
    cr_assert_eq(hilock_libuv_attach(c, &loop), HILOCK_OK, "%s", hilock_client_errmsg(c));
    loop_works_after(&loop, r, c, "warm");   /* connected, scripts loaded */
    hlt_redis_freeze(r);
    cr_assert_eq(hilock_acquire_async(c, "k", 30000, 0, on_done, &w), HILOCK_OK);
    cr_assert_eq(pthread_create(&th, NULL, cancel_later, c), 0);
    hlt_loop_run(&loop, &w.n, 1, ENDS_WITHIN_MS + 300);
    pthread_join(th, NULL);
    hlt_redis_thaw(r);
    cr_assert_eq(w.st, HILOCK_ECANCELED, "%s: %s", hilock_strerror(w.st), w.msg);
    cr_assert_null(w.l);
    loop_works_after(&loop, r, c, "other");   /* its round trip undoes k's write first */
    cr_assert_eq(hlt_exists(r, "k"), 0, "the cancelled acquire's value is still there");
    hilock_client_free(c);
    hlt_loop_close(&loop);
    hlt_redis_stop(r);
}
