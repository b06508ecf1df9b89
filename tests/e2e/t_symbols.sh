#!/bin/bash
# t_symbols — the library exports exactly the names of preload/libsanswitch.map's global section,
# each of them a name libc defines; and it loads cleanly into a program.
# timeout: 30
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
need_cmd nm

MAP=$ROOT/preload/libsanswitch.map
[ -f "$MAP" ] || fail "missing $MAP"
LIBC=$(ldd "$SO" 2>/dev/null | awk '$1 ~ /^libc\.so/ { print $3; exit }')
[ -f "${LIBC:-}" ] || LIBC=/lib/x86_64-linux-gnu/libc.so.6
[ -f "$LIBC" ] || fail "cannot find libc (ldd $SO)"

# The version script's global names and version node names, one per line: "g NAME" / "v NODE".
"$PY" - "$MAP" >"$TMP/map.txt" <<'PYEOF' || fail "cannot parse $MAP"
import re, sys
text = open(sys.argv[1]).read()
text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
text = re.sub(r"(#|//)[^\n]*", " ", text)
for node in re.findall(r"([A-Za-z_][\w.]*)\s*\{", text):
    print("v", node)
for body in re.findall(r"global\s*:(.*?)(?:local\s*:|\})", text, flags=re.S):
    for name in body.split(";"):
        name = name.strip()
        if name:
            print("g", name)
PYEOF
sed -n 's/^g //p' "$TMP/map.txt" | sort -u >"$TMP/allowed"
sed -n 's/^v //p' "$TMP/map.txt" | sort -u >"$TMP/nodes"
[ -s "$TMP/allowed" ] || fail "no global names found in $MAP"
if grep -q '[][*?]' "$TMP/allowed"; then
	fail "wildcards in the global section of $MAP: the export list must be explicit ($(grep '[][*?]' "$TMP/allowed" | tr '\n' ' '))"
fi

# Exported (defined, dynamic) names; version node names show up as absolute symbols: drop them.
nm -D --defined-only "$SO" >"$TMP/nm.so" || fail "nm -D $SO failed"
awk 'NF >= 3 { n = $3; sub(/@.*/, "", n); print $2, n }' "$TMP/nm.so" >"$TMP/typed"
awk '$1 == "A" { print $2 }' "$TMP/typed" | sort -u | comm -23 - "$TMP/nodes" >"$TMP/stray_abs"
[ -s "$TMP/stray_abs" ] && fail "absolute symbols that are no version node: $(tr '\n' ' ' <"$TMP/stray_abs")"
awk '$1 != "A" { print $2 }' "$TMP/typed" | sort -u >"$TMP/exported"

if ! cmp -s "$TMP/allowed" "$TMP/exported"; then
	echo "only in the map (not exported):"
	comm -23 "$TMP/allowed" "$TMP/exported" | sed 's/^/  /'
	echo "exported but not in the map:"
	comm -13 "$TMP/allowed" "$TMP/exported" | sed 's/^/  /'
	fail "exported symbols differ from the global section of $MAP"
fi
log "$(wc -l <"$TMP/exported") exported names == map's global section"

# Every export is a function (text or indirect), never data.
awk '$1 != "A" && $1 != "T" && $1 != "W" && $1 != "i" { print }' "$TMP/typed" >"$TMP/odd"
[ -s "$TMP/odd" ] && fail "exports that are not functions: $(tr '\n' ' ' <"$TMP/odd")"

# Every export interposes something libc really defines.
nm -D --defined-only "$LIBC" | awk 'NF >= 3 { n = $3; sub(/@.*/, "", n); print n }' | sort -u >"$TMP/libc"
comm -23 "$TMP/exported" "$TMP/libc" >"$TMP/notlibc"
[ -s "$TMP/notlibc" ] && fail "exported names that $LIBC does not define: $(tr '\n' ' ' <"$TMP/notlibc")"
log "every export is defined by $LIBC"

# The loader accepts the library, and it ends up mapped.
out=$(preload sh -c 'grep -c libsanswitch /proc/self/maps' 2>"$TMP/load.err") || true
no_preload_errors "$TMP/load.err"
[ "${out:-0}" -gt 0 ] || { show "$TMP/load.err"; fail "library not mapped in a preloaded process"; }
[ -s "$TMP/load.err" ] && { show "$TMP/load.err"; fail "a trivial preloaded program wrote to stderr"; }
log "library loads cleanly"
