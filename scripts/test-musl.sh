#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# make test-musl: hilock built with musl (musl-gcc, Debian's musl-tools) and used by a static
# musl program against the native redis-server (docs/portability.md).
#   1. hiredis for musl, from the hiredis inside a Redis source tarball of SERVERS_SRC
#      (redis-6.0.20's deps/hiredis is 0.14.0, the API hilock targets), built once into
#      ${XDG_CACHE_HOME:-~/.cache}/hilock/musl;
#   2. every library source compiled with musl-gcc -Werror (make's own rules, into B);
#   3. tests/fiber/fiber_check.c and tests/musl/musl_check.c linked statically and run; the
#      latter once more with fiber.c built with no switch (the loop refused at attach).
# src/transport/session.c compiles against OpenSSL's headers, but Debian's OpenSSL is built for glibc: the
# programs link tests/musl/tls_stub.c in its place (no TLS in this test).
# Usage: scripts/test-musl.sh BUILD_DIR (e.g. build-musl); SERVERS_SRC as for make test-servers.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
b=${1:?usage: test-musl.sh BUILD_DIR}
cc=${MUSL_CC:-musl-gcc}
hiredis_from=${MUSL_HIREDIS_FROM:-redis-6.0.20}
src=${SERVERS_SRC:-}
if [ -z "$src" ] && [ -d "$here/../shared/servers" ]; then src=$here/../shared/servers; fi
cache=${XDG_CACHE_HOME:-$HOME/.cache}/hilock/musl
cd "$here"

command -v "$cc" >/dev/null || { echo "test-musl: no $cc (apt-get install musl-tools)" >&2; exit 2; }
command -v redis-server >/dev/null || { echo "test-musl: no redis-server on PATH" >&2; exit 2; }

# 1. hiredis (its static library and headers), once
hr=$cache/$hiredis_from-hiredis
if [ ! -f "$hr/lib/libhiredis.a" ]; then
  tb=$src/$hiredis_from.tar.gz
  [ -f "$tb" ] || { echo "test-musl: no $tb (SERVERS_SRC: the Redis source tarballs)" >&2; exit 2; }
  mkdir -p "$cache"
  work=$(mktemp -d "$cache/.build.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  tar -xzf "$tb" -C "$work" "$hiredis_from/deps/hiredis"
  echo "test-musl: building hiredis from $hiredis_from with $cc" >&2
  make -s -C "$work/$hiredis_from/deps/hiredis" CC="$cc" OPTIMIZATION=-O2 libhiredis.a >/dev/null
  mkdir -p "$work/out/lib" "$work/out/include/hiredis"
  cp "$work/$hiredis_from/deps/hiredis/libhiredis.a" "$work/out/lib/"
  cp "$work/$hiredis_from"/deps/hiredis/*.h "$work/out/include/hiredis/"
  cp -r "$work/$hiredis_from/deps/hiredis/adapters" "$work/out/include/hiredis/"
  rm -rf "$hr"
  mv "$work/out" "$hr"
fi

# 2. the library, every source with musl-gcc -Werror (OpenSSL's headers after musl's own)
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
make --no-print-directory -j2 B="$b" CC="$cc" OPT="-O2 -g" \
  OPENSSL_CFLAGS="-idirafter /usr/include/$multiarch -idirafter /usr/include" \
  EXTRA_CFLAGS="-I$hr/include" "$b/libhilock.a"

# 3. the programs, static, and their runs
mkdir -p "$b/tests"
warn="-std=c99 -Wall -Wextra -Wstrict-prototypes -Wwrite-strings -Werror -O2 -g"
"$cc" $warn -Isrc/async -Isrc/platform -static -o "$b/tests/fiber_check" tests/fiber/fiber_check.c src/async/fiber.c \
  src/platform/linux.c src/platform/common.c -lpthread -lm   # (the stacks: the platform layer's)
"$cc" $warn -Iinclude -Isrc/async -I"$hr/include" -static -o "$b/tests/musl_check" \
  -Isrc/transport tests/musl/musl_check.c tests/musl/tls_stub.c "$b/libhilock.a" "$hr/lib/libhiredis.a" -lpthread
# the same program where a build has no switch: fiber.c built so, given before the library
"$cc" $warn -Isrc/async -Isrc/platform -DHL_FIBER_FORCE_NONE -c src/async/fiber.c -o "$b/tests/fiber-none.o"
"$cc" $warn -Iinclude -Isrc/async -I"$hr/include" -static -o "$b/tests/musl_check_none" \
  -Isrc/transport tests/musl/musl_check.c tests/musl/tls_stub.c "$b/tests/fiber-none.o" "$b/libhilock.a" \
  "$hr/lib/libhiredis.a" -lpthread
"$b/tests/fiber_check"
run=$(mktemp -d "${TMPDIR:-/tmp}/hilock-musl.XXXXXX")
rc=0
"$b/tests/musl_check" "$run" || rc=$?
"$b/tests/musl_check_none" "$run" no-switch || rc=$?
rm -rf "$run"
exit $rc
