#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# deb-check.sh [BUILDDIR] -- the Debian packages as a user meets them (root; make deb-check, a
# CI step of its own): `make deb` (dpkg-buildpackage, lintian without errors; the man pages'
# version, the guides and the licence in the packages), then
# `apt-get install ./BUILDDIR/deb/*.deb`; against the installed packages a C program built with
# `pkg-config --cflags --libs hilock` runs and reports the header's version, the C++ header
# compiles and runs, CMake finds the package, `hilock --help` and `hilock --version` work and the
# man page is there. Finally every package the install added is purged again, and the list of
# installed packages must equal the one before.
set -eu
b=${1:-build}
cd "$(dirname "$0")/.."
src=$(pwd)
pkgs="libhilock0 libhilock-dev hilock-tools"

step() { echo "deb-check: $*"; }
fail() { echo "deb-check: FAIL: $*"; exit 1; }

[ "$(id -u)" = 0 ] || fail "run as root (it installs and removes packages)"
for p in $pkgs; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
    fail "$p is installed already; remove it first (this check purges what it installs)"
  fi
done
version=$(sed -n 's/^#define HILOCK_VERSION "\(.*\)".*/\1/p' include/hilock.h)
major=$(sed -n 's/^#define HILOCK_VERSION_MAJOR *\([0-9]*\).*/\1/p' include/hilock.h)

step "make deb"
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES
make --no-print-directory B="$b" deb
deb_dir=$(cd "$b/deb" && pwd)
for p in $pkgs; do
  [ -f "$deb_dir/${p}_${version}_$(dpkg --print-architecture).deb" ] || fail "no $p $version in $deb_dir"
done

# The man pages carry the version (filled in at build), the guides are in libhilock-dev, as
# man 3 hilock says, and the licence is stated.
arch=$(dpkg --print-architecture)
for m in "hilock-tools man1/hilock.1" "libhilock-dev man3/hilock.3"; do
  set -- $m
  head=$(dpkg-deb --fsys-tarfile "$deb_dir/${1}_${version}_$arch.deb" | tar -xOf - "./usr/share/man/$2.gz" | zcat | head -n 1)
  case $head in *"\"hilock $version\""*) ;; *) fail "$2 in $1 says: $head" ;; esac
done
dpkg -c "$deb_dir/libhilock-dev_${version}_$arch.deb" | grep -q '/usr/share/doc/libhilock-dev/docs/fencing.md$' ||
  fail "libhilock-dev has no guides in /usr/share/doc/libhilock-dev/docs"
dpkg-deb --fsys-tarfile "$deb_dir/libhilock0_${version}_$arch.deb" | tar -xOf - ./usr/share/doc/libhilock0/copyright |
  grep -q '^License: BSD-3-Clause$' || fail "libhilock0's copyright does not say BSD-3-Clause"
step "man pages say hilock $version; guides in libhilock-dev; BSD-3-Clause"

installed() { dpkg-query -W -f='${db:Status-Abbrev} ${binary:Package}\n' | awk '$1 ~ /^.i/ {print $2}' | sort; }
work=$(mktemp -d "${TMPDIR:-/tmp}/hilock-deb.XXXXXX")
installed >"$work/before"
cleanup() {
  installed >"$work/after-install"
  added=$(comm -13 "$work/before" "$work/after-install" | tr '\n' ' ')
  if [ -n "$added" ]; then
    step "apt-get remove --purge $added"
    apt-get remove --purge -y -qq $added >/dev/null 2>&1 || echo "deb-check: could not purge: $added"
  fi
  installed >"$work/after"
  if ! cmp -s "$work/before" "$work/after"; then
    echo "deb-check: FAIL: the installed packages differ from before:"
    diff "$work/before" "$work/after" || true
    rm -rf "$work"
    exit 1
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "apt-get install ./$b/deb/*.deb"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$deb_dir"/*.deb >"$work/apt.log" 2>&1 ||
  { cat "$work/apt.log"; fail "apt-get install"; }
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
[ -e "/usr/lib/$multiarch/libhilock.so.$major" ] || fail "no /usr/lib/$multiarch/libhilock.so.$major"
[ "$(pkg-config --modversion hilock)" = "$version" ] || fail "pkg-config --modversion hilock is not $version"

cd "$work"
cat >prog.c <<'EOF'
#include <hilock.h>
#include <stdio.h>
#include <string.h>

/* The version of the loaded library, and a client (which connects lazily: nothing opened). */
int main(void)
{
    hilock_client *c;
    if (strcmp(hilock_version(), HILOCK_VERSION) != 0) return 1;
    if (hilock_client_open("redis://127.0.0.1:6379", &c) != HILOCK_OK) return 1;
    hilock_client_free(c);
    printf("%s\n", hilock_version());
    return 0;
}
EOF
step "cc prog.c \$(pkg-config --cflags --libs hilock)"
cc -std=c99 -Wall -Wextra -Werror -pedantic prog.c -o prog $(pkg-config --cflags --libs hilock)
ldd ./prog | grep -q "libhilock.so.$major => \(/usr\)\{0,1\}/lib/$multiarch/libhilock.so.$major" || fail "prog does not use the packaged library"
[ "$(./prog)" = "$version" ] || fail "prog did not print $version"

step "c++ -std=c++17 with hilock.hpp"
cat >prog.cpp <<'EOF'
#include <hilock.hpp>
#include <mutex>

int main()
{
    hilock_cpp::client c("redis://127.0.0.1:6379");
    hilock_cpp::mutex m(c, "deb-check", std::chrono::seconds(1));
    try {
        hilock_cpp::client bad("bogus://");
        return 1;
    } catch (const hilock_cpp::error &e) {
        return e.status() == HILOCK_EINVAL && !m.owns_lock() ? 0 : 1;
    }
}
EOF
c++ -std=c++17 -Wall -Wextra -Werror prog.cpp -o prog-cxx $(pkg-config --cflags --libs hilock)
./prog-cxx || fail "prog-cxx"

if command -v cmake >/dev/null 2>&1; then
  step "cmake: find_package(hilock $major.0 REQUIRED) from /usr"
  mkdir cm
  cp prog.c cm/
  printf '%s\n' 'cmake_minimum_required(VERSION 3.13)' 'project(app C)' "find_package(hilock $major.0 REQUIRED)" \
    'add_executable(app prog.c)' 'target_link_libraries(app PRIVATE hilock::hilock)' >cm/CMakeLists.txt
  { cmake -S cm -B cm/b && cmake --build cm/b; } >cmake.log 2>&1 || { cat cmake.log; fail "cmake"; }
  [ "$(cm/b/app)" = "$version" ] || fail "the CMake-built app"
fi

step "hilock --help, hilock --version, the man page"
hilock --help | grep -q 'hilock' || fail "hilock --help"
[ "$(hilock --version)" = "hilock $version" ] || fail "hilock --version"
dpkg -c "$deb_dir/hilock-tools_${version}_$(dpkg --print-architecture).deb" | grep -q 'usr/share/man/man1/hilock.1.gz' ||
  fail "hilock-tools has no man page"
# Slim images drop /usr/share/man when unpacking (dpkg path-exclude); ask man only if it is there.
if [ -e /usr/share/man/man1/hilock.1.gz ]; then
  [ "$(man -w hilock)" = /usr/share/man/man1/hilock.1.gz ] || fail "man -w hilock"
else
  step "(man pages are excluded by dpkg on this machine: checked in the .deb only)"
fi
cd "$src"
step "ok"
