/* SPDX-License-Identifier: BSD-3-Clause */
/* test_version.c -- one version: the header's macros, HILOCK_VERSION and hilock_version() agree
 * (the Makefile derives VERSION and the soname from the same macros; tests/install-check.sh
 * checks the installed library's soname and that a shared program reports this version). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "hilock.h"

Test(version, the_macros_the_string_and_hilock_version_agree)
{
    char want[64];
    snprintf(want, sizeof want, "%d.%d.%d", HILOCK_VERSION_MAJOR, HILOCK_VERSION_MINOR, HILOCK_VERSION_PATCH);
    cr_assert_str_eq(HILOCK_VERSION, want);
    cr_assert_str_eq(hilock_version(), want);
    cr_assert(HILOCK_VERSION_MAJOR >= 0 && HILOCK_VERSION_MINOR >= 0 && HILOCK_VERSION_PATCH >= 0);
}
