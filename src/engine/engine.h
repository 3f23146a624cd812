/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Layer: engine
 * May call: transport resp base platform
 *
 * engine.h -- the engine (engine.c): pipelines of commands executed on nodes; the client's
 * error text (error.c); hilock_cancel's state (cancel.c).
 *
 * Owns: commands and their RESP encoding, nodes and their connections (handshake, undos,
 * deadlines, the poll loop), the client's node table. May call: the transport (transport.h,
 * through node->transport) and the RESP layer (resp.h) -- and, through node->topo, whatever
 * topology the client gave the node (hl_topo_ops below: the engine defines that interface
 * and calls through it; it includes no topology header). Called by: the topology (topology.h)
 * and the lock layer (lock.h). Nothing here calls up into them.
 */
#ifndef HILOCK_ENGINE_H
#define HILOCK_ENGINE_H

#include <pthread.h>

#include "hilock_observe.h"
#include "base.h"
#include "resp.h"
#include "transport.h"

/* ---- commands ---- */
#define HL_MAX_ARGS  15   /* permits.lua acquire: 5 keys, 10 arguments */
#define HL_MAX_CMDS  4
#define HL_MAX_NODES 32   /* masters of one client: node sets are uint32_t masks */

/* ---- what a server can do: each feature's floor, one table (engine.c: floors) ---- */
typedef enum hl_cap {
    HL_CAP_NONE = 0,
    HL_CAP_WAIT,            /* WAIT (min_replicas): Redis 3.0 */
    HL_CAP_FAIR,            /* fair.lua writes after TIME (redis.replicate_commands): 3.2 */
    HL_CAP_PERMITS,         /* permits.lua (semaphores, shared/exclusive) likewise: 3.2 */
    HL_CAP_FAILOVER,        /* replication ids, PSYNC2 (Sentinel, Cluster, failover_guard): 4.0 */
    HL_CAP_FLOAT_TIMEOUT,   /* a fractional BLPOP timeout: 6.0 */
    HL_CAP_LPOS,            /* LPOS: 6.0.6 */
    HL_CAP_SHEBANG,         /* a script's "#!lua flags" first line: 7.0 */
    HL_CAP_COUNT
} hl_cap;

/* One command of a pipeline: a script call (EVALSHA, EVAL on NOSCRIPT) or a plain command.
 * argv/len are borrowed for the duration of the call. */
typedef struct hl_cmd {
    const hl_script *script;   /* NULL: plain command argv[0..argc) */
    int              nkeys;    /* script: argv[0..nkeys) are KEYS, the rest ARGV */
    int              argc;
    const char      *argv[HL_MAX_ARGS];
    size_t           arglen[HL_MAX_ARGS];
    int              advisory;  /* its error reply (MOVED, ASK, TRYAGAIN) stands: a topology's
                                   redirect goes by the pipeline's other replies, as a read that
                                   only informs must not re-run the writes before it elsewhere */
    int              need;      /* an hl_cap the server must have, or HL_CAP_NONE: a node whose
                                   server lacks it runs none of the pipeline (EINVAL, the
                                   message names the feature, the floor and the server) */
    int              ntail;     /* more arguments after argv, any count (a caller's own command:
                                   hilock_guarded_command), borrowed as argv is; 0: none */
    const char *const *tail;
    const size_t    *taillen;
} hl_cmd;

void hl_cmd_init(hl_cmd *c, const hl_script *script, int nkeys);
/* An argument the engine writes per connection, as it encodes the command: "1" if the node's
 * server has cap (hl_node_has), else "0" (a script's portable form). */
void hl_cmd_argcap(hl_cmd *c, hl_cap cap);
/* An argument the engine writes per connection, as it encodes the command: the node's server
 * clock in ms now, as hl_node_clock_floor_ms reckons it (never ahead of it; the client's wall
 * clock if the handshake could not read TIME) -- the fencing token's floor from the server's
 * own clock, for scripts that must not read TIME before writing (servers before 5.0), right
 * for each master of a Redlock, and known on a new connection (its handshake goes first). */
void hl_cmd_argclock(hl_cmd *c);
void hl_cmd_arg(hl_cmd *c, const char *s, size_t len);  /* len (size_t)-1 = strlen */
void hl_cmd_argi(hl_cmd *c, char *scratch24, long long v);   /* integer arg in scratch */

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
    uint32_t (*exec)(hilock_client *c, uint32_t mask, const hl_cmd *cmds, int ncmd,
                     int64_t per_node_timeout_us, int64_t hard_deadline_us, int any);
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
    char           holder[HL_HOLDER_MAX];   /* hl_holder_text: acquire.lua's holder record */
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

/* ---- the client's error text (error.c) ---- */
/* Set c->errmsg (printf-style) and return st; hl_ok() clears it and returns HILOCK_OK. */
hilock_status hl_fail(hilock_client *c, hilock_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
hilock_status hl_ok(hilock_client *c);
/* errmsg from the nodes' own errors ("node: why; node: why") with the given status. */
hilock_status hl_fail_nodes(hilock_client *c, hilock_status st, uint32_t mask, const char *what);

/* ---- events and counters (observe.c): the one seam every layer emits through ---- */
/* 1 if c has an observer: test it before building an event (the only cost without one). */
#define HL_OBSERVED(c) ((c)->obs_fn != NULL)
/* An event of kind for c with the common fields (key NULL for none; node NULL for none;
 * duration -1: none; at_us now); the caller sets the kind's own fields, then hl_emit. */
void hl_event_init(hilock_event *e, hilock_event_kind kind, const char *key, size_t keylen,
                   const char *node, hilock_status st, int64_t duration_us);
/* hl_event_init at a time the caller has read already (at_us = now: no clock read). */
void hl_event_init_at(hilock_event *e, hilock_event_kind kind, const char *key, size_t keylen,
                      const char *node, hilock_status st, int64_t now_us, int64_t duration_us);
/* Call c's observer with e (none: nothing), marking this thread as inside an observer for
 * the duration (hl_observing), so a call into hilock from it is refused. */
void hl_emit(hilock_client *c, const hilock_event *e);
/* The common case: hl_event_init + hl_emit, if c is observed. */
void hl_emit_simple(hilock_client *c, hilock_event_kind kind, const char *key, size_t keylen,
                    const char *node, hilock_status st, int64_t duration_us);
/* The handshake's peer closed the connection (EOF, reset) with replies [0, idx) in: if the
 * command at idx asked for a fact (INFO, TIME, COMMAND INFO), the peer refused it by closing
 * (a proxy that knows no INFO: twemproxy); n's connections leave it out from now on (the
 * server's version, clock or shape unknown: hl_node_has's portable forms), which is said once,
 * as an ERROR event (counted) with n->err. 1 then: connect again at once (none of the caller's
 * commands went: the handshake goes alone); else 0 (an ordinary failure). Both runners. */
int hl_handshake_closed(hilock_client *c, hl_node *n, int idx);
/* hl_emit_simple for a lock's event: its key (a C string) and its kind's name (lock_kind). */
void hl_emit_lock(hilock_client *c, hilock_event_kind kind, const char *key, const char *lock_kind,
                  const char *node, hilock_status st, int64_t duration_us);
/* An ERROR event for node n's error (n->st, n->err), if c is observed; counted. */
void hl_emit_node_error(hilock_client *c, const hl_node *n, const char *key, size_t keylen);
/* Connection k of node n: its connect (TCP, and TLS: TLS_HANDSHAKE) is done, resp. its
 * handshake is done (CONNECT, counted). Both runners call them (engine.c, async.c). */
void hl_conn_connected(hilock_client *c, const hl_node *n, const struct hl_conn *k);
void hl_conn_ready(hilock_client *c, hl_node *n, const struct hl_conn *k);
/* A connection of node n, begun at opened_us, failed before its handshake was done (refused,
 * timed out, AUTH refused, ...): a CONNECT event with st and why, if c is observed; not
 * counted (stats.connects are opened ones). Before the ERROR event of the same failure. */
void hl_conn_failed(hilock_client *c, const hl_node *n, int64_t opened_us, hilock_status st, const char *why);
/* The Sentinels named a new master (counted: stats.failovers; a FAILOVER event): node the
 * master now in use. (A lock's call that finds its master changed reports it, uncounted.) */
void hl_failover_seen(hilock_client *c, const char *node);
/* A Cluster redirect answered by node n about key (keylen 0: none): counted; a REDIRECT event. */
void hl_redirect_seen(hilock_client *c, const hl_node *n, hilock_redirect_kind kind, const char *target,
                      const char *key, size_t keylen);
/* Put us in h (hilock_observe.h: the buckets; negative counts as 0): inline, as it runs on
 * every round trip and grant (hilock_histogram_add is this). */
static inline void hl_hist_add(hilock_histogram *h, int64_t us)
{
    uint64_t v = us > 0 ? (uint64_t)us : 0;
    int b = v <= 1 ? 0 : 64 - __builtin_clzll(v - 1);   /* ceil(log2 v) */
    h->count++;
    h->sum_us += v;
    h->bucket[b < HILOCK_HIST_BUCKETS - 1 ? b : HILOCK_HIST_BUCKETS - 1]++;
}
/* A round trip to a node, sent at t0_us, answered in full at now_us: counted, in the histogram. */
static inline void hl_round_trip(hilock_client *c, int64_t t0_us, int64_t now_us)
{
    c->stats.round_trips++;
    hl_hist_add(&c->stats.round_trip, now_us - t0_us);
}
/* The bound of a call's round trips on one node (hilock.h states it): a connect
 * (connect_timeout_ms), then the handshake, the commands, and their resend as EVAL after a
 * NOSCRIPT, each a round trip of its own with its own per_us (engine.c), so a link slower
 * than half the timeout still gets a command through a fresh connection. */
#define HL_CALL_ROUND_TRIPS 3
static inline int64_t hl_call_bound_us(const hilock_client *c, int64_t per_us)
{
    return hl_add_sat(c->opt.connect_timeout_ms * 1000,
                      per_us > INT64_MAX / HL_CALL_ROUND_TRIPS ? INT64_MAX : HL_CALL_ROUND_TRIPS * per_us);
}
/* 1 while this thread runs an observer (hl_enter refuses calls then). */
int  hl_observing(void);
/* hilock_client_stats's copy of c->stats into size bytes at s (client.c checks the call). */
void hl_stats_copy(const hilock_client *c, hilock_stats *s, size_t size);
/* A counter of c->stats bumped by another thread (a keepalive's): atomic. */
#define hl_count_atomic(c, field) __atomic_fetch_add(&(c)->stats.field, 1, __ATOMIC_RELAXED)

/* What the engine asks of the topology a node belongs to -- the engine defines this
 * interface and calls only through node->topo; the implementations (topology.h:
 * hl_topo_direct, hl_topo_sentinel; Cluster next) use the engine, never the other way round.
 * The lock layer's failover hooks (identity, fence epoch, "still the master?") are part of
 * the same table, used by topology.c only. */
typedef struct hl_topo_ops {
    const char *name;   /* "direct", "sentinel" */
    /* Where a new connection goes: *host and *port, or a unix socket path in *host with
     * *port = -1 (owned by the node, valid until the next resolve). May take part of
     * deadline_us (Sentinel: asks the Sentinels). OK, or a status with n->st, n->err set. */
    hilock_status (*resolve)(hilock_client *c, hl_node *n, int64_t deadline_us,
                             const char **host, int *port);
    /* A command (one word) sent last in a new connection's handshake to check the node
     * ("ROLE"), or NULL; on_handshake_reply judges its reply: OK, or a status with n->st and
     * n->err set (the engine then ends the node's part and closes the connection). */
    const char *probe;
    hilock_status (*on_handshake_reply)(hl_node *n, const hl_reply *r);
    /* An error reply to one of the caller's commands, after the round trip (the replies
     * stand): 1 = close the connection so that the next call resolves again (READONLY: a
     * replica now; later MOVED/ASK), 0 = keep it. */
    int (*on_error_reply)(hl_node *n, const hl_reply *r);
    /* ---- topology.c's own hooks (the lock layer's failover awareness) ---- */
    int failover_aware;   /* master identity tracked by default (failover_guard = -1) */
    int sharded;          /* one node, many masters chosen by key (Cluster): not a Redlock
                             member's peer (its masters change with the key); the tools' map */
    /* Ask whether the master in use moved since it was named (NULL: it cannot move), by
     * deadline_us (the calling operation's: the question takes part of its bound). 1: it
     * moved (the connection is closed and n->st, n->err say so), 0: it did not or no one
     * could say in time. Not asked within CONFIRM_FRESH_US of the last answer. */
    int (*moved)(hilock_client *c, hl_node *n, int64_t deadline_us);
    /* The config epoch of the master in use, for fencing tokens (0: none). */
    uint64_t (*epoch)(const hl_node *n);
    /* Sharded topologies (NULL elsewhere): the node id of the server in use (41 bytes with the
     * NUL; "" while the slot map has not named it), recorded with a grant; and whether the
     * master with that id serves a slot in n's map (a stale map asked again first, by
     * deadline_us): 1 yes, 0 no, -1 no map. topology.c tells a shard's failover from a
     * resharding with them (end_verify). */
    const char *(*node_id)(const hl_node *n);
    int (*serves)(hilock_client *c, hl_node *n, const char *id, int64_t deadline_us);
    void (*free)(hl_node *n);   /* n->topo_state (NULL-safe) */
    /* ---- sharded topologies (Cluster: cluster.c; NULL for the others) ---- */
    /* Before a pipeline goes to n: pick the server that must run it (the shard owning its
     * first key) and put that server's connection, undo list and name in n, parking the ones
     * in use (n->conn NULL: the engine connects, through resolve). May take part of
     * deadline_us (fetching the slot map; the round trip's own bounds start after it, within
     * the hard deadline). 1: send ASKING before the caller's commands (a
     * one-shot ASK redirect), 0: not, -1: no server (n->st and n->err say why). */
    int (*route)(hilock_client *c, hl_node *n, const hl_cmd *cmds, int ncmd, int64_t deadline_us);
    /* After n's round trip (n->st OK: its replies stand; else failed): 1 = run the pipeline
     * again on n (MOVED, ASK, TRYAGAIN, CLUSTERDOWN: route then picks the new target), 0 =
     * done. The engine asks at most HL_MAX_REDIRECTS times per call, all within the
     * deadline of its first round trip; the last replies stand (their error says why). */
    int (*redirect)(hilock_client *c, hl_node *n, const hl_cmd *cmds, int ncmd, int64_t deadline_us);
    /* ---- a sharded topology seen from an event loop (async.c keeps a connection of its own
     * per server, and its flows interleave; NULL for the others) ---- */
    /* route, its private client (the seeds) driven as c is (c->runner: on the loop, by the
     * loop): the server chosen (>= 1: its key, which names that server for the node's life,
     * across slot maps; an index would not: each map rebuilds the table), or -1 as route's;
     * *asking as route's 1. fetch 0: no slot map fetch now (another flow's is under way: the
     * map in hand serves, a MOVED corrects it), -2 if there is none yet. */
    int (*route_to)(hilock_client *c, hl_node *n, const hl_cmd *cmds, int ncmd, int64_t deadline_us,
                    int fetch, int *asking);
    /* Put server s's undo list, name and facts in n (what a connection to s reads and writes),
     * parking those in use (a server that has left the map: nothing changes); and which one is
     * there now (-1: none). */
    void (*use)(hl_node *n, int s);
    int (*current)(const hl_node *n);
} hl_topo_ops;
#define HL_MAX_REDIRECTS 16

/* Run the same pipeline of `ncmd` commands on every node in `mask` (bit i = node i), all at
 * once: connect where needed (handshake and pending undos go first), write, and read the
 * replies, under one poll() loop. Each node stops at its own deadline:
 * min(now + per_node_timeout_us, hard_deadline_us). Fills node->st, node->err,
 * node->reply[0..ncmd) (free with hl_exec_clear). A timed-out or broken connection is
 * closed (it reconnects on the next call). Script commands answered NOSCRIPT are sent again
 * as EVAL, within the same deadline; redirects a node's topology asks for (hl_topo_ops
 * redirect) run it again, within the deadline of the first round trip. Returns the mask of
 * nodes with st == OK (all replies, which may still be error replies). Replies of nodes
 * outside mask are left as they are. */
uint32_t hl_exec(hilock_client *c, uint32_t mask, const hl_cmd *cmds, int ncmd,
                 int64_t per_node_timeout_us, int64_t hard_deadline_us);
/* hl_exec for blocking commands (BLPOP) on several nodes: returns as soon as one node's
 * last reply carries data (not nil, not an error); the nodes still waiting are abandoned:
 * closed (no stale reply can arrive later; the next call reconnects), st = ETIMEDOUT. */
uint32_t hl_exec_any(hilock_client *c, uint32_t mask, const hl_cmd *cmds, int ncmd,
                     int64_t per_node_timeout_us, int64_t hard_deadline_us);
void     hl_exec_clear(hilock_client *c);
/* Pause a flow until until_us: sleeps, or (attached to a loop) lets the loop run meanwhile. */
void     hl_pause_until(hilock_client *c, int64_t until_us);
uint32_t hl_all_nodes(const hilock_client *c);

/* Remember that `value` may have been written to `key` (with a ttl of ttl_ms) on node i:
 * deleted if still equal, before anything else, on the next contacts with that node.
 * Bounded: a duplicate is not added again, an undo is forgotten once the ttl has surely
 * passed, at most HL_UNDO_MAX are kept per node (the oldest go), and each round trip sends
 * at most HL_UNDO_CHUNK of them. Callers add one only when the write may have reached the
 * server (node->wrote after hl_exec, or a grant seen). */
void hl_undo_add(hilock_client *c, size_t i, const char *key, const char *value, int64_t ttl_ms);

/* Map an error reply to a status (NOPERM/WRONGPASS/NOAUTH, and "ERR invalid password" before
 * Redis 6.0 -> EAUTH, else EREPLY) and write "node: text" to node->err. */
hilock_status hl_node_reply_error(hl_node *n, const hl_reply *r);

/* Close node i's connection (next call reconnects). */
void hl_node_close(hl_node *n);
/* 1 if node n of c has a connection open: the blocking one, or its runner's (an event loop's
 * connections are the runner's, not n->conn). */
int  hl_node_connected(const hilock_client *c, const hl_node *n);
/* Close every connection node n of c uses for its calls, the runner's too (its master moved:
 * the next call resolves again); calls in flight on them end EIO with n->err. */
void hl_node_reset(hilock_client *c, hl_node *n);
void hl_node_set_err(hl_node *n, hilock_status st, const char *what, const char *why);

/* ---- the parts of a round trip, shared by the blocking runner (hl_exec) and the loop
 * runner (async.c), so both encode, hand-shake, undo and read the same way ---- */
/* RESP encoding of one command (script: EVALSHA, or EVAL with use_eval) appended to b, for
 * node n's server (its script form and hl_cmd_argcap arguments; n NULL: a modern server). */
void hl_cmd_put(hl_buf *b, const hl_cmd *c, int use_eval, const hl_node *n);
/* If node n's server lacks what one of the commands needs (hl_cmd.need): EINVAL with n->st and
 * n->err set ("fair locks need Redis >= 3.2: 127.0.0.1:6379 runs Redis 2.8.24"); else OK. */
hilock_status hl_cmds_refused(hl_node *n, const hl_cmd *cmds, int ncmd);
/* A new connection to node n (resolved by its topology; the connect is under way:
 * k->connecting, k->fresh). 0, or -1 with n->st, n->err set. */
int  hl_conn_new(hilock_client *c, hl_node *n, int64_t deadline, struct hl_conn **out);
void hl_conn_free(struct hl_conn *k);   /* closes; NULL-safe */
/* An idle connection the server closed since (see engine.c). */
int  hl_conn_stale(struct hl_conn *k, int64_t now);
/* Write what the transport takes of k->out now; *written: how many bytes. HL_IO_OK (maybe
 * partly), or HL_IO_CLOSED / HL_IO_ERROR (k->io.ops->error says why). */
hl_io hl_conn_flush(struct hl_conn *k, size_t *written);
/* Read what the transport has into k's parser (take replies with hl_resp_next(k->resp));
 * wait_ms > 0: first wait up to that long in the read itself (the transport's read_wait; 0
 * on a loop, whose sockets are only read when ready). OK, or the status with *what, *why for
 * the message; then the connection must be closed. */
hilock_status hl_conn_read(struct hl_conn *k, int wait_ms, const char **what, const char **why);
/* A new connection's handshake (AUTH, SELECT, the topology's probe, INFO server, TIME; for an
 * ACL user COMMAND INFO GET, whose shape gives the version when INFO is refused)
 * appended to b: how many commands. Reply number idx (0-based, in order) is judged by
 * hl_handshake_judge, by its position: OK, or the status with n->st, n->err set (close the
 * connection). INFO or TIME refused (ACL, renamed, a Sentinel) leave the facts unknown. */
int  hl_handshake_put(const hl_node *n, hl_buf *b);
hilock_status hl_handshake_judge(hl_node *n, struct hl_conn *k, int idx, const hl_reply *r);
/* The handshake of k (the connection that owns node n's facts: its blocking connection, the
 * loop's main one; not a waiter's) is done: its facts become n's, all at once. EINVAL (n->err
 * set: the same server as a Redlock peer, by run_id) or OK. */
hilock_status hl_handshake_commit(hl_node *n, const struct hl_conn *k);
/* Node n's facts, as a whole (Cluster: a shard parked on another connection keeps its own). */
void hl_node_facts_get(const hl_node *n, hl_facts *f);
void hl_node_facts_set(hl_node *n, const hl_facts *f);

/* ---- what the last handshake learnt of node n's server ---- */
/* Its version, Redis-compatible (Valkey 8.0.1 says 7.2.4): major*10000 + minor*100 + patch
 * (2.8.24 -> 20824); 0 = unknown (INFO refused): see hl_node_has. */
int         hl_node_version(const hl_node *n);
/* 1 if its server has cap (hl_cap above), else 0. An unknown version has every cap that
 * refuses a feature (WAIT, FAIR, FAILOVER: it may have them) but none that only picks a
 * newer form of a command (FLOAT_TIMEOUT, LPOS, SHEBANG: the portable form works on all). */
int         hl_node_has(const hl_node *n, hl_cap cap);
/* "Redis 2.8.24", "Valkey 8.0.1", for messages ("an unknown server" if unknown). */
const char *hl_node_server(const hl_node *n);
/* The server's clock now, in ms since the epoch: its TIME at the handshake plus the
 * monotonic time elapsed since (a floor: TIME was read before the reply arrived); -1 unknown. */
int64_t     hl_node_server_ms(const hl_node *n);
/* The clock floor of a fencing token minted on node n now (hl_cmd_argclock): its server's
 * clock as hl_node_server_ms reckons it, but with the monotonic time since the reading counted
 * HL_CLOCK_SLOW_PPM slow, so a client clock running fast cannot put the floor ahead of the
 * server's (docs/fencing.md: why ahead is the side to avoid). When the server's is unknown
 * (TIME refused: an ACL user without it, a renamed TIME) the client's own wall clock at the
 * handshake stands in, counted slow the same way (a client clock stepped or running fast
 * later does not carry the floor with it). ms, > 0. */
int64_t     hl_node_clock_floor_ms(const hl_node *n);
#define HL_CLOCK_SLOW_PPM 1000   /* well above the drift of a quartz clock (~100 ppm) */
/* A reading older than this is taken again: the connection is made anew before its next
 * round trip (blocking), or when it is next idle (event loop; one never idle sends a TIME
 * ahead of its next command: hl_node_clock_put), so the slow count above lags
 * the server by at most 1000 ppm of it (86 s): far inside the hour a counter is kept. */
#define HL_CLOCK_MAX_AGE_US (24LL * 3600 * 1000000)
/* 1 if node n's clock reading is older than HL_CLOCK_MAX_AGE_US at now (monotonic us). */
int         hl_node_clock_old(const hl_node *n, int64_t now);
/* A TIME appended to b, to renew the reading in a connection's stream (a loop connection
 * never idle); its reply given to hl_node_clock_take, which keeps a plausible reading as
 * node n's (judged as the handshake's), else leaves the old one. */
void        hl_node_clock_put(hl_buf *b);
void        hl_node_clock_take(hl_node *n, const hl_reply *r);
/* The pending undos of node n due in this round trip appended to b (at most HL_UNDO_CHUNK,
 * from *at; those of key -- the commands' key, hl_cmds_key -- first): how many;
 * hl_undo_drop(n, *at, count) once answered. */
size_t hl_undo_put(hl_node *n, hl_buf *b, size_t *at, const char *key, size_t keylen);
const char *hl_cmds_key(const hl_cmd *cmds, int ncmd, size_t *len);
void hl_undo_drop(hl_node *n, size_t k, size_t cnt);
/* 1 if the topology wants the connection closed after these replies (READONLY). */
int  hl_topo_drops(hl_node *n, hl_reply *const *reply, int ncmd);

#endif
