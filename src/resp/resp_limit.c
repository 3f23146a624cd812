/* SPDX-License-Identifier: BSD-3-Clause */
/* resp_limit.c -- what one server reply may cost, checked before the RESP parser sees it.
 *
 * hiredis 0.14 (Debian's) has no limits of its own: "*2147483647\r\n" makes it calloc the
 * element table at once (16 GiB), and "$2000000000" makes it buffer whatever follows until
 * the length is reached. So the engine passes every byte it reads through this framer first:
 * a pure function over bytes (no I/O, no allocation), which follows the RESP2 framing --
 * type byte, header line, bulk payload, aggregate element counts, nesting -- and refuses a
 * reply as soon as it announces or reaches more than a cap, before the bytes are handed on.
 *
 * The caps (lock.h) are far above any reply hilock asks for: the scripts answer at most
 * 6 small elements (failover.lua) and a value of a few dozen bytes (a token or a legacy
 * stamp); a hilock_scan page (inspect.c) 1 + 5 elements per key, 500 keys asked, values cut at
 * 256 bytes; ROLE on a master is 3 + 3 per replica; SENTINEL master is ~80 short fields; the
 * longest error line Redis sends is a few hundred bytes (a Lua error with its traceback).
 * Anything past them comes from something that is not a Redis server answering hilock. The
 * one exception is a cluster's topology (CLUSTER NODES: grows with the nodes): a stream that
 * carries only that (hl_resp_allow_topology) may take HL_RESP_MAX_TOPOLOGY bytes in one bulk
 * string and one reply. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "resp.h"

enum { S_TYPE = 0, S_LINE, S_BULK };

void hl_resp_limit_init(hl_resp_limit *f) { memset(f, 0, sizeof *f); }

static int refuse(hl_resp_limit *f, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(hl_resp_limit *f, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->why, sizeof f->why, fmt, ap);
    va_end(ap);
    f->failed = rc;
    return rc;
}

/* A leaf element (or an aggregate whose last element just ended) is complete. */
static void elem_done(hl_resp_limit *f)
{
    while (f->depth > 0) {
        if (--f->left[f->depth - 1] > 0) return;
        f->depth--;   /* that aggregate is complete: an element of its parent */
    }
    f->bytes = 0;     /* a whole reply: the next one starts from nothing */
    f->elements = 0;
    f->replies++;
}

/* The header line of a '$' or '*' has ended: act on its length. */
static int header_done(hl_resp_limit *f)
{
    long long v = 0;
    size_t i = 0;
    int neg = 0;
    if (f->hlen > 0 && f->hdr[0] == '-') neg = i = 1;
    if (i == f->hlen) return refuse(f, HL_RESP_PROTOCOL, "empty length");
    for (; i < f->hlen; i++) {
        if (f->hdr[i] < '0' || f->hdr[i] > '9')
            return refuse(f, HL_RESP_PROTOCOL, "bad length");
        v = v * 10 + (f->hdr[i] - '0');   /* at most 15 digits: no overflow */
    }
    if (neg) {
        if (v != 1) return refuse(f, HL_RESP_PROTOCOL, "negative length -%lld", v);
        elem_done(f);   /* $-1, *-1: nil */
        return 0;
    }
    if (f->type == '$') {
        long long cap = f->topology ? HL_RESP_MAX_TOPOLOGY : HL_RESP_MAX_BULK;
        if (v > cap)
            return refuse(f, HL_RESP_TOO_LARGE, "bulk string of %lld bytes (limit %lld)", v, cap);
        f->bulk_left = (uint64_t)v + 2;   /* and its CRLF */
        f->state = S_BULK;
        return 0;
    }
    if (v > HL_RESP_MAX_ELEMENTS)
        return refuse(f, HL_RESP_TOO_LARGE, "array of %lld elements (limit %d)", v, HL_RESP_MAX_ELEMENTS);
    if ((long long)f->elements + v > HL_RESP_MAX_TOTAL)
        return refuse(f, HL_RESP_TOO_LARGE, "%lld elements in one reply (limit %d)",
                      (long long)f->elements + v, HL_RESP_MAX_TOTAL);
    f->elements += (size_t)v;
    if (v == 0) {
        elem_done(f);
        return 0;
    }
    if (f->depth >= HL_RESP_MAX_DEPTH)
        return refuse(f, HL_RESP_TOO_LARGE, "arrays nested %lld deep (limit %d)", f->depth + 1LL,
                      HL_RESP_MAX_DEPTH);
    f->left[f->depth++] = v;
    return 0;
}

int hl_resp_limit_feed(hl_resp_limit *f, const char *p, size_t n)
{
    size_t i = 0;
    if (f->failed) return f->failed;
    while (i < n) {
        unsigned char ch = (unsigned char)p[i];
        size_t take = 1;
        if (f->state == S_BULK) take = n - i < f->bulk_left ? n - i : (size_t)f->bulk_left;
        f->bytes += take;   /* reset when the reply completes (elem_done) */
        if (f->bytes > (f->topology ? HL_RESP_MAX_TOPOLOGY + 64 : HL_RESP_MAX_REPLY))
            return refuse(f, HL_RESP_TOO_LARGE, "more than %lld bytes in one reply",
                          f->topology ? HL_RESP_MAX_TOPOLOGY + 64LL : (long long)HL_RESP_MAX_REPLY);
        i += take;
        switch (f->state) {
        case S_TYPE:
            if (ch != '+' && ch != '-' && ch != ':' && ch != '$' && ch != '*')
                return refuse(f, HL_RESP_PROTOCOL, "unknown reply type byte 0x%02x", ch);
            f->type = (char)ch;
            f->hlen = f->line = 0;
            f->cr = 0;
            f->state = S_LINE;
            break;
        case S_LINE:   /* up to CRLF, as hiredis reads a line */
            if (ch == '\n' && f->cr) {
                f->state = S_TYPE;
                if (f->type != '$' && f->type != '*') elem_done(f);
                else if (f->hlen--, header_done(f)) return f->failed;   /* (hlen-- drops the CR) */
                break;
            }
            f->cr = ch == '\r';
            if (++f->line > HL_RESP_MAX_BULK)
                return refuse(f, HL_RESP_TOO_LARGE, "a line of more than %lld bytes",
                              (long long)HL_RESP_MAX_BULK);
            if (f->type == '$' || f->type == '*') {
                if (f->hlen >= sizeof f->hdr)   /* the caps have far fewer digits */
                    return refuse(f, HL_RESP_TOO_LARGE, "a length field longer than %zu bytes",
                                  sizeof f->hdr - 1);
                f->hdr[f->hlen++] = (char)ch;
            }
            break;
        default:   /* S_BULK: payload and CRLF, skipped in one step */
            f->bulk_left -= take;
            if (f->bulk_left == 0) {
                f->state = S_TYPE;
                elem_done(f);
            }
        }
    }
    return 0;
}
