/* SPDX-License-Identifier: BSD-3-Clause */
/* guarded.c -- hilock_guarded_command: a caller's command run by guarded.lua only while the
 * lock's value on its master is ours (hilock.h says what it promises), and hilock_reply, the
 * public copy of its reply.
 *
 * Before anything is sent it refuses what one script cannot do safely: several masters (no
 * atomic step spans them), a legacy stamp (not ours alone: kind.h undo_unknown), a command a
 * script may not run or that would block. The command's keys come from the server's own key
 * specs (COMMAND INFO, kept per command in the client: c->cmdinfo), so the script declares them
 * (Cluster routing and slot checks, ACL) and a Cluster key outside the lock key's slot is
 * refused here rather than by the server halfway. The round trip is the check's: the
 * topology's failover part (Sentinel's question, the identity read) and, with min_replicas,
 * a WAIT after the script. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kind.h"

/* ---- hilock_reply: a deep copy of a parser reply ---- */

static hilock_reply *reply_new(hilock_reply_type type, const char *s, size_t len)
{
    hilock_reply *r = calloc(1, sizeof *r);
    char *str;
    if (!r) return NULL;
    r->type = type;
    if (!s) return r;
    if (!(str = malloc(len + 1))) {
        free(r);
        return NULL;
    }
    memcpy(str, s, len);
    str[len] = '\0';
    r->str = str;
    r->len = len;
    return r;
}

static hilock_reply *reply_copy(const hl_reply *src)
{
    size_t len = 0;
    const char *s;
    hilock_reply *r, **el;
    switch (hl_reply_type(src)) {
    case HL_R_STRING: s = hl_reply_str(src, &len); return reply_new(HILOCK_REPLY_STRING, s, len);
    case HL_R_STATUS: s = hl_reply_str(src, &len); return reply_new(HILOCK_REPLY_STATUS, s, len);
    case HL_R_ERROR:  s = hl_reply_str(src, &len); return reply_new(HILOCK_REPLY_ERROR, s, len);
    case HL_R_INTEGER:
        if ((r = reply_new(HILOCK_REPLY_INTEGER, NULL, 0))) r->integer = hl_reply_int(src);
        return r;
    case HL_R_ARRAY:
        if (!(r = reply_new(HILOCK_REPLY_ARRAY, NULL, 0))) return NULL;
        if (!hl_reply_nelem(src)) return r;
        if (!(el = calloc(hl_reply_nelem(src), sizeof *el))) {
            free(r);
            return NULL;
        }
        r->element = el;
        for (size_t i = 0; i < hl_reply_nelem(src); i++, r->elements++)
            if (!(el[i] = reply_copy(hl_reply_elem(src, i)))) {
                hilock_reply_free(r);
                return NULL;
            }
        return r;
    default: return reply_new(HILOCK_REPLY_NIL, NULL, 0);
    }
}

void hilock_reply_free(hilock_reply *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->elements; i++) hilock_reply_free(r->element[i]);
    free((void *)r->element);
    free((char *)r->str);
    free(r);
}

/* ---- what the server says of a command (COMMAND INFO), kept per client ----
 * One array in the client (c->cmdinfo, c->ncmdinfo), freed with it by client.c (a plain free:
 * no call back into this file). */

enum { CI_NOSCRIPT = 1, CI_BLOCKING = 2, CI_MOVABLE = 4, CI_CONTAINER = 8, CI_NO_SPECS = 16 };
#define CI_NAME_MAX 64
#define CI_MAX 1024   /* commands and subcommands kept; past it they are asked again */

struct hl_cmdinfo {
    char name[CI_NAME_MAX];   /* lower case; a subcommand as "object|encoding" */
    int  first, last, step;   /* key positions (first 0: no keys); last < 0 counts from the end */
    int  flags;
};

static const struct hl_cmdinfo *info_find(const hilock_client *c, const char *name)
{
    for (size_t i = 0; i < c->ncmdinfo; i++)
        if (!strcmp(c->cmdinfo[i].name, name)) return &c->cmdinfo[i];
    return NULL;
}

/* Keep e (a copy); silently not when full or out of memory (it is asked again next time). */
static void info_keep(hilock_client *c, const struct hl_cmdinfo *e)
{
    struct hl_cmdinfo *a;
    if (c->ncmdinfo >= CI_MAX || info_find(c, e->name)) return;
    if (!(a = realloc(c->cmdinfo, (c->ncmdinfo + 1) * sizeof *a))) return;
    c->cmdinfo = a;
    a[c->ncmdinfo++] = *e;
}

/* Commands refused whatever the server says: older servers flag none of them blocking (the
 * flag is 7.0's), and a server without COMMAND flags nothing. A script cannot subscribe,
 * open a transaction or block; the others would change the connection or run scripts. */
static const char *const never[] = {
    "subscribe", "psubscribe", "ssubscribe", "unsubscribe", "punsubscribe", "sunsubscribe",
    "monitor", "multi", "exec", "discard", "watch", "unwatch", "blpop", "brpop", "brpoplpush",
    "blmove", "blmpop", "bzpopmin", "bzpopmax", "bzmpop", "xread", "xreadgroup", "wait", "waitaof",
    "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro", "script", "function",
    "sync", "psync", "quit", "reset", "hello", "auth", NULL};

static int never_runs(const char *name)
{
    for (int i = 0; never[i]; i++)
        if (!strcmp(never[i], name)) return 1;
    return 0;
}

/* One COMMAND INFO entry (an array) read into *i; and its subcommands (7.0+: element 9), kept
 * as "name|sub". 0, or -1: a shape that is not COMMAND INFO's. */
static int info_read(hilock_client *c, const hl_reply *e, struct hl_cmdinfo *i)
{
    const char *nm = hl_reply_str(hl_reply_elem(e, 0), NULL);
    const hl_reply *fl = hl_reply_elem(e, 2), *subs = hl_reply_elem(e, 9);
    memset(i, 0, sizeof *i);
    if (hl_reply_nelem(e) < 6 || !nm || strlen(nm) >= CI_NAME_MAX) return -1;
    for (size_t k = 0; nm[k]; k++) i->name[k] = (char)tolower((unsigned char)nm[k]);
    i->first = (int)hl_reply_int(hl_reply_elem(e, 3));
    i->last = (int)hl_reply_int(hl_reply_elem(e, 4));
    i->step = (int)hl_reply_int(hl_reply_elem(e, 5));
    for (size_t k = 0; k < hl_reply_nelem(fl); k++) {
        const char *f = hl_reply_str(hl_reply_elem(fl, k), NULL);
        if (!f) continue;
        if (!strcmp(f, "noscript")) i->flags |= CI_NOSCRIPT;
        else if (!strcmp(f, "blocking")) i->flags |= CI_BLOCKING;
        else if (!strcmp(f, "movablekeys")) i->flags |= CI_MOVABLE;
    }
    if (hl_reply_type(subs) == HL_R_ARRAY && hl_reply_nelem(subs) > 0) i->flags |= CI_CONTAINER;
    for (size_t k = 0; k < hl_reply_nelem(subs); k++) {
        struct hl_cmdinfo sub;
        if (!info_read(c, hl_reply_elem(subs, k), &sub)) info_keep(c, &sub);
    }
    return 0;
}

/* What the server says of name (lower case), into *out: from the cache, or one COMMAND INFO
 * round trip. *known 0: the server does not know the command (it will refuse it). OK, or the
 * round trip's status with errmsg set. A refused COMMAND (none before 2.8.13; an ACL) is
 * CI_NO_SPECS. */
static hilock_status info_get(hilock *l, const char *name, hl_deadline dl,
                              struct hl_cmdinfo *out, int *known)
{
    hilock_client *c = l->c;
    hl_node *n = &c->nodes[0];
    const struct hl_cmdinfo *had = info_find(c, name);
    const hl_reply *r, *e;
    hl_cmd cmd;
    *known = 1;
    if (had) {
        *out = *had;
        return HILOCK_OK;
    }
    hl_cmd_init(&cmd, NULL, 0);
    hl_cmd_arg(&cmd, "COMMAND", 7);
    hl_cmd_arg(&cmd, "INFO", 4);
    hl_cmd_arg(&cmd, name, (size_t)-1);
    if (!(hl_exec(c, 1, &cmd, 1, dl) & 1)) {
        hilock_status st = hl_fail(c, n->st, "guarded command on %s: %s; nothing ran", l->shown, n->err);
        hl_exec_clear(c);
        return st;
    }
    r = n->reply[0];
    e = hl_reply_elem(r, 0);
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", name);
    if (hl_reply_type(r) == HL_R_ERROR) {   /* no COMMAND, or not for this user */
        out->flags = CI_NO_SPECS;
        info_keep(c, out);
    } else if (hl_reply_type(e) == HL_R_ARRAY && !info_read(c, e, out)) {
        info_keep(c, out);
    } else {
        *known = 0;
    }
    hl_exec_clear(c);
    return HILOCK_OK;
}

/* ---- the call ---- */

typedef struct gcall {
    int           argc;
    const char  **argv;
    size_t       *len;      /* (argvlen, or strlen of each) */
    const char  **keys;     /* the command's keys */
    size_t       *keylen;
    int           nkeys;
    char          name[CI_NAME_MAX];   /* argv[0] in lower case ("" if longer) */
} gcall;

static void gcall_free(gcall *g)
{
    free(g->len);
    free(g->keys);
    free(g->keylen);
}

static void add_key(gcall *g, const char *k, size_t len)
{
    g->keys[g->nkeys] = k;
    g->keylen[g->nkeys++] = len;
}

/* The keys by position (first, last, step) of argv. */
static void keys_by_spec(gcall *g, const struct hl_cmdinfo *i)
{
    int last = i->last < 0 ? g->argc + i->last : i->last;
    if (i->first <= 0 || i->step <= 0) return;
    if (last >= g->argc) last = g->argc - 1;   /* (a wrong argument count: the server refuses it) */
    for (int k = i->first; k <= last; k += i->step) add_key(g, g->argv[k], g->len[k]);
}

/* 1 if node 0 of c is a Cluster (its topology routes by key). */
static int sharded(const hilock_client *c) { return c->nodes[0].topo && c->nodes[0].topo->route; }

/* A command whose keys move (ZUNIONSTORE, SORT ... STORE): COMMAND GETKEYS for this argv.
 * Returns OK (keys added: the reply, whose strings they are, is *hold until the call ends),
 * or a status with errmsg set. */
static hilock_status keys_asked(hilock *l, gcall *g, hl_deadline dl, hl_reply **hold)
{
    hilock_client *c = l->c;
    hl_node *n = &c->nodes[0];
    hl_cmd cmd;
    hilock_status st = HILOCK_OK;
    hl_cmd_init(&cmd, NULL, 0);
    hl_cmd_arg(&cmd, "COMMAND", 7);
    hl_cmd_arg(&cmd, "GETKEYS", 7);
    cmd.tail = g->argv;
    cmd.taillen = g->len;
    cmd.ntail = g->argc;
    if (!(hl_exec(c, 1, &cmd, 1, dl) & 1)) {
        st = hl_fail(c, n->st, "guarded command on %s: %s; nothing ran", l->shown, n->err);
    } else if (hl_reply_type(n->reply[0]) != HL_R_ARRAY && !sharded(c)) {
        /* (no GETKEYS before 3.0; arguments it finds wrong): one server runs the command the
         * same without its keys declared, and refuses what is wrong itself */
    } else if (hl_reply_type(n->reply[0]) != HL_R_ARRAY) {
        const char *why = hl_reply_str(n->reply[0], NULL);
        st = hl_fail(c, HILOCK_EINVAL, "guarded command on %s: the server did not say which of "
                     "%s's arguments are keys (%.200s); nothing ran", l->shown, g->name,
                     why ? why : "COMMAND GETKEYS");
    } else {
        /* kept until the call ends: its strings are the keys */
        *hold = n->reply[0];
        n->reply[0] = NULL;
        for (size_t k = 0; k < hl_reply_nelem(*hold) && g->nkeys < g->argc; k++) {
            size_t kl = 0;
            const char *ks = hl_reply_str(hl_reply_elem(*hold, k), &kl);
            if (ks) add_key(g, ks, kl);
        }
    }
    hl_exec_clear(c);
    return st;
}

/* Everything decided before the script is sent: the command's flags and keys. */
static hilock_status prepare(hilock *l, gcall *g, hl_deadline dl, hl_reply **hold)
{
    hilock_client *c = l->c;
    struct hl_cmdinfo got;
    const struct hl_cmdinfo *i = NULL;
    hilock_status st;
    unsigned lock_slot;
    int known = 0;
    if (strlen(g->argv[0]) == g->len[0] && g->len[0] < CI_NAME_MAX)
        for (size_t k = 0; k <= g->len[0]; k++) g->name[k] = (char)tolower((unsigned char)g->argv[0][k]);
    if (never_runs(g->name))
        return hl_fail(c, HILOCK_EINVAL, "guarded command on %s: %s cannot run in a script (it blocks, "
                       "subscribes, opens a transaction or changes the connection); nothing was sent",
                       l->shown, g->name);
    if (g->name[0] && (st = info_get(l, g->name, dl, &got, &known)) != HILOCK_OK) return st;
    if (known) i = &got;
    if (i && (i->flags & CI_CONTAINER) && g->argc > 1 && g->len[1] < CI_NAME_MAX - strlen(g->name) - 1) {
        char sub[CI_NAME_MAX];
        const struct hl_cmdinfo *s;
        size_t at = strlen(g->name);
        memcpy(sub, g->name, at);
        sub[at++] = '|';
        for (size_t k = 0; k < g->len[1]; k++) sub[at++] = (char)tolower((unsigned char)g->argv[1][k]);
        sub[at] = '\0';
        if ((s = info_find(c, sub))) i = s;
    }
    if (i && (i->flags & (CI_NOSCRIPT | CI_BLOCKING)))
        return hl_fail(c, HILOCK_EINVAL, "guarded command on %s: the server flags %s %s: a script "
                       "may not run it; nothing ran", l->shown, g->name,
                       i->flags & CI_NOSCRIPT ? "noscript" : "blocking");
    if (i && (i->flags & CI_NO_SPECS) && sharded(c))
        return hl_fail(c, HILOCK_EINVAL, "guarded command on %s: the server will not say which "
                       "arguments of %s are keys (COMMAND refused), which a Cluster needs; nothing ran",
                       l->shown, g->name);
    if (i && (i->flags & CI_MOVABLE)) {
        if ((st = keys_asked(l, g, dl, hold)) != HILOCK_OK) return st;
    } else if (i && !(i->flags & CI_NO_SPECS)) {
        keys_by_spec(g, i);
    }
    if (!sharded(c)) return HILOCK_OK;
    lock_slot = hl_key_slot(l->key, strlen(l->key));
    for (int k = 0; k < g->nkeys; k++) {
        unsigned s = hl_key_slot(g->keys[k], g->keylen[k]);
        char shown[HL_KEY_SHOWN_BUF];
        char *kz;
        if (s == lock_slot) continue;
        kz = malloc(g->keylen[k] + 1);
        if (kz) {
            memcpy(kz, g->keys[k], g->keylen[k]);
            kz[g->keylen[k]] = '\0';
        }
        st = hl_fail(c, HILOCK_EINVAL, "guarded command on %s: key %s hashes to slot %u, the lock's "
                     "key to slot %u: on a Cluster its keys must share the lock key's slot (give them "
                     "its {tag}); nothing ran", l->shown, kz ? hl_key_shown(kz, shown, sizeof shown) : "?",
                     s, lock_slot);
        free(kz);
        return st;
    }
    return HILOCK_OK;
}

/* guarded.lua's answer into the call's status and *reply. ran: the command ran. */
static hilock_status judge(hilock *l, const hl_reply *r, hilock_reply **reply, int *ran)
{
    hilock_client *c = l->c;
    const hl_reply *v = hl_reply_elem(r, 0), *what = hl_reply_elem(r, 1);
    long long verdict = hl_reply_type(v) == HL_R_INTEGER ? hl_reply_int(v) : -9;
    size_t len = 0;
    const char *s;
    *ran = 0;
    if (hl_reply_type(r) == HL_R_ERROR) {   /* the script itself failed: nothing ran */
        s = hl_reply_str(r, &len);
        *reply = reply_copy(r);
        return hl_fail(c, HILOCK_EREPLY, "guarded command on %s: %s: %.*s", l->shown, c->nodes[0].name,
                       (int)(len > 300 ? 300 : len), s);
    }
    if (verdict == 0 || verdict == -1) {
        l->valid_until_us = 0;
        return hl_fail(c, HILOCK_NOT_HELD, "guarded command on %s: %s; nothing ran", l->shown,
                       verdict == 0 ? "expired or released" : l->kind->taken);
    }
    if ((verdict == 1 && hl_reply_nelem(r) == 2) || (verdict == 2 && hl_reply_type(what) == HL_R_STRING)) {
        *ran = 1;
        if (verdict == 2) {
            s = hl_reply_str(what, &len);
            *reply = reply_new(HILOCK_REPLY_ERROR, s, len);
            return hl_fail(c, HILOCK_EREPLY, "guarded command on %s: it ran, but %.*s (the reply was not sent)",
                           l->shown, (int)len, s);
        }
        if (!(*reply = reply_copy(what))) return hl_fail(c, HILOCK_ENOMEM, "out of memory (the command ran)");
        if ((*reply)->type != HILOCK_REPLY_ERROR) return hl_ok(c);
        return hl_fail(c, HILOCK_EREPLY, "guarded command on %s: %.*s", l->shown,
                       (int)((*reply)->len > 300 ? 300 : (*reply)->len), (*reply)->str);
    }
    return hl_fail(c, HILOCK_EREPLY, "guarded command on %s: %s: an answer that is not the script's",
                   l->shown, c->nodes[0].name);
}

/* WAIT's answer (min_replicas): the command ran; too few acknowledgements is EREPLICAS. */
static hilock_status replicas(hilock *l, const hl_reply *w, hilock_status st)
{
    hilock_client *c = l->c;
    long long acks = hl_reply_type(w) == HL_R_INTEGER ? hl_reply_int(w) : -1;
    if (acks >= c->opt.min_replicas) return st;
    return hl_fail(c, HILOCK_EREPLICAS, "guarded command on %s: it ran, but only %lld of %d replicas "
                   "acknowledged it within %lld ms (min_replicas): a failover may lose it", l->shown,
                   acks < 0 ? 0 : acks, c->opt.min_replicas, (long long)c->opt.replicas_timeout_ms);
}

static hilock_status run(hilock *l, gcall *g, hilock_reply **reply)
{
    hilock_client *c = l->c;
    hl_node *n = &c->nodes[0];
    hl_cmd cmds[HL_MAX_CMDS];
    hl_topo_op top;
    hl_reply *hold = NULL;
    char lim[5][24], wait_arg[2][24];
    const char **tail;
    size_t *tlen;
    int ncmd = 1, wait_at = -1, ran = 0, t = 0;
    hl_deadline dl = hl_call_deadline(c, c->opt.io_timeout_ms * 1000);
    hilock_status st;
    if ((st = prepare(l, g, dl, &hold)) != HILOCK_OK) {
        hl_reply_free(hold);
        return st;
    }
    tail = malloc((size_t)(g->nkeys + 7 + g->argc) * sizeof *tail);
    tlen = malloc((size_t)(g->nkeys + 7 + g->argc) * sizeof *tlen);
    if (!tail || !tlen) {
        free(tail);
        free(tlen);
        hl_reply_free(hold);
        return hl_fail(c, HILOCK_ENOMEM, "out of memory");
    }
    hl_cmd_init(&cmds[0], &hl_lua_guarded, 1 + g->nkeys);
    hl_cmd_arg(&cmds[0], l->key, (size_t)-1);   /* KEYS[1]: routes the call (Cluster) */
    for (int k = 0; k < g->nkeys; k++, t++) {
        tail[t] = g->keys[k];
        tlen[t] = g->keylen[k];
    }
    tail[t] = l->token;
    tlen[t++] = strlen(l->token);
    tail[t] = l->kind->member ? "z" : "v";
    tlen[t++] = 1;
    /* the limits less the script's wrapper ({1, reply}: one array, two elements, ~16 bytes) */
    snprintf(lim[0], sizeof lim[0], "%d", HL_RESP_MAX_BULK);
    snprintf(lim[1], sizeof lim[1], "%d", HL_RESP_MAX_ELEMENTS);
    snprintf(lim[2], sizeof lim[2], "%d", HL_RESP_MAX_TOTAL - 2);
    snprintf(lim[3], sizeof lim[3], "%d", HL_RESP_MAX_DEPTH - 1);
    snprintf(lim[4], sizeof lim[4], "%d", HL_RESP_MAX_REPLY - 64);
    for (int k = 0; k < 5; k++, t++) {
        tail[t] = lim[k];
        tlen[t] = strlen(lim[k]);
    }
    for (int k = 0; k < g->argc; k++, t++) {
        tail[t] = g->argv[k];
        tlen[t] = g->len[k];
    }
    cmds[0].tail = tail;
    cmds[0].taillen = tlen;
    cmds[0].ntail = t;
    memset(&top, 0, sizeof top);
    top.id_at = top.wait_at = -1;
    if (l->kind->failover) ncmd = hl_topo_begin(c, hl_lock_topo(l), &top, HL_TOPO_CHECK, 0, cmds, 1, dl);
    if (c->opt.min_replicas > 0 && ncmd < HL_MAX_CMDS) {
        hl_cmd *w = &cmds[wait_at = ncmd++];
        hl_cmd_init(w, NULL, 0);
        w->need = HL_CAP_WAIT;
        hl_cmd_arg(w, "WAIT", 4);
        hl_cmd_argi(w, wait_arg[0], c->opt.min_replicas);
        hl_cmd_argi(w, wait_arg[1], c->opt.replicas_timeout_ms);
        dl.per_us = hl_add_sat(dl.per_us, c->opt.replicas_timeout_ms * 1000);
        dl.hard_us = hl_add_sat(dl.hard_us, c->opt.replicas_timeout_ms * 1000);
    }
    if (!(hl_exec(c, 1, cmds, ncmd, dl) & 1)) {
        st = hl_fail(c, n->st, "guarded command on %s: %s%s", l->shown, n->err,
                     n->wrote ? "; the command may have run" : "; nothing ran");
    } else {
        st = judge(l, n->reply[0], reply, &ran);
        if (ran && wait_at >= 0 && (st == HILOCK_OK || st == HILOCK_EREPLY))
            st = replicas(l, n->reply[wait_at], st);
        if (l->kind->failover && top.id_at >= 0) {
            hl_topo_end(c, hl_lock_topo(l), &top, hl_reply_type(n->reply[0]) == HL_R_ERROR ? 0 : 1, ran);
            if (top.lost & 1) {
                hilock_reply_free(*reply);
                *reply = NULL;
                l->valid_until_us = 0;
                st = hl_topo_lost(c, hl_lock_topo(l), ran ? "guarded command (it ran)" : "guarded command", top.lost);
            } else if ((top.failed & 1) && ran) {
                hilock_reply_free(*reply);
                *reply = NULL;
                st = hl_fail(c, n->st ? n->st : HILOCK_EIO, "guarded command on %s: it ran, but whether the "
                             "lock survived a failover could not be read: %s", l->shown, n->err);
            }
        }
    }
    hl_exec_clear(c);
    hl_reply_free(hold);
    free(tail);
    free(tlen);
    return st;
}

/* What the caller passed: EINVAL with the message, or OK (g filled). */
static hilock_status check_args(hilock *l, int argc, const char **argv, const size_t *argvlen,
                                hilock_reply **reply, gcall *g)
{
    hilock_client *c = l->c;
    memset(g, 0, sizeof *g);
    if (!reply) return hl_fail(c, HILOCK_EINVAL, "guarded command: reply is NULL");
    if (!argv) return hl_fail(c, HILOCK_EINVAL, "guarded command: argv is NULL");
    if (argc < 1 || argc > HILOCK_GUARDED_MAX_ARGS)
        return hl_fail(c, HILOCK_EINVAL, "guarded command: argc is %d (1 to %d)", argc, HILOCK_GUARDED_MAX_ARGS);
    for (int k = 0; k < argc; k++)
        if (!argv[k]) return hl_fail(c, HILOCK_EINVAL, "guarded command: argv[%d] is NULL", k);
    if (!argvlen && argv[0][0] == '\0') return hl_fail(c, HILOCK_EINVAL, "guarded command: no command name");
    if (l->released)
        return hl_fail(c, HILOCK_NOT_HELD, "guarded command on %s: the lock was released; nothing was sent",
                       l->shown);
    if (c->nnodes > 1)
        return hl_fail(c, HILOCK_EINVAL, "guarded command on %s: the lock is on %zu masters (Redlock), "
                       "and one script cannot run on all of them at once: guard with one master",
                       l->shown, c->nnodes);
    if (!l->kind->undo_unknown)
        return hl_fail(c, HILOCK_EINVAL, "guarded command on %s: a %s lock's value is a timestamp "
                       "another client may write byte for byte, so finding it proves nothing: guard "
                       "with hilock_acquire's lock", l->shown, l->kind->name);
    g->argc = argc;
    g->argv = argv;
    g->len = malloc((size_t)argc * sizeof *g->len);
    g->keys = malloc((size_t)argc * sizeof *g->keys);
    g->keylen = malloc((size_t)argc * sizeof *g->keylen);
    if (!g->len || !g->keys || !g->keylen) return hl_fail(c, HILOCK_ENOMEM, "out of memory");
    for (int k = 0; k < argc; k++) g->len[k] = argvlen ? argvlen[k] : strlen(argv[k]);
    return HILOCK_OK;
}

hilock_status hilock_guarded_command(hilock *l, int argc, const char **argv, const size_t *argvlen,
                                     hilock_reply **reply)
{
    hilock_status st;
    gcall g;
    int took;
    if (reply) *reply = NULL;
    if (!l) return HILOCK_EINVAL;
    if ((st = hl_enter(l->c, &took)) != HILOCK_OK) return st;
    if (hl_check_fork(l->c) != HILOCK_OK) return hl_leave(l->c, took, HILOCK_EINVAL);
    if ((st = check_args(l, argc, argv, argvlen, reply, &g)) == HILOCK_OK) {
        if (l->hook) l->hook(l, HL_HOOK_BEGIN);   /* (turns with a keepalive's renewals) */
        st = run(l, &g, reply);
        if (l->hook) l->hook(l, HL_HOOK_END);
    }
    gcall_free(&g);
    return hl_leave(l->c, took, st);
}
