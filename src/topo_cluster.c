/* SPDX-License-Identifier: BSD-3-Clause */
/* topo_cluster.c -- the Redis Cluster topology (redis-cluster:// nodes) behind the engine's
 * hl_topo_ops (engine.h) as hl_topo_cluster. Facts it relies on: docs/failover-facts.md (Redis
 * Cluster: slots, redirections, config epochs); behaviour and guarantees: docs/cluster.md.
 *
 * Owns: a cluster node's state -- its seeds, the slot map, one connection and one undo list
 * per server it has talked to -- and the cluster's redirections. May call: the engine (hl_exec
 * on a private client whose nodes are the seeds; hl_node_close) and base (hl_key_slot).
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
 * The slot map comes from CLUSTER NODES (slots, masters, node ids and config epochs in one
 * reply), asked of the seeds in order (each bounded by SEED_TIMEOUT_MS but the last, all by the call's
 * connect deadline; the one that answers moves to the front), on the first call, after a
 * MOVED, a CLUSTERDOWN, or a failed round trip (a dead master: the next call asks again).
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
 * not its granting master's was carried there by a resharding (topology.c, end_verify). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SEED_TIMEOUT_MS 300   /* per seed, as per Sentinel: a dead seed costs little */
#define MAX_SRV         64    /* servers a node has talked to (masters, ASK targets) */
#define BACKOFF_US      10000 /* TRYAGAIN / CLUSTERDOWN: 10 ms, doubling, at most 160 ms */

typedef struct parked {       /* what the engine keeps in the node, while another server's is there */
    struct hl_conn *conn;
    hl_undo        *undo;
    size_t          nundo, capundo;
    char           *name;
    hl_facts        facts;   /* its server's, read by that connection's handshake */
} parked;

typedef struct srv {
    char      host[64];
    int       port;
    char      id[41];
    uint64_t  epoch;          /* config epoch in the last map */
    parked    park;
} srv;

struct hl_topo {
    hilock_client sc;         /* the seeds, as nodes of a private client */
    srv       srv[MAX_SRV];
    int       nsrv;
    int16_t   owner[HL_SLOTS];   /* srv index, -1: unknown */
    int       have_map, stale;
    int       cur;            /* the server whose connection is in the node; -1: none yet */
    parked    home;           /* the node's own, before the first route */
    int       ask, ask_slot;  /* ASK target for the next round trip of that slot, -1: none */
    int       moved_slot, moved_to;   /* the last MOVED, kept over a lagging seed's map */
    int       hops;           /* TRYAGAIN / CLUSTERDOWN pauses within one call */
};

static void cluster_free(hl_node *n);

static struct hl_topo *topo_get(hilock_client *c, hl_node *n)
{
    struct hl_topo *t = n->topo_state;
    if (t) return t;
    if (!(t = calloc(1, sizeof *t))) return NULL;
    t->cur = t->ask = t->moved_slot = -1;
    memset(t->owner, 0xff, sizeof t->owner);
    n->topo_state = t;
    if (hl_topo_private_init(&t->sc, c, n, n->url.nsentinels, "seed", n->url.user, n->url.pass)) goto oom;
    return t;
oom:
    cluster_free(n);
    return NULL;
}

static void park(hl_node *n, parked *p)
{
    p->conn = n->conn;
    p->undo = n->undo;
    p->nundo = n->nundo;
    p->capundo = n->capundo;
    p->name = n->name;
    hl_node_facts_get(n, &p->facts);
}

static void unpark(hl_node *n, parked *p)
{
    n->conn = p->conn;
    n->undo = p->undo;
    n->nundo = p->nundo;
    n->capundo = p->capundo;
    n->name = p->name;
    hl_node_facts_set(n, &p->facts);   /* (a never-used shard's: unknown, as calloc left it) */
    memset(p, 0, sizeof *p);
}

/* Close and free what is parked in p (the node's own fields are the client's to free). */
static void drop_parked(hl_node *n, parked *p)
{
    parked mine;
    park(n, &mine);
    unpark(n, p);
    hl_node_close(n);
    for (size_t u = 0; u < n->nundo; u++) {
        free(n->undo[u].key);
        free(n->undo[u].value);
    }
    free(n->undo);
    free(n->name);
    unpark(n, &mine);
}

static void cluster_free(hl_node *n)
{
    struct hl_topo *t = n->topo_state;
    if (!t) return;
    if (t->cur >= 0) drop_parked(n, &t->home);
    for (int i = 0; i < t->nsrv; i++)
        if (i != t->cur) drop_parked(n, &t->srv[i].park);
    hl_topo_private_free(&t->sc);
    free(t);
    n->topo_state = NULL;
}

/* The server at host:port (hlen bytes of host), added if new. -1: out of room or memory. */
static int srv_at(struct hl_topo *t, const char *host, size_t hlen, int port)
{
    char name[100];
    srv *s;
    for (int i = 0; i < t->nsrv; i++)
        if (t->srv[i].port == port && strlen(t->srv[i].host) == hlen && !memcmp(t->srv[i].host, host, hlen))
            return i;
    if (t->nsrv == MAX_SRV || hlen == 0 || hlen >= sizeof s->host) return -1;
    s = &t->srv[t->nsrv];
    memset(s, 0, sizeof *s);
    memcpy(s->host, host, hlen);
    s->port = port;
    snprintf(name, sizeof name, strchr(s->host, ':') ? "cluster [%s]:%d" : "cluster %s:%d", s->host, port);
    if (!(s->park.name = hl_strdup(name))) return -1;
    return t->nsrv++;
}

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
 * <config-epoch> <link> <slot> <slot-slot> [<slot>->-<id>] ...". Masters' slots go into
 * owner[] (a slot in migration stays with its owner: "[...]" entries are skipped). An empty
 * ip (":7000@17000": a node that has met no other, e.g. a one-node cluster) is the seed that
 * answered, as the cluster specification says. */
static void map_line(struct hl_topo *t, const char *line, size_t len, const char *seed_host)
{
    const char *tok[9], *p = line, *end = line + len, *at, *colon;
    size_t tl[9];
    int nt = 0, idx, port;
    while (nt < 9 && p < end) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        tok[nt] = p;
        tl[nt++] = (size_t)((sp ? sp : end) - p);
        p = sp ? sp + 1 : end;
    }
    if (nt < 8 || tl[0] != 40) return;
    at = memchr(tok[1], '@', tl[1]);
    if (!at) at = tok[1] + tl[1];
    for (colon = at; colon > tok[1] && colon[-1] != ':'; colon--) {}
    if (colon == tok[1] || (port = atoi(colon)) <= 0 || port > 65535) return;   /* noaddr */
    if (!has_flag(tok[2], tl[2], "master")) return;
    if (colon - 1 == tok[1]) idx = srv_at(t, seed_host, strlen(seed_host), port);
    else idx = srv_at(t, tok[1], (size_t)(colon - 1 - tok[1]), port);
    if (idx < 0) return;
    memcpy(t->srv[idx].id, tok[0], 40);
    t->srv[idx].epoch = strtoull(tok[6], NULL, 10);
    while (nt == 9 && tok[8] < end) {   /* the slots, from the 9th field on */
        const char *q = tok[8], *sp = memchr(q, ' ', (size_t)(end - q)), *e = sp ? sp : end;
        char *dash;
        long lo = strtol(q, &dash, 10), hi = lo;
        if (*q != '[' && dash > q) {
            if (dash < e && *dash == '-') hi = strtol(dash + 1, NULL, 10);
            for (long s = lo; s <= hi && s >= 0 && s < HL_SLOTS; s++) t->owner[s] = (int16_t)idx;
        }
        tok[8] = sp ? sp + 1 : end;
    }
}

/* Ask the seeds in order for CLUSTER NODES until one answers. 0, or -1 with n->st, n->err. */
static int refresh(hl_node *n, struct hl_topo *t, int64_t deadline)
{
    hl_cmd q;
    char why[200];
    size_t off = 0;
    why[0] = '\0';
    hl_cmd_init(&q, NULL, 0);
    hl_cmd_arg(&q, "CLUSTER", 7);
    hl_cmd_arg(&q, "NODES", 5);
    for (size_t k = 0; k < t->sc.nnodes; k++) {
        hl_node *s = &t->sc.nodes[k];
        int64_t now = hl_now_us(), dl = hl_add_sat(now, SEED_TIMEOUT_MS * 1000);
        const char *text;
        size_t len;
        /* The last seed has no one after it to leave time for: it gets the rest (a seed far
         * away, or a TLS handshake of a few round trips, may need more than SEED_TIMEOUT_MS). */
        if (dl > deadline || k + 1 == t->sc.nnodes) dl = deadline;
        if (dl <= now) break;
        if (hl_exec(&t->sc, 1u << k, &q, 1, dl - now, dl) && (text = hl_reply_str(s->reply[0], &len)) &&
            hl_reply_type(s->reply[0]) == HL_R_STRING) {
            hl_node tmp;
            memset(t->owner, 0xff, sizeof t->owner);
            for (const char *l = text; l < text + len;) {
                const char *nl = memchr(l, '\n', (size_t)(text + len - l));
                map_line(t, l, (size_t)((nl ? nl : text + len) - l), s->url.host);
                l = nl ? nl + 1 : text + len;
            }
            hl_exec_clear(&t->sc);
            tmp = t->sc.nodes[k];
            memmove(&t->sc.nodes[1], &t->sc.nodes[0], k * sizeof tmp);   /* it answered: first */
            t->sc.nodes[0] = tmp;
            if (t->moved_slot >= 0) t->owner[t->moved_slot] = (int16_t)t->moved_to;
            t->moved_slot = -1;
            t->have_map = 1;
            t->stale = 0;
            return 0;
        }
        if (s->st == HILOCK_OK) {   /* an answer, but no map: an error reply (not a cluster?) */
            const char *e = hl_reply_str(s->reply[0], NULL);
            snprintf(s->err, sizeof s->err, "%s: CLUSTER NODES: %.100s", s->name, e ? e : "unexpected reply");
            s->st = HILOCK_EREPLY;
        }
        if (off + 3 < sizeof why) {
            int w = snprintf(why + off, sizeof why - off, "%s%s", off ? "; " : "", s->err);
            if (w > 0) off += (size_t)w < sizeof why - off ? (size_t)w : sizeof why - off - 1;
        }
        hl_exec_clear(&t->sc);
    }
    n->st = HILOCK_EIO;
    for (size_t k = 0; k < t->sc.nnodes; k++)
        if (t->sc.nodes[k].st == HILOCK_EAUTH || t->sc.nodes[k].st == HILOCK_EREPLY) n->st = t->sc.nodes[k].st;
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

static void use(hl_node *n, struct hl_topo *t, int target)
{
    if (target == t->cur) return;
    park(n, t->cur >= 0 ? &t->srv[t->cur].park : &t->home);
    unpark(n, &t->srv[target].park);
    t->cur = target;
}

static int cluster_route(hilock_client *c, hl_node *n, const hl_cmd *cmds, int ncmd, int64_t deadline_us)
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
        if ((!t->have_map || t->stale) && refresh(n, t, deadline_us) < 0 && !t->have_map) return -1;
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

static hilock_status cluster_resolve(hilock_client *c, hl_node *n, int64_t deadline_us,
                                     const char **host, int *port)
{
    struct hl_topo *t = n->topo_state;
    (void)c;
    (void)deadline_us;
    if (!t || t->cur < 0) {   /* route() runs first: never so */
        n->st = HILOCK_EIO;
        snprintf(n->err, sizeof n->err, "cluster: no server chosen");
        return n->st;
    }
    *host = t->srv[t->cur].host;
    *port = t->srv[t->cur].port;
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
    if (colon == addr) return t->cur >= 0 ? srv_at(t, t->srv[t->cur].host, strlen(t->srv[t->cur].host), (int)port) : -1;
    return srv_at(t, addr, (size_t)(colon - addr), (int)port);
}

static int cluster_redirect(hilock_client *c, hl_node *n, const hl_cmd *cmds, int ncmd, int64_t deadline_us)
{
    struct hl_topo *t = n->topo_state;
    (void)c;
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
            if ((to = redirect_target(t, s, &slot)) < 0) return 0;   /* the reply stands */
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
            if (hl_add_sat(hl_now_us(), pause) >= deadline_us) {
                t->hops = 0;
                return 0;
            }
            t->hops++;
            if (s[0] == 'C') t->stale = 1;
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
    return t && t->cur >= 0 ? t->srv[t->cur].epoch : 0;
}

static int cluster_route_to(hilock_client *c, hl_node *n, const hl_cmd *cmds, int ncmd,
                            int64_t deadline_us, int fetch, int *asking);
static void cluster_use(hl_node *n, int s);
static int cluster_current(const hl_node *n);

const hl_topo_ops hl_topo_cluster = {
    .name = "cluster",
    .resolve = cluster_resolve,
    .probe = NULL,
    .on_handshake_reply = NULL,
    .on_error_reply = hl_topo_drop_on_readonly,
    .failover_aware = 1,
    .moved = NULL,
    .epoch = cluster_epoch,
    .free = cluster_free,
    .route = cluster_route,
    .redirect = cluster_redirect,
    .route_to = cluster_route_to,
    .use = cluster_use,
    .current = cluster_current,
};

/* ---- the event loop's view ---- */

/* An event loop keeps its own connection per server (by the index returned), so it asks which
 * server route() chose, and swaps that server's state back in before it encodes for it or
 * reads its handshake (its flows interleave: the node holds whichever server was used last). */
static int cluster_route_to(hilock_client *c, hl_node *n, const hl_cmd *cmds, int ncmd,
                            int64_t deadline_us, int fetch, int *asking)
{
    struct hl_topo *t = topo_get(c, n);
    int stale, rc;
    if (!t) return cluster_route(c, n, cmds, ncmd, deadline_us);   /* (says out of memory) */
    t->sc.runner = c->runner;   /* the seeds' round trips are driven as c's are */
    t->sc.loop = c->loop;
    if (!fetch && !t->have_map) return -2;
    stale = t->stale;
    if (!fetch) t->stale = 0;   /* (route fetches only when stale or mapless) */
    rc = cluster_route(c, n, cmds, ncmd, deadline_us);
    if (!fetch) t->stale = t->stale || stale;
    if (rc < 0) return -1;
    *asking = rc;
    return t->cur;
}

static void cluster_use(hl_node *n, int s)
{
    struct hl_topo *t = n->topo_state;
    if (t && s >= 0 && s < t->nsrv) use(n, t, s);
}

static int cluster_current(const hl_node *n)
{
    const struct hl_topo *t = n->topo_state;
    return t ? t->cur : -1;
}
