#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# check-testing-doc.sh -- `make test` runs it first: every suite (tests/test_*.c and
# tests/unit/test_*.c) is named, in
# backquotes, in docs/testing.md's table, so a new suite cannot go undocumented.
cd "$(dirname "$0")/.." || exit 1
missing=
for f in tests/test_*.c tests/unit/test_*.c; do
    n=$(basename "$f" .c)
    grep -q "\`$n\`" docs/testing.md || missing="$missing $n"
done
if [ -n "$missing" ]; then
    echo "check-testing-doc: suites not named in docs/testing.md:$missing"
    exit 1
fi
