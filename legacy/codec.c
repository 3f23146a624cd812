/* SPDX-License-Identifier: BSD-3-Clause */
/* codec.c -- legacy value formats: parse, format, expiry and the named presets.
 *
 * Pure functions (no I/O, no allocation, no global state), so the parser can be fuzzed on
 * its own. Stamps are handled as integer microseconds since 1970: exact for every unit and
 * for up to 6 decimals of seconds, where the fleets' own clients would use doubles. Only the
 * Ruby and Python float styles make a double, because the bytes those peers write are the
 * shortest repr of *their* double, and that depends on how they computed it. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec.h"
#include "platform.h"

/* The window of plausible stamps. Below 2000-01-01 lie digits-only tokens, redis-objects' "1"
 * (its lock without expiry) and seconds read as milliseconds; above 1e11 s (year 5138) lie
 * milliseconds read as seconds. Neither is a stamp of the codec: refusing them is what keeps
 * a unit mismatch from turning into a theft. */
#define STAMP_MIN_US ((int64_t)946684800 * 1000000)
#define STAMP_MAX_US ((int64_t)100000000000 * 1000000)

static const struct {
    const char  *name;
    hilock_codec codec;   /* unit, decimals, plus_one, expired_if_equal, suffix */
} presets[] = {
    { "doc",             { HILOCK_UNIT_S,  0, 1, 0, HILOCK_SUFFIX_NONE } },
    { "node-redis-lock", { HILOCK_UNIT_MS, 0, 1, 1, HILOCK_SUFFIX_NONE } },
    { "jedis-lock",      { HILOCK_UNIT_MS, 0, 1, 0, HILOCK_SUFFIX_NONE } },
    { "redis-objects",   { HILOCK_UNIT_S,  HILOCK_DECIMALS_RUBY,   1, 0, HILOCK_SUFFIX_NONE } },
    { "redis-py-2",      { HILOCK_UNIT_S,  HILOCK_DECIMALS_PYTHON, 0, 0, HILOCK_SUFFIX_NONE } },
    { "ruby-redis-lock", { HILOCK_UNIT_S,  0, 1, 0, HILOCK_SUFFIX_PID_THREAD } },
};

static int is_digit(char ch) { return ch >= '0' && ch <= '9'; }

int hl_codec_float(const hilock_codec *k)
{
    return k->decimals == HILOCK_DECIMALS_RUBY || k->decimals == HILOCK_DECIMALS_PYTHON;
}

int hl_codec_valid(const hilock_codec *k)
{
    return k && k->unit >= HILOCK_UNIT_S && k->unit <= HILOCK_UNIT_US &&
           ((k->decimals >= 0 && k->decimals <= 6) || (hl_codec_float(k) && k->unit == HILOCK_UNIT_S)) &&
           k->suffix >= HILOCK_SUFFIX_NONE && k->suffix <= HILOCK_SUFFIX_PID_THREAD;
}

int64_t hl_codec_unit_us(const hilock_codec *k)
{
    return k->unit == HILOCK_UNIT_S ? 1000000 : k->unit == HILOCK_UNIT_MS ? 1000 : 1;
}

/* decimal digits of a unit that are still whole microseconds: 6 for s, 3 for ms, 0 for us */
static int unit_digits(const hilock_codec *k)
{
    return k->unit == HILOCK_UNIT_S ? 6 : k->unit == HILOCK_UNIT_MS ? 3 : 0;
}

int64_t hl_codec_res_us(const hilock_codec *k)
{
    int64_t r = hl_codec_unit_us(k);
    if (hl_codec_float(k)) return 1;
    for (int d = 0; d < k->decimals && r > 1; d++) r /= 10;
    return r;
}

hilock_status hilock_codec_preset(const char *name, hilock_codec *out)
{
    if (!name || !out) return HILOCK_EINVAL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(name, presets[i].name)) {
            *out = presets[i].codec;
            return HILOCK_OK;
        }
    return HILOCK_EINVAL;
}

/* "-<digits>" or "-<digits>-<digits>": the owner part the Ruby gem appends (0.1: pid; 0.2:
 * pid and thread). Its own parser reads only the number before the first '-'. */
static int owner_ok(const char *s, size_t n)
{
    size_t i = 0;
    for (int group = 0; group < 2 && i < n; group++) {
        size_t start;
        if (s[i] != '-') return 0;
        start = ++i;
        while (i < n && is_digit(s[i])) i++;
        if (i == start || i - start > 20) return 0;
    }
    return i == n;
}

/* The number in s[0..len) in microseconds; a fraction finer than 1 us rounds up (others'
 * stamps: never read earlier than written) or, with !up, down (our own float stamp). */
static hilock_status parse_stamp(const hilock_codec *k, const char *s, size_t len, int up,
                                 int64_t *stamp_us)
{
    size_t i = 0;
    int64_t ip = 0, frac = 0, unit, us;
    int fd = 0, avail, finer = 0;
    if (!k || !s || !stamp_us || !hl_codec_valid(k) || len == 0 || len >= HILOCK_CODEC_MAX)
        return HILOCK_EINVAL;
    unit = hl_codec_unit_us(k);
    avail = unit_digits(k);
    while (i < len && is_digit(s[i])) {
        if (ip > STAMP_MAX_US / unit) return HILOCK_EINVAL;   /* out of range; also no overflow */
        ip = ip * 10 + (s[i++] - '0');
    }
    if (i == 0) return HILOCK_EINVAL;   /* no sign, space, '.5', 'inf', hex: not a stamp */
    if (i < len && s[i] == '.') {
        size_t start = ++i;
        while (i < len && is_digit(s[i])) {
            if (fd < avail) {
                frac = frac * 10 + (s[i] - '0');
                fd++;
            } else if (s[i] != '0') {
                finer = up;   /* below 1 us */
            }
            i++;
        }
        if (i == start) return HILOCK_EINVAL;   /* "1." */
    }
    for (; fd < avail; fd++) frac *= 10;
    if (i < len && (k->suffix != HILOCK_SUFFIX_PID_THREAD || !owner_ok(s + i, len - i)))
        return HILOCK_EINVAL;
    if (ip > STAMP_MAX_US / unit) return HILOCK_EINVAL;
    us = ip * unit + frac + finer;
    if (us < STAMP_MIN_US || us >= STAMP_MAX_US) return HILOCK_EINVAL;
    *stamp_us = us;
    return HILOCK_OK;
}

hilock_status hilock_codec_parse(const hilock_codec *k, const char *s, size_t len, int64_t *stamp_us)
{
    return parse_stamp(k, s, len, 1, stamp_us);
}

/* The double the peer holds for a clock reading now_us plus add_us (its timeout, and its
 * "+1"), computed as its runtime computes it: every operation rounded once to a double. */
static double peer_ops(const hilock_codec *k, int64_t now_us, int64_t add_us)
{
    double sec, frac, t;
    if (k->decimals == HILOCK_DECIMALS_RUBY) {   /* Time sums exactly; Time#to_f: (double)ns / 1e9 */
        double ns = (double)((uint64_t)(now_us + add_us) * 125u) * 8.0;   /* ns = us*125 << 3: one rounding */
        return ns / 1e9;
    }
    /* Python 2.7: time.time() is tv_sec + tv_usec * 0.000001, then + timeout */
    sec = (double)(now_us / 1000000);
    frac = (double)(now_us % 1000000) * 0.000001;
    t = sec + frac;
    return t + (double)add_us / 1e6;
}

/* x87 (i386 without SSE math) computes in 80 bits and a store rounds a second time, so a sum
 * could land one ulp from the peer's (x86-64, arm64: one rounding per operation): the
 * platform layer sets x87 to round as a double does (HL_PLAT_FP_X87). Compiler flags cannot
 * do this portably: -mfpmath=sse needs an SSE2 CPU, -ffloat-store still rounds twice. */
/* The inputs and the result pass through volatile memory, so that the compiler computes
 * between the two control-word changes (calls the compiler cannot see through). */
static double peer_double(const hilock_codec *k, int64_t now_us, int64_t add_us)
{
    volatile int64_t now = now_us, add = add_us;
    volatile double d;
#ifdef HL_PLAT_FP_X87
    unsigned cw = hl_plat_fp_double_begin();
#endif
    d = peer_ops(k, now, add);
#ifdef HL_PLAT_FP_X87
    hl_plat_fp_double_end(cw);
#endif
    return d;
}

/* The shortest decimal that strtod reads back as d, in fixed notation with at least one
 * decimal: what Ruby's Float#to_s and Python's repr write (both David Gay's shortest mode;
 * both switch to an exponent only from 1e16, far above any stamp in seconds). The correctly
 * rounded p-digit value is the nearest p-digit candidate, so the first p that reads back is
 * the shortest; the one case where that differs (a power of two, whose lower neighbour is
 * nearer) is a whole number here, printed exactly. The digits are taken around whatever
 * decimal point the locale prints. Returns the length, or -1 if it does not fit. */
static int shortest(double d, char *out, size_t cap)
{
    char e[40], dig[24];
    int p, nd = 0, x, o = 0;
    const char *q;
    for (p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, d);
        if (strtod(e, NULL) == d) break;
    }
    for (q = e; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9' && nd < (int)sizeof dig) dig[nd++] = *q;
    if (*q != 'e' || nd == 0) return -1;
    x = atoi(q + 1);   /* d = dig[0].dig[1..] x 10^x, and d >= 1 here */
    if (x < 0 || x > 20 || (size_t)(nd + x + 4) > cap) return -1;
    for (int i = 0; i <= x; i++) out[o++] = i < nd ? dig[i] : '0';
    out[o++] = '.';
    if (nd <= x + 1) out[o++] = '0';
    for (int i = x + 1; i < nd; i++) out[o++] = dig[i];
    out[o] = '\0';
    return o;
}

hilock_status hl_codec_format_at(const hilock_codec *k, int64_t now_us, int64_t add_us, char *buf,
                                 size_t cap, int64_t *stamp_us)
{
    char tmp[HILOCK_CODEC_MAX + 32];
    int64_t unit, t;
    int n;
    if (buf && cap) buf[0] = '\0';
    if (!k || !buf || !hl_codec_valid(k) || add_us < 0 || now_us > STAMP_MAX_US - add_us)
        return HILOCK_EINVAL;
    t = now_us + add_us;
    if (t < STAMP_MIN_US || t >= STAMP_MAX_US) return HILOCK_EINVAL;
    unit = hl_codec_unit_us(k);
    if (hl_codec_float(k))
        n = shortest(peer_double(k, now_us, add_us), tmp, sizeof tmp);
    else
        n = snprintf(tmp, sizeof tmp, "%lld", (long long)(t / unit));
    if (n < 0) return HILOCK_EINVAL;
    if (k->decimals > 0) {
        /* the microseconds within the unit, digit by digit, then zeros: truncated, never
         * rounded up, so parse(format(t)) is t truncated to the codec's resolution */
        int64_t rem = t % unit, div = unit;
        tmp[n++] = '.';
        for (int d = 0; d < k->decimals; d++) {
            div /= 10;
            tmp[n++] = (char)('0' + (div > 0 ? rem / div : 0));
            if (div > 0) rem %= div;
        }
        tmp[n] = '\0';
    }
    if (k->suffix == HILOCK_SUFFIX_PID_THREAD)
        n += snprintf(tmp + n, sizeof tmp - (size_t)n, "-%ld-%ld", (long)getpid(), hl_plat_thread_id());
    if (n < 0 || (size_t)n >= cap || n >= HILOCK_CODEC_MAX) return HILOCK_EINVAL;
    /* what the value says, rounded down: the peers judge the value, not t (a float may lie
     * a fraction of a microsecond below t, or round out of the window parse accepts) */
    if (parse_stamp(k, tmp, (size_t)n, 0, &t) != HILOCK_OK) return HILOCK_EINVAL;
    memcpy(buf, tmp, (size_t)n + 1);
    if (stamp_us) *stamp_us = t;
    return HILOCK_OK;
}

hilock_status hilock_codec_format(const hilock_codec *k, int64_t stamp_us, char *buf, size_t cap)
{
    return hl_codec_format_at(k, stamp_us, 0, buf, cap, NULL);
}

int hilock_codec_expired(const hilock_codec *k, int64_t stamp_us, int64_t now_us)
{
    if (!hl_codec_valid(k)) return 0;
    /* integer fleets compare with a truncated now: time(), Date.now(). (Before 1970 there is
     * nothing to truncate: every stamp is later; and INT64_MIN must not overflow.) */
    if (k->decimals == 0 && now_us > 0) now_us -= now_us % hl_codec_unit_us(k);
    return stamp_us < now_us || (k->expired_if_equal && stamp_us == now_us);
}

void hl_codec_describe(const hilock_codec *k, char *buf, size_t cap)
{
    static const char *units[] = { "seconds", "milliseconds", "microseconds" };
    if (!hl_codec_valid(k)) {
        snprintf(buf, cap, "invalid codec");
        return;
    }
    if (hl_codec_float(k))
        snprintf(buf, cap, "float %s as %s writes them%s, expired at %s%s", units[k->unit],
                 k->decimals == HILOCK_DECIMALS_RUBY ? "Ruby" : "Python", k->plus_one ? ", +1" : "",
                 k->expired_if_equal ? "<=" : "<", k->suffix ? ", -pid-thread suffix" : "");
    else if (k->decimals)
        snprintf(buf, cap, "%s with %d decimals%s, expired at %s%s", units[k->unit], k->decimals,
                 k->plus_one ? ", +1" : "", k->expired_if_equal ? "<=" : "<",
                 k->suffix ? ", -pid-thread suffix" : "");
    else
        snprintf(buf, cap, "integer %s%s, expired at %s%s", units[k->unit], k->plus_one ? ", +1" : "",
                 k->expired_if_equal ? "<=" : "<", k->suffix ? ", -pid-thread suffix" : "");
}

const char *hl_codec_guess_unit(const char *s, size_t len)
{
    size_t n = 0;
    while (n < len && is_digit(s[n])) n++;
    if (n == 0 || (n < len && s[n] != '.' && s[n] != '-' && s[n] != ':')) return NULL;
    /* today: 10 digits of seconds, 13 of milliseconds, 16 of microseconds */
    if (n >= 9 && n <= 11) return "seconds";
    if (n >= 12 && n <= 14) return "milliseconds";
    if (n >= 15 && n <= 17) return "microseconds";
    return NULL;
}
