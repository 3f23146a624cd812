/* SPDX-License-Identifier: BSD-3-Clause */
/* client.h -- nodes and their connections, the runner and cancel tables, the client struct
 * (part of the engine layer: engine.h states its rules and includes it) */
#ifndef HILOCK_ENGINE_CLIENT_H
#define HILOCK_ENGINE_CLIENT_H

#include <pthread.h>

#include "hilock_observe.h"
#include "cmd.h"
#include "transport.h"

/* ---- nodes and the client ---- */
struct hl_transport_ops;   /* transport.h */
struct hl_topo_ops;        /* below */
struct hl_topo;            /* a topology's per-node state, opaque to the engine */

typedef struct hl_undo {   /* a write whose fate is unknown: delete it by value on next contact */
    char   *key;
    char   *value;
    int64_t expires_us;    /* monotonic: by then the key has surely expired; the undo is dropped */
} hl_undo;
#define HL_UNDO_MAX   64   /* per node; past it the oldest is dropped (it expires by its ttl) */
#define HL_UNDO_CHUNK 8    /* per round trip, ahead of the caller's commands */

/* What a connection's handshake read of its server (hl_handshake_judge): committed to its
 * node whole, by the connection that owns the node's facts, once the handshake is done
 * (hl_handshake_commit) -- never by a waiter's side connection, never half (INFO read, TIME
 * not yet: a clock of 0 that nothing would read again). */
typedef struct hl_facts {
    int     version;      /* Redis-compatible, major*10000+minor*100+patch; 0 unknown */
    char    server[40];   /* "Redis 2.8.24", "Valkey 8.0.1" (messages); "" unknown */
    char    run_id[48];   /* "" = not read */
    int64_t clock_ms;     /* its TIME in ms when read, 0 unknown */
    int64_t clock_at_us;  /* monotonic, when read (or when wall_ms was) */
    int64_t wall_ms;      /* TIME not read: the client's wall clock then, counted as a
                             reading (hl_node_clock_floor_ms); else 0 */
} hl_facts;

/* One connection to a node: the transport's connection, its reply stream and its unsent
 * bytes. Made and read by engine.c's functions below (the blocking runner's node->conn, or a
 * connection of the loop runner, async.c). */
struct hl_conn {
    hl_io_conn    io;           /* the transport's connection (node->transport) */
    hl_resp      *resp;         /* every byte read: the reply limits, then the parser */
    int           connecting;   /* non-blocking connect in progress */
    int           fresh;        /* handshake (AUTH, SELECT) not sent yet */
    hl_buf        out;          /* bytes not yet accepted by the transport */
    size_t        off;
    int64_t       last_us;      /* when its last round trip ended (monotonic) */
    int64_t       opened_us;    /* when its connect started (observe.c: CONNECT's duration) */
    hl_facts      facts;        /* what its handshake has read so far */
    int           databases;    /* CONFIG GET databases, read just before SELECT (a URL's
                                   /db): for SELECT's refusal; 0 unknown */
};

typedef struct hl_node {
    hl_url          url;
    char           *name;        /* "127.0.0.1:6379" / "/tmp/r.sock" (no password) */
    const struct hl_transport_ops *transport;   /* how to reach it (client.c assigns it) */
    const void     *transport_cfg;   /* its settings (hl_io_conn.cfg; TLS: the context), or NULL */
    struct hl_conn *conn;        /* NULL = not connected */
    hl_undo        *undo;        /* oldest first */
    size_t          nundo, capundo;
    const struct hl_topo_ops *topo;   /* where its master is (client.c assigns it) */
    /* A Redlock member (direct or Sentinel): the client's nodes, which must be distinct
     * servers. Each new connection (to the master, for Sentinel) reads its server's run_id
     * (INFO server, in the handshake) and is refused if a peer's is the same: the same
     * server under two names. An error reply (INFO not allowed) leaves the run_id unknown.
     * NULL = no check (one node; a Cluster member). */
    struct hl_node *peers;
    size_t          npeers;
    /* The server's facts (run_id, version, name, clock), read by every new connection's
     * handshake (INFO server, TIME) into its own hl_conn.facts and copied here whole by the
     * connection that owns the node: see hl_node_version, hl_node_server_ms. */
    hl_facts        facts;
    unsigned long   connects;    /* connections whose handshake was done (observe.c: reconnects) */
    unsigned        hs_skip;     /* handshake commands its peer closed the connection on (a
                                    proxy: twemproxy and INFO), left out since: 1 << HS_* of
                                    engine.c (hl_handshake_closed) */
    struct hl_topo *topo_state;  /* that topology's own (Sentinel: the Sentinels, the master in use) */
    int             topology_replies;   /* its connections ask for a cluster's topology: replies
                                           up to HL_RESP_MAX_TOPOLOGY (hl_resp_allow_topology) */
    /* result of the last hl_exec on this node */
    hilock_status   st;
    int             wrote;       /* bytes of its commands were written: they may have run */
    char            err[200];
    hl_reply       *reply[HL_MAX_CMDS];
} hl_node;

/* Who drives the round trips of a client's calls (engine.c: hl_exec). NULL = the blocking
 * poll() loop of engine.c. A client attached to an event loop (async.c) gets a runner
 * that queues the pipeline on the loop's connections and suspends the calling flow until
 * the loop has its replies, so every lock flow above runs unchanged on either. */
typedef struct hl_runner {
    uint32_t (*exec)(hilock_client *c, uint32_t mask, const hl_cmd *cmds, int ncmd, hl_deadline dl, int any);
    void (*pause_until)(hilock_client *c, int64_t until_us);   /* wait.c's pause */
    /* 1 if a blocking call may run now (inside one of the runner's own flows), else 0 */
    int (*may_block)(const hilock_client *c);
    void (*detach)(hilock_client *c);      /* hilock_client_free: end every call in flight */
    /* node i of c has a connection of this runner's open (hl_node_connected) */
    int (*connected)(const hilock_client *c, size_t i);
    /* close it: the calls on it end EIO with why (hl_node_reset) */
    void (*close_node)(hilock_client *c, size_t i, const char *why);
    /* the call running now was ended by hilock_cancel (NULL: never) */
    int (*cancelled)(const hilock_client *c);
} hl_runner;

/* ---- hilock_cancel (cancel.c): the state of one client's cancels ---- */
typedef struct hl_cancel {
    unsigned asked;   /* atomic: hilock_cancel calls so far (any thread, a signal handler)   */
    unsigned done;    /* cancels answered by a call's HILOCK_ECANCELED (the client's thread) */
    unsigned from;    /* the call in progress answers the cancels asked after this count     */
    int      hit;     /* the call in progress was cancelled (hl_cancel_due said 1)           */
    int      rd, wr;  /* the wake-up pipe (wr atomic); -1 until a call first waits           */
} hl_cancel;
/* A cancelled wait notices within this, also where it cannot poll the pipe (a direct read). */
#define HL_CANCEL_STEP_US 40000
void hl_cancel_init(hl_cancel *k);
void hl_cancel_free(hl_cancel *k);
/* hilock_cancel's whole work: async-signal-safe. */
void hl_cancel_ask(hl_cancel *k);
/* A public call starts (hl_enter): it answers the cancels asked from now on; an acquire also
 * answers those asked since the last answered one (hl_cancel_pending). */
void hl_cancel_enter(hl_cancel *k);
void hl_cancel_pending(hl_cancel *k);
/* 1 if the call in progress is cancelled now: the cancel is consumed (hit set), the pipe
 * emptied. Read before every wait. */
int  hl_cancel_due(hl_cancel *k);
/* The pipe was readable: empty it if its bytes are of cancels this call does not answer (so
 * poll() does not wake again for them); else leave it for the next hl_cancel_due. */
void hl_cancel_settle(hl_cancel *k);
/* The pipe's read end for poll() (made on first use), or -1 if none could be made. */
int  hl_cancel_fd(hl_cancel *k);
/* The call in progress on c was ended by hilock_cancel (blocking: hl_cancel_due said so;
 * a loop's flow: its runner says). */
int  hl_call_cancelled(const hilock_client *c);
/* Sleep until until_us unless cancelled first: 1 if cancelled (hl_cancel_due), 0 at the time. */
int  hl_cancel_sleep_until(hl_cancel *k, int64_t until_us);

/* src/kinds/modern.c: the holder record a grant of this client left on a key (acquire.lua
 * ARGV[12]): the key's hash (hl_key_hash), the fence counter's value after that grant, and
 * until when (monotonic us) the record surely lives. HL_RECORD_MEMO of them, HL_RECORD_WAYS
 * per hash bucket (one per bucket, a client cycling through a hundred keys would lose a third
 * of them to collisions), made on the first grant: a key pushed out reads its record on its
 * next grant. */
typedef struct hl_record_memo {
    uint64_t key, count;
    int64_t  till_us;
} hl_record_memo;
#define HL_RECORD_MEMO 1024
#define HL_RECORD_WAYS 4

struct hilock_client {
    int            refs;         /* atomic: the user's reference + one per live lock */
    hilock_options opt;          /* deep copy: servers point into owned strings */
    char         **servers;
    struct hl_tls_ctx *tls;      /* the TLS context of the tls_* options, or NULL: shared by
                                    the rediss:// nodes (their transport_cfg) */
    size_t         nnodes;
    hl_node       *nodes;
    size_t         quorum;       /* nnodes/2 + 1 */
    uint64_t       rng;
    unsigned char  rnd[256];     /* getrandom() bytes not yet used for tokens (hl_client_random) */
    size_t         rnd_used;     /* bytes of rnd already handed out (and wiped) */
    hl_buf         obuf;         /* pipeline scratch, reused so a round trip allocates nothing */
    unsigned long  fork_gen;     /* hl_fork_gen when made: another value = a forked child's copy */
    long           pid;          /* the process that made it (for the message) */
    char           errmsg[HL_ERRMSG_MAX];
    uintptr_t      owner;        /* atomic: the thread inside a public call; none: 0, or a
                                    loop's client's thread | 1 (client.c: idle_owner) */
    unsigned long  serial;       /* this client's number among all made (hl_enter's refusals) */
    const hl_runner *runner;     /* NULL: blocking (see hl_runner) */
    struct hl_loop *loop;        /* the runner's state (async.c) */
    int            cancelled;    /* the loop's calls are being ended (client freed): lock.c's
                                    acquire loop stops retrying */
    hl_cancel     *cancel;       /* hilock_cancel's state, read by the waits: &cancel_own, or
                                    a topology's private client's owner's (NULL: none) */
    hl_cancel      cancel_own;
    /* lock.c: its live locks (not re-entrant: live_enter), in lists by a hash of the key, so
     * a client holding thousands of locks looks at a few; a mutex, as hilock_free may run
     * on another thread than the one using the client (hilock.h) */
    pthread_mutex_t live_mu;
    struct hilock *live[64];
    char           holder[HL_HOLDER_MAX];   /* hl_holder_text: permits.lua's holder records */
    char           tag[HL_TAG_LEN + 1];     /* the last digits of every token (base.h) */
    char           record[HL_TAG_LEN + 1 + HL_HOLDER_MAX];   /* "tag\n" holder: acquire.lua's */
    hl_record_memo *record_memo;  /* src/kinds/modern.c; NULL until a grant needs it */
    struct hl_cmdinfo *cmdinfo;  /* guarded.c: the server's key specs and flags of the commands */
    size_t         ncmdinfo;     /* guarded so far (COMMAND INFO): one array, freed with c */
    /* observe.c: the observer (NULL: none; each event site tests it, one branch) and the
     * totals. stats is the client's thread's alone, except renewal_ok, renewal_failed and
     * lost, which a keepalive's thread adds to atomically (hl_count_atomic). */
    hilock_observer_fn obs_fn;
    void              *obs_arg;
    struct hilock_client *obs_owner;  /* a keepalive's private client: the owner's client,
                                         which counts its renewals and losses (atomically) */
    hilock_stats       stats;
};

#endif
