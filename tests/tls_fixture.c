/* SPDX-License-Identifier: BSD-3-Clause */
/* tls_fixture.c -- see tls_fixture.h */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tls_fixture.h"

/* One shell script makes the whole set: a CA, then leaves signed by it (x509 -req with an
 * extension file, so a leaf never inherits the CA's basicConstraints from openssl.cnf). A
 * negative -days gives a certificate whose notAfter is already past: "expired". */
static const char pki_script[] =
    "set -e\n"
    "key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out \"$1.key\"; }\n"
    "ca() { key \"$1\"; openssl req -x509 -new -key \"$1.key\" -out \"$1.crt\" -days 2 -subj \"/CN=$2\"; }\n"
    "leaf() {\n"
    "  key \"$1\"\n"
    "  openssl req -new -key \"$1.key\" -out \"$1.csr\" -subj \"/CN=$2\"\n"
    "  printf '%s\\n' \"$4\" > \"$1.ext\"\n"
    "  openssl x509 -req -in \"$1.csr\" -CA \"$3.crt\" -CAkey \"$3.key\" -CAcreateserial \\\n"
    "    -out \"$1.crt\" -days \"$5\" -extfile \"$1.ext\"\n"
    "}\n"
    "ca ca 'hilock test CA'\n"
    "ca client-ca 'hilock client CA'\n"
    "leaf server localhost ca 'subjectAltName=DNS:localhost,IP:127.0.0.1' 2\n"
    "leaf other redis.other.example ca 'subjectAltName=DNS:redis.other.example' 2\n"
    "leaf expired localhost ca 'subjectAltName=DNS:localhost,IP:127.0.0.1' -1\n"
    "leaf client hilock-client client-ca 'extendedKeyUsage=clientAuth' 2\n"
    "leaf stranger hilock-client ca 'extendedKeyUsage=clientAuth' 2\n"
    "openssl pkey -in client.key -aes256 -passout pass:secret -out client-encrypted.key\n";

static void path(char *out, const hlt_pki *p, const char *file)
{
    snprintf(out, HLT_PKI_PATH, "%s/%s", p->dir, file);
}

static void keypair(hlt_keypair *k, const hlt_pki *p, const char *name)
{
    snprintf(k->crt, sizeof k->crt, "%s/%s.crt", p->dir, name);
    snprintf(k->key, sizeof k->key, "%s/%s.key", p->dir, name);
}

static void name_files(hlt_pki *p)
{
    path(p->ca, p, "ca.crt");
    path(p->client_ca, p, "client-ca.crt");
    keypair(&p->server, p, "server");
    keypair(&p->other, p, "other");
    keypair(&p->expired, p, "expired");
    keypair(&p->client, p, "client");
    keypair(&p->stranger, p, "stranger");
    path(p->client_encrypted_key, p, "client-encrypted.key");
}

hlt_pki *hlt_pki_make(void)
{
    char cmd[sizeof pki_script + 512];
    hlt_pki *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    snprintf(p->dir, sizeof p->dir, "/tmp/hilock-pki-XXXXXX");
    if (!mkdtemp(p->dir)) {
        perror("mkdtemp");
        free(p);
        return NULL;
    }
    name_files(p);
    snprintf(cmd, sizeof cmd, "cd '%s' && { %s} >openssl.log 2>&1", p->dir, pki_script);
    if (system(cmd) != 0) {
        snprintf(cmd, sizeof cmd, "cat '%s/openssl.log' >&2", p->dir);
        fprintf(stderr, "tls_fixture: openssl failed:\n");
        if (system(cmd) != 0) fprintf(stderr, "(no log)\n");
        hlt_pki_free(p);
        return NULL;
    }
    return p;
}

void hlt_pki_free(hlt_pki *p)
{
    char cmd[256];
    if (!p) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", p->dir);
    if (p->dir[0] && system(cmd) != 0) fprintf(stderr, "tls_fixture: could not remove %s\n", p->dir);
    free(p);
}

/* The TLS port is ours to pick (hlt_redis_start picks only the plain one, which --port 0
 * then turns off): if it was taken in between, the server fails to start; try another. */
hlt_redis *hlt_tls_redis_start(const hlt_pki *p, hlt_tls_cert cert, int auth_clients, const char *more)
{
    const hlt_keypair *k = cert == HLT_CERT_OTHER ? &p->other : cert == HLT_CERT_EXPIRED ? &p->expired : &p->server;
    char extra[512];
    for (int tries = 0; tries < 5; tries++) {
        int port = hlt_free_port();
        hlt_redis *r;
        int n = snprintf(extra, sizeof extra,
                         "--port 0 --tls-port %d --tls-cert-file %s --tls-key-file %s "
                         "--tls-ca-cert-file %s --tls-auth-clients %s %s",
                         port, k->crt, k->key, p->client_ca, auth_clients ? "yes" : "no", more ? more : "");
        if (n < 0 || (size_t)n >= sizeof extra) {   /* (hlt_redis keeps 512 bytes of arguments) */
            fprintf(stderr, "tls_fixture: redis-server arguments too long\n");
            return NULL;
        }
        if ((r = hlt_redis_start(extra)) != NULL) {
            r->port = port;   /* restarts: `--port P ... --port 0 --tls-port P`, the last wins */
            snprintf(r->url, sizeof r->url, "rediss://127.0.0.1:%d", port);
            return r;
        }
    }
    return NULL;
}
