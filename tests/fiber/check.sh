#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The fiber switch (src/async/fiber.c) in each of its builds, run by `make test` (a stamp, as the
# header check) and by `make test-cross` (CC a cross compiler, LDFLAGS=-static, RUN its qemu:
# CC=aarch64-linux-gnu-gcc LDFLAGS=-static RUN=qemu-aarch64 sh tests/fiber/check.sh DIR). Each build runs
# tests/fiber/fiber_check.c (round trips, callee-saved registers, the rounding mode kept per side).
#   - as the library is built (CC, CFLAGS = EXTRA_CFLAGS, LDFLAGS = EXTRA_LDFLAGS);
#   - ucontext forced (the fallback of other machines), and no switch at all (the build says so);
#   - x86-64 with -fcf-protection=full and =branch: what the object's GNU property note claims
#     (readelf -n) must be true of its code: SHSTK with the hand switch (which moves to another
#     stack by a ret the shadow stack never saw) only if the object also has glibc's
#     swapcontext and the check that picks it when a shadow stack is on (rdssp), that path
#     run too (as if one were on); IBT with the hand switch only if the switch starts with its
#     landing pad (endbr64);
#   - x86-64's x32 ABI, where the compiler can build for it: never the 64-bit hand switch;
#   - arm64 with -mbranch-protection=standard: a BTI note with the hand switch's landing pad.
# Usage: tests/fiber/check.sh OUT_DIR
set -eu
out=${1:?usage: check.sh OUT_DIR}
cc=${CC:-cc}
run=${RUN:-}
flags="-std=c99 -Wall -Wextra -Wstrict-prototypes -Wwrite-strings -Werror -O2 -g -Isrc/async -Isrc/platform ${CFLAGS:-}"
mkdir -p "$out"
machine=$($cc -dumpmachine)
# binutils for the target (a cross build's aarch64-linux-gnu-nm), else the host's
tool() { if command -v "$machine-$1" >/dev/null; then echo "$machine-$1"; else echo "$1"; fi; }
nm=$(tool nm)
objdump=$(tool objdump)
readelf=$(tool readelf)

fail() { echo "fiber-check: $*" >&2; exit 1; }

# NAME FLAGS...: fiber.o and the check program built with FLAGS, and run
build_run() {
  name=$1; shift
  $cc $flags "$@" -c src/async/fiber.c -o "$out/fiber-$name.o"
  # (its stacks: the platform layer's, as the library links it)
  $cc $flags "$@" -c src/platform/linux.c -o "$out/plat-$name.o"
  $cc $flags "$@" -c src/platform/common.c -o "$out/plat-common-$name.o"
  $cc $flags "$@" -o "$out/fiber_check-$name" tests/fiber/fiber_check.c "$out/fiber-$name.o" \
    "$out/plat-$name.o" "$out/plat-common-$name.o" ${LDFLAGS:-} -lpthread -lm
  $run "$out/fiber_check-$name" >"$out/fiber_check-$name.log" 2>&1 ||
    { cat "$out/fiber_check-$name.log" >&2; fail "$name: tests/fiber/fiber_check.c failed (above)"; }
}

has_switch() { $nm "$out/fiber-$1.o" | grep -q ' hl_ctx_swap$'; }

# NAME: the x86 feature note of fiber-NAME.o tells the truth about its code
note_true() {
  note=$($readelf -n "$out/fiber-$1.o" | sed -n 's/.*\(x86\|AArch64\) feature: *//p')
  case "$note" in *SHSTK*)
    if has_switch "$1"; then
      $nm "$out/fiber-$1.o" | grep -q ' U swapcontext$' && $objdump -d "$out/fiber-$1.o" | grep -q rdssp ||
        fail "$1: the note claims SHSTK ($note) but the hand switch is in the object, unguarded"
    fi;;
  esac
  case "$note" in *IBT*)
    if has_switch "$1"; then
      $objdump -d "$out/fiber-$1.o" | grep -A1 '<hl_ctx_swap>:' | grep -q endbr64 ||
        fail "$1: the note claims IBT ($note) but hl_ctx_swap does not start with endbr64"
    fi;;
  esac
  echo "$note"
}

build_run default
build_run ucontext -DHL_FIBER_FORCE_UCONTEXT
build_run none -DHL_FIBER_FORCE_NONE -DEXPECT_NO_SWITCH

case $machine in
aarch64*)
  # BTI: the hand switch starts with its landing pad (bti c), as the note claims
  build_run bti -mbranch-protection=standard
  case $($readelf -n "$out/fiber-bti.o") in *BTI*)
    $objdump -d "$out/fiber-bti.o" | grep -A1 '<hl_ctx_swap>:' | grep -q 'bti' ||
      fail "bti: the note claims BTI but hl_ctx_swap does not start with bti c";;
  esac;;
x86_64*)
  note_true default >/dev/null
  build_run cet-full -fcf-protection=full
  case $(note_true cet-full) in *SHSTK*) ;; *) fail "cet-full: the note claims no SHSTK";; esac
  build_run cet-shstk-on -fcf-protection=full -DHL_FIBER_TEST_SHADOW_STACK
  build_run cet-branch -fcf-protection=branch
  has_switch cet-branch || fail "cet-branch: IBT alone should keep the hand switch"
  case $(note_true cet-branch) in *IBT*) ;; *) fail "cet-branch: the note claims no IBT";; esac
  # x32: compiled where its libc is installed (libc6-dev-x32); run where the kernel has it
  if echo 'int main(void) { return 0; }' | $cc -mx32 -x c - -o "$out/x32-probe" 2>/dev/null; then
    $cc $flags -mx32 -c src/async/fiber.c -o "$out/fiber-x32.o"
    ! has_switch x32 || fail "x32: the 64-bit hand switch is in the object"
    if "$out/x32-probe" 2>/dev/null; then build_run x32 -mx32; fi
  fi;;
esac
