/* SPDX-License-Identifier: BSD-3-Clause */
/* runq.c -- the event loop's two queues (loop.h): flows to resume, in the order their
 * replies came, and ended calls, in the order they ended (their `done` runs so). Called by
 * the connections (conn.c) and the runner (async.c). */
#include "loop.h"

void hl_call_runnable(call *k)
{
    hl_loop *L = k->L;
    if (k->state != S_SUSPENDED) return;   /* (running: it sees for itself) */
    k->state = S_RUNNABLE;
    k->rnext = NULL;
    k->inrq = 1;
    if (L->rq_tail) L->rq_tail->rnext = k;
    else L->rq = k;
    L->rq_tail = k;
}

call *hl_rq_pop(hl_loop *L)
{
    call *k = L->rq;
    if (!k) return NULL;
    if (!(L->rq = k->rnext)) L->rq_tail = NULL;
    k->inrq = 0;
    return k;
}

void hl_rq_remove(hl_loop *L, call *k)
{
    call **pp = &L->rq, *prev = NULL;
    for (; *pp; prev = *pp, pp = &(*pp)->rnext)
        if (*pp == k) {
            *pp = k->rnext;
            if (L->rq_tail == k) L->rq_tail = prev;
            break;
        }
    k->inrq = 0;
}

void hl_call_finished(call *k)
{
    hl_loop *L = k->L;
    if (k->counted == 1) {   /* (once: blocked() trusts the chain) */
        unchain(k);
        k->counted = 2;
    }
    k->state = S_FINISHED;
    k->dnext = NULL;
    if (L->dq_tail) L->dq_tail->dnext = k;
    else L->dq = k;
    L->dq_tail = k;
}
