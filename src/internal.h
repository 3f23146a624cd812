/*
 * internal.h -- the engine shared by the modern, legacy and Redlock paths.
 * Nothing here is API. hiredis is only ever included by resp.c (the RESP reader).
 */
#ifndef HILOCK_INTERNAL_H
#define HILOCK_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "hilock.h"
#include "hilock_legacy.h"   /* HILOCK_CODEC_MAX: a lock's value may be a legacy stamp */

#define HL_ERRMSG_MAX 512

/* ---- time (util.c) ---- */
int64_t hl_now_us(void);               /* CLOCK_MONOTONIC, microseconds   */
int64_t hl_wall_us(void);              /* CLOCK_REALTIME, microseconds    */
void    hl_sleep_until(int64_t t_us);  /* monotonic; returns at or after t_us */
#define HL_NEVER INT64_MAX             /* "no deadline" */
int64_t hl_add_sat(int64_t a, int64_t b);   /* a + b, saturating at INT64_MAX/MIN */

/* ---- randomness (util.c) ---- */
int      hl_random_bytes(void *buf, size_t n);          /* getrandom(); 0 ok, -1 error */
void     hl_hex(char *dst, const unsigned char *src, size_t n);  /* dst: 2n+1 bytes */
uint64_t hl_rng_next(uint64_t *state);                  /* xorshift64*, for jitter only */

/* ---- growable byte buffer (util.c) ---- */
typedef struct hl_buf {
    char  *p;
    size_t len, cap;
    int    oom;        /* sticky: set once an append failed */
} hl_buf;
void hl_buf_put(hl_buf *b, const void *s, size_t n);
void hl_buf_free(hl_buf *b);

/* ---- URLs (url.c) ---- */
typedef enum hl_url_kind { HL_URL_TCP, HL_URL_UNIX, HL_URL_SENTINEL } hl_url_kind;

typedef struct hl_hostport {
    char *host;        /* no brackets for IPv6 */
    int   port;
} hl_hostport;

typedef struct hl_url {
    hl_url_kind  kind;
    char        *host;      /* TCP */
    int          port;
    char        *path;      /* UNIX */
    char        *user;      /* NULL = no ACL user */
    char        *pass;      /* NULL = no AUTH */
    int          db;        /* SELECT when > 0 */
    hl_hostport *sentinels; /* SENTINEL: the list, in order */
    size_t       nsentinels;
    char        *master;    /* SENTINEL: master name */
    char        *sentinel_user;   /* SENTINEL: the Sentinels' own AUTH (query), NULL = none */
    char        *sentinel_pass;
} hl_url;

/* Parse `s` into *u (zeroed first). Returns OK, EINVAL (why in err, err_len bytes) or ENOMEM.
 * On failure nothing needs freeing. */
hilock_status hl_url_parse(const char *s, hl_url *u, char *err, size_t err_len);
void          hl_url_free(hl_url *u);

/* ---- replies, reply limits, the parser (resp.h: resp.c, resp_limit.c) ---- */
#include "resp.h"

/* ---- what one script reply means (lock.c): pure functions of a reply, no I/O, so the
 * fuzzers (fuzz/) can feed them any reply a server or a broken proxy could send ---- */
typedef enum hl_verdict {
    HL_V_BAD = 0,   /* an error reply, or a shape the script never returns */
    HL_V_OURS,      /* acquire: granted; release/extend/check: our value was there */
    HL_V_GONE,      /* release/extend/check: no such key */
    HL_V_OTHER      /* held by another value (acquire: *pttl_ms = its PTTL) */
} hl_verdict;
hl_verdict hl_acquire_verdict(const hl_reply *r, uint64_t *fence, long long *pttl_ms);
hl_verdict hl_tristate_verdict(const hl_reply *r);                   /* release, extend */
hl_verdict hl_check_verdict(const hl_reply *r, const char *token);   /* GET key */
hl_verdict hl_check_pttl_verdict(const hl_reply *r, long long *pttl_ms);  /* check.lua */

/* ---- scripts (scripts.c, generated from src/lua/NAME.lua) ---- */
typedef struct hl_script {
    const char *name;
    const char *body;
    size_t      len;
    const char *sha;    /* 40 hex, computed at build time */
} hl_script;
extern const hl_script hl_lua_acquire, hl_lua_release, hl_lua_extend;
extern const hl_script hl_lua_check, hl_lua_fence_raise;   /* lock.c: check, Redlock fencing */
extern const hl_script hl_lua_failover;   /* topology.c: master identity, failover guard */
extern const hl_script hl_lua_legacy_acquire, hl_lua_legacy_extend;   /* legacy/lua: legacy, bridge */

/* ---- commands ---- */
#define HL_MAX_ARGS 12
#define HL_MAX_CMDS 4

/* One command of a pipeline: a script call (EVALSHA, EVAL on NOSCRIPT) or a plain command.
 * argv/len are borrowed for the duration of the call. */
typedef struct hl_cmd {
    const hl_script *script;   /* NULL: plain command argv[0..argc) */
    int              nkeys;    /* script: argv[0..nkeys) are KEYS, the rest ARGV */
    int              argc;
    const char      *argv[HL_MAX_ARGS];
    size_t           arglen[HL_MAX_ARGS];
} hl_cmd;

void hl_cmd_init(hl_cmd *c, const hl_script *script, int nkeys);
void hl_cmd_arg(hl_cmd *c, const char *s, size_t len);  /* len (size_t)-1 = strlen */
void hl_cmd_argi(hl_cmd *c, char *scratch24, long long v);   /* integer arg in scratch */

/* ---- nodes and the client ---- */
struct hl_conn;   /* a node's connection, opaque outside engine.c */
struct hl_transport_ops;   /* transport.h */

typedef struct hl_undo {   /* a write whose fate is unknown: delete it by value on next contact */
    char   *key;
    char   *value;
    int64_t expires_us;    /* monotonic: by then the key has surely expired; the undo is dropped */
} hl_undo;
#define HL_UNDO_MAX   64   /* per node; past it the oldest is dropped (it expires by its ttl) */
#define HL_UNDO_CHUNK 8    /* per round trip, ahead of the caller's commands */

typedef struct hl_node {
    hl_url          url;
    char           *name;        /* "127.0.0.1:6379" / "/tmp/r.sock" (no password) */
    const struct hl_transport_ops *transport;   /* how to reach it (client.c assigns it) */
    struct hl_conn *conn;        /* NULL = not connected */
    hl_undo        *undo;        /* oldest first */
    size_t          nundo, capundo;
    struct hl_topo *topo;        /* Sentinel nodes: the Sentinels, the master in use (topology.c) */
    /* result of the last hl_exec on this node */
    hilock_status   st;
    int             wrote;       /* bytes of its commands were written: they may have run */
    char            err[200];
    hl_reply       *reply[HL_MAX_CMDS];
} hl_node;

struct hilock_client {
    int            refs;         /* the user's reference + one per live lock */
    hilock_options opt;          /* deep copy: servers point into owned strings */
    char         **servers;
    size_t         nnodes;
    hl_node       *nodes;
    size_t         quorum;       /* nnodes/2 + 1 */
    uint64_t       rng;
    hl_buf         obuf;         /* pipeline scratch, reused so a round trip allocates nothing */
    unsigned long  fork_gen;     /* hl_fork_gen when made: another value = a forked child's copy */
    long           pid;          /* the process that made it (for the message) */
    char           errmsg[HL_ERRMSG_MAX];
};

/* ---- public structs that grow (docs/versioning.md) ----
 * A caller passes the size of the struct its header declared; fields are only ever
 * appended. `ends` lists where each field the library knows ends, in order. */
#define HL_FIELD_END(type, f) (offsetof(type, f) + sizeof(((type *)0)->f))
/* The sizes of 0.1.0, the first release: what the plain hilock_options_init,
 * hilock_client_new, hilock_keepalive_options_init and hilock_keepalive_ex entry points (the
 * symbols binaries built before the _sized functions call) read and write. Frozen. */
#define HL_OPTIONS_V0_SIZE HL_FIELD_END(hilock_options, failover_guard_ms)
#define HL_KEEPALIVE_OPTIONS_V0_SIZE HL_FIELD_END(hilock_keepalive_options, max_hold_ms)
/* Give the caller's `size` bytes at dst what the library's full `def` (ours bytes) holds,
 * zero past ours. */
void hl_sized_init(void *dst, size_t size, const void *def, size_t ours);
/* Read the caller's `size` bytes at src into the library's full struct `full` (ours bytes,
 * holding the defaults): every field wholly inside `size`. Returns 0, or -1 when a byte past
 * `ours` is set -- a field of a newer header this library cannot honour; err then says so
 * (naming `type`). */
int hl_sized_take(void *full, size_t ours, const void *src, size_t size, const size_t *ends,
                  size_t nends, const char *type, char *err, size_t err_len);

/* fork(): a child's copy of a client (and of its locks, and their keepalives) shares the
 * parent's connections and names threads that do not exist in the child. It may only be
 * freed, memory only. hl_fork_gen counts forks in this process's ancestry (pthread_atfork,
 * registered by hilock_client_new), so the check is a load and a compare, not a getpid()
 * system call per call. hl_forked: is c such a copy? hl_check_fork: EINVAL with the
 * message if it is, else OK. */
extern unsigned long hl_fork_gen;
int           hl_forked(const hilock_client *c);
hilock_status hl_check_fork(hilock_client *c);

void hl_client_ref(hilock_client *c);
void hl_client_unref(hilock_client *c);

/* Set c->errmsg (printf-style) and return st; hl_ok() clears it and returns HILOCK_OK. */
hilock_status hl_fail(hilock_client *c, hilock_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
hilock_status hl_ok(hilock_client *c);
/* errmsg from the nodes' own errors ("node: why; node: why") with the given status. */
hilock_status hl_fail_nodes(hilock_client *c, hilock_status st, uint32_t mask, const char *what);

/* Run the same pipeline of `ncmd` commands on every node in `mask` (bit i = node i), all at
 * once: connect where needed (handshake and pending undos go first), write, and read the
 * replies, under one poll() loop. Each node stops at its own deadline:
 * min(now + per_node_timeout_us, hard_deadline_us). Fills node->st, node->err,
 * node->reply[0..ncmd) (free with hl_exec_clear). A timed-out or broken connection is
 * closed (it reconnects on the next call). Script commands answered NOSCRIPT are sent again
 * as EVAL, within the same deadline. Returns the mask of nodes with st == OK (all replies,
 * which may still be error replies). */
uint32_t hl_exec(hilock_client *c, uint32_t mask, const hl_cmd *cmds, int ncmd,
                 int64_t per_node_timeout_us, int64_t hard_deadline_us);
/* hl_exec for blocking commands (BLPOP) on several nodes: returns as soon as one node's
 * last reply carries data (not nil, not an error); the nodes still waiting are abandoned:
 * closed (no stale reply can arrive later; the next call reconnects), st = ETIMEDOUT. */
uint32_t hl_exec_any(hilock_client *c, uint32_t mask, const hl_cmd *cmds, int ncmd,
                     int64_t per_node_timeout_us, int64_t hard_deadline_us);
void     hl_exec_clear(hilock_client *c);
uint32_t hl_all_nodes(const hilock_client *c);

/* Remember that `value` may have been written to `key` (with a ttl of ttl_ms) on node i:
 * deleted if still equal, before anything else, on the next contacts with that node.
 * Bounded: a duplicate is not added again, an undo is forgotten once the ttl has surely
 * passed, at most HL_UNDO_MAX are kept per node (the oldest go), and each round trip sends
 * at most HL_UNDO_CHUNK of them. Callers add one only when the write may have reached the
 * server (node->wrote after hl_exec, or a grant seen). */
void hl_undo_add(hilock_client *c, size_t i, const char *key, const char *value, int64_t ttl_ms);

/* Map an error reply to a status (NOPERM/WRONGPASS/NOAUTH -> EAUTH, else EREPLY) and write
 * "node: text" to node->err. */
hilock_status hl_node_reply_error(hl_node *n, const hl_reply *r);

/* Close node i's connection (next call reconnects). */
void hl_node_close(hl_node *n);

/* ---- locks ---- */
typedef enum hl_kind { HL_MODERN = 0, HL_LEGACY, HL_BRIDGE } hl_kind;

struct hl_keepalive;

struct hilock {
    hilock_client *c;
    hl_kind        kind;
    char          *key;
    char          *fence_key;
    char          *signal_key;     /* wait.c: list a release pushes to, to wake one waiter */
    char          *waiters_key;    /* wait.c: set by busy attempts, so the release signals */
    char          *token;          /* NUL-terminated value we wrote */
    int64_t        ttl_ms;
    int64_t        valid_until_us; /* monotonic; 0 after release */
    uint64_t       fence;
    uint32_t       held;           /* nodes where the value was written */
    uint32_t       freed;          /* release: nodes that confirmed deleting our value */
    uint32_t       rel_pending;    /* release: sent while valid, no answer (may have landed) */
    int            released;
    /* HL_LEGACY / HL_BRIDGE (legacy.c): the stamp in token, by the wall clock (+ clock_offset_ms)
     * and pinned to the monotonic clock; and an expired value that the next acquire attempt
     * may replace ("" = none) */
    int64_t        stamp_us, stamp_mono_us;
    char           expect[HILOCK_CODEC_MAX];
    struct hl_keepalive *ka;
    struct hl_lockid    *ids;      /* topology.c: per node, the master history it was granted in */
};

/* aux key in the same hash slot as `key`: "{key}<suffix>", or "key<suffix>" if key has a tag */
char *hl_aux_key(const char *key, const char *suffix);

/* ttl_ms - elapsed - (ttl_ms * drift + 2 ms), as an absolute monotonic deadline */
int64_t hl_valid_until(const hilock_client *c, int64_t ttl_ms, int64_t t0_us);

/* Common argument checks; return EINVAL with a message or OK. */
hilock_status hl_check_key(hilock_client *c, const char *key);
hilock_status hl_check_ttl(hilock_client *c, int64_t ttl_ms);

/* Jittered pause before the next attempt: mean retry_delay_ms, capped by hint_us (e.g. the
 * holder's remaining PTTL; <= 0 = no hint) and by the deadline. */
int64_t hl_next_attempt(hilock_client *c, int64_t hint_us, int64_t deadline_us);

/* ---- seams owned by other files ---- */
/* legacy/legacy.c: release, extend and check of HL_LEGACY and HL_BRIDGE locks */
hilock_status hl_legacy_release(hilock *l);
hilock_status hl_legacy_extend(hilock *l, int64_t ttl_ms);
hilock_status hl_legacy_check(hilock *l);
/* legacy/legacy.c: acquire attempts of HL_LEGACY and HL_BRIDGE locks, inside lock.c's
 * attempt(). hl_legacy_cmd: a fresh stamp into l->token and the legacy_acquire.lua call
 * (a_px, a_keep: 24-byte scratch); EINVAL for a client with several servers or a timeout
 * eaten by drift + skew_margin_ms. hl_legacy_busy: judges the value a busy reply
 * {0, pttl, value} carries and sets the BUSY message (naming key and value); returns the
 * wait hint: -1 = an expired stamp, replace it now (l->expect), > 0 = us until it passes or
 * its TTL ends, 0 = none. hl_legacy_valid_until: validity, never past our own stamp, less
 * skew_margin_ms. */
hilock_status hl_legacy_cmd(hilock *l, hl_cmd *cmd, char *a_px, char *a_keep);
int64_t       hl_legacy_busy(hilock *l, const hl_reply *r);
int64_t       hl_legacy_valid_until(const hilock *l, int64_t t0_us);
/* src/lock.c: the acquire loop of every kind (hilock_acquire: HL_MODERN, or HL_BRIDGE with
 * options.bridge; hilock_legacy_acquire: HL_LEGACY), so they share timing, retries, errors. */
hilock_status hl_acquire(hilock_client *c, const char *key, int64_t ttl_ms, int64_t wait_ms,
                         hl_kind kind, hilock **out);
/* src/wait.c: pause between acquire attempts until the holder's release (or hint_us, the
 * holder's remaining PTTL, or the deadline): the waiting strategy lives in one place. */
void hl_wait_turn(hilock *l, int64_t hint_us, int64_t deadline_us);
/* How long (ms) a busy attempt marks the lock awaited (acquire.lua ARGV[5]): at least as
 * long as the wait that follows it can last; 0 = this caller will not wait. */
int64_t hl_wait_mark_ms(const hilock *l, int64_t deadline_us);
/* src/keepalive.c: stop and join the lock's keepalive thread, if any (release and free).
 * In a forked child (hl_forked) it only frees the keepalive's memory: the thread and the
 * state of its mutexes belong to the parent. */
void hl_keepalive_stop(hilock *l);
/* While a keepalive runs, its thread renews the lock (hilock_extend on a copy bound to its
 * own client) and writes back ttl_ms, valid_until_us and held. So the owner's calls that
 * write them (extend, check) run between hl_keepalive_op(l, 1) and (l, 0): one at a time
 * with the renewals; and readers outside those use hl_lock_valid_until. No-ops (plain
 * reads) without a keepalive. */
void    hl_keepalive_op(hilock *l, int begin);
int64_t hl_lock_valid_until(const hilock *l);

/* ---- failover awareness (topology.c) ---- */
/* engine.c, on a new connection of a Sentinel node: ask its Sentinels (in order, each bounded
 * by a short timeout, all by deadline_us) for the master. OK with *host, *port (owned by the
 * node, valid until the next resolve), or an error status with n->st and n->err set:
 * EIO (no Sentinel answered), EINVAL (none of those that answered knows the master name). */
hilock_status hl_topo_resolve(hilock_client *c, hl_node *n, int64_t deadline_us,
                              const char **host, int *port);
/* engine.c, handshake of that connection: OK if ROLE says master, else EIO with n->err set. */
hilock_status hl_topo_role(hl_node *n, const hl_reply *role);
void          hl_topo_free(hl_node *n);   /* client.c: the node's Sentinel state; NULL-safe */

typedef enum hl_topo_kind { HL_TOPO_ACQUIRE, HL_TOPO_EXTEND, HL_TOPO_RELEASE, HL_TOPO_CHECK } hl_topo_kind;

/* One lock operation's failover part: commands it added to the pipeline, what it found. */
typedef struct hl_topo_op {
    hl_topo_kind  kind;
    int           id_at, wait_at;  /* pipeline index of failover.lua / WAIT; -1: not sent */
    int64_t       extra_us;        /* add to the per-node timeout: WAIT's share of the round trip */
    uint32_t      refused;         /* acquire: the failover guard refused (the value is gone) */
    uint32_t      undo;            /* acquire: granted, not safely (WAIT short, ...): undone */
    uint32_t      moved;           /* acquire: granted on a master the Sentinels no longer name */
    uint32_t      short_acks;      /* extend: WAIT short (the lock keeps its old validity) */
    uint32_t      lost;            /* extend, release, check: no proof the lock survived */
    hilock_status err;             /* the status of refused / undo / short_acks */
    char          arg[4][24];
} hl_topo_op;

/* Before the round trip of a lock operation: append failover.lua (Sentinel clients, or
 * failover_guard = 1) and WAIT (min_replicas > 0; acquire and extend) after cmds[0..n);
 * returns the new count. Release, extend and check first ask a Sentinel whether the master
 * moved (closing the connection if so). Nothing for legacy/bridge locks. */
int  hl_topo_begin(hilock_client *c, hilock *l, hl_topo_op *op, hl_topo_kind kind,
                   int64_t ttl_ms, hl_cmd *cmds, int n);
/* After hl_exec, before hl_exec_clear: read those replies on the nodes in ok (granted: where
 * the acquire script granted) and fill op's masks; node->err says why for each. Acquire:
 * records where the lock was granted, undoes unsafe grants at once, and asks a Sentinel
 * whether the master in use is still the master (see topology.c for when it asks). */
void hl_topo_end(hilock_client *c, hilock *l, hl_topo_op *op, uint32_t ok, uint32_t granted);
/* The fencing token of a grant on the nodes in granted: Sentinel config-epoch << 42 | low. */
uint64_t hl_topo_fence(const hilock_client *c, uint32_t granted, uint64_t low);
/* LOST, with the nodes' reasons in errmsg ("<op> <key>: ..."). */
hilock_status hl_topo_lost(hilock_client *c, hilock *l, const char *op, uint32_t lost);

/* memory helpers: NULL on failure */
char *hl_strdup(const char *s);
char *hl_strndup(const char *s, size_t n);

#endif
