/* SPDX-License-Identifier: BSD-3-Clause */
/* test_hostile.c -- bounds that hold whatever a server sends: replies past the limits
 * (fake servers on 127.0.0.1, for replies no real server sends), a bounded undo list, and
 * the transient states BUSY and MASTERDOWN (real redis-server). */
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checks.h"
#include "clients.h"
#include "fakes.h"
#include "fixture.h"
#include "hilock.h"
#include "lock.h"   /* the undo list of a node (cap test) */

TestSuite(hostile, .timeout = 60);

/* ---- a fake server: a child on 127.0.0.1 that answers every command with hostile bytes,
 * killed with the test (PDEATHSIG) and by alarm() at the latest ---- */

typedef void (*answer_fn)(int fd);
typedef struct fake {
    pid_t pid;
    int   port;
    char  url[64];
    char  name[64];
} fake;

static void fake_serve(int ls, answer_fn fn)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    alarm(30);
    for (;;) {
        char buf[65536];
        struct pollfd pf;
        int fd = accept(ls, NULL, NULL);
        if (fd < 0) continue;
        pf.fd = fd;
        pf.events = POLLIN;
        if (poll(&pf, 1, 5000) == 1 && recv(fd, buf, sizeof buf, 0) > 0) fn(fd);
        close(fd);
    }
}

static fake fake_start(answer_fn fn)
{
    fake f;
    int ls;
    memset(&f, 0, sizeof f);
    ls = hlt_listen(8, &f.port, f.url, f.name, sizeof f.url);
    cr_assert(ls >= 0);
    f.pid = fork();
    cr_assert(f.pid >= 0);
    if (f.pid == 0) fake_serve(ls, fn);
    close(ls);
    return f;
}

static void fake_stop(fake *f)
{
    kill(f->pid, SIGKILL);
    waitpid(f->pid, NULL, 0);
}

static void ans_huge_array(int fd)
{
    hlt_send_all(fd, "*2147483647\r\n", 13);
    sleep(10);
}

static void ans_huge_bulk(int fd)   /* then data, as fast as the client takes it */
{
    static char chunk[65536];
    memset(chunk, 'x', sizeof chunk);
    if (hlt_send_all(fd, "$2000000000\r\n", 13) < 0) return;
    while (hlt_send_all(fd, chunk, sizeof chunk) == 0)
        ;
}

static void ans_deep(int fd)
{
    for (int i = 0; i < 64; i++) hlt_send_all(fd, "*1\r\n", 4);
    sleep(10);
}

/* 512 arrays of 4096 integers in one array: 2 M elements from 8 MB */
static void ans_wide(int fd)
{
    static char child[7 + 4096 * 4];
    memcpy(child, "*4096\r\n", 7);
    for (int i = 0; i < 4096; i++) memcpy(child + 7 + 4 * i, ":1\r\n", 4);
    if (hlt_send_all(fd, "*512\r\n", 6) < 0) return;
    for (int i = 0; i < 512; i++)
        if (hlt_send_all(fd, child, sizeof child) < 0) return;
    sleep(10);
}

static void ans_drip(int fd)   /* a valid busy answer, one byte every 100 ms */
{
    static const char r[] = "*2\r\n:0\r\n:5000\r\n";
    for (int i = 0;; i = (i + 1) % (int)(sizeof r - 1)) {
        if (hlt_send_all(fd, r + i, 1) < 0) return;
        usleep(100000);
    }
}

static void ans_partial(int fd) { hlt_send_all(fd, "*2\r\n:0\r\n", 8); }

/* ---- peak memory: VmHWM, reset through clear_refs ---- */

static long status_kb(const char *field)
{
    char line[256];
    long v = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, strlen(field))) v = atol(line + strlen(field));
    if (f) fclose(f);
    return v;
}

static long rss_reset(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);   /* resets the peak RSS (VmHWM) to the current RSS */
        fclose(f);
    }
    return status_kb("VmRSS:");
}

#define RSS_SLACK_KB (64 * 1024)

/* One try-lock against a fake server: the status, the errmsg, within max_ms, RSS small. */
static void hostile_call(answer_fn fn, int64_t io_ms, hilock_status want, const char *say,
                         const char *say2, long long max_ms)
{
    fake f = fake_start(fn);
    hilock_options o = hlt_options((const char *[]){ f.url }, 1);
    o.io_timeout_ms = io_ms;
    hilock_client *c = hlt_client_new(&o);
    hilock *l = NULL;
    long rss0 = rss_reset(), peak;
    long long t0 = hlt_now_ms(), took;
    hilock_status st = hilock_acquire(c, "k", 5000, 0, &l);
    const char *m = hilock_client_errmsg(c);
    took = hlt_now_ms() - t0;
    peak = status_kb("VmHWM:");
    fake_stop(&f);
    cr_assert_null(l);
    cr_assert_eq(st, want, "status %d (%s), want %d", st, m, want);
    cr_assert(strstr(m, f.name), "errmsg '%s' names the server", m);
    cr_assert(strstr(m, say), "errmsg '%s' says '%s'", m, say);
    if (say2) cr_assert(strstr(m, say2), "errmsg '%s' says '%s'", m, say2);
    cr_assert_lt(took, max_ms, "took %lld ms", took);
    cr_assert_lt(peak - rss0, RSS_SLACK_KB, "peak RSS grew by %ld kB", peak - rss0);
    hilock_client_free(c);
}

Test(hostile, a_huge_array_header_is_refused_at_once)
{
    hostile_call(ans_huge_array, 1000, HILOCK_EREPLY, "reply too large",
                 "array of 2147483647 elements", 3000);
}

Test(hostile, a_huge_bulk_header_then_a_stream_is_refused_at_once)
{
    hostile_call(ans_huge_bulk, 1000, HILOCK_EREPLY, "reply too large",
                 "bulk string of 2000000000 bytes", 3000);
}

Test(hostile, deeply_nested_arrays_are_refused)
{
    hostile_call(ans_deep, 1000, HILOCK_EREPLY, "reply too large", "nested", 3000);
}

Test(hostile, millions_of_elements_in_one_reply_are_refused)
{
    hostile_call(ans_wide, 1000, HILOCK_EREPLY, "reply too large", "elements in one reply", 3000);
}

Test(hostile, a_reply_dripping_one_byte_per_100ms_ends_at_the_io_deadline)
{
    hostile_call(ans_drip, 1000, HILOCK_ETIMEDOUT, "timed out", NULL, 3000);
}

Test(hostile, a_partial_reply_then_close_is_eio_at_once)
{
    /* io_timeout 5 s: the close ends the call, not the timeout */
    hostile_call(ans_partial, 5000, HILOCK_EIO, "closed", NULL, 2000);
}

/* A Sentinel that answers get-master-addr-by-name with a huge array: refused the same way. */
Test(hostile, a_sentinel_with_a_huge_reply_is_refused)
{
    fake f = fake_start(ans_huge_array);
    char url[128];
    hilock_client *c;
    hilock *l = NULL;
    long rss0, peak;
    long long t0, took;
    hilock_status st;
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d#mymaster", f.port);
    c = hlt_client(url);
    rss0 = rss_reset();
    t0 = hlt_now_ms();
    st = hilock_acquire(c, "k", 5000, 0, &l);
    took = hlt_now_ms() - t0;
    peak = status_kb("VmHWM:");
    fake_stop(&f);
    cr_assert_eq(st, HILOCK_EIO, "%d: %s", st, hilock_client_errmsg(c));
    cr_assert(strstr(hilock_client_errmsg(c), "reply too large: array of 2147483647"), "%s",
              hilock_client_errmsg(c));
    cr_assert_lt(took, 3000);
    cr_assert_lt(peak - rss0, RSS_SLACK_KB, "peak RSS grew by %ld kB", peak - rss0);
    hilock_client_free(c);
}

static void ans_nothing(int fd)
{
    (void)fd;
    sleep(10);
}

/* Redlock over a live master and a Sentinel node whose Sentinels never answer: resolving the
 * second eats the connect deadline while the first connection has long been established.
 * The first one's error must not say "connect". */
Test(hostile, a_timeout_after_a_completed_connect_does_not_blame_the_connect)
{
    hlt_redis *r = hlt_redis_start(NULL);
    fake f = fake_start(ans_nothing);
    char sent[256], live[64];
    const char *urls[2];
    hilock_options o;
    hilock_client *c = NULL;
    hilock *l = NULL;
    const char *m;
    cr_assert_not_null(r);
    snprintf(sent, sizeof sent, "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d,"
             "127.0.0.1:%d#mymaster", f.port, f.port, f.port, f.port);
    snprintf(live, sizeof live, "127.0.0.1:%d:", r->port);
    urls[0] = r->url;
    urls[1] = sent;
    o = hlt_options(urls, 2);
    o.retry_delay_ms = 50;   /* the library's default */
    c = hlt_client_new(&o);
    cr_assert_neq(hilock_acquire(c, "k", 10000, 0, &l), HILOCK_OK);
    m = hilock_client_errmsg(c);
    fake_stop(&f);
    cr_assert(strstr(m, live), "errmsg '%s' names %s", m, live);
    cr_assert_null(strstr(strstr(m, live), "connect"), "errmsg '%s' blames the connect", m);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* ---- the undo list ---- */

/* Refused connects send nothing, so they queue nothing: thousands of them cost nothing later,
 * and the call after the server is back is one plain round trip. */
Test(hostile, refused_connects_queue_no_undo_and_the_next_call_is_fast)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *l = NULL;
    long long t0;
    c = hlt_client(r->url);
    hlt_redis_kill(r);
    t0 = hlt_now_ms();
    for (int i = 0; i < 3000; i++) cr_assert_eq(hilock_acquire(c, "k", 10000, 0, &l), HILOCK_EIO);
    cr_assert_lt(hlt_now_ms() - t0, 20000, "3000 refused try-locks took %lld ms", hlt_now_ms() - t0);
    cr_assert(strstr(hilock_client_errmsg(c), "refused"), "%s", hilock_client_errmsg(c));
    cr_assert_eq(c->nodes[0].nundo, 0, "%zu undos queued for writes never sent", c->nodes[0].nundo);
    cr_assert_eq(hlt_redis_restart(r), 0);
    t0 = hlt_now_ms();
    cr_assert_eq(hilock_acquire(c, "k2", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_lt(hlt_now_ms() - t0, 1000);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* However many undos pile up: at most HL_UNDO_MAX are kept (the newest), duplicates once,
 * each round trip sends at most HL_UNDO_CHUNK ahead of the caller's command, and the ones
 * sent delete exactly their values. */
Test(hostile, the_undo_list_is_capped_chunked_and_recovers)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *l = NULL;
    char tok[32];
    redisReply *rep;
    c = hlt_client(r->url);
    for (int i = 0; i < 5000; i++) {
        snprintf(tok, sizeof tok, "t%d", i);
        hl_undo_add(c, 0, "held", tok, 60000);
        hl_undo_add(c, 0, "held", tok, 60000);   /* a duplicate */
    }
    cr_assert_eq(c->nodes[0].nundo, HL_UNDO_MAX);
    cr_assert_str_eq(c->nodes[0].undo[HL_UNDO_MAX - 1].value, "t4999");
    /* the newest maybe-written value is there: the next call deletes it */
    rep = hlt_cmd(r, "SET held t4999 PX 60000");
    freeReplyObject(rep);
    cr_assert_eq(hilock_acquire(c, "other", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    /* (two round trips: the script cache was empty, EVAL follows NOSCRIPT) */
    cr_assert_geq(c->nodes[0].nundo, HL_UNDO_MAX - 2 * HL_UNDO_CHUNK);
    cr_assert_lt(c->nodes[0].nundo, HL_UNDO_MAX);
    cr_assert_eq(hlt_exists(r, "held"), 0, "the undo deleted the maybe-written value");
    for (int i = 0; i < HL_UNDO_MAX / HL_UNDO_CHUNK; i++) {
        size_t before = c->nodes[0].nundo;
        cr_assert_eq(hilock_check(l), HILOCK_OK);
        cr_assert_geq(c->nodes[0].nundo + 2 * HL_UNDO_CHUNK, before, "a chunk per round trip");
    }
    cr_assert_eq(c->nodes[0].nundo, 0);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    /* an undo whose lock's ttl has surely passed is dropped unsent */
    hl_undo_add(c, 0, "held", "short", 1);
    cr_assert_eq(c->nodes[0].nundo, 1);
    hlt_sleep_ms(1100);
    hl_undo_add(c, 0, "held", "newer", 60000);
    cr_assert_eq(c->nodes[0].nundo, 1);
    cr_assert_str_eq(c->nodes[0].undo[0].value, "newer");
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* ---- transient server states ---- */

typedef struct later {
    hlt_redis  *r;
    long        ms;
    const char *cmd;
} later;

static void *run_later(void *arg)
{
    later *x = arg;
    redisContext *k;
    hlt_sleep_ms(x->ms);
    k = redisConnectUnix(x->r->sock);   /* its own connection: r->cli belongs to the test */
    if (k && !k->err) {
        redisReply *rep = redisCommand(k, x->cmd);
        if (rep) freeReplyObject(rep);
    }
    if (k) redisFree(k);
    return NULL;
}

/* Another client runs a script that loops: past lua-time-limit the server answers -BUSY. */
static redisContext *start_busy_script(hlt_redis *r)
{
    redisContext *k = redisConnectUnix(r->sock);
    int done = 0;
    redisReply *rep;
    cr_assert(k && !k->err);
    redisAppendCommand(k, "EVAL %s 0", "while true do end");
    while (!done) cr_assert_eq(redisBufferWrite(k, &done), REDIS_OK);
    /* until past the 100 ms limit: the server answers -BUSY (a GET before the script started
     * is answered; one while it runs waits for the limit) */
    for (long long end = hlt_now_ms() + 10000;; hlt_sleep_ms(10)) {
        rep = hlt_cmd(r, "GET x");
        if (rep && rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "BUSY", 4)) break;
        cr_assert(rep && hlt_now_ms() < end, "the server never answered -BUSY");
        freeReplyObject(rep);
    }
    freeReplyObject(rep);
    return k;
}

Test(hostile, busy_script_is_retried_while_waiting)
{
    hlt_redis *r = hlt_redis_started("--lua-time-limit 100");
    hilock_client *c;
    hilock *l = NULL;
    redisContext *busy;
    pthread_t th;
    later kill_it;
    c = hlt_client(r->unix_url);
    busy = start_busy_script(r);
    kill_it.r = r;
    kill_it.ms = 700;
    kill_it.cmd = "SCRIPT KILL";
    pthread_create(&th, NULL, run_later, &kill_it);
    cr_assert_eq(hilock_acquire(c, "k", 10000, 5000, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    pthread_join(th, NULL);
    hlt_holds(r, "k", hilock_token(l));
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    redisFree(busy);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(hostile, busy_script_past_the_wait_says_busy)
{
    hlt_redis *r = hlt_redis_started("--lua-time-limit 100");
    hilock_client *c;
    hilock *l = NULL;
    redisContext *busy;
    long long t0;
    c = hlt_client(r->unix_url);
    busy = start_busy_script(r);
    t0 = hlt_now_ms();
    cr_assert_eq(hilock_acquire(c, "k", 10000, 500, &l), HILOCK_EIO, "%s", hilock_client_errmsg(c));
    cr_assert_lt(hlt_now_ms() - t0, 3000);
    cr_assert(strstr(hilock_client_errmsg(c), "BUSY"), "%s", hilock_client_errmsg(c));
    freeReplyObject(hlt_cmd(r, "SCRIPT KILL"));
    redisFree(busy);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* A replica cut off from its master with replica-serve-stale-data no answers -MASTERDOWN. */
static hlt_redis *stale_replica(hlt_redis **master)
{
    char extra[128];
    hlt_redis *rep;
    redisReply *x;
    *master = hlt_redis_start(NULL);
    cr_assert_not_null(*master);
    snprintf(extra, sizeof extra, "--replicaof 127.0.0.1 %d --replica-serve-stale-data no",
             (*master)->port);
    rep = hlt_redis_started(extra);
    hlt_redis_kill(*master);
    for (int i = 0; i < 100; i++) {   /* until it notices */
        x = hlt_cmd(rep, "GET x");
        if (x && x->type == REDIS_REPLY_ERROR && !strncmp(x->str, "MASTERDOWN", 10)) {
            freeReplyObject(x);
            return rep;
        }
        if (x) freeReplyObject(x);
        hlt_sleep_ms(50);
    }
    cr_assert_fail("the replica never said MASTERDOWN");
    return NULL;
}

Test(hostile, masterdown_is_retried_while_waiting)
{
    hlt_redis *m, *r = stale_replica(&m);
    hilock_client *c = hlt_client(r->unix_url);
    hilock *l = NULL;
    pthread_t th;
    later promote;
    promote.r = r;
    promote.ms = 700;
    promote.cmd = hlt_server_version() >= 50000 ? "REPLICAOF NO ONE" : "SLAVEOF NO ONE";
    pthread_create(&th, NULL, run_later, &promote);
    cr_assert_eq(hilock_acquire(c, "k", 10000, 5000, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    pthread_join(th, NULL);
    hlt_holds(r, "k", hilock_token(l));
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
    hlt_redis_stop(m);
}

Test(hostile, masterdown_past_the_wait_says_masterdown)
{
    hlt_redis *m, *r = stale_replica(&m);
    hilock_client *c = hlt_client(r->unix_url);
    hilock *l = NULL;
    long long t0 = hlt_now_ms();
    cr_assert_eq(hilock_acquire(c, "k", 10000, 500, &l), HILOCK_EIO, "%s", hilock_client_errmsg(c));
    cr_assert_lt(hlt_now_ms() - t0, 3000);
    cr_assert(strstr(hilock_client_errmsg(c), "MASTERDOWN"), "%s", hilock_client_errmsg(c));
    hilock_client_free(c);
    hlt_redis_stop(r);
    hlt_redis_stop(m);
}

/* ---- the handshake's facts: a hostile TIME, a transient refusal ---- */

/* A handshake answered with a TIME no server gives (GARBAGE_TIME: the seconds, the
 * microseconds), then -ERR to every command. */
static const char *garbage_time[][2] = {
    { "99999999999", "0" },             /* year 5138: a floor >= 2^42 would read as an epoch */
    { "4398046511", "0" },              /* 2^42 ms, just */
    { "1700000000", "1000000" },        /* usec out of range */
    { "-1700000000", "0" },
    { "1700000000x", "0" },
    { "", "0" },
    { "12", "0" },                      /* 1970 */
};
static int garbage_at;

static void ans_garbage_time(int fd)
{
    static const char info[] = "# Server\r\nredis_version:7.0.0\r\n";
    char out[512], buf[4096];
    const char *s = garbage_time[garbage_at][0], *u = garbage_time[garbage_at][1];
    int n = snprintf(out, sizeof out, "$%zu\r\n%s\r\n*2\r\n$%zu\r\n%s\r\n$%zu\r\n%s\r\n", strlen(info), info,
                     strlen(s), s, strlen(u), u);
    if (hlt_send_all(fd, out, (size_t)n) < 0) return;
    for (int i = 0; i < 20 && recv(fd, buf, sizeof buf, 0) > 0; i++)
        if (hlt_send_all(fd, "-ERR no\r\n", 9) < 0) return;
}

Test(hostile, a_time_no_server_gives_leaves_the_clock_unknown)
{
    for (garbage_at = 0; garbage_at < (int)(sizeof garbage_time / sizeof garbage_time[0]); garbage_at++) {
        fake f = fake_start(ans_garbage_time);
        hilock_client *c = hlt_client(f.url);
        hilock *l = NULL;
        int64_t wall = hl_wall_us() / 1000;
        hilock_status st = hilock_acquire(c, "k", 5000, 0, &l);
        cr_assert_eq(st, HILOCK_EREPLY, "case %d: %d %s", garbage_at, st, hilock_client_errmsg(c));
        cr_assert_eq(hl_node_version(&c->nodes[0]), 70000, "case %d: the handshake was read", garbage_at);
        cr_assert_eq(hl_node_server_ms(&c->nodes[0]), -1, "case %d: TIME %s %s taken as %lld", garbage_at,
                     garbage_time[garbage_at][0], garbage_time[garbage_at][1],
                     (long long)hl_node_server_ms(&c->nodes[0]));
        cr_assert_lt(hl_node_clock_floor_ms(&c->nodes[0]), wall + 60000, "case %d", garbage_at);
        hilock_client_free(c);
        fake_stop(&f);
    }
}

/* A connect while a script runs past lua-time-limit: INFO or TIME answers -BUSY. That
 * connection is failed as any transient error and the next one reads the server's facts:
 * taken as "unknown" they stayed so for the connection's whole life. */
Test(hostile, a_busy_server_at_connect_is_retried_and_its_facts_are_read)
{
    hlt_redis *r = hlt_redis_started("--lua-time-limit 100");
    hilock_client *c;
    hilock *l = NULL;
    redisContext *busy;
    pthread_t th;
    later kill_it;
    c = hlt_client(r->unix_url);
    busy = start_busy_script(r);
    kill_it.r = r;
    kill_it.ms = 700;
    kill_it.cmd = "SCRIPT KILL";
    pthread_create(&th, NULL, run_later, &kill_it);
    cr_assert_eq(hilock_acquire(c, "k", 10000, 5000, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    pthread_join(th, NULL);
    hlt_holds(r, "k", hilock_token(l));
    cr_assert_neq(hl_node_server_ms(&c->nodes[0]), -1, "the clock was read");
    cr_assert_gt(hl_node_version(&c->nodes[0]), 20000, "the version was read");
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    redisFree(busy);
    hilock_client_free(c);
    hlt_redis_stop(r);
}
