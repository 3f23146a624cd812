/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * internal.h -- the lock layer and the client: what lock.c, wait.c, keepalive.c, inspect.c,
 * client.c and legacy/ share. Nothing here is API.
 *
 * The layers, bottom up (each header says what it owns and may call; none calls up):
 *   base.h       util.c, url.c, scripts: shared by all, calls nothing
 *   resp.h       resp.c, resp_limit.c: replies, limits, the parser (the only hiredis user)
 *   transport.h  transport_tcp.c, transport_tls.c (+ tls.c): sockets and TLS
 *   engine.h     engine.c: pipelines on nodes (-> transport, resp; a topology only through
 *                the ops table node->topo)
 *   topology.h   topology.c, topo_sentinel.c: direct and Sentinel nodes, failover
 *                awareness (-> engine)
 *   internal.h   the lock layer and the client (-> topology, engine)
 *   kind.h       the lock kinds' tables (modern.c, legacy/) and the quorum code that runs
 *                them (lock.c); api/ picks a kind; keepalive.c sits above, reached only
 *                through the lock's hook
 *   async.h      the event-loop API (async.c, on fiber.c): runs lock.c's flows on fibers;
 *                the engine reaches it only through the client's runner (engine.h:
 *                hl_runner), the lock layer through the lock's hook
 */
#ifndef HILOCK_INTERNAL_H
#define HILOCK_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "hilock.h"
#include "hilock_legacy.h"   /* HILOCK_CODEC_MAX: a lock's value may be a legacy stamp */
#include "engine.h"
#include "topology.h"

/* ---- what one script reply means (lock.c): pure functions of a reply, no I/O, so the
 * fuzzers (fuzz/) can feed them any reply a server or a broken proxy could send ---- */
typedef enum hl_verdict {
    HL_V_BAD = 0,   /* an error reply, or a shape the script never returns */
    HL_V_OURS,      /* acquire: granted; release/extend/check: our value was there */
    HL_V_GONE,      /* release/extend/check: no such key */
    HL_V_OTHER      /* held by another value (acquire: *pttl_ms = its PTTL) */
} hl_verdict;
hl_verdict hl_acquire_verdict(const hl_reply *r, uint64_t *fence, long long *pttl_ms);
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
/* Give the caller's `size` bytes at dst what the library's full `def` (ours bytes) holds,
 * zero past ours. */
void hl_sized_init(void *dst, size_t size, const void *def, size_t ours);
/* Read the caller's `size` bytes at src into the library's full struct `full` (ours bytes,
 * holding the defaults): every field wholly inside `size`. Returns 0, or -1 when a byte past
 * `ours` is set -- a field of a newer header this library cannot honour; err then says so
 * (naming `type`). */
int hl_sized_take(void *full, size_t ours, const void *src, size_t size, const size_t *ends,
                  size_t nends, const char *type, char *err, size_t err_len);

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
hilock_status hl_enter(hilock_client *c, int *took);
hilock_status hl_leave(hilock_client *c, int took, hilock_status st);

void hl_client_ref(hilock_client *c);
/* n (<= 256) bytes from getrandom(), drawn 256 at a time into the client (one system call
 * per 16 tokens, not per acquire: issue 14's fast path); each byte is handed out once and
 * wiped. A forked child's copy is never used (hl_check_fork), so no two processes share
 * them. 0, or -1 when getrandom() fails. */
int hl_client_random(hilock_client *c, void *buf, size_t n);
void hl_client_unref(hilock_client *c);
/* A new client with c's options (already checked and copied), sharing c's TLS context
 * rather than loading the files again (they may have changed or gone since): a keepalive's
 * private client. Statuses as hilock_client_new's; hilock_last_config_error() says why. */
hilock_status hl_client_new_like(const hilock_client *c, hilock_client **out);

/* Set c->errmsg (printf-style) and return st; hl_ok() clears it and returns HILOCK_OK. */
hilock_status hl_fail(hilock_client *c, hilock_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
hilock_status hl_ok(hilock_client *c);
/* errmsg from the nodes' own errors ("node: why; node: why") with the given status. */
hilock_status hl_fail_nodes(hilock_client *c, hilock_status st, uint32_t mask, const char *what);

/* ---- locks ---- */
struct hl_kind_ops;    /* the lock's kind: its table of operations (kind.h) */
struct hl_keepalive;

/* The one call lock.c makes into a layer above it that shares a lock with another thread
 * (keepalive.c sets l->hook while its thread runs; NULL otherwise). STOP: release and free
 * call it first (it must leave l->hook NULL, and no work of its own in flight); BEGIN/END:
 * around extend and check, which then take turns with the other thread; VALIDITY: returns
 * l->valid_until_us read consistently with that thread. Returns 0 for the other events. */
typedef enum hl_hook_ev { HL_HOOK_STOP, HL_HOOK_BEGIN, HL_HOOK_END, HL_HOOK_VALIDITY } hl_hook_ev;

struct hilock {
    hilock_client *c;
    const struct hl_kind_ops *kind;
    char          *key;
    char           shown[HL_KEY_SHOWN_BUF];   /* the key as messages show it (hl_key_shown) */
    char          *fence_key;
    char          *signal_key;     /* wait.c: list a release pushes to, to wake one waiter */
    char          *waiters_key;    /* wait.c: set by busy attempts, so the release signals */
    char          *holder_key;     /* the holder record (kind.h: holder; src/inspect.c) */
    /* fair kind (fair.c): its queue's keys, and whether an attempt may have queued us */
    char          *queue_key, *beat_key;
    int            queued;
    char          *token;          /* NUL-terminated value we wrote (this attempt's: lock.c) */
    int            spent;          /* acquire: the token's value may be left somewhere: the
                                      next attempt takes a new one (lock.c: fresh_token) */
    char          *stale;          /* acquire: the last such tokens whose write's fate was
                                      unknown (lock.c: undo_stale) */
    int            nstale;
    int64_t        ttl_ms;
    int64_t        valid_until_us; /* monotonic; 0 after release */
    uint64_t       fence;
    uint32_t       held;           /* nodes where the value was written */
    uint32_t       freed;          /* release: nodes that confirmed deleting our value */
    uint32_t       rel_pending;    /* release: sent while valid, no answer (may have landed) */
    int            released;
    /* legacy and bridge kinds (legacy/legacy.c): the stamp in token, by the wall clock
     * (+ clock_offset_ms) and pinned to the monotonic clock; and an expired value that the
     * next acquire attempt may replace ("" = none) */
    int64_t        stamp_us, stamp_mono_us;
    char           expect[HILOCK_CODEC_MAX];
    int64_t      (*hook)(hilock *l, hl_hook_ev ev);   /* see hl_hook_ev */
    struct hl_keepalive *ka;       /* keepalive.c's state, while l->hook is its */
    struct hl_lockid    *ids;      /* topology.c: per node, the master history it was granted in */
    char          *guard_key;      /* topology.c: the failover guard's record with a cluster node */
    /* lock.c: on c->live from the acquire's start until released or freed (under
     * c->live_mu; `live` is read and written by the lock's own calls only) */
    int            live;
    hilock        *live_next, **live_prev;
};

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
 * holder's remaining PTTL; <= 0 = no hint) and by the deadline. */
int64_t hl_next_attempt(hilock_client *c, int64_t hint_us, int64_t deadline_us);

/* ---- seams owned by other files ---- */
/* src/wait.c: pause between acquire attempts until the holder's release (or hint_us, the
 * holder's remaining PTTL, or the deadline): the waiting strategy lives in one place. */
void hl_wait_turn(hilock *l, int64_t hint_us, int64_t deadline_us);
/* How long (ms) a busy attempt marks the lock awaited (acquire.lua ARGV[5]): at least as
 * long as the wait that follows it can last; 0 = this caller will not wait. */
int64_t hl_wait_mark_ms(const hilock *l, int64_t deadline_us);
/* src/lock.c: may another thread renew this lock (hilock_keepalive)? Its kind says. */
int hl_lock_renewable(const hilock *l);

#endif
