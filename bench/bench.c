/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench.c -- `make bench`: hilock against bare hiredis, in one run, on one throwaway
 * redis-server (tests/fixture.c) over TCP 127.0.0.1 and a unix socket.
 *
 *  1. Uncontended acquire+release cycles per second on one connection, next to two bare
 *     blocking-hiredis loops: (a) the very commands the library sends, (b) plain
 *     `SET k v NX PX` + the library's release. "The very commands" are not written here:
 *     they are captured with MONITOR from one library cycle and replayed with a fresh token
 *     per cycle, so the baseline keeps mirroring the library whatever its scripts' keys and
 *     arguments become (the fence counter's value the last grant gave, which acquire.lua
 *     takes to skip the holder record, is the replay's own last one). The scripts are put in the cache first (SCRIPT LOAD of each file of
 *     src/lua). After a warm-up, the variants run in turn in short slices (ours, (a), (b),
 *     ours, ...) for a fixed total time each, so that a burst of load elsewhere on the machine
 *     hits all of them alike; the ratio reported is the median of the per-slice ratios. The
 *     client's CPU time per cycle is shown too (steadier than the wall clock).
 *     Then the fast path (options.fencing = 0; fastpath below) against (b) the same way.
 *  2. Contention: 4 processes, each acquire (blocking) -> hold 1 ms -> release, for a fixed
 *     time, with wake-up on release (options.wake = 1) and with pure polling (wake = 0):
 *     acquisitions/s, fairness, the release -> next acquire latency, how long acquire waited,
 *     and a check that no two processes ever held the lock at once. Then the handoff against
 *     the bare wake floor (issue 34; bench/handoff.c): hilock, its scripts on bare hiredis and
 *     BLPOP woken by RPUSH + one SET NX, in interleaved slices, with what each command of a
 *     handoff costs the server. `bench handoff` runs only that.
 *  3. Fairness under greedy contention (issue 14; bench/fairness.c): P processes acquire ->
 *     hold 1 ms -> release -> acquire again for D s, per configuration (wake-on-release,
 *     polling, fair): grants/s, shares, Jain's index, waits.
 *  4. Redlock: acquire+release latency over 1, 3 and 5 masters (all asked at once), next to
 *     the floor of the machine: bare hiredis sending the same commands to every master at
 *     once (on a small machine the masters compete for its CPUs).
 *  5. TLS next to plain TCP (issue 11; bench/tls.c): cycles on one long-lived connection,
 *     and connect + handshake time. `bench tls` runs only part 5, `bench uncontended` only
 *     part 1's first table, `bench async` only the event-loop table (bench/async.c).
 *  6. The semaphore and the shared/exclusive lock (issue 26; bench/kinds.c), after part 3:
 *     their cycles next to the lock's, a writer's wait under saturating readers, the handoff
 *     of each. `bench kinds` runs only part 6.
 *  8. Scale (issue 34; bench/scale.c), after part 6: 1,000 waiters on one key (10 processes x
 *     100 acquires in flight on libuv) and 10,000 locks under keepalive on one loop client: the
 *     server's calls and CPU per second while they wait / are held, the drain after a release,
 *     late renewals. `bench scale` runs only part 8.
 *  7. The cost of events (issue 27; observer_cost), after the fast path: the default client
 *     with no observer and with a counting observer against (b). `bench observer` runs only it.
 *
 * Knobs (environment): HILOCK_BENCH_SECONDS (time per variant, default 4),
 * HILOCK_LUA_DIR (default src/lua), HILOCK_BENCH_FAIR_* (bench/fairness.c).
 * `bench fairness` runs only part 3.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "bench.h"
#include "hilock_observe.h"

#define KEY "bench:lock"
#define TTL_MS 30000
#define MAX_CMDS 4
#define MAX_ARGS 24   /* acquire.lua: EVALSHA, sha, 4, 4 keys, 12 args = 19 */

#define SLICE_S 0.25
#define BASELINES (1u << V_SAME | 1u << V_SETNX)   /* part 1's main table: (a) and (b) */
#define MAX_SLICES 1024

static double run_s = 4.0;   /* per variant */
static int slices = 16;      /* run_s / SLICE_S */

/* Uncontended acquire+release cycles on one connection: hilock (a client with
 * tune applied, NULL = defaults) against (a) the very commands the library sends and (b) a
 * bare SET NX PX + the library's release, in interleaved slices. variants: a mask of
 * 1 << V_SAME / V_SETNX (hilock always runs); the others are left 0 in *res. */
typedef enum variant { V_OURS, V_SAME, V_SETNX, V_COUNTED, NVARIANTS } variant;   /* V_COUNTED: observer_cost */
typedef struct result {
    double rate[NVARIANTS];   /* cycles/s over all slices */
    double cpu[NVARIANTS];    /* client CPU us per cycle */
    double ratio[NVARIANTS];  /* median over slices of hilock's rate / this variant's */
} result;
static void uncontended(hlt_redis *r, int unix_socket, void (*tune)(hilock_options *o), unsigned variants,
                 result *res);

static hilock_client *client(const char *const *urls, size_t n, int wake)
{
    return client_with(urls, n, wake ? NULL : tune_no_wake);
}

static redisContext *bare_connect(const hlt_redis *r, int unix_socket)
{
    redisContext *rc = unix_socket ? redisConnectUnix(r->sock) : redisConnect("127.0.0.1", r->port);
    if (!rc || rc->err) die("hiredis connect", rc ? rc->errstr : "out of memory");
    return rc;
}

/* ---- capturing what the library sends (MONITOR) ---- */

typedef struct cmd {
    int    argc;
    char  *argv[MAX_ARGS];
    size_t len[MAX_ARGS];
    int    is_token[MAX_ARGS];   /* replaced by the cycle's token */
    int    is_count[MAX_ARGS];   /* replaced by the counter's value the replay's last grant
                                    gave (acquire.lua ARGV[12], the last argument) */
} cmd;

typedef struct script { cmd c[MAX_CMDS]; int n; } script;

static script lib_acquire, lib_release;

/* Parse the quoted arguments of a MONITOR line (sdscatrepr escaping). */
static int parse_monitor(const char *s, cmd *c)
{
    const char *p = strstr(s, "] ");
    c->argc = 0;
    if (!p) return -1;
    for (p += 2; *p == '"' && c->argc < MAX_ARGS; p++) {
        char *out = malloc(strlen(p) + 1);
        size_t n = 0;
        if (!out) return -1;
        for (p++; *p && *p != '"'; p++) {
            if (*p != '\\') { out[n++] = *p; continue; }
            switch (*++p) {
            case 'n': out[n++] = '\n'; break;
            case 'r': out[n++] = '\r'; break;
            case 't': out[n++] = '\t'; break;
            case 'a': out[n++] = '\a'; break;
            case 'b': out[n++] = '\b'; break;
            case 'x': {
                unsigned v = 0;
                if (sscanf(p + 1, "%2x", &v) != 1) return -1;
                out[n++] = (char)v;
                p += 2;
                break;
            }
            default: out[n++] = *p;
            }
        }
        if (*p != '"') return -1;
        out[n] = '\0';
        c->argv[c->argc] = out;
        c->len[c->argc++] = n;
        if (p[1] == ' ') p++;
    }
    if (*p == '"') return -1;   /* more than MAX_ARGS: never replay a command cut short */
    return c->argc > 0 ? 0 : -1;
}

static void marker(redisContext *side, const char *m)
{
    redisReply *rep = redisCommand(side, "ECHO %s", m);
    if (!rep) die("marker", side->errstr);
    freeReplyObject(rep);
}

/* One library cycle under MONITOR; lines between markers A-B are the acquire, B-C the
 * release (script-internal "[0 lua]" lines skipped). */
static void capture(hlt_redis *r)
{
    const char *url = r->url;
    hilock_client *c = client(&url, 1, 1);
    redisContext *mon = bare_connect(r, 1), *side = bare_connect(r, 1);
    redisReply *rep;
    script *cur = NULL;
    hilock *l;
    char token[64], count[24] = "";
    for (int i = 0; i < 2; i++) {   /* warm: connect, and EVAL if the cache was empty */
        if (hilock_acquire(c, KEY, TTL_MS, 0, &l) != HILOCK_OK) die("acquire", hilock_client_errmsg(c));
        snprintf(count, sizeof count, "%llu", (unsigned long long)hilock_fence(l));
        hilock_release(l);
        hilock_free(l);
    }
    rep = redisCommand(mon, "MONITOR");
    if (!rep) die("MONITOR", mon->errstr);
    freeReplyObject(rep);
    marker(side, "hilock-bench-A");
    if (hilock_acquire(c, KEY, TTL_MS, 0, &l) != HILOCK_OK) die("acquire", hilock_client_errmsg(c));
    snprintf(token, sizeof token, "%s", hilock_token(l));
    marker(side, "hilock-bench-B");
    if (hilock_release(l) != HILOCK_OK) die("release", hilock_client_errmsg(c));
    hilock_free(l);
    marker(side, "hilock-bench-C");
    for (;;) {
        cmd k;
        void *v;
        if (redisGetReply(mon, &v) != REDIS_OK) die("MONITOR read", mon->errstr);
        rep = v;
        if (rep->type != REDIS_REPLY_STATUS || strstr(rep->str, " lua] ")) {
            freeReplyObject(rep);
            continue;
        }
        if (parse_monitor(rep->str, &k) < 0) die("MONITOR line", rep->str);
        freeReplyObject(rep);
        if (!strcasecmp(k.argv[0], "ECHO") && k.argc == 2 && !strncmp(k.argv[1], "hilock-bench-", 13)) {
            char m = k.argv[1][13];
            for (int i = 0; i < k.argc; i++) free(k.argv[i]);
            if (m == 'C') break;
            cur = m == 'A' ? &lib_acquire : &lib_release;
            continue;
        }
        if (!cur || cur->n == MAX_CMDS) die("capture", "unexpected commands");
        for (int i = 0; i < k.argc; i++) {
            k.is_token[i] = !strcmp(k.argv[i], token);
            k.is_count[i] = cur == &lib_acquire && i == k.argc - 1 && !strcmp(k.argv[i], count);
        }
        cur->c[cur->n++] = k;
    }
    redisFree(mon);
    redisFree(side);
    hilock_client_free(c);
    if (!lib_acquire.n || !lib_release.n) die("capture", "no commands seen");
}

static void print_script(const char *name, const script *s)
{
    for (int i = 0; i < s->n; i++) {
        printf("  %-8s", i ? "" : name);
        for (int a = 0; a < s->c[i].argc; a++) {
            const char *v = s->c[i].is_token[a] ? "<token>" : s->c[i].is_count[a] ? "<count>" : s->c[i].argv[a];
            printf(" %.*s%s", s->c[i].len[a] == 40 ? 12 : 40, v, s->c[i].len[a] == 40 ? ".." : "");
        }
        printf("\n");
    }
}

static void free_script(script *s)
{
    for (int i = 0; i < s->n; i++)
        for (int a = 0; a < s->c[i].argc; a++) free(s->c[i].argv[a]);
    s->n = 0;
}

/* SCRIPT LOAD every .lua file of the library, as a client of the scripts would. */
static int load_scripts(hlt_redis *r)
{
    const char *dir = getenv("HILOCK_LUA_DIR") ? getenv("HILOCK_LUA_DIR") : "src/lua";
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    if (!d) return -1;
    while ((e = readdir(d))) {
        char p[1024], buf[65536], line[4096];
        size_t len = 0;
        FILE *f;
        redisReply *rep;
        if (!strstr(e->d_name, ".lua")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (!(f = fopen(p, "r"))) continue;
        /* as the library embeds it (scripts/embed-lua.sh): each whole-line comment blanked */
        while (fgets(line, sizeof line, f) && len + strlen(line) < sizeof buf) {
            const char *s = line + strspn(line, " \t");
            if (!strncmp(s, "--", 2)) strcpy(line, "\n");
            memcpy(buf + len, line, strlen(line));
            len += strlen(line);
        }
        fclose(f);
        rep = hlt_cmd(r, "SCRIPT LOAD %b", buf, len);
        if (rep && rep->type == REDIS_REPLY_STRING) n++;
        if (rep) freeReplyObject(rep);
    }
    closedir(d);
    return n;
}

/* ---- uncontended cycles ---- */

typedef struct runner {
    variant        v;
    hilock_client *c;
    redisContext  *rc;
    uint64_t       seq;
    char           token[40];
    char           count[24];   /* the fence counter after its last grant (cmd: is_count) */
    uint64_t       events;   /* V_COUNTED: what its observer counted */
} runner;

/* The counting observer of V_COUNTED: the least an application's observer does. */
static void count_event(const hilock_event *e, void *arg)
{
    (void)e;
    ++*(uint64_t *)arg;
}

/* Send a script's commands as one pipeline and read every reply. */
static void bare_send(runner *u, const script *s)
{
    for (int i = 0; i < s->n; i++) {
        const char *argv[MAX_ARGS];
        size_t len[MAX_ARGS];
        for (int a = 0; a < s->c[i].argc; a++) {
            argv[a] = s->c[i].is_token[a] ? u->token : s->c[i].is_count[a] ? u->count : s->c[i].argv[a];
            len[a] = s->c[i].is_token[a] ? 32 : s->c[i].is_count[a] ? strlen(u->count) : s->c[i].len[a];
        }
        redisAppendCommandArgv(u->rc, s->c[i].argc, argv, len);
    }
    for (int i = 0; i < s->n; i++) {
        void *v;
        redisReply *rep;
        if (redisGetReply(u->rc, &v) != REDIS_OK) die("hiredis", u->rc->errstr);
        rep = v;
        if (rep->type == REDIS_REPLY_ERROR) die("baseline reply", rep->str);
        if (s == &lib_acquire && rep->type == REDIS_REPLY_ARRAY && rep->elements >= 2 &&
            rep->element[0]->type == REDIS_REPLY_INTEGER && rep->element[0]->integer == 1 &&
            rep->element[1]->type == REDIS_REPLY_INTEGER)
            snprintf(u->count, sizeof u->count, "%lld", rep->element[1]->integer);
        freeReplyObject(rep);
    }
}

static void cycle(runner *u)
{
    if (u->v == V_OURS || u->v == V_COUNTED) {
        hilock *l;
        if (hilock_acquire(u->c, KEY, TTL_MS, 0, &l) != HILOCK_OK) die("acquire", hilock_client_errmsg(u->c));
        if (hilock_release(l) != HILOCK_OK) die("release", hilock_client_errmsg(u->c));
        hilock_free(l);
        return;
    }
    snprintf(u->token, sizeof u->token, "%016llx%016llx", 0x5eedULL, (unsigned long long)++u->seq);
    if (u->v == V_SAME) {
        bare_send(u, &lib_acquire);
    } else {
        const char *argv[] = { "SET", KEY, u->token, "NX", "PX", "30000" };
        redisReply *rep = redisCommandArgv(u->rc, 6, argv, NULL);
        if (!rep || rep->type != REDIS_REPLY_STATUS) die("SET NX", rep ? "not OK" : u->rc->errstr);
        freeReplyObject(rep);
    }
    bare_send(u, &lib_release);
}

typedef struct tally { uint64_t cycles; int64_t us, cpu; } tally;

/* Cycles for `secs` seconds, added to *t. */
static void timed(runner *u, double secs, tally *t)
{
    int64_t t0 = now_us(), c0 = cpu_us(), end = t0 + (int64_t)(secs * 1e6), t1;
    uint64_t n = 0;
    do {
        for (int i = 0; i < 64; i++) cycle(u);
        n += 64;
    } while ((t1 = now_us()) < end);
    t->cycles += n;
    t->us += t1 - t0;
    t->cpu += cpu_us() - c0;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void uncontended(hlt_redis *r, int unix_socket, void (*tune)(hilock_options *o), unsigned variants,
                 result *res)
{
    const char *url = unix_socket ? r->unix_url : r->url;
    static double ratio[NVARIANTS][MAX_SLICES];
    runner u[NVARIANTS];
    tally t[NVARIANTS];
    memset(t, 0, sizeof t);
    memset(u, 0, sizeof u);
    memset(res, 0, sizeof *res);
    variants |= 1u << V_OURS;
    for (int v = 0; v < NVARIANTS; v++) {
        tally warm = { 0, 0, 0 };
        u[v].v = (variant)v;
        if (!(variants & (1u << v))) continue;
        if (v == V_OURS || v == V_COUNTED) u[v].c = client_with(&url, 1, tune);
        else u[v].rc = bare_connect(r, unix_socket);
        if (v == V_COUNTED && hilock_set_observer(u[v].c, count_event, &u[v].events) != HILOCK_OK)
            die("hilock_set_observer", hilock_client_errmsg(u[v].c));
        timed(&u[v], 0.3, &warm);
    }
    for (int k = 0; k < slices; k++) {
        double rate[NVARIANTS];
        for (int v = 0; v < NVARIANTS; v++) {
            tally one = { 0, 0, 0 };
            rate[v] = 1;
            if (!(variants & (1u << v))) continue;
            timed(&u[v], SLICE_S, &one);
            rate[v] = (double)one.cycles * 1e6 / (double)one.us;
            t[v].cycles += one.cycles;
            t[v].us += one.us;
            t[v].cpu += one.cpu;
        }
        for (int v = 0; v < NVARIANTS; v++) ratio[v][k] = rate[V_OURS] / rate[v];
    }
    for (int v = 0; v < NVARIANTS; v++) {
        if (!(variants & (1u << v))) continue;
        res->rate[v] = (double)t[v].cycles * 1e6 / (double)t[v].us;
        res->cpu[v] = (double)t[v].cpu / (double)t[v].cycles;
        res->ratio[v] = median(ratio[v], slices);
        if (v == V_COUNTED && u[v].events < t[v].cycles * 3)   /* start, grant, release at least */
            die("observer", "the counting observer saw fewer than 3 events per cycle");
        if (u[v].c) hilock_client_free(u[v].c);
        if (u[v].rc) redisFree(u[v].rc);
    }
}

/* ---- contention ---- */

#define NPROC 4
#define MAX_SAMPLES 200000

typedef struct shared {
    int64_t  last_rel_us;    /* when the last holder called release */
    int      last_owner;
    int      holder;         /* -1: nobody (overlap check) */
    int      overlaps;
    uint32_t nacq, nother, ngap, nwait;
    uint32_t per[8];                /* acquisitions per process */
    int64_t  max_wait;
    int64_t  gap[MAX_SAMPLES];      /* release called -> next acquire returned, any process */
    int64_t  gap_other[MAX_SAMPLES];/* the same, when another process got it */
    uint32_t ngap_other;
    int64_t  wait[MAX_SAMPLES];     /* acquire called -> acquire returned */
} shared;

static void put(int64_t *arr, uint32_t *n, int64_t v)
{
    uint32_t i = __atomic_fetch_add(n, 1, __ATOMIC_RELAXED);
    if (i < MAX_SAMPLES) arr[i] = v;
}

static void contender(hlt_redis *r, shared *sh, int me, int wake, int64_t start, int64_t end)
{
    const char *url = r->url;
    hilock_client *c = client(&url, 1, wake);
    struct timespec hold = { 0, 1000000 };
    while (now_us() < start) usleep(100);
    for (;;) {
        int64_t t0 = now_us(), t1;
        hilock *l;
        hilock_status st;
        if (t0 >= end) break;
        st = hilock_acquire(c, "bench:contended", 5000, (end - t0) / 1000 + 1, &l);
        if (st == HILOCK_BUSY) {   /* still waiting at the end: a wait that counts too */
            put(sh->wait, &sh->nwait, now_us() - t0);
            break;
        }
        if (st != HILOCK_OK) die("contended acquire", hilock_client_errmsg(c));
        t1 = now_us();
        if (__atomic_exchange_n(&sh->holder, me, __ATOMIC_SEQ_CST) != -1)
            __atomic_fetch_add(&sh->overlaps, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&sh->nacq, 1, __ATOMIC_RELAXED);
        sh->per[me]++;
        put(sh->wait, &sh->nwait, t1 - t0);
        if (sh->last_rel_us) {
            put(sh->gap, &sh->ngap, t1 - sh->last_rel_us);
            if (sh->last_owner != me) {
                put(sh->gap_other, &sh->ngap_other, t1 - sh->last_rel_us);
                __atomic_fetch_add(&sh->nother, 1, __ATOMIC_RELAXED);
            }
        }
        nanosleep(&hold, NULL);
        sh->last_owner = me;
        __atomic_store_n(&sh->holder, -1, __ATOMIC_SEQ_CST);
        __atomic_store_n(&sh->last_rel_us, now_us(), __ATOMIC_SEQ_CST);
        if ((st = hilock_release(l)) != HILOCK_OK) die("contended release", hilock_client_errmsg(c));
        hilock_free(l);
    }
    hilock_client_free(c);
}

typedef struct contend_run { hlt_redis *r; shared *sh; int wake; int64_t start, end; } contend_run;

static void contend_one(int i, void *arg)
{
    contend_run *run = arg;
    contender(run->r, run->sh, i, run->wake, run->start, run->end);
}

static void contention(hlt_redis *r, int wake, const char *label)
{
    shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int64_t start, end;
    contend_run run;
    uint32_t ng, ngo, nw;
    double secs = run_s * 0.75;
    if (sh == MAP_FAILED) die("mmap", strerror(errno));
    memset(sh, 0, sizeof *sh);
    sh->holder = -1;
    start = now_us() + 200000;   /* every process connected and ready */
    end = start + (int64_t)(secs * 1e6);
    run = (contend_run){ r, sh, wake, start, end };
    in_processes(NPROC, contend_one, &run, "contender");
    ng = sh->ngap < MAX_SAMPLES ? sh->ngap : MAX_SAMPLES;
    ngo = sh->ngap_other < MAX_SAMPLES ? sh->ngap_other : MAX_SAMPLES;
    nw = sh->nwait < MAX_SAMPLES ? sh->nwait : MAX_SAMPLES;
    qsort(sh->gap, ng, sizeof *sh->gap, cmp_i64);
    qsort(sh->gap_other, ngo, sizeof *sh->gap_other, cmp_i64);
    qsort(sh->wait, nw, sizeof *sh->wait, cmp_i64);
    uint32_t lo = UINT32_MAX, hi = 0;
    for (int i = 0; i < NPROC; i++) {
        if (sh->per[i] < lo) lo = sh->per[i];
        if (sh->per[i] > hi) hi = sh->per[i];
    }
    printf("  %-16s %6.0f %5u-%-5u %4.0f%%  %6.3f %6.3f   %6.3f %6.3f   %6.2f %7.2f %7.1f  %d\n", label,
           sh->nacq / secs, lo, hi, sh->nacq ? 100.0 * sh->nother / sh->nacq : 0.0,
           pct_ms(sh->gap, ng, 0.5), pct_ms(sh->gap, ng, 0.99),
           pct_ms(sh->gap_other, ngo, 0.5), pct_ms(sh->gap_other, ngo, 0.99),
           pct_ms(sh->wait, nw, 0.5), pct_ms(sh->wait, nw, 0.99), pct_ms(sh->wait, nw, 1.0), sh->overlaps);
    munmap(sh, sizeof *sh);
}

/* ---- Redlock ---- */

#define NMASTERS 5

typedef struct lat { int64_t *v; size_t n, cap; } lat;

static void add_lat(lat *L, int64_t us)
{
    if (L->n == L->cap) {
        L->cap = L->cap ? L->cap * 2 : 4096;
        if (!(L->v = realloc(L->v, L->cap * sizeof *L->v))) die("realloc", "out of memory");
    }
    L->v[L->n++] = us;
}

/* One cycle of the bare floor: the library's commands to every master at once (all writes
 * out before the first read), acquire then release; without the counter's last value (the
 * library sends none to a Redlock's masters). */
static void bare_all(redisContext **rc, size_t n, const script *s, const char *token)
{
    for (size_t m = 0; m < n; m++) {
        for (int i = 0; i < s->n; i++) {
            const char *argv[MAX_ARGS];
            size_t len[MAX_ARGS];
            int argc = s->c[i].argc - s->c[i].is_count[s->c[i].argc - 1];
            for (int a = 0; a < argc; a++) {
                argv[a] = s->c[i].is_token[a] ? token : s->c[i].argv[a];
                len[a] = s->c[i].is_token[a] ? strlen(token) : s->c[i].len[a];
            }
            redisAppendCommandArgv(rc[m], argc, argv, len);
        }
        for (int done = 0; !done;)
            if (redisBufferWrite(rc[m], &done) != REDIS_OK) die("hiredis", rc[m]->errstr);
    }
    for (size_t m = 0; m < n; m++)
        for (int i = 0; i < s->n; i++) {
            void *v;
            if (redisGetReply(rc[m], &v) != REDIS_OK) die("hiredis", rc[m]->errstr);
            if (((redisReply *)v)->type == REDIS_REPLY_ERROR) die("floor reply", ((redisReply *)v)->str);
            freeReplyObject(v);
        }
}

static void redlock_run(hilock_client *c, redisContext **rc, size_t n, double secs, lat *L)
{
    int64_t end = now_us() + (int64_t)(secs * 1e6);
    uint64_t seq = 0;
    while (now_us() < end) {
        int64_t t0 = now_us();
        if (c) {
            hilock *l;
            if (hilock_acquire(c, KEY, TTL_MS, 0, &l) != HILOCK_OK)
                die("redlock acquire", hilock_client_errmsg(c));
            if (hilock_release(l) != HILOCK_OK) die("redlock release", hilock_client_errmsg(c));
            hilock_free(l);
        } else {
            char token[40];
            snprintf(token, sizeof token, "%016llx%016llx", 0xf100ULL, (unsigned long long)++seq);
            bare_all(rc, n, &lib_acquire, token);
            bare_all(rc, n, &lib_release, token);
        }
        add_lat(L, now_us() - t0);
    }
}

static void summary(lat *L, double *mean, double *p50)
{
    int64_t sum = 0;
    for (size_t i = 0; i < L->n; i++) sum += L->v[i];
    *mean = L->n ? (double)sum / (double)L->n / 1000.0 : 0;
    qsort(L->v, L->n, sizeof *L->v, cmp_i64);
    *p50 = pct_ms(L->v, L->n, 0.5);
}

static void redlock(hlt_redis *first)
{
    static const size_t sizes[] = { 1, 3, 5 };
    hlt_redis *m[NMASTERS] = { first };
    const char *urls[NMASTERS];
    redisContext *rc[NMASTERS];
    hilock_client *c[3];
    lat L[3] = { { 0 } }, F[3] = { { 0 } };
    double mean[3], p50[3], fmean[3], fp50[3];
    for (int i = 1; i < NMASTERS; i++)
        if (!(m[i] = hlt_redis_start(NULL))) die("redlock", "could not start 5 servers");
    for (int i = 0; i < NMASTERS; i++) {
        urls[i] = m[i]->url;
        load_scripts(m[i]);
        rc[i] = bare_connect(m[i], 0);
    }
    for (int s = 0; s < 3; s++) {
        c[s] = client(urls, sizes[s], 1);
        redlock_run(c[s], NULL, 0, 0.2, &L[s]);   /* warm-up: connect everywhere */
        redlock_run(NULL, rc, sizes[s], 0.2, &F[s]);
        L[s].n = F[s].n = 0;
    }
    for (int k = 0; k < slices / 2; k++)   /* half the time of the other parts */
        for (int s = 0; s < 3; s++) {
            redlock_run(c[s], NULL, 0, SLICE_S, &L[s]);
            redlock_run(NULL, rc, sizes[s], SLICE_S, &F[s]);
        }
    printf("\nRedlock: acquire+release latency, all masters asked at once (TCP 127.0.0.1, %.1f s each, "
           "interleaved);\n  floor = bare hiredis sending the same commands to every master at once\n",
           slices / 2 * SLICE_S);
    printf("  masters   hilock mean  p50 ms  p99 ms    floor mean  p50 ms\n");
    for (int s = 0; s < 3; s++) {
        summary(&L[s], &mean[s], &p50[s]);
        summary(&F[s], &fmean[s], &fp50[s]);
        printf("  %7zu      %7.3f %7.3f %7.3f       %7.3f %7.3f\n", sizes[s], mean[s], p50[s],
               pct_ms(L[s].v, L[s].n, 0.99), fmean[s], fp50[s]);
    }
    printf("  5 vs 1 master: hilock mean x%.2f, p50 x%.2f (target <= 1.5); floor p50 x%.2f\n",
           mean[2] / mean[0], p50[2] / p50[0], fp50[2] / fp50[0]);
    for (int s = 0; s < 3; s++) {
        hilock_client_free(c[s]);
        free(L[s].v);
        free(F[s].v);
    }
    for (int i = 0; i < NMASTERS; i++) redisFree(rc[i]);
    for (int i = 1; i < NMASTERS; i++) hlt_redis_stop(m[i]);
}

/* Part 1's table, for both transports (res[0] TCP, res[1] unix socket). */
static void print_uncontended(const result res[2])
{
    printf("\nUncontended acquire+release on one connection, cycles/s; ratio = hilock / baseline, the "
           "median of\n%d slice ratios (targets: >= 0.9 vs (a), and vs (b) for the default fenced client); CPU = client user+sys us per cycle\n", slices);
    printf("  transport        hilock  CPU  | (a) same commands  CPU  ratio | (b) SET NX PX + release  CPU  ratio\n");
    for (int t = 0; t < 2; t++)
        printf("  %-13s %9.0f %5.1f |         %9.0f %5.1f  %5.2f |               %9.0f %5.1f  %5.2f\n",
               t ? "unix socket" : "tcp 127.0.0.1", res[t].rate[V_OURS], res[t].cpu[V_OURS],
               res[t].rate[V_SAME], res[t].cpu[V_SAME], res[t].ratio[V_SAME],
               res[t].rate[V_SETNX], res[t].cpu[V_SETNX], res[t].ratio[V_SETNX]);
}

/* Issue 14's fast path (was bench/fastpath.c): uncontended acquire+release with
 * options.fencing = 0 (one plain SET NX PX per grant) against baseline (b) -- a bare hiredis
 * loop sending SET NX PX + the library's compare-and-delete -- in interleaved slices, over TCP
 * 127.0.0.1 and a unix socket (uncontended above). Printed next to the default (fenced)
 * client's ratio to the same baseline from the table above it, so the cost of the fencing token
 * is the difference of the two. Target: fencing = 0 >= 0.97 x (b). */
static void tune_no_fence(hilock_options *o)
{
    o->fencing = 0;
}

static void fastpath(hlt_redis *r, const result fenced[2])
{
    result res[2];
    uncontended(r, 0, tune_no_fence, 1u << V_SETNX, &res[0]);
    uncontended(r, 1, tune_no_fence, 1u << V_SETNX, &res[1]);
    printf("\nFast path (issue 14): options.fencing = 0 (a plain SET NX PX, no fencing token) "
           "against (b), run as above\n(target >= 0.97); fencing = 1 = the default client's "
           "ratio to (b) in the table above\n");
    printf("  transport     fencing=0  CPU  | (b) SET NX PX + release  CPU  ratio | fencing=1 ratio\n");
    for (int t = 0; t < 2; t++)
        printf("  %-13s %9.0f %5.1f |               %9.0f %5.1f  %5.2f |           %5.2f\n",
               t ? "unix socket" : "tcp 127.0.0.1", res[t].rate[V_OURS], res[t].cpu[V_OURS],
               res[t].rate[V_SETNX], res[t].cpu[V_SETNX], res[t].ratio[V_SETNX],
               fenced[t].ratio[V_SETNX]);
}

/* Issue 27's cost of events (hilock_observe.h): the default client with no observer and one
 * with a counting observer, in interleaved slices with (b), over TCP and a unix socket. No
 * observer against (b) is the number to hold next to the table above (and to the same row of
 * a build before observers: docs/performance.md); counting / none is 1 / the median of the
 * per-slice none / counting ratios. Targets: none within 1% of the client before observers,
 * counting >= 0.95 x none. */
static void observer_cost(hlt_redis *r)
{
    result res[2];
    uncontended(r, 0, NULL, 1u << V_SETNX | 1u << V_COUNTED, &res[0]);
    uncontended(r, 1, NULL, 1u << V_SETNX | 1u << V_COUNTED, &res[1]);
    printf("\nObserver cost (issue 27): the default client with no observer and with a counting one "
           "(hilock_set_observer),\nrun as above against (b); counting / none: the same run's ratio "
           "(target >= 0.95)\n");
    printf("  transport     no observer  CPU  ratio to (b) | counting  CPU  ratio to (b) | counting / none\n");
    for (int t = 0; t < 2; t++)
        printf("  %-13s   %9.0f %5.1f        %5.2f | %8.0f %5.1f        %5.2f |           %5.3f\n",
               t ? "unix socket" : "tcp 127.0.0.1", res[t].rate[V_OURS], res[t].cpu[V_OURS],
               res[t].ratio[V_SETNX], res[t].rate[V_COUNTED], res[t].cpu[V_COUNTED],
               res[t].ratio[V_SETNX] / res[t].ratio[V_COUNTED], 1.0 / res[t].ratio[V_COUNTED]);
}

/* `bench fairness`: only the fairness table (bench/fairness.c). */
int main(int argc, char **argv)
{
    const char *e;
    hlt_redis *r;
    redisReply *ver;
    result res[2];
    int nloaded;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if ((e = getenv("HILOCK_BENCH_SECONDS")) && atof(e) > 0) run_s = atof(e);
    slices = (int)(run_s / SLICE_S + 0.5);
    if (slices < 2) slices = 2;
    if (slices > MAX_SLICES) slices = MAX_SLICES;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!(r = hlt_redis_start(NULL))) die("redis-server", "did not start");
    ver = hlt_cmd(r, "INFO server");
    printf("hilock %s bench: redis-server %s, %ld CPUs, %.1f s per variant in %d interleaved slices "
           "(HILOCK_BENCH_SECONDS)\n", HILOCK_VERSION, ver && ver->str && strstr(ver->str, "redis_version:") ?
           strtok(strstr(ver->str, "redis_version:") + 14, "\r\n") : "?", ncpu, slices * SLICE_S, slices);
    if (ver) freeReplyObject(ver);
    if (argc > 1 && !strcmp(argv[1], "fairness")) {
        fairness(r);
        hlt_redis_stop(r);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "tls")) {
        tls_bench(run_s);
        hlt_redis_stop(r);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "async")) {
        async_bench(r);
        hlt_redis_stop(r);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "kinds")) {
        kinds_bench(r, run_s);
        hlt_redis_stop(r);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "handoff")) {
        handoff_floor(r, run_s);
        hlt_redis_stop(r);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "scale")) {
        scale_bench(r, run_s);
        hlt_redis_stop(r);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "cluster")) {
        cluster_bench(run_s);
        hlt_redis_stop(r);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "guarded")) {
        guarded_bench(r, run_s);
        hlt_redis_stop(r);
        return 0;
    }

    nloaded = load_scripts(r);
    capture(r);
    if (argc > 1 && !strcmp(argv[1], "observer")) {   /* part 1's observer table only */
        observer_cost(r);
        hlt_redis_stop(r);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "uncontended")) {   /* part 1 only (with its table) */
        uncontended(r, 0, NULL, BASELINES, &res[0]);
        uncontended(r, 1, NULL, BASELINES, &res[1]);
        print_uncontended(res);
        hlt_redis_stop(r);
        return 0;
    }
    printf("\nWhat one library cycle sends (captured with MONITOR; baseline (a) replays it, after "
           "SCRIPT LOAD of %d scripts):\n", nloaded);
    print_script("acquire", &lib_acquire);
    print_script("release", &lib_release);

    uncontended(r, 0, NULL, BASELINES, &res[0]);
    uncontended(r, 1, NULL, BASELINES, &res[1]);
    print_uncontended(res);
    async_bench(r);
    fastpath(r, res);   /* options.fencing = 0 against (b), next to the fenced ratios above */
    observer_cost(r);

    printf("\nContention: %d processes, each acquire (blocking) -> hold 1 ms -> release, %.1f s "
           "(TCP 127.0.0.1; target: handoff p50 < 1 ms)\n", NPROC, run_s * 0.75);
    printf("  per process = acquisitions of the least and the most lucky process; other = share "
           "of acquisitions\n  by another process than the last holder; handoff = the holder "
           "calls release -> the next holder's\n  acquire returns (all / to another process); "
           "wait = acquire called -> returned (or the run ended)\n");
    printf("  %-16s %6s %11s %5s  %-13s   %-13s   %-22s\n", "", "", "", "", "handoff ms", "to other ms",
           "wait ms");
    printf("  %-16s %6s %11s %5s  %6s %6s   %6s %6s   %6s %7s %7s  %s\n", "mode", "acq/s",
           "per process", "other", "p50", "p99", "p50", "p99", "p50", "p99", "max", "overlaps");
    contention(r, 1, "wake-up");
    contention(r, 0, "polling (wake=0)");
    handoff_floor(r, run_s);
    fairness(r);
    kinds_bench(r, run_s);
    guarded_bench(r, run_s);
    scale_bench(r, run_s);

    redlock(r);
    tls_bench(run_s);
    cluster_bench(run_s);
    free_script(&lib_acquire);
    free_script(&lib_release);
    hlt_redis_stop(r);
    return 0;
}
