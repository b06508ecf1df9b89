#!/bin/bash
# t_udp_unix — UDP and UNIX sockets (stream, seqpacket, datagram, socketpair) pass untouched and
# untracked under the preload; TCP in the same kind of program is tracked (the positive control).
# timeout: 60
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

KINDS=(udp4 unix-stream unix-abstract unix-seqpacket unix-dgram socketpair-stream socketpair-dgram)
TCPKINDS=(tcp4)
if v6_ok udp6 tcp6; then
	KINDS+=(udp6)
	TCPKINDS+=(tcp6)
fi
# A debug line that says the switch took an fd in hand (core/san_log.c, preload/san_track.c).
TRACKED='^sanswitch\[[0-9]+\]: debug: fd [0-9]+: (tracked tcp socket|listener|active|passive)'

# results FILE — the "kind ok bytes= sha256=" part of sockx's lines (fd numbers may differ).
results() { sed -n 's/^sockx: \([^ ]*\) ok fds=[^ ]* /\1 /p' "$1"; }

rc=0
as_t none 60 "$PY" "$E2E_DIR/sockx.py" "${KINDS[@]}" >"$TMP/none.out" 2>"$TMP/none.err" || rc=$?
[ "$rc" -eq 0 ] || { show "$TMP/none.out" "$TMP/none.err"; fail "sockx without the preload exited $rc"; }
rc=0
SANSWITCH_LOG=debug as_t pre 60 "$PY" "$E2E_DIR/sockx.py" "${KINDS[@]}" \
	>"$TMP/pre.out" 2>"$TMP/pre.err" || rc=$?
no_preload_errors "$TMP/pre.err"
[ "$rc" -eq 0 ] || { show "$TMP/pre.out" "$TMP/pre.err"; fail "sockx under the preload exited $rc"; }
cat "$TMP/pre.out"
[ "$(results "$TMP/pre.out" | wc -l)" -eq ${#KINDS[@]} ] || fail "not every exchange reported ok"
results "$TMP/none.out" >"$TMP/none.r"
results "$TMP/pre.out" >"$TMP/pre.r"
diff -u "$TMP/none.r" "$TMP/pre.r" || fail "bytes differ between kernel and preloaded runs"
if grep -E "$TRACKED" "$TMP/pre.err"; then
	fail "the preload tracked a UDP or UNIX socket (lines above)"
fi
log "UDP/UNIX: bytes identical with and without the preload; nothing tracked"

# Positive control: the same program's TCP sockets must be tracked, or the check above proves
# nothing (e.g. if the log format changed).
rc=0
SANSWITCH_LOG=debug as_t pre 60 "$PY" "$E2E_DIR/sockx.py" "${TCPKINDS[@]}" \
	>"$TMP/tcp.out" 2>"$TMP/tcp.err" || rc=$?
[ "$rc" -eq 0 ] || { show "$TMP/tcp.out" "$TMP/tcp.err"; fail "sockx tcp under the preload exited $rc"; }
for what in 'tracked tcp socket' listener active passive; do
	grep -Eq "^sanswitch\[[0-9]+\]: debug: fd [0-9]+: $what" "$TMP/tcp.err" || {
		show "$TMP/tcp.err"
		fail "positive control: no '$what' debug line for a TCP socket (log format changed?)"
	}
done
log "TCP positive control: $(grep -Ec "$TRACKED" "$TMP/tcp.err") tracking lines"
