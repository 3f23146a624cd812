/* topology.c -- failover awareness: which node is the master, and whether a lock survived
 * a change of master. Facts it relies on: /work/shared/reference/failover.md (Redis 7.0.15).
 *
 * Owns: the node topologies behind the engine's hl_topo_ops (engine.h) -- hl_topo_direct
 * (the URL is the master) and hl_topo_sentinel (below) -- and the failover part of the lock
 * operations (hl_topo_begin/end/fence/lost: identity, guard, WAIT, fencing epochs), which
 * reaches each node's topology through the same table. May call: the engine (hl_exec,
 * hl_undo_add, hl_node_close) and base; never the client or the lock layer's functions
 * (it reads a lock's fields). The engine never calls here but through node->topo.
 *
 * Resolution (the Sentinel client protocol). Every new connection of a redis-sentinel:// node
 * asks the Sentinels in order, each bounded by a short timeout and all together by the
 * connect deadline: SENTINEL get-master-addr-by-name and SENTINEL master (its config-epoch),
 * pipelined, so one Sentinel answers both in the same event-loop pass. The one that answers
 * moves to the front. The engine then verifies ROLE = master in the handshake. Nothing is
 * cached: the engine closes a connection on EOF, a timeout or a READONLY reply, and the next
 * call resolves again. The Sentinels are direct nodes of a private client, reached with the
 * data node's transport, so hl_exec does their I/O too (non-blocking connect, deadlines, one
 * poll loop, the AUTH handshake with the URL's sentinel_username/sentinel_password).
 *
 * The old master keeps answering ROLE master, and keeps its connections, for ~10 s after a
 * failover (until a Sentinel demotes it). So release, extend and check first ask a Sentinel
 * whether the master moved (and close a connection to a master it no longer names), and an
 * acquire asks after the grant (a grant on a master that is no longer the master is undone
 * and retried). An answer less than 100 ms old is reused. Best effort: when no Sentinel
 * answers, the connection in hand is used.
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

#define SENTINEL_TIMEOUT_MS 300       /* per Sentinel: "a few hundred milliseconds" */
#define CONFIRM_FRESH_US    100000    /* a Sentinel's answer this recent needs no repeat */
#define GUARD_KEY           "hilock:guard"
#define EPOCH_SHIFT         42
#define LOW_MASK            ((UINT64_C(1) << EPOCH_SHIFT) - 1)

struct hl_topo {
    hilock_client sc;         /* the Sentinels, as TCP nodes of a private client */
    char          host[256];  /* the master the current connection was opened to */
    int           port;
    uint64_t      epoch;      /* its config-epoch; never lowered (a Sentinel that lags) */
    int64_t       confirmed_us;   /* when a Sentinel last named it (resolve or confirm) */
};

struct hl_lockid {            /* where a lock was granted (or last extended), per node */
    int       set;
    char      replid[41];
    long long offset;
};

typedef struct answer {
    char     host[256];
    int      port;
    uint64_t epoch;
} answer;

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
static int drop_on_readonly(hl_node *n, const hl_reply *r)
{
    (void)n;
    return hl_reply_is_error(r, "READONLY");
}

const hl_topo_ops hl_topo_direct = {
    "direct", direct_resolve, NULL, NULL, drop_on_readonly, 0, NULL, NULL, NULL,
};

/* ---- Sentinel resolution ---- */

static void sentinel_free(hl_node *n);

static struct hl_topo *topo_get(hilock_client *c, hl_node *n)
{
    struct hl_topo *t = n->topo_state;
    size_t ns = n->url.nsentinels < 32 ? n->url.nsentinels : 32;   /* hl_exec's node masks */
    char name[300];
    if (t) return t;
    if (!(t = calloc(1, sizeof *t))) return NULL;
    t->sc.refs = 1;
    /* the data nodes' options (so a later option -- tls_verify, TLS files -- reaches the
     * Sentinels too; only the connect timeout is read by the engine for them), without their
     * server list: the topology calls the engine, never back into the client */
    t->sc.opt = c->opt;
    t->sc.opt.servers = NULL;
    t->sc.opt.nservers = 0;
    t->sc.opt.connect_timeout_ms = c->opt.connect_timeout_ms < SENTINEL_TIMEOUT_MS
                                       ? c->opt.connect_timeout_ms : SENTINEL_TIMEOUT_MS;
    t->sc.quorum = 1;
    if (!(t->sc.nodes = calloc(ns, sizeof *t->sc.nodes))) goto oom;
    for (size_t k = 0; k < ns; k++) {
        hl_node *s = &t->sc.nodes[k];
        const hl_hostport *hp = &n->url.sentinels[k];
        /* the URL's user info is for the data nodes; the Sentinels have their own (query) */
        s->url.kind = HL_URL_TCP;
        s->transport = n->transport;   /* the Sentinels are reached as the data nodes are */
        s->transport_cfg = n->transport_cfg;
        s->topo = &hl_topo_direct;
        s->url.port = hp->port;
        snprintf(name, sizeof name, strchr(hp->host, ':') ? "sentinel [%s]:%d" : "sentinel %s:%d",
                 hp->host, hp->port);
        s->url.host = hl_strdup(hp->host);
        s->name = hl_strdup(name);
        t->sc.nnodes++;
        if (!s->url.host || !s->name) goto oom;
        if (n->url.sentinel_pass && !(s->url.pass = hl_strdup(n->url.sentinel_pass))) goto oom;
        if (n->url.sentinel_user && !(s->url.user = hl_strdup(n->url.sentinel_user))) goto oom;
    }
    n->topo_state = t;
    return t;
oom:
    n->topo_state = t;
    sentinel_free(n);
    return NULL;
}

static void sentinel_free(hl_node *n)
{
    struct hl_topo *t = n->topo_state;
    if (!t) return;
    hl_exec_clear(&t->sc);
    for (size_t k = 0; k < t->sc.nnodes; k++) {
        hl_node *s = &t->sc.nodes[k];
        hl_node_close(s);
        hl_url_free(&s->url);
        free(s->name);
        free(s->undo);
    }
    free(t->sc.nodes);
    hl_buf_free(&t->sc.obuf);
    free(t);
    n->topo_state = NULL;
}

/* Value of field `name` in a flat key/value array (SENTINEL master). */
static const char *kv_field(const hl_reply *r, const char *name)
{
    for (size_t j = 0; j + 1 < hl_reply_nelem(r); j += 2) {
        const char *k = hl_reply_str(hl_reply_elem(r, j), NULL);
        if (k && !strcmp(k, name)) return hl_reply_str(hl_reply_elem(r, j + 1), NULL);
    }
    return NULL;
}

/* Ask Sentinel k. 1: *a filled; 0: it does not know the master name; -1: no (usable) answer. */
static int ask(struct hl_topo *t, const char *master, size_t k, int64_t deadline, answer *a)
{
    hl_cmd q[2];
    hl_node *s = &t->sc.nodes[k];
    int64_t now = hl_now_us(), per = t->sc.opt.connect_timeout_ms * 1000;
    const hl_reply *addr, *port;
    const char *ep;
    size_t hl;
    int rc = -1;
    if (hl_add_sat(now, per) < deadline) deadline = now + per;
    if (deadline <= now) {
        s->st = HILOCK_ETIMEDOUT;
        snprintf(s->err, sizeof s->err, "%s: not asked: no time left", s->name);
        return -1;
    }
    hl_cmd_init(&q[0], NULL, 0);
    hl_cmd_arg(&q[0], "SENTINEL", 8);
    hl_cmd_arg(&q[0], "get-master-addr-by-name", (size_t)-1);
    hl_cmd_arg(&q[0], master, (size_t)-1);
    hl_cmd_init(&q[1], NULL, 0);
    hl_cmd_arg(&q[1], "SENTINEL", 8);
    hl_cmd_arg(&q[1], "master", 6);
    hl_cmd_arg(&q[1], master, (size_t)-1);
    if (!hl_exec(&t->sc, 1u << k, q, 2, per, deadline)) return -1;   /* s->err says why */
    addr = s->reply[0];
    if (hl_reply_type(addr) == HL_R_NIL) {
        rc = 0;
    } else if (hl_reply_nelem(addr) == 2 && hl_reply_str(hl_reply_elem(addr, 0), &hl) && hl > 0 &&
               hl < sizeof a->host && (port = hl_reply_elem(addr, 1)) && hl_reply_str(port, NULL) &&
               atoi(hl_reply_str(port, NULL)) > 0 && atoi(hl_reply_str(port, NULL)) < 65536) {
        memcpy(a->host, hl_reply_str(hl_reply_elem(addr, 0), NULL), hl);
        a->host[hl] = '\0';
        a->port = atoi(hl_reply_str(port, NULL));
        ep = kv_field(s->reply[1], "config-epoch");
        a->epoch = ep ? strtoull(ep, NULL, 10) : 0;
        rc = 1;
    } else if (hl_reply_type(addr) == HL_R_ERROR) {
        hl_node_reply_error(s, addr);   /* "NOAUTH Authentication required.": EAUTH */
    } else {
        s->st = HILOCK_EREPLY;
        snprintf(s->err, sizeof s->err, "%s: unexpected reply (not a Sentinel?)", s->name);
    }
    hl_exec_clear(&t->sc);
    return rc;
}

/* Move Sentinel k to the front of the list (it answered: ask it first next time). */
static void to_front(struct hl_topo *t, size_t k)
{
    hl_node s = t->sc.nodes[k];
    memmove(&t->sc.nodes[1], &t->sc.nodes[0], k * sizeof s);
    t->sc.nodes[0] = s;
}

/* The Sentinels in order, until one names the master. A Sentinel reporting an older epoch
 * than we have seen lags behind a failover: the others are asked for a fresher answer, and
 * it is used only if none has one. 1: *a; 0: every Sentinel that answered did not know the
 * name; -1: none answered. why: the reasons, for the error message. */
static int query(hilock_client *c, hl_node *n, int64_t deadline, answer *a, char *why, size_t whylen,
                 int *auth)
{
    struct hl_topo *t = topo_get(c, n);
    int best = -1, unknown = 0;
    size_t off = 0;
    answer cur;
    why[0] = '\0';
    *auth = 0;
    if (!t) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    for (size_t k = 0; k < t->sc.nnodes; k++) {
        int rc = ask(t, n->url.master, k, deadline, &cur);
        if (rc == 1 && best < 0) {
            *a = cur;
            best = (int)k;
            if (cur.epoch >= t->epoch) break;
        } else if (rc == 1 && cur.epoch > a->epoch) {
            *a = cur;
            best = (int)k;
            if (cur.epoch >= t->epoch) break;
        } else if (rc == 0) {
            unknown++;
        } else if (rc < 0) {
            if (t->sc.nodes[k].st == HILOCK_EAUTH && !(*auth)++) off = 0;   /* that reason first */
            if (off + 3 < whylen && (t->sc.nodes[k].st == HILOCK_EAUTH || *auth == 0)) {
                int w = snprintf(why + off, whylen - off, "%s%s", off ? "; " : "", t->sc.nodes[k].err);
                if (w > 0) off += (size_t)w < whylen - off ? (size_t)w : whylen - off - 1;
            }
        }
    }
    if (best >= 0) {
        to_front(t, (size_t)best);
        return 1;
    }
    return unknown ? 0 : -1;
}

/* On a new connection: ask the Sentinels for the master (errors name it from then on). */
static hilock_status sentinel_resolve(hilock_client *c, hl_node *n, int64_t deadline_us,
                                      const char **host, int *port)
{
    char why[160], name[300];
    answer a;
    int auth, rc = query(c, n, deadline_us, &a, why, sizeof why, &auth);
    struct hl_topo *t = n->topo_state;
    if (rc == 0) {
        n->st = HILOCK_EINVAL;
        snprintf(n->err, sizeof n->err, "sentinel %.60s: no Sentinel that answered knows this master "
                 "name", n->url.master);
        return n->st;
    }
    if (rc < 0) {   /* a Sentinel that refused our AUTH (or its absence) is the reason to act on */
        n->st = auth ? HILOCK_EAUTH : HILOCK_EIO;
        if (auth)
            snprintf(n->err, sizeof n->err, "sentinel %.40s: refused by the Sentinels (URL's "
                     "sentinel_password?): %.95s", n->url.master, why);
        else
            snprintf(n->err, sizeof n->err, "sentinel %.40s: no Sentinel answered (%.110s)", n->url.master, why);
        return n->st;
    }
    snprintf(t->host, sizeof t->host, "%s", a.host);
    t->port = a.port;
    if (a.epoch > t->epoch) t->epoch = a.epoch;
    t->confirmed_us = hl_now_us();
    /* errors now name the master in use: "mymaster@127.0.0.1:6380" */
    snprintf(name, sizeof name, strchr(a.host, ':') ? "%.60s@[%s]:%d" : "%.60s@%s:%d",
             n->url.master, a.host, a.port);
    {
        char *nn = hl_strdup(name);
        if (nn) {
            free(n->name);
            n->name = nn;
        }
    }
    *host = t->host;
    *port = t->port;
    return HILOCK_OK;
}

/* The handshake's ROLE: the address a Sentinel gave must be a master. */
static hilock_status sentinel_role(hl_node *n, const hl_reply *role)
{
    const char *r = hl_reply_str(hl_reply_elem(role, 0), NULL);
    if (r && !strcmp(r, "master")) return HILOCK_OK;
    n->st = HILOCK_EIO;
    snprintf(n->err, sizeof n->err, "%s: Sentinel names it master but its ROLE is '%.20s' (a "
             "failover in progress?): will resolve again", n->name, r ? r : "?");
    return n->st;
}

/* Is the master of Sentinel node n still the one the Sentinels name (not another address,
 * not a newer epoch: a failover since we connected)? If not, its connection is closed (the
 * next call resolves again) and its st/err say so. A node whose master a Sentinel named less
 * than CONFIRM_FRESH_US ago is not asked again: a tight acquire/release loop costs one
 * Sentinel round trip per 100 ms, not two per cycle, and the Sentinels themselves learn of a
 * failover a second or more after it. */
static int sentinel_moved(hilock_client *c, hl_node *n)
{
    struct hl_topo *t = n->topo_state;
    char why[160];
    answer a;
    int auth;
    if (!t || hl_now_us() - t->confirmed_us < CONFIRM_FRESH_US) return 0;
    if (query(c, n, hl_add_sat(hl_now_us(), c->opt.connect_timeout_ms * 1000), &a, why,
              sizeof why, &auth) != 1)
        return 0;   /* no Sentinel to ask: keep the connection we have */
    if (a.port == t->port && !strcmp(a.host, t->host) && a.epoch <= t->epoch) {
        t->confirmed_us = hl_now_us();
        return 0;
    }
    hl_node_close(n);
    n->st = HILOCK_EIO;
    snprintf(n->err, sizeof n->err, "%s: no longer the master: the Sentinels now name %.100s:%d "
             "(config-epoch %llu); will resolve again", n->name, a.host, a.port,
             (unsigned long long)a.epoch);
    return 1;
}

static uint64_t sentinel_epoch(const hl_node *n)
{
    return n->topo_state ? n->topo_state->epoch : 0;
}

const hl_topo_ops hl_topo_sentinel = {
    "sentinel", sentinel_resolve, "ROLE", sentinel_role, drop_on_readonly, 1, sentinel_moved,
    sentinel_epoch, sentinel_free,
};

/* Nodes in mask (connected) whose master moved, in their topology's judgement (Sentinel: the
 * Sentinels no longer name it). Their connections are closed and st/err say so. */
static uint32_t moved(hilock_client *c, uint32_t mask)
{
    uint32_t m = 0;
    for (size_t i = 0; i < c->nnodes; i++) {
        hl_node *n = &c->nodes[i];
        if ((mask & (1u << i)) && n->conn && n->topo->moved && n->topo->moved(c, n)) m |= 1u << i;
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
    if (l->kind != HL_MODERN) return n;   /* legacy fleets: resolution and READONLY only */
    if (aware(c) && n < HL_MAX_CMDS) {
        hl_cmd *s = &cmds[n];
        if (kind != HL_TOPO_ACQUIRE) moved(c, hl_all_nodes(c));
        op->id_at = n++;
        hl_cmd_init(s, &hl_lua_failover, 2);
        hl_cmd_arg(s, GUARD_KEY, (size_t)-1);
        hl_cmd_arg(s, l->key, (size_t)-1);
        hl_cmd_arg(s, kind == HL_TOPO_ACQUIRE ? "acquire" : kind == HL_TOPO_EXTEND ? "extend" : "id",
                   (size_t)-1);
        hl_cmd_arg(s, l->token, (size_t)-1);
        hl_cmd_argi(s, op->arg[0], ttl_ms > 0 ? ttl_ms : l->ttl_ms);
        hl_cmd_argi(s, op->arg[1], c->opt.failover_guard_ms);
        hl_cmd_arg(s, guard_on(c) ? "1" : "0", 1);
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
    long long offset, offset2, left;
} ident;

/* failover.lua's reply -> *id; 0 if it is not one (an error reply, e.g. OOM). */
static int parse_ident(const hl_reply *r, ident *id)
{
    const char *role = hl_reply_str(hl_reply_elem(r, 0), NULL);
    const char *a = hl_reply_str(hl_reply_elem(r, 1), NULL);
    const char *b = hl_reply_str(hl_reply_elem(r, 3), NULL);
    if (hl_reply_nelem(r) != 6 || !role || !a || !b || strlen(a) != 40 || strlen(b) != 40) return 0;
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
    if (have_id && !strcmp(id->role, "master") && survived(mine, id)) {
        /* the lock is in this master's history: anchor it here, so that the next failover is
         * judged against this master (the offset stays ours: offsets run on across a failover) */
        memcpy(mine->replid, id->replid, 41);
        if (op->kind == HL_TOPO_EXTEND && id->offset > mine->offset) mine->offset = id->offset;
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

uint64_t hl_topo_fence(const hilock_client *c, uint32_t granted, uint64_t low)
{
    uint64_t epoch = 0;
    for (size_t i = 0; i < c->nnodes; i++)
        if ((granted & (1u << i)) && c->nodes[i].topo->epoch &&
            c->nodes[i].topo->epoch(&c->nodes[i]) > epoch)
            epoch = c->nodes[i].topo->epoch(&c->nodes[i]);
    /* a counter past 2^42 (the year 2109) would reach into the epoch: leave it as it is */
    if (!epoch || low > LOW_MASK || epoch >= (UINT64_C(1) << (64 - EPOCH_SHIFT))) return low;
    return epoch << EPOCH_SHIFT | low;
}

hilock_status hl_topo_lost(hilock_client *c, hilock *l, const char *op, uint32_t lost)
{
    char pre[160];
    if (c->nnodes == 1) return hl_fail(c, HILOCK_LOST, "%s %s: %s", op, l->key, c->nodes[0].err);
    snprintf(pre, sizeof pre, "%s %.100s: a failover since the grant: ", op, l->key);
    return hl_fail_nodes(c, HILOCK_LOST, lost, pre);
}
