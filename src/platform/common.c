/* SPDX-License-Identifier: BSD-3-Clause */
/* common.c -- the parts of the platform layer that are plain POSIX, built with every
 * implementation (see platform.h): what linux.c and posix.c both fall back to. */
#define _POSIX_C_SOURCE 200809L
#include <sys/resource.h>
#include <unistd.h>

#include "platform.h"

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
