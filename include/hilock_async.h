/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hilock_async.h -- hilock in an event loop (libuv, libevent, epoll, any poll loop).
 * The header is the manual; the guide with a complete program is docs/event-loop.md.
 *
 * The same locks, the same semantics and statuses as the blocking calls of hilock.h, without
 * ever blocking the loop: a call is queued and returns at once; its result comes later, from
 * the loop, through a callback. Many calls may be in flight on one client: on each master
 * they share one connection and are pipelined (1,000 acquisitions issued at once go out in a
 * few writes, not 1,000 round trips).
 *
 * Loop integration (the model of c-ares and of hiredis' adapters). The client tells the
 * application, through the hilock_loop callbacks it registers, which file descriptors it
 * wants watched for reading/writing and when it next needs a timer; the application calls
 * hilock_loop_fd() when a watched fd is ready and hilock_loop_timeout() when the timer fires.
 * Thin header-only adapters do this for libuv (hilock_libuv.h: hilock_libuv_attach) and
 * libevent (hilock_libevent.h: hilock_libevent_attach); a custom loop fills hilock_loop.
 *
 * Rules:
 *   - One client per loop thread. A client attached to a loop is driven only by it: its
 *     blocking calls (hilock_acquire, hilock_release, hilock_extend, hilock_check,
 *     hilock_inspect...) return HILOCK_EINVAL, errmsg "client attached to an event loop...".
 *     hilock_keepalive works: it renews on the loop's timer (no thread).
 *   - `done` runs exactly once per accepted call (the _async call returned HILOCK_OK), from
 *     hilock_loop_fd / hilock_loop_timeout -- never from inside the _async call. A call that
 *     cannot be accepted (bad input) returns its status at once (hilock_client_errmsg says
 *     why) and `done` never runs.
 *   - `done` gets the status the blocking call would return; for acquire, l is the new lock
 *     on OK (the caller owns it: hilock_free) and NULL otherwise; for the others, l is the
 *     lock passed in. hilock_client_errmsg(c) holds the detail while `done` runs.
 *   - Calls on one lock run one after another, in the order they were made: a release made
 *     while an extend (or a check) of the same lock is in flight runs when that one has
 *     ended. (A lock exists only once its acquire has ended, so there is no release of a lock
 *     whose acquire is in flight.)
 *   - Every call is bounded as its blocking form is (io_timeout_ms, connect_timeout_ms,
 *     wait_ms), by the loop's timer. A call whose connection times out ends ETIMEDOUT, and
 *     so do the other calls pipelined on that connection (the server stalled; their writes
 *     are undone by token on the next contact, as for the blocking calls).
 *   - hilock_client_free with calls in flight ends each of them first, with a status (EIO,
 *     errmsg "client freed with the call in flight"; an acquire that had already got its
 *     answer may still end OK), calling their `done` before it returns; none is called after.
 *     It may be called from a `done`.
 *   - hilock_free on a lock with calls in flight ends those calls first the same way (their
 *     `done` runs, with l still valid, before hilock_free returns).
 *   - Sentinel (redis-sentinel://) URLs work as for the blocking calls (same bounds, same
 *     statuses: LOST after a failover that lost the write, EIO when no Sentinel answers):
 *     the Sentinels are asked on the loop (one pipelined connection per Sentinel), for the
 *     master of each new connection and, before a release, extend or check and after a
 *     grant, whether it moved; the call waits meanwhile, the loop does not. A master that
 *     moved has its connection closed, and the other calls pipelined on it end EIO.
 *   - Cluster (redis-cluster://, rediss-cluster://) URLs work as for the blocking calls
 *     (same routing, bounds, redirects and statuses): the loop keeps one pipelined
 *     connection per shard master it talks to; the slot map is fetched from the seeds on the
 *     loop (one fetch at a time: the calls that come meanwhile route by the map in hand, or
 *     wait for the first one), and MOVED, ASK, TRYAGAIN and CLUSTERDOWN are followed within
 *     the call's bound, the call waiting, the loop not. A frozen shard ends only the calls
 *     of its own keys (ETIMEDOUT).
 *   - failover_guard = 1 (LOST after a restart or a failover of the master) and
 *     min_replicas (WAIT, pipelined) work as for the blocking calls.
 *     redis:// and unix:// masters and Redlock over them work, for modern, bridge
 *     (options.bridge) and legacy locks (hilock_legacy_acquire_async, and release/extend/
 *     check of a legacy lock).
 *     rediss:// goes through the same transport table but is not tested on a loop yet.
 *   - Host names are looked up on a helper thread (hilock.h: connect_timeout_ms): the flow
 *     waits for the lookup's pipe like a connection's fd, and the loop goes on meanwhile.
 *   - hilock_cancel (hilock.h) from any thread or a signal handler ends every call in
 *     flight on the client with HILOCK_ECANCELED (a keepalive's renewals go on): the client
 *     watches a pipe of its own for it (one more fd through `watch`, from attach to free).
 *   - Small stacks. The calls' flows run on stacks of their own, 64 KiB each, and some of
 *     the application's code can run on them: the `watch` and `timer` callbacks (a flow
 *     that opens or closes a connection calls them), and any signal handler the kernel runs
 *     while a flow is on the CPU (a host name's getaddrinfo runs on a thread of its own).
 *     So: keep `watch` and `timer` small (no deep recursion, no large locals: record
 *     the request and return, as the adapters do); and install signal handlers with
 *     SA_ONSTACK and a sigaltstack on the loop's thread, or block the signals there. `done` and the other
 *     callbacks of hilock.h run on the loop's own stack. The observer (hilock_observe.h) does
 *     not: it runs on the flow's stack, above up to about 13 KiB of the library's own frames
 *     (measured, x86-64, -O2): keep its stack use well under 48 KiB.
 *   - The thread that attached the client owns it, and the loop must run on that thread
 *     (hilock.h's thread rule): a call on it or on one of its locks from any other thread
 *     returns HILOCK_EINVAL "client used from two threads at once", having sent and queued
 *     nothing, whether or not the loop's thread is inside hilock at the time (a
 *     hilock_loop_fd or hilock_loop_timeout from there does nothing). hilock_free of one of
 *     its locks belongs on that thread too; hilock_client_free may come from another thread
 *     only while the loop's thread is outside hilock (and the loop's callbacks then run on
 *     the freeing thread).
 */
#ifndef HILOCK_ASYNC_H
#define HILOCK_ASYNC_H

#include "hilock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The result of an _async call: see the rules above. Runs on the loop's thread. */
typedef void (*hilock_done_fn)(hilock_status st, hilock *l, void *arg);

/* hilock_acquire without blocking. key is copied. wait_ms as for hilock_acquire: a waiting
 * acquire is woken by the holder's release (a BLPOP on a connection of its own, so the
 * other calls go on) with polling on the loop's timer as the fallback.
 * The loop's acquires are its tasks, not re-entries (hilock.h, hilock_acquire): one for a
 * key that a lock of this client holds waits for that lock's release, as a waiter on
 * another client would (mind a task that waits for a lock it holds itself: with wait_ms
 * HILOCK_WAIT_FOREVER and a keepalive on it, for ever).
 * Returns OK (accepted: done will run) or, with done never called: EINVAL (NULL client, key
 * or done, bad key/ttl/wait_ms, client not attached to a loop, or being freed), ENOMEM. */
HILOCK_API hilock_status hilock_acquire_async(hilock_client *c, const char *key, int64_t ttl_ms,
                                              int64_t wait_ms, hilock_done_fn done, void *arg);

/* hilock_legacy_acquire (hilock_legacy.h: the SETNX/GETSET recipe of legacy fleets, in the
 * client's options.codec) without blocking: as hilock_acquire_async, with timeout_ms the
 * legacy stamp's timeout. Returns OK (accepted: done will run) or, with done never called:
 * EINVAL (as hilock_acquire_async's, and a fair client: "a legacy lock cannot be fair:
 * the legacy recipe has no queue; ..."), ENOMEM. What the blocking call refuses after looking at its
 * lock (a client with more than one server, a timeout too short for the drift allowance)
 * ends in done, EINVAL with the same message; a held key is BUSY in done. */
HILOCK_API hilock_status hilock_legacy_acquire_async(hilock_client *c, const char *key,
                                                     int64_t timeout_ms, int64_t wait_ms,
                                                     hilock_done_fn done, void *arg);

/* hilock_sem_acquire and hilock_rw_acquire (hilock.h) without blocking: as
 * hilock_acquire_async (key copied; a waiter is woken by a release, on a connection of its
 * own, with the kind's wake-up rules: a freed permit wakes one waiting permit; a release that
 * leaves the key free wakes a waiting writer first, readers only when no writer waits).
 * Returns OK (accepted: done will run) or, with done never called and the blocking call's
 * message in hilock_client_errmsg: EINVAL (what hilock_acquire_async refuses; and what the
 * blocking call refuses before sending anything: a limit < 1 or > HILOCK_SEM_LIMIT_MAX, a
 * semaphore over several masters, a mode other than HILOCK_SHARED and HILOCK_EXCLUSIVE, a
 * fair client), ENOMEM.
 * What the blocking call finds on the server (a key holding another kind, a server too old)
 * ends in done with the blocking call's status and message; a held key is BUSY in done. The
 * lock done gets is released, extended, checked and kept alive as any other. */
HILOCK_API hilock_status hilock_sem_acquire_async(hilock_client *c, const char *key, int limit,
                                                  int64_t ttl_ms, int64_t wait_ms,
                                                  hilock_done_fn done, void *arg);
HILOCK_API hilock_status hilock_rw_acquire_async(hilock_client *c, const char *key, hilock_rw_mode mode,
                                                 int64_t ttl_ms, int64_t wait_ms,
                                                 hilock_done_fn done, void *arg);

/* hilock_release / hilock_extend / hilock_check without blocking. Returns OK (accepted) or,
 * with done never called: EINVAL (NULL lock or done, ttl_ms out of range, a client not
 * attached or being freed), ENOMEM. */
HILOCK_API hilock_status hilock_release_async(hilock *l, hilock_done_fn done, void *arg);
HILOCK_API hilock_status hilock_extend_async(hilock *l, int64_t ttl_ms, hilock_done_fn done,
                                             void *arg);
HILOCK_API hilock_status hilock_check_async(hilock *l, hilock_done_fn done, void *arg);

/* The result of hilock_guarded_command_async: the status and *reply hilock_guarded_command
 * would give (hilock.h); reply is the callee's to free (hilock_reply_free), NULL when none.
 * l is the lock passed in. Runs on the loop's thread. */
typedef void (*hilock_reply_fn)(hilock_status st, hilock *l, hilock_reply *reply, void *arg);

/* hilock_guarded_command (hilock.h: a command run only while the lock holds) without
 * blocking: argv and argvlen are copied. It runs after the lock's earlier calls, as the
 * other calls on a lock do. Returns OK (accepted: done will run) or, with done never called:
 * EINVAL (NULL lock, done, argv or an argv[i], argc out of 1..HILOCK_GUARDED_MAX_ARGS, a
 * client not attached or being freed), ENOMEM. What the blocking call refuses after looking
 * at the lock (released: NOT_HELD; Redlock, a legacy lock, a command a script may not run:
 * EINVAL) ends in done with the same status and message, nothing sent. */
HILOCK_API hilock_status hilock_guarded_command_async(hilock *l, int argc, const char **argv,
                                                      const size_t *argvlen, hilock_reply_fn done,
                                                      void *arg);

/* ---- the loop-agnostic interface ---- */

#define HILOCK_EV_READ  1
#define HILOCK_EV_WRITE 2

/* What the application gives the client: three callbacks and their context. They are
 * called from hilock_loop_attach, the _async calls, hilock_loop_fd, hilock_loop_timeout
 * and hilock_client_free, on the loop's thread; they must not call back into hilock. */
typedef struct hilock_loop {
    void *data;   /* passed to each callback */
    /* Watch fd for `events` (HILOCK_EV_READ | HILOCK_EV_WRITE), replacing what was asked
     * for it before; events = 0: stop watching it (called before the fd is closed, so a
     * later fd with the same number is a new one). Several fds may be watched at once
     * (one per master, and one per waiting acquire). */
    void (*watch)(void *data, int fd, int events);
    /* Call hilock_loop_timeout once, ms milliseconds from now (0: at the next turn of the
     * loop), replacing the earlier request; ms = -1: no timer needed. */
    void (*timer)(void *data, int64_t ms);
    /* The client lets the loop go (hilock_client_free): every fd was unwatched, no timer is
     * needed and no callback follows. Free `data` here if it is yours. May be NULL. */
    void (*detach)(void *data);
} hilock_loop;

/* Drive client c by a loop from now on (loop is copied; its connections so far are closed,
 * the loop opens its own). Returns OK; EINVAL (NULL, no watch/timer callback, already
 * attached; or a build with no fiber switch -- musl on a machine other than x86-64 and arm64,
 * docs/portability.md -- errmsg "event loops are not supported by this build (no fiber switch
 * for this machine)"); ENOMEM.
 * There is no detach but hilock_client_free. hilock_loop is frozen (ABI): a new hook would
 * come with a new attach function, never as a field appended here. */
HILOCK_API hilock_status hilock_loop_attach(hilock_client *c, const hilock_loop *loop);

/* The application's side: fd (one the client asked to watch) is ready for `events`
 * (HILOCK_EV_READ | HILOCK_EV_WRITE; errors and hang-ups count as READ). Reads, writes,
 * runs the calls whose replies are in and calls their `done`. NULL / unknown fd: ignored. */
HILOCK_API void hilock_loop_fd(hilock_client *c, int fd, int events);

/* The application's side: the timer the client asked for has fired. Starts the calls made
 * since, ends those whose deadline passed and calls their `done`. */
HILOCK_API void hilock_loop_timeout(hilock_client *c);

#ifdef __cplusplus
}
#endif

#endif
