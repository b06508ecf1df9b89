#!/bin/bash
# t_symbols — the library exports exactly the names of preload/libsanswitch.map's global section,
# each of them a name libc defines; it loads cleanly into a program; it does not link rdma-core,
# and a preloaded process maps rdma-core only when the verbs provider may use a device; nor
# libev, which a preloaded process maps only once its engine starts.
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

# rdma-core is loaded only when the verbs provider needs it (core/san_rdma_syms.c): the library
# never links it (linked, it cost every preloaded process about 0.3 ms at start: /bin/true took
# twice its plain time, 1.4 without it), and a preloaded process that does not use verbs never
# maps it.
ldd "$SO" >"$TMP/ldd" 2>&1 || { show "$TMP/ldd"; fail "ldd $SO failed"; }
if grep -E 'lib(ibverbs|rdmacm)' "$TMP/ldd"; then
	fail "$SO links rdma-core again: it must be dlopened at first need (core/san_rdma_syms.c)"
fi
log "rdma-core is not among the library's dependencies"

# rdma_maps PROVIDER — tests/e2e/rdma_maps.py preloaded under SANSWITCH_PROVIDER=PROVIDER: a
# listener, a connection to itself, a few bytes; prints which rdma-core libraries it maps ("none").
# Its debug log goes to $TMP/rdma.PROVIDER.err.
rdma_maps() {
	preload env SANSWITCH_PROVIDER="$1" SANSWITCH_LOG=debug "$PY" "$E2E_DIR/rdma_maps.py" \
		2>"$TMP/rdma.$1.err"
}
# (a build without the rdma-core headers has no verbs provider: it never looks)
grep -qa 'librdmacm\.so\.1' "$SO" && has_verbs=1 || has_verbs=0
devices=
for d in /sys/class/infiniband/*; do
	[ -e "$d" ] && devices="$devices${devices:+ }${d##*/}"
done
for p in shm none auto verbs; do
	# with a device here, auto and verbs load rdma-core at the listener: tests/rxe checks that
	[ -n "$devices" ] && [ "$p" != shm ] && [ "$p" != none ] && continue
	got=$(rdma_maps "$p") ||
		{ show "$TMP/rdma.$p.err"; fail "SANSWITCH_PROVIDER=$p: rdma_maps.py failed"; }
	no_preload_errors "$TMP/rdma.$p.err"
	[ "$got" = none ] ||
		{ show "$TMP/rdma.$p.err"; fail "SANSWITCH_PROVIDER=$p: maps $got, no use for verbs"; }
	# auto and verbs did look (their listener asked), and found no device without loading
	case $has_verbs.$p in
	1.auto | 1.verbs)
		grep -q 'verbs: no RDMA device .*rdma-core not loaded' "$TMP/rdma.$p.err" ||
			{ show "$TMP/rdma.$p.err"; fail "SANSWITCH_PROVIDER=$p: no 'rdma-core not loaded' line"; }
		;;
	esac
done
log "rdma-core not mapped by a preloaded process that listens and connects" \
	"(RDMA devices: ${devices:-none})"

# libev is loaded when the engine first starts (core/san_ev.c), not with the library: a preloaded
# process that makes no TCP connection never maps it, one that does maps it and still switches.
grep -E 'libev\.so' "$TMP/ldd" &&
	fail "$SO links libev again: it must be dlopened when the engine starts (core/san_ev.c)"
out=$(preload sh -c 'grep -c "libev\.so" /proc/self/maps' 2>"$TMP/ev.idle.err") || true
no_preload_errors "$TMP/ev.idle.err"
[ "${out:-x}" = 0 ] || { show "$TMP/ev.idle.err"; fail "a preloaded process without sockets maps libev ($out)"; }
# A connection to itself, an echo of 3 x 100 bytes checked; prints whether libev is mapped.
cat >"$TMP/ev_conn.py" <<'PYEOF'
import socket
lst = socket.socket()
lst.bind(("127.0.0.1", 0))
lst.listen(1)
cli = socket.create_connection(lst.getsockname())
srv, _ = lst.accept()
for _ in range(3):
    cli.sendall(b"x" * 100)
    got = b""
    while len(got) < 100:
        got += srv.recv(4096)
    srv.sendall(got)
    back = b""
    while len(back) < 100:
        back += cli.recv(4096)
    assert back == b"x" * 100, back
with open("/proc/self/maps") as f:
    print("libev" if "libev.so" in f.read() else "none")
PYEOF
got=$(preload env SANSWITCH_LOG=debug "$PY" "$TMP/ev_conn.py" 2>"$TMP/ev.conn.err") ||
	{ show "$TMP/ev.conn.err"; fail "the connecting program failed"; }
no_preload_errors "$TMP/ev.conn.err"
[ "$got" = libev ] || { show "$TMP/ev.conn.err"; fail "libev not mapped once a connection was made ($got)"; }
grep -q 'engine: progress thread started' "$TMP/ev.conn.err" ||
	{ show "$TMP/ev.conn.err"; fail "the engine did not start for a connection"; }
log "libev mapped only once the engine starts"

# A libev that cannot be loaded (here a mount namespace hides it behind /dev/null): one error
# line, the connection stays on kernel TCP and carries every byte. Needs root for the mount.
EV_SO=$(ldconfig -p 2>/dev/null | awk '$1 == "libev.so.4" { print $NF; exit }')
if [ -n "$EV_SO" ] && [ -e "$EV_SO" ] && unshare -m true 2>/dev/null; then
	rc=0
	# shellcheck disable=SC2016 # (the inner shell expands them)
	out=$(unshare -m sh -c 'mount --bind /dev/null "$1" && shift && exec "$@"' sh "$EV_SO" \
		env LD_PRELOAD="$PRELOAD" SANSWITCH_STATS=1 "$PY" "$TMP/ev_conn.py" \
		2>"$TMP/ev.none.err") || rc=$?
	if [ "$rc" -ne 0 ] || [ "$out" != none ]; then
		show "$TMP/ev.none.err"
		fail "without libev: exit $rc, libev mapped: $out"
	fi
	[ "$(grep -c 'engine: cannot load libev' "$TMP/ev.none.err")" -eq 1 ] ||
		{ show "$TMP/ev.none.err"; fail "without libev: not exactly one error line"; }
	l=$(stats_line "$TMP/ev.none.err") || exit 1
	[ "$(field "$l" switched)" -eq 0 ] || fail "without libev: switched: $l"
	log "libev that cannot be loaded: one error line, the connection stays TCP, bytes checked"
	# The same with libev missing at the client only, its server preloaded as usual: the client
	# must not propose (a switched connection needs its engine: its anchor watched, its peer's
	# death seen). Before, the client switched and ran the connection without a progress
	# thread: a server killed after the switch-over left the client's select() asleep for good.
	cat >"$TMP/ev_cli.py" <<'PYEOF'
import socket, sys
cli = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
for i in range(5):
    msg = bytes([65 + i]) * 100
    cli.sendall(msg)
    back = b""
    while len(back) < 100:
        back += cli.recv(4096)
    assert back == msg, back
cli.close()
print("ok")
PYEOF
	SANSWITCH_STATS=1 start_pf evsrv pre "$PY" "$E2E_DIR/tcpecho.py" '{PORTFILE}'
	rc=0
	# shellcheck disable=SC2016 # (the inner shell expands them)
	out=$(unshare -m sh -c 'mount --bind /dev/null "$1" && shift && exec "$@"' sh "$EV_SO" \
		env LD_PRELOAD="$PRELOAD" SANSWITCH_STATS=1 "$PY" "$TMP/ev_cli.py" "$SERVER_PORT" \
		2>"$TMP/ev.cli.err") || rc=$?
	stop "$SERVER_PID"
	if [ "$rc" -ne 0 ] || [ "$out" != ok ]; then
		show "$TMP/ev.cli.err"
		fail "client without libev: exit $rc ($out)"
	fi
	l=$(stats_line "$TMP/ev.cli.err") || exit 1
	[ "$(field "$l" switched)" -eq 0 ] && [ "$(field "$l" fallback)" -eq 1 ] ||
		fail "client without libev, server with it: the client must stay TCP: $l"
	log "libev missing at the client only: it stays TCP (no proposal), bytes checked"
else
	log "(no mount namespace here: the case without libev is not run)"
fi
