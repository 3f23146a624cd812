/* SPDX-License-Identifier: BSD-3-Clause */
/* test_deps.c -- scripts/deps.sh, the package step of make demo and make test, run against
 * stand-ins for apt-get, dpkg-query and sudo (on PATH in a scratch directory) that log what
 * they were asked: which packages each set asks for, and what fails it. Nothing is installed. */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fixture.h"

typedef struct run {
    int  status;        /* deps.sh's exit status          */
    char out[8192];     /* its stdout and stderr          */
    char log[8192];     /* one line per stand-in call     */
} run;

static void write_file(const char *dir, const char *name, const char *text, int exec)
{
    char path[PATH_MAX];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    cr_assert_not_null(f = fopen(path, "w"), "%s", path);
    fputs(text, f);
    fclose(f);
    if (exec) cr_assert_eq(chmod(path, 0755), 0);
}

static void read_all(FILE *f, char *buf, size_t cap)
{
    size_t got = 0, k;
    while (got < cap - 1 && (k = fread(buf + got, 1, cap - 1 - got, f)) > 0) got += k;
    buf[got] = '\0';
}

/* A copy of deps.sh (its deps-node.sh a stand-in that logs) with every package missing;
 * `apt-get update` exits update_rc, `apt-get install` install_rc. */
static void run_deps(const char *args, int update_rc, int install_rc, run *r)
{
    char src[PATH_MAX], dir[] = "/tmp/hilock-deps-XXXXXX", cmd[4 * PATH_MAX + 256], logpath[PATH_MAX];
    FILE *p;
    cr_assert_eq(hlt_srcdir(src, sizeof src), 0, "cannot find the source tree (set HILOCK_SRCDIR)");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(logpath, sizeof logpath, "%s/calls.log", dir);
    write_file(dir, "apt-get",
               "#!/bin/sh\necho \"apt-get $*\" >>\"$DEPS_LOG\"\n"
               "case $1 in update) echo 'E: an unrelated index failed' >&2; exit $UPDATE_RC ;;\n"
               "  install) exit $INSTALL_RC ;; esac\n", 1);
    write_file(dir, "dpkg-query", "#!/bin/sh\nexit 1\n", 1);   /* nothing is installed */
    write_file(dir, "sudo", "#!/bin/sh\nexec \"$@\"\n", 1);
    write_file(dir, "deps-node.sh", "echo deps-node.sh >>\"$DEPS_LOG\"\n", 0);
    snprintf(cmd, sizeof cmd,
             "cp '%s/scripts/deps.sh' '%s/deps.sh' && PATH='%s':/usr/bin:/bin DEPS_LOG='%s' UPDATE_RC=%d "
             "INSTALL_RC=%d sh '%s/deps.sh' %s 2>&1",
             src, dir, dir, logpath, update_rc, install_rc, dir, args);
    cr_assert_not_null(p = popen(cmd, "r"));
    read_all(p, r->out, sizeof r->out);
    r->status = pclose(p);
    r->log[0] = '\0';
    if ((p = fopen(logpath, "r"))) {
        read_all(p, r->log, sizeof r->log);
        fclose(p);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) cr_log_warn("could not remove %s", dir);
}

/* The `apt-get install` line of the log, with a blank at its end (to match " NAME "). */
static const char *install_line(const run *r, char *buf, size_t cap)
{
    const char *l = strstr(r->log, "apt-get install");
    size_t n;
    cr_assert_not_null(l, "no apt-get install:\n%s\n%s", r->log, r->out);
    n = strcspn(l, "\n");
    snprintf(buf, cap, "%.*s ", (int)n, l);
    return buf;
}

Test(deps, a_failed_apt_get_update_is_a_warning_when_the_install_works)
{
    run r;
    char line[4096];
    run_deps("build", 100, 0, &r);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert(strstr(r.out, "deps: warning: apt-get update failed (see above); installing from the package "
                            "lists there are\n"), "%s", r.out);
    cr_assert(strstr(install_line(&r, line, sizeof line), " libhiredis-dev "), "%s", line);
}

Test(deps, a_failed_install_fails)
{
    run r;
    run_deps("build", 0, 100, &r);
    cr_assert_neq(r.status, 0, "%s", r.out);
    cr_assert(strstr(r.out, "deps: FAILED: apt-get install"), "%s", r.out);
}

Test(deps, the_demo_asks_only_for_the_build_and_what_the_demo_runs)
{
    static const char *not_for_demo[] = { "libcriterion-dev", "redis-sentinel", "valgrind", "cmake", "libuv1-dev",
                                          "libevent-dev", "nodejs", "npm", "python3-redis" };
    static const char *for_demo[] = { "build-essential", "pkg-config", "libhiredis-dev", "libssl-dev",
                                      "redis-server", "redis-tools", "openssl" };
    run r;
    char line[4096], word[64];
    run_deps("demo", 0, 0, &r);
    cr_assert_eq(r.status, 0, "%s", r.out);
    install_line(&r, line, sizeof line);
    for (size_t i = 0; i < sizeof for_demo / sizeof for_demo[0]; i++) {
        snprintf(word, sizeof word, " %s ", for_demo[i]);
        cr_assert(strstr(line, word), "demo lacks %s: %s", for_demo[i], line);
    }
    for (size_t i = 0; i < sizeof not_for_demo / sizeof not_for_demo[0]; i++) {
        snprintf(word, sizeof word, " %s ", not_for_demo[i]);
        cr_assert_null(strstr(line, word), "demo asks for %s: %s", not_for_demo[i], line);
    }
    cr_assert_null(strstr(r.log, "deps-node.sh"), "the demo ran npm's step:\n%s", r.log);
}

Test(deps, the_tests_ask_for_their_tools_and_the_node_peer)
{
    static const char *for_test[] = { "libhiredis-dev", "redis-server", "libcriterion-dev", "redis-sentinel",
                                      "valgrind", "cmake", "libuv1-dev", "libevent-dev", "python3-redis" };
    run r;
    char line[4096], word[64];
    run_deps("", 0, 0, &r);   /* the default: make test's set */
    cr_assert_eq(r.status, 0, "%s", r.out);
    install_line(&r, line, sizeof line);
    for (size_t i = 0; i < sizeof for_test / sizeof for_test[0]; i++) {
        snprintf(word, sizeof word, " %s ", for_test[i]);
        cr_assert(strstr(line, word), "test lacks %s: %s", for_test[i], line);
    }
    cr_assert(strstr(r.log, "deps-node.sh\n"), "%s", r.log);
}

/* make demo runs the demo set, not make test's (which also runs npm ci). */
Test(deps, make_demo_installs_the_demo_set)
{
    char src[PATH_MAX], cmd[PATH_MAX + 128], out[65536];
    FILE *p;
    cr_assert_eq(hlt_srcdir(src, sizeof src), 0);
    snprintf(cmd, sizeof cmd, "make -n --no-print-directory -C '%s' B=/nonexistent/b demo 2>&1", src);
    cr_assert_not_null(p = popen(cmd, "r"));
    read_all(p, out, sizeof out);
    pclose(p);
    cr_assert(strstr(out, "sh scripts/deps.sh demo\n"), "%s", out);
    cr_assert_null(strstr(out, "sh scripts/deps.sh\n"), "%s", out);
}
