/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Layer: base
 * May call: platform
 *
 * base.h -- what every layer of the library shares: time, randomness, byte buffers, memory
 * helpers, status names (util.c), server URLs (url.c) and the embedded Lua scripts (scripts.c, generated).
 * Owns no state and calls nothing of the library (a client's error text is the
 * engine's: engine.h): every other header builds on it.
 */
#ifndef HILOCK_BASE_H
#define HILOCK_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "hilock.h"
#include "platform.h"   /* randomness, sleeping: below every layer */

#define HL_ERRMSG_MAX 512

/* ---- time (util.c) ---- */
int64_t hl_now_us(void);               /* CLOCK_MONOTONIC, microseconds   */
int64_t hl_wall_us(void);              /* CLOCK_REALTIME, microseconds    */
#define HL_NEVER INT64_MAX             /* "no deadline" */
int64_t hl_add_sat(int64_t a, int64_t b);   /* a + b, saturating at INT64_MAX/MIN */
/* A call's time, the one type every layer passes down (lock -> topology -> engine): each of
 * its round trips (a connect, a pipeline, a wait) may take per_us from when it starts, and
 * nothing of it runs past hard_us, the call's end (hl_now_us's clock). */
typedef struct hl_deadline {
    int64_t per_us;    /* one round trip's time (a duration) */
    int64_t hard_us;   /* the call's end (a time; HL_NEVER: none) */
} hl_deadline;
static inline hl_deadline hl_deadline_of(int64_t per_us, int64_t hard_us)
{
    hl_deadline d = { per_us, hard_us };
    return d;
}
/* The end of the round trip of d that starts at now_us: per_us from then, never past hard_us
 * (a slow step adds no time to the call's bound). The one clamp every layer uses. */
int64_t hl_round_end(hl_deadline d, int64_t now_us);
/* d cut to the one round trip that starts at now_us: a side question of a call (its
 * redirects and resends too) takes no more than that, and never past the call's end */
static inline hl_deadline hl_one_round(hl_deadline d, int64_t now_us)
{
    return hl_deadline_of(d.per_us, hl_round_end(d, now_us));
}
/* sleeping (hl_plat_sleep_until) and the kernel's random bytes (hl_plat_random): platform.h */

/* ---- randomness (util.c) ---- */
void     hl_hex(char *dst, const unsigned char *src, size_t n);  /* dst: 2n+1 bytes */
uint64_t hl_rng_next(uint64_t *state);                  /* xorshift64*, for jitter only */

/* ---- growable byte buffer (util.c) ---- */
typedef struct hl_buf {
    char  *p;
    size_t len, cap;
    int    oom;        /* sticky: set once an append failed */
} hl_buf;
void hl_buf_put(hl_buf *b, const void *s, size_t n);
/* Room for n more bytes (and a NUL) at the end: where to write them, then add n to len
 * (keeping the NUL is the writer's); NULL when out of memory (oom is then set). */
char *hl_buf_room(hl_buf *b, size_t n);
void hl_buf_free(hl_buf *b);

/* ---- URLs (url.c) ---- */
typedef enum hl_url_kind { HL_URL_TCP, HL_URL_UNIX, HL_URL_SENTINEL, HL_URL_CLUSTER } hl_url_kind;

typedef struct hl_hostport {
    char *host;        /* no brackets for IPv6 */
    int   port;
} hl_hostport;

typedef struct hl_url {
    hl_url_kind  kind;
    char        *host;      /* TCP */
    int          tls;       /* rediss://, rediss-sentinel:// (TLS to the Sentinels and the nodes),
                               rediss-cluster:// */
    int          port;
    char        *path;      /* UNIX */
    char        *user;      /* NULL = no ACL user */
    char        *pass;      /* NULL = no AUTH */
    int          db;        /* SELECT when > 0 */
    hl_hostport *sentinels; /* SENTINEL: the Sentinels; CLUSTER: the seed nodes; in order */
    size_t       nsentinels;
    char        *master;    /* SENTINEL: master name */
    char        *sentinel_user;   /* SENTINEL: the Sentinels' own AUTH (query), NULL = none */
    char        *sentinel_pass;
} hl_url;

/* Parse `s` into *u (zeroed first). Returns OK, EINVAL (why in err, err_len bytes) or ENOMEM.
 * On failure nothing needs freeing. */
hilock_status hl_url_parse(const char *s, hl_url *u, char *err, size_t err_len);
void          hl_url_free(hl_url *u);
/* The next secret in `s` (a URL, well formed or not) at or after `from`: where it starts, *len
 * its length (> 0), or NULL. A secret is the password of the user info -- from the first ':'
 * after "://" to the LAST '@' of s, so that an unencoded '/', '?', '#' or '@' in it stays
 * hidden (when the '@' is not the user info's, more is hidden than needed, never less) -- and
 * each sentinel_password= value (up to '&' or '#'). One rule for the library's messages
 * (hl_url_shown) and for the hilock command, which links libhilock.a and masks its argv. */
const char   *hl_url_secret(const char *s, const char *from, size_t *len);
/* `s` as a message may echo it: each secret (hl_url_secret) as "***", at most 120 bytes of
 * it. Written into buf; returns buf. */
const char   *hl_url_shown(const char *s, char *buf, size_t cap);

/* ---- what messages show (util.c): one rule each for the library and the hilock command ---- */
/* A key as messages show it (hilock.h): itself, or (longer than HL_KEY_SHOWN bytes) its
 * first HL_KEY_SHOWN bytes and "...(N bytes)". hl_key_cut: how many of the key's bytes are
 * shown, the rest of the form ("" or "...(N bytes)") written into tail (HL_KEY_TAIL_BUF
 * bytes), for the command, which shows those bytes printable. hl_key_shown: the whole form,
 * the key itself or written into buf (HL_KEY_SHOWN_BUF bytes). */
#define HL_KEY_SHOWN     64
#define HL_KEY_TAIL_BUF  32
#define HL_KEY_SHOWN_BUF (HL_KEY_SHOWN + HL_KEY_TAIL_BUF)
/* The words a BUSY's message uses for a holder without a TTL (lock.c), which the command
 * looks for to warn before it waits (cli/main.c): one spelling for both. */
#define HL_NO_TTL " has no TTL: "
size_t      hl_key_cut(const char *key, char *tail, size_t cap);
const char *hl_key_shown(const char *key, char *buf, size_t cap);
/* A duration as messages show it: "850 ms", "4.2 s", "12.5 min", "5.0 h", "3.1 d" (ms >= 0).
 * Written into buf (HL_MS_SHOWN_BUF bytes); returns buf. */
#define HL_MS_SHOWN_BUF 40
const char *hl_ms_shown(long long ms, char *buf, size_t cap);

/* ---- scripts (scripts.c, generated from src/lua/NAME.lua) ---- */
typedef struct hl_script {
    const char *name;
    const char *body;
    size_t      len;
    const char *sha;    /* 40 hex, computed at build time */
    const struct hl_script *plain;   /* the same without its "#!lua flags" line (a comment
                                        there), for servers before 7.0; NULL: none */
} hl_script;
extern const hl_script hl_lua_acquire, hl_lua_release, hl_lua_extend;
extern const hl_script hl_lua_acquire_busy;   /* modern.c: the unfenced kind's busy path */
extern const hl_script hl_lua_check, hl_lua_fence_raise;   /* lock.c: check, Redlock fencing */
extern const hl_script hl_lua_types;      /* lock.c: which key a WRONGTYPE answer is about */
extern const hl_script hl_lua_fair;       /* fair.c: the fair lock's queue */
extern const hl_script hl_lua_permits;    /* permits.c: semaphores, shared/exclusive locks */
extern const hl_script hl_lua_undo;       /* engine.c: an unknown write's undo, by value or member */
extern const hl_script hl_lua_failover;   /* topology.c: master identity, failover guard */
extern const hl_script hl_lua_guarded;    /* guarded.c: a command run only while the lock holds */
extern const hl_script hl_lua_legacy_acquire, hl_lua_legacy_extend;   /* legacy/lua: legacy, bridge */

/* ---- Redis Cluster hash slots (slot.c) ---- */
#define HL_SLOTS 16384
/* The slot of key[0..len) as the cluster specification defines it: CRC16 (XMODEM) mod 16384
 * of the hash tag -- the bytes between the first '{' and the first '}' after it, when there
 * are any -- or of the whole key. */
unsigned hl_key_slot(const char *key, size_t len);
/* A short string whose slot is `slot` (< HL_SLOTS), the same in every process and version
 * (the first match of a fixed search), written to buf (at least 16 bytes). */
void hl_slot_tag(unsigned slot, char *buf);
/* A key's FNV-1a hash, 64 bits: a client's own tables (its live locks, its holder-record
 * memo), not a secret and not a Cluster slot. */
uint64_t hl_key_hash(const char *key);

/* memory helpers: NULL on failure */
char *hl_strdup(const char *s);
char *hl_strndup(const char *s, size_t n);

/* The holder record's text for this process (acquire.lua and permits.lua write it, inspect
 * reads it): "host\npid\nprogram", control characters made '?', host and program cut at 64
 * bytes each: informative only (docs/fencing.md). At most HL_HOLDER_MAX - 1 bytes + NUL. */
#define HL_HOLDER_MAX 160
void hl_holder_text(char *buf, size_t cap);

/* A client's tag: HL_TAG_LEN hex digits from the kernel's random bytes, the same in every
 * token the client makes (their last digits: lock.c), so that one record per client and key,
 * "tag\nhost\npid\nprogram" ({key}:holder, acquire.lua), names the holder of every grant the
 * client is given there: written when another client's grant wrote it last, not per grant. */
#define HL_TAG_LEN 12

/* Public structs that grow (lock.h: HL_FIELD_END, docs/versioning.md): */
/* Give the caller's `size` bytes at dst what the library's full `def` (ours bytes) holds,
 * zero past ours. */
void hl_sized_init(void *dst, size_t size, const void *def, size_t ours);
/* Read the caller's `size` bytes at src into the library's full struct `full` (ours bytes,
 * holding the defaults): every field wholly inside `size`. Returns 0, or -1 when a byte past
 * `ours` is set -- a field of a newer header this library cannot honour; err then says so
 * (naming `type`). */
int hl_sized_take(void *full, size_t ours, const void *src, size_t size, const size_t *ends,
                  size_t nends, const char *type, char *err, size_t err_len);

#endif
