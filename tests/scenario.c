/* SPDX-License-Identifier: BSD-3-Clause */
/* scenario.c -- the runner of tests/scenario.h: one scenario body on blocking clients or on a
 * libuv loop in the test's thread. */
#include "scenario.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clients.h"
#include "fixture.h"
#include "hilock_libuv.h"
#include "holders.h"
#include "loop_run.h"

/* ---- the ticker ---- */

static int64_t cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* This thread's run delay in ms (schedstat's second field is in ns), 0 where unknown. */
static int64_t run_delay_ms(void)
{
    char b[96];
    unsigned long long on_cpu = 0, delay = 0;
    int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, b, sizeof b - 1);
    if (fd >= 0) close(fd);
    if (n <= 0) return 0;
    b[n] = 0;
    if (sscanf(b, "%llu %llu", &on_cpu, &delay) != 2) return 0;
    return (int64_t)(delay / 1000000);
}

static void on_tick(uv_timer_t *t)
{
    hlt_ticker *k = t->data;
    int64_t now = hlt_now_ms(), cpu = cpu_us(), rd = run_delay_ms();
    if (k->last && now - k->last > k->max_gap) k->max_gap = now - k->last;
    if (k->last && now - k->last - (rd - k->rd_last) > k->max_stall)
        k->max_stall = now - k->last - (rd - k->rd_last);
    if (k->cpu_last && cpu - k->cpu_last > k->max_cpu_us) k->max_cpu_us = cpu - k->cpu_last;
    k->last = now;
    k->cpu_last = cpu;
    k->rd_last = rd;
    k->ticks++;
}

void hlt_ticker_reset(hlt_ticker *tk)
{
    tk->max_gap = tk->max_cpu_us = tk->max_stall = 0;
    tk->ticks = 0;
    tk->last = hlt_now_ms();
    tk->cpu_last = cpu_us();
    tk->rd_last = run_delay_ms();
}

void hlt_ticker_start(uv_loop_t *loop, hlt_ticker *tk)
{
    memset(tk, 0, sizeof *tk);
    hlt_ticker_reset(tk);
    uv_timer_init(loop, &tk->t);
    tk->t.data = tk;
    uv_timer_start(&tk->t, on_tick, 2, 2);
}

void hlt_ticker_print(const hlt_ticker *tk, const char *what)
{
    printf("%s: a 2 ms loop timer ticked %ld times, longest gap %lld ms (wall), %lld ms (less run "
           "delay), %.1f ms (this thread's CPU)\n", what, tk->ticks, (long long)tk->max_gap,
           (long long)tk->max_stall, (double)tk->max_cpu_us / 1000);
}

void hlt_ticker_stop(hlt_ticker *tk)
{
    uv_timer_stop(&tk->t);
    uv_close((uv_handle_t *)&tk->t, NULL);
}

/* ---- the runner ---- */

/* The test's loop, made with its first loop runner and closed with its last. */
static struct {
    uv_loop_t  loop;
    hlt_ticker tk;
    int        runners;
} L;

/* One client, shared by a loop runner and its peers. */
typedef struct shared {
    hilock_client *c;
    hilock_options o;
    int            refs;
} shared;

struct hlt_run {
    hlt_mode   mode;
    shared    *sh;
    /* the call in flight (begun, or a plain call on the loop) */
    int        pending, in_call, ended, wrong;
    hilock_status st;
    hilock    *l;
    long long  t_end;
    char       err[512];
    /* a blocking begun call: its thread and arguments */
    pthread_t  th;
    int        kind;   /* 'a' acquire, 's' semaphore, 'w' shared/exclusive */
    char       key[256];
    int        limit;
    hilock_rw_mode rw;
    int64_t    ttl, wait;
    hilock_reply *reply;   /* a guarded command's, on the loop */
};

static void on_done(hilock_status st, hilock *l, void *arg)
{
    hlt_run *r = arg;
    if (r->in_call || r->ended) r->wrong++;
    r->ended++;
    r->st = st;
    r->l = l;
    r->t_end = hlt_now_ms();
    snprintf(r->err, sizeof r->err, "%s", hilock_client_errmsg(r->sh->c));
}

static hlt_run *run_of(hlt_mode mode, shared *sh)
{
    hlt_run *r = calloc(1, sizeof *r);
    cr_assert_not_null(r);
    r->mode = mode;
    r->sh = sh;
    sh->refs++;
    if (mode == HLT_ON_LOOP) L.runners++;
    return r;
}

hlt_run *hlt_run_new(const hilock_options *o, hlt_mode mode)
{
    shared *sh = calloc(1, sizeof *sh);
    cr_assert_not_null(sh);
    sh->o = *o;
    sh->c = hlt_client_new(o);
    if (mode == HLT_ON_LOOP) {
        if (!L.runners) {
            cr_assert_eq(uv_loop_init(&L.loop), 0);
            hlt_ticker_start(&L.loop, &L.tk);
        }
        cr_assert_eq(hilock_libuv_attach(sh->c, &L.loop), HILOCK_OK, "%s", hilock_client_errmsg(sh->c));
    }
    return run_of(mode, sh);
}

hlt_run *hlt_run_peer(hlt_run *r)
{
    if (r->mode == HLT_BLOCKING) return hlt_run_new(&r->sh->o, HLT_BLOCKING);
    return run_of(r->mode, r->sh);
}

void hlt_run_free(hlt_run *r)
{
    if (!r) return;
    cr_assert_not(r->pending, "a runner freed with its begun call (%s) not ended", r->key);
    cr_assert_eq(r->wrong, 0, "a done ran inside its _async call, or twice");
    if (--r->sh->refs == 0) {
        hilock_client_free(r->sh->c);
        free(r->sh);
    }
    if (r->mode == HLT_ON_LOOP && --L.runners == 0) {
        hlt_ticker_stop(&L.tk);
        hlt_loop_close(&L.loop);
    }
    free(r);
}

hilock_client *hlt_run_client(const hlt_run *r) { return r->sh->c; }
int hlt_run_on_loop(const hlt_run *r) { return r->mode == HLT_ON_LOOP; }
const char *hlt_run_mode_name(const hlt_run *r) { return r->mode == HLT_ON_LOOP ? "loop" : "blocking"; }
const char *hlt_run_errmsg(const hlt_run *r) { return r->err; }
long long hlt_run_ended_at(const hlt_run *r) { return r->t_end; }

/* A call of the blocking client ended: its message, and when. */
static hilock_status blocking_ended(hlt_run *r, hilock_status st)
{
    r->t_end = hlt_now_ms();
    snprintf(r->err, sizeof r->err, "%s", hilock_client_errmsg(r->sh->c));
    return st;
}

/* On the loop: the _async call's answer st. Accepted: r's call is in flight (pending). Refused
 * at once: its message, and its done must never run (looked at after a few loop passes). */
static hilock_status loop_started(hlt_run *r, hilock_status st)
{
    if (st == HILOCK_OK) {
        r->pending = 1;
        return st;
    }
    r->t_end = hlt_now_ms();
    snprintf(r->err, sizeof r->err, "%s", hilock_client_errmsg(r->sh->c));
    for (int i = 0; i < 3; i++) uv_run(&L.loop, UV_RUN_NOWAIT);
    cr_assert_eq(r->ended, 0, "done ran for a call refused at once (%s)", hilock_strerror(st));
    return st;
}

/* Ready r for a call on the loop (nothing of it in flight). */
static void loop_arm(hlt_run *r)
{
    cr_assert_not(r->pending, "a second call on a runner with one in flight");
    r->ended = 0;
    r->l = NULL;
    r->in_call = 1;
}

/* Run the loop until r's call ended (limit_ms at most). */
static hilock_status loop_end(hlt_run *r, long limit_ms, const char *what, hilock **out)
{
    hlt_loop_run(&L.loop, &r->ended, 1, limit_ms);
    cr_assert_eq(r->ended, 1, "%s: done did not run once (%d)", what, r->ended);
    r->pending = 0;
    if (out) *out = r->l;
    else cr_assert_null(r->l);
    return r->st;
}

/* A call's bound on the loop: its wait and generous room for the round trips (the call ends
 * within its own bounds; this only keeps a lost done from hanging the test). */
static long bound_of(int64_t wait_ms)
{
    return (wait_ms > 0 ? (long)wait_ms : 0) + 60000;
}

static hilock_status acq(hlt_run *r, int kind, const char *key, int limit, hilock_rw_mode m,
                         int64_t ttl, int64_t wait, hilock **out)
{
    hilock_status st;
    if (out) *out = NULL;
    if (r->mode == HLT_BLOCKING) {
        hilock *l = NULL;
        st = kind == 's' ? hilock_sem_acquire(r->sh->c, key, limit, ttl, wait, &l)
           : kind == 'w' ? hilock_rw_acquire(r->sh->c, key, m, ttl, wait, &l)
                         : hilock_acquire(r->sh->c, key, ttl, wait, &l);
        if (out) *out = l;
        return blocking_ended(r, st);
    }
    loop_arm(r);
    st = kind == 's' ? hilock_sem_acquire_async(r->sh->c, key, limit, ttl, wait, on_done, r)
       : kind == 'w' ? hilock_rw_acquire_async(r->sh->c, key, m, ttl, wait, on_done, r)
                     : hilock_acquire_async(r->sh->c, key, ttl, wait, on_done, r);
    r->in_call = 0;
    if (loop_started(r, st) != HILOCK_OK) return st;
    return loop_end(r, wait == HILOCK_WAIT_FOREVER ? 600000 : bound_of(wait), key, out);
}

hilock_status hlt_run_acquire(hlt_run *r, const char *key, int64_t ttl_ms, int64_t wait_ms, hilock **out)
{
    return acq(r, 'a', key, 0, HILOCK_SHARED, ttl_ms, wait_ms, out);
}

hilock_status hlt_run_sem_acquire(hlt_run *r, const char *key, int limit, int64_t ttl_ms, int64_t wait_ms,
                                  hilock **out)
{
    return acq(r, 's', key, limit, HILOCK_SHARED, ttl_ms, wait_ms, out);
}

hilock_status hlt_run_rw_acquire(hlt_run *r, const char *key, hilock_rw_mode m, int64_t ttl_ms,
                                 int64_t wait_ms, hilock **out)
{
    return acq(r, 'w', key, 0, m, ttl_ms, wait_ms, out);
}

/* release 'r', extend 'e', check 'c' */
static hilock_status on_lock(hlt_run *r, int op, hilock *l, int64_t ttl)
{
    hilock_status st;
    if (r->mode == HLT_BLOCKING)
        return blocking_ended(r, op == 'r' ? hilock_release(l) : op == 'e' ? hilock_extend(l, ttl)
                                                                          : hilock_check(l));
    loop_arm(r);
    st = op == 'r' ? hilock_release_async(l, on_done, r) : op == 'e' ? hilock_extend_async(l, ttl, on_done, r)
                                                                     : hilock_check_async(l, on_done, r);
    r->in_call = 0;
    if (loop_started(r, st) != HILOCK_OK) return st;
    hilock *back = NULL;
    st = loop_end(r, bound_of(0), op == 'r' ? "release" : op == 'e' ? "extend" : "check", &back);
    cr_assert(back == l, "done got another lock than the one passed in");
    return st;
}

hilock_status hlt_run_release(hlt_run *r, hilock *l) { return on_lock(r, 'r', l, 0); }
hilock_status hlt_run_extend(hlt_run *r, hilock *l, int64_t ttl_ms) { return on_lock(r, 'e', l, ttl_ms); }
hilock_status hlt_run_check(hlt_run *r, hilock *l) { return on_lock(r, 'c', l, 0); }

static void on_reply(hilock_status st, hilock *l, hilock_reply *reply, void *arg)
{
    ((hlt_run *)arg)->reply = reply;
    on_done(st, l, arg);
}

hilock_status hlt_run_guarded(hlt_run *r, hilock *l, int argc, const char **argv, const size_t *argvlen,
                              hilock_reply **reply)
{
    hilock_status st;
    hilock *back = NULL;
    hilock_reply *got = NULL;
    if (r->mode == HLT_BLOCKING) {
        st = blocking_ended(r, hilock_guarded_command(l, argc, argv, argvlen, &got));
    } else {
        loop_arm(r);
        r->reply = NULL;
        st = hilock_guarded_command_async(l, argc, argv, argvlen, on_reply, r);
        r->in_call = 0;
        if (loop_started(r, st) == HILOCK_OK) {
            st = loop_end(r, bound_of(0), "guarded command", &back);
            cr_assert(back == l, "done got another lock than the one passed in");
            got = r->reply;
            r->reply = NULL;
        }
    }
    if (reply) *reply = got;
    else hilock_reply_free(got);
    return st;
}

hilock_status hlt_run_keepalive(hlt_run *r, hilock *l, hilock_lost_fn on_lost, void *arg,
                                const hilock_keepalive_options *o)
{
    hilock_status st = o ? hilock_keepalive_ex(l, on_lost, arg, o) : hilock_keepalive(l, on_lost, arg);
    r->t_end = hlt_now_ms();
    snprintf(r->err, sizeof r->err, "%s", hilock_client_errmsg(r->sh->c));
    return st;
}

/* ---- begun calls ---- */

static void *blocking_call(void *arg)
{
    hlt_run *r = arg;
    hilock *l = NULL;
    hilock_status st = r->kind == 's' ? hilock_sem_acquire(r->sh->c, r->key, r->limit, r->ttl, r->wait, &l)
                     : r->kind == 'w' ? hilock_rw_acquire(r->sh->c, r->key, r->rw, r->ttl, r->wait, &l)
                                      : hilock_acquire(r->sh->c, r->key, r->ttl, r->wait, &l);
    r->l = l;
    r->st = st;
    snprintf(r->err, sizeof r->err, "%s", hilock_client_errmsg(r->sh->c));
    r->t_end = hlt_now_ms();
    __atomic_store_n(&r->ended, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void begin(hlt_run *r, int kind, const char *key, int limit, hilock_rw_mode m, int64_t ttl, int64_t wait)
{
    hilock_status st;
    cr_assert_not(r->pending, "a second call begun on a runner with one in flight");
    snprintf(r->key, sizeof r->key, "%s", key);
    r->kind = kind;
    r->limit = limit;
    r->rw = m;
    r->ttl = ttl;
    r->wait = wait;
    if (r->mode == HLT_BLOCKING) {
        r->ended = 0;
        r->l = NULL;
        r->pending = 1;
        cr_assert_eq(pthread_create(&r->th, NULL, blocking_call, r), 0);
        return;
    }
    loop_arm(r);
    st = kind == 's' ? hilock_sem_acquire_async(r->sh->c, key, limit, ttl, wait, on_done, r)
       : kind == 'w' ? hilock_rw_acquire_async(r->sh->c, key, m, ttl, wait, on_done, r)
                     : hilock_acquire_async(r->sh->c, key, ttl, wait, on_done, r);
    r->in_call = 0;
    cr_assert_eq(st, HILOCK_OK, "%s refused: %s", key, hilock_client_errmsg(r->sh->c));
    r->pending = 1;
}

void hlt_run_begin_acquire(hlt_run *r, const char *key, int64_t ttl_ms, int64_t wait_ms)
{
    begin(r, 'a', key, 0, HILOCK_SHARED, ttl_ms, wait_ms);
}

void hlt_run_begin_sem_acquire(hlt_run *r, const char *key, int limit, int64_t ttl_ms, int64_t wait_ms)
{
    begin(r, 's', key, limit, HILOCK_SHARED, ttl_ms, wait_ms);
}

void hlt_run_begin_rw_acquire(hlt_run *r, const char *key, hilock_rw_mode m, int64_t ttl_ms, int64_t wait_ms)
{
    begin(r, 'w', key, 0, m, ttl_ms, wait_ms);
}

int hlt_run_ended(hlt_run *r)
{
    cr_assert(r->pending, "no begun call");
    return __atomic_load_n(&r->ended, __ATOMIC_ACQUIRE) != 0;
}

hilock_status hlt_run_end(hlt_run *r, long limit_ms, hilock **out)
{
    cr_assert(r->pending, "no begun call");
    if (r->mode == HLT_ON_LOOP) return loop_end(r, limit_ms, r->key, out);
    long long end = hlt_now_ms() + limit_ms;
    while (!__atomic_load_n(&r->ended, __ATOMIC_ACQUIRE) && hlt_now_ms() < end) hlt_sleep_ms(2);
    cr_assert(__atomic_load_n(&r->ended, __ATOMIC_ACQUIRE), "%s: the begun call did not end within %ld ms",
              r->key, limit_ms);
    pthread_join(r->th, NULL);
    r->pending = 0;
    if (out) *out = r->l;
    return r->st;
}

/* ---- time ---- */

void hlt_run_sleep(hlt_run *r, long ms)
{
    if (r->mode == HLT_ON_LOOP) hlt_loop_run(&L.loop, NULL, 0, ms);
    else hlt_sleep_ms(ms);
}

int hlt_run_until(hlt_run *r, int (*cond)(void *), void *arg, long limit_ms)
{
    long long end = hlt_now_ms() + limit_ms;
    for (;;) {
        if (cond(arg)) return 1;
        if (hlt_now_ms() >= end) return 0;
        hlt_run_sleep(r, 5);
    }
}

int hlt_zcard_is(void *want)
{
    const hlt_zcard_want *w = want;
    return hlt_zcard(w->r, w->key) == w->n;
}

hilock_options hlt_waiter_options(const char *url, int64_t poll_ms)
{
    static const char *u[1];
    hilock_options o;
    u[0] = url;
    o = hlt_options(u, 1);
    o.retry_delay_ms = poll_ms;
    o.poll_ms = poll_ms;   /* (a waiter blocked on its wake-up looks again after this too) */
    return o;
}

void hlt_count_lost(hilock *l, hilock_status why, void *arg)
{
    (void)l, (void)why;
    __atomic_add_fetch((int *)arg, 1, __ATOMIC_SEQ_CST);
}

int hlt_lost_count(int *n) { return __atomic_load_n(n, __ATOMIC_SEQ_CST); }

static int never_ran;

void hlt_never_done(hilock_status st, hilock *l, void *arg)
{
    (void)st, (void)l, (void)arg;
    never_ran++;
}

int hlt_never_ran(void) { return never_ran; }

void hlt_run_stall_reset(hlt_run *r)
{
    if (r->mode == HLT_ON_LOOP) hlt_ticker_reset(&L.tk);
}

int64_t hlt_run_assert_no_stall(hlt_run *r, int64_t max_stall_ms, long min_ticks, const char *what)
{
    if (r->mode != HLT_ON_LOOP) return 0;
    hlt_ticker_print(&L.tk, what);
    cr_assert_gt(L.tk.ticks, min_ticks, "%s: the loop's own timer hardly ran (%ld ticks)", what, L.tk.ticks);
    cr_assert_lt(L.tk.max_stall, max_stall_ms, "%s: the loop stalled %lld ms", what, (long long)L.tk.max_stall);
    return L.tk.max_stall;
}
