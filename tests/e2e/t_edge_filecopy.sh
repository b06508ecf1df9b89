#!/bin/bash
# t_edge_filecopy — a real file-copy program from Debian: socat sends a 300 MiB file with
# `socat -u OPEN:file TCP:host:port`, which at the end of the file calls shutdown(SHUT_WR), then
# shutdown(SHUT_RDWR), then exits without close(); the receiver is `socat -u TCP-LISTEN:port
# OPEN:out`. Over kernel TCP once, then three times with both preloaded (both stats lines must
# say switched=1): the received file's sha256 must be the file's every time. Before (1609c47)
# this pattern truncated the stream with a clean end-of-file in 2 of 3 runs.
# timeout: 300
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
need_cmd socat
export SANSWITCH_STATS=1
ROUNDS=${ROUNDS:-3}
IN=$TMP/in.bin
head -c $((300 * 1024 * 1024)) /dev/urandom >"$IN"
WANT=$(sha "$IN")

copy() { # NAME MODE
	local name=$1 mode=$2 rc=0 srv_rc=0 l
	rm -f "$TMP/$name.bin"
	start_listener "$name.srv" "$mode" 4 socat -u "TCP-LISTEN:{PORT},bind=127.0.0.1" \
		"OPEN:$TMP/$name.bin,creat,trunc"
	as_t "$mode" 120 socat -u "OPEN:$IN" "TCP:127.0.0.1:$SERVER_PORT" \
		>"$TMP/$name.cli.out" 2>"$TMP/$name.cli.err" || rc=$?
	wait_pid "$SERVER_PID" 60 || srv_rc=$?
	no_preload_errors "$TMP/$name.cli.err" "$TMP/$name.srv.err"
	[ "$rc" -eq 0 ] && [ "$srv_rc" -eq 0 ] ||
		{ show "$TMP/$name.cli.err" "$TMP/$name.srv.err"; fail "$name: sender exit $rc, receiver exit $srv_rc"; }
	[ "$(sha "$TMP/$name.bin")" = "$WANT" ] ||
		fail "$name: received $(stat -c %s "$TMP/$name.bin") bytes, not the file's $(stat -c %s "$IN") (sha256 differs)"
	if [ "$mode" = pre ]; then
		for f in "$TMP/$name.cli.err" "$TMP/$name.srv.err"; do
			l=$(stats_line "$f") || exit 1
			[ "$(field "$l" switched)" -eq 1 ] || fail "$name: not switched: $l"
		done
	fi
	rm -f "$TMP/$name.bin"
}

copy tcp none
log "kernel TCP: 300 MiB copied, sha256 matches"
for r in $(seq "$ROUNDS"); do
	copy "switch.$r" pre
	log "switched, round $r: 300 MiB copied, sha256 matches, both ends switched"
done
