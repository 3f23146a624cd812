/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Layer: topology
 * May call: engine resp base platform
 *
 * topology.h -- where a node's master is and whether a lock survived a change of it
 * (topology.c, sentinel.c, cluster.c). Facts: docs/sentinel.md.
 *
 * Owns: the topologies a node can have -- hl_topo_direct (redis://, unix://: the URL is the
 * master), hl_topo_sentinel (redis-sentinel://: the Sentinels name it) and hl_topo_cluster
 * (redis-cluster://: the shard owning the key's slot, cluster.c) -- behind the
 * engine's hl_topo_ops (engine.h), assigned by the client (client.c); and the failover part
 * of every lock operation (identity, failover guard, WAIT, fence qualification, LOST), which
 * applies to both. May call: the engine (hl_exec: the Sentinels are nodes of a private
 * client; the undo of an unsafe grant). Called by: the lock layer (lock.c) and the client (client.c).
 */
#ifndef HILOCK_TOPOLOGY_H
#define HILOCK_TOPOLOGY_H

#include "engine.h"

/* ---- failover awareness (topology.c) ---- */
/* The topologies a node can have (client.c assigns one per node): a redis:// or unix:// URL
 * is its own master; a redis-sentinel:// one asks its Sentinels on every new connection (in
 * order, each bounded by a short timeout, all by the connect deadline) and checks ROLE. */
extern const hl_topo_ops hl_topo_direct, hl_topo_sentinel;   /* topology.c, sentinel.c */
/* A redis-cluster:// node: one "master" to the lock layer, routed per key to the shard that
 * owns its slot, following MOVED and ASK (cluster.c). */
extern const hl_topo_ops hl_topo_cluster;
/* ---- operator tools: every master (cluster.c, for src/lock/inspect.c) ---- */
/* A node of the slot map: host (no brackets), port, node id ("" if the map gave none), the
 * slots it serves (a replica: 0) and whether it is a replica (of the last master before it). */
typedef void (*hl_cluster_node_fn)(const char *host, int port, const char *id, size_t slots, int replica,
                                   void *arg);
/* The slot map of cluster node n, asked of its seeds and masters now (within dl; the
 * replicas are kept from then on): fn for every master that serves slots, in the order of its
 * first slot, each followed by its replicas; or (slot >= 0) for the master of that slot and
 * its replicas. every: wait for every node asked (within dl) and list each replica
 * any of them names (a node's gossip view lags); 0: the first map that arrives. fn must not
 * call the client. OK, or a status with n->st and n->err set (no map now: an older one is not
 * shown). */
hilock_status hl_cluster_nodes(hilock_client *c, hl_node *n, int slot, int every, hl_deadline dl,
                               hl_cluster_node_fn fn, void *arg);
/* Their on_error_reply: 1 for READONLY (a replica now: close, resolve again next time). */
int hl_topo_drop_on_readonly(hl_node *n, const hl_reply *r);

/* ---- a lock as its failover part sees it (topology.c) ----
 * The lock layer owns the lock (struct hilock, lock.h) and embeds one of these in it: the
 * first group is the lock's, which the lock layer sets before each call here (hl_lock_topo);
 * the second is topology's own, kept across the lock's operations and freed by
 * hl_topo_lock_free. */
struct hl_lockid;
typedef struct hl_topo_lock {
    const char *key, *shown, *token, *kind_name;
    int64_t     ttl_ms;
    int         lost_seen;          /* its loss was reported (FAILOVER once per lock) */
    struct hl_lockid *ids;          /* per node, the master history it was granted in */
    char       *guard_key;          /* the failover guard's record with a cluster node */
    int64_t     guard_seen_us;      /* when an acquire's grant was first refused by the
                                       failover guard (0: not), for its GUARD_PASSED */
} hl_topo_lock;
void hl_topo_lock_free(hl_topo_lock *t);

typedef enum hl_topo_kind { HL_TOPO_ACQUIRE, HL_TOPO_EXTEND, HL_TOPO_RELEASE, HL_TOPO_CHECK } hl_topo_kind;

/* One lock operation's failover part: commands it added to the pipeline, what it found. */
typedef struct hl_topo_op {
    hl_topo_kind  kind;
    int           id_at, rec_at;   /* pipeline index of INFO replication / HMGET of the record */
    int           wait_at;         /* and of WAIT; -1: not sent */
    int64_t       ttl_ms;          /* the ttl the operation sets (failover.lua's ARGV[3]) */
    int64_t       extra_us;        /* add to the per-node timeout: WAIT's share of the round trip */
    hl_deadline   dl;              /* the operation's: per_us its per-node timeout (one round
                                      trip), hard_us its end, WAIT's share included; every
                                      round trip here (Sentinel's question, failover.lua, the
                                      undo) ends by it (hl_round_end) */
    uint32_t      refused;         /* acquire: the failover guard refused (the value is gone) */
    uint32_t      undo;            /* acquire: granted, not safely (WAIT short, ...): undone */
    uint32_t      moved;           /* acquire: granted on a master the Sentinels no longer name */
    uint32_t      short_acks;      /* extend: WAIT short (the lock keeps its old validity) */
    uint32_t      lost;            /* extend, release, check: no proof the lock survived */
    uint32_t      failed;          /* failover.lua got no answer (timeout, broken connection:
                                      node->st says which): the node did not answer, as if
                                      its round trip had failed (acquire: the grant is undone
                                      on the next contact); never LOST, never EREPLY */
    hilock_status err;             /* the status of refused / undo / short_acks */
    char          arg[2][24];      /* WAIT's numbers */
    long long     acks[HL_MAX_NODES];   /* extend: WAIT's count on the short_acks nodes */
} hl_topo_op;

/* Before the round trip of a lock operation: append the identity read (Sentinel and Cluster
 * clients, or failover_guard = 1: INFO replication, and HMGET of the record where there is
 * one) and WAIT (min_replicas > 0; acquire and extend) after cmds[0..n); returns the new
 * count. Release, extend and check first ask a Sentinel whether the master moved (closing the
 * connection if so). Nothing for legacy/bridge locks. dl: the operation's per-node timeout
 * and end (without WAIT's share: op->dl adds it), which every round trip of hl_topo_begin
 * and hl_topo_end keeps to. */
int  hl_topo_begin(hilock_client *c, hl_topo_lock *l, hl_topo_op *op, hl_topo_kind kind,
                   int64_t ttl_ms, hl_cmd *cmds, int n, hl_deadline dl);
/* After hl_exec, before hl_exec_clear: read those replies on the nodes in ok (granted: where
 * the acquire script granted; extend, release, check: where the script found our value) and
 * fill op's masks; node->err says why for each. Where they
 * cannot settle a node (a history the record has not seen, a guard that may run, a ttl above
 * the record's), one more round trip runs failover.lua there (it replaces that node's
 * replies). Acquire: records where the lock was granted, undoes unsafe grants at once, and
 * asks a Sentinel whether the master in use is still the master (see sentinel.c). */
void hl_topo_end(hilock_client *c, hl_topo_lock *l, hl_topo_op *op, uint32_t ok, uint32_t granted);
/* The fencing token node i's grant makes of the counter it minted: max(counter, epoch << 42 |
 * the counter's low 42 bits), epoch = that node's config epoch (Sentinel: the Sentinels';
 * Cluster: the slot's, from its record; direct: 0, the counter as it is). topology.c. */
uint64_t hl_topo_fence(const hilock_client *c, const hl_topo_lock *l, size_t i, uint64_t counter);
/* ---- the private client of a topology's helpers (topology.c) ---- */
/* Fill sc (zeroed by the caller) as a client whose nodes are the first `count` hosts of n's
 * URL list (Sentinels, cluster seeds): direct nodes reached as n is (its transport and TLS
 * context), named "<what> host:port", with user/pass (NULL: none). It takes c's options (a
 * later option -- TLS, timeouts -- reaches them too) without c's server list: the topology
 * calls the engine, never back into the client. 0, or -1 out of memory (sc is then
 * half-filled: hl_topo_private_free it). */
int  hl_topo_private_init(hilock_client *sc, const hilock_client *c, const hl_node *n, size_t count,
                          const char *what, const char *user, const char *pass);
/* Close and free what hl_topo_private_init made (not sc itself). */
void hl_topo_private_free(hilock_client *sc);

/* LOST, with the nodes' reasons in errmsg ("<op> <key>: ..."). */
hilock_status hl_topo_lost(hilock_client *c, const hl_topo_lock *l, const char *op, uint32_t lost);

#endif
