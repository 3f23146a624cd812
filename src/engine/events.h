/* SPDX-License-Identifier: BSD-3-Clause */
/* events.h -- events and counters (observe.c) (part of the engine layer: engine.h states its
 * rules and includes it) */
#ifndef HILOCK_ENGINE_EVENTS_H
#define HILOCK_ENGINE_EVENTS_H

#include "client.h"

/* ---- events and counters (observe.c): the one seam every layer emits through ---- */
/* 1 if c has an observer: test it before building an event (the only cost without one). */
#define HL_OBSERVED(c) ((c)->obs_fn != NULL)
/* An event of kind for c with the common fields (key NULL for none; node NULL for none;
 * duration -1: none; at_us now); the caller sets the kind's own fields, then hl_emit. */
void hl_event_init(hilock_event *e, hilock_event_kind kind, const char *key, size_t keylen,
                   const char *node, hilock_status st, int64_t duration_us);
/* hl_event_init at a time the caller has read already (at_us = now: no clock read). */
void hl_event_init_at(hilock_event *e, hilock_event_kind kind, const char *key, size_t keylen,
                      const char *node, hilock_status st, int64_t now_us, int64_t duration_us);
/* Call c's observer with e (none: nothing), marking this thread as inside an observer for
 * the duration (hl_observing), so a call into hilock from it is refused. */
void hl_emit(hilock_client *c, const hilock_event *e);
/* The common case: hl_event_init + hl_emit, if c is observed. */
void hl_emit_simple(hilock_client *c, hilock_event_kind kind, const char *key, size_t keylen,
                    const char *node, hilock_status st, int64_t duration_us);
/* hl_emit_simple for a lock's event: its key (a C string) and its kind's name (lock_kind). */
void hl_emit_lock(hilock_client *c, hilock_event_kind kind, const char *key, const char *lock_kind,
                  const char *node, hilock_status st, int64_t duration_us);
/* An ERROR event for node n's error (n->st, n->err), if c is observed; counted. */
void hl_emit_node_error(hilock_client *c, const hl_node *n, const char *key, size_t keylen);
/* Connection k of node n: its connect (TCP, and TLS: TLS_HANDSHAKE) is done, resp. its
 * handshake is done (CONNECT, counted). Both runners call them (engine.c, async.c). */
void hl_conn_connected(hilock_client *c, const hl_node *n, const struct hl_conn *k);
void hl_conn_ready(hilock_client *c, hl_node *n, const struct hl_conn *k);
/* A connection of node n, begun at opened_us, failed before its handshake was done (refused,
 * timed out, AUTH refused, ...): a CONNECT event with st and why, if c is observed; not
 * counted (stats.connects are opened ones). Before the ERROR event of the same failure. */
void hl_conn_failed(hilock_client *c, const hl_node *n, int64_t opened_us, hilock_status st, const char *why);
/* The Sentinels named a new master (counted: stats.failovers; a FAILOVER event): node the
 * master now in use. (A lock's call that finds its master changed reports it, uncounted.) */
void hl_failover_seen(hilock_client *c, const char *node);
/* A Cluster redirect answered by node n about key (keylen 0: none): counted; a REDIRECT event. */
void hl_redirect_seen(hilock_client *c, const hl_node *n, hilock_redirect_kind kind, const char *target,
                      const char *key, size_t keylen);
/* Put us in h (hilock_observe.h: the buckets; negative counts as 0): inline, as it runs on
 * every round trip and grant (hilock_histogram_add is this). */
static inline void hl_hist_add(hilock_histogram *h, int64_t us)
{
    uint64_t v = us > 0 ? (uint64_t)us : 0;
    int b = v <= 1 ? 0 : 64 - __builtin_clzll(v - 1);   /* ceil(log2 v) */
    h->count++;
    h->sum_us += v;
    h->bucket[b < HILOCK_HIST_BUCKETS - 1 ? b : HILOCK_HIST_BUCKETS - 1]++;
}
/* A round trip to a node, sent at t0_us, answered in full at now_us: counted, in the histogram. */
static inline void hl_round_trip(hilock_client *c, int64_t t0_us, int64_t now_us)
{
    c->stats.round_trips++;
    hl_hist_add(&c->stats.round_trip, now_us - t0_us);
}
/* 1 while this thread runs an observer (hl_enter refuses calls then). */
int  hl_observing(void);
/* hilock_client_stats's copy of c->stats into size bytes at s (client.c checks the call). */
void hl_stats_copy(const hilock_client *c, hilock_stats *s, size_t size);
/* A counter of c->stats bumped by another thread (a keepalive's): atomic. */
#define hl_count_atomic(c, field) __atomic_fetch_add(&(c)->stats.field, 1, __ATOMIC_RELAXED)

#endif
