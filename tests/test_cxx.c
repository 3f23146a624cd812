/* test_cxx.c -- include/hilock.hpp, the C++17 RAII wrapper: $(B)/tests/cxx_lock (built from
 * tests/cxx_lock.cpp with g++ -std=c++17 -Wall -Wextra -Werror) runs its checks against a real
 * server; this suite runs it and reads back what it left in Redis. */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"

/* $(B)/tests/test_cxx -> $(B)/tests/cxx_lock */
static void find_prog(char *out, size_t n)
{
    ssize_t len = readlink("/proc/self/exe", out, n - 16);
    char *slash;
    cr_assert(len > 0);
    out[len] = '\0';
    slash = strrchr(out, '/');
    cr_assert_not_null(slash);
    strcpy(slash, "/cxx_lock");
    cr_assert_eq(access(out, X_OK), 0, "%s not built", out);
}

Test(cxx, the_raii_wrapper_meets_lockable_and_leaves_nothing_held, .timeout = 120)
{
    static const char *const keys[] = { "cxx:busy", "cxx:g1", "cxx:g2", "cxx:raii", "cxx:other", "cxx:err",
                                        "cxx:exp", "cxx:ka", "cxx:counter", "cxx:thrown" };
    char prog[PATH_MAX], cmd[PATH_MAX + 600], out[8192];
    hlt_redis *r = hlt_redis_start(NULL);
    size_t got = 0;
    FILE *p;
    int rc;
    cr_assert_not_null(r);
    find_prog(prog, sizeof prog);
    snprintf(cmd, sizeof cmd, "'%s' '%s' 'redis://127.0.0.1:%d' 2>&1", prog, r->url, hlt_free_port());
    p = popen(cmd, "r");
    cr_assert_not_null(p);
    while (got < sizeof out - 1) {
        size_t k = fread(out + got, 1, sizeof out - 1 - got, p);
        if (k == 0) break;
        got += k;
    }
    out[got] = '\0';
    rc = pclose(p);
    cr_assert_eq(rc, 0, "cxx_lock failed:\n%s", out);
    cr_assert_not_null(strstr(out, "ok all\n"), "%s", out);
    /* every grant was released: by unlock, a guard, a move, or a destructor during unwinding */
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        cr_expect_eq(hlt_exists(r, keys[i]), 0, "%s is still held", keys[i]);
    /* and the grants were real: 200 of them on the counter key minted fencing tokens */
    cr_assert_eq(hlt_exists(r, "{cxx:counter}:fence"), 1);
    cr_assert_eq(hlt_exists(r, "{cxx:thrown}:fence"), 1);
    hlt_redis_stop(r);
}
