/* SPDX-License-Identifier: BSD-3-Clause */
/* observe.c -- the client's observer and counters (hilock_observe.h): the one seam through
 * which every layer reports an event (hl_emit), kept here with the client struct so the
 * engine and everything above reach it; the histograms and the Prometheus text, which need
 * no client. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "engine.h"

/* This thread is inside an observer: hl_enter (client.c) refuses calls then. */
static __thread int observing;

int hl_observing(void) { return observing; }

void hl_event_init(hilock_event *e, hilock_event_kind kind, const char *key, size_t keylen,
                   const char *node, hilock_status st, int64_t duration_us)
{
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->status = st;
    e->key = key;
    e->keylen = key ? keylen : 0;
    e->node = node;
    e->at_us = hl_now_us();
    e->duration_us = duration_us;
}

void hl_emit(hilock_client *c, const hilock_event *e)
{
    int was = observing;
    if (!c->obs_fn) return;
    observing = 1;
    c->obs_fn(e, c->obs_arg);
    observing = was;
}

void hl_emit_simple(hilock_client *c, hilock_event_kind kind, const char *key, size_t keylen,
                    const char *node, hilock_status st, int64_t duration_us)
{
    hilock_event e;
    if (!HL_OBSERVED(c)) return;
    hl_event_init(&e, kind, key, keylen, node, st, duration_us);
    hl_emit(c, &e);
}

void hl_emit_node_error(hilock_client *c, const hl_node *n, const char *key, size_t keylen)
{
    hilock_event e;
    c->stats.errors++;
    if (!HL_OBSERVED(c)) return;
    hl_event_init(&e, HILOCK_EVENT_ERROR, key, keylen, n->name, n->st, -1);
    e.message = n->err;
    hl_emit(c, &e);
}

void hl_conn_connected(hilock_client *c, const hl_node *n, const struct hl_conn *k)
{
    if (n->transport == &hl_transport_tls)
        hl_emit_simple(c, HILOCK_EVENT_TLS_HANDSHAKE, NULL, 0, n->name, HILOCK_OK, hl_now_us() - k->opened_us);
}

void hl_conn_ready(hilock_client *c, hl_node *n, const struct hl_conn *k)
{
    hilock_event e;
    int again = n->connects++ > 0;
    c->stats.connects++;
    c->stats.reconnects += (uint64_t)again;
    if (!HL_OBSERVED(c)) return;
    hl_event_init(&e, HILOCK_EVENT_CONNECT, NULL, 0, n->name, HILOCK_OK, hl_now_us() - k->opened_us);
    e.reconnect = again;
    hl_emit(c, &e);
}

void hl_failover_seen(hilock_client *c, const char *node)
{
    c->stats.failovers++;
    hl_emit_simple(c, HILOCK_EVENT_FAILOVER, NULL, 0, node, HILOCK_OK, -1);
}

void hl_redirect_seen(hilock_client *c, const hl_node *n, hilock_redirect_kind kind, const char *target,
                      const char *key, size_t keylen)
{
    hilock_event e;
    c->stats.redirects++;
    if (!HL_OBSERVED(c)) return;
    hl_event_init(&e, HILOCK_EVENT_REDIRECT, keylen ? key : NULL, keylen, n->name, HILOCK_OK, -1);
    e.redirect = kind;
    e.target = target;
    hl_emit(c, &e);
}


static const char *const event_names[] = {
    NULL, "acquire_start", "acquire_granted", "acquire_busy", "acquire_gave_up", "release",
    "extend", "renewal", "lost", "failover", "guard_start", "guard_passed", "member",
    "redirect", "map_refresh", "connect", "tls_handshake", "error",
};

const char *hilock_event_name(hilock_event_kind kind)
{
    if ((int)kind <= 0 || (size_t)kind >= sizeof event_names / sizeof *event_names) return "unknown";
    return event_names[kind];
}

/* ---- histograms ---- */

void hilock_histogram_add(hilock_histogram *h, int64_t us)
{
    if (h) hl_hist_add(h, us);
}

/* A caller's stats of `size` bytes as a whole struct: the fields past size are 0. */
static void stats_full(hilock_stats *full, const hilock_stats *s, size_t size)
{
    memset(full, 0, sizeof *full);
    memcpy(full, s, size < sizeof *full ? size : sizeof *full);
}

static void hist_merge(hilock_histogram *into, const hilock_histogram *from)
{
    int i;
    into->count += from->count;
    into->sum_us += from->sum_us;
    for (i = 0; i < HILOCK_HIST_BUCKETS; i++) into->bucket[i] += from->bucket[i];
}

void hilock_stats_merge_sized(hilock_stats *into, const hilock_stats *from, size_t size)
{
    hilock_stats a, b;
    uint64_t *pa = &a.acquire_ok;
    const uint64_t *pb = &b.acquire_ok;
    size_t i;
    if (!into || !from) return;
    stats_full(&a, into, size);
    stats_full(&b, from, size);
    for (i = 0; &pa[i] < (uint64_t *)&a.acquire_wait; i++) pa[i] += pb[i];   /* the counters */
    hist_merge(&a.acquire_wait, &b.acquire_wait);
    hist_merge(&a.round_trip, &b.round_trip);
    memcpy(into, &a, size < sizeof a ? size : sizeof a);
}

/* The client's side of hilock_client_stats (client.c checks the call): a copy, with the
 * atomically bumped counters read atomically. */
void hl_stats_copy(const hilock_client *c, hilock_stats *s, size_t size)
{
    hilock_stats full = c->stats;
    full.renewal_ok = __atomic_load_n(&c->stats.renewal_ok, __ATOMIC_RELAXED);
    full.renewal_failed = __atomic_load_n(&c->stats.renewal_failed, __ATOMIC_RELAXED);
    full.lost = __atomic_load_n(&c->stats.lost, __ATOMIC_RELAXED);
    memcpy(s, &full, size < sizeof full ? size : sizeof full);
}

/* ---- the Prometheus text format ---- */

/* snprintf into buf as far as it goes, counting the whole length. */
typedef struct out { char *buf; size_t len, at; } out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(out *o, const char *fmt, ...)
{
    va_list ap;
    int n;
    char dummy;
    va_start(ap, fmt);
    if (o->at < o->len) n = vsnprintf(o->buf + o->at, o->len - o->at, fmt, ap);
    else n = vsnprintf(&dummy, 0, fmt, ap);
    va_end(ap);
    if (n > 0) o->at += (size_t)n;
}

static void head(out *o, const char *name, const char *type, const char *help)
{
    put(o, "# HELP hilock_%s %s\n# TYPE hilock_%s %s\n", name, help, name, type);
}

/* One sample: name{labels,extra} value. */
static void sample(out *o, const char *name, const char *labels, const char *extra, uint64_t v)
{
    int any = labels[0] || extra[0];
    put(o, "hilock_%s%s%s%s%s%s %llu\n", name, any ? "{" : "", labels,
        labels[0] && extra[0] ? "," : "", extra, any ? "}" : "", (unsigned long long)v);
}

static void outcomes(out *o, const char *name, const char *help, const char *labels,
                     const char *const *names, const uint64_t *v, int n)
{
    char extra[48];
    int i;
    head(o, name, "counter", help);
    for (i = 0; i < n; i++) {
        snprintf(extra, sizeof extra, "outcome=\"%s\"", names[i]);
        sample(o, name, labels, extra, v[i]);
    }
}

static void counter(out *o, const char *name, const char *help, const char *labels, uint64_t v)
{
    head(o, name, "counter", help);
    sample(o, name, labels, "", v);
}

/* Seconds from us, "%.6f" with trailing zeros (and a bare point) trimmed. */
static void seconds(char *s, size_t n, uint64_t us)
{
    size_t len;
    snprintf(s, n, "%llu.%06llu", (unsigned long long)(us / 1000000), (unsigned long long)(us % 1000000));
    len = strlen(s);
    while (s[len - 1] == '0') s[--len] = 0;
    if (s[len - 1] == '.') s[--len] = 0;
}

static void histogram(out *o, const char *name, const char *help, const char *labels,
                      const hilock_histogram *h)
{
    char le[48], edge[32];
    uint64_t cum = 0;
    int i;
    head(o, name, "histogram", help);
    for (i = 0; i < HILOCK_HIST_BUCKETS; i++) {
        cum += h->bucket[i];
        if (i < HILOCK_HIST_BUCKETS - 1) seconds(edge, sizeof edge, (uint64_t)1 << i);
        else snprintf(edge, sizeof edge, "+Inf");
        snprintf(le, sizeof le, "le=\"%s\"", edge);
        put(o, "hilock_%s_bucket{%s%s%s} %llu\n", name, labels, labels[0] ? "," : "", le,
            (unsigned long long)cum);
    }
    seconds(edge, sizeof edge, h->sum_us);
    put(o, "hilock_%s_sum%s%s%s %s\n", name, labels[0] ? "{" : "", labels, labels[0] ? "}" : "", edge);
    put(o, "hilock_%s_count%s%s%s %llu\n", name, labels[0] ? "{" : "", labels, labels[0] ? "}" : "",
        (unsigned long long)h->count);
}

int hilock_stats_prometheus_sized(const hilock_stats *given, size_t size, char *buf, size_t len,
                                  const char *labels)
{
    static const char *const acq[] = {"ok", "busy", "error"};
    static const char *const rel[] = {"ok", "not_held", "lost", "error"};
    static const char *const two[] = {"ok", "failed"};
    hilock_stats s;
    out o;
    if (!given) return -1;
    stats_full(&s, given, size);
    o.buf = buf;
    o.len = buf ? len : 0;
    o.at = 0;
    if (o.len) buf[0] = 0;
    if (!labels) labels = "";
    outcomes(&o, "acquires_total", "Acquires ended, by outcome.", labels, acq, &s.acquire_ok, 3);
    outcomes(&o, "releases_total", "Releases, by outcome.", labels, rel, &s.release_ok, 4);
    outcomes(&o, "extends_total", "Extends and checks, by outcome.", labels, two, &s.extend_ok, 2);
    outcomes(&o, "renewals_total", "Keepalive renewals, by outcome.", labels, two, &s.renewal_ok, 2);
    counter(&o, "lost_total", "Locks found no longer held.", labels, s.lost);
    counter(&o, "round_trips_total", "Pipelines answered by a node.", labels, s.round_trips);
    counter(&o, "connects_total", "Connections opened.", labels, s.connects);
    counter(&o, "reconnects_total", "Connections opened to a node that had one before.", labels,
            s.reconnects);
    counter(&o, "failovers_total", "Failovers detected.", labels, s.failovers);
    counter(&o, "redirects_total", "Cluster MOVED, ASK and TRYAGAIN answers.", labels, s.redirects);
    counter(&o, "errors_total", "Node errors.", labels, s.errors);
    histogram(&o, "acquire_wait_seconds", "Time from acquire start to grant.", labels, &s.acquire_wait);
    histogram(&o, "round_trip_seconds", "Round trip time to a node.", labels, &s.round_trip);
    return (int)o.at;
}
