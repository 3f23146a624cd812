/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Layer: engine
 * May call: transport resp base platform
 *
 * engine.h -- the engine (engine.c): pipelines of commands executed on nodes; the client's
 * error text (error.c); hilock_cancel's state (cancel.c). One header per concern, each
 * included here: cmd.h (commands, scripts, what a server can do), client.h (nodes, their
 * connections, the runner and cancel tables, the client), error.h, events.h (events and
 * counters, observe.c), topo_ops.h (what the engine asks of a topology); this file declares
 * the engine's own calls (hl_exec, the nodes' connections, the parts of a round trip, what a
 * handshake learnt).
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

/* one header per concern, all of the engine layer: */
#include "cmd.h"        /* commands, scripts, server capabilities */
#include "client.h"     /* nodes, connections, runner, cancel, the client */
#include "error.h"      /* the client's error text */
#include "events.h"     /* events and counters */
#include "topo_ops.h"   /* the topology interface */


/* ---- the engine's calls (engine.c) ---- */
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
/* A call starting now whose round trips take per_us each: its deadline, by that bound. */
static inline hl_deadline hl_call_deadline(const hilock_client *c, int64_t per_us)
{
    return hl_deadline_of(per_us, hl_add_sat(hl_now_us(), hl_call_bound_us(c, per_us)));
}

/* The handshake's peer closed the connection (EOF, reset) with replies [0, idx) in: if the
 * command at idx asked for a fact (INFO, TIME, COMMAND INFO), the peer refused it by closing
 * (a proxy that knows no INFO: twemproxy); n's connections leave it out from now on (the
 * server's version, clock or shape unknown: hl_node_has's portable forms), which is said once,
 * as an ERROR event (counted) with n->err. 1 then: connect again at once (none of the caller's
 * commands went: the handshake goes alone); else 0 (an ordinary failure). Both runners. */
int hl_handshake_closed(hilock_client *c, hl_node *n, int idx);


/* Run the same pipeline of `ncmd` commands on every node in `mask` (bit i = node i), all at
 * once: connect where needed (handshake and pending undos go first), write, and read the
 * replies, under one poll() loop. Each node's round trip ends by hl_round_end(dl, its
 * start): dl.per_us (the per-node I/O timeout) from then, never past dl.hard_us. Fills
 * node->st, node->err,
 * node->reply[0..ncmd) (free with hl_exec_clear). A timed-out or broken connection is
 * closed (it reconnects on the next call). Script commands answered NOSCRIPT are sent again
 * as EVAL, within the same deadline; redirects a node's topology asks for (hl_topo_ops
 * redirect) run it again, within the deadline of the first round trip. Returns the mask of
 * nodes with st == OK (all replies, which may still be error replies). Replies of nodes
 * outside mask are left as they are. */
uint32_t hl_exec(hilock_client *c, uint32_t mask, const hl_cmd *cmds, int ncmd, hl_deadline dl);
/* hl_exec for blocking commands (BLPOP) on several nodes: returns as soon as one node's
 * last reply carries data (not nil, not an error); the nodes still waiting are abandoned:
 * closed (no stale reply can arrive later; the next call reconnects), st = ETIMEDOUT. */
uint32_t hl_exec_any(hilock_client *c, uint32_t mask, const hl_cmd *cmds, int ncmd, hl_deadline dl);
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
/* A new connection to node n (resolved by its topology within dl: per_us each of its round
 * trips, connect_timeout_ms; the connect is under way: k->connecting, k->fresh). 0, or -1
 * with n->st, n->err set. */
int  hl_conn_new(hilock_client *c, hl_node *n, hl_deadline dl, struct hl_conn **out);
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
