/* SPDX-License-Identifier: BSD-3-Clause */
/* checks.h -- Criterion assertions on server state, shared by the suites. */
#ifndef HILOCK_TEST_CHECKS_H
#define HILOCK_TEST_CHECKS_H

#include <stddef.h>
#include "fixture.h"

/* SET key v (with PX px when px > 0); asserts the server said OK. */
void hlt_set(hlt_redis *r, const char *key, const char *v, long long px);
/* Asserts the key holds exactly v (v NULL: no such key). */
void hlt_holds(hlt_redis *r, const char *key, const char *v);
/* Does s match the extended regular expression re? */
int  hlt_matches(const char *s, const char *re);

#endif
