/* SPDX-License-Identifier: BSD-3-Clause */
/* scenario.h -- one scenario body, run twice: on blocking clients and on a libuv loop in the
 * test's thread. A scenario is written once with HLT_SCENARIO, which registers two Criterion
 * tests: suite::name (blocking) and suite::name_on_the_loop. The body makes its callers with
 * hlt_run_new(&options, mode) and calls through them; each call returns the hilock_status the
 * call ended with, whichever way it ran:
 *
 *     HLT_SCENARIO(lock, a_second_caller_is_busy, .timeout = 60)
 *     {
 *         hlt_run *a = hlt_run_new(&o, mode), *b = hlt_run_new(&o, mode);
 *         hilock *l;
 *         cr_assert_eq(hlt_run_acquire(a, "k", 30000, 0, &l), HILOCK_OK, "%s", hlt_run_errmsg(a));
 *         ...
 *
 * On the loop a call starts its _async form and runs the loop until its done ran (bounded
 * generously; the test fails, saying which call, if it did not): done must run once, never
 * inside the _async call; a call refused at once returns its status, and the harness checks
 * that its done never runs. All the callers of a test share the thread's one loop, and the
 * loop keeps a 2 ms timer ticking (hlt_ticker) so that a scenario can assert the loop was never
 * stalled (hlt_run_assert_no_stall: a no-op on blocking callers).
 *
 * Calls in flight side by side: hlt_run_begin_* starts an acquire and returns at once, and
 * hlt_run_end waits for it. A blocking caller runs it on a thread of its own (so a caller
 * has at most one begun call); a second caller that must act meanwhile is hlt_run_peer(r): on
 * blocking, a new client of r's options; on the loop, r's own client (calls in flight side by
 * side on one client, as a loop program makes them).
 *
 * Waiting: hlt_run_sleep lets time pass (the scenario's own: a ttl, renewals) and
 * hlt_run_until waits for a condition; on the loop both run the loop meanwhile (a begun call
 * progresses only then). Free every lock before the runner that made it (the client goes with
 * the last runner on it, the loop with the last runner of the test).
 *
 * The two tests may run at once (--jobs): on a fixture the suite shares (test_cluster.c's
 * cluster), a scenario's keys must differ by mode (`mode ? "k:loop:" : "k:"`). */
#ifndef HILOCK_TEST_SCENARIO_H
#define HILOCK_TEST_SCENARIO_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <uv.h>

#include "hilock.h"

typedef enum hlt_mode { HLT_BLOCKING = 0, HLT_ON_LOOP = 1 } hlt_mode;

/* The body once, two tests: suite::name with blocking calls, suite::name_on_the_loop on a
 * libuv loop; the options (.timeout, .init, ...) apply to both. The body sees `mode`. */
#define HLT_SCENARIO(suite, name, ...)                                                         \
    static void hlt_scn_##suite##_##name(hlt_mode mode);                                       \
    Test(suite, name, ##__VA_ARGS__) { hlt_scn_##suite##_##name(HLT_BLOCKING); }              \
    Test(suite, name##_on_the_loop, ##__VA_ARGS__) { hlt_scn_##suite##_##name(HLT_ON_LOOP); } \
    static void hlt_scn_##suite##_##name(hlt_mode mode)

/* A libuv timer ticking every 2 ms: the longest gap between two ticks is the loop's worst
 * stall. max_stall is that gap less the time this thread spent runnable but not running (the
 * scheduler's run delay, /proc/thread-self/schedstat): what is left is running or sleeping of
 * its own accord, so a blocking wait inside the library shows in it whole while a loaded
 * machine's descheduling does not (where schedstat is missing it is the wall gap). max_cpu_us:
 * the longest stretch of this thread's CPU time between two ticks. */
typedef struct hlt_ticker {
    uv_timer_t t;
    int64_t    last, max_gap, cpu_last, max_cpu_us, rd_last, max_stall;
    long       ticks;
} hlt_ticker;

/* Start tk on loop (a stall before the first tick counts too). */
void hlt_ticker_start(uv_loop_t *loop, hlt_ticker *tk);
/* Its figures from now on (the timer goes on). */
void hlt_ticker_reset(hlt_ticker *tk);
/* Print its figures under `what` ("<what>: a 2 ms loop timer ticked N times, ..."). */
void hlt_ticker_print(const hlt_ticker *tk, const char *what);
/* Stop it and close its handle (the loop's next pass frees nothing: tk is the caller's). */
void hlt_ticker_stop(hlt_ticker *tk);

typedef struct hlt_run hlt_run;

/* A caller: a client made from o (tests/clients.h's hlt_client_new), blocking or attached to
 * this thread's loop (made with the first runner of the test, closed with the last). */
hlt_run *hlt_run_new(const hilock_options *o, hlt_mode mode);
/* Another caller beside r: blocking, a client of its own from r's options; on the loop, r's
 * client. */
hlt_run *hlt_run_peer(hlt_run *r);
/* Ends r (asserting no begun call is left); the client goes with its last runner. NULL-safe. */
void hlt_run_free(hlt_run *r);

hilock_client *hlt_run_client(const hlt_run *r);
int            hlt_run_on_loop(const hlt_run *r);
/* "blocking" or "loop": for messages. */
const char    *hlt_run_mode_name(const hlt_run *r);
/* The client's message as the last call of r ended (on the loop: as its done ran). */
const char    *hlt_run_errmsg(const hlt_run *r);

/* The calls of hilock.h / hilock_async.h; each returns the status the call ended with (out:
 * the lock on OK, NULL otherwise). */
hilock_status hlt_run_acquire(hlt_run *r, const char *key, int64_t ttl_ms, int64_t wait_ms, hilock **out);
hilock_status hlt_run_sem_acquire(hlt_run *r, const char *key, int limit, int64_t ttl_ms, int64_t wait_ms,
                                  hilock **out);
hilock_status hlt_run_rw_acquire(hlt_run *r, const char *key, hilock_rw_mode m, int64_t ttl_ms,
                                 int64_t wait_ms, hilock **out);
hilock_status hlt_run_release(hlt_run *r, hilock *l);
hilock_status hlt_run_extend(hlt_run *r, hilock *l, int64_t ttl_ms);
hilock_status hlt_run_check(hlt_run *r, hilock *l);
/* hilock_guarded_command / hilock_guarded_command_async: *reply as the call gave it (the
 * caller frees it; reply NULL: freed here). */
hilock_status hlt_run_guarded(hlt_run *r, hilock *l, int argc, const char **argv, const size_t *argvlen,
                              hilock_reply **reply);
/* hilock_keepalive_ex (o NULL: no caps): a thread on blocking, the loop's timer on the loop.
 * It stops with hilock_release or hilock_free. */
hilock_status hlt_run_keepalive(hlt_run *r, hilock *l, hilock_lost_fn on_lost, void *arg,
                                const hilock_keepalive_options *o);

/* An acquire begun: it must be accepted (the test fails otherwise); at most one per runner. */
void hlt_run_begin_acquire(hlt_run *r, const char *key, int64_t ttl_ms, int64_t wait_ms);
void hlt_run_begin_sem_acquire(hlt_run *r, const char *key, int limit, int64_t ttl_ms, int64_t wait_ms);
void hlt_run_begin_rw_acquire(hlt_run *r, const char *key, hilock_rw_mode m, int64_t ttl_ms, int64_t wait_ms);
/* Has r's begun call ended (without waiting, or running the loop)? */
int  hlt_run_ended(hlt_run *r);
/* Wait (limit_ms at most: the test fails if it did not end) for r's begun call; its status
 * and lock. */
hilock_status hlt_run_end(hlt_run *r, long limit_ms, hilock **out);
/* When r's last call ended (hlt_now_ms). */
long long hlt_run_ended_at(const hlt_run *r);

/* Let ms pass (on the loop: running it). */
void hlt_run_sleep(hlt_run *r, long ms);
/* Until cond(arg) is true, checked every 5 ms at most, for limit_ms at most (on the loop:
 * running it between looks): 1 if it came true. */
int  hlt_run_until(hlt_run *r, int (*cond)(void *), void *arg, long limit_ms);

/* For hlt_run_until: does key on r hold n members (ZCARD)? */
struct hlt_redis;
typedef struct hlt_zcard_want { struct hlt_redis *r; const char *key; long long n; } hlt_zcard_want;
int hlt_zcard_is(void *want);

/* Options for one server at url whose waiters look again only after >= poll_ms / 2 (its
 * retry_delay_ms and poll_ms, jittered down to half): a grant soon after the release that
 * frees it is the release's wake-up. (They point at a static copy of url: one set at a time.) */
hilock_options hlt_waiter_options(const char *url, int64_t poll_ms);

/* An on_lost that counts its calls in *(int *)arg; hlt_lost_count reads it (both atomic). */
void hlt_count_lost(hilock *l, hilock_status why, void *arg);
int  hlt_lost_count(int *n);

/* A done for an _async call that must be refused at once: it only counts its calls, which
 * hlt_never_ran returns (a scenario asserts 0 after running the loop a little). */
void hlt_never_done(hilock_status st, hilock *l, void *arg);
int  hlt_never_ran(void);

/* From now on, the loop's stall is measured afresh (blocking: nothing). */
void hlt_run_stall_reset(hlt_run *r);
/* On the loop: print the ticker's figures under `what`, and assert the loop's worst stall
 * since the reset (less run delay) is below max_stall_ms and its timer ticked more than
 * min_ticks times. Blocking: nothing. Returns the stall (0 on blocking). */
int64_t hlt_run_assert_no_stall(hlt_run *r, int64_t max_stall_ms, long min_ticks, const char *what);

#endif
