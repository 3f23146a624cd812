/* codec.c -- legacy value formats: parse, format, expiry and the named presets.
 *
 * Pure functions (no I/O, no allocation, no global state), so the parser can be fuzzed on
 * its own. Stamps are handled as integer microseconds since 1970: exact for every unit and
 * for up to 6 decimals of seconds, where the fleets' own clients would use doubles. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "codec.h"

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
    { "redis-objects",   { HILOCK_UNIT_S,  6, 1, 0, HILOCK_SUFFIX_NONE } },
    { "redis-py-2",      { HILOCK_UNIT_S,  2, 0, 0, HILOCK_SUFFIX_NONE } },
    { "ruby-redis-lock", { HILOCK_UNIT_S,  0, 1, 0, HILOCK_SUFFIX_PID_THREAD } },
};

static int is_digit(char ch) { return ch >= '0' && ch <= '9'; }

int hl_codec_valid(const hilock_codec *k)
{
    return k && k->unit >= HILOCK_UNIT_S && k->unit <= HILOCK_UNIT_US && k->decimals >= 0 &&
           k->decimals <= 6 && k->suffix >= HILOCK_SUFFIX_NONE && k->suffix <= HILOCK_SUFFIX_PID_THREAD;
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

hilock_status hilock_codec_parse(const hilock_codec *k, const char *s, size_t len, int64_t *stamp_us)
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
                finer = 1;   /* below 1 us: round up, a stamp is never read earlier than written */
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

hilock_status hilock_codec_format(const hilock_codec *k, int64_t stamp_us, char *buf, size_t cap)
{
    char tmp[HILOCK_CODEC_MAX + 32];
    int64_t unit;
    int n;
    if (buf && cap) buf[0] = '\0';
    if (!k || !buf || !hl_codec_valid(k) || stamp_us < STAMP_MIN_US || stamp_us >= STAMP_MAX_US)
        return HILOCK_EINVAL;
    unit = hl_codec_unit_us(k);
    n = snprintf(tmp, sizeof tmp, "%lld", (long long)(stamp_us / unit));
    if (k->decimals > 0) {
        /* the microseconds within the unit, digit by digit, then zeros: truncated, never
         * rounded up, so parse(format(t)) is t truncated to the codec's resolution */
        int64_t rem = stamp_us % unit, div = unit;
        tmp[n++] = '.';
        for (int d = 0; d < k->decimals; d++) {
            div /= 10;
            tmp[n++] = (char)('0' + (div > 0 ? rem / div : 0));
            if (div > 0) rem %= div;
        }
        tmp[n] = '\0';
    }
    if (k->suffix == HILOCK_SUFFIX_PID_THREAD)
        n += snprintf(tmp + n, sizeof tmp - (size_t)n, "-%ld-%ld", (long)getpid(), (long)gettid());
    if (n < 0 || (size_t)n >= cap || n >= HILOCK_CODEC_MAX) return HILOCK_EINVAL;
    memcpy(buf, tmp, (size_t)n + 1);
    return HILOCK_OK;
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
    if (k->decimals)
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
