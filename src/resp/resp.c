/* SPDX-License-Identifier: BSD-3-Clause */
/* resp.c -- the reply parser, behind the reply limits; the one file that includes hiredis.
 *
 * hiredis is used here as what it is best at, the RESP reader (redisReader), and nothing
 * else: the engine owns its connections (tcp.c) and its writes (RESP encoding in
 * engine.c). Every byte goes through hl_resp_limit_feed (resp_limit.c) before the reader
 * sees it, so a hostile length can never make hiredis allocate it. A move to hiredis 1.x (or
 * another parser) is a change of this file. Below the engine (resp.h); calls nothing above. */
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "resp.h"

struct hl_resp {
    redisReader  *rd;
    hl_resp_limit lim;
    const char   *why;   /* the last refusal */
};

/* ---- replies ---- */

int hl_reply_type(const hl_reply *r) { return r ? r->type : 0; }
long long hl_reply_int(const hl_reply *r) { return r ? r->integer : 0; }
size_t hl_reply_nelem(const hl_reply *r) { return r && r->type == REDIS_REPLY_ARRAY ? r->elements : 0; }
void hl_reply_free(hl_reply *r) { if (r) freeReplyObject(r); }

const char *hl_reply_str(const hl_reply *r, size_t *len)
{
    if (!r || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS &&
               r->type != REDIS_REPLY_ERROR)) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = r->len;
    return r->str;
}

hl_reply *hl_reply_elem(const hl_reply *r, size_t i)
{
    return i < hl_reply_nelem(r) ? r->element[i] : NULL;
}

int hl_reply_is_error(const hl_reply *r, const char *prefix)
{
    return r && r->type == REDIS_REPLY_ERROR && r->str && !strncmp(r->str, prefix, strlen(prefix));
}

/* ---- the stream ---- */

hl_resp *hl_resp_new(void)
{
    hl_resp *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    if (!(s->rd = redisReaderCreate())) {
        free(s);
        return NULL;
    }
    hl_resp_limit_init(&s->lim);
    s->why = "";
    return s;
}

void hl_resp_allow_topology(hl_resp *s) { s->lim.topology = 1; }

void hl_resp_free(hl_resp *s)
{
    if (!s) return;
    redisReaderFree(s->rd);
    free(s);
}

int hl_resp_feed(hl_resp *s, const char *p, size_t n)
{
    int lim = hl_resp_limit_feed(&s->lim, p, n);
    if (lim != 0) {
        s->why = s->lim.why;
        return lim;
    }
    if (redisReaderFeed(s->rd, p, n) != REDIS_OK) {
        s->why = "out of memory";
        return HL_RESP_NOMEM;
    }
    return 0;
}

int hl_resp_next(hl_resp *s, hl_reply **out)
{
    void *r = NULL;
    *out = NULL;
    if (redisReaderGetReply(s->rd, &r) != REDIS_OK) {
        s->why = s->rd->errstr;
        return -1;
    }
    *out = r;
    return r != NULL;
}

const char *hl_resp_why(const hl_resp *s) { return s->why; }
