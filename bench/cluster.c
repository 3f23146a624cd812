/* cluster.c -- `make bench`, Redis Cluster (issue 12): uncontended acquire+release on a key of
 * a local cluster (3 masters + 3 replicas, tests/cluster_fixture.h) next to the same on the
 * single master of the run, in interleaved slices (ratio = the median of slice ratios;
 * target >= 0.9); and what the first call of a new client costs (slot map + connects). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cluster_fixture.h"

#define SLICES 8

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

static void tune_guard(hilock_options *o) { o->failover_guard = 1; }

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

void cluster_bench(hlt_redis *r, double secs)
{
    hlt_cluster *f = hlt_cluster_start();
    const char *single = r->url, *cl;
    hilock_client *cs, *cg, *cn, *cc;
    double rs[SLICES], rg[SLICES], rn[SLICES], rc[SLICES], q1[SLICES], q2[SLICES], q3[SLICES];
    double ts = 0, tg = 0, tn = 0, tc = 0;
    int64_t first, second;
    char node_url[64];
    const char *node = node_url;
    if (!f) die("cluster fixture", "did not start");
    cl = f->url;
    /* the cluster master that owns the key, as a plain redis:// master: what the server side
     * (cluster mode, a replica to feed) costs, without the library's routing */
    snprintf(node_url, sizeof node_url, "redis://127.0.0.1:%d", f->port[hlt_cluster_key_master(f, "bench:cluster")]);
    cs = client_with(&single, 1, NULL);
    cg = client_with(&single, 1, tune_guard);
    cn = client_with(&node, 1, NULL);
    cc = client_with(&cl, 1, NULL);
    cycles(cs, "bench:cluster", 0.2);   /* warm: connections, script caches */
    cycles(cg, "bench:cluster", 0.2);
    cycles(cn, "bench:cluster", 0.2);
    cycles(cc, "bench:cluster", 0.2);
    for (int s = 0; s < SLICES; s++) {
        ts += rs[s] = cycles(cs, "bench:cluster", secs / SLICES / 4);
        tg += rg[s] = cycles(cg, "bench:cluster", secs / SLICES / 4);
        tn += rn[s] = cycles(cn, "bench:cluster", secs / SLICES / 4);
        tc += rc[s] = cycles(cc, "bench:cluster", secs / SLICES / 4);
        q1[s] = rc[s] / rs[s];
        q2[s] = rc[s] / rg[s];
        q3[s] = rc[s] / rn[s];
    }
    first_call(cl, &first, &second);
    printf("\nRedis Cluster (3 masters + 3 replicas, TCP 127.0.0.1): uncontended acquire+release, "
           "cycles/s,\nmedian of %d interleaved slice ratios (target >= 0.9 vs the single master)\n", SLICES);
    printf("  (s) single master, default options        %9.0f\n", ts / SLICES);
    printf("  (g) single master, failover_guard=1       %9.0f   (failover.lua, as a cluster runs it)\n", tg / SLICES);
    printf("  (n) the key's cluster master as redis://  %9.0f   (default options: the server side)\n",
           tn / SLICES);
    printf("  (c) redis-cluster:// key                  %9.0f   ratio c/s %.2f, c/g %.2f, c/n %.2f\n", tc / SLICES,
           median_of(q1, SLICES), median_of(q2, SLICES), median_of(q3, SLICES));
    printf("  a new cluster client's first acquire+release (slot map + connects): %.2f ms; the "
           "second: %.2f ms (medians of 20)\n", first / 1000.0, second / 1000.0);
    hilock_client_free(cs);
    hilock_client_free(cg);
    hilock_client_free(cn);
    hilock_client_free(cc);
    hlt_cluster_stop(f);
}
