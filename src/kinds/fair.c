/* SPDX-License-Identifier: BSD-3-Clause */
/* fair.c -- the fair lock kind (hl_kind_fair, kind.h; options.fair; docs/fairness.md): the
 * modern lock (same token, fencing token, extend, check) whose waiters are served first come,
 * first served. All of it is one script, fair.lua, whose answers are acquire.lua's and
 * release.lua's, so lock.c's quorum code runs it unchanged.
 *
 * The queue lives in the lock key's hash slot (hl_aux_key): {key}:fq, a list of the waiters'
 * tokens in arrival order, and {key}:fb, a sorted set of when each entry lapses by the
 * server's clock (TIME), never a client's. A busy attempt that will wait joins the tail (or
 * refreshes its entry: every attempt is a heartbeat); the free key goes only to the head; a
 * release (or an undo of a grant: undo_cmd, undo.lua) deletes the key and pushes one element to the head's own signal list
 * ({key}:fs:<token>), on which that waiter alone blocks (wait.c), so the releaser, which asks
 * again at once, finds the queue ahead of it and joins the tail.
 *
 * Why an entry lapses BEAT_LIFE after its waiter's last call: a live waiter calls again
 * within one pause (at most hl_pause_max_ms: (HL_WATCH_POLLS + 1) x poll_ms while it blocks
 * -- the head polls every poll_ms, a waiter behind it pauses through a watch's lease, so a
 * waiter costs the server ~0.6 calls a second, not 2.3 --, 1.5 x retry_delay_ms while it
 * polls) plus a late BLPOP (at most io_timeout_ms / 2) plus one round trip (at most
 * io_timeout_ms), which is less than 2 x io_timeout_ms + that pause (the defaults: 6 s; a
 * waiter blocked on a whole-second BLPOP, before Redis 6.0, too). The queue's
 * keys expire with its longest-lived entry (clients' lives differ with their options). A
 * waiter that died, froze or went away therefore blocks the others for at most that after
 * its last call: every script drops lapsed entries first, and a
 * waiter behind a head that holds the free key is told to try again when the head's entry
 * lapses. A waiter that gives up (its wait ran out, or an error) leaves at once (give_up).
 * No key is handed to a waiter: the head takes the free key itself, so a dead head holds no
 * grant, only its place until its entry lapses. Every key expires BEAT_LIFE after the last
 * call of any waiter; a waiter pruned while alive (a server frozen longer than that) joins
 * again at the tail.
 *
 * One server (direct or Sentinel) only: queues on several masters cannot agree on one order
 * (client.c refuses fair with several servers, and with bridge). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kinds.h"

static int64_t beat_life_ms(const hilock *l)
{
    return 2 * l->c->opt.io_timeout_ms + hl_pause_max_ms(l);
}

/* The queue's keys and this waiter's own signal list, named after its token (again after
 * each new token: lock.c's fresh_token). */
static hilock_status fair_init(hilock *l)
{
    char suffix[64];
    snprintf(suffix, sizeof suffix, ":fs:%s", l->token);
    free(l->signal_key);
    free(l->queue_key);
    free(l->beat_key);
    l->signal_key = hl_aux_key(l->key, suffix);
    l->queue_key = hl_aux_key(l->key, ":fq");
    l->beat_key = hl_aux_key(l->key, ":fb");
    if (!l->signal_key || !l->queue_key || !l->beat_key) {
        l->queued = 0;   /* no names left to leave by: an entry of the old token lapses */
        return hl_fail(l->c, HILOCK_ENOMEM, "out of memory");
    }
    return HILOCK_OK;
}

/* fair.lua's keys and first arguments, the same for every operation. */
static void fair_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b, const char *op)
{
    hl_cmd_init(cmd, &hl_lua_fair, 5);
    cmd->need = HL_CAP_FAIR;   /* writes after TIME: 3.2's redis.replicate_commands */
    hl_cmd_arg(cmd, l->key, (size_t)-1);
    hl_cmd_arg(cmd, l->queue_key, (size_t)-1);
    hl_cmd_arg(cmd, l->beat_key, (size_t)-1);
    hl_cmd_arg(cmd, l->fence_key, (size_t)-1);
    hl_cmd_arg(cmd, l->signal_key, (size_t)-1);
    hl_cmd_arg(cmd, op, (size_t)-1);
    hl_cmd_arg(cmd, l->token, (size_t)-1);
    hl_cmd_argi(cmd, b->num[0], beat_life_ms(l));
    hl_cmd_arg(cmd, l->signal_key, strlen(l->signal_key) - strlen(l->token));   /* the prefix */
}

static hilock_status fair_acquire_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b, int64_t mark_ms)
{
    fair_cmd(l, cmd, b, "acquire");
    hl_cmd_argi(cmd, b->num[1], l->ttl_ms);
    hl_cmd_argi(cmd, b->num[2], l->ttl_ms + HL_FENCE_KEEP_MS);
    hl_cmd_arg(cmd, mark_ms > 0 ? "1" : "0", 1);
    hl_cmd_argi(cmd, b->num[3], l->ttl_ms + HL_FENCE_EPOCH_KEEP_MS);   /* as modern.c */
    hl_cmd_argcap(cmd, HL_CAP_LPOS);   /* its busy path's portable form before 6.0.6 */
    if (mark_ms > 0) l->queued = 1;   /* until an answer says otherwise (it may be lost) */
    return HILOCK_OK;
}

/* {0, pttl, ahead}: lock.c takes the pttl as the hint; ahead says where we stand. */
static int64_t fair_busy(hilock *l, const hl_reply *r)
{
    const hl_reply *a = hl_reply_elem(r, 2);
    long long ahead = hl_reply_type(a) == HL_R_INTEGER ? hl_reply_int(a) : -1;
    char ttl[HL_BUSY_TTL_BUF];
    l->queued = ahead >= 0;
    /* the head keeps the queue's watch (it sees a key freed without a signal within poll_ms);
     * a waiter behind it only beats, once per lease (its entry lives through that: beat_life_ms).
     * Its turn comes by a signal to its own list, or by any call that finds the key free */
    l->watch_left_ms = ahead > 0 ? HL_WATCH_POLLS * l->c->opt.poll_ms : 0;
    if (ahead >= 0)
        hl_fail(l->c, HILOCK_BUSY, "%s: held by another owner, or its turn is another's: %lld "
                "waiter(s) queued ahead of us (fair)", l->shown, ahead);
    else if (ahead == -1)
        hl_fail(l->c, HILOCK_BUSY, "%s: held by another owner%s", l->shown, hl_busy_ttl(l, r, ttl, sizeof ttl));
    else
        hl_fail(l->c, HILOCK_BUSY, "%s: held by another owner, or %lld waiter(s) queued first "
                "(fair: no passing the queue)", l->shown, -1 - ahead);
    return 0;
}

static int64_t fair_valid_until(const hilock *l, int64_t ttl_ms, int64_t t0_us)
{
    return hl_valid_until(l->c, ttl_ms, t0_us);
}

static hilock_status fair_extend_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b, int64_t ttl_ms)
{
    return hl_kind_modern.extend_cmd(l, cmd, b, ttl_ms);   /* a fair grant is a modern lock */
}

static void fair_release_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b)
{
    fair_cmd(l, cmd, b, "release");
}

/* A grant given back at once (lock.c undo_on: its validity gone, an error reply after it):
 * the release's command, so the head is called as after a release -- else it would block
 * for its poll_ms before finding the key free. (The engine's undo, undo.lua, calls it too.) */
static void fair_undo_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b)
{
    fair_cmd(l, cmd, b, "release");
}

static void leave_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b)
{
    fair_cmd(l, cmd, b, "leave");
}

/* Leave the queue now rather than lapse, within the acquire's bound (else it lapses). */
static void fair_give_up(hilock *l, hl_deadline dl)
{
    if (!l->queue_key || !l->beat_key || !l->signal_key) return;   /* (init: no memory) */
    hl_kinds_leave(l, dl, leave_cmd);
}

const hl_kind_ops hl_kind_fair = {
    .name = "fair",
    .acquire_cmd = fair_acquire_cmd,
    .busy = fair_busy,
    .valid_until = fair_valid_until,
    .usable = NULL,
    .extend_cmd = fair_extend_cmd,
    .extend_end = NULL,
    .init = fair_init,
    .release_cmd = fair_release_cmd,
    .undo_cmd = fair_undo_cmd,
    .give_up = fair_give_up,
    .taken = "now held by another owner",
    .undo_unknown = 1,   /* a random token is ours alone (undo.lua calls the head) */
    .failover = 1,
    .wake = 1,           /* on this waiter's own signal list */
    .keepalive = 1,
    .queue = 1,
    .fifo = 1,
};
