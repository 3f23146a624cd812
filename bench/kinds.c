/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinds.c -- `make bench`, the counting semaphore and the shared/exclusive lock of issue 26
 * (docs/semaphore.md, docs/rwlock.md), against the bench's throwaway redis-server over TCP
 * 127.0.0.1, in three tables:
 *
 *  1. Uncontended acquire+release cycles on one connection: a permit of a semaphore
 *     (limit 3), a shared grant, an exclusive grant, next to the lock's cycle in the same run.
 *     The variants run in turn in short slices (lock, permit, shared, exclusive, lock, ...) as
 *     part 1 of bench.c does, so a burst of load elsewhere hits them alike; the ratio is the
 *     median of the per-slice ratios to the lock (target: the semaphore >= 0.8).
 *  2. A writer against a saturating reader load: READERS processes take the key shared, hold
 *     it 2 ms and ask again at once (some reader holds it all the time), while one writer asks
 *     exclusive every 10 ms. The writer's wait (acquire called -> granted): p50, p99, max; a
 *     reader-preferring lock would starve it. An exclusive grant seen beside a reader (counted
 *     in shared memory) is an overlap.
 *  3. Handoff: PROCS processes each acquire (waiting) -> hold 1 ms -> release, for each kind:
 *     the time from a release call to the grant of a process that was waiting when it was
 *     made (the lock for reference; a semaphore of limit 2; an rw lock with 1 writer and 3
 *     readers, whose grants to a writer and to readers are shown apart).
 *
 *  4. What waiting costs the server: IDLE_WAITERS processes wait (run_s each) behind a holder
 *     that does not let go -- the lock, a full semaphore, readers behind a writer, the fair
 *     lock, a Redlock of 3 masters (2 started here) -- with wake
 *     (the default: they block until a signal or poll_ms) and with wake = 0 (they poll every
 *     retry_delay_ms). The waiters' round trips per waiter-second (scripts and BLPOPs: INFO
 *     commandstats) and the server's CPU per second (INFO cpu) while they wait.
 *
 * All on the bench's knob HILOCK_BENCH_SECONDS (run_s: the time per variant).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* weak: `make bench` builds (and says so) while the kinds are not in the library */
#pragma weak hilock_sem_acquire
#pragma weak hilock_rw_acquire

#define SLICE_S      0.25
#define MAX_SLICES   256
#define TTL_MS       30000
#define SEM_LIMIT    3       /* table 1 */
#define HANDOFF_SEM  2       /* table 3: 4 processes for 2 permits */
#define READERS      4
#define PROCS        4
#define MAX_SAMPLES  100000
#define IDLE_WAITERS 20      /* table 4 */

typedef enum kind { K_LOCK, K_SEM, K_SHARED, K_EXCL, NKINDS } kind;
static const char *const kind_names[NKINDS] = { "lock (hilock_acquire)", "semaphore permit (limit 3)",
                                                "shared (hilock_rw_acquire)", "exclusive (hilock_rw_acquire)" };
/* a key per kind: a key holds one kind at a time */
static const char *const kind_keys[NKINDS] = { "bench:k:lock", "bench:k:sem", "bench:k:rw", "bench:k:rw" };

static hilock_status take(hilock_client *c, kind k, int limit, int64_t ttl, int64_t wait, hilock **l)
{
    switch (k) {
    case K_SEM:    return hilock_sem_acquire(c, kind_keys[k], limit, ttl, wait, l);
    case K_SHARED: return hilock_rw_acquire(c, kind_keys[k], HILOCK_SHARED, ttl, wait, l);
    case K_EXCL:   return hilock_rw_acquire(c, kind_keys[k], HILOCK_EXCLUSIVE, ttl, wait, l);
    default:       return hilock_acquire(c, kind_keys[k], ttl, wait, l);
    }
}

static void cycles(hilock_client *c, kind k, double secs, uint64_t *n, int64_t *us, int64_t *cpu)
{
    int64_t t0 = now_us(), c0 = cpu_us(), end = t0 + (int64_t)(secs * 1e6), t1;
    do {
        for (int i = 0; i < 32; i++) {
            hilock *l;
            if (take(c, k, SEM_LIMIT, TTL_MS, 0, &l) != HILOCK_OK) die(kind_names[k], hilock_client_errmsg(c));
            if (hilock_release(l) != HILOCK_OK) die(kind_names[k], hilock_client_errmsg(c));
            hilock_free(l);
        }
        *n += 32;
    } while ((t1 = now_us()) < end);
    *us += t1 - t0;
    *cpu += cpu_us() - c0;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void uncontended_kinds(hlt_redis *r, double run_s)
{
    static double ratio[NKINDS][MAX_SLICES];
    const char *url = r->url;
    hilock_client *c[NKINDS];
    uint64_t n[NKINDS] = { 0 };
    int64_t us[NKINDS] = { 0 }, cpu[NKINDS] = { 0 }, srv[NKINDS] = { 0 };
    int slices = (int)(run_s / SLICE_S + 0.5);
    if (slices < 2) slices = 2;
    if (slices > MAX_SLICES) slices = MAX_SLICES;
    for (int k = 0; k < NKINDS; k++) {
        uint64_t wn = 0;
        int64_t wus = 0, wcpu = 0;
        c[k] = client_with(&url, 1, NULL);
        cycles(c[k], (kind)k, 0.3, &wn, &wus, &wcpu);   /* warm: connect, EVAL once */
    }
    for (int s = 0; s < slices; s++) {
        double rate[NKINDS];
        for (int k = 0; k < NKINDS; k++) {
            uint64_t sn = 0;
            int64_t sus = 0, s0 = server_cpu_us(r);
            cycles(c[k], (kind)k, SLICE_S, &sn, &sus, &cpu[k]);
            srv[k] += server_cpu_us(r) - s0;
            n[k] += sn;
            us[k] += sus;
            rate[k] = (double)sn * 1e6 / (double)sus;
        }
        for (int k = 0; k < NKINDS; k++) ratio[k][s] = rate[k] / rate[K_LOCK];
    }
    printf("\nSemaphore and shared/exclusive lock (issue 26): uncontended acquire+release on one connection "
           "(TCP 127.0.0.1),\ncycles/s; ratio = this kind / the lock, the median of %d slice ratios (target: "
           "the semaphore >= 0.8);\nCPU = client / server (INFO cpu) user+sys us per cycle\n", slices);
    printf("  %-32s %9s %6s %6s %7s\n", "kind", "cycles/s", "CPU", "server", "ratio");
    for (int k = 0; k < NKINDS; k++) {
        qsort(ratio[k], (size_t)slices, sizeof ratio[k][0], cmp_dbl);
        printf("  %-32s %9.0f %6.1f %6.1f %7.2f\n", kind_names[k], (double)n[k] * 1e6 / (double)us[k],
               (double)cpu[k] / (double)n[k], (double)srv[k] / (double)n[k], slices % 2 ? ratio[k][slices / 2]
               : (ratio[k][slices / 2 - 1] + ratio[k][slices / 2]) / 2);
        hilock_client_free(c[k]);
    }
}

/* ---- contended runs (tables 2 and 3), in processes sharing this ---- */

typedef struct samples { uint32_t n; int64_t v[MAX_SAMPLES]; } samples;

typedef struct board {
    int64_t  start, end;
    int64_t  last_rel;       /* when the latest holder called release */
    int      readers, held;  /* holders now, shared / other (the overlap check) */
    uint32_t overlaps, grants[2];
    samples  wait;           /* table 2: the writer's waits */
    samples  hand[2];        /* table 3: handoffs to [0] a writer / permit / lock, [1] a reader */
} board;

typedef struct plan {
    hlt_redis *r;
    board     *b;
    kind       kinds[PROCS + 1];   /* what process i asks for */
    int        limit;
    int64_t    hold_us, gap_us;    /* each process: hold, then wait this long before asking again */
    int        waits_of;           /* table 2: record the waits of this process (-1: none) */
} plan;

static void put(samples *s, int64_t v)
{
    uint32_t i = __atomic_fetch_add(&s->n, 1, __ATOMIC_RELAXED);
    if (i < MAX_SAMPLES) s->v[i] = v;
}

static void sleep_us(int64_t us)
{
    struct timespec ts = { (time_t)(us / 1000000), (long)(us % 1000000) * 1000 };
    nanosleep(&ts, NULL);
}

/* one grant's bookkeeping: the overlap check (a reader beside a writer, a writer beside anyone,
 * more permits than the limit), the wait, the handoff it was */
static void granted(const plan *p, int i, int64_t t0, int64_t t1)
{
    board *b = p->b;
    int reader = p->kinds[i] == K_SHARED;
    int64_t rel = __atomic_load_n(&b->last_rel, __ATOMIC_SEQ_CST);
    int held = __atomic_add_fetch(reader ? &b->readers : &b->held, 1, __ATOMIC_SEQ_CST);
    if (reader) held = __atomic_load_n(&b->held, __ATOMIC_SEQ_CST) > 0;
    else if (p->kinds[i] == K_SEM) held = held > p->limit;
    else held = held > 1 || __atomic_load_n(&b->readers, __ATOMIC_SEQ_CST);
    if (held) __atomic_add_fetch(&b->overlaps, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&b->grants[reader], 1, __ATOMIC_RELAXED);
    if (i == p->waits_of) put(&b->wait, t1 - t0);
    if (rel > t0) put(&b->hand[reader], t1 - rel);   /* it waited, and a release freed it */
}

static void contend(int i, void *arg)
{
    const plan *p = arg;
    board *b = p->b;
    const char *url = p->r->url;
    hilock_client *c = client_with(&url, 1, NULL);
    while (now_us() < b->start) usleep(100);
    for (int64_t t0; (t0 = now_us()) < b->end;) {
        hilock *l;
        hilock_status st = take(c, p->kinds[i], p->limit, 5000, (b->end - t0) / 1000 + 1, &l);
        if (st == HILOCK_BUSY) {   /* still waiting at the end: a wait that counts too */
            if (i == p->waits_of) put(&b->wait, now_us() - t0);
            break;
        }
        if (st != HILOCK_OK) die(kind_names[p->kinds[i]], hilock_client_errmsg(c));
        granted(p, i, t0, now_us());
        sleep_us(p->hold_us);
        __atomic_sub_fetch(p->kinds[i] == K_SHARED ? &b->readers : &b->held, 1, __ATOMIC_SEQ_CST);
        __atomic_store_n(&b->last_rel, now_us(), __ATOMIC_SEQ_CST);
        if (hilock_release(l) != HILOCK_OK) die("release", hilock_client_errmsg(c));
        hilock_free(l);
        sleep_us(p->gap_us * (i == p->waits_of));
    }
    hilock_client_free(c);
}

static board *run_plan(plan *p, int nproc, double secs)
{
    board *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED) die("mmap", strerror(errno));
    memset(b, 0, sizeof *b);
    b->start = now_us() + 200000;   /* every process connected and ready */
    b->end = b->start + (int64_t)(secs * 1e6);
    p->b = b;
    in_processes(nproc, contend, p, "kinds contender");
    for (int s = 0; s < 3; s++) {
        samples *x = s == 2 ? &b->wait : &b->hand[s];
        if (x->n > MAX_SAMPLES) x->n = MAX_SAMPLES;
        qsort(x->v, x->n, sizeof x->v[0], cmp_i64);
    }
    return b;
}

static void writer_under_readers(hlt_redis *r, double secs)
{
    plan p = { r, NULL, { K_EXCL }, 1, 2000, 10000, 0 };
    board *b;
    for (int i = 1; i <= READERS; i++) p.kinds[i] = K_SHARED;
    b = run_plan(&p, READERS + 1, secs);
    printf("\nA writer against %d readers (each: shared, hold 2 ms, ask again at once; the writer: exclusive, "
           "hold 2 ms,\nevery 10 ms), %.1f s: the writer's wait = acquire called -> granted\n", READERS, secs);
    printf("  reader grants/s  writer grants  writer wait p50 ms  p99 ms  max ms  overlaps\n");
    printf("  %15.0f  %13u  %18.3f %7.3f %7.3f  %u\n", b->grants[1] / secs, b->grants[0],
           pct_ms(b->wait.v, b->wait.n, 0.5), pct_ms(b->wait.v, b->wait.n, 0.99),
           pct_ms(b->wait.v, b->wait.n, 1.0), b->overlaps);
    munmap(b, sizeof *b);
}

static void handoff_row(const char *label, const char *to, const board *b, int s, double secs)
{
    const samples *x = &b->hand[s];
    printf("  %-30s %-8s %7.0f  %6.3f %6.3f  %u\n", label, to, b->grants[s] / secs, pct_ms(x->v, x->n, 0.5),
           pct_ms(x->v, x->n, 0.99), b->overlaps);
}

static void handoffs(hlt_redis *r, double secs)
{
    static const struct { const char *label; kind k[PROCS]; int limit; } rows[] = {
        { "lock (reference)", { K_LOCK, K_LOCK, K_LOCK, K_LOCK }, 1 },
        { "semaphore, limit 2", { K_SEM, K_SEM, K_SEM, K_SEM }, HANDOFF_SEM },
        { "rw, 1 writer + 3 readers", { K_EXCL, K_SHARED, K_SHARED, K_SHARED }, 1 },
    };
    printf("\nHandoff: %d processes, each acquire (waiting) -> hold 1 ms -> release, %.1f s (TCP 127.0.0.1): a "
           "release\ncalled -> the grant of a process that was waiting then\n", PROCS, secs);
    printf("  %-30s %-8s %7s  %s\n", "", "", "", "handoff ms");
    printf("  %-30s %-8s %7s  %6s %6s  %s\n", "kind", "to", "acq/s", "p50", "p99", "overlaps");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        plan p = { r, NULL, { K_LOCK }, rows[i].limit, 1000, 0, -1 };
        board *b;
        memcpy(p.kinds, rows[i].k, sizeof rows[i].k);
        b = run_plan(&p, PROCS, secs);
        handoff_row(rows[i].label, rows[i].k[0] == K_EXCL ? "writer" : "any", b, 0, secs);
        if (rows[i].k[PROCS - 1] == K_SHARED) handoff_row("", "readers", b, 1, secs);
        munmap(b, sizeof *b);
    }
}

/* ---- 4. what waiting costs the server ---- */

/* A row of table 4: who waits, on how many masters (Redlock: the masters' calls summed, per
 * waiter-second), and the client's fair option. */
typedef struct idle_row { const char *what; kind k; size_t masters; int fair; } idle_row;
typedef struct idle_plan { const char *const *urls; const idle_row *row; int wake; double secs; } idle_plan;

static void tune_fair_wake(hilock_options *o) { o->fair = 1; }
static void tune_fair_no_wake(hilock_options *o) { o->fair = 1; o->wake = 0; }

static void idle_wait(int i, void *arg)
{
    const idle_plan *p = arg;
    void (*tune)(hilock_options *) = p->row->fair ? (p->wake ? tune_fair_wake : tune_fair_no_wake)
                                                  : p->wake ? NULL : tune_no_wake;
    hilock_client *c = client_with(p->urls, p->row->masters, tune);
    hilock *l = NULL;
    hilock_status st = take(c, p->row->k, 1, TTL_MS, (int64_t)(p->secs * 1000), &l);
    (void)i;
    if (st != HILOCK_BUSY) die("idle waiter", st == HILOCK_OK ? "granted behind a holder" : hilock_client_errmsg(c));
    hilock_client_free(c);
}

/* The round trips a waiter makes: its attempts (scripts) and its blocks (BLPOP); a script's
 * own commands are not counted (INFO stats would). */
static long long total_calls(hlt_redis *r)
{
    static const char *const cmd[] = { "cmdstat_evalsha:calls=", "cmdstat_eval:calls=", "cmdstat_blpop:calls=" };
    long long n = 0;
    for (size_t i = 0; i < sizeof cmd / sizeof cmd[0]; i++) {
        long long v = hlt_info_int(r, "commandstats", cmd[i]);
        n += v > 0 ? v : 0;
    }
    return n;
}

#define IDLE_MASTERS 3   /* the Redlock row */

/* One wait of the row's IDLE_WAITERS processes: the masters' calls it took (*calls) and how
 * long (us); *cpu_us the masters' server CPU. */
static int64_t idle_run(hlt_redis *const *m, idle_plan *p, long long *calls, int64_t *cpu_us)
{
    long long c0 = 0, c1 = 0;
    int64_t s0 = 0, s1 = 0, t0 = now_us(), dt;
    for (size_t i = 0; i < p->row->masters; i++) {
        c0 += total_calls(m[i]);
        s0 += server_cpu_us(m[i]);
    }
    in_processes(IDLE_WAITERS, idle_wait, p, "idle waiters");
    dt = now_us() - t0;
    for (size_t i = 0; i < p->row->masters; i++) {
        c1 += total_calls(m[i]);
        s1 += server_cpu_us(m[i]);
    }
    *calls = c1 - c0;
    *cpu_us = s1 - s0;
    return dt;
}

static void idle_waiters(hlt_redis *r, double secs)
{
    static const idle_row rows[] = {
        { "lock, held", K_LOCK, 1, 0 },
        { "semaphore (limit 1), full", K_SEM, 1, 0 },
        { "shared, behind a writer", K_SHARED, 1, 0 },
        { "fair lock, held", K_LOCK, 1, 1 },
        { "Redlock (3 masters), held", K_LOCK, IDLE_MASTERS, 0 },
    };
    hlt_redis *m[IDLE_MASTERS] = { r };
    const char *urls[IDLE_MASTERS] = { r->url };
    for (int i = 1; i < IDLE_MASTERS; i++) {
        if (!(m[i] = hlt_redis_start(NULL))) die("idle waiters", "could not start the Redlock row's masters");
        urls[i] = m[i]->url;
    }
    printf("\nWhat waiting costs the server: %d processes wait %.1f s each (blocking: %.1f s) behind a holder that keeps "
           "the key;\nround trips per waiter-second (scripts and BLPOPs, INFO commandstats; Redlock: per master; target "
           "<= 1\nwith blocking, whole and per second) and server CPU while they wait. whole: the whole wait, "
           "with each\nprocess's first attempt, last attempt, which leaves (costs of each wait, not of each second); "
           "per second: what\n%.1f s more of waiting cost (a %.1f s wait less a %.1f s one, the same waiters), which "
           "leaves those out.\nThe waiters of each kind keep one watch (a Redlock's: its first master's): one of them "
           "polls, the others block\nthrough its lease (wait.c); a fair lock's queue is its own (fair.c)\n",
           IDLE_WAITERS, secs, 2 * secs, secs, 2 * secs, secs);
    printf("  %-28s %-22s %24s %16s\n", "", "", "calls/waiter/s", "");
    printf("  %-28s %-22s %8s %15s %16s\n", "kind", "waiters", "whole", "per second", "server CPU ms/s");
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        const idle_row *row = &rows[k];
        hilock_client *hc = client_with(urls, row->masters, row->fair ? tune_fair_wake : NULL);
        hilock *h = NULL;
        if (take(hc, row->k == K_SHARED ? K_EXCL : row->k, 1, 600000, 0, &h) != HILOCK_OK)
            die("idle holder", hilock_client_errmsg(hc));
        for (int wake = 1; wake >= 0; wake--) {
            /* (blocking waiters wait twice as long: one behind the watch attempts every ~3 s,
             * so its first and last attempts would weigh much in a short wait) */
            idle_plan p = { urls, row, wake, wake ? 2 * secs : secs }, q = p;
            long long calls, short_calls = 0;
            int64_t cpu, short_cpu, dt, short_dt = 0;
            double n = (double)row->masters * IDLE_WAITERS;
            char per_s[16] = "-";
            q.secs = secs;
            if (wake) short_dt = idle_run(m, &q, &short_calls, &short_cpu);
            dt = idle_run(m, &p, &calls, &cpu);
            if (wake && dt > short_dt)
                snprintf(per_s, sizeof per_s, "%.2f", (double)(calls - short_calls) / n / ((double)(dt - short_dt) / 1e6));
            printf("  %-28s %-22s %8.2f %15s %16.2f\n", wake ? row->what : "", wake ? "block (poll_ms 1000)"
                   : "poll (retry_delay 50)", (double)calls / n / ((double)dt / 1e6), per_s,
                   (double)cpu / 1000.0 / (double)row->masters / ((double)dt / 1e6));
        }
        if (hilock_release(h) != HILOCK_OK) die("idle holder", hilock_client_errmsg(hc));
        hilock_free(h);
        hilock_client_free(hc);
    }
    for (int i = 1; i < IDLE_MASTERS; i++) hlt_redis_stop(m[i]);
}

void kinds_bench(hlt_redis *r, double run_s)
{
    if (!hilock_sem_acquire || !hilock_rw_acquire) {
        printf("\nSemaphore and shared/exclusive lock: not in this build (hilock_sem_acquire / hilock_rw_acquire)\n");
        return;
    }
    uncontended_kinds(r, run_s);
    writer_under_readers(r, run_s);
    handoffs(r, run_s * 0.75);
    idle_waiters(r, run_s < 5 ? 5 : run_s);   /* (long enough that a waiter's first and last attempts weigh little) */
}
