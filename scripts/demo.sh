#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# demo.sh BUILD_DIR -- the hilock command at work against a throwaway redis-server (unix socket
# in a temp dir, no TCP port; always stopped and removed on exit): concurrent jobs taking turns
# on one key, -n and -w, a lock lost while its job runs, a semaphore (--limit 2, five jobs),
# and a lock over TLS (a second
# throwaway server on a 127.0.0.1 TLS port, with a CA and certificate the script makes).
set -eu
b=${1:-build}
hl=$b/hilock
[ -x "$hl" ] || { echo "demo: $hl is not built (make demo builds it)" >&2; exit 1; }
command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
  { echo "demo: needs redis-server and redis-cli (sh scripts/deps.sh demo)" >&2; exit 1; }

dir=$(mktemp -d /tmp/hilock-demo-XXXXXX)
sock=$dir/redis.sock
pids=""
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null || :; done
  [ -f "$dir/redis.pid" ] && kill "$(cat "$dir/redis.pid")" 2>/dev/null || :
  [ -f "$dir/tls.pid" ] && kill "$(cat "$dir/tls.pid")" 2>/dev/null || :
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# serve NAME ARGS...: a redis-server on the unix socket $dir/NAME.sock (plus ARGS); 0 once it answers
serve() {
  n=$1; shift
  redis-server --port 0 --unixsocket "$dir/$n.sock" --unixsocketperm 700 --save '' --appendonly no \
    --dir "$dir" --pidfile "$dir/$n.pid" --logfile "$dir/$n.log" --daemonize yes "$@"
  i=0
  until redis-cli -s "$dir/$n.sock" ping >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -lt 100 ] || return 1
    sleep 0.05
  done
}
serve redis || { echo "demo: redis-server did not start" >&2; exit 1; }
export HILOCK_SERVERS="unix://$sock"
T0=$(date +%s%N); export T0

# job NAME SECONDS: the work done under the lock, saying what it does with a timestamp
cat >"$dir/job" <<'EOF'
#!/bin/sh
ms() { echo $(( ($(date +%s%N) - T0) / 1000000 )); }
trap 'printf "%7s ms  %-6s got SIGTERM: stopping\n" "$(ms)" "$1"; kill $! 2>/dev/null; exit 143' TERM
printf '%7s ms  %-6s holds the lock (fence %s), works %s s\n' "$(ms)" "$1" "$HILOCK_FENCE" "$2"
sleep "$2" & wait $!
printf '%7s ms  %-6s done, releasing\n' "$(ms)" "$1"
EOF
chmod +x "$dir/job"
ms() { echo $(( ($(date +%s%N) - T0) / 1000000 )); }
say() { printf '%7s ms  %s\n' "$(ms)" "$*"; }

echo "hilock demo: throwaway redis-server at unix://$sock"
echo
echo "1. Four jobs start at once on the key demo:nightly; each holds it 0.4 s."
echo "   The lock goes to the next waiter as soon as it is released: compare 'releasing'"
echo "   with the next 'holds the lock' (a polling client would add ~50 ms each time)."
for n in 1 2 3 4; do
  "$hl" demo:nightly -- "$dir/job" "job-$n" 0.4 & eval "p$n=\$!"
  pids="$pids $!"
done
say "job-1..job-4 started, all waiting for demo:nightly"
codes=""
for n in 1 2 3 4; do
  eval "p=\$p$n"; rc=0; wait "$p" || rc=$?; codes="$codes job-$n:$rc"
done
say "exit statuses:$codes (each job's own)"
pids=""

echo
echo "2. -n does not wait, -w gives up after a while (-E sets the exit status)."
"$hl" demo:nightly -- "$dir/job" "job-5" 1 & p5=$!; pids="$pids $p5"
sleep 0.2
rc=0; "$hl" -n demo:nightly -- "$dir/job" "job-6" 1 || rc=$?
say "hilock -n demo:nightly ... -> exit $rc at once (busy)"
rc=0; "$hl" -w 0.3 -E 3 demo:nightly -- "$dir/job" "job-7" 1 || rc=$?
say "hilock -w 0.3 -E 3 demo:nightly ... -> exit $rc after 0.3 s"
wait "$p5" || :
pids=""

echo
echo "3. A lost lock: job-8 holds demo:report (ttl 1 s, renewed every ~0.33 s while it runs)."
echo "   Someone deletes the key from outside; at its next renewal hilock sees the loss,"
echo "   sends SIGTERM to the job and exits 75."
"$hl" -t 1 demo:report -- "$dir/job" "job-8" 10 & p8=$!; pids="$pids $p8"
sleep 1.2
say "redis-cli DEL demo:report -> $(redis-cli -s "$sock" DEL demo:report)"
rc=0; wait "$p8" || rc=$?
say "hilock for job-8 -> exit $rc (75 = lock lost)"
pids=""
echo
echo "4. A semaphore: five jobs start at once with --limit 2 on demo:backup; each works 0.3 s."
echo "   At most two hold a permit at a time; each release hands its permit to a waiter."
cat >"$dir/permit" <<'EOF'
#!/bin/sh
ms() { echo $(( ($(date +%s%N) - T0) / 1000000 )); }
echo + >>"$LOG"
n=$(( $(grep -c '^+' "$LOG") - $(grep -c '^-' "$LOG") ))   # runs holding a permit now
printf '%7s ms  %-6s holds a permit (fence %s), %s running\n' "$(ms)" "$1" "$HILOCK_FENCE" "$n"
sleep "$2"
echo - >>"$LOG"
printf '%7s ms  %-6s done, releasing\n' "$(ms)" "$1"
EOF
chmod +x "$dir/permit"
export LOG="$dir/permits.log"
: >"$LOG"
for n in 1 2 3 4 5; do
  "$hl" --limit 2 demo:backup -- "$dir/permit" "sem-$n" 0.3 & pids="$pids $!"
done
sleep 0.2
"$hl" inspect demo:backup | grep -E '^  (holders|waiters) ' | while read -r line; do say "hilock inspect: $line"; done
for p in $pids; do wait "$p" || :; done
pids=""
echo
echo "5. TLS: a second throwaway redis-server that speaks only TLS (--port 0 --tls-port),"
echo "   with a CA and a server certificate for 127.0.0.1 made here by openssl."
if command -v openssl >/dev/null; then
  ( cd "$dir"
    key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key"; }
    key ca && openssl req -x509 -new -key ca.key -out ca.crt -days 1 -subj "/CN=hilock demo CA"
    key server && openssl req -new -key server.key -out server.csr -subj /CN=localhost
    echo 'subjectAltName=DNS:localhost,IP:127.0.0.1' >server.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt \
      -days 1 -extfile server.ext ) >"$dir/openssl.log" 2>&1 || { echo "demo: openssl failed" >&2; exit 1; }
  for try in 1 2 3 4 5; do   # a random TLS port; another one if it was taken
    port=$((20000 + $(od -An -N2 -tu2 /dev/urandom) % 30000))
    serve tls --bind 127.0.0.1 --tls-port "$port" --tls-cert-file "$dir/server.crt" \
      --tls-key-file "$dir/server.key" --tls-ca-cert-file "$dir/ca.crt" --tls-auth-clients no && break
    port=""
  done
  [ -n "$port" ] || { echo "demo: redis-server --tls-port did not start" >&2; exit 1; }
  TLS_SOCK=$dir/tls.sock "$hl" --cacert "$dir/ca.crt" -s "rediss://127.0.0.1:$port" demo:tls -- sh -c \
    'echo "    job-9 holds demo:tls over TLS (fence $HILOCK_FENCE; PTTL $(redis-cli -s "$TLS_SOCK" PTTL demo:tls) ms)"'
  say "hilock --cacert ca.crt -s rediss://127.0.0.1:$port demo:tls ... -> exit $?"
  rc=0; "$hl" -n -s "redis://127.0.0.1:$port" demo:tls true 2>"$dir/err" || rc=$?
  say "the same as redis:// (no TLS) -> exit $rc: $(cat "$dir/err")"
else
  echo "   (skipped: no openssl command)"
fi
echo
echo "See hilock --help and man hilock (cli/hilock.1)."
