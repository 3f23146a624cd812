/* SPDX-License-Identifier: BSD-3-Clause */
/* checks.h -- Criterion assertions on server state, shared by the suites. */
#ifndef HILOCK_TEST_CHECKS_H
#define HILOCK_TEST_CHECKS_H

#include <stddef.h>
#include "fixture.h"
#include "hilock.h"

/* SET key v (with PX px when px > 0); asserts the server said OK. */
void hlt_set(hlt_redis *r, const char *key, const char *v, long long px);
/* Asserts the key holds exactly v (v NULL: no such key). */
void hlt_holds(hlt_redis *r, const char *key, const char *v);
/* Does s match the extended regular expression re? */
int  hlt_matches(const char *s, const char *re);
/* hlt_redis_start(extra), or the test fails saying the server did not start. */
hlt_redis *hlt_redis_started(const char *extra);
/* The end of a lock's life in most tests: hilock_release(l) is OK (else the test fails with
 * c's errmsg; c may be NULL), key is then gone from r (read back), and l is freed. */
void hlt_release_gone(hlt_redis *r, hilock_client *c, hilock *l, const char *key);

/* Run fn(arg) in a forked child, which exits with what fn returns: its exit status as hlt_reap
 * gives it within limit_ms (128 + N for signal N; -1 if it did not end in time). */
int hlt_in_child(int (*fn)(void *arg), void *arg, long limit_ms);
/* A forked child frees its copies of l and c (hilock.h: memory only) and exits 0: its exit
 * status within 5 s (anything but 0: it crashed or hung). */
int hlt_child_frees(hilock *l, hilock_client *c);
/* Run the shell command line cmd (popen): what it writes to stdout in out (n bytes at most,
 * NUL-terminated), its status as pclose gives it. */
int hlt_run_capture(const char *cmd, char *out, size_t n);

/* A file in r's temp dir (removed with it): its path, in one of 8 static buffers used in turn. */
const char *hlt_path(hlt_redis *r, const char *name);
/* Read the file at p into buf (cap bytes at most, NUL-terminated; "" if there is none). */
void hlt_read_file(const char *p, char *buf, size_t cap);
/* The contents of a file in r's temp dir ("" if none), in a static buffer (16 KiB) that the
 * next call overwrites. */
const char *hlt_slurp(hlt_redis *r, const char *name);
/* Start the program prog with args (argv[1..], NULL-terminated; 30 at most) in a child, which
 * first runs in_child(arg) (its redirections, directory, session...; NULL: nothing) and exits
 * 120 if that returns nonzero, 121 if prog cannot be run. Its pid, for hlt_reap. */
pid_t hlt_spawn(const char *prog, const char *const *args, int (*in_child)(void *arg), void *arg);
/* The same with stdout to out_path and stderr to err_path (each made or truncated), in
 * directory dir (NULL: this one). */
pid_t hlt_spawn_to(const char *prog, const char *const *args, const char *dir, const char *out_path,
                   const char *err_path);

/* The line of text out that contains needle, without its newline (a static copy, 4 KiB at
 * most, overwritten by the next call); the test fails, showing out, if there is none. */
const char *hlt_line_with(const char *out, const char *needle);

/* Calls of scripts so far on r (EVALSHA and EVAL in INFO commandstats; a NOSCRIPT counts):
 * a lock's acquire, extend (a renewal), check and release each make one or two. */
long long hlt_script_calls(hlt_redis *r);
/* From now on r's SLOWLOG keeps every command with its arguments (slower than 0 us; the last
 * 1024), emptied first. */
void hlt_log_commands(hlt_redis *r);
/* How many commands that log holds with an argument equal to arg (a script's operation, say
 * "leave": permits.lua's ARGV[1]). */
long long hlt_logged(hlt_redis *r, const char *arg);

/* Wait for a condition, not for a time: poll cond every 5 ms until it holds or limit_ms pass,
 * then assert it (the test fails with the message if it never held). */
#define HLT_AWAIT(cond, limit_ms, ...)                                                     \
    do {                                                                                   \
        long long hlt_end_ = hlt_now_ms() + (limit_ms);                                    \
        while (!(cond) && hlt_now_ms() < hlt_end_) hlt_sleep_ms(5);                        \
        cr_assert((cond), __VA_ARGS__);                                                    \
    } while (0)

/* A suite whose every test gets its own redis-server (no extra arguments) in the static VAR:
 * the suite's .init starts it (the test fails if it does not start), its .fini stops it.
 * More TestSuite options follow (.timeout = 60). */
#define HLT_SUITE_WITH_SERVER(suite, var, ...)                                             \
    static hlt_redis *var;                                                                 \
    static void hlt_##suite##_start(void) { var = hlt_redis_started(NULL); }              \
    static void hlt_##suite##_stop(void) { hlt_redis_stop(var); }                          \
    TestSuite(suite, .init = hlt_##suite##_start, .fini = hlt_##suite##_stop, __VA_ARGS__)

#endif
