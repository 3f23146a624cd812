/* torture.h -- the mutual-exclusion torture harness: shared definitions.
 *
 * One orchestrator process (main.c) starts the lock servers, forks N workers (worker.c)
 * that contend on a few keys through the public API, injects faults at random (main.c),
 * then merges the workers' logs and judges them (check.c). All on loopback, all bounded.
 *
 * Logs are text, one record per line, written with one write(2) each (O_APPEND), so a
 * worker killed with -9 leaves every record it finished. Times are CLOCK_MONOTONIC in
 * microseconds: one clock for every process on the machine, so logs are comparable. */
#ifndef HILOCK_TORTURE_H
#define HILOCK_TORTURE_H

#include <stdint.h>
#include <sys/types.h>

#define TT_MAXWORKERS 32
#define TT_MAXKEYS    8
#define TT_MAXSERVERS 5
#define TT_LATE_MARGIN_US 30000   /* past the server's expiry by this much = surely expired */

/* what a worker is doing, published in shared memory for the fault injector */
enum { TT_IDLE = 0, TT_ACQUIRING, TT_HOLDING, TT_RELEASING };

typedef struct tt_slot {
    volatile int32_t  pid;
    volatile int32_t  state;
    volatile int32_t  key;
    volatile int64_t  ttl_ms;
    volatile uint64_t fence;
    volatile int64_t  valid_until_us;   /* monotonic; the holder's believed deadline */
} tt_slot;

/* The guarded resource: per key, the highest fencing token it has accepted. A write with
 * a lower token is refused (compare-and-swap in shared memory: no lock server involved,
 * and a stopped or killed writer can never block it). */
typedef struct tt_resource {
    uint64_t highest;
    uint64_t accepted, rejected;
} tt_resource;

typedef struct tt_shm {
    volatile int32_t stop;
    tt_resource res[TT_MAXKEYS];
    tt_slot     slot[TT_MAXWORKERS];
} tt_shm;

/* lock flavour the workers use */
enum { TT_MODERN = 0, TT_LEGACY, TT_BRIDGE, TT_FAIR };

/* What a worker needs to know (copied into the child by fork). */
typedef struct tt_worker_cfg {
    const char *dir;                 /* run directory: logs go there */
    int         slot, gen;
    uint64_t    seed;
    int         nkeys;
    const char *keys[TT_MAXKEYS];
    int         nurls;
    const char *urls[TT_MAXSERVERS];
    int         flavour;             /* TT_MODERN, TT_LEGACY, TT_BRIDGE, TT_FAIR */
    const char *codec;               /* legacy/bridge: preset name of hilock_codec_preset */
    int64_t     io_timeout_ms, connect_timeout_ms, retry_delay_ms;
    int         long_holds;          /* 1: hold most of the validity (violation scenario) */
    int64_t     ttl_fixed_ms;        /* > 0: always this ttl */
    tt_shm     *shm;
    const char *tls_ca_file;         /* rediss:// servers: the CA to trust; else NULL */
} tt_worker_cfg;

/* worker.c: runs until shm->stop; never returns (exits the process) */
void tt_worker_main(const tt_worker_cfg *cfg) __attribute__((noreturn));

/* ttl choices (ms) when not fixed; the longest one is the "max TTL" of the rules */
#define TT_TTL_CHOICES { 300, 700, 1200 }
#define TT_TTL_MAX_MS  1200

/* check.c: merge the logs in dir, print the report to stdout and to dir/report.txt.
 * expect_overlap: the scenario violates a documented rule on purpose; the run passes only
 * if the checker catches it. Returns 0 = pass, 1 = fail. */
typedef struct tt_check_opts {
    const char *dir;
    const char *mode;
    int         expect_overlap;
    int64_t     tolerance_us;        /* scheduling slack allowed over each call's bound */
    int         allow_lost;          /* failover modes: LOST is an expected result */
    int         quorum;              /* Redlock: a master restarted empty may cost a lock its majority */
} tt_check_opts;
int tt_check(const tt_check_opts *o);

/* shared helpers (worker.c) */
int64_t  tt_now_us(void);
uint64_t tt_rand(uint64_t *s);
double   tt_uniform(uint64_t *s);          /* [0, 1) */
void     tt_sleep_us(int64_t us);
int      tt_have_legacy(void);                 /* hilock_legacy_acquire is linked in */

#endif
