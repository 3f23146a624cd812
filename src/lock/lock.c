/* SPDX-License-Identifier: BSD-3-Clause */
/* lock.c -- the quorum logic every lock kind runs: the acquire loop and one attempt, release,
 * extend and check, over 1..N masters (one master is the N = 1 case of the same quorum logic,
 * so Redlock is a change of configuration, not of code): tallies, quorum, undo of partial or
 * unknown writes, Redlock fencing, validity and the errors. Also the verdicts that read the
 * scripts' answers, and the lock API of include/hilock.h except hilock_acquire (src/api/).
 *
 * What differs between kinds (commands, a busy answer, validity) comes from the lock's table
 * (l->kind, kind.h); this file names no kind. It calls the engine and topology (lock.h)
 * and, through one hook in the lock (l->hook), the layer that shares a lock with another
 * thread (keepalive.c), whose name it does not know. */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kind.h"

/* Per-node timeout: a round trip on one master may use io_timeout_ms; with N masters each
 * gets ~5% of the ttl (at least 5 ms) so one slow master cannot eat the validity. */
static int64_t node_timeout_us(const hilock_client *c, int64_t ttl_ms)
{
    int64_t io = c->opt.io_timeout_ms * 1000;
    int64_t share = ttl_ms * 50;   /* 5% of ttl, in us */
    if (c->nnodes == 1) return io;
    if (share < 5000) share = 5000;
    return share < io ? share : io;
}

/* An acquire's time (or an operation's on a ttl of ttl_ms): each round trip its per-node
 * timeout, none past hard_us. */
static hl_deadline lock_dl(const hilock_client *c, int64_t ttl_ms, int64_t hard_us)
{
    return hl_deadline_of(node_timeout_us(c, ttl_ms), hard_us);
}

static int popcount(uint32_t m) { return __builtin_popcount(m); }

const char *hl_busy_ttl(const hilock *l, const hl_reply *r, char *buf, size_t cap)
{
    const hl_reply *n = hl_reply_type(r) == HL_R_ARRAY ? hl_reply_elem(r, 1) : r;
    long long ms = hl_pttl_ok(n) ? hl_reply_int(n) : -2;
    const char *k = l->shown;
    char d[HL_MS_SHOWN_BUF];
    if (ms == -1)   /* a legacy stamp or a stray value: waiting for it may never end */
        snprintf(buf, cap, "; %s" HL_NO_TTL "it will never expire by itself (see hilock inspect %s; hilock break "
                 "removes it)", k, k);
    else if (ms >= 0)
        snprintf(buf, cap, ", expires in %s", hl_ms_shown(ms, d, sizeof d));
    else
        buf[0] = '\0';
    return buf;
}

/* What each master said in one round trip, as masks (bit i = node i). */
typedef struct tally {
    uint32_t yes, gone, other;  /* ours (acquire: granted) / no key / another value (acquire: busy) */
    uint32_t failed;            /* no answer: connect, timeout, broken connection */
    uint32_t errs;              /* answered with an error: WRONGTYPE, NOPERM, refused AUTH, ... */
    uint32_t lost;              /* answered, but no proof the lock survived a failover (topology.c) */
    uint32_t maybe;             /* acquire: answered with an error after the script ran: it may
                                   have written before failing (a write after TIME before 5.0,
                                   an ACL refusing its second key): undone by token at once */
    hilock_status err;          /* the status of one of the errs */
    uint32_t named;             /* errs whose WRONGTYPE types.lua has worded (name_wrong_types) */
    long long num[32];          /* the number in the reply: acquire fence or pttl, check pttl */
    int64_t kept;               /* acquire, one master granted: hl_acquire_kept of its answer */
} tally;

typedef enum reply_kind { R_ACQUIRE, R_TRISTATE, R_CHECK } reply_kind;

static tally tally_replies(const hilock *l, uint32_t mask, uint32_t ok, reply_kind kind)
{
    hilock_client *c = l->c;
    hl_verdict (*acquire_verdict)(const hl_reply *, uint64_t *, long long *) = hl_kind_verdict(l);
    tally t;
    memset(&t, 0, sizeof t);
    t.kept = -1;
    for (size_t i = 0; i < c->nnodes; i++) {
        uint32_t bit = 1u << i;
        hl_node *n = &c->nodes[i];
        uint64_t fence = 0;
        hl_verdict v;
        if (!(mask & bit)) continue;
        if (!(ok & bit)) {
            if (n->st == HILOCK_EIO || n->st == HILOCK_ETIMEDOUT || n->st == HILOCK_ENOMEM) {
                t.failed |= bit;
            } else {   /* a refused handshake (AUTH, SELECT): an answer, and a final one */
                t.errs |= bit;
                t.err = n->st;
            }
            continue;
        }
        if (kind == R_ACQUIRE) v = acquire_verdict(n->reply[0], &fence, &t.num[i]);
        else if (kind == R_CHECK) v = hl_check_pttl_verdict(n->reply[0], &t.num[i]);
        else v = hl_tristate_verdict(n->reply[0]);
        switch (v) {
        case HL_V_OURS:
            t.yes |= bit;
            if (kind == R_ACQUIRE) t.num[i] = (long long)fence;
            if (kind == R_ACQUIRE && c->nnodes == 1) t.kept = hl_acquire_kept(n->reply[0]);
            break;
        case HL_V_GONE:  t.gone |= bit; break;
        case HL_V_OTHER: t.other |= bit; break;
        default:
            t.err = hl_node_reply_error(n, n->reply[0]);
            t.errs |= bit;
        }
    }
    return t;
}

/* Redlock: each master's answer in one round trip, as MEMBER events (hilock_observe.h). */
static void member_events(const hilock *l, const tally *t, hilock_event_kind op)
{
    hilock_client *c = l->c;
    for (size_t i = 0; HL_OBSERVED(c) && c->nnodes > 1 && i < c->nnodes; i++) {
        uint32_t bit = 1u << i;
        hilock_event e;
        hilock_status st = t->yes & bit ? HILOCK_OK : t->other & bit ? HILOCK_BUSY
                         : t->gone & bit ? HILOCK_NOT_HELD : c->nodes[i].st ? c->nodes[i].st : t->err;
        hl_event_init(&e, HILOCK_EVENT_MEMBER, l->key, strlen(l->key), c->nodes[i].name, st, -1);
        e.lock_kind = l->kind_name;
        if (op != HILOCK_EVENT_ACQUIRE_START && st == HILOCK_BUSY) e.status = HILOCK_NOT_HELD;
        e.op = op;
        hl_emit(c, &e);
    }
}

/* What a key of Redis type kt holds, as a message names it ("a semaphore", "hash"), from
 * types.lua's answer (mark: the kind a sorted set's marker names); NULL: nothing. */
static const char *kind_found(const char *kt, const char *mark)
{
    if (!kt || !strcmp(kt, "none")) return NULL;
    if (!strcmp(kt, "string")) return "a lock";   /* a plain lock, or a legacy stamp */
    if (!strcmp(kt, "zset") && mark && !strcmp(mark, "sem")) return "a semaphore";
    if (!strcmp(kt, "zset") && mark && !strcmp(mark, "rw")) return "a shared/exclusive lock";
    return kt;
}

/* A WRONGTYPE answer comes from inside a script, with its SHA and line number: ask the
 * masters that gave one what the key and its fence counter hold (types.lua; on this error
 * path only, one round trip within dl) and say that instead: "KEY holds a hash, not a lock". A master
 * that does not answer keeps the server's words. Each master is asked once (t->named).
 * taken (release, extend, check): a key that now holds another of hilock's kinds (a
 * semaphore, a shared/exclusive lock: its marker says so) was taken by another owner after
 * our value expired; that master counts as `other` (NOT_HELD, "now held by another owner"),
 * not as an error -- a plain lock whose key readers took after it expired is lost, not
 * broken. A key of a foreign type stays an error. */
static void name_wrong_types(hilock *l, tally *t, int taken, hl_deadline dl)
{
    hilock_client *c = l->c;
    typedef struct said { char err[sizeof c->nodes[0].err]; hilock_status st; } said;
    said *was;   /* what each master said, kept for one that does not answer (heap: a flow's
                    stack is small) */
    char shown[HL_KEY_SHOWN_BUF];
    uint32_t mask = 0, ok;
    hl_cmd cmd;
    hl_deadline q = hl_one_round(lock_dl(c, l->ttl_ms, dl.hard_us), hl_now_us());
    for (size_t i = 0; i < c->nnodes; i++)
        if ((t->errs & ~t->named & (1u << i)) && strstr(c->nodes[i].err, "WRONGTYPE")) mask |= 1u << i;
    t->named |= mask;
    if (!mask || dl.hard_us <= hl_now_us() || !(was = malloc(c->nnodes * sizeof *was))) return;
    for (size_t i = 0; i < c->nnodes; i++) {
        memcpy(was[i].err, c->nodes[i].err, sizeof was[i].err);
        was[i].st = c->nodes[i].st;
    }
    hl_cmd_init(&cmd, &hl_lua_types, 2);
    hl_cmd_arg(&cmd, l->key, (size_t)-1);
    hl_cmd_arg(&cmd, l->fence_key ? l->fence_key : l->key, (size_t)-1);
    ok = hl_exec(c, mask, &cmd, 1, q);
    for (size_t i = 0; i < c->nnodes; i++) {
        hl_node *n = &c->nodes[i];
        const hl_reply *r = (ok & (1u << i)) && hl_reply_nelem(n->reply[0]) >= 2 ? n->reply[0] : NULL;
        const char *kt = hl_reply_str(hl_reply_elem(r, 0), NULL), *ft = hl_reply_str(hl_reply_elem(r, 1), NULL);
        const char *found = kind_found(kt, hl_reply_str(hl_reply_elem(r, 2), NULL));
        const char *want = hl_kind_what(l);
        const char *mark = hl_reply_str(hl_reply_elem(r, 2), NULL);
        if (!(mask & (1u << i))) continue;
        n->st = was[i].st;
        if (taken && mark && found && strcmp(found, want)) {   /* (found: NULL for a hostile reply) */
            t->errs &= ~(1u << i);
            t->other |= 1u << i;
            continue;
        }
        if (found && strcmp(found, want) && !(l->kind->plain_holder && !strcmp(kt, "string")))
            snprintf(n->err, sizeof n->err, "%.40s: WRONGTYPE: %.80s holds %s%.24s, not %.24s", n->name,
                     l->shown, strncmp(found, "a ", 2) ? "a " : "", found, want);
        else if (ft && l->fence_key && strcmp(ft, "string") && strcmp(ft, "none"))
            snprintf(n->err, sizeof n->err, "%.40s: WRONGTYPE: its fence counter %.80s holds a %.20s, not a number",
                     n->name, hl_key_shown(l->fence_key, shown, sizeof shown), ft);
        else
            memcpy(n->err, was[i].err, sizeof n->err);
    }
    hl_exec_clear(c);
    free(was);
}

/* A round trip that could not decide. One master: its own error, as it is. Several: the
 * error replies when they alone rule out a quorum (WRONGTYPE everywhere is not cured by
 * waiting), else ENOQUORUM. errmsg names every master that failed and why:
 * "<what>no quorum (...): 127.0.0.1:7001: connect: Connection refused; 127.0.0.1:7002: ..."
 * dl: the call's, for a WRONGTYPE's question (name_wrong_types). */
static hilock_status undecided(hilock *l, tally *t, const char *what,
                               const char *counted, int count, hl_deadline dl)
{
    hilock_client *c = l->c;
    char pre[160];
    name_wrong_types(l, t, 0, dl);
    uint32_t named = t->failed | t->errs | t->other;   /* nodes without an err text are skipped */
    if (c->nnodes == 1)
        return hl_fail(c, t->errs ? t->err : c->nodes[0].st, "%s%s", what, c->nodes[0].err);
    if ((size_t)popcount(t->errs) > c->nnodes - c->quorum) return hl_fail_nodes(c, t->err, named, what);
    snprintf(pre, sizeof pre, "%sno quorum (%s %d of %zu masters, %zu needed): ", what, counted,
             count, c->nnodes, c->quorum);
    return hl_fail_nodes(c, HILOCK_ENOQUORUM, named, pre);
}

/* Delete our value on the nodes in mask (partial or expired grants), all at once. A node
 * that does not answer gets an undo, sent first on the next contact -- for a value that is
 * ours alone (kind.h: undo_unknown). A legacy stamp is not (two clients may write the same
 * one in the same tick): run later, its undo could delete a peer's grant, so it is left to
 * expire as the recipe judges it. */
static void undo_on(hilock *l, uint32_t mask, int64_t ttl_ms, hl_deadline dl)
{
    hilock_client *c = l->c;
    hl_cmd cmd;
    uint32_t ok;
    hl_kind_buf b;
    if (!mask) return;
    hl_kind_undo_cmd(l, &cmd, &b);
    ok = hl_exec(c, mask, &cmd, 1, hl_one_round(dl, hl_now_us()));
    for (size_t i = 0; i < c->nnodes; i++)
        if ((mask & (1u << i)) && !(ok & (1u << i)) && l->kind->undo_unknown)
            hl_undo_add(c, i, l->key, l->token, ttl_ms);
    hl_exec_clear(c);
}

/* Redlock fencing. Each granted master's counter makes a token with that master's epoch in
 * the high bits (hl_topo_fence: Sentinel, Cluster; a direct master's is the counter); the
 * lock's token is the largest. A quorum must hold a counter >= that whole token, epoch bits
 * and all, so that any later quorum (which shares a master with this one) mints a larger
 * one even without the epoch member: a counter of n mints n + 1, whose token is >= n + 1.
 * (Raised only to the bare counter c while the token was 1 << 42 | c, the quorum let the
 * next one, without the Sentinel member, mint c + 15.) Masters below it are raised, all at
 * once; nothing is sent when a quorum already returned it (so in most grants: the counters
 * of masters that granted the same locks move together). One master: nothing either, its
 * next grant is on it again and its epoch never goes back, so its counter stays a bare
 * counter as it always was. fence_record returns the masters known to hold a counter >=
 * fence. */
static uint64_t fence_of(const hilock *l, const tally *t)
{
    uint64_t fence = 0, f;
    for (size_t i = 0; i < l->c->nnodes; i++)
        if ((t->yes & (1u << i)) && (f = hl_topo_fence(l->c, &l->topo, i, (uint64_t)t->num[i])) > fence)
            fence = f;
    return fence;
}

static uint32_t fence_record(hilock *l, const tally *t, uint64_t fence, hl_deadline dl)
{
    hilock_client *c = l->c;
    hl_cmd cmd;
    char a_fence[24], a_keep[24], a_epoch_keep[24];
    uint32_t have = 0, low = 0, ok;
    if (c->nnodes == 1) return t->yes;
    for (size_t i = 0; i < c->nnodes; i++)
        if (t->yes & (1u << i)) {
            if ((uint64_t)t->num[i] >= fence) have |= 1u << i;
            else low |= 1u << i;
        }
    if ((size_t)popcount(have) >= c->quorum) return have;
    hl_cmd_init(&cmd, &hl_lua_fence_raise, 1);
    hl_cmd_arg(&cmd, l->fence_key, (size_t)-1);
    hl_cmd_argi(&cmd, a_fence, (long long)fence);
    hl_cmd_argi(&cmd, a_keep, l->ttl_ms + HL_FENCE_KEEP_MS);
    hl_cmd_argi(&cmd, a_epoch_keep, l->ttl_ms + HL_FENCE_EPOCH_KEEP_MS);
    hl_cmd_argclock(&cmd);   /* this master's clock: a raised counter is kept its lead too */
    ok = hl_exec(c, low, &cmd, 1, dl);
    for (size_t i = 0; i < c->nnodes; i++) {
        hl_reply *r = c->nodes[i].reply[0];
        if (!(low & ok & (1u << i))) continue;
        if (hl_reply_type(r) == HL_R_INTEGER) have |= 1u << i;
        else hl_node_reply_error(&c->nodes[i], r);
    }
    hl_exec_clear(c);
    return have;
}

/* l->spent: why the next attempt needs a new token (fresh_token) */
#define SPENT_LANDED  1   /* our value landed and was given back (or its undo is queued) */
#define SPENT_UNKNOWN 2   /* a write whose fate is unknown: it may still land, after its undo */

#define HL_TOKEN_LEN 32   /* hex digits of a token: fresh random ones, then the client's tag */
#define HL_STALE_MAX 4    /* earlier tokens of one acquire undone again when it finds the key busy */

/* A new token into l->token (room for HILOCK_CODEC_MAX): 10 fresh random bytes, then the
 * client's tag (base.h: HL_TAG_LEN), which names the client's holder record. Two holders'
 * tokens differ in 80 fresh bits at least: one tag is one client. -1: no random bytes. */
static int new_token(hilock_client *c, hilock *l)
{
    unsigned char raw[(HL_TOKEN_LEN - HL_TAG_LEN) / 2];
    if (hl_client_random(c, raw, sizeof raw) < 0) return -1;
    hl_hex(l->token, raw, sizeof raw);
    memcpy(l->token + HL_TOKEN_LEN - HL_TAG_LEN, c->tag, HL_TAG_LEN + 1);
    return 0;
}

static hilock *lock_new(hilock_client *c, const char *key, int64_t ttl_ms)
{
    hilock *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->key = hl_strdup(key);
    if (hl_key_shown(key, l->shown, sizeof l->shown) == key) snprintf(l->shown, sizeof l->shown, "%s", key);
    l->fence_key = hl_aux_key(key, ":fence");
    l->signal_key = hl_aux_key(key, ":signal");     /* wake-up: see wait.c */
    l->waiters_key = hl_aux_key(key, ":waiters");
    l->holder_key = hl_aux_key(key, ":holder");     /* kind.h: holder */
    l->token = malloc(HILOCK_CODEC_MAX);   /* 32 hex digits, or room for a legacy stamp */
    if (!l->key || !l->fence_key || !l->signal_key || !l->waiters_key || !l->holder_key ||
        !l->token || new_token(c, l) < 0) {
        free(l->key);
        free(l->fence_key);
        free(l->signal_key);
        free(l->waiters_key);
        free(l->holder_key);
        free(l->token);
        free(l);
        return NULL;
    }
    l->ttl_ms = ttl_ms;
    l->c = c;
    hl_client_ref(c);
    return l;
}

/* ---- the client's live locks: hilock locks are not re-entrant (hilock.h) ----
 * An acquire of a key its client already holds would find its own value: it would wait out
 * its own ttl and then take the key again, the first lock lost unknown to its owner (with a
 * keepalive on the first, wait forever). So every lock of a blocking client is on its
 * client's list from its acquire's start until released or freed, and an acquire of a key
 * on the list is refused before anything is sent. Not a loop's client: its acquires are
 * separate tasks, which wait for each other's release as any two clients do (hilock.h). A
 * list, not a hash: a client holds a few locks; the uncontended cycle pays two uncontended
 * mutex calls next to its round trips. A forked child's copy
 * never takes the mutex (a parent thread may have held it at fork): it may only be freed. */
/* The list of c->live that key belongs to (FNV-1a of the key: a hash tag shared by many
 * keys, as hl_key_slot would use, must not put them all in one list). */
static hilock **live_list(hilock_client *c, const char *key)
{
    return &c->live[hl_key_hash(key) % (sizeof c->live / sizeof c->live[0])];
}

static hilock *live_find(hilock *const *list, const char *key)   /* under c->live_mu */
{
    for (hilock *h = *list; h; h = h->live_next)
        if (!strcmp(h->key, key)) return h;
    return NULL;
}

/* Check, and unless refused put l on the list, in one turn of the mutex. */
static hilock_status live_enter(hilock_client *c, const char *key, hilock *l)
{
    hilock *h, **list = live_list(c, key);
    pthread_mutex_lock(&c->live_mu);
    if (!(h = live_find(list, key))) {
        l->live = 1;
        if ((l->live_next = *list)) (*list)->live_prev = &l->live_next;
        l->live_prev = list;
        *list = l;
    }
    pthread_mutex_unlock(&c->live_mu);
    return h ? hl_fail(c, HILOCK_EINVAL, "this client already holds %s (hilock locks are not "
                       "re-entrant)", l->shown) : HILOCK_OK;
}

static void live_leave(hilock *l)
{
    hilock_client *c = l->c;
    if (!l->live || hl_forked(c)) return;
    pthread_mutex_lock(&c->live_mu);
    if (l->live_next) l->live_next->live_prev = l->live_prev;
    *l->live_prev = l->live_next;
    l->live = 0;
    pthread_mutex_unlock(&c->live_mu);
}

/* The failover part of an operation (topology.c: failover.lua, WAIT), for the kinds that
 * take part; for the others nothing is added and hl_topo_end finds nothing to read. dl: the
 * operation's, which its round trips there keep to (top->dl adds WAIT's share). */
static int topo_begin(hilock *l, hl_topo_op *top, hl_topo_kind op, int64_t ttl_ms, hl_cmd *cmds, hl_deadline dl)
{
    if (l->kind->failover) return hl_topo_begin(l->c, hl_lock_topo(l), top, op, ttl_ms, cmds, 1, dl);
    memset(top, 0, sizeof *top);
    top->kind = op;
    top->id_at = top->wait_at = -1;
    top->dl = dl;
    return 1;
}

/* The kind's busy command (kind.h: busy_cmd) on the masters that answered busy: they mark
 * the lock awaited and say the holder's PTTL (into t->num). A master that answers it with an
 * error (WRONGTYPE: the key is not a lock) moves from busy to errors; one that does not
 * answer stays busy, its PTTL unknown (0): no wake-up mark there, so a poll. Returns the
 * wait hint: one master, the kind's busy() on that answer; several, -1 (try again at once)
 * if a holder is gone on one of them. */
static int64_t busy_round(hilock *l, tally *t, int64_t mark_ms, hl_deadline dl)
{
    hilock_client *c = l->c;
    hl_cmd cmd;
    hl_kind_buf b;
    uint32_t ok;
    int64_t hint = 0;
    if (l->kind->busy_cmd(l, &cmd, &b, mark_ms) != HILOCK_OK) return 0;
    ok = hl_exec(c, t->other, &cmd, 1, hl_one_round(dl, hl_now_us()));
    for (size_t i = 0; i < c->nnodes; i++) {
        uint32_t bit = 1u << i;
        hl_reply *r = c->nodes[i].reply[0];
        if (!(t->other & ok & bit)) continue;
        if (!hl_pttl_ok(r)) {
            t->other &= ~bit;
            t->errs |= bit;
            t->err = hl_node_reply_error(&c->nodes[i], r);
            continue;
        }
        t->num[i] = hl_reply_int(r);
        if (t->num[i] == -2 && c->nnodes > 1) hint = -1;
    }
    /* (no answer: busy() reads a NULL reply as a PTTL it does not know) */
    if (c->nnodes == 1 && t->other) hint = l->kind->busy(l, ok ? c->nodes[0].reply[0] : NULL);
    hl_exec_clear(c);
    return hint;
}

/* One attempt's round trip on every master at once: the kind's acquire command (then
 * topology's), tallied, with what topology refused or undid taken out. *t0: just before it
 * was sent (validity counts from there); *hint_us: the shortest wait a busy answer suggests.
 * An error here is the kind refusing (nothing was sent). */
static hilock_status attempt_round(hilock *l, hl_deadline dl, int64_t mark_ms, tally *t,
                                   int64_t *t0, int64_t *hint_us)
{
    hilock_client *c = l->c;
    hl_cmd cmds[HL_MAX_CMDS];
    hl_kind_buf b;
    hl_topo_op top;
    hilock_status st;
    int64_t block_to = l->block_to_us, block_us = 0;   /* > 0: the wait's BLPOP goes first (wait.c) */
    int ncmd, behind = block_to > 0;
    uint32_t all = hl_all_nodes(c), ok, wrote = 0, nomem = 0;
    int64_t end = dl.hard_us, hint;
    char secs[32];

    l->block_to_us = 0;
    if ((st = l->kind->acquire_cmd(l, &cmds[behind], &b, mark_ms)) != HILOCK_OK) return st;
    ncmd = behind + topo_begin(l, &top, HL_TOPO_ACQUIRE, l->ttl_ms, cmds + behind, dl);
    *t0 = hl_now_us();
    /* Redlock: a master gets its per-master timeout to connect and as long again to answer,
     * never the full connect/io timeouts, so a dead or frozen one costs little validity */
    if (c->nnodes > 1 && hl_add_sat(*t0, 2 * dl.per_us) < end) end = *t0 + 2 * dl.per_us;
    if (behind) block_us = hl_behind_block(l, &cmds[0], secs, block_to, *t0);
    ok = behind ? hl_exec_any(c, all, cmds, ncmd, hl_deadline_of(block_us + dl.per_us + top.extra_us,
                                                                 hl_add_sat(end, top.extra_us)))
                : hl_exec(c, all, cmds, ncmd, hl_deadline_of(dl.per_us + top.extra_us, hl_add_sat(end, top.extra_us)));
    if (behind) hl_behind_read(l);   /* the BLPOP's reply, out of the acquire's way */
    /* what each node did, read now: on an event loop, the nested round trips below (topology,
     * busy_round) let other flows run, which overwrite the nodes' fields */
    for (size_t i = 0; i < c->nnodes; i++) {
        if (c->nodes[i].wrote) wrote |= 1u << i;
        if (c->nodes[i].st == HILOCK_ENOMEM) nomem |= 1u << i;
    }
    *t = tally_replies(l, all, ok, R_ACQUIRE);
    if (HL_OBSERVED(c)) member_events(l, t, HILOCK_EVENT_ACQUIRE_START);
    t->maybe = t->errs & ok & wrote;
    /* one master: the kind reads its busy answer and words the BUSY (several: see attempt);
     * a kind with a busy command reads that one's answer instead (busy_round) */
    hint = c->nnodes == 1 && t->other && !l->kind->busy_cmd ? l->kind->busy(l, c->nodes[0].reply[0]) : 0;
    if (c->nnodes > 1 && (t->other & ok) && !l->kind->busy_cmd) hl_watch_of_masters(l, t->other & ok);
    hl_topo_end(c, hl_lock_topo(l), &top, ok, t->yes);   /* failover guard, WAIT, identity, master moved */
    t->yes &= ~(top.refused | top.undo | top.moved | top.failed);
    t->errs |= top.refused | top.undo;     /* BUSY (guard), EREPLICAS: answers; already undone */
    t->failed |= top.moved | top.failed;   /* undone on the next contact (the new master; one
                                              whose failover check got no answer) */
    if (top.refused | top.undo) t->err = top.err;
    if (top.refused | top.undo | top.moved) l->spent |= SPENT_LANDED;   /* our value was there */
    hl_exec_clear(c);
    /* no answer (or one refused as too large) after our command was written: it may have
     * run. Nothing to undo when it was never sent (connect refused, handshake refused), nor
     * for a value that is not ours alone (kind.h: undo_unknown): it expires by itself */
    for (size_t i = 0; i < c->nnodes; i++) {
        uint32_t bit = 1u << i;
        if (((t->failed & bit) || !(ok & bit)) && (wrote & ~nomem & bit) && l->kind->undo_unknown) {
            hl_undo_add(c, i, l->key, l->token, l->ttl_ms);
            l->spent |= SPENT_UNKNOWN;
        }
    }
    if (t->other && l->kind->busy_cmd) hint = busy_round(l, t, mark_ms, dl);
    for (size_t i = 0; i < c->nnodes; i++) {
        long long pttl = t->num[i];
        char d[HL_MS_SHOWN_BUF];
        if (!(t->other & (1u << i))) continue;
        /* PTTL 0 (a key in its last millisecond: a script reads the clock once, when it
         * starts) or -2 (gone since the write was refused) is a holder that is over: try
         * again at once, not a whole poll later (seen on Redis 3.2 and 4.0: a waiter behind
         * a crashed holder waited out its 10 s); -1 (no expiry) gives no hint */
        long long h = pttl > 0 ? pttl * 1000 : pttl == 0 || pttl == -2 ? 1000 : 0;
        if (h > 0 && (hint == 0 || h < hint)) hint = h;
        snprintf(c->nodes[i].err, sizeof c->nodes[i].err, pttl >= 0 ? "%s: held by another owner, "
                 "expires in %s" : pttl == -1 ? "%s: held by another owner (no expiry)"
                 : "%s: held by another owner until just now", c->nodes[i].name, hl_ms_shown(pttl, d, sizeof d));
    }
    *hint_us = hint;
    return HILOCK_OK;
}

/* A quorum granted: record the fencing token on a quorum (Redlock), and keep the grant if
 * validity is left; else give it back at once. */
static hilock_status grant(hilock *l, const tally *t, int64_t t0, hl_deadline dl)
{
    hilock_client *c = l->c;
    uint64_t fence = fence_of(l, t);
    uint32_t have;
    int64_t until, now;
    have = fence_record(l, t, fence, dl);
    until = l->kind->valid_until(l, l->ttl_ms, t0);
    now = hl_now_us();
    if ((size_t)popcount(have) >= c->quorum && until > now) {
        l->held = t->yes;
        l->fence = fence;
        l->valid_until_us = until;
        undo_on(l, t->maybe, l->ttl_ms, dl);   /* (Redlock) */
        if (c->nnodes == 1) hl_kind_granted(l, (uint64_t)t->num[0], t->kept, t0);
        return hl_ok(c);
    }
    undo_on(l, t->yes | t->maybe, l->ttl_ms, dl);
    l->spent |= SPENT_LANDED;
    if ((size_t)popcount(have) < c->quorum)
        return hl_fail_nodes(c, HILOCK_ENOQUORUM, t->yes & ~have, "acquired, but the fencing "
                             "token could not be recorded on a quorum; undone: ");
    return hl_fail(c, HILOCK_ETIMEDOUT, "%s: acquired, but the round trip took %lld ms of a "
                   "%lld ms ttl: no validity left; undone", l->shown,
                   (long long)((now - t0) / 1000), (long long)l->ttl_ms);
}

/* One attempt on every master at once. Returns OK (l->held, fence, validity set), BUSY
 * (*hint_us = shortest holder PTTL seen, or the kind's hint), or an error. A failed attempt
 * leaves no grant of ours behind: undone at once, or first thing on the next contact with a
 * master that did not answer (its write may have landed). */
static hilock_status attempt(hilock *l, hl_deadline dl, int64_t mark_ms, int64_t *hint_us)
{
    hilock_client *c = l->c;
    hilock_status st;
    char pre[3 * HL_KEY_SHOWN_BUF + 200];
    int64_t t0 = 0;
    tally t;
    *hint_us = 0;
    if ((st = attempt_round(l, dl, mark_ms, &t, &t0, hint_us)) != HILOCK_OK) return st;
    if ((size_t)popcount(t.yes) >= c->quorum) return grant(l, &t, t0, dl);
    /* not granted: give back any partial grant at once, so it blocks nobody */
    undo_on(l, t.yes, l->ttl_ms, dl);
    if (t.yes) l->spent |= SPENT_LANDED;
    if ((size_t)popcount(t.other) > c->nnodes - c->quorum) {   /* the others alone rule us out */
        if (c->nnodes == 1) st = HILOCK_BUSY;   /* the kind's busy has said why */
        uint32_t forever = 0;   /* holders with no TTL: enough of them and no wait can end */
        for (size_t i = 0; i < c->nnodes; i++)
            if ((t.other & (1u << i)) && t.num[i] == -1) forever |= 1u << i;
        if ((size_t)popcount(forever) > c->nnodes - c->quorum)
            snprintf(pre, sizeof pre, "%s: held by another owner on %d of %zu masters; %s" HL_NO_TTL
                     "it will never expire by itself on %d of them (see hilock inspect %s; hilock break "
                     "removes it): ", l->shown,
                     popcount(t.other), c->nnodes, l->shown, popcount(forever), l->shown);
        else
            snprintf(pre, sizeof pre, "%s: held by another owner on %d of %zu masters: ", l->shown,
                     popcount(t.other), c->nnodes);
        if (c->nnodes > 1) st = hl_fail_nodes(c, HILOCK_BUSY, t.other | t.failed | t.errs, pre);
    } else {
        st = undecided(l, &t, "", "granted on", popcount(t.yes), dl);
    }
    /* and whatever a script that failed may have written first, once the message names its
     * error (the undo's round trip replaces the node's): any kind, as the answer is known and
     * a value just written is live, so no peer has taken it over since */
    undo_on(l, t.maybe, l->ttl_ms, dl);
    if (t.maybe) l->spent |= SPENT_LANDED;
    return st;
}

/* Each attempt writes its own token once an earlier attempt's may be left somewhere (a write
 * whose answer never came, a grant given back, one undone by topology): an undo deletes by
 * value, whenever it runs -- queued behind other undos, on a connection the server reads
 * late -- so with the old token it could delete the retry's grant. With a new one it can
 * only delete the old value; that value found standing makes the retry busy until its undo
 * runs, which goes first in the retry's own round trip (engine.c). Kinds that write a new
 * value every attempt anyway (legacy stamps: not undo_unknown) keep theirs. The fair kind
 * leaves its queue under the old token first (its entry and signal list are named after it):
 * the retry joins at the tail. */
static hilock_status fresh_token(hilock *l, hl_deadline dl)
{
    hilock_client *c = l->c;
    int unknown = l->spent & SPENT_UNKNOWN;
    l->spent = 0;
    if (!l->kind->undo_unknown) return HILOCK_OK;
    hl_kind_give_up(l, dl);
    /* a value that surely landed is surely deleted by its undo; one of unknown fate may land
     * after it (kept for undo_stale; best effort: without it, it lasts until its ttl) */
    if (unknown && !l->stale) l->stale = calloc(HL_STALE_MAX, HL_TOKEN_LEN + 1);
    if (unknown && l->stale) {
        memcpy(l->stale + (size_t)(l->nstale % HL_STALE_MAX) * (HL_TOKEN_LEN + 1), l->token, HL_TOKEN_LEN);
        l->nstale++;
    }
    if (new_token(c, l) < 0) return hl_fail(c, HILOCK_EIO, "%s: no random bytes for a new token", l->shown);
    return hl_kind_init(l);
}

/* An attempt found the key busy while earlier tokens of ours may be left: one of them may
 * be what it found (a write of unknown fate that reached the server after its undo had run:
 * a closed connection the server read late). Undo them again, first thing in the next
 * attempt's round trip, so our own stale value costs one pause, not its ttl. */
static void undo_stale(hilock *l)
{
    int n = l->nstale < HL_STALE_MAX ? l->nstale : HL_STALE_MAX;
    for (size_t i = 0; i < l->c->nnodes; i++)
        for (int k = 0; k < n; k++)
            hl_undo_add(l->c, i, l->key, l->stale + (size_t)k * (HL_TOKEN_LEN + 1), l->ttl_ms);
}

/* An acquire's event (hilock_observe.h) at now: its key, its one node (Redlock: none), the
 * time since start. */
static void acquire_event(hilock *l, hilock_event_kind kind, hilock_status st, int64_t start,
                          int64_t now, long attempts, int woken)
{
    hilock_client *c = l->c;
    hilock_event e;
    if (!HL_OBSERVED(c)) return;
    hl_event_init_at(&e, kind, l->key, strlen(l->key), c->nnodes == 1 ? c->nodes[0].name : NULL, st,
                     now, kind == HILOCK_EVENT_ACQUIRE_START ? -1 : now - start);
    e.attempts = attempts;
    e.woken = woken;
    e.lock_kind = l->kind_name;
    if (st == HILOCK_OK) e.fence = l->fence;
    /* (a busy answer's says what holds the key: the command tells a waiter so as it begins) */
    if (st != HILOCK_OK && (kind == HILOCK_EVENT_ACQUIRE_GAVE_UP || kind == HILOCK_EVENT_ACQUIRE_BUSY))
        e.message = c->errmsg;
    hl_emit(c, &e);
}

/* The acquire's end, counted (hilock_observe.h: hilock_stats) and reported, with one clock
 * reading (the grant's event has the histogram's value; none unobserved unless granted). */
static void acquire_end(hilock *l, hilock_status st, int64_t start, long attempts, int woken)
{
    hilock_client *c = l->c;
    int64_t now = st == HILOCK_OK || HL_OBSERVED(c) ? hl_now_us() : 0;
    if (st == HILOCK_OK) {
        c->stats.acquire_ok++;
        hl_hist_add(&c->stats.acquire_wait, now - start);
        if (l->topo.guard_seen_us)
            hl_emit_lock(c, HILOCK_EVENT_GUARD_PASSED, l->key, l->kind_name, NULL, HILOCK_OK,
                         now - l->topo.guard_seen_us);
    } else if (st == HILOCK_BUSY) {
        c->stats.acquire_busy++;
    } else {
        c->stats.acquire_error++;
    }
    acquire_event(l, st == HILOCK_OK ? HILOCK_EVENT_ACQUIRE_GRANTED : HILOCK_EVENT_ACQUIRE_GAVE_UP,
                  st, start, now, attempts, woken);
}

/* hilock_cancel ended the acquire (its wait, or an attempt's round trip). */
static hilock_status cancelled(hilock *l, long attempts)
{
    return hl_fail(l->c, HILOCK_ECANCELED, "%s: cancelled after %ld attempt%s; nothing held",
                   l->shown, attempts, attempts == 1 ? "" : "s");
}

/* Errors that a later attempt can cure (a server coming back); the rest end the wait. */
static int retryable(hilock_status st)
{
    return st == HILOCK_BUSY || st == HILOCK_EIO || st == HILOCK_ETIMEDOUT || st == HILOCK_ENOQUORUM;
}

hilock_status hl_acquire_args(hilock_client *c, const char *key, int64_t ttl_ms, int64_t wait_ms)
{
    hilock_status st;
    if ((st = hl_check_key(c, key)) != HILOCK_OK) return st;
    if ((st = hl_check_ttl(c, ttl_ms)) != HILOCK_OK) return st;
    if (wait_ms < -1) return hl_fail(c, HILOCK_EINVAL, "wait_ms must be >= -1 (got %lld)", (long long)wait_ms);
    return HILOCK_OK;
}

hilock_status hl_acquire(hilock_client *c, const char *key, int64_t ttl_ms, int64_t wait_ms,
                         const hl_kind_ops *kind, hilock **out)
{
    return hl_acquire_limit(c, key, 0, ttl_ms, wait_ms, kind, out);
}

hilock_status hl_acquire_limit(hilock_client *c, const char *key, int limit, int64_t ttl_ms,
                               int64_t wait_ms, const hl_kind_ops *kind, hilock **out)
{
    hilock_status st;
    hilock *l;
    int64_t start, wait_end, down_pause = 0;
    hl_deadline dl;
    long attempts = 0;
    int woken = 0;
    if (out) *out = NULL;
    if (!c) return HILOCK_EINVAL;
    if ((st = hl_check_fork(c)) != HILOCK_OK) return st;
    if (!out) return hl_fail(c, HILOCK_EINVAL, "out is NULL");
    if ((st = hl_acquire_args(c, key, ttl_ms, wait_ms)) != HILOCK_OK) return st;
    /* the entries kind.h gives no default (a new kind's table must fill them) */
    assert(kind && kind->acquire_cmd && kind->busy && kind->valid_until && kind->extend_cmd);
    if (!(l = lock_new(c, key, ttl_ms))) return hl_fail(c, HILOCK_ENOMEM, "out of memory");
    l->kind = kind;
    l->kind_name = kind->name;
    l->limit = limit;
    /* (an event loop's acquires are its tasks: they contend for a key, not re-enter it) */
    if (!c->runner && (st = live_enter(c, key, l)) != HILOCK_OK) {
        hilock_free(l);
        return st;
    }
    if ((st = hl_kind_init(l)) != HILOCK_OK) {
        hilock_free(l);
        return st;
    }

    if (!c->runner) hl_cancel_pending(c->cancel);   /* (hilock.h, hilock_cancel: a shutdown's
                                                        cancel just before the wait is not lost) */
    start = hl_now_us();
    if (HL_OBSERVED(c)) acquire_event(l, HILOCK_EVENT_ACQUIRE_START, HILOCK_OK, start, start, 0, 0);
    /* a wait too long to count in microseconds is as good as forever (and must not overflow) */
    wait_end = wait_ms < 0 || wait_ms > HL_NEVER / 1000 ? HL_NEVER : hl_add_sat(start, wait_ms * 1000);
    /* the last attempt may start just before the wait's end, and may have to connect first */
    dl = lock_dl(c, ttl_ms, hl_add_sat(wait_end, hl_call_bound_us(c, c->opt.io_timeout_ms * 1000)));
    for (int retake = 0;;) {
        int64_t hint = 0;
        int behind = l->block_to_us > 0;   /* (behind the wait's BLPOP: hl_wait_turn) */
        if (l->spent && (st = fresh_token(l, dl)) != HILOCK_OK) break;
        st = attempt(l, dl, hl_wait_mark_ms(l, wait_end), &hint);
        attempts++;
        if (behind) woken = l->woken;
        if (st == HILOCK_OK) {
            acquire_end(l, st, start, attempts, woken);
            *out = l;
            return st;
        }
        if (hl_call_cancelled(c)) {   /* (a write of unknown fate is undone on the next contact) */
            st = cancelled(l, attempts);
            break;
        }
        if (st == HILOCK_BUSY && HL_OBSERVED(c))
            acquire_event(l, HILOCK_EVENT_ACQUIRE_BUSY, st, start, hl_now_us(), attempts, 0);
        /* the kind judged the value found expired and replaceable (legacy: a stamp that has
         * passed, replaced at once as the recipe's GETSET follows its GET, so even a one-shot
         * try takes it over): try again at once, twice in a row at most */
        if (st == HILOCK_BUSY && hint < 0 && retake++ < 2) continue;
        if (st == HILOCK_BUSY && l->nstale) undo_stale(l);
        /* a server may come back before a finite deadline; "forever" waits for the lock,
         * not for a server, so there an error ends the wait (as the header says) */
        if (!retryable(st) || (wait_end == HL_NEVER && st != HILOCK_BUSY) || hl_now_us() >= wait_end ||
            c->cancelled)   /* (a loop's client being freed: its calls end now) */
            break;
        retake = 0;
        if (st == HILOCK_EIO || st == HILOCK_ETIMEDOUT) {
            /* no answer, so no holder to wait for: a server down or restarting is tried again
             * after pauses doubling from retry_delay_ms to poll_ms (an hour's wait on a dead
             * server makes thousands of connects, not 100,000) */
            down_pause = down_pause ? down_pause * 2 : c->opt.retry_delay_ms * 1000;
            if (down_pause > c->opt.poll_ms * 1000) down_pause = c->opt.poll_ms * 1000;
            hl_pause_until(c, wait_end - hl_now_us() < down_pause ? wait_end : hl_now_us() + down_pause);
            woken = 0;
        } else {
            down_pause = 0;
            woken = hl_wait_turn(l, hint, wait_end);
        }
        if (hl_call_cancelled(c)) {
            st = cancelled(l, attempts);
            break;
        }
    }
    acquire_end(l, st, start, attempts, 0);
    hl_kind_give_up(l, dl);
    hilock_free(l);
    return st;
}

/* Run one per-key command (release, extend, check) on every master at once. ttl_ms: the
 * extend's new ttl, else 0. *dl: the call's, which all of its round trips keep to
 * (Sentinel's question before, failover.lua after). */
static tally run_on_all(hilock *l, const hl_cmd *cmd, reply_kind kind, hl_topo_kind op,
                        int64_t ttl_ms, int64_t *t0, hl_deadline *dl)
{
    hilock_client *c = l->c;
    hl_cmd cmds[HL_MAX_CMDS];
    hl_topo_op top;
    int ncmd;
    int64_t per = node_timeout_us(c, ttl_ms > 0 ? ttl_ms : l->ttl_ms);
    uint32_t ok;
    tally t;
    cmds[0] = *cmd;   /* then failover.lua and WAIT where asked for (topology.c) */
    /* Redlock: connect and answer within twice the per-master timeout (see attempt) */
    ncmd = topo_begin(l, &top, op, ttl_ms, cmds, hl_deadline_of(per, hl_add_sat(hl_now_us(),
                      c->nnodes > 1 ? 2 * per : hl_call_bound_us(c, per))));
    *t0 = hl_now_us();
    *dl = top.dl;
    ok = hl_exec(c, hl_all_nodes(c), cmds, ncmd, hl_deadline_of(per + top.extra_us, top.dl.hard_us));
    t = tally_replies(l, hl_all_nodes(c), ok, kind);
    if (HL_OBSERVED(c)) member_events(l, &t, op == HL_TOPO_RELEASE ? HILOCK_EVENT_RELEASE : HILOCK_EVENT_EXTEND);
    /* (not on a node whose script answered an error: its failover.lua round trip would
     * replace the node's error text, which undecided() reports) */
    hl_topo_end(c, hl_lock_topo(l), &top, ok & ~t.errs, t.yes);   /* did the lock survive a failover? WAIT (extend) */
    t.lost = top.lost;
    t.yes &= ~(top.short_acks | top.failed);   /* extend: EREPLICAS, the old validity stands */
    t.gone &= ~top.failed;                /* (failover.lua got no answer: no answer at all) */
    t.other &= ~top.failed;
    t.failed |= top.failed;
    t.errs |= top.short_acks;
    if (top.short_acks) t.err = top.err;
    hl_exec_clear(c);
    name_wrong_types(l, &t, 1, *dl);   /* (another kind took the key: not an error) */
    return t;
}

/* The kind's word on whether the lock can still be used (kind.h: usable). */
static hilock_status usable(hilock *l, const char *op)
{
    return hl_kind_usable(l, op);
}

/* NOT_HELD with the reason the servers gave (and, for several masters, the count and the
 * masters that did not answer). */
static hilock_status not_held(hilock *l, const tally *t, const char *op, uint32_t yes)
{
    hilock_client *c = l->c;
    const char *why = t->other ? l->kind->taken : "expired or already released";
    char pre[200];
    if (c->nnodes == 1) return hl_fail(c, HILOCK_NOT_HELD, "%s %s: %s", op, l->shown, why);
    snprintf(pre, sizeof pre, "%s %.100s: %s: ours on %d of %zu masters (%zu needed)%s", op,
             l->shown, why, popcount(yes), c->nnodes, c->quorum, t->failed | t->errs ? "; " : "");
    return hl_fail_nodes(c, HILOCK_NOT_HELD, t->failed | t->errs, pre);
}

/* NOT_HELD needs evidence: a master that granted our value (l->held) saying it is gone or
 * another's, or too few masters left that could still hold it. "No such key" from a master
 * that never had our value is no evidence: while the lock's majority sits on masters that are
 * down or stopped, and none of them has said otherwise, nothing is decided (make torture,
 * redlock: a lock granted on 3 of 5 masters, 2 of them stopped, release said NOT_HELD while
 * the lock still held its majority). */
static int may_hold(const hilock *l, const tally *t, uint32_t yes)
{
    uint32_t silent = l->held & ~(t->yes | t->gone | t->other);
    return !(l->held & (t->gone | t->other)) && (size_t)popcount(yes | silent) >= l->c->quorum;
}

/* The lock lasts while a quorum holds it: until the quorum-th longest remaining ttl among
 * the masters holding our value, counted from before the question was sent, minus drift. */
static int64_t quorum_valid_until(const hilock *l, const tally *t, int64_t t0)
{
    long long p[32];
    size_t n = 0;
    for (size_t i = 0; i < l->c->nnodes; i++) {
        long long v;
        size_t k;
        if (!(t->yes & (1u << i))) continue;
        v = t->num[i] < 0 ? l->ttl_ms : t->num[i];   /* -1: no expiry (someone ran PERSIST) */
        for (k = n++; k > 0 && p[k - 1] < v; k--) p[k] = p[k - 1];   /* keep p descending */
        p[k] = v;
    }
    return l->kind->valid_until(l, p[l->c->quorum - 1], t0);
}

/* Why NOT_HELD or LOST (hilock_observe.h: hilock_lost_why), given the validity before. */
static hilock_lost_why lost_why(hilock_status st, int64_t was_until, int64_t now)
{
    if (st == HILOCK_LOST) return HILOCK_LOST_FAILOVER;
    return was_until > now ? HILOCK_LOST_TAKEN : HILOCK_LOST_EXPIRED;
}

/* The counters of a release, extend or check (a keepalive's renewal: keepalive.c counts). */
static void count_result(hilock_client *c, hilock_event_kind kind, hilock_status st)
{
    if (kind == HILOCK_EVENT_RELEASE) {
        if (st == HILOCK_OK) c->stats.release_ok++;
        else if (st == HILOCK_NOT_HELD) c->stats.release_not_held++;
        else if (st == HILOCK_LOST) c->stats.release_lost++;
        else c->stats.release_error++;
    } else if (kind == HILOCK_EVENT_EXTEND) {
        if (st == HILOCK_OK) c->stats.extend_ok++;
        else c->stats.extend_failed++;
    } else if (st == HILOCK_OK) {   /* RENEWAL: perhaps from a keepalive's thread */
        hl_count_atomic(c, renewal_ok);
    } else {
        hl_count_atomic(c, renewal_failed);
    }
}

void hl_renewals_gave_up(hilock *l, hilock_status st, const char *why)
{
    hilock_client *c = l->c;
    hilock_event e;
    if (l->lost_seen) return;
    l->lost_seen = 1;
    hl_count_atomic(c->obs_owner ? c->obs_owner : c, lost);
    if (!HL_OBSERVED(c)) return;
    hl_event_init(&e, HILOCK_EVENT_LOST, l->key, strlen(l->key), c->nnodes == 1 ? c->nodes[0].name : NULL,
                  st, -1);
    e.lost_why = HILOCK_LOST_UNKNOWN;
    e.message = why;
    e.lock_kind = l->kind_name;
    hl_emit(c, &e);
}

/* A release's, extend's or check's end (hilock_observe.h): counted; its event (RENEWAL on a
 * keepalive's client), and LOST when the answer says the lock is no longer ours. start: when
 * the call began (read only if observed: call_start); was_until: the validity before the
 * call; was_released: it was released before (no news). */
static void result_end(hilock *l, hilock_event_kind kind, hilock_status st, int64_t start,
                       int64_t was_until, int was_released)
{
    hilock_client *c = l->c, *counts = c->obs_owner ? c->obs_owner : c;
    hilock_event e;
    int64_t now;
    int lost = !was_released && !l->lost_seen && (st == HILOCK_NOT_HELD || st == HILOCK_LOST);
    if (lost) l->lost_seen = 1;   /* a later call that finds it gone is no news */
    if (l->renewing && kind == HILOCK_EVENT_EXTEND) kind = HILOCK_EVENT_RENEWAL;
    count_result(counts, kind, st);
    if (lost) hl_count_atomic(counts, lost);   /* (a keepalive's thread adds to it too) */
    if (!HL_OBSERVED(c)) return;
    now = hl_now_us();
    hl_event_init(&e, kind, l->key, strlen(l->key), c->nnodes == 1 ? c->nodes[0].name : NULL, st,
                  now - start);
    e.lock_kind = l->kind_name;
    if (kind != HILOCK_EVENT_RELEASE)
        e.validity_ms = l->valid_until_us > now ? (l->valid_until_us - now) / 1000 : 0;
    if (st != HILOCK_OK) e.message = c->errmsg;
    hl_emit(c, &e);
    if (!lost) return;
    e.kind = HILOCK_EVENT_LOST;
    e.duration_us = -1;
    e.validity_ms = 0;
    e.lost_why = lost_why(st, was_until, start);
    hl_emit(c, &e);
}

/* When a call began, for its event's duration: read only if c is observed (the counters need
 * no clock). */
static int64_t call_start(const hilock_client *c) { return HL_OBSERVED(c) ? hl_now_us() : 0; }

static hilock_status release_once(hilock *l);

hilock_status hilock_release(hilock *l)
{
    int took, was_released;
    hilock_status st;
    int64_t start, was_until;
    if (!l) return HILOCK_EINVAL;
    if ((st = hl_enter(l->c, &took)) != HILOCK_OK) return st;
    if (hl_check_fork(l->c) != HILOCK_OK)   /* refused (as extend, check: not counted); before the hook */
        return hl_leave(l->c, took, HILOCK_EINVAL);
    /* no renewal may outlive the release, and the keepalive writes the validity until it
     * stops: its thread joined first, the event's fields are read alone (TSan) */
    if (l->hook) l->hook(l, HL_HOOK_STOP);
    start = call_start(l->c);
    was_until = l->valid_until_us;
    was_released = l->released;
    st = release_once(l);
    result_end(l, HILOCK_EVENT_RELEASE, st, start, was_until, was_released);
    if (l->released) live_leave(l);   /* (not after an error: it may still hold) */
    return hl_leave(l->c, took, st);
}

static hilock_status release_once(hilock *l)
{
    hilock_client *c;
    hilock_status st;
    hl_cmd cmd;
    hl_kind_buf b;
    uint32_t yes, answered;
    int64_t t0;
    hl_deadline dl;
    int was_valid;
    tally t;
    if (!l) return HILOCK_EINVAL;
    c = l->c;
    if (l->released) return hl_fail(c, HILOCK_NOT_HELD, "release %s: already released", l->shown);
    if ((st = usable(l, "release")) != HILOCK_OK) {
        l->released = 1;   /* over by the kind's own rule: there is nothing left to release */
        return st;
    }
    was_valid = l->valid_until_us > hl_now_us();
    hl_kind_release_cmd(l, &cmd, &b);
    t = run_on_all(l, &cmd, R_TRISTATE, HL_TOPO_RELEASE, 0, &t0, &dl);
    l->valid_until_us = 0;   /* from the first try on, it may be partly gone: not safe to use */
    /* A retry after an error counts what earlier tries did: masters that confirmed, and
     * masters sent a release while the lock was valid that now find no key (it landed). */
    yes = t.yes | l->freed | (t.gone & l->rel_pending);
    answered = t.yes | t.gone | t.other | l->freed;
    l->freed |= t.yes;
    if (was_valid) l->rel_pending |= t.failed;
    if ((size_t)popcount(answered) < c->quorum)
        return undecided(l, &t, "release: ", "answered", popcount(answered), dl);
    if ((size_t)popcount(yes) < c->quorum && may_hold(l, &t, yes))
        return undecided(l, &t, "release: ", "ours on", popcount(yes), dl);
    l->released = 1;
    if (t.lost && (size_t)popcount(yes & ~t.lost) < c->quorum)   /* (our value was deleted) */
        return hl_topo_lost(c, hl_lock_topo(l), "release", t.lost);
    if ((size_t)popcount(yes) >= c->quorum) return hl_ok(c);
    return not_held(l, &t, "release", yes);
}

static hilock_status extend_once(hilock *l, int64_t ttl_ms);
static hilock_status check_once(hilock *l);

/* A lock another thread renews (the hook, set by keepalive.c): extends and checks take
 * turns with its renewals, so their results cannot cross. */
hilock_status hilock_extend(hilock *l, int64_t ttl_ms)
{
    hilock_status st;
    int took;
    int64_t start, was_until;
    if (!l) return HILOCK_EINVAL;
    if ((st = hl_enter(l->c, &took)) != HILOCK_OK) return st;
    if (hl_check_fork(l->c) != HILOCK_OK)   /* (hook: the parent's) */
        return hl_leave(l->c, took, HILOCK_EINVAL);
    if (l->hook) l->hook(l, HL_HOOK_BEGIN);
    start = call_start(l->c);
    was_until = l->valid_until_us;
    st = extend_once(l, ttl_ms);
    result_end(l, HILOCK_EVENT_EXTEND, st, start, was_until, l->released);
    if (l->hook) l->hook(l, HL_HOOK_END);
    return hl_leave(l->c, took, st);
}

hilock_status hilock_check(hilock *l)
{
    hilock_status st;
    int took;
    int64_t start, was_until;
    if (!l) return HILOCK_EINVAL;
    if ((st = hl_enter(l->c, &took)) != HILOCK_OK) return st;
    if (hl_check_fork(l->c) != HILOCK_OK)
        return hl_leave(l->c, took, HILOCK_EINVAL);
    if (l->hook) l->hook(l, HL_HOOK_BEGIN);
    start = call_start(l->c);
    was_until = l->valid_until_us;
    st = check_once(l);
    result_end(l, HILOCK_EVENT_EXTEND, st, start, was_until, l->released);
    if (l->hook) l->hook(l, HL_HOOK_END);
    return hl_leave(l->c, took, st);
}

static hilock_status extend_once(hilock *l, int64_t ttl_ms)
{
    hilock_client *c;
    hilock_status st;
    hl_cmd cmd;
    hl_kind_buf b;
    uint32_t answered;
    int64_t t0, until;
    hl_deadline dl;
    tally t;
    if (!l) return HILOCK_EINVAL;
    c = l->c;
    if ((st = hl_check_ttl(c, ttl_ms)) != HILOCK_OK) return st;
    if (l->released) return hl_fail(c, HILOCK_EINVAL, "extend %s: the lock was released", l->shown);
    if ((st = usable(l, "extend")) != HILOCK_OK ||
        (st = l->kind->extend_cmd(l, &cmd, &b, ttl_ms)) != HILOCK_OK)
        return st;
    t = run_on_all(l, &cmd, R_TRISTATE, HL_TOPO_EXTEND, ttl_ms, &t0, &dl);
    hl_kind_extend_end(l, &b, (size_t)popcount(t.yes) >= c->quorum);
    until = l->kind->valid_until(l, ttl_ms, t0);
    answered = t.yes | t.gone | t.other;
    if ((size_t)popcount(answered) < c->quorum) {
        /* the new ttl may have landed on some masters: if it is shorter, so is the lock */
        if (until < l->valid_until_us) l->valid_until_us = until;
        return undecided(l, &t, "extend: ", "answered", popcount(answered), dl);
    }
    if (t.lost && (size_t)popcount(t.yes & ~t.lost) < c->quorum) {
        l->valid_until_us = 0;
        return hl_topo_lost(c, hl_lock_topo(l), "extend", t.lost);
    }
    if ((size_t)popcount(t.yes) < c->quorum && may_hold(l, &t, t.yes)) {
        if (until < l->valid_until_us) l->valid_until_us = until;
        return undecided(l, &t, "extend: ", "ours on", popcount(t.yes), dl);
    }
    if ((size_t)popcount(t.yes) < c->quorum) {
        l->valid_until_us = 0;
        /* lost: what is left of it on a minority (now with the new ttl) only blocks others */
        undo_on(l, t.yes, ttl_ms, dl);
        return not_held(l, &t, "extend", t.yes);
    }
    if (until <= hl_now_us()) {
        l->valid_until_us = 0;
        return hl_fail(c, HILOCK_ETIMEDOUT, "extend %s: the round trip used up the new ttl", l->shown);
    }
    l->ttl_ms = ttl_ms;
    l->valid_until_us = until;
    l->held = t.yes;
    return hl_ok(c);
}

static hilock_status check_once(hilock *l)
{
    hilock_client *c;
    hilock_status st;
    hl_cmd cmd;
    hl_kind_buf b;
    uint32_t answered;
    int64_t t0;
    hl_deadline dl;
    tally t;
    if (!l) return HILOCK_EINVAL;
    c = l->c;
    if (l->released) return hl_fail(c, HILOCK_NOT_HELD, "check %s: released", l->shown);
    if ((st = usable(l, "check")) != HILOCK_OK) return st;
    hl_kind_check_cmd(l, &cmd, &b);
    t = run_on_all(l, &cmd, R_CHECK, HL_TOPO_CHECK, 0, &t0, &dl);
    answered = t.yes | t.gone | t.other;
    if ((size_t)popcount(answered) < c->quorum)
        return undecided(l, &t, "check: ", "answered", popcount(answered), dl);
    if (t.lost && (size_t)popcount(t.yes & ~t.lost) < c->quorum) {
        l->valid_until_us = 0;
        return hl_topo_lost(c, hl_lock_topo(l), "check", t.lost);
    }
    if ((size_t)popcount(t.yes) < c->quorum && may_hold(l, &t, t.yes))
        return undecided(l, &t, "check: ", "ours on", popcount(t.yes), dl);
    if ((size_t)popcount(t.yes) < c->quorum) {
        l->valid_until_us = 0;
        return not_held(l, &t, "check", t.yes);
    }
    l->valid_until_us = quorum_valid_until(l, &t, t0);   /* what the servers say is left */
    return hl_ok(c);
}

int64_t hilock_validity_ms(const hilock *l)
{
    int64_t left, until;
    /* a forked child holds nothing (and must not call the hook: its mutexes are the parent's) */
    if (!l || l->released || hl_forked(l->c)) return 0;
    until = l->hook ? l->hook((hilock *)l, HL_HOOK_VALIDITY) : l->valid_until_us;   /* (reads only) */
    if (!until) return 0;
    left = (until - hl_now_us()) / 1000;
    return left > 0 ? left : 0;
}

int hl_lock_renewable(const hilock *l) { return l->kind->keepalive; }

uint64_t hilock_fence(const hilock *l) { return l ? l->fence : 0; }
const char *hilock_token(const hilock *l) { return l ? l->token : NULL; }
const char *hilock_key(const hilock *l) { return l ? l->key : NULL; }
const char *hilock_kind(const hilock *l) { return l ? l->kind_name : NULL; }

void hilock_free(hilock *l)
{
    if (!l) return;
    if (l->hook) l->hook(l, HL_HOOK_STOP);
    live_leave(l);
    free(l->key);
    free(l->fence_key);
    free(l->signal_key);
    free(l->waiters_key);
    free(l->holder_key);
    free(l->queue_key);
    free(l->beat_key);
    free(l->holders_key);
    free(l->wq_key);
    free(l->watch_key);
    for (size_t i = 0; i < sizeof l->wake_keys / sizeof l->wake_keys[0]; i++) free(l->wake_keys[i]);
    free(l->token);
    free(l->stale);
    hl_topo_lock_free(&l->topo);
    free(l->ka_why);
    hl_client_unref(l->c);
    free(l);
}
