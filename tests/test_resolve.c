/* SPDX-License-Identifier: BSD-3-Clause */
/* test_resolve.c -- host names (issue 24): looked up once for both families (AF_UNSPEC),
 * their addresses tried in order, the lookup bounded by connect_timeout_ms and run off the
 * caller's thread, so a hung resolver neither stretches a call nor stalls an event loop.
 * Real redis-server (and redis-sentinel, and a two-node cluster) processes.
 *
 * This binary answers getaddrinfo itself for a few names (it defines getaddrinfo, which the
 * library's static archive binds to; every other name goes to the system's):
 *   slow.hilock.test     sleeps SLOW_MS (a resolver that does not answer), then 127.0.0.1
 *   nowhere.hilock.test  EAI_NONAME at once
 *   dual.hilock.test     ::1 then 127.0.0.1, as a stock /etc/hosts answers for "localhost"
 *   localhost            the same (this machine's /etc/hosts may lack its "::1 localhost")
 * AF_INET and AF_INET6 queries of the last two get their one address of that family. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checks.h"
#include "clients.h"
#include "fixture.h"
#include "hilock.h"
#include "hilock_async.h"
#include "hilock_libuv.h"
#include "resolve.h"   /* (-Isrc: HL_LOOKUPS_HUNG_MAX) */
#include "tls_fixture.h"
#include "transport.h"

TestSuite(resolve, .timeout = 60);

#define SLOW_MS 4000

/* ---- the test resolver ---- */

typedef int (*gai_fn)(const char *, const char *, const struct addrinfo *, struct addrinfo **);

static int name_calls, name_families[8];   /* lookups of the test names, and their families */

static gai_fn real_gai(void)
{
    static gai_fn real;
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "getaddrinfo");
    return real;
}

static int numeric(const char *addr, const char *service, struct addrinfo **res)
{
    struct addrinfo h;
    memset(&h, 0, sizeof h);
    h.ai_socktype = SOCK_STREAM;
    h.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    return real_gai()(addr, service, &h, res);
}

/* ::1 then 127.0.0.1 (AF_UNSPEC), or the one of the family asked for. */
static int dual(const struct addrinfo *hints, const char *service, struct addrinfo **res)
{
    int fam = hints ? hints->ai_family : AF_UNSPEC, rv;
    struct addrinfo *v6 = NULL, *v4 = NULL;
    if (fam == AF_INET) return numeric("127.0.0.1", service, res);
    if (fam == AF_INET6) return numeric("::1", service, res);
    if ((rv = numeric("::1", service, &v6)) != 0) return rv;
    if ((rv = numeric("127.0.0.1", service, &v4)) != 0) {
        freeaddrinfo(v6);
        return rv;
    }
    v6->ai_next = v4;   /* (freeaddrinfo frees the nodes one by one) */
    *res = v6;
    return 0;
}

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res)
{
    int test_name = node && (!strcmp(node, "slow.hilock.test") || !strcmp(node, "nowhere.hilock.test") ||
                             !strcmp(node, "dual.hilock.test") || !strcmp(node, "localhost"));
    if (test_name && !(hints && (hints->ai_flags & AI_NUMERICHOST))) {
        int i = __atomic_fetch_add(&name_calls, 1, __ATOMIC_SEQ_CST);
        if (i < 8) name_families[i] = hints ? hints->ai_family : AF_UNSPEC;
        if (!strcmp(node, "nowhere.hilock.test")) return EAI_NONAME;
        if (!strcmp(node, "slow.hilock.test")) {
            struct timespec ts = { SLOW_MS / 1000, (SLOW_MS % 1000) * 1000000L };
            while (nanosleep(&ts, &ts) < 0) {}
            return numeric("127.0.0.1", service, res);
        }
        return dual(hints, service, res);
    }
    return real_gai()(node, service, hints, res);
}

/* ---- helpers ---- */

/* Under valgrind (VALGRIND=1, scripts/run-tests.sh) every step is ~20 times slower: the
 * bounds that prove "does not hang" stay far below the 4 s a blocking lookup would take. */
static long scaled(long ms, long factor)
{
    const char *v = getenv("VALGRIND");
    return v && *v == '1' ? ms * factor : ms;
}

/* Can a socket listen on ::1 here? */
static int have_ipv6_loopback(void)
{
    struct sockaddr_in6 a;
    int fd = socket(AF_INET6, SOCK_STREAM, 0), ok;
    memset(&a, 0, sizeof a);
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_loopback;
    ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0) close(fd);
    return ok;
}

/* Acquire and release "job" through url; the server r held our token in between. */
static void lock_through(hlt_redis *r, const char *url)
{
    hilock_options o = hlt_options((const char *[]){ url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    hilock_client *c = hlt_client_new(&o);
    hilock *l = NULL;
    char *v;
    cr_assert_eq(hilock_acquire(c, "job", 10000, 0, &l), HILOCK_OK, "%s: %s", url, hilock_client_errmsg(c));
    v = hlt_get(r, "job");
    cr_assert_not_null(v, "the lock is on the server the name leads to");
    cr_assert_str_eq(v, hilock_token(l));
    free(v);
    hlt_release_gone(r, c, l, "job");
    hilock_client_free(c);
}

/* ---- both families, in order ---- */

Test(resolve, looks_a_name_up_once_for_both_families)
{
    hlt_redis *r = hlt_redis_started(NULL);
    char url[128];
    snprintf(url, sizeof url, "redis://dual.hilock.test:%d", r->port);
    lock_through(r, url);
    cr_assert_eq(name_calls, 1, "one lookup per connect, not one per family (%d)", name_calls);
    cr_assert_eq(name_families[0], AF_UNSPEC, "IPv6 and IPv4 asked together");
    hlt_redis_stop(r);
}

/* dual.hilock.test gives ::1 first: nothing listens there on this port (refused), and the
 * connect goes on to 127.0.0.1 within the same call. */
Test(resolve, a_refused_first_address_falls_through_to_the_next)
{
    hlt_redis *r = hlt_redis_start(NULL);   /* (127.0.0.1 only) */
    char url[128];
    cr_assert_not_null(r);
    snprintf(url, sizeof url, "redis://dual.hilock.test:%d", r->port);
    lock_through(r, url);
    hlt_redis_stop(r);
}

Test(resolve, reaches_a_server_listening_on_ipv6_loopback_only)
{
    hlt_redis *r;
    char url[128];
    if (!have_ipv6_loopback()) cr_skip_test("no IPv6 loopback here");
    r = hlt_redis_started("--bind ::1");
    snprintf(url, sizeof url, "redis://dual.hilock.test:%d", r->port);
    lock_through(r, url);
    hlt_redis_stop(r);
}

/* The transport on its own: while it connects to a name, its fd changes (the lookup's pipe,
 * then a socket per address), and each fd it gives up stays open until the next call on it,
 * so that an event loop can stop watching it first (transport.h). */
Test(resolve, an_fd_the_connect_gives_up_stays_open_until_the_next_call)
{
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port, before;
    hl_io_conn k;
    char err[128] = "";
    hl_io io = HL_IO_WANT_READ;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(lfd, 4) == 0);
    getsockname(lfd, (struct sockaddr *)&a, &al);
    port = ntohs(a.sin_port);
    memset(&k, 0, sizeof k);
    cr_assert_eq(hl_transport_tcp.connect_start(&k, "dual.hilock.test", port, err, sizeof err), 0, "%s", err);
    cr_assert_eq(hl_transport_tcp.poll_events(&k, POLLIN | POLLOUT), POLLIN, "the lookup's pipe: readable when done");
    cr_assert_str_eq(hl_transport_tcp.timeout_error(&k), "resolve dual.hilock.test");
    for (int i = 0; i < 50 && io != HL_IO_OK; i++) {
        struct pollfd pf = { k.fd, hl_transport_tcp.poll_events(&k, POLLIN), 0 };
        cr_assert_eq(poll(&pf, 1, 2000), 1);
        before = k.fd;
        io = hl_transport_tcp.connect_step(&k);
        cr_assert(io == HL_IO_OK || io == HL_IO_WANT_WRITE, "%s", hl_transport_tcp.error(&k));
        if (io == HL_IO_WANT_WRITE && k.fd != before)
            cr_assert_neq(fcntl(before, F_GETFD), -1, "fd %d given up was closed at once", before);
    }
    cr_assert_eq(io, HL_IO_OK);
    cr_assert_eq(hl_transport_tcp.poll_events(&k, POLLIN), POLLIN);
    hl_transport_tcp.close(&k);
    close(lfd);
}

/* ---- failures: in words, and within the bound ---- */

Test(resolve, a_name_that_does_not_resolve_is_named_in_the_error)
{
    hilock_options o = hlt_options((const char *[]){ "redis://nowhere.hilock.test:6379" }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    hilock_client *c = hlt_client_new(&o);
    hilock *l = NULL;
    cr_assert_eq(hilock_acquire(c, "job", 10000, 0, &l), HILOCK_EIO);
    cr_assert_null(l);
    cr_assert(strstr(hilock_client_errmsg(c), "cannot resolve nowhere.hilock.test: Name or service not known"),
              "%s", hilock_client_errmsg(c));
    hilock_client_free(c);
}

/* The resolver does not answer for 4 s: the call ends at connect_timeout_ms (200 ms), saying
 * the lookup of that name timed out, and the server the name would have led to has nothing. */
Test(resolve, a_hung_lookup_ends_at_the_connect_deadline)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *l = NULL;
    char url[128];
    long long t0, took;
    snprintf(url, sizeof url, "redis://slow.hilock.test:%d", r->port);
    hilock_options o = hlt_options((const char *[]){ url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    o.connect_timeout_ms = 200;
    c = hlt_client_new(&o);
    t0 = hlt_now_ms();
    cr_assert_eq(hilock_acquire(c, "job", 10000, 0, &l), HILOCK_ETIMEDOUT, "%s", hilock_client_errmsg(c));
    took = hlt_now_ms() - t0;
    printf("resolve: a hung lookup: the acquire ended in %lld ms (connect_timeout_ms 200)\n", took);
    cr_assert_lt(took, 1200, "took %lld ms", took);
    cr_assert(strstr(hilock_client_errmsg(c), "resolve slow.hilock.test: timed out"), "%s",
              hilock_client_errmsg(c));
    cr_assert_eq(hlt_exists(r, "job"), 0);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* Each call gives up its lookup at the deadline, and the lookup's thread goes on until the
 * resolver answers. Past HL_LOOKUPS_HUNG_MAX such threads, a new lookup is refused at once. */
Test(resolve, hung_lookups_are_capped_and_the_next_is_refused_at_once)
{
    hilock_options o = hlt_options((const char *[]){ "redis://slow.hilock.test:6379" }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    o.connect_timeout_ms = 20;
    hilock_client *c = hlt_client_new(&o);
    hilock *l = NULL;
    long long t0 = hlt_now_ms(), t;
    for (int i = 0; i < HL_LOOKUPS_HUNG_MAX; i++)
        cr_assert_eq(hilock_acquire(c, "job", 10000, 0, &l), HILOCK_ETIMEDOUT, "%d: %s", i, hilock_client_errmsg(c));
    cr_assert_lt(hlt_now_ms() - t0, SLOW_MS - 500, "the calls outlasted the hung lookups: the test proves nothing");
    t = hlt_now_ms();
    cr_assert_eq(hilock_acquire(c, "job", 10000, 0, &l), HILOCK_EIO);
    cr_assert_lt(hlt_now_ms() - t, 100);
    cr_assert(strstr(hilock_client_errmsg(c), "cannot resolve slow.hilock.test: 32 earlier lookups still hang"),
              "%s", hilock_client_errmsg(c));
    hilock_client_free(c);
}

/* A forked child has none of the parent's lookup threads, but it inherited their count: with
 * the parent at the cap, every lookup in the child was refused ("32 earlier lookups still
 * hang") for good. Now a child starts from 0: its new client resolves a name and locks. */
Test(resolve, a_forked_child_starts_with_no_hung_lookups)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_options o = hlt_options((const char *[]){ "redis://slow.hilock.test:6379" }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    o.connect_timeout_ms = 20;
    hilock_client *c = hlt_client_new(&o);
    hilock *l = NULL;
    char out[512] = "", *v;
    int fds[2];
    ssize_t got;
    pid_t kid;
    cr_assert_not_null(r);
    for (int i = 0; i < HL_LOOKUPS_HUNG_MAX; i++)
        cr_assert_eq(hilock_acquire(c, "job", 10000, 0, &l), HILOCK_ETIMEDOUT, "%d: %s", i, hilock_client_errmsg(c));
    cr_assert_eq(hilock_acquire(c, "job", 10000, 0, &l), HILOCK_EIO);   /* the parent is at the cap */
    cr_assert(strstr(hilock_client_errmsg(c), "earlier lookups still hang"), "%s", hilock_client_errmsg(c));
    cr_assert_eq(pipe(fds), 0);
    if ((kid = fork()) == 0) {   /* the child: a new client through a name; its token or error out */
        char url[128];
        hilock_client *k;
        hilock_status st;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        alarm(20);
        close(fds[0]);
        snprintf(url, sizeof url, "redis://dual.hilock.test:%d", r->port);
        hilock_options o2 = hlt_options((const char *[]){ url }, 1);
        o2.retry_delay_ms = 50;   /* the library's default */
        k = hlt_client_new(&o2);
        st = hilock_acquire(k, "job", 30000, 0, &l);
        snprintf(out, sizeof out, "%s %s", st == HILOCK_OK ? "token" : "error",
                 st == HILOCK_OK ? hilock_token(l) : hilock_client_errmsg(k));
        if (write(fds[1], out, strlen(out)) < 0) _exit(2);
        _exit(st == HILOCK_OK ? 0 : 1);
    }
    close(fds[1]);
    got = read(fds[0], out, sizeof out - 1);
    close(fds[0]);
    out[got > 0 ? got : 0] = '\0';
    cr_assert_eq(hlt_reap(kid, 10000), 0, "the child: %s", out);
    cr_assert(!strncmp(out, "token ", 6), "the child: %s", out);
    v = hlt_get(r, "job");
    cr_assert(v && !strcmp(v, out + 6), "the child's lock is not on the server");
    free(v);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* ---- on an event loop ---- */

typedef struct ticker { uv_timer_t t; long long last, max_gap; long ticks; } ticker;
typedef struct outcome { hilock_client *c; int done, released; hilock_status st; hilock *l; char err[256]; } outcome;

static void on_tick(uv_timer_t *t)
{
    ticker *k = t->data;
    long long now = hlt_now_ms();
    if (now - k->last > k->max_gap) k->max_gap = now - k->last;
    k->last = now;
    k->ticks++;
}

static void on_done(hilock_status st, hilock *l, void *arg)
{
    outcome *o = arg;
    o->done = 1;
    o->st = st;
    o->l = l;
    snprintf(o->err, sizeof o->err, "%s", hilock_client_errmsg(o->c));   /* (the call's, while done runs) */
}

static void on_released(hilock_status st, hilock *l, void *arg)
{
    (void)l;
    cr_assert_eq(st, HILOCK_OK);
    ((outcome *)arg)->released = 1;
}

/* One acquire of "job" on an attached client, with a 2 ms ticker running meanwhile. */
static void acquire_on_loop(const char *url, int64_t connect_ms, outcome *o, ticker *tk, long long *took)
{
    uv_loop_t loop;
    hilock_options opt = hlt_options((const char *[]){ url }, 1);
    opt.retry_delay_ms = 50;   /* the library's default */
    opt.connect_timeout_ms = connect_ms;
    hilock_client *c = hlt_client_new(&opt);
    long long t0, end;
    uv_loop_init(&loop);
    cr_assert_eq(hilock_libuv_attach(c, &loop), HILOCK_OK, "%s", hilock_client_errmsg(c));
    memset(tk, 0, sizeof *tk);
    memset(o, 0, sizeof *o);
    o->c = c;
    uv_timer_init(&loop, &tk->t);
    tk->t.data = tk;
    tk->last = t0 = hlt_now_ms();   /* (a stall before the first tick counts too) */
    uv_timer_start(&tk->t, on_tick, 2, 2);
    cr_assert_eq(hilock_acquire_async(c, "job", 10000, 0, on_done, o), HILOCK_OK, "%s", hilock_client_errmsg(c));
    end = t0 + 10000;
    while (!o->done && hlt_now_ms() < end) uv_run(&loop, UV_RUN_ONCE);
    *took = hlt_now_ms() - t0;
    cr_assert(o->done, "the acquire did not end within 10 s");
    if (o->l) {
        cr_assert_eq(hilock_release_async(o->l, on_released, o), HILOCK_OK);
        while (!o->released && hlt_now_ms() < end) uv_run(&loop, UV_RUN_ONCE);
        cr_assert(o->released);
    }
    uv_timer_stop(&tk->t);
    uv_close((uv_handle_t *)&tk->t, NULL);
    hilock_free(o->l);
    hilock_client_free(c);
    uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_eq(uv_loop_close(&loop), 0, "handles left open on the loop");
}

Test(resolve, the_loop_keeps_ticking_while_a_lookup_hangs)
{
    hlt_redis *r = hlt_redis_started(NULL);
    outcome o;
    ticker tk;
    long long took;
    char url[128];
    snprintf(url, sizeof url, "redis://slow.hilock.test:%d", r->port);
    acquire_on_loop(url, 300, &o, &tk, &took);
    printf("resolve: loop: a hung lookup: the acquire ended in %lld ms (connect_timeout_ms 300, io 1000); "
           "a 2 ms timer ticked %ld times, longest gap %lld ms\n", took, tk.ticks, tk.max_gap);
    cr_assert_eq(o.st, HILOCK_ETIMEDOUT, "%s", o.err);
    cr_assert(strstr(o.err, "resolve slow.hilock.test: timed out"), "%s", o.err);
    cr_assert_lt(took, 300 + 1000 + 700, "took %lld ms", took);   /* (the loop's bound: connect + round trip) */
    cr_assert_lt(tk.max_gap, scaled(150, 5), "the loop stalled %lld ms", tk.max_gap);
    cr_assert_eq(hlt_exists(r, "job"), 0);
    hlt_redis_stop(r);
}

/* The connection's fd changes twice while it connects (the lookup's pipe, the refused ::1
 * socket, the 127.0.0.1 one): the loop is told of each change before the old fd closes. */
Test(resolve, an_attached_client_reaches_a_name_through_its_second_address)
{
    hlt_redis *r = hlt_redis_started(NULL);
    outcome o;
    ticker tk;
    long long took;
    char url[128];
    snprintf(url, sizeof url, "redis://dual.hilock.test:%d", r->port);
    acquire_on_loop(url, 1000, &o, &tk, &took);
    cr_assert_eq(o.st, HILOCK_OK, "%s", o.err);
    cr_assert_eq(name_calls, 1);
    hlt_redis_stop(r);
}

/* ---- a Sentinel that hands out host names ---- */

/* redis-sentinel on a free port, monitoring "named" at localhost:port, announcing host names
 * (6.2+: resolve-hostnames, announce-hostnames). Answers PING: its pid; else -1. */
static pid_t sentinel_for(const char *dir, int master_port, int *sport)
{
    char conf[256], cmd[400];
    FILE *fp;
    pid_t pid;
    *sport = hlt_free_port();
    snprintf(conf, sizeof conf, "%s/sentinel.conf", dir);
    cr_assert_not_null(fp = fopen(conf, "w"));
    fprintf(fp, "port %d\nbind 127.0.0.1\ndaemonize no\nlogfile %s/sentinel.log\ndir %s\n"
            "sentinel resolve-hostnames yes\nsentinel announce-hostnames yes\n"
            "sentinel monitor named localhost %d 1\n", *sport, dir, dir, master_port);
    fclose(fp);
    snprintf(cmd, sizeof cmd, "exec redis-sentinel %s", conf);
    if ((pid = fork()) == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    for (long long end = hlt_now_ms() + 10000; hlt_now_ms() < end; hlt_sleep_ms(20)) {
        redisContext *k = redisConnect("127.0.0.1", *sport);
        redisReply *rep = k && !k->err ? redisCommand(k, "SENTINEL get-master-addr-by-name named") : NULL;
        int up = rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
                 !strcmp(rep->element[0]->str, "localhost");
        if (rep) freeReplyObject(rep);
        if (k) redisFree(k);
        if (up) return pid;
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

/* The master Sentinel names "localhost", bound on bind_addr only. */
static void through_sentinel(const char *bind_addr)
{
    char extra[64], url[128];
    hlt_redis *r;
    pid_t sp;
    int sport;
    snprintf(extra, sizeof extra, "--bind %s", bind_addr);
    r = hlt_redis_started(extra);
    sp = sentinel_for(r->dir, r->port, &sport);
    cr_assert_gt(sp, 0, "redis-sentinel did not start or does not name localhost (see %s)", r->dir);
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d#named", sport);
    lock_through(r, url);
    kill(sp, SIGKILL);
    waitpid(sp, NULL, 0);
    hlt_redis_stop(r);
}

Test(resolve, a_sentinel_announcing_localhost_leads_to_a_master_on_127_0_0_1)
{
    HLT_NEEDS(60200, "Sentinel's announce-hostnames is 6.2's");
    through_sentinel("127.0.0.1");
}

Test(resolve, a_sentinel_announcing_localhost_leads_to_a_master_on_ipv6_loopback)
{
    HLT_NEEDS(60200, "Sentinel's announce-hostnames is 6.2's");
    if (!have_ipv6_loopback()) cr_skip_test("no IPv6 loopback here");
    through_sentinel("::1");
}

/* ---- over TLS ---- */

/* rediss:// to a name: the TLS layer waits on the lookup as the plain connect does, then
 * verifies the certificate against that name (DNS:localhost). */
Test(resolve, a_tls_connect_to_a_name_waits_for_its_lookup_and_verifies_that_name)
{
    hlt_pki *pki;
    hlt_redis *r;
    hilock_options o;
    hilock_client *c = NULL;
    hilock *l = NULL;
    char url[128];
    const char *urls[1] = { url };
    char *v;
    HLT_NEEDS(60000, "TLS is 6.0's");
    cr_assert_not_null(pki = hlt_pki_make(), "could not make the test certificates");
    cr_assert_not_null(r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 0, NULL));
    snprintf(url, sizeof url, "rediss://localhost:%d", r->port);
    o = hlt_options(urls, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    o.tls_ca_file = pki->ca;
    o.connect_timeout_ms = o.io_timeout_ms = scaled(1000, 20);   /* (OpenSSL under valgrind) */
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "job", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_not_null(v = hlt_get(r, "job"));
    cr_assert_str_eq(v, hilock_token(l));
    free(v);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(name_calls, 1);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
    hlt_pki_free(pki);
}

/* ---- a cluster that hands out host names ---- */

/* CLUSTER NODES of r, or "" (static buffer). */
static const char *nodes_of(hlt_redis *r)
{
    static char buf[4096];
    redisReply *rep = hlt_cmd(r, "CLUSTER NODES");
    snprintf(buf, sizeof buf, "%s", rep && rep->type == REDIS_REPLY_STRING ? rep->str : "");
    if (rep) freeReplyObject(rep);
    return buf;
}

static void node_id(hlt_redis *r, char *id)
{
    redisReply *rep = hlt_cmd(r, "CLUSTER MYID");
    cr_assert(rep && rep->type == REDIS_REPLY_STRING && rep->len == 40);
    memcpy(id, rep->str, 41);
    freeReplyObject(rep);
}

/* Node A (127.0.0.1 and ::1) owns every slot; node B listens on ::1 only. Both announce the
 * host name "localhost" and prefer it in their answers. The slot of a key the client has not
 * used yet moves to B: A answers MOVED slot localhost:B, and the client must get to B by that
 * name (::1 first; today's IPv4-only lookup finds 127.0.0.1, where B does not listen). */
Test(resolve, a_moved_answer_naming_a_host_leads_to_its_node)
{
    const char *names = "--cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000 "
                        "--cluster-announce-hostname localhost --cluster-preferred-endpoint-type hostname";
    char extra[400], ida[41], idb[41], url[128];
    hlt_redis *a, *b;
    hilock_client *c;
    hilock *l = NULL;
    redisReply *rep;
    int slot;
    char *v;
    HLT_NEEDS(70000, "cluster-announce-hostname is 7.0's");
    if (!have_ipv6_loopback()) cr_skip_test("no IPv6 loopback here");
    snprintf(extra, sizeof extra, "--bind 127.0.0.1 ::1 %s", names);
    a = hlt_redis_started(extra);
    snprintf(extra, sizeof extra, "--bind ::1 %s", names);
    b = hlt_redis_started(extra);
    node_id(a, ida);
    node_id(b, idb);
    rep = hlt_addslots(hlt_cli(a), 0, 16383);
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    rep = hlt_cmd(a, "CLUSTER MEET ::1 %d", b->port);
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS, "%s", rep ? rep->str : "no reply");
    freeReplyObject(rep);
    for (long long end = hlt_now_ms() + 10000;; hlt_sleep_ms(50)) {   /* B known to A, by name */
        const char *s = nodes_of(a), *line = strstr(s, idb);
        if (line && strstr(line, ",localhost ") && strstr(line, " connected") && strstr(nodes_of(b), ida)) break;
        cr_assert_lt(hlt_now_ms(), end, "the two nodes did not meet: %s", s);
    }
    for (long long end = hlt_now_ms() + 10000;; hlt_sleep_ms(50)) {   /* both say the cluster is up */
        redisReply *ia = hlt_cmd(a, "CLUSTER INFO"), *ib = hlt_cmd(b, "CLUSTER INFO");
        int up = ia && ib && ia->str && ib->str && strstr(ia->str, "cluster_state:ok") && strstr(ib->str, "cluster_state:ok");
        if (ia) freeReplyObject(ia);
        if (ib) freeReplyObject(ib);
        if (up) break;
        cr_assert_lt(hlt_now_ms(), end, "the cluster did not come up");
    }
    snprintf(url, sizeof url, "redis-cluster://127.0.0.1:%d", a->port);
    hilock_options o = hlt_options((const char *[]){ url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "job", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));   /* the map: all A's */
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    l = NULL;
    rep = hlt_cmd(a, "CLUSTER KEYSLOT next");
    slot = (int)rep->integer;
    freeReplyObject(rep);
    rep = hlt_cmd(b, "CLUSTER SETSLOT %d NODE %s", slot, idb);   /* (the target first) */
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS, "B: %s", rep ? rep->str : "no reply");
    freeReplyObject(rep);
    rep = hlt_cmd(a, "CLUSTER SETSLOT %d NODE %s", slot, idb);
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS, "A: %s", rep ? rep->str : "no reply");
    freeReplyObject(rep);
    name_calls = 0;
    cr_assert_eq(hilock_acquire(c, "next", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_geq(name_calls, 1, "the MOVED answer's host name was looked up");
    cr_assert_not_null(v = hlt_get(b, "next"), "the lock is on B");
    cr_assert_str_eq(v, hilock_token(l));
    free(v);
    hlt_release_gone(b, c, l, "next");
    hilock_client_free(c);
    hlt_redis_stop(b);
    hlt_redis_stop(a);
}
