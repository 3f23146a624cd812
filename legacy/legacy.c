/* legacy.c -- the SETNX/GETSET recipe. (In progress: no lock of kind HL_LEGACY or HL_BRIDGE
 * can be made yet, so these are unreachable.) */
#include "internal.h"

hilock_status hl_legacy_release(hilock *l) { return hl_fail(l->c, HILOCK_EINVAL, "legacy locks: not built yet"); }
hilock_status hl_legacy_extend(hilock *l, int64_t ttl_ms) { (void)ttl_ms; return hl_fail(l->c, HILOCK_EINVAL, "legacy locks: not built yet"); }
hilock_status hl_legacy_check(hilock *l) { return hl_fail(l->c, HILOCK_EINVAL, "legacy locks: not built yet"); }
