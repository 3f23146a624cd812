#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# test-cross.sh ARCH [BUILDDIR] -- cross-build the library, the suites and the command for ARCH
# (arm64 or i386) with Debian's cross compilers, and run the suites under qemu-user against the
# native redis-server (the fixtures start it from PATH, as in `make test`). docs/portability.md.
#   SUITES=lock,legacy   only these suites (tests/test_NAME.c, tests/unit/test_NAME.c); default: all
#   SUITE_TIMEOUT=s      as for scripts/run-tests.sh (default here 600: a suite stalled under
#                        emulation fails instead of holding the run)
# The target's libraries (hiredis, OpenSSL, Criterion, libuv, libevent and what they need) are
# not installed: apt resolves them in a private state of its own (no dpkg --add-architecture,
# nothing installed for the target) and they are unpacked with dpkg -x into a sysroot cached
# at ${XDG_CACHE_HOME:-~/.cache}/hilock/sysroot-ARCH (kept while its package list is the same).
# The programs link with --sysroot; they run through binfmt_misc (Criterion re-executes itself
# for every test, so `qemu-ARCH prog` alone is not enough), qemu finding the target's libraries
# through QEMU_LD_PREFIX. Registering the handler needs root, once per boot.
set -eu
arch=${1:?usage: test-cross.sh arm64|i386 [BUILDDIR]}
b=${2:-build-cross-$arch}
case $arch in
  arm64)
    gnu=aarch64-linux-gnu; multi=aarch64-linux-gnu; qemu=aarch64
    magic='\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
    mask='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff' ;;
  i386)
    gnu=i686-linux-gnu; multi=i386-linux-gnu; qemu=i386
    magic='\x7fELF\x01\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x03\x00'
    mask='\xff\xff\xff\xff\xff\xfe\xfe\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff' ;;
  *) echo "test-cross: ARCH is arm64 or i386, not $arch" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
sh "$here/deps.sh" test "gcc-$gnu" "g++-$gnu" qemu-user

# ---- the sysroot: the target's -dev packages and everything they depend on ----
pkgs="libc6-dev libstdc++-12-dev libhiredis-dev libssl-dev libcriterion-dev libuv1-dev libevent-dev"
cache=${XDG_CACHE_HOME:-$HOME/.cache}/hilock
sr=$cache/sysroot-$arch
if [ "$(cat "$sr/.packages" 2>/dev/null)" != "$pkgs" ]; then
  echo "test-cross: building the $arch sysroot in $sr"
  st=$cache/apt-$arch
  mkdir -p "$st/lists/partial" "$st/archives/partial"
  : > "$st/status"   # nothing installed: apt fetches the whole closure
  set -- -o "APT::Architecture=$arch" -o "APT::Architectures::=$arch" -o "Dir::State=$st" \
    -o "Dir::State::Lists=$st/lists" -o "Dir::State::status=$st/status" -o "Dir::Cache=$st" \
    -o "Dir::Cache::archives=$st/archives" -o APT::Sandbox::User=root
  # (as in deps.sh: one failed index, say a mirror mid-sync, is a warning; the install decides)
  apt-get "$@" update -qq || echo "test-cross: warning: apt-get update failed (see above)" >&2
  rm -f "$st"/archives/*.deb
  # shellcheck disable=SC2086
  apt-get "$@" install -d -y -qq --no-install-recommends $pkgs >/dev/null
  rm -rf "$sr.new" && mkdir -p "$sr.new"
  for deb in "$st"/archives/*.deb; do dpkg -x "$deb" "$sr.new"; done
  printf '%s\n' "$pkgs" > "$sr.new/.packages"
  rm -rf "$sr" && mv "$sr.new" "$sr"
fi

# ---- the binfmt_misc handler: qemu-ARCH runs the target's ELF files ----
bm=/proc/sys/fs/binfmt_misc
[ -e $bm/register ] || mount -t binfmt_misc binfmt_misc $bm 2>/dev/null || true
if [ ! -e "$bm/qemu-$qemu" ]; then
  printf '%s' ":qemu-$qemu:M::$magic:$mask:$(command -v "qemu-$qemu"):" > $bm/register 2>/dev/null ||
    { echo "test-cross: cannot register qemu-$qemu in $bm (root, or qemu-user-binfmt, needed)" >&2; exit 1; }
fi
grep -qx enabled "$bm/qemu-$qemu" && grep -qx enabled $bm/status ||
  { echo "test-cross: the binfmt_misc handler qemu-$qemu is disabled" >&2; exit 1; }

# ---- build: the suites asked for, and every program a suite runs ----
if [ -n "${SUITES:-}" ]; then
  suites=$(printf '%s\n' "$SUITES" | tr ',' ' ')
else
  suites=$(cd "$here/.." && ls tests/test_*.c tests/unit/test_*.c | sed 's|.*/test_\(.*\)\.c|\1|')
fi
bins=""
for s in $suites; do   # (a suite in tests/unit/ is built there)
  if [ -f "$here/../tests/test_$s.c" ]; then bins="$bins $b/tests/test_$s"
  elif [ -f "$here/../tests/unit/test_$s.c" ]; then bins="$bins $b/tests/unit/test_$s"
  else echo "test-cross: no suite tests/test_$s.c or tests/unit/test_$s.c" >&2; exit 2; fi
done
extras="$b/hilock $b/tests/abi/v0_app $b/tests/abi/cxx_app $b/tests/readme_example $b/tests/readme_async"
extras="$extras $b/tests/cxx_lock"
t0=$(date +%s)
# (pkg-config reads the sysroot for the build only: test_install runs a native make install)
# shellcheck disable=SC2086
PKG_CONFIG_LIBDIR="$sr/usr/lib/$multi/pkgconfig:$sr/usr/share/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$sr" make -C "$here/.." --no-print-directory -j"${JOBS:-2}" B="$b" CC="$gnu-gcc --sysroot=$sr" \
  CXX="$gnu-g++ --sysroot=$sr" lib $extras $bins
t1=$(date +%s)
echo "test-cross: $arch built in $((t1 - t0)) s"

# ---- run (each suite's report and seconds in $b/report, as scripts/run-tests.sh keeps them) ----
export QEMU_LD_PREFIX="$sr"
export SUITE_TIMEOUT=${SUITE_TIMEOUT:-600}
cd "$here/.."
rep=$b/report
rm -rf "$rep" && mkdir -p "$rep"
rc=0
# shellcheck disable=SC2086
REPORT_DIR=$rep sh scripts/run-tests.sh "$b" $bins || rc=$?
printf 'test-cross: %s: seconds per suite:' "$arch"
for s in $suites; do printf ' %s %s' "$s" "$(cat "$rep/test_$s.time" 2>/dev/null)"; done
echo
echo "test-cross: $arch: the suites ran in $(($(date +%s) - t1)) s under qemu-$qemu"
exit $rc
