/* SPDX-License-Identifier: BSD-3-Clause */
/* util.c -- clocks, randomness, buffers, status names: the small things every path shares
 * (a client's error text is the engine's: engine/error.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base.h"

void hl_sized_init(void *dst, size_t size, const void *def, size_t ours)
{
    if (!dst) return;
    memcpy(dst, def, size < ours ? size : ours);
    if (size > ours) memset((char *)dst + ours, 0, size - ours);
}

int hl_sized_take(void *full, size_t ours, const void *src, size_t size, const size_t *ends,
                  size_t nends, const char *type, char *err, size_t err_len)
{
    size_t whole = 0;
    /* a newer header's fields: zero is "not set" (what init leaves there); anything else is
     * an option we would silently drop */
    for (size_t i = ours; i < size; i++)
        if (((const unsigned char *)src)[i]) {
            snprintf(err, err_len, "options from a newer hilock: this library (%s) knows the first "
                     "%zu bytes of %s, and byte %zu of %zu is set (an option it cannot honour)",
                     HILOCK_VERSION, ours, type, i, size);
            return -1;
        }
    /* an older header's struct ends at one of our field ends (+ padding): copy only whole
     * fields, so a field it never had keeps its default */
    for (size_t i = 0; i < nends && ends[i] <= size; i++) whole = ends[i];
    memcpy(full, src, whole);
    return 0;
}

int64_t hl_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* 0 (1970) when the clock cannot be read, never an unset timespec: every caller takes a
 * reading <= 0 as none (a fencing floor falls back, a legacy stamp is out of the window and a
 * lock never looks expired by it). */
int64_t hl_wall_us(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return 0;
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t hl_add_sat(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
    return a + b;
}

int64_t hl_round_end(hl_deadline d, int64_t now_us)
{
    int64_t end = hl_add_sat(now_us, d.per_us);
    return end < d.hard_us ? end : d.hard_us;
}

void hl_hex(char *dst, const unsigned char *src, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        dst[2 * i] = digits[src[i] >> 4];
        dst[2 * i + 1] = digits[src[i] & 15];
    }
    dst[2 * n] = '\0';
}

uint64_t hl_rng_next(uint64_t *s)
{
    uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ULL;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dULL;
}

char *hl_buf_room(hl_buf *b, size_t n)
{
    if (b->oom) return NULL;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return NULL;
        }
        b->p = p;
        b->cap = cap;
    }
    return b->p + b->len;
}

void hl_buf_put(hl_buf *b, const void *s, size_t n)
{
    char *at = hl_buf_room(b, n);
    if (!at) return;
    memcpy(at, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void hl_buf_free(hl_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

char *hl_strndup(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *hl_strdup(const char *s)
{
    return s ? hl_strndup(s, strlen(s)) : NULL;
}

uint64_t hl_key_hash(const char *key)
{
    uint64_t h = 14695981039346656037ull;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) h = (h ^ *p) * 1099511628211ull;
    return h;
}

size_t hl_key_cut(const char *key, char *tail, size_t cap)
{
    size_t n = strlen(key);
    if (n <= HL_KEY_SHOWN) return tail[0] = '\0', n;
    snprintf(tail, cap, "...(%zu bytes)", n);
    return HL_KEY_SHOWN;
}

const char *hl_key_shown(const char *key, char *buf, size_t cap)
{
    char tail[HL_KEY_TAIL_BUF];
    size_t m = hl_key_cut(key, tail, sizeof tail);
    if (!tail[0]) return key;
    snprintf(buf, cap, "%.*s%s", (int)m, key, tail);
    return buf;
}

const char *hl_ms_shown(long long ms, char *buf, size_t cap)
{
    if (ms < 1000) snprintf(buf, cap, "%lld ms", ms);
    else if (ms < 60000) snprintf(buf, cap, "%.1f s", (double)ms / 1000);
    else if (ms < 3600000) snprintf(buf, cap, "%.1f min", (double)ms / 60000);
    else if (ms < 86400000) snprintf(buf, cap, "%.1f h", (double)ms / 3600000);
    else snprintf(buf, cap, "%.1f d", (double)ms / 86400000);
    return buf;
}

const char *hilock_strerror(hilock_status s)
{
    switch (s) {
    case HILOCK_OK:         return "ok";
    case HILOCK_BUSY:       return "lock is held by someone else";
    case HILOCK_NOT_HELD:   return "lock is no longer held (expired, released or taken)";
    case HILOCK_LOST:       return "a failover happened since acquisition: ownership cannot be trusted";
    case HILOCK_EINVAL:     return "invalid argument or option";
    case HILOCK_EIO:        return "cannot connect, or the connection broke";
    case HILOCK_ETIMEDOUT:  return "a round trip took longer than io_timeout_ms";
    case HILOCK_EAUTH:      return "authentication or ACL refused";
    case HILOCK_EREPLY:     return "server error or unexpected reply";
    case HILOCK_EREPLICAS:  return "too few replicas acknowledged; the lock was undone";
    case HILOCK_ENOQUORUM:  return "too few masters answered to decide";
    case HILOCK_ENOMEM:     return "out of memory";
    case HILOCK_ECANCELED:  return "cancelled";
    }
    return "unknown status";
}

const char *hilock_version(void)
{
    return HILOCK_VERSION;
}

/* Control characters would break the record's lines (and an operator's terminal). */
static size_t holder_part(char *dst, const char *src, size_t max)
{
    size_t n = 0;
    for (; src[n] && n < max; n++) dst[n] = (unsigned char)src[n] < 0x20 || src[n] == 0x7f ? '?' : src[n];
    return n;
}

void hl_holder_text(char *buf, size_t cap)
{
    char host[256], part[3 * 64 + 24];
    size_t n;
    if (gethostname(host, sizeof host) != 0) strcpy(host, "?");
    host[sizeof host - 1] = '\0';
    n = holder_part(part, host[0] ? host : "?", 64);
    n += (size_t)sprintf(part + n, "\n%ld\n", (long)getpid());
    n += holder_part(part + n, hl_plat_progname()[0] ? hl_plat_progname() : "?", 64);
    snprintf(buf, cap, "%.*s", (int)n, part);
}
