/* SPDX-License-Identifier: BSD-3-Clause */
/* last_word.c -- what a waiter that gives up (kind.h: give_up) sends last, shared by the
 * kinds: the fair queue's and the waiters' leave (fair.c, permits.c), and the modern lock's
 * passing on of a release signal it took (modern.c). In a file of its own so that no kind
 * calls another (make layers: no import circles). */
#include "kinds.h"

void hl_kinds_send(hilock *l, int64_t hard_deadline_us,
                   void (*make_cmd)(hilock *l, hl_cmd *cmd, hl_kind_buf *b))
{
    hilock_client *c = l->c;
    hl_cmd cmd;
    hl_kind_buf b;
    int64_t per = c->opt.io_timeout_ms * 1000, dl = hl_round_end(hl_now_us(), per, hard_deadline_us);
    if (dl <= hl_now_us()) return;
    make_cmd(l, &cmd, &b);
    hl_exec(c, hl_all_nodes(c), &cmd, 1, per, dl);
    hl_exec_clear(c);
}

void hl_kinds_leave(hilock *l, int64_t hard_deadline_us,
                    void (*leave_cmd)(hilock *l, hl_cmd *cmd, hl_kind_buf *b))
{
    if (!l->queued) return;
    hl_kinds_send(l, hard_deadline_us, leave_cmd);
    l->queued = 0;
}
