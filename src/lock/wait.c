/* SPDX-License-Identifier: BSD-3-Clause */
/* wait.c -- how a waiter spends the time between two acquire attempts. Part of the quorum
 * code's acquire loop (lock.c calls it); reads the lock's kind only for its `wake` flag
 * (kind.h) and calls the engine.
 *
 * Wake-up (options.wake = 1, kinds whose release signals: the modern kind). A waiter blocks with BLPOP on the lock's signal
 * list, {key}:signal, and the release script pushes one element there, so a release wakes
 * one waiter (Redis serves the longest-blocked client first) and the next holder is one round
 * trip away: release -> the waiter's BLPOP returns -> the waiter's acquire.
 *   - Only awaited locks are signalled: an attempt that finds the lock busy and will wait
 *     marks it in the same script ({key}:waiters, expiring after the longest wait that can
 *     follow, hl_wait_mark_ms), and release.lua pushes only if that mark exists. So an
 *     uncontended release writes nothing more, and a release that lands between a waiter's
 *     busy attempt and its BLPOP is not missed: the element waits in the list.
 *   - The element expires after 1 s if nobody takes it (no waiter left, or one that gave
 *     up); a later waiter may then be woken once for nothing, and simply waits again.
 *   - A woken waiter must still win SET NX: a newcomer can barge in first (no FIFO). The
 *     woken one then waits again, and the newcomer's release wakes it.
 *   - Redlock: a waiter blocks on every master at once (hl_exec_any) and retries as soon as
 *     one master signals; the others are abandoned (their connections closed and reopened
 *     by the next attempt). Each master's element wakes its own oldest waiter, so a release
 *     wakes at most N waiters, usually one.
 *
 * Fair kind (fair.c): the same wait, on the waiter's own list ({key}:fs:<token>, its
 *   lock's signal_key), which only a release (or a call that finds the key free) pushes to,
 *   and only for the head of the queue: one wake-up, for the one waiter whose turn it is.
 *   The head keeps the watch: it pauses poll_ms; a waiter behind it pauses as behind a watch
 *   (fair_busy: l->watch_left_ms, a whole lease), its entry living that much longer.
 *   The `queue` flag makes hl_wait_mark_ms say "will wait" also with options.wake = 0, as a
 *   busy attempt joins the queue only then.
 *
 * How long a waiter blocks. Until the release signal, the holder's expiry (its PTTL, the busy
 * answer's hint_us), the caller's deadline or its pause, whichever comes first. poll_ms is the
 * fallback for what sends no signal -- a client that deletes the key without signalling
 * (another library, an operator's DEL), or a signal that a waiter took and died with (it was
 * frozen or killed between the server's pop and its own next attempt) -- so such a key is seen
 * free within poll_ms. It takes one waiter to see it, not all of them: the watch. A busy
 * attempt asks for the watch (l->watch_lease_ms, set by hl_wait_mark_ms: HL_WATCH_POLLS x
 * poll_ms, at most the wait left; acquire.lua). The waiter
 * that keeps it pauses 0.75-1 x poll_ms (hl_next_poll) and renews the lease at each attempt;
 * the busy answer tells each other waiter how long the lease has left (l->watch_left_ms), and
 * it pauses that long + 0-1 x poll_ms (hl_next_watch), at most its own lease + poll_ms: the
 * first to attempt after a watcher left (granted, gone, killed) takes the watch over, and so
 * does one whose lease is shorter (its poll_ms: each waiter's own bound holds while it keeps
 * the watch). The semaphore and the shared/exclusive lock keep theirs in {key}:watch
 * (permits.lua: a writer takes it from a reader, and a grant that came by a poll wakes those
 * that can hold beside it). Redlock: every master keeps a watch of its own, by its own
 * clock, but one watcher is enough, as each of its attempts asks every master: the watch that
 * counts is the first busy master's (the first of the client's list that answered busy, the
 * same for every waiter that reaches it; hl_watch_of_masters). A waiter polls if that one
 * names it (or none), else pauses through its lease. While a holder holds, the watcher costs
 * the server an attempt and a BLPOP per 0.875 x poll_ms (1 s by default), each other waiter
 * one of each per ~HL_WATCH_POLLS x poll_ms. A block that times out is followed by an
 * attempt at once.
 * The server ends a BLPOP by its own timer (every 1000/hz ms: 100 ms by default), so a wait
 * that nobody signals can end up to that much late; the round trip is allowed half of
 * io_timeout_ms beyond the wait (leaving the other half for the final attempt), after which
 * the connection is closed.
 *
 * Passing a signal on. A woken waiter attempts at once. If it meets a holder (a barger came
 * first), that holder's release will signal again: nothing is lost. If the attempt ends in an
 * error and the acquire gives up, the signal it took would be lost; the kind's give_up passes
 * it on (modern.c: release.lua's "pass" form pushes one element again when the key is free and
 * still awaited), l->woken saying that it took one.
 *
 * Where a waiter cannot block it polls every retry_delay_ms (hl_next_attempt): a server that
 * refuses BLPOP (an ACL, a proxy) costs one error reply per attempt; kinds without wake-up
 * (legacy, bridge: their fleets do not signal) and options.wake = 0 always. Before Redis 6.0
 * a BLPOP timeout is a whole number of seconds ("timeout is not an integer or out of range"),
 * so a pause is floored to whole seconds, and one shorter than a second blocks one second
 * when neither the caller's deadline nor the holder's PTTL ends sooner (else it polls); a
 * release still wakes it at once. A server whose version is not known (the first attempt runs
 * before the handshake; INFO refused) counts as whole seconds, for the mark as for the block
 * (hl_node_has): a mark sized for a fractional pause expired before a one-second block and
 * its release was not signalled. A fair waiter blocks on servers before 6.0 only when its
 * queue entry outlives the block (fair.c: 2 x io_timeout_ms + the longest pause). */
#include <stdio.h>
#include <string.h>

#include "kind.h"

/* Shorter pauses are slept: BLPOP cannot express less than 1 ms (and 0 means forever). */
#define MIN_BLOCK_US 2000

/* 1 if every master of c takes a fractional BLPOP timeout (6.0+), 0 if one takes whole
 * seconds only. */
static int fractional(const hilock_client *c)
{
    for (size_t i = 0; i < c->nnodes; i++)
        if (!hl_node_has(&c->nodes[i], HL_CAP_FLOAT_TIMEOUT)) return 0;
    return 1;
}

/* A waiter of l blocks on a release signal (else it polls every retry_delay_ms). */
static int blocks(const hilock *l)
{
    return l->c->opt.wake && l->kind->wake;
}

int64_t hl_pause_max_ms(const hilock *l)
{
    const hilock_client *c = l->c;
    if (!blocks(l)) return c->opt.retry_delay_ms * 3 / 2 + 1;
    /* a queue's waiter behind its head pauses through the head's watch: a lease and a poll */
    return (l->kind->queue ? (HL_WATCH_POLLS + 1) * c->opt.poll_ms : c->opt.poll_ms) + 1;
}

/* A waiter may block one whole second past its pause (servers before 6.0; not the fair
 * queue's, whose entry may not outlive it). The semaphore's and the shared lock's waiters
 * do: without it, a pause shorter than a second polled every retry_delay_ms instead of
 * waiting for the release's signal. */
static int second_blocks(const hilock *l)
{
    return !l->kind->fifo && !fractional(l->c);
}

void hl_watch_args(hilock *l, hl_cmd *cmd, hl_kind_buf *b, int64_t mark_ms)
{
    hl_cmd_argi(cmd, b->num[5], mark_ms > 0 ? l->watch_lease_ms : 0);
    hl_cmd_argi(cmd, b->num[6], HL_WATCH_POLLS * l->c->opt.poll_ms);
    l->watch_left_ms = 0;
}

int64_t hl_wait_mark_ms(hilock *l, int64_t wait_end)
{
    const hilock_client *c = l->c;
    int64_t now = hl_now_us(), w;
    l->watch_lease_ms = 0;
    /* (a queue must hear of every wait, also when it is spent polling; so must readers of a
     * plain lock's writer behind them -- l->queued, modern.c: its mark holds them off) */
    if ((!c->opt.wake && !l->kind->queue && !l->queued) || !l->kind->wake || wait_end <= now) return 0;
    if (blocks(l)) {   /* the watch: no longer than the wait */
        l->watch_lease_ms = HL_WATCH_POLLS * c->opt.poll_ms;
        if ((wait_end - now) / 1000 + 1 < l->watch_lease_ms) l->watch_lease_ms = (wait_end - now) / 1000 + 1;
    }
    w = hl_pause_max_ms(l) * 1000;   /* the longest pause this waiter takes */
    if (w < 1000000 && second_blocks(l)) w = 1000000;   /* or the one-second block */
    if (wait_end - now < w) w = wait_end - now;
    /* + the allowance for a late BLPOP and the round trips around it */
    return (w + c->opt.io_timeout_ms * 1000) / 1000 + 1;
}

int64_t hl_watch_left(const hl_reply *r)
{
    const hl_reply *w = hl_reply_nelem(r) == 4 ? hl_reply_elem(r, 3) : NULL;
    return w && hl_reply_type(w) == HL_R_INTEGER && hl_reply_int(w) > 0 ? hl_reply_int(w) : 0;
}

void hl_watch_of_masters(hilock *l, uint32_t busy)
{
    const hilock_client *c = l->c;
    l->watch_left_ms = 0;
    for (size_t i = 0; i < c->nnodes; i++)
        if (busy & (1u << i)) {   /* the first busy master's watch is the one that counts */
            l->watch_left_ms = hl_watch_left(c->nodes[i].reply[0]);
            return;
        }
}

/* Until when a waiter blocks, given its pause's end: the pause itself where the servers take
 * a fractional timeout; else whole seconds of it, or one second where the pause is shorter
 * and neither the wait's end nor the holder's PTTL (hint_us) comes first; 0: no block (poll). */
static int64_t block_end(const hilock *l, int64_t pause_end, int64_t hint_us, int64_t wait_end)
{
    int64_t now = hl_now_us(), bound = wait_end;
    if (fractional(l->c)) return pause_end;
    if (pause_end - now >= 1000000) return now + (pause_end - now) / 1000000 * 1000000;
    if (hint_us > 0 && now + hint_us < bound) bound = now + hint_us;
    return second_blocks(l) && bound - now >= 1000000 ? now + 1000000 : 0;
}

/* Block on the signal list of every master until `end`, at most. 1: a release woke us;
 * 0: the time ran out (some master answered nil); -1: no master answered (an error, a
 * refused BLPOP, a connection lost): poll instead. */
static int block_on_signal(hilock *l, int64_t end)
{
    hilock_client *c = l->c;
    hl_cmd cmd;
    char secs[32];
    int64_t now = hl_now_us(), late = c->opt.io_timeout_ms * 500;
    long long ms = (long long)((end - now) / 1000);
    uint32_t ok;
    int woken = -1;
    if (ms < 1) ms = 1;
    if (fractional(c)) snprintf(secs, sizeof secs, "%lld.%03lld", ms / 1000, ms % 1000);
    else   /* block_end gave whole seconds from a moment ago: the nearest (never 0: forever) */
        snprintf(secs, sizeof secs, "%lld", (ms + 500) / 1000 > 0 ? (ms + 500) / 1000 : 1);
    hl_cmd_init(&cmd, NULL, 0);
    hl_cmd_arg(&cmd, "BLPOP", 5);
    hl_cmd_arg(&cmd, l->signal_key, (size_t)-1);
    hl_cmd_arg(&cmd, secs, (size_t)-1);
    /* one round trip: the block, and half of io_timeout_ms for the server's late timer */
    ok = hl_exec_any(c, hl_all_nodes(c), &cmd, 1, hl_deadline_of(end - now + late, hl_add_sat(end, late)));
    for (size_t i = 0; i < c->nnodes; i++) {   /* [list, element]; nil when the time ran out */
        int t = ok & (1u << i) ? hl_reply_type(c->nodes[i].reply[0]) : HL_R_ERROR;
        if (t == HL_R_ARRAY) woken = 1;
        else if (t == HL_R_NIL && woken < 0) woken = 0;
    }
    hl_exec_clear(c);
    return woken;
}

/* The next attempt may go behind the block in one write (lock.h, hl_behind_block):
 *   - one master: a Redlock's masters end their BLPOPs apart, and an attempt behind each
 *     would wait out every block that no signal ends;
 *   - the blocking runner: an event loop's flow that is cancelled or freed leaves its
 *     blocked connection to the loop, where the attempt behind it could still be granted,
 *     to nobody (here a round trip cut short closes its connection: a pending command dies
 *     with it, and one that ran is undone by token on the next contact);
 *   - not a queue: the fair lock grants only a head that takes the key itself, never one
 *     frozen (SIGSTOP) in its block; the semaphore's and the shared lock's attempt says
 *     whether a signal ended the wait (permits.c), which one sent behind the block cannot
 *     know. A frozen waiter of the other kinds may be granted behind its block and holds
 *     the key for its ttl at most, as a frozen holder would;
 *   - a fractional timeout (6.0+); the connection the last attempt used still open (its
 *     script is cached there: a NOSCRIPT would send the BLPOP again); no BLPOP refused yet;
 *   - a block no longer than a quarter of the ttl: the grant's validity counts from the
 *     write, before the block. */
static int behind_ok(const hilock *l, int64_t block)
{
    const hilock_client *c = l->c;
    return c->nnodes == 1 && !c->runner && !l->kind->queue && fractional(c) && !l->no_behind &&
           !l->kind->busy_cmd && hl_node_connected(c, &c->nodes[0]) &&
           block - hl_now_us() <= l->ttl_ms * 250;   /* (a quarter of the ttl, in us) */
}

int64_t hl_behind_block(hilock *l, hl_cmd *cmd, char *secs, int64_t until, int64_t now)
{
    long long ms = (long long)((until - now) / 1000);
    if (ms < 1) ms = 1;
    snprintf(secs, 32, "%lld.%03lld", ms / 1000, ms % 1000);
    hl_cmd_init(cmd, NULL, 0);
    hl_cmd_arg(cmd, "BLPOP", 5);
    hl_cmd_arg(cmd, l->signal_key, (size_t)-1);
    hl_cmd_arg(cmd, secs, (size_t)-1);
    return ms * 1000 + l->c->opt.io_timeout_ms * 500;   /* + half io_timeout_ms: a late timer */
}

void hl_behind_read(hilock *l)
{
    hl_node *n = &l->c->nodes[0];
    hl_reply *r = n->reply[0];
    l->woken = r && hl_reply_type(r) == HL_R_ARRAY;
    if (r && hl_reply_type(r) == HL_R_ERROR) l->no_behind = 1;   /* (an ACL, a proxy) */
    hl_reply_free(r);
    memmove(&n->reply[0], &n->reply[1], (HL_MAX_CMDS - 1) * sizeof n->reply[0]);
    n->reply[HL_MAX_CMDS - 1] = NULL;
}

int hl_wait_turn(hilock *l, int64_t hint_us, int64_t wait_end)
{
    hilock_client *c = l->c;
    l->woken = 0;
    if (blocks(l)) {
        int64_t lease = HL_WATCH_POLLS * c->opt.poll_ms, left = l->watch_left_ms;
        int64_t pause_end = left > 0 ? hl_next_watch(c, left < lease ? left : lease, hint_us, wait_end)
                                     : hl_next_poll(c, hint_us, wait_end);
        int64_t block = block_end(l, pause_end, hint_us, wait_end);
        if (block - hl_now_us() >= MIN_BLOCK_US && behind_ok(l, block)) {
            l->block_to_us = block;   /* the next attempt blocks first (lock.h) */
            return 0;
        }
        if (block - hl_now_us() >= MIN_BLOCK_US) {
            int w = block_on_signal(l, block);
            if (w >= 0) return l->woken = w;   /* signalled, or the block ran out: attempt now */
        }
    }
    /* no block (wake off, a kind that polls, a pause too short to block, BLPOP refused): the
     * retry pause, at once if over */
    hl_pause_until(c, hl_next_attempt(c, hint_us, wait_end));
    return 0;
}
