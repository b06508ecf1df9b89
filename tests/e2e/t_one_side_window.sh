#!/bin/bash
# t_one_side_window — a preloaded server accepts a plain client: the server's upgrade window
# closes at the client's first bytes (no PROPOSE came: the peer has no switch), not after its
# 5 s timer, and a MSG_WAITALL receive that spans the moment still returns every byte in order.
# The stats line must show the connection accepted, fallen back as not_attempted, 0 switched,
# and the bytes counted on TCP.
# timeout: 60
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

export SANSWITCH_STATS=1
rc=0
as_t pre 40 "$PY" "$E2E_DIR/one_side_waitall.py" >"$TMP/srv.out" 2>"$TMP/srv.err" || rc=$?
no_preload_errors "$TMP/srv.err"
[ "$rc" -eq 0 ] || { show "$TMP/srv.out" "$TMP/srv.err"; fail "one_side_waitall.py exited $rc"; }
grep -q '^ok 70015 bytes$' "$TMP/srv.out" || { show "$TMP/srv.out"; fail "no 'ok 70015 bytes' line"; }
pid=$(sed -n 's/^# pid \([0-9][0-9]*\)$/\1/p' "$TMP/srv.out")
l=$(pid_line "$TMP/srv.err" "$pid") || exit 1
log "server: $l"
[ "$(field "$l" accepts)" -eq 1 ] && [ "$(field "$l" switched)" -eq 0 ] &&
	[ "$(field "$l" fallback_not_attempted)" -eq 1 ] && [ "$(field "$l" tcp_rx_bytes)" -eq 70015 ] ||
	fail "expected accepts=1 switched=0 fallback_not_attempted=1 tcp_rx_bytes=70015: $l"
