/* async.c -- hilock_acquire_async: picks the lock kind as hilock_acquire does (api/acquire.c:
 * modern, or bridge with options.bridge) and queues the flow on the client's loop
 * (src/async.c). In api/ for the same reason as acquire.c: it names legacy/'s bridge table. */
#include "async.h"
#include "../legacy/kinds.h"

hilock_status hilock_acquire_async(hilock_client *c, const char *key, int64_t ttl_ms,
                                   int64_t wait_ms, hilock_done_fn done, void *arg)
{
    return hl_async_acquire(c, key, ttl_ms, wait_ms,
                            c && c->opt.bridge ? &hl_kind_bridge : &hl_kind_modern, done, arg);
}
