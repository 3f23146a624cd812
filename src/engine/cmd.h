/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd.h -- commands, their arguments and scripts, and what a server can do (part of the engine
 * layer: engine.h states its rules and includes it) */
#ifndef HILOCK_ENGINE_CMD_H
#define HILOCK_ENGINE_CMD_H

#include "base.h"
#include "resp.h"

/* ---- commands ---- */
#define HL_MAX_ARGS  20   /* permits.lua acquire: 7 keys, 12 arguments */
#define HL_MAX_CMDS  5   /* a BLPOP, the acquire, INFO, HMGET, WAIT (lock.c attempt_round) */
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

#endif
