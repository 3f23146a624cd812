/* SPDX-License-Identifier: BSD-3-Clause */
/* permits.c -- the sorted-set kinds (kind.h): hl_kind_sem, a counting semaphore's permit
 * (hilock_sem_acquire), and hl_kind_exclusive / hl_kind_shared, the two modes of a
 * writer-preferring shared/exclusive lock (hilock_rw_acquire). All of it is one script,
 * permits.lua (its header gives the keys and answers), whose answers are acquire.lua's,
 * release.lua's, extend.lua's and check.lua's, so lock.c's quorum code runs them unchanged.
 *
 * The key is a sorted set of its holders' tokens, each scored with its expiry by the server's
 * clock (TIME, never a client's: a dead holder's permit returns after its ttl), plus a marker
 * member naming the kind. Every other key is in the key's slot (hl_aux_key): {key}:holders
 * (holder records), {key}:wq (waiters, so a waiting writer stops new readers and a release
 * knows whom to wake), the fence counter of the modern lock (tokens grow across every kind of
 * the key), and the wake-up lists: {key}:signal for permits, {key}:xsignal for writers and
 * {key}:ssignal for readers (wait.c blocks on the lock's own signal_key).
 *
 * A shared/exclusive token is the member itself, so every path that works by value (the
 * engine's undo, failover.lua's guard) finds it: "x:" or "s:" and then 30 of the 32 random hex
 * digits. A plain lock (hilock_acquire) on the key is an exclusive holder to it, and
 * acquire.lua takes an rw key as held, so the command's default and --shared exclude each
 * other. Needs Redis >= 3.2 (writes after TIME: HL_CAP_PERMITS). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kinds.h"

/* l->queued: 1, an attempt registered us as a waiter; LEAVING, the wait's last attempt (no
 * wait follows: mark_ms 0) also leaves, if it runs (permits.lua). Its busy answer clears it,
 * so the give_up sends no leave of its own; an answer lost (a timeout, an error, a Redlock's
 * masters, whose busy answers are not read one by one) keeps it, and the leave goes -- as it
 * does after a last attempt that began before the wait's end (lock.c: it registered again). */
#define LEAVING 2

/* The kind of a lock, read from the token its init gave it (init_keys): "x:..." an exclusive
 * grant, "s:..." a shared one, a bare hex token (no ':') a semaphore's permit. The one place
 * a lock's mode is kept, as on the server (its wq entries), not the address of its table. */
static int is_sem(const hilock *l) { return !(l->token[0] && l->token[1] == ':'); }

static const char *mode_of(const hilock *l)   /* permits.lua's ARGV[2] */
{
    return is_sem(l) ? "sem" : l->token[0] == 'x' ? "x" : "s";
}

/* The kind's keys, once; and the token's mode prefix, again after each new token (lock.c:
 * fresh_token). block: the list this waiter blocks on. */
static hilock_status init_keys(hilock *l, const char *prefix, const char *block)
{
    static const char *const sem_lists[] = { ":signal", NULL, NULL };
    static const char *const rw_lists[] = { ":xsignal", ":ssignal", ":signal" };
    const char *const *lists = prefix ? rw_lists : sem_lists;
    if (prefix) memcpy(l->token, prefix, 2);   /* (HL_TOKEN_LEN stays 32) */
    if (l->holders_key) return HILOCK_OK;
    l->holders_key = hl_aux_key(l->key, ":holders");
    l->wq_key = hl_aux_key(l->key, ":wq");
    l->watch_key = hl_aux_key(l->key, ":watch");
    for (int i = 0; i < 3; i++)
        if (lists[i] && !(l->wake_keys[i] = hl_aux_key(l->key, lists[i])))
            return hl_fail(l->c, HILOCK_ENOMEM, "out of memory");
    free(l->signal_key);
    l->signal_key = hl_aux_key(l->key, block);
    if (!l->holders_key || !l->wq_key || !l->watch_key || !l->signal_key) return hl_fail(l->c, HILOCK_ENOMEM, "out of memory");
    return HILOCK_OK;
}

static hilock_status sem_init(hilock *l) { return init_keys(l, NULL, ":signal"); }
static hilock_status exclusive_init(hilock *l) { return init_keys(l, "x:", ":xsignal"); }
static hilock_status shared_init(hilock *l) { return init_keys(l, "s:", ":ssignal"); }

/* permits.lua's keys and first arguments, the same for every operation (a release, and a
 * waiter's leave, add the wake-up lists; an acquire, the watch). */
static void permits_cmd(hilock *l, hl_cmd *cmd, const char *op, int release)
{
    int lists = !release ? 0 : is_sem(l) ? 1 : 3, acquire = !strcmp(op, "acquire");
    int readers = acquire && !strcmp(mode_of(l), "x");   /* a writer's last attempt wakes them */
    hl_cmd_init(cmd, &hl_lua_permits, 5 + lists + 2 * acquire + readers);
    cmd->need = HL_CAP_PERMITS;   /* writes after TIME: 3.2's redis.replicate_commands */
    hl_cmd_arg(cmd, l->key, (size_t)-1);
    hl_cmd_arg(cmd, l->holders_key, (size_t)-1);
    hl_cmd_arg(cmd, l->wq_key, (size_t)-1);
    hl_cmd_arg(cmd, l->fence_key, (size_t)-1);
    hl_cmd_arg(cmd, l->waiters_key, (size_t)-1);   /* a plain lock's writer waits (acquire.lua) */
    for (int i = 0; i < lists; i++) hl_cmd_arg(cmd, l->wake_keys[i], (size_t)-1);
    if (acquire) {   /* the list we block on, and the watch */
        hl_cmd_arg(cmd, l->signal_key, (size_t)-1);
        hl_cmd_arg(cmd, l->watch_key, (size_t)-1);
    }
    if (readers) hl_cmd_arg(cmd, l->wake_keys[1], (size_t)-1);
    hl_cmd_arg(cmd, op, (size_t)-1);
    hl_cmd_arg(cmd, mode_of(l), (size_t)-1);
    hl_cmd_arg(cmd, l->token, (size_t)-1);
}

static hilock_status permits_acquire_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b, int64_t mark_ms)
{
    permits_cmd(l, cmd, "acquire", 0);
    hl_cmd_argi(cmd, b->num[0], l->ttl_ms);
    hl_cmd_argi(cmd, b->num[1], is_sem(l) ? l->limit : HILOCK_SEM_LIMIT_MAX);
    hl_cmd_argi(cmd, b->num[2], mark_ms);
    hl_cmd_argi(cmd, b->num[3], l->ttl_ms + HL_FENCE_KEEP_MS);
    hl_cmd_argi(cmd, b->num[4], l->ttl_ms + HL_FENCE_EPOCH_KEEP_MS);   /* as modern.c */
    hl_cmd_arg(cmd, l->c->holder, (size_t)-1);
    /* an earlier attempt may have registered us; '2': and we come by our own poll, not woken
     * (wait.c; with wake = 0 every waiter polls: nobody blocks on a list to wake) */
    hl_cmd_arg(cmd, !l->queued ? "0" : l->woken || !l->c->opt.wake ? "1" : "2", 1);
    hl_watch_args(l, cmd, b, mark_ms);   /* the watch (wait.c): ARGV[11], ARGV[12] */
    if (mark_ms > 0) l->queued = 1;   /* registered as a waiter (the answer may be lost) */
    else if (l->queued) l->queued = LEAVING;
    return HILOCK_OK;
}

/* element i of a, if an integer, else dflt */
static long long int_at(const hl_reply *a, size_t i, long long dflt)
{
    const hl_reply *e = hl_reply_elem(a, i);
    return hl_reply_type(e) == HL_R_INTEGER ? hl_reply_int(e) : dflt;
}

/* {0, pttl, {why, held, limit}} (permits.lua): the BUSY message says who holds the key; the
 * pttl (the first holder's) is lock.c's hint. Any other third element is worded as a plain
 * holder's answer (a pure function of the reply, as the verdicts). A fourth, left > 0:
 * another waiter keeps the watch that long (wait.c). */
static int64_t permits_busy(hilock *l, const hl_reply *r)
{
    const hl_reply *w = hl_reply_elem(r, 2);
    long long why = int_at(w, 0, -1), held = int_at(w, 1, -1), limit = int_at(w, 2, -1);
    long long ms = int_at(r, 1, -2), left = hl_watch_left(r);
    char ttl[HL_BUSY_TTL_BUF], d[HL_MS_SHOWN_BUF];
    hilock_client *c = l->c;
    if (l->queued == LEAVING && hl_reply_type(r) == HL_R_ARRAY)
        l->queued = 0;   /* the answer came: that attempt left for us */
    if (left > 0) l->watch_left_ms = left;
    if (ms >= 0) hl_ms_shown(ms, d, sizeof d);
    if (why == 0 && held == 1 && limit == 1 && ms >= 0)   /* (not "1 of 1 permits") */
        hl_fail(c, HILOCK_BUSY, "%s: its one permit is held (limit 1), it expires in %s", l->shown, d);
    else if (why == 0 && held >= 0 && limit > 0 && ms >= 0)
        hl_fail(c, HILOCK_BUSY, "%s: %lld of %lld permits held (limit %d), the first expires in %s",
                l->shown, held, limit, l->limit, d);
    else if (why == 1 && ms >= 0)
        hl_fail(c, HILOCK_BUSY, "%s: held exclusive, expires in %s", l->shown, d);
    else if (why == 2 && held > 0 && ms >= 0)
        hl_fail(c, HILOCK_BUSY, "%s: held shared by %lld%s, the first expires in %s", l->shown, held,
                held >= HILOCK_SEM_LIMIT_MAX ? " (the most at once)" : "", d);
    else if ((why == 3 || why == 4) && held > 0)   /* (4: a plain lock's writer; 5, a plain lock
                                                      holding the key, is worded below) */
        hl_fail(c, HILOCK_BUSY, "%s: held shared by %lld (a writer waits)", l->shown, held);
    else if (why == 3 && held == 0)   /* (its turn has come: it takes the key next) */
        hl_fail(c, HILOCK_BUSY, "%s: a writer waits", l->shown);
    else if (why == 4 && held < 0)
        hl_fail(c, HILOCK_BUSY, "%s: a writer waits for the plain lock", l->shown);
    else
        hl_fail(c, HILOCK_BUSY, "%s: held by another owner%s", l->shown, hl_busy_ttl(l, r, ttl, sizeof ttl));
    return 0;
}

static int64_t permits_valid_until(const hilock *l, int64_t ttl_ms, int64_t t0_us)
{
    return hl_valid_until(l->c, ttl_ms, t0_us);
}

static hilock_status permits_extend_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b, int64_t ttl_ms)
{
    permits_cmd(l, cmd, "extend", 0);
    hl_cmd_argi(cmd, b->num[0], ttl_ms);
    return HILOCK_OK;
}

/* (also the undo of a grant given back at once: a freed permit wakes a waiter) */
static void permits_release_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b)
{
    (void)b;
    permits_cmd(l, cmd, "release", 1);
}

static void permits_check_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b)
{
    (void)b;
    permits_cmd(l, cmd, "check", 0);
}

static void leave_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b)
{
    (void)b;
    permits_cmd(l, cmd, "leave", 1);   /* (a writer's wakes the readers it held off) */
}

/* Leave the waiters now rather than lapse (a waiting writer holds readers off until then). */
static void permits_give_up(hilock *l, hl_deadline dl)
{
    if (l->wq_key) hl_kinds_leave(l, dl, leave_cmd);
}

/* Each of n masters counts its own holders, up to limit, and a holder needs q of them: h
 * holders fit exactly when h x q <= n x limit (laid round the masters in turn, no master counts
 * more than limit). So limit + 1 of them can each hold a quorum -- the limit broken, though no
 * master exceeds it -- exactly when (limit + 1) x q <= n x limit. With q = n/2 + 1 that
 * spares one master, two (every quorum is both) and four up to a limit of 2; any other n
 * only a limit of 1, the lock (docs/semaphore.md). */
static int sem_limit_breakable(size_t n, size_t q, int limit)
{
    return (uint64_t)(limit + 1) * q <= (uint64_t)n * (uint64_t)limit;
}

/* The largest limit n masters with quorum q keep (n > q; see above): limit x (n - q) < q. */
static int sem_limit_kept(size_t n, size_t q)
{
    return (int)((q - 1) / (n - q));
}

static hilock_status sem_refused(hilock_client *c, int limit)
{
    if (limit < 1 || limit > HILOCK_SEM_LIMIT_MAX)
        return hl_fail(c, HILOCK_EINVAL, "limit must be 1..%d (got %d)", HILOCK_SEM_LIMIT_MAX, limit);
    if (sem_limit_breakable(c->nnodes, c->quorum, limit))
        return hl_fail(c, HILOCK_EINVAL, "a semaphore over %zu masters cannot keep a limit of %d: each master "
                       "counts its own holders, so %d holders can each hold a quorum (%zu masters) while no "
                       "master counts more than %d; over %zu masters the largest limit kept is %d",
                       c->nnodes, limit, limit + 1, c->quorum, limit, c->nnodes,
                       sem_limit_kept(c->nnodes, c->quorum));
    if (c->opt.fair)
        return hl_fail(c, HILOCK_EINVAL, "%s", HL_SEM_NOT_FAIR);
    return HILOCK_OK;
}

/* The shared/exclusive lock's: not fair (its writer goes before new readers instead). */
static hilock_status rw_refused(hilock_client *c, int limit)
{
    (void)limit;
    return c->opt.fair ? hl_fail(c, HILOCK_EINVAL, "%s", HL_RW_NOT_FAIR) : HILOCK_OK;
}

#define PERMITS_KIND(nm, init_fn, what_s, plain, refused_fn)                               \
    {                                                                                    \
        .name = nm, .acquire_cmd = permits_acquire_cmd, .busy = permits_busy,            \
        .valid_until = permits_valid_until, .extend_cmd = permits_extend_cmd,            \
        .init = init_fn, .release_cmd = permits_release_cmd,                             \
        .check_cmd = permits_check_cmd, .undo_cmd = permits_release_cmd,                 \
        .give_up = permits_give_up, .refused = refused_fn,                               \
        .taken = "the key holds another kind now", .what = what_s,                       \
        .undo_unknown = 1,   /* a random token is ours alone: removed by member */       \
        .failover = 1, .wake = 1, .keepalive = 1,                                        \
        .queue = 1,          /* a waiting writer must be seen, also with wake = 0 */     \
        .plain_holder = plain,                                                           \
        .member = 1,         /* the token is a member of the set (guarded.lua) */        \
    }

const hl_kind_ops hl_kind_sem = PERMITS_KIND("permit", sem_init, "a semaphore", 0, sem_refused);
const hl_kind_ops hl_kind_exclusive = PERMITS_KIND("exclusive", exclusive_init, "a shared/exclusive lock", 1, rw_refused);
const hl_kind_ops hl_kind_shared = PERMITS_KIND("shared", shared_init, "a shared/exclusive lock", 1, rw_refused);
