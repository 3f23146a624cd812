/* SPDX-License-Identifier: BSD-3-Clause */
/* break.c -- hilock_break (include/hilock_inspect.h): an operator removes a stuck holder.
 *
 * The look is hilock_inspect's own (the same view `hilock inspect` prints), so what is shown
 * and what is compared are one reading. Each master then runs break.lua once, which compares
 * the key with that reading in the same step as the removal: a holder granted, released or
 * expired in between (the operator may take a while to say yes) is never removed unseen. The
 * comparison is of identity -- the string's value, the zset's kind and live holders -- not of
 * expiries, which a keepalive moves every third of a ttl. The fence counter is only read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock.h"
#include "hilock_inspect.h"

/* generated from src/lua/break.lua */
extern const hl_script hl_lua_break;

enum { P_NONE, P_STRING, P_ZSET };

/* What one master showed, and so what may be removed there. */
typedef struct plan {
    int         what;                             /* P_NONE: nothing to remove here         */
    const char *kind;                             /* the report's kind                      */
    char        value[HILOCK_VIEW_VALUE_MAX + 1]; /* P_STRING: the whole value; P_ZSET: marker */
    size_t      value_len;
    char       *tokens;                           /* P_ZSET, all: live holders '\n'-joined  */
    size_t      tokens_len;
    int         looked, sent, failed;
    hilock_break_report rep;
} plan;

typedef struct breaking {
    hilock_client    *c;
    const char       *key, *token;
    const char       *shown;                      /* the key as messages show it */
    char              shown_buf[HL_KEY_SHOWN_BUF];
    hilock_inspect_fn show;
    void             *arg;
    plan             *p;
    int               refused, oom;
    char              why[300];                   /* the first refusal */
} breaking;

/* ---- what counts as a lock (the refusal of anything else changes nothing) ---- */

static int is_digit(char ch) { return ch >= '0' && ch <= '9'; }

/* hilock's token: 32 lowercase hex digits (lock.c) */
static int is_token(const char *v, size_t n)
{
    if (n != 32) return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_digit(v[i]) && !(v[i] >= 'a' && v[i] <= 'f')) return 0;
    return 1;
}

static size_t digits(const char *v, size_t i, size_t n)
{
    size_t s = i;
    while (i < n && is_digit(v[i])) i++;
    return i - s;
}

/* Every preset's stamp shape (legacy/codec.c): digits [.digits] [-digits[-digits]]. The shape
 * only: the lock layer does not call the codecs, and a shape is all a refusal needs. */
static int is_stamp(const char *v, size_t n)
{
    size_t i = digits(v, 0, n), d;
    if (!i || n >= HILOCK_CODEC_MAX) return 0;
    if (i < n && v[i] == '.') {
        if (!(d = digits(v, i + 1, n))) return 0;
        i += 1 + d;
    }
    for (int g = 0; g < 2 && i < n && v[i] == '-'; g++) {
        if (!(d = digits(v, i + 1, n))) return 0;
        i += 1 + d;
    }
    return i == n;
}

/* A hilock aux key ({key}:fence, ...: a tag closes before the suffix): never a lock. */
static int is_aux_key(const char *k)
{
    static const char *const aux[] = { ":fence", ":waiters", ":signal", ":holder", ":holders", ":wq",
                                       ":xsignal", ":ssignal", ":watch", ":fq", ":fb" };
    size_t n = strlen(k);
    const char *fs = strstr(k, ":fs:");
    if (fs && memchr(k, '}', (size_t)(fs - k))) return 1;   /* a fair waiter's own list */
    for (size_t i = 0; i < sizeof aux / sizeof aux[0]; i++) {
        size_t l = strlen(aux[i]);
        if (n > l && !strcmp(k + n - l, aux[i]) && memchr(k, '}', n - l)) return 1;
    }
    return 0;
}

static hilock_status check_token(hilock_client *c, const char *t)
{
    size_t n;
    if (!t) return HILOCK_OK;
    if (!(n = strlen(t))) return hl_fail(c, HILOCK_EINVAL, "break: token is empty (NULL breaks every holder)");
    if (n > HILOCK_VIEW_VALUE_MAX)
        return hl_fail(c, HILOCK_EINVAL, "break: token is longer than %d bytes: no holder has it", HILOCK_VIEW_VALUE_MAX);
    for (size_t i = 0; i < n; i++)
        if (t[i] <= ' ' || t[i] > '~')
            return hl_fail(c, HILOCK_EINVAL, "break: token has a blank, control or non-ASCII byte at %zu: "
                           "no holder has it", i);
    return HILOCK_OK;
}

/* ---- step 1: the look ---- */

static void refuse(breaking *b, size_t master, const char *what)
{
    if (!b->refused++)
        snprintf(b->why, sizeof b->why, "break: %s on %s %s: not a lock hilock or a legacy recipe wrote; "
                 "nothing removed", b->shown, hilock_client_master_name(b->c, master), what);
}

/* The live holders of a zset view, '\n'-joined, into p->tokens. */
static int join_holders(plan *p, const hilock_lock_view *v)
{
    size_t len = 0;
    char *s;
    for (size_t i = 0; i < v->nholder; i++) len += v->holder[i].token_len + 1;
    if (!(s = p->tokens = malloc(len + 1))) return 0;
    for (size_t i = 0; i < v->nholder; i++) {
        memcpy(s, v->holder[i].token, v->holder[i].token_len);
        s += v->holder[i].token_len;
        *s++ = '\n';
    }
    *s = '\0';
    p->tokens_len = len;
    return 1;
}

static void plan_string(breaking *b, size_t master, plan *p, const hilock_key_view *k)
{
    if (k->value_size != (int64_t)k->value_len || memchr(k->value, '\0', k->value_len) ||
        !(is_token(k->value, k->value_len) || is_stamp(k->value, k->value_len))) {
        refuse(b, master, "holds a string");
        return;
    }
    p->kind = is_token(k->value, k->value_len) ? "lock" : "legacy";
    if (b->token && (strlen(b->token) != k->value_len || memcmp(b->token, k->value, k->value_len))) return;
    memcpy(p->value, k->value, k->value_len);
    p->value_len = k->value_len;
    p->what = P_STRING;
}

static void plan_zset(breaking *b, plan *p, const hilock_lock_view *v)
{
    int held = 0;
    p->kind = v->kind;
    for (size_t i = 0; b->token && i < v->nholder; i++)
        held |= v->holder[i].token_len == strlen(b->token) && !memcmp(v->holder[i].token, b->token, strlen(b->token));
    if (b->token && !held) return;
    if (!b->token && !join_holders(p, v)) {
        b->oom = 1;
        return;
    }
    memcpy(p->value, v->key.value, v->key.value_len);   /* the marker */
    p->value_len = v->key.value_len;
    p->what = P_ZSET;
}

static void on_look(size_t master, const hilock_lock_view *v, const char *error, void *arg)
{
    breaking *b = arg;
    plan *p = &b->p[master];
    if (b->show) b->show(master, v, error, b->arg);
    if (!v) return;
    p->looked = 1;
    p->rep.fence = v->fence;
    if (!strcmp(v->key.type, "none")) return;
    if (!strcmp(v->key.type, "string")) {
        plan_string(b, master, p, &v->key);
    } else if (v->kind && (!strcmp(v->kind, "semaphore") || !strcmp(v->kind, "rwlock")) &&
               v->nholder == (size_t)(v->holders > 0 ? v->holders : 0)) {
        plan_zset(b, p, v);
    } else {
        char what[64];
        snprintf(what, sizeof what, "holds a %.40s", v->key.type);
        refuse(b, master, what);
    }
}

/* ---- step 3: the removal ---- */

#define NKEYS 9

static int same_plan(const plan *a, const plan *o)
{
    return a->what == o->what && a->value_len == o->value_len && !memcmp(a->value, o->value, a->value_len) &&
           a->tokens_len == o->tokens_len && (!a->tokens_len || !memcmp(a->tokens, o->tokens, a->tokens_len));
}

/* {ok, removed, left, records, woken, fence|nil} into p->rep; 0 if not that shape */
static int read_reply(const hl_reply *r, plan *p)
{
    const hl_reply *f = hl_reply_elem(r, 5);
    if (hl_reply_type(r) != HL_R_ARRAY || hl_reply_nelem(r) != 6) return 0;
    for (size_t i = 0; i < 5; i++)
        if (hl_reply_type(hl_reply_elem(r, i)) != HL_R_INTEGER) return 0;
    if (hl_reply_type(f) != HL_R_NIL && hl_reply_type(f) != HL_R_STRING) return 0;
    p->rep.outcome = hl_reply_int(hl_reply_elem(r, 0)) == 1 ? "removed" : "changed";
    p->rep.kind = p->kind;
    p->rep.removed = hl_reply_int(hl_reply_elem(r, 1));
    p->rep.left = hl_reply_int(hl_reply_elem(r, 2));
    p->rep.records = hl_reply_int(hl_reply_elem(r, 3));
    p->rep.woken = hl_reply_int(hl_reply_elem(r, 4));
    if (hl_reply_type(f) == HL_R_STRING) p->rep.fence = strtoll(hl_reply_str(f, NULL), NULL, 10);
    return 1;
}

/* The masters with the same plan as master i, at once (one round trip); their outcomes in
 * their plans. */
static void remove_on(breaking *b, size_t i, char *const *aux, const char *base)
{
    hilock_client *c = b->c;
    plan *p = &b->p[i];
    hl_cmd cmd;
    char a_life[24];
    uint32_t mask = 0, ok;
    int64_t io = c->opt.io_timeout_ms * 1000;
    for (size_t j = i; j < c->nnodes; j++)
        if (!b->p[j].sent && b->p[j].what != P_NONE && same_plan(p, &b->p[j])) {
            mask |= 1u << j;
            b->p[j].sent = 1;
        }
    hl_cmd_init(&cmd, &hl_lua_break, NKEYS);
    hl_cmd_arg(&cmd, b->key, (size_t)-1);
    for (int k = 0; k < NKEYS - 1; k++) hl_cmd_arg(&cmd, aux[k], (size_t)-1);
    hl_cmd_arg(&cmd, p->what == P_STRING ? "string" : "zset", (size_t)-1);
    hl_cmd_arg(&cmd, p->value, p->value_len);
    hl_cmd_arg(&cmd, b->token && p->what == P_ZSET ? b->token : "", (size_t)-1);
    hl_cmd_arg(&cmd, p->tokens ? p->tokens : "", p->tokens_len);
    hl_cmd_arg(&cmd, base, (size_t)-1);
    /* a fair head's wake-up: as long as fair.c lets an entry live past its waiter's call */
    hl_cmd_argi(&cmd, a_life, 2 * c->opt.io_timeout_ms + c->opt.poll_ms + c->opt.retry_delay_ms);
    ok = hl_exec(c, mask, &cmd, 1, hl_call_deadline(c, io));
    for (size_t j = 0; j < c->nnodes; j++) {
        hl_node *n = &c->nodes[j];
        if (!(mask & (1u << j))) continue;
        if ((ok & (1u << j)) && hl_reply_type(n->reply[0]) == HL_R_ERROR) {
            hl_node_reply_error(n, n->reply[0]);
        } else if ((ok & (1u << j)) && !read_reply(n->reply[0], &b->p[j])) {
            n->st = HILOCK_EREPLY;
            snprintf(n->err, sizeof n->err, "%s: break: unexpected reply", n->name);
        } else if (ok & (1u << j)) {
            continue;
        }
        if (n->st == HILOCK_OK) n->st = HILOCK_EREPLY;
        b->p[j].failed = 1;
    }
    hl_exec_clear(c);
}

/* Step 3 on every master that holds something; then done per master. */
static hilock_status remove_all(breaking *b, hilock_break_fn done, void *arg)
{
    static const char *const suffix[NKEYS - 1] = { ":fence", ":waiters", ":signal", ":holder", ":holders",
                                                   ":wq", ":fq", ":fb" };
    hilock_client *c = b->c;
    char *aux[NKEYS - 1], *base = hl_aux_key(b->key, "");
    hilock_status st = HILOCK_OK;
    uint32_t failed = 0;
    size_t changed = 0;
    int missing = !base;
    for (int k = 0; k < NKEYS - 1; k++) missing |= !(aux[k] = hl_aux_key(b->key, suffix[k]));
    if (!missing)
        for (size_t i = 0; i < c->nnodes; i++)
            if (!b->p[i].sent && b->p[i].what != P_NONE) remove_on(b, i, aux, base);
    for (int k = 0; k < NKEYS - 1; k++) free(aux[k]);
    free(base);
    if (missing) return hl_fail(c, HILOCK_ENOMEM, "out of memory");
    for (size_t i = 0; i < c->nnodes; i++) {
        plan *p = &b->p[i];
        if (p->failed) {
            failed |= 1u << i;
            if (st == HILOCK_OK) st = c->nodes[i].st;
        } else if (p->what == P_NONE) {
            p->rep.outcome = "none";
            p->rep.kind = NULL;
        } else if (!strcmp(p->rep.outcome, "changed")) {
            changed++;
        }
        if (done) done(i, p->failed ? NULL : &p->rep, p->failed ? c->nodes[i].err : NULL, arg);
    }
    if (st != HILOCK_OK) return hl_fail_nodes(c, st, failed, "break: ");
    if (changed)
        return hl_fail(c, HILOCK_BUSY, "break: %s changed on %zu of %zu master(s) since it was shown: nothing "
                       "removed there (look again)", b->shown, changed, c->nnodes);
    return hl_ok(c);
}

static hilock_status break_in(breaking *b, hilock_confirm_fn confirm, hilock_break_fn done, void *arg)
{
    hilock_client *c = b->c;
    hilock_status st;
    int any = 0, looked = 1;
    if (hl_check_key(c, b->key) != HILOCK_OK) return HILOCK_EINVAL;
    b->shown = hl_key_shown(b->key, b->shown_buf, sizeof b->shown_buf);
    if ((st = check_token(c, b->token)) != HILOCK_OK) return st;
    if (is_aux_key(b->key))
        return hl_fail(c, HILOCK_EINVAL, "break: %s is a hilock aux key, not a lock: break the lock it serves",
                       b->shown);
    if ((st = hilock_inspect(c, b->key, on_look, b)) != HILOCK_OK) {
        char why[sizeof c->errmsg];
        snprintf(why, sizeof why, "%s", hilock_client_errmsg(c));
        return hl_fail(c, st, "%s; nothing removed", why);
    }
    if (b->oom) return hl_fail(c, HILOCK_ENOMEM, "out of memory");
    if (b->refused) return hl_fail(c, HILOCK_EINVAL, "%s", b->why);
    for (size_t i = 0; i < c->nnodes; i++) {
        any |= b->p[i].what != P_NONE;
        looked &= b->p[i].looked;
    }
    if (!looked) return hl_fail(c, HILOCK_EREPLY, "break: a master's view is missing; nothing removed");
    if (!any)
        return b->token ? hl_fail(c, HILOCK_NOT_HELD, "break: %s: no holder has token %s; nothing removed", b->shown,
                                  b->token)
                        : hl_fail(c, HILOCK_NOT_HELD, "break: %s: no such key; nothing to remove", b->shown);
    if (confirm && !confirm(arg)) return hl_fail(c, HILOCK_ECANCELED, "break: not confirmed; nothing removed");
    return remove_all(b, done, arg);
}

hilock_status hilock_break(hilock_client *c, const char *key, const char *token, hilock_inspect_fn show,
                           hilock_confirm_fn confirm, hilock_break_fn done, void *arg)
{
    breaking b;
    hilock_status st;
    int took;
    if (!c) return HILOCK_EINVAL;
    if ((st = hl_enter(c, &took)) != HILOCK_OK) return st;
    memset(&b, 0, sizeof b);
    b.c = c;
    b.key = key;
    b.token = token;
    b.show = show;
    b.arg = arg;
    if (!(b.p = calloc(c->nnodes ? c->nnodes : 1, sizeof *b.p)))
        return hl_leave(c, took, hl_fail(c, HILOCK_ENOMEM, "out of memory"));
    for (size_t i = 0; i < c->nnodes; i++) b.p[i].rep.fence = -1;
    st = break_in(&b, confirm, done, arg);
    for (size_t i = 0; i < c->nnodes; i++) free(b.p[i].tokens);
    free(b.p);
    return hl_leave(c, took, st);
}
