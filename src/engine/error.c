/* SPDX-License-Identifier: BSD-3-Clause */
/* error.c -- a client's error text (c->errmsg): set by every layer from the engine up, so it
 * lives with the client struct (engine.h), not in base/, which knows no client. */
#include <stdarg.h>
#include <stdio.h>

#include "engine.h"

hilock_status hl_fail(hilock_client *c, hilock_status st, const char *fmt, ...)
{
    if (c) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
        va_end(ap);
    }
    return st;
}

hilock_status hl_ok(hilock_client *c)
{
    if (c) c->errmsg[0] = '\0';
    return HILOCK_OK;
}

hilock_status hl_fail_nodes(hilock_client *c, hilock_status st, uint32_t mask, const char *what)
{
    size_t off = 0;
    const char *sep = "";   /* "what" is a prefix: the first node follows it directly */
    int w = snprintf(c->errmsg, sizeof c->errmsg, "%s", what ? what : "");
    off = w > 0 ? (size_t)w : 0;
    for (size_t i = 0; i < c->nnodes && off < sizeof c->errmsg; i++) {
        if (!(mask & (1u << i)) || !c->nodes[i].err[0]) continue;
        w = snprintf(c->errmsg + off, sizeof c->errmsg - off, "%s%s", sep, c->nodes[i].err);
        if (w > 0) off += (size_t)w;
        sep = "; ";
    }
    return st;
}
