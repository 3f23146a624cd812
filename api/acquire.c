/* acquire.c -- the acquire entry points, which choose a lock kind (kind.h) and run the
 * quorum code's acquire loop (src/lock.c: hl_acquire) with it:
 *   hilock_acquire          modern, or bridge with options.bridge
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

hilock_status hilock_acquire(hilock_client *c, const char *key, int64_t ttl_ms, int64_t wait_ms,
                             hilock **out)
{
    return hl_acquire(c, key, ttl_ms, wait_ms, c && c->opt.bridge ? &hl_kind_bridge : &hl_kind_modern,
                      out);
}
