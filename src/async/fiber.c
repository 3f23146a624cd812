/* SPDX-License-Identifier: BSD-3-Clause */
/* fiber.c -- suspendable flows on ucontext (see fiber.h for why).
 *
 * Stacks are mmap'ed with a guard page below them (an overflow faults instead of writing
 * over a neighbour) and kept in a small free list, so a lock cycle costs no mmap. The flows
 * run library code (whose deepest path is far below STACK_SIZE) and, as hilock_async.h warns
 * the application, its `watch` and `timer` callbacks, getaddrinfo's NSS modules and signal
 * handlers; `done` runs on the loop's own stack. Under AddressSanitizer the switches are announced
 * (__sanitizer_start/finish_switch_fiber) so that it tracks the right stack. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "fiber.h"

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

/* The switch. glibc's swapcontext saves and restores the signal mask with a system call on
 * every switch (two per round trip of a flow, plus getcontext/setcontext per flow): on
 * x86-64 a switch is done here in user space instead, saving what the ABI says a call
 * preserves (rbx, rbp, r12-r15, the stack pointer). Other machines use ucontext. */
#if defined(__x86_64__)
#define HL_OWN_SWITCH 1
void hl_ctx_swap(void **save_sp, void *load_sp);
__asm__(".text\n"
        ".globl hl_ctx_swap\n"
        ".hidden hl_ctx_swap\n"
        ".type hl_ctx_swap,@function\n"
        "hl_ctx_swap:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size hl_ctx_swap,.-hl_ctx_swap\n");
#endif

struct hl_fiber {
#ifdef HL_OWN_SWITCH
    void       *sp, *back_sp;
#else
    ucontext_t  ctx, back;
#endif
    void      (*fn)(void *);
    void       *arg;
    char       *map;       /* guard page + stack */
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

static size_t page(void) { return (size_t)sysconf(_SC_PAGESIZE); }

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
    m = mmap(NULL, STACK_SIZE + page(), PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return NULL;
    mprotect(m, page(), PROT_NONE);   /* the guard: stacks grow down */
    return m;
}

static void stack_put(char *m)
{
    pthread_mutex_lock(&pool_mu);
    if (npool < POOL_MAX) {
        pool[npool++] = m;
        m = NULL;
    }
    pthread_mutex_unlock(&pool_mu);
    if (m) munmap(m, STACK_SIZE + page());
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

static void make_ctx(hl_fiber *f)
{
    void **sp = (void **)(f->map + page() + STACK_SIZE);   /* 16-byte aligned top */
    *--sp = NULL;                        /* so that fiber_entry starts with rsp % 16 == 8 */
    *--sp = (void *)(uintptr_t)fiber_entry;   /* hl_ctx_swap's ret goes there */
    for (int i = 0; i < 6; i++) *--sp = NULL;   /* rbp, rbx, r12-r15 */
    f->sp = sp;
}
#else
/* makecontext passes int arguments only: the fiber is split into two halves. */
static void trampoline(unsigned int hi, unsigned int lo)
{
    fiber_main((hl_fiber *)(((uintptr_t)hi << 16 << 16) | (uintptr_t)lo));
    /* returning resumes uc_link (f->back) */
}

/* getcontext returns twice for a context that is later resumed as is; this one never is
 * (makecontext replaces its entry point), but the compiler cannot know: keep f volatile. */
static void make_ctx(hl_fiber *fp)
{
    hl_fiber *volatile f = fp;
    uintptr_t p = (uintptr_t)fp;
    getcontext(&f->ctx);
    f->ctx.uc_stack.ss_sp = f->map + page();
    f->ctx.uc_stack.ss_size = STACK_SIZE;
    f->ctx.uc_link = &f->back;
    makecontext(&f->ctx, (void (*)(void))trampoline, 2, (unsigned int)(p >> 16 >> 16),
                (unsigned int)(p & 0xffffffffu));
}
#endif

hl_fiber *hl_fiber_new(void (*fn)(void *), void *arg)
{
    hl_fiber *f = calloc(1, sizeof *f);
    if (!f) return NULL;
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
    __sanitizer_start_switch_fiber(&fake, f->map + page(), STACK_SIZE);
#endif
    current = f;
#ifdef HL_OWN_SWITCH
    hl_ctx_swap(&f->back_sp, f->sp);
#else
    swapcontext(&f->back, &f->ctx);
#endif
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
#ifdef HL_OWN_SWITCH
    hl_ctx_swap(&f->sp, f->back_sp);
#else
    swapcontext(&f->ctx, &f->back);
#endif
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
