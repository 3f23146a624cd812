/* SPDX-License-Identifier: BSD-3-Clause */
/* clients.c -- see clients.h. */
#include <criterion/criterion.h>

#include "clients.h"
#include "hilock_legacy.h"

hilock_options hlt_options(const char *const *urls, size_t n)
{
    hilock_options o;
    hilock_options_init(&o);
    o.servers = urls;
    o.nservers = n;
    o.retry_delay_ms = 20;
    return o;
}

hilock_client *hlt_client_new(const hilock_options *o)
{
    hilock_client *c = NULL;
    cr_assert_eq(hilock_client_new(o, &c), HILOCK_OK, "hilock_client_new: %s", hilock_last_config_error());
    return c;
}

hilock_client *hlt_client(const char *url)
{
    hilock_options o = hlt_options(&url, 1);
    return hlt_client_new(&o);
}

hilock_client *hlt_client_retry(const char *url, int64_t retry_ms)
{
    hilock_options o = hlt_options(&url, 1);
    o.retry_delay_ms = retry_ms;
    o.poll_ms = retry_ms;   /* a waiter that blocks on a signal polls this often too */
    return hlt_client_new(&o);
}

hilock_options hlt_codec_options(const char *const *url, const char *preset)
{
    hilock_options o = hlt_options(url, 1);
    o.retry_delay_ms = 10;
    cr_assert_eq(hilock_codec_preset(preset, &o.codec), HILOCK_OK, "preset %s", preset);
    return o;
}

hilock_client *hlt_codec_client(const char *url, const char *preset, int bridge)
{
    hilock_options o = hlt_codec_options(&url, preset);
    o.bridge = bridge;
    return hlt_client_new(&o);
}
