/* SPDX-License-Identifier: BSD-3-Clause */
/* cluster.c -- `make bench`, Redis Cluster (issue 12): uncontended acquire+release on a key of
 * a local cluster (tests/cluster_fixture.h) next to the same on a single master, in
 * interleaved slices (ratio = the median of slice ratios; target >= 0.9): 3 masters without
 * replicas next to a fresh single master, then 3 masters + 3 replicas next to a single
 * master feeding one replica; and what the first call of a new client costs (slot map +
 * connects). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "cluster_fixture.h"

#define SLICES 8
#define KEY    "bench:cluster"

/* Cycles of acquire+release on key for secs seconds; returns cycles/s. */
static double cycles(hilock_client *c, const char *key, double secs)
{
    int64_t end = now_us() + (int64_t)(secs * 1e6), t0 = now_us();
    long n = 0;
    hilock *l;
    while (now_us() < end) {
        if (hilock_acquire(c, key, 10000, 0, &l) != HILOCK_OK) die("cluster bench acquire", hilock_client_errmsg(c));
        if (hilock_release(l) != HILOCK_OK) die("cluster bench release", hilock_client_errmsg(c));
        hilock_free(l);
        n++;
    }
    return n / ((now_us() - t0) / 1e6);
}

/* The first acquire+release of a new client, and the second, in us (median of 20). */
static void first_call(const char *url, int64_t *first, int64_t *second)
{
    int64_t a[20], b[20];
    for (int i = 0; i < 20; i++) {
        hilock_client *c = client_with(&url, 1, NULL);
        hilock *l;
        for (int k = 0; k < 2; k++) {
            int64_t t0 = now_us();
            if (hilock_acquire(c, "bench:cluster:first", 10000, 0, &l) != HILOCK_OK)
                die("cluster bench first call", hilock_client_errmsg(c));
            hilock_release(l);
            hilock_free(l);
            (k ? b : a)[i] = now_us() - t0;
        }
        hilock_client_free(c);
    }
    qsort(a, 20, sizeof *a, cmp_i64);
    qsort(b, 20, sizeof *b, cmp_i64);
    *first = a[10];
    *second = b[10];
}

static double median_of(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void tune_guard(hilock_options *o) { o->failover_guard = 1; }

/* A master feeding one replica: the single-master twin of a shard with a replica. */
static hlt_redis *replicated_master(hlt_redis **replica)
{
    char extra[64];
    hlt_redis *m = hlt_redis_start("--repl-diskless-sync-delay 0");
    if (!m) die("replicated master", "did not start");
    snprintf(extra, sizeof extra, "--replicaof 127.0.0.1 %d", m->port);
    if (!(*replica = hlt_redis_start(extra))) die("replica", "did not start");
    for (int i = 0; i < 100; i++) {
        redisReply *x = hlt_cmd(m, "INFO replication");
        int up = x && x->str && strstr(x->str, ",state=online,");
        if (x) freeReplyObject(x);
        if (up) return m;
        usleep(50000);
    }
    die("replica", "not online after 5 s");
    return NULL;
}

/* Interleaved slices of acquire+release on key with each client of cl[0..n); rate[] the mean
 * cycles/s, and ratio[k] the median over slices of cl[0]'s rate / cl[k]'s. */
static void race(hilock_client **cl, int n, const char *key, double secs, double *rate, double *ratio)
{
    double r[4][SLICES], q[SLICES];
    for (int k = 0; k < n; k++) cycles(cl[k], key, 0.2);   /* warm: connections, script caches */
    for (int s = 0; s < SLICES; s++)
        for (int k = 0; k < n; k++) r[k][s] = cycles(cl[k], key, secs / SLICES / n);
    for (int k = 0; k < n; k++) {
        rate[k] = 0;
        for (int s = 0; s < SLICES; s++) {
            rate[k] += r[k][s] / SLICES;
            q[s] = r[0][s] / r[k][s];
        }
        ratio[k] = median_of(q, SLICES);
    }
}

/* On an event loop (libuv, one thread), 100 cycles in flight on keys of every shard: the
 * cluster (a connection per shard master) next to the single master (one connection), in
 * interleaved slices; and each against its blocking rate (one cycle at a time). */
static void loop_rows(const char *cluster_url, const char *single_url, double c_blocking,
                      double s_blocking, double secs)
{
    double c[SLICES / 2], s[SLICES / 2], q[SLICES / 2], cm = 0, sm = 0;
    async_loop_rate(cluster_url, 100, 0.2);   /* warm: the slot map, connections, script caches */
    async_loop_rate(single_url, 100, 0.2);
    for (int k = 0; k < SLICES / 2; k++) {
        c[k] = async_loop_rate(cluster_url, 100, secs / SLICES);
        s[k] = async_loop_rate(single_url, 100, secs / SLICES);
        q[k] = c[k] / s[k];
        cm += c[k] / (SLICES / 2);
        sm += s[k] / (SLICES / 2);
    }
    printf("  on an event loop (libuv, one thread), 100 acquire+release cycles in flight:\n");
    printf("    (lc) redis-cluster:// keys, 3 shards      %9.0f   lc/ls %.2f, x blocking (c) %.1f\n", cm,
           median_of(q, SLICES / 2), cm / c_blocking);
    printf("    (ls) single master                        %9.0f   x blocking (s) %.1f\n", sm, sm / s_blocking);
}

void cluster_bench(double secs)
{
    hlt_cluster *f = hlt_cluster_start_masters(), *g;
    hlt_redis *r = hlt_redis_start(NULL), *m, *rep;   /* fresh, as the cluster's masters are */
    hilock_client *cl[4];
    const char *url[4];
    double rate[4], ratio[4];   /* (c, s, n, g) */
    int64_t first, second;
    char node_url[64];
    if (!f || !r) die("cluster fixture", "did not start");
    /* (n) the cluster master that owns the key, as a plain redis:// master: the server side
     * (cluster mode) without the library's routing */
    snprintf(node_url, sizeof node_url, "redis://127.0.0.1:%d", f->port[hlt_cluster_key_master(f, KEY)]);
    url[0] = f->url;
    url[1] = r->url;
    url[2] = node_url;
    url[3] = r->url;
    for (int k = 0; k < 4; k++) cl[k] = client_with(&url[k], 1, k == 3 ? tune_guard : NULL);
    race(cl, 4, KEY, secs, rate, ratio);
    printf("\nRedis Cluster: uncontended acquire+release, cycles/s, one connection (TCP 127.0.0.1);\n"
           "ratio = the median of %d interleaved slice ratios (target >= 0.9 vs the single master)\n"
           "  3 masters, no replica, next to a single master with none:\n", SLICES);
    printf("    (c) redis-cluster:// key                  %9.0f   c/s %.2f, c/g %.2f, c/n %.2f\n", rate[0],
           ratio[1], ratio[3], ratio[2]);
    printf("    (s) single master, default options        %9.0f\n", rate[1]);
    printf("    (g) single master, failover_guard=1       %9.0f   (the failover awareness a cluster always "
           "has)\n", rate[3]);
    printf("    (n) the key's cluster master as redis://  %9.0f   (the server side of cluster mode)\n", rate[2]);
    loop_rows(f->url, r->url, rate[0], rate[1], secs);
    first_call(f->url, &first, &second);
    for (int k = 0; k < 4; k++) hilock_client_free(cl[k]);
    hlt_redis_stop(r);
    hlt_cluster_stop(f);

    /* the same with a replica behind every master, on both sides: feeding it costs the server
     * (on these 2 shared cores, also CPU the replica takes) whatever the client */
    if (!(g = hlt_cluster_start())) die("cluster fixture", "did not start");
    m = replicated_master(&rep);
    url[0] = g->url;
    url[1] = m->url;
    for (int k = 0; k < 2; k++) cl[k] = client_with(&url[k], 1, NULL);
    race(cl, 2, KEY, secs, rate, ratio);
    printf("  3 masters + 3 replicas, next to a single master feeding one replica:\n");
    printf("    (c') redis-cluster:// key                 %9.0f   c'/s' %.2f\n", rate[0], ratio[1]);
    printf("    (s') single master + replica              %9.0f\n", rate[1]);
    printf("  a new cluster client's first acquire+release (slot map + connects): %.2f ms; the "
           "second: %.2f ms (medians of 20)\n", first / 1000.0, second / 1000.0);
    for (int k = 0; k < 2; k++) hilock_client_free(cl[k]);
    hlt_redis_stop(rep);
    hlt_redis_stop(m);
    hlt_cluster_stop(g);
}
