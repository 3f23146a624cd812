/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_reply.c -- libFuzzer target for the reply limits (src/resp/resp_limit.c) and for what
 * hilock makes of a server's reply to each of its
 * scripts (src/lock/lock.c: hl_acquire_verdict, hl_tristate_verdict, hl_check_pttl_verdict;
 * legacy/legacy.c: the legacy kind's busy, which reads the value a legacy holder left;
 * src/kinds/permits.c: the semaphore's and shared/exclusive lock's busy, which read
 * permits.lua's {0, pttl, {why, held, limit}}) and
 * for the error mapping (hl_node_reply_error).
 *
 * The input is raw RESP bytes, as a server (or a broken proxy) could send them; the engine's
 * reply stream (src/resp/resp.c: the limits, then hiredis' reader) turns them into replies, exactly
 * as on a live connection. Each reply is then
 * judged as the answer to every script, and the verdict must follow the scripts' contract:
 *   acquire.lua   {1, fence>0} = granted with that fence; {0, pttl} = busy; else BAD
 *                 (legacy_acquire.lua: {0, pttl, value}; the value is judged by the codec)
 *   release.lua / extend.lua / legacy_extend.lua   1 = ours, 0 = gone, -1 = another value
 *   check.lua     {1|0|-1, pttl}
 *   SET NX PX (options.fencing = 0: hl_set_nx_verdict)   +OK = granted, fence 0; nil = busy
 * with pttl a real PTTL (-2, -1 or a number of ms a server could hold).
 * A verdict outside this (e.g. "granted" with no usable fence) is a bug: abort. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "lock.h"
#include "hilock_legacy.h"
#include "legacy.h"   /* hl_kind_legacy */
#include "kinds.h"    /* hl_kind_sem, hl_kind_exclusive, hl_kind_shared */

#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "fuzz_reply: %s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
    abort(); } } while (0)

#define PTTL_MAX (INT64_MAX / 2000)   /* lock.c refuses more: callers compute pttl * 1000 + 1 */

static int is_pttl(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_INTEGER && r->integer >= -2 && r->integer <= PTTL_MAX;
}

static int is_int(const redisReply *r, long long v)
{
    return r && r->type == REDIS_REPLY_INTEGER && r->integer == v;
}

static void judge_acquire(const redisReply *r)
{
    uint64_t fence = 42;
    long long pttl = 42;
    hl_verdict v = hl_acquire_verdict(r, &fence, &pttl);
    int64_t kept = hl_acquire_kept(r);
    /* a grant: {1, fence} or {1, fence, kept}, kept the ms its holder record lives (0 ..
     * PTTL_MAX) */
    int with_kept = r->type == REDIS_REPLY_ARRAY && r->elements == 3 && is_int(r->element[0], 1) &&
                    is_pttl(r->element[2]) && r->element[2]->integer >= 0;
    int shape = r->type == REDIS_REPLY_ARRAY && (r->elements == 2 || with_kept) &&
                r->element[1]->type == REDIS_REPLY_INTEGER;
    CHECK(with_kept ? kept == r->element[2]->integer : kept == -1);
    switch (v) {
    case HL_V_OURS:
        CHECK(shape && is_int(r->element[0], 1) && r->element[1]->integer > 0);
        CHECK(fence == (uint64_t)r->element[1]->integer && fence > 0);
        break;
    case HL_V_OTHER:   /* {0, pttl}, {0, pttl, n} (a shared/exclusive lock), {0, pttl, 'watch', left} */
        CHECK(r->type == REDIS_REPLY_ARRAY && r->elements >= 2 && r->elements <= 4);
        CHECK(is_int(r->element[0], 0) && is_pttl(r->element[1]));
        CHECK(pttl == r->element[1]->integer && fence == 0);
        break;
    case HL_V_BAD:
        CHECK(fence == 0);
        CHECK(!(shape && is_int(r->element[0], 1) && r->element[1]->integer > 0));
        CHECK(!(r->type == REDIS_REPLY_ARRAY && r->elements >= 2 && r->elements <= 4 &&
                is_int(r->element[0], 0) && is_pttl(r->element[1])));
        break;
    default:
        CHECK(!"acquire verdict out of range");
    }
}

static void judge_set_nx(const redisReply *r)
{
    uint64_t fence = 42;
    long long pttl = 42;
    hl_verdict v = hl_set_nx_verdict(r, &fence, &pttl);
    CHECK(fence == 0 && pttl == 0);
    CHECK((v == HL_V_OURS) == (r->type == REDIS_REPLY_STATUS && r->len == 2 && !memcmp(r->str, "OK", 2)));
    CHECK((v == HL_V_OTHER) == (r->type == REDIS_REPLY_NIL));
    CHECK(v == HL_V_OURS || v == HL_V_OTHER || v == HL_V_BAD);
}

static void judge_tristate(const redisReply *r)
{
    hl_verdict v = hl_tristate_verdict(r);
    CHECK((v == HL_V_OURS) == is_int(r, 1));
    CHECK((v == HL_V_GONE) == is_int(r, 0));
    CHECK((v == HL_V_OTHER) == is_int(r, -1));
    CHECK(v == HL_V_OURS || v == HL_V_GONE || v == HL_V_OTHER || v == HL_V_BAD);
}

static void judge_check_pttl(const redisReply *r)
{
    long long pttl = 42;
    hl_verdict v = hl_check_pttl_verdict(r, &pttl);
    int shape = r->type == REDIS_REPLY_ARRAY && r->elements == 2 && is_pttl(r->element[1]) &&
                r->element[0]->type == REDIS_REPLY_INTEGER;
    CHECK((v == HL_V_OURS) == (shape && is_int(r->element[0], 1)));
    CHECK((v == HL_V_GONE) == (shape && is_int(r->element[0], 0)));
    CHECK((v == HL_V_OTHER) == (shape && is_int(r->element[0], -1)));
    CHECK(v == HL_V_BAD ? pttl == 0 : pttl == r->element[1]->integer);
}

/* The value a busy legacy_acquire.lua reply carries, judged with each preset codec. The
 * answer is a pause (us, >= 0), or -1 = "it has passed: replace exactly that value", which
 * only a parseable stamp without TTL may produce, and then l->expect is that value. */
static hilock_client *legacy_client[6];

static void judge_legacy_busy(const redisReply *r)
{
    static const char *const names[6] = { "doc", "node-redis-lock", "jedis-lock", "redis-objects",
                                           "redis-py-2", "ruby-redis-lock" };
    uint64_t fence;
    long long pttl;
    if (hl_acquire_verdict(r, &fence, &pttl) != HL_V_OTHER) return;   /* as attempt() does */
    for (int i = 0; i < 6; i++) {
        hilock l;
        hilock_codec k;
        int64_t stamp, hint;
        if (!legacy_client[i]) {
            hilock_options o;
            const char *url = "unix:///nonexistent/fuzz.sock";   /* never contacted */
            hilock_options_init(&o);
            o.servers = &url;
            o.nservers = 1;
            CHECK(hilock_codec_preset(names[i], &o.codec) == HILOCK_OK);
            CHECK(hilock_client_new(&o, &legacy_client[i]) == HILOCK_OK);
        }
        memset(&l, 0, sizeof l);
        l.c = legacy_client[i];
        l.kind = &hl_kind_legacy;
        l.key = (char *)"fuzz";
        l.ttl_ms = 1000;
        hint = hl_kind_legacy.busy(&l, r);
        CHECK(memchr(l.expect, '\0', sizeof l.expect) != NULL);
        CHECK(hilock_client_errmsg(l.c)[0] != '\0');
        if (hint == -1) {
            const redisReply *v = r->elements == 3 ? r->element[2] : NULL;
            CHECK(pttl < 0 && v && v->type == REDIS_REPLY_STRING);
            CHECK(hilock_codec_preset(names[i], &k) == HILOCK_OK);
            CHECK(hilock_codec_parse(&k, v->str, v->len, &stamp) == HILOCK_OK);
            CHECK(strlen(l.expect) == v->len && !memcmp(l.expect, v->str, v->len));
        } else {
            CHECK(hint >= 0 && l.expect[0] == '\0');
        }
    }
}

/* The sorted-set kinds' busy: whatever the third element holds, a message and no pause of
 * its own (the pttl is the hint), as attempt() calls it. */
static hilock_client *permits_client;

static void judge_permits_busy(const redisReply *r)
{
    static const hl_kind_ops *const kinds[3] = { &hl_kind_sem, &hl_kind_exclusive, &hl_kind_shared };
    uint64_t fence;
    long long pttl;
    if (hl_acquire_verdict(r, &fence, &pttl) != HL_V_OTHER) return;
    if (!permits_client) {
        hilock_options o;
        const char *url = "unix:///nonexistent/fuzz.sock";   /* never contacted */
        hilock_options_init(&o);
        o.servers = &url;
        o.nservers = 1;
        CHECK(hilock_client_new(&o, &permits_client) == HILOCK_OK);
    }
    for (int i = 0; i < 3; i++) {
        hilock l;
        memset(&l, 0, sizeof l);
        l.c = permits_client;
        l.kind = kinds[i];
        l.key = (char *)"fuzz";
        l.limit = 3;
        l.ttl_ms = 1000;
        CHECK(kinds[i]->busy(&l, r) == 0);
        CHECK(hilock_client_errmsg(l.c)[0] != '\0');
    }
}

static void judge_error(const redisReply *r)
{
    hl_node n;
    hilock_status st;
    memset(&n, 0, sizeof n);
    n.name = (char *)"127.0.0.1:6379";
    st = hl_node_reply_error(&n, r);
    /* READONLY: a replica now; LOADING, BUSY, MASTERDOWN: transient (EIO, retried);
     * NOREPLICAS: min-replicas-to-write */
    CHECK(st == HILOCK_EREPLY || st == HILOCK_EAUTH || st == HILOCK_EIO || st == HILOCK_EREPLICAS);
    CHECK(n.st == st);
    CHECK(memchr(n.err, '\0', sizeof n.err) && !strncmp(n.err, "127.0.0.1:6379: ", 16));
    if (r->type == REDIS_REPLY_ERROR) {   /* the mapping (engine.c), in its order of precedence */
        if (!strncmp(r->str, "WRONGPASS", 9) || !strncmp(r->str, "NOPERM", 6) || !strncmp(r->str, "NOAUTH", 6) ||
            strstr(r->str, "unauthenticated")) {   /* "ERR Protocol error: unauthenticated ..." */
            CHECK(st == HILOCK_EAUTH);
            return;
        }
        if (!strncmp(r->str, "LOADING", 7) || !strncmp(r->str, "READONLY", 8) ||
            !strncmp(r->str, "BUSY ", 5) || !strncmp(r->str, "MASTERDOWN", 10))
            CHECK(st == HILOCK_EIO);   /* transient: retried while waiting */
        if (!strncmp(r->str, "NOREPLICAS", 10)) CHECK(st == HILOCK_EREPLICAS);
    }
}

/* walk the accessors the library uses on every element, with out-of-range indexes too */
static void walk(const redisReply *r, int depth)
{
    size_t len = 99;
    const char *s = hl_reply_str(r, &len);
    CHECK(s ? len == r->len : len == 0);
    CHECK(hl_reply_elem(r, hl_reply_nelem(r)) == NULL);
    for (size_t i = 0; i < hl_reply_nelem(r) && depth < 8; i++) walk(hl_reply_elem(r, i), depth + 1);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* The reply limits (src/resp/resp_limit.c) in front of the parser, as in the engine: the input
 * reaches hiredis only if they accept it. They must frame the same way whatever the read
 * sizes (one call, or chunks of 1..7 bytes), and on input they accept and hiredis parses,
 * count the same replies. Inputs past the limits never reach hiredis, so a hostile length
 * (hiredis 0.14 allocates an array's element table as soon as it reads "*<count>") would
 * show up here as an allocation over libFuzzer's malloc limit. */
static int limits_accept(const unsigned char *d, size_t n, unsigned long long *replies)
{
    hl_resp_limit one, chunked;
    size_t step = n ? (size_t)(d[0] % 7) + 1 : 1;
    int rc1, rc2 = 0;
    hl_resp_limit_init(&one);
    hl_resp_limit_init(&chunked);
    rc1 = hl_resp_limit_feed(&one, (const char *)d, n);
    for (size_t i = 0; i < n && rc2 == 0; i += step)
        rc2 = hl_resp_limit_feed(&chunked, (const char *)d + i, n - i < step ? n - i : step);
    CHECK(rc1 == rc2);
    CHECK(rc1 == 0 || rc1 == HL_RESP_TOO_LARGE || rc1 == HL_RESP_PROTOCOL);
    CHECK(!strcmp(one.why, chunked.why) && (rc1 == 0) == (one.why[0] == '\0'));
    if (rc1 == 0) CHECK(one.replies == chunked.replies && one.depth <= HL_RESP_MAX_DEPTH);
    else CHECK(hl_resp_limit_feed(&one, "+OK\r\n", 5) == rc1);   /* a refusal is final */
    *replies = chunked.replies;
    return rc1 == 0;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    hl_resp *rs;
    unsigned long long framed = 0, parsed = 0;
    int err = 0;
    if (!limits_accept(data, size, &framed) || !(rs = hl_resp_new())) return 0;
    /* the engine's own reply stream (src/resp/resp.c): the limits, then hiredis' reader */
    if (hl_resp_feed(rs, (const char *)data, size) == 0) {
        for (;;) {
            hl_reply *r;
            int got = hl_resp_next(rs, &r);
            if (got < 0) err = 1;
            if (err || !got) break;
            parsed++;
            if (parsed > 64) {   /* judged enough: count the rest */
                hl_reply_free(r);
                continue;
            }
            judge_acquire(r);
            judge_set_nx(r);
            judge_tristate(r);
            judge_check_pttl(r);
            judge_legacy_busy(r);
            judge_permits_busy(r);
            judge_error(r);
            walk(r, 0);
            hl_reply_free(r);
        }
        CHECK(err || parsed == framed);
    }
    hl_resp_free(rs);
    return 0;
}
