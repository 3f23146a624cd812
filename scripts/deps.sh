#!/bin/sh
# Install what building and testing hilock needs, if it is missing (Debian; needs root).
set -eu
need=""
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
# cmake: test_install checks find_package(hilock). Arguments name extra packages one target
# needs (make fuzz: clang libclang-rt-14-dev; make deb: dpkg-dev debhelper lintian fakeroot).
for p in build-essential pkg-config libhiredis-dev libssl-dev openssl libcriterion-dev redis-server redis-tools redis-sentinel valgrind \
         cmake libuv1-dev libevent-dev "$@"; do
  have_pkg "$p" || need="$need $p"
done
command -v node >/dev/null 2>&1 || need="$need nodejs"   # interop tests: a real legacy peer
command -v npm >/dev/null 2>&1 || need="$need npm"
[ -z "$need" ] && exec sh "$(dirname "$0")/deps-node.sh"   # node peer of the interop tests
echo "deps: installing$need"
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $need >/dev/null
# Debian may start a system redis-server; the tests start their own on other ports.
exec sh "$(dirname "$0")/deps-node.sh"
