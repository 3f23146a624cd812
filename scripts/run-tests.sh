#!/bin/sh
# run-tests.sh BUILDDIR BIN... -- run every Criterion suite; exit non-zero if any test fails.
# VALGRIND=1 runs each suite under valgrind (leaks and errors fail it).
set -u
b=$1; shift
fail=0; passed=0; failed=0
for t in "$@"; do
  name=$(basename "$t")
  if [ "${VALGRIND:-0}" = 1 ]; then
    # Criterion runs every test in a worker it re-executes ("boxfort-worker"), so valgrind
    # must follow exec (with --trace-children=no it checks only the runner, i.e. nothing);
    # the shell, and the redis-server processes the fixture starts through it, are skipped.
    # A worker's valgrind exit code does not reach the runner, so each process reports to
    # its own log and any non-empty log fails the suite.
    vg=$(mktemp -d "${TMPDIR:-/tmp}/hilock-vg.XXXXXX")
    out=$(valgrind --quiet --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect \
          --errors-for-leak-kinds=definite,indirect --suppressions="$(cd "$(dirname "$0")" && pwd)/valgrind.supp" \
          --trace-children=yes \
          --trace-children-skip='*/sh,*/bash,*/dash,*/redis-server,*/redis-sentinel' \
          --log-file="$vg/%p.log" "$t" --jobs=2 2>&1); rc=$?
    # A process the fixtures fork that ends with _exit while valgrind's error reporting is
    # off for it (the cluster fixture's watchdogs) leaves only this three-line notice: not a
    # finding. Any other line in a log fails the suite.
    for log in "$vg"/*.log; do
      rest=$(grep -vE '^==[0-9]+== WARNING: (exiting thread has error reporting disabled\.|possibly as a result of some mistake in the use|of the VALGRIND_DISABLE_ERROR_REPORTING macros\.)$' "$log")
      [ -n "$rest" ] || continue
      rc=99
      out="$out
valgrind: $rest"
    done
    rm -rf "$vg"
  else
    out=$("$t" --jobs=2 2>&1); rc=$?
  fi
  # A sanitizer report from a worker after its test passed (LeakSanitizer runs at exit) does
  # not reach Criterion's verdict either: its text in the output fails the suite.
  if printf '%s\n' "$out" | grep -qE 'ERROR: (Leak|Address)Sanitizer|runtime error:'; then rc=98; fi
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
