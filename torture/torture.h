/* SPDX-License-Identifier: BSD-3-Clause */
/* torture.h -- the mutual-exclusion torture harness: shared definitions.
 *
 * One orchestrator process (main.c) starts the lock servers, forks N workers (worker.c: the
 * blocking calls; async.c: hundreds of contenders on one event loop; cli.c: the `hilock`
 * command with COMMAND trees, behind a partitioning proxy) that contend on a few keys,
 * injects faults at random (main.c), then merges the workers' logs and judges them
 * (check.c), whichever kind wrote them. All on loopback, all bounded.
 *
 * Logs are text, one record per line, written with one write(2) each (O_APPEND), so a
 * worker killed with -9 leaves every record it finished. Times are CLOCK_MONOTONIC in
 * microseconds: one clock for every process on the machine, so logs are comparable. */
#ifndef HILOCK_TORTURE_H
#define HILOCK_TORTURE_H

#include <stdint.h>
#include <sys/types.h>
#include "hilock.h"

#define TT_MAXWORKERS 32
#define TT_MAXKEYS    8
#define TT_MAXRES     256         /* guarded resources: the async mode spreads over many keys */
#define TT_MAXPROXIES 8
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
    volatile int32_t  child;            /* cli: the running `hilock` process (0: none) */
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
    tt_resource res[TT_MAXRES];
    tt_slot     slot[TT_MAXWORKERS];
    volatile int32_t partitioned[TT_MAXPROXIES];   /* cli: proxy p forwards nothing while set */
    volatile int32_t proxy_epoch[TT_MAXPROXIES];   /* cli: bumped at a heal: cut every connection */
    volatile int32_t stderr_blocked[TT_MAXWORKERS];   /* cli: the slot fills hilock's stderr and stops reading it */
} tt_shm;

/* what a worker process is (torture.h's modes pick one) */
enum { TT_BLOCKING = 0,   /* worker.c: one contender, the blocking calls */
       TT_ASYNC,          /* async.c: hundreds of contenders on one event loop */
       TT_CLI };          /* cli.c: runs `hilock KEY COMMAND` again and again */

/* lock flavour the workers use: TT_SEM takes permits (hilock_sem_acquire), TT_RW shared or
 * exclusive grants (hilock_rw_acquire) */
enum { TT_MODERN = 0, TT_LEGACY, TT_BRIDGE, TT_FAIR, TT_SEM, TT_RW };

/* sem: the limit every worker passes and the checker judges (sem-violation's workers pass
 * more: a grant that ignores the limit) */
#define TT_SEM_LIMIT 3
/* sem: a key with no grant for this long while workers contend means permits leaked (a dead
 * holder's permit returns after its ttl, at most TT_TTL_MAX_MS; restarts and freezes add less) */
#define TT_SEM_GAP_BOUND_MS 4000
/* rw: the first TT_RW_WRITERS slots ask exclusive, every second one with the plain lock (ttl
 * TT_RW_WRITER_TTL_MS, wait TT_RW_WRITER_WAIT_MS), the others shared (ttl 300 or
 * TT_RW_READER_TTL_MAX_MS). A reader
 * lives at most 1.7 x its ttl after its grant (it holds up to 0.7 x, and an extend, or a kill
 * or a pause after one, adds one ttl); a writer that arrives waits for the readers granted
 * before it, then for the writers ahead of it (as long each), then for its wake-up: */
#define TT_RW_WRITERS           2
#define TT_RW_WRITER_TTL_MS     300
#define TT_RW_READER_TTL_MAX_MS 700
#define TT_RW_WRITER_WAIT_MS    5000
#define TT_RW_WAKE_MARGIN_MS    300
#define TT_RW_WAIT_BOUND_MS (17 * TT_RW_READER_TTL_MAX_MS / 10 + \
                             (TT_RW_WRITERS - 1) * 17 * TT_RW_WRITER_TTL_MS / 10 + TT_RW_WAKE_MARGIN_MS)

/* What a worker needs to know (copied into the child by fork). */
typedef struct tt_worker_cfg {
    const char *dir;                 /* run directory: logs go there */
    int         slot, gen;
    uint64_t    seed;
    int         nkeys;
    const char *keys[TT_MAXKEYS];
    int         nurls;
    const char *urls[TT_MAXSERVERS];
    int         flavour;             /* TT_MODERN, TT_LEGACY, TT_BRIDGE, TT_FAIR, TT_SEM, TT_RW */
    int         limit;               /* sem: the limit this worker passes */
    int         writer;              /* rw: 0 = asks shared, 1 = exclusive, 2 = the plain lock
                                        (hilock_acquire: the command's default beside --shared) */
    const char *codec;               /* legacy/bridge: preset name of hilock_codec_preset */
    int64_t     io_timeout_ms, connect_timeout_ms, retry_delay_ms;
    int         long_holds;          /* 1: hold most of the validity (violation scenario) */
    int64_t     ttl_fixed_ms;        /* > 0: always this ttl */
    tt_shm     *shm;
    const char *tls_ca_file;         /* rediss:// servers: the CA to trust; else NULL */
    int         kind;                /* TT_BLOCKING, TT_ASYNC, TT_CLI */
    int         inject;              /* violation modes: log a lie the checker must catch (see the mode) */
    int         contenders;          /* async: contenders on the loop */
    const char *hilock_bin;          /* cli: the command under test */
    const char *self_bin;            /* cli: this program (COMMAND's processes are `torture member`) */
} tt_worker_cfg;

/* worker.c: a blocking worker (kind TT_BLOCKING); runs until shm->stop; never returns (exits
 * the process). main.c starts each kind's own: this, tt_async_main or tt_cli_main. */
void tt_worker_main(const tt_worker_cfg *cfg) __attribute__((noreturn));
/* worker.c: hilock_options_init, then the servers and timeouts cfg gives (blocking and async workers) */
struct hilock_options;
void tt_client_options(struct hilock_options *o, const tt_worker_cfg *cfg);
/* async.c: one event loop with cfg->contenders contenders on cfg->nkeys keys (names of its own) */
void tt_async_main(const tt_worker_cfg *cfg) __attribute__((noreturn));
/* cli.c: a slot that runs `hilock` with COMMAND trees of `torture member` processes */
void tt_cli_main(const tt_worker_cfg *cfg) __attribute__((noreturn));
/* cli.c: a TCP proxy 127.0.0.1:listen_port -> 127.0.0.1:to_port that black-holes while
 * shm->partitioned[p] and cuts its connections when the partition heals */
void tt_proxy_main(tt_shm *shm, int p, int listen_fd, int to_port) __attribute__((noreturn));
int  tt_proxy_listen(int *port);   /* a listening socket on 127.0.0.1, port chosen by the kernel */
/* cli.c: `torture member LOG KEY start|HOLD_MS STOP_MS [LIE_MS]`: a process of COMMAND's tree */
int  tt_member_main(int argc, char **argv);

/* cli: hilock's -t, and how long a COMMAND tree can live at most by itself (cli.c's members
 * stop on their own: the orchestrator waits that long before it judges) */
#define TT_CLI_TTL_MS      600
#define TT_CLI_TREE_MAX_MS 3500   /* cli.c: HOLD_MAX_MS + STOP_MAX_MS + slack */

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
    int         expect_fence_regress;   /* a decreasing fence is logged on purpose: must be caught */
    int         limit;               /* sem: at most this many permits at once per key (0: a lock) */
    int         rw;                  /* rw: shared windows may meet, an exclusive one meets none */
    int         expect_wait_excess;  /* rw-violation: a writer's wait over the bound is logged on purpose */
} tt_check_opts;
int tt_check(const tt_check_opts *o);

/* shared helpers (worker.c) */
int64_t  tt_now_us(void);
/* The bound hilock.h states for one call of a worker, without its wait: a connect, then the
 * handshake, the command and its resend after NOSCRIPT, each a round trip of its own. */
static inline int64_t tt_call_bound_us(const tt_worker_cfg *cfg)
{
    return ((int64_t)cfg->connect_timeout_ms + 3 * (int64_t)cfg->io_timeout_ms) * 1000;
}
/* Until when a worker may believe it holds l, granted when its acquire returned at t1: what
 * the library says is safe, read now -- or nothing (t1) when the validity had already run out
 * by the time it was read (a pause between the grant and the read: now + 0 would claim the
 * pause itself as held, and the checker would see an overlap the worker never acted in). */
int64_t  tt_belief_until(const hilock *l, int64_t t1);
uint64_t tt_rand(uint64_t *s);
double   tt_uniform(uint64_t *s);          /* [0, 1) */
void     tt_sleep_us(int64_t us);
int      tt_have_legacy(void);                 /* hilock_legacy_acquire is linked in */
int      tt_have_kinds(void);                  /* hilock_sem_acquire and hilock_rw_acquire work */
/* the log records of torture.h's format, shared by every kind of worker (worker.c) */
void        tt_logf(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *tt_stname(int st);
/* C record (and X with the client's message for an error) of one call */
void        tt_log_call(int fd, void *client, const char *op, int st, int64_t t0, int64_t t1,
                        int64_t bound_us, int believed, int late, int key, uint64_t fence);
/* after a call the belief is what the library now says (a check re-read the servers' PTTL, an
 * extend whose answer was lost may have landed a shorter ttl): deadline d instead of `deadline`;
 * shorter: V cuts the windows, longer: E opens a new one */
void        tt_log_belief(int fd, int k, uint64_t fence, int64_t now, int64_t d, int64_t deadline);
/* the guarded write of key k with this fence, and its W record */
void        tt_guarded_write(int fd, tt_shm *shm, int k, uint64_t fence, int64_t deadline,
                             int64_t expiry_upper);

#endif
