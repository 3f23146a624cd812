/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tls_stub.c -- src/transport/session.h with no TLS, for the musl test program only (scripts/test-musl.sh).
 * src/transport/session.c is compiled with musl-gcc like every source, but the only OpenSSL on a Debian
 * machine is built for glibc and cannot be linked into a musl program: the program links this
 * instead, so a TLS setting fails as a missing file would, and the rest is the real library.
 */
#include <stdio.h>

#include "session.h"

struct hl_tls_ctx *hl_tls_ctx_new(const hl_tls_config *cfg, char *err, size_t err_len)
{
    (void)cfg;
    snprintf(err, err_len, "TLS is not in this test build (musl_check)");
    return NULL;
}

/* No context is ever made, so no session: the rest is never reached. */
struct hl_tls_ctx *hl_tls_ctx_ref(struct hl_tls_ctx *x) { return x; }
void hl_tls_ctx_free(struct hl_tls_ctx *x) { (void)x; }

struct hl_tls *hl_tls_new(struct hl_tls_ctx *x, int fd, const char *host, char *err, size_t err_len)
{
    (void)x;
    (void)fd;
    (void)host;
    snprintf(err, err_len, "TLS is not in this test build (musl_check)");
    return NULL;
}

hl_tls_io hl_tls_handshake(struct hl_tls *t) { (void)t; return HL_TLS_ERROR; }
hl_tls_io hl_tls_read(struct hl_tls *t, void *buf, size_t cap, size_t *n)
{
    (void)t, (void)buf, (void)cap, (void)n;
    return HL_TLS_ERROR;
}
hl_tls_io hl_tls_write(struct hl_tls *t, const void *buf, size_t len, size_t *n)
{
    (void)t, (void)buf, (void)len, (void)n;
    return HL_TLS_ERROR;
}
size_t hl_tls_pending(const struct hl_tls *t) { (void)t; return 0; }
const char *hl_tls_error(const struct hl_tls *t) { (void)t; return "TLS is not in this test build"; }
const char *hl_tls_timeout_error(const struct hl_tls *t) { return hl_tls_error(t); }
void hl_tls_free(struct hl_tls *t) { (void)t; }
