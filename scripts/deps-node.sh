#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# deps-node.sh -- install the legacy peer of the interop tests (npm redis-lock@0.0.9 on
# redis@3.1.2, tests/interop/node) from its lockfile, if it is missing. Run by deps.sh for
# the test set only (make test and the other test targets; make demo does not need it).
# `npm ci` rather than `npm install`: it installs exactly the lockfile and never rewrites it.
# node and npm are required: without them this fails, loudly (the interop suite never skips).
set -eu
dir="$(cd "$(dirname "$0")/.." && pwd)/tests/interop/node"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "deps: node and npm are required by tests/test_interop.c (Debian: apt-get install nodejs npm)" >&2
  exit 1
fi
cd "$dir"
flock .npm-install.lock sh -c '
  test -f node_modules/redis-lock/package.json -a -f node_modules/redis/package.json && exit 0
  echo "deps: npm ci in tests/interop/node"
  npm ci --no-audit --no-fund --loglevel=error >npm-install.log 2>&1 || { cat npm-install.log >&2; exit 1; }'
