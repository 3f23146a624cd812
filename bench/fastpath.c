/* SPDX-License-Identifier: BSD-3-Clause */
/* fastpath.c -- `make bench`, issue 14's fast path: uncontended acquire+release with
 * options.fencing = 0 (one plain SET NX PX per grant) against baseline (b) of bench.c -- a
 * bare hiredis loop sending SET NX PX + the library's compare-and-delete -- in interleaved
 * slices, over TCP 127.0.0.1 and a unix socket (bench.c: uncontended). Printed next to the
 * default (fenced) client's ratio to the same baseline from the table above it, so the cost
 * of the fencing token is the difference of the two. Target: fencing = 0 >= 0.97 x (b). */
#include <stdio.h>

#include "bench.h"

static void tune_no_fence(hilock_options *o)
{
    o->fencing = 0;
}

void fastpath(hlt_redis *r, const result fenced[2])
{
    result res[2];
    uncontended(r, 0, tune_no_fence, 1u << V_SETNX, &res[0]);
    uncontended(r, 1, tune_no_fence, 1u << V_SETNX, &res[1]);
    printf("\nFast path (issue 14): options.fencing = 0 (a plain SET NX PX, no fencing token) "
           "against (b), run as above\n(target >= 0.97); fencing = 1 = the default client's "
           "ratio to (b) in the table above\n");
    printf("  transport     fencing=0  CPU  | (b) SET NX PX + release  CPU  ratio | fencing=1 ratio\n");
    for (int t = 0; t < 2; t++)
        printf("  %-13s %9.0f %5.1f |               %9.0f %5.1f  %5.2f |           %5.2f\n",
               t ? "unix socket" : "tcp 127.0.0.1", res[t].rate[V_OURS], res[t].cpu[V_OURS],
               res[t].rate[V_SETNX], res[t].cpu[V_SETNX], res[t].ratio[V_SETNX],
               fenced[t].ratio[V_SETNX]);
}
