/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tls.c -- `make bench`, part 5: TLS (issue 11) next to plain TCP, in the same run, on one
 * throwaway redis-server that listens on both a plain and a TLS port (certificates made with
 * the openssl command by tests/tls_fixture.c; EC P-256, TLS 1.3).
 *
 *  a. Uncontended acquire+release on one long-lived connection: a redis:// client and a
 *     rediss:// client of the same server take turns in short slices (plain, TLS, plain, ...)
 *     for a fixed total time each, so a burst of load elsewhere hits both alike; the ratio is
 *     the median of the per-slice ratios TLS / plain (target >= 0.85). Next to it, the
 *     floor of the machine: bare PING round trips through the same two transports, in the
 *     same slices (the server's own TLS work is in both).
 *  b. Connect time, apart: N fresh connections through the library's own transports
 *     (src/transport/tcp.c, tls.c): TCP connect alone, and TCP connect + TLS
 *     handshake (a full one each time: no session resumption), median and p99. That is
 *     what a new or broken connection adds to the call that makes it.
 *
 * Knobs (environment): HILOCK_BENCH_SECONDS (time per variant, as part 1),
 * HILOCK_BENCH_TLS_CONNECTS (N, default 200). `bench tls` runs only this part.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "session.h"
#include "tls_fixture.h"
#include "transport.h"

#define TLS_KEY "bench:tls"
#define TLS_TTL_MS 30000
#define TLS_SLICE_S 0.25
#define TLS_MAX_SLICES 1024
#define TLS_MAX_CONNECTS 10000
#define TARGET_RATIO 0.85

static const char *ca_file;

static void tune_ca(hilock_options *o) { o->tls_ca_file = ca_file; }

/* Acquire+release cycles on c for `secs`: cycles/s. */
static double cycles_per_s(hilock_client *c, double secs)
{
    int64_t t0 = now_us(), end = t0 + (int64_t)(secs * 1e6), t1;
    uint64_t n = 0;
    do {
        for (int i = 0; i < 32; i++) {
            hilock *l = NULL;
            if (hilock_acquire(c, TLS_KEY, TLS_TTL_MS, 0, &l) != HILOCK_OK || hilock_release(l) != HILOCK_OK)
                die("tls cycle", hilock_client_errmsg(c));
            hilock_free(l);
        }
        n += 32;
    } while ((t1 = now_us()) < end);
    return (double)n * 1e6 / (double)(t1 - t0);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Connect k through ops (cfg: the TLS context, or NULL), to the end of the handshake. */
static void dial(hl_io_conn *k, const hl_transport_ops *ops, const void *cfg, int port)
{
    char err[128];
    hl_io io = HL_IO_WANT_WRITE;
    memset(k, 0, sizeof *k);
    k->fd = -1;
    k->cfg = cfg;
    if (ops->connect_start(k, "127.0.0.1", port, err, sizeof err) < 0) die("connect", err);
    while (io == HL_IO_WANT_READ || io == HL_IO_WANT_WRITE) {
        struct pollfd pf = { k->fd, ops->poll_events(k, POLLIN), 0 };
        if (poll(&pf, 1, 5000) != 1) die("connect", "no progress in 5 s");
        io = ops->connect_step(k);
    }
    if (io != HL_IO_OK) die("connect", ops->error(k));
}

static int64_t connect_us(const hl_transport_ops *ops, const void *cfg, int port)
{
    hl_io_conn k;
    int64_t t0 = now_us();
    dial(&k, ops, cfg, port);
    t0 = now_us() - t0;
    k.ops->close(&k);
    return t0;
}

/* The floor: bare round trips (PING -> +PONG) on a connected k, as the engine does them
 * (write, poll, read), for `secs`: round trips/s. */
static double pings_per_s(hl_io_conn *k, double secs)
{
    static const char ping[] = "*1\r\n$4\r\nPING\r\n";
    int64_t t0 = now_us(), end = t0 + (int64_t)(secs * 1e6), t1;
    uint64_t n = 0;
    char buf[64];
    do {
        size_t w = 0, got = 0, r;
        while (w < sizeof ping - 1) {
            struct pollfd pf = { k->fd, POLLOUT, 0 };
            hl_io io = k->ops->write(k, ping + w, sizeof ping - 1 - w, &r);
            if (io == HL_IO_OK) w += r;
            else if (io != HL_IO_WANT_WRITE && io != HL_IO_WANT_READ) die("ping", k->ops->error(k));
            else poll(&pf, 1, 1000);
        }
        while (got < 7) {   /* "+PONG\r\n" */
            struct pollfd pf = { k->fd, k->ops->poll_events(k, POLLIN), 0 };
            hl_io io = k->ops->read(k, buf, sizeof buf, &r);
            if (io == HL_IO_OK) got += r;
            else if (io != HL_IO_WANT_WRITE && io != HL_IO_WANT_READ) die("ping", k->ops->error(k));
            else poll(&pf, 1, 1000);
        }
        n++;
    } while ((t1 = now_us()) < end);
    return (double)n * 1e6 / (double)(t1 - t0);
}

static void connects(const char *label, const hl_transport_ops *ops, const void *cfg, int port, int n)
{
    static int64_t us[TLS_MAX_CONNECTS];
    for (int i = 0; i < n; i++) us[i] = connect_us(ops, cfg, port);
    qsort(us, (size_t)n, sizeof us[0], cmp_i64);
    printf("  %-28s %8.3f %8.3f\n", label, pct_ms(us, (size_t)n, 0.5), pct_ms(us, (size_t)n, 0.99));
}

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void tls_bench(double run_s)
{
    static double ratio[TLS_MAX_SLICES], floor_ratio[TLS_MAX_SLICES];
    const char *e = getenv("HILOCK_BENCH_TLS_CONNECTS");
    int nconn = e && atoi(e) > 0 ? atoi(e) : 200, slices = (int)(run_s / TLS_SLICE_S + 0.5);
    char extra[1024], turl[128], err[200];
    const char *purl, *tu = turl;
    double rate[4] = { 0, 0, 0, 0 };
    hl_io_conn bare[2];
    hlt_pki *pki = hlt_pki_make();
    hlt_redis *r;
    hilock_client *plain, *tls;
    struct hl_tls_ctx *ctx;
    hl_tls_config cfg;
    int tport = hlt_free_port();
    if (nconn > TLS_MAX_CONNECTS) nconn = TLS_MAX_CONNECTS;
    if (slices < 2) slices = 2;
    if (slices > TLS_MAX_SLICES) slices = TLS_MAX_SLICES;
    if (!pki) die("tls", "could not make the certificates (openssl)");
    ca_file = pki->ca;
    snprintf(extra, sizeof extra, "--tls-port %d --tls-cert-file %s --tls-key-file %s --tls-ca-cert-file %s "
             "--tls-auth-clients no", tport, pki->server.crt, pki->server.key, pki->ca);
    if (!(r = hlt_redis_start(extra))) die("redis-server --tls-port", "did not start");
    snprintf(turl, sizeof turl, "rediss://127.0.0.1:%d", tport);
    purl = r->url;
    plain = client_with(&purl, 1, NULL);
    tls = client_with(&tu, 1, tune_ca);
    memset(&cfg, 0, sizeof cfg);
    cfg.ca_file = pki->ca;
    cfg.verify = 1;
    if (!(ctx = hl_tls_ctx_new(&cfg, err, sizeof err))) die("tls context", err);
    dial(&bare[0], &hl_transport_tcp, NULL, r->port);
    dial(&bare[1], &hl_transport_tls, ctx, tport);
    cycles_per_s(plain, 0.3);   /* warm-up: connections up, scripts cached */
    cycles_per_s(tls, 0.3);
    for (int k = 0; k < slices; k++) {
        double v[4];
        v[0] = cycles_per_s(plain, TLS_SLICE_S);
        v[1] = cycles_per_s(tls, TLS_SLICE_S);
        v[2] = pings_per_s(&bare[0], TLS_SLICE_S / 2);
        v[3] = pings_per_s(&bare[1], TLS_SLICE_S / 2);
        for (int i = 0; i < 4; i++) rate[i] += v[i] / slices;
        ratio[k] = v[1] / v[0];
        floor_ratio[k] = v[3] / v[2];
    }
    printf("\nTLS: uncontended acquire+release on one long-lived connection, same server, %d "
           "interleaved slices\n  (floor: bare PING round trips through the same transports; both "
           "ratios are medians of the slice ratios)\n", slices);
    printf("  %-16s %16s %18s\n", "transport", "hilock cycles/s", "floor PINGs/s");
    printf("  %-16s %16.0f %18.0f\n", "tcp 127.0.0.1", rate[0], rate[2]);
    printf("  %-16s %16.0f %18.0f\n", "tls 127.0.0.1", rate[1], rate[3]);
    printf("  %-16s %16.2f %18.2f   (target for hilock >= %.2f)\n", "ratio TLS/plain",
           median_of(ratio, slices), median_of(floor_ratio, slices), TARGET_RATIO);
    hilock_client_free(plain);
    hilock_client_free(tls);
    bare[0].ops->close(&bare[0]);
    bare[1].ops->close(&bare[1]);

    printf("\nTLS: connect time over %d fresh connections (the library's transports; full "
           "handshake each)\n  %-28s %8s %8s\n", nconn, "", "p50 ms", "p99 ms");
    connects("tcp connect", &hl_transport_tcp, NULL, r->port, nconn);
    connects("tcp connect + TLS handshake", &hl_transport_tls, ctx, tport, nconn);
    hl_tls_ctx_free(ctx);
    hlt_redis_stop(r);
    hlt_pki_free(pki);
}
