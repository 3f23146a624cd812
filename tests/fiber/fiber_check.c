/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fiber_check.c -- the fiber switch alone (src/async/fiber.c), as a plain C program: no server, no
 * Criterion, so that it runs where the suites cannot (a cross build under qemu-user, musl, a
 * build with -fcf-protection=full). Built and run by `make test` (tests/fiber/check.sh), by
 * `make test-musl` and by `make test-cross`. Exit 0: every check passed; 1: one failed (said on
 * stderr).
 *
 * What it proves: a round trip and its return values; flows interleaved on their own stacks
 * with values kept in callee-saved registers across switches; the floating-point control state
 * (rounding mode: x86-64's x87 control word and MXCSR, arm64's fpcr) is each side's own, as
 * the ABI says a call keeps it; a new fiber starts with its maker's; stacks are reused.
 * Built with -DEXPECT_NO_SWITCH: the build has no switch and says so.
 */
#include <fenv.h>
#include <stdio.h>
#include <stdlib.h>

#include "fiber.h"

static int failed;

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "fiber_check: %s:%d: failed: %s\n", __FILE__, __LINE__, #cond);  \
            failed = 1;                                                                      \
        }                                                                                    \
    } while (0)

/* The rounding mode as the vector/FP unit applies it (SSE on x86-64, fpcr on arm64): 1/3 is
 * not exact, so q + (-1)/3 is 0 rounding to nearest, one ulp above 0 rounding up (1/3 up,
 * -1/3 towards zero) and below it rounding down. volatile: computed now, not at compile time
 * (nor -1/3 as -(1/3), which holds rounding to nearest only). */
static int applied_mode(void)
{
    volatile double one = 1.0, minus_one = -1.0, three = 3.0;
    double sum = one / three + minus_one / three;
    return sum > 0 ? FE_UPWARD : sum < 0 ? FE_DOWNWARD : FE_TONEAREST;
}

/* ---- a round trip ---- */
static void count_to_three(void *arg)
{
    int *n = arg;
    for (int i = 0; i < 3; i++) {
        ++*n;
        hl_fiber_yield();
    }
    *n += 10;
}

static void round_trip(void)
{
    int n = 0;
    hl_fiber *f = hl_fiber_new(count_to_three, &n);
    CHECK(f != NULL);
    if (!f) return;
    CHECK(hl_fiber_current() == NULL);
    for (int i = 1; i <= 3; i++) {
        CHECK(hl_fiber_resume(f) == 0);
        CHECK(n == i);
    }
    CHECK(hl_fiber_resume(f) == 1);
    CHECK(n == 13);
    hl_fiber_free(f);
}

/* ---- interleaved flows: values live across switches, stacks apart ---- */
struct walk {
    unsigned long seed, result;
    hl_fiber *self;
};

/* Recursion puts frames on the fiber's stack; many live values across each yield (in
 * callee-saved registers at -O2) must come back as they were. */
static unsigned long deep(struct walk *w, int depth)
{
    unsigned long a = w->seed * 3 + (unsigned long)depth, b = a ^ 0x5555, c = a + b, d = c * 7,
                  e = d - a, g = e + 11, h = g * 13;
    double x = (double)a / 7, y = x * 1.5, z = y - x;   /* (d8-d15 on arm64) */
    CHECK(hl_fiber_current() == w->self);
    hl_fiber_yield();
    if (depth > 0) h += deep(w, depth - 1);
    return a + b + c + d + e + g + h + (unsigned long)(x * 1000 + y * 100 + z * 10);
}

static unsigned long deep_alone(unsigned long seed, int depth)
{
    unsigned long a = seed * 3 + (unsigned long)depth, b = a ^ 0x5555, c = a + b, d = c * 7,
                  e = d - a, g = e + 11, h = g * 13;
    double x = (double)a / 7, y = x * 1.5, z = y - x;
    if (depth > 0) h += deep_alone(seed, depth - 1);
    return a + b + c + d + e + g + h + (unsigned long)(x * 1000 + y * 100 + z * 10);
}

static void walker(void *arg)
{
    struct walk *w = arg;
    w->result = deep(w, 40);
}

static void interleaved(void)
{
    struct walk w[3] = {{1, 0, NULL}, {2, 0, NULL}, {3, 0, NULL}};
    int over[3] = {0, 0, 0}, left = 3, turns = 0;
    for (int i = 0; i < 3; i++) {
        w[i].self = hl_fiber_new(walker, &w[i]);
        CHECK(w[i].self != NULL);
        if (!w[i].self) return;
    }
    while (left > 0 && turns++ < 1000)   /* (bounded: 3 x 42 resumes are needed) */
        for (int i = 0; i < 3; i++)
            if (!over[i] && hl_fiber_resume(w[i].self)) {
                over[i] = 1;
                left--;
            }
    CHECK(left == 0);
    for (int i = 0; i < 3; i++) {
        CHECK(w[i].result == deep_alone(w[i].seed, 40));
        hl_fiber_free(w[i].self);
    }
}

/* ---- the floating-point control state is each side's own ---- */
struct fp_seen {
    int at_start, after_resume_get, after_resume_applied;
};

static void rounds_up(void *arg)
{
    struct fp_seen *s = arg;
    s->at_start = fegetround();
    fesetround(FE_UPWARD);
    hl_fiber_yield();   /* the resumer meanwhile rounds down */
    s->after_resume_get = fegetround();
    s->after_resume_applied = applied_mode();
}

static void fp_state(void)
{
    struct fp_seen s = {-1, -1, -1};
    hl_fiber *f;
    fesetround(FE_TOWARDZERO);   /* what a new fiber starts with: its maker's */
    f = hl_fiber_new(rounds_up, &s);
    CHECK(f != NULL);
    if (!f) return;
    fesetround(FE_TONEAREST);
    CHECK(hl_fiber_resume(f) == 0);
    CHECK(s.at_start == FE_TOWARDZERO);
    /* the fiber rounds up; this side still rounds to nearest */
    CHECK(fegetround() == FE_TONEAREST);
    CHECK(applied_mode() == FE_TONEAREST);
    fesetround(FE_DOWNWARD);
    CHECK(hl_fiber_resume(f) == 1);
    CHECK(s.after_resume_get == FE_UPWARD);
    CHECK(s.after_resume_applied == FE_UPWARD);
    CHECK(fegetround() == FE_DOWNWARD);   /* its end leaves ours as it was */
    CHECK(applied_mode() == FE_DOWNWARD);
    fesetround(FE_TONEAREST);
    hl_fiber_free(f);
}

/* ---- stacks are reused: many flows, one after the other ---- */
static void nothing(void *arg) { ++*(int *)arg; }

static void many(void)
{
    int n = 0;
    for (int i = 0; i < 5000; i++) {
        hl_fiber *f = hl_fiber_new(nothing, &n);
        CHECK(f != NULL);
        if (!f) return;
        CHECK(hl_fiber_resume(f) == 1);
        hl_fiber_free(f);
    }
    CHECK(n == 5000);
}

int main(void)
{
#ifdef EXPECT_NO_SWITCH
    const int want = 0;
#else
    const int want = 1;
#endif
    CHECK(hl_fiber_available() == want);
    if (!hl_fiber_available()) {
        CHECK(hl_fiber_new(nothing, NULL) == NULL);
    } else {
        round_trip();
        interleaved();
        fp_state();
        many();
    }
    if (!failed) printf("fiber_check: all checks passed\n");
    return failed;
}
