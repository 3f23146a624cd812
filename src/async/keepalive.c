/* SPDX-License-Identifier: BSD-3-Clause */
/* keepalive.c -- renew a lock in the background until it is released or freed.
 *
 * A layer above the lock API: it calls the public functions (hilock_extend, ...),
 * client.c's hl_client_new_like (the private client shares the owner's TLS context: the
 * files are not read again) and lock.c's hl_lock_renewable; lock.c calls back only through
 * the hook this file sets in the lock while its thread runs (l->hook, lock.h: hl_hook_ev).
 *
 * One thread and one private client per keepalive: the owner's client is never used from two
 * threads (the thread rule), and a slow renewal never delays the owner's own calls.
 *
 * A renewal is hilock_extend itself, run on a shadow copy of the lock bound to the private
 * client, so single-master, Sentinel and Redlock renewals are exactly the extend path (same
 * script, quorum, validity and error rules); its results (validity, ttl, masters held) are
 * copied back into the lock.
 *
 * Locking. `op` makes extends of one lock take turns: a renewal here, hilock_extend and
 * hilock_check by the owner (the hook's BEGIN/END), so their results cannot cross; every owner
 * write of ttl_ms / valid_until_us / held happens under it. `mu` guards the flags below and
 * the copy-back, so the owner may read the validity without waiting for a round trip
 * (the hook's VALIDITY). Order: op, then mu. Neither is held while on_lost runs.
 *
 * Stopping. The hook's STOP (ka_stop) sets `stop`, signals the condition variable (CLOCK_MONOTONIC)
 * and joins the thread: once hilock_release or hilock_free has stopped it, no renewal is in
 * flight and none will be sent. A renewal already on the wire is waited for (bounded by
 * io_timeout_ms, connect_timeout_ms). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "async.h"

struct hl_keepalive {
    hilock          *l;
    hilock_client   *pc;            /* private client: used by the thread only */
    hilock_lost_fn   on_lost;
    void            *arg;
    long             max_renewals;  /* 0 = no limit */
    int64_t          hold_end_us;   /* HL_NEVER = no limit */
    int64_t          margin_us;     /* lost_margin_ms: give up this long before the validity ends */
    pthread_t        th;
    pthread_mutex_t  op, mu;
    pthread_cond_t   cv;
    int              stop;          /* mu: the owner wants it to end */
    int              kick;          /* mu: the owner changed the lock (extend, check) */
    int              done;          /* mu: the thread is over; status and errmsg are final */
    hilock_status    status;        /* mu: OK while renewing or after a cap; else why it stopped */
    char             errmsg[HL_ERRMSG_MAX];   /* written once, before done is set */
};

typedef enum outcome { GO_ON, RETRY, CAPPED, FAILED } outcome;

static const size_t ka_options_ends[] = {
    HL_FIELD_END(hilock_keepalive_options, max_renewals),
    HL_FIELD_END(hilock_keepalive_options, max_hold_ms),
    HL_FIELD_END(hilock_keepalive_options, lost_margin_ms),
};
/* A field appended to the struct but not to the list above fails the build here. */
typedef char hl_ka_options_ends_complete[sizeof(hilock_keepalive_options) -
                                         HL_FIELD_END(hilock_keepalive_options, lost_margin_ms) < 8 ? 1 : -1];

void hilock_keepalive_options_init_sized(hilock_keepalive_options *o, size_t size)
{
    hilock_keepalive_options def;
    memset(&def, 0, sizeof def);
    hl_sized_init(o, size, &def, sizeof def);
}

/* The symbol binaries built against 0.1.0's header call (no size argument): that size. */
void (hilock_keepalive_options_init)(hilock_keepalive_options *o)
{
    hilock_keepalive_options_init_sized(o, HL_KEEPALIVE_OPTIONS_V0_SIZE);
}

/* ---- the owner's side of the shared fields ---- */

/* The owner's extend or check (around it: op) changed the validity or ttl: reschedule. */
static void op_end(struct hl_keepalive *k)
{
    pthread_mutex_unlock(&k->op);
    pthread_mutex_lock(&k->mu);
    k->kick = 1;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
}

static int64_t valid_until(struct hl_keepalive *k, const hilock *l)
{
    int64_t v;
    pthread_mutex_lock(&k->mu);
    v = l->valid_until_us;
    pthread_mutex_unlock(&k->mu);
    return v;
}

static void ka_stop(hilock *l);

/* l->hook while the thread runs (lock.h: hl_hook_ev): the lock's calls into this layer. */
static int64_t ka_hook(hilock *l, hl_hook_ev ev)
{
    struct hl_keepalive *k = l->ka;
    switch (ev) {
    case HL_HOOK_STOP: ka_stop(l); break;
    case HL_HOOK_BEGIN: pthread_mutex_lock(&k->op); break;
    case HL_HOOK_END: op_end(k); break;
    case HL_HOOK_VALIDITY: return valid_until(k, l);
    }
    return 0;
}

static int ka_done(struct hl_keepalive *k)
{
    int done;
    pthread_mutex_lock(&k->mu);
    done = k->done;
    pthread_mutex_unlock(&k->mu);
    return done;
}

const char *hilock_keepalive_errmsg(const hilock *l)
{
    struct hl_keepalive *k = l && !hl_forked(l->c) ? l->ka : NULL;
    if (k) return ka_done(k) ? k->errmsg : "";   /* never written again once done is set */
    return l && l->ka_why && !hl_forked(l->c) ? l->ka_why : "";   /* (the loop's) */
}

/* ---- the thread ---- */

/* One renewal: hilock_extend on a shadow of the lock bound to the private client. Under op. */
static hilock_status renew(struct hl_keepalive *k, hilock *l, int64_t ttl_ms)
{
    hilock shadow = *l;
    hilock_status st;
    shadow.c = k->pc;
    shadow.hook = NULL;   /* its extend must not take our locks */
    shadow.ka = NULL;
    shadow.renewing = 1;   /* (its events: RENEWAL) */
    st = hilock_extend(&shadow, ttl_ms);
    pthread_mutex_lock(&k->mu);
    /* every field extend may change (keep in step with lock.c and topology.c) */
    l->valid_until_us = shadow.valid_until_us;
    l->ttl_ms = shadow.ttl_ms;
    l->held = shadow.held;
    l->topo = shadow.topo;   /* topology.c's: it re-anchors the ids in place, or allocates them */
    l->lost_seen = shadow.lost_seen;   /* (the owner's next call does not report it again) */
    pthread_mutex_unlock(&k->mu);
    return st;
}

/* Renew (under op) and decide what comes next; *retry_at is set for RETRY. */
static outcome renew_step(struct hl_keepalive *k, hilock *l, long *renewals, int64_t *retry_at,
                          hilock_status *st)
{
    int last;
    int64_t ttl = hl_ka_capped_ttl(k->pc, l, k->hold_end_us, &last);
    if (ttl == 0) return CAPPED;
    *st = renew(k, l, ttl);
    if (*st == HILOCK_OK) {
        ++*renewals;
        return last || (k->max_renewals && *renewals >= k->max_renewals) ? CAPPED : GO_ON;
    }
    if (!hl_ka_transient(*st)) return FAILED;
    *retry_at = hl_next_attempt(k->pc, 0, l->valid_until_us);
    return hl_ka_may_retry(l, *retry_at, k->margin_us) ? RETRY : FAILED;   /* no time left: report it */
}

static void wait_until(struct hl_keepalive *k, int64_t t_us)
{
    hl_plat_cond_wait_until(&k->cv, &k->mu, t_us);
}

static void *ka_main(void *arg)
{
    struct hl_keepalive *k = arg;
    hilock *l = k->l;
    hilock_status st = HILOCK_OK;
    outcome out = GO_ON;
    long renewals = 0;
    int64_t retry_at = 0;
    int stop = 0;

    while (out == GO_ON || out == RETRY) {
        int64_t due;
        pthread_mutex_lock(&k->op);
        due = out == RETRY ? retry_at : hl_ka_renew_due(l);
        pthread_mutex_unlock(&k->op);
        pthread_mutex_lock(&k->mu);
        while (!k->stop && !k->kick && hl_now_us() < due) wait_until(k, due);
        stop = k->stop;
        if (k->kick && !stop && hl_now_us() < due) {   /* the owner extended or checked */
            k->kick = 0;
            pthread_mutex_unlock(&k->mu);
            out = GO_ON;
            continue;
        }
        k->kick = 0;
        pthread_mutex_unlock(&k->mu);
        if (stop) break;
        pthread_mutex_lock(&k->op);
        out = renew_step(k, l, &renewals, &retry_at, &st);
        pthread_mutex_unlock(&k->op);
    }

    pthread_mutex_lock(&k->mu);
    if (out == FAILED)
        snprintf(k->errmsg, sizeof k->errmsg, "%s", k->pc->errmsg[0] ? k->pc->errmsg :
                 hilock_strerror(st));
    else if (out == CAPPED)
        hl_ka_capped(k->errmsg, sizeof k->errmsg, l, renewals);
    k->status = out == FAILED ? st : HILOCK_OK;
    k->done = 1;
    stop = k->stop;
    pthread_mutex_unlock(&k->mu);
    if (out == FAILED && hl_ka_transient(st)) {   /* (NOT_HELD, LOST: extend has reported it) */
        hilock shadow;
        pthread_mutex_lock(&k->op);   /* (the owner's extend or check may be writing the lock) */
        shadow = *l;
        shadow.c = k->pc;
        hl_renewals_gave_up(&shadow, st, k->errmsg);
        l->lost_seen = shadow.lost_seen;
        pthread_mutex_unlock(&k->op);
    }
    /* once, and not after the owner began to release or free the lock */
    if (out == FAILED && !stop && k->on_lost) k->on_lost(l, st, k->arg);
    return NULL;
}

/* ---- start and stop ---- */

static void ka_free(struct hl_keepalive *k)
{
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
    pthread_mutex_destroy(&k->op);
    hilock_client_free(k->pc);
    free(k);
}

/* Stop and join the thread (release and free, through the hook). In a forked child
 * (hl_forked) only the memory is freed: the thread and the state of its mutexes belong to the
 * parent. */
static void ka_stop(hilock *l)
{
    struct hl_keepalive *k = l->ka;
    if (hl_forked(l->c)) {
        /* the thread is the parent's, and its mutexes may have been copied locked: joining or
         * destroying them hangs. Free the memory (the private client closes only our copies
         * of its sockets) and leave the rest alone. */
        hilock_client_free(k->pc);
        free(k);
        l->ka = NULL;
        l->hook = NULL;
        return;
    }
    if (pthread_equal(pthread_self(), k->th)) {
        /* release/free from on_lost: joining ourselves would hang, going on would free what
         * this thread is using. A programming error the header forbids: fail loudly. */
        fputs("hilock: hilock_release/hilock_free called from on_lost (see hilock.h)\n", stderr);
        abort();
    }
    pthread_mutex_lock(&k->mu);
    k->stop = 1;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
    pthread_join(k->th, NULL);
    l->ka = NULL;   /* (after the join: the thread copies the lock while it renews) */
    l->hook = NULL;
    ka_free(k);
}

static hilock_status ka_init(struct hl_keepalive *k)
{
    int rc;
    if (pthread_mutex_init(&k->op, NULL)) return HILOCK_ENOMEM;
    if (pthread_mutex_init(&k->mu, NULL)) {
        pthread_mutex_destroy(&k->op);
        return HILOCK_ENOMEM;
    }
    rc = hl_plat_cond_init(&k->cv);   /* deadlines are hl_now_us() */
    if (rc) {
        pthread_mutex_destroy(&k->mu);
        pthread_mutex_destroy(&k->op);
        return HILOCK_ENOMEM;
    }
    return HILOCK_OK;
}

static hilock_status keepalive_start(hilock *l, hilock_lost_fn on_lost, void *arg,
                                     const hilock_keepalive_options *given, size_t size)
{
    hilock_keepalive_options full, *o = &full;
    struct hl_keepalive *k;
    hilock_client *c;
    hilock_status st;
    sigset_t all, old;
    char why[200];
    int rc;
    if (!l) return HILOCK_EINVAL;
    c = l->c;
    /* (a client attached to a loop renews on the loop, below: no thread, one timer) */
    if ((!c->runner || hl_forked(c)) && (st = hl_check_fork(c)) != HILOCK_OK) return st;
    hilock_keepalive_options_init(&full);
    if (given && hl_sized_take(&full, sizeof full, given, size, ka_options_ends,
                               sizeof ka_options_ends / sizeof ka_options_ends[0],
                               "hilock_keepalive_options", why, sizeof why))
        return hl_fail(c, HILOCK_EINVAL, "keepalive: %s", why);
    if (o->max_renewals < 0) return hl_fail(c, HILOCK_EINVAL, "keepalive: max_renewals must be >= 0");
    if (o->max_hold_ms < 0 || o->max_hold_ms > HILOCK_TTL_MAX_MS)
        return hl_fail(c, HILOCK_EINVAL, "keepalive: max_hold_ms must be in 0..HILOCK_TTL_MAX_MS");
    if (o->lost_margin_ms < 0 || o->lost_margin_ms > HILOCK_TTL_MAX_MS)
        return hl_fail(c, HILOCK_EINVAL, "keepalive: lost_margin_ms must be in 0..HILOCK_TTL_MAX_MS");
    if (l->released) return hl_fail(c, HILOCK_EINVAL, "keepalive %s: the lock was released", l->shown);
    if (!hl_lock_renewable(l))
        return hl_fail(c, HILOCK_EINVAL, "keepalive %s: a legacy or bridge lock has none; "
                       "renew its stamp by extending it", l->shown);
    if (c->runner) return hl_loop_keepalive(l, on_lost, arg, o);
    if (l->ka) {
        if (!ka_done(l->ka))
            return hl_fail(c, HILOCK_EINVAL, "keepalive %s: already running", l->shown);
        ka_stop(l);   /* the last one ended (on_lost or a cap): replace it */
    }
    if (!(k = calloc(1, sizeof *k))) return hl_fail(c, HILOCK_ENOMEM, "out of memory");
    if ((st = ka_init(k)) != HILOCK_OK) {
        free(k);
        return hl_fail(c, st, "keepalive: out of resources");
    }
    if ((st = hl_client_new_like(c, &k->pc)) != HILOCK_OK) {
        k->pc = NULL;
        ka_free(k);
        return hl_fail(c, st, "keepalive: %s", hilock_last_config_error());
    }
    k->pc->obs_fn = c->obs_fn;   /* (hilock_observe.h: the observer as it is now) */
    k->pc->obs_arg = c->obs_arg;
    k->pc->obs_owner = c;
    k->l = l;
    k->on_lost = on_lost;
    k->arg = arg;
    k->max_renewals = o->max_renewals;
    k->hold_end_us = o->max_hold_ms ? hl_add_sat(hl_now_us(), o->max_hold_ms * 1000) : HL_NEVER;
    k->margin_us = o->lost_margin_ms * 1000;
    l->ka = k;
    l->hook = ka_hook;
    /* the thread starts with every signal blocked: the program's handlers run on its own
     * threads, and a write to a dead master cannot raise SIGPIPE on this one */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&k->th, NULL, ka_main, k);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        l->ka = NULL;
        l->hook = NULL;
        ka_free(k);
        return hl_fail(c, HILOCK_EIO, "keepalive %s: cannot start a thread", l->shown);
    }
    return hl_ok(c);
}

/* keepalive_start between hl_enter and hl_leave (the thread rule: lock.h). */
hilock_status hilock_keepalive_ex_sized(hilock *l, hilock_lost_fn on_lost, void *arg,
                                        const hilock_keepalive_options *given, size_t size)
{
    hilock_status st;
    int took;
    if (!l) return HILOCK_EINVAL;
    if ((st = hl_enter(l->c, &took)) != HILOCK_OK) return st;
    return hl_leave(l->c, took, keepalive_start(l, on_lost, arg, given, size));
}

/* The symbol binaries built against 0.1.0's header call (no size argument): that size. */
hilock_status (hilock_keepalive_ex)(hilock *l, hilock_lost_fn on_lost, void *arg,
                                    const hilock_keepalive_options *o)
{
    return hilock_keepalive_ex_sized(l, on_lost, arg, o, HL_KEEPALIVE_OPTIONS_V0_SIZE);
}

hilock_status hilock_keepalive(hilock *l, hilock_lost_fn on_lost, void *arg)
{
    return hilock_keepalive_ex(l, on_lost, arg, NULL);
}
