/* legacy.c -- the SETNX/GETSET recipe of legacy fleets, and bridge mode, on the shared engine.
 *
 * Acquisition runs through lock.c's acquire loop and attempt() -- the same connection,
 * timing, retries, validity, fence and errors as the modern lock. For HL_LEGACY and HL_BRIDGE
 * locks attempt() asks hl_legacy_cmd() for the command and hl_legacy_busy() what a busy
 * reply means. Release, extend and check of these kinds are dispatched here whole.
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

#include "internal.h"
#include "codec.h"

#define FENCE_KEEP_MS (3600 * 1000)   /* as lock.c: the counter outlives each grant by an hour */

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

/* Write a fresh stamp for ttl_ms into l->token (every attempt and every extend: a stamp made
 * before a wait is stale when written, the Ruby gem's "all waiters get the lock" bug).
 * Legacy: exactly what the fleet's clients write, now + ttl (+1 unit) truncated to the
 * codec's resolution, or the Ruby/Python double of it. Bridge: pure digits (the one format
 * every legacy parser reads), no suffix, rounded up, so the stamp never passes before the PX
 * removes the key. */
static hilock_status new_stamp(hilock *l, int64_t ttl_ms)
{
    hilock_client *c = l->c;
    hilock_codec k = c->opt.codec;
    int64_t now = wall_now(c), mono = hl_now_us(), add = ttl_ms * 1000, s = 0;
    if (l->kind == HL_BRIDGE) {
        k.decimals = 0;
        k.suffix = HILOCK_SUFFIX_NONE;
        add = hl_add_sat(add, hl_codec_unit_us(&k) - 1);
    }
    if (k.plus_one) add = hl_add_sat(add, hl_codec_unit_us(&k));
    if (hl_codec_format_at(&k, now, add, l->token, HILOCK_CODEC_MAX, &s) != HILOCK_OK)
        return hl_fail(c, HILOCK_EINVAL, "%s: no stamp for wall clock %lld us + %lld ms: outside "
                       "2000..5138 (clock or clock_offset_ms wrong?)", l->key, (long long)now,
                       (long long)ttl_ms);
    l->stamp_us = s;
    l->stamp_mono_us = mono + (s - now);
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

hilock_status hl_legacy_cmd(hilock *l, hl_cmd *cmd, char *a_px, char *a_keep)
{
    hilock_client *c = l->c;
    hilock_status st;
    if (c->nnodes != 1)
        return hl_fail(c, HILOCK_EINVAL, "%s: legacy and bridge locks need exactly one server "
                       "(legacy peers know no quorum); this client has %zu", l->key, c->nnodes);
    if ((st = check_timeout(l, l->ttl_ms)) != HILOCK_OK || (st = new_stamp(l, l->ttl_ms)) != HILOCK_OK)
        return st;
    hl_cmd_init(cmd, &hl_lua_legacy_acquire, 2);
    hl_cmd_arg(cmd, l->key, (size_t)-1);
    hl_cmd_arg(cmd, l->fence_key, (size_t)-1);
    hl_cmd_arg(cmd, l->token, (size_t)-1);
    if (l->kind == HL_BRIDGE || c->opt.legacy_pexpire) hl_cmd_argi(cmd, a_px, l->ttl_ms);
    else hl_cmd_arg(cmd, "0", 1);
    hl_cmd_argi(cmd, a_keep, l->ttl_ms + FENCE_KEEP_MS);
    hl_cmd_arg(cmd, l->expect, (size_t)-1);
    return HILOCK_OK;
}

int64_t hl_legacy_busy(hilock *l, const hl_reply *r)
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

int64_t hl_legacy_valid_until(const hilock *l, int64_t t0_us)
{
    const hilock_client *c = l->c;
    int64_t by_ttl = hl_valid_until(c, l->ttl_ms, t0_us);
    int64_t by_stamp = hl_valid_until(c, l->ttl_ms, l->stamp_mono_us - l->ttl_ms * 1000);
    return (by_ttl < by_stamp ? by_ttl : by_stamp) - margin_us(c);
}

hilock_status hilock_legacy_acquire(hilock_client *c, const char *key, int64_t timeout_ms,
                                    int64_t wait_ms, hilock **out)
{
    if (out) *out = NULL;
    if (!c) return HILOCK_EINVAL;
    return hl_acquire(c, key, timeout_ms, wait_ms, HL_LEGACY, out);
}

/* ---- release, extend, check: one server, one command ---- */

/* Send cmd to the lock's server and judge the reply with the shared verdicts (lock.c), so
 * legacy and modern locks read answers the same way. token: for a GET (check). */
static hilock_status run(hilock *l, const hl_cmd *cmd, const char *token, int64_t *t0, hl_verdict *v)
{
    hilock_client *c = l->c;
    int64_t io = c->opt.io_timeout_ms * 1000;
    hl_reply *r;
    *t0 = hl_now_us();
    /* bounded as a modern lock's calls: a round trip, plus a connect if one is needed */
    if (!hl_exec(c, 1u, cmd, 1, io, hl_add_sat(*t0, io + c->opt.connect_timeout_ms * 1000)))
        return hl_fail(c, c->nodes[0].st, "%s", c->nodes[0].err);
    r = c->nodes[0].reply[0];
    *v = token ? hl_check_verdict(r, token) : hl_tristate_verdict(r);
    if (*v == HL_V_BAD) {
        hilock_status st = hl_node_reply_error(&c->nodes[0], r);
        hl_exec_clear(c);
        return hl_fail(c, st, "%s", c->nodes[0].err);
    }
    hl_exec_clear(c);
    return HILOCK_OK;
}

/* The lock is over by our own clock: say so, touch nothing. */
static hilock_status stamp_over(hilock *l, const char *op)
{
    l->valid_until_us = 0;
    return hl_fail(l->c, HILOCK_NOT_HELD, "%s %s: our stamp \"%s\" has passed by this host's "
                   "clock%s: another owner may hold the key now, so it was left alone", op,
                   l->key, l->token, margin_us(l->c) ? " (less skew_margin_ms)" : "");
}

/* Not ours any more: HL_V_GONE or HL_V_OTHER. */
static hilock_status not_ours(hilock *l, hl_verdict v, const char *op)
{
    l->valid_until_us = 0;
    if (v == HL_V_OTHER)
        return hl_fail(l->c, HILOCK_NOT_HELD, "%s %s: the key holds another value: taken over, "
                       "or overwritten by a legacy peer that lost a GETSET race (the key then "
                       "lives until that peer's stamp passes)", op, l->key);
    return hl_fail(l->c, HILOCK_NOT_HELD, "%s %s: expired or already released", op, l->key);
}

/* Never a plain DEL: skipped once our stamp has passed (a peer may hold the key), and then
 * an atomic compare-and-delete of the exact value we wrote. */
hilock_status hl_legacy_release(hilock *l)
{
    hl_cmd cmd;
    hilock_status st;
    hl_verdict v;
    int64_t t0;
    if (stamp_passed(l)) {
        l->released = 1;
        return stamp_over(l, "release");
    }
    hl_cmd_init(&cmd, &hl_lua_release, 1);
    hl_cmd_arg(&cmd, l->key, (size_t)-1);
    hl_cmd_arg(&cmd, l->token, (size_t)-1);
    if ((st = run(l, &cmd, NULL, &t0, &v)) != HILOCK_OK) return st;
    l->released = 1;
    l->valid_until_us = 0;
    return v == HL_V_OURS ? hl_ok(l->c) : not_ours(l, v, "release");
}

/* A fresh stamp (and the PX, for bridge and legacy_pexpire locks) replaces ours atomically.
 * If the answer is lost the new value may have landed: the lock keeps its old value and
 * validity (both end no later than the new ones), so nothing unsafe follows; at worst our
 * release then finds the new value and the key lives until that stamp passes. */
hilock_status hl_legacy_extend(hilock *l, int64_t ttl_ms)
{
    hilock_client *c = l->c;
    hl_cmd cmd;
    hilock_status st;
    hl_verdict v = HL_V_BAD;
    char old[HILOCK_CODEC_MAX], a_px[24];
    int64_t old_stamp = l->stamp_us, old_mono = l->stamp_mono_us, t0, until;
    if ((st = check_timeout(l, ttl_ms)) != HILOCK_OK) return st;
    if (stamp_passed(l)) return stamp_over(l, "extend");
    memcpy(old, l->token, strlen(l->token) + 1);
    if ((st = new_stamp(l, ttl_ms)) != HILOCK_OK) return st;
    hl_cmd_init(&cmd, &hl_lua_legacy_extend, 1);
    hl_cmd_arg(&cmd, l->key, (size_t)-1);
    hl_cmd_arg(&cmd, old, (size_t)-1);
    hl_cmd_arg(&cmd, l->token, (size_t)-1);
    if (l->kind == HL_BRIDGE || c->opt.legacy_pexpire) hl_cmd_argi(&cmd, a_px, ttl_ms);
    else hl_cmd_arg(&cmd, "0", 1);
    st = run(l, &cmd, NULL, &t0, &v);
    if (st != HILOCK_OK || v != HL_V_OURS) {
        memcpy(l->token, old, strlen(old) + 1);
        l->stamp_us = old_stamp;
        l->stamp_mono_us = old_mono;
        return st != HILOCK_OK ? st : not_ours(l, v, "extend");
    }
    l->ttl_ms = ttl_ms;
    until = hl_legacy_valid_until(l, t0);
    if (until <= hl_now_us()) {
        l->valid_until_us = 0;
        return hl_fail(c, HILOCK_ETIMEDOUT, "extend %s: the round trip used up the new timeout", l->key);
    }
    l->valid_until_us = until;
    return hl_ok(c);
}

/* Our exact value still there, and our stamp not passed. Does not change validity. */
hilock_status hl_legacy_check(hilock *l)
{
    hl_cmd cmd;
    hilock_status st;
    hl_verdict v;
    int64_t t0;
    if (stamp_passed(l)) return stamp_over(l, "check");
    hl_cmd_init(&cmd, NULL, 0);
    hl_cmd_arg(&cmd, "GET", 3);
    hl_cmd_arg(&cmd, l->key, (size_t)-1);
    if ((st = run(l, &cmd, l->token, &t0, &v)) != HILOCK_OK) return st;
    return v == HL_V_OURS ? hl_ok(l->c) : not_ours(l, v, "check");
}
