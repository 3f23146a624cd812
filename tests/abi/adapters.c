/* SPDX-License-Identifier: BSD-3-Clause */
/* adapters.c -- the header-only event-loop adapters included and not used, compiled (not run) by
 * tests/abi/headers.sh with cc and clang -std=c99 -Wall -Wextra -Werror: no "unused function". */
#include <hilock_libevent.h>
#include <hilock_libuv.h>

int main(void)
{
    return 0;
}
