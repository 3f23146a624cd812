/* SPDX-License-Identifier: BSD-3-Clause */
/* test_observe.c -- hilock_observe.h: events from the scenarios that cause them (a busy wait
 * woken by the release, a lock lost by DEL seen by check and by the keepalive, Redlock
 * members, a node's error, connects and reconnects, TLS handshakes), the observer refused
 * re-entry, counters after a known sequence of calls, histogram bucket edges, merge, and the
 * Prometheus text (exact for a small case; parsed by python3's prometheus_client if present).
 * Sentinel failover and Cluster redirects: test_observe_topo.c. */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clients.h"
#include "fakes.h"
#include "fixture.h"
#include "hilock.h"
#include "hilock_async.h"
#include "hilock_legacy.h"
#include "hilock_libuv.h"
#include "hilock_observe.h"
#include "observe_rec.h"
#include "tls_fixture.h"

TestSuite(observe, .timeout = 60);

/* ---- events ---- */

typedef struct holder_arg { hlt_redis *r; const char *key; } holder_arg;

/* A holder's thread: releases l once the waiter is seen blocked (INFO blocked_clients) on
 * every server of r, then hold_ms later, and notes when it released. A fixed sleep before
 * the release (300 ms, 800 ms) did not prove the waiter was waiting by then: on a loaded
 * machine its first attempt could come after the release, and nothing was woken. */
typedef struct releaser {
    hlt_redis    **r;
    int            nr;
    hilock        *l;
    long           hold_ms;
    int            blocked;       /* servers where the waiter was seen blocked */
    int64_t        released_us;   /* just before the release (CLOCK_MONOTONIC: the events' clock) */
    hilock_status  st;
} releaser;

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void *release_when_blocked(void *arg)
{
    releaser *x = arg;
    long long end = hlt_now_ms() + 4000;   /* (then releases anyway: the test fails, not hangs) */
    for (int i = 0; i < x->nr; i++) {
        while (hlt_info_int(x->r[i], "clients", "blocked_clients:") < 1 && hlt_now_ms() < end) hlt_sleep_ms(2);
        x->blocked += hlt_info_int(x->r[i], "clients", "blocked_clients:") >= 1;
    }
    if (x->hold_ms) hlt_sleep_ms(x->hold_ms);
    x->released_us = now_us();
    x->st = hilock_release(x->l);
    return NULL;
}

Test(observe, a_busy_wait_woken_by_the_release_reports_start_busy_and_a_woken_grant_with_the_histograms_wait)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *a = hlt_client(r->url), *b;
    hilock *la, *lb;
    hlt_rec *x = hlt_rec_new();
    pthread_t th;
    hilock_options o;
    hilock_stats s;
    const char *url = r->url;
    releaser rel = { &r, 1, NULL, 0, 0, 0, HILOCK_OK };
    hilock_options_init(&o);
    o.servers = &url;
    o.nservers = 1;
    o.retry_delay_ms = 1000;   /* its pause (a BLPOP) outlasts the holder: the release wakes it */
    cr_assert_eq(hilock_client_new(&o, &b), HILOCK_OK);
    const hlt_rec_ev *e;
    cr_assert_eq(hilock_acquire(a, "obs:k", 30000, 0, &la), HILOCK_OK);
    cr_assert_eq(hilock_set_observer(b, hlt_rec_observer, x), HILOCK_OK);
    rel.l = la;
    pthread_create(&th, NULL, release_when_blocked, &rel);
    cr_assert_eq(hilock_acquire(b, "obs:k", 10000, 10000, &lb), HILOCK_OK, "%s", hilock_client_errmsg(b));
    pthread_join(th, NULL);
    cr_assert_eq(rel.blocked, 1, "the waiter was never seen blocked in its wait");
    cr_assert_eq(rel.st, HILOCK_OK, "the holder's release: %s", hilock_strerror(rel.st));
    cr_assert_not_null(e = hlt_rec_find(x, HILOCK_EVENT_ACQUIRE_START, 0));
    cr_assert_str_eq(e->key, "obs:k");
    cr_assert_eq(e->e.keylen, 5);
    cr_assert_eq(e->e.duration_us, -1);
    cr_assert_gt(e->e.at_us, 0);
    cr_assert_not_null(e = hlt_rec_find(x, HILOCK_EVENT_ACQUIRE_BUSY, 0), "no busy event");
    cr_assert_eq(e->e.status, HILOCK_BUSY);
    cr_assert_eq(e->e.attempts, 1);
    cr_assert_not_null(e = hlt_rec_find(x, HILOCK_EVENT_ACQUIRE_GRANTED, 0));
    cr_assert_eq(e->e.status, HILOCK_OK);
    cr_assert_eq(e->e.woken, 1, "the release's notice ended the wait");
    cr_assert_eq(e->e.fence, hilock_fence(lb));
    cr_assert_geq(e->e.attempts, 2);
    /* waited for the release: it started before it and was granted after it began */
    cr_assert_lt(hlt_rec_find(x, HILOCK_EVENT_ACQUIRE_START, 0)->e.at_us, rel.released_us);
    cr_assert_geq(e->e.at_us, rel.released_us, "granted %lld us before the release",
                  (long long)(rel.released_us - e->e.at_us));
    cr_assert_gt(e->e.duration_us, 0);
    cr_assert_str_eq(e->node, r->url + strlen("redis://"));
    cr_assert_eq(hilock_client_stats(b, &s), HILOCK_OK);
    cr_assert_eq(s.acquire_wait.count, 1);
    cr_assert_eq(s.acquire_wait.sum_us, (uint64_t)e->e.duration_us, "the event's wait is the histogram's");
    cr_assert_eq(e->e.at_us - e->e.duration_us, hlt_rec_find(x, HILOCK_EVENT_ACQUIRE_START, 0)->e.at_us,
                 "one clock: granted at start + wait");
    cr_assert_eq(hilock_release(lb), HILOCK_OK);
    cr_assert_not_null(e = hlt_rec_find(x, HILOCK_EVENT_RELEASE, 0));
    cr_assert_eq(e->e.status, HILOCK_OK);
    cr_assert_geq(e->e.duration_us, 0);
    hilock_free(la);
    hilock_free(lb);
    hilock_client_free(a);
    hilock_client_free(b);
    hlt_redis_stop(r);
}

Test(observe, a_try_lock_on_a_held_key_reports_busy_and_gave_up)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *a = hlt_client(r->url), *b = hlt_client(r->url);
    hilock *la, *lb;
    hlt_rec *x = hlt_rec_new();
    const hlt_rec_ev *e;
    cr_assert_eq(hilock_acquire(a, "obs:k", 10000, 0, &la), HILOCK_OK);
    hilock_set_observer(b, hlt_rec_observer, x);
    cr_assert_eq(hilock_acquire(b, "obs:k", 10000, 0, &lb), HILOCK_BUSY);
    cr_assert_eq(hlt_rec_count(x, HILOCK_EVENT_ACQUIRE_BUSY), 1);
    cr_assert_not_null(e = hlt_rec_find(x, HILOCK_EVENT_ACQUIRE_GAVE_UP, 0));
    cr_assert_eq(e->e.status, HILOCK_BUSY);
    cr_assert_eq(e->e.attempts, 1);
    cr_assert(strstr(e->message, "held by another owner"), "%s", e->message);
    cr_assert_eq(hlt_rec_count(x, HILOCK_EVENT_ACQUIRE_GRANTED), 0);
    hilock_free(la);
    hilock_client_free(a);
    hilock_client_free(b);
    hlt_redis_stop(r);
}

Test(observe, a_lock_deleted_while_valid_is_lost_as_taken_seen_by_check)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_client(r->url);
    hilock *l;
    hlt_rec *x = hlt_rec_new();
    const hlt_rec_ev *e;
    hilock_set_observer(c, hlt_rec_observer, x);
    cr_assert_eq(hilock_acquire(c, "obs:k", 10000, 0, &l), HILOCK_OK);
    cr_assert_eq(hilock_check(l), HILOCK_OK);
    cr_assert_not_null(e = hlt_rec_find(x, HILOCK_EVENT_EXTEND, 0));
    cr_assert_eq(e->e.status, HILOCK_OK);
    cr_assert_gt(e->e.validity_ms, 9000);
    freeReplyObject(hlt_cmd(r, "DEL obs:k"));
    cr_assert_eq(hilock_check(l), HILOCK_NOT_HELD);
    cr_assert_not_null(e = hlt_rec_find(x, HILOCK_EVENT_EXTEND, 1));
    cr_assert_eq(e->e.status, HILOCK_NOT_HELD);
    cr_assert_eq(e->e.validity_ms, 0);
    cr_assert_not_null(e = hlt_rec_find(x, HILOCK_EVENT_LOST, 0));
    cr_assert_eq(e->e.status, HILOCK_NOT_HELD);
    cr_assert_eq(e->e.lost_why, HILOCK_LOST_TAKEN);
    cr_assert_str_eq(e->key, "obs:k");
    cr_assert(strstr(e->message, "obs:k"), "%s", e->message);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(observe, a_lock_that_expired_is_lost_as_expired_seen_by_release)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_client(r->url);
    hilock *l;
    hlt_rec *x = hlt_rec_new();
    const hlt_rec_ev *e;
    hilock_set_observer(c, hlt_rec_observer, x);
    cr_assert_eq(hilock_acquire(c, "obs:k", 100, 0, &l), HILOCK_OK);
    hlt_sleep_ms(250);
    cr_assert_eq(hilock_release(l), HILOCK_NOT_HELD);
    cr_assert_not_null(e = hlt_rec_find(x, HILOCK_EVENT_LOST, 0));
    cr_assert_eq(e->e.lost_why, HILOCK_LOST_EXPIRED);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

static void on_lost(hilock *l, hilock_status why, void *arg)
{
    (void)l;
    *(volatile int *)arg = (int)why + 1;
}

Test(observe, the_keepalive_reports_renewals_and_the_loss_once_on_its_thread_and_counts_them)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_client(r->url);
    hilock *l;
    hlt_rec *x = hlt_rec_new();
    const hlt_rec_ev *e;
    hilock_stats s;
    volatile int lost = 0;
    hilock_set_observer(c, hlt_rec_observer, x);
    /* (1 s: a renewal every 333 ms, with 667 ms of slack before the key expires; a 300 ms ttl
     * left a loaded machine's renewal thread 200 ms, and a lapse is a loss before the DEL) */
    cr_assert_eq(hilock_acquire(c, "obs:k", 1000, 0, &l), HILOCK_OK);
    cr_assert_eq(hilock_keepalive(l, on_lost, (void *)&lost), HILOCK_OK);
    for (long long end = hlt_now_ms() + 5000; hlt_rec_count(x, HILOCK_EVENT_RENEWAL) < 2 && hlt_now_ms() < end;)
        hlt_sleep_ms(10);
    cr_assert_geq(hlt_rec_count(x, HILOCK_EVENT_RENEWAL), 2, "renewals seen");
    cr_assert_not_null(e = hlt_rec_find(x, HILOCK_EVENT_RENEWAL, 0));
    cr_assert_eq(e->e.status, HILOCK_OK);
    cr_assert_gt(e->e.validity_ms, 100);
    cr_assert_str_eq(e->key, "obs:k");
    freeReplyObject(hlt_cmd(r, "DEL obs:k"));
    for (long long end = hlt_now_ms() + 5000; !lost && hlt_now_ms() < end;) hlt_sleep_ms(10);
    cr_assert_eq(lost, HILOCK_NOT_HELD + 1);
    cr_assert_not_null(e = hlt_rec_find(x, HILOCK_EVENT_LOST, 0), "the keepalive's LOST");
    cr_assert_eq(e->e.status, HILOCK_NOT_HELD);
    cr_assert_eq(e->e.lost_why, HILOCK_LOST_TAKEN);
    /* the owner, told by on_lost, releases: no news, not a second loss */
    cr_assert_eq(hilock_release(l), HILOCK_NOT_HELD);
    cr_assert_eq(hlt_rec_count(x, HILOCK_EVENT_LOST), 1, "one loss, one LOST event");
    cr_assert_eq(hilock_client_stats(c, &s), HILOCK_OK);
    cr_assert_geq(s.renewal_ok, 2);
    cr_assert_eq(s.renewal_failed, 1);
    cr_assert_eq(s.lost, 1);
    cr_assert_eq(s.extend_ok + s.extend_failed, 0, "renewals are not extends");
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* Three masters for a Redlock client. */
static void start3(hlt_redis **r, const char **urls)
{
    for (int i = 0; i < 3; i++) {
        r[i] = hlt_redis_start(NULL);
        urls[i] = r[i]->url;
    }
}

static void stop3(hlt_redis **r)
{
    for (int i = 0; i < 3; i++) hlt_redis_stop(r[i]);
}

Test(observe, redlock_reports_each_masters_answer)
{
    hlt_redis *r[3];
    const char *urls[3];
    hilock_client *c, *other;
    hilock *l, *lo;
    hlt_rec *x = hlt_rec_new();
    start3(r, urls);
    other = hlt_client(urls[2]);
    cr_assert_eq(hilock_acquire(other, "obs:k", 10000, 0, &lo), HILOCK_OK);
    hilock_options o = hlt_options(urls, 3);
    c = hlt_client_new(&o);
    hilock_set_observer(c, hlt_rec_observer, x);
    cr_assert_eq(hilock_acquire(c, "obs:k", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_rec_count(x, HILOCK_EVENT_MEMBER), 3);
    for (int i = 0; i < 3; i++) {
        const hlt_rec_ev *e = hlt_rec_find(x, HILOCK_EVENT_MEMBER, i);
        cr_assert_eq(e->e.op, HILOCK_EVENT_ACQUIRE_START);
        cr_assert_str_eq(e->node, urls[i] + strlen("redis://"));
        cr_assert_eq(e->e.status, i == 2 ? HILOCK_BUSY : HILOCK_OK, "member %d", i);
    }
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    cr_assert_eq(hlt_rec_count(x, HILOCK_EVENT_MEMBER), 6);
    cr_assert_eq(hlt_rec_find(x, HILOCK_EVENT_MEMBER, 3)->e.op, HILOCK_EVENT_RELEASE);
    cr_assert_eq(hlt_rec_find(x, HILOCK_EVENT_MEMBER, 5)->e.status, HILOCK_NOT_HELD);
    hilock_free(l);
    hilock_free(lo);
    hilock_client_free(c);
    hilock_client_free(other);
    stop3(r);
}

Test(observe, connects_reconnects_and_a_nodes_error_are_reported_with_the_node)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_client(r->url);
    hilock *l;
    hlt_rec *x = hlt_rec_new();
    const hlt_rec_ev *e;
    hilock_stats s;
    hilock_set_observer(c, hlt_rec_observer, x);
    cr_assert_eq(hilock_acquire(c, "obs:k", 10000, 0, &l), HILOCK_OK);
    cr_assert_not_null(e = hlt_rec_find(x, HILOCK_EVENT_CONNECT, 0));
    cr_assert_eq(e->e.reconnect, 0);
    cr_assert_null(e->e.key);
    cr_assert_geq(e->e.duration_us, 0);
    cr_assert_str_eq(e->node, r->url + strlen("redis://"));
    hlt_redis_kill(r);
    cr_assert_neq(hilock_release(l), HILOCK_OK);
    cr_assert_not_null(e = hlt_rec_find(x, HILOCK_EVENT_ERROR, 0), "the dead server's error");
    cr_assert_eq(e->e.status, HILOCK_EIO);
    cr_assert_str_eq(e->node, r->url + strlen("redis://"));
    cr_assert_str_eq(e->key, "obs:k");
    cr_assert(e->message[0], "a message");
    cr_assert_eq(hlt_redis_restart(r), 0);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    /* (the reconnect refused while it was down is a failed CONNECT before it) */
    cr_assert_not_null(e = hlt_rec_find(x, HILOCK_EVENT_CONNECT, hlt_rec_count(x, HILOCK_EVENT_CONNECT) - 1));
    cr_assert_eq(e->e.status, HILOCK_OK);
    cr_assert_eq(e->e.reconnect, 1);
    hilock_client_stats(c, &s);
    cr_assert_eq(s.connects, 2);
    cr_assert_eq(s.reconnects, 1);
    cr_assert_geq(s.errors, 1);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* Index in x's events of the i-th of kind (-1: none). */
static int rec_index(hlt_rec *x, hilock_event_kind kind, int i)
{
    const hlt_rec_ev *e = hlt_rec_find(x, kind, i);
    return e ? (int)(e - x->ev) : -1;
}

/* A connect refused (nothing listens on the port) is a CONNECT with the failure, then the
 * node's ERROR; a handshake refused (a wrong password) too; neither is counted as a connect. */
static void assert_failed_connect(hlt_rec *x, hilock_status st, const char *node, int reconnect)
{
    const hlt_rec_ev *e;
    cr_assert_eq(hlt_rec_count(x, HILOCK_EVENT_CONNECT), 1 + reconnect);
    cr_assert_not_null(e = hlt_rec_find(x, HILOCK_EVENT_CONNECT, reconnect));
    cr_assert_eq(e->e.status, st, "%s", hilock_strerror(e->e.status));
    cr_assert_str_eq(e->node, node);
    cr_assert_null(e->e.key);
    cr_assert_eq(e->e.reconnect, reconnect);
    cr_assert_geq(e->e.duration_us, 0);
    cr_assert(e->message[0] && strstr(e->message, node), "a message naming the node: %s", e->message);
    cr_assert_gt(rec_index(x, HILOCK_EVENT_ERROR, 0), rec_index(x, HILOCK_EVENT_CONNECT, reconnect),
                 "the ERROR follows");
    cr_assert_eq(hlt_rec_find(x, HILOCK_EVENT_ERROR, 0)->e.status, st);
}

Test(observe, a_refused_connect_and_a_refused_handshake_are_failed_connect_events)
{
    hlt_redis *r = hlt_redis_start("--requirepass s3cret");
    hlt_rec *x = hlt_rec_new(), *y = hlt_rec_new();
    char url[128], node[64];
    int port = hlt_dead_port();
    hilock_client *c;
    hilock *l = NULL;
    hilock_stats s;
    /* nothing listens there */
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    snprintf(node, sizeof node, "127.0.0.1:%d", port);
    c = hlt_client(url);
    hilock_set_observer(c, hlt_rec_observer, x);
    cr_assert_eq(hilock_acquire(c, "obs:k", 10000, 0, &l), HILOCK_EIO);
    assert_failed_connect(x, HILOCK_EIO, node, 0);
    hilock_client_stats(c, &s);
    cr_assert_eq(s.connects, 0, "a failed connect is not a connection opened");
    cr_assert_geq(s.errors, 1);
    hilock_client_free(c);
    /* a wrong password: the connect is done, its handshake refused */
    snprintf(url, sizeof url, "redis://:wrong@127.0.0.1:%d", r->port);
    snprintf(node, sizeof node, "127.0.0.1:%d", r->port);
    c = hlt_client(url);
    hilock_set_observer(c, hlt_rec_observer, y);
    cr_assert_eq(hilock_acquire(c, "obs:k", 10000, 0, &l), HILOCK_EAUTH, "%s", hilock_client_errmsg(c));
    assert_failed_connect(y, HILOCK_EAUTH, node, 0);
    hilock_client_stats(c, &s);
    cr_assert_eq(s.connects, 0);
    hilock_client_free(c);
    cr_assert_eq(hlt_dbsize(r), 0, "nothing written");
    hlt_redis_stop(r);
}

/* A wait on a server that is down is one acquire (one START, one GAVE_UP with the error, one
 * error in the stats) that tries again after pauses doubling from retry_delay_ms (50 ms) to
 * poll_ms: a handful of attempts in 1.5 s, where a retry every ~50 ms made some thirty. */
Test(observe, a_wait_on_a_server_that_is_down_is_one_acquire_trying_again_after_doubling_pauses)
{
    hlt_rec *x = hlt_rec_new();
    char url[128];
    const char *u = url;
    hilock_options o = hlt_options(&u, 1);
    hilock_client *c;
    hilock *l = NULL;
    hilock_stats s;
    hilock_status st;
    const hlt_rec_ev *end;
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", hlt_dead_port());   /* nothing listens */
    o.retry_delay_ms = 50;   /* the defaults */
    o.poll_ms = 1000;
    c = hlt_client_new(&o);
    hilock_set_observer(c, hlt_rec_observer, x);
    st = hilock_acquire(c, "obs:k", 10000, 1500, &l);
    cr_assert(st == HILOCK_EIO || st == HILOCK_ETIMEDOUT, "%s: %s", hilock_strerror(st), hilock_client_errmsg(c));
    cr_assert_null(l);
    cr_assert_eq(hlt_rec_count(x, HILOCK_EVENT_ACQUIRE_START), 1);
    cr_assert_eq(hlt_rec_count(x, HILOCK_EVENT_ACQUIRE_GAVE_UP), 1);
    cr_assert_eq(hlt_rec_count(x, HILOCK_EVENT_ACQUIRE_GRANTED) + hlt_rec_count(x, HILOCK_EVENT_ACQUIRE_BUSY), 0);
    end = hlt_rec_find(x, HILOCK_EVENT_ACQUIRE_GAVE_UP, 0);
    cr_log_info("down server, wait 1.5 s: %ld attempts", end->e.attempts);
    cr_assert_eq(end->e.status, st);
    cr_assert(end->e.attempts >= 2 && end->e.attempts <= 8, "%ld attempts", end->e.attempts);
    hilock_client_stats(c, &s);
    cr_assert(s.acquire_error == 1 && s.acquire_busy == 0 && s.acquire_ok == 0, "errors %llu busy %llu ok %llu",
              (unsigned long long)s.acquire_error, (unsigned long long)s.acquire_busy,
              (unsigned long long)s.acquire_ok);
    hilock_client_free(c);
}

/* ---- a proxy that closes the connection on INFO (twemproxy: what it does not know) ---- */

typedef struct closer { int up_port; int on_time; } closer;

/* The length of the whole command (a RESP array of bulk strings) at b[0..n), 0 if not all
 * in yet; *name, *namelen: its first element. */
static size_t resp_command(const char *b, size_t n, const char **name, size_t *namelen)
{
    const char *p = b, *end = b + n;
    long count, len;
    char *e;
    if (n < 4 || *p != '*' || !memchr(p, '\n', n)) return 0;
    count = strtol(p + 1, &e, 10);
    p = strchr(p, '\n') + 1;
    for (long i = 0; i < count; i++) {
        if (p >= end || *p != '$' || !memchr(p, '\n', (size_t)(end - p))) return 0;
        len = strtol(p + 1, &e, 10);
        p = (const char *)memchr(p, '\n', (size_t)(end - p)) + 1;
        if (end - p < len + 2) return 0;
        if (i == 0) {
            *name = p;
            *namelen = (size_t)len;
        }
        p += len + 2;
    }
    return (size_t)(p - b);
}

/* One client connection: each whole command goes to the real server, its replies come back,
 * but INFO (and TIME, if on_time) closes the connection at once, as twemproxy does. */
static void close_on_info(int fd, void *arg)
{
    const closer *x = arg;
    int up = hlt_connect_port(x->up_port);
    static char in[1 << 16];
    size_t have = 0;
    if (up < 0) return;
    for (;;) {
        struct pollfd p[2] = { { fd, POLLIN, 0 }, { up, POLLIN, 0 } };
        char b[4096];
        ssize_t got;
        if (poll(p, 2, 1000) < 0 && errno != EINTR) break;
        if (p[1].revents) {
            if ((got = read(up, b, sizeof b)) <= 0 || hlt_send_all(fd, b, (size_t)got) < 0) break;
        }
        if (!p[0].revents) continue;
        if ((got = read(fd, in + have, sizeof in - have)) <= 0) break;
        have += (size_t)got;
        for (;;) {
            const char *name = NULL;
            size_t namelen = 0, len = resp_command(in, have, &name, &namelen);
            if (!len) break;
            if ((namelen == 4 && !strncasecmp(name, "INFO", 4)) ||
                (x->on_time && namelen == 4 && !strncasecmp(name, "TIME", 4)))
                goto out;
            if (hlt_send_all(up, in, len) < 0) goto out;
            memmove(in, in + len, have - len);
            have -= len;
        }
    }
out:
    close(up);
    close(fd);
}

static pid_t closer_start(hlt_redis *r, closer *x, int on_time, char *url, size_t cap)
{
    int port, ls = hlt_listen(16, &port, NULL, NULL, 0);
    cr_assert(ls >= 0, "listen");
    x->up_port = r->port;
    x->on_time = on_time;
    snprintf(url, cap, "redis://127.0.0.1:%d", port);
    return hlt_serve_fork(ls, 120, close_on_info, x);
}

/* A lock through it works: the first connect is closed on INFO, said once as an ERROR, and
 * connects again at once without it; the version is then unknown (as an INFO refused). */
static void assert_goes_without_info(hlt_redis *r, const char *url, int on_time)
{
    hilock_client *c = hlt_client(url);
    hlt_rec *x = hlt_rec_new();
    const hlt_rec_ev *e;
    hilock *l;
    hilock_stats s;
    hilock_set_observer(c, hlt_rec_observer, x);
    cr_assert_eq(hilock_acquire(c, "obs:proxy", 30000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_exists(r, "obs:proxy"), 1, "granted on the server behind");
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_exists(r, "obs:proxy"), 0);
    hilock_free(l);
    cr_assert_eq(hlt_rec_count(x, HILOCK_EVENT_ERROR), 1 + on_time, "said once (per command)");
    cr_assert_not_null(e = hlt_rec_find(x, HILOCK_EVENT_ERROR, 0));
    cr_assert(strstr(e->message, "closed the connection on INFO"), "%s", e->message);
    if (on_time) cr_assert(strstr(hlt_rec_find(x, HILOCK_EVENT_ERROR, 1)->message, "on TIME"));
    /* a new connection goes without it, and says nothing again (the proxy closes ours when
     * its own to the server goes; idle that long, it is found closed before use) */
    hlt_redis_kill(r);
    cr_assert_eq(hlt_redis_restart(r), 0);
    hlt_sleep_ms(400);
    cr_assert_eq(hilock_acquire(c, "obs:proxy", 30000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    cr_assert_eq(hlt_rec_count(x, HILOCK_EVENT_ERROR), 1 + on_time, "nothing new to say");
    hilock_client_stats(c, &s);
    cr_assert_geq(s.connects, 2, "every connect after the first was opened");
    hilock_client_free(c);
}

Test(observe, a_proxy_that_closes_on_info_is_used_without_it_and_said_once)
{
    hlt_redis *r = hlt_redis_start(NULL);
    closer x;
    char url[64];
    pid_t pid = closer_start(r, &x, 0, url, sizeof url);
    assert_goes_without_info(r, url, 0);
    hlt_serve_stop(pid);
    hlt_redis_stop(r);
}

Test(observe, a_proxy_that_closes_on_info_and_time_is_used_without_both)
{
    hlt_redis *r = hlt_redis_start(NULL);
    closer x;
    char url[64];
    pid_t pid = closer_start(r, &x, 1, url, sizeof url);
    assert_goes_without_info(r, url, 1);
    hlt_serve_stop(pid);
    hlt_redis_stop(r);
}

/* A server that refuses INFO with an error reply (rename-command INFO "") was always fine:
 * the version unknown, nothing closed, nothing said. */
Test(observe, a_server_that_refuses_info_with_an_error_is_used_without_it)
{
    hlt_redis *r = hlt_redis_start("--rename-command INFO \"\"");
    hilock_client *c = hlt_client(r->url);
    hlt_rec *x = hlt_rec_new();
    hilock *l;
    hilock_set_observer(c, hlt_rec_observer, x);
    cr_assert_eq(hilock_acquire(c, "obs:noinfo", 30000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_exists(r, "obs:noinfo"), 1);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_exists(r, "obs:noinfo"), 0);
    hilock_free(l);
    cr_assert_eq(hlt_rec_count(x, HILOCK_EVENT_ERROR), 0);
    cr_assert_eq(hlt_rec_count(x, HILOCK_EVENT_CONNECT), 1);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(observe, a_tls_connection_reports_its_handshake_and_duration)
{
    HLT_NEEDS(60000, "no TLS before Redis 6.0");
    hlt_pki *pki = hlt_pki_make();
    hlt_redis *r;
    hilock_options o;
    hilock_client *c = NULL;
    hilock *l;
    hlt_rec *x = hlt_rec_new();
    const hlt_rec_ev *e;
    const char *url;
    cr_assert_not_null(pki);
    r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 0, NULL);
    cr_assert_not_null(r);
    url = r->url;
    hilock_options_init(&o);
    o.servers = &url;
    o.nservers = 1;
    o.tls_ca_file = pki->ca;
    cr_assert_eq(hilock_client_new(&o, &c), HILOCK_OK, "%s", hilock_last_config_error());
    hilock_set_observer(c, hlt_rec_observer, x);
    cr_assert_eq(hilock_acquire(c, "obs:k", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_not_null(e = hlt_rec_find(x, HILOCK_EVENT_TLS_HANDSHAKE, 0));
    cr_assert_eq(e->e.status, HILOCK_OK);
    cr_assert_gt(e->e.duration_us, 0);
    cr_assert_not_null(e->e.node);
    cr_assert_not_null(hlt_rec_find(x, HILOCK_EVENT_CONNECT, 0));
    cr_assert_leq(hlt_rec_find(x, HILOCK_EVENT_TLS_HANDSHAKE, 0)->e.at_us, hlt_rec_find(x, HILOCK_EVENT_CONNECT, 0)->e.at_us);
    hilock_release(l);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
    hlt_pki_free(pki);
}

/* ---- on an event loop ---- */

typedef struct loop_run { hilock *l; int done; hilock_status st; } loop_run;

static void on_done(hilock_status st, hilock *l, void *arg)
{
    loop_run *r = arg;
    r->st = st;
    if (l) r->l = l;
    r->done++;
}

static void on_stop(uv_timer_t *t) { *(int *)t->data = 1; }

/* Run loop until *flag reaches want, or ms have passed. */
static void run_for(uv_loop_t *loop, const int *flag, int want, long ms)
{
    uv_timer_t t;
    int fired = 0;
    uv_timer_init(loop, &t);
    t.data = &fired;
    uv_timer_start(&t, on_stop, (uint64_t)ms, 0);
    while ((!flag || *flag < want) && !fired) uv_run(loop, UV_RUN_ONCE);
    uv_timer_stop(&t);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
}

Test(observe, the_loops_calls_and_renewals_are_reported_on_the_loops_thread)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_client(r->url);
    uv_loop_t loop;
    loop_run run = {0};
    hlt_rec *x = hlt_rec_new();
    hilock_stats s;
    uv_loop_init(&loop);
    cr_assert_eq(hilock_libuv_attach(c, &loop), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_set_observer(c, hlt_rec_observer, x), HILOCK_OK);
    /* (1 s, renewed every 333 ms: with 300 ms a loaded machine that held up this thread, which
     * runs the loop and so the renewals, 200 ms let the lock lapse) */
    cr_assert_eq(hilock_acquire_async(c, "obs:k", 1000, 0, on_done, &run), HILOCK_OK);
    run_for(&loop, &run.done, 1, 5000);
    cr_assert_eq(run.st, HILOCK_OK);
    cr_assert_not_null(hlt_rec_find(x, HILOCK_EVENT_ACQUIRE_START, 0));
    cr_assert_not_null(hlt_rec_find(x, HILOCK_EVENT_ACQUIRE_GRANTED, 0));
    cr_assert_not_null(hlt_rec_find(x, HILOCK_EVENT_CONNECT, 0));
    cr_assert_eq(hilock_keepalive(run.l, NULL, NULL), HILOCK_OK, "%s", hilock_client_errmsg(c));
    /* the loop runs until two renewals came (was: a fixed 600 ms, six renewals' time) */
    for (long long end = hlt_now_ms() + 5000; hlt_rec_count(x, HILOCK_EVENT_RENEWAL) < 2 && hlt_now_ms() < end;)
        run_for(&loop, NULL, 0, 20);
    cr_assert_geq(hlt_rec_count(x, HILOCK_EVENT_RENEWAL), 2);
    cr_assert_eq(hlt_rec_find(x, HILOCK_EVENT_RENEWAL, 0)->e.status, HILOCK_OK);
    cr_assert_eq(hlt_rec_count(x, HILOCK_EVENT_EXTEND), 0, "renewals are not extends");
    cr_assert_eq(hilock_release(run.l), HILOCK_EINVAL, "a blocking call on a loop's client");
    cr_assert_eq(hilock_check(run.l), HILOCK_EINVAL);
    cr_assert_eq(hlt_rec_count(x, HILOCK_EVENT_RELEASE) + hlt_rec_count(x, HILOCK_EVENT_EXTEND), 0,
                 "refused calls are not results");
    cr_assert_eq(hilock_release_async(run.l, on_done, &run), HILOCK_OK);
    run_for(&loop, &run.done, 2, 5000);
    cr_assert_eq(run.st, HILOCK_OK);
    cr_assert_eq(hlt_rec_find(x, HILOCK_EVENT_RELEASE, 0)->e.status, HILOCK_OK);
    cr_assert_eq(hilock_client_stats(c, &s), HILOCK_OK);
    cr_assert_eq(s.acquire_ok, 1);
    cr_assert_eq(s.release_ok, 1);
    cr_assert_eq(s.release_error + s.extend_failed, 0, "the refused calls are not counted");
    cr_assert_eq(s.release_ok, 1);
    cr_assert_geq(s.renewal_ok, 2);
    cr_assert_geq(s.round_trips, 4);
    cr_assert_eq(s.round_trip.count, s.round_trips);
    hilock_free(run.l);
    hilock_client_free(c);
    uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_eq(uv_loop_close(&loop), 0);
    hlt_redis_stop(r);
}

Test(observe, a_refused_connect_on_the_loop_is_a_failed_connect_event)
{
    char url[128], node[64];
    int port = hlt_dead_port();
    hilock_client *c;
    uv_loop_t loop;
    loop_run run = {0};
    hlt_rec *x = hlt_rec_new();
    hilock_stats s;
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    snprintf(node, sizeof node, "127.0.0.1:%d", port);
    c = hlt_client(url);
    uv_loop_init(&loop);
    cr_assert_eq(hilock_libuv_attach(c, &loop), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_set_observer(c, hlt_rec_observer, x), HILOCK_OK);
    cr_assert_eq(hilock_acquire_async(c, "obs:k", 10000, 0, on_done, &run), HILOCK_OK);
    run_for(&loop, &run.done, 1, 5000);
    cr_assert_eq(run.st, HILOCK_EIO, "%s", hilock_strerror(run.st));
    assert_failed_connect(x, HILOCK_EIO, node, 0);
    cr_assert_eq(hilock_client_stats(c, &s), HILOCK_OK);
    cr_assert_eq(s.connects, 0);
    hilock_client_free(c);
    uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_eq(uv_loop_close(&loop), 0);
}

/* On a loop too: the first connect closed on INFO connects again at once without it. */
Test(observe, a_proxy_that_closes_on_info_is_used_without_it_on_the_loop)
{
    hlt_redis *r = hlt_redis_start(NULL);
    closer cl;
    char url[64];
    pid_t pid = closer_start(r, &cl, 0, url, sizeof url);
    hilock_client *c = hlt_client(url);
    uv_loop_t loop;
    loop_run run = {0};
    hlt_rec *x = hlt_rec_new();
    uv_loop_init(&loop);
    cr_assert_eq(hilock_libuv_attach(c, &loop), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_set_observer(c, hlt_rec_observer, x), HILOCK_OK);
    cr_assert_eq(hilock_acquire_async(c, "obs:proxy", 30000, 0, on_done, &run), HILOCK_OK);
    run_for(&loop, &run.done, 1, 5000);
    cr_assert_eq(run.st, HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_exists(r, "obs:proxy"), 1);
    cr_assert_eq(hilock_release_async(run.l, on_done, &run), HILOCK_OK);
    run_for(&loop, &run.done, 2, 5000);
    cr_assert_eq(run.st, HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_exists(r, "obs:proxy"), 0);
    cr_assert_eq(hlt_rec_count(x, HILOCK_EVENT_ERROR), 1);
    cr_assert(strstr(hlt_rec_find(x, HILOCK_EVENT_ERROR, 0)->message, "closed the connection on INFO"));
    cr_assert_eq(hlt_rec_find(x, HILOCK_EVENT_CONNECT, 0)->e.status, HILOCK_OK);
    hilock_free(run.l);
    hilock_client_free(c);
    uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_eq(uv_loop_close(&loop), 0);
    hlt_serve_stop(pid);
    hlt_redis_stop(r);
}

/* ---- Redlock waits: blocking BLPOPs, abandoned masters ---- */

/* The holder releases 600 ms after the waiter is seen blocked on every master (release_when_blocked):
 * its BLPOPs last that long at least. */
#define HOLD_MS 600

/* No round trip over 262 ms (buckets 19 and up): loopback answers take well under that; a
 * BLPOP counted as one would take the holder's HOLD_MS. */
static uint64_t long_round_trips(const hilock_stats *s)
{
    uint64_t n = 0;
    for (int i = 19; i < HILOCK_HIST_BUCKETS; i++) n += s->round_trip.bucket[i];
    return n;
}

Test(observe, a_redlock_wait_woken_by_one_master_counts_no_error_and_no_blocking_round_trip)
{
    hlt_redis *r[3];
    const char *urls[3];
    hilock_client *a, *b;
    hilock *la, *lb;
    hlt_rec *x = hlt_rec_new();
    hilock_stats s;
    pthread_t th;
    releaser rel = { r, 3, NULL, HOLD_MS, 0, 0, HILOCK_OK };
    start3(r, urls);
    hilock_options o = hlt_options(urls, 3);
    a = hlt_client_new(&o);
    o.retry_delay_ms = 3000;   /* the waiter's pause (a BLPOP) outlasts the holder: the release wakes it */
    b = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(a, "obs:k", 30000, 0, &la), HILOCK_OK);
    hilock_set_observer(b, hlt_rec_observer, x);
    rel.l = la;
    pthread_create(&th, NULL, release_when_blocked, &rel);
    cr_assert_eq(hilock_acquire(b, "obs:k", 10000, 15000, &lb), HILOCK_OK, "%s", hilock_client_errmsg(b));
    pthread_join(th, NULL);
    cr_assert_eq(rel.blocked, 3, "the waiter was seen blocked on %d of 3 masters", rel.blocked);
    cr_assert_eq(rel.st, HILOCK_OK, "the holder's release: %s", hilock_strerror(rel.st));
    cr_assert_eq(hlt_rec_find(x, HILOCK_EVENT_ACQUIRE_GRANTED, 0)->e.woken, 1);
    cr_assert_eq(hlt_rec_count(x, HILOCK_EVENT_ERROR), 0, "the abandoned masters are no errors");
    cr_assert_eq(hilock_client_stats(b, &s), HILOCK_OK);
    cr_assert_eq(s.errors, 0);
    cr_assert_eq(long_round_trips(&s), 0, "a BLPOP counted as a round trip");
    cr_assert_eq(s.round_trip.count, s.round_trips);
    cr_assert_eq(hilock_release(lb), HILOCK_OK);
    hilock_free(la);
    hilock_free(lb);
    hilock_client_free(a);
    hilock_client_free(b);
    stop3(r);
}

Test(observe, a_redlock_wait_on_the_loop_counts_no_error_no_blocking_round_trip_nor_its_connections)
{
    hlt_redis *r[3];
    const char *urls[3];
    hilock_client *a, *b;
    hilock *la;
    hlt_rec *x = hlt_rec_new();
    hilock_stats s;
    uv_loop_t loop;
    loop_run run = {0};
    pthread_t th;
    releaser rel = { r, 3, NULL, HOLD_MS, 0, 0, HILOCK_OK };
    start3(r, urls);
    hilock_options o = hlt_options(urls, 3);
    a = hlt_client_new(&o);
    o.retry_delay_ms = 3000;   /* the waiter's pause (a BLPOP) outlasts the holder: the release wakes it */
    b = hlt_client_new(&o);
    uv_loop_init(&loop);
    cr_assert_eq(hilock_libuv_attach(b, &loop), HILOCK_OK, "%s", hilock_client_errmsg(b));
    cr_assert_eq(hilock_acquire(a, "obs:k", 30000, 0, &la), HILOCK_OK);
    hilock_set_observer(b, hlt_rec_observer, x);
    rel.l = la;
    pthread_create(&th, NULL, release_when_blocked, &rel);
    cr_assert_eq(hilock_acquire_async(b, "obs:k", 10000, 15000, on_done, &run), HILOCK_OK);
    run_for(&loop, &run.done, 1, 20000);
    pthread_join(th, NULL);
    cr_assert_eq(rel.blocked, 3, "the waiter was seen blocked on %d of 3 masters", rel.blocked);
    cr_assert_eq(rel.st, HILOCK_OK, "the holder's release: %s", hilock_strerror(rel.st));
    cr_assert_eq(run.st, HILOCK_OK, "%s", hilock_client_errmsg(b));
    cr_assert_eq(hlt_rec_count(x, HILOCK_EVENT_ERROR), 0, "the abandoned masters are no errors");
    for (int i = 0; hlt_rec_find(x, HILOCK_EVENT_CONNECT, i); i++)
        cr_assert_eq(hlt_rec_find(x, HILOCK_EVENT_CONNECT, i)->e.reconnect, 0, "connect %d", i);
    cr_assert_eq(hilock_client_stats(b, &s), HILOCK_OK);
    cr_assert_eq(s.errors, 0);
    cr_assert_eq(long_round_trips(&s), 0, "a BLPOP counted as a round trip");
    cr_assert_eq(s.connects, 3, "one per master, the waits' own not counted");
    cr_assert_eq(s.reconnects, 0);
    cr_assert_eq(hilock_release_async(run.l, on_done, &run), HILOCK_OK);
    run_for(&loop, &run.done, 2, 5000);
    hilock_free(run.l);
    hilock_free(la);
    hilock_client_free(b);
    hilock_client_free(a);
    uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_eq(uv_loop_close(&loop), 0);
    stop3(r);
}

/* ---- the observer may not call into hilock ---- */

static void reenter(const hilock_event *e, void *arg)
{
    hlt_rec *r = arg;
    hilock *l = NULL;
    if (e->kind != HILOCK_EVENT_ACQUIRE_START) return;
    r->reentry = hilock_acquire(r->c, "obs:other", 10000, 0, &l);
    snprintf(r->reentry_msg, sizeof r->reentry_msg, "%s", hilock_client_errmsg(r->c));
    if (hilock_set_observer(r->c, NULL, NULL) != HILOCK_EINVAL) r->reentry = HILOCK_OK;
}

Test(observe, a_call_from_inside_the_observer_is_refused_with_einval_and_sends_nothing)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_client(r->url);
    hilock *l;
    hlt_rec *x = hlt_rec_new();
    x->c = c;
    hilock_set_observer(c, reenter, x);
    cr_assert_eq(hilock_acquire(c, "obs:k", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(x->reentry, HILOCK_EINVAL);
    cr_assert_str_eq(x->reentry_msg, "hilock called from inside an observer: an observer may only record the event");
    cr_assert_eq(hlt_exists(r, "obs:other"), 0, "nothing sent");
    cr_assert_eq(hlt_exists(r, "obs:k"), 1, "the outer call went on");
    /* the observer is still set (its removal was refused), and calls work again after it */
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_str_neq(hilock_client_errmsg(c), "hilock called from inside an observer: an observer may only record the event");
    cr_assert_eq(hilock_set_observer(c, NULL, NULL), HILOCK_OK);
    cr_assert_eq(hilock_set_observer(NULL, hlt_rec_observer, x), HILOCK_EINVAL);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* ---- counters ---- */

Test(observe, the_counters_match_a_known_sequence_of_calls)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_client(r->url), *other = hlt_client(r->url);
    hilock *l, *lo, *lx;
    hilock_stats s;
    uint64_t sum = 0;
    cr_assert_eq(hilock_acquire(other, "obs:busy", 10000, 0, &lo), HILOCK_OK);
    cr_assert_eq(hilock_acquire(c, "obs:a", 10000, 0, &l), HILOCK_OK);      /* ok 1 */
    cr_assert_eq(hilock_acquire(c, "obs:busy", 10000, 0, &lx), HILOCK_BUSY); /* busy 1 */
    freeReplyObject(hlt_cmd(r, "HSET obs:h f v"));
    cr_assert_neq(hilock_acquire(c, "obs:h", 10000, 0, &lx), HILOCK_OK);      /* error 1 */
    cr_assert_eq(hilock_extend(l, 20000), HILOCK_OK);                         /* extend ok */
    cr_assert_eq(hilock_check(l), HILOCK_OK);                                 /* extend ok */
    cr_assert_eq(hilock_release(l), HILOCK_OK);                               /* release ok */
    cr_assert_eq(hilock_release(l), HILOCK_NOT_HELD);                         /* not held: no loss */
    hilock_free(l);
    cr_assert_eq(hilock_acquire(c, "obs:a", 10000, 0, &l), HILOCK_OK);      /* ok 2 */
    freeReplyObject(hlt_cmd(r, "DEL obs:a"));
    cr_assert_eq(hilock_extend(l, 10000), HILOCK_NOT_HELD);                  /* failed, lost 1 */
    cr_assert_eq(hilock_client_stats(c, &s), HILOCK_OK);
    cr_assert_eq(s.acquire_ok, 2);
    cr_assert_eq(s.acquire_busy, 1);
    cr_assert_eq(s.acquire_error, 1);
    cr_assert_eq(s.release_ok, 1);
    cr_assert_eq(s.release_not_held, 1);
    cr_assert_eq(s.release_lost + s.release_error, 0);
    cr_assert_eq(s.extend_ok, 2);
    cr_assert_eq(s.extend_failed, 1);
    cr_assert_eq(s.lost, 1);
    cr_assert_eq(s.renewal_ok + s.renewal_failed, 0);
    cr_assert_eq(s.connects, 1);
    cr_assert_eq(s.reconnects + s.failovers + s.redirects + s.errors, 0);
    cr_assert_eq(s.acquire_wait.count, 2);
    cr_assert_geq(s.round_trips, 7, "one per call sent, at least (%llu)", (unsigned long long)s.round_trips);
    cr_assert_eq(s.round_trip.count, s.round_trips);
    for (int i = 0; i < HILOCK_HIST_BUCKETS; i++) sum += s.round_trip.bucket[i];
    cr_assert_eq(sum, s.round_trips);
    cr_assert_eq(hilock_client_stats(NULL, &s), HILOCK_EINVAL);
    cr_assert_eq(hilock_client_stats(c, NULL), HILOCK_EINVAL);
    hilock_free(l);
    hilock_free(lo);
    hilock_client_free(c);
    hilock_client_free(other);
    hlt_redis_stop(r);
}

Test(observe, a_smaller_stats_struct_gets_only_its_prefix_written)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_client(r->url);
    hilock *l;
    hilock_stats s;
    cr_assert_eq(hilock_acquire(c, "obs:a", 10000, 0, &l), HILOCK_OK);
    memset(&s, 0xab, sizeof s);
    cr_assert_eq(hilock_client_stats_sized(c, &s, 2 * sizeof(uint64_t)), HILOCK_OK);
    cr_assert_eq(s.acquire_ok, 1);
    cr_assert_eq(s.acquire_busy, 0);
    cr_assert_eq(s.acquire_error, 0xababababababababULL, "past size: untouched");
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* ---- histograms ---- */

Test(observe, values_on_each_bucket_edge_land_in_the_documented_bucket)
{
    hilock_histogram h;
    memset(&h, 0, sizeof h);
    hilock_histogram_add(&h, -5);   /* counts as 0 */
    hilock_histogram_add(&h, 0);
    hilock_histogram_add(&h, 1);
    cr_assert_eq(h.bucket[0], 3);
    for (int i = 1; i <= 30; i++) {
        memset(&h, 0, sizeof h);
        hilock_histogram_add(&h, (int64_t)1 << i);         /* the upper edge: in bucket i */
        hilock_histogram_add(&h, ((int64_t)1 << i) + 1);   /* just past it: bucket i + 1 */
        hilock_histogram_add(&h, ((int64_t)1 << (i - 1)) + 1);   /* just past the lower: i */
        cr_assert_eq(h.bucket[i], 2, "bucket %d", i);
        cr_assert_eq(h.bucket[i + 1], 1, "bucket %d", i + 1);
    }
    memset(&h, 0, sizeof h);
    hilock_histogram_add(&h, INT64_MAX);
    cr_assert_eq(h.bucket[31], 1, "the overflow");
    cr_assert_eq(h.count, 1);
    cr_assert_eq(h.sum_us, (uint64_t)INT64_MAX);
}

Test(observe, merge_adds_every_counter_and_bucket)
{
    hilock_stats a, b;
    uint64_t *pa = (uint64_t *)&a, *pb = (uint64_t *)&b;
    size_t n = sizeof a / sizeof(uint64_t);   /* (all fields are uint64_t, the histograms too) */
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    for (size_t i = 0; i < n; i++) {
        pa[i] = i + 1;
        pb[i] = 1000 * (i + 1);
    }
    hilock_stats_merge(&a, &b);
    for (size_t i = 0; i < n; i++) cr_assert_eq(pa[i], 1001 * (i + 1), "word %zu", i);
    cr_assert_eq(pb[0], 1000, "from is left alone");
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    hilock_histogram_add(&a.acquire_wait, 1000);
    hilock_histogram_add(&b.acquire_wait, 1000);
    hilock_histogram_add(&b.round_trip, 3);
    hilock_stats_merge(&a, &b);
    cr_assert_eq(a.acquire_wait.count, 2);
    cr_assert_eq(a.acquire_wait.sum_us, 2000);
    cr_assert_eq(a.acquire_wait.bucket[10], 2);
    cr_assert_eq(a.round_trip.bucket[2], 1);
    hilock_stats_merge(NULL, &b);
    hilock_stats_merge(&a, NULL);
}

Test(observe, a_larger_stats_struct_gets_its_unknown_tail_zeroed)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_client(r->url);
    hilock *l;
    struct { hilock_stats s; uint64_t newer[4]; } big;
    cr_assert_eq(hilock_acquire(c, "obs:a", 10000, 0, &l), HILOCK_OK);
    memset(&big, 0xab, sizeof big);
    cr_assert_eq(hilock_client_stats_sized(c, &big.s, sizeof big), HILOCK_OK);
    cr_assert_eq(big.s.acquire_ok, 1);
    for (int i = 0; i < 4; i++) cr_assert_eq(big.newer[i], 0, "a field this library lacks: 0");
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* Acquire key with c (mode: 0 lock, 1 a permit of 2, 2 shared, 3 exclusive, 4 legacy), then
 * release it: hilock_kind says want, and so does every event of the lock's calls. */
static void assert_kind(hilock_client *c, hlt_rec *x, int mode, const char *key, const char *want)
{
    hilock *l = NULL;
    hilock_status st;
    int n0 = x->n;
    st = mode == 1 ? hilock_sem_acquire(c, key, 2, 10000, 0, &l)
       : mode == 2 ? hilock_rw_acquire(c, key, HILOCK_SHARED, 10000, 0, &l)
       : mode == 3 ? hilock_rw_acquire(c, key, HILOCK_EXCLUSIVE, 10000, 0, &l)
       : mode == 4 ? hilock_legacy_acquire(c, key, 10000, 0, &l)
       : hilock_acquire(c, key, 10000, 0, &l);
    cr_assert_eq(st, HILOCK_OK, "%s: %s", want, hilock_client_errmsg(c));
    cr_assert_str_eq(hilock_kind(l), want);
    cr_assert_eq(hilock_extend(l, 10000), HILOCK_OK, "%s: %s", want, hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s: %s", want, hilock_client_errmsg(c));
    cr_assert_str_eq(hilock_kind(l), want, "after the release too");
    hilock_free(l);
    int locks = 0;
    for (int i = n0; i < x->n; i++) {
        const hilock_event *e = &x->ev[i].e;
        if (e->kind == HILOCK_EVENT_CONNECT || e->kind == HILOCK_EVENT_ERROR) {
            cr_assert_null(e->lock_kind, "%s: %s has no lock", want, hilock_event_name(e->kind));
            continue;
        }
        cr_assert_not_null(e->lock_kind, "%s: %s", want, hilock_event_name(e->kind));
        cr_assert_str_eq(e->lock_kind, want, "%s", hilock_event_name(e->kind));
        locks++;
    }
    cr_assert_eq(locks, 4, "%s: start, granted, extend, release (%d)", want, locks);
}

Test(observe, each_kind_of_grant_says_its_kind_and_so_do_its_events)
{
    hlt_redis *r;
    HLT_NEEDS(30200, "semaphores and shared/exclusive locks need Redis 3.2");
    r = hlt_redis_start(NULL);
    hlt_rec *x = hlt_rec_new();
    const char *url = r->url;
    hilock_options o = hlt_options(&url, 1);
    hilock_client *c = hlt_client(r->url), *fair, *bridge, *unfenced;
    cr_assert_null(hilock_kind(NULL));
    hilock_set_observer(c, hlt_rec_observer, x);
    assert_kind(c, x, 0, "k:lock", "lock");
    assert_kind(c, x, 1, "k:sem", "permit");
    assert_kind(c, x, 2, "k:rw", "shared");
    assert_kind(c, x, 3, "k:rw", "exclusive");
    assert_kind(c, x, 4, "k:legacy", "legacy");
    o.fair = 1;
    fair = hlt_client_new(&o);
    hilock_set_observer(fair, hlt_rec_observer, x);
    assert_kind(fair, x, 0, "k:fair", "fair");
    o.fair = 0;
    o.bridge = 1;
    bridge = hlt_client_new(&o);
    hilock_set_observer(bridge, hlt_rec_observer, x);
    assert_kind(bridge, x, 0, "k:bridge", "bridge");
    o.bridge = 0;
    o.fencing = 0;
    unfenced = hlt_client_new(&o);
    hilock_set_observer(unfenced, hlt_rec_observer, x);
    assert_kind(unfenced, x, 0, "k:unfenced", "lock");
    cr_assert_eq(hlt_exists(r, "k:lock") + hlt_exists(r, "k:sem") + hlt_exists(r, "k:rw") +
                 hlt_exists(r, "k:legacy") + hlt_exists(r, "k:fair") + hlt_exists(r, "k:bridge") +
                 hlt_exists(r, "k:unfenced"), 0, "all released");
    hilock_client_free(c);
    hilock_client_free(fair);
    hilock_client_free(bridge);
    hilock_client_free(unfenced);
    hlt_redis_stop(r);
}

Test(observe, event_names)
{
    cr_assert_str_eq(hilock_event_name(HILOCK_EVENT_ACQUIRE_START), "acquire_start");
    cr_assert_str_eq(hilock_event_name(HILOCK_EVENT_TLS_HANDSHAKE), "tls_handshake");
    cr_assert_str_eq(hilock_event_name(HILOCK_EVENT_ERROR), "error");
    cr_assert_str_eq(hilock_event_name((hilock_event_kind)0), "unknown");
    cr_assert_str_eq(hilock_event_name((hilock_event_kind)99), "unknown");
}

/* ---- Prometheus ---- */

/* The expected text for stats with acquire_ok = 2, busy = 1, round_trips = 5 and one wait of
 * 3 us, labels app="x": built line by line (the histograms' 32 buckets each). */
static void expected_text(char *out, size_t cap)
{
    static const char *const head =
        "# HELP hilock_acquires_total Acquires ended, by outcome.\n"
        "# TYPE hilock_acquires_total counter\n"
        "hilock_acquires_total{app=\"x\",outcome=\"ok\"} 2\n"
        "hilock_acquires_total{app=\"x\",outcome=\"busy\"} 1\n"
        "hilock_acquires_total{app=\"x\",outcome=\"error\"} 0\n"
        "# HELP hilock_releases_total Releases, by outcome.\n"
        "# TYPE hilock_releases_total counter\n"
        "hilock_releases_total{app=\"x\",outcome=\"ok\"} 0\n"
        "hilock_releases_total{app=\"x\",outcome=\"not_held\"} 0\n"
        "hilock_releases_total{app=\"x\",outcome=\"lost\"} 0\n"
        "hilock_releases_total{app=\"x\",outcome=\"error\"} 0\n"
        "# HELP hilock_extends_total Extends and checks, by outcome.\n"
        "# TYPE hilock_extends_total counter\n"
        "hilock_extends_total{app=\"x\",outcome=\"ok\"} 0\n"
        "hilock_extends_total{app=\"x\",outcome=\"failed\"} 0\n"
        "# HELP hilock_renewals_total Keepalive renewals, by outcome.\n"
        "# TYPE hilock_renewals_total counter\n"
        "hilock_renewals_total{app=\"x\",outcome=\"ok\"} 0\n"
        "hilock_renewals_total{app=\"x\",outcome=\"failed\"} 0\n"
        "# HELP hilock_lost_total Locks found no longer held.\n"
        "# TYPE hilock_lost_total counter\n"
        "hilock_lost_total{app=\"x\"} 0\n"
        "# HELP hilock_round_trips_total Pipelines answered by a node.\n"
        "# TYPE hilock_round_trips_total counter\n"
        "hilock_round_trips_total{app=\"x\"} 5\n";
    static const char *const names[][2] = {
        {"connects_total", "Connections opened."},
        {"reconnects_total", "Connections opened to a node that had one before."},
        {"failovers_total", "Failovers detected."},
        {"redirects_total", "Cluster MOVED, ASK and TRYAGAIN answers."},
        {"errors_total", "Node errors."},
    };
    size_t at = (size_t)snprintf(out, cap, "%s", head);
    for (size_t i = 0; i < 5; i++)
        at += (size_t)snprintf(out + at, cap - at, "# HELP hilock_%s %s\n# TYPE hilock_%s counter\n"
                               "hilock_%s{app=\"x\"} 0\n", names[i][0], names[i][1], names[i][0], names[i][0]);
    for (int h = 0; h < 2; h++) {
        const char *name = h ? "round_trip_seconds" : "acquire_wait_seconds";
        at += (size_t)snprintf(out + at, cap - at, "# HELP hilock_%s %s\n# TYPE hilock_%s histogram\n", name,
                               h ? "Round trip time to a node." : "Time from acquire start to grant.", name);
        for (int i = 0; i < 32; i++) {
            char le[32];
            if (i == 31) snprintf(le, sizeof le, "+Inf");
            else {
                /* 2^i us in seconds, trailing zeros trimmed */
                long long us = 1LL << i;
                size_t n;
                snprintf(le, sizeof le, "%lld.%06lld", us / 1000000, us % 1000000);
                n = strlen(le);
                while (le[n - 1] == '0') le[--n] = 0;
                if (le[n - 1] == '.') le[--n] = 0;
            }
            at += (size_t)snprintf(out + at, cap - at, "hilock_%s_bucket{app=\"x\",le=\"%s\"} %d\n", name, le,
                                   !h && i >= 2 ? 1 : 0);
        }
        at += (size_t)snprintf(out + at, cap - at, "hilock_%s_sum{app=\"x\"} %s\nhilock_%s_count{app=\"x\"} %d\n",
                               name, h ? "0" : "0.000003", name, h ? 0 : 1);
    }
}

static void known_stats(hilock_stats *s)
{
    memset(s, 0, sizeof *s);
    s->acquire_ok = 2;
    s->acquire_busy = 1;
    s->round_trips = 5;
    hilock_histogram_add(&s->acquire_wait, 3);
}

Test(observe, prometheus_text_is_exact_for_known_stats_and_sized_like_snprintf)
{
    hilock_stats s;
    static char want[16384], got[16384];
    char small[16];
    int n;
    known_stats(&s);
    expected_text(want, sizeof want);
    n = hilock_stats_prometheus(&s, got, sizeof got, "app=\"x\"");
    cr_assert_str_eq(got, want);
    cr_assert_eq(n, (int)strlen(want));
    cr_assert(strstr(got, "hilock_acquire_wait_seconds_bucket{app=\"x\",le=\"0.000004\"} 1\n"));
    cr_assert(strstr(got, "le=\"1073.741824\""));
    /* short: cut, NUL-terminated, and the length it needs */
    cr_assert_eq(hilock_stats_prometheus(&s, small, sizeof small, "app=\"x\""), n);
    cr_assert_eq(strlen(small), sizeof small - 1);
    cr_assert_eq(hilock_stats_prometheus(&s, NULL, 0, "app=\"x\""), n);
    cr_assert_eq(hilock_stats_prometheus(NULL, got, sizeof got, NULL), -1);
    /* no labels: no braces on unlabelled samples */
    hilock_stats_prometheus(&s, got, sizeof got, NULL);
    cr_assert(strstr(got, "\nhilock_lost_total 0\n"), "%s", got);
    cr_assert(strstr(got, "hilock_acquires_total{outcome=\"ok\"} 2\n"));
    cr_assert(strstr(got, "hilock_acquire_wait_seconds_bucket{le=\"+Inf\"} 1\n"));
    cr_assert(strstr(got, "hilock_acquire_wait_seconds_count 1\n"));
}

Test(observe, prometheus_refuses_a_malformed_label_set_and_writes_nothing)
{
    hilock_stats s;
    static char got[16384];
    /* each would make a scrape fail: no quotes (issue 36's app=newbie), a bad name, a
     * stray or missing separator, an unknown escape, a raw newline, an unclosed value, a
     * label twice, the library's own names, bytes that are not UTF-8 */
    static const char *const bad[] = {
        "app=newbie", "app", "app=", "=\"x\"", "1app=\"x\"", "a-b=\"x\"", "app =\"x\"",
        "app=\"x\",", ",app=\"x\"", "app=\"x\" ", "app=\"x\",,b=\"y\"", "app=\"x\"b=\"y\"",
        "app=\"x\", b=\"y\"", "app=\"a\\tb\"", "app=\"a\nb\"", "app=\"x", "app=\"x\\\"",
        "app=\"x\",app=\"y\"", "outcome=\"x\"", "app=\"x\",le=\"1\"", "app=\"\xff\"",
        "app=\"\xc0\xaf\"", "app=\"\xed\xa0\x80\"", "app=\"\xe2\x82\"", "{app=\"x\"}",
    };
    known_stats(&s);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        memset(got, 'z', sizeof got);
        cr_assert_eq(hilock_stats_prometheus(&s, got, sizeof got, bad[i]), -1, "taken: %s", bad[i]);
        cr_assert_eq(got[0], 0, "%s: wrote %.40s", bad[i], got);
        cr_assert_eq(got[1], 'z', "%s: wrote past the NUL", bad[i]);
        cr_assert_eq(hilock_stats_prometheus(&s, NULL, 0, bad[i]), -1, "sized: %s", bad[i]);
    }
    /* well formed: taken as given, first in the braces */
    static const char *const good[] = {
        "app=\"x\"", "_a=\"\",B9=\"\"", "app=\"a\\\\b\\\"c\\nd\"", "app=\"caf\xc3\xa9 \xf0\x9f\x94\x92\"",
        "outcomes=\"x\",lee=\"y\"", "app=\"x\",ap=\"y\"",
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        char want[256];
        int n = hilock_stats_prometheus(&s, got, sizeof got, good[i]);
        cr_assert_gt(n, 0, "refused: %s", good[i]);
        cr_assert_lt(n, (int)sizeof got);
        snprintf(want, sizeof want, "\nhilock_lost_total{%s} 0\n", good[i]);
        cr_assert(strstr(got, want), "%s:\n%s", good[i], got);
    }
}

/* A python3 with prometheus_client, or skip. */
static const char *prometheus_python(void)
{
    static const char *const pythons[] = {"python3", "/usr/bin/python3"};   /* (a pyenv's first) */
    char cmd[256];
    for (size_t i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "%s -c 'import prometheus_client.parser' 2>/dev/null", pythons[i]);
        if (system(cmd) == 0) return pythons[i];
    }
    cr_skip_test("n/a: python3's prometheus_client is not installed (Debian: "
                 "python3-prometheus-client): the strict parse is skipped");
    return NULL;
}

Test(observe, prometheus_text_with_escaped_and_utf8_values_parses_with_prometheus_client)
{
    hilock_stats s;
    static char got[16384];
    char path[] = "/tmp/hilock-prom-XXXXXX", cmd[2048];
    const char *py = prometheus_python();
    FILE *f;
    int fd, rc;
    known_stats(&s);
    cr_assert_gt(hilock_stats_prometheus(&s, got, sizeof got, "app=\"a\\\\b\\\"c\\nd\",who=\"caf\xc3\xa9\""), 0);
    cr_assert_neq(fd = mkstemp(path), -1);
    f = fdopen(fd, "w");
    fputs(got, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s -c '"
             "import sys\n"
             "from prometheus_client.parser import text_string_to_metric_families as p\n"
             "fam = list(p(open(sys.argv[1], encoding=\"utf-8\").read()))\n"
             "assert len(fam) == 13, len(fam)\n"
             "assert all(s.labels[\"app\"] == \"a\\\\b\\\"c\\nd\" and s.labels[\"who\"] == \"caf\\u00e9\""
             " for f in fam for s in f.samples)\n"
             "' %s", py, path);
    rc = system(cmd);
    unlink(path);
    cr_assert_eq(rc, 0, "prometheus_client refused the text:\n%s", got);
}

Test(observe, prometheus_text_parses_with_prometheus_client)
{
    hilock_stats s;
    static char got[16384];
    char path[] = "/tmp/hilock-prom-XXXXXX", cmd[2048];
    FILE *f;
    int fd, rc;
    const char *py = prometheus_python();
    known_stats(&s);
    hilock_histogram_add(&s.round_trip, 1500000000);   /* the overflow bucket too */
    hilock_stats_prometheus(&s, got, sizeof got, "app=\"x\",shard=\"2\"");
    cr_assert_neq(fd = mkstemp(path), -1);
    f = fdopen(fd, "w");
    fputs(got, f);
    fclose(f);
    /* strict: every family parses, with the samples' labels, and the values read back */
    snprintf(cmd, sizeof cmd, "%s -c '"
             "import sys\n"
             "from prometheus_client.parser import text_string_to_metric_families as p\n"
             "fam = {f.name: f for f in p(open(sys.argv[1]).read())}\n"
             "assert fam[\"hilock_acquires\"].type == \"counter\", fam.keys()\n"
             "h = fam[\"hilock_acquire_wait_seconds\"]\n"
             "assert h.type == \"histogram\"\n"
             "b = [s for s in h.samples if s.name.endswith(\"_bucket\")]\n"
             "assert len(b) == 32 and b[-1].labels[\"le\"] == \"+Inf\" and b[-1].value == 1\n"
             "assert all(s.labels[\"app\"] == \"x\" and s.labels[\"shard\"] == \"2\" for f in fam.values() for s in f.samples)\n"
             "r = fam[\"hilock_round_trip_seconds\"].samples\n"
             "assert [s.value for s in r if s.name.endswith(\"_sum\")] == [1500.0]\n"
             "' %s", py, path);
    rc = system(cmd);
    unlink(path);
    cr_assert_eq(rc, 0, "prometheus_client refused the text:\n%s", got);
}
