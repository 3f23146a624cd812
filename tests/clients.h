/* SPDX-License-Identifier: BSD-3-Clause */
/* clients.h -- the one client maker of the suites: options with the tests' defaults, which a
 * test changes where its scenario needs, and the client made from them (the test fails, saying
 * why, if it cannot be). A suite's own helper may pass arguments through, never build options
 * of its own: a default that changes here changes for every suite. */
#ifndef HILOCK_TEST_CLIENTS_H
#define HILOCK_TEST_CLIENTS_H

#include <stddef.h>

#include "hilock.h"

/* hilock_options_init's, for urls[0..n), with retry_delay_ms 20 (waits in tests stay short;
 * the library's is 50); io_timeout_ms and connect_timeout_ms are the library's (1000, 1000). */
hilock_options hlt_options(const char *const *urls, size_t n);

/* A client made with o; the test fails with hilock_last_config_error() if it cannot be. */
hilock_client *hlt_client_new(const hilock_options *o);

/* The common case: one server URL, hlt_options's defaults. */
hilock_client *hlt_client(const char *url);
/* The same, waits retried every retry_ms (the lock suites' 10: more attempts per test). */
hilock_client *hlt_client_retry(const char *url, int64_t retry_ms);

/* For legacy locks (hilock_legacy.h) and bridge mode: hlt_options for url[0] with waits retried
 * every 10 ms and the codec of preset (hilock_codec_preset; the test fails if it is unknown).
 * The test sets what else its scenario needs (bridge, skew_margin_ms, clock_offset_ms...). */
hilock_options hlt_codec_options(const char *const *url, const char *preset);
/* A client made from them for one url, in bridge mode (bridge 1) or not. */
hilock_client *hlt_codec_client(const char *url, const char *preset, int bridge);

#endif
