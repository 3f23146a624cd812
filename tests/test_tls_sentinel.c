/* SPDX-License-Identifier: BSD-3-Clause */
/* test_tls_sentinel.c -- rediss-sentinel://: TLS to the Sentinels and to the data nodes.
 * Real processes (sentinel_fixture.h's TLS deployment: data nodes on TLS ports only,
 * replicating over TLS; Sentinels with tls-port and tls-replication yes), certificates made
 * by the test (tls_fixture.h). State is read back over each data node's plain unix socket.
 * Failovers as in test_sentinel.c: SENTINEL failover (clean), or for a lost lock the recipe
 * of docs/failover-facts.md, "The test beds" (cut replication, acquire, freeze the master). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clients.h"
#include "hilock.h"
#include "sentinel_fixture.h"
#include "tls_fixture.h"

static hlt_pki *pki;
static hlt_sentinel *F;

static void fini(void)
{
    hlt_sentinel_stop(F);
    F = NULL;
    hlt_pki_free(pki);
    pki = NULL;
}

TestSuite(tls_sentinel, .fini = fini, .timeout = 120);

static hlt_sentinel *fx(void)
{
    pki = hlt_pki_make();
    cr_assert_not_null(pki, "could not make the test certificates");
    F = hlt_sentinel_start_tls(pki->server.crt, pki->server.key, pki->ca);
    cr_assert_not_null(F, "TLS sentinel fixture did not start");
    return F;
}

/* A first handshake under valgrind spends seconds of CPU in OpenSSL. */
static long scaled(long ms)
{
    const char *v = getenv("VALGRIND");
    return v && *v == '1' ? ms * 20 : ms;
}

#define assert_msg(c, text)                                                                    \
    cr_assert(strstr(hilock_client_errmsg(c), (text)), "errmsg '%s' does not say '%s'",        \
              hilock_client_errmsg(c), (text))

/* data[i] holds `key` with our token (polled: replication is asynchronous). */
static int holds_within(int i, const char *key, const char *token, long ms)
{
    return hlt_data_holds_within(F, i, key, token, ms);
}

Test(tls_sentinel, acquire_extend_release_over_tls_sentinels_and_nodes)
{
    hilock_client *c;
    hilock *l = NULL;
    fx();
    cr_assert(!strncmp(F->url, "rediss-sentinel://", 18));
    hilock_options o = hlt_options((const char *[]){ F->url }, 1);
    o.tls_ca_file = pki->ca;
    o.connect_timeout_ms = o.io_timeout_ms = scaled(2000);
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "tjob", 30000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_sentinel_master(F), 0);
    cr_assert(holds_within(0, "tjob", hilock_token(l), 0), "the master does not hold our token");
    cr_assert(holds_within(1, "tjob", hilock_token(l), 3000), "the replica never got it (TLS replication)");
    cr_assert_eq(hilock_extend(l, 60000), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_data_exists(F, 0, "tjob"), 0);
    hilock_free(l);
    hilock_client_free(c);
}

Test(tls_sentinel, a_clean_failover_keeps_the_lock_and_moves_to_the_new_master)
{
    hilock_client *c1, *c2;
    hilock *l = NULL, *l2 = NULL;
    fx();
    hilock_options o = hlt_options((const char *[]){ F->url }, 1);
    o.tls_ca_file = pki->ca;
    o.connect_timeout_ms = o.io_timeout_ms = scaled(2000);
    c1 = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c1, "tjob", 30000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c1));
    cr_assert(holds_within(1, "tjob", hilock_token(l), 3000), "the replica never got the lock");
    cr_assert_eq(hlt_sentinel_failover(F, 0), 0, "failover did not complete");
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c1));
    assert_msg(c1, "");
    c2 = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c2, "tjob", 30000, 0, &l2), HILOCK_BUSY, "%s", hilock_client_errmsg(c2));
    cr_assert_null(l2);
    cr_assert_eq(hilock_extend(l, 40000), HILOCK_OK, "%s", hilock_client_errmsg(c1));
    {
        redisReply *r = hlt_data_cmd(F, 1, "PTTL tjob");
        cr_assert(r && r->type == REDIS_REPLY_INTEGER && r->integer > 30000, "the new master's ttl");
        freeReplyObject(r);
    }
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c1));
    cr_assert_eq(hlt_data_exists(F, 1, "tjob"), 0);
    hilock_free(l);
    hilock_client_free(c1);
    hilock_client_free(c2);
}

Test(tls_sentinel, a_lock_lost_in_a_failover_is_reported_lost)
{
    const int64_t ttl = 5000;
    hilock_client *c1, *c2;
    hilock *l = NULL, *l2 = NULL;
    fx();
    hilock_options o = hlt_options((const char *[]){ F->url }, 1);
    o.tls_ca_file = pki->ca;
    o.connect_timeout_ms = o.io_timeout_ms = scaled(2000);
    c1 = hlt_client_new(&o);
    cr_assert_eq(hlt_sentinel_cut(F, 1), 0, "could not cut replication");
    cr_assert_eq(hilock_acquire(c1, "tres", ttl, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c1));
    hlt_sleep_ms(200);
    cr_assert_eq(hlt_data_exists(F, 1, "tres"), 0, "the lock reached the replica: not a lost write");

    hlt_sentinel_freeze(F, 0);
    cr_assert_eq(hlt_sentinel_wait_switch(F, 1, 20000), 0, "no failover");
    hlt_sentinel_thaw(F, 0);   /* and it still believes it is the master, with our key */

    cr_assert_eq(hilock_check(l), HILOCK_LOST, "%s", hilock_client_errmsg(c1));
    assert_msg(c1, "no proof the lock survived");
    cr_assert_eq(hilock_extend(l, ttl), HILOCK_LOST, "%s", hilock_client_errmsg(c1));
    cr_assert_eq(hilock_release(l), HILOCK_LOST, "%s", hilock_client_errmsg(c1));
    /* the new master never had it, and guards against a second holder */
    c2 = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c2, "tres", ttl, 0, &l2), HILOCK_BUSY, "%s", hilock_client_errmsg(c2));
    assert_msg(c2, "failover guard");
    cr_assert_eq(hlt_data_exists(F, 1, "tres"), 0);
    hilock_free(l);
    hilock_client_free(c1);
    hilock_client_free(c2);
}

/* The Sentinels' certificate fails verification: each Sentinel is named, with the cause. */
Test(tls_sentinel, an_untrusted_sentinel_certificate_is_named)
{
    hilock_client *c;
    hilock *l = NULL;
    fx();
    hilock_options o = hlt_options((const char *[]){ F->url }, 1);
    o.tls_ca_file = pki->client_ca;
    o.connect_timeout_ms = o.io_timeout_ms = scaled(2000);
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "tjob", 30000, 0, &l), HILOCK_EIO, "%s", hilock_client_errmsg(c));
    cr_assert_null(l);
    assert_msg(c, "no Sentinel answered");
    assert_msg(c, "TLS: certificate verify failed");
    cr_assert_eq(hlt_data_exists(F, 0, "tjob"), 0);
    hilock_client_free(c);
}

/* The hilock command with args (stderr to /dev/null): its exit status. */
static int run_cli(const char **args)
{
    char bin[512];
    const char *argv[16] = { "hilock" };
    pid_t pid;
    size_t n = 1;
    cr_assert_eq(hlt_built_bin(bin, sizeof bin, "hilock"), 0, "build/hilock not built");
    while (*args && n < 15) argv[n++] = *args++;
    argv[n] = NULL;
    if ((pid = fork()) == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 2);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    return hlt_reap(pid, 30000);
}

/* --tls makes a redis-sentinel:// URL rediss-sentinel://, as it makes redis:// rediss:// */
Test(tls_sentinel, the_command_reaches_tls_sentinels_with_tls)
{
    char plain[512];
    fx();
    snprintf(plain, sizeof plain, "redis%s", F->url + 6);   /* "rediss-sentinel://" -> "redis-sentinel://" */
    {
        const char *with[] = { "--tls", "--cacert", pki->ca, "-n", "-s", plain, "tjob", "sh", "-c", "exit 7", NULL };
        const char *without[] = { "-n", "-w", "1", "-s", plain, "tjob", "true", NULL };
        cr_assert_eq(run_cli(with), 7, "COMMAND did not run under the lock");
        cr_assert_eq(hlt_data_exists(F, 0, "tjob"), 0, "the lock was not released");
        int rc = run_cli(without);
        cr_assert(rc != 0 && rc != 127, "plain redis-sentinel:// to TLS-only Sentinels: exit %d", rc);
    }
}
