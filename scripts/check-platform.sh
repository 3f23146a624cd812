#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# check-platform.sh [ROOT] -- `make layers`: no Linux-only (or otherwise non-POSIX) call outside
# the platform layer (src/platform/), so a port to FreeBSD or macOS is one file there.
# Reads the code of the library (src/, legacy/) and the command (cli/) without its comments
# and strings, but for strings naming /proc (only Linux has it) or holding ELF asm directives.
# Allowed elsewhere: any fiber.c (the context switch: its own per-architecture asm, owned by
# its file). Tests and benches run on the development machine and are not checked.
# Exit 1 and list each use found.
ROOT=${1:-$(dirname "$0")/..}
cd "$ROOT" || exit 1
# whole words (C identifiers, headers), and asm directives of ELF (.type/.size/.section...)
WORDS='getrandom|clock_nanosleep|pthread_condattr_setclock|SOCK_CLOEXEC|SOCK_NONBLOCK|MSG_NOSIGNAL|SO_NOSIGPIPE'
WORDS="$WORDS|gettid|MAP_NORESERVE|prctl|PR_SET_[A-Z_]+|PR_GET_[A-Z_]+|close_range|closefrom|syscall|SYS_[A-Za-z0-9_]+"
WORDS="$WORDS|pipe2|dup3|accept4|strchrnul|memrchr|program_invocation_(short_)?name|getauxval|getentropy|arc4random[a-z_]*"
WORDS="$WORDS|epoll_[a-z_]+|eventfd|signalfd|timerfd_[a-z_]+|inotify_[a-z_]+|sched_getcpu|procctl|kqueue|kevent"
WORDS="$WORDS|__asm__|asm|__asm|sys/(random|epoll|eventfd|signalfd|timerfd|inotify|prctl|syscall|procctl|event)\.h"
files=$(find src legacy cli -type f \( -name '*.c' -o -name '*.h' \) 2>/dev/null |
        grep -v '^src/platform/' | grep -v '/fiber\.c$' | sort)
[ -n "$files" ] || { echo "check-platform: no sources under $ROOT"; exit 1; }
# code only: comments blanked, string and character literals emptied (a "/proc..." string
# leaves the marker PROCFS, an ELF asm directive ASMDIR), line numbers kept
code=$(awk '
    FNR == 1 { st = "" }
    {
        out = ""; i = 1; n = length($0)
        while (i <= n) {
            c = substr($0, i, 1); d = substr($0, i, 2)
            if (st == "cm") { if (d == "*/") { st = ""; i += 2; out = out " " } else i++; continue }
            if (st == "str" || st == "chr") {
                if (c == "\\") { i += 2; continue }
                if ((st == "str" && c == "\"") || (st == "chr" && c == "\047")) {
                    if (st == "str" && lit ~ /^\/proc(\/|$)/) out = out "PROCFS"
                    if (st == "str" && lit ~ /(^|[[:space:]])\.(type|size|section|note|hidden|globl|p2align|cfi_[a-z_]+)([[:space:]]|$)|@function|@progbits/) out = out "ASMDIR"
                    out = out c; st = ""
                } else lit = lit c
                i++; continue
            }
            if (d == "/*") { st = "cm"; i += 2; continue }
            if (d == "//") break
            if (c == "\"") { st = "str"; lit = "" }
            else if (c == "\047") { st = "chr"; lit = "" }
            out = out c; i++
        }
        if (st == "str" || st == "chr") st = ""   # C has no multi-line literals
        print FILENAME ":" FNR ": " out
    }' $files) || { echo "check-platform: awk failed"; exit 1; }
found=$(printf '%s\n' "$code" | grep -E "(^|[^A-Za-z0-9_])($WORDS)([^A-Za-z0-9_]|\$)|PROCFS|ASMDIR")
if [ -n "$found" ]; then
    echo "$found"
    echo "check-platform: Linux-only calls outside src/platform/ (move them behind src/platform/platform.h)"
    exit 1
fi
echo "check-platform: no Linux-only call outside src/platform/ (fiber.c's switch allowed)"
