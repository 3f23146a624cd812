/* SPDX-License-Identifier: BSD-3-Clause */
/* last_word.c -- what a waiter that gives up (kind.h: give_up) sends last, shared by the
 * kinds: the fair queue's and the waiters' leave (fair.c, permits.c), and the modern lock's
 * passing on of a release signal it took (modern.c). In a file of its own so that no kind
 * calls another (make layers: no import circles). */
#include "kinds.h"

void hl_kinds_send(hilock *l, hl_deadline dl,
                   void (*make_cmd)(hilock *l, hl_cmd *cmd, hl_kind_buf *b))
{
    hilock_client *c = l->c;
    hl_cmd cmd;
    hl_kind_buf b;
    hl_deadline q = hl_one_round(hl_deadline_of(c->opt.io_timeout_ms * 1000, dl.hard_us), hl_now_us());
    if (q.hard_us <= hl_now_us()) return;
    make_cmd(l, &cmd, &b);
    hl_exec(c, hl_all_nodes(c), &cmd, 1, q);
    hl_exec_clear(c);
}

void hl_kinds_leave(hilock *l, hl_deadline dl,
                    void (*leave_cmd)(hilock *l, hl_cmd *cmd, hl_kind_buf *b))
{
    if (!l->queued) return;
    hl_kinds_send(l, dl, leave_cmd);
    l->queued = 0;
}
