/* SPDX-License-Identifier: BSD-3-Clause */
/* loop_run.h -- running a libuv loop in a test, for the suites that drive clients attached to
 * one (they link -luv; the other suites never include this). Header-only: static functions. */
#ifndef HILOCK_TEST_LOOP_RUN_H
#define HILOCK_TEST_LOOP_RUN_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <uv.h>

static inline void hlt_loop_on_guard(uv_timer_t *t) { *(int *)t->data = 1; }

/* Run the loop until *count reaches want (count NULL: until ms pass), or limit_ms pass; with
 * a count, the test fails if it was not reached. */
static inline void hlt_loop_run(uv_loop_t *loop, const int *count, int want, long limit_ms)
{
    uv_timer_t guard;
    int fired = 0;
    uv_timer_init(loop, &guard);
    guard.data = &fired;
    uv_timer_start(&guard, hlt_loop_on_guard, (uint64_t)limit_ms, 0);
    while ((!count || *count < want) && !fired) uv_run(loop, UV_RUN_ONCE);
    uv_timer_stop(&guard);
    uv_close((uv_handle_t *)&guard, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    if (count) cr_assert_geq(*count, want, "only %d of %d calls ended within %ld ms", *count, want, limit_ms);
}

/* Close the loop once its handles are closed (the adapter's close callbacks run first). */
static inline void hlt_loop_close(uv_loop_t *loop)
{
    uv_run(loop, UV_RUN_NOWAIT);
    cr_assert_eq(uv_loop_close(loop), 0, "handles left open on the loop");
}

#endif
