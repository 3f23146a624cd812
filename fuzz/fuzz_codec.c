/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_codec.c -- libFuzzer target for the legacy value parser (legacy/codec.c,
 * hilock_codec_parse) and its companions format and expired.
 *
 * Input: byte 0 picks the codec (high bit set: one of the six presets; else raw fields,
 * including out-of-range ones the parser must refuse), byte 1 the suffix, and byte 2 an
 * offset for the expiry probe; the rest is the stored value, in a buffer of exactly its
 * length (no NUL: ASan catches a read past it). Checked promises (hilock_legacy.h):
 *   - OK or EINVAL only; an invalid codec is EINVAL; *stamp_us untouched on EINVAL;
 *   - OK only for digits [ "." digits ] [ owner suffix ] with a stamp in the plausible window;
 *   - format(stamp) is a short NUL-terminated string that parses back to the stamp truncated
 *     to the codec's resolution (never later than the stamp), and formats identically; for
 *     the Ruby/Python float styles (the peer's double, shortest repr) it parses back to
 *     within two ulps of the stamp, or format refuses a stamp whose double leaves the window;
 *   - expired() is monotone in time: once expired, expired a microsecond later; a stamp two
 *     units in the future is live, two units in the past expired. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "hilock_legacy.h"

#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "fuzz_codec: %s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
    abort(); } } while (0)

static const char *const presets[] = { "doc", "node-redis-lock", "jedis-lock", "redis-objects",
                                       "redis-py-2", "ruby-redis-lock" };

#define STAMP_MIN_US ((int64_t)946684800 * 1000000)
#define STAMP_MAX_US ((int64_t)100000000000 * 1000000)

static int shape_ok(const hilock_codec *k, const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    if (i == 0) return 0;
    if (i < n && s[i] == '.') {
        size_t st = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        if (i == st) return 0;
    }
    if (i == n) return 1;
    if (k->suffix != HILOCK_SUFFIX_PID_THREAD) return 0;
    for (; i < n; i++)
        if (s[i] != '-' && !(s[i] >= '0' && s[i] <= '9')) return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    hilock_codec k;
    int64_t stamp = 7, s2 = 7, s3 = 7, unit, res, probe;
    char buf[HILOCK_CODEC_MAX], buf2[HILOCK_CODEC_MAX], *v;
    size_t n;
    hilock_status st;
    if (size < 3) return 0;
    memset(&k, 0, sizeof k);
    if (data[0] & 0x80) {
        CHECK(hilock_codec_preset(presets[data[0] % 6], &k) == HILOCK_OK);
    } else {
        k.unit = (hilock_unit)(data[0] % 4);              /* 3: invalid */
        k.decimals = (data[0] >> 2) % 8;                  /* 7: invalid */
        if (k.decimals == 7 && (data[1] & 4)) k.decimals = (data[1] & 8) ? HILOCK_DECIMALS_RUBY
                                                                          : HILOCK_DECIMALS_PYTHON;
        k.plus_one = (data[0] >> 5) & 1;
        k.expired_if_equal = (data[0] >> 6) & 1;
        k.suffix = (hilock_suffix)(data[1] % 3);          /* 2: invalid */
    }
    n = size - 3;
    v = malloc(n ? n : 1);
    if (!v) return 0;
    memcpy(v, data + 3, n);

    st = hilock_codec_parse(&k, v, n, &stamp);
    CHECK(st == HILOCK_OK || st == HILOCK_EINVAL);
    if (!hl_codec_valid(&k)) CHECK(st == HILOCK_EINVAL);
    if (st != HILOCK_OK) {
        CHECK(stamp == 7);
        free(v);
        return 0;
    }
    CHECK(n < HILOCK_CODEC_MAX && shape_ok(&k, v, n));
    CHECK(stamp >= STAMP_MIN_US && stamp < STAMP_MAX_US);

    unit = hl_codec_unit_us(&k);
    res = hl_codec_res_us(&k);
    if (hl_codec_float(&k)) {
        /* ulp of a stamp below 1e11 s: <= 2^-16 s, about 15.3 us */
        int64_t ulp = stamp < ((int64_t)1 << 32) * 1000000 ? 1 : 16, own = 7;
        st = hl_codec_format_at(&k, stamp, 0, buf, sizeof buf, &own);
        if (st != HILOCK_OK) {
            CHECK(st == HILOCK_EINVAL && (stamp < STAMP_MIN_US + 16 || stamp > STAMP_MAX_US - 16) &&
                  buf[0] == '\0');
            free(v);
            return 0;
        }
        CHECK(hilock_codec_parse(&k, buf, strlen(buf), &s2) == HILOCK_OK);
        CHECK(s2 - stamp <= 2 * ulp && stamp - s2 <= 2 * ulp && own <= s2 && s2 - own <= 1);
    } else {
        CHECK(hilock_codec_format(&k, stamp, buf, sizeof buf) == HILOCK_OK);
        CHECK(memchr(buf, '\0', sizeof buf) != NULL);
        CHECK(hilock_codec_parse(&k, buf, strlen(buf), &s2) == HILOCK_OK);
        CHECK(s2 <= stamp && stamp - s2 < res);
        CHECK(hilock_codec_format(&k, s2, buf2, sizeof buf2) == HILOCK_OK && !strcmp(buf, buf2));
        CHECK(hilock_codec_parse(&k, buf2, strlen(buf2), &s3) == HILOCK_OK && s3 == s2);
    }

    CHECK(!hilock_codec_expired(&k, s2, s2 - 2 * unit));
    CHECK(hilock_codec_expired(&k, s2, s2 + 2 * unit));
    probe = s2 + ((int64_t)data[2] - 128) * (unit / 64 + 1);
    if (hilock_codec_expired(&k, s2, probe)) CHECK(hilock_codec_expired(&k, s2, probe + 1));
    free(v);
    return 0;
}
