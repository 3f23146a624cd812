/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cluster_tools.c -- `hilock inventory` and `hilock inspect` on a redis-cluster:// URL
 * ($(B)/hilock, run as a user runs it) and the calls under them (hilock_inspect.h: the cluster
 * part): every master of the slot map is scanned and named, inspect shows the key's owner and
 * each replica's own view, a master that is down is named and fails the run while the rest is
 * still reported.
 *
 * One real cluster (3 masters + 3 replicas, cluster_fixture.h) serves the suite, started by
 * the runner; tests that cut replication or kill a node take it alone and heal it. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checks.h"
#include "cluster_fixture.h"
#include "fixture.h"
#include "hilock.h"
#include "hilock_inspect.h"
#include "tls_fixture.h"

HLT_CLUSTER_SHARE_HOOK("test_cluster_tools", 0)
HLT_CLUSTER_UNSHARE_HOOK()

HLT_CLUSTER_SHARED_SUITE(cluster_tools)

/* ---- the command ---- */

typedef struct run_out {
    int  status;        /* exit status; -1: did not end in time */
    char out[1 << 16];
    char err[8192];
} run_out;

/* $(B)/hilock -s url args... (stdout, stderr in files of the cluster's dir) */
static run_out *run_url(hlt_cluster *f, const char *url, const char *const *args)
{
    char bin[PATH_MAX], o[300], e[300];
    const char *argv[20];
    run_out *res = calloc(1, sizeof *res);
    int n = 0;
    cr_assert_not_null(res);
    cr_assert_eq(hlt_built_bin(bin, sizeof bin, "hilock"), 0, "%s not built", bin);
    argv[n++] = "-s";
    argv[n++] = url;
    while (*args && n < 19) argv[n++] = *args++;
    argv[n] = NULL;
    snprintf(o, sizeof o, "%s/tools-out.%d", f->dir, (int)getpid());
    snprintf(e, sizeof e, "%s/tools-err.%d", f->dir, (int)getpid());
    res->status = hlt_reap(hlt_spawn_to(bin, argv, NULL, o, e), 30000);   /* -1: did not end in time */
    hlt_read_file(o, res->out, sizeof res->out);
    hlt_read_file(e, res->err, sizeof res->err);
    unlink(o);
    unlink(e);
    return res;
}

static run_out *run(hlt_cluster *f, const char *const *args) { return run_url(f, f->url, args); }

/* python3 runs `check` (a Python expression over `lines`: the parsed JSON lines of out) and
 * it must be true. Without python3 the lines are not parsed (a warning). */
static void assert_json(hlt_cluster *f, const char *out, const char *check)
{
    char file[300], cmd[2000];
    FILE *fp;
    if (system("command -v python3 >/dev/null 2>&1") != 0) {
        cr_log_warn("no python3: the JSON lines are not parsed");
        return;
    }
    snprintf(file, sizeof file, "%s/tools-json.%d", f->dir, (int)getpid());
    cr_assert_not_null(fp = fopen(file, "w"));
    fputs(out, fp);
    fclose(fp);
    snprintf(cmd, sizeof cmd, "python3 -c 'import json, sys\nlines = [json.loads(l) for l in open(sys.argv[1])]\n"
             "sys.exit(0 if (%s) else 1)' %s", check, file);
    cr_assert_eq(system(cmd), 0, "the JSON lines do not satisfy %s:\n%.3000s", check, out);
    unlink(file);
}

/* ---- the cluster ---- */

/* A key named prefix<N> whose slot is served by master m. */
static void key_on(hlt_cluster *f, int m, const char *prefix, char *buf, size_t cap)
{
    cr_assert_eq(hlt_cluster_key_on(f, m, prefix, NULL, buf, cap), 0, "no key on master %d", m);
}

static void masters(hlt_cluster *f, int m[3])
{
    cr_assert_eq(hlt_cluster_masters(f, m), 3, "the cluster has not 3 masters");
}

static void cmd_ok(int i, const char *what, redisReply *r)
{
    cr_assert(r && r->type != REDIS_REPLY_ERROR, "node %d: %s: %s", i, what, r ? r->str : "no answer");
    freeReplyObject(r);
}

/* Wait (up to 10 s) until replica r holds key with value (READONLY on its own connection:
 * WAIT on a fresh connection waits for nothing, its client wrote nothing). */
static void replica_has(hlt_cluster *f, int r, const char *key, const char *value)
{
    char sock[300];
    redisContext *x;
    int ok = 0;
    snprintf(sock, sizeof sock, "%s/n%d/sock", f->dir, r);
    cr_assert(x = redisConnectUnix(sock), "node %d", r);
    freeReplyObject(redisCommand(x, "READONLY"));
    for (int k = 0; k < 1000 && !ok; k++) {
        redisReply *g = redisCommand(x, "GET %s", key);
        ok = g && g->type == REDIS_REPLY_STRING && !strcmp(g->str, value);
        if (g) freeReplyObject(g);
        if (!ok) hlt_sleep_ms(10);
    }
    redisFree(x);
    cr_assert(ok, "replica %d does not have %s = %s", r, key, value);
}

/* Keys prefix<N> on each master: 1 + its rank keys on master m[rank] (1, 2, 3: tells them
 * apart by count), each SET to "v-<key>" and on its master's replica before this returns. */
static void seed_masters(hlt_cluster *f, const int m[3], const char *prefix, char keys[6][64], int owner[6])
{
    int k = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j <= i; j++, k++) {
            char p[48];
            snprintf(p, sizeof p, "%s%d.", prefix, j);
            key_on(f, m[i], p, keys[k], sizeof keys[k]);
            owner[k] = m[i];
            cmd_ok(m[i], "SET", hlt_cluster_cmd(f, m[i], "SET %s v-%s", keys[k], keys[k]));
        }
    for (k = 0; k < 6; k++) {
        char v[80];
        snprintf(v, sizeof v, "v-%s", keys[k]);
        replica_has(f, hlt_cluster_replica_of(f, owner[k]), keys[k], v);
    }
}

static void heal(hlt_cluster *f)
{
    cr_assert_eq(hlt_cluster_heal_every(f, 30000), 0, "the cluster did not heal (stderr says why)");
}

/* ---- inventory ---- */

Test(cluster_tools, inventory_scans_every_master_and_names_where_each_key_is)
{
    hlt_cluster *f = fx(0);
    char keys[6][64], name[3][64], want[256], check[1024];
    int m[3], owner[6];
    run_out *o;
    masters(f, m);
    seed_masters(f, m, "inv1:", keys, owner);
    for (int i = 0; i < 3; i++) snprintf(name[i], sizeof name[i], "cluster 127.0.0.1:%d", f->port[m[i]]);
    {
        const char *a[] = { "inventory", "inv1:*", NULL };
        o = run(f, a);
    }
    cr_assert_eq(o->status, 0, "status %d: %s", o->status, o->err);
    cr_assert(strstr(o->out, "hilock inventory: 6 keys on 3 masters ("), "%s", o->out);
    for (int i = 0; i < 3; i++) {   /* master m[i] holds i + 1 keys */
        cr_assert(strstr(hlt_line_with(o->out, "hilock inventory:"), name[i]), "%s", o->out);
        snprintf(want, sizeof want, "\nfamily \"inv1:*\" on %s: %d key%s\n", name[i], i + 1, i ? "s" : "");
        cr_assert(strstr(o->out, want), "%s not in:\n%s", want + 1, o->out);
    }
    free(o);
    {
        const char *a[] = { "inventory", "--json", "inv1:*", NULL };
        o = run(f, a);
    }
    cr_assert_eq(o->status, 0, "status %d: %s", o->status, o->err);
    for (int k = 0; k < 6; k++) {   /* each key's line names its master */
        char kq[512], mq[96];
        snprintf(kq, sizeof kq, "\"key\":\"%s\"", keys[k]);
        snprintf(mq, sizeof mq, "{\"master\":\"cluster 127.0.0.1:%d\",", f->port[owner[k]]);
        cr_assert(!strncmp(hlt_line_with(o->out, kq), mq, strlen(mq)), "%s: %s", mq, hlt_line_with(o->out, kq));
    }
    snprintf(check, sizeof check,
             "len(lines) == 7 and sorted(lines[-1][\"summary\"][\"masters\"]) == sorted([\"%s\", \"%s\", \"%s\"]) "
             "and lines[-1][\"summary\"][\"keys\"] == 6 and lines[-1][\"summary\"][\"incomplete\"] is None "
             "and all(l[\"value\"] == \"v-\" + l[\"key\"] for l in lines[:-1])",
             name[0], name[1], name[2]);
    assert_json(f, o->out, check);
    free(o);
}

/* ---- inspect ---- */

Test(cluster_tools, inspect_shows_the_owner_and_each_replicas_own_view)
{
    hlt_cluster *f;
    HLT_NEEDS(40000, "locks on a cluster need Redis 4.0 (failover awareness)");
    f = fx(1);   /* cuts a replica's link */
    hilock_client *c;
    hilock *l;
    char key[64], owner[64], replica[64], token[40], line[512], check[1024];
    int m[3], r;
    run_out *o;
    masters(f, m);
    key_on(f, m[1], "insp:", key, sizeof key);
    cr_assert_geq(r = hlt_cluster_replica_of(f, m[1]), 0);
    snprintf(owner, sizeof owner, "cluster 127.0.0.1:%d", f->port[m[1]]);
    snprintf(replica, sizeof replica, "127.0.0.1:%d", f->port[r]);
    cr_assert_eq(hilock_client_open(f->url, &c), HILOCK_OK);
    cr_assert_eq(hilock_acquire(c, key, 60000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    snprintf(token, sizeof token, "%s", hilock_token(l));
    replica_has(f, r, key, token);
    {   /* in step: the same token on both */
        const char *a[] = { "inspect", "--json", key, NULL };
        o = run(f, a);
    }
    cr_assert_eq(o->status, 0, "status %d: %s", o->status, o->err);
    snprintf(check, sizeof check,
             "len(lines) == 2 and lines[0][\"master\"] == \"%s\" and lines[0][\"value\"] == \"%s\" "
             "and lines[1][\"replica\"] == \"%s\" and lines[1][\"of\"] == \"%s\" and lines[1][\"value\"] == \"%s\" "
             "and lines[1][\"holder\"] == \"modern\" and lines[1][\"fence\"] == lines[0][\"fence\"] "
             "and lines[1][\"same_as_master\"] is True and \"same_as_master\" not in lines[0]",
             owner, token, replica, owner, token);
    assert_json(f, o->out, check);
    free(o);
    /* the replica misses the release: its view keeps the token, the owner's has no key */
    cr_assert_eq(hlt_cluster_cut(f, r), 0);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    {
        const char *a[] = { "inspect", key, NULL };
        o = run(f, a);
    }
    hlt_cluster_heal(f, r);
    cr_assert_eq(o->status, 0, "status %d: %s", o->status, o->err);
    snprintf(line, sizeof line, "\"%s\" on %s\n  holder   nobody: no such key\n", key, owner);
    cr_assert(strstr(o->out, line), "%s not in:\n%s", line, o->out);
    snprintf(line, sizeof line, "\n\n\"%s\" on replica %s of %s\n  replica  DIFFERS from its master (it lags, "
             "lost its link, or missed a write)\n  holder   a modern lock (hilock token)\n", key, replica, owner);
    cr_assert(strstr(o->out, line), "%s not in:\n%s", line, o->out);
    snprintf(line, sizeof line, "  value    \"%s\"\n", token);
    cr_assert(strstr(o->out, line), "%s not in:\n%s", line, o->out);
    free(o);
    hilock_free(l);
    hilock_client_free(c);
    heal(f);
}

/* A node's view of the others lags theirs (gossip): right after a restart or a failover the
 * node that answers first may not know a replica as one. CLUSTER FORGET makes such a view on
 * a real server: for a minute master x does not list the key's replica at all. Asked first
 * (its seed first in the URL), x gives the map, and inspect still shows the replica's view,
 * which the other nodes name. The test's own cluster: a forgotten node comes back by gossip
 * only when the ban ends (a MEET did not bring it back on 7.2 and 7.4 within 30 s). */
Test(cluster_tools, inspect_shows_a_replica_that_the_node_giving_the_map_does_not_know)
{
    hlt_cluster *f;
    char key[64], url[sizeof f->url], want[256];
    int m[3], r, x;
    run_out *o;
    redisReply *id;
    HLT_NEEDS(40000, "CLUSTER FORGET's ban and the replica views as 4.0 has them");
    cr_assert_not_null(f = hlt_cluster_start(), "the cluster did not start");
    masters(f, m);
    x = m[0];
    key_on(f, m[1], "forgot:", key, sizeof key);
    cr_assert_geq(r = hlt_cluster_replica_of(f, m[1]), 0);
    cmd_ok(m[1], "SET", hlt_cluster_cmd(f, m[1], "SET %s v-%s", key, key));
    snprintf(want, sizeof want, "v-%s", key);
    replica_has(f, r, key, want);
    id = hlt_cluster_cmd(f, r, "CLUSTER MYID");
    cr_assert(id && id->type == REDIS_REPLY_STRING, "node %d: CLUSTER MYID", r);
    cmd_ok(x, "CLUSTER FORGET", hlt_cluster_cmd(f, x, "CLUSTER FORGET %s", id->str));
    freeReplyObject(id);
    snprintf(url, sizeof url, "redis-cluster://127.0.0.1:%d,%s", f->port[x], strstr(f->url, "://") + 3);
    {
        const char *a[] = { "inspect", key, NULL };
        o = run_url(f, url, a);
    }
    cr_assert_eq(o->status, 0, "status %d: %s\n%s", o->status, o->err, o->out);
    snprintf(want, sizeof want, "\"%s\" on replica 127.0.0.1:%d of cluster 127.0.0.1:%d\n  replica  the same value "
             "as its master\n", key, f->port[r], f->port[m[1]]);
    cr_assert(strstr(o->out, want), "%s not in:\n%s", want, o->out);
    free(o);
    hlt_cluster_stop(f);
}

/* ---- a master down ---- */

static void no_failover(hlt_cluster *f, int r, const char *yes)
{
    redisReply *x = hlt_cluster_cmd(f, r, "CONFIG SET cluster-replica-no-failover %s", yes);
    if (!x || x->type == REDIS_REPLY_ERROR) {   /* (4.0: the older name) */
        if (x) freeReplyObject(x);
        x = hlt_cluster_cmd(f, r, "CONFIG SET cluster-slave-no-failover %s", yes);
    }
    cmd_ok(r, "no-failover", x);
}

Test(cluster_tools, a_master_that_is_down_is_named_and_the_rest_is_still_reported)
{
    hlt_cluster *f;
    char keys[6][64], want[256];
    int m[3], owner[6], r;
    run_out *inv, *insp;
    HLT_NEEDS(40000, "no cluster-slave-no-failover before Redis 4.0");
    f = fx(1);
    masters(f, m);
    seed_masters(f, m, "down:", keys, owner);
    cr_assert_geq(r = hlt_cluster_replica_of(f, m[2]), 0);
    no_failover(f, r, "yes");   /* m[2] stays down, and named, for the whole test */
    hlt_cluster_kill(f, m[2]);
    {
        const char *a[] = { "inventory", "down:*", NULL };
        inv = run(f, a);
    }
    {   /* its key: the owner's error, the replica's view */
        const char *a[] = { "inspect", keys[5], NULL };
        insp = run(f, a);
    }
    cr_assert_eq(hlt_cluster_restart(f, m[2]), 0);   /* (healed before the asserts) */
    no_failover(f, r, "no");
    heal(f);
    cr_assert_eq(inv->status, 69, "status %d: %s\n%s", inv->status, inv->err, inv->out);
    snprintf(want, sizeof want, "hilock: scan: cluster 127.0.0.1:%d: connect: Connection refused", f->port[m[2]]);
    cr_assert(strstr(inv->err, want), "%s not in:\n%s", want, inv->err);
    cr_assert(strstr(inv->out, "hilock inventory: 3 keys on 3 masters"), "%s", inv->out);
    cr_assert(strstr(inv->out, "INCOMPLETE: a master failed"), "%s", inv->out);
    snprintf(want, sizeof want, "\nfamily \"down:*\" on cluster 127.0.0.1:%d: 2 keys\n", f->port[m[1]]);
    cr_assert(strstr(inv->out, want), "%s not in:\n%s", want, inv->out);   /* the live masters' part */
    cr_assert_eq(insp->status, 69, "status %d: %s\n%s", insp->status, insp->err, insp->out);
    snprintf(want, sizeof want, "\"%s\" on cluster 127.0.0.1:%d\n  error    ", keys[5], f->port[m[2]]);
    cr_assert(strstr(insp->out, want), "%s not in:\n%s", want, insp->out);
    snprintf(want, sizeof want, "\"%s\" on replica 127.0.0.1:%d of cluster 127.0.0.1:%d\n", keys[5], f->port[r],
             f->port[m[2]]);
    cr_assert(strstr(insp->out, want), "%s not in:\n%s\n(stderr: %s)", want, insp->out, insp->err);
    snprintf(want, sizeof want, "  value    \"v-%s\"\n", keys[5]);
    cr_assert(strstr(insp->out, want), "%s not in:\n%s", want, insp->out);
    snprintf(want, sizeof want, "127.0.0.1:%d: connect: Connection refused", f->port[m[2]]);
    cr_assert(strstr(insp->err, want), "%s not in:\n%s", want, insp->err);
    free(inv);
    free(insp);
}

/* ---- the calls ---- */

typedef struct listing {
    int    masters, replicas;
    size_t slots;
    char   first[64];
} listing;

static void on_node(size_t master, const hilock_cluster_node *n, void *arg)
{
    listing *l = arg;
    cr_assert_eq(master, 0);
    cr_assert_eq(strlen(n->id), 40);
    if (n->replica) {
        l->replicas++;
        cr_assert_eq(n->slots, 0);
        return;
    }
    if (!l->masters++) snprintf(l->first, sizeof l->first, "%s", n->addr);
    l->slots += n->slots;
}

static void on_view(size_t master, const hilock_lock_view *v, const char *error, void *arg)
{
    (void)master;
    (void)error;
    *(int *)arg = v && !strcmp(v->key.type, "none");
}

Test(cluster_tools, the_calls_list_every_node_and_refuse_what_is_not_in_the_map)
{
    hlt_cluster *f = fx(0);
    hilock_client *c;
    hlt_redis *single = hlt_redis_started(NULL);
    listing all = { 0 }, one = { 0 };
    uint64_t cur = 0;
    int none = 0;
    cr_assert_eq(hilock_client_open(f->url, &c), HILOCK_OK);
    cr_assert_eq(hilock_cluster_nodes(c, 0, NULL, on_node, &all), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(all.masters, 3);
    cr_assert_eq(all.replicas, 3);
    cr_assert_eq(all.slots, 16384);
    cr_assert_eq(hilock_cluster_nodes(c, 0, "a-key", on_node, &one), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(one.masters, 1);
    cr_assert_eq(one.replicas, 1);
    cr_assert_eq(hilock_inspect_node(c, 0, one.first, "a-key", on_view, &none), HILOCK_OK, "%s",
                 hilock_client_errmsg(c));
    cr_assert_eq(none, 1);
    cr_assert_eq(hilock_scan_node(c, 0, "127.0.0.1:1", "*", 10, &cur, NULL, NULL), HILOCK_EINVAL);
    cr_assert_eq(hilock_scan_node(c, 0, "127.0.0.1:1", "*", 10, &cur, (hilock_scan_fn)on_node, NULL), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(c), "127.0.0.1:1 is not a node of the slot map"), "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_cluster_nodes(c, 1, NULL, on_node, &all), HILOCK_EINVAL);
    hilock_client_free(c);
    cr_assert_eq(hilock_client_open(single->url, &c), HILOCK_OK);
    cr_assert_eq(hilock_cluster_nodes(c, 0, NULL, on_node, &all), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(c), " is not a cluster (a redis-cluster:// URL)"), "%s", hilock_client_errmsg(c));
    hilock_client_free(c);
    hlt_redis_stop(single);
}

Test(cluster_tools, a_cluster_whose_seeds_do_not_answer_is_named_and_fails_the_run)
{
    hlt_cluster *f = fx(0), dead = *f;
    hlt_redis *gone = hlt_redis_started(NULL);
    char want[200];
    run_out *o;
    hlt_redis_kill(gone);
    snprintf(dead.url, sizeof dead.url, "redis-cluster://127.0.0.1:%d", gone->port);
    {
        const char *a[] = { "inventory", "x:*", NULL };
        o = run(&dead, a);
    }
    snprintf(want, sizeof want, "hilock: cluster: no seed gave the slot map (seed 127.0.0.1:%d: connect: "
             "Connection refused)\n", gone->port);
    cr_assert_eq(o->status, 69, "status %d: %s", o->status, o->err);
    cr_assert_str_eq(o->err, want);
    cr_assert(!strncmp(o->out, "hilock inventory: 0 keys on 0 masters in ", 41), "%s", o->out);
    cr_assert(strstr(o->out, "INCOMPLETE: a master failed"), "%s", o->out);
    free(o);
    hlt_redis_stop(gone);
}

/* rediss-cluster://: each node is reached over TLS as the cluster's are (its own cluster, owned
 * by the test: TLS 6.0+). */
Test(cluster_tools, inventory_and_inspect_reach_every_node_of_a_tls_cluster)
{
    hlt_pki *pki;
    hlt_cluster *f;
    hlt_cluster_tls tls;
    char keys[6][64], want[200];
    int m[3], owner[6];
    run_out *o;
    HLT_NEEDS(60000, "no TLS before Redis 6.0");
    cr_assert_not_null(pki = hlt_pki_make());
    tls.crt = pki->server.crt;
    tls.key = pki->server.key;
    tls.ca = pki->ca;
    cr_assert_not_null(f = hlt_cluster_start_tls(&tls), "the TLS cluster did not start");
    masters(f, m);
    seed_masters(f, m, "tls:", keys, owner);
    {
        const char *a[] = { "--cacert", pki->ca, "inventory", "tls:*", NULL };
        o = run(f, a);
    }
    cr_assert_eq(o->status, 0, "status %d: %s", o->status, o->err);
    for (int i = 0; i < 3; i++) {
        snprintf(want, sizeof want, "\nfamily \"tls:*\" on cluster 127.0.0.1:%d: %d key%s\n", f->port[m[i]], i + 1,
                 i ? "s" : "");
        cr_assert(strstr(o->out, want), "%s not in:\n%s", want + 1, o->out);
    }
    free(o);
    /* The cluster was made just now: the node that gives the map may not list the replica as
     * one yet (its role reaches the other nodes by gossip), so inspect may be asked again */
    snprintf(want, sizeof want, " of cluster 127.0.0.1:%d\n  replica  the same value as its master\n", f->port[m[0]]);
    for (long long end = hlt_now_ms() + 15000;; hlt_sleep_ms(200)) {
        const char *a[] = { "--cacert", pki->ca, "inspect", keys[0], NULL };
        o = run(f, a);
        cr_assert_eq(o->status, 0, "status %d: %s", o->status, o->err);
        if (strstr(o->out, want) || hlt_now_ms() > end) break;
        free(o);
    }
    cr_assert(strstr(o->out, want), "%s not in:\n%s", want, o->out);
    free(o);
    hlt_cluster_stop(f);
    hlt_pki_free(pki);
}
