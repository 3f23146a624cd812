/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hilock_inspect.h -- read-only views of lock keys, for operators and tools: list what a key
 * family holds on each master (one SCAN page at a time), and look at one lock and its aux keys.
 * The `hilock inventory` and `hilock inspect` commands are built on these calls.
 *
 * Nothing here writes, but hilock_break (at the end: an operator removing a stuck holder).
 * Each of the other calls runs one Lua script that declares itself `no-writes`, so the
 * server itself refuses any write from it (this needs Redis >= 7.0; older servers answer with
 * an error: HILOCK_EREPLY). One exception, which a fresh client never meets: a client that
 * earlier lock calls left with undos (values whose write timed out, see hilock.h) sends them
 * first, on every call, as it does for lock calls; they delete only that client's own values.
 *
 * Bounds: each call is one round trip (to one master, or to all at once), bounded by
 * io_timeout_ms (+ connect_timeout_ms when it has to connect), like every call. Long listings
 * are many calls: the caller decides between pages whether to go on.
 *
 * Connections are the client's: the same URLs, AUTH, Sentinel resolution and Redlock server
 * list as its locks. Thread rule as in hilock.h: one thread at a time per client.
 */
#ifndef HILOCK_INSPECT_H
#define HILOCK_INSPECT_H

#include "hilock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* At most this many bytes of a string value are returned (value_size says how long it is).
 * Lock values are 32-byte tokens or stamps shorter than HILOCK_CODEC_MAX. */
#define HILOCK_VIEW_VALUE_MAX 256

/* The number of masters in the client's server list (1, or N for Redlock): the master
 * indexes below are 0..N-1. 0 for NULL. */
HILOCK_API size_t hilock_client_masters(const hilock_client *c);

/* A printable name of master i, as errmsg uses it: "127.0.0.1:6379", "/tmp/redis.sock", and
 * for a Sentinel URL "sentinel mymaster", then "mymaster@10.0.0.5:6379" once resolved; never
 * a password. Owned by the client, valid until its next call. NULL for NULL or i out of range. */
HILOCK_API const char *hilock_client_master_name(const hilock_client *c, size_t i);

/* What one key holds. Every pointer is owned by the library and valid only during the
 * callback that receives it. Strings are NUL-terminated but binary-safe: use the lengths. */
typedef struct hilock_key_view {
    const char *key;          /* the key's bytes                                            */
    size_t      key_len;
    const char *type;         /* "string", "list", "hash", "set", "zset", "stream", a module
                                 type, or "none": the key does not exist (it may have expired
                                 between SCAN and this look)                                 */
    int64_t     pttl_ms;      /* ms to live; -1: no expiry; -2: no such key                  */
    const char *value;        /* string keys: its first bytes (at most HILOCK_VIEW_VALUE_MAX);
                                 a semaphore's or shared/exclusive lock's sorted set (new
                                 in 0.5.0): its kind marker, "hilock:sem" or "hilock:rw";
                                 NULL for other types and missing keys                       */
    size_t      value_len;    /* bytes at value                                             */
    int64_t     value_size;   /* string keys: the whole value's length; -1 otherwise         */
} hilock_key_view;

typedef void (*hilock_scan_fn)(size_t master, const hilock_key_view *k, void *arg);

/* One page of SCAN on master `master`: SCAN cursor MATCH pattern COUNT count, then TYPE,
 * PTTL and the start of each string value of the page's keys, in the same script (one
 * round trip). fn is called once per key of the page, in SCAN's order.
 *   *cursor: 0 to start a scan; on OK, the cursor of the next page (0: the scan is complete).
 *   pattern: a Redis glob (MATCH); NULL = "*".
 *   count:   SCAN's COUNT hint, 1..500 (keys looked at per page; the page blocks the
 *            server for as long as its script runs: ~1 us per key).
 * SCAN's guarantees hold: a key present during the whole scan is returned at least once
 * (maybe twice); keys added or removed meanwhile may or may not be. Loop:
 *     uint64_t cur = 0;
 *     do st = hilock_scan(c, m, "lock.*", 100, &cur, fn, arg); while (st == HILOCK_OK && cur);
 * Works on every server from Redis 2.8 (SCAN); from 7.0 the script is flagged no-writes, so
 * the server itself refuses any write from it (before 7.0 the flag line is sent as a comment).
 * Returns OK; EINVAL (NULL c/cursor/fn, master out of range, count outside 1..500, pattern
 * longer than HILOCK_KEY_MAX); EIO, ETIMEDOUT, EAUTH, EREPLY (a server error, or a reply of
 * the wrong shape), ENOMEM -- with which master and why in
 * hilock_client_errmsg(). On an error fn was not called and *cursor is unchanged, so the same
 * page may be asked again. */
HILOCK_API hilock_status hilock_scan(hilock_client *c, size_t master, const char *pattern, size_t count,
                                     uint64_t *cursor, hilock_scan_fn fn, void *arg);

struct hilock_holder_view;

/* A lock key and its aux keys on one master (names as hilock.h's options.wake describes). */
typedef struct hilock_lock_view {
    hilock_key_view key;      /* the lock key itself                                        */
    int64_t fence;            /* the fence counter {key}:fence: the last fencing token minted
                                 on this master (without the Sentinel epoch bits, see
                                 hilock_fence); -1: none (no grant for an hour past the last
                                 grant's ttl, 35 days with a Redlock epoch: docs/fencing.md) */
    int64_t fence_pttl_ms;    /* its ms to live, -2: none                                    */
    int64_t waiters_pttl_ms;  /* the wake-on-release marker {key}:waiters: a waiter is blocked
                                 (or was, until the marker expires) and the release will wake
                                 one; ms to live, -2: none                                   */
    int64_t signals;          /* wake-ups in {key}:signal that no waiter has taken yet        */
    /* The holder record {key}:holder (new in 0.5.0): who was granted the lock's current
     * value, as that client described itself. Informative only -- for an operator's question
     * "which machine has it?" -- never proof of ownership (any client with write access can
     * write it; ownership is the value itself, and fencing tokens protect a resource). One
     * record per key names the client of its latest grant by the client's tag, the last 12
     * digits of its tokens (docs/fencing.md); shown only while the key's value is a token
     * ending with that tag, so another client's grant is never taken for the holder's. None (holder_host NULL, holder_pid and
     * holder_since_ms -1) for values hilock_acquire did not write with a record: fencing = 0
     * (a plain SET), fair, legacy and bridge locks, other writers, hilock 0.4.0 and older.
     * A program that may run on libhilock 0.4.0 (same soname) checks that hilock_version()
     * says 0.5.0 or later before reading these: that library's view ends before them. */
    const char *holder_host;      /* its host name (gethostname), or NULL: no record          */
    int64_t     holder_pid;       /* its process id, -1: none                                */
    const char *holder_program;   /* its program's name, or NULL                             */
    int64_t     holder_since_ms;  /* when it was granted: unix time in ms by this master's
                                     clock, as the holder's client reckoned it (its fencing
                                     token, read from {key}:fence); -1: none, or not known (the
                                     counter is ahead of the clock: the key was granted faster
                                     than once a ms; a Redlock's epoch token)                  */
    /* Semaphores and shared/exclusive locks (new in 0.5.0, as the holder fields: a program
     * that may run on libhilock 0.4.0 checks hilock_version() before reading these). Their key
     * is a sorted set of the holders' tokens, each scored with its expiry by the master's
     * clock, plus a marker member naming the kind (key.value shows it: "hilock:sem" or
     * "hilock:rw"); their holder records are the hash {key}:holders and their waiters the
     * sorted set {key}:wq. "Live": expiring after now by the master's clock (TIME, read in
     * the same script); expired holders the next grant prunes are not counted. */
    const char *kind;             /* "lock": a string key, or none at all; "semaphore", "rwlock":
                                     a sorted set with that marker; NULL: anything else        */
    int64_t     holders;          /* semaphore, rwlock: live holders; lock: 1 if the key exists,
                                     else 0; -1 for another type                               */
    int64_t     limit;            /* semaphore: the limit the latest grant among the holders was
                                     made under (callers pass their own: holder[i].limit);
                                     -1: not a semaphore, no holder, or no record              */
    int64_t     waiters;          /* semaphore, rwlock: live registrations in {key}:wq (waiters
                                     that block or poll for a grant); 0 for a lock, whose
                                     waiters show in waiters_pttl_ms                           */
    int64_t     writers_waiting;  /* rwlock: those of the waiters that ask exclusive ("x:"
                                     tokens); a plain lock's waiter on the key shows in
                                     waiters_pttl_ms. 0 otherwise                             */
    const struct hilock_holder_view *holder;   /* the live holders, soonest expiry first   */
    size_t      nholder;          /* entries at holder: all of them (at most
                                     HILOCK_SEM_LIMIT_MAX are returned, which is more than a
                                     semaphore or a shared lock grants); 0 for a lock          */
} hilock_lock_view;

/* One holder of a semaphore or a shared/exclusive lock (hilock_lock_view.holder, new after
 * 0.4.0). An array's element: this struct never grows (a new per-holder fact would come as
 * a new array of the view). The record fields are, as for a lock, what the holder's client
 * said of itself: informative only, never proof of ownership. */
typedef struct hilock_holder_view {
    const char *token;            /* its token, the set's member: hilock_token() of its hilock */
    size_t      token_len;
    const char *mode;             /* "permit" (semaphore), "shared" or "exclusive" (rwlock)    */
    int64_t     pttl_ms;          /* ms until it expires, by the master's clock               */
    int64_t     limit;            /* semaphore: the limit its caller passed; 0: an rwlock
                                     grant; -1: no record                                     */
    const char *host;             /* its host name, or NULL: no record in {key}:holders        */
    int64_t     pid;              /* its process id, -1: none                                  */
    const char *program;          /* its program's name, or NULL                               */
    int64_t     since_ms;         /* when it was granted, unix ms by the master's clock; -1    */
} hilock_holder_view;

/* Called once per master, in order: v on success, else v = NULL and error says which master
 * and why. Pointers are valid only during the call. The library writes *v: fields are only
 * ever appended to hilock_lock_view (docs/versioning.md), so a program built with an older
 * header reads the fields it knows; never copy *v into a struct of your own by size. */
typedef void (*hilock_inspect_fn)(size_t master, const hilock_lock_view *v, const char *error, void *arg);

/* Look at `key` on every master at once (one round trip) and call fn for each.
 * Returns OK (every master answered); EINVAL (NULL c/key/fn, empty key or longer than
 * HILOCK_KEY_MAX: fn is not called); otherwise the error of a master that failed (EIO,
 * ETIMEDOUT, EAUTH, EREPLY, ENOMEM), with every failed master in hilock_client_errmsg() --
 * fn has still been called for every master. */
HILOCK_API hilock_status hilock_inspect(hilock_client *c, const char *key, hilock_inspect_fn fn, void *arg);

/* ---- Redis Cluster: every shard, and each replica's view ----
 * A redis-cluster:// URL is one master of the client (hilock_client_masters counts it once),
 * routed per key: hilock_scan sees one shard of it, hilock_inspect the shard owning the key's
 * slot. These calls reach each node of its slot map by itself: hilock_cluster_nodes lists
 * them, hilock_scan_node and hilock_inspect_node read one. The nodes are reached as the
 * cluster's are (the URL's user and password, TLS settings, timeouts), on a connection made
 * for the call and closed after it (one more round trip per call: the connection's
 * handshake), which sends READONLY first, so a replica answers from its own data set instead
 * of redirecting: its view may lag its master's, or differ from it -- what an operator wants
 * to see (tested with Redis 4.0 to 7.4 and Valkey 8.0; a server that would not run the script
 * on a replica answers MOVED, which is then that view's error). */

/* One node of a cluster's slot map. Pointers valid only during the callback. */
typedef struct hilock_cluster_node {
    const char *addr;     /* "127.0.0.1:7001", "[::1]:7001": the map's address; what
                             hilock_scan_node and hilock_inspect_node take                   */
    const char *id;       /* its node id (40 hex digits; "" if the map gave none)            */
    size_t      slots;    /* a master: how many hash slots it serves; a replica: 0           */
    int         replica;  /* 1: a replica of the master reported last before it; 0: a master */
} hilock_cluster_node;

typedef void (*hilock_cluster_fn)(size_t master, const hilock_cluster_node *n, void *arg);

/* The nodes of master i's cluster by its slot map (asked of the seeds first when the client has
 * none, or a stale one): with key NULL, every master that serves slots, in the order of its
 * first slot, each followed by its replicas; with a key, the master owning the key's slot
 * followed by its replicas. fn is called after the map was read (it may call the client).
 * A master the cluster marks failed is still listed while the map names it: reading it then
 * fails, which is how an operator learns it is down. The map is asked of every seed and a few
 * of its masters at once, and all that answer in time are read: the masters and slots are
 * the first one's, the replicas every one that any of them names (a node learns another's
 * role by gossip, so one node alone may not yet know a replica as one), each replica's own
 * line saying whose it is.
 * Returns OK; EINVAL (NULL c/fn, master out of range, a key empty or too long, or master i
 * is not a redis-cluster:// URL -- "not a cluster" in hilock_client_errmsg); EIO, ETIMEDOUT,
 * EAUTH, EREPLY (no seed gave the map: the seeds and why in hilock_client_errmsg), ENOMEM.
 * Bounded by connect_timeout_ms + 3 x io_timeout_ms (hilock.h: hilock_extend's bound). */
HILOCK_API hilock_status hilock_cluster_nodes(hilock_client *c, size_t master, const char *key,
                                              hilock_cluster_fn fn, void *arg);

/* hilock_scan on one node of master i's cluster (addr: as hilock_cluster_nodes gave it): that
 * node's own keys; fn receives `master`. Arguments, cursor and statuses as hilock_scan's, and
 * EINVAL for an addr that is not in the slot map (or master i not a cluster). A cursor is the
 * node's own: go on with the same addr. */
HILOCK_API hilock_status hilock_scan_node(hilock_client *c, size_t master, const char *addr, const char *pattern,
                                          size_t count, uint64_t *cursor, hilock_scan_fn fn, void *arg);

/* hilock_inspect on one node of master i's cluster: that node's view of key and its aux keys
 * (a replica's included). fn is called once, with `master`: v, or v = NULL and the error.
 * Statuses as hilock_inspect's, and EINVAL as hilock_scan_node's. */
HILOCK_API hilock_status hilock_inspect_node(hilock_client *c, size_t master, const char *addr, const char *key,
                                             hilock_inspect_fn fn, void *arg);

/* ---- Breaking a stuck lock (new in 0.5.0): the one call here that writes ----
 * hilock_break removes what holds `key` -- a lock's value, one or all permits of a semaphore
 * or grants of a shared/exclusive lock, a legacy (or bridge) stamp -- with that holder's aux
 * records (its holder record, its entries in {key}:holders, a fair queue entry of its token),
 * and wakes the key's waiters as a release would. It is for an operator facing a holder that
 * is gone but left a key without a TTL, or a long one (the `hilock break` command); a program
 * that still runs with the lock is not stopped by it: a holder under keepalive learns of the
 * loss at its next renewal (its on_lost: HILOCK_NOT_HELD), one without learns at its next
 * extend, check or release. Fencing tokens are what protect a resource from such a holder.
 *
 * The fence counter {key}:fence is never reset nor deleted: the next grant's token is larger
 * than every token given before the break.
 *
 * Steps: (1) a look at key on every master, as hilock_inspect (one round trip): show, if not
 * NULL, is called with each master's view, as hilock_inspect's fn; (2) confirm, if not NULL,
 * is called once: 0 = no (nothing removed: HILOCK_ECANCELED), anything else = go on; (3) on
 * each master that holds something, one script (the masters with the same holders at once,
 * one round trip) that first compares the key with what step 1 saw -- the same string value,
 * or the same kind and the same live holders -- and removes nothing if it changed meanwhile
 * (a new grant, a release, an expiry: expiries moved by renewals are not a change); (4) done,
 * if not NULL, is called once per master, in order, with what was removed there (r) or, when
 * that master failed, r = NULL and why. Pointers are valid only during the callbacks, which
 * may not call the client.
 *
 * token: NULL = every holder of the key; else the one holder with that token, as inspect
 * shows it (a lock's value, a permit's or grant's token: hilock_token() of its hilock) --
 * nothing is removed where another one holds the key.
 *
 * What is a lock: a string that is a hilock token (32 lowercase hex digits) or a legacy stamp
 * (digits, an optional fraction, an optional -pid[-thread] suffix: every preset's shape), or a
 * sorted set with a semaphore's or shared/exclusive lock's marker. Anything else -- a user's
 * string or hash, a hilock aux key named as KEY -- is refused, on every master, before
 * anything is removed (HILOCK_EINVAL).
 *
 * Works on every topology the client's locks use: one server, Sentinel (the master), Cluster
 * (the master of the key's slot), several masters (Redlock: each master by itself; one may
 * have removed while another found the key changed: done says which).
 *
 * Returns OK (removed on every master that held something); NOT_HELD (nothing to remove: no
 * such key, or token is not a holder, on any master; confirm was not called, nothing sent);
 * BUSY (on at least one master the key changed between the look and the removal: nothing
 * removed there; the others as done says); ECANCELED (confirm said no, or hilock_cancel);
 * EINVAL (NULL c or key, empty key or longer than HILOCK_KEY_MAX, a token that is empty,
 * longer than HILOCK_VIEW_VALUE_MAX or not printable ASCII without blanks, a key that holds
 * no lock as above: nothing sent after the look); EIO, ETIMEDOUT, EAUTH, EREPLY (an aux key of
 * another type than hilock writes there: that master removed nothing), ENOMEM: a master failed
 * -- in the look (nothing removed anywhere) or in the removal (after ETIMEDOUT its fate is
 * unknown: look again) -- with every failed master in hilock_client_errmsg(). Bounded by two
 * calls' bounds (hilock_extend's, each) plus the time confirm takes. */

/* What hilock_break did on one master. The library writes *r: fields are only ever
 * appended (docs/versioning.md). */
typedef struct hilock_break_report {
    const char *outcome;   /* "removed"; "changed": the key changed since it was shown, nothing
                              removed; "none": nothing to remove on this master (no such key,
                              or token is not a holder here)                                 */
    const char *kind;      /* what held it: "lock" (a hilock token), "legacy" (a stamp: a
                              legacy or bridge lock), "semaphore", "rwlock"; NULL: nothing     */
    int64_t removed;       /* holders removed: 1 for a lock or stamp; permits or grants       */
    int64_t left;          /* live permits or grants left (token given); 0 otherwise          */
    int64_t records;       /* aux records removed with them (holder record, {key}:holders
                              entries, fair queue entries of the holder's token)             */
    int64_t woken;         /* wake-ups sent to waiters (as a release sends them)              */
    int64_t fence;         /* the fence counter, untouched: the last token minted on this
                              master (without epoch bits); -1: no counter                      */
} hilock_break_report;

typedef int (*hilock_confirm_fn)(void *arg);
typedef void (*hilock_break_fn)(size_t master, const hilock_break_report *r, const char *error, void *arg);

HILOCK_API hilock_status hilock_break(hilock_client *c, const char *key, const char *token, hilock_inspect_fn show,
                                      hilock_confirm_fn confirm, hilock_break_fn done, void *arg);

#ifdef __cplusplus
}
#endif
#endif /* HILOCK_INSPECT_H */
