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

/* A suite whose every test gets its own redis-server (no extra arguments) in the static VAR:
 * the suite's .init starts it (the test fails if it does not start), its .fini stops it.
 * More TestSuite options follow (.timeout = 60). */
#define HLT_SUITE_WITH_SERVER(suite, var, ...)                                             \
    static hlt_redis *var;                                                                 \
    static void hlt_##suite##_start(void) { var = hlt_redis_started(NULL); }              \
    static void hlt_##suite##_stop(void) { hlt_redis_stop(var); }                          \
    TestSuite(suite, .init = hlt_##suite##_start, .fini = hlt_##suite##_stop, __VA_ARGS__)

#endif
