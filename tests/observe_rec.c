/* SPDX-License-Identifier: BSD-3-Clause */
/* observe_rec.c -- the recording observer of observe_rec.h. */
#include <stdlib.h>
#include <string.h>

#include "observe_rec.h"

static void copy_str(char *dst, size_t cap, const char *s, size_t len)
{
    if (!s) return;
    if (len >= cap) len = cap - 1;
    memcpy(dst, s, len);
    dst[len] = 0;
}

void hlt_rec_observer(const hilock_event *e, void *arg)
{
    hlt_rec *r = arg;
    hlt_rec_ev *x;
    pthread_mutex_lock(&r->mu);
    if (r->n < (int)(sizeof r->ev / sizeof *r->ev)) {
        x = &r->ev[r->n++];
        memset(x, 0, sizeof *x);
        x->e = *e;
        copy_str(x->key, sizeof x->key, e->key, e->keylen);
        if (e->node) copy_str(x->node, sizeof x->node, e->node, strlen(e->node));
        if (e->target) copy_str(x->target, sizeof x->target, e->target, strlen(e->target));
        if (e->message) copy_str(x->message, sizeof x->message, e->message, strlen(e->message));
    }
    pthread_mutex_unlock(&r->mu);
}

hlt_rec *hlt_rec_new(void)
{
    hlt_rec *r = calloc(1, sizeof *r);
    if (r) pthread_mutex_init(&r->mu, NULL);
    return r;
}

const hlt_rec_ev *hlt_rec_find(hlt_rec *r, hilock_event_kind kind, int i)
{
    const hlt_rec_ev *got = NULL;
    pthread_mutex_lock(&r->mu);
    for (int k = 0; k < r->n && !got; k++)
        if (r->ev[k].e.kind == kind && i-- == 0) got = &r->ev[k];
    pthread_mutex_unlock(&r->mu);
    return got;
}

int hlt_rec_count(hlt_rec *r, hilock_event_kind kind)
{
    int n = 0;
    pthread_mutex_lock(&r->mu);
    for (int k = 0; k < r->n; k++) n += r->ev[k].e.kind == kind;
    pthread_mutex_unlock(&r->mu);
    return n;
}
