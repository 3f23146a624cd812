/* SPDX-License-Identifier: BSD-3-Clause */
/* test_codec.c -- the legacy value codecs and presets, without a server: format, parse,
 * expiry at the boundaries, garbage, overflow, negative and huge values, options. */
#include <criterion/criterion.h>
#include <float.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hilock.h"
#include "hilock_legacy.h"
#include "../../legacy/codec.h"   /* hl_codec_format_at: the peers' own arithmetic */

#define T0 ((int64_t)1700000000123456)   /* 2023-11-14T22:13:20.123456Z */
#define MIN_US ((int64_t)946684800 * 1000000)
#define MAX_US ((int64_t)100000000000 * 1000000)

static hilock_codec preset(const char *name)
{
    hilock_codec k;
    memset(&k, 0xab, sizeof k);
    cr_assert_eq(hilock_codec_preset(name, &k), HILOCK_OK, "preset %s", name);
    return k;
}

static hilock_codec custom(hilock_unit u, int decimals, int plus_one, int eq, hilock_suffix sfx)
{
    hilock_codec k = { u, decimals, plus_one, eq, sfx };
    return k;
}

/* parse a C string; returns the status and writes *out (left untouched on failure) */
static hilock_status P(const hilock_codec *k, const char *s, int64_t *out)
{
    return hilock_codec_parse(k, s, strlen(s), out);
}

static void parses_to(const hilock_codec *k, const char *s, int64_t want)
{
    int64_t got = -7;
    cr_assert_eq(P(k, s, &got), HILOCK_OK, "\"%s\" should parse", s);
    cr_assert_eq(got, want, "\"%s\": got %lld, want %lld", s, (long long)got, (long long)want);
}

static void refuses(const hilock_codec *k, const char *s, size_t len)
{
    int64_t got = -7;
    cr_assert_eq(hilock_codec_parse(k, s, len, &got), HILOCK_EINVAL, "\"%.*s\" should be refused",
                 (int)len, s);
    cr_assert_eq(got, -7, "output written on failure");
}

static void formats_to(const hilock_codec *k, int64_t stamp, const char *want)
{
    char buf[HILOCK_CODEC_MAX];
    cr_assert_eq(hilock_codec_format(k, stamp, buf, sizeof buf), HILOCK_OK);
    cr_assert_str_eq(buf, want);
}

/* ---- presets ---- */

Test(codec_preset, every_fixed_name_has_its_format)
{
    hilock_codec k;
    k = preset("doc");
    cr_assert(k.unit == HILOCK_UNIT_S && k.decimals == 0 && k.plus_one && !k.expired_if_equal &&
              k.suffix == HILOCK_SUFFIX_NONE);
    k = preset("node-redis-lock");
    cr_assert(k.unit == HILOCK_UNIT_MS && k.decimals == 0 && k.plus_one && k.expired_if_equal &&
              k.suffix == HILOCK_SUFFIX_NONE);
    k = preset("jedis-lock");
    cr_assert(k.unit == HILOCK_UNIT_MS && k.decimals == 0 && k.plus_one && !k.expired_if_equal &&
              k.suffix == HILOCK_SUFFIX_NONE);
    k = preset("redis-objects");
    cr_assert(k.unit == HILOCK_UNIT_S && k.decimals == HILOCK_DECIMALS_RUBY && k.plus_one &&
              !k.expired_if_equal && k.suffix == HILOCK_SUFFIX_NONE);
    k = preset("redis-py-2");
    cr_assert(k.unit == HILOCK_UNIT_S && k.decimals == HILOCK_DECIMALS_PYTHON && !k.plus_one &&
              !k.expired_if_equal && k.suffix == HILOCK_SUFFIX_NONE);
    k = preset("ruby-redis-lock");
    cr_assert(k.unit == HILOCK_UNIT_S && k.decimals == 0 && k.plus_one && !k.expired_if_equal &&
              k.suffix == HILOCK_SUFFIX_PID_THREAD);
}

Test(codec_preset, unknown_or_null_name_is_einval_and_leaves_out_alone)
{
    const char *bad[] = { "", "Doc", "doc ", " doc", "node-redis-lock-0.0.9", "redis-lock", "jedis",
                          "redis_objects", "DOC", "doc\n" };
    hilock_codec k, before;
    memset(&k, 0x5a, sizeof k);
    before = k;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(hilock_codec_preset(bad[i], &k), HILOCK_EINVAL, "\"%s\"", bad[i]);
        cr_assert_eq(memcmp(&k, &before, sizeof k), 0);
    }
    cr_assert_eq(hilock_codec_preset(NULL, &k), HILOCK_EINVAL);
    cr_assert_eq(hilock_codec_preset("doc", NULL), HILOCK_EINVAL);
}

Test(codec_preset, default_options_carry_the_doc_codec)
{
    hilock_options o;
    hilock_codec d = preset("doc");
    hilock_options_init(&o);
    cr_assert_eq(memcmp(&o.codec, &d, sizeof d), 0);
    cr_assert_eq(o.skew_margin_ms, 0);
    cr_assert_eq(o.clock_offset_ms, 0);
    cr_assert_eq(o.legacy_pexpire, 0);
    cr_assert_eq(o.bridge, 0);
}

/* ---- format, per preset ---- */

Test(codec_format, doc_writes_integer_seconds_truncated)
{
    hilock_codec k = preset("doc");
    formats_to(&k, T0, "1700000000");
    formats_to(&k, 1700000000999999, "1700000000");
    formats_to(&k, 1700000001000000, "1700000001");
}

Test(codec_format, node_and_jedis_write_integer_milliseconds)
{
    hilock_codec n = preset("node-redis-lock"), j = preset("jedis-lock");
    formats_to(&n, T0, "1700000000123");
    formats_to(&j, T0, "1700000000123");
    formats_to(&n, 1700000000123999, "1700000000123");
}

/* What the real peers wrote for the same clock reading (microseconds), produced once with
 * Ruby 3.1 (redis-rb sends Float#to_s) and Python 2.7.18:
 *   ruby -e 'puts((Time.at(s, us, :usec) + timeout.to_f + 1).to_f.to_s)'   (redis-objects)
 *   python2 -c 'print(repr((float(s) + us * 0.000001) + timeout))'          (redis-py 2.8-2.9)
 * The stamp is the sum (for Python: with a whole-second timeout, no 2^n crossing). */
static const struct vec { int64_t stamp; const char *want; } ruby_vecs[] = {
    { 1795417238235215LL, "1795417238.2352152" },   /* the double lies below .235215 */
    { 1816822848057998LL, "1816822848.0579982" },
    { 1813796155059601LL, "1813796155.0596008" },
    { 2029237831396680LL, "2029237831.3966799" },
    { 1795417220480263LL, "1795417220.480263" },
    { 1700000001123456LL, "1700000001.123456" },
    { 1700000001000000LL, "1700000001.0" },         /* whole seconds keep ".0" */
    { 1795417239500000LL, "1795417239.5" },
    { 1921001599788450LL, "1921001599.78845" },
    { 946684801000001LL, "946684801.0000011" },
    { 2147483648999999LL, "2147483648.999999" },
    { 41161213483237668LL, "41161213483.23767" },   /* far future: fewer digits fit */
    { 43140962579888627LL, "43140962579.888626" },
}, python_vecs[] = {
    { 1795417237235215LL, "1795417237.235215" },
    { 1700000000000000LL, "1700000000.0" },
    { 1795417238500000LL, "1795417238.5" },
    { 1873872263581600LL, "1873872263.5816" },
    { 1803272017123920LL, "1803272017.12392" },
    { 946684800000001LL, "946684800.000001" },
    { 2147483647999999LL, "2147483647.999999" },
    { 55308141476690288LL, "55308141476.690285" },
    { 88394202860967544LL, "88394202860.96754" },
};

Test(codec_format, redis_objects_writes_rubys_shortest_float)
{
    hilock_codec k = preset("redis-objects");
    for (size_t i = 0; i < sizeof ruby_vecs / sizeof ruby_vecs[0]; i++)
        formats_to(&k, ruby_vecs[i].stamp, ruby_vecs[i].want);
}

Test(codec_format, redis_py_2_writes_pythons_repr)
{
    hilock_codec k = preset("redis-py-2");
    for (size_t i = 0; i < sizeof python_vecs / sizeof python_vecs[0]; i++)
        formats_to(&k, python_vecs[i].stamp, python_vecs[i].want);
}

Test(codec_format, python_adds_the_timeout_after_reading_the_clock)
{
    /* across 2^31 s the rounding of time.time() and of the sum differ: python2 -c
     * 'print(repr((float(2147483626) + 916345 * 0.000001) + 30))' */
    hilock_codec k = preset("redis-py-2");
    char buf[HILOCK_CODEC_MAX];
    int64_t stamp = 0;
    cr_assert_eq(hl_codec_format_at(&k, 2147483626916345LL, 30000000, buf, sizeof buf, &stamp), HILOCK_OK);
    cr_assert_str_eq(buf, "2147483656.9163446");
    cr_assert_eq(stamp, 2147483656916344LL, "our own stamp: the value written, rounded down");
    formats_to(&k, 2147483656916345LL, "2147483656.916345");   /* the sum read at once */
    cr_assert_eq(hl_codec_format_at(&k, 2147483618871404LL, 30000000, buf, sizeof buf, NULL), HILOCK_OK);
    cr_assert_str_eq(buf, "2147483648.8714037");
}

/* 2039-09-18 and 2106-02-07: past a signed (2038-01-19) and an unsigned 32-bit time_t; the
 * Python sum is python2 -c 'print(repr((float(4294967290) + 916345 * 0.000001) + 30))'. On a
 * 32-bit target the library runs on 64-bit time_t (docs/portability.md) and this must hold. */
Test(codec_format, stamps_past_2038_are_written_and_read_back)
{
    hilock_codec doc = preset("doc"), node = preset("node-redis-lock"), rb = preset("redis-objects");
    hilock_codec py = preset("redis-py-2");
    char buf[HILOCK_CODEC_MAX];
    int64_t stamp = 0;
    formats_to(&doc, 2200000000123456LL, "2200000000");
    formats_to(&node, 2200000000123456LL, "2200000000123");
    formats_to(&rb, 2200000000123456LL, "2200000000.123456");
    formats_to(&py, 2200000000123456LL, "2200000000.123456");
    parses_to(&doc, "2200000000", 2200000000000000LL);
    parses_to(&node, "2200000000123", 2200000000123000LL);
    parses_to(&py, "2200000000.123456", 2200000000123456LL);
    cr_assert_not(hilock_codec_expired(&doc, 2200000000000000LL, 2200000000999999LL));
    cr_assert(hilock_codec_expired(&doc, 2200000000000000LL, 2200000001000000LL));
    cr_assert_eq(hl_codec_format_at(&py, 4294967290916345LL, 30000000, buf, sizeof buf, &stamp), HILOCK_OK);
    cr_assert_str_eq(buf, "4294967320.916346");
    cr_assert_eq(stamp, 4294967320916346LL);
}

Test(codec_format, float_styles_need_seconds)
{
    hilock_codec k = custom(HILOCK_UNIT_MS, HILOCK_DECIMALS_RUBY, 1, 0, HILOCK_SUFFIX_NONE);
    char buf[HILOCK_CODEC_MAX];
    int64_t got = -7;
    cr_assert_eq(hilock_codec_format(&k, T0, buf, sizeof buf), HILOCK_EINVAL);
    cr_assert_eq(hilock_codec_parse(&k, "1700000000123.5", 15, &got), HILOCK_EINVAL);
    k.decimals = -3;
    k.unit = HILOCK_UNIT_S;
    cr_assert_eq(hilock_codec_format(&k, T0, buf, sizeof buf), HILOCK_EINVAL);
    /* a stamp whose double rounds out of the window parse accepts is not written */
    k.decimals = HILOCK_DECIMALS_RUBY;
    cr_assert_eq(hilock_codec_format(&k, MAX_US - 1, buf, sizeof buf), HILOCK_EINVAL);
    cr_assert_str_eq(buf, "");
}

Test(codec_format, ruby_gem_appends_pid_and_thread)
{
    hilock_codec k = preset("ruby-redis-lock");
    char want[64];
    snprintf(want, sizeof want, "1700000000-%ld-%ld", (long)getpid(), (long)gettid());
    formats_to(&k, T0, want);
}

Test(codec_format, other_units_and_decimals)
{
    hilock_codec us = custom(HILOCK_UNIT_US, 0, 1, 0, HILOCK_SUFFIX_NONE);
    hilock_codec us2 = custom(HILOCK_UNIT_US, 2, 1, 0, HILOCK_SUFFIX_NONE);
    hilock_codec ms3 = custom(HILOCK_UNIT_MS, 3, 1, 0, HILOCK_SUFFIX_NONE);
    hilock_codec ms6 = custom(HILOCK_UNIT_MS, 6, 1, 0, HILOCK_SUFFIX_NONE);
    hilock_codec s1 = custom(HILOCK_UNIT_S, 1, 1, 0, HILOCK_SUFFIX_NONE);
    formats_to(&us, T0, "1700000000123456");
    formats_to(&us2, T0, "1700000000123456.00");
    formats_to(&ms3, T0, "1700000000123.456");
    formats_to(&ms6, T0, "1700000000123.456000");
    formats_to(&s1, T0, "1700000000.1");
}

Test(codec_format, range_edges)
{
    hilock_codec k = preset("doc");
    char buf[HILOCK_CODEC_MAX];
    formats_to(&k, MIN_US, "946684800");
    formats_to(&k, MAX_US - 1, "99999999999");
    cr_assert_eq(hilock_codec_format(&k, MIN_US - 1, buf, sizeof buf), HILOCK_EINVAL);
    cr_assert_str_eq(buf, "");
    cr_assert_eq(hilock_codec_format(&k, MAX_US, buf, sizeof buf), HILOCK_EINVAL);
}

Test(codec_format, negative_huge_and_zero_stamps_are_einval)
{
    const int64_t bad[] = { 0, -1, -T0, INT64_MIN, INT64_MAX, INT64_MAX / 2, 1 };
    hilock_codec k = preset("node-redis-lock");
    char buf[HILOCK_CODEC_MAX];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        strcpy(buf, "junk");
        cr_assert_eq(hilock_codec_format(&k, bad[i], buf, sizeof buf), HILOCK_EINVAL, "%lld", (long long)bad[i]);
        cr_assert_str_eq(buf, "");
    }
}

Test(codec_format, small_buffer_null_and_bad_codec_are_einval)
{
    hilock_codec k = preset("doc"), bad;
    char buf[HILOCK_CODEC_MAX];
    cr_assert_eq(hilock_codec_format(&k, T0, buf, 10), HILOCK_EINVAL);   /* 10 digits + NUL */
    cr_assert_str_eq(buf, "");
    cr_assert_eq(hilock_codec_format(&k, T0, buf, 11), HILOCK_OK);
    cr_assert_str_eq(buf, "1700000000");
    cr_assert_eq(hilock_codec_format(&k, T0, buf, 0), HILOCK_EINVAL);
    cr_assert_eq(hilock_codec_format(&k, T0, NULL, 64), HILOCK_EINVAL);
    cr_assert_eq(hilock_codec_format(NULL, T0, buf, sizeof buf), HILOCK_EINVAL);
    bad = k;
    bad.unit = (hilock_unit)3;
    cr_assert_eq(hilock_codec_format(&bad, T0, buf, sizeof buf), HILOCK_EINVAL);
    bad = k;
    bad.decimals = 7;
    cr_assert_eq(hilock_codec_format(&bad, T0, buf, sizeof buf), HILOCK_EINVAL);
    bad = k;
    bad.decimals = -3;
    cr_assert_eq(hilock_codec_format(&bad, T0, buf, sizeof buf), HILOCK_EINVAL);
    bad = k;
    bad.suffix = (hilock_suffix)2;
    cr_assert_eq(hilock_codec_format(&bad, T0, buf, sizeof buf), HILOCK_EINVAL);
}

/* ---- parse, per preset ---- */

Test(codec_parse, doc_reads_seconds_and_tolerates_a_fraction)
{
    hilock_codec k = preset("doc");
    parses_to(&k, "1700000000", 1700000000000000);
    parses_to(&k, "1700000000.5", 1700000000500000);
    parses_to(&k, "1700000000.123456", 1700000000123456);
    parses_to(&k, "0001700000000", 1700000000000000);   /* leading zeros: still a number */
}

Test(codec_parse, a_fraction_finer_than_a_microsecond_rounds_up)
{
    hilock_codec k = preset("redis-objects");
    parses_to(&k, "1700000000.1234561", 1700000000123457);
    parses_to(&k, "1700000000.1234560000", 1700000000123456);
    parses_to(&k, "1700000000.0000000001", 1700000000000001);
    hilock_codec ms = preset("jedis-lock");
    parses_to(&ms, "1700000000123.4", 1700000000123400);
    parses_to(&ms, "1700000000123.0001", 1700000000123001);
}

Test(codec_parse, node_and_jedis_read_milliseconds)
{
    hilock_codec n = preset("node-redis-lock"), j = preset("jedis-lock");
    parses_to(&n, "1700000000123", 1700000000123000);
    parses_to(&j, "1700000000123", 1700000000123000);
}

Test(codec_parse, redis_py_2_reads_int_and_float_seconds)
{
    hilock_codec k = preset("redis-py-2");
    parses_to(&k, "1700000000.12", 1700000000120000);
    parses_to(&k, "1700000000", 1700000000000000);
    parses_to(&k, "2147483649", (int64_t)2147483649 * 1000000);   /* its "no timeout" value */
}

Test(codec_parse, redis_py_2_reads_the_one_decimal_of_2_4_to_2_7_and_the_repr_of_2_8)
{
    hilock_codec k = preset("redis-py-2");
    parses_to(&k, "1795417238.0", 1795417238000000);       /* float(int(time.time()) + timeout) */
    parses_to(&k, "2147483649.0", (int64_t)2147483649 * 1000000);
    parses_to(&k, "1795417238.2352152", 1795417238235216); /* repr: never read earlier */
    parses_to(&k, "1795417237.235215", 1795417237235215);
}

Test(codec_parse, ruby_gem_reads_its_owner_suffixes)
{
    hilock_codec k = preset("ruby-redis-lock");
    parses_to(&k, "1700000000-123-456", 1700000000000000);
    parses_to(&k, "1700000000-123", 1700000000000000);                /* gem 0.1 */
    parses_to(&k, "1700000000", 1700000000000000);                    /* a bridge writer */
    parses_to(&k, "1700000000.5-1-2", 1700000000500000);
    parses_to(&k, "1700000000-12345678901234567890-1", 1700000000000000);
    refuses(&k, "1700000000-", 11);
    refuses(&k, "1700000000-abc", 14);
    refuses(&k, "1700000000-1-2-3", 16);
    refuses(&k, "1700000000--1", 13);
    refuses(&k, "1700000000-1-", 13);
    refuses(&k, "1700000000:1", 12);
    refuses(&k, "1700000000-123456789012345678901", 32);   /* 21 digits */
}

Test(codec_parse, a_suffix_is_garbage_for_codecs_without_one)
{
    const char *names[] = { "doc", "node-redis-lock", "jedis-lock", "redis-objects", "redis-py-2" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        hilock_codec k = preset(names[i]);
        refuses(&k, "1700000000-123-456", 18);
        refuses(&k, "1700000000123-1", 15);
        refuses(&k, "1700000000123:uuid", 18);
    }
}

Test(codec_parse, range_boundaries_per_unit)
{
    hilock_codec s = preset("doc"), ms = preset("jedis-lock");
    hilock_codec us = custom(HILOCK_UNIT_US, 0, 1, 0, HILOCK_SUFFIX_NONE);
    parses_to(&s, "946684800", MIN_US);
    refuses(&s, "946684799", 9);
    refuses(&s, "946684799.999999", 16);
    parses_to(&s, "99999999999", MAX_US - 1000000);
    parses_to(&s, "99999999999.999999", MAX_US - 1);
    refuses(&s, "99999999999.9999991", 19);   /* rounds up onto the limit */
    refuses(&s, "100000000000", 12);
    parses_to(&ms, "946684800000", MIN_US);
    refuses(&ms, "946684799999", 12);
    parses_to(&ms, "99999999999999", MAX_US - 1000);
    refuses(&ms, "100000000000000", 15);
    parses_to(&us, "946684800000000", MIN_US);
    refuses(&us, "946684799999999", 15);
    parses_to(&us, "99999999999999999", MAX_US - 1);
    refuses(&us, "100000000000000000", 18);
}

Test(codec_parse, another_unit_is_not_a_stamp)
{
    hilock_codec s = preset("doc"), ms = preset("node-redis-lock");
    hilock_codec us = custom(HILOCK_UNIT_US, 0, 1, 0, HILOCK_SUFFIX_NONE);
    refuses(&ms, "1700000000", 10);          /* seconds under a ms codec: 1970, would be stolen */
    refuses(&s, "1700000000123", 13);        /* ms under a seconds codec: year 55843 */
    refuses(&ms, "1700000000123456", 16);    /* us under a ms codec */
    refuses(&us, "1700000000123", 13);       /* ms under a us codec */
}

Test(codec_parse, tokens_and_small_numbers_are_not_stamps)
{
    const char *bad[] = { "0", "1", "123456", "c0ffee-4f1d-token", "4f1d2a7b9c0e11aa22bb33cc44dd55ee",
                          "12345678901234567890123456789012" };
    const char *names[] = { "doc", "node-redis-lock", "jedis-lock", "redis-objects", "redis-py-2",
                            "ruby-redis-lock" };
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
        hilock_codec k = preset(names[n]);
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) refuses(&k, bad[i], strlen(bad[i]));
    }
}

Test(codec_parse, garbage_is_refused)
{
    const char *bad[] = { "", " ", " 1700000000", "1700000000 ", "+1700000000", "-1700000000",
                          "1.7e9", "1700000000e0", "0x6553f100", "abc", "1700000000abc", "1700000000.",
                          ".5", "1700000000..5", "1700000000.5.5", "1,700,000,000", "1_700_000_000",
                          "inf", "nan", "Infinity", "1700000000\n", "\t1700000000", "1700000000\r\n",
                          "\xd9\xa1\xd9\xa7", "1700000000.-1", "١٧٠٠٠٠٠٠٠٠" };
    hilock_codec k = preset("doc");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) refuses(&k, bad[i], strlen(bad[i]));
    refuses(&k, "1700000000\0" "5", 12);   /* an embedded NUL */
    refuses(&k, "\0" "1700000000", 11);
}

Test(codec_parse, reads_only_len_bytes)
{
    hilock_codec k = preset("doc");
    int64_t got = 0;
    /* the bytes after len are garbage and must not be read as part of the value */
    cr_assert_eq(hilock_codec_parse(&k, "1700000000junk", 10, &got), HILOCK_OK);
    cr_assert_eq(got, 1700000000000000);
    cr_assert_eq(hilock_codec_parse(&k, "17000000009", 10, &got), HILOCK_OK);
    cr_assert_eq(got, 1700000000000000);
}

Test(codec_parse, overflow_is_refused)
{
    const char *bad[] = { "9223372036854775807", "9223372036854775808", "18446744073709551616",
                          "99999999999999999999999999999999999999", "170000000000000000000000",
                          "9223372036854775807.9" };
    const char *names[] = { "doc", "node-redis-lock", "redis-py-2" };
    hilock_codec us = custom(HILOCK_UNIT_US, 6, 1, 0, HILOCK_SUFFIX_NONE);
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
        hilock_codec k = preset(names[n]);
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) refuses(&k, bad[i], strlen(bad[i]));
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) refuses(&us, bad[i], strlen(bad[i]));
}

Test(codec_parse, long_values_are_refused)
{
    hilock_codec k = preset("redis-objects");
    char v[200];
    memset(v, '0', sizeof v);
    memcpy(v + 40, "1700000000.5", 12);   /* 52 bytes: a number with leading zeros, fine */
    int64_t got;
    cr_assert_eq(hilock_codec_parse(&k, v, 52, &got), HILOCK_OK);
    cr_assert_eq(got, 1700000000500000);
    cr_assert_eq(hilock_codec_parse(&k, v, HILOCK_CODEC_MAX - 1, &got), HILOCK_OK);   /* fraction zeros */
    refuses(&k, v, HILOCK_CODEC_MAX);
    refuses(&k, v, sizeof v);
}

Test(codec_parse, null_arguments_and_bad_codecs_are_einval)
{
    hilock_codec k = preset("doc"), bad;
    int64_t got = -7;
    cr_assert_eq(hilock_codec_parse(NULL, "1700000000", 10, &got), HILOCK_EINVAL);
    cr_assert_eq(hilock_codec_parse(&k, NULL, 10, &got), HILOCK_EINVAL);
    cr_assert_eq(hilock_codec_parse(&k, "1700000000", 10, NULL), HILOCK_EINVAL);
    cr_assert_eq(hilock_codec_parse(&k, "1700000000", 0, &got), HILOCK_EINVAL);
    bad = k;
    bad.unit = (hilock_unit)-1;
    refuses(&bad, "1700000000", 10);
    bad = k;
    bad.decimals = 99;
    refuses(&bad, "1700000000", 10);
    bad = k;
    bad.suffix = (hilock_suffix)77;
    refuses(&bad, "1700000000", 10);
    cr_assert_eq(got, -7);
}

/* ---- format and parse together ---- */

Test(codec_roundtrip, parse_reads_back_the_truncated_stamp_for_every_codec)
{
    const char *names[] = { "doc", "node-redis-lock", "jedis-lock", "redis-objects", "redis-py-2",
                            "ruby-redis-lock" };
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (size_t n = 0; n < sizeof names / sizeof names[0] + 18; n++) {
        hilock_codec k;
        if (n < sizeof names / sizeof names[0]) k = preset(names[n]);
        else k = custom((hilock_unit)(n % 3), (int)(n % 7), 1, 0, HILOCK_SUFFIX_NONE);
        int64_t res = (k.unit == HILOCK_UNIT_S ? 1000000 : k.unit == HILOCK_UNIT_MS ? 1000 : 1);
        for (int d = 0; d < k.decimals && res > 1; d++) res /= 10;
        if (k.decimals < 0) continue;   /* the float styles: codec_roundtrip/floats */
        for (int i = 0; i < 5000; i++) {
            char buf[HILOCK_CODEC_MAX];
            int64_t s, back = 0;
            x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
            s = MIN_US + (int64_t)((x * 0x2545f4914f6cdd1dULL) % (uint64_t)(MAX_US - MIN_US));
            if (i == 0) s = MIN_US;
            if (i == 1) s = MAX_US - 1;
            cr_assert_eq(hilock_codec_format(&k, s, buf, sizeof buf), HILOCK_OK);
            cr_assert_eq(hilock_codec_parse(&k, buf, strlen(buf), &back), HILOCK_OK, "%s", buf);
            cr_assert_eq(back, s - s % res, "codec %zu: %lld -> \"%s\" -> %lld", n, (long long)s, buf,
                         (long long)back);
        }
    }
}

Test(codec_roundtrip, floats_read_back_within_their_double_and_never_earlier)
{
    const char *names[] = { "redis-objects", "redis-py-2" };
    uint64_t x = 0x243f6a8885a308d3ULL;
    for (size_t n = 0; n < 2; n++) {
        hilock_codec k = preset(names[n]);
        for (int i = 0; i < 20000; i++) {
            char buf[HILOCK_CODEC_MAX];
            int64_t s, back = 0, own = 0;
            double d, ulp_us;
            x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
            s = MIN_US + (int64_t)((x * 0x2545f4914f6cdd1dULL) % (uint64_t)(MAX_US - MIN_US));
            if (i % 2) s = 1600000000000000 + s % 500000000000000;   /* mostly today */
            if (i == 0) s = MIN_US;
            if (i == 1) s = MAX_US - 100;   /* (MAX_US - 1's double is 1e11: outside) */
            cr_assert_eq(hl_codec_format_at(&k, s, 0, buf, sizeof buf, &own), HILOCK_OK);
            cr_assert_eq(hilock_codec_parse(&k, buf, strlen(buf), &back), HILOCK_OK, "%s", buf);
            d = strtod(buf, NULL);
            for (ulp_us = DBL_EPSILON * 1e6; ulp_us * 2 <= d * DBL_EPSILON * 1e6;) ulp_us *= 2;
            /* the value written is the peer's double: within about one ulp of the stamp */
            cr_assert(llabs(back - s) <= (long long)(2 * ulp_us) + 1, "%lld -> \"%s\" -> %lld",
                      (long long)s, buf, (long long)back);
            /* parse rounds up (others' stamps), our own stamp rounds down: at most 1 us apart */
            cr_assert(own <= back && back - own <= 1, "%s: own %lld, parsed %lld", buf,
                      (long long)own, (long long)back);
            cr_assert(strchr(buf, '.') && buf[strlen(buf) - 1] != '.', "%s", buf);
        }
    }
}

/* ---- expiry ---- */

Test(codec_expired, integer_seconds_compare_with_a_truncated_now)
{
    hilock_codec lt = preset("doc"), le = preset("doc");
    int64_t s = 1700000000000000;
    le.expired_if_equal = 1;
    /* anywhere within the stamp's own second, now truncates to the stamp: equal */
    cr_assert_not(hilock_codec_expired(&lt, s, s));
    cr_assert_not(hilock_codec_expired(&lt, s, s + 999999));
    cr_assert(hilock_codec_expired(&le, s, s));
    cr_assert(hilock_codec_expired(&le, s, s + 999999));
    cr_assert(hilock_codec_expired(&lt, s, s + 1000000));
    cr_assert_not(hilock_codec_expired(&le, s, s - 1));
    cr_assert_not(hilock_codec_expired(&lt, s, s - 1));
}

Test(codec_expired, node_is_le_and_jedis_is_lt_at_the_exact_millisecond)
{
    hilock_codec n = preset("node-redis-lock"), j = preset("jedis-lock");
    int64_t s = 1700000000123000;
    cr_assert(hilock_codec_expired(&n, s, s));          /* held iff stamp > Date.now() */
    cr_assert(hilock_codec_expired(&n, s, s + 999));
    cr_assert_not(hilock_codec_expired(&n, s, s - 1));
    cr_assert_not(hilock_codec_expired(&j, s, s));      /* parseLong(v) < now */
    cr_assert_not(hilock_codec_expired(&j, s, s + 999));
    cr_assert(hilock_codec_expired(&j, s, s + 1000));
}

Test(codec_expired, decimal_codecs_compare_with_the_full_now)
{
    hilock_codec k = preset("redis-objects"), py = preset("redis-py-2");
    int64_t s = 1700000000123456;
    cr_assert_not(hilock_codec_expired(&k, s, s));
    cr_assert(hilock_codec_expired(&k, s, s + 1));
    cr_assert_not(hilock_codec_expired(&py, 1700000000120000, 1700000000120000));
    cr_assert(hilock_codec_expired(&py, 1700000000120000, 1700000000120001));
}

Test(codec_expired, invalid_codec_or_odd_now_means_live)
{
    hilock_codec bad = preset("doc");
    bad.unit = (hilock_unit)9;
    cr_assert_not(hilock_codec_expired(NULL, 1700000000000000, INT64_MAX));
    cr_assert_not(hilock_codec_expired(&bad, 1700000000000000, INT64_MAX));
    hilock_codec k = preset("doc");
    cr_assert_not(hilock_codec_expired(&k, 1700000000000000, -5));
    cr_assert_not(hilock_codec_expired(&k, 1700000000000000, INT64_MIN));
    cr_assert(hilock_codec_expired(&k, 1700000000000000, INT64_MAX));
}

/* ---- the options that go with the codecs (validated without a server) ---- */

static hilock_status make(hilock_options *o)
{
    hilock_client *c = (hilock_client *)1;
    hilock_status st = hilock_client_new(o, &c);
    if (st == HILOCK_OK) hilock_client_free(c);
    else cr_assert_null(c);
    return st;
}

Test(codec_options, legacy_options_are_validated)
{
    const char *one[] = { "redis://127.0.0.1:1" }, *two[] = { "redis://127.0.0.1:1", "redis://127.0.0.1:2" };
    hilock_options o;
    hilock_options_init(&o);
    o.servers = one;
    o.nservers = 1;
    cr_assert_eq(make(&o), HILOCK_OK);
    o.skew_margin_ms = -1;
    cr_assert_eq(make(&o), HILOCK_EINVAL);
    cr_assert(strstr(hilock_last_config_error(), "skew_margin_ms"));
    o.skew_margin_ms = 3600001;
    cr_assert_eq(make(&o), HILOCK_EINVAL);
    o.skew_margin_ms = 3600000;
    cr_assert_eq(make(&o), HILOCK_OK);
    o.clock_offset_ms = 86400001;
    cr_assert_eq(make(&o), HILOCK_EINVAL);
    cr_assert(strstr(hilock_last_config_error(), "clock_offset_ms"));
    o.clock_offset_ms = -86400001;
    cr_assert_eq(make(&o), HILOCK_EINVAL);
    o.clock_offset_ms = -86400000;
    cr_assert_eq(make(&o), HILOCK_OK);
    o.legacy_pexpire = 2;
    cr_assert_eq(make(&o), HILOCK_EINVAL);
    cr_assert(strstr(hilock_last_config_error(), "legacy_pexpire"));
    o.legacy_pexpire = 1;
    o.codec.decimals = 7;
    cr_assert_eq(make(&o), HILOCK_EINVAL);
    o.codec.decimals = HILOCK_DECIMALS_PYTHON;
    o.codec.unit = HILOCK_UNIT_MS;
    cr_assert_eq(make(&o), HILOCK_EINVAL);
    cr_assert(strstr(hilock_last_config_error(), "HILOCK_UNIT_S"));
    o.codec.unit = HILOCK_UNIT_S;
    cr_assert_eq(make(&o), HILOCK_OK);
    o.codec.decimals = -3;
    cr_assert_eq(make(&o), HILOCK_EINVAL);
    o.codec.decimals = 0;
    o.bridge = 1;
    cr_assert_eq(make(&o), HILOCK_OK);
    o.servers = two;
    o.nservers = 2;
    cr_assert_eq(make(&o), HILOCK_EINVAL);
    cr_assert(strstr(hilock_last_config_error(), "bridge"));
    o.bridge = 0;
    cr_assert_eq(make(&o), HILOCK_OK);
}
