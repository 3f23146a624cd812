/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kind.h -- lock kinds as tables of operations. Nothing here is API.
 *
 * The lock layer's side of the kinds (the kinds live above it: src/kinds/, legacy/; their
 * folder headers say what they may call). lock.c runs every kind's flows through the lock's
 * table (l->kind) and names no kind; a kind calls the engine's commands and the lock layer's
 * shared helpers (lock.h: the reply verdicts, hl_busy_ttl, hl_valid_until), never lock.c's
 * flows.
 *
 * A kind is one hl_kind_ops table: the acquire command, how to read a busy answer, validity,
 * the extend command, whether the lock is still usable, and flags for what the shared flows
 * do for it. Release and check are by default the same commands for every kind (release.lua,
 * check.lua: a compare of the exact value) and are judged by the same verdicts (lock.c), so a
 * kind only says whether a release wakes waiters. A new kind (the fair lock, a modern lock
 * without a fencing token) is one more table, not a branch in lock.c; one whose release
 * differs (the fair lock's, which calls the head of its queue: release_cmd) or that keeps
 * state of its own between attempts (init, give_up) adds an entry for that, NULL meaning
 * today's behaviour.
 *
 * Why the entry points that pick a table sit in src/api/ (above the other layers and legacy/):
 * hilock_acquire must reach legacy/'s bridge table while nothing in src/ names legacy/. A
 * pointer registered by legacy/ at run time would be missing in a static link that pulls in
 * no legacy/ object; a thin file above both that names both tables is linked whenever
 * hilock_acquire is, and keeps every edge pointing down.
 */
#ifndef HILOCK_KIND_H
#define HILOCK_KIND_H

#include "lock.h"

/* A kind's scratch for one command (lives for the round trip): integer arguments, and a
 * value the command writes with its stamp (legacy: the fresh stamp of an extend, kept out
 * of the lock until a quorum has it). */
typedef struct hl_kind_buf {
    char    num[9][24];
    char    value[HILOCK_CODEC_MAX];
    int64_t stamp_us, stamp_mono_us;
} hl_kind_buf;

typedef struct hl_kind_ops hl_kind_ops;

/* src/lock/wait.c: a kind's acquire command's two watch arguments -- the lease this attempt
 * asks for (l->watch_lease_ms when it marks, mark_ms > 0; else 0) and the full lease
 * (HL_WATCH_POLLS x poll_ms), in b->num[5] and b->num[6] -- and l->watch_left_ms back to 0
 * until a busy answer names another waiter's watch. One protocol for every kind with a watch. */
void hl_watch_args(hilock *l, hl_cmd *cmd, hl_kind_buf *b, int64_t mark_ms);
/* src/lock/wait.c: what a busy answer says of the watch -- its fourth element, when the
 * answer has four and that one is an integer > 0: the ms another waiter keeps the watch (into
 * l->watch_left_ms); else 0 (this waiter keeps it, or there is none). Every kind's answer
 * puts it there ({0, pttl, 'watch', left}, {0, pttl, {why, held, limit}, left}). */
int64_t hl_watch_left(const hl_reply *r);

struct hl_kind_ops {
    const char *name;   /* what hilock_kind says of its locks (and the events' lock_kind):
                           "lock", "permit", "shared", "exclusive", "fair", "legacy", "bridge" */
    /* One acquire attempt's command, the same on every master. mark_ms: how long a busy
     * answer marks the lock awaited (wait.c; 0 = no wait follows). Its reply is read by
     * acquire_verdict (acquire.lua's shape by default: {1, fence} / {0, pttl}, optionally
     * {0, pttl, value}). EINVAL (message set) refuses the acquire: the kind cannot serve
     * this client or ttl. */
    hilock_status (*acquire_cmd)(hilock *l, hl_cmd *cmd, hl_kind_buf *b, int64_t mark_ms);
    /* Reads one master's answer to acquire_cmd (pure, as the verdicts in lock.h): OURS
     * with *fence (0 = the kind mints none), OTHER with *pttl_ms, else BAD. NULL =
     * acquire.lua's shape (hl_acquire_verdict). */
    hl_verdict (*acquire_verdict)(const hl_reply *r, uint64_t *fence, long long *pttl_ms);
    /* For a kind whose acquire command cannot mark the lock awaited nor read the holder's
     * PTTL (a plain SET NX): a second command, sent only to the masters that answered busy,
     * only on that path. Its answer is an integer: the holder's PTTL (-1: no expiry), or -2:
     * no holder any more (released since): try again at once; an error (WRONGTYPE) is that
     * master's answer. One master: it is the reply busy() reads. NULL = none. */
    hilock_status (*busy_cmd)(hilock *l, hl_cmd *cmd, hl_kind_buf *b, int64_t mark_ms);
    /* The one master of the client answered busy with r -- or, for a kind with a busy_cmd,
     * answered that with r (NULL: no answer came) -- (several masters: lock.c words the
     * BUSY from each one's PTTL): set the BUSY message (naming the key) and return the
     * wait hint in us: -1 = try again at once (an expired value was judged, see the loop in
     * lock.c), 0 = none (the holder's PTTL is used), > 0 = until it may be free. */
    int64_t (*busy)(hilock *l, const hl_reply *r);
    /* Monotonic deadline of a grant (or extend, or check: then ttl_ms is what the server says
     * is left) of ttl_ms whose round trip began at t0_us. */
    int64_t (*valid_until)(const hilock *l, int64_t ttl_ms, int64_t t0_us);
    /* Before release, extend, check (op names it, for the message): OK, or the status that
     * ends the call without a round trip (legacy: our stamp has passed, NOT_HELD; a release
     * that meets it counts as done). NULL = always usable. */
    hilock_status (*usable)(hilock *l, const char *op);
    /* The command that makes the lock last ttl_ms from now (extend.lua's answers: 1/0/-1).
     * EINVAL (message set) refuses it. */
    hilock_status (*extend_cmd)(hilock *l, hl_cmd *cmd, hl_kind_buf *b, int64_t ttl_ms);
    /* After the extend's round trip: ours = a quorum answered "ours" (the new value is the
     * lock's now). NULL = nothing to do. */
    void (*extend_end)(hilock *l, const hl_kind_buf *b, int ours);
    /* After the lock is made, before its first attempt: the kind's own keys (fair: its
     * queue and this waiter's signal list). EINVAL (message set) refuses the acquire. NULL =
     * none. */
    hilock_status (*init)(hilock *l);
    /* The release's command, read as release.lua's answers (1/0/-1). NULL = release.lua
     * (with the wake-up keys when `wake`). */
    void (*release_cmd)(hilock *l, hl_cmd *cmd, hl_kind_buf *b);
    /* The check's command, read as check.lua's answers ({1, pttl} / {0, -2} / {-1, pttl}).
     * NULL = check.lua. */
    void (*check_cmd)(hilock *l, hl_cmd *cmd, hl_kind_buf *b);
    /* The command that gives a grant back at once (a partial, expired or refused one; lock.c
     * undo_on), read as release.lua's answers. NULL = release.lua. A write whose answer
     * never came is undone later by the engine
     * (undo.lua: a plain value, or a member of a sorted-set kind). */
    void (*undo_cmd)(hilock *l, hl_cmd *cmd, hl_kind_buf *b);
    /* What the kind refuses of a caller before anything is sent (the client's options, a
     * limit): EINVAL with the message, or OK. Run by the entry points (src/api/), blocking
     * and _async alike, between hl_enter and hl_leave. NULL = nothing. */
    hilock_status (*refused)(hilock_client *c, int limit);
    /* An acquire that failed (BUSY when its wait ran out, or an error) before the lock is
     * freed: undo what its attempts left for others (fair: its place in the queue), within
     * dl (the acquire's). Its errmsg and status stand. NULL = nothing. */
    void (*give_up)(hilock *l, hl_deadline dl);
    /* One master granted the acquire (a client of one master: never a Redlock's quorum):
     * count, the fence counter's value in its answer (before a topology's epoch), kept_ms
     * how long the holder record lives from the grant on (hl_acquire_kept: -1, the answer
     * did not say), t0_us when the attempt was sent. NULL = nothing. */
    void (*granted)(hilock *l, uint64_t count, int64_t kept_ms, int64_t t0_us);
    const char *taken;   /* NOT_HELD's reason when another value holds the key */
    const char *what;    /* what the key must hold, as WRONGTYPE's message says it ("KEY holds a
                          * hash, not a lock"): NULL = "a lock" (a string) */
    int undo_unknown;    /* an acquire write whose fate is unknown is undone on the next contact
                          * (not for values that are not unique to us, e.g. legacy stamps) */
    int failover;        /* topology's failover.lua and WAIT run with its operations */
    int wake;            /* a release wakes a waiter; waits block on that signal (wait.c) */
    int keepalive;       /* hilock_keepalive may renew it */
    int queue;           /* a busy attempt that will wait joins a queue: its mark_ms is > 0
                          * whenever a wait follows, also with options.wake = 0 (wait.c) */
    int fifo;            /* waiters take turns (the fair lock): only the head, attempting
                          * itself, is granted; before 6.0 a waiter blocks only as long as
                          * its queue entry lives (no one-second block: wait.c, fair.c) */
    int plain_holder;    /* a plain lock (a string) on the key is a holder to it, not a key of
                          * another kind (the shared/exclusive lock: permits.lua) */
    int member;          /* the token is a member of the key's sorted set, scored with its
                          * expiry (permits.lua), not the key's value: what a guarded command
                          * compares (guarded.lua) */
    int holder;          /* a grant keeps the client's holder record (acquire.lua,
                          * l->holder_key): written when it names another client, else only
                          * lengthened when it would lapse within HL_RECORD_RENEW; extend
                          * lengthens it too. Neither release nor undo touches it: it lapses
                          * by itself */
};

/* How long a holder record lives when a grant or an extend of ttl_ms writes its expiry: twice
 * the ttl, so that a client granted the key again and again lengthens it once per half a ttl
 * or so (HL_RECORD_RENEW), not per grant, and it outlives the lock's last release by at most
 * that. */
#define HL_RECORD_KEEP(ttl_ms) (2 * (ttl_ms))
/* A grant lengthens a record of ours that would lapse within this (acquire.lua: 1.5 x ttl),
 * and a client skips the record altogether while the one its last grant of the key left
 * lives this long (src/kinds/modern.c, acquire.lua ARGV[12]): so the record outlives the lock
 * unless a round trip takes more than half a ttl, and a client granted a key again and again
 * reads it once per half a ttl or so */
#define HL_RECORD_RENEW(ttl_ms) ((ttl_ms) + (ttl_ms) / 2)

/* The tables themselves: src/kinds/kinds.h (modern, unfenced, fair, the semaphore, the
 * shared/exclusive lock), legacy/legacy.h (legacy, bridge). */

/* ---- the table's optional entries, each with its default in one place (kind.c), as
 * sqlite's os.c wraps its VFS: lock.c calls these, never a table member that may be NULL ---- */
hilock_status hl_kind_refused(const hl_kind_ops *k, hilock_client *c, int limit);
hl_verdict  (*hl_kind_verdict(const hilock *l))(const hl_reply *r, uint64_t *fence, long long *pttl_ms);
const char   *hl_kind_what(const hilock *l);
hilock_status hl_kind_usable(hilock *l, const char *op);
void          hl_kind_extend_end(hilock *l, const hl_kind_buf *b, int ours);
hilock_status hl_kind_init(hilock *l);
void          hl_kind_release_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b);
void          hl_kind_check_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b);
void          hl_kind_undo_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b);
void          hl_kind_give_up(hilock *l, hl_deadline dl);
void          hl_kind_granted(hilock *l, uint64_t count, int64_t kept_ms, int64_t t0_us);

/* src/lock/lock.c: the acquire loop of every kind (the entry points pick `kind`), so they share
 * timing, retries, waiting and errors. */
hilock_status hl_acquire(hilock_client *c, const char *key, int64_t ttl_ms, int64_t wait_ms,
                         const hl_kind_ops *kind, hilock **out);

/* hl_acquire for a kind that takes a limit (the semaphore's; l->limit): the same loop. */
hilock_status hl_acquire_limit(hilock_client *c, const char *key, int limit, int64_t ttl_ms,
                               int64_t wait_ms, const hl_kind_ops *kind, hilock **out);

/* hl_acquire's checks of its arguments (key, ttl, wait_ms): EINVAL with the message, or OK.
 * Also run by the _async entry points, which must refuse bad input at once. */
hilock_status hl_acquire_args(hilock_client *c, const char *key, int64_t ttl_ms, int64_t wait_ms);

/* src/api/acquire.c: the kind hilock_acquire (and hilock_acquire_async) runs for c's options:
 * bridge, fair, unfenced (fencing = 0) or modern. */
const hl_kind_ops *hl_acquire_kind(const hilock_client *c);

/* src/api/acquire.c: the shared/exclusive lock's kind for mode (*kind), or EINVAL with the
 * message for a mode that is not one. Run by the blocking and _async entry points alike,
 * between hl_enter and hl_leave; then the kind's own refusals (hl_kind_refused). */
hilock_status hl_rw_kind(hilock_client *c, hilock_rw_mode mode, const struct hl_kind_ops **kind);
/* (what the caller did, why, what to do: read by programs' users and the command's alike) */
#define HL_SEM_NOT_FAIR "a semaphore cannot be fair: its waiters are not served in order; " \
                        "take permits with fair off"
#define HL_RW_NOT_FAIR "a shared/exclusive lock cannot be fair: it serves a waiting writer " \
                       "before new readers instead; take grants with fair off"

/* a fencing counter outlives each grant by an hour, plus its lead while it runs ahead of the
 * clock (acquire.lua: renewed every 1024th grant then) */
#define HL_FENCE_KEEP_MS (3600 * 1000)
/* ... but one that holds an epoch (>= 2^42: a Redlock token with a Sentinel or Cluster member's
 * epoch, acquire.lua, fence_raise.lua) by 35 days, a monthly job's gap included: for a quorum
 * without the epoch member it is the only floor above the clock (docs/redlock.md) */
#define HL_FENCE_EPOCH_KEEP_MS (35LL * 24 * 3600 * 1000)

#endif
