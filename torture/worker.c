/* SPDX-License-Identifier: BSD-3-Clause */
/* worker.c -- one contender: acquire a random key through the public API, write to the
 * guarded resource with the fencing token, maybe check and extend, write again, release.
 * Every call is logged with its start, end, bound and result; every belief ("I hold key k
 * with fence f until t") is logged the moment it starts and ends. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "hilock.h"
#ifdef HL_TORTURE_LEGACY
#include "hilock_legacy.h"
/* weak: the harness builds (and says "not available") while the legacy path is unfinished */
#pragma weak hilock_legacy_acquire
#endif
#include "torture.h"

/* weak: the harness builds (and says "not available") while the kinds are unfinished */
#pragma weak hilock_sem_acquire
#pragma weak hilock_rw_acquire

int tt_have_kinds(void) { return hilock_sem_acquire != NULL && hilock_rw_acquire != NULL; }

int tt_have_legacy(void)
{
#ifdef HL_TORTURE_LEGACY
    return hilock_legacy_acquire != NULL;
#else
    return 0;
#endif
}

int64_t tt_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t tt_belief_until(const hilock *l, int64_t t1)
{
    int64_t now = tt_now_us(), v = hilock_validity_ms(l);   /* (in this order: never later than
                                                               the library's own deadline) */
    return v > 0 ? now + v * 1000 : t1;
}

uint64_t tt_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);   /* splitmix64: any seed is fine */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

double tt_uniform(uint64_t *s) { return (double)(tt_rand(s) >> 11) / 9007199254740992.0; }

void tt_sleep_us(int64_t us)
{
    struct timespec ts;
    if (us <= 0) return;
    ts.tv_sec = (time_t)(us / 1000000);
    ts.tv_nsec = (long)(us % 1000000) * 1000;
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

typedef struct worker {
    const tt_worker_cfg *cfg;
    tt_slot  *slot;
    int       fd;
    uint64_t  rng;
    hilock_client *c;
} worker;

void tt_logf(int fd, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    if (write(fd, line, (size_t)n) != n) _exit(3);   /* a lost record would falsify the check */
}

#define logf_(w, ...) tt_logf((w)->fd, __VA_ARGS__)

const char *tt_stname(int s)
{
    static const char *const names[] = { "OK", "BUSY", "NOT_HELD", "LOST", "EINVAL", "EIO",
        "ETIMEDOUT", "EAUTH", "EREPLY", "EREPLICAS", "ENOQUORUM", "ENOMEM" };
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "UNKNOWN";
}

/* One call record: op status t_start t_end bound believed late key fence.
 * believed: the call ended before the holder's deadline, so the server answered while the
 * key was surely still ours (NOT_HELD then is a loss); late: it started surely after the
 * server's expiry (OK then is a lie). */
void tt_log_call(int fd, void *client, const char *op, int st, int64_t t0, int64_t t1,
                 int64_t bound_us, int believed, int late, int key, uint64_t fence)
{
    tt_logf(fd, "C %s %s %lld %lld %lld %d %d %d %llu", op, tt_stname(st), (long long)t0, (long long)t1,
            (long long)bound_us, believed, late, key, (unsigned long long)fence);
    if (st != HILOCK_OK && st != HILOCK_BUSY && st != HILOCK_NOT_HELD) {
        char msg[300];
        size_t i;
        snprintf(msg, sizeof msg, "%s", hilock_client_errmsg(client));
        for (i = 0; msg[i]; i++)
            if (msg[i] == '\n' || msg[i] == '\r') msg[i] = ' ';
        tt_logf(fd, "X %s %s %s", op, tt_stname(st), msg);
    }
}

static void log_call(worker *w, const char *op, hilock_status st, int64_t t0, int64_t t1,
                     int64_t bound_us, int believed, int late, int key, uint64_t fence)
{
    tt_log_call(w->fd, w->c, op, st, t0, t1, bound_us, believed, late, key, fence);
}

/* The guarded write: refused if a higher token was accepted before (compare-and-swap). */
void tt_guarded_write(int fd, tt_shm *shm, int k, uint64_t fence, int64_t deadline, int64_t expiry_upper)
{
    tt_resource *r = &shm->res[k];
    uint64_t h = __atomic_load_n(&r->highest, __ATOMIC_SEQ_CST);
    int accepted;
    int64_t t;
    for (;;) {
        if (fence < h) {
            accepted = 0;
            __atomic_add_fetch(&r->rejected, 1, __ATOMIC_SEQ_CST);
            break;
        }
        if (__atomic_compare_exchange_n(&r->highest, &h, fence, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
            accepted = 1;
            __atomic_add_fetch(&r->accepted, 1, __ATOMIC_SEQ_CST);
            break;
        }
    }
    t = tt_now_us();   /* after the decision: a refusal means the higher token was there before t */
    tt_logf(fd, "W %d %llu %lld %d %llu %d %d", k, (unsigned long long)fence, (long long)t, accepted,
            (unsigned long long)h, t < deadline, t > expiry_upper + TT_LATE_MARGIN_US);
}

/* what the holder believes it was granted, the A record's last field: a permit, shared,
 * exclusive; "-" a lock */
static char grant_kind(const worker *w)
{
    return w->cfg->flavour == TT_SEM ? 'p' : w->cfg->flavour != TT_RW ? '-' : w->cfg->writer ? 'x' : 's';
}

/* A lock or an exclusive grant writes (compare-and-swap, as ever). A shared holder reads: its
 * read is refused if an exclusive holder granted after it (a higher token: rw's fences) has
 * written. A permit neither: permits hold together by design, the checker counts them; it only
 * raises the key's highest token, so the injector sees a newer holder. */
static void guarded_write(worker *w, int k, uint64_t fence, int64_t deadline, int64_t expiry_upper)
{
    tt_resource *r = &w->cfg->shm->res[k];
    char g = grant_kind(w);
    uint64_t h;
    int64_t t;
    if (g == '-' || g == 'x') {
        tt_guarded_write(w->fd, w->cfg->shm, k, fence, deadline, expiry_upper);
        return;
    }
    h = __atomic_load_n(&r->highest, __ATOMIC_SEQ_CST);
    if (g == 'p') {
        while (h < fence && !__atomic_compare_exchange_n(&r->highest, &h, fence, 0, __ATOMIC_SEQ_CST,
                                                         __ATOMIC_SEQ_CST))
            ;
        return;
    }
    __atomic_add_fetch(h > fence ? &r->rejected : &r->accepted, 1, __ATOMIC_SEQ_CST);
    t = tt_now_us();
    tt_logf(w->fd, "W %d %llu %lld %d %llu %d %d", k, (unsigned long long)fence, (long long)t, h <= fence,
            (unsigned long long)h, t < deadline, t > expiry_upper + TT_LATE_MARGIN_US);
}

/* rw: a writer's wait, from its acquire call to its grant (T key start end granted);
 * rw-violation logs every 4th as started past the bound, a starved writer the checker must see */
static void log_writer_wait(worker *w, int k, int64_t t0, int64_t t1, int granted)
{
    static unsigned n;
    if (w->cfg->flavour != TT_RW || !w->cfg->writer) return;
    if (w->cfg->inject && ++n % 4 == 0) t0 -= (TT_RW_WAIT_BOUND_MS + 500) * 1000LL;
    logf_(w, "T %d %lld %lld %d", k, (long long)t0, (long long)t1, granted);
}

/* rw-violation: a writer that takes a shared grant and believes it exclusive */
static hilock_rw_mode rw_mode(const worker *w)
{
    return w->cfg->writer && !w->cfg->inject ? HILOCK_EXCLUSIVE : HILOCK_SHARED;
}

static hilock_status acquire(worker *w, const char *key, int64_t ttl, int64_t wait, hilock **l)
{
    if (w->cfg->flavour == TT_SEM) return hilock_sem_acquire(w->c, key, w->cfg->limit, ttl, wait, l);
    if (w->cfg->flavour == TT_RW && w->cfg->writer == 2 && !w->cfg->inject)
        return hilock_acquire(w->c, key, ttl, wait, l);   /* the plain lock: the exclusive side too */
    if (w->cfg->flavour == TT_RW) return hilock_rw_acquire(w->c, key, rw_mode(w), ttl, wait, l);
#ifdef HL_TORTURE_LEGACY
    if (w->cfg->flavour == TT_LEGACY) return hilock_legacy_acquire(w->c, key, ttl, wait, l);
#endif
    return hilock_acquire(w->c, key, ttl, wait, l);
}

static int64_t pick_ttl(worker *w)
{
    static const int64_t choices[] = TT_TTL_CHOICES;
    if (w->cfg->ttl_fixed_ms > 0) return w->cfg->ttl_fixed_ms;
    if (w->cfg->flavour == TT_RW)
        return w->cfg->writer ? TT_RW_WRITER_TTL_MS : tt_rand(&w->rng) % 2 ? 300 : TT_RW_READER_TTL_MAX_MS;
    return choices[tt_rand(&w->rng) % (sizeof choices / sizeof choices[0])];
}

static int64_t pick_wait(worker *w)
{
    double u = tt_uniform(&w->rng);
    if (w->cfg->flavour == TT_RW && w->cfg->writer) return TT_RW_WRITER_WAIT_MS;   /* its wait is measured */
    return u < 0.2 ? 0 : u < 0.5 ? 300 : 1000;
}

static int64_t hold_us(worker *w, hilock *l)
{
    int64_t v = hilock_validity_ms(l) * 1000;
    if (w->cfg->long_holds) return v * 8 / 10;
    /* rw readers: a steady stream, long enough that some reader always holds the key */
    if (w->cfg->flavour == TT_RW && !w->cfg->writer && tt_uniform(&w->rng) < 0.85)
        return 50000 + (int64_t)(tt_uniform(&w->rng) * 200000);
    if (tt_uniform(&w->rng) < 0.85) return (int64_t)(tt_uniform(&w->rng) * 5000);
    return (int64_t)(tt_uniform(&w->rng) * 0.7 * (double)v);
}

/* After any call the belief is what the library now says: a check re-reads the servers'
 * PTTL, an extend whose answer was lost may have landed a shorter ttl. Shorter: "V" cuts
 * the windows; longer (check or extend OK): "E" opens a new one. */
void tt_log_belief(int fd, int k, uint64_t fence, int64_t now, int64_t d, int64_t deadline)
{
    if (d != deadline)
        tt_logf(fd, "%c %d %llu %lld %lld", d < deadline ? 'V' : 'E', k, (unsigned long long)fence, (long long)now,
                (long long)d);
}

static int64_t rebelieve(worker *w, hilock *l, int k, uint64_t fence, int64_t deadline)
{
    int64_t now = tt_now_us(), d = now + hilock_validity_ms(l) * 1000;
    tt_log_belief(w->fd, k, fence, now, d, deadline);
    w->slot->valid_until_us = d;
    return d;
}

/* fence-violation: every 8th holding is logged with half its fence, a token that went
 * backwards; the checker must see it (the guarded writes keep the real one) */
static uint64_t logged_fence(worker *w, uint64_t fence)
{
    static unsigned n;
    return w->cfg->inject && w->cfg->flavour != TT_RW && ++n % 8 == 0 ? fence / 2 : fence;
}

static void one_round(worker *w)
{
    const tt_worker_cfg *cfg = w->cfg;
    int k = (int)(tt_rand(&w->rng) % (uint64_t)cfg->nkeys);
    int64_t ttl = pick_ttl(w), wait = pick_wait(w);
    int64_t io = tt_call_bound_us(cfg);   /* (a call's bound, hilock.h) */
    int64_t t0, t1, deadline, expiry_upper;
    uint64_t fence;
    hilock_status st;
    hilock *l = NULL;

    w->slot->key = k;
    w->slot->state = TT_ACQUIRING;
    t0 = tt_now_us();
    st = acquire(w, cfg->keys[k], ttl, wait, &l);
    t1 = tt_now_us();
    log_call(w, "acq", st, t0, t1, wait * 1000 + io, 0, 0, k, st == HILOCK_OK ? hilock_fence(l) : 0);
    log_writer_wait(w, k, t0, t1, st == HILOCK_OK);
    if (st != HILOCK_OK) {
        w->slot->state = TT_IDLE;
        if (st != HILOCK_BUSY) tt_sleep_us(5000 + (int64_t)(tt_rand(&w->rng) % 15000));
        return;
    }
    deadline = tt_belief_until(l, t1);
    expiry_upper = t1 + ttl * 1000;   /* the server's PX started before t1 */
    fence = hilock_fence(l);
    logf_(w, "A %d %llu %lld %lld %lld %lld %lld %c", k, (unsigned long long)logged_fence(w, fence), (long long)t0,
          (long long)t1, (long long)deadline, (long long)ttl, (long long)wait, grant_kind(w));
    w->slot->fence = fence;
    w->slot->ttl_ms = ttl;
    w->slot->valid_until_us = deadline;
    w->slot->state = TT_HOLDING;

    guarded_write(w, k, fence, deadline, expiry_upper);
    tt_sleep_us(hold_us(w, l));

    if (tt_uniform(&w->rng) < 0.1) {
        t0 = tt_now_us();
        st = hilock_check(l);
        t1 = tt_now_us();
        log_call(w, "chk", st, t0, t1, io, t1 < deadline, t0 > expiry_upper + TT_LATE_MARGIN_US, k, fence);
        deadline = rebelieve(w, l, k, fence, deadline);
    }
    if (tt_uniform(&w->rng) < 0.3) {
        t0 = tt_now_us();
        st = hilock_extend(l, ttl);
        t1 = tt_now_us();
        log_call(w, "ext", st, t0, t1, io, t1 < deadline, t0 > expiry_upper + TT_LATE_MARGIN_US, k, fence);
        if (st == HILOCK_OK || st == HILOCK_ETIMEDOUT || st == HILOCK_EIO || st == HILOCK_ENOQUORUM)
            expiry_upper = t1 + ttl * 1000;   /* the new ttl may have landed */
        deadline = rebelieve(w, l, k, fence, deadline);
        if (st == HILOCK_OK && !w->cfg->long_holds) tt_sleep_us((int64_t)(tt_uniform(&w->rng) * 3000));
    }
    guarded_write(w, k, fence, deadline, expiry_upper);

    w->slot->state = TT_RELEASING;
    t0 = tt_now_us();
    logf_(w, "R %d %llu %lld", k, (unsigned long long)fence, (long long)t0);   /* belief ends */
    st = hilock_release(l);
    t1 = tt_now_us();
    log_call(w, "rel", st, t0, t1, io, t1 < deadline, t0 > expiry_upper + TT_LATE_MARGIN_US, k, fence);
    hilock_free(l);
    w->slot->state = TT_IDLE;
    /* rw writers come back every 100-300 ms: the readers get their turns between them */
    if (grant_kind(w) == 'x') tt_sleep_us(100000 + (int64_t)(tt_rand(&w->rng) % 200000));
    else tt_sleep_us((int64_t)(tt_rand(&w->rng) % 10000));
}

void tt_client_options(hilock_options *o, const tt_worker_cfg *cfg)
{
    hilock_options_init(o);
    o->servers = cfg->urls;
    o->nservers = (size_t)cfg->nurls;
    o->io_timeout_ms = cfg->io_timeout_ms;
    o->connect_timeout_ms = cfg->connect_timeout_ms;
    o->retry_delay_ms = cfg->retry_delay_ms;
}

void tt_worker_main(const tt_worker_cfg *cfg)
{
    char path[512];
    hilock_options o;
    worker w;
    memset(&w, 0, sizeof w);
    prctl(PR_SET_PDEATHSIG, SIGKILL);   /* never outlive the orchestrator */
    signal(SIGPIPE, SIG_DFL);   /* as an application would have it: the library must cope */
    if (getppid() == 1) _exit(2);
    w.cfg = cfg;
    w.slot = &cfg->shm->slot[cfg->slot];
    w.rng = cfg->seed ^ ((uint64_t)cfg->slot << 32) ^ ((uint64_t)cfg->gen << 48);
    snprintf(path, sizeof path, "%s/w%02d-%03d.log", cfg->dir, cfg->slot, cfg->gen);
    w.fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC, 0644);
    if (w.fd < 0) _exit(2);
    logf_(&w, "H %d %d %d %s", cfg->slot, cfg->gen, (int)getpid(),
          cfg->flavour == TT_LEGACY ? "legacy" : cfg->flavour == TT_BRIDGE ? "bridge"
          : cfg->flavour == TT_FAIR ? "fair" : cfg->flavour == TT_SEM ? "sem"
          : cfg->flavour != TT_RW ? "modern" : cfg->writer == 2 ? "rw-plain-writer"
          : cfg->writer ? "rw-writer" : "rw-reader");

    tt_client_options(&o, cfg);
    o.bridge = cfg->flavour == TT_BRIDGE;
    o.fair = cfg->flavour == TT_FAIR;
    o.tls_ca_file = cfg->tls_ca_file;
#ifdef HL_TORTURE_LEGACY
    if (cfg->codec && hilock_codec_preset(cfg->codec, &o.codec) != HILOCK_OK) _exit(2);
#endif
    if (hilock_client_new(&o, &w.c) != HILOCK_OK) {
        logf_(&w, "X new EINVAL %s", hilock_last_config_error());
        _exit(2);
    }
    while (!cfg->shm->stop) one_round(&w);
    hilock_client_free(w.c);
    logf_(&w, "Q");
    _exit(0);
}
