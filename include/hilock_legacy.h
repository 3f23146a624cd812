/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hilock_legacy.h -- join a fleet that locks with the old SETNX/GETSET timestamp recipe, and
 * move it to the modern lock without stopping it.
 *
 * The recipe (redis.io, SETNX page, "Handling deadlocks"), as other programs run it:
 *   SETNX key <unix time + timeout + 1>            -> 1: acquired
 *   GET key; if that stamp has not passed           -> wait, try again
 *   GETSET key <new stamp>; acquired only if the old value it returns had still passed
 *   release: DEL key, only while our own stamp has not passed
 * The value is a time stamp ("until"), written in the fleet's own format: seconds or
 * milliseconds, integer or decimal, "+1" or not, sometimes with an owner suffix. hilock calls
 * that format a codec (hilock_codec, declared in hilock.h because the options carry one).
 *
 * What hilock does (on the wire the values are byte-for-byte what the fleet writes):
 *   - a fresh stamp on every attempt (a stamp computed before a long wait is already stale);
 *   - SETNX, GET and the GETSET take-over are decided in one Lua script (atomic, invisible to
 *     the peers): a key that vanished in between is simply set, and we never overwrite a
 *     value other than the exact expired one we judged;
 *   - a value that is not a stamp of the codec (a random token, "", "1", a stamp in another
 *     unit) is never treated as expired: BUSY, and hilock_client_errmsg() names key and value;
 *   - a key that has a TTL is never taken over (it expires by the server's clock: we wait);
 *   - release is an atomic compare-and-delete of the exact value we wrote, skipped once our
 *     stamp has passed (another owner may hold the key by then) -- never a plain DEL;
 *   - options.skew_margin_ms: others' stamps count as passed only that much later, our own
 *     validity ends that much sooner; options.clock_offset_ms corrects (or, in tests,
 *     injects) an offset of this host's wall clock;
 *   - options.legacy_pexpire: also give the key a TTL (crash protection).
 *
 * Bridge mode (options.bridge = 1): hilock_acquire() writes a pure-digits future stamp in the
 * fleet's unit together with PX, takes over expired legacy stamps that have no TTL (never
 * unparseable values), and extend moves stamp and PX together. Legacy clients see a bridge
 * lock as held; bridge clients see legacy locks as held. See docs/legacy-migration.md.
 *
 * Limits of the recipe that no client can fix alone (documented, not hidden):
 *   - every client on a key must use the same codec (units: ms clients read seconds stamps as
 *     1970 and steal; hilock refuses such values and says so) and the same timeout: a peer
 *     that loses a GETSET race has already overwritten the winner's stamp with its own;
 *   - expiry is judged on each client's wall clock: keep clocks in sync, set skew_margin_ms;
 *   - stamps are not unique (two owners in the same tick write the same bytes), so a write
 *     whose fate is unknown (timeout) is left to expire by its stamp / TTL, never undone.
 *
 * Thread rule as in hilock.h: a client and its locks are used by one thread at a time.
 */
#ifndef HILOCK_LEGACY_H
#define HILOCK_LEGACY_H

#include "hilock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes a formatted value (with its terminating NUL) needs at most; longer stored values are
 * never stamps. */
#define HILOCK_CODEC_MAX 64

/* Acquire `key` with the legacy recipe, in the format of the client's options.codec.
 * The key is used exactly as given (npm redis-lock prepends "lock.", the Ruby gem "lock:":
 * pass the full key). The stamp written is now + timeout_ms (+1 unit if codec.plus_one),
 * truncated to the codec's resolution, as the fleet's own clients compute it (the float
 * styles: the double their runtime makes of this host's microsecond clock).
 *   wait_ms: as hilock_acquire (0 = one attempt, which still takes over an expired stamp;
 *            HILOCK_WAIT_FOREVER; > 0 = give up after that long).
 * The result is an ordinary hilock: hilock_token() is the value written, hilock_fence() a
 * fencing token (minted by hilock clients only: legacy peers mint none), and
 * hilock_validity_ms() = timeout - elapsed - drift allowance - skew_margin_ms, never past
 * our own stamp. hilock_release(), hilock_extend() (writes a fresh stamp, and moves the TTL
 * with it), hilock_check() and hilock_free() work on it.
 * On OK *out owns the lock; otherwise *out = NULL.
 * Returns OK; BUSY (held: a live stamp, a key with a TTL, or a value that is not a stamp --
 * errmsg names key and value, and the unit the value looks like when it is a number);
 * EINVAL (this client already holds key: not re-entrant, as hilock_acquire;
 * NULL client/key/out, empty or too long key, timeout_ms <= 0, too long, or too short
 * for drift allowance + skew_margin_ms, wait_ms < -1, a client with more than one server:
 * legacy peers know no quorum); EIO, ETIMEDOUT (the write may have landed: it then expires by
 * its stamp), EAUTH, EREPLY (e.g. the key holds a hash), ENOMEM. */
HILOCK_API hilock_status hilock_legacy_acquire(hilock_client *c, const char *key, int64_t timeout_ms,
                                               int64_t wait_ms, hilock **out);

/* Fill *out with a named codec. Names and formats (what each legacy client stores):
 *   "doc"             the documented recipe: integer seconds, +1, a stamp equal to now is live
 *   "node-redis-lock" npm redis-lock 0.0.x (and 0.1.x values): integer ms, +1, a stamp equal
 *                     to now is expired (held iff stamp > Date.now())
 *   "jedis-lock"      jedis-lock 1.0 and its Spring copies: integer ms, +1, expired iff < now
 *   "redis-objects"   Ruby redis-objects Redis::Lock <= 1.4: float seconds, +1, expired iff
 *                     < now; written as Ruby's Float#to_s writes (Time.now + timeout + 1).to_f:
 *                     the shortest decimal that reads back as that double, 6 or 7 decimals for
 *                     today's stamps unless they end in zeros ("1795417220.4802637",
 *                     "1795417239.5"; "1795417221.0" on a whole second)
 *                     (decimals = HILOCK_DECIMALS_RUBY)
 *   "redis-py-2"      redis-py Lock 2.4-2.9: float seconds, no +1, expired iff < now; written
 *                     as 2.8-2.9 write time.time() + timeout, Python's repr of the float (also
 *                     the shortest round trip: "1795417238.2352152") (HILOCK_DECIMALS_PYTHON).
 *                     2.4-2.7 wrote whole seconds with one decimal ("1795417238.0"): read too
 *   "ruby-redis-lock" Ruby redis-lock gem 0.2: integer seconds, +1, expired iff < now, value
 *                     "<stamp>-<pid>-<thread>" (values of gem 0.1, "<stamp>-<pid>", parse too)
 * Returns OK; EINVAL (NULL name or out, or an unknown name: *out is left unchanged). */
HILOCK_API hilock_status hilock_codec_preset(const char *name, hilock_codec *out);

/* Parse a stored value: s[0..len) (no NUL needed; embedded NULs are garbage). On OK,
 * *stamp_us = the stamp in microseconds since 1970 (a fraction finer than 1 us rounds up,
 * so a stamp is never read as earlier than written). Accepted: digits, an optional fraction
 * ".digits" (whatever codec.decimals says: peers of one fleet mix int and float writers),
 * then, for a suffix codec, an optional "-<digits>" or "-<digits>-<digits>" owner; nothing
 * else (no sign, space, exponent, hex, "inf"). The stamp must lie between 2000-01-01 and the
 * year 5138 (1e11 s): smaller or larger numbers are not stamps of this codec -- digits-only
 * tokens, redis-objects' "1" (a lock without expiry), or a stamp in another unit.
 * Never reads outside s[0..len); no allocation; pure (safe from any thread).
 * Returns OK; EINVAL (anything else, including NULL arguments, an invalid codec, len >=
 * HILOCK_CODEC_MAX, overflow). *stamp_us is only written on OK. */
HILOCK_API hilock_status hilock_codec_parse(const hilock_codec *codec, const char *s, size_t len,
                                            int64_t *stamp_us);

/* Format `stamp_us` (microseconds since 1970) as the codec writes it: the number in the
 * codec's unit, truncated to its decimals, then the suffix (for HILOCK_SUFFIX_PID_THREAD:
 * "-<pid>-<thread id>" of the caller). buf gets a NUL-terminated string of at most
 * HILOCK_CODEC_MAX bytes. hilock_codec_parse() reads back the truncated stamp exactly. The
 * Ruby/Python float styles write the shortest repr of the double that runtime makes of a
 * clock reading of stamp_us (for Python: with the timeout already in it); parse reads that
 * back rounded up to a microsecond, within a fraction of a microsecond of stamp_us today
 * (the double's own precision: up to 15 us near the year 5138).
 * Returns OK; EINVAL (NULL codec/buf, invalid codec, stamp outside the range parse accepts
 * or, for a float style, a double that rounds out of it, cap too small for the value: buf is
 * then "" if cap > 0). */
HILOCK_API hilock_status hilock_codec_format(const hilock_codec *codec, int64_t stamp_us, char *buf,
                                             size_t cap);

/* Whether a fleet with this codec considers `stamp_us` expired at wall time `now_us`: integer
 * codecs compare with now truncated to their unit (as time(), Date.now() do), decimal codecs
 * with now itself; "<" or "<=" as codec.expired_if_equal says. To apply a skew margin, pass
 * now_us - margin. 0 for a NULL or invalid codec (when in doubt, a stamp is live). */
HILOCK_API int hilock_codec_expired(const hilock_codec *codec, int64_t stamp_us, int64_t now_us);

#ifdef __cplusplus
}
#endif
#endif /* HILOCK_LEGACY_H */
