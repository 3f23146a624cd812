/* SPDX-License-Identifier: BSD-3-Clause */
/* test_tls_layer.c -- src/transport/session.c on its own, against real redis-servers on TLS ports: the
 * handshake and RESP round trips from a small poll loop (the engine's part, played by the
 * test), each failure in the words of issue 11, and no call that ever blocks. */
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <openssl/err.h>

#include "checks.h"
#include "session.h"
#include "tls_fixture.h"

static hlt_pki *pki;

static void setup(void)
{
    pki = hlt_pki_make();
    cr_assert_not_null(pki, "could not make the test certificates");
}

static void teardown(void) { hlt_pki_free(pki); }

#define NOT_TLS "TLS: not a TLS server (a plain one takes redis://; or a wrong port?)"
#define NO_ANSWER "TLS: no answer to the handshake (not a TLS server? a plain one takes redis://; or a wrong port?)"

TestSuite(tls_layer, .init = setup, .fini = teardown, .timeout = 60);

/* Times are scaled up under valgrind (run-tests.sh sets VALGRIND=1): a first handshake there
 * spends seconds of CPU in OpenSSL's key exchange. */
static long scaled(long ms)
{
    const char *v = getenv("VALGRIND");
    return v && *v == '1' ? ms * 20 : ms;
}

/* A call of the layer returns at once: it never waits for the server. */
#define QUICK_MS scaled(500)

/* ---- the caller's side: a socket, a context, a poll loop with a deadline ---- */

static int tcp_connect(int port)
{
    struct sockaddr_in a;
    struct pollfd pf;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((unsigned short)port);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        cr_assert_eq(errno, EINPROGRESS, "connect: %s", strerror(errno));
        pf.fd = fd;
        pf.events = POLLOUT;
        cr_assert_eq(poll(&pf, 1, 5000), 1, "connect did not finish");
    }
    return fd;
}

typedef struct tls_opts {
    const char *ca, *ca_path, *cert, *key, *server_name;
    int         insecure;
} tls_opts;

static struct hl_tls_ctx *ctx_of(tls_opts o)
{
    char err[256] = "";
    hl_tls_config cfg = { o.ca, o.ca_path, o.cert, o.key, o.server_name, !o.insecure };
    struct hl_tls_ctx *x = hl_tls_ctx_new(&cfg, err, sizeof err);
    cr_assert_not_null(x, "context: %s", err);
    return x;
}

typedef struct session {
    int                 fd;
    struct hl_tls_ctx  *ctx;
    struct hl_tls      *t;
    redisReader        *rd;
} session;

static session open_session(int port, tls_opts o)
{
    char err[256] = "";
    session s;
    s.fd = tcp_connect(port);
    s.ctx = ctx_of(o);
    s.t = hl_tls_new(s.ctx, s.fd, "127.0.0.1", err, sizeof err);
    cr_assert_not_null(s.t, "session: %s", err);
    s.rd = redisReaderCreate();
    return s;
}

static void close_session(session *s)
{
    hl_tls_free(s->t);
    hl_tls_ctx_free(s->ctx);
    close(s->fd);
    redisReaderFree(s->rd);
}

static int is_want(hl_tls_io r) { return r == HL_TLS_WANT_READ || r == HL_TLS_WANT_WRITE; }

/* Wait for what the layer asked for; 0 once the deadline has passed. */
static int wait_for(int fd, hl_tls_io want, long long end)
{
    struct pollfd pf = { fd, (short)(want == HL_TLS_WANT_READ ? POLLIN : POLLOUT), 0 };
    long long left = end - hlt_now_ms();
    if (left <= 0) return 0;
    cr_assert_geq(poll(&pf, 1, (int)left), 0);
    return 1;
}

static void assert_quick(long long t0, const char *what)
{
    long long took = hlt_now_ms() - t0;
    cr_assert_lt(took, QUICK_MS, "%s took %lld ms: the layer blocked", what, took);
}

static hl_tls_io handshake(session *s, long ms)
{
    long long end = hlt_now_ms() + scaled(ms);
    for (;;) {
        long long t0 = hlt_now_ms();
        hl_tls_io r = hl_tls_handshake(s->t);
        assert_quick(t0, "hl_tls_handshake");
        if (!is_want(r) || !wait_for(s->fd, r, end)) return r;
    }
}

/* A session whose handshake went through. */
static session ready_session(int port, tls_opts o)
{
    session s = open_session(port, o);
    cr_assert_eq(handshake(&s, 5000), HL_TLS_OK, "%s", hl_tls_error(s.t));
    return s;
}

static hl_tls_io send_all(session *s, const char *p, size_t len, long ms)
{
    long long end = hlt_now_ms() + scaled(ms);
    while (len > 0) {
        size_t n;
        long long t0 = hlt_now_ms();
        hl_tls_io r = hl_tls_write(s->t, p, len, &n);
        assert_quick(t0, "hl_tls_write");
        if (r == HL_TLS_OK) {
            cr_assert(n > 0 && n <= len);
            p += n, len -= n;
        } else if (!is_want(r) || !wait_for(s->fd, r, end)) {
            return r;
        }
    }
    return HL_TLS_OK;
}

/* Read until the reader has one whole reply (*out), draining what the session buffers. */
static hl_tls_io recv_reply(session *s, redisReply **out, long ms)
{
    long long end = hlt_now_ms() + scaled(ms);
    char buf[16384];
    *out = NULL;
    for (;;) {
        size_t n;
        long long t0;
        hl_tls_io r;
        cr_assert_eq(redisReaderGetReply(s->rd, (void **)out), REDIS_OK);
        if (*out) return HL_TLS_OK;
        t0 = hlt_now_ms();
        r = hl_tls_read(s->t, buf, sizeof buf, &n);
        assert_quick(t0, "hl_tls_read");
        if (r == HL_TLS_OK)
            cr_assert_eq(redisReaderFeed(s->rd, buf, n), REDIS_OK);
        else if (!is_want(r) || !wait_for(s->fd, r, end))
            return r;
    }
}

/* One command there and back (the caller frees the reply). */
static redisReply *vcommand(session *s, const char *fmt, va_list ap)
{
    char *cmd;
    redisReply *rep;
    int len = redisvFormatCommand(&cmd, fmt, ap);
    cr_assert_gt(len, 0);
    cr_assert_eq(send_all(s, cmd, (size_t)len, 5000), HL_TLS_OK, "write: %s", hl_tls_error(s->t));
    redisFreeCommand(cmd);
    cr_assert_eq(recv_reply(s, &rep, 5000), HL_TLS_OK, "read: %s", hl_tls_error(s->t));
    return rep;
}

static redisReply *command(session *s, const char *fmt, ...)
{
    va_list ap;
    redisReply *rep;
    va_start(ap, fmt);
    rep = vcommand(s, fmt, ap);
    va_end(ap);
    return rep;
}

/* The reply's text (status, string or error), in a static buffer. */
static const char *roundtrip(session *s, const char *fmt, ...)
{
    static char text[256];
    va_list ap;
    redisReply *rep;
    va_start(ap, fmt);
    rep = vcommand(s, fmt, ap);
    va_end(ap);
    snprintf(text, sizeof text, "%s", rep->str ? rep->str : "(nil)");
    freeReplyObject(rep);
    return text;
}

static void assert_error(session *s, hl_tls_io r, const char *want)
{
    cr_assert_eq(r, HL_TLS_ERROR, "expected '%s', got status %d", want, (int)r);
    cr_assert_str_eq(hl_tls_error(s->t), want);
    cr_assert_eq(ERR_peek_error(), 0, "OpenSSL's error queue was left with an error");
}

static void assert_handshake_fails(int port, tls_opts o, const char *want)
{
    session s = open_session(port, o);
    assert_error(&s, handshake(&s, 5000), want);
    close_session(&s);
}

/* ---- a verified session ---- */

Test(tls_layer, talks_resp_to_a_server_verified_by_its_ip_address)
{
    hlt_redis *r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 0, NULL);
    session s;
    cr_assert_not_null(r);
    s = ready_session(r->port, (tls_opts){ .ca = pki->ca });
    cr_assert_str_eq(roundtrip(&s, "PING"), "PONG");
    cr_assert_str_eq(roundtrip(&s, "SET %s %s", "tls:k", "over tls"), "OK");
    cr_assert_str_eq(roundtrip(&s, "GET %s", "tls:k"), "over tls");
    cr_assert_eq(ERR_peek_error(), 0);
    close_session(&s);
    hlt_holds(r, "tls:k", "over tls");   /* read back over the plain unix socket */
    hlt_redis_stop(r);
}

Test(tls_layer, verifies_a_host_name_given_as_the_server_name)
{
    hlt_redis *r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 0, NULL);
    session s;
    cr_assert_not_null(r);
    s = ready_session(r->port, (tls_opts){ .ca = pki->ca, .server_name = "localhost" });
    cr_assert_str_eq(roundtrip(&s, "PING"), "PONG");
    close_session(&s);
    hlt_redis_stop(r);
}

/* 1 MB each way: partial writes, many records, and bytes the session holds past poll() */
Test(tls_layer, moves_a_large_value_both_ways)
{
    hlt_redis *r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 0, NULL);
    size_t len = 1 << 20;
    char *big = malloc(len + 1);
    redisReply *rep;
    session s;
    cr_assert_not_null(r);
    memset(big, 'x', len);
    big[len] = '\0';
    big[len / 2] = 'y';
    s = ready_session(r->port, (tls_opts){ .ca = pki->ca });
    cr_assert_str_eq(roundtrip(&s, "SET %s %s", "tls:big", big), "OK");
    rep = command(&s, "GET %s", "tls:big");
    cr_assert(rep->type == REDIS_REPLY_STRING && rep->len == len && !memcmp(rep->str, big, len));
    freeReplyObject(rep);
    close_session(&s);
    hlt_holds(r, "tls:big", big);
    free(big);
    hlt_redis_stop(r);
}

/* ---- the chain and the name, in words ---- */

Test(tls_layer, a_wrong_ca_is_named_as_a_verify_failure)
{
    hlt_redis *r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 0, NULL);
    cr_assert_not_null(r);
    assert_handshake_fails(r->port, (tls_opts){ .ca = pki->client_ca },
                           "TLS: certificate verify failed (unable to get local issuer certificate)");
    hlt_redis_stop(r);
}

Test(tls_layer, no_ca_given_means_the_system_store_which_knows_no_test_ca)
{
    hlt_redis *r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 0, NULL);
    cr_assert_not_null(r);
    assert_handshake_fails(r->port, (tls_opts){ 0 },
                           "TLS: certificate verify failed (unable to get local issuer certificate)");
    hlt_redis_stop(r);
}

Test(tls_layer, a_host_name_mismatch_says_what_the_certificate_is_for)
{
    hlt_redis *r = hlt_tls_redis_start(pki, HLT_CERT_OTHER, 0, NULL);
    session s;
    cr_assert_not_null(r);
    assert_handshake_fails(r->port, (tls_opts){ .ca = pki->ca },
                           "TLS: host name mismatch (certificate is for redis.other.example)");
    assert_handshake_fails(r->port, (tls_opts){ .ca = pki->ca, .server_name = "localhost" },
                           "TLS: host name mismatch (certificate is for redis.other.example)");
    /* tls_verify = 0: encrypted, unverified, and it works */
    s = ready_session(r->port, (tls_opts){ .ca = pki->ca, .insecure = 1 });
    cr_assert_str_eq(roundtrip(&s, "PING"), "PONG");
    close_session(&s);
    hlt_redis_stop(r);
}

Test(tls_layer, a_mismatch_lists_every_name_and_address_of_the_certificate)
{
    hlt_redis *r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 0, NULL);
    cr_assert_not_null(r);
    assert_handshake_fails(r->port, (tls_opts){ .ca = pki->ca, .server_name = "db.example.com" },
                           "TLS: host name mismatch (certificate is for localhost, 127.0.0.1)");
    assert_handshake_fails(r->port, (tls_opts){ .ca = pki->ca, .server_name = "127.0.0.2" },
                           "TLS: host name mismatch (certificate is for localhost, 127.0.0.1)");
    hlt_redis_stop(r);
}

Test(tls_layer, an_expired_certificate_says_so)
{
    hlt_redis *r = hlt_tls_redis_start(pki, HLT_CERT_EXPIRED, 0, NULL);
    session s;
    cr_assert_not_null(r);
    assert_handshake_fails(r->port, (tls_opts){ .ca = pki->ca }, "TLS: certificate has expired");
    s = ready_session(r->port, (tls_opts){ .ca = pki->ca, .insecure = 1 });
    close_session(&s);
    hlt_redis_stop(r);
}

/* ---- client certificates ---- */

Test(tls_layer, mutual_tls_works_with_a_client_certificate)
{
    hlt_redis *r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 1, NULL);
    session s;
    cr_assert_not_null(r);
    s = ready_session(r->port, (tls_opts){ .ca = pki->ca, .cert = pki->client.crt, .key = pki->client.key });
    cr_assert_str_eq(roundtrip(&s, "SET %s %s", "tls:m", "mutual"), "OK");
    close_session(&s);
    hlt_holds(r, "tls:m", "mutual");
    hlt_redis_stop(r);
}

/* TLS 1.3 ends the client's handshake before the server checks: the refusal comes with the
 * first read. Whichever call sees it, it says what is missing. */
static void assert_needs_client_cert(int port, tls_opts o, const char *want)
{
    session s = open_session(port, o);
    redisReply *rep = NULL;
    hl_tls_io r = handshake(&s, 5000);
    if (r == HL_TLS_OK) r = send_all(&s, "*1\r\n$4\r\nPING\r\n", 14, 5000);
    if (r == HL_TLS_OK) r = recv_reply(&s, &rep, 5000);
    cr_assert_null(rep, "the server answered");
    cr_assert_eq(r, HL_TLS_ERROR);
    /* (a refusal may add the server's alert: "... (tlsv1 alert unknown ca)") */
    cr_assert(!strncmp(hl_tls_error(s.t), want, strlen(want)), "'%s' is not '%s'", hl_tls_error(s.t), want);
    cr_assert_eq(ERR_peek_error(), 0);
    close_session(&s);
}

Test(tls_layer, mutual_tls_without_a_client_certificate_says_one_is_required)
{
    hlt_redis *r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 1, NULL);
    cr_assert_not_null(r);
    assert_needs_client_cert(r->port, (tls_opts){ .ca = pki->ca }, "TLS: server requires a client certificate");
    hlt_redis_stop(r);
}

Test(tls_layer, mutual_tls_1_2_without_a_client_certificate_says_one_is_required)
{
    hlt_redis *r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 1, "--tls-protocols TLSv1.2");
    cr_assert_not_null(r);
    assert_needs_client_cert(r->port, (tls_opts){ .ca = pki->ca }, "TLS: server requires a client certificate");
    hlt_redis_stop(r);
}

Test(tls_layer, a_client_certificate_from_another_ca_is_refused_in_words)
{
    hlt_redis *r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 1, NULL);
    cr_assert_not_null(r);
    assert_needs_client_cert(r->port,
                             (tls_opts){ .ca = pki->ca, .cert = pki->stranger.crt, .key = pki->stranger.key },
                             "TLS: server refused the client certificate");
    hlt_redis_stop(r);
}

/* ---- not TLS, not answering, gone ---- */

/* A plain Redis port never answers a ClientHello (see hl_tls_timeout_error): the caller's
 * deadline ends the handshake, and the layer has the words for it. */
Test(tls_layer, a_plain_server_is_named_when_the_deadline_ends_the_handshake)
{
    hlt_redis *r = hlt_redis_started(NULL);
    session s;
    long long t0;
    s = open_session(r->port, (tls_opts){ .ca = pki->ca });
    t0 = hlt_now_ms();
    cr_assert_eq(handshake(&s, 300), HL_TLS_WANT_READ);
    cr_assert_lt(hlt_now_ms() - t0, scaled(2000));
    cr_assert_str_eq(hl_tls_timeout_error(s.t), NO_ANSWER);
    close_session(&s);
    hlt_redis_stop(r);
}

/* A plain server that speaks first: a Redis at maxclients says "-ERR max number of clients
 * reached" to every newcomer (the read-back connection takes the one place). */
Test(tls_layer, a_plain_server_answering_resp_is_named_not_a_tls_server)
{
    hlt_redis *r = hlt_redis_started("--maxclients 1");
    int ok = 0;
    /* the fixture's own start-up probe may still hold the place for a moment (the server has
     * not yet seen it close): until then our connection is the one refused; connect again */
    for (int i = 0; i < 100 && !ok; i++) {
        redisReply *k = hlt_cmd(r, "PING");
        ok = k && k->type == REDIS_REPLY_STATUS;
        if (k) freeReplyObject(k);
        if (!ok && r->cli) {
            redisFree(r->cli);
            r->cli = NULL;
            hlt_sleep_ms(20);
        }
    }
    cr_assert(ok, "the read-back connection never got the one place");
    assert_handshake_fails(r->port, (tls_opts){ .ca = pki->ca }, NOT_TLS);
    hlt_redis_stop(r);
}

/* A listener that accepts and closes at once (some other service, a proxy with no backend):
 * it needs no process of its own, the kernel completes the connection. */
Test(tls_layer, a_server_that_closes_at_once_is_named_not_a_tls_server)
{
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    int l = socket(AF_INET, SOCK_STREAM, 0), c;
    session s;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(bind(l, (struct sockaddr *)&a, sizeof a) == 0 && listen(l, 1) == 0);
    cr_assert_eq(getsockname(l, (struct sockaddr *)&a, &al), 0);
    s = open_session(ntohs(a.sin_port), (tls_opts){ .ca = pki->ca });
    c = accept(l, NULL, NULL);
    cr_assert_geq(c, 0);
    close(c);
    assert_error(&s, handshake(&s, 5000), NOT_TLS ": it closed the connection");
    close_session(&s);
    close(l);
}

Test(tls_layer, a_server_frozen_in_the_handshake_never_blocks_a_call)
{
    hlt_redis *r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 0, NULL);
    session s;
    long long t0;
    cr_assert_not_null(r);
    hlt_redis_freeze(r);
    s = open_session(r->port, (tls_opts){ .ca = pki->ca });   /* the kernel still accepts */
    t0 = hlt_now_ms();
    cr_assert_eq(handshake(&s, 300), HL_TLS_WANT_READ);   /* the caller's deadline ends it */
    cr_assert_lt(hlt_now_ms() - t0, scaled(2000));
    cr_assert_str_eq(hl_tls_timeout_error(s.t), NO_ANSWER);
    close_session(&s);
    hlt_redis_thaw(r);
    hlt_redis_stop(r);
}

Test(tls_layer, a_server_frozen_in_a_command_never_blocks_a_read)
{
    hlt_redis *r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 0, NULL);
    session s;
    redisReply *rep = NULL;
    long long t0;
    cr_assert_not_null(r);
    s = ready_session(r->port, (tls_opts){ .ca = pki->ca });
    cr_assert_str_eq(roundtrip(&s, "PING"), "PONG");
    hlt_redis_freeze(r);
    cr_assert_eq(send_all(&s, "*1\r\n$4\r\nPING\r\n", 14, 5000), HL_TLS_OK);
    t0 = hlt_now_ms();
    cr_assert_eq(recv_reply(&s, &rep, 300), HL_TLS_WANT_READ);
    cr_assert_lt(hlt_now_ms() - t0, scaled(2000));
    close_session(&s);
    hlt_redis_thaw(r);
    hlt_redis_stop(r);
}

Test(tls_layer, a_server_gone_mid_write_is_an_error_not_a_sigpipe)
{
    hlt_redis *r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 0, NULL);
    static char chunk[65536];
    session s;
    hl_tls_io st = HL_TLS_OK;
    long long end;
    cr_assert_not_null(r);
    signal(SIGPIPE, SIG_DFL);   /* a SIGPIPE would kill this test */
    s = ready_session(r->port, (tls_opts){ .ca = pki->ca });
    hlt_redis_kill(r);
    end = hlt_now_ms() + 5000;
    while (st == HL_TLS_OK && hlt_now_ms() < end) st = send_all(&s, chunk, sizeof chunk, 1000);
    cr_assert_eq(st, HL_TLS_ERROR);
    cr_assert(!strcmp(hl_tls_error(s.t), "TLS: Broken pipe") ||
                  !strcmp(hl_tls_error(s.t), "TLS: Connection reset by peer"),
              "%s", hl_tls_error(s.t));
    cr_assert_eq(ERR_peek_error(), 0);
    close_session(&s);
    hlt_redis_stop(r);
}

Test(tls_layer, a_session_the_server_ends_reads_as_closed)
{
    hlt_redis *r = hlt_tls_redis_start(pki, HLT_CERT_SERVER, 0, NULL);
    redisReply *rep = NULL, *k;
    session s;
    cr_assert_not_null(r);
    s = ready_session(r->port, (tls_opts){ .ca = pki->ca });
    cr_assert_str_eq(roundtrip(&s, "PING"), "PONG");
    k = hlt_cmd(r, "CLIENT KILL TYPE normal");   /* (not the read-back connection: SKIPME) */
    cr_assert(k && k->type == REDIS_REPLY_INTEGER && k->integer == 1);
    freeReplyObject(k);
    cr_assert_eq(recv_reply(&s, &rep, 5000), HL_TLS_CLOSED, "%s", hl_tls_error(s.t));
    cr_assert_eq(ERR_peek_error(), 0);
    cr_assert_eq(send_all(&s, "*1\r\n$4\r\nPING\r\n", 14, 5000), HL_TLS_ERROR);   /* and stays closed */
    cr_assert_str_eq(hl_tls_error(s.t), "TLS: the server closed the connection");
    close_session(&s);
    hlt_redis_stop(r);
}

/* ---- settings that cannot work: refused at once, in words ---- */

static void assert_ctx_fails(hl_tls_config cfg, const char *want)
{
    char err[256] = "";
    cr_assert_null(hl_tls_ctx_new(&cfg, err, sizeof err));
    cr_assert_str_eq(err, want);
    cr_assert_eq(ERR_peek_error(), 0);
}

Test(tls_layer, unusable_settings_are_refused_naming_the_setting)
{
    char want[512];
    hl_tls_config cfg = { .verify = 1 };
    cfg.ca_file = "/nonexistent/ca.crt";
    assert_ctx_fails(cfg, "TLS: tls_ca_file /nonexistent/ca.crt: No such file or directory");
    cfg.ca_file = NULL;
    cfg.ca_path = "/nonexistent";
    assert_ctx_fails(cfg, "TLS: tls_ca_path /nonexistent: No such file or directory");
    cfg.ca_path = pki->ca;
    snprintf(want, sizeof want, "TLS: tls_ca_path %s: not a directory", pki->ca);
    assert_ctx_fails(cfg, want);
    cfg.ca_path = NULL;
    cfg.cert_file = pki->client.crt;
    assert_ctx_fails(cfg, "TLS: tls_cert_file and tls_key_file go together (tls_key_file is missing)");
    cfg.key_file = pki->client_encrypted_key;
    snprintf(want, sizeof want, "TLS: tls_key_file %s: encrypted with a passphrase (give the key unencrypted)",
             pki->client_encrypted_key);
    assert_ctx_fails(cfg, want);
    cfg.key_file = pki->server.key;
    snprintf(want, sizeof want, "TLS: tls_key_file %s does not match tls_cert_file %s", pki->server.key,
             pki->client.crt);
    assert_ctx_fails(cfg, want);
}

Test(tls_layer, a_session_needs_a_name_to_verify)
{
    char err[256] = "";
    struct hl_tls_ctx *x = ctx_of((tls_opts){ .ca = pki->ca });
    cr_assert_null(hl_tls_new(x, -1, NULL, err, sizeof err));
    cr_assert_str_eq(err, "TLS: no host name to send and verify");
    cr_assert_null(hl_tls_new(x, -1, "", err, sizeof err));
    hl_tls_ctx_free(x);
}
