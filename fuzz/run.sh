#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# run.sh BUILDDIR SECONDS TARGET... -- run each libFuzzer target for SECONDS on a scratch copy
# of its seed corpus (fuzz/corpus/<name>/ stays untouched: new inputs go to
# BUILDDIR/corpus/<name>/). Exits non-zero if any target finds a crash, leak or invariant
# failure; the input that did it is saved in BUILDDIR/artifacts/ (replay: BUILDDIR/fuzz/TARGET FILE).
# FUZZ_SEED=N: libFuzzer's -seed=N for every target (unset: a random seed each run).
set -u
b=$1; secs=$2; shift 2
fail=0
mkdir -p "$b/artifacts"
for t in "$@"; do
  name=${t#fuzz_}
  work="$b/corpus/$name"
  mkdir -p "$work"
  dict=""
  [ -f "fuzz/$name.dict" ] && dict="-dict=fuzz/$name.dict"
  log="$b/artifacts/$t.log"
  # -rss_limit_mb/-timeout bound each run; -max_len keeps inputs to the sizes that matter
  "$b/fuzz/$t" "$work" "fuzz/corpus/$name" $dict -max_total_time="$secs" -timeout=10 \
      -rss_limit_mb=1024 -max_len=4096 -print_final_stats=1 ${FUZZ_SEED:+-seed="$FUZZ_SEED"} \
      -artifact_prefix="$b/artifacts/$t-" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  if [ $rc -ne 0 ]; then
    fail=1
    tail -40 "$log"
    echo "FAIL $t (exit $rc): see $log and $b/artifacts/"
  else
    echo "ok   $t: ${execs:-?} runs in ${secs} s, ${cov:-cov ?}, corpus $(ls "$work" | wc -l) new + $(ls "fuzz/corpus/$name" | wc -l) seeds"
  fi
done
exit $fail
