#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# test-servers.sh BUILDDIR -- every suite against every Redis/Valkey server built from
# SERVERS_SRC (scripts/servers.sh), each server's directory first on PATH (the fixtures start
# redis-server, redis-sentinel and redis-cli from PATH); prints the matrix (suite x server:
# passed/run, the tests n/a there, the suites n/a there with the reason) to stdout and to
# MATRIX_OUT (default BUILDDIR/servers-matrix.txt); exits non-zero if any cell that should run
# fails (a failed, crashed or timed-out suite). Options (environment):
#   SERVERS=redis-2.8.24,valkey-8.0.1    a subset of the servers (default: every tarball)
#   SUITES=lock,legacy                   a subset of the suites (test_lock or lock)
#   CORE_BELOW=5.0 CORE_SUITES=lock,...  servers older than CORE_BELOW run only CORE_SUITES
#                                        (their other cells say "-", not run)
#   EDGE_SUITES=cli,cluster_scale        these suites run only on the edge servers: the first
#                                        of the list and the newest of each family (redis-*,
#                                        valkey-*); their other cells say "-", not run
#   PARALLEL=2                           run that many servers at once, newest first (default 1)
#   SUITE_TIMEOUT=s                      a suite running longer fails (default 900)
#   REPORT_ONLY=1                        print the matrix of the last runs' reports, run nothing
# The binaries must be built (make test-servers does it). Reports: BUILDDIR/servers/<name>/.
#
# test-servers.sh --torture BUILDDIR -- torture's single and legacy modes (TORTURE_MODES)
# against the oldest and the newest server (by version; TORTURE_SERVERS=a,b picks others),
# DURATION, SEED and WORKERS as for make torture; logs in BUILDDIR/torture/servers/<name>/.
set -u
torture=0
[ "${1:-}" = --torture ] && { torture=1; shift; }
b=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 2
out=${MATRIX_OUT:-$b/servers-matrix.txt}
export SUITE_TIMEOUT=${SUITE_TIMEOUT:-900}

# Suites that start no server (besides tests/unit/, which the list below never sees) or test
# packaging (install, ABI, README, C++): make test runs them; the server does not change them.
NO_SERVER="test_transport test_install test_abi test_readme test_cxx"

# (oldest first: Redis, then Valkey)
list=$(bash scripts/servers.sh build | sort -t- -k1,1 -k2,2V)
[ -n "$list" ] || exit 2   # (servers.sh said why)
# "7.2.6" -> 70206
vnum() { echo "$1" | awk -F. '{ printf "%d\n", $1 * 10000 + $2 * 100 + $3 }'; }
# The version of the redis-server in dir: "Redis 7.2.6" / "Valkey 8.0.1" (Valkey 7.2 says
# only "Server v=7.2.7").
server_name() {
  "$1/redis-server" --version | sed -n -e 's/^Server v=\([0-9.]*\).*/Valkey \1/p' \
    -e 's/^\([A-Za-z]*\) server v=\([0-9.]*\).*/\1 \2/p'
}

if [ $torture = 1 ]; then
  sel=${TORTURE_SERVERS:-}
  if [ -z "$sel" ]; then   # the oldest and the newest version
    sel=$(printf '%s\n' "$list" | while read -r n d; do v=$(server_name "$d"); echo "$(vnum "${v#* }") $n"; done |
          sort -n | sed -n '1p;$p' | cut -d' ' -f2 | tr '\n' ',')
  fi
  SERVERS=$sel
fi

if [ -n "${SERVERS:-}" ]; then
  want=$(printf '%s' "$SERVERS" | tr ',' ' ')
  for s in $want; do
    printf '%s\n' "$list" | grep -q "^$s " || { echo "test-servers: no server $s (have: $(printf '%s\n' "$list" | cut -d' ' -f1 | tr '\n' ' '))" >&2; exit 2; }
  done
  list=$(printf '%s\n' "$list" | while read -r n d; do
    case " $want " in *" $n "*) echo "$n $d" ;; esac; done)
fi

if [ $torture = 1 ]; then
  fail=0
  for n in $(printf '%s\n' "$list" | cut -d' ' -f1); do
    d=$(printf '%s\n' "$list" | awk -v n="$n" '$1 == n { print $2 }')
    echo "== torture on $n ($(server_name "$d"))"
    mkdir -p "$b/torture/servers/$n"
    PATH="$d:$PATH" "$b/torture/torture" --dir="$b/torture/servers/$n" --duration="${DURATION:-6}" \
      --seed="${SEED:-0}" --workers="${WORKERS:-8}" --modes="${TORTURE_MODES:-single,legacy}" || fail=1
  done
  exit $fail
fi

if [ -n "${SUITES:-}" ]; then
  suites=$(printf '%s' "$SUITES" | tr ',' '\n' | sed 's/^test_//; s/^/test_/')
else
  suites=$(ls tests/test_*.c | sed 's|tests/\(.*\)\.c|\1|')
  for n in $NO_SERVER; do suites=$(printf '%s\n' "$suites" | grep -vx "$n"); done
fi
for s in $suites; do
  [ -x "$b/tests/$s" ] || { echo "test-servers: $b/tests/$s is not built (make test-servers builds it)" >&2; exit 2; }
done
core=$(printf '%s' "${CORE_SUITES:-}" | tr ',' '\n' | sed 's/^test_//; s/^/test_/')
edge=$(printf '%s' "${EDGE_SUITES:-}" | tr ',' '\n' | sed '/^$/d; s/^test_//; s/^/test_/')
# the edge servers: the list's first, and the last (newest) of each family
edges=" $(printf '%s\n' "$list" | awk 'NF { if (!first) first = $1; f = $1; sub(/-.*/, "", f); last[f] = $1 }
                                       END { printf "%s", first; for (f in last) printf " %s", last[f] }') "

# Why a suite cannot run on a server at all (whole-suite n/a), or nothing. Features a
# server lacks inside a suite are the tests' own business (HLT_NEEDS: n/a per test).
suite_na() { # SUITE VERSION-NUMBER
  case "$1" in
    test_tls*) [ "$2" -lt 60000 ] && echo "no TLS before Redis 6.0" ;;
    test_cluster|test_async_cluster)
      if [ "$2" -lt 30000 ]; then echo "no Redis Cluster before 3.0"
      elif [ "$2" -lt 40000 ]; then echo "Cluster needs replication ids (PSYNC2, Redis 4.0+)"; fi ;;
    test_cluster_tools) [ "$2" -lt 30000 ] && echo "no Redis Cluster before 3.0" ;;   # (3.2: its tests that lock say n/a)
    test_sentinel) [ "$2" -lt 40000 ] && echo "Sentinel needs replication ids (PSYNC2, Redis 4.0+)" ;;
    test_fair) [ "$2" -lt 30200 ] && echo "fair locks need Redis 3.2+ (redis.replicate_commands; refused before: test_servers)" ;;
  esac
  return 0
}

# One server: every suite, each suite's Criterion report in $b/servers/NAME/.
run_server() { # NAME DIR
  name=$1 dir=$2
  rdir=$b/servers/$name
  rm -rf "$rdir"; mkdir -p "$rdir"
  v=$(server_name "$dir"); vn=$(vnum "${v#* }")
  echo "$v" > "$rdir/server"
  echo "== $name ($v)"
  run=
  for s in $suites; do
    r=$(suite_na "$s" "$vn")
    if [ -n "$r" ]; then echo "$r" > "$rdir/$s.na"; continue; fi
    if [ -n "${CORE_BELOW:-}" ] && [ "$vn" -lt "$(vnum "$CORE_BELOW")" ] &&
       ! printf '%s\n' "$core" | grep -qx "$s"; then
      : > "$rdir/$s.notrun"; continue
    fi
    if printf '%s\n' "$edge" | grep -qx "$s" && [ "${edges#* $name }" = "$edges" ]; then
      : > "$rdir/$s.notrun"; continue
    fi
    run="$run $b/tests/$s"
  done
  # shellcheck disable=SC2086
  [ -z "$run" ] || PATH="$dir:$PATH" REPORT_DIR="$rdir" sh scripts/run-tests.sh "$b" $run \
    > "$rdir/run.log" 2>&1
  grep -E '^(ok  |FAIL) ' "$rdir/run.log" | sed "s/^/   $name /"
}

t0=$(date +%s)
# REPORT_ONLY=1: no run, the matrix of the reports already in $b/servers/
# PARALLEL=n: a pool of n lanes, each server taking the next free one (a fifo holds a token per
# free lane), the newest first: they run the most suites, and the old servers' short runs fill
# the ends. (Batches of n, each waiting for its slowest, left a lane idle 100 s per CI run.)
if [ -z "${REPORT_ONLY:-}" ] && [ "${PARALLEL:-1}" -gt 1 ]; then
  fifo=$(mktemp -u "${TMPDIR:-/tmp}/hilock-lanes.XXXXXX")
  mkfifo "$fifo" || exit 2
  exec 3<>"$fifo"
  rm -f "$fifo"
  i=0
  while [ $i -lt "$PARALLEL" ]; do echo >&3; i=$((i + 1)); done
  echo "$list" | while read -r name dir; do
      [ -n "$name" ] || continue
      echo "$(vnum "$(server_name "$dir" | sed 's/.* //')") $name $dir"
    done | sort -rn | {
    while read -r _ name dir; do
      read -r _ <&3
      { run_server "$name" "$dir" 3>&-; echo >&3; } &
    done
    wait
  }
  exec 3>&-
elif [ -z "${REPORT_ONLY:-}" ]; then
  echo "$list" | while read -r name dir; do
    [ -n "$name" ] && run_server "$name" "$dir"
  done
fi

# ---- the matrix ----
names=$(echo "$list" | cut -d' ' -f1)
# JSON counts of one report (the first "passed"/"failed"/"skipped": the whole run's)
count() { sed -n "s/^  \"$2\": \\([0-9]*\\),*\$/\\1/p" "$1" | head -1; }
cell() { # NAME SUITE -> cell text: n/a, -, CRASH(rc), TIMEOUT or [!]passed/run[+Nna]
  d=$b/servers/$1
  if [ -f "$d/$2.na" ]; then echo "n/a"; return; fi
  if [ -f "$d/$2.notrun" ]; then echo "-"; return; fi
  rc=$(cat "$d/$2.rc" 2>/dev/null || echo missing)
  if [ ! -f "$d/$2.json" ]; then
    case $rc in 124) echo "!TIMEOUT" ;; *) echo "CRASH($rc)" ;; esac; return
  fi
  p=$(count "$d/$2.json" passed); f=$(count "$d/$2.json" failed); k=$(count "$d/$2.json" skipped)
  c="$p/$((p + f))"
  [ "${k:-0}" -gt 0 ] && c="$c+${k}na"
  [ "$rc" = 0 ] && [ "$f" = 0 ] || c="!$c"
  [ "$rc" = 124 ] && c="!TIMEOUT"
  echo "$c"
}

# Criterion JSON report -> "suite::test<TAB>STATUS<TAB>first message" for each test not passed
not_passed() {
  awk '/^      "name":/ { gsub(/.*"name": "|",?$/, ""); suite = $0 }
       /^          "name":/ { gsub(/.*"name": "|",?$/, ""); test = $0; st = "" }
       /"status": "(SKIPPED|FAILED|ERRORED)"/ { gsub(/.*"status": "|",?$/, ""); st = $0; want = 1; next }
       want && /"messages"/ { m = $0; sub(/.*"messages": \[ *"?/, "", m); sub(/"?\]?,? *$/, "", m)
         if (m == "") { getline m; gsub(/^ *"|",? *$/, "", m) }
         print suite "::" test "\t" st "\t" substr(m, 1, 160); want = 0 }' "$1"
}

cells=$b/servers/cells
for s in $suites; do for n in $names; do echo "$s $n $(cell "$n" "$s")"; done; done > "$cells"
cellof() { awk -v s="$1" -v n="$2" '$1 == s && $2 == n { print $3 }' "$cells"; }
{
  echo "hilock server matrix ($(date -u +%Y-%m-%dT%H:%MZ), $(($(date +%s) - t0)) s)"
  echo "cell: passed/run; +Nna: N tests n/a on that server (reasons below); n/a: the suite cannot"
  echo "run there (reason below); -: not run (core set only: CORE_BELOW, EDGE_SUITES); !: FAILED"
  echo
  printf '%-12s' suite; for n in $names; do printf ' %13s' "$n"; done; echo
  for s in $suites; do
    printf '%-12s' "${s#test_}"
    for n in $names; do printf ' %13s' "$(cellof "$s" "$n")"; done; echo
  done
  echo
  printf '%-12s' seconds; for n in $names; do printf ' %13s' "$n"; done; echo
  for s in $suites; do
    printf '%-12s' "${s#test_}"
    for n in $names; do printf ' %13s' "$(cat "$b/servers/$n/$s.time" 2>/dev/null || echo -)"; done; echo
  done
  printf '%-12s' total
  for n in $names; do printf ' %13s' "$(cat "$b"/servers/"$n"/*.time 2>/dev/null | awk '{ t += $1 } END { print t + 0 }')"; done; echo
  echo
  echo "Suites n/a:"
  for s in $suites; do
    for n in $names; do [ -f "$b/servers/$n/$s.na" ] && echo "  ${s#test_} on $n: $(cat "$b/servers/$n/$s.na")"; done
  done | awk -F' on |: ' '{ k = $1 ": " $3; if (!(k in seen)) order[++m] = k; seen[k] = seen[k] (seen[k] ? ", " : "") $2 }
                          END { for (i = 1; i <= m; i++) { split(order[i], a, ": "); print a[1] " on " seen[order[i]] ": " a[2] } }'
  echo
  # n/a first, failures last: a log read from its end (CI shows its tail) starts with them
  for n in $names; do
    for s in $suites; do
      d=$b/servers/$n
      if [ -f "$d/$s.json" ]; then not_passed "$d/$s.json" | sed "s/^/  $n /"
      elif [ -f "$d/$s.rc" ]; then echo "  $n ${s#test_}: exit $(cat "$d/$s.rc"), no report (see $d/$s.out)	FAILED"; fi
    done
  done > "$out.np"
  echo "Tests n/a (suite::test SKIPPED reason), per server:"
  grep -v -E '	(FAILED|ERRORED)' "$out.np" || true
  echo
  echo "Tests failed or crashed (suite::test STATUS message), per server:"
  grep -E '	(FAILED|ERRORED)' "$out.np" || echo "  none"
  rm -f "$out.np"
} > "$out.tmp"
mv "$out.tmp" "$out"
cat "$out"
echo "(also in $out; each suite's output in $b/servers/<server>/<suite>.out)"
bad=$(awk '$3 ~ /^(!|CRASH)/ { printf " %s@%s", substr($1, 6), $2 }' "$cells")
if [ -n "$bad" ]; then
  # what each failed suite printed about its failures (its whole output: build/servers/...)
  for c in $bad; do
    o=$b/servers/${c#*@}/test_${c%@*}.out
    [ -f "$o" ] || continue
    echo "--- $c: $o (failures, last 25 lines)"
    grep -E '^\[(----|FAIL|ERR )\]|Assertion|CRASH|signal|Timed out|timed out' "$o" | tail -25
  done
  echo "test-servers: FAILED:$bad"
  exit 1
fi
