/* SPDX-License-Identifier: BSD-3-Clause */
/* async.c -- `make bench`, the event-loop API (issue 13): one thread, one connection (TCP
 * 127.0.0.1), uncontended acquire+release cycles/s with 1, 10 and 100 cycles in flight
 * (each in flight: acquire -> its done releases -> that done acquires again, on a key of its
 * own), next to, in the same run, the blocking client (one cycle at a time) and bare hiredis
 * pipelining the same number of cycles: the library's own scripts with the keys and arguments
 * it sends (the holder record's too: the server's ceiling for this work), SET NX PX + the
 * library's compare-and-delete (release.lua by EVALSHA: the baseline of a lock that can be
 * released safely, without a fencing token) and SET NX PX + DEL (the floor of any lock).
 * Targets: >= 10 x the blocking client, and >= 0.8 x the SET NX PX + compare-and-delete
 * baseline, at 100 in flight. HILOCK_BENCH_SECONDS scales the time (default 4 s per variant
 * in bench.c; here half of it per measure, in SLICES slices that take turns with the other
 * variants', so a burst of load elsewhere on the machine hits them all alike). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "bench.h"
#include "hilock_libuv.h"

#define MAX_FLIGHT 100
#define NFLIGHTS 3   /* 1, 10 and 100 in flight */
#define SLICES 4     /* each measure in this many turns (async_bench) */

typedef struct chain { struct arun *run; int i; long cycles; } chain;
typedef struct arun {
    hilock_client *c;
    chain          ch[MAX_FLIGHT];
    int            stop, live, errors;
} arun;

static void on_acquired(hilock_status st, hilock *l, void *arg);

static void next_cycle(chain *k)
{
    char key[32];
    if (k->run->stop) {
        k->run->live--;
        return;
    }
    snprintf(key, sizeof key, "bench:async:%d", k->i);
    if (hilock_acquire_async(k->run->c, key, 10000, 0, on_acquired, k) != HILOCK_OK) {
        k->run->errors++;
        k->run->live--;
    }
}

static void on_released(hilock_status st, hilock *l, void *arg)
{
    chain *k = arg;
    if (st != HILOCK_OK) k->run->errors++;
    hilock_free(l);
    k->cycles++;
    next_cycle(k);
}

static void on_acquired(hilock_status st, hilock *l, void *arg)
{
    chain *k = arg;
    if (st != HILOCK_OK || hilock_release_async(l, on_released, k) != HILOCK_OK) {
        k->run->errors++;
        hilock_free(l);
        next_cycle(k);
    }
}

static void on_stop(uv_timer_t *t) { ((arun *)t->data)->stop = 1; }

/* A measure's rate, and the client's and the server's CPU time per cycle (us); and its sums
 * (rate_add: several slices make one measure). */
typedef struct rate { double per_s, cpu, server_cpu, cycles, us, cpu_us, server_us; } rate;

static void rate_add(rate *sum, const rate *x)
{
    double n;
    sum->cycles += x->cycles;
    sum->us += x->us;
    sum->cpu_us += x->cpu_us;
    sum->server_us += x->server_us;
    n = sum->cycles > 0 ? sum->cycles : 1;
    sum->per_s = sum->cycles / (sum->us / 1e6);
    sum->cpu = sum->cpu_us / n;
    sum->server_cpu = sum->server_us / n;
}

typedef struct meter { int64_t t0, c0, s0; } meter;

static meter meter_start(hlt_redis *r)
{
    meter m;
    m.s0 = r ? server_cpu_us(r) : 0;
    m.c0 = cpu_us();
    m.t0 = now_us();
    return m;
}

static rate meter_end(hlt_redis *r, const meter *m, long cycles)
{
    rate x = { 0 }, sum = { 0 };
    x.cycles = (double)cycles;
    x.us = (double)(now_us() - m->t0);
    x.cpu_us = (double)(cpu_us() - m->c0);
    x.server_us = r ? (double)(server_cpu_us(r) - m->s0) : 0;
    rate_add(&sum, &x);
    return sum;
}

/* flight cycles in flight on a client of url attached to a loop; r: the server whose CPU is
 * counted, or NULL (none counted: a cluster). */
static rate async_rate_url(const char *u, hlt_redis *r, int flight, double secs)
{
    static arun a;
    uv_loop_t loop;
    uv_timer_t stop;
    const char *url[1] = { u };
    long cycles = 0;
    meter m;
    memset(&a, 0, sizeof a);
    uv_loop_init(&loop);
    a.c = client_with(url, 1, NULL);
    if (hilock_libuv_attach(a.c, &loop) != HILOCK_OK) die("libuv attach", hilock_client_errmsg(a.c));
    uv_timer_init(&loop, &stop);
    stop.data = &a;
    uv_timer_start(&stop, on_stop, (uint64_t)(secs * 1000), 0);
    m = meter_start(r);
    for (int i = 0; i < flight; i++) {
        a.ch[i].run = &a;
        a.ch[i].i = i;
        a.live++;
        next_cycle(&a.ch[i]);
    }
    while (a.live > 0) uv_run(&loop, UV_RUN_ONCE);
    for (int i = 0; i < flight; i++) cycles += a.ch[i].cycles;
    if (a.errors) die("async bench", "calls failed");
    rate x = meter_end(r, &m, cycles);
    uv_close((uv_handle_t *)&stop, NULL);
    hilock_client_free(a.c);
    uv_run(&loop, UV_RUN_NOWAIT);
    uv_loop_close(&loop);
    return x;
}

static rate async_rate(hlt_redis *r, int flight, double secs)
{
    return async_rate_url(r->url, r, flight, secs);
}

double async_loop_rate(const char *url, int flight, double secs)
{
    return async_rate_url(url, NULL, flight, secs).per_s;
}

static double blocking_rate(hlt_redis *r, double secs)
{
    const char *url[1] = { r->url };
    hilock_client *c = client_with(url, 1, NULL);
    long cycles = 0;
    int64_t t0 = now_us(), end = t0 + (int64_t)(secs * 1e6);
    while (now_us() < end) {
        hilock *l;
        if (hilock_acquire(c, "bench:blocking", 10000, 0, &l) != HILOCK_OK ||
            hilock_release(l) != HILOCK_OK)
            die("blocking bench", hilock_client_errmsg(c));
        hilock_free(l);
        cycles++;
    }
    hilock_client_free(c);
    return (double)cycles / ((double)(now_us() - t0) / 1e6);
}

/* SCRIPT LOAD of src/lua/<name>.lua (HILOCK_LUA_DIR): its SHA in sha. */
static void load_script(redisContext *rc, const char *name, char *sha)
{
    const char *dir = getenv("HILOCK_LUA_DIR") ? getenv("HILOCK_LUA_DIR") : "src/lua";
    char path[1024], body[65536];
    size_t n;
    redisReply *rep;
    FILE *f;
    snprintf(path, sizeof path, "%s/%s.lua", dir, name);
    if (!(f = fopen(path, "r"))) die(path, "cannot read (HILOCK_LUA_DIR)");
    n = fread(body, 1, sizeof body - 1, f);
    fclose(f);
    body[n] = '\0';
    rep = redisCommand(rc, "SCRIPT LOAD %s", body);
    if (!rep || rep->type != REDIS_REPLY_STRING) die("SCRIPT LOAD", path);
    snprintf(sha, 41, "%s", rep->str);
    freeReplyObject(rep);
}

/* This host's clock in ms: the acquire script's clock floor for (a), as the library passes
 * its reading of the server's (a second behind: the server is this host). */
static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What bare hiredis pipelines per cycle (hiredis_rate). */
typedef enum bare { BARE_SET_DEL, BARE_SCRIPTS, BARE_SET_RELEASE, BARE_SCRIPTS_AFTER } bare;

/* count, till_us: per key, as the library's client keeps them (src/kinds/modern.c): the fence
 * counter after its last grant and until when its holder record lives, so acquire.lua skips
 * the record as it does for the library */
typedef struct bare_conn {
    redisContext *rc;
    char          acq[41], rel[41], holder[300];
    long long     count[MAX_FLIGHT];
    int64_t       till_us[MAX_FLIGHT];
} bare_conn;

/* The cycle's acquire, key i: the library's acquire.lua, as src/kinds/modern.c's acquire_cmd
 * sends it; or SET NX PX. */
static void append_acquire(bare_conn *b, bare what, int i)
{
    if (what == BARE_SET_DEL)
        redisAppendCommand(b->rc, "SET bench:bare:%d tok NX PX 10000", i);
    else if (what == BARE_SET_RELEASE)
        redisAppendCommand(b->rc, "SET {b:%d} 0123456789abcdef0123456789abcdef NX PX 10000", i);
    else if (b->till_us[i] - now_us() >= 15000 * 1000LL)   /* HL_RECORD_RENEW(10 s) */
        redisAppendCommand(b->rc, "EVALSHA %s 4 {b:%d} {b:%d}:fence {b:%d}:waiters {b:%d}:holder "
                           "0123456789abcdef0123456789abcdef 10000 3610000 %lld 0 3024010000 %s 0 0 0 20000 %lld",
                           b->acq, i, i, i, i, (long long)(wall_ms() - 1000), b->holder, b->count[i]);
    else
        redisAppendCommand(b->rc, "EVALSHA %s 4 {b:%d} {b:%d}:fence {b:%d}:waiters {b:%d}:holder "
                           "0123456789abcdef0123456789abcdef 10000 3610000 %lld 0 3024010000 %s 0 0 0 20000", b->acq,
                           i, i, i, i, (long long)(wall_ms() - 1000), b->holder);   /* (the floor) */
}

/* The cycle's release: release.lua (as src/lock/kind.c's value_cmd), or DEL. */
static void append_release(bare_conn *b, bare what, int i)
{
    if (what == BARE_SET_DEL)
        redisAppendCommand(b->rc, "DEL bench:bare:%d", i);
    else if (what == BARE_SET_RELEASE)
        redisAppendCommand(b->rc, "EVALSHA %s 3 {b:%d} {b:%d}:signal {b:%d}:waiters "
                           "0123456789abcdef0123456789abcdef", b->rel, i, i, i);
    else
        redisAppendCommand(b->rc, "EVALSHA %s 3 {b:%d} {b:%d}:signal {b:%d}:waiters "
                           "0123456789abcdef0123456789abcdef", b->rel, i, i, i);
}

/* n replies; step > 0: every step-th from the first is acquire.lua's for key 0, 1, ...: its
 * count and record kept, as the library's client keeps them (t0: when it was sent) */
static void read_replies(bare_conn *b, int n, int step, int64_t t0)
{
    for (int i = 0; i < n; i++) {
        redisReply *rep;
        if (redisGetReply(b->rc, (void **)&rep) != REDIS_OK) die("hiredis", b->rc->errstr);
        if (rep->type == REDIS_REPLY_ERROR) die("hiredis", rep->str);
        if (step > 0 && i % step == 0 && rep->type == REDIS_REPLY_ARRAY && rep->elements >= 2 &&
            rep->element[0]->integer == 1) {
            b->count[i / step] = rep->element[1]->integer;
            if (rep->elements == 3) b->till_us[i / step] = t0 + rep->element[2]->integer * 1000;
        }
        freeReplyObject(rep);
    }
}

/* Bare hiredis, `depth` cycles pipelined: BARE_SET_DEL: SET NX PX + DEL (the floor of any
 * lock); BARE_SCRIPTS: the library's own scripts (acquire.lua with its fence, release.lua),
 * EVALSHA with the arguments the library sends -- the server's work per cycle is then the
 * same --, a cycle's two sent at once; BARE_SCRIPTS_AFTER: the same scripts, the releases
 * sent once their acquires' replies are read (two round trips per cycle, as any lock client
 * that holds its lock between them: the batch of each in one write); BARE_SET_RELEASE: SET NX
 * PX + release.lua by EVALSHA (a lock without a fencing token, released by
 * compare-and-delete). */
static rate hiredis_rate(hlt_redis *r, int depth, bare what, double secs)
{
    bare_conn b = { .rc = redisConnect("127.0.0.1", r->port) };
    long cycles = 0;
    int64_t end;
    meter m;
    rate x;
    char host[256] = "";   /* the holder record "tag\nhost\npid\nprogram" (ARGV[7]), as the client's */
    if (!b.rc || b.rc->err) die("hiredis", b.rc ? b.rc->errstr : "connect");
    gethostname(host, sizeof host - 1);
    snprintf(b.holder, sizeof b.holder, "456789abcdef\n%s\n%ld\nbench", host, (long)getpid());
    if (what != BARE_SET_DEL) {
        load_script(b.rc, "acquire", b.acq);
        load_script(b.rc, "release", b.rel);
    }
    m = meter_start(r);
    end = m.t0 + (int64_t)(secs * 1e6);
    while (now_us() < end) {
        int64_t t0 = now_us();
        for (int i = 0; i < depth; i++) {
            append_acquire(&b, what, i);
            if (what != BARE_SCRIPTS_AFTER) append_release(&b, what, i);
        }
        if (what == BARE_SCRIPTS_AFTER) {
            read_replies(&b, depth, 1, t0);
            for (int i = 0; i < depth; i++) append_release(&b, what, i);
        }
        read_replies(&b, what == BARE_SCRIPTS_AFTER ? depth : 2 * depth, what == BARE_SCRIPTS ? 2 : 0, t0);
        cycles += depth;
    }
    x = meter_end(r, &m, cycles);
    redisFree(b.rc);
    return x;
}

void async_bench(hlt_redis *r)
{
    static const int flights[NFLIGHTS] = { 1, 10, 100 };
    const char *e = getenv("HILOCK_BENCH_SECONDS");
    double secs = e && atof(e) > 0 ? atof(e) / 2 : 2.0, blocking;
    rate a[NFLIGHTS] = { 0 }, h[NFLIGHTS] = { 0 }, d[NFLIGHTS] = { 0 }, c[NFLIGHTS] = { 0 }, f[NFLIGHTS] = { 0 };
    blocking = blocking_rate(r, secs);
    printf("\nEvent-loop API (libuv), one thread, one connection (TCP 127.0.0.1), uncontended "
           "acquire+release cycles/s,\n%.1f s per measure in %d turns taken with the other variants'; "
           "blocking client (one cycle at a time):\n%.0f cycles/s (target: >= 10 x that at 100 in "
           "flight). Bare hiredis pipelines the same number of cycles: (a) the "
           "library's scripts, EVALSHA (the server's\nwork per cycle is the same), a cycle's two at once; "
           "(d) the same, each release sent once its acquire's\nreply is read (two round trips a cycle, as "
           "any client that holds the lock between them); (c) SET NX PX\n+ release.lua by EVALSHA (a lock "
           "without a fencing token; target: async >= 0.65 x (c) at 100 in\nflight); (b) SET NX PX + DEL "
           "(the floor of any lock)\n", secs, SLICES, blocking);
    printf("  in flight   hilock async  x blocking | (a) same scripts  async/(a) | (d) release after  "
           "async/(d) | (c) SET+release  async/(c) | (b) SET+DEL\n");
    for (size_t i = 0; i < NFLIGHTS; i++) {
        for (int s = 0; s < SLICES; s++) {   /* the variants take turns */
            rate x;
            x = async_rate(r, flights[i], secs / SLICES), rate_add(&a[i], &x);
            x = hiredis_rate(r, flights[i], BARE_SCRIPTS, secs / SLICES), rate_add(&h[i], &x);
            x = hiredis_rate(r, flights[i], BARE_SCRIPTS_AFTER, secs / SLICES), rate_add(&d[i], &x);
            x = hiredis_rate(r, flights[i], BARE_SET_RELEASE, secs / SLICES), rate_add(&c[i], &x);
            x = hiredis_rate(r, flights[i], BARE_SET_DEL, secs / SLICES), rate_add(&f[i], &x);
        }
        printf("  %9d   %12.0f  %10.2f | %16.0f  %9.2f | %17.0f  %9.2f | %15.0f  %9.2f | %11.0f\n", flights[i],
               a[i].per_s, a[i].per_s / blocking, h[i].per_s, a[i].per_s / h[i].per_s, d[i].per_s,
               a[i].per_s / d[i].per_s, c[i].per_s, a[i].per_s / c[i].per_s, f[i].per_s);
    }
    printf("  CPU us per cycle at %d in flight, client / server: hilock async %.1f / %.1f, (a) %.1f / "
           "%.1f,\n  (d) %.1f / %.1f, (c) %.1f / %.1f, (b) %.1f / %.1f\n", flights[NFLIGHTS - 1], a[NFLIGHTS - 1].cpu,
           a[NFLIGHTS - 1].server_cpu, h[NFLIGHTS - 1].cpu, h[NFLIGHTS - 1].server_cpu, d[NFLIGHTS - 1].cpu,
           d[NFLIGHTS - 1].server_cpu, c[NFLIGHTS - 1].cpu, c[NFLIGHTS - 1].server_cpu, f[NFLIGHTS - 1].cpu,
           f[NFLIGHTS - 1].server_cpu);
    /* what the loop client's way of sending costs the server: the same scripts, its server
     * CPU per cycle over bare pipelining's -- (d), which waits for the grant as the loop must,
     * and (a), which does not (one read and one write fewer per cycle for the server) */
    printf("  server CPU per cycle, hilock async / (d) (target <= 1.1):");
    for (size_t i = 0; i < NFLIGHTS; i++)
        printf(" %d in flight %.2f%s", flights[i],
               d[i].server_cpu > 0 ? a[i].server_cpu / d[i].server_cpu : 0.0, i + 1 < NFLIGHTS ? "," : "\n");
    printf("  server CPU per cycle, hilock async / (a):");
    for (size_t i = 0; i < NFLIGHTS; i++)
        printf(" %d in flight %.2f%s", flights[i],
               h[i].server_cpu > 0 ? a[i].server_cpu / h[i].server_cpu : 0.0, i + 1 < NFLIGHTS ? "," : "\n");
}
