/* SPDX-License-Identifier: BSD-3-Clause */
/* legacy.c -- two lock kinds (kind.h): the SETNX/GETSET recipe of legacy fleets
 * (hl_kind_legacy, for hilock_legacy_acquire) and bridge mode (hl_kind_bridge, for
 * hilock_acquire with options.bridge); the entry points that pick them are in src/api/acquire.c.
 *
 * Each is a table of operations that src/lock/lock.c's quorum code runs: the same acquire loop,
 * connection, timing, retries, fence, release/extend/check flows, verdicts and errors as the
 * modern lock. What is theirs: the stamp (written fresh for every attempt and extend), the
 * acquire and extend scripts, reading the value a busy answer carries, validity bounded by
 * our own stamp, and "our stamp has passed: touch nothing". This file depends on src/ only
 * through kind.h's types and the engine's commands and helpers (lock.h); it calls no
 * function of lock.c, and src/ names nothing of it.
 *
 * Why the recipe runs as one Lua script (legacy_acquire.lua) rather than as separate SETNX,
 * GET and GETSET commands: the separate commands leave three windows -- the key can vanish
 * between SETNX and GET (the client then waits a whole period for nothing), change between
 * GET and GETSET (and a GETSET that loses has already overwritten the winner's stamp with its
 * own), and every client must compare correctly afterwards. The script sets the key if it is
 * absent, replaces only the exact expired value we judged (and only a key without TTL), and
 * otherwise reports what is there. The peers cannot tell the difference: the same values
 * appear in the key at the same moments as if we had run SETNX/GETSET -- except that we never
 * make the recipe's one destructive write, the loser's overwrite. Whether a stamp has passed
 * stays in C (hilock_codec_parse / hilock_codec_expired): one parser, in exact integer
 * arithmetic and fuzzed, not a second one in Lua's doubles.
 *
 * Time is this host's wall clock (CLOCK_REALTIME) + clock_offset_ms, as the peers use theirs;
 * each stamp is also pinned to the monotonic clock, so a wall clock step cannot make us
 * believe we still hold a lock whose time has run out. */
#include <stdio.h>
#include <string.h>

#include "codec.h"
#include "legacy.h"

static int64_t wall_now(const hilock_client *c) { return hl_wall_us() + c->opt.clock_offset_ms * 1000; }
static int64_t margin_us(const hilock_client *c) { return c->opt.skew_margin_ms * 1000; }

/* A stored value for a message: printable ASCII as is, the rest as \xNN, at most 64 bytes. */
static void shown(char *dst, size_t cap, const char *s, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 8 < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (i == 64) {
            o += (size_t)snprintf(dst + o, cap - o, "...");
            break;
        }
        if (ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\') dst[o++] = (char)ch;
        else o += (size_t)snprintf(dst + o, cap - o, "\\x%02x", ch);
    }
    dst[o] = '\0';
}

/* A fresh stamp for ttl_ms into value (HILOCK_CODEC_MAX bytes), with what it says by the wall
 * clock and pinned to the monotonic clock (every attempt and every extend: a stamp made before
 * a wait is stale when written, the Ruby gem's "all waiters get the lock" bug).
 * Legacy: exactly what the fleet's clients write, now + ttl (+1 unit) truncated to the
 * codec's resolution, or the Ruby/Python double of it. Bridge: pure digits (the one format
 * every legacy parser reads), no suffix, rounded up, so the stamp never passes before the PX
 * removes the key. */
static hilock_status new_stamp(hilock *l, int64_t ttl_ms, int bridge, char *value,
                               int64_t *stamp_us, int64_t *mono_us)
{
    hilock_client *c = l->c;
    hilock_codec k = c->opt.codec;
    int64_t now = wall_now(c), mono = hl_now_us(), add = ttl_ms * 1000, s = 0;
    if (bridge) {
        k.decimals = 0;
        k.suffix = HILOCK_SUFFIX_NONE;
        add = hl_add_sat(add, hl_codec_unit_us(&k) - 1);
    }
    if (k.plus_one) add = hl_add_sat(add, hl_codec_unit_us(&k));
    if (hl_codec_format_at(&k, now, add, value, HILOCK_CODEC_MAX, &s) != HILOCK_OK)
        return hl_fail(c, HILOCK_EINVAL, "%s: no stamp for wall clock %lld us + %lld ms: outside "
                       "2000..5138 (clock or clock_offset_ms wrong?)", l->key, (long long)now,
                       (long long)ttl_ms);
    *stamp_us = s;
    *mono_us = mono + (s - now);
    return HILOCK_OK;
}

/* Our stamp has passed, by the wall clock or the monotonic one, less the skew margin: a peer
 * may take the key over from now on, so we no longer touch it. */
static int stamp_passed(const hilock *l)
{
    int64_t m = margin_us(l->c);
    return wall_now(l->c) >= l->stamp_us - m || hl_now_us() >= l->stamp_mono_us - m;
}

/* The timeout must leave validity after the drift allowance and the skew margin. */
static hilock_status check_timeout(hilock *l, int64_t ttl_ms)
{
    hilock_client *c = l->c;
    if (hl_valid_until(c, ttl_ms, 0) - margin_us(c) <= 1000)
        return hl_fail(c, HILOCK_EINVAL, "timeout %lld ms leaves no validity after the drift "
                       "allowance and skew_margin_ms (%lld ms)", (long long)ttl_ms,
                       (long long)c->opt.skew_margin_ms);
    return HILOCK_OK;
}

/* The PX argument of our scripts: bridge locks and legacy_pexpire fleets expire by the
 * server's clock too; "0" = no PX. */
static void px_arg(hilock *l, hl_cmd *cmd, int bridge, char *scratch, int64_t ttl_ms)
{
    if (bridge || l->c->opt.legacy_pexpire) hl_cmd_argi(cmd, scratch, ttl_ms);
    else hl_cmd_arg(cmd, "0", 1);
}

/* legacy_acquire.lua with a fresh stamp in l->token; only for a client of one server. */
static hilock_status recipe_acquire_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b, int bridge)
{
    hilock_client *c = l->c;
    hilock_status st;
    if (c->nnodes != 1)
        return hl_fail(c, HILOCK_EINVAL, "%s: legacy and bridge locks need exactly one server "
                       "(legacy peers know no quorum); this client has %zu", l->key, c->nnodes);
    if ((st = check_timeout(l, l->ttl_ms)) != HILOCK_OK ||
        (st = new_stamp(l, l->ttl_ms, bridge, l->token, &l->stamp_us, &l->stamp_mono_us)) != HILOCK_OK)
        return st;
    hl_cmd_init(cmd, &hl_lua_legacy_acquire, 2);
    hl_cmd_arg(cmd, l->key, (size_t)-1);
    hl_cmd_arg(cmd, l->fence_key, (size_t)-1);
    hl_cmd_arg(cmd, l->token, (size_t)-1);
    px_arg(l, cmd, bridge, b->num[0], l->ttl_ms);
    hl_cmd_argi(cmd, b->num[1], l->ttl_ms + HL_FENCE_KEEP_MS);
    hl_cmd_arg(cmd, l->expect, (size_t)-1);
    hl_cmd_argi(cmd, b->num[2], l->ttl_ms + HL_FENCE_EPOCH_KEEP_MS);   /* as modern.c */
    hl_cmd_argclock(cmd);   /* the token's floor: the server's clock (as modern.c) */
    return HILOCK_OK;
}

static hilock_status legacy_acquire_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b, int64_t mark_ms)
{
    (void)mark_ms;   /* no wake-up: the fleets do not signal */
    return recipe_acquire_cmd(l, cmd, b, 0);
}

static hilock_status bridge_acquire_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b, int64_t mark_ms)
{
    (void)mark_ms;
    return recipe_acquire_cmd(l, cmd, b, 1);
}

/* Judges the value a busy reply {0, pttl, value} carries and sets the BUSY message (naming
 * key and value); returns the wait hint: -1 = an expired stamp, replace it now (l->expect),
 * > 0 = us until it passes or its TTL ends, 0 = none. */
static int64_t legacy_busy(hilock *l, const hl_reply *r)
{
    hilock_client *c = l->c;
    const hilock_codec *k = &c->opt.codec;
    long long pttl = hl_reply_int(hl_reply_elem(r, 1));
    const hl_reply *rv = hl_reply_elem(r, 2);
    size_t len = 0;
    const char *v = hl_reply_type(rv) == HL_R_STRING ? hl_reply_str(rv, &len) : NULL;
    int64_t stamp, now = wall_now(c) - margin_us(c), left;
    char show[300], desc[120];
    l->expect[0] = '\0';
    shown(show, sizeof show, v ? v : "", len);
    if (!v || hilock_codec_parse(k, v, len, &stamp) != HILOCK_OK) {
        const char *looks = v ? hl_codec_guess_unit(v, len) : NULL;
        hl_codec_describe(k, desc, sizeof desc);
        hl_fail(c, HILOCK_BUSY, "%s: holds \"%s\", which is not a stamp of options.codec (%s)%s%s%s; "
                "never treated as expired", l->key, show, desc, looks ? ": it looks like " : "",
                looks ? looks : "", looks ? ", check the codec" : "");
        return pttl >= 0 ? (pttl + 1) * 1000 : 0;
    }
    if (pttl >= 0) {   /* it expires by the server's clock: wait for that, never steal it */
        hl_fail(c, HILOCK_BUSY, "%s: held (\"%s\", with a TTL of %lld ms)", l->key, show, pttl);
        return (pttl + 1) * 1000;
    }
    if (hilock_codec_expired(k, stamp, now)) {
        memcpy(l->expect, v, len + 1);   /* parse accepted it: len < HILOCK_CODEC_MAX */
        hl_fail(c, HILOCK_BUSY, "%s: \"%s\" has passed; it was replaced by another owner first",
                l->key, show);
        return -1;
    }
    /* wake just after it passes for this codec: integer fleets wait for the next tick */
    left = stamp - now + (k->decimals == 0 ? hl_codec_unit_us(k) : 1);
    hl_fail(c, HILOCK_BUSY, "%s: held until \"%s\" (%lld ms from now by this host's clock%s)",
            l->key, show, (long long)((stamp - now) / 1000), margin_us(c) ? " and skew_margin_ms" : "");
    return left > 0 ? left : 1;
}

/* Validity: by the ttl from t0_us, and never past our own stamp pinned to the monotonic
 * clock (with the drift allowance of the longer of the two ttls: a check passes what the
 * server says is left), less skew_margin_ms. */
static int64_t legacy_valid_until(const hilock *l, int64_t ttl_ms, int64_t t0_us)
{
    const hilock_client *c = l->c;
    int64_t t = ttl_ms > l->ttl_ms ? ttl_ms : l->ttl_ms;
    int64_t by_ttl = hl_valid_until(c, ttl_ms, t0_us);
    int64_t by_stamp = hl_valid_until(c, t, l->stamp_mono_us - t * 1000);
    return (by_ttl < by_stamp ? by_ttl : by_stamp) - margin_us(c);
}

/* The lock is over by our own clock: say so, touch nothing (never a plain DEL, and no
 * compare once a peer may hold the key). */
static hilock_status legacy_usable(hilock *l, const char *op)
{
    if (!stamp_passed(l)) return HILOCK_OK;
    l->valid_until_us = 0;
    return hl_fail(l->c, HILOCK_NOT_HELD, "%s %s: our stamp \"%s\" has passed by this host's "
                   "clock%s: another owner may hold the key now, so it was left alone", op,
                   l->key, l->token, margin_us(l->c) ? " (less skew_margin_ms)" : "");
}

/* A fresh stamp (and the PX, for bridge and legacy_pexpire locks) replaces ours atomically
 * (legacy_extend.lua). The new stamp stays in b until a quorum (the one server) has it:
 * if the answer is lost the new value may have landed, and the lock keeps its old value
 * (the quorum code shortens the validity to the new ttl's); at worst our release then finds
 * the new value and the key lives until that stamp passes. */
static hilock_status recipe_extend_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b, int64_t ttl_ms, int bridge)
{
    hilock_status st;
    if ((st = check_timeout(l, ttl_ms)) != HILOCK_OK ||
        (st = new_stamp(l, ttl_ms, bridge, b->value, &b->stamp_us, &b->stamp_mono_us)) != HILOCK_OK)
        return st;
    hl_cmd_init(cmd, &hl_lua_legacy_extend, 1);
    hl_cmd_arg(cmd, l->key, (size_t)-1);
    hl_cmd_arg(cmd, l->token, (size_t)-1);
    hl_cmd_arg(cmd, b->value, (size_t)-1);
    px_arg(l, cmd, bridge, b->num[0], ttl_ms);
    return HILOCK_OK;
}

static hilock_status legacy_extend_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b, int64_t ttl_ms)
{
    return recipe_extend_cmd(l, cmd, b, ttl_ms, 0);
}

static hilock_status bridge_extend_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b, int64_t ttl_ms)
{
    return recipe_extend_cmd(l, cmd, b, ttl_ms, 1);
}

static void legacy_extend_end(hilock *l, const hl_kind_buf *b, int ours)
{
    if (!ours) return;
    memcpy(l->token, b->value, strlen(b->value) + 1);
    l->stamp_us = b->stamp_us;
    l->stamp_mono_us = b->stamp_mono_us;
}

/* Both kinds: no undo of an acquire write whose fate is unknown (stamps are not unique: two
 * owners in one tick write the same bytes, so such a write expires by itself); no failover
 * scripts (legacy fleets get resolution and READONLY only); no wake-up (the fleets do not
 * signal a release); no keepalive (the command renews them itself). */
/* The legacy recipe has no queue: a fair caller is refused (bridge mode is hilock_acquire's). */
static hilock_status legacy_refused(hilock_client *c, int limit)
{
    (void)limit;
    return c->opt.fair ? hl_fail(c, HILOCK_EINVAL, "%s", HL_LEGACY_NOT_FAIR) : HILOCK_OK;
}

#define LEGACY_KIND(kind_name, acquire, extend, refused_fn)                                   \
    {                                                                                         \
        .name = kind_name, .acquire_cmd = acquire, .busy = legacy_busy, .valid_until = legacy_valid_until,   \
        .usable = legacy_usable, .extend_cmd = extend, .extend_end = legacy_extend_end,                    \
        .taken = "the key holds another value: taken over, or overwritten by a legacy peer "   \
                 "that lost a GETSET race (the key then lives until that peer's stamp passes)", \
        .undo_unknown = 0, .failover = 0, .wake = 0, .keepalive = 0,                         \
        .refused = refused_fn,                                                               \
    }

const hl_kind_ops hl_kind_legacy = LEGACY_KIND("legacy", legacy_acquire_cmd, legacy_extend_cmd, legacy_refused);
const hl_kind_ops hl_kind_bridge = LEGACY_KIND("bridge", bridge_acquire_cmd, bridge_extend_cmd, NULL);
