/* SPDX-License-Identifier: BSD-3-Clause */
/* observe.c -- the client's observer and counters (hilock_observe.h): the one seam through
 * which every layer reports an event (hl_emit), kept here with the client struct so the
 * engine and everything above reach it; the histograms and the Prometheus text, which need
 * no client. */
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "engine.h"

/* This thread is inside an observer: hl_enter (client.c) refuses calls then. */
static __thread int observing;

int hl_observing(void) { return observing; }

void hl_event_init_at(hilock_event *e, hilock_event_kind kind, const char *key, size_t keylen,
                      const char *node, hilock_status st, int64_t now_us, int64_t duration_us)
{
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->status = st;
    e->key = key;
    e->keylen = key ? keylen : 0;
    e->node = node;
    e->at_us = now_us;
    e->duration_us = duration_us;
}

void hl_event_init(hilock_event *e, hilock_event_kind kind, const char *key, size_t keylen,
                   const char *node, hilock_status st, int64_t duration_us)
{
    hl_event_init_at(e, kind, key, keylen, node, st, hl_now_us(), duration_us);
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

void hl_emit_lock(hilock_client *c, hilock_event_kind kind, const char *key, const char *lock_kind,
                  const char *node, hilock_status st, int64_t duration_us)
{
    hilock_event e;
    if (!HL_OBSERVED(c)) return;
    hl_event_init(&e, kind, key, strlen(key), node, st, duration_us);
    e.lock_kind = lock_kind;
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
    if (n->transport->handshake)
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

void hl_conn_failed(hilock_client *c, const hl_node *n, int64_t opened_us, hilock_status st, const char *why)
{
    hilock_event e;
    if (!HL_OBSERVED(c)) return;
    hl_event_init(&e, HILOCK_EVENT_CONNECT, NULL, 0, n->name, st, hl_now_us() - opened_us);
    e.reconnect = n->connects > 0;
    e.message = why && why[0] ? why : NULL;
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

/* Every field of hilock_stats, for merge, the copy and the Prometheus writer alike: a
 * counter is one sample of its metric (outcome: its label, NULL for none); help opens a
 * metric. A field appended to hilock_stats goes here too (the size check below fails until
 * it does). */
#define AT(f) offsetof(hilock_stats, f)
static const struct counter {
    size_t at;
    const char *metric, *outcome, *help;
} counters[] = {
    {AT(acquire_ok), "acquires_total", "ok", "Acquires ended, by outcome."},
    {AT(acquire_busy), "acquires_total", "busy", NULL},
    {AT(acquire_error), "acquires_total", "error", NULL},
    {AT(release_ok), "releases_total", "ok", "Releases, by outcome."},
    {AT(release_not_held), "releases_total", "not_held", NULL},
    {AT(release_lost), "releases_total", "lost", NULL},
    {AT(release_error), "releases_total", "error", NULL},
    {AT(extend_ok), "extends_total", "ok", "Extends and checks, by outcome."},
    {AT(extend_failed), "extends_total", "failed", NULL},
    {AT(renewal_ok), "renewals_total", "ok", "Keepalive renewals, by outcome."},
    {AT(renewal_failed), "renewals_total", "failed", NULL},
    {AT(lost), "lost_total", NULL, "Locks found no longer held."},
    {AT(round_trips), "round_trips_total", NULL, "Pipelines answered by a node."},
    {AT(connects), "connects_total", NULL, "Connections opened."},
    {AT(reconnects), "reconnects_total", NULL, "Connections opened to a node that had one before."},
    {AT(failovers), "failovers_total", NULL, "Failovers detected."},
    {AT(redirects), "redirects_total", NULL, "Cluster MOVED, ASK and TRYAGAIN answers."},
    {AT(errors), "errors_total", NULL, "Node errors."},
};
static const struct hist {
    size_t at;
    const char *metric, *help;
} hists[] = {
    {AT(acquire_wait), "acquire_wait_seconds", "Time from acquire start to grant."},
    {AT(round_trip), "round_trip_seconds", "Round trip time to a node."},
};
#define NCOUNTERS (sizeof counters / sizeof *counters)
#define NHISTS (sizeof hists / sizeof *hists)
typedef char hl_stats_tables_complete[sizeof(hilock_stats) == NCOUNTERS * sizeof(uint64_t) +
                                      NHISTS * sizeof(hilock_histogram) ? 1 : -1];

#define FIELD(s, at, type) ((type *)((char *)(s) + (at)))
#define CFIELD(s, at, type) ((const type *)((const char *)(s) + (at)))

static void hist_merge(hilock_histogram *into, const hilock_histogram *from)
{
    int i;
    into->count += from->count;
    into->sum_us += from->sum_us;
    for (i = 0; i < HILOCK_HIST_BUCKETS; i++) into->bucket[i] += from->bucket[i];
}

/* In place, the fields within size only (a newer header's, which this library does not
 * know, are left as they are). */
void hilock_stats_merge_sized(hilock_stats *into, const hilock_stats *from, size_t size)
{
    size_t i;
    if (!into || !from) return;
    for (i = 0; i < NCOUNTERS; i++)
        if (counters[i].at + sizeof(uint64_t) <= size)
            *FIELD(into, counters[i].at, uint64_t) += *CFIELD(from, counters[i].at, uint64_t);
    for (i = 0; i < NHISTS; i++)
        if (hists[i].at + sizeof(hilock_histogram) <= size)
            hist_merge(FIELD(into, hists[i].at, hilock_histogram),
                       CFIELD(from, hists[i].at, hilock_histogram));
}

/* The client's side of hilock_client_stats (client.c checks the call): a copy, the counters
 * read atomically (a keepalive thread bumps some: hl_count_atomic), the tail of a newer
 * header's larger struct zeroed. */
void hl_stats_copy(const hilock_client *c, hilock_stats *s, size_t size)
{
    hilock_stats full;
    size_t i;
    for (i = 0; i < NCOUNTERS; i++)
        *FIELD(&full, counters[i].at, uint64_t) =
            __atomic_load_n(CFIELD(&c->stats, counters[i].at, uint64_t), __ATOMIC_RELAXED);
    for (i = 0; i < NHISTS; i++)
        *FIELD(&full, hists[i].at, hilock_histogram) = *CFIELD(&c->stats, hists[i].at, hilock_histogram);
    hl_sized_init(s, size, &full, sizeof full);
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

/* A counter's sample, under its metric's head if it opens one. */
static void counter(out *o, const struct counter *f, const char *labels, uint64_t v)
{
    char extra[48];
    if (f->help) head(o, f->metric, "counter", f->help);
    if (f->outcome) snprintf(extra, sizeof extra, "outcome=\"%s\"", f->outcome);
    else extra[0] = 0;
    sample(o, f->metric, labels, extra, v);
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

/* Bytes of the UTF-8 sequence at p (1..4), 0 if it is not one (a stray continuation, an
 * overlong form, a surrogate, past U+10FFFF): Prometheus's parsers refuse such a value. */
static size_t utf8_len(const unsigned char *p)
{
    size_t n, i;
    unsigned cp;
    if (p[0] < 0x80) return 1;
    if (p[0] >= 0xC2 && p[0] <= 0xDF) n = 2, cp = p[0] & 0x1Fu;
    else if (p[0] >= 0xE0 && p[0] <= 0xEF) n = 3, cp = p[0] & 0x0Fu;
    else if (p[0] >= 0xF0 && p[0] <= 0xF4) n = 4, cp = p[0] & 0x07u;
    else return 0;
    for (i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;   /* (the NUL ends the string here too) */
        cp = cp << 6 | (p[i] & 0x3Fu);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

/* One value after its opening quote: escapes \\, \" and \n only, no raw newline, UTF-8.
 * Returns what follows the closing quote, NULL if malformed. */
static const char *label_value(const char *p)
{
    size_t n;
    while (*p != '"') {
        if (*p == '\\') {
            if (p[1] != '\\' && p[1] != '"' && p[1] != 'n') return NULL;
            p += 2;
        } else if (!*p || *p == '\n' || !(n = utf8_len((const unsigned char *)p))) {
            return NULL;   /* (a missing closing quote ends at the NUL: utf8_len takes it as one byte) */
        } else {
            p += n;
        }
    }
    return p + 1;
}

#define NAME_START(ch) (((ch) >= 'a' && (ch) <= 'z') || ((ch) >= 'A' && (ch) <= 'Z') || (ch) == '_')
#define NAME_CHAR(ch) (NAME_START(ch) || ((ch) >= '0' && (ch) <= '9'))

/* Is labels a set the text format takes, put before the library's own outcome and le:
 * name="value" pairs joined by commas, nothing else (no spaces, no trailing comma), no name
 * twice and neither outcome nor le. A sample with a malformed set makes the whole scrape
 * fail, so it is refused here rather than written. */
static int labels_valid(const char *labels)
{
    const char *p = labels, *names[64];
    size_t nnames = 0, i, len;
    while (*p) {
        const char *name = p;
        if (!NAME_START(*p)) return 0;
        while (NAME_CHAR(*p)) p++;
        len = (size_t)(p - name);
        if ((len == 7 && !memcmp(name, "outcome", 7)) || (len == 2 && !memcmp(name, "le", 2))) return 0;
        for (i = 0; i < nnames; i++)
            if (!strncmp(names[i], name, len) && !NAME_CHAR(names[i][len])) return 0;
        if (nnames == sizeof names / sizeof *names) return 0;   /* (no exporter needs 64) */
        names[nnames++] = name;
        if (p[0] != '=' || p[1] != '"' || !(p = label_value(p + 2))) return 0;
        if (*p == ',' && *++p == 0) return 0;
        else if (*p && p[-1] != ',') return 0;
    }
    return 1;
}

int hilock_stats_prometheus_sized(const hilock_stats *given, size_t size, char *buf, size_t len,
                                  const char *labels)
{
    hilock_stats s;
    out o;
    size_t i;
    if (!given || (labels && !labels_valid(labels))) {
        if (buf && len) buf[0] = 0;
        return -1;
    }
    hl_sized_init(&s, sizeof s, given, size);   /* (fields past size: 0) */
    o.buf = buf;
    o.len = buf ? len : 0;
    o.at = 0;
    if (o.len) buf[0] = 0;
    if (!labels) labels = "";
    for (i = 0; i < NCOUNTERS; i++) counter(&o, &counters[i], labels, *CFIELD(&s, counters[i].at, uint64_t));
    for (i = 0; i < NHISTS; i++)
        histogram(&o, hists[i].metric, hists[i].help, labels, CFIELD(&s, hists[i].at, hilock_histogram));
    return o.at > INT_MAX ? -1 : (int)o.at;
}
