#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Build every Redis/Valkey source tarball in SERVERS_SRC once, into a cache outside
# the clone, so `make test-servers` (and CI on the same machine) reuses the binaries.
#   scripts/servers.sh build            build what is missing; print one "NAME DIR" line each
#   scripts/servers.sh list             the same lines, building nothing
# Each DIR holds redis-server, redis-sentinel, redis-cli (Valkey's binaries are linked
# under those names too, so the fixtures that start redis-server from PATH run them).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
src=${SERVERS_SRC:-}
if [ -z "$src" ] && [ -d "$here/../shared/servers" ]; then src=$here/../shared/servers; fi
cache=${HILOCK_SERVERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hilock/servers}
mode=${1:-list}

[ -n "$src" ] && [ -d "$src" ] || { echo "servers.sh: no SERVERS_SRC directory of server tarballs (docs/servers.md: Getting the tarballs)" >&2; exit 2; }
mkdir -p "$cache"

# Sort by version so the matrix reads oldest first.
tarballs=$(cd "$src" && ls redis-*.tar.gz valkey-*.tar.gz 2>/dev/null | sort -t- -k1,1r -k2,2V) || true
[ -n "$tarballs" ] || { echo "servers.sh: no redis-*.tar.gz or valkey-*.tar.gz in $src (docs/servers.md: Getting the tarballs)" >&2; exit 2; }

build_one() { # NAME TARBALL OUT
  local name=$1 tb=$2 out=$3 work
  work=$(mktemp -d "$cache/.build-$name.XXXXXX")
  tar -xzf "$tb" -C "$work"
  local dir; dir=$(ls -d "$work"/*/ | head -1)
  local tls=
  case "$name" in
    redis-2.*|redis-3.*|redis-4.*|redis-5.*) ;;
    *) tls=BUILD_TLS=yes ;;
  esac
  echo "servers.sh: building $name ($tls)" >&2
  if ! (cd "$dir" && make -j"$(nproc)" MALLOC=libc $tls >"$work/build.log" 2>&1); then
    tail -30 "$work/build.log" >&2; rm -rf "$work"; return 1
  fi
  mkdir -p "$work/bin"
  for b in server sentinel cli; do
    for p in redis valkey; do
      [ -x "$dir/src/$p-$b" ] && cp "$dir/src/$p-$b" "$work/bin/redis-$b" && break
    done
  done
  # 2.8 has no redis-sentinel binary name in every tree: the server runs it with --sentinel.
  [ -x "$work/bin/redis-sentinel" ] || ln -s redis-server "$work/bin/redis-sentinel"
  [ -x "$work/bin/redis-server" ] || { echo "servers.sh: $name built no server" >&2; rm -rf "$work"; return 1; }
  rm -rf "$out"; mv "$work/bin" "$out"; rm -rf "$work"
}

for tb in $tarballs; do
  name=${tb%.tar.gz}
  out=$cache/$name
  if [ ! -x "$out/redis-server" ]; then
    [ "$mode" = build ] || continue
    build_one "$name" "$src/$tb" "$out" || { echo "servers.sh: $name failed to build" >&2; exit 1; }
  fi
  echo "$name $out"
done
