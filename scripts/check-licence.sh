#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# check-licence.sh -- `make test` runs it first: every source file of the project carries the
# SPDX-License-Identifier line of its licence (LICENSE: BSD-3-Clause). tests/abi/v0 is a frozen
# byte-for-byte copy of 0.1.0's headers and stays as it was.
cd "$(dirname "$0")/.." || exit 1
missing=$(find bench cli cmake fuzz include legacy scripts src tests torture .ci \
    \( -path tests/abi/v0 -o -name node_modules -o -path fuzz/corpus \) -prune -o -type f \
    \( -name '*.c' -o -name '*.h' -o -name '*.hpp' -o -name '*.cpp' -o -name '*.sh' -o -name '*.lua' \
       -o -name '*.js' -o -name '*.cmake.in' -o -name run \) -print 2>/dev/null |
    while read -r f; do grep -q 'SPDX-License-Identifier: BSD-3-Clause' "$f" || echo "$f"; done)
grep -q 'SPDX-License-Identifier: BSD-3-Clause' Makefile || missing="$missing Makefile"
if [ -n "$missing" ]; then
    echo "check-licence: no 'SPDX-License-Identifier: BSD-3-Clause' line in:" $missing
    exit 1
fi
