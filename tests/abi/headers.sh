#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# headers.sh STAMP -- the public headers as programs compile them (`make test` builds STAMP):
#   - all of them in one C++17 file (headers.cpp) with g++ and clang++, each one installed:
#     -Wall -Wextra -Werror -Wold-style-cast, and -Wuseless-cast with g++;
#   - the event-loop adapters included and unused in C (adapters.c) with cc and clang:
#     -std=c99 -Wall -Wextra -Werror;
#   - hilock.hpp under -std=c++14 (cxx14.cpp): it stops with its #error, and says nothing else;
#   - README.md's C++ example (its first ```cpp block) as it stands, with each C++ compiler.
# (-c, not -fsyntax-only: gcc finds unused functions only when it compiles.)
# Touches STAMP when every check passes; otherwise prints what failed and exits 1.
set -u
stamp=$1
here=$(cd "$(dirname "$0")" && pwd)
inc="$here/../../include"
readme=$(mktemp "${TMPDIR:-/tmp}/hilock-readme.XXXXXX.cpp")
trap 'rm -f "$readme"' EXIT
awk '/^```cpp$/ && !done { p = 1; next } p && /^```$/ { p = 0; done = 1 } p' "$here/../../README.md" >"$readme"
want='hilock.hpp needs C++17 (compile with -std=c++17 or later; MSVC: /std:c++17)'
fail=0
ran=0
have() { command -v "$1" >/dev/null 2>&1; }

for cxx in g++ clang++; do
  have $cxx || continue
  ran=$((ran + 1))
  extra=
  [ $cxx = g++ ] && extra=-Wuseless-cast
  $cxx -std=c++17 -Wall -Wextra -Werror -Wold-style-cast $extra -I"$inc" -c -o /dev/null "$here/headers.cpp" ||
    { echo "headers.sh: $cxx: the public headers warn as C++17 (above)"; fail=1; }
  [ -s "$readme" ] && $cxx -std=c++17 -Wall -Wextra -Werror -I"$inc" -c -o /dev/null "$readme" ||
    { echo "headers.sh: $cxx: README.md's C++ example does not compile (above)"; fail=1; }
  if msg=$($cxx -std=c++14 -I"$inc" -fsyntax-only "$here/cxx14.cpp" 2>&1); then
    echo "headers.sh: $cxx -std=c++14 compiled hilock.hpp (want its #error)"; fail=1
  else
    case $msg in
      *ceil*|*chrono*) echo "headers.sh: $cxx -std=c++14: more than the #error:"; echo "$msg"; fail=1 ;;
      *"$want"*) ;;
      *) echo "headers.sh: $cxx -std=c++14: not the #error:"; echo "$msg"; fail=1 ;;
    esac
  fi
done
for cc in cc clang; do
  have $cc || continue
  ran=$((ran + 1))
  $cc -std=c99 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -I"$inc" -c -o /dev/null "$here/adapters.c" ||
    { echo "headers.sh: $cc: the adapters warn when included and unused (above)"; fail=1; }
done
[ $ran -gt 0 ] || { echo "headers.sh: no compiler found"; exit 1; }
[ $fail = 0 ] || exit 1
touch "$stamp"
