/* SPDX-License-Identifier: BSD-3-Clause */
/* test_servers.c -- hilock on every server a fleet runs (Redis 2.8 to 7.4, Valkey): what each
 * connection learns of its server at connect, and how a feature a server lacks is refused or
 * degraded. Run against the redis-server first on PATH (make test-servers puts each server of
 * the matrix there); each test asserts what that server must give: success on a server that
 * has the feature, the refusal naming its version on one that has not. */
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "clients.h"
#include "fakes.h"
#include "fixture.h"
#include "hilock.h"
#include "holders.h"   /* hlt_server_ms */
#include "hilock_inspect.h"
#include "hilock_legacy.h"
#include "hilock_libuv.h"
#include "lock.h"   /* the facts a node's handshake read */

HLT_SUITE_WITH_SERVER(servers, R, .timeout = 60);

/* Each new connection reads the server's version (INFO server) and clock (TIME) in its
 * handshake, once: the version as one number and the name for messages, the clock as the
 * server's TIME plus the monotonic time since. */
Test(servers, a_connection_reads_the_servers_version_and_clock_once_at_connect)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    o.fencing = 0;
    hilock_client *c = hlt_client_new(&o);   /* (the plain SET: any server) */
    const hl_node *n = &c->nodes[0];
    long long before = hlt_info_int(R, "commandstats", "cmdstat_info:calls=");
    cr_assert_eq(hl_node_version(n), 0, "nothing known before the first connection");
    cr_assert_eq(hl_node_server_ms(n), -1);
    for (int i = 0; i < 5; i++) {
        hilock *l = NULL;
        cr_assert_eq(hilock_acquire(c, "hs:key", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
        cr_assert_eq(hilock_release(l), HILOCK_OK);
        hilock_free(l);
    }
    /* INFO: the handshake's, and the read-back's own before this one */
    cr_assert_eq(hlt_info_int(R, "commandstats", "cmdstat_info:calls=") - (before < 0 ? 0 : before), 2,
                 "INFO once per connection");
    /* (the number only: valkey-server 7.2 run as redis-server says "Server v=7.2.7" to
     * --version, which the fixture reads as Redis) */
    cr_assert_str_eq(strchr(hl_node_server(n), ' '), strchr(hlt_server_name(), ' '));
    if (!strncmp(hl_node_server(n), "Valkey", 6))   /* Redis-compatible: redis_version 7.2.4 */
        cr_assert_geq(hl_node_version(n), 70200, "%d", hl_node_version(n));
    else
        cr_assert_eq(hl_node_version(n), hlt_server_version());
    {
        long long theirs = hlt_server_ms(R), ours = hl_node_server_ms(n);
        cr_assert(ours > theirs - 2000 && ours < theirs + 2000, "server clock %lld vs %lld", ours, theirs);
    }
    hilock_client_free(c);
}

/* A command argument the engine fills per connection with the server's clock (a fence floor
 * for scripts that must not read TIME): ECHO gives it back; it is the server's TIME, and it
 * is known on the very first command of a new connection (the handshake went first). */
Test(servers, an_argument_can_carry_the_servers_clock_known_on_the_first_command)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    o.fencing = 0;
    hilock_client *c = hlt_client_new(&o);
    hl_cmd cmd;
    uint32_t ok;
    long long ours, theirs;
    hl_cmd_init(&cmd, NULL, 0);
    hl_cmd_arg(&cmd, "ECHO", 4);
    hl_cmd_argclock(&cmd);
    ok = hl_exec(c, 1, &cmd, 1, hl_deadline_of(2000000, hl_now_us() + 2000000));
    cr_assert_eq(ok, 1u, "%s", c->nodes[0].err);
    ours = atoll(hl_reply_str(c->nodes[0].reply[0], NULL));
    hl_exec_clear(c);
    theirs = hlt_server_ms(R);
    cr_assert(ours > theirs - 2000 && ours <= theirs + 50, "clock argument %lld, TIME %lld", ours, theirs);
    hilock_client_free(c);
}

/* ---- features a server may lack: refused with the reason, or a portable form ---- */

/* The refusal: EINVAL, no lock, the message naming the feature, the floor and the server's
 * version, never a script's error text; nothing written. */
static void assert_refused(hilock_client *c, hilock_status st, const hilock *l, const char *what)
{
    const char *e = hilock_client_errmsg(c);
    cr_assert_eq(st, HILOCK_EINVAL, "%s: %s", hilock_strerror(st), e);
    cr_assert_null(l);
    cr_assert(strstr(e, what), "%s", e);
    cr_assert(strstr(e, strchr(hlt_server_name(), ' ') + 1), "the version is named: %s", e);
    cr_assert(strstr(e, R->url + strlen("redis://")), "the server is named: %s", e);
    cr_assert(!strstr(e, "script") && !strstr(e, "Lua") && !strstr(e, "ERR"), "%s", e);
    cr_assert_eq(hlt_dbsize(R), 0, "nothing written");
}

static void set_fair(hilock_options *o) { o->fair = 1; }

typedef struct waiter {
    hilock_client *c;
    hilock        *l;
    hilock_status  st;
    char           err[256];
} waiter;

static void *wait_for_it(void *arg)
{
    waiter *w = arg;
    w->st = hilock_acquire(w->c, "fair:key", 10000, 8000, &w->l);
    snprintf(w->err, sizeof w->err, "%s", hilock_client_errmsg(w->c));
    return NULL;
}

static long long hlt_llen(hlt_redis *r, const char *key)
{
    redisReply *x = hlt_cmd(r, "LLEN %s", key);
    long long n = x && x->type == REDIS_REPLY_INTEGER ? x->integer : -1;
    freeReplyObject(x);
    return n;
}

Test(servers, fair_locks_are_refused_before_3_2_and_their_busy_path_works_from_it)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    set_fair(&o);
    hilock_client *a = hlt_client_new(&o), *b = hlt_client_new(&o);
    hilock *la = NULL, *lb = NULL;
    hilock_status st = hilock_acquire(a, "fair:key", 10000, 0, &la);
    if (hlt_server_version() < 30200) {
        assert_refused(a, st, la, "fair locks need Redis >= 3.2: ");
        hilock_client_free(a);
        hilock_client_free(b);
        return;
    }
    cr_assert_eq(st, HILOCK_OK, "%s", hilock_client_errmsg(a));
    /* busy: the script finds where we stand (LPOS from 6.0.6, a scan of the queue before) */
    cr_assert_eq(hilock_acquire(b, "fair:key", 10000, 0, &lb), HILOCK_BUSY, "%s", hilock_client_errmsg(b));
    cr_assert(strstr(hilock_client_errmsg(b), "held by another owner"), "%s", hilock_client_errmsg(b));
    {   /* a waiter queues; a try-lock meanwhile is told it is behind it */
        waiter w = { .c = b, .l = NULL };
        pthread_t t;
        hilock *lc = NULL;
        hilock_client *c = hlt_client_new(&o);
        long long end = hlt_now_ms() + 5000;
        cr_assert_eq(pthread_create(&t, NULL, wait_for_it, &w), 0);
        while (hlt_llen(R, "{fair:key}:fq") < 1 && hlt_now_ms() < end) hlt_sleep_ms(10);
        cr_assert_eq(hilock_acquire(c, "fair:key", 10000, 0, &lc), HILOCK_BUSY);
        cr_assert(strstr(hilock_client_errmsg(c), "1 waiter(s) queued first"), "%s", hilock_client_errmsg(c));
        cr_assert_eq(hilock_release(la), HILOCK_OK);   /* its head is called */
        pthread_join(t, NULL);
        cr_assert_eq(w.st, HILOCK_OK, "%s", w.err);
        lb = w.l;
        hilock_client_free(c);
    }
    cr_assert_gt(hilock_fence(lb), hilock_fence(la));
    hilock_free(la);
    hlt_release_gone(R, NULL, lb, "fair:key");
    hilock_client_free(a);
    hilock_client_free(b);
}

static void set_replicas(hilock_options *o)
{
    o->fencing = 0;   /* (the gate is the point; any lock kind) */
    o->min_replicas = 1;
    o->replicas_timeout_ms = 50;
}

Test(servers, min_replicas_is_refused_on_2_8_which_has_no_wait)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    set_replicas(&o);
    hilock_client *c = hlt_client_new(&o);
    hilock *l = NULL;
    hilock_status st = hilock_acquire(c, "wait:key", 10000, 0, &l);
    if (hlt_server_version() < 30000) {
        assert_refused(c, st, l, "min_replicas (WAIT) needs Redis >= 3.0: ");
    } else {   /* no replica: WAIT answers 0, the grant is undone */
        cr_assert_eq(st, HILOCK_EREPLICAS, "%s", hilock_client_errmsg(c));
        cr_assert_eq(hlt_exists(R, "wait:key"), 0);
    }
    hilock_client_free(c);
}

static void set_guard(hilock_options *o)
{
    o->fencing = 0;
    o->failover_guard = 1;
}

Test(servers, failover_guard_is_refused_before_4_0_which_has_no_replication_ids)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    set_guard(&o);
    hilock_client *c = hlt_client_new(&o);
    hilock *l = NULL;
    hilock_status st = hilock_acquire(c, "guard:key", 10000, 0, &l);
    if (hlt_server_version() < 40000) {
        assert_refused(c, st, l, "failover_guard needs Redis >= 4.0: ");
    } else {
        cr_assert_eq(st, HILOCK_OK, "%s", hilock_client_errmsg(c));
        hlt_release_gone(R, NULL, l, "guard:key");
    }
    hilock_client_free(c);
}

/* ---- waits: before 6.0 a BLPOP timeout is whole seconds ---- */

static void set_slow_poll(hilock_options *o)
{
    o->fencing = 0;            /* (any lock kind that wakes; the plain SET runs on every server) */
    o->retry_delay_ms = 3000;  /* a poll every 1.5 to 4.5 s: a wake-up is the only fast way */
}

typedef struct sleeper {
    hilock_client *c;
    hilock        *l;
    hilock_status  st;
    long long      at_ms;   /* when its acquire returned */
} sleeper;

static void *acquire_waiting(void *arg)
{
    sleeper *w = arg;
    w->st = hilock_acquire(w->c, "wake:key", 10000, 15000, &w->l);
    w->at_ms = hlt_now_ms();
    return NULL;
}

static void set_unfenced(hilock_options *o) { o->fencing = 0; }

/* A waiter blocks on the lock's signal list, so the release wakes it at once; before 6.0 with
 * a whole-second timeout (a fractional one is refused there: the waiter only polled). */
static void woken_by_the_release(void (*set)(hilock_options *))
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    set(&o);
    hilock_client *h = hlt_client_new(&o);
    sleeper w = { .c = hlt_client_new(&o) };
    hilock *l = NULL;
    pthread_t t;
    long long released, end;
    cr_assert_eq(hilock_acquire(h, "wake:key", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(h));
    cr_assert_eq(pthread_create(&t, NULL, acquire_waiting, &w), 0);
    end = hlt_now_ms() + 5000;   /* its busy attempt marked the lock awaited */
    while (hlt_exists(R, "{wake:key}:waiters") == 0 && hlt_now_ms() < end) hlt_sleep_ms(5);
    while (hlt_info_int(R, "clients", "blocked_clients:") != 1 && hlt_now_ms() < end) hlt_sleep_ms(2);
    cr_assert_eq(hlt_info_int(R, "clients", "blocked_clients:"), 1, "the waiter does not block");
    hlt_sleep_ms(100);           /* inside its block (>= 1 s before 6.0) */
    released = hlt_now_ms();
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    pthread_join(t, NULL);
    cr_assert_eq(w.st, HILOCK_OK, "%s", hilock_client_errmsg(w.c));
    cr_log_info("%s: woken %lld ms after the release", hlt_server_name(), w.at_ms - released);
    cr_assert_lt(w.at_ms - released, 1000, "%lld ms after the release: it polled", w.at_ms - released);
    cr_assert_eq(hilock_release(w.l), HILOCK_OK);
    cr_assert_eq(hlt_exists(R, "wake:key"), 0);
    hilock_free(l);
    hilock_free(w.l);
    hilock_client_free(h);
    hilock_client_free(w.c);
}

Test(servers, a_waiter_is_woken_by_the_release_on_every_server, .timeout = 60)
{
    woken_by_the_release(set_slow_poll);
}

/* With the default pause (25-75 ms, no whole second): before 6.0 the waiter blocks a second. */
Test(servers, a_waiter_with_the_default_pause_is_woken_by_the_release_on_every_server, .timeout = 60)
{
    woken_by_the_release(set_unfenced);
}

static void set_short_io(hilock_options *o)
{
    o->fencing = 0;
    o->io_timeout_ms = 300;   /* a short allowance: the mark is mostly the block it covers */
}

/* A waiter's first attempt runs before its connection's handshake (version unknown): its
 * mark must cover the block that follows, a whole second before 6.0. It was sized for a
 * fractional pause (75 ms + the allowance), so a release after it expired was not signalled
 * and the waiter slept out its second. And once marked, the release wakes it. */
Test(servers, a_waiters_first_mark_covers_its_one_second_block, .timeout = 60)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    set_short_io(&o);
    hilock_client *h = hlt_client_new(&o);
    sleeper w = { .c = hlt_client_new(&o) };
    hilock *l = NULL;
    pthread_t t;
    long long end, pttl;
    redisReply *rep;
    cr_assert_eq(hilock_acquire(h, "wake:key", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(h));
    cr_assert_eq(pthread_create(&t, NULL, acquire_waiting, &w), 0);
    end = hlt_now_ms() + 5000;
    while (hlt_exists(R, "{wake:key}:waiters") == 0 && hlt_now_ms() < end) hlt_sleep_ms(2);
    rep = hlt_cmd(R, "PTTL {wake:key}:waiters");
    cr_assert(rep && rep->type == REDIS_REPLY_INTEGER);
    pttl = rep->integer;
    freeReplyObject(rep);
    cr_log_info("%s: the first mark lives %lld ms", hlt_server_name(), pttl);
    if (hlt_server_version() < 60000)
        cr_assert_gt(pttl, 1000, "the mark (%lld ms) ends before the one-second block", pttl);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    pthread_join(t, NULL);
    cr_assert_eq(w.st, HILOCK_OK, "%s", hilock_client_errmsg(w.c));
    cr_assert_eq(hilock_release(w.l), HILOCK_OK);
    cr_assert_eq(hlt_exists(R, "wake:key"), 0);
    hilock_free(l);
    hilock_free(w.l);
    hilock_client_free(h);
    hilock_client_free(w.c);
}

/* ---- AUTH: before 6.0 a wrong password says "ERR invalid password" ---- */

Test(servers, a_wrong_password_is_eauth_on_every_server)
{
    hlt_redis *s = hlt_redis_started("--requirepass s3cret");
    char url[300];
    hilock_client *c;
    hilock *l = NULL;
    hilock_status st;
    snprintf(url, sizeof url, "redis://:wrong@127.0.0.1:%d", s->port);
    hilock_options o = hlt_options((const char *[]){ url }, 1);
    o.retry_delay_ms = 10;
    o.fencing = 0;
    c = hlt_client_new(&o);
    st = hilock_acquire(c, "auth:key", 10000, 0, &l);
    cr_assert_eq(st, HILOCK_EAUTH, "%s: %s", hilock_strerror(st), hilock_client_errmsg(c));
    cr_assert_null(l);
    cr_assert(strstr(hilock_client_errmsg(c), "127.0.0.1:"), "%s", hilock_client_errmsg(c));
    hilock_client_free(c);
    {   /* nothing written (read back with the right password) */
        redisReply *r = hlt_cmd(s, "AUTH s3cret");
        freeReplyObject(r);
        cr_assert_eq(hlt_exists(s, "auth:key"), 0);
    }
    hlt_redis_stop(s);
}

/* A user name in the URL (AUTH user password) on a server before 6.0, which has no users:
 * EAUTH saying so, not "wrong number of arguments". */
Test(servers, a_user_name_before_6_0_is_eauth_saying_the_server_has_no_users)
{
    hlt_redis *s = hlt_redis_started("--requirepass s3cret");
    char url[300];
    hilock_client *c;
    hilock *l = NULL;
    hilock_status st;
    snprintf(url, sizeof url, "redis://default:s3cret@127.0.0.1:%d", s->port);
    hilock_options o = hlt_options((const char *[]){ url }, 1);
    o.retry_delay_ms = 10;
    o.fencing = 0;
    c = hlt_client_new(&o);
    st = hilock_acquire(c, "auth:key", 10000, 0, &l);
    if (hlt_server_version() >= 60000) {   /* the default user */
        cr_assert_eq(st, HILOCK_OK, "%s", hilock_client_errmsg(c));
        cr_assert_eq(hilock_release(l), HILOCK_OK);
        hilock_free(l);
    } else {
        cr_assert_eq(st, HILOCK_EAUTH, "%s: %s", hilock_strerror(st), hilock_client_errmsg(c));
        cr_assert(strstr(hilock_client_errmsg(c), "a user name in the URL needs Redis >= 6.0"), "%s",
                  hilock_client_errmsg(c));
    }
    hilock_client_free(c);
    hlt_redis_stop(s);
}

/* ---- an error reply after a possible write is undone by token ---- */

/* A proxy in front of a real server: every command goes through unchanged, but a lock
 * script's call (acquire, legacy_acquire, fair) runs the whole script -- its writes land --
 * and then answers an error, as a script failing after its first write does (before 5.0:
 * a write after TIME; an ACL refusing its second key; a bug). A child process on 127.0.0.1,
 * one more child per connection; killed with the test. */
typedef struct errproxy {
    pid_t pid;
    int   port;
    char  url[64];
    char  name[64];
} errproxy;

static const hl_script *const lock_scripts[] = { &hl_lua_acquire, &hl_lua_legacy_acquire, &hl_lua_fair };

/* The command to send for a client's request: a lock script's call becomes EVAL of its body
 * run to the end, then an error. Returns the formatted command (free with redisFreeCommand). */
static int reframe(const redisReply *req, char **out)
{
    const char *argv[32];
    size_t len[32];
    static char body[65536];
    int argc = (int)req->elements;
    if (argc > 32) argc = 32;
    for (int i = 0; i < argc; i++) {
        argv[i] = req->element[i]->str;
        len[i] = req->element[i]->len;
    }
    if (argc >= 2 && (!strcasecmp(argv[0], "EVALSHA") || !strcasecmp(argv[0], "EVAL")))
        for (size_t k = 0; k < sizeof lock_scripts / sizeof *lock_scripts; k++) {
            const hl_script *sc = lock_scripts[k];
            if ((len[1] != 40 || memcmp(argv[1], sc->sha, 40)) &&
                (len[1] != sc->len || memcmp(argv[1], sc->body, sc->len)))
                continue;
            snprintf(body, sizeof body, "local r = (function()\n%s\nend)()\n"
                     "return redis.error_reply('ERR injected: the script failed after its writes')", sc->body);
            argv[0] = "EVAL";
            len[0] = 4;
            argv[1] = body;
            len[1] = strlen(body);
        }
    return redisFormatCommandArgv(out, argc, argv, len);
}

static void errproxy_conn(int cfd, void *arg)
{
    int sfd = hlt_connect_port(((const hlt_redis *)arg)->port);
    redisReader *rd = redisReaderCreate();
    if (sfd < 0 || !rd) _exit(1);
    for (;;) {
        struct pollfd pf[2] = { { cfd, POLLIN, 0 }, { sfd, POLLIN, 0 } };
        char buf[65536];
        ssize_t n;
        if (poll(pf, 2, -1) < 0) continue;
        if (pf[1].revents) {   /* the server's replies: as they are */
            if ((n = recv(sfd, buf, sizeof buf, 0)) <= 0 || hlt_send_all(cfd, buf, (size_t)n) < 0) _exit(0);
        }
        if (pf[0].revents) {
            void *req;
            if ((n = recv(cfd, buf, sizeof buf, 0)) <= 0) _exit(0);
            redisReaderFeed(rd, buf, (size_t)n);
            while (redisReaderGetReply(rd, &req) == REDIS_OK && req) {
                char *cmd;
                int len = reframe(req, &cmd);
                freeReplyObject(req);
                if (len < 0 || hlt_send_all(sfd, cmd, (size_t)len) < 0) _exit(1);
                redisFreeCommand(cmd);
            }
        }
    }
}

static errproxy errproxy_start(const hlt_redis *r)
{
    errproxy x;
    int ls;
    memset(&x, 0, sizeof x);
    ls = hlt_listen(16, &x.port, x.url, x.name, sizeof x.url);
    cr_assert(ls >= 0);
    x.pid = hlt_serve_fork(ls, 0, errproxy_conn, (void *)r);
    return x;
}

static void errproxy_stop(errproxy *x) { hlt_serve_stop(x->pid); }

/* The key after a failed acquire: no value of ours left (the undo ran at once, by token). */
static void assert_undone(hilock_client *c, hilock_status st, const hilock *l, const char *key)
{
    cr_assert_eq(st, HILOCK_EREPLY, "%s: %s", hilock_strerror(st), hilock_client_errmsg(c));
    cr_assert_null(l);
    cr_assert(strstr(hilock_client_errmsg(c), "injected"), "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_exists(R, key), 0, "the lock's key was left for its ttl (%lld ms)", hlt_pttl(R, key));
}

static void set_legacy_safe(hilock_options *o) { (void)o; }

Test(servers, an_error_reply_after_the_scripts_write_is_undone_by_token)
{
    errproxy x = errproxy_start(R);
    hilock *l = NULL;
    hilock_options o = hlt_options((const char *[]){ x.url }, 1);
    o.retry_delay_ms = 10;
    hilock_client *c = hlt_client_new(&o);
    hilock_status st = hilock_acquire(c, "err:modern", 30000, 0, &l);
    assert_undone(c, st, l, "err:modern");
    hilock_client_free(c);
    hilock_options o2 = hlt_options((const char *[]){ x.url }, 1);
    o2.retry_delay_ms = 10;
    set_fair(&o2);
    c = hlt_client_new(&o2);   /* fair.lua (3.2+) */
    if (hlt_server_version() >= 30200) {
        st = hilock_acquire(c, "err:fair", 30000, 0, &l);
        assert_undone(c, st, l, "err:fair");
    }
    hilock_client_free(c);
    hilock_options o3 = hlt_options((const char *[]){ x.url }, 1);
    o3.retry_delay_ms = 10;
    set_legacy_safe(&o3);
    c = hlt_client_new(&o3);   /* legacy_acquire.lua */
    st = hilock_legacy_acquire(c, "err:legacy", 30000, 0, &l);
    assert_undone(c, st, l, "err:legacy");
    hilock_client_free(c);
    errproxy_stop(&x);
}

static void on_done(hilock_status st, hilock *l, void *arg)
{
    sleeper *s = arg;
    s->st = st;
    s->l = l;
    s->at_ms = 1;
}

/* The same on an event loop: the acquire's flow runs there unchanged. */
Test(servers, an_error_reply_after_the_scripts_write_is_undone_by_token_on_a_loop)
{
    errproxy x = errproxy_start(R);
    uv_loop_t loop;
    sleeper s = { 0 };
    long long end;
    hilock_options o = hlt_options((const char *[]){ x.url }, 1);
    o.retry_delay_ms = 10;
    hilock_client *c = hlt_client_new(&o);
    uv_loop_init(&loop);
    cr_assert_eq(hilock_libuv_attach(c, &loop), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_acquire_async(c, "err:loop", 30000, 0, on_done, &s), HILOCK_OK);
    end = hlt_now_ms() + 10000;
    while (!s.at_ms && hlt_now_ms() < end) uv_run(&loop, UV_RUN_NOWAIT), hlt_sleep_ms(1);
    cr_assert(s.at_ms, "the acquire never ended");
    s.c = c;
    assert_undone(c, s.st, s.l, "err:loop");
    hilock_client_free(c);
    uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_eq(uv_loop_close(&loop), 0);
    errproxy_stop(&x);
}

/* The gates hold on an event loop too (the loop's connections run the same handshake). */
Test(servers, a_feature_the_server_lacks_is_refused_on_a_loop_too)
{
    uv_loop_t loop;
    sleeper s = { 0 };
    long long end;
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    set_fair(&o);
    hilock_client *c = hlt_client_new(&o);
    uv_loop_init(&loop);
    cr_assert_eq(hilock_libuv_attach(c, &loop), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_acquire_async(c, "loop:fair", 30000, 0, on_done, &s), HILOCK_OK);
    end = hlt_now_ms() + 10000;
    while (!s.at_ms && hlt_now_ms() < end) uv_run(&loop, UV_RUN_NOWAIT), hlt_sleep_ms(1);
    cr_assert(s.at_ms, "the acquire never ended");
    if (hlt_server_version() < 30200) {
        assert_refused(c, s.st, s.l, "fair locks need Redis >= 3.2: ");
    } else {
        cr_assert_eq(s.st, HILOCK_OK, "%s", hilock_client_errmsg(c));
        cr_assert_eq(hlt_exists(R, "loop:fair"), 1);
        hilock_free(s.l);
    }
    hilock_client_free(c);
    uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_eq(uv_loop_close(&loop), 0);
}

/* ---- inventory and inspect: SCAN exists from 2.8; the scripts' no-writes flag from 7.0 ---- */

static void count_key(size_t master, const hilock_key_view *k, void *arg)
{
    (void)master;
    if (!strcmp(k->key, "inv:key") && !strcmp(k->type, "string") && k->pttl_ms > 0) ++*(int *)arg;
}

static void seen_lock(size_t master, const hilock_lock_view *v, const char *error, void *arg)
{
    (void)master;
    cr_assert_not_null(v, "%s", error);
    if (!strcmp(v->key.type, "string") && v->key.pttl_ms > 0 && v->fence > 0) ++*(int *)arg;
}

Test(servers, inventory_and_inspect_work_on_every_server)
{
    hilock_options o = hlt_options((const char *[]){ R->url }, 1);
    o.retry_delay_ms = 10;
    hilock_options o2 = hlt_options((const char *[]){ R->url }, 1);
    o2.retry_delay_ms = 10;
    o2.fencing = 0;
    hilock_client *c = hlt_client_new(&o), *u = hlt_client_new(&o2);
    hilock *l = NULL;
    uint64_t cur = 0;
    int found = 0, inspected = 0, rounds = 0;
    redisReply *x = hlt_cmd(R, "SET {inv:key}:fence 7 PX 60000");   /* (a fence, any server) */
    freeReplyObject(x);
    cr_assert_eq(hilock_acquire(u, "inv:key", 30000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(u));
    do {
        cr_assert_eq(hilock_scan(c, 0, "inv:*", 100, &cur, count_key, &found), HILOCK_OK, "%s",
                     hilock_client_errmsg(c));
    } while (cur && ++rounds < 1000);
    cr_assert_eq(found, 1);
    cr_assert_eq(hilock_inspect(c, "inv:key", seen_lock, &inspected), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(inspected, 1);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    hilock_client_free(u);
}

/* An ACL user without @dangerous cannot run INFO. COMMAND INFO's shape still tells 7.0+
 * (the "#!lua" form) from 6.x (plain scripts: 6.x given "#!lua" said "Error compiling
 * script", so inspect failed); a user refused that too leaves the version unknown: every
 * portable form. Nothing is refused on either's account (a fence, on any server). */
static void without_info(const char *user, const char *acl, int shape)
{
    char url[300], cmd[300];
    hilock_client *c, *u;
    hilock *l = NULL;
    int inspected = 0, v = hlt_server_version(), modern = v >= 70000 || hlt_server_is_valkey();
    redisReply *rep;
    snprintf(cmd, sizeof cmd, "ACL SETUSER %s on >pw ~* %s+@all %s", user, v >= 60200 ? "&* " : "", acl);
    rep = hlt_cmd(R, cmd);
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS, "%s", cmd);
    freeReplyObject(rep);
    snprintf(url, sizeof url, "redis://%s:pw@127.0.0.1:%d", user, R->port);
    hilock_options o = hlt_options((const char *[]){ url }, 1);
    o.retry_delay_ms = 10;
    c = hlt_client_new(&o);
    u = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(u, "acl:key", 30000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(u));
    cr_assert_eq(hl_node_version(&u->nodes[0]), !shape ? 0 : modern ? 70000 : 60000, "%s: %d", user,
                 hl_node_version(&u->nodes[0]));
    cr_assert_eq(hl_node_has(&u->nodes[0], HL_CAP_SHEBANG), shape && modern, "%s", user);
    cr_assert_not(hl_node_has(&u->nodes[0], HL_CAP_LPOS) && !modern);
    cr_assert_eq(hl_node_has(&u->nodes[0], HL_CAP_FLOAT_TIMEOUT), shape);
    cr_assert(hl_node_has(&u->nodes[0], HL_CAP_FAIR), "nothing refused on its account");
    cr_assert(hl_node_has(&u->nodes[0], HL_CAP_WAIT));
    cr_assert_eq(hilock_inspect(c, "acl:key", seen_lock, &inspected), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(inspected, 1);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(u));
    hilock_free(l);
    rep = hlt_cmd(R, "EXISTS acl:key");
    cr_assert(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 0, "released");
    freeReplyObject(rep);
    hilock_client_free(c);
    hilock_client_free(u);
}

Test(servers, a_user_without_info_gets_the_forms_its_server_shows_and_inspect_works)
{
    HLT_NEEDS(60000, "no ACL users");
    without_info("locker", "-@dangerous", 1);
    without_info("blind", "-@dangerous -command", 0);
}
