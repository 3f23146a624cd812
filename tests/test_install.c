/* SPDX-License-Identifier: BSD-3-Clause */
/* test_install.c -- `make install`, then a program outside the repo built with pkg-config
 * links (shared, with an rpath, and static) and takes a lock on a real server; pkg-config's
 * Cflags are the include directory alone; the man pages and guides are installed
 * (tests/install-check.sh). */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "hilock.h"

Test(install, a_program_built_with_pkg_config_links_and_runs, .timeout = 180)
{
    char src[PATH_MAX], work[] = "/tmp/hilock-install-XXXXXX", cmd[3 * PATH_MAX], out[16384];
    hlt_redis *r = hlt_redis_start(NULL);
    size_t got = 0;
    FILE *p;
    int rc;
    cr_assert_not_null(r);
    cr_assert_eq(hlt_srcdir(src, sizeof src), 0, "cannot find the source tree (set HILOCK_SRCDIR)");
    cr_assert_not_null(mkdtemp(work));
    snprintf(cmd, sizeof cmd, "sh '%s/tests/install-check.sh' '%s' '%s' '%s' 2>&1", src, src, work, r->url);
    p = popen(cmd, "r");
    cr_assert_not_null(p);
    while (got < sizeof out - 1) {
        size_t k = fread(out + got, 1, sizeof out - 1 - got, p);
        if (k == 0) break;
        got += k;
    }
    out[got] = '\0';
    rc = pclose(p);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", work);
    if (system(cmd) != 0) cr_log_warn("could not remove %s", work);
    cr_assert_eq(rc, 0, "install-check.sh failed:\n%s", out);
    /* the user's view the script checked: the include directory only (no hiredis flags), a
     * program found by its rpath, the man pages' version (see install-check.sh) */
    snprintf(cmd, sizeof cmd, "install-check: pkg-config --cflags hilock: -I%s/prefix/include\n", work);
    cr_assert(strstr(out, cmd), "%s", out);
    cr_assert(strstr(out, "install-check: shared, rpath: "), "%s", out);
    cr_assert(strstr(out, "install-check: man pages say hilock " HILOCK_VERSION "; guides in "), "%s", out);
    /* the programs really talked to the server: two grants of the key, both released */
    cr_assert_eq(hlt_exists(r, "{install-check}:fence"), 1, "%s", out);
    cr_assert_eq(hlt_exists(r, "install-check"), 0);
    hlt_redis_stop(r);
}
