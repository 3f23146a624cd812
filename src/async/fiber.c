/* SPDX-License-Identifier: BSD-3-Clause */
/* fiber.c -- suspendable flows: a hand-written switch on x86-64 and arm64, ucontext elsewhere
 * (see fiber.h for why).
 *
 * Stacks come from the platform layer (hl_plat_stack_new) with a guard page below them (an
 * overflow faults instead of writing over a neighbour) and are kept in a small free list, so
 * a lock cycle costs no mmap. The flows run library code (whose deepest path is far below
 * STACK_SIZE) and, as hilock_async.h warns the application, its `watch` and `timer`
 * callbacks, getaddrinfo's NSS modules and signal handlers; `done` runs on the loop's own
 * stack. Under AddressSanitizer the switches are announced
 * (__sanitizer_start/finish_switch_fiber) so that it tracks the right stack. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fiber.h"
#include "platform.h"   /* the stacks: hl_plat_stack_new */

#if defined(__SANITIZE_ADDRESS__)
#define HL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HL_ASAN 1
#endif
#endif
#ifdef HL_ASAN
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old,
                                     size_t *size_old);
#endif

/* The flows' deepest path (a Redlock round trip's parts, a formatted error) uses a fraction
 * of this; sanitizers' redzones need more. */
#ifdef HL_ASAN
#define STACK_SIZE (256 * 1024)
#else
#define STACK_SIZE (64 * 1024)
#endif
/* Stacks of ended flows kept for reuse: a burst of 1,000 calls in flight then costs no
 * mmap/munmap (munmap's TLB shootdowns were most of a pass). Shared by every thread. */
#define POOL_MAX   1024

/* The switch (docs/portability.md, "The fiber switch"). glibc's swapcontext saves and
 * restores the signal mask with a system call on every switch (two per round trip of a flow,
 * plus getcontext/setcontext per flow): on x86-64 and arm64 a switch is done here in user
 * space instead, saving what the ABI says a call preserves -- the callee-saved registers, the
 * stack pointer and the floating-point control state (x86-64: MXCSR -- its control bits; its
 * status flags ride along, which the ABI lets a call change -- and the
 * x87 control word; arm64: fpcr) -- so a flow that changes its rounding mode (fesetround)
 * changes its own, as a called function's change is its caller's. Elsewhere ucontext is used:
 *   - x32 (__ILP32__): the 64-bit switch stores 8-byte stack pointers over the struct's
 *     4-byte fields;
 *   - shadow stacks (x86 CET's SHSTK, __CET__ & 2; arm64's GCS): the compiler marks the object
 *     as shadow-stack compatible, which a hand switch is not (its ret pops a return address
 *     the shadow stack never saw); glibc's swapcontext switches the shadow stack too, so the
 *     mark is true. On x86-64 with glibc both are built and each fiber takes the hand switch
 *     only while its thread runs with no shadow stack (HL_SHSTK_CHECK: rdssp reads 0), which
 *     is today's common case under a compiler that marks every object (Ubuntu's, Fedora's):
 *     ucontext costs two system calls a switch. (musl never turns a shadow stack on.) IBT and
 *     BTI alone keep the hand switch, which starts with their landing pad.
 *   - other machines, and non-ELF systems (the directives below are ELF's).
 * C libraries with no ucontext functions (musl has none) on other machines get no switch:
 * HL_FIBER_NONE, and the event-loop API says so at hilock_loop_attach (async.c).
 * HL_FIBER_FORCE_UCONTEXT / HL_FIBER_FORCE_NONE pick a path by hand, HL_FIBER_TEST_SHADOW_STACK
 * acts as if a shadow stack were on (tests). */
#if defined(HL_FIBER_FORCE_NONE)
#define HL_FIBER_NONE 1
#elif defined(HL_FIBER_FORCE_UCONTEXT)
#define HL_FIBER_UCONTEXT 1
#elif defined(__x86_64__) && !defined(__ILP32__) && defined(__ELF__)
#define HL_OWN_SWITCH 1
#if defined(__CET__) && (__CET__ & 2) && defined(__GLIBC__)
#define HL_FIBER_UCONTEXT 1
#define HL_SHSTK_CHECK 1
#endif
#elif defined(__aarch64__) && !defined(__ILP32__) && defined(__ELF__) && \
    !defined(__ARM_FEATURE_GCS_DEFAULT)
#define HL_OWN_SWITCH 1
#elif defined(__linux__) && !defined(__GLIBC__) && !defined(__UCLIBC__) && !defined(__BIONIC__)
#define HL_FIBER_NONE 1   /* musl, or another Linux C library without getcontext */
#else
#define HL_FIBER_UCONTEXT 1
#endif

#ifdef HL_FIBER_UCONTEXT
#include <ucontext.h>
#endif

#if defined(HL_OWN_SWITCH) && defined(__x86_64__)
/* The landing pad of an indirect call, where IBT is asked for (a nop elsewhere). */
#if defined(__CET__) && (__CET__ & 1)
#define HL_LANDING "  endbr64\n"
#else
#define HL_LANDING ""
#endif
/* The saved frame, from the saved stack pointer up: MXCSR (4 bytes) and the x87 control word
 * (2, and 2 unused), r15, r14, r13, r12, rbx, rbp, the return address. */
void hl_ctx_swap(void **save_sp, void *load_sp);
__asm__(".text\n"
        ".globl hl_ctx_swap\n"
        ".hidden hl_ctx_swap\n"
        ".type hl_ctx_swap,@function\n"
        "hl_ctx_swap:\n"
        HL_LANDING
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size hl_ctx_swap,.-hl_ctx_swap\n");
#define FRAME_WORDS 7   /* below the return address */

/* A new fiber starts with the floating-point control state of the thread that made it (as
 * getcontext would give it). */
static void fp_state(void **slot)
{
    uint32_t mxcsr;
    uint16_t fcw;
    unsigned char b[8] = {0};
    __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
    __asm__ volatile("fnstcw %0" : "=m"(fcw));
    memcpy(b, &mxcsr, 4);
    memcpy(b + 4, &fcw, 2);
    memcpy(slot, b, 8);
}
#elif defined(HL_OWN_SWITCH) && defined(__aarch64__)
/* bti c: the landing pad of an indirect call (a linker's veneer), where BTI is asked for. */
#if defined(__ARM_FEATURE_BTI_DEFAULT)
#define HL_LANDING "  hint #34\n"
#else
#define HL_LANDING ""
#endif
/* The saved frame (176 bytes), from the saved stack pointer up: x19-x28, x29 (fp), x30 (lr:
 * where the switch returns to), d8-d15, fpcr, 8 unused. */
void hl_ctx_swap(void **save_sp, void *load_sp);
__asm__(".text\n"
        ".globl hl_ctx_swap\n"
        ".hidden hl_ctx_swap\n"
        ".type hl_ctx_swap,%function\n"
        ".p2align 2\n"
        "hl_ctx_swap:\n"
        HL_LANDING
        "  sub sp, sp, #176\n"
        "  stp x19, x20, [sp, #0]\n  stp x21, x22, [sp, #16]\n  stp x23, x24, [sp, #32]\n"
        "  stp x25, x26, [sp, #48]\n  stp x27, x28, [sp, #64]\n  stp x29, x30, [sp, #80]\n"
        "  stp d8, d9, [sp, #96]\n  stp d10, d11, [sp, #112]\n  stp d12, d13, [sp, #128]\n"
        "  stp d14, d15, [sp, #144]\n  mrs x9, fpcr\n  str x9, [sp, #160]\n"
        "  mov x9, sp\n  str x9, [x0]\n"
        "  mov sp, x1\n"
        "  ldp x19, x20, [sp, #0]\n  ldp x21, x22, [sp, #16]\n  ldp x23, x24, [sp, #32]\n"
        "  ldp x25, x26, [sp, #48]\n  ldp x27, x28, [sp, #64]\n  ldp x29, x30, [sp, #80]\n"
        "  ldp d8, d9, [sp, #96]\n  ldp d10, d11, [sp, #112]\n  ldp d12, d13, [sp, #128]\n"
        "  ldp d14, d15, [sp, #144]\n  ldr x9, [sp, #160]\n  msr fpcr, x9\n"
        "  add sp, sp, #176\n"
        "  ret\n"
        ".size hl_ctx_swap,.-hl_ctx_swap\n");
#define FRAME_WORDS 22
#define LR_WORD     11
#define FPCR_WORD   20

static void fp_state(void **slot)
{
    uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    memcpy(slot, &fpcr, 8);
}
#endif

struct hl_fiber {
#ifdef HL_OWN_SWITCH
    void       *sp, *back_sp;
#endif
#ifdef HL_FIBER_UCONTEXT
    ucontext_t  ctx, back;
#endif
#ifdef HL_SHSTK_CHECK
    int         own;       /* 1: the hand switch (no shadow stack); 0: ucontext */
#endif
    void      (*fn)(void *);
    void       *arg;
    char       *map;       /* the stack's lowest byte (a guard page below it: platform.h) */
    int         done;
#ifdef HL_ASAN
    const void *caller_bottom;
    size_t      caller_size;
#endif
};

static __thread hl_fiber *current;
static char *pool[POOL_MAX];
static int npool;
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;


/* fork() while another thread holds pool_mu (a loop thread taking a stack) would leave the
 * child's copy locked for ever, and its first flow hanging: the mutex is taken around the
 * fork, so the pool is whole on both sides. */
static void pool_lock(void) { pthread_mutex_lock(&pool_mu); }
static void pool_unlock(void) { pthread_mutex_unlock(&pool_mu); }
static void watch_forks(void) { pthread_atfork(pool_lock, pool_unlock, pool_unlock); }

static char *stack_get(void)
{
    char *m = NULL;
    pthread_once(&fork_once, watch_forks);   /* (before the first stack: nothing to guard earlier) */
    pthread_mutex_lock(&pool_mu);
    if (npool > 0) m = pool[--npool];
    pthread_mutex_unlock(&pool_mu);
    if (m) return m;
    return hl_plat_stack_new(STACK_SIZE);   /* (a guard page below it) */
}

static void stack_put(char *m)
{
    pthread_mutex_lock(&pool_mu);
    if (npool < POOL_MAX) {
        pool[npool++] = m;
        m = NULL;
    }
    pthread_mutex_unlock(&pool_mu);
    hl_plat_stack_free(m, STACK_SIZE);
}

static void fiber_main(hl_fiber *f)
{
#ifdef HL_ASAN
    __sanitizer_finish_switch_fiber(NULL, &f->caller_bottom, &f->caller_size);
#endif
    f->fn(f->arg);
    f->done = 1;
#ifdef HL_ASAN
    __sanitizer_start_switch_fiber(NULL, f->caller_bottom, f->caller_size);   /* never back */
#endif
}

#ifdef HL_OWN_SWITCH
/* A new fiber's first switch "returns" here, on its own stack. */
static void fiber_entry(void)
{
    hl_fiber *f = current;
    fiber_main(f);
    hl_ctx_swap(&f->sp, f->back_sp);   /* for good: it is never resumed again */
    abort();
}

static void make_own(hl_fiber *f)
{
    void **sp = (void **)(f->map + STACK_SIZE);   /* 16-byte aligned top */
#if defined(__x86_64__)
    *--sp = NULL;   /* so that fiber_entry starts with rsp % 16 == 8, as after a call */
    *--sp = (void *)(uintptr_t)fiber_entry;   /* hl_ctx_swap's ret goes there */
    sp -= FRAME_WORDS;
    memset(sp, 0, FRAME_WORDS * sizeof *sp);   /* (a reused stack holds an old flow's) */
    fp_state(sp);
#else
    sp -= FRAME_WORDS;   /* popped, it leaves sp at the top: 16-byte aligned, as the ABI wants */
    memset(sp, 0, FRAME_WORDS * sizeof *sp);   /* fp = 0 ends a debugger's frame chain */
    sp[LR_WORD] = (void *)(uintptr_t)fiber_entry;   /* hl_ctx_swap's ret goes there */
    fp_state(&sp[FPCR_WORD]);
#endif
    f->sp = sp;
}
#endif

#ifdef HL_FIBER_UCONTEXT
/* makecontext passes int arguments only: the fiber is split into two halves. */
static void trampoline(unsigned int hi, unsigned int lo)
{
    fiber_main((hl_fiber *)(((uintptr_t)hi << 16 << 16) | (uintptr_t)lo));
    /* returning resumes uc_link (f->back) */
}

/* getcontext returns twice for a context that is later resumed as is; this one never is
 * (makecontext replaces its entry point), but the compiler cannot know: keep f volatile. */
static void make_uctx(hl_fiber *fp)
{
    hl_fiber *volatile f = fp;
    uintptr_t p = (uintptr_t)fp;
    getcontext(&f->ctx);
    f->ctx.uc_stack.ss_sp = f->map;
    f->ctx.uc_stack.ss_size = STACK_SIZE;
    f->ctx.uc_link = &f->back;
    makecontext(&f->ctx, (void (*)(void))trampoline, 2, (unsigned int)(p >> 16 >> 16),
                (unsigned int)(p & 0xffffffffu));
}
#endif

/* Which switch fiber f takes: OWN(f) is 1 for the hand switch. */
#ifdef HL_SHSTK_CHECK
#define OWN(f) ((f)->own)
/* No shadow stack on for this thread: rdssp, a nop then, leaves 0. (A thread's shadow stack is
 * turned on at its start, never later, and a fiber is resumed by the thread that made it.) */
static int no_shadow_stack(void)
{
    unsigned long long ssp = 0;
#ifdef HL_FIBER_TEST_SHADOW_STACK
    return 0;   /* (tests/fiber/check.sh: as if one were on) */
#endif
    __asm__ volatile("rdsspq %0" : "+r"(ssp));
    return ssp == 0;
}
#elif defined(HL_OWN_SWITCH)
#define OWN(f) 1
#endif

static void make_ctx(hl_fiber *f)
{
#ifdef HL_SHSTK_CHECK
    f->own = no_shadow_stack();
#endif
#ifdef HL_OWN_SWITCH
    if (OWN(f)) {
        make_own(f);
        return;
    }
#endif
#ifdef HL_FIBER_UCONTEXT
    make_uctx(f);
#endif
#ifdef HL_FIBER_NONE
    (void)f;   /* no fiber is made (hl_fiber_new), so none runs */
    (void)fiber_main;
#endif
}

/* From the resumer to f (in = 1), or from f back (in = 0). */
static void swap(hl_fiber *f, int in)
{
#ifdef HL_OWN_SWITCH
    if (OWN(f)) {
        if (in) hl_ctx_swap(&f->back_sp, f->sp);
        else hl_ctx_swap(&f->sp, f->back_sp);
        return;
    }
#endif
#ifdef HL_FIBER_UCONTEXT
    if (in) swapcontext(&f->back, &f->ctx);
    else swapcontext(&f->ctx, &f->back);
#endif
    (void)f, (void)in;
}

int hl_fiber_available(void)
{
#ifdef HL_FIBER_NONE
    return 0;
#else
    return 1;
#endif
}

hl_fiber *hl_fiber_new(void (*fn)(void *), void *arg)
{
    hl_fiber *f;
    if (!hl_fiber_available()) return NULL;
    if (!(f = calloc(1, sizeof *f))) return NULL;
    if (!(f->map = stack_get())) {
        free(f);
        return NULL;
    }
    f->fn = fn;
    f->arg = arg;
    make_ctx(f);
    return f;
}

int hl_fiber_resume(hl_fiber *f)
{
    hl_fiber *prev = current;
#ifdef HL_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, f->map, STACK_SIZE);
#endif
    current = f;
    swap(f, 1);
    current = prev;
#ifdef HL_ASAN
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
    return f->done;
}

void hl_fiber_yield(void)
{
    hl_fiber *f = current;
#ifdef HL_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, f->caller_bottom, f->caller_size);
#endif
    swap(f, 0);
#ifdef HL_ASAN
    __sanitizer_finish_switch_fiber(fake, &f->caller_bottom, &f->caller_size);
#endif
}

hl_fiber *hl_fiber_current(void) { return current; }

void hl_fiber_free(hl_fiber *f)
{
    if (!f) return;
    stack_put(f->map);
    free(f);
}
