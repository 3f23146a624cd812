#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# layers.sh BUILD_DIR -- `make layers`: the library's layering, from its folders and built objects.
#
# Each folder of the library (src/*/, legacy/) and the command (cli/) states its layer in one
# file's opening comment, in a fixed form (src/X/X.h; legacy/legacy.h; cli/cli.h; src/api/acquire.c):
#    * Layer: engine
#    * May call: transport resp base platform
# This script reads those lines and checks, per folder, that every #include "..." of its files
# and every call of its objects (an undefined symbol of one object defined by another: nm)
# points at its own folder or one on its "May call:" line; that the declared layers form no
# circle; and that no files reach each other through calls (import circles). It also prints who
# calls whom, and keeps the engine's seams: engine.c includes no topology, TLS or hiredis header
# and calls neither topology nor hiredis nor a transport by name; src/resp/resp.c is the only
# file that includes hiredis. Exit 1 if any check fails.
# layers.sh --circles DIR: only who calls whom and the import circles among DIR's objects.
B=${1:-build}
cd "$(dirname "$0")/.." || exit 1
# who calls whom, and the files that reach each other (import circles): from lines "FROM TO SYMBOL"
circles() {
    awk '
    NF == 3 { e[$1, $2] = 1; files[$1] = 1; files[$2] = 1 }
    END {
        n = 0
        for (f in files) name[n++] = f
        for (i = 0; i < n; i++) for (j = 0; j < n; j++) reach[i, j] = e[name[i], name[j]] ? 1 : 0
        for (k = 0; k < n; k++) for (i = 0; i < n; i++) if (reach[i, k])
            for (j = 0; j < n; j++) if (reach[k, j]) reach[i, j] = 1
        for (i = 0; i < n; i++) {
            line = ""
            for (j = 0; j < n; j++) if (e[name[i], name[j]]) line = line " " name[j]
            if (line != "") printf "%-26s ->%s\n", name[i], line | "sort"
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
    }'
}
# calls OBJECTS...: "FROM TO SYMBOL" for each symbol one object uses and another defines
calls_of() {
    for o in "$@"; do
        f=${o#"$B"/}; f=${f%.o}.c
        nm "$o" | awk -v f="$f" '$1 == "U" { print "U", f, $2 } NF == 3 && $2 ~ /^[TDRBC]$/ { print "D", f, $3 }'
    done | awk '$1 == "D" { def[$3] = $2; next } { u[NR] = $2 " " $3 } END { for (i in u) { split(u[i], p, " "); if ((p[2] in def) && def[p[2]] != p[1]) print p[1], def[p[2]], p[2] } }' | sort -u
}
# --circles DIR: only the import circles of DIR's objects (bench/: make layers runs it)
if [ "$1" = --circles ]; then
    B=$2
    echo "$B:"; calls_of "$B"/*.o | circles; exit
fi
fail=0
dirs="$(ls -d src/*/ 2>/dev/null | grep -v '^src/lua/$' | sed 's|/$||') legacy cli"

# ---- the declared layers: "folder<TAB>may-call list" per folder ----
rules=$(for d in $dirs; do
    [ -d "$d" ] || continue
    found="$d/${d##*/}.h"   # the folder's header, else the one file that states the layer
    grep -q '^ \* Layer: ' "$found" 2>/dev/null || found=$(grep -l '^ \* Layer: ' "$d"/*.[ch] 2>/dev/null)
    if [ "$(echo "$found" | grep -c .)" != 1 ]; then
        echo "layers: $d: no single file states its layer (found: $(echo $found))" >&2; echo "$d BAD"; continue
    fi
    name=$(sed -n 's/^ \* Layer: *\([a-z_]*\).*/\1/p' "$found" | head -n 1)
    may=$(sed -n 's/^ \* May call: *//p' "$found" | head -n 1)
    [ "$name" = "${d##*/}" ] || { echo "layers: $found says Layer: $name, in folder $d" >&2; echo "$d BAD"; continue; }
    printf '%s\t%s\n' "$name" "$may"
done)
echo "$rules" | grep -q ' BAD$' && fail=1
folder_of() {   # path -> its layer's name (the folder), or "" (public headers, libc)
    case $1 in
        src/*/*) p=${1#src/}; echo "${p%%/*}" ;;
        legacy/*) echo legacy ;;
        cli/*) echo cli ;;
        "$B"/gen/*|gen/*) echo base ;;   # the embedded scripts (base.h declares them)
        *) echo "" ;;
    esac
}
# check: lines "FROM TO WHAT..." whose folder TO is neither FROM nor on FROM's May call line,
# printed as WHAT (one awk for all: no process per line)
check() {
    printf '%s\n' "$rules" | awk -F '\t' 'FILENAME == "-" && NF == 2 { n = split($2, m, " "); for (i = 1; i <= n; i++) ok[$1, m[i]] = 1; next }
        FILENAME != "-" { split($0, w, " "); if (w[1] != w[2] && !ok[w[1], w[2]]) { sub(/^[^ ]+ [^ ]+ /, ""); print } }' - "$1"
}
# ---- the declared order has no circle ----
printf '%s\n' "$rules" | awk -F '\t' '
    { name[$1] = 1; n = split($2, m, " "); for (i = 1; i <= n; i++) { r[$1, m[i]] = 1; name[m[i]] = 1 } }
    END {
        for (k in name) for (i in name) if (r[i, k]) for (j in name) if (r[k, j]) r[i, j] = 1
        for (i in name) if (r[i, i]) { print "layers: the declared layers call each other: " i; bad = 1 }
        if (!bad) print "declared layers: no circle"
        exit bad
    }' || fail=1

# ---- every #include "..." points at its own folder or one it may call ----
tmp=$(mktemp); trap 'rm -f "$tmp"' EXIT
for d in $dirs; do
    from=$(folder_of "$d/x")
    for f in "$d"/*.[ch]; do
        [ -f "$f" ] || continue
        sed -n 's/^[ \t]*#[ \t]*include[ \t]*"\([^"]*\)".*/\1/p' "$f" | while read -r h; do
            t=""
            for c in "$(dirname "$f")/$h" "include/$h" "src/$h" src/*/"$h" "legacy/$h" "$B/$h"; do
                [ -f "$c" ] || continue
                case $c in *..*) t=$(realpath -m --relative-to=. "$c") ;; *) t=$c ;; esac
                break
            done
            [ -n "$t" ] || { echo "$from ? $f: #include \"$h\": not found"; continue; }
            to=$(folder_of "$t")
            [ -z "$to" ] || echo "$from $to $f ($from) includes $t ($to)"
        done
    done
done > "$tmp"
inc_bad=$(check "$tmp")
if [ -n "$inc_bad" ]; then echo "$inc_bad" | sed 's/^/layers: /'; fail=1
else echo "includes: every folder includes only its own layer's headers and those of its May call line"; fi

# ---- the calls between objects ----
objs=$(ls "$B"/src/*/*.o "$B"/legacy/*.o "$B"/gen/*.o "$B"/cli/*.o 2>/dev/null)
[ -n "$objs" ] || { echo "layers: no objects in $B (run make first)"; exit 1; }
calls=$(calls_of $objs)
echo "$calls" | awk 'function folder(p) { if (p ~ /^src\/[^\/]+\//) { split(p, x, "/"); return x[2] } if (p ~ /^gen\//) return "base"; split(p, x, "/"); return x[1] }
    NF == 3 && !(folder($1) == "cli" && $3 ~ /^hilock_/) {   # (the command: the public API is its own to call)
        print folder($1), folder($2), $1 " (" folder($1) ") calls " $3 " of " $2 " (" folder($2) ")" }' > "$tmp"
call_bad=$(check "$tmp")
if [ -n "$call_bad" ]; then echo "$call_bad" | sed 's/^/layers: /'; fail=1
else echo "calls: every object calls only its own layer and those of its May call line"; fi

echo "$calls" | circles || fail=1

# ---- the engine's seams: it knows no topology and no hiredis, not by include, not by call ----
inc=$(${CC:-cc} -MM -Iinclude -Isrc $(ls -d src/*/ | sed 's|^|-I|') -I"$B" src/engine/engine.c | tr ' \\' '\n\n' | grep -E 'topology|hiredis|tls|session' || true)
if [ -n "$inc" ]; then echo "engine.c includes: $inc"; fail=1; else echo "engine.c includes no topology, hiredis or tls header"; fi
eng=$(nm "$B"/src/engine/engine.o | awk '$1 == "U" && ($2 ~ /^hl_topo|^redis|^freeReplyObject|^hl_transport_|^hl_tls/) { print $2 }')
if [ -n "$eng" ]; then echo "engine.o calls:" $eng; fail=1; else echo "engine.o calls no topology, hiredis, tls or transport function by name"; fi
hir=$(grep -l 'include <hiredis' src/*/*.c src/*/*.h legacy/*.c legacy/*.h 2>/dev/null | tr '\n' ' ')
if [ "$hir" != "src/resp/resp.c " ]; then echo "hiredis included by: $hir"; fail=1; else echo "hiredis included only by src/resp/resp.c"; fi
exit $fail
