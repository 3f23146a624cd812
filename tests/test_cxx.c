/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cxx.c -- include/hilock.hpp, the C++17 RAII wrapper: $(B)/tests/cxx_lock (built from
 * tests/cxx_lock.cpp with g++ -std=c++17 -Wall -Wextra -Werror) runs its checks against a real
 * server; this suite runs it and reads back what it left in Redis. */
#include <criterion/criterion.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checks.h"
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

/* Run cxx_lock against r (and a port nobody listens on) with `extra` args; its output (stdout
 * and stderr) in out; returns pclose's status. */
static int run_cxx(const hlt_redis *r, const char *extra, char *out, size_t n)
{
    char prog[PATH_MAX], cmd[PATH_MAX + 600];
    find_prog(prog, sizeof prog);
    snprintf(cmd, sizeof cmd, "'%s' '%s' 'redis://127.0.0.1:%d' %s 2>&1", prog, r->url, hlt_dead_port(), extra);
    return hlt_run_capture(cmd, out, n);
}

/* Run cxx_lock with `extra` against r: it must exit 0 having printed `last`, and leave none of
 * the n keys behind. */
static void run_cxx_ok(hlt_redis *r, const char *extra, const char *last, const char *const *keys, size_t n)
{
    char out[8192];
    int rc = run_cxx(r, extra, out, sizeof out);
    cr_log_info("%s", out);
    cr_assert_eq(rc, 0, "cxx_lock %s failed:\n%s", extra, out);
    cr_assert_not_null(strstr(out, last), "%s", out);
    for (size_t i = 0; i < n; i++) cr_expect_eq(hlt_exists(r, keys[i]), 0, "%s is still there", keys[i]);
}

Test(cxx, the_raii_wrapper_meets_lockable_and_leaves_nothing_held, .timeout = 120)
{
    static const char *const keys[] = { "cxx:busy", "cxx:g1", "cxx:g2", "cxx:raii", "cxx:other", "cxx:err",
                                        "cxx:exp", "cxx:ka", "cxx:counter", "cxx:thrown", "cxx:lost",
                                        "cxx:lost2", "cxx:told", "cxx:told2", "cxx:cancel" };
    hlt_redis *r = hlt_redis_started(NULL);
    /* every grant was released: by unlock, a guard, a move, or a destructor during unwinding */
    run_cxx_ok(r, "", "ok all\n", keys, sizeof keys / sizeof keys[0]);
    /* and the grants were real: 200 of them on the counter key minted fencing tokens */
    cr_assert_eq(hlt_exists(r, "{cxx:counter}:fence"), 1);
    cr_assert_eq(hlt_exists(r, "{cxx:thrown}:fence"), 1);
    hlt_redis_stop(r);
}

/* std::lock_guard over a lock deleted behind its back, no handler set: the default one says why
 * on stderr and ends the program (std::terminate: SIGABRT) before it can carry on. */
Test(cxx, a_lost_lock_under_lock_guard_terminates_by_default_saying_why, .timeout = 60)
{
    static const char *const tail = "): the work it guarded may have overlapped another holder; terminating "
                                    "(hilock_cpp::set_lost_handler or mutex::on_lost handles a loss instead)\n";
    char out[4096];
    const char *line, *fence;
    hlt_redis *r = hlt_redis_started(NULL);
    int rc;
    rc = run_cxx(r, "lost-default", out, sizeof out);
    /* killed by SIGABRT (or the shell's 128 + 6 for it) */
    cr_assert((WIFSIGNALED(rc) && WTERMSIG(rc) == SIGABRT) || (WIFEXITED(rc) && WEXITSTATUS(rc) == 128 + SIGABRT),
              "status %d:\n%s", rc, out);
    cr_assert_null(strstr(out, "still running"), "%s", out);
    line = strstr(out, "hilock: lock lost: ");
    cr_assert_not_null(line, "%s", out);
    cr_assert_not_null(strstr(line, "cxx:default"), "%s", out);
    fence = strstr(line, " (fence ");
    cr_assert(fence && fence[8] >= '1' && fence[8] <= '9', "%s", out);   /* the lost grant's token */
    cr_assert_not_null(strstr(fence, tail), "%s", out);
    cr_assert_eq(hlt_exists(r, "cxx:default"), 0);
    cr_assert_eq(hlt_exists(r, "{cxx:default}:fence"), 1);
    hlt_redis_stop(r);
}

/* The reviewer's case: `if (!m.check()) return;` under std::unique_lock, a caught extend()
 * NOT_HELD, `if (g.lost()) return;` on a guard -- the program was told, so the default handler
 * does not end it when the scope gives the lock back. */
Test(cxx, a_loss_the_program_was_told_of_does_not_terminate_it_at_scope_exit, .timeout = 60)
{
    char out[4096];
    hlt_redis *r = hlt_redis_started(NULL);
    int rc;
    rc = run_cxx(r, "lost-told", out, sizeof out);
    cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "status %d:\n%s", rc, out);
    cr_assert_str_eq(out, "lost-told: still running\n");   /* and nothing on stderr */
    cr_assert_eq(hlt_exists(r, "cxx:told"), 0);
    cr_assert_eq(hlt_exists(r, "cxx:told2"), 0);
    hlt_redis_stop(r);
}

/* shared_mutex and semaphore (cxx_lock's `kinds`): std::shared_lock beside std::shared_lock,
 * std::unique_lock alone, a waiting writer first, the limit, bad input; then every grant is
 * gone and the keys' fencing counters remain (the grants were real). */
Test(cxx, shared_mutex_and_semaphore_meet_the_std_guards_and_leave_nothing_held, .timeout = 60)
{
    static const char *const keys[] = { "cxx:rw", "cxx:sem", "cxx:semerr", "cxx:kind", "{cxx:rw}:wq",
                                        "{cxx:rw}:holders", "{cxx:sem}:holders", "{cxx:kind}:holders" };
    hlt_redis *r;
    HLT_NEEDS(30200, "the semaphore and the shared/exclusive lock need Redis 3.2+ (TIME in scripts)");
    r = hlt_redis_started(NULL);
    run_cxx_ok(r, "kinds", "ok kinds\n", keys, sizeof keys / sizeof keys[0]);
    cr_assert_eq(hlt_exists(r, "{cxx:rw}:fence"), 1);
    cr_assert_eq(hlt_exists(r, "{cxx:sem}:fence"), 1);
    cr_assert_eq(hlt_exists(r, "{cxx:semerr}:fence"), 0);   /* bad input: nothing written */
    hlt_redis_stop(r);
}

/* client::observe and client::stats (cxx_lock's `observe`): the events of a lock/unlock and a
 * busy try_lock reach a lambda, a functor and a std::function, through a move of the client;
 * the counters per outcome, merged, and in the Prometheus format; nothing left held. */
Test(cxx, the_observer_takes_any_callable_and_stats_count_each_outcome, .timeout = 60)
{
    static const char *const keys[] = { "cxx:obs" };
    hlt_redis *r = hlt_redis_started(NULL);
    run_cxx_ok(r, "observe", "ok observe\n", keys, 1);
    cr_assert_eq(hlt_exists(r, "{cxx:obs}:fence"), 1);
    hlt_redis_stop(r);
}
