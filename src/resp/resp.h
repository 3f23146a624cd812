/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Layer: resp
 * May call: base platform
 *
 * resp.h -- the RESP layer: what a server's byte stream means (resp.c, resp_limit.c).
 *
 * Owns: the reply type and its accessors, the reply limits, and the parser (hiredis' reader,
 * the only part of hiredis the library uses; resp.c is the one file that includes hiredis).
 * May call: nothing of the library but base (it sits below the engine). Nothing here does
 * I/O: the engine reads bytes through the transport (transport.h) and feeds them here.
 */
#ifndef HILOCK_RESP_H
#define HILOCK_RESP_H

#include <stddef.h>
#include <stdint.h>

/* ---- replies: a thin view of the parser's reply type (resp.c) ---- */
typedef struct redisReply hl_reply;
enum { HL_R_STRING = 1, HL_R_ARRAY, HL_R_INTEGER, HL_R_NIL, HL_R_STATUS, HL_R_ERROR };
int         hl_reply_type(const hl_reply *r);
long long   hl_reply_int(const hl_reply *r);
const char *hl_reply_str(const hl_reply *r, size_t *len);   /* STRING, STATUS, ERROR */
size_t      hl_reply_nelem(const hl_reply *r);
hl_reply   *hl_reply_elem(const hl_reply *r, size_t i);
void        hl_reply_free(hl_reply *r);
/* r is an error reply starting with `prefix` ("READONLY", "NOSCRIPT") */
int         hl_reply_is_error(const hl_reply *r, const char *prefix);

/* ---- reply limits (resp_limit.c): every byte read from a server passes here before the
 * RESP parser, so no reply can cost more than these (hiredis 0.14 has no limits: an array
 * header makes it allocate the element table at once, a bulk header makes it buffer all that
 * follows). Far above anything hilock receives (see resp_limit.c): a reply over them is
 * refused with HILOCK_EREPLY "reply too large: ..." and its connection closed. ---- */
#define HL_RESP_MAX_BULK     65536       /* bytes in one bulk string or one status/error line */
#define HL_RESP_MAX_ELEMENTS 8192        /* elements of one array (a hilock_scan page: 1 + 5 per key) */
#define HL_RESP_MAX_TOTAL    16384       /* elements of all the arrays of one reply */
#define HL_RESP_MAX_DEPTH    7           /* arrays inside arrays (hiredis itself stops at 8) */
#define HL_RESP_MAX_REPLY    (1 << 20)   /* bytes of one reply */
/* A connection that asks only for a cluster's topology (cluster.c: CLUSTER NODES, one
 * bulk string of ~100-300 bytes per node, plus its slot ranges) may read one bulk string and
 * one reply of up to this many bytes (hl_resp_allow_topology): a 1,000-node cluster whose
 * every node announces a 255-byte host name and whose every slot is a range of its own stays
 * under 1 MiB. The element caps stay as they are. */
#define HL_RESP_MAX_TOPOLOGY (2 << 20)
enum { HL_RESP_TOO_LARGE = -1, HL_RESP_PROTOCOL = -2, HL_RESP_NOMEM = -3 };

typedef struct hl_resp_limit {   /* zeroed = at the start of a reply */
    int       state, failed, cr, depth;
    char      type;
    char      hdr[16];           /* a '$' or '*' length being read */
    size_t    hlen, line;
    uint64_t  bulk_left;         /* payload + CRLF still to come */
    long long left[HL_RESP_MAX_DEPTH];   /* elements still to come, per open array */
    size_t    bytes, elements;   /* of the reply being read */
    unsigned long long replies;  /* complete replies framed so far */
    char      why[96];           /* what was refused */
    int       topology;          /* HL_RESP_MAX_TOPOLOGY for a bulk string and a reply */
} hl_resp_limit;

void hl_resp_limit_init(hl_resp_limit *f);
/* Frame n more bytes of a reply stream. 0: within the limits (hand them to the parser);
 * HL_RESP_TOO_LARGE: a limit was passed; HL_RESP_PROTOCOL: not RESP2. Then f->why says what
 * ("array of 2147483647 elements (limit 4096)") and every later call returns the same. */
int  hl_resp_limit_feed(hl_resp_limit *f, const char *p, size_t n);

/* ---- one connection's reply stream (resp.c): the limits, then the parser ---- */
typedef struct hl_resp hl_resp;
hl_resp *hl_resp_new(void);            /* NULL: out of memory */
void     hl_resp_free(hl_resp *s);     /* NULL-safe; frees replies not taken yet */
/* The stream's replies may be a cluster's topology: up to HL_RESP_MAX_TOPOLOGY bytes. */
void     hl_resp_allow_topology(hl_resp *s);
/* n bytes read from the server. 0, or HL_RESP_TOO_LARGE / HL_RESP_PROTOCOL (the limits
 * refused them: nothing reached the parser, and the stream is dead: close the connection)
 * or HL_RESP_NOMEM; hl_resp_why says what. */
int      hl_resp_feed(hl_resp *s, const char *p, size_t n);
/* The next complete reply: 1 with *out (owned by the caller: hl_reply_free), 0 none yet,
 * -1 the parser refused the stream (hl_resp_why). */
int      hl_resp_next(hl_resp *s, hl_reply **out);
const char *hl_resp_why(const hl_resp *s);

#endif
