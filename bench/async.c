/* async.c -- `make bench`, the event-loop API (issue 13): one thread, one connection (TCP
 * 127.0.0.1), uncontended acquire+release cycles/s with 1, 10 and 100 cycles in flight
 * (each in flight: acquire -> its done releases -> that done acquires again, on a key of its
 * own), next to, in the same run, the blocking client (one cycle at a time) and bare hiredis
 * pipelining the same number of cycles: the library's own scripts (the server's ceiling for
 * this work) and SET NX PX + DEL (the floor of any lock).
 * Target: >= 10 x the blocking client at 100 in flight. HILOCK_BENCH_SECONDS scales the
 * time (default 4 s per variant in bench.c; here a quarter of it per measure). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "bench.h"
#include "hilock_libuv.h"

#define MAX_FLIGHT 100

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

static double async_rate(hlt_redis *r, int flight, double secs)
{
    static arun a;
    uv_loop_t loop;
    uv_timer_t stop;
    const char *url[1] = { r->url };
    long cycles = 0;
    int64_t t0;
    memset(&a, 0, sizeof a);
    uv_loop_init(&loop);
    a.c = client_with(url, 1, NULL);
    if (hilock_libuv_attach(a.c, &loop) != HILOCK_OK) die("libuv attach", hilock_client_errmsg(a.c));
    uv_timer_init(&loop, &stop);
    stop.data = &a;
    uv_timer_start(&stop, on_stop, (uint64_t)(secs * 1000), 0);
    t0 = now_us();
    for (int i = 0; i < flight; i++) {
        a.ch[i].run = &a;
        a.ch[i].i = i;
        a.live++;
        next_cycle(&a.ch[i]);
    }
    while (a.live > 0) uv_run(&loop, UV_RUN_ONCE);
    for (int i = 0; i < flight; i++) cycles += a.ch[i].cycles;
    if (a.errors) die("async bench", "calls failed");
    uv_close((uv_handle_t *)&stop, NULL);
    hilock_client_free(a.c);
    uv_run(&loop, UV_RUN_NOWAIT);
    uv_loop_close(&loop);
    return (double)cycles / ((double)(now_us() - t0) / 1e6);
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

/* Bare hiredis, `depth` cycles pipelined: scripts = 0: SET NX PX + DEL (the floor of any
 * lock); 1: the library's own scripts (acquire.lua with its fence, release.lua), EVALSHA
 * with the arguments the library sends -- the server's work per cycle is then the same. */
static double hiredis_rate(hlt_redis *r, int depth, int scripts, double secs)
{
    redisContext *rc = redisConnect("127.0.0.1", r->port);
    char acq[41], rel[41];
    long cycles = 0;
    int64_t t0, end;
    if (!rc || rc->err) die("hiredis", rc ? rc->errstr : "connect");
    if (scripts) {
        load_script(rc, "acquire", acq);
        load_script(rc, "release", rel);
    }
    t0 = now_us();
    end = t0 + (int64_t)(secs * 1e6);
    while (now_us() < end) {
        for (int i = 0; i < depth; i++) {
            if (scripts) {
                redisAppendCommand(rc, "EVALSHA %s 3 {b:%d} {b:%d}:fence {b:%d}:waiters "
                                   "0123456789abcdef0123456789abcdef 10000 3610000 0 0", acq, i, i, i);
                redisAppendCommand(rc, "EVALSHA %s 3 {b:%d} {b:%d}:signal {b:%d}:waiters "
                                   "0123456789abcdef0123456789abcdef", rel, i, i, i);
            } else {
                redisAppendCommand(rc, "SET bench:bare:%d tok NX PX 10000", i);
                redisAppendCommand(rc, "DEL bench:bare:%d", i);
            }
        }
        for (int i = 0; i < 2 * depth; i++) {
            redisReply *rep;
            if (redisGetReply(rc, (void **)&rep) != REDIS_OK) die("hiredis", rc->errstr);
            if (rep->type == REDIS_REPLY_ERROR) die("hiredis", rep->str);
            freeReplyObject(rep);
        }
        cycles += depth;
    }
    redisFree(rc);
    return (double)cycles / ((double)(now_us() - t0) / 1e6);
}

void async_bench(hlt_redis *r)
{
    static const int flights[] = { 1, 10, 100 };
    const char *e = getenv("HILOCK_BENCH_SECONDS");
    double secs = e && atof(e) > 0 ? atof(e) / 4 : 1.0, blocking;
    blocking = blocking_rate(r, secs);
    printf("\nEvent-loop API (libuv), one thread, one connection (TCP 127.0.0.1), uncontended "
           "acquire+release cycles/s;\nblocking client (one cycle at a time): %.0f cycles/s (target: "
           ">= 10 x that at 100 in flight).\nBare hiredis pipelines the same number of cycles: (a) the "
           "library's scripts, EVALSHA (the server's\nwork per cycle is the same: its ceiling), (b) "
           "SET NX PX + DEL (the floor of any lock)\n", blocking);
    printf("  in flight   hilock async  x blocking | (a) same scripts  async/(a) | (b) SET+DEL\n");
    for (size_t i = 0; i < sizeof flights / sizeof flights[0]; i++) {
        double a = async_rate(r, flights[i], secs), h = hiredis_rate(r, flights[i], 1, secs),
               f = hiredis_rate(r, flights[i], 0, secs);
        printf("  %9d   %12.0f  %10.2f | %16.0f  %9.2f | %11.0f\n", flights[i], a, a / blocking, h,
               a / h, f);
    }
}
