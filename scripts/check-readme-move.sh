#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# check-readme-move.sh [REV] -- after README.md was split into docs/*.md (issue 16): every
# non-blank line of README.md at REV (default 6189a95, before the split) must still be a line
# of README.md or docs/*.md, compared with whitespace collapsed and headings' leading '#'s
# ignored (sections moved up a level). Lines rewritten on purpose are listed below. Prints each
# missing line; exit 1 if any.
set -eu
export LC_ALL=C
rev=${1:-6189a95}
cd "$(dirname "$0")/.."
old=$(mktemp) new=$(mktemp)
trap 'rm -f "$old" "$new"' EXIT
norm() { sed -e 's/^#\{1,\} //' -e 's/[[:space:]]\{1,\}/ /g' -e 's/^ //' -e 's/ $//' | grep -v '^$' || true; }
git show "$rev:README.md" | norm >"$old"
cat README.md docs/*.md | norm | sort -u >"$new"
# rewritten on purpose: the example takes its URL from argv (so the suite can run it), and a
# link is relative to docs/ now
cat >>"$new" <<'REWRITTEN'
if (hilock_client_open("redis://127.0.0.1:6379", &c) != HILOCK_OK) {
script replies and whole sessions): see [torture/README.md](torture/README.md).
REWRITTEN
sort -u -o "$new" "$new"
missing=$(sort -u "$old" | comm -23 - "$new")
if [ -n "$missing" ]; then
  printf 'not found after the move:\n%s\n' "$missing"
  exit 1
fi
echo "all $(wc -l <"$old") non-blank lines of README.md@$rev are in README.md or docs/*.md"
