/* SPDX-License-Identifier: BSD-3-Clause */
/* common.c -- the parts of the platform layer that are plain POSIX, built with every
 * implementation (see platform.h): what linux.c and posix.c both fall back to. */
#define _POSIX_C_SOURCE 200809L
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "platform.h"

#if HL_PLAT_MONO_CONDVAR
int hl_plat_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    int rc = pthread_condattr_init(&ca);
    if (rc) return rc;
    rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (!rc) rc = pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
    return rc;
}

void hl_plat_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t t_us)
{
    struct timespec ts = { (time_t)(t_us / 1000000), (long)(t_us % 1000000) * 1000 };
    pthread_cond_timedwait(cv, mu, &ts);
}
#endif

/* Not /proc/self/fd: opendir allocates, and this runs in a forked child of a threaded
 * process (async-signal-safe calls only). The cap bounds the loop when the limit is huge or
 * unlimited (a close per descriptor, ~0.1 us each); descriptors above it stay open. */
#define HL_PLAT_CLOSE_MAX 65536

void hl_plat_close_each(int lo)
{
    struct rlimit rl;
    long top = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        top = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > HL_PLAT_CLOSE_MAX ? HL_PLAT_CLOSE_MAX
                                                                            : (long)rl.rlim_cur;
    for (long fd = lo; fd < top; fd++) close((int)fd);
}

/* (plain loops, no libc: async-signal-safe in a forked child; title may lie inside argv) */
void hl_plat_set_title(int argc, char **argv, const char *title)
{
    char copy[256], *start, *end;
    size_t n = 0, room;
    if (argc < 1 || !argv || !argv[0] || !title) return;
    while (title[n] && n + 1 < sizeof copy) copy[n] = title[n], n++;
    start = end = argv[0];
    for (int i = 0; i < argc && argv[i] == end; i++)   /* the contiguous strings only */
        for (end = argv[i]; *end++;) {}
    room = (size_t)(end - start);
    for (size_t i = 0; i < room; i++) start[i] = i < n && i + 1 < room ? copy[i] : '\0';
}

#ifdef HL_PLAT_FP_X87
/* (the memory clobbers keep the caller's volatile loads and stores on their side) */
unsigned hl_plat_fp_double_begin(void)
{
    unsigned short cw, pc53;
    __asm__ __volatile__("fnstcw %0" : "=m"(cw) : : "memory");
    pc53 = (unsigned short)((cw & ~0x300u) | 0x200u);   /* PC field (bits 8-9) = 10b: 53 bits */
    __asm__ __volatile__("fldcw %0" : : "m"(pc53) : "memory");
    return cw;
}

void hl_plat_fp_double_end(unsigned saved)
{
    unsigned short cw = (unsigned short)saved;
    __asm__ __volatile__("fldcw %0" : : "m"(cw) : "memory");
}
#endif

char *hl_plat_stack_guard(void *m, size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (m == MAP_FAILED) return NULL;
    if (mprotect(m, page, PROT_NONE) != 0) {   /* the guard: stacks grow down */
        munmap(m, size + page);
        return NULL;
    }
    return (char *)m + page;
}

void hl_plat_stack_free(char *stack, size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (stack) munmap(stack - page, size + page);
}
