/* SPDX-License-Identifier: BSD-3-Clause */
/* test_readme.c -- README.md's example compiles as it stands (the Makefile extracts its first
 * ```c block into $(B)/tests/readme_example.c) and does what it says on a real server. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "checks.h"
#include "fixture.h"

/* Run $(B)/tests/readme_example (next to this suite) with a URL; its exit status. */
static int run_example(const char *url)
{
    char self[PATH_MAX], cmd[2 * PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert_gt(len, 0);
    self[len] = '\0';
    snprintf(cmd, sizeof cmd, "'%s/readme_example' '%s' >/dev/null 2>&1", dirname(self), url);
    return system(cmd);
}

Test(readme, the_example_takes_and_releases_the_lock, .timeout = 30)
{
    hlt_redis *r = hlt_redis_started(NULL);
    cr_assert_eq(run_example(r->url), 0);
    cr_assert_eq(hlt_exists(r, "{jobs:nightly}:fence"), 1);   /* it was granted... */
    cr_assert_eq(hlt_exists(r, "jobs:nightly"), 0);           /* ...and released */
    hlt_redis_stop(r);
}

Test(readme, the_example_reports_a_bad_url, .timeout = 30)
{
    cr_assert_neq(run_example("redis://[::1"), 0);
}

/* A lock it did not get is a failure of the program, not a quiet exit 0. */
Test(readme, the_example_fails_when_someone_else_holds_the_lock, .timeout = 30)
{
    hlt_redis *r = hlt_redis_started(NULL);
    char *v;
    freeReplyObject(hlt_cmd(r, "SET jobs:nightly someone-else PX 60000"));
    cr_assert_neq(run_example(r->url), 0);   /* after its 5 s wait */
    v = hlt_get(r, "jobs:nightly");
    cr_assert_str_eq(v, "someone-else");      /* left alone */
    free(v);
    hlt_redis_stop(r);
}

/* The port is held, bound but not listening, for the whole test: a connect to it is refused,
 * and no other suite's server can take it meanwhile (a port found free and let go could be). */
Test(readme, the_example_fails_when_no_server_answers, .timeout = 30)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    char url[64];
    int s = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(s, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(getsockname(s, (struct sockaddr *)&a, &len), 0);
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", ntohs(a.sin_port));
    cr_assert_neq(run_example(url), 0);
    close(s);
}
