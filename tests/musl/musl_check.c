/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * musl_check.c -- hilock built with musl, used as a program uses it: plain C (Criterion has no
 * musl build), run by `make test-musl` (scripts/test-musl.sh). It starts the redis-server on
 * PATH on a unix socket in a directory of its own (argv[1]), stops it at exit, and checks:
 *   - acquire / extend / release by the blocking calls, with the key read back by hiredis on
 *     a connection of its own;
 *   - the event-loop API on a small poll() loop: acquire, extend and release through the
 *     fiber switch, each result read back the same way;
 *   - with a second argument "no-switch" (linked to src/async/fiber.c built with
 *     -DHL_FIBER_FORCE_NONE, as on musl off x86-64 and arm64): the blocking calls work and
 *     hilock_loop_attach refuses with its message.
 * Exit 0: every check passed; 1: one failed (said on stderr).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hilock.h>
#include <hilock_async.h>

static int failed;
static pid_t server;
static char sock[512];

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "musl_check: %s:%d: failed: %s\n", __FILE__, __LINE__, #cond);   \
            failed = 1;                                                                      \
        }                                                                                    \
    } while (0)

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void stop_server(void)
{
    if (server > 0) {
        kill(server, SIGKILL);
        waitpid(server, NULL, 0);
        server = 0;
    }
}

/* The native server on a unix socket, no TCP port, nothing saved; up when it answers PING
 * (at most 10 s). */
static redisContext *start_server(const char *dir)
{
    char log[600];
    snprintf(sock, sizeof sock, "%s/redis.sock", dir);
    snprintf(log, sizeof log, "%s/redis.log", dir);
    if ((server = fork()) == 0) {
        execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", sock, "--save", "",
               "--appendonly", "no", "--dir", dir, "--logfile", log, (char *)NULL);
        _exit(127);
    }
    for (int64_t end = now_ms() + 10000; now_ms() < end;) {
        redisContext *r = redisConnectUnix(sock);
        if (r && !r->err) return r;
        if (r) redisFree(r);
        nanosleep(&(struct timespec){0, 20000000}, NULL);
    }
    return NULL;
}

/* The key's PTTL as the server says (-2: no key). */
static long long pttl(redisContext *r, const char *key)
{
    redisReply *rep = redisCommand(r, "PTTL %s", key);
    long long v = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -100;
    if (rep) freeReplyObject(rep);
    return v;
}

static void blocking(redisContext *r, const char *url)
{
    hilock_client *c;
    hilock *l = NULL;
    CHECK(hilock_client_open(url, &c) == HILOCK_OK);
    if (failed) return;
    CHECK(hilock_acquire(c, "musl:blocking", 2000, 0, &l) == HILOCK_OK);
    CHECK(pttl(r, "musl:blocking") > 0 && pttl(r, "musl:blocking") <= 2000);
    CHECK(hilock_extend(l, 60000) == HILOCK_OK);
    CHECK(pttl(r, "musl:blocking") > 2000);
    CHECK(hilock_release(l) == HILOCK_OK);
    CHECK(pttl(r, "musl:blocking") == -2);
    hilock_free(l);
    hilock_client_free(c);
}

/* ---- a small poll() loop for the event-loop API ---- */
struct loop {
    struct pollfd fds[16];
    int nfds;
    int64_t timer_at;   /* -1: none */
};

static void on_watch(void *data, int fd, int events)
{
    struct loop *L = data;
    int i;
    for (i = 0; i < L->nfds && L->fds[i].fd != fd; i++) {}
    if (!events) {
        if (i < L->nfds) L->fds[i] = L->fds[--L->nfds];
        return;
    }
    if (i == L->nfds) {
        if (L->nfds == 16) abort();   /* (this program watches two or three) */
        L->nfds++;
    }
    L->fds[i].fd = fd;
    L->fds[i].events = (short)((events & HILOCK_EV_READ ? POLLIN : 0) |
                               (events & HILOCK_EV_WRITE ? POLLOUT : 0));
}

static void on_timer(void *data, int64_t ms)
{
    struct loop *L = data;
    L->timer_at = ms < 0 ? -1 : now_ms() + ms;
}

struct result {
    int over;
    hilock_status st;
    hilock *l;
};

static void done(hilock_status st, hilock *l, void *arg)
{
    struct result *res = arg;
    res->over = 1;
    res->st = st;
    res->l = l;
}

/* Turn the loop until res is over (at most 10 s: a hang fails, never blocks CI). */
static void run_until(hilock_client *c, struct loop *L, struct result *res)
{
    for (int64_t end = now_ms() + 10000; !res->over && now_ms() < end;) {
        int wait = L->timer_at < 0 ? 100 : (int)(L->timer_at - now_ms());
        int n;
        if (wait < 0) wait = 0;
        if (wait > 100) wait = 100;
        n = poll(L->fds, (nfds_t)L->nfds, wait);
        if (n < 0 && errno != EINTR) break;
        for (int i = 0; n > 0 && i < L->nfds; i++) {
            short re = L->fds[i].revents;
            if (!re) continue;
            hilock_loop_fd(c, L->fds[i].fd, (re & (POLLIN | POLLERR | POLLHUP) ? HILOCK_EV_READ : 0) |
                                                (re & POLLOUT ? HILOCK_EV_WRITE : 0));
            break;   /* (the set may have changed: poll again) */
        }
        if (L->timer_at >= 0 && now_ms() >= L->timer_at) {
            L->timer_at = -1;
            hilock_loop_timeout(c);
        }
    }
    CHECK(res->over);
}

/* A build with no fiber switch: no loop, said at attach (hilock_async.h). */
static void no_switch(const char *url)
{
    struct loop L = {.nfds = 0, .timer_at = -1};
    hilock_loop hooks = {.data = &L, .watch = on_watch, .timer = on_timer, .detach = NULL};
    hilock_client *c;
    CHECK(hilock_client_open(url, &c) == HILOCK_OK);
    if (failed) return;
    CHECK(hilock_loop_attach(c, &hooks) == HILOCK_EINVAL);
    CHECK(strcmp(hilock_client_errmsg(c),
                 "event loops are not supported by this build (no fiber switch for this machine)") == 0);
    hilock_client_free(c);
}

static void event_loop(redisContext *r, const char *url)
{
    struct loop L = {.nfds = 0, .timer_at = -1};
    hilock_loop hooks = {.data = &L, .watch = on_watch, .timer = on_timer, .detach = NULL};
    struct result res = {0, HILOCK_EIO, NULL};
    hilock_client *c;
    hilock *l;
    CHECK(hilock_client_open(url, &c) == HILOCK_OK);
    if (failed) return;
    CHECK(hilock_loop_attach(c, &hooks) == HILOCK_OK);
    CHECK(hilock_acquire_async(c, "musl:loop", 2000, 0, done, &res) == HILOCK_OK);
    run_until(c, &L, &res);
    CHECK(res.st == HILOCK_OK && res.l);
    CHECK(pttl(r, "musl:loop") > 0 && pttl(r, "musl:loop") <= 2000);
    if (!(l = res.l)) return;
    res.over = 0;
    CHECK(hilock_extend_async(l, 60000, done, &res) == HILOCK_OK);
    run_until(c, &L, &res);
    CHECK(res.st == HILOCK_OK);
    CHECK(pttl(r, "musl:loop") > 2000);
    res.over = 0;
    CHECK(hilock_release_async(l, done, &res) == HILOCK_OK);
    run_until(c, &L, &res);
    CHECK(res.st == HILOCK_OK);
    CHECK(pttl(r, "musl:loop") == -2);
    hilock_free(l);
    hilock_client_free(c);
}

int main(int argc, char **argv)
{
    char url[600];
    redisContext *r;
    int none = argc == 3 && strcmp(argv[2], "no-switch") == 0;
    if (argc != 2 && !none) {
        fprintf(stderr, "usage: musl_check DIR [no-switch] (DIR: for the server's socket)\n");
        return 2;
    }
    atexit(stop_server);
    if (!(r = start_server(argv[1]))) {
        fprintf(stderr, "musl_check: redis-server did not answer on %s\n", sock);
        return 1;
    }
    snprintf(url, sizeof url, "unix://%s", sock);
    blocking(r, url);
    if (none)
        no_switch(url);
    else
        event_loop(r, url);
    redisFree(r);
    if (!failed)
        printf("musl_check: blocking calls and %s passed\n", none ? "the refused attach" : "event-loop calls");
    return failed;
}
