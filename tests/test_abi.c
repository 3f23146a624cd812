/* SPDX-License-Identifier: BSD-3-Clause */
/* test_abi.c -- options that grow without breaking applications (docs/versioning.md).
 *   - an application built against 0.1.0's frozen header, linked to this build's shared
 *     library, runs unrebuilt with its non-default options in effect (tests/abi/v0_app.c);
 *   - the plain entry points (the symbols 0.1.0 binaries call) read and write only 0.1.0's
 *     size; the _sized ones default what a smaller size lacks and refuse what a larger size
 *     sets beyond the fields this library knows;
 *   - today's header compiles and works as C++ (tests/abi/cxx_app.cpp). */
#include <criterion/criterion.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checks.h"
#include "fixture.h"
#include "lock.h"

/* Run a program built next to this suite ($(B)/tests/abi/NAME) with args; its output in out. */
static int run_abi(const char *name, const char *args, char *out, size_t n)
{
    char self[PATH_MAX], cmd[2 * PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert_gt(len, 0);
    self[len] = '\0';
    snprintf(cmd, sizeof cmd, "'%s/abi/%s' %s 2>&1", dirname(self), name, args);
    return hlt_run_capture(cmd, out, n);
}

Test(abi, a_program_built_against_0_1_0_runs_unrebuilt_on_this_library, .timeout = 60)
{
    hlt_redis *r = hlt_redis_started(NULL);
    char args[64], out[8192];
    int rc;
    snprintf(args, sizeof args, "127.0.0.1 %d", r->port);
    rc = run_abi("v0_app", args, out, sizeof out);
    cr_log_info("%s", out);
    cr_assert_eq(rc, 0, "v0_app failed:\n%s", out);
    cr_assert_not_null(strstr(out, "\nok\n"), "%s", out);
    /* it really used the server, and left nothing held */
    cr_assert_eq(hlt_exists(r, "{abi:k}:fence"), 1);
    cr_assert_eq(hlt_exists(r, "abi:k"), 0);
    cr_assert_eq(hlt_exists(r, "abi:ka"), 0);
    hlt_redis_stop(r);
}

Test(abi, the_header_compiles_and_works_as_cpp, .timeout = 60)
{
    hlt_redis *r = hlt_redis_started(NULL);
    char out[4096];
    int rc;
    rc = run_abi("cxx_app", r->url, out, sizeof out);
    cr_assert_eq(rc, 0, "cxx_app failed:\n%s", out);
    cr_assert_eq(hlt_exists(r, "{abi:cxx}:fence"), 1);
    cr_assert_eq(hlt_exists(r, "abi:cxx"), 0);
    hlt_redis_stop(r);
}

/* A block of `size` bytes followed by a fence of 0xAB the library must not write. */
static unsigned char *fenced(size_t size)
{
    unsigned char *p = malloc(size + 64);
    cr_assert_not_null(p);
    memset(p, 0xAB, size + 64);
    return p;
}

static void assert_fence(const unsigned char *p, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) cr_assert_eq(p[i], 0xAB, "byte %zu written", i);
}

Test(abi, the_plain_entry_points_use_only_the_0_1_0_size)
{
    const char *url = "redis://127.0.0.1:1";
    unsigned char *p = fenced(HL_OPTIONS_V0_SIZE), *k = fenced(HL_KEEPALIVE_OPTIONS_V0_SIZE);
    hilock_options *o = (hilock_options *)p;
    hilock_client *c;
    cr_assert_geq(sizeof(hilock_options), HL_OPTIONS_V0_SIZE);
    (hilock_options_init)(o);
    assert_fence(p, HL_OPTIONS_V0_SIZE, HL_OPTIONS_V0_SIZE + 64);
    cr_assert_eq(o->io_timeout_ms, 1000);
    cr_assert_eq(o->failover_guard_ms, 0);   /* 0.1.0's last field */
    o->servers = &url;
    o->nservers = 1;
    /* the fence past 0.1.0's size is nonzero: it is never read, so no "newer hilock" EINVAL */
    cr_assert_eq((hilock_client_new)(o, &c), HILOCK_OK, "%s", hilock_last_config_error());
    hilock_client_free(c);
    (hilock_keepalive_options_init)((hilock_keepalive_options *)k);
    assert_fence(k, HL_KEEPALIVE_OPTIONS_V0_SIZE, HL_KEEPALIVE_OPTIONS_V0_SIZE + 64);
    free(p);
    free(k);
}

Test(abi, init_sized_writes_only_size_bytes_and_zeroes_past_what_it_knows)
{
    size_t small = offsetof(hilock_options, io_timeout_ms), big = sizeof(hilock_options) + 24;
    unsigned char *p = fenced(big);
    hilock_options_init_sized((hilock_options *)p, small);
    cr_assert_eq(((hilock_options *)p)->connect_timeout_ms, 1000);
    assert_fence(p, small, big + 64);
    hilock_options_init_sized((hilock_options *)p, big);
    cr_assert_eq(((hilock_options *)p)->wake, 1);
    for (size_t i = sizeof(hilock_options); i < big; i++) cr_assert_eq(p[i], 0, "byte %zu", i);
    assert_fence(p, big, big + 64);
    hilock_options_init_sized(NULL, big);   /* ignored */
    free(p);
}

Test(abi, a_smaller_size_gives_the_missing_fields_their_defaults)
{
    const char *url = "redis://127.0.0.1:1";
    hilock_options o;
    hilock_client *c;
    hilock_options_init(&o);
    o.servers = &url;
    o.nservers = 1;
    o.io_timeout_ms = 77;
    o.wake = 0;
    o.failover_guard_ms = -5;   /* invalid: read, it would be refused */
    /* a header whose struct ended before `wake`; a size that cuts `wake` in half counts the same */
    for (size_t cut = 0; cut < 2; cut++) {
        cr_assert_eq(hilock_client_new_sized(&o, offsetof(hilock_options, wake) + cut * 2, &c), HILOCK_OK,
                     "%s", hilock_last_config_error());
        cr_assert_eq(c->opt.io_timeout_ms, 77);
        cr_assert_eq(c->opt.wake, 1);
        cr_assert_eq(c->opt.failover_guard_ms, 0);
        hilock_client_free(c);
    }
    cr_assert_eq(hilock_client_new(&o, &c), HILOCK_EINVAL);   /* the full size reads it */
    cr_assert_not_null(strstr(hilock_last_config_error(), "failover_guard_ms"));
    /* a size without the servers: the default (none) */
    cr_assert_eq(hilock_client_new_sized(&o, offsetof(hilock_options, nservers), &c), HILOCK_EINVAL);
    cr_assert_not_null(strstr(hilock_last_config_error(), "no server given"));
    cr_assert_null(c);
}

Test(abi, a_larger_size_with_unknown_fields_zero_is_accepted)
{
    const char *url = "redis://127.0.0.1:1";
    size_t big = sizeof(hilock_options) + 24;
    unsigned char *p = fenced(big);
    hilock_options *o = (hilock_options *)p;
    hilock_client *c;
    hilock_options_init_sized(o, big);
    o->servers = &url;
    o->nservers = 1;
    o->retry_delay_ms = 9;
    cr_assert_eq(hilock_client_new_sized(o, big, &c), HILOCK_OK, "%s", hilock_last_config_error());
    cr_assert_eq(c->opt.retry_delay_ms, 9);
    hilock_client_free(c);
    free(p);
}

Test(abi, a_larger_size_with_an_unknown_field_set_is_refused)
{
    const char *url = "redis://127.0.0.1:1";
    size_t big = sizeof(hilock_options) + 24;
    unsigned char *p = fenced(big);
    hilock_options *o = (hilock_options *)p;
    hilock_client *c = (hilock_client *)1;
    hilock_options_init_sized(o, big);
    o->servers = &url;
    o->nservers = 1;
    p[big - 3] = 1;   /* a newer header's option, set */
    cr_assert_eq(hilock_client_new_sized(o, big, &c), HILOCK_EINVAL);
    cr_assert_null(c);
    cr_assert_not_null(strstr(hilock_last_config_error(), "options from a newer hilock"), "%s",
                       hilock_last_config_error());
    free(p);
}

Test(abi, keepalive_options_grow_the_same_way, .timeout = 30)
{
    hlt_redis *r = hlt_redis_started(NULL);
    size_t big = sizeof(hilock_keepalive_options) + 16;
    unsigned char *p = fenced(big);
    hilock_keepalive_options *ko = (hilock_keepalive_options *)p;
    hilock_client *c;
    hilock *l;
    cr_assert_eq(hilock_client_open(r->url, &c), HILOCK_OK);
    cr_assert_eq(hilock_acquire(c, "abi:ka", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_keepalive_options_init_sized(ko, big);
    ko->max_hold_ms = -5;   /* invalid, so a read of it shows */
    cr_assert_eq(hilock_keepalive_ex(l, NULL, NULL, ko), HILOCK_EINVAL);
    cr_assert_not_null(strstr(hilock_client_errmsg(c), "max_hold_ms"));
    p[big - 1] = 1;
    cr_assert_eq(hilock_keepalive_ex_sized(l, NULL, NULL, ko, big), HILOCK_EINVAL);
    cr_assert_not_null(strstr(hilock_client_errmsg(c), "options from a newer hilock"), "%s",
                       hilock_client_errmsg(c));
    /* a header without max_hold_ms: its default (no cap), so the keepalive starts */
    cr_assert_eq(hilock_keepalive_ex_sized(l, NULL, NULL, ko, offsetof(hilock_keepalive_options, max_hold_ms)),
                 HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_str_eq(hilock_keepalive_errmsg(l), "");
    hlt_release_gone(r, NULL, l, "abi:ka");
    hilock_client_free(c);
    free(p);
    hlt_redis_stop(r);
}
