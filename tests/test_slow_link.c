/* SPDX-License-Identifier: BSD-3-Clause */
/* test_slow_link.c -- a slow link still gets its lock (issue 40): every round trip -- a new
 * connection's handshake, a call's commands, their resend as EVAL after NOSCRIPT -- has its
 * own io_timeout_ms (src/engine/engine.c, src/async/async.c), and each call keeps the bound
 * hilock.h states for it (wait_ms + connect_timeout_ms + 3 x io_timeout_ms for an acquire,
 * connect_timeout_ms + 3 x io_timeout_ms for the others).
 * A proxy on 127.0.0.1 holds every byte DELAY_MS before it passes it on, each way, in front of
 * a real server: a round trip of 2 x DELAY_MS, more than half of io_timeout_ms. Before, a
 * fresh connection's handshake and command shared one io_timeout_ms and every call timed out.
 * The lock, a semaphore permit and an exclusive grant; on the blocking client and on the
 * loop (tests/scenario.h); on a fresh connection and after the server's script cache was
 * flushed. */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "checks.h"
#include "clients.h"
#include "fakes.h"
#include "fixture.h"
#include "scenario.h"

#define DELAY_MS 250   /* each way: a 500 ms round trip */
#define IO_MS    800   /* more than one round trip (300 ms to spare on a loaded machine), less than two */
#define CONNECT_MS 1000
#define QMAX     256

/* ---- the delaying proxy ---- */

typedef struct chunk { long long due; size_t n; char b[4096]; } chunk;
typedef struct lane { chunk q[QMAX]; int head, len; int eof; long long eof_due; } lane;

static long long now_ms(void) { return hlt_now_ms(); }

/* Read what fd has into a lane, due DELAY_MS from now. 0, or -1 on EOF or error. */
static int lane_take(int fd, lane *l)
{
    chunk *c;
    ssize_t n;
    if (l->len == QMAX) return 0;   /* full: read later (poll reports it again) */
    c = &l->q[(l->head + l->len) % QMAX];
    while ((n = read(fd, c->b, sizeof c->b)) < 0 && errno == EINTR) {}
    if (n <= 0) {
        l->eof = 1;
        l->eof_due = now_ms() + DELAY_MS;
        return -1;
    }
    c->n = (size_t)n;
    c->due = now_ms() + DELAY_MS;
    l->len++;
    return 0;
}

/* Write what is due from a lane to fd. -1 once the lane ended (its EOF is due) or fd broke. */
static int lane_give(int fd, lane *l, long long *next)
{
    long long now = now_ms();
    while (l->len && l->q[l->head].due <= now) {
        if (hlt_send_all(fd, l->q[l->head].b, l->q[l->head].n) < 0) return -1;
        l->head = (l->head + 1) % QMAX;
        l->len--;
    }
    if (l->len && l->q[l->head].due < *next) *next = l->q[l->head].due;
    if (!l->len && l->eof) {
        if (l->eof_due <= now) return -1;
        if (l->eof_due < *next) *next = l->eof_due;
    }
    return 0;
}

/* One client connection (a child of hlt_serve_fork's): to the server and back, late. */
static void delay_serve(int fd, void *arg)
{
    int up = hlt_connect_port(*(const int *)arg);
    static lane to_up, to_down;
    memset(&to_up, 0, sizeof to_up);
    memset(&to_down, 0, sizeof to_down);
    if (up < 0) return;
    for (;;) {
        struct pollfd p[2] = { { fd, to_up.eof ? 0 : POLLIN, 0 }, { up, to_down.eof ? 0 : POLLIN, 0 } };
        long long next = now_ms() + 1000, wait;
        if (lane_give(up, &to_up, &next) < 0 || lane_give(fd, &to_down, &next) < 0) break;
        wait = next - now_ms();
        if (poll(p, 2, wait < 0 ? 0 : (int)wait) < 0 && errno != EINTR) break;
        if (p[0].revents) lane_take(fd, &to_up);
        if (p[1].revents) lane_take(up, &to_down);
    }
    close(up);
    close(fd);
}

typedef struct slow { hlt_redis *r; pid_t pid; int up_port; char url[64]; const char *urls[1]; } slow;

static void slow_start(slow *s)
{
    int ls, port;
    s->r = hlt_redis_started(NULL);
    s->up_port = s->r->port;
    ls = hlt_listen(16, &port, NULL, NULL, 0);
    cr_assert(ls >= 0, "listen");
    snprintf(s->url, sizeof s->url, "redis://127.0.0.1:%d", port);
    s->urls[0] = s->url;   /* (the options point at it: it lives as long as s) */
    s->pid = hlt_serve_fork(ls, 120, delay_serve, &s->up_port);
}

static void slow_stop(slow *s)
{
    hlt_serve_stop(s->pid);
    hlt_redis_stop(s->r);
}

static hilock_options slow_options(slow *s)
{
    hilock_options o = hlt_options(s->urls, 1);
    o.io_timeout_ms = IO_MS;
    o.connect_timeout_ms = CONNECT_MS;
    return o;
}

/* The bound hilock.h states for a call that is not an acquire, and for an acquire's wait. */
static long long call_bound_ms(void) { return CONNECT_MS + 3 * IO_MS; }

typedef enum kind { LOCK, PERMIT, EXCLUSIVE } kind;
static const char *const kind_name[] = { "lock", "permit", "exclusive grant" };

static hilock_status take(hlt_run *r, kind k, const char *key, int64_t wait_ms, hilock **l)
{
    switch (k) {
    case PERMIT:    return hlt_run_sem_acquire(r, key, 2, 30000, wait_ms, l);
    case EXCLUSIVE: return hlt_run_rw_acquire(r, key, HILOCK_EXCLUSIVE, 30000, wait_ms, l);
    default:        return hlt_run_acquire(r, key, 30000, wait_ms, l);
    }
}

/* Each kind on a fresh client (a new connection: handshake, then the script, unknown to the
 * server's cache until the first EVAL: NOSCRIPT and a resend), then release, extend and check
 * of a grant; each within its stated bound, and the grant read back on the server. */
static void each_kind_on_a_slow_link(hlt_mode mode, int flush_between)
{
    slow s;
    HLT_NEEDS(30200, "the semaphore and the shared/exclusive lock need Redis 3.2");
    slow_start(&s);
    for (int k = LOCK; k <= EXCLUSIVE; k++) {
        hilock_options o = slow_options(&s);
        hlt_run *r = hlt_run_new(&o, mode);
        hilock *l = NULL;
        char key[32];
        long long t0 = hlt_now_ms(), took;
        hilock_status st;
        snprintf(key, sizeof key, "slow:%d", k);
        if (flush_between) {   /* the script cache empty (a restart, a failover, an operator) */
            redisReply *rep = hlt_cmd(s.r, "SCRIPT FLUSH");
            cr_assert(rep && rep->type == REDIS_REPLY_STATUS);
            freeReplyObject(rep);
        }
        st = take(r, (kind)k, key, 5000, &l);
        took = hlt_now_ms() - t0;
        printf("slow_link: %s %s, round trip %d ms, io_timeout %d ms: %s after %lld ms\n",
               hlt_run_mode_name(r), kind_name[k], 2 * DELAY_MS, IO_MS, hilock_strerror(st), took);
        cr_assert_eq(st, HILOCK_OK, "%s %s: %s (%s)", hlt_run_mode_name(r), kind_name[k], hilock_strerror(st),
                     hlt_run_errmsg(r));
        cr_assert_leq(took, 5000 + call_bound_ms(), "the acquire took %lld ms", took);
        cr_assert_eq(hlt_exists(s.r, key), 1, "no %s on the server", kind_name[k]);
        if (flush_between) {
            redisReply *rep = hlt_cmd(s.r, "SCRIPT FLUSH");
            freeReplyObject(rep);
        }
        t0 = hlt_now_ms();
        cr_assert_eq(hlt_run_extend(r, l, 20000), HILOCK_OK, "extend: %s", hlt_run_errmsg(r));
        cr_assert_eq(hlt_run_check(r, l), HILOCK_OK, "check: %s", hlt_run_errmsg(r));
        cr_assert_leq(hlt_now_ms() - t0, 2 * call_bound_ms());
        t0 = hlt_now_ms();
        cr_assert_eq(hlt_run_release(r, l), HILOCK_OK, "release: %s", hlt_run_errmsg(r));
        cr_assert_leq(hlt_now_ms() - t0, call_bound_ms());
        cr_assert_eq(hlt_exists(s.r, key), 0, "the %s is still on the server", kind_name[k]);
        hilock_free(l);
        hlt_run_free(r);
    }
    slow_stop(&s);
}

HLT_SCENARIO(slow_link, a_fresh_connection_gets_each_kind_and_keeps_each_bound, .timeout = 60)
{
    each_kind_on_a_slow_link(mode, 0);
}

HLT_SCENARIO(slow_link, an_empty_script_cache_costs_a_round_trip_not_the_call, .timeout = 60)
{
    each_kind_on_a_slow_link(mode, 1);
}

/* A try-lock (wait_ms 0) on a fresh connection: the handshake, the command and its resend
 * after NOSCRIPT are three round trips of 500 ms with io_timeout_ms 800: granted, within the
 * stated bound of a try (connect + 3 x io). */
HLT_SCENARIO(slow_link, a_try_lock_on_a_fresh_connection_is_granted, .timeout = 60)
{
    slow s;
    hilock_options o;
    hlt_run *r;
    hilock *l = NULL;
    long long t0;
    slow_start(&s);
    o = slow_options(&s);
    r = hlt_run_new(&o, mode);
    t0 = hlt_now_ms();
    cr_assert_eq(hlt_run_acquire(r, "try", 30000, 0, &l), HILOCK_OK, "%s", hlt_run_errmsg(r));
    cr_assert_leq(hlt_now_ms() - t0, call_bound_ms());
    hlt_holds(s.r, "try", hilock_token(l));
    cr_assert_eq(hlt_run_release(r, l), HILOCK_OK);
    hilock_free(l);
    hlt_run_free(r);
    slow_stop(&s);
}
