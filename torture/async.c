/* SPDX-License-Identifier: BSD-3-Clause */
/* async.c -- the event-loop worker: hundreds of contenders on one client, driven by a
 * hand-written poll() loop (hilock_async.h), all pipelined on one connection per master.
 *
 * Each contender is a small state machine (idle -> acquiring -> holding -> maybe extending ->
 * releasing -> idle) on keys of its own naming (tt:a0 ... tt:aN), and writes the records of
 * torture.h's format to a log of its own (w<slot>-a<n>-<gen>.log), so check.c judges it like
 * any blocking worker: one holding at a time per log. The loop process is what the fault
 * injector kills and stops. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "hilock.h"
#include "hilock_async.h"
#include "torture.h"

#define MAXFDS 512

enum { C_IDLE = 0, C_ACQ, C_HOLD, C_BUSY };   /* C_BUSY: an extend or a release is in flight */

struct aworker;
typedef struct contender {
    struct aworker *aw;
    int      fd, key, state;
    int      lie;   /* async-violation: this holding logs a longer belief and no end of it */
    int64_t  ttl, wait, t0, deadline, expiry_upper, next_us;
    uint64_t fence;
    hilock  *l;
} contender;

typedef struct aworker {
    const tt_worker_cfg *cfg;
    hilock_client *c;
    uint64_t  rng;
    contender *ct;
    int        n, stopping;
    struct pollfd fds[MAXFDS];
    int        nfds;
    int64_t    timer_at;   /* us; -1: none */
    char       names[TT_MAXRES][16];
} aworker;

/* ---- the loop hooks (hilock_loop) ---- */

static void loop_watch(void *data, int fd, int events)
{
    aworker *aw = data;
    int i;
    for (i = 0; i < aw->nfds && aw->fds[i].fd != fd; i++)
        ;
    if (!events) {
        if (i < aw->nfds) aw->fds[i] = aw->fds[--aw->nfds];
        return;
    }
    if (i == aw->nfds) {
        if (aw->nfds == MAXFDS) _exit(4);   /* cannot happen with wake = 0: one fd per master */
        aw->nfds++;
    }
    aw->fds[i].fd = fd;
    aw->fds[i].events = (short)((events & HILOCK_EV_READ ? POLLIN : 0) | (events & HILOCK_EV_WRITE ? POLLOUT : 0));
}

static void loop_timer(void *data, int64_t ms)
{
    aworker *aw = data;
    aw->timer_at = ms < 0 ? -1 : tt_now_us() + ms * 1000;
}

/* ---- the contenders ---- */

static int64_t io_bound_us(const aworker *aw)
{
    return tt_call_bound_us(aw->cfg);
}

static void publish(contender *x)
{
    tt_slot *s = &x->aw->cfg->shm->slot[x->aw->cfg->slot];
    s->key = x->key;
    s->fence = x->fence;
    s->ttl_ms = x->ttl;
    s->valid_until_us = x->deadline;
    s->state = TT_HOLDING;   /* some contender holds: a holder the injector may kill or stop */
}

static void go_idle(contender *x, int64_t pause_us)
{
    x->state = C_IDLE;
    x->l = NULL;
    x->next_us = tt_now_us() + pause_us;
}

static void rel_done(hilock_status st, hilock *l, void *arg)
{
    contender *x = arg;
    int64_t t1 = tt_now_us();
    tt_log_call(x->fd, x->aw->c, "rel", st, x->t0, t1, io_bound_us(x->aw), t1 < x->deadline,
                x->t0 > x->expiry_upper + TT_LATE_MARGIN_US, x->key, x->fence);
    hilock_free(l);
    go_idle(x, (int64_t)(tt_rand(&x->aw->rng) % 10000));
}

static void start_release(contender *x)
{
    tt_guarded_write(x->fd, x->aw->cfg->shm, x->key, x->fence, x->deadline, x->expiry_upper);
    x->t0 = tt_now_us();
    if (!x->lie) tt_logf(x->fd, "R %d %llu %lld", x->key, (unsigned long long)x->fence, (long long)x->t0);   /* belief ends */
    if (x->aw->stopping > 1) {   /* granted while the client is being freed: it can take no call; it expires */
        hilock_free(x->l);
        go_idle(x, 0);
        return;
    }
    x->state = C_BUSY;
    if (hilock_release_async(x->l, rel_done, x) != HILOCK_OK) {
        tt_log_call(x->fd, x->aw->c, "rel", HILOCK_EINVAL, x->t0, tt_now_us(), 0, 0, 0, x->key, x->fence);
        hilock_free(x->l);
        go_idle(x, 1000);
    }
}

/* After the extend, the belief is what the library now says (as worker.c's rebelieve). */
static void ext_done(hilock_status st, hilock *l, void *arg)
{
    contender *x = arg;
    int64_t t1 = tt_now_us(), d;
    tt_log_call(x->fd, x->aw->c, "ext", st, x->t0, t1, io_bound_us(x->aw), t1 < x->deadline,
                x->t0 > x->expiry_upper + TT_LATE_MARGIN_US, x->key, x->fence);
    if (st == HILOCK_OK || st == HILOCK_ETIMEDOUT || st == HILOCK_EIO || st == HILOCK_ENOQUORUM)
        x->expiry_upper = t1 + x->ttl * 1000;   /* the new ttl may have landed */
    d = t1 + hilock_validity_ms(l) * 1000;
    tt_log_belief(x->fd, x->key, x->fence, t1, d, x->deadline);
    x->deadline = d;
    x->state = C_HOLD;
    x->next_us = t1 + (int64_t)(tt_rand(&x->aw->rng) % 20000);
    if (x->aw->stopping) start_release(x);
}

static void start_extend(contender *x)
{
    x->t0 = tt_now_us();
    x->state = C_BUSY;
    if (hilock_extend_async(x->l, x->ttl, ext_done, x) != HILOCK_OK) start_release(x);
}

static int64_t hold_us(contender *x, hilock *l)
{
    aworker *aw = x->aw;
    int64_t v = hilock_validity_ms(l) * 1000;
    if (tt_uniform(&aw->rng) < 0.5) return (int64_t)(tt_uniform(&aw->rng) * 20000);
    return (int64_t)(tt_uniform(&aw->rng) * 0.7 * (double)v);
}

/* async-violation: every 8th holding is logged as believed 1 s longer than the library said,
 * its release not logged as the end of the belief */
static int lies(aworker *aw)
{
    static unsigned n;
    return aw->cfg->inject && ++n % 8 == 0;
}

static void acq_done(hilock_status st, hilock *l, void *arg)
{
    contender *x = arg;
    aworker *aw = x->aw;
    int64_t t1 = tt_now_us();
    tt_log_call(x->fd, aw->c, "acq", st, x->t0, t1, x->wait * 1000 + io_bound_us(aw), 0, 0, x->key,
                st == HILOCK_OK ? hilock_fence(l) : 0);
    if (st != HILOCK_OK) {
        go_idle(x, st == HILOCK_BUSY ? 1000 + (int64_t)(tt_rand(&aw->rng) % 5000)
                                     : 5000 + (int64_t)(tt_rand(&aw->rng) % 15000));
        return;
    }
    x->l = l;
    x->lie = lies(aw);
    x->deadline = tt_belief_until(l, t1);
    x->expiry_upper = t1 + x->ttl * 1000;   /* the server's PX started before t1 */
    x->fence = hilock_fence(l);
    tt_logf(x->fd, "A %d %llu %lld %lld %lld %lld %lld", x->key, (unsigned long long)x->fence, (long long)x->t0,
            (long long)t1, (long long)(x->deadline + (x->lie ? 1000000 : 0)), (long long)x->ttl, (long long)x->wait);
    publish(x);
    tt_guarded_write(x->fd, aw->cfg->shm, x->key, x->fence, x->deadline, x->expiry_upper);
    x->state = C_HOLD;
    x->next_us = tt_now_us() + hold_us(x, l);
    if (aw->stopping) start_release(x);
}

static void start_acquire(contender *x)
{
    static const int64_t ttls[] = TT_TTL_CHOICES;
    aworker *aw = x->aw;
    double u = tt_uniform(&aw->rng);
    x->key = (int)(tt_rand(&aw->rng) % (uint64_t)aw->cfg->nkeys);
    x->ttl = ttls[tt_rand(&aw->rng) % (sizeof ttls / sizeof ttls[0])];
    x->wait = u < 0.2 ? 0 : u < 0.6 ? 300 : 1000;   /* waiting acquires retry: the path of a stale undo */
    x->fence = 0;
    x->t0 = tt_now_us();
    x->state = C_ACQ;
    if (hilock_acquire_async(aw->c, aw->names[x->key], x->ttl, x->wait, acq_done, x) != HILOCK_OK) {
        tt_log_call(x->fd, aw->c, "acq", HILOCK_EINVAL, x->t0, tt_now_us(), 0, 0, 0, x->key, 0);
        go_idle(x, 10000);
    }
}

/* the contenders whose time has come: start an acquire, or end a hold */
static void step_contenders(aworker *aw)
{
    int64_t now = tt_now_us();
    int holding = 0;
    for (int i = 0; i < aw->n; i++) {
        contender *x = &aw->ct[i];
        holding += x->state == C_HOLD;
        if (x->next_us > now || (x->state != C_IDLE && x->state != C_HOLD)) continue;
        if (x->state == C_IDLE) start_acquire(x);
        else if (tt_uniform(&aw->rng) < 0.2) start_extend(x);
        else start_release(x);
    }
    if (!holding) aw->cfg->shm->slot[aw->cfg->slot].state = TT_IDLE;
}

static int64_t next_wakeup(const aworker *aw)
{
    int64_t t = aw->timer_at >= 0 ? aw->timer_at : tt_now_us() + 100000;
    for (int i = 0; i < aw->n; i++)
        if ((aw->ct[i].state == C_IDLE || aw->ct[i].state == C_HOLD) && aw->ct[i].next_us < t)
            t = aw->ct[i].next_us;
    return t;
}

static void turn(aworker *aw)
{
    struct pollfd fds[MAXFDS];
    int n = aw->nfds, ms;
    int64_t wait = next_wakeup(aw) - tt_now_us();
    ms = wait <= 0 ? 0 : (int)((wait + 999) / 1000);
    memcpy(fds, aw->fds, (size_t)n * sizeof *fds);
    if (poll(fds, (nfds_t)n, ms) > 0)
        for (int i = 0; i < n; i++)
            if (fds[i].revents)
                hilock_loop_fd(aw->c, fds[i].fd,
                               (fds[i].revents & (POLLIN | POLLHUP | POLLERR) ? HILOCK_EV_READ : 0) |
                               (fds[i].revents & POLLOUT ? HILOCK_EV_WRITE : 0));
    if (aw->timer_at >= 0 && tt_now_us() >= aw->timer_at) {
        aw->timer_at = -1;
        hilock_loop_timeout(aw->c);
    }
}

/* Stop: holders release (their calls are bounded), in-flight calls end; then the client goes. */
static void drain(aworker *aw)
{
    int64_t end = tt_now_us() + 4000000;
    aw->stopping = 1;
    for (;;) {
        int busy = 0;
        for (int i = 0; i < aw->n; i++) {
            contender *x = &aw->ct[i];
            if (x->state == C_HOLD) start_release(x);
            busy += x->state != C_IDLE;
        }
        if (!busy || tt_now_us() > end) break;
        turn(aw);
    }
    aw->stopping = 2;
    hilock_client_free(aw->c);   /* ends what is still in flight (their done runs) */
}

static void open_logs(aworker *aw)
{
    const tt_worker_cfg *cfg = aw->cfg;
    char path[600];
    for (int i = 0; i < aw->n; i++) {
        contender *x = &aw->ct[i];
        snprintf(path, sizeof path, "%s/w%02d-a%03d-%03d.log", cfg->dir, cfg->slot, i, cfg->gen);
        x->aw = aw;
        x->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC, 0644);
        if (x->fd < 0) _exit(2);
        /* as "worker" slot*1000 + contender: the checker's examples then name the contender */
        tt_logf(x->fd, "H %d %d %d async", cfg->slot * 1000 + i, cfg->gen, (int)getpid());
        go_idle(x, (int64_t)(tt_rand(&aw->rng) % 200000));   /* a ramp, not one burst */
    }
}

void tt_async_main(const tt_worker_cfg *cfg)
{
    static aworker aw;
    hilock_options o;
    hilock_loop hooks;
    prctl(PR_SET_PDEATHSIG, SIGKILL);   /* never outlive the orchestrator */
    signal(SIGPIPE, SIG_DFL);
    if (getppid() == 1) _exit(2);
    memset(&aw, 0, sizeof aw);
    aw.cfg = cfg;
    aw.timer_at = -1;
    aw.rng = cfg->seed ^ ((uint64_t)cfg->slot << 32) ^ ((uint64_t)cfg->gen << 48);
    aw.n = cfg->contenders;
    if (cfg->nkeys > TT_MAXRES || !(aw.ct = calloc((size_t)aw.n, sizeof *aw.ct))) _exit(2);
    for (int k = 0; k < cfg->nkeys; k++) snprintf(aw.names[k], sizeof aw.names[k], "tt:a%d", k);
    open_logs(&aw);

    tt_client_options(&o, cfg);
    o.wake = 0;   /* waiting acquires poll on the loop's timer: retries, and one fd per master */
    hooks = (hilock_loop){ &aw, loop_watch, loop_timer, NULL };
    if (hilock_client_new(&o, &aw.c) != HILOCK_OK || hilock_loop_attach(aw.c, &hooks) != HILOCK_OK) {
        tt_logf(aw.ct[0].fd, "X new EINVAL %s", hilock_last_config_error());
        _exit(2);
    }
    while (!cfg->shm->stop) {
        turn(&aw);
        step_contenders(&aw);
    }
    drain(&aw);
    for (int i = 0; i < aw.n; i++) tt_logf(aw.ct[i].fd, "Q");
    _exit(0);
}
