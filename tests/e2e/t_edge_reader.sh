#!/bin/bash
# t_edge_reader — the kernel is the oracle for what a SENDER sees when its reader goes away
# (edge_reader.py): the reader, having read 1000 bytes, is killed, _exits, or closes, while the
# sender keeps sending in blocking sends, or nonblocking sends waiting in poll or epoll; and a
# reply written twice to a client that has already closed (TCP takes the first, then EPIPE,
# with the poll flags in between). Each case runs over kernel TCP and with both processes
# preloaded (the sender's connection must have switched), and the lines must be the same.
# Before: a sender still holding its TCP number (it never read, so it never swapped) blocked
# forever when its reader was killed (nothing watched the peer for it), the reply's first
# write failed EPIPE, and a reset reported by a send that had moved bytes was lost (EPIPE).
# READER_CASES="reply" limits the cases (default "kill exit close reply"): at 1609c47 the first
# kill case hangs and ends the test before the reply case is reached.
# timeout: 300
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
# The paused switch-over (SANSWITCH_NOPAUSE=0): the sender, blocked in TCP sends its reader
# does not drain, commits without a pause only at a send that finds room, and the reader may be
# gone before (1 round in 3 under SANSWITCH_NOPAUSE=2 stayed TCP); its subject is a switched one.
export SANSWITCH_STATS=1 SANSWITCH_NOPAUSE=0
ROUNDS=${ROUNDS:-3}
bad=0

one() { # CASE WAIT MODE -> the result line (and its stats line checked)
	local out=$TMP/$1.$2.$3 pid l rc=0
	as_t "$3" 60 "$PY" "$E2E_DIR/edge_reader.py" "$1" "$2" >"$out.out" 2>"$out.err" || rc=$?
	[ "$rc" -eq 0 ] || { show "$out.out" "$out.err"; fail "$1 $2 ($3): exit status $rc (124: hung)"; }
	if [ "$3" = pre ]; then
		pid=$(sed -n 's/^# pid \([0-9]*\)$/\1/p' "$out.out")
		l=$(pid_line "$out.err" "$pid") || exit 1
		[ "$(field "$l" switched)" -eq 1 ] || fail "$1 $2: the sender's connection did not switch: $l"
	fi
	grep -v '^# pid' "$out.out"
}

for c in ${READER_CASES:-kill exit close reply}; do
	# (sendfile: not yet. A blocking sendfile() whose reader goes gets EPIPE over TCP, whose
	# small socket buffers make every call return short and lose the reset (the next call
	# says EPIPE); switched, the ring takes a whole call, the next one blocks from its start
	# and reports ECONNRESET. It waits for the buffer sizes to bound the ring: issue notes.)
	for w in block poll epoll; do
		[ "$c" = reply ] && [ "$w" != block ] && continue
		k=$(one "$c" "$w" none) || exit 1
		for r in $(seq "$ROUNDS"); do
			p=$(one "$c" "$w" pre) || exit 1
			if [ "$k" = "$p" ]; then
				log "ok   $c $w round $r: $p"
			else
				log "DIFF $c $w round $r: tcp: $k"
				log "                    switch: $p"
				bad=$((bad + 1))
			fi
		done
	done
done
[ "$bad" -eq 0 ] || fail "$bad cases differ from kernel TCP (above)"
