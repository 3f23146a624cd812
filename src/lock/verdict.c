/* SPDX-License-Identifier: BSD-3-Clause */
/* verdict.c -- what one script reply means (lock.h): pure functions of a reply, no I/O and no
 * lock, so the fuzzers (fuzz/) can feed them any reply a server or a broken proxy could send,
 * and the kind seam's default (kind.c) and lock.c's quorum both read replies through them. */
#include <string.h>

#include "lock.h"

/* acquire.lua answers {1, fence} or {0, pttl} (legacy_acquire.lua adds the value it found,
 * {0, pttl, value}, which the legacy kind's busy reads; a grant that read its holder record
 * adds the ms the record lives, {1, fence, kept}: hl_acquire_kept).
 * Any other shape is not an answer of our scripts (a proxy, a foreign script under our SHA, a
 * broken server) and is BAD, never read as a grant, a loss or a foreign owner: fuzz/fuzz_reply.c
 * found that {1, "x"} granted a lock with fence 0, {1, -5} one with fence 2^64 - 5, an integer
 * 2 from release/extend meant "another owner", and an integer or an array from GET meant
 * "gone". A PTTL beyond HL_PTTL_MAX (centuries) is refused so callers may do pttl * 1000 + 1. */
#define HL_PTTL_MAX (INT64_MAX / 2000)

int hl_pttl_ok(const hl_reply *r)
{
    return hl_reply_type(r) == HL_R_INTEGER && hl_reply_int(r) >= -2 && hl_reply_int(r) <= HL_PTTL_MAX;
}

hl_verdict hl_acquire_verdict(const hl_reply *r, uint64_t *fence, long long *pttl_ms)
{
    const hl_reply *s = hl_reply_elem(r, 0), *n = hl_reply_elem(r, 1);
    *fence = 0;
    *pttl_ms = 0;
    if (hl_reply_nelem(r) < 2 || hl_reply_nelem(r) > 4 || hl_reply_type(s) != HL_R_INTEGER) return HL_V_BAD;
    if (hl_reply_int(s) == 1 && (hl_reply_nelem(r) == 2 || hl_acquire_kept(r) >= 0) &&
        hl_reply_type(n) == HL_R_INTEGER && hl_reply_int(n) > 0) {
        *fence = (uint64_t)hl_reply_int(n);
        return HL_V_OURS;
    }
    if (hl_reply_int(s) != 0 || !hl_pttl_ok(n)) return HL_V_BAD;
    *pttl_ms = hl_reply_int(n);
    return HL_V_OTHER;
}

int64_t hl_acquire_kept(const hl_reply *r)
{
    const hl_reply *s = hl_reply_elem(r, 0), *k = hl_reply_elem(r, 2);
    if (hl_reply_nelem(r) != 3 || hl_reply_type(s) != HL_R_INTEGER || hl_reply_int(s) != 1 ||
        hl_reply_type(k) != HL_R_INTEGER || hl_reply_int(k) < 0 || hl_reply_int(k) > HL_PTTL_MAX)
        return -1;
    return hl_reply_int(k);
}

/* Only the two answers SET NX gives: a status "OK" and nil. */
hl_verdict hl_set_nx_verdict(const hl_reply *r, uint64_t *fence, long long *pttl_ms)
{
    size_t len;
    const char *s = hl_reply_str(r, &len);
    *fence = 0;
    *pttl_ms = 0;
    if (hl_reply_type(r) == HL_R_NIL) return HL_V_OTHER;
    return hl_reply_type(r) == HL_R_STATUS && len == 2 && !memcmp(s, "OK", 2) ? HL_V_OURS : HL_V_BAD;
}

/* release.lua / extend.lua answer 1 (ours), 0 (gone) or -1 (another value). */
hl_verdict hl_tristate_verdict(const hl_reply *r)
{
    if (hl_reply_type(r) != HL_R_INTEGER) return HL_V_BAD;
    switch (hl_reply_int(r)) {
    case 1:  return HL_V_OURS;
    case 0:  return HL_V_GONE;
    case -1: return HL_V_OTHER;
    default: return HL_V_BAD;
    }
}


/* check.lua answers {1, pttl} (ours), {0, -2} (gone) or {-1, pttl} (another value). */
hl_verdict hl_check_pttl_verdict(const hl_reply *r, long long *pttl_ms)
{
    long long s;
    *pttl_ms = 0;
    if (hl_reply_nelem(r) != 2 || hl_reply_type(hl_reply_elem(r, 0)) != HL_R_INTEGER ||
        !hl_pttl_ok(hl_reply_elem(r, 1)))
        return HL_V_BAD;
    s = hl_reply_int(hl_reply_elem(r, 0));
    if (s != 1 && s != 0 && s != -1) return HL_V_BAD;
    *pttl_ms = hl_reply_int(hl_reply_elem(r, 1));
    return s == 1 ? HL_V_OURS : s == 0 ? HL_V_GONE : HL_V_OTHER;
}
