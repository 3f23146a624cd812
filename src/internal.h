/*
 * internal.h -- the lock layer and the client: what lock.c, wait.c, keepalive.c, inspect.c,
 * client.c and legacy/ share. Nothing here is API.
 *
 * The layers, bottom up (each header says what it owns and may call; none calls up):
 *   base.h       util.c, url.c, scripts: shared by all, calls nothing
 *   resp.h       resp.c, resp_limit.c: replies, limits, the parser (the only hiredis user)
 *   transport.h  transport_tcp.c (tls.c next): sockets
 *   engine.h     engine.c: pipelines on nodes (-> transport, resp; a topology only through
 *                the ops table node->topo)
 *   topology.h   topology.c, topo_sentinel.c: direct and Sentinel nodes, failover
 *                awareness (-> engine)
 *   internal.h   the lock layer and the client (-> topology, engine)
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
hl_verdict hl_tristate_verdict(const hl_reply *r);                   /* release, extend */
hl_verdict hl_check_verdict(const hl_reply *r, const char *token);   /* GET key */
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

void hl_client_ref(hilock_client *c);
void hl_client_unref(hilock_client *c);

/* Set c->errmsg (printf-style) and return st; hl_ok() clears it and returns HILOCK_OK. */
hilock_status hl_fail(hilock_client *c, hilock_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
hilock_status hl_ok(hilock_client *c);
/* errmsg from the nodes' own errors ("node: why; node: why") with the given status. */
hilock_status hl_fail_nodes(hilock_client *c, hilock_status st, uint32_t mask, const char *what);

/* ---- locks ---- */
typedef enum hl_kind { HL_MODERN = 0, HL_LEGACY, HL_BRIDGE } hl_kind;

struct hl_keepalive;

struct hilock {
    hilock_client *c;
    hl_kind        kind;
    char          *key;
    char          *fence_key;
    char          *signal_key;     /* wait.c: list a release pushes to, to wake one waiter */
    char          *waiters_key;    /* wait.c: set by busy attempts, so the release signals */
    char          *token;          /* NUL-terminated value we wrote */
    int64_t        ttl_ms;
    int64_t        valid_until_us; /* monotonic; 0 after release */
    uint64_t       fence;
    uint32_t       held;           /* nodes where the value was written */
    uint32_t       freed;          /* release: nodes that confirmed deleting our value */
    uint32_t       rel_pending;    /* release: sent while valid, no answer (may have landed) */
    int            released;
    /* HL_LEGACY / HL_BRIDGE (legacy.c): the stamp in token, by the wall clock (+ clock_offset_ms)
     * and pinned to the monotonic clock; and an expired value that the next acquire attempt
     * may replace ("" = none) */
    int64_t        stamp_us, stamp_mono_us;
    char           expect[HILOCK_CODEC_MAX];
    struct hl_keepalive *ka;
    struct hl_lockid    *ids;      /* topology.c: per node, the master history it was granted in */
};

/* aux key in the same hash slot as `key`: "{key}<suffix>", or "key<suffix>" if key has a tag */
char *hl_aux_key(const char *key, const char *suffix);

/* ttl_ms - elapsed - (ttl_ms * drift + 2 ms), as an absolute monotonic deadline */
int64_t hl_valid_until(const hilock_client *c, int64_t ttl_ms, int64_t t0_us);

/* Common argument checks; return EINVAL with a message or OK. */
hilock_status hl_check_key(hilock_client *c, const char *key);
hilock_status hl_check_ttl(hilock_client *c, int64_t ttl_ms);

/* Jittered pause before the next attempt: mean retry_delay_ms, capped by hint_us (e.g. the
 * holder's remaining PTTL; <= 0 = no hint) and by the deadline. */
int64_t hl_next_attempt(hilock_client *c, int64_t hint_us, int64_t deadline_us);

/* ---- seams owned by other files ---- */
/* legacy/legacy.c: release, extend and check of HL_LEGACY and HL_BRIDGE locks */
hilock_status hl_legacy_release(hilock *l);
hilock_status hl_legacy_extend(hilock *l, int64_t ttl_ms);
hilock_status hl_legacy_check(hilock *l);
/* legacy/legacy.c: acquire attempts of HL_LEGACY and HL_BRIDGE locks, inside lock.c's
 * attempt(). hl_legacy_cmd: a fresh stamp into l->token and the legacy_acquire.lua call
 * (a_px, a_keep: 24-byte scratch); EINVAL for a client with several servers or a timeout
 * eaten by drift + skew_margin_ms. hl_legacy_busy: judges the value a busy reply
 * {0, pttl, value} carries and sets the BUSY message (naming key and value); returns the
 * wait hint: -1 = an expired stamp, replace it now (l->expect), > 0 = us until it passes or
 * its TTL ends, 0 = none. hl_legacy_valid_until: validity, never past our own stamp, less
 * skew_margin_ms. */
hilock_status hl_legacy_cmd(hilock *l, hl_cmd *cmd, char *a_px, char *a_keep);
int64_t       hl_legacy_busy(hilock *l, const hl_reply *r);
int64_t       hl_legacy_valid_until(const hilock *l, int64_t t0_us);
/* src/lock.c: the acquire loop of every kind (hilock_acquire: HL_MODERN, or HL_BRIDGE with
 * options.bridge; hilock_legacy_acquire: HL_LEGACY), so they share timing, retries, errors. */
hilock_status hl_acquire(hilock_client *c, const char *key, int64_t ttl_ms, int64_t wait_ms,
                         hl_kind kind, hilock **out);
/* src/wait.c: pause between acquire attempts until the holder's release (or hint_us, the
 * holder's remaining PTTL, or the deadline): the waiting strategy lives in one place. */
void hl_wait_turn(hilock *l, int64_t hint_us, int64_t deadline_us);
/* How long (ms) a busy attempt marks the lock awaited (acquire.lua ARGV[5]): at least as
 * long as the wait that follows it can last; 0 = this caller will not wait. */
int64_t hl_wait_mark_ms(const hilock *l, int64_t deadline_us);
/* src/keepalive.c: stop and join the lock's keepalive thread, if any (release and free).
 * In a forked child (hl_forked) it only frees the keepalive's memory: the thread and the
 * state of its mutexes belong to the parent. */
void hl_keepalive_stop(hilock *l);
/* While a keepalive runs, its thread renews the lock (hilock_extend on a copy bound to its
 * own client) and writes back ttl_ms, valid_until_us and held. So the owner's calls that
 * write them (extend, check) run between hl_keepalive_op(l, 1) and (l, 0): one at a time
 * with the renewals; and readers outside those use hl_lock_valid_until. No-ops (plain
 * reads) without a keepalive. */
void    hl_keepalive_op(hilock *l, int begin);
int64_t hl_lock_valid_until(const hilock *l);

#endif
