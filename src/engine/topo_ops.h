/* SPDX-License-Identifier: BSD-3-Clause */
/* topo_ops.h -- what the engine asks of a node's topology (hl_topo_ops) (part of the engine
 * layer: engine.h states its rules and includes it) */
#ifndef HILOCK_ENGINE_TOPO_OPS_H
#define HILOCK_ENGINE_TOPO_OPS_H

#include "client.h"

/* What the engine asks of the topology a node belongs to -- the engine defines this
 * interface and calls only through node->topo; the implementations (topology.h:
 * hl_topo_direct, hl_topo_sentinel, hl_topo_cluster) use the engine, never the other way round.
 * The lock layer's failover hooks (identity, fence epoch, "still the master?") are part of
 * the same table, used by topology.c only. */
typedef struct hl_topo_ops {
    const char *name;   /* "direct", "sentinel" */
    /* Where a new connection goes: *host and *port, or a unix socket path in *host with
     * *port = -1 (owned by the node, valid until the next resolve). May take part of the
     * connect's dl (Sentinel: asks the Sentinels, each round trip dl.per_us at most). OK, or
     * a status with n->st, n->err set. */
    hilock_status (*resolve)(hilock_client *c, hl_node *n, hl_deadline dl, const char **host, int *port);
    /* A command (one word) sent last in a new connection's handshake to check the node
     * ("ROLE"), or NULL; on_handshake_reply judges its reply: OK, or a status with n->st and
     * n->err set (the engine then ends the node's part and closes the connection). */
    const char *probe;
    hilock_status (*on_handshake_reply)(hl_node *n, const hl_reply *r);
    /* An error reply to one of the caller's commands, after the round trip (the replies
     * stand): 1 = close the connection so that the next call resolves again (READONLY: a
     * replica now; later MOVED/ASK), 0 = keep it. */
    int (*on_error_reply)(hl_node *n, const hl_reply *r);
    /* ---- topology.c's own hooks (the lock layer's failover awareness) ---- */
    int failover_aware;   /* master identity tracked by default (failover_guard = -1) */
    int sharded;          /* one node, many masters chosen by key (Cluster): not a Redlock
                             member's peer (its masters change with the key); the tools' map */
    int address_known;    /* resolve needs no round trip (a direct node's URL): a connection
                             refused on a handshake command can be made again at once */
    const char *failover_named;   /* what needs the master's replication ids, as messages say
                                     it ("Sentinel (failover awareness)"); NULL: failover_guard */
    /* Ask whether the master in use moved since it was named (NULL: it cannot move), within
     * dl (the calling operation's: the question takes part of its bound). 1: it
     * moved (the connection is closed and n->st, n->err say so), 0: it did not or no one
     * could say in time. Not asked within CONFIRM_FRESH_US of the last answer. */
    int (*moved)(hilock_client *c, hl_node *n, hl_deadline dl);
    /* The config epoch of the master in use, for fencing tokens (0: none). */
    uint64_t (*epoch)(const hl_node *n);
    /* Sharded topologies (NULL elsewhere): the node id of the server in use (41 bytes with the
     * NUL; "" while the slot map has not named it), recorded with a grant; and whether the
     * master with that id serves a slot in n's map (a stale map asked again first, within
     * dl): 1 yes, 0 no, -1 no map. topology.c tells a shard's failover from a
     * resharding with them (end_verify). */
    const char *(*node_id)(const hl_node *n);
    int (*serves)(hilock_client *c, hl_node *n, const char *id, hl_deadline dl);
    void (*free)(hl_node *n);   /* n->topo_state (NULL-safe) */
    /* ---- sharded topologies (Cluster: cluster.c; NULL for the others) ---- */
    /* Before a pipeline goes to n: pick the server that must run it (the shard owning its
     * first key) and put that server's connection, undo list and name in n, parking the ones
     * in use (n->conn NULL: the engine connects, through resolve). May take part of dl (the
     * connect's: fetching the slot map; the round trip's own bounds start after it, within
     * the call's end). 1: send ASKING before the caller's commands (a
     * one-shot ASK redirect), 0: not, -1: no server (n->st and n->err say why). */
    int (*route)(hilock_client *c, hl_node *n, const hl_cmd *cmds, int ncmd, hl_deadline dl);
    /* After n's round trip (n->st OK: its replies stand; else failed): 1 = run the pipeline
     * again on n (MOVED, ASK, TRYAGAIN, CLUSTERDOWN: route then picks the new target), 0 =
     * done. The engine asks at most HL_MAX_REDIRECTS times per call, all within dl (its
     * hard end: the end of the first round trip); the last replies stand (their error says why). */
    int (*redirect)(hilock_client *c, hl_node *n, const hl_cmd *cmds, int ncmd, hl_deadline dl);
    /* ---- a sharded topology seen from an event loop (async.c keeps a connection of its own
     * per server, and its flows interleave; NULL for the others) ---- */
    /* route, its private client (the seeds) driven as c is (c->runner: on the loop, by the
     * loop): the server chosen (>= 1: its key, which names that server for the node's life,
     * across slot maps; an index would not: each map rebuilds the table), or -1 as route's;
     * *asking as route's 1. fetch 0: no slot map fetch now (another flow's is under way: the
     * map in hand serves, a MOVED corrects it), -2 if there is none yet. */
    int (*route_to)(hilock_client *c, hl_node *n, const hl_cmd *cmds, int ncmd, hl_deadline dl,
                    int fetch, int *asking);
    /* Put server s's undo list, name and facts in n (what a connection to s reads and writes),
     * parking those in use (a server that has left the map: nothing changes); and which one is
     * there now (-1: none). */
    void (*use)(hl_node *n, int s);
    int (*current)(const hl_node *n);
} hl_topo_ops;
#define HL_MAX_REDIRECTS 16

#endif
