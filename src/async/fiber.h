/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fiber.h -- flows that can be suspended and resumed on one thread (fiber.c). Nothing here
 * is API; nothing here knows hilock.
 *
 * Why: the event-loop API (async.c) runs the very same lock flows as the blocking
 * calls (lock.c: quorum, undo, fencing, waiting, errors) -- not a second copy written as a
 * state machine. A flow runs on its own small stack; where the blocking code would wait in
 * poll(), the loop runner suspends the flow (hl_fiber_yield) and the event loop resumes it
 * (hl_fiber_resume) when its replies are in. One thread only: a fiber is resumed by the
 * thread that made it, never from inside another fiber.
 */
#ifndef HILOCK_FIBER_H
#define HILOCK_FIBER_H

typedef struct hl_fiber hl_fiber;

/* 1: this build has a switch (fiber.c, "The switch"); 0: none for this machine and C library
 * (musl off x86-64 and arm64): hl_fiber_new always fails, and the event-loop API refuses to
 * attach (async.c). */
int       hl_fiber_available(void);

/* A fiber that will run fn(arg) when first resumed. NULL: out of memory. Stacks are kept
 * for reuse (hl_fiber_free). */
hl_fiber *hl_fiber_new(void (*fn)(void *), void *arg);
/* Run f until it yields or fn returns. 1: fn has returned (the fiber is over), 0: it
 * yielded. Only from outside every fiber. */
int       hl_fiber_resume(hl_fiber *f);
/* From inside a fiber: back to whoever resumed it. */
void      hl_fiber_yield(void);
/* The fiber running now, or NULL outside any. */
hl_fiber *hl_fiber_current(void);
/* Free a fiber that is over (or never ran); NULL-safe. */
void      hl_fiber_free(hl_fiber *f);

#endif
