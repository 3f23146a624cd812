/* SPDX-License-Identifier: BSD-3-Clause */
/* loop.h -- what async.c (the runner and the calls) and conn.c (the loop's connections) share:
 * the loop's state, its calls, their parts on connections and the connections themselves.
 * Private to src/async/ (async.h is the layer's header). */
#ifndef HILOCK_LOOP_H
#define HILOCK_LOOP_H

#include "async.h"
#include "fiber.h"

typedef struct call call;
typedef struct part part;
typedef struct lconn lconn;
typedef struct hl_loop hl_loop;

enum { OP_ACQUIRE, OP_RELEASE, OP_EXTEND, OP_CHECK, OP_RENEW, OP_GUARDED };
enum { S_QUEUED, S_RUNNING, S_SUSPENDED, S_RUNNABLE, S_FINISHED };
enum { SLOT_HANDSHAKE, SLOT_GHOST, SLOT_PART, SLOT_CLOCK };

typedef struct xrun {   /* one hl_exec of a flow: its parts still out */
    int      pending;
    int      any;
    part    *parts;        /* parts[i].x NULL: node i not reached yet */
    uint32_t mask;
    struct xrun *outer;    /* the hl_exec this one runs inside (a Sentinel's, while the data
                              node's connection resolves its master), or NULL */
} xrun;

struct part {           /* one node's share of one hl_exec */
    call         *owner;
    xrun         *x;
    size_t        node;
    lconn        *lc;
    const hl_cmd *cmds;
    int           ncmd, used_eval, got, done;
    int           srv;         /* a sharded node's (Cluster): the server routed to, else -1 */
    int           asking;      /* ASKING goes before each command (an ASK redirect) */
    hl_reply     *reply[HL_MAX_CMDS];
    int64_t       end;         /* its current round trip's (hl_round_end of dl) */
    hl_deadline   dl;          /* the call's: each round trip's bound, and its end (part_renew) */
    uint64_t      start_off;   /* where its bytes begin in the connection's stream */
    int64_t       t0;          /* when it was encoded (hl_round_trip) */
    int           queued;      /* its bytes are in the output */
    hilock_status st;
    int           wrote;
    int           abandoned;   /* hl_exec_any ended it (another node answered): not a node error */
    char          err[200];
    part         *wnext;       /* the handshake's waiting list */
};

typedef struct slot { int kind, n, at; part *p; } slot;   /* at: replies taken */

struct lconn {
    hilock_client  *c;          /* whose node: the loop's client, or a topology's private
                                   client (the Sentinels of a redis-sentinel:// node) */
    size_t          node;
    int             srv;        /* a sharded node's (Cluster): the server it goes to (the
                                   topology's key for it, >= 1), else -1 */
    int             side;       /* a waiter's own connection (BLPOP) */
    struct hl_conn *k;          /* NULL: closed */
    int             opening;    /* its topology resolves the address: the flow that opens it
                                   is paused (Sentinel round trips), other parts wait */
    int             ready;      /* the handshake was answered */
    int             clock_asked;   /* a TIME to renew a day-old reading is in flight */
    slot           *q;          /* replies expected, in order */
    size_t          qh, qn, qcap;
    part           *whead, *wtail;   /* waiting for the handshake */
    uint64_t        queued, flushed;  /* bytes of the stream */
    int             fd, ev;     /* what the loop watches for it */
    lconn          *next;       /* side connections */
};

typedef struct ka {     /* a keepalive on the loop (hilock_keepalive on an attached client) */
    hilock         *l;
    hilock_lost_fn  on_lost;
    void           *arg;
    long            renewals, max_renewals;
    int64_t         hold_end_us, next_us;
    int64_t         margin_us;  /* lost_margin_ms: report the loss this long before the end */
    int             busy;       /* a renewal is queued or in flight */
    struct ka      *next;
} ka;

struct call {
    hl_loop        *L;
    int             op, state, cancel;
    int             user_cancel;   /* hilock_cancel ended it (cancel is set too) */
    char           *key;
    int64_t         ttl_ms, wait_ms;
    const hl_kind_ops *kind;
    int             limit;      /* OP_ACQUIRE: the kind's limit (hl_acquire_limit), or 0 */
    hilock         *l;
    ka             *ka;         /* OP_RENEW: whose */
    hilock_status   st;
    char            errmsg[HL_ERRMSG_MAX];
    hilock_done_fn  done;
    void           *arg;
    hl_fiber       *f;
    xrun           *x;          /* suspended in hl_exec */
    unsigned long   yields;     /* times its flow gave the loop back */
    int64_t         wake_us;    /* suspended in a pause (HL_NEVER: not) */
    call           *next, *prev;
    call           *rnext, *dnext;   /* in the run queue, the done queue */
    int             inrq;
    int             counted;    /* in l's loop counts: 1 linked and unfinished (in l's chain),
                                   2 finished */
    call           *lnext;      /* l's next unfinished call (l->loop_first: the oldest) */
    /* OP_GUARDED: the caller's command (copied), its reply and its callback */
    int             gargc;
    char          **gargv;
    size_t         *glen;
    hilock_reply   *greply;
    hilock_reply_fn gdone;
};

/* Take k out of its lock's chain of unfinished calls (short: a lock's calls run in turn). */
static inline void unchain(call *k)
{
    call **pp = (call **)&k->l->loop_first;
    while (*pp && *pp != k) pp = &(*pp)->lnext;
    if (*pp) *pp = k->lnext;
    k->lnext = NULL;
}

struct hl_loop {
    hilock_client  *c;
    hilock_loop     app;
    lconn          *conns;      /* one per node */
    lconn          *side;       /* waiters' connections */
    lconn          *aux;        /* private clients' (the Sentinels'): one per node, pipelined */
    lconn          *shards;     /* a sharded node's (Cluster): one per server, pipelined */
    uint32_t        fetching;   /* nodes whose slot map a flow is fetching (one at a time) */
    call           *head, *tail;   /* every call not ended, in the order made */
    call           *running;    /* the call whose flow runs now */
    call           *rq, *rq_tail;   /* flows to resume, in the order their replies came */
    call           *dq, *dq_tail;   /* ended calls, in the order they ended: `done` runs so */
    ka             *kas;
    int64_t         ka_due;     /* no keepalive's renewal falls due before this: a lower bound
                                   (ka_due_at), made exact by start_renewals' walk, so a pass
                                   with nothing due walks no keepalive */
    int             in_pass, closing, dead;
    int64_t         timer_at;   /* what the loop was asked for (-1: none) */
    int             cancel_fd;  /* hilock_cancel's pipe, watched for reading (-1: none) */
};

/* ---- conn.c: the loop's connections ---- */
/* What the loop must watch on lc's fd now (its transport says which events), told to the
 * application's watch when it changed. */
void hl_lc_watch(hl_loop *L, lconn *lc);
/* Queue p's commands on lc (opening it, or waiting for its handshake, first): they go out at
 * the end of the loop pass (hl_lc_flush). */
void hl_lc_submit(hl_loop *L, lconn *lc, part *p);
/* Write what lc has queued; a failed write closes it. */
void hl_lc_flush(hl_loop *L, lconn *lc);
/* The loop saw `events` on lc's fd: read replies (each to its part, in order), write. */
void hl_lc_io(hl_loop *L, lconn *lc, int events);
/* Close a connection: every part on it ends with st (err: "node: what: why"). */
void hl_lc_close(hl_loop *L, lconn *lc, hilock_status st, const char *err);
/* End one part at once, leaving the connection to the others: its slot swallows the replies
 * still to come. */
void hl_lc_forget(lconn *lc, part *p, hilock_status st, const char *err);
/* A part ends: what the flow will read in the node's fields when it resumes. */
void hl_part_end(part *p, hilock_status st, const char *err);
/* "node: what: why" into buf, for lc's node (why NULL: "node: what"). */
void hl_lc_err_text(hl_loop *L, lconn *lc, char *buf, size_t len, const char *what, const char *why);

/* ---- runq.c: the run queue and the done queue ---- */
/* A flow whose wait is over goes to the back of the run queue: flows resume, and calls end,
 * in the order their replies came (a release's done runs before that of the acquire its
 * release let in). */
void  hl_call_runnable(call *k);
call *hl_rq_pop(hl_loop *L);                 /* the next flow to resume, or NULL */
void  hl_rq_remove(hl_loop *L, call *k);     /* k leaves the run queue */
/* k has ended: out of its lock's chain, to the back of the done queue */
void  hl_call_finished(call *k);

#endif
