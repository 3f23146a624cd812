/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinds.h -- the lock kinds of src/kinds/, each one hl_kind_ops table (lock/kind.h).
 *
 * Layer: kinds
 * May call: lock topology engine resp base platform
 *
 * Owns: the modern lock (and its unfenced form), the fair lock, the semaphore and the
 * shared/exclusive lock (permits.c): the commands each sends and
 * how it reads their answers. A kind calls the engine's commands, the lock layer's shared
 * helpers (reply verdicts, busy messages, validity) and the scripts; the lock layer calls a
 * kind only through its table (l->kind), never by name, and src/api/ names the tables. legacy/
 * holds the legacy and bridge kinds, a sibling of this folder under the same rules.
 */
#ifndef HILOCK_KINDS_H
#define HILOCK_KINDS_H

#include "kind.h"

/* modern.c: SET NX PX of a random token with a fencing token, compare-and-delete,
 * compare-and-pexpire; hl_kind_unfenced (options.fencing = 0): the same lock written by a
 * plain SET NX PX, no fencing token. */
extern const hl_kind_ops hl_kind_modern, hl_kind_unfenced;

/* fair.c: the modern lock served first come, first served (options.fair): a queue in the
 * key's slot, heartbeats by the server's clock, a release that calls the head. */
extern const hl_kind_ops hl_kind_fair;

/* permits.c: the sorted-set kinds (permits.lua): a counting semaphore's permit (l->limit),
 * and the two modes of a writer-preferring shared/exclusive lock. */
extern const hl_kind_ops hl_kind_sem, hl_kind_exclusive, hl_kind_shared;

/* last_word.c: a waiter that gives up (kind.h: give_up) leaves its kind's queue now rather than
 * lapse, within the acquire's bound, if an attempt may have put it there (l->queued):
 * leave_cmd's command on every master at once. */
void hl_kinds_leave(hilock *l, hl_deadline dl,
                    void (*leave_cmd)(hilock *l, hl_cmd *cmd, hl_kind_buf *b));
/* last_word.c: a giving-up waiter's last word (the queue's leave, modern.c's passing on of a
 * signal): make_cmd's command on every master at once, within io_timeout_ms and the
 * acquire's bound; nothing if that bound has passed. Its answer is not read. */
void hl_kinds_send(hilock *l, hl_deadline dl,
                   void (*make_cmd)(hilock *l, hl_cmd *cmd, hl_kind_buf *b));

#endif
