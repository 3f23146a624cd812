/* SPDX-License-Identifier: BSD-3-Clause */
/* async.c -- the event-loop API (include/hilock_async.h): a runner (engine.h: hl_runner) that
 * does a client's round trips on an application's event loop, and the calls that run on it.
 *
 * Why fibers. Every call runs the very flow of its blocking form (lock.c's hl_acquire,
 * hilock_release, hilock_extend, hilock_check; wait.c's waiting; the kinds' commands and
 * verdicts; undo, fencing, Redlock quorum, errors) on a small stack of its own (fiber.h).
 * Where the blocking runner would poll(), this one queues the pipeline on the loop's
 * connections and suspends the flow; the loop resumes it when the replies are in. So there is
 * one copy of the lock logic, and the semantics cannot drift apart.
 *
 * Pipelining. Each master has one connection (struct lconn) shared by every call in flight:
 * a call's commands are appended to its output as the call reaches them, the output goes
 * out in one write at the end of a loop pass, and replies are matched to calls in order
 * (a FIFO of slots). A waiting acquire's BLPOP would hold that connection up, so it goes on
 * a side connection of its own (kept for reuse when it ends normally).
 *
 * Topologies. A redis-sentinel:// node asks its Sentinels through a private client of its
 * topology (sentinel.c), which it has driven by this same runner: that client's hl_exec
 * runs inside the flow that opens the node's connection (or asks whether its master moved),
 * on connections of its own (L->aux, one per Sentinel, pipelined), so the flow pauses and
 * the loop goes on. Parts that come for a connection being opened wait with the others.
 * A redis-cluster:// node is one node with many servers: before a part is queued, its
 * topology routes it (hl_topo_ops route_to: the shard master of its key, or an ASK target)
 * and it goes on the connection of that server (L->shards: one per node and server,
 * pipelined); the slot map is fetched by the seeds' private client on this runner, as the
 * Sentinels are asked, one flow per node at a time (L->fetching; the others route by the
 * map in hand, or pause until there is one). The node holds one server's state (undos, name,
 * facts) at a time, swapped by the topology (`use`): a connection puts its server's in before
 * it encodes or reads a handshake (lc_node), and a flow gets its own server's back when its
 * round trip ends. After each round the topology is asked for redirects, as engine.c's
 * exec_redirected asks (MOVED, ASK, TRYAGAIN, CLUSTERDOWN: at most HL_MAX_REDIRECTS rounds
 * more, none past the first round's bound).
 *
 * Bounds. Each call's part on a connection has its deadline (the one the blocking runner
 * would use); the loop's timer is kept at the earliest. A deadline that passes closes the
 * connection -- a late reply must never be read as the answer to a later command -- and
 * every call on it ends ETIMEDOUT; their writes are undone by token on the next contact (the
 * flows add the undos, as with the blocking runner).
 *
 * Shared state. The node fields a flow reads after hl_exec (reply, st, err, wrote) are the
 * running fiber's: they are filled from its own parts when it resumes, and a flow reads them
 * before its next round trip. c->errmsg is the running call's own: swapped in when its flow
 * resumes and out when it waits (other flows write theirs meanwhile), and put back while its
 * `done` runs.
 *
 * Above the lock layer (async.h's Layer line: it runs lock.c's flows); the engine reaches it
 * only through c->runner. */
#define _GNU_SOURCE
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop.h"


static const hl_runner loop_runner, gone_runner;

/* ---- the runner: hl_exec and the pause, inside a call's flow ---- */

static lconn *side_conn(hl_loop *L, size_t node, int srv)
{
    lconn *lc;
    for (lc = L->side; lc; lc = lc->next)   /* an idle one of that node (and server) */
        if (lc->node == node && lc->srv == srv && lc->k && !lc->qn && !lc->whead) return lc;
    if (!(lc = calloc(1, sizeof *lc))) return NULL;
    lc->c = L->c;
    lc->node = node;
    lc->srv = srv;
    lc->side = 1;
    lc->fd = -1;
    lc->next = L->side;
    L->side = lc;
    return lc;
}

/* The connection to node i of a private client c (a topology's: the Sentinels), made on first
 * use and kept for the loop's life; shared and pipelined as the masters' are. */
static lconn *aux_conn(hl_loop *L, hilock_client *c, size_t i)
{
    lconn *lc;
    for (lc = L->aux; lc; lc = lc->next)
        if (lc->c == c && lc->node == i) return lc;
    if (!(lc = calloc(1, sizeof *lc))) return NULL;
    lc->c = c;
    lc->node = i;
    lc->srv = -1;
    lc->fd = -1;
    lc->next = L->aux;
    L->aux = lc;
    return lc;
}

/* The connection to server srv of sharded node i (a Cluster's master, or an ASK target),
 * made on first use and kept for the loop's life (a node talks to few servers); shared and
 * pipelined as a plain node's. make 0: only look. */
static lconn *shard_conn(hl_loop *L, size_t i, int srv, int make)
{
    lconn *lc;
    for (lc = L->shards; lc; lc = lc->next)
        if (lc->node == i && lc->srv == srv) return lc;
    if (!make || !(lc = calloc(1, sizeof *lc))) return NULL;
    lc->c = L->c;
    lc->node = i;
    lc->srv = srv;
    lc->fd = -1;
    lc->next = L->shards;
    L->shards = lc;
    return lc;
}

/* A round trip that cannot happen: every node in mask fails with EINVAL and why. */
static uint32_t refuse_exec(hilock_client *c, uint32_t mask, const char *why)
{
    for (size_t i = 0; i < c->nnodes && i < 32; i++)
        if (mask & (1u << i)) hl_node_set_err(&c->nodes[i], HILOCK_EINVAL, why, NULL);
    return 0;
}

static void loop_pause(hilock_client *c, int64_t until_us);

/* A part that cannot go: its call is being ended (lock or client freed). */
static void part_cut(hl_loop *L, part *p, hl_node *n)
{
    char why[200];
    snprintf(why, sizeof why, "%s: %s", n->name, L->closing ? "client freed with the call "
             "in flight" : "lock freed with the call in flight");
    hl_part_end(p, HILOCK_EIO, why);
}

/* A sharded node's route (Cluster): the server that must run this pipeline, or -1 with n->st,
 * n->err. One flow at a time fetches a node's slot map (the seeds' round trips run on this
 * loop: only that flow pauses); the others route by the map in hand (a MOVED corrects it), or
 * wait for the first one. */
static int shard_route(hl_loop *L, hilock_client *c, size_t i, const hl_cmd *cmds, int ncmd,
                       hl_deadline dl, int *asking)
{
    hl_node *n = &c->nodes[i];
    call *me = L->running;
    for (;;) {
        int fetch = !(L->fetching & (1u << i)), s;
        L->fetching |= 1u << i;
        s = n->topo->route_to(c, n, cmds, ncmd, dl, fetch, asking);
        if (fetch) L->fetching &= ~(1u << i);
        if (s != -2) return s;
        if (hl_now_us() >= dl.hard_us || me->cancel || L->closing) {   /* (the caller says which) */
            n->st = HILOCK_ETIMEDOUT;
            snprintf(n->err, sizeof n->err, "cluster: no slot map yet (another call's fetch of it "
                     "had not ended by this call's connect deadline)");
            return -1;
        }
        loop_pause(c, hl_round_end(hl_deadline_of(1000, dl.hard_us), hl_now_us()));
    }
}

/* Part p (node p->node of c) on its way: routed if its node is sharded, then queued on its
 * connection with the blocking runner's bounds (the round trip, after a connect if there is
 * one; never past hard). Routing may pause the flow (a slot map fetch). */
static void part_start(hl_loop *L, hilock_client *c, part *p, hl_deadline dl, int any)
{
    hl_node *n = &c->nodes[p->node];
    int64_t now = hl_now_us(), connect = c->opt.connect_timeout_ms * 1000;
    lconn *lc;
    if (p->owner->cancel || L->closing) {
        part_cut(L, p, n);
        return;
    }
    if (c == L->c && n->topo->route_to) {
        p->srv = shard_route(L, c, p->node, p->cmds, p->ncmd,
                             hl_one_round(hl_deadline_of(connect, dl.hard_us), now), &p->asking);
        if (p->done) return;   /* ended meanwhile (its lock or client freed) */
        if (p->owner->cancel || L->closing) {
            part_cut(L, p, n);
            return;
        }
        if (p->srv < 0) {
            hl_part_end(p, n->st, n->err);
            return;
        }
        now = hl_now_us();
    }
    lc = c != L->c ? aux_conn(L, c, p->node) : any ? side_conn(L, p->node, p->srv) :
         p->srv >= 0 ? shard_conn(L, p->node, p->srv, 1) : &L->conns[p->node];
    p->end = hl_round_end(hl_deadline_of(dl.per_us + (lc && lc->k ? 0 : connect), dl.hard_us), now);
    p->dl = dl;
    if (!lc) {
        hl_part_end(p, HILOCK_ENOMEM, "out of memory");
        return;
    }
    hl_lc_submit(L, lc, p);
}

/* After a round: the nodes of todo whose topology wants the pipeline run again (Cluster:
 * MOVED, ASK, TRYAGAIN, CLUSTERDOWN), as engine.c's exec_redirected asks. The topology reads
 * the round in the node, so each part's outcome (and its server's state) is put there for the
 * question; the parts to run again lose their replies. */
static uint32_t redirects(hl_loop *L, hilock_client *c, xrun *x, uint32_t todo, const hl_cmd *cmds,
                          int ncmd, hl_deadline dl)
{
    call *me = L->running;
    uint32_t again = 0;
    for (size_t i = 0; i < c->nnodes && i < 32; i++) {
        hl_node *n = &c->nodes[i];
        part *p = &x->parts[i];
        unsigned long yields = me->yields;
        int rc;
        if (!(todo & (1u << i)) || !n->topo->redirect) continue;
        if (p->srv >= 0) n->topo->use(n, p->srv);
        n->st = p->st;
        snprintf(n->err, sizeof n->err, "%s", p->err);
        for (int q = 0; q < HL_MAX_CMDS; q++) {
            hl_reply_free(n->reply[q]);   /* (another flow's) */
            n->reply[q] = p->reply[q];
        }
        rc = n->topo->redirect(c, n, cmds, ncmd, dl);
        /* A redirect that paused (TRYAGAIN's backoff: it then asks for the run again) let other
         * flows clear the node's replies: they are no longer the part's to free. */
        for (int q = 0; q < HL_MAX_CMDS; q++) {
            if (rc && me->yields == yields) hl_reply_free(n->reply[q]);
            if (me->yields == yields) n->reply[q] = NULL;
            if (rc || me->yields != yields) p->reply[q] = NULL;
        }
        if (rc || me->yields != yields) again |= 1u << i;
    }
    return again;
}

static void part_init(part *p, call *me, xrun *x, size_t i, const hl_cmd *cmds, int ncmd)
{
    memset(p, 0, sizeof *p);
    p->owner = me;
    p->x = x;
    p->node = i;
    p->cmds = cmds;
    p->ncmd = ncmd;
    p->srv = -1;
    x->pending++;
}

static uint32_t loop_exec(hilock_client *c, uint32_t mask, const hl_cmd *cmds, int ncmd, hl_deadline dl, int any)
{
    hl_loop *L = c->loop;
    call *me = L->running;
    part parts[c->nnodes];   /* (at most 32: hilock_client_new, and the Sentinels' topo_get) */
    xrun x;
    uint32_t ok = 0, todo = mask;
    hl_deadline hops = hl_one_round(dl, hl_now_us());   /* the redirects' bound */
    hl_exec_clear(c);
    if (!me || !hl_fiber_current())   /* a blocking path with no check of its own */
        return refuse_exec(c, mask, "client attached to an event loop: blocking calls are refused");
    memset(&x, 0, sizeof x);
    memset(parts, 0, c->nnodes * sizeof *parts);
    x.any = any;
    x.parts = parts;
    x.mask = mask;
    /* c is the loop's client or a private one of its topology (the Sentinels, asked while a
     * connection of the loop's client resolves, itself inside an hl_exec of this flow) */
    x.outer = me->x;
    me->x = &x;   /* its deadlines count from now: a submit below may pause the flow */
    for (int hop = 0;; hop++) {
        for (size_t i = 0; i < c->nnodes && i < 32; i++) {
            hl_node *n = &c->nodes[i];
            if (!(todo & (1u << i))) continue;
            n->st = HILOCK_OK;
            n->err[0] = '\0';
            n->wrote = 0;
            part_init(&parts[i], me, &x, i, cmds, ncmd);
        }
        for (size_t i = 0; i < c->nnodes && i < 32; i++)
            if (todo & (1u << i)) part_start(L, c, &parts[i], hop ? hops : dl, any);
        while (x.pending > 0) {
            me->state = S_SUSPENDED;
            me->yields++;
            hl_fiber_yield();
        }
        /* redirects: at most HL_MAX_REDIRECTS rounds more, none past the first one's bound
         * (the time is read first: a TRYAGAIN or ASK that can have no round stands, as with
         * the blocking runner) */
        if (hop == HL_MAX_REDIRECTS || hl_now_us() >= hops.hard_us || !(todo = redirects(L, c, &x, todo, cmds, ncmd, hops)))
            break;
        if (hl_now_us() >= hops.hard_us) {   /* asked for (its replies handed back), but a TRYAGAIN pause
                                      used the time: no round is sent past the bound (its
                                      deadline would close a connection other calls share) */
            for (size_t i = 0; i < c->nnodes && i < 32; i++)
                if (todo & (1u << i)) {
                    parts[i].st = HILOCK_ETIMEDOUT;
                    snprintf(parts[i].err, sizeof parts[i].err, "%s: redirected (TRYAGAIN, ASK or "
                             "MOVED), no time left for another round", c->nodes[i].name);
                }
            break;
        }
    }
    me->x = x.outer;
    hl_exec_clear(c);   /* (what the flows that ran meanwhile left there) */
    for (size_t i = 0; i < c->nnodes && i < 32; i++) {
        hl_node *n = &c->nodes[i];
        part *p = &parts[i];
        if (!(mask & (1u << i))) continue;
        if (p->srv >= 0) n->topo->use(n, p->srv);   /* the flow reads its own server's state */
        n->st = p->st;
        n->wrote = p->wrote;
        if (p->st != HILOCK_OK) {
            size_t klen;
            const char *key = hl_cmds_key(cmds, ncmd, &klen);
            snprintf(n->err, sizeof n->err, "%s", p->err[0] ? p->err : hilock_strerror(p->st));
            for (int q = 0; q < HL_MAX_CMDS; q++) hl_reply_free(p->reply[q]);
            if (!p->abandoned) hl_emit_node_error(c, n, klen ? key : NULL, klen);
            continue;
        }
        for (int q = 0; q < HL_MAX_CMDS; q++) n->reply[q] = p->reply[q];
        ok |= 1u << i;
    }
    return ok;
}

/* A sharded node's connection in use: the one to the server whose state is in the node (the
 * calling flow's, after its round trip). */
static lconn *node_conn(hl_loop *L, size_t i)
{
    hl_node *n = &L->c->nodes[i];
    return n->topo->current ? shard_conn(L, i, n->topo->current(n), 0) : &L->conns[i];
}

static int loop_connected(const hilock_client *c, size_t i)
{
    lconn *lc = c->loop && c == c->loop->c ? node_conn(c->loop, i) : NULL;
    return lc && lc->k != NULL;
}

/* The master of node i moved (topology): its connection goes, with every call on it (as the
 * blocking runner's would; their writes on the old master are undone by the flows). */
static void loop_close_node(hilock_client *c, size_t i, const char *why)
{
    char err[200];
    lconn *lc = c->loop && c == c->loop->c ? node_conn(c->loop, i) : NULL;
    if (!lc) return;
    snprintf(err, sizeof err, "%s", why);
    hl_lc_close(c->loop, lc, HILOCK_EIO, err);
}

static void loop_pause(hilock_client *c, int64_t until_us)
{
    hl_loop *L = c->loop;
    call *me = L->running;
    if (!me || !hl_fiber_current() || me->cancel || L->closing) return;
    me->wake_us = until_us;
    while (hl_now_us() < until_us && !me->cancel && !L->closing) {
        me->state = S_SUSPENDED;
        me->yields++;
        hl_fiber_yield();
    }
    me->wake_us = HL_NEVER;
}

static int loop_cancelled(const hilock_client *c)
{
    return c->loop && c->loop->running && c->loop->running->user_cancel;
}

static int loop_may_block(const hilock_client *c)
{
    return c->loop && c->loop->running && hl_fiber_current();
}

/* ---- calls ---- */

static void call_main(void *arg)
{
    call *k = arg;
    hilock_client *c = k->L->c;
    switch (k->op) {
    case OP_ACQUIRE:
        k->st = hl_acquire_limit(c, k->key, k->limit, k->ttl_ms, k->wait_ms, k->kind, &k->l);
        break;
    case OP_RELEASE: k->st = hilock_release(k->l); break;
    case OP_EXTEND: k->st = hilock_extend(k->l, k->ttl_ms); break;
    case OP_RENEW:
        k->l->renewing = 1;   /* (its events: RENEWAL) */
        k->st = hilock_extend(k->l, k->ttl_ms);
        k->l->renewing = 0;
        break;
    case OP_GUARDED:
        k->st = !k->gargv ? hl_fail(c, HILOCK_ENOMEM, "out of memory")
                          : hilock_guarded_command(k->l, k->gargc, (const char **)k->gargv, k->glen, &k->greply);
        break;
    default: k->st = hilock_check(k->l); break;
    }
    if (k->user_cancel) k->st = hl_cancel_verdict(c, k->st);
    memcpy(k->errmsg, c->errmsg, sizeof k->errmsg);
}

static int64_t loop_hook(hilock *l, hl_hook_ev ev);

static void unlink_call(hl_loop *L, call *k)
{
    if (k->counted) {
        if (k->counted == 1) unchain(k);
        k->l->loop_linked--;
        k->counted = 0;
    }
    if (k->prev) k->prev->next = k->next;
    else L->head = k->next;
    if (k->next) k->next->prev = k->prev;
    else L->tail = k->prev;
    k->next = k->prev = NULL;
}

/* A call other than its acquire, or a keepalive, still has l: its hook stays (counts kept by
 * accept_call, finished, unlink_call, hl_loop_keepalive and ka_end: no walk of every call). */
static int lock_busy(hl_loop *L, const hilock *l)
{
    (void)L;
    return l->loop_linked > 0 || l->loop_kas > 0;
}

static void ka_end(hl_loop *L, ka *a);

/* Resume a call's flow (from outside every fiber). */
static void run(hl_loop *L, call *k)
{
    call *prev = L->running;
    char outer[HL_ERRMSG_MAX];
    int over;
    if (k->state == S_QUEUED && k->cancel) {   /* a renewal its keepalive no longer wants */
        k->st = HILOCK_EIO;
        hl_call_finished(k);
        return;
    }
    if (k->state == S_QUEUED && !(k->f = hl_fiber_new(call_main, k))) {
        k->st = hl_fail(L->c, HILOCK_ENOMEM, "out of memory");
        memcpy(k->errmsg, L->c->errmsg, sizeof k->errmsg);
        hl_call_finished(k);
        return;
    }
    if (k->inrq) hl_rq_remove(L, k);
    L->running = k;
    k->state = S_RUNNING;   /* (the flow sets S_SUSPENDED when it waits) */
    /* c->errmsg is the flow's while it runs: other flows run whenever it waits (a message
     * written before an undo's round trip must not come back as another call's BUSY) */
    memcpy(outer, L->c->errmsg, sizeof outer);
    memcpy(L->c->errmsg, k->errmsg, sizeof k->errmsg);
    over = hl_fiber_resume(k->f);
    memcpy(k->errmsg, L->c->errmsg, sizeof k->errmsg);
    memcpy(L->c->errmsg, outer, sizeof outer);
    L->running = prev;
    if (over) {
        hl_fiber_free(k->f);
        k->f = NULL;
        hl_call_finished(k);
    }
}

/* An earlier call on the same lock is not over: this one waits (calls on a lock run in
 * order; see hilock_async.h). */
static int blocked(const call *k)
{
    if (k->op == OP_ACQUIRE) return 0;
    /* the oldest unfinished call of its lock goes first; the others wait for it. (The
     * acquire that made the lock is not chained: its done, which hands the lock out, runs
     * only once it finished.) */
    if (k->counted == 1) return k->l->loop_first != k;
    for (const call *o = k->prev; o; o = o->prev)
        if (o->l == k->l && o->state != S_FINISHED) return 1;
    return 0;
}

static void ka_due_at(hl_loop *L, int64_t t)
{
    if (t < L->ka_due) L->ka_due = t;
}

/* A renewal of a keepalive ended: schedule the next one, or report the loss. */
static void renew_ended(hl_loop *L, call *k)
{
    ka *a = k->ka;
    hilock_status st = k->st;
    int64_t retry;
    a->busy = 0;
    if (st == HILOCK_OK) {
        a->renewals++;
        if (a->max_renewals && a->renewals >= a->max_renewals) {
            char why[HL_ERRMSG_MAX];
            hl_ka_capped(why, sizeof why, a->l, a->renewals);
            hl_ka_ended(a->l, why);
            ka_end(L, a);
            return;
        }
        ka_due_at(L, a->next_us = hl_ka_renew_due(a->l));
        return;
    }
    if (hl_ka_transient(st) &&
        hl_ka_may_retry(a->l, retry = hl_next_attempt(L->c, 0, a->l->valid_until_us), a->margin_us)) {
        ka_due_at(L, a->next_us = retry);
        return;
    }
    {
        hilock *l = a->l;
        hilock_lost_fn fn = a->on_lost;
        void *arg = a->arg;
        ka_end(L, a);
        memcpy(L->c->errmsg, k->errmsg, sizeof k->errmsg);
        hl_ka_ended(l, k->errmsg[0] ? k->errmsg : hilock_strerror(st));
        if (hl_ka_transient(st)) hl_renewals_gave_up(l, st, k->errmsg);   /* (else extend said) */
        if (fn) fn(l, st, arg);
    }
}

/* Deliver the ended calls' results, in the order they ended. */
static int deliver(hl_loop *L)
{
    int any = 0;
    call *k;
    while (!L->dead && (k = L->dq) != NULL) {
        hilock *l = k->l;
        if (!(L->dq = k->dnext)) L->dq_tail = NULL;
        if (k->inrq) hl_rq_remove(L, k);
        unlink_call(L, k);
        any = 1;
        if (l && !lock_busy(L, l) && l->hook == loop_hook) l->hook = NULL;
        if (k->op == OP_RENEW) {
            if (k->ka) renew_ended(L, k);
        } else if (k->op == OP_GUARDED) {
            memcpy(L->c->errmsg, k->errmsg, sizeof k->errmsg);
            k->gdone(k->st, l, k->greply, k->arg);   /* (the reply is the callee's now) */
        } else {
            memcpy(L->c->errmsg, k->errmsg, sizeof k->errmsg);
            k->done(k->st, k->op == OP_ACQUIRE && k->st != HILOCK_OK ? NULL : l, k->arg);
        }
        for (int i = 0; i < k->gargc; i++) free(k->gargv[i]);
        free(k->gargv);
        free(k->glen);
        free(k->key);
        free(k);
    }
    return any;
}

static void start_renewals(hl_loop *L, int64_t now);

/* Flows run per pass, at most: a burst of calls (1,000 issued at once, 1,000 replies in one
 * read) is spread over several turns of the loop, so no pass holds the loop up for long
 * (each pass still writes its calls' commands in one go). 64 made passes of 15 ms on a
 * loaded machine when 500 calls timed out at once; 16 keeps them to a few ms and costs no
 * measurable throughput at 100 in flight. */
#define PASS_BUDGET 16

/* Start and resume flows until none can go on without the loop, or the pass's budget is
 * spent (the timer then asks for the next turn at once). */
static void run_all(hl_loop *L)
{
    int progress = 1, budget = L->closing ? INT32_MAX : PASS_BUDGET;
    while (progress && !L->dead && budget > 0) {
        int64_t now = hl_now_us();
        call *k;
        progress = 0;
        start_renewals(L, now);
        for (k = L->head; k; k = k->next)   /* pauses that are over (one may come inside an
                                               hl_exec: a Cluster route waiting for the map) */
            if (k->state == S_SUSPENDED && k->wake_us != HL_NEVER &&
                (k->wake_us <= now || k->cancel || L->closing))
                hl_call_runnable(k);
        for (k = L->head; k && budget > 0; k = k->next)   /* new calls, in the order made */
            if (k->state == S_QUEUED && !blocked(k)) {
                run(L, k);
                budget--;
                progress = 1;
            }
        while (budget > 0 && (k = hl_rq_pop(L)) != NULL)   /* replies in, in the order they came */
            if (k->state == S_RUNNABLE) {
                run(L, k);
                budget--;
                progress = 1;
            }
        if (deliver(L)) progress = 1;
    }
}

static int64_t next_deadline(hl_loop *L)
{
    int64_t first = HL_NEVER;
    if (L->rq || L->dq) return 0;
    for (call *k = L->head; k; k = k->next) {
        if (k->state == S_QUEUED && !blocked(k)) return 0;
        if (k->wake_us < first) first = k->wake_us;
        for (xrun *x = k->x; x; x = x->outer)
            for (uint32_t m = x->mask; m; m &= m - 1) {   /* (its nodes only: every pass) */
                int i = __builtin_ctz(m);
                if (x->parts[i].lc && !x->parts[i].done && x->parts[i].end < first)
                    first = x->parts[i].end;
            }
    }
    if (L->ka_due < first) first = L->ka_due;   /* (a lower bound: a pass then walks them) */
    return first;
}

static void expire(hl_loop *L, int64_t now)
{
    for (call *k = L->head; k; k = k->next)
        for (xrun *x = k->x; x; x = x->outer)
            for (uint32_t m = x->mask; m; m &= m - 1) {   /* (its nodes only: every pass) */
                part *p = &x->parts[__builtin_ctz(m)];
                char err[200];
                if (p->done || p->end > now || !p->lc) continue;
                hl_lc_err_text(L, p->lc, err, sizeof err, p->lc->opening ? "connect (resolving the "
                         "master)" : p->lc->k && p->lc->k->connecting ?
                         p->lc->k->io.ops->timeout_error(&p->lc->k->io) : "read", "timed out");
                hl_lc_close(L, p->lc, HILOCK_ETIMEDOUT, err);
            }
}

static void for_each_conn(hl_loop *L, void (*fn)(hl_loop *, lconn *))
{
    for (size_t i = 0; i < L->c->nnodes; i++) fn(L, &L->conns[i]);
    for (lconn *lc = L->side; lc; lc = lc->next) fn(L, lc);
    for (lconn *lc = L->aux; lc; lc = lc->next) fn(L, lc);
    for (lconn *lc = L->shards; lc; lc = lc->next) fn(L, lc);
}

/* Side connections that ended abnormally are closed; free those. */
static void prune_side(hl_loop *L)
{
    lconn **pp = &L->side;
    while (*pp) {
        lconn *lc = *pp;
        if (!lc->k && !lc->opening && !lc->qn && !lc->whead) {   /* (opening: a flow holds it) */
            *pp = lc->next;
            free(lc->q);
            free(lc);
        } else {
            pp = &lc->next;
        }
    }
}

static void arm_timer(hl_loop *L)
{
    int64_t at = next_deadline(L), ms;
    if (at == HL_NEVER) {
        if (L->timer_at != -1) L->app.timer(L->app.data, -1);
        L->timer_at = -1;
        return;
    }
    ms = at <= 0 ? 0 : (at - hl_now_us() + 999) / 1000;
    if (ms < 0) ms = 0;
    L->timer_at = at;
    L->app.timer(L->app.data, ms);
}

static void loop_free(hl_loop *L);
static void cancel_calls(hl_loop *L);

/* One pass: I/O on fd (-1: none), deadlines, flows, writes, results; then what the loop must
 * watch and when to come back. */
static void pass(hl_loop *L, int fd, int events)
{
    hilock_client *c = L->c;
    hl_client_ref(c);   /* a done may free the client */
    L->in_pass++;
    hl_cancel_pending(c->cancel);   /* (a cancel is the loop's whatever call made it) */
    if (hl_cancel_due(c->cancel)) cancel_calls(L);
    else if (fd >= 0 && fd == L->cancel_fd) hl_cancel_settle(c->cancel);
    if (fd >= 0)
        for (size_t i = 0; i < c->nnodes; i++)
            if (L->conns[i].fd == fd) hl_lc_io(L, &L->conns[i], events);
    if (fd >= 0)
        for (lconn *lc = L->side; lc; lc = lc->next)
            if (lc->fd == fd) hl_lc_io(L, lc, events);
    if (fd >= 0)
        for (lconn *lc = L->aux; lc; lc = lc->next)
            if (lc->fd == fd) hl_lc_io(L, lc, events);
    if (fd >= 0)
        for (lconn *lc = L->shards; lc; lc = lc->next)
            if (lc->fd == fd) hl_lc_io(L, lc, events);
    expire(L, hl_now_us());
    run_all(L);
    if (!L->dead) {
        for_each_conn(L, hl_lc_flush);
        run_all(L);   /* (a failed write ends calls) */
    }
    if (!L->dead) {
        prune_side(L);
        for_each_conn(L, hl_lc_watch);
        arm_timer(L);
    }
    L->in_pass--;
    if (L->dead && !L->in_pass) loop_free(L);
    hl_client_unref(c);
}

/* ---- the entry points' common part ---- */

static hilock_status accept_call(hilock_client *c, hilock *l, int op, int64_t ttl_ms,
                                 hilock_done_fn done, void *arg, call **out)
{
    hl_loop *L = c->loop;
    call *k;
    *out = NULL;
    if (!L || L->closing)
        return hl_fail(c, HILOCK_EINVAL, L ? "client being freed" : c->runner ? "client freed" :
                       "client not attached to an event loop (hilock_loop_attach)");
    if (!done && op != OP_RENEW && op != OP_GUARDED) return hl_fail(c, HILOCK_EINVAL, "done is NULL");
    if (!(k = calloc(1, sizeof *k))) return hl_fail(c, HILOCK_ENOMEM, "out of memory");
    k->L = L;
    k->op = op;
    k->l = l;
    k->ttl_ms = ttl_ms;
    k->done = done;
    k->arg = arg;
    k->wake_us = HL_NEVER;
    k->state = S_QUEUED;
    k->prev = L->tail;
    if (L->tail) L->tail->next = k;
    else L->head = k;
    L->tail = k;
    if (l && op != OP_ACQUIRE) {
        call **pp = (call **)&l->loop_first;
        while (*pp) pp = &(*pp)->lnext;   /* (its lock's chain: a call or two) */
        *pp = k;
        l->loop_linked++;
        k->counted = 1;
    }
    if (l) l->hook = loop_hook;   /* hilock_free ends its calls first */
    *out = k;
    if (!L->in_pass && L->timer_at != 0) {   /* started at the next turn of the loop */
        L->timer_at = 0;
        L->app.timer(L->app.data, 0);
    }
    return hl_ok(c);
}

static hilock_status async_acquire(hilock_client *c, const char *key, int limit, int64_t ttl_ms,
                                   int64_t wait_ms, const hl_kind_ops *kind, hilock_done_fn done, void *arg)
{
    hilock_status st;
    call *k;
    char *dup;
    if ((st = hl_acquire_args(c, key, ttl_ms, wait_ms)) != HILOCK_OK) return st;
    if (!(dup = hl_strdup(key))) return hl_fail(c, HILOCK_ENOMEM, "out of memory");
    if ((st = accept_call(c, NULL, OP_ACQUIRE, ttl_ms, done, arg, &k)) != HILOCK_OK) {
        free(dup);
        return st;
    }
    k->key = dup;
    k->wait_ms = wait_ms;
    k->kind = kind;
    k->limit = limit;
    return st;
}

hilock_status hl_async_acquire_limit(hilock_client *c, const char *key, int limit, int64_t ttl_ms,
                                     int64_t wait_ms, const hl_kind_ops *kind, hilock_done_fn done, void *arg)
{
    hilock_status st;
    int took;
    if (!c) return HILOCK_EINVAL;
    if ((st = hl_enter(c, &took)) != HILOCK_OK) return st;   /* (the thread rule: lock.h) */
    return hl_leave(c, took, async_acquire(c, key, limit, ttl_ms, wait_ms, kind, done, arg));
}

hilock_status hl_async_acquire(hilock_client *c, const char *key, int64_t ttl_ms, int64_t wait_ms,
                               const hl_kind_ops *kind, hilock_done_fn done, void *arg)
{
    return hl_async_acquire_limit(c, key, 0, ttl_ms, wait_ms, kind, done, arg);
}

static hilock_status lock_call(hilock *l, int op, int64_t ttl_ms, hilock_done_fn done, void *arg)
{
    hilock_status st;
    call *k;
    int took;
    if (!l) return HILOCK_EINVAL;
    if ((st = hl_enter(l->c, &took)) != HILOCK_OK) return st;   /* (the thread rule: lock.h) */
    if (op != OP_EXTEND || (st = hl_check_ttl(l->c, ttl_ms)) == HILOCK_OK)
        st = accept_call(l->c, l, op, ttl_ms, done, arg, &k);
    return hl_leave(l->c, took, st);
}

hilock_status hilock_release_async(hilock *l, hilock_done_fn done, void *arg)
{
    return lock_call(l, OP_RELEASE, 0, done, arg);
}

hilock_status hilock_extend_async(hilock *l, int64_t ttl_ms, hilock_done_fn done, void *arg)
{
    return lock_call(l, OP_EXTEND, ttl_ms, done, arg);
}

hilock_status hilock_check_async(hilock *l, hilock_done_fn done, void *arg)
{
    return lock_call(l, OP_CHECK, 0, done, arg);
}

/* The caller's command, copied into k (argvlen NULL: C strings); out of memory: none
 * (k->gargv NULL: the flow ends ENOMEM). */
static void guarded_copy(call *k, int argc, const char **argv, const size_t *argvlen)
{
    if ((k->gargv = calloc((size_t)argc, sizeof *k->gargv)) && (k->glen = malloc((size_t)argc * sizeof *k->glen)))
        for (k->gargc = 0; k->gargc < argc; k->gargc++) {
            size_t n = argvlen ? argvlen[k->gargc] : strlen(argv[k->gargc]);
            if (!(k->gargv[k->gargc] = malloc(n + 1))) break;
            memcpy(k->gargv[k->gargc], argv[k->gargc], n);
            k->gargv[k->gargc][n] = '\0';
            k->glen[k->gargc] = n;
        }
    if (k->gargv && k->glen && k->gargc == argc) return;
    for (int i = 0; k->gargv && i < k->gargc; i++) free(k->gargv[i]);
    free(k->gargv);
    free(k->glen);
    k->gargv = NULL;
    k->glen = NULL;
    k->gargc = 0;
}

/* hilock_guarded_command as a flow on the loop: what it refuses of the arguments alone is
 * refused here, at once (done never runs); the rest (a released lock, Redlock, a legacy lock,
 * a command a script may not run) ends in done, as the blocking call says it. */
hilock_status hilock_guarded_command_async(hilock *l, int argc, const char **argv, const size_t *argvlen,
                                           hilock_reply_fn done, void *arg)
{
    hilock_status st;
    call *k = NULL;
    int took;
    if (!l) return HILOCK_EINVAL;
    if ((st = hl_enter(l->c, &took)) != HILOCK_OK) return st;   /* (the thread rule: lock.h) */
    if (!done) st = hl_fail(l->c, HILOCK_EINVAL, "done is NULL");
    else if (!argv) st = hl_fail(l->c, HILOCK_EINVAL, "guarded command: argv is NULL");
    else if (argc < 1 || argc > HILOCK_GUARDED_MAX_ARGS)
        st = hl_fail(l->c, HILOCK_EINVAL, "guarded command: argc is %d (1 to %d)", argc, HILOCK_GUARDED_MAX_ARGS);
    for (int i = 0; st == HILOCK_OK && i < argc; i++)
        if (!argv[i]) st = hl_fail(l->c, HILOCK_EINVAL, "guarded command: argv[%d] is NULL", i);
    if (st == HILOCK_OK) st = accept_call(l->c, l, OP_GUARDED, 0, NULL, arg, &k);
    if (st == HILOCK_OK) {
        k->gdone = done;
        guarded_copy(k, argc, argv, argvlen);   /* (accepted: out of memory ends it in done) */
    }
    return hl_leave(l->c, took, st);
}

/* ---- keepalive on the loop ---- */

static void ka_end(hl_loop *L, ka *a)
{
    ka **pp = &L->kas;
    while (*pp && *pp != a) pp = &(*pp)->next;
    if (*pp) {
        *pp = a->next;
        a->l->loop_kas--;
    }
    for (call *k = L->head; k; k = k->next)   /* a renewal not started yet is dropped */
        if (k->op == OP_RENEW && k->ka == a) k->ka = NULL, k->cancel = 1;
    if (a->l->hook == loop_hook && !lock_busy(L, a->l)) a->l->hook = NULL;
    free(a);
}

static void start_renewals(hl_loop *L, int64_t now)
{
    int64_t next = HL_NEVER;
    if (now < L->ka_due) return;   /* (nothing due: no walk) */
    for (ka *a = L->kas; a; a = a->next) {
        call *k;
        int last = 0;
        int64_t ttl;
        if (a->busy) continue;   /* (its renewal's end sets the next time: ka_due_at) */
        if (a->next_us > now) {
            if (a->next_us < next) next = a->next_us;
            continue;
        }
        ttl = hl_ka_capped_ttl(L->c, a->l, a->hold_end_us, &last);
        if (ttl == 0 || accept_call(L->c, a->l, OP_RENEW, ttl, NULL, NULL, &k) != HILOCK_OK) {
            a->next_us = HL_NEVER;   /* capped (or no memory): the lock lives out its ttl */
            if (ttl == 0) {
                char why[HL_ERRMSG_MAX];
                hl_ka_capped(why, sizeof why, a->l, a->renewals);
                hl_ka_ended(a->l, why);
            }
            continue;
        }
        if (last) a->max_renewals = a->renewals + 1;
        k->ka = a;
        a->busy = 1;
    }
    L->ka_due = next;
}

/* hilock_keepalive on a lock of a client attached to a loop (keepalive.c): renewals on the
 * loop's timer, no thread. (A freed loop's client, whose runner is gone_runner, has no loop.) */
hilock_status hl_loop_keepalive(hilock *l, hilock_lost_fn on_lost, void *arg, const hilock_keepalive_options *o)
{
    hl_loop *L = l->c->loop;
    ka *a;
    if (!L || L->closing) return hl_fail(l->c, HILOCK_EINVAL, "keepalive %s: client freed", l->shown);
    if (l->loop_kas) return hl_fail(l->c, HILOCK_EINVAL, "keepalive %s: already running", l->shown);
    if (!(a = calloc(1, sizeof *a))) return hl_fail(l->c, HILOCK_ENOMEM, "out of memory");
    a->l = l;
    a->on_lost = on_lost;
    a->arg = arg;
    a->max_renewals = o->max_renewals;
    a->hold_end_us = o->max_hold_ms ? hl_add_sat(hl_now_us(), o->max_hold_ms * 1000) : HL_NEVER;
    a->margin_us = o->lost_margin_ms * 1000;
    hl_ka_ended(l, NULL);   /* ("" while it runs) */
    ka_due_at(L, a->next_us = hl_ka_renew_due(l));
    a->next = L->kas;
    L->kas = a;
    l->loop_kas++;
    l->hook = loop_hook;
    if (!L->in_pass) arm_timer(L);
    return hl_ok(l->c);
}

/* ---- the lock's hook (lock.h): release stops the keepalive, free ends the calls ---- */

/* Call k's parts end at once with st (a Sentinel's too, if it is resolving); connections
 * stay (others use them). */
static void end_parts(call *k, hilock_status st, const char *why)
{
    for (xrun *x = k->x; x; x = x->outer)
        for (int i = 0; i < 32; i++)
            if ((x->mask & (1u << i)) && x->parts[i].x && !x->parts[i].done) {
                part *p = &x->parts[i];
                if (p->lc) hl_lc_forget(p->lc, p, st, why);
                else hl_part_end(p, st, why);
            }
}

static void end_lock_calls(hl_loop *L, hilock *l)
{
    for (call *k = L->head; k; k = k->next) {
        if (k->l != l || k->state == S_FINISHED) continue;
        k->cancel = 1;
        if (k->state == S_QUEUED) {   /* never started: it ends without a round trip */
            k->st = hl_fail(L->c, HILOCK_EIO, "%s: lock freed with the call in flight", l->shown);
            memcpy(k->errmsg, L->c->errmsg, sizeof k->errmsg);
            hl_call_finished(k);
            continue;
        }
        end_parts(k, HILOCK_EIO, "lock freed with the call in flight");
        while (k->state != S_FINISHED) run(L, k);
    }
}

/* hilock_cancel on the loop's client (its pipe read, or any pass that finds a cancel asked):
 * every call in flight ends ECANCELED (call_main), the keepalives' renewals excepted; a call
 * not started yet ends without a round trip; a flow in a pause resumes (run_all). */
static void cancel_calls(hl_loop *L)
{
    for (call *k = L->head; k; k = k->next) {
        if (k->state == S_FINISHED || k->op == OP_RENEW || k->user_cancel) continue;
        k->user_cancel = k->cancel = 1;
        if (k->state == S_QUEUED) {
            k->st = hl_fail(L->c, HILOCK_ECANCELED, "cancelled before it started");
            memcpy(k->errmsg, L->c->errmsg, sizeof k->errmsg);
            hl_call_finished(k);
            continue;
        }
        end_parts(k, HILOCK_ECANCELED, "cancelled");
    }
}

static int64_t loop_hook(hilock *l, hl_hook_ev ev)
{
    hl_loop *L = l->c->loop;
    if (ev == HL_HOOK_VALIDITY) return l->valid_until_us;
    if (ev != HL_HOOK_STOP || !L) return 0;
    for (ka *a = L->kas; a; a = a->next)
        if (a->l == l) {
            ka_end(L, a);
            break;
        }
    if (hl_fiber_current()) return 0;   /* a release flow: its own call goes on */
    end_lock_calls(L, l);   /* hilock_free: every call on the lock ends first */
    L->in_pass++;
    deliver(L);
    L->in_pass--;
    if (L->dead && !L->in_pass) loop_free(L);
    else if (!L->in_pass) arm_timer(L);
    l->hook = NULL;
    return 0;
}

/* ---- attach, process, free ---- */

static hilock_status loop_attach(hilock_client *c, const hilock_loop *loop);

hilock_status hilock_loop_attach(hilock_client *c, const hilock_loop *loop)
{
    hilock_status st;
    int took;
    if (!c) return HILOCK_EINVAL;
    if ((st = hl_enter(c, &took)) != HILOCK_OK) return st;   /* (the thread rule: lock.h) */
    return hl_leave(c, took, loop_attach(c, loop));
}

static hilock_status loop_attach(hilock_client *c, const hilock_loop *loop)
{
    hl_loop *L;
    if (c->runner) return hl_fail(c, HILOCK_EINVAL, "client already attached to an event loop");
    if (!hl_fiber_available())   /* (fiber.c: musl off x86-64 and arm64) */
        return hl_fail(c, HILOCK_EINVAL,
                       "event loops are not supported by this build (no fiber switch for this machine)");
    if (!loop || !loop->watch || !loop->timer)
        return hl_fail(c, HILOCK_EINVAL, "hilock_loop: watch and timer are required");
    if (!(L = calloc(1, sizeof *L)) || !(L->conns = calloc(c->nnodes, sizeof *L->conns))) {
        free(L);
        return hl_fail(c, HILOCK_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < c->nnodes; i++) {
        L->conns[i].c = c;
        L->conns[i].node = i;
        L->conns[i].srv = -1;
        L->conns[i].fd = -1;
        hl_node_close(&c->nodes[i]);   /* the blocking runner's: not used from now on */
    }
    L->c = c;
    L->app = *loop;
    L->timer_at = -1;
    c->loop = L;
    c->runner = &loop_runner;
    /* hilock_cancel writes to it from any thread or a signal handler: the loop wakes */
    if ((L->cancel_fd = hl_cancel_fd(c->cancel)) >= 0) L->app.watch(L->app.data, L->cancel_fd, HILOCK_EV_READ);
    return hl_ok(c);
}

/* The loop's thread owns the client: the flows run inside these two calls, so their own
 * hl_enter finds it in this thread's hands. Refused (another thread calls, or is inside:
 * only a hilock_client_free can be, which ends every call): nothing to do and no status to
 * return. The reference: a done may free the client, and hl_leave still writes to it. */
static int enter_loop(hilock_client *c, int *took)
{
    if (hl_enter(c, took) != HILOCK_OK) return 0;
    hl_client_ref(c);
    return 1;
}

static void leave_loop(hilock_client *c, int took)
{
    hl_leave(c, took, HILOCK_OK);
    hl_client_unref(c);
}

void hilock_loop_fd(hilock_client *c, int fd, int events)
{
    int took;
    if (!c || !enter_loop(c, &took)) return;
    if (c->loop && !c->loop->closing && !c->loop->in_pass) pass(c->loop, fd, events);
    leave_loop(c, took);
}

void hilock_loop_timeout(hilock_client *c)
{
    int took;
    if (!c || !enter_loop(c, &took)) return;
    if (c->loop && !c->loop->closing && !c->loop->in_pass) {
        c->loop->timer_at = -1;   /* (it fired) */
        pass(c->loop, -1, 0);
    }
    leave_loop(c, took);
}

static void close_conn(hl_loop *L, lconn *lc)
{
    hl_lc_close(L, lc, HILOCK_EIO, "client freed with the call in flight");
}

static void loop_free(hl_loop *L)
{
    for (size_t i = 0; i < L->c->nnodes; i++) free(L->conns[i].q);
    free(L->conns);
    while (L->side) {
        lconn *lc = L->side;
        L->side = lc->next;
        free(lc->q);
        free(lc);
    }
    while (L->aux) {
        lconn *lc = L->aux;
        L->aux = lc->next;
        free(lc->q);
        free(lc);
    }
    while (L->shards) {
        lconn *lc = L->shards;
        L->shards = lc->next;
        free(lc->q);
        free(lc);
    }
    free(L);
}

/* hilock_client_free: every call ends (its done runs) before it returns; then the loop is
 * let go and the client keeps a runner that refuses everything (its locks may outlive it). */
static void loop_detach(hilock_client *c)
{
    hl_loop *L = c->loop;
    if (!L || L->closing) return;
    L->closing = 1;
    c->cancelled = 1;
    L->in_pass++;
    while (L->kas) ka_end(L, L->kas);
    for_each_conn(L, close_conn);
    for (call *k = L->head; k; k = k->next)
        if (k->state == S_QUEUED && k->op == OP_ACQUIRE) {   /* never started */
            k->st = hl_fail(c, HILOCK_EIO, "client freed with the call in flight");
            memcpy(k->errmsg, c->errmsg, sizeof k->errmsg);
            hl_call_finished(k);
        }
    while (L->head) {
        int moved = 0;
        for (call *k = L->head; k; k = k->next)
            if (k->state != S_FINISHED) {
                run(L, k);   /* its round trips fail at once now: it ends quickly */
                moved = 1;
            }
        if (!deliver(L) && !moved) break;
    }
    for_each_conn(L, close_conn);   /* (flows that ended may have opened one) */
    if (L->app.timer) L->app.timer(L->app.data, -1);
    if (L->cancel_fd >= 0) L->app.watch(L->app.data, L->cancel_fd, 0);
    if (L->app.detach) L->app.detach(L->app.data);
    L->in_pass--;
    c->loop = NULL;
    c->runner = &gone_runner;
    L->dead = 1;
    if (!L->in_pass) loop_free(L);
}

/* ---- what a freed client's leftover locks meet ---- */

static uint32_t gone_exec(hilock_client *c, uint32_t mask, const hl_cmd *cmds, int ncmd,
                          hl_deadline dl, int any)
{
    (void)cmds, (void)ncmd, (void)dl, (void)any;
    hl_exec_clear(c);
    return refuse_exec(c, mask, "client freed (it was attached to an event loop)");
}
static void gone_pause(hilock_client *c, int64_t until_us) { (void)c, (void)until_us; }
static int gone_may_block(const hilock_client *c) { (void)c; return 0; }
static void gone_detach(hilock_client *c) { (void)c; }
static int gone_connected(const hilock_client *c, size_t i) { (void)c, (void)i; return 0; }
static void gone_close_node(hilock_client *c, size_t i, const char *why) { (void)c, (void)i, (void)why; }

static const hl_runner loop_runner = {
    .exec = loop_exec,
    .pause_until = loop_pause,
    .may_block = loop_may_block,
    .detach = loop_detach,
    .connected = loop_connected,
    .close_node = loop_close_node,
    .cancelled = loop_cancelled,
};
static const hl_runner gone_runner = {
    .exec = gone_exec,
    .pause_until = gone_pause,
    .may_block = gone_may_block,
    .detach = gone_detach,
    .connected = gone_connected,
    .close_node = gone_close_node,
};
