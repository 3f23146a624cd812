#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# check-version.sh B -- `make test` runs it: one version everywhere. include/hilock.h's
# HILOCK_VERSION_MAJOR/MINOR/PATCH is the source; HILOCK_VERSION must spell them, the newest
# entry of debian/changelog must be it, no symbol in debian/libhilock0.symbols may be newer,
# and what the build made from it (B/hilock.pc, B/cmake/hilockConfigVersion.cmake, the man
# pages in B/man, libhilock.so.VERSION) must carry it. A program checking hilock_version()
# can then tell two releases apart.
cd "$(dirname "$0")/.." || exit 1
b=${1:-build}
num() { sed -n "s/^#define HILOCK_VERSION_$1 *\([0-9][0-9]*\).*/\1/p" include/hilock.h; }
v="$(num MAJOR).$(num MINOR).$(num PATCH)"
bad=
say() { bad=1; echo "check-version: $*"; }
text=$(sed -n 's/^#define HILOCK_VERSION "\([^"]*\)".*/\1/p' include/hilock.h)
[ "$text" = "$v" ] || say "HILOCK_VERSION is \"$text\", the three numbers say $v"
top=$(sed -n '1s/^hilock (\([^)]*\)).*/\1/p' debian/changelog)
[ "$top" = "$v" ] || say "debian/changelog's newest entry is $top, include/hilock.h says $v"
newest=$(sed -n 's/^ [a-z_0-9]*@Base \([0-9.]*\)$/\1/p' debian/libhilock0.symbols | sort -t. -k1,1n -k2,2n -k3,3n | tail -n 1)
[ -z "$newest" ] || [ "$(printf '%s\n%s\n' "$newest" "$v" | sort -t. -k1,1n -k2,2n -k3,3n | tail -n 1)" = "$v" ] ||
    say "debian/libhilock0.symbols has symbols of $newest, newer than $v"
grep -qx "Version: $v" "$b/hilock.pc" 2>/dev/null || say "$b/hilock.pc does not say Version: $v"
grep -q "set(PACKAGE_VERSION \"$v\")" "$b/cmake/hilockConfigVersion.cmake" 2>/dev/null ||
    say "$b/cmake/hilockConfigVersion.cmake does not say $v"
for m in "$b/man/hilock.1" "$b/man/hilock.3"; do
    grep -q "\"hilock $v\"" "$m" 2>/dev/null || say "$m does not say hilock $v"
done
[ -e "$b/libhilock.so.$v" ] || say "$b/libhilock.so.$v was not built"
[ -z "$bad" ] || exit 1
