/* SPDX-License-Identifier: BSD-3-Clause */
/* test_tls.c -- locks over TLS (rediss://), through the public API, against real TLS-only
 * redis-servers (tests/tls_fixture.h); state read back over each server's plain unix socket. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checks.h"
#include "clients.h"
#include "fixture.h"
#include "hilock.h"
#include "tls_fixture.h"

static hlt_pki *pki;

static void setup(void)
{
    signal(SIGPIPE, SIG_DFL);   /* a SIGPIPE would kill the test: none must be raised */
    pki = hlt_pki_make();
    cr_assert_not_null(pki, "could not make the test certificates");
}

static void teardown(void) { hlt_pki_free(pki); }

TestSuite(tls, .init = setup, .fini = teardown, .timeout = 90);

/* A first handshake under valgrind spends seconds of CPU in OpenSSL. */
static long scaled(long ms)
{
    const char *v = getenv("VALGRIND");
    return v && *v == '1' ? ms * 20 : ms;
}

/* hlt_options's, trusting the test CA, with room for the TLS handshake (retry_delay_ms: the
 * library's default, 50). */
static hilock_options tls_opts(const char *const *urls, size_t n)
{
    hilock_options o = hlt_options(urls, n);
    o.retry_delay_ms = 50;
    o.tls_ca_file = pki->ca;
    o.connect_timeout_ms = scaled(2000);
    o.io_timeout_ms = scaled(2000);
    return o;
}

/* The acquire's status and, on failure, that errmsg holds `why`. */
static void acquire_fails(const hilock_options *o, hilock_status want, const char *why)
{
    hilock_client *c = hlt_client_new(o);
    hilock *l = NULL;
    long long t0 = hlt_now_ms();
    hilock_status st = hilock_acquire(c, "tls:k", 10000, 0, &l);
    cr_assert_eq(st, want, "%s: %s", hilock_strerror(st), hilock_client_errmsg(c));
    cr_assert(strstr(hilock_client_errmsg(c), why), "'%s' should say '%s'", hilock_client_errmsg(c), why);
    cr_assert_lt(hlt_now_ms() - t0, scaled(2000) * 3, "no answer within the bound");
    hilock_client_free(c);
}

/* A TLS server *r, a client *c on it, and the lock on "tls:k" it acquired. */
static hilock *tls_held(hlt_redis **r, hilock_client **c)
{
    const char *url;
    hilock_options o;
    hilock *l = NULL;
    *r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 0, NULL);
    url = (*r)->url;
    o = tls_opts(&url, 1);
    *c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(*c, "tls:k", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(*c));
    return l;
}

/* l's release deletes "tls:k"; then l, c and r are gone. */
static void tls_release_close(hlt_redis *r, hilock_client *c, hilock *l)
{
    hlt_release_gone(r, c, l, "tls:k");
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(tls, acquire_extend_check_release_over_tls)
{
    hlt_redis *r;
    hilock_client *c;
    hilock *l = tls_held(&r, &c);
    cr_assert_eq(hlt_exists(r, "tls:k"), 1);
    cr_assert_eq(hilock_extend(l, 60000), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_gt(hlt_pttl(r, "tls:k"), 30000);
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    tls_release_close(r, c, l);
}

static long long connections(hlt_redis *r)
{
    redisReply *rep = hlt_cmd(r, "INFO stats");
    const char *p = rep && rep->str ? strstr(rep->str, "total_connections_received:") : NULL;
    long long n = p ? atoll(p + 27) : -1;
    freeReplyObject(rep);
    return n;
}

/* fork(): the child's copy of the client shares the parent's TLS sessions (the socket and
 * the keys); freeing it must send nothing on them (no close_notify), or the server ends the
 * parent's connection under its lock. */
Test(tls, a_forked_child_freeing_its_copy_leaves_the_parents_session_alone)
{
    hlt_redis *r;
    hilock_client *c;
    hilock *l = tls_held(&r, &c);
    long long conns;
    conns = connections(r);
    /* the child has exited: whatever it sent on the shared session (a close_notify) is in the
     * stream ahead of the extend below, which the server then never gets to */
    cr_assert_eq(hlt_child_frees(l, c), 0, "the child frees and exits");
    cr_assert_eq(hilock_extend(l, 60000), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_gt(hlt_pttl(r, "tls:k"), 30000);
    cr_assert_eq(connections(r), conns, "the parent's connection was kept, not made again");
    tls_release_close(r, c, l);
}

Test(tls, an_idle_connection_is_kept_and_a_killed_one_reconnects)
{
    hlt_redis *r;
    hilock_client *c;
    hilock *l = tls_held(&r, &c);
    redisReply *rep;
    long long before = connections(r);
    hlt_sleep_ms(400);   /* idle past the engine's probe: session tickets do not look like a close */
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(connections(r), before, "the idle TLS connection was needlessly replaced");
    rep = hlt_cmd(r, "CLIENT KILL TYPE normal");
    freeReplyObject(rep);
    hlt_sleep_ms(400);
    tls_release_close(r, c, l);
}

Test(tls, mutual_tls_works_with_a_client_certificate_and_says_why_without)
{
    hlt_redis *r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 1, NULL);
    const char *url = r->url;
    hilock_options o = tls_opts(&url, 1);
    hilock_client *c;
    hilock *l = NULL;
    char want[200];
    snprintf(want, sizeof want, "127.0.0.1:%d: TLS: server requires a client certificate", r->port);
    acquire_fails(&o, HILOCK_EIO, want);
    o.tls_cert_file = pki->client.crt;
    o.tls_key_file = pki->client.key;
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "tls:k", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(tls, a_wrong_ca_an_expired_certificate_and_a_host_mismatch_are_named)
{
    hlt_redis *r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 0, NULL);
    hlt_redis *x = hlt_tls_redis_start(pki, HLT_CERT_EXPIRED, 0, NULL);
    hlt_redis *m = hlt_tls_redis_start(pki, HLT_CERT_OTHER, 0, NULL);
    const char *url = r->url, *xurl = x->url, *murl = m->url;
    hilock_options o = tls_opts(&url, 1);
    hilock_client *c;
    hilock *l = NULL;
    char want[200];
    o.tls_ca_file = pki->client_ca;
    /* "HOST:PORT: TLS: ...": the cause right after the server, no "connect:" between */
    snprintf(want, sizeof want, "127.0.0.1:%d: TLS: certificate verify failed (unable to get local "
             "issuer certificate)", r->port);
    acquire_fails(&o, HILOCK_EIO, want);
    o = tls_opts(&xurl, 1);
    snprintf(want, sizeof want, "127.0.0.1:%d: TLS: certificate has expired",
             x->port);
    acquire_fails(&o, HILOCK_EIO, want);
    o = tls_opts(&murl, 1);
    snprintf(want, sizeof want, "127.0.0.1:%d: TLS: host name mismatch", m->port);
    acquire_fails(&o, HILOCK_EIO, want);
    o.tls_verify = 0;   /* encrypt only */
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "tls:k", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_exists(m, "tls:k"), 1);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
    hlt_redis_stop(x);
    hlt_redis_stop(m);
}

Test(tls, tls_against_a_plain_port_and_plain_against_a_tls_port_fail_within_the_bound)
{
    hlt_redis *plain = hlt_redis_start(NULL);
    hlt_redis *r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 0, NULL);
    char turl[300], purl[300];
    const char *u = turl;
    hilock_options o = tls_opts(&u, 1);
    snprintf(turl, sizeof turl, "rediss://127.0.0.1:%d", plain->port);
    o.connect_timeout_ms = o.io_timeout_ms = scaled(500);
    acquire_fails(&o, HILOCK_ETIMEDOUT, "TLS");
    acquire_fails(&o, HILOCK_ETIMEDOUT, "a plain one takes redis://");
    snprintf(purl, sizeof purl, "redis://127.0.0.1:%d", r->port);
    u = purl;
    acquire_fails(&o, HILOCK_EIO, "the server may require TLS: use rediss://");
    cr_assert_eq(hlt_dbsize(plain), 0);
    cr_assert_eq(hlt_dbsize(r), 0);
    hlt_redis_stop(plain);
    hlt_redis_stop(r);
}

Test(tls, a_server_frozen_in_the_handshake_or_a_command_times_out)
{
    hlt_redis *r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 0, NULL);
    const char *url = r->url;
    hilock_options o = tls_opts(&url, 1);
    hilock_client *c;
    hilock *l = NULL;
    o.connect_timeout_ms = o.io_timeout_ms = scaled(500);
    hlt_redis_freeze(r);
    acquire_fails(&o, HILOCK_ETIMEDOUT, "TLS");
    hlt_redis_thaw(r);
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "tls:k", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_redis_freeze(r);
    cr_assert_eq(hilock_extend(l, 10000), HILOCK_ETIMEDOUT, "%s", hilock_client_errmsg(c));
    hlt_redis_thaw(r);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(tls, redlock_over_three_tls_masters)
{
    hlt_redis *r[3];
    const char *urls[3];
    hilock_options o;
    hilock_client *c;
    hilock *l = NULL;
    for (int i = 0; i < 3; i++) {
        r[i] = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 0, NULL);
        urls[i] = r[i]->url;
    }
    o = tls_opts(urls, 3);
    c = hlt_client_new(&o);
    /* (the ttl bounds a Redlock acquire: three first handshakes under valgrind take seconds) */
    cr_assert_eq(hilock_acquire(c, "tls:k", scaled(10000), 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    for (int i = 0; i < 3; i++) cr_assert_eq(hlt_exists(r[i], "tls:k"), 1);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    for (int i = 0; i < 3; i++) cr_assert_eq(hlt_exists(r[i], "tls:k"), 0);
    hilock_free(l);
    hilock_client_free(c);
    for (int i = 0; i < 3; i++) hlt_redis_stop(r[i]);
}

typedef struct waiter {
    hilock_client *c;
    hilock_status st;
    long long took;
} waiter;

static void *wait_for_lock(void *arg)
{
    waiter *w = arg;
    hilock *l = NULL;
    long long t0 = hlt_now_ms();
    w->st = hilock_acquire(w->c, "tls:k", 30000, 20000, &l);
    w->took = hlt_now_ms() - t0;
    if (l) hilock_release(l);
    hilock_free(l);
    return NULL;
}

Test(tls, a_waiter_is_woken_by_the_release_over_tls)
{
    hlt_redis *r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 0, NULL);
    const char *url = r->url;
    hilock_options o = tls_opts(&url, 1);
    hilock_client *c = hlt_client_new(&o);
    hilock *l = NULL;
    waiter w;
    pthread_t th;
    o.retry_delay_ms = 8000;   /* polling would take seconds: only the wake is quick */
    w.c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "tls:k", 30000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    pthread_create(&th, NULL, wait_for_lock, &w);
    hlt_sleep_ms(500);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    pthread_join(th, NULL);
    cr_assert_eq(w.st, HILOCK_OK, "%s", hilock_client_errmsg(w.c));
    cr_assert_lt(w.took, 3500, "woken after %lld ms: not by the release", w.took);
    hilock_free(l);
    hilock_client_free(w.c);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(tls, the_client_keeps_its_own_copy_of_the_tls_strings)
{
    hlt_redis *r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 0, NULL);
    const char *url = r->url;
    hilock_options o = tls_opts(&url, 1);
    char *ca = strdup(pki->ca), *name = strdup("localhost");
    hilock_client *c;
    hilock *l = NULL;
    o.tls_ca_file = ca;
    o.tls_server_name = name;
    c = hlt_client_new(&o);
    memset(name, 'x', strlen(name));   /* the caller's buffers change and go away */
    free(name);
    free(ca);
    cr_assert_eq(hilock_acquire(c, "tls:k", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* The keepalive's private client shares the owner's TLS context: it renews over rediss://
 * even when the CA file is gone by the time the keepalive starts (the files are read once,
 * by hilock_client_new). */
Test(tls, keepalive_renews_over_tls_with_the_clients_context)
{
    hlt_redis *r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 0, NULL);
    const char *url = r->url;
    hilock_options o = tls_opts(&url, 1);
    char ca[HLT_PKI_PATH + 8], cmd[2 * HLT_PKI_PATH + 16];
    hilock_client *c;
    hilock *l = NULL;
    long ttl = scaled(1500) > 1500 ? 6000 : 1500;   /* valgrind: a round trip can take seconds */
    snprintf(ca, sizeof ca, "%s.copy", pki->ca);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", pki->ca, ca);
    cr_assert_eq(system(cmd), 0);
    o.tls_ca_file = ca;
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "tls:ka", ttl, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(unlink(ca), 0);
    cr_assert_eq(hilock_keepalive(l, NULL, NULL), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_sleep_ms(2 * ttl + 500);   /* more than twice the ttl: only renewals keep it */
    cr_assert_eq(hlt_exists(r, "tls:ka"), 1, "not renewed over TLS");
    cr_assert_gt(hlt_pttl(r, "tls:ka"), 0);
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_release_gone(r, c, l, "tls:ka");
    hilock_client_free(c);
    hlt_redis_stop(r);
}
