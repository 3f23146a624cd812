#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# layers.sh BUILD_DIR -- `make layers`: the library's layering, from the built objects.
# Prints which file calls which (an undefined symbol of one object defined by another), the
# import circles (files that reach each other through such calls), and checks the seams of
# src/internal.h's layer list: engine.c includes no topology header and no hiredis header,
# and calls neither topology nor hiredis nor a transport by name; resp.c is the only file that
# includes hiredis. Exit 1 if a seam is broken or a circle exists.
B=${1:-build}
cd "$(dirname "$0")/.." || exit 1
fail=0
objs=$(ls "$B"/src/*.o "$B"/legacy/*.o "$B"/gen/*.o 2>/dev/null)
[ -n "$objs" ] || { echo "layers: no objects in $B (run make first)"; exit 1; }
for o in $objs; do
    f=${o#"$B"/}; f=${f%.o}.c
    nm "$o" | awk -v f="$f" '$1 == "U" { print "U", f, $2 } NF == 3 && $2 ~ /^[TDRBC]$/ { print "D", f, $3 }'
done | awk '
    $1 == "D" { def[$3] = $2; files[$2] = 1; next }
    { use[$2, $3] = 1; files[$2] = 1; users[$2] = users[$2] " " $3 }
    END {
        n = 0
        for (f in files) name[n++] = f
        for (i = 0; i < n; i++) for (j = 0; j < n; j++) reach[i, j] = 0
        for (k in use) {
            split(k, p, SUBSEP)
            if (!(p[2] in def) || def[p[2]] == p[1]) continue
            for (i = 0; i < n; i++) if (name[i] == p[1]) a = i
            for (j = 0; j < n; j++) if (name[j] == def[p[2]]) b = j
            reach[a, b] = 1; edge[a, b] = 1
        }
        for (k = 0; k < n; k++) for (i = 0; i < n; i++) if (reach[i, k])
            for (j = 0; j < n; j++) if (reach[k, j]) reach[i, j] = 1
        for (i = 0; i < n; i++) {
            line = ""
            for (j = 0; j < n; j++) if (edge[i, j]) line = line " " name[j]
            if (line != "") printf "%-22s ->%s\n", name[i], line | "sort"
        }
        close("sort")
        circles = 0
        for (i = 0; i < n; i++) {
            if (seen[i]) continue
            comp = name[i]; m = 1
            for (j = 0; j < n; j++) if (j != i && reach[i, j] && reach[j, i]) { comp = comp " " name[j]; seen[j] = 1; m++ }
            if (m > 1) { print "import circle: " comp; circles++ }
        }
        if (!circles) print "import circles: none"
        exit circles ? 1 : 0
    }' || fail=1
# the engine knows no topology and no hiredis: not by include, not by call
inc=$(${CC:-cc} -MM -Iinclude -Isrc -I"$B" src/engine.c | tr ' \\' '\n\n' | grep -E 'topology|hiredis|tls' || true)
if [ -n "$inc" ]; then echo "engine.c includes: $inc"; fail=1; else echo "engine.c includes no topology, hiredis or tls header"; fi
calls=$(nm "$B"/src/engine.o | awk '$1 == "U" && ($2 ~ /^hl_topo|^redis|^freeReplyObject|^hl_transport_|^hl_tls/) { print $2 }')
if [ -n "$calls" ]; then echo "engine.o calls:" $calls; fail=1; else echo "engine.o calls no topology, hiredis, tls or transport function by name"; fi
hir=$(grep -l 'include <hiredis' src/*.c src/*.h legacy/*.c legacy/*.h 2>/dev/null | tr '\n' ' ')
if [ "$hir" != "src/resp.c " ]; then echo "hiredis included by: $hir"; fail=1; else echo "hiredis included only by src/resp.c"; fi
exit $fail
