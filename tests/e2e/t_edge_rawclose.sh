#!/bin/bash
# t_edge_rawclose — a connection closed through libc's syscall(SYS_close, fd), the way libuv
# (node) closes every fd, over kernel TCP and then switched (both ends preloaded), in the same
# run: raw_close.py moves 300 KB each way, closes by syscall(), reads a file that gets the number
# just closed, and opens a new connection, four rounds (the last closes by SYS_close_range); it
# must see what it sees over TCP.
# Before the library interposed syscall() for SYS_close the switched connection's entry outlived
# its number: the file's read said EAGAIN, the next connection's first send EPIPE (node: every
# http request after the first closed connection failed with EPIPE or ECONNRESET).
# timeout: 60
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
export SANSWITCH_STATS=1
printf 'the file, not the connection\n' >"$TMP/file"
for mode in none pre; do
	start_pf "echo.$mode" "$mode" "$PY" "$E2E_DIR/tcpecho.py" '{PORTFILE}'
	rc=0
	as_t "$mode" 40 "$PY" "$E2E_DIR/raw_close.py" "$SERVER_PORT" "$TMP/file" \
		>"$TMP/cli.$mode.out" 2>"$TMP/cli.$mode.err" || rc=$?
	stop "$SERVER_PID"
	[ "$rc" -eq 0 ] || { show "$TMP/cli.$mode.out" "$TMP/cli.$mode.err"; fail "$mode: client exit $rc"; }
done
grep -q "file on the number just closed: True, read b'the file" "$TMP/cli.none.out" ||
	{ show "$TMP/cli.none.out"; fail "over kernel TCP the file did not get the number or its bytes"; }
same_as_tcp "$TMP/cli.none.out" "$TMP/cli.pre.out" raw_close.py
l=$(probe_line "$TMP/cli.pre.out" "$TMP/cli.pre.err") || exit 1
# 4 raw-closed connections switched (the 5-byte ones switch too: SANSWITCH_SWITCH_AFTER=0)
[ "$(field "$l" switched)" -ge 4 ] || fail "the raw-closed connections did not switch: $l"
log "4 rounds: a switched connection closed by syscall(SYS_close or SYS_close_range), a file on its number, a new" \
	"connection: as over kernel TCP ($(field "$l" switched) switched)"
log "PASS"
