/* SPDX-License-Identifier: BSD-3-Clause */
/* observe_rec.h -- an observer (hilock_observe.h) that records every event, with copies of
 * its strings, for the tests to look for (test_observe.c, test_observe_topo.c). Thread-safe:
 * a keepalive's thread reports too. */
#ifndef HILOCK_TEST_OBSERVE_REC_H
#define HILOCK_TEST_OBSERVE_REC_H

#include <pthread.h>

#include "hilock_observe.h"

typedef struct hlt_rec_ev {
    hilock_event e;   /* (its strings: the copies below; read those) */
    char key[64], node[128], target[128], message[256];
} hlt_rec_ev;

typedef struct hlt_rec {
    pthread_mutex_t mu;
    hlt_rec_ev      ev[512];   /* past 512: not kept */
    int             n;
    hilock_client  *c;                 /* for a test's own observer: the client to call */
    hilock_status   reentry;           /* ... what that call returned */
    char            reentry_msg[200];  /* ... and the errmsg then */
} hlt_rec;

hlt_rec *hlt_rec_new(void);   /* (freed with the test's process) */
void hlt_rec_observer(const hilock_event *e, void *arg);   /* arg: an hlt_rec */
/* The i-th event of kind (0-based), or NULL. */
const hlt_rec_ev *hlt_rec_find(hlt_rec *r, hilock_event_kind kind, int i);
int hlt_rec_count(hlt_rec *r, hilock_event_kind kind);

#endif
