/* acquire.c -- the acquire entry points, which choose a lock kind (kind.h) and run the
 * quorum code's acquire loop (src/lock.c: hl_acquire) with it:
 *   hilock_acquire          modern; bridge with options.bridge; unfenced with options.fencing = 0
 *   hilock_legacy_acquire   legacy (include/hilock_legacy.h)
 * This file sits above both src/ (the quorum code, the modern kind) and legacy/ (the legacy
 * and bridge kinds). Being above both is what lets src/ name nothing of legacy/ while
 * hilock_acquire still reaches the bridge table, in a static link too (a table registered at
 * run time by legacy/ would be missing when no legacy/ object is linked), and lets the kinds
 * call nothing of lock.c. */
#include "kind.h"
#include "../legacy/kinds.h"

hilock_status hilock_legacy_acquire(hilock_client *c, const char *key, int64_t timeout_ms,
                                    int64_t wait_ms, hilock **out)
{
    if (out) *out = NULL;
    if (!c) return HILOCK_EINVAL;
    return hl_acquire(c, key, timeout_ms, wait_ms, &hl_kind_legacy, out);
}

/* (bridge = 1 with fencing = 0 is refused when the client is made: client.c) */
hilock_status hilock_acquire(hilock_client *c, const char *key, int64_t ttl_ms, int64_t wait_ms,
                             hilock **out)
{
    const hl_kind_ops *kind = &hl_kind_modern;
    if (c && c->opt.bridge) kind = &hl_kind_bridge;
    else if (c && !c->opt.fencing) kind = &hl_kind_unfenced;
    return hl_acquire(c, key, ttl_ms, wait_ms, kind, out);
}
