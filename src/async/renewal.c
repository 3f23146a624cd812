/* SPDX-License-Identifier: BSD-3-Clause */
/* renewal.c -- the renewal rules both keepalives follow: keepalive.c's thread (a blocking
 * client) and async.c's timer (a client attached to a loop). When the next renewal is due,
 * its ttl under max_hold_ms, which failures are tried again and until when, and what the lock
 * says when its keepalive ended (hilock_keepalive_errmsg). Its own file so that each runner
 * calls it and keepalive.c hands a loop's lock to async.c (hl_loop_keepalive) without the two
 * calling each other. */
#include <stdio.h>
#include <stdlib.h>

#include "async.h"

/* The loop's keepalive (async.c: no thread, no hl_keepalive) ended: keep why for
 * hilock_keepalive_errmsg, as the thread keeps its own; NULL when one starts again. Only the
 * loop's thread calls it, and reads it. No memory for the copy: the message is "". */
void hl_ka_ended(hilock *l, const char *why)
{
    free(l->ka_why);
    l->ka_why = why ? hl_strdup(why) : NULL;
}

/* A keepalive that reached its cap says which (the thread's and the loop's alike). */
void hl_ka_capped(char *buf, size_t n, const hilock *l, long renewals)
{
    snprintf(buf, n, "keepalive %.200s: stopped after %ld renewals (max_renewals / max_hold_ms)",
             l->shown, renewals);
}

/* Renew once a third of the ttl has passed since the last grant, i.e. while two thirds are
 * left (valid_until_us already has the drift taken off). Under op. */
int64_t hl_ka_renew_due(const hilock *l)
{
    return l->valid_until_us - l->ttl_ms * 2000 / 3;
}

/* The ttl of the next renewal under max_hold_ms (hold_end_us; HL_NEVER: none): the full ttl,
 * or what is left of the hold (the last renewal), or 0 when renewing would not make the lock
 * last longer. c: for the drift allowance. Under op. */
int64_t hl_ka_capped_ttl(const hilock_client *c, const hilock *l, int64_t hold_end_us, int *last)
{
    int64_t now = hl_now_us(), left_ms;
    *last = 0;
    if (hold_end_us == HL_NEVER) return l->ttl_ms;
    left_ms = (hold_end_us - now) / 1000;
    if (left_ms >= l->ttl_ms) return l->ttl_ms;
    if (left_ms <= 0 || hl_valid_until(c, left_ms, now) <= l->valid_until_us ||
        hl_valid_until(c, left_ms, 0) <= 1000)
        return 0;
    *last = 1;
    return left_ms;
}

/* Errors that the next renewal may not see (a dropped connection, a slow or restarting
 * master): tried again while the lock is still valid. The rest mean the lock is gone or
 * cannot be renewed. */
int hl_ka_transient(hilock_status st)
{
    return st == HILOCK_EIO || st == HILOCK_ETIMEDOUT || st == HILOCK_ENOQUORUM ||
           st == HILOCK_EREPLICAS;
}

/* May a failed renewal be tried again at retry_at, with margin_us kept before the validity's
 * end for the owner to stop its work (lost_margin_ms)? */
int hl_ka_may_retry(const hilock *l, int64_t retry_at, int64_t margin_us)
{
    return retry_at < l->valid_until_us - margin_us;
}
