/* lock.c -- the modern lock: SET NX PX with a fencing token, compare-and-delete release,
 * compare-and-pexpire extend, over 1..N masters (one master is the N = 1 case of the same
 * quorum logic, so Redlock is a change of configuration, not of code). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define FENCE_KEEP_MS (3600 * 1000)   /* the counter outlives each grant by an hour */

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

/* The status of a round trip that reached fewer than `need` nodes: the node's own error for
 * one master, ENOQUORUM (with every node's reason) for several. */
static hilock_status unreached(hilock_client *c, uint32_t failed, const char *what)
{
    if (c->nnodes == 1) return hl_fail(c, c->nodes[0].st, "%s%s", what, c->nodes[0].err);
    return hl_fail_nodes(c, HILOCK_ENOQUORUM, failed, what);
}

static int popcount(uint32_t m) { return __builtin_popcount(m); }

/* Tri-state replies of release/extend (1 ours, 0 gone, -1 someone else's). Error replies
 * count as failures of that node. */
typedef struct tally {
    uint32_t yes, gone, other, failed;
    hilock_status err;       /* an error reply (EREPLY/EAUTH), if any */
} tally;

static tally count_tristate(hilock_client *c, uint32_t mask, uint32_t ok)
{
    tally t = { 0, 0, 0, 0, HILOCK_OK };
    for (size_t i = 0; i < c->nnodes; i++) {
        uint32_t bit = 1u << i;
        hl_reply *r;
        if (!(mask & bit)) continue;
        r = c->nodes[i].reply[0];
        if (!(ok & bit)) {
            t.failed |= bit;
        } else if (hl_reply_type(r) != HL_R_INTEGER) {
            t.err = hl_node_reply_error(&c->nodes[i], r);
            t.failed |= bit;
        } else if (hl_reply_int(r) == 1) {
            t.yes |= bit;
        } else if (hl_reply_int(r) == 0) {
            t.gone |= bit;
        } else {
            t.other |= bit;
        }
    }
    return t;
}

/* Delete our value on the nodes in mask (partial or expired grants), all at once. A node
 * that does not answer gets an undo, sent first on the next contact. */
static void undo_on(hilock_client *c, uint32_t mask, const char *key, const char *token,
                    int64_t hard_deadline)
{
    hl_cmd cmd;
    uint32_t ok;
    int64_t dl = hl_add_sat(hl_now_us(), c->opt.io_timeout_ms * 1000);
    if (!mask) return;
    hl_cmd_init(&cmd, &hl_lua_release, 1);
    hl_cmd_arg(&cmd, key, (size_t)-1);
    hl_cmd_arg(&cmd, token, (size_t)-1);
    ok = hl_exec(c, mask, &cmd, 1, c->opt.io_timeout_ms * 1000, dl < hard_deadline ? dl : hard_deadline);
    for (size_t i = 0; i < c->nnodes; i++)
        if ((mask & (1u << i)) && !(ok & (1u << i))) hl_undo_add(c, i, key, token);
    hl_exec_clear(c);
}

static hilock *lock_new(hilock_client *c, const char *key, int64_t ttl_ms)
{
    unsigned char raw[16];
    hilock *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->key = hl_strdup(key);
    l->fence_key = hl_aux_key(key, ":fence");
    l->token = malloc(2 * sizeof raw + 1);
    if (!l->key || !l->fence_key || !l->token || hl_random_bytes(raw, sizeof raw) < 0) {
        free(l->key);
        free(l->fence_key);
        free(l->token);
        free(l);
        return NULL;
    }
    hl_hex(l->token, raw, sizeof raw);
    l->ttl_ms = ttl_ms;
    l->c = c;
    hl_client_ref(c);
    return l;
}

/* One attempt on every node at once. Returns OK (l->held, fence, validity set), BUSY
 * (*hint_us = shortest holder PTTL seen), or an error. */
static hilock_status attempt(hilock *l, int64_t hard_deadline, int64_t *hint_us)
{
    hilock_client *c = l->c;
    hl_cmd cmd;
    char a_ttl[24], a_keep[24];
    uint32_t all = hl_all_nodes(c), ok, granted = 0, busy = 0, failed = 0;
    hilock_status err = HILOCK_OK;
    uint64_t fence = 0;
    int64_t t0, hint = 0;

    hl_cmd_init(&cmd, &hl_lua_acquire, 2);
    hl_cmd_arg(&cmd, l->key, (size_t)-1);
    hl_cmd_arg(&cmd, l->fence_key, (size_t)-1);
    hl_cmd_arg(&cmd, l->token, (size_t)-1);
    hl_cmd_argi(&cmd, a_ttl, l->ttl_ms);
    hl_cmd_argi(&cmd, a_keep, l->ttl_ms + FENCE_KEEP_MS);
    hl_cmd_arg(&cmd, "0", 1);

    t0 = hl_now_us();   /* before the first byte is sent: validity counts from here */
    ok = hl_exec(c, all, &cmd, 1, node_timeout_us(c, l->ttl_ms), hard_deadline);
    for (size_t i = 0; i < c->nnodes; i++) {
        uint32_t bit = 1u << i;
        hl_reply *r = c->nodes[i].reply[0];
        if (!(ok & bit)) {
            failed |= bit;
            /* the write may have landed before the connection broke or timed out */
            if (c->nodes[i].st == HILOCK_ETIMEDOUT || c->nodes[i].st == HILOCK_EIO)
                hl_undo_add(c, i, l->key, l->token);
        } else if (hl_reply_nelem(r) != 2 || hl_reply_type(hl_reply_elem(r, 0)) != HL_R_INTEGER) {
            err = hl_node_reply_error(&c->nodes[i], r);
            failed |= bit;
        } else if (hl_reply_int(hl_reply_elem(r, 0)) == 1) {
            uint64_t f = (uint64_t)hl_reply_int(hl_reply_elem(r, 1));
            granted |= bit;
            if (f > fence) fence = f;
        } else {
            long long pttl = hl_reply_int(hl_reply_elem(r, 1));
            busy |= bit;
            if (pttl > 0 && (hint == 0 || pttl * 1000 < hint)) hint = pttl * 1000;
        }
    }
    hl_exec_clear(c);
    *hint_us = hint;

    if ((size_t)popcount(granted) >= c->quorum) {
        int64_t until = hl_valid_until(c, l->ttl_ms, t0);
        int64_t now = hl_now_us();
        if (until > now) {
            l->held = granted;
            l->fence = fence;
            l->valid_until_us = until;
            return hl_ok(c);
        }
        undo_on(c, granted, l->key, l->token, hl_add_sat(now, c->opt.io_timeout_ms * 1000));
        return hl_fail(c, HILOCK_ETIMEDOUT, "%s: acquired, but the round trip took %lld ms of a "
                       "%lld ms ttl: no validity left; undone", l->key,
                       (long long)((now - t0) / 1000), (long long)l->ttl_ms);
    }
    /* not granted: give back any partial grant at once, so it blocks nobody */
    undo_on(c, granted, l->key, l->token, hard_deadline);
    if (err != HILOCK_OK && (size_t)popcount(granted | busy) < c->quorum)
        return c->nnodes == 1 ? hl_fail(c, err, "%s", c->nodes[0].err)
                              : hl_fail_nodes(c, HILOCK_ENOQUORUM, failed, "");
    if ((size_t)popcount(granted | busy) < c->quorum) return unreached(c, failed, "");
    if (c->nnodes == 1) return hl_fail(c, HILOCK_BUSY, "%s: held by another owner", l->key);
    return hl_fail(c, HILOCK_BUSY, "%s: held by another owner on %d of %zu masters",
                   l->key, popcount(busy), c->nnodes);
}

/* Errors that a later attempt can cure (a server coming back); the rest end the wait. */
static int retryable(hilock_status st)
{
    return st == HILOCK_BUSY || st == HILOCK_EIO || st == HILOCK_ETIMEDOUT || st == HILOCK_ENOQUORUM;
}

hilock_status hilock_acquire(hilock_client *c, const char *key, int64_t ttl_ms, int64_t wait_ms,
                             hilock **out)
{
    hilock_status st;
    hilock *l;
    int64_t start, deadline, hard;
    if (out) *out = NULL;
    if (!c) return HILOCK_EINVAL;
    if (!out) return hl_fail(c, HILOCK_EINVAL, "out is NULL");
    if ((st = hl_check_key(c, key)) != HILOCK_OK) return st;
    if ((st = hl_check_ttl(c, ttl_ms)) != HILOCK_OK) return st;
    if (wait_ms < -1) return hl_fail(c, HILOCK_EINVAL, "wait_ms must be >= -1 (got %lld)", (long long)wait_ms);
    if (!(l = lock_new(c, key, ttl_ms))) return hl_fail(c, HILOCK_ENOMEM, "out of memory");

    start = hl_now_us();
    deadline = wait_ms < 0 ? HL_NEVER : hl_add_sat(start, wait_ms * 1000);
    hard = hl_add_sat(deadline, c->opt.io_timeout_ms * 1000);
    for (;;) {
        int64_t hint = 0;
        st = attempt(l, hard, &hint);
        if (st == HILOCK_OK) {
            *out = l;
            return st;
        }
        if (!retryable(st) || hl_now_us() >= deadline) break;
        hl_wait_turn(l, hint, deadline);
    }
    hilock_free(l);
    return st;
}

/* Run a tri-state script (release or extend) on every node. */
static tally run_tristate(hilock *l, const hl_script *s, int64_t ttl_ms, uint32_t *ok_out, int64_t *t0)
{
    hilock_client *c = l->c;
    hl_cmd cmd;
    char a_ttl[24];
    int64_t per = node_timeout_us(c, ttl_ms > 0 ? ttl_ms : l->ttl_ms);
    uint32_t ok;
    hl_cmd_init(&cmd, s, 1);
    hl_cmd_arg(&cmd, l->key, (size_t)-1);
    hl_cmd_arg(&cmd, l->token, (size_t)-1);
    if (ttl_ms > 0) hl_cmd_argi(&cmd, a_ttl, ttl_ms);
    *t0 = hl_now_us();
    ok = hl_exec(c, hl_all_nodes(c), &cmd, 1, per, hl_add_sat(*t0, per));
    *ok_out = ok;
    tally t = count_tristate(c, hl_all_nodes(c), ok);
    hl_exec_clear(c);
    return t;
}

/* NOT_HELD with the reason the servers gave. */
static hilock_status not_held(hilock *l, const tally *t, const char *op)
{
    const char *why = t->other ? "now held by another owner" : "expired or already released";
    return hl_fail(l->c, HILOCK_NOT_HELD, "%s %s: %s", op, l->key, why);
}

hilock_status hilock_release(hilock *l)
{
    hilock_client *c;
    uint32_t ok;
    int64_t t0;
    tally t;
    if (!l) return HILOCK_EINVAL;
    c = l->c;
    hl_keepalive_stop(l);   /* no renewal may outlive the release */
    if (l->released) return hl_fail(c, HILOCK_NOT_HELD, "release %s: already released", l->key);
    if (l->kind != HL_MODERN) return hl_legacy_release(l);
    t = run_tristate(l, &hl_lua_release, 0, &ok, &t0);
    if ((size_t)popcount(t.yes | t.gone | t.other) < c->quorum) {
        if (t.err != HILOCK_OK && c->nnodes == 1) return hl_fail(c, t.err, "%s", c->nodes[0].err);
        return unreached(c, t.failed, "release: ");
    }
    l->released = 1;
    l->valid_until_us = 0;
    if ((size_t)popcount(t.yes) >= c->quorum || (c->nnodes > 1 && t.yes && !t.other))
        return hl_ok(c);
    return not_held(l, &t, "release");
}

hilock_status hilock_extend(hilock *l, int64_t ttl_ms)
{
    hilock_client *c;
    hilock_status st;
    uint32_t ok;
    int64_t t0, until;
    tally t;
    if (!l) return HILOCK_EINVAL;
    c = l->c;
    if ((st = hl_check_ttl(c, ttl_ms)) != HILOCK_OK) return st;
    if (l->released) return hl_fail(c, HILOCK_EINVAL, "extend %s: the lock was released", l->key);
    if (l->kind != HL_MODERN) return hl_legacy_extend(l, ttl_ms);
    t = run_tristate(l, &hl_lua_extend, ttl_ms, &ok, &t0);
    if ((size_t)popcount(t.yes | t.gone | t.other) < c->quorum) {
        if (t.err != HILOCK_OK && c->nnodes == 1) return hl_fail(c, t.err, "%s", c->nodes[0].err);
        return unreached(c, t.failed, "extend: ");
    }
    if ((size_t)popcount(t.yes) < c->quorum) {
        l->valid_until_us = 0;
        return not_held(l, &t, "extend");
    }
    until = hl_valid_until(c, ttl_ms, t0);
    if (until <= hl_now_us()) {
        l->valid_until_us = 0;
        return hl_fail(c, HILOCK_ETIMEDOUT, "extend %s: the round trip used up the new ttl", l->key);
    }
    l->ttl_ms = ttl_ms;
    l->valid_until_us = until;
    l->held = t.yes;
    return hl_ok(c);
}

hilock_status hilock_check(hilock *l)
{
    hilock_client *c;
    hl_cmd cmd;
    uint32_t ok, all, yes = 0, answered = 0, failed = 0, other = 0;
    hilock_status err = HILOCK_OK;
    int64_t per;
    if (!l) return HILOCK_EINVAL;
    c = l->c;
    if (l->released) return hl_fail(c, HILOCK_NOT_HELD, "check %s: released", l->key);
    if (l->kind != HL_MODERN) return hl_legacy_check(l);
    all = hl_all_nodes(c);
    per = node_timeout_us(c, l->ttl_ms);
    hl_cmd_init(&cmd, NULL, 0);
    hl_cmd_arg(&cmd, "GET", 3);
    hl_cmd_arg(&cmd, l->key, (size_t)-1);
    ok = hl_exec(c, all, &cmd, 1, per, hl_add_sat(hl_now_us(), per));
    for (size_t i = 0; i < c->nnodes; i++) {
        uint32_t bit = 1u << i;
        hl_reply *r = c->nodes[i].reply[0];
        size_t len;
        const char *v;
        if (!(ok & bit)) { failed |= bit; continue; }
        if (hl_reply_type(r) == HL_R_ERROR) {
            err = hl_node_reply_error(&c->nodes[i], r);
            failed |= bit;
            continue;
        }
        answered |= bit;
        v = hl_reply_type(r) == HL_R_STRING ? hl_reply_str(r, &len) : NULL;
        if (v && len == strlen(l->token) && !memcmp(v, l->token, len)) yes |= bit;
        else if (v) other |= bit;
    }
    hl_exec_clear(c);
    if ((size_t)popcount(answered) < c->quorum) {
        if (err != HILOCK_OK && c->nnodes == 1) return hl_fail(c, err, "%s", c->nodes[0].err);
        return unreached(c, failed, "check: ");
    }
    if ((size_t)popcount(yes) >= c->quorum) return hl_ok(c);
    {
        tally t = { yes, 0, other, failed, HILOCK_OK };
        return not_held(l, &t, "check");
    }
}

int64_t hilock_validity_ms(const hilock *l)
{
    int64_t left;
    if (!l || l->released || !l->valid_until_us) return 0;
    left = (l->valid_until_us - hl_now_us()) / 1000;
    return left > 0 ? left : 0;
}

uint64_t hilock_fence(const hilock *l) { return l ? l->fence : 0; }
const char *hilock_token(const hilock *l) { return l ? l->token : NULL; }
const char *hilock_key(const hilock *l) { return l ? l->key : NULL; }

void hilock_free(hilock *l)
{
    if (!l) return;
    hl_keepalive_stop(l);
    free(l->key);
    free(l->fence_key);
    free(l->token);
    hl_client_unref(l->c);
    free(l);
}
