#!/bin/sh
# install-check.sh SRCDIR WORKDIR URL -- what a user of an installed hilock sees:
# `make install PREFIX=WORKDIR/prefix` (built in its own B= dir, so no build tree collides),
# then a program outside the repo built only from `pkg-config hilock` (shared, then static)
# takes and releases a lock on URL. Also: only the public headers are installed, the shared
# library exports only hilock_* symbols, and `make uninstall` removes what install put there.
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
    hilock.h|hilock_legacy.h|hilock_inspect.h) ;;
    *) fail "installed a non-public header: $h" ;;
  esac
done
leaked=$(nm -D --defined-only "$prefix/lib/libhilock.so" | awk '$2 ~ /^[TDBR]$/ && $3 !~ /^hilock_/ {print $3}')
[ -z "$leaked" ] || fail "libhilock.so exports internal symbols: $leaked"

mkdir -p "$work/app"
cat >"$work/app/prog.c" <<'EOF'
#include <hilock.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    hilock_client *c;
    hilock *l;
    hilock_status st;
    if (argc != 2 || hilock_client_open(argv[1], &c) != HILOCK_OK) return 2;
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
cd "$work/app"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"

step "shared: cc prog.c \$(pkg-config --cflags --libs hilock)"
cc -std=c99 -Wall -Wextra -Werror -pedantic prog.c -o prog-shared $(pkg-config --cflags --libs hilock)
LD_LIBRARY_PATH="$prefix/lib" ./prog-shared "$url" || fail "prog-shared"

step "static: libhilock.a with \$(pkg-config --static --libs hilock)"
cc -std=c99 -Wall -Wextra -Werror prog.c -o prog-static $(pkg-config --cflags hilock) \
  $(pkg-config --static --libs hilock | sed 's/-lhilock\b/-l:libhilock.a/')
if readelf -d prog-static | grep -q 'libhilock'; then fail "prog-static needs libhilock.so"; fi
./prog-static "$url" || fail "prog-static"

if command -v c++ >/dev/null 2>&1; then
  step "the header compiles as C++"
  c++ -x c++ -Wall -Wextra -Werror -c prog.c -o prog-cxx.o $(pkg-config --cflags hilock)
fi

step "make uninstall"
cd "$src"
make -s B="$work/build" PREFIX="$prefix" uninstall >>"$work/make.log" 2>&1 || { cat "$work/make.log"; fail "make uninstall"; }
left=$(find "$prefix" -type f -o -type l)
[ -z "$left" ] || fail "make uninstall left: $left"
step "ok"
