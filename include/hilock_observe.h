/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hilock_observe.h -- what a client's locks are doing: typed events, counters, wait and
 * round-trip histograms, and the Prometheus text format. The header is the manual.
 *
 * Two independent tools:
 *   - Events: hilock_set_observer(c, fn, arg) has fn called with one hilock_event per thing
 *     that happens (an acquire starts, waits, is granted; a lock is lost; a failover; a
 *     Cluster redirect; a connection; an error with its node). For logs and traces.
 *   - Counters: hilock_client_stats(c, &s) copies the client's totals and histograms, always
 *     kept (plain increments, no lock: a client is one thread's). For metrics;
 *     hilock_stats_merge adds clients up, hilock_stats_prometheus writes them out.
 *
 * Cost with no observer: each event site is one predictable branch (no event is built); the
 * counters are plain increments on the client (atomic ones for what a keepalive thread
 * counts). The histograms read the clock: once per granted acquire (its wait) and, on an
 * event loop, twice per node per round trip (sent, answered); the blocking engine's round
 * trips reuse the readings its timeouts take.
 */
#ifndef HILOCK_OBSERVE_H
#define HILOCK_OBSERVE_H

#include "hilock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- events ---------------------------------------------------------------------------- */

/* What happened. The names are HILOCK_EVENT_* (hilock_async.h's HILOCK_EV_READ/WRITE are
 * unrelated). New kinds may be added at the end: ignore a kind you do not know. Under each:
 * the thread it runs on (see "Threads" below) and the fields it sets beyond the common ones. */
typedef enum hilock_event_kind {
    /* An acquire begins (hilock_acquire and its kinds, hilock_try_acquire, _async). Caller. */
    HILOCK_EVENT_ACQUIRE_START = 1,
    /* The acquire got the lock. Caller. duration_us: the whole wait (start to grant);
     * attempts: attempts made (1 = at once); fence: the lock's fencing token (0: none);
     * woken: 1 if the last wait ended by a release notice, 0 if by polling (or no wait). */
    HILOCK_EVENT_ACQUIRE_GRANTED,
    /* An attempt found the key held by someone else: one per busy answer while waiting, and
     * one for a try-lock's (or a last attempt's) answer. Caller. attempts: this attempt's
     * number (1-based); duration_us: time since the acquire started. */
    HILOCK_EVENT_ACQUIRE_BUSY,
    /* The acquire ended without the lock. Caller. status: BUSY (wait_ms passed, or a
     * try-lock) or the error; duration_us: time since it started; attempts as above. */
    HILOCK_EVENT_ACQUIRE_GAVE_UP,
    /* hilock_release's result. Caller. status: OK, NOT_HELD, LOST or the error;
     * duration_us: the call's time. */
    HILOCK_EVENT_RELEASE,
    /* hilock_extend's (and hilock_check's) result. Caller. status as the call's;
     * validity_ms: validity left after it (0 when not held); duration_us: the call's time. */
    HILOCK_EVENT_EXTEND,
    /* One keepalive renewal's result (hilock_keepalive). The keepalive's thread (a blocking
     * client), or the loop's thread (a client attached to a loop). status: OK, or why it
     * failed (a passing failure is retried: more RENEWAL events follow); validity_ms as
     * EXTEND; duration_us: the renewal's time. */
    HILOCK_EVENT_RENEWAL,
    /* The lock is no longer ours, seen by a release, extend, check or keepalive renewal
     * (before on_lost runs). The thread of what saw it. status: NOT_HELD or LOST (or the
     * keepalive's last error); lost_why: see hilock_lost_why. */
    HILOCK_EVENT_LOST,
    /* A failover was detected: a Sentinel names a new master (node: it, as "name@host:port";
     * key NULL), or a lock's call finds its master's replication history is not the one the
     * lock was granted in (node: the master now; key: the lock's; a LOST event follows; once
     * per lock). One failover may so be reported more than once: stats.failovers counts only
     * the Sentinels' (once per client and failover). Caller (or keepalive / loop thread). */
    HILOCK_EVENT_FAILOVER,
    /* The failover guard (hilock_options.failover_guard) refused an acquire's grant on a master
     * promoted in a failover: once per acquire, at the first refusal. Caller. node: the master;
     * status: BUSY; duration_us: how long the guard holds off grants there at most. */
    HILOCK_EVENT_GUARD_START,
    /* An acquire refused by the guard (GUARD_START) was granted in the end. Caller.
     * duration_us: from the first refusal to the grant. */
    HILOCK_EVENT_GUARD_PASSED,
    /* Redlock: one master's answer in an acquire, release or extend of N masters, one event
     * per master asked. Caller. node: the master; status: OK (granted / done on it), BUSY,
     * NOT_HELD or its error; op: HILOCK_EVENT_ACQUIRE_START, _RELEASE or _EXTEND (which call). */
    HILOCK_EVENT_MEMBER,
    /* A Cluster node answered MOVED, ASK or TRYAGAIN (redirect says which); the command is
     * run again where the cluster says. Caller. node: who answered; target: where to
     * ("host:port"; "" for TRYAGAIN). */
    HILOCK_EVENT_REDIRECT,
    /* The Cluster slot map was fetched (the first time, and again after MOVED, a dead
     * master, CLUSTERDOWN). Caller. status: OK or why not; duration_us: the fetch's time;
     * node: the cluster's name; key: NULL. */
    HILOCK_EVENT_MAP_REFRESH,
    /* A connection to a node was opened, its handshake (AUTH, SELECT, ...) done -- or it
     * failed. Caller (or keepalive / loop thread). status: OK, or why the connect or its
     * handshake failed (EIO: refused, unreachable; ETIMEDOUT; EAUTH: AUTH refused; ...), then
     * with message (the node's text), and the ERROR event of the same failure follows (a
     * failed one is not counted in stats.connects); reconnect: 1 if this node (on a Cluster:
     * this server of it) had a connection before, 0 for the first; duration_us: from the
     * start of the connect to the end of the handshake (or to the failure). key: NULL. On an
     * event loop, the connections a wait opens for its blocking BLPOP are neither reported
     * nor counted. */
    HILOCK_EVENT_CONNECT,
    /* A TLS connection (rediss://) finished its TLS handshake, before CONNECT. status: OK (a
     * failed one is an ERROR event); duration_us: from the start of the connect (TCP
     * included) to the end of the TLS handshake. key: NULL. Thread as CONNECT's. */
    HILOCK_EVENT_TLS_HANDSHAKE,
    /* A node did not answer a round trip: connection refused or broken, a timeout, a
     * handshake refused (AUTH), a command its server cannot run; once per node, a peer that
     * closed the connection on the handshake's INFO or TIME (a proxy: connected to again at
     * once without it, its version or clock unknown). (Error replies to the lock's
     * own commands are results: see the call's event.) Thread as the call's. node: which;
     * status: the error; key: the commands' key (NULL: none); message: the node's text. */
    HILOCK_EVENT_ERROR
} hilock_event_kind;

/* Why a lock was lost (HILOCK_EVENT_LOST). */
typedef enum hilock_lost_why {
    HILOCK_LOST_UNKNOWN = 0,   /* no answer could prove it (a partition, errors until the
                                  validity ran out: the keepalive's last error)            */
    HILOCK_LOST_EXPIRED,       /* NOT_HELD after its validity had run out: it expired      */
    HILOCK_LOST_TAKEN,         /* NOT_HELD while still valid: deleted or replaced (DEL, an
                                  operator, another holder)                               */
    HILOCK_LOST_FAILOVER       /* LOST: a failover since the grant                         */
} hilock_lost_why;

/* Which redirect (HILOCK_EVENT_REDIRECT). */
typedef enum hilock_redirect_kind {
    HILOCK_REDIRECT_MOVED = 1,
    HILOCK_REDIRECT_ASK,
    HILOCK_REDIRECT_TRYAGAIN
} hilock_redirect_kind;

/* One event. The library writes it and hands it to the observer for the duration of the
 * call: copy what you keep (the strings too). It only ever grows (fields are appended,
 * never moved): read the fields you know; a field a kind does not set is 0 (NULL for
 * strings, -1 for duration_us). */
typedef struct hilock_event {
    hilock_event_kind    kind;
    hilock_status        status;       /* OK, or the result/error it reports                 */
    const char          *key;          /* the lock's key, keylen bytes (not NUL-terminated in
                                          general); NULL for connection events (CONNECT,
                                          TLS_HANDSHAKE, MAP_REFRESH) and node errors outside
                                          a lock's call                                        */
    size_t               keylen;
    const char          *node;         /* "127.0.0.1:6379", "/tmp/r.sock"; NULL if none       */
    int64_t              at_us;        /* monotonic clock (CLOCK_MONOTONIC), microseconds      */
    int64_t              duration_us;  /* see the kind; -1 if it has none                     */
    long                 attempts;     /* ACQUIRE_BUSY / GRANTED / GAVE_UP                     */
    uint64_t             fence;        /* ACQUIRE_GRANTED                                      */
    int                  woken;        /* ACQUIRE_GRANTED                                      */
    int64_t              validity_ms;  /* EXTEND, RENEWAL                                      */
    hilock_lost_why      lost_why;     /* LOST                                                 */
    hilock_redirect_kind redirect;     /* REDIRECT                                             */
    const char          *target;       /* REDIRECT                                             */
    int                  reconnect;    /* CONNECT                                              */
    hilock_event_kind    op;           /* MEMBER                                               */
    const char          *message;      /* ERROR (and LOST, a failed CONNECT: the detail;
                                          ACQUIRE_BUSY: what holds the key; ACQUIRE_GAVE_UP:
                                          why), else NULL                                      */
    /* (0.5.0) */
    const char          *lock_kind;    /* the lock's kind, as hilock_kind says it ("lock",
                                          "fair", "permit", "shared", "exclusive", "legacy",
                                          "bridge"), on the events of a lock's calls:
                                          ACQUIRE_*, RELEASE, EXTEND, RENEWAL, LOST, MEMBER,
                                          GUARD_*, a lock's FAILOVER; NULL on the others
                                          (connections, ERROR, REDIRECT, MAP_REFRESH, a
                                          Sentinel's FAILOVER). Static text                    */
} hilock_event;

/* The observer: called with each event, arg as given to hilock_set_observer.
 *
 * Threads. It runs on the thread that caused the event: the calling thread for a blocking
 * call; the loop's thread for the _async calls of a client attached to a loop
 * (hilock_async.h); a keepalive's own thread for what its renewals cause: RENEWAL, LOST, and
 * on the way MEMBER (Redlock), REDIRECT and MAP_REFRESH (Cluster), FAILOVER, CONNECT,
 * TLS_HANDSHAKE, ERROR (so MEMBER, REDIRECT, MAP_REFRESH, marked "Caller." above, may come
 * from a keepalive's thread too; and every event of an _async call, from the loop's thread,
 * wherever "Caller." is written). With keepalives, it may therefore run on two
 * threads at once: make it thread-safe if you use them. A keepalive's thread calls the
 * observer the client had when hilock_keepalive started (hilock_set_observer later does not
 * reach it), so fn and arg must stay valid until every keepalive started under them has
 * ended (its lock released or freed), even after they were replaced. A client attached to a
 * loop renews on the loop's thread with the client's observer of the moment.
 *
 * Stack. On a loop the events of the _async calls (and of loop keepalives) are emitted from
 * the calls' flows, which run on 64 KiB stacks of their own (hilock_async.h: "Small
 * stacks"), not the loop's: the library's own frames below the observer take up to about
 * 13 KiB there (measured on x86-64 with -O2 over the loop's test suite), so keep the
 * observer's own stack use (its frames and whatever it calls: a logger, snprintf, a
 * metrics library) well under 48 KiB -- no large local buffers, no deep recursion; hand
 * heavy work to the loop (record and return). Blocking calls and keepalive threads run it
 * on the thread's own stack.
 *
 * Locks. Never call hilock on a client or lock (release, extend, check, free, ...) while
 * holding a mutex your observer takes: a keepalive's renewal emits its events while holding
 * the lock's renewal mutex, and the owner's extend and check wait for that mutex (release
 * and free wait for the keepalive's thread to end): the two threads then wait for each
 * other for ever. Take what the observer needs without your locks (atomics, a queue), or
 * let go of the mutex before the call.
 *
 * It may not call into hilock: a call on any client or lock from inside the observer
 * (hilock_acquire, hilock_release, hilock_set_observer, hilock_client_stats, ...) returns
 * HILOCK_EINVAL at once, having sent and changed nothing, and hilock_client_errmsg of that
 * client says "hilock called from inside an observer: an observer may only record the event".
 * hilock_free and
 * hilock_client_free are not checked (they return no status): never call them from it. It
 * should be quick: it runs inside the call (a slow observer slows the lock). */
typedef void (*hilock_observer_fn)(const hilock_event *e, void *arg);

/* Set c's observer (replacing the last one); fn NULL removes it. Returns OK, or EINVAL for a
 * NULL client (or from inside an observer). A client attached to a loop: from the loop's
 * thread, as its other calls. */
HILOCK_API hilock_status hilock_set_observer(hilock_client *c, hilock_observer_fn fn, void *arg);

/* "acquire_start", "acquire_granted", ... "error" (the kind's name without HILOCK_EVENT_,
 * lower case); "unknown" for another value. Static strings. */
HILOCK_API const char *hilock_event_name(hilock_event_kind kind);

/* ---- counters and histograms ----------------------------------------------------------- */

/* Buckets of a histogram of times in microseconds, on a fixed log-2 scale, the same for all:
 *   bucket 0           counts values v <= 1 us (0 and 1);
 *   bucket i (1..30)   counts 2^(i-1) < v <= 2^i us   (bucket 10: 513..1024 us);
 *   bucket 31          counts v > 2^30 us (about 1074 s): the overflow.
 * So bucket i's upper edge (Prometheus "le") is 2^i us, inclusive, for i <= 30, and +Inf for
 * bucket 31. The counts are per bucket (not cumulative); hilock_stats_prometheus makes them
 * cumulative. */
#define HILOCK_HIST_BUCKETS 32

typedef struct hilock_histogram {
    uint64_t count;                         /* values recorded                          */
    uint64_t sum_us;                        /* their sum, microseconds                  */
    uint64_t bucket[HILOCK_HIST_BUCKETS];   /* see above                                */
} hilock_histogram;

/* A client's totals since it was made. It only ever grows (fields appended):
 * hilock_client_stats() is a macro passing sizeof(hilock_stats), so a program built against
 * an older header gets the prefix it knows.
 *
 * What is counted where: the calls of the client's own thread (or its loop) are counted on
 * it as they happen, with no lock (a client is one thread's). A keepalive's thread counts
 * only renewal_ok, renewal_failed and lost on the owner's client (atomic increments, read
 * atomically); its own round trips and connections are not in round_trips, reconnects or
 * the round-trip histogram.
 *
 * Across clients (one per thread): call hilock_client_stats on each from its own thread
 * (the thread rule), e.g. at the end of each unit of work into a per-thread copy, and add
 * the copies with hilock_stats_merge under your own mutex, or hand them to the thread that
 * exports them. */
typedef struct hilock_stats {
    uint64_t acquire_ok;          /* acquires granted                                       */
    uint64_t acquire_busy;        /* acquires that ended BUSY (held by another)              */
    uint64_t acquire_error;       /* acquires that ended with an error                       */
    uint64_t release_ok;
    uint64_t release_not_held;    /* release answered NOT_HELD (it had expired or was taken) */
    uint64_t release_lost;        /* release answered LOST (a failover)                      */
    uint64_t release_error;
    uint64_t extend_ok;           /* hilock_extend and hilock_check that held it             */
    uint64_t extend_failed;       /* ... that did not (NOT_HELD, LOST or an error)           */
    uint64_t renewal_ok;          /* keepalive renewals                                      */
    uint64_t renewal_failed;      /* ... failed (each try, passing failures included)        */
    uint64_t lost;                /* LOST events: locks found no longer ours                 */
    uint64_t round_trips;         /* pipelines answered in full by a node (one per node per
                                     trip; a new connection's handshake is not one, nor a
                                     wait's blocking BLPOP)                                 */
    uint64_t connects;            /* connections opened (handshake done): CONNECT events      */
    uint64_t reconnects;          /* ... of those, to a node (a Cluster's server) that had one
                                     before                                                  */
    uint64_t failovers;           /* failovers the Sentinels named (once per client and failover) */
    uint64_t redirects;           /* Cluster MOVED / ASK / TRYAGAIN answers                  */
    uint64_t errors;              /* ERROR events (a Redlock wait's masters left when another
                                     answered first are none)                               */
    hilock_histogram acquire_wait;   /* granted acquires: start to grant                     */
    hilock_histogram round_trip;     /* each of round_trips: sent to last reply (a new
                                        connection's: from its connect)                     */
} hilock_stats;

/* Copy c's totals into the first `size` bytes of *s (fields past size are not written; a
 * newer header's larger struct gets 0 in the fields this library lacks).
 * Returns OK, or EINVAL (NULL c or s, size 0, from inside an observer, or another thread
 * inside a call on c: the thread rule). */
HILOCK_API hilock_status hilock_client_stats_sized(hilock_client *c, hilock_stats *s, size_t size);
#define hilock_client_stats(c, s) hilock_client_stats_sized((c), (s), sizeof(hilock_stats))

/* Add *from into *into: every counter and every histogram's count, sum and buckets (the
 * buckets are the same for all, so histograms merge exactly). NULL is ignored. Both must be
 * of the size given (a macro passes sizeof(hilock_stats)); a newer header's fields this
 * library lacks are left as they are in *into. */
HILOCK_API void hilock_stats_merge_sized(hilock_stats *into, const hilock_stats *from, size_t size);
#define hilock_stats_merge(into, from) hilock_stats_merge_sized((into), (from), sizeof(hilock_stats))

/* Put 1 value (microseconds; negative counts as 0) in h: what the library does for each
 * wait and round trip, for programs that keep histograms of their own in the same buckets. */
HILOCK_API void hilock_histogram_add(hilock_histogram *h, int64_t us);

/* Write *s in the Prometheus text exposition format (version 0.0.4) into buf (at most len
 * bytes, NUL included; snprintf-style: always NUL-terminated when len > 0). Returns the
 * length the whole text needs, without the NUL: a return >= len means it was cut short, so
 * grow buf to the return + 1 and call again (compare as (size_t)ret >= len); -1 if s is
 * NULL, if labels is malformed (below), or if the text would not fit in an int (about 90
 * lines, each with labels: only a labels string of tens of megabytes gets there). With -1 for
 * s NULL or malformed labels nothing is written but, when len > 0, buf[0] = 0.
 *
 * Names (each with # HELP and # TYPE lines):
 *   hilock_acquires_total{outcome="ok"|"busy"|"error"}                          counter
 *   hilock_releases_total{outcome="ok"|"not_held"|"lost"|"error"}               counter
 *   hilock_extends_total{outcome="ok"|"failed"}                                 counter
 *   hilock_renewals_total{outcome="ok"|"failed"}                                counter
 *   hilock_lost_total, hilock_round_trips_total, hilock_connects_total,
 *   hilock_reconnects_total, hilock_failovers_total, hilock_redirects_total,
 *   hilock_errors_total                                                          counters
 *   hilock_acquire_wait_seconds, hilock_round_trip_seconds                      histograms:
 *     _bucket{le="..."} cumulative, one per bucket edge (2^i us in seconds, as "%.6f"
 *     trimmed: "0.000001", "0.000002", ... "1073.741824") then le="+Inf"; _sum in seconds
 *     ("%.6f"); _count.
 * labels: NULL or "" for none, else a preformatted label set without braces
 * (`app="x",shard="2"`), put first in every sample's braces, as given. It must be what the
 * format takes, or the call returns -1 (one malformed sample fails the whole scrape):
 * name="value" pairs joined by commas, no spaces, no trailing comma; a name matches
 * [a-zA-Z_][a-zA-Z0-9_]*, appears once (64 names at most), is neither outcome nor le (the
 * library's own); a value is UTF-8 and the caller escapes it (backslash, double quote and
 * newline as \\, \" and \n, the only escapes). `app=x` (no quotes) is refused. The
 * library never adds the key as a label (one series per key would grow without bound). */
HILOCK_API int hilock_stats_prometheus_sized(const hilock_stats *s, size_t size, char *buf,
                                             size_t len, const char *labels);
#define hilock_stats_prometheus(s, buf, len, labels) \
    hilock_stats_prometheus_sized((s), sizeof(hilock_stats), (buf), (len), (labels))

#ifdef __cplusplus
}
#endif
#endif /* HILOCK_OBSERVE_H */
