#!/bin/bash
# t_switch_verbs_close — close() of a pure sender over verbs loses nothing: a sender that never
# reads writes (blocking: 4 MiB; nonblocking: 1000-byte sends until its outbound ring is full)
# and closes at once, while the receiver sleeps before it reads. The same when the sender's
# process ends without close() (_exit; shutdown then _exit; and _exit 4 s after the last send,
# when nothing is queued any more: before, only a connection with frames still queued at the
# exit said DISCONNECT): its kernel would close the socket with a FIN, and the exit says
# DISCONNECT for it (san_sock_exit_close), so the receiver gets EOF, not a reset (it raises on
# any error). The receiver must get every
# byte (count and sha256 equal to the sender's) and then EOF, with the connection switched onto
# verbs on both sides. (The TCP FIN must not overtake frames still queued for the SAN, and a
# DISCONNECT that found the ring full must still go once there is room.)
# timeout: 300
set -u
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/../e2e/lib.sh"
need_build
addr=${RXE_VM_ADDR:?RXE_VM_ADDR is not set: run through tests/rxe/run}
PYX=/usr/bin/python3 # not a wrapper script: its own process must be the one preloaded
PS=$(dirname -- "$0")/pure_sender.py
# a preloaded python3 that listens loads rdma-core first: seconds in the emulated guest, more
# than start_pf's 15 s on a busy host (r.fill did not write its port file, old and new harness)
PF_WAIT=60

export SANSWITCH_STATS=1 SANSWITCH_PROVIDER=verbs

for mode in block fill block.exit fill.shutexit idle.exit; do
	end=close
	[[ $mode == *.* ]] && end=${mode#*.}
	# a process's end waits for a late reader (60 s without progress at most, docs/verbs.md
	# "Exit"): read 5 s late there, past the 3 s the exit gave it before, which lost bytes
	# (idle.exit keeps 2 s: it is the case with nothing queued at the exit)
	delay=2
	case $mode in block.exit | fill.shutexit) delay=5 ;; esac
	start_pf "r.$mode" pre "$PYX" "$PS" recv "$addr" '{PORTFILE}' "$delay"
	as_t pre 60 "$PYX" "$PS" send "$addr" "$SERVER_PORT" "${mode%.*}" "$end" \
		>"$TMP/s.$mode.out" 2>"$TMP/s.$mode.err" ||
		{ show "$TMP/s.$mode.out" "$TMP/s.$mode.err"; fail "$mode: sender failed"; }
	wait_pid "$SERVER_PID" 60 ||
		{ show "$TMP/r.$mode.out" "$TMP/r.$mode.err"; fail "$mode: receiver failed or hung"; }
	# (the lines by the shell's own reading, not sed: see _now in tests/e2e/lib.sh)
	sent='' got=''
	lines_with "$TMP/s.$mode.out" 'pure_sender: send ' && sent=${LINES#pure_sender: send }
	lines_with "$TMP/r.$mode.out" 'pure_sender: recv ' && got=${LINES#pure_sender: recv }
	[ -n "$sent" ] && [ "$sent" = "$got" ] || {
		show "$TMP/s.$mode.out" "$TMP/s.$mode.err" "$TMP/r.$mode.out" "$TMP/r.$mode.err"
		fail "$mode: sent '$sent', received '$got'"
	}
	for f in "$TMP/s.$mode.err" "$TMP/r.$mode.err"; do
		l=$(stats_line "$f") || exit 1
		field_is "$l" switched_verbs
		[ "$FIELD" -eq 1 ] || fail "$mode: not switched onto verbs: $l"
	done
	log "$mode: sender ended at once, receiver read ${delay} s late: $got, then EOF, both ends on verbs"
done
