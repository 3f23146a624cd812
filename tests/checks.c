/* SPDX-License-Identifier: BSD-3-Clause */
/* checks.c -- see checks.h */
#include <criterion/criterion.h>
#include <regex.h>
#include <stdlib.h>

#include "checks.h"

void hlt_set(hlt_redis *r, const char *key, const char *v, long long px)
{
    redisReply *rep = px > 0 ? hlt_cmd(r, "SET %s %s PX %lld", key, v, px) : hlt_cmd(r, "SET %s %s", key, v);
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
}

void hlt_holds(hlt_redis *r, const char *key, const char *v)
{
    char *got = hlt_get(r, key);
    if (!v) cr_assert_null(got, "%s holds \"%s\"", key, got);
    else {
        cr_assert_not_null(got, "%s is gone, expected \"%s\"", key, v);
        cr_assert_str_eq(got, v);
    }
    free(got);
}

hlt_redis *hlt_redis_started(const char *extra)
{
    hlt_redis *r = hlt_redis_start(extra);
    cr_assert_not_null(r, "redis-server %s did not start", extra ? extra : "");
    return r;
}

void hlt_release_gone(hlt_redis *r, hilock_client *c, hilock *l, const char *key)
{
    hilock_status st = hilock_release(l);
    cr_assert_eq(st, HILOCK_OK, "release %s: %s (%s)", key, hilock_strerror(st), c ? hilock_client_errmsg(c) : "");
    cr_assert_eq(hlt_exists(r, key), 0, "%s is still there after its release", key);
    hilock_free(l);
}

int hlt_matches(const char *s, const char *re)
{
    regex_t rx;
    int ok;
    cr_assert_eq(regcomp(&rx, re, REG_EXTENDED | REG_NOSUB), 0);
    ok = regexec(&rx, s, 0, NULL, 0) == 0;
    regfree(&rx);
    return ok;
}
