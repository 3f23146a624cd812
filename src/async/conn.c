/* SPDX-License-Identifier: BSD-3-Clause */
/* conn.c -- the event-loop API's connections (loop.h): one per master, shared by every call
 * in flight, a waiter's side connections, the private clients' and a Cluster's per server;
 * their handshake, the FIFO of replies expected, encoding a call's part, reading replies, and
 * closing on a deadline or an error (async.c, "Pipelining" and "Bounds", says why). */
#define _GNU_SOURCE
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop.h"
/* ---- connections ---- */

/* The connection's node, holding what it reads and writes for lc's server: a sharded node
 * (Cluster) swaps that server's undo list, name and facts in first, as flows interleave. */
static hl_node *lc_node(const lconn *lc)
{
    hl_node *n = &lc->c->nodes[lc->node];
    if (lc->srv >= 0) n->topo->use(n, lc->srv);
    return n;
}

void hl_lc_watch(hl_loop *L, lconn *lc)
{
    int fd = lc->k ? lc->k->io.fd : -1, ev = 0;
    if (lc->k) {
        short want = POLLIN, pe;
        if (lc->k->out.len > lc->k->off) want |= POLLOUT;
        pe = lc->k->io.ops->poll_events(&lc->k->io, want);
        ev = (pe & POLLIN ? HILOCK_EV_READ : 0) | (pe & POLLOUT ? HILOCK_EV_WRITE : 0);
    }
    if (lc->fd >= 0 && lc->fd != fd) {
        L->app.watch(L->app.data, lc->fd, 0);
        lc->fd = -1;
        lc->ev = 0;
    }
    if (fd >= 0 && (fd != lc->fd || ev != lc->ev)) {
        L->app.watch(L->app.data, fd, ev);
        lc->fd = fd;
        lc->ev = ev;
    }
}


void hl_part_end(part *p, hilock_status st, const char *err)
{
    xrun *x = p->x;
    if (p->done) return;
    p->done = 1;
    p->st = st;
    p->wrote = p->queued && p->lc && p->lc->flushed > p->start_off;
    if (err) snprintf(p->err, sizeof p->err, "%s", err);
    if (--x->pending == 0) hl_call_runnable(p->owner);
}


/* hl_exec_any: the first node whose last reply carries data ends the wait; the others are
 * abandoned, their side connections closed (no stale reply can arrive later). */
static void any_answered(hl_loop *L, part *p)
{
    xrun *x = p->x;
    hl_reply *last = p->reply[p->ncmd - 1];
    if (!x->any || hl_reply_type(last) == HL_R_NIL || hl_reply_type(last) == HL_R_ERROR) return;
    for (int i = 0; i < 32; i++) {
        part *o = &x->parts[i];
        char why[200];
        if (!(x->mask & (1u << i)) || o->done || !o->lc) continue;
        snprintf(why, sizeof why, "%s: wait: abandoned: another node answered first",
                 lc_node(o->lc)->name);
        o->abandoned = 1;
        hl_lc_close(L, o->lc, HILOCK_ETIMEDOUT, why);
    }
}

static int q_push(lconn *lc, int kind, int n, part *p)
{
    if (lc->qn == lc->qcap) {
        size_t cap = lc->qcap ? lc->qcap * 2 : 16;
        slot *q = malloc(cap * sizeof *q);
        if (!q) return -1;
        for (size_t i = 0; i < lc->qn; i++) q[i] = lc->q[(lc->qh + i) % lc->qcap];
        free(lc->q);
        lc->q = q;
        lc->qh = 0;
        lc->qcap = cap;
    }
    lc->q[(lc->qh + lc->qn) % lc->qcap] = (slot){ kind, n, 0, p };
    lc->qn++;
    return 0;
}

void hl_lc_err_text(hl_loop *L, lconn *lc, char *buf, size_t len, const char *what, const char *why)
{
    (void)L;
    snprintf(buf, len, "%s: %s%s%s", lc_node(lc)->name, what, why ? ": " : "", why ? why : "");
}

/* A round trip of p's starts now (its connection's handshake, its commands, their resend as
 * EVAL): its own per-node timeout, within the call's bound, as engine.c gives each. */
static void part_renew(part *p)
{
    p->end = hl_round_end(p->dl, hl_now_us());
}

/* Append a part's commands (after the node's pending undos) to the connection's output. */
static void lc_encode(hl_loop *L, lconn *lc, part *p)
{
    hl_node *n = lc_node(lc);
    hl_buf *out = &lc->k->out;
    size_t before = out->len, at, nu, klen;
    const char *key = hl_cmds_key(p->cmds, p->ncmd, &klen);
    if (hl_cmds_refused(n, p->cmds, p->ncmd) != HILOCK_OK) {   /* nothing sent: n->err says why */
        hl_part_end(p, HILOCK_EINVAL, n->err);
        return;
    }
    if (!lc->side && !lc->clock_asked && hl_node_clock_old(n, hl_now_us()) &&
        q_push(lc, SLOT_CLOCK, 1, NULL) == 0) {
        /* a day-old clock reading on a connection never idle (hl_lc_submit reopens an idle
         * one): TIME goes ahead in the stream, so the slow count never runs an hour behind
         * (out of memory for its slot: asked again by the next command) */
        hl_node_clock_put(out);
        lc->clock_asked = 1;
    }
    if (!lc->side && (nu = hl_undo_put(n, out, &at, key, klen)) > 0) {
        /* sent, and forgotten at once: calls interleave here, so the blocking runner's
         * "forget when answered" by index cannot hold; an undo lost with a broken connection
         * only leaves a key to expire by its ttl */
        hl_undo_drop(n, at, nu);
        q_push(lc, SLOT_GHOST, (int)nu, NULL);
    }
    p->start_off = lc->queued + (out->len - before);
    p->t0 = hl_now_us();
    part_renew(p);
    if (p->ncmd == 0) {   /* hl_exec with no command: just the undos, sent now */
        lc->queued += out->len - before;
        hl_part_end(p, HILOCK_OK, NULL);
        return;
    }
    for (int i = 0; i < p->ncmd; i++) {
        if (p->asking) {   /* good for the next command only: each gets its own (as engine.c) */
            hl_cmd a;
            hl_cmd_init(&a, NULL, 0);
            hl_cmd_arg(&a, "ASKING", 6);
            hl_cmd_put(out, &a, 0, n);
        }
        hl_cmd_put(out, &p->cmds[i], p->used_eval, n);
    }
    lc->queued += out->len - before;
    p->queued = 1;
    if (out->oom || q_push(lc, SLOT_PART, p->ncmd * (1 + p->asking), p) < 0) {
        hl_lc_close(L, lc, HILOCK_ENOMEM, "out of memory");
        return;
    }
}

static void lc_ready(hl_loop *L, lconn *lc)
{
    lc->ready = 1;
    while (lc->whead && lc->k) {
        part *p = lc->whead;
        lc->whead = p->wnext;
        if (!lc->whead) lc->wtail = NULL;
        lc_encode(L, lc, p);
    }
}

void hl_lc_forget(lconn *lc, part *p, hilock_status st, const char *err)
{
    part **pp = &lc->whead, *prev = NULL;
    for (; *pp; prev = *pp, pp = &(*pp)->wnext)
        if (*pp == p) {
            *pp = p->wnext;
            if (lc->wtail == p) lc->wtail = prev;
            break;
        }
    for (size_t i = 0; i < lc->qn; i++) {
        slot *s = &lc->q[(lc->qh + i) % lc->qcap];
        if (s->kind == SLOT_PART && s->p == p) {
            s->kind = SLOT_GHOST;
            s->p = NULL;   /* (s->n: the replies still to come; those it has are freed with it) */
        }
    }
    hl_part_end(p, st, err);
}

/* lc's connection goes (its fd unwatched before it closes) and its stream starts again; what
 * was queued on it is the caller's to end or send again. */
static void lc_drop(hl_loop *L, lconn *lc)
{
    if (lc->k) {
        if (lc->fd >= 0) L->app.watch(L->app.data, lc->fd, 0);   /* before the fd closes */
        lc->fd = -1;
        lc->ev = 0;
        hl_conn_free(lc->k);
        lc->k = NULL;
    }
    lc->ready = lc->clock_asked = 0;
    lc->queued = lc->flushed = 0;
}

void hl_lc_close(hl_loop *L, lconn *lc, hilock_status st, const char *err)
{
    /* a connect or handshake that failed (not a wait's own, not the client's end) */
    if (lc->k && !lc->ready && !lc->side && !L->closing && st != HILOCK_OK)
        hl_conn_failed(lc->c, lc_node(lc), lc->k->opened_us, st, err);
    while (lc->qn) {
        slot s = lc->q[lc->qh];
        lc->qh = (lc->qh + 1) % lc->qcap;
        lc->qn--;
        if (s.kind == SLOT_PART) hl_part_end(s.p, st, err);
    }
    while (lc->whead) {
        part *p = lc->whead;
        lc->whead = p->wnext;
        hl_part_end(p, st, err);
    }
    lc->wtail = NULL;
    lc_drop(L, lc);
}

/* Open lc's connection, for the parts waiting on it. Its topology may pause the calling flow
 * while it finds the address (Sentinel: round trips on this loop); parts that come meanwhile
 * wait with the others, and a failure ends them all. */
static void lc_open(hl_loop *L, lconn *lc, int64_t end)
{
    hl_node *n = lc_node(lc);
    struct hl_conn *k;
    int64_t t0 = hl_now_us();
    hl_deadline connect = hl_one_round(hl_deadline_of(lc->c->opt.connect_timeout_ms * 1000, end), t0);
    char err[200];
    lc->opening = 1;
    if (hl_conn_new(lc->c, n, connect, &k) < 0) {
        lc->opening = 0;
        if (L->running && L->running->cancel)   /* (its Sentinel round trips were cut) */
            hl_lc_err_text(L, lc, err, sizeof err, "connect", "cut short: the call resolving the "
                     "master was ended (its lock freed); try again");
        else
            memcpy(err, n->err, sizeof err);
        if (!lc->side && !L->closing) hl_conn_failed(lc->c, n, t0, n->st, err);
        hl_lc_close(L, lc, n->st, err);
        return;
    }
    lc->opening = 0;
    lc->k = k;
    lc->ready = lc->clock_asked = 0;
    lc->queued = lc->flushed = 0;
}

/* The connect completed: the handshake goes alone (as with the blocking runner: commands
 * behind a refused AUTH or SELECT would still run), then the parts that waited for it. */
static void lc_connected(hl_loop *L, lconn *lc)
{
    hl_node *n = lc_node(lc);
    size_t before = lc->k->out.len;
    int count;
    lc->k->connecting = 0;
    lc->k->fresh = 0;
    for (part *p = lc->whead; p; p = p->wnext) part_renew(p);   /* the handshake's round trip */
    count = hl_handshake_put(n, &lc->k->out);
    if (count == 0) {   /* nothing to ask (hl_handshake_closed left it all out): the facts
                           unknown, committed as such; a wait's own is not counted */
        if (!lc->side) {
            (void)hl_handshake_commit(n, lc->k);   /* (no run_id to compare: OK) */
            hl_conn_ready(lc->c, n, lc->k);
        }
        lc_ready(L, lc);
        return;
    }
    lc->queued += lc->k->out.len - before;
    if (q_push(lc, SLOT_HANDSHAKE, count, NULL) < 0) hl_lc_close(L, lc, HILOCK_ENOMEM, "out of memory");
}

/* The handshake's peer closed the connection on a command its node now goes without
 * (hl_handshake_closed: a proxy and INFO): connect again at once for the same parts (none of
 * theirs was sent) where the address needs no round trip (a direct node's); elsewhere the
 * parts end with the reason, and the node's next connect goes without it. 1 when handled. */
static int lc_closed_on(hl_loop *L, lconn *lc)
{
    hl_node *n = lc_node(lc);
    slot *s = lc->qn == 1 ? &lc->q[lc->qh] : NULL;
    char err[200];
    if (lc->ready || !s || s->kind != SLOT_HANDSHAKE || !hl_handshake_closed(lc->c, n, s->at)) return 0;
    memcpy(err, n->err, sizeof err);
    if (lc->side || !lc->whead || !n->topo->address_known) {
        hl_lc_close(L, lc, HILOCK_EIO, err);
        return 1;
    }
    lc->qn = 0;   /* (the handshake's slot) */
    lc_drop(L, lc);
    lc_open(L, lc, lc->whead->end);
    return 1;
}

void hl_lc_submit(hl_loop *L, lconn *lc, part *p)
{
    p->lc = lc;
    if (lc->k && !lc->side && !lc->qn && !lc->whead &&
        (hl_conn_stale(lc->k, hl_now_us()) || hl_node_clock_old(lc_node(lc), hl_now_us())))
        hl_lc_close(L, lc, HILOCK_EIO, NULL);   /* closed by the server while idle, or its clock
                                                reading a day old (hl_node_clock_old): reopen */
    if (lc->ready) {
        lc_encode(L, lc, p);
        return;
    }
    p->wnext = NULL;
    if (lc->wtail) lc->wtail->wnext = p;
    else lc->whead = p;
    lc->wtail = p;
    if (!lc->k && !lc->opening) lc_open(L, lc, p->end);   /* (may pause this flow) */
}

/* A NOSCRIPT answer (script cache empty: restart, failover): the part goes again as EVAL. */
static int resend_eval(hl_loop *L, lconn *lc, part *p)
{
    int again = 0;
    if (p->used_eval) return 0;
    for (int i = 0; i < p->ncmd; i++)
        if (p->cmds[i].script && hl_reply_is_error(p->reply[i], "NOSCRIPT")) again = 1;
    if (!again) return 0;
    for (int i = 0; i < p->ncmd; i++) {
        hl_reply_free(p->reply[i]);
        p->reply[i] = NULL;
    }
    p->got = 0;
    p->used_eval = 1;
    lc_encode(L, lc, p);
    return 1;
}

/* One reply, for the slot at the head of the queue. 0, or -1 when the connection closed. */
static int lc_reply(hl_loop *L, lconn *lc, hl_reply *r)
{
    hl_node *n = lc_node(lc);
    slot *s = lc->qn ? &lc->q[lc->qh] : NULL;
    int last;
    if (!s) {
        hl_reply_free(r);
        hl_lc_close(L, lc, HILOCK_EIO, NULL);   /* a reply nobody asked for: not our stream */
        return -1;
    }
    last = --s->n == 0;
    if (s->kind == SLOT_HANDSHAKE) {
        hilock_status st = hl_handshake_judge(n, lc->k, s->at++, r);
        hl_reply_free(r);
        /* (a waiter's side connection reads its own facts but never commits them: the
         * node's are its main connection's) */
        if (st == HILOCK_OK && last && !lc->side) st = hl_handshake_commit(n, lc->k);
        if (st != HILOCK_OK) {
            char err[200];
            memcpy(err, n->err, sizeof err);
            hl_lc_close(L, lc, st, err);
            return -1;
        }
    } else if (s->kind == SLOT_CLOCK) {
        hl_node_clock_take(n, r);   /* (refused: the old reading stays, asked again next time) */
        lc->clock_asked = 0;
        hl_reply_free(r);
    } else if (s->kind == SLOT_GHOST) {
        hl_reply_free(r);
    } else if (s->p->asking && s->at++ % 2 == 0) {   /* ASKING's +OK (an error shows in the
                                                        command's own reply) */
        hl_reply_free(r);
    } else {
        s->p->reply[s->p->got++] = r;
    }
    if (!last) return 0;
    {
        slot done = *s;
        lc->qh = (lc->qh + 1) % lc->qcap;
        lc->qn--;
        if (done.kind == SLOT_HANDSHAKE) {
            if (!lc->side) hl_conn_ready(lc->c, n, lc->k);   /* (a wait's own: not counted) */
            lc_ready(L, lc);
        }
        if (done.kind != SLOT_PART || resend_eval(L, lc, done.p)) return 0;
        if (!done.p->x->any) hl_round_trip(lc->c, done.p->t0, hl_now_us());   /* (a wait: none) */
        hl_part_end(done.p, HILOCK_OK, NULL);
        any_answered(L, done.p);
        if (lc->k && hl_topo_drops(n, done.p->reply, done.p->ncmd)) {   /* READONLY */
            hl_lc_close(L, lc, HILOCK_EIO, NULL);
            return -1;
        }
    }
    return 0;
}

void hl_lc_flush(hl_loop *L, lconn *lc)
{
    size_t w;
    hl_io io;
    char err[200];
    if (!lc->k || lc->k->connecting || lc->k->out.len == lc->k->off) return;
    io = hl_conn_flush(lc->k, &w);
    lc->flushed += w;
    if (io == HL_IO_OK) return;
    hl_lc_err_text(L, lc, err, sizeof err, "write", lc->k->io.ops->error(&lc->k->io));
    hl_lc_close(L, lc, HILOCK_EIO, err);
}

void hl_lc_io(hl_loop *L, lconn *lc, int events)
{
    struct hl_conn *k = lc->k;
    const char *what = NULL, *why = NULL;
    hilock_status st;
    char err[200];
    if (!k) return;
    if (k->connecting) {
        hl_io io = k->io.ops->connect_step(&k->io);
        if (io == HL_IO_WANT_READ || io == HL_IO_WANT_WRITE) return;
        if (io != HL_IO_OK) {
            hl_lc_err_text(L, lc, err, sizeof err, "connect", k->io.ops->error(&k->io));
            hl_lc_close(L, lc, HILOCK_EIO, err);
            return;
        }
        hl_conn_connected(lc->c, lc_node(lc), k);
        lc_connected(L, lc);
        if (!lc->k) return;
    }
    hl_lc_flush(L, lc);
    if (!lc->k || !(events & HILOCK_EV_READ)) return;
    st = hl_conn_read(lc->k, 0, &what, &why);
    for (;;) {   /* what arrived before a failure still counts */
        hl_reply *r;
        int got = hl_resp_next(lc->k->resp, &r);
        if (got < 0) {
            hl_lc_err_text(L, lc, err, sizeof err, "protocol", hl_resp_why(lc->k->resp));
            hl_lc_close(L, lc, HILOCK_EIO, err);
            return;
        }
        if (!got) break;
        if (lc_reply(L, lc, r) < 0) return;
        if (!lc->k) return;
    }
    if (st != HILOCK_OK) {
        if (st == HILOCK_EIO && lc_closed_on(L, lc)) return;
        hl_lc_err_text(L, lc, err, sizeof err, what, why);
        hl_lc_close(L, lc, st, err);
        return;
    }
    lc->k->last_us = hl_now_us();
}

