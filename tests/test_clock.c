/* SPDX-License-Identifier: BSD-3-Clause */
/* test_clock.c -- a wall clock that cannot be read. This program defines clock_gettime (and,
 * for a 32-bit library built with 64-bit time_t, glibc's __clock_gettime64, which that build
 * calls instead), so the library linked statically into it reads the clock through here: on
 * request CLOCK_REALTIME fails, after writing a plausible time into the result as a careless
 * reader would then use it. Everything else goes to the C library's own function. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "checks.h"
#include "clients.h"
#include "fixture.h"
#include "hilock.h"
#include "hilock_legacy.h"

static volatile int realtime_fails;

#define GARBAGE_S 1800000000   /* 2027: a stamp in the codec's window */

int clock_gettime(clockid_t id, struct timespec *ts)
{
    static int (*real)(clockid_t, struct timespec *);
    if (id == CLOCK_REALTIME && realtime_fails) {
        ts->tv_sec = GARBAGE_S;
        ts->tv_nsec = 0;
        errno = EINVAL;
        return -1;
    }
    if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    return real(id, ts);
}

#if defined(__GLIBC__) && UINTPTR_MAX == 0xffffffffu
struct timespec64 { int64_t tv_sec; int32_t tv_nsec, pad; };   /* glibc's __timespec64, ILP32 */

int __clock_gettime64(clockid_t id, struct timespec64 *ts);
int __clock_gettime64(clockid_t id, struct timespec64 *ts)
{
    static int (*real)(clockid_t, struct timespec64 *);
    if (id == CLOCK_REALTIME && realtime_fails) {
        ts->tv_sec = GARBAGE_S;
        ts->tv_nsec = 0;
        errno = EINVAL;
        return -1;
    }
    if (!real) real = (int (*)(clockid_t, struct timespec64 *))dlsym(RTLD_NEXT, "__clock_gettime64");
    return real(id, ts);
}
#endif

Test(clock, a_wall_clock_that_cannot_be_read_makes_no_legacy_stamp)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_options o;
    hilock_client *c = NULL;
    hilock *l = NULL;
    const char *url;
    url = r->url;
    o = hlt_options(&url, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    cr_assert_eq(hilock_codec_preset("doc", &o.codec), HILOCK_OK);
    c = hlt_client_new(&o);
    realtime_fails = 1;
    cr_assert_eq(hilock_legacy_acquire(c, "lock.clock", 10000, 0, &l), HILOCK_EINVAL);
    realtime_fails = 0;
    cr_assert_null(l);
    cr_assert_str_eq(hilock_client_errmsg(c), "lock.clock: no stamp for wall clock 0 us + 10000 ms: outside "
                                              "2000..5138 (clock or clock_offset_ms wrong?)");
    hlt_holds(r, "lock.clock", NULL);
    /* the clock back: the same client takes the lock */
    cr_assert_eq(hilock_legacy_acquire(c, "lock.clock", 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_holds(r, "lock.clock", hilock_token(l));
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}
