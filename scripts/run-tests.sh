#!/bin/sh
# run-tests.sh BUILDDIR BIN... -- run every Criterion suite; exit non-zero if any test fails.
# VALGRIND=1 runs each suite under valgrind (leaks and errors fail it).
set -u
b=$1; shift
fail=0; passed=0; failed=0
for t in "$@"; do
  name=$(basename "$t")
  if [ "${VALGRIND:-0}" = 1 ]; then
    out=$(valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
          --trace-children=no "$t" --jobs=1 --no-early-exit 2>&1); rc=$?
  else
    out=$("$t" --jobs=2 2>&1); rc=$?
  fi
  line=$(printf '%s\n' "$out" | grep -E '^\[====\] Synthesis' | tail -1)
  p=$(printf '%s' "$line" | sed -n 's/.*Passing: \([0-9]*\).*/\1/p')
  f=$(printf '%s' "$line" | sed -n 's/.*Failing: \([0-9]*\).*/\1/p')
  c=$(printf '%s' "$line" | sed -n 's/.*Crashing: \([0-9]*\).*/\1/p')
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0} + ${c:-0}))
  if [ $rc -ne 0 ] || [ -z "$line" ]; then
    fail=1
    printf '%s\n' "$out"
    echo "FAIL $name (exit $rc)"
  else
    echo "ok   $name: $line"
  fi
done
echo "$passed passed, $failed failed"
exit $fail
