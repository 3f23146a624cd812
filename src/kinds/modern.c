/* SPDX-License-Identifier: BSD-3-Clause */
/* modern.c -- the modern lock kinds (kind.h): hl_kind_modern, SET NX PX of a random token
 * with a fencing token minted in the same script (acquire.lua), compare-and-pexpire extend;
 * and hl_kind_unfenced, the same lock without the fencing token (options.fencing = 0).
 * Owns only its commands and the reading of its busy answer; the quorum, undo, fencing and
 * validity rules that run them are lock.c's. May call the engine (commands) only. */
#include <stdlib.h>

#include "kinds.h"

/* The client's memo of the holder record its last grant of the key of hash h left (client.h):
 * that key's entry of its bucket, else (take) the one to take over -- the sooner to lapse --
 * or NULL. */
static hl_record_memo *record_memo(const hilock *l, uint64_t h, int take)
{
    hl_record_memo *m = l->c->record_memo, *old;
    if (!m) return NULL;
    m += HL_RECORD_WAYS * (h % (HL_RECORD_MEMO / HL_RECORD_WAYS));
    old = m;
    for (int i = 0; i < HL_RECORD_WAYS; i++) {
        if (m[i].key == h) return &m[i];
        if (m[i].till_us < old->till_us) old = &m[i];
    }
    return take ? old : NULL;
}

static hilock_status modern_acquire_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b, int64_t mark_ms)
{
    const hl_record_memo *m = l->c->nnodes == 1 ? record_memo(l, hl_key_hash(l->key), 0) : NULL;
    hl_cmd_init(cmd, &hl_lua_acquire, 4);
    hl_cmd_arg(cmd, l->key, (size_t)-1);
    hl_cmd_arg(cmd, l->fence_key, (size_t)-1);
    hl_cmd_arg(cmd, l->waiters_key, (size_t)-1);   /* a waiter marks the lock (wait.c) */
    hl_cmd_arg(cmd, l->holder_key, (size_t)-1);    /* who holds it, for inspect (base.h: tag) */
    hl_cmd_arg(cmd, l->token, (size_t)-1);
    hl_cmd_argi(cmd, b->num[0], l->ttl_ms);
    hl_cmd_argi(cmd, b->num[1], l->ttl_ms + HL_FENCE_KEEP_MS);
    hl_cmd_argclock(cmd);   /* each master's own clock: its token's floor */
    hl_cmd_argi(cmd, b->num[2], mark_ms);
    hl_cmd_argi(cmd, b->num[3], l->ttl_ms + HL_FENCE_EPOCH_KEEP_MS);
    hl_cmd_arg(cmd, l->c->record, (size_t)-1);
    /* we waited behind readers: our mark, which holds new readers off, is cut to one retry
     * pause (1.5 x retry_delay_ms) -- not to a blocking waiter's pause (poll_ms), which
     * would hold readers off that long after our turn. Another plain writer blocked on the
     * signal meanwhile may then see our release at its poll, where its next attempt marks
     * the lock again (docs/rwlock.md) */
    hl_cmd_argi(cmd, b->num[4], l->queued ? l->c->opt.retry_delay_ms * 3 / 2 + 1 : 0);
    hl_watch_args(l, cmd, b, mark_ms);   /* the watch (wait.c): ARGV[9], ARGV[10] */
    hl_cmd_argi(cmd, b->num[7], HL_RECORD_KEEP(l->ttl_ms));
    /* our last grant's record lives long enough: the script leaves it unread unless another
     * grant came since (ARGV[12]). Not for a Redlock: its masters' counters differ */
    if (m && m->till_us - hl_now_us() >= HL_RECORD_RENEW(l->ttl_ms) * 1000)
        hl_cmd_argi(cmd, b->num[8], (long long)m->count);
    return HILOCK_OK;
}

/* One master granted: remember the counter and, if the script read the record (kept_ms >= 0),
 * how long it lives; a grant that skipped it (kept_ms -1) only moves the count of the key's
 * entry. Out of memory for the table: nothing is remembered (each grant reads the record). */
static void modern_granted(hilock *l, uint64_t count, int64_t kept_ms, int64_t t0_us)
{
    uint64_t h = hl_key_hash(l->key);
    hl_record_memo *m;
    if (!l->c->record_memo && kept_ms >= 0)
        l->c->record_memo = calloc(HL_RECORD_MEMO, sizeof *l->c->record_memo);
    if (!(m = record_memo(l, h, kept_ms >= 0))) return;
    m->key = h;
    m->count = count;
    if (kept_ms >= 0) m->till_us = hl_add_sat(t0_us, kept_ms * 1000);
}

/* The holder's PTTL (in the reply) is the hint the quorum code takes; the message says it.
 * {0, pttl, n}: a shared/exclusive lock holds the key (n shared grants, -1 an exclusive one),
 * and our mark (acquire.lua) holds new readers off until our grant deletes it (one master:
 * several call busy() not at all, and their mark lapses by itself). Its holders renew their
 * grants, so the key's PTTL is when it frees only if they stop: the message says so. */
static int64_t modern_busy(hilock *l, const hl_reply *r)
{
    char ttl[HL_BUSY_TTL_BUF], d[HL_MS_SHOWN_BUF];
    const hl_reply *n = hl_reply_elem(r, 2), *ms = hl_reply_elem(r, 1);
    long long held = hl_reply_type(n) == HL_R_INTEGER ? hl_reply_int(n) : 0;
    l->queued = hl_reply_nelem(r) == 3;
    /* {0, pttl, 'watch', left}: left > 0, another waiter keeps the watch that long (wait.c) */
    if (hl_watch_left(r) > 0) l->watch_left_ms = hl_watch_left(r);
    if (l->queued && held != 0 && hl_reply_type(ms) == HL_R_INTEGER && hl_reply_int(ms) >= 0) {
        hl_ms_shown(hl_reply_int(ms), d, sizeof d);
        if (held < 0)
            hl_fail(l->c, HILOCK_BUSY, "%s: held exclusive (a shared/exclusive lock's writer, who renews its "
                    "grant: it expires in %s unless renewed)", l->shown, d);
        else
            hl_fail(l->c, HILOCK_BUSY, "%s: held shared by %lld reader%s, who renew their grants (the last "
                    "expires in %s unless renewed)", l->shown, held, held == 1 ? "" : "s", d);
        return 0;
    }
    hl_fail(l->c, HILOCK_BUSY, "%s: held by another owner%s", l->shown, hl_busy_ttl(l, r, ttl, sizeof ttl));
    return 0;
}

static int64_t modern_valid_until(const hilock *l, int64_t ttl_ms, int64_t t0_us)
{
    return hl_valid_until(l->c, ttl_ms, t0_us);
}

static hilock_status modern_extend_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b, int64_t ttl_ms)
{
    int holder = l->kind->holder;   /* (fair's extend is this one too: no record there) */
    hl_cmd_init(cmd, &hl_lua_extend, holder ? 2 : 1);
    hl_cmd_arg(cmd, l->key, (size_t)-1);
    if (holder) hl_cmd_arg(cmd, l->holder_key, (size_t)-1);
    hl_cmd_arg(cmd, l->token, (size_t)-1);
    hl_cmd_argi(cmd, b->num[0], ttl_ms);
    if (holder) hl_cmd_argi(cmd, b->num[1], HL_RECORD_KEEP(ttl_ms));
    return HILOCK_OK;
}

/* A waiter whose acquire ends without the lock sends release.lua's 'pass' form, within the
 * acquire's bound, when it leaves something behind:
 *   - woken (l->woken): its attempt after the signal failed (an error, or a cancel), so it
 *     took a release signal that no grant followed: it is passed on, and the next waiter does
 *     not wait for its poll (a waiter that met a holder sends it too: the script pushes nothing
 *     while the key is held; that holder's release will);
 *   - it met readers (l->queued): its mark holds new readers off, so it is cut to one retry
 *     pause, as a grant would have cut it (acquire_cmd), not left for poll_ms. */
static void modern_pass_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b)
{
    hl_cmd_init(cmd, &hl_lua_release, 3);
    hl_cmd_arg(cmd, l->key, (size_t)-1);
    hl_cmd_arg(cmd, l->signal_key, (size_t)-1);
    hl_cmd_arg(cmd, l->waiters_key, (size_t)-1);
    hl_cmd_arg(cmd, l->token, (size_t)-1);
    hl_cmd_arg(cmd, "pass", 4);
    hl_cmd_argi(cmd, b->num[0], l->queued ? l->c->opt.retry_delay_ms * 3 / 2 + 1 : 0);
}

static void modern_give_up(hilock *l, hl_deadline dl)
{
    if (l->woken || l->queued) hl_kinds_send(l, dl, modern_pass_cmd);
}

const hl_kind_ops hl_kind_modern = {
    .name = "lock",
    .acquire_cmd = modern_acquire_cmd,
    .busy = modern_busy,
    .valid_until = modern_valid_until,
    .usable = NULL,
    .extend_cmd = modern_extend_cmd,
    .extend_end = NULL,
    .give_up = modern_give_up,
    .granted = modern_granted,
    .taken = "now held by another owner",
    .undo_unknown = 1,   /* a random token is ours alone: deleting it by value is safe */
    .failover = 1,
    .wake = 1,
    .keepalive = 1,
    .holder = 1,
};

/* ---- hl_kind_unfenced (options.fencing = 0) ----
 * The same lock as hl_kind_modern -- the same value, ttl, release, extend and check, wake-up,
 * undo and failover part -- written by the plain command a lock without fencing needs: a
 * grant is one SET NX PX, with nothing in Lua and no {key}:fence write. What acquire.lua does
 * besides on a busy answer (mark the lock awaited, read the holder's PTTL) costs a second
 * round trip, on that path only (acquire_busy.lua, kind.h: busy_cmd). No holder record
 * either: that would be a second write, i.e. a script. Both kinds write a
 * random token with SET NX, so fenced and unfenced clients exclude each other on one key. */

static hilock_status unfenced_acquire_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b, int64_t mark_ms)
{
    (void)mark_ms;   /* marked by the busy command, if the lock is busy */
    hl_cmd_init(cmd, NULL, 0);
    hl_cmd_arg(cmd, "SET", 3);
    hl_cmd_arg(cmd, l->key, (size_t)-1);
    hl_cmd_arg(cmd, l->token, (size_t)-1);
    hl_cmd_arg(cmd, "NX", 2);
    hl_cmd_arg(cmd, "PX", 2);
    hl_cmd_argi(cmd, b->num[0], l->ttl_ms);
    return HILOCK_OK;
}

static hilock_status unfenced_busy_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b, int64_t mark_ms)
{
    hl_cmd_init(cmd, &hl_lua_acquire_busy, 2);
    hl_cmd_arg(cmd, l->key, (size_t)-1);
    hl_cmd_arg(cmd, l->waiters_key, (size_t)-1);
    hl_cmd_arg(cmd, l->token, (size_t)-1);
    hl_cmd_argi(cmd, b->num[0], mark_ms);
    return HILOCK_OK;
}

/* r: acquire_busy.lua's answer (NULL: none came). -2: the holder left between the SET and
 * it: try again at once; else the PTTL (lock.c takes it as the hint). */
static int64_t unfenced_busy(hilock *l, const hl_reply *r)
{
    if (hl_reply_type(r) == HL_R_INTEGER && hl_reply_int(r) == -2) {
        hl_fail(l->c, HILOCK_BUSY, "%s: held by another owner until just now", l->shown);
        return -1;
    }
    return modern_busy(l, r);
}

const hl_kind_ops hl_kind_unfenced = {
    .name = "lock",       /* (a lock without fencing is still a lock) */
    .acquire_cmd = unfenced_acquire_cmd,
    .acquire_verdict = hl_set_nx_verdict,
    .busy_cmd = unfenced_busy_cmd,
    .busy = unfenced_busy,
    .valid_until = modern_valid_until,
    .usable = NULL,
    .extend_cmd = modern_extend_cmd,
    .extend_end = NULL,
    .give_up = modern_give_up,
    .taken = "now held by another owner",
    .undo_unknown = 1,   /* as modern: the token is ours alone */
    .failover = 1,       /* failover.lua and WAIT follow the SET in the same pipeline */
    .wake = 1,
    .keepalive = 1,
};
