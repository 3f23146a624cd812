/* topology.c -- failover awareness: which node is the master, and whether a lock survived
 * a change of master. Facts it relies on: /work/shared/reference/failover.md (Redis 7.0.15).
 *
 * Owns: the node topologies behind the engine's hl_topo_ops (engine.h) -- hl_topo_direct
 * (the URL is the master) and hl_topo_sentinel (topo_sentinel.c) -- and the failover part of the lock
 * operations (hl_topo_begin/end/fence/lost: identity, guard, WAIT, fencing epochs), which
 * reaches each node's topology through the same table. May call: the engine (hl_exec,
 * hl_undo_add, hl_node_close) and base; never the client or the lock layer's functions
 * (it reads a lock's fields). The engine never calls here but through node->topo.
 *
 * The topologies: hl_topo_direct (here: a redis:// or unix:// URL is its own master) and
 * hl_topo_sentinel (topo_sentinel.c: the Sentinels name it; see there for resolution, the
 * ROLE check and why release, extend and check ask whether the master moved).
 *
 * Identity. failover.lua, pipelined after the lock script, reads INFO replication: role,
 * master_replid, master_repl_offset (which already counts our write: an upper bound of where
 * it ends), master_replid2 and second_repl_offset. A lock records (replid, offset) per node
 * at the grant and at each extend. Later, the master that answers either has the same replid
 * (same history: no failover since), or it was promoted from a replica of ours: its replid2
 * is our replid and our offset is below its second_repl_offset (the replica had received our
 * write before it was promoted). Anything else -- a restart, a second failover before an
 * extend re-anchored the lock, a replica that lacked our write -- is HILOCK_LOST.
 *
 * Failover guard. See failover.lua: the first call that meets a promoted master records its
 * replid in the per-master hash hilock:guard and, from then on, the master grants nothing for
 * max(longest ttl granted under the previous master and replicated, this caller's ttl,
 * options.failover_guard_ms). The state lives on the server (replicated like any key), so
 * every client, also one started after the failover, sees the same guard.
 *
 * Fencing. Tokens are (Sentinel config-epoch << 42) | per-key counter: each failover raises
 * the epoch, so the new master's tokens exceed the old one's even when its counter went back
 * with the lost writes. The counter itself is at least the server clock in ms (< 2^42 until
 * the year 2109). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define GUARD_KEY           "hilock:guard"
#define EPOCH_SHIFT         42
#define LOW_MASK            ((UINT64_C(1) << EPOCH_SHIFT) - 1)

struct hl_lockid {            /* where a lock was granted (or last extended), per node */
    int       set;
    char      replid[41];
    long long offset;
    char      where[80];      /* sharded nodes: the server (shard master) it was on */
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

/* failover.lua's guard record: one hash per master ("hilock:guard"); with a cluster node, one
 * per slot of each master, "hilock:guard:{T}" with T of the lock key's slot (a script touches
 * one slot only), made once per lock. NULL: out of memory (no identity this time). */
static const char *guard_key(hilock_client *c, hilock *l)
{
    char tag[16];
    if (!any_sharded(c)) return GUARD_KEY;
    /* guard off: the record is never read; the lock key stands in, as a script declaring a
     * key that does not exist is refused (TRYAGAIN) while its slot migrates */
    if (!guard_on(c)) return l->key;
    if (!l->guard_key && (l->guard_key = malloc(sizeof GUARD_KEY + sizeof tag + 3))) {
        hl_slot_tag(hl_key_slot(l->key, strlen(l->key)), tag);
        snprintf(l->guard_key, sizeof GUARD_KEY + sizeof tag + 3, GUARD_KEY ":{%s}", tag);
    }
    return l->guard_key;
}

/* ---- direct: the URL names the master ---- */

static hilock_status direct_resolve(hilock_client *c, hl_node *n, int64_t deadline_us,
                                    const char **host, int *port)
{
    (void)c;
    (void)deadline_us;
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
    "direct", direct_resolve, NULL, NULL, hl_topo_drop_on_readonly, 0, NULL, NULL, NULL, NULL, NULL,
};

/* Nodes in mask (connected) whose master moved, in their topology's judgement (Sentinel: the
 * Sentinels no longer name it). Their connections are closed and st/err say so. */
static uint32_t moved(hilock_client *c, uint32_t mask)
{
    uint32_t m = 0;
    for (size_t i = 0; i < c->nnodes; i++) {
        hl_node *n = &c->nodes[i];
        if ((mask & (1u << i)) && n->topo->moved && hl_node_connected(c, n) && n->topo->moved(c, n))
            m |= 1u << i;
    }
    return m;
}

/* ---- around a lock operation ---- */

int hl_topo_begin(hilock_client *c, hilock *l, hl_topo_op *op, hl_topo_kind kind,
                  int64_t ttl_ms, hl_cmd *cmds, int n)
{
    memset(op, 0, sizeof *op);
    op->kind = kind;
    op->id_at = op->wait_at = -1;
    if (aware(c) && n < HL_MAX_CMDS && guard_key(c, l)) {
        hl_cmd *s = &cmds[n];
        if (kind != HL_TOPO_ACQUIRE) moved(c, hl_all_nodes(c));
        op->id_at = n++;
        hl_cmd_init(s, &hl_lua_failover, 2);
        hl_cmd_arg(s, guard_key(c, l), (size_t)-1);
        hl_cmd_arg(s, l->key, (size_t)-1);
        hl_cmd_arg(s, kind == HL_TOPO_ACQUIRE ? "acquire" : kind == HL_TOPO_EXTEND ? "extend" : "id",
                   (size_t)-1);
        hl_cmd_arg(s, l->token, (size_t)-1);
        hl_cmd_argi(s, op->arg[0], ttl_ms > 0 ? ttl_ms : l->ttl_ms);
        hl_cmd_argi(s, op->arg[1], c->opt.failover_guard_ms);
        hl_cmd_arg(s, guard_on(c) ? "1" : "0", 1);
        hl_cmd_arg(s, any_sharded(c) && kind == HL_TOPO_ACQUIRE ? "1" : "0", 1);   /* epoch: fencing */
    }
    if (c->opt.min_replicas > 0 && n < HL_MAX_CMDS &&
        (kind == HL_TOPO_ACQUIRE || kind == HL_TOPO_EXTEND)) {
        hl_cmd *w = &cmds[n];
        op->wait_at = n++;
        hl_cmd_init(w, NULL, 0);
        hl_cmd_arg(w, "WAIT", 4);
        hl_cmd_argi(w, op->arg[2], c->opt.min_replicas);
        hl_cmd_argi(w, op->arg[3], c->opt.replicas_timeout_ms);
        op->extra_us = c->opt.replicas_timeout_ms * 1000;
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

/* Is a write recorded at (mine->replid, mine->offset) in the history of the master `cur`? */
static int survived(const struct hl_lockid *mine, const ident *cur)
{
    if (!strcmp(cur->replid, mine->replid)) return 1;
    return !strcmp(cur->replid2, mine->replid) && mine->offset < cur->offset2;
}

static int record(hilock_client *c, hilock *l, size_t i, const ident *id)
{
    if (!l->ids && !(l->ids = calloc(c->nnodes, sizeof *l->ids))) return -1;
    l->ids[i].set = 1;
    memcpy(l->ids[i].replid, id->replid, 41);
    l->ids[i].offset = id->offset;
    snprintf(l->ids[i].where, sizeof l->ids[i].where, "%s", c->nodes[i].name);
    l->ids[i].epoch = id->epoch > 0 ? (uint64_t)id->epoch : 0;
    return 0;
}

/* One node of an acquire that the lock script granted. */
static void end_grant(hilock_client *c, hilock *l, hl_topo_op *op, size_t i, const ident *id, int have_id)
{
    hl_node *n = &c->nodes[i];
    uint32_t bit = 1u << i;
    long long acks;
    if (op->wait_at >= 0) {
        const hl_reply *w = n->reply[op->wait_at];
        acks = hl_reply_type(w) == HL_R_INTEGER ? hl_reply_int(w) : -1;
        if (acks < c->opt.min_replicas) {
            op->undo |= bit;
            op->err = HILOCK_EREPLICAS;
            if (acks < 0)
                snprintf(n->err, sizeof n->err, "%s: WAIT: %.120s; the lock was undone", n->name,
                         hl_reply_str(w, NULL) ? hl_reply_str(w, NULL) : "unexpected reply");
            else
                snprintf(n->err, sizeof n->err, "%s: only %lld of %d replicas acknowledged within "
                         "%lld ms (min_replicas); the lock was undone", n->name, acks,
                         c->opt.min_replicas, (long long)c->opt.replicas_timeout_ms);
            return;
        }
    }
    if (op->id_at < 0) return;
    if (have_id && id->left > 0) {   /* failover.lua has already deleted our value */
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

/* One node of extend, release or check: did our lock survive any change of master? */
static void end_verify(hilock_client *c, hilock *l, hl_topo_op *op, size_t i, const ident *id, int have_id)
{
    hl_node *n = &c->nodes[i];
    struct hl_lockid *mine = l->ids ? &l->ids[i] : NULL;
    if (op->kind == HL_TOPO_EXTEND && op->wait_at >= 0) {
        const hl_reply *w = n->reply[op->wait_at];
        long long acks = hl_reply_type(w) == HL_R_INTEGER ? hl_reply_int(w) : -1;
        if (acks < c->opt.min_replicas) {
            op->short_acks |= 1u << i;
            op->err = HILOCK_EREPLICAS;
            snprintf(n->err, sizeof n->err, "%s: only %lld of %d replicas acknowledged the new ttl "
                     "within %lld ms (min_replicas); the lock keeps its old validity", n->name,
                     acks < 0 ? 0 : acks, c->opt.min_replicas, (long long)c->opt.replicas_timeout_ms);
        }
    }
    if (op->id_at < 0 || !mine || !mine->set) return;
    if (have_id && !strcmp(id->role, "master") && n->topo->route && strcmp(mine->where, n->name) &&
        strcmp(id->replid, mine->replid) && strcmp(id->replid2, mine->replid)) {
        /* Another shard's master, whose history never was our master's (a replica promoted
         * in our shard would have our master's replid as its replid2): the slot was resharded
         * and MIGRATE carried the key. No failover of ours: the script's compare of the value
         * decides, and the lock is anchored on this master from now on. (Two failovers of the
         * granting shard before this call would look the same; see docs/cluster.md.) */
        memcpy(mine->replid, id->replid, 41);
        mine->offset = id->offset;
        snprintf(mine->where, sizeof mine->where, "%s", n->name);
        return;
    }
    if (have_id && !strcmp(id->role, "master") && survived(mine, id)) {
        /* the lock is in this master's history: anchor it here, so that the next failover is
         * judged against this master (the offset stays ours: offsets run on across a failover) */
        memcpy(mine->replid, id->replid, 41);
        if (op->kind == HL_TOPO_EXTEND && id->offset > mine->offset) mine->offset = id->offset;
        snprintf(mine->where, sizeof mine->where, "%s", n->name);
        return;
    }
    op->lost |= 1u << i;
    if (!have_id)
        snprintf(n->err, sizeof n->err, "%s: the master's replication identity could not be read: "
                 "no proof the lock survived", n->name);
    else if (strcmp(id->role, "master"))
        snprintf(n->err, sizeof n->err, "%s: no longer a master (role %s): a failover since the grant",
                 n->name, id->role);
    else
        snprintf(n->err, sizeof n->err, "%s: the master changed since the grant (replication id "
                 "%.8s, offset %lld; now %.8s, promoted from %.8s at %lld): no proof the lock "
                 "survived", n->name, mine->replid, mine->offset, id->replid, id->replid2,
                 id->offset2 - 1);
    if (!have_id || strcmp(id->role, "master")) hl_node_close(n);
}

void hl_topo_end(hilock_client *c, hilock *l, hl_topo_op *op, uint32_t ok, uint32_t granted)
{
    uint32_t m;
    if (op->id_at < 0 && op->wait_at < 0) return;
    for (size_t i = 0; i < c->nnodes; i++) {
        ident id;
        int have_id;
        if (!(ok & (1u << i))) continue;
        have_id = op->id_at >= 0 && parse_ident(c->nodes[i].reply[op->id_at], &id);
        if (op->kind != HL_TOPO_ACQUIRE) end_verify(c, l, op, i, &id, have_id);
        else if (granted & (1u << i)) end_grant(c, l, op, i, &id, have_id);
    }
    if (op->kind != HL_TOPO_ACQUIRE) return;
    if (op->undo) {
        /* not safely granted: delete our value now (hl_exec with no command sends just the
         * pending undos; a node that does not answer keeps its undo for the next contact) */
        char keep[sizeof c->nodes->err];
        for (size_t i = 0; i < c->nnodes; i++) {
            if (!(op->undo & (1u << i))) continue;
            hl_undo_add(c, i, l->key, l->token, l->ttl_ms);
            if (!c->nodes[i].nundo) continue;   /* out of memory: it expires by its ttl */
            memcpy(keep, c->nodes[i].err, sizeof keep);
            hl_exec(c, 1u << i, NULL, 0, c->opt.io_timeout_ms * 1000,
                    hl_add_sat(hl_now_us(), c->opt.io_timeout_ms * 1000));
            memcpy(c->nodes[i].err, keep, sizeof keep);
            c->nodes[i].st = op->err;
        }
        hl_exec_clear(c);
    }
    /* granted on a connection opened before this call: is it still the master? */
    m = moved(c, granted & ~(op->refused | op->undo));
    for (size_t i = 0; i < c->nnodes; i++)
        if (m & (1u << i)) hl_undo_add(c, i, l->key, l->token, l->ttl_ms);   /* first thing, next contact */
    op->moved = m;
}

uint64_t hl_topo_fence(const hilock_client *c, const hilock *l, uint32_t granted, uint64_t low)
{
    uint64_t epoch = 0;
    for (size_t i = 0; i < c->nnodes; i++) {
        uint64_t e = 0;
        if (!(granted & (1u << i))) continue;
        if (l->ids && l->ids[i].set && l->ids[i].epoch) e = l->ids[i].epoch;   /* read at the grant */
        else if (c->nodes[i].topo->epoch) e = c->nodes[i].topo->epoch(&c->nodes[i]);
        if (e > epoch) epoch = e;
    }
    /* a counter past 2^42 (the year 2109) would reach into the epoch: leave it as it is; and
     * no token (a kind that mints none, options.fencing = 0) stays none */
    if (!epoch || !low || low > LOW_MASK || epoch >= (UINT64_C(1) << (64 - EPOCH_SHIFT))) return low;
    return epoch << EPOCH_SHIFT | low;
}

hilock_status hl_topo_lost(hilock_client *c, hilock *l, const char *op, uint32_t lost)
{
    char pre[160];
    if (c->nnodes == 1) return hl_fail(c, HILOCK_LOST, "%s %s: %s", op, l->key, c->nodes[0].err);
    snprintf(pre, sizeof pre, "%s %.100s: a failover since the grant: ", op, l->key);
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
