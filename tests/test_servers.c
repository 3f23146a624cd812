/* test_servers.c -- hilock on every server a fleet runs (Redis 2.8 to 7.4, Valkey): what each
 * connection learns of its server at connect, and how a feature a server lacks is refused or
 * degraded. Run against the redis-server first on PATH (make test-servers puts each server of
 * the matrix there); each test asserts what that server must give: success on a server that
 * has the feature, the refusal naming its version on one that has not. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "hilock.h"
#include "internal.h"   /* the facts a node's handshake read */

static hlt_redis *R;

static void setup(void)
{
    R = hlt_redis_start(NULL);
    cr_assert_not_null(R, "redis-server did not start");
}

static void teardown(void) { hlt_redis_stop(R); }

TestSuite(servers, .init = setup, .fini = teardown, .timeout = 60);

static hilock_client *client_with(const char *url, int fencing)
{
    hilock_options o;
    hilock_client *c = NULL;
    hilock_options_init(&o);
    o.servers = &url;
    o.nservers = 1;
    o.retry_delay_ms = 10;
    o.fencing = fencing;
    cr_assert_eq(hilock_client_new(&o, &c), HILOCK_OK, "%s", hilock_last_config_error());
    return c;
}



/* The server's clock now (TIME on the read-back connection), in ms. */
static long long server_ms(hlt_redis *r)
{
    redisReply *t = hlt_cmd(r, "TIME");
    long long ms;
    cr_assert(t && t->type == REDIS_REPLY_ARRAY && t->elements == 2);
    ms = atoll(t->element[0]->str) * 1000 + atoll(t->element[1]->str) / 1000;
    freeReplyObject(t);
    return ms;
}

/* Each new connection reads the server's version (INFO server) and clock (TIME) in its
 * handshake, once: the version as one number and the name for messages, the clock as the
 * server's TIME plus the monotonic time since. */
Test(servers, a_connection_reads_the_servers_version_and_clock_once_at_connect)
{
    hilock_client *c = client_with(R->url, 0);   /* (the plain SET: any server) */
    const hl_node *n = &c->nodes[0];
    long long before = hlt_info_int(R, "commandstats", "cmdstat_info:calls=");
    cr_assert_eq(hl_node_version(n), 0, "nothing known before the first connection");
    cr_assert_eq(hl_node_server_ms(n), -1);
    for (int i = 0; i < 5; i++) {
        hilock *l = NULL;
        cr_assert_eq(hilock_acquire(c, "hs:key", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
        cr_assert_eq(hilock_release(l), HILOCK_OK);
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
        long long theirs = server_ms(R), ours = hl_node_server_ms(n);
        cr_assert(ours > theirs - 2000 && ours < theirs + 2000, "server clock %lld vs %lld", ours, theirs);
    }
    hilock_client_free(c);
}
