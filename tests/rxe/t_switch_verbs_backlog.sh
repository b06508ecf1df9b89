#!/bin/bash
# t_switch_verbs_backlog — a receiver behind by more transfers than READs may be out at once
# gets every one of them READ ahead, in order (docs/verbs.md §4, "Read ahead"). The client sends
# 36 writes of 24 KiB (READ transfers but for the first few, which may go before the
# peer's HELLO says it reads; 864 KiB, all in the sender's 1 MiB area at once) while the server
# sleeps 3 s after accepting; then the server reads them all. Every READ transfer after the
# first arrived behind an unread one and is queued to be READ ahead, even though the peer's
# WRITE_GRANT (its area's key) was not read out of rxr yet either: the server's
# verbs_ahead_rx_bytes covers all but the first (or two). A queue that held only the first 16
# left the rest to be READ one by one when reached (15 of 36 ahead); one that waited for the
# grant READ none ahead. Bytes checked by SHA-256, with read ahead auto and fixed at 2.
# timeout: 200
set -u
# shellcheck source=tests/rxe/switch_lib.sh
. "$(dirname -- "$0")/switch_lib.sh"
RL=$(dirname -- "$0")/relisten.py # (one round, the server asleep 3 s after its accept)
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3 # (not a wrapper: see t_switch_verbs_relisten)
count=36 size=$((24 << 10))
export SANSWITCH_BULK=read
for ra in auto 2; do
	export SANSWITCH_READ_AHEAD=$ra
	mkdir -p "$TMP/$ra"
	spawn "backlog.$ra.srv" pre "$PY" "$RL" server "$addr" "$TMP/$ra" 1 3
	srv=$SPAWN_PID
	for ((i = 0; i < 300; i++)); do
		[ -f "$TMP/$ra/ready.0" ] && break
		sleep 0.1
	done
	[ -f "$TMP/$ra/ready.0" ] || { show "$TMP/backlog.$ra.srv.err"; fail "$ra: the server did not listen"; }
	rc=0
	as_t pre 120 "$PY" "$RL" client "$addr" "$(cat "$TMP/$ra/ready.0")" $((count * size)) 41 "$size" \
		>"$TMP/backlog.$ra.cli.out" 2>"$TMP/backlog.$ra.cli.err" || rc=$?
	wait_pid "$srv" 30 || fail "$ra: the server did not end"
	[ "$rc" -eq 0 ] && grep -q '^relisten: client ok ' "$TMP/backlog.$ra.cli.out" || {
		show "$TMP/backlog.$ra.cli.out" "$TMP/backlog.$ra.cli.err" "$TMP/backlog.$ra.srv.err"
		fail "$ra: client exit $rc"
	}
	cl=$(stats_line "$TMP/backlog.$ra.cli.err") || exit 1
	sl=$(stats_line "$TMP/backlog.$ra.srv.err") || exit 1
	for l in "$cl" "$sl"; do
		[ "$(field "$l" switched_verbs)" -eq 1 ] || fail "$ra: not switched onto verbs: $l"
	done
	rd=$(field "$cl" read_tx_bytes) || exit 1
	# How many writes go before the peer's HELLO says it reads is timing: one or two on a quiet
	# guest, 5 once in a CI run of a loaded TCG guest. 24 is still more than a queue of 16
	# could take ahead (the bug this test is for), and the check below is relative to rd.
	[ "$rd" -ge $(((count - 12) * size)) ] || fail "$ra: fewer than $((count - 12)) writes went by READ: $cl"
	ahead=$(field "$sl" verbs_ahead_rx_bytes) || exit 1
	[ "$ahead" -ge $((rd - 3 * size)) ] ||
		fail "$ra: $((ahead / size)) of the $((rd / size)) READ transfers READ ahead (all but the first, or two, expected): $sl"
	unset SANSWITCH_READ_AHEAD
	log "read ahead $ra: $((rd / size)) READ transfers waiting, $((ahead / size)) READ ahead; digest as sent"
done
