#!/bin/bash
# t_switch_dread_late — a direct-read offer that woke the receiver and was not taken in time must
# not vanish from the receiver's view (docs/protocol.md, "Direct read on shm": the bytes are moved
# into the ring in the same step that takes the offer back). switch_dread_late.py makes a blocking
# 300 KiB send to a receiver asleep in poll, which then looks only 50 ms later; with
# SANSWITCH_FAULT=src_late the sender sleeps 100 ms between the move and the publication of the
# producer index, and 100 ms more once its offer is given up (the moments a descheduled sender
# leaves). poll must still say POLLIN, FIONREAD must count the bytes (and not less than at the
# wake-up), a MSG_DONTWAIT recv must get them, all of them in order (sha256). Runs: the send gives
# its offer up itself; another thread closes the socket while the send waits (the close gives it
# up; then EOF); another thread calls shutdown(SHUT_WR) while the send waits (the shutdown gives
# it up before its DISCONNECT: the send returns the count moved, the receiver gets exactly those
# bytes, then EOF); an 8 MiB send (more than the area: the offer promises only what its move
# takes) and a send of 512 KiB + 1 (a region and a last byte), by READ, and the 8 MiB send again
# by COPY (reg_fail: the offer promises only what DATA frames fill of the ring). Before the move,
# one run in 50 of t_switch_sockapi under load gave FIONREAD 0 after POLLIN; here every round
# did (and every shutdown round lost the bytes; an 8 MiB offer's FIONREAD fell from 8 MiB to 2
# MiB). Every byte the sends reported went over the switch once; by READ, read directly (a
# sender descheduled past the receiver's look leaves the offer to be claimed) or through the
# area.
# timeout: 150
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

export SANSWITCH_STATS=1 SANSWITCH_FAULT=src_late
rounds=4

run() { # NAME [close|shutdown|big|odd]   (FAULTS: more faults, e.g. reg_fail: by COPY)
	local name=$1 mode=${2:-} rc=0 pid sent l dr rd tx how slack=0
	shift
	(cd "$E2E_DIR" && SANSWITCH_FAULT=src_late${FAULTS:+,$FAULTS} \
		as_t pre 60 "$PY" "$E2E_DIR/switch_dread_late.py" "$rounds" "$@") \
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
	tx=$(moved "$l" tx) || exit 1
	# (switched_pair's warm-up: one byte each way a round)
	[ "$tx" -eq $((sent + 2 * rounds)) ] ||
		fail "$name: expected $((sent + 2 * rounds)) bytes sent in all ($sent reported, $((2 * rounds)) to warm up): $l"
	if [ -n "${FAULTS:-}" ]; then
		[ "$rd" -eq 0 ] || fail "$name: expected read_tx_bytes=0 (by COPY): $l"
		how="by COPY, $dr read directly"
	else
		# odd: a move's last byte goes as DATA, one a round (unless the offer was claimed)
		[ "$mode" = odd ] && slack=$rounds
		[ $((dr + rd)) -le "$sent" ] && [ $((dr + rd)) -ge $((sent - slack)) ] ||
			fail "$name: expected direct_read_tx_bytes + read_tx_bytes in $((sent - slack))..$sent ($sent reported sent): $l"
		how="$dr read directly, $rd through the area"
	fi
	log "$name: $(grep -c '^round .*: ok' "$TMP/$name.out") of $rounds rounds: an offer given up after the wake-up stayed readable (POLLIN, FIONREAD, MSG_DONTWAIT), every byte sent in order ($how)"
}

run send
run close close
run shutdown shutdown
run big big
run odd odd
FAULTS=reg_fail run copy big
