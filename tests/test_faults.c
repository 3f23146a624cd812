/* SPDX-License-Identifier: BSD-3-Clause */
/* test_faults.c -- servers that refuse, stop, restart, freeze or want a password: every call
 * returns a clear status within its bound, names the server, and the client recovers. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checks.h"
#include "clients.h"
#include "fakes.h"
#include "fixture.h"
#include "hilock.h"

TestSuite(faults, .timeout = 30);

/* io_timeout_ms against a frozen server: short, yet enough for a first round trip (connect,
 * NOSCRIPT, EVAL) under valgrind. Bounds asserted are generous multiples of it. */
#define FREEZE_IO_MS 300

static void assert_names(hilock_client *c, const char *server, const char *why)
{
    const char *m = hilock_client_errmsg(c);
    cr_assert(strstr(m, server), "errmsg '%s' does not name %s", m, server);
    if (why) cr_assert(strstr(m, why), "errmsg '%s' does not say '%s'", m, why);
}

static void tcp_name(const hlt_redis *r, char *buf, size_t n) { snprintf(buf, n, "127.0.0.1:%d", r->port); }

/* ---- nobody there ---- */

Test(faults, connection_refused_is_eio_and_names_the_server)
{
    char url[64], name[64];
    int port = hlt_dead_port();
    hilock_client *c;
    hilock *l = (hilock *)&l;
    long long t0;
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    snprintf(name, sizeof name, "127.0.0.1:%d", port);
    c = hlt_client(url);
    t0 = hlt_now_ms();
    cr_assert_eq(hilock_acquire(c, "k", 5000, 0, &l), HILOCK_EIO);
    cr_assert_lt(hlt_now_ms() - t0, 2000);
    cr_assert_null(l);
    assert_names(c, name, "refused");
    /* with a wait: retried until the deadline, then the error (not BUSY) */
    t0 = hlt_now_ms();
    cr_assert_eq(hilock_acquire(c, "k", 5000, 300, &l), HILOCK_EIO);
    cr_assert_lt(hlt_now_ms() - t0, 3000);
    assert_names(c, name, "refused");
    hilock_client_free(c);
}

Test(faults, a_missing_unix_socket_is_eio_and_names_the_path)
{
    hilock_client *c = hlt_client("unix:///tmp/hilock-no-such-dir/redis.sock");
    hilock *l = NULL;
    cr_assert_eq(hilock_acquire(c, "k", 5000, 0, &l), HILOCK_EIO);
    assert_names(c, "/tmp/hilock-no-such-dir/redis.sock", NULL);
    hilock_client_free(c);
}

Test(faults, wait_forever_on_a_dead_server_returns_the_error)
{
    char url[64];
    hilock_client *c;
    hilock *l = NULL;
    long long t0;
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", hlt_dead_port());
    c = hlt_client(url);
    t0 = hlt_now_ms();
    cr_assert_eq(hilock_acquire(c, "k", 5000, HILOCK_WAIT_FOREVER, &l), HILOCK_EIO);
    cr_assert_lt(hlt_now_ms() - t0, 3000, "waiting forever is for the lock, not for a dead server");
    hilock_client_free(c);
}

/* ---- authentication ---- */

static void assert_auth(const char *url, hlt_redis *r, int db, const char *key, hilock_status want)
{
    hilock_client *c = hlt_client(url);
    hilock *l = NULL;
    char name[64];
    hilock_status st = hilock_acquire(c, key, 5000, 0, &l);
    freeReplyObject(hlt_cmd(r, "SELECT %d", db));
    cr_assert_eq(st, want, "%s: %s (%s)", key, hilock_strerror(st), hilock_client_errmsg(c));
    if (want == HILOCK_OK) {
        char *v = hlt_get(r, key);
        cr_assert(v && !strcmp(v, hilock_token(l)));
        free(v);
        cr_assert_eq(hilock_release(l), HILOCK_OK);
        hilock_free(l);
    } else {
        tcp_name(r, name, sizeof name);
        assert_names(c, name, NULL);
        cr_assert_eq(hlt_exists(r, key), 0, "refused, yet %s was written", key);
    }
    hilock_client_free(c);
}

Test(faults, requirepass_right_wrong_and_missing_password)
{
    hlt_redis *r = hlt_redis_started("--requirepass s3cret");
    char url[300];
    snprintf(url, sizeof url, "redis://:s3cret@127.0.0.1:%d", r->port);
    assert_auth(url, r, 0, "ok", HILOCK_OK);
    snprintf(url, sizeof url, "redis://:wrong@127.0.0.1:%d", r->port);
    assert_auth(url, r, 0, "wrong", HILOCK_EAUTH);
    assert_auth(r->url, r, 0, "none", HILOCK_EAUTH);
    snprintf(url, sizeof url, "unix://:s3cret@%s?db=2", r->sock);
    assert_auth(url, r, 2, "unix", HILOCK_OK);
    /* in db 0: the fence counter of 'ok' and its client's holder record (a grant keeps it
     * 2 x ttl: acquire.lua), nothing of the refused ones */
    freeReplyObject(hlt_cmd(r, "SELECT 0"));
    cr_assert_eq(hlt_dbsize(r), 2, "only the fence counter and holder record of 'ok' are left in db 0");
    cr_assert_eq(hlt_exists(r, "{ok}:holder"), 1);
    hlt_redis_stop(r);
}

Test(faults, a_password_for_a_server_without_one_is_eauth)
{
    hlt_redis *r = hlt_redis_started(NULL);
    char url[300];
    snprintf(url, sizeof url, "redis://:s3cret@127.0.0.1:%d", r->port);
    assert_auth(url, r, 0, "k", HILOCK_EAUTH);
    hlt_redis_stop(r);
}

Test(faults, acl_users_are_authenticated_and_their_key_rules_apply)
{
    hlt_redis *r;
    redisReply *rep;
    char url[300];
    HLT_NEEDS(60000, "no ACL users before 6.0");
    r = hlt_redis_started(NULL);
    rep = hlt_cmd(r, "ACL SETUSER alice on >wonderland ~* +@all");
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    /* a user who may only touch locks:* and their fence keys */
    rep = hlt_cmd(r, "ACL SETUSER bob on >p@ss:w/rd ~locks:* ~{locks:* +@all");
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    snprintf(url, sizeof url, "redis://alice:wonderland@127.0.0.1:%d", r->port);
    assert_auth(url, r, 0, "k", HILOCK_OK);
    snprintf(url, sizeof url, "redis://alice:wrong@127.0.0.1:%d", r->port);
    assert_auth(url, r, 0, "k2", HILOCK_EAUTH);
    snprintf(url, sizeof url, "redis://nobody:wonderland@127.0.0.1:%d", r->port);
    assert_auth(url, r, 0, "k3", HILOCK_EAUTH);
    /* percent-escapes in the password are decoded */
    snprintf(url, sizeof url, "redis://bob:p%%40ss%%3Aw%%2Frd@127.0.0.1:%d", r->port);
    assert_auth(url, r, 0, "locks:a", HILOCK_OK);
    assert_auth(url, r, 0, "elsewhere", HILOCK_EAUTH);
    hlt_redis_stop(r);
}

/* ---- the server goes away ---- */

Test(faults, server_stopped_mid_session_is_eio_then_recovers)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *l, *m = NULL;
    hilock_status st;
    char name[64];
    long long t0;
    tcp_name(r, name, sizeof name);
    c = hlt_client(r->url);
    cr_assert_eq(hilock_acquire(c, "k", 30000, 0, &l), HILOCK_OK);
    hlt_redis_kill(r);
    t0 = hlt_now_ms();
    cr_assert_eq(hilock_extend(l, 30000), HILOCK_EIO);
    assert_names(c, name, NULL);
    cr_assert_gt(hilock_validity_ms(l), 20000, "an error keeps the old validity");
    cr_assert_eq(hilock_check(l), HILOCK_EIO);
    assert_names(c, name, NULL);
    cr_assert_eq(hilock_release(l), HILOCK_EIO);
    assert_names(c, name, NULL);
    cr_assert_eq(hilock_acquire(c, "other", 5000, 0, &m), HILOCK_EIO);
    assert_names(c, name, NULL);
    cr_assert_lt(hlt_now_ms() - t0, 3000);
    cr_assert_eq(hlt_redis_restart(r), 0);
    cr_assert_eq(hilock_acquire(c, "other", 5000, 0, &m), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_str_eq(hilock_client_errmsg(c), "");
    /* the restarted server kept nothing (no persistence): the old lock is gone; as a release
     * was tried while it was valid, OK (it may have landed) and NOT_HELD are both right */
    st = hilock_release(l);
    cr_assert(st == HILOCK_OK || st == HILOCK_NOT_HELD, "%s", hilock_strerror(st));
    cr_assert_eq(hlt_exists(r, "k"), 0);
    hilock_free(l);
    hlt_release_gone(r, c, m, "other");
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(faults, a_restart_between_two_calls_is_not_an_error)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *l, *m = NULL;
    c = hlt_client(r->url);
    cr_assert_eq(hilock_acquire(c, "k", 30000, 0, &l), HILOCK_OK);
    cr_assert_eq(hlt_redis_restart(r), 0);
    hlt_sleep_ms(300);   /* the engine probes connections idle >= 250 ms before using them */
    hilock_free(l);      /* (gone with the restart; a live handle would refuse the key: not re-entrant) */
    /* the idle connection is dead; nothing was sent on it, so the next call reconnects */
    cr_assert_eq(hilock_acquire(c, "k", 5000, 0, &m), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(m), HILOCK_OK);
    hilock_free(m);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(faults, a_connection_the_server_closed_is_reconnected)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *l;
    redisReply *rep;
    c = hlt_client(r->url);
    cr_assert_eq(hilock_acquire(c, "k", 30000, 0, &l), HILOCK_OK);
    /* as the server's `timeout` setting does to idle clients */
    rep = hlt_cmd(r, "CLIENT KILL TYPE normal SKIPME yes");
    cr_assert(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 1);
    freeReplyObject(rep);
    hlt_sleep_ms(300);   /* idle, as `timeout` requires (>= 1 s); the engine probes idle connections */
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_extend(l, 30000), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_release_gone(r, c, l, "k");
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(faults, the_script_cache_is_refilled_after_a_restart)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *l;
    c = hlt_client(r->url);
    cr_assert_eq(hilock_acquire(c, "k", 30000, 0, &l), HILOCK_OK);
    hilock_free(l);
    cr_assert_eq(hlt_redis_restart(r), 0);
    cr_assert_eq(hilock_acquire(c, "k", 30000, 1000, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_redis_restart(r), 0);
    hilock_check(l);   /* whatever it says, the connection is fresh afterwards */
    freeReplyObject(hlt_cmd(r, "SET k %s PX 30000", hilock_token(l)));
    cr_assert_eq(hilock_extend(l, 20000), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_release_gone(r, c, l, "k");
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* ---- the server freezes (SIGSTOP) ---- */

Test(faults, a_frozen_server_times_out_within_the_bound_then_recovers)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *l, *m = NULL;
    char name[64];
    long long t0, dt;
    int64_t v;
    tcp_name(r, name, sizeof name);
    hilock_options o = hlt_options((const char *[]){ r->url }, 1);
    o.io_timeout_ms = o.connect_timeout_ms = FREEZE_IO_MS;
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "k", 30000, 3000, &l), HILOCK_OK);
    hlt_redis_freeze(r);

    t0 = hlt_now_ms();
    v = hilock_validity_ms(l);
    cr_assert_eq(hilock_extend(l, 60000), HILOCK_ETIMEDOUT);
    dt = hlt_now_ms() - t0;
    cr_assert_lt(dt, 3000, "extend took %lld ms", dt);
    assert_names(c, name, "timed out");
    cr_assert_leq(hilock_validity_ms(l), v, "a failed extend must not add validity");
    cr_assert_gt(hilock_validity_ms(l), 0);

    t0 = hlt_now_ms();
    cr_assert_eq(hilock_check(l), HILOCK_ETIMEDOUT);
    cr_assert_lt(hlt_now_ms() - t0, 3000);
    t0 = hlt_now_ms();
    cr_assert_eq(hilock_acquire(c, "other", 5000, 0, &m), HILOCK_ETIMEDOUT);
    cr_assert_null(m);
    cr_assert_lt(hlt_now_ms() - t0, 3000);
    t0 = hlt_now_ms();
    cr_assert_eq(hilock_acquire(c, "other", 5000, 400, &m), HILOCK_ETIMEDOUT);
    dt = hlt_now_ms() - t0;
    cr_assert_lt(dt, 3500, "a 400 ms wait took %lld ms", dt);

    hlt_redis_thaw(r);
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_release_gone(r, c, l, "k");
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(faults, an_acquire_that_timed_out_is_undone_on_the_next_contact)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *l = NULL;
    long long end;
    hilock_options o = hlt_options((const char *[]){ r->url }, 1);
    o.io_timeout_ms = o.connect_timeout_ms = FREEZE_IO_MS;
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "warmup", 5000, 3000, &l), HILOCK_OK);
    hilock_free(l);
    hlt_redis_freeze(r);
    cr_assert_eq(hilock_acquire(c, "k", 30000, 0, &l), HILOCK_ETIMEDOUT);
    cr_assert_null(l);
    hlt_redis_thaw(r);
    /* the server still runs the command it had buffered: the write lands after the timeout */
    end = hlt_now_ms() + 3000;
    while (hlt_exists(r, "k") != 1 && hlt_now_ms() < end) hlt_sleep_ms(10);
    cr_assert_eq(hlt_exists(r, "k"), 1, "the buffered SET never ran");
    /* the next call on this client first deletes it, by token */
    cr_assert_eq(hilock_acquire(c, "k", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_release_gone(r, NULL, l, "k");
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* ---- issue 21, item 1: a retry's grant can never be deleted by an earlier attempt's undo ---- */

/* What MONITOR saw of one key's acquires and undos, in the server's order. */
typedef struct seen {
    hlt_redis *r;
    const char *key;
    int n;
    int on;                /* MONITOR answered (atomic) */
    int undo[16];          /* 1: release.lua (EVAL, one key), 0: an acquire */
    char token[16][33];
} seen;

/* The 32-hex-digit argument of a MONITOR line, or NULL. */
static const char *hex_arg(const char *line, char *out)
{
    for (const char *p = strchr(line, '"'); p; p = strchr(p + 1, '"')) {
        size_t k = 0;
        while (k < 33 && strchr("0123456789abcdef", p[1 + k]) && p[1 + k]) k++;
        if (k == 32 && p[33] == '"') {
            memcpy(out, p + 1, 32);
            out[32] = '\0';
            return out;
        }
    }
    return NULL;
}

static void *monitor_key(void *arg)
{
    seen *w = arg;
    redisContext *m = redisConnect("127.0.0.1", w->r->port);
    redisReply *rep = m && !m->err ? redisCommand(m, "MONITOR") : NULL;
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\"", w->key);
    if (rep && rep->type == REDIS_REPLY_STATUS) __atomic_store_n(&w->on, 1, __ATOMIC_SEQ_CST);
    freeReplyObject(rep);
    while (m && !m->err && redisGetReply(m, (void **)&rep) == REDIS_OK) {
        const char *line = rep->str ? rep->str : "";
        int end = strstr(line, "\"monitor-end\"") != NULL;
        if (strstr(line, quoted) && w->n < 16 && hex_arg(line, w->token[w->n]))
            w->undo[w->n++] = strstr(line, "\"EVAL\"") && !strstr(line, ":fence\"");
        freeReplyObject(rep);
        if (end) break;
    }
    if (m) redisFree(m);
    return NULL;
}

/* Well after the first attempt's io timeout: a thaw 30 ms after it (as this was) let a thread
 * that woke late from its poll read the answer, and the first attempt was the grant. */
static void *thaw_later(void *arg)
{
    hlt_sleep_ms(3 * FREEZE_IO_MS);
    hlt_redis_thaw(arg);
    return NULL;
}

/* One acquire whose first attempts are written to a frozen server and time out; the server
 * runs them on waking, while the next retry (after a pause) is on its way. fair: the fair kind,
 * whose queue entry is named after the token. */
static void retry_after_written_timeout(int fair)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_options o;
    hilock_client *c = NULL, *other;
    hilock *l = NULL, *m = NULL;
    seen w;
    pthread_t mon, thaw;
    const char *url;
    char *v;
    int acquires = 0;
    cr_assert_not_null(r);
    url = r->url;
    o = hlt_options(&url, 1);
    o.io_timeout_ms = o.connect_timeout_ms = FREEZE_IO_MS;
    o.retry_delay_ms = 20;
    o.fair = fair;
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "warmup", 5000, 3000, &l), HILOCK_OK);   /* connected */
    hilock_free(l);
    memset(&w, 0, sizeof w);
    w.r = r;
    w.key = "retried";
    cr_assert_eq(pthread_create(&mon, NULL, monitor_key, &w), 0);
    for (long long end = hlt_now_ms() + 5000; !__atomic_load_n(&w.on, __ATOMIC_SEQ_CST);)
        if (hlt_now_ms() > end) cr_assert_fail("MONITOR did not start");
        else hlt_sleep_ms(5);
    hlt_redis_freeze(r);
    cr_assert_eq(pthread_create(&thaw, NULL, thaw_later, r), 0);
    cr_assert_eq(hilock_acquire(c, "retried", 20000, 5000, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    pthread_join(thaw, NULL);
    /* later calls on the client carry whatever undos are left */
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(hilock_acquire(c, "flush", 1000, 0, &m), HILOCK_OK, "%s", hilock_client_errmsg(c));
        cr_assert_eq(hilock_release(m), HILOCK_OK);
        hilock_free(m);
    }
    freeReplyObject(hlt_cmd(r, "ECHO monitor-end"));
    pthread_join(mon, NULL);

    v = hlt_get(r, "retried");
    cr_assert(v && !strcmp(v, hilock_token(l)), "the key holds %s, not the grant's token %s",
              v ? v : "nothing", hilock_token(l));
    free(v);
    other = hlt_client(r->url);
    cr_assert_eq(hilock_acquire(other, "retried", 20000, 0, &m), HILOCK_BUSY, "a second client got the lock");
    for (int i = 0; i < w.n; i++) {
        acquires += !w.undo[i];
        cr_assert(!w.undo[i] || strcmp(w.token[i], hilock_token(l)),
                  "an undo of the granted token ran (step %d of %d)", i, w.n);
    }
    printf("faults: %s retry after a written timeout: %d acquire(s) and %d undo(s) of the key "
           "seen, first token %.8s, granted %.8s\n", fair ? "fair" : "modern", acquires,
           w.n - acquires, w.n ? w.token[0] : "-", hilock_token(l));
    cr_assert_geq(acquires, 2, "the first attempt did not reach the server (%d acquires)", acquires);
    cr_assert(strcmp(w.token[0], hilock_token(l)), "the retry reused the timed-out attempt's token");
    if (fair) {   /* the old token left the queue (no waiter is stuck behind it) */
        redisReply *q = hlt_cmd(r, "LRANGE {retried}:fq 0 -1");
        cr_assert_not_null(q);
        for (size_t i = 0; i < q->elements; i++)
            cr_assert(strcmp(q->element[i]->str, w.token[0]), "the old token is still queued");
        freeReplyObject(q);
    }
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    hilock_client_free(other);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(faults, a_retry_after_a_written_timeout_takes_a_new_token_its_old_undo_cannot_match)
{
    retry_after_written_timeout(0);
}

Test(faults, a_fair_retry_after_a_written_timeout_takes_a_new_token_and_leaves_the_old_entry)
{
    HLT_NEEDS(30200, "fair locks need Redis 3.2+ (redis.replicate_commands)");
    retry_after_written_timeout(1);
}

Test(faults, a_release_that_timed_out_can_be_retried)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *l;
    hilock_status st;
    hilock_options o = hlt_options((const char *[]){ r->url }, 1);
    o.io_timeout_ms = o.connect_timeout_ms = FREEZE_IO_MS;
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "k", 30000, 3000, &l), HILOCK_OK);
    hlt_redis_freeze(r);
    cr_assert_eq(hilock_release(l), HILOCK_ETIMEDOUT);
    hlt_redis_thaw(r);
    /* the first release may have run after all: either answer is right, the key is gone */
    st = hilock_release(l);
    cr_assert(st == HILOCK_OK || st == HILOCK_NOT_HELD, "%s", hilock_strerror(st));
    cr_assert_eq(hlt_exists(r, "k"), 0);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(faults, a_unix_socket_restarted_right_after_a_call_is_reopened_at_once)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *l, *m = NULL;
    c = hlt_client(r->unix_url);
    cr_assert_eq(hilock_acquire(c, "k", 30000, 0, &l), HILOCK_OK);
    cr_assert_eq(hlt_redis_restart(r), 0);
    hilock_free(l);   /* (gone with the restart; a live handle would refuse the key: not re-entrant) */
    /* no idle pause, so no probe: the old socket refuses the first write (EPIPE), nothing was
     * delivered, and the engine sends again on a new connection */
    cr_assert_eq(hilock_acquire(c, "k", 5000, 0, &m), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_exists(r, "k"), 1);
    hlt_release_gone(r, NULL, m, "k");
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* ---- the failover check's round trip stalls (failover_guard = 1) ----
 * A proxy in front of a real server forwards every command, but holds back failover.lua (the
 * slow path: EVALSHA/EVAL whose first key is the record, hilock:guard) while its flag file
 * exists: the pipeline before it is answered, the slow path's round trip never is. The flag
 * holds "once" (the first such call only: the flag goes) or "all" (every one, and from the
 * first on, "stopped": every connection opened while the flag exists forwards nothing, as a
 * server that stopped right after the pipeline). */

typedef struct holdproxy {
    pid_t pid;
    int   port;
    char  url[64];
    char  name[64];
    char  flag[192];
    int   server_port;   /* the real server's */
} holdproxy;

/* The length of the first whole command (RESP array of bulk strings) in b[0..n), 0 if it is
 * not all there yet; its argument k at *arg (length *alen) when k < its count (arg: NULL or
 * a place for it). */
static size_t resp_cmd(const char *b, size_t n, int k, const char **arg, size_t *alen)
{
    const char *p = b, *e = b + n, *nl;
    long argc, len;
    if (arg) *arg = NULL;
    if (n < 4 || *p != '*' || !(nl = memchr(p, '\n', n))) return 0;
    argc = atol(p + 1);
    p = nl + 1;
    for (long i = 0; i < argc; i++) {
        if (p >= e || *p != '$' || !(nl = memchr(p, '\n', (size_t)(e - p)))) return 0;
        len = atol(p + 1);
        p = nl + 1;
        if (e - p < len + 2) return 0;
        if (i == k && arg) {
            *arg = p;
            *alen = (size_t)len;
        }
        p += len + 2;
    }
    return (size_t)(p - b);
}

static int is_failover_call(const char *b, size_t n)
{
    const char *a;
    size_t l;
    resp_cmd(b, n, 0, &a, &l);
    if (!a || !((l == 7 && !strncasecmp(a, "EVALSHA", 7)) || (l == 4 && !strncasecmp(a, "EVAL", 4))))
        return 0;
    resp_cmd(b, n, 3, &a, &l);
    return a && l == 12 && !memcmp(a, "hilock:guard", 12);
}

/* "once", "all", "stopped" or "" (no flag). */
static void hold_mode(const holdproxy *h, char *mode, size_t cap)
{
    FILE *f = fopen(h->flag, "r");
    mode[0] = '\0';
    if (f && fgets(mode, (int)cap, f)) mode[strcspn(mode, "\n")] = '\0';
    if (f) fclose(f);
}

static int hold_write(const holdproxy *h, const char *mode)
{
    char tmp[200];
    FILE *f;
    snprintf(tmp, sizeof tmp, "%s.%d", h->flag, (int)getpid());
    if (!(f = fopen(tmp, "w"))) return -1;
    fputs(mode, f);
    fclose(f);
    return rename(tmp, h->flag);   /* (whole, for a reader at the same moment) */
}

static void hold_set(const holdproxy *h, const char *mode) { cr_assert_eq(hold_write(h, mode), 0); }

/* One client connection: forward command by command to the real server. */
static void hold_conn(int cfd, void *arg)
{
    static char in[1 << 20];
    const holdproxy *h = arg;
    char mode[16], buf[65536];
    size_t have = 0;
    int held, sfd = hlt_connect_port(h->server_port);
    if (sfd < 0) _exit(1);
    hold_mode(h, mode, sizeof mode);
    held = !strcmp(mode, "stopped");   /* opened while the server "stands still" */
    for (;;) {
        struct pollfd pf[2] = {{cfd, POLLIN, 0}, {sfd, POLLIN, 0}};
        ssize_t n;
        if (poll(pf, 2, -1) < 0) continue;
        if (pf[1].revents) {
            if ((n = recv(sfd, buf, sizeof buf, 0)) <= 0 || send(cfd, buf, (size_t)n, MSG_NOSIGNAL) != n) _exit(0);
        }
        if (!pf[0].revents) continue;
        if ((n = recv(cfd, in + have, sizeof in - have, 0)) <= 0) _exit(0);
        have += (size_t)n;
        for (size_t len; !held && (len = resp_cmd(in, have, -1, NULL, NULL)) > 0;) {
            if (is_failover_call(in, have)) {
                hold_mode(h, mode, sizeof mode);
                if (!strcmp(mode, "all") || !strcmp(mode, "stopped") ||
                    (!strcmp(mode, "once") && unlink(h->flag) == 0)) {
                    if (!strcmp(mode, "all")) hold_write(h, "stopped");
                    held = 1;
                    break;
                }
            }
            if (send(sfd, in, len, MSG_NOSIGNAL) != (ssize_t)len) _exit(0);
            memmove(in, in + len, have - len);
            have -= len;
        }
        if (held) have = 0;   /* nothing more reaches the server on this connection */
    }
}

static holdproxy hold_start(const hlt_redis *r)
{
    holdproxy h;
    int ls;
    memset(&h, 0, sizeof h);
    ls = hlt_listen(16, &h.port, h.url, h.name, sizeof h.url);
    cr_assert(ls >= 0);
    snprintf(h.flag, sizeof h.flag, "%s/hold", r->dir);
    h.server_port = r->port;
    h.pid = hlt_serve_fork(ls, 60, hold_conn, &h);   /* (&h lives on in the forked children) */
    return h;
}

static void hold_stop(holdproxy *h) { hlt_serve_stop(h->pid); }

/* io 500 ms, connect 100 ms: the bound of a try-lock is 600 ms. */
#define HOLD_IO_MS      500
#define HOLD_CONNECT_MS 100
#define HOLD_BOUND_MS   (HOLD_IO_MS + HOLD_CONNECT_MS)

/* A server behind a hold proxy (its clients: hlt_options's with HOLD_IO_MS, HOLD_CONNECT_MS
 * and the failover guard on, through h->url). */
static void held_open(hlt_redis **r, holdproxy *h)
{
    *r = hlt_redis_start(NULL);
    cr_assert_not_null(*r);
    *h = hold_start(*r);
}

/* l holds "k": its release deletes the key; then c, the proxy and the server are gone. */
static void held_close(hlt_redis *r, holdproxy *h, hilock_client *c, hilock *l)
{
    hlt_release_gone(r, c, l, "k");
    hilock_client_free(c);
    hold_stop(h);
    hlt_redis_stop(r);
}

Test(faults, a_failover_check_that_stalls_ends_within_the_bound_as_etimedout)
{
    HLT_NEEDS(40000, "failover_guard needs replication ids (PSYNC2, Redis 4.0+)");
    hlt_redis *r;
    holdproxy h;
    hilock_client *c;
    hilock *l = NULL;
    long long t0, dt;
    hilock_status st;
    char *v;
    held_open(&r, &h);
    hilock_options o = hlt_options((const char *[]){ h.url }, 1);
    o.io_timeout_ms = HOLD_IO_MS;
    o.connect_timeout_ms = HOLD_CONNECT_MS;
    o.failover_guard = 1;
    c = hlt_client_new(&o);
    /* a new server has no record: the first acquire takes the slow path, which stalls, and
     * so does every connection after it (the undo after the refused grant, formerly) */
    hold_set(&h, "all");
    t0 = hlt_now_ms();
    st = hilock_acquire(c, "k", 30000, 0, &l);
    dt = hlt_now_ms() - t0;
    cr_log_info("stalled failover check: %s after %lld ms (bound %d ms)", hilock_strerror(st), dt,
                HOLD_BOUND_MS);
    cr_assert_eq(st, HILOCK_ETIMEDOUT, "%s: %s", hilock_strerror(st), hilock_client_errmsg(c));
    cr_assert_null(l);
    cr_assert_lt(dt, HOLD_BOUND_MS + 300, "took %lld ms, bound %d ms", dt, HOLD_BOUND_MS);
    assert_names(c, h.name, "timed out");
    assert_names(c, h.name, "failover check");
    /* the grant itself landed (our value is there, no record yet) ... */
    v = hlt_get(r, "k");
    cr_assert_not_null(v, "the lock script's grant should have run");
    free(v);
    cr_assert_eq(hlt_exists(r, "hilock:guard"), 0);
    /* ... and the next contact deletes it first: the server answers again, the key is ours */
    unlink(h.flag);
    cr_assert_eq(hilock_acquire(c, "k", 30000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_holds(r, "k", hilock_token(l));
    held_close(r, &h, c, l);
}

Test(faults, a_waiting_acquire_tries_again_after_a_failover_check_timed_out)
{
    HLT_NEEDS(40000, "failover_guard needs replication ids (PSYNC2, Redis 4.0+)");
    hlt_redis *r;
    holdproxy h;
    hilock_client *c;
    hilock *l = NULL;
    long long t0, dt;
    held_open(&r, &h);
    hilock_options o = hlt_options((const char *[]){ h.url }, 1);
    o.io_timeout_ms = HOLD_IO_MS;
    o.connect_timeout_ms = HOLD_CONNECT_MS;
    o.failover_guard = 1;
    c = hlt_client_new(&o);
    hold_set(&h, "once");   /* the first attempt's failover check gets no answer */
    t0 = hlt_now_ms();
    cr_assert_eq(hilock_acquire(c, "k", 30000, 3000, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    dt = hlt_now_ms() - t0;
    cr_log_info("waiting acquire over a stalled failover check: OK after %lld ms", dt);
    cr_assert_geq(dt, HOLD_IO_MS - 50, "the first attempt should have timed out (%lld ms)", dt);
    cr_assert_lt(dt, 3000 + HOLD_BOUND_MS, "took %lld ms", dt);
    cr_assert(access(h.flag, F_OK) != 0, "the stall was never reached");
    hlt_holds(r, "k", hilock_token(l));
    cr_assert_eq(hlt_exists(r, "hilock:guard"), 1, "the failover check ran the second time");
    cr_assert_gt(hilock_validity_ms(l), 25000);
    held_close(r, &h, c, l);
}

Test(faults, an_extend_whose_failover_check_stalls_is_etimedout_not_lost)
{
    HLT_NEEDS(40000, "failover_guard needs replication ids (PSYNC2, Redis 4.0+)");
    hlt_redis *r;
    holdproxy h;
    hilock_client *c;
    hilock *l = NULL;
    long long t0, dt;
    int64_t v0;
    hilock_status st;
    held_open(&r, &h);
    hilock_options o = hlt_options((const char *[]){ h.url }, 1);
    o.io_timeout_ms = HOLD_IO_MS;
    o.connect_timeout_ms = HOLD_CONNECT_MS;
    o.failover_guard = 1;
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "k", 30000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_exists(r, "hilock:guard"), 1);
    /* a ttl above the record's longest: the extend takes the slow path, which stalls */
    hold_set(&h, "once");
    v0 = hilock_validity_ms(l);
    t0 = hlt_now_ms();
    st = hilock_extend(l, 60000);
    dt = hlt_now_ms() - t0;
    cr_log_info("extend over a stalled failover check: %s after %lld ms (bound %d ms)",
                hilock_strerror(st), dt, HOLD_BOUND_MS);
    cr_assert_eq(st, HILOCK_ETIMEDOUT, "%s: %s", hilock_strerror(st), hilock_client_errmsg(c));
    cr_assert(access(h.flag, F_OK) != 0, "the stall was never reached");
    cr_assert_lt(dt, HOLD_BOUND_MS + 300, "took %lld ms", dt);
    assert_names(c, h.name, "failover check");
    /* not lost: the lock keeps (at most) its old validity, and is still ours */
    cr_assert_gt(hilock_validity_ms(l), 0);
    cr_assert_leq(hilock_validity_ms(l), v0);
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_extend(l, 60000), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_gt(hlt_pttl(r, "k"), 30000);
    held_close(r, &h, c, l);
}

Test(faults, redlock_with_every_failover_check_stalled_ends_within_the_bound)
{
    HLT_NEEDS(40000, "failover_guard needs replication ids (PSYNC2, Redis 4.0+)");
    hlt_redis *r[3];
    holdproxy h[3];
    const char *urls[3];
    hilock_client *c;
    hilock *l = NULL;
    long long t0, dt;
    hilock_status st;
    for (int i = 0; i < 3; i++) {
        r[i] = hlt_redis_started(NULL);
        h[i] = hold_start(r[i]);
        urls[i] = h[i].url;
        hold_set(&h[i], "all");
    }
    hilock_options o = hlt_options(urls, 3);
    o.io_timeout_ms = HOLD_IO_MS;
    o.connect_timeout_ms = HOLD_CONNECT_MS;
    o.failover_guard = 1;
    c = hlt_client_new(&o);
    t0 = hlt_now_ms();
    st = hilock_acquire(c, "k", 4000, 0, &l);
    dt = hlt_now_ms() - t0;
    cr_log_info("Redlock, 3 stalled failover checks: %s after %lld ms (bound %d ms)",
                hilock_strerror(st), dt, HOLD_BOUND_MS);
    cr_assert_null(l);
    cr_assert_eq(st, HILOCK_ENOQUORUM, "%s: %s", hilock_strerror(st), hilock_client_errmsg(c));
    cr_assert_lt(dt, HOLD_BOUND_MS + 300, "took %lld ms, bound %d ms", dt, HOLD_BOUND_MS);
    assert_names(c, h[0].name, "failover check");
    /* the masters answer again: the grants left behind go first, then the lock is ours */
    for (int i = 0; i < 3; i++) unlink(h[i].flag);
    cr_assert_eq(hilock_acquire(c, "k", 4000, 2000, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    for (int i = 0; i < 3; i++) hlt_holds(r[i], "k", hilock_token(l));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_free(l);
    hilock_client_free(c);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(hlt_exists(r[i], "k"), 0);
        hold_stop(&h[i]);
        hlt_redis_stop(r[i]);
    }
}
