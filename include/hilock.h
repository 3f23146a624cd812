/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hilock.h -- locks on Redis: one master, a master behind Sentinel, or N masters (Redlock).
 *
 * The header is the manual. Every function says what it does, who owns what, and which
 * statuses it can return. Nothing outside include/ is API.
 *
 * Thread rule: a client and the locks made from it are used by one thread at a time;
 * clients share nothing, so use one client per thread. (A keepalive runs on its own
 * thread with its own connection; see hilock_keepalive.) The rule is checked: a call on a
 * client, or on any lock made from it, that comes from a second thread while another thread
 * is inside a call on that client returns HILOCK_EINVAL at once, having sent and changed
 * nothing; hilock_client_errmsg, asked from the refused thread, says "client used from two
 * threads at once" (the other thread's errmsg is left alone). The check costs one atomic
 * compare-and-swap per call, and it is not a lock: the refused call is not retried, and two
 * threads taking turns through a mutex of their own are fine -- except on a client attached
 * to an event loop (hilock_async.h): it belongs to the thread that attached it, and a call
 * from any other thread is refused the same way even while that thread is outside hilock
 * (hilock_client_free excepted). Not checked, because they can
 * return no status: hilock_free and hilock_client_free (free a lock or client once no other
 * thread is inside a call on that lock or client; on a blocking client, freeing one lock
 * while another thread uses the client's other locks is safe; a client attached to an event
 * loop frees its locks on the loop's thread, as hilock_free ends their calls in flight there),
 * and the accessors that only read (hilock_validity_ms, hilock_fence, hilock_token,
 * hilock_key, hilock_keepalive_errmsg). A thread that leaves a call other than by its return
 * (pthread_cancel, or a longjmp out of a callback) leaves the client marked in use: every
 * later call on it from another thread is HILOCK_EINVAL.
 *
 * fork(): a client, and every lock made from it, belongs to the process that made the
 * client. In a forked child its copy may only be freed: hilock_free and hilock_client_free
 * free the child's memory (no network I/O on the parent's connections, no joining of the
 * parent's keepalive threads); every other call on it returns HILOCK_EINVAL with
 * "client used in a forked child (pid N); made in pid M" in hilock_client_errmsg
 * (hilock_validity_ms: 0; hilock_keepalive_errmsg: ""). The parent's lock and keepalive are
 * unaffected. A child that needs locks makes its own client.
 *
 * Connections: a client connects on first use and keeps its connection(s). One that the server
 * closed while it sat idle for 250 ms or more (a restart, its `timeout`, CLIENT KILL) is
 * reopened before use, transparently; one that breaks during a call makes that call fail
 * (HILOCK_EIO), and the next call reconnects.
 *
 * Quick start:
 *
 *     hilock_client *c;
 *     hilock *l;
 *     if (hilock_client_open("redis://127.0.0.1:6379", &c) != HILOCK_OK) ...
 *     hilock_status s = hilock_acquire(c, "jobs:nightly", 30000, 5000, &l);
 *     if (s == HILOCK_OK) {
 *         ... work, using hilock_fence(l) with the protected resource ...
 *         hilock_release(l);
 *         hilock_free(l);
 *     } else if (s == HILOCK_BUSY) {
 *         ... someone else has it ...
 *     } else {
 *         fprintf(stderr, "lock: %s\n", hilock_client_errmsg(c));
 *     }
 *     hilock_client_free(c);
 */
#ifndef HILOCK_H
#define HILOCK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && defined(HILOCK_BUILDING)
#define HILOCK_API __attribute__((visibility("default")))
#else
#define HILOCK_API
#endif

/* The version of this header: MAJOR.MINOR.PATCH. The shared library's soname is
 * libhilock.so.MAJOR, and MAJOR changes only when the ABI breaks (a function or type
 * removed or changed); MINOR grows with additions that keep old programs working; PATCH
 * with fixes. The Makefile takes the version from these three lines. */
#define HILOCK_VERSION_MAJOR 0
#define HILOCK_VERSION_MINOR 5
#define HILOCK_VERSION_PATCH 0
#define HILOCK_VERSION "0.5.0"   /* the three numbers above, as text */

/* Every call returns one of these. HILOCK_OK is 0; BUSY, NOT_HELD and LOST are results,
 * the rest are errors whose detail (which server, why) is in hilock_client_errmsg(). */
typedef enum hilock_status {
    HILOCK_OK = 0,
    HILOCK_BUSY,        /* someone else holds it: try-lock failed, or wait_ms passed            */
    HILOCK_NOT_HELD,    /* release/extend/check: our value is gone (expired, released, taken)   */
    HILOCK_LOST,        /* a failover since acquisition: ownership can't be trusted             */
    HILOCK_EINVAL,      /* bad argument or option                                               */
    HILOCK_EIO,         /* can't connect, connection broke; or -LOADING, -BUSY, -MASTERDOWN
                           (transient: retried while an acquire may wait; errmsg names it)    */
    HILOCK_ETIMEDOUT,   /* a round trip took longer than io_timeout_ms                          */
    HILOCK_EAUTH,       /* AUTH / ACL refused                                                   */
    HILOCK_EREPLY,      /* server error or unexpected reply (WRONGTYPE, OOM, script error, ...);
                           "reply too large" past the limits (README: 8192 elements, 64 KiB)  */
    HILOCK_EREPLICAS,   /* fewer replicas acknowledged than min_replicas; the lock was undone   */
    HILOCK_ENOQUORUM,   /* Redlock: too few masters answered to decide                          */
    HILOCK_ENOMEM,
    HILOCK_ECANCELED    /* hilock_cancel ended the call; nothing is held by it (since 0.5.0)  */
} hilock_status;

/* wait_ms value for hilock_acquire: wait as long as it takes. (INT64_C, not a cast: the same
 * spelling compiles without a warning as C++, -Wold-style-cast and -Wuseless-cast included.) */
#define HILOCK_WAIT_FOREVER INT64_C(-1)

/* The longest ttl accepted: 365 days. Longer is treated as a mistake (HILOCK_EINVAL). */
#define HILOCK_TTL_MAX_MS (INT64_C(365) * 24 * 3600 * 1000)

/* The longest key accepted, in bytes (aux keys add a few bytes to it). */
#define HILOCK_KEY_MAX 4096

typedef struct hilock_client hilock_client;   /* opaque; one per thread */
typedef struct hilock hilock;                 /* opaque; one held lock  */

/* ---- Legacy value codec (used by hilock_legacy.h and by bridge mode) -----------------
 *
 * How a fleet of old SETNX/GETSET clients writes "unix time + timeout (+1)" into the key.
 * Declared here because hilock_options carries one; the functions that use it are in
 * hilock_legacy.h. Get a filled one from hilock_codec_preset(). */
typedef enum hilock_unit {
    HILOCK_UNIT_S = 0,     /* seconds      */
    HILOCK_UNIT_MS,        /* milliseconds */
    HILOCK_UNIT_US         /* microseconds */
} hilock_unit;

typedef enum hilock_suffix {
    HILOCK_SUFFIX_NONE = 0,       /* pure number: the only format every legacy parser accepts */
    HILOCK_SUFFIX_PID_THREAD      /* "-<pid>-<thread>" as the Ruby redis-lock gem writes      */
} hilock_suffix;

/* codec.decimals for float seconds as Ruby and Python write them (codec.unit must be
 * HILOCK_UNIT_S): the shortest decimal that reads back as the same double (Ruby's
 * Float#to_s, Python's repr: "1795417220.4802637", "1795417238.0" for a whole second),
 * computed from the clock as that runtime computes the double:
 *   RUBY:   (Time.now + timeout + 1).to_f -- an exact sum in nanoseconds, then
 *           (double)ns / 1e9 (redis-objects);
 *   PYTHON: time.time() + timeout -- Python 2.7's tv_sec + tv_usec * 0.000001, then the
 *           timeout added as a double (redis-py 2.8-2.9). */
#define HILOCK_DECIMALS_RUBY   (-1)
#define HILOCK_DECIMALS_PYTHON (-2)

typedef struct hilock_codec {
    hilock_unit   unit;
    int           decimals;          /* 0: integer; 1..6: fixed decimals ("%.Nf"); or one of
                                        the HILOCK_DECIMALS_RUBY/_PYTHON float styles above    */
    int           plus_one;          /* stamp = now + timeout + 1 unit (the documented "+1")  */
    int           expired_if_equal;  /* a stamp equal to now is expired ("<=" rather than "<") */
    hilock_suffix suffix;            /* what follows the number                               */
} hilock_codec;

/* ---- Options --------------------------------------------------------------------------
 *
 * Always start from hilock_options_init(); fields may be added in later versions and the
 * init function gives each one its default. hilock_client_new() copies what it keeps, so
 * the struct and its strings may be freed or reused after the call.
 *
 * Growing without breaking applications (docs/versioning.md): fields are only ever
 * appended, never moved, resized or removed, and hilock_options_init() and
 * hilock_client_new() are macros that pass sizeof(hilock_options) -- the size this program
 * was compiled with -- to hilock_options_init_sized() and hilock_client_new_sized(). So a
 * program built against an older header and run on a newer libhilock.so.0 is read and
 * written only within its own, smaller struct: the fields it does not know get their
 * defaults. The library also keeps exporting the plain functions hilock_options_init and
 * hilock_client_new, frozen at the size of the first release (0.1.0), for the binaries
 * built before the macros existed; taking their address (&hilock_options_init) gets those
 * frozen functions, which know only the fields of 0.1.0 -- a program that calls through a
 * pointer and sets newer fields must point at the _sized functions and pass the size.
 * hilock_codec is embedded in hilock_options and therefore frozen: new codec properties
 * would become new options fields. */
typedef struct hilock_options {
    /* Server URLs. One URL = one master (direct, through Sentinel, or a Redis Cluster routed
     * by hash slot); two or more = Redlock over independent masters (quorum N/2+1). Forms:
     *   redis://[[user]:password@]host[:port][/db]            (host may be [::1]; port 6379;
     *                                                          ?db=N, redis-py's form, for /db)
     *   rediss://...                                          (the same over TLS)
     *   unix:///path/to/redis.sock[?db=N]
     *   redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]
     *       [?sentinel_username=U&sentinel_password=P]#master-name
     *   rediss-sentinel://...        (TLS to the Sentinels and the nodes; docs/tls.md)
     *   redis-cluster://[[user]:password@]host[:port][,host[:port]...]   (seed nodes, any
     *       reachable one is enough, and once a map is in hand its masters are asked with
     *       them; no /db; docs/cluster.md), rediss-cluster://... over TLS
     * Percent-escapes (%40 for '@') are decoded in user and password. The user info of a
     * Sentinel URL is for the data nodes; the query, for the Sentinels themselves (requirepass
     * on a Sentinel, Redis >= 6; sentinel_username only with sentinel_password). No default:
     * at least one server must be given; at most 32.
     * Redlock (2..32 URLs, any of the forms above, a Sentinel URL being one member): one token
     * for all masters, all asked at once; each master gets ~5% of the ttl (at least 5 ms, at
     * most io_timeout_ms; twice that if it has to connect first), so a dead or frozen master
     * costs a little validity, never a whole io_timeout. Success needs a quorum and
     * validity > 0; a failed attempt gives its partial grants back on every master before
     * the next one. Masters without fsync must stay down, after a crash, for longer than the
     * largest ttl in use (see docs/redlock.md, "The delayed-restart rule").
     * Each master once: two URLs naming one server as written are refused here, EINVAL
     * naming both entries: the same host and port, or socket path; two Sentinel URLs with one
     * master name and any Sentinel address in common; two Cluster URLs with any seed in
     * common (addresses compared as written, never resolved). One server under two names (a
     * unix socket and TCP, two host names, a Sentinel's master also listed by address) is
     * refused at connect: each new connection of a direct or Sentinel member (to its master)
     * reads the server's run_id (INFO server), and the second member answering with a run_id
     * already seen fails EINVAL (with two URLs the lock is refused; with more, that member
     * always fails). Not checked at connect: a Cluster member (its master depends on the
     * key), and a member whose server answers INFO with an error (an ACL user without INFO,
     * which is in @dangerous; a renamed INFO; a proxy): its run_id is not known, and it locks
     * as any member.
     * Servers: Redis 2.8 to 7.4 and Valkey 7.2+ (docs/servers.md). Each new connection reads
     * the server's version (INFO server) and clock (TIME) once; a feature that server lacks
     * is refused, EINVAL with errmsg naming the feature, the floor and the version (fair
     * >= 3.2; min_replicas >= 3.0; failover_guard, and Sentinel/Cluster failover awareness
     * >= 4.0; TLS >= 6.0), never a script's error, and where a portable form exists it is used
     * (before 6.0 a waiter's BLPOP blocks whole seconds only: a pause under 1 s is polled). An
     * unknown version (INFO refused with an error, or by closing the connection on it as
     * twemproxy does: that node then connects without INFO, or TIME if it closes on that too,
     * and says so once as an ERROR event) is refused nothing, but gets the portable forms (plain
     * scripts, whole-second BLPOP, no LPOS): they work on every server. (An ACL user's
     * connection also reads COMMAND INFO GET: its shape tells 7.0+ or 6.x without INFO.) */
    const char *const *servers;
    size_t       nservers;

    int64_t connect_timeout_ms;   /* bound on one connect (TCP or unix, TLS, asking the
                                     Sentinels); the connection's handshake with the server
                                     (AUTH, SELECT, INFO) that follows is a round trip of its
                                     own (io_timeout_ms). Default 1000.
                                     A host name (in a URL, from a Sentinel, in a MOVED) is
                                     looked up within it too: once for IPv6 and IPv4 together
                                     (getaddrinfo, AF_UNSPEC) on a helper thread, its
                                     addresses then tried in the system's order; a lookup
                                     still running at the deadline is given up: ETIMEDOUT,
                                     "...: resolve HOST: timed out". A name that does
                                     not resolve: EIO, "...: cannot resolve HOST: why". At
                                     most 32 given-up lookups may still run in the process;
                                     past that a new one is refused at once (EIO, "cannot
                                     resolve HOST: N earlier lookups still hang"). Numeric
                                     addresses are parsed, never looked up.                    */
    int64_t io_timeout_ms;        /* bound on one round trip: a new connection's handshake,
                                     a call's commands, and their resend as EVAL when the
                                     server's script cache was empty (NOSCRIPT) each get it
                                     anew, within the call's own bound. Default 1000.          */
    int64_t retry_delay_ms;       /* mean pause between attempts while waiting (jittered
                                     +-50%, never past the holder's expiry or the deadline)
                                     where a waiter does not block on a release signal:
                                     wake = 0, legacy and bridge locks, fair waiters on
                                     servers before 6.0, a server that refuses BLPOP. With
                                     `wake`, poll_ms is the pause instead. Default 50.          */
    double  drift_factor;         /* clock drift allowance: validity loses ttl*drift_factor
                                     + 2 ms. Default 0.01. Range [0, 0.5).                      */
    int     min_replicas;         /* replicas that must acknowledge acquire/extend (WAIT,
                                     pipelined after the script); fewer -> HILOCK_EREPLICAS
                                     (acquire: the grant is deleted again; extend: the lock
                                     keeps its old validity). 0 = don't wait. Default 0.
                                     Needs Redis >= 3.0 (WAIT): on 2.8 every acquire and
                                     extend is HILOCK_EINVAL, nothing sent, errmsg "min_replicas
                                     (WAIT) needs Redis >= 3.0: HOST:PORT runs Redis 2.8.24". */
    int64_t replicas_timeout_ms;  /* bound on that WAIT (it adds to the round trip's bound).
                                     Default 100.                                               */
    int     failover_guard;       /* a master that took over in a failover grants no lock
                                     until the longest ttl granted under its predecessor has
                                     passed (BUSY meanwhile, errmsg says so); the state is kept
                                     on the server, so it holds for every client.
                                     -1 = on for Sentinel URLs, off otherwise (default);
                                     0 = off; 1 = on. See docs/sentinel.md.
                                     Needs Redis >= 4.0 (replication ids, PSYNC2), as do
                                     Sentinel and Cluster URLs (their failover awareness, on
                                     whatever this says): on an older server every lock call
                                     is HILOCK_EINVAL, nothing sent, errmsg naming the floor
                                     and the server's version (docs/servers.md). */
    int     bridge;               /* modern locks write a legacy-readable stamp (see
                                     hilock_legacy.h). Needs exactly one server URL.
                                     Default 0.                                                 */
    hilock_codec codec;           /* the legacy value format; default: the "doc" preset.       */
    int64_t skew_margin_ms;       /* legacy and bridge locks: others' stamps count as passed
                                     only this much later, our own validity ends this much
                                     sooner, and release/extend stop this much before our stamp
                                     passes. Set it to the worst clock difference between the
                                     fleet's hosts. Default 0 (the recipe as written).
                                     Range 0..3600000.                                          */
    int64_t clock_offset_ms;      /* added to this host's wall clock for legacy stamps: to
                                     compensate a known offset, or to inject skew in tests.
                                     Default 0. Range -86400000..86400000.                      */
    int     legacy_pexpire;       /* 1 = hilock_legacy_acquire/extend also give the key a TTL of
                                     the timeout (crash protection; harmless to legacy peers,
                                     though a peer's GETSET removes it again). Default 0.       */
    int     wake;                 /* 1 = a waiting acquire blocks until the holder's release
                                     signals it, the holder's ttl runs out, its own deadline
                                     comes or its pause passes, whichever is first: about
                                     one attempt and one BLPOP per poll_ms for the one waiter
                                     that keeps the watch (a fair lock: its queue's head),
                                     per ~3 x poll_ms for the others, while a holder holds;
                                     0 = pure polling every
                                     retry_delay_ms (a knob for comparisons: make bench; or for
                                     proxies without blocking commands). Default 1.
                                     Waiters block with BLPOP on {key}:signal; an acquire that
                                     finds the lock busy and will wait sets {key}:waiters, and
                                     a release that sees it pushes one element to
                                     {key}:signal, waking one waiter. Both keys expire (the
                                     signal after 1 s). A woken waiter whose next attempt
                                     fails (an error, not a holder) passes the signal on.
                                     One master, Redis >= 6.0, blocking API: a block of at
                                     most ttl/4 is written with the next attempt, which the
                                     server runs as the BLPOP returns (a handoff saves a
                                     round trip; that grant's validity counts from before
                                     the block; not for fair locks).
                                     Legacy and bridge locks always poll (their fleets do
                                     not signal). See docs/waiting-and-keepalive.md.          */
    int64_t failover_guard_ms;    /* the failover guard lasts at least this long: set it to
                                     the longest ttl any client of these keys uses. 0 = rely on
                                     the longest ttl recorded on the master before the failover
                                     (replicated) and the requester's own ttl. Default 0.
                                     Range 0..HILOCK_TTL_MAX_MS.                                */
    /* TLS, for rediss://, rediss-sentinel:// and rediss-cluster:// servers (unused by the others).
     * The client copies the strings (they need not outlive hilock_client_new) and loads the
     * files when it is made: a file that cannot be read, a key that does not match its
     * certificate or an encrypted key is HILOCK_EINVAL there, hilock_last_config_error()
     * naming the option and the file. NULL = not set.                                       */
    const char *tls_ca_file;      /* PEM bundle of the CAs to trust. With tls_ca_path also
                                     NULL: the system's default trust store.                  */
    const char *tls_ca_path;      /* directory of hashed CA certificates (openssl rehash).    */
    const char *tls_cert_file;    /* client certificate (PEM, may hold its chain), for servers
                                     with tls-auth-clients yes; needs tls_key_file.           */
    const char *tls_key_file;     /* its private key (PEM, not encrypted); needs tls_cert_file. */
    const char *tls_server_name;  /* the name sent as SNI and that the certificate must carry;
                                     NULL = the host of each server's URL.                    */
    int     tls_verify;           /* 1 = verify the certificate chain and the host name (the
                                     default); 0 = encrypt without verifying: UNSAFE, anyone
                                     on the path can pose as the server. 0 or 1.              */
    int     fair;                 /* 1 = hilock_acquire serves waiters first come, first served
                                     (docs/fairness.md): a waiter joins a queue in the key's
                                     hash slot ({key}:fq, {key}:fb) and only the head of the
                                     queue may take the free key; a release calls the head; a
                                     try-lock (wait_ms 0) with waiters queued says BUSY. A
                                     waiter that dies, freezes or gives up leaves the queue
                                     within 2 x io_timeout_ms + 4 x poll_ms of its last
                                     attempt (the waiters behind the head pause through a
                                     watch's lease; + 1.5 x retry_delay_ms instead of 4 x
                                     poll_ms with wake = 0). Clients with fair = 0 on the same key never
                                     overlap with fair ones but may pass the queue. One server
                                     URL only (direct or Sentinel; Redlock: EINVAL), not with
                                     bridge (EINVAL); hilock_legacy_acquire refuses a fair
                                     client (EINVAL). Needs Redis >= 3.2 (its script writes
                                     after reading the server's clock): on 2.8 the acquire is
                                     HILOCK_EINVAL, nothing sent, errmsg "fair locks need Redis
                                     >= 3.2: HOST:PORT runs Redis 2.8.24". Default 0.          */
    int     fencing;              /* 1 = hilock_acquire mints a fencing token with every grant
                                     (hilock_fence; one script: a counter in {key}:fence, the
                                     server clock, a second write). 0 = the fast path: a plain
                                     `SET key token NX PX ttl`, no {key}:fence key, and
                                     hilock_fence() returns 0; everything else (wake-up,
                                     validity, release/extend/check, Redlock, Sentinel failover
                                     awareness, keepalive) is unchanged, and both kinds of
                                     client exclude each other on one key. 0 with bridge = 1 is
                                     HILOCK_EINVAL (a bridge lock writes a legacy stamp, never a
                                     plain SET), and so is 0 with fair = 1 (a fair grant is the
                                     queue's script); hilock_legacy_acquire ignores it (the recipe's
                                     one script mints the token at no extra round trip).
                                     See docs/fencing.md. 0 or 1; default 1.                  */
    int64_t poll_ms;              /* with `wake`: the longest block between two attempts when
                                     no release signal comes (each is 0.75-1 x poll_ms, to
                                     spread waiters), for the one waiter of a key that keeps
                                     the watch (Redlock: the first busy master's watch; a
                                     writer takes a shared/exclusive key's watch from a
                                     reader; a fair lock: the queue's head). The others block
                                     through the watch's lease (3 x the watcher's poll_ms,
                                     renewed at each of its polls) + 0-1 x poll_ms, at most 4
                                     x their own poll_ms. It bounds how late a key freed
                                     without a signal (an operator's DEL, another library's
                                     release, a signal lost with a dead waiter) is seen: by the
                                     watcher, within poll_ms; within ~4 x poll_ms after the
                                     watcher left. An idle waiter costs the server ~2 calls per
                                     0.875 x poll_ms (the watcher), per ~3 x poll_ms (the rest).
                                     A holder's expiry is never waited past. Before Redis 6.0
                                     a block is whole seconds.
                                     Range 1..600000; default 1000.                           */
} hilock_options;

/* Fill *o with the defaults listed above. Never fails; NULL is ignored.
 * Write it hilock_options_init(&o): a macro for hilock_options_init_sized(&o, sizeof(hilock_options)). */
HILOCK_API void hilock_options_init(hilock_options *o);

/* Fill the first `size` bytes at o: the defaults of every field that lies wholly inside
 * them (a field cut by `size` gets the default's leading bytes, which nothing reads), and
 * zero for any bytes past the fields this library knows (the fields of a newer header: zero
 * is what hilock_client_new_sized() accepts for them). Never fails; NULL is ignored. */
HILOCK_API void hilock_options_init_sized(hilock_options *o, size_t size);

#define hilock_options_init(o) hilock_options_init_sized((o), sizeof(hilock_options))

/* ---- Client ---------------------------------------------------------------------------- */

/* Make a client from options. Validates every option and URL; connects lazily, on the first
 * call that needs a server (so a server that is down now is not an error here).
 * On success *out owns a new client (free with hilock_client_free); on failure *out = NULL.
 * Returns OK, EINVAL (a bad option or URL; as there is no client to carry the detail, it is
 * in hilock_last_config_error(), which never echoes a password), ENOMEM. */
HILOCK_API hilock_status hilock_client_new(const hilock_options *o, hilock_client **out);

/* hilock_client_new() reading only the first `size` bytes at o (hilock_client_new(o, out) is
 * a macro passing sizeof(hilock_options)). A field that does not lie wholly inside `size`
 * (a program built against an older header) gets its default. Bytes past the fields this
 * library knows (a program built against a newer header) must be zero, as
 * hilock_options_init_sized() leaves them: a nonzero one is an option this library cannot
 * honour, and the call fails with EINVAL ("options from a newer hilock: ..."), never
 * ignoring it. Returns what hilock_client_new returns. */
HILOCK_API hilock_status hilock_client_new_sized(const hilock_options *o, size_t size,
                                                 hilock_client **out);

#define hilock_client_new(o, out) hilock_client_new_sized((o), sizeof(hilock_options), (out))

/* hilock_client_new() with the default options and one server URL. */
HILOCK_API hilock_status hilock_client_open(const char *url, hilock_client **out);

/* Why the last hilock_client_new()/hilock_client_open() on this thread failed with EINVAL
 * or ENOMEM (thread-local, static text owned by the library; "" if none). A server is named
 * by its place and the URL as given, each password as "***" -- the user info's from its ':'
 * to the URL's last '@', so an unencoded '/', '?', '#' or '@' in it is hidden too, and each
 * sentinel_password value: "server 2 of 3
 * (redis://:***@h:0): bad port (want 1..65535)"; a server without its scheme gets the URL it
 * likely meant: "server 1 of 1 (localhost:6379): unknown scheme: did you mean
 * redis://localhost:6379?" (a socket path: unix:///path). */
HILOCK_API const char *hilock_last_config_error(void);

/* Detail of the last failure on this client or on a lock made from it: which server and
 * why ("127.0.0.1:6379: connect: Connection refused"). With several masters, a summary and
 * then each master that failed (or, for BUSY, holds it) and why, separated by "; ":
 * "no quorum (granted on 2 of 5 masters, 3 needed): 127.0.0.1:7001: connect: Connection
 * refused; 127.0.0.1:7002: read: timed out; ...". Owned by the client, valid until the
 * next call on it. "" after a success; never NULL (NULL client -> "no client"). On a thread
 * whose last call on c was refused by the thread rule (see the top): "client used from two
 * threads at once" (static text), until that thread's next call on c.
 * Forms a program may show as they are (KEY: a key longer than 64 bytes is shown as its
 * first 64 and "...(N bytes)"):
 *   BUSY, one master:   "KEY: held by another owner, expires in 1.2 s" (850 ms, 12.5 min, 2.0 h, 3.1 d;
 *                       several masters: each one's line says the same, "127.0.0.1:7001: held by
 *                       another owner, expires in 4.2 s");
 *                       a holder without a TTL (a legacy stamp, a stray value), which no wait
 *                       outlasts: "KEY: held by another owner; KEY has no TTL: it will never
 *                       expire by itself (see hilock inspect KEY)"
 *   EAUTH, no password: "127.0.0.1:6379: NOAUTH: the server needs a password:
 *                       redis://:PASSWORD@127.0.0.1:6379" (unix://:PASSWORD@/path for a socket)
 *   EREPLY, wrong type: "127.0.0.1:6379: WRONGTYPE: KEY holds a hash, not a lock" (or "...: its
 *                       fence counter {KEY}:fence holds a list, not a number"), prefixed by
 *                       "release: ", "extend: ", "check: " on those calls. */
HILOCK_API const char *hilock_client_errmsg(const hilock_client *c);

/* Drop the caller's reference. Connections close when the client and every lock made from
 * it are freed (locks keep their client alive, so freeing in either order is safe).
 * Does no network I/O. NULL-safe. */
HILOCK_API void hilock_client_free(hilock_client *c);

/* Cancel the blocking call in progress on c: the way a daemon stops a thread that waits in
 * hilock_acquire(..., HILOCK_WAIT_FOREVER, ...) when it is told to shut down.
 *   - Safe from any thread and from a signal handler (async-signal-safe: an atomic counter and
 *     one write(2) to a pipe the client made; errno is kept). NULL-safe. Not after, nor while,
 *     c is freed.
 *   - The call in progress on c -- waiting between attempts, or in a round trip that a stalled
 *     server does not answer -- returns HILOCK_ECANCELED within about 50 ms (a round trip
 *     being written or read is cut short; its connection is closed). hilock_client_errmsg
 *     says "cancelled". A call that had its answer already returns it.
 *   - A cancel made while no call is in progress is kept for the next acquire (any kind):
 *     it returns ECANCELED at once, having sent nothing. So a shutdown handler that sets its
 *     flag and cancels just before the thread starts to wait is not lost. release, extend,
 *     check and inspect answer only a cancel made while they run.
 *   - A call that answers a cancel consumes every cancel made before it: the client works
 *     for the next call as before.
 *   - Nothing is left held: an acquire cancelled after its command was written (its fate
 *     unknown) has its value deleted, by token, first thing on the next round trip to that
 *     server (as after ETIMEDOUT); a grant that did land is given back before it returns.
 *     A lock already held is not touched: release it, or let its ttl end.
 *   - A keepalive (hilock_keepalive) runs on a client of its own: a cancel of c does not
 *     stop it.
 *   - The pipe (two close-on-exec descriptors) is made by the client's first round trip or
 *     wait, and closed by hilock_client_free.
 *   - A client attached to an event loop (hilock_async.h): every call in flight on it ends
 *     HILOCK_ECANCELED (its done runs with it, from the loop) except a keepalive's renewals;
 *     with no call in flight a cancel does nothing. The client watches a pipe of its own
 *     through the loop's watch callback for this, from hilock_loop_attach on. */
HILOCK_API void hilock_cancel(hilock_client *c);

/* ---- Lock ------------------------------------------------------------------------------ */

/* Behind Sentinel (redis-sentinel:// URLs; details and guarantees in docs/sentinel.md):
 *   - Every new connection asks the Sentinels, in order (each ~300 ms at most, all within
 *     connect_timeout_ms), for the master, and checks ROLE on it; the Sentinel that answered
 *     is asked first next time. A READONLY reply, EOF or a timeout closes the connection and
 *     the next call resolves again. The URL's user and password are for the data nodes; the
 *     Sentinels AUTH with the URL's sentinel_username/sentinel_password, and without AUTH
 *     when it has none. Unknown master name: EINVAL; no Sentinel: EIO; a Sentinel that
 *     refuses us (NOAUTH: it wants a password; WRONGPASS) and none that answers: EAUTH,
 *     errmsg naming each Sentinel and its reply.
 *   - Each lock records the replication history of the master that granted it. release,
 *     extend and check first ask a Sentinel whether the master moved (within the call's
 *     bound; unanswered, the connection in hand is used), and return LOST when the
 *     master that answers cannot prove the lock survived (it was promoted from a replica that
 *     had our write: its master_replid2 is our replid and our offset < its
 *     second_repl_offset). release still deletes our value where it finds it.
 *   - failover_guard (on by default): a master promoted in a failover grants nothing until
 *     the longest ttl granted under its predecessor has passed (BUSY, errmsg "failover guard").
 *   - min_replicas: WAIT after acquire and extend, pipelined (see hilock_options).
 *   - The master's identity is read in the call's own round trip; where that cannot settle
 *     the call (a new history, a guard that may run, a longer ttl), one more round trip runs
 *     a script (the failover check). It keeps to the call's bound; if it gets no answer in
 *     time the call is ETIMEDOUT or EIO like any unanswered round trip (an acquire's grant
 *     is undone on the next contact and, while wait_ms allows, tried again), never EREPLY
 *     or LOST.
 * These also apply to redis:// and unix:// URLs with failover_guard = 1. */

/* Acquire `key` for ttl_ms milliseconds.
 *   wait_ms: 0 = try once; HILOCK_WAIT_FOREVER (-1) = until acquired (or an error);
 *            > 0 = give up after that long. The call never takes longer than
 *            wait_ms + connect_timeout_ms + 3 x io_timeout_ms (+ replicas_timeout_ms with
 *            min_replicas; the last attempt may need a connect, the handshake, its command
 *            and a resend after NOSCRIPT): every round trip it makes ends by then -- the lock's own, a
 *            reconnect (Sentinel: asking the Sentinels), the failover check, the undo of a
 *            grant it does not keep, a Sentinel's "did the master move?", Redlock's fencing
 *            and undos. One that runs out of that time is ETIMEDOUT (or EIO).
 *   While waiting, the holder's release wakes one waiter at once (options.wake); otherwise
 *   the waiter tries again every ~retry_delay_ms, and as soon as the holder's ttl runs out
 *   (a crashed holder costs its ttl, not more). Within a finite wait_ms a server that does
 *   not answer (EIO, ETIMEDOUT) is tried again after pauses doubling from retry_delay_ms to
 *   poll_ms. Not FIFO: a woken waiter still has to win
 *   the key, and a newcomer may get it first; the woken one then waits for the next release.
 *   With options.fair: first come, first served (a queue; the release calls its head; BUSY
 *   for a try-lock while waiters are queued; docs/fairness.md).
 *   With several masters, a signal from any one master wakes the waiter.
 * The lock is a token (32 hex digits: 20 fresh from the kernel's random bytes, then the
 * client's 12-digit tag, drawn once per client) written with SET NX PX, and a fencing
 * token minted in the same script, which also keeps the client's holder record (this host,
 * pid and program, written when another client's grant wrote it last: informative only,
 * for hilock_inspect; fencing = 1, fair = 0, bridge = 0 only; docs/fencing.md). Validity is measured from
 * before the command was sent; an acquisition whose validity is <= 0 is undone.
 * On OK, *out owns a new lock (release with hilock_release, free with hilock_free);
 * otherwise *out = NULL.
 * Not re-entrant: while this client has a live lock for `key` -- from its grant until
 * hilock_release ends it (any status that leaves it released: OK, NOT_HELD, LOST) or
 * hilock_free frees it; a lock known lost (check, extend or a keepalive said so) still
 * counts until then, as the program may still be acting on it -- another acquire of `key`
 * on this client (hilock_acquire in every mode, hilock_legacy_acquire) returns
 * HILOCK_EINVAL at once, sending nothing: "this client already holds KEY (hilock locks are
 * not re-entrant)" (it would otherwise wait for itself: its own ttl, or for ever under a
 * keepalive). A release that ended in an error (EIO, ...) leaves the lock live: release
 * again, or free it. Two clients, even in one process, contend as usual; so do the calls
 * of a client attached to an event loop, which are that loop's separate tasks
 * (hilock_acquire_async waits for the release of a lock the same client holds).
 * Returns OK; BUSY (held by someone else, or a new master's failover guard runs, when
 * wait_ms ran out or was 0);
 * EINVAL (this client already holds key: see above; NULL client/key/out, empty key or
 * longer than HILOCK_KEY_MAX, ttl_ms <= 0, ttl_ms
 * > HILOCK_TTL_MAX_MS or too short for the drift allowance, wait_ms < -1; a Sentinel master
 * name no Sentinel knows; a feature the server is too old for: fair, min_replicas,
 * failover_guard, see servers);
 * EIO, ETIMEDOUT (a write may have landed: it is undone by token on the next contact),
 * EAUTH (also "ERR invalid password", a wrong password before Redis 6.0), EREPLY (e.g. the
 * key holds a hash; an error reply after the lock's script ran -- it may have written before
 * failing -- is undone by token at once; a fence counter at or above 2^53 - 1, past which
 * Lua cannot count exactly: "fence counter {KEY}:fence holds N, at or above 2^53 - 1",
 * nothing granted, docs/fencing.md), EREPLICAS (fewer than min_replicas acknowledged:
 * the grant was deleted again; not retried while waiting), ENOQUORUM, ENOMEM,
 * ECANCELED (hilock_cancel: nothing held).
 * With several masters: BUSY when masters held by others leave too few for a quorum;
 * ENOQUORUM when too few answered to decide (down, timed out); EREPLY/EAUTH when error
 * replies alone rule out a quorum (those are not retried while waiting). */
HILOCK_API hilock_status hilock_acquire(hilock_client *c, const char *key, int64_t ttl_ms,
                                        int64_t wait_ms, hilock **out);

/* ---- Counting semaphores and shared/exclusive locks (docs/semaphore.md, docs/rwlock.md) ----
 * Both return an ordinary hilock: hilock_release, hilock_extend, hilock_check,
 * hilock_keepalive, hilock_validity_ms, hilock_fence, hilock_token, hilock_key and hilock_free
 * work on a permit or a shared/exclusive grant as on a lock (same statuses, same bounds; a
 * release, extend or check that finds the key holding another kind now says NOT_HELD, "the
 * key holds another kind now"). Not re-entrant, as hilock_acquire: a client that holds any
 * lock, permit or grant of `key` gets EINVAL "this client already holds KEY (hilock locks are
 * not re-entrant)".
 * The key is a sorted set: its holders' tokens, each scored with its expiry by the server's
 * clock (TIME), and a member naming the kind; it expires with its latest holder and goes
 * with its last. Its other keys are in its hash slot (Cluster): {key}:fence (the lock's
 * fencing counter: tokens grow across every kind of the key), {key}:holders (holder records,
 * for hilock inspect), {key}:wq (the waiters), {key}:watch (the waiter that polls for the
 * others: options.poll_ms), and the wake-up lists {key}:signal (permits), {key}:xsignal
 * (writers), {key}:ssignal (readers). A release wakes one waiter per freed
 * permit; a shared/exclusive release that leaves no holder wakes one waiting writer, else
 * every waiting reader. Keepalive, Sentinel (LOST, min_replicas, the failover guard,
 * fencing epochs) and Cluster work as for the lock.
 * Both need Redis >= 3.2 (a script that writes after reading TIME): an older server is
 * EINVAL, "semaphores and shared/exclusive locks need Redis >= 3.2: HOST runs Redis 2.8.24",
 * with nothing written. options.fencing = 0 and options.bridge do not apply (every grant
 * mints a fencing token); options.fair is refused (EINVAL, the reason in the message).
 * A key that holds another kind is refused with nothing written: EREPLY (as WRONGTYPE),
 * the message naming what it holds, e.g. "KEY holds a semaphore, not a shared/exclusive
 * lock", "KEY holds a lock, not a semaphore" (a plain lock or a legacy stamp), "KEY holds a
 * hash, not a semaphore"; hilock_acquire on a semaphore says "KEY holds a semaphore, not a
 * lock". The one exception is the plain lock and the shared/exclusive lock, which exclude
 * each other on one key (hilock_rw_acquire below). */

/* The largest limit hilock_sem_acquire takes, and the most shared holders one key of
 * hilock_rw_acquire admits at once (more is BUSY). */
#define HILOCK_SEM_LIMIT_MAX 1000

/* Take one of at most `limit` permits of `key` for ttl_ms (wait_ms as for hilock_acquire).
 * Each permit has its own token, its own expiry by the server's clock (a dead holder's
 * permit returns after its ttl) and its own fencing token, which grows with every grant of
 * the key. `limit` is this caller's: the call is granted while fewer than `limit` permits
 * are held, whatever limit their holders passed, so a caller with a lower limit than the
 * holders count waits, and one with a higher limit is granted beyond the others' limit
 * (callers that disagree: docs/semaphore.md). Waiters are not served in order: a freed
 * permit wakes one, and whoever asks first takes it.
 * Returns as hilock_acquire; BUSY says "KEY: 3 of 3 permits held (limit 3), the first
 * expires in 1.2 s"; EINVAL for limit < 1 or > HILOCK_SEM_LIMIT_MAX ("limit must be 1..1000
 * (got 0)"), masters that cannot keep the limit ("a semaphore over 3 masters cannot keep a
 * limit of 2: each master counts its own holders, so 3 holders can each hold a quorum (2
 * masters) while no master counts more than 2; over 3 masters the largest limit kept is 1":
 * refused exactly when (limit + 1) x quorum <= masters x limit, so 2 masters keep any limit,
 * 4 a limit of 2, any number a limit of 1: docs/semaphore.md), options.fair ("a semaphore
 * cannot be fair: its waiters are not served in order; take permits with fair off"), or a
 * server before 3.2; EREPLY for a key of another kind (above). */
HILOCK_API hilock_status hilock_sem_acquire(hilock_client *c, const char *key, int limit, int64_t ttl_ms,
                                            int64_t wait_ms, hilock **out);

/* The two modes of a shared/exclusive lock. */
typedef enum hilock_rw_mode {
    HILOCK_EXCLUSIVE = 0,   /* one holder, alone */
    HILOCK_SHARED = 1       /* any number of holders together, none exclusive */
} hilock_rw_mode;

/* Take `key` shared or exclusive for ttl_ms (wait_ms as for hilock_acquire). Writer-
 * preferring: while an exclusive request waits (it stays registered while it waits, and
 * leaves when it gives up; one that dies lapses within about poll_ms + io_timeout_ms, 1.5 x
 * retry_delay_ms + io_timeout_ms with wake = 0: docs/rwlock.md), no new shared
 * grant is made, so a stream of readers cannot starve a writer. At most HILOCK_SEM_LIMIT_MAX
 * shared holders at once. An exclusive grant's fencing token exceeds every earlier grant's of
 * the key. hilock_token() is the grant's member of the key: "x:" (exclusive) or "s:"
 * (shared) and 30 hex digits (18 fresh random ones, then the client's tag, as every token).
 * The plain lock is the exclusive side of the same key: hilock_acquire on a key held shared
 * or exclusive is BUSY ("KEY: held shared by 2 readers, who renew their grants (the last
 * expires in 29.7 s unless renewed)", or "KEY: held exclusive (a shared/exclusive lock's
 * writer, who renews its grant: ...)"; it waits, and a release that leaves no holder wakes
 * it), and a plain
 * lock on the key makes both modes BUSY ("KEY: held by another owner, expires in 2.0 s"); a
 * plain lock's release does not wake shared waiters (they poll). A waiting plain-lock writer
 * also stops new shared grants, until its grant or its giving up (one master: either cuts its
 * mark to one retry pause) or until its wait mark lapses (Redlock, options.fencing = 0: about
 * poll_ms + io_timeout_ms). The plain lock
 * here is hilock_acquire's default kind and its fencing = 0 form; a fair, bridge or legacy
 * client on a key held shared or exclusive is EREPLY ("KEY holds a shared/exclusive lock, not
 * a lock"): a fair queue would not hold new readers off. A plain lock whose key expired and
 * was taken shared or exclusive (or as a semaphore) is NOT_HELD on release, extend and check
 * ("now held by another owner"). A writer that gives up its wait wakes the readers it held
 * off.
 * Redlock (several masters) is allowed: two quorums share a master, which cannot grant an
 * exclusive holder beside any other.
 * Returns as hilock_acquire; BUSY says who holds it: "KEY: held exclusive, expires in 1.2 s",
 * "KEY: held shared by 4, the first expires in 1.2 s", "KEY: held shared by 4 (a writer
 * waits)"; EINVAL for a mode other than the two ("mode must be HILOCK_EXCLUSIVE or
 * HILOCK_SHARED (got 2)"), options.fair ("a shared/exclusive lock cannot be fair: it serves a
 * waiting writer before new readers instead; take grants with fair off"), or a server before
 * 3.2; EREPLY for a key of
 * another kind (above). */
HILOCK_API hilock_status hilock_rw_acquire(hilock_client *c, const char *key, hilock_rw_mode mode,
                                           int64_t ttl_ms, int64_t wait_ms, hilock **out);

/* Delete the lock if, and only if, it still holds our token (atomic compare in Lua).
 * A network operation; it does not free *l. Safe to call twice (the second says NOT_HELD).
 * From the first call on, validity is 0. Redlock: deletes our value on every master it can
 * reach; OK if a quorum still held it, NOT_HELD if fewer did, ENOQUORUM if too few
 * answered. After an error, call it again later (masters back): what earlier calls did
 * counts, so a release whose reply was lost is not reported as NOT_HELD.
 * Returns OK; NOT_HELD (expired, or now held by someone else: see errmsg); LOST (a failover
 * since the grant that the new master cannot prove the lock survived; our value was deleted
 * if it was there); EINVAL (NULL); EIO, ETIMEDOUT, EAUTH, EREPLY, ENOQUORUM. */
HILOCK_API hilock_status hilock_release(hilock *l);

/* Set the lock's expiry to ttl_ms from now, if it still holds our token. On OK the validity
 * is recomputed (measured from before the command was sent). It renews the same grant: the
 * fencing token (hilock_fence) stays the one the acquire minted, across every extend and
 * keepalive renewal, and so does hilock_token (but for a legacy or bridge lock, whose stamp
 * is rewritten). Redlock: OK needs our value
 * on a quorum; on NOT_HELD the lock is lost (validity 0) and what is left of it on a
 * minority is deleted.
 * Returns OK; NOT_HELD; LOST (validity 0: stop the work; hilock_release deletes what may be
 * left); EINVAL (NULL, ttl out of range, or a released lock);
 * EIO, ETIMEDOUT, EAUTH, EREPLY, EREPLICAS (min_replicas: the new ttl was not acknowledged),
 * ENOQUORUM. On an error the validity is the smaller of the old one and ttl_ms (the new ttl
 * may have landed on some masters).
 * Bound (also of release and check): connect_timeout_ms + 3 x io_timeout_ms (a connect, the
 * handshake, the call's command and its resend after NOSCRIPT; + replicas_timeout_ms for an
 * extend with min_replicas); Redlock: twice the per-master timeout (see servers). Every
 * round trip of the call keeps to it (a Sentinel's "did the master move?", the failover
 * check); one that gets no answer in time is ETIMEDOUT or EIO, not LOST. */
HILOCK_API hilock_status hilock_extend(hilock *l, int64_t ttl_ms);

/* Ask the server(s) whether our token is still there (Redlock: on a quorum), and recompute
 * the validity from what they say is left: on OK, the remaining ttl that a quorum still
 * has (measured from before the question, minus the drift allowance); on NOT_HELD, 0; on
 * an error, unchanged.
 * Returns OK, NOT_HELD, LOST, EINVAL (NULL), EIO, ETIMEDOUT, EAUTH, EREPLY, ENOQUORUM. */
HILOCK_API hilock_status hilock_check(hilock *l);

/* Milliseconds the lock is still safely ours by the monotonic clock, minus the drift
 * allowance; 0 once that has passed, after a release, or for NULL. No network I/O. */
HILOCK_API int64_t hilock_validity_ms(const hilock *l);

/* The fencing token: a number that grows with every grant of this key, whatever topology
 * or quorum answered, so a resource that remembers the highest token it has seen can refuse
 * a stale holder. It is at least the server's clock in milliseconds since 1970, so it keeps
 * growing even after the counter key (kept ttl + 1 hour past each grant, plus its lead
 * while it runs ahead of the clock; see Redlock below) has expired. That clock is the server's TIME as each connection read it when it was made,
 * plus this host's monotonic time since counted 0.1% slow (never ahead of the server's for
 * a host clock off by less than that), and read again by a new connection once a day: no
 * script calls TIME, which servers before Redis 5.0 refuse before a write. 0 for NULL.
 * Sentinel and Cluster URLs: bits 63..42 hold the config-epoch of the master that granted it
 * (Sentinel: the Sentinels' config-epoch, read with its address; Cluster: the slot's; it
 * rises with every failover), bits 41..0 the counter above (the clock floor fits in 42 bits
 * until the year 2109). A master promoted in a failover may have lost the counter with the
 * writes it never received; the higher epoch still makes its tokens exceed every token of
 * its predecessor. Tokens of one epoch are ordered by that master's counter. Other URLs: the
 * epoch bits are 0.
 * Redlock (any mix of those URLs): each granted master mints counter + 1 (at least its
 * clock) and makes its token of it with its own epoch: max(counter, epoch << 42 | the
 * counter's low 42 bits), a direct master's epoch being 0. The lock's token is the largest,
 * and before acquire returns every granted master whose counter is below that whole token,
 * epoch bits included, is raised to it. A quorum therefore holds a counter >= the token, and
 * any later quorum shares a master with it and mints a larger one, whether or not it
 * includes the masters that carry an epoch. (The counters of a Redlock with such a master
 * so hold whole tokens, above 2^42; there an epoch above 2047 counts as 2047, which keeps
 * every counter below 2^53, the range the servers' Lua numbers hold exactly.)
 * Such a counter (>= 2^42) is kept ttl + 35 days past each grant or raise, never shortened
 * by a later one (a plain counter: ttl + 1 hour), because it is the only floor above the
 * clock for a quorum without the epoch member; it costs each master one small key per lock
 * key for those 35 days.
 * Limits: a master restarted without persistence forgets its counter, and a counter expires
 * as above. A quorum that meets the last one only on such a master relies on the clock floor
 * and the epochs alone: the clock floor holds while the masters' clocks agree and never step
 * back, but it is below every token with an epoch: after one, such a quorum is sure to mint above it
 * only through a master whose epoch is higher. So with an epoch member, a lock key left
 * without a grant for more than ttl + 35 days and then granted by a quorum without that
 * member (or whose counters were forgotten) may get a token below its last one.
 * The resource itself must compare tokens. */
HILOCK_API uint64_t hilock_fence(const hilock *l);

/* The value this lock holds: the token of the attempt that was granted (32 lowercase hex
 * characters, the last 12 the client's tag: the same in every token of one client; or the
 * legacy stamp). An acquire whose attempt may have left its value behind (a write that
 * timed out, a grant given back) retries with a new token, so an undo of the old value can
 * never delete the grant; this is the final one. Owned by the lock. NULL for NULL. */
HILOCK_API const char *hilock_token(const hilock *l);

/* The key, as given to acquire. Owned by the lock. NULL for NULL. */
HILOCK_API const char *hilock_key(const hilock *l);

/* What kind of grant l is, by the call that made it (static text; NULL for NULL):
 *   "lock"       hilock_acquire (fenced or not: options.fencing)
 *   "fair"       the same with options.fair = 1 (a queue's turn)
 *   "permit"     hilock_sem_acquire: one of a semaphore's permits
 *   "shared"     hilock_rw_acquire with HILOCK_SHARED
 *   "exclusive"  hilock_rw_acquire with HILOCK_EXCLUSIVE
 *   "legacy"     hilock_legacy_acquire (the SETNX/GETSET recipe)
 *   "bridge"     hilock_acquire with options.bridge = 1 (both recipes at once)
 * The _async calls make the same kinds. The observer's events about a lock carry the same
 * word (hilock_observe.h: lock_kind). New kinds may be added: treat an unknown word as a
 * grant all the same. */
HILOCK_API const char *hilock_kind(const hilock *l);

/* Free the lock's memory (and stop its keepalive). Does no network I/O and does not release
 * the lock on the server: call hilock_release first, or the key lives until it expires.
 * NULL-safe. */
HILOCK_API void hilock_free(hilock *l);

/* Static text for a status; never NULL (unknown values -> "unknown status"). */
HILOCK_API const char *hilock_strerror(hilock_status s);

/* The version of the library actually loaded, "MAJOR.MINOR.PATCH" (static text, never NULL):
 * equal to HILOCK_VERSION when the program runs against the library it was built with; a
 * shared library of the same MAJOR with a larger MINOR may stand in for an older one. */
HILOCK_API const char *hilock_version(void);

/* ---- Keepalive ------------------------------------------------------------------------- */

/* Called once, on the keepalive thread, when the keepalive gives up: why = NOT_HELD (our
 * value is gone: expired, deleted, taken), LOST (a failover), or the error that kept renewing
 * until the lock's validity ran out (EIO, ETIMEDOUT, ENOQUORUM, EREPLICAS), or another error
 * at once (EAUTH, EREPLY, ...). Renewal stops after it; the detail is in
 * hilock_keepalive_errmsg(l). Treat the lock as lost: stop the work it protects.
 * From the callback you may call hilock_validity_ms, hilock_keepalive_errmsg, hilock_key,
 * hilock_token and hilock_fence on l, and nothing that uses the client (the owner's thread
 * may be using it). It must not call hilock_release or hilock_free on l (the program aborts
 * with a message). hilock_release and hilock_free wait for a running callback, so keep it
 * short and don't make it wait for a lock the owner holds while releasing. It is not called
 * once the owner has begun hilock_release or hilock_free. */
typedef void (*hilock_lost_fn)(hilock *l, hilock_status why, void *arg);

/* Renew the lock in the background until hilock_release or hilock_free: a thread with its
 * own connection (a private client made from the same options; the owner's client is never
 * touched by it) calls the equivalent of hilock_extend(l, ttl) whenever a third of the ttl has
 * passed since the last grant (ttl = the lock's current ttl_ms). Each renewal updates what
 * hilock_validity_ms reports; hilock_fence stays the same (a renewal is not a new grant).
 *   - A renewal that fails for a passing reason (EIO, ETIMEDOUT, ENOQUORUM, EREPLICAS: a
 *     dropped connection, a restarting master) is tried again after about retry_delay_ms,
 *     for as long as the lock is still valid (more than lost_margin_ms of it, with
 *     hilock_keepalive_ex); then on_lost runs with that status. NOT_HELD,
 *     LOST and any other error call on_lost at once. A lost key is never re-created.
 *   - hilock_release and hilock_free stop the keepalive before they return, also when the
 *     release fails (they signal the thread and join it), so no renewal is in flight after
 *     them and none will be sent; a renewal already on the wire is waited for (at most
 *     the bound of hilock_extend: connect_timeout_ms + 3 x io_timeout_ms).
 *   - While it runs, the owner's thread may still call hilock_extend (a new ttl is then used
 *     by later renewals) and hilock_check: they take turns with the renewals (each may wait
 *     for one in flight).
 *   - Sentinel: a renewal that lands on the old master during a failover is not on the new
 *     one, so the next renewal cannot prove the lock and on_lost says LOST (as
 *     hilock_extend would).
 *   - One thread and one connection per keepalive: meant for a few long-held locks.
 *   - For locks from hilock_acquire (fair and fencing = 0 too), permits from
 *     hilock_sem_acquire and grants from hilock_rw_acquire; not for legacy or bridge locks
 *     (hilock_legacy_acquire, options.bridge: EINVAL; the command renews those itself).
 * on_lost may be NULL (then watch hilock_validity_ms, which drops to 0 on NOT_HELD).
 * Returns OK; EINVAL (NULL, a released lock, a legacy lock, or a keepalive already running;
 * one that ended, by on_lost or a cap, is replaced); ENOMEM; EIO (no thread could be
 * started). Errors are described in hilock_client_errmsg(the lock's client). */
HILOCK_API hilock_status hilock_keepalive(hilock *l, hilock_lost_fn on_lost, void *arg);

/* Optional caps for hilock_keepalive_ex, so a stuck worker cannot hold a lock forever.
 * It grows as hilock_options does (appended fields; hilock_keepalive_options_init() and
 * hilock_keepalive_ex() are macros passing sizeof(hilock_keepalive_options) to the _sized
 * functions; the plain symbols stay, frozen at the size of 0.1.0).
 * When a cap is reached the keepalive stops quietly (on_lost is not called): the lock then
 * expires by itself, ttl after its last renewal, unless the owner releases or extends it. */
typedef struct hilock_keepalive_options {
    long    max_renewals;   /* renew at most this many times; 0 = no limit. Default 0.        */
    int64_t max_hold_ms;    /* do not keep the lock past this long after the keepalive starts:
                               the last renewal is shortened to end then (a longer ttl from
                               acquire or extend is not cut). 0 = no limit. Default 0.         */
    int64_t lost_margin_ms; /* (0.4.0) report the loss this long before the validity ends: a
                               failing renewal is retried only while more than this is left,
                               then on_lost runs, so the owner still has lost_margin_ms to stop
                               its work before another client can take the key. 0 = retry
                               until the validity is used up. 0..HILOCK_TTL_MAX_MS; a margin
                               as long as the validity reports the first failure. Default 0. */
} hilock_keepalive_options;

/* Fill *o with the defaults (no caps). NULL is ignored. */
HILOCK_API void hilock_keepalive_options_init(hilock_keepalive_options *o);

/* The same for the first `size` bytes at o, as hilock_options_init_sized() does. */
HILOCK_API void hilock_keepalive_options_init_sized(hilock_keepalive_options *o, size_t size);

#define hilock_keepalive_options_init(o) \
    hilock_keepalive_options_init_sized((o), sizeof(hilock_keepalive_options))

/* hilock_keepalive with caps. o NULL = the defaults. Returns what hilock_keepalive returns;
 * EINVAL also for max_renewals < 0, or max_hold_ms or lost_margin_ms outside
 * 0..HILOCK_TTL_MAX_MS. */
HILOCK_API hilock_status hilock_keepalive_ex(hilock *l, hilock_lost_fn on_lost, void *arg,
                                             const hilock_keepalive_options *o);

/* hilock_keepalive_ex reading only the first `size` bytes at o, as hilock_client_new_sized()
 * reads options: missing fields get their defaults; nonzero bytes past the fields this
 * library knows -> EINVAL ("options from a newer hilock: ..."). */
HILOCK_API hilock_status hilock_keepalive_ex_sized(hilock *l, hilock_lost_fn on_lost, void *arg,
                                                   const hilock_keepalive_options *o, size_t size);

#define hilock_keepalive_ex(l, on_lost, arg, o) \
    hilock_keepalive_ex_sized((l), (on_lost), (arg), (o), sizeof(hilock_keepalive_options))

/* Why the lock's keepalive stopped: the error detail behind on_lost's status (which server
 * and why), or which cap was reached. "" while it runs, when there is none, and for NULL.
 * Owned by the lock; valid until hilock_release, hilock_free or the next hilock_keepalive. */
HILOCK_API const char *hilock_keepalive_errmsg(const hilock *l);

/* ---- guarded commands: fencing that Redis itself checks (0.5.0; docs/fencing.md) ----
 * A command that runs only while the lock holds: one script on the lock's master compares the
 * lock's value with ours (the key's value for hilock_acquire's locks, fair or not; our member
 * in the key's sorted set, unexpired by the server's clock, for a permit or a shared/exclusive
 * grant) and, if it is ours, runs the command, atomically: nothing can come between the
 * compare and the command. A holder whose lock expired, was released, deleted or taken over
 * cannot write through it, however late its call arrives.
 *
 * The reply: a read-only tree, owned by the caller, freed with hilock_reply_free. */
typedef enum hilock_reply_type {
    HILOCK_REPLY_STRING = 1,   /* a bulk string: str, len (may hold NUL bytes)        */
    HILOCK_REPLY_ARRAY = 2,    /* elements, element[0..elements)                     */
    HILOCK_REPLY_INTEGER = 3,  /* integer                                            */
    HILOCK_REPLY_NIL = 4,      /* no value (a nil bulk string or array)              */
    HILOCK_REPLY_STATUS = 5,   /* a status line ("OK"): str, len                     */
    HILOCK_REPLY_ERROR = 6     /* an error line ("WRONGTYPE ..."): str, len          */
} hilock_reply_type;

typedef struct hilock_reply {
    hilock_reply_type    type;
    long long            integer;    /* HILOCK_REPLY_INTEGER; else 0 */
    const char          *str;        /* STRING, STATUS, ERROR: NUL-terminated; else NULL */
    size_t               len;        /* bytes at str (without the NUL) */
    size_t               elements;   /* ARRAY: how many; else 0 */
    struct hilock_reply *const *element;   /* ARRAY: the elements; else NULL */
} hilock_reply;

/* Free a reply and everything in it. NULL-safe. */
HILOCK_API void hilock_reply_free(hilock_reply *r);

/* Run argv[0..argc) (a command and its arguments, e.g. {"SET", "job:7", "done"}; argvlen[i]
 * its lengths, binary-safe, or argvlen NULL: each argv[i] is a C string) on the lock's master,
 * only if the lock is ours there at that instant (see above). *reply is set on every return:
 *   HILOCK_OK        the command ran; *reply is its reply.
 *   HILOCK_EREPLY    the server refused the command (WRONGTYPE, an unknown command, a wrong
 *                    number of arguments, OOM...): *reply is its error reply (type ERROR),
 *                    and hilock_client_errmsg says the same; or its reply was past the client's
 *                    reply limits (a string over 64 KiB, an array over 8,192 elements, over
 *                    1 MiB in all): the command ran, *reply is an error "reply too large: ...",
 *                    and the connection stays (the script measured the reply, never sent it).
 *                    Also an answer that is not the script's (*reply NULL).
 *   HILOCK_NOT_HELD  the lock is not ours on the server (expired, released, deleted, taken
 *                    over; a permit removed from its set), or was released by this program:
 *                    nothing ran; *reply NULL. The lock's validity drops to 0.
 *   HILOCK_LOST      (Sentinel, Cluster, failover_guard) no proof the lock survived a
 *                    failover: *reply NULL, and the call is counted as if nothing ran -- but
 *                    if the script found our value on a master whose history the client cannot
 *                    tie to the grant (a restart that restored it from disk), the command did
 *                    run there; errmsg says which.
 *   HILOCK_EREPLICAS (min_replicas > 0) the command ran (*reply is its reply) but fewer than
 *                    min_replicas replicas acknowledged it within replicas_timeout_ms (WAIT,
 *                    as for the lock): a failover may lose it, as it may lose the lock.
 *   HILOCK_EINVAL    nothing was sent: NULL l, argv, an argv[i] or reply; argc < 1 or more
 *                    than HILOCK_GUARDED_MAX_ARGS; a lock over several masters (Redlock: one
 *                    script cannot run atomically on N masters); a legacy or bridge lock
 *                    (hilock_legacy_acquire, options.bridge: its value is a timestamp that
 *                    another client may write byte for byte, so finding it proves nothing);
 *                    a command a script may not run or that would block (the server's
 *                    COMMAND INFO flags noscript or blocking, and always SUBSCRIBE and its
 *                    kin, MONITOR, MULTI, EXEC, DISCARD, WATCH, UNWATCH, BLPOP, BRPOP,
 *                    BRPOPLPUSH, BLMOVE, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP, XREAD,
 *                    XREADGROUP, WAIT, WAITAOF, EVAL and its kin, FCALL, SCRIPT, FUNCTION,
 *                    SYNC, PSYNC, QUIT, RESET, HELLO, AUTH: also on servers without those
 *                    flags); on a Cluster, a key of the command outside the lock key's hash
 *                    slot (give it the lock key's {tag}), or a Cluster server that will not
 *                    say which arguments are keys.
 *                    A client attached to an event loop: use hilock_guarded_command_async.
 *   HILOCK_EIO, HILOCK_ETIMEDOUT, HILOCK_EAUTH, HILOCK_ECANCELED: as for hilock_check; *reply
 *                    NULL. After a timeout or a broken connection the command may or may
 *                    not have run (errmsg says so): as for any write whose answer is lost.
 * Keys: the command's keys are found from the server's own key specs (COMMAND INFO: first,
 * last, step; asked once per command name and client, kept with the client; COMMAND GETKEYS
 * for each call of a command whose keys move, e.g. ZUNIONSTORE, SORT, MIGRATE) and given to
 * the script as its KEYS after the lock's key, so Cluster routing and ACL key rules see
 * them. A server without COMMAND (Redis before 2.8.13), or an ACL user it refuses: on one
 * server the command's keys are then not declared (no Cluster or ACL to need them there:
 * the command runs the same); on a Cluster the call is refused (EINVAL).
 * What it promises: the command runs only if, at that instant, the lock's value on its master
 * is ours. Under asynchronous replication a guarded write acknowledged just before a failover
 * can be lost together with the lock; min_replicas WAITs for it as for the lock. Keys are
 * not locked beyond that instant: other clients writing them without a guard still can.
 * Costs one round trip (EVALSHA; a second for a command the client has not asked COMMAND
 * INFO about yet, or whose keys move). Needs scripting: Redis 2.6+ (every supported server).
 * Thread rule and bounds as hilock_check (connect_timeout_ms + 3 x io_timeout_ms, plus
 * replicas_timeout_ms with min_replicas); with a keepalive running, it takes turns with the
 * renewals. */
#define HILOCK_GUARDED_MAX_ARGS 4096
HILOCK_API hilock_status hilock_guarded_command(hilock *l, int argc, const char **argv,
                                                const size_t *argvlen, hilock_reply **reply);

#ifdef __cplusplus
}
#endif
#endif /* HILOCK_H */
