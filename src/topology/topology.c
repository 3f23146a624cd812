/* SPDX-License-Identifier: BSD-3-Clause */
/* topology.c -- failover awareness: which node is the master, and whether a lock survived
 * a change of master. Facts it relies on: docs/failover-facts.md (replication identity, WAIT,
 * Sentinel's epochs); what it guarantees: docs/sentinel.md.
 *
 * Owns: the node topologies behind the engine's hl_topo_ops (engine.h) -- hl_topo_direct
 * (the URL is the master) and hl_topo_sentinel (sentinel.c) -- and the failover part of the lock
 * operations (hl_topo_begin/end/fence/lost: identity, guard, WAIT, fencing epochs), which
 * reaches each node's topology through the same table. May call: the engine (hl_exec,
 * hl_undo_add, hl_node_close) and base; never the client or the lock layer's functions
 * (it reads a lock's fields). The engine never calls here but through node->topo.
 *
 * The topologies: hl_topo_direct (here: a redis:// or unix:// URL is its own master) and
 * hl_topo_sentinel (sentinel.c: the Sentinels name it; see there for resolution, the
 * ROLE check and why release, extend and check ask whether the master moved).
 *
 * Identity. INFO replication, pipelined after the lock script, gives role, master_replid,
 * master_repl_offset (which already counts our write: an upper bound of where it ends),
 * master_replid2 and second_repl_offset. A lock records (replid, offset) per node at the grant
 * and at each extend. Later, the master that answers either has the same replid (same
 * history: no failover since), or it was promoted from a replica of ours: its replid2 is our
 * replid and our offset is below its second_repl_offset (the replica had received our write
 * before it was promoted). Anything else -- a restart, a second failover before an extend
 * re-anchored the lock, a replica that lacked our write -- is HILOCK_LOST.
 *
 * The record. Where the guard is on, acquire and extend also send an HMGET of the record --
 * one hash per master, "hilock:guard"; per slot on a Cluster, where a client without the
 * guard reads it on acquire for the slot's epoch only -- in the same pipeline (release and
 * check judge by the identity alone). While the record has seen this history, no guard runs
 * and it knows a ttl as long as ours, those plain commands settle the call (the fast path: no
 * script but the lock's own; INFO 1.2 us + HMGET 0.45 us of server time against 9-12 us for a
 * script that reads INFO itself and parses it in Lua, on Redis 7.0). Otherwise failover.lua
 * runs in one more round trip (the slow path: a new history, a guard that may run or has just
 * passed, a longer ttl, a slot with no epoch yet) and decides with the same rules, judging a
 * grant by the time it was made.
 *
 * Failover guard. See failover.lua: the first acquire or extend that meets a promoted master
 * records its replid in the record and, from then on, the master grants nothing for
 * max(longest ttl granted under the previous master and replicated, this caller's ttl,
 * options.failover_guard_ms). The state lives on the server (replicated like any key), so
 * every client, also one started after the failover, sees the same guard.
 *
 * Fencing. Tokens are (config-epoch << 42) | per-key counter: each failover raises the epoch,
 * so the new master's tokens exceed the old one's even when its counter went back with the
 * lost writes. The counter itself is at least the server clock in ms (< 2^42 until the year
 * 2109). Sentinel: the Sentinels' epoch. Cluster: the slot's, kept in its record with the
 * history it was read under (CLUSTER INFO walks all 16,384 slots: too dear per call) and read
 * again when the client's slot map knows a higher one for that master (docs/cluster.md).
 * Redlock composes each member's token so (a direct member's epoch is 0) and writes the
 * largest back into the quorum's counters, epoch bits and all (lock.c): the counters of a
 * Redlock with an epoch member then hold whole tokens, above 2^42, and a token is never
 * below the counter it was made of. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topology.h"

#define GUARD_KEY           "hilock:guard"
#define EPOCH_SHIFT         42
#define LOW_MASK            ((UINT64_C(1) << EPOCH_SHIFT) - 1)
#define EPOCH_MAX           ((UINT64_C(1) << (64 - EPOCH_SHIFT)) - 1)
#define REDLOCK_EPOCH_MAX   ((UINT64_C(1) << (53 - EPOCH_SHIFT)) - 1)   /* 2047: tokens < 2^53 */

struct hl_lockid {            /* where a lock was granted (or last extended), per node */
    int       set;
    char      replid[41];
    long long offset;
    char      where[80];      /* sharded nodes: the server (shard master) it was on */
    char      node[41];       /* Cluster: that master's node id ("": unknown) */
    uint64_t  epoch;          /* sharded nodes: that server's config epoch at the grant */
};

/* A node whose topology tracks master identity by default (Sentinel). */
static int any_aware(const hilock_client *c)
{
    for (size_t i = 0; i < c->nnodes; i++)
        if (c->nodes[i].topo->failover_aware) return 1;
    return 0;
}

/* Identity is tracked for Sentinel clients, and wherever the guard is asked for. */
static int aware(const hilock_client *c)
{
    return c->opt.failover_guard == 1 || any_aware(c);
}

static int guard_on(const hilock_client *c)
{
    return c->opt.failover_guard == 1 || (c->opt.failover_guard == -1 && any_aware(c));
}

/* A node routed per key (Cluster): a script's keys must share the lock key's slot. */
static int any_sharded(const hilock_client *c)
{
    for (size_t i = 0; i < c->nnodes; i++)
        if (c->nodes[i].topo->route) return 1;
    return 0;
}

/* What a client does with the record (failover.lua's ARGV[5]): '1' keep it and obey its
 * guard; '2' the slot's fencing epoch only (a Cluster client with the guard off); '0' none
 * (a direct or Sentinel client with the guard off). */
static char record_mode(const hilock_client *c)
{
    return guard_on(c) ? '1' : any_sharded(c) ? '2' : '0';
}

/* Whether a call of this kind reads the record: acquire and extend under the guard (release
 * and check judge by the identity alone, and leave starting the record, and a guard, to the
 * next acquire or extend on that master: a guard then starts later, never earlier); and a
 * Cluster client's acquire without the guard, for the slot's epoch only (it starts no guard,
 * so a guard-on client's floor and ttl still decide one). */
static int reads_record(const hilock_client *c, hl_topo_kind kind)
{
    char m = record_mode(c);
    if (m == '1') return kind == HL_TOPO_ACQUIRE || kind == HL_TOPO_EXTEND;
    return m == '2' && kind == HL_TOPO_ACQUIRE;
}

/* The record: one hash per master ("hilock:guard"); with a cluster node, one per slot of each
 * master, "hilock:guard:{T}" with T of the lock key's slot (a script touches one slot only),
 * made once per lock. NULL: out of memory (no identity this time). */
static const char *guard_key(hilock_client *c, hl_topo_lock *l)
{
    char tag[16];
    size_t t;
    if (!any_sharded(c)) return GUARD_KEY;
    if (!l->guard_key && (l->guard_key = malloc(sizeof GUARD_KEY + sizeof tag + 3))) {
        hl_slot_tag(hl_key_slot(l->key, strlen(l->key)), tag);
        t = strlen(tag);   /* GUARD_KEY ":{" tag "}" (no snprintf: every new lock asks) */
        memcpy(l->guard_key, GUARD_KEY ":{", sizeof GUARD_KEY + 1);
        memcpy(l->guard_key + sizeof GUARD_KEY + 1, tag, t);
        memcpy(l->guard_key + sizeof GUARD_KEY + 1 + t, "}", 2);
    }
    return l->guard_key;
}

/* ---- direct: the URL names the master ---- */

static hilock_status direct_resolve(hilock_client *c, hl_node *n, hl_deadline dl,
                                    const char **host, int *port)
{
    (void)c;
    (void)dl;
    if (n->url.kind == HL_URL_UNIX) {
        *host = n->url.path;
        *port = -1;
    } else {
        *host = n->url.host;
        *port = n->url.port;
    }
    return HILOCK_OK;
}

/* READONLY: the node is a replica now (a failover demoted it, or Sentinel named it before it
 * was promoted): close, so that the next call connects (and resolves) again. */
int hl_topo_drop_on_readonly(hl_node *n, const hl_reply *r)
{
    (void)n;
    return hl_reply_is_error(r, "READONLY");
}

const hl_topo_ops hl_topo_direct = {
    .name = "direct",
    .resolve = direct_resolve,
    .address_known = 1,
    .on_error_reply = hl_topo_drop_on_readonly,
};

/* Nodes in mask (connected) whose master moved, in their topology's judgement (Sentinel: the
 * Sentinels no longer name it), asked by the operation's deadline. Their connections are
 * closed and st/err say so. */
static uint32_t moved(hilock_client *c, uint32_t mask, hl_deadline dl)
{
    uint32_t m = 0;
    for (size_t i = 0; i < c->nnodes; i++) {
        hl_node *n = &c->nodes[i];
        if ((mask & (1u << i)) && n->topo->moved && hl_node_connected(c, n) &&
            n->topo->moved(c, n, dl))
            m |= 1u << i;
    }
    return m;
}

/* One more round trip of the operation: its per-node timeout from now, never past the
 * operation's own end (a slow path adds no time to the call's bound). */
static hl_deadline one_round(const hl_topo_op *op)
{
    return hl_one_round(op->dl, hl_now_us());
}

/* ---- around a lock operation ---- */

int hl_topo_begin(hilock_client *c, hl_topo_lock *l, hl_topo_op *op, hl_topo_kind kind,
                  int64_t ttl_ms, hl_cmd *cmds, int n, hl_deadline dl)
{
    memset(op, 0, sizeof *op);
    op->kind = kind;
    op->id_at = op->rec_at = op->wait_at = -1;
    op->ttl_ms = ttl_ms > 0 ? ttl_ms : l->ttl_ms;
    op->dl = dl;
    if (aware(c) && n < HL_MAX_CMDS && guard_key(c, l)) {
        /* the fast path: INFO replication (keyless) and, where there is a record, its fields;
         * failover.lua only where these cannot settle the call (hl_topo_end) */
        hl_cmd *s = &cmds[n];
        if (kind != HL_TOPO_ACQUIRE) moved(c, hl_all_nodes(c), dl);
        op->id_at = n++;
        hl_cmd_init(s, NULL, 0);
        s->need = HL_CAP_FAILOVER;   /* replication ids: refused, with the reason, before 4.0 */
        hl_cmd_arg(s, "INFO", 4);
        hl_cmd_arg(s, "replication", 11);
        /* The record, for the calls that grant or lengthen (reads_record) */
        if (reads_record(c, kind) && n < HL_MAX_CMDS) {
            s = &cmds[n];
            op->rec_at = n++;
            hl_cmd_init(s, NULL, 0);
            s->advisory = 1;   /* a redirect of it (the record mid-migration): failover.lua decides */
            hl_cmd_arg(s, "HMGET", 5);
            hl_cmd_arg(s, guard_key(c, l), (size_t)-1);
            hl_cmd_arg(s, "replid", 6);
            hl_cmd_arg(s, "until", 5);
            hl_cmd_arg(s, "maxttl", 6);
            hl_cmd_arg(s, "epoch", 5);
        }
    }
    if (c->opt.min_replicas > 0 && n < HL_MAX_CMDS &&
        (kind == HL_TOPO_ACQUIRE || kind == HL_TOPO_EXTEND)) {
        hl_cmd *w = &cmds[n];
        op->wait_at = n++;
        hl_cmd_init(w, NULL, 0);
        w->need = HL_CAP_WAIT;
        hl_cmd_arg(w, "WAIT", 4);
        hl_cmd_argi(w, op->arg[0], c->opt.min_replicas);
        hl_cmd_argi(w, op->arg[1], c->opt.replicas_timeout_ms);
        op->extra_us = c->opt.replicas_timeout_ms * 1000;
        op->dl.hard_us = hl_add_sat(dl.hard_us, op->extra_us);
    }
    return n;
}

typedef struct ident {
    char      role[16], replid[41], replid2[41];
    long long offset, offset2, left, epoch;
} ident;

/* failover.lua's reply -> *id; 0 if it is not one (an error reply, e.g. OOM). */
static int parse_ident(const hl_reply *r, ident *id)
{
    const char *role = hl_reply_str(hl_reply_elem(r, 0), NULL);
    const char *a = hl_reply_str(hl_reply_elem(r, 1), NULL);
    const char *b = hl_reply_str(hl_reply_elem(r, 3), NULL);
    if ((hl_reply_nelem(r) != 6 && hl_reply_nelem(r) != 7) || !role || !a || !b || strlen(a) != 40 ||
        strlen(b) != 40)
        return 0;
    id->epoch = hl_reply_nelem(r) == 7 ? hl_reply_int(hl_reply_elem(r, 6)) : 0;
    snprintf(id->role, sizeof id->role, "%s", role);
    memcpy(id->replid, a, 41);
    memcpy(id->replid2, b, 41);
    id->offset = hl_reply_int(hl_reply_elem(r, 2));
    id->offset2 = hl_reply_int(hl_reply_elem(r, 4));
    id->left = hl_reply_int(hl_reply_elem(r, 5));
    return 1;
}

/* INFO replication's text -> *id (left and epoch 0); 0 if a field is missing or malformed.
 * One pass over its ~20 lines: it runs on every call of a failover-aware client. */
static int parse_info(const hl_reply *r, ident *id)
{
    static const struct { const char *k; size_t n; } f[] = {
        {"role:", 5}, {"master_replid:", 14}, {"master_replid2:", 15},
        {"master_repl_offset:", 19}, {"second_repl_offset:", 19},
    };
    size_t len;
    const char *p = hl_reply_type(r) == HL_R_STRING ? hl_reply_str(r, &len) : NULL, *end;
    int got = 0;
    if (!p) return 0;
    memset(id, 0, sizeof *id);
    for (end = p + len; p < end && got != 31;) {
        const char *e = memchr(p, '\n', (size_t)(end - p)), *v;
        size_t l, vl;
        if (!e) e = end;
        l = (size_t)(e - p);
        for (int k = 0; k < 5; k++) {
            if (l <= f[k].n || *p != *f[k].k || memcmp(p, f[k].k, f[k].n)) continue;
            v = p + f[k].n;
            vl = l - f[k].n - (e[-1] == '\r');
            if (k == 0 && vl < sizeof id->role) {
                memcpy(id->role, v, vl);
                id->role[vl] = '\0';   /* (a second role line, in a hostile reply) */
            }
            else if ((k == 1 || k == 2) && vl == 40) memcpy(k == 1 ? id->replid : id->replid2, v, 40);
            else if (k == 3) id->offset = strtoll(v, NULL, 10);
            else if (k == 4) id->offset2 = strtoll(v, NULL, 10);
            else break;
            got |= 1 << k;
            break;
        }
        p = e + 1;
    }
    return got == 31;
}

/* A record's number (digits only); -1: absent or not one. */
static long long rec_num_at(const char *v)
{
    char *e;
    long long n = v && *v >= '0' && *v <= '9' ? strtoll(v, &e, 10) : -1;
    return n >= 0 && !*e ? n : -1;
}

/* The record's field at i of the pipeline's HMGET as a number; -1: absent or not one. */
static long long rec_num(const hl_reply *rec, size_t i)
{
    return rec_num_at(hl_reply_str(hl_reply_elem(rec, i), NULL));
}

/* The config epoch the node's topology knows for the server in use (Cluster: its slot map),
 * 0 if none: a lower bound for the slot's epoch in the record. */
static uint64_t map_epoch(const hl_node *n)
{
    return n->topo->route && n->topo->epoch ? n->topo->epoch(n) : 0;
}

/* The fast path: node i's INFO replication and record replies settle the call alone (id
 * filled) when the record has seen this history, no guard runs or needs its end written,
 * the record knows a ttl as long as ours, and (a Cluster grant) holds this history's epoch.
 * 0: failover.lua decides (slow_idents). */
static int fast_ident(const hilock_client *c, const hl_topo_op *op, const hl_node *n, ident *id)
{
    const hl_reply *rec;
    const char *rid, *ep;
    long long e;
    if (!parse_info(n->reply[op->id_at], id)) return 0;
    if (strcmp(id->role, "master") || op->rec_at < 0) return 1;   /* a replica: no record needed */
    rec = n->reply[op->rec_at];
    if (hl_reply_nelem(rec) != 4) return 0;
    if (record_mode(c) == '1') {   /* the guard's fields (mode '2' reads the epoch only) */
        rid = hl_reply_str(hl_reply_elem(rec, 0), NULL);
        if (!rid || strcmp(rid, id->replid)) return 0;
        if (rec_num(rec, 1) != 0 || rec_num(rec, 2) < op->ttl_ms) return 0;
    }
    if (op->kind != HL_TOPO_ACQUIRE || !any_sharded(c)) return 1;
    /* "<replid>:<epoch>": an epoch read under another history is not this one's */
    ep = hl_reply_str(hl_reply_elem(rec, 3), NULL);
    if (!ep || strncmp(ep, id->replid, 40) || ep[40] != ':' || (e = rec_num_at(ep + 41)) < 0) return 0;
    /* below the epoch our slot map gives the server: read before it owned the slot (a call
     * during the import, through ASK), not yet raised by the import's end */
    if ((uint64_t)e < map_epoch(n)) return 0;
    id->epoch = e;
    return 1;
}

/* The slow path's round trip on the nodes in mask, within the operation's bound (none when
 * no time is left: they time out unasked). Returns the nodes that answered. */
static uint32_t slow_exec(hilock_client *c, const hl_topo_op *op, uint32_t mask, const hl_cmd *s)
{
    hl_deadline dl = one_round(op);
    if (dl.hard_us > hl_now_us()) return hl_exec(c, mask, s, 1, dl);
    for (size_t i = 0; i < c->nnodes; i++)
        if (mask & (1u << i))
            hl_node_set_err(&c->nodes[i], HILOCK_ETIMEDOUT, "failover check", "no time left");
    return 0;
}

/* Node i's answer to failover.lua, read as soon as its round trip returns: 1 if it filled
 * *id; op->failed gets node i if it did not answer (timeout, broken connection: no verdict
 * either way). */
static int slow_ident(hilock_client *c, hl_topo_op *op, size_t i, uint32_t ok, ident *id)
{
    hilock_status st = c->nodes[i].st;
    if (ok & (1u << i)) return parse_ident(c->nodes[i].reply[0], id);
    if (st == HILOCK_ETIMEDOUT || st == HILOCK_EIO || st == HILOCK_ENOMEM) op->failed |= 1u << i;
    return 0;
}

/* failover.lua's round trip on the nodes in mask, each node's answer read before any other
 * round trip: the blocking runner leaves the replies and st of the nodes outside a round
 * trip's mask as they are, but the loop runner clears every node's replies and lets other
 * flows overwrite st while this one waits. (A Cluster node, on a loop too, gets its shard
 * server's state back in the node when its own round trip ends: async.c.) */
static uint32_t slow_round(hilock_client *c, hl_topo_op *op, uint32_t mask, const hl_cmd *s, ident *ids)
{
    uint32_t ok = slow_exec(c, op, mask, s), have = 0;
    for (size_t i = 0; i < c->nnodes; i++)
        if ((mask & (1u << i)) && slow_ident(c, op, i, ok, &ids[i])) have |= 1u << i;
    return have;
}

/* The slow path: failover.lua on the nodes in mask, one round trip (it replaces their
 * replies; a Cluster node's own round trip, as its ARGV[7] is that node's map epoch), by the
 * operation's deadline. Returns the nodes whose answer filled ids[i]; op->failed gets those
 * that did not answer. */
static uint32_t slow_idents(hilock_client *c, hl_topo_lock *l, hl_topo_op *op, uint32_t mask, ident *ids)
{
    hl_cmd s;
    char ttl[24], floor[24], min_ep[24], mode[2] = {reads_record(c, op->kind) ? record_mode(c) : '0', '\0'};
    uint32_t have = 0;
    hl_cmd_init(&s, &hl_lua_failover, 2);
    s.need = HL_CAP_FAILOVER;
    hl_cmd_arg(&s, guard_key(c, l), (size_t)-1);
    hl_cmd_arg(&s, l->key, (size_t)-1);
    hl_cmd_arg(&s, op->kind == HL_TOPO_ACQUIRE ? "acquire" : op->kind == HL_TOPO_EXTEND ? "extend" : "id",
               (size_t)-1);
    hl_cmd_arg(&s, l->token, (size_t)-1);
    hl_cmd_argi(&s, ttl, op->ttl_ms);
    hl_cmd_argi(&s, floor, c->opt.failover_guard_ms);
    hl_cmd_arg(&s, mode, 1);
    hl_cmd_arg(&s, any_sharded(c) ? "1" : "0", 1);   /* the record holds the slot's epoch */
    if (!any_sharded(c)) return slow_round(c, op, mask, &s, ids);
    for (size_t i = 0; i < c->nnodes; i++) {
        if (!(mask & (1u << i))) continue;
        s.argc = 8;
        hl_cmd_argi(&s, min_ep, (long long)map_epoch(&c->nodes[i]));
        have |= slow_round(c, op, 1u << i, &s, ids);
    }
    return have;
}

/* Is a write recorded at (mine->replid, mine->offset) in the history of the master `cur`? */
static int survived(const struct hl_lockid *mine, const ident *cur)
{
    if (!strcmp(cur->replid, mine->replid)) return 1;
    return !strcmp(cur->replid2, mine->replid) && mine->offset < cur->offset2;
}

/* The server a lock is anchored on, and a cluster master's node id (plain copies: every call
 * of an aware client does it). */
static void set_where(struct hl_lockid *id, const hl_node *node)
{
    size_t n = strlen(node->name);
    if (n >= sizeof id->where) n = sizeof id->where - 1;
    memcpy(id->where, node->name, n);
    id->where[n] = '\0';
    if (node->topo->node_id) memcpy(id->node, node->topo->node_id(node), sizeof id->node);
}

static int record(hilock_client *c, hl_topo_lock *l, size_t i, const ident *id)
{
    if (!l->ids && !(l->ids = calloc(c->nnodes, sizeof *l->ids))) return -1;
    l->ids[i].set = 1;
    memcpy(l->ids[i].replid, id->replid, 41);
    l->ids[i].offset = id->offset;
    set_where(&l->ids[i], &c->nodes[i]);
    l->ids[i].epoch = id->epoch > 0 ? (uint64_t)id->epoch : 0;
    return 0;
}

/* WAIT's answer on node i (acquire and extend with min_replicas). Acquire: a short one undoes
 * the grant (0: nothing more to judge there); extend: the lock keeps its old validity, and
 * whether it survived is still judged. */
static int wait_ok(hilock_client *c, hl_topo_op *op, size_t i)
{
    hl_node *n = &c->nodes[i];
    const hl_reply *w;
    long long acks;
    if (op->wait_at < 0) return 1;
    w = n->reply[op->wait_at];
    acks = hl_reply_type(w) == HL_R_INTEGER ? hl_reply_int(w) : -1;
    if (acks >= c->opt.min_replicas) return 1;
    op->err = HILOCK_EREPLICAS;
    if (op->kind == HL_TOPO_EXTEND) {   /* its word is written after the slow path (short_acks_msg) */
        op->short_acks |= 1u << i;
        op->acks[i] = acks < 0 ? 0 : acks;
        return 1;
    }
    op->undo |= 1u << i;
    if (acks < 0)
        snprintf(n->err, sizeof n->err, "%s: WAIT: %.120s; the lock was undone", n->name,
                 hl_reply_str(w, NULL) ? hl_reply_str(w, NULL) : "unexpected reply");
    else
        snprintf(n->err, sizeof n->err, "%s: only %lld of %d replicas acknowledged within "
                 "%lld ms (min_replicas); the lock was undone", n->name, acks,
                 c->opt.min_replicas, (long long)c->opt.replicas_timeout_ms);
    return 0;
}

/* Extend on node i had too few replicas acknowledge: say so (before the identity verdict,
 * which may say more). */
static void short_acks_msg(hilock_client *c, const hl_topo_op *op, size_t i)
{
    hl_node *n = &c->nodes[i];
    snprintf(n->err, sizeof n->err, "%s: only %lld of %d replicas acknowledged the new ttl within "
             "%lld ms (min_replicas); the lock keeps its old validity", n->name, op->acks[i],
             c->opt.min_replicas, (long long)c->opt.replicas_timeout_ms);
}

/* A grant refused by the failover guard, left ms more (hilock_observe.h: GUARD_START, once
 * per acquire; lock.c reports GUARD_PASSED when a grant follows). */
static void guard_event(hilock_client *c, hl_topo_lock *l, const hl_node *n, long long left)
{
    if (l->guard_seen_us) return;
    l->guard_seen_us = hl_now_us();
    hl_emit_lock(c, HILOCK_EVENT_GUARD_START, l->key, l->kind_name, n->name, HILOCK_BUSY, left * 1000);
}

/* One node of an acquire that the lock script granted (and WAIT did not undo). */
static void end_grant(hilock_client *c, hl_topo_lock *l, hl_topo_op *op, size_t i, const ident *id, int have_id)
{
    hl_node *n = &c->nodes[i];
    uint32_t bit = 1u << i;
    if (have_id && id->left > 0) {   /* failover.lua has already deleted our value */
        guard_event(c, l, n, id->left);
        op->refused |= bit;
        if (!op->err) op->err = HILOCK_BUSY;
        snprintf(n->err, sizeof n->err, "%s: failover guard: a master promoted in a failover grants "
                 "no lock for %lld ms more (the longest ttl its predecessor granted)", n->name,
                 id->left);
        return;
    }
    if (!have_id || strcmp(id->role, "master") || record(c, l, i, id) < 0) {
        op->undo |= bit;
        op->err = have_id && !strcmp(id->role, "master") ? HILOCK_ENOMEM : HILOCK_EREPLY;
        snprintf(n->err, sizeof n->err, "%s: granted, but %s; the lock was undone", n->name,
                 !have_id ? "the master's replication identity could not be read"
                 : strcmp(id->role, "master") ? "the node is no longer a master" : "out of memory");
    }
}

/* The lock is not on this master, which serves its slot now and whose history never was
 * the granting master's (see end_verify): did the granting shard fail over to a replica that
 * never had that history? Yes when the granting master serves no slot any more (down, or a
 * replica of this one): a resharding moves slots between masters that stay masters, and the
 * granting one keeps serving its other slots. (Whether this master was promoted is no help:
 * a replica promoted without a backlog takes a new history, replid2 cleared, when its first
 * replica syncs.) */
static int shard_failed_over(hilock_client *c, hl_node *n, const hl_topo_op *op, const struct hl_lockid *mine)
{
    return n->topo->serves && n->topo->serves(c, n, mine->node, one_round(op)) == 0;
}

/* One node of extend, release or check: did our lock survive any change of master? found:
 * the script found our value there. */
static void end_verify(hilock_client *c, hl_topo_lock *l, hl_topo_op *op, size_t i, const ident *id, int have_id,
                       int found)
{
    hl_node *n = &c->nodes[i];
    struct hl_lockid *mine = &l->ids[i];
    if (have_id && !strcmp(id->role, "master") && n->topo->route && strcmp(mine->where, n->name) &&
        strcmp(id->replid, mine->replid) && strcmp(id->replid2, mine->replid)) {
        /* Another shard's master, whose history never was our master's (a replica promoted
         * in our shard from our master's history would have its replid as its replid2).
         * Our value there: MIGRATE carried it (a replica without our master's history cannot
         * hold it). Not there: the slot was resharded (the value compare decides: expired or
         * released), unless the granting shard failed over to a replica that never synced. */
        if (!found && shard_failed_over(c, n, op, mine)) {
            op->lost |= 1u << i;
            snprintf(n->err, sizeof n->err, "%s: a failover of the shard (or a drain): %.60s, which "
                     "granted the lock, serves no slot now, and this master never had its history",
                     n->name, mine->where);
            return;
        }
        memcpy(mine->replid, id->replid, 41);
        mine->offset = id->offset;
        set_where(mine, n);
        return;
    }
    if (have_id && !strcmp(id->role, "master") && survived(mine, id)) {
        /* the lock is in this master's history: anchor it here, so that the next failover is
         * judged against this master (the offset stays ours: offsets run on across a failover) */
        memcpy(mine->replid, id->replid, 41);
        if (op->kind == HL_TOPO_EXTEND && id->offset > mine->offset) mine->offset = id->offset;
        set_where(mine, n);
        return;
    }
    op->lost |= 1u << i;
    if (have_id && !l->lost_seen)   /* a change of master since the grant: reported once per lock,
                                       counted where the Sentinels name the new master */
        hl_emit_lock(c, HILOCK_EVENT_FAILOVER, l->key, l->kind_name, n->name, HILOCK_OK, -1);
    if (!have_id)
        snprintf(n->err, sizeof n->err, "%s: the master's replication identity could not be read: "
                 "no proof the lock survived", n->name);
    else if (strcmp(id->role, "master"))
        snprintf(n->err, sizeof n->err, "%s: no longer a master (role %.15s): a failover since the grant",
                 n->name, id->role);
    else
        snprintf(n->err, sizeof n->err, "%s: the master changed since the grant (replication id "
                 "%.8s, offset %lld; now %.8s, promoted from %.8s at %lld): no proof the lock "
                 "survived", n->name, mine->replid, mine->offset, id->replid, id->replid2,
                 id->offset2 - 1);
    if (!have_id || strcmp(id->role, "master")) hl_node_close(n);
}

/* Node i's failover.lua got no answer (op->failed): the node did not answer this call, which
 * is neither a loss nor an error reply (n->st stays the timeout or the broken connection, so
 * that an acquire that may wait tries again). An acquire's grant there is undone on the next
 * contact: the node has just failed to answer, and the call's time may be spent. */
static void no_answer(hilock_client *c, hl_topo_lock *l, const hl_topo_op *op, size_t i)
{
    hl_node *n = &c->nodes[i];
    char why[sizeof n->err];
    memcpy(why, n->err, sizeof why);
    if (op->kind == HL_TOPO_ACQUIRE) hl_undo_add(c, i, l->key, l->token, l->ttl_ms);
    snprintf(n->err, sizeof n->err, "%.120s (the failover check, failover.lua)%s", why,
             op->kind == HL_TOPO_ACQUIRE ? "; undone on the next contact" : "");
}

/* Acquire: delete our value now where it was not safely granted (op->undo), within the
 * operation's bound (hl_exec with no command sends just the pending undos; a node that does
 * not answer in time keeps its undo for the next contact). */
static void undo_now(hilock_client *c, hl_topo_lock *l, const hl_topo_op *op)
{
    char keep[sizeof c->nodes->err];
    hl_deadline dl = one_round(op);   /* one for all: together they take one round trip's time */
    for (size_t i = 0; i < c->nnodes; i++) {
        if (!(op->undo & (1u << i))) continue;
        hl_undo_add(c, i, l->key, l->token, l->ttl_ms);
        /* (none kept, out of memory: it expires by its ttl; no time left: the next contact) */
        if (c->nodes[i].nundo && dl.hard_us > hl_now_us()) {
            memcpy(keep, c->nodes[i].err, sizeof keep);
            hl_exec(c, 1u << i, NULL, 0, dl);
            memcpy(c->nodes[i].err, keep, sizeof keep);
        }
        c->nodes[i].st = op->err;
    }
    hl_exec_clear(c);
}

/* The nodes whose identity this operation judges: granted ones (acquire; not undone by
 * WAIT), or those holding an anchor of the lock (extend, release, check). */
static uint32_t to_judge(hilock_client *c, hl_topo_lock *l, hl_topo_op *op, uint32_t ok, uint32_t granted)
{
    uint32_t m = 0;
    for (size_t i = 0; i < c->nnodes; i++) {
        uint32_t bit = 1u << i;
        if (!(ok & bit) || (op->kind == HL_TOPO_ACQUIRE && !(granted & bit))) continue;
        if (!wait_ok(c, op, i) || op->id_at < 0) continue;
        if (op->kind == HL_TOPO_ACQUIRE || (l->ids && l->ids[i].set)) m |= bit;
    }
    return m;
}

void hl_topo_end(hilock_client *c, hl_topo_lock *l, hl_topo_op *op, uint32_t ok, uint32_t granted)
{
    ident ids[HL_MAX_NODES];
    uint32_t m, judge, have = 0, slow = 0;
    if (op->id_at < 0 && op->wait_at < 0) return;
    judge = to_judge(c, l, op, ok, granted);
    for (size_t i = 0; i < c->nnodes; i++) {
        if (!(judge & (1u << i))) continue;
        if (fast_ident(c, op, &c->nodes[i], &ids[i])) have |= 1u << i;
        else slow |= 1u << i;
    }
    if (slow) have |= slow_idents(c, l, op, slow, ids);   /* (replaces those nodes' replies, err) */
    op->short_acks &= ~op->failed;   /* (no answer says more than WAIT's count) */
    for (size_t i = 0; i < c->nnodes; i++) {
        uint32_t bit = 1u << i;
        if (op->short_acks & bit) short_acks_msg(c, op, i);
        if (op->failed & bit) no_answer(c, l, op, i);
        else if ((judge & bit) && op->kind == HL_TOPO_ACQUIRE) end_grant(c, l, op, i, &ids[i], (have >> i) & 1);
        else if (judge & bit) end_verify(c, l, op, i, &ids[i], (have >> i) & 1, (granted >> i) & 1);
    }
    if (op->kind != HL_TOPO_ACQUIRE) return;
    if (op->undo) undo_now(c, l, op);
    /* granted on a connection opened before this call: is it still the master? */
    m = moved(c, granted & ~(op->refused | op->undo | op->failed), op->dl);
    for (size_t i = 0; i < c->nnodes; i++)
        if (m & (1u << i)) hl_undo_add(c, i, l->key, l->token, l->ttl_ms);   /* first thing, next contact */
    op->moved = m;
}

/* Node i's epoch for the token: the one read with its grant, else its topology's. */
static uint64_t node_epoch(const hilock_client *c, const hl_topo_lock *l, size_t i)
{
    if (l->ids && l->ids[i].set && l->ids[i].epoch) return l->ids[i].epoch;   /* read at the grant */
    return c->nodes[i].topo->epoch ? c->nodes[i].topo->epoch(&c->nodes[i]) : 0;
}

uint64_t hl_topo_fence(const hilock_client *c, const hl_topo_lock *l, size_t i, uint64_t counter)
{
    uint64_t epoch = node_epoch(c, l, i), t;
    /* no token (a kind that mints none, options.fencing = 0) stays none */
    if (!epoch || !counter) return counter;
    /* Redlock writes the token back into the counters, which the scripts add to as Lua
     * numbers (exact below 2^53): a larger epoch counts as the largest that keeps it so */
    if (c->nnodes > 1 && epoch > REDLOCK_EPOCH_MAX) epoch = REDLOCK_EPOCH_MAX;
    else if (epoch > EPOCH_MAX) return counter;
    /* a counter that already holds a token (Redlock's floor, epoch bits and all) keeps its
     * own high bits unless this node's epoch is higher: never below the counter itself */
    t = epoch << EPOCH_SHIFT | (counter & LOW_MASK);
    return t > counter ? t : counter;
}

hilock_status hl_topo_lost(hilock_client *c, const hl_topo_lock *l, const char *op, uint32_t lost)
{
    char pre[160];
    if (c->nnodes == 1) return hl_fail(c, HILOCK_LOST, "%s %s: %s", op, l->shown, c->nodes[0].err);
    snprintf(pre, sizeof pre, "%s %s: a failover since the grant: ", op, l->shown);
    return hl_fail_nodes(c, HILOCK_LOST, lost, pre);
}

/* ---- the private client of a topology's helpers ---- */

int hl_topo_private_init(hilock_client *sc, const hilock_client *c, const hl_node *n, size_t count,
                         const char *what, const char *user, const char *pass)
{
    char name[300];
    sc->refs = 1;
    sc->opt = c->opt;
    sc->opt.servers = NULL;
    sc->opt.nservers = 0;
    sc->quorum = 1;
    sc->cancel = c->cancel;   /* a cancel of the call ends its helpers' round trips too */
    if (!(sc->nodes = calloc(count, sizeof *sc->nodes))) return -1;
    for (size_t k = 0; k < count; k++) {
        hl_node *s = &sc->nodes[k];
        const hl_hostport *hp = &n->url.sentinels[k];
        s->url.kind = HL_URL_TCP;
        s->transport = n->transport;   /* reached as the data nodes are */
        s->transport_cfg = n->transport_cfg;
        s->topo = &hl_topo_direct;
        s->url.port = hp->port;
        snprintf(name, sizeof name, strchr(hp->host, ':') ? "%s [%s]:%d" : "%s %s:%d", what, hp->host,
                 hp->port);
        s->url.host = hl_strdup(hp->host);
        s->name = hl_strdup(name);
        sc->nnodes++;
        if (!s->url.host || !s->name) return -1;
        if (pass && !(s->url.pass = hl_strdup(pass))) return -1;
        if (user && !(s->url.user = hl_strdup(user))) return -1;
    }
    return 0;
}

void hl_topo_private_free(hilock_client *sc)
{
    hl_exec_clear(sc);
    for (size_t k = 0; k < sc->nnodes; k++) {
        hl_node *s = &sc->nodes[k];
        hl_node_close(s);
        hl_url_free(&s->url);
        free(s->name);
        free(s->undo);
    }
    free(sc->nodes);
    hl_buf_free(&sc->obuf);
}

void hl_topo_lock_free(hl_topo_lock *t)
{
    if (!t) return;
    free(t->ids);
    free(t->guard_key);
    t->ids = NULL;
    t->guard_key = NULL;
}
