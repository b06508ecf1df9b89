#!/bin/bash
# t_switch_dread_late — a direct-read offer that woke the receiver and was not taken in time must
# not vanish from the receiver's view (docs/protocol.md, "Direct read on shm": the bytes are moved
# into the ring in the same step that takes the offer back). switch_dread_late.py makes a blocking
# 300 KiB send to a receiver asleep in poll, which then looks only 50 ms later; with
# SANSWITCH_FAULT=src_late the sender sleeps 100 ms between the move and the publication of the
# producer index, and 100 ms more once its offer is given up (the moments a descheduled sender
# leaves). poll must still say POLLIN, FIONREAD must count the bytes, a MSG_DONTWAIT recv must get
# them, all of them in order (sha256). Run three times: the send gives its offer up itself; another
# thread closes the socket while the send waits (the close gives it up; then EOF); another thread
# calls shutdown(SHUT_WR) while the send waits (the shutdown gives it up before its DISCONNECT:
# the send returns the count moved, the receiver gets exactly those bytes, then EOF). Before the
# move, one run in 50 of t_switch_sockapi under load gave FIONREAD 0 after POLLIN; here every round
# did (and every shutdown round lost the bytes: FIONREAD 0, EOF, the send EPIPE). Every byte the
# sends reported went over the SAN, read directly (a sender descheduled past the receiver's look
# leaves the offer to be claimed) or through the area as READ.
# timeout: 120
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

export SANSWITCH_STATS=1 SANSWITCH_FAULT=src_late
rounds=4

run() { # NAME [close|shutdown]
	local name=$1 rc=0 pid sent l dr rd
	shift
	(cd "$E2E_DIR" && as_t pre 40 "$PY" "$E2E_DIR/switch_dread_late.py" "$rounds" "$@") \
		>"$TMP/$name.out" 2>"$TMP/$name.err" || rc=$?
	no_preload_errors "$TMP/$name.err"
	[ "$rc" -eq 0 ] || { show "$TMP/$name.out" "$TMP/$name.err"; fail "$name: exited $rc"; }
	pid=$(sed -n 's/^# pid \([0-9][0-9]*\)$/\1/p' "$TMP/$name.out")
	[ -n "$pid" ] || { show "$TMP/$name.out"; fail "$name: no '# pid' line"; }
	sent=$(sed -n 's/^# sent \([0-9][0-9]*\)$/\1/p' "$TMP/$name.out")
	[ -n "$sent" ] || { show "$TMP/$name.out"; fail "$name: no '# sent' line"; }
	l=$(pid_line "$TMP/$name.err" "$pid") || exit 1
	dr=$(field "$l" direct_read_tx_bytes) || exit 1
	rd=$(field "$l" read_tx_bytes) || exit 1
	[ $((dr + rd)) -eq "$sent" ] ||
		fail "$name: expected direct_read_tx_bytes + read_tx_bytes = $sent (what the sends reported): $l"
	log "$name: $(grep -c '^round .*: ok' "$TMP/$name.out") of $rounds rounds: an offer given up after the wake-up stayed readable (POLLIN, FIONREAD, MSG_DONTWAIT), every byte sent in order ($dr read directly, $rd through the area)"
}

run send
run close close
run shutdown shutdown
