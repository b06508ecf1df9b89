#!/bin/bash
# t_switch_dread_late — a direct-read offer that woke the receiver and was not taken in time must
# not vanish from the receiver's view (docs/protocol.md, "Direct read on shm": the bytes are moved
# into the ring in the same step that takes the offer back). switch_dread_late.py makes a blocking
# 300 KiB send to a receiver asleep in poll, which then looks only 50 ms later; with
# SANSWITCH_FAULT=src_late the sender sleeps 100 ms between the move and the publication of the
# producer index, and 100 ms more once its offer is given up (the moments a descheduled sender
# leaves). poll must still say POLLIN, FIONREAD must count the bytes, a MSG_DONTWAIT recv must get
# them, all of them in order (sha256). Run twice: the send gives its offer up itself, and another
# thread closes the socket while the send waits (the close gives it up; then EOF). Before the
# move, one run in 50 of t_switch_sockapi under load gave FIONREAD 0 after POLLIN; here every round
# did. The bytes went through the area: none read directly, all of them as READ.
# timeout: 90
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

export SANSWITCH_STATS=1 SANSWITCH_FAULT=src_late
rounds=4

run() { # NAME [close]
	local name=$1 rc=0 pid l dr rd
	shift
	(cd "$E2E_DIR" && as_t pre 40 "$PY" "$E2E_DIR/switch_dread_late.py" "$rounds" "$@") \
		>"$TMP/$name.out" 2>"$TMP/$name.err" || rc=$?
	no_preload_errors "$TMP/$name.err"
	[ "$rc" -eq 0 ] || { show "$TMP/$name.out" "$TMP/$name.err"; fail "$name: exited $rc"; }
	pid=$(sed -n 's/^# pid \([0-9][0-9]*\)$/\1/p' "$TMP/$name.out")
	[ -n "$pid" ] || { show "$TMP/$name.out"; fail "$name: no '# pid' line"; }
	l=$(pid_line "$TMP/$name.err" "$pid") || exit 1
	dr=$(field "$l" direct_read_tx_bytes) || exit 1
	rd=$(field "$l" read_tx_bytes) || exit 1
	[ "$dr" -eq 0 ] && [ "$rd" -eq $((rounds * 300 * 1024)) ] ||
		fail "$name: expected direct_read_tx_bytes=0 read_tx_bytes=$((rounds * 300 * 1024)) (every offer given up): $l"
	log "$name: $(grep -c '^round .*: ok' "$TMP/$name.out") of $rounds rounds: an offer given up after the wake-up stayed readable (POLLIN, FIONREAD, MSG_DONTWAIT), every byte in order"
}

run send
run close close
