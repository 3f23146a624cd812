/* SPDX-License-Identifier: BSD-3-Clause */
/* test_tls_cluster.c -- rediss-cluster:// against a real TLS-only Redis Cluster: 3 masters +
 * 3 replicas with `--port 0 --tls-port P --tls-cluster yes --tls-replication yes`, made by
 * tests/cluster_fixture.h with certificates from tests/tls_fixture.h, one for the suite (started
 * by the runner before the first test, stopped after the last). The state is read back on
 * each node's plain unix socket (the fixture's helpers) or with `redis-cli --tls`. None of
 * these tests breaks the cluster: they all share it. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster_fixture.h"
#include "clients.h"
#include "fixture.h"
#include "hilock.h"
#include "hilock_libuv.h"
#include "tls_fixture.h"

static hlt_pki *pki;   /* the runner's (the workers find the files through the cluster's view) */

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
    (void)set;
    if (!(pki = hlt_pki_make())) {
        fprintf(stderr, "test_tls_cluster: could not make the test certificates\n");
        return;
    }
    hlt_cluster_tls tls = {pki->server.crt, pki->server.key, pki->ca};
    if (hlt_cluster_share_tls(&tls) < 0) fprintf(stderr, "test_tls_cluster: the TLS cluster did not start\n");
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
    (void)stats;
    hlt_cluster_unshare();
    hlt_pki_free(pki);
}

static hlt_cluster *F;

/* A first handshake under valgrind spends seconds of CPU in OpenSSL (as test_tls.c). */
static int under_valgrind(void)
{
    const char *v = getenv("VALGRIND");
    return v && *v == '1';
}

static long scaled(long ms) { return under_valgrind() ? ms * 20 : ms; }

static void fini(void)
{
    hlt_cluster_stop(F);   /* a view: frees only */
    F = NULL;
}

TestSuite(tls_cluster, .fini = fini, .timeout = 120);

static hlt_cluster *fx(void)
{
    signal(SIGPIPE, SIG_DFL);   /* a SIGPIPE would kill the test: none must be raised */
    F = hlt_cluster_attach();
    cr_assert_not_null(F, "no cluster (the fixture did not start)");
    cr_assert_neq(F->tls_ca[0], 0, "the shared cluster is not a TLS one");
    hlt_cluster_shared_use(F);
    return F;
}

/* Clients here: hlt_options's trusting the cluster's CA, with room for the TLS handshake
 * (connect and io timeouts scaled(2000)), and no failover guard (as test_cluster). */

/* A key named prefix<N> whose slot is served by master m. */
static void key_on(int m, const char *prefix, char *buf, size_t cap)
{
    cr_assert_eq(hlt_cluster_key_on(F, m, prefix, NULL, buf, cap), 0, "no key on master %d", m);
}

/* The three masters' indexes (hlt_cluster_slot_master maps CLUSTER SLOTS' ports to port[]). */
static void masters(int m[3])
{
    cr_assert_eq(hlt_cluster_masters(F, m), 3, "the cluster has not 3 masters");
}

static int is_node_port(int port)
{
    for (int i = 0; i < HLT_CLUSTER_NODES; i++)
        if (F->port[i] == port) return 1;
    return 0;
}

/* What hilock reads to route (CLUSTER NODES), asked over TLS with redis-cli: every node is
 * announced at its TLS port (the only one: --port 0), and the slot map agrees. */
Test(tls_cluster, the_slot_map_names_the_tls_ports)
{
    char cmd[600], line[1024];
    FILE *p;
    int nodes = 0, mastered = 0, m[3];
    fx();
    snprintf(cmd, sizeof cmd, "redis-cli --tls --cacert %s -h 127.0.0.1 -p %d CLUSTER NODES", F->tls_ca, F->port[0]);
    cr_assert_not_null(p = popen(cmd, "r"));
    while (fgets(line, sizeof line, p)) {
        char id[64], addr[300], flags[200];
        const char *colon;
        if (sscanf(line, "%63s %299s %199s", id, addr, flags) != 3) continue;
        cr_assert_not_null(colon = strrchr(strtok(addr, "@"), ':'), "%s", line);
        cr_assert(!strncmp(addr, "127.0.0.1:", 10), "%s", line);
        cr_assert(is_node_port(atoi(colon + 1)), "CLUSTER NODES names port %d, not a TLS port: %s", atoi(colon + 1),
                  line);
        nodes++;
        mastered += strstr(flags, "master") != NULL;
    }
    cr_assert_eq(pclose(p), 0, "redis-cli --tls failed");
    cr_assert_eq(nodes, HLT_CLUSTER_NODES, "CLUSTER NODES over TLS listed %d nodes", nodes);
    cr_assert_eq(mastered, 3);
    masters(m);   /* CLUSTER SLOTS (unix socket): its ports are TLS ports too */
    for (int i = 0; i < HLT_CLUSTER_NODES; i++) {
        redisReply *r = hlt_cluster_cmd(F, i, "CONFIG GET port");
        cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && !strcmp(r->element[1]->str, "0"),
                  "node %d has a plain port", i);
        freeReplyObject(r);
    }
}

Test(tls_cluster, acquire_extend_check_release_on_keys_of_every_master)
{
    hilock_client *c;
    hilock *l[3];
    char key[3][64];
    int m[3];
    fx();
    hilock_options o = hlt_options((const char *[]){ F->url }, 1);
    o.tls_ca_file = F->tls_ca;
    o.connect_timeout_ms = o.io_timeout_ms = scaled(2000);
    o.failover_guard = 0;
    c = hlt_client_new(&o);
    masters(m);
    for (int i = 0; i < 3; i++) {
        char *v;
        key_on(m[i], "tlsc:", key[i], sizeof key[i]);
        cr_assert_eq(hilock_acquire(c, key[i], 10000, 0, &l[i]), HILOCK_OK, "%s", hilock_client_errmsg(c));
        v = hlt_cluster_get(F, m[i], key[i]);
        cr_assert(v && !strcmp(v, hilock_token(l[i])), "master %d does not hold %s", m[i], key[i]);
        free(v);
        cr_assert_gt(hilock_fence(l[i]), 0);
    }
    for (int i = 0; i < 3; i++) {
        redisReply *r;
        cr_assert_eq(hilock_check(l[i]), HILOCK_OK, "%s", hilock_client_errmsg(c));
        cr_assert_eq(hilock_extend(l[i], 60000), HILOCK_OK, "%s", hilock_client_errmsg(c));
        r = hlt_cluster_cmd(F, m[i], "PTTL %s", key[i]);
        cr_assert(r && r->type == REDIS_REPLY_INTEGER && r->integer > 10000, "the extend did not reach the master");
        freeReplyObject(r);
        cr_assert_eq(hilock_release(l[i]), HILOCK_OK, "%s", hilock_client_errmsg(c));
        cr_assert_eq(hlt_cluster_exists(F, m[i], key[i]), 0, "%s still on master %d", key[i], m[i]);
        cr_assert_eq(hilock_check(l[i]), HILOCK_NOT_HELD);
        hilock_free(l[i]);
    }
    hilock_client_free(c);
}

/* ---- on an event loop (libuv): the TLS handshakes, the slot map and the shards' calls ---- */

typedef struct loop_run { int done; hilock_status st[6]; hilock *l[6]; } loop_run;
typedef struct loop_arg { loop_run *r; int i; } loop_arg;

static void loop_done(hilock_status st, hilock *l, void *arg)
{
    loop_arg *a = arg;
    a->r->st[a->i] = st;
    if (l && !a->r->l[a->i]) a->r->l[a->i] = l;
    a->r->done++;
}

static void loop_guard(uv_timer_t *t) { *(int *)t->data = 1; }

static void loop_until(uv_loop_t *loop, const int *count, int want)
{
    uv_timer_t guard;
    int fired = 0;
    uv_timer_init(loop, &guard);
    guard.data = &fired;
    uv_timer_start(&guard, loop_guard, (uint64_t)scaled(10000), 0);
    while (*count < want && !fired) uv_run(loop, UV_RUN_ONCE);
    uv_timer_stop(&guard);
    uv_close((uv_handle_t *)&guard, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    cr_assert_geq(*count, want, "only %d of %d calls ended", *count, want);
}

/* rediss-cluster:// on a loop: keys of every master (two each, in flight at once) acquired
 * over TLS, held on their own masters, then released. */
Test(tls_cluster, keys_of_every_master_lock_on_an_event_loop)
{
    static loop_run r;
    static loop_arg args[6];
    uv_loop_t loop;
    hilock_client *c;
    char key[6][64];
    int m[3];
    fx();
    hilock_options o = hlt_options((const char *[]){ F->url }, 1);
    o.tls_ca_file = F->tls_ca;
    o.connect_timeout_ms = o.io_timeout_ms = scaled(2000);
    o.failover_guard = 0;
    c = hlt_client_new(&o);
    masters(m);
    uv_loop_init(&loop);
    memset(&r, 0, sizeof r);
    cr_assert_eq(hilock_libuv_attach(c, &loop), HILOCK_OK, "%s", hilock_client_errmsg(c));
    for (int i = 0; i < 6; i++) {
        key_on(m[i % 3], i < 3 ? "tlsloop:a" : "tlsloop:b", key[i], sizeof key[i]);
        args[i].r = &r;
        args[i].i = i;
        cr_assert_eq(hilock_acquire_async(c, key[i], 10000, 0, loop_done, &args[i]), HILOCK_OK);
    }
    loop_until(&loop, &r.done, 6);
    for (int i = 0; i < 6; i++) {
        char *v;
        cr_assert_eq(r.st[i], HILOCK_OK, "%s: %s", key[i], hilock_strerror(r.st[i]));
        v = hlt_cluster_get(F, m[i % 3], key[i]);
        cr_assert(v && !strcmp(v, hilock_token(r.l[i])), "master %d does not hold %s", m[i % 3], key[i]);
        free(v);
    }
    r.done = 0;
    for (int i = 0; i < 6; i++) cr_assert_eq(hilock_release_async(r.l[i], loop_done, &args[i]), HILOCK_OK);
    loop_until(&loop, &r.done, 6);
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(r.st[i], HILOCK_OK, "release %s: %s", key[i], hilock_strerror(r.st[i]));
        cr_assert_eq(hlt_cluster_exists(F, m[i % 3], key[i]), 0, "%s still on master %d", key[i], m[i % 3]);
        hilock_free(r.l[i]);
    }
    hilock_client_free(c);
    uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_eq(uv_loop_close(&loop), 0, "handles left open on the loop");
}

/* One seed, a replica: every master is reached at the TLS port the slot map names, over TLS. */
Test(tls_cluster, one_seed_is_enough_the_masters_are_reached_at_their_announced_tls_ports)
{
    char url[64], key[64];
    hilock_client *c;
    int m[3], r;
    fx();
    masters(m);
    cr_assert_geq(r = hlt_cluster_replica_of(F, m[0]), 0, "no replica of master %d", m[0]);
    snprintf(url, sizeof url, "rediss-cluster://127.0.0.1:%d", F->port[r]);
    hilock_options o = hlt_options((const char *[]){ url }, 1);
    o.tls_ca_file = F->tls_ca;
    o.connect_timeout_ms = o.io_timeout_ms = scaled(2000);
    o.failover_guard = 0;
    c = hlt_client_new(&o);
    for (int i = 0; i < 3; i++) {
        hilock *l;
        char *v;
        key_on(m[i], "tlsc:seed:", key, sizeof key);
        cr_assert_eq(hilock_acquire(c, key, 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
        v = hlt_cluster_get(F, m[i], key);
        cr_assert(v && !strcmp(v, hilock_token(l)), "master %d does not hold %s", m[i], key);
        free(v);
        cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
        cr_assert_eq(hlt_cluster_exists(F, m[i], key), 0);
        hilock_free(l);
    }
    hilock_client_free(c);
}

/* A slow link to node i: a relay on 127.0.0.1 (listening before this returns) that forwards
 * every chunk, either way, after delay_ms; one connection at a time. It dies with the test
 * (PR_SET_PDEATHSIG) and after 60 s at most (alarm). Its port, or -1. */
static int slow_link(int i, int delay_ms, pid_t *pid)
{
    struct sockaddr_in a = {0};
    socklen_t al = sizeof a;
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 4) ||
        getsockname(ls, (struct sockaddr *)&a, &al))
        return -1;
    if ((*pid = fork()) == 0) {
        struct sockaddr_in up = a;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        alarm(60);
        up.sin_port = htons((uint16_t)F->port[i]);
        for (;;) {
            int c = accept(ls, NULL, NULL), u = socket(AF_INET, SOCK_STREAM, 0);
            struct pollfd p[2] = {{c, POLLIN, 0}, {u, POLLIN, 0}};
            char buf[16384];
            ssize_t n = 1;
            if (c < 0 || u < 0 || connect(u, (struct sockaddr *)&up, sizeof up)) _exit(1);
            while (n > 0 && poll(p, 2, -1) > 0)
                for (int k = 0; k < 2 && n > 0; k++)
                    if (p[k].revents && (n = read(p[k].fd, buf, sizeof buf)) > 0) {
                        hlt_sleep_ms(delay_ms);
                        n = write(p[1 - k].fd, buf, (size_t)n);
                    }
            close(c);
            close(u);
        }
    }
    close(ls);
    return *pid > 0 ? ntohs(a.sin_port) : -1;
}

/* The only seed is 200 ms away each way: the TLS handshake and CLUSTER NODES take ~1 s,
 * more than a seed's 300 ms; as the last seed it gets the rest of the connect timeout. */
Test(tls_cluster, a_single_seed_behind_a_slow_link_gives_the_slot_map)
{
    char url[64];
    hilock_client *c;
    hilock *l;
    pid_t relay;
    int port;
    fx();
    cr_assert_gt(port = slow_link(0, 200, &relay), 0, "no relay");
    snprintf(url, sizeof url, "rediss-cluster://127.0.0.1:%d", port);
    hilock_options o = hlt_options((const char *[]){ url }, 1);
    o.tls_ca_file = F->tls_ca;
    o.connect_timeout_ms = o.io_timeout_ms = scaled(2000);
    o.failover_guard = 0;
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "tlsc:{far}", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_cluster_exists(F, hlt_cluster_key_master(F, "tlsc:{far}"), "tlsc:{far}"), 1);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_cluster_exists(F, hlt_cluster_key_master(F, "tlsc:{far}"), "tlsc:{far}"), 0);
    hilock_free(l);
    hilock_client_free(c);
    kill(relay, SIGKILL);
    waitpid(relay, NULL, 0);
}

/* Over TLS the key is also read back with redis-cli --tls -c, following MOVED on TLS ports. */
Test(tls_cluster, a_second_client_sees_the_lock_held_and_is_busy)
{
    hilock_client *a, *b;
    hilock *l, *l2 = NULL;
    char cmd[600], out[128] = "";
    FILE *p;
    fx();
    hilock_options o = hlt_options((const char *[]){ F->url }, 1);
    o.tls_ca_file = F->tls_ca;
    o.connect_timeout_ms = o.io_timeout_ms = scaled(2000);
    o.failover_guard = 0;
    a = hlt_client_new(&o);
    b = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(a, "tlsc:{held}", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(a));
    cr_assert_eq(hilock_acquire(b, "tlsc:{held}", 10000, 0, &l2), HILOCK_BUSY, "%s", hilock_client_errmsg(b));
    cr_assert_null(l2);
    snprintf(cmd, sizeof cmd, "redis-cli --tls --cacert %s -c -h 127.0.0.1 -p %d GET 'tlsc:{held}'", F->tls_ca,
             F->port[0]);
    cr_assert_not_null(p = popen(cmd, "r"));
    if (!fgets(out, sizeof out, p)) out[0] = 0;
    cr_assert_eq(pclose(p), 0);
    out[strcspn(out, "\n")] = 0;
    cr_assert_str_eq(out, hilock_token(l), "redis-cli --tls reads '%s'", out);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(a));
    cr_assert_eq(hilock_acquire(b, "tlsc:{held}", 10000, 0, &l2), HILOCK_OK, "%s", hilock_client_errmsg(b));
    cr_assert_eq(hilock_release(l2), HILOCK_OK, "%s", hilock_client_errmsg(b));
    cr_assert_eq(hlt_cluster_exists(F, hlt_cluster_key_master(F, "tlsc:{held}"), "tlsc:{held}"), 0);
    hilock_free(l);
    hilock_free(l2);
    hilock_client_free(a);
    hilock_client_free(b);
}

/* Keys on every shard, waiters on each: each is woken by the release (polling would take 5 s). */
Test(tls_cluster, wake_on_release_reaches_a_waiter_on_every_shard)
{
    hilock_client *c;
    hilock *l[3];
    char key[3][64];
    pid_t kid[3];
    int m[3];
    long long t0;
    fx();
    hilock_options o = hlt_options((const char *[]){ F->url }, 1);
    o.tls_ca_file = F->tls_ca;
    o.connect_timeout_ms = o.io_timeout_ms = scaled(2000);
    o.failover_guard = 0;
    c = hlt_client_new(&o);
    masters(m);
    for (int i = 0; i < 3; i++) {
        key_on(m[i], "tlsc:wake:", key[i], sizeof key[i]);
        cr_assert_eq(hilock_acquire(c, key[i], 30000, 0, &l[i]), HILOCK_OK, "%s", hilock_client_errmsg(c));
    }
    for (int i = 0; i < 3; i++)
        if ((kid[i] = fork()) == 0) {
            hilock_options o = hlt_options((const char *[]){ F->url }, 1);
            hilock_client *w;
            hilock *wl;
            o.tls_ca_file = F->tls_ca;
            o.connect_timeout_ms = o.io_timeout_ms = scaled(2000);
            o.retry_delay_ms = 30000;   /* polling: 30 s */
            o.failover_guard = 0;
            if (hilock_client_new(&o, &w) != HILOCK_OK) _exit(2);   /* (a child: no assert) */
            if (hilock_acquire(w, key[i], 30000, 60000, &wl) != HILOCK_OK) _exit(3);
            if (hilock_release(wl) != HILOCK_OK) _exit(4);
            hilock_free(wl);
            hilock_client_free(w);
            _exit(0);
        }
    hlt_sleep_ms(scaled(500));   /* the waiters block on their signal lists by now (handshakes included) */
    t0 = hlt_now_ms();
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(hilock_release(l[i]), HILOCK_OK, "%s", hilock_client_errmsg(c));
        hilock_free(l[i]);
    }
    for (int i = 0; i < 3; i++) cr_assert_eq(hlt_reap(kid[i], 60000), 0, "waiter on master %d", m[i]);
    cr_assert_lt(hlt_now_ms() - t0, under_valgrind() ? 15000 : 3000, "a waiter was not woken (polling?)");
    for (int i = 0; i < 3; i++) cr_assert_eq(hlt_cluster_exists(F, m[i], key[i]), 0);
    hilock_client_free(c);
}

/* The client trusts another CA: the handshake with the node fails, and errmsg says which node
 * and why; nothing is written. */
Test(tls_cluster, an_untrusted_ca_is_a_tls_error_naming_the_node)
{
    char ca[HLT_CLUSTER_PATH + 32], node[64];
    hilock_client *c;
    hilock *l = NULL;
    hilock_status st;
    long long t0;
    fx();
    snprintf(ca, sizeof ca, "%.*s/client-ca.crt", (int)(strrchr(F->tls_ca, '/') - F->tls_ca), F->tls_ca);
    cr_assert_eq(access(ca, R_OK), 0, "%s", ca);
    hilock_options o = hlt_options((const char *[]){ F->url }, 1);
    o.tls_ca_file = ca;
    o.connect_timeout_ms = o.io_timeout_ms = scaled(2000);
    o.failover_guard = 0;
    c = hlt_client_new(&o);
    t0 = hlt_now_ms();
    st = hilock_acquire(c, "tlsc:untrusted", 10000, 0, &l);
    cr_assert_neq(st, HILOCK_OK);
    cr_assert_null(l);
    cr_assert_lt(hlt_now_ms() - t0, scaled(10000), "no answer within the bound");
    cr_log_info("untrusted CA: %s: %s", hilock_strerror(st), hilock_client_errmsg(c));
    snprintf(node, sizeof node, "127.0.0.1:%d: TLS: certificate verify failed", F->port[0]);
    cr_assert(strstr(hilock_client_errmsg(c), node), "'%s' (%s) should say '%s'", hilock_client_errmsg(c),
              hilock_strerror(st), node);
    cr_assert_eq(hlt_cluster_exists(F, hlt_cluster_key_master(F, "tlsc:untrusted"), "tlsc:untrusted"), 0);
    hilock_client_free(c);
}

/* redis-cluster:// (plain) to the TLS ports: the nodes drop the connection without a byte. */
Test(tls_cluster, a_plain_cluster_url_says_the_server_may_require_tls)
{
    char url[sizeof F->url], node[64];
    hilock_client *c;
    hilock *l = NULL;
    hilock_status st;
    long long t0;
    fx();
    snprintf(url, sizeof url, "redis-cluster://%s", F->url + strlen("rediss-cluster://"));
    hilock_options o = hlt_options((const char *[]){ url }, 1);
    o.tls_ca_file = F->tls_ca;
    o.connect_timeout_ms = o.io_timeout_ms = scaled(2000);
    o.failover_guard = 0;
    c = hlt_client_new(&o);
    t0 = hlt_now_ms();
    st = hilock_acquire(c, "tlsc:plain", 10000, 0, &l);
    cr_assert_neq(st, HILOCK_OK);
    cr_assert_null(l);
    cr_assert_lt(hlt_now_ms() - t0, scaled(10000), "no answer within the bound");
    cr_log_info("plain URL: %s: %s", hilock_strerror(st), hilock_client_errmsg(c));
    snprintf(node, sizeof node, "127.0.0.1:%d", F->port[0]);
    cr_assert(strstr(hilock_client_errmsg(c), node), "'%s' should name %s", hilock_client_errmsg(c), node);
    cr_assert(strstr(hilock_client_errmsg(c), "the server may require TLS"), "'%s' (%s)", hilock_client_errmsg(c),
              hilock_strerror(st));
    cr_assert_eq(hlt_cluster_exists(F, hlt_cluster_key_master(F, "tlsc:plain"), "tlsc:plain"), 0);
    hilock_client_free(c);
}

/* The command with a rediss-cluster:// URL and --cacert: its child sees the lock held
 * (redis-cli --tls -c follows MOVED), and it is released at the end. */
/* hilock holding "tlsc:{cli}" (checked from COMMAND with redis-cli) then releasing it, with
 * server url and, if flag, one more option before it (--tls). */
static void command_locks_over_tls(const char *url, const char *flag)
{
    char bin[512], port[16];
    pid_t kid;
    cr_assert_eq(hlt_built_bin(bin, sizeof bin, "hilock"), 0, "%s not built", bin);
    snprintf(port, sizeof port, "%d", F->port[0]);
    const char *argv[] = {"/bin/sh", "sh", "-c", "exec \"$0\" \"$@\"", bin, "-s", url, "--cacert", F->tls_ca,
                          "-t", "2s", "-w", "20s", "tlsc:{cli}", "--", "sh", "-c",
                          "redis-cli --tls --cacert \"$1\" -c -p \"$0\" EXISTS 'tlsc:{cli}' | grep -qx 1", port,
                          F->tls_ca, NULL, NULL};
    if (flag) {   /* the flag goes before -s: shift the rest up by one */
        memmove(&argv[6], &argv[5], (sizeof argv / sizeof argv[0] - 7) * sizeof argv[0]);
        argv[5] = flag;
    }
    if ((kid = fork()) == 0) {
        /* Under valgrind the command runs natively, through sh (which valgrind does not
         * follow): its connect timeout is a fixed 1 s (no flag), less than an OpenSSL handshake
         * takes under valgrind; the library's own TLS paths are checked by the other tests. */
        if (under_valgrind()) execv(argv[0], (char *const *)argv + 1);
        else execv(bin, (char *const *)argv + 4);
        _exit(127);
    }
    cr_assert_eq(hlt_reap(kid, 20000), 0, "hilock %s %s failed", flag ? flag : "", url);
    cr_assert_eq(hlt_cluster_exists(F, hlt_cluster_key_master(F, "tlsc:{cli}"), "tlsc:{cli}"), 0, "not released");
}

Test(tls_cluster, the_hilock_command_accepts_a_rediss_cluster_url)
{
    fx();
    command_locks_over_tls(F->url, NULL);
}

/* --tls turns redis-cluster:// into rediss-cluster:// as it does the other schemes */
Test(tls_cluster, the_command_tls_flag_reaches_a_redis_cluster_url_over_tls)
{
    char plain[1024];
    fx();
    cr_assert(!strncmp(F->url, "rediss-cluster://", 17), "%s", F->url);
    snprintf(plain, sizeof plain, "redis-cluster://%s", F->url + 17);
    command_locks_over_tls(plain, "--tls");
}
