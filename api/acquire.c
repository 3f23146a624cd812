/* SPDX-License-Identifier: BSD-3-Clause */
/* acquire.c -- the acquire entry points, which choose a lock kind (kind.h) and run the
 * quorum code's acquire loop (src/lock/lock.c: hl_acquire) with it:
 *   hilock_acquire          modern; bridge with options.bridge; fair with options.fair;
 *                           unfenced with options.fencing = 0
 *   hilock_legacy_acquire   legacy (include/hilock_legacy.h); refuses a fair client
 * Layer: api (this folder: acquire.c, async.c)
 * May call: async kinds legacy lock engine base platform
 * This file sits above both src/ (the quorum code, the modern kind) and legacy/ (the legacy
 * and bridge kinds). Being above both is what lets src/ name nothing of legacy/ while
 * hilock_acquire still reaches the bridge table, in a static link too (a table registered at
 * run time by legacy/ would be missing when no legacy/ object is linked), and lets the kinds
 * call nothing of lock.c. */
#include "../src/kinds/kinds.h"
#include "../legacy/kinds.h"

/* hl_acquire between hl_enter and hl_leave (the thread rule: lock.h). */
static hilock_status acquire_entered(hilock_client *c, const char *key, int64_t ttl_ms,
                                     int64_t wait_ms, const hl_kind_ops *kind, hilock **out)
{
    hilock_status st;
    int took;
    if (out) *out = NULL;
    if (!c) return HILOCK_EINVAL;
    if ((st = hl_enter(c, &took)) != HILOCK_OK) return st;
    if (kind == &hl_kind_legacy && c->opt.fair)   /* the recipe has no queue: a fair caller passes it */
        st = hl_fail(c, HILOCK_EINVAL, "%s", HL_LEGACY_NOT_FAIR);
    else
        st = hl_acquire(c, key, ttl_ms, wait_ms, kind, out);
    return hl_leave(c, took, st);
}

hilock_status hilock_legacy_acquire(hilock_client *c, const char *key, int64_t timeout_ms,
                                    int64_t wait_ms, hilock **out)
{
    return acquire_entered(c, key, timeout_ms, wait_ms, &hl_kind_legacy, out);
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
    return acquire_entered(c, key, ttl_ms, wait_ms, hl_acquire_kind(c), out);
}
