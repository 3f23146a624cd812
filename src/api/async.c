/* SPDX-License-Identifier: BSD-3-Clause */
/* async.c -- hilock_acquire_async: the lock kind hilock_acquire would run (api/acquire.c:
 * hl_acquire_kind) queued as a flow on the client's loop (src/async/async.c); and
 * hilock_legacy_acquire_async, legacy/'s kind the same way; hilock_sem_acquire_async and
 * hilock_rw_acquire_async, after the blocking calls' own refusals (hl_rw_kind, the kind's
 * refused: kind.h), made at once. In api/ with them: the kinds may be legacy/'s tables. */
#include "async.h"
#include "kind.h"
#include "legacy.h"
#include "kinds.h"

hilock_status hilock_acquire_async(hilock_client *c, const char *key, int64_t ttl_ms,
                                   int64_t wait_ms, hilock_done_fn done, void *arg)
{
    return hl_async_acquire(c, key, ttl_ms, wait_ms, hl_acquire_kind(c), done, arg);
}

hilock_status hilock_legacy_acquire_async(hilock_client *c, const char *key, int64_t timeout_ms,
                                          int64_t wait_ms, hilock_done_fn done, void *arg)
{
    hilock_status st;
    int took;
    if (!c) return HILOCK_EINVAL;
    if ((st = hl_enter(c, &took)) != HILOCK_OK) return st;   /* (the thread rule: lock.h) */
    if ((st = hl_kind_refused(&hl_kind_legacy, c, 0)) == HILOCK_OK)   /* (as the blocking call) */
        st = hl_async_acquire(c, key, timeout_ms, wait_ms, &hl_kind_legacy, done, arg);
    return hl_leave(c, took, st);
}

hilock_status hilock_sem_acquire_async(hilock_client *c, const char *key, int limit, int64_t ttl_ms,
                                       int64_t wait_ms, hilock_done_fn done, void *arg)
{
    hilock_status st;
    int took;
    if (!c) return HILOCK_EINVAL;
    if ((st = hl_enter(c, &took)) != HILOCK_OK) return st;   /* (the thread rule: lock.h) */
    if ((st = hl_kind_refused(&hl_kind_sem, c, limit)) == HILOCK_OK)
        st = hl_async_acquire_limit(c, key, limit, ttl_ms, wait_ms, &hl_kind_sem, done, arg);
    return hl_leave(c, took, st);
}

hilock_status hilock_rw_acquire_async(hilock_client *c, const char *key, hilock_rw_mode mode, int64_t ttl_ms,
                                      int64_t wait_ms, hilock_done_fn done, void *arg)
{
    hilock_status st;
    const hl_kind_ops *kind;
    int took;
    if (!c) return HILOCK_EINVAL;
    if ((st = hl_enter(c, &took)) != HILOCK_OK) return st;   /* (the thread rule: lock.h) */
    if ((st = hl_rw_kind(c, mode, &kind)) == HILOCK_OK && (st = hl_kind_refused(kind, c, 0)) == HILOCK_OK)
        st = hl_async_acquire_limit(c, key, 0, ttl_ms, wait_ms, kind, done, arg);
    return hl_leave(c, took, st);
}
