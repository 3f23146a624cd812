/* SPDX-License-Identifier: BSD-3-Clause */
/* test_inventory.c -- `hilock inventory` and `hilock inspect` ($(B)/hilock, run as a user runs
 * it) against a real redis-server seeded with thousands of keys: every preset's values with
 * and without TTL, passed and live stamps, modern and legacy locks made by the library, bridge
 * locks, values no preset reads, hashes and lists, keys that need JSON escaping. Asserts the
 * summary's counts, exact JSON lines, the inspect views, every master of a Redlock list, a
 * master that is down, Ctrl-C between pages, and that nothing was written. */
#include <criterion/criterion.h>
#include <errno.h>   /* program_invocation_short_name */
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checks.h"
#include "clients.h"
#include "fixture.h"
#include "hilock.h"
#include "hilock_inspect.h"
#include "hilock_legacy.h"
#include "sentinel_fixture.h"

static char bin[PATH_MAX];

/* $(B)/tests/test_x -> $(B)/hilock */
static void find_bin(void)
{
    cr_assert_eq(hlt_built_bin(bin, sizeof bin, "hilock"), 0, "%s not built", bin);
}

typedef struct run_out {
    int  status;        /* exit status as a shell shows it; -1: did not end in time */
    char out[1 << 20];  /* stdout */
    char err[8192];     /* stderr */
} run_out;

static pid_t spawn_hilock(hlt_redis *r, const char *const *args)
{
    return hlt_spawn_to(bin, args, NULL, hlt_path(r, "out.txt"), hlt_path(r, "err.txt"));
}

/* Its status (-1: did not end within limit_ms, killed), stdout and stderr. */
static void collect(hlt_redis *r, pid_t pid, long limit_ms, run_out *res)
{
    res->status = hlt_reap(pid, limit_ms);
    hlt_read_file(hlt_path(r, "out.txt"), res->out, sizeof res->out);
    hlt_read_file(hlt_path(r, "err.txt"), res->err, sizeof res->err);
}

static run_out *run(hlt_redis *r, const char *const *args)
{
    run_out *res = malloc(sizeof *res);
    cr_assert_not_null(res);
    collect(r, spawn_hilock(r, args), 30000, res);
    return res;
}

/* The section of a summary about one family: from its line to the next family's. */
static char *section(const char *out, const char *family)
{
    char head[300], *s, *end;
    snprintf(head, sizeof head, "\nfamily \"%s\"", family);
    s = strstr(out, head);
    cr_assert_not_null(s, "no family %s in:\n%s", family, out);
    s = strdup(s + 1);
    if ((end = strstr(s, "\nfamily "))) *end = '\0';
    return s;
}

/* Lines of s (that contain needle, if given). */
static int count_lines(const char *s, const char *needle)
{
    int n = 0;
    while (*s) {
        const char *nl = strchr(s, '\n'), *end = nl ? nl : s + strlen(s), *hit = needle ? strstr(s, needle) : s;
        n += hit && hit < end;
        s = nl ? nl + 1 : end;
    }
    return n;
}

/* Every line of out is one JSON value, as a strict parser (python3's json) reads it. */
static void assert_json_lines(hlt_redis *r, const char *out)
{
    char file[400], cmd[1000];
    FILE *f;
    if (system("command -v python3 >/dev/null 2>&1") != 0) {
        cr_log_warn("no python3: the JSON lines are not parsed");
        return;
    }
    snprintf(file, sizeof file, "%s/out.json", r->dir);
    cr_assert_not_null(f = fopen(file, "w"));
    fputs(out, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "python3 -c 'import json, sys\nfor l in sys.stdin: json.loads(l)' < %s", file);
    cr_assert_eq(system(cmd), 0, "a line is not valid JSON");
}

/* ---- seeding ---- */

static int64_t wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* SETs pipelined on the fixture's connection: key pattern with %d, values from a codec. */
static void put(hlt_redis *r, const char *key, size_t klen, const char *v, size_t vlen, long long px)
{
    redisReply *rep;
    if (!r->cli) freeReplyObject(hlt_cmd(r, "PING"));   /* open the fixture's connection */
    if (px > 0) redisAppendCommand(r->cli, "SET %b %b PX %lld", key, klen, v, vlen, px);
    else redisAppendCommand(r->cli, "SET %b %b", key, klen, v, vlen);
    cr_assert_eq(redisGetReply(r->cli, (void **)&rep), REDIS_OK);
    cr_assert_eq(rep->type, REDIS_REPLY_STATUS);
    freeReplyObject(rep);
}

static void seed_stamps(hlt_redis *r, const char *prefix, const char *preset, int n, int64_t offset_us,
                        long long px)
{
    hilock_codec k;
    int64_t now = wall_us();
    cr_assert_eq(hilock_codec_preset(preset, &k), HILOCK_OK);
    for (int i = 0; i < n; i++) {
        char key[64], v[HILOCK_CODEC_MAX];
        int kl = snprintf(key, sizeof key, "%s%s%d", prefix, offset_us < 0 ? "old" : "new", i + (px > 0 ? 100000 : 0));
        cr_assert_eq(hilock_codec_format(&k, now + offset_us + i * 1000, v, sizeof v), HILOCK_OK);
        put(r, key, (size_t)kl, v, strlen(v), px);
    }
}

static const struct { const char *key; size_t klen; const char *v; size_t vlen; } weird[] = {
    { "weird:empty", 11, "", 0 },
    { "weird:one", 9, "1", 1 },
    { "weird:digits", 12, "123456", 6 },
    { "weird:word", 10, "abc", 3 },
    { "weird:uuid", 10, "c0ffee00-4f1d-4a4a-9c9c-0123456789ab", 36 },
    { "weird:HEX", 9, "0123456789ABCDEF0123456789ABCDEF", 32 },
    { "weird:\"q\"\n\x01\xff", 12, "a\"b\\c\x7f\xc3\xa9\xff", 9 },
};
#define NWEIRD (sizeof weird / sizeof weird[0] + 1)   /* + weird:big */

/* A server holding every kind of value; returns the modern lock client (kept: its locks). */
static hlt_redis *seeded(hilock_client **mc)
{
    hlt_redis *r = hlt_redis_started(NULL);
    const int64_t S = 1000000, DAY = 86400 * S;
    char *big = malloc(100001);
    find_bin();
    /* lock.*: npm redis-lock values: 600 live, 300 dead (2 days), 100 just passed, 200 bridge (PX) */
    seed_stamps(r, "lock.", "node-redis-lock", 600, 60 * S, 0);
    seed_stamps(r, "lock.d", "node-redis-lock", 300, -2 * DAY, 0);
    seed_stamps(r, "lock.p", "node-redis-lock", 100, -5 * S, 0);
    seed_stamps(r, "lock.", "node-redis-lock", 200, 60 * S, 60000);
    /* lock:*: the Ruby gem: 400 live, 100 dead */
    seed_stamps(r, "lock:", "ruby-redis-lock", 400, 60 * S, 0);
    seed_stamps(r, "lock:", "ruby-redis-lock", 100, -2 * DAY, 0);
    seed_stamps(r, "objects:", "redis-objects", 300, 60 * S, 0);
    seed_stamps(r, "py:", "redis-py-2", 300, 60 * S, 0);
    seed_stamps(r, "doc:", "doc", 300, 60 * S, 0);
    seed_stamps(r, "doc:", "doc", 100, -10 * S, 0);
    seed_stamps(r, "mixed:s", "doc", 50, 60 * S, 0);
    seed_stamps(r, "mixed:ms", "jedis-lock", 50, 60 * S, 0);
    for (size_t i = 0; i < NWEIRD - 1; i++) put(r, weird[i].key, weird[i].klen, weird[i].v, weird[i].vlen, 0);
    memset(big, 'x', 100000);
    put(r, "weird:big", 9, big, 100000, 0);
    free(big);
    for (int i = 0; i < 20; i++) freeReplyObject(hlt_cmd(r, "HSET misc:h%d f v", i));
    for (int i = 0; i < 10; i++) freeReplyObject(hlt_cmd(r, "RPUSH misc:l%d a b", i));
    /* jobs:*: 200 modern locks made by the library (and their {jobs:N}:fence counters) */
    cr_assert_eq(hilock_client_open(r->unix_url, mc), HILOCK_OK);
    for (int i = 0; i < 200; i++) {
        char key[32];
        hilock *l;
        snprintf(key, sizeof key, "jobs:%d", i);
        cr_assert_eq(hilock_acquire(*mc, key, 600000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(*mc));
        hilock_free(l);   /* stays on the server for its ttl */
    }
    return r;
}

static const char *const all_patterns[] = { "lock.*", "lock:*", "objects:*", "py:*", "doc:*", "mixed:*",
                                            "weird:*", "misc:*", "jobs:*" };

/* ---- inventory ---- */

Test(inventory, summarizes_every_family_with_its_counts)
{
    hilock_client *mc;
    hlt_redis *r = seeded(&mc);
    const char *a[16] = { "-s", r->unix_url, "inventory" };
    run_out *o;
    char *s;
    for (size_t i = 0; i < 9; i++) a[3 + i] = all_patterns[i];
    o = run(r, a);
    cr_assert_eq(o->status, 0, "status %d: %s", o->status, o->err);
    cr_assert(strstr(o->out, "hilock inventory: 3038 keys on 1 master"), "%.500s", o->out);

    s = section(o->out, "lock.*");
    cr_assert(hlt_matches(s, "node-redis-lock +1200 +200 +1000 +400 +300 +integer milliseconds, or jedis-lock"), "%s", s);
    cr_assert(strstr(s, "! 300 DEAD LEGACY HOLDERS"), "%s", s);
    cr_assert(strstr(s, "=> step 1: deploy bridge mode with the codec \"node-redis-lock\""), "%s", s);
    free(s);
    s = section(o->out, "lock:*");
    cr_assert(hlt_matches(s, "ruby-redis-lock +500 +0 +500 +100 +100 +integer seconds -pid-thread"), "%s", s);
    free(s);
    s = section(o->out, "objects:*");
    cr_assert(hlt_matches(s, "(redis-objects|redis-py-2) +300 +0 +300 +0 +0 +decimal seconds"), "%s", s);
    free(s);
    s = section(o->out, "doc:*");
    cr_assert(hlt_matches(s, "doc +400 +0 +400 +100 +0 +integer seconds"), "%s", s);
    cr_assert_null(strstr(s, "DEAD"), "%s", s);   /* passed 10 s ago: not dead yet */
    free(s);
    s = section(o->out, "mixed:*");
    cr_assert(strstr(s, "! MIXED UNITS: seconds 50 milliseconds 50"), "%s", s);
    cr_assert(strstr(s, "=> fix the codec mix first"), "%s", s);
    free(s);
    s = section(o->out, "jobs:*");
    cr_assert(hlt_matches(s, "modern +200 +200 +0 +- +- +32 hex digits"), "%s", s);
    cr_assert(strstr(s, "=> modern locks only"), "%s", s);
    free(s);
    s = section(o->out, "weird:*");
    cr_assert(hlt_matches(s, "unknown +8 +0 +8 "), "%s", s);
    free(s);
    s = section(o->out, "misc:*");
    cr_assert(hlt_matches(s, "not-a-string +30 +0 +30 "), "%s", s);
    free(s);
    free(o);
    hilock_client_free(mc);
    hlt_redis_stop(r);
}

Test(inventory, json_prints_one_exact_line_per_key)
{
    hilock_client *mc;
    hlt_redis *r = seeded(&mc);
    const char *a[] = { "-s", r->unix_url, "inventory", "--json", "weird:*", "misc:*", "jobs:*", "lock.*", NULL };
    char want[1024];
    run_out *o = run(r, a);
    cr_assert_eq(o->status, 0, "status %d: %s", o->status, o->err);
    cr_assert_eq(count_lines(o->out, NULL), 8 + 30 + 200 + 1200 + 1, "%d lines", count_lines(o->out, NULL));
    cr_assert_eq(count_lines(o->out, "\"kind\":\"modern\""), 200);
    snprintf(want, sizeof want, "{\"master\":\"%s\",\"key\":\"weird:empty\",\"type\":\"string\",\"kind\":\"unknown\","
             "\"presets\":[],\"pttl_ms\":null,\"stamp_in_ms\":null,\"stamp_passed\":null,\"value\":\"\",\"value_size\":0}",
             r->sock);
    cr_assert_str_eq(hlt_line_with(o->out, "\"key\":\"weird:empty\""), want);
    /* quotes, control bytes, DEL, valid UTF-8 kept, invalid bytes -> U+FFFD plus exact hex */
    snprintf(want, sizeof want, "{\"master\":\"%s\",\"key\":\"weird:\\\"q\\\"\\n\\u0001\\ufffd\","
             "\"key_hex\":\"77656972643a2271220a01ff\",\"type\":\"string\",\"kind\":\"unknown\",\"presets\":[],"
             "\"pttl_ms\":null,\"stamp_in_ms\":null,\"stamp_passed\":null,"
             "\"value\":\"a\\\"b\\\\c\\u007f\xc3\xa9\\ufffd\",\"value_hex\":\"6122625c637fc3a9ff\",\"value_size\":9}",
             r->sock);
    cr_assert_str_eq(hlt_line_with(o->out, "\"key\":\"weird:\\\"q"), want);
    snprintf(want, sizeof want, "{\"master\":\"%s\",\"key\":\"misc:h3\",\"type\":\"hash\",\"kind\":\"hash\","
             "\"presets\":[],\"pttl_ms\":null,\"stamp_in_ms\":null,\"stamp_passed\":null,\"value\":null,\"value_size\":null}",
             r->sock);
    cr_assert_str_eq(hlt_line_with(o->out, "\"key\":\"misc:h3\""), want);
    /* a value longer than the view: its first 256 bytes, and its size */
    cr_assert(hlt_matches(hlt_line_with(o->out, "\"key\":\"weird:big\""), "\"value\":\"x{256}\",\"value_size\":100000\\}$"));
    cr_assert(hlt_matches(hlt_line_with(o->out, "\"key\":\"jobs:7\""),
                          "\"kind\":\"modern\",\"presets\":\\[\\],\"pttl_ms\":[0-9]+,\"stamp_in_ms\":null,"
                          "\"stamp_passed\":null,\"value\":\"[0-9a-f]{32}\",\"value_size\":32\\}$"));
    cr_assert(hlt_matches(hlt_line_with(o->out, "\"key\":\"lock.dold7\""),
                          "\"kind\":\"node-redis-lock\",\"presets\":\\[\"node-redis-lock\",\"jedis-lock\"\\],"
                          "\"pttl_ms\":null,\"stamp_in_ms\":-172(79|80)[0-9]{4},\"stamp_passed\":true,\"value\":\"[0-9]{13}\""));
    cr_assert(hlt_matches(hlt_line_with(o->out, "\"key\":\"lock.new100003\""),
                          "\"pttl_ms\":[0-9]+,\"stamp_in_ms\":[0-9]+,\"stamp_passed\":false"));
    assert_json_lines(r, o->out);
    free(o);
    hilock_client_free(mc);
    hlt_redis_stop(r);
}

/* The summary and its warnings, as the last JSON line. */
Test(inventory, json_ends_with_the_summary_and_its_warnings)
{
    hilock_client *mc;
    hlt_redis *r = seeded(&mc);
    const char *a[] = { "-s", r->unix_url, "inventory", "--json", "weird:*", "misc:*", "jobs:*", "lock.*", NULL };
    char want[1024];
    const char *last;
    run_out *o = run(r, a);
    cr_assert_eq(o->status, 0, "status %d: %s", o->status, o->err);
    last = hlt_line_with(o->out, "{\"summary\":");
    cr_assert(hlt_matches(last, "^\\{\"summary\":\\{\"keys\":1438,\"scanned\":1438,\"seconds\":[0-9.]+,\"masters\":\\[\""),
              "%s", last);
    snprintf(want, sizeof want, "{\"family\":\"lock.*\",\"master\":\"%s\",\"keys\":1200,\"kinds\":"
             "{\"node-redis-lock\":{\"keys\":1200,\"ttl\":200,\"no_ttl\":1000,\"passed\":400,\"dead\":300}},"
             "\"advice\":{\"code\":\"step_1_bridge\",\"message\":\"step 1: deploy bridge mode with the codec "
             "\\\"node-redis-lock\\\" (hilock --bridge; o.bridge = 1 and hilock_codec_preset(\\\"node-redis-lock\\\", "
             "&o.codec)); legacy writers are active (stamps without TTL)\"}}", r->sock);
    cr_assert(strstr(last, want), "%s\nwant %s", last, want);
    snprintf(want, sizeof want, "{\"family\":\"jobs:*\",\"master\":\"%s\",\"keys\":200,\"kinds\":{\"modern\":"
             "{\"keys\":200,\"ttl\":200,\"no_ttl\":0,\"passed\":null,\"dead\":null}},\"advice\":{\"code\":"
             "\"modern_only\",\"message\":\"modern locks only: nothing to migrate\"}}", r->sock);
    cr_assert(strstr(last, want), "%s\nwant %s", last, want);
    snprintf(want, sizeof want, "\"warnings\":[{\"family\":\"lock.*\",\"master\":\"%s\",\"code\":\"dead_holders\","
             "\"message\":\"300 DEAD LEGACY HOLDERS: no TTL, stamp passed more than 1.0 h ago (oldest ", r->sock);
    cr_assert(strstr(last, want), "%s\nwant %s", last, want);
    cr_assert(strstr(last, "\"code\":\"unknown_values\",\"message\":\"8 values no preset reads (e.g. "), "%s", last);
    cr_assert(hlt_matches(last, "\\],\"more_families\":false\\}\\}$"), "%s", last);
    cr_assert(hlt_matches(o->out, "\\}\\}\n$"), "the summary is the last line");
    free(o);
    hilock_client_free(mc);
    hlt_redis_stop(r);
}

static long long info_field(hlt_redis *r, const char *section_name, const char *field)
{
    redisReply *rep = hlt_cmd(r, "INFO %s", section_name);
    const char *p;
    long long v = -1;
    cr_assert(rep && rep->type == REDIS_REPLY_STRING);
    if ((p = strstr(rep->str, field))) v = atoll(p + strlen(field) + 1);
    freeReplyObject(rep);
    return v;
}

Test(inventory, writes_nothing)
{
    /* (before 7.0 commandstats names no subcommand: our CONFIG RESETSTAT is "config", once) */
    const char *resetstat = hlt_server_version() >= 70000 ? "config|resetstat" : "config";
    const char *const readonly[] = { "scan", "type", "pttl", "strlen", "getrange", "get", "llen", "evalsha",
                                     "eval", "info", "time", "dbsize", resetstat, "ping" };
    hilock_client *mc;
    hlt_redis *r = seeded(&mc);
    const char *inv[] = { "-s", r->unix_url, "inventory", "*", NULL };
    const char *json[] = { "-s", r->unix_url, "inventory", "--json", "--count=7", "*", NULL };
    const char *ins[] = { "-s", r->unix_url, "inspect", "jobs:3", NULL };
    const char *ins2[] = { "-s", r->unix_url, "inspect", "--json", "lock.dold3", NULL };
    const char *const *runs[] = { inv, json, ins, ins2 };
    long long dirty, keys = hlt_dbsize(r);
    redisReply *rep;
    char *line;
    freeReplyObject(hlt_cmd(r, "CONFIG RESETSTAT"));
    dirty = info_field(r, "persistence", "rdb_changes_since_last_save");
    for (size_t i = 0; i < 4; i++) {
        run_out *o = run(r, runs[i]);
        cr_assert_eq(o->status, 0, "run %zu: status %d: %s", i, o->status, o->err);
        free(o);
    }
    cr_assert_eq(info_field(r, "persistence", "rdb_changes_since_last_save"), dirty);
    cr_assert_eq(hlt_dbsize(r), keys);
    /* every command the server ran since the reset (scripts' calls included) only reads */
    rep = hlt_cmd(r, "INFO commandstats");
    cr_assert(rep && rep->type == REDIS_REPLY_STRING);
    cr_assert(strstr(rep->str, "cmdstat_scan:"), "%s", rep->str);
    for (line = strstr(rep->str, "cmdstat_"); line; line = strstr(line + 1, "cmdstat_")) {
        char name[32];
        int ok = 0;
        cr_assert_eq(sscanf(line, "cmdstat_%31[^:]", name), 1);
        for (size_t i = 0; i < sizeof readonly / sizeof readonly[0]; i++) ok |= !strcmp(name, readonly[i]);
        cr_assert(ok, "a command that is not read-only ran: %s\n%s", name, rep->str);
        cr_assert(strcmp(name, "config") || !strncmp(line, "cmdstat_config:calls=1,", 23), "CONFIG ran again:\n%s",
                  rep->str);
    }
    freeReplyObject(rep);
    hilock_client_free(mc);
    hlt_redis_stop(r);
}

Test(inventory, scans_every_master_of_a_redlock_list)
{
    hlt_redis *m[3];
    run_out *o;
    char *s;
    const char *a[12];
    int n = 0;
    find_bin();
    for (int i = 0; i < 3; i++) {
        m[i] = hlt_redis_started(NULL);
        seed_stamps(m[i], "lock.", "node-redis-lock", 10 + i, 60 * 1000000, 0);
    }
    for (int i = 0; i < 3; i++) a[n++] = "-s", a[n++] = m[i]->url;
    a[n++] = "inventory";
    a[n++] = "lock.*";
    a[n] = NULL;
    o = run(m[0], a);
    cr_assert_eq(o->status, 0, "status %d: %s", o->status, o->err);
    cr_assert(strstr(o->out, "hilock inventory: 33 keys on 3 masters"), "%s", o->out);
    for (int i = 0; i < 3; i++) {
        char head[300], row[64];
        snprintf(head, sizeof head, "\nfamily \"lock.*\" on 127.0.0.1:%d: %d keys", m[i]->port, 10 + i);
        cr_assert(strstr(o->out, head), "%s not in:\n%s", head, o->out);
        snprintf(row, sizeof row, "node-redis-lock +%d ", 10 + i);
        s = strdup(strstr(o->out, head) + 1);
        if (strstr(s, "\nfamily ")) *strstr(s, "\nfamily ") = '\0';
        cr_assert(hlt_matches(s, row), "%s", s);
        free(s);
    }
    free(o);
    a[n - 1] = "--json";   /* the same with one JSON line per key, each naming its master */
    a[n] = "lock.*";
    a[n + 1] = NULL;
    o = run(m[0], a);
    cr_assert_eq(o->status, 0);
    for (int i = 0; i < 3; i++) {
        char name[64];
        snprintf(name, sizeof name, "{\"master\":\"127.0.0.1:%d\",", m[i]->port);
        cr_assert_eq(count_lines(o->out, name), 10 + i, "%s", name);
    }
    free(o);
    for (int i = 0; i < 3; i++) hlt_redis_stop(m[i]);
}

Test(inventory, a_master_that_is_down_is_named_and_fails_the_run)
{
    hlt_redis *up = hlt_redis_start(NULL), *down = hlt_redis_start(NULL);
    run_out *o;
    char name[64];
    cr_assert(up && down);
    find_bin();
    seed_stamps(up, "lock.", "node-redis-lock", 5, 60 * 1000000, 0);
    hlt_redis_kill(down);
    snprintf(name, sizeof name, "127.0.0.1:%d: connect: Connection refused", down->port);
    {
        const char *a[] = { "-s", up->url, "-s", down->url, "inventory", "lock.*", NULL };
        o = run(up, a);
        cr_assert_eq(o->status, 69, "status %d", o->status);
        cr_assert(strstr(o->err, name), "%s", o->err);
        cr_assert(strstr(o->out, "INCOMPLETE: a master failed"), "%s", o->out);
        cr_assert(hlt_matches(o->out, "node-redis-lock +5 "), "%s", o->out);   /* the live master's part */
        free(o);
    }
    {
        const char *a[] = { "-s", down->url, "inspect", "--json", "lock.x", NULL };
        char want[256];
        o = run(up, a);
        cr_assert_eq(o->status, 69, "status %d", o->status);
        snprintf(want, sizeof want, "{\"master\":\"127.0.0.1:%d\",\"key\":\"lock.x\",\"error\":\"%s\"}\n", down->port, name);
        cr_assert_str_eq(o->out, want);
        cr_assert(strstr(o->err, name), "%s", o->err);
        free(o);
    }
    hlt_redis_stop(up);
    hlt_redis_stop(down);
}

Test(inventory, ctrl_c_stops_between_pages_with_130)
{
    hlt_redis *r = hlt_redis_start(NULL);
    const char *a[] = { "-s", r->unix_url, "inventory", "--progress", "--count=1", "big:*", NULL };
    char p[320], err[4096];
    run_out *o = malloc(sizeof *o);
    pid_t pid;
    long long end;
    cr_assert(r && o);
    find_bin();
    /* (enough keys for pages past the first progress line at 0.5 s: Redis 3.2 and 4.0 scanned
     * 30,000 in 0.4 s, before any progress) */
    seed_stamps(r, "big:", "doc", 100000, 60 * 1000000, 0);
    pid = spawn_hilock(r, a);
    snprintf(p, sizeof p, "%s/err.txt", r->dir);
    for (end = hlt_now_ms() + 20000; hlt_now_ms() < end; hlt_sleep_ms(10)) {
        hlt_read_file(p, err, sizeof err);
        if (strstr(err, "keys scanned")) break;
    }
    if (!strstr(err, "keys scanned (")) {   /* (what the command did instead, to read in CI's log) */
        kill(pid, SIGKILL);
        collect(r, pid, 10000, o);
        cr_assert_fail("no progress in 20 s: status %d, stderr: %s, stdout: %.500s", o->status, o->err, o->out);
    }
    kill(pid, SIGINT);
    collect(r, pid, 10000, o);
    cr_assert_eq(o->status, 130, "status %d: %s", o->status, o->err);
    cr_assert(strstr(o->err, "hilock: inventory interrupted after"), "%s", o->err);
    cr_assert(strstr(o->out, "INCOMPLETE: interrupted"), "%s", o->out);
    free(o);
    hlt_redis_stop(r);
}

Test(inventory, bad_usage_is_refused_and_a_key_named_inventory_still_locks)
{
    hlt_redis *r = hlt_redis_start(NULL);
    const char *none[] = { "-s", r->unix_url, "inventory", NULL };
    const char *count[] = { "-s", r->unix_url, "inventory", "--count=0", "x*", NULL };
    const char *nokey[] = { "-s", r->unix_url, "inspect", NULL };
    const char *two[] = { "-s", r->unix_url, "inspect", "a", "b", NULL };
    const char *url[] = { "-s", "redis://host:notaport", "inspect", "a", NULL };
    const char *const *bad[] = { none, count, nokey, two, url };
    const char *lock[] = { "-s", r->unix_url, "--", "inventory", "sh", "-c", "exit 7", NULL };
    run_out *o;
    cr_assert_not_null(r);
    find_bin();
    for (size_t i = 0; i < 5; i++) {
        o = run(r, bad[i]);
        cr_assert_eq(o->status, 64, "case %zu: status %d", i, o->status);
        cr_assert(strncmp(o->err, "hilock: ", 8) == 0 && strchr(o->err, '\n') == o->err + strlen(o->err) - 1,
                  "case %zu: %s", i, o->err);
        free(o);
    }
    cr_assert_eq(hlt_dbsize(r), 0);
    o = run(r, lock);   /* after "--", inventory is a KEY: the lock runs COMMAND */
    cr_assert_eq(o->status, 7, "status %d: %s", o->status, o->err);
    free(o);
    hlt_redis_stop(r);
}

/* ---- inspect ---- */

Test(inspect, shows_a_modern_lock_its_token_and_fence)
{
    hlt_redis *r = hlt_redis_start(NULL);
    const char *a[] = { "-s", r->unix_url, "inspect", "jobs:nightly", NULL };
    const char *j[] = { "-s", r->unix_url, "inspect", "--json", "jobs:nightly", NULL };
    hilock_client *c;
    hilock *l;
    char want[512];
    run_out *o;
    cr_assert_not_null(r);
    find_bin();
    cr_assert_eq(hilock_client_open(r->unix_url, &c), HILOCK_OK);
    cr_assert_eq(hilock_acquire(c, "jobs:nightly", 60000, 0, &l), HILOCK_OK);
    o = run(r, a);
    cr_assert_eq(o->status, 0, "%s", o->err);
    cr_assert(strstr(o->out, "  holder   a modern lock (hilock token)\n"), "%s", o->out);
    snprintf(want, sizeof want, "  value    \"%s\"\n", hilock_token(l));
    cr_assert(strstr(o->out, want), "%s", o->out);
    snprintf(want, sizeof want, "  fence    counter %llu (kept ", (unsigned long long)hilock_fence(l));
    cr_assert(strstr(o->out, want), "%s", o->out);
    cr_assert(strstr(o->out, "  waiters  none marked\n"), "%s", o->out);
    free(o);
    o = run(r, j);
    cr_assert_eq(o->status, 0);
    snprintf(want, sizeof want, "\"holder\":\"modern\",\"fence\":%llu,", (unsigned long long)hilock_fence(l));
    cr_assert(strstr(o->out, want), "%s", o->out);
    snprintf(want, sizeof want, "\"kind\":\"modern\",\"presets\":[],\"pttl_ms\":");
    cr_assert(strstr(o->out, want), "%s", o->out);
    snprintf(want, sizeof want, "\"value\":\"%s\",\"value_size\":32,", hilock_token(l));
    cr_assert(strstr(o->out, want), "%s", o->out);
    free(o);
    hilock_release(l);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(inspect, shows_a_legacy_lock_its_codec_and_a_bridge_lock)
{
    hlt_redis *r = hlt_redis_start(NULL);
    const char *a[] = { "-s", r->unix_url, "inspect", "lock.report", NULL };
    const char *b[] = { "-s", r->unix_url, "inspect", "--json", "lock.bridged", NULL };
    const char *srv[1];
    hilock_options opt;
    hilock_client *c, *bc;
    hilock *l, *bl;
    run_out *o;
    cr_assert_not_null(r);
    find_bin();
    srv[0] = r->unix_url;
    opt = hlt_options(srv, 1);
    opt.retry_delay_ms = 50;   /* the library's default */
    cr_assert_eq(hilock_codec_preset("node-redis-lock", &opt.codec), HILOCK_OK);
    c = hlt_client_new(&opt);
    cr_assert_eq(hilock_legacy_acquire(c, "lock.report", 60000, 0, &l), HILOCK_OK);
    opt.bridge = 1;
    bc = hlt_client_new(&opt);
    cr_assert_eq(hilock_acquire(bc, "lock.bridged", 60000, 0, &bl), HILOCK_OK, "%s", hilock_client_errmsg(bc));
    o = run(r, a);
    cr_assert_eq(o->status, 0, "%s", o->err);
    cr_assert(strstr(o->out, "  holder   a legacy lock (SETNX/GETSET stamp, no TTL)\n"), "%s", o->out);
    cr_assert(strstr(o->out, "  kind     node-redis-lock (or jedis-lock: same values), integer milliseconds\n"), "%s", o->out);
    cr_assert(strstr(o->out, "  pttl     none (no expiry)\n"), "%s", o->out);
    cr_assert(hlt_matches(o->out, "  stamp    passes in (59|60)\\.[0-9] s\n"), "%s", o->out);
    free(o);
    o = run(r, b);
    cr_assert_eq(o->status, 0, "%s", o->err);
    cr_assert(hlt_matches(o->out, "\"kind\":\"node-redis-lock\".*\"pttl_ms\":[0-9]+,\"stamp_in_ms\":[0-9]+,"
                                  "\"stamp_passed\":false,.*\"holder\":\"bridge\",\"fence\":[0-9]+,"), "%s", o->out);
    free(o);
    hilock_release(l);
    hilock_release(bl);
    hilock_free(l);
    hilock_free(bl);
    hilock_client_free(c);
    hilock_client_free(bc);
    hlt_redis_stop(r);
}

Test(inspect, a_missing_key_has_no_holder)
{
    hlt_redis *r = hlt_redis_start(NULL);
    const char *a[] = { "-s", r->unix_url, "inspect", "nothing:here", NULL };
    const char *j[] = { "-s", r->unix_url, "inspect", "--json", "nothing:here", NULL };
    char want[512];
    run_out *o;
    cr_assert_not_null(r);
    find_bin();
    o = run(r, a);
    cr_assert_eq(o->status, 0, "%s", o->err);
    snprintf(want, sizeof want, "\"nothing:here\" on %s\n  holder   nobody: no such key\n"
             "  fence    no counter (no hilock grant for an hour past the last one's ttl)\n  waiters  none marked\n", r->sock);
    cr_assert_str_eq(o->out, want);
    free(o);
    o = run(r, j);
    snprintf(want, sizeof want, "{\"master\":\"%s\",\"key\":\"nothing:here\",\"type\":\"none\",\"kind\":\"none\","
             "\"presets\":[],\"pttl_ms\":null,\"stamp_in_ms\":null,\"stamp_passed\":null,\"value\":null,"
             "\"value_size\":null,\"holder\":\"none\",\"fence\":null,\"fence_pttl_ms\":null,\"waiters_pttl_ms\":null,"
             "\"signals\":0,\"held_by\":null}\n", r->sock);
    cr_assert_str_eq(o->out, want);
    free(o);
    cr_assert_eq(hlt_dbsize(r), 0);
    hlt_redis_stop(r);
}

Test(inspect, shows_a_blocked_waiter)
{
    hlt_redis *r = hlt_redis_start(NULL);
    const char *w[] = { "-s", r->unix_url, "-w", "20s", "q:job", "true", NULL };
    const char *a[] = { "-s", r->unix_url, "inspect", "q:job", NULL };
    hilock_client *c;
    hilock *l;
    run_out *o = malloc(sizeof *o), *i;
    pid_t waiter;
    long long end;
    cr_assert(r && o);
    find_bin();
    cr_assert_eq(hilock_client_open(r->unix_url, &c), HILOCK_OK);
    cr_assert_eq(hilock_acquire(c, "q:job", 60000, 0, &l), HILOCK_OK);
    waiter = spawn_hilock(r, w);
    for (end = hlt_now_ms() + 10000; hlt_now_ms() < end && !hlt_exists(r, "{q:job}:waiters");) hlt_sleep_ms(10);
    cr_assert_eq(hlt_exists(r, "{q:job}:waiters"), 1);
    i = run(r, a);   /* (its output files are the waiter's too: read before the waiter ends) */
    cr_assert_eq(i->status, 0, "%s", i->err);
    cr_assert(hlt_matches(i->out, "  waiters  yes: a waiter blocks for the release \\(marker expires in [0-9.]+ s\\)"),
              "%s", i->out);
    free(i);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    collect(r, waiter, 20000, o);
    cr_assert_eq(o->status, 0, "waiter: %d", o->status);
    free(o);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* ---- the holder record (issue 23): who holds it, informative only ---- */

typedef struct seen_view {
    int n;
    char host[256], program[256];
    int64_t pid, since_ms, fence;
    /* semaphores and shared/exclusive locks */
    char kind[16], value[16], mode[16];   /* mode: the first holder's */
    int64_t holders, limit, waiters, writers;
    size_t nholder;
    int records, in_order;   /* holders with a record; pttls not decreasing */
} seen_view;

static void keep_view(size_t m, const hilock_lock_view *v, const char *e, void *arg)
{
    seen_view *s = arg;
    (void)m;
    cr_assert_not_null(v, "%s", e);
    s->n++;
    s->fence = v->fence;
    s->pid = v->holder_pid;
    s->since_ms = v->holder_since_ms;
    snprintf(s->host, sizeof s->host, "%s", v->holder_host ? v->holder_host : "(null)");
    snprintf(s->program, sizeof s->program, "%s", v->holder_program ? v->holder_program : "(null)");
    snprintf(s->kind, sizeof s->kind, "%s", v->kind ? v->kind : "(null)");
    snprintf(s->value, sizeof s->value, "%s", v->key.value ? v->key.value : "(null)");
    snprintf(s->mode, sizeof s->mode, "%s", v->nholder ? v->holder[0].mode : "(none)");
    s->holders = v->holders;
    s->limit = v->limit;
    s->waiters = v->waiters;
    s->writers = v->writers_waiting;
    s->nholder = v->nholder;
    s->in_order = 1;
    for (size_t i = 0; i < v->nholder; i++) {
        s->records += v->holder[i].host != NULL;
        if (i && v->holder[i].pttl_ms < v->holder[i - 1].pttl_ms) s->in_order = 0;
    }
}

static seen_view look(hilock_client *c, const char *key)
{
    seen_view s;
    memset(&s, 0, sizeof s);
    cr_assert_eq(hilock_inspect(c, key, keep_view, &s), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(s.n, 1);
    return s;
}

static void assert_no_holder(const seen_view *s)
{
    cr_assert_str_eq(s->host, "(null)");
    cr_assert_str_eq(s->program, "(null)");
    cr_assert_eq(s->pid, -1);
    cr_assert_eq(s->since_ms, -1);
}

/* The record "tag\nhost\npid\nprogram" of client c: its tokens end with the tag. */
static void assert_record_names(hlt_redis *r, const char *key, const hilock *l)
{
    char want[512], host[256] = "", *got = hlt_get(r, key);
    const char *tok = hilock_token(l);
    gethostname(host, sizeof host - 1);
    cr_assert_eq(strlen(tok), 32);
    snprintf(want, sizeof want, "%s\n%s\n%ld\n%s", tok + 20, host, (long)getpid(), program_invocation_short_name);
    cr_assert_not_null(got, "no %s", key);
    cr_assert_str_eq(got, want);
    free(got);
}

Test(inspect_api, a_grant_records_its_client_and_the_release_leaves_it_to_lapse)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c, *viewer;
    hilock *l;
    char host[256] = "";
    long long t0 = (long long)(wall_us() / 1000), t1, pttl;
    seen_view s;
    gethostname(host, sizeof host - 1);
    cr_assert_eq(hilock_client_open(r->unix_url, &c), HILOCK_OK);
    cr_assert_eq(hilock_client_open(r->unix_url, &viewer), HILOCK_OK);
    cr_assert_eq(hilock_acquire(c, "h:job", 60000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    t1 = (long long)(wall_us() / 1000);
    assert_record_names(r, "{h:job}:holder", l);
    s = look(viewer, "h:job");
    cr_assert_str_eq(s.host, host);
    cr_assert_eq(s.pid, (int64_t)getpid());
    cr_assert_str_eq(s.program, program_invocation_short_name);
    /* since: the fencing token, the server's clock as the client reckons it: the wall clock
     * here, within a few seconds */
    cr_assert_eq(s.since_ms, (int64_t)hilock_fence(l));
    cr_assert(s.since_ms > t0 - 5000 && s.since_ms < t1 + 5000, "since %lld, acquired in [%lld, %lld]",
              (long long)s.since_ms, t0, t1);
    pttl = hlt_pttl(r, "{h:job}:holder");   /* outlives the lock, by at most one more ttl */
    cr_assert(pttl > hlt_pttl(r, "h:job") && pttl <= 120000, "holder pttl %lld", pttl);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    cr_assert_eq(hlt_exists(r, "h:job"), 0);
    cr_assert_eq(hlt_exists(r, "{h:job}:holder"), 1, "the release deletes the lock alone");
    s = look(viewer, "h:job");
    assert_no_holder(&s);
    hilock_free(l);
    hilock_client_free(c);
    hilock_client_free(viewer);
    hlt_redis_stop(r);
}

/* The record names the client, so a client granted the key again writes nothing more (its
 * expiry runs on: not set again); another client's grant writes its own, and the first
 * client's next grant its own again. Each time inspect shows the grant's client. */
Test(inspect_api, a_record_is_written_once_per_client_not_per_grant)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *a, *b;
    hilock *l;
    long long p1, p2;
    cr_assert_eq(hilock_client_open(r->unix_url, &a), HILOCK_OK);
    cr_assert_eq(hilock_client_open(r->unix_url, &b), HILOCK_OK);
    cr_assert_eq(hilock_acquire(a, "h:again", 60000, 0, &l), HILOCK_OK);
    assert_record_names(r, "{h:again}:holder", l);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    p1 = hlt_pttl(r, "{h:again}:holder");
    hlt_sleep_ms(300);
    for (int i = 0; i < 20; i++) {
        cr_assert_eq(hilock_acquire(a, "h:again", 60000, 0, &l), HILOCK_OK);
        cr_assert_eq(hilock_release(l), HILOCK_OK);
        hilock_free(l);
    }
    p2 = hlt_pttl(r, "{h:again}:holder");
    cr_assert(p2 > 0 && p2 <= p1 - 250, "20 grants of one client set the record again (pttl %lld, then %lld)", p1, p2);
    cr_assert_eq(hilock_acquire(b, "h:again", 60000, 0, &l), HILOCK_OK);
    assert_record_names(r, "{h:again}:holder", l);   /* b's: another client */
    cr_assert_eq(look(a, "h:again").pid, (int64_t)getpid());
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    cr_assert_eq(hilock_acquire(a, "h:again", 60000, 0, &l), HILOCK_OK);
    assert_record_names(r, "{h:again}:holder", l);   /* a's again */
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(a);
    hilock_client_free(b);
    hlt_redis_stop(r);
}

/* Calls of cmd on r so far (INFO commandstats: a script's own calls count too; 0 for none). */
static long long calls_of(hlt_redis *r, const char *cmd)
{
    char field[64];
    long long n;
    snprintf(field, sizeof field, "cmdstat_%s:calls=", cmd);
    n = hlt_info_int(r, "commandstats", field);
    return n < 0 ? 0 : n;
}

/* A client granted a key again and again, with no other grant between, does not even read
 * its record (acquire.lua ARGV[12]: the counter still holds its last grant's value): of 20
 * cycles the server runs GET 20 times (the releases' compare) and PTTL not at all (the old
 * grant read the record and its PTTL each time: 40 and 20). Another client's grant between
 * moves the counter, so the next grant reads the record and names its client again. */
Test(inspect_api, a_client_granted_a_key_again_and_again_leaves_its_record_unread)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *a, *b;
    hilock *l;
    long long get, pttl;
    redisReply *rep;
    cr_assert_eq(hilock_client_open(r->unix_url, &a), HILOCK_OK);
    cr_assert_eq(hilock_client_open(r->unix_url, &b), HILOCK_OK);
    cr_assert_eq(hilock_acquire(a, "h:unread", 60000, 0, &l), HILOCK_OK);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    rep = hlt_cmd(r, "CONFIG RESETSTAT");
    freeReplyObject(rep);
    get = calls_of(r, "get"), pttl = calls_of(r, "pttl");
    for (int i = 0; i < 20; i++) {
        cr_assert_eq(hilock_acquire(a, "h:unread", 60000, 0, &l), HILOCK_OK);
        cr_assert_eq(hilock_release(l), HILOCK_OK);
        if (i == 19) {
            cr_assert_eq(calls_of(r, "get") - get, 20, "the grants read the record");
            cr_assert_eq(calls_of(r, "pttl") - pttl, 0, "the grants read the record's expiry");
            assert_record_names(r, "{h:unread}:holder", l);
        }
        hilock_free(l);
    }
    cr_assert_eq(hilock_acquire(b, "h:unread", 60000, 0, &l), HILOCK_OK);
    assert_record_names(r, "{h:unread}:holder", l);   /* b's */
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    cr_assert_eq(hilock_acquire(a, "h:unread", 60000, 0, &l), HILOCK_OK);
    assert_record_names(r, "{h:unread}:holder", l);   /* a's again: read, and written */
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(a);
    hilock_client_free(b);
    hlt_redis_stop(r);
}

/* The client remembers a hundred keys at once (client.h: HL_RECORD_MEMO, HL_RECORD_WAYS): a
 * second round of grants of 100 keys reads none of their records (GET: the releases' only). */
Test(inspect_api, a_client_cycling_through_a_hundred_keys_reads_no_record_twice)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    long long get = 0, pttl = 0;
    cr_assert_eq(hilock_client_open(r->unix_url, &c), HILOCK_OK);
    for (int round = 0; round < 2; round++) {
        if (round == 1) {
            redisReply *rep = hlt_cmd(r, "CONFIG RESETSTAT");
            freeReplyObject(rep);
            get = calls_of(r, "get"), pttl = calls_of(r, "pttl");
        }
        for (int i = 0; i < 100; i++) {
            char key[32];
            hilock *l;
            snprintf(key, sizeof key, "h:many:%d", i);
            cr_assert_eq(hilock_acquire(c, key, 60000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
            cr_assert_eq(hilock_release(l), HILOCK_OK);
            hilock_free(l);
        }
    }
    cr_assert_eq(calls_of(r, "pttl") - pttl, 0, "the second round read records' expiry");
    cr_assert_eq(calls_of(r, "get") - get, 100, "the second round read records");
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* While grants skip the record, it still outlives each lock (kind.h: HL_RECORD_RENEW): a
 * client granted a key of 500 ms ttl every 20 ms or so for 1.5 s (the record read and
 * lengthened about every 250 ms), each grant's record read back lives at least as long as its
 * lock (read first: it cannot gain on the lock meanwhile). */
Test(inspect_api, a_record_the_grants_skip_still_outlives_each_lock)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *l;
    long long end = hlt_now_ms() + 1500;
    int n = 0;
    cr_assert_eq(hilock_client_open(r->unix_url, &c), HILOCK_OK);
    while (hlt_now_ms() < end) {
        long long rec, lock;
        cr_assert_eq(hilock_acquire(c, "h:short", 500, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
        rec = hlt_pttl(r, "{h:short}:holder");
        lock = hlt_pttl(r, "h:short");
        cr_assert(lock > 0 && rec >= lock, "grant %d: the record lives %lld ms, its lock %lld ms", n, rec, lock);
        assert_record_names(r, "{h:short}:holder", l);
        cr_assert_eq(hilock_release(l), HILOCK_OK);
        hilock_free(l);
        hlt_sleep_ms(20);
        n++;
    }
    cr_assert_gt(n, 10);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* What inspect shows of h:old once its holder record holds rec. */
static seen_view look_with_record(hlt_redis *r, hilock_client *c, const char *rec)
{
    freeReplyObject(hlt_cmd(r, "SET {h:old}:holder %s", rec));
    return look(c, "h:old");
}

/* A record is shown only while the key's value is a token ending with its tag: never with
 * another client's (or another library's) value, nor one malformed. */
Test(inspect_api, a_record_of_an_earlier_grant_is_never_shown_as_the_holder)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *l;
    seen_view s;
    cr_assert_eq(hilock_client_open(r->unix_url, &c), HILOCK_OK);
    cr_assert_eq(hilock_acquire(c, "h:old", 60000, 0, &l), HILOCK_OK);
    hilock_free(l);   /* its record stays, as long as its value */
    freeReplyObject(hlt_cmd(r, "SET h:old 0123456789abcdef0123456789abcdef PX 60000"));   /* another holder's */
    cr_assert_eq(hlt_exists(r, "{h:old}:holder"), 1);
    s = look(c, "h:old");
    assert_no_holder(&s);
    /* a forged or foreign record for the current value is shown only if well formed */
    s = look_with_record(r, c, "0123456789abcdef0123456789abcdef\nnot-a-number\nh\n1\np");
    assert_no_holder(&s);
    s = look_with_record(r, c, "456789abcdef\nh\nnot-a-pid\np");
    assert_no_holder(&s);
    /* the record's first form (a token, since, ...: one per grant) is read still */
    s = look_with_record(r, c, "0123456789abcdef0123456789abcdef\n1700000000000\nold-host\n7\nold");
    cr_assert_str_eq(s.host, "old-host");
    cr_assert_eq(s.pid, 7);
    cr_assert_eq(s.since_ms, 1700000000000LL);
    /* a value of our client's form with another tag: not ours */
    s = look_with_record(r, c, "0123456789ab\nh\n1\np");
    assert_no_holder(&s);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* since comes from the fence counter: unknown (-1) while the counter is ahead of the
 * master's clock (a key granted faster than once a ms), the record still shown. */
Test(inspect_api, since_is_unknown_while_the_fence_counter_is_ahead_of_the_clock)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *l;
    seen_view s;
    redisReply *rep;
    cr_assert_eq(hilock_client_open(r->unix_url, &c), HILOCK_OK);
    cr_assert_eq(hilock_acquire(c, "h:fast", 60000, 0, &l), HILOCK_OK);
    rep = hlt_cmd(r, "SET {h:fast}:fence %lld", (long long)(wall_us() / 1000) + 3600000LL);
    freeReplyObject(rep);
    s = look(c, "h:fast");
    cr_assert_eq(s.pid, (int64_t)getpid());
    cr_assert_eq(s.since_ms, -1);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* Another type at {key}:holder (a user's hash) is no record of ours: the grant replaces it,
 * and is granted (GET's WRONGTYPE after the lock's write would have left a grant behind). */
Test(inspect_api, a_key_of_another_type_at_the_record_is_replaced_by_the_grant)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *l;
    redisReply *rep;
    cr_assert_eq(hilock_client_open(r->unix_url, &c), HILOCK_OK);
    rep = hlt_cmd(r, "HSET {h:typed}:holder f v");
    freeReplyObject(rep);
    cr_assert_eq(hilock_acquire(c, "h:typed", 60000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    assert_record_names(r, "{h:typed}:holder", l);
    cr_assert_eq(look(c, "h:typed").pid, (int64_t)getpid());
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(inspect_api, extend_keeps_the_holder_record_as_long_as_the_lock)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *l;
    seen_view s;
    cr_assert_eq(hilock_client_open(r->unix_url, &c), HILOCK_OK);
    cr_assert_eq(hilock_acquire(c, "h:ext", 800, 0, &l), HILOCK_OK);
    cr_assert_eq(hilock_extend(l, 60000), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_sleep_ms(1700);   /* past the first ttl, and the record's first keep (2 x 800 ms) */
    cr_assert_gt(hlt_pttl(r, "{h:ext}:holder"), 100000);   /* 2 x 60 s */
    s = look(c, "h:ext");
    cr_assert_eq(s.pid, (int64_t)getpid());
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* fencing = 0 (one plain SET), legacy and bridge locks: no record, nothing else written. */
Test(inspect_api, unfenced_legacy_and_bridge_locks_write_no_holder_record)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_options opt;
    hilock_client *u, *g, *b;
    hilock *l1, *l2, *l3;
    seen_view s;
    opt = hlt_options((const char *[]){ r->unix_url }, 1);
    opt.retry_delay_ms = 50;   /* the library's default */
    opt.fencing = 0;
    u = hlt_client_new(&opt);
    opt.fencing = 1;
    cr_assert_eq(hilock_codec_preset("doc", &opt.codec), HILOCK_OK);
    g = hlt_client_new(&opt);
    opt.bridge = 1;
    b = hlt_client_new(&opt);
    cr_assert_eq(hilock_acquire(u, "h:plain", 60000, 0, &l1), HILOCK_OK, "%s", hilock_client_errmsg(u));
    cr_assert_eq(hilock_legacy_acquire(g, "h:legacy", 60000, 0, &l2), HILOCK_OK, "%s", hilock_client_errmsg(g));
    cr_assert_eq(hilock_acquire(b, "h:bridge", 60000, 0, &l3), HILOCK_OK, "%s", hilock_client_errmsg(b));
    cr_assert_eq(hlt_exists(r, "{h:plain}:holder"), 0);
    cr_assert_eq(hlt_exists(r, "{h:legacy}:holder"), 0);
    cr_assert_eq(hlt_exists(r, "{h:bridge}:holder"), 0);
    s = look(u, "h:plain");
    assert_no_holder(&s);
    cr_assert_eq(hilock_release(l1), HILOCK_OK);
    cr_assert_eq(hilock_release(l2), HILOCK_OK);
    cr_assert_eq(hilock_release(l3), HILOCK_OK);
    {
        redisReply *k = hlt_cmd(r, "KEYS *holder*");
        cr_assert(k && k->type == REDIS_REPLY_ARRAY && k->elements == 0, "a holder record was written");
        freeReplyObject(k);
    }
    hilock_free(l1);
    hilock_free(l2);
    hilock_free(l3);
    hilock_client_free(u);
    hilock_client_free(g);
    hilock_client_free(b);
    hlt_redis_stop(r);
}

Test(inspect, names_the_holder_in_text_json_and_the_busy_message_of_v)
{
    hlt_redis *r = hlt_redis_start(NULL);
    const char *a[] = { "-s", r->unix_url, "inspect", "h:cli", NULL };
    const char *j[] = { "-s", r->unix_url, "inspect", "--json", "h:cli", NULL };
    const char *v[] = { "-s", r->unix_url, "-v", "-n", "h:cli", "true", NULL };
    hilock_client *c;
    hilock *l;
    char host[256] = "", want[700];
    run_out *o;
    cr_assert_not_null(r);
    find_bin();
    gethostname(host, sizeof host - 1);
    cr_assert_eq(hilock_client_open(r->unix_url, &c), HILOCK_OK);
    cr_assert_eq(hilock_acquire(c, "h:cli", 60000, 0, &l), HILOCK_OK);
    o = run(r, a);
    cr_assert_eq(o->status, 0, "%s", o->err);
    snprintf(want, sizeof want, "  held by  host \"%s\", pid %ld, program \"%s\", granted ", host, (long)getpid(),
             program_invocation_short_name);
    cr_assert(strstr(o->out, want), "%s", o->out);
    cr_assert(hlt_matches(o->out, " ago \\(its holder record: informative only\\)\n"), "%s", o->out);
    free(o);
    o = run(r, j);
    cr_assert_eq(o->status, 0, "%s", o->err);
    snprintf(want, sizeof want, ",\"held_by\":{\"host\":\"%s\",\"pid\":%ld,\"program\":\"%s\",\"since_ms\":", host,
             (long)getpid(), program_invocation_short_name);
    cr_assert(strstr(o->out, want), "%s", o->out);
    free(o);
    o = run(r, v);
    cr_assert_eq(o->status, 1, "%s", o->err);
    snprintf(want, sizeof want, "hilock: \"h:cli\" held by host \"%s\", pid %ld, program \"%s\", granted ", host,
             (long)getpid(), program_invocation_short_name);
    cr_assert(strstr(o->err, want), "%s", o->err);
    free(o);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(inventory, names_the_holders_of_a_familys_first_modern_locks)
{
    hlt_redis *r = hlt_redis_start(NULL);
    const char *a[] = { "-s", r->unix_url, "inventory", "inv:*", NULL };
    hilock_options opt;
    hilock_client *c, *u;
    hilock *l1, *l2;
    char host[256] = "", want[700];
    run_out *o;
    cr_assert_not_null(r);
    find_bin();
    gethostname(host, sizeof host - 1);
    cr_assert_eq(hilock_client_open(r->unix_url, &c), HILOCK_OK);
    opt = hlt_options((const char *[]){ r->unix_url }, 1);
    opt.retry_delay_ms = 50;   /* the library's default */
    opt.fencing = 0;
    u = hlt_client_new(&opt);
    cr_assert_eq(hilock_acquire(c, "inv:a", 60000, 0, &l1), HILOCK_OK);
    cr_assert_eq(hilock_acquire(u, "inv:b", 60000, 0, &l2), HILOCK_OK);   /* fencing = 0: no record */
    o = run(r, a);
    cr_assert_eq(o->status, 0, "%s", o->err);
    snprintf(want, sizeof want, "  held by  \"inv:a\": host \"%s\", pid %ld, program \"%s\", granted ", host,
             (long)getpid(), program_invocation_short_name);
    cr_assert(strstr(o->out, want), "%s", o->out);
    cr_assert(strstr(o->out, "  held by  \"inv:b\": unknown (no holder record, or released since)\n"), "%s", o->out);
    free(o);
    hilock_free(l1);
    hilock_free(l2);
    hilock_client_free(c);
    hilock_client_free(u);
    hlt_redis_stop(r);
}

Test(inventory, finds_the_master_through_sentinel)
{
    hlt_sentinel *f = hlt_sentinel_start();
    const char *a[] = { "-s", NULL, "inventory", "--json", "lock.*", NULL };
    const char *b[] = { "-s", NULL, "inspect", "lock.new3", NULL };
    char want[300];
    run_out *o;
    cr_assert_not_null(f);
    find_bin();
    a[1] = b[1] = f->url;
    seed_stamps(f->data[0], "lock.", "node-redis-lock", 40, 60 * 1000000, 0);
    o = run(f->data[0], a);
    cr_assert_eq(o->status, 0, "status %d: %s", o->status, o->err);
    /* the master as the Sentinels named it */
    snprintf(want, sizeof want, "{\"master\":\"%s@127.0.0.1:%d\",\"key\":\"lock.new", f->name, f->data[0]->port);
    cr_assert_eq(count_lines(o->out, want), 40, "%s", o->out);
    free(o);
    o = run(f->data[0], b);
    cr_assert_eq(o->status, 0, "status %d: %s", o->status, o->err);
    snprintf(want, sizeof want, "\"lock.new3\" on %s@127.0.0.1:%d\n  holder   a legacy lock", f->name, f->data[0]->port);
    cr_assert(strstr(o->out, want), "%s", o->out);
    free(o);
    hlt_sentinel_stop(f);
}

/* ---- the API under them: bad input changes nothing and says why ---- */

static void no_call(size_t m, const hilock_key_view *k, void *arg)
{
    (void)m, (void)k, (void)arg;
    cr_assert_fail("called");
}

static void no_view(size_t m, const hilock_lock_view *v, const char *e, void *arg)
{
    (void)m, (void)v, (void)e, (void)arg;
    cr_assert_fail("called");
}

Test(inspect_api, refuses_bad_arguments_before_any_io)
{
    hilock_client *c;
    uint64_t cur = 0;
    char longer[HILOCK_KEY_MAX + 2];
    memset(longer, 'k', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    /* no server listens there: a call that reached the network would say EIO */
    cr_assert_eq(hilock_client_open("redis://127.0.0.1:1", &c), HILOCK_OK);
    cr_assert_eq(hilock_client_masters(c), 1);
    cr_assert_str_eq(hilock_client_master_name(c, 0), "127.0.0.1:1");
    cr_assert_null(hilock_client_master_name(c, 1));
    cr_assert_eq(hilock_client_masters(NULL), 0);
    cr_assert_eq(hilock_scan(NULL, 0, "*", 10, &cur, no_call, NULL), HILOCK_EINVAL);
    cr_assert_eq(hilock_scan(c, 0, "*", 10, NULL, no_call, NULL), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(c), "cursor or fn is NULL"));
    cr_assert_eq(hilock_scan(c, 0, "*", 10, &cur, NULL, NULL), HILOCK_EINVAL);
    cr_assert_eq(hilock_scan(c, 1, "*", 10, &cur, no_call, NULL), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(c), "master 1 out of range (1 masters)"), "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_scan(c, 0, "*", 0, &cur, no_call, NULL), HILOCK_EINVAL);
    cr_assert_eq(hilock_scan(c, 0, "*", 501, &cur, no_call, NULL), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(c), "count 501 outside 1..500"), "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_scan(c, 0, longer, 10, &cur, no_call, NULL), HILOCK_EINVAL);
    cr_assert_eq(hilock_inspect(NULL, "k", no_view, NULL), HILOCK_EINVAL);
    cr_assert_eq(hilock_inspect(c, NULL, no_view, NULL), HILOCK_EINVAL);
    cr_assert_eq(hilock_inspect(c, "", no_view, NULL), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(c), "key is empty"));
    cr_assert_eq(hilock_inspect(c, longer, no_view, NULL), HILOCK_EINVAL);
    cr_assert_eq(hilock_inspect(c, "k", NULL, NULL), HILOCK_EINVAL);
    cr_assert_eq(cur, 0);
    /* and the network error of a real call names the server, cursor unchanged */
    cur = 42;
    cr_assert_eq(hilock_scan(c, 0, "*", 10, &cur, no_call, NULL), HILOCK_EIO);
    cr_assert(strstr(hilock_client_errmsg(c), "scan: 127.0.0.1:1: connect:"), "%s", hilock_client_errmsg(c));
    cr_assert_eq(cur, 42);
    hilock_client_free(c);
}

/* ---- semaphores and shared/exclusive locks (issue 26): holders, limit, waiters ---- */

/* What look() saw of a semaphore or shared/exclusive lock: every holder listed with its record. */
static void assert_kind(const seen_view *s, const char *kind, const char *mode, int64_t holders, int64_t limit,
                        int64_t waiters, int64_t writers)
{
    cr_assert_str_eq(s->kind, kind);
    cr_assert_str_eq(s->value, !strcmp(kind, "semaphore") ? "hilock:sem" : "hilock:rw");
    cr_assert_str_eq(s->mode, mode);
    cr_assert_eq(s->holders, holders);
    cr_assert_eq(s->nholder, (size_t)holders);
    cr_assert_eq(s->records, holders);
    cr_assert_eq(s->limit, limit);
    cr_assert_eq(s->waiters, waiters);
    cr_assert_eq(s->writers, writers);
    cr_assert(s->in_order);
}

/* HILOCK_SEM_LIMIT_MAX holders, each with a record of the largest size a client writes (host
 * and program cut at 64 bytes), and as many waiters: one reply, within the parser's limits
 * (8192 elements an array, 64 KiB a string, 1 MiB a reply). The state is written as the kinds
 * write it (a marker scored +inf, tokens scored with their expiry), so the bound is tested
 * without a thousand clients. */
Test(inspect_api, lists_the_most_holders_a_key_can_have_within_the_reply_limits)
{
    static const char seed[] =
        "redis.replicate_commands() local t = redis.call('TIME') local now = t[1] * 1000 + math.floor(t[2] / 1000) "
        "local host, prog = string.rep('h', 64), string.rep('p', 64) "
        "redis.call('ZADD', KEYS[1], 'inf', 'hilock:sem') "
        "for i = 1, tonumber(ARGV[1]) do "
        "  local tok = string.format('%032x', i) "
        "  redis.call('ZADD', KEYS[1], now + 60000 + i, tok) "
        "  redis.call('HSET', KEYS[2], tok, now .. '\\n' .. ARGV[1] .. '\\n' .. host .. '\\n' .. 4242 .. '\\n' .. prog) "
        "  redis.call('ZADD', KEYS[3], now + 60000, 'w' .. i) "
        "end "
        "redis.call('ZADD', KEYS[1], now - 1, 'expired') "
        "redis.call('ZADD', KEYS[3], now - 1, 'lapsed') return 1";
    hlt_redis *r;
    hilock_client *c;
    seen_view s;
    redisReply *rep;
    HLT_NEEDS(30200, "semaphores need Redis 3.2 (and the seed, TIME before writes)");
    r = hlt_redis_started(NULL);
    rep = hlt_cmd(r, "EVAL %s 3 big {big}:holders {big}:wq %d", seed, HILOCK_SEM_LIMIT_MAX);
    cr_assert(rep && rep->type == REDIS_REPLY_INTEGER, "%s", rep && rep->str ? rep->str : "no reply");
    freeReplyObject(rep);
    cr_assert_eq(hilock_client_open(r->unix_url, &c), HILOCK_OK);
    s = look(c, "big");
    /* the expired holder, the marker and the lapsed waiter are not counted */
    assert_kind(&s, "semaphore", "permit", HILOCK_SEM_LIMIT_MAX, HILOCK_SEM_LIMIT_MAX, HILOCK_SEM_LIMIT_MAX, 0);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* Wait (bounded) for a key the test does not write: a waiter's registration. */
static void wait_exists(hlt_redis *r, const char *key)
{
    for (long long end = hlt_now_ms() + 10000; hlt_now_ms() < end && !hlt_exists(r, key);) hlt_sleep_ms(10);
    cr_assert_eq(hlt_exists(r, key), 1, "%s never appeared", key);
}

Test(inspect, shows_a_semaphores_permits_their_holders_and_its_queue, .timeout = 60)
{
    hlt_redis *r;
    HLT_NEEDS(30200, "semaphores need Redis 3.2 (TIME in a script that writes)");
    r = hlt_redis_start(NULL);
    const char *w[] = { "-s", r->unix_url, "--limit", "2", "-w", "20s", "sem:i", "true", NULL };
    const char *a[] = { "-s", r->unix_url, "inspect", "sem:i", NULL };
    const char *j[] = { "-s", r->unix_url, "inspect", "--json", "sem:i", NULL };
    const char *v[] = { "-s", r->unix_url, "-v", "-n", "--limit", "2", "sem:i", "true", NULL };
    hilock_client *c[2], *viewer;
    hilock *l[2];
    char host[256] = "", want[700];
    run_out *o = malloc(sizeof *o), *i;
    pid_t waiter;
    seen_view s;
    cr_assert(r && o);
    find_bin();
    gethostname(host, sizeof host - 1);
    cr_assert_eq(hilock_client_open(r->unix_url, &viewer), HILOCK_OK);
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(hilock_client_open(r->unix_url, &c[k]), HILOCK_OK);
        cr_assert_eq(hilock_sem_acquire(c[k], "sem:i", 2, 60000, 0, &l[k]), HILOCK_OK, "%s", hilock_client_errmsg(c[k]));
    }
    waiter = spawn_hilock(r, w);
    wait_exists(r, "{sem:i}:wq");
    s = look(viewer, "sem:i");
    assert_kind(&s, "semaphore", "permit", 2, 2, 1, 0);
    i = run(r, a);   /* (its output files are the waiter's too: read before the waiter ends) */
    cr_assert_eq(i->status, 0, "%s", i->err);
    cr_assert(strstr(i->out, "  holder   a semaphore (hilock --limit N): its permits below\n"),
              "%s", i->out);
    cr_assert(strstr(i->out, "  holders  2 of limit 2 (the latest grant's; each caller passes its own)\n"), "%s", i->out);
    for (int k = 0; k < 2; k++) {
        snprintf(want, sizeof want, "    permit    \"%s\" expires in ", hilock_token(l[k]));
        cr_assert(strstr(i->out, want), "%s", i->out);
    }
    snprintf(want, sizeof want, ", limit 2, host \"%s\", pid %ld, program \"%s\", granted ", host, (long)getpid(),
             program_invocation_short_name);
    cr_assert(strstr(i->out, want), "%s", i->out);
    cr_assert(strstr(i->out, "  waiters  1 waiting for a permit\n"), "%s", i->out);
    cr_assert(!strstr(i->out, "none marked") && !strstr(i->out, "queue"), "%s", i->out);
    free(i);
    i = run(r, j);
    cr_assert_eq(i->status, 0, "%s", i->err);
    cr_assert(strstr(i->out, "\"kind\":\"semaphore\","), "%s", i->out);
    cr_assert(strstr(i->out, ",\"holders\":2,\"limit\":2,\"waiters\":1,\"writers_waiting\":0,\"grants\":[{\"token\":"),
              "%s", i->out);
    snprintf(want, sizeof want, "\"mode\":\"permit\",\"pttl_ms\":");
    cr_assert(strstr(i->out, want), "%s", i->out);
    free(i);
    i = run(r, v);   /* -v names the holders of a busy semaphore */
    cr_assert_eq(i->status, 1, "%s", i->err);
    snprintf(want, sizeof want, "hilock: \"sem:i\" held by host \"%s\", pid %ld, program \"%s\", granted ", host,
             (long)getpid(), program_invocation_short_name);
    cr_assert(strstr(i->err, want), "%s", i->err);
    cr_assert(strstr(i->err, " ago (permit; its holder record: informative only)\n"), "%s", i->err);
    free(i);
    cr_assert_eq(hilock_release(l[0]), HILOCK_OK);   /* the waiter gets the permit, runs, releases */
    collect(r, waiter, 20000, o);
    cr_assert_eq(o->status, 0, "waiter: %d %s", o->status, o->err);
    s = look(viewer, "sem:i");
    cr_assert_eq(s.holders, 1);
    cr_assert_eq(s.waiters, 0);
    free(o);
    for (int k = 0; k < 2; k++) {
        hilock_free(l[k]);
        hilock_client_free(c[k]);
    }
    hilock_client_free(viewer);
    hlt_redis_stop(r);
}

/* Who waits for a shared/exclusive lock, in one line: the registered waiters by mode and a
 * plain lock's writer (its mark), which holds new readers off too (issue 36: "queue 0
 * waiting" while a plain writer and a reader waited); a plain lock's -v busy message says
 * who holds it and that they renew. */
Test(inspect, shows_who_waits_for_a_shared_exclusive_lock_a_plain_writer_included, .timeout = 60)
{
    hlt_redis *r;
    HLT_NEEDS(30200, "shared locks need Redis 3.2 (TIME in a script that writes)");
    r = hlt_redis_start(NULL);
    const char *pw[] = { "-s", r->unix_url, "-w", "30s", "rw:w", "true", NULL };
    const char *sw[] = { "-s", r->unix_url, "--shared", "-w", "30s", "rw:w", "true", NULL };
    const char *a[] = { "-s", r->unix_url, "inspect", "rw:w", NULL };
    const char *n[] = { "-s", r->unix_url, "-v", "-n", "rw:w", "true", NULL };
    hilock_client *c[2];
    hilock *l[2];
    run_out *o = malloc(sizeof *o), *i;
    pid_t writer, reader;
    cr_assert(r && o);
    find_bin();
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(hilock_client_open(r->unix_url, &c[k]), HILOCK_OK);
        cr_assert_eq(hilock_rw_acquire(c[k], "rw:w", HILOCK_SHARED, 60000, 0, &l[k]), HILOCK_OK, "%s",
                     hilock_client_errmsg(c[k]));
    }
    writer = spawn_hilock(r, pw);
    wait_exists(r, "{rw:w}:waiters");
    reader = spawn_hilock(r, sw);
    wait_exists(r, "{rw:w}:wq");
    i = run(r, a);
    cr_assert_eq(i->status, 0, "%s", i->err);
    cr_log_info("%s", i->out);
    cr_assert(strstr(i->out, "  holders  2\n"), "%s", i->out);
    cr_assert(strstr(i->out, "  waiters  1 for a shared grant, 0 for an exclusive one, and a plain lock's writer (its "
                     "mark expires in "), "%s", i->out);
    cr_assert(strstr(i->out, "): no new shared grant meanwhile\n"), "%s", i->out);
    cr_assert(!strstr(i->out, "waiters  yes") && !strstr(i->out, "queue"), "%s", i->out);
    free(i);
    i = run(r, n);
    cr_assert_eq(i->status, 1, "%s", i->err);
    cr_assert(strstr(i->err, "hilock: busy: rw:w: held shared by 2 readers, who renew their grants (the last expires in "),
              "%s", i->err);
    free(i);
    for (int k = 0; k < 2; k++) cr_assert_eq(hilock_release(l[k]), HILOCK_OK);   /* the writer, then the reader */
    collect(r, writer, 30000, o);
    cr_assert_eq(o->status, 0, "writer: %d %s", o->status, o->err);
    collect(r, reader, 30000, o);
    cr_assert_eq(o->status, 0, "reader: %d %s", o->status, o->err);
    free(o);
    for (int k = 0; k < 2; k++) {
        hilock_free(l[k]);
        hilock_client_free(c[k]);
    }
    hlt_redis_stop(r);
}

typedef struct writer_arg { const char *url; hilock_status st; char mode; } writer_arg;

/* An exclusive request that waits (its own client, as a second process would) */
static void *writer(void *p)
{
    writer_arg *w = p;
    hilock_client *c;
    hilock *l = NULL;
    if (hilock_client_open(w->url, &c) != HILOCK_OK) return NULL;
    w->st = hilock_rw_acquire(c, "rw:i", HILOCK_EXCLUSIVE, 60000, 20000, &l);
    if (l) {
        w->mode = hilock_token(l)[0];
        hilock_release(l);
        hilock_free(l);
    }
    hilock_client_free(c);
    return NULL;
}

Test(inspect_api, shows_shared_holders_and_a_waiting_writer_then_the_exclusive_holder, .timeout = 60)
{
    hlt_redis *r;
    HLT_NEEDS(30200, "shared locks need Redis 3.2 (TIME in a script that writes)");
    r = hlt_redis_started(NULL);
    hilock_client *c[2], *viewer;
    hilock *l[2];
    writer_arg wa = { NULL, HILOCK_EIO, 0 };
    pthread_t t;
    seen_view s;
    wa.url = r->unix_url;
    cr_assert_eq(hilock_client_open(r->unix_url, &viewer), HILOCK_OK);
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(hilock_client_open(r->unix_url, &c[k]), HILOCK_OK);
        cr_assert_eq(hilock_rw_acquire(c[k], "rw:i", HILOCK_SHARED, 60000, 0, &l[k]), HILOCK_OK, "%s",
                     hilock_client_errmsg(c[k]));
    }
    cr_assert_eq(pthread_create(&t, NULL, writer, &wa), 0);
    wait_exists(r, "{rw:i}:wq");
    s = look(viewer, "rw:i");
    assert_kind(&s, "rwlock", "shared", 2, -1, 1, 1);
    for (int k = 0; k < 2; k++) cr_assert_eq(hilock_release(l[k]), HILOCK_OK);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(wa.st, HILOCK_OK);
    cr_assert_eq(wa.mode, 'x');
    s = look(viewer, "rw:i");   /* released since: nothing held, nobody waits */
    cr_assert_str_eq(s.kind, "lock");
    cr_assert_eq(s.holders, 0);
    cr_assert_eq(s.waiters, 0);
    for (int k = 0; k < 2; k++) {
        hilock_free(l[k]);
        hilock_client_free(c[k]);
    }
    hilock_client_free(viewer);
    hlt_redis_stop(r);
}

Test(inventory, counts_semaphores_and_shared_exclusive_locks_and_their_aux_keys)
{
    hlt_redis *r;
    HLT_NEEDS(30200, "semaphores need Redis 3.2 (TIME in a script that writes)");
    r = hlt_redis_start(NULL);
    const char *a[] = { "-s", r->unix_url, "inventory", "k:*", "{k:*", NULL };
    const char *j[] = { "-s", r->unix_url, "inventory", "--json", "k:*", NULL };
    hilock_client *c;
    hilock *sem, *rw, *plain;
    run_out *o;
    char *s;
    cr_assert_not_null(r);
    find_bin();
    cr_assert_eq(hilock_client_open(r->unix_url, &c), HILOCK_OK);
    cr_assert_eq(hilock_sem_acquire(c, "k:sem", 3, 60000, 0, &sem), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_rw_acquire(c, "k:rw", HILOCK_SHARED, 60000, 0, &rw), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_acquire(c, "k:plain", 60000, 0, &plain), HILOCK_OK, "%s", hilock_client_errmsg(c));
    o = run(r, a);
    cr_assert_eq(o->status, 0, "%s", o->err);
    s = section(o->out, "k:*");
    cr_assert(hlt_matches(s, "semaphore +1 +1 +0 +- +- +hilock --limit \\(sorted set\\)"), "%s", s);
    cr_assert(hlt_matches(s, "rwlock +1 +1 +0 +- +- +hilock --shared \\(sorted set\\)"), "%s", s);
    cr_assert(hlt_matches(s, "modern +1 +1 +0 "), "%s", s);
    cr_assert(strstr(s, "=> modern locks only"), "%s", s);
    free(s);
    s = section(o->out, "{k:*");   /* fence counters, holder records: aux keys whatever their type */
    cr_assert(hlt_matches(s, "hilock-aux +[0-9]+ "), "%s", s);
    cr_assert_null(strstr(s, "not-a-string"), "%s", s);
    free(s);
    free(o);
    o = run(r, j);
    cr_assert_eq(o->status, 0, "%s", o->err);
    cr_assert(strstr(o->out, "\"key\":\"k:sem\",\"type\":\"zset\",\"kind\":\"semaphore\","), "%s", o->out);
    cr_assert(strstr(o->out, "\"key\":\"k:rw\",\"type\":\"zset\",\"kind\":\"rwlock\","), "%s", o->out);
    cr_assert(strstr(o->out, "\"value\":\"hilock:sem\",\"value_size\":-1}"), "%s", o->out);
    free(o);
    hilock_release(sem);
    hilock_release(rw);
    hilock_release(plain);
    hilock_free(sem);
    hilock_free(rw);
    hilock_free(plain);
    hilock_client_free(c);
    hlt_redis_stop(r);
}
