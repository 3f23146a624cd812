/* SPDX-License-Identifier: BSD-3-Clause */
/* test_fork.c -- a forked child's copy of a client and its locks: it can be freed (memory
 * only, promptly, leaving the parent's lock and keepalive alone), and every other call is
 * refused with EINVAL and a message naming both processes. Real redis-server. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fiber.h"   /* (-Isrc: the event loop's flows, below the API) */
#include "checks.h"
#include "fixture.h"
#include "hilock.h"
#include "hilock_inspect.h"

static hilock *hold(hlt_redis *r, hilock_client **c, int64_t ttl_ms)
{
    hilock *l;
    cr_assert_eq(hilock_client_open(r->url, c), HILOCK_OK);
    cr_assert_eq(hilock_acquire(*c, "job", ttl_ms, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(*c));
    return l;
}

static void assert_held_by(hlt_redis *r, const hilock *l)
{
    char *v = hlt_get(r, "job");
    cr_assert_not_null(v, "the parent's key is still there");
    cr_assert_str_eq(v, hilock_token(l));
    free(v);
}

Test(fork, child_frees_a_lock_whose_keepalive_runs_in_the_parent)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *l;
    long long calls;
    l = hold(r, &c, 600);
    calls = hlt_script_calls(r);
    cr_assert_eq(hilock_keepalive(l, NULL, NULL), HILOCK_OK);
    /* a renewal (its extend script) reached the server: the keepalive thread is in its cycle */
    HLT_AWAIT(hlt_script_calls(r) > calls, 10000, "the keepalive never renewed the lock");
    cr_assert_eq(hlt_child_frees(l, c), 0, "the child must free and exit, not hang");
    hlt_sleep_ms(1500);   /* past the ttl: only the parent's keepalive keeps it */
    assert_held_by(r, l);
    cr_assert(hilock_validity_ms(l) > 0);
    hlt_release_gone(r, c, l, "job");
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* Exit codes of the child below: 0 = all as expected, else the number of the check that
 * failed. */
static void ignore_view(size_t master, const hilock_lock_view *v, const char *err, void *arg)
{
    (void)master, (void)v, (void)err, (void)arg;
}

static int child_calls(hilock_client *c, hilock *l)
{
    char want[96];
    hilock *other = NULL;
    snprintf(want, sizeof want, "client used in a forked child (pid %ld); made in pid %ld",
             (long)getpid(), (long)getppid());
    if (hilock_release(l) != HILOCK_EINVAL) return 1;
    if (!strstr(hilock_client_errmsg(c), want)) return 2;
    if (hilock_extend(l, 5000) != HILOCK_EINVAL) return 3;
    if (hilock_check(l) != HILOCK_EINVAL) return 4;
    if (hilock_acquire(c, "other", 5000, 0, &other) != HILOCK_EINVAL || other) return 5;
    if (hilock_keepalive(l, NULL, NULL) != HILOCK_EINVAL) return 6;
    if (hilock_validity_ms(l) != 0) return 7;
    if (hilock_inspect(c, "job", ignore_view, NULL) != HILOCK_EINVAL) return 8;   /* (no I/O either) */
    if (!strstr(hilock_client_errmsg(c), want)) return 9;
    hilock_free(l);
    hilock_client_free(c);
    return 0;
}

Test(fork, child_calls_are_refused_and_the_key_stays_held)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *l;
    pid_t pid;
    l = hold(r, &c, 10000);
    pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) _exit(child_calls(c, l));
    cr_assert_eq(hlt_reap(pid, 5000), 0, "child check failed (see child_calls)");
    assert_held_by(r, l);
    cr_assert(hlt_pttl(r, "job") > 5000, "not extended or shortened by the child");
    cr_assert_eq(hlt_exists(r, "other"), 0);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "the parent's client still works: %s",
                 hilock_client_errmsg(c));
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* A client made in the child is the child's own, and works. */
Test(fork, child_makes_its_own_client)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock_client *c;
    hilock *l;
    pid_t pid;
    l = hold(r, &c, 10000);
    pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        hilock_client *mine;
        hilock *l2;
        if (hilock_client_open(r->url, &mine) != HILOCK_OK) _exit(1);
        if (hilock_acquire(mine, "job2", 5000, 0, &l2) != HILOCK_OK) _exit(2);
        if (hilock_release(l2) != HILOCK_OK) _exit(3);
        hilock_free(l2);
        hilock_client_free(mine);
        hilock_free(l);
        hilock_client_free(c);
        _exit(0);
    }
    cr_assert_eq(hlt_reap(pid, 5000), 0);
    assert_held_by(r, l);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

/* ---- the event loop's fiber stacks (src/async/fiber.c) ---- */

static void noop(void *arg) { (void)arg; }

static int run_one_fiber(void)
{
    hl_fiber *f = hl_fiber_new(noop, NULL);
    int over = f && hl_fiber_resume(f);
    hl_fiber_free(f);
    return over;
}

static volatile int churn_stop;

static void *churn(void *arg)   /* a loop thread taking and giving back stacks */
{
    (void)arg;
    while (!churn_stop) run_one_fiber();
    return NULL;
}

/* A child forked while another thread held the stack pool's mutex inherited it locked, and
 * its first flow hung for ever. */
Test(fork, child_forked_while_a_loop_thread_takes_a_fiber_stack_runs_its_own_flows, .timeout = 120)
{
    pthread_t th;
    int hung = 0;
    churn_stop = 0;
    cr_assert_eq(pthread_create(&th, NULL, churn, NULL), 0);
    for (int i = 0; i < 200 && !hung; i++) {
        pid_t pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) _exit(run_one_fiber() ? 0 : 1);
        if (hlt_reap(pid, 3000) != 0) hung = i + 1;
    }
    churn_stop = 1;
    pthread_join(th, NULL);
    cr_assert_eq(hung, 0, "the child of fork %d did not run its fiber (hung or failed)", hung);
}
