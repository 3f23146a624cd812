/* SPDX-License-Identifier: BSD-3-Clause */
/* cancel.c -- hilock_cancel: ending a blocking call on a client from another thread or from a
 * signal handler (see hilock.h for the contract, engine.h for the state).
 *
 * A cancel is two things, both async-signal-safe: a counter bumped atomically (what is asked)
 * and one byte written to a non-blocking pipe (what wakes a thread in poll()). The pipe is
 * made by the client's own thread the first time one of its calls waits (hl_cancel_fd), so a
 * client that never waits costs no descriptors; a cancel that comes before then finds no pipe
 * and is seen by the counter, which every wait reads before it polls or sleeps: the pipe's
 * descriptor is published (seq_cst) before that read, and the counter is bumped (seq_cst)
 * before the canceller reads the descriptor, so either the waiter sees the count or the
 * canceller sees the pipe.
 *
 * Which call answers a cancel (hl_cancel_due): the one in progress, or, for a cancel made
 * between calls, the next acquire (hl_cancel_pending): so a shutdown that cancels just before
 * its thread starts to wait is not lost, and a release or an extend never fails for a cancel
 * that was meant for a wait. The call that answers consumes every cancel made so far. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "platform.h"

void hl_cancel_init(hl_cancel *k)
{
    memset(k, 0, sizeof *k);
    k->rd = k->wr = -1;
}

void hl_cancel_free(hl_cancel *k)
{
    if (k->rd >= 0) close(k->rd);
    if (k->wr >= 0) close(k->wr);
    k->rd = k->wr = -1;
}

/* Async-signal-safe: atomics, write(2), errno kept. */
void hl_cancel_ask(hl_cancel *k)
{
    int saved = errno, fd;
    __atomic_add_fetch(&k->asked, 1, __ATOMIC_SEQ_CST);
    fd = __atomic_load_n(&k->wr, __ATOMIC_SEQ_CST);
    if (fd >= 0) {
        char b = 1;
        if (write(fd, &b, 1) < 0) { /* full: a byte is already waiting, which is enough */ }
    }
    errno = saved;
}

void hl_cancel_enter(hl_cancel *k)
{
    k->from = __atomic_load_n(&k->asked, __ATOMIC_SEQ_CST);
    k->hit = 0;
}

void hl_cancel_pending(hl_cancel *k) { k->from = k->done; }

/* Empty the pipe: a byte stands for "look at the counter", never for a cancel of its own. */
static void drain(hl_cancel *k)
{
    char buf[64];
    if (k->rd >= 0)
        while (read(k->rd, buf, sizeof buf) > 0) {}
}

void hl_cancel_settle(hl_cancel *k)
{
    if (__atomic_load_n(&k->asked, __ATOMIC_SEQ_CST) == k->from) drain(k);
}

int hl_cancel_due(hl_cancel *k)
{
    unsigned asked = __atomic_load_n(&k->asked, __ATOMIC_SEQ_CST);
    if (asked == k->from) return 0;
    k->done = k->from = asked;
    k->hit = 1;
    drain(k);
    return 1;
}

int hl_cancel_fd(hl_cancel *k)
{
    int fd[2];
    if (k->rd >= 0) return k->rd;
    if (hl_plat_pipe(fd, O_CLOEXEC | O_NONBLOCK) < 0) return -1;   /* cancel then waits for a poll's end */
    k->rd = fd[0];
    __atomic_store_n(&k->wr, fd[1], __ATOMIC_SEQ_CST);
    return k->rd;
}

int hl_cancel_sleep_until(hl_cancel *k, int64_t until_us)
{
    int fd = hl_cancel_fd(k);
    for (;;) {
        int64_t left = until_us - hl_now_us();
        struct pollfd pf = { fd, POLLIN, 0 };
        if (hl_cancel_due(k)) return 1;
        if (left <= 0) return 0;
        if (fd < 0) {   /* no pipe (out of descriptors): sleep in steps, looking between them */
            int64_t step = left < HL_CANCEL_STEP_US ? left : HL_CANCEL_STEP_US;
            hl_plat_sleep_until(hl_now_us() + step);
            continue;
        }
        if (poll(&pf, 1, (int)((left + 999) / 1000 > 60000 ? 60000 : (left + 999) / 1000)) > 0)
            hl_cancel_settle(k);
    }
}

int hl_call_cancelled(const hilock_client *c)
{
    if (c->runner) return c->runner->cancelled && c->runner->cancelled(c);
    return c->cancel && c->cancel->hit;
}
