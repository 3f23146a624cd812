/* SPDX-License-Identifier: BSD-3-Clause */
/* tls_fixture.h -- throwaway certificates and redis-servers on a TLS port, for the TLS tests.
 * The certificates are made with the `openssl` command (EC P-256 keys: fast) in a temp dir of
 * their own; the servers are tests/fixture.h servers (they die with the test) whose plain TCP
 * port is off; their unix socket stays plain, so hlt_cmd() reads state back as usual. */
#ifndef HILOCK_TEST_TLS_FIXTURE_H
#define HILOCK_TEST_TLS_FIXTURE_H

#include "fixture.h"

#define HLT_PKI_PATH 192

/* Every file is PEM. Servers and clients have
 * CAs of their own, as often in practice; and so a server, which trusts only client_ca,
 * sends its certificate alone (OpenSSL completes a server's chain from its trust store):
 * a client without ca cannot find the issuer. */
typedef struct hlt_keypair {
    char crt[HLT_PKI_PATH], key[HLT_PKI_PATH];
} hlt_keypair;

typedef struct hlt_pki {
    char dir[128];
    char ca[HLT_PKI_PATH];          /* the servers' CA: signed server, other, expired (and stranger) */
    char client_ca[HLT_PKI_PATH];   /* the clients' CA, trusted by the servers: signed client */
    hlt_keypair server;             /* DNS:localhost, IP:127.0.0.1 */
    hlt_keypair other;              /* DNS:redis.other.example only */
    hlt_keypair expired;            /* as server, expired yesterday */
    hlt_keypair client;             /* a client certificate */
    hlt_keypair stranger;           /* a client certificate from the wrong CA (ca) */
    char client_encrypted_key[HLT_PKI_PATH];   /* client.key under the passphrase "secret" */
} hlt_pki;

/* Make all of the above. NULL (and prints why, with openssl's own log) on failure. */
hlt_pki *hlt_pki_make(void);
/* Remove the dir and free. NULL-safe. */
void hlt_pki_free(hlt_pki *p);

typedef enum hlt_tls_cert { HLT_CERT_SERVER, HLT_CERT_OTHER, HLT_CERT_EXPIRED } hlt_tls_cert;

/* A redis-server that speaks only TLS on 127.0.0.1: r->port is its TLS port and r->url
 * "rediss://127.0.0.1:PORT". It presents `cert`, trusts p->client_ca for client certificates and,
 * with auth_clients, refuses clients without one (`--tls-auth-clients yes`); extra = more
 * redis-server arguments ("--tls-protocols TLSv1.2") or NULL. Restart keeps all that; stop
 * with hlt_redis_stop. NULL (and prints why) on failure. */
hlt_redis *hlt_tls_redis_start(const hlt_pki *p, hlt_tls_cert cert, int auth_clients, const char *extra);

#endif
