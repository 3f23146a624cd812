/* SPDX-License-Identifier: BSD-3-Clause */
/* cluster.c -- the Redis Cluster topology (redis-cluster:// nodes) behind the engine's
 * hl_topo_ops (engine.h) as hl_topo_cluster. Facts it relies on: docs/failover-facts.md (Redis
 * Cluster: slots, redirections, config epochs); behaviour and guarantees: docs/cluster.md.
 *
 * Owns: a cluster node's state -- its seeds, the slot map, one connection and one undo list
 * per master of the map -- and the cluster's redirections. May call: the engine (hl_exec_any
 * on a private client whose nodes are the seeds and a few known masters; hl_node_close) and
 * base (hl_key_slot).
 * Called by: the engine through node->topo (route, resolve, redirect), topology.c through the
 * same table (epoch); the client assigns it and frees it.
 *
 * One cluster URL is one "master" to the rest of the library: one hl_node. The engine gives a
 * node one connection; a cluster needs one per shard. So before each pipeline, route() picks
 * the master owning the slot of the pipeline's first key (every key a lock script touches
 * shares that slot: hl_aux_key) and swaps that server's connection, undo list and name into
 * the node, parking the ones in use. A new connection goes where resolve() says: the server
 * chosen. Undos stay with the server where the write may have landed, so an undo is sent to
 * the shard of its key (an undo of a slot that moved since gets MOVED once and is dropped: it
 * expires by its ttl).
 *
 * The slot map comes from CLUSTER NODES (slots, masters, addresses and config epochs in one
 * reply; CLUSTER SLOTS and SHARDS lack the config epoch the fencing token needs), asked of
 * every seed and of up to NKNOWN masters of the map in hand at once (the first answer wins, so
 * one hung node costs nothing while another answers): on the first call (no map: within the
 * call's connect bound), and when the map is stale -- after a MOVED, a CLUSTERDOWN, a slot with
 * no owner or a failed round trip -- at most once per REFRESH_EVERY_US (once a second while
 * none answers) and within REFRESH_BUDGET_MS (a failed refresh routes with the map in hand:
 * MOVED answers still correct it); the engine starts the round trip's bounds after route().
 * The map may be HL_RESP_MAX_TOPOLOGY bytes on those connections (they ask nothing else).
 *
 * Size. The server table is built anew from each map: one entry per master owning slots (at
 * most HL_SLOTS), plus room for EXTRA_SRV redirect targets until the next refresh; lookups by
 * address go through a hash index (a refresh is linear in the map), and a key's server is
 * owner[hl_key_slot(key)]: no search, no allocation per call. A master still in the new map
 * keeps its entry's connection and undo list; one that left it has its connection closed and
 * its undos handed to the master that owns each undo's slot now (where the value went, if the
 * slot moved or failed over; an undo deletes by value, so it is safe anywhere), or kept aside
 * until a map names an owner, or dropped once surely expired.
 *
 * After each round trip, redirect() reads the replies: MOVED (the slot has a new owner for
 * good: the map is fetched again and the MOVED answer kept over a seed that lags), ASK (a slot
 * in migration: that server once, each command preceded by ASKING; the map is left alone),
 * TRYAGAIN (a multi-key script during a migration, when some keys have moved and others not)
 * and CLUSTERDOWN (retried after a short pause). The engine repeats at most HL_MAX_REDIRECTS
 * times and never past the first round trip's deadline; then the last error reply stands and
 * names the server and the cause.
 *
 * Failover awareness is topology.c's, as behind Sentinel (replication identity, the guard,
 * WAIT on the shard's master), with three cluster facts: the record is one per slot; the
 * fencing epoch is the shard master's config epoch (a failover, and the end of a slot import,
 * raise it above every other), kept per slot in that record, with this map's epoch of the
 * master as its lower bound (epoch below); and a lock found on another shard whose history is
 * not its granting master's was carried there by a resharding if its value is there, and lost
 * to a failover of its shard if the master that granted it (by node id) serves no slot in
 * the map now (topology.c, end_verify, through node_id and serves below). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topology.h"

#define REFRESH_BUDGET_MS 300      /* a refresh with a map in hand (every source at once) */
#define REFRESH_EVERY_US  250000   /* with a map in hand, at most one refresh per this ... */
#define REFRESH_AFTER_FAIL_US 1000000   /* ... and one per second while none answers */
#define NKNOWN            3        /* masters of the map asked with the seeds (a rotating few) */
#define EXTRA_SRV         64       /* redirect targets added between two refreshes */
#define MAX_HOST          255      /* a host name (DNS: 253) */
#define BACKOFF_US        10000    /* TRYAGAIN / CLUSTERDOWN: 10 ms, doubling, at most 160 ms */

typedef struct parked {       /* what the engine keeps in the node, while another server's is there */
    struct hl_conn *conn;
    hl_undo        *undo;
    size_t          nundo, capundo;
    char           *name;
    hl_facts        facts;   /* its server's, read by that connection's handshake */
    unsigned long   connects;   /* its server's handshakes (a CONNECT's reconnect) */
} parked;

typedef struct srv {
    char     *host;
    int       port;
    int       key;            /* its number for this node's life (>= 1), kept across maps: the
                                 event loop's name for it (its index changes with each map) */
    char      id[41];         /* node id in the last map ("": a redirect target it has not named) */
    uint64_t  epoch;          /* config epoch in the last map */
    parked    park;
} srv;

struct replica {
    char     *host;
    int       port;
    char      id[41], of[41];   /* its node id, its master's */
};

typedef struct table {        /* the servers of one map, and the redirect targets since */
    srv      *s;
    int       n, cap;         /* cap: the map's masters + EXTRA_SRV */
    int32_t  *ix;             /* by host:port, open addressing: entry + 1, 0 = free */
    size_t    ixcap;          /* a power of two, >= 2 * cap */
    int       last_key;       /* the last srv.key handed out (carried to the next table) */
} table;

struct hl_topo {
    hilock_client sc;         /* the seeds, then up to NKNOWN masters: nodes of a private client */
    size_t    nseeds;
    int       known_at;       /* where the next refresh starts picking masters to ask */
    table     tb;
    int16_t   owner[HL_SLOTS];   /* tb index, -1: unknown (tb.cap <= HL_SLOTS + EXTRA_SRV) */
    int       have_map, stale;
    int64_t   next_refresh;   /* with a map in hand, no refresh before (monotonic us) */
    int       cur;            /* the server whose connection is in the node; -1: none yet */
    parked    home;           /* the node's own, before the first route */
    parked    orphans;        /* undos of servers that left the map, whose slot has no owner */
    int       ask, ask_slot;  /* ASK target for the next round trip of that slot, -1: none */
    int       moved_slot, moved_to;   /* the last MOVED, kept over a lagging seed's map */
    int       hops;           /* TRYAGAIN / CLUSTERDOWN pauses within one call */
    long      given;          /* slots the map being read has given so far (map_slots) */
    struct replica *rep;      /* the map's replicas, kept only once the operator tools ask
                                 (keep_replicas; hl_cluster_nodes): a lock client pays nothing */
    int       nrep, keep_replicas;
};

static void cluster_free(hl_node *n);

/* The private client's nodes: the URL's seeds, then up to NKNOWN empty ones for masters of
 * the map (their address is set at each refresh), all asked at once: at most 32 in all. */
static int private_init(hilock_client *c, hl_node *n, struct hl_topo *t)
{
    size_t nk = NKNOWN < 32 - n->url.nsentinels ? NKNOWN : 32 - n->url.nsentinels;
    hl_node *nodes;
    t->nseeds = n->url.nsentinels;
    if (hl_topo_private_init(&t->sc, c, n, t->nseeds, "seed", n->url.user, n->url.pass)) return -1;
    if (!(nodes = realloc(t->sc.nodes, (t->nseeds + nk) * sizeof *nodes))) return -1;
    t->sc.nodes = nodes;
    memset(nodes + t->nseeds, 0, nk * sizeof *nodes);
    for (size_t k = 0; k < t->nseeds + nk; k++) {
        hl_node *s = &nodes[k];
        s->topology_replies = 1;
        if (k < t->nseeds) continue;
        s->url.kind = HL_URL_TCP;
        s->transport = nodes[0].transport;
        s->transport_cfg = nodes[0].transport_cfg;
        s->topo = nodes[0].topo;
        t->sc.nnodes++;
        if (n->url.pass && !(s->url.pass = hl_strdup(n->url.pass))) return -1;
        if (n->url.user && !(s->url.user = hl_strdup(n->url.user))) return -1;
    }
    return 0;
}

static struct hl_topo *topo_get(hilock_client *c, hl_node *n)
{
    struct hl_topo *t = n->topo_state;
    if (t) return t;
    if (!(t = calloc(1, sizeof *t))) return NULL;
    t->cur = t->ask = t->moved_slot = -1;
    memset(t->owner, 0xff, sizeof t->owner);
    n->topo_state = t;
    if (private_init(c, n, t)) goto oom;
    return t;
oom:
    cluster_free(n);
    return NULL;
}

static void slot_park(hl_node *n, parked *p)
{
    p->conn = n->conn;
    p->undo = n->undo;
    p->nundo = n->nundo;
    p->capundo = n->capundo;
    p->name = n->name;
    p->connects = n->connects;
    hl_node_facts_get(n, &p->facts);
}

static void slot_unpark(hl_node *n, parked *p)
{
    n->conn = p->conn;
    n->undo = p->undo;
    n->nundo = p->nundo;
    n->capundo = p->capundo;
    n->name = p->name;
    n->connects = p->connects;
    hl_node_facts_set(n, &p->facts);   /* (a never-used shard's: unknown, as calloc left it) */
    memset(p, 0, sizeof *p);
}

static void free_undos(parked *p)
{
    for (size_t u = 0; u < p->nundo; u++) {
        free(p->undo[u].key);
        free(p->undo[u].value);
    }
    free(p->undo);
    p->undo = NULL;
    p->nundo = p->capundo = 0;
}

/* Close and free what is parked in p (the node's own fields are the client's to free). */
static void drop_parked(hl_node *n, parked *p)
{
    parked mine;
    slot_park(n, &mine);
    slot_unpark(n, p);
    hl_node_close(n);
    slot_park(n, p);
    free_undos(p);
    free(p->name);
    memset(p, 0, sizeof *p);
    slot_unpark(n, &mine);
}

/* ---- the server table ---- */

static size_t addr_hash(const char *host, size_t hlen, int port)
{
    uint64_t h = 14695981039346656037ULL ^ (uint64_t)port;   /* FNV-1a */
    for (size_t i = 0; i < hlen; i++) h = (h ^ (unsigned char)host[i]) * 1099511628211ULL;
    return (size_t)(h ^ (h >> 29));
}

static int tbl_init(table *tb, int cap)
{
    memset(tb, 0, sizeof *tb);
    for (tb->ixcap = 16; tb->ixcap < 2 * (size_t)cap; tb->ixcap *= 2) {}
    tb->s = calloc((size_t)cap, sizeof *tb->s);
    tb->ix = calloc(tb->ixcap, sizeof *tb->ix);
    tb->cap = cap;
    return tb->s && tb->ix ? 0 : -1;
}

/* The entry for host:port (hlen bytes of host): its index, or -1 and *slot where to add it. */
static int tbl_find(const table *tb, const char *host, size_t hlen, int port, size_t *slot)
{
    size_t i;
    if (!tb->ix) return -1;   /* (no map yet) */
    for (i = addr_hash(host, hlen, port) & (tb->ixcap - 1); tb->ix[i]; i = (i + 1) & (tb->ixcap - 1)) {
        const srv *s = &tb->s[tb->ix[i] - 1];
        if (s->port == port && !strncmp(s->host, host, hlen) && s->host[hlen] == '\0') return tb->ix[i] - 1;
    }
    *slot = i;
    return -1;
}

/* The entry for host:port, added if new (with `from`'s parked state, if given: moved). -1:
 * out of room, out of memory, or no such address. */
static int tbl_at(table *tb, const char *host, size_t hlen, int port, parked *from)
{
    char name[MAX_HOST + 32];
    size_t slot;
    int i;
    srv *s;
    if (!tb->ix || hlen == 0 || hlen > MAX_HOST) return -1;
    if ((i = tbl_find(tb, host, hlen, port, &slot)) >= 0 || tb->n == tb->cap) return i;
    s = &tb->s[tb->n];
    if (!(s->host = hl_strndup(host, hlen))) return -1;
    s->port = port;
    if (!from) s->key = ++tb->last_key;   /* (a carried entry gets its old one back: add_node) */
    if (from) {
        s->park = *from;
        memset(from, 0, sizeof *from);
    } else {
        snprintf(name, sizeof name, strchr(s->host, ':') ? "cluster [%s]:%d" : "cluster %s:%d", s->host, port);
        if (!(s->park.name = hl_strdup(name))) {
            free(s->host);
            s->host = NULL;
            return -1;
        }
    }
    tb->ix[slot] = ++tb->n;
    return tb->n - 1;
}

static int srv_at(struct hl_topo *t, const char *host, size_t hlen, int port)
{
    return tbl_at(&t->tb, host, hlen, port, NULL);
}

/* Free table tb's entries, but the one whose state is in the node (keep; -1: none). */
static void tbl_free(hl_node *n, table *tb, int keep)
{
    for (int i = 0; i < tb->n; i++) {
        if (i != keep) drop_parked(n, &tb->s[i].park);
        free(tb->s[i].host);
    }
    free(tb->s);
    free(tb->ix);
    memset(tb, 0, sizeof *tb);
}

static void free_replicas(struct hl_topo *t)
{
    for (int r = 0; r < t->nrep; r++) free(t->rep[r].host);
    free(t->rep);
    t->rep = NULL;
    t->nrep = 0;
}

static void cluster_free(hl_node *n)
{
    struct hl_topo *t = n->topo_state;
    if (!t) return;
    if (t->cur >= 0) drop_parked(n, &t->home);
    tbl_free(n, &t->tb, t->cur);
    free_undos(&t->orphans);
    free_replicas(t);
    hl_topo_private_free(&t->sc);
    free(t);
    n->topo_state = NULL;
}

/* ---- undos of servers that left the map ---- */

/* Move undo u (its strings too) to the end of p's list, which keeps at most HL_UNDO_MAX (the
 * oldest go first, as hl_undo_add does: they expire by their ttl). */
static void undo_move(parked *p, hl_undo *u)
{
    if (p->nundo >= HL_UNDO_MAX) {
        free(p->undo[0].key);
        free(p->undo[0].value);
        memmove(p->undo, p->undo + 1, --p->nundo * sizeof *p->undo);
    }
    if (p->nundo == p->capundo) {
        size_t cap = p->capundo ? p->capundo * 2 : 4;
        hl_undo *x = realloc(p->undo, cap * sizeof *x);
        if (!x) {   /* best effort, as hl_undo_add: the key still expires by its ttl */
            free(u->key);
            free(u->value);
            return;
        }
        p->undo = x;
        p->capundo = cap;
    }
    p->undo[p->nundo++] = *u;
}

/* Hand each undo of p to the server owning its slot in the map now (else keep it aside; one
 * surely expired is dropped); p's list is emptied. */
static void rehome(struct hl_topo *t, parked *p, int64_t now)
{
    for (size_t u = 0; u < p->nundo; u++) {
        hl_undo *x = &p->undo[u];
        int to = t->owner[hl_key_slot(x->key, strlen(x->key))];
        if (x->expires_us <= now) {
            free(x->key);
            free(x->value);
        } else {
            undo_move(to >= 0 ? &t->tb.s[to].park : &t->orphans, x);
        }
    }
    p->nundo = 0;
    free_undos(p);
}

/* ---- the slot map ---- */

typedef struct mline {   /* a line of CLUSTER NODES with an address */
    int         master;     /* 1: a master with a slot; 0: a replica (of `of`) */
    int         self;       /* the line of the node that answered ("myself") */
    const char *id, *of;    /* 40 bytes each (of: a replica's master) */
    const char *host;
    size_t      hlen;
    int         port;
    uint64_t    epoch;
    const char *slots, *end;   /* its slot fields */
} mline;

/* Is `flag` one of the comma-separated flags in f[0..n)? */
static int has_flag(const char *f, size_t n, const char *flag)
{
    size_t fl = strlen(flag);
    for (const char *p = f, *end = f + n; p < end;) {
        const char *comma = memchr(p, ',', (size_t)(end - p)), *e = comma ? comma : end;
        if ((size_t)(e - p) == fl && !memcmp(p, flag, fl)) return 1;
        p = e + 1;
    }
    return 0;
}

/* One line of CLUSTER NODES: "<id> <ip:port@cport[,hostname]> <flags> <master> <ping> <pong>
 * <config-epoch> <link> <slot> <slot-slot> [<slot>->-<id>] ...". 1 with *m if it is a master
 * with an address and at least one slot (a slot in migration stays with its owner: "[...]"
 * entries are not slots of the line), or a replica with an address (m->master 0). An empty ip (":7000@17000": a node that has met no
 * other, e.g. a one-node cluster) is the node that answered, as the specification says. */
static int map_line(const char *line, size_t len, const char *answered, mline *m)
{
    const char *tok[9], *p = line, *end = line + len, *at, *colon;
    size_t tl[9];
    int nt = 0;
    while (nt < 9 && p < end) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        tok[nt] = p;
        tl[nt++] = (size_t)((sp ? sp : end) - p);
        p = sp ? sp + 1 : end;
    }
    if (nt < 8 || tl[0] != 40) return 0;
    m->master = has_flag(tok[2], tl[2], "master");
    m->self = has_flag(tok[2], tl[2], "myself");
    if (m->master ? nt < 9 : tl[3] != 40) return 0;
    at = memchr(tok[1], '@', tl[1]);
    if (!at) at = tok[1] + tl[1];
    for (colon = at; colon > tok[1] && colon[-1] != ':'; colon--) {}
    {
        char *pe;
        long port = strtol(colon, &pe, 10);
        if (colon == tok[1] || pe == colon || port <= 0 || port > 65535) return 0;   /* noaddr */
        m->port = (int)port;
    }
    m->host = colon - 1 == tok[1] ? answered : tok[1];
    m->hlen = colon - 1 == tok[1] ? strlen(answered) : (size_t)(colon - 1 - tok[1]);
    m->id = tok[0];
    m->of = tok[3];
    if (!m->master) return 1;
    m->epoch = strtoull(tok[6], NULL, 10);
    m->slots = tok[8];
    m->end = end;
    for (const char *q = m->slots; q < end; q++)
        if (q[0] != ' ' && q[0] != '[' && (q == m->slots || q[-1] == ' ')) return 1;
    return 0;
}

/* m's slots go to owner[] as server idx. A map gives each slot once: past HL_SLOTS slots in
 * all (a hostile or broken reply, "0-16383" on every line) the rest is ignored, so the work
 * stays linear in the reply. */
static void map_slots(struct hl_topo *t, const mline *m, int idx)
{
    for (const char *q = m->slots, *end = m->end; q < end;) {
        const char *sp = memchr(q, ' ', (size_t)(end - q)), *e = sp ? sp : end;
        char *dash;
        long lo = strtol(q, &dash, 10), hi = lo;
        if (*q != '[' && dash > q) {
            if (dash < e && *dash == '-') hi = strtol(dash + 1, NULL, 10);
            if (lo < 0) lo = 0;
            if (hi >= HL_SLOTS) hi = HL_SLOTS - 1;
            if (lo <= hi && (t->given += hi - lo + 1) <= HL_SLOTS)
                for (long s = lo; s <= hi; s++) t->owner[s] = (int16_t)idx;
        }
        q = sp ? sp + 1 : end;
    }
}

/* Each line of text (len bytes) with an address to fn (NULL: none); how many masters there
 * were, and replicas in *nrep. */
static int each_line(const char *text, size_t len, const char *answered,
                     void (*fn)(struct hl_topo *, table *, const mline *), struct hl_topo *t, table *old,
                     int *nrep)
{
    int count = 0;
    *nrep = 0;
    for (const char *l = text; l < text + len;) {
        const char *nl = memchr(l, '\n', (size_t)(text + len - l));
        mline m;
        if (map_line(l, (size_t)((nl ? nl : text + len) - l), answered, &m)) {
            if (m.master) count++;
            else ++*nrep;
            if (fn) fn(t, old, &m);
        }
        l = nl ? nl + 1 : text + len;
    }
    return count;
}

/* A replica of the new map, where they are kept (t->rep sized to the map). */
static void add_replica(struct hl_topo *t, const mline *m)
{
    struct replica *r;
    if (!t->rep || m->hlen == 0 || m->hlen > MAX_HOST) return;
    r = &t->rep[t->nrep];
    if (!(r->host = hl_strndup(m->host, m->hlen))) return;
    r->port = m->port;
    memcpy(r->id, m->id, 40);
    memcpy(r->of, m->of, 40);
    t->nrep++;
}

/* A replica line of another node's map (hl_cluster_nodes): one the map in use does not name
 * is added, and a node's own line says whose replica it is. A node's view of the others lags
 * theirs by a gossip round or more (seen: a replica restarted a moment ago still called two
 * replicas slotless masters), so the operator tools list every replica that any node that
 * answered names, and each one's own word wins. */
static void merge_replica(struct hl_topo *t, table *unused, const mline *m)
{
    struct replica *v;
    (void)unused;
    if (m->master || !t->rep) return;
    for (int r = 0; r < t->nrep; r++)
        if (!memcmp(t->rep[r].id, m->id, 40)) {
            if (m->self) memcpy(t->rep[r].of, m->of, 40);
            return;
        }
    if (!(v = realloc(t->rep, ((size_t)t->nrep + 2) * sizeof *v))) return;   /* (listed as far as it can) */
    t->rep = v;
    add_replica(t, m);
}

/* A node of the new map: a master's entry, the old table's carried over (connection, undos). */
static void add_node(struct hl_topo *t, table *old, const mline *m)
{
    size_t at;
    int was, idx;
    if (!m->master) {
        add_replica(t, m);
        return;
    }
    was = tbl_find(old, m->host, m->hlen, m->port, &at);
    idx = tbl_at(&t->tb, m->host, m->hlen, m->port, was >= 0 ? &old->s[was].park : NULL);
    if (idx < 0) return;   /* (more masters than slots: a reply no cluster sends) */
    if (was >= 0) t->tb.s[idx].key = old->s[was].key;
    t->tb.s[idx].epoch = m->epoch;
    memcpy(t->tb.s[idx].id, m->id, 40);
    map_slots(t, m, idx);
}

/* Put server target's connection, undo list and name in the node, parking those in use. */
static void use(hl_node *n, struct hl_topo *t, int target)
{
    if (target == t->cur) return;
    slot_park(n, t->cur >= 0 ? &t->tb.s[t->cur].park : &t->home);
    slot_unpark(n, &t->tb.s[target].park);
    t->cur = target;
}

/* The map in text (CLUSTER NODES, from the node at host `answered`) becomes the map in use: a
 * table sized to it, the entries of masters still present carried over, the others closed,
 * their undos handed on (rehome). -1: out of memory (the old map stays). */
static int install_map(hl_node *n, struct hl_topo *t, const char *text, size_t len, const char *answered)
{
    int nrep, was, nm = each_line(text, len, answered, NULL, t, NULL, &nrep);
    int64_t now = hl_now_us();
    size_t at;
    table old = t->tb, fresh;
    struct replica *rep = NULL;
    if (nm > HL_SLOTS) nm = HL_SLOTS;
    if (tbl_init(&fresh, nm + EXTRA_SRV) || (t->keep_replicas && !(rep = calloc((size_t)nrep + 1, sizeof *rep)))) {
        free(fresh.s);
        free(fresh.ix);
        return -1;
    }
    free_replicas(t);
    t->rep = rep;
    if ((was = t->cur) >= 0) {   /* the node gets its own fields back while entries move */
        slot_park(n, &old.s[t->cur].park);
        slot_unpark(n, &t->home);
        t->cur = -1;
    }
    t->ask = -1;   /* (an index of the old table) */
    fresh.last_key = old.last_key;
    t->tb = fresh;
    t->given = 0;
    memset(t->owner, 0xff, sizeof t->owner);
    each_line(text, len, answered, add_node, t, &old, &nrep);
    if (t->moved_slot >= 0) {   /* the last MOVED stands over a seed that lags */
        srv *o = &old.s[t->moved_to];
        int idx = tbl_at(&t->tb, o->host, strlen(o->host), o->port, &o->park);
        if (idx >= 0) {
            t->owner[t->moved_slot] = (int16_t)idx;
            t->tb.s[idx].key = o->key;
        }
        t->moved_slot = -1;
    }
    if (was >= 0)   /* the server in use stays in use if the map (or the MOVED kept over it)
                       still has it (the call that refreshed reads its replies, names it, or
                       flushes its undos) */
        was = tbl_find(&t->tb, old.s[was].host, strlen(old.s[was].host), old.s[was].port, &at);
    for (int i = 0; i < old.n; i++) rehome(t, &old.s[i].park, now);
    {
        parked o = t->orphans;
        memset(&t->orphans, 0, sizeof t->orphans);
        rehome(t, &o, now);
    }
    tbl_free(n, &old, -1);   /* (what moved left nothing behind) */
    if (was >= 0) use(n, t, was);
    return 0;
}

/* ---- refresh ---- */

/* fetch_map's `full`: 0 a lock's refresh; FULL the operator tools' (the map now); FULL_EVERY
 * theirs with every replica any node names (hl_cluster_nodes' `every`). */
enum { FULL = 1, FULL_EVERY = 2 };

static int fetch_map(hl_node *n, struct hl_topo *t, hl_deadline dl, int full);

/* fetch_map, reported (hilock_observe.h: MAP_REFRESH). */
static int map_refresh(hilock_client *c, hl_node *n, struct hl_topo *t, hl_deadline dl, int full)
{
    int64_t t0 = hl_now_us();
    int rc = fetch_map(n, t, dl, full);
    hl_emit_simple(c, HILOCK_EVENT_MAP_REFRESH, NULL, 0, n->name, rc < 0 ? n->st : HILOCK_OK,
                   hl_now_us() - t0);
    return rc;
}

/* Private node k asks the master at host:port (NULL: nobody); a new address closes its
 * connection. */
static void set_known(struct hl_topo *t, size_t k, const char *host, int port)
{
    hl_node *s = &t->sc.nodes[k];
    char name[MAX_HOST + 32];
    if (host && s->url.host && s->url.port == port && !strcmp(s->url.host, host)) return;
    hl_node_close(s);
    free(s->url.host);
    free(s->name);
    s->url.host = s->name = NULL;
    if (!host) return;
    snprintf(name, sizeof name, strchr(host, ':') ? "master [%s]:%d" : "master %s:%d", host, port);
    s->url.port = port;
    if (!(s->url.host = hl_strdup(host)) || !(s->name = hl_strdup(name))) {
        free(s->url.host);
        s->url.host = NULL;
    }
}

/* Up to NKNOWN masters of the table that are not seeds, a window that moves on after a
 * refresh no one answered (a frozen one is not asked every time; while they answer, their
 * connections stay), into the private client's last nodes. */
static void pick_known(struct hl_topo *t)
{
    size_t k = t->nseeds;
    for (int j = 0; j < t->tb.n && k < t->sc.nnodes; j++) {
        const srv *s = &t->tb.s[(t->known_at + j) % t->tb.n];
        int seed = 0;
        for (size_t q = 0; q < t->nseeds && !seed; q++)
            seed = t->sc.nodes[q].url.port == s->port && !strcmp(t->sc.nodes[q].url.host, s->host);
        if (!seed) set_known(t, k++, s->host, s->port);
    }
    for (; k < t->sc.nnodes; k++) set_known(t, k, NULL, 0);
}

/* Why node s gave no map, appended to why. */
static void no_map(hl_node *s, char *why, size_t cap, size_t *off)
{
    if (s->st == HILOCK_OK) {   /* an answer, but no map: an error reply (not a cluster?) */
        const char *e = hl_reply_str(s->reply[0], NULL);
        snprintf(s->err, sizeof s->err, "%s: CLUSTER NODES: %.100s", s->name, e ? e : "unexpected reply");
        s->st = HILOCK_EREPLY;
    }
    if (*off + 3 < cap) {
        int w = snprintf(why + *off, cap - *off, "%s%s", *off ? "; " : "", s->err);
        if (w > 0) *off += (size_t)w < cap - *off ? (size_t)w : cap - *off - 1;
    }
}

/* The replicas that the maps of the private nodes in mask other than k name (merge_replica). */
static void merge_others(struct hl_topo *t, uint32_t mask, size_t k)
{
    for (size_t j = 0; j < t->sc.nnodes; j++) {
        hl_node *s = &t->sc.nodes[j];
        const char *text;
        size_t len;
        int nrep;
        if (j == k || !(mask & (1u << j)) || s->st != HILOCK_OK || hl_reply_type(s->reply[0]) != HL_R_STRING ||
            !(text = hl_reply_str(s->reply[0], &len)))
            continue;
        each_line(text, len, s->url.host, merge_replica, t, NULL, &nrep);
    }
}

/* Ask the seeds and a few known masters at once for CLUSTER NODES; the first map to arrive is
 * used (FULL_EVERY: every one that answers by the end is read, merge_others). Without a
 * map (or `full`: the operator tools, which need the map now), all of dl's time left is one
 * round trip; with one, REFRESH_BUDGET_MS of it. 0, or -1 with n->st, n->err. */
static int fetch_map(hl_node *n, struct hl_topo *t, hl_deadline dl, int full)
{
    hl_cmd q;
    char why[200];
    size_t off = 0;
    uint32_t mask = 0;
    int64_t now = hl_now_us(), end = dl.hard_us;
    why[0] = '\0';
    if (t->have_map && !full && hl_add_sat(now, REFRESH_BUDGET_MS * 1000) < end)
        end = hl_add_sat(now, REFRESH_BUDGET_MS * 1000);
    hl_cmd_init(&q, NULL, 0);
    hl_cmd_arg(&q, "CLUSTER", 7);
    hl_cmd_arg(&q, "NODES", 5);
    pick_known(t);
    for (size_t k = 0; k < t->sc.nnodes; k++)
        if (t->sc.nodes[k].url.host) mask |= 1u << k;
    if (end > now) {   /* (no time left: nothing asked, so no pause before the next refresh) */
        if (full == FULL_EVERY)   /* every node's answer, by the end (merge_others) */
            hl_exec(&t->sc, mask, &q, 1, hl_deadline_of(end - now, end));
        else
            hl_exec_any(&t->sc, mask, &q, 1, hl_deadline_of(end - now, end));
        t->next_refresh = hl_add_sat(hl_now_us(), REFRESH_AFTER_FAIL_US);
    }
    for (size_t k = 0; end > now && k < t->sc.nnodes; k++) {
        hl_node *s = &t->sc.nodes[k];
        const char *text = NULL;
        size_t len;
        if (!(mask & (1u << k))) continue;
        if (s->st == HILOCK_OK && hl_reply_type(s->reply[0]) == HL_R_STRING &&
            (text = hl_reply_str(s->reply[0], &len)) && install_map(n, t, text, len, s->url.host) == 0) {
            if (full == FULL_EVERY) merge_others(t, mask, k);
            hl_exec_clear(&t->sc);
            if (len > HL_RESP_MAX_BULK) hl_node_close(s);   /* (its reader keeps a buffer as large) */
            if (k < t->nseeds) {   /* a seed that answered is asked first from now on */
                hl_node tmp = t->sc.nodes[k];
                memmove(&t->sc.nodes[1], &t->sc.nodes[0], k * sizeof tmp);
                t->sc.nodes[0] = tmp;
            }
            t->have_map = 1;
            t->stale = 0;
            t->next_refresh = hl_add_sat(hl_now_us(), REFRESH_EVERY_US);
            return 0;
        }
        if (text) {   /* a map, but no room to read it */
            s->st = HILOCK_ENOMEM;
            snprintf(s->err, sizeof s->err, "%s: out of memory for the slot map", s->name);
        }
        no_map(s, why, sizeof why, &off);
    }
    hl_exec_clear(&t->sc);
    if (end > now && t->tb.n) t->known_at = (t->known_at + NKNOWN) % t->tb.n;   /* others next time */
    n->st = HILOCK_EIO;
    for (size_t k = 0; k < t->sc.nnodes; k++)
        if ((mask & (1u << k)) && (t->sc.nodes[k].st == HILOCK_EAUTH || t->sc.nodes[k].st == HILOCK_EREPLY))
            n->st = t->sc.nodes[k].st;
    snprintf(n->err, sizeof n->err, "cluster: no seed gave the slot map (%.160s)", why[0] ? why : "no time left");
    return -1;
}

/* The first key of the pipeline: a script's KEYS[1], or argv[1] of a keyed command. */
static int first_key(const hl_cmd *cmds, int ncmd, const char **key, size_t *len)
{
    static const char *const keyless[] = {"WAIT", "PING", "ROLE", "INFO", "SCAN", "TIME", "SCRIPT",
                                          "CLUSTER", "CLIENT", "CONFIG", "ECHO", NULL};
    for (int i = 0; i < ncmd; i++) {
        const hl_cmd *m = &cmds[i];
        int at = m->script ? 0 : 1, skip = 0;
        if (m->script && m->nkeys < 1) continue;
        for (int k = 0; !m->script && keyless[k]; k++)
            if (strlen(keyless[k]) == m->arglen[0] && !memcmp(m->argv[0], keyless[k], m->arglen[0]))
                skip = 1;   /* (the library spells its commands in capitals) */
        if (skip || m->argc <= at) continue;
        *key = m->argv[at];
        *len = m->arglen[at];
        return 1;
    }
    return 0;
}

static int cluster_route(hilock_client *c, hl_node *n, const hl_cmd *cmds, int ncmd, hl_deadline dl)
{
    struct hl_topo *t = topo_get(c, n);
    const char *key;
    size_t klen;
    int target = -1, asking = 0;
    if (!t) {
        n->st = HILOCK_ENOMEM;
        snprintf(n->err, sizeof n->err, "%s: out of memory", n->name);
        return -1;
    }
    /* (an ASK whose retry ran out of time is not for the next call's key) */
    if (t->ask >= 0 && first_key(cmds, ncmd, &key, &klen) && (int)hl_key_slot(key, klen) == t->ask_slot) {
        target = t->ask;
        asking = 1;
    }
    t->ask = -1;
    if (!asking) {
        /* A stale map is asked again at most once per REFRESH_EVERY_US; a refresh that fails
         * leaves the map in hand to route by (and MOVED answers to correct it). */
        if ((!t->have_map || (t->stale && hl_now_us() >= t->next_refresh)) && map_refresh(c, n, t, dl, 0) < 0) {
            if (!t->have_map) return -1;
            n->st = HILOCK_OK;
            n->err[0] = '\0';
        }
        if (first_key(cmds, ncmd, &key, &klen)) {
            unsigned slot = hl_key_slot(key, klen);
            if ((target = t->owner[slot]) < 0) {
                t->stale = 1;
                n->st = HILOCK_EIO;
                snprintf(n->err, sizeof n->err, "cluster: no master serves slot %u in the slot map "
                         "(cluster not ready, or a failover in progress)", slot);
                return -1;
            }
        } else {   /* keyless (an undo flush): the server in use, or any master */
            target = t->cur;
            for (int s = 0; target < 0 && s < HL_SLOTS; s++) target = t->owner[s];
            if (target < 0) {
                n->st = HILOCK_EIO;
                snprintf(n->err, sizeof n->err, "cluster: no master in the slot map");
                return -1;
            }
        }
    }
    use(n, t, target);
    return asking;
}

static hilock_status cluster_resolve(hilock_client *c, hl_node *n, hl_deadline dl,
                                     const char **host, int *port)
{
    struct hl_topo *t = n->topo_state;
    (void)c;
    (void)dl;
    if (!t || t->cur < 0) {   /* route() runs first: never so */
        n->st = HILOCK_EIO;
        snprintf(n->err, sizeof n->err, "cluster: no server chosen");
        return n->st;
    }
    *host = t->tb.s[t->cur].host;
    *port = t->tb.s[t->cur].port;
    return HILOCK_OK;
}

/* "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381" (an empty host: the same host). */
static int redirect_target(struct hl_topo *t, const char *s, int *slot)
{
    const char *sp = strchr(s, ' '), *addr, *colon;
    long sl, port;
    char *e;
    if (!sp) return -1;
    sl = strtol(sp + 1, &e, 10);
    if (e == sp + 1 || *e != ' ' || sl < 0 || sl >= HL_SLOTS) return -1;
    addr = e + 1;
    if (!(colon = strrchr(addr, ':')) || (port = strtol(colon + 1, &e, 10)) <= 0 || port > 65535) return -1;
    *slot = (int)sl;
    if (colon == addr) return t->cur >= 0 ? srv_at(t, t->tb.s[t->cur].host, strlen(t->tb.s[t->cur].host), (int)port) : -1;
    return srv_at(t, addr, (size_t)(colon - addr), (int)port);
}

/* A redirect seen: its key found only then (not on every round). */
static void redirected(hilock_client *c, const hl_node *n, hilock_redirect_kind kind, const char *target,
                       const hl_cmd *cmds, int ncmd)
{
    size_t klen;
    const char *key = hl_cmds_key(cmds, ncmd, &klen);
    hl_redirect_seen(c, n, kind, target, key, klen);
}

static int cluster_redirect(hilock_client *c, hl_node *n, const hl_cmd *cmds, int ncmd, hl_deadline dl)
{
    struct hl_topo *t = n->topo_state;
    if (!t) return 0;
    if (n->st != HILOCK_OK) {   /* a dead or frozen master: the next call asks for the map */
        if (n->st == HILOCK_EIO || n->st == HILOCK_ETIMEDOUT) t->stale = 1;
        t->hops = 0;
        return 0;
    }
    for (int q = 0; q < ncmd; q++) {
        const char *s = hl_reply_type(n->reply[q]) == HL_R_ERROR ? hl_reply_str(n->reply[q], NULL) : NULL;
        int slot, to;
        if (!s || cmds[q].advisory) continue;
        if (!strncmp(s, "MOVED ", 6) || !strncmp(s, "ASK ", 4)) {
            if ((to = redirect_target(t, s, &slot)) < 0) {   /* the reply stands; a MOVED past
                                                                the table's room: a new map */
                if (s[0] == 'M') t->stale = 1;
                return 0;
            }
            redirected(c, n, s[0] == 'A' ? HILOCK_REDIRECT_ASK : HILOCK_REDIRECT_MOVED,
                             strchr(strchr(s, ' ') + 1, ' ') + 1, cmds, ncmd);
            if (s[0] == 'A') {
                t->ask = to;
                t->ask_slot = slot;
            } else {
                t->owner[slot] = (int16_t)to;
                t->moved_slot = slot;
                t->moved_to = to;
                t->stale = 1;   /* a new owner for good: the whole map again (a failover moves many) */
            }
            return 1;
        }
        if (!strncmp(s, "TRYAGAIN", 8) || !strncmp(s, "CLUSTERDOWN", 11)) {
            int64_t pause = (int64_t)BACKOFF_US << (t->hops < 4 ? t->hops : 4);
            if (hl_add_sat(hl_now_us(), pause) >= dl.hard_us) {
                t->hops = 0;
                return 0;
            }
            t->hops++;
            if (s[0] == 'C') t->stale = 1;
            else redirected(c, n, HILOCK_REDIRECT_TRYAGAIN, "", cmds, ncmd);
            hl_pause_until(c, hl_now_us() + pause);
            return 1;
        }
    }
    t->hops = 0;
    return 0;
}

/* The slot map's config epoch for the server in use: topology.c's lower bound for the epoch a
 * slot's record may hold (never the fence's epoch itself: another client's map may be newer). */
static uint64_t cluster_epoch(const hl_node *n)
{
    const struct hl_topo *t = n->topo_state;
    return t && t->cur >= 0 ? t->tb.s[t->cur].epoch : 0;
}

/* ---- failover vs resharding (topology.c's end_verify) ---- */

/* The node id the slot map gives the server in use, 41 bytes with its NUL (a copy of them is
 * all a lock's anchor costs per call); "" if none (a server met through a redirect only,
 * before a map listed it). */
static const char *cluster_node_id(const hl_node *n)
{
    static const char none[41];
    const struct hl_topo *t = n->topo_state;
    return t && t->cur >= 0 ? t->tb.s[t->cur].id : none;
}

/* Does the master with node id `id` serve a slot in the map? A stale one (a MOVED, a failed
 * round trip since it was read; the refresh after a MOVED may have been put off) is asked
 * again first, within dl and whatever the pace of refreshes: this runs only when a
 * lock is missing from a master that was not its own, rarely. The node's state stays the
 * call's. 1 yes, 0 no, -1 no map. (The map that answers may still lag: docs/cluster.md.) */
static int cluster_serves(hilock_client *c, hl_node *n, const char *id, hl_deadline dl)
{
    struct hl_topo *t = n->topo_state;
    /* (on an event loop one flow at a time asks for the map, and this one may not be it: the
     * map in hand judges there) */
    if (t && t->stale && id[0] && !c->runner) {
        hilock_status st = n->st;
        char err[sizeof n->err];
        memcpy(err, n->err, sizeof err);
        map_refresh(c, n, t, dl, 0);
        n->st = st;
        memcpy(n->err, err, sizeof err);
    }
    if (!t || !t->have_map || !id[0]) return -1;
    for (int s = 0; s < HL_SLOTS; s++)
        if (t->owner[s] >= 0 && !strcmp(t->tb.s[t->owner[s]].id, id)) return 1;
    return 0;
}

static int cluster_route_to(hilock_client *c, hl_node *n, const hl_cmd *cmds, int ncmd,
                            hl_deadline dl, int fetch, int *asking);
static void cluster_use(hl_node *n, int s);
static int cluster_current(const hl_node *n);

const hl_topo_ops hl_topo_cluster = {
    .name = "cluster",
    .failover_named = "Cluster (failover awareness)",
    .resolve = cluster_resolve,
    .probe = NULL,
    .on_handshake_reply = NULL,
    .on_error_reply = hl_topo_drop_on_readonly,
    .failover_aware = 1,
    .sharded = 1,
    .moved = NULL,
    .epoch = cluster_epoch,
    .node_id = cluster_node_id,
    .serves = cluster_serves,
    .free = cluster_free,
    .route = cluster_route,
    .redirect = cluster_redirect,
    .route_to = cluster_route_to,
    .use = cluster_use,
    .current = cluster_current,
};

/* ---- operator tools: every master ---- */

static void replicas_of(const struct hl_topo *t, const srv *m, hl_cluster_node_fn fn, void *arg)
{
    for (int r = 0; r < t->nrep; r++)
        if (m->id[0] && !strcmp(t->rep[r].of, m->id)) fn(t->rep[r].host, t->rep[r].port, t->rep[r].id, 0, 1, arg);
}

hilock_status hl_cluster_nodes(hilock_client *c, hl_node *n, int slot, int every, hl_deadline dl,
                               hl_cluster_node_fn fn, void *arg)
{
    struct hl_topo *t = topo_get(c, n);
    size_t *slots;
    int *order, norder = 0;
    if (!t) {
        snprintf(n->err, sizeof n->err, "%s: out of memory", n->name);
        return n->st = HILOCK_ENOMEM;
    }
    /* The map now, with its replicas (kept from now on), within the whole deadline: an
     * operator asks what the cluster is, not what this client last heard (an error if no
     * one can say, rather than an old map shown as the truth). */
    t->keep_replicas = 1;
    if (map_refresh(c, n, t, dl, every ? FULL_EVERY : FULL) < 0) return n->st;
    if (slot >= 0 && t->owner[slot] < 0) {
        snprintf(n->err, sizeof n->err, "cluster: no master serves slot %d in the slot map", slot);
        return n->st = HILOCK_EIO;
    }
    slots = calloc((size_t)t->tb.n + 1, sizeof *slots);
    order = calloc((size_t)t->tb.n + 1, sizeof *order);
    if (!slots || !order) {
        free(slots);
        free(order);
        snprintf(n->err, sizeof n->err, "%s: out of memory", n->name);
        return n->st = HILOCK_ENOMEM;
    }
    for (int s = 0; s < HL_SLOTS; s++) {   /* the masters in the order of their first slot */
        int m = t->owner[s];
        if (m >= 0 && !slots[m]++ && (slot < 0 || m == t->owner[slot])) order[norder++] = m;
    }
    for (int k = 0; k < norder; k++) {
        const srv *m = &t->tb.s[order[k]];
        fn(m->host, m->port, m->id, slots[order[k]], 0, arg);
        replicas_of(t, m, fn, arg);
    }
    free(slots);
    free(order);
    return HILOCK_OK;
}

/* ---- the event loop's view ---- */

/* An event loop keeps its own connection per server (by its key, which outlives the tables
 * of successive maps), so it asks which server route() chose, and swaps that server's state
 * back in before it encodes for it or reads its handshake (its flows interleave: the node
 * holds whichever server was used last). */
static int cluster_route_to(hilock_client *c, hl_node *n, const hl_cmd *cmds, int ncmd,
                            hl_deadline dl, int fetch, int *asking)
{
    struct hl_topo *t = topo_get(c, n);
    int stale, rc;
    if (!t) return cluster_route(c, n, cmds, ncmd, dl);   /* (says out of memory) */
    t->sc.runner = c->runner;   /* the seeds' round trips are driven as c's are */
    t->sc.loop = c->loop;
    if (!fetch && !t->have_map) return -2;
    stale = t->stale;
    if (!fetch) t->stale = 0;   /* (route fetches only when stale or mapless) */
    rc = cluster_route(c, n, cmds, ncmd, dl);
    if (!fetch) t->stale = t->stale || stale;
    if (rc < 0) return -1;
    *asking = rc;
    return t->tb.s[t->cur].key;
}

/* Server `key`'s state into the node. A server that has left the map since (its undos went
 * to the slots' new owners, install_map) is not found: the node keeps what it holds, and the
 * loop's connection to it only carries a reply already on its way. */
static void cluster_use(hl_node *n, int key)
{
    struct hl_topo *t = n->topo_state;
    if (!t || key <= 0) return;
    if (t->cur >= 0 && t->tb.s[t->cur].key == key) return;   /* (most calls: the one in use) */
    for (int i = 0; i < t->tb.n; i++)
        if (t->tb.s[i].key == key) {
            use(n, t, i);
            return;
        }
}

static int cluster_current(const hl_node *n)
{
    const struct hl_topo *t = n->topo_state;
    return t && t->cur >= 0 ? t->tb.s[t->cur].key : -1;
}
