/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Layer: async
 * May call: lock engine resp base platform
 *
 * async.h -- what runs a lock's calls beside the caller: the keepalive's renewal thread
 * (keepalive.c) and the event-loop API's runner (async.c, on fibers: fiber.c), and the renewal
 * rules they share. Nothing here is API (that is include/hilock_async.h).
 *
 * Owns: the keepalive thread and its private client; the runner that runs lock.c's flows on
 * fibers with their round trips pipelined on the loop's connections. The engine reaches the
 * runner only through the client's hl_runner (engine.h), the lock layer the keepalive only
 * through the lock's hook (lock.h: hl_hook_ev). Called by: src/api/ and the public entry points.
 */
#ifndef HILOCK_ASYNC_INTERNAL_H
#define HILOCK_ASYNC_INTERNAL_H

#include "kind.h"
#include "hilock_async.h"

/* hilock_acquire_async with the lock kind the entry point chose (src/api/async.c). */
hilock_status hl_async_acquire(hilock_client *c, const char *key, int64_t ttl_ms, int64_t wait_ms,
                               const hl_kind_ops *kind, hilock_done_fn done, void *arg);
/* ... and for a kind that takes a limit (hl_acquire_limit: the semaphore's; 0 for the others):
 * the caller has checked limit. */
hilock_status hl_async_acquire_limit(hilock_client *c, const char *key, int limit, int64_t ttl_ms,
                                     int64_t wait_ms, const hl_kind_ops *kind, hilock_done_fn done, void *arg);
/* hilock_keepalive on a lock of a client attached to a loop (keepalive.c hands it over): no
 * thread, the loop's timer renews it. */
hilock_status hl_loop_keepalive(hilock *l, hilock_lost_fn on_lost, void *arg, const hilock_keepalive_options *o);

/* ---- the renewal rules (renewal.c) of both keepalives: keepalive.c's thread, async.c's timer ---- */
/* When the next renewal is due: once a third of the ttl has passed since the last grant. */
int64_t hl_ka_renew_due(const hilock *l);
/* The ttl of the next renewal under a max_hold_ms ending at hold_end_us (HL_NEVER: none):
 * the full ttl, what is left of the hold (*last = 1), or 0 (stop: renewing would not make
 * the lock last longer). */
int64_t hl_ka_capped_ttl(const hilock_client *c, const hilock *l, int64_t hold_end_us, int *last);
/* A failed renewal worth retrying while the lock is still valid (EIO, ETIMEDOUT, ...). */
int     hl_ka_transient(hilock_status st);
/* The loop's keepalive ended (why: the loss's or the cap's message; NULL: it starts again), and
 * the cap's message (hilock_keepalive_errmsg reads both runners' alike). */
void    hl_ka_ended(hilock *l, const char *why);
void    hl_ka_capped(char *buf, size_t n, const hilock *l, long renewals);
/* May a failed renewal be tried again at retry_at, margin_us (lost_margin_ms) before the end? */
int     hl_ka_may_retry(const hilock *l, int64_t retry_at, int64_t margin_us);

#endif
