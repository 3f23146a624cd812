/* SPDX-License-Identifier: BSD-3-Clause */
/* main.c -- the torture orchestrator: start the lock servers of a mode, fork the workers,
 * inject faults at random (all on loopback, all bounded), stop, and run the checker.
 *
 *   torture [--modes=a,b] [--duration=S] [--seed=N] [--workers=N] [--keys=N] [--dir=D]
 *           [--tolerance-ms=N] [--hilock=PATH]
 *   torture check DIR [--mode=NAME] [--expect-overlap] [--allow-lost]
 *   torture --list
 *
 * See torture/README.md for the modes, the faults and what the checker judges. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"
#include "sentinel_fixture.h"
#include "tls_fixture.h"
#include "cluster_fixture.h"
#include "hilock.h"
#include "hilock_async.h"
#include "torture.h"

#define IO_TIMEOUT_MS      250
#define LEGACY_TTL_MS      700   /* the recipe needs one timeout for every client of a key */
#define LEGACY_CODEC       "node-redis-lock"
#define NODE_MODULES       "tests/interop/node/node_modules"
#define CONNECT_TIMEOUT_MS 250
#define RETRY_DELAY_MS     20

/* ---- faults ---- */
enum {
    F_KILL_HOLDER = 0,    /* kill -9 of a worker while it holds a lock, then a new worker   */
    F_PAUSE_HOLDER,       /* SIGSTOP of a holder for longer than its ttl, then SIGCONT       */
    F_RESTART_DELAYED,    /* kill -9 of a server, down for the max TTL, restart (no persistence) */
    F_RESTART_AOF,        /* appendfsync always on, kill -9, restart at once (data kept)     */
    F_FREEZE_SHORT,       /* SIGSTOP of a server shorter than io_timeout                      */
    F_FREEZE_LONG,        /* SIGSTOP of a server longer than io_timeout (up to 6x)            */
    F_RESTART_NOW,        /* violation scenario: rolling restart of a majority at once        */
    F_FAILOVER,           /* Sentinel: SENTINEL failover, until the old master is a replica   */
    F_FAILOVER_FREEZE,    /* Sentinel: master stopped until the Sentinels promote the replica */
    F_CLUSTER_FAILOVER,   /* Cluster: CLUSTER FAILOVER on a shard master's replica            */
    F_CLUSTER_KILL,       /* Cluster: kill -9 of a shard master, its replica elected, restart */
    F_FREEZE_IO,          /* async: SIGSTOP of the server for 0.5-2 x io_timeout (timeouts after writing) */
    F_KILL_HILOCK,        /* cli: kill -9 of a running `hilock` (its guard must end COMMAND in time) */
    F_TERM_HILOCK,        /* cli: SIGTERM to a running `hilock` (passed on; the tree must be gone before the release) */
    F_PARTITION,          /* cli: a proxy forwards nothing for 0.5-2 x the ttl, then cuts its connections */
    F_FREEZE_MEMBER,      /* redlock-mixed: the next Redlock member in turn stopped longer than io_timeout */
    F_FREEZE_SEED,        /* Cluster: SIGSTOP of the node the URLs name first, below the node timeout */
    F_MIGRATE_SLOT,       /* Cluster: a hot key's slot moved to another master (MIGRATE, SETSLOT) */
    F_STOP_HILOCK,        /* cli: SIGSTOP of a running `hilock` past its ttl, then SIGCONT (its guard acts) */
    F_BLOCK_STDERR,       /* cli: hilock's stderr (a pipe) filled and not read for 1-3 x the ttl, partitioned too */
    F_NKINDS
};
static const char *const fault_names[F_NKINDS] = { "kill9-holder", "pause-holder", "restart-delayed",
    "restart-aof", "freeze-short", "freeze-long", "restart-immediately", "failover", "failover-by-freeze",
    "failover-cluster", "failover-cluster-kill", "freeze-io", "kill9-hilock", "term-hilock", "partition", "freeze-member",
    "freeze-seed", "migrate-slot", "stop-hilock", "block-stderr" };

typedef struct mode {
    const char *name;
    const char *what;
    int         nservers;
    int         flavour;
    int         weights[F_NKINDS];   /* relative frequency of each fault; 0 = never */
    int         workers, keys;       /* 0 = the command line's */
    int64_t     ttl_fixed_ms;
    int         long_holds;
    int         expect_overlap;
    int         gap_min_ms, gap_max_ms;
    const char *(*unavailable)(void);   /* NULL = always available; else why not */
    int         mixed;       /* even workers use flavour, odd workers mixed_flavour (bridge: a fleet
                                mid-migration, odd workers legacy; fair: odd workers non-fair) */
    int         mixed_flavour;
    int         node_peer;   /* one more worker: the real npm redis-lock 0.0.9 client, if installed */
    int         sentinel;    /* servers: master + replica + 3 Sentinels (tests/sentinel_fixture.h) */
    int         tls;         /* servers on TLS ports only (tests/tls_fixture.h), rediss:// URLs */
    int         cluster;     /* servers: a Redis Cluster, 3 masters + 3 replicas (tests/cluster_fixture.h) */
    int         kind;        /* TT_BLOCKING, TT_ASYNC (contenders per loop process), TT_CLI */
    int         contenders;
    int         proxies;     /* cli: this many slots reach the server through a partitioning proxy */
    int         members;     /* redlock-mixed: 5 Redlock members, direct + Sentinel + Cluster */
    int         inject;      /* the workers log a lie on purpose (the mode's violation) */
    int         expect_fence_regress;
    int         limit;       /* sem: the limit the workers pass (0: TT_SEM_LIMIT, the one judged) */
} mode;

static const char *legacy_missing(void)
{
    return tt_have_legacy() ? NULL : "hilock_legacy_acquire is not in the tree yet (legacy issue)";
}

static const char *sentinel_missing(void)
{
    hilock_client *c = NULL;
    const char *url = "redis-sentinel://127.0.0.1:1#probe";
    hilock_status st = hilock_client_open(url, &c);
    hilock_client_free(c);
    return st == HILOCK_OK ? NULL : "this build refuses redis-sentinel:// URLs";
}

static void no_watch(void *data, int fd, int events) { (void)data; (void)fd; (void)events; }
static void no_timer(void *data, int64_t ms) { (void)data; (void)ms; }

/* async-cluster needs Cluster URLs on the event loop (a build that refuses them says so) */
static const char *async_cluster_missing(void)
{
    hilock_client *c = NULL;
    hilock_loop hooks = { NULL, no_watch, no_timer, NULL };
    hilock_status st = hilock_client_open("redis-cluster://127.0.0.1:1", &c);
    if (st == HILOCK_OK) st = hilock_loop_attach(c, &hooks);
    hilock_client_free(c);
    return st == HILOCK_OK ? NULL : "this build refuses redis-cluster:// URLs on an event loop";
}

static const char *kinds_missing(void)
{
    return tt_have_kinds() ? NULL : "hilock_sem_acquire / hilock_rw_acquire are not in the tree yet";
}

static char hilock_bin[PATH_MAX], self_bin[PATH_MAX];

static const char *hilock_missing(void)
{
    return access(hilock_bin, X_OK) == 0 ? NULL : "build/hilock is not built (make build/hilock)";
}

#define ASYNC_WHAT "one master, 2 loop processes x 128 contenders (hilock_acquire_async on a hand-written " \
    "poll loop, wake = 0 so waiting acquires retry), 64 keys: the server stopped for 0.5-2 x io_timeout " \
    "(timeouts after writing, undos queued behind retries), restarted, loop processes killed and paused"
#define CLI_WHAT "4 slots running `hilock -t 600ms -w 5s KEY sh -c 'member & member & wait'` on 1 key, 3 " \
    "of them through a proxy that partitions them for 0.5-2 x the ttl; hilock killed with -9, sent SIGTERM, " \
    "stopped past its ttl, or its --trace stderr left full and unread; " \
    "the checker " \
    "judges the lifetimes of COMMAND's whole tree"

static const mode modes[] = {
    { .name = "single", .nservers = 1, .flavour = TT_MODERN,
      .what = "one master: workers killed and paused, server restarted (delayed, and with appendfsync "
              "always), server stopped shorter and longer than io_timeout",
      .weights = { [F_KILL_HOLDER] = 3, [F_PAUSE_HOLDER] = 3, [F_RESTART_DELAYED] = 1, [F_RESTART_AOF] = 1,
                   [F_FREEZE_SHORT] = 2, [F_FREEZE_LONG] = 2 },
      .gap_min_ms = 300, .gap_max_ms = 1200 },
    { .name = "redlock", .nservers = 5, .flavour = TT_MODERN,
      .what = "5 independent masters: workers killed and paused, one or two masters killed and "
              "restarted after the max TTL, one or two masters stopped shorter and longer than io_timeout",
      .weights = { [F_KILL_HOLDER] = 3, [F_PAUSE_HOLDER] = 3, [F_RESTART_DELAYED] = 2,
                   [F_FREEZE_SHORT] = 2, [F_FREEZE_LONG] = 2 },
      .gap_min_ms = 300, .gap_max_ms = 1200 },
    { .name = "legacy", .nservers = 1, .flavour = TT_LEGACY, .node_peer = 1, .ttl_fixed_ms = LEGACY_TTL_MS,
      .what = "one master, the legacy SETNX/GETSET recipe (codec node-redis-lock, one timeout for every "
              "client, as the recipe requires), the real node client as a peer: the faults of single",
      .weights = { [F_KILL_HOLDER] = 3, [F_PAUSE_HOLDER] = 3, [F_RESTART_DELAYED] = 1, [F_RESTART_AOF] = 1,
                   [F_FREEZE_SHORT] = 2, [F_FREEZE_LONG] = 2 },
      .gap_min_ms = 300, .gap_max_ms = 1200, .unavailable = legacy_missing },
    { .name = "bridge", .nservers = 1, .flavour = TT_BRIDGE, .mixed = 1, .mixed_flavour = TT_LEGACY,
      .node_peer = 1,
      .ttl_fixed_ms = LEGACY_TTL_MS,
      .what = "one master, a fleet mid-migration: bridge locks and legacy locks on the same keys, the "
              "real node client as a peer: the faults of single",
      .weights = { [F_KILL_HOLDER] = 3, [F_PAUSE_HOLDER] = 3, [F_RESTART_DELAYED] = 1, [F_RESTART_AOF] = 1,
                   [F_FREEZE_SHORT] = 2, [F_FREEZE_LONG] = 2 },
      .gap_min_ms = 300, .gap_max_ms = 1200, .unavailable = legacy_missing },
    { .name = "fair", .nservers = 1, .flavour = TT_FAIR, .mixed = 1, .mixed_flavour = TT_MODERN,
      .what = "one master, fair locks (options.fair) and non-fair ones on the same keys: the faults "
              "of single (killed and paused workers are also dead and frozen waiters in the queue)",
      .weights = { [F_KILL_HOLDER] = 3, [F_PAUSE_HOLDER] = 3, [F_RESTART_DELAYED] = 1, [F_RESTART_AOF] = 1,
                   [F_FREEZE_SHORT] = 2, [F_FREEZE_LONG] = 2 },
      .gap_min_ms = 300, .gap_max_ms = 1200 },
    { .name = "sentinel", .nservers = 1, .flavour = TT_MODERN, .sentinel = 1,
      .what = "master + replica behind 3 Sentinels (failover_guard on): manual failovers, failovers "
              "by a stopped master, workers killed and paused, master stopped below io_timeout and "
              "below down-after-milliseconds",
      .weights = { [F_KILL_HOLDER] = 2, [F_PAUSE_HOLDER] = 2, [F_FREEZE_SHORT] = 2, [F_FREEZE_LONG] = 1,
                   [F_FAILOVER] = 2, [F_FAILOVER_FREEZE] = 1 },
      .gap_min_ms = 300, .gap_max_ms = 1200, .unavailable = sentinel_missing },
    { .name = "tls", .nservers = 1, .flavour = TT_MODERN, .tls = 1,
      .what = "one master over TLS only (rediss://, a CA made for the run): the faults of single, so "
              "sessions break mid-handshake and mid-record and are made again",
      .weights = { [F_KILL_HOLDER] = 3, [F_PAUSE_HOLDER] = 3, [F_RESTART_DELAYED] = 1, [F_RESTART_AOF] = 1,
                   [F_FREEZE_SHORT] = 2, [F_FREEZE_LONG] = 2 },
      .gap_min_ms = 300, .gap_max_ms = 1200 },
    { .name = "cluster", .nservers = 1, .flavour = TT_MODERN, .cluster = 1,
      .what = "a Redis Cluster, 3 masters + 3 replicas (failover_guard on; odd workers name only the first "
              "seed): CLUSTER FAILOVER on a shard's replica, a shard master killed (its replica elected, then it "
              "rejoins), the first seed stopped below the node timeout, a hot key's slot migrated to another "
              "master, workers killed and paused",
      .weights = { [F_KILL_HOLDER] = 2, [F_PAUSE_HOLDER] = 2, [F_CLUSTER_FAILOVER] = 2, [F_CLUSTER_KILL] = 1,
                   [F_FREEZE_SEED] = 2, [F_MIGRATE_SLOT] = 2 },
      .gap_min_ms = 300, .gap_max_ms = 1200 },
    { .name = "async", .nservers = 1, .flavour = TT_MODERN, .kind = TT_ASYNC, .workers = 2, .contenders = 128,
      .keys = 256, .what = ASYNC_WHAT,
      .weights = { [F_KILL_HOLDER] = 1, [F_PAUSE_HOLDER] = 1, [F_FREEZE_IO] = 10, [F_RESTART_DELAYED] = 1,
                   [F_RESTART_AOF] = 1 },
      .gap_min_ms = 200, .gap_max_ms = 600 },
    { .name = "async-cluster", .nservers = 1, .flavour = TT_MODERN, .kind = TT_ASYNC, .cluster = 1, .workers = 2,
      .contenders = 128, .keys = 256,
      .what = "the async workers of mode async on the cluster of mode cluster (one loop process names every "
              "node as a seed, the other only the first): the cluster faults, loop processes killed and paused",
      .weights = { [F_KILL_HOLDER] = 1, [F_PAUSE_HOLDER] = 1, [F_CLUSTER_FAILOVER] = 1, [F_FREEZE_SEED] = 3,
                   [F_MIGRATE_SLOT] = 3 },
      .gap_min_ms = 300, .gap_max_ms = 1200, .unavailable = async_cluster_missing },
    { .name = "cli", .nservers = 1, .flavour = TT_MODERN, .kind = TT_CLI, .workers = 4, .keys = 1, .proxies = 3,
      .what = CLI_WHAT, .weights = { [F_KILL_HILOCK] = 2, [F_TERM_HILOCK] = 1, [F_PARTITION] = 4,
                                     [F_STOP_HILOCK] = 2, [F_BLOCK_STDERR] = 2 },
      .gap_min_ms = 300, .gap_max_ms = 1200, .unavailable = hilock_missing },
    { .name = "redlock-mixed", .nservers = 5, .flavour = TT_MODERN, .members = 1, .workers = 6,
      .what = "Redlock over 5 members of every kind: 3 direct masters, a Sentinel group, a Cluster of 3 "
              "masters; the members stopped in turn longer than io_timeout (below down-after and the node "
              "timeout: no failover), workers killed and paused; each key's fences must strictly grow",
      .weights = { [F_KILL_HOLDER] = 1, [F_PAUSE_HOLDER] = 1, [F_FREEZE_MEMBER] = 6 },
      .gap_min_ms = 200, .gap_max_ms = 600, .unavailable = sentinel_missing },
    { .name = "sem", .nservers = 1, .flavour = TT_SEM, .keys = 2,
      .what = "one master, counting semaphores of limit 3 (hilock_sem_acquire) on 2 keys: at most 3 "
              "permits believed at once, fences growing, a dead holder's permit back after its ttl (no key "
              "without a grant for 4 s); the faults of single",
      .weights = { [F_KILL_HOLDER] = 4, [F_PAUSE_HOLDER] = 3, [F_RESTART_DELAYED] = 1, [F_RESTART_AOF] = 1,
                   [F_FREEZE_SHORT] = 1, [F_FREEZE_LONG] = 1 },
      .gap_min_ms = 300, .gap_max_ms = 1200, .unavailable = kinds_missing },
    { .name = "rw", .nservers = 1, .flavour = TT_RW, .keys = 1,
      .what = "one master, a shared/exclusive lock (hilock_rw_acquire) on 1 key: 2 writers (one exclusive, "
              "one with the plain lock, hilock_acquire) against a steady stream of readers (50-250 ms holds); "
              "no exclusive holder beside anyone, each writer's wait measured against its bound; workers "
              "killed and paused",
      .weights = { [F_KILL_HOLDER] = 1, [F_PAUSE_HOLDER] = 1 },
      .gap_min_ms = 300, .gap_max_ms = 1200, .unavailable = kinds_missing },
    { .name = "redlock-violation", .nservers = 5, .flavour = TT_MODERN, .workers = 4, .keys = 1,
      .ttl_fixed_ms = 2000, .long_holds = 1, .expect_overlap = 1,
      .what = "5 masters, a majority restarted at once while a lock is held: breaks the delayed-restart "
              "rule on purpose; the checker must report the overlap",
      .weights = { [F_RESTART_NOW] = 1 },
      .gap_min_ms = 1500, .gap_max_ms = 2500 },
    { .name = "async-violation", .nservers = 1, .flavour = TT_MODERN, .kind = TT_ASYNC, .workers = 1,
      .contenders = 64, .keys = 8, .inject = 1, .expect_overlap = 1,
      .what = "the async loop, every 8th holding logged with a deadline 1 s later than the library said: "
              "the checker must report the overlaps",
      .gap_min_ms = 1000, .gap_max_ms = 2000 },
    { .name = "cli-violation", .nservers = 1, .flavour = TT_MODERN, .kind = TT_CLI, .workers = 3, .keys = 1,
      .inject = 1, .expect_overlap = 1,
      .what = "the cli slots, a COMMAND member in 3 logging 1.5 s of life it did not have (a tree that "
              "outlives its lock): the checker must report the overlaps",
      .gap_min_ms = 1000, .gap_max_ms = 2000, .unavailable = hilock_missing },
    { .name = "fence-violation", .nservers = 1, .flavour = TT_MODERN, .workers = 4, .inject = 1,
      .expect_fence_regress = 1,
      .what = "one master, every 8th holding logged with half its fencing token: the checker must report "
              "the fence regressions",
      .weights = { [F_KILL_HOLDER] = 1 },
      .gap_min_ms = 1000, .gap_max_ms = 2000 },
    { .name = "sem-violation", .nservers = 1, .flavour = TT_SEM, .workers = 6, .keys = 1, .limit = 6,
      .ttl_fixed_ms = 700, .long_holds = 1, .expect_overlap = 1,
      .what = "the sem workers passing a limit of 6 where 3 is judged (a grant that ignores the limit): "
              "the checker must report more than 3 permits at once",
      .gap_min_ms = 1000, .gap_max_ms = 2000, .unavailable = kinds_missing },
    { .name = "rw-violation", .nservers = 1, .flavour = TT_RW, .workers = 6, .keys = 1, .inject = 1,
      .expect_overlap = 1,
      .what = "the rw workers, the writers taking shared grants they believe exclusive, every 4th writer's "
              "wait logged past its bound: the checker must report both",
      .gap_min_ms = 1000, .gap_max_ms = 2000, .unavailable = kinds_missing },
};
#define NMODES (sizeof modes / sizeof modes[0])
#define DEFAULT_MODES "single,redlock,legacy,bridge,fair,sentinel,tls,cluster,async,async-cluster,cli,redlock-mixed," \
    "sem,rw"

typedef struct run {
    const mode *m;
    char        dir[512];
    int         nworkers, nkeys;
    int         nslots;                   /* nworkers, + 1 for the node peer */
    int         node_slot;                /* -1: none */
    char        node_state[600];
    int         duration_s;
    uint64_t    seed, rng;
    hlt_redis  *srv[TT_MAXSERVERS];
    hlt_sentinel *sf;
    hlt_pki    *pki;                      /* tls: the run's CA and server certificate */
    hlt_cluster *cf;                      /* cluster: the run's cluster */
    char       *urls[2][TT_MAXSERVERS];   /* TCP and unix forms (tls: rediss:// twice) */
    tt_shm     *shm;
    pid_t       pid[TT_MAXWORKERS];
    int         gen[TT_MAXWORKERS];
    int         faults_fd;
    long        unexpected_deaths;
    long        infra_errors;
    pid_t       proxy_pid[TT_MAXPROXIES];
    char        proxy_url[TT_MAXPROXIES][64];
    int         next_member;              /* redlock-mixed: the member to stop next */
    char        seed_url[64];             /* cluster: the first seed alone (odd workers) */
} run;

static const char *const key_names[TT_MAXKEYS] = { "tt:k0", "{tt:k1}", "tt:{k2}:x", "tt:k3",
    "tt:k4", "tt:k5", "tt:k6", "tt:k7" };
/* legacy fleets: npm redis-lock locks "lock.<name>" */
static const char *const legacy_keys[TT_MAXKEYS] = { "lock.tt0", "lock.tt1", "lock.tt2", "lock.tt3",
    "lock.tt4", "lock.tt5", "lock.tt6", "lock.tt7" };

static int legacy_flavour(int f) { return f == TT_LEGACY || f == TT_BRIDGE; }
static const char *key_of(const run *r, int k) { return legacy_flavour(r->m->flavour) ? legacy_keys[k] : key_names[k]; }

static void fault_log(run *r, int kind, int64_t t0, int64_t t1, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void fault_log(run *r, int kind, int64_t t0, int64_t t1, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    int n = snprintf(line, sizeof line, "F %s %lld %lld ", fault_names[kind], (long long)t0, (long long)t1);
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    if (write(r->faults_fd, line, (size_t)n) != n) r->infra_errors++;
}

static void sleep_ms(int64_t ms) { tt_sleep_us(ms * 1000); }
static int64_t between(run *r, int64_t lo, int64_t hi) { return lo + (int64_t)(tt_uniform(&r->rng) * (double)(hi - lo)); }

/* ---- workers ---- */

/* The real legacy client (npm redis-lock 0.0.9 on node_redis 3.1.2) as one more worker,
 * where node and the interop test's node_modules are installed. */
static const char *node_missing(void)
{
    if (system("node --version >/dev/null 2>&1") != 0) return "node is not installed";
    if (access(NODE_MODULES "/redis-lock/index.js", R_OK) != 0 || access(NODE_MODULES "/redis/index.js", R_OK) != 0)
        return NODE_MODULES " has no redis-lock/redis (npm ci in tests/interop/node)";
    return NULL;
}

static void spawn_node(run *r, int slot, int gen)
{
    char sslot[16], sgen[16], sport[16], sttl[24], sseed[32], mods[PATH_MAX];
    const char *argv[8 + TT_MAXKEYS + 1];
    int n = 0;
    pid_t pid;
    if (!realpath(NODE_MODULES, mods)) {
        r->infra_errors++;
        return;
    }
    snprintf(sslot, sizeof sslot, "%d", slot);
    snprintf(sgen, sizeof sgen, "%d", gen);
    snprintf(sport, sizeof sport, "%d", r->srv[0]->port);
    snprintf(sttl, sizeof sttl, "%lld", (long long)r->m->ttl_fixed_ms);
    snprintf(sseed, sizeof sseed, "%llu", (unsigned long long)(r->seed + (uint64_t)gen));
    argv[n++] = "node";
    argv[n++] = "torture/node_worker.js";
    argv[n++] = mods;
    argv[n++] = r->dir;
    argv[n++] = sslot;
    argv[n++] = sgen;
    argv[n++] = sport;
    argv[n++] = sttl;
    argv[n++] = sseed;
    for (int k = 0; k < r->nkeys; k++) argv[n++] = legacy_keys[k] + 5;   /* it adds "lock." */
    argv[n] = NULL;
    pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execvp("node", (char *const *)argv);
        _exit(127);
    }
    if (pid < 0) {
        r->infra_errors++;
        return;
    }
    r->pid[slot] = pid;
    r->shm->slot[slot].pid = pid;
}

/* the node peer publishes "1 key deadline_us" while it holds, "0" otherwise */
static int node_holding(run *r, int *key, int64_t *deadline)
{
    char buf[64];
    int fd = open(r->node_state, O_RDONLY), ok = 0;
    ssize_t n;
    long long d;
    if (fd < 0) return 0;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n > 0) {
        buf[n] = '\0';
        ok = sscanf(buf, "1 %d %lld", key, &d) == 2;
        *deadline = d;
    }
    return ok;
}

static void spawn_worker(run *r, int slot)
{
    tt_worker_cfg cfg;
    pid_t pid;
    memset(&cfg, 0, sizeof cfg);
    cfg.dir = r->dir;
    cfg.slot = slot;
    cfg.gen = r->gen[slot]++;
    cfg.seed = r->seed * 0x9e3779b97f4a7c15ULL + (uint64_t)slot;
    cfg.nkeys = r->nkeys;
    for (int k = 0; k < r->nkeys && k < TT_MAXKEYS; k++) cfg.keys[k] = key_of(r, k);   /* async: names of its own */
    cfg.nurls = r->m->nservers;
    for (int i = 0; i < r->m->nservers; i++) cfg.urls[i] = r->urls[slot % 2][i];   /* TCP and unix */
    if (slot < r->m->proxies) cfg.urls[0] = r->proxy_url[slot];   /* cli: partitioned slots */
    cfg.kind = r->m->kind;
    cfg.inject = r->m->inject;
    cfg.contenders = r->m->contenders;
    cfg.hilock_bin = hilock_bin;
    cfg.self_bin = self_bin;
    cfg.flavour = r->m->mixed && slot % 2 ? r->m->mixed_flavour : r->m->flavour;
    cfg.limit = r->m->limit ? r->m->limit : TT_SEM_LIMIT;
    cfg.writer = slot < TT_RW_WRITERS ? 1 + slot % 2 : 0;   /* rw: an exclusive writer, a plain-lock one */
    cfg.codec = legacy_flavour(cfg.flavour) ? LEGACY_CODEC : NULL;
    cfg.io_timeout_ms = IO_TIMEOUT_MS;
    cfg.connect_timeout_ms = CONNECT_TIMEOUT_MS;
    cfg.retry_delay_ms = RETRY_DELAY_MS;
    cfg.long_holds = r->m->long_holds;
    cfg.ttl_fixed_ms = r->m->ttl_fixed_ms;
    cfg.shm = r->shm;
    cfg.tls_ca_file = r->pki ? r->pki->ca : NULL;
    memset((void *)&r->shm->slot[slot], 0, sizeof r->shm->slot[slot]);
    if (slot == r->node_slot) {
        spawn_node(r, slot, cfg.gen);
        return;
    }
    pid = fork();
    if (pid == 0) {   /* (the workers' kinds, each its own file; worker.c calls none of them) */
        if (cfg.kind == TT_ASYNC) tt_async_main(&cfg);
        if (cfg.kind == TT_CLI) tt_cli_main(&cfg);
        tt_worker_main(&cfg);
    }
    if (pid < 0) {
        perror("fork");
        r->infra_errors++;
        return;
    }
    r->pid[slot] = pid;
    r->shm->slot[slot].pid = pid;
}

/* Reap workers that died; any death we did not cause is a failure (a crash, an abort). */
static void reap(run *r, int respawn)
{
    for (int i = 0; i < r->nslots; i++) {
        int st;
        if (r->pid[i] <= 0 || waitpid(r->pid[i], &st, WNOHANG) != r->pid[i]) continue;
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
            r->unexpected_deaths++;
            fprintf(stderr, "torture: worker %d (pid %d) died unexpectedly: %s %d\n", i, (int)r->pid[i],
                    WIFSIGNALED(st) ? "signal" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        }
        r->pid[i] = 0;
        if (respawn) spawn_worker(r, i);
    }
}

/* A worker that holds a lock now, at random; -1 if none shows up within 1 s. */
static int pick_holder(run *r, int64_t min_left_us)
{
    int64_t end = tt_now_us() + 1000000;
    while (tt_now_us() < end) {
        int cand[TT_MAXWORKERS], n = 0;
        for (int i = 0; i < r->nslots; i++) {
            tt_slot *s = &r->shm->slot[i];
            if (r->pid[i] <= 0) continue;
            if (i == r->node_slot) {
                int k;
                int64_t d;
                if (node_holding(r, &k, &d) && d - tt_now_us() > min_left_us) {
                    s->state = TT_HOLDING;   /* for the injector's bookkeeping only */
                    s->key = k;
                    s->fence = 0;
                    s->ttl_ms = r->m->ttl_fixed_ms;
                    cand[n++] = i;
                }
                continue;
            }
            if (s->state == TT_HOLDING && s->valid_until_us - tt_now_us() > min_left_us) cand[n++] = i;
        }
        if (n) return cand[tt_rand(&r->rng) % (uint64_t)n];
        sleep_ms(2);
    }
    return -1;
}

static void fault_kill_holder(run *r)
{
    int i = pick_holder(r, 0);
    tt_slot *s;
    int64_t t0;
    pid_t pid;
    if (i < 0) return;
    s = &r->shm->slot[i];
    pid = r->pid[i];
    t0 = tt_now_us();
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    r->pid[i] = 0;
    fault_log(r, F_KILL_HOLDER, t0, tt_now_us(), "slot=%d pid=%d state=%s key=%d fence=%llu", i, (int)pid,
              s->state == TT_HOLDING ? "holding" : "between-calls", (int)s->key, (unsigned long long)s->fence);
    spawn_worker(r, i);
}

/* Stop a holder for longer than its ttl; resume it once a newer holder has written to the
 * resource (so its late write meets a newer token), or after 4 x the max TTL. */
static void fault_pause_holder(run *r)
{
    int i = pick_holder(r, 0), st, holding, k, newer;
    tt_slot *s;
    int64_t t0, until, give_up;
    uint64_t f;
    pid_t pid;
    if (i < 0) return;
    s = &r->shm->slot[i];
    pid = r->pid[i];
    t0 = tt_now_us();
    kill(pid, SIGSTOP);
    if (waitpid(pid, &st, WUNTRACED) != pid || !WIFSTOPPED(st)) {   /* it died on its own: a crash */
        fprintf(stderr, "torture: worker %d (pid %d) died unexpectedly\n", i, (int)pid);
        r->unexpected_deaths++;
        r->pid[i] = 0;
        spawn_worker(r, i);
        return;
    }
    holding = s->state == TT_HOLDING;
    k = s->key;
    f = s->fence;
    until = t0 + (s->ttl_ms > 0 ? s->ttl_ms : TT_TTL_MAX_MS) * 1000 + between(r, 100, 600) * 1000;
    give_up = t0 + 4 * TT_TTL_MAX_MS * 1000;
    for (;;) {
        int64_t now = tt_now_us();
        newer = holding && __atomic_load_n(&r->shm->res[k].highest, __ATOMIC_SEQ_CST) > f;
        if (now >= give_up || (now >= until && (newer || !holding))) break;
        sleep_ms(5);
    }
    kill(pid, SIGCONT);
    fault_log(r, F_PAUSE_HOLDER, t0, tt_now_us(), "slot=%d stopped=%d state=%s key=%d fence=%llu newer-write=%d",
              i, (int)pid, holding ? "holding" : "between-calls", k, (unsigned long long)f, newer);
}

static int pick_server(run *r) { return (int)(tt_rand(&r->rng) % (uint64_t)r->m->nservers); }

/* one server, or two distinct ones (of 5: the quorum of 3 stays up) */
static int pick_servers(run *r, int *a, int *b)
{
    *a = pick_server(r);
    *b = -1;
    if (r->m->nservers >= 5 && tt_uniform(&r->rng) < 0.3) {
        do *b = pick_server(r); while (*b == *a);
    }
    return *b < 0 ? 1 : 2;
}

static void restart_or_fail(run *r, int i)
{
    if (hlt_redis_restart(r->srv[i]) != 0) {
        fprintf(stderr, "torture: server %d did not restart\n", i);
        r->infra_errors++;
    }
}

/* The delayed-restart rule: a server that lost its data stays down for the max TTL, so
 * every lock it granted has expired everywhere before it answers again. */
static void fault_restart_delayed(run *r)
{
    int a, b, n = pick_servers(r, &a, &b);
    int64_t t0 = tt_now_us(), down = TT_TTL_MAX_MS + between(r, 100, 400);
    hlt_redis_kill(r->srv[a]);
    if (n == 2) hlt_redis_kill(r->srv[b]);
    sleep_ms(down);
    restart_or_fail(r, a);
    if (n == 2) restart_or_fail(r, b);
    if (n == 2)
        fault_log(r, F_RESTART_DELAYED, t0, tt_now_us(), "servers=%d,%d down_ms=%lld persistence=off", a, b, (long long)down);
    else
        fault_log(r, F_RESTART_DELAYED, t0, tt_now_us(), "server=%d down_ms=%lld persistence=off", a, (long long)down);
}

static int info_has(hlt_redis *s, const char *section, const char *const *want, int nwant)
{
    redisReply *rep = hlt_cmd(s, "INFO %s", section);
    int ok = rep && rep->type == REDIS_REPLY_STRING;
    for (int i = 0; ok && i < nwant; i++) ok = strstr(rep->str, want[i]) != NULL;
    if (rep) freeReplyObject(rep);
    return ok;
}

static int config_set(hlt_redis *s, const char *name, const char *value)
{
    redisReply *rep = hlt_cmd(s, "CONFIG SET %s %s", name, value);
    int ok = rep && rep->type == REDIS_REPLY_STATUS;
    if (rep) freeReplyObject(rep);
    return ok;
}

/* Persistence on (appendfsync always), then kill -9 and restart at once: every lock and
 * fence counter must come back from the AOF, so nothing may overlap. */
static void fault_restart_aof(run *r)
{
    static const char *const ready[] = { "aof_enabled:1", "aof_rewrite_in_progress:0",
                                         "aof_rewrite_scheduled:0" };
    int i = pick_server(r);
    hlt_redis *s = r->srv[i];
    char saved[sizeof s->extra];
    int64_t t0, end = tt_now_us() + 5000000;
    if (!config_set(s, "appendfsync", "always") || !config_set(s, "appendonly", "yes")) {
        r->infra_errors++;
        fprintf(stderr, "torture: CONFIG SET appendonly failed on server %d\n", i);
        return;
    }
    while (!info_has(s, "persistence", ready, 3) && tt_now_us() < end) sleep_ms(10);
    sleep_ms(between(r, 100, 400));   /* some grants written with fsync before the crash */
    t0 = tt_now_us();
    hlt_redis_kill(s);
    /* the server's own arguments (a TLS port, its certificate) stay; AOF is added for once */
    memcpy(saved, s->extra, sizeof saved);
    snprintf(s->extra, sizeof s->extra, "%.400s --appendonly yes --appendfsync always", saved);
    restart_or_fail(r, i);
    fault_log(r, F_RESTART_AOF, t0, tt_now_us(), "server=%d persistence=appendfsync-always", i);
    memcpy(s->extra, saved, sizeof saved);
    if (!config_set(s, "appendonly", "no")) r->infra_errors++;
}

/* Sentinel: stop the master shorter than io_timeout, or longer but below the Sentinels'
 * down-after-milliseconds (1000): no failover, only timeouts. */
static void fault_freeze_master(run *r, int kind)
{
    int m = hlt_sentinel_master(r->sf);
    double f = kind == F_FREEZE_SHORT ? 0.2 + 0.6 * tt_uniform(&r->rng) : 1.5 + 1.5 * tt_uniform(&r->rng);
    int64_t ms = (int64_t)(f * IO_TIMEOUT_MS), t0 = tt_now_us();
    if (m < 0) return;
    hlt_sentinel_freeze(r->sf, m);
    sleep_ms(ms);
    hlt_sentinel_thaw(r->sf, m);
    fault_log(r, kind, t0, tt_now_us(), "master=data%d stopped_ms=%lld io_timeout_ms=%d down_after_ms=1000", m,
              (long long)ms, IO_TIMEOUT_MS);
}

/* Sentinel failovers. The window logged runs until the old master is a healthy replica again:
 * the checker reports overlaps inside such a window apart (asynchronous replication can lose
 * a grant made just before the switch: docs/failover-facts.md, "Replication identity"). */
static void fault_failover(run *r)
{
    int64_t t0 = tt_now_us();
    int from = hlt_sentinel_master(r->sf);
    int rc = hlt_sentinel_failover(r->sf, 1);
    if (rc != 0) r->infra_errors++;
    fault_log(r, F_FAILOVER, t0, tt_now_us(), "from=data%d promoted_ms=%lld switched_ms=%lld demoted_ms=%lld%s",
              from, r->sf->t_promoted, r->sf->t_switched, r->sf->t_demoted, rc ? " TIMEOUT" : "");
}

static void fault_failover_freeze(run *r)
{
    int64_t t0 = tt_now_us();
    int m = hlt_sentinel_master(r->sf), rc;
    if (m < 0) return;
    hlt_sentinel_freeze(r->sf, m);
    rc = hlt_sentinel_wait_switch(r->sf, 1 - m, 15000);
    hlt_sentinel_thaw(r->sf, m);
    if (rc == 0) rc = hlt_sentinel_wait_replica(r->sf, m, 30000);
    if (rc != 0) r->infra_errors++;
    fault_log(r, F_FAILOVER_FREEZE, t0, tt_now_us(), "stopped=data%d switched_ms=%lld%s", m, r->sf->t_switched,
              rc ? " TIMEOUT" : "");
}

/* Cluster failovers, on a shard picked at random. The window logged runs until the cluster is
 * healthy again (every node agreeing, each master with a streaming replica): as behind
 * Sentinel, a grant made just before the switch can be lost (reported apart, not judged). */
static int cluster_master(run *r)
{
    int m = hlt_cluster_slot_master(r->cf, (int)(tt_rand(&r->rng) % 16384));
    return m;
}

static void fault_cluster_failover(run *r)
{
    int64_t t0 = tt_now_us();
    int m = cluster_master(r), rep = m < 0 ? -1 : hlt_cluster_replica_of(r->cf, m), rc = -1;
    if (rep >= 0) rc = hlt_cluster_failover(r->cf, rep, 0);
    if (rc == 0) rc = hlt_cluster_heal_all(r->cf, 30000);
    if (rc != 0) r->infra_errors++;
    fault_log(r, F_CLUSTER_FAILOVER, t0, tt_now_us(), "master=node%d replica=node%d%s", m, rep, rc ? " TIMEOUT" : "");
}

static void fault_cluster_kill(run *r)
{
    int64_t t0 = tt_now_us(), t_up = 0;
    int m = cluster_master(r), rep = m < 0 ? -1 : hlt_cluster_replica_of(r->cf, m), rc = -1;
    if (rep >= 0) {
        hlt_cluster_kill(r->cf, m);
        rc = hlt_cluster_wait_master(r->cf, rep, 20000);
        t_up = tt_now_us();
        if (hlt_cluster_restart(r->cf, m) != 0) rc = -1;
        if (rc == 0) rc = hlt_cluster_heal_all(r->cf, 30000);
    }
    if (rc != 0) r->infra_errors++;
    fault_log(r, F_CLUSTER_KILL, t0, tt_now_us(), "master=node%d replica=node%d elected_ms=%lld%s", m, rep,
              (long long)(t_up ? (t_up - t0) / 1000 : -1), rc ? " TIMEOUT" : "");
}

/* The node both URLs name first (the only seed of odd workers), whatever its role now,
 * stopped for 1.5-3.5 x io_timeout: below the node timeout (1000 ms), so no failover; the
 * maps a failover or a migration left stale must be refreshed without it, or the calls
 * routed with the map in hand. */
static void fault_freeze_seed(run *r)
{
    int64_t ms = (int64_t)((1.5 + 2.0 * tt_uniform(&r->rng)) * IO_TIMEOUT_MS), t0 = tt_now_us();
    redisReply *role = hlt_cluster_cmd(r->cf, 0, "ROLE");
    int master = role && role->type == REDIS_REPLY_ARRAY && role->elements &&
                 !strcmp(role->element[0]->str, "master");
    if (role) freeReplyObject(role);
    hlt_cluster_freeze(r->cf, 0);
    sleep_ms(ms);
    hlt_cluster_thaw(r->cf, 0);
    fault_log(r, F_FREEZE_SEED, t0, tt_now_us(), "seed=node0 role=%s stopped_ms=%lld io_timeout_ms=%d "
              "node_timeout_ms=1000", master ? "master" : "replica", (long long)ms, IO_TIMEOUT_MS);
}

/* A master other than `from`, at random; -1 if none answers. */
static int other_master(run *r, int from)
{
    int cand[HLT_CLUSTER_NODES], n = 0;
    for (int i = 0; i < r->cf->nnodes; i++) {
        redisReply *role = i == from ? NULL : hlt_cluster_cmd(r->cf, i, "ROLE");
        if (role && role->type == REDIS_REPLY_ARRAY && role->elements && !strcmp(role->element[0]->str, "master"))
            cand[n++] = i;
        if (role) freeReplyObject(role);
    }
    return n ? cand[tt_rand(&r->rng) % (uint64_t)n] : -1;
}

/* Move every key of the slot (MIGRATE keeps each one's TTL) until its owner holds none: a
 * grant may rewrite a key that is still there (never create one: a new key goes to the
 * importing node by ASK), so one pass may miss a key it found expired. 0 or -1. */
static int migrate_all(run *r, int slot, int from, int to)
{
    for (int pass = 0; pass < 20; pass++) {
        redisReply *n = hlt_cluster_cmd(r->cf, from, "CLUSTER COUNTKEYSINSLOT %d", slot);
        long long left = n && n->type == REDIS_REPLY_INTEGER ? n->integer : -1;
        if (n) freeReplyObject(n);
        if (left == 0) return 0;
        if (left < 0 || hlt_cluster_migrate_keys(r->cf, slot, to) != 0) return -1;
    }
    return -1;
}

/* One move of the slot: IMPORTING / MIGRATING for 100-400 ms under load (new keys by ASK,
 * scripts naming keys of both nodes TRYAGAIN), the keys moved, a pause, then the slot handed
 * over (MOVED). 0 or -1. */
static int move_slot(run *r, int slot, int from, int to)
{
    int rc = -1;
    if (hlt_cluster_migrate_begin(r->cf, slot, to) == 0) {
        sleep_ms(between(r, 100, 400));
        rc = migrate_all(r, slot, from, to);
        sleep_ms(between(r, 0, 200));
        if (rc == 0) rc = hlt_cluster_migrate_end(r->cf, slot, to);
    }
    return rc;
}

/* The slot of a hot key (one the workers lock) moved to another master while they lock it,
 * and back: the lock and its aux keys move together (one slot); the fence must keep growing
 * on the new master. (Back, so that each master keeps one range of slots: before 7.0 the
 * nodes list CLUSTER SLOTS' ranges in orders of their own, and the fixture's health check
 * compares the first three.) */
static void fault_migrate_slot(run *r)
{
    int k = (int)(tt_rand(&r->rng) % (uint64_t)r->nkeys);
    char name[32];   /* (async workers name their keys themselves: torture/async.c) */
    if (r->m->kind == TT_ASYNC) snprintf(name, sizeof name, "tt:a%d", k);
    else snprintf(name, sizeof name, "%s", key_of(r, k));
    int slot = hlt_cluster_keyslot(r->cf, name);
    int from = slot < 0 ? -1 : hlt_cluster_slot_master(r->cf, slot);
    int to = from < 0 ? -1 : other_master(r, from), rc = -1;
    int64_t t0 = tt_now_us();
    if (to >= 0) rc = move_slot(r, slot, from, to);
    if (rc == 0) {
        sleep_ms(between(r, 100, 400));
        rc = move_slot(r, slot, to, from);
    }
    if (rc != 0) {   /* leave the slot where it is, stable, for the next faults */
        r->infra_errors++;
        fprintf(stderr, "torture: the migration of slot %d (node%d to node%d) failed\n", slot, from, to);
        for (int i = 0; i < r->cf->nnodes; i++) {
            redisReply *rep = hlt_cluster_cmd(r->cf, i, "CLUSTER SETSLOT %d STABLE", slot);
            if (rep) freeReplyObject(rep);
        }
    }
    fault_log(r, F_MIGRATE_SLOT, t0, tt_now_us(), "key=%d slot=%d from=node%d to=node%d and back%s", k, slot,
              from, to, rc ? " FAILED" : "");
}

static void fault_freeze(run *r, int kind)
{
    if (r->sf) {
        fault_freeze_master(r, kind);
        return;
    }
    int a, b, n = pick_servers(r, &a, &b);
    double f = kind == F_FREEZE_SHORT ? 0.2 + 0.6 * tt_uniform(&r->rng) : 1.5 + 4.5 * tt_uniform(&r->rng);
    int64_t ms = (int64_t)(f * IO_TIMEOUT_MS), t0 = tt_now_us();
    hlt_redis_freeze(r->srv[a]);
    if (n == 2) hlt_redis_freeze(r->srv[b]);
    sleep_ms(ms);
    hlt_redis_thaw(r->srv[a]);
    if (n == 2) hlt_redis_thaw(r->srv[b]);
    if (n == 2)
        fault_log(r, kind, t0, tt_now_us(), "servers=%d,%d stopped_ms=%lld io_timeout_ms=%d", a, b, (long long)ms, IO_TIMEOUT_MS);
    else
        fault_log(r, kind, t0, tt_now_us(), "server=%d stopped_ms=%lld io_timeout_ms=%d", a, (long long)ms, IO_TIMEOUT_MS);
}

/* Breaks the delayed-restart rule on purpose: while a lock is held (for a while yet), a
 * majority of the masters is restarted at once, one after the other, without persistence.
 * The holder's key survives only on a minority, so another worker gets a quorum. */
static void fault_restart_now(run *r)
{
    int i = pick_holder(r, 800000), maj = r->m->nservers / 2 + 1;
    int64_t t0;
    if (i < 0) return;
    t0 = tt_now_us();
    for (int m = 0; m < maj; m++) {
        hlt_redis_kill(r->srv[m]);
        restart_or_fail(r, m);
    }
    fault_log(r, F_RESTART_NOW, t0, tt_now_us(), "masters=0..%d holder-slot=%d fence=%llu persistence=off "
              "(violates the delayed-restart rule)", maj - 1, i, (unsigned long long)r->shm->slot[i].fence);
}

/* async: the server stopped about one io_timeout (0.5-2 x; half the time just above it,
 * 1-1.3 x, the stall that hurts most): calls time out after their writes landed, their undos
 * are queued while the waiting acquires retry with the same token */
static void fault_freeze_io(run *r)
{
    int i = pick_server(r);
    double f = tt_uniform(&r->rng) < 0.5 ? 1.0 + 0.3 * tt_uniform(&r->rng) : 0.5 + 1.5 * tt_uniform(&r->rng);
    int64_t ms = (int64_t)(f * IO_TIMEOUT_MS), t0 = tt_now_us();
    hlt_redis_freeze(r->srv[i]);
    sleep_ms(ms);
    hlt_redis_thaw(r->srv[i]);
    fault_log(r, F_FREEZE_IO, t0, tt_now_us(), "server=%d stopped_ms=%lld io_timeout_ms=%d", i, (long long)ms,
              IO_TIMEOUT_MS);
}

/* cli: a slot among the first `below` whose hilock runs COMMAND now, at random; -1 if none
 * shows up within 1 s */
static int pick_cli_holder(run *r, int below)
{
    int64_t end = tt_now_us() + 1000000;
    while (tt_now_us() < end) {
        int cand[TT_MAXWORKERS], n = 0;
        for (int i = 0; i < r->nslots && i < below; i++)
            if (r->shm->slot[i].child > 0 && r->shm->slot[i].state == TT_HOLDING) cand[n++] = i;
        if (n) return cand[tt_rand(&r->rng) % (uint64_t)n];
        sleep_ms(5);
    }
    return -1;
}

/* cli: kill -9 of a hilock whose COMMAND runs; its guard must end the tree before the lock
 * can expire */
static void fault_kill_hilock(run *r, int kind)
{
    int i = pick_cli_holder(r, r->nslots);
    pid_t pid = i < 0 ? 0 : r->shm->slot[i].child;
    int64_t t0 = tt_now_us();
    if (pid <= 0) return;
    kill(pid, kind == F_KILL_HILOCK ? SIGKILL : SIGTERM);
    fault_log(r, kind, t0, tt_now_us(), "slot=%d hilock=%d", i, (int)pid);
}

/* cli: the proxy of a holding slot black-holes its connections for 0.5-2 x the ttl, then
 * cuts them: hilock's renewals fail and the lock expires while COMMAND's tree runs */
static void fault_partition(run *r)
{
    int p = pick_cli_holder(r, r->m->proxies);
    int64_t ms = between(r, TT_CLI_TTL_MS / 2, 2 * TT_CLI_TTL_MS), t0 = tt_now_us();
    if (p < 0) return;
    r->shm->partitioned[p] = 1;
    sleep_ms(ms);
    r->shm->proxy_epoch[p]++;
    r->shm->partitioned[p] = 0;
    fault_log(r, F_PARTITION, t0, tt_now_us(), "proxy=%d cut_ms=%lld ttl_ms=%d", p, (long long)ms, TT_CLI_TTL_MS);
}

/* cli: SIGSTOP of a hilock whose COMMAND runs, for 1.5-3 x the ttl, then SIGCONT: renewing
 * nothing meanwhile, its guard must stop the tree before the lock expires (before: the guard
 * acted only once hilock died, and the tree ran beside the next holder) */
static void fault_stop_hilock(run *r)
{
    int i = pick_cli_holder(r, r->nslots);
    pid_t pid = i < 0 ? 0 : r->shm->slot[i].child;
    int64_t ms = between(r, TT_CLI_TTL_MS * 3 / 2, 3 * TT_CLI_TTL_MS), t0 = tt_now_us();
    if (pid <= 0) return;
    kill(pid, SIGSTOP);
    sleep_ms(ms);
    kill(pid, SIGCONT);
    fault_log(r, F_STOP_HILOCK, t0, tt_now_us(), "slot=%d hilock=%d stopped_ms=%lld ttl_ms=%d", i, (int)pid,
              (long long)ms, TT_CLI_TTL_MS);
}

/* cli: the slot of a holding hilock fills its stderr pipe and stops reading it for 1-3 x the
 * ttl (a stalled log shipper; hilock runs with --trace, so the keepalive has lines to write);
 * a slot behind a proxy is also partitioned for 0.5-2 x the ttl meanwhile, so the loss must
 * be acted on with stderr full. (Before: the keepalive blocked in a trace line and renewals
 * stopped, or the loss message blocked before COMMAND was signalled.) */
static void fault_block_stderr(run *r)
{
    int i = pick_cli_holder(r, r->nslots);
    int64_t ms = between(r, TT_CLI_TTL_MS, 3 * TT_CLI_TTL_MS), cut = 0, t0 = tt_now_us();
    if (i < 0) return;
    r->shm->stderr_blocked[i] = 1;
    sleep_ms(50);   /* (the slot fills the pipe) */
    if (i < r->m->proxies) {
        cut = between(r, TT_CLI_TTL_MS / 2, 2 * TT_CLI_TTL_MS);
        if (cut > ms - 50) cut = ms - 50;
        r->shm->partitioned[i] = 1;
        sleep_ms(cut);
        r->shm->proxy_epoch[i]++;
        r->shm->partitioned[i] = 0;
    }
    sleep_ms(ms - 50 - cut);
    r->shm->stderr_blocked[i] = 0;
    fault_log(r, F_BLOCK_STDERR, t0, tt_now_us(), "slot=%d blocked_ms=%lld partitioned_ms=%lld ttl_ms=%d", i,
              (long long)ms, (long long)cut, TT_CLI_TTL_MS);
}

/* redlock-mixed: members 0, 2, 4 are direct masters, 1 the Sentinel group (its master stopped
 * below down-after: no failover), 3 the Cluster (all its masters stopped below the node
 * timeout). One after the other, the epoch carriers first, so every quorum in turn leaves one
 * kind of member out. */
static void fault_freeze_member(run *r)
{
    static const int order[5] = { 3, 0, 1, 2, 4 };
    int m = order[r->next_member++ % 5], sm = -1;
    int64_t ms = (int64_t)((1.5 + 1.5 * tt_uniform(&r->rng)) * IO_TIMEOUT_MS), t0 = tt_now_us();
    if (m == 1 && (sm = hlt_sentinel_master(r->sf)) >= 0) hlt_sentinel_freeze(r->sf, sm);
    if (m == 3)
        for (int i = 0; i < r->cf->nnodes; i++) hlt_cluster_freeze(r->cf, i);
    if (m % 2 == 0) hlt_redis_freeze(r->srv[m / 2]);
    sleep_ms(ms);
    if (sm >= 0) hlt_sentinel_thaw(r->sf, sm);
    if (m == 3)
        for (int i = 0; i < r->cf->nnodes; i++) hlt_cluster_thaw(r->cf, i);
    if (m % 2 == 0) hlt_redis_thaw(r->srv[m / 2]);
    fault_log(r, F_FREEZE_MEMBER, t0, tt_now_us(), "member=%d(%s) stopped_ms=%lld io_timeout_ms=%d", m,
              m == 1 ? "sentinel" : m == 3 ? "cluster" : "direct", (long long)ms, IO_TIMEOUT_MS);
}

static void inject(run *r)
{
    int total = 0, pick, kind = 0;
    for (int k = 0; k < F_NKINDS; k++) total += r->m->weights[k];
    if (!total) return;
    pick = (int)(tt_rand(&r->rng) % (uint64_t)total);
    while (pick >= r->m->weights[kind]) pick -= r->m->weights[kind++];
    switch (kind) {
    case F_KILL_HOLDER:     fault_kill_holder(r); break;
    case F_PAUSE_HOLDER:    fault_pause_holder(r); break;
    case F_RESTART_DELAYED: fault_restart_delayed(r); break;
    case F_RESTART_AOF:     fault_restart_aof(r); break;
    case F_FREEZE_SHORT:
    case F_FREEZE_LONG:     fault_freeze(r, kind); break;
    case F_RESTART_NOW:     fault_restart_now(r); break;
    case F_FAILOVER:        fault_failover(r); break;
    case F_FAILOVER_FREEZE: fault_failover_freeze(r); break;
    case F_CLUSTER_FAILOVER: fault_cluster_failover(r); break;
    case F_CLUSTER_KILL:    fault_cluster_kill(r); break;
    case F_FREEZE_IO:       fault_freeze_io(r); break;
    case F_KILL_HILOCK:
    case F_TERM_HILOCK:     fault_kill_hilock(r, kind); break;
    case F_PARTITION:       fault_partition(r); break;
    case F_FREEZE_MEMBER:   fault_freeze_member(r); break;
    case F_FREEZE_SEED:     fault_freeze_seed(r); break;
    case F_MIGRATE_SLOT:    fault_migrate_slot(r); break;
    case F_STOP_HILOCK:     fault_stop_hilock(r); break;
    case F_BLOCK_STDERR:    fault_block_stderr(r); break;
    }
}

/* ---- one mode ---- */

static int prepare_dir(run *r, const char *base)
{
    char cmd[2600];
    snprintf(r->dir, sizeof r->dir, "%s/%s", base, r->m->name);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && rm -f '%s'/*.log '%s'/*.err '%s'/report.txt", r->dir, r->dir, r->dir,
             r->dir);
    if (system(cmd) != 0) return -1;
    snprintf(cmd, sizeof cmd, "%s/faults.log", r->dir);
    r->faults_fd = open(cmd, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    return r->faults_fd < 0 ? -1 : 0;
}

/* redlock-mixed: 3 direct masters, a Sentinel group and a Cluster of 3 masters, as the
 * members 0, 2, 4 / 1 / 3 of one Redlock */
static int start_members(run *r)
{
    for (int i = 0; i < 3; i++) {
        if (!(r->srv[i] = hlt_redis_start(NULL))) return -1;
        r->urls[0][2 * i] = r->srv[i]->url;
        r->urls[1][2 * i] = r->srv[i]->unix_url;
    }
    if (!(r->sf = hlt_sentinel_start()) || !(r->cf = hlt_cluster_start_masters())) return -1;
    r->urls[0][1] = r->urls[1][1] = r->sf->url;
    r->urls[0][3] = r->urls[1][3] = r->cf->url;
    return 0;
}

/* cli: the partitioning proxies, in front of server 0 */
static int start_proxies(run *r)
{
    for (int p = 0; p < r->m->proxies && p < TT_MAXPROXIES; p++) {
        int port, fd = tt_proxy_listen(&port);
        if (fd < 0) return -1;
        r->proxy_pid[p] = fork();
        if (r->proxy_pid[p] == 0) tt_proxy_main(r->shm, p, fd, r->srv[0]->port);
        close(fd);
        if (r->proxy_pid[p] < 0) return -1;
        snprintf(r->proxy_url[p], sizeof r->proxy_url[p], "redis://127.0.0.1:%d", port);
    }
    return 0;
}

static int start_servers(run *r)
{
    if (r->m->members) return start_members(r);
    if (r->m->sentinel) {
        if (!(r->sf = hlt_sentinel_start())) return -1;
        r->urls[0][0] = r->urls[1][0] = r->sf->url;
        return 0;
    }
    if (r->m->cluster) {
        if (!(r->cf = hlt_cluster_start())) return -1;
        /* even workers: every node a seed; odd ones: only the first, the common setup of one
         * name (a Service, a DNS alias) */
        snprintf(r->seed_url, sizeof r->seed_url, "redis-cluster://127.0.0.1:%d", r->cf->port[0]);
        r->urls[0][0] = r->cf->url;
        r->urls[1][0] = r->seed_url;
        return 0;
    }
    if (r->m->tls && !(r->pki = hlt_pki_make())) return -1;
    for (int i = 0; i < r->m->nservers; i++) {
        r->srv[i] = r->m->tls ? hlt_tls_redis_start(r->pki, HLT_CERT_SERVER, 0, NULL) : hlt_redis_start(NULL);
        if (!r->srv[i]) return -1;
        r->urls[0][i] = r->srv[i]->url;
        /* over TLS every worker dials the TLS port (the unix socket stays plain) */
        r->urls[1][i] = r->m->tls ? r->srv[i]->url : r->srv[i]->unix_url;
    }
    return 0;
}

static void stop_all(run *r)
{
    int64_t end = tt_now_us() + 8000000;   /* every call is bounded well below this */
    int left;
    r->shm->stop = 1;
    if (r->node_slot >= 0 && r->pid[r->node_slot] > 0) kill(r->pid[r->node_slot], SIGTERM);
    for (;;) {
        reap(r, 0);
        left = 0;
        for (int i = 0; i < r->nslots; i++) left += r->pid[i] > 0;
        if (!left || tt_now_us() > end) break;
        sleep_ms(10);
    }
    for (int i = 0; i < r->nslots; i++)
        if (r->pid[i] > 0) {
            fprintf(stderr, "torture: worker %d did not stop within 8 s: a call hung\n", i);
            r->unexpected_deaths++;
            kill(r->pid[i], SIGKILL);
            waitpid(r->pid[i], NULL, 0);
            r->pid[i] = 0;
        }
    for (int p = 0; p < TT_MAXPROXIES; p++)
        if (r->proxy_pid[p] > 0) {
            kill(r->proxy_pid[p], SIGKILL);
            waitpid(r->proxy_pid[p], NULL, 0);
            r->proxy_pid[p] = 0;
        }
    /* cli: COMMAND trees end by themselves within this (a tree orphaned by a bug included) */
    if (r->m->kind == TT_CLI) sleep_ms(TT_CLI_TREE_MAX_MS);
    hlt_sentinel_stop(r->sf);   /* each is NULL-safe; redlock-mixed has all three kinds */
    hlt_cluster_stop(r->cf);
    for (int i = 0; i < TT_MAXSERVERS; i++) hlt_redis_stop(r->srv[i]);
    hlt_pki_free(r->pki);
}

static int run_mode(const mode *m, const char *base, int duration_s, uint64_t seed, int workers,
                    int keys, int64_t tolerance_ms)
{
    run r;
    tt_check_opts co;
    int64_t start, end, next;
    int rc;
    memset(&r, 0, sizeof r);
    r.m = m;
    r.duration_s = duration_s;
    r.seed = seed;
    r.rng = seed ^ 0x5deece66dULL;
    r.nworkers = m->workers ? m->workers : workers;
    r.nkeys = m->keys ? m->keys : keys;
    r.nslots = r.nworkers;
    r.node_slot = -1;
    if (m->node_peer && !node_missing() && r.nslots < TT_MAXWORKERS) r.node_slot = r.nslots++;
    printf("== torture %s: %d workers%s, %d keys, %d s, seed %llu\n   %s\n", m->name, r.nworkers,
           r.node_slot >= 0 ? " + the node redis-lock peer" : "", r.nkeys, duration_s,
           (unsigned long long)seed, m->what);
    if (m->node_peer && r.node_slot < 0) printf("   node peer not available: %s\n", node_missing());
    fflush(stdout);
    r.shm = mmap(NULL, sizeof *r.shm, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (r.shm == MAP_FAILED || prepare_dir(&r, base) < 0 || start_servers(&r) < 0 || start_proxies(&r) < 0) {
        fprintf(stderr, "torture %s: set-up failed\n", m->name);
        if (r.shm != MAP_FAILED) stop_all(&r);
        return 1;
    }
    snprintf(r.node_state, sizeof r.node_state, "%s/node-%d.state", r.dir, r.node_slot);
    unlink(r.node_state);
    for (int i = 0; i < r.nslots; i++) spawn_worker(&r, i);

    start = tt_now_us();
    end = start + (int64_t)duration_s * 1000000;
    next = start + between(&r, 300, 1000) * 1000;
    while (tt_now_us() < end) {
        reap(&r, 1);
        if (tt_now_us() >= next) {
            inject(&r);
            next = tt_now_us() + between(&r, m->gap_min_ms, m->gap_max_ms) * 1000;
        }
        sleep_ms(10);
    }
    stop_all(&r);
    close(r.faults_fd);
    munmap(r.shm, sizeof *r.shm);

    memset(&co, 0, sizeof co);
    co.dir = r.dir;
    co.mode = m->name;
    co.expect_overlap = m->expect_overlap;
    co.expect_fence_regress = m->expect_fence_regress;
    co.allow_lost = m->sentinel || m->cluster;
    co.quorum = m->nservers > 1;
    co.tolerance_us = tolerance_ms * 1000;
    co.limit = m->flavour == TT_SEM ? TT_SEM_LIMIT : 0;
    co.rw = m->flavour == TT_RW;
    co.expect_wait_excess = co.rw && m->inject;
    rc = tt_check(&co);
    if (r.unexpected_deaths || r.infra_errors) {
        printf("  harness: %ld unexpected worker deaths or hangs, %ld set-up errors: FAIL\n",
               r.unexpected_deaths, r.infra_errors);
        rc = 1;
    }
    printf("\n");
    return rc;
}

/* ---- command line ---- */

static const mode *find_mode(const char *name, size_t len)
{
    for (size_t i = 0; i < NMODES; i++)
        if (strlen(modes[i].name) == len && !strncmp(modes[i].name, name, len)) return &modes[i];
    return NULL;
}

static int usage(void)
{
    fprintf(stderr, "usage: torture [--modes=a,b] [--duration=S] [--seed=N] [--workers=N] [--keys=N] "
                    "[--dir=D] [--tolerance-ms=N] [--hilock=PATH]\n       torture check DIR [--mode=NAME] "
                    "[--expect-overlap] [--expect-fence-regress] [--allow-lost] [--quorum]\n       torture --list\n");
    return 2;
}

static int cmd_check(int argc, char **argv)
{
    tt_check_opts o;
    memset(&o, 0, sizeof o);
    o.mode = "?";
    o.tolerance_us = 100000;
    if (argc < 3) return usage();
    o.dir = argv[2];
    for (int i = 3; i < argc; i++) {
        if (!strncmp(argv[i], "--mode=", 7)) o.mode = argv[i] + 7;
        else if (!strcmp(argv[i], "--expect-overlap")) o.expect_overlap = 1;
        else if (!strcmp(argv[i], "--expect-fence-regress")) o.expect_fence_regress = 1;
        else if (!strcmp(argv[i], "--allow-lost")) o.allow_lost = 1;
        else if (!strcmp(argv[i], "--quorum")) o.quorum = 1;
        else return usage();
    }
    return tt_check(&o);
}

/* this program (COMMAND's members run it) and the hilock under test: --hilock=PATH, else
 * the one built next to us ($(B)/torture/torture -> $(B)/hilock) */
static void find_binaries(int argc, char **argv)
{
    ssize_t n = readlink("/proc/self/exe", self_bin, sizeof self_bin - 1);
    char *slash;
    self_bin[n > 0 ? n : 0] = '\0';
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], "--hilock=", 9) && realpath(argv[i] + 9, hilock_bin)) return;
    snprintf(hilock_bin, sizeof hilock_bin, "%s", self_bin);
    if ((slash = strrchr(hilock_bin, '/'))) *slash = '\0';
    if ((slash = strrchr(hilock_bin, '/'))) snprintf(slash, sizeof hilock_bin - (size_t)(slash - hilock_bin), "/hilock");
}

int main(int argc, char **argv)
{
    const char *list = DEFAULT_MODES, *base = "build/torture";
    int duration = 20, workers = 8, keys = 3, failed = 0, ran = 0;
    int64_t tolerance_ms = 100;
    uint64_t seed = 0;
    char summary[2048] = "";

    if (argc >= 2 && !strcmp(argv[1], "check")) return cmd_check(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "member")) return tt_member_main(argc, argv);
    find_binaries(argc, argv);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strncmp(a, "--modes=", 8)) list = a + 8;
        else if (!strncmp(a, "--duration=", 11)) duration = atoi(a + 11);
        else if (!strncmp(a, "--seed=", 7)) seed = strtoull(a + 7, NULL, 10);
        else if (!strncmp(a, "--workers=", 10)) workers = atoi(a + 10);
        else if (!strncmp(a, "--keys=", 7)) keys = atoi(a + 7);
        else if (!strncmp(a, "--dir=", 6)) base = a + 6;
        else if (!strncmp(a, "--tolerance-ms=", 15)) tolerance_ms = atoll(a + 15);
        else if (!strncmp(a, "--hilock=", 9)) continue;   /* find_binaries */
        else if (!strcmp(a, "--list")) {
            for (size_t m = 0; m < NMODES; m++)
                printf("%-18s %s%s%s\n", modes[m].name, modes[m].unavailable && modes[m].unavailable() ?
                       "[not available: " : "", modes[m].unavailable && modes[m].unavailable() ?
                       modes[m].unavailable() : "", modes[m].unavailable && modes[m].unavailable() ? "] " : "");
            return 0;
        } else return usage();
    }
    if (duration < 1 || duration > 86400 || workers < 2 || workers > TT_MAXWORKERS || keys < 1 || keys > TT_MAXKEYS)
        return usage();
    if (!*list) list = DEFAULT_MODES;
    if (!seed) seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);

    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        const mode *m = find_mode(p, len);
        char line[300];
        if (!m) {
            fprintf(stderr, "torture: unknown mode '%.*s' (torture --list)\n", (int)len, p);
            return 2;
        }
        if (m->unavailable && m->unavailable()) {
            snprintf(line, sizeof line, "  %-18s not available: %s\n", m->name, m->unavailable());
            printf("== torture %s: not available: %s\n\n", m->name, m->unavailable());
        } else {
            int rc = run_mode(m, base, duration, seed, workers, keys, tolerance_ms);
            ran++;
            failed += rc != 0;
            snprintf(line, sizeof line, "  %-18s %s\n", m->name, rc ? "FAIL" : "PASS");
        }
        strncat(summary, line, sizeof summary - strlen(summary) - 1);
        p += len;
        if (*p == ',') p++;
    }
    printf("torture summary (seed %llu, %d s per mode; logs and reports in %s/<mode>/):\n%s",
           (unsigned long long)seed, duration, base, summary);
    return failed || !ran ? 1 : 0;
}
