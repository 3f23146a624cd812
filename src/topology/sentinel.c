/* SPDX-License-Identifier: BSD-3-Clause */
/* sentinel.c -- the Sentinel topology (redis-sentinel:// nodes): where the master is,
 * behind the engine's hl_topo_ops (engine.h) as hl_topo_sentinel. Facts it relies on:
 * docs/failover-facts.md (Sentinel: the client protocol, the old master's window).
 *
 * Owns: a Sentinel node's state (its Sentinels, the master in use and its config epoch).
 * May call: the engine (hl_exec on a private client whose nodes are the Sentinels) and base.
 * Called by: the engine through node->topo (resolve, ROLE), and topology.c through the same
 * table (moved, epoch); the client assigns it and frees it.
 *
 * Resolution (the Sentinel client protocol). Every new connection of a redis-sentinel:// node
 * asks the Sentinels in order, each bounded by a short timeout and all together by the
 * connect deadline: SENTINEL get-master-addr-by-name and SENTINEL master (its config-epoch),
 * pipelined, so one Sentinel answers both in the same event-loop pass. The one that answers
 * moves to the front. The engine then verifies ROLE = master in the handshake. Nothing is
 * cached: the engine closes a connection on EOF, a timeout or a READONLY reply, and the next
 * call resolves again. The Sentinels are direct nodes of a private client, reached with the
 * data node's transport, so hl_exec does their I/O too (non-blocking connect, deadlines, one
 * poll loop, the AUTH handshake with the URL's sentinel_username/sentinel_password). That
 * private client is driven by whoever drives the data client: on an event loop its round
 * trips go through the loop's runner too, which pauses the calling flow while they run on the
 * loop (and keeps a pipelined connection per Sentinel) -- so resolving never blocks a loop.
 *
 * The old master keeps answering ROLE master, and keeps its connections, for ~10 s after a
 * failover (until a Sentinel demotes it). So release, extend and check first ask a Sentinel
 * whether the master moved (and close a connection to a master it no longer names), and an
 * acquire asks after the grant (a grant on a master that is no longer the master is undone
 * and retried). An answer less than 100 ms old is reused. Best effort: when no Sentinel
 * answers, the connection in hand is used. The question takes part of the calling
 * operation's bound (its deadline is passed down), never time of its own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topology.h"

#define SENTINEL_TIMEOUT_MS 300       /* per Sentinel: "a few hundred milliseconds" */
#define CONFIRM_FRESH_US    100000    /* a Sentinel's answer this recent needs no repeat */

struct hl_topo {
    hilock_client sc;         /* the Sentinels, as TCP nodes of a private client */
    char          host[256];  /* the master the current connection was opened to */
    int           port;
    uint64_t      epoch;      /* its config-epoch; never lowered (a Sentinel that lags) */
    int64_t       confirmed_us;   /* when a Sentinel last named it (resolve or confirm) */
    unsigned char order[32];  /* the Sentinels' indexes in sc.nodes, the last to answer first
                                 (the nodes stay put: an event loop's runner keys its
                                 connections by node index, and flows interleave there) */
};

typedef struct answer {
    char     host[256];
    int      port;
    uint64_t epoch;
} answer;


static void sentinel_free(hl_node *n);

static struct hl_topo *topo_get(hilock_client *c, hl_node *n)
{
    struct hl_topo *t = n->topo_state;
    size_t ns = n->url.nsentinels < 32 ? n->url.nsentinels : 32;   /* hl_exec's node masks */
    if (t) return t;
    if (!(t = calloc(1, sizeof *t))) return NULL;
    /* the URL's user info is for the data nodes; the Sentinels have their own (query) */
    if (hl_topo_private_init(&t->sc, c, n, ns, "sentinel", n->url.sentinel_user, n->url.sentinel_pass))
        goto oom;
    /* (only the connect timeout of the options is read by the engine for the Sentinels) */
    t->sc.opt.connect_timeout_ms = c->opt.connect_timeout_ms < SENTINEL_TIMEOUT_MS
                                       ? c->opt.connect_timeout_ms : SENTINEL_TIMEOUT_MS;
    for (size_t k = 0; k < ns; k++) t->order[k] = (unsigned char)k;
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
    hl_topo_private_free(&t->sc);
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
static int ask(struct hl_topo *t, const char *master, size_t k, hl_deadline dl, answer *a)
{
    hl_cmd q[2];
    hl_node *s = &t->sc.nodes[k];
    int64_t now = hl_now_us();
    const hl_reply *addr, *port;
    const char *ep;
    size_t hl;
    int rc = -1;
    dl.per_us = t->sc.opt.connect_timeout_ms * 1000;   /* each Sentinel: one connect's time */
    dl = hl_one_round(dl, now);
    if (dl.hard_us <= now) {
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
    if (!hl_exec(&t->sc, 1u << k, q, 2, dl)) return -1;   /* s->err says why */
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

/* Move Sentinel k to the front of the order (it answered: ask it first next time). */
static void to_front(struct hl_topo *t, size_t k)
{
    size_t at = 0;
    while (at < t->sc.nnodes && t->order[at] != k) at++;
    if (at == t->sc.nnodes) return;
    memmove(&t->order[1], &t->order[0], at);
    t->order[0] = (unsigned char)k;
}

/* The Sentinels in order, until one names the master. A Sentinel reporting an older epoch
 * than we have seen lags behind a failover: the others are asked for a fresher answer, and
 * it is used only if none has one. 1: *a; 0: every Sentinel that answered did not know the
 * name; -1: none answered. why: the reasons, for the error message. */
static int query(hilock_client *c, hl_node *n, hl_deadline dl, answer *a, char *why, size_t whylen,
                 int *auth)
{
    struct hl_topo *t = topo_get(c, n);
    int best = -1, unknown = 0;
    size_t off = 0;
    unsigned char order[32];
    answer cur;
    why[0] = '\0';
    *auth = 0;
    if (!t) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    /* the Sentinels' round trips are driven as the data nodes' are (see the top) */
    t->sc.runner = c->runner;
    t->sc.loop = c->loop;
    memcpy(order, t->order, sizeof order);   /* (another flow may reorder it meanwhile) */
    for (size_t j = 0; j < t->sc.nnodes; j++) {
        size_t k = order[j];
        int rc = ask(t, n->url.master, k, dl, &cur);
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
static hilock_status sentinel_resolve(hilock_client *c, hl_node *n, hl_deadline dl,
                                      const char **host, int *port)
{
    char why[160], name[300];
    answer a;
    int moved, auth, rc = query(c, n, dl, &a, why, sizeof why, &auth);
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
    moved = t->host[0] && (t->port != a.port || strcmp(t->host, a.host));
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
    if (moved) hl_failover_seen(c, n->name);   /* the Sentinels name a new master */
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
static int sentinel_moved(hilock_client *c, hl_node *n, hl_deadline dl)
{
    struct hl_topo *t = n->topo_state;
    char why[160];
    answer a;
    int auth;
    /* within connect_timeout_ms, as a resolve, and never past the calling operation's bound */
    dl = hl_one_round(hl_deadline_of(c->opt.connect_timeout_ms * 1000, dl.hard_us), hl_now_us());
    if (!t || hl_now_us() - t->confirmed_us < CONFIRM_FRESH_US) return 0;
    if (query(c, n, dl, &a, why, sizeof why, &auth) != 1)
        return 0;   /* no Sentinel to ask (in time): keep the connection we have */
    if (a.port == t->port && !strcmp(a.host, t->host) && a.epoch <= t->epoch) {
        t->confirmed_us = hl_now_us();
        return 0;
    }
    n->st = HILOCK_EIO;
    snprintf(n->err, sizeof n->err, "%s: no longer the master: the Sentinels now name %.100s:%d "
             "(config-epoch %llu); will resolve again", n->name, a.host, a.port,
             (unsigned long long)a.epoch);
    hl_node_reset(c, n);   /* (an event loop's connection too) */
    return 1;
}

static uint64_t sentinel_epoch(const hl_node *n)
{
    return n->topo_state ? n->topo_state->epoch : 0;
}

const hl_topo_ops hl_topo_sentinel = {
    .name = "sentinel",
    .failover_named = "Sentinel (failover awareness)",
    .resolve = sentinel_resolve,
    .probe = "ROLE",
    .on_handshake_reply = sentinel_role,
    .on_error_reply = hl_topo_drop_on_readonly,
    .failover_aware = 1,
    .moved = sentinel_moved,
    .epoch = sentinel_epoch,
    .free = sentinel_free,
};

