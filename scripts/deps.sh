#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# deps.sh [build|demo|test] [PKG...] -- install what a target needs, if it is missing (Debian;
# needs root). The sets:
#   build  what building the library and the hilock command needs (make, make install)
#   demo   build + what make demo runs: redis-server, redis-cli, openssl (its TLS part)
#   test   (the default) demo + what the suites need: Criterion, Sentinel, valgrind, cmake
#          (test_install checks find_package(hilock)), libuv/libevent (the adapters' tests),
#          Node/npm with the interop tests' pinned npm packages (deps-node.sh), and redis-py
#          (python3-redis: the cluster interop tests' peer, run by the system python3), and
#          python3-prometheus-client (its text parser checks hilock_stats_prometheus's output)
# PKG...: extra packages one target needs (make fuzz: clang libclang-rt-14-dev; make deb:
# dpkg-dev debhelper lintian fakeroot).
# A failed `apt-get update` (say, one unreachable or unsigned index of an unrelated source) is
# a warning: the install is tried anyway, and only a failed install fails.
set -eu
set_name=test
case ${1:-} in build|demo|test) set_name=$1; shift ;; esac
build="build-essential pkg-config libhiredis-dev libssl-dev"
demo="$build redis-server redis-tools openssl"
test="$demo libcriterion-dev redis-sentinel valgrind cmake libuv1-dev libevent-dev python3-redis python3-prometheus-client"
eval "pkgs=\$$set_name"

need=""
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
for p in $pkgs "$@"; do
  have_pkg "$p" || need="$need $p"
done
if [ "$set_name" = test ]; then
  command -v node >/dev/null 2>&1 || need="$need nodejs"   # interop tests: a real legacy peer
  command -v npm >/dev/null 2>&1 || need="$need npm"
fi
if [ -n "$need" ]; then
  echo "deps: installing$need"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq ||
    echo "deps: warning: apt-get update failed (see above); installing from the package lists there are" >&2
  $SUDO apt-get install -y -qq --no-install-recommends $need >/dev/null ||
    { echo "deps: FAILED: apt-get install$need" >&2; exit 1; }
  # Debian may start a system redis-server; the tests start their own on other ports.
fi
[ "$set_name" = test ] || exit 0
exec sh "$(dirname "$0")/deps-node.sh"   # node peer of the interop tests
