/*
 * hilock.h -- locks on Redis: one master, a master behind Sentinel, or N masters (Redlock).
 *
 * The header is the manual. Every function says what it does, who owns what, and which
 * statuses it can return. Nothing outside include/ is API.
 *
 * Thread rule: a client and the locks made from it are used by one thread at a time;
 * clients share nothing, so use one client per thread. (A keepalive runs on its own
 * thread with its own connection; see hilock_keepalive.)
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

#define HILOCK_VERSION "0.1.0"

/* Every call returns one of these. HILOCK_OK is 0; BUSY, NOT_HELD and LOST are results,
 * the rest are errors whose detail (which server, why) is in hilock_client_errmsg(). */
typedef enum hilock_status {
    HILOCK_OK = 0,
    HILOCK_BUSY,        /* someone else holds it: try-lock failed, or wait_ms passed            */
    HILOCK_NOT_HELD,    /* release/extend/check: our value is gone (expired, released, taken)   */
    HILOCK_LOST,        /* a failover since acquisition: ownership can't be trusted             */
    HILOCK_EINVAL,      /* bad argument or option                                               */
    HILOCK_EIO,         /* can't connect, connection broke                                      */
    HILOCK_ETIMEDOUT,   /* a round trip took longer than io_timeout_ms                          */
    HILOCK_EAUTH,       /* AUTH / ACL refused                                                   */
    HILOCK_EREPLY,      /* server error or unexpected reply (WRONGTYPE, OOM, script error, ...) */
    HILOCK_EREPLICAS,   /* fewer replicas acknowledged than min_replicas; the lock was undone   */
    HILOCK_ENOQUORUM,   /* Redlock: too few masters answered to decide                          */
    HILOCK_ENOMEM
} hilock_status;

/* wait_ms value for hilock_acquire: wait as long as it takes. */
#define HILOCK_WAIT_FOREVER ((int64_t)-1)

/* The longest ttl accepted: 365 days. Longer is treated as a mistake (HILOCK_EINVAL). */
#define HILOCK_TTL_MAX_MS ((int64_t)365 * 24 * 3600 * 1000)

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

typedef struct hilock_codec {
    hilock_unit   unit;
    int           decimals;          /* 0: integer; 1..6: fixed decimals ("%.Nf")            */
    int           plus_one;          /* stamp = now + timeout + 1 unit (the documented "+1")  */
    int           expired_if_equal;  /* a stamp equal to now is expired ("<=" rather than "<") */
    hilock_suffix suffix;            /* what follows the number                               */
} hilock_codec;

/* ---- Options --------------------------------------------------------------------------
 *
 * Always start from hilock_options_init(); fields may be added in later versions and the
 * init function gives each one its default. hilock_client_new() copies what it keeps, so
 * the struct and its strings may be freed or reused after the call. */
typedef struct hilock_options {
    /* Server URLs. One URL = one master (direct, or through Sentinel); two or more = Redlock
     * over independent masters (quorum N/2+1). Forms:
     *   redis://[[user]:password@]host[:port][/db]            (host may be [::1]; port 6379)
     *   unix:///path/to/redis.sock[?db=N]
     *   redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]#master-name
     * Percent-escapes (%40 for '@') are decoded in user and password. No default: at least
     * one server must be given. */
    const char *const *servers;
    size_t       nservers;

    int64_t connect_timeout_ms;   /* bound on one connect (and handshake). Default 1000.       */
    int64_t io_timeout_ms;        /* bound on one round trip. Default 1000.                     */
    int64_t retry_delay_ms;       /* mean pause between attempts while waiting (jittered
                                     +-50%, never past the holder's expiry or the deadline).
                                     Default 50.                                                */
    double  drift_factor;         /* clock drift allowance: validity loses ttl*drift_factor
                                     + 2 ms. Default 0.01. Range [0, 0.5).                      */
    int     min_replicas;         /* replicas that must acknowledge acquire/extend (WAIT);
                                     0 = don't wait. Default 0.                                 */
    int64_t replicas_timeout_ms;  /* bound on that WAIT. Default 100.                           */
    int     failover_guard;       /* -1 = on for Sentinel URLs, off otherwise (default);
                                     0 = off; 1 = on.                                           */
    int     bridge;               /* modern locks write a legacy-readable stamp (see
                                     hilock_legacy.h). Default 0.                               */
    hilock_codec codec;           /* the legacy value format; default: the "doc" preset.       */
} hilock_options;

/* Fill *o with the defaults listed above. Never fails; NULL is ignored. */
HILOCK_API void hilock_options_init(hilock_options *o);

/* ---- Client ---------------------------------------------------------------------------- */

/* Make a client from options. Validates every option and URL; connects lazily, on the first
 * call that needs a server (so a server that is down now is not an error here).
 * On success *out owns a new client (free with hilock_client_free); on failure *out = NULL.
 * Returns OK, EINVAL (a bad option or URL: detail via hilock_client_errmsg(NULL) is not
 * possible, so the detail is also written to the message returned by
 * hilock_last_config_error()), ENOMEM. */
HILOCK_API hilock_status hilock_client_new(const hilock_options *o, hilock_client **out);

/* hilock_client_new() with the default options and one server URL. */
HILOCK_API hilock_status hilock_client_open(const char *url, hilock_client **out);

/* Why the last hilock_client_new()/hilock_client_open() on this thread failed with EINVAL
 * or ENOMEM (thread-local, static text owned by the library; "" if none). */
HILOCK_API const char *hilock_last_config_error(void);

/* Detail of the last failure on this client or on a lock made from it: which server and
 * why ("127.0.0.1:6379: connect: Connection refused"). Owned by the client, valid until the
 * next call on it. "" after a success; never NULL (NULL client -> "no client"). */
HILOCK_API const char *hilock_client_errmsg(const hilock_client *c);

/* Drop the caller's reference. Connections close when the client and every lock made from
 * it are freed (locks keep their client alive, so freeing in either order is safe).
 * Does no network I/O. NULL-safe. */
HILOCK_API void hilock_client_free(hilock_client *c);

/* ---- Lock ------------------------------------------------------------------------------ */

/* Acquire `key` for ttl_ms milliseconds.
 *   wait_ms: 0 = try once; HILOCK_WAIT_FOREVER (-1) = until acquired (or an error);
 *            > 0 = give up after that long. The call never takes longer than
 *            wait_ms + io_timeout_ms (+ connect_timeout_ms when it has to connect).
 * The lock is a fresh random token (16 bytes from getrandom(), hex) written with
 * SET NX PX, and a fencing token minted in the same script. Validity is measured from
 * before the command was sent; an acquisition whose validity is <= 0 is undone.
 * On OK, *out owns a new lock (release with hilock_release, free with hilock_free);
 * otherwise *out = NULL.
 * Returns OK; BUSY (held by someone else, when wait_ms ran out or was 0);
 * EINVAL (NULL client/key/out, empty key or longer than HILOCK_KEY_MAX, ttl_ms <= 0, ttl_ms
 * > HILOCK_TTL_MAX_MS or too short for the drift allowance, wait_ms < -1);
 * EIO, ETIMEDOUT (a write may have landed: it is undone by token on the next contact),
 * EAUTH, EREPLY (e.g. the key holds a hash), EREPLICAS, ENOQUORUM, ENOMEM. */
HILOCK_API hilock_status hilock_acquire(hilock_client *c, const char *key, int64_t ttl_ms,
                                        int64_t wait_ms, hilock **out);

/* Delete the lock if, and only if, it still holds our token (atomic compare in Lua).
 * A network operation; it does not free *l. Safe to call twice (the second says NOT_HELD).
 * Returns OK; NOT_HELD (expired, or now held by someone else: see errmsg); LOST;
 * EINVAL (NULL); EIO, ETIMEDOUT, EAUTH, EREPLY, ENOQUORUM. */
HILOCK_API hilock_status hilock_release(hilock *l);

/* Set the lock's expiry to ttl_ms from now, if it still holds our token. On OK the validity
 * is recomputed (measured from before the command was sent).
 * Returns OK; NOT_HELD; LOST; EINVAL (NULL, ttl out of range, or a released lock);
 * EIO, ETIMEDOUT, EAUTH, EREPLY, EREPLICAS, ENOQUORUM. On an error the lock keeps its old
 * validity. */
HILOCK_API hilock_status hilock_extend(hilock *l, int64_t ttl_ms);

/* Ask the server(s) whether our token is still there. Does not change validity.
 * Returns OK, NOT_HELD, LOST, EINVAL (NULL), EIO, ETIMEDOUT, EAUTH, EREPLY, ENOQUORUM. */
HILOCK_API hilock_status hilock_check(hilock *l);

/* Milliseconds the lock is still safely ours by the monotonic clock, minus the drift
 * allowance; 0 once that has passed, after a release, or for NULL. No network I/O. */
HILOCK_API int64_t hilock_validity_ms(const hilock *l);

/* The fencing token: a number that grows with every grant of this key, so a resource that
 * remembers the highest token it has seen can refuse a stale holder. It is at least the
 * server's clock in milliseconds since 1970, so it keeps growing even after the counter key
 * (kept ttl + 1 hour past each grant) has expired. 0 for NULL. */
HILOCK_API uint64_t hilock_fence(const hilock *l);

/* The value this lock wrote (32 hex characters, or the legacy stamp). Owned by the lock.
 * NULL for NULL. */
HILOCK_API const char *hilock_token(const hilock *l);

/* The key, as given to acquire. Owned by the lock. NULL for NULL. */
HILOCK_API const char *hilock_key(const hilock *l);

/* Free the lock's memory (and stop its keepalive). Does no network I/O and does not release
 * the lock on the server: call hilock_release first, or the key lives until it expires.
 * NULL-safe. */
HILOCK_API void hilock_free(hilock *l);

/* Static text for a status; never NULL (unknown values -> "unknown status"). */
HILOCK_API const char *hilock_strerror(hilock_status s);

/* ---- Keepalive ------------------------------------------------------------------------- */

/* Called once, on the keepalive thread, when a renewal fails (why = NOT_HELD, LOST, or an
 * error status). Renewal stops after it. It must not call hilock_release/hilock_free on l. */
typedef void (*hilock_lost_fn)(hilock *l, hilock_status why, void *arg);

/* Renew the lock at about a third of its ttl on a background thread with its own
 * connection, until hilock_release or hilock_free (both stop it before they return, so no
 * renewal outlives them). on_lost may be NULL.
 * Returns OK; EINVAL (NULL, a released lock, or a keepalive already running); ENOMEM; EIO
 * (the thread could not be started). */
HILOCK_API hilock_status hilock_keepalive(hilock *l, hilock_lost_fn on_lost, void *arg);

#ifdef __cplusplus
}
#endif
#endif /* HILOCK_H */
