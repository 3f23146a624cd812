/* SPDX-License-Identifier: BSD-3-Clause */
/* inspect.c -- read-only views of lock keys (include/hilock_inspect.h).
 *
 * Each call is one script per master: the script does the SCAN (or the look at the aux keys)
 * and reads every key of the page on the server, because a pipeline of TYPE/PTTL/GET per key
 * would not fit the engine's few-command pipelines, and one round trip per key would make a
 * million-key inventory last as many round trips. The scripts declare `no-writes`, so a bug
 * here can never turn into a write: the server refuses it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock.h"
#include "hilock_inspect.h"

/* generated from src/lua/inspect_scan.lua and src/lua/inspect_key.lua */
extern const hl_script hl_lua_inspect_scan, hl_lua_inspect_key;

#define SCAN_COUNT_MAX 500   /* 1 + 5 elements per key, and SCAN may return twice COUNT: within the reply limits */

size_t hilock_client_masters(const hilock_client *c) { return c ? c->nnodes : 0; }

const char *hilock_client_master_name(const hilock_client *c, size_t i)
{
    return c && i < c->nnodes ? c->nodes[i].name : NULL;
}

/* Round trip on the nodes in mask: io_timeout_ms each (the handshake's and a resend's too),
 * + connect_timeout_ms to connect. */
static uint32_t exec_read(hilock_client *c, uint32_t mask, const hl_cmd *cmd)
{
    return hl_exec(c, mask, cmd, 1, hl_call_deadline(c, c->opt.io_timeout_ms * 1000));
}

static int is_int(const hl_reply *r) { return hl_reply_type(r) == HL_R_INTEGER; }
static int is_str(const hl_reply *r) { return hl_reply_type(r) == HL_R_STRING; }

/* Fill v for `key` from the replies type, pttl, value|nil, strlen. 0 if their shape is not
 * what the scripts return. */
static int key_view(hilock_key_view *v, const char *key, size_t key_len, hl_reply *const *r)
{
    size_t len;
    memset(v, 0, sizeof *v);
    if (!is_str(r[0]) || !is_int(r[1]) || !is_int(r[3]) ||
        (hl_reply_type(r[2]) != HL_R_NIL && !is_str(r[2])))
        return 0;
    v->key = key;
    v->key_len = key_len;
    v->type = hl_reply_str(r[0], NULL);
    v->pttl_ms = hl_reply_int(r[1]);
    v->value = hl_reply_str(r[2], &len);
    v->value_len = v->value ? len : 0;
    v->value_size = hl_reply_int(r[3]);
    return v->value_len <= HILOCK_VIEW_VALUE_MAX && v->pttl_ms >= -2;
}

/* The key at element i of a scan page and its four replies. */
static int page_key(const hl_reply *page, size_t i, hilock_key_view *v)
{
    hl_reply *four[4] = { hl_reply_elem(page, i + 1), hl_reply_elem(page, i + 2),
                          hl_reply_elem(page, i + 3), hl_reply_elem(page, i + 4) };
    size_t kl;
    const char *k = hl_reply_str(hl_reply_elem(page, i), &kl);
    return is_str(hl_reply_elem(page, i)) && key_view(v, k, kl, four);
}

/* The calls run on node i of xc: c's own (xc == c), or the node of a private client made for
 * one cluster node (below); their errors go to c's errmsg either way. */
static hilock_status bad_reply(hilock_client *c, hilock_client *xc, size_t i, const char *what)
{
    hl_exec_clear(xc);
    return hl_fail(c, HILOCK_EREPLY, "%s: %s: unexpected reply", xc->nodes[i].name, what);
}

static hilock_status fail_on(hilock_client *c, hilock_client *xc, hilock_status st, uint32_t mask, const char *what)
{
    if (xc == c) return hl_fail_nodes(c, st, mask, what);
    return hl_fail(c, st, "%s%s", what, xc->nodes[0].err);
}

/* scan's checks of its arguments: OK or EINVAL with the message */
static hilock_status scan_args(hilock_client *c, size_t master, const char **pattern, size_t count,
                               const uint64_t *cursor, hilock_scan_fn fn)
{
    if (!cursor || !fn) return hl_fail(c, HILOCK_EINVAL, "scan: cursor or fn is NULL");
    if (master >= c->nnodes)
        return hl_fail(c, HILOCK_EINVAL, "scan: master %zu out of range (%zu masters)", master, c->nnodes);
    if (count < 1 || count > SCAN_COUNT_MAX)
        return hl_fail(c, HILOCK_EINVAL, "scan: count %zu outside 1..%d", count, SCAN_COUNT_MAX);
    if (!*pattern) *pattern = "*";
    if (strlen(*pattern) > HILOCK_KEY_MAX)
        return hl_fail(c, HILOCK_EINVAL, "scan: pattern longer than %d bytes", HILOCK_KEY_MAX);
    return HILOCK_OK;
}

/* One page on node i of xc; fn gets `master`. */
static hilock_status scan_page(hilock_client *c, hilock_client *xc, size_t i, size_t master, const char *pattern,
                               size_t count, uint64_t *cursor, hilock_scan_fn fn, void *arg)
{
    hl_cmd cmd;
    char a_cur[24], a_count[24], a_max[24];
    const hl_reply *r;
    hl_node *n;
    unsigned long long next;
    size_t ne;
    const char *digits;
    char *end;
    snprintf(a_cur, sizeof a_cur, "%llu", (unsigned long long)*cursor);
    hl_cmd_init(&cmd, &hl_lua_inspect_scan, 0);
    hl_cmd_arg(&cmd, a_cur, (size_t)-1);
    hl_cmd_arg(&cmd, pattern, (size_t)-1);
    hl_cmd_argi(&cmd, a_count, (long long)count);
    hl_cmd_argi(&cmd, a_max, HILOCK_VIEW_VALUE_MAX);
    n = &xc->nodes[i];
    if (!exec_read(xc, 1u << i, &cmd)) return fail_on(c, xc, n->st, 1u << i, "scan: ");
    r = n->reply[0];
    if (hl_reply_type(r) == HL_R_ERROR) {
        hilock_status st = hl_node_reply_error(n, r);
        hl_exec_clear(xc);
        return fail_on(c, xc, st, 1u << i, "scan: ");
    }
    /* check the whole page before the first callback: on a bad reply, nothing was reported */
    ne = hl_reply_nelem(r);
    if (hl_reply_type(r) != HL_R_ARRAY || ne < 1 || (ne - 1) % 5 || !is_str(hl_reply_elem(r, 0)))
        return bad_reply(c, xc, i, "scan");
    digits = hl_reply_str(hl_reply_elem(r, 0), NULL);   /* SCAN's cursor: digits only */
    next = strtoull(digits, &end, 10);
    if (*end || digits[0] < '0' || digits[0] > '9') return bad_reply(c, xc, i, "scan");
    for (size_t e = 1; e < ne; e += 5) {
        hilock_key_view v;
        if (!page_key(r, e, &v)) return bad_reply(c, xc, i, "scan");
    }
    for (size_t e = 1; e < ne; e += 5) {
        hilock_key_view v;
        page_key(r, e, &v);
        fn(master, &v, arg);
    }
    hl_exec_clear(xc);
    *cursor = next;
    return hl_ok(c);
}

static hilock_status scan_in(hilock_client *c, size_t master, const char *pattern, size_t count,
                             uint64_t *cursor, hilock_scan_fn fn, void *arg)
{
    hilock_status st = scan_args(c, master, &pattern, count, cursor, fn);
    return st != HILOCK_OK ? st : scan_page(c, c, master, master, pattern, count, cursor, fn, arg);
}

/* "-1" for a missing or non-numeric counter: what the fence counter holds is digits */
static int64_t counter_of(const hl_reply *r)
{
    size_t len;
    const char *s = hl_reply_str(r, &len);
    int64_t v = 0;
    if (!s || len == 0 || len > 18) return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* The holder record as inspect_key.lua gives it, "since\nhost\npid\nprogram" (since '':
 * not known), split into v; buf holds its copy (NUL-terminated parts). Anything else (nil,
 * another shape: any client may write that key) is no record. */
#define HOLDER_REPLY_MAX 512

static int64_t number_of(const char *s)
{
    int64_t v = 0;
    if (!*s || strlen(s) > 18) return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        v = v * 10 + (*s - '0');
    }
    return v;
}

/* A record's n lines into part[], copied into buf (HOLDER_REPLY_MAX bytes); 0 if r is not a
 * string of exactly n lines whose numeric lines (bit i of digits: line i) are digits. */
static int split_record(const hl_reply *r, char *buf, char **part, int n, unsigned digits)
{
    size_t len;
    const char *s = hl_reply_str(r, &len);
    char *p = buf;
    if (!is_str(r) || len >= HOLDER_REPLY_MAX || memchr(s, '\0', len)) return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    for (int i = 0; i < n; i++) {
        part[i] = p;
        p = strchr(p, '\n');
        if ((i < n - 1) != (p != NULL)) return 0;   /* exactly n - 1 newlines */
        if (p) *p++ = '\0';
    }
    for (int i = 0; i < n; i++)
        if ((digits & (1u << i)) && number_of(part[i]) < 0) return 0;
    return 1;
}

static void holder_view(const hl_reply *r, char *buf, hilock_lock_view *v)
{
    char *part[4];   /* since, host, pid, program */
    v->holder_host = v->holder_program = NULL;
    v->holder_pid = v->holder_since_ms = -1;
    if (!split_record(r, buf, part, 4, 4u) || (part[0][0] && number_of(part[0]) < 0)) return;
    v->holder_since_ms = part[0][0] ? number_of(part[0]) : -1;
    v->holder_host = part[1];
    v->holder_pid = number_of(part[2]);
    v->holder_program = part[3];
}

/* ---- semaphores and shared/exclusive locks: a sorted set of holders (hilock_holder_view) ---- */

#define HOLDERS_MAX HILOCK_SEM_LIMIT_MAX   /* holders a reply lists: 3 elements each, within the limits */

/* The kind markers (the set's member scored +inf, as the kinds write it) and their names. */
static const struct { const char *marker, *kind; } kinds[] = {
    { "hilock:sem", "semaphore" }, { "hilock:rw", "rwlock" },
};

static const char *kind_of(const hilock_key_view *k)
{
    if (!strcmp(k->type, "string") || !strcmp(k->type, "none")) return "lock";
    for (size_t i = 0; k->value && i < sizeof kinds / sizeof kinds[0]; i++)
        if (!strcmp(k->value, kinds[i].marker)) return kinds[i].kind;
    return NULL;
}

/* A holder's mode, by its token's prefix (rwlock: "x:" exclusive, "s:" shared). */
static const char *mode_of(const char *kind, const char *token)
{
    if (strcmp(kind, "rwlock")) return "permit";
    return !strncmp(token, "x:", 2) ? "exclusive" : "shared";
}

/* One holder from the triple {token, ms left, record "since\nlimit\nhost\npid\nprogram" or nil}
 * at element i of list; buf (HOLDER_REPLY_MAX bytes) keeps the record's parts. */
static int holder_entry(const hl_reply *list, size_t i, const char *kind, hilock_holder_view *h, char *buf)
{
    const hl_reply *rec = hl_reply_elem(list, i + 2);
    char *part[5];
    memset(h, 0, sizeof *h);
    if (!is_str(hl_reply_elem(list, i)) || !is_int(hl_reply_elem(list, i + 1)) ||
        (hl_reply_type(rec) != HL_R_NIL && !is_str(rec)))
        return 0;
    h->token = hl_reply_str(hl_reply_elem(list, i), &h->token_len);
    h->mode = mode_of(kind, h->token);
    h->pttl_ms = hl_reply_int(hl_reply_elem(list, i + 1));
    h->limit = h->pid = h->since_ms = -1;
    if (split_record(rec, buf, part, 5, 1u | 2u | 8u)) {   /* else no record: any client may write it */
        h->since_ms = number_of(part[0]);
        h->limit = number_of(part[1]);
        h->host = part[2];
        h->pid = number_of(part[3]);
        h->program = part[4];
    }
    return 1;
}

/* The kinds' part of the view from elements 9..12 of the reply: counts, then the holders
 * into *hp (malloc'ed: the caller frees it; NULL when there are none). 0 on a bad shape or no
 * memory (*oom set). */
static int kind_view(const hl_reply *r, hilock_lock_view *v, hilock_holder_view **hp, int *oom)
{
    const hl_reply *list = hl_reply_elem(r, 12);
    size_t ne = hl_reply_nelem(list);
    hilock_holder_view *h;
    char *bufs;
    int64_t latest = -1;
    *hp = NULL;
    if (!is_int(hl_reply_elem(r, 9)) || !is_int(hl_reply_elem(r, 10)) || !is_int(hl_reply_elem(r, 11)) ||
        hl_reply_type(list) != HL_R_ARRAY || ne % 3 || ne / 3 > HOLDERS_MAX)
        return 0;
    v->kind = kind_of(&v->key);
    v->holders = v->kind && !strcmp(v->kind, "lock") ? strcmp(v->key.type, "none") != 0 : hl_reply_int(hl_reply_elem(r, 9));
    if (!v->kind) v->holders = -1;
    v->waiters = hl_reply_int(hl_reply_elem(r, 10));
    v->writers_waiting = hl_reply_int(hl_reply_elem(r, 11));
    v->limit = -1;
    if (!ne) return 1;
    if (!v->kind || !strcmp(v->kind, "lock")) return 0;
    if (!(h = malloc(ne / 3 * (sizeof *h + HOLDER_REPLY_MAX)))) return !(*oom = 1);
    bufs = (char *)(h + ne / 3);
    for (size_t i = 0; i < ne / 3; i++) {
        if (!holder_entry(list, 3 * i, v->kind, &h[i], bufs + i * HOLDER_REPLY_MAX)) {
            free(h);
            return 0;
        }
        if (h[i].since_ms > latest && !strcmp(v->kind, "semaphore")) {
            latest = h[i].since_ms;
            v->limit = h[i].limit;
        }
    }
    v->holder = *hp = h;
    v->nholder = ne / 3;
    return 1;
}

/* The reply of inspect_key.lua on one node, as a view (holder parts in buf, the kinds'
 * holders in *hp: the caller frees it); 0 if its shape is not the script's (or no memory:
 * *oom). */
static int lock_view(const hl_reply *r, const char *key, hilock_lock_view *v, char *buf,
                     hilock_holder_view **hp, int *oom)
{
    hl_reply *four[4] = { hl_reply_elem(r, 0), hl_reply_elem(r, 1), hl_reply_elem(r, 2), hl_reply_elem(r, 3) };
    memset(v, 0, sizeof *v);
    *hp = NULL;
    if (hl_reply_type(r) != HL_R_ARRAY || hl_reply_nelem(r) != 13 || !key_view(&v->key, key, strlen(key), four))
        return 0;
    if ((hl_reply_type(hl_reply_elem(r, 4)) != HL_R_NIL && !is_str(hl_reply_elem(r, 4))) ||
        !is_int(hl_reply_elem(r, 5)) || !is_int(hl_reply_elem(r, 6)) || !is_int(hl_reply_elem(r, 7)))
        return 0;
    v->fence = counter_of(hl_reply_elem(r, 4));
    v->fence_pttl_ms = hl_reply_int(hl_reply_elem(r, 5));
    v->waiters_pttl_ms = hl_reply_int(hl_reply_elem(r, 6));
    v->signals = hl_reply_int(hl_reply_elem(r, 7));
    holder_view(hl_reply_elem(r, 8), buf, v);
    return kind_view(r, v, hp, oom);
}

#define NAUX 6   /* the aux keys inspect_key.lua reads */

/* Look at key on the nodes of xc in mask; fn gets i (xc == c) or `master` (one cluster node). */
static hilock_status inspect_on(hilock_client *c, hilock_client *xc, uint32_t mask, size_t master,
                                const char *key, hilock_inspect_fn fn, void *arg)
{
    hl_cmd cmd;
    char a_max[24], a_holders[24], *aux[NAUX], holder[HOLDER_REPLY_MAX];
    /* names as lock.c and the kinds make them */
    static const char *const suffix[NAUX] = { ":fence", ":waiters", ":signal", ":holder", ":holders", ":wq" };
    hilock_status st = HILOCK_OK;
    uint32_t ok, failed = 0;
    int missing = 0;
    for (int i = 0; i < NAUX; i++) missing |= !(aux[i] = hl_aux_key(key, suffix[i]));
    if (missing) {
        for (int i = 0; i < NAUX; i++) free(aux[i]);
        return hl_fail(c, HILOCK_ENOMEM, "out of memory");
    }
    hl_cmd_init(&cmd, &hl_lua_inspect_key, 1 + NAUX);
    hl_cmd_arg(&cmd, key, (size_t)-1);
    for (int i = 0; i < NAUX; i++) hl_cmd_arg(&cmd, aux[i], (size_t)-1);
    hl_cmd_argi(&cmd, a_max, HILOCK_VIEW_VALUE_MAX);
    hl_cmd_argi(&cmd, a_holders, HOLDERS_MAX);
    ok = exec_read(xc, mask, &cmd);
    for (size_t i = 0; i < xc->nnodes; i++) {
        hl_node *n = &xc->nodes[i];
        size_t shown = xc == c ? i : master;
        hilock_lock_view v;
        hilock_holder_view *hv;
        int oom = 0;
        if (!(mask & (1u << i))) continue;
        if (ok & (1u << i)) {
            if (hl_reply_type(n->reply[0]) == HL_R_ERROR) {
                hl_node_reply_error(n, n->reply[0]);
            } else if (lock_view(n->reply[0], key, &v, holder, &hv, &oom)) {
                fn(shown, &v, NULL, arg);
                free(hv);
                continue;
            } else if (oom) {
                n->st = HILOCK_ENOMEM;
                snprintf(n->err, sizeof n->err, "%s: inspect: out of memory", n->name);
            } else {
                n->st = HILOCK_EREPLY;
                snprintf(n->err, sizeof n->err, "%s: inspect: unexpected reply", n->name);
            }
        }
        if (n->st == HILOCK_OK) n->st = HILOCK_EREPLY;
        if (st == HILOCK_OK) st = n->st;
        failed |= 1u << i;
        fn(shown, NULL, n->err, arg);
    }
    hl_exec_clear(xc);
    for (int i = 0; i < NAUX; i++) free(aux[i]);
    return st == HILOCK_OK ? hl_ok(c) : fail_on(c, xc, st, failed, "inspect: ");
}

static hilock_status inspect_in(hilock_client *c, const char *key, hilock_inspect_fn fn, void *arg)
{
    if (hl_check_key(c, key) != HILOCK_OK) return HILOCK_EINVAL;
    if (!fn) return hl_fail(c, HILOCK_EINVAL, "inspect: fn is NULL");
    return inspect_on(c, c, hl_all_nodes(c), 0, key, fn, arg);
}

/* ---- one node of a cluster: hilock_cluster_nodes, hilock_scan_node, hilock_inspect_node ---- */

typedef struct map_node {
    char   addr[272];  /* host:port, [host]:port: the public name */
    char   host[256];  /* (the slot map keeps names of up to 255 bytes) */
    int    port;
    char   id[41];
    size_t slots;
    int    replica;
} map_node;

typedef struct node_list {
    map_node *v;
    size_t    n, cap;
    int       oom;
} node_list;

static void collect_node(const char *host, int port, const char *id, size_t slots, int replica, void *arg)
{
    node_list *l = arg;
    map_node *m;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        map_node *v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            l->oom = 1;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    m = &l->v[l->n++];
    snprintf(m->addr, sizeof m->addr, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
    snprintf(m->host, sizeof m->host, "%s", host);
    snprintf(m->id, sizeof m->id, "%s", id);
    m->port = port;
    m->slots = slots;
    m->replica = replica;
}

/* The nodes of master's cluster (slot -1: every master and its replicas) into l, which the
 * caller frees (l->v) on OK. The map is read (at most once, if stale) within one round trip's
 * bound, and copied: the caller's callbacks may use the client. */
static hilock_status read_map(hilock_client *c, size_t master, int slot, int every, node_list *l)
{
    hl_node *n;
    hilock_status st;
    memset(l, 0, sizeof *l);
    if (master >= c->nnodes)
        return hl_fail(c, HILOCK_EINVAL, "cluster: master %zu out of range (%zu masters)", master, c->nnodes);
    n = &c->nodes[master];
    if (!n->topo->sharded)
        return hl_fail(c, HILOCK_EINVAL, "%s is not a cluster (a redis-cluster:// URL)", n->name);
    st = hl_cluster_nodes(c, n, slot, every, hl_call_deadline(c, c->opt.io_timeout_ms * 1000),
                          collect_node, l);
    if (st == HILOCK_OK && l->oom) st = HILOCK_ENOMEM;
    if (st != HILOCK_OK) {
        free(l->v);
        return st == HILOCK_ENOMEM ? hl_fail(c, st, "out of memory") : hl_fail(c, st, "%s", n->err);
    }
    return HILOCK_OK;
}

static hilock_status cluster_nodes_in(hilock_client *c, size_t master, const char *key, hilock_cluster_fn fn, void *arg)
{
    node_list l;
    hilock_status st;
    if (!fn) return hl_fail(c, HILOCK_EINVAL, "cluster nodes: fn is NULL");
    if (key && hl_check_key(c, key) != HILOCK_OK) return HILOCK_EINVAL;
    if ((st = read_map(c, master, key ? (int)hl_key_slot(key, strlen(key)) : -1, 1, &l)) != HILOCK_OK) return st;
    for (size_t i = 0; i < l.n; i++) {
        hilock_cluster_node v = { l.v[i].addr, l.v[i].id, l.v[i].slots, l.v[i].replica };
        fn(master, &v, arg);
    }
    free(l.v);
    return hl_ok(c);
}

/* A node reached as its own master (no routing), READONLY first: a replica then answers for
 * its master's slots from its own data set instead of redirecting. */
static hilock_status node_resolve(hilock_client *c, hl_node *n, hl_deadline dl, const char **host, int *port)
{
    (void)c;
    (void)dl;
    *host = n->url.host;
    *port = n->url.port;
    return HILOCK_OK;
}

static hilock_status node_readonly(hl_node *n, const hl_reply *r)
{
    const char *e = hl_reply_str(r, NULL);
    if (hl_reply_type(r) != HL_R_ERROR) return HILOCK_OK;
    snprintf(n->err, sizeof n->err, "%s: READONLY: %.120s", n->name, e ? e : "refused");
    return n->st = HILOCK_EREPLY;
}

static const hl_topo_ops node_topo = {
    .name = "cluster node",
    .resolve = node_resolve,
    .probe = "READONLY",
    .on_handshake_reply = node_readonly,
};

/* A private client (sc, zeroed here; hl_topo_private_free it on OK) whose one node is the node
 * at addr in master's slot map, reached as the cluster's nodes are. */
static hilock_status node_open(hilock_client *c, size_t master, const char *addr, hilock_client *sc)
{
    node_list l;
    const map_node *m = NULL;
    hl_node tmp, *n;
    hl_hostport hp;
    hilock_status st;
    memset(sc, 0, sizeof *sc);
    if (!addr) return hl_fail(c, HILOCK_EINVAL, "cluster: addr is NULL");
    /* the first map names every master (each page of a scan asks it again, and a frozen seed
     * must not cost each one the whole bound); a replica it does not name is looked for in
     * every node's view */
    for (int every = 0; !m && every < 2; every++) {
        if (every) free(l.v);
        if ((st = read_map(c, master, -1, every, &l)) != HILOCK_OK) return st;
        for (size_t i = 0; i < l.n && !m; i++)
            if (!strcmp(l.v[i].addr, addr)) m = &l.v[i];
    }
    n = &c->nodes[master];
    if (!m) {
        free(l.v);
        return hl_fail(c, HILOCK_EINVAL, "cluster: %.100s is not a node of the slot map", addr);
    }
    memset(&tmp, 0, sizeof tmp);
    hp.host = (char *)m->host;
    hp.port = m->port;
    tmp.url.sentinels = &hp;
    tmp.url.nsentinels = 1;
    tmp.transport = n->transport;   /* TLS for rediss-cluster:// */
    tmp.transport_cfg = n->transport_cfg;
    st = hl_topo_private_init(sc, c, &tmp, 1, "cluster", n->url.user, n->url.pass) ? HILOCK_ENOMEM : HILOCK_OK;
    free(l.v);
    if (st != HILOCK_OK) {
        hl_topo_private_free(sc);
        return hl_fail(c, st, "out of memory");
    }
    sc->nodes[0].topo = &node_topo;
    return HILOCK_OK;
}

static hilock_status scan_node_in(hilock_client *c, size_t master, const char *addr, const char *pattern,
                                  size_t count, uint64_t *cursor, hilock_scan_fn fn, void *arg)
{
    hilock_client sc;
    hilock_status st = scan_args(c, master, &pattern, count, cursor, fn);
    if (st != HILOCK_OK || (st = node_open(c, master, addr, &sc)) != HILOCK_OK) return st;
    st = scan_page(c, &sc, 0, master, pattern, count, cursor, fn, arg);
    hl_topo_private_free(&sc);
    return st;
}

static hilock_status inspect_node_in(hilock_client *c, size_t master, const char *addr, const char *key,
                                     hilock_inspect_fn fn, void *arg)
{
    hilock_client sc;
    hilock_status st;
    if (hl_check_key(c, key) != HILOCK_OK) return HILOCK_EINVAL;
    if (!fn) return hl_fail(c, HILOCK_EINVAL, "inspect: fn is NULL");
    if ((st = node_open(c, master, addr, &sc)) != HILOCK_OK) return st;
    st = inspect_on(c, &sc, 1, master, key, fn, arg);
    hl_topo_private_free(&sc);
    return st;
}

/* The entry points: the bodies above between hl_enter and hl_leave (the thread rule:
 * lock.h); fn runs inside, so it may call the client again from this thread. */
hilock_status hilock_scan(hilock_client *c, size_t master, const char *pattern, size_t count,
                          uint64_t *cursor, hilock_scan_fn fn, void *arg)
{
    hilock_status st;
    int took;
    if (!c) return HILOCK_EINVAL;
    if ((st = hl_enter(c, &took)) != HILOCK_OK) return st;
    return hl_leave(c, took, scan_in(c, master, pattern, count, cursor, fn, arg));
}

hilock_status hilock_inspect(hilock_client *c, const char *key, hilock_inspect_fn fn, void *arg)
{
    hilock_status st;
    int took;
    if (!c) return HILOCK_EINVAL;
    if ((st = hl_enter(c, &took)) != HILOCK_OK) return st;
    return hl_leave(c, took, inspect_in(c, key, fn, arg));
}

hilock_status hilock_cluster_nodes(hilock_client *c, size_t master, const char *key, hilock_cluster_fn fn, void *arg)
{
    hilock_status st;
    int took;
    if (!c) return HILOCK_EINVAL;
    if ((st = hl_enter(c, &took)) != HILOCK_OK) return st;
    return hl_leave(c, took, cluster_nodes_in(c, master, key, fn, arg));
}

hilock_status hilock_scan_node(hilock_client *c, size_t master, const char *addr, const char *pattern, size_t count,
                               uint64_t *cursor, hilock_scan_fn fn, void *arg)
{
    hilock_status st;
    int took;
    if (!c) return HILOCK_EINVAL;
    if ((st = hl_enter(c, &took)) != HILOCK_OK) return st;
    return hl_leave(c, took, scan_node_in(c, master, addr, pattern, count, cursor, fn, arg));
}

hilock_status hilock_inspect_node(hilock_client *c, size_t master, const char *addr, const char *key,
                                  hilock_inspect_fn fn, void *arg)
{
    hilock_status st;
    int took;
    if (!c) return HILOCK_EINVAL;
    if ((st = hl_enter(c, &took)) != HILOCK_OK) return st;
    return hl_leave(c, took, inspect_node_in(c, master, addr, key, fn, arg));
}
