/* SPDX-License-Identifier: BSD-3-Clause */
/* async.c -- hilock_acquire_async: the lock kind hilock_acquire would run (api/acquire.c:
 * hl_acquire_kind) queued as a flow on the client's loop (src/async.c). In api/ with it: the
 * kind may be legacy/'s bridge table. */
#include "async.h"
#include "kind.h"

hilock_status hilock_acquire_async(hilock_client *c, const char *key, int64_t ttl_ms,
                                   int64_t wait_ms, hilock_done_fn done, void *arg)
{
    return hl_async_acquire(c, key, ttl_ms, wait_ms, hl_acquire_kind(c), done, arg);
}
