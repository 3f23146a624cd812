/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Layer: lock
 * May call: topology engine transport resp base platform
 *
 * lock.h -- the lock layer and the client: what lock.c, wait.c, inspect.c, client.c (and,
 * above them, the kinds, legacy/, async/ and src/api/) share. Nothing here is API.
 *
 * Owns: the client (options, validation, nodes each given its transport and topology: client.c
 * is where the tables are named), the quorum flows every kind runs (lock.c), waiting for a
 * release (wait.c), inspection (inspect.c), and hl_kind_ops (kind.h), through which it calls a
 * kind: never by name. The keepalive (async/) is reached only through the lock's hook.
 *
 * The layers, their order and what each may call are stated once, by the "Layer:" and
 * "May call:" lines at the top of each folder's header (docs/layout.md; `make layers`
 * checks every include and every call against them).
 */
#ifndef HILOCK_LOCK_H
#define HILOCK_LOCK_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "hilock.h"
#include "hilock_legacy.h"   /* HILOCK_CODEC_MAX: a lock's value may be a legacy stamp */
#include "engine.h"
#include "topology.h"

/* ---- the lock (struct hilock), its fields grouped by the file that owns them; the others
 * read them ---- */
struct hl_kind_ops;    /* the lock's kind: its table of operations (kind.h) */
struct hl_keepalive;

/* The one call lock.c makes into a layer above it that shares a lock with another thread
 * (keepalive.c sets l->hook while its thread runs; NULL otherwise). STOP: release and free
 * call it first (it must leave l->hook NULL, and no work of its own in flight); BEGIN/END:
 * around extend and check, which then take turns with the other thread; VALIDITY: returns
 * l->valid_until_us read consistently with that thread. Returns 0 for the other events. */
typedef enum hl_hook_ev { HL_HOOK_STOP, HL_HOOK_BEGIN, HL_HOOK_END, HL_HOOK_VALIDITY } hl_hook_ev;

struct hilock {
    /* lock.c: what it is, its value and its validity */
    hilock_client *c;
    const struct hl_kind_ops *kind;
    const char    *kind_name;      /* its kind's name (hilock_kind), for the events */
    char          *key;
    char           shown[HL_KEY_SHOWN_BUF];   /* the key as messages show it (hl_key_shown) */
    char          *fence_key;
    char          *token;          /* NUL-terminated value we wrote (this attempt's) */
    int            spent;          /* acquire: the token's value may be left somewhere: the
                                      next attempt takes a new one (fresh_token) */
    char          *stale;          /* acquire: the last such tokens whose write's fate was
                                      unknown (undo_stale) */
    int            nstale;
    int64_t        ttl_ms;
    int64_t        valid_until_us; /* monotonic; 0 after release */
    uint64_t       fence;
    uint32_t       held;           /* nodes where the value was written */
    uint32_t       freed;          /* release: nodes that confirmed deleting our value */
    uint32_t       rel_pending;    /* release: sent while valid, no answer (may have landed) */
    int            released;
    int            lost_seen;      /* its loss was counted and reported (LOST once per lock;
                                      keepalive.c copies it back from its renewals) */
    /* on c->live from the acquire's start until released or freed (under c->live_mu; `live`
     * is read and written by the lock's own calls only) */
    int            live;
    hilock        *live_next, **live_prev;
    /* wait.c: the wake-up keys, and whether the last wait took a release signal (a kind's
     * give_up passes it on if no grant followed) */
    char          *signal_key;     /* list a release pushes to, to wake one waiter */
    char          *waiters_key;    /* set by busy attempts, so the release signals */
    int            woken;
    int64_t        block_to_us;    /* > 0: the next attempt goes behind a BLPOP until then, in
                                      one write (hl_wait_turn; lock.c attempt_round) */
    int            no_behind;      /* a BLPOP sent so was refused: wait apart from now on */
    int64_t        watch_lease_ms; /* the watch's lease our busy attempt asks for (0: none) */
    int64_t        watch_left_ms;  /* the kind's busy answer: > 0, another waiter keeps the
                                      watch for this many ms more (0: we do, or no watch) */
    /* inspect.c: the holder record (kind.h: holder) */
    char          *holder_key;
    /* the fair kind (src/kinds/fair.c): its queue's keys, and whether an attempt may have
     * queued us */
    char          *queue_key, *beat_key;
    int            queued;
    /* the sorted-set kinds (src/kinds/permits.c): the holder records, the waiters, their
     * watch (wait.c), the wake-up lists (permits' or writers', readers', the plain lock's),
     * this call's limit */
    char          *holders_key, *wq_key, *watch_key, *wake_keys[3];
    int            limit;
    /* the legacy and bridge kinds (legacy/legacy.c): the stamp in token, by the wall clock
     * (+ clock_offset_ms) and pinned to the monotonic clock; and an expired value that the
     * next acquire attempt may replace ("" = none) */
    int64_t        stamp_us, stamp_mono_us;
    char           expect[HILOCK_CODEC_MAX];
    /* src/async/: the hook (above), keepalive.c's state while l->hook is its, why the loop's
     * keepalive ended (hl_ka_ended), whether its extend is a renewal (RENEWAL events); and
     * async.c's, so no pass walks every call to ask about one lock: how many of its calls
     * other than the acquire that made it are still linked, its keepalives (0 or 1), and its
     * unfinished calls in the order made (async.c's struct call, chained) */
    int64_t      (*hook)(hilock *l, hl_hook_ev ev);
    struct hl_keepalive *ka;
    char          *ka_why;
    int            renewing;
    int            loop_linked, loop_kas;
    void          *loop_first;
    /* topology.c: its failover part (topology.h) */
    hl_topo_lock   topo;
};

/* l's failover part, with the lock's current key, token, ttl, name and LOST flag, as every
 * call into topology takes it */
static inline hl_topo_lock *hl_lock_topo(hilock *l)
{
    l->topo.key = l->key;
    l->topo.shown = l->shown;
    l->topo.token = l->token;
    l->topo.kind_name = l->kind_name;
    l->topo.ttl_ms = l->ttl_ms;
    l->topo.lost_seen = l->lost_seen;
    return &l->topo;
}

/* ---- what one script reply means (verdict.c): pure functions of a reply, no I/O, so the
 * fuzzers (fuzz/) can feed them any reply a server or a broken proxy could send ---- */
typedef enum hl_verdict {
    HL_V_BAD = 0,   /* an error reply, or a shape the script never returns */
    HL_V_OURS,      /* acquire: granted; release/extend/check: our value was there */
    HL_V_GONE,      /* release/extend/check: no such key */
    HL_V_OTHER      /* held by another value (acquire: *pttl_ms = its PTTL) */
} hl_verdict;
/* (verdict.c) A PTTL as our scripts answer it: an integer in -2 .. centuries. */
int        hl_pttl_ok(const hl_reply *r);
hl_verdict hl_acquire_verdict(const hl_reply *r, uint64_t *fence, long long *pttl_ms);
/* (verdict.c) A granted acquire.lua answer {1, fence, kept}: kept, the ms its holder record
 * lives from the grant on (an integer in 0 .. centuries); -1 for any other answer. */
int64_t    hl_acquire_kept(const hl_reply *r);
/* A plain SET NX PX (options.fencing = 0): OK = OURS (fence 0), nil = OTHER (pttl 0: unknown) */
hl_verdict hl_set_nx_verdict(const hl_reply *r, uint64_t *fence, long long *pttl_ms);
hl_verdict hl_tristate_verdict(const hl_reply *r);                   /* release, extend */
hl_verdict hl_check_pttl_verdict(const hl_reply *r, long long *pttl_ms);  /* check.lua */

/* ---- public structs that grow (docs/versioning.md) ----
 * A caller passes the size of the struct its header declared; fields are only ever
 * appended. `ends` lists where each field the library knows ends, in order. */
#define HL_FIELD_END(type, f) (offsetof(type, f) + sizeof(((type *)0)->f))
/* The sizes of 0.1.0, the first release: what the plain hilock_options_init,
 * hilock_client_new, hilock_keepalive_options_init and hilock_keepalive_ex entry points (the
 * symbols binaries built before the _sized functions call) read and write. Frozen. */
#define HL_OPTIONS_V0_SIZE HL_FIELD_END(hilock_options, failover_guard_ms)
#define HL_KEEPALIVE_OPTIONS_V0_SIZE HL_FIELD_END(hilock_keepalive_options, max_hold_ms)
/* fork(): a child's copy of a client (and of its locks, and their keepalives) shares the
 * parent's connections and names threads that do not exist in the child. It may only be
 * freed, memory only. hl_fork_gen counts forks in this process's ancestry (pthread_atfork,
 * registered by hilock_client_new), so the check is a load and a compare, not a getpid()
 * system call per call. hl_forked: is c such a copy? hl_check_fork: EINVAL with the
 * message if it is, else OK. */
extern unsigned long hl_fork_gen;
int           hl_forked(const hilock_client *c);
hilock_status hl_check_fork(hilock_client *c);

/* The thread rule's check: every public entry point that uses a client (its connections,
 * errmsg, locks) runs between hl_enter and hl_leave, so a second thread is refused instead of
 * corrupting the stream. hl_enter: OK, with *took = 1 if it marked c in use by this thread
 * (0: this thread is already inside -- a nested call, a loop's flow, a done callback); or
 * EINVAL, for a forked child's copy (hl_check_fork's message), or if another thread is
 * inside, having touched nothing of c: the refused thread then reads the message
 * HL_TWO_THREADS from hilock_client_errmsg (c->errmsg is the other thread's). hl_leave ends
 * what hl_enter took and returns st. */
#define HL_TWO_THREADS "client used from two threads at once"
#define HL_IN_OBSERVER "hilock called from inside an observer: an observer may only record the event"
hilock_status hl_enter(hilock_client *c, int *took);
hilock_status hl_leave(hilock_client *c, int took, hilock_status st);
/* A call that hilock_cancel cut short ends ECANCELED, errmsg saying "cancelled"; one that
 * ended OK all the same (the cancel came after what mattered) stays OK. hl_leave's, and a
 * loop's flow's (async.c). */
hilock_status hl_cancel_verdict(hilock_client *c, hilock_status st);

void hl_client_ref(hilock_client *c);
/* n (<= 256) bytes from the kernel (hl_plat_random), drawn 256 at a time into the client (one system call
 * per 16 tokens, not per acquire: the fast path, docs/performance.md); each byte is handed out once and
 * wiped. A forked child's copy is never used (hl_check_fork), so no two processes share
 * them. 0, or -1 when the kernel fails to give them. */
int hl_client_random(hilock_client *c, void *buf, size_t n);
void hl_client_unref(hilock_client *c);
/* A new client with c's options (already checked and copied), sharing c's TLS context
 * rather than loading the files again (they may have changed or gone since): a keepalive's
 * private client. Statuses as hilock_client_new's; hilock_last_config_error() says why. */
hilock_status hl_client_new_like(const hilock_client *c, hilock_client **out);

/* ---- locks (struct hilock: above) ---- */

/* aux key in the same hash slot as `key`: "key<suffix>" if key has a tag, "{key}<suffix>" if
 * it has no '}', else "{T}key<suffix>" with T of the key's slot (hl_slot_tag). malloc'd. */
char *hl_aux_key(const char *key, const char *suffix);

/* ttl_ms - elapsed - (ttl_ms * drift + 2 ms), as an absolute monotonic deadline */
int64_t hl_valid_until(const hilock_client *c, int64_t ttl_ms, int64_t t0_us);

/* What a BUSY message says of the holder's PTTL, read from a busy answer ({0, pttl, ...}
 * or the bare integer): ", expires in 1.2 s"; for none (-1) that the key never expires by
 * itself; "" if not known. Written into buf (HL_BUSY_TTL_BUF bytes). */
#define HL_BUSY_TTL_BUF (2 * HL_KEY_SHOWN_BUF + 100)
const char *hl_busy_ttl(const hilock *l, const hl_reply *r, char *buf, size_t cap);

/* Common argument checks; return EINVAL with a message or OK. */
hilock_status hl_check_key(hilock_client *c, const char *key);
hilock_status hl_check_ttl(hilock_client *c, int64_t ttl_ms);

/* Jittered pause before the next attempt: mean retry_delay_ms, capped by hint_us (e.g. the
 * holder's remaining PTTL; <= 0 = no hint) and by wait_end (the caller's wait's end). */
int64_t hl_next_attempt(hilock_client *c, int64_t hint_us, int64_t wait_end);
/* The end of a blocking waiter's pause: 0.75 to 1 x poll_ms from now (the jitter spreads
 * waiters; poll_ms stays the bound on seeing a key freed without a signal), capped alike. */
int64_t hl_next_poll(hilock_client *c, int64_t hint_us, int64_t wait_end);
/* The end of a pause behind another waiter's watch (wait.c): left_ms from now, + 0 to 1 x
 * poll_ms (the waiters behind one watch do not all ask at once), capped alike. */
int64_t hl_next_watch(hilock_client *c, int64_t left_ms, int64_t hint_us, int64_t wait_end);

/* ---- seams owned by other files ---- */
/* src/lock/wait.c: pause between acquire attempts until the holder's release (or hint_us, the
 * holder's remaining PTTL, or wait_end): the waiting strategy lives in one place. */
int hl_wait_turn(hilock *l, int64_t hint_us, int64_t wait_end);   /* 1: a release woke it */
/* One master: where a waiter's block would be short beside its ttl, hl_wait_turn does not
 * block but sets l->block_to_us, and the next attempt sends the BLPOP in front of its acquire
 * in one write (the server runs the acquire the moment the BLPOP returns: a release's
 * handoff saves the woken waiter's round trip). hl_behind_block: that BLPOP, until `until`
 * (into *cmd, its timeout's digits in secs[32]), sent at `now`; returns the time it adds to
 * the round trip (us). hl_behind_read: after the round trip, the BLPOP's
 * reply is read (l->woken; refused: no more of it for this acquire) and taken out of the
 * node's replies, which are then the acquire's own, as without it. */
int64_t hl_behind_block(hilock *l, hl_cmd *cmd, char *secs, int64_t until, int64_t now);
void hl_behind_read(hilock *l);
/* The longest pause (ms) between two attempts of a waiter of l: poll_ms where it blocks on a
 * release signal, else 1.5 x retry_delay_ms (the jitter's top), + 1. What a mark, a queue
 * entry or a cut of a mark must outlive. (A waiter behind another's watch pauses up to its
 * lease longer: acquire.lua adds the lease to the mark it sets for the watch.) */
int64_t hl_pause_max_ms(const hilock *l);
/* How long (ms) a busy attempt marks the lock awaited (acquire.lua ARGV[5]): at least as
 * long as the wait that follows it can last; 0 = this caller will not wait. Sets
 * l->watch_lease_ms, the watch's lease that attempt asks for (acquire.lua ARGV[9]):
 * HL_WATCH_POLLS x poll_ms where a waiter blocks on a release signal, or what is left of
 * its wait if less; else 0 (no watch: every waiter polls). */
#define HL_WATCH_POLLS 3
int64_t hl_wait_mark_ms(hilock *l, int64_t wait_end);
/* Several masters (Redlock): l->watch_left_ms from the busy answer of the first master in
 * `busy` (its reply still read): 0 where it gives this waiter the watch or names none, else
 * what its lease has left. (One master: the kind's busy() reads it.) */
void hl_watch_of_masters(hilock *l, uint32_t busy);
/* src/lock/lock.c: a keepalive (l on client c: its private one, or a loop's) gave up after
 * renewals failed for a passing reason (st) until the validity ran out: the lock is counted
 * lost and reported (LOST, lost_why UNKNOWN, the message why), unless its loss was already
 * (l->lost_seen: once per lock). */
void hl_renewals_gave_up(hilock *l, hilock_status st, const char *why);
/* src/lock/lock.c: may another thread renew this lock (hilock_keepalive)? Its kind says. */
int hl_lock_renewable(const hilock *l);

#endif
