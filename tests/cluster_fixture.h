/* SPDX-License-Identifier: BSD-3-Clause */
/* cluster_fixture.h -- a real Redis Cluster for tests and benchmarks: 3 masters + 3 replicas
 * on free loopback ports (--cluster-enabled yes, --cluster-node-timeout 1000), created with
 * `redis-cli --cluster create ... --cluster-replicas 1 --cluster-yes` (before 5.0, whose
 * redis-cli has none, by the same commands sent by hand), ready once every node says
 * cluster_state:ok and every master streams to its replica.
 *
 * Lifetime. hlt_cluster_start() makes one owned by the calling process: its servers die with
 * it (PR_SET_PDEATHSIG) and hlt_cluster_stop() kills them and removes the dir. A Criterion
 * suite shares one cluster between its tests: hlt_cluster_share() (from a ReportHook(PRE_ALL),
 * in the runner) starts it and publishes it in the environment; each test's worker process
 * gets a view with hlt_cluster_attach() (nothing to stop). A node restarted from a worker is
 * tied to the runner by a small watchdog (it dies within 100 ms of the runner), so no test can
 * leave a server behind. Tests that break the cluster (kill, failover, resharding, SIGSTOP)
 * take hlt_cluster_exclusive() and restore it (hlt_cluster_heal) before they end; the others
 * take hlt_cluster_shared_use(), so --jobs=2 never mixes the two.
 *
 * TLS. hlt_cluster_start_tls / hlt_cluster_share_tls make the same cluster TLS-only: every
 * node `--port 0 --tls-port P --tls-cluster yes --tls-replication yes` with the given
 * certificate (presented to clients and, on the bus and replication links, to the other
 * nodes) and CA (trusted both ways; clients need no certificate), created with
 * `redis-cli --tls --cacert CA --cluster create`; port[] are the TLS ports and url is
 * rediss-cluster://. Every helper below works on both kinds: the fixture's own commands go to
 * each node's unix socket (dir/nI/sock), which stays plain. */
#ifndef HILOCK_TEST_CLUSTER_FIXTURE_H
#define HILOCK_TEST_CLUSTER_FIXTURE_H

#include <sys/types.h>
#include <hiredis/hiredis.h>

#define HLT_CLUSTER_NODES 6
#define HLT_CLUSTER_PATH  192

/* PEM files for a TLS cluster (e.g. a tls_fixture.h hlt_pki: server.crt, server.key, ca). */
typedef struct hlt_cluster_tls {
    const char *crt, *key, *ca;
} hlt_cluster_tls;

typedef struct hlt_cluster {
    int   nnodes;                   /* HLT_CLUSTER_NODES, or 3 (hlt_cluster_start_masters) */
    int   port[HLT_CLUSTER_NODES];
    pid_t pid[HLT_CLUSTER_NODES];   /* owned clusters: the server processes (0: stopped) */
    int   owned;
    pid_t runner;                   /* shared: the runner whose death ends the servers */
    int   lockfd;                   /* hlt_cluster_exclusive / _shared_use */
    char  dir[128];                 /* node i lives in dir/nI (nodes.conf, log, pid) */
    char  url[512];                 /* redis-cluster://127.0.0.1:P0,...,127.0.0.1:P5 (TLS: rediss-) */
    char  tls_crt[HLT_CLUSTER_PATH], tls_key[HLT_CLUSTER_PATH], tls_ca[HLT_CLUSTER_PATH];   /* "": plain */
} hlt_cluster;

hlt_cluster *hlt_cluster_start(void);            /* NULL (and why, on stderr) on failure */
/* 3 masters and no replica (`--cluster-replicas 0`): for `make bench`, next to a single master
 * that feeds no replica either. port[0..3); the failover helpers need replicas. */
hlt_cluster *hlt_cluster_start_masters(void);
void         hlt_cluster_stop(hlt_cluster *f);   /* NULL-safe; a view is only freed */
int          hlt_cluster_share(void);            /* runner: start and publish; 0 or -1 */
void         hlt_cluster_unshare(void);          /* runner: stop it */
hlt_cluster *hlt_cluster_attach(void);           /* worker: the shared one, NULL if none */
hlt_cluster *hlt_cluster_start_tls(const hlt_cluster_tls *tls);   /* the same, TLS-only */
int          hlt_cluster_share_tls(const hlt_cluster_tls *tls);

/* Serialise tests on a shared cluster (flock on a file in its dir). */
void hlt_cluster_exclusive(hlt_cluster *f);
void hlt_cluster_shared_use(hlt_cluster *f);

/* Command on node i (fresh connection, 2 s timeout); NULL if it does not answer. */
redisReply *hlt_cluster_cmd(hlt_cluster *f, int i, const char *fmt, ...);
/* Index of the node (port) that serves `slot` as master, asked of the live nodes; -1. */
int hlt_cluster_slot_master(hlt_cluster *f, int slot);
int hlt_cluster_key_master(hlt_cluster *f, const char *key);
int hlt_cluster_keyslot(hlt_cluster *f, const char *key);   /* CLUSTER KEYSLOT; -1 */
/* The indexes of the (first) three masters, by slot; how many were found. */
int hlt_cluster_masters(hlt_cluster *f, int m[3]);
/* A key named prefix<N> whose slot master m serves, N from *from on (NULL: 0; *from is then
 * past it, so the next call finds another); 0, or -1 if none in 100,000 names. */
int hlt_cluster_key_on(hlt_cluster *f, int m, const char *prefix, int *from, char *buf, size_t cap);

/* A Criterion suite on the cluster the runner shares: fx(exclusive) attaches a test to it
 * (exclusive: the test breaks it for a while; the view is dropped, with its lock, when the
 * test ends). Use once per suite file, at file scope, next to the runner's report hooks
 * (hlt_cluster_share in PRE_ALL, hlt_cluster_unshare in POST_ALL: Criterion names a hook by
 * its line, so the two cannot come from one macro). */
#define HLT_CLUSTER_SHARED_SUITE(suite)                                                              \
    static hlt_cluster *F;                                                                           \
    static void fini(void)                                                                           \
    {                                                                                                \
        hlt_cluster_stop(F);                                                                         \
        F = NULL;                                                                                    \
    }                                                                                                \
    TestSuite(suite, .fini = fini, .timeout = 120);                                                  \
    static hlt_cluster *fx(int exclusive)                                                            \
    {                                                                                                \
        F = hlt_cluster_attach();                                                                    \
        cr_assert_not_null(F, "no cluster (the fixture did not start)");                            \
        if (exclusive) hlt_cluster_exclusive(F);                                                     \
        else hlt_cluster_shared_use(F);                                                              \
        for (int i_ = 0; i_ < F->nnodes; i_++) /* (a test that ran out of time may have left one  */ \
            hlt_cluster_thaw(F, i_);           /*  frozen: SIGCONT to a running one is nothing) */   \
        return F;                                                                                    \
    }
/* The runner's report hooks of a suite sharing the cluster: hlt_cluster_share before its
 * first test (when the server is min_version or newer: older ones say n/a on every test; if it
 * does not start, each test fails saying so and the suite's name is on stderr) and
 * hlt_cluster_unshare after its last. One macro a hook, each on a line of its own. */
#define HLT_CLUSTER_SHARE_HOOK(name, min_version)                                                    \
    ReportHook(PRE_ALL)(struct criterion_test_set *set)                                              \
    {                                                                                                \
        (void)set;                                                                                   \
        if (hlt_server_version() >= (min_version) && hlt_cluster_share() < 0)                        \
            fprintf(stderr, "%s: the cluster fixture did not start\n", (name));                      \
    }
#define HLT_CLUSTER_UNSHARE_HOOK()                                                                   \
    ReportHook(POST_ALL)(struct criterion_global_stats *stats)                                       \
    {                                                                                                \
        (void)stats;                                                                                 \
        hlt_cluster_unshare();                                                                       \
    }
/* After a test that broke nodes: every node that does not answer PING restarted, each node
 * healed (hlt_cluster_heal), then hlt_cluster_heal_all(timeout_ms) below. 0, or -1 (what
 * failed is said on stderr). */
int hlt_cluster_heal_every(hlt_cluster *f, long timeout_ms);
/* Index of a replica of master i (by ROLE); -1. */
int hlt_cluster_replica_of(hlt_cluster *f, int i);
/* GET / EXISTS on node i directly (no redirection; ASKING first, so a node importing the
 * slot answers; a migrating node's ASK, i.e. "not here", is EXISTS 0). */
char     *hlt_cluster_get(hlt_cluster *f, int i, const char *key);   /* malloc'd or NULL */
long long hlt_cluster_exists(hlt_cluster *f, int i, const char *key);

void hlt_cluster_kill(hlt_cluster *f, int i);      /* SIGKILL the server on port[i] */
int  hlt_cluster_restart(hlt_cluster *f, int i);   /* same port, same nodes.conf; 0 or -1 */
void hlt_cluster_freeze(hlt_cluster *f, int i);    /* SIGSTOP */
void hlt_cluster_thaw(hlt_cluster *f, int i);      /* SIGCONT */
/* CLUSTER FAILOVER [FORCE] on replica r; waits until it is master. 0 or -1. */
int  hlt_cluster_failover(hlt_cluster *f, int r, int force);
/* Wait (up to timeout_ms) until r has taken over master m's slots (after a kill). */
int  hlt_cluster_wait_master(hlt_cluster *f, int r, long timeout_ms);
/* Cut / heal replication on replica r (bogus masterauth + killed master link). */
int  hlt_cluster_cut(hlt_cluster *f, int r);
int  hlt_cluster_heal(hlt_cluster *f, int r);

/* Resharding of one slot, in its three steps: begin (IMPORTING on `to`, MIGRATING on its
 * owner), move (MIGRATE every key of the slot), end (SETSLOT NODE on the target, the source,
 * then the others). 0 or -1. */
int hlt_cluster_migrate_begin(hlt_cluster *f, int slot, int to);
int hlt_cluster_migrate_keys(hlt_cluster *f, int slot, int to);
int hlt_cluster_migrate_end(hlt_cluster *f, int slot, int to);

/* Every node up, cluster_state:ok everywhere, every node agreeing who serves each of the
 * three shards, every master with an online replica; waits up to timeout_ms. 0 or -1. */
int hlt_cluster_heal_all(hlt_cluster *f, long timeout_ms);

#endif
