/* SPDX-License-Identifier: BSD-3-Clause */
/* acquire.c -- the acquire entry points, which choose a lock kind (kind.h) and run the
 * quorum code's acquire loop (src/lock/lock.c: hl_acquire) with it:
 *   hilock_acquire          modern; bridge with options.bridge; fair with options.fair;
 *                           unfenced with options.fencing = 0
 *   hilock_legacy_acquire   legacy (include/hilock_legacy.h); refuses a fair client
 *   hilock_sem_acquire      semaphore (a permit of at most `limit`); refuses fair, and Redlock
 *                           where limit + 1 holders could each hold a quorum
 *   hilock_rw_acquire       exclusive or shared (the mode); refuses fair
 * Layer: api (this folder: acquire.c, async.c)
 * May call: async kinds legacy lock engine base platform
 * This file sits above both src/ (the quorum code, the modern kind) and legacy/ (the legacy
 * and bridge kinds). Being above both is what lets src/ name nothing of legacy/ while
 * hilock_acquire still reaches the bridge table, in a static link too (a table registered at
 * run time by legacy/ would be missing when no legacy/ object is linked), and lets the kinds
 * call nothing of lock.c. */
#include "kinds.h"
#include "legacy.h"

hilock_status hl_rw_kind(hilock_client *c, hilock_rw_mode mode, const hl_kind_ops **kind)
{
    *kind = mode == HILOCK_EXCLUSIVE ? &hl_kind_exclusive : mode == HILOCK_SHARED ? &hl_kind_shared : NULL;
    if (!*kind)
        return hl_fail(c, HILOCK_EINVAL, "mode must be HILOCK_EXCLUSIVE or HILOCK_SHARED (got %d)", (int)mode);
    return HILOCK_OK;
}

/* hl_acquire between hl_enter and hl_leave (the thread rule: lock.h), after what the kind
 * refuses of this caller: rw_mode for the shared/exclusive lock (kind NULL), limit for the
 * semaphore. */
static hilock_status acquire_entered(hilock_client *c, const char *key, int limit, int rw_mode,
                                     int64_t ttl_ms, int64_t wait_ms, const hl_kind_ops *kind,
                                     hilock **out)
{
    hilock_status st = HILOCK_OK;
    int took;
    if (out) *out = NULL;
    if (!c) return HILOCK_EINVAL;
    if ((st = hl_enter(c, &took)) != HILOCK_OK) return st;
    if (!kind) st = hl_rw_kind(c, (hilock_rw_mode)rw_mode, &kind);
    if (st == HILOCK_OK) st = hl_kind_refused(kind, c, limit);
    if (st == HILOCK_OK) st = hl_acquire_limit(c, key, limit, ttl_ms, wait_ms, kind, out);
    return hl_leave(c, took, st);
}

hilock_status hilock_legacy_acquire(hilock_client *c, const char *key, int64_t timeout_ms,
                                    int64_t wait_ms, hilock **out)
{
    return acquire_entered(c, key, 0, 0, timeout_ms, wait_ms, &hl_kind_legacy, out);
}

/* The kind hilock_acquire and hilock_acquire_async (api/async.c) run for c's options. The
 * combinations the kinds cannot serve (bridge or fair with fencing = 0, fair with bridge)
 * are refused when the client is made (client.c). */
const hl_kind_ops *hl_acquire_kind(const hilock_client *c)
{
    if (c && c->opt.bridge) return &hl_kind_bridge;
    if (c && c->opt.fair) return &hl_kind_fair;
    if (c && !c->opt.fencing) return &hl_kind_unfenced;
    return &hl_kind_modern;
}

hilock_status hilock_acquire(hilock_client *c, const char *key, int64_t ttl_ms, int64_t wait_ms,
                             hilock **out)
{
    return acquire_entered(c, key, 0, 0, ttl_ms, wait_ms, hl_acquire_kind(c), out);
}

hilock_status hilock_sem_acquire(hilock_client *c, const char *key, int limit, int64_t ttl_ms,
                                 int64_t wait_ms, hilock **out)
{
    return acquire_entered(c, key, limit, 0, ttl_ms, wait_ms, &hl_kind_sem, out);
}

hilock_status hilock_rw_acquire(hilock_client *c, const char *key, hilock_rw_mode mode, int64_t ttl_ms,
                                int64_t wait_ms, hilock **out)
{
    return acquire_entered(c, key, 0, (int)mode, ttl_ms, wait_ms, NULL, out);
}
