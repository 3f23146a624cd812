/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * handoff.c -- `make bench`, part 2's handoff against the bare wake floor (issue 34), on the
 * bench's redis-server over TCP 127.0.0.1. Three variants, 4 processes each, each process:
 * take the key (waiting), hold it 1 ms, let it go, take it again:
 *
 *  - hilock: hilock_acquire (wait_ms 1 s, wake on: the default) / hilock_release;
 *  - (s) the library's protocol on bare hiredis: EVALSHA acquire.lua (busy: it marks the key
 *    awaited), then BLPOP {k}:signal and EVALSHA acquire.lua again in one write (the server
 *    runs the attempt the moment the BLPOP returns: src/lock/wait.c, hl_behind_block);
 *    EVALSHA release.lua (which RPUSHes the signal when the key is awaited), with the keys and
 *    arguments src/kinds/modern.c sends. The difference to hilock is the client; to the floor,
 *    the scripts;
 *  - the floor: bare hiredis, a waiter blocked in BLPOP {k}:signal 0, the holder does DEL k
 *    then RPUSH {k}:signal 1, the woken waiter does one SET k v NX PX 30000.
 *
 * The handoff: the holder calls release (for the floor: RPUSH) -> a process that was already
 * waiting then holds the key (acquire returned; SET NX's reply read). For (s) and the floor
 * also when its BLPOP returned. A grant to the releaser itself (it asked again at once and won
 * before the woken waiter: a barge) is no handoff; a waiter's later grant counts from the
 * latest release. The variants take turns in slices of the same number of handoffs (one
 * variant's processes work while the others sleep on a futex), so a burst of load elsewhere
 * hits them alike and each ends with the same number of samples; p50/p99 per variant and the
 * ratio hilock p50 / floor p50 (DESIGN.md target <= 2).
 *
 * Then what a handoff costs the server: each command of the handoff alone on one connection,
 * N times, with INFO commandstats' usec before and after (release.lua that signals, acquire.lua
 * granted and busy, BLPOP served, SET NX PX, RPUSH), and the script's own commands (Redis 7
 * counts commands run by a script in commandstats too) from the same loops.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "bench.h"

#define HF_PROCS  4
#define HF_MAX    20000
#define HF_SLICES 12      /* slices per variant */
#define HOLD_US   1000

enum { V_HILOCK, V_SCRIPT, V_FLOOR, NV, PH_NONE = 10, PH_STOP = 11 };
static const char *const vkeys[NV] = { "bench:hf:lock", "bench:hf:script", "bench:hf:floor" };

typedef struct side {
    uint32_t n, target;     /* handoffs recorded; this slice ends at target */
    int64_t  last_rel;      /* the latest release (RPUSH) call, this slice */
    int      holder;        /* overlap check: -1 nobody */
    uint32_t overlaps, grants, barges;
    int64_t  hand[HF_MAX];  /* release called -> the waiter holds */
    int64_t  wake[HF_MAX];  /* release called -> the waiter's BLPOP returned ((s), floor) */
    uint32_t nrt;
    int64_t  relrt[HF_MAX]; /* the release's (RPUSH's) own round trip: called -> returned */
} side;

typedef struct board {
    int      phase;         /* futex word */
    uint32_t per_slice, total;
    int64_t  wall[NV];      /* time spent in each variant's slices */
    int64_t  slice_t0;
    side     s[NV];
} board;

typedef struct hf_run {
    hlt_redis *r;
    board     *b;
    char       sha_acq[41], sha_rel[41];
} hf_run;

static int phase_of(board *b) { return __atomic_load_n(&b->phase, __ATOMIC_SEQ_CST); }

static void phase_set(board *b, int p)
{
    __atomic_store_n(&b->phase, p, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, &b->phase, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Sleep until the phase is v (or the run stops); returns the phase. */
static int phase_wait(board *b, int v)
{
    for (;;) {
        int p = phase_of(b);
        if (p == v || p == PH_STOP) return p;
        syscall(SYS_futex, &b->phase, FUTEX_WAIT, p, NULL, NULL, 0);
    }
}

/* The slice of v is over (its last handoff recorded): nobody's turn while v's waiters drain
 * (they take the key, see it is not their turn, let it go), then the next variant that still
 * needs handoffs, or the end. */
static void slice_over(board *b, int v)
{
    struct timespec drain = { 0, 3000000 };
    int nx = -1;
    b->wall[v] += now_us() - b->slice_t0;
    phase_set(b, PH_NONE);
    nanosleep(&drain, NULL);
    for (int k = 1; k <= NV && nx < 0; k++)
        if (b->s[(v + k) % NV].n < b->total) nx = (v + k) % NV;
    if (nx < 0) {
        phase_set(b, PH_STOP);
        return;
    }
    b->s[nx].last_rel = 0;
    b->s[nx].target = b->s[nx].n + b->per_slice < b->total ? b->s[nx].n + b->per_slice : b->total;
    b->slice_t0 = now_us();
    phase_set(b, nx);
}

/* A grant at t1 of a wait that began at t0 (woke: its BLPOP returned, 0 if none). Returns 1
 * when this handoff ended the slice. */
static int granted(board *b, int v, int me, int64_t t0, int64_t t1, int64_t woke)
{
    side *s = &b->s[v];
    int64_t rel = __atomic_load_n(&s->last_rel, __ATOMIC_SEQ_CST);
    uint32_t i;
    if (__atomic_exchange_n(&s->holder, me, __ATOMIC_SEQ_CST) != -1) __atomic_add_fetch(&s->overlaps, 1, __ATOMIC_RELAXED);
    s->grants++;
    if (rel <= t0) {   /* not waiting when the key was let go: the releaser again, or the slice's first */
        if (rel) s->barges++;
        return 0;
    }
    if ((i = s->n) >= s->target) return 0;
    s->hand[i] = t1 - rel;
    s->wake[i] = woke > rel ? woke - rel : -1;
    __atomic_store_n(&s->n, i + 1, __ATOMIC_SEQ_CST);
    return i + 1 == s->target;
}

static int64_t gap_us;   /* HILOCK_BENCH_HF_GAP_US: a releaser asks again this long after its release */

static void rel_done(board *b, int v, int64_t rel)
{
    side *s = &b->s[v];
    uint32_t i = s->nrt;
    if (i < HF_MAX && i < s->n + 1) {
        s->relrt[i] = now_us() - rel;
        s->nrt = i + 1;
    }
}

static void after_release(void)
{
    if (gap_us > 0) {
        struct timespec ts = { 0, gap_us * 1000 };
        nanosleep(&ts, NULL);
    }
}

static void hold(void)
{
    struct timespec ts = { 0, HOLD_US * 1000 };
    nanosleep(&ts, NULL);
}

static redisContext *connect_tcp(const hlt_redis *r)
{
    redisContext *rc = redisConnect("127.0.0.1", r->port);
    if (!rc || rc->err) die("hiredis connect", rc ? rc->errstr : "out of memory");
    return rc;
}

static void hilock_proc(hf_run *run, int me)
{
    board *b = run->b;
    side *s = &b->s[V_HILOCK];
    const char *url = run->r->url;
    hilock_client *c = client_with(&url, 1, NULL);
    while (phase_wait(b, V_HILOCK) != PH_STOP) {
        int64_t t0 = now_us(), t1;
        hilock *l;
        int mine, done = 0;
        hilock_status st = hilock_acquire(c, vkeys[V_HILOCK], 5000, 1000, &l);
        if (st == HILOCK_BUSY) continue;
        if (st != HILOCK_OK) die("handoff acquire", hilock_client_errmsg(c));
        t1 = now_us();
        if ((mine = phase_of(b) == V_HILOCK)) {
            done = granted(b, V_HILOCK, me, t0, t1, 0);
            hold();
            __atomic_store_n(&s->holder, -1, __ATOMIC_SEQ_CST);
            if (!done) __atomic_store_n(&s->last_rel, now_us(), __ATOMIC_SEQ_CST);
            else phase_set(b, PH_NONE);
        }
        if (hilock_release(l) != HILOCK_OK) die("handoff release", hilock_client_errmsg(c));
        if (mine && !done) rel_done(b, V_HILOCK, s->last_rel);
        hilock_free(l);
        if (done) slice_over(b, V_HILOCK);
        else if (mine) after_release();
    }
    hilock_client_free(c);
}

static redisReply *cmd_or_die(redisContext *rc, int argc, const char **argv, const char *what)
{
    redisReply *rep = redisCommandArgv(rc, argc, argv, NULL);
    if (!rep) die(what, rc->errstr);
    if (rep->type == REDIS_REPLY_ERROR) die(what, rep->str);
    return rep;
}

/* The library's protocol on bare hiredis: src/kinds/modern.c's acquire_cmd and release, with
 * a waiter's mark (wait.c: hl_wait_mark_ms, poll_ms 1000 + io_timeout_ms 1000). */
typedef struct proto {
    redisContext *rc;
    const hf_run *run;
    const char   *key;
    char          fence[64], waiters[64], signal[64], holder[64], who[96];
    char          token[40];
    int64_t       srv_ms0, mono0;   /* the server's clock at start (TIME), our clock then */
    unsigned long long seq;
    int64_t       floor_add;        /* added to the clock argument (the cost loops) */
} proto;

static void proto_init(proto *p, const hf_run *run, const char *key)
{
    redisReply *t;
    memset(p, 0, sizeof *p);
    p->rc = connect_tcp(run->r);
    p->run = run;
    p->key = key;
    snprintf(p->fence, sizeof p->fence, "{%s}:fence", key);
    snprintf(p->waiters, sizeof p->waiters, "{%s}:waiters", key);
    snprintf(p->signal, sizeof p->signal, "{%s}:signal", key);
    snprintf(p->holder, sizeof p->holder, "{%s}:holder", key);
    snprintf(p->who, sizeof p->who, "%012llx\nlocalhost\n%d\nbench", (unsigned long long)getpid(), (int)getpid());
    t = cmd_or_die(p->rc, 1, (const char *[]){ "TIME" }, "TIME");
    p->srv_ms0 = atoll(t->element[0]->str) * 1000 + atoll(t->element[1]->str) / 1000;
    p->mono0 = now_us();
    freeReplyObject(t);
}

/* One attempt: 1 granted, 0 busy (the key is then marked awaited). secs: NULL, or the BLPOP
 * sent first in the same write (the library's wait behind a block: the server runs the
 * attempt the moment the BLPOP returns); *woke set when it returned an element. */
static int proto_acquire(proto *p, const char *secs, int64_t *woke)
{
    char floor[32];
    redisReply *rep;
    int ok;
    snprintf(p->token, sizeof p->token, "%020llx%012llx", ++p->seq, (unsigned long long)getpid());   /* (its tag last) */
    snprintf(floor, sizeof floor, "%lld", (long long)(p->srv_ms0 + (now_us() - p->mono0) / 1000 + p->floor_add));
    const char *bl[] = { "BLPOP", p->signal, secs };
    const char *argv[] = { "EVALSHA", p->run->sha_acq, "4", p->key, p->fence, p->waiters, p->holder, p->token,
                           "5000", "3605000", floor, "2001", "3024005000", p->who, "0", "0", "0", "10000" };
    if (secs) {
        redisAppendCommandArgv(p->rc, 3, bl, NULL);
        redisAppendCommandArgv(p->rc, 18, argv, NULL);
        if (redisGetReply(p->rc, (void **)&rep) != REDIS_OK) die("BLPOP", p->rc->errstr);
        if (rep->type == REDIS_REPLY_ARRAY) *woke = now_us();
        freeReplyObject(rep);
        if (redisGetReply(p->rc, (void **)&rep) != REDIS_OK) die("acquire.lua", p->rc->errstr);
    } else {
        rep = cmd_or_die(p->rc, 18, argv, "acquire.lua");
    }
    ok = rep->type == REDIS_REPLY_ARRAY && rep->elements >= 1 && rep->element[0]->integer == 1;
    freeReplyObject(rep);
    return ok;
}

static void proto_release(proto *p)
{
    const char *argv[] = { "EVALSHA", p->run->sha_rel, "3", p->key, p->signal, p->waiters, p->token };
    redisReply *rep = cmd_or_die(p->rc, 7, argv, "release.lua");
    if (rep->type != REDIS_REPLY_INTEGER || rep->integer != 1) die("release.lua", "not our value");
    freeReplyObject(rep);
}

/* BLPOP signal secs: 1 woken, 0 timed out. */
static int proto_block(proto *p, const char *secs)
{
    const char *argv[] = { "BLPOP", p->signal, secs };
    redisReply *rep = cmd_or_die(p->rc, 3, argv, "BLPOP");
    int woken = rep->type == REDIS_REPLY_ARRAY;
    freeReplyObject(rep);
    return woken;
}

static void script_proc(hf_run *run, int me)
{
    board *b = run->b;
    side *s = &b->s[V_SCRIPT];
    proto p;
    proto_init(&p, run, vkeys[V_SCRIPT]);
    while (phase_wait(b, V_SCRIPT) != PH_STOP) {
        int64_t t0 = now_us(), t1, woke = 0;
        int got, mine, done = 0;
        got = proto_acquire(&p, NULL, NULL);
        while (!got && phase_of(b) == V_SCRIPT)
            got = proto_acquire(&p, "1", &woke);
        if (!got) continue;
        t1 = now_us();
        if ((mine = phase_of(b) == V_SCRIPT)) {
            done = granted(b, V_SCRIPT, me, t0, t1, woke);
            hold();
            __atomic_store_n(&s->holder, -1, __ATOMIC_SEQ_CST);
            if (!done) __atomic_store_n(&s->last_rel, now_us(), __ATOMIC_SEQ_CST);
            else phase_set(b, PH_NONE);
        }
        proto_release(&p);
        if (mine && !done) rel_done(b, V_SCRIPT, s->last_rel);
        if (done) slice_over(b, V_SCRIPT);
        else if (mine) after_release();
    }
    redisFree(p.rc);
}

static void floor_proc(hf_run *run, int me)
{
    board *b = run->b;
    side *s = &b->s[V_FLOOR];
    redisContext *rc = connect_tcp(run->r);
    char sig[64];
    const char *key = vkeys[V_FLOOR];
    const char *set[] = { "SET", key, "v", "NX", "PX", "30000" };
    int holding = me == 0;
    snprintf(sig, sizeof sig, "{%s}:signal", key);
    if (holding) {
        redisReply *rep = cmd_or_die(rc, 6, set, "floor SET");
        if (rep->type != REDIS_REPLY_STATUS) die("floor SET", "the key was not free");
        freeReplyObject(rep);
    }
    for (;;) {
        redisReply *rep;
        if (!holding) {
            int64_t t0 = now_us(), woke, t1;
            rep = cmd_or_die(rc, 3, (const char *[]){ "BLPOP", sig, "0" }, "floor BLPOP");
            woke = now_us();
            freeReplyObject(rep);
            if (phase_of(b) == PH_STOP) break;
            rep = cmd_or_die(rc, 6, set, "floor SET");
            t1 = now_us();
            if (rep->type != REDIS_REPLY_STATUS) die("floor SET", "the key was not free");
            freeReplyObject(rep);
            holding = 1;
            if (granted(b, V_FLOOR, me, t0, t1, woke)) slice_over(b, V_FLOOR);
        }
        if (phase_wait(b, V_FLOOR) == PH_STOP) {   /* wake the others, to end */
            for (int i = 1; i < HF_PROCS; i++) freeReplyObject(cmd_or_die(rc, 3, (const char *[]){ "RPUSH", sig, "1" }, "RPUSH"));
            freeReplyObject(cmd_or_die(rc, 2, (const char *[]){ "DEL", key }, "DEL"));
            break;
        }
        hold();
        __atomic_store_n(&s->holder, -1, __ATOMIC_SEQ_CST);
        freeReplyObject(cmd_or_die(rc, 2, (const char *[]){ "DEL", key }, "DEL"));
        __atomic_store_n(&s->last_rel, now_us(), __ATOMIC_SEQ_CST);
        freeReplyObject(cmd_or_die(rc, 3, (const char *[]){ "RPUSH", sig, "1" }, "RPUSH"));
        rel_done(b, V_FLOOR, s->last_rel);
        holding = 0;
    }
    redisFree(rc);
}

static void hf_proc(int i, void *arg)
{
    hf_run *run = arg;
    if (i < HF_PROCS) hilock_proc(run, i);
    else if (i < 2 * HF_PROCS) script_proc(run, i - HF_PROCS);
    else floor_proc(run, i - 2 * HF_PROCS);
}

/* SCRIPT LOAD of src/lua/<name>.lua: its sha in sha[41]. */
static void load_lua(hlt_redis *r, const char *name, char sha[41])
{
    const char *dir = getenv("HILOCK_LUA_DIR") ? getenv("HILOCK_LUA_DIR") : "src/lua";
    char path[1024], buf[65536];
    size_t len;
    FILE *f;
    redisReply *rep;
    snprintf(path, sizeof path, "%s/%s.lua", dir, name);
    if (!(f = fopen(path, "r"))) die(path, strerror(errno));
    len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    rep = hlt_cmd(r, "SCRIPT LOAD %b", buf, len);
    if (!rep || rep->type != REDIS_REPLY_STRING || rep->len != 40) die("SCRIPT LOAD", name);
    memcpy(sha, rep->str, 41);
    freeReplyObject(rep);
}

/* ---- what each command of a handoff costs the server ---- */

/* calls and usec of one command in INFO commandstats (0 if none yet) */
static void cmdstat(hlt_redis *r, const char *name, long long *calls, long long *usec)
{
    char f[64];
    long long v;
    snprintf(f, sizeof f, "cmdstat_%s:calls=", name);
    *calls = (v = hlt_info_int(r, "commandstats", f)) > 0 ? v : 0;
    snprintf(f, sizeof f, "cmdstat_%s:", name);
    {
        redisReply *rep = hlt_cmd(r, "INFO commandstats");
        const char *p = rep && rep->str ? strstr(rep->str, f) : NULL;
        p = p ? strstr(p, "usec=") : NULL;
        *usec = p ? atoll(p + 5) : 0;
        if (rep) freeReplyObject(rep);
    }
}

#define INNER 13
static const char *const inner[INNER] = { "set", "get", "del", "exists", "rpush", "ltrim", "pexpire", "incr",
                                          "pttl", "type", "zscore", "evalsha", "blpop" };

typedef struct costs { long long calls[INNER], usec[INNER]; } costs;

static void costs_now(hlt_redis *r, costs *c)
{
    for (int i = 0; i < INNER; i++) cmdstat(r, inner[i], &c->calls[i], &c->usec[i]);
}

/* One shape of command, n times, alone on one connection: the server's usec per call of
 * `name` (its commandstats delta) and the inner commands' calls and usec per call. */
typedef enum shape { S_RELEASE, S_GRANT, S_BUSY, S_BLPOP, S_SETNX, S_RPUSH, NSHAPES } shape;
static const char *const shape_names[NSHAPES] = {
    "release.lua, the holder's value, key awaited (signals)", "acquire.lua, granted (woken waiter)",
    "acquire.lua, busy (marks the key awaited)", "BLPOP, an element waiting", "SET k v NX PX 30000 (floor)",
    "RPUSH {k}:signal 1 (floor)" };

static void one_shape(hf_run *run, shape sh, int n, double *per_call, char *innerdesc, size_t cap)
{
    hlt_redis *r = run->r;
    proto p;
    costs a, z;
    const char *key = "bench:hf:cost";
    int top = sh <= S_BUSY ? 11 : sh == S_BLPOP ? 12 : sh == S_SETNX ? 0 : 4;
    size_t off = 0;
    proto_init(&p, run, key);
    freeReplyObject(cmd_or_die(p.rc, 5, (const char *[]){ "DEL", key, p.waiters, p.signal, p.holder }, "DEL"));
    if (sh == S_BUSY) freeReplyObject(cmd_or_die(p.rc, 3, (const char *[]){ "SET", key, "another" }, "SET"));
    costs_now(r, &a);
    /* the setup commands of each round are plain SET/DEL/RPUSH: subtracted below by name */
    long long setup_set = 0, setup_del = 0, setup_rpush = 0;
    for (int i = 0; i < n; i++) {
        switch (sh) {
        case S_RELEASE:   /* the key ours (a plain SET), awaited, then release.lua */
            snprintf(p.token, sizeof p.token, "%016llx%016llx", 0xc057ULL, (unsigned long long)i);
            freeReplyObject(cmd_or_die(p.rc, 3, (const char *[]){ "SET", key, p.token }, "SET"));
            freeReplyObject(cmd_or_die(p.rc, 5, (const char *[]){ "SET", p.waiters, "1", "PX", "10000" }, "SET"));
            setup_set += 2;
            proto_release(&p);
            break;
        case S_GRANT:   /* a clock ahead of the counter: INCR + SET, as a key granted < 1/ms */
            p.floor_add = i;
            if (!proto_acquire(&p, NULL, NULL)) die("cost", "acquire.lua busy");
            freeReplyObject(cmd_or_die(p.rc, 2, (const char *[]){ "DEL", key }, "DEL"));
            setup_del++;
            break;
        case S_BUSY:
            if (proto_acquire(&p, NULL, NULL)) die("cost", "acquire.lua granted");
            break;
        case S_BLPOP:
            freeReplyObject(cmd_or_die(p.rc, 3, (const char *[]){ "RPUSH", p.signal, "1" }, "RPUSH"));
            setup_rpush++;
            proto_block(&p, "0");
            break;
        case S_SETNX:
            freeReplyObject(cmd_or_die(p.rc, 6, (const char *[]){ "SET", key, "v", "NX", "PX", "30000" }, "SET"));
            freeReplyObject(cmd_or_die(p.rc, 2, (const char *[]){ "DEL", key }, "DEL"));
            setup_del++;
            break;
        default:
            freeReplyObject(cmd_or_die(p.rc, 3, (const char *[]){ "RPUSH", p.signal, "1" }, "RPUSH"));
            freeReplyObject(cmd_or_die(p.rc, 2, (const char *[]){ "DEL", p.signal }, "DEL"));
            setup_del++;
            break;
        }
    }
    costs_now(r, &z);
    *per_call = (double)(z.usec[top] - a.usec[top]) / (double)(z.calls[top] - a.calls[top] ? z.calls[top] - a.calls[top] : 1);
    innerdesc[0] = '\0';
    if (sh <= S_BUSY)
        for (int i = 0; i < INNER - 2; i++) {
            long long c = z.calls[i] - a.calls[i], u = z.usec[i] - a.usec[i];
            if (i == 0 && sh == S_RELEASE) c -= setup_set;
            if (i == 2) c -= setup_del;
            if (c <= 0) continue;
            off += (size_t)snprintf(innerdesc + off, off < cap ? cap - off : 0, " %s %.1fx%.2f", inner[i],
                                    (double)c / n, (double)u / (double)(z.calls[i] - a.calls[i]));
        }
    (void)setup_rpush;
    freeReplyObject(cmd_or_die(p.rc, 5, (const char *[]){ "DEL", key, p.waiters, p.signal, p.holder }, "DEL"));
    redisFree(p.rc);
}

static void server_costs(hf_run *run, int n)
{
    double per[NSHAPES];
    char desc[NSHAPES][512];
    for (int s = 0; s < NSHAPES; s++) one_shape(run, (shape)s, n, &per[s], desc[s], sizeof desc[s]);
    printf("  server time per command (INFO commandstats usec, %d calls each alone on one connection; inner\n"
           "  commands: calls per script x usec per call):\n", n);
    for (int s = 0; s < NSHAPES; s++)
        printf("    %-56s %6.2f us %s\n", shape_names[s], per[s], desc[s]);
    printf("    scripts' server time in one handoff (release + a grant) %.1f us vs the floor's (RPUSH + SET NX) %.1f us: +%.1f us\n",
           per[S_RELEASE] + per[S_GRANT], per[S_RPUSH] + per[S_SETNX],
           per[S_RELEASE] + per[S_GRANT] - per[S_RPUSH] - per[S_SETNX]);
}

static double pct_signed(const int64_t *v, uint32_t n, double q, uint32_t *m)
{
    static int64_t tmp[HF_MAX];
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (v[i] >= 0) tmp[k++] = v[i];
    qsort(tmp, k, sizeof tmp[0], cmp_i64);
    if (m) *m = k;
    return pct_ms(tmp, k, q);
}

void handoff_floor(hlt_redis *r, double run_s)
{
    static const char *const names[NV] = { "hilock (acquire wait 1 s / release)", "(s) its scripts, bare hiredis",
                                           "floor: RPUSH -> BLPOP -> SET NX PX" };
    board *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    hf_run run = { r, b, "", "" };
    long long bl0, bu0, ec0, eu0, bl1, bu1, ec1, eu1;
    double p50[NV], p99[NV];
    if (b == MAP_FAILED) die("mmap", strerror(errno));
    memset(b, 0, sizeof *b);
    gap_us = getenv("HILOCK_BENCH_HF_GAP_US") ? atoll(getenv("HILOCK_BENCH_HF_GAP_US")) : 0;
    if (gap_us > 999999) gap_us = 999999;
    load_lua(r, "acquire", run.sha_acq);
    load_lua(r, "release", run.sha_rel);
    for (int v = 0; v < NV; v++) {
        b->s[v].holder = -1;
        freeReplyObject(hlt_cmd(r, "DEL %s {%s}:signal {%s}:waiters {%s}:holder", vkeys[v], vkeys[v], vkeys[v], vkeys[v]));
    }
    b->total = (uint32_t)(run_s * 250);   /* ~1,000 handoffs at the default 4 s */
    if (b->total < 2 * HF_SLICES) b->total = 2 * HF_SLICES;
    if (b->total > HF_MAX) b->total = HF_MAX;
    b->per_slice = (b->total + HF_SLICES - 1) / HF_SLICES;
    b->phase = PH_NONE;
    b->s[V_HILOCK].target = b->per_slice;
    cmdstat(r, "blpop", &bl0, &bu0);
    cmdstat(r, "evalsha", &ec0, &eu0);
    {   /* the processes start, then the first slice (hilock) */
        pid_t pid = fork();
        if (pid < 0) die("fork", strerror(errno));
        if (pid == 0) {
            struct timespec ts = { 0, 300000000 };
            nanosleep(&ts, NULL);   /* every process connected */
            b->slice_t0 = now_us();
            phase_set(b, V_HILOCK);
            _exit(0);
        }
        in_processes(3 * HF_PROCS, hf_proc, &run, "handoff");
        waitpid(pid, NULL, 0);
    }
    cmdstat(r, "blpop", &bl1, &bu1);
    cmdstat(r, "evalsha", &ec1, &eu1);
    printf("\nHandoff against the bare wake floor (issue 34): %d processes per variant, each acquire (waiting) -> hold 1 ms\n"
           "-> release -> acquire again; the variants take turns in slices of %u handoffs, %u each; handoff = release\n"
           "(RPUSH) called -> a process that was waiting holds the key; wake = release called -> its BLPOP returned,\n"
           "then = BLPOP returned -> it holds; rel = the release's own call -> return; barges = grants to the releaser itself (no handoff)\n",
           HF_PROCS, b->per_slice, b->total);
    if (gap_us) printf("  (HILOCK_BENCH_HF_GAP_US: a releaser asks again %lld us after its release)\n", (long long)gap_us);
    printf("  %-38s %8s %7s %7s %8s %8s %7s %7s %6s %5s\n", "variant", "handoffs", "p50 ms", "p99 ms", "wake p50",
           "then p50", "rel p50", "barges", "secs", "overl");
    for (int v = 0; v < NV; v++) {
        side *s = &b->s[v];
        uint32_t n = s->n < HF_MAX ? s->n : HF_MAX, nw = 0;
        int64_t *then = malloc(n * sizeof *then + 1);
        double wp50 = pct_signed(s->wake, n, 0.5, &nw), tp50;
        for (uint32_t i = 0; i < n; i++) then[i] = s->wake[i] >= 0 ? s->hand[i] - s->wake[i] : -1;
        tp50 = pct_signed(then, n, 0.5, NULL);
        free(then);
        qsort(s->relrt, s->nrt < HF_MAX ? s->nrt : HF_MAX, sizeof s->relrt[0], cmp_i64);
        double rp50 = pct_ms(s->relrt, s->nrt < HF_MAX ? s->nrt : HF_MAX, 0.5);
        qsort(s->hand, n, sizeof s->hand[0], cmp_i64);
        p50[v] = pct_ms(s->hand, n, 0.5);
        p99[v] = pct_ms(s->hand, n, 0.99);
        if (v == V_HILOCK)
            printf("  %-38s %8u %7.3f %7.3f %8s %8s %7.3f %6.0f%% %6.2f %5u\n", names[v], n, p50[v], p99[v], "-", "-",
                   rp50, s->grants ? 100.0 * s->barges / s->grants : 0, b->wall[v] / 1e6, s->overlaps);
        else
            printf("  %-38s %8u %7.3f %7.3f %8.3f %8.3f %7.3f %6.0f%% %6.2f %5u\n", names[v], n, p50[v], p99[v], nw ? wp50 : 0,
                   nw ? tp50 : 0, rp50, s->grants ? 100.0 * s->barges / s->grants : 0, b->wall[v] / 1e6, s->overlaps);
    }
    printf("  hilock p50 / floor p50: %.2f (target <= 2.0); p99: %.2f; (s) p50 / floor p50: %.2f\n", p50[V_HILOCK] / p50[V_FLOOR],
           p99[V_HILOCK] / p99[V_FLOOR], p50[V_SCRIPT] / p50[V_FLOOR]);
    printf("  during the run (hilock and (s)): evalsha %.2f us per call (%lld calls), blpop %.2f us per call (%lld calls,\n"
           "  the floor's too)\n", ec1 > ec0 ? (double)(eu1 - eu0) / (double)(ec1 - ec0) : 0, ec1 - ec0,
           bl1 > bl0 ? (double)(bu1 - bu0) / (double)(bl1 - bl0) : 0, bl1 - bl0);
    server_costs(&run, 2000);
    munmap(b, sizeof *b);
}
