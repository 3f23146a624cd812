#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# install-check.sh SRCDIR WORKDIR URL -- what a user of an installed hilock sees:
# `make install PREFIX=WORKDIR/prefix` (built in its own B= dir, so no build tree collides),
# then a program outside the repo built only from `pkg-config hilock` (shared, then static)
# takes and releases a lock on URL. Also: only the public headers are installed, the shared
# library exports only hilock_* symbols and has the soname libhilock.so.MAJOR, a program reports
# the header's version at run time, CMake finds the package (find_package(hilock) and the
# imported targets hilock::hilock, hilock::hilock_static; when cmake is installed), and
# `make uninstall` removes what install put there. The .pc's Cflags are only the include
# directory (no hiredis flags), a program linked with an rpath to pkg-config's libdir runs
# without LD_LIBRARY_PATH (README.md, "Use"), and the man pages carry the
# version and the guides' directory, where the guides are.
set -eu
src=$1 work=$2 url=$3
prefix=$work/prefix

# A clean make: not the flags (B=, sanitizers) of an outer `make test` that runs this suite.
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES B OPT EXTRA_CFLAGS EXTRA_LDFLAGS PKG_CONFIG_PATH

step() { echo "install-check: $*"; }
fail() { echo "install-check: FAIL: $*"; exit 1; }

step "make install PREFIX=$prefix"
make -s -C "$src" -j2 B="$work/build" PREFIX="$prefix" install >"$work/make.log" 2>&1 ||
  { cat "$work/make.log"; fail "make install"; }

for h in "$prefix"/include/*; do
  case $(basename "$h") in
    hilock.h|hilock_legacy.h|hilock_inspect.h|hilock_observe.h|hilock.hpp|hilock_async.h|hilock_libuv.h|hilock_libevent.h) ;;
    *) fail "installed a non-public header: $h" ;;
  esac
done
leaked=$(nm -D --defined-only "$prefix/lib/libhilock.so" | awk '$2 ~ /^[TDBR]$/ && $3 !~ /^hilock_/ {print $3}')
[ -z "$leaked" ] || fail "libhilock.so exports internal symbols: $leaked"
major=$(sed -n 's/^#define HILOCK_VERSION_MAJOR *\([0-9]*\).*/\1/p' "$src/include/hilock.h")
soname=$(readelf -d "$prefix/lib/libhilock.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libhilock.so.$major" ] || fail "soname is '$soname', not libhilock.so.$major"
step "soname $soname"

mkdir -p "$work/app"
cat >"$work/app/prog.c" <<'EOF'
#include <hilock.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    hilock_client *c;
    hilock *l;
    hilock_status st;
    if (argc != 2 || hilock_client_open(argv[1], &c) != HILOCK_OK) return 2;
    if (strcmp(hilock_version(), HILOCK_VERSION) != 0) {
        fprintf(stderr, "hilock_version() %s, header %s\n", hilock_version(), HILOCK_VERSION);
        return 1;
    }
    st = hilock_acquire(c, "install-check", 5000, 1000, &l);
    if (st != HILOCK_OK) {
        fprintf(stderr, "acquire: %s: %s\n", hilock_strerror(st), hilock_client_errmsg(c));
        hilock_client_free(c);
        return 1;
    }
    printf("fence %llu\n", (unsigned long long)hilock_fence(l));
    st = hilock_release(l);
    hilock_free(l);
    hilock_client_free(c);
    return st == HILOCK_OK ? 0 : 1;
}
EOF
version=$(sed -n 's/^#define HILOCK_VERSION "\(.*\)".*/\1/p' "$src/include/hilock.h")
docdir=$prefix/share/doc/hilock
for m in man1/hilock.1 man3/hilock.3; do
  head -n 1 "$prefix/share/man/$m" | grep -q "\"hilock $version\"" ||
    fail "$m does not say hilock $version: $(head -n 1 "$prefix/share/man/$m")"
  if grep -n '@[A-Z]*@' "$prefix/share/man/$m"; then fail "$m has a placeholder left"; fi
done
grep -q "$docdir/docs" "$prefix/share/man/man3/hilock.3" || fail "hilock.3 does not name $docdir/docs"
for f in README.md LICENSE docs/fencing.md docs/legacy-migration.md docs/command.md; do
  cmp -s "$src/$f" "$docdir/$f" || fail "$docdir/$f is not installed"
done
step "man pages say hilock $version; guides in $docdir"

cd "$work/app"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"

cflags=$(pkg-config --cflags hilock)
[ "$(echo $cflags)" = "-I$prefix/include" ] || fail "pkg-config --cflags hilock is '$cflags', not -I$prefix/include"
step "pkg-config --cflags hilock: $(echo $cflags)"

step "shared: cc prog.c \$(pkg-config --cflags --libs hilock)"
cc -std=c99 -Wall -Wextra -Werror -pedantic prog.c -o prog-shared $(pkg-config --cflags --libs hilock)
LD_LIBRARY_PATH="$prefix/lib" ./prog-shared "$url" || fail "prog-shared"
step "shared, rpath: cc prog.c \$(pkg-config --cflags --libs hilock) -Wl,-rpath,\$(pkg-config --variable=libdir hilock)"
cc -std=c99 -Wall -Wextra -Werror -pedantic prog.c -o prog-rpath $(pkg-config --cflags --libs hilock) \
  -Wl,-rpath,"$(pkg-config --variable=libdir hilock)"
(unset LD_LIBRARY_PATH; ./prog-rpath "$url") || fail "prog-rpath (no LD_LIBRARY_PATH)"

step "static: libhilock.a with \$(pkg-config --static --libs hilock)"
cc -std=c99 -Wall -Wextra -Werror prog.c -o prog-static $(pkg-config --cflags hilock) \
  $(pkg-config --static --libs hilock | sed 's/-lhilock\b/-l:libhilock.a/')
if readelf -d prog-static | grep -q 'libhilock'; then fail "prog-static needs libhilock.so"; fi
./prog-static "$url" || fail "prog-static"

if command -v c++ >/dev/null 2>&1; then
  step "the header compiles as C++"
  c++ -x c++ -Wall -Wextra -Werror -c prog.c -o prog-cxx.o $(pkg-config --cflags hilock)
  step "the installed hilock.hpp compiles (C++17)"
  printf '#include <hilock.hpp>\n#include <mutex>\nint main() { hilock_cpp::client c("redis://127.0.0.1:1");\n  hilock_cpp::mutex m(c, "k", std::chrono::seconds(1));\n  return std::unique_lock<hilock_cpp::mutex>(m, std::try_to_lock).owns_lock(); }\n' >prog.cpp
  c++ -std=c++17 -Wall -Wextra -Werror -c prog.cpp -o prog-hpp.o $(pkg-config --cflags hilock)
fi

if command -v cmake >/dev/null 2>&1; then
  step "cmake: find_package(hilock 0.1 REQUIRED), hilock::hilock, hilock::hilock_static, and libuv as hilockConfig.cmake says"
  mkdir -p "$work/cmake-app"
  cp prog.c "$work/cmake-app/"
  cat >"$work/cmake-app/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.13)
project(app C)
find_package(hilock 0.1 REQUIRED)
add_executable(app prog.c)
target_link_libraries(app PRIVATE hilock::hilock)
add_executable(app_static prog.c)
target_link_libraries(app_static PRIVATE hilock::hilock_static)
# hilock_libuv.h: the loop is linked as hilockConfig.cmake's comment says
find_package(PkgConfig REQUIRED)
pkg_check_modules(UV REQUIRED IMPORTED_TARGET libuv)
add_executable(app_uv uv.c)
target_link_libraries(app_uv PRIVATE hilock::hilock PkgConfig::UV)
EOF
  cat >"$work/cmake-app/uv.c" <<'EOF'
#include <hilock_libuv.h>

static int failed = 1;
static void on_released(hilock_status st, hilock *l, void *c)
{
    failed = st != HILOCK_OK;
    hilock_free(l);
    hilock_client_free(c);
}

static void on_locked(hilock_status st, hilock *l, void *c)
{
    if (st == HILOCK_OK && hilock_release_async(l, on_released, c) == HILOCK_OK) return;
    hilock_client_free(c);
}

int main(int argc, char **argv)
{
    hilock_client *c;
    if (argc != 2 || hilock_client_open(argv[1], &c) != HILOCK_OK ||
        hilock_libuv_attach(c, uv_default_loop()) != HILOCK_OK ||
        hilock_acquire_async(c, "install-check", 5000, 1000, on_locked, c) != HILOCK_OK)
        return 2;
    uv_run(uv_default_loop(), UV_RUN_DEFAULT);
    return failed;
}
EOF
  cmake -S "$work/cmake-app" -B "$work/cmake-app/b" -DCMAKE_PREFIX_PATH="$prefix" >"$work/cmake.log" 2>&1 &&
    cmake --build "$work/cmake-app/b" >>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; fail "cmake build"; }
  readelf -d "$work/cmake-app/b/app" | grep -q "libhilock.so.$major" || fail "cmake app does not link libhilock.so"
  if readelf -d "$work/cmake-app/b/app_static" | grep -q 'libhilock'; then fail "app_static needs libhilock.so"; fi
  LD_LIBRARY_PATH="$prefix/lib" "$work/cmake-app/b/app" "$url" || fail "cmake app"
  "$work/cmake-app/b/app_static" "$url" || fail "cmake app_static"
  LD_LIBRARY_PATH="$prefix/lib" "$work/cmake-app/b/app_uv" "$url" || fail "cmake app_uv (libuv through pkg_check_modules)"
  step "cmake: find_package(hilock $((major + 1)).0) is refused (hilockConfigVersion.cmake)"
  sed -i "s/find_package(hilock 0.1 REQUIRED)/find_package(hilock $((major + 1)).0 REQUIRED)/" \
    "$work/cmake-app/CMakeLists.txt"
  if cmake -S "$work/cmake-app" -B "$work/cmake-app/b2" -DCMAKE_PREFIX_PATH="$prefix" >"$work/cmake.log" 2>&1; then
    fail "find_package accepted version $((major + 1)).0"
  fi
  grep -q "$(sed -n 's/^#define HILOCK_VERSION "\(.*\)".*/\1/p' "$src/include/hilock.h")" "$work/cmake.log" ||
    { cat "$work/cmake.log"; fail "cmake's refusal does not name the installed version"; }
fi

step "make uninstall"
cd "$src"
make -s B="$work/build" PREFIX="$prefix" uninstall >>"$work/make.log" 2>&1 || { cat "$work/make.log"; fail "make uninstall"; }
left=$(find "$prefix" -type f -o -type l)
[ -z "$left" ] || fail "make uninstall left: $left"
step "ok"
