/* SPDX-License-Identifier: BSD-3-Clause */
/* engine.c -- executes pipelines of commands on nodes.
 *
 * Every command hilock sends goes through hl_exec(): one pipeline, sent to 1..N nodes at
 * once over non-blocking connections multiplexed with poll(). One master is simply N = 1,
 * so the single-master, Sentinel and Redlock paths share the same connection, timeout,
 * script and error code. Deadlines are absolute monotonic times, so no call can outlive
 * its bound whatever the server does.
 *
 * Owns: RESP encoding of commands, a node's connection state (handshake, pending writes,
 * the reply stream), undos, the deadline/poll loop. May call: the transport (transport.h:
 * sockets, through the ops table the node was given) and the RESP layer (resp.h: limits and
 * parser). It knows neither sockets nor hiredis, and no topology: where a node's master is,
 * what its handshake must check and which error replies end a connection, it asks through
 * node->topo (hl_topo_ops, engine.h), which the client assigned. */
#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "transport.h"
#include "platform.h"

/* ---- commands ---- */

void hl_cmd_init(hl_cmd *c, const hl_script *script, int nkeys)
{
    c->script = script;
    c->nkeys = nkeys;
    c->argc = 0;
    c->advisory = 0;
    c->need = HL_CAP_NONE;
    c->ntail = 0;
}

/* Arguments written per connection (argv NULL): arglen says which */
#define ARG_SERVER_MS ((size_t)HL_CAP_COUNT)   /* hl_cmd_argclock; below it: an hl_cap */

void hl_cmd_argcap(hl_cmd *c, hl_cap cap)
{
    hl_cmd_arg(c, "", 0);
    c->argv[c->argc - 1] = NULL;   /* hl_cmd_put writes it */
    c->arglen[c->argc - 1] = (size_t)cap;
}

void hl_cmd_argclock(hl_cmd *c)
{
    hl_cmd_arg(c, "", 0);
    c->argv[c->argc - 1] = NULL;   /* hl_cmd_put writes it */
    c->arglen[c->argc - 1] = ARG_SERVER_MS;
}

void hl_cmd_arg(hl_cmd *c, const char *s, size_t len)
{
    if (c->argc >= HL_MAX_ARGS) abort();   /* a programming error, never input-driven */
    c->argv[c->argc] = s;
    c->arglen[c->argc] = len == (size_t)-1 ? strlen(s) : len;
    c->argc++;
}

/* Decimal digits of v at dst (no NUL); returns how many. snprintf was half of the client's
 * instructions per lock cycle. */
static size_t put_dec(char *dst, unsigned long long v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++) dst[i] = tmp[n - 1 - i];
    return n;
}

void hl_cmd_argi(hl_cmd *c, char *scratch, long long v)
{
    size_t n = 0;
    if (v < 0) scratch[n++] = '-';
    n += put_dec(scratch + n, v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v);
    scratch[n] = '\0';
    hl_cmd_arg(c, scratch, n);
}

/* RESP encoding straight into a buffer: no printf-style parsing on the hot path. */
static void put_header(hl_buf *b, char kind, size_t n)
{
    char hdr[32];
    size_t h = 1;
    hdr[0] = kind;
    h += put_dec(hdr + 1, n);
    hdr[h++] = '\r';
    hdr[h++] = '\n';
    hl_buf_put(b, hdr, h);
}

/* "$<n>\r\n<s>\r\n" in one reservation: a pipeline has some 20 of them. */
static void put_bulk(hl_buf *b, const char *s, size_t n)
{
    char *at = hl_buf_room(b, n + 26), *p;
    if (!at) return;
    p = at;
    *p++ = '$';
    p += put_dec(p, n);
    *p++ = '\r';
    *p++ = '\n';
    memcpy(p, s, n);
    p += n;
    *p++ = '\r';
    *p++ = '\n';
    *p = '\0';
    b->len += (size_t)(p - at);
}

void hl_cmd_put(hl_buf *b, const hl_cmd *c, int use_eval, const hl_node *n)
{
    char nk[24];
    int extra = c->script ? 3 : 0;
    size_t h;
    put_header(b, '*', (size_t)(c->argc + extra + c->ntail));
    if (c->script) {
        const hl_script *s = c->script;
        if (s->plain && n && !hl_node_has(n, HL_CAP_SHEBANG)) s = s->plain;
        if (use_eval) {
            put_bulk(b, "EVAL", 4);
            put_bulk(b, s->body, s->len);
        } else {
            put_bulk(b, "EVALSHA", 7);
            put_bulk(b, s->sha, 40);
        }
        h = put_dec(nk, (unsigned long long)c->nkeys);
        put_bulk(b, nk, h);
    }
    for (int i = 0; i < c->argc; i++) {
        if (c->argv[i]) {
            put_bulk(b, c->argv[i], c->arglen[i]);
        } else if (c->arglen[i] == ARG_SERVER_MS) {   /* hl_cmd_argclock */
            char ms[24];
            int64_t f = n ? hl_node_clock_floor_ms(n) : hl_wall_us() / 1000;
            h = put_dec(ms, (unsigned long long)f);
            put_bulk(b, ms, h);
        } else {   /* hl_cmd_argcap */
            put_bulk(b, !n || hl_node_has(n, (hl_cap)c->arglen[i]) ? "1" : "0", 1);
        }
    }
    for (int i = 0; i < c->ntail; i++) put_bulk(b, c->tail[i], c->taillen[i]);
}

/* ---- what each server version can do ---- */

/* The first Redis version with each capability (Valkey: its Redis-compatible redis_version,
 * 7.2.4, so every one), and how a refusal names it. The one place a version is compared.
 * form: the capability only picks the form of a command (a portable one exists), so an
 * unknown version takes the portable form -- a 6.x server must not get "#!lua"; the others
 * refuse a feature, which an unknown version is not refused (it may well have it). */
static const struct { int version; int form; const char *what; } floors[HL_CAP_COUNT] = {
    [HL_CAP_NONE]          = { 0, 0, "" },
    [HL_CAP_WAIT]          = { 30000, 0, "min_replicas (WAIT) needs" },
    [HL_CAP_FAIR]          = { 30200, 0, "fair locks need" },
    [HL_CAP_PERMITS]       = { 30200, 0, "semaphores and shared/exclusive locks need" },
    [HL_CAP_FAILOVER]      = { 40000, 0, "needs" },   /* named by the node's topology: failover_what */
    [HL_CAP_FLOAT_TIMEOUT] = { 60000, 1, "fractional BLPOP timeouts need" },
    [HL_CAP_LPOS]          = { 60006, 1, "LPOS needs" },
    [HL_CAP_SHEBANG]       = { 70000, 1, "script flags need" },
};

int hl_node_has(const hl_node *n, hl_cap cap)
{
    if (!n->facts.version) return !floors[cap].form;
    return n->facts.version >= floors[cap].version;
}

/* Failover awareness reads the master's replication ids: named as the user asked for it. */
static const char *failover_what(const hl_node *n)
{
    return n->topo->failover_named ? n->topo->failover_named : "failover_guard";
}

hilock_status hl_cmds_refused(hl_node *n, const hl_cmd *cmds, int ncmd)
{
    for (int i = 0; i < ncmd; i++) {
        hl_cap cap = (hl_cap)cmds[i].need;
        int v = floors[cap].version;
        if (hl_node_has(n, cap)) continue;
        snprintf(n->err, sizeof n->err, "%s%s Redis >= %d.%d: %s runs %s",
                 cap == HL_CAP_FAILOVER ? failover_what(n) : floors[cap].what,
                 cap == HL_CAP_FAILOVER ? " needs" : "", v / 10000, v / 100 % 100, n->name, hl_node_server(n));
        n->st = HILOCK_EINVAL;
        return HILOCK_EINVAL;
    }
    return HILOCK_OK;
}

/* ---- nodes ---- */

void hl_node_close(hl_node *n)
{
    hl_conn_free(n->conn);
    n->conn = NULL;
}

int hl_node_connected(const hilock_client *c, const hl_node *n)
{
    return c->runner ? c->runner->connected(c, (size_t)(n - c->nodes)) : n->conn != NULL;
}

void hl_node_reset(hilock_client *c, hl_node *n)
{
    hl_node_close(n);
    if (c->runner) c->runner->close_node(c, (size_t)(n - c->nodes), n->err);
}

uint32_t hl_all_nodes(const hilock_client *c)
{
    return c->nnodes >= 32 ? UINT32_MAX : (1u << c->nnodes) - 1;
}

/* Forget undos [k, k + cnt) of node n. */
void hl_undo_drop(hl_node *n, size_t k, size_t cnt)
{
    if (cnt == 0) return;   /* n->undo may be NULL: memmove(NULL, NULL, 0) is undefined */
    for (size_t i = k; i < k + cnt; i++) {
        free(n->undo[i].key);
        free(n->undo[i].value);
    }
    memmove(n->undo + k, n->undo + k + cnt, (n->nundo - k - cnt) * sizeof *n->undo);
    n->nundo -= cnt;
}

/* Undos whose lock has surely expired on the server are of no use any more. */
static void drop_expired_undos(hl_node *n, int64_t now)
{
    size_t k = 0;
    while (k < n->nundo) {
        if (n->undo[k].expires_us <= now) hl_undo_drop(n, k, 1);
        else k++;
    }
}

void hl_undo_add(hilock_client *c, size_t i, const char *key, const char *value, int64_t ttl_ms)
{
    hl_node *n = &c->nodes[i];
    int64_t now = hl_now_us();
    /* The write happened before now (a server frozen with it unread executes it later, and
     * then it expires by itself): past ttl (+ drift, + a second) the key is surely gone. */
    int64_t expires = hl_add_sat(now, hl_add_sat(ttl_ms * 1000, (int64_t)((double)ttl_ms *
                                 c->opt.drift_factor * 2000.0) + 1000000));
    for (size_t k = 0; k < n->nundo; k++)   /* (topology and the lock may both add one) */
        if (!strcmp(n->undo[k].key, key) && !strcmp(n->undo[k].value, value)) {
            if (expires > n->undo[k].expires_us) n->undo[k].expires_us = expires;
            return;
        }
    drop_expired_undos(n, now);
    /* Capped: the oldest go first (the most likely to have expired, and a key that outlives
     * a lost undo only blocks others until its ttl). */
    if (n->nundo >= HL_UNDO_MAX) hl_undo_drop(n, 0, n->nundo - HL_UNDO_MAX + 1);
    if (n->nundo == n->capundo) {
        size_t cap = n->capundo ? n->capundo * 2 : 4;
        hl_undo *u = realloc(n->undo, cap * sizeof *u);
        if (!u) return;   /* best effort: the key still expires by its ttl */
        n->undo = u;
        n->capundo = cap;
    }
    n->undo[n->nundo].key = hl_strdup(key);
    n->undo[n->nundo].value = hl_strdup(value);
    n->undo[n->nundo].expires_us = expires;
    if (!n->undo[n->nundo].key || !n->undo[n->nundo].value) {
        free(n->undo[n->nundo].key);
        free(n->undo[n->nundo].value);
        return;
    }
    n->nundo++;
}

void hl_node_set_err(hl_node *n, hilock_status st, const char *what, const char *why)
{
    n->st = st;
    /* "HOST:PORT: TLS: certificate verify failed (...)": when the session layer says why, the
     * step it failed in (connect, read, write) is noise -- TLS is the cause to act on */
    if (why && !strncmp(why, "TLS: ", 5)) what = NULL;
    if (!what) {
        snprintf(n->err, sizeof n->err, "%s: %s", n->name, why ? why : "");
        return;
    }
    snprintf(n->err, sizeof n->err, "%s: %s%s%s", n->name, what, why ? ": " : "", why ? why : "");
}

/* The status an error reply (its text s) stands for. */
static hilock_status error_status(const char *s)
{
    hilock_status st = HILOCK_EREPLY;
    if (!s) return st;
    /* "ERR Protocol error: unauthenticated multibulk length": a server with a password
     * refuses long commands before AUTH (and closes), rather than saying NOAUTH */
    if (!strncmp(s, "NOPERM", 6) || !strncmp(s, "WRONGPASS", 9) || !strncmp(s, "NOAUTH", 6) ||
        strstr(s, "unauthenticated") || !strncmp(s, "ERR invalid password", 20))   /* (< 6.0) */
        st = HILOCK_EAUTH;
    else if (!strncmp(s, "READONLY", 8))
        st = HILOCK_EIO;         /* a replica now (failover): the connection is closed, retry */
    else if (!strncmp(s, "LOADING", 7) || !strncmp(s, "BUSY ", 5) || !strncmp(s, "MASTERDOWN", 10) ||
             !strncmp(s, "CLUSTERDOWN", 11) || !strncmp(s, "TRYAGAIN", 8) || !strncmp(s, "MOVED ", 6) ||
             !strncmp(s, "ASK ", 4))
        st = HILOCK_EIO;         /* transient: restarted and still reading its AOF/RDB (make
                                    torture: a waiting acquire gave up with EREPLY); a script
                                    past lua-time-limit; a replica cut off from its master with
                                    replica-serve-stale-data no; a Cluster failover or slot
                                    migration still going on when the call's redirects ran out.
                                    The command did not run: a waiting acquire retries; errmsg
                                    keeps the server's word */
    else if (!strncmp(s, "NOREPLICAS", 10))
        st = HILOCK_EREPLICAS;   /* min-replicas-to-write refused the write */
    return st;
}

/* A server with a password that was given none says NOAUTH -- or, to a command of more than
 * 10 arguments before AUTH (6.2+), "ERR Protocol error: unauthenticated multibulk length",
 * and closes: both are told as NOAUTH, with the URL form that gives the password. */
static int needs_password(const char *s)
{
    static const char proto[] = "ERR Protocol error: unauthenticated ";
    return !strncmp(s, "NOAUTH", 6) || !strncmp(s, proto, sizeof proto - 1);
}

static void password_hint(const hl_node *n, char *out, size_t cap)
{
    const hl_url *u = &n->url;
    const char *tls = u->tls ? "s" : "";
    if (n->name && !strncmp(n->name, "sentinel ", 9))   /* a Sentinel itself (topology.c's private nodes) */
        snprintf(out, cap, "redis-sentinel://...?sentinel_password=PASSWORD#master");
    else if (u->kind == HL_URL_UNIX)
        snprintf(out, cap, "unix://:PASSWORD@%s", u->path ? u->path : "/path");
    else if (u->kind == HL_URL_SENTINEL)
        snprintf(out, cap, "redis%s-sentinel://:PASSWORD@host:port#%s", tls, u->master ? u->master : "master");
    else if (u->kind == HL_URL_CLUSTER || !u->host)   /* (no host: a node made without a URL) */
        snprintf(out, cap, "redis%s%s://:PASSWORD@host:port", tls, u->kind == HL_URL_CLUSTER ? "-cluster" : "");
    else
        snprintf(out, cap, strchr(u->host, ':') ? "redis%s://:PASSWORD@[%s]:%d" : "redis%s://:PASSWORD@%s:%d",
                 tls, u->host, u->port);
}

hilock_status hl_node_reply_error(hl_node *n, const hl_reply *r)
{
    const char *s = hl_reply_str(r, NULL) ? hl_reply_str(r, NULL) : "unexpected reply";
    hilock_status st = error_status(s);
    if (!n->url.pass && needs_password(s)) {
        char url[300];
        password_hint(n, url, sizeof url);
        n->st = HILOCK_EAUTH;
        snprintf(n->err, sizeof n->err, "%.50s: NOAUTH: the server needs a password: %.100s", n->name, url);
        return HILOCK_EAUTH;
    }
    hl_node_set_err(n, st, s, NULL);
    return st;
}

/* Where to connect: the node's topology says, on every new connection (a Sentinel node asks
 * its Sentinels: never a cached address; that takes part of the connect deadline). -1 with
 * n->st set on failure. */
static int conn_open(hilock_client *c, hl_node *n, struct hl_conn *k, hl_deadline dl)
{
    const char *host;
    int port;
    char why[128];
    if (n->topo->resolve(c, n, dl, &host, &port) != HILOCK_OK)
        return -1;   /* (the topology has said why) */
    k->io.ops = n->transport;
    k->io.fd = -1;
    k->io.cfg = n->transport_cfg;
    if (n->transport->connect_start(&k->io, host, port, why, sizeof why) == 0) return 0;
    hl_node_set_err(n, HILOCK_EIO, "connect", why);
    return -1;
}

int hl_conn_new(hilock_client *c, hl_node *n, hl_deadline dl, struct hl_conn **out)
{
    struct hl_conn *k = calloc(1, sizeof *k);
    *out = NULL;
    if (!k || !(k->resp = hl_resp_new())) {
        free(k);
        hl_node_set_err(n, HILOCK_ENOMEM, "out of memory", NULL);
        return -1;
    }
    if (n->topology_replies) hl_resp_allow_topology(k->resp);
    if (conn_open(c, n, k, dl) < 0) {
        hl_resp_free(k->resp);
        free(k);
        return -1;
    }
    k->connecting = 1;
    k->fresh = 1;
    k->opened_us = hl_now_us();
    *out = k;
    return 0;
}

void hl_conn_free(struct hl_conn *k)
{
    if (!k) return;
    k->io.ops->close(&k->io);
    hl_resp_free(k->resp);
    hl_buf_free(&k->out);
    free(k);
}

static int conn_start(hilock_client *c, hl_node *n, hl_deadline dl)
{
    return hl_conn_new(c, n, dl, &n->conn);
}

/* An idle connection has nothing to read: if its transport sees EOF or a reset (TLS: past
 * the records a server sends unasked), the server closed it since our last call (restart, its `timeout`, CLIENT KILL). Nothing has been sent
 * on it yet, so reconnecting now is safe, and spares the caller a needless EIO. Only asked
 * of a connection idle for STALE_AFTER_US: the server's `timeout` is at least 1 s, and in a
 * busy loop the probe would be a third of the system calls of a round trip. */
#define STALE_AFTER_US 250000
int hl_conn_stale(struct hl_conn *k, int64_t now)
{
    return !k->connecting && now - k->last_us >= STALE_AFTER_US && k->io.ops->idle_closed(&k->io);
}

/* ---- the exec loop ---- */

typedef struct pending {
    int     active;
    int     prefix;        /* leading replies that belong to handshake/undo */
    int     nhandshake;    /* of which AUTH/SELECT */
    int     expect, got;
    int     wdone;
    int     resend;        /* a script answered NOSCRIPT: send again with EVAL */
    int     more;          /* only the handshake was sent: the commands follow its replies */
    int     refused;       /* its server lacks what a command needs (hl_cmds_refused): nothing sent */
    int     used_eval;
    int     has_cmds;      /* the caller's commands are in this pipeline */
    int64_t end;           /* this round trip's (hl_round_end) */
    size_t  undo_at, nundo;   /* undos [undo_at, undo_at + nundo) sent in this pipeline */
    size_t  undone;        /* of which answered */
    int     asking;        /* the topology asked for ASKING (an ASK redirect) */
    int     nask;          /* 1: ASKING precedes each of the commands in this pipeline */
    int64_t t0;            /* when this pipeline was sent (hl_round_trip) */
    int     abandoned;     /* hl_exec_any ended it (another node answered): not a node error */
    int     opening;       /* a connection of this pass, its handshake not done yet: a
                              failure is a failed CONNECT too (hl_conn_failed) */
    int64_t open_us;       /* when that connect began */
    int     closed_at;     /* its connection closed: the handshake replies whole by then */
} pending;

/* The key the commands are about: a script's first key ("" = none: an undo-only round trip,
 * BLPOP, a handshake). */
const char *hl_cmds_key(const hl_cmd *cmds, int ncmd, size_t *len)
{
    *len = 0;
    if (ncmd < 1 || !cmds[0].script || cmds[0].nkeys < 1 || cmds[0].argc < 1) return "";
    *len = cmds[0].arglen[0];
    return cmds[0].argv[0];
}

/* Move the undos of key to the newest end (keeping their order; the order of undos of
 * different values does not matter), so the chunk sent next holds them. */
static void undos_of_key_last(hl_node *n, const char *key, size_t len)
{
    size_t last = n->nundo;
    if (!len) return;
    for (size_t k = 0; k < last;) {
        hl_undo u = n->undo[k];
        if (strlen(u.key) != len || memcmp(u.key, key, len)) {
            k++;
            continue;
        }
        memmove(n->undo + k, n->undo + k + 1, (n->nundo - k - 1) * sizeof *n->undo);
        n->undo[n->nundo - 1] = u;
        last--;
    }
}

size_t hl_undo_put(hl_node *n, hl_buf *b, size_t *at, const char *key, size_t keylen)
{
    size_t cnt = 0;
    drop_expired_undos(n, hl_now_us());
    /* an earlier attempt's value on the key this round trip is about goes first: left
     * there, it would make the attempt find its own stale write busy */
    undos_of_key_last(n, key, keylen);
    *at = n->nundo > HL_UNDO_CHUNK ? n->nundo - HL_UNDO_CHUNK : 0;
    for (size_t i = *at; i < n->nundo; i++) {
        hl_cmd u;
        hl_cmd_init(&u, &hl_lua_undo, 1);   /* a plain value or a member (undo.lua) */
        hl_cmd_arg(&u, n->undo[i].key, (size_t)-1);
        hl_cmd_arg(&u, n->undo[i].value, (size_t)-1);
        hl_cmd_put(b, &u, 1, n);   /* EVAL: rare, and must work on an empty script cache */
        cnt++;
    }
    return cnt;
}

/* What a new connection's handshake sends, in order: each reply is judged by its position
 * (hl_handshake_judge), never guessed from its type (TIME answers an array, INFO a string). */
enum { HS_AUTH, HS_DATABASES, HS_SELECT, HS_PROBE, HS_INFO, HS_TIME, HS_SHAPE, HS_MAX };

static const char *const hs_names[HS_MAX] = { [HS_INFO] = "INFO", [HS_TIME] = "TIME", [HS_SHAPE] = "COMMAND INFO" };

static int handshake_plan(const hl_node *n, unsigned char plan[HS_MAX])
{
    int count = 0;
    if (n->url.pass) plan[count++] = HS_AUTH;
    if (n->url.db > 0) {   /* how many there are, should SELECT refuse (select_refused) */
        plan[count++] = HS_DATABASES;
        plan[count++] = HS_SELECT;
    }
    if (n->topo->probe) plan[count++] = HS_PROBE;   /* e.g. ROLE: is the address a Sentinel gave a master? */
    /* (each of the three left out once the peer closed on it: hl_handshake_closed) */
    if (!(n->hs_skip & 1u << HS_INFO))
        plan[count++] = HS_INFO;   /* which server is this: its version, its run_id (hl_node.peers) */
    if (!(n->hs_skip & 1u << HS_TIME)) plan[count++] = HS_TIME;   /* its clock (hl_node_server_ms) */
    /* an ACL user (6.0+) may not run INFO (it is in @dangerous): COMMAND INFO's shape then
     * tells 7.0+ from 6.x (judge_shape) */
    if (n->url.user && !(n->hs_skip & 1u << HS_SHAPE)) plan[count++] = HS_SHAPE;
    return count;
}

int hl_handshake_closed(hilock_client *c, hl_node *n, int idx)
{
    unsigned char plan[HS_MAX];
    int count = handshake_plan(n, plan), kind = idx >= 0 && idx < count ? plan[idx] : HS_MAX;
    char why[140];
    if (kind != HS_INFO && kind != HS_TIME && kind != HS_SHAPE) return 0;
    n->hs_skip |= 1u << kind;
    snprintf(why, sizeof why, "closed the connection on %s (a proxy that does not know it?): "
             "connecting without it from now on%s", hs_names[kind],
             kind == HS_TIME ? " (the server's clock unknown)" : " (the server's version unknown)");
    hl_node_set_err(n, HILOCK_EIO, NULL, why);
    hl_emit_node_error(c, n, NULL, 0);
    return 1;
}

int hl_handshake_put(const hl_node *n, hl_buf *b)
{
    unsigned char plan[HS_MAX];
    int count = handshake_plan(n, plan);
    for (int k = 0; k < count; k++) {
        char db[24];
        hl_cmd a;
        hl_cmd_init(&a, NULL, 0);
        switch (plan[k]) {
        case HS_AUTH:
            hl_cmd_arg(&a, "AUTH", 4);
            if (n->url.user) hl_cmd_arg(&a, n->url.user, (size_t)-1);
            hl_cmd_arg(&a, n->url.pass, (size_t)-1);
            break;
        case HS_DATABASES:
            hl_cmd_arg(&a, "CONFIG", 6);
            hl_cmd_arg(&a, "GET", 3);
            hl_cmd_arg(&a, "databases", 9);
            break;
        case HS_SELECT:
            hl_cmd_arg(&a, "SELECT", 6);
            hl_cmd_argi(&a, db, n->url.db);
            break;
        case HS_PROBE:
            hl_cmd_arg(&a, n->topo->probe, (size_t)-1);
            break;
        case HS_INFO:
            hl_cmd_arg(&a, "INFO", 4);
            hl_cmd_arg(&a, "server", 6);
            break;
        case HS_SHAPE:
            hl_cmd_arg(&a, "COMMAND", 7);
            hl_cmd_arg(&a, "INFO", 4);
            hl_cmd_arg(&a, "GET", 3);
            break;
        default:
            hl_cmd_arg(&a, "TIME", 4);
            break;
        }
        hl_cmd_put(b, &a, 0, n);
    }
    return count;
}

/* The value of "field:" in an INFO reply, copied to out ("" if absent). */
static void info_field(const char *s, size_t len, const char *field, char *out, size_t outlen)
{
    size_t fl = strlen(field), k = 0;
    const char *p = s;
    out[0] = '\0';
    while (p && p < s + len) {   /* a field starts a line */
        if ((size_t)(s + len - p) > fl && !memcmp(p, field, fl) && p[fl] == ':') {
            for (p += fl + 1; k + 1 < outlen && p < s + len && *p != '\r' && *p != '\n'; p++)
                out[k++] = *p;
            out[k] = '\0';
            return;
        }
        p = memchr(p, '\n', (size_t)(s + len - p));
        if (p) p++;
    }
}

/* "7.2.4" -> 70204 (the patch may be missing: "7.2" -> 70200); 0 if it does not parse. Each
 * part has at most 3 digits (an unstable build says 255.255.255): a server's text must not
 * overflow the number (the fuzzer's "7.00764130000" did, in sscanf's %d and in the sum). */
static int version_number(const char *v)
{
    int part[3] = { 0, 0, 0 }, n = 0;
    for (const char *p = v; n < 3; p++, n++) {
        int digits = 0;
        for (; *p >= '0' && *p <= '9'; p++)
            if (++digits > 3) return 0;
            else part[n] = part[n] * 10 + (*p - '0');
        if (!digits) return 0;
        if (*p != '.') {
            n++;
            break;
        }
    }
    if (n < 2 || part[0] <= 0) return 0;
    return part[0] * 10000 + part[1] * 100 + part[2];
}

/* INFO server's reply in the handshake: the server's version (for the capability gates:
 * Redis-compatible, so Valkey 8.0 counts as its redis_version 7.2.4) and name for messages;
 * its run_id (compared with the peers' at commit: hl_handshake_commit). */
static void judge_info(hl_facts *f, const hl_reply *r)
{
    size_t len;
    const char *s = hl_reply_str(r, &len);
    char v[32], vk[32], name[32];
    if (!s) return;   /* a server that does not say: unknown (hl_node_has) */
    info_field(s, len, "redis_version", v, sizeof v);
    info_field(s, len, "valkey_version", vk, sizeof vk);
    info_field(s, len, "server_name", name, sizeof name);
    f->version = version_number(v);
    if (f->version)
        snprintf(f->server, sizeof f->server, "%s %s", vk[0] || !strcmp(name, "valkey") ? "Valkey" : "Redis",
                 vk[0] ? vk : v);
    info_field(s, len, "run_id", f->run_id, sizeof f->run_id);
}

void hl_node_facts_get(const hl_node *n, hl_facts *f) { *f = n->facts; }

void hl_node_facts_set(hl_node *n, const hl_facts *f) { n->facts = *f; }

/* TIME not read: the client's wall clock now stands in as the reading (else none). */
static void wall_reading(hl_facts *f)
{
    f->wall_ms = 0;
    if (f->clock_ms > 0) return;
    f->wall_ms = hl_wall_us() / 1000;
    f->clock_at_us = hl_now_us();
}

hilock_status hl_handshake_commit(hl_node *n, const struct hl_conn *k)
{
    size_t me = (size_t)(n - n->peers);
    hl_facts f = k->facts;
    wall_reading(&f);
    hl_node_facts_set(n, &f);
    /* (one at a time: of two names of one server connected together, the second to commit
     * sees the first's run_id) */
    for (size_t i = 0; n->facts.run_id[0] && i < n->npeers; i++) {
        char why[160];
        if (i == me || strcmp(n->peers[i].facts.run_id, n->facts.run_id)) continue;
        snprintf(why, sizeof why, "server %zu and server %zu of %zu are the same server (run_id %.12s...): "
                 "list each Redlock member once", (i < me ? i : me) + 1, (i < me ? me : i) + 1, n->npeers,
                 n->facts.run_id);
        n->facts.run_id[0] = '\0';   /* so the peer is not refused in turn */
        hl_node_set_err(n, HILOCK_EINVAL, NULL, why);
        return HILOCK_EINVAL;
    }
    return HILOCK_OK;
}

/* COMMAND INFO GET's reply, when INFO was refused: a command's entry has 10 fields from 7.0
 * (tips, key specs, subcommands), 7 in 6.x (ACL categories). The version is then known as
 * at least 7.0.0 or 6.0.0 (so 7.0+ gets the "#!lua" form), never more than it shows. */
static void judge_shape(hl_facts *f, const hl_reply *r)
{
    const hl_reply *e = hl_reply_type(r) == HL_R_ARRAY && hl_reply_nelem(r) == 1 ? hl_reply_elem(r, 0) : NULL;
    size_t fields = e && hl_reply_type(e) == HL_R_ARRAY ? hl_reply_nelem(e) : 0;
    if (f->version) return;   /* INFO said */
    f->version = fields >= 10 ? 70000 : fields >= 7 ? 60000 : 0;
}

/* s as a decimal integer in [lo, hi), else -1 (empty, signed, trailing bytes, out of range) */
static long long decimal_in(const char *s, long long lo, long long hi)
{
    long long v = 0;
    if (!*s) return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v >= hi) return -1;
        v = v * 10 + (*s - '0');
    }
    return v >= lo && v < hi ? v : -1;
}

/* TIME's reply: the server's clock, kept with the monotonic time it was read at. Only a
 * plausible one (2000-01-01 up to 2^42 ms: a fence token's clock part) is taken: a hostile
 * or broken reply leaves it unknown, never a floor that would read as a later epoch. */
static void judge_time(hl_facts *f, const hl_reply *r)
{
    const char *sec, *usec;
    long long s, us;
    f->clock_ms = 0;
    if (hl_reply_type(r) != HL_R_ARRAY || hl_reply_nelem(r) != 2) return;
    sec = hl_reply_str(hl_reply_elem(r, 0), NULL);
    usec = hl_reply_str(hl_reply_elem(r, 1), NULL);
    if (!sec || !usec) return;
    s = decimal_in(sec, 946684800LL, (1LL << 42) / 1000);
    us = decimal_in(usec, 0, 1000000);
    if (s < 0 || us < 0) return;
    f->clock_ms = s * 1000 + us / 1000;
    f->clock_at_us = hl_now_us();
}

int64_t hl_node_server_ms(const hl_node *n)
{
    if (n->facts.clock_ms <= 0) return -1;
    return n->facts.clock_ms + (hl_now_us() - n->facts.clock_at_us) / 1000;
}

int64_t hl_node_clock_floor_ms(const hl_node *n)
{
    int64_t since, base = n->facts.clock_ms > 0 ? n->facts.clock_ms : n->facts.wall_ms;
    if (base <= 0) return hl_wall_us() / 1000;   /* (no connection yet) */
    since = hl_now_us() - n->facts.clock_at_us;
    return base + (since - since / 1000000 * HL_CLOCK_SLOW_PPM) / 1000;
}

int hl_node_clock_old(const hl_node *n, int64_t now)
{
    return (n->facts.clock_ms > 0 || n->facts.wall_ms > 0) && now - n->facts.clock_at_us > HL_CLOCK_MAX_AGE_US;
}

void hl_node_clock_put(hl_buf *b)
{
    hl_cmd t;
    hl_cmd_init(&t, NULL, 0);
    hl_cmd_arg(&t, "TIME", 4);
    hl_cmd_put(b, &t, 0, NULL);
}

void hl_node_clock_take(hl_node *n, const hl_reply *r)
{
    hl_facts f;
    judge_time(&f, r);
    if (f.clock_ms <= 0 && n->facts.clock_ms > 0) return;   /* (kept: asked again next time) */
    wall_reading(&f);
    n->facts.clock_ms = f.clock_ms;
    n->facts.clock_at_us = f.clock_at_us;
    n->facts.wall_ms = f.wall_ms;
}

int hl_node_version(const hl_node *n) { return n->facts.version; }

const char *hl_node_server(const hl_node *n) { return n->facts.server[0] ? n->facts.server : "an unknown server"; }

/* CONFIG GET databases' reply: {"databases", "16"}; anything else (CONFIG renamed, or not
 * the user's to run: NOPERM) leaves the count unknown. */
static int judge_databases(const hl_reply *r)
{
    const char *s = hl_reply_type(r) == HL_R_ARRAY && hl_reply_nelem(r) == 2 ?
                    hl_reply_str(hl_reply_elem(r, 1), NULL) : NULL;
    long v = s ? strtol(s, NULL, 10) : 0;
    return v > 0 && v <= 1000000 ? (int)v : 0;
}

/* SELECT refused the URL's database: the server's setting, not the caller's argument, so
 * EREPLY (the command: 69, a server refused) saying which databases it has, when known. */
static hilock_status select_refused(hl_node *n, const struct hl_conn *k, const hl_reply *r)
{
    char why[160];
    if (k->databases > 0)
        snprintf(why, sizeof why, "database %d does not exist: the server has %d (0 to %d; its "
                 "databases setting)", n->url.db, k->databases, k->databases - 1);
    else
        snprintf(why, sizeof why, "the server refused database %d (%.80s)", n->url.db,
                 hl_reply_str(r, NULL) ? hl_reply_str(r, NULL) : "");
    hl_node_set_err(n, HILOCK_EREPLY, NULL, why);
    return HILOCK_EREPLY;
}

hilock_status hl_handshake_judge(hl_node *n, struct hl_conn *k, int idx, const hl_reply *r)
{
    unsigned char plan[HS_MAX];
    int count = handshake_plan(n, plan);
    int kind = idx >= 0 && idx < count ? plan[idx] : HS_MAX;
    if (kind == HS_INFO) memset(&k->facts, 0, sizeof k->facts);   /* (unknown unless read) */
    if (kind == HS_DATABASES) {
        k->databases = judge_databases(r);
        return HILOCK_OK;
    }
    if ((kind == HS_INFO || kind == HS_TIME || kind == HS_SHAPE) && hl_reply_type(r) == HL_R_ERROR &&
        !hl_reply_is_error(r, "NOAUTH") && error_status(hl_reply_str(r, NULL)) != HILOCK_EIO)
        /* an ACL user without INFO (it is in @dangerous), a renamed INFO or TIME, a proxy,
         * a Sentinel (no TIME): not known (hl_node_has: portable forms); the run_id is not
         * compared (hilock.h, servers). But a transient refusal (LOADING: TIME before 6.0
         * while the server loads; BUSY: a slow script) fails this connect as any EIO, so
         * a later one reads the facts rather than this connection living without them */
        return HILOCK_OK;
    if (kind == HS_AUTH && n->url.user && hl_reply_is_error(r, "ERR wrong number of arguments")) {
        /* AUTH user password before Redis 6.0, which knows no users (its version is not
         * known yet: INFO comes after AUTH) */
        hl_node_set_err(n, HILOCK_EAUTH, NULL, "a user name in the URL needs Redis >= 6.0 (ACL "
                        "users): this server takes a password only (redis://:password@...)");
        return HILOCK_EAUTH;
    }
    if (hl_reply_type(r) == HL_R_ERROR) {
        hilock_status st = hl_node_reply_error(n, r);
        if (kind == HS_SELECT && (hl_reply_is_error(r, "ERR DB index") || hl_reply_is_error(r, "ERR invalid DB")))
            st = select_refused(n, k, r);
        else if (st == HILOCK_EREPLY && strstr(hl_reply_str(r, NULL), "AUTH"))
            st = n->st = HILOCK_EAUTH;   /* "ERR AUTH <password> called without any password" */
        return st;
    }
    switch (kind) {
    case HS_INFO:
        judge_info(&k->facts, r);
        return HILOCK_OK;
    case HS_TIME:
        judge_time(&k->facts, r);
        return HILOCK_OK;
    case HS_SHAPE:
        judge_shape(&k->facts, r);
        return HILOCK_OK;
    case HS_PROBE:
        if (n->topo->on_handshake_reply(n, r) != HILOCK_OK) return n->st;   /* ROLE: not a master */
        return HILOCK_OK;
    default:
        return HILOCK_OK;   /* AUTH, SELECT: +OK */
    }
}

static void build_pipeline(hilock_client *c, hl_node *n, pending *p, const hl_cmd *cmds,
                           int ncmd, int use_eval, hl_buf *b)
{
    b->len = 0;
    p->prefix = p->nhandshake = 0;
    p->nundo = 0;
    if (n->conn->fresh) p->nhandshake = hl_handshake_put(n, b);
    p->prefix = p->nhandshake;
    /* The handshake goes alone, one round trip on a new connection: if AUTH or SELECT fails,
     * commands pipelined behind it would still run (as the default user, or in db 0). */
    p->more = p->nhandshake > 0;
    /* Undos go first, at most HL_UNDO_CHUNK per round trip (those of the commands' key, then
     * the newest: the most likely to still block someone), so a backlog can never starve the
     * caller's own command. */
    p->undone = 0;
    p->refused = !p->more && hl_cmds_refused(n, cmds, ncmd) != HILOCK_OK;
    if (p->refused) {   /* (the handshake told us the server; nothing of the caller's goes) */
        b->len = 0;
        return;
    }
    if (!p->more) {
        size_t klen;
        const char *key = hl_cmds_key(cmds, ncmd, &klen);
        p->nundo = hl_undo_put(n, b, &p->undo_at, key, klen);
    }
    p->prefix += (int)p->nundo;
    /* ASKING is good for the next command only: each command (and each resend) gets its own */
    p->nask = p->asking ? 1 : 0;
    for (int i = 0; !p->more && i < ncmd; i++) {
        if (p->nask) {
            hl_cmd a;
            hl_cmd_init(&a, NULL, 0);
            hl_cmd_arg(&a, "ASKING", 6);
            hl_cmd_put(b, &a, 0, n);
        }
        hl_cmd_put(b, &cmds[i], use_eval, n);
    }
    p->has_cmds = !p->more && ncmd > 0;
    p->expect = p->prefix + (p->more ? 0 : ncmd * (1 + p->nask));
    p->got = 0;
    p->wdone = 0;
    p->resend = 0;
    p->used_eval = use_eval;
    (void)c;
}

/* A node's part ends: record status, close the connection on transport errors. Undos it
 * answered are done, whatever happens to the rest (so a backlog always shrinks). */
static void finish(hl_node *n, pending *p, hilock_status st, const char *what, const char *why)
{
    p->active = 0;
    hl_undo_drop(n, p->undo_at, p->undone);
    p->nundo = p->undone = 0;
    if (st == HILOCK_OK) {
        n->st = HILOCK_OK;
        return;
    }
    if (!n->err[0] || n->st == HILOCK_OK) hl_node_set_err(n, st, what, why);
    n->st = st;
    if (st != HILOCK_EREPLY && st != HILOCK_EINVAL) hl_node_close(n);   /* (EINVAL: a command the
                                          server cannot run was refused unsent; the stream is sound) */
}

/* Write what the transport takes now (it never raises SIGPIPE). Once a byte of the caller's
 * commands is out, they may reach the server: n->wrote. 0, or the transport's verdict
 * (HL_IO_CLOSED: the peer is gone; HL_IO_ERROR). */
hl_io hl_conn_flush(struct hl_conn *k, size_t *written)
{
    *written = 0;
    while (k->off < k->out.len) {
        size_t w;
        hl_io io = k->io.ops->write(&k->io, k->out.p + k->off, k->out.len - k->off, &w);
        if (io == HL_IO_WANT_WRITE || io == HL_IO_WANT_READ) break;
        if (io != HL_IO_OK) return io;
        k->off += w;
        *written += w;
    }
    if (k->off == k->out.len) k->out.len = k->off = 0;
    return HL_IO_OK;
}

static hl_io conn_flush(hl_node *n, pending *p)
{
    size_t w;
    hl_io io = hl_conn_flush(n->conn, &w);
    if (w > 0 && p->has_cmds) n->wrote = 1;
    p->wdone = n->conn->out.len == 0;
    return io;
}

static hl_io send_pipeline(hl_node *n, pending *p, hl_buf *b)
{
    struct hl_conn *k = n->conn;
    hl_buf_put(&k->out, b->p, b->len);
    if (k->out.oom) return HL_IO_ERROR;   /* (the caller says "out of memory") */
    p->wdone = 0;
    return k->connecting ? HL_IO_OK : conn_flush(n, p);
}

/* Read what the transport has, through the reply limits, into the parser; wait_ms > 0: wait
 * up to that long for it in the read itself (read_wait, see direct_wait_ms). OK, or the
 * status with what/why (a refused reply: EREPLY). */
hilock_status hl_conn_read(struct hl_conn *k, int wait_ms, const char **what, const char **why)
{
    char buf[16384];
    do {
        size_t got;
        int rs;
        hl_io io = wait_ms > 0 ? k->io.ops->read_wait(&k->io, buf, sizeof buf, &got, wait_ms)
                               : k->io.ops->read(&k->io, buf, sizeof buf, &got);
        wait_ms = 0;
        if (io == HL_IO_WANT_READ || io == HL_IO_WANT_WRITE) return HILOCK_OK;
        if (io != HL_IO_OK) {
            *what = "read";
            *why = io == HL_IO_CLOSED ? "Server closed the connection" : k->io.ops->error(&k->io);
            return HILOCK_EIO;
        }
        if ((rs = hl_resp_feed(k->resp, buf, got)) != 0) {
            *what = rs == HL_RESP_TOO_LARGE ? "reply too large" : rs == HL_RESP_PROTOCOL ? "protocol"
                    : "read";
            *why = hl_resp_why(k->resp);
            return rs == HL_RESP_TOO_LARGE ? HILOCK_EREPLY : HILOCK_EIO;
        }
    } while (k->io.ops->pending(&k->io) > 0);   /* a session layer's decoded rest */
    return HILOCK_OK;
}

/* Read what the transport has, through the reply limits, into the parser. 0, or -1 with the
 * node's part finished and the connection closed (the rest of a refused reply must never be
 * read as an answer). */
static int conn_read(hl_node *n, pending *p, int wait_ms)
{
    const char *what = NULL, *why = NULL;
    hilock_status st = hl_conn_read(n->conn, wait_ms, &what, &why);
    hl_reply *r;
    if (st == HILOCK_OK) return 0;
    /* how far a handshake got: its whole replies before the close, up to an error reply
     * (read_node: hl_handshake_closed; they are not judged, nor is anything used) */
    p->closed_at = p->got;
    while (p->closed_at < p->nhandshake && hl_resp_next(n->conn->resp, &r) > 0) {
        int refused = hl_reply_type(r) == HL_R_ERROR;
        hl_reply_free(r);
        if (refused) break;
        p->closed_at++;
    }
    finish(n, p, st, what, why);
    hl_node_close(n);
    return -1;
}

/* An error reply that ends the connection, in its topology's judgement (READONLY: a replica
 * now -- a failover demoted it, or Sentinel named it before it was promoted). Its replies
 * stand; the connection must not. */
int hl_topo_drops(hl_node *n, hl_reply *const *reply, int ncmd)
{
    if (!n->topo->on_error_reply) return 0;
    for (int q = 0; q < ncmd; q++)
        if (hl_reply_type(reply[q]) == HL_R_ERROR && n->topo->on_error_reply(n, reply[q]))
            return 1;
    return 0;
}

/* One reply arrived for node n. */
static void on_reply(hilock_client *c, hl_node *n, pending *p, const hl_cmd *cmds, hl_reply *r)
{
    int idx = p->got++;
    if (idx < p->nhandshake) {
        hilock_status st = hl_handshake_judge(n, n->conn, idx, r);
        hl_reply_free(r);
        if (st == HILOCK_OK && p->got == p->nhandshake) st = hl_handshake_commit(n, n->conn);
        if (st != HILOCK_OK) {
            finish(n, p, st, NULL, NULL);
            hl_node_close(n);
            return;
        }
        if (p->got == p->nhandshake) {
            n->conn->fresh = 0;
            p->opening = 0;
            hl_conn_ready(c, n, n->conn);
        }
        return;
    }
    if (idx < p->prefix) {   /* an undo: whatever it says, it has been tried */
        p->undone++;
        hl_reply_free(r);
        return;
    }
    idx -= p->prefix;
    if (p->nask && idx % 2 == 0) {   /* ASKING's +OK (an error shows in the command's reply) */
        hl_reply_free(r);
        return;
    }
    idx /= 1 + p->nask;
    if (cmds[idx].script && !p->used_eval && hl_reply_is_error(r, "NOSCRIPT"))
        p->resend = 1;
    n->reply[idx] = r;
}

/* hl_exec_any: stop waiting on a node whose command is still pending because another node
 * answered. Its connection is closed, so that reply can never be read as the answer to a
 * later command; undos it already answered are done. */
/* One node waiting for its replies, its commands written: it may wait in the read itself
 * (the transport's read_wait) instead of poll() then read() -- one system call less per
 * round trip, ~1.8 us of CPU on loopback TCP (docs/performance.md). A socket timeout runs
 * on the kernel's timer wheel, which may fire up to 1/8 of the timeout (plus a tick) late,
 * unlike poll()'s precise timer: so the wait is at most 8/9 of what is left, less 10 ms, in
 * whole 10 ms steps -- the same from one round trip to the next (no setsockopt each time)
 * -- and the last stretch before the deadline is left to poll(), which keeps it to the ms.
 * Returns the wait in ms, 0 = poll. */
#define DIRECT_STEP_MS 10
static int direct_wait_ms(const hl_node *n, const pending *p, int64_t left_us)
{
    int64_t ms = (left_us / 1000 * 8 / 9 / DIRECT_STEP_MS - 1) * DIRECT_STEP_MS;
    if (!n->conn->io.ops->read_wait || n->conn->connecting || !p->wdone || ms < DIRECT_STEP_MS) return 0;
    /* a read that waits does not see hilock_cancel's pipe: it looks again after this long */
    return ms > HL_CANCEL_STEP_US / 1000 ? HL_CANCEL_STEP_US / 1000 : (int)ms;
}

static void abandon(hl_node *n, pending *p)
{
    finish(n, p, HILOCK_ETIMEDOUT, "wait", "abandoned: another node answered first");
    p->abandoned = 1;
}

/* ---- one pass on the nodes (exec_nodes), in phases: reset, build and send, poll, read,
 * settle ---- */

/* A pass's time: the call's (hl_exec's per-node I/O timeout and hard end) and, from it
 * (bounds), the current round trip's I/O end and its connect's (connect_timeout_ms, ending
 * within one such round trip from now, never past the call's end). */
typedef struct pass_time {
    hl_deadline call;
    hl_deadline connect;   /* this round's connect (and the topology's resolve or route) */
    int64_t     io;        /* this round's I/O end */
} pass_time;

/* A round trip's ends from now. */
static void bounds(const hilock_client *c, int64_t now, pass_time *b)
{
    b->connect = hl_one_round(hl_deadline_of(c->opt.connect_timeout_ms * 1000, b->call.hard_us), now);
    b->io = hl_round_end(b->call, now);
}

/* One pass's state: the nodes' pipelines in flight and what poll() watches. */
typedef struct pass {
    hilock_client *c;
    const hl_cmd  *cmds;
    int            ncmd;
    int            any;        /* the pass ends at the first node whose last reply carries data */
    int            answered;   /* any: such a reply came (not nil, not an error) */
    uint32_t       ok;         /* nodes done with HILOCK_OK */
    pass_time       dl;
    pending        p[HL_MAX_NODES];
    struct pollfd  fds[HL_MAX_NODES + 1];   /* + hilock_cancel's pipe, last */
    int            map[HL_MAX_NODES];       /* fds[j] is node map[j]'s (j < nfds) */
    int            nfds;
} pass;

/* Reset: node n's replies, status and error, before its round trip (a redirect keeps the
 * other nodes' replies). */
static void reset_node(hl_node *n)
{
    for (int q = 0; q < HL_MAX_CMDS; q++) {
        hl_reply_free(n->reply[q]);
        n->reply[q] = NULL;
    }
    n->st = HILOCK_OK;
    n->err[0] = '\0';
    n->wrote = 0;
}

/* Build and send: node i's pipeline, on its connection or a new one. *now: the pass's clock
 * reading, taken again when routing may have fetched a slot map. */
static void start_node(pass *s, size_t i, int64_t *now)
{
    hilock_client *c = s->c;
    hl_node *n = &c->nodes[i];
    pending *p = &s->p[i];
    hl_buf *b = &c->obuf;
    if (n->topo->route && (p->asking = n->topo->route(c, n, s->cmds, s->ncmd, s->dl.connect)) < 0)
        return;   /* no server for it (the topology has said why) */
    if (n->topo->route)   /* routing may have fetched a slot map: the round trip's own
                             bounds start after it (the hard one stands) */
        bounds(c, *now = hl_now_us(), &s->dl);
    /* (a day-old clock reading is taken again by a new connection: hl_node_clock_old) */
    if (n->conn && (hl_conn_stale(n->conn, *now) || hl_node_clock_old(n, *now))) hl_node_close(n);
    for (int tries = 0; tries < 2; tries++) {
        hl_io io = HL_IO_OK;
        int reused = n->conn != NULL;
        if (!reused) {
            p->opening = 1;
            p->open_us = hl_now_us();
            if (conn_start(c, n, s->dl.connect) < 0) break;
        }
        p->active = 1;
        p->t0 = *now;
        p->end = n->conn->connecting ? s->dl.connect.hard_us : s->dl.io;
        build_pipeline(c, n, p, s->cmds, s->ncmd, 0, b);
        if (p->refused) {
            finish(n, p, HILOCK_EINVAL, NULL, NULL);
            break;
        }
        if (!b->oom) io = send_pipeline(n, p, b);
        if (b->oom || n->conn->out.oom) {
            finish(n, p, HILOCK_ENOMEM, "out of memory", NULL);
            break;
        }
        if (io == HL_IO_OK) break;
        /* A reused connection that refuses the very first write (the peer is gone: a unix
         * socket says so at once) delivered nothing: open a new one and send again. */
        if (reused && tries == 0 && io == HL_IO_CLOSED) {
            hl_node_close(n);
            p->active = 0;
            continue;
        }
        finish(n, p, HILOCK_EIO, "write", n->conn->io.ops->error(&n->conn->io));
        break;
    }
}

/* Poll: ends the pipelines past their deadline and waits for the others' sockets -- or, one
 * node alone, leaves the wait to its read (*direct: the read's wait in ms, direct_wait_ms).
 * *rc: poll()'s count (1 for a direct read; < 0 after EINTR). Returns 0 when the pass is over:
 * no node left, or poll() failed (the nodes then end EIO). */
static int poll_nodes(pass *s, int *direct, int *rc)
{
    hilock_client *c = s->c;
    int64_t now = hl_now_us(), first = INT64_MAX, wait_ms;
    int cancel_fd, cancelled = c->cancel && hl_cancel_due(c->cancel);
    s->nfds = 0;
    for (size_t i = 0; i < c->nnodes; i++) {
        hl_node *n = &c->nodes[i];
        pending *p = &s->p[i];
        if (!p->active) continue;
        if (cancelled) {   /* (its connection closed: a reply may still come) */
            finish(n, p, HILOCK_ECANCELED, "wait", "cancelled");
            continue;
        }
        if (now >= p->end) {
            finish(n, p, HILOCK_ETIMEDOUT,
                   n->conn->connecting ? n->conn->io.ops->timeout_error(&n->conn->io) : "read",
                   "timed out");
            continue;
        }
        if (p->end < first) first = p->end;
        s->fds[s->nfds].fd = n->conn->io.fd;
        s->fds[s->nfds].events = n->conn->io.ops->poll_events(&n->conn->io,
                                                              (short)(POLLIN | (p->wdone ? 0 : POLLOUT)));
        s->fds[s->nfds].revents = 0;
        s->map[s->nfds++] = (int)i;
    }
    if (s->nfds == 0) return 0;
    wait_ms = (first - now + 999) / 1000;
    *direct = s->nfds == 1 ? direct_wait_ms(&c->nodes[s->map[0]], &s->p[s->map[0]], first - now) : 0;
    *rc = 1;
    if (*direct) {
        s->fds[0].revents = POLLIN;   /* the read waits */
    } else if (!c->cancel) {
        *rc = poll(s->fds, (nfds_t)s->nfds, wait_ms > 60000 ? 60000 : (int)wait_ms);
    } else if ((cancel_fd = hl_cancel_fd(c->cancel)) >= 0) {
        struct pollfd *k = &s->fds[s->nfds];
        k->fd = cancel_fd;
        k->events = POLLIN;
        k->revents = 0;
        *rc = poll(s->fds, (nfds_t)s->nfds + 1, wait_ms > 60000 ? 60000 : (int)wait_ms);
        if (*rc > 0 && k->revents) {   /* (the next pass reads the counter) */
            (*rc)--;
            hl_cancel_settle(c->cancel);
        }
    } else {   /* no pipe (out of descriptors): look at the counter every HL_CANCEL_STEP_US */
        if (wait_ms > HL_CANCEL_STEP_US / 1000) wait_ms = HL_CANCEL_STEP_US / 1000;
        *rc = poll(s->fds, (nfds_t)s->nfds, (int)wait_ms);
    }
    if (*rc < 0 && errno != EINTR) {
        for (int j = 0; j < s->nfds; j++)
            finish(&c->nodes[s->map[j]], &s->p[s->map[j]], HILOCK_EIO, "poll", strerror(errno));
        return 0;
    }
    return 1;
}

/* Settle: node i's pipeline (on connection k) is answered in full, its undos with it. Either
 * the commands go again -- with EVAL after a NOSCRIPT (script cache empty: restart,
 * failover), or after the handshake's replies -- or the node is done. */
static void settle_node(pass *s, int i, struct hl_conn *k)
{
    hilock_client *c = s->c;
    hl_node *n = &c->nodes[i];
    pending *p = &s->p[i];
    hl_buf *b = &c->obuf;
    int ncmd = s->ncmd;
    hl_undo_drop(n, p->undo_at, p->undone);
    p->nundo = p->undone = 0;
    if (p->resend || p->more) {
        int use_eval = p->resend || p->used_eval;
        p->t0 = hl_now_us();   /* (the round trip counted is the commands', not the handshake's) */
        /* a round trip of its own (the commands after the handshake's, or their resend as
         * EVAL): its own io_timeout_ms, within the call's bound -- else a link slower than
         * half the timeout never gets a command through a fresh connection */
        p->end = hl_round_end(s->dl.call, p->t0);
        for (int q = 0; q < ncmd; q++) {
            hl_reply_free(n->reply[q]);
            n->reply[q] = NULL;
        }
        build_pipeline(c, n, p, s->cmds, ncmd, use_eval, b);
        if (p->refused)
            finish(n, p, HILOCK_EINVAL, NULL, NULL);
        else if (b->oom || send_pipeline(n, p, b) != HL_IO_OK)
            finish(n, p, b->oom || k->out.oom ? HILOCK_ENOMEM : HILOCK_EIO, "write",
                   b->oom || k->out.oom ? "out of memory" : k->io.ops->error(&k->io));
    } else {
        finish(n, p, HILOCK_OK, NULL, NULL);
        s->ok |= 1u << i;
        k->last_us = hl_now_us();
        if (!s->any) hl_round_trip(c, p->t0, k->last_us);   /* (a blocking wait is no round trip) */
        if (hl_topo_drops(n, n->reply, ncmd)) hl_node_close(n);   /* resolve again next time */
        if (s->any && ncmd > 0 && hl_reply_type(n->reply[ncmd - 1]) != HL_R_NIL &&
            hl_reply_type(n->reply[ncmd - 1]) != HL_R_ERROR)
            s->answered = 1;
    }
}

/* Read: node i's socket is ready (revents): its connect goes on, what is left of its
 * pipeline is written, its replies are read; a pipeline answered in full is settled. */
static void read_node(pass *s, int i, short revents, int direct)
{
    hl_node *n = &s->c->nodes[i];
    pending *p = &s->p[i];
    struct hl_conn *k = n->conn;
    if (k->connecting) {
        hl_io io = k->io.ops->connect_step(&k->io);
        if (io == HL_IO_WANT_READ || io == HL_IO_WANT_WRITE) return;
        if (io != HL_IO_OK) {
            finish(n, p, HILOCK_EIO, "connect", k->io.ops->error(&k->io));
            return;
        }
        k->connecting = 0;
        hl_conn_connected(s->c, n, k);
        if (k->fresh && p->nhandshake == 0) {   /* nothing to ask (hl_handshake_closed left it
                                                   all out): ready, the server's facts unknown */
            (void)hl_handshake_commit(n, k);   /* (no run_id to compare: OK) */
            k->fresh = 0;
            p->opening = 0;
            hl_conn_ready(s->c, n, k);
        }
        p->end = hl_round_end(s->dl.call, hl_now_us());
    }
    if (!p->wdone && conn_flush(n, p) != HL_IO_OK) {
        finish(n, p, HILOCK_EIO, "write", k->io.ops->error(&k->io));
        return;
    }
    if (!(revents & (POLLIN | POLLHUP | POLLERR))) return;
    if (conn_read(n, p, direct) < 0) {
        /* closed on a command of the handshake the node now goes without: again, at once */
        if (p->got < p->nhandshake && n->st == HILOCK_EIO && hl_handshake_closed(s->c, n, p->closed_at)) {
            int64_t now = hl_now_us();
            reset_node(n);
            start_node(s, (size_t)i, &now);
        }
        return;
    }
    for (;;) {
        hl_reply *r;
        int got = hl_resp_next(k->resp, &r);
        if (got < 0) {
            finish(n, p, HILOCK_EIO, "protocol", hl_resp_why(k->resp));
            return;
        }
        if (!got) return;
        on_reply(s->c, n, p, s->cmds, r);
        if (!p->active || !n->conn) return;
        if (p->got < p->expect) continue;
        settle_node(s, i, k);
        return;
    }
}

/* One pass of hl_exec (engine.h), no redirects; *io_end: the I/O end the last node's round
 * trip started with (after its routing: a cluster's refresh does not count). */
static uint32_t exec_nodes(hilock_client *c, uint32_t mask, const hl_cmd *cmds, int ncmd, hl_deadline dl,
                           int any, int64_t *io_end)
{
    pass s = { .c = c, .cmds = cmds, .ncmd = ncmd, .any = any, .dl = { .call = dl } };
    int64_t now = hl_now_us();
    hl_buf *b = &c->obuf;
    assert(c->nnodes <= HL_MAX_NODES && ncmd >= 0 && ncmd <= HL_MAX_CMDS);   /* masks, reply[] */
    if (c->cancel && hl_cancel_due(c->cancel)) {   /* cancelled before it began: nothing sent */
        for (size_t i = 0; i < c->nnodes; i++)
            if (mask & (1u << i)) {
                reset_node(&c->nodes[i]);
                hl_node_set_err(&c->nodes[i], HILOCK_ECANCELED, "wait", "cancelled");
            }
        *io_end = now;
        return 0;
    }
    bounds(c, now, &s.dl);
    for (size_t i = 0; i < c->nnodes; i++) {
        if (!(mask & (1u << i))) continue;
        reset_node(&c->nodes[i]);
        start_node(&s, i, &now);
    }
    *io_end = s.dl.io;
    for (;;) {
        int direct = 0, rc = 0;
        if (s.answered) {   /* any: the others are not waited for */
            for (size_t i = 0; i < c->nnodes; i++)
                if (s.p[i].active) abandon(&c->nodes[i], &s.p[i]);
            break;
        }
        if (!poll_nodes(&s, &direct, &rc)) break;
        for (int j = 0; rc > 0 && j < s.nfds; j++)
            if (s.fds[j].revents) read_node(&s, s.map[j], s.fds[j].revents, direct);
    }
    if (b->oom || b->cap > 65536) hl_buf_free(b);   /* don't keep a huge one (or a broken one) */
    for (size_t i = 0; i < c->nnodes; i++)
        if ((mask & (1u << i)) && c->nodes[i].st != HILOCK_OK) {
            size_t klen;
            const char *key = hl_cmds_key(cmds, ncmd, &klen);
            if (s.p[i].opening && !s.p[i].abandoned)
                hl_conn_failed(c, &c->nodes[i], s.p[i].open_us, c->nodes[i].st, c->nodes[i].err);
            if (!s.p[i].abandoned) hl_emit_node_error(c, &c->nodes[i], klen ? key : NULL, klen);
            for (int q = 0; q < HL_MAX_CMDS; q++) {
                hl_reply_free(c->nodes[i].reply[q]);
                c->nodes[i].reply[q] = NULL;
            }
        }
    return s.ok;
}

/* exec_nodes, then again on the nodes whose topology asks for it (a Cluster redirect), at
 * most HL_MAX_REDIRECTS times and never past the first round trip's deadline: a redirect
 * loop (or a ping-pong between two nodes) ends with the last error reply standing. */
static uint32_t exec_redirected(hilock_client *c, uint32_t mask, const hl_cmd *cmds, int ncmd,
                                hl_deadline dl, int any)
{
    int64_t first, hop;   /* (the first round trip's end: it starts after routing) */
    uint32_t ok = exec_nodes(c, mask, cmds, ncmd, dl, any, &first);
    hl_deadline hops;
    hops = hl_deadline_of(dl.per_us, first);
    for (int h = 0; h < HL_MAX_REDIRECTS; h++) {
        uint32_t again = 0;
        for (size_t i = 0; i < c->nnodes; i++) {
            hl_node *n = &c->nodes[i];
            if ((mask & (1u << i)) && n->topo->redirect && n->topo->redirect(c, n, cmds, ncmd, hops))
                again |= 1u << i;
        }
        if (!again || hl_now_us() >= first) break;
        ok = (ok & ~again) | exec_nodes(c, again, cmds, ncmd, hops, any, &hop);
    }
    return ok;
}

uint32_t hl_exec(hilock_client *c, uint32_t mask, const hl_cmd *cmds, int ncmd, hl_deadline dl)
{
    if (c->runner)   /* attached to an event loop: its runner (src/async/async.c) does the round trips */
        return c->runner->exec(c, mask, cmds, ncmd, dl, 0);
    return exec_redirected(c, mask, cmds, ncmd, dl, 0);
}

uint32_t hl_exec_any(hilock_client *c, uint32_t mask, const hl_cmd *cmds, int ncmd, hl_deadline dl)
{
    if (c->runner) return c->runner->exec(c, mask, cmds, ncmd, dl, 1);
    return exec_redirected(c, mask, cmds, ncmd, dl, 1);
}

void hl_pause_until(hilock_client *c, int64_t until_us)
{
    if (c->runner) c->runner->pause_until(c, until_us);
    else if (c->cancel) hl_cancel_sleep_until(c->cancel, until_us);
    else hl_plat_sleep_until(until_us);
}

void hl_exec_clear(hilock_client *c)
{
    for (size_t i = 0; i < c->nnodes; i++)
        for (int q = 0; q < HL_MAX_CMDS; q++) {
            hl_reply_free(c->nodes[i].reply[q]);
            c->nodes[i].reply[q] = NULL;
        }
}
