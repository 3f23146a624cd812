#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# run-tests.sh BUILDDIR BIN... -- run every Criterion suite; exit non-zero if any test fails.
# VALGRIND=1 runs each suite under valgrind (leaks and errors fail it).
# Skipped tests (HLT_NEEDS: n/a on this server) are counted apart, never as passed.
# REPORT_DIR=dir keeps, per suite, its Criterion JSON report (NAME.json: counts, and each
# skipped test's reason), its output (NAME.out), exit code (NAME.rc) and seconds (NAME.time),
# for scripts/test-servers.sh. SUITE_TIMEOUT=s ends a suite (and its servers) after s seconds.
# SUITES_AT_ONCE=n runs n suites at a time (each with Criterion's --jobs=2; default 1): the
# suites wait on servers, sleeps and timeouts far more than they use the CPU. The results are
# printed in the order given, once all have run. (valgrind: always one at a time.)
# SLOW_FIRST="test_a test_b" starts those suites first (the longest, so that no long suite
# starts last while the other worker has nothing left to run).
set -u
b=$1; shift
fail=0; passed=0; failed=0; skipped=0
rep=${REPORT_DIR:-}
at_once=${SUITES_AT_ONCE:-1}
# A job started with & ignores INT and QUIT (a non-interactive shell's rule), and so would the
# suites of a worker below, or of this script started so (the server matrix runs servers at
# once): they get their default actions back (env --default-signal, coreutils 9.0+), as when
# run from a terminal. (The command's tests send INT; hilock keeps an ignored one ignored.)
dfl=""
env --default-signal=INT true 2>/dev/null && dfl="env --default-signal=INT,QUIT"
[ "${VALGRIND:-0}" = 1 ] && at_once=1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hilock-run.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# One suite: its output, exit code, JSON report and seconds in $tmp/NAME.*.
run_one() { # BIN
  t=$1
  name=$(basename "$t")
  json=$tmp/$name.json; rm -f "$json"
  t0=$(date +%s)
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
          --log-file="$vg/%p.log" "$t" --jobs=2 --json="$json" 2>&1); rc=$?
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
    # (timeout signals the suite's whole process group: its workers and their servers too)
    out=$(${SUITE_TIMEOUT:+timeout -k 10 "$SUITE_TIMEOUT"} $dfl "$t" --jobs=2 --json="$json" 2>&1); rc=$?
    [ $rc -eq 124 ] && out="$out
timeout: $name ran longer than ${SUITE_TIMEOUT:-} s"
  fi
  printf '%s\n' "$out" > "$tmp/$name.out"
  echo $(($(date +%s) - t0)) > "$tmp/$name.time"
  echo $rc > "$tmp/$name.rc"   # (last: its presence says the suite is over)
}

# A worker: the next suite nobody has taken (mkdir is atomic), until none is left.
worker() {
  for t in "$@"; do
    mkdir "$tmp/$(basename "$t").taken" 2>/dev/null || continue
    run_one "$t"
  done
}

# Count and print one suite's results (its files in $tmp).
report() { # BIN
  t=$1
  name=$(basename "$t")
  json=$tmp/$name.json
  out=$(cat "$tmp/$name.out" 2>/dev/null)
  rc=$(cat "$tmp/$name.rc" 2>/dev/null || echo 1)
  # A sanitizer report from a worker after its test passed (LeakSanitizer runs at exit) does
  # not reach Criterion's verdict either: its text in the output fails the suite.
  if printf '%s\n' "$out" | grep -qE 'ERROR: (Leak|Address)Sanitizer|runtime error:'; then rc=98; fi
  line=$(printf '%s\n' "$out" | grep -E '^\[====\] Synthesis' | tail -1)
  p=$(printf '%s' "$line" | sed -n 's/.*Passing: \([0-9]*\).*/\1/p')
  f=$(printf '%s' "$line" | sed -n 's/.*Failing: \([0-9]*\).*/\1/p')
  # (Criterion's Failing already counts the crashed tests among the failed)
  s=$(sed -n 's/^  "skipped": \([0-9]*\),*$/\1/p' "$json" 2>/dev/null | head -1)
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0})); skipped=$((skipped + ${s:-0}))
  [ "${s:-0}" -gt 0 ] && line="$line| Skipped: $s (n/a) "
  if [ -n "$rep" ]; then
    [ -f "$json" ] && cp "$json" "$rep/$name.json"
    printf '%s\n' "$out" > "$rep/$name.out"
    echo "$rc" > "$rep/$name.rc"
    cp "$tmp/$name.time" "$rep/$name.time" 2>/dev/null
  fi
  if [ "$rc" -ne 0 ] || [ -z "$line" ]; then
    fail=1
    printf '%s\n' "$out"
    echo "FAIL $name (exit $rc)"
  else
    echo "ok   $name: $line"
  fi
}

if [ "$at_once" -le 1 ]; then   # (each suite's lines as soon as it has run)
  for t in "$@"; do
    run_one "$t"
    report "$t"
  done
else
  order=""   # the suites named in SLOW_FIRST, then the rest, as given
  for t in "$@"; do
    case " ${SLOW_FIRST:-} " in *" $(basename "$t") "*) order="$order $t" ;; esac
  done
  for t in "$@"; do
    case " $order " in *" $t "*) ;; *) order="$order $t" ;; esac
  done
  i=0
  while [ $i -lt "$at_once" ]; do
    # shellcheck disable=SC2086 # (paths without blanks: build dirs and suite names)
    worker $order &
    i=$((i + 1))
  done
  wait
  for t in "$@"; do report "$t"; done
fi

if [ $skipped -gt 0 ]; then echo "$passed passed, $failed failed, $skipped skipped (n/a)"
else echo "$passed passed, $failed failed"; fi
exit $fail
